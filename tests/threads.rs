//! Threads recording on one device: each has a trace (and a window) of its
//! own, so two loops running at once each settle on their own chunks; a value
//! one thread left pending is computed before another thread's op reads it.
//! The counting tests run in child processes (the counters are global).

mod common;

use std::sync::{Arc, Barrier};
use std::thread;

use common::*;
use eagertpu::{DType, Mode, metrics};

/// `steps` iterations of a small elementwise loop on `x`, the sum read at the
/// end of each, and the host reference of each sum.
fn elementwise_loop(x: &Host, scale: f64, steps: usize) -> eagertpu::Result<(Vec<f32>, Vec<f64>)> {
    let t = x.tensor();
    let mut got = vec![];
    let mut want = vec![];
    let mut y = t.clone();
    let mut y_host: Vec<f64> = x.data.clone();
    for _ in 0..steps {
        y = (&(&y * scale)?.tanh()? + &t)?;
        got.push(y.sum_all()?.to_vec::<f32>()?[0]);
        y_host = host_step(&y_host, &x.data, scale);
        want.push(y_host.iter().sum());
    }
    Ok((got, want))
}

/// One step of those loops on the host, rounded to float32 as the device
/// computes it: `tanh(y * scale) + x`.
fn host_step(y: &[f64], x: &[f64], scale: f64) -> Vec<f64> {
    y.iter()
        .zip(x)
        .map(|(v, x0)| {
            let scaled = round(DType::F32, v * scale);
            round(DType::F32, round(DType::F32, scaled.tanh()) + x0)
        })
        .collect()
}

fn assert_close(what: &str, got: &[f32], want: &[f64]) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (*g as f64 - w).abs() <= 1e-4 * w.abs().max(1.0),
            "{what}: iteration {i}: got {g}, want {w}"
        );
    }
}

#[test]
fn a_value_another_thread_left_pending_is_computed_before_it_is_read() {
    if !body_runs_here(
        "a_value_another_thread_left_pending_is_computed_before_it_is_read",
        &[("EAGERTPU_MODE", "fused")],
    ) {
        return;
    }
    let _fused = in_mode(Mode::Fused);
    let x = Host::random(DType::F32, &[64], 3);
    let pending = (&(&x.tensor() * 2.0).unwrap() + 1.0).unwrap();
    let before = metrics().unwrap().chunks_cut("cross_thread");
    // Another thread's op reads it (its own trace): the first trace is cut.
    let tripled = thread::spawn(move || {
        let z = (&pending * 3.0).unwrap();
        let w = (&z - &pending).unwrap();
        w.to_vec::<f32>().unwrap()
    })
    .join()
    .unwrap();
    for (g, x0) in tripled.iter().zip(&x.data) {
        let p = round(DType::F32, round(DType::F32, x0 * 2.0) + 1.0);
        let want = round(DType::F32, round(DType::F32, p * 3.0) - p);
        assert_eq!(*g as f64, want);
    }
    assert_eq!(metrics().unwrap().chunks_cut("cross_thread") - before, 1);
    eagertpu::shutdown().unwrap();
}

#[test]
fn two_loops_running_at_once_each_settle_on_their_own_chunks() {
    if !body_runs_here(
        "two_loops_running_at_once_each_settle_on_their_own_chunks",
        &[("EAGERTPU_MODE", "fused")],
    ) {
        return;
    }
    let _fused = in_mode(Mode::Fused);
    const WARMUP: usize = 12;
    const STEPS: usize = 30;
    // Both threads meet after their warm-up and at the end, so the keys
    // counted between are the steady state's, with both loops interleaving.
    let barrier = Arc::new(Barrier::new(3));
    let workers: Vec<_> = [(0.5, 1), (0.25, 2)]
        .into_iter()
        .map(|(scale, seed)| {
            let barrier = barrier.clone();
            thread::spawn(move || {
                let x = Host::random(DType::F32, &[32, 8], seed);
                // Checked after the last meeting: a thread that failed
                // must not leave the others waiting.
                let warm = elementwise_loop(&x, scale, WARMUP);
                let compiled = eagertpu::wait_for_compiles();
                barrier.wait();
                let steady = elementwise_loop(&x, scale, STEPS);
                barrier.wait();
                let (warm, steady) = (warm.unwrap(), steady.unwrap());
                compiled.unwrap();
                assert_close("warm-up", &warm.0, &warm.1);
                assert_close("steady", &steady.0, &steady.1);
            })
        })
        .collect();
    barrier.wait();
    let steady = metrics().unwrap();
    barrier.wait();
    let end = metrics().unwrap();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(
        end.chunk_keys - steady.chunk_keys,
        0,
        "new fused chunks after both loops settled: {end:?}"
    );
    assert_eq!(end.compiles - steady.compiles, 0, "{end:?}");
    eagertpu::shutdown().unwrap();
}

