//! The Bessel functions of `torch.special` and Airy's `Ai`, from their
//! mathematical definitions (integrals, power series, asymptotic
//! expansions; no table of fitted coefficients):
//!
//! - the modified Bessel functions I0 and I1, scaled (`i0e`, `i1e`) or not:
//!   below [`BESSEL_ASYMPTOTIC_FROM`], their integrals over a period,
//!   `e^-a I_n(a) = (1/pi) int_0^pi e^(a (cos t - 1)) cos(n t) dt`, by the
//!   trapezoidal rule, exact for a periodic analytic integrand up to the
//!   Fourier modes it aliases (`I_64(40) / I_0(40)` is below 1e-22); I1's
//!   terms are paired so that no two cancel (each pair an `expm1`), which
//!   keeps its relative accuracy at tiny arguments. Above, the asymptotic
//!   series `e^-a I_n(a) ~ (2 pi a)^(-1/2) sum_k prod_j ((2j-1)^2 - 4n^2) /
//!   (8 j a)`, whose twelfth term is below 1e-15 there;
//! - the modified Bessel functions of the second kind K0 and K1, scaled or
//!   not: `e^x K_n(x) = int_0^inf e^(-x (cosh t - 1)) cosh(n t) dt`, even and
//!   analytic in t, so the trapezoidal rule converges geometrically (steps
//!   of 1/4 to t = 30 up to x = 2, of 1/10 to t = 3.8 up to 25), the
//!   asymptotic series above 25, and `-ln(x/2) - gamma`, `1/x` below 1e-9;
//! - the Bessel functions J0 and J1: up to |x| = 25 Bessel's integral
//!   `J_n(x) = (1/2pi) int_0^2pi cos(n t - x sin t) dt` by the trapezoidal
//!   rule on 64 points (exact but for the aliased orders n +- 64, whose
//!   J is below 1e-19 there), Hankel's asymptotic expansion above, the
//!   power series below 1;
//! - the Bessel functions Y0 and Y1: up to 8 their power series (with J's,
//!   A&S 9.1.11 and 9.1.13), up to 25 Neumann's series `Y0 = (2/pi)(ln(x/2)
//!   + gamma) J0 - (4/pi) sum_k (-1)^k J_2k / k` (and its derivative for
//!   Y1) with J_0..J_70 from Miller's backward recurrence normalized by
//!   `J0 + 2 sum J_2k = 1`, Hankel's expansion above;
//! - `spherical_bessel_j0`, `sin(x) / x`;
//! - Airy's `Ai`: its Maclaurin series from -8 to 2 (float64's rounding of
//!   the growing terms leaves about 1e-10 relative near -8), `sqrt(x/3)
//!   K_(1/3)(zeta) / pi` above (K as above), the asymptotic expansion in
//!   `zeta = (2/3) |x|^(3/2)` below -8; NaN at both infinities, as PyTorch.
//!
//! Each computes in float64 and rounds to the result's dtype.

use super::special::{affine, in_f64, polynomial};
use super::{Cmp, Emitter, V};

/// Where the Bessel functions switch from the integral to the series.
const BESSEL_ASYMPTOTIC_FROM: f64 = 40.0;
/// Trapezoid intervals over [0, pi].
const BESSEL_INTERVALS: usize = 32;
/// Terms of the asymptotic series.
const BESSEL_TERMS: usize = 12;

