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
            "EAGERTPU_WAIT_SPIN_US",
            "-5",
            "EAGERTPU_WAIT_SPIN_US=-5: expected a positive integer",
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
            "EAGERTPU_CPU_HEAP",
            "jemalloc",
            "EAGERTPU_CPU_HEAP=jemalloc: expected cache or system",
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
fn child_host_waits() {
    if !is_child("child_host_waits") {
        return;
    }
    // A matmul of this size runs on the plugin's thread pool, not inline, so
    // every read below waits for an unfinished execution: with no polling, by
    // polling until it ends, or by polling past the budget and then blocking.
    let n = 192usize;
    let a_host: Vec<f32> = (0..n * n)
        .map(|i| ((i * 7 % 13) as f32 - 6.0) / 8.0)
        .collect();
    let b_host: Vec<f32> = (0..n * n)
        .map(|i| ((i * 5 % 11) as f32 - 5.0) / 4.0)
        .collect();
    let mut expected = vec![0.0f32; n * n];
    for i in 0..n {
        for k in 0..n {
            let aik = a_host[i * n + k];
            for j in 0..n {
                expected[i * n + j] += aik * b_host[k * n + j];
            }
        }
    }
    let shape = [n as i64, n as i64];
    let a = Tensor::from_slice(&a_host, &shape).unwrap();
    let b = Tensor::from_slice(&b_host, &shape).unwrap();
    for _ in 0..20 {
        let got = a.matmul(&b).unwrap().to_vec::<f32>().unwrap();
        for (g, e) in got.iter().zip(&expected) {
            assert!((g - e).abs() <= 1e-3 * e.abs().max(1.0), "{g} vs {e}");
        }
        // A small read right after: a program that ends within the budget.
        let total = a.sum(&[0, 1], false).unwrap().to_vec::<f32>().unwrap()[0];
        let host_total: f32 = a_host.iter().sum();
        assert!((total - host_total).abs() < 1e-2, "{total} vs {host_total}");
    }
    println!("host waits ok");
}

#[test]
fn every_wait_spin_budget_reads_the_same_values() {
    // 0: block at once; 1 us: the budget runs out before the matmul ends,
    // then the wait blocks; 100 ms: every execution ends while polling.
    for spin in ["0", "1", "100000"] {
        for mode in ["strict", "fused"] {
            let (ok, out) = child(
                "child_host_waits",
                &[("EAGERTPU_WAIT_SPIN_US", spin), ("EAGERTPU_MODE", mode)],
            );
            assert!(
                ok && out.contains("host waits ok"),
                "spin {spin} us, {mode}: {out}"
            );
        }
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
        "host heap         freed memory kept for reuse (EAGERTPU_CPU_HEAP=cache)",
    ] {
        assert!(out.contains(part), "{part:?} missing from:\n{out}");
    }
}

#[test]
fn child_cpu_heap() {
    if !is_child("child_cpu_heap") {
        return;
    }
    use eagertpu::internals::pjrt::heap;
    let expected = std::env::var("EXPECTED").unwrap();
    let x = Tensor::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    assert_eq!((&x * 2.0).unwrap().to_vec::<f32>().unwrap(), vec![2.0, 4.0]);
    assert_eq!(eagertpu::manifest().unwrap().cpu_heap, expected);
    // A block of 4 MiB (a layer's weights), written and freed: kept in the
    // heap for the next allocation when cached; given back to the kernel
    // (its own mapping, or a trimmed heap top) when not.
    let block = std::hint::black_box(vec![7u8; 4 << 20]);
    assert_eq!(block[(4 << 20) - 1], 7);
    let in_use = heap::free_bytes().unwrap();
    drop(block);
    let kept = heap::free_bytes().unwrap().saturating_sub(in_use);
    println!("kept {kept} bytes");
    match expected.as_str() {
        "cached" => assert!(kept >= 4 << 20, "kept {kept} bytes"),
        _ => assert!(kept < 4 << 20, "kept {kept} bytes"),
    }
}

#[test]
fn the_cpu_plugin_keeps_freed_heap_memory_for_reuse_unless_told_not_to() {
    for (setting, expected) in [(None, "cached"), (Some("system"), "system")] {
        let mut env = vec![("EXPECTED", expected)];
        env.extend(setting.map(|s| ("EAGERTPU_CPU_HEAP", s)));
        let (ok, out) = child("child_cpu_heap", &env);
        assert!(ok, "EAGERTPU_CPU_HEAP={setting:?}: {out}");
    }
}
