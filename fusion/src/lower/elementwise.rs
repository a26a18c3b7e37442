//! Elementwise ops: operands are converted to the compute dtype and broadcast
//! to the output shape first.

use super::reduce::accumulator;
use super::{Cmp, Emitter, V, bessel, reparameterized, special};
use crate::dtype::DType;
use crate::infer::binary_compute_dtype;
use crate::op::{BinaryOp, TernaryOp, UnaryOp};
use crate::scalar::Scalar;
use crate::shape::TensorType;

const SQRT_1_2: f64 = std::f64::consts::FRAC_1_SQRT_2;
/// sqrt(2 / pi), for the tanh form of gelu.
const SQRT_2_PI: f64 = 0.797_884_560_802_865_4;

pub(super) fn unary(e: &mut Emitter, u: UnaryOp, x: &V, out: TensorType) -> V {
    use UnaryOp::*;
    let d = x.ty.dtype;
    // Float functions of ints compute in the output (float) dtype.
    let xf = e.convert(x, out.dtype);
    match u {
        Neg => e.unary("stablehlo.negate", x),
        Abs if d.is_complex() => e.op("stablehlo.abs", &[x], "", out),
        Abs if d == DType::U8 => x.clone(),
        Abs => e.unary("stablehlo.abs", x),
        Exp => e.unary("stablehlo.exponential", &xf),
        Log => e.unary("stablehlo.log", &xf),
        Log1p => e.unary("stablehlo.log_plus_one", &xf),
        Sqrt => e.unary("stablehlo.sqrt", &xf),
        Rsqrt => e.unary("stablehlo.rsqrt", &xf),
        Tanh => e.unary("stablehlo.tanh", &xf),
        Sigmoid => e.unary("stablehlo.logistic", &xf),
        Sin => e.unary("stablehlo.sine", &xf),
        Cos => e.unary("stablehlo.cosine", &xf),
        Erf => wide_unary(e, "chlo.erf", &xf),
        Relu => {
            let zero = e.splat(0, x);
            e.maximum(x, &zero)
        }
        Gelu => {
            // x * 0.5 * (1 + erf(x / sqrt(2)))
            let scaled = e.binary_const("stablehlo.multiply", &xf, SQRT_1_2);
            let erf = wide_unary(e, "chlo.erf", &scaled);
            let one_plus = e.binary_const("stablehlo.add", &erf, 1.0);
            let half_x = e.binary_const("stablehlo.multiply", &xf, 0.5);
            e.mul(&half_x, &one_plus)
        }
        GeluTanh => {
            // 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
            let x2 = e.mul(&xf, &xf);
            let x3 = e.mul(&x2, &xf);
            let c = e.binary_const("stablehlo.multiply", &x3, 0.044715);
            let inner = e.add(&xf, &c);
            let inner = e.binary_const("stablehlo.multiply", &inner, SQRT_2_PI);
            let t = e.unary("stablehlo.tanh", &inner);
            let one_plus = e.binary_const("stablehlo.add", &t, 1.0);
            let half_x = e.binary_const("stablehlo.multiply", &xf, 0.5);
            e.mul(&half_x, &one_plus)
        }
        Floor | Ceil | Round if !d.is_float() => x.clone(),
        Floor => e.unary("stablehlo.floor", x),
        Ceil => e.unary("stablehlo.ceil", x),
        Round => e.unary("stablehlo.round_nearest_even", x),
        Sign => match d {
            DType::Bool => x.clone(),
            DType::U8 => {
                let nz = e.convert(x, DType::Bool);
                e.convert(&nz, DType::U8)
            }
            _ => e.unary("stablehlo.sign", x),
        },
        LogicalNot => {
            let b = e.convert(x, DType::Bool);
            e.unary("stablehlo.not", &b)
        }
        IsNan if d.is_inexact() => e.is_nan(x),
        IsNan => e.constant(Scalar::Bool(false), out),
        // On i1, stablehlo.not is logical not; on integers, bitwise.
        BitwiseNot => e.unary("stablehlo.not", x),
        Erfc => wide_unary(e, "chlo.erfc", &xf),
        Lgamma => wide_unary(e, "chlo.lgamma", &xf),
        Digamma => digamma(e, &xf),
        Asinh => wide_unary(e, "chlo.asinh", &xf),
        Acosh => wide_unary(e, "chlo.acosh", &xf),
        Atanh => wide_unary(e, "chlo.atanh", &xf),
        I0 | SpecialModifiedBesselI0 => bessel::bessel_i0(e, &xf, false),
        SpecialI0e => bessel::bessel_i0(e, &xf, true),
        SpecialI1 | SpecialModifiedBesselI1 => bessel::bessel_i1(e, &xf, false),
        SpecialI1e => bessel::bessel_i1(e, &xf, true),
        SpecialNdtri => special::ndtri(e, &xf),
        SpecialLogNdtr => special::log_ndtr(e, &xf),
        SpecialErfcx => special::erfcx(e, &xf),
        SpecialModifiedBesselK0 => bessel::bessel_k(e, &xf, 0, false),
        SpecialModifiedBesselK1 => bessel::bessel_k(e, &xf, 1, false),
        SpecialScaledModifiedBesselK0 => bessel::bessel_k(e, &xf, 0, true),
        SpecialScaledModifiedBesselK1 => bessel::bessel_k(e, &xf, 1, true),
        SpecialBesselJ0 => bessel::bessel_j(e, &xf, 0),
        SpecialBesselJ1 => bessel::bessel_j(e, &xf, 1),
        SpecialBesselY0 => bessel::bessel_y(e, &xf, 0),
        SpecialBesselY1 => bessel::bessel_y(e, &xf, 1),
        SpecialAiryAi => bessel::airy_ai(e, &xf),
        SpecialSphericalBesselJ0 => bessel::spherical_bessel_j0(e, &xf),
        Real => e.real_part(x),
        Imag => e.imag_part(x),
        Conj => e.conj(x),
        Angle if d.is_complex() => {
            let (re, im) = (e.real_part(x), e.imag_part(x));
            e.binary("stablehlo.atan2", &im, &re)
        }
        Angle => {
            // pi below zero, 0 from zero up, NaN kept (PyTorch's angle of a
            // real number).
            let zero = e.splat(0, &xf);
            let negative = e.compare(Cmp::Lt, &xf, &zero);
            let pi = e.splat(std::f64::consts::PI, &xf);
            let angle = e.select(&negative, &pi, &zero);
            let nan = e.is_nan(&xf);
            e.select(&nan, &xf, &angle)
        }
        Sgn if d.is_complex() => {
            // z / |z|, and 0 at 0.
            let magnitude = e.op("stablehlo.abs", &[x], "", x.ty.with_dtype(d.real_part()));
            let zero = e.splat(0, &magnitude);
            let at_zero = e.compare(Cmp::Eq, &magnitude, &zero);
            let as_complex = e.convert(&magnitude, d);
            let unit = e.div(x, &as_complex);
            let complex_zero = e.splat(0, x);
            e.select(&at_zero, &complex_zero, &unit)
        }
        Sgn => unary(e, Sign, x, out),
    }
}

