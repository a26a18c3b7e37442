//! The factorizations and solves of `torch.linalg` as StableHLO's own ops,
//! which every plugin lowers (XLA expands them into blocked loops on the CPU
//! and GPU, the TPU has them natively):
//!
//! - Cholesky: `stablehlo.cholesky`, then the other triangle zeroed (the op
//!   leaves it implementation-defined; PyTorch's factor has zeros there).
//! - CholeskyInfo: whether each matrix factored (every pivot of the factor
//!   a positive number); where some did not, inside a `stablehlo.if`, a
//!   binary search over the orders of the leading minors (each step factors
//!   the minor padded with the identity), as the factorization itself gives
//!   NaN everywhere on a failure (XLA's) and so cannot tell where.
//! - TriangularSolve: `stablehlo.triangular_solve`, which never reads the
//!   other triangle of `a`.

use super::{Cmp, Emitter, V};
use crate::dtype::DType;
use crate::scalar::Scalar;
use crate::shape::TensorType;

pub(super) fn cholesky(e: &mut Emitter, a: &V, upper: bool) -> V {
    if a.ty.numel() == 0 {
        return a.clone();
    }
    let factor = e.op(
        "stablehlo.cholesky",
        &[a],
        &format!("lower = {}", !upper),
        a.ty.clone(),
    );
    let r = a.ty.rank();
    let index = a.ty.with_dtype(DType::I32);
    let (row, col) = (e.iota(index.clone(), r - 2), e.iota(index, r - 1));
    let inside = e.compare(if upper { Cmp::Le } else { Cmp::Ge }, &row, &col);
    let zero = e.splat(0, &factor);
    e.select(&inside, &factor, &zero)
}

/// (row, col) indices of `a`'s matrices, int32 of its shape.
fn matrix_indices(e: &mut Emitter, a: &V) -> (V, V) {
    let r = a.ty.rank();
    let index = a.ty.with_dtype(DType::I32);
    (e.iota(index.clone(), r - 2), e.iota(index, r - 1))
}

/// bool [...]: whether each matrix of `a` factors (every pivot a positive
/// number; a failed factorization's NaN compares false).
fn factors(e: &mut Emitter, a: &V, upper: bool) -> V {
    let factor = e.op(
        "stablehlo.cholesky",
        &[a],
        &format!("lower = {}", !upper),
        a.ty.clone(),
    );
    let (row, col) = matrix_indices(e, a);
    let on_diagonal = e.compare(Cmp::Eq, &row, &col);
    let zero = e.splat(0, &factor);
    let positive = e.compare(Cmp::Gt, &factor, &zero);
    let off_diagonal = e.splat(Scalar::Bool(true), &positive);
    let pivot_ok = e.select(&on_diagonal, &positive, &off_diagonal);
    let r = a.ty.rank();
    e.reduce(
        &pivot_ok,
        Scalar::Bool(true),
        "stablehlo.and",
        &[r - 2, r - 1],
    )
}

pub(super) fn cholesky_info(e: &mut Emitter, a: &V, upper: bool, out: TensorType) -> V {
    if a.ty.numel() == 0 {
        return e.constant(Scalar::Int(0), out);
    }
    let ok = factors(e, a, upper);
    let failed = e.unary("stablehlo.not", &ok);
    let any_failed = if failed.ty.rank() == 0 {
        failed
    } else {
        let all: Vec<usize> = (0..failed.ty.rank()).collect();
        e.reduce(&failed, Scalar::Bool(false), "stablehlo.or", &all)
    };
    let results = [out.clone()];
    e.if_op(
        &any_failed,
        &results,
        |e| vec![first_failing_minor(e, a, &ok, upper, &out)],
        |e| vec![e.constant(Scalar::Int(0), out.clone())],
    )
    .remove(0)
}

