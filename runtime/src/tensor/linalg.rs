//! `torch.linalg`'s factorizations and solves: the Cholesky factor and the
//! triangular solve (StableHLO's own ops), LU with partial pivoting (a loop
//! of fusion's) and the solves made of them. PyTorch's derivatives of
//! inverses, determinants and solves are made of these and matmuls. float32
//! and float64, batched over the leading dims.

use fusion::shape::broadcast_shapes;
use fusion::{DType, EighOutput, HouseholderOutput, LuOutput, Op};

use super::Tensor;
use crate::error::Result;

impl Tensor {
    /// The Cholesky factor of symmetric positive-definite matrices
    /// [..., n, n] (`torch.linalg.cholesky(self, upper=upper)`): lower
    /// triangular `l` with `l @ l^T == self` (upper: `u^T @ u == self`);
    /// only that triangle of `self` is read. A matrix that is not
    /// positive-definite gives NaN from its first failing pivot on: see
    /// [`Tensor::cholesky_ex`] to find which.
    #[track_caller]
    pub fn cholesky(&self, upper: bool) -> Result<Tensor> {
        self.op(Op::Cholesky { upper }, &[])
    }

    /// The factor of [`Tensor::cholesky`] and, per matrix, int32 `info`
    /// (`torch.linalg.cholesky_ex`): 0 where the factorization succeeded,
    /// else `k`, the order of the first leading minor that is not
    /// positive-definite. Finding `k` costs a few more factorizations, only
    /// when some matrix failed.
    #[track_caller]
    pub fn cholesky_ex(&self, upper: bool) -> Result<(Tensor, Tensor)> {
        Ok((
            self.cholesky(upper)?,
            self.op(Op::CholeskyInfo { upper }, &[])?,
        ))
    }

    /// x with `self @ x == b` (`left`) or `x @ self == b`, `self` a
    /// triangular matrix (`upper` or lower; the other triangle is never
    /// read, its diagonal taken as ones with `unit_diagonal`), of `self`'s
    /// transpose with `transpose`: `torch.linalg.solve_triangular` and
    /// `torch.triangular_solve`. The batch dims broadcast; the dtypes must
    /// match.
    #[track_caller]
    pub fn solve_triangular(
        &self,
        b: &Tensor,
        upper: bool,
        left: bool,
        unit_diagonal: bool,
        transpose: bool,
    ) -> Result<Tensor> {
        let op = Op::TriangularSolve {
            left,
            lower: !upper,
            unit_diagonal,
            transpose,
        };
        let (ra, rb) = (self.rank(), b.rank());
        if ra < 2 || rb < 2 {
            // Inference names the op and the shapes.
            return self.op(op, &[b]);
        }
        let batch = broadcast_shapes(op.name(), &self.shape()[..ra - 2], &b.shape()[..rb - 2])?;
        let full = |t: &Tensor, r: usize| {
            let mut shape = batch.clone();
            shape.extend_from_slice(&t.shape()[r - 2..]);
            t.expand(&shape)
        };
        full(self, ra)?.op(op, &[&full(b, rb)?])
    }
    /// LU factorization with partial pivoting (`torch.linalg.lu_factor_ex`;
    /// of complex matrices, pivots by |re| + |im|, as LAPACK):
    /// (factors: L below the diagonal, U on and above; int32 1-based
    /// pivots, LAPACK's; int32 info: 0 or the first zero pivot's step).
    #[track_caller]
    pub fn lu_factor_ex(&self) -> Result<(Tensor, Tensor, Tensor)> {
        let lu = |output| self.op(Op::Lu { output }, &[]);
        Ok((
            lu(LuOutput::Factors)?,
            lu(LuOutput::Pivots)?,
            lu(LuOutput::Info)?,
        ))
    }

    /// LDL^T factorization of symmetric matrices with Bunch-Kaufman
    /// pivoting (`torch.linalg.ldl_factor_ex`; only the lower triangle
    /// read): (factors: L below the diagonal, D's 1x1 and 2x2 blocks on and
    /// below it; int32 1-based pivots, LAPACK's `sytrf`'s; int32 info: 0 or
    /// the step of the first zero column).
    #[track_caller]
    pub fn ldl_factor_ex(&self) -> Result<(Tensor, Tensor, Tensor)> {
        let ldl = |output| self.op(Op::Ldl { output }, &[]);
        Ok((
            ldl(LuOutput::Factors)?,
            ldl(LuOutput::Pivots)?,
            ldl(LuOutput::Info)?,
        ))
    }

