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
//!
//! Waking a sleeping launcher is not free: on this machine's virtual CPUs
//! the futex wake (an interrupt to the idle CPU) took 18-21 us of the
//! recording thread's time at every period cut, and the launcher ran 30-100
//! us later. A loop's period cuts come at a steady pace, so the launcher
//! learns it (`Pace`): after a launch it sleeps until shortly before the next
//! chunk is due (a timer, which costs the recording thread nothing) and then
//! polls for it, for a bounded time; a chunk that comes early wakes it as
//! before, one that comes late finds it asleep again. It polls as a host
//! wait does (`pjrt::wait_spin`: `EAGERTPU_WAIT_SPIN_US`, 0: never; yielding the
//! core between polls), and not while the host is crowded (`crowding.rs`: cuts launch on
//! the recording threads then). Counted as `launcher_paced`.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crossbeam::channel::{Receiver, RecvTimeoutError, Sender, TryRecvError, unbounded};

use super::Stream;
use super::launch::Deferred;
use crate::completion::Retired;

/// A stream's launcher: its queue (started at the first hand-over), how
/// many chunks were handed to it and not yet run, and the buffers of done
/// chunks it drops (`Retired`).
#[derive(Default)]
pub(crate) struct Launcher {
    queue: OnceLock<Option<Sender<(Instant, Deferred)>>>,
    queued: AtomicUsize,
    pub(crate) retired: Arc<Retired>,
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
    /// host is crowded or the thread cannot be started.
    pub(super) fn hand_over(&self, rt: &crate::context::Runtime, deferred: Deferred) {
        if crate::pjrt::is_crowded() {
            // With no core to spare, the launcher would only add two
            // wake-ups to the launch (`crowding.rs`).
            return self.run_deferred(rt, deferred);
        }
        let queue = self.launcher.queue.get_or_init(|| self.start_launcher());
        match queue {
            Some(sender) => {
                self.launcher.queued.fetch_add(1, Ordering::AcqRel);
                crate::metrics::Counters::add(&rt.counters.launcher_chunks, 1);
                if let Err(unsent) = sender.send((Instant::now(), deferred)) {
                    self.launcher.queued.fetch_sub(1, Ordering::AcqRel);
                    self.run_deferred(rt, unsent.into_inner().1);
                }
            }
            None => self.run_deferred(rt, deferred),
        }
    }

