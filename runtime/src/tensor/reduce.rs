//! Reductions over dims, with `keepdim`. An empty `dims` reduces every dim.

use fusion::shape::{normalize_dim, normalize_dims};
use fusion::{ArgReduceOp, Op, ReduceOp};

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
