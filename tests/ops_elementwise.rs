//! Unary elementwise ops against host references: every op, every dtype it
//! supports; casts, edge values and the special functions (binary ops are in
//! ops_binary.rs).

mod common;

use common::*;
use eagertpu::{DType, Tensor};

fn sign(x: f64) -> f64 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        x
    }
}

fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2))
}

fn gelu_tanh(x: f64) -> f64 {
    let c = (2.0 / std::f64::consts::PI).sqrt();
    0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh())
}

type UnaryRef = fn(f64) -> f64;

/// (name, input range, reference, float function?)
fn unary_cases() -> Vec<(&'static str, (f64, f64), UnaryRef, bool)> {
    vec![
        ("neg", (-3.0, 3.0), |x| -x, false),
        ("abs", (-3.0, 3.0), f64::abs, false),
        ("exp", (-3.0, 3.0), f64::exp, true),
        ("log", (0.05, 3.0), f64::ln, true),
        ("log1p", (-0.9, 3.0), f64::ln_1p, true),
        ("sqrt", (0.0, 3.0), f64::sqrt, true),
        ("rsqrt", (0.05, 3.0), |x| 1.0 / x.sqrt(), true),
        ("tanh", (-3.0, 3.0), f64::tanh, true),
        ("sigmoid", (-3.0, 3.0), |x| 1.0 / (1.0 + (-x).exp()), true),
        ("relu", (-3.0, 3.0), |x| x.max(0.0), false),
        ("gelu", (-3.0, 3.0), gelu, true),
        ("gelu_tanh", (-3.0, 3.0), gelu_tanh, true),
        ("sin", (-3.0, 3.0), f64::sin, true),
        ("cos", (-3.0, 3.0), f64::cos, true),
        ("floor", (-3.0, 3.0), f64::floor, false),
        ("ceil", (-3.0, 3.0), f64::ceil, false),
        ("round", (-3.0, 3.0), f64::round_ties_even, false),
        ("sign", (-3.0, 3.0), sign, false),
        ("erf", (-3.0, 3.0), erf, true),
    ]
}

fn apply_unary(name: &str, t: &Tensor) -> eagertpu::Result<Tensor> {
    match name {
        "neg" => t.neg(),
        "abs" => t.abs(),
        "exp" => t.exp(),
        "log" => t.log(),
        "log1p" => t.log1p(),
        "sqrt" => t.sqrt(),
        "rsqrt" => t.rsqrt(),
        "tanh" => t.tanh(),
        "sigmoid" => t.sigmoid(),
        "relu" => t.relu(),
        "gelu" => t.gelu(),
        "gelu_tanh" => t.gelu_tanh(),
        "sin" => t.sin(),
        "cos" => t.cos(),
        "floor" => t.floor(),
        "ceil" => t.ceil(),
        "round" => t.round(),
        "sign" => t.sign(),
        "erf" => t.erf(),
        "logical_not" => t.logical_not(),
        "isnan" => t.isnan(),
        "bitwise_not" => t.bitwise_not(),
        other => panic!("unknown op {other}"),
    }
}

all_modes! {
fn unary_ops_match_the_host_reference_for_every_numeric_dtype() {
    for (i, (name, (lo, hi), f, float_fn)) in unary_cases().into_iter().enumerate() {
        for dtype in numeric() {
            let (lo, hi) = if dtype == DType::U8 {
                (lo.max(0.0), hi.max(1.0))
            } else {
                (lo, hi)
            };
            // Ints get integer inputs; float functions of ints need the same domain.
            let (lo, hi) = if dtype.is_float() {
                (lo, hi)
            } else {
                (lo.ceil(), hi.floor())
            };
            let x = Host::random_in(dtype, &[3, 5], 100 + i as u64, lo, hi);
            let out = if float_fn && !dtype.is_float() {
                DType::F32
            } else {
                dtype
            };
            let want = x.map(out, f);
            let got =
                apply_unary(name, &x.tensor()).unwrap_or_else(|e| panic!("{name} {dtype}: {e}"));
            let tol = tolerance(out);
            // Functions made of several rounded steps get a little more room in 16 bits.
            let tol = if matches!(name, "gelu" | "gelu_tanh")
                && matches!(out, DType::F16 | DType::BF16)
            {
                (tol.0 * 2.0, tol.1 * 2.0)
            } else {
                tol
            };
            assert_close_tol(&format!("{name}({dtype})"), &got, &want, tol);
        }
    }
}
}

