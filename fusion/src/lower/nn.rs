//! Matmul and the composite nn ops (softmax, layer_norm, cross_entropy).
//! 16-bit floats compute in f32 and convert back, as PyTorch's CPU kernels do.

use super::reduce::{accumulator, keep, logsumexp, max, sum};
use super::{Cmp, Emitter, V, dim_list};
use crate::dtype::DType;
use crate::op::Reduction;
use crate::scalar::Scalar;
use crate::shape::{Shape, TensorType, broadcast_shapes};

/// `torch.matmul`: 1-d operands gain a dim that is dropped from the result;
/// batch dims broadcast. A batched left operand against a matrix folds its
/// batch into rows, so linear layers on 3-d activations stay one matrix product.
pub(super) fn matmul(e: &mut Emitter, a: &V, b: &V, out: TensorType) -> V {
    let a2 = if a.ty.rank() == 1 {
        e.reshape(a, &[1, a.ty.shape[0]])
    } else {
        a.clone()
    };
    let b2 = if b.ty.rank() == 1 {
        e.reshape(b, &[b.ty.shape[0], 1])
    } else {
        b.clone()
    };
    let (ra, rb) = (a2.ty.rank(), b2.ty.rank());
    let (m, k, n) = (
        a2.ty.shape[ra - 2],
        a2.ty.shape[ra - 1],
        b2.ty.shape[rb - 1],
    );
    let dtype = a.ty.dtype;

    let result = if rb == 2 {
        // Fold every batch dim of `a` into its rows.
        let rows: i64 = a2.ty.shape[..ra - 1].iter().product();
        let a_flat = e.reshape(&a2, &[rows, k]);
        let attrs = "dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>";
        let r = e.op(
            "stablehlo.dot_general",
            &[&a_flat, &b2],
            attrs,
            TensorType::new(dtype, &[rows, n]),
        );
        let mut shape: Shape = a2.ty.shape[..ra - 1].into();
        shape.push(n);
        e.reshape(&r, &shape)
    } else {
        let batch = broadcast_shapes("matmul", &a2.ty.shape[..ra - 2], &b2.ty.shape[..rb - 2])
            .expect("checked by infer");
        let nb = batch.len();
        let mut a_shape = batch.clone();
        a_shape.extend([m, k]);
        let mut b_shape = batch.clone();
        b_shape.extend([k, n]);
        let ab = e.broadcast_to(&a2, &a_shape);
        let bb = e.broadcast_to(&b2, &b_shape);
        let attrs = format!(
            "dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = {bd}, rhs_batching_dimensions = {bd}, lhs_contracting_dimensions = [{}], rhs_contracting_dimensions = [{}]>",
            nb + 1,
            nb,
            bd = dim_list(0..nb)
        );
        let mut shape = batch.clone();
        shape.extend([m, n]);
        e.op(
            "stablehlo.dot_general",
            &[&ab, &bb],
            &attrs,
            TensorType::new(dtype, &shape),
        )
    };
    e.reshape(&result, &out.shape)
}

/// `x @ w.T` (`x` of rank 2 or more, `w` a matrix), emitted weight first
/// as `(w @ x.T).T`: the dot contracts both operands on their minor dims,
/// with the weight (the larger) on the left, and its `[out, rows]` result is
/// transposed back. An optimization barrier keeps the compiler from folding
/// that transpose into the dot, which would give back the slow order (see
/// `Target::eigen_dots`). The values are those of `matmul(x, w.T)`.
pub(super) fn linear_weight_first(e: &mut Emitter, x: &V, w: &V, out: TensorType) -> V {
    let rank = x.ty.rank();
    let k = x.ty.shape[rank - 1];
    let n = w.ty.shape[0];
    let rows: i64 = x.ty.shape[..rank - 1].iter().product();
    let x_flat = e.reshape(x, &[rows, k]);
    let attrs = "dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>";
    let product = e.op(
        "stablehlo.dot_general",
        &[w, &x_flat],
        attrs,
        TensorType::new(x.ty.dtype, &[n, rows]),
    );
    let ty = product.ty.clone();
    let kept = e.op("stablehlo.optimization_barrier", &[&product], "", ty);
    let result = e.transpose(&kept, &[1, 0]);
    e.reshape(&result, &out.shape)
}

