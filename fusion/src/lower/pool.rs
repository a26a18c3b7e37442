//! Pooling: `stablehlo.reduce_window` over the trailing spatial dims, with
//! windows of 1 over the leading (batch, channel) dims.
//!
//! Output sizes come from inference (PyTorch's rule); the window's high
//! padding is whatever makes `reduce_window` produce exactly that many
//! windows: more than the low padding in ceil mode, less (even negative,
//! which crops) when a stride skips the last rows.
//!
//! - Max: padding takes the init value (the dtype's lowest), so it never wins
//!   over an input element; NaN wins, as PyTorch.
//! - Max indices: a variadic `reduce_window` over (value, flat index) pairs;
//!   its combiner orders pairs totally (by value, NaN above all, then by
//!   index: the first on ties, the last among NaNs, as PyTorch's kernels
//!   scan), so the result does not depend on the order XLA combines in.
//! - Average: a window sum divided by a count that depends only on shapes,
//!   itself a window sum over ones (XLA folds it to a constant).

use super::reduce::{accumulator, extremes};
use super::{Cmp, Emitter, V, i64_array};
use crate::dtype::DType;
use crate::op::PoolSpec;
use crate::scalar::Scalar;
use crate::shape::{Shape, TensorType};

/// `reduce_window` attributes applying `spec` to the trailing dims of a value
/// of `shape`, with low padding `low` per spatial dim, giving `out` windows
/// per spatial dim.
fn window_attrs(shape: &[i64], spec: &PoolSpec, low: &[i64], out: &[i64]) -> String {
    let n = spec.spatial();
    let lead = shape.len() - n;
    let with_lead =
        |fill: i64, v: &[i64]| i64_array(std::iter::repeat_n(fill, lead).chain(v.iter().copied()));
    let mut padding: Vec<String> = vec!["[0, 0]".into(); lead];
    for i in 0..n {
        let span = spec.dilation[i] * (spec.kernel[i] - 1) + 1;
        let high = (out[i] - 1) * spec.stride[i] + span - shape[lead + i] - low[i];
        padding.push(format!("[{}, {high}]", low[i]));
    }
    format!(
        "window_dimensions = {}, window_strides = {}, base_dilations = {}, \
         window_dilations = {}, padding = dense<[{}]> : tensor<{}x2xi64>",
        with_lead(1, &spec.kernel),
        with_lead(1, &spec.stride),
        i64_array(shape.iter().map(|_| 1)),
        with_lead(1, &spec.dilation),
        padding.join(", "),
        shape.len()
    )
}

/// The spatial output sizes of `out` (its trailing dims).
fn spatial<'a>(out: &'a TensorType, spec: &PoolSpec) -> &'a [i64] {
    &out.shape[out.rank() - spec.spatial()..]
}

/// Leading dims of `x` (batch, channels) as broadcast dims of the plane.
fn plane_dims(x: &TensorType, spec: &PoolSpec) -> std::ops::Range<i64> {
    (x.rank() - spec.spatial()) as i64..x.rank() as i64
}

pub(super) fn max_pool(e: &mut Emitter, x: &V, spec: &PoolSpec, out: TensorType) -> V {
    let dtype = x.ty.dtype;
    let init = e.scalar(extremes(dtype).0, dtype);
    let attrs = window_attrs(&x.ty.shape, spec, &spec.padding, spatial(&out, spec));
    let elem = TensorType::scalar(dtype);
    e.region_op(
        "stablehlo.reduce_window",
        &[x, &init],
        &[elem.clone(), elem],
        |e, a| vec![e.maximum(&a[0], &a[1])],
        &attrs,
        &[out],
    )
    .remove(0)
}

/// Flat indices within the spatial plane (`h * W + w`), broadcast to `x`.
fn flat_indices(e: &mut Emitter, x: &TensorType, spec: &PoolSpec) -> V {
    let plane: Shape = x.shape[x.rank() - spec.spatial()..].into();
    let ty = TensorType::new(DType::I64, &plane);
    let mut stride = 1;
    let mut flat: Option<V> = None;
    for d in (0..plane.len()).rev() {
        let iota = e.iota(ty.clone(), d);
        let term = if stride == 1 {
            iota
        } else {
            e.binary_const("stablehlo.multiply", &iota, stride)
        };
        flat = Some(match flat {
            Some(f) => e.add(&f, &term),
            None => term,
        });
        stride *= plane[d];
    }
    let flat = flat.unwrap_or_else(|| e.scalar(0, DType::I64));
    e.broadcast_in_dim(&flat, &x.shape, plane_dims(x, spec))
}

