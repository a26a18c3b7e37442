//! The composed functions and activations (`Tensor::activation`) against host
//! references, their backwards against central differences of the host's
//! forward, and bad input named; every mode.

mod common;

use common::*;
use eagertpu::{Activation, DType, Tensor};

fn softplus(x: f64, beta: f64, threshold: f64) -> f64 {
    if beta * x > threshold {
        x
    } else {
        (beta * x).exp().ln_1p() / beta
    }
}

/// The host's `a(x)`.
fn host(a: Activation, x: f64) -> f64 {
    use Activation::*;
    match a {
        Expm1 => x.exp_m1(),
        Exp2 => x.exp2(),
        Log2 => x.log2(),
        Log10 => x.log10(),
        Tan => x.tan(),
        Sinh => x.sinh(),
        Cosh => x.cosh(),
        Atan => x.atan(),
        Asin => x.asin(),
        Acos => x.acos(),
        Trunc => x.trunc(),
        Frac => x.fract(),
        Erfinv => unreachable!("checked through erf"),
        Sinc if x == 0.0 => 1.0,
        Sinc => (std::f64::consts::PI * x).sin() / (std::f64::consts::PI * x),
        Entr if x > 0.0 => -x * x.ln(),
        Entr if x == 0.0 => 0.0,
        Entr => f64::NEG_INFINITY,
        Mish => x * softplus(x, 1.0, 20.0).tanh(),
        Hardswish => x * (x + 3.0).clamp(0.0, 6.0) / 6.0,
        Hardsigmoid => (x / 6.0 + 0.5).clamp(0.0, 1.0),
        LogSigmoid => -softplus(-x, 1.0, 20.0),
        Softplus { beta, threshold } => softplus(x, beta, threshold),
        Hardtanh { min, max } => x.clamp(min, max),
        LeakyRelu { slope } => {
            if x > 0.0 {
                x
            } else {
                slope * x
            }
        }
        Elu {
            alpha,
            scale,
            input_scale,
        } => {
            if x > 0.0 {
                scale * x
            } else {
                scale * alpha * (input_scale * x).exp_m1()
            }
        }
        Logit { eps } => {
            let p = eps.map_or(x, |e| x.clamp(e, 1.0 - e));
            (p / (1.0 - p)).ln()
        }
        Signbit | NanToNum { .. } => unreachable!("checked on their own"),
        Silu => x / (1.0 + (-x).exp()),
        Gelu => 0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2)),
        GeluTanh => {
            let c = (2.0 / std::f64::consts::PI).sqrt();
            0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh())
        }
        Sigmoid => 1.0 / (1.0 + (-x).exp()),
        Tanh => x.tanh(),
        Threshold { threshold, value } => {
            if x > threshold {
                x
            } else {
                value
            }
        }
    }
}

const WITH_BACKWARD: [Activation; 16] = [
    Activation::Silu,
    Activation::Gelu,
    Activation::GeluTanh,
    Activation::Sigmoid,
    Activation::Tanh,
    Activation::Threshold {
        threshold: 0.3,
        value: -2.0,
    },
    Activation::Logit { eps: Some(0.1) },
    Activation::Logit { eps: None },
    Activation::Mish,
    Activation::Hardswish,
    Activation::Hardsigmoid,
    Activation::LogSigmoid,
    Activation::Softplus {
        beta: 2.0,
        threshold: 3.0,
    },
    Activation::Hardtanh {
        min: -0.5,
        max: 1.5,
    },
    Activation::LeakyRelu { slope: 0.1 },
    Activation::Elu {
        alpha: 1.3,
        scale: 1.05,
        input_scale: 0.7,
    },
];

fn all() -> Vec<Activation> {
    use Activation::*;
    let mut out = vec![
        Expm1, Exp2, Log2, Log10, Tan, Sinh, Cosh, Atan, Asin, Acos, Trunc, Frac, Sinc, Entr,
    ];
    out.extend(WITH_BACKWARD);
    out
}