/// `e^-a I_n(a)` for a >= 0 (float64), n = 0 or 1.
fn bessel_i_scaled(e: &mut Emitter, n: u32, a: &V) -> V {
    let intervals = BESSEL_INTERVALS as f64;
    let step = std::f64::consts::PI / intervals;
    // cos(t) - 1 = -2 sin^2(t / 2), without cancellation.
    let c = |j: usize| -2.0 * (j as f64 * step / 2.0).sin().powi(2);
    let integral = if n == 0 {
        // Every term is positive: sum them as they come (t = 0 gives 1).
        let mut sum = e.splat(0.5, a);
        for j in 1..=BESSEL_INTERVALS {
            let weight = if j == BESSEL_INTERVALS { 0.5 } else { 1.0 };
            let exponent = e.binary_const("stablehlo.multiply", a, c(j));
            let term = e.unary("stablehlo.exponential", &exponent);
            let term = e.binary_const("stablehlo.multiply", &term, weight);
            sum = e.add(&sum, &term);
        }
        sum
    } else {
        // t_j and t_(N - j) pair up: cos(t_j) e^(a c_j) - cos(t_j) e^(a
        // c_(N - j)) = -cos(t_j) e^(a c_j) expm1(-2 a cos(t_j)); the two
        // ends give -expm1(-2 a) / 2, the middle (cos = 0) nothing.
        let minus_two_a = e.binary_const("stablehlo.multiply", a, -2.0);
        let ends = e.unary("stablehlo.exponential_minus_one", &minus_two_a);
        let mut sum = e.binary_const("stablehlo.multiply", &ends, -0.5);
        for j in 1..BESSEL_INTERVALS.div_ceil(2) {
            let cos = (j as f64 * step).cos();
            let exponent = e.binary_const("stablehlo.multiply", a, c(j));
            let decay = e.unary("stablehlo.exponential", &exponent);
            let spread = e.binary_const("stablehlo.multiply", a, -2.0 * cos);
            let difference = e.unary("stablehlo.exponential_minus_one", &spread);
            let term = e.mul(&decay, &difference);
            let term = e.binary_const("stablehlo.multiply", &term, -cos);
            sum = e.add(&sum, &term);
        }
        sum
    };
    let integral = e.binary_const("stablehlo.multiply", &integral, 1.0 / intervals);
    // The series in 1 / a, from a term ratio ((2k-1)^2 - 4n^2) / (8k).
    let mu = 4.0 * f64::from(n * n);
    let mut coefficients = vec![1.0];
    for k in 1..BESSEL_TERMS {
        let odd = (2 * k - 1) as f64;
        let previous = coefficients[k - 1];
        coefficients.push(previous * (odd * odd - mu) / (8.0 * k as f64));
    }
    let one = e.splat(1.0, a);
    let inverse = e.div(&one, a);
    let series = polynomial(e, &inverse, &coefficients);
    let two_pi_a = e.binary_const("stablehlo.multiply", a, std::f64::consts::TAU);
    let scale = e.unary("stablehlo.rsqrt", &two_pi_a);
    let asymptotic = e.mul(&series, &scale);
    let far = e.splat(BESSEL_ASYMPTOTIC_FROM, a);
    let is_far = e.compare(Cmp::Gt, a, &far);
    e.select(&is_far, &asymptotic, &integral)
}

/// `torch.special.i0e` (`scaled`) or `torch.i0`.
pub(super) fn bessel_i0(e: &mut Emitter, x: &V, scaled: bool) -> V {
    in_f64(e, x, |e, x| {
        let a = e.unary("stablehlo.abs", x);
        let s = bessel_i_scaled(e, 0, &a);
        if scaled {
            return s;
        }
        let growth = e.unary("stablehlo.exponential", &a);
        let value = e.mul(&s, &growth);
        // At infinity the scaled value is 0 and e^a infinite.
        let inf = e.splat(f64::INFINITY, x);
        let infinite = e.compare(Cmp::Eq, &a, &inf);
        e.select(&infinite, &inf, &value)
    })
}

/// `torch.special.i1e` (`scaled`) or `torch.special.i1`: odd.
pub(super) fn bessel_i1(e: &mut Emitter, x: &V, scaled: bool) -> V {
    in_f64(e, x, |e, x| {
        let a = e.unary("stablehlo.abs", x);
        let magnitude = bessel_i_scaled(e, 1, &a);
        let magnitude = if scaled {
            magnitude
        } else {
            let growth = e.unary("stablehlo.exponential", &a);
            let value = e.mul(&magnitude, &growth);
            let inf = e.splat(f64::INFINITY, x);
            let infinite = e.compare(Cmp::Eq, &a, &inf);
            e.select(&infinite, &inf, &value)
        };
        odd_extension(e, x, &magnitude)
    })
}

