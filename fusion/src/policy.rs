//! When the fuser cuts the op stream into chunks: a pure decision over op
//! signatures and chunk sizes, testable without a device.
//!
//! Besides the explicit triggers (a host read, `sync()`, a mode switch, an op
//! that cannot fuse, shutdown), fused mode cuts when the pending chunk reaches
//! the window limits (ops, parameters), and aligns cuts with the loop of the
//! program: it keeps the signatures of the last 256 ops, and when the stream
//! repeats with a period of 2 to 128 ops it cuts every `k * period` ops
//! (the largest multiple that fits the window). Chunks then repeat exactly, so
//! each is compiled once, even when the training step never reads the host.

/// Why a chunk was cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CutReason {
    /// Debug and strict modes cut after every op.
    EveryOp,
    /// A host read (`to_vec`, `item`, printing) needed a pending value.
    HostRead,
    /// An explicit `sync()`.
    Sync,
    /// The chunk reached the window's op limit.
    WindowOps,
    /// The chunk reached the window's parameter limit.
    WindowParams,
    /// The op stream repeats; the cut lines up with its period.
    Period,
    /// An op that cannot fuse (a collective) starts or ends a chunk.
    Unfusible,
    /// The mode changed.
    ModeSwitch,
    /// The runtime is shutting down.
    Shutdown,
}

impl CutReason {
    pub const ALL: [CutReason; 9] = [
        CutReason::EveryOp,
        CutReason::HostRead,
        CutReason::Sync,
        CutReason::WindowOps,
        CutReason::WindowParams,
        CutReason::Period,
        CutReason::Unfusible,
        CutReason::ModeSwitch,
        CutReason::Shutdown,
    ];

    pub fn name(self) -> &'static str {
        match self {
            CutReason::EveryOp => "every_op",
            CutReason::HostRead => "host_read",
            CutReason::Sync => "sync",
            CutReason::WindowOps => "window_ops",
            CutReason::WindowParams => "window_params",
            CutReason::Period => "period",
            CutReason::Unfusible => "unfusible",
            CutReason::ModeSwitch => "mode_switch",
            CutReason::Shutdown => "shutdown",
        }
    }

    pub fn index(self) -> usize {
        CutReason::ALL.iter().position(|r| *r == self).unwrap_or(0)
    }
}

/// The window's size limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowLimits {
    /// Most ops in one chunk.
    pub max_ops: usize,
    /// Most parameters (input buffers) of one chunk.
    pub max_params: usize,
}

impl Default for WindowLimits {
    fn default() -> Self {
        WindowLimits {
            max_ops: 512,
            max_params: 256,
        }
    }
}

/// Signatures remembered.
const HISTORY: usize = 256;
/// Periods looked for: 2..=MAX_PERIOD.
const MAX_PERIOD: usize = HISTORY / 2;
const MIN_PERIOD: usize = 2;
const PERIODS: usize = MAX_PERIOD - MIN_PERIOD + 1;
/// Runs stop counting here (far past any period).
const RUN_CAP: u32 = 1 << 30;

/// The fused-mode cut policy for one op stream.
pub struct Window {
    limits: WindowLimits,
    /// The last `HISTORY` signatures, written twice (at `i` and `i + HISTORY`)
    /// so the ones before any position form one contiguous slice.
    history: [u64; 2 * HISTORY],
    /// Ops seen so far.
    seen: usize,
    /// `run[k]`, for period `p = MAX_PERIOD - k`: how many of the latest ops
    /// equal the op `p` before them. (Laid out like `history`, so the update
    /// is one vectorizable pass.)
    run: [u32; PERIODS],
    period: Option<usize>,
}

impl Window {
    pub fn new(limits: WindowLimits) -> Window {
        Window {
            limits: WindowLimits {
                max_ops: limits.max_ops.max(1),
                max_params: limits.max_params.max(1),
            },
            history: [0; 2 * HISTORY],
            seen: 0,
            run: [0; PERIODS],
            period: None,
        }
    }

    pub fn limits(&self) -> WindowLimits {
        self.limits
    }

    /// The current period of the op stream, if it repeats.
    pub fn period(&self) -> Option<usize> {
        self.period
    }