/// `name` (a CHLO function) of `x`, computed in f32 for 16-bit floats.
fn wide_unary(e: &mut Emitter, name: &str, x: &V) -> V {
    let d = x.ty.dtype;
    if matches!(d, DType::F16 | DType::BF16) {
        let wide = e.convert(x, DType::F32);
        let r = e.unary(name, &wide);
        return e.convert(&r, d);
    }
    e.unary(name, x)
}

/// `chlo.digamma`, with PyTorch's values at zero: -inf at +0, +inf at -0
/// (CHLO gives NaN at every non-positive integer).
pub(super) fn digamma(e: &mut Emitter, x: &V) -> V {
    let psi = wide_unary(e, "chlo.digamma", x);
    let zero = e.splat(0, x);
    let at_zero = e.compare(Cmp::Eq, x, &zero);
    // 1 / x is +inf at +0 and -inf at -0.
    let one = e.splat(1.0, x);
    let inverse = e.div(&one, x);
    let positive_zero = e.compare(Cmp::Gt, &inverse, &zero);
    let neg_inf = e.splat(f64::NEG_INFINITY, x);
    let inf = e.splat(f64::INFINITY, x);
    let pole = e.select(&positive_zero, &neg_inf, &inf);
    e.select(&at_zero, &pole, &psi)
}