/// `e^x K_order(x)` for x > 0 (float64). Below 1e-9 the leading terms for
/// orders 0 and 1; other orders (Airy's 1/3) are not asked there.
fn bessel_k_scaled(e: &mut Emitter, order: f64, x: &V) -> V {
    // The trapezoidal rule on [0, steps * h], the first point halved (the
    // integrand is even).
    let trapezoid = |e: &mut Emitter, h: f64, steps: usize| {
        let mut sum = e.splat(0.5, x);
        for j in 1..=steps {
            let t = j as f64 * h;
            let c = 2.0 * (t / 2.0).sinh().powi(2);
            let exponent = e.binary_const("stablehlo.multiply", x, -c);
            let term = e.unary("stablehlo.exponential", &exponent);
            let weight = (order * t).cosh();
            let term = e.binary_const("stablehlo.multiply", &term, weight);
            sum = e.add(&sum, &term);
        }
        e.binary_const("stablehlo.multiply", &sum, h)
    };
    let near = trapezoid(e, 0.25, 120);
    let middle = trapezoid(e, 0.1, 38);
    // The asymptotic series: term ratio ((4n^2 - (2k-1)^2) / (8k)) / x.
    let mu = 4.0 * order * order;
    let mut coefficients = vec![1.0];
    for k in 1..BESSEL_ASYMPTOTIC_TERMS {
        let odd = (2 * k - 1) as f64;
        let previous = coefficients[k - 1];
        coefficients.push(previous * (mu - odd * odd) / (8.0 * k as f64));
    }
    let one = e.splat(1.0, x);
    let inverse = e.div(&one, x);
    let series = polynomial(e, &inverse, &coefficients);
    let half_pi = e.splat(std::f64::consts::FRAC_PI_2, x);
    let half_pi_over_x = e.div(&half_pi, x);
    let scale = e.unary("stablehlo.sqrt", &half_pi_over_x);
    let far = e.mul(&series, &scale);
    // Tiny x: K0 ~ -ln(x/2) - gamma, K1 ~ 1/x (times e^x ~ 1).
    let tiny = if order == 0.0 {
        let half = e.binary_const("stablehlo.multiply", x, 0.5);
        let log = e.unary("stablehlo.log", &half);
        affine(e, &log, -1.0, -EULER_GAMMA)
    } else {
        inverse
    };
    let growth = e.unary("stablehlo.exponential", x);
    let tiny = e.mul(&tiny, &growth);
    let two = e.splat(2.0, x);
    let is_middle = e.compare(Cmp::Gt, x, &two);
    let value = e.select(&is_middle, &middle, &near);
    let limit = e.splat(BESSEL_ASYMPTOTIC_FROM_K, x);
    let is_far = e.compare(Cmp::Gt, x, &limit);
    let value = e.select(&is_far, &far, &value);
    let small = e.splat(1e-9, x);
    let is_tiny = e.compare(Cmp::Lt, x, &small);
    e.select(&is_tiny, &tiny, &value)
}

const EULER_GAMMA: f64 = 0.577_215_664_901_532_9;
/// Where K and J switch to their asymptotic series, and its terms.
const BESSEL_ASYMPTOTIC_FROM_K: f64 = 25.0;
const BESSEL_ASYMPTOTIC_TERMS: usize = 18;

/// `torch.special.modified_bessel_k{0,1}` and their `scaled_` forms (times
/// e^x): +inf at 0, NaN below, 0 at +inf.
pub(super) fn bessel_k(e: &mut Emitter, x: &V, n: u32, scaled: bool) -> V {
    in_f64(e, x, |e, x| {
        let zero = e.splat(0.0, x);
        let positive = e.compare(Cmp::Gt, x, &zero);
        // Outside x > 0 the formulas are not evaluated at x: 1 stands in.
        let one = e.splat(1.0, x);
        let safe = e.select(&positive, x, &one);
        let s = bessel_k_scaled(e, f64::from(n), &safe);
        let value = if scaled {
            s
        } else {
            let minus = e.unary("stablehlo.negate", &safe);
            let decay = e.unary("stablehlo.exponential", &minus);
            e.mul(&s, &decay)
        };
        let inf = e.splat(f64::INFINITY, x);
        let nan = e.splat(f64::NAN, x);
        let is_zero = e.compare(Cmp::Eq, x, &zero);
        let at_infinity = e.compare(Cmp::Eq, x, &inf);
        let value = e.select(&at_infinity, &zero, &value);
        let value = e.select(&positive, &value, &nan);
        e.select(&is_zero, &inf, &value)
    })
}

