//! The samplers that loop until every element is accepted: standard gamma
//! (Marsaglia and Tsang) and Poisson (Knuth below rate 10, PTRS from 10 on).
//! Each element's sample has its distribution's moments and, for Poisson,
//! its exact probabilities; a key gives the same samples in every mode; the
//! edges (shape or rate 0, negative, NaN) are as the CPU's or NaN, never a
//! hang.

mod common;

use common::builders::check_err;
use common::*;
use eagertpu::{DType, Tensor};

/// `n` samples of `draw` for each parameter in `params` (one row each).
fn rows(
    params: &[f64],
    n: usize,
    dtype: DType,
    draw: impl Fn(&Tensor) -> eagertpu::Result<Tensor>,
) -> Vec<Vec<f64>> {
    let host = Host::new(
        dtype,
        &[params.len() as i64, n as i64],
        params
            .iter()
            .flat_map(|p| std::iter::repeat_n(*p, n))
            .collect(),
    );
    let out = draw(&host.tensor()).unwrap();
    assert_eq!((out.dtype(), out.shape()), (dtype, host.shape.as_slice()));
    Host::of(&out).data.chunks(n).map(<[f64]>::to_vec).collect()
}

/// Mean, variance and third central moment of `v`.
fn moments(v: &[f64]) -> (f64, f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let central = |k: i32| v.iter().map(|x| (x - mean).powi(k)).sum::<f64>() / n;
    (mean, central(2), central(3))
}

/// Asserts `got` within five standard errors `se` of `want`.
fn near(what: &str, got: f64, want: f64, se: f64) {
    assert!(
        (got - want).abs() < 5.0 * se,
        "{what}: got {got}, expected {want} (standard error {se})"
    );
}

all_modes! {
    fn gamma_samples_have_the_gamma_moments() {
        const N: usize = 40_000;
        let shapes = [0.05, 0.3, 1.0, 2.5, 40.0];
        for dtype in [DType::F32, DType::F64] {
            let samples = rows(&shapes, N, dtype, |a| a.standard_gamma((3, 7)));
            for (a, v) in shapes.iter().zip(&samples) {
                assert!(v.iter().all(|x| x.is_finite() && *x > 0.0), "{dtype} alpha {a}: a sample <= 0");
                // Gamma(a): mean a, variance a, third central moment 2a;
                // the variance's standard error from the fourth moment
                // 3a^2 + 6a.
                let (mean, var, third) = moments(v);
                let n = N as f64;
                near(&format!("{dtype} alpha {a}: mean"), mean, *a, (a / n).sqrt());
                near(&format!("{dtype} alpha {a}: variance"), var, *a, ((2.0 * a * a + 6.0 * a) / n).sqrt());
                // The sixth moment bounds the third's error: loose, but a
                // wrong boost or acceptance shows up here first.
                let se_third = ((120.0 * a + 130.0 * a * a + 15.0 * a.powi(3)) / n).sqrt();
                near(&format!("{dtype} alpha {a}: third moment"), third, 2.0 * a, se_third);
            }
        }
    }
}

all_modes! {
    fn a_key_gives_the_same_gamma_and_poisson_samples_in_every_mode() {
        let params = Host::new(DType::F32, &[6], vec![0.5, 1.0, 3.0, 9.5, 10.0, 250.0]);
        let gamma = |key| Host::of(&params.tensor().standard_gamma(key).unwrap()).data;
        let poisson = |key| Host::of(&params.tensor().poisson(key).unwrap()).data;
        assert_eq!(gamma((1, 2)), gamma((1, 2)));
        assert_ne!(gamma((1, 2)), gamma((1, 3)));
        assert_eq!(poisson((1, 2)), poisson((1, 2)));
        assert_ne!(poisson((1, 2)), poisson((2, 2)));
    }
}

/// `Poisson(lam)`'s probabilities of 0..k, in float64.
fn poisson_pmf(lam: f64, k: usize) -> Vec<f64> {
    let mut p = vec![(-lam).exp()];
    for i in 1..k {
        p.push(p[i - 1] * lam / i as f64);
    }
    p
}

