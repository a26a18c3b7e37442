//! Counter-based uniform random numbers: a draw is a function of its key
//! (same key, same samples; another key, other samples), the samples are
//! uniform in [0, 1) by their moments and histogram, in every float dtype and
//! mode, and keys are parameters: drawing with 20 keys compiles one program,
//! and a loop drawing a new key every step still repeats as one chunk.

mod common;

use common::*;
use eagertpu::{DType, Distribution, Metrics, Mode, Scalar, Tensor, default_device};

fn metrics() -> Metrics {
    eagertpu::metrics().unwrap()
}

/// Programs that had to come from compiling or from disk (not memory).
fn loads(m: &Metrics) -> u64 {
    m.misses + m.disk_hits
}

fn draw(key: (u64, u64), shape: &[i64], dtype: DType) -> Vec<f64> {
    let device = default_device().unwrap();
    let t = Tensor::rand_uniform(&device, key, shape, dtype).unwrap();
    assert_eq!(t.dtype(), dtype);
    assert_eq!(t.shape(), shape);
    Host::of(&t).data
}

/// Fraction of positions where `a` and `b` differ.
fn differing(a: &[f64], b: &[f64]) -> f64 {
    let n = a.iter().zip(b).filter(|(x, y)| x != y).count();
    n as f64 / a.len() as f64
}

all_modes! {
    fn the_same_key_gives_the_same_samples_and_other_keys_other_samples() {
        for dtype in FLOATS {
            let a = draw((1, 2), &[1000], dtype);
            assert_eq!(a, draw((1, 2), &[1000], dtype), "{dtype}: same key");
            // 16-bit floats have few values in [0, 1): equal draws by chance
            // are more common there.
            let min_diff = if dtype.size_in_bytes() == 2 { 0.8 } else { 0.99 };
            for other in [(1, 3), (2, 2), (2, 1), (0, 0), (0, 1), (1, 0), (u64::MAX, 2)] {
                let b = draw(other, &[1000], dtype);
                let d = differing(&a, &b);
                let same = 100.0 * (1.0 - d);
                assert!(d > min_diff, "{dtype}: keys (1, 2) and {other:?} agree at {same:.1}%");
            }
        }
    }
}

all_modes! {
    fn keys_of_zero_and_one_and_the_largest_key_draw_distinct_samples() {
        let keys = [(0, 0), (0, 1), (1, 0), (1, 1), (u64::MAX, 0), (0, u64::MAX)];
        let draws: Vec<Vec<f64>> = keys.iter().map(|k| draw(*k, &[256], DType::F32)).collect();
        for i in 0..keys.len() {
            assert!(draws[i].iter().all(|v| (0.0..1.0).contains(v)), "{:?}", keys[i]);
            for j in 0..i {
                assert!(differing(&draws[i], &draws[j]) > 0.99, "{:?} vs {:?}", keys[i], keys[j]);
            }
        }
    }
}

all_modes! {
    fn samples_are_uniform_in_the_unit_interval() {
        const N: usize = 100_000;
        for (i, dtype) in FLOATS.into_iter().enumerate() {
            let v = draw((42, i as u64), &[100, 1000], dtype);
            assert_eq!(v.len(), N);
            let (lo, hi) = v.iter().fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
            assert!(lo >= 0.0 && hi < 1.0, "{dtype}: range [{lo}, {hi}]");
            let mean = v.iter().sum::<f64>() / N as f64;
            let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (N - 1) as f64;
            // Standard errors of a U(0, 1) sample of N: the mean's is
            // sqrt(1/12 / N); the variance's is sqrt((1/80 - 1/144) / N).
            // Five of them; the rounding of 16-bit floats is far smaller.
            let se_mean = (1.0 / 12.0 / N as f64).sqrt();
            let se_var = ((1.0 / 80.0 - 1.0 / 144.0) / N as f64).sqrt();
            assert!((mean - 0.5).abs() < 5.0 * se_mean, "{dtype}: mean {mean}");
            assert!((var - 1.0 / 12.0).abs() < 5.0 * se_var, "{dtype}: variance {var}");
            // Sixteen equal bins each hold N / 16 samples, within five
            // binomial standard deviations. (Edges at multiples of 1/16 lie
            // on every dtype's grid, so rounding to 16 bits moves no bin's
            // mass beyond a fraction of one step.)
            let mut bins = [0usize; 16];
            for x in &v {
                bins[(x * 16.0) as usize] += 1;
            }
            let (p, n) = (1.0 / 16.0, N as f64);
            let sd = (n * p * (1.0 - p)).sqrt();
            for (b, count) in bins.iter().enumerate() {
                assert!((*count as f64 - n * p).abs() < 5.0 * sd, "{dtype}: bin {b} holds {count}");
            }
            // Neighbouring samples are uncorrelated (lag-1 autocorrelation).
            let products = v.windows(2).map(|w| (w[0] - mean) * (w[1] - mean));
            let cov = products.sum::<f64>() / (N - 1) as f64;
            assert!((cov / var).abs() < 5.0 / n.sqrt(), "{dtype}: lag-1 correlation {}", cov / var);
        }
    }
}

