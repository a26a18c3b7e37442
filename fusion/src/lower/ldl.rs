//! The symmetric indefinite factorization of `torch.linalg.ldl_factor` and
//! its solve, as LAPACK computes them (`sytf2`, `sytrs`; lower triangle),
//! each a `stablehlo.while`:
//!
//! - Ldl: Bunch-Kaufman pivoting. Each step takes a 1x1 pivot (the diagonal
//!   element, or the one it is swapped with) or a 2x2 block, by LAPACK's
//!   tests with `alpha = (1 + sqrt(17)) / 8`, so each matrix of a batch has
//!   its own step `k`: the loop carries `k` per matrix and runs `n` times
//!   (every step takes one or two columns), a matrix that is done ignoring
//!   the rest. The working matrix is kept whole and symmetric (from `a`'s
//!   lower triangle): a swap of rows and columns is two masked swaps of the
//!   trailing block (LAPACK swaps nothing left of column `k`: L's columns
//!   keep the rows they were computed in, which `sytrs` expects), and every
//!   update is computed for the lower element with LAPACK's products and
//!   mirrored, so both triangles stay equal bit for bit. A zero column is
//!   recorded in `info` and eliminates nothing, as LAPACK. (LAPACK divides
//!   instead of multiplying by the reciprocal for pivots below the smallest
//!   normal number; not done here.)
//! - LdlSolve: `L D L^T x = b` as `sytrs`: a forward loop applying each
//!   step's swap, L's column(s) and D's block, then a backward loop with L^T
//!   and the swaps in reverse. Sums over a column are masked reductions.

use super::linalg::{at_last, before, int32, matrix_indices, pick, spread};
use super::{Cmp, Emitter, V};
use crate::dtype::DType;
use crate::op::LuOutput;
use crate::scalar::Scalar;
use crate::shape::TensorType;

/// Bunch and Kaufman's constant, rounded in the working precision as LAPACK
/// computes it.
fn alpha(dtype: DType) -> f64 {
    match dtype {
        DType::F32 => f64::from((1.0f32 + 17.0f32.sqrt()) / 8.0),
        _ => (1.0 + 17.0f64.sqrt()) / 8.0,
    }
}

/// Index tensors of one loop step over matrices of `shape` [..., n, c]:
/// the batch's per-matrix `k` spread to the matrices and to vectors.
struct Grid {
    shape: Vec<i64>,
    r: usize,
    row: V,
    col: V,
}

impl Grid {
    fn new(e: &mut Emitter, like: &V) -> Grid {
        let (row, col) = matrix_indices(e, like);
        Grid {
            shape: like.ty.shape.to_vec(),
            r: like.ty.rank(),
            row,
            col,
        }
    }

    /// `x` [..., n] (by row) as the matrices' `x[i]` at every (i, j).
    fn by_row(&self, e: &mut Emitter, x: &V) -> V {
        e.broadcast_in_dim(x, &self.shape, 0..self.r as i64 - 1)
    }

    /// `x` [..., c] (by column) as `x[j]` at every (i, j).
    fn by_col(&self, e: &mut Emitter, x: &V) -> V {
        let r = self.r as i64;
        e.broadcast_in_dim(x, &self.shape, (0..r).filter(|&d| d != r - 2))
    }

    /// Row `i` (per matrix, [...]) of `m`, as [..., c].
    fn row_of(&self, e: &mut Emitter, m: &V, i: &V) -> V {
        let i = spread(e, i, &self.shape);
        let mask = e.compare(Cmp::Eq, &self.row, &i);
        pick(e, m, &mask, self.r - 2)
    }

    /// Column `j` (per matrix) of `m`, as [..., n].
    fn col_of(&self, e: &mut Emitter, m: &V, j: &V) -> V {
        let j = spread(e, j, &self.shape);
        let mask = e.compare(Cmp::Eq, &self.col, &j);
        pick(e, m, &mask, self.r - 1)
    }

    /// Where the row index compares to `k` (per matrix) as `dir` says.
    fn rows(&self, e: &mut Emitter, dir: Cmp, k: &V) -> V {
        let k = spread(e, k, &self.shape);
        e.compare(dir, &self.row, &k)
    }

