//! Cumulative sums and products, sorting and top-k along one dim, with
//! PyTorch's semantics: a 0-d tensor is one element along dim 0 (or -1).
//! The cumulative ops a caller names (`etpu_cumulative`) are the table
//! [`Cumulative`].
//!
//! A sort records two ops, one per result (values, int64 indices), as max
//! pooling does; top-k is a sort then a slice of the first `k` along the dim.

use fusion::shape::normalize_dim;
use fusion::{Op, ScanOp, SortOutput};

use super::Tensor;
use crate::error::Result;
use fusion::named_ops;

named_ops! {
    /// A running reduction along a dim ([`Tensor::cumulative`]).
    Cumulative {
        /// [`Tensor::cumsum`].
        CumSum cumsum,
        /// [`Tensor::cumprod`].
        CumProd cumprod,
        /// The values of [`Tensor::cummax`].
        CumMax cummax,
        /// The values of [`Tensor::cummin`].
        CumMin cummin,
        /// The indices of [`Tensor::cummax`].
        CumMaxIndices cummax_indices,
        /// The indices of [`Tensor::cummin`].
        CumMinIndices cummin_indices,
        /// [`Tensor::logcumsumexp`].
        LogCumSumExp logcumsumexp,
    }
}

impl Tensor {
    /// `dim` normalized; out of range is an error naming `op` and the shape.
    fn scan_dim(&self, op: &'static str, dim: i64) -> Result<usize> {
        normalize_dim(op, dim, self.rank()).map_err(|_| {
            let r = self.rank().max(1) as i64;
            fusion::Error::ShapeMismatch {
                op,
                got: format!("dim {dim} for a tensor {}", self.ty()),
                expected: format!("a dim in [{}, {}]", -r, r - 1),
            }
            .into()
        })
    }

    #[track_caller]
    fn scan(&self, op: ScanOp, dim: i64) -> Result<Tensor> {
        let name = Op::Scan { op, dim: 0 }.name();
        let dim = self.scan_dim(name, dim)?;
        self.op(Op::Scan { op, dim }, &[])
    }

    /// The running reduction `op` along `dim`: the one entry for
    /// [`Tensor::cumsum`] and [`Tensor::cumprod`] by name.
    #[track_caller]
    pub fn cumulative(&self, op: Cumulative, dim: i64) -> Result<Tensor> {
        let op = match op {
            Cumulative::CumSum => ScanOp::Sum,
            Cumulative::CumProd => ScanOp::Prod,
            Cumulative::CumMax => ScanOp::Max,
            Cumulative::CumMin => ScanOp::Min,
            Cumulative::CumMaxIndices => ScanOp::ArgMax,
            Cumulative::CumMinIndices => ScanOp::ArgMin,
            Cumulative::LogCumSumExp => ScanOp::LogSumExp,
        };
        self.scan(op, dim)
    }

    /// The running maximum along `dim` and where it was (`torch.cummax`):
    /// (values in the input's dtype, int64 indices; the latest of equal
    /// maxima). A NaN, once met, stays the maximum, at the latest NaN.
    #[track_caller]
    pub fn cummax(&self, dim: i64) -> Result<(Tensor, Tensor)> {
        Ok((
            self.scan(ScanOp::Max, dim)?,
            self.scan(ScanOp::ArgMax, dim)?,
        ))
    }

    /// The running minimum along `dim` and where it was (`torch.cummin`), as
    /// [`Tensor::cummax`].
    #[track_caller]
    pub fn cummin(&self, dim: i64) -> Result<(Tensor, Tensor)> {
        Ok((
            self.scan(ScanOp::Min, dim)?,
            self.scan(ScanOp::ArgMin, dim)?,
        ))
    }

    /// `log(cumsum(exp(x)))` along `dim` without overflow
    /// (`torch.logcumsumexp`); floating point only.
    #[track_caller]
    pub fn logcumsumexp(&self, dim: i64) -> Result<Tensor> {
        self.scan(ScanOp::LogSumExp, dim)
    }

    /// Running sums along `dim` (`torch.cumsum`): element i is the sum of
    /// elements 0..=i. Ints and bools sum in int64; floats keep their dtype.
    #[track_caller]
    pub fn cumsum(&self, dim: i64) -> Result<Tensor> {
        self.scan(ScanOp::Sum, dim)
    }

    /// Running products along `dim` (`torch.cumprod`), with cumsum's dtypes.
    #[track_caller]
    pub fn cumprod(&self, dim: i64) -> Result<Tensor> {
        self.scan(ScanOp::Prod, dim)
    }

    /// The elements sorted along `dim` and where each was along it: (values,
    /// int64 indices). Stable (equal elements keep their order, also when
    /// `descending`); NaN sorts above every number, as in PyTorch.
    #[track_caller]
    pub fn sort(&self, dim: i64, descending: bool) -> Result<(Tensor, Tensor)> {
        let op = |dim, output| Op::Sort {
            dim,
            descending,
            output,
        };
        let name = op(0, SortOutput::Values).name();
        let dim = self.scan_dim(name, dim)?;
        self.op_pair(op(dim, SortOutput::Values), op(dim, SortOutput::Indices))
    }

    /// The int64 indices that sort `dim` (`torch.argsort(stable=True)`).
    #[track_caller]
    pub fn argsort(&self, dim: i64, descending: bool) -> Result<Tensor> {
        let dim = self.scan_dim("argsort", dim)?;
        let output = SortOutput::Indices;
        self.op(
            Op::Sort {
                dim,
                descending,
                output,
            },
            &[],
        )
    }

    /// The `k` largest (or, unless `largest`, smallest) elements along `dim`
    /// and their int64 indices, as `torch.topk`. NaN counts as the largest.
    /// The result is always sorted (`sorted = false` lets PyTorch return any
    /// order, so sorted is one); ties keep index order.
    #[track_caller]
    pub fn topk(&self, k: i64, dim: i64, largest: bool, sorted: bool) -> Result<(Tensor, Tensor)> {
        let _ = sorted;
        let d = self.scan_dim("topk", dim)?;
        let size = self.shape().get(d).copied().unwrap_or(1);
        if !(0..=size).contains(&k) {
            return Err(fusion::Error::ShapeMismatch {
                op: "topk",
                got: format!(
                    "k = {k} for dim {d} of size {size} of a tensor {}",
                    self.ty()
                ),
                expected: format!("k in [0, {size}]"),
            }
            .into());
        }
        let (values, indices) = self.sort(dim, largest)?;
        if self.rank() == 0 || k == size {
            return Ok((values, indices));
        }
        Ok((values.slice(dim, 0, k, 1)?, indices.slice(dim, 0, k, 1)?))
    }
}
