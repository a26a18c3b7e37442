//! Inference for the factorizations and solves of `torch.linalg`: square
//! matrices in the last two dims, float32 or float64 (what the plugins'
//! decompositions take; PyTorch's CPU kernels refuse half precision too).

use super::{arity, int_only};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::{EighOutput, HouseholderOutput, LuOutput};
use crate::shape::TensorType;

/// `a` is a batch of float32/float64 matrices [..., m, n].
fn float_matrices(op: &'static str, what: &str, a: &TensorType) -> Result<()> {
    if !matches!(a.dtype, DType::F32 | DType::F64) {
        return Err(Error::Invalid {
            op,
            message: format!("{what} is {a}, expected float32 or float64"),
        });
    }
    if a.rank() < 2 {
        return Err(Error::ShapeMismatch {
            op,
            got: format!("{what} {a}"),
            expected: "a batch of matrices [..., m, n]".into(),
        });
    }
    Ok(())
}

/// `a` is a batch of square float32/float64 matrices; its n.
fn square_matrices(op: &'static str, what: &str, a: &TensorType) -> Result<i64> {
    float_matrices(op, what, a)?;
    let r = a.rank();
    if a.shape[r - 1] != a.shape[r - 2] {
        return Err(Error::ShapeMismatch {
            op,
            got: format!("{what} {a}"),
            expected: "a batch of square matrices [..., n, n]".into(),
        });
    }
    Ok(a.shape[r - 1])
}

/// As `square_matrices`, complex matrices too: the ops StableHLO has in
/// complex forms (Cholesky of Hermitian matrices, triangular solves).
fn square_matrices_or_complex(op: &'static str, what: &str, a: &TensorType) -> Result<i64> {
    if a.dtype.is_complex() {
        return square_matrices(op, what, &a.with_dtype(a.dtype.real_part()));
    }
    square_matrices(op, what, a)
}

pub(super) fn cholesky(op: &'static str, inputs: &[TensorType]) -> Result<TensorType> {
    arity(op, inputs, 1)?;
    square_matrices_or_complex(op, "the input", &inputs[0])?;
    Ok(inputs[0].clone())
}

pub(super) fn lu(op: &'static str, output: LuOutput, inputs: &[TensorType]) -> Result<TensorType> {
    arity(op, inputs, 1)?;
    let a = &inputs[0];
    // Complex matrices too (the pivot's size is |re| + |im|, as LAPACK's).
    float_matrices(op, "the input", &a.with_dtype(a.dtype.real_part()))?;
    let r = a.rank();
    let batch = &a.shape[..r - 2];
    Ok(match output {
        LuOutput::Factors => a.clone(),
        LuOutput::Pivots => {
            let mut shape = batch.to_vec();
            shape.push(a.shape[r - 2].min(a.shape[r - 1]));
            TensorType::new(DType::I32, &shape)
        }
        LuOutput::Info => TensorType::new(DType::I32, batch),
    })
}

pub(super) fn ldl(op: &'static str, output: LuOutput, inputs: &[TensorType]) -> Result<TensorType> {
    arity(op, inputs, 1)?;
    let a = &inputs[0];
    let n = square_matrices(op, "the input", a)?;
    let batch = &a.shape[..a.rank() - 2];
    Ok(match output {
        LuOutput::Factors => a.clone(),
        LuOutput::Pivots => {
            let mut shape = batch.to_vec();
            shape.push(n);
            TensorType::new(DType::I32, &shape)
        }
        LuOutput::Info => TensorType::new(DType::I32, batch),
    })
}