    fn cols(&self, e: &mut Emitter, dir: Cmp, k: &V) -> V {
        let k = spread(e, k, &self.shape);
        e.compare(dir, &self.col, &k)
    }

    /// Row (or column) `i` of `m` spread back over the matrices.
    fn line(&self, e: &mut Emitter, m: &V, axis: Axis, i: &V) -> V {
        match axis {
            Axis::Row => {
                let row = self.row_of(e, m, i);
                self.by_col(e, &row)
            }
            Axis::Col => {
                let col = self.col_of(e, m, i);
                self.by_row(e, &col)
            }
        }
    }

    /// `m` with rows (or columns) `p` and `q` (per matrix) swapped, only
    /// where `within` holds if given.
    fn swap(&self, e: &mut Emitter, m: &V, axis: Axis, (p, q): (&V, &V), within: Option<&V>) -> V {
        let (line_p, line_q) = (self.line(e, m, axis, p), self.line(e, m, axis, q));
        let mut at = |i: &V| {
            let on = match axis {
                Axis::Row => self.rows(e, Cmp::Eq, i),
                Axis::Col => self.cols(e, Cmp::Eq, i),
            };
            match within {
                Some(w) => and(e, &on, w),
                None => on,
            }
        };
        let (at_p, at_q) = (at(p), at(q));
        let to_q = e.select(&at_q, &line_p, m);
        e.select(&at_p, &line_q, &to_q)
    }
}

#[derive(Clone, Copy)]
enum Axis {
    Row,
    Col,
}

fn and(e: &mut Emitter, a: &V, b: &V) -> V {
    e.binary("stablehlo.and", a, b)
}

fn or(e: &mut Emitter, a: &V, b: &V) -> V {
    e.binary("stablehlo.or", a, b)
}

fn not(e: &mut Emitter, a: &V) -> V {
    e.unary("stablehlo.not", a)
}

/// Element `i` (per matrix, [...]) of vectors `v` [..., n].
fn element(e: &mut Emitter, v: &V, i: &V) -> V {
    let mask = at_last(e, v, i);
    pick(e, v, &mask, v.ty.rank() - 1)
}

/// `v` [..., n] with element `i` (per matrix) set to `value` [...] where
/// `when` [...] holds.
fn set_element(e: &mut Emitter, v: &V, i: &V, value: &V, when: &V) -> V {
    let at = at_last(e, v, i);
    let when = spread(e, when, &v.ty.shape);
    let at = and(e, &at, &when);
    let value = spread(e, value, &v.ty.shape);
    e.select(&at, &value, v)
}

/// The largest of `x` [..., n] where `mask` holds (-1 where it never does),
/// and the first index holding it.
fn largest(e: &mut Emitter, x: &V, mask: &V) -> (V, V) {
    let r = x.ty.rank();
    let size = e.unary("stablehlo.abs", x);
    let none = e.splat(-1, &size);
    let candidates = e.select(mask, &size, &none);
    let most = e.reduce(
        &candidates,
        Scalar::Float(f64::NEG_INFINITY),
        "stablehlo.maximum",
        &[r - 1],
    );
    let index = e.iota(x.ty.with_dtype(DType::I32), r - 1);
    let most_full = spread(e, &most, &x.ty.shape);
    let is_most = e.compare(Cmp::Eq, &candidates, &most_full);
    let n = x.ty.shape[r - 1];
    let past_end = e.splat(n, &index);
    let where_most = e.select(&is_most, &index, &past_end);
    let first = e.reduce(&where_most, Scalar::Int(n), "stablehlo.minimum", &[r - 1]);
    (most, first)
}

