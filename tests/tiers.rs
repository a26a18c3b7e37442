//! Tiered execution in fused mode: a chunk whose program is not ready runs
//! as its ops one by one; a chunk seen once is never compiled; a hot chunk
//! compiles in the background and is then used. Values are the same in every
//! tier and mode. The counting tests run in child processes with the on-disk
//! cache off, so that no earlier run's programs are found.

mod common;

use common::*;
use eagertpu::{DType, Metrics, Mode, Tensor, metrics};
use std::time::Duration;

/// A chunk of `4 * steps` ops (a residual MLP-like update), read at the end,
/// and its host reference.
fn chunk(x: &Host, w: &Tensor, steps: usize) -> Vec<f32> {
    let mut y = x.tensor();
    for _ in 0..steps {
        y = (&y + &(&y.matmul(w).unwrap().tanh().unwrap() * 0.25).unwrap()).unwrap();
    }
    y.to_vec::<f32>().unwrap()
}

fn chunk_reference(x: &Host, w: &Host, steps: usize) -> Vec<f64> {
    let (n, k) = (x.shape[0] as usize, x.shape[1] as usize);
    let mut y = x.data.clone();
    for _ in 0..steps {
        let mut next = y.clone();
        for r in 0..n {
            for c in 0..k {
                let dot: f64 = (0..k).map(|i| y[r * k + i] * w.data[i * k + c]).sum();
                next[r * k + c] = y[r * k + c] + round(DType::F32, dot.tanh()) * 0.25;
            }
        }
        y = next.iter().map(|v| round(DType::F32, *v)).collect();
    }
    y
}

fn assert_matches(what: &str, got: &[f32], want: &[f64]) {
    for (g, w) in got.iter().zip(want) {
        assert!(
            (*g as f64 - w).abs() <= 1e-4 * w.abs().max(1.0),
            "{what}: {g} vs {w}"
        );
    }
}

/// A child with the background compile pool (children default to none).
const POOL: &[(&str, &str)] = &[("EAGERTPU_COMPILE_THREADS", "1")];

fn delta(after: &Metrics, before: &Metrics) -> [u64; 5] {
    [
        after.chunks_op_by_op - before.chunks_op_by_op,
        after.background_compiles - before.background_compiles,
        after.promotions - before.promotions,
        after.chunk_keys - before.chunk_keys,
        after.executions - before.executions,
    ]
}

#[test]
fn every_tier_and_mode_computes_the_same_values() {
    let x = Host::random(DType::F32, &[6, 8], 11);
    let w = Host::random(DType::F32, &[8, 8], 12);
    let want = chunk_reference(&x, &w, 5);
    let wt = w.tensor();
    for mode in MODES {
        let _m = in_mode(mode);
        // Seen once (op by op), twice (compiling), then as one program.
        for run in 0..4 {
            assert_matches(&format!("{mode} run {run}"), &chunk(&x, &wt, 5), &want);
            if run == 1 {
                eagertpu::wait_for_compiles().unwrap();
            }
        }
    }
}

#[test]
fn child_tiers() {
    if !is_child("child_tiers") {
        return;
    }
    let _m = in_mode(Mode::Fused);
    let x = Host::random(DType::F32, &[6, 8], 21);
    let w = Host::random(DType::F32, &[8, 8], 22);
    let want = chunk_reference(&x, &w, 3);
    let wt = w.tensor();
    eagertpu::sync().unwrap();
    let run = || {
        let before = metrics().unwrap();
        let got = chunk(&x, &wt, 3);
        assert_matches("chunk", &got, &want);
        delta(&metrics().unwrap(), &before)
    };
    // [op by op, background compiles, promotions, new keys, executions]
    println!("FIRST {:?}", run());
    println!("SECOND {:?}", run());
    eagertpu::wait_for_compiles().unwrap();
    println!("THIRD {:?}", run());
    println!("FOURTH {:?}", run());
    println!("COMPILES {}", metrics().unwrap().compiles);
    eagertpu::wait_for_compiles().unwrap();
}

fn counts(out: &str, tag: &str) -> Vec<u64> {
    let tag = format!("{tag} [");
    let line = out
        .lines()
        .find_map(|l| l.find(&tag).map(|at| &l[at + tag.len()..]))
        .unwrap_or_else(|| panic!("no {tag} in {out}"));
    line.trim_end_matches(']')
        .split(", ")
        .map(|n| n.parse().unwrap())
        .collect()
}

