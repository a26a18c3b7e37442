//! `Event`: completion of asynchronous PJRT work (a transfer or an execution).

use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pjrt_sys::*;

use super::api::{Plugin, pjrt_call};
use super::live;
use crate::error::Result;

/// How long `Event::wait` polls before it blocks, in nanoseconds.
static WAIT_SPIN_NANOS: AtomicU64 = AtomicU64::new(0);

/// Sets how long `Event::wait` polls an event before it blocks in the plugin
/// (zero: it blocks at once). Process-wide: the runtime sets it once from its
/// configuration.
pub fn set_wait_spin(budget: Duration) {
    let nanos = u64::try_from(budget.as_nanos()).unwrap_or(u64::MAX);
    WAIT_SPIN_NANOS.store(nanos, Ordering::Relaxed);
}

/// When the host last had no core to spare for a polling wait, in
/// nanoseconds since `epoch()` (0: never).
static CROWDED_AT: AtomicU64 = AtomicU64::new(0);

/// How long a note of `note_crowded` stops waits from polling. Long next to
/// a step (a thread preempted for a few milliseconds on a loaded host does
/// not end it), short next to a thread that stopped recording: one thread
/// left alone waits without polling for at most this long.
const CROWDED_HOLD: Duration = Duration::from_millis(100);

fn epoch() -> Instant {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Notes that the threads using the device now outnumber the host's spare
/// cores: for the next `CROWDED_HOLD`, `Event::wait` blocks at once instead
/// of polling. A poller keeps a core that the plugin's worker (running the
/// program it waits for) or another recording thread needs; with two
/// threads training on two cores, polling made each step 20% longer.
/// CUDA's automatic scheduling makes the same choice: it spins only while
/// the process has fewer active contexts than processors.
pub fn note_crowded() {
    let nanos = u64::try_from(epoch().elapsed().as_nanos()).unwrap_or(u64::MAX);
    CROWDED_AT.store(nanos.max(1), Ordering::Relaxed);
}

/// How long a wait on the host may poll now: the budget `set_wait_spin`
/// set; none if that is zero or the host is crowded (`note_crowded`).
pub fn wait_spin() -> Option<Duration> {
    let nanos = WAIT_SPIN_NANOS.load(Ordering::Relaxed);
    (nanos > 0 && !is_crowded()).then(|| Duration::from_nanos(nanos))
}

/// Whether `note_crowded` was called within the last `CROWDED_HOLD`.
pub fn is_crowded() -> bool {
    match CROWDED_AT.load(Ordering::Relaxed) {
        0 => false,
        at => epoch().elapsed().saturating_sub(Duration::from_nanos(at)) < CROWDED_HOLD,
    }
}

/// An owned `PJRT_Event`, destroyed on drop.
pub struct Event {
    plugin: Arc<Plugin>,
    raw: *mut PJRT_Event,
}

// SAFETY: PJRT events may be awaited, queried and destroyed from any thread.
unsafe impl Send for Event {}
// SAFETY: as above; `&Event` only exposes thread-safe PJRT calls.
unsafe impl Sync for Event {}

impl Event {
    /// Takes ownership of `raw` (non-null).
    pub(super) fn from_raw(plugin: Arc<Plugin>, raw: *mut PJRT_Event) -> Event {
        live::EVENTS.inc();
        Event { plugin, raw }
    }

    /// Blocks until the event completes; returns its error, if any.
    ///
    /// Polls first, yielding the core between polls, for up to the budget
    /// `set_wait_spin` set (unless the host is crowded: `note_crowded`),
    /// and only then blocks in the plugin: most waits
    /// of an eager loop (a loss read, `.item()`) are for a program that ends
    /// within tens of microseconds, and blocking costs two context switches
    /// (sleeping, then being woken by the plugin's thread) of that order on
    /// their own. CUDA's default scheduling spins the same way while the
    /// host has cores to spare.
    pub fn wait(&self) -> Result<()> {
        if let Some(budget) = wait_spin() {
            let start = Instant::now();
            while !self.is_ready()? && start.elapsed() < budget {
                std::thread::yield_now();
            }
        }
        let mut args = PJRT_Event_Await_Args {
            event: self.raw,
            ..Default::default()
        };
        pjrt_call!(self.plugin, PJRT_Event_Await, &mut args)
    }

    /// Whether the event has completed (successfully or not).
    pub fn is_ready(&self) -> Result<bool> {
        let mut args = PJRT_Event_IsReady_Args {
            event: self.raw,
            ..Default::default()
        };
        pjrt_call!(self.plugin, PJRT_Event_IsReady, &mut args)?;
        Ok(args.is_ready)
    }
}

/// What `on_ready` hands the plugin's callback: the plugin (to destroy the
/// error it passes) and the function to call.
struct ReadyCallback {
    plugin: Arc<Plugin>,
    f: Box<dyn FnOnce() + Send>,
}

/// The plugin calls this once the event is ready, on a thread of its own (or
/// at once, on the caller's, if it is ready already).
unsafe extern "C" fn ready(error: *mut PJRT_Error, user_arg: *mut c_void) {
    // SAFETY: `user_arg` is the `Box<ReadyCallback>` `on_ready` leaked, and
    // the plugin calls this exactly once.
    let callback = unsafe { Box::from_raw(user_arg as *mut ReadyCallback) };
    if !error.is_null() {
        // The error is ours to destroy; the event's waiters see it too.
        let _ = callback.plugin.take_error("PJRT_Event_OnReady", error);
    }
    // A panic must not unwind into the plugin's thread.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(callback.f));
}

impl Event {
    /// Calls `f` once the event is ready (done or failed), from the plugin's
    /// thread: when the work behind it finished, for timing events.
    pub fn on_ready(&self, f: Box<dyn FnOnce() + Send>) -> Result<()> {
        let callback = Box::into_raw(Box::new(ReadyCallback {
            plugin: self.plugin.clone(),
            f,
        }));
        let mut args = PJRT_Event_OnReady_Args {
            event: self.raw,
            callback: Some(ready),
            user_arg: callback as *mut c_void,
            ..Default::default()
        };
        let outcome = pjrt_call!(self.plugin, PJRT_Event_OnReady, &mut args);
        if outcome.is_err() {
            // SAFETY: the plugin refused the callback, so it never runs and
            // the box is still ours.
            drop(unsafe { Box::from_raw(callback) });
        }
        outcome
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let mut args = PJRT_Event_Destroy_Args {
            event: self.raw,
            ..Default::default()
        };
        if let Err(e) = pjrt_call!(self.plugin, PJRT_Event_Destroy, &mut args) {
            tracing::warn!("destroying a PJRT event: {e}");
        }
        live::EVENTS.dec();
    }
}
