//! Safe wrappers over the PJRT C API. No raw pointer leaves this module.
//! (C names are kept for PJRT constants and structs, hence the style allowance.)
//!
//! - `api`: load a plugin, check its version, the one `call` helper;
//! - `locate`: find the plugin to load (`EAGERTPU_PJRT_PLUGIN`, `.venv`, site-packages);
//! - `client`, `buffer`, `event`, `executable`: RAII handles;
//! - `options`: the `CompileOptionsProto` every compile needs;
//! - `exit`: work to finish before the process tears a plugin down;
//! - `probe`: asks a plugin which argument-struct sizes it expects;
//! - `heap`: the CPU plugin's device memory, the host heap, kept for reuse.

#![allow(non_upper_case_globals)]

mod api;
mod buffer;
mod client;
mod event;
mod executable;
mod exit;
pub mod heap;
pub mod kv;
pub mod locate;
mod options;
pub mod probe;

pub use api::{Attribute, ErrorCode, OptionValue, PjrtError, Plugin};
pub use buffer::{Buffer, Pod, as_bytes, as_bytes_mut};
pub use client::{Client, Device, MemoryStats};
pub use event::{Event, is_crowded, note_crowded, set_wait_spin, wait_spin};
pub use executable::Executable;
pub use exit::before_plugin_teardown;
pub use options::{CompileOptions, Placement, XlaOption, required_xla_options};

/// Counts of live PJRT objects created by this process (leak checks, metrics).
pub mod live {
    use std::sync::atomic::{AtomicI64, Ordering};

    pub struct Counter(AtomicI64);

    impl Counter {
        const fn new() -> Counter {
            Counter(AtomicI64::new(0))
        }
        pub(crate) fn inc(&self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
        pub(crate) fn dec(&self) {
            self.0.fetch_sub(1, Ordering::Relaxed);
        }
        pub fn get(&self) -> i64 {
            self.0.load(Ordering::Relaxed)
        }
    }

    /// Device buffers alive now.
    pub static BUFFERS: Counter = Counter::new();
    /// Loaded executables alive now.
    pub static EXECUTABLES: Counter = Counter::new();
    /// PJRT events alive now.
    pub static EVENTS: Counter = Counter::new();
}