#[test]
fn a_chunk_seen_once_runs_op_by_op_and_a_hot_one_compiles_in_the_background() {
    let (ok, out) = child("child_tiers", POOL);
    assert!(ok, "{out}");
    // Seen once: its 12 API calls run one by one (as strict mode runs them),
    // and nothing is compiled for the chunk.
    assert_eq!(counts(&out, "FIRST"), [1, 0, 0, 1, 12], "{out}");
    // Seen twice: hot, queued; it runs op by op while it compiles.
    assert_eq!(counts(&out, "SECOND")[..4], [1, 0, 0, 0], "{out}");
    // Ready: used at once, counted as a promotion; then it simply runs.
    assert_eq!(counts(&out, "THIRD"), [0, 0, 1, 0, 1], "{out}");
    assert_eq!(counts(&out, "FOURTH"), [0, 0, 0, 0, 1], "{out}");
}

#[test]
fn deterministic_a_hot_chunk_is_compiled_at_once_and_used_from_its_hot_sighting() {
    // EAGERTPU_DETERMINISTIC=1 (PyTorch's use_deterministic_algorithms):
    // the promotion point depends on the op stream alone, not on when a
    // background compile finishes: the second sighting is one program.
    let (ok, out) = child(
        "child_tiers",
        &[
            ("EAGERTPU_DETERMINISTIC", "1"),
            ("EAGERTPU_COMPILE_THREADS", "1"),
        ],
    );
    assert!(ok, "{out}");
    assert_eq!(counts(&out, "FIRST"), [1, 0, 0, 1, 12], "{out}");
    assert_eq!(counts(&out, "SECOND"), [0, 0, 0, 0, 1], "{out}");
    assert_eq!(counts(&out, "THIRD"), [0, 0, 0, 0, 1], "{out}");
}

#[test]
fn the_threshold_and_the_compile_threads_are_settings() {
    // Compiled at first sight, on the recording thread: the first run is
    // already one program.
    let (ok, out) = child(
        "child_tiers",
        &[
            ("EAGERTPU_HOT_THRESHOLD", "1"),
            ("EAGERTPU_COMPILE_THREADS", "0"),
        ],
    );
    assert!(ok, "{out}");
    assert_eq!(counts(&out, "FIRST"), [0, 0, 0, 1, 1], "{out}");
    // A threshold of 3: the second run is still op by op and queues nothing.
    let (ok, out) = child(
        "child_tiers",
        &[
            ("EAGERTPU_HOT_THRESHOLD", "3"),
            ("EAGERTPU_COMPILE_THREADS", "1"),
        ],
    );
    assert!(ok, "{out}");
    assert_eq!(counts(&out, "SECOND")[..2], [1, 0], "{out}");
    assert_eq!(counts(&out, "THIRD")[..3], [1, 0, 0], "{out}");
    // Bad settings are errors naming the variable.
    let (ok, out) = child("child_tiers", &[("EAGERTPU_HOT_THRESHOLD", "0")]);
    assert!(!ok && out.contains("EAGERTPU_HOT_THRESHOLD"), "{out}");
    let (ok, out) = child("child_tiers", &[("EAGERTPU_COMPILE_THREADS", "x")]);
    assert!(!ok && out.contains("EAGERTPU_COMPILE_THREADS"), "{out}");
}