    /// x with `a @ x == b` from `a`'s LDL factors (`self`) and pivots
    /// (`torch.linalg.ldl_solve`). Batch dims broadcast.
    #[track_caller]
    pub fn ldl_solve(&self, pivots: &Tensor, b: &Tensor) -> Result<Tensor> {
        let (ra, rb) = (self.rank(), b.rank());
        if ra < 2 || rb < 2 || pivots.rank() != ra - 1 {
            // Inference names the op and the shapes.
            return self.op(Op::LdlSolve, &[pivots, b]);
        }
        let batch = broadcast_shapes("ldl_solve", &self.shape()[..ra - 2], &b.shape()[..rb - 2])?;
        let full = |t: &Tensor, tail: &[i64]| {
            let mut shape = batch.clone();
            shape.extend_from_slice(tail);
            t.expand(&shape)
        };
        let factors = full(self, &self.shape()[ra - 2..])?;
        let pivots = full(pivots, &pivots.shape()[ra - 2..])?;
        let b = full(b, &b.shape()[rb - 2..])?;
        factors.op(Op::LdlSolve, &[&pivots, &b])
    }

    /// The permutation that LU pivots [..., k] make of `0..rows`, int32
    /// [..., rows]: `a[perm] == l @ u`.
    #[track_caller]
    pub fn lu_permutation(&self, rows: i64) -> Result<Tensor> {
        self.op(Op::LuPermutation { rows }, &[])
    }

    /// x with `a @ x == b` (`left`) or `x @ a == b`, of `a`'s transpose with
    /// `adjoint`, from `a`'s LU factors (`self`) and pivots
    /// (`torch.linalg.lu_solve`): a permutation and two triangular solves.
    /// Batch dims broadcast.
    #[track_caller]
    pub fn lu_solve(
        &self,
        pivots: &Tensor,
        b: &Tensor,
        left: bool,
        adjoint: bool,
    ) -> Result<Tensor> {
        let (ra, rb) = (self.rank(), b.rank());
        if ra < 2 || rb < 2 || pivots.rank() != ra - 1 {
            return Err(fusion::Error::ShapeMismatch {
                op: "lu_solve",
                got: format!(
                    "factors {}, pivots {}, b {}",
                    self.ty(),
                    pivots.ty(),
                    b.ty()
                ),
                expected:
                    "factors [..., n, n], pivots [..., n] and b [..., n, k] (left) or [..., k, n]"
                        .into(),
            }
            .into());
        }
        let n = self.shape()[ra - 1];
        let batch = broadcast_shapes("lu_solve", &self.shape()[..ra - 2], &b.shape()[..rb - 2])?;
        let full = |t: &Tensor, tail: &[i64]| {
            let mut shape = batch.clone();
            shape.extend_from_slice(tail);
            t.expand(&shape)
        };
        let lu = full(self, &self.shape()[ra - 2..])?;
        // The adjoint of complex factors: their conjugates' transposes (the
        // triangular solve transposes without conjugating).
        let lu = if adjoint && lu.dtype().is_complex() {
            lu.conj_physical()?
        } else {
            lu
        };
        let b = full(b, &b.shape()[rb - 2..])?;
        let perm = full(&pivots.lu_permutation(n)?.to_dtype(DType::I64)?, &[n])?;
        // Along the dim b's rows (left) or columns are: perm broadcast over
        // the other.
        let dim = if left { -2 } else { -1 };
        let along = perm
            .unsqueeze(if left { -1 } else { -2 })?
            .expand(b.shape())?;
        let solve = |x: &Tensor, upper: bool, unit: bool| {
            lu.solve_triangular(x, upper, left, unit, adjoint)
        };
        // a = P L U. Solving with a (left) or a^T (right): P^T b picks b's
        // rows perm[i], b P its columns perm[i], then L's solve, then U's.
        // The other two: U's solve, L's, then the permutation undone.
        let permute_first = left != adjoint;
        let b = if permute_first {
            b.gather(dim, &along)?
        } else {
            b
        };
        let x = if permute_first {
            solve(&solve(&b, false, true)?, true, false)?
        } else {
            solve(&solve(&b, true, false)?, false, true)?
        };
        if permute_first {
            Ok(x)
        } else {
            x.zeros_like()?.scatter(dim, &along, &x)
        }
    }

