//! The samplers that loop until every element is accepted: standard gamma
//! (Marsaglia and Tsang), Poisson (Knuth below rate 10, PTRS from 10 on) and
//! binomial (inversion, or BTRS from n q = 10). Each element's sample has its
//! distribution's moments and, for Poisson and binomial, its exact
//! probabilities; a key gives the same samples in every mode; the
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

/// `Poisson(lam)`'s probabilities of 0..k, then the rest in one cell.
fn poisson_pmf(lam: f64, k: usize) -> Vec<f64> {
    let mut p = vec![(-lam).exp()];
    for i in 1..k {
        p.push(p[i - 1] * lam / i as f64);
    }
    p.push((1.0 - p.iter().sum::<f64>()).max(0.0));
    p
}

/// `Binomial(n, p)`'s probabilities of 0..=n, in float64: ratios of
/// neighbours from the mode outward, normalized (`(1 - p)^n` alone
/// underflows for large n).
fn binomial_pmf(n: usize, p: f64) -> Vec<f64> {
    let mode = ((n + 1) as f64 * p).floor().min(n as f64) as usize;
    let odds = p / (1.0 - p);
    let mut w = vec![0.0; n + 1];
    w[mode] = 1.0;
    for k in mode..n {
        w[k + 1] = w[k] * (n - k) as f64 / (k + 1) as f64 * odds;
    }
    for k in (1..=mode).rev() {
        w[k - 1] = w[k] * k as f64 / (n - k + 1) as f64 / odds;
    }
    let total: f64 = w.iter().sum();
    w.iter().map(|x| x / total).collect()
}

/// Asserts Pearson's chi-square of `samples` (counts, the last cell taking
/// every larger one) against `pmf`, over cells expected at least 20 times
/// (neighbours pooled), below its mean plus six standard deviations (with
/// `cells - 1` degrees of freedom: p < 1e-6).
fn assert_chi_square(what: &str, samples: &[f64], pmf: &[f64]) {
    let n = samples.len() as f64;
    let mut observed = vec![0.0; pmf.len()];
    for x in samples {
        observed[(*x as usize).min(pmf.len() - 1)] += 1.0;
    }
    let (mut chi2, mut cells, mut pooled_p, mut pooled_o) = (0.0, 0, 0.0, 0.0);
    for (p, o) in pmf.iter().zip(&observed) {
        pooled_p += p;
        pooled_o += o;
        if pooled_p * n >= 20.0 {
            chi2 += (pooled_o - pooled_p * n).powi(2) / (pooled_p * n);
            cells += 1;
            (pooled_p, pooled_o) = (0.0, 0.0);
        }
    }
    let dof = (cells - 1) as f64;
    assert!(
        chi2 < dof + 6.0 * (2.0 * dof).sqrt(),
        "{what}: chi-square {chi2:.1} over {cells} cells"
    );
}

all_modes! {
    fn poisson_samples_have_the_poisson_probabilities() {
        const N: usize = 40_000;
        // Both of Knuth's and PTRS's ranges, and the switch at 10.
        let rates = [0.3, 4.0, 9.99, 10.0, 33.0, 120.0];
        for dtype in [DType::F32, DType::F64] {
            let samples = rows(&rates, N, dtype, |r| r.poisson((11, 4)));
            for (lam, v) in rates.iter().zip(&samples) {
                let what = format!("{dtype} rate {lam}");
                assert!(v.iter().all(|x| *x >= 0.0 && x.fract() == 0.0), "{what}: not a count");
                let n = N as f64;
                let (mean, var, _) = moments(v);
                near(&format!("{what}: mean"), mean, *lam, (lam / n).sqrt());
                near(&format!("{what}: variance"), var, *lam, ((lam + 2.0 * lam * lam) / n).sqrt());
                let top = (lam + 8.0 * lam.sqrt() + 10.0) as usize;
                assert_chi_square(&what, v, &poisson_pmf(*lam, top));
            }
        }
    }
}