all_modes! {
fn unary_ops_on_bool_follow_pytorch() {
    let x = Host::random(DType::Bool, &[7], 1);
    // Float functions compute bools in float32.
    assert_close(
        "exp(bool)",
        &x.tensor().exp().unwrap(),
        &x.map(DType::F32, f64::exp),
    );
    assert_close("sign(bool)", &x.tensor().sign().unwrap(), &x);
    for name in ["neg", "abs", "relu", "floor"] {
        let e = err_text(apply_unary(name, &x.tensor()));
        assert!(e.contains(name) && e.contains("bool"), "{name}: {e}");
    }
}
}

all_modes! {
fn logical_not_and_isnan_give_bools() {
    for dtype in ALL {
        let x = Host::random(dtype, &[4, 3], 7);
        let want = x.map(DType::Bool, |v| (v == 0.0) as u8 as f64);
        assert_close(
            &format!("logical_not({dtype})"),
            &x.tensor().logical_not().unwrap(),
            &want,
        );
    }
    for dtype in FLOATS {
        let mut x = Host::random(dtype, &[10], 8);
        x.data[2] = f64::NAN;
        x.data[7] = f64::NAN;
        x.data[5] = f64::INFINITY;
        let want = x.map(DType::Bool, |v| v.is_nan() as u8 as f64);
        assert_close(
            &format!("isnan({dtype})"),
            &x.tensor().isnan().unwrap(),
            &want,
        );
    }
    let ints = Host::random(DType::I32, &[5], 9);
    assert_close(
        "isnan(int32)",
        &ints.tensor().isnan().unwrap(),
        &ints.map(DType::Bool, |_| 0.0),
    );
}
}

all_modes! {
fn cast_between_all_dtypes() {
    for from in ALL {
        for to in ALL {
            // Negative values have no uint8 image in PyTorch (it is undefined).
            let x = if to == DType::U8 && from != DType::Bool {
                Host::random_in(from, &[3, 4], 110, 0.0, 3.0)
            } else {
                Host::random(from, &[3, 4], 110)
            };
            let want = x.map(to, |v| {
                if to.is_float() || to == DType::Bool {
                    v
                } else {
                    v.trunc()
                }
            });
            let got = x.tensor().to_dtype(to).unwrap();
            assert_close(&format!("{from} -> {to}"), &got, &want);
        }
    }
}
}

all_modes! {
fn edge_values_follow_pytorch() {
    // round: halves go to the even neighbour.
    for dtype in FLOATS {
        let x = Host::new(dtype, &[6], vec![0.5, 1.5, 2.5, -0.5, -2.5, 2.25]);
        let want = Host::new(dtype, &[6], vec![0.0, 2.0, 2.0, -0.0, -2.0, 2.0]);
        assert_close(
            &format!("round({dtype})"),
            &x.tensor().round().unwrap(),
            &want,
        );
    }
    // remainder takes the divisor's sign; fmod-style results are fixed up.
    let a = Host::new(DType::F32, &[4], vec![-3.5, 3.5, -3.5, 4.0]);
    let b = Host::new(DType::F32, &[4], vec![2.0, -2.0, -2.0, 2.0]);
    let want = Host::new(DType::F32, &[4], vec![0.5, -0.5, -1.5, 0.0]);
    assert_close(
        "remainder",
        &a.tensor().remainder(&b.tensor()).unwrap(),
        &want,
    );
    let a = Host::new(DType::I32, &[4], vec![-7.0, 7.0, -7.0, 6.0]);
    let b = Host::new(DType::I32, &[4], vec![3.0, -3.0, -3.0, 3.0]);
    let want = Host::new(DType::I32, &[4], vec![2.0, -2.0, -1.0, 0.0]);
    assert_close(
        "remainder(int32)",
        &a.tensor().remainder(&b.tensor()).unwrap(),
        &want,
    );
    // sign(0) is 0, relu(-0.0) is 0, maximum propagates NaN.
    let z = Host::new(DType::F32, &[3], vec![0.0, -2.0, 3.0]);
    assert_close(
        "sign",
        &z.tensor().sign().unwrap(),
        &Host::new(DType::F32, &[3], vec![0.0, -1.0, 1.0]),
    );
    let n = Host::new(DType::F32, &[2], vec![f64::NAN, 1.0]);
    let m = Host::new(DType::F32, &[2], vec![0.0, f64::NAN]);
    assert_close(
        "maximum(nan)",
        &n.tensor().maximum(&m.tensor()).unwrap(),
        &Host::new(DType::F32, &[2], vec![f64::NAN, f64::NAN]),
    );
    // Integer division is true division.
    let i = Host::new(DType::I64, &[2], vec![7.0, -7.0]);
    assert_close(
        "7 / 2",
        &i.tensor().div(2).unwrap(),
        &Host::new(DType::F32, &[2], vec![3.5, -3.5]),
    );
}
}

