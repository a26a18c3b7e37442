//! Layer norm and batch norm with their statistics and their gradients
//! (`native_layer_norm`, `native_batch_norm` and their backwards, as
//! PyTorch's autograd calls them), against host references in every mode:
//! the statistics computed row by row or channel by channel, the gradients
//! by central differences of the host's forward in f64 (batch norm's by
//! their formulas, themselves checked against central differences).

mod common;

use common::*;
use eagertpu::{DType, Tensor};

/// The host's layer norm of each row of `n` (`x` flat), with its mean and
/// 1 / sqrt(var + eps) per row.
fn host_forward(
    x: &[f64],
    n: usize,
    w: &[f64],
    b: &[f64],
    eps: f64,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (mut y, mut means, mut rstds) = (vec![], vec![], vec![]);
    for row in x.chunks(n) {
        let mean = row.iter().sum::<f64>() / n as f64;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
        let rstd = 1.0 / (var + eps).sqrt();
        for (j, v) in row.iter().enumerate() {
            y.push((v - mean) * rstd * w[j] + b[j]);
        }
        means.push(mean);
        rstds.push(rstd);
    }
    (y, means, rstds)
}

/// The gradient of `sum(dy * layer_norm(x, w, b))` with respect to `wrt`
/// (0: x, 1: w, 2: b), by central differences.
fn host_gradient(
    x: &[f64],
    n: usize,
    w: &[f64],
    b: &[f64],
    eps: f64,
    dy: &[f64],
    wrt: usize,
) -> Vec<f64> {
    let loss = |x: &[f64], w: &[f64], b: &[f64]| -> f64 {
        let (y, _, _) = host_forward(x, n, w, b, eps);
        y.iter().zip(dy).map(|(a, g)| a * g).sum()
    };
    let args = [x, w, b];
    central_differences(args[wrt], 1e-5, |v| {
        let mut at = args;
        at[wrt] = v;
        loss(at[0], at[1], at[2])
    })
}

/// (input shape, normalized shape).
const CASES: [(&[i64], &[i64]); 3] = [(&[3, 4], &[4]), (&[2, 3, 4], &[3, 4]), (&[5], &[5])];

fn stat_shape(shape: &[i64], norm: &[i64]) -> Vec<i64> {
    let lead = shape.len() - norm.len();
    shape
        .iter()
        .enumerate()
        .map(|(i, &s)| if i < lead { s } else { 1 })
        .collect()
}

all_modes! {
fn layer_norm_with_stats_matches_the_host_reference() {
    for (c, (shape, norm)) in CASES.iter().enumerate() {
        for dtype in FLOATS {
            let n = numel(norm);
            let x = Host::random(dtype, shape, 700 + c as u64);
            let w = Host::random(dtype, norm, 710 + c as u64);
            let b = Host::random(dtype, norm, 720 + c as u64);
            let eps = 1e-5;
            let (wt, bt) = (w.tensor(), b.tensor());
            let (y, mean, rstd) = x.tensor().layer_norm_with_stats(norm, Some(&wt), Some(&bt), eps).unwrap();
            let (want_y, want_mean, want_rstd) = host_forward(&x.data, n, &w.data, &b.data, eps);
            let what = format!("layer_norm_with_stats({dtype}{shape:?}, {norm:?})");
            // The statistics are float32 for 16-bit inputs, as in PyTorch.
            let stat = if matches!(dtype, DType::F16 | DType::BF16) { DType::F32 } else { dtype };
            assert_eq!((y.dtype(), mean.dtype(), rstd.dtype()), (dtype, stat, stat), "{what}");
            let stats = stat_shape(shape, norm);
            assert_close(&format!("{what} y"), &y, &Host::new(dtype, shape, want_y));
            // Of 16-bit inputs: computed from the rounded input, in float32.
            let tol = tolerance(dtype);
            assert_close_tol(&format!("{what} mean"), &mean, &Host::new(stat, &stats, want_mean), tol);
            assert_close_tol(&format!("{what} rstd"), &rstd, &Host::new(stat, &stats, want_rstd), tol);
            // No weight or bias: the plain normalization.
            let (plain, _, _) = x.tensor().layer_norm_with_stats(norm, None, None, eps).unwrap();
            let (want_plain, _, _) = host_forward(&x.data, n, &vec![1.0; n], &vec![0.0; n], eps);
            assert_close(&format!("{what} without weight and bias"), &plain, &Host::new(dtype, shape, want_plain));
        }
    }
}
}

