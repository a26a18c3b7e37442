//! Events on a device's op stream (`torch.tpu.Event`, `cudaEvent_t`'s
//! role): recording one launches what is pending and remembers the chunks
//! still running; it is complete when they are. A timing event also notes
//! when the last of them finished, as the plugin reports each one done, so
//! that the time between two events is the device's time between them (the
//! PJRT C API has no device timestamps; this is the time the host learns of
//! each completion, microseconds after it).

use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use crate::completion::Completion;
use crate::error::{Error, Result};
use crate::lock;

/// When a timing event's work finished: for each chunk before it, the
/// earliest time it was known done (the plugin's callback, or a wait that
/// returned first: a callback may run after `PJRT_Event_Await` returns);
/// the record's own time for work done before it.
struct Clock {
    recorded: Instant,
    done: Mutex<Vec<Option<Instant>>>,
    settled: Condvar,
}

impl Clock {
    /// Chunk `i` is known done now.
    fn note(&self, i: usize) {
        let now = Instant::now();
        let mut done = lock(&self.done);
        let slot = &mut done[i];
        *slot = Some(slot.map_or(now, |t| t.min(now)));
        if done.iter().all(Option::is_some) {
            self.settled.notify_all();
        }
    }

    /// When the last chunk finished, once every one is known done.
    fn time(&self) -> Instant {
        let mut done = lock(&self.done);
        while done.iter().any(Option::is_none) {
            done = self
                .settled
                .wait(done)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        done.iter().flatten().fold(self.recorded, |a, b| a.max(*b))
    }
}

/// A recorded event: complete when the chunks launched before it are.
pub struct Marker {
    pending: Vec<Arc<Completion>>,
    clock: Option<Arc<Clock>>,
}

impl Marker {
    /// An event after `pending` (the chunks launched and not known done);
    /// with `timing`, one that notes when they finished.
    pub(crate) fn new(pending: Vec<Arc<Completion>>, timing: bool) -> Result<Marker> {
        let clock = if timing {
            let clock = Arc::new(Clock {
                recorded: Instant::now(),
                done: Mutex::new(vec![None; pending.len()]),
                settled: Condvar::new(),
            });
            for (i, c) in pending.iter().enumerate() {
                let notify = clock.clone();
                c.on_finished(Box::new(move || notify.note(i)))?;
            }
            Some(clock)
        } else {
            None
        };
        Ok(Marker { pending, clock })
    }

    /// Whether the work before the event has finished (never blocks).
    pub fn query(&self) -> bool {
        self.pending.iter().all(|c| c.finished())
    }

    /// Waits for the work before the event; its first failure.
    pub fn wait(&self) -> Result<()> {
        let mut first = Ok(());
        for (i, c) in self.pending.iter().enumerate() {
            let outcome = c.wait();
            if let Some(clock) = &self.clock {
                clock.note(i);
            }
            if let Err(e) = outcome
                && first.is_ok()
            {
                first = Err(e);
            }
        }
        first
    }

    /// Milliseconds from `self` to `end` on the device's timeline, once both
    /// are complete (waits for them), as `cudaEventElapsedTime`.
    pub fn elapsed_ms(&self, end: &Marker) -> Result<f64> {
        let (Some(start_clock), Some(end_clock)) = (&self.clock, &end.clock) else {
            return Err(Error::Config {
                what: "Event.elapsed_time",
                message: "both events must be created with enable_timing=True".into(),
            });
        };
        self.wait()?;
        end.wait()?;
        let (t0, t1) = (start_clock.time(), end_clock.time());
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        Ok(if t1 >= t0 { ms(t1 - t0) } else { -ms(t0 - t1) })
    }
}