#[test]
fn child_never_repeating() {
    if !is_child("child_never_repeating") {
        return;
    }
    let _m = in_mode(Mode::Fused);
    // Every iteration a new shape: no chunk ever repeats.
    let mut total = 0.0f64;
    for i in 0..12i64 {
        let x = Tensor::full(&[3, 5 + i], 0.5, DType::F32).unwrap();
        let y = (&x.exp().unwrap() * 2.0).unwrap().sum_all().unwrap();
        total += y.item::<f32>().unwrap() as f64;
    }
    let want: f64 = (0..12)
        .map(|i| 3.0 * (5 + i) as f64 * 2.0 * 0.5f64.exp())
        .sum();
    assert!((total - want).abs() < 1e-3 * want, "{total} vs {want}");
    eagertpu::wait_for_compiles().unwrap();
    let m = metrics().unwrap();
    println!(
        "KEYS {} SPLIT {} BACKGROUND {} DRIFTING {}",
        m.chunk_keys, m.chunks_split, m.background_compiles, m.drifting_calls
    );
    // Then the shape stops changing: the loop fuses again.
    for step in 0..8 {
        let before = metrics().unwrap();
        let x = Tensor::full(&[3, 40], 0.5, DType::F32).unwrap();
        let y = (&x.exp().unwrap() * 2.0).unwrap().sum_all().unwrap();
        let got = y.item::<f32>().unwrap() as f64;
        let want = 3.0 * 40.0 * 2.0 * 0.5f64.exp();
        assert!((got - want).abs() < 1e-4 * want, "{got} vs {want}");
        if step == 5 {
            eagertpu::wait_for_compiles().unwrap();
        }
        let after = metrics().unwrap();
        println!(
            "FIXED{step} drifting {} background {} promotions {} split {}",
            after.drifting_calls - before.drifting_calls,
            after.background_compiles - before.background_compiles,
            after.promotions - before.promotions,
            after.chunks_split - before.chunks_split,
        );
    }
}

#[test]
fn chunks_that_never_repeat_never_compile_a_program_of_their_own() {
    let (ok, out) = child("child_never_repeating", POOL);
    assert!(ok, "{out}");
    // The first iteration is a chunk of its own; the second has the same ops
    // with other sizes, so it runs as its calls, and so does the third; with
    // every op's size changed twice in a row the stream drifts: the nine
    // later iterations launch their four calls each as they record them, as
    // strict mode does, with no chunk to split.
    assert!(
        out.contains("KEYS 1 SPLIT 2 BACKGROUND 0 DRIFTING 36"),
        "{out}"
    );
    // The shape stops changing: the first fixed iteration is new, the
    // second repeats it and ends the drift; the loop fuses again: its chunk
    // runs op by op at first sight, compiles in the background from its
    // second (hot), and is promoted once compiled, with no split on the way.
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with("FIXED")).collect();
    assert_eq!(lines.len(), 8, "{out}");
    for (step, line) in lines.iter().enumerate() {
        let drifting = if step < 2 { 4 } else { 0 };
        assert!(
            line.starts_with(&format!("FIXED{step} drifting {drifting} "))
                && line.ends_with(" split 0"),
            "{out}"
        );
    }
    // Hot at its second fused sighting (FIXED3), compiled by FIXED5's wait.
    let compiled = lines.iter().filter(|l| l.contains("background 1")).count();
    assert_eq!(compiled, 1, "{out}");
    assert!(lines[6].contains("promotions 1"), "{out}");
}

/// A loop whose shapes change every iteration, its middle one op of the
/// caller's (`as_one_op`, as a `_foreach` op): iteration `i` scales four
/// (3, 5 + i) tensors and takes their exponentials in one scope, then reads
/// the sum of all four. Prints each iteration's executions.
fn drifting_scopes(mode: Mode, offset: i64) {
    let _m = in_mode(mode);
    for i in 0..10i64 {
        let columns = 5 + i + offset;
        let xs: Vec<Tensor> = (0..4)
            .map(|k| Tensor::full(&[3, columns], 0.25 * (k + 1) as f64, DType::F32).unwrap())
            .collect();
        let before = metrics().unwrap();
        let ys = eagertpu::as_one_op(|| {
            xs.iter()
                .map(|x| (x * 2.0).unwrap().exp().unwrap())
                .collect::<Vec<_>>()
        })
        .unwrap();
        let mut total = ys[0].sum_all().unwrap();
        for y in &ys[1..] {
            total = (&total + &y.sum_all().unwrap()).unwrap();
        }
        let got = total.item::<f32>().unwrap() as f64;
        let want: f64 = (0..4)
            .map(|k| 3.0 * columns as f64 * (0.5 * (k + 1) as f64).exp())
            .sum();
        assert!(
            (got - want).abs() < 1e-4 * want,
            "{mode} {i}: {got} vs {want}"
        );
        let after = metrics().unwrap();
        println!(
            "{mode} {i} executions {}",
            after.executions - before.executions
        );
    }
}

