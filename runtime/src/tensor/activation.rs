//! Elementwise functions PyTorch has that the op set composes from its ops:
//! the math functions without a StableHLO op of their own (`expm1`, `tan`,
//! `erfinv`, ...) and the activations with their backwards (`softplus`,
//! `elu`, `hardswish`, ...). One enum names them all: the C ABI takes them
//! by name (`etpu_pointwise`), and the PyTorch kernels are one call each.

use fusion::{BinaryOp, DType, Scalar};

use super::Tensor;
use crate::error::Result;

/// A composed elementwise function, with its parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Activation {
    /// `exp(x) - 1`, accurate near 0.
    Expm1,
    Exp2,
    Log2,
    Log10,
    Tan,
    Sinh,
    Cosh,
    Atan,
    Asin,
    Acos,
    /// Rounds toward zero (integers stay as they are).
    Trunc,
    /// `x - trunc(x)`.
    Frac,
    /// The inverse of `erf`: +-inf at +-1, NaN beyond.
    Erfinv,
    /// `sin(pi x) / (pi x)`, 1 at 0.
    Sinc,
    /// The entropy term `-x ln x`: 0 at 0, -inf below (`torch.special.entr`).
    Entr,
    /// `x * tanh(softplus(x))`.
    Mish,
    /// `x * clamp(x + 3, 0, 6) / 6`.
    Hardswish,
    /// `clamp(x / 6 + 1/2, 0, 1)`.
    Hardsigmoid,
    /// `-softplus(-x)`.
    LogSigmoid,
    /// `log(1 + exp(beta x)) / beta`, and `x` where `beta x > threshold`.
    Softplus {
        beta: f64,
        threshold: f64,
    },
    /// `clamp(x, min, max)`.
    Hardtanh {
        min: f64,
        max: f64,
    },
    /// `x` for `x > 0`, else `slope x`.
    LeakyRelu {
        slope: f64,
    },
    /// `scale x` for `x > 0`, else `scale alpha (exp(input_scale x) - 1)`.
    Elu {
        alpha: f64,
        scale: f64,
        input_scale: f64,
    },
    /// `log(p / (1 - p))` of `p = clamp(x, eps, 1 - eps)` (of `x` without eps).
    Logit {
        eps: Option<f64>,
    },
    /// Whether the sign bit is set (-0.0 included; false for NaN): a bool result.
    Signbit,
    /// NaN, +inf and -inf replaced (by default by 0 and the dtype's largest
    /// finite values); integers stay as they are.
    NanToNum {
        nan: f64,
        posinf: Option<f64>,
        neginf: Option<f64>,
    },
    /// `x sigmoid(x)`.
    Silu,
    /// `x Phi(x)` (the unary op `gelu`; here for its backward).
    Gelu,
    /// The tanh approximation of gelu (the unary op `gelu_tanh`).
    GeluTanh,
    /// The unary op `sigmoid`; its backward takes the input or the result.
    Sigmoid,
    /// The unary op `tanh`; its backward takes the input or the result.
    Tanh,
    /// `x` where `x > threshold`, else `value` (any dtype; `torch.threshold`).
    Threshold {
        threshold: f64,
        value: f64,
    },
}

/// Names and the fewest and most parameters: what the C ABI parses.
const NAMES: [(&str, usize, usize); 32] = [
    ("expm1", 0, 0),
    ("exp2", 0, 0),
    ("log2", 0, 0),
    ("log10", 0, 0),
    ("tan", 0, 0),
    ("sinh", 0, 0),
    ("cosh", 0, 0),
    ("atan", 0, 0),
    ("asin", 0, 0),
    ("acos", 0, 0),
    ("trunc", 0, 0),
    ("frac", 0, 0),
    ("erfinv", 0, 0),
    ("sinc", 0, 0),
    ("entr", 0, 0),
    ("mish", 0, 0),
    ("hardswish", 0, 0),
    ("hardsigmoid", 0, 0),
    ("log_sigmoid", 0, 0),
    ("softplus", 2, 2),
    ("hardtanh", 2, 2),
    ("leaky_relu", 1, 1),
    ("elu", 3, 3),
    ("logit", 0, 1),
    ("signbit", 0, 0),
    ("nan_to_num", 3, 3),
    ("silu", 0, 0),
    ("gelu", 0, 0),
    ("gelu_tanh", 0, 0),
    ("sigmoid", 0, 0),
    ("tanh", 0, 0),
    ("threshold", 2, 2),
];

