//! Pointwise ops composed of several elementwise ones (`addcmul`, `addcdiv`,
//! `lerp`, `hypot`, `xlogy`, `fmod`) against host references, with broadcasting and promotion, in
//! every mode.

mod common;

use common::*;
use eagertpu::{DType, Tensor};

/// `f(a, b, c)` elementwise over the broadcast shape, rounded to `dtype`.
fn host3(a: &Host, b: &Host, c: &Host, dtype: DType, f: impl Fn(f64, f64, f64) -> f64) -> Host {
    let shape = broadcast(&broadcast(&a.shape, &b.shape), &c.shape);
    let data = (0..numel(&shape))
        .map(|i| {
            let idx = unravel(i, &shape);
            let at = |h: &Host| h.data[broadcast_source(&idx, &h.shape)];
            f(at(a), at(b), at(c))
        })
        .collect();
    Host::new(dtype, &shape, data)
}

/// PyTorch's lerp: the far form for weights of magnitude 0.5 and more.
fn lerp_ref(s: f64, e: f64, w: f64) -> f64 {
    if w.abs() < 0.5 {
        s + w * (e - s)
    } else {
        e - (e - s) * (1.0 - w)
    }
}

all_modes! {
fn addcmul_and_addcdiv_match_the_host_with_broadcasting() {
    for dtype in [DType::F32, DType::BF16, DType::F64] {
        let s = Host::random(dtype, &[3, 4], 1);
        let t1 = Host::random(dtype, &[4], 2);
        let t2 = Host::random_in(dtype, &[3, 1], 3, 0.5, 2.0);
        let got = s.tensor().addcmul(&t1.tensor(), &t2.tensor(), -0.5).unwrap();
        let want = host3(&s, &t1, &t2, dtype, |a, b, c| a + -0.5 * b * c);
        assert_close_tol(&format!("addcmul {dtype}"), &got, &want, tolerance(dtype));
        let got = s.tensor().addcdiv(&t1.tensor(), &t2.tensor(), 0.25).unwrap();
        let want = host3(&s, &t1, &t2, dtype, |a, b, c| a + 0.25 * b / c);
        assert_close_tol(&format!("addcdiv {dtype}"), &got, &want, tolerance(dtype));
    }
    // Integers: addcmul is exact; a float tensor promotes the result.
    let s = Host::random(DType::I32, &[5], 4);
    let t1 = Host::random(DType::I32, &[5], 5);
    let t2 = Host::random(DType::I64, &[5], 6);
    let got = s.tensor().addcmul(&t1.tensor(), &t2.tensor(), 3).unwrap();
    let want = host3(&s, &t1, &t2, DType::I64, |a, b, c| a + 3.0 * b * c);
    assert_close("addcmul int", &got, &want);
    let f = Host::random(DType::F32, &[5], 7);
    let got = s.tensor().addcmul(&t1.tensor(), &f.tensor(), 2).unwrap();
    let want = host3(&s, &t1, &f, DType::F32, |a, b, c| a + 2.0 * b * c);
    assert_close("addcmul promotes", &got, &want);
}
}

all_modes! {
fn lerp_matches_pytorch_on_both_sides_of_one_half() {
    let dtype = DType::F32;
    let s = Host::random(dtype, &[2, 5], 8);
    let e = Host::random(dtype, &[5], 9);
    for w in [0.0, 0.1, 0.49, 0.5, 0.9, 1.0, -0.7, 1.5] {
        let got = s.tensor().lerp(&e.tensor(), w).unwrap();
        let want = host3(&s, &e, &s, dtype, |a, b, _| lerp_ref(a, b, w));
        assert_close(&format!("lerp weight {w}"), &got, &want);
    }
    // Weight 1 gives `end` exactly.
    let got = s.tensor().lerp(&e.tensor(), 1.0).unwrap();
    let want = host3(&s, &e, &s, dtype, |_, b, _| b);
    assert_eq!(Host::of(&got).data, want.data);
    let w = Host::new(dtype, &[5], vec![0.0, 0.3, 0.5, 1.0, -2.0]);
    let got = s.tensor().lerp(&e.tensor(), &w.tensor()).unwrap();
    let want = host3(&s, &e, &w, dtype, lerp_ref);
    assert_close("lerp tensor weight", &got, &want);
}
}

