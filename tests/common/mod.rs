//! Test harness: host arrays, deterministic random data, and comparison of a
//! device result against a host reference computed with plain loops.
//!
//! A `Host` keeps its elements as f64 (exact for every dtype we test: ints are
//! kept in ranges f64 represents exactly), already rounded to its dtype.

#![allow(dead_code)]

use eagertpu::{DType, Tensor};
use half::{bf16, f16};

pub const FLOATS: [DType; 4] = [DType::F32, DType::F64, DType::F16, DType::BF16];
pub const INTS: [DType; 5] = [DType::I8, DType::I16, DType::I32, DType::I64, DType::U8];
pub const ALL: [DType; 10] = [
    DType::F32,
    DType::F64,
    DType::F16,
    DType::BF16,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::Bool,
];

/// Every numeric (non-bool) dtype.
pub fn numeric() -> Vec<DType> {
    FLOATS.iter().chain(INTS.iter()).copied().collect()
}

/// `x` as stored in `dtype`: floats rounded, ints wrapped, bools 0/1 (a
/// complex dtype's `x` is one of its parts).
pub fn round(dtype: DType, x: f64) -> f64 {
    match dtype {
        DType::F64 | DType::C128 => x,
        DType::F32 | DType::C64 => x as f32 as f64,
        DType::F16 => f16::from_f64(x).to_f64(),
        DType::BF16 => bf16::from_f64(x).to_f64(),
        DType::I8 => x as i64 as i8 as f64,
        DType::I16 => x as i64 as i16 as f64,
        DType::I32 => x as i64 as i32 as f64,
        DType::I64 => x as i64 as f64,
        DType::U8 => x as i64 as u8 as f64,
        DType::Bool => (x != 0.0) as u8 as f64,
    }
}

/// A small deterministic generator (splitmix64).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform integer in `[lo, hi]`.
    pub fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as i64
    }
}

/// A host array: dtype, shape, elements (row-major) as f64.
#[derive(Clone, Debug, PartialEq)]
pub struct Host {
    pub dtype: DType,
    pub shape: Vec<i64>,
    pub data: Vec<f64>,
}

pub fn numel(shape: &[i64]) -> usize {
    shape.iter().product::<i64>() as usize
}

pub fn strides(shape: &[i64]) -> Vec<i64> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// The multi-index of flat position `flat` in `shape`.
pub fn unravel(mut flat: usize, shape: &[i64]) -> Vec<i64> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        let s = shape[d] as usize;
        if s > 0 {
            idx[d] = (flat % s) as i64;
            flat /= s;
        }
    }
    idx
}

/// The flat position of `idx` in `shape`.
pub fn ravel(idx: &[i64], shape: &[i64]) -> usize {
    idx.iter()
        .zip(strides(shape))
        .map(|(i, s)| i * s)
        .sum::<i64>() as usize
}

/// NumPy broadcasting of two shapes (panics if they do not broadcast).
pub fn broadcast(a: &[i64], b: &[i64]) -> Vec<i64> {
    let r = a.len().max(b.len());
    (0..r)
        .map(|i| {
            let da = if i + a.len() >= r {
                a[i + a.len() - r]
            } else {
                1
            };
            let db = if i + b.len() >= r {
                b[i + b.len() - r]
            } else {
                1
            };
            assert!(da == db || da == 1 || db == 1, "{a:?} vs {b:?}");
            da.max(db)
        })
        .collect()
}

/// The flat position in an array of `shape` read by output index `out_idx`
/// under broadcasting (size-1 and missing leading dims repeat).
pub fn broadcast_source(out_idx: &[i64], shape: &[i64]) -> usize {
    let lead = out_idx.len() - shape.len();
    let idx: Vec<i64> = (0..shape.len())
        .map(|d| if shape[d] == 1 { 0 } else { out_idx[lead + d] })
        .collect();
    ravel(&idx, shape)
}

impl Host {
    /// An array of `dtype` holding `data` (rounded to the dtype).
    pub fn new(dtype: DType, shape: &[i64], data: Vec<f64>) -> Host {
        assert_eq!(data.len(), numel(shape), "data for shape {shape:?}");
        Host {
            dtype,
            shape: shape.to_vec(),
            data: data.into_iter().map(|x| round(dtype, x)).collect(),
        }
    }

