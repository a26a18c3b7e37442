//! Indexing ops, lowered to `stablehlo.gather` / `scatter` / `dynamic_slice`.
//!
//! PyTorch's `gather`/`scatter` index one dim per element; they lower to a
//! full-coordinate gather/scatter whose index vector is `iota` in every dim but
//! `dim`, where it is the user's index.

use super::{Cmp, Emitter, V, dim_list, i64_array};
use crate::dtype::DType;
use crate::op::ScatterReduce;
use crate::scalar::Scalar;
use crate::shape::{Shape, TensorType};

pub(super) fn index_select(e: &mut Emitter, x: &V, index: &V, dim: usize, out: TensorType) -> V {
    let rank = x.ty.rank();
    if rank == 0 {
        return x.clone();
    }
    let n = index.ty.numel();
    let idx = e.convert(index, DType::I64);
    let idx = e.reshape(&idx, &[n, 1]);
    let mut slice_sizes = x.ty.shape.clone();
    slice_sizes[dim] = 1;
    let offset_dims = (0..rank).filter(|&d| d != dim);
    let attrs = format!(
        "dimension_numbers = #stablehlo.gather<offset_dims = {}, collapsed_slice_dims = [{dim}], start_index_map = [{dim}], index_vector_dim = 1>, slice_sizes = {}, indices_are_sorted = false",
        dim_list(offset_dims),
        i64_array(slice_sizes.iter().copied())
    );
    e.op("stablehlo.gather", &[x, &idx], &attrs, out)
}

/// Indices `[..index.shape, rank]` addressing `x` at `index` in `dim` and at the
/// element's own position elsewhere.
fn coordinates(e: &mut Emitter, index: &V, rank: usize, dim: usize) -> V {
    let shape = index.ty.shape.clone();
    let mut with_one: Shape = shape.clone();
    with_one.push(1);
    let idx = e.convert(index, DType::I64);
    let parts: Vec<V> = (0..rank)
        .map(|d| {
            let v = if d == dim {
                idx.clone()
            } else {
                e.iota(TensorType::new(DType::I64, &shape), d)
            };
            e.reshape(&v, &with_one)
        })
        .collect();
    if parts.len() == 1 {
        return parts[0].clone();
    }
    let refs: Vec<&V> = parts.iter().collect();
    let mut full = shape.clone();
    full.push(rank as i64);
    let attrs = format!("dimension = {} : i64", shape.len());
    e.op(
        "stablehlo.concatenate",
        &refs,
        &attrs,
        TensorType::new(DType::I64, &full),
    )
}

pub(super) fn gather(e: &mut Emitter, x: &V, index: &V, dim: usize) -> V {
    if x.ty.rank() == 0 {
        // A 0-d tensor is one element along dim 0 (PyTorch's view of it):
        // gathered as a [1] tensor, which StableHLO can index.
        if index.ty.numel() == 0 {
            return e.constant(Scalar::Int(0), x.ty.with_shape(index.ty.shape.clone()));
        }
        let one = |e: &mut Emitter, v: &V| e.reshape(v, &[1]);
        let (x1, i1) = (one(e, x), one(e, index));
        let out = gather(e, &x1, &i1, 0);
        return e.reshape(&out, &index.ty.shape);
    }
    let rank = x.ty.rank();
    let coords = coordinates(e, index, rank, dim);
    let all = dim_list(0..rank);
    let attrs = format!(
        "dimension_numbers = #stablehlo.gather<collapsed_slice_dims = {all}, start_index_map = {all}, index_vector_dim = {rank}>, slice_sizes = {}, indices_are_sorted = false",
        i64_array((0..rank).map(|_| 1))
    );
    e.op(
        "stablehlo.gather",
        &[x, &coords],
        &attrs,
        x.ty.with_shape(index.ty.shape.clone()),
    )
}

