//! Scans and sorting along one dim.
//!
//! - Cumulative sum/product: a `stablehlo.reduce_window` whose window spans
//!   the whole dim, padded before it by `len - 1` identities (the padding
//!   takes the init value), so output `i` reduces inputs `0..=i`. Where XLA
//!   runs the windows as written (the CPU plugin) that is `len` steps per
//!   output. 16-bit floats accumulate in f32 (PyTorch's CPU kernels do) and
//!   round once per output.
//! - Sort: a stable `stablehlo.sort` of (values, int64 iota along the dim)
//!   whose comparator orders values only; stability keeps equal values in
//!   index order. NaN is above every number and all NaNs are equal (PyTorch's
//!   order: last ascending, first descending), so no NaN bit pattern or sign
//!   matters, and -0.0 equals 0.0, as `compare FLOAT` has it.
//!
//! A 0-d input is its own scan and sort (index 0); an input without elements
//! lowers to an empty constant, since a window or sort over nothing is not
//! valid StableHLO.

use super::reduce::{accumulator, extremes};
use super::{Cmp, Emitter, V, i64_array};
use crate::dtype::DType;
use crate::op::{ScanOp, SortOutput};
use crate::scalar::Scalar;
use crate::shape::TensorType;

pub(super) fn scan(e: &mut Emitter, op: ScanOp, x: &V, dim: usize, out: TensorType) -> V {
    if x.ty.numel() == 0 {
        return e.constant(Scalar::Int(0), out);
    }
    if x.ty.rank() == 0 {
        return match op {
            ScanOp::ArgMax | ScanOp::ArgMin => e.constant(Scalar::Int(0), out),
            _ => e.convert(x, out.dtype),
        };
    }
    match op {
        ScanOp::Sum | ScanOp::Prod | ScanOp::LogSumExp => running_total(e, op, x, dim, out),
        ScanOp::Max | ScanOp::Min | ScanOp::ArgMax | ScanOp::ArgMin => {
            let max = matches!(op, ScanOp::Max | ScanOp::ArgMax);
            let [values, indices] = running_extreme(e, max, x, dim);
            if matches!(op, ScanOp::Max | ScanOp::Min) {
                values
            } else {
                indices
            }
        }
    }
}

/// The window attributes of a scan along `dim` of a `shape` value: a window
/// over the whole dim, padded before it by `len - 1` init values.
fn scan_window(shape: &[i64], dim: usize) -> String {
    let len = shape[dim];
    let rank = shape.len();
    let window = (0..rank).map(|d| if d == dim { len } else { 1 });
    let padding: Vec<String> = (0..rank)
        .map(|d| if d == dim { len - 1 } else { 0 })
        .map(|low| format!("[{low}, 0]"))
        .collect();
    format!(
        "window_dimensions = {}, window_strides = {}, padding = dense<[{}]> : tensor<{rank}x2xi64>",
        i64_array(window),
        i64_array((0..rank).map(|_| 1)),
        padding.join(", "),
    )
}

/// Running sums, products or log-sum-exps, in the accumulator dtype.
fn running_total(e: &mut Emitter, op: ScanOp, x: &V, dim: usize, out: TensorType) -> V {
    let acc = accumulator(out.dtype);
    let xc = e.convert(x, acc);
    let init = match op {
        ScanOp::Prod => Scalar::Int(1),
        ScanOp::LogSumExp => Scalar::Float(f64::NEG_INFINITY),
        _ => Scalar::Int(0),
    };
    let attrs = scan_window(&x.ty.shape, dim);
    let init = e.scalar(init, acc);
    let elem = TensorType::scalar(acc);
    let totals = e
        .region_op(
            "stablehlo.reduce_window",
            &[&xc, &init],
            &[elem.clone(), elem],
            |e, a| {
                vec![match op {
                    ScanOp::Prod => e.binary("stablehlo.multiply", &a[0], &a[1]),
                    ScanOp::LogSumExp => log_add_exp(e, &a[0], &a[1]),
                    _ => e.binary("stablehlo.add", &a[0], &a[1]),
                }]
            },
            &attrs,
            std::slice::from_ref(&xc.ty),
        )
        .remove(0);
    e.convert(&totals, out.dtype)
}

/// `log(exp(a) + exp(b))` as `max + log1p(exp(-|a - b|))`; `a + ln 2` where
/// they are equal (so two equal infinities stay that infinity).
fn log_add_exp(e: &mut Emitter, a: &V, b: &V) -> V {
    let m = e.maximum(a, b);
    let diff = e.sub(a, b);
    let distance = e.unary("stablehlo.abs", &diff);
    let negated = e.unary("stablehlo.negate", &distance);
    let small = e.unary("stablehlo.exponential", &negated);
    let log1p = e.unary("stablehlo.log_plus_one", &small);
    let total = e.add(&m, &log1p);
    let doubled = e.binary_const("stablehlo.add", a, std::f64::consts::LN_2);
    let equal = e.compare(Cmp::Eq, a, b);
    e.select(&equal, &doubled, &total)
}

