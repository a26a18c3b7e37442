//! The three modes: they agree; strict and fused defer errors to the read and
//! name the failed op; fused mode fuses, lifts scalars, donates, drops dead
//! temporaries, lines chunks up with the loop, and shares one stream between
//! threads.

mod common;

use common::*;
use eagertpu::{DType, Metrics, Mode, Tensor};

fn metrics() -> Metrics {
    eagertpu::metrics().unwrap()
}

/// Programs that had to come from compiling or from disk (not memory).
fn loads(m: &Metrics) -> u64 {
    m.misses + m.disk_hits
}

/// A mixed workload: an MLP step with a hand-written backward, reductions,
/// indexing, integer ops. Returns every result read back as f64.
fn workload(seed: u64) -> Vec<(String, DType, Vec<f64>)> {
    let x = Host::random(DType::F32, &[16, 12], seed).tensor();
    let w = Host::random(DType::F32, &[12, 8], seed + 1).tensor();
    let y = Tensor::from_slice(&(0..16).map(|i| i % 8).collect::<Vec<i64>>(), &[16]).unwrap();
    let h = x.matmul(&w).unwrap().gelu().unwrap();
    let loss = h.cross_entropy(&y).unwrap();
    let p = h.softmax(-1).unwrap();
    let onehot = y
        .unsqueeze(1)
        .unwrap()
        .eq(&Tensor::arange(0, 8, 1).unwrap())
        .unwrap();
    let dh = ((&p - &onehot.to_dtype(DType::F32).unwrap()).unwrap() / 16.0).unwrap();
    let dw = x.t().unwrap().matmul(&dh).unwrap();
    let w2 = (&w - &(&dw * 0.1).unwrap()).unwrap();
    let stats = h.var(&[0], 1, false).unwrap();
    let ints = Host::random(DType::I32, &[5, 7], seed + 2).tensor();
    let isum = ints.remainder(7).unwrap().sum(&[1], true).unwrap();
    let picked = x
        .index_select(0, &Tensor::from_slice(&[3i64, 1, 3], &[3]).unwrap())
        .unwrap();
    let am = h.argmax(Some(1), false).unwrap();
    [
        ("loss", loss),
        ("w2", w2),
        ("var", stats),
        ("isum", isum),
        ("picked", picked),
        ("argmax", am),
    ]
    .into_iter()
    .map(|(n, t)| (n.to_string(), t.dtype(), t.to_f64_vec().unwrap()))
    .collect()
}

#[test]
fn the_three_modes_agree() {
    let results: Vec<_> = MODES
        .iter()
        .map(|&m| {
            let _m = in_mode(m);
            workload(5)
        })
        .collect();
    for other in &results[1..] {
        for ((name, dtype, a), (_, _, b)) in results[0].iter().zip(other) {
            for (x, y) in a.iter().zip(b) {
                if dtype.is_float() {
                    assert!(
                        (x - y).abs() <= 1e-5 * y.abs().max(1e-6),
                        "{name}: {x} vs {y}"
                    );
                } else {
                    assert_eq!(x, y, "{name}");
                }
            }
        }
    }
}

/// A tensor too large for this machine: the allocation fails when it runs.
const HUGE: i64 = 40_000_000_000;

#[test]
fn errors_in_strict_and_fused_mode_surface_at_the_read_naming_the_op() {
    for mode in [Mode::Strict, Mode::Fused] {
        let _m = in_mode(mode);
        let small = Tensor::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
        let line = line!() + 1;
        let huge = Tensor::zeros(&[HUGE], DType::F32).expect("recording succeeds");
        let derived = (&huge + 1.0).expect("recording succeeds");
        let total = derived.sum_all().expect("recording succeeds");
        // Unrelated work in the same chunk still runs.
        let fine = (&small * 3.0).unwrap();
        let e = err_text(total.item::<f32>());
        assert!(
            e.contains("full(") && e.contains(&format!("tests/modes.rs:{line}")),
            "{mode}: {e}"
        );
        assert!(
            e.contains("RESOURCE_EXHAUSTED") || e.contains("memory"),
            "{mode}: {e}"
        );
        assert_eq!(
            err_text(derived.to_vec::<f32>()),
            e,
            "{mode}: the same error at every read"
        );
        assert_eq!(fine.to_vec::<f32>().unwrap(), vec![3.0, 6.0], "{mode}");
        // sync() reports every failure since the previous sync, once.
        assert_eq!(err_text(eagertpu::sync().map(|_| ())), e, "{mode}");
        assert!(eagertpu::sync().is_ok(), "{mode}");
        // And the runtime keeps working.
        assert_eq!(
            (&small + &small).unwrap().to_vec::<f32>().unwrap(),
            vec![2.0, 4.0]
        );
    }
}

