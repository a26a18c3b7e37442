//! `torch.linalg`'s entry points: the factorizations (Cholesky, LU,
//! Householder QR, the symmetric eigendecomposition, the SVD) and the solves
//! made of them. Each writes its results to out-pointers; the ones a caller
//! may not want can be NULL where said.

use std::ffi::c_char;

use crate::handles::{get, put_pair, put_tensor};
use crate::types::TensorHandle;
use crate::{Failure, at, c_api};

c_api! {
    /// The Cholesky factor of `a` (square matrices [..., n, n]; lower unless
    /// `upper`) to `factor` and, unless `info` is NULL, int32 [...] to
    /// `info`: 0 per matrix that is positive-definite, else the order of its
    /// first leading minor that is not (`torch.linalg.cholesky_ex`).
    fn etpu_cholesky(a: TensorHandle, upper: bool, origin: *const c_char, factor: *mut TensorHandle, info: *mut TensorHandle) {
        let a = get(a, "a")?;
        // SAFETY: strings and pointers as documented.
        unsafe {
            let pair = at(origin, || a.cholesky_ex(upper))?;
            put_pair(factor, info, pair)
        }
    }

    /// x with `op(a) @ x == b` (`left`) or `x @ op(a) == b`: `a` triangular
    /// (upper or lower as `upper` says; the other triangle never read),
    /// `op(a)` its transpose with `transpose`, its diagonal ones with
    /// `unit_diagonal`. Batch dims broadcast.
    fn etpu_solve_triangular(
        a: TensorHandle,
        b: TensorHandle,
        upper: bool,
        left: bool,
        unit_diagonal: bool,
        transpose: bool,
        origin: *const c_char,
        out: *mut TensorHandle,
    ) {
        let (a, b) = (get(a, "a")?, get(b, "b")?);
        // SAFETY: strings and pointers as documented.
        unsafe {
            let t = at(origin, || a.solve_triangular(&b, upper, left, unit_diagonal, transpose))?;
            put_tensor(out, t)
        }
    }

    /// LU factorization with partial pivoting of `a` ([..., m, n]): the
    /// factors (L below the diagonal, U on and above) to `factors`, int32
    /// 1-based pivots [..., min(m, n)] to `pivots` and, unless `info` is
    /// NULL, int32 [...] to `info` (0, or the step of the first zero pivot).
    fn etpu_lu_factor(a: TensorHandle, origin: *const c_char, factors: *mut TensorHandle, pivots: *mut TensorHandle, info: *mut TensorHandle) {
        let a = get(a, "a")?;
        if pivots.is_null() {
            return Err(Failure::invalid("pivots is NULL"));
        }
        // SAFETY: strings and pointers as documented.
        unsafe {
            let (lu, p, i) = at(origin, || a.lu_factor_ex())?;
            put_pair(factors, info, (lu, i))?;
            put_tensor(pivots, p)
        }
    }

    /// The permutation LU `pivots` ([..., k], 1-based) make of `0..rows`,
    /// int32 [..., rows]: `a[perm] == l @ u`.
    fn etpu_lu_permutation(pivots: TensorHandle, rows: i64, origin: *const c_char, out: *mut TensorHandle) {
        let p = get(pivots, "pivots")?;
        // SAFETY: strings and pointers as documented.
        unsafe {
            let t = at(origin, || p.lu_permutation(rows))?;
            put_tensor(out, t)
        }
    }

    /// x with `a @ x == b` (`left`) or `x @ a == b` (of `a`'s transpose with
    /// `adjoint`) from `a`'s LU `factors` and `pivots`. Batch dims broadcast.
    fn etpu_lu_solve(
        factors: TensorHandle,
        pivots: TensorHandle,
        b: TensorHandle,
        left: bool,
        adjoint: bool,
        origin: *const c_char,
        out: *mut TensorHandle,
    ) {
        let (lu, p, b) = (get(factors, "factors")?, get(pivots, "pivots")?, get(b, "b")?);
        // SAFETY: strings and pointers as documented.
        unsafe {
            let t = at(origin, || lu.lu_solve(&p, &b, left, adjoint))?;
            put_tensor(out, t)
        }
    }

    /// LDL^T factorization with Bunch-Kaufman pivoting of symmetric `a`
    /// ([..., n, n], only its lower triangle read; LAPACK's `sytrf`): L and
    /// D's blocks to `factors` (zeros above the diagonal), int32 1-based
    /// pivots [..., n] to `pivots` (a 2x2 block's two steps both negative)
    /// and, unless `info` is NULL, int32 [...] to `info` (0, or the step of
    /// the first zero column).
    fn etpu_ldl_factor(a: TensorHandle, origin: *const c_char, factors: *mut TensorHandle, pivots: *mut TensorHandle, info: *mut TensorHandle) {
        let a = get(a, "a")?;
        if pivots.is_null() {
            return Err(Failure::invalid("pivots is NULL"));
        }
        // SAFETY: strings and pointers as documented.
        unsafe {
            let (ld, p, i) = at(origin, || a.ldl_factor_ex())?;
            put_pair(factors, info, (ld, i))?;
            put_tensor(pivots, p)
        }
    }

    /// x solving a x = b from a's LDL `factors` and `pivots`
    /// (`etpu_ldl_factor`'s); b [..., n, k]; batch dims broadcast.
    fn etpu_ldl_solve(factors: TensorHandle, pivots: TensorHandle, b: TensorHandle, origin: *const c_char, out: *mut TensorHandle) {
        let (ld, p, b) = (get(factors, "factors")?, get(pivots, "pivots")?, get(b, "b")?);
        // SAFETY: strings and pointers as documented.
        unsafe {
            let t = at(origin, || ld.ldl_solve(&p, &b))?;
            put_tensor(out, t)
        }
    }

    /// Householder QR of `a` ([..., m, n], LAPACK's `geqrf`): R and the
    /// reflectors' vectors to `factors`, their scales [..., min(m, n)] to
    /// `tau`.
    fn etpu_geqrf(a: TensorHandle, origin: *const c_char, factors: *mut TensorHandle, tau: *mut TensorHandle) {
        let a = get(a, "a")?;
        if tau.is_null() {
            return Err(Failure::invalid("tau is NULL"));
        }
        // SAFETY: strings and pointers as documented.
        unsafe {
            let pair = at(origin, || a.geqrf())?;
            put_pair(factors, tau, pair)
        }
    }

    /// `c` multiplied by q of the reflectors in `reflectors`' columns and
    /// `tau` (LAPACK's `ormqr`): `q @ c` (`left`) or `c @ q`, of q^T with
    /// `transpose`.
    fn etpu_ormqr(
        reflectors: TensorHandle,
        tau: TensorHandle,
        c: TensorHandle,
        left: bool,
        transpose: bool,
        origin: *const c_char,
        out: *mut TensorHandle,
    ) {
        let (a, t, c) = (get(reflectors, "reflectors")?, get(tau, "tau")?, get(c, "c")?);
        // SAFETY: strings and pointers as documented.
        unsafe {
            let r = at(origin, || a.ormqr(&t, &c, left, transpose))?;
            put_tensor(out, r)
        }
    }

    /// Eigendecomposition of the symmetric matrices whose `upper` (or lower)
    /// triangle `a` ([..., n, n]) holds: eigenvalues [..., n] ascending to
    /// `values` and, unless `vectors` is NULL, orthonormal eigenvectors in
    /// columns [..., n, n] to `vectors` (`torch.linalg.eigh`).
    fn etpu_eigh(a: TensorHandle, upper: bool, origin: *const c_char, values: *mut TensorHandle, vectors: *mut TensorHandle) {
        let a = get(a, "a")?;
        // SAFETY: strings and pointers as documented.
        unsafe {
            if vectors.is_null() {
                let w = at(origin, || a.eigvalsh(upper))?;
                return put_tensor(values, w);
            }
            let (w, v) = at(origin, || a.eigh(upper))?;
            put_tensor(values, w)?;
            put_tensor(vectors, v)
        }
    }

    /// Singular value decomposition of `a` ([..., m, n]): singular values
    /// [..., min(m, n)] descending to `s` and, unless `u` and `vh` are both
    /// NULL, `u` [..., m, k] and `vh` [..., k, n] with `a == u @ diag(s) @
    /// vh` (k = min(m, n), or k = m for `u` and n for `vh` with
    /// `full_matrices`).
    fn etpu_svd(
        a: TensorHandle,
        full_matrices: bool,
        origin: *const c_char,
        u: *mut TensorHandle,
        s: *mut TensorHandle,
        vh: *mut TensorHandle,
    ) {
        let a = get(a, "a")?;
        if u.is_null() != vh.is_null() {
            return Err(Failure::invalid("u and vh must be both NULL or both not"));
        }
        // SAFETY: strings and pointers as documented.
        unsafe {
            if u.is_null() {
                let values = at(origin, || a.svdvals())?;
                return put_tensor(s, values);
            }
            let (left, values, right) = at(origin, || a.svd(full_matrices))?;
            put_tensor(s, values)?;
            put_tensor(u, left)?;
            put_tensor(vh, right)
        }
    }
}
