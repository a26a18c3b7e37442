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
//!
//! For a Beta(alpha, beta = total - alpha) sample (a Dirichlet's share),
//! `-(dF/dalpha) / f / (1 - x)` with beta held fixed, likewise by region
//! (`dirichlet_grad`): the CDF's series
//! in `x` where `x` is small, in `1 - x` where it is near 1, a saddle-point
//! expansion where both parameters exceed 6, and a rational fit in `ln x`,
//! `ln(alpha / x)` and `ln(total x / alpha)` otherwise.

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

/// The fit of `dirichlet_grad`'s last region: `p / q` with each a sum over
/// `u^i a^j` (i, j < 3) of a cubic in `b` (`[p or q][i][j][power of b]`).
const DIRICHLET_FIT: [[[[f64; 4]; 3]; 3]; 2] = [
    [
        [
            [1.003668233, -0.01061107488, -0.0657888334, 0.01201642863],
            [0.6336835991, -0.3557432599, 0.05486251648, -0.001465281033],
            [
                -0.03276231906,
                0.004474107445,
                0.002429354597,
                -0.0001557569013,
            ],
        ],
        [
            [0.221950385, -0.3187676331, 0.01799915743, 0.01074823814],
            [-0.2951249643, 0.06219954479, 0.01535556598, 0.001550077057],
            [
                0.02155310298,
                0.004170831599,
                0.001292462449,
                6.976601077e-05,
            ],
        ],
        [
            [
                -0.05980841433,
                0.008441916499,
                0.01085618172,
                0.002319392565,
            ],
            [
                0.02911413504,
                0.01400243777,
                -0.002721828457,
                0.000751041181,
            ],
            [
                0.005900514878,
                -0.001936558688,
                -9.495446725e-06,
                5.385558597e-05,
            ],
        ],
    ],
    [
        [
            [1.0, -0.02924021934, -0.04438342661, 0.007285809825],
            [0.6357567472, -0.3473456711, 0.05454656494, -0.002407477521],
            [
                -0.03301322327,
                0.004845219414,
                0.00231480583,
                -0.0002307248149,
            ],
        ],
        [
            [0.5925320577, -0.1757678135, 0.01505928619, 0.000564515273],
            [
                0.1014815858,
                -0.06589186703,
                0.01272886114,
                -0.0007316646956,
            ],
            [
                -0.007258481865,
                0.001096195486,
                0.0003934994223,
                -4.12701925e-05,
            ],
        ],
        [
            [
                0.06469649321,
                -0.0236701437,
                0.002902096474,
                -5.896963079e-05,
            ],
            [
                0.001925008108,
                -0.002869809258,
                0.0008000589141,
                -6.063713228e-05,
            ],
            [
                -0.0003477407336,
                6.959756487e-05,
                1.097287507e-05,
                -1.650964693e-06,
            ],
        ],
    ],
];