    /// Householder QR (`torch.geqrf`, LAPACK's `geqrf`): (factors: R on and
    /// above the diagonal, each reflector's vector below it; tau
    /// [..., min(m, n)]).
    #[track_caller]
    pub fn geqrf(&self) -> Result<(Tensor, Tensor)> {
        let qr = |output| self.op(Op::Householder { output }, &[]);
        Ok((qr(HouseholderOutput::Factors)?, qr(HouseholderOutput::Tau)?))
    }

    /// `c` multiplied by q of the reflectors in `self`'s columns and `tau`
    /// (`torch.ormqr`): `q @ c` (`left`) or `c @ q`, of q^T with `transpose`.
    #[track_caller]
    pub fn ormqr(&self, tau: &Tensor, c: &Tensor, left: bool, transpose: bool) -> Result<Tensor> {
        self.op(Op::ApplyHouseholder { left, transpose }, &[tau, c])
    }

    /// The first n columns of q of the reflectors in `self`'s [..., m, n]
    /// columns and `tau` (`torch.linalg.householder_product`, LAPACK's
    /// `orgqr`).
    #[track_caller]
    pub fn householder_product(&self, tau: &Tensor) -> Result<Tensor> {
        let r = self.rank();
        let (m, n) = if r >= 2 {
            (self.shape()[r - 2], self.shape()[r - 1])
        } else {
            (0, 0)
        };
        let mut shape = self.shape()[..r.saturating_sub(2)].to_vec();
        shape.extend([m, n]);
        let eye = self.device().eye(m, n, self.dtype())?.expand(&shape)?;
        self.ormqr(tau, &eye, true, false)
    }

    /// QR decomposition (`torch.linalg.qr`): q [..., m, k] with orthonormal
    /// columns and upper-triangular r [..., k, n], k = min(m, n); with
    /// `complete`, q [..., m, m] and r [..., m, n]. LAPACK's signs.
    #[track_caller]
    pub fn qr(&self, complete: bool) -> Result<(Tensor, Tensor)> {
        let (factors, tau) = self.geqrf()?;
        let r = self.rank();
        let (m, n) = (self.shape()[r - 2], self.shape()[r - 1]);
        let k = m.min(n);
        let q_cols = if complete { m } else { k };
        let mut shape = self.shape()[..r - 2].to_vec();
        shape.extend([m, q_cols]);
        let eye = self.device().eye(m, q_cols, self.dtype())?.expand(&shape)?;
        let q = factors.narrow(-1, 0, k)?.ormqr(&tau, &eye, true, false)?;
        let rows = if complete { m } else { k };
        Ok((q, factors.narrow(-2, 0, rows)?.triu(0)?))
    }
}

impl Tensor {
    /// Eigendecomposition of symmetric matrices [..., n, n]
    /// (`torch.linalg.eigh(self, UPLO="U" if upper else "L")`): (eigenvalues
    /// [..., n] ascending, orthonormal eigenvectors [..., n, n] in columns);
    /// only the `upper` (or lower) triangle is read.
    ///
    /// XLA's own decomposition (cyclic Jacobi), which stops once its
    /// off-diagonal norm, computed as a difference of two nearly equal
    /// norms, rounds to zero: at about `sqrt(eps)` of the matrix's norm, so
    /// its vectors are good to `sqrt(eps) / gap`. Hence float32 matrices are
    /// decomposed in float64 (`sqrt(eps)` of float64 is below float32's
    /// eps), and float64 vectors get one step of Ogita and Aishima's
    /// refinement (2018), which squares their error for every eigenvalue
    /// separated from the others by more than the error.
    #[track_caller]
    pub fn eigh(&self, upper: bool) -> Result<(Tensor, Tensor)> {
        let (values, vectors) = self.eigh_parts(upper, true)?;
        Ok((values, vectors.expect("asked for the vectors")))
    }

    /// The eigenvalues of [`Tensor::eigh`], ascending, without its vectors
    /// (`torch.linalg.eigvalsh`).
    #[track_caller]
    pub fn eigvalsh(&self, upper: bool) -> Result<Tensor> {
        Ok(self.eigh_parts(upper, false)?.0)
    }