#[test]
fn sync_reports_a_failure_nobody_read() {
    let _m = in_mode(Mode::Strict);
    let huge = Tensor::zeros(&[HUGE], DType::F32).unwrap();
    let e = err_text(eagertpu::sync().map(|_| ()));
    assert!(e.contains("full("), "{e}");
    drop(huge);
    assert!(eagertpu::sync().is_ok());
}

#[test]
fn fused_mode_runs_a_chain_as_one_chunk_and_exports_only_live_values() {
    let _m = in_mode(Mode::Fused);
    let x = Host::random(DType::F32, &[64], 1);
    let t = x.tensor();
    eagertpu::sync().unwrap();
    let chain = || {
        let before = metrics();
        let mut y = t.clone();
        for _ in 0..30 {
            y = y.tanh().unwrap().exp().unwrap().neg().unwrap();
        }
        let mid = metrics();
        assert_eq!(
            mid.executions, before.executions,
            "nothing runs before the read"
        );
        (y.to_vec::<f32>().unwrap(), before, metrics())
    };
    let (got, before, after) = warmed(chain);
    assert_eq!(after.executions - before.executions, 1);
    assert_eq!(after.chunks_op_by_op, before.chunks_op_by_op);
    assert_eq!(
        after.chunks_cut("host_read") - before.chunks_cut("host_read"),
        1
    );
    // The 89 dead temporaries never became buffers: only the result is new.
    assert_eq!(after.live_buffers - before.live_buffers, 1);
    let want = x.map(DType::F32, |v| {
        let mut v = v;
        for _ in 0..30 {
            v = -(v.tanh().exp());
        }
        v
    });
    assert_close_tol(
        "chain",
        &Tensor::from_slice(&got, &[64]).unwrap(),
        &want,
        (1e-5, 1e-6),
    );
}

#[test]
fn a_learning_rate_that_changes_every_step_compiles_nothing_after_step_3() {
    let _m = in_mode(Mode::Fused);
    let x = Host::random(DType::F32, &[32, 10], 2).tensor();
    let y = Tensor::from_slice(&(0..32).map(|i| i % 4).collect::<Vec<i64>>(), &[32]).unwrap();
    let mut w = Host::random(DType::F32, &[10, 4], 3).tensor();
    let classes = Tensor::arange(0, 4, 1).unwrap();
    let onehot = y
        .unsqueeze(1)
        .unwrap()
        .eq(&classes)
        .unwrap()
        .to_dtype(DType::F32)
        .unwrap();
    let mut after_step_3 = None;
    let mut losses = vec![];
    for step in 1..=12 {
        let lr = 0.5 / (1.0 + step as f64);
        let logits = x.matmul(&w).unwrap();
        let loss = logits.cross_entropy(&y).unwrap();
        let d = ((&logits.softmax(1).unwrap() - &onehot).unwrap() / 32.0).unwrap();
        let g = x.t().unwrap().matmul(&d).unwrap();
        w = (&w - &(&g * lr).unwrap()).unwrap();
        losses.push(loss.item::<f32>().unwrap());
        if step == 3 {
            // The chunk hot since step 2 may still be compiling.
            eagertpu::wait_for_compiles().unwrap();
            after_step_3 = Some(metrics());
        }
    }
    let (m3, end) = (after_step_3.unwrap(), metrics());
    assert_eq!(loads(&end), loads(&m3), "programs compiled after step 3");
    assert!(
        end.lifted_scalars > m3.lifted_scalars,
        "the learning rate is a parameter"
    );
    assert!(
        end.donated_buffers > m3.donated_buffers,
        "the weight update is in place"
    );
    assert!(losses[11] < losses[0], "{losses:?}");
}

