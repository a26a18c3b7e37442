//! Trace-guarded replay in fused mode: once a loop's chunk has run as a
//! compiled program, the next chunk of the same ops is bound to that program
//! without building or looking up a graph. A replayed chunk computes what
//! the full path computes; a chunk that differs from its plan where the graph
//! would (a tensor held elsewhere, one tensor passed for two, a compiled-in
//! constant) takes the full path. Counting tests run in child processes with
//! the on-disk cache off.

mod common;

use common::*;
use eagertpu::{DType, Mode, Tensor, metrics};

/// One update step of `w` (`w - lr * tanh(x * w + 0.5)`), five API calls.
fn step(w: &Tensor, x: &Tensor, lr: f64) -> Tensor {
    let g = (x * w).unwrap();
    let g = (&g + 0.5).unwrap().tanh().unwrap();
    let g = (&g * lr).unwrap();
    (w - &g).unwrap()
}

fn step_reference(w: &[f64], x: &[f64], lr: f64) -> Vec<f64> {
    let f = |v: f64| round(DType::F32, v);
    w.iter()
        .zip(x)
        .map(|(w, x)| {
            let g = f(f(f(x * w) + 0.5).tanh());
            f(w - f(g * f(lr)))
        })
        .collect()
}

fn assert_near(what: &str, got: &[f32], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (*g as f64 - w).abs() <= 2e-6 * w.abs().max(1.0),
            "{what}: element {i}: {g} vs {w}"
        );
    }
}

/// The learning rate of step `i`: a new value every step (a lifted scalar).
fn lr(i: usize) -> f64 {
    0.1 / (1.0 + i as f64)
}

#[test]
fn child_settled_loop() {
    if !is_child("child_settled_loop") {
        return;
    }
    let _m = in_mode(Mode::Fused);
    let mut t = Training::new(31, 32);
    let before = metrics().unwrap();
    for i in 0..12 {
        t.advance("settled loop");
        let got = t.w.to_vec::<f32>().unwrap();
        println!(
            "STEP {i} {:?}",
            got.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
    }
    let after = metrics().unwrap();
    println!(
        "REPLAY [{}, {}, {}, {}]",
        after.replayed_chunks - before.replayed_chunks,
        after.replayed_ops - before.replayed_ops,
        after.replay_misses - before.replay_misses,
        after.compiles - before.compiles
    );
}

/// The lines of `out` that start with `tag`.
fn lines<'a>(out: &'a str, tag: &str) -> Vec<&'a str> {
    out.lines().filter(|l| l.starts_with(tag)).collect()
}

fn counts(out: &str) -> Vec<u64> {
    let tag = "REPLAY [";
    let line = out
        .lines()
        .find_map(|l| l.find(tag).map(|at| &l[at + tag.len()..]))
        .unwrap_or_else(|| panic!("no {tag} in {out}"));
    line.trim_end_matches(']')
        .split(", ")
        .map(|n| n.parse().unwrap())
        .collect()
}

#[test]
fn a_settled_loop_replays_its_chunks_and_computes_what_the_full_path_computes() {
    let (ok, replayed) = child("child_settled_loop", &[]);
    assert!(ok, "{replayed}");
    let (ok, full) = child("child_settled_loop", &[("EAGERTPU_REPLAY", "0")]);
    assert!(ok, "{full}");
    // [replayed chunks, replayed ops, misses, compiles]: seen once (op by op),
    // hot and compiled at the second step, planned there; replayed from the
    // third step on, each of its ops recorded without inference.
    let [chunks, ops, misses, _] = counts(&replayed)[..] else {
        panic!("{replayed}")
    };
    assert_eq!((chunks, misses), (10, 0), "{replayed}");
    assert!(ops >= 10 * 5, "{replayed}");
    assert_eq!(counts(&full)[..3], [0, 0, 0], "{full}");
    // One program either way, and the same bits at every step.
    assert_eq!(counts(&replayed)[3], counts(&full)[3], "{replayed}\n{full}");
    assert_eq!(lines(&replayed, "STEP "), lines(&full, "STEP "));
}

/// A training loop of `step`: weights, their host reference, the step.
struct Training {
    x: Host,
    xt: Tensor,
    w: Tensor,
    want: Vec<f64>,
    i: usize,
}

