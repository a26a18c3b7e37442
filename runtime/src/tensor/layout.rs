//! Layout ops: reshape, permute, expand, slice, cat, pad, flip, squeeze.

use fusion::shape::{normalize_dim, normalize_dims};
use fusion::{Dims, Op, Scalar, Shape};

use super::Tensor;
use crate::error::Result;

fn invalid(op: &'static str, message: String) -> crate::Error {
    fusion::Error::Invalid { op, message }.into()
}

impl Tensor {
    /// The same elements with a new shape; one size may be -1 (inferred).
    #[track_caller]
    pub fn reshape(&self, shape: &[i64]) -> Result<Tensor> {
        let shape = infer_size("reshape", shape, self.numel(), self.shape())?;
        if shape.as_slice() == self.shape() {
            return Ok(self.clone());
        }
        self.op(Op::Reshape(shape), &[])
    }

    /// Alias of [`Tensor::reshape`] (tensors here have no strides to share).
    #[track_caller]
    pub fn view(&self, shape: &[i64]) -> Result<Tensor> {
        self.reshape(shape)
    }

    /// Dims `start..=end` merged into one.
    #[track_caller]
    pub fn flatten(&self, start: i64, end: i64) -> Result<Tensor> {
        if self.rank() == 0 {
            return self.reshape(&[1]);
        }
        let s = normalize_dim("flatten", start, self.rank())?;
        let e = normalize_dim("flatten", end, self.rank())?;
        if s > e {
            return Err(invalid(
                "flatten",
                format!("start dim {start} comes after end dim {end}"),
            ));
        }
        let mut shape: Vec<i64> = self.shape()[..s].to_vec();
        shape.push(self.shape()[s..=e].iter().product());
        shape.extend_from_slice(&self.shape()[e + 1..]);
        self.reshape(&shape)
    }

    /// Dims reordered: output dim i is input dim `dims[i]`.
    #[track_caller]
    pub fn permute(&self, dims: &[i64]) -> Result<Tensor> {
        let perm = normalize_dims("permute", dims, self.rank())?;
        self.op(Op::Permute(perm), &[])
    }

    /// Dims `d0` and `d1` swapped.
    #[track_caller]
    pub fn transpose(&self, d0: i64, d1: i64) -> Result<Tensor> {
        let rank = self.rank();
        let a = normalize_dim("transpose", d0, rank)?;
        let b = normalize_dim("transpose", d1, rank)?;
        if a == b || rank < 2 {
            return Ok(self.clone());
        }
        let mut perm: Dims = (0..rank).collect();
        perm.swap(a, b);
        self.op(Op::Permute(perm), &[])
    }

    /// The transpose of a matrix (a tensor of at most 2 dims).
    #[track_caller]
    pub fn t(&self) -> Result<Tensor> {
        if self.rank() > 2 {
            return Err(invalid(
                "t",
                format!("got a tensor {}, expected at most 2 dims", self.ty()),
            ));
        }
        self.transpose(0, -1)
    }

    /// Broadcast to `shape` (`-1` keeps a dim), as `Tensor.expand`.
    #[track_caller]
    pub fn expand(&self, shape: &[i64]) -> Result<Tensor> {
        let lead = shape.len().saturating_sub(self.rank());
        let mut target = Shape::new();
        for (i, &s) in shape.iter().enumerate() {
            if s == -1 {
                if i < lead {
                    return Err(invalid(
                        "expand",
                        format!("-1 in a new leading dim of {shape:?}"),
                    ));
                }
                target.push(self.shape()[i - lead]);
            } else {
                target.push(s);
            }
        }
        if target.as_slice() == self.shape() {
            return Ok(self.clone());
        }
        self.op(Op::BroadcastTo(target), &[])
    }

    /// Broadcast to `shape`, as `torch.broadcast_to`.
    #[track_caller]
    pub fn broadcast_to(&self, shape: &[i64]) -> Result<Tensor> {
        self.expand(shape)
    }

    /// `x[start:end:step]` along `dim`, with Python's rules: negative bounds
    /// count from the end and out-of-range bounds are clamped. Use `i64::MAX`
    /// for "to the end".
    #[track_caller]
    pub fn slice(&self, dim: i64, start: i64, end: i64, step: i64) -> Result<Tensor> {
        let d = normalize_dim("slice", dim, self.rank())?;
        if self.rank() == 0 {
            return Err(invalid(
                "slice",
                "got a 0-d tensor, expected at least one dim".into(),
            ));
        }
        let size = self.shape()[d];
        let clamp = |i: i64| {
            if i < 0 {
                (i + size).max(0)
            } else {
                i.min(size)
            }
        };
        let (s, e) = (clamp(start), clamp(end));
        let e = e.max(s);
        if s == 0 && e == size && step == 1 {
            return Ok(self.clone());
        }
        self.op(
            Op::Slice {
                dim: d,
                start: s,
                end: e,
                step,
            },
            &[],
        )
    }