/// A thread hands each value of its loop to another thread as soon as it is
/// recorded, then reads it (its chunk cut, bound, and run once the stream's
/// lock is released). The other thread's ops find the value pending, in
/// flight or ready, whichever the race gives, and compute with it; every
/// result is checked against the host.
fn values_handed_over_while_launching(mode: Mode) {
    let _mode = in_mode(mode);
    const STEPS: usize = 1000;
    let x = Host::random(DType::F32, &[256], 5);
    let (send, receive) = std::sync::mpsc::channel::<eagertpu::Tensor>();
    let consumer = thread::spawn(move || -> eagertpu::Result<Vec<f32>> {
        let mut sums = vec![];
        for y in receive {
            let z = (&(&y * 2.0)? - 1.0)?;
            sums.push(z.sum_all()?.to_vec::<f32>()?[0]);
        }
        Ok(sums)
    });
    let t = x.tensor();
    let mut y = t.clone();
    let mut produced = vec![];
    for _ in 0..STEPS {
        y = (&(&y * 0.5).unwrap().tanh().unwrap() + &t).unwrap();
        send.send(y.clone()).unwrap();
        produced.push(y.to_vec::<f32>().unwrap());
    }
    drop(send);
    let sums = consumer.join().unwrap().unwrap();
    assert_eq!(sums.len(), STEPS);
    let mut y_host: Vec<f64> = x.data.clone();
    for (step, (got_y, got_sum)) in produced.iter().zip(&sums).enumerate() {
        y_host = host_step(&y_host, &x.data, 0.5);
        for (g, w) in got_y.iter().zip(&y_host) {
            assert!(
                (*g as f64 - w).abs() <= 1e-5 * w.abs().max(1.0),
                "step {step}: y {g} vs {w}"
            );
        }
        // The consumer's sum, from the producer's own values.
        let want: f64 = got_y
            .iter()
            .map(|v| round(DType::F32, *v as f64 * 2.0) - 1.0)
            .sum();
        assert!(
            (*got_sum as f64 - want).abs() <= 1e-4 * want.abs().max(1.0),
            "step {step}: consumer's sum {got_sum} vs {want}"
        );
    }
}

#[test]
fn values_handed_to_another_thread_while_launching_are_read_right_in_fused_mode() {
    values_handed_over_while_launching(Mode::Fused);
}

#[test]
fn values_handed_to_another_thread_while_launching_are_read_right_in_strict_mode() {
    values_handed_over_while_launching(Mode::Strict);
}

