//! Matmul, softmax and its backward, layer norm, cross entropy and the
//! embedding backward against host references computed here with plain
//! loops in f64, in every mode.

mod common;

use common::builders::check;
use common::*;
use eagertpu::{DType, Reduction, Tensor};

/// `torch.matmul` on the host, and the largest sum |a_ik b_kj| (the scale of
/// the rounding error).
fn host_matmul(a: &Host, b: &Host) -> (Host, f64) {
    let k = a.shape[a.rank() - 1];
    // 1-d operands become [1, k] and [k, 1], and lose that dim again.
    let (mut sa, mut sb) = (a.shape.clone(), b.shape.clone());
    if a.rank() == 1 {
        sa.insert(0, 1);
    }
    if b.rank() == 1 {
        sb.push(1);
    }
    let (ra, rb) = (sa.len(), sb.len());
    let (m, n) = (sa[ra - 2], sb[rb - 1]);
    let batch = broadcast(&sa[..ra - 2], &sb[..rb - 2]);
    let full: Vec<i64> = batch.iter().copied().chain([m, n]).collect();
    let (mut data, mut scale) = (vec![], 0.0f64);
    for o in 0..numel(&full) {
        let idx = unravel(o, &full);
        let (bi, i, j) = (&idx[..batch.len()], idx[batch.len()], idx[batch.len() + 1]);
        let (mut s, mut abs) = (0.0, 0.0);
        for kk in 0..k {
            let ia: Vec<i64> = bi.iter().copied().chain([i, kk]).collect();
            let ib: Vec<i64> = bi.iter().copied().chain([kk, j]).collect();
            let p = a.data[broadcast_source(&ia, &sa)] * b.data[broadcast_source(&ib, &sb)];
            s += p;
            abs += p.abs();
        }
        data.push(s);
        scale = scale.max(abs);
    }
    let mut shape = batch;
    shape.extend((a.rank() > 1).then_some(m));
    shape.extend((b.rank() > 1).then_some(n));
    (Host::new(a.dtype, &shape, data), scale)
}

all_modes! {
fn matmul_follows_torch_matmul() {
    let shapes: [(&[i64], &[i64]); 11] = [
        (&[4], &[4]),
        (&[3, 4], &[4, 5]),
        (&[4], &[4, 5]),
        (&[3, 4], &[4]),
        (&[2, 3, 4], &[2, 4, 5]),
        (&[2, 1, 3, 4], &[5, 4, 2]),
        (&[2, 3, 4], &[4, 5]),
        (&[2, 3, 4], &[4]),
        (&[4], &[2, 4, 3]),
        (&[1, 3], &[3, 1]),
        (&[3, 64], &[64, 2]),
    ];
    for (s, (sa, sb)) in shapes.iter().enumerate() {
        for dtype in numeric() {
            let a = Host::random(dtype, sa, 100 + s as u64);
            let b = Host::random(dtype, sb, 200 + s as u64);
            // Ints wrap like PyTorch's (exact sums rounded by Host::new).
            // Floats: a K-long sum, so its error scales with sum |a_ik b_kj|.
            let (want, scale) = host_matmul(&a, &b);
            let w = format!("matmul({dtype}{sa:?}, {dtype}{sb:?})");
            check_tol(
                &w,
                a.tensor().matmul(&b.tensor()),
                &want,
                acc_tol(dtype, scale),
            );
        }
    }
}
}

/// Applies `f` to every line of `x` along `dim`.
fn host_lines(x: &Host, dim: usize, mut f: impl FnMut(&[f64]) -> Vec<f64>) -> Host {
    if x.rank() == 0 {
        return Host::new(x.dtype, &[], f(&x.data));
    }
    let mut data = vec![0.0; x.numel()];
    let mut outer = x.shape.clone();
    outer[dim] = 1;
    for o in 0..numel(&outer) {
        let mut idx = unravel(o, &outer);
        let mut pos = vec![];
        for j in 0..x.shape[dim] {
            idx[dim] = j;
            pos.push(ravel(&idx, &x.shape));
        }
        let line: Vec<f64> = pos.iter().map(|&p| x.data[p]).collect();
        for (&p, v) in pos.iter().zip(f(&line)) {
            data[p] = v;
        }
    }
    Host::new(x.dtype, &x.shape, data)
}

fn r_softmax(v: &[f64], log: bool) -> Vec<f64> {
    let m = r_max(v);
    let ls = m + v.iter().map(|x| (x - m).exp()).sum::<f64>().ln();
    let f = |l: f64| if log { l } else { l.exp() };
    v.iter().map(|x| f(x - ls)).collect()
}