/// Per matrix, 0 where `ok`, else the smallest order whose leading minor
/// does not factor: a binary search keeping `lo` (a minor that factors; 0
/// the empty one) below `hi` (one that does not; n, as the matrix failed).
fn first_failing_minor(e: &mut Emitter, a: &V, ok: &V, upper: bool, out: &TensorType) -> V {
    let n = a.ty.shape[a.ty.rank() - 1];
    let batch = out.rank() as i64;
    let mut lo = e.constant(Scalar::Int(0), out.clone());
    let mut hi = e.constant(Scalar::Int(n), out.clone());
    let two = e.constant(Scalar::Int(2), out.clone());
    let (row, col) = matrix_indices(e, a);
    let on_diagonal = e.compare(Cmp::Eq, &row, &col);
    let identity = e.convert(&on_diagonal, a.ty.dtype);
    // ceil(log2(n)) halvings bring hi - lo from n to 1.
    let steps = u64::BITS - (n as u64).saturating_sub(1).leading_zeros();
    for _ in 0..steps {
        let sum = e.add(&lo, &hi);
        let mid = e.div(&sum, &two);
        let order = e.broadcast_in_dim(&mid, &a.ty.shape, 0..batch);
        let in_row = e.compare(Cmp::Lt, &row, &order);
        let in_col = e.compare(Cmp::Lt, &col, &order);
        let inside = e.binary("stablehlo.and", &in_row, &in_col);
        let minor = e.select(&inside, a, &identity);
        let minor_ok = factors(e, &minor, upper);
        lo = e.select(&minor_ok, &mid, &lo);
        hi = e.select(&minor_ok, &hi, &mid);
    }
    let zero = e.constant(Scalar::Int(0), out.clone());
    e.select(ok, &zero, &hi)
}

pub(super) fn triangular_solve(
    e: &mut Emitter,
    a: &V,
    b: &V,
    left: bool,
    lower: bool,
    unit_diagonal: bool,
    transpose: bool,
) -> V {
    if b.ty.numel() == 0 {
        return b.clone();
    }
    let attrs = format!(
        "left_side = {left}, lower = {lower}, unit_diagonal = {unit_diagonal}, transpose_a = #stablehlo<transpose {}>",
        if transpose {
            "TRANSPOSE"
        } else {
            "NO_TRANSPOSE"
        }
    );
    e.op("stablehlo.triangular_solve", &[a, b], &attrs, b.ty.clone())
}

#[cfg(test)]
mod tests {
    use crate::dtype::DType;
    use crate::graph::Graph;
    use crate::lower::lower;
    use crate::op::Op;
    use crate::shape::TensorType;

    fn lowered(op: Op, inputs: &[TensorType]) -> String {
        let mut g = Graph::new();
        let params: Vec<_> = inputs.iter().map(|t| g.param(t.clone())).collect();
        let v = g.push(op, &params).unwrap();
        g.output(v);
        lower(&g)
    }

    #[test]
    fn cholesky_zeroes_the_other_triangle() {
        let a = TensorType::new(DType::F32, &[2, 3, 3]);
        let text = lowered(Op::Cholesky { upper: true }, &[a]);
        assert!(
            text.contains("\"stablehlo.cholesky\"") && text.contains("lower = false"),
            "{text}"
        );
        assert!(
            text.contains("comparison_direction = #stablehlo<comparison_direction LE>"),
            "{text}"
        );
        assert!(text.contains("stablehlo.select"), "{text}");
    }

    #[test]
    fn triangular_solve_passes_its_options() {
        let a = TensorType::new(DType::F64, &[4, 4]);
        let b = TensorType::new(DType::F64, &[2, 4]);
        let op = Op::TriangularSolve {
            left: false,
            lower: false,
            unit_diagonal: true,
            transpose: true,
        };
        let text = lowered(op, &[a, b]);
        assert!(
            text.contains("left_side = false, lower = false, unit_diagonal = true, transpose_a = #stablehlo<transpose TRANSPOSE>"),
            "{text}"
        );
    }
}