/// A loop with no host read is cut by its period; those chunks are handed to
/// the stream's launcher thread, and give the host's values (read at the
/// end, from values the launcher made ready).
#[test]
fn chunks_the_window_cuts_run_on_the_launcher_thread() {
    if !body_runs_here(
        "chunks_the_window_cuts_run_on_the_launcher_thread",
        &[("EAGERTPU_MODE", "fused")],
    ) {
        return;
    }
    let _fused = in_mode(Mode::Fused);
    const STEPS: usize = 3000;
    let x = Host::random(DType::F32, &[64], 9);
    let t = x.tensor();
    let step = |y: &eagertpu::Tensor| (&(y * 0.5).unwrap().tanh().unwrap() + &t).unwrap();
    // Warm-up: the period's chunks become hot and compile (until then they
    // run op by op, on this thread).
    let mut y = t.clone();
    for _ in 0..STEPS {
        y = step(&y);
    }
    eagertpu::wait_for_compiles().unwrap();
    let before = metrics().unwrap();
    let mut kept = vec![];
    for i in 0..STEPS {
        y = step(&y);
        if i % 500 == 499 {
            kept.push(y.clone());
        }
    }
    let mut y_host: Vec<f64> = x.data.clone();
    let mut want = vec![];
    for i in 0..2 * STEPS {
        y_host = host_step(&y_host, &x.data, 0.5);
        if i >= STEPS && (i - STEPS) % 500 == 499 {
            want.push(y_host.clone());
        }
    }
    assert_eq!(kept.len(), want.len());
    for (k, (got, want)) in kept.iter().zip(&want).enumerate() {
        let got = got.to_vec::<f32>().unwrap();
        for (g, w) in got.iter().zip(want) {
            assert!(
                (*g as f64 - w).abs() <= 1e-5 * w.abs().max(1.0),
                "kept {k}: {g} vs {w}"
            );
        }
    }
    let after = metrics().unwrap();
    assert!(
        after.launcher_chunks > before.launcher_chunks,
        "no chunk went to the launcher thread: {after:?}"
    );
    assert!(
        after.chunks_cut("period") > before.chunks_cut("period"),
        "{after:?}"
    );
    eagertpu::shutdown().unwrap();
}

/// `steps` iterations of the elementwise loop with a steady 10 us of host
/// work each (a training step's Python, say), after as many to warm up;
/// checks the last value, and returns the metrics around the second half.
/// The window cuts the loop's 3-op period every few hundred ops: a chunk
/// every few milliseconds, at a steady pace.
fn steady_loop(steps: usize) -> (eagertpu::Metrics, eagertpu::Metrics) {
    let x = Host::random(DType::F32, &[64], 11);
    let t = x.tensor();
    let step = |y: &eagertpu::Tensor| {
        let spin = std::time::Instant::now();
        while spin.elapsed() < std::time::Duration::from_micros(10) {
            std::hint::spin_loop();
        }
        (&(y * 0.5).unwrap().tanh().unwrap() + &t).unwrap()
    };
    let mut y = t.clone();
    for _ in 0..steps {
        y = step(&y);
    }
    eagertpu::wait_for_compiles().unwrap();
    let before = metrics().unwrap();
    for _ in 0..steps {
        y = step(&y);
    }
    let got = y.to_vec::<f32>().unwrap();
    let after = metrics().unwrap();
    let mut want: Vec<f64> = x.data.clone();
    for _ in 0..2 * steps {
        want = host_step(&want, &x.data, 0.5);
    }
    assert_close("the loop's last value", &got, &want);
    (before, after)
}

/// At the steady pace of a loop's period cuts, the launcher polls for
/// chunks (`launcher.rs`; how many it catches depends on the host's load,
/// which other tests here add to); the values are the host's.
#[test]
fn a_steady_loop_is_right_with_the_launcher_polling() {
    if !body_runs_here(
        "a_steady_loop_is_right_with_the_launcher_polling",
        &[("EAGERTPU_MODE", "fused")],
    ) {
        return;
    }
    let (before, after) = steady_loop(6000);
    let handed = after.launcher_chunks - before.launcher_chunks;
    let paced = after.launcher_paced - before.launcher_paced;
    assert!(
        handed >= 20 && paced <= handed,
        "{paced} of {handed}: {after:?}"
    );
    eagertpu::shutdown().unwrap();
}

/// `EAGERTPU_WAIT_SPIN_US=0`: nothing polls, the launcher neither.
#[test]
fn with_no_wait_spin_the_launcher_never_polls() {
    if !body_runs_here(
        "with_no_wait_spin_the_launcher_never_polls",
        &[("EAGERTPU_MODE", "fused"), ("EAGERTPU_WAIT_SPIN_US", "0")],
    ) {
        return;
    }
    let (before, after) = steady_loop(6000);
    assert!(
        after.launcher_chunks - before.launcher_chunks >= 20,
        "{after:?}"
    );
    assert_eq!(after.launcher_paced, before.launcher_paced);
    eagertpu::shutdown().unwrap();
}
