//! Order statistics along a dim: the median (with or without NaN), the k-th
//! smallest value and the mode (PyTorch's `median`, `nanmedian`, `kthvalue`
//! and `mode`), each with the index its value came from.
//!
//! Each sorts the rows once (stable, NaN last) and gathers one position per
//! row, so a value and its index always agree: the index is where that
//! element of the sorted row came from. PyTorch leaves the index among equal
//! values unspecified; stable sorting picks the first of a run for the
//! median and `Kth`, and the last for the mode, as the CPU tends to.

use fusion::shape::normalize_dim;
use fusion::{DType, named_ops};

use super::Tensor;
use crate::error::Result;

/// Which order statistic of a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OrderStatistic {
    /// The lower median; the row's first NaN where it has one.
    Median,
    /// The lower median of the row's numbers, NaN ignored (NaN for a row of
    /// NaN only).
    NanMedian,
    /// The k-th smallest value, k from 1.
    Kth(i64),
    /// The most frequent value (the smallest on a tie), at the last index
    /// it occurs.
    Mode,
}

named_ops! {
    /// The order statistics by name, without their parameter
    /// ([`OrderStatistic::of`] adds kthvalue's `k`).
    OrderStatisticKind {
        /// [`OrderStatistic::Median`].
        Median median,
        /// [`OrderStatistic::NanMedian`].
        NanMedian nanmedian,
        /// [`OrderStatistic::Kth`].
        Kth kthvalue,
        /// [`OrderStatistic::Mode`].
        Mode mode,
    }
}

impl OrderStatistic {
    /// The statistic of `kind` (`k` used by `Kth` only).
    pub fn of(kind: OrderStatisticKind, k: i64) -> OrderStatistic {
        match kind {
            OrderStatisticKind::Median => OrderStatistic::Median,
            OrderStatisticKind::NanMedian => OrderStatistic::NanMedian,
            OrderStatisticKind::Kth => OrderStatistic::Kth(k),
            OrderStatisticKind::Mode => OrderStatistic::Mode,
        }
    }

    /// Which statistic, without its parameter.
    pub fn kind(self) -> OrderStatisticKind {
        match self {
            OrderStatistic::Median => OrderStatisticKind::Median,
            OrderStatistic::NanMedian => OrderStatisticKind::NanMedian,
            OrderStatistic::Kth(_) => OrderStatisticKind::Kth,
            OrderStatistic::Mode => OrderStatisticKind::Mode,
        }
    }

    /// The statistic as PyTorch names it.
    pub fn name(self) -> &'static str {
        self.kind().name()
    }
}

/// The rows an order statistic reduces: `x` (a 0-d input as one element),
/// the dim `d` of length `n`, the shape of a row's result in `x` (dim `d` of
/// size 1), and the result's shape.
struct Rows {
    x: Tensor,
    d: usize,
    n: i64,
    row: Vec<i64>,
    result: Vec<i64>,
}

impl Rows {
    fn of(op: &'static str, input: &Tensor, dim: i64, keepdim: bool) -> Result<Rows> {
        let invalid = |message: String| -> crate::error::Error {
            fusion::Error::Invalid { op, message }.into()
        };
        let rank = input.rank().max(1);
        let d = normalize_dim(op, dim, rank).map_err(|_| {
            invalid(format!(
                "dim {dim} is out of range for an input {} (expected a dim in [{}, {}])",
                input.ty(),
                -(rank as i64),
                rank as i64 - 1
            ))
        })?;
        let x = if input.rank() == 0 {
            input.reshape(&[1])?
        } else {
            input.clone()
        };
        let n = x.shape()[d];
        if n == 0 {
            return Err(invalid(format!(
                "cannot reduce dim {d} of size 0 (input of shape {:?})",
                input.shape()
            )));
        }
        let mut result = input.shape().to_vec();
        if input.rank() > 0 {
            if keepdim {
                result[d] = 1;
            } else {
                result.remove(d);
            }
        }
        let mut row = x.shape().to_vec();
        row[d] = 1;
        Ok(Rows {
            x,
            d,
            n,
            row,
            result,
        })
    }

