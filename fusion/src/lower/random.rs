//! Counter-based random numbers: `stablehlo.rng_bit_generator` with Threefry,
//! keyed by two 0-d int64 operands.
//!
//! The generator is a pure function of its state, so the key is the only
//! thing that varies between draws; as an operand (a lifted scalar) it never
//! changes the program. Bits become floats in `[0, 1)` by the mantissa trick:
//! the top mantissa-width bits under the exponent of 1.0 give a float in
//! `[1, 2)`, minus 1. Every value is a multiple of 2^-23 (f32) or 2^-52 (f64)
//! and all are equally likely.

use super::{Cmp, Emitter, V};
use crate::dtype::DType;
use crate::scalar::Scalar;
use crate::shape::TensorType;

/// Most rounds of a rejection loop. Gamma accepts over 95% of its candidates
/// a round and Poisson's PTRS about 90%; Knuth's loop (rates below 10) needs
/// about rate + 1 rounds. An element still pending after this many rounds
/// (a parameter no valid input reaches) is NaN rather than a hang.
const MAX_ROUNDS: i64 = 1000;

/// The largest value of a 16-bit float `dtype` below 1.
fn below_one(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => half::f16::from_bits(half::f16::ONE.to_bits() - 1).to_f64(),
        _ => half::bf16::from_bits(half::bf16::ONE.to_bits() - 1).to_f64(),
    }
}

/// The generator's state (int64[2]) from the two keys.
fn initial_state(e: &mut Emitter, key0: &V, key1: &V) -> V {
    let k0 = e.reshape(key0, &[1]);
    let k1 = e.reshape(key1, &[1]);
    e.op(
        "stablehlo.concatenate",
        &[&k0, &k1],
        "dimension = 0 : i64",
        TensorType::new(DType::I64, &[2]),
    )
}

/// Uniform samples in `[0, 1)` of `shape` as `float` (f32 or f64) from the
/// generator at `state`, and the state after them.
fn draw(e: &mut Emitter, state: &V, shape: &[i64], float: DType) -> (V, V) {
    // (bits dtype, mantissa shift, the bits of 1.0)
    let (bits_dtype, shift, one) = if float == DType::F64 {
        (DType::I64, 12, 0x3FF0_0000_0000_0000_i64)
    } else {
        (DType::I32, 9, 0x3F80_0000_i64)
    };
    let state = e.to_unsigned(state);
    let generated = e.unsigned_op(
        "stablehlo.rng_bit_generator",
        &[&state],
        "rng_algorithm = #stablehlo<rng_algorithm THREE_FRY>",
        &[state.signed.clone(), TensorType::new(bits_dtype, shape)],
    );
    let next = e.from_unsigned(&generated[0]);
    let bits = e.from_unsigned(&generated[1]);
    let mantissa = e.binary_const("stablehlo.shift_right_logical", &bits, shift);
    let in_one_two = e.binary_const("stablehlo.or", &mantissa, Scalar::Int(one));
    let f = e.op(
        "stablehlo.bitcast_convert",
        &[&in_one_two],
        "",
        TensorType::new(float, shape),
    );
    (next, e.binary_const("stablehlo.subtract", &f, 1.0))
}

/// The float type a sampler computes in: f64 for f64, else f32.
fn working_float(dtype: DType) -> DType {
    if dtype == DType::F64 {
        DType::F64
    } else {
        DType::F32
    }
}

pub(super) fn rand_uniform(e: &mut Emitter, key0: &V, key1: &V, out: TensorType) -> V {
    let float = working_float(out.dtype);
    let state = initial_state(e, key0, key1);
    let (_, u) = draw(e, &state, &out.shape, float);
    if out.dtype == float {
        return u;
    }
    // 16-bit floats: rounding can reach 1.0; keep the result below it.
    let narrow = e.convert(&u, out.dtype);
    e.binary_const("stablehlo.minimum", &narrow, below_one(out.dtype))
}

