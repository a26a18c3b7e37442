//! Debug mode: each op is compiled once per type signature, executed and
//! awaited (the tests switch to it; the default mode is fused);
//! `EAGERTPU_CHECK_NAN` stops at the op that produced NaN/Inf.
//! The tests share process-wide state (counters, the NaN switch), so they run
//! one at a time.

mod common;

use common::*;
use eagertpu::{DType, Mode, Tensor};

/// Runs one test at a time, in debug mode.
fn serial() -> InMode {
    in_mode(Mode::Debug)
}

#[test]
fn the_default_mode_is_fused_and_the_guard_switches_it() {
    // The manifest records the mode the runtime started in.
    assert_eq!(eagertpu::manifest().unwrap().mode, Mode::Fused);
    {
        let _fused = in_mode(Mode::Fused);
        let inner = eagertpu::with_mode(Mode::Strict).unwrap();
        assert_eq!(eagertpu::mode().unwrap(), Mode::Strict);
        drop(inner);
        assert_eq!(eagertpu::mode().unwrap(), Mode::Fused);
    }
    let _g = serial();
    let m = eagertpu::manifest().unwrap();
    assert_eq!(m.mode, Mode::Fused);
    assert_eq!(m.platform_name, "cpu");
    assert_eq!(m.pjrt_api, "0.81");
    assert!(m.device_count >= 1);
    assert!(m.stablehlo_current.starts_with("1."), "{m:?}");
}

#[test]
fn an_op_with_the_same_types_compiles_once() {
    let _g = serial();
    let a = Host::random(DType::F32, &[16, 8], 1).tensor();
    let b = Host::random(DType::F32, &[16, 8], 2).tensor();
    let _ = a.atan2(&b).unwrap();
    let before = eagertpu::metrics().unwrap();
    for _ in 0..10 {
        let _ = a.atan2(&b).unwrap();
    }
    let after = eagertpu::metrics().unwrap();
    assert_eq!(
        after.compiles, before.compiles,
        "same op, same types: no compile"
    );
    assert_eq!(after.memory_hits - before.memory_hits, 10);
    assert_eq!(after.executions - before.executions, 10);
    // Other shapes or dtypes are other programs.
    let c = Host::random(DType::F32, &[4, 8], 3).tensor();
    let _ = c.atan2(&c).unwrap();
    let d = Host::random(DType::F64, &[16, 8], 4).tensor();
    let _ = d.atan2(&d).unwrap();
    let later = eagertpu::metrics().unwrap();
    // Compiled, or loaded from a warm on-disk cache.
    assert_eq!(
        later.misses + later.disk_hits - after.misses - after.disk_hits,
        2
    );
}

#[test]
fn a_scalar_operand_is_part_of_the_program() {
    let _g = serial();
    let a = Host::random(DType::F32, &[5], 5);
    let t = a.tensor();
    let x = (&t * 3.0).unwrap();
    let y = (&t * 3.0).unwrap();
    assert_close("a * 3", &x, &a.map(DType::F32, |v| 3.0 * v));
    assert_close("a * 3 again", &y, &a.map(DType::F32, |v| 3.0 * v));
}

#[test]
fn check_nan_stops_at_the_op_that_produced_it() {
    let _g = serial();
    eagertpu::set_check_nan(true).unwrap();
    let x = Tensor::from_slice(&[4.0f32, -1.0, 0.0], &[3]).unwrap();
    let ok = x.abs().unwrap();
    let line = line!() + 1;
    let e = err_text(x.sqrt());
    assert!(e.contains("sqrt(float32[3])"), "{e}");
    assert!(e.contains(&format!("tests/debug_mode.rs:{line}")), "{e}");
    assert!(e.contains("1 NaN and 0 infinite"), "{e}");
    let e = err_text(ok.log());
    assert!(
        e.contains("log(float32[3])") && e.contains("0 NaN and 1 infinite"),
        "{e}"
    );
    // An op that only passes along a NaN it was given did not produce it.
    eagertpu::set_check_nan(false).unwrap();
    let nan = x.sqrt().unwrap();
    eagertpu::set_check_nan(true).unwrap();
    assert!((&nan + 1.0).is_ok());
    eagertpu::set_check_nan(false).unwrap();
    let quiet = x.sqrt().unwrap().to_vec::<f32>().unwrap();
    assert!(quiet[1].is_nan() && quiet[0] == 2.0);
}

#[test]
fn metrics_count_transfers() {
    let _g = serial();
    let before = eagertpu::metrics().unwrap();
    let t = Tensor::from_slice(&[1.0f64; 10], &[10]).unwrap();
    let _ = t.to_vec::<f64>().unwrap();
    let after = eagertpu::metrics().unwrap();
    assert_eq!(after.transfers_to_device - before.transfers_to_device, 1);
    assert_eq!(after.bytes_to_device - before.bytes_to_device, 80);
    assert_eq!(after.transfers_to_host - before.transfers_to_host, 1);
    assert_eq!(after.bytes_to_host - before.bytes_to_host, 80);
    assert!(after.report().contains("compiles"));
}