#[test]
fn child_drifting_scopes() {
    if !is_child("child_drifting_scopes") {
        return;
    }
    drifting_scopes(Mode::Strict, 0);
    // Other sizes than strict mode's: nothing found compiled.
    drifting_scopes(Mode::Fused, 100);
    println!("DRIFTING {}", metrics().unwrap().drifting_calls);
}

#[test]
fn a_drifting_loop_runs_a_scope_as_one_program_as_strict_mode_does() {
    let (ok, out) = child("child_drifting_scopes", POOL);
    assert!(ok, "{out}");
    assert!(
        !out.contains("DRIFTING 0\n"),
        "the loop never drifted: {out}"
    );
    let executions = |mode: &str, i: i64| -> u64 {
        let prefix = format!("{mode} {i} executions ");
        let line = out.lines().find_map(|l| l.strip_prefix(&prefix));
        line.and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {prefix}: {out}"))
    };
    // Strict mode: the scope, four sums, three adds. Once fused mode
    // drifts (from its third iteration), the same eight programs.
    for i in 3..10 {
        assert_eq!(executions("strict", i), 8, "{out}");
        assert_eq!(executions("fused", i), 8, "iteration {i}: {out}");
    }
}

/// A decode-like loop: each step reads the last entry of a tensor that grows
/// by one entry per step, runs a fixed-shape body on it, and reads a scalar
/// back (as `generate()` reads its stop flag). Prints, per step, [op by op,
/// background compiles, promotions, new keys, executions] and the splits.
#[test]
fn child_growing() {
    if !is_child("child_growing") {
        return;
    }
    let _m = in_mode(Mode::Fused);
    let w = Host::random(DType::F32, &[8, 8], 31);
    let h0 = Host::random(DType::F32, &[1, 8], 32);
    let wt = w.tensor();
    let mut h = h0.tensor();
    let mut ids = Tensor::full(&[1], 0.5, DType::F32).unwrap();
    // The host reference, step by step.
    let mut hr: Vec<f64> = h0.data.clone();
    let mut last = 0.5f64;
    for step in 0..12i64 {
        let before = metrics().unwrap();
        let n = step + 1;
        let tail = ids.slice(0, n - 1, n, 1).unwrap();
        let mut y = (&h + &tail).unwrap();
        for _ in 0..4 {
            y = y.matmul(&wt).unwrap().tanh().unwrap();
        }
        let s = y.sum_all().unwrap();
        ids = Tensor::cat(&[&ids, &s.reshape(&[1]).unwrap()], 0).unwrap();
        h = y;
        let got = s.item::<f32>().unwrap() as f64;
        // Reference.
        let mut yr: Vec<f64> = hr.iter().map(|v| round(DType::F32, v + last)).collect();
        for _ in 0..4 {
            yr = (0..8)
                .map(|c| {
                    let dot: f64 = (0..8).map(|i| yr[i] * w.data[i * 8 + c]).sum();
                    round(DType::F32, round(DType::F32, dot).tanh())
                })
                .collect();
        }
        let want: f64 = yr.iter().sum();
        assert!(
            (got - want).abs() <= 1e-4 * want.abs().max(1.0),
            "step {step}: {got} vs {want}"
        );
        last = round(DType::F32, want);
        hr = yr;
        if step == 5 {
            eagertpu::wait_for_compiles().unwrap();
        }
        let after = metrics().unwrap();
        println!("STEP{step} {:?}", delta(&after, &before));
        println!("SPLIT{step} {}", after.chunks_split - before.chunks_split);
    }
    eagertpu::wait_for_compiles().unwrap();
    let m = metrics().unwrap();
    println!("BACKGROUND {}", m.background_compiles);
}

#[test]
fn calls_whose_shapes_grow_run_apart_and_the_rest_of_the_step_compiles_once() {
    let (ok, out) = child("child_growing", POOL);
    assert!(ok, "{out}");
    // From the third step on (the first one creates the tensor, so the
    // second is the first of its kind), the step is split: the slice of the growing
    // tensor and the cat into it run alone (strict mode's programs), the
    // fixed-shape body between them is a chunk of its own, whose one key is
    // compiled once, in the background. The whole step, new at every step,
    // is never compiled.
    for step in 2..12 {
        assert!(
            out.contains(&format!("SPLIT{step} 1\n")),
            "step {step} not split: {out}"
        );
    }
    assert!(out.contains("BACKGROUND 1\n"), "{out}");
    // Once compiled: three launches a step (slice, body, cat), no new key.
    for step in 7..12 {
        let c = counts(&out, &format!("STEP{step}"));
        assert_eq!(c, [0, 0, 0, 0, 3], "step {step}: {out}");
    }
}

