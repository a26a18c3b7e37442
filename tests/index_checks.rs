//! Out-of-range indices in strict and fused mode: XLA clamps them on the
//! device, so the runtime checks them there and reports the first one at the
//! next host read or sync, naming the op and the line that recorded it (debug
//! mode refuses them at the op: tests/errors.rs).

mod common;

use common::*;
use eagertpu::{Mode, Reduction, Tensor};

fn table() -> Tensor {
    Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]).unwrap()
}

#[test]
fn an_out_of_range_index_fails_the_next_read_naming_the_op_and_line() {
    for mode in [Mode::Strict, Mode::Fused] {
        let _m = in_mode(mode);
        let idx = Tensor::from_slice(&[0i64, 3], &[2]).unwrap();
        let line = line!() + 1;
        let picked = table().index_select(0, &idx).unwrap(); // recorded: the device clamps 3
        let doubled = (&picked * 2.0).unwrap();
        let e = err_text(doubled.to_vec::<f32>());
        assert!(
            e.contains("index_select") && e.contains("out of range for dim 0 of size 3"),
            "{mode:?}: {e}"
        );
        assert!(
            e.contains(&format!("index_checks.rs:{line}")),
            "{mode:?}: {e}"
        );
        // Reported once; the next op and read work.
        let ok = Tensor::from_slice(&[2i64, 0], &[2]).unwrap();
        let v = table()
            .index_select(0, &ok)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        assert_eq!(v, vec![5.0, 6.0, 1.0, 2.0], "{mode:?}");
        eagertpu::sync().unwrap();
    }
}

#[test]
fn sync_reports_it_too_and_negative_indices_count() {
    for mode in [Mode::Strict, Mode::Fused] {
        let _m = in_mode(mode);
        let idx = Tensor::from_slice(&[-1i64], &[1, 1]).unwrap();
        let _g = table()
            .gather(1, &idx.broadcast_to(&[3, 1]).unwrap())
            .unwrap();
        let e = err_text(eagertpu::sync());
        assert!(
            e.contains("gather") && e.contains("dim 1 of size 2"),
            "{mode:?}: {e}"
        );
        eagertpu::sync().unwrap();
    }
}

#[test]
fn the_first_bad_op_is_named_and_ignored_targets_are_fine() {
    for mode in [Mode::Strict, Mode::Fused] {
        let _m = in_mode(mode);
        let logits = Host::random(eagertpu::DType::F32, &[3, 4], 1).tensor();
        let target = Tensor::from_slice(&[0i64, -100, 3], &[3]).unwrap();
        let fine = logits.cross_entropy_with(&target, Reduction::Sum).unwrap();
        let bad_target = Tensor::from_slice(&[0i64, 4, 1], &[3]).unwrap();
        let first = logits
            .cross_entropy_with(&bad_target, Reduction::Sum)
            .unwrap();
        let second = table()
            .index_select(0, &Tensor::from_slice(&[7i64], &[1]).unwrap())
            .unwrap();
        let e = err_text(fine.to_vec::<f32>());
        assert!(
            e.contains("cross_entropy") && e.contains("size 4"),
            "{mode:?}: {e}"
        );
        assert!(!e.contains("index_select"), "{mode:?}: {e}");
        drop((first, second));
        assert!(fine.to_vec::<f32>().unwrap()[0].is_finite());
    }
}