all_modes! {
fn softmax_and_log_softmax_match_the_host_reference() {
    let cases: [(&[i64], &[i64]); 4] = [
        (&[2, 3, 4], &[0, 1, 2, -1, -2, -3]),
        (&[6], &[0, -1]),
        (&[4, 1], &[1]),
        (&[], &[0, -1]),
    ];
    for (c, (shape, dims)) in cases.iter().enumerate() {
        for dtype in FLOATS {
            let x = Host::random(dtype, shape, 300 + c as u64);
            for &d in dims.iter() {
                let r = shape.len().max(1) as i64;
                let nd = ((d + r) % r) as usize;
                let w = format!("softmax({dtype}{shape:?}, {d})");
                let got = x.tensor().softmax(d).unwrap_or_else(|e| panic!("{w}: {e}"));
                assert_close(&w, &got, &host_lines(&x, nd, |v| r_softmax(v, false)));
                // Each line sums to 1.
                let ones = host_reduce(&x, &[d], false, dtype, |_| 1.0);
                check(&format!("sum of {w}"), got.sum(&[d], false), &ones);
                let w = format!("log_softmax({dtype}{shape:?}, {d})");
                let want = host_lines(&x, nd, |v| r_softmax(v, true));
                check(&w, x.tensor().log_softmax(d), &want);
            }
        }
    }
    // Large inputs do not overflow: the max is subtracted first.
    let data = vec![1000.0, 999.0, 0.0, -1000.0, 1e4, 1e4, -1e4, 9990.0];
    for dtype in FLOATS {
        let x = Host::new(dtype, &[2, 4], data.clone());
        let want = host_lines(&x, 1, |v| r_softmax(v, false));
        assert!(want.data.iter().all(|v| v.is_finite()));
        check(
            &format!("softmax(large, {dtype})"),
            x.tensor().softmax(1),
            &want,
        );
        let want = host_lines(&x, 1, |v| r_softmax(v, true));
        check(
            &format!("log_softmax(large, {dtype})"),
            x.tensor().log_softmax(-1),
            &want,
        );
    }
}
}

/// Layer norm over the trailing `n` elements of each row (biased variance).
fn host_layer_norm(x: &Host, n: usize, w: Option<&Host>, b: Option<&Host>, eps: f64) -> Host {
    let mut data = vec![];
    for row in x.data.chunks(n) {
        let (m, var) = (r_mean(row), r_var(row, 0.0));
        for (j, v) in row.iter().enumerate() {
            let y = (v - m) / (var + eps).sqrt();
            data.push(y * w.map_or(1.0, |w| w.data[j]) + b.map_or(0.0, |b| b.data[j]));
        }
    }
    Host::new(x.dtype, &x.shape, data)
}

all_modes! {
fn layer_norm_matches_the_host_reference() {
    let cases: [(&[i64], &[i64]); 4] = [
        (&[4, 6], &[6]),
        (&[2, 3, 4], &[3, 4]),
        (&[2, 3, 4], &[4]),
        (&[5], &[5]),
    ];
    for (c, (shape, norm)) in cases.iter().enumerate() {
        for dtype in FLOATS {
            let mut x = Host::random(dtype, shape, 400 + c as u64);
            // A constant row has variance 0: the output is the bias.
            let n = numel(norm);
            x.data[..n].iter_mut().for_each(|v| *v = 1.5);
            let w = Host::random(dtype, norm, 410 + c as u64);
            let b = Host::random(dtype, norm, 420 + c as u64);
            for (wt, bs) in [(false, false), (true, false), (false, true), (true, true)] {
                for eps in [1e-5, 0.5] {
                    let (wh, bh) = (wt.then_some(&w), bs.then_some(&b));
                    let (wd, bd) = (wh.map(Host::tensor), bh.map(Host::tensor));
                    let got = x.tensor().layer_norm(norm, wd.as_ref(), bd.as_ref(), eps);
                    let what = format!("layer_norm({dtype}{shape:?}, {norm:?}, {wt}, {bs}, {eps})");
                    check(&what, got, &host_layer_norm(&x, n, wh, bh, eps));
                }
            }
        }
    }
}
}

