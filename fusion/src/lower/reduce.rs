//! Reductions. 16-bit floats accumulate in f32 (as PyTorch does on CPU), and
//! the result is converted back.

use super::{Cmp, Emitter, V};
use crate::dtype::DType;
use crate::op::{ArgReduceOp, ReduceOp};
use crate::scalar::Scalar;
use crate::shape::TensorType;

/// The dtype a float reduction accumulates in.
pub(super) fn accumulator(d: DType) -> DType {
    match d {
        DType::F16 | DType::BF16 => DType::F32,
        d => d,
    }
}

/// The lowest and highest values of `d` (the identities of max and min).
pub(super) fn extremes(d: DType) -> (Scalar, Scalar) {
    match d {
        DType::Bool => (Scalar::Bool(false), Scalar::Bool(true)),
        DType::U8 => (Scalar::Int(0), Scalar::Int(u8::MAX as i64)),
        DType::I8 => (Scalar::Int(i8::MIN as i64), Scalar::Int(i8::MAX as i64)),
        DType::I16 => (Scalar::Int(i16::MIN as i64), Scalar::Int(i16::MAX as i64)),
        DType::I32 => (Scalar::Int(i32::MIN as i64), Scalar::Int(i32::MAX as i64)),
        DType::I64 => (Scalar::Int(i64::MIN), Scalar::Int(i64::MAX)),
        _ => (
            Scalar::Float(f64::NEG_INFINITY),
            Scalar::Float(f64::INFINITY),
        ),
    }
}

/// All dims when `dims` is empty. A 0-d tensor accepts dim 0 (as PyTorch does),
/// which names no dim of the StableHLO value: reducing it reduces nothing.
fn dims_or_all(dims: &[usize], rank: usize) -> Vec<usize> {
    if dims.is_empty() {
        (0..rank).collect()
    } else {
        dims.iter().copied().filter(|&d| d < rank).collect()
    }
}

pub(super) fn sum(e: &mut Emitter, x: &V, dims: &[usize]) -> V {
    e.reduce(x, Scalar::Int(0), "stablehlo.add", dims)
}

/// Max over `dims`; NaN propagates (the combiner is `Emitter::maximum`, since
/// the CPU backend's `stablehlo.maximum` can drop a NaN).
pub(super) fn max(e: &mut Emitter, x: &V, dims: &[usize]) -> V {
    let (lo, _) = extremes(x.ty.dtype);
    if x.ty.dtype == DType::Bool {
        return e.reduce(x, lo, "stablehlo.or", dims);
    }
    e.reduce_with(x, lo, dims, |e, a, b| e.maximum(a, b))
}

/// Min over `dims`; NaN propagates.
fn min(e: &mut Emitter, x: &V, dims: &[usize]) -> V {
    let (_, hi) = extremes(x.ty.dtype);
    if x.ty.dtype == DType::Bool {
        return e.reduce(x, hi, "stablehlo.and", dims);
    }
    e.reduce_with(x, hi, dims, |e, a, b| e.minimum(a, b))
}

/// `x` reduced over `dims`, then broadcast back to `x`'s shape.
pub(super) fn keep(e: &mut Emitter, reduced: &V, like: &TensorType, dims: &[usize]) -> V {
    let kept: Vec<i64> = (0..like.rank())
        .filter(|d| !dims.contains(d))
        .map(|d| d as i64)
        .collect();
    e.broadcast_in_dim(reduced, &like.shape, kept)
}

/// Number of elements reduced.
fn count(x: &TensorType, dims: &[usize]) -> f64 {
    dims.iter().map(|&d| x.shape[d]).product::<i64>() as f64
}

pub(super) fn reduce(e: &mut Emitter, r: ReduceOp, x: &V, dims: &[usize], out: TensorType) -> V {
    let dims = dims_or_all(dims, x.ty.rank());
    let acc = accumulator(out.dtype);
    let v = match r {
        ReduceOp::Sum => {
            let xc = e.convert(x, acc);
            sum(e, &xc, &dims)
        }
        ReduceOp::Prod => {
            let xc = e.convert(x, acc);
            e.reduce(&xc, Scalar::Int(1), "stablehlo.multiply", &dims)
        }
        ReduceOp::Max => max(e, x, &dims),
        ReduceOp::Min => min(e, x, &dims),
        ReduceOp::Mean => {
            let xc = e.convert(x, acc);
            let s = sum(e, &xc, &dims);
            e.binary_const("stablehlo.divide", &s, count(&x.ty, &dims))
        }
        ReduceOp::Var { correction } => {
            let xc = e.convert(x, acc);
            let s = sum(e, &xc, &dims);
            let n = count(&x.ty, &dims);
            let mean = e.binary_const("stablehlo.divide", &s, n);
            let mean = keep(e, &mean, &xc.ty, &dims);
            let d = e.sub(&xc, &mean);
            let d2 = e.mul(&d, &d);
            let ss = sum(e, &d2, &dims);
            e.binary_const("stablehlo.divide", &ss, (n - correction as f64).max(0.0))
        }
        ReduceOp::LogSumExp => {
            let xc = e.convert(x, acc);
            logsumexp(e, &xc, &dims)
        }
    };
    let v = e.convert(&v, out.dtype);
    // With keepdim the reduced dims come back as size 1.
    e.reshape(&v, &out.shape)
}

