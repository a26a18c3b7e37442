//! Reductions, matmul and the composite nn ops against host references
//! computed here with plain loops in f64: every op, every dtype it supports,
//! keepdim, negative and multiple dims, PyTorch's dtype rules and edge values.

mod common;

use common::*;
use eagertpu::{DType, Reduction, Tensor};

/// Which dims of a rank-`rank` tensor `dims` reduces (all when empty);
/// normalized here, independently of the runtime.
fn reduced_mask(dims: &[i64], rank: usize) -> Vec<bool> {
    let r = rank.max(1) as i64;
    let mut mask = vec![dims.is_empty(); rank];
    for &d in dims {
        let d = if d < 0 { d + r } else { d };
        assert!((0..r).contains(&d), "bad dim in a test case");
        if rank > 0 {
            mask[d as usize] = true;
        }
    }
    mask
}

/// Reduces `x` over `dims` with `f`, which gets each group's elements in
/// increasing index order; the result is rounded to `out`.
fn host_reduce(
    x: &Host,
    dims: &[i64],
    keepdim: bool,
    out: DType,
    f: impl Fn(&[f64]) -> f64,
) -> Host {
    let mask = reduced_mask(dims, x.rank());
    let kept =
        |v: &[i64]| -> Vec<i64> { (0..x.rank()).filter(|&d| !mask[d]).map(|d| v[d]).collect() };
    let out_shape: Vec<i64> = (0..x.rank())
        .filter(|&d| !mask[d] || keepdim)
        .map(|d| if mask[d] { 1 } else { x.shape[d] })
        .collect();
    let mut groups = vec![vec![]; numel(&kept(&x.shape))];
    for (i, &v) in x.data.iter().enumerate() {
        groups[ravel(&kept(&unravel(i, &x.shape)), &kept(&x.shape))].push(v);
    }
    Host::new(out, &out_shape, groups.iter().map(|g| f(g)).collect())
}

fn r_sum(v: &[f64]) -> f64 {
    v.iter().sum()
}

fn r_mean(v: &[f64]) -> f64 {
    r_sum(v) / v.len() as f64
}

fn r_prod(v: &[f64]) -> f64 {
    v.iter().product()
}

/// amax: NaN propagates.
fn r_max(v: &[f64]) -> f64 {
    if v.iter().any(|x| x.is_nan()) {
        return f64::NAN;
    }
    v.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x))
}

fn r_min(v: &[f64]) -> f64 {
    if v.iter().any(|x| x.is_nan()) {
        return f64::NAN;
    }
    v.iter().fold(f64::INFINITY, |m, &x| m.min(x))
}

fn r_var(v: &[f64], correction: f64) -> f64 {
    let m = r_mean(v);
    let ss: f64 = v.iter().map(|x| (x - m) * (x - m)).sum();
    ss / (v.len() as f64 - correction).max(0.0)
}

fn r_logsumexp(v: &[f64]) -> f64 {
    let m = r_max(v);
    if m.is_infinite() || m.is_nan() {
        return m;
    }
    m + v.iter().map(|x| (x - m).exp()).sum::<f64>().ln()
}

/// The first index of the max (min); a NaN is the extreme, as in PyTorch.
fn r_arg(v: &[f64], max: bool) -> f64 {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate().skip(1) {
        let b = v[best];
        if b.is_nan() {
            break;
        }
        if x.is_nan() || (max && x > b) || (!max && x < b) {
            best = i;
        }
    }
    best as f64
}

/// The largest `sum |x|` (or mean) over the reduced groups.
fn abs_scale(x: &Host, dims: &[i64], mean: bool) -> f64 {
    let f = |v: &[f64]| {
        v.iter().map(|a| a.abs()).sum::<f64>() / if mean { v.len() as f64 } else { 1.0 }
    };
    let sums = host_reduce(x, dims, false, DType::F64, f).data;
    sums.into_iter().fold(0.0, f64::max)
}

/// Tolerance for a long sum in `out`: each step rounds in the accumulator
/// (f32 for 16-bit floats), so that error scales with `scale` = sum |x|, not
/// with the result, which can cancel to ~0; then the result rounds once to
/// `out`, which tolerance() covers. 16-bit sums accumulated in 16 bits fail it.
fn acc_tol(out: DType, scale: f64) -> (f64, f64) {
    let acc = match out {
        DType::F16 | DType::BF16 => DType::F32,
        d => d,
    };
    let (rtol, atol) = tolerance(out);
    (rtol, atol + tolerance(acc).0 * scale)
}

