//! Counters of what the runtime did, cheap enough for the op path.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Default)]
pub(crate) struct Counters {
    pub ops_recorded: AtomicU64,
    pub compiles: AtomicU64,
    pub compile_nanos: AtomicU64,
    pub cache_hits: AtomicU64,
    pub executions: AtomicU64,
    pub transfers_to_device: AtomicU64,
    pub bytes_to_device: AtomicU64,
    pub transfers_to_host: AtomicU64,
    pub bytes_to_host: AtomicU64,
}

impl Counters {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub fn snapshot(&self, cached_executables: usize) -> Metrics {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Metrics {
            ops_recorded: get(&self.ops_recorded),
            compiles: get(&self.compiles),
            compile_seconds: get(&self.compile_nanos) as f64 * 1e-9,
            cache_hits: get(&self.cache_hits),
            executions: get(&self.executions),
            transfers_to_device: get(&self.transfers_to_device),
            bytes_to_device: get(&self.bytes_to_device),
            transfers_to_host: get(&self.transfers_to_host),
            bytes_to_host: get(&self.bytes_to_host),
            cached_executables,
            live_buffers: crate::pjrt::live::BUFFERS.get(),
            live_executables: crate::pjrt::live::EXECUTABLES.get(),
        }
    }
}

/// A snapshot of the runtime's counters (`eagertpu::metrics()`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metrics {
    /// Ops recorded by the API (including internal helper ops).
    pub ops_recorded: u64,
    /// Programs compiled by the plugin.
    pub compiles: u64,
    pub compile_seconds: f64,
    /// Programs found in the in-memory compile cache.
    pub cache_hits: u64,
    /// Programs executed.
    pub executions: u64,
    pub transfers_to_device: u64,
    pub bytes_to_device: u64,
    pub transfers_to_host: u64,
    pub bytes_to_host: u64,
    /// Executables held by the compile cache.
    pub cached_executables: usize,
    /// Device buffers alive now.
    pub live_buffers: i64,
    /// Loaded executables alive now.
    pub live_executables: i64,
}

impl Metrics {
    /// A human-readable report.
    pub fn report(&self) -> String {
        format!(
            "ops recorded        {}\n\
             compiles            {} ({:.3} s)\n\
             cache hits          {}\n\
             executions          {}\n\
             to device           {} transfers, {} bytes\n\
             to host             {} transfers, {} bytes\n\
             cached executables  {}\n\
             live buffers        {}\n\
             live executables    {}\n",
            self.ops_recorded,
            self.compiles,
            self.compile_seconds,
            self.cache_hits,
            self.executions,
            self.transfers_to_device,
            self.bytes_to_device,
            self.transfers_to_host,
            self.bytes_to_host,
            self.cached_executables,
            self.live_buffers,
            self.live_executables
        )
    }
}
