//! Inference for elementwise ops: broadcasting and PyTorch's type promotion.

use super::{arity, unsupported};
use crate::dtype::{DType, ResultType};
use crate::error::{Error, Result};
use crate::op::{BinaryOp, BinaryResult, TernaryOp, UnaryOp, UnaryResult};
use crate::scalar::Scalar;
use crate::shape::{TensorType, broadcast_shapes};

pub(super) fn unary(op: &'static str, u: UnaryOp, inputs: &[TensorType]) -> Result<TensorType> {
    arity(op, inputs, 1)?;
    let x = &inputs[0];
    let d = x.dtype;
    if d.is_complex() && !u.takes_complex() {
        return Err(unsupported(op, d, "a real dtype (it has no complex form)"));
    }
    if d.is_complex() && u.complex_to_real() {
        return Ok(x.with_dtype(d.real_part()));
    }
    let out = match u.result() {
        UnaryResult::Float => d.to_float(),
        UnaryResult::FloatOfNumeric if d.is_bool() => {
            return Err(unsupported(op, d, "a numeric dtype"));
        }
        UnaryResult::FloatOfNumeric => d.to_float(),
        UnaryResult::Numeric if d.is_bool() => {
            return Err(unsupported(op, d, "a numeric dtype (not bool)"));
        }
        UnaryResult::Integral if d.is_float() => {
            return Err(unsupported(op, d, "an integer or bool dtype"));
        }
        UnaryResult::Numeric | UnaryResult::Same | UnaryResult::Integral => d,
        UnaryResult::Bool => DType::Bool,
        UnaryResult::Part => return Err(unsupported(op, d, "a complex dtype")),
    };
    Ok(x.with_dtype(out))
}

/// The dtype a binary op computes in (before comparisons turn it to bool).
pub fn binary_compute_dtype(lhs: &TensorType, rhs: &TensorType) -> DType {
    ResultType::new()
        .tensor(lhs.dtype, lhs.rank())
        .tensor(rhs.dtype, rhs.rank())
        .finish()
}

pub(super) fn binary(op: &'static str, b: BinaryOp, inputs: &[TensorType]) -> Result<TensorType> {
    arity(op, inputs, 2)?;
    let (l, r) = (&inputs[0], &inputs[1]);
    let shape = broadcast_shapes(op, &l.shape, &r.shape)?;
    let compute = binary_compute_dtype(l, r);
    if compute.is_complex() && !b.takes_complex() {
        return Err(unsupported(
            op,
            compute,
            "real operands (complex numbers have no order)",
        ));
    }
    let out = match b.result() {
        BinaryResult::Promoted => compute,
        BinaryResult::PromotedNumeric if compute.is_bool() => {
            return Err(Error::Invalid {
                op,
                message: format!(
                    "got two bool tensors ({l} and {r}), expected a numeric dtype; \
                     use logical_xor / bitwise ops for bools"
                ),
            });
        }
        BinaryResult::PromotedNumeric => compute,
        BinaryResult::Float => compute.to_float(),
        BinaryResult::Bool => DType::Bool,
        BinaryResult::Integral if compute.is_float() => {
            return Err(unsupported(op, compute, "integer or bool tensors"));
        }
        BinaryResult::Integral => compute,
        BinaryResult::FloatOperands if !compute.is_float() => {
            return Err(unsupported(op, compute, "float tensors"));
        }
        BinaryResult::FloatOperands => compute,
        BinaryResult::Integer if compute.is_float() || compute.is_bool() => {
            return Err(unsupported(op, compute, "integer tensors"));
        }
        BinaryResult::Integer => compute,
        BinaryResult::ComplexOfFloats
            if l.dtype != r.dtype || !matches!(l.dtype, DType::F32 | DType::F64) =>
        {
            return Err(Error::Invalid {
                op,
                message: format!(
                    "got {l} and {r}, expected two float32 or two float64 tensors \
                     (the parts of a complex64 or complex128 result)"
                ),
            });
        }
        BinaryResult::ComplexOfFloats => compute.to_complex(),
    };
    Ok(TensorType { dtype: out, shape })
}