all_modes! {
    fn poisson_samples_have_the_poisson_probabilities() {
        const N: usize = 40_000;
        // Both of Knuth's and PTRS's ranges, and the switch at 10.
        let rates = [0.3, 4.0, 9.99, 10.0, 33.0, 120.0];
        for dtype in [DType::F32, DType::F64] {
            let samples = rows(&rates, N, dtype, |r| r.poisson((11, 4)));
            for (lam, v) in rates.iter().zip(&samples) {
                assert!(v.iter().all(|x| *x >= 0.0 && x.fract() == 0.0), "{dtype} rate {lam}: not a count");
                let n = N as f64;
                let (mean, var, _) = moments(v);
                near(&format!("{dtype} rate {lam}: mean"), mean, *lam, (lam / n).sqrt());
                near(&format!("{dtype} rate {lam}: variance"), var, *lam, ((lam + 2.0 * lam * lam) / n).sqrt());
                // Pearson's chi-square against the exact probabilities, over
                // counts expected at least 20 times (the rest pooled).
                let top = (lam + 8.0 * lam.sqrt() + 10.0) as usize;
                let pmf = poisson_pmf(*lam, top);
                let mut observed = vec![0.0; top + 1];
                for x in v {
                    observed[(*x as usize).min(top)] += 1.0;
                }
                let (mut chi2, mut cells, mut pooled_p, mut pooled_o) = (0.0, 0, 0.0, 0.0);
                for k in 0..=top {
                    let p = if k < top { pmf[k] } else { (1.0 - pmf.iter().sum::<f64>()).max(0.0) };
                    pooled_p += p;
                    pooled_o += observed[k];
                    if pooled_p * n >= 20.0 {
                        chi2 += (pooled_o - pooled_p * n).powi(2) / (pooled_p * n);
                        cells += 1;
                        (pooled_p, pooled_o) = (0.0, 0.0);
                    }
                }
                // Chi-square with `cells - 1` degrees of freedom: mean d,
                // standard deviation sqrt(2d); six of them is p < 1e-6.
                let dof = (cells - 1) as f64;
                assert!(
                    chi2 < dof + 6.0 * (2.0 * dof).sqrt(),
                    "{dtype} rate {lam}: chi-square {chi2:.1} over {cells} cells"
                );
            }
        }
    }
}

all_modes! {
    fn edges_are_the_cpus_or_nan_never_a_hang() {
        for dtype in [DType::F32, DType::F64, DType::BF16] {
            let params = Host::new(dtype, &[5], vec![0.0, -1.0, f64::NAN, 0.0, 1.0]);
            let gamma = Host::of(&params.tensor().standard_gamma((5, 5)).unwrap()).data;
            // Shape 0: the smallest normal value, as the CPU (never 0).
            let smallest = match dtype {
                DType::F64 => f64::MIN_POSITIVE,
                DType::BF16 => half::bf16::MIN_POSITIVE.to_f64(),
                _ => f32::MIN_POSITIVE as f64,
            };
            assert_eq!(gamma[0], smallest, "{dtype}");
            assert!(gamma[1].is_nan() && gamma[2].is_nan(), "{dtype}: {gamma:?}");
            assert!(gamma[4] > 0.0, "{dtype}: {gamma:?}");
            let rates = Host::new(dtype, &[5], vec![0.0, -1.0, f64::NAN, f64::INFINITY, 2.0]);
            let counts = Host::of(&rates.tensor().poisson((5, 5)).unwrap()).data;
            assert_eq!(counts[0], 0.0, "{dtype}");
            assert!(counts[1..4].iter().all(|x| x.is_nan()), "{dtype}: {counts:?}");
            assert!(counts[4] >= 0.0 && counts[4].fract() == 0.0, "{dtype}: {counts:?}");
        }
    }
}

#[test]
fn integer_parameters_are_refused_naming_the_op() {
    let ints = Host::new(DType::I64, &[3], vec![1.0, 2.0, 3.0]).tensor();
    check_err(
        ints.standard_gamma((1, 1)),
        &["_standard_gamma", "int64", "floating-point"],
    );
    check_err(
        ints.poisson((1, 1)),
        &["poisson", "int64", "floating-point"],
    );
}