#[test]
fn in_range_loops_do_not_recompile() {
    for mode in [Mode::Strict, Mode::Fused] {
        let _m = in_mode(mode);
        let run = |i: i64| {
            let idx = Tensor::from_slice(&[i % 3, (i + 1) % 3], &[2]).unwrap();
            table()
                .index_select(0, &idx)
                .unwrap()
                .sum(&[], false)
                .unwrap()
                .to_vec::<f32>()
                .unwrap()
        };
        for i in 0..3 {
            run(i);
        }
        eagertpu::wait_for_compiles().unwrap();
        let before = eagertpu::metrics().unwrap().compiles;
        for i in 0..20 {
            let v = run(i)[0];
            let rows = [(i % 3) as f32, ((i + 1) % 3) as f32];
            let want: f32 = rows.iter().map(|r| (2.0 * r + 1.0) + (2.0 * r + 2.0)).sum();
            assert_eq!(v, want, "{mode:?} step {i}");
        }
        assert_eq!(eagertpu::metrics().unwrap().compiles, before, "{mode:?}");
    }
}

/// A loop whose step holds two checked index ops and that reads its result
/// every third step: prints the ops each step recorded, and the chunk keys
/// the last steps added.
#[test]
fn child_logging_loop() {
    if !is_child("child_logging_loop") {
        return;
    }
    let _m = in_mode(Mode::Fused);
    let mut acc = Tensor::full(&[2, 2], 0.0, eagertpu::DType::F32).unwrap();
    let mut ops = vec![];
    let mut keys = 0;
    for i in 0..24i64 {
        if i == 18 {
            eagertpu::wait_for_compiles().unwrap();
            keys = eagertpu::metrics().unwrap().chunk_keys;
        }
        let before = eagertpu::metrics().unwrap().ops_recorded;
        let idx = Tensor::from_slice(&[i % 3, (i + 2) % 3], &[2]).unwrap();
        let rows = table().index_select(0, &idx).unwrap();
        let cols = Tensor::from_slice(&[1i64, 0, 0, 1], &[2, 2]).unwrap();
        let picked = rows.gather(1, &cols).unwrap();
        acc = (&acc + &picked).unwrap();
        ops.push(eagertpu::metrics().unwrap().ops_recorded - before);
        if i % 3 == 2 {
            // The host reference: rows i%3 and (i+2)%3 of `table`, each row
            // `[2r+1, 2r+2]`, columns swapped in the first.
            let mut want = [0.0f32; 4];
            for s in 0..=i {
                let (a, b) = ((s % 3) as f32, ((s + 2) % 3) as f32);
                let step = [2.0 * a + 2.0, 2.0 * a + 1.0, 2.0 * b + 1.0, 2.0 * b + 2.0];
                for (w, v) in want.iter_mut().zip(step) {
                    *w += v;
                }
            }
            assert_eq!(acc.to_vec::<f32>().unwrap(), want, "step {i}");
        }
    }
    eagertpu::sync().unwrap();
    println!(
        "OPS {ops:?} NEW_KEYS {}",
        eagertpu::metrics().unwrap().chunk_keys - keys
    );
}

#[test]
fn a_step_records_the_same_checks_whether_or_not_the_host_read_before_it() {
    let (ok, out) = child("child_logging_loop", &[("EAGERTPU_COMPILE_THREADS", "1")]);
    assert!(ok, "{out}");
    let at = out.find("OPS [").unwrap_or_else(|| panic!("{out}"));
    let line = out[at..].lines().next().unwrap_or_default();
    let ops: Vec<u64> = line["OPS [".len()..line.find(']').unwrap()]
        .split(", ")
        .map(|n| n.parse().unwrap())
        .collect();
    // Every step records the same ops (a read folds nothing into the next
    // step's first check), so the loop keeps one period and its keys.
    assert!(ops.iter().all(|n| *n == ops[0]), "{line}");
    assert!(line.ends_with("NEW_KEYS 0"), "{line}");
}

