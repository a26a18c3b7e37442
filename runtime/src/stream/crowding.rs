//! A crowded host: more threads recording on a stream than leave a core for
//! the plugin's worker. While it is (`pjrt::note_crowded`), a wait for the
//! device blocks at once instead of polling, and a window's cut launches on
//! the recording thread instead of the launcher's: a poller or a hand-over
//! would keep the core that the worker running the program, or the other
//! thread, needs. CUDA's automatic scheduling decides the same way: it spins
//! only while the process has fewer active contexts than processors.

use std::time::{Duration, Instant};

/// How far back a thread that recorded on a stream counts as recording now.
const CROWDING_WINDOW: Duration = Duration::from_millis(10);

/// The cores this process may run on.
fn host_cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Whether a thread recording while `others` threads also do leaves no core
/// for the plugin's worker, if waits polled: with this thread's, one core
/// each, and one for the worker.
fn crowds(others: usize, cores: usize) -> bool {
    others + 2 > cores
}

/// When each thread other than the active one last recorded on a stream, by
/// trace key (those of the last `CROWDING_WINDOW`).
#[derive(Default)]
pub(super) struct Recent(Vec<(u32, Instant)>);

impl Recent {
    /// Thread `incoming` takes the stream over from `outgoing`, which
    /// recorded until now: notes the host crowded if the threads recording
    /// lately, `incoming` and the worker outnumber its cores.
    pub(super) fn took_over(&mut self, outgoing: u32, incoming: u32) {
        let now = Instant::now();
        self.0
            .retain(|(k, at)| *k != incoming && *k != outgoing && now - *at < CROWDING_WINDOW);
        self.0.push((outgoing, now));
        if crowds(self.0.len(), host_cores()) {
            crate::pjrt::note_crowded();
        }
    }

    #[cfg(test)]
    fn keys(&self) -> Vec<u32> {
        self.0.iter().map(|(k, _)| *k).collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::super::{StreamState, lock, this_thread_trace};
    use super::*;

    #[test]
    fn a_second_recording_thread_crowds_two_cores_not_four() {
        assert!(!crowds(0, 2), "one thread and the worker fit two cores");
        assert!(crowds(1, 2), "two threads and the worker do not");
        assert!(!crowds(1, 4));
        assert!(crowds(3, 4));
        assert!(crowds(0, 1));
    }

    /// Threads taking turns on a stream are counted while they keep
    /// recording, and forgotten once they stopped for `CROWDING_WINDOW`.
    #[test]
    fn threads_taking_turns_count_until_they_stop() {
        let st = Mutex::new(StreamState::new(Default::default()));
        let here = this_thread_trace();
        lock(&st).enter();
        assert!(
            lock(&st).recent.keys().is_empty(),
            "no other thread recorded"
        );
        let other = std::thread::scope(|s| {
            s.spawn(|| {
                lock(&st).enter();
                this_thread_trace()
            })
            .join()
            .unwrap()
        });
        let recent = lock(&st).recent.keys();
        assert_eq!(recent, vec![here], "the thread it took over from");
        lock(&st).enter();
        let recent = lock(&st).recent.keys();
        assert_eq!(recent, vec![other], "each thread once, the active one not");
        assert_eq!(lock(&st).active, here);

        std::thread::sleep(CROWDING_WINDOW + Duration::from_millis(5));
        std::thread::scope(|s| {
            s.spawn(|| lock(&st).enter());
        });
        let recent = lock(&st).recent.keys();
        assert_eq!(recent, vec![here], "the other thread stopped long ago");
    }
}
