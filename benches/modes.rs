//! The same workloads in every mode, side by side in one run:
//! - chain: 200 dependent elementwise ops on a [256] f32, then one host read;
//! - mlp: 784-512-512-10 ReLU MLP, batch 64, softmax cross-entropy, hand-written
//!   backward, AdamW, the loss read every step;
//! - tiny_mlp: the same with width 32 and batch 8;
//! - cold vs warm start: a fresh process's first mlp step with an empty, then a
//!   filled, on-disk compile cache;
//! - the cost curve of fused chunks (compile and execute time by size).
//!
//! Prints a table and writes `target/bench/modes.json`.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use eagertpu::internals::pjrt::{Buffer, Client, Executable, Placement, Plugin, locate};
use eagertpu::{DType, Metrics, Mode, Tensor};

const MODES: [Mode; 3] = [Mode::Debug, Mode::Strict, Mode::Fused];

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Deterministic pseudo-random floats.
fn data(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) as f32 * scale
        })
        .collect()
}

// ---------------------------------------------------------------- chain ----

struct ChainTimes {
    /// Ops per second, record to read.
    ops_per_s: f64,
    /// Seconds per op spent recording (and, in strict mode, enqueuing).
    record_per_op: f64,
}

fn chain_once(x: &Tensor) -> (Duration, Duration) {
    let start = Instant::now();
    let mut y = x.clone();
    for _ in 0..50 {
        y = (&y * 1.0001).unwrap();
        y = (&y + 0.5).unwrap();
        y = y.tanh().unwrap();
        y = (&y - x).unwrap();
    }
    let recorded = start.elapsed();
    std::hint::black_box(y.to_vec::<f32>().unwrap());
    (recorded, start.elapsed())
}

fn chain(mode: Mode) -> ChainTimes {
    let _m = eagertpu::with_mode(mode).unwrap();
    let x = Tensor::from_slice(&data(256, 1, 1.0), &[256]).unwrap();
    settle(|| {
        chain_once(&x);
    });
    let runs: Vec<(Duration, Duration)> = (0..40).map(|_| chain_once(&x)).collect();
    let total = median(runs.iter().map(|r| r.1.as_secs_f64()).collect());
    let record = median(runs.iter().map(|r| r.0.as_secs_f64()).collect());
    ChainTimes {
        ops_per_s: 200.0 / total,
        record_per_op: record / 200.0,
    }
}

// ------------------------------------------------------------------ mlp ----

struct Adam {
    m: Tensor,
    v: Tensor,
}

struct Mlp {
    params: Vec<Tensor>,
    state: Vec<Adam>,
    step: i32,
}

impl Mlp {
    fn new(sizes: &[i64]) -> Mlp {
        let mut params = vec![];
        for (i, w) in sizes.windows(2).enumerate() {
            let scale = (2.0 / w[0] as f32).sqrt();
            params.push(
                Tensor::from_slice(
                    &data((w[0] * w[1]) as usize, 10 + i as u64, scale),
                    &[w[0], w[1]],
                )
                .unwrap(),
            );
            params.push(Tensor::zeros(&[w[1]], DType::F32).unwrap());
        }
        let state = params
            .iter()
            .map(|p| Adam {
                m: p.zeros_like().unwrap(),
                v: p.zeros_like().unwrap(),
            })
            .collect();
        Mlp {
            params,
            state,
            step: 0,
        }
    }