/// Converts and broadcasts an operand to the compute type and output shape.
fn operand(e: &mut Emitter, x: &V, dtype: DType, shape: &[i64]) -> V {
    let c = e.convert(x, dtype);
    e.broadcast_to(&c, shape)
}

pub(super) fn binary(e: &mut Emitter, b: BinaryOp, l: &V, r: &V, out: TensorType) -> V {
    use BinaryOp::*;
    let compute = match b {
        Div | Atan2 | Polygamma | SpecialZeta | Igamma | Igammac | StandardGammaGrad => out.dtype,
        LogicalAnd | LogicalOr | LogicalXor => DType::Bool,
        _ => binary_compute_dtype(&l.ty, &r.ty),
    };
    let shape = out.shape.clone();
    let a = operand(e, l, compute, &shape);
    let c = operand(e, r, compute, &shape);
    let is_bool = compute == DType::Bool;
    match b {
        Add if is_bool => e.binary("stablehlo.or", &a, &c),
        Mul if is_bool => e.binary("stablehlo.and", &a, &c),
        Maximum if is_bool => e.binary("stablehlo.or", &a, &c),
        Minimum if is_bool => e.binary("stablehlo.and", &a, &c),
        Add => e.add(&a, &c),
        Sub => e.sub(&a, &c),
        Mul => e.mul(&a, &c),
        Div => e.div(&a, &c),
        Pow => e.binary("stablehlo.power", &a, &c),
        Maximum => e.maximum(&a, &c),
        Minimum => e.minimum(&a, &c),
        Atan2 => e.binary("stablehlo.atan2", &a, &c),
        Remainder => remainder(e, &a, &c),
        FloorDivide => floor_divide(e, &a, &c),
        Eq => e.compare(Cmp::Eq, &a, &c),
        Ne => e.compare(Cmp::Ne, &a, &c),
        Lt => e.compare(Cmp::Lt, &a, &c),
        Le => e.compare(Cmp::Le, &a, &c),
        Gt => e.compare(Cmp::Gt, &a, &c),
        Ge => e.compare(Cmp::Ge, &a, &c),
        LogicalAnd | BitAnd => e.binary("stablehlo.and", &a, &c),
        LogicalOr | BitOr => e.binary("stablehlo.or", &a, &c),
        LogicalXor | BitXor => e.binary("stablehlo.xor", &a, &c),
        Polygamma => polygamma(e, &a, &c),
        SpecialZeta => zeta(e, &a, &c, out.dtype),
        Nextafter => e.binary("chlo.next_after", &a, &c),
        Igamma => special::igamma(e, &a, &c, false),
        Igammac => special::igamma(e, &a, &c, true),
        StandardGammaGrad => reparameterized::standard_gamma_grad(e, &a, &c),
        ShiftLeft => e.binary("stablehlo.shift_left", &a, &c),
        ShiftRight if compute == DType::U8 => e.binary("stablehlo.shift_right_logical", &a, &c),
        ShiftRight => e.binary("stablehlo.shift_right_arithmetic", &a, &c),
        Gcd => gcd(e, &a, &c),
        Lcm => lcm(e, &a, &c),
        Complex => e.complex(&a, &c),
        Polar => {
            let (cos, sin) = (
                e.unary("stablehlo.cosine", &c),
                e.unary("stablehlo.sine", &c),
            );
            let (re, im) = (e.mul(&a, &cos), e.mul(&a, &sin));
            e.complex(&re, &im)
        }
    }
}

/// `|x|` of an integer (unsigned ones as they are; int64 min stays itself,
/// as in C).
fn int_abs(e: &mut Emitter, x: &V) -> V {
    if x.ty.dtype == DType::U8 {
        x.clone()
    } else {
        e.unary("stablehlo.abs", x)
    }
}

