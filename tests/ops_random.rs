//! Counter-based uniform random numbers: a draw is a function of its key
//! (same key, same samples; another key, other samples), the samples are
//! uniform in [0, 1) by their moments and histogram, in every float dtype and
//! mode, and keys are parameters: drawing with 20 keys compiles one program,
//! and a loop drawing a new key every step still repeats as one chunk.

mod common;

use common::*;
use eagertpu::{DType, Metrics, Mode, Tensor, default_device};

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
    const STEPS: u64 = 300;
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