/// The inputs of the 240-op chunk the exit tests compile: x, then w.
fn long_chunk_inputs() -> (Host, Host) {
    (
        Host::random(DType::F32, &[16, 32], 31),
        Host::random(DType::F32, &[32, 32], 32),
    )
}

#[test]
fn child_exits_while_compiling() {
    if !is_child("child_exits_while_compiling") {
        return;
    }
    let _m = in_mode(Mode::Fused);
    let (x, w) = long_chunk_inputs();
    let w = w.tensor();
    // A chunk of 4 * 60 ops seen twice: hot, its program queued on the
    // compile pool, which takes a while to build it.
    for _ in 0..2 {
        chunk(&x, &w, 60);
    }
    // Exit once a compile thread has taken the chunk (a chunk still queued
    // at exit is dropped, not compiled; on a loaded machine the thread may
    // not have reached it yet).
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut m = metrics().unwrap();
    while m.compiling_in_background == 0
        && m.background_compiles == 0
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(1));
        m = metrics().unwrap();
    }
    println!(
        "QUEUED {} COMPILING {}",
        m.background_compiles, m.compiling_in_background
    );
    // The test returns, and the process exits without eagertpu::shutdown()
    // while the compile thread is inside the plugin (the exit waits for it).
}

/// The chunk of `child_exits_while_compiling` again, in a process sharing
/// its on-disk cache: seen once, it runs as one program if the disk has it.
#[test]
fn child_finds_the_chunk_on_disk() {
    if !is_child("child_finds_the_chunk_on_disk") {
        return;
    }
    let _m = in_mode(Mode::Fused);
    let (x, w_host) = long_chunk_inputs();
    let w = w_host.tensor();
    let before = metrics().unwrap();
    let got = chunk(&x, &w, 60);
    // 240 chained float32 ops: rounding compounds past assert_matches' 1e-4.
    for (g, r) in got.iter().zip(chunk_reference(&x, &w_host, 60)) {
        assert!(
            (*g as f64 - r).abs() <= 2e-3 * r.abs().max(1.0),
            "chunk: {g} vs {r}"
        );
    }
    let after = metrics().unwrap();
    println!(
        "OP_BY_OP {}",
        after.chunks_op_by_op - before.chunks_op_by_op
    );
}