#[test]
fn integer_addcdiv_and_lerp_are_errors_naming_the_op() {
    let i = Tensor::from_slice(&[1i64, 2, 3], &[3]).unwrap();
    let f = Tensor::from_slice(&[1f32, 2.0, 3.0], &[3]).unwrap();
    assert_err(
        f.addcdiv(&i, &i, 1.0),
        "addcdiv",
        &["int64[3]", "floating point"],
    );
    assert_err(i.lerp(&i, 0.5), "lerp", &["int64[3]", "floating point"]);
    assert_err(
        f.addcmul(&f, &Tensor::zeros(&[2], DType::F32).unwrap(), 1.0),
        "mul",
        &["[3]", "[2]"],
    );
}

/// C's fmod: the remainder of truncated division.
fn fmod_ref(a: f64, b: f64) -> f64 {
    a % b
}

fn xlogy_ref(x: f64, y: f64) -> f64 {
    if y.is_nan() {
        y
    } else if x == 0.0 {
        0.0
    } else {
        x * y.ln()
    }
}

all_modes! {
fn hypot_xlogy_and_fmod_match_the_host_with_broadcasting() {
    let a = Host::random_in(DType::F32, &[3, 4], 1, -5.0, 5.0);
    let b = Host::random_in(DType::F32, &[4], 2, 0.5, 3.0);
    let ones = Host::new(DType::F32, &[1], vec![1.0]);
    let host2 = |f: fn(f64, f64) -> f64| host3(&a, &b, &ones, DType::F32, move |x, y, _| f(x, y));
    assert_close("hypot", &a.tensor().hypot(&b.tensor()).unwrap(), &host2(f64::hypot));
    assert_close("fmod", &a.tensor().fmod(&b.tensor()).unwrap(), &host2(fmod_ref));
    // xlogy: zeros and a NaN among the x, a NaN among the y.
    let x = Host::new(DType::F32, &[5], vec![0.0, 2.0, -1.5, 0.0, 3.0]);
    let y = Host::new(DType::F32, &[5], vec![4.0, 0.5, 2.0, f64::NAN, 0.0]);
    let want = Host::new(DType::F32, &[5], (0..5).map(|i| xlogy_ref(x.data[i], y.data[i])).collect());
    assert_close("xlogy", &x.tensor().xlogy(&y.tensor()).unwrap(), &want);
    let want = Host::new(DType::F32, &[5], x.data.iter().map(|v| xlogy_ref(*v, 2.5)).collect());
    assert_close("xlogy by a number", &x.tensor().xlogy(2.5).unwrap(), &want);
    // Integers: xlogy in float32; fmod exact beyond 2^53, with the dividend's sign.
    let ints = Tensor::from_slice(&[0i64, 1, 8], &[3]).unwrap();
    let want = Host::new(DType::F32, &[3], vec![0.0, 3f64.ln(), 8.0 * 3f64.ln()]);
    assert_close("xlogy of int64", &ints.xlogy(3i64).unwrap(), &want);
    let big = (1i64 << 60) + 7;
    let dividends = Tensor::from_slice(&[big, -big, 7, -7, 6], &[5]).unwrap();
    let got = dividends.fmod(3i64).unwrap().to_vec::<i64>().unwrap();
    assert_eq!(got, [big % 3, -big % 3, 1, -1, 0]);
    let divisors = Tensor::from_slice(&[-3i64, 3, -3, 3, -3], &[5]).unwrap();
    let got = dividends.fmod(&divisors).unwrap().to_vec::<i64>().unwrap();
    assert_eq!(got, [big % -3, -big % 3, 7 % -3, -7 % 3, 0]);
}
}

#[test]
fn integer_hypot_is_an_error_naming_the_op() {
    let ints = Tensor::from_slice(&[3i32, 4], &[2]).unwrap();
    assert_err(ints.hypot(&ints), "hypot", &["int32", "floating-point"]);
}