    /// The position within each sorted row that `stat` selects (not `Mode`):
    /// k - 1; the lower median, or the first NaN when the row has one (NaN
    /// sorts last); or the lower median of the numbers, ignoring NaN.
    fn position(&self, stat: OrderStatistic) -> Result<Tensor> {
        let device = self.x.device();
        let middle = device.full(&self.row, (self.n - 1) / 2, DType::I64)?;
        let d = self.d as i64;
        match stat {
            OrderStatistic::Kth(k) => device.full(&self.row, k - 1, DType::I64),
            _ if !self.x.dtype().is_float() => Ok(middle),
            OrderStatistic::Median => {
                let nans = self.nans()?;
                let first_nan = nans.binary_op_reversed(fusion::BinaryOp::Sub, self.n)?;
                Tensor::where_(&nans.gt(0i64)?, &first_nan, &middle)
            }
            _ => {
                // floor((numbers - 1) / 2) in integers: how many of 0, 2, 4,
                // ... are at most numbers - 1, less one; 0 for a row of NaN.
                let last = self
                    .nans()?
                    .binary_op_reversed(fusion::BinaryOp::Sub, self.n - 1)?;
                let mut along = vec![1; self.row.len()];
                along[self.d] = self.n;
                let evens = device.arange(0i64, 2 * self.n, 2i64)?.reshape(&along)?;
                let halves = evens.le(&last)?.to_dtype(DType::I64)?.sum(&[d], true)?;
                halves.sub(1i64)?.clamp_min(0i64)
            }
        }
    }

    /// How many NaN each row holds (int64, shaped as `row`).
    fn nans(&self) -> Result<Tensor> {
        self.x
            .isnan()?
            .to_dtype(DType::I64)?
            .sum(&[self.d as i64], true)
    }
}

impl Tensor {
    /// The order statistic `stat` of each row along `dim`: `(values, int64
    /// indices)`, `dim` removed unless `keepdim`. An error for a `dim` of
    /// size 0 or a `Kth(k)` outside `[1, size]`.
    #[track_caller]
    pub fn order_statistic(
        &self,
        stat: OrderStatistic,
        dim: i64,
        keepdim: bool,
    ) -> Result<(Tensor, Tensor)> {
        let op = stat.name();
        let rows = Rows::of(op, self, dim, keepdim)?;
        if let OrderStatistic::Kth(k) = stat
            && !(1..=rows.n).contains(&k)
        {
            return Err(fusion::Error::Invalid {
                op,
                message: format!(
                    "selected number k = {k} out of range for dimension {} of size {} (input of shape {:?})",
                    rows.d,
                    rows.n,
                    self.shape()
                ),
            }
            .into());
        }
        let d = rows.d as i64;
        let (values, indices) = rows.x.sort(d, false)?;
        let (value_at, index_at) = if stat == OrderStatistic::Mode {
            rows.mode_positions(&values)?
        } else {
            let p = rows.position(stat)?;
            (p.clone(), p)
        };
        Ok((
            values.gather(d, &value_at)?.reshape(&rows.result)?,
            indices.gather(d, &index_at)?.reshape(&rows.result)?,
        ))
    }

    /// The median of all elements (`torch.median()`; `ignore_nan`:
    /// `torch.nanmedian()`); NaN for an empty floating-point tensor, an error
    /// for an empty integer one.
    #[track_caller]
    pub fn median_all(&self, ignore_nan: bool) -> Result<Tensor> {
        let stat = if ignore_nan {
            OrderStatistic::NanMedian
        } else {
            OrderStatistic::Median
        };
        if self.numel() == 0 {
            if !self.dtype().is_float() {
                return Err(fusion::Error::Invalid {
                    op: stat.name(),
                    message: format!("cannot take the median of an empty {}", self.ty()),
                }
                .into());
            }
            return self.device().full(&[], f64::NAN, self.dtype());
        }
        let (values, _) = self.reshape(&[-1])?.order_statistic(stat, 0, false)?;
        Ok(values)
    }
}