/// Euclid's algorithm elementwise, as PyTorch's `calc_gcd`: on |a| and |b|,
/// `(a, b) <- (b % a, a)` until a is 0, each element stopping at its own
/// step; the loop runs until every element has (at most 93 steps for
/// int64, the Fibonacci bound).
fn gcd(e: &mut Emitter, a: &V, b: &V) -> V {
    let (a, b) = (int_abs(e, a), int_abs(e, b));
    let all: Vec<usize> = (0..a.ty.rank()).collect();
    let finals = e.while_op(
        &[&a, &b],
        |e, s| {
            let zero = e.splat(0, &s[0]);
            let going = e.compare(Cmp::Ne, &s[0], &zero);
            if all.is_empty() {
                going
            } else {
                e.reduce(&going, Scalar::Bool(false), "stablehlo.or", &all)
            }
        },
        |e, s| {
            let (a, b) = (&s[0], &s[1]);
            let zero = e.splat(0, a);
            let going = e.compare(Cmp::Ne, a, &zero);
            let one = e.splat(1, a);
            let divisor = e.select(&going, a, &one);
            let rest = e.binary("stablehlo.remainder", b, &divisor);
            vec![e.select(&going, &rest, a), e.select(&going, a, b)]
        },
    );
    finals[1].clone()
}

/// `|a / gcd(a, b) * b|`, 0 where the gcd is 0, as PyTorch's `calc_lcm`.
fn lcm(e: &mut Emitter, a: &V, b: &V) -> V {
    let g = gcd(e, a, b);
    let zero = e.splat(0, &g);
    let none = e.compare(Cmp::Eq, &g, &zero);
    let one = e.splat(1, &g);
    let divisor = e.select(&none, &one, &g);
    let quotient = e.div(a, &divisor);
    let product = e.mul(&quotient, b);
    let magnitude = int_abs(e, &product);
    e.select(&none, &zero, &magnitude)
}

/// `polygamma(n, x)`. CHLO's is right for x > 0 only; below 0 the
/// reflection `psi_n(x) = (-1)^n psi_n(1 - x) - pi^(n+1) P_n(cot(pi x))`
/// (`P_n` the n-th derivative of cot in powers of cot: n <= 4 here, NaN
/// beyond, never a wrong number); n = 0 is digamma. At the poles (the
/// non-positive integers) PyTorch's values: digamma's for n = 0, else
/// `(-1)^(n+1) inf`.
fn polygamma(e: &mut Emitter, n: &V, x: &V) -> V {
    let positive = wide_binary(e, "chlo.polygamma", n, x);
    let zero = e.splat(0, x);
    let one = e.splat(1.0, x);
    // The reflection, for x < 0.
    let mirrored = e.sub(&one, x);
    let psi_mirrored = wide_binary(e, "chlo.polygamma", n, &mirrored);
    let pi_x = e.binary_const("stablehlo.multiply", x, std::f64::consts::PI);
    let cos = e.unary("stablehlo.cosine", &pi_x);
    let sin = e.unary("stablehlo.sine", &pi_x);
    let c = e.div(&cos, &sin);
    // P_n(c) as a polynomial in c: coefficients of c^0, c^1, ..., c^5.
    let polys: [&[f64]; 4] = [
        &[-1.0, 0.0, -1.0],
        &[0.0, 2.0, 0.0, 2.0],
        &[-2.0, 0.0, -8.0, 0.0, -6.0],
        &[0.0, 16.0, 0.0, 40.0, 0.0, 24.0],
    ];
    let mut p = e.splat(f64::NAN, x);
    for (k, coefficients) in polys.iter().enumerate() {
        let value = special::polynomial(e, &c, coefficients);
        let order = e.splat((k + 1) as f64, n);
        let is_order = e.compare(Cmp::Eq, n, &order);
        p = e.select(&is_order, &value, &p);
    }
    let two = e.splat(2, n);
    let parity = e.binary("stablehlo.remainder", n, &two);
    let odd = e.compare(Cmp::Ne, &parity, &zero);
    let minus = e.splat(-1.0, x);
    let sign = e.select(&odd, &minus, &one);
    let n_plus_one = e.binary_const("stablehlo.add", n, 1.0);
    let pi = e.splat(std::f64::consts::PI, x);
    let pi_power = e.binary("stablehlo.power", &pi, &n_plus_one);
    let signed = e.mul(&sign, &psi_mirrored);
    let correction = e.mul(&pi_power, &p);
    let reflected = e.sub(&signed, &correction);
    let negative = e.compare(Cmp::Lt, x, &zero);
    let psi = e.select(&negative, &reflected, &positive);
    // n = 0: digamma, poles included.
    let n_zero = e.compare(Cmp::Eq, n, &zero);
    let psi0 = digamma(e, x);
    let psi = e.select(&n_zero, &psi0, &psi);
    // The poles for n >= 1.
    let floored = e.unary("stablehlo.floor", x);
    let integral = e.compare(Cmp::Eq, x, &floored);
    let non_positive = e.compare(Cmp::Le, x, &zero);
    let pole = e.binary("stablehlo.and", &integral, &non_positive);
    let inf = e.splat(f64::INFINITY, x);
    let neg_inf = e.splat(f64::NEG_INFINITY, x);
    let infinite = e.select(&odd, &inf, &neg_inf);
    let at_pole = e.select(&n_zero, &psi0, &infinite);
    e.select(&pole, &at_pole, &psi)
}

