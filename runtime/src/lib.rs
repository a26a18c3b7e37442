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
    Ok(context::get()?.counters.snapshot())
}

/// The execution mode of this process (`EAGERTPU_MODE`).
pub fn mode() -> Result<Mode> {
    Ok(context::get()?.config.mode)
}