/// Points of Bessel's integral for J.
const BESSEL_J_POINTS: usize = 64;
const BESSEL_J_ASYMPTOTIC_FROM: f64 = 25.0;
/// Terms of J's power series below 1 (the 12th is below 1e-25).
const BESSEL_J_SERIES_TERMS: usize = 12;

/// `torch.special.bessel_j{0,1}`.
pub(super) fn bessel_j(e: &mut Emitter, x: &V, n: u32) -> V {
    in_f64(e, x, |e, x| {
        let a = e.unary("stablehlo.abs", x);
        // Bessel's integral by the trapezoidal rule over a period.
        let mut sum = e.splat(0.0, x);
        for j in 0..BESSEL_J_POINTS {
            let t = std::f64::consts::TAU * j as f64 / BESSEL_J_POINTS as f64;
            let phase = e.binary_const("stablehlo.multiply", &a, -t.sin());
            let phase = e.binary_const("stablehlo.add", &phase, f64::from(n) * t);
            let term = e.unary("stablehlo.cosine", &phase);
            sum = e.add(&sum, &term);
        }
        let near = e.binary_const("stablehlo.multiply", &sum, 1.0 / BESSEL_J_POINTS as f64);
        let far = hankel(e, &a, n, true);
        // Below 1 the power series sum_k (-1)^k (a/2)^(2k+n) / (k! (k+n)!),
        // which keeps J1's relative accuracy at tiny arguments.
        let half = e.binary_const("stablehlo.multiply", &a, 0.5);
        let quarter_a2 = e.mul(&half, &half);
        let mut coefficients = vec![1.0];
        for k in 1..BESSEL_J_SERIES_TERMS {
            let previous: f64 = coefficients[k - 1];
            coefficients.push(-previous / (k as f64 * (k as u32 + n) as f64));
        }
        let series = polynomial(e, &quarter_a2, &coefficients);
        let series = if n == 0 {
            series
        } else {
            e.mul(&series, &half)
        };
        let limit = e.splat(BESSEL_J_ASYMPTOTIC_FROM, x);
        let is_far = e.compare(Cmp::Gt, &a, &limit);
        let value = e.select(&is_far, &far, &near);
        let one = e.splat(1.0, x);
        let is_small = e.compare(Cmp::Lt, &a, &one);
        let value = e.select(&is_small, &series, &value);
        if n == 0 {
            return value;
        }
        odd_extension(e, x, &value)
    })
}

/// `torch.special.spherical_bessel_j0`: sin(x) / x, 1 at 0, 0 at +-inf.
pub(super) fn spherical_bessel_j0(e: &mut Emitter, x: &V) -> V {
    in_f64(e, x, |e, x| {
        let sin = e.unary("stablehlo.sine", x);
        let value = e.div(&sin, x);
        let zero = e.splat(0.0, x);
        let one = e.splat(1.0, x);
        let is_zero = e.compare(Cmp::Eq, x, &zero);
        let a = e.unary("stablehlo.abs", x);
        let inf = e.splat(f64::INFINITY, x);
        let infinite = e.compare(Cmp::Eq, &a, &inf);
        let value = e.select(&is_zero, &one, &value);
        e.select(&infinite, &zero, &value)
    })
}

/// Where Y switches from its power series to Neumann's series, and the
/// order Miller's recurrence starts from (even, well above 25 + 30).
const BESSEL_Y_SERIES_BELOW: f64 = 8.0;
const BESSEL_Y_MILLER_START: usize = 70;
const BESSEL_Y_SERIES_TERMS: usize = 30;