/// Cross-entropy on the host (PyTorch's ignore_index -100: a loss of 0, and
/// the mean is over the targets not ignored).
fn host_cross_entropy(logits: &Host, target: &[f64], reduction: Reduction) -> Host {
    let c = *logits.shape.last().unwrap() as usize;
    let mut losses = vec![];
    for (row, &t) in logits.data.chunks(c).zip(target) {
        losses.push(if t == -100.0 {
            0.0
        } else {
            r_logsumexp(row) - row[t as usize]
        });
    }
    let valid = target.iter().filter(|&&t| t != -100.0).count() as f64;
    let (dtype, tshape) = (logits.dtype, &logits.shape[..logits.rank() - 1]);
    match reduction {
        Reduction::None => Host::new(dtype, tshape, losses),
        Reduction::Sum => Host::new(dtype, &[], vec![r_sum(&losses)]),
        // All ignored is 0/0 = NaN, as in PyTorch.
        Reduction::Mean => Host::new(dtype, &[], vec![r_sum(&losses) / valid]),
    }
}

all_modes! {
fn cross_entropy_matches_the_host_reference() {
    let targets: [(&[i64], Vec<f64>); 5] = [
        (&[6, 5], vec![0.0, 4.0, -100.0, 2.0, 2.0, -100.0]),
        (&[3, 7], vec![6.0, 0.0, 3.0]),
        (&[2, 3], vec![-100.0, -100.0]),
        (&[5], vec![3.0]),
        (&[4], vec![-100.0]),
    ];
    for (c, (shape, t)) in targets.iter().enumerate() {
        for dtype in FLOATS {
            let x = Host::random(dtype, shape, 500 + c as u64);
            for tdtype in [DType::I32, DType::I64] {
                let target = Host::new(tdtype, &shape[..shape.len() - 1], t.clone()).tensor();
                for reduction in [Reduction::Mean, Reduction::Sum, Reduction::None] {
                    let got = x.tensor().cross_entropy_with(&target, reduction);
                    let w =
                        format!("cross_entropy({dtype}{shape:?}, {tdtype}{t:?}, {reduction:?})");
                    check(&w, got, &host_cross_entropy(&x, t, reduction));
                }
                let want = host_cross_entropy(&x, t, Reduction::Mean);
                check(
                    "cross_entropy (mean)",
                    x.tensor().cross_entropy(&target),
                    &want,
                );
            }
        }
    }
}
}

/// Applies `f` to each pair of lines of `a` and `b` (one shape) along `dim`.
fn host_line_pairs(a: &Host, b: &Host, dim: usize, f: impl Fn(&[f64], &[f64]) -> Vec<f64>) -> Host {
    let mut data = vec![0.0; a.numel()];
    let index = Host::new(
        DType::F64,
        &a.shape,
        (0..a.numel()).map(|i| i as f64).collect(),
    );
    // host_lines hands each line's positions in order: gather both lines from them.
    host_lines(&index, dim, |pos| {
        let ga: Vec<f64> = pos.iter().map(|&p| a.data[p as usize]).collect();
        let gb: Vec<f64> = pos.iter().map(|&p| b.data[p as usize]).collect();
        for (&p, v) in pos.iter().zip(f(&ga, &gb)) {
            data[p as usize] = v;
        }
        pos.to_vec()
    });
    Host::new(a.dtype, &a.shape, data)
}

all_modes! {
fn softmax_backward_matches_the_host_reference() {
    for (c, (shape, dim)) in [(&[2, 3, 4][..], -1i64), (&[2, 3, 4], 1), (&[5], 0), (&[], 0)].into_iter().enumerate() {
        for dtype in [DType::F32, DType::F64, DType::BF16] {
            let x = Host::random(dtype, shape, 400 + c as u64);
            let g = Host::random(dtype, shape, 500 + c as u64);
            let nd = if shape.is_empty() { 0 } else { dim.rem_euclid(shape.len() as i64) as usize };
            for log in [false, true] {
                // The forward result, rounded to dtype as the device holds it.
                let y = Host::new(dtype, shape, host_lines(&x, nd, |v| r_softmax(v, log)).data);
                let want = host_line_pairs(&g, &y, nd, |g, y| {
                    if log {
                        let s: f64 = g.iter().sum();
                        g.iter().zip(y).map(|(g, y)| g - y.exp() * s).collect()
                    } else {
                        let s: f64 = g.iter().zip(y).map(|(g, y)| g * y).sum();
                        g.iter().zip(y).map(|(g, y)| y * (g - s)).collect()
                    }
                });
                let w = format!("softmax_backward({dtype}{shape:?}, dim={dim}, log={log})");
                let got = Tensor::softmax_backward(&g.tensor(), &y.tensor(), dim, log);
                let (rtol, atol) = tolerance(dtype);
                check_tol(&w, got, &want, (rtol, atol + 4.0 * rtol));
            }
        }
    }
    let x = Host::random(DType::F32, &[2, 3], 1).tensor();
    assert_err(Tensor::softmax_backward(&x, &x, 2, false), "softmax_backward", &["2"]);
}
}

