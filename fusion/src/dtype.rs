//! Element types and PyTorch's type-promotion rules.

use std::fmt;

/// An element type. The set PyTorch users reach for on accelerators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    Bool,
    U8,
    I8,
    I16,
    I32,
    I64,
    F16,
    BF16,
    F32,
    F64,
    /// Two f32s, real then imaginary (PyTorch's `complex64`, `cfloat`).
    C64,
    /// Two f64s (`complex128`, `cdouble`).
    C128,
}

/// Bool < integer < floating point < complex: the order PyTorch promotes
/// across.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Category {
    Bool,
    Int,
    Float,
    Complex,
}

impl DType {
    pub const ALL: [DType; 12] = [
        DType::Bool,
        DType::U8,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
        DType::C64,
        DType::C128,
    ];

    /// The dtype a Python float becomes (`torch.get_default_dtype()`).
    pub const DEFAULT_FLOAT: DType = DType::F32;
    /// The dtype a Python int becomes.
    pub const DEFAULT_INT: DType = DType::I64;
    /// The dtype a Python complex becomes (`complex64` under the default
    /// float dtype float32).
    pub const DEFAULT_COMPLEX: DType = DType::C64;

    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::Bool | DType::U8 | DType::I8 => 1,
            DType::I16 | DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::F32 => 4,
            DType::I64 | DType::F64 | DType::C64 => 8,
            DType::C128 => 16,
        }
    }

    pub fn category(self) -> Category {
        match self {
            DType::Bool => Category::Bool,
            DType::U8 | DType::I8 | DType::I16 | DType::I32 | DType::I64 => Category::Int,
            DType::F16 | DType::BF16 | DType::F32 | DType::F64 => Category::Float,
            DType::C64 | DType::C128 => Category::Complex,
        }
    }

    pub fn is_complex(self) -> bool {
        self.category() == Category::Complex
    }

    /// The dtype of a complex dtype's parts (`torch.real`'s result); a real
    /// dtype is its own.
    pub fn real_part(self) -> DType {
        match self {
            DType::C64 => DType::F32,
            DType::C128 => DType::F64,
            d => d,
        }
    }

    /// The complex dtype whose parts are `self` (c10's `toComplexType`); a
    /// half-precision float's is complex64 (tpu has no complex32), an
    /// integer's or bool's the default complex dtype.
    pub fn to_complex(self) -> DType {
        match self {
            DType::F64 | DType::C128 => DType::C128,
            _ => DType::C64,
        }
    }

    pub fn is_float(self) -> bool {
        self.category() == Category::Float
    }

    pub fn is_int(self) -> bool {
        self.category() == Category::Int
    }

    /// A float or complex dtype: one whose values are not exact integers
    /// (what PyTorch's division-like and interpolating ops ask for).
    pub fn is_inexact(self) -> bool {
        matches!(self.category(), Category::Float | Category::Complex)
    }

    pub fn is_bool(self) -> bool {
        self == DType::Bool
    }

    /// Whether a result of this dtype may be written into a tensor of `to`
    /// (PyTorch's `canCast`, which `out=` and in-place ops obey): never a
    /// complex into a real tensor, a float into an integer one, nor anything
    /// but a bool into a bool one.
    pub fn can_cast_to(self, to: DType) -> bool {
        (!self.is_complex() || to.is_complex())
            && (!self.is_float() || to.is_inexact())
            && (self.is_bool() || !to.is_bool())
    }

    /// Signed integers and floats.
    pub fn is_signed(self) -> bool {
        !matches!(self, DType::Bool | DType::U8)
    }

    /// The MLIR element type (`f32`, `bf16`, `ui8`, `i1`).
    pub fn mlir(self) -> &'static str {
        match self {
            DType::Bool => "i1",
            DType::U8 => "ui8",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::C64 => "complex<f32>",
            DType::C128 => "complex<f64>",
        }
    }

    /// PyTorch's name (`float32`, `bfloat16`, `uint8`, `bool`).
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "uint8",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::C64 => "complex64",
            DType::C128 => "complex128",
        }
    }

    /// Parses PyTorch's names and common aliases (`f32`, `float`, `half`, `long`).
    pub fn parse(name: &str) -> Option<DType> {
        Some(match name {
            "bool" => DType::Bool,
            "uint8" | "u8" => DType::U8,
            "int8" | "i8" => DType::I8,
            "int16" | "i16" | "short" => DType::I16,
            "int32" | "i32" | "int" => DType::I32,
            "int64" | "i64" | "long" => DType::I64,
            "float16" | "f16" | "half" => DType::F16,
            "bfloat16" | "bf16" => DType::BF16,
            "float32" | "f32" | "float" => DType::F32,
            "float64" | "f64" | "double" => DType::F64,
            "complex64" | "c64" | "cfloat" => DType::C64,
            "complex128" | "c128" | "cdouble" => DType::C128,
            _ => return None,
        })
    }

    /// `torch.promote_types(self, other)`.
    pub fn promote(self, other: DType) -> DType {
        use DType::*;
        if self == other {
            return self;
        }
        match (self.category(), other.category()) {
            (Category::Bool, _) => other,
            (_, Category::Bool) => self,
            // complex64 with float64 is complex128: the wider part wins.
            (Category::Complex, _) | (_, Category::Complex) => {
                self.real_part().promote(other.real_part()).to_complex()
            }
            (Category::Int, Category::Float) => other,
            (Category::Float, Category::Int) => self,
            (Category::Int, Category::Int) => {
                // u8 with a signed type needs a signed type that holds 0..=255.
                let (u, s) = match (self, other) {
                    (U8, s) | (s, U8) => (true, s),
                    _ => (false, self),
                };
                if u {
                    match s {
                        I8 | I16 => I16,
                        other => other,
                    }
                } else {
                    self.max(other)
                }
            }
            (Category::Float, Category::Float) => match (self, other) {
                (F16, BF16) | (BF16, F16) => F32,
                _ => self.max(other),
            },
        }
    }

    /// The float dtype an op on `self` computes in when it needs floats
    /// (`torch.exp` of an int tensor is float32; of a complex one, complex).
    pub fn to_float(self) -> DType {
        if self.is_inexact() {
            self
        } else {
            DType::DEFAULT_FLOAT
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The participants of one op, for `torch.result_type`: dimensioned tensors win
/// over 0-d tensors, which win over Python scalars, unless a lower-priority
/// operand is of a higher category (an int tensor times 2.5 is float32).
#[derive(Clone, Copy, Debug, Default)]
pub struct ResultType {
    dim: Option<DType>,
    zero_dim: Option<DType>,
    scalar: Option<DType>,
}

fn promote_opt(a: Option<DType>, b: DType) -> Option<DType> {
    Some(a.map_or(b, |a| a.promote(b)))
}

/// c10's `combine_categories`: the higher-priority result, unless the lower one
/// is of a higher category.
fn combine(higher: Option<DType>, lower: Option<DType>) -> Option<DType> {
    match (higher, lower) {
        (None, l) => l,
        (h, None) => h,
        (Some(h), Some(l)) => {
            if h.is_complex() {
                Some(h)
            } else if l.is_complex() {
                // A complex operand of lower priority keeps the higher one's
                // precision if that is a float (a float64 tensor times 1j is
                // complex128).
                Some(if h.is_float() { h.to_complex() } else { l })
            } else if h.is_float() {
                Some(h)
            } else if h.is_bool() || l.is_float() {
                // A float scalar reaching an int tensor takes the default float
                // dtype (already in `l`), and bool takes anything.
                Some(h.promote(l))
            } else {
                Some(h)
            }
        }
    }
}

impl ResultType {
    pub fn new() -> ResultType {
        ResultType::default()
    }

    /// Adds a tensor operand of `rank` dims.
    pub fn tensor(mut self, dtype: DType, rank: usize) -> ResultType {
        if rank == 0 {
            self.zero_dim = promote_opt(self.zero_dim, dtype);
        } else {
            self.dim = promote_opt(self.dim, dtype);
        }
        self
    }

    /// Adds a Python-scalar operand of `category` (it counts as its default dtype).
    pub fn scalar(mut self, category: Category) -> ResultType {
        let d = match category {
            Category::Bool => DType::Bool,
            Category::Int => DType::DEFAULT_INT,
            Category::Float => DType::DEFAULT_FLOAT,
            Category::Complex => DType::DEFAULT_COMPLEX,
        };
        self.scalar = promote_opt(self.scalar, d);
        self
    }

    pub fn finish(self) -> DType {
        combine(self.dim, combine(self.zero_dim, self.scalar)).unwrap_or(DType::DEFAULT_FLOAT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use DType::*;

    #[test]
    fn a_result_casts_to_an_out_tensor_as_pytorchs_can_cast_says() {
        // Up the ladder bool -> integer -> float, and across within a rung.
        for (from, to) in [
            (Bool, I64),
            (Bool, F16),
            (U8, I8),
            (I64, F32),
            (I64, U8),
            (F64, BF16),
            (Bool, Bool),
        ] {
            assert!(from.can_cast_to(to), "{from} -> {to}");
        }
        // Never down: a float into an integer tensor, anything else into bool.
        for (from, to) in [(F32, I64), (BF16, U8), (I32, Bool), (F32, Bool)] {
            assert!(!from.can_cast_to(to), "{from} -> {to}");
        }
    }

    #[test]
    fn promote_types_matches_pytorch() {
        // Values from torch.promote_types.
        assert_eq!(U8.promote(I8), I16);
        assert_eq!(U8.promote(I16), I16);
        assert_eq!(U8.promote(I32), I32);
        assert_eq!(I8.promote(I64), I64);
        assert_eq!(F16.promote(BF16), F32);
        assert_eq!(BF16.promote(F32), F32);
        assert_eq!(I64.promote(F16), F16);
        assert_eq!(Bool.promote(U8), U8);
        assert_eq!(F64.promote(I32), F64);
        for a in DType::ALL {
            for b in DType::ALL {
                assert_eq!(a.promote(b), b.promote(a), "{a} {b}");
            }
        }
    }

    #[test]
    fn complex_dtypes_promote_and_cast_as_in_pytorch() {
        // Values from torch.promote_types and torch.can_cast.
        assert_eq!(C64.promote(F64), C128);
        assert_eq!(C64.promote(I64), C64);
        assert_eq!(F16.promote(C64), C64);
        assert_eq!(BF16.promote(C128), C128);
        assert_eq!(Bool.promote(C64), C64);
        assert_eq!(U8.promote(C128), C128);
        assert!(!C64.can_cast_to(F32));
        assert!(I64.can_cast_to(C64));
        assert!(C128.can_cast_to(C64));
        assert!(!C64.can_cast_to(Bool));
        // int64 tensor * 1j -> complex64; float64 tensor * 1j -> complex128;
        // float32 tensor * 0-d complex128 tensor -> complex64; a 0-d float64
        // tensor * 1j -> complex128.
        let complex_scalar = |d| {
            ResultType::new()
                .tensor(d, 1)
                .scalar(Category::Complex)
                .finish()
        };
        assert_eq!(complex_scalar(I64), C64);
        assert_eq!(complex_scalar(F64), C128);
        assert_eq!(
            ResultType::new().tensor(F32, 1).tensor(C128, 0).finish(),
            C64
        );
        assert_eq!(
            ResultType::new()
                .tensor(F64, 0)
                .scalar(Category::Complex)
                .finish(),
            C128
        );
    }

    #[test]
    fn result_type_matches_pytorch() {
        // int8 tensor + 1000 -> int8 (a scalar of the same category does not promote).
        assert_eq!(
            ResultType::new()
                .tensor(I8, 1)
                .scalar(Category::Int)
                .finish(),
            I8
        );
        // int32 tensor * 2.5 -> float32.
        assert_eq!(
            ResultType::new()
                .tensor(I32, 1)
                .scalar(Category::Float)
                .finish(),
            F32
        );
        // f16 tensor * 2.5 -> f16.
        assert_eq!(
            ResultType::new()
                .tensor(F16, 2)
                .scalar(Category::Float)
                .finish(),
            F16
        );
        // int8 tensor + 0-d int64 tensor -> int8.
        assert_eq!(ResultType::new().tensor(I8, 1).tensor(I64, 0).finish(), I8);
        // int8 tensor + 0-d float64 tensor -> float64 (a higher category promotes).
        assert_eq!(ResultType::new().tensor(I8, 1).tensor(F64, 0).finish(), F64);
        // bool tensor + 1 -> int64.
        assert_eq!(
            ResultType::new()
                .tensor(Bool, 1)
                .scalar(Category::Int)
                .finish(),
            I64
        );
        // f16 tensor + 0-d f32 tensor -> f16.
        assert_eq!(
            ResultType::new().tensor(F16, 1).tensor(F32, 0).finish(),
            F16
        );
        // Two dimensioned tensors promote normally.
        assert_eq!(
            ResultType::new().tensor(I32, 1).tensor(F16, 3).finish(),
            F16
        );
    }
}