all_modes! {
    fn binomial_samples_have_the_binomial_probabilities() {
        const N: usize = 40_000;
        // Inversion (n q < 10) and BTRS, each with p below and above 1/2.
        let cases = [(12.0, 0.3), (12.0, 0.8), (60.0, 0.1), (200.0, 0.35), (200.0, 0.9), (3000.0, 0.5)];
        for dtype in [DType::F32, DType::F64] {
            let counts: Vec<f64> = cases.iter().map(|c| c.0).collect();
            // One probability per row, broadcast along it.
            let probs = Host::new(dtype, &[cases.len() as i64, 1], cases.iter().map(|c| c.1).collect());
            let samples = rows(&counts, N, dtype, |n| n.binomial(&probs.tensor(), (21, 3)));
            for ((n, p), v) in cases.iter().zip(&samples) {
                let what = format!("{dtype} n {n} p {p}");
                assert!(
                    v.iter().all(|x| (0.0..=*n).contains(x) && x.fract() == 0.0),
                    "{what}: not a count in [0, n]"
                );
                let (mean, var, _) = moments(v);
                let (m, s2) = (n * p, n * p * (1.0 - p));
                near(&format!("{what}: mean"), mean, m, (s2 / N as f64).sqrt());
                // The variance's standard error is about s2 sqrt(2 / N).
                near(&format!("{what}: variance"), var, s2, s2 * (3.0 / N as f64).sqrt());
                assert_chi_square(&what, v, &binomial_pmf(*n as usize, *p));
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
            // Binomial: a count or p at or below 0 gives 0, p at or above 1
            // the count (5.5 stays 5.5, as the CPU), a NaN count or p NaN.
            let n = Host::new(dtype, &[6], vec![-1.0, 4.0, 5.5, 7.0, f64::NAN, 3.0]);
            let p = Host::new(dtype, &[6], vec![0.5, 0.0, 1.0, 1.5, 0.5, f64::NAN]);
            let got = Host::of(&n.tensor().binomial(&p.tensor(), (5, 5)).unwrap()).data;
            assert_eq!(&got[..4], &[0.0, 0.0, 5.5, 7.0], "{dtype}");
            assert!(got[4].is_nan() && got[5].is_nan(), "{dtype}: {got:?}");
        }
    }
}

#[test]
fn bad_parameters_are_refused_naming_the_op() {
    let ints = Host::new(DType::I64, &[3], vec![1.0, 2.0, 3.0]).tensor();
    check_err(
        ints.standard_gamma((1, 1)),
        &["_standard_gamma", "int64", "floating-point"],
    );
    check_err(
        ints.poisson((1, 1)),
        &["poisson", "int64", "floating-point"],
    );
    check_err(
        ints.binomial(&ints, (1, 1)),
        &["binomial", "int64", "floating-point"],
    );
    let counts = Host::new(DType::F32, &[3], vec![1.0, 2.0, 3.0]).tensor();
    let probs = Host::new(DType::F64, &[3], vec![0.5; 3]).tensor();
    check_err(
        counts.binomial(&probs, (1, 1)),
        &["binomial", "float32[3]", "float64[3]", "one float dtype"],
    );
    let probs = Host::new(DType::F32, &[2], vec![0.5; 2]).tensor();
    check_err(counts.binomial(&probs, (1, 1)), &["binomial", "[3]", "[2]"]);
}

all_modes! {
    fn standard_gamma_grad_is_the_reparameterized_gradient() {
        // (a, x, -(dP(a, x)/da) / density(x; a)) from mpmath (30 digits), a
        // point or more in each region of the approximation: x < 0.8 (the
        // series), a > 8 near and away from the mode (saddle point), and the
        // rational fit. The approximation is within 6e-5 of these (the CPU's
        // too).
        let table = [
            (0.05, 0.01, 0.8311542987228203),
            (0.5, 0.3, 1.0098019459488545),
            (1.0, 0.79, 1.0383769511718655),
            (3.0, 0.5, 0.37617535631048193),
            (0.7, 2.0, 2.0272476995621234),
            (2.5, 6.0, 1.6029866492202411),
            (6.0, 3.0, 0.7122558449070329),
            (1.5, 1.2, 0.9946175955226803),
            (9.0, 8.5, 0.989866126126029),
            (20.0, 19.0, 0.9827316703854199),
            (20.0, 12.0, 0.7725905810750923),
            (20.0, 31.0, 1.2453691909168045),
            (150.0, 140.0, 0.9669739406065995),
        ];
        for dtype in [DType::F64, DType::F32] {
            let a = Host::new(dtype, &[table.len() as i64], table.iter().map(|r| r.0).collect());
            let x = Host::new(dtype, &[table.len() as i64], table.iter().map(|r| r.1).collect());
            let got = Host::of(&a.tensor()._standard_gamma_grad(&x.tensor()).unwrap());
            assert_eq!(got.dtype, dtype);
            for (g, (a, x, want)) in got.data.iter().zip(table) {
                let err = (g - want).abs() / want;
                assert!(err < 1e-4, "{dtype}: d x / d a at a = {a}, x = {x}: {g}, want {want}");
            }
        }
    }
}

all_modes! {
    fn dirichlet_grad_is_the_scaled_reparameterized_gradient() {
        // (x, alpha, total, -(dF/dalpha) / density / (1 - x)) of Beta(alpha,
        // total - alpha) with beta held fixed, from mpmath (30 digits): the
        // small-x and near-1 series, the saddle point (both parameters above
        // 6, near and away from the mean) and the rational fit. The
        // approximation is within 5e-4 of these (the CPU's too).
        let table = [
            (0.1, 0.5, 3.0, 0.36750151397145836),
            (0.3, 2.0, 4.0, 0.22342191126349453),
            (0.9, 3.0, 3.6, 0.3360261961753932),
            (0.45, 10.0, 22.0, 0.04669035347656305),
            (0.2, 8.0, 30.0, 0.029676590373976516),
            (0.6, 1.5, 9.0, 0.23095472987034596),
            (0.05, 0.3, 0.8, 0.6495714096849527),
            (0.97, 4.0, 4.5, 0.2613965485638893),
            (0.35, 7.0, 20.0, 0.05206955876889084),
        ];
        let n = table.len() as i64;
        for dtype in [DType::F64, DType::F32] {
            let column = |f: fn(&(f64, f64, f64, f64)) -> f64| {
                Host::new(dtype, &[n], table.iter().map(f).collect()).tensor()
            };
            let (x, alpha, total) = (column(|r| r.0), column(|r| r.1), column(|r| r.2));
            let got = Host::of(&x.dirichlet_grad(&alpha, &total).unwrap());
            assert_eq!(got.dtype, dtype);
            for (g, (x, a, t, want)) in got.data.iter().zip(table) {
                let err = (g - want).abs() / want;
                assert!(err < 1e-3, "{dtype}: at x = {x}, alpha = {a}, total = {t}: {g}, want {want}");
            }
        }
        let ints = Host::new(DType::I64, &[2], vec![1.0, 2.0]).tensor();
        check_err(ints.dirichlet_grad(&ints, &ints), &["_dirichlet_grad", "int64", "floating-point"]);
        let x = Host::new(DType::F32, &[2], vec![0.5, 0.5]).tensor();
        let wide = Host::new(DType::F64, &[2], vec![1.0, 2.0]).tensor();
        check_err(x.dirichlet_grad(&wide, &wide), &["_dirichlet_grad", "float64[2]", "one float dtype"]);
    }
}