/// Inputs inside the function's domain, near its kinks and far from them.
fn input(a: Activation, dtype: DType, seed: u64) -> Host {
    use Activation::*;
    match a {
        Log2 | Log10 => Host::random_in(dtype, &[3, 17], seed, 0.05, 20.0),
        Asin | Acos => Host::random_in(dtype, &[3, 17], seed, -0.99, 0.99),
        Logit { eps: None } => Host::random_in(dtype, &[3, 17], seed, 0.02, 0.98),
        Logit { .. } => Host::random_in(dtype, &[3, 17], seed, -0.2, 1.2),
        // Where the host's 1 + erf(x / sqrt 2) keeps its digits.
        Gelu => Host::random_in(dtype, &[3, 17], seed, -3.0, 3.0),
        Tan => Host::random_in(dtype, &[3, 17], seed, -1.4, 1.4),
        // Zero, negatives (-inf) and positives.
        Entr => Host::new(dtype, &[6], vec![0.0, -1.5, 1e-6, 0.5, 1.0, 7.25]),
        Sinc => Host::new(dtype, &[6], vec![0.0, -1.5, 1e-6, 0.5, 1.0, 7.25]),
        Expm1 => Host::new(
            dtype,
            &[8],
            vec![-30.0, -1.0, -1e-3, -1e-9, 0.0, 1e-9, 1e-4, 5.0],
        ),
        _ => Host::random_in(dtype, &[3, 17], seed, -6.0, 6.0),
    }
}

all_modes! {
fn every_function_matches_the_host() {
    for a in all() {
        for dtype in [DType::F32, DType::F64] {
            let x = input(a, dtype, 3);
            let got = x.tensor().activation(a).unwrap();
            let want = x.map(dtype, |v| host(a, v));
            assert_close(&format!("{a:?}"), &got, &want);
        }
    }
}
}

all_modes! {
fn integers_compute_in_float32_and_trunc_keeps_them() {
    let ints = Host::new(DType::I32, &[4], vec![-2.0, 0.0, 1.0, 3.0]);
    let got = ints.tensor().activation(Activation::Exp2).unwrap();
    assert_close("exp2 of int32", &got, &ints.map(DType::F32, f64::exp2));
    let got = ints.tensor().activation(Activation::Trunc).unwrap();
    assert_close("trunc of int32", &got, &ints);
    // threshold keeps the input's dtype, as torch.threshold does.
    let got = ints.tensor().activation(Activation::Threshold { threshold: 0.5, value: 7.0 }).unwrap();
    assert_eq!(Host::of(&got), Host::new(DType::I32, &[4], vec![7.0, 7.0, 1.0, 3.0]));
}
}

all_modes! {
fn signbit_and_nan_to_num_follow_pytorch() {
    let x = Host::new(
        DType::F32,
        &[6],
        vec![-0.0, 0.0, -2.5, 3.0, f64::NAN, f64::NEG_INFINITY],
    );
    let got = Host::of(&x.tensor().activation(Activation::Signbit).unwrap());
    assert_eq!((got.dtype, got.data), (DType::Bool, vec![1.0, 0.0, 1.0, 0.0, 0.0, 1.0]));
    let ints = Tensor::from_slice(&[-3i64, 0, 4], &[3]).unwrap();
    let got = Host::of(&ints.activation(Activation::Signbit).unwrap());
    assert_eq!((got.dtype, got.data), (DType::Bool, vec![1.0, 0.0, 0.0]));

    let special = vec![1.5, f64::NAN, f64::INFINITY, f64::NEG_INFINITY];
    let defaults = Activation::NanToNum { nan: 0.0, posinf: None, neginf: None };
    for (dtype, big) in [
        (DType::F32, f32::MAX as f64),
        (DType::F64, f64::MAX),
        (DType::F16, 65504.0),
        (DType::BF16, 3.3895313892515355e38),
    ] {
        let x = Host::new(dtype, &[4], special.clone());
        let got = x.tensor().activation(defaults).unwrap();
        assert_close(&format!("nan_to_num {dtype}"), &got, &Host::new(dtype, &[4], vec![1.5, 0.0, big, -big]));
    }
    let chosen = Activation::NanToNum { nan: 0.5, posinf: Some(9.0), neginf: Some(-9.0) };
    let x = Host::new(DType::F32, &[4], special);
    let got = x.tensor().activation(chosen).unwrap();
    assert_close("nan_to_num chosen", &got, &Host::new(DType::F32, &[4], vec![1.5, 0.5, 9.0, -9.0]));
    assert_eq!(Host::of(&ints.activation(defaults).unwrap()).data, [-3.0, 0.0, 4.0]);
    assert_eq!(
        Activation::from_name("nan_to_num", &[0.0, f64::NAN, -1.0]).unwrap().unwrap(),
        Activation::NanToNum { nan: 0.0, posinf: None, neginf: Some(-1.0) }
    );
}
}

