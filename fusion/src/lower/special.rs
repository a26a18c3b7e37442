//! Special functions of `torch.special` that StableHLO and CHLO lack, from
//! their mathematical definitions (nothing here is a table of fitted
//! coefficients); the Bessel and Airy functions are in [`super::bessel`]:
//!
//! - `ndtri`, the normal quantile: a first guess from `erf_inv` (or, deep in
//!   the tail, from `q ~ phi(x) / |x|`), then Newton steps on `ndtr(x) = q`
//!   with `ndtr` from `erfc`, on the lower half (`q = min(p, 1 - p)`, exact),
//!   so the tails keep their relative accuracy;
//! - `log_ndtr`: `log1p(-erfc(x / sqrt 2) / 2)` above 0, `log(erfc(-x /
//!   sqrt 2) / 2)` down to -20, the asymptotic series of the Mills ratio
//!   below;
//! - `erfcx`, `e^(x^2) erfc(x)`: directly below 12, its asymptotic series
//!   above (where `erfc` underflows);
//! - the regularized incomplete gamma functions P(a, x) (`igamma`) and
//!   Q(a, x) (`igammac`): below x = a + 1 P's series
//!   `x^a e^-x / gamma(a + 1) sum_n x^n / ((a+1)...(a+n))`, above Q's
//!   continued fraction (modified Lentz), the other as 1 minus; one
//!   `stablehlo.while` runs until every element has converged, at most
//!   [`IGAMMA_MAX_ITERATIONS`] steps (enough for a up to about 5e6); an
//!   element that has not converged by then is NaN, never a wrong number.
//!
//! Each computes in float64 and rounds to the result's dtype.

use super::{Cmp, Emitter, V};
use crate::dtype::DType;

/// Computes `f` of `x` in float64, rounded back to `x`'s dtype.
pub(super) fn in_f64(e: &mut Emitter, x: &V, f: impl FnOnce(&mut Emitter, &V) -> V) -> V {
    let wide = e.convert(x, DType::F64);
    let r = f(e, &wide);
    e.convert(&r, x.ty.dtype)
}

/// `a * c + d` for constants c and d.
pub(super) fn affine(e: &mut Emitter, a: &V, c: f64, d: f64) -> V {
    let scaled = e.binary_const("stablehlo.multiply", a, c);
    e.binary_const("stablehlo.add", &scaled, d)
}

/// `sum_k coefficients[k] * t^k` by Horner's rule.
pub(super) fn polynomial(e: &mut Emitter, t: &V, coefficients: &[f64]) -> V {
    let mut value = e.splat(coefficients[coefficients.len() - 1], t);
    for &c in coefficients.iter().rev().skip(1) {
        let scaled = e.mul(&value, t);
        value = e.binary_const("stablehlo.add", &scaled, c);
    }
    value
}

/// The standard normal CDF from `erfc`, accurate in the lower tail.
fn ndtr(e: &mut Emitter, x: &V) -> V {
    let scaled = e.binary_const("stablehlo.multiply", x, -std::f64::consts::FRAC_1_SQRT_2);
    let erfc = e.unary("chlo.erfc", &scaled);
    e.binary_const("stablehlo.multiply", &erfc, 0.5)
}

/// Below this lower-tail probability the first guess of `ndtri` comes from
/// the tail's asymptotics instead of `erf_inv` (whose argument `2q - 1`
/// keeps less of q than that).
const NDTRI_TAIL: f64 = 1e-10;
const NDTRI_NEWTON_STEPS: usize = 3;