#[test]
fn weight_updates_donate_their_buffer() {
    let _m = in_mode(Mode::Fused);
    let mut w = Tensor::ones(&[256, 256], DType::F32).unwrap();
    let g = Tensor::full(&[256, 256], 0.5, DType::F32).unwrap();
    w.sync().unwrap();
    g.sync().unwrap();
    let start = metrics();
    let step = |w: &mut Tensor| {
        *w = (&*w - &(&g * 0.1).unwrap()).unwrap();
        w.sync().unwrap();
    };
    // Until the update's program is ready it runs op by op, as strict mode
    // would (no donation there: strict mode's programs).
    for _ in 0..2 {
        step(&mut w);
    }
    eagertpu::wait_for_compiles().unwrap();
    let before = metrics();
    for _ in 0..18 {
        step(&mut w);
    }
    let after = metrics();
    assert_eq!(after.donated_buffers - before.donated_buffers, 18);
    // One buffer for w at a time, in every tier: memory does not grow with
    // the updates.
    assert_eq!(after.live_buffers, start.live_buffers);
    let v = w.to_vec::<f32>().unwrap();
    assert!(v.iter().all(|&x| (x - 0.0).abs() < 1e-5), "{}", v[0]);
}

/// A training chunk's weight that the backward also reads (`gx = grad * w`,
/// an output the update does not need) is not donated to its update: XLA
/// orders a donated parameter's reads before the write only by data
/// dependence, and copied the weight every step. The update takes fresh
/// memory instead; the values are the host's.
#[test]
fn a_weight_read_apart_from_its_update_is_not_donated() {
    let _m = in_mode(Mode::Fused);
    let shape = [32, 16];
    let g = Host::random(DType::F32, &shape, 7);
    let w0 = Host::random(DType::F32, &shape, 8);
    let grad = g.tensor();
    let mut w = w0.tensor();
    grad.sync().unwrap();
    w.sync().unwrap();
    let step = |w: &mut Tensor| {
        let gx = (&grad * &*w).unwrap();
        *w = (&*w - &(&grad * 0.1).unwrap()).unwrap();
        gx
    };
    for _ in 0..2 {
        step(&mut w).sync().unwrap();
    }
    eagertpu::wait_for_compiles().unwrap();
    let before = metrics();
    let mut w_host: Vec<f32> = w.to_vec::<f32>().unwrap();
    for _ in 0..4 {
        let gx = step(&mut w);
        let gx_host: Vec<f32> = g
            .data
            .iter()
            .zip(&w_host)
            .map(|(g, w)| *g as f32 * w)
            .collect();
        for (w, g) in w_host.iter_mut().zip(&g.data) {
            *w -= *g as f32 * 0.1;
        }
        // Within a rounding (XLA may fuse the update into one multiply-add).
        for (got, want) in [
            (gx.to_vec::<f32>().unwrap(), &gx_host),
            (w.to_vec::<f32>().unwrap(), &w_host),
        ] {
            for (a, b) in got.iter().zip(want.iter()) {
                assert!((a - b).abs() <= 1e-6 * (1.0 + b.abs()), "{a} vs {b}");
            }
        }
        w_host = w.to_vec::<f32>().unwrap();
    }
    let after = metrics();
    assert_eq!(after.donated_buffers, before.donated_buffers);
    assert!(after.executions > before.executions);
}

/// An AdamW-shaped step that reads its parameter before it updates the
/// moment: each dead input is donated to its own update (the update lands
/// at the old value's address), not to the first output of its type, which
/// made XLA copy both in and out of the aliased buffers. The values are the
/// host's.
#[test]
fn an_update_takes_the_memory_of_the_value_it_updates() {
    let _m = in_mode(Mode::Fused);
    let shape = [64, 32];
    let g = Host::random(DType::F32, &shape, 5);
    let w0 = Host::random(DType::F32, &shape, 6);
    let grad = g.tensor();
    let mut w = w0.tensor();
    let mut m = Tensor::zeros(&shape, DType::F32).unwrap();
    for t in [&grad, &w, &m] {
        t.sync().unwrap();
    }
    let step = |w: &mut Tensor, m: &mut Tensor| {
        // `w` is the chunk's first input; `m`'s update its first output.
        let decayed = (&*w * 0.99).unwrap();
        *m = m.lerp(&grad, 0.1).unwrap();
        *w = (&decayed - &(&*m * 0.01).unwrap()).unwrap();
    };
    let (mut w_host, mut m_host) = (w0.data.clone(), vec![0.0f64; w0.data.len()]);
    let host_step = |w: &mut [f64], m: &mut [f64]| {
        for ((w, m), g) in w.iter_mut().zip(m.iter_mut()).zip(&g.data) {
            let (w32, m32, g32) = (*w as f32, *m as f32, *g as f32);
            let m_new = m32 + 0.1 * (g32 - m32);
            *m = m_new as f64;
            *w = (w32 * 0.99 - m_new * 0.01) as f64;
        }
    };
    // Op by op until the step's program is ready (tiered execution).
    for _ in 0..2 {
        step(&mut w, &mut m);
        host_step(&mut w_host, &mut m_host);
        w.sync().unwrap();
    }
    eagertpu::wait_for_compiles().unwrap();
    for _ in 0..4 {
        let (w_at, m_at) = (
            w.unsafe_buffer_pointer().unwrap(),
            m.unsafe_buffer_pointer().unwrap(),
        );
        assert_ne!(w_at, m_at);
        step(&mut w, &mut m);
        host_step(&mut w_host, &mut m_host);
        assert_eq!(
            (
                w.unsafe_buffer_pointer().unwrap(),
                m.unsafe_buffer_pointer().unwrap()
            ),
            (w_at, m_at),
            "each update in its old value's memory (w, m)"
        );
    }
    let host = |data: Vec<f64>| Host { data, ..w0.clone() };
    assert_close("w", &w, &host(w_host));
    assert_close("m", &m, &host(m_host));
}

