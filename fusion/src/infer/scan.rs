//! Inference for scans (cumulative sum and product) and sorting: each keeps
//! its input's shape. A 0-d tensor accepts dim 0 (and -1 before
//! normalization), as PyTorch does.

use super::{arity, check_dims};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::{ScanOp, SortOutput};
use crate::shape::TensorType;

/// Sums and products of ints and bools accumulate in int64 (PyTorch's dtype
/// for them when none is given), floats keep their dtype; running maxima and
/// minima keep the input's dtype, their positions are int64; logcumsumexp
/// takes floats only.
pub(super) fn scan(
    op: &'static str,
    scan: ScanOp,
    dim: usize,
    inputs: &[TensorType],
) -> Result<TensorType> {
    arity(op, inputs, 1)?;
    let x = &inputs[0];
    check_dims(op, &[dim], x.rank())?;
    if x.dtype.is_complex() && !matches!(scan, ScanOp::Sum | ScanOp::Prod) {
        return Err(super::unsupported(op, x.dtype, "a real dtype"));
    }
    let dtype = match scan {
        _ if x.dtype.is_complex() => x.dtype,
        ScanOp::Max | ScanOp::Min => x.dtype,
        ScanOp::ArgMax | ScanOp::ArgMin => DType::I64,
        ScanOp::LogSumExp if !x.dtype.is_float() => {
            return Err(Error::Invalid {
                op,
                message: format!("got {x}; expected a floating point tensor"),
            });
        }
        _ if x.dtype.is_float() => x.dtype,
        _ => DType::I64,
    };
    Ok(x.with_dtype(dtype))
}

/// Values keep the input's type; indices are int64 of its shape.
pub(super) fn sort(
    op: &'static str,
    dim: usize,
    output: SortOutput,
    inputs: &[TensorType],
) -> Result<TensorType> {
    arity(op, inputs, 1)?;
    let x = &inputs[0];
    check_dims(op, &[dim], x.rank())?;
    if x.dtype.is_complex() {
        return Err(super::unsupported(
            op,
            x.dtype,
            "a real dtype (complex numbers have no order)",
        ));
    }
    Ok(match output {
        SortOutput::Values => x.clone(),
        SortOutput::Indices => x.with_dtype(DType::I64),
    })
}

#[cfg(test)]
mod tests {
    use crate::dtype::DType;
    use crate::op::{Op, ScanOp, SortOutput};
    use crate::shape::TensorType;

    fn t(dtype: DType, shape: &[i64]) -> TensorType {
        TensorType::new(dtype, shape)
    }

    #[test]
    fn scans_keep_the_shape_and_widen_ints_and_bools_to_int64() {
        let sum = Op::Scan {
            op: ScanOp::Sum,
            dim: 1,
        };
        assert_eq!(
            sum.infer(&[t(DType::BF16, &[2, 3])]).unwrap(),
            t(DType::BF16, &[2, 3])
        );
        for d in [DType::Bool, DType::U8, DType::I32, DType::I64] {
            assert_eq!(sum.infer(&[t(d, &[2, 3])]).unwrap(), t(DType::I64, &[2, 3]));
        }
        let prod = Op::Scan {
            op: ScanOp::Prod,
            dim: 0,
        };
        assert_eq!(
            prod.infer(&[t(DType::F32, &[])]).unwrap(),
            t(DType::F32, &[])
        );
        let e = prod.infer(&[]).unwrap_err().to_string();
        assert!(e.contains("cumprod") && e.contains("expected 1"), "{e}");
        let e = sum.infer(&[t(DType::F32, &[4])]).unwrap_err().to_string();
        assert!(e.contains("cumsum") && e.contains("dim 1"), "{e}");
    }

    #[test]
    fn a_sort_gives_values_of_the_input_type_or_int64_indices() {
        let op = |output| Op::Sort {
            dim: 2,
            descending: true,
            output,
        };
        let x = t(DType::F16, &[2, 0, 5]);
        assert_eq!(
            op(SortOutput::Values)
                .infer(std::slice::from_ref(&x))
                .unwrap(),
            x
        );
        assert_eq!(
            op(SortOutput::Indices).infer(&[x]).unwrap(),
            t(DType::I64, &[2, 0, 5])
        );
        let e = op(SortOutput::Values)
            .infer(&[t(DType::I32, &[3, 4])])
            .unwrap_err()
            .to_string();
        assert!(e.contains("sort") && e.contains("dim 2"), "{e}");
    }
}