/// Size of each reduced group.
fn group_size(shape: &[i64], dims: &[i64]) -> i64 {
    let mask = reduced_mask(dims, shape.len());
    (0..shape.len())
        .filter(|&d| mask[d])
        .map(|d| shape[d])
        .product()
}

/// (shape, dims, keepdim) for the reductions over dims.
const CASES: [(&[i64], &[i64], bool); 14] = [
    (&[2, 3, 4], &[1], false),
    (&[2, 3, 4], &[-1], true),
    (&[2, 3, 4], &[0, 2], false),
    (&[2, 3, 4], &[-1, -3], true),
    (&[2, 3, 4], &[], false),
    (&[2, 3, 4], &[], true),
    (&[2, 3, 4], &[2, 0, 1], false),
    (&[7], &[0], false),
    (&[7], &[-1], true),
    (&[5, 1, 3], &[1], false),
    (&[], &[], false),
    (&[], &[-1], true),
    (&[6, 5], &[0], true),
    (&[3, 300], &[-1], false),
];

/// Runs reduction `op` ("var0"/"var1" give the correction) of `x` over
/// `dims` and compares it with the host reference in dtype `out`; `None`
/// expects an error naming the op and `x`'s dtype.
fn check_reduce(op: &str, x: &Host, dims: &[i64], keepdim: bool, out: Option<DType>) {
    let t = x.tensor();
    let (got, f): (_, fn(&[f64]) -> f64) = match op {
        "sum" => (t.sum(dims, keepdim), r_sum),
        "mean" => (t.mean(dims, keepdim), r_mean),
        "prod" => (t.prod(dims, keepdim), r_prod),
        "max" => (t.max(dims, keepdim), r_max),
        "min" => (t.min(dims, keepdim), r_min),
        "var0" => (t.var(dims, 0, keepdim), |v| r_var(v, 0.0)),
        "var1" => (t.var(dims, 1, keepdim), |v| r_var(v, 1.0)),
        "logsumexp" => (t.logsumexp(dims, keepdim), r_logsumexp),
        _ => unreachable!(),
    };
    let w = format!(
        "{op}({}{:?}, {dims:?}, keepdim={keepdim})",
        x.dtype, x.shape
    );
    let Some(out) = out else {
        let (e, name) = (err_text(got), op.trim_end_matches(['0', '1']));
        let ok = e.contains(name) && e.contains(&x.dtype.to_string());
        return assert!(ok, "{w}: {e}");
    };
    let tol = match op {
        "sum" => acc_tol(out, abs_scale(x, dims, false)),
        "mean" => acc_tol(out, abs_scale(x, dims, true)),
        _ => tolerance(out),
    };
    check_tol(&w, got, &host_reduce(x, dims, keepdim, out, f), tol);
}

/// Asserts `got` succeeded and matches `want`.
fn check(what: &str, got: eagertpu::Result<Tensor>, want: &Host) {
    check_tol(what, got, want, tolerance(want.dtype));
}

fn check_tol(what: &str, got: eagertpu::Result<Tensor>, want: &Host, tol: (f64, f64)) {
    let got = got.unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_close_tol(what, &got, want, tol);
}

all_modes! {
fn sum_and_mean_match_the_host_reference() {
    for (c, &(shape, dims, keepdim)) in CASES.iter().enumerate() {
        for dtype in ALL {
            let x = Host::random(dtype, shape, 10 + c as u64);
            // Ints and bools sum to int64, floats keep their dtype.
            let out = if dtype.is_float() { dtype } else { DType::I64 };
            check_reduce("sum", &x, dims, keepdim, Some(out));
            // mean is for floats only, as in PyTorch.
            check_reduce("mean", &x, dims, keepdim, dtype.is_float().then_some(dtype));
        }
    }
}
}

all_modes! {
fn sum_all_and_mean_all_reduce_every_element() {
    for (i, shape) in [&[2, 3, 4][..], &[9], &[]].into_iter().enumerate() {
        for dtype in ALL {
            let x = Host::random(dtype, shape, 30 + i as u64);
            let out = if dtype.is_float() { dtype } else { DType::I64 };
            let want = host_reduce(&x, &[], false, out, r_sum);
            let got = x.tensor().sum_all().unwrap();
            let w = format!("sum_all({dtype}{shape:?})");
            assert_close_tol(&w, &got, &want, acc_tol(out, abs_scale(&x, &[], false)));
            if dtype.is_float() {
                let want = host_reduce(&x, &[], false, dtype, r_mean);
                let got = x.tensor().mean_all().unwrap();
                let w = format!("mean_all({dtype}{shape:?})");
                assert_close_tol(&w, &got, &want, acc_tol(out, abs_scale(&x, &[], true)));
            } else {
                let e = err_text(x.tensor().mean_all());
                assert!(e.contains("mean") && e.contains("floating"), "{e}");
            }
        }
    }
}
}