    /// One training step; returns the loss (read on the host).
    fn step(&mut self, x: &Tensor, y: &Tensor, onehot: &Tensor) -> f32 {
        let batch = x.shape()[0] as f64;
        let layers = self.params.len() / 2;
        // Forward, keeping what the backward pass needs.
        let mut acts = vec![x.clone()];
        let mut pres = vec![];
        for l in 0..layers {
            let pre =
                (&acts[l].matmul(&self.params[2 * l]).unwrap() + &self.params[2 * l + 1]).unwrap();
            let act = if l + 1 < layers {
                pre.relu().unwrap()
            } else {
                pre.clone()
            };
            pres.push(pre);
            acts.push(act);
        }
        let logits = &acts[layers];
        let loss = logits.cross_entropy(y).unwrap();
        // Backward.
        let mut grads = vec![None; self.params.len()];
        let mut d = ((&logits.softmax(1).unwrap() - onehot).unwrap() / batch).unwrap();
        for l in (0..layers).rev() {
            grads[2 * l] = Some(acts[l].t().unwrap().matmul(&d).unwrap());
            grads[2 * l + 1] = Some(d.sum(&[0], false).unwrap());
            if l > 0 {
                let dh = d.matmul(&self.params[2 * l].t().unwrap()).unwrap();
                let mask = pres[l - 1].gt(0.0).unwrap().to_dtype(DType::F32).unwrap();
                d = (&dh * &mask).unwrap();
            }
        }
        // AdamW.
        self.step += 1;
        let (lr, b1, b2, eps, wd) = (1e-3, 0.9, 0.999, 1e-8, 1e-2);
        let c1 = 1.0 - f64::powi(b1, self.step);
        let c2 = 1.0 - f64::powi(b2, self.step);
        for (i, g) in grads.into_iter().enumerate() {
            let g = g.unwrap();
            let s = &mut self.state[i];
            s.m = (&(&s.m * b1).unwrap() + &(&g * (1.0 - b1)).unwrap()).unwrap();
            s.v = (&(&s.v * b2).unwrap() + &(&(&g * &g).unwrap() * (1.0 - b2)).unwrap()).unwrap();
            let mhat = (&s.m / c1).unwrap();
            let vhat = (&s.v / c2).unwrap();
            let upd = (&mhat / &(&vhat.sqrt().unwrap() + eps).unwrap()).unwrap();
            let p = &self.params[i];
            let decayed = (p * (1.0 - lr * wd)).unwrap();
            self.params[i] = (&decayed - &(&upd * lr).unwrap()).unwrap();
        }
        loss.item::<f32>().unwrap()
    }
}

fn mlp_data(batch: i64) -> (Tensor, Tensor, Tensor) {
    let x = Tensor::from_slice(&data((batch * 784) as usize, 3, 1.0), &[batch, 784]).unwrap();
    let labels: Vec<i64> = (0..batch).map(|i| (i * 7) % 10).collect();
    let y = Tensor::from_slice(&labels, &[batch]).unwrap();
    let classes = Tensor::arange(0, 10, 1).unwrap();
    let onehot = y
        .unsqueeze(1)
        .unwrap()
        .eq(&classes)
        .unwrap()
        .to_dtype(DType::F32)
        .unwrap();
    (x, y, onehot)
}

struct MlpTimes {
    ms_per_step: f64,
    compiles_after_warmup: u64,
}

fn mlp(mode: Mode, width: i64, batch: i64, steps: usize) -> MlpTimes {
    let _m = eagertpu::with_mode(mode).unwrap();
    let (x, y, onehot) = mlp_data(batch);
    let mut model = Mlp::new(&[784, width, width, 10]);
    settle(|| {
        model.step(&x, &y, &onehot);
    });
    let before = eagertpu::metrics().unwrap();
    let times: Vec<f64> = (0..steps)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(model.step(&x, &y, &onehot));
            t.elapsed().as_secs_f64()
        })
        .collect();
    let after = eagertpu::metrics().unwrap();
    MlpTimes {
        ms_per_step: median(times) * 1e3,
        compiles_after_warmup: loads(&after) - loads(&before),
    }
}

fn loads(m: &Metrics) -> u64 {
    m.misses + m.disk_hits
}

/// Warms a loop up until its chunks have settled, as a user's loop does:
/// rounds of five iterations, each followed by waiting for the background
/// compiles it queued (a chunk compiles once it has been seen twice), until a
/// round loads no new program (at most ten rounds). A fixed number of
/// warm-up steps timed a loop still running op by op on a cold cache.
fn settle(mut iteration: impl FnMut()) {
    for _ in 0..10 {
        let before = loads(&eagertpu::metrics().unwrap());
        for _ in 0..5 {
            iteration();
        }
        eagertpu::wait_for_compiles().unwrap();
        if loads(&eagertpu::metrics().unwrap()) == before {
            break;
        }
    }
}