impl Activation {
    /// The function called `name` (PyTorch's) with `params` (softplus: beta,
    /// threshold; hardtanh: min, max; leaky_relu: slope; elu: alpha, scale,
    /// input_scale; logit: [eps]; nan_to_num: nan, posinf, neginf, where a
    /// NaN posinf or neginf means the dtype's largest finite value), or None
    /// for an unknown name. A wrong number of params is an error.
    pub fn from_name(name: &str, params: &[f64]) -> Option<Result<Activation>> {
        use Activation::*;
        let &(name, fewest, most) = NAMES.iter().find(|(n, _, _)| *n == name)?;
        if !(fewest..=most).contains(&params.len()) {
            let expected = if fewest == most {
                format!("{fewest}")
            } else {
                format!("{fewest} to {most}")
            };
            return Some(Err(fusion::Error::Invalid {
                op: name,
                message: format!(
                    "got {} parameters {params:?}, expected {expected}",
                    params.len()
                ),
            }
            .into()));
        }
        let p = |i: usize| params[i];
        let unless_nan = |v: f64| if v.is_nan() { None } else { Some(v) };
        Some(Ok(match name {
            "expm1" => Expm1,
            "exp2" => Exp2,
            "log2" => Log2,
            "log10" => Log10,
            "tan" => Tan,
            "sinh" => Sinh,
            "cosh" => Cosh,
            "atan" => Atan,
            "asin" => Asin,
            "acos" => Acos,
            "trunc" => Trunc,
            "frac" => Frac,
            "erfinv" => Erfinv,
            "sinc" => Sinc,
            "entr" => Entr,
            "mish" => Mish,
            "hardswish" => Hardswish,
            "hardsigmoid" => Hardsigmoid,
            "log_sigmoid" => LogSigmoid,
            "softplus" => Softplus {
                beta: p(0),
                threshold: p(1),
            },
            "hardtanh" => Hardtanh {
                min: p(0),
                max: p(1),
            },
            "leaky_relu" => LeakyRelu { slope: p(0) },
            "elu" => Elu {
                alpha: p(0),
                scale: p(1),
                input_scale: p(2),
            },
            "logit" => Logit {
                eps: params.first().copied(),
            },
            "signbit" => Signbit,
            "silu" => Silu,
            "gelu" => Gelu,
            "gelu_tanh" => GeluTanh,
            "sigmoid" => Sigmoid,
            "tanh" => Tanh,
            "threshold" => Threshold {
                threshold: p(0),
                value: p(1),
            },
            _ => NanToNum {
                nan: p(0),
                posinf: unless_nan(p(1)),
                neginf: unless_nan(p(2)),
            },
        }))
    }

    /// Whether the function has a complex form here (the others refuse a
    /// complex input, as most of them do in PyTorch).
    fn takes_complex(self) -> bool {
        use Activation::*;
        matches!(
            self,
            Expm1
                | Exp2
                | Log2
                | Log10
                | Tan
                | Sinh
                | Cosh
                | Sigmoid
                | Tanh
                | Silu
                | Sinc
                | Asin
                | Acos
                | Atan
                | NanToNum { .. }
        )
    }

    /// PyTorch's name.
    pub fn name(self) -> &'static str {
        use Activation::*;
        match self {
            Expm1 => "expm1",
            Exp2 => "exp2",
            Log2 => "log2",
            Log10 => "log10",
            Tan => "tan",
            Sinh => "sinh",
            Cosh => "cosh",
            Atan => "atan",
            Asin => "asin",
            Acos => "acos",
            Trunc => "trunc",
            Frac => "frac",
            Erfinv => "erfinv",
            Sinc => "sinc",
            Entr => "entr",
            Mish => "mish",
            Hardswish => "hardswish",
            Hardsigmoid => "hardsigmoid",
            LogSigmoid => "log_sigmoid",
            Softplus { .. } => "softplus",
            Hardtanh { .. } => "hardtanh",
            LeakyRelu { .. } => "leaky_relu",
            Elu { .. } => "elu",
            Logit { .. } => "logit",
            Signbit => "signbit",
            NanToNum { .. } => "nan_to_num",
            Silu => "silu",
            Gelu => "gelu",
            GeluTanh => "gelu_tanh",
            Sigmoid => "sigmoid",
            Tanh => "tanh",
            Threshold { .. } => "threshold",
        }
    }
}