/// A training-like loop that reads a value computed early in each step (a
/// logged loss), with a checked index op after it: once the period's lead
/// launches the step's chunk before the read, the read launches nothing,
/// and an out-of-range index is still reported, by the first read after
/// its chunk was launched (the next step's), once, naming the op and its
/// line; a later one is reported too, and good steps read right.
#[test]
fn with_the_read_launching_nothing_index_errors_are_reported_by_the_next_read() {
    let _m = in_mode(Mode::Fused);
    const ROWS: [f32; 6] = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6];
    let base: Vec<f64> = ROWS.iter().map(|&v| v as f64).collect();
    let rows = Tensor::from_slice(&ROWS, &[3, 2]).unwrap();
    let mut w = rows.clone();
    let mut host_w = base.clone();
    let step = |w: &mut Tensor, host_w: &mut Vec<f64>, pick: i64| {
        // The "loss": a few ops in, over rows 0 and 2.
        let early = Tensor::from_slice(&[0i64, 2], &[2]).unwrap();
        let loss = w.index_select(0, &early).unwrap().sum(&[], false).unwrap();
        let want_loss: f64 = [0, 1, 4, 5].iter().map(|&i| host_w[i]).sum();
        for _ in 0..20 {
            *w = (&*w * 0.5).unwrap();
            *w = (&*w + &rows).unwrap();
            *w = w.tanh().unwrap();
        }
        // After the loss: row `pick` added to every row.
        let late = Tensor::from_slice(&[pick], &[1]).unwrap();
        let late_line = line!() + 1;
        let row = w.index_select(0, &late).unwrap();
        *w = (&*w + &row).unwrap();
        for _ in 0..20 {
            for (v, b) in host_w.iter_mut().zip(&base) {
                *v = (((*v * 0.5) as f32 as f64 + b) as f32 as f64).tanh() as f32 as f64;
            }
        }
        // XLA clamps an out-of-range row to the last one.
        let r = pick.clamp(0, 2) as usize;
        let added = [host_w[2 * r], host_w[2 * r + 1]];
        for (i, v) in host_w.iter_mut().enumerate() {
            *v = (*v + added[i % 2]) as f32 as f64;
        }
        (loss.item::<f32>(), want_loss, late_line)
    };
    let check = |(got, want, _): (eagertpu::Result<f32>, f64, u32), at: &str| {
        let got = got.unwrap_or_else(|e| panic!("{at}: {e}"));
        assert!(
            (got as f64 - want).abs() < 1e-4 * want.abs().max(1.0),
            "{at}: {got} vs {want}"
        );
    };
    for i in 0..8 {
        check(step(&mut w, &mut host_w, 1), &format!("step {i}"));
    }
    eagertpu::wait_for_compiles().unwrap();
    check(step(&mut w, &mut host_w, 1), "settled");
    // Settled: one program a step, and the read cuts nothing.
    let before = eagertpu::metrics().unwrap();
    check(step(&mut w, &mut host_w, 1), "measured");
    let after = eagertpu::metrics().unwrap();
    assert_one_launch_and_no_read_cut(&before, &after);
    for round in 0..2 {
        // The bad index: its chunk is launched at the next step's loss, so
        // the next step's read reports it, and only that read.
        let (got, _, bad_line) = step(&mut w, &mut host_w, 3);
        let first = got.map(|_| ());
        let (got, _, _) = step(&mut w, &mut host_w, 1);
        let second = got.map(|_| ());
        let e = match (first, second) {
            (Err(e), Ok(())) | (Ok(()), Err(e)) => e.to_string(),
            other => panic!("round {round}: expected one error, got {other:?}"),
        };
        assert!(
            e.contains("index_select") && e.contains("out of range for dim 0 of size 3"),
            "round {round}: {e}"
        );
        assert!(
            e.contains(&format!("index_checks.rs:{bad_line}")),
            "round {round}: {e}"
        );
        for i in 0..3 {
            check(
                step(&mut w, &mut host_w, 1),
                &format!("round {round}, after it, step {i}"),
            );
        }
    }
    eagertpu::sync().unwrap();
    let got_w = w.to_vec::<f32>().unwrap();
    for (g, h) in got_w.iter().zip(&host_w) {
        assert!((*g as f64 - h).abs() < 1e-4, "{g} vs {h}");
    }
}