// ---------------------------------------------------------- cold / warm ----

/// In a child process: time from start to the end of the first mlp step.
fn child_first_step() {
    let start = Instant::now();
    let (x, y, onehot) = mlp_data(64);
    let mut model = Mlp::new(&[784, 512, 512, 10]);
    model.step(&x, &y, &onehot);
    println!("FIRST_STEP_MS {:.3}", start.elapsed().as_secs_f64() * 1e3);
}

fn first_step_ms(cache_dir: &Path) -> f64 {
    let out = Command::new(std::env::current_exe().unwrap())
        .arg("--child-first-step")
        .env("EAGERTPU_CACHE_DIR", cache_dir)
        .env("EAGERTPU_MODE", "fused")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("FIRST_STEP_MS "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "child failed: {text}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
}

// ----------------------------------------------------------- cost curve ----

/// Compile and execute+await time of one fused program.
fn cost(
    client: &Client,
    graph: &eagertpu::internals::fusion::Graph,
    inputs: &[Buffer],
) -> (f64, f64) {
    let text = eagertpu::internals::fusion::lower::lower(graph);
    let device = client.device(0).unwrap();
    let t = Instant::now();
    let exe =
        Executable::compile(client, &text, &client.compile_options(Placement::Portable)).unwrap();
    let compile = t.elapsed().as_secs_f64();
    let refs: Vec<&Buffer> = inputs.iter().collect();
    let mut runs = vec![];
    for i in 0..30 {
        let t = Instant::now();
        let (out, done) = exe.execute(&refs, &device).unwrap();
        if let Some(done) = done {
            done.wait().unwrap();
        }
        drop(out);
        if i >= 5 {
            runs.push(t.elapsed().as_secs_f64());
        }
    }
    (compile, median(runs))
}

fn cost_curve() -> Vec<String> {
    use eagertpu::internals::fusion::{BinaryOp, Graph, Op, TensorType, UnaryOp};
    let located = locate::resolve(std::env::var("EAGERTPU_PJRT_PLUGIN").ok().as_deref()).unwrap();
    let client = Client::create(Plugin::load(&located.path).unwrap(), &[]).unwrap();
    let device = client.device(0).unwrap();
    let upload = |v: &[f32], dims: &[i64]| {
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        Buffer::from_host(&device, DType::F32, dims, &bytes).unwrap()
    };
    let mut rows = vec![];
    for n in [1usize, 10, 100, 1000] {
        let mut g = Graph::new();
        let x = g.param(TensorType::new(DType::F32, &[256]));
        let mut y = x;
        for i in 0..n {
            y = match i % 3 {
                0 => g.push(Op::Unary(UnaryOp::Tanh), &[y]).unwrap(),
                1 => g.push(Op::Binary(BinaryOp::Mul), &[y, x]).unwrap(),
                _ => g.push(Op::Binary(BinaryOp::Sub), &[y, x]).unwrap(),
            };
        }
        g.output(y);
        let (c, e) = cost(&client, &g, &[upload(&data(256, 5, 1.0), &[256])]);
        rows.push(format!(
            "  {n:>4} elementwise ops     compile {:>8.1} ms   execute {:>8.1} us",
            c * 1e3,
            e * 1e6
        ));
    }
    for layers in [1usize, 2, 4, 8] {
        let mut g = Graph::new();
        let x = g.param(TensorType::new(DType::F32, &[64, 512]));
        let mut inputs = vec![upload(&data(64 * 512, 6, 1.0), &[64, 512])];
        let mut h = x;
        for l in 0..layers {
            let w = g.param(TensorType::new(DType::F32, &[512, 512]));
            inputs.push(upload(&data(512 * 512, 7 + l as u64, 0.05), &[512, 512]));
            let m = g.push(Op::Matmul, &[h, w]).unwrap();
            h = g.push(Op::Unary(UnaryOp::Relu), &[m]).unwrap();
        }
        g.output(h);
        let (c, e) = cost(&client, &g, &inputs);
        rows.push(format!(
            "  {layers:>4} MLP layers (64x512) compile {:>8.1} ms   execute {:>8.1} us",
            c * 1e3,
            e * 1e6
        ));
    }
    rows
}

// ----------------------------------------------------------------- main ----

fn json_modes(values: &[f64; 3]) -> String {
    format!(
        "{{\"debug\": {:.3}, \"strict\": {:.3}, \"fused\": {:.3}}}",
        values[0], values[1], values[2]
    )
}

fn main() {
    if std::env::args().any(|a| a == "--child-first-step") {
        child_first_step();
        return;
    }
    // `cargo test --benches` runs benches with `--test`: keep it quick.
    if std::env::args().any(|a| a == "--test") {
        println!("modes bench: skipped under cargo test");
        return;
    }
    let chains: Vec<ChainTimes> = MODES.iter().map(|&m| chain(m)).collect();
    let mlps: Vec<MlpTimes> = MODES.iter().map(|&m| mlp(m, 512, 64, 15)).collect();
    let tinys: Vec<MlpTimes> = MODES.iter().map(|&m| mlp(m, 32, 8, 60)).collect();

    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("../bench/cold-start-cache");
    let _ = std::fs::remove_dir_all(&dir);
    let cold = first_step_ms(&dir);
    let warm = first_step_ms(&dir);
    let curve = cost_curve();

    let chain_ops = [
        chains[0].ops_per_s,
        chains[1].ops_per_s,
        chains[2].ops_per_s,
    ];
    let mlp_ms = [
        mlps[0].ms_per_step,
        mlps[1].ms_per_step,
        mlps[2].ms_per_step,
    ];
    let tiny_ms = [
        tinys[0].ms_per_step,
        tinys[1].ms_per_step,
        tinys[2].ms_per_step,
    ];
    let compiles_after_warmup: u64 = mlps
        .iter()
        .chain(&tinys)
        .map(|m| m.compiles_after_warmup)
        .sum();

    println!();
    println!("workload                     debug        strict       fused   fused/strict");
    println!(
        "chain (ops/s)          {:>11.0} {:>12.0} {:>11.0}   {:>6.2}x",
        chain_ops[0],
        chain_ops[1],
        chain_ops[2],
        chain_ops[2] / chain_ops[1]
    );
    println!(
        "mlp (ms/step)          {:>11.3} {:>12.3} {:>11.3}   {:>6.2}x",
        mlp_ms[0],
        mlp_ms[1],
        mlp_ms[2],
        mlp_ms[1] / mlp_ms[2]
    );
    println!(
        "tiny_mlp (ms/step)     {:>11.3} {:>12.3} {:>11.3}   {:>6.2}x",
        tiny_ms[0],
        tiny_ms[1],
        tiny_ms[2],
        tiny_ms[1] / tiny_ms[2]
    );
    println!(
        "strict enqueue: {:.2} us/op; fused recording: {:.2} us/op",
        chains[1].record_per_op * 1e6,
        chains[2].record_per_op * 1e6
    );
    println!(
        "first mlp step in a fresh process: cold {cold:.1} ms, warm {warm:.1} ms (warm/cold {:.1}%)",
        warm / cold * 100.0
    );
    println!(
        "programs compiled or loaded after warm-up (mlp, tiny_mlp, all modes): {compiles_after_warmup}"
    );
    println!("\ncost of one fused chunk on this plugin:");
    for row in &curve {
        println!("{row}");
    }

    let json = format!(
        "{{\"chain\": {}, \"mlp\": {}, \"tiny_mlp\": {}, \"cold_start_ms\": {cold:.3}, \"warm_start_ms\": {warm:.3}, \"compiles_after_warmup\": {compiles_after_warmup}}}\n",
        json_modes(&chain_ops),
        json_modes(&mlp_ms),
        json_modes(&tiny_ms)
    );
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("../bench");
    let _ = std::fs::create_dir_all(&out);
    std::fs::write(out.join("modes.json"), &json).unwrap();
    print!("\n{json}");
    eagertpu::shutdown().unwrap();
}