all_modes! {
    fn shapes_and_dtypes_are_checked() {
        assert_eq!(draw((3, 4), &[], DType::F64).len(), 1);
        assert!(draw((3, 4), &[2, 0, 3], DType::F32).is_empty());
        let device = default_device().unwrap();
        let e = err_text(Tensor::rand_uniform(&device, (1, 2), &[4], DType::I32));
        assert!(e.contains("rand") && e.contains("int32") && e.contains("floating-point"), "{e}");
        let e = err_text(Tensor::rand_uniform(&device, (1, 2), &[2, -1], DType::F32));
        assert!(e.contains("rand") && e.contains("negative size -1"), "{e}");
        // The runtime is still usable.
        assert_eq!(draw((3, 4), &[3], DType::F32).len(), 3);
    }
}

all_modes! {
    fn drawing_with_twenty_different_keys_compiles_once() {
        // Keys 0, 1 and -1 (as int64) would stay in the program as ordinary
        // scalars; keys must not.
        let mut keys: Vec<(u64, u64)> = (0..17).map(|i| (i, 0)).collect();
        keys.extend([(u64::MAX, 1), (1, u64::MAX), (0, 1)]);
        let before = metrics();
        let mut draws = vec![];
        for key in &keys {
            draws.push(draw(*key, &[3, 5], DType::F32));
        }
        let after = metrics();
        assert!(
            loads(&after) - loads(&before) <= 1,
            "{} programs for 20 keys\n{}",
            loads(&after) - loads(&before),
            after.report()
        );
        assert!(after.compiles - before.compiles <= 1, "{}", after.report());
        assert_eq!(after.lifted_scalars - before.lifted_scalars, 40, "two lifted keys per draw");
        for i in 0..draws.len() {
            for j in 0..i {
                assert!(differing(&draws[i], &draws[j]) > 0.9, "{:?} vs {:?}", keys[i], keys[j]);
            }
        }
    }
}

#[test]
fn a_loop_drawing_a_new_key_every_step_repeats_as_one_chunk() {
    // 4 ops a step: 1,600 ops, long enough for the period to be cut twice.
    const STEPS: u64 = 400;
    let n = 16;
    // Each step's samples, drawn one at a time (each read at once).
    let samples: Vec<Vec<f64>> = {
        let _m = in_mode(Mode::Debug);
        (0..STEPS).map(|k| draw((k, 9), &[n], DType::F32)).collect()
    };
    let _m = in_mode(Mode::Fused);
    let device = default_device().unwrap();
    let mut acc = Tensor::zeros(&[n], DType::F32).unwrap();
    acc.sync().unwrap();
    let before = metrics();
    for k in 0..STEPS {
        let u = Tensor::rand_uniform(&device, (k, 9), &[n], DType::F32).unwrap();
        acc = (&(&acc * 0.5).unwrap() + &u).unwrap();
    }
    let got = Host::of(&acc).data;
    let after = metrics();
    assert!(
        after.chunks_cut("period") - before.chunks_cut("period") >= 2,
        "{}",
        after.report()
    );
    // A few distinct chunks, and a few programs: the single-op programs the
    // chunks run as until they are hot, then theirs; never one per step.
    assert!(
        after.chunk_keys - before.chunk_keys <= 3,
        "{}",
        after.report()
    );
    assert!(loads(&after) - loads(&before) <= 10, "{}", after.report());
    let mut want = vec![0.0f64; n as usize];
    for s in &samples {
        for (a, u) in want.iter_mut().zip(s) {
            *a = round(DType::F32, round(DType::F32, *a * 0.5) + u);
        }
    }
    assert_eq!(got, want, "the fused loop used each step's key");
}

/// Mean and variance of `v`.
fn moments(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    (mean, v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n)
}

fn sample(key: u64, shape: &[i64], dtype: DType, d: Distribution) -> Vec<f64> {
    let t = default_device()
        .unwrap()
        .sample((key, 5), shape, dtype, d)
        .unwrap();
    assert_eq!((t.dtype(), t.shape()), (dtype, shape));
    Host::of(&t).data
}