/// `softmax` or, with `log`, `log_softmax` along `dim`.
pub(super) fn softmax(e: &mut Emitter, x: &V, dim: usize, log: bool) -> V {
    let out = x.ty.dtype;
    if x.ty.rank() == 0 {
        // A single element: softmax is 1, log_softmax is 0 (NaN stays NaN).
        let d = e.sub(x, x);
        return if log {
            d
        } else {
            e.binary_const("stablehlo.add", &d, 1.0)
        };
    }
    let xc = e.convert(x, accumulator(out));
    let dims = [dim];
    let m = max(e, &xc, &dims);
    let mb = keep(e, &m, &xc.ty, &dims);
    let shifted = e.sub(&xc, &mb);
    let ex = e.unary("stablehlo.exponential", &shifted);
    let s = sum(e, &ex, &dims);
    let r = if log {
        let ls = e.unary("stablehlo.log", &s);
        let lsb = keep(e, &ls, &xc.ty, &dims);
        e.sub(&shifted, &lsb)
    } else {
        let sb = keep(e, &s, &xc.ty, &dims);
        e.div(&ex, &sb)
    };
    e.convert(&r, out)
}

/// `(x - mean) / sqrt(var + eps) * weight + bias` over the last dims (biased var).
pub(super) fn layer_norm(
    e: &mut Emitter,
    inputs: &[V],
    normalized_dims: usize,
    eps: f64,
    weight: bool,
    bias: bool,
) -> V {
    let x = &inputs[0];
    let out = x.ty.dtype;
    let xc = e.convert(x, accumulator(out));
    let rank = xc.ty.rank();
    let dims: Vec<usize> = (rank - normalized_dims..rank).collect();
    let n: i64 = dims.iter().map(|&d| xc.ty.shape[d]).product();
    let s = sum(e, &xc, &dims);
    let mean = e.binary_const("stablehlo.divide", &s, n as f64);
    let mean = keep(e, &mean, &xc.ty, &dims);
    let d = e.sub(&xc, &mean);
    let d2 = e.mul(&d, &d);
    let ss = sum(e, &d2, &dims);
    let var = e.binary_const("stablehlo.divide", &ss, n as f64);
    let var_eps = e.binary_const("stablehlo.add", &var, eps);
    let inv = e.unary("stablehlo.rsqrt", &var_eps);
    let inv = keep(e, &inv, &xc.ty, &dims);
    let mut y = e.mul(&d, &inv);
    let mut next = 1;
    for (present, add) in [(weight, false), (bias, true)] {
        if !present {
            continue;
        }
        let p = e.convert(&inputs[next], xc.ty.dtype);
        let p = e.broadcast_to(&p, &xc.ty.shape);
        y = if add { e.add(&y, &p) } else { e.mul(&y, &p) };
        next += 1;
    }
    e.convert(&y, out)
}

/// PyTorch's default `ignore_index`.
const IGNORE_INDEX: i64 = -100;

/// Rows of class scores (`[N, C]`; a `[C]` input is one row) with a class
/// target each, as the losses over them read them.
struct ClassRows {
    /// The scores, in their accumulator dtype.
    x: V,
    /// `[N]`: whether a row counts (its target is not `ignore_index`).
    valid: V,
    /// `[N, C]`: each counted row's target class (false everywhere in a row
    /// that does not count, or whose target is out of range).
    onehot: V,
}

impl ClassRows {
    fn new(e: &mut Emitter, input: &V, target: &V, ignore_index: i64) -> ClassRows {
        let (input, target) = if input.ty.rank() == 1 {
            let c = input.ty.shape[0];
            (e.reshape(input, &[1, c]), e.reshape(target, &[1]))
        } else {
            (input.clone(), target.clone())
        };
        let (n, c) = (input.ty.shape[0], input.ty.shape[1]);
        let t = e.convert(&target, DType::I64);
        let ignored = e.splat(Scalar::Int(ignore_index), &t);
        let valid = e.compare(Cmp::Ne, &t, &ignored);
        // No class is -1: a row that does not count picks nothing.
        let nothing = e.splat(Scalar::Int(-1), &t);
        let counted = e.select(&valid, &t, &nothing);
        let classes = e.iota(TensorType::new(DType::I64, &[n, c]), 1);
        let targets = e.broadcast_in_dim(&counted, &[n, c], [0]);
        let onehot = e.compare(Cmp::Eq, &classes, &targets);
        let x = e.convert(&input, accumulator(input.ty.dtype));
        ClassRows { x, valid, onehot }
    }

    fn rows(&self) -> i64 {
        self.x.ty.shape[0]
    }

    /// Each row's element of `values` (`[N, C]`) at its target; 0 in a row
    /// that picks nothing.
    fn pick(&self, e: &mut Emitter, values: &V) -> V {
        let zero = e.splat(0, values);
        let picked = e.select(&self.onehot, values, &zero);
        sum(e, &picked, &[1])
    }