/// Runs `acc = tanh(acc * scale(step) + x)` 400 times with no read, three
/// times over (`step` counts on across runs), and checks that the last run
/// is cut at its period, loads no program, adds no chunk key, and computes
/// what the host does.
fn settles_at_its_period(scale: impl Fn(usize) -> f64) {
    let _m = in_mode(Mode::Fused);
    let x = Host::random(DType::F32, &[8], 4).tensor();
    let step = std::cell::Cell::new(0);
    let scales = std::cell::RefCell::new(vec![]);
    let run = || {
        let mut acc = Tensor::zeros(&[8], DType::F32).unwrap();
        acc.sync().unwrap();
        let before = metrics();
        scales.borrow_mut().clear();
        // 1,200 ops a run: longer than two windows, so the period is cut
        // into segments at least twice before the read.
        for _ in 0..400 {
            // One step: 3 ops, one reading a lifted scalar.
            let s = scale(step.get());
            step.set(step.get() + 1);
            scales.borrow_mut().push(s);
            acc = (&(&acc * s).unwrap() + &x).unwrap().tanh().unwrap();
        }
        (acc.to_vec::<f32>().unwrap(), before, metrics())
    };
    // Runs repeat too: once the stream's period is a whole run (found in
    // the second), its chunks settle, compile, and are used.
    let (_, first, _) = run();
    run();
    let (got, before, after) = warmed(run);
    assert!(
        after.chunks_cut("period") - before.chunks_cut("period") >= 2,
        "{}",
        after.report()
    );
    assert_eq!(
        after.chunks_cut("window_ops"),
        before.chunks_cut("window_ops"),
        "{}",
        after.report()
    );
    assert!(loads(&before) - loads(&first) <= 12, "{}", after.report());
    assert_eq!(loads(&after), loads(&before), "{}", after.report());
    assert_eq!(after.chunk_keys, before.chunk_keys, "{}", after.report());
    let xs = Host::of(&x).data;
    let mut want = vec![0.0f64; 8];
    for s in scales.borrow().iter() {
        for (a, xv) in want.iter_mut().zip(&xs) {
            *a = (*a * s + xv).tanh();
        }
    }
    for (g, w) in got.iter().zip(&want) {
        assert!((*g as f64 - w).abs() < 1e-4, "{g} vs {w}");
    }
}

#[test]
fn a_loop_without_reads_is_cut_at_its_period_and_each_chunk_repeats() {
    settles_at_its_period(|_| 0.5);
}

/// An optimizer's step size changes at every step (AdamW's bias
/// correction); its program does not (the scalar is a parameter), and the
/// loop is found all the same.
#[test]
fn a_loop_whose_scalars_change_every_step_is_cut_at_its_period() {
    settles_at_its_period(|i| 0.5 + 0.25 / (i + 2) as f64);
}

