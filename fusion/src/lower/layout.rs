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

/// `x`'s bits read as `out` (`Op::Bitcast`). `bitcast_convert` takes no
/// complex type, so a complex value is first its parts, real then
/// imaginary, along a new last dim (their layout in memory), and a complex
/// result is built from the parts its bits give.
pub(super) fn bitcast(e: &mut Emitter, x: &V, out: TensorType) -> V {
    let (from, to) = (x.ty.dtype, out.dtype);
    if from.is_complex() {
        let mut shape = x.ty.shape.clone();
        shape.push(1);
        let (re, im) = (e.real_part(x), e.imag_part(x));
        let (re, im) = (e.reshape(&re, &shape), e.reshape(&im, &shape));
        *shape.last_mut().unwrap() = 2;
        let parts = concat(
            e,
            &[re, im],
            shape.len() - 1,
            x.ty.with_dtype(from.real_part()).with_shape(shape),
        );
        return bitcast_parts(e, &parts, out);
    }
    if to.is_complex() {
        // The bits as parts: out's shape with a last dim of 2.
        let mut shape = out.shape.clone();
        shape.push(2);
        let parts = bitcast_parts(e, x, TensorType::new(to.real_part(), &shape));
        let last = shape.len() - 1;
        let (re, im) = (
            slice(e, &parts, last, 0, 1, 1),
            slice(e, &parts, last, 1, 2, 1),
        );
        let (re, im) = (e.reshape(&re, &out.shape), e.reshape(&im, &out.shape));
        return e.complex(&re, &im);
    }
    e.op("stablehlo.bitcast_convert", &[x], "", out)
}

/// Bitcasts a real `x` to `out` whose element count may need the dims
/// `bitcast_convert` adds or drops merged first (parts of 4 bytes read as
/// bytes: [.., 2] -> [.., 2, 4] -> [.., 8]).
fn bitcast_parts(e: &mut Emitter, x: &V, out: TensorType) -> V {
    let (from, to) = (
        x.ty.dtype.size_in_bytes() as i64,
        out.dtype.size_in_bytes() as i64,
    );
    let mut shape = x.ty.shape.clone();
    if from > to {
        shape.push(from / to);
    } else if from < to {
        // Merge trailing elements into groups of to / from.
        let n: i64 = shape.iter().product::<i64>() / (to / from);
        let flat = e.reshape(x, &[n, to / from]);
        let cast = e.op(
            "stablehlo.bitcast_convert",
            &[&flat],
            "",
            TensorType::new(out.dtype, &[n]),
        );
        return e.reshape(&cast, &out.shape);
    }
    let cast = e.op(
        "stablehlo.bitcast_convert",
        &[x],
        "",
        TensorType::new(out.dtype, &shape),
    );
    e.reshape(&cast, &out.shape)
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