all_modes! {
fn prod_matches_the_host_reference() {
    for (c, &(shape, dims, keepdim)) in CASES.iter().enumerate() {
        // Small factors and groups of at most 24 keep products in range.
        if group_size(shape, dims) > 24 {
            continue;
        }
        for dtype in ALL {
            let (lo, hi) = match dtype {
                d if d.is_float() => (-1.5, 1.5),
                DType::U8 => (1.0, 2.0),
                DType::Bool => (0.0, 1.0),
                _ => (-3.0, 3.0),
            };
            let x = Host::random_in(dtype, shape, 40 + c as u64, lo, hi);
            let out = if dtype.is_float() { dtype } else { DType::I64 };
            check_reduce("prod", &x, dims, keepdim, Some(out));
        }
    }
}
}

all_modes! {
fn max_and_min_keep_the_dtype() {
    for (c, &(shape, dims, keepdim)) in CASES.iter().enumerate() {
        for dtype in ALL {
            let x = Host::random(dtype, shape, 50 + c as u64);
            check_reduce("max", &x, dims, keepdim, Some(dtype));
            check_reduce("min", &x, dims, keepdim, Some(dtype));
        }
    }
    // The dtype's own extremes (the reductions' identities) are found too.
    for dtype in [DType::I8, DType::U8, DType::I64] {
        let (lo, hi) = match dtype {
            DType::I8 => (-128.0, 127.0),
            DType::U8 => (0.0, 255.0),
            _ => (-(2f64.powi(62)), 2f64.powi(62)),
        };
        let x = Host::new(dtype, &[2, 2], vec![lo, lo, hi, hi]);
        let want = Host::new(dtype, &[2], vec![lo, hi]);
        check("max(extremes)", x.tensor().max(&[1], false), &want);
        check("min(extremes)", x.tensor().min(&[1], false), &want);
    }
}
}

all_modes! {
fn max_and_min_propagate_nan_and_handle_infinities() {
    for dtype in FLOATS {
        let mut x = Host::random(dtype, &[3, 4], 60);
        x.data[6] = f64::NAN; // [1, 2]
        x.data[0] = f64::INFINITY;
        x.data[11] = f64::NEG_INFINITY;
        for (dims, keepdim) in [(&[1][..], false), (&[0][..], true), (&[][..], false)] {
            let want = host_reduce(&x, dims, keepdim, dtype, r_max);
            assert!(
                want.data.iter().any(|v| v.is_nan()),
                "the case must reach the NaN"
            );
            check_reduce("max", &x, dims, keepdim, Some(dtype));
            check_reduce("min", &x, dims, keepdim, Some(dtype));
        }
        let x = Host::new(dtype, &[2, 2], vec![f64::NEG_INFINITY; 4]);
        check_reduce("max", &x, &[1], false, Some(dtype));
    }
}
}

all_modes! {
fn var_with_correction_matches_the_host_reference() {
    for (c, &(shape, dims, keepdim)) in CASES.iter().enumerate() {
        for dtype in ALL {
            let x = Host::random(dtype, shape, 70 + c as u64);
            // Floats only; a single element with correction 1 is 0/0 = NaN.
            let out = dtype.is_float().then_some(dtype);
            check_reduce("var0", &x, dims, keepdim, out);
            check_reduce("var1", &x, dims, keepdim, out);
        }
    }
}
}

all_modes! {
fn logsumexp_matches_the_host_reference() {
    for (c, &(shape, dims, keepdim)) in CASES.iter().enumerate() {
        for dtype in ALL {
            let x = Host::random(dtype, shape, 80 + c as u64);
            // Ints and bools compute in float32.
            let out = if dtype.is_float() { dtype } else { DType::F32 };
            check_reduce("logsumexp", &x, dims, keepdim, Some(out));
        }
    }
    // Rows of -inf give -inf, +inf gives +inf, NaN stays NaN, large values
    // stay finite (exp(1e4) overflows every float type).
    let inf = f64::INFINITY;
    let rows = [
        [-inf, -inf, -inf],
        [1e4, 1e4, 9990.0],
        [inf, 0.0, 1.0],
        [f64::NAN, 0.0, 1.0],
        [-1e4, -1e4, 0.0],
    ];
    for dtype in FLOATS {
        let x = Host::new(dtype, &[5, 3], rows.concat());
        let want = host_reduce(&x, &[1], false, dtype, r_logsumexp);
        assert!(want.data[0] == -inf && want.data[1].is_finite() && want.data[1] > 9000.0);
        check_reduce("logsumexp", &x, &[-1], false, Some(dtype));
    }
}
}

