//! Where the time of one op goes, by stage, for the per-op breakdown of
//! `make bench`: off unless `EAGERTPU_OP_TIMING=1` (reading the clock costs
//! tens of nanoseconds a stage, a tenth of a small op). The stages nest: a C
//! ABI call (`Abi`) reads and writes storages (`Views`) and records ops
//! (`Record`); recording may cut the stream (`Cut`: lowering, cache lookup,
//! launch, or handing the chunk to the op-by-op tier).

use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// A stage of the op path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Inside a C ABI entry point (everything the runtime does for a caller).
    Abi,
    /// Reading and writing PyTorch storages as views (the storage table).
    Views,
    /// Recording: checks, type inference, the trace, the window's signature.
    Record,
    /// Cutting the stream: building, looking up and launching a chunk.
    Cut,
}

impl Stage {
    pub const ALL: [Stage; 4] = [Stage::Abi, Stage::Views, Stage::Record, Stage::Cut];

    pub fn name(self) -> &'static str {
        match self {
            Stage::Abi => "abi",
            Stage::Views => "views",
            Stage::Record => "record",
            Stage::Cut => "cut",
        }
    }
}

static ENABLED: LazyLock<bool> =
    LazyLock::new(|| std::env::var("EAGERTPU_OP_TIMING").is_ok_and(|v| v == "1"));
static NANOS: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];
static CALLS: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];

/// Whether stages are being timed (`EAGERTPU_OP_TIMING=1`).
#[inline]
pub fn enabled() -> bool {
    *ENABLED
}

/// Runs `f`, adding its wall time to `stage` when timing is on.
#[inline]
pub fn timed<R>(stage: Stage, f: impl FnOnce() -> R) -> R {
    if !enabled() {
        return f();
    }
    let start = Instant::now();
    let out = f();
    let i = stage as usize;
    NANOS[i].fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
    CALLS[i].fetch_add(1, Ordering::Relaxed);
    out
}

/// (stage name, calls, nanoseconds) of every stage so far.
pub(crate) fn snapshot() -> Vec<(&'static str, u64, u64)> {
    Stage::ALL
        .iter()
        .map(|&s| {
            let i = s as usize;
            (
                s.name(),
                CALLS[i].load(Ordering::Relaxed),
                NANOS[i].load(Ordering::Relaxed),
            )
        })
        .collect()
}