    /// Random values suited to `dtype`: floats in [-3, 3), signed ints in
    /// [-20, 20], u8 in [0, 40], bools half true.
    pub fn random(dtype: DType, shape: &[i64], seed: u64) -> Host {
        let (lo, hi) = match dtype {
            d if d.is_float() => (-3.0, 3.0),
            DType::U8 => (0.0, 40.0),
            DType::Bool => (0.0, 1.0),
            _ => (-20.0, 20.0),
        };
        Host::random_in(dtype, shape, seed, lo, hi)
    }

    /// Random values in `[lo, hi]` (integers for int and bool dtypes).
    pub fn random_in(dtype: DType, shape: &[i64], seed: u64, lo: f64, hi: f64) -> Host {
        let mut rng = Rng::new(seed);
        let data = (0..numel(shape))
            .map(|_| {
                if dtype.is_float() {
                    rng.uniform(lo, hi)
                } else {
                    rng.int(lo as i64, hi as i64) as f64
                }
            })
            .collect();
        Host::new(dtype, shape, data)
    }

    pub fn numel(&self) -> usize {
        self.data.len()
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    pub fn at(&self, idx: &[i64]) -> f64 {
        self.data[ravel(idx, &self.shape)]
    }

    /// Elementwise `f`, result in `dtype` (rounded).
    pub fn map(&self, dtype: DType, f: impl Fn(f64) -> f64) -> Host {
        Host::new(
            dtype,
            &self.shape,
            self.data.iter().map(|&x| f(x)).collect(),
        )
    }

    /// The array on the default device, in its dtype.
    pub fn tensor(&self) -> Tensor {
        let s = &self.shape;
        let d = &self.data;
        let t = match self.dtype {
            DType::F32 => Tensor::from_slice(&d.iter().map(|&x| x as f32).collect::<Vec<_>>(), s),
            DType::F64 => Tensor::from_slice(d, s),
            DType::F16 => {
                Tensor::from_slice(&d.iter().map(|&x| f16::from_f64(x)).collect::<Vec<_>>(), s)
            }
            DType::BF16 => {
                Tensor::from_slice(&d.iter().map(|&x| bf16::from_f64(x)).collect::<Vec<_>>(), s)
            }
            DType::I8 => Tensor::from_slice(&d.iter().map(|&x| x as i8).collect::<Vec<_>>(), s),
            DType::I16 => Tensor::from_slice(&d.iter().map(|&x| x as i16).collect::<Vec<_>>(), s),
            DType::I32 => Tensor::from_slice(&d.iter().map(|&x| x as i32).collect::<Vec<_>>(), s),
            DType::I64 => Tensor::from_slice(&d.iter().map(|&x| x as i64).collect::<Vec<_>>(), s),
            DType::U8 => Tensor::from_slice(&d.iter().map(|&x| x as u8).collect::<Vec<_>>(), s),
            DType::Bool => Tensor::from_slice(&d.iter().map(|&x| x != 0.0).collect::<Vec<_>>(), s),
            // Complex data is (real, imaginary) pairs, as `of` reads it.
            DType::C64 => Tensor::from_slice(
                &d.chunks(2)
                    .map(|p| eagertpu::Complex32::new(p[0] as f32, p[1] as f32))
                    .collect::<Vec<_>>(),
                s,
            ),
            DType::C128 => Tensor::from_slice(
                &d.chunks(2)
                    .map(|p| eagertpu::Complex64::new(p[0], p[1]))
                    .collect::<Vec<_>>(),
                s,
            ),
        };
        t.unwrap_or_else(|e| panic!("uploading {:?}{:?}: {e}", self.dtype, self.shape))
    }

    /// Reads a device tensor back.
    pub fn of(t: &Tensor) -> Host {
        let data = t
            .to_f64_vec()
            .unwrap_or_else(|e| panic!("reading {t:?}: {e}"));
        Host {
            dtype: t.dtype(),
            shape: t.shape().to_vec(),
            data,
        }
    }
}

/// The gradient of `f` at `x` by central differences of step `h`.
pub fn central_differences(x: &[f64], h: f64, f: impl Fn(&[f64]) -> f64) -> Vec<f64> {
    let mut xs = x.to_vec();
    (0..xs.len())
        .map(|i| {
            let v = xs[i];
            xs[i] = v + h;
            let up = f(&xs);
            xs[i] = v - h;
            let down = f(&xs);
            xs[i] = v;
            (up - down) / (2.0 * h)
        })
        .collect()
}

/// (relative, absolute) tolerance for results of `dtype`, for ops that round
/// more than once (transcendentals, sums).
pub fn tolerance(dtype: DType) -> (f64, f64) {
    match dtype {
        DType::F64 => (1e-12, 1e-12),
        DType::F32 => (2e-5, 1e-6),
        DType::F16 => (4e-3, 2e-3),
        DType::BF16 => (3e-2, 2e-2),
        _ => (0.0, 0.0),
    }
}

/// Asserts `got` has `want`'s dtype and shape and its values within the
/// dtype's tolerance (exactly for ints and bools; NaN matches NaN).
pub fn assert_close(what: &str, got: &Tensor, want: &Host) {
    assert_close_tol(what, got, want, tolerance(want.dtype));
}

pub fn assert_close_tol(what: &str, got: &Tensor, want: &Host, (rtol, atol): (f64, f64)) {
    assert_eq!(got.dtype(), want.dtype, "{what}: dtype");
    assert_eq!(got.shape(), want.shape.as_slice(), "{what}: shape");
    let g = Host::of(got);
    let mut bad = vec![];
    for (i, (&a, &b)) in g.data.iter().zip(&want.data).enumerate() {
        let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= atol + rtol * b.abs();
        if !ok {
            bad.push((i, a, b));
        }
    }
    assert!(
        bad.is_empty(),
        "{what} ({:?}{:?}): {} of {} elements differ, first (index, got, want): {:?}",
        want.dtype,
        want.shape,
        bad.len(),
        want.data.len(),
        &bad[..bad.len().min(5)]
    );
}

/// The error message of a failed op (panics if it succeeded).
pub fn err_text<T: std::fmt::Debug>(r: eagertpu::Result<T>) -> String {
    match r {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e.to_string(),
    }
}

/// A command re-running this test binary on the test `name` only, with the
/// runtime's variables cleared, the compile cache off, then `env` (the
/// runtime reads the environment once, when it starts).
pub fn child_command(name: &str, env: &[(&str, &str)]) -> std::process::Command {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", name, "--nocapture", "--test-threads=1"]);
    cmd.env("EAGERTPU_TEST_CHILD", name);
    // Children never touch the user's compile cache.
    cmd.env("EAGERTPU_CACHE_DIR", "off");
    for var in [
        "EAGERTPU_MODE",
        "EAGERTPU_PJRT_PLUGIN",
        "EAGERTPU_DEVICE_COUNT",
        "EAGERTPU_CHECK_NAN",
        "EAGERTPU_LOG",
        "EAGERTPU_CHECK_HAZARDS",
        "EAGERTPU_XLA_OPTIONS",
        "EAGERTPU_CACHE_READONLY",
        "EAGERTPU_CACHE_MAX_BYTES",
        "EAGERTPU_COMPILE_THREADS",
        "EAGERTPU_HOT_THRESHOLD",
        "EAGERTPU_WINDOW",
        "EAGERTPU_REPLAY",
        "EAGERTPU_COLLECTIVE_TIMEOUT",
        "EAGERTPU_WAIT_SPIN_US",
        "EAGERTPU_CPU_HEAP",
    ] {
        cmd.env_remove(var);
    }
    // Children compile on the recording thread, so that the counts they
    // print never depend on when a background compile finishes: tests of the
    // compile pool ask for threads (and one checks that a child exiting
    // mid-compile exits cleanly).
    cmd.env("EAGERTPU_COMPILE_THREADS", "0");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// Runs the test `name` in a child process (`child_command`); whether it
/// succeeded, and its output.
pub fn child(name: &str, env: &[(&str, &str)]) -> (bool, String) {
    outcome(child_command(name, env).output().unwrap())
}

/// Whether a child succeeded, and its stdout then stderr.
fn outcome(out: std::process::Output) -> (bool, String) {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// `child`, failing the test if the child has not exited after `limit` (a
/// hang, at exit or anywhere, fails the test instead of stalling the run).
pub fn child_within(
    name: &str,
    env: &[(&str, &str)],
    limit: std::time::Duration,
) -> (bool, String) {
    use std::process::Stdio;
    let mut process = child_command(name, env)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while process.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = process.kill();
            let (_, text) = outcome(process.wait_with_output().unwrap());
            panic!("{name} did not exit within {limit:?}:\n{text}");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    outcome(process.wait_with_output().unwrap())
}

/// True in the child process that should run `name`'s body.
pub fn is_child(name: &str) -> bool {
    std::env::var("EAGERTPU_TEST_CHILD").as_deref() == Ok(name)
}

/// For a test whose body runs in a child process of its own (it counts
/// process-wide metrics): true in that child, which then runs the body; in
/// the parent, runs the child with `env`, asserts that it passed, and
/// returns false.
pub fn body_runs_here(name: &str, env: &[(&str, &str)]) -> bool {
    if is_child(name) {
        return true;
    }
    let (ok, out) = child(name, env);
    assert!(ok, "{out}");
    false
}

pub mod builders;

static MODE_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Holds the mode for one test: the mode is restored, then the lock released.
pub struct InMode {
    _mode: eagertpu::ModeGuard,
    _lock: std::sync::MutexGuard<'static, ()>,
}

/// Runs the rest of a test in `mode`, one such test at a time (the mode is
/// process-wide). Compiles an earlier test queued on the background pool
/// finish first, so that none is counted in this test's metrics.
pub fn in_mode(mode: eagertpu::Mode) -> InMode {
    let lock = one_at_a_time();
    eagertpu::wait_for_compiles().unwrap();
    InMode {
        _mode: eagertpu::with_mode(mode).unwrap(),
        _lock: lock,
    }
}

/// Runs the rest of a test alone among the tests that switch modes (each
/// of which counts process-wide metrics): for a test that reads the host
/// but keeps the mode it found.
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    MODE_LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The three execution modes, in the order `all_modes!` runs them.
pub const MODES: [eagertpu::Mode; 3] = [
    eagertpu::Mode::Debug,
    eagertpu::Mode::Strict,
    eagertpu::Mode::Fused,
];

/// Declares a test that runs its body once in each mode (debug, strict,
/// fused), one mode-switching test at a time.
#[macro_export]
macro_rules! all_modes {
    ($(#[$meta:meta])* fn $name:ident() $body:block) => {
        $(#[$meta])*
        #[test]
        fn $name() {
            for mode in $crate::common::MODES {
                let _mode = $crate::common::in_mode(mode);
                let run = || $body;
                run();
            }
        }
    };
}

/// Runs `body` until the fused chunks it cuts are compiled (a chunk runs op
/// by op until seen twice, then compiles in the background), then once more:
/// the last run's result.
pub fn warmed<T>(mut body: impl FnMut() -> T) -> T {
    body();
    body();
    eagertpu::wait_for_compiles().unwrap();
    body()
}

/// Asserts that the launches between the metrics `before` and `after`
/// updated some input in place and gave no update fresh memory because of a
/// reader.
pub fn assert_updated_in_place(before: &eagertpu::Metrics, after: &eagertpu::Metrics) {
    assert_eq!(
        after.donations_blocked_by_readers,
        before.donations_blocked_by_readers,
        "{}",
        after.report()
    );
    assert!(
        after.donated_buffers > before.donated_buffers,
        "{}",
        after.report()
    );
}

/// Asserts that between the metrics `before` and `after` one program ran
/// and no host read cut the stream: a step whose read found its value
/// launched by the period's lead.
pub fn assert_one_launch_and_no_read_cut(before: &eagertpu::Metrics, after: &eagertpu::Metrics) {
    assert_eq!(
        (
            after.executions - before.executions,
            after.chunks_cut("host_read") - before.chunks_cut("host_read")
        ),
        (1, 0),
        "{}",
        after.report()
    );
}

/// Asserts `r` failed naming `op` and every word of `words`, and that the
/// next op still works.
pub fn assert_err<T: std::fmt::Debug>(r: eagertpu::Result<T>, op: &str, words: &[&str]) {
    let e = err_text(r);
    assert!(e.contains(op), "expected an error naming {op}: {e}");
    for w in words {
        assert!(e.contains(w), "expected {w:?} in: {e}");
    }
    // The next op works: a row sum, checked against the host.
    let x = Host::random(DType::F32, &[2, 3], 7);
    let got = x
        .tensor()
        .sum(&[1], false)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    for (r, g) in got.iter().enumerate() {
        let want: f64 = x.data[r * 3..r * 3 + 3].iter().sum();
        assert!(
            (*g as f64 - want).abs() < 1e-5,
            "sum after an error: row {r} = {g}, expected {want}"
        );
    }
}

/// The error function, by its Maclaurin series: to ~1e-13 for |x| <= 3.5
/// (a reference for host computations; it refuses larger inputs).
pub fn erf(x: f64) -> f64 {
    assert!(x.abs() <= 3.5, "erf reference used outside its range: {x}");
    let mut term = x;
    let mut sum = x;
    for n in 1..120 {
        term *= -x * x / n as f64;
        sum += term / (2 * n + 1) as f64;
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

// ------------------------------------------------ reductions on the host ----

/// Which dims of a rank-`rank` tensor `dims` reduces (all when empty);
/// normalized here, independently of the runtime.
pub fn reduced_mask(dims: &[i64], rank: usize) -> Vec<bool> {
    let r = rank.max(1) as i64;
    let mut mask = vec![dims.is_empty(); rank];
    for &d in dims {
        let d = if d < 0 { d + r } else { d };
        assert!((0..r).contains(&d), "bad dim in a test case");
        if rank > 0 {
            mask[d as usize] = true;
        }
    }
    mask
}

/// Reduces `x` over `dims` with `f`, which gets each group's elements in
/// increasing index order; the result is rounded to `out`.
pub fn host_reduce(
    x: &Host,
    dims: &[i64],
    keepdim: bool,
    out: DType,
    f: impl Fn(&[f64]) -> f64,
) -> Host {
    let mask = reduced_mask(dims, x.rank());
    let kept =
        |v: &[i64]| -> Vec<i64> { (0..x.rank()).filter(|&d| !mask[d]).map(|d| v[d]).collect() };
    let out_shape: Vec<i64> = (0..x.rank())
        .filter(|&d| !mask[d] || keepdim)
        .map(|d| if mask[d] { 1 } else { x.shape[d] })
        .collect();
    let mut groups = vec![vec![]; numel(&kept(&x.shape))];
    for (i, &v) in x.data.iter().enumerate() {
        groups[ravel(&kept(&unravel(i, &x.shape)), &kept(&x.shape))].push(v);
    }
    Host::new(out, &out_shape, groups.iter().map(|g| f(g)).collect())
}

/// amax: NaN propagates.
pub fn r_max(v: &[f64]) -> f64 {
    if v.iter().any(|x| x.is_nan()) {
        return f64::NAN;
    }
    v.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x))
}

pub fn check_tol(what: &str, got: eagertpu::Result<Tensor>, want: &Host, tol: (f64, f64)) {
    let got = got.unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_close_tol(what, &got, want, tol);
}

pub fn r_sum(v: &[f64]) -> f64 {
    v.iter().sum()
}

pub fn r_mean(v: &[f64]) -> f64 {
    r_sum(v) / v.len() as f64
}

pub fn r_var(v: &[f64], correction: f64) -> f64 {
    let m = r_mean(v);
    let ss: f64 = v.iter().map(|x| (x - m) * (x - m)).sum();
    ss / (v.len() as f64 - correction).max(0.0)
}

pub fn r_logsumexp(v: &[f64]) -> f64 {
    let m = r_max(v);
    if m.is_infinite() || m.is_nan() {
        return m;
    }
    m + v.iter().map(|x| (x - m).exp()).sum::<f64>().ln()
}

/// Tolerance for a long sum in `out`: each step rounds in the accumulator
/// (f32 for 16-bit floats), so that error scales with `scale` = sum |x|, not
/// with the result, which can cancel to ~0; then the result rounds once to
/// `out`, which tolerance() covers. 16-bit sums accumulated in 16 bits fail it.
pub fn acc_tol(out: DType, scale: f64) -> (f64, f64) {
    let acc = match out {
        DType::F16 | DType::BF16 => DType::F32,
        d => d,
    };
    let (rtol, atol) = tolerance(out);
    (rtol, atol + tolerance(acc).0 * scale)
}

/// `a` [m, n] row-major times `b` [n, p] on the host.
pub fn matmul_f64(a: &[f64], b: &[f64], m: usize, n: usize, p: usize) -> Vec<f64> {
    let mut out = vec![0.0; m * p];
    for i in 0..m {
        for j in 0..p {
            out[i * p + j] = (0..n).map(|k| a[i * n + k] * b[k * p + j]).sum();
        }
    }
    out
}

/// The transpose of `a` [m, n] row-major: [n, m] row-major.
pub fn transpose_f64(a: &[f64], m: usize, n: usize) -> Vec<f64> {
    (0..m * n).map(|p| a[(p % m) * n + p / m]).collect()
}