/// (factors [..., n, n], pivots int32 [..., n], b [..., n, k]): batch dims
/// and the float dtypes equal.
pub(super) fn ldl_solve(op: &'static str, inputs: &[TensorType]) -> Result<TensorType> {
    arity(op, inputs, 3)?;
    let (a, pivots, b) = (&inputs[0], &inputs[1], &inputs[2]);
    let n = square_matrices(op, "the factors", a)?;
    float_matrices(op, "the right-hand side", b)?;
    let batch = &a.shape[..a.rank() - 2];
    let mut pivots_shape = batch.to_vec();
    pivots_shape.push(n);
    let fits = pivots.dtype == DType::I32
        && pivots.shape.as_slice() == pivots_shape.as_slice()
        && b.dtype == a.dtype
        && b.rank() == a.rank()
        && &b.shape[..b.rank() - 2] == batch
        && b.shape[b.rank() - 2] == n;
    if !fits {
        return Err(Error::ShapeMismatch {
            op,
            got: format!("factors {a}, pivots {pivots}, b {b}"),
            expected: "factors [..., n, n], int32 pivots [..., n] and b [..., n, k] of the factors' dtype and batch dims".into(),
        });
    }
    Ok(b.clone())
}

pub(super) fn lu_permutation(
    op: &'static str,
    rows: i64,
    inputs: &[TensorType],
) -> Result<TensorType> {
    arity(op, inputs, 1)?;
    let p = &inputs[0];
    int_only(op, "the pivots", p)?;
    let r = p.rank();
    if r == 0 || p.shape[r - 1] > rows {
        return Err(Error::ShapeMismatch {
            op,
            got: format!("pivots {p} for {rows} rows"),
            expected: format!("pivots [..., k] with k <= {rows}"),
        });
    }
    let mut shape = p.shape[..r - 1].to_vec();
    shape.push(rows);
    Ok(TensorType::new(DType::I32, &shape))
}

pub(super) fn householder(
    op: &'static str,
    output: HouseholderOutput,
    inputs: &[TensorType],
) -> Result<TensorType> {
    arity(op, inputs, 1)?;
    let a = &inputs[0];
    // Complex matrices too (LAPACK's zgeqrf: a real diagonal, complex tau).
    float_matrices(op, "the input", &a.with_dtype(a.dtype.real_part()))?;
    let r = a.rank();
    Ok(match output {
        HouseholderOutput::Factors => a.clone(),
        HouseholderOutput::Tau => {
            let mut shape = a.shape[..r - 2].to_vec();
            shape.push(a.shape[r - 2].min(a.shape[r - 1]));
            a.with_shape(shape.into())
        }
    })
}

pub(super) fn eigh(
    op: &'static str,
    output: EighOutput,
    inputs: &[TensorType],
) -> Result<TensorType> {
    arity(op, inputs, 1)?;
    let a = &inputs[0];
    // Hermitian complex matrices too; their eigenvalues are real.
    square_matrices_or_complex(op, "the input", a)?;
    Ok(match output {
        EighOutput::Vectors => a.clone(),
        EighOutput::Values => a
            .with_shape(a.shape[..a.rank() - 1].into())
            .with_dtype(a.dtype.real_part()),
    })
}

/// (factors [..., m, k'], tau [..., k], c): k <= k' <= m, c [..., m, p]
/// (left) or [..., p, m]; batch dims and dtypes equal.
pub(super) fn apply_householder(
    op: &'static str,
    left: bool,
    inputs: &[TensorType],
) -> Result<TensorType> {
    arity(op, inputs, 3)?;
    let (a, tau, c) = (&inputs[0], &inputs[1], &inputs[2]);
    float_matrices(op, "the reflectors", &a.with_dtype(a.dtype.real_part()))?;
    float_matrices(
        op,
        "the matrix multiplied",
        &c.with_dtype(c.dtype.real_part()),
    )?;
    let r = a.rank();
    let (m, cols) = (a.shape[r - 2], a.shape[r - 1]);
    let k = tau.shape.last().copied().unwrap_or(-1);
    let c_m = if left {
        c.shape[c.rank() - 2]
    } else {
        c.shape[c.rank() - 1]
    };
    let batch = &a.shape[..r - 2];
    let fits = tau.rank() == r - 1
        && &tau.shape[..r - 2] == batch
        && c.rank() == r
        && &c.shape[..r - 2] == batch
        && k <= cols
        && cols <= m
        && c_m == m;
    if !fits {
        return Err(Error::ShapeMismatch {
            op,
            got: format!("reflectors {a}, tau {tau} and {c}"),
            expected: format!(
                "reflectors [..., m, k'], tau [..., k] with k <= k' <= m, and a matrix with m {} (the same batch)",
                if left { "rows" } else { "columns" }
            ),
        });
    }
    for t in [tau, c] {
        if t.dtype != a.dtype {
            return Err(Error::DTypeMismatch {
                op,
                lhs: a.dtype,
                rhs: t.dtype,
            });
        }
    }
    Ok(c.clone())
}

