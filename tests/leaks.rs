//! A long loop of ops, errors included, leaves the number of live device
//! buffers, executables and events where it started, in every mode: nothing
//! leaks across the PJRT boundary.

mod common;

use common::in_mode;
use eagertpu::internals::pjrt::live;
use eagertpu::{DType, Mode, Tensor};

/// One round of varied ops (valid and invalid); returns how many were called.
fn round(a: &Tensor, b: &Tensor, idx: &Tensor, bad_idx: &Tensor, mode: Mode) -> usize {
    let c = (a + b).unwrap();
    let d = (&c * 0.5).unwrap();
    let e = d.matmul(&b.t().unwrap()).unwrap();
    let f = e.sum(&[1], false).unwrap();
    let g = a.index_select(0, idx).unwrap();
    let h = g.softmax(-1).unwrap();
    let _ = (f, h);
    // Errors: at record time, and in the index check (debug mode at the op,
    // else at the next sync).
    assert!(
        a.add(&idx.to_dtype(DType::F32).unwrap().reshape(&[1, 2]).unwrap())
            .is_err()
    );
    assert!(a.reshape(&[7]).is_err());
    let bad = a.index_select(0, bad_idx);
    assert_eq!(bad.is_err(), mode == Mode::Debug);
    if mode != Mode::Debug {
        // Strict and fused mode check it on the device: the next sync fails
        // once, naming it, and the one after is clean.
        assert!(eagertpu::sync().is_err());
        eagertpu::sync().unwrap();
    }
    assert!(a.to_vec::<i32>().is_err());
    // Every fourth round reads a result (a host sync and a cut in fused mode).
    11
}

#[test]
fn ten_thousand_ops_leak_nothing_in_any_mode() {
    for mode in [Mode::Debug, Mode::Strict, Mode::Fused] {
        let _m = in_mode(mode);
        let a =
            Tensor::from_slice(&(0..12).map(|i| i as f32).collect::<Vec<_>>(), &[4, 3]).unwrap();
        let b = Tensor::ones(&[4, 3], DType::F32).unwrap();
        let idx = Tensor::from_slice(&[3i64, 0], &[2]).unwrap();
        let bad_idx = Tensor::from_slice(&[9i64], &[1]).unwrap();
        // Warm up with the loop's own pattern, so its programs are compiled
        // (fused chunks compile once seen twice, in the background).
        let run = |rounds: usize| {
            let mut ops = 0;
            for r in 1..=rounds {
                ops += round(&a, &b, &idx, &bad_idx, mode);
                if r % 4 == 0 {
                    assert_eq!(a.sum_all().unwrap().item::<f32>().unwrap(), 66.0);
                }
            }
            ops
        };
        run(16);
        eagertpu::wait_for_compiles().unwrap();
        run(8);
        eagertpu::sync().unwrap();
        let buffers = live::BUFFERS.get();
        // Executables the compile cache does not hold (a chunk that turns hot
        // late compiles one more program into the cache: not a leak).
        let outside_cache =
            || live::EXECUTABLES.get() - eagertpu::metrics().unwrap().cached_executables as i64;
        let executables = outside_cache();
        let events = live::EVENTS.get();
        // What the metrics report (without EAGERTPU_CHECK_HAZARDS's own).
        let reported = eagertpu::metrics().unwrap().live_buffers;
        let ops = run(912);
        assert!(ops >= 10_000);
        eagertpu::sync().unwrap();
        assert_eq!(
            live::BUFFERS.get(),
            buffers,
            "{mode}: device buffers leaked"
        );
        eagertpu::wait_for_compiles().unwrap();
        assert_eq!(outside_cache(), executables, "{mode}: executables leaked");
        assert_eq!(live::EVENTS.get(), events, "{mode}: events leaked");
        let m = eagertpu::metrics().unwrap();
        assert_eq!(m.live_buffers, reported);
        // The values are still right after all that.
        let s = (&a + &b).unwrap().sum_all().unwrap().item::<f32>().unwrap();
        assert_eq!(s, (0..12).sum::<i32>() as f32 + 12.0, "{mode}");
    }
}