    /// Called after an op with `signature` joins the pending chunk, which now
    /// holds `ops` ops and `params` parameters. Returns a reason to cut now.
    pub fn record(&mut self, signature: u64, ops: usize, params: usize) -> Option<CutReason> {
        let at = self.seen % HISTORY + HISTORY;
        // `before[k]` is the signature `MAX_PERIOD - k` ops back (zeros before
        // the stream started; a zero signature is as good as impossible).
        let before = &self.history[at - MAX_PERIOD..at - MIN_PERIOD + 1];
        for (run, &old) in self.run.iter_mut().zip(before) {
            *run = if old == signature {
                (*run + 1).min(RUN_CAP)
            } else {
                0
            };
        }
        self.history[at] = signature;
        self.history[at - HISTORY] = signature;
        self.seen += 1;
        // The smallest period whose last two repetitions match.
        self.period = (0..PERIODS)
            .rev()
            .map(|k| (MAX_PERIOD - k, self.run[k]))
            .find(|&(p, run)| run as usize >= p)
            .map(|(p, _)| p);

        if params >= self.limits.max_params {
            return Some(CutReason::WindowParams);
        }
        if let Some(p) = self.period {
            let chunk = p * (self.limits.max_ops / p).max(1);
            if ops >= chunk {
                return Some(CutReason::Period);
            }
        }
        if ops >= self.limits.max_ops {
            return Some(CutReason::WindowOps);
        }
        None
    }

    /// Forgets the stream (after a mode switch).
    pub fn reset(&mut self) {
        *self = Window::new(self.limits);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `stream` (signatures), cutting when the policy says; returns the
    /// chunks as (start, length, reason).
    fn cuts(limits: WindowLimits, stream: &[u64]) -> Vec<(usize, usize, CutReason)> {
        let mut w = Window::new(limits);
        let mut out = vec![];
        let mut start = 0;
        for (i, &s) in stream.iter().enumerate() {
            let ops = i + 1 - start;
            if let Some(r) = w.record(s, ops, 0) {
                out.push((start, ops, r));
                start = i + 1;
            }
        }
        out
    }

    fn limits(max_ops: usize) -> WindowLimits {
        WindowLimits {
            max_ops,
            max_params: 1000,
        }
    }

    #[test]
    fn given_a_stream_without_repeats_when_the_window_fills_should_cut_at_the_limit() {
        let stream: Vec<u64> = (0..100).collect();
        let c = cuts(limits(32), &stream);
        assert_eq!(c.len(), 3);
        assert!(
            c.iter()
                .all(|&(_, len, r)| len == 32 && r == CutReason::WindowOps)
        );
    }

    #[test]
    fn given_a_training_loop_when_it_repeats_should_cut_chunks_that_repeat_exactly() {
        // A 10-op prologue, then a 37-op step forever.
        let step: Vec<u64> = (100..137).collect();
        let mut stream: Vec<u64> = (0..10).collect();
        for _ in 0..40 {
            stream.extend(&step);
        }
        let c = cuts(limits(128), &stream);
        // After the first period cut, every chunk is 3 steps long and starts at
        // the same phase of the step: the same program every time.
        let first_period = c
            .iter()
            .position(|&(_, _, r)| r == CutReason::Period)
            .unwrap();
        let steady = &c[first_period + 1..];
        assert!(steady.len() >= 10);
        for &(start, len, reason) in steady {
            assert_eq!((len, reason), (3 * 37, CutReason::Period));
            assert_eq!(
                stream[start..start + len],
                stream[steady[0].0..steady[0].0 + len]
            );
        }
    }

    #[test]
    fn given_a_repeating_chain_when_a_read_comes_first_should_not_cut_early() {
        // 6-op period, window 512: a 200-op chain stays one chunk.
        let stream: Vec<u64> = (0..200).map(|i| i % 6).collect();
        let c = cuts(limits(512), &stream);
        assert!(c.is_empty(), "{c:?}");
    }

    #[test]
    fn given_a_period_longer_than_the_window_should_fall_back_to_the_limit() {
        let stream: Vec<u64> = (0..400).map(|i| i % 100).collect();
        let c = cuts(limits(64), &stream);
        assert!(c.iter().all(|&(_, len, _)| len <= 100), "{c:?}");
    }

    #[test]
    fn given_many_parameters_should_cut_on_the_parameter_limit() {
        let mut w = Window::new(WindowLimits {
            max_ops: 100,
            max_params: 4,
        });
        assert_eq!(w.record(1, 1, 3), None);
        assert_eq!(w.record(2, 2, 4), Some(CutReason::WindowParams));
    }

    #[test]
    fn reasons_have_stable_indices_and_names() {
        for (i, r) in CutReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
            assert!(!r.name().is_empty());
        }
    }
}