/// The largest finite value of a float dtype.
fn largest_finite(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => 65504.0,
        DType::BF16 => 3.3895313892515355e38,
        DType::F64 => f64::MAX,
        _ => f32::MAX as f64,
    }
}

/// `conj(x)` of a complex `x`; `x` itself otherwise (no op recorded).
pub(super) fn conjugate(x: &Tensor) -> Result<Tensor> {
    if x.dtype().is_complex() {
        x.conj_physical()
    } else {
        Ok(x.clone())
    }
}

/// `s - x`.
fn rsub(x: &Tensor, s: f64) -> Result<Tensor> {
    x.binary_scalar(BinaryOp::Sub, Scalar::from(s), true)
}

/// `exp(x) - 1` without cancellation near 0 (Kahan): with `u = exp(x)`,
/// `(u - 1) x / log(u)`; exactly `x` where `u` rounds to 1.
fn expm1(x: &Tensor) -> Result<Tensor> {
    let u = x.exp()?;
    let um1 = u.sub(1.0)?;
    let accurate = um1.mul(x)?.div(&u.log()?)?;
    let r = Tensor::where_(&um1.eq(-1.0)?, &um1, &accurate)?;
    let r = Tensor::where_(&u.eq(f64::INFINITY)?, &u, &r)?;
    Tensor::where_(&u.eq(1.0)?, x, &r)
}

/// `exp(z) - 1` of `z = a + ib` without cancellation near 0: real part
/// `expm1(a) cos(b) - 2 sin(b / 2)^2`, imaginary part `exp(a) sin(b)`.
fn complex_expm1(z: &Tensor) -> Result<Tensor> {
    let (a, b) = (z.real()?, z.imag()?);
    let half_sin = b.mul(0.5)?.sin()?;
    let re = expm1(&a)?
        .mul(&b.cos()?)?
        .sub(&half_sin.mul(&half_sin)?.mul(2.0)?)?;
    let im = a.exp()?.mul(&b.sin()?)?;
    re.complex(&im)
}

