//! Layer norm with its statistics and its gradients (`native_layer_norm` and
//! its backward, as PyTorch's autograd calls them), against host references
//! in every mode: the statistics computed row by row, the gradients by
//! central differences of the host's forward in f64.

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
