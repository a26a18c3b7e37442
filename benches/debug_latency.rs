//! Debug-mode latency: one `[256]` f32 add through the Tensor API, next to the
//! raw PJRT execute + await of the same program on the same plugin, in the
//! same run; the compile time of that op; the compile-cache hit path.
//!
//! `make bench` runs this and prints a summary (also written to
//! `target/bench/debug.json`). Target: debug mode adds at most 2 us per op.
//!
//! Also the floor of a host read on this plugin: the raw execute + await of
//! a program the XLA CPU plugin runs inline on the calling thread (under its
//! cost model's 1,000 flops) next to one it hands to its worker threads, each
//! called after a pause as long as a small step's recording (the worker has
//! gone to sleep by then, as it has when a training loop reads its loss).

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::Criterion;
use eagertpu::internals::pjrt::{Buffer, Client, Executable, Placement, Plugin, locate};
use eagertpu::{DType, Tensor};

const N: i64 = 256;

/// Ops of the dispatched program: 8 elementwise ops over `[N]` are 2,048
/// flops, over the plugin's inline threshold.
const DISPATCHED_OPS: usize = 8;

/// The pause before each call of the `dispatch` group: a small training
/// step's recording.
const PAUSE: Duration = Duration::from_micros(300);

fn benches(c: &mut Criterion) {
    let _debug = eagertpu::with_mode(eagertpu::Mode::Debug).unwrap();
    let data: Vec<f32> = (0..N).map(|i| i as f32 * 0.5).collect();
    let a = Tensor::from_slice(&data, &[N]).unwrap();
    let b = Tensor::from_slice(&data, &[N]).unwrap();
    let (graph, text) = runtime_hooks::add_program(N);

    // The raw path: a client of its own on the same plugin, the same program.
    let located = locate::resolve(std::env::var("EAGERTPU_PJRT_PLUGIN").ok().as_deref()).unwrap();
    let plugin = Plugin::load(&located.path).unwrap();
    let client = Client::create(plugin, &[]).unwrap();
    let device = client.device(0).unwrap();
    let exe =
        Executable::compile(&client, &text, &client.compile_options(Placement::Portable)).unwrap();
    let bytes: Vec<u8> = data.iter().flat_map(|x| x.to_le_bytes()).collect();
    let ra = Buffer::from_host(&device, DType::F32, &[N], &bytes).unwrap();
    let rb = Buffer::from_host(&device, DType::F32, &[N], &bytes).unwrap();

    let mut g = c.benchmark_group("debug");
    g.bench_function("eagertpu_add_256", |bench| {
        bench.iter(|| black_box(a.add(&b).unwrap()))
    });
    g.bench_function("raw_pjrt_execute_await_256", |bench| {
        bench.iter(|| {
            let (out, done) = exe.execute(&[&ra, &rb], &device).unwrap();
            if let Some(done) = done {
                done.wait().unwrap();
            }
            black_box(out)
        })
    });
    g.bench_function("cache_hit_256", |bench| {
        bench.iter(|| runtime_hooks::cache_get(black_box(&graph)).unwrap())
    });
    g.finish();

    // One pause of a step's recording between calls (not timed).
    let mut g = c.benchmark_group("dispatch");
    let dispatched = Executable::compile(
        &client,
        &runtime_hooks::elementwise_chain_program(N, DISPATCHED_OPS),
        &client.compile_options(Placement::Portable),
    )
    .unwrap();
    for (name, exe, inputs) in [
        ("inline_after_pause", &exe, vec![&ra, &rb]),
        ("dispatched_after_pause", &dispatched, vec![&ra]),
    ] {
        g.bench_function(name, |bench| {
            bench.iter_custom(|iters| {
                let mut timed = Duration::ZERO;
                for _ in 0..iters {
                    let pause = Instant::now();
                    while pause.elapsed() < PAUSE {
                        std::hint::spin_loop();
                    }
                    let start = Instant::now();
                    let (out, done) = exe.execute(&inputs, &device).unwrap();
                    if let Some(done) = done {
                        done.wait().unwrap();
                    }
                    timed += start.elapsed();
                    black_box(out);
                }
                timed
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("compile");
    g.sample_size(10);
    g.bench_function("compile_add_256", |bench| {
        bench.iter(|| {
            black_box(
                Executable::compile(&client, &text, &client.compile_options(Placement::Portable))
                    .unwrap(),
            )
        })
    });
    g.finish();
}

use eagertpu::internals::bench_hooks as runtime_hooks;

/// Median time of one criterion benchmark, in ns (robust on a noisy machine).
fn median_ns(group: &str, name: &str) -> Option<f64> {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("../criterion")
        .join(group)
        .join(name)
        .join("new/estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    let i = text.find("\"median\"")?;
    let rest = &text[i..];
    let j = rest.find("\"point_estimate\":")? + "\"point_estimate\":".len();
    rest[j..].split([',', '}']).next()?.trim().parse().ok()
}

fn summary() {
    let op = median_ns("debug", "eagertpu_add_256");
    let raw = median_ns("debug", "raw_pjrt_execute_await_256");
    let hit = median_ns("debug", "cache_hit_256");
    let compile = median_ns("compile", "compile_add_256");
    let (Some(op), Some(raw), Some(hit), Some(compile)) = (op, raw, hit, compile) else {
        println!("(summary skipped: run all benchmarks to get one)");
        return;
    };
    let overhead = op - raw;
    println!();
    println!("debug mode, one [256] f32 add        median");
    println!("  eagertpu (record..execute..await)  {:>9.2} us", op / 1e3);
    println!("  raw PJRT execute + await           {:>9.2} us", raw / 1e3);
    println!(
        "  overhead over raw PJRT             {:>9.2} us  (target <= 2 us)  ratio {:.2}x",
        overhead / 1e3,
        op / raw
    );
    println!("  compile-cache hit                  {:>9.2} us", hit / 1e3);
    println!(
        "  compile one op                     {:>9.2} ms",
        compile / 1e6
    );
    let inline = median_ns("dispatch", "inline_after_pause").unwrap_or(f64::NAN);
    let dispatched = median_ns("dispatch", "dispatched_after_pause").unwrap_or(f64::NAN);
    println!(
        "a host read's floor, raw execute + await after a {} us pause:",
        PAUSE.as_micros()
    );
    println!(
        "  run inline (the [256] add)         {:>9.2} us",
        inline / 1e3
    );
    println!(
        "  run by the plugin's workers ({DISPATCHED_OPS} ops) {:>9.2} us",
        dispatched / 1e3
    );
    let json = format!(
        "{{\"eagertpu_add_us\": {:.3}, \"raw_pjrt_us\": {:.3}, \"overhead_us\": {:.3}, \"ratio\": {:.3}, \"cache_hit_us\": {:.3}, \"compile_ms\": {:.3}, \"raw_inline_after_pause_us\": {:.3}, \"raw_dispatched_after_pause_us\": {:.3}}}\n",
        op / 1e3,
        raw / 1e3,
        overhead / 1e3,
        op / raw,
        hit / 1e3,
        compile / 1e6,
        inline / 1e3,
        dispatched / 1e3
    );
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("../bench");
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(dir.join("debug.json"), &json);
    print!("{json}");
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    benches(&mut c);
    c.final_summary();
    summary();
    eagertpu::shutdown().unwrap();
}