/// `-(dF/dalpha) / f / (1 - x)` of Beta(alpha, total - alpha) samples `x`,
/// beta held fixed (PyTorch's `_dirichlet_grad(x, alpha, total)`), in `x`'s
/// dtype.
/// Computed in float64 whatever the dtype, as the CPU computes its
/// saddle-point and fitted regions: in float32 the saddle point's terms,
/// each singular at the mean, cancel to a few percent near it.
pub(super) fn dirichlet_grad(e: &mut Emitter, x: &V, alpha: &V, total: &V) -> V {
    let out_dtype = x.ty.dtype;
    let wide = DType::F64;
    let x = e.convert(x, wide);
    let a = e.convert(alpha, wide);
    let t = e.convert(total, wide);
    let b = e.sub(&t, &a);
    let one = e.splat(1.0, &x);
    let one_minus_x = e.sub(&one, &x);
    let boundary = e.mul(&t, &x);
    let boundary = e.mul(&boundary, &one_minus_x);
    let half = e.splat(0.5, &x);
    let low_x = e.compare(Cmp::Le, &x, &half);
    let high_x = e.compare(Cmp::Ge, &x, &half);
    let bound_low = e.splat(2.5, &x);
    let bound_high = e.splat(0.75, &x);
    let narrow_low = e.compare(Cmp::Lt, &boundary, &bound_low);
    let narrow_high = e.compare(Cmp::Lt, &boundary, &bound_high);
    let small_region = e.binary("stablehlo.and", &low_x, &narrow_low);
    let large_region = e.binary("stablehlo.and", &high_x, &narrow_high);
    let six = e.splat(6.0, &x);
    let a_large = e.compare(Cmp::Gt, &a, &six);
    let b_large = e.compare(Cmp::Gt, &b, &six);
    let mid_region = e.binary("stablehlo.and", &a_large, &b_large);
    let small = dirichlet_small_x(e, &x, &a, &b);
    let near_one = dirichlet_near_one(e, &one_minus_x, &b, &a);
    let near_one = e.unary("stablehlo.negate", &near_one);
    let mid = dirichlet_mid(e, &x, &a, &b);
    let fit = dirichlet_fit(e, &x, &a, &t);
    let rest = e.select(&mid_region, &mid, &fit);
    let rest = e.select(&large_region, &near_one, &rest);
    let out = e.select(&small_region, &small, &rest);
    e.convert(&out, out_dtype)
}

/// 0 where `v` is NaN.
fn nan_to_zero(e: &mut Emitter, v: &V) -> V {
    let nan = e.is_nan(v);
    let zero = e.splat(0.0, v);
    e.select(&nan, &zero, v)
}

/// Small x: the series of the CDF in x (eleven terms), differentiated in
/// alpha, times `x (1 - x)^-beta`; 0 where it is NaN.
fn dirichlet_small_x(e: &mut Emitter, x: &V, a: &V, b: &V) -> V {
    let one = e.splat(1.0, x);
    let ab = e.add(a, b);
    let psi_a = digamma(e, a);
    let psi_ab = digamma(e, &ab);
    let log_x = e.unary("stablehlo.log", x);
    let factor = e.sub(&psi_a, &psi_ab);
    let factor = e.sub(&factor, &log_x);
    // term_i = numer_i / (a + i) (factor + 1 / (a + i)), numer_0 = 1,
    // numer_i = numer_{i-1} (i - b) x / i.
    let term = |e: &mut Emitter, numer: &V, denom: &V| {
        let inv = e.div(&one, denom);
        let f = e.add(&factor, &inv);
        let ratio = e.div(numer, denom);
        e.mul(&ratio, &f)
    };
    let mut numer = one.clone();
    let mut series = term(e, &numer, a);
    for i in 1..=10 {
        let i = i as f64;
        let i_splat = e.splat(i, x);
        let i_less_b = e.sub(&i_splat, b);
        let scaled = e.mul(&i_less_b, x);
        let scaled = e.binary_const("stablehlo.divide", &scaled, i);
        numer = e.mul(&numer, &scaled);
        let denom = e.binary_const("stablehlo.add", a, i);
        let t = term(e, &numer, &denom);
        series = e.add(&series, &t);
    }
    // x (1 - x)^-b times the series.
    let one_minus_x = e.sub(&one, x);
    let neg_b = e.unary("stablehlo.negate", b);
    let power = e.binary("stablehlo.power", &one_minus_x, &neg_b);
    let result = e.mul(x, &power);
    let result = e.mul(&result, &series);
    nan_to_zero(e, &result)
}

