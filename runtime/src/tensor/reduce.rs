//! Reductions over dims, with `keepdim`. An empty `dims` reduces every dim.

use fusion::shape::{normalize_dim, normalize_dims};
use fusion::{ArgReduceOp, DType, Op, ReduceOp};

use super::Tensor;
use crate::error::Result;

impl Tensor {
    #[track_caller]
    fn reduce(&self, op: ReduceOp, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        let name = Op::Reduce {
            op,
            dims: Default::default(),
            keepdim,
        }
        .name();
        let dims = normalize_dims(name, dims, self.rank())?;
        self.op(Op::Reduce { op, dims, keepdim }, &[])
    }

    /// Sum over `dims` (ints and bools sum to int64).
    #[track_caller]
    pub fn sum(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Sum, dims, keepdim)
    }

    /// Sum of every element.
    #[track_caller]
    pub fn sum_all(&self) -> Result<Tensor> {
        self.reduce(ReduceOp::Sum, &[], false)
    }

    /// Mean over `dims` (floating-point tensors only, as in PyTorch).
    #[track_caller]
    pub fn mean(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Mean, dims, keepdim)
    }

    #[track_caller]
    pub fn mean_all(&self) -> Result<Tensor> {
        self.reduce(ReduceOp::Mean, &[], false)
    }

    #[track_caller]
    pub fn prod(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Prod, dims, keepdim)
    }

    /// How many elements are not zero over `dims` (all of them when empty),
    /// as int64 (`torch.count_nonzero`; NaN counts, as it is not zero).
    #[track_caller]
    pub fn count_nonzero(&self, dims: &[i64]) -> Result<Tensor> {
        // A 0-d tensor takes dim 0 or -1, as in PyTorch.
        let rank = self.rank().max(1);
        normalize_dims("count_nonzero", dims, rank)?;
        let flat;
        let x = if self.rank() == 0 {
            flat = self.reshape(&[1])?;
            &flat
        } else {
            self
        };
        x.ne(0)?.to_dtype(fusion::DType::I64)?.sum(dims, false)
    }

    /// Maximum over `dims` (`torch.amax`; NaN propagates).
    #[track_caller]
    pub fn max(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Max, dims, keepdim)
    }

    /// Minimum over `dims` (`torch.amin`).
    #[track_caller]
    pub fn min(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Min, dims, keepdim)
    }

    /// Variance over `dims` with Bessel's `correction` (1 is PyTorch's default).
    #[track_caller]
    pub fn var(&self, dims: &[i64], correction: i64, keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::Var { correction }, dims, keepdim)
    }

    /// Standard deviation over `dims`: the square root of [`Tensor::var`].
    #[track_caller]
    pub fn std(&self, dims: &[i64], correction: i64, keepdim: bool) -> Result<Tensor> {
        self.var(dims, correction, keepdim)?.sqrt()
    }

    /// Whether any element over `dims` is not zero (`torch.any`; NaN is not
    /// zero), as bool; false over an empty dim.
    #[track_caller]
    pub fn any(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        self.ne(0)?.sum(dims, keepdim)?.gt(0)
    }

    /// Whether every element over `dims` is not zero (`torch.all`), as bool;
    /// true over an empty dim.
    #[track_caller]
    pub fn all(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        self.eq(0)?.sum(dims, keepdim)?.eq(0)
    }

    /// `torch.linalg.vector_norm`: `sum(|x|^ord)^(1/ord)` over `dims`, with
    /// ord inf the largest `|x|`, -inf the smallest, and 0 the count of
    /// elements that are not zero (in the input's float dtype).
    #[track_caller]
    pub fn vector_norm(&self, ord: f64, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        if !self.dtype().is_float() {
            return Err(fusion::Error::Invalid {
                op: "vector_norm",
                message: format!(
                    "expected a floating-point input, got {}{:?}",
                    self.dtype(),
                    self.shape()
                ),
            }
            .into());
        }
        let a = self.abs()?;
        if ord == f64::INFINITY {
            a.max(dims, keepdim)
        } else if ord == f64::NEG_INFINITY {
            a.min(dims, keepdim)
        } else if ord == 0.0 {
            a.ne(0.0)?.to_dtype(self.dtype())?.sum(dims, keepdim)
        } else if ord == 1.0 {
            a.sum(dims, keepdim)
        } else if ord == 2.0 {
            a.mul(&a)?.sum(dims, keepdim)?.sqrt()
        } else {
            a.pow(ord)?.sum(dims, keepdim)?.pow(1.0 / ord)
        }
    }

    /// `torch.max(x, dim)`: the largest elements along `dim` and the index of
    /// the first of each (a 0-d tensor is its own maximum, at index 0).
    #[track_caller]
    pub fn max_dim(&self, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        self.extreme_dim(ReduceOp::Max, ArgReduceOp::ArgMax, dim, keepdim)
    }

    /// `torch.min(x, dim)`: as [`Tensor::max_dim`], for the smallest.
    #[track_caller]
    pub fn min_dim(&self, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        self.extreme_dim(ReduceOp::Min, ArgReduceOp::ArgMin, dim, keepdim)
    }

    #[track_caller]
    fn extreme_dim(
        &self,
        op: ReduceOp,
        arg: ArgReduceOp,
        dim: i64,
        keepdim: bool,
    ) -> Result<(Tensor, Tensor)> {
        if self.rank() == 0 {
            let name = if op == ReduceOp::Max { "max" } else { "min" };
            normalize_dim(name, dim, 0)?;
            let index = self.device().zeros(&[], DType::I64)?;
            return Ok((self.clone(), index));
        }
        let values = self.reduce(op, &[dim], keepdim)?;
        Ok((values, self.arg_reduce(arg, Some(dim), keepdim)?))
    }

    /// `torch.trace`: the sum of a matrix's main diagonal (ints and bools sum
    /// to int64).
    #[track_caller]
    pub fn trace(&self) -> Result<Tensor> {
        let &[rows, cols] = self.shape() else {
            return Err(fusion::Error::Invalid {
                op: "trace",
                message: format!(
                    "expected a matrix, but got tensor with dim {} ({}{:?})",
                    self.rank(),
                    self.dtype(),
                    self.shape()
                ),
            }
            .into());
        };
        // The diagonal of the flattened matrix: every (cols + 1)-th element.
        let n = rows.min(cols);
        let index = self.device().arange(0, n * (cols + 1), cols + 1)?;
        self.reshape(&[rows * cols])?
            .index_select(0, &index)?
            .sum(&[], false)
    }

    /// `log(sum(exp(x)))` over `dims`, computed stably.
    #[track_caller]
    pub fn logsumexp(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        self.reduce(ReduceOp::LogSumExp, dims, keepdim)
    }

    #[track_caller]
    fn arg_reduce(&self, op: ArgReduceOp, dim: Option<i64>, keepdim: bool) -> Result<Tensor> {
        let name = Op::ArgReduce {
            op,
            dim: None,
            keepdim,
        }
        .name();
        let dim = dim
            .map(|d| normalize_dim(name, d, self.rank()))
            .transpose()?;
        self.op(Op::ArgReduce { op, dim, keepdim }, &[])
    }

    /// Index of the first maximum along `dim` (of the flattened tensor when
    /// `None`); NaN counts as the maximum, as in PyTorch.
    #[track_caller]
    pub fn argmax(&self, dim: Option<i64>, keepdim: bool) -> Result<Tensor> {
        self.arg_reduce(ArgReduceOp::ArgMax, dim, keepdim)
    }

    #[track_caller]
    pub fn argmin(&self, dim: Option<i64>, keepdim: bool) -> Result<Tensor> {
        self.arg_reduce(ArgReduceOp::ArgMin, dim, keepdim)
    }
}