    /// Each row's weight (its target's, 1 without `weight`), 0 in a row that
    /// does not count: `[N]`, in the accumulator dtype.
    fn weights(&self, e: &mut Emitter, weight: Option<&V>) -> V {
        let acc = self.x.ty.dtype;
        match weight {
            Some(w) => {
                let w = e.convert(w, acc);
                let w = e.broadcast_in_dim(&w, &self.x.ty.shape, [1]);
                self.pick(e, &w)
            }
            None => e.convert(&self.valid, acc),
        }
    }
}

/// `-log_softmax(logits)[target]`, ignoring targets equal to -100; the mean is
/// over the targets not ignored.
pub(super) fn cross_entropy(
    e: &mut Emitter,
    logits: &V,
    target: &V,
    reduction: Reduction,
    out: TensorType,
) -> V {
    let rows = ClassRows::new(e, logits, target, IGNORE_INDEX);
    let lse = logsumexp(e, &rows.x, &[1]);
    let picked = rows.pick(e, &rows.x);
    let loss = e.sub(&lse, &picked);
    let zero = e.splat(0, &loss);
    let loss = e.select(&rows.valid, &loss, &zero);
    let count = rows.weights(e, None);
    reduced_loss(e, &loss, &count, reduction, out)
}

/// Per-row `losses` reduced by `reduction` (`Mean` divides by the sum of
/// `weights`), as `out`.
fn reduced_loss(
    e: &mut Emitter,
    losses: &V,
    weights: &V,
    reduction: Reduction,
    out: TensorType,
) -> V {
    let r = match reduction {
        Reduction::None => losses.clone(),
        Reduction::Sum => sum(e, losses, &[0]),
        Reduction::Mean => {
            let total = sum(e, losses, &[0]);
            let count = sum(e, weights, &[0]);
            e.div(&total, &count)
        }
    };
    let r = e.convert(&r, out.dtype);
    e.reshape(&r, &out.shape)
}

/// PyTorch's `nll_loss` (`Op::NllLoss`): `inputs` are the log-probabilities,
/// the targets and, if weighted, the class weights.
pub(super) fn nll_loss(
    e: &mut Emitter,
    inputs: &[V],
    reduction: Reduction,
    ignore_index: i64,
    out: TensorType,
) -> V {
    let rows = ClassRows::new(e, &inputs[0], &inputs[1], ignore_index);
    let w = rows.weights(e, inputs.get(2));
    let picked = rows.pick(e, &rows.x);
    let weighted = e.mul(&picked, &w);
    // 0 - x, not -x: a row that does not count is +0, as on the CPU.
    let zero = e.splat(0, &weighted);
    let loss = e.sub(&zero, &weighted);
    reduced_loss(e, &loss, &w, reduction, out)
}

/// The sum of the weights `nll_loss` counts (`Op::NllLossTotalWeight`).
pub(super) fn nll_loss_total_weight(
    e: &mut Emitter,
    inputs: &[V],
    ignore_index: i64,
    out: TensorType,
) -> V {
    let rows = ClassRows::new(e, &inputs[0], &inputs[1], ignore_index);
    let w = rows.weights(e, inputs.get(2));
    let total = sum(e, &w, &[0]);
    let total = e.convert(&total, out.dtype);
    e.reshape(&total, &out.shape)
}

/// The gradient of `nll_loss` (`Op::NllLossBackward`): `inputs` are the
/// loss's gradient, the log-probabilities, the targets, the total weight
/// and, if weighted, the class weights. A counted row's target gets `-grad
/// * weight` (divided by the total weight for `Mean`), all else 0.
pub(super) fn nll_loss_backward(
    e: &mut Emitter,
    inputs: &[V],
    reduction: Reduction,
    ignore_index: i64,
    out: TensorType,
) -> V {
    let rows = ClassRows::new(e, &inputs[1], &inputs[2], ignore_index);
    let w = rows.weights(e, inputs.get(4));
    let n = rows.rows();
    let acc = rows.x.ty.dtype;
    let grad = e.convert(&inputs[0], acc);
    let grad = match reduction {
        Reduction::None => e.reshape(&grad, &[n]),
        Reduction::Sum => e.broadcast_in_dim(&grad, &[n], []),
        Reduction::Mean => {
            let total = e.convert(&inputs[3], acc);
            let g = e.div(&grad, &total);
            e.broadcast_in_dim(&g, &[n], [])
        }
    };
    let scaled = e.mul(&grad, &w);
    let zero = e.splat(0, &scaled);
    let coefficient = e.sub(&zero, &scaled);
    let coefficient = e.broadcast_in_dim(&coefficient, &rows.x.ty.shape, [0]);
    let zeros = e.splat(0, &coefficient);
    let d = e.select(&rows.onehot, &coefficient, &zeros);
    let d = e.convert(&d, out.dtype);
    e.reshape(&d, &out.shape)
}
