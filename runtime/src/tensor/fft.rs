//! The discrete Fourier transforms behind `torch.fft`: ATen's three kernels
//! (`_fft_c2c`, `_fft_r2c`, `_fft_c2r`) over any dims, as StableHLO's `fft`
//! over at most three trailing dims: the dims moved last and back, more than
//! three transformed in groups (the transform is separable).

use fusion::shape::normalize_dims;
use fusion::{Dims, FftKind, Op, Shape};

use super::Tensor;
use crate::error::Result;

/// How a transform is scaled (ATen's `fft_norm_mode`, the number its
/// kernels take): by nothing, by `1 / sqrt(n)` or by `1 / n`, `n` the
/// signal's size, whichever the direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FftNorm {
    None,
    ByRootN,
    ByN,
}

impl FftNorm {
    /// ATen's numbering: 0, 1, 2.
    pub fn from_code(code: i64) -> Option<FftNorm> {
        [FftNorm::None, FftNorm::ByRootN, FftNorm::ByN]
            .get(usize::try_from(code).ok()?)
            .copied()
    }

    fn factor(self, n: i64) -> f64 {
        match self {
            FftNorm::None => 1.0,
            FftNorm::ByRootN => 1.0 / (n as f64).sqrt(),
            FftNorm::ByN => 1.0 / n as f64,
        }
    }
}

impl Tensor {
    /// The complex transform of a complex tensor over `dims` (`forward`:
    /// `sum_k x_k e^(-2 pi i jk / n)`; else with `+`), scaled as `norm`
    /// says: ATen's `_fft_c2c`.
    #[track_caller]
    pub fn fft_c2c(&self, dims: &[i64], norm: FftNorm, forward: bool) -> Result<Tensor> {
        let dims = normalize_dims("_fft_c2c", dims, self.rank())?;
        let kind = if forward {
            FftKind::Forward
        } else {
            FftKind::Inverse
        };
        let mut x = self.clone();
        for group in dims.chunks(3) {
            x = x.transform(kind, group, None)?;
        }
        let n = signal_size(x.shape(), &dims);
        // XLA's inverse divides by the signal's size: undone, then scaled.
        x.scaled(norm.factor(n) * if forward { 1.0 } else { n as f64 })
    }

    /// The forward transform of a real tensor over `dims` (ATen's
    /// `_fft_r2c`): with `onesided`, only the first `n / 2 + 1` terms along
    /// the last of `dims` (the others are their conjugates).
    #[track_caller]
    pub fn fft_r2c(&self, dims: &[i64], norm: FftNorm, onesided: bool) -> Result<Tensor> {
        if !onesided {
            return self
                .to_dtype(self.dtype().to_complex())?
                .fft_c2c(dims, norm, true);
        }
        let dims = one_or_more("_fft_r2c", dims, self.rank())?;
        let n = signal_size(self.shape(), &dims);
        let (rest, tail) = dims.split_at(dims.len() - dims.len().min(3));
        let mut x = self.transform(FftKind::RealForward, tail, None)?;
        for group in rest.chunks(3) {
            x = x.transform(FftKind::Forward, group, None)?;
        }
        x.scaled(norm.factor(n))
    }

    /// The real signal of `last_dim_size` elements along the last of `dims`
    /// whose one-sided transform `self` is (ATen's `_fft_c2r`, the inverse
    /// of `fft_r2c`): the imaginary parts of the terms that must be real
    /// are ignored.
    #[track_caller]
    pub fn fft_c2r(&self, dims: &[i64], norm: FftNorm, last_dim_size: i64) -> Result<Tensor> {
        let dims = one_or_more("_fft_c2r", dims, self.rank())?;
        let (rest, tail) = dims.split_at(dims.len() - dims.len().min(3));
        let mut x = self.clone();
        for group in rest.chunks(3) {
            x = x.transform(FftKind::Inverse, group, None)?;
        }
        let x = x.transform(FftKind::RealInverse, tail, Some(last_dim_size))?;
        let n = signal_size(x.shape(), &dims);
        x.scaled(norm.factor(n) * n as f64)
    }

    /// One `Op::Fft` over `dims` (one to three, in that order), moved last
    /// and back; the last signal size `last_length` if given, else its dim's.
    fn transform(&self, kind: FftKind, dims: &[usize], last_length: Option<i64>) -> Result<Tensor> {
        if dims.is_empty() {
            return Ok(self.clone());
        }
        let rank = self.rank();
        let perm: Vec<i64> = (0..rank)
            .filter(|d| !dims.contains(d))
            .chain(dims.iter().copied())
            .map(|d| d as i64)
            .collect();
        let mut lengths: Shape = dims.iter().map(|&d| self.shape()[d]).collect();
        if let Some(n) = last_length {
            *lengths.last_mut().expect("dims is not empty") = n;
        }
        let out = self.permute(&perm)?.op(Op::Fft { kind, lengths }, &[])?;
        let mut inverse = vec![0i64; rank];
        for (i, &p) in perm.iter().enumerate() {
            inverse[p as usize] = i as i64;
        }
        out.permute(&inverse)
    }

    fn scaled(&self, factor: f64) -> Result<Tensor> {
        if factor == 1.0 {
            return Ok(self.clone());
        }
        self * factor
    }
}

/// `dims` normalized, at least one: a real transform halves the last.
fn one_or_more(op: &'static str, dims: &[i64], rank: usize) -> Result<Dims> {
    if dims.is_empty() {
        return Err(fusion::Error::Invalid {
            op,
            message: "got no dims, expected at least one (the last is the one halved)".into(),
        }
        .into());
    }
    Ok(normalize_dims(op, dims, rank)?)
}

/// The number of elements of a signal over `dims` of `shape`.
fn signal_size(shape: &[i64], dims: &[usize]) -> i64 {
    dims.iter().map(|&d| shape[d]).product()
}