#[test]
fn a_value_handed_to_another_thread_cuts_the_trace_it_is_pending_in() {
    let _m = in_mode(Mode::Fused);
    let a = Host::random(DType::F32, &[4, 4], 5);
    let t = a.tensor();
    eagertpu::sync().unwrap();
    let step = || {
        let before = metrics();
        // Forward on this thread, "backward" on another, the update back
        // here: each thread records into a trace of its own, and reading a
        // value pending in another's cuts that one (the producer's chunk
        // runs first, once).
        let fwd = t.exp().unwrap();
        let bwd = std::thread::scope(|s| {
            s.spawn(|| (&fwd * 2.0).unwrap().tanh().unwrap())
                .join()
                .unwrap()
        });
        let upd = (&t - &bwd).unwrap();
        (upd.to_vec::<f32>().unwrap(), before, metrics())
    };
    let (got, before, after) = warmed(step);
    assert_eq!(after.executions - before.executions, 3);
    assert_eq!(
        after.chunks_cut("cross_thread") - before.chunks_cut("cross_thread"),
        2
    );
    let want = a.map(DType::F32, |v| v - (2.0 * v.exp()).tanh());
    assert_close_tol(
        "threads",
        &Tensor::from_slice(&got, &[4, 4]).unwrap(),
        &want,
        (1e-5, 1e-6),
    );
}

#[test]
fn switching_mode_runs_what_is_pending() {
    let m = in_mode(Mode::Fused);
    let x = Tensor::from_slice(&[1.0f32, 4.0], &[2]).unwrap();
    let y = x.sqrt().unwrap();
    let before = metrics();
    drop(m);
    let _debug = in_mode(Mode::Debug);
    let after = metrics();
    assert!(after.chunks_cut("mode_switch") > before.chunks_cut("mode_switch"));
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
}

#[test]
fn a_shape_change_is_explained_once() {
    let _m = in_mode(Mode::Fused);
    let run = |batch: i64| {
        let x = Tensor::ones(&[batch, 3], DType::F64).unwrap();
        x.sync().unwrap();
        (&x.atan2(&x).unwrap() * 3.0)
            .unwrap()
            .sum(&[1], false)
            .unwrap()
            .to_vec::<f64>()
            .unwrap()
    };
    // Each shape's chunk compiles once it is seen twice (the first run of
    // the second shape, the same ops with other sizes, runs op by op and
    // does not count).
    warmed(|| run(7));
    run(9);
    warmed(|| run(9));
    let reasons = metrics().recompile_reasons;
    let hits: Vec<&String> = reasons
        .iter()
        .filter(|r| r.contains("float64[7, 3]") && r.contains("float64[9, 3]"))
        .collect();
    assert_eq!(hits.len(), 1, "{reasons:?}");
    assert!(
        hits[0].contains("input 0 changed from float64[7, 3] to float64[9, 3]"),
        "{}",
        hits[0]
    );
}

#[test]
fn a_scalar_repeated_in_a_chunk_is_one_parameter() {
    let _m = in_mode(Mode::Fused);
    let start: Vec<f32> = (0..16).map(|i| i as f32 * 0.25 - 2.0).collect();
    let run = || {
        let mut x = Tensor::from_slice(&start, &[16]).unwrap();
        let before = metrics();
        // 60 ops reading 0.9 and 60 reading 0.125: two scalars, one chunk.
        for _ in 0..60 {
            x = (&(&x * 0.9).unwrap() + 0.125).unwrap();
        }
        (x.to_vec::<f32>().unwrap(), before, metrics())
    };
    let (got, before, after) = warmed(run);
    assert_eq!(after.executions - before.executions, 1);
    assert_eq!(after.lifted_scalars - before.lifted_scalars, 2);
    assert_eq!(
        after.ops_recorded - before.ops_recorded,
        120,
        "a number operand is a value of its op, not a node of its own"
    );
    let want: Vec<f32> = start
        .iter()
        .map(|&v| (0..60).fold(v, |acc, _| acc * 0.9 + 0.125))
        .collect();
    for (g, w) in got.iter().zip(&want) {
        assert!(
            (g - w).abs() <= 1e-5 * w.abs().max(1.0),
            "{got:?} vs {want:?}"
        );
    }
}

