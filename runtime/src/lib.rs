//! EagerTPU runtime: PJRT plugins, values, streams, the compile cache, metrics,
//! and the `Tensor` API built on them.

mod cache;
pub mod config;
mod context;
pub mod error;
mod host;
mod metrics;
pub mod pjrt;
mod stream;
mod tensor;
mod value;

pub use config::Mode;
pub use context::Manifest;
pub use error::{Error, Result};
pub use host::Element;
pub use metrics::Metrics;
pub use tensor::{Device, Operand, Tensor, default_device, sync};

/// The run manifest: plugin, platform, API versions, devices (starts the runtime).
pub fn manifest() -> Result<Manifest> {
    Ok(context::get()?.manifest.clone())
}

/// A snapshot of the runtime's counters.
pub fn metrics() -> Result<Metrics> {
    let rt = context::get()?;
    Ok(rt.counters.snapshot(rt.cache.executables()))
}

/// The execution mode of this process (`EAGERTPU_MODE`).
pub fn mode() -> Result<Mode> {
    Ok(context::get()?.config.mode)
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

    /// One compile-cache lookup of `graph` (a hit once it has been compiled).
    pub fn cache_get(graph: &Graph) -> Result<()> {
        let rt = context::get()?;
        rt.cache.get(graph, &rt.counters).map(|_| ())
    }
}
