//! `torch.linalg`'s factorizations and solves: the Cholesky factor and the
//! triangular solve (StableHLO's own ops), LU with partial pivoting (a loop
//! of fusion's) and the solves made of them. PyTorch's derivatives of
//! inverses, determinants and solves are made of these and matmuls. float32
//! and float64, batched over the leading dims.

use fusion::shape::broadcast_shapes;
use fusion::{DType, HouseholderOutput, LuOutput, Op};

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
    /// LU factorization with partial pivoting (`torch.linalg.lu_factor_ex`):
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