all_modes! {
    fn every_distribution_has_its_moments_and_range() {
        let n = 100_000;
        for dtype in [DType::F32, DType::F64] {
            let u = sample(1, &[n], dtype, Distribution::Uniform { from: -2.0, to: 3.0 });
            assert!(u.iter().all(|x| (-2.0..3.0).contains(x)), "{dtype}: uniform range");
            let (m, v) = moments(&u);
            assert!((m - 0.5).abs() < 0.03 && (v - 25.0 / 12.0).abs() < 0.05, "{dtype}: uniform {m} {v}");
            let z = sample(2, &[n], dtype, Distribution::Normal { mean: 1.5, std: 2.0 });
            let (m, v) = moments(&z);
            assert!((m - 1.5).abs() < 0.03 && (v.sqrt() - 2.0).abs() < 0.03, "{dtype}: normal {m} {v}");
            let e = sample(3, &[n], dtype, Distribution::Exponential { lambda: 4.0 });
            let (m, v) = moments(&e);
            assert!(e.iter().all(|x| *x >= 0.0), "{dtype}: exponential range");
            assert!((m - 0.25).abs() < 0.01 && (v - 0.0625).abs() < 0.005, "{dtype}: exponential {m} {v}");
        }
        let b = sample(4, &[n], DType::F32, Distribution::Bernoulli { p: 0.3 });
        assert!(b.iter().all(|x| *x == 0.0 || *x == 1.0));
        assert!((moments(&b).0 - 0.3).abs() < 0.01);
        // Integers: every value of a small range, none outside; int64 exactly.
        let k = sample(5, &[n], DType::I64, Distribution::Integers { from: -3, to: Some(4) });
        for value in -3..4 {
            let share = k.iter().filter(|x| **x == value as f64).count() as f64 / n as f64;
            assert!((share - 1.0 / 7.0).abs() < 0.01, "integer {value}: {share}");
        }
        assert!(k.iter().all(|x| (-3.0..4.0).contains(x)));
        let bytes = sample(6, &[n], DType::U8, Distribution::Integers { from: 0, to: None });
        assert!(bytes.iter().all(|x| (0.0..256.0).contains(x)) && bytes.iter().any(|x| *x > 250.0));
        let big = default_device()
            .unwrap()
            .sample((7, 5), &[1000], DType::I64, Distribution::Integers { from: 1 << 60, to: Some((1 << 60) + 10) })
            .unwrap()
            .to_vec::<i64>()
            .unwrap();
        assert!(big.iter().all(|x| ((1 << 60)..(1 << 60) + 10).contains(x)), "{:?}", &big[..5]);
        let distinct: std::collections::BTreeSet<i64> = big.iter().copied().collect();
        assert_eq!(distinct.len(), 10, "every integer of [2^60, 2^60 + 10) is drawn: {distinct:?}");
    }
}

all_modes! {
    fn bernoulli_of_probabilities_and_masked_scale() {
        let p = Host::new(DType::F32, &[4, 1000], [0.0, 1.0, 0.5, 0.9].iter().flat_map(|p| [*p; 1000]).collect());
        let b = Host::of(&p.tensor().bernoulli((8, 1)).unwrap());
        assert_eq!(b.dtype, DType::F32);
        let share = |row: usize| b.data[row * 1000..(row + 1) * 1000].iter().sum::<f64>() / 1000.0;
        assert_eq!((share(0), share(1)), (0.0, 1.0), "p = 0 and 1 are exact");
        assert!((share(2) - 0.5).abs() < 0.06 && (share(3) - 0.9).abs() < 0.04);
        let x = Host::new(DType::F32, &[4], vec![1.0, -2.0, 3.0, 4.0]);
        let mask = Tensor::from_slice(&[true, false, true, false], &[4]).unwrap();
        let got = x.tensor().masked_scale(&mask, 2.5).unwrap();
        assert_close("masked_scale", &got, &Host::new(DType::F32, &[4], vec![2.5, 0.0, 7.5, 0.0]));
    }
}

#[test]
fn bad_parameters_are_named() {
    // Its checks compile programs another test counts.
    let _serial = one_at_a_time();
    let device = default_device().unwrap();
    let bad = |d, dtype| device.sample((1, 1), &[3], dtype, d);
    assert_err(
        bad(Distribution::Uniform { from: 2.0, to: 1.0 }, DType::F32),
        "uniform",
        &["from <= to"],
    );
    assert_err(
        bad(
            Distribution::Normal {
                mean: 0.0,
                std: -1.0,
            },
            DType::F32,
        ),
        "normal",
        &["std >= 0"],
    );
    assert_err(
        bad(
            Distribution::Normal {
                mean: 0.0,
                std: 1.0,
            },
            DType::I64,
        ),
        "normal",
        &["int64", "floating-point"],
    );
    assert_err(
        bad(Distribution::Exponential { lambda: 0.0 }, DType::F32),
        "exponential",
        &["lambda > 0"],
    );
    assert_err(
        bad(Distribution::Bernoulli { p: 1.5 }, DType::F32),
        "bernoulli",
        &["p in [0, 1]"],
    );
    assert_err(
        bad(
            Distribution::Integers {
                from: 5,
                to: Some(2),
            },
            DType::I32,
        ),
        "integers",
        &["from < to"],
    );
    let mask = Tensor::from_slice(&[1.0f32], &[1]).unwrap();
    assert_err(mask.masked_scale(&mask, 2.0), "masked_scale", &["bool"]);
    let named = |name: &str, params: &[Scalar]| Distribution::from_name(name, params);
    assert!(named("gamma", &[]).is_none());
    assert_err(
        named("normal", &[Scalar::from(1.0)]).unwrap(),
        "normal",
        &["expected [2]"],
    );
    assert_err(
        named("integers", &[Scalar::from(1.5)]).unwrap(),
        "integers",
        &["expected an integer"],
    );
    assert_eq!(
        named("integers", &[Scalar::from(-1i64), Scalar::from(9i64)])
            .unwrap()
            .unwrap(),
        Distribution::Integers {
            from: -1,
            to: Some(9)
        }
    );
}