/// x near 1, as a series in `y = 1 - x` with the parameters swapped (the
/// caller negates it); 0 where it is NaN.
fn dirichlet_near_one(e: &mut Emitter, y: &V, a: &V, b: &V) -> V {
    let one = e.splat(1.0, y);
    let ab = e.add(a, b);
    let psi_ab = digamma(e, &ab);
    let psi_b = digamma(e, b);
    let factor = e.sub(&psi_ab, &psi_b);
    let mut numer = one.clone();
    let mut betas = one.clone();
    let mut dbetas = e.splat(0.0, y);
    let mut series = e.div(&factor, a);
    let neg_y = e.unary("stablehlo.negate", y);
    for i in 1..=8 {
        let i = i as f64;
        let step = e.binary_const("stablehlo.divide", &neg_y, i);
        numer = e.mul(&numer, &step);
        let b_less_i = e.binary_const("stablehlo.subtract", b, i);
        let carried = e.mul(&dbetas, &b_less_i);
        dbetas = e.add(&carried, &betas);
        betas = e.mul(&betas, &b_less_i);
        let denom = e.binary_const("stablehlo.add", a, i);
        let ratio = e.div(&numer, &denom);
        let weighted = e.mul(&factor, &betas);
        let weighted = e.add(&dbetas, &weighted);
        let t = e.mul(&ratio, &weighted);
        series = e.add(&series, &t);
    }
    let one_minus_y = e.sub(&one, y);
    let one_minus_b = e.sub(&one, b);
    let power = e.binary("stablehlo.power", &one_minus_y, &one_minus_b);
    let result = e.mul(&power, &series);
    let result = e.unary("stablehlo.negate", &result);
    nan_to_zero(e, &result)
}

