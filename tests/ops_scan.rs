//! Cumulative sums and products, sort, argsort and top-k against host
//! references computed here: running sums and products in plain f64 loops,
//! sorts with the standard library's stable `sort_by`. Every dtype family,
//! negative dims, dims of size 1, 0-d and empty tensors, ties (stability),
//! NaN placement and the errors for a bad dim or k; the `Cumulative` table:
//! PyTorch's names, each reaching the scan it names.

mod common;

use std::cmp::Ordering;

use common::*;
use eagertpu::{Cumulative, DType, Tensor};

/// `dim` of a rank-`rank` tensor normalized here, independently of the runtime.
fn norm_dim(dim: i64, rank: usize) -> usize {
    let r = rank.max(1) as i64;
    assert!((-r..r).contains(&dim), "bad dim in a test case");
    ((dim + r) % r) as usize
}

/// Applies `f` to every line of `x` along `dim`; the result has `dtype`.
fn host_lines(x: &Host, dim: usize, dtype: DType, f: impl Fn(&[f64]) -> Vec<f64>) -> Host {
    if x.rank() == 0 {
        return Host::new(dtype, &[], f(&x.data));
    }
    let mut data = vec![0.0; x.numel()];
    let mut outer = x.shape.clone();
    outer[dim] = 1;
    for o in 0..numel(&outer) {
        let mut idx = unravel(o, &outer);
        let pos: Vec<usize> = (0..x.shape[dim])
            .map(|j| {
                idx[dim] = j;
                ravel(&idx, &x.shape)
            })
            .collect();
        let line: Vec<f64> = pos.iter().map(|&p| x.data[p]).collect();
        for (&p, v) in pos.iter().zip(f(&line)) {
            data[p] = v;
        }
    }
    Host::new(dtype, &x.shape, data)
}

fn running_sum(v: &[f64]) -> Vec<f64> {
    let mut acc = 0.0;
    v.iter()
        .map(|x| {
            acc += x;
            acc
        })
        .collect()
}

fn running_prod(v: &[f64]) -> Vec<f64> {
    let mut acc = 1.0;
    v.iter()
        .map(|x| {
            acc *= x;
            acc
        })
        .collect()
}