impl Rows {
    /// Where each sorted row's mode is: the first position of a longest run
    /// of equal values (for the value) and the last (for the index). Runs
    /// are numbered (a cumsum of run starts), counted (a scatter add) and the
    /// first position of a longest taken (argmax).
    fn mode_positions(&self, sorted: &Tensor) -> Result<(Tensor, Tensor)> {
        let (d, n) = (self.d as i64, self.n);
        let device = self.x.device();
        let shape = self.x.shape();
        let mut starts = device.ones(&self.row, DType::I64)?;
        if n > 1 {
            let changed = sorted
                .slice(d, 1, n, 1)?
                .ne(&sorted.slice(d, 0, n - 1, 1)?)?
                .to_dtype(DType::I64)?;
            starts = Tensor::cat(&[&starts, &changed], d)?;
        }
        let run = starts.cumsum(d)?.sub(1i64)?;
        let counts = device.zeros(shape, DType::I64)?.scatter_add(
            d,
            &run,
            &device.ones(shape, DType::I64)?,
        )?;
        let frequency = counts.gather(d, &run)?;
        let first = frequency.argmax(Some(d), true)?;
        let last = (&first + &frequency.gather(d, &first)?.sub(1i64)?)?;
        Ok((first, last))
    }
}

impl Tensor {
    /// For each of `values`, the index at which it would be inserted into
    /// `self`'s sorted last dim to keep it sorted (`torch.searchsorted`):
    /// before equal elements, or after them with `right`. `self` is 1-d, or
    /// has `values`' leading dims; the result has `values`' shape, int64.
    /// PyTorch's own binary search, all rows at once: one gather a step,
    /// `log2(row length) + 1` steps, comparing as it does (`!(x >= v)`, or
    /// `!(x > v)` with `right`), so NaNs land where they land on the CPU.
    #[track_caller]
    pub fn searchsorted(&self, values: &Tensor, right: bool) -> Result<Tensor> {
        let op = "searchsorted";
        let invalid = |message: String| -> crate::error::Error {
            fusion::Error::Invalid { op, message }.into()
        };
        if self.rank() == 0 {
            return Err(invalid(format!(
                "the sorted sequence is {}: expected at least 1 dim",
                self.ty()
            )));
        }
        let leading = &self.shape()[..self.rank() - 1];
        if self.rank() > 1
            && (values.rank() != self.rank() || &values.shape()[..values.rank() - 1] != leading)
        {
            return Err(invalid(format!(
                "boundaries {} and input {} must have the same dims except the last (or boundaries must be 1-d)",
                self.ty(),
                values.ty()
            )));
        }
        let n = self.shape()[self.rank() - 1];
        let dtype = super::Operand::Tensor(values).promoted_with(self);
        let row = self.to_dtype(dtype)?;
        // A 1-d sequence serves values of any shape: searched as one row.
        let v = if self.rank() == 1 {
            values.reshape(&[values.numel()])?
        } else {
            values.clone()
        };
        let v = v.to_dtype(dtype)?;
        let device = self.device();
        let mut start = device.zeros(v.shape(), DType::I64)?;
        let mut end = device.full(v.shape(), n, DType::I64)?;
        if n > 0 {
            for _ in 0..(64 - (n as u64).leading_zeros()) {
                let active = start.lt(&end)?;
                let mid = start.add(&end.sub(&start)?.floor_divide(2)?)?;
                let at = row.gather(-1, &mid.minimum(n - 1)?)?;
                let after = if right { at.gt(&v)? } else { at.ge(&v)? };
                let go_right = after.logical_not()?.logical_and(&active)?;
                let go_left = after.logical_and(&active)?;
                start = Tensor::where_(&go_right, &mid.add(1)?, &start)?;
                end = Tensor::where_(&go_left, &mid, &end)?;
            }
        }
        start.reshape(values.shape())
    }
}
