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

/// When a timing event's work finished: callbacks still to come, and the
/// latest time seen (the record's own time to start with: work that was done
/// before the record counts as done then).
struct Clock {
    state: Mutex<(usize, Instant)>,
    settled: Condvar,
}

impl Clock {
    fn finished_one(&self) {
        let mut s = lock(&self.state);
        s.0 -= 1;
        s.1 = s.1.max(Instant::now());
        if s.0 == 0 {
            self.settled.notify_all();
        }
    }

    /// The time the last chunk finished, once every callback has come.
    fn time(&self) -> Instant {
        let mut s = lock(&self.state);
        while s.0 > 0 {
            s = self
                .settled
                .wait(s)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        s.1
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
                state: Mutex::new((pending.len(), Instant::now())),
                settled: Condvar::new(),
            });
            for (i, c) in pending.iter().enumerate() {
                let notify = clock.clone();
                if let Err(e) = c.on_finished(Box::new(move || notify.finished_one())) {
                    // The callbacks not registered will never come.
                    let mut s = lock(&clock.state);
                    s.0 -= pending.len() - i;
                    return Err(e);
                }
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
        for c in &self.pending {
            if let Err(e) = c.wait()
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