all_modes! {
fn argmax_and_argmin_give_the_first_extreme_index() {
    let cases: [(&[i64], Option<i64>, bool); 10] = [
        (&[3, 5], Some(1), false),
        (&[3, 5], Some(-2), true),
        (&[3, 5], None, false),
        (&[3, 5], None, true),
        (&[2, 3, 4], Some(1), true),
        (&[2, 3, 4], Some(-1), false),
        (&[7], Some(0), false),
        (&[], None, false),
        (&[], Some(0), true),
        (&[], Some(-1), false),
    ];
    for (c, &(shape, dim, keepdim)) in cases.iter().enumerate() {
        for dtype in numeric() {
            // Values in {0, 1, 2} make ties everywhere; the first index wins.
            let x = Host::random_in(dtype, shape, 90 + c as u64, 0.0, 2.0).map(dtype, f64::round);
            let dims: Vec<i64> = dim.into_iter().collect();
            let t = x.tensor();
            for (max, got) in [
                (true, t.argmax(dim, keepdim)),
                (false, t.argmin(dim, keepdim)),
            ] {
                let op = if max { "argmax" } else { "argmin" };
                let w = format!("{op}({dtype}{shape:?}, {dim:?}, keepdim={keepdim})");
                // dim None is the flattened tensor: one group in flat order.
                let want = host_reduce(&x, &dims, keepdim, DType::I64, |v| r_arg(v, max));
                check(&w, got, &want);
            }
        }
    }
    // NaN is both the max and the min (its first occurrence), as in PyTorch.
    let i64s = |v: &[f64]| Host::new(DType::I64, &[v.len() as i64], v.to_vec());
    for dtype in FLOATS {
        let nan = f64::NAN;
        let data = vec![1.0, nan, 5.0, nan, -1.0, 2.0, 2.0, -1.0, nan, 0.0, 0.0, 9.0];
        let x = Host::new(dtype, &[3, 4], data).tensor();
        check(
            "argmax(nan)",
            x.argmax(Some(1), false),
            &i64s(&[1., 1., 0.]),
        );
        check(
            "argmin(nan)",
            x.argmin(Some(-1), false),
            &i64s(&[1., 0., 0.]),
        );
        let want = Host::new(DType::I64, &[], vec![1.0]);
        check("argmax(nan, flat)", x.argmax(None, false), &want);
    }
    // The dtype's lowest value is found even when it fills a row.
    let data = vec![-128.0, -128.0, -128.0, 5.0, -128.0, 127.0];
    let x = Host::new(DType::I8, &[2, 3], data).tensor();
    check("argmax(int8)", x.argmax(Some(1), false), &i64s(&[0., 2.]));
    check("argmin(int8)", x.argmin(Some(1), false), &i64s(&[0., 1.]));
    let x = Host::random(DType::Bool, &[4], 1).tensor();
    assert_err(x.argmax(None, false), "argmax", &["bool"]);
}
}

all_modes! {
fn reductions_of_empty_tensors_follow_pytorch() {
    let t = Host::new(DType::F32, &[3, 0, 2], vec![]).tensor();
    let f = |v: f64, shape: &[i64]| Host::new(DType::F32, shape, vec![v; numel(shape)]);
    let (nan, ninf) = (f64::NAN, f64::NEG_INFINITY);
    check("sum(empty)", t.sum(&[1], false), &f(0.0, &[3, 2]));
    check("sum_all(empty)", t.sum_all(), &f(0.0, &[]));
    check("prod(empty)", t.prod(&[1], true), &f(1.0, &[3, 1, 2]));
    check("mean(empty)", t.mean(&[1], false), &f(nan, &[3, 2]));
    check(
        "logsumexp(empty)",
        t.logsumexp(&[1], false),
        &f(ninf, &[3, 2]),
    );
    let i = Host::new(DType::I32, &[0, 4], vec![]).tensor();
    let want = Host::new(DType::I64, &[4], vec![0.0; 4]);
    check("sum(empty int32)", i.sum(&[0], false), &want);
    // Reducing other dims gives an empty result; amax/argmax of no elements
    // is an error.
    check(
        "max(empty, other dim)",
        t.max(&[2], false),
        &f(0.0, &[3, 0]),
    );
    assert_err(t.max(&[1], false), "amax", &["empty", "dim 1"]);
    assert_err(t.min(&[], false), "amin", &["empty"]);
    assert_err(t.argmax(None, false), "argmax", &["empty"]);
}
}

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

