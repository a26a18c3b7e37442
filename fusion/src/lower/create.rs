//! Creation ops computed on the device: arange.
//!
//! Values are computed in f64 and converted, as PyTorch computes them in a wide
//! type before casting to the output dtype.

use super::{Emitter, V};
use crate::dtype::DType;
use crate::scalar::Scalar;
use crate::shape::TensorType;

/// `start + i * step`. As `torch.arange`, integer dtypes step in int64 from
/// the truncated start by the truncated step (the constants truncate).
pub(super) fn arange(e: &mut Emitter, start: Scalar, step: Scalar, len: i64, out: TensorType) -> V {
    let wide = if out.dtype.is_float() {
        DType::F64
    } else {
        DType::I64
    };
    let i = e.iota(TensorType::new(wide, &[len]), 0);
    let step = e.constant(step, i.ty.clone());
    let start = e.constant(start, i.ty.clone());
    let scaled = e.mul(&i, &step);
    let v = e.add(&scaled, &start);
    e.convert(&v, out.dtype)
}