/// The embedding backward on the host: each row of `grad` added to the
/// weight row its index names, skipping `padding_idx` (already counted from
/// the front), divided by its index's count with `scale_grad_by_freq`.
fn host_embedding_backward(
    grad: &Host,
    indices: &[i64],
    num_weights: i64,
    padding_idx: Option<i64>,
    scale_grad_by_freq: bool,
) -> Host {
    let width = *grad.shape.last().unwrap() as usize;
    let mut count = vec![0.0; num_weights as usize];
    for &i in indices {
        count[i as usize] += 1.0;
    }
    let mut data = vec![0.0; num_weights as usize * width];
    for (r, &i) in indices.iter().enumerate() {
        if Some(i) == padding_idx {
            continue;
        }
        let scale = if scale_grad_by_freq {
            count[i as usize]
        } else {
            1.0
        };
        for c in 0..width {
            data[i as usize * width + c] += grad.data[r * width + c] / scale;
        }
    }
    Host::new(grad.dtype, &[num_weights, width as i64], data)
}

all_modes! {
fn embedding_backward_sums_rows_into_their_indices() {
    // Repeated indices (3 three times, 1 twice), the padding row among them.
    let indices: [i64; 8] = [1, 3, 3, 9, 0, 1, 3, 7];
    // (indices' shape, padding_idx, scale_grad_by_freq)
    let cases: [(&[i64], Option<i64>, bool); 6] = [
        (&[8], None, false),
        (&[2, 4], Some(3), false),
        (&[2, 4], None, true),
        (&[4, 2], Some(1), true),
        // A negative padding_idx counts from the end: -1 is row 9.
        (&[8], Some(-1), true),
        (&[2, 2, 2], Some(0), false),
    ];
    for (c, &(shape, padding_idx, scale)) in cases.iter().enumerate() {
        let padding_row = padding_idx.map(|p| if p < 0 { p + 10 } else { p });
        for (dtype, index_dtype) in [(DType::F32, DType::I64), (DType::F64, DType::I32), (DType::BF16, DType::I64)] {
            let mut grad_shape = shape.to_vec();
            grad_shape.push(5);
            let grad = Host::random(dtype, &grad_shape, 40 + c as u64);
            let index = Host::new(index_dtype, shape, indices.iter().map(|&i| i as f64).collect());
            let want = host_embedding_backward(&grad, &indices, 10, padding_row, scale);
            let what = format!("embedding_backward {dtype} indices {index_dtype}{shape:?} padding_idx {padding_idx:?} scale {scale}");
            check(&what, grad.tensor().embedding_backward(&index.tensor(), 10, padding_idx, scale), &want);
        }
    }
    // No indices: a gradient of zeros.
    let grad = Host::new(DType::F32, &[0, 5], vec![]);
    let index = Host::new(DType::I64, &[0], vec![]);
    let want = Host::new(DType::F32, &[4, 5], vec![0.0; 20]);
    check("embedding_backward of no indices", grad.tensor().embedding_backward(&index.tensor(), 4, Some(2), true), &want);
    // A NaN gradient looked up at the padding row stays out.
    let grad = Host::new(DType::F32, &[2, 1], vec![f64::NAN, 2.0]);
    let index = Host::new(DType::I64, &[2], vec![0.0, 1.0]);
    let want = Host::new(DType::F32, &[2, 1], vec![0.0, 2.0]);
    check("embedding_backward NaN at padding_idx", grad.tensor().embedding_backward(&index.tensor(), 2, Some(0), false), &want);
}
}

all_modes! {
fn bad_embedding_backward_is_an_error_naming_the_shapes() {
    let grad = Tensor::zeros(&[2, 3, 4], DType::F32).unwrap();
    let index = Tensor::zeros(&[2, 3], DType::I64).unwrap();
    assert_err(
        grad.embedding_backward(&Tensor::zeros(&[2, 3], DType::F32).unwrap(), 5, None, false),
        "embedding_backward",
        &["integer indices", "float32[2, 3]"],
    );
    assert_err(
        grad.embedding_backward(&Tensor::zeros(&[4], DType::I64).unwrap(), 5, None, false),
        "embedding_backward",
        &["float32[2, 3, 4]", "int64[4]"],
    );
    assert_err(
        grad.embedding_backward(&index, 5, Some(5), false),
        "embedding_backward",
        &["padding_idx 5", "[-5, 4]"],
    );
    assert_err(grad.embedding_backward(&index, -1, None, false), "embedding_backward", &["num_weights -1"]);
}
}