all_modes! {
fn layer_norm_backward_matches_central_differences() {
    for (c, (shape, norm)) in CASES.iter().enumerate() {
        for dtype in [DType::F32, DType::F64, DType::BF16] {
            let n = numel(norm);
            let x = Host::random(dtype, shape, 730 + c as u64);
            let w = Host::random(dtype, norm, 740 + c as u64);
            let b = Host::random(dtype, norm, 750 + c as u64);
            let dy = Host::random(dtype, shape, 760 + c as u64);
            let eps = 1e-5;
            let (xt, wt, bt) = (x.tensor(), w.tensor(), b.tensor());
            let (_, mean, rstd) = xt.layer_norm_with_stats(norm, Some(&wt), Some(&bt), eps).unwrap();
            let grads = dy
                .tensor()
                .layer_norm_backward(&xt, norm, &mean, &rstd, Some(&wt), Some(&bt), [true; 3])
                .unwrap();
            let what = format!("layer_norm_backward({dtype}{shape:?}, {norm:?})");
            let shapes: [&[i64]; 3] = [shape, norm, norm];
            for (k, got) in grads.iter().enumerate() {
                let got = got.as_ref().unwrap_or_else(|| panic!("{what}: gradient {k} missing"));
                let want = host_gradient(&x.data, n, &w.data, &b.data, eps, &dy.data, k);
                // bf16 inputs: their gradients are rounded to bf16 once.
                let tol = if dtype == DType::BF16 { (2e-2, 2e-2) } else { (1e-4, 1e-4) };
                assert_close_tol(&format!("{what} gradient {k}"), got, &Host::new(dtype, shapes[k], want), tol);
                assert_eq!(got.dtype(), dtype, "{what} gradient {k}");
            }
            // Only what is asked for, and nothing for a missing weight.
            let only_input = dy
                .tensor()
                .layer_norm_backward(&xt, norm, &mean, &rstd, None, Some(&bt), [true, true, false])
                .unwrap();
            assert!(only_input[0].is_some() && only_input[1].is_none() && only_input[2].is_none(), "{what}");
            let (_, mean1, rstd1) = xt.layer_norm_with_stats(norm, None, Some(&bt), eps).unwrap();
            let unweighted = dy
                .tensor()
                .layer_norm_backward(&xt, norm, &mean1, &rstd1, None, Some(&bt), [true, false, false])
                .unwrap();
            let ones = vec![1.0; n];
            let want = host_gradient(&x.data, n, &ones, &b.data, eps, &dy.data, 0);
            let tol = if dtype == DType::BF16 { (2e-2, 2e-2) } else { (1e-4, 1e-4) };
            assert_close_tol(&format!("{what} without a weight"), unweighted[0].as_ref().unwrap(), &Host::new(dtype, shape, want), tol);
        }
    }
}
}

all_modes! {
fn layer_norm_with_stats_rejects_bad_input_naming_it() {
    let x = Host::random(DType::F32, &[2, 4], 770).tensor();
    let w = Host::random(DType::F32, &[3], 771).tensor();
    let r = x.layer_norm_with_stats(&[4], Some(&w), None, 1e-5);
    assert_err(r, "layer_norm", &["float32[3]", "[4]"]);
    let r = x.layer_norm_with_stats(&[3], None, None, 1e-5);
    assert_err(r, "layer_norm", &["normalized_shape", "[3]", "float32[2, 4]"]);
    let ints = Tensor::zeros(&[2, 4], DType::I64).unwrap();
    assert_err(ints.layer_norm_with_stats(&[4], None, None, 1e-5), "layer_norm", &["int64", "floating-point"]);
    let (_, mean, rstd) = x.layer_norm_with_stats(&[4], None, None, 1e-5).unwrap();
    let bad_grad = Host::random(DType::F32, &[2, 3], 772).tensor();
    let r = bad_grad.layer_norm_backward(&x, &[4], &mean, &rstd, None, None, [true; 3]);
    assert_err(r, "layer_norm_backward", &["grad_out float32[2, 3]", "[2, 4]"]);
}
}

// ------------------------------------------------------------ batch norm ----

/// Batch norm inputs `[N, C, ...]`: rank 2, 3 and 4, and one channel of a
/// single value (`n = 1`: the running variance takes the biased one).
const BN_SHAPES: [&[i64]; 4] = [&[4, 3], &[1, 3], &[2, 3, 5], &[2, 3, 2, 3]];

/// The channel of each element of an input of `shape` (row-major).
fn channel_of(shape: &[i64]) -> Vec<usize> {
    let c = shape[1] as usize;
    let spatial = numel(&shape[2..]);
    (0..numel(shape)).map(|i| (i / spatial) % c).collect()
}