all_modes! {
fn count_nonzero_counts_what_is_not_zero_as_int64() {
    for (c, &(shape, dims, _)) in CASES.iter().enumerate() {
        for dtype in [DType::F32, DType::I64, DType::Bool, DType::U8] {
            // Small integers: about a third of them zero.
            let mut x = Host::random_in(dtype, shape, 70 + c as u64, -1.4, 1.4);
            if dtype.is_float() {
                for v in x.data.iter_mut() {
                    *v = v.round();
                }
                // NaN is not zero.
                if let Some(first) = x.data.first_mut() {
                    *first = f64::NAN;
                }
            }
            let got = Host::of(&x.tensor().count_nonzero(dims).unwrap());
            let want = host_reduce(&x, dims, false, DType::I64, |g| {
                g.iter().filter(|v| **v != 0.0).count() as f64
            });
            assert_eq!(got.dtype, DType::I64, "{dtype} {shape:?} {dims:?}");
            assert_eq!(got.shape, want.shape, "{dtype} {shape:?} {dims:?}");
            assert_eq!(got.data, want.data, "{dtype} {shape:?} {dims:?}");
        }
    }
    assert_err(
        Host::random(DType::F32, &[2, 3], 1).tensor().count_nonzero(&[2]),
        "count_nonzero",
        &["2"],
    );
}
}

all_modes! {
fn any_and_all_reduce_truthiness_to_bool() {
    for (c, &(shape, dims, keepdim)) in CASES.iter().enumerate() {
        for dtype in [DType::F32, DType::I64, DType::Bool, DType::U8] {
            // Small integers, about a third of them zero; NaN is not zero.
            let mut x = Host::random_in(dtype, shape, 90 + c as u64, -1.4, 1.4);
            if dtype.is_float() {
                for v in x.data.iter_mut() {
                    *v = v.round();
                }
                if let Some(first) = x.data.first_mut() {
                    *first = f64::NAN;
                }
            }
            let w = format!("{dtype}{shape:?} {dims:?} keepdim={keepdim}");
            let any = |g: &[f64]| g.iter().any(|v| *v != 0.0) as i32 as f64;
            let all = |g: &[f64]| g.iter().all(|v| *v != 0.0) as i32 as f64;
            let got = x.tensor().any(dims, keepdim).unwrap();
            let want = host_reduce(&x, dims, keepdim, DType::Bool, any);
            assert_eq!(Host::of(&got), want, "any {w}");
            let got = x.tensor().all(dims, keepdim).unwrap();
            let want = host_reduce(&x, dims, keepdim, DType::Bool, all);
            assert_eq!(Host::of(&got), want, "all {w}");
        }
    }
    // Over an empty dim: any is false, all is true, as in PyTorch.
    let empty = Host::new(DType::F32, &[2, 0], vec![]);
    let want = |v: f64| Host::new(DType::Bool, &[2], vec![v, v]);
    assert_eq!(Host::of(&empty.tensor().any(&[1], false).unwrap()), want(0.0));
    assert_eq!(Host::of(&empty.tensor().all(&[1], false).unwrap()), want(1.0));
}
}

all_modes! {
fn std_is_the_square_root_of_var() {
    for (c, &(shape, dims, keepdim)) in CASES.iter().enumerate() {
        for dtype in FLOATS {
            let x = Host::random(dtype, shape, 110 + c as u64);
            for correction in [0, 1] {
                let want = host_reduce(&x, dims, keepdim, dtype, |v| {
                    r_var(v, correction as f64).sqrt()
                });
                let w = format!("std({dtype}{shape:?}, {dims:?}, correction={correction})");
                check(&w, x.tensor().std(dims, correction, keepdim), &want);
            }
        }
    }
    assert_err(
        Host::random(DType::I32, &[3], 1).tensor().std(&[0], 1, false),
        "var",
        &["int32"],
    );
}
}