/// `torch.special.ndtri`: x with `ndtr(x) = p`.
pub(super) fn ndtri(e: &mut Emitter, p: &V) -> V {
    in_f64(e, p, |e, p| {
        let half = e.splat(0.5, p);
        let upper = e.compare(Cmp::Gt, p, &half);
        let complement = affine(e, p, -1.0, 1.0);
        let q = e.select(&upper, &complement, p);
        // Guesses: sqrt(2) erf_inv(2q - 1), or from q ~ phi(x) / |x|:
        // x^2 ~ t - ln t - ln(2 pi) with t = -2 ln q.
        let centered = affine(e, &q, 2.0, -1.0);
        let inverse = e.unary("chlo.erf_inv", &centered);
        let central = e.binary_const("stablehlo.multiply", &inverse, std::f64::consts::SQRT_2);
        let log_q = e.unary("stablehlo.log", &q);
        let t = e.binary_const("stablehlo.multiply", &log_q, -2.0);
        let log_t = e.unary("stablehlo.log", &t);
        let squared = e.sub(&t, &log_t);
        let squared = e.binary_const("stablehlo.add", &squared, -(std::f64::consts::TAU).ln());
        let root = e.unary("stablehlo.sqrt", &squared);
        let tail = e.unary("stablehlo.negate", &root);
        let threshold = e.splat(NDTRI_TAIL, p);
        let in_tail = e.compare(Cmp::Lt, &q, &threshold);
        let mut x = e.select(&in_tail, &tail, &central);
        for _ in 0..NDTRI_NEWTON_STEPS {
            // x -= (ndtr(x) - q) / phi(x)
            let residual = ndtr(e, &x);
            let residual = e.sub(&residual, &q);
            let x2 = e.mul(&x, &x);
            let exponent = e.binary_const("stablehlo.multiply", &x2, -0.5);
            let density = e.unary("stablehlo.exponential", &exponent);
            let density = e.binary_const(
                "stablehlo.multiply",
                &density,
                1.0 / std::f64::consts::TAU.sqrt(),
            );
            let step = e.div(&residual, &density);
            x = e.sub(&x, &step);
        }
        let flipped = e.unary("stablehlo.negate", &x);
        let x = e.select(&upper, &flipped, &x);
        // The ends and outside [0, 1] (Newton has nothing to work with).
        let zero = e.splat(0.0, p);
        let one = e.splat(1.0, p);
        let at_zero = e.compare(Cmp::Eq, p, &zero);
        let at_one = e.compare(Cmp::Eq, p, &one);
        let below = e.compare(Cmp::Lt, p, &zero);
        let above = e.compare(Cmp::Gt, p, &one);
        let neg_inf = e.splat(f64::NEG_INFINITY, p);
        let inf = e.splat(f64::INFINITY, p);
        let nan = e.splat(f64::NAN, p);
        let x = e.select(&at_zero, &neg_inf, &x);
        let x = e.select(&at_one, &inf, &x);
        let x = e.select(&below, &nan, &x);
        e.select(&above, &nan, &x)
    })
}

/// Below this, `log_ndtr` takes the asymptotic series.
const LOG_NDTR_SERIES_BELOW: f64 = -20.0;
/// Above this, `erfcx` takes the asymptotic series.
const ERFCX_SERIES_FROM: f64 = 12.0;
/// Terms of the Mills ratio series `sum_k (-1)^k (2k-1)!! / x^(2k)`.
const MILLS_TERMS: usize = 11;

/// `sum_k (-1)^k (2k-1)!! u^k` (the Mills ratio series in `u`).
fn mills_series(e: &mut Emitter, u: &V) -> V {
    let mut coefficients = vec![1.0];
    for k in 1..MILLS_TERMS {
        let previous: f64 = coefficients[k - 1];
        coefficients.push(-previous * (2 * k - 1) as f64);
    }
    polynomial(e, u, &coefficients)
}