/// `torch.special.bessel_y{0,1}`: -inf at 0, NaN below 0 and at infinity.
pub(super) fn bessel_y(e: &mut Emitter, x: &V, n: u32) -> V {
    in_f64(e, x, |e, x0| {
        let zero = e.splat(0.0, x0);
        let one = e.splat(1.0, x0);
        let positive = e.compare(Cmp::Gt, x0, &zero);
        let x = e.select(&positive, x0, &one);
        let x = &x;
        let frac_2_pi = std::f64::consts::FRAC_2_PI;
        let half = e.binary_const("stablehlo.multiply", x, 0.5);
        let log_half = e.unary("stablehlo.log", &half);
        let log_term = e.binary_const("stablehlo.add", &log_half, EULER_GAMMA);
        let inverse_x = e.div(&one, x);
        let q = e.mul(&half, &half); // x^2 / 4
        // The power series (x < 8): J0, J1 and the Y sums in powers of x^2/4.
        let mut j0_c = vec![1.0];
        let mut j1_c = vec![1.0];
        let mut y0_c = vec![0.0];
        let mut y1_c = vec![];
        let (mut harmonic, mut factorial_squared, mut k_k1) = (0.0, 1.0, 1.0);
        for k in 1..BESSEL_Y_SERIES_TERMS {
            let kf = k as f64;
            j0_c.push(-j0_c[k - 1] / (kf * kf));
            j1_c.push(-j1_c[k - 1] / (kf * (kf + 1.0)));
            harmonic += 1.0 / kf;
            factorial_squared *= kf * kf;
            let sign = if k % 2 == 1 { 1.0 } else { -1.0 };
            y0_c.push(sign * harmonic / factorial_squared);
        }
        // psi(k+1) + psi(k+2) = -2 gamma + H_k + H_(k+1); terms (-1)^k (...)
        // / (k! (k+1)!).
        let mut h = 0.0;
        for k in 0..BESSEL_Y_SERIES_TERMS {
            let kf = k as f64;
            if k > 0 {
                h += 1.0 / kf;
                k_k1 *= kf * (kf + 1.0);
            }
            let psi_sum = -2.0 * EULER_GAMMA + h + h + 1.0 / (kf + 1.0);
            let sign = if k % 2 == 0 { 1.0 } else { -1.0 };
            y1_c.push(sign * psi_sum / k_k1);
        }
        let series = if n == 0 {
            let j0 = polynomial(e, &q, &j0_c);
            let sum = polynomial(e, &q, &y0_c);
            let lj = e.mul(&log_term, &j0);
            let total = e.add(&lj, &sum);
            e.binary_const("stablehlo.multiply", &total, frac_2_pi)
        } else {
            let j1 = polynomial(e, &q, &j1_c);
            let j1 = e.mul(&j1, &half);
            let sum = polynomial(e, &q, &y1_c);
            let sum = e.mul(&sum, &half);
            // -2/(pi x) + (2/pi) ln(x/2) J1 - (1/pi) sum
            let lj = e.mul(&log_half, &j1);
            let lj = e.binary_const("stablehlo.multiply", &lj, frac_2_pi);
            let pole = e.binary_const("stablehlo.multiply", &inverse_x, -frac_2_pi);
            let sum = e.binary_const("stablehlo.multiply", &sum, -std::f64::consts::FRAC_1_PI);
            let partial = e.add(&pole, &lj);
            e.add(&partial, &sum)
        };
        // Miller: J_(k-1) = (2k / x) J_k - J_(k+1) from J_(N+1) = 0, J_N =
        // 1e-30, normalized by J0 + 2 sum J_2k.
        let mut next = e.splat(0.0, x);
        let mut current = e.splat(1e-30, x);
        let mut j = vec![None; BESSEL_Y_MILLER_START + 1];
        j[BESSEL_Y_MILLER_START] = Some(current.clone());
        for k in (1..=BESSEL_Y_MILLER_START).rev() {
            let factor = e.binary_const("stablehlo.multiply", &inverse_x, 2.0 * k as f64);
            let scaled = e.mul(&factor, &current);
            let previous = e.sub(&scaled, &next);
            next = current;
            current = previous;
            j[k - 1] = Some(current.clone());
        }
        let j: Vec<V> = j.into_iter().map(|v| v.expect("every order")).collect();
        let mut norm = j[0].clone();
        for k in (2..=BESSEL_Y_MILLER_START).step_by(2) {
            let twice = e.binary_const("stablehlo.multiply", &j[k], 2.0);
            norm = e.add(&norm, &twice);
        }
        let inverse_norm = e.div(&one, &norm);
        let neumann = if n == 0 {
            // (2/pi)(ln(x/2) + gamma) J0 - (4/pi) sum_k (-1)^k J_2k / k
            let mut sum = e.splat(0.0, x);
            for k in 1..=BESSEL_Y_MILLER_START / 2 {
                let sign = if k % 2 == 0 { 1.0 } else { -1.0 };
                let term = e.binary_const("stablehlo.multiply", &j[2 * k], sign / k as f64);
                sum = e.add(&sum, &term);
            }
            let lj = e.mul(&log_term, &j[0]);
            let lj = e.binary_const("stablehlo.multiply", &lj, frac_2_pi);
            let sum = e.binary_const("stablehlo.multiply", &sum, -2.0 * frac_2_pi);
            let total = e.add(&lj, &sum);
            e.mul(&total, &inverse_norm)
        } else {
            // -Y0': (2/pi)((ln(x/2) + gamma) J1 - J0 / x) + (2/pi) sum_k
            // (-1)^k (J_(2k-1) - J_(2k+1)) / k
            let mut sum = e.splat(0.0, x);
            for k in 1..BESSEL_Y_MILLER_START / 2 {
                let sign = if k % 2 == 0 { 1.0 } else { -1.0 };
                let difference = e.sub(&j[2 * k - 1], &j[2 * k + 1]);
                let term = e.binary_const("stablehlo.multiply", &difference, sign / k as f64);
                sum = e.add(&sum, &term);
            }
            let lj = e.mul(&log_term, &j[1]);
            let j0_over_x = e.mul(&j[0], &inverse_x);
            let inner = e.sub(&lj, &j0_over_x);
            let total = e.add(&inner, &sum);
            let total = e.binary_const("stablehlo.multiply", &total, frac_2_pi);
            e.mul(&total, &inverse_norm)
        };
        let far = hankel(e, x, n, false);
        let eight = e.splat(BESSEL_Y_SERIES_BELOW, x);
        let limit = e.splat(BESSEL_J_ASYMPTOTIC_FROM, x);
        let is_series = e.compare(Cmp::Lt, x, &eight);
        let is_far = e.compare(Cmp::Gt, x, &limit);
        let value = e.select(&is_series, &series, &neumann);
        let value = e.select(&is_far, &far, &value);
        // The edges, from the original argument.
        let neg_inf = e.splat(f64::NEG_INFINITY, x0);
        let nan = e.splat(f64::NAN, x0);
        let is_zero = e.compare(Cmp::Eq, x0, &zero);
        let value = e.select(&positive, &value, &nan);
        e.select(&is_zero, &neg_inf, &value)
    })
}