/// A standard normal sample from two uniform ones (Box-Muller).
fn normal(e: &mut Emitter, u1: &V, u2: &V) -> V {
    let one_minus = flip(e, u1);
    let log = e.unary("stablehlo.log", &one_minus);
    let radius = e.binary_const("stablehlo.multiply", &log, -2.0);
    let radius = e.unary("stablehlo.sqrt", &radius);
    let angle = e.binary_const("stablehlo.multiply", u2, 2.0 * std::f64::consts::PI);
    let cos = e.unary("stablehlo.cosine", &angle);
    e.mul(&radius, &cos)
}

/// `1 - u`: a uniform sample in `(0, 1]`, whose log is finite.
fn flip(e: &mut Emitter, u: &V) -> V {
    let one = e.splat(1.0, u);
    e.sub(&one, u)
}

/// Runs a rejection sampler: `round(e, state, result, done)` draws from
/// `state` and returns the new state, each element's candidate and whether
/// it is accepted; an element keeps the first candidate accepted. Stops when
/// every element is done or after `MAX_ROUNDS` (pending elements are then
/// NaN). `extra` values are carried from round to round (after the four
/// fixed ones) and handed to `round`, which returns their next values. The
/// state after the loop comes first in the result.
fn rejection_loop(
    e: &mut Emitter,
    state: &V,
    result: &V,
    done: &V,
    extra: &[&V],
    round: impl FnOnce(&mut Emitter, &V, &[V]) -> (V, V, V, Vec<V>),
) -> (V, V) {
    let rank = result.ty.rank();
    let dims: Vec<usize> = (0..rank).collect();
    let limit = e.scalar(MAX_ROUNDS, DType::I64);
    let first = e.scalar(0i64, DType::I64);
    let mut init: Vec<&V> = vec![state, &first, result, done];
    init.extend_from_slice(extra);
    let out = e.while_op(
        &init,
        |e, s| {
            let within = e.compare(Cmp::Lt, &s[1], &limit);
            let pending = e.unary("stablehlo.not", &s[3]);
            let any = e.reduce(&pending, Scalar::Bool(false), "stablehlo.or", &dims);
            e.binary("stablehlo.and", &within, &any)
        },
        |e, s| {
            let (state, candidate, accept, carried) = round(e, &s[0], &s[4..]);
            let pending = e.unary("stablehlo.not", &s[3]);
            let newly = e.binary("stablehlo.and", &accept, &pending);
            let result = e.select(&newly, &candidate, &s[2]);
            let done = e.binary("stablehlo.or", &s[3], &accept);
            let next = e.binary_const("stablehlo.add", &s[1], 1i64);
            let mut out = vec![state, next, result, done];
            out.extend(carried);
            out
        },
    );
    let nan = e.splat(f64::NAN, &out[2]);
    let result = e.select(&out[3], &out[2], &nan);
    (out[0].clone(), result)
}

/// The smallest positive normal value of a float dtype (what the CPU's
/// gamma sampler never goes below).
fn smallest_normal(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => half::f16::MIN_POSITIVE.to_f64(),
        DType::BF16 => half::bf16::MIN_POSITIVE.to_f64(),
        DType::F64 => f64::MIN_POSITIVE,
        _ => f32::MIN_POSITIVE as f64,
    }
}

