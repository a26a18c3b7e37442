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
//! - Lu: LAPACK's `getrf` (partial pivoting, right-looking, unblocked) as a
//!   `stablehlo.while` of min(m, n) steps over (step, matrix, pivots,
//!   info). Rows and columns are picked by masked sums over one-hot masks
//!   (exact: every other term is zero), so one program serves every batch
//!   with each matrix pivoting its own way. A zero pivot is recorded in
//!   `info` and eliminates nothing, as LAPACK.
//! - LuPermutation: the pivots' row swaps applied to `0..rows`, a loop too.
//! - Householder: LAPACK's `geqrf` (unblocked: one reflector per column,
//!   `dlarfg`'s signs) as a `stablehlo.while` of min(m, n) steps, with the
//!   same exact masked picks as Lu.
//! - ApplyHouseholder: LAPACK's `ormqr`, the reflectors applied to a matrix
//!   one by one in a loop (ascending or descending as the product needs).
//! - TriangularSolve: `stablehlo.triangular_solve`, which never reads the
//!   other triangle of `a`.
//! - Eigh: XLA's `Eigh` custom call (`lower, sort, max sweeps, tolerance`),
//!   which every XLA backend expands: cyclic Jacobi sweeps on the CPU and
//!   GPU until the off-diagonal norm is below the dtype's epsilon times the
//!   Frobenius norm; eigenvalues sorted ascending, vectors in columns.

use super::{Cmp, Emitter, V};
use crate::dtype::DType;
use crate::op::{EighOutput, HouseholderOutput, LuOutput};
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
    let (row, col) = matrix_indices(e, a);
    let inside = e.compare(if upper { Cmp::Le } else { Cmp::Ge }, &row, &col);
    let zero = e.splat(0, &factor);
    e.select(&inside, &factor, &zero)
}

/// Jacobi sweeps at most (JAX's choice; a float32 matrix converges in well
/// under 20).
const EIGH_MAX_SWEEPS: u32 = 100;

pub(super) fn eigh(e: &mut Emitter, a: &V, lower: bool, output: EighOutput) -> V {
    let r = a.ty.rank();
    let values =
        a.ty.with_shape(a.ty.shape[..r - 1].into())
            .with_dtype(a.ty.dtype.real_part());
    if a.ty.numel() == 0 {
        return match output {
            EighOutput::Values => e.constant(Scalar::Float(0.0), values),
            EighOutput::Vectors => a.clone(),
        };
    }
    let tolerance = match a.ty.dtype {
        DType::F64 | DType::C128 => f64::EPSILON,
        _ => f64::from(f32::EPSILON),
    };
    let results = e.multi_op(
        "stablehlo.custom_call",
        &[a],
        &format!(
            "call_target_name = \"Eigh\", backend_config = \"{},1,{EIGH_MAX_SWEEPS},{tolerance:e}\"",
            u8::from(lower)
        ),
        &[a.ty.clone(), values],
    );
    let [vectors, values] = <[V; 2]>::try_from(results).expect("two results");
    match output {
        EighOutput::Values => values,
        EighOutput::Vectors => vectors,
    }
}

/// (row, col) indices of `a`'s matrices, int32 of its shape.
pub(super) fn matrix_indices(e: &mut Emitter, a: &V) -> (V, V) {
    let r = a.ty.rank();
    let index = a.ty.with_dtype(DType::I32);
    (e.iota(index.clone(), r - 2), e.iota(index, r - 1))
}