/// The same loop with a forward chunk that takes a while (a 256x256 matmul
/// over the weights, whose result the update reads, as a backward pass reads
/// activations): the update chunk is launched while the forward chunk may
/// still run and read the weights the update overwrites. The launch waits for
/// it (the update waits for it on the device anyway) and updates the weights
/// in place, never on a copy; the loss and the weights are the host's.
#[test]
fn an_update_launched_while_its_forward_chunk_runs_updates_the_weights_in_place() {
    let _m = in_mode(Mode::Fused);
    let n = 256usize;
    let hw = Host::random_in(DType::F32, &[n as i64, n as i64], 31, -0.5, 0.5);
    let hm = Host::random_in(DType::F32, &[n as i64, n as i64], 32, -0.5, 0.5);
    let m = hm.tensor();
    let mut w = hw.tensor();
    let mut host_w = hw.data.clone();
    let step = |w: &mut eagertpu::Tensor| {
        let act = w.matmul(&m).unwrap();
        let loss = act.sum(&[], false).unwrap();
        *w = (&*w - &(&act * 1e-3).unwrap()).unwrap();
        for _ in 0..20 {
            *w = (&*w * 0.99).unwrap();
            *w = (&*w + 0.01).unwrap();
            *w = w.tanh().unwrap();
        }
        loss.item::<f32>().unwrap()
    };
    let host_step = |host_w: &mut Vec<f64>| {
        let mut act = vec![0.0; n * n];
        for i in 0..n {
            for k in 0..n {
                let a = host_w[i * n + k];
                for j in 0..n {
                    act[i * n + j] += a * hm.data[k * n + j];
                }
            }
        }
        for (v, a) in host_w.iter_mut().zip(&act) {
            *v -= a * 1e-3;
            for _ in 0..20 {
                *v = ((((*v * 0.99) as f32 as f64 + 0.01) as f32 as f64).tanh() as f32) as f64;
            }
        }
        act.iter().sum::<f64>()
    };
    for _ in 0..6 {
        step(&mut w);
        host_step(&mut host_w);
    }
    eagertpu::wait_for_compiles().unwrap();
    step(&mut w);
    host_step(&mut host_w);
    let before = metrics();
    let got = step(&mut w);
    let want = host_step(&mut host_w);
    let after = metrics();
    assert_updated_in_place(&before, &after);
    assert!(
        (got as f64 - want).abs() < 1e-2 * want.abs().max(1.0),
        "{got} vs {want}"
    );
    for (g, h) in w.to_vec::<f32>().unwrap().iter().zip(&host_w) {
        assert!((*g as f64 - h).abs() < 1e-3, "{g} vs {h}");
    }
}

/// A loop that computes a value early and reads it at its end (a training
/// step logging its loss): once settled, the iteration's one chunk ends
/// where the value is computed, so it is launched before the read (the read
/// cuts nothing: one program per iteration, not one before the value and
/// one at the read) and runs while the rest of the iteration records; the
/// state the iteration carries is the host's.
#[test]
fn a_value_read_at_the_end_of_an_iteration_is_launched_where_it_is_computed() {
    let _m = in_mode(Mode::Fused);
    let host = Host::random(DType::F32, &[64], 21);
    let x = host.tensor();
    let mut w = x.clone();
    let mut host_w = host.data.clone();
    let step = |w: &mut eagertpu::Tensor, host_w: &mut Vec<f64>| {
        // The "loss": a few ops in.
        let loss = (&*w * &x).unwrap().sum(&[], false).unwrap();
        let want_loss: f64 = host_w.iter().zip(&host.data).map(|(a, b)| a * b).sum();
        // The "update": many ops after it.
        for _ in 0..40 {
            *w = (&*w * 0.999).unwrap();
            *w = (&*w + &x).unwrap();
            *w = w.tanh().unwrap();
            *w = (&*w - 0.25).unwrap();
        }
        for (v, xv) in host_w.iter_mut().zip(&host.data) {
            for _ in 0..40 {
                *v =
                    ((((*v * 0.999) as f32 as f64 + xv) as f32 as f64).tanh() as f32 as f64) - 0.25;
            }
        }
        (loss.item::<f32>().unwrap(), want_loss)
    };
    for _ in 0..6 {
        step(&mut w, &mut host_w);
    }
    eagertpu::wait_for_compiles().unwrap();
    step(&mut w, &mut host_w);
    let before = metrics();
    let (got, want) = step(&mut w, &mut host_w);
    let after = metrics();
    assert_one_launch_and_no_read_cut(&before, &after);
    assert!(
        (got as f64 - want).abs() < 1e-3 * want.abs().max(1.0),
        "{got} vs {want}"
    );
    let got_w = w.to_vec::<f32>().unwrap();
    for (g, h) in got_w.iter().zip(&host_w) {
        assert!((*g as f64 - h).abs() < 1e-4, "{g} vs {h}");
    }
}