#[test]
fn a_process_that_exits_while_a_chunk_compiles_finishes_the_compile_first() {
    // A Rust `main` returning (no `eagertpu::shutdown()`) while the compile
    // pool is inside the plugin: the exit waits for the compile, whose
    // program is then on disk for the next process, instead of tearing the
    // plugin down under it (SIGABRT, "pure virtual method called").
    for round in 0..3 {
        let dir =
            std::env::temp_dir().join(format!("eagertpu-exit-{}-{round}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cache = dir.to_str().unwrap();
        let pool_and_cache = [POOL[0], ("EAGERTPU_CACHE_DIR", cache)];
        let (ok, out) = child("child_exits_while_compiling", &pool_and_cache);
        assert!(ok && out.contains("QUEUED 0 COMPILING 1"), "{out}");
        let (ok, out) = child(
            "child_finds_the_chunk_on_disk",
            &[("EAGERTPU_CACHE_DIR", cache)],
        );
        let _ = std::fs::remove_dir_all(&dir);
        assert!(ok && out.contains("OP_BY_OP 0"), "round {round}: {out}");
    }
}

#[test]
fn a_process_whose_first_compile_is_in_the_background_exits_cleanly_mid_compile() {
    // Every single-op program comes from disk, so the plugin's compiler is
    // first built by the background compile, after the pool registered its
    // exit hook: the compiler's own exit handlers were registered later, and
    // ran first, under the compile (which then spun forever in a destroyed
    // table). The hook is registered again after each compile.
    for round in 0..2 {
        let dir = std::env::temp_dir().join(format!(
            "eagertpu-exit-first-{}-{round}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let cache = dir.to_str().unwrap();
        let limit = Duration::from_secs(120);
        let (ok, out) = child_within(
            "child_compiles_the_chunk_op_by_op",
            &[("EAGERTPU_CACHE_DIR", cache)],
            limit,
        );
        assert!(ok, "{out}");
        let pool_and_cache = [POOL[0], ("EAGERTPU_CACHE_DIR", cache)];
        let (ok, out) = child_within("child_exits_while_compiling", &pool_and_cache, limit);
        let _ = std::fs::remove_dir_all(&dir);
        assert!(ok && out.contains("QUEUED 0"), "round {round}: {out}");
    }
}

#[test]
fn child_compiles_the_chunk_op_by_op() {
    if !is_child("child_compiles_the_chunk_op_by_op") {
        return;
    }
    // Strict mode: the chunk's single-op programs, and no other, on disk.
    let _m = in_mode(Mode::Strict);
    let (x, w) = long_chunk_inputs();
    chunk(&x, &w.tensor(), 60);
}

/// `(x * 1.5 + 0.25).tanh() * x - 0.125` read back, and its host reference.
fn temporaries(x: &Tensor) -> Vec<f32> {
    let y =
        (&(&(&(x * 1.5).unwrap() + 0.25).unwrap().tanh().unwrap() * x).unwrap() - 0.125).unwrap();
    y.to_vec::<f32>().unwrap()
}

fn temporaries_reference(x: &Host) -> Vec<f64> {
    let f = |v: f64| round(DType::F32, v);
    x.data
        .iter()
        .map(|&v| f(f(f(f(f(v * 1.5) + 0.25).tanh()) * v) - 0.125))
        .collect()
}

#[test]
fn child_op_by_op_programs() {
    if !is_child("child_op_by_op_programs") {
        return;
    }
    let host = Host::random(DType::F32, &[16, 43], 41);
    let x = host.tensor();
    let want = temporaries_reference(&host);
    {
        let _m = in_mode(Mode::Strict);
        assert_matches("strict", &temporaries(&x), &want);
    }
    let before = metrics().unwrap();
    let _m = in_mode(Mode::Fused);
    assert_matches("fused", &temporaries(&x), &want);
    let after = metrics().unwrap();
    println!(
        "OP_BY_OP {} COMPILES {}",
        after.chunks_op_by_op - before.chunks_op_by_op,
        after.compiles - before.compiles
    );
}

#[test]
fn a_chunk_run_op_by_op_runs_the_programs_strict_mode_compiled() {
    // The chunk's temporaries are dead when it runs, but strict mode ran each
    // op while its caller held them: the same programs (none donating), so
    // nothing new is compiled.
    let (ok, out) = child("child_op_by_op_programs", &[]);
    assert!(ok, "{out}");
    assert!(out.contains("OP_BY_OP 1 COMPILES 0"), "{out}");
}

/// A step whose middle is one op of the caller's (`as_one_op`, as a
/// `_foreach` op over a list of tensors is): each `ts[i] * 2 + ts[0] * 1.5`
/// in one scope, then their sum less 0.5, read back.
fn scoped_step(ts: &[Tensor]) -> Vec<f32> {
    let a = (&ts[0] * 1.5).unwrap();
    let ys = eagertpu::as_one_op(|| {
        ts.iter()
            .map(|t| (&(t * 2.0).unwrap() + &a).unwrap())
            .collect::<Vec<_>>()
    })
    .unwrap();
    let mut total = ys[0].clone();
    for y in &ys[1..] {
        total = (&total + y).unwrap();
    }
    (&total - 0.5).unwrap().to_vec::<f32>().unwrap()
}

fn scoped_step_reference(xs: &[Host]) -> Vec<f64> {
    let f = |v: f64| round(DType::F32, v);
    (0..xs[0].data.len())
        .map(|j| {
            let a = f(xs[0].data[j] * 1.5);
            let ys = xs.iter().map(|x| f(f(x.data[j] * 2.0) + a));
            f(ys.reduce(|s, y| f(s + y)).unwrap_or(0.0) - 0.5)
        })
        .collect()
}

#[test]
fn child_scoped_op_by_op() {
    if !is_child("child_scoped_op_by_op") {
        return;
    }
    let xs: Vec<Host> = (0..5)
        .map(|i| Host::random(DType::F32, &[3, 7], 60 + i))
        .collect();
    let ts: Vec<Tensor> = xs.iter().map(Host::tensor).collect();
    let want = scoped_step_reference(&xs);
    let before = metrics().unwrap();
    {
        let _m = in_mode(Mode::Strict);
        assert_matches("strict", &scoped_step(&ts), &want);
    }
    let strict = metrics().unwrap();
    let _m = in_mode(Mode::Fused);
    assert_matches("fused", &scoped_step(&ts), &want);
    let fused = metrics().unwrap();
    println!(
        "OP_BY_OP {} COMPILES {} EXECUTIONS {} {}",
        fused.chunks_op_by_op - strict.chunks_op_by_op,
        fused.compiles - strict.compiles,
        strict.executions - before.executions,
        fused.executions - strict.executions
    );
}

#[test]
fn a_chunk_run_op_by_op_runs_a_scope_as_the_one_program_strict_mode_ran() {
    // Strict mode runs the scope's ten ops as one program; a fused chunk
    // seen once runs it as that program too, not as ten new ones.
    let (ok, out) = child("child_scoped_op_by_op", &[]);
    assert!(ok, "{out}");
    // Strict: `a`, the scope, four adds, the subtraction.
    assert!(
        out.contains("OP_BY_OP 1 COMPILES 0 EXECUTIONS 7 7"),
        "{out}"
    );
}

/// A `generate()`-like call run four times: 24 decode steps, each slicing
/// the last entry of a tensor that grows by one entry per step, running a
/// 100-op fixed-shape body on it and reading a scalar back; a call is 2,600
/// ops, more than four windows. Prints, per call, [op by op, background
/// compiles, promotions, new keys, executions], and checks the values
/// against a host reference.
#[test]
fn child_decode_calls() {
    if !is_child("child_decode_calls") {
        return;
    }
    let _m = in_mode(Mode::Fused);
    let w = Host::random(DType::F32, &[8, 8], 41);
    let wt = (&w.tensor() * 0.5).unwrap();
    let h0 = Host::random(DType::F32, &[1, 8], 42);
    for call in 0..4 {
        let before = metrics().unwrap();
        let mut ids = Tensor::full(&[1], 0.5, DType::F32).unwrap();
        let mut last = 0.5f64;
        for n in 1..=24i64 {
            let tail = ids.slice(0, n - 1, n, 1).unwrap();
            let mut y = (&h0.tensor() + &tail).unwrap();
            let mut yr: Vec<f64> = h0
                .data
                .iter()
                .map(|v| round(DType::F32, v + last))
                .collect();
            for _ in 0..50 {
                y = y.matmul(&wt).unwrap().tanh().unwrap();
                yr = (0..8)
                    .map(|c| {
                        let dot: f64 = (0..8).map(|i| yr[i] * w.data[i * 8 + c] * 0.5).sum();
                        round(DType::F32, round(DType::F32, dot).tanh())
                    })
                    .collect();
            }
            let s = y.sum_all().unwrap();
            ids = Tensor::cat(&[&ids, &s.reshape(&[1]).unwrap()], 0).unwrap();
            let got = s.item::<f32>().unwrap() as f64;
            let want: f64 = yr.iter().sum();
            assert!(
                (got - want).abs() <= 1e-3 * want.abs().max(1.0),
                "call {call} step {n}: {got} vs {want}"
            );
            last = round(DType::F32, got);
        }
        eagertpu::wait_for_compiles().unwrap();
        println!("CALL{call} {:?}", delta(&metrics().unwrap(), &before));
    }
}

#[test]
fn a_decode_loop_called_again_keeps_its_chunks() {
    let (ok, out) = child("child_decode_calls", POOL);
    assert!(ok, "{out}");
    // The step is the period whatever the growing sizes, and a call's start
    // does not move where the next call cuts: from the third call on, no new
    // key; the fourth finds every chunk compiled and runs three programs a
    // step (the growing slice and cat alone, the body as one chunk).
    let third = counts(&out, "CALL2");
    assert_eq!(third[3], 0, "new keys in the third call: {out}");
    let fourth = counts(&out, "CALL3");
    assert_eq!(fourth[0], 0, "chunks op by op in the fourth call: {out}");
    assert_eq!(fourth[3], 0, "new keys in the fourth call: {out}");
    assert!(
        fourth[4] <= 24 * 3,
        "programs run in the fourth call: {out}"
    );
}
