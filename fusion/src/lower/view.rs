//! Strided views of a flat storage: how a PyTorch view (storage, offset,
//! sizes, strides) is read and written.
//!
//! Reading, cheapest first:
//! - the view's elements form one dense block (contiguous, or a permutation
//!   of one, as `t()` and `transpose` give): slice the block, reshape it,
//!   transpose it back; zero strides (`expand`) become a broadcast;
//! - anything else (stepped slices, diagonals): a gather at indices
//!   `offset + sum(iota_k * stride_k)`.
//!
//! Writing is the inverse: a dense block is a `dynamic_update_slice` of the
//! (permuted) value, a view covering the whole storage in order is the value
//! itself, and anything else is a scatter.

use super::{Emitter, V, dim_list, i64_array};
use crate::dtype::DType;
use crate::scalar::Scalar;
use crate::shape::{Shape, TensorType};

/// Where a view's elements sit in its storage.
struct Layout {
    /// Dims that step through memory (size > 1, stride > 0), as
    /// (dim, size, stride), in decreasing stride order.
    kept: Vec<(usize, i64, i64)>,
    /// Dims of size > 1 with stride 0 (broadcast).
    broadcast: Vec<usize>,
    /// The kept dims cover one dense block of `span` elements.
    dense: bool,
    span: i64,
}

impl Layout {
    fn of(sizes: &[i64], strides: &[i64]) -> Layout {
        let mut kept: Vec<(usize, i64, i64)> = (0..sizes.len())
            .filter(|&d| sizes[d] > 1 && strides[d] > 0)
            .map(|d| (d, sizes[d], strides[d]))
            .collect();
        kept.sort_by_key(|&(d, _, stride)| (std::cmp::Reverse(stride), d));
        let broadcast = (0..sizes.len())
            .filter(|&d| sizes[d] > 1 && strides[d] == 0)
            .collect();
        let dense = kept.last().is_none_or(|k| k.2 == 1)
            && kept.windows(2).all(|w| w[0].2 == w[1].2 * w[1].1);
        let span = kept.iter().map(|k| k.1).product();
        Layout {
            kept,
            broadcast,
            dense,
            span,
        }
    }

    /// Whether the kept dims appear in memory in their own order.
    fn in_order(&self) -> bool {
        self.kept.windows(2).all(|w| w[0].0 < w[1].0)
    }

    /// The kept dims' sizes in memory order.
    fn block_shape(&self) -> Vec<i64> {
        self.kept.iter().map(|k| k.1).collect()
    }

    /// The permutation taking the block (memory order) to the view's order.
    fn to_view_order(&self) -> Vec<usize> {
        let mut by_dim: Vec<(usize, usize)> = self
            .kept
            .iter()
            .enumerate()
            .map(|(i, k)| (k.0, i))
            .collect();
        by_dim.sort();
        by_dim.into_iter().map(|(_, i)| i).collect()
    }
}

fn slice_1d(e: &mut Emitter, s: &V, start: i64, len: i64) -> V {
    let attrs = format!(
        "start_indices = {}, limit_indices = {}, strides = {}",
        i64_array([start]),
        i64_array([start + len]),
        i64_array([1])
    );
    e.op(
        "stablehlo.slice",
        &[s],
        &attrs,
        s.ty.with_shape(Shape::from_slice(&[len])),
    )
}

/// `offset + sum(iota_k * stride_k)` over `sizes`, flattened to `[numel, 1]`.
fn indices(e: &mut Emitter, sizes: &[i64], strides: &[i64], offset: i64) -> V {
    let ty = TensorType::new(DType::I64, sizes);
    let mut acc = e.constant(Scalar::Int(offset), ty.clone());
    for (d, &stride) in strides.iter().enumerate() {
        if sizes[d] <= 1 || stride == 0 {
            continue;
        }
        let i = e.iota(ty.clone(), d);
        let scaled = if stride == 1 {
            i
        } else {
            e.binary_const("stablehlo.multiply", &i, Scalar::Int(stride))
        };
        acc = e.add(&acc, &scaled);
    }
    let numel: i64 = sizes.iter().product();
    e.reshape(&acc, &[numel, 1])
}

