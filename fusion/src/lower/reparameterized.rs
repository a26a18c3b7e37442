//! Reparameterized gradients of samplers: the derivative of a sample with
//! respect to its distribution's parameter, holding the uniform draw behind
//! it fixed (what `rsample()`'s backward needs).
//!
//! For a standard gamma sample `x` of shape `a` that is `-(dF/da) / f`, with
//! `F` the gamma CDF and `f` its density. PyTorch evaluates it with three
//! approximations by region, and so does this (the same regions and the same
//! published fit, so that gradients match the CPU's):
//! - `x < 0.8`: the CDF's series `x^a sum_i (-x)^i / (i! (a + i))` to i = 5,
//!   differentiated in `a` term by term;
//! - `a > 8`: Rice's saddle-point expansion (a polynomial where `x` is within
//!   10% of `a`, the log form elsewhere);
//! - otherwise a rational function of `u = ln(x / a)` and `v = ln(a)`.

use super::elementwise::digamma;
use super::{Cmp, Emitter, V};
use crate::dtype::DType;

/// The fit of the middle region: `exp(p / q)` with `p` and `q` cubics in `v`
/// whose coefficients are quadratics in `u` (rows: the constant, linear and
/// quadratic terms in `u`; columns: p's four coefficients, then q's).
const RATIONAL_FIT: [[f64; 8]; 3] = [
    [
        0.16009398,
        -0.094634809,
        0.025146376,
        -0.0030648343,
        1.0,
        0.32668115,
        0.10406089,
        0.0014179084,
    ],
    [
        0.53487893,
        0.1298071,
        0.065735949,
        -0.0015649758,
        0.16639465,
        0.020070113,
        -0.0035938915,
        -0.00058392623,
    ],
    [
        0.040121004,
        -0.0065914022,
        -0.0026286047,
        -0.0013441777,
        0.017050642,
        -0.0021309326,
        0.00085092367,
        -1.5247877e-07,
    ],
];

/// `d x / d a` of standard gamma samples `x` of shapes `a` (PyTorch's
/// `_standard_gamma_grad(a, x)`), in `a`'s dtype; 16-bit floats compute in
/// float32.
pub(super) fn standard_gamma_grad(e: &mut Emitter, alpha: &V, x: &V) -> V {
    let out_dtype = alpha.ty.dtype;
    let wide = if out_dtype == DType::F64 {
        DType::F64
    } else {
        DType::F32
    };
    let a = e.convert(alpha, wide);
    let x = e.convert(x, wide);
    let small_x = series(e, &a, &x);
    let large_a = saddle_point(e, &a, &x);
    let middle = rational(e, &a, &x);
    let point_eight = e.splat(0.8, &x);
    let below = e.compare(Cmp::Lt, &x, &point_eight);
    let eight = e.splat(8.0, &a);
    let large = e.compare(Cmp::Gt, &a, &eight);
    let rest = e.select(&large, &large_a, &middle);
    let out = e.select(&below, &small_x, &rest);
    e.convert(&out, out_dtype)
}

/// `x < 0.8`: the series, differentiated; 0 where it is NaN.
fn series(e: &mut Emitter, a: &V, x: &V) -> V {
    let one = e.splat(1.0, a);
    let mut term = one.clone();
    let mut denom = a.clone();
    let mut series1 = e.div(&one, a);
    let denom_sq = e.mul(a, a);
    let mut series2 = e.div(&one, &denom_sq);
    let neg_x = e.unary("stablehlo.negate", x);
    for i in 1..=5 {
        let factor = e.binary_const("stablehlo.divide", &neg_x, i as f64);
        term = e.mul(&term, &factor);
        denom = e.binary_const("stablehlo.add", &denom, 1.0);
        let t1 = e.div(&term, &denom);
        series1 = e.add(&series1, &t1);
        let d2 = e.mul(&denom, &denom);
        let t2 = e.div(&term, &d2);
        series2 = e.add(&series2, &t2);
    }
    let x_pow_a = e.binary("stablehlo.power", x, a);
    let a_less_one = e.sub(a, &one);
    let x_pow = e.binary("stablehlo.power", x, &a_less_one);
    let neg = e.unary("stablehlo.negate", x);
    let exp = e.unary("stablehlo.exponential", &neg);
    let pdf = e.mul(&x_pow, &exp);
    let cdf = e.mul(&x_pow_a, &series1);
    let log_x = e.unary("stablehlo.log", x);
    let psi = digamma(e, a);
    let log_less_psi = e.sub(&log_x, &psi);
    let first = e.mul(&log_less_psi, &cdf);
    let second = e.mul(&x_pow_a, &series2);
    let cdf_a = e.sub(&first, &second);
    let ratio = e.div(&cdf_a, &pdf);
    let result = e.unary("stablehlo.negate", &ratio);
    let nan = e.is_nan(&result);
    let zero = e.splat(0.0, &result);
    e.select(&nan, &zero, &result)
}

