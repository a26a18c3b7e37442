//! `torch.linalg`'s factorizations and solves that StableHLO has as ops:
//! the Cholesky factor and the triangular solve (the backward of the one is
//! made of the other and matmuls, in PyTorch's derivatives). float32 and
//! float64, batched over the leading dims.

use fusion::Op;
use fusion::shape::broadcast_shapes;

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
}