/// Hankel's asymptotic expansion for a > 0 (float64): J_n (`first_kind`) =
/// sqrt(2 / (pi a)) (P cos chi - Q sin chi), Y_n = sqrt(2 / (pi a)) (P sin
/// chi + Q cos chi), chi = a - (n/2 + 1/4) pi, P and Q the even and odd
/// terms of sum_k (-1)^floor(k/2) c_k / a^k with c_k = prod_(j <= k) (4n^2 -
/// (2j-1)^2) / (k! 8^k).
fn hankel(e: &mut Emitter, a: &V, n: u32, first_kind: bool) -> V {
    let x = a;
    let mu = 4.0 * f64::from(n * n);
    let mut c = vec![1.0];
    for k in 1..2 * BESSEL_ASYMPTOTIC_TERMS {
        let odd = (2 * k - 1) as f64;
        let previous = c[k - 1];
        c.push(previous * (mu - odd * odd) / (8.0 * k as f64));
    }
    let (p, q) = alternating_halves(&c);
    let one = e.splat(1.0, x);
    let inverse = e.div(&one, a);
    let inverse2 = e.mul(&inverse, &inverse);
    let p = polynomial(e, &inverse2, &p);
    let q = polynomial(e, &inverse2, &q);
    let q = e.mul(&q, &inverse);
    // cos and sin of chi from those of a (no subtraction of pi/4 in
    // floating point): chi = a - pi/4 for J0, a - 3pi/4 for J1.
    let (cos, sin) = (e.unary("stablehlo.cosine", a), e.unary("stablehlo.sine", a));
    let sum_cs = e.add(&cos, &sin);
    let difference_sc = e.sub(&sin, &cos);
    let root_half = std::f64::consts::FRAC_1_SQRT_2;
    let (cos_chi, sin_chi) = if n == 0 {
        (
            e.binary_const("stablehlo.multiply", &sum_cs, root_half),
            e.binary_const("stablehlo.multiply", &difference_sc, root_half),
        )
    } else {
        (
            e.binary_const("stablehlo.multiply", &difference_sc, root_half),
            e.binary_const("stablehlo.multiply", &sum_cs, -root_half),
        )
    };
    let wave = if first_kind {
        let p_cos = e.mul(&p, &cos_chi);
        let q_sin = e.mul(&q, &sin_chi);
        e.sub(&p_cos, &q_sin)
    } else {
        let p_sin = e.mul(&p, &sin_chi);
        let q_cos = e.mul(&q, &cos_chi);
        e.add(&p_sin, &q_cos)
    };
    let two_over_pi = e.splat(std::f64::consts::FRAC_2_PI, x);
    let two_over_pi_a = e.div(&two_over_pi, a);
    let amplitude = e.unary("stablehlo.sqrt", &two_over_pi_a);
    e.mul(&amplitude, &wave)
}