impl Training {
    /// Random `x` and initial weights (of seeds `x_seed`, `w_seed`).
    fn new(x_seed: u64, w_seed: u64) -> Training {
        let x = Host::random(DType::F32, &[4, 8], x_seed);
        let w0 = Host::random(DType::F32, &[4, 8], w_seed);
        Training {
            xt: x.tensor(),
            x,
            w: w0.tensor(),
            want: w0.data,
            i: 0,
        }
    }

    /// One step, checked against the host reference.
    fn advance(&mut self, what: &str) {
        self.w = step(&self.w, &self.xt, lr(self.i));
        self.want = step_reference(&self.want, &self.x.data, lr(self.i));
        let got = self.w.to_vec::<f32>().unwrap();
        assert_near(&format!("{what} (step {})", self.i), &got, &self.want);
        self.i += 1;
    }

    fn weights(&self) -> Vec<f64> {
        self.w
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|v| *v as f64)
            .collect()
    }
}

#[test]
fn child_departures() {
    if !is_child("child_departures") {
        return;
    }
    let _m = in_mode(Mode::Fused);
    let mut t = Training::new(41, 42);
    for _ in 0..4 {
        t.advance("settling");
    }
    let settled = metrics().unwrap();
    assert!(settled.replayed_chunks >= 1, "{settled:?}");

    // The old weights held: the plan donated them, this step must not.
    let held = t.w.clone();
    let held_values = t.want.clone();
    t.advance("old weights held");
    assert_near(
        "the held weights",
        &held.to_vec::<f32>().unwrap(),
        &held_values,
    );
    drop(held);

    // One tensor for both operands: the plan had two parameters.
    let s = t.weights();
    let same = Tensor::from_slice(&t.w.to_vec::<f32>().unwrap(), &[4, 8]).unwrap();
    let twice = step(&same, &same, lr(t.i));
    assert_near(
        "one tensor for w and x",
        &twice.to_vec::<f32>().unwrap(),
        &step_reference(&s, &s, lr(t.i)),
    );

    // An intermediate result held (exported, where the plan dropped it).
    let g = (&t.xt * &t.w).unwrap();
    let update = (&(&g + 0.5).unwrap().tanh().unwrap() * lr(t.i)).unwrap();
    let next = (&t.w - &update).unwrap();
    let g_want: Vec<f64> = t
        .want
        .iter()
        .zip(&t.x.data)
        .map(|(w, x)| round(DType::F32, x * w))
        .collect();
    t.want = step_reference(&t.want, &t.x.data, lr(t.i));
    t.i += 1;
    t.w = next;
    assert_near("the new weights", &t.w.to_vec::<f32>().unwrap(), &t.want);
    assert_near("the held product", &g.to_vec::<f32>().unwrap(), &g_want);

    // Settled again, then a compiled-in constant: 1 instead of 0.5.
    for _ in 0..3 {
        t.advance("settling again");
    }
    let product = (&t.xt * &t.w).unwrap();
    let one = (&(&product + 1.0).unwrap().tanh().unwrap() * lr(t.i)).unwrap();
    let f = |v: f64| round(DType::F32, v);
    let one_want: Vec<f64> = t
        .want
        .iter()
        .zip(&t.x.data)
        .map(|(w, x)| f(f(f(x * w) + 1.0).tanh() * f(lr(t.i))))
        .collect();
    assert_near(
        "a constant changed",
        &one.to_vec::<f32>().unwrap(),
        &one_want,
    );
    for _ in 0..3 {
        t.advance("after the departures");
    }
    let after = metrics().unwrap();
    println!(
        "REPLAY [{}, {}, {}, {}]",
        after.replayed_chunks - settled.replayed_chunks,
        after.replayed_ops - settled.replayed_ops,
        after.replay_misses - settled.replay_misses,
        after.donated_buffers - settled.donated_buffers
    );
}

#[test]
fn a_chunk_that_departs_from_its_plan_takes_the_full_path_and_computes_the_same() {
    let (ok, out) = child("child_departures", &[]);
    assert!(ok, "{out}");
    let [chunks, _, misses, _] = counts(&out)[..] else {
        panic!("{out}")
    };
    // The held weights and the held product match the plan op for op but
    // not in what the chunk binds: misses. The steps after them replay.
    assert!(misses >= 2, "{out}");
    assert!(chunks >= 4, "{out}");
}

#[test]
fn replay_is_a_setting() {
    let (ok, out) = child("child_settled_loop", &[("EAGERTPU_REPLAY", "maybe")]);
    assert!(!ok);
    assert!(out.contains("EAGERTPU_REPLAY=maybe"), "{out}");
}