/// `asin`, `acos` or `atan` of a complex `z = x + iy`, from the plugin's
/// inverse hyperbolic functions (accurate near 0 and at large |z|, where the
/// textbook logarithm formulas lose every digit). Computed for `|x| + i|y|`
/// and moved to `z`'s quadrant by the functions' symmetries, so that the
/// sign of a zero part picks the side of a branch cut, as in C99 (the
/// plugin's functions do not read the signs of zeros):
/// - `asin` and `atan` are odd and commute with `conj`; in the first
///   quadrant `asin(z) = -i asinh(iz)` with `iz = -|y| + i|x|` and
///   `asinh(-a + ib) = -conj(asinh(a + ib))`, so with
///   `(p, q) = asinh(|y| + i|x|)`, `asin = copysign(q, x) + i copysign(p, y)`;
///   `atan` the same with `atanh`;
/// - `acos(z) = -i acosh(z)` above the real axis and `conj` of that below,
///   so with `(u, v) = acosh(x + i|y|)`, `acos = v - i copysign(u, y)`.
///
/// NaN parts give what C99 (and the CPU) give, where the plugin's
/// functions differ: `asin(+-0 + i NaN)` keeps the zero and `acos` of it
/// is `pi/2`; `atan` of a NaN part is NaN but for the parts that do not
/// depend on it (`+-pi/2` for an infinite `x`; `+-0` for an infinite or
/// zero `y`).
fn complex_inverse_trig(a: Activation, z: &Tensor) -> Result<Tensor> {
    use std::f64::consts::FRAC_PI_2;
    let (x, y) = (z.real()?, z.imag()?);
    let nan_beside_zero = x.eq(0.0)?.logical_and(&y.isnan()?)?;
    match a {
        Activation::Acos => {
            let w = x.complex(&y.abs()?)?.acosh()?;
            let (u, v) = (w.real()?, w.imag()?);
            let value = v.complex(&u.copysign(&y)?.neg()?)?;
            let right_angle = x.full_like(FRAC_PI_2)?.complex(&y)?;
            Tensor::where_(&nan_beside_zero, &right_angle, &value)
        }
        Activation::Asin => {
            let (p, q) = asinh_or_atanh_turned(&x, &y, Activation::Asin)?;
            let value = q.copysign(&x)?.complex(&p.copysign(&y)?)?;
            Tensor::where_(&nan_beside_zero, z, &value)
        }
        _ => {
            let (p, q) = asinh_or_atanh_turned(&x, &y, a)?;
            let value = q.copysign(&x)?.complex(&p.copysign(&y)?)?;
            let infinite = |t: &Tensor| t.abs()?.eq(f64::INFINITY);
            let right_angle = x.full_like(FRAC_PI_2)?.copysign(&x)?;
            let re = Tensor::where_(&infinite(&x)?, &right_angle, f64::NAN)?;
            let zero_im = infinite(&y)?
                .logical_or(&y.eq(0.0)?)?
                .logical_or(&infinite(&x)?)?;
            let im = Tensor::where_(&zero_im, &y.full_like(0.0)?.copysign(&y)?, f64::NAN)?;
            let nan_part = x.isnan()?.logical_or(&y.isnan()?)?;
            Tensor::where_(&nan_part, &re.complex(&im)?, &value)
        }
    }
}

/// The parts `(p, q)` of `asinh(|y| + i|x|)` (for `asin`) or of `atanh`
/// of it (for `atan`).
fn asinh_or_atanh_turned(x: &Tensor, y: &Tensor, a: Activation) -> Result<(Tensor, Tensor)> {
    let turned = y.abs()?.complex(&x.abs()?)?;
    let w = if a == Activation::Asin {
        turned.asinh()?
    } else {
        turned.atanh()?
    };
    Ok((w.real()?, w.imag()?))
}

fn trunc(x: &Tensor) -> Result<Tensor> {
    x.sign()?.mul(&x.abs()?.floor()?)
}

fn softplus(x: &Tensor, beta: f64, threshold: f64) -> Result<Tensor> {
    let bx = x.mul(beta)?;
    let soft = bx.exp()?.log1p()?.mul(1.0 / beta)?;
    Tensor::where_(&bx.gt(threshold)?, x, &soft)
}

/// `c_0 w^n + c_1 w^(n-1) + ... + c_n` (Horner).
fn polynomial(w: &Tensor, coefficients: &[f64]) -> Result<Tensor> {
    let mut p = w.mul(coefficients[0])?.add(coefficients[1])?;
    for &c in &coefficients[2..] {
        p = p.mul(w)?.add(c)?;
    }
    Ok(p)
}

/// Giles' single-precision polynomial ("Approximating the erfinv function",
/// 2010), then two Newton steps on `erf(x) = y`, in float64 (the steps need
/// erf's full precision near +-1); the result in `y`'s dtype.
fn erfinv(y: &Tensor) -> Result<Tensor> {
    let dtype = y.dtype();
    let y = y.to_dtype(DType::F64)?;
    let w = rsub(&y, 1.0)?.mul(&y.add(1.0)?)?.log()?.neg()?;
    let central = polynomial(
        &w.sub(2.5)?,
        &[
            2.81022636e-08,
            3.43273939e-07,
            -3.5233877e-06,
            -4.39150654e-06,
            0.00021858087,
            -0.00125372503,
            -0.00417768164,
            0.246640727,
            1.50140941,
        ],
    )?;
    let tail = polynomial(
        &w.sqrt()?.sub(3.0)?,
        &[
            -0.000200214257,
            0.000100950558,
            0.00134934322,
            -0.00367342844,
            0.00573950773,
            -0.0076224613,
            0.00943887047,
            1.00167406,
            2.83297682,
        ],
    )?;
    let mut x = Tensor::where_(&w.lt(5.0)?, &central, &tail)?.mul(&y)?;
    let inside = y.abs()?.lt(1.0)?;
    let two_over_sqrt_pi = 2.0 / std::f64::consts::PI.sqrt();
    for _ in 0..2 {
        let err = x.erf()?.sub(&y)?;
        let slope = x.mul(&x)?.neg()?.exp()?.mul(two_over_sqrt_pi)?;
        x = Tensor::where_(&inside, &x.sub(&err.div(&slope)?)?, &x)?;
    }
    // +-1: +-inf; beyond: NaN (the log of a negative already is).
    let edge = y.abs()?.eq(1.0)?;
    let x = Tensor::where_(&edge, &y.mul(f64::INFINITY)?, &x)?;
    x.to_dtype(dtype)
}