/// The running maximum (or minimum) along `dim` and where it was, as
/// PyTorch's cummax and cummin: a NaN, once met, stays; the index is the
/// latest element that set (or equalled) the running extreme. Two plain
/// window scans (a variadic one of (value, index) pairs is what XLA's
/// rewriting of long windows mistypes): the running extreme, then the
/// running maximum of the positions where an element is that extreme (or
/// NaN), -1 elsewhere.
fn running_extreme(e: &mut Emitter, max: bool, x: &V, dim: usize) -> [V; 2] {
    let dtype = x.ty.dtype;
    let float = dtype.is_float();
    let (lo, hi) = extremes(dtype);
    let attrs = scan_window(&x.ty.shape, dim);
    let window = |e: &mut Emitter, v: &V, init: Scalar, body: &'static str| {
        let init = e.scalar(init, v.ty.dtype);
        let elem = TensorType::scalar(v.ty.dtype);
        let nan_wins = v.ty.dtype.is_float();
        e.region_op(
            "stablehlo.reduce_window",
            &[v, &init],
            &[elem.clone(), elem],
            |e, a| {
                let r = e.binary(body, &a[0], &a[1]);
                if !nan_wins {
                    return vec![r];
                }
                // NaN wins, whatever the plugin's maximum does with it.
                let a_nan = e.is_nan(&a[0]);
                let b_nan = e.is_nan(&a[1]);
                let r = e.select(&b_nan, &a[1], &r);
                vec![e.select(&a_nan, &a[0], &r)]
            },
            &attrs,
            std::slice::from_ref(&v.ty),
        )
        .remove(0)
    };
    // On bools, or/and.
    let body = match (max, dtype == DType::Bool) {
        (true, false) => "stablehlo.maximum",
        (false, false) => "stablehlo.minimum",
        (true, true) => "stablehlo.or",
        (false, true) => "stablehlo.and",
    };
    let values = window(e, x, if max { lo } else { hi }, body);
    let mut set = e.compare(Cmp::Eq, x, &values);
    if float {
        let nan = e.is_nan(x);
        set = e.binary("stablehlo.or", &set, &nan);
    }
    let idx = e.iota(x.ty.with_dtype(DType::I64), dim);
    let none = e.splat(-1, &idx);
    let candidates = e.select(&set, &idx, &none);
    let indices = window(e, &candidates, Scalar::Int(-1), "stablehlo.maximum");
    [values, indices]
}

pub(super) fn sort(
    e: &mut Emitter,
    x: &V,
    dim: usize,
    descending: bool,
    output: SortOutput,
    out: TensorType,
) -> V {
    if x.ty.rank() == 0 || x.ty.numel() == 0 {
        return match output {
            SortOutput::Values => x.clone(),
            SortOutput::Indices => e.constant(Scalar::Int(0), out),
        };
    }
    let dtype = x.ty.dtype;
    let index = e.iota(x.ty.with_dtype(DType::I64), dim);
    let (elem, elem_i) = (TensorType::scalar(dtype), TensorType::scalar(DType::I64));
    let attrs = format!("dimension = {dim} : i64, is_stable = true");
    // The comparator's block takes (lhs, rhs) of each operand in turn.
    let mut sorted = e.region_op(
        "stablehlo.sort",
        &[x, &index],
        &[elem.clone(), elem, elem_i.clone(), elem_i],
        |e, a| vec![goes_first(e, &a[0], &a[1], descending)],
        &attrs,
        &[x.ty.clone(), index.ty.clone()],
    );
    match output {
        SortOutput::Values => sorted.swap_remove(0),
        SortOutput::Indices => sorted.swap_remove(1),
    }
}

/// Whether `a` sorts strictly before `b`: `a < b` ascending, `a > b`
/// descending, with NaN above every number.
fn goes_first(e: &mut Emitter, a: &V, b: &V, descending: bool) -> V {
    // Descending order is ascending order with the operands swapped.
    let (lo, hi) = if descending { (b, a) } else { (a, b) };
    let less = e.compare(Cmp::Lt, lo, hi);
    if !a.ty.dtype.is_float() {
        return less;
    }
    let lo_nan = e.is_nan(lo);
    let lo_number = e.unary("stablehlo.not", &lo_nan);
    let hi_nan = e.is_nan(hi);
    let below_nan = e.binary("stablehlo.and", &lo_number, &hi_nan);
    e.binary("stablehlo.or", &less, &below_nan)
}

#[cfg(test)]
mod tests {
    use crate::dtype::DType;
    use crate::graph::Graph;
    use crate::lower::lower;
    use crate::op::{Op, ScanOp, SortOutput};
    use crate::shape::TensorType;

    fn lowered(op: Op, x: TensorType) -> String {
        let mut g = Graph::new();
        let p = g.param(x);
        let v = g.push(op, &[p]).unwrap();
        g.output(v);
        lower(&g)
    }

    #[test]
    fn a_cumsum_is_a_window_over_the_whole_dim_padded_before_it() {
        let op = Op::Scan {
            op: ScanOp::Sum,
            dim: 1,
        };
        let text = lowered(op, TensorType::new(DType::BF16, &[2, 5, 3]));
        assert!(
            text.contains("window_dimensions = array<i64: 1, 5, 1>"),
            "{text}"
        );
        assert!(text.contains("dense<[[0, 0], [4, 0], [0, 0]]>"), "{text}");
        // Accumulated in f32, returned in bf16.
        assert!(text.contains("tensor<2x5x3xf32>"), "{text}");
        assert!(text.contains("-> tensor<2x5x3xbf16>"), "{text}");
    }

    #[test]
    fn a_sort_is_stable_and_orders_floats_with_nan_handling() {
        let op = |dtype, output| {
            let op = Op::Sort {
                dim: 0,
                descending: false,
                output,
            };
            lowered(op, TensorType::new(dtype, &[4, 2]))
        };
        let text = op(DType::F32, SortOutput::Indices);
        assert!(text.contains("\"stablehlo.sort\""), "{text}");
        assert!(text.contains("is_stable = true"), "{text}");
        assert!(text.contains("comparison_type FLOAT"), "{text}");
        assert!(text.contains("\"stablehlo.or\""), "{text}");
        let text = op(DType::I32, SortOutput::Values);
        assert!(text.contains("comparison_type SIGNED"), "{text}");
        assert!(!text.contains("\"stablehlo.or\""), "{text}");
    }
}