/// PyTorch's order: numbers ascending, NaN above all, every NaN equal.
fn nan_last(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

/// The positions that sort `v`, stably (`sort_by` is stable).
fn host_order(v: &[f64], descending: bool) -> Vec<usize> {
    let mut order: Vec<usize> = (0..v.len()).collect();
    if descending {
        order.sort_by(|&i, &j| nan_last(v[j], v[i]));
    } else {
        order.sort_by(|&i, &j| nan_last(v[i], v[j]));
    }
    order
}

/// (values, indices) of the host sort of `x` along `dim`, first `k` of each line.
fn host_sort(x: &Host, dim: usize, descending: bool, k: Option<i64>) -> (Host, Host) {
    let values = host_lines(x, dim, x.dtype, |v| {
        host_order(v, descending).iter().map(|&i| v[i]).collect()
    });
    let indices = host_lines(x, dim, DType::I64, |v| {
        host_order(v, descending)
            .iter()
            .map(|&i| i as f64)
            .collect()
    });
    match k {
        Some(k) if x.rank() > 0 => (take(&values, dim, k), take(&indices, dim, k)),
        _ => (values, indices),
    }
}

/// The first `k` entries of each line along `dim`.
fn take(x: &Host, dim: usize, k: i64) -> Host {
    let mut shape = x.shape.clone();
    shape[dim] = k;
    let data = (0..numel(&shape))
        .map(|i| x.at(&unravel(i, &shape)))
        .collect();
    Host::new(x.dtype, &shape, data)
}

/// The largest `sum |x|` over the lines along `dim` (scale of a sum's error).
fn line_scale(x: &Host, dim: usize) -> f64 {
    let sums = host_lines(x, dim, DType::F64, |v| {
        let s: f64 = v.iter().map(|a| a.abs()).sum();
        vec![s; v.len()]
    });
    sums.data.into_iter().fold(0.0, f64::max)
}

/// Tolerance of a running sum in `out`: each step rounds in the accumulator
/// (f32 for 16-bit floats), then the result rounds once to `out`.
fn sum_tol(out: DType, scale: f64) -> (f64, f64) {
    let acc = if matches!(out, DType::F16 | DType::BF16) {
        DType::F32
    } else {
        out
    };
    let (rtol, atol) = tolerance(out);
    (rtol, atol + tolerance(acc).0 * scale)
}

/// (shape, dims) for the scans and sorts.
const CASES: [(&[i64], &[i64]); 8] = [
    (&[2, 3, 4], &[0, 1, 2, -1, -3]),
    (&[7], &[0, -1]),
    (&[5, 1, 3], &[1, -2]),
    (&[1, 6], &[0, 1]),
    (&[], &[0, -1]),
    (&[3, 0, 2], &[1, 2]),
    (&[2, 300], &[-1]),
    (&[4, 9], &[0, 1]),
];

fn scan_dtype(dtype: DType) -> DType {
    if dtype.is_float() { dtype } else { DType::I64 }
}

all_modes! {
fn cumsum_matches_running_sums() {
    for (c, &(shape, dims)) in CASES.iter().enumerate() {
        for dtype in ALL {
            let x = Host::random(dtype, shape, 10 + c as u64);
            let out = scan_dtype(dtype);
            for &d in dims {
                let nd = norm_dim(d, shape.len());
                let w = format!("cumsum({dtype}{shape:?}, {d})");
                let got = x.tensor().cumsum(d).unwrap_or_else(|e| panic!("{w}: {e}"));
                let want = host_lines(&x, nd, out, running_sum);
                assert_close_tol(&w, &got, &want, sum_tol(out, line_scale(&x, nd)));
            }
        }
    }
}
}

all_modes! {
fn cumprod_matches_running_products() {
    for (c, &(shape, dims)) in CASES.iter().enumerate() {
        for dtype in ALL {
            // Factors near 1 (and small ints over short lines) keep products in range.
            let (lo, hi) = match dtype {
                d if d.is_float() => (0.6, 1.5),
                DType::U8 => (0.0, 2.0),
                DType::Bool => (0.0, 1.0),
                _ => (-3.0, 3.0),
            };
            let x = Host::random_in(dtype, shape, 20 + c as u64, lo, hi);
            let out = scan_dtype(dtype);
            for &d in dims {
                let nd = norm_dim(d, shape.len());
                let len = shape.get(nd).copied().unwrap_or(1);
                if !dtype.is_float() && dtype != DType::Bool && len > 30 {
                    continue;
                }
                let w = format!("cumprod({dtype}{shape:?}, {d})");
                let got = x.tensor().cumprod(d).unwrap_or_else(|e| panic!("{w}: {e}"));
                let want = host_lines(&x, nd, out, running_prod);
                // Each step rounds: the relative error grows with the length.
                let (rtol, atol) = tolerance(out);
                let steps = len as f64;
                let acc = if out == DType::F64 { 1e-15 } else { 1.2e-7 };
                assert_close_tol(&w, &got, &want, (rtol + acc * steps, atol));
            }
        }
    }
}
}

all_modes! {
fn scans_of_known_values() {
    let x = Tensor::from_slice(&[1i32, 2, 3, 4, 5, 6], &[2, 3]).unwrap();
    let s = x.cumsum(-1).unwrap();
    assert_eq!(s.dtype(), DType::I64);
    assert_eq!(s.to_vec::<i64>().unwrap(), vec![1, 3, 6, 4, 9, 15]);
    let p = x.cumprod(0).unwrap();
    assert_eq!(p.to_vec::<i64>().unwrap(), vec![1, 2, 3, 4, 10, 18]);
    let b = Tensor::from_slice(&[true, false, true, true], &[4]).unwrap();
    assert_eq!(b.cumsum(0).unwrap().to_vec::<i64>().unwrap(), vec![1, 1, 2, 3]);
    assert_eq!(b.cumprod(0).unwrap().to_vec::<i64>().unwrap(), vec![1, 0, 0, 0]);
    // Large int64 sums stay exact.
    let big = Tensor::from_slice(&[1i64 << 40, 1 << 40, 3], &[3]).unwrap();
    let want = vec![1i64 << 40, 1 << 41, (1 << 41) + 3];
    assert_eq!(big.cumsum(0).unwrap().to_vec::<i64>().unwrap(), want);
    // NaN and infinities carry forward, as in a loop.
    let f = Tensor::from_slice(&[1.0f64, f64::NAN, 2.0], &[3]).unwrap();
    let got = f.cumsum(0).unwrap().to_vec::<f64>().unwrap();
    assert!(got[0] == 1.0 && got[1].is_nan() && got[2].is_nan(), "{got:?}");
}
}

all_modes! {
fn sort_matches_a_stable_host_sort() {
    for (c, &(shape, dims)) in CASES.iter().enumerate() {
        for dtype in ALL {
            // A narrow range of ints makes many ties: indices check stability.
            let x = if dtype.is_float() {
                Host::random(dtype, shape, 30 + c as u64)
            } else {
                let hi = if dtype == DType::Bool { 1.0 } else { 3.0 };
                let lo = if matches!(dtype, DType::Bool | DType::U8) { 0.0 } else { -3.0 };
                Host::random_in(dtype, shape, 30 + c as u64, lo, hi)
            };
            for &d in dims {
                let nd = norm_dim(d, shape.len());
                for descending in [false, true] {
                    let w = format!("sort({dtype}{shape:?}, {d}, descending={descending})");
                    let (v, i) = x
                        .tensor()
                        .sort(d, descending)
                        .unwrap_or_else(|e| panic!("{w}: {e}"));
                    let (wv, wi) = host_sort(&x, nd, descending, None);
                    assert_close(&format!("{w} values"), &v, &wv);
                    assert_close(&format!("{w} indices"), &i, &wi);
                    let a = x.tensor().argsort(d, descending).unwrap();
                    assert_close(&format!("argsort of {w}"), &a, &wi);
                }
            }
        }
    }
}
}

all_modes! {
fn sort_puts_nan_last_ascending_and_first_descending() {
    let (nan, inf) = (f64::NAN, f64::INFINITY);
    let v = [3.0, nan, -inf, 1.0, nan, -0.0, 0.0, inf, 1.0, -2.0];
    for dtype in FLOATS {
        let x = Host::new(dtype, &[2, 10], v.iter().chain(v.iter().rev()).copied().collect());
        for descending in [false, true] {
            let (got_v, got_i) = x.tensor().sort(1, descending).unwrap();
            let (want_v, want_i) = host_sort(&x, 1, descending, None);
            let w = format!("sort({dtype}, descending={descending})");
            assert_close(&format!("{w} values"), &got_v, &want_v);
            assert_close(&format!("{w} indices"), &got_i, &want_i);
        }
    }
    // Spelled out for the first row: -0.0 and 0.0 tie, NaNs keep their order.
    let x = Tensor::from_slice(&v, &[10]).unwrap();
    let (_, i) = x.sort(0, false).unwrap();
    assert_eq!(i.to_vec::<i64>().unwrap(), vec![2, 9, 5, 6, 3, 8, 0, 7, 1, 4]);
    let (_, i) = x.sort(0, true).unwrap();
    assert_eq!(i.to_vec::<i64>().unwrap(), vec![1, 4, 7, 0, 3, 8, 5, 6, 9, 2]);
}
}

all_modes! {
fn topk_takes_the_first_k_of_a_sort() {
    let cases: [(&[i64], i64, &[i64]); 5] = [
        (&[4, 6], 1, &[0, 1, 2, 3, 6]),
        (&[3, 5, 2], 0, &[0, 2, 3]),
        (&[9], -1, &[0, 4, 9]),
        (&[], 0, &[0, 1]),
        (&[2, 7], -2, &[1, 2]),
    ];
    for (c, &(shape, d, ks)) in cases.iter().enumerate() {
        for dtype in [DType::F32, DType::F64, DType::BF16, DType::I32, DType::I64, DType::U8] {
            let x = if dtype.is_float() {
                let mut x = Host::random(dtype, shape, 50 + c as u64);
                if let Some(v) = x.data.get_mut(1) {
                    *v = f64::NAN;
                }
                x
            } else {
                Host::random_in(dtype, shape, 50 + c as u64, 0.0, 4.0)
            };
            let nd = norm_dim(d, shape.len());
            for &k in ks {
                for largest in [true, false] {
                    let w = format!("topk({dtype}{shape:?}, k={k}, dim={d}, largest={largest})");
                    let (v, i) = x
                        .tensor()
                        .topk(k, d, largest, true)
                        .unwrap_or_else(|e| panic!("{w}: {e}"));
                    let (wv, wi) = host_sort(&x, nd, largest, Some(k));
                    assert_close(&format!("{w} values"), &v, &wv);
                    assert_close(&format!("{w} indices"), &i, &wi);
                }
            }
        }
    }
}
}

all_modes! {
fn scans_and_sorts_compose_in_one_chunk() {
    // Nothing is read between the ops: fused mode puts them in one program.
    let x = Host::random(DType::F32, &[3, 8], 70);
    let t = x.tensor();
    let s = t.cumsum(1).unwrap();
    let (v, i) = s.sort(1, true).unwrap();
    let (tv, ti) = (&v * 2.0).unwrap().topk(3, 1, false, true).unwrap();
    let sums = host_lines(&x, 1, DType::F32, running_sum);
    let (wv, wi) = host_sort(&sums, 1, true, None);
    let tol = sum_tol(DType::F32, line_scale(&x, 1));
    assert_close_tol("sort of cumsum", &v, &wv, tol);
    assert_close("sort indices of cumsum", &i, &wi);
    let doubled = wv.map(DType::F32, |a| 2.0 * a);
    let (wtv, wti) = host_sort(&doubled, 1, false, Some(3));
    assert_close_tol("topk of the sorted values", &tv, &wtv, (tol.0, 2.0 * tol.1));
    assert_close("topk indices", &ti, &wti);
}
}

all_modes! {
fn a_bad_dim_or_k_is_an_error_naming_the_op_and_the_shape() {
    let x = Host::random(DType::F32, &[3, 4], 80).tensor();
    assert_err(x.cumsum(2), "cumsum", &["float32[3, 4]", "[-2, 1]"]);
    assert_err(x.cumprod(-3), "cumprod", &["float32[3, 4]", "[-2, 1]"]);
    assert_err(x.sort(5, false), "sort", &["float32[3, 4]", "dim 5"]);
    assert_err(x.argsort(-9, true), "argsort", &["float32[3, 4]"]);
    assert_err(x.topk(5, 1, true, true), "topk", &["float32[3, 4]", "k = 5", "[0, 4]"]);
    assert_err(x.topk(-1, 0, true, true), "topk", &["float32[3, 4]", "[0, 3]"]);
    assert_err(x.topk(1, 2, true, true), "topk", &["float32[3, 4]", "dim 2"]);
    let s = Tensor::from_slice(&[2.5f32], &[]).unwrap();
    assert_err(s.topk(2, 0, true, true), "topk", &["[0, 1]"]);
}
}

all_modes! {
fn each_cumulative_name_reaches_the_scan_it_names() {
    let names: Vec<&str> = Cumulative::ALL.iter().map(|c| c.name()).collect();
    assert_eq!(
        names,
        ["cumsum", "cumprod", "cummax", "cummin", "cummax_indices", "cummin_indices", "logcumsumexp"]
    );
    let x = Host::random_in(DType::F32, &[3, 4], 30, 0.6, 1.5);
    let table: [(&str, LineFn); 7] = [
        ("cumsum", running_sum),
        ("cumprod", running_prod),
        ("cummax", |l| running_extreme(l, true).0),
        ("cummin", |l| running_extreme(l, false).0),
        ("cummax_indices", |l| running_extreme(l, true).1),
        ("cummin_indices", |l| running_extreme(l, false).1),
        ("logcumsumexp", log_cum_sum_exp),
    ];
    for (name, f) in table {
        let op = Cumulative::from_name(name).unwrap_or_else(|| panic!("{name} is not in the table"));
        for d in [0, -1] {
            let w = format!("cumulative({name}, {d})");
            let dtype = if name.ends_with("indices") { DType::I64 } else { DType::F32 };
            let want = host_lines(&x, norm_dim(d, 2), dtype, f);
            let got = x.tensor().cumulative(op, d).unwrap_or_else(|e| panic!("{w}: {e}"));
            assert_close_tol(&w, &got, &want, (1e-5, 1e-6));
        }
    }
    assert_eq!(Cumulative::from_name("cumlogsumexp"), None);
}
}

/// A function of one line of a tensor (along a dim).
type LineFn = fn(&[f64]) -> Vec<f64>;

/// PyTorch's cummax (`max`) or cummin over a line: (values, indices), a NaN
/// staying once met, the latest of equal extremes.
fn running_extreme(v: &[f64], max: bool) -> (Vec<f64>, Vec<f64>) {
    let (mut best, mut at) = (f64::NAN, 0usize);
    let mut values = vec![];
    let mut indices = vec![];
    for (i, &x) in v.iter().enumerate() {
        let better = if max { x >= best } else { x <= best };
        if i == 0 || x.is_nan() || (!best.is_nan() && better) {
            best = x;
            at = i;
        }
        values.push(best);
        indices.push(at as f64);
    }
    (values, indices)
}

fn log_cum_sum_exp(v: &[f64]) -> Vec<f64> {
    let mut acc = f64::NEG_INFINITY;
    v.iter()
        .map(|&x| {
            let m = acc.max(x);
            acc = if m == f64::NEG_INFINITY {
                m
            } else {
                m + ((acc - m).exp() + (x - m).exp()).ln()
            };
            acc
        })
        .collect()
}

all_modes! {
fn cummax_cummin_and_logcumsumexp_match_the_host() {
    for (c, &(shape, dims)) in CASES.iter().enumerate() {
        for dtype in [DType::F32, DType::I32] {
            // Few distinct integers: ties, whose latest index is kept.
            let x = Host::random_in(dtype, shape, 40 + c as u64, -2.0, 3.0);
            for &d in dims {
                let nd = norm_dim(d, shape.len());
                for max in [true, false] {
                    let w = format!("cum{}({dtype}{shape:?}, {d})", if max { "max" } else { "min" });
                    let t = x.tensor();
                    let (v, i) = if max { t.cummax(d) } else { t.cummin(d) }.unwrap_or_else(|e| panic!("{w}: {e}"));
                    assert_close(&w, &v, &host_lines(&x, nd, dtype, |l| running_extreme(l, max).0));
                    assert_close(&w, &i, &host_lines(&x, nd, DType::I64, |l| running_extreme(l, max).1));
                }
                if dtype == DType::F32 {
                    let w = format!("logcumsumexp({shape:?}, {d})");
                    let got = x.tensor().logcumsumexp(d).unwrap_or_else(|e| panic!("{w}: {e}"));
                    assert_close_tol(&w, &got, &host_lines(&x, nd, dtype, log_cum_sum_exp), (1e-5, 1e-5));
                }
            }
        }
    }
    let nan = Host::new(DType::F32, &[6], vec![1.0, f64::NAN, 4.0, f64::NAN, 0.0, 9.0]);
    let (v, i) = nan.tensor().cummax(0).unwrap();
    assert_close("cummax with NaNs", &v, &Host::new(DType::F32, &[6], running_extreme(&nan.data, true).0));
    assert_eq!(i.to_vec::<i64>().unwrap(), [0, 1, 1, 3, 3, 3]);
    let e = err_text(Host::new(DType::I64, &[2], vec![1.0, 2.0]).tensor().logcumsumexp(0));
    assert!(e.contains("logcumsumexp") && e.contains("floating point"), "{e}");
}
}