/// `torch._standard_gamma`: Marsaglia and Tsang's method, as the CPU kernel
/// (shape below 1 boosted: a sample of shape + 1 times `u^(1/shape)`).
pub(super) fn gamma(e: &mut Emitter, alpha: &V, key0: &V, key1: &V) -> V {
    let out_dtype = alpha.ty.dtype;
    let float = working_float(out_dtype);
    let shape: Vec<i64> = alpha.ty.shape.to_vec();
    let alpha = e.convert(alpha, float);
    let one = e.splat(1.0, &alpha);
    let zero = e.splat(0.0, &alpha);
    let small = e.compare(Cmp::Lt, &alpha, &one);
    let boosted_alpha = e.add(&alpha, &one);
    let a = e.select(&small, &boosted_alpha, &alpha);
    let d = e.binary_const("stablehlo.subtract", &a, 1.0 / 3.0);
    let nine_d = e.binary_const("stablehlo.multiply", &d, 9.0);
    let c = e.unary("stablehlo.rsqrt", &nine_d);
    // Shape 0 gives 0 (then the smallest normal); a negative or NaN shape NaN.
    let positive = e.compare(Cmp::Gt, &alpha, &zero);
    let valid = e.compare(Cmp::Ge, &alpha, &zero);
    let nan = e.splat(f64::NAN, &alpha);
    let result = e.select(&valid, &zero, &nan);
    let done = e.unary("stablehlo.not", &positive);
    let state = initial_state(e, key0, key1);
    let (state, result) = rejection_loop(e, &state, &result, &done, &[], |e, state, _| {
        let (state, u1) = draw(e, state, &shape, float);
        let (state, u2) = draw(e, &state, &shape, float);
        let (state, u3) = draw(e, &state, &shape, float);
        let x = normal(e, &u1, &u2);
        let cx = e.mul(&c, &x);
        let t = e.binary_const("stablehlo.add", &cx, 1.0);
        let tt = e.mul(&t, &t);
        let v = e.mul(&tt, &t);
        let t_positive = e.compare(Cmp::Gt, &t, &zero);
        let u = flip(e, &u3);
        let xx = e.mul(&x, &x);
        // The squeeze: u < 1 - 0.0331 x^4.
        let x4 = e.mul(&xx, &xx);
        let scaled = e.binary_const("stablehlo.multiply", &x4, 0.0331);
        let squeeze_bound = e.sub(&one, &scaled);
        let squeeze = e.compare(Cmp::Lt, &u, &squeeze_bound);
        // The full test: log u < x^2 / 2 + d (1 - v + log v).
        let safe_v = e.select(&t_positive, &v, &one);
        let log_v = e.unary("stablehlo.log", &safe_v);
        let one_minus_v = e.sub(&one, &v);
        let inner = e.add(&one_minus_v, &log_v);
        let d_inner = e.mul(&d, &inner);
        let half_xx = e.binary_const("stablehlo.multiply", &xx, 0.5);
        let bound = e.add(&half_xx, &d_inner);
        let log_u = e.unary("stablehlo.log", &u);
        let full = e.compare(Cmp::Lt, &log_u, &bound);
        let either = e.binary("stablehlo.or", &squeeze, &full);
        let accept = e.binary("stablehlo.and", &t_positive, &either);
        let candidate = e.mul(&d, &v);
        (state, candidate, accept, vec![])
    });
    // The boost of shapes in (0, 1): times u^(1/shape), u in (0, 1].
    let (_, ub) = draw(e, &state, &shape, float);
    let u = flip(e, &ub);
    let log_u = e.unary("stablehlo.log", &u);
    let exponent = e.div(&log_u, &alpha);
    let boost = e.unary("stablehlo.exponential", &exponent);
    let boosted = e.mul(&result, &boost);
    let boosting = e.binary("stablehlo.and", &small, &positive);
    let result = e.select(&boosting, &boosted, &result);
    let result = e.convert(&result, out_dtype);
    let floor = e.splat(smallest_normal(out_dtype), &result);
    e.maximum(&result, &floor)
}

/// A candidate of Hoermann's transformed rejection with squeeze (PTRS,
/// BTRS) from uniforms `u` and `v`: with U = u - 1/2 and us = 1/2 - |U|, the
/// candidate `k = floor((2a / us + b) U + shift)`; `quick`, the squeeze's
/// acceptance (us >= 0.07 and v <= v_r); `log_ratio`, `ln(v scale / (a / us^2
/// + b))`, which the full test compares with the log-probability ratio at k.
struct Proposal {
    k: V,
    us: V,
    quick: V,
    log_ratio: V,
}

