//! Inference for the counter-based random ops.

use super::{arity, check_shape, unsupported};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::shape::TensorType;

/// (key0, key1: 0-d int64) -> `dtype[shape]`, a float dtype.
pub(super) fn rand_uniform(
    op: &'static str,
    shape: &[i64],
    dtype: DType,
    inputs: &[TensorType],
) -> Result<TensorType> {
    arity(op, inputs, 2)?;
    keys(op, inputs)?;
    if !dtype.is_float() {
        return Err(unsupported(op, dtype, "a floating-point dtype"));
    }
    check_shape(op, shape)?;
    Ok(TensorType::new(dtype, shape))
}

/// (`parameters` float tensors of one type, key0, key1) -> that type: the
/// samplers that loop until every element is accepted (gamma and Poisson
/// take one parameter, binomial two).
pub(super) fn rand_loop(
    op: &'static str,
    parameters: usize,
    inputs: &[TensorType],
) -> Result<TensorType> {
    arity(op, inputs, parameters + 2)?;
    keys(op, &inputs[parameters..])?;
    same_floats(op, parameters, &inputs[..parameters])
}

/// (`n` float tensors of one type and shape) -> that type.
pub(super) fn same_floats(op: &'static str, n: usize, inputs: &[TensorType]) -> Result<TensorType> {
    arity(op, inputs, n)?;
    let first = &inputs[0];
    if !first.dtype.is_float() {
        return Err(unsupported(op, first.dtype, "a floating-point dtype"));
    }
    if let Some(other) = inputs[1..].iter().find(|t| *t != first) {
        return Err(Error::ShapeMismatch {
            op,
            got: format!("{first} and {other}"),
            expected: "operands of one type and shape".into(),
        });
    }
    Ok(first.clone())
}

/// Both keys 0-d int64.
fn keys(op: &'static str, keys: &[TensorType]) -> Result<()> {
    for (name, k) in ["key0", "key1"].iter().zip(keys) {
        if k.dtype != DType::I64 || k.rank() != 0 {
            return Err(Error::ShapeMismatch {
                op,
                got: format!("{name} {k}"),
                expected: "a 0-d int64 key".into(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::dtype::DType;
    use crate::op::Op;
    use crate::shape::TensorType;

    #[test]
    fn keys_must_be_int64_scalars_and_the_dtype_a_float() {
        let key = TensorType::scalar(DType::I64);
        let op = |dtype| Op::RandUniform {
            shape: [2, 3].into_iter().collect(),
            dtype,
        };
        let ok = op(DType::BF16).infer(&[key.clone(), key.clone()]).unwrap();
        assert_eq!(ok, TensorType::new(DType::BF16, &[2, 3]));
        let e = op(DType::I32)
            .infer(&[key.clone(), key.clone()])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("rand") && e.contains("int32") && e.contains("floating"),
            "{e}"
        );
        let e = op(DType::F32)
            .infer(&[key.clone(), TensorType::new(DType::I64, &[2])])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("key1 int64[2]") && e.contains("0-d int64"),
            "{e}"
        );
        let e = op(DType::F32).infer(&[key]).unwrap_err().to_string();
        assert!(e.contains("got 1 inputs, expected 2"), "{e}");
    }

    #[test]
    fn samplers_take_a_float_parameter_and_two_keys_and_keep_its_type() {
        let key = TensorType::scalar(DType::I64);
        let alpha = TensorType::new(DType::BF16, &[4, 3]);
        for op in [Op::RandGamma, Op::RandPoisson] {
            let ok = op
                .infer(&[alpha.clone(), key.clone(), key.clone()])
                .unwrap();
            assert_eq!(ok, alpha);
            let e = op
                .infer(&[TensorType::new(DType::I32, &[4]), key.clone(), key.clone()])
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(op.name()) && e.contains("int32") && e.contains("floating"),
                "{e}"
            );
            let e = op
                .infer(&[alpha.clone(), key.clone(), TensorType::scalar(DType::I32)])
                .unwrap_err()
                .to_string();
            assert!(e.contains("key1 int32[]") && e.contains("0-d int64"), "{e}");
            assert!(op.infer(&[alpha.clone(), key.clone()]).is_err());
        }
    }
}
