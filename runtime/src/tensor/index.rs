//! Indexing with tensors: index_select, gather, scatter, dynamic slices.
//! In debug mode an out-of-range index is an error at the op (as on CPU);
//! compiled code clamps it, as XLA does.

use fusion::Op;
use fusion::shape::normalize_dim;

use super::Tensor;
use crate::error::Result;

impl Tensor {
    /// The entries of `dim` listed in the 1-d integer tensor `index`.
    #[track_caller]
    pub fn index_select(&self, dim: i64, index: &Tensor) -> Result<Tensor> {
        let d = normalize_dim("index_select", dim, self.rank())?;
        self.op(Op::IndexSelect { dim: d }, &[index])
    }

    /// `torch.gather`: along `dim`, `out[..i..] = self[..index[..i..]..]`.
    #[track_caller]
    pub fn gather(&self, dim: i64, index: &Tensor) -> Result<Tensor> {
        let d = normalize_dim("gather", dim, self.rank())?;
        self.op(Op::Gather { dim: d }, &[index])
    }

    /// `torch.scatter`: a copy of `self` with `src` written at `index` along `dim`.
    #[track_caller]
    pub fn scatter(&self, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        let d = normalize_dim("scatter", dim, self.rank())?;
        self.op(Op::Scatter { dim: d, add: false }, &[index, src])
    }

    /// `torch.scatter_add`: a copy of `self` with `src` added at `index` along `dim`.
    #[track_caller]
    pub fn scatter_add(&self, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        let d = normalize_dim("scatter_add", dim, self.rank())?;
        self.op(Op::Scatter { dim: d, add: true }, &[index, src])
    }

    /// A `sizes` block starting at the 0-d integer tensors `starts` (one per
    /// dim); starts are clamped so the block fits, as `lax.dynamic_slice`.
    #[track_caller]
    pub fn dynamic_slice(&self, starts: &[&Tensor], sizes: &[i64]) -> Result<Tensor> {
        self.op(
            Op::DynamicSlice {
                sizes: sizes.into(),
            },
            starts,
        )
    }

    /// A copy of `self` with `update` written at `starts` (clamped to fit).
    #[track_caller]
    pub fn dynamic_update_slice(&self, update: &Tensor, starts: &[&Tensor]) -> Result<Tensor> {
        let mut inputs = vec![update];
        inputs.extend_from_slice(starts);
        self.op(Op::DynamicUpdateSlice, &inputs)
    }
}