    fn eigh_parts(&self, upper: bool, with_vectors: bool) -> Result<(Tensor, Option<Tensor>)> {
        let eigh = |a: &Tensor, output| {
            a.op(
                Op::Eigh {
                    lower: !upper,
                    output,
                },
                &[],
            )
        };
        // Single precision (float32, complex64) decomposes in double.
        let dtype = self.dtype();
        let wide = match dtype {
            DType::F32 => DType::F64,
            DType::C64 => DType::C128,
            d => d,
        };
        let narrow = wide != dtype && self.numel() > 0;
        let a = if narrow {
            self.to_dtype(wide)?
        } else {
            self.clone()
        };
        let values = eigh(&a, EighOutput::Values)?;
        if !with_vectors {
            let values = if narrow {
                values.to_dtype(dtype.real_part())?
            } else {
                values
            };
            return Ok((values, None));
        }
        let vectors = eigh(&a, EighOutput::Vectors)?;
        if narrow {
            return Ok((
                values.to_dtype(dtype.real_part())?,
                Some(vectors.to_dtype(dtype)?),
            ));
        }
        let vectors = if matches!(dtype, DType::F64 | DType::C128) && self.numel() > 0 {
            refine_eigenvectors(&symmetric(self, upper)?, &values, &vectors)?
        } else {
            vectors
        };
        Ok((values, Some(vectors)))
    }

    /// Singular value decomposition of matrices [..., m, n]
    /// (`torch.linalg.svd`): (u [..., m, k], s [..., k] descending, vh
    /// [..., k, n]) with `self == u @ diag(s) @ vh`, k = min(m, n); with
    /// `full_matrices`, u [..., m, m] and vh [..., n, n].
    ///
    /// Made of XLA's symmetric eigendecomposition, as no plugin has an SVD
    /// op: the eigenvalues of `[[0, a], [a^H, 0]]` are `±s` (and |m - n|
    /// zeros), so s is accurate to `eps * |a|` as LAPACK's; the eigenvectors
    /// of `+s_i` are `[u_i; v_i] / sqrt(2)`. Where s has zeros, those halves
    /// are no basis, so each of u and v is made orthonormal by a Householder
    /// QR (which keeps the columns that already are, up to the sign R's
    /// diagonal undoes) and completed by it for `full_matrices`.
    #[track_caller]
    pub fn svd(&self, full_matrices: bool) -> Result<(Tensor, Tensor, Tensor)> {
        let (s, vectors) = self.svd_parts(true)?;
        let vectors = vectors.expect("asked for the vectors");
        let r = self.rank();
        let (m, n) = (self.shape()[r - 2], self.shape()[r - 1]);
        let halves = vectors.mul(std::f64::consts::SQRT_2)?;
        let u = orthonormal(&halves.narrow(-2, 0, m)?, full_matrices)?;
        let v = orthonormal(&halves.narrow(-2, m, n)?, full_matrices)?;
        Ok((u, s, adjoint(&v)?))
    }

    /// The singular values of matrices [..., m, n], descending
    /// (`torch.linalg.svdvals`): [`Tensor::svd`]'s s, without its vectors.
    #[track_caller]
    pub fn svdvals(&self) -> Result<Tensor> {
        Ok(self.svd_parts(false)?.0)
    }

    /// s of [`Tensor::svd`] and, with `vectors`, the eigenvectors of the
    /// k largest eigenvalues of `[[0, a], [a^H, 0]]` [..., m + n, k].
    fn svd_parts(&self, vectors: bool) -> Result<(Tensor, Option<Tensor>)> {
        let r = self.rank();
        if r < 2 {
            // Inference names the op and what it expected.
            self.op(
                Op::Eigh {
                    lower: true,
                    output: EighOutput::Values,
                },
                &[],
            )?;
        }
        let (m, n) = (self.shape()[r - 2], self.shape()[r - 1]);
        let k = m.min(n);
        let block = |rows: i64, cols: i64| {
            let mut shape = self.shape()[..r - 2].to_vec();
            shape.extend([rows, cols]);
            self.device().zeros(&shape, self.dtype())
        };
        let top = Tensor::cat(&[&block(m, m)?, self], -1)?;
        let bottom = Tensor::cat(&[&adjoint(self)?, &block(n, n)?], -1)?;
        let (values, eigenvectors) =
            Tensor::cat(&[&top, &bottom], -2)?.eigh_parts(false, vectors)?;
        // The k largest, descending; a zero singular value may come out as
        // a tiny negative eigenvalue.
        let s = values.narrow(-1, m + n - k, k)?.flip(&[-1])?.abs()?;
        let vectors = eigenvectors
            .map(|v| v.narrow(-1, m + n - k, k)?.flip(&[-1]))
            .transpose()?;
        Ok((s, vectors))
    }
}