/// `m + log(sum(exp(x - m)))` with `m` the max, replaced by 0 where infinite so
/// all -inf rows give -inf and +inf gives +inf.
/// Of a complex `x`, `m` is the max of the real parts (as PyTorch shifts
/// complex inputs): the exponentials' magnitudes stay at most 1.
pub(super) fn logsumexp(e: &mut Emitter, x: &V, dims: &[usize]) -> V {
    let m = if x.ty.dtype.is_complex() {
        let re = e.real_part(x);
        max(e, &re, dims)
    } else {
        max(e, x, dims)
    };
    let finite = e.is_finite(&m);
    let zero = e.splat(0, &m);
    let m = e.select(&finite, &m, &zero);
    let m = e.convert(&m, x.ty.dtype);
    let mb = keep(e, &m, &x.ty, dims);
    let shifted = e.sub(x, &mb);
    let ex = e.unary("stablehlo.exponential", &shifted);
    let s = sum(e, &ex, dims);
    let l = e.unary("stablehlo.log", &s);
    e.add(&l, &m)
}

/// A variadic reduce over (value, index) pairs: the first index of the max (or
/// min); NaN counts as the extreme, as in PyTorch.
/// Of two (value, index) pairs, the one with the larger value (smaller if
/// not `max`), NaN beating every number; among equal values (all NaNs
/// equal), the one with the earlier index. The body of argmax and argmin:
/// associative and commutative, so any reduction order gives the same pair.
fn better_pair(
    e: &mut Emitter,
    max: bool,
    float: bool,
    [av, ai]: [&V; 2],
    [bv, bi]: [&V; 2],
) -> Vec<V> {
    let better = e.compare(if max { Cmp::Gt } else { Cmp::Lt }, av, bv);
    let equal = e.compare(Cmp::Eq, av, bv);
    let (better, equal) = if float {
        let a_nan = e.is_nan(av);
        let b_nan = e.is_nan(bv);
        let b_num = e.unary("stablehlo.not", &b_nan);
        let nan_wins = e.binary("stablehlo.and", &a_nan, &b_num);
        let better = e.binary("stablehlo.or", &better, &nan_wins);
        let both_nan = e.binary("stablehlo.and", &a_nan, &b_nan);
        let equal = e.binary("stablehlo.or", &equal, &both_nan);
        (better, equal)
    } else {
        (better, equal)
    };
    let index_wins = e.compare(Cmp::Lt, ai, bi);
    let tie = e.binary("stablehlo.and", &equal, &index_wins);
    let pick_a = e.binary("stablehlo.or", &better, &tie);
    vec![e.select(&pick_a, av, bv), e.select(&pick_a, ai, bi)]
}

pub(super) fn arg_reduce(
    e: &mut Emitter,
    op: ArgReduceOp,
    x: &V,
    dim: Option<usize>,
    out: TensorType,
) -> V {
    let (x, dim) = match dim {
        Some(d) if x.ty.rank() > 0 => (x.clone(), d),
        _ => (e.reshape(x, &[x.ty.numel()]), 0),
    };
    let dtype = x.ty.dtype;
    let idx = e.iota(x.ty.with_dtype(DType::I64), dim);
    let (lo, hi) = extremes(dtype);
    let init_v = e.scalar(if op == ArgReduceOp::ArgMax { lo } else { hi }, dtype);
    let init_i = e.scalar(0, DType::I64);
    let reduced: crate::shape::Shape = (0..x.ty.rank())
        .filter(|&d| d != dim)
        .map(|d| x.ty.shape[d])
        .collect();
    let elem_v = TensorType::scalar(dtype);
    let elem_i = TensorType::scalar(DType::I64);
    let attrs = format!("dimensions = array<i64: {dim}>");
    let results = e.region_op(
        "stablehlo.reduce",
        &[&x, &idx, &init_v, &init_i],
        &[
            elem_v.clone(),
            elem_i.clone(),
            elem_v.clone(),
            elem_i.clone(),
        ],
        |e, a| {
            let max = op == ArgReduceOp::ArgMax;
            better_pair(e, max, dtype.is_float(), [&a[0], &a[1]], [&a[2], &a[3]])
        },
        &attrs,
        &[
            x.ty.with_shape(reduced.clone()),
            TensorType::new(DType::I64, &reduced),
        ],
    );
    e.reshape(&results[1], &out.shape)
}