/// [`Proposal`] with `[a, b, shift, v_r, ln(scale)]`.
fn transformed_proposal(
    e: &mut Emitter,
    u: &V,
    v: &V,
    [a, b, shift, vr, log_scale]: [&V; 5],
) -> Proposal {
    let centered = e.binary_const("stablehlo.subtract", u, 0.5);
    let distance = e.unary("stablehlo.abs", &centered);
    let half = e.splat(0.5, u);
    let us = e.sub(&half, &distance);
    let two_a = e.binary_const("stablehlo.multiply", a, 2.0);
    let spread = e.div(&two_a, &us);
    let spread = e.add(&spread, b);
    let spread = e.mul(&spread, &centered);
    let shifted = e.add(&spread, shift);
    let k = e.unary("stablehlo.floor", &shifted);
    let wide_bound = e.splat(0.07, u);
    let us_wide = e.compare(Cmp::Ge, &us, &wide_bound);
    let v_low = e.compare(Cmp::Le, v, vr);
    let quick = e.binary("stablehlo.and", &us_wide, &v_low);
    let us_squared = e.mul(&us, &us);
    let hat = e.div(a, &us_squared);
    let hat = e.add(&hat, b);
    let log_v = e.unary("stablehlo.log", v);
    let log_hat = e.unary("stablehlo.log", &hat);
    let log_ratio = e.add(&log_v, log_scale);
    let log_ratio = e.sub(&log_ratio, &log_hat);
    Proposal {
        k,
        us,
        quick,
        log_ratio,
    }
}

/// `torch.poisson`, as the CPU kernel: Knuth's product of uniforms below rate
/// 10 (count the factors until the product falls to `exp(-rate)`), from 10
/// on Hoermann's transformed rejection with squeeze (PTRS).
pub(super) fn poisson(e: &mut Emitter, rate: &V, key0: &V, key1: &V) -> V {
    let out_dtype = rate.ty.dtype;
    let float = working_float(out_dtype);
    let shape: Vec<i64> = rate.ty.shape.to_vec();
    let lam = e.convert(rate, float);
    let zero = e.splat(0.0, &lam);
    let one = e.splat(1.0, &lam);
    let nonnegative = e.compare(Cmp::Ge, &lam, &zero);
    let finite = e.is_finite(&lam);
    let valid = e.binary("stablehlo.and", &nonnegative, &finite);
    let positive = e.compare(Cmp::Gt, &lam, &zero);
    let pending = e.binary("stablehlo.and", &valid, &positive);
    let done = e.unary("stablehlo.not", &pending);
    let nan = e.splat(f64::NAN, &lam);
    let result = e.select(&valid, &zero, &nan);
    let ten = e.splat(10.0, &lam);
    let large = e.compare(Cmp::Ge, &lam, &ten);
    // Knuth's bound.
    let neg_lam = e.unary("stablehlo.negate", &lam);
    let enlam = e.unary("stablehlo.exponential", &neg_lam);
    // PTRS's constants: b = 0.931 + 2.53 sqrt(rate), a = -0.059 + 0.02483 b,
    // 1 / alpha = 1.1239 + 1.1328 / (b - 3.4), v_r = 0.9277 - 3.6224 / (b - 2).
    let slam = e.unary("stablehlo.sqrt", &lam);
    let loglam = e.unary("stablehlo.log", &lam);
    let b_slope = e.binary_const("stablehlo.multiply", &slam, 2.53);
    let b = e.binary_const("stablehlo.add", &b_slope, 0.931);
    let a_slope = e.binary_const("stablehlo.multiply", &b, 0.02483);
    let a = e.binary_const("stablehlo.add", &a_slope, -0.059);
    let b_less_3_4 = e.binary_const("stablehlo.subtract", &b, 3.4);
    let inv_alpha_numerator = e.splat(1.1328, &lam);
    let inv_alpha_term = e.div(&inv_alpha_numerator, &b_less_3_4);
    let invalpha = e.binary_const("stablehlo.add", &inv_alpha_term, 1.1239);
    let log_invalpha = e.unary("stablehlo.log", &invalpha);
    let b_less_2 = e.binary_const("stablehlo.subtract", &b, 2.0);
    let vr_numerator = e.splat(3.6224, &lam);
    let vr_term = e.div(&vr_numerator, &b_less_2);
    let vr_base = e.splat(0.9277, &lam);
    let vr = e.sub(&vr_base, &vr_term);
    let shift = e.binary_const("stablehlo.add", &lam, 0.43);
    let state = initial_state(e, key0, key1);
    let (_, result) = rejection_loop(
        e,
        &state,
        &result,
        &done,
        &[&zero, &one],
        |e, state, carried| {
            let (count, product) = (&carried[0], &carried[1]);
            let (state, u) = draw(e, state, &shape, float);
            let (state, v) = draw(e, &state, &shape, float);
            // Knuth: the count so far is the sample once the product is at
            // or below exp(-rate).
            let product = e.mul(product, &u);
            let going = e.compare(Cmp::Gt, &product, &enlam);
            let knuth_accept = e.unary("stablehlo.not", &going);
            let counted = e.add(count, &one);
            let next_count = e.select(&going, &counted, count);
            // PTRS.
            let p = transformed_proposal(e, &u, &v, [&a, &b, &shift, &vr, &log_invalpha]);
            let (k, us, quick) = (&p.k, &p.us, &p.quick);
            let k_negative = e.compare(Cmp::Lt, k, &zero);
            let narrow_bound = e.splat(0.013, &lam);
            let us_narrow = e.compare(Cmp::Lt, us, &narrow_bound);
            let v_above = e.compare(Cmp::Gt, &v, us);
            let narrow_reject = e.binary("stablehlo.and", &us_narrow, &v_above);
            let reject = e.binary("stablehlo.or", &k_negative, &narrow_reject);
            // The log-probability ratio at k: k ln(rate) - rate - ln(k!).
            let k_loglam = e.mul(k, &loglam);
            let rhs = e.sub(&k_loglam, &lam);
            let k_plus = e.add(k, &one);
            let lgamma = e.unary("chlo.lgamma", &k_plus);
            let rhs = e.sub(&rhs, &lgamma);
            let slow = e.compare(Cmp::Le, &p.log_ratio, &rhs);
            let kept = e.unary("stablehlo.not", &reject);
            let slow = e.binary("stablehlo.and", &kept, &slow);
            let ptrs_accept = e.binary("stablehlo.or", quick, &slow);
            let accept = e.select(&large, &ptrs_accept, &knuth_accept);
            let candidate = e.select(&large, k, count);
            (state, candidate, accept, vec![next_count, product])
        },
    );
    e.convert(&result, out_dtype)
}

