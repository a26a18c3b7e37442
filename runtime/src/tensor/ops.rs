//! Operators on references: `&a + &b`, `&a * 2.0`, `1.0 - &a`, `-&a`.
//! They return `Result<Tensor>`, like every op.

use std::ops::{Add, Div, Mul, Neg, Sub};

use fusion::{BinaryOp, Scalar};

use super::Tensor;
use crate::error::Result;

macro_rules! binary_operator {
    ($trait:ident, $method:ident, $op:ident) => {
        impl $trait<&Tensor> for &Tensor {
            type Output = Result<Tensor>;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                self.binary(BinaryOp::$op, rhs.into())
            }
        }
        impl $trait<Tensor> for &Tensor {
            type Output = Result<Tensor>;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Result<Tensor> {
                self.binary(BinaryOp::$op, (&rhs).into())
            }
        }
        impl $trait<&Tensor> for Tensor {
            type Output = Result<Tensor>;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                self.binary(BinaryOp::$op, rhs.into())
            }
        }
        impl $trait<Tensor> for Tensor {
            type Output = Result<Tensor>;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Result<Tensor> {
                self.binary(BinaryOp::$op, (&rhs).into())
            }
        }
        scalar_operator!($trait, $method, $op, f64, i64);
    };
}

macro_rules! scalar_operator {
    ($trait:ident, $method:ident, $op:ident, $($t:ty),*) => {$(
        impl $trait<$t> for &Tensor {
            type Output = Result<Tensor>;
            #[track_caller]
            fn $method(self, rhs: $t) -> Result<Tensor> {
                self.binary_scalar(BinaryOp::$op, Scalar::from(rhs), false)
            }
        }
        impl $trait<$t> for Tensor {
            type Output = Result<Tensor>;
            #[track_caller]
            fn $method(self, rhs: $t) -> Result<Tensor> {
                self.binary_scalar(BinaryOp::$op, Scalar::from(rhs), false)
            }
        }
        impl $trait<&Tensor> for $t {
            type Output = Result<Tensor>;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Result<Tensor> {
                rhs.binary_scalar(BinaryOp::$op, Scalar::from(self), true)
            }
        }
    )*};
}

binary_operator!(Add, add, Add);
binary_operator!(Sub, sub, Sub);
binary_operator!(Mul, mul, Mul);
binary_operator!(Div, div, Div);

impl Neg for &Tensor {
    type Output = Result<Tensor>;
    #[track_caller]
    fn neg(self) -> Result<Tensor> {
        Tensor::neg(self)
    }
}

impl Neg for Tensor {
    type Output = Result<Tensor>;
    #[track_caller]
    fn neg(self) -> Result<Tensor> {
        Tensor::neg(&self)
    }
}