all_modes! {
fn erfinv_inverts_erf_with_infinities_at_the_ends() {
    let y = Host::new(
        DType::F64,
        &[9],
        vec![-0.999999, -0.9, -0.3, 0.0, 1e-7, 0.5, 0.99, 0.9999999, 0.25],
    );
    let x = y.tensor().activation(Activation::Erfinv).unwrap();
    assert_close_tol("erf(erfinv(y))", &x.erf().unwrap(), &y, (1e-12, 1e-14));
    let edges = Host::new(DType::F32, &[4], vec![-1.0, 1.0, 1.5, -2.0]);
    let got = edges.tensor().activation(Activation::Erfinv).unwrap();
    let want = Host::new(
        DType::F32,
        &[4],
        vec![f64::NEG_INFINITY, f64::INFINITY, f64::NAN, f64::NAN],
    );
    assert_close("erfinv at and beyond +-1", &got, &want);
}
}

all_modes! {
fn every_backward_matches_central_differences() {
    for a in WITH_BACKWARD {
        let x = input(a, DType::F64, 5);
        // Away from the kinks, where the one-sided slopes differ.
        let data: Vec<f64> = x
            .data
            .iter()
            .map(|v| if (v.abs() - 3.0).abs() < 1e-3 || v.abs() < 1e-3 { v + 0.01 } else { *v })
            .map(|v| if (v + 0.5).abs() < 1e-3 || (v - 1.5).abs() < 1e-3 { v + 0.01 } else { v })
            .map(|v| if (v - 0.1).abs() < 1e-3 || (v - 0.9).abs() < 1e-3 { v + 0.01 } else { v })
            .map(|v| if (v - 0.3).abs() < 1e-3 { v + 0.01 } else { v })
            .collect();
        let x = Host::new(DType::F64, &x.shape, data);
        let g = Host::random(DType::F64, &x.shape, 9);
        let got = g.tensor().activation_backward(&x.tensor(), a, false).unwrap();
        let slopes = central_differences(&x.data, 1e-6, |v| {
            // One element moves at a time: the sum of g * a(v) changes by
            // g_i * a'(v_i).
            v.iter().zip(&g.data).map(|(v, g)| g * host(a, *v)).sum()
        });
        let want = Host::new(DType::F64, &x.shape, slopes);
        assert_close_tol(&format!("{a:?} backward"), &got, &want, (1e-6, 1e-7));

        use Activation::{Elu, LeakyRelu, Sigmoid, Tanh};
        if let Elu { .. } | LeakyRelu { .. } | Sigmoid | Tanh = a {
            // From the result, as the in-place forms save it.
            let y = x.tensor().activation(a).unwrap();
            let from_result = g.tensor().activation_backward(&y, a, true).unwrap();
            assert_close_tol(&format!("{a:?} backward from the result"), &from_result, &want, (1e-6, 1e-7));
        }
    }
}
}

#[test]
fn bad_input_is_named() {
    let x = Tensor::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
    let ints = Tensor::from_slice(&[1i32, 2], &[2]).unwrap();
    assert_err(
        ints.activation_backward(&x, Activation::Mish, false),
        "mish",
        &["floating-point gradient", "int32"],
    );
    assert_err(
        x.activation_backward(&x, Activation::Hardswish, true),
        "hardswish",
        &["takes the input, not the result"],
    );
    assert_err(
        x.activation_backward(&x, Activation::Tan, false),
        "tan",
        &["no backward of its own"],
    );
    let e = Activation::from_name("softplus", &[1.0]).unwrap();
    assert_err(e, "softplus", &["got 1 parameters", "expected 2"]);
    assert!(Activation::from_name("nope", &[]).is_none());
    assert_eq!(
        Activation::from_name("elu", &[1.0, 2.0, 3.0])
            .unwrap()
            .unwrap(),
        Activation::Elu {
            alpha: 1.0,
            scale: 2.0,
            input_scale: 3.0
        }
    );
    for a in all() {
        let params: Vec<f64> = match a {
            Activation::Softplus { beta, threshold } => vec![beta, threshold],
            Activation::Hardtanh { min, max } => vec![min, max],
            Activation::LeakyRelu { slope } => vec![slope],
            Activation::Elu {
                alpha,
                scale,
                input_scale,
            } => vec![alpha, scale, input_scale],
            Activation::Logit { eps } => eps.into_iter().collect(),
            Activation::Threshold { threshold, value } => vec![threshold, value],
            _ => vec![],
        };
        assert_eq!(
            Activation::from_name(a.name(), &params).unwrap().unwrap(),
            a
        );
    }
}