/// `a > 8`: Rice's saddle-point expansion.
fn saddle_point(e: &mut Emitter, a: &V, x: &V) -> V {
    let a2 = e.mul(a, a);
    let xx = e.mul(x, x);
    // Near the mode (0.9 a <= x <= 1.1 a):
    // (1 + 24 a (1 + 12 a)) (1440 a^2 + 6 x (53 - 120 x) - 65 x^2 / a
    //   + a (107 + 3600 x)) / (1244160 a^4).
    let twelve_a = e.binary_const("stablehlo.multiply", a, 12.0);
    let inner = e.binary_const("stablehlo.add", &twelve_a, 1.0);
    let n1 = e.mul(a, &inner);
    let n1 = e.binary_const("stablehlo.multiply", &n1, 24.0);
    let n1 = e.binary_const("stablehlo.add", &n1, 1.0);
    let t1 = e.binary_const("stablehlo.multiply", &a2, 1440.0);
    let x120 = e.binary_const("stablehlo.multiply", x, -120.0);
    let x120 = e.binary_const("stablehlo.add", &x120, 53.0);
    let t2 = e.mul(x, &x120);
    let t2 = e.binary_const("stablehlo.multiply", &t2, 6.0);
    let t3 = e.div(&xx, a);
    let t3 = e.binary_const("stablehlo.multiply", &t3, -65.0);
    let x3600 = e.binary_const("stablehlo.multiply", x, 3600.0);
    let x3600 = e.binary_const("stablehlo.add", &x3600, 107.0);
    let t4 = e.mul(a, &x3600);
    let n2 = e.add(&t1, &t2);
    let n2 = e.add(&n2, &t3);
    let n2 = e.add(&n2, &t4);
    let a4 = e.mul(&a2, &a2);
    let denom = e.binary_const("stablehlo.multiply", &a4, 1244160.0);
    let near = e.mul(&n1, &n2);
    let near = e.div(&near, &denom);
    // Elsewhere: with d = sqrt(8 a), t2 = d / (a - x),
    // t3 = (x - a - a ln(x / a))^-1.5, t1 = ln(x / a) (t2 -+ t3)
    //   - sqrt(2 / a) (a + x) / (a - x)^2,
    // the result -(1 + (1 + 1 / (24 a)) / (12 a)) x t1 / d.
    let eight_a = e.binary_const("stablehlo.multiply", a, 8.0);
    let d = e.unary("stablehlo.sqrt", &eight_a);
    let a_less_x = e.sub(a, x);
    let term2 = e.div(&d, &a_less_x);
    let x_over_a = e.div(x, a);
    let log_ratio = e.unary("stablehlo.log", &x_over_a);
    let a_log = e.mul(a, &log_ratio);
    let base = e.sub(x, a);
    let base = e.sub(&base, &a_log);
    let minus_one_half = e.splat(-1.5, &base);
    let term3 = e.binary("stablehlo.power", &base, &minus_one_half);
    let below = e.compare(Cmp::Lt, x, a);
    let difference = e.sub(&term2, &term3);
    let sum = e.add(&term2, &term3);
    let term23 = e.select(&below, &difference, &sum);
    let first = e.mul(&log_ratio, &term23);
    let two = e.splat(2.0, a);
    let two_over_a = e.div(&two, a);
    let root = e.unary("stablehlo.sqrt", &two_over_a);
    let a_plus_x = e.add(a, x);
    let gap_sq = e.mul(&a_less_x, &a_less_x);
    let second = e.mul(&root, &a_plus_x);
    let second = e.div(&second, &gap_sq);
    let term1 = e.sub(&first, &second);
    let one = e.splat(1.0, a);
    let a24 = e.binary_const("stablehlo.multiply", a, 24.0);
    let inv24 = e.div(&one, &a24);
    let inner = e.add(&one, &inv24);
    let a12 = e.binary_const("stablehlo.multiply", a, 12.0);
    let stirling = e.div(&inner, &a12);
    let stirling = e.add(&one, &stirling);
    let numer = e.mul(x, &term1);
    let far = e.mul(&stirling, &numer);
    let far = e.div(&far, &d);
    let far = e.unary("stablehlo.negate", &far);
    let low = e.binary_const("stablehlo.multiply", a, 0.9);
    let high = e.binary_const("stablehlo.multiply", a, 1.1);
    let above_low = e.compare(Cmp::Ge, x, &low);
    let below_high = e.compare(Cmp::Le, x, &high);
    let close = e.binary("stablehlo.and", &above_low, &below_high);
    e.select(&close, &near, &far)
}

/// Otherwise: `exp(p / q)` of the fit.
fn rational(e: &mut Emitter, a: &V, x: &V) -> V {
    let x_over_a = e.div(x, a);
    let u = e.unary("stablehlo.log", &x_over_a);
    let v = e.unary("stablehlo.log", a);
    // Each of the eight coefficients as a quadratic in u (Horner).
    let coefficient: Vec<V> = (0..8)
        .map(|i| {
            let c2 = e.binary_const("stablehlo.multiply", &u, RATIONAL_FIT[2][i]);
            let c1 = e.binary_const("stablehlo.add", &c2, RATIONAL_FIT[1][i]);
            let c1 = e.mul(&u, &c1);
            e.binary_const("stablehlo.add", &c1, RATIONAL_FIT[0][i])
        })
        .collect();
    // A cubic in v of four of them (Horner).
    let cubic = |e: &mut Emitter, c: &[V]| {
        let t = e.mul(&v, &c[3]);
        let t = e.add(&c[2], &t);
        let t = e.mul(&v, &t);
        let t = e.add(&c[1], &t);
        let t = e.mul(&v, &t);
        e.add(&c[0], &t)
    };
    let p = cubic(e, &coefficient[..4]);
    let q = cubic(e, &coefficient[4..]);
    let ratio = e.div(&p, &q);
    e.unary("stablehlo.exponential", &ratio)
}
