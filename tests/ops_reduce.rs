//! Reductions (and the ones built from them: std, any, all, vector_norm,
//! max/min along a dim, trace) against host references computed here with
//! plain loops in f64: every op, every dtype it supports, keepdim, negative
//! and multiple dims, PyTorch's dtype rules and edge values; the op tables
//! (`Reduce`, `ArgReduce`, `Extreme`): their PyTorch names, and each name
//! reaching the reduction it names. Matmul and the nn ops are in ops_nn.rs;
//! the shared host reductions in common/.

mod common;

use common::builders::{check, check_err};
use common::*;
use eagertpu::{ArgReduce, DType, Extreme, Reduce};

fn r_prod(v: &[f64]) -> f64 {
    v.iter().product()
}

fn r_min(v: &[f64]) -> f64 {
    if v.iter().any(|x| x.is_nan()) {
        return f64::NAN;
    }
    v.iter().fold(f64::INFINITY, |m, &x| m.min(x))
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

/// Small integers, about a third of them zero; a float tensor's first
/// element is NaN (which is not zero).
fn some_zeros(dtype: DType, shape: &[i64], seed: u64) -> Host {
    let mut x = Host::random_in(dtype, shape, seed, -1.4, 1.4);
    if dtype.is_float() {
        for v in x.data.iter_mut() {
            *v = v.round();
        }
        if let Some(first) = x.data.first_mut() {
            *first = f64::NAN;
        }
    }
    x
}

all_modes! {
fn count_nonzero_counts_what_is_not_zero_as_int64() {
    for (c, &(shape, dims, _)) in CASES.iter().enumerate() {
        for dtype in [DType::F32, DType::I64, DType::Bool, DType::U8] {
            let x = some_zeros(dtype, shape, 70 + c as u64);
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
            let x = some_zeros(dtype, shape, 90 + c as u64);
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

/// A reduction of one group on the host.
type HostReduction = fn(&[f64]) -> f64;

/// PyTorch's name of each reduction, with its host reference and result
/// dtype for a float32 input: what the `Reduce` table must hold.
fn reduce_names() -> Vec<(&'static str, HostReduction, DType)> {
    vec![
        ("sum", r_sum, DType::F32),
        ("mean", r_mean, DType::F32),
        ("prod", r_prod, DType::F32),
        ("max", r_max, DType::F32),
        ("min", r_min, DType::F32),
        ("logsumexp", r_logsumexp, DType::F32),
        (
            "any",
            |g| g.iter().any(|v| *v != 0.0) as i32 as f64,
            DType::Bool,
        ),
        (
            "all",
            |g| g.iter().all(|v| *v != 0.0) as i32 as f64,
            DType::Bool,
        ),
        (
            "count_nonzero",
            |g| g.iter().filter(|v| **v != 0.0).count() as f64,
            DType::I64,
        ),
    ]
}

all_modes! {
fn each_reduction_name_reaches_the_reduction_it_names() {
    let names: Vec<&str> = Reduce::ALL.iter().map(|r| r.name()).collect();
    let want: Vec<&str> = reduce_names().iter().map(|(n, _, _)| *n).collect();
    assert_eq!(names, want, "the Reduce table's names");
    let x = some_zeros(DType::F32, &[3, 4, 5], 700);
    for (name, f, out) in reduce_names() {
        let op = Reduce::from_name(name).unwrap_or_else(|| panic!("{name} is not in the table"));
        assert_eq!(op.name(), name);
        // count_nonzero has no keepdim.
        let keepdims: &[bool] = if name == "count_nonzero" { &[false] } else { &[false, true] };
        for &keepdim in keepdims {
            for dims in [&[1][..], &[0, -1], &[]] {
                let what = format!("reduce({name}, {dims:?}, keepdim={keepdim})");
                let want = host_reduce(&x, dims, keepdim, out, f);
                check_tol(&what, x.tensor().reduce(op, dims, keepdim), &want, tolerance(DType::F32));
            }
        }
    }
    check_err(
        x.tensor().reduce(Reduce::CountNonzero, &[1], true),
        &["count_nonzero", "keepdim", "float32[3, 4, 5]"],
    );
    for unknown in ["median", "amax", "Sum", ""] {
        assert_eq!(Reduce::from_name(unknown), None, "{unknown:?}");
    }
}
}

all_modes! {
fn each_arg_reduction_and_extreme_name_reaches_its_op() {
    let names: Vec<&str> = ArgReduce::ALL.iter().map(|r| r.name()).collect();
    assert_eq!(names, ["argmax", "argmin"]);
    let names: Vec<&str> = Extreme::ALL.iter().map(|r| r.name()).collect();
    assert_eq!(names, ["max", "min"]);
    // Few distinct values: ties, whose first index wins.
    let x = Host::random_in(DType::F32, &[3, 5], 710, -2.4, 2.4).map(DType::F32, f64::round);
    for (name, max) in [("argmax", true), ("argmin", false)] {
        let op = ArgReduce::from_name(name).unwrap();
        for keepdim in [false, true] {
            let want = host_reduce(&x, &[1], keepdim, DType::I64, |g| r_arg(g, max));
            check(name, x.tensor().arg_reduce(op, Some(1), keepdim), &want);
        }
        let want = host_reduce(&x, &[], false, DType::I64, |g| r_arg(g, max));
        check(name, x.tensor().arg_reduce(op, None, false), &want);
    }
    for (name, max) in [("max", true), ("min", false)] {
        let op = Extreme::from_name(name).unwrap();
        let (v, i) = x.tensor().extreme_dim(op, -1, true).unwrap();
        let f: fn(&[f64]) -> f64 = if max { r_max } else { r_min };
        assert_eq!(Host::of(&v), host_reduce(&x, &[1], true, DType::F32, f), "{name} values");
        let want = host_reduce(&x, &[1], true, DType::I64, |g| r_arg(g, max));
        assert_eq!(Host::of(&i), want, "{name} indices");
    }
    assert_eq!(ArgReduce::from_name("max"), None);
    assert_eq!(Extreme::from_name("argmax"), None);
}
}
