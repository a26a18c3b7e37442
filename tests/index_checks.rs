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
