//! The environment a user sets: each case runs in a child process (this test
//! binary, re-run on one `child_*` test with the variables set), since the
//! runtime reads the environment once when it starts.

mod common;

use common::{child, is_child};
use eagertpu::{DType, Device, Tensor};

#[test]
fn child_check_nan() {
    if !is_child("child_check_nan") {
        return;
    }
    let x = Tensor::from_slice(&[-1.0f32], &[1]).unwrap();
    let e = x.sqrt().unwrap_err().to_string();
    assert!(e.contains("sqrt") && e.contains("NaN"), "{e}");
}

#[test]
fn eagertpu_check_nan_is_read_from_the_environment() {
    let (ok, out) = child("child_check_nan", &[("EAGERTPU_CHECK_NAN", "1")]);
    assert!(ok, "{out}");
}

#[test]
fn child_bad_setting() {
    if !is_child("child_bad_setting") {
        return;
    }
    let expected = std::env::var("EXPECTED").unwrap();
    for _ in 0..2 {
        let e = Tensor::zeros(&[2], DType::F32).unwrap_err().to_string();
        assert!(e.contains(&expected), "{e:?} should contain {expected:?}");
    }
    println!(
        "child saw: {}",
        Tensor::zeros(&[2], DType::F32).unwrap_err()
    );
}

#[test]
fn a_bad_setting_is_an_error_on_every_call_not_a_crash() {
    let cases = [
        (
            "EAGERTPU_MODE",
            "sideways",
            "EAGERTPU_MODE=sideways: expected debug, strict or fused",
        ),
        (
            "EAGERTPU_COLLECTIVE_TIMEOUT",
            "soon",
            "EAGERTPU_COLLECTIVE_TIMEOUT=soon: expected a positive integer",
        ),
        (
            "EAGERTPU_WINDOW",
            "0",
            "EAGERTPU_WINDOW=0: expected `ops` or `ops,params`",
        ),
        (
            "EAGERTPU_WINDOW",
            "64,x",
            "EAGERTPU_WINDOW=64,x: expected `ops` or `ops,params`",
        ),
        (
            "EAGERTPU_CACHE_MAX_BYTES",
            "lots",
            "EAGERTPU_CACHE_MAX_BYTES=lots: expected a positive integer",
        ),
        (
            "EAGERTPU_CACHE_READONLY",
            "2",
            "EAGERTPU_CACHE_READONLY=2: expected 0 or 1",
        ),
        (
            "EAGERTPU_DEVICE_COUNT",
            "zero",
            "EAGERTPU_DEVICE_COUNT=zero: expected a positive integer",
        ),
        (
            "EAGERTPU_CHECK_NAN",
            "maybe",
            "EAGERTPU_CHECK_NAN=maybe: expected 0 or 1",
        ),
        (
            "EAGERTPU_DETERMINISTIC",
            "yes",
            "EAGERTPU_DETERMINISTIC=yes: expected 0 or 1",
        ),
        (
            "EAGERTPU_PJRT_PLUGIN",
            "/no/such/plugin.so",
            "looked for it at\n  - /no/such/plugin.so",
        ),
    ];
    for (var, value, expected) in cases {
        let (ok, out) = child("child_bad_setting", &[(var, value), ("EXPECTED", expected)]);
        assert!(ok, "{var}={value}: {out}");
        assert!(out.contains("child saw:"), "{out}");
    }
}

#[test]
fn child_devices() {
    if !is_child("child_devices") {
        return;
    }
    assert_eq!(Device::count().unwrap(), 3);
    let d2 = Device::get(2).unwrap();
    let a = d2.tensor(&[1.0f32, 2.0], &[2]).unwrap();
    let b = (&a * 3.0).unwrap();
    assert_eq!(b.device(), d2);
    assert_eq!(b.to_vec::<f32>().unwrap(), vec![3.0, 6.0]);
    let on0 = Tensor::from_slice(&[1.0f32, 1.0], &[2]).unwrap();
    let e = (&on0 + &b).unwrap_err().to_string();
    assert!(e.contains("add") && e.contains("one device"), "{e}");
    let moved = b.to_device(&Device::get(0).unwrap()).unwrap();
    assert_eq!(
        (&on0 + &moved).unwrap().to_vec::<f32>().unwrap(),
        vec![4.0, 7.0]
    );
    let e = Device::get(3).unwrap_err().to_string();
    assert!(
        e.contains("device index 3") && e.contains("3 device(s)"),
        "{e}"
    );
}

#[test]
fn eagertpu_device_count_sets_the_cpu_device_count() {
    let (ok, out) = child("child_devices", &[("EAGERTPU_DEVICE_COUNT", "3")]);
    assert!(ok, "{out}");
}

#[test]
fn child_manifest() {
    if !is_child("child_manifest") {
        return;
    }
    let _ = Tensor::zeros(&[1], DType::F32).unwrap();
}

#[test]
fn the_run_manifest_is_logged_once_at_start() {
    let (ok, out) = child("child_manifest", &[("EAGERTPU_LOG", "info")]);
    assert!(ok, "{out}");
    assert_eq!(out.matches("EagerTPU run manifest").count(), 1, "{out}");
    for part in [
        "xla_cpu_pjrt.so",
        "PJRT C API        0.81",
        "StableHLO         1.",
        "mode              fused",
    ] {
        assert!(out.contains(part), "{part:?} missing from:\n{out}");
    }
}
