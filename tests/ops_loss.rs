//! The losses against host references in every mode: the negative
//! log-likelihood (`nll_loss`, as PyTorch's `cross_entropy` calls it after
//! `log_softmax`) and the pointwise losses (mse, smooth L1, Huber, binary
//! cross entropy), values element by element and gradients by central
//! differences of the host's loss.

mod common;

use common::*;
use eagertpu::{DType, PointwiseLoss, Reduction, Tensor};

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
                let want = central_differences(&x.data, 1e-4, loss);
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
        assert_err(r, "nll_loss", &["out of range"]);
    }
}

/// The host's loss of one element (`x` the input, `t` the target).
fn host_pointwise(loss: PointwiseLoss, x: f64, t: f64) -> f64 {
    let d = x - t;
    match loss {
        PointwiseLoss::Mse => d * d,
        PointwiseLoss::SmoothL1 { beta } if d.abs() < beta => d * d / (2.0 * beta),
        PointwiseLoss::SmoothL1 { beta } => d.abs() - beta / 2.0,
        PointwiseLoss::Huber { delta } if d.abs() < delta => d * d / 2.0,
        PointwiseLoss::Huber { delta } => delta * (d.abs() - delta / 2.0),
        PointwiseLoss::BinaryCrossEntropy => {
            -(t * x.ln().max(-100.0) + (1.0 - t) * (1.0 - x).ln().max(-100.0))
        }
    }
}

/// The host's reduced loss of `x` against `t` (same shape), weighted.
fn host_pointwise_reduced(
    loss: PointwiseLoss,
    x: &[f64],
    t: &[f64],
    w: Option<&[f64]>,
    reduction: Reduction,
) -> Vec<f64> {
    let each: Vec<f64> = (0..x.len())
        .map(|i| host_pointwise(loss, x[i], t[i]) * w.map_or(1.0, |w| w[i]))
        .collect();
    let n = each.len() as f64;
    match reduction {
        Reduction::None => each,
        Reduction::Sum => vec![each.iter().sum()],
        Reduction::Mean => vec![each.iter().sum::<f64>() / n],
    }
}

fn pointwise_losses() -> [PointwiseLoss; 6] {
    [
        PointwiseLoss::Mse,
        PointwiseLoss::SmoothL1 { beta: 1.0 },
        PointwiseLoss::SmoothL1 { beta: 0.0 },
        PointwiseLoss::Huber { delta: 0.5 },
        PointwiseLoss::Huber { delta: 2.0 },
        PointwiseLoss::BinaryCrossEntropy,
    ]
}

/// An input and a target for `loss`: probabilities (with 0 and 1, whose
/// logs are clamped) for binary cross entropy, values in [-2, 2] otherwise.
fn pointwise_operands(loss: PointwiseLoss, dtype: DType, shape: &[i64], seed: u64) -> (Host, Host) {
    if loss == PointwiseLoss::BinaryCrossEntropy {
        let mut x = Host::random_in(dtype, shape, seed, 0.05, 0.95);
        x.data[0] = 0.0;
        x.data[1] = 1.0;
        (x, Host::random_in(dtype, shape, seed + 1, 0.0, 1.0))
    } else {
        let x = Host::random_in(dtype, shape, seed, -2.0, 2.0);
        (x, Host::random_in(dtype, shape, seed + 1, -2.0, 2.0))
    }
}

all_modes! {
fn pointwise_losses_match_the_host_reference() {
    let shape = [3, 4];
    for (c, loss) in pointwise_losses().into_iter().enumerate() {
        for dtype in [DType::F32, DType::F64] {
            let (x, t) = pointwise_operands(loss, dtype, &shape, 900 + 2 * c as u64);
            let w = Host::random_in(dtype, &shape, 920 + c as u64, 0.5, 2.0);
            for weighted in [false, true] {
                let (wt, wh) = (weighted.then(|| w.tensor()), weighted.then_some(&w.data[..]));
                for reduction in [Reduction::None, Reduction::Mean, Reduction::Sum] {
                    let what = format!("{loss:?}({dtype}, weighted {weighted}, {reduction:?})");
                    let got = x.tensor().pointwise_loss(&t.tensor(), wt.as_ref(), loss, reduction);
                    let got = got.unwrap_or_else(|e| panic!("{what}: {e}"));
                    let want = host_pointwise_reduced(loss, &x.data, &t.data, wh, reduction);
                    let out_shape: &[i64] = if reduction == Reduction::None { &shape } else { &[] };
                    assert_close_tol(&what, &got, &Host::new(dtype, out_shape, want), (1e-5, 1e-5));
                }
            }
        }
    }
}
}

all_modes! {
fn pointwise_loss_gradients_match_central_differences() {
    let shape = [2, 5];
    for (c, loss) in pointwise_losses().into_iter().enumerate() {
        let (mut x, t) = pointwise_operands(loss, DType::F64, &shape, 940 + 2 * c as u64);
        if loss == PointwiseLoss::BinaryCrossEntropy {
            // Away from 0 and 1, where the clamped logs have no derivative.
            x.data[0] = 0.3;
            x.data[1] = 0.7;
        }
        let w = Host::random_in(DType::F64, &shape, 960 + c as u64, 0.5, 2.0);
        for reduction in [Reduction::None, Reduction::Mean, Reduction::Sum] {
            let out_shape: Vec<i64> = if reduction == Reduction::None { shape.to_vec() } else { vec![] };
            let gout = Host::random(DType::F64, &out_shape, 980 + c as u64);
            let got = gout.tensor().pointwise_loss_backward(&x.tensor(), &t.tensor(), Some(&w.tensor()), loss, reduction);
            let total = |xs: &[f64]| -> f64 {
                let each = host_pointwise_reduced(loss, xs, &t.data, Some(&w.data), reduction);
                each.iter().zip(&gout.data).map(|(l, g)| l * g).sum()
            };
            let want = central_differences(&x.data, 1e-6, total);
            let what = format!("{loss:?} backward ({reduction:?})");
            let got = got.unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_close_tol(&what, &got, &Host::new(DType::F64, &shape, want), (1e-6, 1e-6));
        }
    }
}
}

all_modes! {
fn pointwise_losses_reject_bad_operands_naming_the_loss() {
    let x = Host::random(DType::F32, &[2, 3], 990).tensor();
    let y = Host::random(DType::F32, &[2, 3], 991).tensor();
    let beta = PointwiseLoss::SmoothL1 { beta: -1.0 };
    assert_err(x.pointwise_loss(&y, None, beta, Reduction::Mean), "smooth_l1_loss", &["beta", ">= 0", "-1"]);
    let delta = PointwiseLoss::Huber { delta: 0.0 };
    assert_err(x.pointwise_loss(&y, None, delta, Reduction::Mean), "huber_loss", &["delta", "> 0"]);
    let row = Host::random(DType::F32, &[3], 992).tensor();
    let bce = PointwiseLoss::BinaryCrossEntropy;
    assert_err(x.pointwise_loss(&row, None, bce, Reduction::Mean), "binary_cross_entropy", &["float32[3]", "float32[2, 3]"]);
    let ints = Tensor::zeros(&[2, 3], DType::I32).unwrap();
    assert_err(ints.pointwise_loss(&y, None, PointwiseLoss::Mse, Reduction::Sum), "mse_loss", &["int32", "floating-point"]);
    assert_err(y.pointwise_loss_backward(&ints, &y, None, PointwiseLoss::Mse, Reduction::Sum), "mse_loss", &["int32"]);
}
}