pub(super) fn where_(op: &'static str, inputs: &[TensorType]) -> Result<TensorType> {
    arity(op, inputs, 3)?;
    let (c, x, y) = (&inputs[0], &inputs[1], &inputs[2]);
    if !c.dtype.is_bool() {
        return Err(Error::Invalid {
            op,
            message: format!("condition has dtype {}, expected bool", c.dtype),
        });
    }
    let shape = broadcast_shapes(op, &c.shape, &x.shape)?;
    let shape = broadcast_shapes(op, &shape, &y.shape)?;
    Ok(TensorType {
        dtype: binary_compute_dtype(x, y),
        shape,
    })
}

pub(super) fn clamp(
    op: &'static str,
    min: Option<Scalar>,
    max: Option<Scalar>,
    inputs: &[TensorType],
) -> Result<TensorType> {
    arity(op, inputs, 1)?;
    let x = &inputs[0];
    if min.is_none() && max.is_none() {
        return Err(Error::Invalid {
            op,
            message: "got neither min nor max, expected at least one".into(),
        });
    }
    if x.dtype.is_bool() || x.dtype.is_complex() {
        return Err(unsupported(op, x.dtype, "a real numeric dtype"));
    }
    Ok(x.with_dtype(clamp_dtype(x, min, max)))
}

/// The bits of `x` read as `dtype`: the shape gains a last dim of the size
/// ratio when elements shrink, and loses one (which must equal the ratio)
/// when they grow.
pub(super) fn bitcast(op: &'static str, dtype: DType, inputs: &[TensorType]) -> Result<TensorType> {
    arity(op, inputs, 1)?;
    let x = &inputs[0];
    for d in [x.dtype, dtype] {
        if d.is_bool() {
            return Err(unsupported(
                op,
                d,
                "a numeric dtype (bool has no bit layout to reinterpret)",
            ));
        }
    }
    let (from, to) = (x.dtype.size_in_bytes() as i64, dtype.size_in_bytes() as i64);
    let mut shape = x.shape.to_vec();
    if from > to {
        shape.push(from / to);
    } else if from < to {
        if shape.last() != Some(&(to / from)) {
            return Err(Error::ShapeMismatch {
                op,
                got: format!("{x}"),
                expected: format!(
                    "a last dim of {} ({dtype} elements are {to} bytes, {} ones {from})",
                    to / from,
                    x.dtype
                ),
            });
        }
        shape.pop();
    }
    Ok(TensorType::new(dtype, &shape))
}

/// `torch.clamp` promotes with its scalar bounds: `clamp(int_tensor, 0.5)` is float.
pub fn clamp_dtype(x: &TensorType, min: Option<Scalar>, max: Option<Scalar>) -> DType {
    let mut rt = ResultType::new().tensor(x.dtype, x.rank());
    for s in [min, max].into_iter().flatten() {
        rt = rt.scalar(s.category());
    }
    rt.finish()
}

/// `Op::Ternary`: the tensors broadcast and promoted; the scalar, last, is
/// 0-d (its dtype is the caller's choice: float32 for low precision floats).
pub(super) fn ternary(op: &'static str, t: TernaryOp, inputs: &[TensorType]) -> Result<TensorType> {
    let n = t.tensors();
    arity(op, inputs, n + 1)?;
    let (tensors, s) = (&inputs[..n], &inputs[n]);
    if s.rank() != 0 {
        return Err(Error::Invalid {
            op,
            message: format!("got a scalar operand {s}; expected a 0-d one"),
        });
    }
    let mut shape = tensors[0].shape.clone();
    let mut promoted = ResultType::new();
    for x in tensors {
        shape = broadcast_shapes(op, &shape, &x.shape)?;
        promoted = promoted.tensor(x.dtype, x.rank());
    }
    let dtype = promoted.finish();
    let inexact = matches!(t, TernaryOp::Addcdiv | TernaryOp::Lerp);
    if dtype.is_bool() || (inexact && !dtype.is_inexact()) || s.dtype.is_bool() {
        let expected = if inexact {
            "floating point or complex tensors"
        } else {
            "numeric tensors"
        };
        return Err(unsupported(op, dtype, expected));
    }
    Ok(TensorType { dtype, shape })
}
