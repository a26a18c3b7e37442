//! Strided views of a flat storage (how PyTorch views of `tpu` tensors are
//! read and written), in every mode, against the host: contiguous, offset,
//! transposed, stepped, expanded, diagonal, and general strides.

mod common;

use common::*;
use eagertpu::{DType, Tensor};

/// (sizes, strides, offset) of typical PyTorch views of a 60-element storage.
fn views() -> Vec<(Vec<i64>, Vec<i64>, i64)> {
    vec![
        (vec![60], vec![1], 0),              // the whole storage
        (vec![3, 4, 5], vec![20, 5, 1], 0),  // contiguous
        (vec![2, 5], vec![5, 1], 17),        // contiguous at an offset (narrow)
        (vec![5, 4], vec![1, 5], 0),         // t() of [4, 5]
        (vec![5, 3, 4], vec![1, 20, 5], 0),  // permute(2, 0, 1)
        (vec![3, 2], vec![20, 2], 1),        // x[:, 1::2] style step
        (vec![4, 3], vec![0, 1], 7),         // expand of a row
        (vec![5], vec![11], 3),              // a diagonal
        (vec![1, 6, 1], vec![60, 1, 9], 30), // size-1 dims with odd strides
        (vec![3, 0], vec![4, 1], 0),         // empty
        (vec![], vec![], 42),                // a single element (select)
        (vec![2, 3, 2], vec![13, 4, 29], 2), // general strides
    ]
}

fn host_view(storage: &Host, sizes: &[i64], strides: &[i64], offset: i64) -> Host {
    let data = (0..numel(sizes))
        .map(|i| {
            let idx = unravel(i, sizes);
            let at: i64 = offset + idx.iter().zip(strides).map(|(a, b)| a * b).sum::<i64>();
            storage.data[at as usize]
        })
        .collect();
    Host::new(storage.dtype, sizes, data)
}

fn host_scatter(storage: &Host, value: &Host, sizes: &[i64], strides: &[i64], offset: i64) -> Host {
    let mut out = storage.clone();
    for i in 0..numel(sizes) {
        let idx = unravel(i, sizes);
        let at: i64 = offset + idx.iter().zip(strides).map(|(a, b)| a * b).sum::<i64>();
        out.data[at as usize] = value.data[i];
    }
    out
}

all_modes! {
fn reading_views_of_a_storage_matches_the_host() {
    for dtype in [DType::F32, DType::I64, DType::Bool, DType::BF16] {
        let storage = Host::random(dtype, &[60], 3);
        let t = storage.tensor();
        for (sizes, strides, offset) in views() {
            let got = t.as_strided(&sizes, &strides, offset).unwrap();
            let want = host_view(&storage, &sizes, &strides, offset);
            assert_close(&format!("view {sizes:?}/{strides:?}+{offset} ({dtype})"), &got, &want);
        }
    }
}
}

all_modes! {
fn writing_through_views_rebuilds_the_storage() {
    for dtype in [DType::F32, DType::I32] {
        let storage = Host::random(dtype, &[60], 4);
        let t = storage.tensor();
        for (k, (sizes, strides, offset)) in views().into_iter().enumerate() {
            // Writes through expanded views overlap (PyTorch refuses them).
            if strides.iter().zip(&sizes).any(|(s, n)| *s == 0 && *n > 1) {
                continue;
            }
            let value = Host::random(dtype, &sizes, 10 + k as u64);
            let got = t.as_strided_scatter(&value.tensor(), &sizes, &strides, offset).unwrap();
            let want = host_scatter(&storage, &value, &sizes, &strides, offset);
            assert_close(&format!("write {sizes:?}/{strides:?}+{offset} ({dtype})"), &got, &want);
        }
    }
}
}

#[test]
fn bad_views_are_errors() {
    let t = Tensor::zeros(&[10], DType::F32).unwrap();
    let e = err_text(t.as_strided(&[4], &[3], 1));
    assert!(e.contains("as_strided") && e.contains("index 10"), "{e}");
    let e = err_text(t.as_strided(&[2], &[1, 1], 0));
    assert!(e.contains("one stride per size"), "{e}");
    let e = err_text(t.reshape(&[2, 5]).unwrap().as_strided(&[2], &[1], 0));
    assert!(e.contains("1-d storage"), "{e}");
    let v = Tensor::zeros(&[3], DType::F32).unwrap();
    let e = err_text(t.as_strided_scatter(&v, &[2], &[1], 0));
    assert!(e.contains("as_strided_scatter") && e.contains("[2]"), "{e}");
}
