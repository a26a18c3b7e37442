//! The stream's launcher thread: fused mode's period and window cuts hand
//! their bound chunk to it instead of calling the plugin on the recording
//! thread. The plugin's execute call costs the caller tens of microseconds
//! (its host side, and waking the plugin's sleeping worker); a period cut
//! falls inside a training step (where the loss is computed), so on the
//! recording thread that time comes before the backward pass is recorded.
//! Handed over, it costs the recording thread one wake-up of the launcher,
//! and the launch overlaps the recording of the rest of the step.
//!
//! A host read's cut still launches on the reading thread (the read waits
//! for the chunk anyway; a hand-over would add a hop), as do debug and strict
//! mode's (one op each: the wake-up would cost more than the launch) and a
//! drifting loop's per-call cuts. Values of a chunk handed over are in flight
//! until the launcher has run it (`Value`); `sync()`, events, the bound on
//! chunks in flight, `metrics()` and the exit hook first wait for the
//! launcher to have run what was handed to it.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use crossbeam::channel::{Sender, unbounded};

use super::Stream;
use super::launch::Deferred;

/// A stream's launcher: its queue (started at the first hand-over) and how
/// many chunks were handed to it and not yet run.
#[derive(Default)]
pub(crate) struct Launcher {
    queue: OnceLock<Option<Sender<Deferred>>>,
    queued: AtomicUsize,
}

impl Launcher {
    /// Waits until every chunk handed to the launcher has been run (launched,
    /// or failed into its values).
    pub(crate) fn settle(&self) {
        let mut rounds = 0u32;
        while self.queued.load(Ordering::Acquire) > 0 {
            rounds += 1;
            crate::value::back_off(rounds);
        }
    }
}

impl Stream {
    /// Runs `deferred` on this stream's launcher thread, or here if the
    /// thread cannot be started.
    pub(super) fn hand_over(&self, rt: &crate::context::Runtime, deferred: Deferred) {
        let queue = self.launcher.queue.get_or_init(|| self.start_launcher());
        match queue {
            Some(sender) => {
                self.launcher.queued.fetch_add(1, Ordering::AcqRel);
                crate::metrics::Counters::add(&rt.counters.launcher_chunks, 1);
                if let Err(unsent) = sender.send(deferred) {
                    self.launcher.queued.fetch_sub(1, Ordering::AcqRel);
                    self.run_deferred(rt, unsent.into_inner());
                }
            }
            None => self.run_deferred(rt, deferred),
        }
    }

    fn start_launcher(&self) -> Option<Sender<Deferred>> {
        if !crate::pjrt::before_plugin_teardown(settle_at_exit) {
            tracing::warn!("cannot register the launcher's exit hook");
        }
        let (sender, receiver) = unbounded::<Deferred>();
        let index = self.index;
        let spawned = std::thread::Builder::new()
            .name(format!("eagertpu-launch-{}", self.index))
            .spawn(move || {
                // The runtime is up: a stream handed this chunk over.
                let Ok(rt) = crate::context::get() else {
                    return;
                };
                let stream = &rt.streams[index];
                for deferred in receiver {
                    // A panic fails the chunk's values (`Deferred`'s drop);
                    // the count must still go down, or `settle` waits forever.
                    let _ = catch_unwind(AssertUnwindSafe(|| stream.run_deferred(rt, deferred)));
                    stream.launcher.queued.fetch_sub(1, Ordering::AcqRel);
                }
            });
        match spawned {
            Ok(_) => Some(sender),
            Err(e) => {
                tracing::warn!("cannot start the launcher thread ({e}); launching inline");
                None
            }
        }
    }
}

/// At exit, no launch may be inside the plugin when it is torn down.
extern "C" fn settle_at_exit() {
    if let Ok(rt) = crate::context::get() {
        for s in &rt.streams {
            s.launcher.settle();
        }
    }
}
