//! Order statistics (median, nanmedian, kthvalue, mode) against a host
//! reference in every mode: each row sorted stably with NaN last, one
//! position taken; values and the indices they came from both checked.

mod common;

use common::*;
use eagertpu::{DType, OrderStatistic, Tensor};

/// The host's statistic of one row: (value, index into the row).
fn host_row(row: &[f64], stat: OrderStatistic, float: bool) -> (f64, i64) {
    let mut order: Vec<usize> = (0..row.len()).collect();
    // Stable, NaN above every number.
    order.sort_by(|&a, &b| match (row[a].is_nan(), row[b].is_nan()) {
        (true, true) => std::cmp::Ordering::Equal,
        (true, false) => std::cmp::Ordering::Greater,
        (false, true) => std::cmp::Ordering::Less,
        _ => row[a].partial_cmp(&row[b]).unwrap(),
    });
    let n = row.len();
    let nans = if float {
        row.iter().filter(|v| v.is_nan()).count()
    } else {
        0
    };
    let position = match stat {
        OrderStatistic::Kth(k) => k as usize - 1,
        OrderStatistic::Median if nans > 0 => n - nans,
        OrderStatistic::Median => (n - 1) / 2,
        OrderStatistic::NanMedian if nans == n => 0,
        OrderStatistic::NanMedian => (n - nans - 1) / 2,
        OrderStatistic::Mode => {
            // The first longest run of equal sorted values; its last index.
            let (mut best, mut best_len, mut start) = (0, 0, 0);
            for i in 1..=n {
                if i == n || row[order[i]] != row[order[start]] {
                    if i - start > best_len {
                        (best, best_len) = (start, i - start);
                    }
                    start = i;
                }
            }
            return (row[order[best]], order[best + best_len - 1] as i64);
        }
    };
    (row[order[position]], order[position] as i64)
}

/// The host's statistic along `dim` of `x`: (values, indices), `dim` kept.
fn host(x: &Host, stat: OrderStatistic, dim: usize) -> (Vec<f64>, Vec<f64>) {
    let mut out_shape = x.shape.clone();
    out_shape[dim] = 1;
    let (mut values, mut indices) = (vec![], vec![]);
    for flat in 0..numel(&out_shape) {
        let mut idx = unravel(flat, &out_shape);
        let row: Vec<f64> = (0..x.shape[dim])
            .map(|j| {
                idx[dim] = j;
                x.at(&idx)
            })
            .collect();
        let (v, i) = host_row(&row, stat, x.dtype.is_float());
        values.push(v);
        indices.push(i as f64);
    }
    (values, indices)
}

/// Small integers, so rows have ties (the mode and stable order matter).
fn tied(dtype: DType, shape: &[i64], seed: u64) -> Host {
    let mut rng = Rng::new(seed);
    Host::new(
        dtype,
        shape,
        (0..numel(shape)).map(|_| rng.int(0, 3) as f64).collect(),
    )
}

fn stats(n: i64) -> Vec<OrderStatistic> {
    vec![
        OrderStatistic::Median,
        OrderStatistic::NanMedian,
        OrderStatistic::Kth(1),
        OrderStatistic::Kth(n),
        OrderStatistic::Kth((n + 1) / 2),
        OrderStatistic::Mode,
    ]
}

all_modes! {
fn order_statistics_match_the_host_reference() {
    let shape = [3, 5, 4];
    for dtype in [DType::F32, DType::I32, DType::I64, DType::BF16] {
        let mut x = tied(dtype, &shape, 1000);
        if dtype.is_float() {
            // One row with a NaN, one with all NaN along dim 1.
            x.data[0] = f64::NAN;
            for j in 0..5 {
                x.data[3 + 4 * j] = f64::NAN;
            }
        }
        for dim in 0..3 {
            for stat in stats(shape[dim]) {
                let (want_v, want_i) = host(&x, stat, dim);
                let mut kept = shape.to_vec();
                kept[dim] = 1;
                for keepdim in [true, false] {
                    let what = format!("{stat:?}({dtype}{shape:?}, dim {dim}, keepdim {keepdim})");
                    let (v, i) = x
                        .tensor()
                        .order_statistic(stat, dim as i64 - 3 * (dim % 2) as i64, keepdim)
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    let mut out = kept.clone();
                    if !keepdim {
                        out.remove(dim);
                    }
                    assert_close(&what, &v, &Host::new(dtype, &out, want_v.clone()));
                    assert_close(&format!("{what} indices"), &i, &Host::new(DType::I64, &out, want_i.clone()));
                }
            }
        }
    }
}
}