    fn start_launcher(&self) -> Option<Sender<(Instant, Deferred)>> {
        if !crate::pjrt::before_plugin_teardown(settle_at_exit) {
            tracing::warn!("cannot register the launcher's exit hook");
        }
        let (sender, receiver) = unbounded::<(Instant, Deferred)>();
        let index = self.index;
        let spawned = std::thread::Builder::new()
            .name(format!("eagertpu-launch-{}", self.index))
            .spawn(move || {
                // The runtime is up: a stream handed this chunk over.
                let Ok(rt) = crate::context::get() else {
                    return;
                };
                let stream = &rt.streams[index];
                let retired = &stream.launcher.retired;
                let mut pace = Pace::default();
                while let Some((sent, deferred)) = pace.receive(&receiver, rt, retired) {
                    pace.sent(sent);
                    // Before the chunk allocates its outputs.
                    retired.collect();
                    // A panic fails the chunk's values (`Deferred`'s drop);
                    // the count must still go down, or `settle` waits forever.
                    let _ = catch_unwind(AssertUnwindSafe(|| stream.run_deferred(rt, deferred)));
                    stream.launcher.queued.fetch_sub(1, Ordering::AcqRel);
                }
                retired.collector_sleeps();
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

/// At exit, no launch or buffer drop may be inside the plugin when it is
/// torn down: the launcher is left nothing more to drop (a timed wake-up
/// after this finds nothing).
extern "C" fn settle_at_exit() {
    if let Ok(rt) = crate::context::get() {
        for s in &rt.streams {
            s.launcher.settle();
            s.launcher.retired.collector_sleeps();
        }
    }
}

/// Gaps between hand-overs that agree within this fraction are a pace.
const STEADY: f64 = 0.25;
/// The longest gap the launcher polls for: beyond it, a wake-up is small
/// next to the step.
const LONGEST_PACED_GAP: Duration = Duration::from_millis(20);
/// How long past its due time a chunk is polled for, as a fraction of the
/// gap (and at most `MAX_SLACK`).
const SLACK: f64 = 0.125;
const MAX_SLACK: Duration = Duration::from_micros(200);
/// How early, beyond the timer's usual lateness, the launcher wakes: twice
/// the usual change from gap to gap, at least this.
const EARLY: Duration = Duration::from_micros(20);
/// The timer's lateness assumed before any was measured.
const FIRST_LATENESS: Duration = Duration::from_micros(50);

/// The pace of a stream's hand-overs: when the next chunk is due, learned
/// from the last gaps between them, and how late a timed wake-up runs.
#[derive(Debug)]
struct Pace {
    last_sent: Option<Instant>,
    gaps: [Option<Duration>; 2],
    /// Change from gap to gap, averaged.
    jitter: Duration,
    /// Lateness of the timer's wake-ups, averaged.
    lateness: Duration,
}

impl Default for Pace {
    fn default() -> Pace {
        Pace {
            last_sent: None,
            gaps: [None, None],
            jitter: Duration::ZERO,
            lateness: FIRST_LATENESS,
        }
    }
}

/// When to start polling for the next chunk and when to stop.
#[derive(Debug, PartialEq)]
struct Poll {
    from: Instant,
    until: Instant,
}

impl Pace {
    /// Notes a chunk handed over at `at`.
    fn sent(&mut self, at: Instant) {
        if let Some(last) = self.last_sent {
            let gap = at.saturating_duration_since(last);
            if let Some(before) = self.gaps[0] {
                let change = gap.abs_diff(before).min(LONGEST_PACED_GAP);
                self.jitter = (self.jitter * 3 + change) / 4;
            }
            self.gaps = [Some(gap), self.gaps[0]];
        }
        self.last_sent = Some(at);
    }

    /// When to poll for the next chunk: only if the last two gaps agree (a
    /// loop's period cuts) and are short.
    fn poll(&self) -> Option<Poll> {
        let (last, [Some(gap), Some(before)]) = (self.last_sent?, self.gaps) else {
            return None;
        };
        let (g, b) = (gap.as_secs_f64(), before.as_secs_f64());
        if gap > LONGEST_PACED_GAP || (g - b).abs() > STEADY * g.max(b) {
            return None;
        }
        let due = last + gap;
        let slack = gap.mul_f64(SLACK).min(MAX_SLACK);
        let early = (self.jitter * 2).max(EARLY);
        Some(Poll {
            from: due - (self.lateness + early).min(gap / 2),
            until: due + slack,
        })
    }

    /// Notes a timed wake-up that ran `late` after it was asked for.
    fn woke(&mut self, late: Duration) {
        self.lateness = (self.lateness * 3 + late.min(LONGEST_PACED_GAP)) / 4;
    }

    /// The next chunk handed over: asleep until it comes, or, at a steady
    /// pace, until shortly before it is due, then polling for it until a
    /// little after. `None`: the stream is gone.
    fn receive<T>(
        &mut self,
        receiver: &Receiver<T>,
        rt: &crate::context::Runtime,
        retired: &Retired,
    ) -> Option<T> {
        let poll = self.poll().filter(|_| crate::pjrt::wait_spin().is_some());
        let (item, polled) = self.receive_in(receiver, poll, retired)?;
        if polled {
            crate::metrics::Counters::add(&rt.counters.launcher_paced, 1);
        }
        Some(item)
    }

    /// The next item, polled for within `poll` if there is one (asleep
    /// before it, a timer waking the thread, and after it); and whether it
    /// came while polling. Buffers retired while it sleeps on the timer are
    /// dropped when it wakes; before an untimed sleep it drops what it was
    /// left, and is left nothing until it runs again.
    fn receive_in<T>(
        &mut self,
        receiver: &Receiver<T>,
        poll: Option<Poll>,
        retired: &Retired,
    ) -> Option<(T, bool)> {
        let untimed = || {
            retired.collector_sleeps();
            let item = receiver.recv().ok();
            retired.collector_wakes();
            item
        };
        let Some(poll) = poll else {
            return untimed().map(|item| (item, false));
        };
        let now = Instant::now();
        if poll.from > now {
            match receiver.recv_timeout(poll.from - now) {
                Ok(item) => return Some((item, false)),
                Err(RecvTimeoutError::Disconnected) => return None,
                Err(RecvTimeoutError::Timeout) => {
                    self.woke(poll.from.elapsed());
                    retired.collect();
                }
            }
        }
        while Instant::now() < poll.until {
            match receiver.try_recv() {
                Ok(item) => return Some((item, true)),
                Err(TryRecvError::Empty) => std::thread::yield_now(),
                Err(TryRecvError::Disconnected) => return None,
            }
        }
        untimed().map(|item| (item, false))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn micros(us: u64) -> Duration {
        Duration::from_micros(us)
    }

    #[test]
    fn a_steady_pace_is_polled_for_shortly_before_it_is_due() {
        let start = Instant::now();
        let mut pace = Pace::default();
        pace.sent(start);
        assert_eq!(pace.poll(), None, "no gap yet");
        pace.sent(start + micros(600));
        assert_eq!(pace.poll(), None, "one gap is not a pace");
        pace.sent(start + micros(1240));
        // Gaps 600 and 640 us agree: due 640 us after the last, polled from
        // the timer's lateness and twice the gaps' change (averaged: 10 us)
        // before it, until an eighth of the gap after.
        let last = start + micros(1240);
        let want = Poll {
            from: last + micros(640) - FIRST_LATENESS - EARLY,
            until: last + micros(640 + 80),
        };
        assert_eq!(pace.poll(), Some(want), "a margin of at least EARLY");
        pace.woke(micros(90));
        let from = pace.poll().unwrap().from;
        assert_eq!(from, last + micros(640) - micros((50 * 3 + 90) / 4) - EARLY);
        // Gaps that vary more widen the margin: 640, then 560 us, a change
        // of 80 us, averaged with the first (40 us): (10 * 3 + 80) / 4 =
        // 27.5 us, twice that 55 us; the timer's lateness is now 60 us.
        pace.sent(last + micros(560));
        let poll = pace.poll().unwrap();
        let last = last + micros(560);
        assert_eq!(poll.from, last + micros(560) - micros(60) - micros(55));
        assert_eq!(poll.until, last + micros(560 + 70));
    }

    #[test]
    fn an_irregular_or_slow_pace_is_not_polled_for() {
        let start = Instant::now();
        let mut pace = Pace::default();
        for at in [0, 600, 1800] {
            pace.sent(start + micros(at));
        }
        assert_eq!(pace.poll(), None, "gaps 600 and 1200 us disagree");
        let mut slow = Pace::default();
        for at in [0, 30_000, 60_000] {
            slow.sent(start + micros(at));
        }
        assert_eq!(
            slow.poll(),
            None,
            "30 ms gaps: a wake-up is small next to them"
        );
    }

    /// An item that comes while the receiver polls is taken as polled for;
    /// one that comes before the poll starts, or after it ends, is taken
    /// asleep; a timed wake-up's lateness is noted; the end of the channel
    /// ends it.
    #[test]
    fn items_are_received_polling_or_asleep() {
        let (sender, receiver) = unbounded::<u32>();
        let retired = Retired::default();
        let mut pace = Pace::default();
        let now = Instant::now();
        let polling = Poll {
            from: now,
            until: now + Duration::from_secs(60),
        };
        let feed = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(5));
            sender.send(1).unwrap();
            std::thread::sleep(Duration::from_millis(5));
            sender.send(2).unwrap();
            std::thread::sleep(Duration::from_millis(20));
            sender.send(3).unwrap();
        });
        assert_eq!(
            pace.receive_in(&receiver, Some(polling), &retired),
            Some((1, true))
        );
        // Due in a minute: the item comes while the receiver sleeps.
        let later = Instant::now() + Duration::from_secs(60);
        let asleep = Poll {
            from: later,
            until: later,
        };
        assert_eq!(
            pace.receive_in(&receiver, Some(asleep), &retired),
            Some((2, false))
        );
        // Polled for 1 ms from 2 ms on (asleep until then), the item comes
        // 20 ms later, once the receiver is asleep again.
        let soon = Instant::now() + Duration::from_millis(2);
        let missed = Poll {
            from: soon,
            until: soon + Duration::from_millis(1),
        };
        assert_eq!(
            pace.receive_in(&receiver, Some(missed), &retired),
            Some((3, false))
        );
        assert_ne!(
            pace.lateness, FIRST_LATENESS,
            "the timed wake-up was measured"
        );
        feed.join().unwrap();
        assert_eq!(
            pace.receive_in(&receiver, None, &retired),
            None,
            "the sender is gone"
        );
    }
}