/// Per channel, the mean of the elements of `v` in that channel.
fn channel_means(v: &[f64], ch: &[usize], c: usize) -> Vec<f64> {
    let (mut sum, mut count) = (vec![0.0; c], vec![0usize; c]);
    for (x, &k) in v.iter().zip(ch) {
        sum[k] += x;
        count[k] += 1;
    }
    sum.iter().zip(&count).map(|(s, &n)| s / n as f64).collect()
}

/// The host's batch norm: `y`, and the mean and variance it normalized by
/// (the batch's, the variance biased, or the `running` ones).
fn host_batch_norm(
    x: &[f64],
    ch: &[usize],
    c: usize,
    w: &[f64],
    b: &[f64],
    running: Option<(&[f64], &[f64])>,
    eps: f64,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (mean, var) = match running {
        Some((m, v)) => (m.to_vec(), v.to_vec()),
        None => {
            let mean = channel_means(x, ch, c);
            let squares: Vec<f64> = x
                .iter()
                .zip(ch)
                .map(|(v, &k)| (v - mean[k]).powi(2))
                .collect();
            (mean, channel_means(&squares, ch, c))
        }
    };
    let y = x
        .iter()
        .zip(ch)
        .map(|(v, &k)| (v - mean[k]) / (var[k] + eps).sqrt() * w[k] + b[k])
        .collect();
    (y, mean, var)
}

/// The gradients of batch norm by their formulas: with `xhat = (x - mean)
/// invstd`, per channel, d x = w invstd (dy - mean(dy) - xhat mean(dy xhat))
/// in training (w invstd dy in eval), d w = sum(dy xhat), d b = sum(dy).
#[allow(clippy::too_many_arguments)]
fn host_batch_norm_backward(
    x: &[f64],
    dy: &[f64],
    ch: &[usize],
    c: usize,
    w: &[f64],
    mean: &[f64],
    invstd: &[f64],
    training: bool,
) -> [Vec<f64>; 3] {
    let xhat: Vec<f64> = x
        .iter()
        .zip(ch)
        .map(|(v, &k)| (v - mean[k]) * invstd[k])
        .collect();
    let dy_xhat: Vec<f64> = dy.iter().zip(&xhat).map(|(g, h)| g * h).collect();
    let (mean_dy, mean_dy_xhat) = (channel_means(dy, ch, c), channel_means(&dy_xhat, ch, c));
    let grad_x = (0..x.len())
        .map(|i| {
            let k = ch[i];
            let g = if training {
                dy[i] - mean_dy[k] - xhat[i] * mean_dy_xhat[k]
            } else {
                dy[i]
            };
            w[k] * invstd[k] * g
        })
        .collect();
    let count = (x.len() / c) as f64;
    [
        grad_x,
        mean_dy_xhat.iter().map(|m| m * count).collect(),
        mean_dy.iter().map(|m| m * count).collect(),
    ]
}

/// Random running statistics for `c` channels: means in [-1, 1], variances
/// in [0.5, 2].
fn running_stats(dtype: DType, c: i64, seed: u64) -> (Host, Host) {
    (
        Host::random_in(dtype, &[c], seed, -1.0, 1.0),
        Host::random_in(dtype, &[c], seed + 1, 0.5, 2.0),
    )
}

