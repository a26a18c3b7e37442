//! Inference for the factorizations and solves of `torch.linalg`: square
//! matrices in the last two dims, float32 or float64 (what the plugins'
//! decompositions take; PyTorch's CPU kernels refuse half precision too).

use super::arity;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::shape::TensorType;

/// `a` is a batch of square float32/float64 matrices; its n.
fn square_matrices(op: &'static str, what: &str, a: &TensorType) -> Result<i64> {
    if !matches!(a.dtype, DType::F32 | DType::F64) {
        return Err(Error::Invalid {
            op,
            message: format!("{what} is {a}, expected float32 or float64"),
        });
    }
    let r = a.rank();
    if r < 2 || a.shape[r - 1] != a.shape[r - 2] {
        return Err(Error::ShapeMismatch {
            op,
            got: format!("{what} {a}"),
            expected: "a batch of square matrices [..., n, n]".into(),
        });
    }
    Ok(a.shape[r - 1])
}

pub(super) fn cholesky(op: &'static str, inputs: &[TensorType]) -> Result<TensorType> {
    arity(op, inputs, 1)?;
    square_matrices(op, "the input", &inputs[0])?;
    Ok(inputs[0].clone())
}

/// int32, one per matrix.
pub(super) fn cholesky_info(op: &'static str, inputs: &[TensorType]) -> Result<TensorType> {
    arity(op, inputs, 1)?;
    let a = &inputs[0];
    square_matrices(op, "the input", a)?;
    Ok(TensorType::new(DType::I32, &a.shape[..a.rank() - 2]))
}

/// The solution has `b`'s type; `b`'s rows (`left`) or columns match `a`'s
/// n, the batch dims are equal, the dtypes too.
pub(super) fn triangular_solve(
    op: &'static str,
    left: bool,
    inputs: &[TensorType],
) -> Result<TensorType> {
    arity(op, inputs, 2)?;
    let (a, b) = (&inputs[0], &inputs[1]);
    let n = square_matrices(op, "the triangular matrix", a)?;
    let r = b.rank();
    let (side, solved) = if left { ("rows", 2) } else { ("columns", 1) };
    if r != a.rank() || b.shape[..r - 2] != a.shape[..r - 2] || b.shape[r - solved] != n {
        return Err(Error::ShapeMismatch {
            op,
            got: format!("a triangular matrix {a} and a right-hand side {b}"),
            expected: format!(
                "the right-hand side's batch dims equal and {n} {side} (solving from the {})",
                if left { "left" } else { "right" }
            ),
        });
    }
    if a.dtype != b.dtype {
        return Err(Error::DTypeMismatch {
            op,
            lhs: a.dtype,
            rhs: b.dtype,
        });
    }
    Ok(b.clone())
}

#[cfg(test)]
mod tests {
    use crate::dtype::DType;
    use crate::op::Op;
    use crate::shape::TensorType;

    fn t(dtype: DType, shape: &[i64]) -> TensorType {
        TensorType::new(dtype, shape)
    }

    #[test]
    fn cholesky_takes_square_float_matrices() {
        let op = Op::Cholesky { upper: false };
        let a = t(DType::F32, &[3, 4, 4]);
        assert_eq!(op.infer(std::slice::from_ref(&a)).unwrap(), a);
        let info = Op::CholeskyInfo { upper: true }.infer(std::slice::from_ref(&a));
        assert_eq!(info.unwrap(), t(DType::I32, &[3]));
        let e = op.infer(&[t(DType::F32, &[4, 3])]).unwrap_err().to_string();
        assert!(
            e.contains("cholesky") && e.contains("[4, 3]") && e.contains("square"),
            "{e}"
        );
        let e = op.infer(&[t(DType::I64, &[2, 2])]).unwrap_err().to_string();
        assert!(
            e.contains("int64") && e.contains("float32 or float64"),
            "{e}"
        );
        assert!(op.infer(&[t(DType::F32, &[4])]).is_err());
    }

    #[test]
    fn triangular_solve_checks_the_side_batch_and_dtype() {
        let solve = |left| Op::TriangularSolve {
            left,
            lower: true,
            unit_diagonal: false,
            transpose: false,
        };
        let a = t(DType::F32, &[2, 3, 3]);
        let b = t(DType::F32, &[2, 3, 5]);
        assert_eq!(solve(true).infer(&[a.clone(), b.clone()]).unwrap(), b);
        let e = solve(false).infer(&[a.clone(), b]).unwrap_err().to_string();
        assert!(e.contains("3 columns") && e.contains("right"), "{e}");
        let right = t(DType::F32, &[2, 5, 3]);
        assert_eq!(
            solve(false).infer(&[a.clone(), right.clone()]).unwrap(),
            right
        );
        let e = solve(true)
            .infer(&[a.clone(), t(DType::F32, &[4, 3, 5])])
            .unwrap_err()
            .to_string();
        assert!(e.contains("batch"), "{e}");
        let e = solve(true)
            .infer(&[a, t(DType::F64, &[2, 3, 5])])
            .unwrap_err()
            .to_string();
        assert!(e.contains("float32") && e.contains("float64"), "{e}");
    }
}