    /// `length` entries of `dim` from `start` (which may be negative); out of
    /// range is an error, as `Tensor.narrow`.
    #[track_caller]
    pub fn narrow(&self, dim: i64, start: i64, length: i64) -> Result<Tensor> {
        let d = normalize_dim("narrow", dim, self.rank())?;
        let size = self.shape().get(d).copied().unwrap_or(0);
        let s = if start < 0 { start + size } else { start };
        if s < 0 || s > size {
            return Err(fusion::Error::IndexOutOfRange {
                op: "narrow",
                index: start,
                dim: d,
                size,
            }
            .into());
        }
        if length < 0 || s + length > size {
            return Err(invalid(
                "narrow",
                format!("start {start} + length {length} exceeds dim {d} of size {size}"),
            ));
        }
        self.op(
            Op::Slice {
                dim: d,
                start: s,
                end: s + length,
                step: 1,
            },
            &[],
        )
    }

    /// The slice at `index` of `dim`, with that dim removed (`x[:, i]`).
    #[track_caller]
    pub fn select(&self, dim: i64, index: i64) -> Result<Tensor> {
        let d = normalize_dim("select", dim, self.rank())?;
        if self.rank() == 0 {
            return Err(invalid(
                "select",
                "got a 0-d tensor, expected at least one dim".into(),
            ));
        }
        let size = self.shape()[d];
        let i = if index < 0 { index + size } else { index };
        if i < 0 || i >= size {
            return Err(fusion::Error::IndexOutOfRange {
                op: "select",
                index,
                dim: d,
                size,
            }
            .into());
        }
        let mut shape: Vec<i64> = self.shape().to_vec();
        shape.remove(d);
        let sliced = self.narrow(d as i64, i, 1)?;
        sliced.reshape(&shape)
    }

    /// Tensors joined along `dim` (dtypes promote, as `torch.cat`).
    #[track_caller]
    pub fn cat(tensors: &[&Tensor], dim: i64) -> Result<Tensor> {
        let Some(first) = tensors.first() else {
            return Err(invalid(
                "cat",
                "got no tensors, expected at least one".into(),
            ));
        };
        let d = normalize_dim("cat", dim, first.rank())?;
        first.op(Op::Concat { dim: d }, &tensors[1..])
    }

    /// Tensors stacked along a new dim `dim`.
    #[track_caller]
    pub fn stack(tensors: &[&Tensor], dim: i64) -> Result<Tensor> {
        if tensors.is_empty() {
            return Err(invalid(
                "stack",
                "got no tensors, expected at least one".into(),
            ));
        }
        let unsqueezed: Vec<Tensor> = tensors
            .iter()
            .map(|t| t.unsqueeze(dim))
            .collect::<Result<_>>()?;
        let refs: Vec<&Tensor> = unsqueezed.iter().collect();
        Tensor::cat(&refs, dim)
    }

    /// `torch.nn.functional.pad`: `pad` holds (before, after) pairs starting
    /// from the last dim; negative amounts crop.
    #[track_caller]
    pub fn pad(&self, pad: &[i64], value: impl Into<Scalar>) -> Result<Tensor> {
        let rank = self.rank();
        if !pad.len().is_multiple_of(2) || pad.len() / 2 > rank {
            return Err(invalid(
                "pad",
                format!(
                    "got {} padding values for a tensor {}, expected pairs for at most {rank} dims",
                    pad.len(),
                    self.ty()
                ),
            ));
        }
        let mut low: Shape = std::iter::repeat_n(0, rank).collect();
        let mut high = low.clone();
        for (k, pair) in pad.chunks(2).enumerate() {
            let d = rank - 1 - k;
            low[d] = pair[0];
            high[d] = pair[1];
        }
        self.op(
            Op::Pad {
                low,
                high,
                value: value.into(),
            },
            &[],
        )
    }

    /// The elements on and above diagonal `k` of the last two dims, zeros
    /// elsewhere (`torch.triu`; `k` > 0 is above the main diagonal).
    #[track_caller]
    pub fn triu(&self, k: i64) -> Result<Tensor> {
        self.triangle("triu", k, true)
    }

    /// The elements on and below diagonal `k` of the last two dims, zeros
    /// elsewhere (`torch.tril`).
    #[track_caller]
    pub fn tril(&self, k: i64) -> Result<Tensor> {
        self.triangle("tril", k, false)
    }

    #[track_caller]
    fn triangle(&self, op: &'static str, k: i64, upper: bool) -> Result<Tensor> {
        let &[.., rows, cols] = self.shape() else {
            return Err(invalid(
                op,
                format!("expected at least 2 dims, got {}", self.ty()),
            ));
        };
        let device = self.device();
        let row = device.arange(0, rows, 1)?.reshape(&[rows, 1])?;
        let offset = device.arange(0, cols, 1)?.sub(&row)?;
        let keep = if upper { offset.ge(k)? } else { offset.le(k)? };
        Tensor::where_(&keep, self, &self.device().zeros(&[], self.dtype())?)
    }

