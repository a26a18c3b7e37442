//! The elementwise ops, declared once.
//!
//! Each op is one line of [`for_each_unary_op!`] or [`for_each_binary_op!`]:
//! its variant, its name (PyTorch's: the `Tensor` method, the C ABI's op name,
//! the ATen kernel), the dtype rule of its result and the ATen overloads the
//! PyTorch backend registers for it. Everything else is generated from that
//! line: the enum, `ALL`, `name()`/`from_name()`, the result dtype in
//! inference, the runtime's `Tensor` methods, the C header's op lists (which
//! the PyTorch backend's kernel registration expands). What an op computes is
//! its lowering, `lower/elementwise.rs`: a new elementwise op is a line here
//! and a case there.
//!
//! ATen overloads: `out` registers the kernel as `aten::<name>.out` (and a
//! functional fast path when the rule allows it), `Tensor_out` as
//! `aten::<name>.Tensor_out`, and so on; `none` means the backend writes that
//! kernel by hand (gelu's `approximate`, add's `alpha`) or ATen has none.

/// How a unary op's result dtype follows its input's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryResult {
    /// Floats keep their dtype; integers and bools compute in the default
    /// float dtype, as PyTorch's float functions (exp, tanh, ...).
    Float,
    /// As `Float`, but a bool input is an error (gelu).
    FloatOfNumeric,
    /// The input's dtype; a bool input is an error (neg, abs).
    Numeric,
    /// The input's dtype, bools included (sign).
    Same,
    /// Bool (logical_not, isnan).
    Bool,
    /// The input's dtype, which must be an integer or bool (bitwise_not).
    Integral,
    /// The dtype of a complex input's parts; the input must be complex
    /// (real, imag).
    Part,
}

/// How a binary op's result dtype follows its operands' promoted dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryResult {
    /// The promoted dtype (add, mul).
    Promoted,
    /// The promoted dtype; two bools are an error (sub, pow).
    PromotedNumeric,
    /// The promoted dtype, integers as the default float dtype (div).
    Float,
    /// Bool (comparisons, logical ops).
    Bool,
    /// The promoted dtype, which must be an integer or bool (bitwise ops).
    Integral,
    /// The promoted dtype, which must be a float (nextafter).
    FloatOperands,
    /// The promoted dtype, which must be an integer, not bool (gcd, shifts).
    Integer,
    /// The complex dtype of two float operands of one dtype, float32 or
    /// float64 (complex, polar).
    ComplexOfFloats,
}

