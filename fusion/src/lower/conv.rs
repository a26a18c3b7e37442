//! Convolutions and their gradients, each one `stablehlo.convolution`.
//!
//! The gradients are convolutions too, set up as JAX's
//! `_conv_general_dilated_transpose_lhs` / `_rhs` set them up:
//! - input: `grad_out` dilated by the stride (`lhs_dilation`) convolved with
//!   the kernel flipped in space and with its feature dims swapped (groups
//!   move from the output-channel dim into the input-channel dim), padded so
//!   the result has the input's size, including the rows a stride skipped;
//! - weight: the input convolved with `grad_out` as the kernel, batch and
//!   feature dims swapped, the forward stride as `rhs_dilation`, the forward
//!   dilation as the window stride, and groups as `batch_group_count`.
//!
//! Padding may come out negative (the input rows a stride never reaches);
//! StableHLO crops those. 16-bit floats compute in f32 and convert back.

use std::fmt::Write;

use super::layout::flip;
use super::reduce::accumulator;
use super::{Emitter, V, i64_array};
use crate::op::ConvSpec;
use crate::shape::{Shape, TensorType};

/// The window of one `stablehlo.convolution`, per spatial dim.
struct Window {
    strides: Vec<i64>,
    padding: Vec<(i64, i64)>,
    lhs_dilation: Vec<i64>,
    rhs_dilation: Vec<i64>,
    feature_groups: i64,
    batch_groups: i64,
}

/// What the first two dims of the input, kernel and output are, in StableHLO's
/// letters (`b`/`f` batch and feature, `o`/`i` kernel output and input
/// features); the spatial dims follow in order.
struct Layout {
    lhs: &'static str,
    rhs: &'static str,
    out: &'static str,
}

/// `[b, f]x[o, i]->[b, f]`: the forward convolution's (and PyTorch's) layout.
const FORWARD: Layout = Layout {
    lhs: "b, f",
    rhs: "o, i",
    out: "b, f",
};

fn convolution(
    e: &mut Emitter,
    lhs: &V,
    rhs: &V,
    layout: &Layout,
    w: &Window,
    out: TensorType,
) -> V {
    let n = w.strides.len();
    let spatial: Vec<String> = (0..n).map(|i| i.to_string()).collect();
    let spatial = spatial.join(", ");
    let mut padding = String::new();
    for (i, (lo, hi)) in w.padding.iter().enumerate() {
        let sep = if i > 0 { ", " } else { "" };
        let _ = write!(padding, "{sep}[{lo}, {hi}]");
    }
    let attrs = format!(
        "batch_group_count = {} : i64, \
         dimension_numbers = #stablehlo.conv<[{}, {spatial}]x[{}, {spatial}]->[{}, {spatial}]>, \
         feature_group_count = {} : i64, lhs_dilation = {}, \
         padding = dense<[{padding}]> : tensor<{n}x2xi64>, rhs_dilation = {}, window_strides = {}",
        w.batch_groups,
        layout.lhs,
        layout.rhs,
        layout.out,
        w.feature_groups,
        i64_array(w.lhs_dilation.iter().copied()),
        i64_array(w.rhs_dilation.iter().copied()),
        i64_array(w.strides.iter().copied()),
    );
    e.op("stablehlo.convolution", &[lhs, rhs], &attrs, out)
}

/// `x` and `w` in the accumulator dtype of `out`, and `out` in it.
fn widen(e: &mut Emitter, a: &V, b: &V, out: &TensorType) -> (V, V, TensorType) {
    let acc = accumulator(out.dtype);
    (e.convert(a, acc), e.convert(b, acc), out.with_dtype(acc))
}

/// `dilation * (kernel - 1) + 1`: how far a dilated kernel reaches.
fn span(kernel: i64, dilation: i64) -> i64 {
    dilation * (kernel - 1) + 1
}

/// `(size - 1) * dilation + 1` (0 for an empty dim): a dim with `dilation - 1`
/// holes between its elements.
fn dilated(size: i64, dilation: i64) -> i64 {
    if size == 0 {
        0
    } else {
        (size - 1) * dilation + 1
    }
}

