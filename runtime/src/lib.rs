//! EagerTPU runtime: PJRT plugins, values, streams, the compile cache, metrics,
//! and the `Tensor` API built on them.

mod cache;
mod compiler;
mod completion;
pub mod config;
mod context;
mod disk;
pub mod error;
mod host;
mod marker;
mod metrics;
mod origin;
pub mod pjrt;
pub mod slots;
pub mod storage;
mod stream;
mod tensor;
pub mod timing;
pub mod trace;
mod value;

pub use config::Mode;
pub use context::{Manifest, check_distributed_store, set_distributed_store};
pub use error::{Error, Result};
pub use host::Element;
pub use marker::Marker;
pub use metrics::Metrics;
/// The host element types of complex64 and complex128 tensors.
pub use num_complex::{Complex32, Complex64};
pub use origin::with_origin;
pub use pjrt::kv::{KeyValueStore, KvFailure};
pub use tensor::{
    Activation, Adam, AdamParam, AdamUpdate, ArgReduce, BatchNormOutput, Cumulative, Device,
    Distribution, Extreme, FftNorm, GradScaling, GruCellGrad, Interpolation, LstmCell,
    LstmCellGrad, Operand, OrderStatistic, OrderStatisticKind, PadMode, PointwiseLoss,
    PointwiseLossKind, ProcessGroup, Reduce, ScatterReduction, Sgd, SgdParam, SgdUpdate, Subgroups,
    Tensor, default_device, sync,
};

/// Locks a mutex, ignoring poisoning (state is updated atomically under it).
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The run manifest: plugin, platform, API versions, devices (starts the runtime).
pub fn manifest() -> Result<Manifest> {
    Ok(context::get()?.manifest.clone())
}

/// A snapshot of the runtime's counters.
pub fn metrics() -> Result<Metrics> {
    let rt = context::get()?;
    // Chunks handed to a launcher thread count once they ran; buffers of
    // done chunks left to it to drop are not live.
    for s in &rt.streams {
        s.launcher.settle();
        s.launcher.retired.collect();
    }
    let mut m = rt.counters.snapshot(rt.cache.executables());
    m.compiling_in_background = rt.compiler.compiling() as u64;
    if let Some(checker) = &rt.hazards {
        // The checker's second executables and kept buffers are its own.
        let (buffers, executables) = checker.held();
        m.live_buffers -= buffers as i64;
        m.live_executables -= executables as i64;
    }
    Ok(m)
}

/// Counts a CPU fallback of `op` (a caller, such as the PyTorch backend, runs
/// an op on the CPU for lack of a kernel); true the first time for `op` (warn
/// then). Under `EAGERTPU_FALLBACK=error` it is refused instead: an error
/// naming the op, not counted.
pub fn note_fallback(op: &str) -> Result<bool> {
    let rt = context::get()?;
    if rt.fallback_is_error {
        return Err(Error::FallbackRefused { op: op.to_string() });
    }
    let mut counts = lock(&rt.counters.fallbacks);
    let n = counts.entry(op.to_string()).or_default();
    *n += 1;
    Ok(*n == 1)
}

/// The current execution mode (starts as `EAGERTPU_MODE`, default fused).
pub fn mode() -> Result<Mode> {
    Ok(context::get()?.mode())
}

/// Switches the execution mode for the whole process; what is pending runs
/// first.
pub fn set_mode(mode: Mode) -> Result<()> {
    context::get()?.set_mode(mode)
}

/// Restores the previous mode when dropped (see [`with_mode`]).
#[must_use = "the mode is restored when the guard is dropped"]
pub struct ModeGuard {
    previous: Mode,
}

impl Drop for ModeGuard {
    fn drop(&mut self) {
        if let Err(e) = set_mode(self.previous) {
            tracing::warn!("restoring mode {}: {e}", self.previous);
        }
    }
}

/// Switches to `mode` until the returned guard is dropped.
pub fn with_mode(mode: Mode) -> Result<ModeGuard> {
    let previous = self::mode()?;
    set_mode(mode)?;
    Ok(ModeGuard { previous })
}

/// Runs `f` as one op of the caller's: the ops it records run as one program
/// in debug and strict modes (launched once when `f` returns, and in debug
/// mode waited for then), not one program each; fused mode cuts as its
/// window says, as always. A `_foreach` op over a list of tensors or an
/// optimizer step over every parameter is one op to the user, and launches
/// once. A host read inside `f` still runs what is pending first. What `f`
/// recorded before an error is launched too (its results stay written); an
/// error of that launch comes back as `Err`, otherwise `f`'s own result.
pub fn as_one_op<R>(f: impl FnOnce() -> R) -> Result<R> {
    let scope = stream::OneOp::enter();
    let out = f();
    drop(scope);
    end_one_op_scope()?;
    Ok(out)
}