all_modes! {
fn batch_norm_with_stats_matches_the_host_reference() {
    let (momentum, eps) = (0.1, 1e-5);
    for (case, shape) in BN_SHAPES.iter().enumerate() {
        for dtype in [DType::F32, DType::BF16] {
            let seed = 800 + 10 * case as u64;
            let (c, ch) = (shape[1], channel_of(shape));
            let cu = c as usize;
            let x = Host::random(dtype, shape, seed);
            let (w, b) = (Host::random(dtype, &[c], seed + 1), Host::random(dtype, &[c], seed + 2));
            // Running statistics in the input's dtype, or float32 (16-bit
            // inputs keep them in float32 under mixed precision).
            let rdt = if case % 2 == 0 { dtype } else { DType::F32 };
            let (rm, rv) = running_stats(rdt, c, seed + 3);
            let (xt, wt, bt, rmt, rvt) = (x.tensor(), w.tensor(), b.tensor(), rm.tensor(), rv.tensor());
            let (ones, zeros) = (vec![1.0; cu], vec![0.0; cu]);
            let tol = tolerance(dtype);
            for affine in [true, false] {
                let (wo, bo) = if affine { (Some(&wt), Some(&bt)) } else { (None, None) };
                let (wh, bh) = if affine { (&w.data, &b.data) } else { (&ones, &zeros) };
                let what = format!("batch_norm({dtype}{shape:?}, affine {affine})");

                // Training: the batch's statistics, the running ones updated.
                let out = xt.batch_norm_with_stats(wo, bo, Some(&rmt), Some(&rvt), true, momentum, eps).unwrap();
                let (y, mean, var) = host_batch_norm(&x.data, &ch, cu, wh, bh, None, eps);
                assert_close_tol(&format!("{what} training y"), &out.y, &Host::new(dtype, shape, y), tol);
                let invstd: Vec<f64> = var.iter().map(|v| 1.0 / (v + eps).sqrt()).collect();
                // Float32 for 16-bit inputs, computed from the rounded input.
                let stat_tol = (1e-5, 1e-5);
                assert_close_tol(&format!("{what} save_mean"), &out.save_mean, &Host::new(DType::F32, &[c], mean.clone()), stat_tol);
                assert_close_tol(&format!("{what} save_invstd"), &out.save_invstd, &Host::new(DType::F32, &[c], invstd), stat_tol);
                let n = numel(shape) / cu;
                let unbias = if n > 1 { n as f64 / (n - 1) as f64 } else { 1.0 };
                let new_rm: Vec<f64> = (0..cu).map(|k| rm.data[k] * (1.0 - momentum) + mean[k] * momentum).collect();
                let new_rv: Vec<f64> =
                    (0..cu).map(|k| rv.data[k] * (1.0 - momentum) + var[k] * momentum * unbias).collect();
                let got_rm = out.running_mean.as_ref().unwrap_or_else(|| panic!("{what}: no running_mean"));
                let got_rv = out.running_var.as_ref().unwrap_or_else(|| panic!("{what}: no running_var"));
                assert_close_tol(&format!("{what} running_mean"), got_rm, &Host::new(rdt, &[c], new_rm), tolerance(rdt));
                assert_close_tol(&format!("{what} running_var"), got_rv, &Host::new(rdt, &[c], new_rv), tolerance(rdt));
                // The running statistics given are not written.
                assert_eq!(Host::of(&rmt), rm, "{what}: running_mean changed");

                // Training without running statistics: none returned.
                let out = xt.batch_norm_with_stats(wo, bo, None, None, true, momentum, eps).unwrap();
                assert!(out.running_mean.is_none() && out.running_var.is_none(), "{what}");
                let (y, _, _) = host_batch_norm(&x.data, &ch, cu, wh, bh, None, eps);
                assert_close_tol(&format!("{what} training y, no running stats"), &out.y, &Host::new(dtype, shape, y), tol);

                // Eval: the running statistics; nothing saved or updated.
                let out = xt.batch_norm_with_stats(wo, bo, Some(&rmt), Some(&rvt), false, momentum, eps).unwrap();
                let (y, _, _) = host_batch_norm(&x.data, &ch, cu, wh, bh, Some((&rm.data, &rv.data)), eps);
                assert_close_tol(&format!("{what} eval y"), &out.y, &Host::new(dtype, shape, y), tol);
                assert_eq!((out.save_mean.shape(), out.save_invstd.shape()), (&[0i64][..], &[0i64][..]), "{what}");
                assert_eq!((out.save_mean.dtype(), out.save_invstd.dtype()), (DType::F32, DType::F32), "{what}");
                assert!(out.running_mean.is_none() && out.running_var.is_none(), "{what}");
            }
        }
    }
}
}

