//! The negative log-likelihood loss and its gradient (`nll_loss`, as
//! PyTorch's `cross_entropy` calls it after `log_softmax`) against host
//! references in every mode: the losses row by row, the gradient by central
//! differences of the host's loss.

mod common;

use common::*;
use eagertpu::{DType, Reduction, Tensor};

/// The host's per-row losses and their total weight.
fn host_rows(
    x: &[f64],
    classes: usize,
    target: &[i64],
    w: Option<&[f64]>,
    ignore: i64,
) -> (Vec<f64>, f64) {
    let mut losses = vec![];
    let mut total = 0.0;
    for (row, &t) in x.chunks(classes).zip(target) {
        if t == ignore {
            losses.push(0.0);
            continue;
        }
        let weight = w.map_or(1.0, |w| w[t as usize]);
        losses.push(-row[t as usize] * weight);
        total += weight;
    }
    (losses, total)
}

fn reduce(losses: Vec<f64>, total: f64, reduction: Reduction) -> Vec<f64> {
    match reduction {
        Reduction::None => losses,
        Reduction::Sum => vec![losses.iter().sum()],
        Reduction::Mean => vec![losses.iter().sum::<f64>() / total],
    }
}

/// (input shape, targets; -100 is ignored).
fn cases() -> [(Vec<i64>, Vec<i64>); 4] {
    [
        (vec![5, 4], vec![0, 3, -100, 2, 2]),
        (vec![3, 6], vec![5, 0, 1]),
        (vec![4], vec![2]),
        (vec![2, 3], vec![-100, 1]),
    ]
}

all_modes! {
fn nll_loss_matches_the_host_reference() {
    for (c, (shape, t)) in cases().into_iter().enumerate() {
        let classes = *shape.last().unwrap() as usize;
        let rows_shape = &shape[..shape.len() - 1];
        for dtype in FLOATS {
            let x = Host::random(dtype, &shape, 800 + c as u64);
            let w = Host::random_in(dtype, &[classes as i64], 810 + c as u64, 0.5, 2.0);
            let target = Host::new(DType::I64, rows_shape, t.iter().map(|&v| v as f64).collect()).tensor();
            for weighted in [false, true] {
                let (wt, wh) = (weighted.then(|| w.tensor()), weighted.then_some(&w.data[..]));
                for reduction in [Reduction::None, Reduction::Mean, Reduction::Sum] {
                    let what = format!("nll_loss({dtype}{shape:?}, {t:?}, weighted {weighted}, {reduction:?})");
                    let (loss, total) = x.tensor().nll_loss(&target, wt.as_ref(), reduction, -100).unwrap();
                    let (losses, want_total) = host_rows(&x.data, classes, &t, wh, -100);
                    let out_shape: &[i64] = if reduction == Reduction::None { rows_shape } else { &[] };
                    let want = Host::new(dtype, out_shape, reduce(losses, want_total, reduction));
                    assert_close(&what, &loss, &want);
                    assert_close(&format!("{what} total weight"), &total, &Host::new(dtype, &[], vec![want_total]));
                }
            }
        }
    }
}
}

all_modes! {
fn nll_loss_backward_matches_central_differences() {
    for (c, (shape, t)) in cases().into_iter().enumerate() {
        let classes = *shape.last().unwrap() as usize;
        let rows_shape = &shape[..shape.len() - 1];
        for dtype in [DType::F32, DType::F64] {
            let x = Host::random(dtype, &shape, 820 + c as u64);
            let w = Host::random_in(dtype, &[classes as i64], 830 + c as u64, 0.5, 2.0);
            let target = Host::new(DType::I64, rows_shape, t.iter().map(|&v| v as f64).collect()).tensor();
            for reduction in [Reduction::None, Reduction::Mean, Reduction::Sum] {
                let out_shape: Vec<i64> = if reduction == Reduction::None { rows_shape.to_vec() } else { vec![] };
                let gout = Host::random(dtype, &out_shape, 840 + c as u64);
                let wt = w.tensor();
                let (_, total) = x.tensor().nll_loss(&target, Some(&wt), reduction, -100).unwrap();
                let got = gout.tensor().nll_loss_backward(&x.tensor(), &target, Some(&wt), reduction, -100, &total);
                // d/dx of sum(gout * loss(x)).
                let loss = |xs: &[f64]| -> f64 {
                    let (losses, total) = host_rows(xs, classes, &t, Some(&w.data), -100);
                    reduce(losses, total, reduction).iter().zip(&gout.data).map(|(l, g)| l * g).sum()
                };
                let mut xs = x.data.clone();
                let h = 1e-4;
                let want: Vec<f64> = (0..xs.len())
                    .map(|i| {
                        let v = xs[i];
                        xs[i] = v + h;
                        let up = loss(&xs);
                        xs[i] = v - h;
                        let down = loss(&xs);
                        xs[i] = v;
                        (up - down) / (2.0 * h)
                    })
                    .collect();
                let what = format!("nll_loss_backward({dtype}{shape:?}, {t:?}, {reduction:?})");
                let got = got.unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_close_tol(&what, &got, &Host::new(dtype, &shape, want), (1e-4, 1e-4));
            }
        }
    }
}
}

all_modes! {
fn nll_loss_rejects_bad_operands_naming_them() {
    let x = Host::random(DType::F32, &[3, 4], 850).tensor();
    let t = Host::new(DType::I64, &[2], vec![0.0, 1.0]).tensor();
    assert_err(x.nll_loss(&t, None, Reduction::Mean, -100), "nll_loss", &["int64[2]", "float32[3, 4]"]);
    let w = Host::random(DType::F32, &[3], 851).tensor();
    let t3 = Host::new(DType::I64, &[3], vec![0.0, 1.0, 3.0]).tensor();
    assert_err(x.nll_loss(&t3, Some(&w), Reduction::Mean, -100), "nll_loss", &["weight float32[3]"]);
    let ft = Host::random(DType::F32, &[3], 852).tensor();
    assert_err(x.nll_loss(&ft, None, Reduction::Mean, -100), "nll_loss", &["target float32[3]"]);
    let ints = Tensor::zeros(&[3, 4], DType::I32).unwrap();
    assert_err(ints.nll_loss(&t3, None, Reduction::Mean, -100), "nll_loss", &["int32", "floating-point"]);
}
}

#[test]
fn an_out_of_range_target_is_an_error_naming_nll_loss() {
    for mode in MODES {
        let _m = in_mode(mode);
        let x = Host::random(DType::F32, &[3, 4], 860).tensor();
        let t = Host::new(DType::I64, &[3], vec![0.0, 4.0, 1.0]).tensor();
        let r = x
            .nll_loss(&t, None, Reduction::Mean, -100)
            .and_then(|(l, _)| l.to_vec::<f32>());
        assert_err(r, "gather", &["out of range"]);
    }
}