all_modes! {
fn bitwise_not_flips_every_bit_of_integers_and_negates_bools() {
    for dtype in [DType::I8, DType::I16, DType::I32, DType::I64] {
        // ~x = -x - 1 in two's complement, exact at the ends of the range.
        let x = Host::new(dtype, &[4], vec![0.0, -1.0, 5.0, -128.0]);
        let got = x.tensor().bitwise_not().unwrap();
        assert_eq!(Host::of(&got), x.map(dtype, |v| -v - 1.0), "{dtype}");
    }
    let big = Tensor::from_slice(&[i64::MAX, i64::MIN, 1 << 60], &[3]).unwrap();
    assert_eq!(big.bitwise_not().unwrap().to_vec::<i64>().unwrap(), [i64::MIN, i64::MAX, !(1i64 << 60)]);
    let bytes = Host::new(DType::U8, &[3], vec![0.0, 1.0, 200.0]);
    assert_eq!(Host::of(&bytes.tensor().bitwise_not().unwrap()), bytes.map(DType::U8, |v| 255.0 - v));
    let bools = Host::new(DType::Bool, &[2], vec![0.0, 1.0]);
    assert_eq!(Host::of(&bools.tensor().bitwise_not().unwrap()), Host::new(DType::Bool, &[2], vec![1.0, 0.0]));
    let e = err_text(Host::random(DType::F32, &[2], 1).tensor().bitwise_not());
    assert!(e.contains("bitwise_not") && e.contains("float32") && e.contains("integer"), "{e}");
}
}

/// `ln |gamma(x)|`: Lanczos (g = 7, nine terms), reflected below 1/2.
fn lgamma(x: f64) -> f64 {
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    let pi = std::f64::consts::PI;
    if x < 0.5 {
        return (pi / (pi * x).sin().abs()).ln() - lgamma(1.0 - x);
    }
    let x = x - 1.0;
    let a = C[1..]
        .iter()
        .enumerate()
        .fold(C[0], |a, (i, c)| a + c / (x + i as f64 + 1.0));
    let t = x + 7.5;
    0.5 * (2.0 * pi).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The digamma function for x > 0: the recurrence up to 10, then the
/// asymptotic series.
fn digamma(mut x: f64) -> f64 {
    let mut shift = 0.0;
    while x < 10.0 {
        shift -= 1.0 / x;
        x += 1.0;
    }
    let x2 = 1.0 / (x * x);
    let series = x2
        * (1.0 / 12.0 - x2 * (1.0 / 120.0 - x2 * (1.0 / 252.0 - x2 * (1.0 / 240.0 - x2 / 132.0))));
    shift + x.ln() - 0.5 / x - series
}

all_modes! {
fn special_functions_match_the_host_reference() {
    let cases: [(&str, (f64, f64), UnaryRef); 6] = [
        ("asinh", (-3.0, 3.0), f64::asinh),
        ("acosh", (1.0, 4.0), f64::acosh),
        ("atanh", (-0.9, 0.9), f64::atanh),
        ("erfc", (-3.0, 3.0), |x| 1.0 - erf(x)),
        ("lgamma", (-3.5, 6.0), lgamma),
        ("digamma", (0.2, 6.0), digamma),
    ];
    for (i, (name, (lo, hi), f)) in cases.into_iter().enumerate() {
        for dtype in [DType::F32, DType::F64, DType::BF16] {
            let x = Host::random_in(dtype, &[4, 6], 300 + i as u64, lo, hi);
            let t = x.tensor();
            let got = match name {
                "asinh" => t.asinh(),
                "acosh" => t.acosh(),
                "atanh" => t.atanh(),
                "erfc" => t.erfc(),
                "lgamma" => t.lgamma(),
                _ => t.digamma(),
            }
            .unwrap_or_else(|e| panic!("{name} {dtype}: {e}"));
            // XLA's series are good to ~1e-13 in f64, not to the last bit.
            let tol = if dtype == DType::F64 { (1e-10, 1e-12) } else { tolerance(dtype) };
            assert_close_tol(&format!("{name}({dtype})"), &got, &x.map(dtype, f), tol);
        }
    }
    // digamma's poles as PyTorch has them: -inf at +0, +inf at -0, NaN at
    // the negative integers; lgamma is +inf at all of them.
    let poles = Host::new(DType::F32, &[4], vec![0.0, -0.0, -1.0, -3.0]).tensor();
    let psi = poles.digamma().unwrap().to_vec::<f32>().unwrap();
    assert!(psi[0] == f32::NEG_INFINITY && psi[1] == f32::INFINITY, "{psi:?}");
    assert!(psi[2].is_nan() && psi[3].is_nan(), "{psi:?}");
    let lg = poles.lgamma().unwrap().to_vec::<f32>().unwrap();
    assert!(lg.iter().all(|v| *v == f32::INFINITY), "{lg:?}");
}
}
