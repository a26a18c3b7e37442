//! Reductions over dims, with `keepdim`. An empty `dims` reduces every dim.
//!
//! The reductions a caller names (the C ABI's `etpu_reduce`, `etpu_argreduce`
//! and `etpu_extreme_dim` take PyTorch's names) are tables declared once with
//! `named_ops!`: one line per op gives the variant and its name, and the
//! enum, `ALL`, `name()` and `from_name()` come from it; one `Tensor` method
//! per table ([`Tensor::reduce`], [`Tensor::arg_reduce`],
//! [`Tensor::extreme_dim`]) takes the op. The graph's own reductions are
//! fusion's `ReduceOp` and `ArgReduceOp`, which the ops here record.

use fusion::shape::{normalize_dim, normalize_dims};
use fusion::{ArgReduceOp, DType, Op, ReduceOp};

use super::Tensor;
use crate::error::Result;

use fusion::named_ops;

named_ops! {
    /// A reduction over dims ([`Tensor::reduce`]).
    Reduce {
        /// [`Tensor::sum`].
        Sum sum,
        /// [`Tensor::mean`].
        Mean mean,
        /// [`Tensor::prod`].
        Prod prod,
        /// [`Tensor::max`] (`torch.amax`).
        Max max,
        /// [`Tensor::min`] (`torch.amin`).
        Min min,
        /// [`Tensor::logsumexp`].
        LogSumExp logsumexp,
        /// [`Tensor::any`].
        Any any,
        /// [`Tensor::all`].
        All all,
        /// [`Tensor::count_nonzero`]: no `keepdim` (PyTorch has none).
        CountNonzero count_nonzero,
    }
}

named_ops! {
    /// The index of an extreme along a dim ([`Tensor::arg_reduce`]).
    ArgReduce {
        /// [`Tensor::argmax`].
        ArgMax argmax,
        /// [`Tensor::argmin`].
        ArgMin argmin,
    }
}

named_ops! {
    /// The extremes along a dim with their indices ([`Tensor::extreme_dim`]).
    Extreme {
        /// [`Tensor::max_dim`] (`torch.max(x, dim)`).
        Max max,
        /// [`Tensor::min_dim`] (`torch.min(x, dim)`).
        Min min,
    }
}

impl Tensor {
    /// The reduction `op` over `dims` (all of them when empty): the one
    /// entry for a reduction by name. `count_nonzero` takes no `keepdim`:
    /// asking for it is an error.
    #[track_caller]
    pub fn reduce(&self, op: Reduce, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        match op {
            Reduce::Sum => self.sum(dims, keepdim),
            Reduce::Mean => self.mean(dims, keepdim),
            Reduce::Prod => self.prod(dims, keepdim),
            Reduce::Max => self.max(dims, keepdim),
            Reduce::Min => self.min(dims, keepdim),
            Reduce::LogSumExp => self.logsumexp(dims, keepdim),
            Reduce::Any => self.any(dims, keepdim),
            Reduce::All => self.all(dims, keepdim),
            Reduce::CountNonzero if keepdim => Err(fusion::Error::Invalid {
                op: "count_nonzero",
                message: format!(
                    "keepdim was asked for over dims {dims:?} of a tensor {}; count_nonzero takes no keepdim (expected keepdim false)",
                    self.ty()
                ),
            }
            .into()),
            Reduce::CountNonzero => self.count_nonzero(dims),
        }
    }

    /// Records the graph's reduction `op` over `dims`.
    #[track_caller]
    fn record_reduce(&self, op: ReduceOp, dims: &[i64], keepdim: bool) -> Result<Tensor> {
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
        self.record_reduce(ReduceOp::Sum, dims, keepdim)
    }

    /// Sum of every element.
    #[track_caller]
    pub fn sum_all(&self) -> Result<Tensor> {
        self.record_reduce(ReduceOp::Sum, &[], false)
    }

    /// Mean over `dims` (floating-point tensors only, as in PyTorch).
    #[track_caller]
    pub fn mean(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        self.record_reduce(ReduceOp::Mean, dims, keepdim)
    }

    #[track_caller]
    pub fn mean_all(&self) -> Result<Tensor> {
        self.record_reduce(ReduceOp::Mean, &[], false)
    }