impl Tensor {
    /// The operand of a float function: floats as they are, integers and
    /// bools in float32 (as PyTorch's float functions compute them).
    fn float_operand(&self) -> Result<Tensor> {
        self.to_dtype(self.dtype().to_float())
    }

    /// `a(self)` (see [`Activation`]); integer inputs compute in float32,
    /// except `trunc`, which keeps them.
    #[track_caller]
    pub fn activation(&self, a: Activation) -> Result<Tensor> {
        use Activation::*;
        if let Threshold { threshold, value } = a {
            return Tensor::where_(&self.gt(threshold)?, self, value)?.to_dtype(self.dtype());
        }
        if self.dtype().is_complex() && !a.takes_complex() {
            return Err(fusion::Error::UnsupportedDType {
                op: a.name(),
                got: self.dtype(),
                expected: "a real dtype (it has no complex form on tpu)",
            }
            .into());
        }
        if !self.dtype().is_inexact() {
            match a {
                Trunc | NanToNum { .. } => return Ok(self.clone()),
                Signbit => return self.lt(0i64),
                _ => {}
            }
        }
        let x = &self.float_operand()?;
        match a {
            Expm1 if x.dtype().is_complex() => complex_expm1(x),
            Asin | Acos | Atan if x.dtype().is_complex() => complex_inverse_trig(a, x),
            // Each part on its own, as PyTorch replaces them.
            NanToNum { .. } if x.dtype().is_complex() => {
                x.real()?.activation(a)?.complex(&x.imag()?.activation(a)?)
            }
            Expm1 => expm1(x),
            Exp2 => x.mul(std::f64::consts::LN_2)?.exp(),
            Log2 => x.log()?.mul(1.0 / std::f64::consts::LN_2),
            Log10 => x.log()?.mul(1.0 / std::f64::consts::LN_10),
            Tan => x.sin()?.div(&x.cos()?),
            Sinh => x.exp()?.sub(&x.neg()?.exp()?)?.mul(0.5),
            Cosh => x.exp()?.add(&x.neg()?.exp()?)?.mul(0.5),
            Atan => x.atan2(&x.full_like(1.0)?),
            Asin => x.atan2(&rsub(&x.mul(x)?, 1.0)?.sqrt()?),
            Acos => rsub(&x.mul(x)?, 1.0)?.sqrt()?.atan2(x),
            Trunc => trunc(x),
            Frac => x.sub(&trunc(x)?),
            Erfinv => erfinv(x),
            Sinc => {
                let product = x.mul(std::f64::consts::PI)?;
                Tensor::where_(&x.eq(0.0)?, 1.0, &product.sin()?.div(&product)?)
            }
            Entr => {
                let positive = x.mul(&x.log()?)?.neg()?;
                let r = Tensor::where_(&x.gt(0.0)?, &positive, f64::NEG_INFINITY)?;
                let r = Tensor::where_(&x.eq(0.0)?, 0.0, &r)?;
                Tensor::where_(&x.isnan()?, x, &r)
            }
            Mish => x.mul(&softplus(x, 1.0, 20.0)?.tanh()?),
            Hardswish => x.mul(&x.add(3.0)?.clamp(0.0, 6.0)?)?.mul(1.0 / 6.0),
            Hardsigmoid => x.mul(1.0 / 6.0)?.add(0.5)?.clamp(0.0, 1.0),
            LogSigmoid => softplus(&x.neg()?, 1.0, 20.0)?.neg(),
            Softplus { beta, threshold } => softplus(x, beta, threshold),
            Hardtanh { min, max } => x.clamp(min, max),
            LeakyRelu { slope } => Tensor::where_(&x.gt(0.0)?, x, &x.mul(slope)?),
            Elu {
                alpha,
                scale,
                input_scale,
            } => {
                let negative = expm1(&x.mul(input_scale)?)?.mul(alpha)?;
                Tensor::where_(&x.gt(0.0)?, x, &negative)?.mul(scale)
            }
            Logit { eps } => {
                let p = match eps {
                    Some(eps) => x.clamp(eps, 1.0 - eps)?,
                    None => x.clone(),
                };
                p.div(&rsub(&p, 1.0)?)?.log()
            }
            Signbit => {
                // -0.0 has its sign bit set: atan2(-0.0, -1) is -pi.
                let negative_zero = x.atan2(&x.full_like(-1.0)?)?.lt(0.0)?;
                let sign = Tensor::where_(&x.eq(0.0)?, &negative_zero, &x.lt(0.0)?)?;
                Tensor::where_(&x.isnan()?, false, &sign)
            }
            NanToNum {
                nan,
                posinf,
                neginf,
            } => {
                let big = largest_finite(x.dtype());
                let r = Tensor::where_(&x.isnan()?, nan, x)?;
                let r = Tensor::where_(&x.eq(f64::INFINITY)?, posinf.unwrap_or(big), &r)?;
                Tensor::where_(&x.eq(f64::NEG_INFINITY)?, neginf.unwrap_or(-big), &r)
            }
            Silu => x.mul(&x.sigmoid()?),
            Gelu => x.gelu(),
            GeluTanh => x.gelu_tanh(),
            Sigmoid => x.sigmoid(),
            Tanh => x.tanh(),
            Threshold { .. } => unreachable!("computed above in the input's dtype"),
        }
    }