/// `torch.special.log_ndtr`.
pub(super) fn log_ndtr(e: &mut Emitter, x: &V) -> V {
    in_f64(e, x, |e, x| {
        // Above 0: log1p(-erfc(x / sqrt 2) / 2).
        let scaled = e.binary_const("stablehlo.multiply", x, std::f64::consts::FRAC_1_SQRT_2);
        let upper_tail = e.unary("chlo.erfc", &scaled);
        let upper_tail = e.binary_const("stablehlo.multiply", &upper_tail, -0.5);
        let positive = e.unary("stablehlo.log_plus_one", &upper_tail);
        // Down to -20: log(ndtr(x)).
        let cdf = ndtr(e, x);
        let middle = e.unary("stablehlo.log", &cdf);
        // Below: -x^2/2 - ln(-x) - ln(2 pi)/2 + ln(series(1 / x^2)).
        let x2 = e.mul(x, x);
        let one = e.splat(1.0, x);
        let u = e.div(&one, &x2);
        let series = mills_series(e, &u);
        let log_series = e.unary("stablehlo.log", &series);
        let minus_x = e.unary("stablehlo.negate", x);
        let log_minus_x = e.unary("stablehlo.log", &minus_x);
        let quadratic = affine(e, &x2, -0.5, -0.5 * std::f64::consts::TAU.ln());
        let far = e.sub(&quadratic, &log_minus_x);
        let far = e.add(&far, &log_series);
        let zero = e.splat(0.0, x);
        let is_positive = e.compare(Cmp::Gt, x, &zero);
        let threshold = e.splat(LOG_NDTR_SERIES_BELOW, x);
        let is_far = e.compare(Cmp::Lt, x, &threshold);
        let near = e.select(&is_positive, &positive, &middle);
        e.select(&is_far, &far, &near)
    })
}

/// `torch.special.erfcx`: `e^(x^2) erfc(x)`.
pub(super) fn erfcx(e: &mut Emitter, x: &V) -> V {
    in_f64(e, x, |e, x| {
        let x2 = e.mul(x, x);
        let growth = e.unary("stablehlo.exponential", &x2);
        let erfc = e.unary("chlo.erfc", x);
        let direct = e.mul(&growth, &erfc);
        // 1 / (x sqrt(pi)) series(1 / (2 x^2)).
        let two_x2 = e.binary_const("stablehlo.multiply", &x2, 2.0);
        let one = e.splat(1.0, x);
        let u = e.div(&one, &two_x2);
        let series = mills_series(e, &u);
        let x_root_pi = e.binary_const("stablehlo.multiply", x, std::f64::consts::PI.sqrt());
        let far = e.div(&series, &x_root_pi);
        let threshold = e.splat(ERFCX_SERIES_FROM, x);
        let is_far = e.compare(Cmp::Gt, x, &threshold);
        e.select(&is_far, &far, &direct)
    })
}

pub(super) const IGAMMA_MAX_ITERATIONS: i64 = 20_000;