/// Hands the unary op table to `$callback!`: per op, its doc comment, then
/// `Variant name rule aten_out,` (see the module's doc).
#[macro_export]
macro_rules! for_each_unary_op {
    ($callback:ident) => {
        $callback! {
            /// `-x`.
            Neg neg Numeric out,
            /// `|x|`.
            Abs abs Numeric out,
            /// `e^x`; integers compute in float32, as in PyTorch.
            Exp exp Float out,
            /// The natural logarithm.
            Log log Float out,
            /// `log(1 + x)`, accurate near 0.
            Log1p log1p Float out,
            Sqrt sqrt Float out,
            /// `1 / sqrt(x)`.
            Rsqrt rsqrt Float out,
            Tanh tanh Float out,
            /// `1 / (1 + e^-x)`.
            Sigmoid sigmoid Float out,
            /// `max(x, 0)`.
            Relu relu Numeric none,
            /// `gelu(x) = x * Phi(x)`, with the exact erf form.
            Gelu gelu FloatOfNumeric none,
            /// The tanh approximation of gelu (`approximate="tanh"`).
            GeluTanh gelu_tanh FloatOfNumeric none,
            Sin sin Float out,
            Cos cos Float out,
            Floor floor Numeric out,
            Ceil ceil Numeric out,
            /// Round half to even, as `torch.round`.
            Round round Numeric out,
            /// -1, 0 or 1 (false or true for bools).
            Sign sign Same out,
            /// The error function.
            Erf erf Float out,
            LogicalNot logical_not Bool out,
            IsNan isnan Bool none,
            /// `~x`: each bit flipped; for bools, logical not.
            BitwiseNot bitwise_not Integral out,
            /// `1 - erf(x)`, accurate where erf(x) is near 1.
            Erfc erfc Float out,
            /// `ln |gamma(x)|` (+inf at the poles, 0 and the negative integers).
            Lgamma lgamma Float out,
            /// The derivative of lgamma: -inf at +0 and +inf at -0, NaN at
            /// the negative integers, as PyTorch.
            Digamma digamma Float out,
            /// The inverse hyperbolic sine.
            Asinh asinh Float out,
            /// The inverse hyperbolic cosine (NaN below 1).
            Acosh acosh Float out,
            /// The inverse hyperbolic tangent (+-inf at +-1, NaN beyond).
            Atanh atanh Float out,
            /// The modified Bessel function of the first kind, order 0.
            I0 i0 Float out,
            /// `e^-|x| i0(x)`.
            SpecialI0e special_i0e Float out,
            /// The modified Bessel function of the first kind, order 1.
            SpecialI1 special_i1 Float out,
            /// `e^-|x| i1(x)`.
            SpecialI1e special_i1e Float out,
            /// `i0` under `torch.special`'s other name.
            SpecialModifiedBesselI0 special_modified_bessel_i0 Float out,
            /// `special_i1` under `torch.special`'s other name.
            SpecialModifiedBesselI1 special_modified_bessel_i1 Float out,
            /// The standard normal quantile (the inverse of its CDF).
            SpecialNdtri special_ndtri Float out,
            /// The log of the standard normal CDF, accurate in both tails.
            SpecialLogNdtr special_log_ndtr Float out,
            /// The scaled complementary error function `e^(x^2) erfc(x)`.
            SpecialErfcx special_erfcx Float out,
            /// The modified Bessel function of the second kind, order 0.
            SpecialModifiedBesselK0 special_modified_bessel_k0 Float out,
            /// The modified Bessel function of the second kind, order 1.
            SpecialModifiedBesselK1 special_modified_bessel_k1 Float out,
            /// `e^x K0(x)`.
            SpecialScaledModifiedBesselK0 special_scaled_modified_bessel_k0 Float out,
            /// `e^x K1(x)`.
            SpecialScaledModifiedBesselK1 special_scaled_modified_bessel_k1 Float out,
            /// The Bessel function of the first kind, order 0.
            SpecialBesselJ0 special_bessel_j0 Float out,
            /// The Bessel function of the first kind, order 1.
            SpecialBesselJ1 special_bessel_j1 Float out,
            /// The Bessel function of the second kind, order 0.
            SpecialBesselY0 special_bessel_y0 Float out,
            /// The Bessel function of the second kind, order 1.
            SpecialBesselY1 special_bessel_y1 Float out,
            /// Airy's function Ai.
            SpecialAiryAi special_airy_ai Float out,
            /// `sin(x) / x`.
            SpecialSphericalBesselJ0 special_spherical_bessel_j0 Float out,
            /// The real part of a complex tensor.
            Real real Part none,
            /// The imaginary part of a complex tensor.
            Imag imag Part none,
            /// The complex conjugate; a real tensor unchanged (PyTorch's
            /// `conj_physical`: `conj` itself is a lazy view there).
            Conj conj_physical Same out,
            /// The argument of a complex number in (-pi, pi]; of a real one
            /// 0 or pi (NaN for NaN), in a float dtype.
            Angle angle Float none,
            /// `x / |x|` for complex numbers (0 at 0), `sign` for real ones.
            Sgn sgn Same out,
        }
    };
}