pub(super) fn as_strided(e: &mut Emitter, s: &V, sizes: &[i64], strides: &[i64], offset: i64) -> V {
    let numel: i64 = sizes.iter().product();
    if numel == 0 {
        let empty = slice_1d(e, s, 0, 0);
        return e.reshape(&empty, sizes);
    }
    let layout = Layout::of(sizes, strides);
    if !layout.dense {
        let idx = indices(e, sizes, strides, offset);
        let attrs = format!(
            "dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = {}, indices_are_sorted = false",
            i64_array([1])
        );
        let flat = e.op(
            "stablehlo.gather",
            &[s, &idx],
            &attrs,
            s.ty.with_shape(Shape::from_slice(&[numel])),
        );
        return e.reshape(&flat, sizes);
    }
    // One dense block: slice it, shape it in memory order, put the dims in
    // the view's order, then restore size-1 dims and broadcast stride-0 ones.
    let flat = if offset == 0 && layout.span == s.ty.shape[0] {
        s.clone()
    } else {
        slice_1d(e, s, offset, layout.span)
    };
    let block = e.reshape(&flat, &layout.block_shape());
    let ordered = e.transpose(&block, &layout.to_view_order());
    let unbroadcast: Vec<i64> = (0..sizes.len())
        .map(|d| {
            if layout.broadcast.contains(&d) {
                1
            } else {
                sizes[d]
            }
        })
        .collect();
    let shaped = e.reshape(&ordered, &unbroadcast);
    if layout.broadcast.is_empty() {
        return shaped;
    }
    let dims: Vec<i64> = (0..sizes.len() as i64).collect();
    e.broadcast_in_dim(&shaped, sizes, dims)
}

pub(super) fn as_strided_scatter(
    e: &mut Emitter,
    s: &V,
    v: &V,
    sizes: &[i64],
    strides: &[i64],
    offset: i64,
) -> V {
    let numel: i64 = sizes.iter().product();
    if numel == 0 {
        return s.clone();
    }
    let n = s.ty.shape[0];
    let layout = Layout::of(sizes, strides);
    if layout.dense && layout.broadcast.is_empty() {
        // The value without its size-1 dims (view order), put in memory
        // order (the inverse of `to_view_order`), flattened.
        let mut view_sizes: Vec<(usize, i64)> = layout.kept.iter().map(|k| (k.0, k.1)).collect();
        view_sizes.sort();
        let squeezed = e.reshape(v, &view_sizes.iter().map(|k| k.1).collect::<Vec<_>>());
        let to_memory: Vec<usize> = layout
            .kept
            .iter()
            .map(|k| view_sizes.iter().position(|(d, _)| *d == k.0).unwrap_or(0))
            .collect();
        let permuted = e.transpose(&squeezed, &to_memory);
        let flat = e.reshape(&permuted, &[layout.span]);
        if offset == 0 && layout.span == n && layout.in_order() {
            return flat;
        }
        let start = e.scalar(Scalar::Int(offset), DType::I64);
        return e.op(
            "stablehlo.dynamic_update_slice",
            &[s, &flat, &start],
            "",
            s.ty.clone(),
        );
    }
    let idx = indices(e, sizes, strides, offset);
    let updates = e.reshape(v, &[numel]);
    let attrs = format!(
        "scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = {}, scatter_dims_to_operand_dims = {}, index_vector_dim = 1>, indices_are_sorted = false, unique_indices = false",
        dim_list([0]),
        dim_list([0])
    );
    let elem = TensorType::scalar(s.ty.dtype);
    e.region_op(
        "stablehlo.scatter",
        &[s, &idx, &updates],
        &[elem.clone(), elem],
        |_, args| vec![args[1].clone()],
        &attrs,
        std::slice::from_ref(&s.ty),
    )
    .remove(0)
}
