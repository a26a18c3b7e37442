//! Builders and checks shared by the layout and indexing op tests.

use eagertpu::{DType, Result, Tensor};

use super::*;

/// A host array of `shape` whose element at each index is `f(index)`.
pub fn build(dtype: DType, shape: &[i64], f: impl Fn(&[i64]) -> f64) -> Host {
    let data = (0..numel(shape)).map(|i| f(&unravel(i, shape))).collect();
    Host::new(dtype, shape, data)
}

/// Mostly distinct values (exact in every dtype), so a misplaced element shows.
pub fn distinct(dtype: DType, shape: &[i64]) -> Host {
    build(dtype, shape, |i| {
        let v = ((ravel(i, shape) * 37 + 11) % 101) as f64;
        match dtype {
            DType::Bool => v % 2.0,
            DType::U8 => v,
            _ => v - 50.0,
        }
    })
}

pub fn vec1(dtype: DType, v: &[f64]) -> Host {
    Host::new(dtype, &[v.len() as i64], v.to_vec())
}

/// `x` with another shape (same elements in row-major order).
pub fn reshaped(x: &Host, shape: &[i64]) -> Host {
    Host::new(x.dtype, shape, x.data.clone())
}

/// `x` at `o` with index `v` in dim `d`.
pub fn at_with(x: &Host, o: &[i64], d: usize, v: i64) -> f64 {
    let mut i = o.to_vec();
    i[d] = v;
    x.at(&i)
}

/// `shape` with dim `d` of size `n`.
pub fn with_dim(shape: &[i64], d: usize, n: i64) -> Vec<i64> {
    let mut s = shape.to_vec();
    s[d] = n;
    s
}

/// A fill value suited to `dtype`.
pub fn fill(dtype: DType) -> f64 {
    match dtype {
        DType::Bool => 1.0,
        DType::U8 => 200.0,
        d if d.is_float() => -2.5,
        _ => -7.0,
    }
}

/// `dim` counted from the front.
pub fn norm(dim: i64, rank: usize) -> usize {
    (if dim < 0 { dim + rank as i64 } else { dim }) as usize
}

/// The op succeeded and matches `want` (whose dtype and shape the message shows).
#[track_caller]
pub fn check(what: &str, got: Result<Tensor>, want: &Host) {
    match got {
        Ok(t) => assert_close(what, &t, want),
        Err(e) => panic!("{what} ({:?}{:?}): {e}", want.dtype, want.shape),
    }
}

/// The op failed with a message holding each of `words`.
#[track_caller]
pub fn check_err<T: std::fmt::Debug>(got: Result<T>, words: &[&str]) {
    let e = err_text(got);
    assert!(words.iter().all(|w| e.contains(w)), "{e:?} lacks {words:?}");
}

/// An index tensor of `dtype` holding `v`.
pub fn ix(dtype: DType, shape: &[i64], v: &[i64]) -> Tensor {
    Host::new(dtype, shape, v.iter().map(|&i| i as f64).collect()).tensor()
}