/// `name` (a binary CHLO function) of `a` and `b`, computed in f32 for
/// 16-bit floats.
fn wide_binary(e: &mut Emitter, name: &str, a: &V, b: &V) -> V {
    let d = a.ty.dtype;
    if matches!(d, DType::F16 | DType::BF16) {
        let (wa, wb) = (e.convert(a, DType::F32), e.convert(b, DType::F32));
        let r = e.binary(name, &wa, &wb);
        return e.convert(&r, d);
    }
    e.binary(name, a, b)
}

/// The Hurwitz zeta function, `chlo.zeta` in float64, with PyTorch's (and
/// Cephes') value at the poles q = 0, -1, -2, ... for x > 1: +inf (CHLO
/// gives NaN there).
fn zeta(e: &mut Emitter, x: &V, q: &V, out: DType) -> V {
    let (x, q) = (e.convert(x, DType::F64), e.convert(q, DType::F64));
    let z = e.binary("chlo.zeta", &x, &q);
    let zero = e.splat(0.0, &q);
    let one = e.splat(1.0, &x);
    let floor = e.unary("stablehlo.floor", &q);
    let integral = e.compare(Cmp::Eq, &q, &floor);
    let not_positive = e.compare(Cmp::Le, &q, &zero);
    let converges = e.compare(Cmp::Gt, &x, &one);
    let pole = e.binary("stablehlo.and", &integral, &not_positive);
    let pole = e.binary("stablehlo.and", &pole, &converges);
    let inf = e.splat(f64::INFINITY, &z);
    let z = e.select(&pole, &inf, &z);
    e.convert(&z, out)
}

/// Python-style modulo: `stablehlo.remainder` has the dividend's sign; move a
/// non-zero result whose sign differs from the divisor's by one divisor.
fn remainder(e: &mut Emitter, a: &V, b: &V) -> V {
    let r = e.binary("stablehlo.remainder", a, b);
    if a.ty.dtype == DType::U8 {
        return r;
    }
    let fix = sign_differs(e, &r, b);
    let shifted = e.add(&r, b);
    e.select(&fix, &shifted, &r)
}

/// Where a truncated division's remainder `r` is not zero and its sign
/// differs from the divisor `b`'s: where floor and truncation part.
fn sign_differs(e: &mut Emitter, r: &V, b: &V) -> V {
    let zero = e.splat(0, r);
    let r_nonzero = e.compare(Cmp::Ne, r, &zero);
    let r_neg = e.compare(Cmp::Lt, r, &zero);
    let b_neg = e.compare(Cmp::Lt, b, &zero);
    let differ = e.binary("stablehlo.xor", &r_neg, &b_neg);
    e.binary("stablehlo.and", &r_nonzero, &differ)
}