pub(super) fn max_pool_indices(e: &mut Emitter, x: &V, spec: &PoolSpec, out: TensorType) -> V {
    let dtype = x.ty.dtype;
    let idx = flat_indices(e, &x.ty, spec);
    let init_v = e.scalar(extremes(dtype).0, dtype);
    // Padding's index loses every tie with an input element.
    let init_i = e.scalar(Scalar::Int(i64::MAX), DType::I64);
    let attrs = window_attrs(&x.ty.shape, spec, &spec.padding, spatial(&out, spec));
    let (elem_v, elem_i) = (TensorType::scalar(dtype), TensorType::scalar(DType::I64));
    let results = e.region_op(
        "stablehlo.reduce_window",
        &[x, &idx, &init_v, &init_i],
        &[elem_v.clone(), elem_i.clone(), elem_v, elem_i],
        |e, a| {
            let (av, ai, bv, bi) = (&a[0], &a[1], &a[2], &a[3]);
            let greater = e.compare(Cmp::Gt, av, bv);
            let equal = e.compare(Cmp::Eq, av, bv);
            let earlier = e.compare(Cmp::Lt, ai, bi);
            let first_tie = e.binary("stablehlo.and", &equal, &earlier);
            let mut pick_a = e.binary("stablehlo.or", &greater, &first_tie);
            if dtype.is_float() {
                // Comparisons with NaN are false: a NaN beats a number, and of
                // two NaNs the later one wins.
                let a_nan = e.is_nan(av);
                let b_nan = e.is_nan(bv);
                let b_number = e.unary("stablehlo.not", &b_nan);
                let nan_wins = e.binary("stablehlo.and", &a_nan, &b_number);
                let both_nan = e.binary("stablehlo.and", &a_nan, &b_nan);
                let later = e.compare(Cmp::Gt, ai, bi);
                let last_nan = e.binary("stablehlo.and", &both_nan, &later);
                let nan_pick = e.binary("stablehlo.or", &nan_wins, &last_nan);
                pick_a = e.binary("stablehlo.or", &pick_a, &nan_pick);
            }
            vec![e.select(&pick_a, av, bv), e.select(&pick_a, ai, bi)]
        },
        &attrs,
        &[out.with_dtype(dtype), out.clone()],
    );
    results[1].clone()
}

/// Window sums of `x` (zero padding, `low` before each spatial dim) into `out`.
fn window_sum(e: &mut Emitter, x: &V, spec: &PoolSpec, low: &[i64], out: TensorType) -> V {
    let dtype = x.ty.dtype;
    let init = e.scalar(0, dtype);
    let attrs = window_attrs(&x.ty.shape, spec, low, spatial(&out, spec));
    let elem = TensorType::scalar(dtype);
    e.region_op(
        "stablehlo.reduce_window",
        &[x, &init],
        &[elem.clone(), elem],
        |e, a| vec![e.add(&a[0], &a[1])],
        &attrs,
        &[out],
    )
    .remove(0)
}

pub(super) fn avg_pool(
    e: &mut Emitter,
    x: &V,
    spec: &PoolSpec,
    count_include_pad: bool,
    divisor_override: Option<i64>,
    out: TensorType,
) -> V {
    let acc = accumulator(out.dtype);
    let xc = e.convert(x, acc);
    let sum = window_sum(e, &xc, spec, &spec.padding, out.with_dtype(acc));
    let divisor = match divisor_override {
        Some(d) => e.splat(d as f64, &sum),
        None => {
            let n = spec.spatial();
            let plane = &x.ty.shape[x.ty.rank() - n..];
            // Including padding, a window counts the positions it covers of
            // the padded input (not the ceil-mode overhang past it); without,
            // the input elements it covers.
            let (size, low): (Shape, Shape) = if count_include_pad {
                (
                    (0..n).map(|i| plane[i] + 2 * spec.padding[i]).collect(),
                    (0..n).map(|_| 0).collect(),
                )
            } else {
                (plane.into(), spec.padding.clone())
            };
            let ones = e.constant(Scalar::Float(1.0), TensorType::new(acc, &size));
            let counts_ty = TensorType::new(acc, spatial(&out, spec));
            let counts = window_sum(e, &ones, spec, &low, counts_ty);
            e.broadcast_in_dim(&counts, &out.shape, plane_dims(&out, spec))
        }
    };
    let mean = e.div(&sum, &divisor);
    e.convert(&mean, out.dtype)
}