/// Both parameters above 6: a saddle-point expansion (a polynomial within
/// a tenth of a standard deviation of the mean, the log form elsewhere).
fn dirichlet_mid(e: &mut Emitter, x: &V, a: &V, b: &V) -> V {
    let one = e.splat(1.0, x);
    let t = e.add(a, b);
    let mean = e.div(a, &t);
    let ab = e.mul(a, b);
    let t1 = e.binary_const("stablehlo.add", &t, 1.0);
    let var = e.div(&ab, &t1);
    let sd = e.unary("stablehlo.sqrt", &var);
    let sd = e.div(&sd, &t);
    let one_minus_x = e.sub(&one, x);
    let b2 = e.mul(b, b);
    // Near the mean: 47 x b^4 + a ((43 + 20 (16 + 27 b) x) b^3 + a (3 (59 + 180 b
    // - 90 x) b^2 + a ((453 + 1620 b (1 - x) - 455 x) b + a (8 (1 - x) (135 b - 11))))).
    let inner4 = e.binary_const("stablehlo.multiply", b, 135.0);
    let inner4 = e.binary_const("stablehlo.add", &inner4, -11.0);
    let inner4 = e.mul(&one_minus_x, &inner4);
    let inner4 = e.binary_const("stablehlo.multiply", &inner4, 8.0);
    let c3 = e.mul(b, &one_minus_x);
    let c3 = e.binary_const("stablehlo.multiply", &c3, 1620.0);
    let x455 = e.binary_const("stablehlo.multiply", x, 455.0);
    let c3 = e.binary_const("stablehlo.add", &c3, 453.0);
    let c3 = e.sub(&c3, &x455);
    let c3 = e.mul(&c3, b);
    let inner3 = e.mul(a, &inner4);
    let inner3 = e.add(&c3, &inner3);
    let b180 = e.binary_const("stablehlo.multiply", b, 180.0);
    let x90 = e.binary_const("stablehlo.multiply", x, 90.0);
    let c2 = e.binary_const("stablehlo.add", &b180, 59.0);
    let c2 = e.sub(&c2, &x90);
    let c2 = e.binary_const("stablehlo.multiply", &c2, 3.0);
    let c2 = e.mul(&c2, &b2);
    let inner2 = e.mul(a, &inner3);
    let inner2 = e.add(&c2, &inner2);
    let b27 = e.binary_const("stablehlo.multiply", b, 27.0);
    let c1 = e.binary_const("stablehlo.add", &b27, 16.0);
    let c1 = e.binary_const("stablehlo.multiply", &c1, 20.0);
    let c1 = e.mul(&c1, x);
    let c1 = e.binary_const("stablehlo.add", &c1, 43.0);
    let b3 = e.mul(&b2, b);
    let c1 = e.mul(&c1, &b3);
    let inner1 = e.mul(a, &inner2);
    let inner1 = e.add(&c1, &inner1);
    let b4 = e.mul(&b2, &b2);
    let c0 = e.mul(x, &b4);
    let c0 = e.binary_const("stablehlo.multiply", &c0, 47.0);
    let poly = e.mul(a, &inner1);
    let poly = e.add(&c0, &poly);
    // (1 + 12 a) (1 + 12 b) / t^2 / (1 - x) * poly / (12960 a^3 b^2 (1 + 12 t)).
    let a12 = e.binary_const("stablehlo.multiply", a, 12.0);
    let a12 = e.binary_const("stablehlo.add", &a12, 1.0);
    let b12 = e.binary_const("stablehlo.multiply", b, 12.0);
    let b12 = e.binary_const("stablehlo.add", &b12, 1.0);
    let t2 = e.mul(&t, &t);
    let num = e.mul(&a12, &b12);
    let num = e.div(&num, &t2);
    let a3 = e.mul(a, a);
    let a3 = e.mul(&a3, a);
    let t12 = e.binary_const("stablehlo.multiply", &t, 12.0);
    let t12 = e.binary_const("stablehlo.add", &t12, 1.0);
    let den = e.mul(&a3, &b2);
    let den = e.mul(&den, &t12);
    let den = e.binary_const("stablehlo.multiply", &den, 12960.0);
    let near = e.div(&num, &one_minus_x);
    let near = e.mul(&near, &poly);
    let near = e.div(&near, &den);
    // Elsewhere: stirling * (-x / sqrt(2 a b / t)) * (term1 + term2 (term3 -+ term4)).
    let correction = |e: &mut Emitter, v: &V| {
        let inv = e.div(&one, v);
        let first = e.binary_const("stablehlo.multiply", &inv, 1.0 / 12.0);
        let inv2 = e.mul(&inv, &inv);
        let second = e.binary_const("stablehlo.multiply", &inv2, 1.0 / 288.0);
        let sum = e.add(&one, &first);
        e.add(&sum, &second)
    };
    let ca = correction(e, a);
    let cb = correction(e, b);
    let ct = correction(e, &t);
    let stirling = e.mul(&ca, &cb);
    let stirling = e.div(&stirling, &ct);
    let two_ab = e.binary_const("stablehlo.multiply", &ab, 2.0);
    let spread = e.div(&two_ab, &t);
    let spread = e.unary("stablehlo.sqrt", &spread);
    let prefactor = e.div(x, &spread);
    let prefactor = e.unary("stablehlo.negate", &prefactor);
    let x_less_1 = e.binary_const("stablehlo.subtract", x, 1.0);
    let a2 = e.mul(a, a);
    let n1 = e.mul(&a2, &x_less_1);
    let n1 = e.binary_const("stablehlo.multiply", &n1, 2.0);
    let n2 = e.mul(&ab, &x_less_1);
    let n3 = e.mul(x, &b2);
    let term1_num = e.add(&n1, &n2);
    let term1_num = e.sub(&term1_num, &n3);
    let ax = e.mul(a, &x_less_1);
    let bx = e.mul(b, x);
    let axbx = e.add(&ax, &bx);
    let two_a = e.binary_const("stablehlo.multiply", a, 2.0);
    let ratio = e.div(&two_a, b);
    let root = e.unary("stablehlo.sqrt", &ratio);
    let t_sqrt = e.unary("stablehlo.sqrt", &t);
    let t15 = e.mul(&t, &t_sqrt);
    let axbx2 = e.mul(&axbx, &axbx);
    let term1_den = e.mul(&root, &t15);
    let term1_den = e.mul(&term1_den, &axbx2);
    let term1 = e.div(&term1_num, &term1_den);
    let tx = e.mul(&t, x);
    let a_over_tx = e.div(a, &tx);
    let log_a_tx = e.unary("stablehlo.log", &a_over_tx);
    let term2 = e.binary_const("stablehlo.multiply", &log_a_tx, 0.5);
    let eight_ab = e.binary_const("stablehlo.multiply", &ab, 8.0);
    let term3_num = e.div(&eight_ab, &t);
    let term3_num = e.unary("stablehlo.sqrt", &term3_num);
    let term3 = e.div(&term3_num, &axbx);
    let t_one_minus_x = e.mul(&t, &one_minus_x);
    let b_ratio = e.div(b, &t_one_minus_x);
    let log_b = e.unary("stablehlo.log", &b_ratio);
    let base_b = e.mul(b, &log_b);
    let base_a = e.mul(a, &log_a_tx);
    let base = e.add(&base_b, &base_a);
    let minus_one_half = e.splat(-1.5, &base);
    let term4 = e.binary("stablehlo.power", &base, &minus_one_half);
    let below_mean = e.compare(Cmp::Lt, x, &mean);
    let neg_term4 = e.unary("stablehlo.negate", &term4);
    let signed4 = e.select(&below_mean, &term4, &neg_term4);
    let sum34 = e.add(&term3, &signed4);
    let product = e.mul(&term2, &sum34);
    let total_terms = e.add(&term1, &product);
    let far = e.mul(&stirling, &prefactor);
    let far = e.mul(&far, &total_terms);
    let tenth = e.binary_const("stablehlo.multiply", &sd, 0.1);
    let low = e.sub(&mean, &tenth);
    let high = e.add(&mean, &tenth);
    let above_low = e.compare(Cmp::Ge, x, &low);
    let below_high = e.compare(Cmp::Le, x, &high);
    let close = e.binary("stablehlo.and", &above_low, &below_high);
    e.select(&close, &near, &far)
}