    /// Reversed along `dims`.
    #[track_caller]
    pub fn flip(&self, dims: &[i64]) -> Result<Tensor> {
        let dims = normalize_dims("flip", dims, self.rank())?;
        self.op(Op::Flip(dims), &[])
    }

    /// Shifted by `shifts[i]` along `dims[i]`, elements leaving one end
    /// entering at the other (`torch.roll`); without dims, the flattened
    /// tensor is shifted by the one shift and reshaped back.
    #[track_caller]
    pub fn roll(&self, shifts: &[i64], dims: &[i64]) -> Result<Tensor> {
        let bad = |message: String| -> crate::error::Error {
            fusion::Error::Invalid {
                op: "roll",
                message,
            }
            .into()
        };
        if dims.is_empty() {
            if shifts.len() != 1 {
                return Err(bad(format!(
                    "without dims, expected one shift, got {shifts:?}"
                )));
            }
            let flat = self.reshape(&[self.numel()])?;
            return flat.roll(shifts, &[0])?.reshape(self.shape());
        }
        if shifts.len() != dims.len() {
            return Err(bad(format!(
                "shifts {shifts:?} and dims {dims:?} must have the same length"
            )));
        }
        let mut x = self.clone();
        for (&shift, &dim) in shifts.iter().zip(dims) {
            let d = normalize_dim("roll", dim, self.rank())?;
            let n = self.shape()[d];
            let k = if n == 0 { 0 } else { shift.rem_euclid(n) };
            if k == 0 {
                continue;
            }
            let tail = x.slice(d as i64, n - k, n, 1)?;
            let head = x.slice(d as i64, 0, n - k, 1)?;
            x = Tensor::cat(&[&tail, &head], d as i64)?;
        }
        Ok(x)
    }

    /// Size-1 dims removed: all of them, or only `dim`.
    #[track_caller]
    pub fn squeeze(&self, dim: Option<i64>) -> Result<Tensor> {
        let shape: Vec<i64> = match dim {
            None => self.shape().iter().copied().filter(|&s| s != 1).collect(),
            Some(d) => {
                let d = normalize_dim("squeeze", d, self.rank())?;
                let mut s = self.shape().to_vec();
                if s.get(d) == Some(&1) {
                    s.remove(d);
                }
                s
            }
        };
        self.reshape(&shape)
    }

    /// A size-1 dim inserted at `dim` (which may be `rank`, or negative).
    #[track_caller]
    pub fn unsqueeze(&self, dim: i64) -> Result<Tensor> {
        let d = normalize_dim("unsqueeze", dim, self.rank() + 1)?;
        let mut s = self.shape().to_vec();
        s.insert(d, 1);
        self.reshape(&s)
    }
}

/// Resolves one `-1` in `shape` for `numel` elements.
fn infer_size(op: &'static str, shape: &[i64], numel: i64, from: &[i64]) -> Result<Shape> {
    let unknown: Vec<usize> = (0..shape.len()).filter(|&i| shape[i] == -1).collect();
    if unknown.len() > 1 {
        return Err(invalid(op, format!("shape {shape:?} has more than one -1")));
    }
    let mut out: Shape = shape.into();
    if let Some(&u) = unknown.first() {
        let known: i64 = shape.iter().filter(|&&s| s != -1).product();
        if known == 0 || numel % known != 0 {
            return Err(fusion::Error::Reshape {
                op,
                from: from.to_vec(),
                to: shape.to_vec(),
            }
            .into());
        }
        out[u] = numel / known;
    }
    Ok(out)
}

impl Tensor {
    /// The strided view `sizes`/`strides` at element `offset` of this flat
    /// (1-d) storage: `out[i] = self[offset + sum(i_k * strides[k])]`.
    #[track_caller]
    pub fn as_strided(&self, sizes: &[i64], strides: &[i64], offset: i64) -> Result<Tensor> {
        self.op(
            Op::AsStrided {
                sizes: sizes.into(),
                strides: strides.into(),
                offset,
            },
            &[],
        )
    }

    /// A copy of this flat (1-d) storage with the strided view
    /// `sizes`/`strides` at `offset` replaced by `value`.
    #[track_caller]
    pub fn as_strided_scatter(
        &self,
        value: &Tensor,
        sizes: &[i64],
        strides: &[i64],
        offset: i64,
    ) -> Result<Tensor> {
        self.op(
            Op::AsStridedScatter {
                sizes: sizes.into(),
                strides: strides.into(),
                offset,
            },
            &[value],
        )
    }
}