/// A loop that reads its result every iteration (the chain of `make bench`,
/// a training step logging its loss): once the read has recurred, the
/// period's cut falls on it, and each iteration runs as one program, not as
/// the two a cut elsewhere in the iteration would make.
#[test]
fn a_loop_reading_every_iteration_runs_one_program_per_iteration() {
    let _m = in_mode(Mode::Fused);
    let host = Host::random(DType::F32, &[64], 12);
    let x = host.tensor();
    let iteration = || {
        let mut y = x.clone();
        for _ in 0..40 {
            y = (&y * 1.0001).unwrap();
            y = (&y + 0.5).unwrap();
            y = y.tanh().unwrap();
            y = (&y - &x).unwrap();
        }
        y.sum(&[], false).unwrap().item::<f32>().unwrap()
    };
    for _ in 0..4 {
        iteration();
    }
    let (got, before, after) = warmed(|| {
        let before = metrics();
        let got = iteration();
        (got, before, metrics())
    });
    assert_eq!(
        after.executions - before.executions,
        1,
        "{}",
        after.report()
    );
    assert_eq!(after.chunk_keys, before.chunk_keys, "{}", after.report());
    let mut want = host.data.clone();
    for _ in 0..40 {
        for (w, xv) in want.iter_mut().zip(&host.data) {
            *w = (((*w * 1.0001) as f32 as f64 + 0.5) as f32 as f64).tanh() - xv;
        }
    }
    let want: f64 = want.iter().sum();
    assert!(
        (got as f64 - want).abs() < 1e-3 * want.abs().max(1.0),
        "{got} vs {want}"
    );
}

/// `as_one_op`: what it records is one program in debug and strict modes
/// (as a `_foreach` op over a list is one op of the caller's), values as
/// when each op ran alone; a read inside runs what is pending first; an
/// error inside leaves the scope, and the next op runs alone again.
#[test]
fn calls_made_as_one_op_run_as_one_program_in_every_mode() {
    let xs: Vec<Host> = (0..5)
        .map(|i| Host::random(DType::F32, &[3, 4], 40 + i))
        .collect();
    for mode in MODES {
        let _m = in_mode(mode);
        let ts: Vec<Tensor> = xs.iter().map(Host::tensor).collect();
        eagertpu::sync().unwrap();
        let before = metrics();
        let ys = eagertpu::as_one_op(|| {
            ts.iter()
                .map(|t| (&(t * 2.0).unwrap() + 1.0).unwrap().tanh().unwrap())
                .collect::<Vec<_>>()
        })
        .unwrap();
        let launched = metrics();
        if mode != Mode::Fused {
            assert_eq!(
                launched.executions - before.executions,
                1,
                "{mode}: launched once, when the scope ends"
            );
        }
        for (x, y) in xs.iter().zip(&ys) {
            assert_close(
                &format!("{mode}"),
                y,
                &x.map(DType::F32, |v| (2.0 * v + 1.0).tanh()),
            );
        }
        let after = metrics();
        assert!(
            after.executions - before.executions <= 1,
            "{mode}: one program for the five items"
        );

        // A read inside the scope runs what is pending first.
        let read = eagertpu::as_one_op(|| {
            let y = (&ts[0] * 3.0).unwrap();
            let first = y.to_vec::<f32>().unwrap()[0];
            (first, (&y + 1.0).unwrap())
        })
        .unwrap();
        assert_eq!(read.0 as f64, (xs[0].data[0] as f32 * 3.0) as f64, "{mode}");
        assert_eq!(read.1.to_vec::<f32>().unwrap()[0], read.0 + 1.0, "{mode}");

        // An error inside (the caller's, returned by the closure) ends the
        // scope: what was recorded before it runs, and ops run alone again.
        let failed: eagertpu::Result<Tensor> = eagertpu::as_one_op(|| {
            let _kept = (&ts[1] - 1.0)?;
            ts[0].matmul(&ts[1])
        })
        .unwrap();
        let e = err_text(failed);
        assert!(e.contains("matmul") && e.contains("[3, 4]"), "{mode}: {e}");
        let before = metrics();
        let alone = (&ts[2] + 1.0).unwrap();
        if mode != Mode::Fused {
            assert_eq!(metrics().executions - before.executions, 1, "{mode}");
        }
        assert_close(
            &format!("{mode}"),
            &alone,
            &xs[2].map(DType::F32, |v| v + 1.0),
        );
    }
}