all_modes! {
fn median_of_all_elements_matches_the_host() {
    for dtype in [DType::F32, DType::I64] {
        let mut x = Host::random(dtype, &[4, 3], 1010);
        let flat = Host::new(dtype, &[12], x.data.clone());
        for (ignore_nan, stat) in [(false, OrderStatistic::Median), (true, OrderStatistic::NanMedian)] {
            let want = host(&flat, stat, 0).0;
            assert_close(&format!("median_all({dtype}, {ignore_nan})"), &x.tensor().median_all(ignore_nan).unwrap(), &Host::new(dtype, &[], want));
        }
        if dtype.is_float() {
            x.data[5] = f64::NAN;
            let nan = x.tensor().median_all(false).unwrap().to_f64_vec().unwrap();
            assert!(nan[0].is_nan(), "median of a tensor with a NaN: {nan:?}");
            let mut numbers: Vec<f64> = x.data.iter().copied().filter(|v| !v.is_nan()).collect();
            numbers.sort_by(|a, b| a.partial_cmp(b).unwrap());
            let got = x.tensor().median_all(true).unwrap();
            assert_close("nanmedian with a NaN", &got, &Host::new(dtype, &[], vec![numbers[(numbers.len() - 1) / 2]]));
        }
    }
    let empty = Tensor::zeros(&[0, 3], DType::F32).unwrap().median_all(false).unwrap();
    assert!(empty.to_vec::<f32>().unwrap()[0].is_nan());
    let scalar = Host::new(DType::F32, &[], vec![2.5]);
    let (v, i) = scalar.tensor().order_statistic(OrderStatistic::Median, 0, true).unwrap();
    assert_close("median of a 0-d tensor", &v, &scalar);
    assert_close("its index", &i, &Host::new(DType::I64, &[], vec![0.0]));
}
}

all_modes! {
fn order_statistics_reject_bad_arguments_naming_them() {
    let x = Host::random(DType::F32, &[2, 3], 1020).tensor();
    assert_err(x.order_statistic(OrderStatistic::Kth(4), 1, false), "kthvalue", &["selected number k = 4", "size 3", "[2, 3]"]);
    assert_err(x.order_statistic(OrderStatistic::Kth(0), 1, false), "kthvalue", &["k = 0"]);
    assert_err(x.order_statistic(OrderStatistic::Median, 2, false), "median", &["dim 2", "float32[2, 3]"]);
    let empty = Tensor::zeros(&[2, 0], DType::F32).unwrap();
    assert_err(empty.order_statistic(OrderStatistic::Mode, 1, false), "mode", &["size 0"]);
    let ints = Tensor::zeros(&[0], DType::I32).unwrap();
    assert_err(ints.median_all(false), "median", &["empty", "int32[0]"]);
}
}

/// The host's binary search, as PyTorch's CPU kernel compares.
fn search_ref(row: &[f64], v: f64, right: bool) -> i64 {
    let (mut start, mut end) = (0usize, row.len());
    while start < end {
        let mid = start + (end - start) / 2;
        let after = if right { row[mid] > v } else { row[mid] >= v };
        if after {
            end = mid;
        } else {
            start = mid + 1;
        }
    }
    start as i64
}

all_modes! {
fn searchsorted_is_the_host_binary_search_for_every_row() {
    // Rows of a batch, each sorted, with runs of equal values; values on,
    // between and outside them, and a NaN (which goes last).
    let seq = Host::new(DType::F32, &[2, 5], vec![1.0, 3.0, 3.0, 5.0, 9.0, -2.0, 0.0, 0.0, 0.0, 4.0]);
    let values = Host::new(DType::F32, &[2, 4], vec![0.0, 3.0, 9.0, f64::NAN, -3.0, 0.0, 4.0, 7.0]);
    for right in [false, true] {
        let got = seq.tensor().searchsorted(&values.tensor(), right).unwrap();
        assert_eq!(got.shape(), [2, 4]);
        let want: Vec<i64> = (0..8)
            .map(|i| search_ref(&seq.data[(i / 4) * 5..(i / 4) * 5 + 5], values.data[i], right))
            .collect();
        assert_eq!(got.to_vec::<i64>().unwrap(), want, "right={right}");
    }
    // A 1-d sequence serves values of any shape; one of length 1; int64 exact.
    let big = 1i64 << 60;
    let ints = Tensor::from_slice(&[big, big + 2, big + 4], &[3]).unwrap();
    let probe = Tensor::from_slice(&[big + 1, big + 2, big + 5, 0], &[2, 2]).unwrap();
    let got = ints.searchsorted(&probe, false).unwrap();
    assert_eq!(got.shape(), [2, 2]);
    assert_eq!(got.to_vec::<i64>().unwrap(), [1, 1, 3, 0]);
    let one = Tensor::from_slice(&[2.0f32], &[1]).unwrap();
    let got = one.searchsorted(&Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]).unwrap(), true).unwrap();
    assert_eq!(got.to_vec::<i64>().unwrap(), [0, 1, 1]);
    // Leading dims must match.
    let e = seq.tensor().searchsorted(&Tensor::from_slice(&[1.0f32; 3], &[3, 1]).unwrap(), false);
    assert_err(e, "searchsorted", &["float32[2, 5]", "float32[3, 1]"]);
}
}