pub(super) fn scatter(e: &mut Emitter, inputs: &[V], dim: usize, reduce: ScatterReduce) -> V {
    let (x, index, src) = (&inputs[0], &inputs[1], &inputs[2]);
    if x.ty.rank() == 0 {
        // As gather: a 0-d tensor scatters as a [1] tensor (the backward of
        // max(dim), cummax, median on a 0-d input lands here).
        if index.ty.numel() == 0 {
            return x.clone();
        }
        let ones: Vec<V> = [x, index, src].iter().map(|v| e.reshape(v, &[1])).collect();
        let out = scatter(e, &ones, 0, reduce);
        return e.reshape(&out, &[]);
    }
    let rank = x.ty.rank();
    let coords = coordinates(e, index, rank, dim);
    // PyTorch reads src only where index has elements.
    let updates = if src.ty.shape == index.ty.shape {
        src.clone()
    } else {
        let attrs = format!(
            "start_indices = {}, limit_indices = {}, strides = {}",
            i64_array((0..rank).map(|_| 0)),
            i64_array(index.ty.shape.iter().copied()),
            i64_array((0..rank).map(|_| 1))
        );
        e.op(
            "stablehlo.slice",
            &[src],
            &attrs,
            src.ty.with_shape(index.ty.shape.clone()),
        )
    };
    let all = dim_list(0..rank);
    let attrs = format!(
        "scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = {all}, scatter_dims_to_operand_dims = {all}, index_vector_dim = {rank}>, indices_are_sorted = false, unique_indices = false"
    );
    let elem = TensorType::scalar(x.ty.dtype);
    e.region_op(
        "stablehlo.scatter",
        &[x, &coords, &updates],
        &[elem.clone(), elem],
        |e, args| {
            let (old, new) = (&args[0], &args[1]);
            let bools = old.ty.dtype == DType::Bool;
            let combined = match reduce {
                ScatterReduce::Replace => return vec![new.clone()],
                ScatterReduce::Add if bools => e.binary("stablehlo.or", old, new),
                ScatterReduce::Add => e.add(old, new),
                ScatterReduce::Mul | ScatterReduce::Min if bools => {
                    e.binary("stablehlo.and", old, new)
                }
                ScatterReduce::Max if bools => e.binary("stablehlo.or", old, new),
                ScatterReduce::Mul => e.mul(old, new),
                ScatterReduce::Max => e.maximum(old, new),
                ScatterReduce::Min => e.minimum(old, new),
            };
            if !old.ty.dtype.is_float() || matches!(reduce, ScatterReduce::Add | ScatterReduce::Mul)
            {
                return vec![combined];
            }
            // NaN wins, whatever the plugin's maximum does with it.
            let old_nan = e.is_nan(old);
            let new_nan = e.is_nan(new);
            let r = e.select(&new_nan, new, &combined);
            vec![e.select(&old_nan, old, &r)]
        },
        &attrs,
        std::slice::from_ref(&x.ty),
    )
    .remove(0)
}

/// Start indices, all converted to i64 (StableHLO wants one index type).
fn starts(e: &mut Emitter, starts: &[V]) -> Vec<V> {
    starts.iter().map(|s| e.convert(s, DType::I64)).collect()
}

pub(super) fn dynamic_slice(e: &mut Emitter, inputs: &[V], sizes: &[i64]) -> V {
    let x = &inputs[0];
    let s = starts(e, &inputs[1..]);
    let mut operands: Vec<&V> = vec![x];
    operands.extend(s.iter());
    let attrs = format!("slice_sizes = {}", i64_array(sizes.iter().copied()));
    e.op(
        "stablehlo.dynamic_slice",
        &operands,
        &attrs,
        x.ty.with_shape(Shape::from_slice(sizes)),
    )
}

pub(super) fn dynamic_update_slice(e: &mut Emitter, inputs: &[V]) -> V {
    let (x, update) = (&inputs[0], &inputs[1]);
    let s = starts(e, &inputs[2..]);
    let mut operands: Vec<&V> = vec![x, update];
    operands.extend(s.iter());
    e.op(
        "stablehlo.dynamic_update_slice",
        &operands,
        "",
        x.ty.clone(),
    )
}

/// The running index-check flag (`Op::IndexCheck`): `previous` where set,
/// else `number` where any element of `index` other than `ignore` is
/// outside `[0, size)`, else 0.
pub(super) fn index_check(e: &mut Emitter, inputs: &[V], size: i64, ignore: Option<i64>) -> V {
    let (index, number, previous) = (&inputs[0], &inputs[1], &inputs[2]);
    let zero = e.splat(0, index);
    let bound = e.splat(Scalar::Int(size), index);
    let below = e.compare(Cmp::Lt, index, &zero);
    let above = e.compare(Cmp::Ge, index, &bound);
    let mut bad = e.binary("stablehlo.or", &below, &above);
    if let Some(v) = ignore {
        let ignored = e.splat(Scalar::Int(v), index);
        let counted = e.compare(Cmp::Ne, index, &ignored);
        bad = e.binary("stablehlo.and", &bad, &counted);
    }
    let dims: Vec<usize> = (0..bad.ty.rank()).collect();
    let any = match dims.len() {
        0 => bad,
        _ => e.reduce(&bad, Scalar::Bool(false), "stablehlo.or", &dims),
    };
    let any = e.convert(&any, DType::I32);
    let number = e.convert(number, DType::I32);
    let flagged = e.mul(&any, &number);
    let clear = e.scalar(0, DType::I32);
    let clean = e.compare(Cmp::Eq, previous, &clear);
    e.select(&clean, &flagged, previous)
}