/// The remainder of Stirling's formula for `ln k!`:
/// `ln k! - ((k + 1/2) ln(k + 1) - (k + 1) + ln(2 pi) / 2)`; through `lgamma`
/// up to 9, its asymptotic series beyond (where the difference of two large
/// logs would lose it to rounding).
fn stirling_tail(e: &mut Emitter, k: &V) -> V {
    let k1 = e.binary_const("stablehlo.add", k, 1.0);
    let lgamma = e.unary("chlo.lgamma", &k1);
    let log_k1 = e.unary("stablehlo.log", &k1);
    let half_k = e.binary_const("stablehlo.add", k, 0.5);
    let main = e.mul(&half_k, &log_k1);
    let main = e.sub(&main, &k1);
    let main = e.binary_const(
        "stablehlo.add",
        &main,
        0.5 * (2.0 * std::f64::consts::PI).ln(),
    );
    let exact = e.sub(&lgamma, &main);
    // 1/(12 n) - 1/(360 n^3) + 1/(1260 n^5), n = k + 1.
    let one = e.splat(1.0, k);
    let inv = e.div(&one, &k1);
    let inv2 = e.mul(&inv, &inv);
    let inner = e.binary_const("stablehlo.multiply", &inv2, 1.0 / 1260.0);
    let inner = e.binary_const("stablehlo.subtract", &inner, 1.0 / 360.0);
    let inner = e.mul(&inner, &inv2);
    let inner = e.binary_const("stablehlo.add", &inner, 1.0 / 12.0);
    let series = e.mul(&inner, &inv);
    let nine = e.splat(9.0, k);
    let small = e.compare(Cmp::Le, k, &nine);
    e.select(&small, &exact, &series)
}