/// Hands the binary op table to `$callback!`: per op, its doc comment, then
/// `Variant name rule aten_tensor_out aten_scalar_out,` (see the module's doc).
#[macro_export]
macro_rules! for_each_binary_op {
    ($callback:ident) => {
        $callback! {
            Add add Promoted none none,
            Sub sub PromotedNumeric none none,
            Mul mul Promoted out none,
            /// True division (`torch.div`): integers divide as floats.
            Div div Float out none,
            Pow pow PromotedNumeric Tensor_Tensor_out Tensor_Scalar_out,
            Maximum maximum Promoted out none,
            Minimum minimum Promoted out none,
            /// Python-style modulo: the result has the sign of the divisor.
            Remainder remainder PromotedNumeric Tensor_out Scalar_out,
            /// Division rounded down (`torch.floor_divide`, `//`): integers
            /// divide exactly as integers, floats as PyTorch rounds them.
            FloorDivide floor_divide PromotedNumeric none none,
            Atan2 atan2 Float out none,
            Eq eq Bool Tensor_out Scalar_out,
            Ne ne Bool Tensor_out Scalar_out,
            Lt lt Bool Tensor_out Scalar_out,
            Le le Bool Tensor_out Scalar_out,
            Gt gt Bool Tensor_out Scalar_out,
            Ge ge Bool Tensor_out Scalar_out,
            LogicalAnd logical_and Bool out none,
            LogicalOr logical_or Bool out none,
            LogicalXor logical_xor Bool out none,
            BitAnd bitwise_and Integral Tensor_out none,
            BitOr bitwise_or Integral Tensor_out none,
            BitXor bitwise_xor Integral Tensor_out none,
            /// `a << b`; 0 where b is negative or at least the bit width.
            ShiftLeft bitwise_left_shift Integer Tensor_out none,
            /// `a >> b`, arithmetic for signed dtypes; where b is negative or
            /// at least the bit width, the sign bit everywhere.
            ShiftRight bitwise_right_shift Integer Tensor_out none,
            /// The greatest common divisor, non-negative (as PyTorch, except
            /// that `gcd(int64 min, 0)` is int64 min).
            Gcd gcd Integer out none,
            /// The least common multiple, non-negative; 0 if either is 0.
            Lcm lcm Integer out none,
            /// `polygamma(n, x)`, the n-th derivative of digamma (n a
            /// non-negative integer, the left operand).
            Polygamma polygamma Float none none,
            /// The Hurwitz zeta function `sum_k (k + q)^-x` of (x, q).
            SpecialZeta special_zeta Float out none,
            /// The regularized lower incomplete gamma function P(a, x).
            Igamma igamma Float out none,
            /// The regularized upper incomplete gamma function Q(a, x).
            Igammac igammac Float out none,
            /// The next float after the first operand towards the second.
            Nextafter nextafter FloatOperands out none,
            /// `d x / d a` of a standard gamma sample `x` of shape `a` (the
            /// operands in that order): `rsample()`'s backward.
            StandardGammaGrad _standard_gamma_grad Float out none,
            /// `re + i im` of two float tensors of one dtype.
            Complex complex ComplexOfFloats out none,
            /// `abs * (cos(angle) + i sin(angle))` of (abs, angle).
            Polar polar ComplexOfFloats out none,
        }
    };
}

impl UnaryOp {
    /// Whether the op takes a complex input (complex64, complex128); others
    /// refuse it, as PyTorch's kernels for complex dtypes do.
    pub fn takes_complex(self) -> bool {
        use UnaryOp::*;
        matches!(
            self,
            Neg | Abs
                | Exp
                | Log
                | Log1p
                | Sqrt
                | Rsqrt
                | Tanh
                | Sigmoid
                | Sin
                | Cos
                | Asinh
                | Acosh
                | Atanh
                | IsNan
                | LogicalNot
                | Real
                | Imag
                | Conj
                | Angle
                | Sgn
        )
    }

    /// Whether a complex input gives a result of its parts' dtype (`|z|`,
    /// the argument).
    pub fn complex_to_real(self) -> bool {
        matches!(
            self,
            UnaryOp::Abs | UnaryOp::Angle | UnaryOp::Real | UnaryOp::Imag
        )
    }
}

impl BinaryOp {
    /// Whether the op computes in a complex dtype (the rest refuse one, as
    /// PyTorch's kernels for complex dtypes do: there is no order on them).
    pub fn takes_complex(self) -> bool {
        use BinaryOp::*;
        matches!(
            self,
            Add | Sub | Mul | Div | Pow | Eq | Ne | LogicalAnd | LogicalOr | LogicalXor
        )
    }
}