pub(super) fn ldl(e: &mut Emitter, a: &V, output: LuOutput) -> V {
    let shape = a.ty.shape.to_vec();
    let r = shape.len();
    let n = shape[r - 1];
    let batch = TensorType::new(DType::I32, &shape[..r - 2]);
    let pivots0 = e.constant(Scalar::Int(0), TensorType::new(DType::I32, &shape[..r - 1]));
    let info0 = e.constant(Scalar::Int(0), batch.clone());
    if a.ty.numel() == 0 {
        return match output {
            LuOutput::Factors => a.clone(),
            LuOutput::Pivots => pivots0,
            LuOutput::Info => info0,
        };
    }
    let (row, col) = matrix_indices(e, a);
    let lower = e.compare(Cmp::Ge, &row, &col);
    let mut perm: Vec<usize> = (0..r).collect();
    perm.swap(r - 2, r - 1);
    let upper_from_lower = e.transpose(a, &perm);
    let s0 = e.select(&lower, a, &upper_from_lower);
    let k0 = e.constant(Scalar::Int(0), batch.clone());
    let step0 = int32(e, 0);
    let alpha = alpha(a.ty.dtype);
    let finals = e.while_op(
        &[&step0, &k0, &s0, &pivots0, &info0],
        |e, s| before(e, &s[0], n),
        |e, s| {
            let (step, k, m, pivots, info) = (&s[0], &s[1], &s[2], &s[3], &s[4]);
            let g = Grid::new(e, m);
            let n_batch = e.splat(n, k);
            let active = e.compare(Cmp::Lt, k, &n_batch);
            let one = e.splat(1, k);
            let two = e.splat(2, k);
            let k1 = e.add(k, &one);

            // Pivot search: column k below the diagonal, then row imax.
            let col_k = g.col_of(e, m, k);
            let akk = element(e, &col_k, k);
            let absakk = e.unary("stablehlo.abs", &akk);
            let index = e.iota(col_k.ty.with_dtype(DType::I32), r - 2);
            let k_vec = spread(e, k, &col_k.ty.shape);
            let below_k = e.compare(Cmp::Gt, &index, &k_vec);
            let (colmax, imax) = largest(e, &col_k, &below_k);
            let zero = e.splat(0, &absakk);
            let colmax = e.binary("stablehlo.maximum", &colmax, &zero);
            let biggest = e.binary("stablehlo.maximum", &absakk, &colmax);
            let zero_column = e.compare(Cmp::Eq, &biggest, &zero);
            let nan = e.is_nan(&absakk);
            let zero_column = or(e, &zero_column, &nan);
            let row_imax = g.row_of(e, m, &imax);
            let imax_vec = spread(e, &imax, &col_k.ty.shape);
            let not_imax = e.compare(Cmp::Ne, &index, &imax_vec);
            let from_k = e.compare(Cmp::Ge, &index, &k_vec);
            let off_diagonal = and(e, &from_k, &not_imax);
            let (rowmax, _) = largest(e, &row_imax, &off_diagonal);
            let aii = element(e, &row_imax, &imax);
            let aii = e.unary("stablehlo.abs", &aii);
            let alpha_v = e.splat(alpha, &absakk);
            let a_colmax = e.mul(&alpha_v, &colmax);
            let c1 = e.compare(Cmp::Ge, &absakk, &a_colmax);
            let ratio = e.div(&colmax, &rowmax);
            let a_colmax_ratio = e.mul(&a_colmax, &ratio);
            let c2 = e.compare(Cmp::Ge, &absakk, &a_colmax_ratio);
            let a_rowmax = e.mul(&alpha_v, &rowmax);
            let c3 = e.compare(Cmp::Ge, &aii, &a_rowmax);
            let keep_k = or(e, &c1, &c2);
            let keep_k = or(e, &keep_k, &zero_column);
            let not_c3 = not(e, &c3);
            let not_keep = not(e, &keep_k);
            let block = and(e, &not_keep, &not_c3);
            let kstep = e.select(&block, &two, &one);
            let kp = e.select(&keep_k, k, &imax);
            let kk = e.select(&block, &k1, k);

            // Swap rows and columns kk and kp of the trailing block.
            let trailing_rows = g.rows(e, Cmp::Ge, k);
            let trailing_cols = g.cols(e, Cmp::Ge, k);
            let m1 = g.swap(e, m, Axis::Row, (&kk, &kp), Some(&trailing_cols));
            let w = g.swap(e, &m1, Axis::Col, (&kk, &kp), Some(&trailing_rows));

            // A 1x1 pivot: w[i, j] += x[i] * (-d11 * x[j]) for i >= j > k
            // (mirrored above), then column k scaled by d11.
            let x = g.col_of(e, &w, k);
            let wkk = element(e, &x, k);
            let one_f = e.splat(1, &wkk);
            let d11 = e.div(&one_f, &wkk);
            let neg_d11 = e.unary("stablehlo.negate", &d11);
            let (x_i, x_j) = (g.by_row(e, &x), g.by_col(e, &x));
            let neg_full = spread(e, &neg_d11, &shape);
            let t_j = e.mul(&neg_full, &x_j);
            let t_i = e.mul(&neg_full, &x_i);
            let lower_update = e.mul(&x_i, &t_j);
            let upper_update = e.mul(&x_j, &t_i);
            let update = e.select(&lower, &lower_update, &upper_update);
            let updated = e.add(&w, &update);
            let after_k_rows = g.rows(e, Cmp::Gt, k);
            let after_k_cols = g.cols(e, Cmp::Gt, k);
            let after_k = and(e, &after_k_rows, &after_k_cols);
            let one_by_one = e.select(&after_k, &updated, &w);
            let d11_full = spread(e, &d11, &shape);
            let scaled = e.mul(&x_i, &d11_full);
            let at_col_k = g.cols(e, Cmp::Eq, k);
            let l_column = and(e, &at_col_k, &after_k_rows);
            let one_by_one = e.select(&l_column, &scaled, &one_by_one);

            // A 2x2 block at k, k + 1 (LAPACK's names).
            let y = g.col_of(e, &w, &k1);
            let d21 = element(e, &x, &k1);
            let a11 = element(e, &y, &k1);
            let a00 = element(e, &x, k);
            let d11 = e.div(&a11, &d21);
            let d22 = e.div(&a00, &d21);
            let prod = e.mul(&d11, &d22);
            let one_b = e.splat(1, &prod);
            let denom = e.sub(&prod, &one_b);
            let t = e.div(&one_b, &denom);
            let d21 = e.div(&t, &d21);
            let vec_shape = &x.ty.shape;
            let (d11_v, d22_v, d21_v) = (
                spread(e, &d11, vec_shape),
                spread(e, &d22, vec_shape),
                spread(e, &d21, vec_shape),
            );
            let d11x = e.mul(&d11_v, &x);
            let wk = e.sub(&d11x, &y);
            let wk = e.mul(&d21_v, &wk);
            let d22y = e.mul(&d22_v, &y);
            let wkp1 = e.sub(&d22y, &x);
            let wkp1 = e.mul(&d21_v, &wkp1);
            let (y_i, y_j) = (g.by_row(e, &y), g.by_col(e, &y));
            let (wk_i, wk_j) = (g.by_row(e, &wk), g.by_col(e, &wk));
            let (wkp1_i, wkp1_j) = (g.by_row(e, &wkp1), g.by_col(e, &wkp1));
            let lower_first = e.mul(&x_i, &wk_j);
            let lower_second = e.mul(&y_i, &wkp1_j);
            let lower_value = e.sub(&w, &lower_first);
            let lower_value = e.sub(&lower_value, &lower_second);
            let upper_first = e.mul(&x_j, &wk_i);
            let upper_second = e.mul(&y_j, &wkp1_i);
            let upper_value = e.sub(&w, &upper_first);
            let upper_value = e.sub(&upper_value, &upper_second);
            let block_value = e.select(&lower, &lower_value, &upper_value);
            let after_block_rows = g.rows(e, Cmp::Gt, &k1);
            let after_block_cols = g.cols(e, Cmp::Gt, &k1);
            let after_block = and(e, &after_block_rows, &after_block_cols);
            let two_by_two = e.select(&after_block, &block_value, &w);
            let first_column = and(e, &at_col_k, &after_block_rows);
            let two_by_two = e.select(&first_column, &wk_i, &two_by_two);
            let at_col_k1 = g.cols(e, Cmp::Eq, &k1);
            let second_column = and(e, &at_col_k1, &after_block_rows);
            let two_by_two = e.select(&second_column, &wkp1_i, &two_by_two);

            let block_full = spread(e, &block, &shape);
            let stepped = e.select(&block_full, &two_by_two, &one_by_one);
            let nonzero_column = not(e, &zero_column);
            let eliminates = and(e, &active, &nonzero_column);
            let eliminates_full = spread(e, &eliminates, &shape);
            let m = e.select(&eliminates_full, &stepped, m);

            // Pivots (1-based; a block's two steps both -(kp + 1)) and info.
            let kp1 = e.add(&kp, &one);
            let negative = e.unary("stablehlo.negate", &kp1);
            let pivot = e.select(&block, &negative, &kp1);
            let pivots = set_element(e, pivots, k, &pivot, &active);
            let second = and(e, &active, &block);
            let pivots = set_element(e, &pivots, &k1, &pivot, &second);
            let no_info = e.splat(0, info);
            let first = e.compare(Cmp::Eq, info, &no_info);
            let newly = and(e, &active, &zero_column);
            let newly = and(e, &newly, &first);
            let info = e.select(&newly, &k1, info);
            let next = e.add(k, &kstep);
            let k = e.select(&active, &next, k);
            let one_step = int32(e, 1);
            let step = e.add(step, &one_step);
            vec![step, k, m, pivots, info]
        },
    );
    match output {
        LuOutput::Factors => {
            let zero = e.splat(0, &finals[2]);
            e.select(&lower, &finals[2], &zero)
        }
        LuOutput::Pivots => finals[3].clone(),
        LuOutput::Info => finals[4].clone(),
    }
}