all_modes! {
fn floor_divide_and_div_trunc_are_exact_for_int64_and_round_floats_as_pytorch() {
    // Integers: the quotient of int64s beyond 2^53 is exact (as integers,
    // never through a float).
    let big = (1i64 << 60) + 7;
    let a = [big, -big, 7, -7, 6, -6, -(1i64 << 53) - 1, 0];
    let b = [3i64, 3, -2, 2, -3, -3, 3, -5];
    let (at, bt) = (Tensor::from_slice(&a, &[8]).unwrap(), Tensor::from_slice(&b, &[8]).unwrap());
    let floor: Vec<i64> = a.iter().zip(&b).map(|(a, b)| a.div_euclid(*b) - i64::from(b < &0 && a.rem_euclid(*b) != 0)).collect();
    let trunc: Vec<i64> = a.iter().zip(&b).map(|(a, b)| a / b).collect();
    assert_eq!(at.floor_divide(&bt).unwrap().to_vec::<i64>().unwrap(), floor);
    assert_eq!(at.div_trunc(&bt).unwrap().to_vec::<i64>().unwrap(), trunc);
    let by_three: Vec<i64> = a.iter().map(|a| a.div_euclid(3)).collect();
    assert_eq!(at.floor_divide(3i64).unwrap().to_vec::<i64>().unwrap(), by_three);
    let by_minus_two: Vec<i64> = a.iter().map(|a| a / -2).collect();
    assert_eq!(at.div_trunc(-2i64).unwrap().to_vec::<i64>().unwrap(), by_minus_two);
    // Floats: floor and trunc of the quotient; a zero quotient keeps the
    // sign of a / b; division by zero is a / b.
    let x = [-7.5f32, 7.5, 0.0, -0.0, 5.0, -1e-30, 1.0, 7.0];
    let y = [2.0f32, 2.0, -3.0, 3.0, 0.0, 5.0, -0.0, -0.5];
    let (xt, yt) = (Tensor::from_slice(&x, &[8]).unwrap(), Tensor::from_slice(&y, &[8]).unwrap());
    let want_floor = [-4.0f32, 3.0, -0.0, -0.0, f32::INFINITY, -1.0, f32::NEG_INFINITY, -14.0];
    let want_trunc = [-3.0f32, 3.0, -0.0, -0.0, f32::INFINITY, -0.0, f32::NEG_INFINITY, -14.0];
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&xt.floor_divide(&yt).unwrap().to_vec::<f32>().unwrap()), bits(&want_floor));
    assert_eq!(bits(&xt.div_trunc(&yt).unwrap().to_vec::<f32>().unwrap()), bits(&want_trunc));
}
}

all_modes! {
fn isinf_isposinf_and_isneginf_find_infinities() {
    let special = vec![1.5, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 0.0, -3.0];
    for dtype in [DType::F32, DType::BF16, DType::F64] {
        let x = Host::new(dtype, &[2, 3], special.clone()).tensor();
        let mask = |f: fn(f64) -> bool| Host::new(DType::Bool, &[2, 3], special.iter().map(|v| f(*v) as i32 as f64).collect());
        assert_eq!(Host::of(&x.isinf().unwrap()), mask(|v| v.is_infinite()), "isinf {dtype}");
        assert_eq!(Host::of(&x.isposinf().unwrap()), mask(|v| v == f64::INFINITY), "isposinf {dtype}");
        assert_eq!(Host::of(&x.isneginf().unwrap()), mask(|v| v == f64::NEG_INFINITY), "isneginf {dtype}");
    }
    // Integers are never infinite.
    let ints = Tensor::from_slice(&[i64::MAX, i64::MIN, 0], &[3]).unwrap();
    let none = Host::new(DType::Bool, &[3], vec![0.0; 3]);
    assert_eq!(Host::of(&ints.isinf().unwrap()), none);
    assert_eq!(Host::of(&ints.isneginf().unwrap()), none);
}
}

/// `f(a, b)` elementwise over the broadcast shape, rounded to `dtype`.
fn host2(a: &Host, b: &Host, dtype: DType, f: impl Fn(f64, f64) -> f64) -> Host {
    host3(a, b, &Host::new(dtype, &[], vec![0.0]), dtype, |x, y, _| {
        f(x, y)
    })
}