/// int32, one per matrix.
pub(super) fn cholesky_info(op: &'static str, inputs: &[TensorType]) -> Result<TensorType> {
    arity(op, inputs, 1)?;
    let a = &inputs[0];
    square_matrices_or_complex(op, "the input", a)?;
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
    let n = square_matrices_or_complex(op, "the triangular matrix", a)?;
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
    use crate::op::{HouseholderOutput, LuOutput, Op};
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

    #[test]
    fn lu_gives_factors_pivots_and_info_of_any_matrices() {
        let a = t(DType::F64, &[2, 3, 5]);
        let lu = |output| Op::Lu { output }.infer(std::slice::from_ref(&a)).unwrap();
        assert_eq!(lu(LuOutput::Factors), a);
        assert_eq!(lu(LuOutput::Pivots), t(DType::I32, &[2, 3]));
        assert_eq!(lu(LuOutput::Info), t(DType::I32, &[2]));
        let e = Op::Lu {
            output: LuOutput::Factors,
        }
        .infer(&[t(DType::BF16, &[2, 2])])
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("bfloat16") && e.contains("float32 or float64"),
            "{e}"
        );
        let perm = Op::LuPermutation { rows: 5 };
        assert_eq!(
            perm.infer(&[t(DType::I32, &[2, 3])]).unwrap(),
            t(DType::I32, &[2, 5])
        );
        let e = perm.infer(&[t(DType::I32, &[6])]).unwrap_err().to_string();
        assert!(e.contains("k <= 5"), "{e}");
        assert!(perm.infer(&[t(DType::F32, &[3])]).is_err());
    }

    #[test]
    fn householder_gives_factors_and_tau_and_applies_to_fitting_matrices() {
        let a = t(DType::F32, &[2, 5, 3]);
        let qr = |output| {
            Op::Householder { output }
                .infer(std::slice::from_ref(&a))
                .unwrap()
        };
        assert_eq!(qr(HouseholderOutput::Factors), a);
        assert_eq!(qr(HouseholderOutput::Tau), t(DType::F32, &[2, 3]));
        let tau = t(DType::F32, &[2, 3]);
        let apply = |left| Op::ApplyHouseholder {
            left,
            transpose: false,
        };
        let c = t(DType::F32, &[2, 5, 4]);
        assert_eq!(
            apply(true)
                .infer(&[a.clone(), tau.clone(), c.clone()])
                .unwrap(),
            c
        );
        let e = apply(false)
            .infer(&[a.clone(), tau.clone(), c])
            .unwrap_err()
            .to_string();
        assert!(e.contains("ormqr") && e.contains("m columns"), "{e}");
        let right = t(DType::F32, &[2, 4, 5]);
        assert_eq!(
            apply(false)
                .infer(&[a.clone(), tau.clone(), right.clone()])
                .unwrap(),
            right
        );
        let wide = t(DType::F32, &[2, 3, 5]);
        assert!(
            apply(true)
                .infer(&[wide, tau.clone(), t(DType::F32, &[2, 3, 4])])
                .is_err()
        );
        let e = apply(true)
            .infer(&[a, tau, t(DType::F64, &[2, 5, 4])])
            .unwrap_err()
            .to_string();
        assert!(e.contains("float64"), "{e}");
    }
}