/// An enum of ops a caller names, from a table: per op, its doc comment, then
/// `Variant name,` (the name is PyTorch's). Gives `ALL`, `name()` and
/// `from_name()`. The elementwise tables below are these and more (a result
/// rule, ATen overloads); the runtime's reductions and scans are these.
#[macro_export]
macro_rules! named_ops {
    ($(#[$meta:meta])* $enum:ident { $($(#[$doc:meta])* $variant:ident $name:ident,)* }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $enum {
            $($(#[$doc])* $variant,)*
        }

        impl $enum {
            pub const ALL: &'static [$enum] = &[$($enum::$variant),*];

            /// PyTorch's name for the op.
            pub fn name(self) -> &'static str {
                match self {
                    $($enum::$variant => stringify!($name),)*
                }
            }

            /// The op by its name.
            pub fn from_name(name: &str) -> Option<$enum> {
                match name {
                    $(stringify!($name) => Some($enum::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

/// The enum, its list, its names and its rules, from a table.
macro_rules! declare_ops {
    ($(#[$meta:meta])* $enum:ident, $rule:ident, $(
        $(#[$doc:meta])* $variant:ident $name:ident $result:ident $($aten:ident)+,
    )*) => {
        $crate::named_ops! {
            $(#[$meta])*
            $enum { $($(#[$doc])* $variant $name,)* }
        }

        impl $enum {
            /// How the result's dtype follows the operands'.
            pub fn result(self) -> $rule {
                match self {
                    $($enum::$variant => $rule::$result,)*
                }
            }

            /// The ATen overloads the PyTorch backend registers from the
            /// table (`"none"`: none, or written by hand).
            pub fn aten_overloads(self) -> &'static [&'static str] {
                match self {
                    $($enum::$variant => &[$(stringify!($aten)),+],)*
                }
            }
        }
    };
}

macro_rules! declare_unary_ops {
    ($($table:tt)*) => {
        declare_ops! {
            /// A unary elementwise op.
            UnaryOp, UnaryResult, $($table)*
        }
    };
}

macro_rules! declare_binary_ops {
    ($($table:tt)*) => {
        declare_ops! {
            /// A binary elementwise op (broadcasting, PyTorch's type promotion).
            BinaryOp, BinaryResult, $($table)*
        }
    };
}

for_each_unary_op!(declare_unary_ops);
for_each_binary_op!(declare_binary_ops);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_is_found_by_its_name_and_names_are_distinct() {
        for &u in UnaryOp::ALL {
            assert_eq!(UnaryOp::from_name(u.name()), Some(u));
        }
        for &b in BinaryOp::ALL {
            assert_eq!(BinaryOp::from_name(b.name()), Some(b));
        }
        let mut names: Vec<&str> = UnaryOp::ALL.iter().map(|u| u.name()).collect();
        names.extend(BinaryOp::ALL.iter().map(|b| b.name()));
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count, "an op name is used twice");
        assert_eq!(UnaryOp::from_name("nope"), None);
        assert_eq!(UnaryOp::from_name("gelu_tanh"), Some(UnaryOp::GeluTanh));
        assert_eq!(BinaryOp::from_name("bitwise_and"), Some(BinaryOp::BitAnd));
    }

    #[test]
    fn the_tables_carry_the_rules_and_overloads() {
        assert_eq!(UnaryOp::Exp.result(), UnaryResult::Float);
        assert_eq!(UnaryOp::IsNan.result(), UnaryResult::Bool);
        assert_eq!(BinaryOp::Div.result(), BinaryResult::Float);
        assert_eq!(UnaryOp::Exp.aten_overloads(), ["out"]);
        assert_eq!(
            BinaryOp::Pow.aten_overloads(),
            ["Tensor_Tensor_out", "Tensor_Scalar_out"]
        );
        assert!(BinaryOp::ALL.iter().all(|b| b.aten_overloads().len() == 2));
        assert!(UnaryOp::ALL.iter().all(|u| u.aten_overloads().len() == 1));
    }
}