    /// The gradient of `a` at `saved`, times `self` (the output's gradient):
    /// PyTorch's `<name>_backward`. `saved` is the input, or the result when
    /// `saved_is_result` (elu and leaky_relu only, as PyTorch's in-place forms
    /// keep it).
    #[track_caller]
    pub fn activation_backward(
        &self,
        saved: &Tensor,
        a: Activation,
        saved_is_result: bool,
    ) -> Result<Tensor> {
        use Activation::*;
        let op = a.name();
        // sigmoid and tanh have complex gradients (PyTorch's: the output's
        // gradient times the derivative's conjugate).
        let complex_ok = matches!(a, Sigmoid | Tanh)
            && self.dtype().is_complex()
            && saved.dtype() == self.dtype();
        if !complex_ok {
            self.expect_float(op, "a floating-point gradient")?;
            saved.expect_float(op, "a floating-point input")?;
        }
        if saved_is_result && !matches!(a, Elu { .. } | LeakyRelu { .. } | Sigmoid | Tanh) {
            return Err(fusion::Error::Invalid {
                op,
                message: "the backward takes the input, not the result (only elu, leaky_relu, sigmoid and tanh take the result)"
                    .into(),
            }
            .into());
        }
        let (g, x) = (self, saved);
        let zero = || x.zeros_like();
        match a {
            Mish => {
                // tanh(sp) + x sigmoid(x) (1 - tanh(sp)^2)
                let t = softplus(x, 1.0, 20.0)?.tanh()?;
                let d = t.add(&x.mul(&x.sigmoid()?)?.mul(&rsub(&t.mul(&t)?, 1.0)?)?)?;
                g.mul(&d)
            }
            Hardswish => {
                let d = Tensor::where_(&x.le(3.0)?, &x.mul(1.0 / 3.0)?.add(0.5)?, 1.0)?;
                g.mul(&Tensor::where_(&x.lt(-3.0)?, &zero()?, &d)?)
            }
            Hardsigmoid => {
                let inside = x.gt(-3.0)?.logical_and(&x.lt(3.0)?)?;
                Tensor::where_(&inside, &g.mul(1.0 / 6.0)?, &g.zeros_like()?)
            }
            LogSigmoid => g.mul(&x.neg()?.sigmoid()?),
            Softplus { beta, threshold } => {
                let bx = x.mul(beta)?;
                Tensor::where_(&bx.gt(threshold)?, g, &g.mul(&bx.sigmoid()?)?)
            }
            Hardtanh { min, max } => {
                let inside = x.gt(min)?.logical_and(&x.lt(max)?)?;
                Tensor::where_(&inside, g, &g.zeros_like()?)
            }
            // 1 / (x (1 - x)); outside [eps, 1 - eps] the clamp makes it 0, and
            // without eps it is NaN outside [0, 1], as ATen has it.
            Logit { eps } => {
                let lo = eps.unwrap_or(0.0);
                let outside = x.lt(lo)?.logical_or(&x.gt(1.0 - lo)?)?;
                let d = g.div(&x.mul(&rsub(x, 1.0)?)?)?;
                let fill = if eps.is_some() { 0.0 } else { f64::NAN };
                Tensor::where_(&outside, fill, &d)
            }
            // The result has the input's sign (for a positive slope).
            LeakyRelu { slope } => Tensor::where_(&x.gt(0.0)?, g, &g.mul(slope)?),
            Elu {
                alpha,
                scale,
                input_scale,
            } => {
                // x <= 0: scale alpha input_scale exp(input_scale x); from the
                // result y = scale alpha (exp(input_scale x) - 1) that is
                // input_scale (y + scale alpha).
                let negative = if saved_is_result {
                    x.add(scale * alpha)?.mul(input_scale)?
                } else {
                    x.mul(input_scale)?
                        .exp()?
                        .mul(scale * alpha * input_scale)?
                };
                g.mul(&Tensor::where_(&x.gt(0.0)?, scale, &negative)?)
            }
            Silu => {
                // s (1 + x (1 - s))
                let s = x.sigmoid()?;
                g.mul(&s.mul(&x.mul(&rsub(&s, 1.0)?)?.add(1.0)?)?)
            }
            Gelu => {
                // Phi(x) + x phi(x)
                let cdf = x
                    .mul(std::f64::consts::FRAC_1_SQRT_2)?
                    .erf()?
                    .add(1.0)?
                    .mul(0.5)?;
                let pdf = x
                    .mul(x)?
                    .mul(-0.5)?
                    .exp()?
                    .mul(1.0 / (2.0 * std::f64::consts::PI).sqrt())?;
                g.mul(&cdf.add(&x.mul(&pdf)?)?)
            }
            GeluTanh => {
                // u = c (x + k x^3): 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) c (1 + 3 k x^2)
                let (c, k) = ((2.0 / std::f64::consts::PI).sqrt(), 0.044715);
                let x2 = x.mul(x)?;
                let t = x.add(&x2.mul(x)?.mul(k)?)?.mul(c)?.tanh()?;
                let left = t.add(1.0)?.mul(0.5)?;
                let inner = x2.mul(3.0 * k)?.add(1.0)?.mul(c)?;
                let right = x.mul(&rsub(&t.mul(&t)?, 1.0)?)?.mul(&inner)?.mul(0.5)?;
                g.mul(&left.add(&right)?)
            }
            Sigmoid => {
                let y = if saved_is_result {
                    x.clone()
                } else {
                    x.sigmoid()?
                };
                g.mul(&conjugate(&y.mul(&rsub(&y, 1.0)?)?)?)
            }
            Tanh => {
                let y = if saved_is_result {
                    x.clone()
                } else {
                    x.tanh()?
                };
                g.mul(&conjugate(&rsub(&y.mul(&y)?, 1.0)?)?)
            }
            Threshold { threshold, .. } => Tensor::where_(&x.gt(threshold)?, g, &g.zeros_like()?),
            _ => Err(fusion::Error::Invalid {
                op,
                message: "has no backward of its own (autograd composes its derivative)".into(),
            }
            .into()),
        }
    }
}
