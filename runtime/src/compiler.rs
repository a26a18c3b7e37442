//! The background compile pool: fused chunks that became hot are compiled off
//! the recording thread, into the one compile cache, while their ops keep
//! running one by one (`stream::tiers`). The queue is bounded: when it is
//! full a chunk is simply offered again the next time it is seen.

use std::collections::HashSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use crossbeam::channel::{Sender, TrySendError, bounded};
use fusion::Graph;

use crate::error::Error;
use crate::lock;
use crate::metrics::Counters;

/// Chunks waiting for a compile thread.
const QUEUE: usize = 64;

pub(crate) struct BackgroundCompiler {
    threads: usize,
    queue: OnceLock<Option<Sender<Graph>>>,
    /// Chunks (by graph hash) whose fused program failed to compile: they
    /// keep running op by op, where a failing op names itself.
    failed: Mutex<HashSet<u64>>,
    /// Chunks queued or compiling.
    unfinished: AtomicUsize,
    /// Chunks a compile thread is building now.
    compiling: AtomicUsize,
    /// Set at exit: queued chunks are dropped, not compiled.
    stopping: AtomicBool,
}

impl BackgroundCompiler {
    /// A pool of `threads` compile threads, started on first use (0: none;
    /// callers compile on their own thread).
    pub fn new(threads: usize) -> BackgroundCompiler {
        BackgroundCompiler {
            threads,
            queue: OnceLock::new(),
            failed: Mutex::default(),
            unfinished: AtomicUsize::new(0),
            compiling: AtomicUsize::new(0),
            stopping: AtomicBool::new(false),
        }
    }

    /// Whether chunks compile in the background.
    pub fn enabled(&self) -> bool {
        self.threads > 0
    }

    /// Queues `graph` to compile; false if the queue is full (or the pool
    /// could not start).
    pub fn submit(&self, graph: Graph) -> bool {
        if self.stopping.load(Ordering::Acquire) {
            return false;
        }
        let Some(queue) = self.queue.get_or_init(|| self.start()) else {
            return false;
        };
        self.unfinished.fetch_add(1, Ordering::AcqRel);
        match queue.try_send(graph) {
            Ok(()) => true,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.unfinished.fetch_sub(1, Ordering::AcqRel);
                false
            }
        }
    }

    /// Blocks until every queued chunk is compiled (for benchmarks and tests
    /// that measure a warmed-up loop).
    pub fn wait_idle(&self) {
        while self.unfinished.load(Ordering::Acquire) > 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Drops the queued chunks and waits for the compiles in progress: a
    /// process must not exit while a compile thread is inside the plugin.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
        self.wait_idle();
    }

    /// Chunks a compile thread is building now (queued ones not counted).
    pub fn compiling(&self) -> usize {
        self.compiling.load(Ordering::Acquire)
    }

    /// Whether the fused program of the chunk with graph hash `key` failed to
    /// compile.
    pub fn failed(&self, key: u64) -> bool {
        lock(&self.failed).contains(&key)
    }

    pub fn mark_failed(&self, key: u64) {
        lock(&self.failed).insert(key);
    }

    fn start(&self) -> Option<Sender<Graph>> {
        // A process that exits without `shutdown()` (a Rust `main` returning)
        // must not tear the plugin down under a compile thread: the exit
        // hook waits for it, and must run before the exit handlers of the
        // plugin's compiler. Those are registered when the compiler is first
        // built, which may not have happened yet (every single-op program
        // loaded from disk): one small compile builds it first, so the hook
        // registered after it runs before them. (Later compiles register the
        // hook again, for what they build.)
        if let Ok(rt) = crate::context::get()
            && let Err(e) = rt.cache.compile_uncounted(&warm_up_graph())
        {
            tracing::warn!("the compile pool's warm-up compile failed: {e}");
        }
        if !crate::pjrt::before_plugin_teardown(stop_at_exit) {
            tracing::warn!("cannot register the compile pool's exit hook");
        }
        let (sender, receiver) = bounded::<Graph>(QUEUE);
        let mut started = 0;
        for i in 0..self.threads {
            let receiver = receiver.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("eagertpu-compile-{i}"))
                .spawn(move || {
                    // The runtime is up: a stream submitted this graph.
                    let Ok(rt) = crate::context::get() else {
                        return;
                    };
                    for graph in receiver {
                        if rt.compiler.stopping.load(Ordering::Acquire) {
                            rt.compiler.unfinished.fetch_sub(1, Ordering::AcqRel);
                            continue;
                        }
                        // A panic must not leave the chunk unfinished:
                        // `wait_idle` (and so the exit hook) would wait forever.
                        rt.compiler.compiling.fetch_add(1, Ordering::AcqRel);
                        let compiled = catch_unwind(AssertUnwindSafe(|| {
                            rt.cache.get(&graph, &rt.counters).map(drop)
                        }))
                        .unwrap_or_else(|_| {
                            Err(Error::Internal("the compile thread panicked".into()))
                        });
                        if let Err(e) = compiled {
                            tracing::warn!(
                                target: "eagertpu::compile",
                                "a fused chunk of {} ops failed to compile in the background \
                                 ({e}); it keeps running op by op",
                                graph.nodes().count()
                            );
                            rt.compiler.mark_failed(graph.key_hash());
                        }
                        Counters::add(&rt.counters.background_compiles, 1);
                        rt.compiler.compiling.fetch_sub(1, Ordering::AcqRel);
                        rt.compiler.unfinished.fetch_sub(1, Ordering::AcqRel);
                    }
                });
            match spawned {
                Ok(_) => started += 1,
                Err(e) => tracing::warn!("cannot start a compile thread: {e}"),
            }
        }
        (started > 0).then_some(sender)
    }
}

/// `x + x` over a float32 scalar: the smallest program that builds the
/// plugin's compiler.
fn warm_up_graph() -> Graph {
    let mut g = Graph::new();
    let x = g.param(fusion::TensorType::scalar(fusion::DType::F32));
    let ty = g.ty(x).clone();
    let sum = g.push_inferred(fusion::Op::Binary(fusion::BinaryOp::Add), &[x, x], ty);
    g.output(sum);
    g
}

/// At exit: drops the queued chunks and waits for the compiles in progress.
extern "C" fn stop_at_exit() {
    if let Ok(rt) = crate::context::get() {
        rt.compiler.stop();
    }
}