/// `torch.binomial`, as the CPU kernel: with `q` the smaller of `p` and
/// `1 - p` (counting failures when `p > 1/2`), inversion (geometric waiting
/// times) while `count q < 10`, else Hoermann's BTRS.
pub(super) fn binomial(e: &mut Emitter, count: &V, prob: &V, key0: &V, key1: &V) -> V {
    let out_dtype = count.ty.dtype;
    let float = working_float(out_dtype);
    let shape: Vec<i64> = count.ty.shape.to_vec();
    let n = e.convert(count, float);
    let p = e.convert(prob, float);
    let zero = e.splat(0.0, &n);
    let one = e.splat(1.0, &n);
    // Count <= 0 or p <= 0: 0; p >= 1: the count; NaN anywhere: NaN.
    let no_count = e.compare(Cmp::Le, &n, &zero);
    let never = e.compare(Cmp::Le, &p, &zero);
    let zero_result = e.binary("stablehlo.or", &no_count, &never);
    let always = e.compare(Cmp::Ge, &p, &one);
    let n_nan = e.is_nan(&n);
    let p_nan = e.is_nan(&p);
    let nan_input = e.binary("stablehlo.or", &n_nan, &p_nan);
    let nan = e.splat(f64::NAN, &n);
    let result = e.select(&always, &n, &zero);
    let result = e.select(&zero_result, &zero, &result);
    let result = e.select(&nan_input, &nan, &result);
    let settled = e.binary("stablehlo.or", &zero_result, &always);
    let done = e.binary("stablehlo.or", &settled, &nan_input);
    let half = e.splat(0.5, &n);
    let flip = e.compare(Cmp::Gt, &p, &half);
    let one_minus_p = e.sub(&one, &p);
    let q = e.select(&flip, &one_minus_p, &p);
    let nq = e.mul(&n, &q);
    let ten = e.splat(10.0, &n);
    let btrs = e.compare(Cmp::Ge, &nq, &ten);
    // Inversion: waiting times ceil(log u / log(1 - q)) until they pass n.
    let neg_q = e.unary("stablehlo.negate", &q);
    let log_fail = e.unary("stablehlo.log_plus_one", &neg_q);
    // BTRS's constants: spq = sqrt(n q (1 - q)), b = 1.15 + 2.53 spq,
    // a = -0.0873 + 0.0248 b + 0.01 q, c = n q + 1/2, v_r = 0.92 - 4.2 / b,
    // r = q / (1 - q), alpha = (2.83 + 5.1 / b) spq, m = floor((n + 1) q).
    let one_minus_q = e.sub(&one, &q);
    let variance = e.mul(&nq, &one_minus_q);
    let spq = e.unary("stablehlo.sqrt", &variance);
    let b_slope = e.binary_const("stablehlo.multiply", &spq, 2.53);
    let b = e.binary_const("stablehlo.add", &b_slope, 1.15);
    let a_b = e.binary_const("stablehlo.multiply", &b, 0.0248);
    let a_q = e.binary_const("stablehlo.multiply", &q, 0.01);
    let a = e.add(&a_b, &a_q);
    let a = e.binary_const("stablehlo.add", &a, -0.0873);
    let c = e.binary_const("stablehlo.add", &nq, 0.5);
    let vr_numerator = e.splat(4.2, &n);
    let vr_term = e.div(&vr_numerator, &b);
    let vr_base = e.splat(0.92, &n);
    let vr = e.sub(&vr_base, &vr_term);
    let r = e.div(&q, &one_minus_q);
    let alpha_numerator = e.splat(5.1, &n);
    let alpha_term = e.div(&alpha_numerator, &b);
    let alpha_factor = e.binary_const("stablehlo.add", &alpha_term, 2.83);
    let alpha = e.mul(&alpha_factor, &spq);
    let log_alpha = e.unary("stablehlo.log", &alpha);
    let n1 = e.binary_const("stablehlo.add", &n, 1.0);
    let n1q = e.mul(&n1, &q);
    let m = e.unary("stablehlo.floor", &n1q);
    // The k-free part of the bound: (m + 1/2) ln((m + 1) / (r (n - m + 1)))
    // + tail(m) + tail(n - m).
    let m1 = e.binary_const("stablehlo.add", &m, 1.0);
    let n_less_m = e.sub(&n, &m);
    let n_less_m1 = e.binary_const("stablehlo.add", &n_less_m, 1.0);
    let m_ratio_den = e.mul(&r, &n_less_m1);
    let m_ratio = e.div(&m1, &m_ratio_den);
    let m_log = e.unary("stablehlo.log", &m_ratio);
    let m_half = e.binary_const("stablehlo.add", &m, 0.5);
    let fixed = e.mul(&m_half, &m_log);
    let tail_m = stirling_tail(e, &m);
    let tail_rest = stirling_tail(e, &n_less_m);
    let fixed = e.add(&fixed, &tail_m);
    let fixed = e.add(&fixed, &tail_rest);
    let state = initial_state(e, key0, key1);
    let (_, sample) = rejection_loop(
        e,
        &state,
        &result,
        &done,
        &[&zero, &zero],
        |e, state, carried| {
            let (waited, successes) = (&carried[0], &carried[1]);
            let (state, u) = draw(e, state, &shape, float);
            let (state, v) = draw(e, &state, &shape, float);
            // Inversion.
            let log_u = e.unary("stablehlo.log", &u);
            let wait = e.div(&log_u, &log_fail);
            let wait = e.unary("stablehlo.ceil", &wait);
            let waited = e.add(waited, &wait);
            let passed = e.compare(Cmp::Gt, &waited, &n);
            let counted = e.add(successes, &one);
            let next_successes = e.select(&passed, successes, &counted);
            // BTRS.
            let p = transformed_proposal(e, &u, &v, [&a, &b, &c, &vr, &log_alpha]);
            let (k, quick) = (&p.k, &p.quick);
            let k_negative = e.compare(Cmp::Lt, k, &zero);
            let k_over = e.compare(Cmp::Gt, k, &n);
            let outside = e.binary("stablehlo.or", &k_negative, &k_over);
            // (n + 1) ln((n - m + 1) / (n - k + 1)) + (k + 1/2) ln(r (n - k + 1) / (k + 1))
            // - tail(k) - tail(n - k).
            let n_less_k = e.sub(&n, k);
            let n_less_k1 = e.binary_const("stablehlo.add", &n_less_k, 1.0);
            let n_ratio = e.div(&n_less_m1, &n_less_k1);
            let n_log = e.unary("stablehlo.log", &n_ratio);
            let n_term = e.mul(&n1, &n_log);
            let k1 = e.binary_const("stablehlo.add", k, 1.0);
            let k_ratio = e.mul(&r, &n_less_k1);
            let k_ratio = e.div(&k_ratio, &k1);
            let k_log = e.unary("stablehlo.log", &k_ratio);
            let k_half = e.binary_const("stablehlo.add", k, 0.5);
            let k_term = e.mul(&k_half, &k_log);
            let tail_k = stirling_tail(e, k);
            let tail_n_k = stirling_tail(e, &n_less_k);
            let bound = e.add(&fixed, &n_term);
            let bound = e.add(&bound, &k_term);
            let bound = e.sub(&bound, &tail_k);
            let bound = e.sub(&bound, &tail_n_k);
            let slow = e.compare(Cmp::Le, &p.log_ratio, &bound);
            let inside = e.unary("stablehlo.not", &outside);
            let either = e.binary("stablehlo.or", quick, &slow);
            let btrs_accept = e.binary("stablehlo.and", &inside, &either);
            let accept = e.select(&btrs, &btrs_accept, &passed);
            let candidate = e.select(&btrs, k, successes);
            (state, candidate, accept, vec![waited, next_successes])
        },
    );
    // Failures counted when p > 1/2: successes are the rest. Elements settled
    // before the loop keep their value.
    let failures_flipped = e.sub(&n, &sample);
    let looped = e.unary("stablehlo.not", &done);
    let flipped = e.binary("stablehlo.and", &flip, &looped);
    let sample = e.select(&flipped, &failures_flipped, &sample);
    e.convert(&sample, out_dtype)
}

#[cfg(test)]
mod tests {
    use super::below_one;
    use crate::dtype::DType;

    #[test]
    fn the_largest_16_bit_values_below_one() {
        assert_eq!(below_one(DType::F16), 1.0 - 2f64.powi(-11));
        assert_eq!(below_one(DType::BF16), 1.0 - 2f64.powi(-8));
    }
}
