//! Layout ops: slice, concatenate, pad, reverse.

use super::{Emitter, V, i64_array};
use crate::scalar::Scalar;
use crate::shape::{Shape, TensorType};

pub(super) fn slice(e: &mut Emitter, x: &V, dim: usize, start: i64, end: i64, step: i64) -> V {
    let rank = x.ty.rank();
    let starts = (0..rank).map(|d| if d == dim { start } else { 0 });
    let limits = (0..rank).map(|d| if d == dim { end } else { x.ty.shape[d] });
    let strides = (0..rank).map(|d| if d == dim { step } else { 1 });
    let mut shape = x.ty.shape.clone();
    shape[dim] = (end - start + step - 1) / step;
    let attrs = format!(
        "start_indices = {}, limit_indices = {}, strides = {}",
        i64_array(starts),
        i64_array(limits),
        i64_array(strides)
    );
    e.op("stablehlo.slice", &[x], &attrs, x.ty.with_shape(shape))
}

pub(super) fn concat(e: &mut Emitter, inputs: &[V], dim: usize, out: TensorType) -> V {
    if inputs.len() == 1 {
        return e.convert(&inputs[0], out.dtype);
    }
    let converted: Vec<V> = inputs.iter().map(|x| e.convert(x, out.dtype)).collect();
    let refs: Vec<&V> = converted.iter().collect();
    let attrs = format!("dimension = {dim} : i64");
    e.op("stablehlo.concatenate", &refs, &attrs, out)
}

pub(super) fn pad(e: &mut Emitter, x: &V, low: &[i64], high: &[i64], value: Scalar) -> V {
    let v = e.scalar(value, x.ty.dtype);
    let shape: Shape = (0..x.ty.rank())
        .map(|d| x.ty.shape[d] + low[d] + high[d])
        .collect();
    let attrs = format!(
        "edge_padding_low = {}, edge_padding_high = {}, interior_padding = {}",
        i64_array(low.iter().copied()),
        i64_array(high.iter().copied()),
        i64_array(low.iter().map(|_| 0))
    );
    e.op("stablehlo.pad", &[x, &v], &attrs, x.ty.with_shape(shape))
}

pub(super) fn flip(e: &mut Emitter, x: &V, dims: &[usize]) -> V {
    if dims.is_empty() || x.ty.rank() == 0 {
        return x.clone();
    }
    let attrs = format!("dimensions = {}", i64_array(dims.iter().map(|&d| d as i64)));
    e.op("stablehlo.reverse", &[x], &attrs, x.ty.clone())
}