/// Per matrix, whether step `k`'s pivot is a 2x2 block's, and the row it
/// was swapped with (0-based).
fn pivot_at(e: &mut Emitter, pivots: &V, k: &V) -> (V, V) {
    let p = element(e, pivots, k);
    let zero = e.splat(0, &p);
    let block = e.compare(Cmp::Lt, &p, &zero);
    let one = e.splat(1, &p);
    let negated = e.unary("stablehlo.negate", &p);
    let swapped = e.select(&block, &negated, &p);
    (block, e.sub(&swapped, &one))
}

pub(super) fn ldl_solve(e: &mut Emitter, inputs: &[V]) -> V {
    let (a, pivots, b) = (&inputs[0], &inputs[1], &inputs[2]);
    if b.ty.numel() == 0 {
        return b.clone();
    }
    let r = a.ty.rank();
    let n = a.ty.shape[r - 1];
    let batch = TensorType::new(DType::I32, &a.ty.shape[..r - 2]);
    let b_shape = b.ty.shape.to_vec();
    let step0 = int32(e, 0);

    // L D y = b: k ascending.
    let k0 = e.constant(Scalar::Int(0), batch.clone());
    let forward = e.while_op(
        &[&step0, &k0, b],
        |e, s| before(e, &s[0], n),
        |e, s| {
            let (step, k, x) = (&s[0], &s[1], &s[2]);
            let ga = Grid::new(e, a);
            let gb = Grid::new(e, x);
            let n_batch = e.splat(n, k);
            let active = e.compare(Cmp::Lt, k, &n_batch);
            let one = e.splat(1, k);
            let k1 = e.add(k, &one);
            let (block, kp) = pivot_at(e, pivots, k);
            let kk = e.select(&block, &k1, k);
            let x = gb.swap(e, x, Axis::Row, (&kk, &kp), None);
            // x[i] -= l[i, k] x[k] (and l[i, k + 1] x[k + 1]) below the step.
            let l0 = ga.col_of(e, a, k);
            let l1 = ga.col_of(e, a, &k1);
            let (x0, x1) = (gb.row_of(e, &x, k), gb.row_of(e, &x, &k1));
            let (l0_i, l1_i) = (gb.by_row(e, &l0), gb.by_row(e, &l1));
            let (x0_j, x1_j) = (gb.by_col(e, &x0), gb.by_col(e, &x1));
            let neg_x0 = e.unary("stablehlo.negate", &x0_j);
            let neg_x1 = e.unary("stablehlo.negate", &x1_j);
            let first = e.mul(&l0_i, &neg_x0);
            let after_first = e.add(&x, &first);
            let second = e.mul(&l1_i, &neg_x1);
            let after_second = e.add(&after_first, &second);
            let below_k = gb.rows(e, Cmp::Gt, k);
            let below_k1 = gb.rows(e, Cmp::Gt, &k1);
            let single = e.select(&below_k, &after_first, &x);
            let double = e.select(&below_k1, &after_second, &x);
            // D's block: x[k] / d (1x1), or LAPACK's 2x2 solve.
            let a00 = element(e, &l0, k);
            let a10 = element(e, &l0, &k1);
            let a11 = element(e, &l1, &k1);
            let one_f = e.splat(1, &a00);
            let reciprocal = e.div(&one_f, &a00);
            let reciprocal = spread(e, &reciprocal, &b_shape);
            let scaled = e.mul(&single, &reciprocal);
            let at_k = gb.rows(e, Cmp::Eq, k);
            let single = e.select(&at_k, &scaled, &single);
            let akm1 = e.div(&a00, &a10);
            let ak = e.div(&a11, &a10);
            let prod = e.mul(&akm1, &ak);
            let denom = e.sub(&prod, &one_f);
            let cols = &x0.ty.shape;
            let (a10_j, akm1_j, ak_j, denom_j) = (
                spread(e, &a10, cols),
                spread(e, &akm1, cols),
                spread(e, &ak, cols),
                spread(e, &denom, cols),
            );
            let (b0, b1) = (gb.row_of(e, &double, k), gb.row_of(e, &double, &k1));
            let bkm1 = e.div(&b0, &a10_j);
            let bk = e.div(&b1, &a10_j);
            let t0 = e.mul(&ak_j, &bkm1);
            let t0 = e.sub(&t0, &bk);
            let new0 = e.div(&t0, &denom_j);
            let t1 = e.mul(&akm1_j, &bk);
            let t1 = e.sub(&t1, &bkm1);
            let new1 = e.div(&t1, &denom_j);
            let (new0, new1) = (gb.by_col(e, &new0), gb.by_col(e, &new1));
            let at_k1 = gb.rows(e, Cmp::Eq, &k1);
            let double = e.select(&at_k, &new0, &double);
            let double = e.select(&at_k1, &new1, &double);
            let block_full = spread(e, &block, &b_shape);
            let stepped = e.select(&block_full, &double, &single);
            let active_full = spread(e, &active, &b_shape);
            let x = e.select(&active_full, &stepped, &x);
            let two = e.splat(2, k);
            let kstep = e.select(&block, &two, &one);
            let next = e.add(k, &kstep);
            let k = e.select(&active, &next, k);
            let one_step = int32(e, 1);
            vec![e.add(step, &one_step), k, x]
        },
    );

    // L^T x = y: k descending.
    let k0 = e.constant(Scalar::Int(n - 1), batch);
    let backward = e.while_op(
        &[&step0, &k0, &forward[2]],
        |e, s| before(e, &s[0], n),
        |e, s| {
            let (step, k, x) = (&s[0], &s[1], &s[2]);
            let ga = Grid::new(e, a);
            let gb = Grid::new(e, x);
            let zero = e.splat(0, k);
            let active = e.compare(Cmp::Ge, k, &zero);
            let one = e.splat(1, k);
            let km1 = e.sub(k, &one);
            let (block, kp) = pivot_at(e, pivots, k);
            // x[k] -= l[., k] . x[below k] (and x[k - 1] with l[., k - 1]).
            let below = gb.rows(e, Cmp::Gt, k);
            let zero_x = e.splat(0, x);
            let x_below = e.select(&below, x, &zero_x);
            let dot = |e: &mut Emitter, j: &V| {
                let l = ga.col_of(e, a, j);
                let l_i = gb.by_row(e, &l);
                let terms = e.mul(&l_i, &x_below);
                let sum = e.reduce(&terms, Scalar::Int(0), "stablehlo.add", &[r - 2]);
                gb.by_col(e, &sum)
            };
            let dot_k = dot(e, k);
            let dot_km1 = dot(e, &km1);
            let at_k = gb.rows(e, Cmp::Eq, k);
            let at_km1 = gb.rows(e, Cmp::Eq, &km1);
            let minus_k = e.sub(x, &dot_k);
            let minus_km1 = e.sub(x, &dot_km1);
            let updated = e.select(&at_k, &minus_k, x);
            let block_full = spread(e, &block, &b_shape);
            let in_block = and(e, &at_km1, &block_full);
            let updated = e.select(&in_block, &minus_km1, &updated);
            let swapped = gb.swap(e, &updated, Axis::Row, (k, &kp), None);
            let active_full = spread(e, &active, &b_shape);
            let x = e.select(&active_full, &swapped, x);
            let two = e.splat(2, k);
            let kstep = e.select(&block, &two, &one);
            let next = e.sub(k, &kstep);
            let k = e.select(&active, &next, k);
            let one_step = int32(e, 1);
            vec![e.add(step, &one_step), k, x]
        },
    );
    backward[2].clone()
}