const AIRY_AI_0: f64 = 0.355_028_053_887_817_2;
const AIRY_AI_PRIME_0: f64 = -0.258_819_403_792_806_8;
const AIRY_SERIES_TERMS: usize = 32;
const AIRY_ASYMPTOTIC_TERMS: usize = 12;

/// `torch.special.airy_ai`.
pub(super) fn airy_ai(e: &mut Emitter, x: &V) -> V {
    in_f64(e, x, |e, x| {
        let one = e.splat(1.0, x);
        // Maclaurin: Ai(0) f(x) + Ai'(0) g(x), f and g in powers of x^3.
        let x2 = e.mul(x, x);
        let u = e.mul(&x2, x);
        let (mut f, mut g) = (vec![1.0], vec![1.0]);
        for k in 1..AIRY_SERIES_TERMS {
            let k3 = 3.0 * k as f64;
            f.push(f[k - 1] / (k3 * (k3 - 1.0)));
            g.push(g[k - 1] / (k3 * (k3 + 1.0)));
        }
        let f = polynomial(e, &u, &f);
        let g = polynomial(e, &u, &g);
        let g = e.mul(&g, x);
        let f = e.binary_const("stablehlo.multiply", &f, AIRY_AI_0);
        let g = e.binary_const("stablehlo.multiply", &g, AIRY_AI_PRIME_0);
        let series = e.add(&f, &g);
        // zeta = (2/3) |x|^(3/2).
        let a = e.unary("stablehlo.abs", x);
        let root = e.unary("stablehlo.sqrt", &a);
        let a_root = e.mul(&a, &root);
        let zeta = e.binary_const("stablehlo.multiply", &a_root, 2.0 / 3.0);
        // x > 2: sqrt(x/3) e^-zeta (e^zeta K_(1/3)(zeta)) / pi.
        let two = e.splat(2.0, x);
        let is_right = e.compare(Cmp::Gt, x, &two);
        let safe_zeta = e.select(&is_right, &zeta, &one);
        let k = bessel_k_scaled(e, 1.0 / 3.0, &safe_zeta);
        let minus_zeta = e.unary("stablehlo.negate", &safe_zeta);
        let decay = e.unary("stablehlo.exponential", &minus_zeta);
        let third = e.binary_const("stablehlo.multiply", x, 1.0 / 3.0);
        let scale = e.unary("stablehlo.sqrt", &third);
        let right = e.mul(&k, &decay);
        let right = e.mul(&right, &scale);
        let right = e.binary_const("stablehlo.multiply", &right, std::f64::consts::FRAC_1_PI);
        // x < -8: pi^(-1/2) |x|^(-1/4) (sin(zeta + pi/4) P - cos(zeta + pi/4)
        // Q), P and Q the even and odd terms of sum_k (-1)^floor(k/2) u_k
        // zeta^-k, u_k's ratio (6k-5)(6k-3)(6k-1) / ((2k-1) 216 k).
        let mut c = vec![1.0];
        for k in 1..2 * AIRY_ASYMPTOTIC_TERMS {
            let kf = k as f64;
            let ratio = (6.0 * kf - 5.0) * (6.0 * kf - 3.0) * (6.0 * kf - 1.0)
                / ((2.0 * kf - 1.0) * 216.0 * kf);
            c.push(c[k - 1] * ratio);
        }
        let (p, q) = alternating_halves(&c);
        let inverse = e.div(&one, &zeta);
        let inverse2 = e.mul(&inverse, &inverse);
        let p = polynomial(e, &inverse2, &p);
        let q = polynomial(e, &inverse2, &q);
        let q = e.mul(&q, &inverse);
        let (sin, cos) = (
            e.unary("stablehlo.sine", &zeta),
            e.unary("stablehlo.cosine", &zeta),
        );
        let root_half = std::f64::consts::FRAC_1_SQRT_2;
        let sin_plus = e.add(&sin, &cos);
        let sin_plus = e.binary_const("stablehlo.multiply", &sin_plus, root_half);
        let cos_plus = e.sub(&cos, &sin);
        let cos_plus = e.binary_const("stablehlo.multiply", &cos_plus, root_half);
        let sin_p = e.mul(&sin_plus, &p);
        let cos_q = e.mul(&cos_plus, &q);
        let wave = e.sub(&sin_p, &cos_q);
        let quarter = e.unary("stablehlo.sqrt", &root);
        let amplitude = e.div(&one, &quarter);
        let amplitude = e.binary_const(
            "stablehlo.multiply",
            &amplitude,
            1.0 / std::f64::consts::PI.sqrt(),
        );
        let left = e.mul(&amplitude, &wave);
        let minus_eight = e.splat(-8.0, x);
        let is_left = e.compare(Cmp::Lt, x, &minus_eight);
        let value = e.select(&is_right, &right, &series);
        let value = e.select(&is_left, &left, &value);
        // NaN at both infinities, as PyTorch.
        let inf = e.splat(f64::INFINITY, x);
        let infinite = e.compare(Cmp::Eq, &a, &inf);
        let nan = e.splat(f64::NAN, x);
        e.select(&infinite, &nan, &value)
    })
}

/// The even and odd terms of `sum_k (-1)^floor(k/2) c_k z^-k` (the P and Q
/// of Hankel's and Airy's expansions): their coefficients, each a series in
/// z^-2 (Q's to be multiplied by z^-1).
fn alternating_halves(c: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let sign = |k: usize| if (k / 2).is_multiple_of(2) { 1.0 } else { -1.0 };
    let half = c.len() / 2;
    (
        (0..half).map(|i| sign(2 * i) * c[2 * i]).collect(),
        (0..half).map(|i| sign(2 * i + 1) * c[2 * i + 1]).collect(),
    )
}

/// An odd function's value at x from its value at |x|: x's sign, and a
/// zero keeps its own sign (I1, J1).
fn odd_extension(e: &mut Emitter, x: &V, magnitude: &V) -> V {
    let zero = e.splat(0.0, x);
    let negative = e.compare(Cmp::Lt, x, &zero);
    let flipped = e.unary("stablehlo.negate", magnitude);
    let signed = e.select(&negative, &flipped, magnitude);
    let is_zero = e.compare(Cmp::Eq, x, &zero);
    e.select(&is_zero, x, &signed)
}
