//! Creation ops computed on the device: arange and linspace.
//!
//! Values are computed in f64 and converted, as PyTorch computes them in a wide
//! type before casting to the output dtype.

use super::{Cmp, Emitter, V};
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

/// PyTorch's linspace: the first half counts up from `start`, the second half
/// counts down from `end`, so both ends are exact (one step gives `start`).
/// Integer dtypes truncate the ends first, as PyTorch does.
pub(super) fn linspace(e: &mut Emitter, start: f64, end: f64, steps: i64, out: TensorType) -> V {
    let (start, end) = if out.dtype.is_float() {
        (start, end)
    } else {
        (start.trunc(), end.trunc())
    };
    let shape = [steps];
    let wide = TensorType::new(DType::F64, &shape);
    let step = if steps > 1 {
        (end - start) / (steps - 1) as f64
    } else {
        0.0
    };
    let i = e.iota(wide.clone(), 0);
    let step_v = e.constant(Scalar::Float(step), wide.clone());
    let start_v = e.constant(Scalar::Float(start), wide.clone());
    let up = {
        let s = e.mul(&i, &step_v);
        e.add(&start_v, &s)
    };
    let down = {
        let last = e.constant(Scalar::Float((steps - 1) as f64), wide.clone());
        let back = e.sub(&last, &i);
        let s = e.mul(&back, &step_v);
        let end_v = e.constant(Scalar::Float(end), wide.clone());
        e.sub(&end_v, &s)
    };
    let half = e.constant(Scalar::Float((steps / 2).max(1) as f64), wide);
    let first_half = e.compare(Cmp::Lt, &i, &half);
    let v = e.select(&first_half, &up, &down);
    e.convert(&v, out.dtype)
}