/// Otherwise: the fit, times the mean's derivative
/// `x (psi(total) - psi(alpha)) / (total - alpha)`.
fn dirichlet_fit(e: &mut Emitter, x: &V, a: &V, t: &V) -> V {
    let u = e.unary("stablehlo.log", x);
    let log_alpha = e.unary("stablehlo.log", a);
    let la = e.sub(&log_alpha, &u);
    let log_total = e.unary("stablehlo.log", t);
    let lb = e.sub(&log_total, &la);
    let one = e.splat(1.0, x);
    let u2 = e.mul(&u, &u);
    let la2 = e.mul(&la, &la);
    let pow_u = [one.clone(), u.clone(), u2];
    let pow_a = [one, la.clone(), la2];
    let mut sums = Vec::with_capacity(2);
    for fit in &DIRICHLET_FIT {
        let mut sum: Option<V> = None;
        for (i, pu) in pow_u.iter().enumerate() {
            for (j, pa) in pow_a.iter().enumerate() {
                let c = fit[i][j];
                let cubic = e.binary_const("stablehlo.multiply", &lb, c[3]);
                let cubic = e.binary_const("stablehlo.add", &cubic, c[2]);
                let cubic = e.mul(&lb, &cubic);
                let cubic = e.binary_const("stablehlo.add", &cubic, c[1]);
                let cubic = e.mul(&lb, &cubic);
                let cubic = e.binary_const("stablehlo.add", &cubic, c[0]);
                let weight = e.mul(pu, pa);
                let term = e.mul(&weight, &cubic);
                sum = Some(match sum {
                    Some(s) => e.add(&s, &term),
                    None => term,
                });
            }
        }
        sums.push(sum.expect("nine terms"));
    }
    let psi_t = digamma(e, t);
    let psi_a = digamma(e, a);
    let dpsi = e.sub(&psi_t, &psi_a);
    let t_less_a = e.sub(t, a);
    let approximation = e.mul(x, &dpsi);
    let approximation = e.div(&approximation, &t_less_a);
    let ratio = e.div(&sums[0], &sums[1]);
    e.mul(&ratio, &approximation)
}