/// bool, `v`'s shape: where `v`'s last-dim index is `k` (0-d int32, or one
/// per leading batch element), the one step of a per-step vector (pivots,
/// tau) a loop reads or writes.
pub(super) fn at_last(e: &mut Emitter, v: &V, k: &V) -> V {
    let index = e.iota(v.ty.with_dtype(DType::I32), v.ty.rank() - 1);
    let k_full = spread(e, k, &v.ty.shape);
    e.compare(Cmp::Eq, &index, &k_full)
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
    // A Hermitian matrix's pivots are real: a complex factor's diagonal is
    // judged by its real parts.
    let factor = if factor.ty.dtype.is_complex() {
        e.real_part(&factor)
    } else {
        factor
    };
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

/// `x` broadcast to `shape` along new trailing dims (its dims lead).
pub(super) fn spread(e: &mut Emitter, x: &V, shape: &[i64]) -> V {
    e.broadcast_in_dim(x, shape, 0..x.ty.rank() as i64)
}

/// The sum over `dim` of `x` where `mask` holds, 0 elsewhere: with a one-hot
/// mask, the one row, column or element it names, exactly.
pub(super) fn pick(e: &mut Emitter, x: &V, mask: &V, dim: usize) -> V {
    let zero = e.splat(0, x);
    let kept = e.select(mask, x, &zero);
    e.reduce(&kept, Scalar::Int(0), "stablehlo.add", &[dim])
}

/// A 0-d int32 constant.
pub(super) fn int32(e: &mut Emitter, value: i64) -> V {
    e.scalar(value, DType::I32)
}

/// `step < limit`, the loops' condition.
pub(super) fn before(e: &mut Emitter, step: &V, limit: i64) -> V {
    let end = int32(e, limit);
    e.compare(Cmp::Lt, step, &end)
}

pub(super) fn lu(e: &mut Emitter, a: &V, output: LuOutput) -> V {
    let shape = a.ty.shape.clone();
    let r = shape.len();
    let (m, n) = (shape[r - 2], shape[r - 1]);
    let steps = m.min(n);
    let batch = &shape[..r - 2];
    let mut pivots_shape = batch.to_vec();
    pivots_shape.push(steps);
    let pivots0 = e.constant(Scalar::Int(0), TensorType::new(DType::I32, &pivots_shape));
    let info0 = e.constant(Scalar::Int(0), TensorType::new(DType::I32, batch));
    if a.ty.numel() == 0 {
        return match output {
            LuOutput::Factors => a.clone(),
            LuOutput::Pivots => pivots0,
            LuOutput::Info => info0,
        };
    }
    let step0 = int32(e, 0);
    let finals = e.while_op(
        &[&step0, a, &pivots0, &info0],
        |e, s| before(e, &s[0], steps),
        |e, s| {
            let (k, a, pivots, info) = (&s[0], &s[1], &s[2], &s[3]);
            let (row, col) = matrix_indices(e, a);
            let k_full = spread(e, k, &shape);
            let in_col_k = e.compare(Cmp::Eq, &col, &k_full);
            // The pivot: the first row at or below k of largest |a[., k]|.
            let col_k = pick(e, a, &in_col_k, r - 1);
            let rows = e.iota(col_k.ty.with_dtype(DType::I32), r - 2);
            let k_rows = spread(e, k, &col_k.ty.shape);
            let below = e.compare(Cmp::Ge, &rows, &k_rows);
            // Of a complex entry, |re| + |im|, as LAPACK's icamax measures
            // it (so the pivots are the CPU's).
            let size = if col_k.ty.dtype.is_complex() {
                let (re, im) = (e.real_part(&col_k), e.imag_part(&col_k));
                let (re, im) = (e.unary("stablehlo.abs", &re), e.unary("stablehlo.abs", &im));
                e.add(&re, &im)
            } else {
                e.unary("stablehlo.abs", &col_k)
            };
            let none = e.splat(-1, &size);
            let candidates = e.select(&below, &size, &none);
            let largest = e.reduce(
                &candidates,
                Scalar::Float(f64::NEG_INFINITY),
                "stablehlo.maximum",
                &[r - 2],
            );
            let largest_rows = spread(e, &largest, &col_k.ty.shape);
            let is_largest = e.compare(Cmp::Eq, &candidates, &largest_rows);
            let past_end = e.splat(m, &rows);
            let where_largest = e.select(&is_largest, &rows, &past_end);
            let p = e.reduce(
                &where_largest,
                Scalar::Int(m),
                "stablehlo.minimum",
                &[r - 2],
            );
            // Swap rows k and p.
            let p_full = spread(e, &p, &shape);
            let (is_k, is_p) = (
                e.compare(Cmp::Eq, &row, &k_full),
                e.compare(Cmp::Eq, &row, &p_full),
            );
            let row_k = pick(e, a, &is_k, r - 2);
            let row_p = pick(e, a, &is_p, r - 2);
            let (row_k_full, row_p_full) = (
                e.broadcast_in_dim(&row_k, &shape, (0..r as i64).filter(|&d| d != r as i64 - 2)),
                e.broadcast_in_dim(&row_p, &shape, (0..r as i64).filter(|&d| d != r as i64 - 2)),
            );
            let from_p = e.select(&is_p, &row_k_full, a);
            let swapped = e.select(&is_k, &row_p_full, &from_p);
            let at_k = at_last(e, pivots, k);
            let one = e.splat(1, &p);
            let p1 = e.add(&p, &one);
            let p1_steps = spread(e, &p1, &pivots.ty.shape);
            let pivots = e.select(&at_k, &p1_steps, pivots);
            // The pivot element; a zero one is recorded and eliminates nothing.
            let cols = e.iota(row_p.ty.with_dtype(DType::I32), r - 2);
            let k_cols = spread(e, k, &row_p.ty.shape);
            let is_k_col = e.compare(Cmp::Eq, &cols, &k_cols);
            let pivot = pick(e, &row_p, &is_k_col, r - 2);
            let zero = e.splat(0, &pivot);
            let singular = e.compare(Cmp::Eq, &pivot, &zero);
            let no_info = e.splat(0, info);
            let first = e.compare(Cmp::Eq, info, &no_info);
            let newly = e.binary("stablehlo.and", &singular, &first);
            let one_step = int32(e, 1);
            let k1 = e.add(k, &one_step);
            let k1_batch = spread(e, &k1, &info.ty.shape);
            let info = e.select(&newly, &k1_batch, info);
            let one_f = e.splat(1, &pivot);
            let divisor = e.select(&singular, &one_f, &pivot);
            // Multipliers below the pivot (0 for a zero pivot: its column is 0).
            let col_k = pick(e, &swapped, &in_col_k, r - 1);
            let divisor_rows = spread(e, &divisor, &col_k.ty.shape);
            let scaled = e.div(&col_k, &divisor_rows);
            let strictly_below = e.compare(Cmp::Gt, &rows, &k_rows);
            let no_multiplier = e.splat(0, &scaled);
            let multipliers = e.select(&strictly_below, &scaled, &no_multiplier);
            // The trailing update: a[i, j] -= l[i] * u[k, j] for j > k.
            let right = e.compare(Cmp::Gt, &cols, &k_cols);
            let no_u = e.splat(0, &row_p);
            let u_row = e.select(&right, &row_p, &no_u);
            let l_full = e.broadcast_in_dim(&multipliers, &shape, 0..r as i64 - 1);
            let u_full =
                e.broadcast_in_dim(&u_row, &shape, (0..r as i64).filter(|&d| d != r as i64 - 2));
            let update = e.mul(&l_full, &u_full);
            let updated = e.sub(&swapped, &update);
            let row_below = e.compare(Cmp::Gt, &row, &k_full);
            let stores_l = e.binary("stablehlo.and", &row_below, &in_col_k);
            let a = e.select(&stores_l, &l_full, &updated);
            vec![k1, a, pivots, info]
        },
    );
    match output {
        LuOutput::Factors => finals[1].clone(),
        LuOutput::Pivots => finals[2].clone(),
        LuOutput::Info => finals[3].clone(),
    }
}

/// `0..rows` with the pivots' swaps applied in order.
pub(super) fn lu_permutation(e: &mut Emitter, pivots: &V, out: TensorType) -> V {
    let r = out.rank();
    let steps = pivots.ty.shape[r - 1];
    let perm0 = e.iota(out.clone(), r - 1);
    if out.numel() == 0 || steps == 0 {
        return perm0;
    }
    let pivots = e.convert(pivots, DType::I32);
    let step0 = int32(e, 0);
    let finals = e.while_op(
        &[&step0, &perm0],
        |e, s| before(e, &s[0], steps),
        |e, s| {
            let (i, perm) = (&s[0], &s[1]);
            let at_i = at_last(e, &pivots, i);
            let target = pick(e, &pivots, &at_i, r - 1);
            let one = e.splat(1, &target);
            let p = e.sub(&target, &one);
            let places = e.iota(perm.ty.clone(), r - 1);
            let i_full = spread(e, i, &perm.ty.shape);
            let p_full = spread(e, &p, &perm.ty.shape);
            let (is_i, is_p) = (
                e.compare(Cmp::Eq, &places, &i_full),
                e.compare(Cmp::Eq, &places, &p_full),
            );
            let at_i_value = pick(e, perm, &is_i, r - 1);
            let at_p_value = pick(e, perm, &is_p, r - 1);
            let (vi, vp) = (
                spread(e, &at_i_value, &perm.ty.shape),
                spread(e, &at_p_value, &perm.ty.shape),
            );
            let from_p = e.select(&is_p, &vi, perm);
            let perm = e.select(&is_i, &vp, &from_p);
            let one_step = int32(e, 1);
            vec![e.add(i, &one_step), perm]
        },
    );
    finals[1].clone()
}

/// Dims of a rank-`r` shape but `skip`: where a tensor missing that dim
/// broadcasts along it.
fn all_but(r: usize, skip: usize) -> impl Iterator<Item = i64> {
    (0..r as i64).filter(move |&d| d != skip as i64)
}

pub(super) fn householder(e: &mut Emitter, a: &V, output: HouseholderOutput) -> V {
    let shape = a.ty.shape.clone();
    let r = shape.len();
    let steps = shape[r - 2].min(shape[r - 1]);
    let mut tau_shape = shape[..r - 2].to_vec();
    tau_shape.push(steps);
    let tau0 = e.constant(Scalar::Int(0), a.ty.with_shape(tau_shape.into()));
    if a.ty.numel() == 0 {
        return match output {
            HouseholderOutput::Factors => a.clone(),
            HouseholderOutput::Tau => tau0,
        };
    }
    let complex = a.ty.dtype.is_complex();
    let step0 = int32(e, 0);
    let finals = e.while_op(
        &[&step0, a, &tau0],
        |e, s| before(e, &s[0], steps),
        |e, s| {
            let (i, a, tau) = (&s[0], &s[1], &s[2]);
            let (row, col) = matrix_indices(e, a);
            let i_full = spread(e, i, &shape);
            let in_col_i = e.compare(Cmp::Eq, &col, &i_full);
            let column = pick(e, a, &in_col_i, r - 1);
            let rows = e.iota(column.ty.with_dtype(DType::I32), r - 2);
            let i_rows = spread(e, i, &column.ty.shape);
            let at = e.compare(Cmp::Eq, &rows, &i_rows);
            let below = e.compare(Cmp::Gt, &rows, &i_rows);
            // dlarfg (zlarfg): alpha the diagonal element, x the part below
            // it; beta = -sign(re alpha) |(alpha, x)| is real.
            let alpha = pick(e, &column, &at, r - 2);
            let no_column = e.splat(0, &column);
            let x = e.select(&below, &column, &no_column);
            let squares = squared_modulus(e, &x);
            let x_norm2 = e.reduce(&squares, Scalar::Int(0), "stablehlo.add", &[r - 2]);
            let zero_norm = e.splat(0, &x_norm2);
            let mut nothing_below = e.compare(Cmp::Eq, &x_norm2, &zero_norm);
            let re_alpha = if complex {
                let im_alpha = e.imag_part(&alpha);
                let real = e.compare(Cmp::Eq, &im_alpha, &zero_norm);
                nothing_below = e.binary("stablehlo.and", &nothing_below, &real);
                e.real_part(&alpha)
            } else {
                alpha.clone()
            };
            let alpha2 = squared_modulus(e, &alpha);
            let total = e.add(&alpha2, &x_norm2);
            let norm = e.unary("stablehlo.sqrt", &total);
            let minus_norm = e.unary("stablehlo.negate", &norm);
            let alpha_nonnegative = e.compare(Cmp::Ge, &re_alpha, &zero_norm);
            let reflected = e.select(&alpha_nonnegative, &minus_norm, &norm);
            let reflected = e.convert(&reflected, alpha.ty.dtype);
            let zero = e.splat(0, &alpha);
            let one = e.splat(1, &alpha);
            let beta = e.select(&nothing_below, &alpha, &reflected);
            let safe_beta = e.select(&nothing_below, &one, &beta);
            let beta_minus_alpha = e.sub(&beta, &alpha);
            let tau_ratio = e.div(&beta_minus_alpha, &safe_beta);
            let tau_i = e.select(&nothing_below, &zero, &tau_ratio);
            let alpha_minus_beta = e.sub(&alpha, &beta);
            let safe_denominator = e.select(&nothing_below, &one, &alpha_minus_beta);
            let inverse = e.div(&one, &safe_denominator);
            let scale = e.select(&nothing_below, &zero, &inverse);
            let scale_rows = spread(e, &scale, &column.ty.shape);
            let v_below = e.mul(&x, &scale_rows);
            let ones = e.splat(1, &column);
            let v = e.select(&at, &ones, &v_below);
            // The trailing columns get h^H = I - conj(tau) v v^H:
            // a -= conj(tau) v (v^H a).
            let v_full = e.broadcast_in_dim(&v, &shape, 0..r as i64 - 1);
            let v_conj = e.conj(&v_full);
            let weighted = e.mul(&v_conj, a);
            let w = e.reduce(&weighted, Scalar::Int(0), "stablehlo.add", &[r - 2]);
            let w_full = e.broadcast_in_dim(&w, &shape, all_but(r, r - 2));
            let tau_full = spread(e, &tau_i, &shape);
            let tau_conj = e.conj(&tau_full);
            let tau_v = e.mul(&tau_conj, &v_full);
            let update = e.mul(&tau_v, &w_full);
            let reduced = e.sub(a, &update);
            let right = e.compare(Cmp::Gt, &col, &i_full);
            let updated = e.select(&right, &reduced, a);
            // Column i: beta on the diagonal, the reflector's vector below.
            let beta_full = spread(e, &beta, &shape);
            let at_full = e.compare(Cmp::Eq, &row, &i_full);
            let below_full = e.compare(Cmp::Gt, &row, &i_full);
            let stored = e.select(&below_full, &v_full, &updated);
            let column_i = e.select(&at_full, &beta_full, &stored);
            let a = e.select(&in_col_i, &column_i, &updated);
            let at_step = at_last(e, tau, i);
            let tau_steps = spread(e, &tau_i, &tau.ty.shape);
            let tau = e.select(&at_step, &tau_steps, tau);
            let one_step = int32(e, 1);
            vec![e.add(i, &one_step), a, tau]
        },
    );
    match output {
        HouseholderOutput::Factors => finals[1].clone(),
        HouseholderOutput::Tau => finals[2].clone(),
    }
}

/// `c` times q (or q^T) of the reflectors in `a`'s columns and `tau`, from
/// the left or the right: each `h_i = I - tau_i v_i v_i^T` in turn.
pub(super) fn apply_householder(e: &mut Emitter, inputs: &[V], left: bool, transpose: bool) -> V {
    let (a, tau, c) = (&inputs[0], &inputs[1], &inputs[2]);
    let r = a.ty.rank();
    let steps = tau.ty.shape[r - 2];
    if c.ty.numel() == 0 || steps == 0 {
        return c.clone();
    }
    // q = h_0 ... h_{k-1}: q^T c and c q take the reflectors in order.
    let ascending = left == transpose;
    let c_shape = c.ty.shape.clone();
    // Where c's m dim is, and the dims v broadcasts along in c's shape.
    let (m_dim, other_dim) = if left { (r - 2, r - 1) } else { (r - 1, r - 2) };
    let step0 = int32(e, 0);
    let finals = e.while_op(
        &[&step0, c],
        |e, s| before(e, &s[0], steps),
        |e, s| {
            let (j, c) = (&s[0], &s[1]);
            let i = if ascending {
                j.clone()
            } else {
                let last = int32(e, steps - 1);
                e.sub(&last, j)
            };
            let (_, col) = matrix_indices(e, a);
            let i_a = spread(e, &i, &a.ty.shape);
            let in_col_i = e.compare(Cmp::Eq, &col, &i_a);
            let column = pick(e, a, &in_col_i, r - 1);
            let rows = e.iota(column.ty.with_dtype(DType::I32), r - 2);
            let i_rows = spread(e, &i, &column.ty.shape);
            let at = e.compare(Cmp::Eq, &rows, &i_rows);
            let below = e.compare(Cmp::Gt, &rows, &i_rows);
            let zeros = e.splat(0, &column);
            let ones = e.splat(1, &column);
            let below_part = e.select(&below, &column, &zeros);
            let v = e.select(&at, &ones, &below_part);
            let at_step = at_last(e, tau, &i);
            let tau_i = pick(e, tau, &at_step, r - 2);
            // h = I - tau v v^H (its adjoint with `transpose`: conj(tau)).
            // From the left, w = v^H c and c -= tau v w; from the right,
            // w = c v and c -= tau w v^H. w sums over c's m dim.
            let v_full = e.broadcast_in_dim(&v, &c_shape, all_but(r, other_dim));
            let v_conj = e.conj(&v_full);
            let (v_in_w, v_in_update) = if left {
                (&v_conj, &v_full)
            } else {
                (&v_full, &v_conj)
            };
            let weighted = e.mul(v_in_w, c);
            let w = e.reduce(&weighted, Scalar::Int(0), "stablehlo.add", &[m_dim]);
            let w_full = e.broadcast_in_dim(&w, &c_shape, all_but(r, m_dim));
            let tau_full = spread(e, &tau_i, &c_shape);
            let tau_full = if transpose {
                e.conj(&tau_full)
            } else {
                tau_full
            };
            let tau_v = e.mul(&tau_full, v_in_update);
            let update = e.mul(&tau_v, &w_full);
            let one_step = int32(e, 1);
            vec![e.add(j, &one_step), e.sub(c, &update)]
        },
    );
    finals[1].clone()
}

/// `|x|^2`, in `x`'s real dtype.
fn squared_modulus(e: &mut Emitter, x: &V) -> V {
    if !x.ty.dtype.is_complex() {
        return e.mul(x, x);
    }
    let (re, im) = (e.real_part(x), e.imag_part(x));
    let (re2, im2) = (e.mul(&re, &re), e.mul(&im, &im));
    e.add(&re2, &im2)
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
    use crate::op::{EighOutput, Op};
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

    #[test]
    fn eigh_is_xlas_custom_call_with_its_configuration() {
        let a = TensorType::new(DType::F32, &[2, 3, 3]);
        let op = |output| Op::Eigh {
            lower: false,
            output,
        };
        let text = lowered(op(EighOutput::Values), std::slice::from_ref(&a));
        assert!(
            text.contains(
                "call_target_name = \"Eigh\", backend_config = \"0,1,100,1.1920928955078125e-7\""
            ),
            "{text}"
        );
        assert!(
            text.contains("-> (tensor<2x3x3xf32>, tensor<2x3xf32>)"),
            "{text}"
        );
        // An empty batch needs no decomposition.
        let empty = TensorType::new(DType::F64, &[0, 3, 3]);
        let text = lowered(op(EighOutput::Values), &[empty]);
        assert!(!text.contains("Eigh"), "{text}");
    }
}