/// [`as_one_op`] for a caller that cannot pass a closure (the C ABI): the
/// calls this thread records until the matching [`end_one_op`] are one op.
/// Scopes nest; the outermost one's end launches.
pub fn begin_one_op() {
    stream::OneOp::begin();
}

/// Ends the scope [`begin_one_op`] began, launching what it recorded if it
/// was the outermost. Refused when this thread is in no such scope.
pub fn end_one_op() -> Result<()> {
    if !stream::OneOp::leave() {
        return Err(Error::Config {
            what: "end_one_op",
            message: "this thread is in no one-op scope (begin_one_op was not called)".into(),
        });
    }
    end_one_op_scope()
}

/// Launches what the outermost one-op scope recorded, once it has ended.
fn end_one_op_scope() -> Result<()> {
    if stream::OneOp::depth() > 0 {
        return Ok(());
    }
    let rt = context::get()?;
    // Fused mode launches it only while its trace drifts (`Stream::end_one_op`).
    let wait = rt.effective_mode() == Mode::Debug;
    for s in &rt.streams {
        s.end_one_op(rt, wait)?;
    }
    Ok(())
}

/// Runs everything pending and waits for it, then stops the background
/// compile pool (queued chunks are dropped; fused chunks run op by op from
/// then on): call before exiting to be sure work recorded but never read has
/// run. The Python package calls it at exit.
pub fn shutdown() -> Result<()> {
    let rt = context::get()?;
    rt.cut_all(fusion::policy::CutReason::Shutdown)?;
    let synced = tensor::sync();
    // No compile thread may be inside the plugin when the process exits.
    rt.compiler.stop();
    synced
}

/// Waits until every fused chunk queued for compilation in the background is
/// compiled (or failed to). The op stream never needs this; benchmarks and
/// tests call it to measure a loop once its programs are ready.
pub fn wait_for_compiles() -> Result<()> {
    context::get()?.compiler.wait_idle();
    Ok(())
}

/// Makes the first op that produces NaN or Inf (from finite inputs) an error
/// naming it, like `torch.autograd.set_detect_anomaly`. Starts as
/// `EAGERTPU_CHECK_NAN`. Each checked op reads its results to the host.
pub fn set_check_nan(on: bool) -> Result<()> {
    context::get()?
        .check_nan
        .store(on, std::sync::atomic::Ordering::Relaxed);
    Ok(())
}

/// Makes fused mode's results depend only on the op stream, bit for bit
/// (`EAGERTPU_DETERMINISTIC=1` makes it always so; PyTorch's
/// `torch.use_deterministic_algorithms` sets it). A fused program may round
/// differently from the same ops run one by one (XLA contracts a multiply
/// and an add of two ops into one fused multiply-add), so by default a run's
/// last bits depend on when a background compile finished, or on whether the
/// disk cache had the program. Deterministic, a hot chunk is compiled on the
/// recording thread and used from its hot sighting on, whatever the disk or
/// the clock: a cold and a warm cache give the same bits.
pub fn set_deterministic(on: bool) -> Result<()> {
    context::get()?
        .deterministic
        .store(on, std::sync::atomic::Ordering::Relaxed);
    Ok(())
}

/// Hooks for `benches/`: not part of the API.
#[doc(hidden)]
pub mod bench_hooks {
    use fusion::{BinaryOp, DType, Graph, Op, TensorType};

    use crate::context;
    use crate::error::Result;

    /// The graph of one `add` of two `[n]` f32 tensors, and its StableHLO.
    pub fn add_program(n: i64) -> (Graph, String) {
        let mut g = Graph::new();
        let a = g.param(TensorType::new(DType::F32, &[n]));
        let b = g.param(TensorType::new(DType::F32, &[n]));
        let c = g
            .push(Op::Binary(BinaryOp::Add), &[a, b])
            .expect("a valid add");
        g.output(c);
        let text = fusion::lower::lower(&g);
        (g, text)
    }

    /// The StableHLO of `ops` elementwise ops on one `[n]` f32 parameter
    /// (`y = y * x`, `y = y + x`, alternating): `ops * n` flops.
    pub fn elementwise_chain_program(n: i64, ops: usize) -> String {
        let mut g = Graph::new();
        let x = g.param(TensorType::new(DType::F32, &[n]));
        let mut y = x;
        for i in 0..ops {
            let op = if i % 2 == 0 {
                BinaryOp::Mul
            } else {
                BinaryOp::Add
            };
            y = g.push(Op::Binary(op), &[y, x]).expect("a valid op");
        }
        g.output(y);
        fusion::lower::lower(&g)
    }

    /// One compile-cache lookup of `graph` (a hit once it has been compiled).
    pub fn cache_get(graph: &Graph) -> Result<()> {
        let rt = context::get()?;
        rt.cache.get(graph, &rt.counters).map(|_| ())
    }
}