pub(super) fn conv(e: &mut Emitter, x: &V, w: &V, spec: &ConvSpec, out: TensorType) -> V {
    let dtype = out.dtype;
    let (x, w, wide) = widen(e, x, w, &out);
    let n = spec.spatial();
    let window = Window {
        strides: spec.stride.to_vec(),
        padding: spec.padding.iter().map(|&p| (p, p)).collect(),
        lhs_dilation: vec![1; n],
        rhs_dilation: spec.dilation.to_vec(),
        feature_groups: spec.groups,
        batch_groups: 1,
    };
    let r = convolution(e, &x, &w, &FORWARD, &window, wide);
    e.convert(&r, dtype)
}

/// The gradient with respect to the input (`out` is the input's type).
pub(super) fn backward_input(
    e: &mut Emitter,
    grad: &V,
    w: &V,
    spec: &ConvSpec,
    out: TensorType,
) -> V {
    let dtype = out.dtype;
    let (grad, w, wide) = widen(e, grad, w, &out);
    let n = spec.spatial();
    let g = spec.groups;
    let (o, c_per_group) = (w.ty.shape[0], w.ty.shape[1]);
    let kernel: Shape = w.ty.shape[2..].into();
    // [O, C/g, *k] -> [g, O/g, C/g, *k] -> [O/g, g, C/g, *k] -> [O/g, C, *k]:
    // each group's output channels become the kernel's input features, and
    // input channel `group * C/g + c` its output features.
    let w = if g > 1 {
        let mut split: Shape = [g, o / g, c_per_group].into_iter().collect();
        split.extend_from_slice(&kernel);
        let split = e.reshape(&w, &split);
        let mut perm: Vec<usize> = vec![1, 0, 2];
        perm.extend(3..3 + n);
        let moved = e.transpose(&split, &perm);
        let mut merged: Shape = [o / g, g * c_per_group].into_iter().collect();
        merged.extend_from_slice(&kernel);
        e.reshape(&moved, &merged)
    } else {
        w
    };
    let spatial: Vec<usize> = (2..2 + n).collect();
    let flipped = flip(e, &w, &spatial);
    let padding = (0..n)
        .map(|i| {
            let reach = span(kernel[i], spec.dilation[i]);
            let lo = reach - spec.padding[i] - 1;
            let size = out.shape[2 + i];
            let grad_size = dilated(grad.ty.shape[2 + i], spec.stride[i]);
            (lo, size + reach - 1 - grad_size - lo)
        })
        .collect();
    let window = Window {
        strides: vec![1; n],
        padding,
        lhs_dilation: spec.stride.to_vec(),
        rhs_dilation: spec.dilation.to_vec(),
        feature_groups: g,
        batch_groups: 1,
    };
    let layout = Layout {
        lhs: "b, f",
        rhs: "i, o",
        out: "b, f",
    };
    let r = convolution(e, &grad, &flipped, &layout, &window, wide);
    e.convert(&r, dtype)
}

/// The gradient with respect to the weight (`out` is the weight's type).
pub(super) fn backward_weight(
    e: &mut Emitter,
    grad: &V,
    x: &V,
    spec: &ConvSpec,
    out: TensorType,
) -> V {
    let dtype = out.dtype;
    let (x, grad, wide) = widen(e, x, grad, &out);
    let n = spec.spatial();
    let padding = (0..n)
        .map(|i| {
            let p = spec.padding[i];
            let reach = span(out.shape[2 + i], spec.dilation[i]);
            let grad_size = dilated(grad.ty.shape[2 + i], spec.stride[i]);
            (p, grad_size - x.ty.shape[2 + i] + reach - p - 1)
        })
        .collect();
    let window = Window {
        strides: spec.dilation.to_vec(),
        padding,
        lhs_dilation: vec![1; n],
        rhs_dilation: spec.stride.to_vec(),
        feature_groups: 1,
        batch_groups: spec.groups,
    };
    // The input's channels are the batch, its batch the features summed over;
    // grad_out is the kernel, its batch summed over, its channels the outputs.
    let layout = Layout {
        lhs: "f, b",
        rhs: "i, o",
        out: "f, b",
    };
    let r = convolution(e, &x, &grad, &layout, &window, wide);
    e.convert(&r, dtype)
}