all_modes! {
fn add_and_sub_with_alpha_scale_the_other_operand_without_changing_the_dtype() {
    for dtype in [DType::F32, DType::BF16, DType::F64] {
        let a = Host::random(dtype, &[3, 4], 1);
        let b = Host::random(dtype, &[4], 2);
        let got = a.tensor().add_scaled(&b.tensor(), -0.25).unwrap();
        assert_close_tol(&format!("add alpha {dtype}"), &got, &host2(&a, &b, dtype, |x, y| x - 0.25 * y), tolerance(dtype));
        let got = a.tensor().sub_scaled(&b.tensor(), 3).unwrap();
        assert_close_tol(&format!("sub alpha {dtype}"), &got, &host2(&a, &b, dtype, |x, y| x - 3.0 * y), tolerance(dtype));
        // A scalar other: alpha times it, on the host.
        let got = a.tensor().add_scaled(2.0, 0.5).unwrap();
        let want = host2(&a, &Host::new(dtype, &[], vec![0.0]), dtype, |x, _| x + 1.0);
        assert_close_tol(&format!("add scalar alpha {dtype}"), &got, &want, tolerance(dtype));
    }
    // Integers stay exact beyond 2^53; an int64 other scaled for a float64
    // result is scaled in float64.
    let big = Tensor::from_slice(&[(1i64 << 60) + 3, -7], &[2]).unwrap();
    let one = Tensor::from_slice(&[1i64, 2], &[2]).unwrap();
    let got = big.add_scaled(&one, 5).unwrap().to_vec::<i64>().unwrap();
    assert_eq!(got, vec![(1i64 << 60) + 8, 3]);
    let got = big.sub_scaled(&one, -2).unwrap().to_vec::<i64>().unwrap();
    assert_eq!(got, vec![(1i64 << 60) + 5, -3]);
    let f = Tensor::from_slice(&[0.5f64, 1.0], &[2]).unwrap();
    let got = f.add_scaled(&one, 2.5).unwrap();
    assert_eq!(got.dtype(), DType::F64);
    assert_eq!(got.to_vec::<f64>().unwrap(), vec![3.0, 6.0]);
    // Alpha 1 is the plain op; bools add as a logical or.
    let t = Tensor::from_slice(&[true, false, false], &[3]).unwrap();
    let u = Tensor::from_slice(&[false, false, true], &[3]).unwrap();
    let got = t.add_scaled(&u, true).unwrap().to_vec::<bool>().unwrap();
    assert_eq!(got, vec![true, false, true]);
}
}

all_modes! {
fn an_alpha_of_another_kind_than_the_result_is_refused_naming_it() {
    let ints = Tensor::from_slice(&[1i64, 2], &[2]).unwrap();
    assert_err(ints.add_scaled(&ints, 0.5), "add", &["alpha 0.5", "int64[2]", "floating-point result"]);
    let floats = Tensor::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    assert_err(floats.sub_scaled(&floats, true), "sub", &["alpha true", "float32[2]", "bool"]);
}
}

fn logaddexp_ref(x: f64, y: f64) -> f64 {
    if x == y && x.is_infinite() {
        x
    } else {
        x.max(y) + (-(x - y).abs()).exp().ln_1p()
    }
}

all_modes! {
fn logaddexp_matches_the_host_without_overflow() {
    // Large values (exp overflows float32), equal infinities, a NaN, broadcasting.
    let x = Host::new(DType::F32, &[2, 4], vec![1000.0, -1000.0, 0.5, f64::INFINITY, f64::NEG_INFINITY, 3.0, f64::NAN, -2.0]);
    let y = Host::new(DType::F32, &[4], vec![999.0, -1001.0, -0.25, f64::INFINITY]);
    let want: Vec<f64> = (0..8).map(|i| logaddexp_ref(x.data[i], y.data[i % 4])).collect();
    let got = x.tensor().logaddexp(&y.tensor()).unwrap();
    assert_close("logaddexp", &got, &Host::new(DType::F32, &[2, 4], want.clone()));
    // Base 2: log2(2^x + 2^y) = logaddexp(x ln 2, y ln 2) / ln 2.
    let ln2 = std::f64::consts::LN_2;
    let want2: Vec<f64> = (0..8).map(|i| logaddexp_ref(x.data[i] * ln2, y.data[i % 4] * ln2) / ln2).collect();
    let got = x.tensor().logaddexp2(&y.tensor()).unwrap();
    assert_close("logaddexp2", &got, &Host::new(DType::F32, &[2, 4], want2));
    let got = x.tensor().logaddexp(0.0).unwrap();
    let want: Vec<f64> = x.data.iter().map(|v| logaddexp_ref(*v, 0.0)).collect();
    assert_close("logaddexp with a number", &got, &Host::new(DType::F32, &[2, 4], want));
    let ints = Tensor::from_slice(&[1i32, 2], &[2]).unwrap();
    assert_err(ints.logaddexp(&ints), "logaddexp", &["int32", "floating-point"]);
}
}