    #[track_caller]
    pub fn prod(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        self.record_reduce(ReduceOp::Prod, dims, keepdim)
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
        self.record_reduce(ReduceOp::Max, dims, keepdim)
    }

    /// Minimum over `dims` (`torch.amin`).
    #[track_caller]
    pub fn min(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        self.record_reduce(ReduceOp::Min, dims, keepdim)
    }

    /// Variance over `dims` with Bessel's `correction` (1 is PyTorch's
    /// default); of a complex tensor, the mean squared distance from the
    /// mean, real: its parts' variances added.
    #[track_caller]
    pub fn var(&self, dims: &[i64], correction: i64, keepdim: bool) -> Result<Tensor> {
        if self.dtype().is_complex() {
            let re = self.real()?.var(dims, correction, keepdim)?;
            return re.add(&self.imag()?.var(dims, correction, keepdim)?);
        }
        self.record_reduce(ReduceOp::Var { correction }, dims, keepdim)
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
    /// elements that are not zero (in the input's float dtype; a complex
    /// input's norm is of its magnitudes, in its parts' dtype).
    #[track_caller]
    pub fn vector_norm(&self, ord: f64, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        if !self.dtype().is_inexact() {
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
        if matches!(self.dtype(), DType::F16 | DType::BF16) {
            // In float32, rounded once (PyTorch's op math): in 16 bits each
            // power rounds, and a gradient through the norm is off by ulps.
            let wide = self.to_dtype(DType::F32)?;
            return wide.vector_norm(ord, dims, keepdim)?.to_dtype(self.dtype());
        }
        let a = self.abs()?;
        if ord == f64::INFINITY {
            a.max(dims, keepdim)
        } else if ord == f64::NEG_INFINITY {
            a.min(dims, keepdim)
        } else if ord == 0.0 {
            a.ne(0.0)?.to_dtype(a.dtype())?.sum(dims, keepdim)
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
        self.extreme_dim(Extreme::Max, dim, keepdim)
    }

    /// `torch.min(x, dim)`: as [`Tensor::max_dim`], for the smallest.
    #[track_caller]
    pub fn min_dim(&self, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        self.extreme_dim(Extreme::Min, dim, keepdim)
    }

    /// The extremes `op` along `dim` and the index of the first of each:
    /// (values, int64 indices), the one entry for [`Tensor::max_dim`] and
    /// [`Tensor::min_dim`] by name.
    #[track_caller]
    pub fn extreme_dim(&self, op: Extreme, dim: i64, keepdim: bool) -> Result<(Tensor, Tensor)> {
        if self.rank() == 0 {
            normalize_dim(op.name(), dim, 0)?;
            let index = self.device().zeros(&[], DType::I64)?;
            return Ok((self.clone(), index));
        }
        let (values, indices) = match op {
            Extreme::Max => (ReduceOp::Max, ArgReduce::ArgMax),
            Extreme::Min => (ReduceOp::Min, ArgReduce::ArgMin),
        };
        let values = self.record_reduce(values, &[dim], keepdim)?;
        Ok((values, self.arg_reduce(indices, Some(dim), keepdim)?))
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
        self.record_reduce(ReduceOp::LogSumExp, dims, keepdim)
    }

    /// The index of the first extreme `op` along `dim` (of the flattened
    /// tensor when `None`), as int64: the one entry for [`Tensor::argmax`]
    /// and [`Tensor::argmin`] by name.
    #[track_caller]
    pub fn arg_reduce(&self, op: ArgReduce, dim: Option<i64>, keepdim: bool) -> Result<Tensor> {
        let op = match op {
            ArgReduce::ArgMax => ArgReduceOp::ArgMax,
            ArgReduce::ArgMin => ArgReduceOp::ArgMin,
        };
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
        self.arg_reduce(ArgReduce::ArgMax, dim, keepdim)
    }

    /// Index of the first minimum, as [`Tensor::argmax`].
    #[track_caller]
    pub fn argmin(&self, dim: Option<i64>, keepdim: bool) -> Result<Tensor> {
        self.arg_reduce(ArgReduce::ArgMin, dim, keepdim)
    }
}
