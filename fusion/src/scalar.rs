//! Host scalars (Python numbers) and their MLIR literals.

use std::fmt;
use std::hash::{Hash, Hasher};

use crate::dtype::{Category, DType};

/// A scalar operand: a learning rate, a fill value, a clamp bound.
#[derive(Clone, Copy, Debug)]
pub enum Scalar {
    Bool(bool),
    Int(i64),
    Float(f64),
}

impl Scalar {
    pub fn category(self) -> Category {
        match self {
            Scalar::Bool(_) => Category::Bool,
            Scalar::Int(_) => Category::Int,
            Scalar::Float(_) => Category::Float,
        }
    }

    pub fn as_f64(self) -> f64 {
        match self {
            Scalar::Bool(b) => b as i64 as f64,
            Scalar::Int(i) => i as f64,
            Scalar::Float(f) => f,
        }
    }

    /// The value as an integer (floats truncate toward zero, as a cast does).
    pub fn as_i64(self) -> i64 {
        match self {
            Scalar::Bool(b) => b as i64,
            Scalar::Int(i) => i,
            Scalar::Float(f) => f as i64,
        }
    }

    pub fn is_zero(self) -> bool {
        self.as_f64() == 0.0
    }

    /// The MLIR literal of this value converted to `dtype`, as it appears in
    /// `dense<...>`. Floats are written as exact bit patterns, so NaN, infinities
    /// and every rounding survive the round trip.
    pub fn mlir_literal(self, dtype: DType) -> String {
        match dtype {
            DType::Bool => (if self.as_f64() != 0.0 {
                "true"
            } else {
                "false"
            })
            .to_string(),
            DType::U8 => (self.as_i64() as u8).to_string(),
            DType::I8 => (self.as_i64() as i8).to_string(),
            DType::I16 => (self.as_i64() as i16).to_string(),
            DType::I32 => (self.as_i64() as i32).to_string(),
            DType::I64 => self.as_i64().to_string(),
            DType::F16 => format!("0x{:04X}", half::f16::from_f64(self.as_f64()).to_bits()),
            DType::BF16 => format!("0x{:04X}", half::bf16::from_f64(self.as_f64()).to_bits()),
            DType::F32 => format!("0x{:08X}", (self.as_f64() as f32).to_bits()),
            DType::F64 => format!("0x{:016X}", self.as_f64().to_bits()),
            // A real value is a complex one with no imaginary part.
            DType::C64 | DType::C128 => {
                let part = dtype.real_part();
                let zero = Scalar::Float(0.0).mlir_literal(part);
                format!("({}, {zero})", self.mlir_literal(part))
            }
        }
    }

    /// Identity used for hashing and equality: floats by bit pattern.
    fn key(self) -> (u8, u64) {
        match self {
            Scalar::Bool(b) => (0, b as u64),
            Scalar::Int(i) => (1, i as u64),
            Scalar::Float(f) => (2, f.to_bits()),
        }
    }
}

impl PartialEq for Scalar {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Scalar {}

impl Hash for Scalar {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state)
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Bool(b) => write!(f, "{b}"),
            Scalar::Int(i) => write!(f, "{i}"),
            Scalar::Float(x) => write!(f, "{x}"),
        }
    }
}

macro_rules! from_scalar {
    ($($t:ty => $v:ident as $c:ty),*) => {$(
        impl From<$t> for Scalar {
            fn from(x: $t) -> Scalar {
                Scalar::$v(x as $c)
            }
        }
    )*};
}

from_scalar!(f64 => Float as f64, f32 => Float as f64, i64 => Int as i64, i32 => Int as i64,
    i16 => Int as i64, i8 => Int as i64, u8 => Int as i64, usize => Int as i64);

impl From<bool> for Scalar {
    fn from(b: bool) -> Scalar {
        Scalar::Bool(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_are_exact() {
        assert_eq!(Scalar::Float(1.0).mlir_literal(DType::F32), "0x3F800000");
        assert_eq!(
            Scalar::Float(f64::NAN).mlir_literal(DType::F64),
            "0x7FF8000000000000"
        );
        assert_eq!(Scalar::Float(1.0).mlir_literal(DType::BF16), "0x3F80");
        assert_eq!(Scalar::Int(1000).mlir_literal(DType::I8), "-24");
        assert_eq!(Scalar::Float(2.7).mlir_literal(DType::I32), "2");
        assert_eq!(Scalar::Int(3).mlir_literal(DType::Bool), "true");
        assert_eq!(
            Scalar::Int(2).mlir_literal(DType::C64),
            "(0x40000000, 0x00000000)"
        );
    }

    #[test]
    fn floats_compare_by_bits() {
        assert_eq!(Scalar::Float(f64::NAN), Scalar::Float(f64::NAN));
        assert_ne!(Scalar::Float(0.0), Scalar::Float(-0.0));
        assert_ne!(Scalar::Float(1.0), Scalar::Int(1));
    }
}