/// Orthonormal columns spanning those of `x` [..., p, k] in order (k <= p):
/// Householder QR's q with each column's sign that of R's diagonal, so a
/// column already orthonormal to the ones before it comes back unchanged;
/// with `complete`, q [..., p, p].
fn orthonormal(x: &Tensor, complete: bool) -> Result<Tensor> {
    let r = x.rank();
    let k = x.shape()[r - 1];
    let (q, upper) = x.qr(complete)?;
    let eye = x.device().eye(k, k, x.dtype())?;
    let diagonal = upper.narrow(-2, 0, k)?.mul(&eye)?.sum(&[-2], false)?;
    // +1 where the diagonal is >= 0, else -1 (a complex R's diagonal is
    // real, as LAPACK's); the completion's columns keep their sign.
    let diagonal = if x.dtype().is_complex() {
        diagonal.real()?
    } else {
        diagonal
    };
    let sign = diagonal.lt(0.0)?.to_dtype(x.dtype())?.mul(-2.0)?.add(1.0)?;
    let columns = q.shape()[r - 1];
    let sign = if columns > k {
        let mut shape = sign.shape().to_vec();
        *shape.last_mut().expect("rank >= 1") = columns - k;
        let ones = x.device().ones(&shape, x.dtype())?;
        Tensor::cat(&[&sign, &ones], -1)?
    } else {
        sign
    };
    q.mul(&sign.unsqueeze(-2)?)
}

/// The symmetric (of complex numbers, Hermitian) matrices whose `upper` (or
/// lower) triangle `a` holds; a complex diagonal's imaginary parts are
/// ignored, as LAPACK's `heevd` ignores them.
fn symmetric(a: &Tensor, upper: bool) -> Result<Tensor> {
    let (part, strict) = if upper {
        (a.triu(0)?, a.triu(1)?)
    } else {
        (a.tril(0)?, a.tril(-1)?)
    };
    let full = part.add(&adjoint(&strict)?)?;
    if !a.dtype().is_complex() {
        return Ok(full);
    }
    let n = a.shape()[a.rank() - 1];
    let eye = a.device().eye(n, n, DType::Bool)?;
    Tensor::where_(&eye, &full.real()?.to_dtype(a.dtype())?, &full)
}

/// The conjugate transpose of matrices [..., m, n] (the transpose of real
/// ones).
fn adjoint(x: &Tensor) -> Result<Tensor> {
    super::activation::conjugate(&x.transpose(-2, -1)?)
}

/// One step of Ogita and Aishima's refinement of approximate eigenvectors
/// `x` (columns) of the symmetric (or Hermitian) `a` with eigenvalues `w`
/// ("Iterative refinement for symmetric eigenvalue decomposition", 2018):
/// with `r = I - x^H x` and `s = x^H a x` (`x^H` the conjugate transpose), `x + x e` where `e[i][j] = (s[i][j] +
/// w[j] r[i][j]) / (w[j] - w[i])` for eigenvalues farther apart than the
/// error bound `2 (|s - diag(w)| + |a| |r|)`, else `r[i][j] / 2` (which
/// only restores orthonormality within a cluster).
fn refine_eigenvectors(a: &Tensor, w: &Tensor, x: &Tensor) -> Result<Tensor> {
    let n = x.shape()[x.rank() - 1];
    let eye = x.device().eye(n, n, x.dtype())?;
    let xt = adjoint(x)?;
    let r = eye.sub(&xt.matmul(x)?)?;
    let s = xt.matmul(&a.matmul(x)?)?;
    let (row, col) = (w.unsqueeze(-1)?, w.unsqueeze(-2)?);
    let off = s.sub(&eye.mul(&row)?)?;
    let frobenius = |t: &Tensor| t.vector_norm(2.0, &[-2, -1], true);
    let bound = frobenius(&off)?
        .add(&frobenius(a)?.mul(&frobenius(&r)?)?)?
        .mul(2.0)?;
    let gap = col.sub(&row)?;
    let separated = gap.abs()?.gt(&bound)?;
    // The divisor where a pair is not separated is never used; 1 keeps it
    // finite.
    let divisor = Tensor::where_(&separated, &gap, 1.0)?;
    let apart = s.add(&r.mul(&col)?)?.div(&divisor)?;
    let e = Tensor::where_(&separated, &apart, &r.mul(0.5)?)?;
    x.add(&x.matmul(&e)?)
}