/// `torch.igamma` (P) or, with `upper`, `torch.igammac` (Q), with PyTorch's
/// values at the domain's edges.
pub(super) fn igamma(e: &mut Emitter, a: &V, x: &V, upper: bool) -> V {
    let dtype = a.ty.dtype;
    let (a0, x0) = (e.convert(a, DType::F64), e.convert(x, DType::F64));
    let (a, x) = (&a0, &x0);
    let zero = e.splat(0.0, x);
    let one = e.splat(1.0, x);
    let eps = e.splat(f64::EPSILON, x);
    let tiny = e.splat(1e-300, x);
    // Where the series serves (x < a + 1), else the continued fraction.
    let a_plus_one = e.add(a, &one);
    let use_series = e.compare(Cmp::Lt, x, &a_plus_one);
    let use_fraction = e.unary("stablehlo.not", &use_series);
    // Inputs the loop may not see (edges, NaN) are replaced by (1, 1).
    let positive_a = e.compare(Cmp::Gt, a, &zero);
    let positive_x = e.compare(Cmp::Gt, x, &zero);
    let finite_a = e.is_finite(a);
    let finite_x = e.is_finite(x);
    let regular = e.binary("stablehlo.and", &positive_a, &positive_x);
    let regular = e.binary("stablehlo.and", &regular, &finite_a);
    let regular = e.binary("stablehlo.and", &regular, &finite_x);
    let a_in = e.select(&regular, a, &one);
    let x_in = e.select(&regular, x, &one);
    let (a, x) = (&a_in, &x_in);
    // The loop's state: step; series sum and term; Lentz's b, c, d, h; and
    // whether each element is done (the method it does not use is done
    // from the start).
    let step0 = e.scalar(1, DType::I64);
    let a_plus_one_in = e.add(a, &one);
    let inverse_a1 = e.div(&one, &a_plus_one_in);
    let sum0 = one.clone();
    let term0 = e.mul(x, &inverse_a1);
    let sum0 = e.add(&sum0, &term0);
    let x_plus_one = e.add(x, &one);
    let b0 = e.sub(&x_plus_one, a);
    let c0 = e.splat(1e300, x);
    let d0 = e.div(&one, &b0);
    let h0 = d0.clone();
    let series_done0 = use_fraction.clone();
    let fraction_done0 = use_series.clone();
    let not_regular = e.unary("stablehlo.not", &regular);
    let series_done0 = e.binary("stablehlo.or", &series_done0, &not_regular);
    let fraction_done0 = e.binary("stablehlo.or", &fraction_done0, &not_regular);
    let rank = x.ty.rank();
    let all_dims: Vec<usize> = (0..rank).collect();
    let limit = e.scalar(IGAMMA_MAX_ITERATIONS, DType::I64);
    let finals = e.while_op(
        &[
            &step0,
            &sum0,
            &term0,
            &b0,
            &c0,
            &d0,
            &h0,
            &series_done0,
            &fraction_done0,
        ],
        |e, s| {
            let within = e.compare(Cmp::Lt, &s[0], &limit);
            let done = e.binary("stablehlo.and", &s[7], &s[8]);
            let pending = e.unary("stablehlo.not", &done);
            let any = e.reduce(
                &pending,
                crate::scalar::Scalar::Bool(false),
                "stablehlo.or",
                &all_dims,
            );
            e.binary("stablehlo.and", &within, &any)
        },
        |e, s| {
            let (step, sum, term, b, c, d, h) = (&s[0], &s[1], &s[2], &s[3], &s[4], &s[5], &s[6]);
            let (series_done, fraction_done) = (&s[7], &s[8]);
            let n = e.convert(step, DType::F64);
            let n = e.broadcast_in_dim(&n, &x.ty.shape, []);
            let one = e.splat(1.0, x);
            // Series: term *= x / (a + n + 1); sum += term.
            let next_n = e.add(&n, &one);
            let denominator = e.add(a, &next_n);
            let ratio = e.div(x, &denominator);
            let next_term = e.mul(term, &ratio);
            let next_sum = e.add(sum, &next_term);
            let magnitude = e.unary("stablehlo.abs", &next_sum);
            let small = e.mul(&magnitude, &eps);
            let term_size = e.unary("stablehlo.abs", &next_term);
            let converged = e.compare(Cmp::Lt, &term_size, &small);
            let series_now = e.binary("stablehlo.or", series_done, &converged);
            let term = e.select(series_done, term, &next_term);
            let sum = e.select(series_done, sum, &next_sum);
            // Lentz: an = -n (n - a), b += 2.
            let n_minus_a = e.sub(&n, a);
            let an = e.mul(&n, &n_minus_a);
            let an = e.unary("stablehlo.negate", &an);
            let next_b = e.binary_const("stablehlo.add", b, 2.0);
            let an_d = e.mul(&an, d);
            let next_d = e.add(&an_d, &next_b);
            let d_size = e.unary("stablehlo.abs", &next_d);
            let tiny_d = e.compare(Cmp::Lt, &d_size, &tiny);
            let next_d = e.select(&tiny_d, &tiny, &next_d);
            let an_over_c = e.div(&an, c);
            let next_c = e.add(&next_b, &an_over_c);
            let c_size = e.unary("stablehlo.abs", &next_c);
            let tiny_c = e.compare(Cmp::Lt, &c_size, &tiny);
            let next_c = e.select(&tiny_c, &tiny, &next_c);
            let next_d = e.div(&one, &next_d);
            let delta = e.mul(&next_d, &next_c);
            let next_h = e.mul(h, &delta);
            let delta_minus_one = e.sub(&delta, &one);
            let off = e.unary("stablehlo.abs", &delta_minus_one);
            let converged = e.compare(Cmp::Lt, &off, &eps);
            let fraction_now = e.binary("stablehlo.or", fraction_done, &converged);
            let b = e.select(fraction_done, b, &next_b);
            let c = e.select(fraction_done, c, &next_c);
            let d = e.select(fraction_done, d, &next_d);
            let h = e.select(fraction_done, h, &next_h);
            let one_step = e.scalar(1, DType::I64);
            vec![
                e.add(step, &one_step),
                sum,
                term,
                b,
                c,
                d,
                h,
                series_now,
                fraction_now,
            ]
        },
    );
    let (sum, h) = (&finals[1], &finals[6]);
    let converged = e.binary("stablehlo.and", &finals[7], &finals[8]);
    // x^a e^-x / gamma(a + 1) and / gamma(a), in logs.
    let log_x = e.unary("stablehlo.log", x);
    let a_log_x = e.mul(a, &log_x);
    let exponent = e.sub(&a_log_x, x);
    let lgamma_a1 = e.unary("chlo.lgamma", &a_plus_one_in);
    let lgamma_a = e.unary("chlo.lgamma", a);
    let series_exponent = e.sub(&exponent, &lgamma_a1);
    let series_scale = e.unary("stablehlo.exponential", &series_exponent);
    let fraction_exponent = e.sub(&exponent, &lgamma_a);
    let fraction_scale = e.unary("stablehlo.exponential", &fraction_exponent);
    let p_series = e.mul(&series_scale, sum);
    let q_fraction = e.mul(&fraction_scale, h);
    let p_fraction = e.sub(&one, &q_fraction);
    let q_series = e.sub(&one, &p_series);
    let p = e.select(&use_series, &p_series, &p_fraction);
    let q = e.select(&use_series, &q_series, &q_fraction);
    let value = if upper { q } else { p };
    let nan = e.splat(f64::NAN, x);
    let value = e.select(&converged, &value, &nan);
    // PyTorch's values at the edges, from the operands.
    let (a, x) = (&a0, &x0);
    let inf = e.splat(f64::INFINITY, x);
    let (lower_one, upper_one) = if upper { (&zero, &one) } else { (&one, &zero) };
    let a_zero = e.compare(Cmp::Eq, a, &zero);
    let x_zero = e.compare(Cmp::Eq, x, &zero);
    let a_inf = e.compare(Cmp::Eq, a, &inf);
    let x_inf = e.compare(Cmp::Eq, x, &inf);
    // P = 1 (Q = 0): a = 0 < x, or x = inf > a; P = 0: x = 0 < a, or a = inf.
    let value = e.select(&a_zero, lower_one, &value);
    let value = e.select(&x_inf, lower_one, &value);
    let value = e.select(&x_zero, upper_one, &value);
    let value = e.select(&a_inf, upper_one, &value);
    let a_negative = e.compare(Cmp::Lt, a, &zero);
    let x_negative = e.compare(Cmp::Lt, x, &zero);
    let both_zero = e.binary("stablehlo.and", &a_zero, &x_zero);
    let both_inf = e.binary("stablehlo.and", &a_inf, &x_inf);
    let a_nan = e.is_nan(a);
    let x_nan = e.is_nan(x);
    let mut undefined = e.binary("stablehlo.or", &a_negative, &x_negative);
    for flag in [&both_zero, &both_inf, &a_nan, &x_nan] {
        undefined = e.binary("stablehlo.or", &undefined, flag);
    }
    let value = e.select(&undefined, &nan, &value);
    e.convert(&value, dtype)
}