all_modes! {
fn vector_norm_matches_the_host_reference_for_every_ord() {
    for (c, &(shape, dims, keepdim)) in CASES.iter().enumerate() {
        for dtype in [DType::F32, DType::BF16] {
            let mut x = Host::random(dtype, shape, 130 + c as u64);
            // Zeros, for ord 0.
            for v in x.data.iter_mut().step_by(3) {
                *v = 0.0;
            }
            for ord in [2.0, 1.0, 3.0, 0.5, 0.0, f64::INFINITY, f64::NEG_INFINITY] {
                let w = format!("vector_norm({dtype}{shape:?}, ord={ord}, {dims:?})");
                if group_size(shape, dims) == 0 {
                    continue;
                }
                let want = host_reduce(&x, dims, keepdim, dtype, |v| {
                    let a = v.iter().map(|x| x.abs());
                    if ord == f64::INFINITY {
                        a.fold(0.0, f64::max)
                    } else if ord == f64::NEG_INFINITY {
                        a.fold(f64::INFINITY, f64::min)
                    } else if ord == 0.0 {
                        a.filter(|x| *x != 0.0).count() as f64
                    } else {
                        a.map(|x| x.powf(ord)).sum::<f64>().powf(1.0 / ord)
                    }
                });
                let tol = acc_tol(dtype, abs_scale(&x, dims, false));
                check_tol(&w, x.tensor().vector_norm(ord, dims, keepdim), &want, tol);
            }
        }
    }
    assert_err(
        Host::random(DType::I64, &[2, 3], 1).tensor().vector_norm(2.0, &[], false),
        "vector_norm",
        &["int64", "floating"],
    );
}
}

all_modes! {
fn max_dim_and_min_dim_give_values_and_first_indices() {
    for (c, shape) in [&[2, 3, 4][..], &[7], &[5, 1, 3]].into_iter().enumerate() {
        for dtype in [DType::F32, DType::I32, DType::BF16] {
            // Few distinct values: ties, whose first index wins.
            let x = Host::random_in(dtype, shape, 150 + c as u64, -2.4, 2.4);
            let x = Host::new(dtype, shape, x.data.iter().map(|v| v.round()).collect());
            for dim in 0..shape.len() as i64 {
                for keepdim in [false, true] {
                    let w = format!("{dtype}{shape:?} dim={dim} keepdim={keepdim}");
                    let (v, i) = x.tensor().max_dim(dim, keepdim).unwrap();
                    assert_eq!(Host::of(&v), host_reduce(&x, &[dim], keepdim, dtype, r_max), "max {w}");
                    let want = host_reduce(&x, &[dim], keepdim, DType::I64, |g| r_arg(g, true));
                    assert_eq!(Host::of(&i), want, "argmax {w}");
                    let (v, i) = x.tensor().min_dim(dim - shape.len() as i64, keepdim).unwrap();
                    assert_eq!(Host::of(&v), host_reduce(&x, &[dim], keepdim, dtype, r_min), "min {w}");
                    let want = host_reduce(&x, &[dim], keepdim, DType::I64, |g| r_arg(g, false));
                    assert_eq!(Host::of(&i), want, "argmin {w}");
                }
            }
        }
    }
    // A 0-d tensor is its own extreme, at index 0.
    let x = Host::new(DType::F32, &[], vec![2.5]);
    let (v, i) = x.tensor().max_dim(-1, true).unwrap();
    assert_eq!(Host::of(&v), x);
    assert_eq!(Host::of(&i), Host::new(DType::I64, &[], vec![0.0]));
    assert_err(x.tensor().min_dim(1, false), "min", &["1"]);
    assert_err(
        Host::random(DType::F32, &[2, 3], 1).tensor().max_dim(2, false),
        "amax",
        &["2"],
    );
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

all_modes! {
fn trace_sums_the_main_diagonal() {
    for (c, shape) in [[3, 3], [2, 5], [5, 2], [1, 1], [0, 3]].into_iter().enumerate() {
        for dtype in [DType::F32, DType::I32, DType::Bool, DType::BF16] {
            let x = Host::random(dtype, &shape, 600 + c as u64);
            let n = shape[0].min(shape[1]) as usize;
            let sum: f64 = (0..n).map(|i| x.data[i * shape[1] as usize + i]).sum();
            let out = if dtype.is_float() { dtype } else { DType::I64 };
            let want = Host::new(out, &[], vec![sum]);
            check(&format!("trace({dtype}{shape:?})"), x.tensor().trace(), &want);
        }
    }
    assert_err(Host::random(DType::F32, &[2, 2, 2], 1).tensor().trace(), "trace", &["matrix", "dim 3", "[2, 2, 2]"]);
}
}