all_modes! {
fn batch_norm_backward_matches_the_host_formulas() {
    let eps = 1e-5;
    for (case, shape) in BN_SHAPES.iter().enumerate() {
        for dtype in [DType::F32, DType::BF16] {
            let seed = 900 + 10 * case as u64;
            let (c, ch) = (shape[1], channel_of(shape));
            let cu = c as usize;
            let x = Host::random(dtype, shape, seed);
            let dy = Host::random(dtype, shape, seed + 1);
            let (w, b) = (Host::random(dtype, &[c], seed + 2), Host::random(dtype, &[c], seed + 3));
            let (rm, rv) = running_stats(dtype, c, seed + 4);
            let (xt, dyt, wt, bt, rmt, rvt) = (x.tensor(), dy.tensor(), w.tensor(), b.tensor(), rm.tensor(), rv.tensor());
            let ones = vec![1.0; cu];
            // bf16 inputs: their gradients are rounded to bf16 once.
            let tol = if dtype == DType::BF16 { (2e-2, 2e-2) } else { (1e-4, 1e-4) };
            for (training, affine) in [(true, true), (true, false), (false, true), (false, false)] {
                let wo = affine.then_some(&wt);
                let wh = if affine { &w.data } else { &ones };
                let what = format!("batch_norm_backward({dtype}{shape:?}, training {training}, affine {affine})");
                let out = xt
                    .batch_norm_with_stats(wo, affine.then_some(&bt), Some(&rmt), Some(&rvt), training, 0.1, eps)
                    .unwrap();
                let (gx, gw, gb) = dyt
                    .batch_norm_backward(
                        &xt, wo, Some(&rmt), Some(&rvt), Some(&out.save_mean), Some(&out.save_invstd),
                        training, eps, [true; 3],
                    )
                    .unwrap();
                let running = (!training).then_some((&rm.data[..], &rv.data[..]));
                let (_, mean, var) = host_batch_norm(&x.data, &ch, cu, wh, &ones, running, eps);
                let invstd: Vec<f64> = var.iter().map(|v| 1.0 / (v + eps).sqrt()).collect();
                let want = host_batch_norm_backward(&x.data, &dy.data, &ch, cu, wh, &mean, &invstd, training);

                // The formulas themselves, against central differences of
                // the host's forward (in training, through the batch's
                // statistics).
                let loss = |x: &[f64], w: &[f64], b: &[f64]| -> f64 {
                    let (y, _, _) = host_batch_norm(x, &ch, cu, w, b, running, eps);
                    y.iter().zip(&dy.data).map(|(a, g)| a * g).sum()
                };
                let zeros = vec![0.0; cu];
                let args: [&[f64]; 3] = [&x.data, wh, &zeros];
                for (k, formula) in want.iter().enumerate() {
                    let numeric = central_differences(args[k], 1e-5, |v| {
                        let mut at = args;
                        at[k] = v;
                        loss(at[0], at[1], at[2])
                    });
                    for (f, n) in formula.iter().zip(&numeric) {
                        assert!((f - n).abs() <= 1e-4 * (1.0 + n.abs()), "{what}: host formula {k}: {f} vs {n}");
                    }
                }

                let shapes: [&[i64]; 3] = [shape, &[c], &[c]];
                for (k, got) in [gx, gw, gb].iter().enumerate() {
                    let got = got.as_ref().unwrap_or_else(|| panic!("{what}: gradient {k} missing"));
                    assert_close_tol(&format!("{what} gradient {k}"), got, &Host::new(dtype, shapes[k], want[k].clone()), tol);
                }

                // Only what is asked for.
                let (gx, gw, gb) = dyt
                    .batch_norm_backward(
                        &xt, wo, Some(&rmt), Some(&rvt), Some(&out.save_mean), Some(&out.save_invstd),
                        training, eps, [false, true, false],
                    )
                    .unwrap();
                assert!(gx.is_none() && gw.is_some() && gb.is_none(), "{what}");
            }
        }
    }
}
}

all_modes! {
fn batch_norm_rejects_bad_input_naming_it() {
    let x = Host::random(DType::F32, &[5], 990).tensor();
    let r = x.batch_norm_with_stats(None, None, None, None, true, 0.1, 1e-5);
    assert_err(r, "batch_norm", &["float32[5]", "at least 2 dims"]);
    let x = Host::random(DType::F32, &[2, 3, 4], 991).tensor();
    let w = Host::random(DType::F32, &[4], 992).tensor();
    let r = x.batch_norm_with_stats(Some(&w), None, None, None, true, 0.1, 1e-5);
    assert_err(r, "batch_norm", &["weight float32[4]", "[3]", "float32[2, 3, 4]"]);
    let r = x.batch_norm_with_stats(None, None, None, None, false, 0.1, 1e-5);
    assert_err(r, "batch_norm", &["running_mean and running_var", "eval"]);
    let ints = Tensor::zeros(&[2, 3], DType::I64).unwrap();
    let r = ints.batch_norm_with_stats(None, None, None, None, true, 0.1, 1e-5);
    assert_err(r, "batch_norm", &["int64", "floating-point"]);
    let out = x.batch_norm_with_stats(None, None, None, None, true, 0.1, 1e-5).unwrap();
    let (m, i) = (Some(&out.save_mean), Some(&out.save_invstd));
    let bad_grad = Host::random(DType::F32, &[2, 3, 5], 993).tensor();
    let r = bad_grad.batch_norm_backward(&x, None, None, None, m, i, true, 1e-5, [true; 3]);
    assert_err(r, "batch_norm_backward", &["grad_out float32[2, 3, 5]", "[2, 3, 4]"]);
    let r = out.y.batch_norm_backward(&x, None, None, None, None, None, true, 1e-5, [true; 3]);
    assert_err(r, "batch_norm_backward", &["save_mean and save_invstd"]);
}
}
