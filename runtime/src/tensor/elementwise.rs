//! Elementwise ops, with PyTorch's broadcasting and type promotion.

use std::sync::Arc;

use fusion::{BinaryOp, DType, Op, ResultType, Scalar, UnaryOp};

use super::Tensor;
use crate::error::Result;
use crate::value::Value;

/// An operand of an elementwise op: a tensor, or a scalar (a Python number).
/// Scalars do not promote a tensor of their own category: `int8 + 1000` is int8,
/// `float16 * 0.5` is float16, but `int32 * 0.5` is float32.
#[derive(Clone, Copy, Debug)]
pub enum Operand<'a> {
    Tensor(&'a Tensor),
    Scalar(Scalar),
}

impl<'a> From<&'a Tensor> for Operand<'a> {
    fn from(t: &'a Tensor) -> Self {
        Operand::Tensor(t)
    }
}

macro_rules! scalar_operand {
    ($($t:ty),*) => {$(
        impl From<$t> for Operand<'_> {
            fn from(x: $t) -> Self {
                Operand::Scalar(Scalar::from(x))
            }
        }
    )*};
}
scalar_operand!(f64, f32, i64, i32, bool, Scalar);

impl Operand<'_> {
    /// The dtype `x op self` computes in (PyTorch's promotion; a scalar is weak).
    pub fn promoted_with(&self, x: &Tensor) -> DType {
        self.add_to(ResultType::new().tensor(x.dtype(), x.rank()))
            .finish()
    }

    fn add_to(&self, rt: ResultType) -> ResultType {
        match self {
            Operand::Tensor(t) => rt.tensor(t.dtype(), t.rank()),
            Operand::Scalar(s) => rt.scalar(s.category()),
        }
    }
}

// A method per elementwise op of fusion's op tables (`fusion/src/elementwise.rs`).
macro_rules! unary_methods {
    ($($(#[$doc:meta])* $variant:ident $name:ident $rule:ident $aten:ident,)*) => {
        impl Tensor {$(
            $(#[$doc])*
            #[track_caller]
            pub fn $name(&self) -> Result<Tensor> {
                self.op(Op::Unary(UnaryOp::$variant), &[])
            }
        )*}
    };
}

macro_rules! binary_methods {
    ($($(#[$doc:meta])* $variant:ident $name:ident $rule:ident $($aten:ident)+,)*) => {
        impl Tensor {$(
            $(#[$doc])*
            #[track_caller]
            pub fn $name<'a>(&self, rhs: impl Into<Operand<'a>>) -> Result<Tensor> {
                self.binary(BinaryOp::$variant, rhs.into())
            }
        )*}
    };
}

fusion::for_each_unary_op!(unary_methods);
fusion::for_each_binary_op!(binary_methods);

impl Tensor {
    /// `op(self)` for any unary op.
    #[track_caller]
    pub fn unary_op(&self, op: UnaryOp) -> Result<Tensor> {
        self.op(Op::Unary(op), &[])
    }

    /// `self op rhs` for any binary op.
    #[track_caller]
    pub fn binary_op<'a>(&self, op: BinaryOp, rhs: impl Into<Operand<'a>>) -> Result<Tensor> {
        self.binary(op, rhs.into())
    }

    /// `lhs op self` with a scalar on the left (`2 - x`, `2 ** x`).
    #[track_caller]
    pub fn binary_op_reversed(&self, op: BinaryOp, lhs: impl Into<Scalar>) -> Result<Tensor> {
        self.binary_scalar(op, lhs.into(), true)
    }

    /// `self op rhs`.
    #[track_caller]
    pub(crate) fn binary(&self, b: BinaryOp, rhs: Operand) -> Result<Tensor> {
        match rhs {
            Operand::Tensor(t) => self.op(Op::Binary(b), &[t]),
            Operand::Scalar(s) => self.binary_scalar(b, s, false),
        }
    }

    /// `self op s`, or `s op self` when `reversed`.
    #[track_caller]
    pub(crate) fn binary_scalar(&self, b: BinaryOp, s: Scalar, reversed: bool) -> Result<Tensor> {
        let dtype = ResultType::new()
            .tensor(self.dtype(), self.rank())
            .scalar(s.category())
            .finish();
        self.record(Op::Binary(b).name(), &[], |r| {
            let k = r.scalar(s, dtype)?;
            let inputs = if reversed {
                [&k, &self.value]
            } else {
                [&self.value, &k]
            };
            r.node(Op::Binary(b), &inputs)
        })
    }

    /// `torch.where(condition, x, y)`: `x` where `condition` (bool) holds, else `y`.
    #[track_caller]
    pub fn where_<'a, 'b>(
        condition: &Tensor,
        x: impl Into<Operand<'a>>,
        y: impl Into<Operand<'b>>,
    ) -> Result<Tensor> {
        let (x, y) = (x.into(), y.into());
        let dtype = y.add_to(x.add_to(ResultType::new())).finish();
        let tensors: Vec<&Tensor> = [x, y]
            .iter()
            .filter_map(|o| match o {
                Operand::Tensor(t) => Some(*t),
                Operand::Scalar(_) => None,
            })
            .collect();
        condition.record("where", &tensors, |r| {
            let mut operand = |o: Operand| -> Result<Arc<Value>> {
                match o {
                    Operand::Tensor(t) => Ok(t.value.clone()),
                    Operand::Scalar(s) => r.scalar(s, dtype),
                }
            };
            let (xv, yv) = (operand(x)?, operand(y)?);
            r.node(Op::Where, &[&condition.value, &xv, &yv])
        })
    }

    /// Clamps every element to `[min, max]`.
    #[track_caller]
    pub fn clamp(&self, min: impl Into<Scalar>, max: impl Into<Scalar>) -> Result<Tensor> {
        self.op(
            Op::Clamp {
                min: Some(min.into()),
                max: Some(max.into()),
            },
            &[],
        )
    }

    #[track_caller]
    pub fn clamp_min(&self, min: impl Into<Scalar>) -> Result<Tensor> {
        self.op(
            Op::Clamp {
                min: Some(min.into()),
                max: None,
            },
            &[],
        )
    }

    #[track_caller]
    pub fn clamp_max(&self, max: impl Into<Scalar>) -> Result<Tensor> {
        self.op(
            Op::Clamp {
                min: None,
                max: Some(max.into()),
            },
            &[],
        )
    }

    /// The tensor converted to `dtype` (`tensor.to(dtype)`).
    #[track_caller]
    pub fn to_dtype(&self, dtype: DType) -> Result<Tensor> {
        if dtype == self.dtype() {
            return Ok(self.clone());
        }
        self.op(Op::Cast(dtype), &[])
    }

    /// The tensor's bits read as `dtype`, on the device (`Tensor.view(dtype)`
    /// of a contiguous tensor): the same element size keeps the shape; a
    /// smaller one adds a last dim of the size ratio (float32 `[n]` as uint8
    /// is `[n, 4]`); a larger one takes a last dim of the ratio away.
    #[track_caller]
    pub fn bitcast(&self, dtype: DType) -> Result<Tensor> {
        if dtype == self.dtype() {
            return Ok(self.clone());
        }
        self.op(Op::Bitcast(dtype), &[])
    }
}
