//! The orthogonal polynomials of `torch.special` against host references
//! from their closed definitions, not their recurrences: Chebyshev kinds by
//! the trigonometric forms (T_n(cos t) = cos(n t), ...), Hermite, Laguerre
//! and Legendre by their explicit sums; degrees 0-12 in float64, shifted
//! kinds at (y + 1) / 2, negative and fractional degrees, and the table of
//! names.

mod common;

use common::*;
use eagertpu::{DType, Polynomial, Tensor};

fn factorial(n: u64) -> f64 {
    (1..=n).map(|k| k as f64).product()
}

fn choose(n: u64, k: u64) -> f64 {
    factorial(n) / (factorial(k) * factorial(n - k))
}

/// The degree-n value at x in (-1, 1), from the definitions.
fn reference(kind: Polynomial, x: f64, n: u64) -> f64 {
    use Polynomial::*;
    let shifted = matches!(
        kind,
        ShiftedChebyshevT | ShiftedChebyshevU | ShiftedChebyshevV | ShiftedChebyshevW
    );
    let y = if shifted { 2.0 * x - 1.0 } else { x };
    let t = y.acos();
    let nf = n as f64;
    let half = (0..=n / 2).map(|m| (m, n - 2 * m));
    match kind {
        ChebyshevT | ShiftedChebyshevT => (nf * t).cos(),
        ChebyshevU | ShiftedChebyshevU => ((nf + 1.0) * t).sin() / t.sin(),
        ChebyshevV | ShiftedChebyshevV => ((nf + 0.5) * t).cos() / (t / 2.0).cos(),
        ChebyshevW | ShiftedChebyshevW => ((nf + 0.5) * t).sin() / (t / 2.0).sin(),
        HermiteH => {
            half.map(|(m, r)| {
                let sign = if m % 2 == 0 { 1.0 } else { -1.0 };
                sign * (2.0 * x).powi(r as i32) / (factorial(m) * factorial(r))
            })
            .sum::<f64>()
                * factorial(n)
        }
        HermiteHe => {
            half.map(|(m, r)| {
                let sign = if m % 2 == 0 { 1.0 } else { -1.0 };
                sign * x.powi(r as i32) / (factorial(m) * factorial(r) * 2f64.powi(m as i32))
            })
            .sum::<f64>()
                * factorial(n)
        }
        Laguerre => (0..=n)
            .map(|k| {
                let sign = if k % 2 == 0 { 1.0 } else { -1.0 };
                sign * choose(n, k) * x.powi(k as i32) / factorial(k)
            })
            .sum(),
        Legendre => {
            half.map(|(k, r)| {
                let sign = if k % 2 == 0 { 1.0 } else { -1.0 };
                sign * choose(n, k) * choose(2 * n - 2 * k, n) * x.powi(r as i32)
            })
            .sum::<f64>()
                / 2f64.powi(n as i32)
        }
    }
}

#[test]
fn every_polynomial_matches_its_definition_at_degrees_0_to_12() {
    // Points inside the (shifted) interval, away from its ends.
    let inside = [-0.83, -0.41, -0.05, 0.12, 0.37, 0.66, 0.91];
    for &kind in Polynomial::ALL {
        let shifted = kind.name().starts_with("shifted");
        let xs: Vec<f64> = inside
            .iter()
            .map(|&v| if shifted { (v + 1.0) / 2.0 } else { v })
            .collect();
        let degrees: Vec<f64> = (0..=12).map(|n| n as f64).collect();
        let (mut x_all, mut n_all, mut want) = (Vec::new(), Vec::new(), Vec::new());
        for &x in &xs {
            for &n in &degrees {
                x_all.push(x);
                n_all.push(n);
                want.push(reference(kind, x, n as u64));
            }
        }
        let shape = [x_all.len() as i64];
        let x = Tensor::from_slice(&x_all, &shape).unwrap();
        let n = Tensor::from_slice(&n_all, &shape).unwrap();
        let got = x.polynomial(kind, &n);
        check_tol(
            kind.name(),
            got,
            &Host::new(DType::F64, &shape, want),
            (1e-9, 1e-9),
        );
    }
}

#[test]
fn negative_degrees_give_zero_and_fractional_ones_truncate() {
    let x = Tensor::from_slice(&[0.3f32, 0.3, 0.3, 0.3], &[4]).unwrap();
    let n = Tensor::from_slice(&[-1.0f32, -3.5, 2.9, 2.0], &[4]).unwrap();
    let t = x
        .polynomial(Polynomial::ChebyshevT, &n)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    let t2 = 2.0 * 0.3f32 * 0.3 - 1.0;
    assert_eq!(t[..2], [0.0, 0.0]);
    assert!(
        (t[2] - t2).abs() < 1e-6 && (t[3] - t2).abs() < 1e-6,
        "{t:?}"
    );
    // Integer degrees promote to the default float dtype; n broadcasts.
    let n = Tensor::from_slice(&[0i64, 1, 2], &[3, 1]).unwrap();
    let h = x.polynomial(Polynomial::HermiteHe, &n).unwrap();
    assert_eq!((h.dtype(), h.shape()), (DType::F32, &[3i64, 4][..]));
    let h = h.to_vec::<f32>().unwrap();
    assert!(
        (h[4] - 0.3).abs() < 1e-6 && (h[8] - (0.09 - 1.0)).abs() < 1e-6,
        "{h:?}"
    );
    for &kind in Polynomial::ALL {
        assert_eq!(Polynomial::from_name(kind.name()), Some(kind));
    }
    let e = x.polynomial(
        Polynomial::Legendre,
        &Tensor::from_slice(&[1.0f32; 3], &[3]).unwrap(),
    );
    assert_err(e, "legendre_polynomial_p", &["[4]", "[3]"]);
}