all_modes! {
fn isin_compares_every_element_exactly() {
    // int64 beyond 2^53 stays exact: big and big + 1 are different tokens.
    let big = (1i64 << 60) + 1;
    let elements = Tensor::from_slice(&[big, big + 1, 5, -3, 7, 0], &[2, 3]).unwrap();
    let test = Tensor::from_slice(&[big, 7, 0, 42], &[2, 2]).unwrap();
    let got = elements.isin(&test, false).unwrap();
    assert_eq!(got.shape(), [2, 3]);
    assert_eq!(got.to_vec::<bool>().unwrap(), [true, false, false, false, true, true]);
    let got = elements.isin(&test, true).unwrap().to_vec::<bool>().unwrap();
    assert_eq!(got, [false, true, true, true, false, false]);
    let got = elements.isin(5i64, false).unwrap().to_vec::<bool>().unwrap();
    assert_eq!(got, [false, false, true, false, false, false]);
    // Nothing is in an empty set; NaN is in none.
    let empty = Tensor::from_slice::<i64>(&[], &[0]).unwrap();
    assert_eq!(elements.isin(&empty, false).unwrap().to_vec::<bool>().unwrap(), [false; 6]);
    let floats = Tensor::from_slice(&[f32::NAN, 1.5], &[2]).unwrap();
    assert_eq!(floats.isin(&floats, false).unwrap().to_vec::<bool>().unwrap(), [false, true]);
}
}

all_modes! {
fn xlog1py_copysign_and_heaviside_match_the_host() {
    // xlog1py: 0 where x is 0 unless y is NaN.
    let x = Host::new(DType::F32, &[5], vec![0.0, 2.0, 0.0, -1.5, 3.0]);
    let y = Host::new(DType::F32, &[5], vec![0.5, 0.25, f64::NAN, 1.0, -0.5]);
    let xlog1py = |a: f64, b: f64| if b.is_nan() { b } else if a == 0.0 { 0.0 } else { a * b.ln_1p() };
    let want = Host::new(DType::F32, &[5], (0..5).map(|i| xlog1py(x.data[i], y.data[i])).collect());
    assert_close("xlog1py", &x.tensor().xlog1py(&y.tensor()).unwrap(), &want);
    // copysign: the sign bit of the second operand (-0 is negative).
    let m = Host::new(DType::F32, &[4], vec![2.0, -3.0, 0.0, 1.0]);
    let s = Host::new(DType::F32, &[4], vec![-1.0, 1.0, -0.0, 0.0]);
    let got = m.tensor().copysign(&s.tensor()).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(got, [-2.0, 3.0, 0.0, 1.0]);
    assert!(got[2].is_sign_negative() && got[3].is_sign_positive(), "{got:?}");
    let got = m.tensor().copysign(-0.0).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(got, [-2.0, -3.0, -0.0, -1.0]);
    // heaviside: values at zero; a dtype mismatch is an error naming it.
    let h = Host::new(DType::F32, &[4], vec![-1.0, 0.0, 2.0, f64::NAN]).tensor();
    let v = Host::new(DType::F32, &[1], vec![0.5]).tensor();
    assert_eq!(h.heaviside(&v).unwrap().to_vec::<f32>().unwrap(), [0.0, 0.5, 1.0, 0.0]);
    let e = err_text(h.heaviside(&Host::new(DType::I64, &[1], vec![1.0]).tensor()));
    assert!(e.contains("heaviside") && e.contains("different dtypes"), "{e}");
}
}