/// `floor(a / b)`. Integers: the truncating quotient, one less where the
/// division is inexact and the operands' signs differ (exact for every
/// int64). Floats, as PyTorch computes them: from `fmod`, so that
/// `a - b * q` stays the remainder; `a / b` where `b` is 0.
fn floor_divide(e: &mut Emitter, a: &V, b: &V) -> V {
    let q = e.div(a, b);
    let d = a.ty.dtype;
    if d == DType::U8 {
        return q;
    }
    let zero = e.splat(0, &q);
    let one = e.splat(1, &q);
    if !d.is_float() {
        let r = e.binary("stablehlo.remainder", a, b);
        let fix = sign_differs(e, &r, b);
        let lower = e.sub(&q, &one);
        return e.select(&fix, &lower, &q);
    }
    let m = e.binary("stablehlo.remainder", a, b);
    let a_minus_m = e.sub(a, &m);
    let div = e.div(&a_minus_m, b);
    let fix = sign_differs(e, &m, b);
    let lowered = e.sub(&div, &one);
    let div = e.select(&fix, &lowered, &div);
    let floored = e.unary("stablehlo.floor", &div);
    let frac = e.sub(&div, &floored);
    let half = e.splat(0.5, &q);
    let above_half = e.compare(Cmp::Gt, &frac, &half);
    let raised = e.add(&floored, &one);
    let rounded = e.select(&above_half, &raised, &floored);
    // A zero quotient keeps the sign of a / b.
    let signed_zero = e.mul(&q, &zero);
    let div_is_zero = e.compare(Cmp::Eq, &div, &zero);
    let r = e.select(&div_is_zero, &signed_zero, &rounded);
    let b_zero = e.compare(Cmp::Eq, b, &zero);
    e.select(&b_zero, &q, &r)
}

pub(super) fn where_(e: &mut Emitter, inputs: &[V], out: TensorType) -> V {
    let shape = out.shape.clone();
    let c = e.broadcast_to(&inputs[0], &shape);
    let x = operand(e, &inputs[1], out.dtype, &shape);
    let y = operand(e, &inputs[2], out.dtype, &shape);
    e.select(&c, &x, &y)
}

/// `min(max(x, lo), hi)`: NaN stays NaN, and `lo > hi` gives `hi`, as in PyTorch.
pub(super) fn clamp(
    e: &mut Emitter,
    x: &V,
    min: Option<Scalar>,
    max: Option<Scalar>,
    out: TensorType,
) -> V {
    let mut v = e.convert(x, out.dtype);
    if let Some(lo) = min {
        let k = e.splat(lo, &v);
        v = e.maximum(&v, &k);
    }
    if let Some(hi) = max {
        let k = e.splat(hi, &v);
        v = e.minimum(&v, &k);
    }
    v
}

/// `Op::Ternary`, in float32 for low precision floats (PyTorch's opmath), in
/// the output dtype otherwise; the operations in the order of the CPU's
/// kernels (`x + (s * a) * b`, `x + (s * a) / b`).
pub(super) fn ternary(e: &mut Emitter, t: TernaryOp, inputs: &[V], out: TensorType) -> V {
    let compute = accumulator(out.dtype);
    let shape = out.shape.clone();
    let n = t.tensors();
    let xs: Vec<V> = inputs[..n]
        .iter()
        .map(|x| operand(e, x, compute, &shape))
        .collect();
    let s = e.convert(&inputs[n], compute);
    let y = match t {
        TernaryOp::Addcmul | TernaryOp::Addcdiv => {
            let s = e.broadcast_to(&s, &shape);
            let scaled = e.mul(&s, &xs[1]);
            let r = match t {
                TernaryOp::Addcmul => e.mul(&scaled, &xs[2]),
                _ => e.div(&scaled, &xs[2]),
            };
            e.add(&xs[0], &r)
        }
        TernaryOp::Lerp => {
            let (x, end) = (&xs[0], &xs[1]);
            let diff = e.sub(end, x);
            let w = e.broadcast_to(&s, &shape);
            let near = e.mul(&w, &diff);
            let near = e.add(x, &near);
            let one = e.splat(1, &w);
            let rest = e.sub(&one, &w);
            let far = e.mul(&diff, &rest);
            let far = e.sub(end, &far);
            // |w| < 0.5 on the 0-d weight, then broadcast.
            let magnitude = if compute.is_complex() {
                e.op(
                    "stablehlo.abs",
                    &[&s],
                    "",
                    TensorType::scalar(compute.real_part()),
                )
            } else {
                e.unary("stablehlo.abs", &s)
            };
            let half = e.splat(0.5, &magnitude);
            let small = e.compare(Cmp::Lt, &magnitude, &half);
            let small = e.broadcast_to(&small, &shape);
            e.select(&small, &near, &far)
        }
    };
    e.convert(&y, out.dtype)
}
