//! When the fuser cuts the op stream into chunks: a pure decision over op
//! signatures and chunk sizes, testable without a device.
//!
//! Besides the explicit triggers (a host read, `sync()`, a mode switch, an op
//! that cannot fuse, shutdown), fused mode cuts when the pending chunk reaches
//! the window limits (ops, parameters), and aligns cuts with the loop of the
//! program, so that a training or decode loop settles on a fixed set of chunks
//! (each compiled once):
//!
//! - **Period.** The stream's period is found from recurring 8-op sequences:
//!   each proposes the distance back to its last occurrence as a candidate
//!   period, and a candidate stays while every later op equals the op one
//!   period before it. A candidate that has matched a whole period is
//!   confirmed; the confirmed candidate with the longest match is the period
//!   (a step's repeated layers propose the layer length too, but only the
//!   step's own period keeps matching across step boundaries), except that a
//!   confirmed period short enough for one chunk wins over one longer than
//!   four windows (a decode step over the whole `generate()` call that
//!   repeats it). Periods
//!   of 2 to `MAX_PERIOD` ops are found.
//! - **Phase.** Where in the period chunks start is a property of the ops
//!   alone: the rotation of one period that is smallest in signature order.
//!   A host read, a CPU fallback or a mode switch in the middle of a step cuts
//!   there too, but never moves where the period cuts next: the window never
//!   sees cuts, only ops. Except one kind of read, which is as much a part of
//!   the loop as its ops: a host read that recurs at the same place in every
//!   period (the loss a training step logs, the token a decode step reads).
//!   Once one has recurred twice, the phase starts at it, so that the
//!   period's cut and the read's cut coincide: one chunk per period, not two.
//!   Only while the period is young (its first few repetitions): a loop that
//!   starts reading every step later keeps the chunks it has compiled.
//! - **Lead.** When such a read reads a value computed well before it (the
//!   loss of a training step, read at the step's end), a chunk also ends
//!   where the value is computed: it is launched there and computes while the
//!   rest of the step records, so the read hardly waits, and the device runs
//!   the rest of the step while the host records the next. A read every step
//!   then costs little more than a read every N steps.
//! - **Length.** A period of at least an eighth of the window is a chunk of
//!   its own; shorter ones are grouped, as many as fit after the last cut
//!   (cut at a period boundary where the next one would overflow); a longer
//!   one is cut into `ceil(period / max_ops)` equal
//!   segments at fixed offsets from its phase.

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
    /// Another thread's op reads a value pending in this thread's trace.
    CrossThread,
}

impl CutReason {
    pub const ALL: [CutReason; 10] = [
        CutReason::EveryOp,
        CutReason::HostRead,
        CutReason::Sync,
        CutReason::WindowOps,
        CutReason::WindowParams,
        CutReason::Period,
        CutReason::Unfusible,
        CutReason::ModeSwitch,
        CutReason::Shutdown,
        CutReason::CrossThread,
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
            CutReason::CrossThread => "cross_thread",
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

/// Signatures remembered (a power of two).
const HISTORY: usize = 1 << 15;
/// Periods looked for: `MIN_PERIOD..=MAX_PERIOD` ops.
pub const MAX_PERIOD: usize = HISTORY / 2;
const MIN_PERIOD: usize = 2;
/// Ops in the sequences that propose candidate periods.
const GRAM: usize = 8;
/// Slots of the table of last occurrences (a power of two; direct-mapped).
const GRAM_SLOTS: usize = 1 << 15;
/// Candidate periods tracked at once.
const CANDIDATES: usize = 8;
/// A period longer than this many windows yields to a confirmed one that
/// fits in one.
const LONG_PERIOD_WINDOWS: usize = 4;
/// Equal smallest signatures compared when finding a period's phase.
const PHASE_TIES: usize = 16;
/// Host read positions remembered (to find reads that recur every period).
const READS: usize = 16;
/// Periods after it was found during which a recurring read may still move a
/// period's phase; later, the chunks it cuts are compiled, and it stays.
const READ_ALIGN_PERIODS: u64 = 4;

/// A candidate period and how many of the latest ops matched the op one
/// period before them.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    period: usize,
    run: usize,
}

/// The period cuts line up with: `origin` is the position of an op that
/// starts a chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Phase {
    period: usize,
    origin: u64,
    /// Ops seen when the period was found.
    since: u64,
    /// Where the repetition that found it began: reads before it belong to
    /// another loop (a previous model's, at other offsets) and place nothing.
    began: u64,
    /// Where in the period (ops after `origin`) a value the period reads
    /// later is computed: a chunk ends there too (see `Window::host_read`).
    lead: Option<u64>,
}

/// A host read: where it happened (ops seen before it), and how many ops
/// before it the value it read was computed (when that was still pending).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Read {
    at: u64,
    lag: Option<u64>,
}

/// The fused-mode cut policy for one op stream.
pub struct Window {
    limits: WindowLimits,
    /// The last `HISTORY` signatures, by position modulo `HISTORY`.
    history: Vec<u64>,
    /// Ops seen so far.
    seen: u64,
    /// Hash of an 8-op sequence -> (hash, position after its last op).
    grams: Vec<(u64, u64)>,
    candidates: Vec<Candidate>,
    phase: Option<Phase>,
    /// The latest host reads, oldest first.
    reads: std::collections::VecDeque<Read>,
}

impl Window {
    pub fn new(limits: WindowLimits) -> Window {
        Window {
            limits: WindowLimits {
                max_ops: limits.max_ops.max(1),
                max_params: limits.max_params.max(1),
            },
            history: vec![0; HISTORY],
            seen: 0,
            grams: vec![(0, 0); GRAM_SLOTS],
            candidates: Vec::with_capacity(CANDIDATES + 1),
            phase: None,
            reads: std::collections::VecDeque::with_capacity(READS),
        }
    }

    pub fn limits(&self) -> WindowLimits {
        self.limits
    }

    /// Ops seen so far.
    pub fn seen(&self) -> u64 {
        self.seen
    }

    /// The period and the position of an op that starts a chunk, if the
    /// stream repeats.
    pub fn phase(&self) -> Option<(usize, u64)> {
        self.phase.map(|p| (p.period, p.origin))
    }

    /// The current period of the op stream, if it repeats.
    pub fn period(&self) -> Option<usize> {
        self.phase.map(|p| p.period)
    }

    /// Called when the host reads a value of this stream (or a CPU fallback
    /// does), after the ops seen so far; `computed_at` is the position just
    /// after the op that computed the value read (`seen` then), if known. A read
    /// that recurs at the same place in every period moves the phase there,
    /// and if the value it reads is computed well before it (a loss read at
    /// the end of a step), a chunk ends where the value is computed too: the
    /// value is launched there and computes while the rest of the period
    /// records, so the read rarely waits, and the device runs the rest of
    /// the period while the host records the next one.
    pub fn host_read(&mut self, computed_at: Option<u64>) {
        let lag = computed_at
            .filter(|&c| c <= self.seen)
            .map(|c| self.seen - c);
        if let Some(last) = self.reads.back_mut()
            && last.at == self.seen
        {
            // Two reads at one place: the earlier value leads.
            last.lag = last.lag.max(lag);
            return;
        }
        if self.reads.len() == READS {
            self.reads.pop_front();
        }
        self.reads.push_back(Read { at: self.seen, lag });
        if let Some(phase) = self.phase
            && self.seen - phase.since <= READ_ALIGN_PERIODS * phase.period as u64
        {
            let origin = self.read_aligned(phase.period, phase.began, phase.origin);
            // A lead is placed once (the value it launches is no longer
            // pending when read); it moves only with the phase.
            let kept = if origin == phase.origin {
                phase.lead
            } else {
                None
            };
            self.phase = Some(Phase {
                origin,
                lead: self.lead(phase.period, phase.began, origin).or(kept),
                ..phase
            });
        }
    }

    /// Whether a read happened at `at`.
    fn read_at(&self, at: u64) -> bool {
        self.reads.iter().any(|r| r.at == at)
    }

    /// Whether the read at `r` recurred in the two periods before it, since
    /// `began`.
    fn recurring(&self, r: u64, p: u64, began: u64) -> bool {
        r >= 2 * p + began && self.read_at(r - p) && self.read_at(r - 2 * p)
    }

    /// `origin`, or the position of the latest read that recurred in the two
    /// periods before it (since `began`), unless `origin` is itself at such a
    /// read's place.
    fn read_aligned(&self, period: usize, began: u64, origin: u64) -> u64 {
        let p = period as u64;
        let mut recurring_reads = self
            .reads
            .iter()
            .rev()
            .map(|r| r.at)
            .filter(|&r| self.recurring(r, p, began));
        let Some(latest) = recurring_reads.next() else {
            return origin;
        };
        if self
            .reads
            .iter()
            .any(|r| self.recurring(r.at, p, began) && r.at % p == origin % p)
        {
            return origin;
        }
        latest
    }

    /// Where in the period (ops after `origin`) the value of a read that
    /// recurs every period is computed, when that is far enough before the
    /// read to be worth a chunk of its own (an eighth of the period): the
    /// latest such read (recurring since `began`) whose value came the same
    /// number of ops before it in this period and the one before.
    fn lead(&self, period: usize, began: u64, origin: u64) -> Option<u64> {
        let p = period as u64;
        if p * 8 < self.limits.max_ops as u64 {
            // Short periods are grouped into one chunk: nothing to lead.
            return None;
        }
        let lag_at = |at: u64| self.reads.iter().find(|r| r.at == at).and_then(|r| r.lag);
        self.reads.iter().rev().find_map(|r| {
            let lag = r.lag?;
            // The read recurs (three periods); its value's place in two is
            // enough (a first step differs: an optimizer's lazy state).
            let repeats = self.recurring(r.at, p, began) && lag_at(r.at - p) == Some(lag);
            let offset = (r.at - lag + p - origin % p) % p;
            (repeats && lag * 8 >= p && lag < p && offset != 0).then_some(offset)
        })
    }

    fn at(&self, position: u64) -> u64 {
        self.history[position as usize % HISTORY]
    }

    /// Called after an op with `signature` joins the pending chunk, which now
    /// holds `ops` ops and `params` parameters. Returns a reason to cut now.
    pub fn record(&mut self, signature: u64, ops: usize, params: usize) -> Option<CutReason> {
        let at = self.seen;
        self.history[at as usize % HISTORY] = signature;
        self.seen += 1;
        self.update_candidates(at, signature);
        self.update_phase();

        if params >= self.limits.max_params {
            return Some(CutReason::WindowParams);
        }
        if self.phase.is_some_and(|p| self.cuts_after(p, ops)) {
            return Some(CutReason::Period);
        }
        if ops >= self.limits.max_ops {
            return Some(CutReason::WindowOps);
        }
        None
    }

    /// Checks every candidate against the op at `at`, then proposes the
    /// distance back to the last occurrence of the 8 ops ending here.
    fn update_candidates(&mut self, at: u64, signature: u64) {
        let history = &self.history;
        self.candidates.retain_mut(|c| {
            let matched = at >= c.period as u64
                && history[(at - c.period as u64) as usize % HISTORY] == signature;
            c.run += 1;
            matched
        });
        if at + 1 < GRAM as u64 {
            return;
        }
        let mut gram = 0xcbf2_9ce4_8422_2325u64;
        for back in 0..GRAM as u64 {
            gram = (gram ^ self.at(at - back)).wrapping_mul(0x0100_0000_01b3);
            gram = gram.rotate_left(23);
        }
        let slot = &mut self.grams[gram as usize % GRAM_SLOTS];
        let last = (slot.0 == gram).then_some(slot.1);
        *slot = (gram, at + 1);
        let Some(last) = last else { return };
        let period = (at + 1 - last) as usize;
        if !(MIN_PERIOD..=MAX_PERIOD).contains(&period)
            || self.candidates.iter().any(|c| c.period == period)
        {
            return;
        }
        if self.candidates.len() == CANDIDATES {
            // Evict the shortest match, never the current period.
            let current = self.period();
            if let Some(worst) = self
                .candidates
                .iter()
                .enumerate()
                .filter(|(_, c)| Some(c.period) != current)
                .min_by_key(|(_, c)| c.run)
                .map(|(i, _)| i)
            {
                self.candidates.swap_remove(worst);
            } else {
                return;
            }
        }
        self.candidates.push(Candidate { period, run: GRAM });
    }

    /// The period is the confirmed candidate with the longest match; a new
    /// period gets its phase from its ops, and from the reads made since the
    /// stream began repeating it.
    fn update_phase(&mut self) {
        let longest = |fits: bool| {
            self.candidates
                .iter()
                .filter(|c| c.run >= c.period && (!fits || c.period <= self.limits.max_ops))
                .max_by(|a, b| a.run.cmp(&b.run).then(b.period.cmp(&a.period)))
                .copied()
        };
        // A period that fits in one chunk cuts at the loop's own boundaries;
        // a much longer one only at fixed offsets. So a decode step (one
        // token) wins over the whole generate() call it is part of, which
        // repeats too once a second call has begun, and matches longer. (A
        // training step of a few windows keeps its own period: its layers
        // repeat only within a step.)
        let best = match longest(false) {
            Some(c) if c.period > LONG_PERIOD_WINDOWS * self.limits.max_ops => {
                longest(true).or(Some(c))
            }
            best => best,
        };
        match (best, self.phase) {
            (None, _) => self.phase = None,
            (Some(c), Some(phase)) if phase.period == c.period => {}
            (Some(c), _) => {
                // The repetition began a period before the candidate was
                // proposed (its first instance), and the proposal came a
                // gram into the second: `run` counts from there. One more
                // period of margin keeps the first instance's own reads.
                let began = self.seen.saturating_sub((c.run + 2 * c.period) as u64);
                let origin = self.read_aligned(c.period, began, self.canonical_start(c.period));
                self.phase = Some(Phase {
                    period: c.period,
                    origin,
                    since: self.seen,
                    began,
                    lead: self.lead(c.period, began, origin),
                });
            }
        }
    }

    /// The position, among the last `period` ops, where the rotation of the
    /// period smallest in signature order starts.
    fn canonical_start(&self, period: usize) -> u64 {
        let first = self.seen - period as u64;
        let rotation = |start: u64, t: usize| {
            let offset = (start - first + t as u64) % period as u64;
            self.at(first + offset)
        };
        let smallest = (0..period as u64).map(|i| self.at(first + i)).min();
        let mut best: Option<u64> = None;
        let ties = (0..period as u64)
            .map(|i| first + i)
            .filter(|&q| Some(self.at(q)) == smallest)
            .take(PHASE_TIES);
        for q in ties {
            best = match best {
                None => Some(q),
                Some(b) => {
                    let order = (1..period)
                        .map(|t| rotation(q, t).cmp(&rotation(b, t)))
                        .find(|o| o.is_ne());
                    if order == Some(std::cmp::Ordering::Less) {
                        Some(q)
                    } else {
                        Some(b)
                    }
                }
            };
        }
        best.unwrap_or(first)
    }

    /// Whether the ops seen so far end a chunk of `phase`'s period, the
    /// pending chunk holding `ops` ops.
    fn cuts_after(&self, phase: Phase, ops: usize) -> bool {
        let p = phase.period as u64;
        let max = self.limits.max_ops as u64;
        let r = (self.seen - phase.origin) % p;
        if phase.lead == Some(r) {
            return true;
        }
        if p > max {
            // Equal segments of at most `max` ops, at fixed offsets.
            let segments = p.div_ceil(max);
            let j = (r * segments).div_ceil(p);
            return j * p / segments == r;
        }
        if r != 0 {
            return false;
        }
        // A period of a useful size is a chunk of its own, wherever the host
        // reads; short periods are grouped, as many as fit after the last
        // cut (a loop that reads every iteration cuts the same way each time).
        p * 8 >= max || ops as u64 + p > max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `stream` (signatures), cutting when the policy says and after
    /// every op `i` for which `reads(i)` names an op (a host read of the
    /// value that op computed, or a CPU fallback); returns the chunks as
    /// (start, length, reason).
    fn cuts_reading(
        limits: WindowLimits,
        stream: &[u64],
        reads: &dyn Fn(usize) -> Option<usize>,
    ) -> Vec<(usize, usize, CutReason)> {
        let mut w = Window::new(limits);
        let mut out = vec![];
        let mut start = 0;
        for (i, &s) in stream.iter().enumerate() {
            let ops = i + 1 - start;
            let mut reason = w.record(s, ops, 0);
            if let Some(k) = reads(i) {
                w.host_read(Some(k as u64 + 1));
                reason = reason.or(Some(CutReason::HostRead));
            }
            if let Some(r) = reason {
                out.push((start, ops, r));
                start = i + 1;
            }
        }
        out
    }

    /// As `cuts_reading`, each read reading the value of the op before it.
    fn cuts_with_reads(
        limits: WindowLimits,
        stream: &[u64],
        reads: &dyn Fn(usize) -> bool,
    ) -> Vec<(usize, usize, CutReason)> {
        cuts_reading(limits, stream, &|i| reads(i).then_some(i))
    }

    fn cuts(limits: WindowLimits, stream: &[u64]) -> Vec<(usize, usize, CutReason)> {
        cuts_with_reads(limits, stream, &|_| false)
    }

    /// A pseudo-random signature (a step of distinct ops).
    fn sig(i: u64) -> u64 {
        (i + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17) | 1
    }

    /// `prologue` distinct ops, then `steps` repetitions of `step`.
    fn loop_stream(prologue: u64, step: &[u64], steps: usize) -> Vec<u64> {
        let mut stream: Vec<u64> = (0..prologue).map(|i| sig(1_000_000 + i)).collect();
        for _ in 0..steps {
            stream.extend(step);
        }
        stream
    }

    /// The cuts of each step from `from` on: (offset in the step, length,
    /// reason) of the chunks that start in it.
    fn cuts_per_step(
        chunks: &[(usize, usize, CutReason)],
        prologue: usize,
        step: usize,
        from: usize,
    ) -> Vec<Vec<(usize, usize, CutReason)>> {
        let mut per_step: Vec<Vec<_>> = vec![];
        for &(start, len, reason) in chunks {
            if start < prologue + from * step {
                continue;
            }
            let k = (start - prologue) / step - from;
            per_step.resize(per_step.len().max(k + 1), vec![]);
            per_step[k].push(((start - prologue) % step, len, reason));
        }
        // The last step's last chunk is never cut.
        per_step.pop();
        per_step
    }

    /// Where the period cuts fell (the end of each chunk it cut).
    fn period_cuts(c: &[(usize, usize, CutReason)]) -> Vec<usize> {
        c.iter()
            .filter(|&&(_, _, r)| r == CutReason::Period)
            .map(|&(start, len, _)| start + len)
            .collect()
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
        // After the first period cut, every chunk is one step long and starts
        // at the same phase of the step: the same program every time.
        let first_period = c
            .iter()
            .position(|&(_, _, r)| r == CutReason::Period)
            .unwrap();
        let steady = &c[first_period + 1..];
        assert!(steady.len() >= 10);
        for &(start, len, reason) in steady {
            assert_eq!((len, reason), (37, CutReason::Period));
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
    fn given_a_loop_with_host_reads_and_a_fallback_should_cut_every_iteration_the_same_way() {
        // A 234-op step (an MLP step with AdamW) whose body reads the loss
        // (op 120) and falls back to the CPU for one op (op 200): both cut.
        let step: Vec<u64> = (0..234).map(sig).collect();
        let stream = loop_stream(37, &step, 30);
        let reads = |i: usize| i >= 37 && matches!((i - 37) % 234, 120 | 200);
        let c = cuts_with_reads(limits(512), &stream, &reads);
        let per_step = cuts_per_step(&c, 37, 234, 3);
        assert!(per_step.len() >= 26, "{c:?}");
        for s in &per_step {
            assert_eq!(s, &per_step[0], "{c:?}");
        }
        assert!(per_step[0].iter().any(|&(_, _, r)| r == CutReason::Period));
    }

    #[test]
    fn given_a_read_at_the_same_place_every_step_should_cut_once_per_step_there() {
        // A 301-op step that reads its result at op 180 of the step (the
        // smallest rotation starts elsewhere): once the read has recurred,
        // the period's cut is the read's, and each step is one chunk.
        let step: Vec<u64> = (0..301).map(sig).collect();
        let stream = loop_stream(19, &step, 20);
        let reads = |i: usize| i >= 19 && (i - 19) % 301 == 180;
        let c = cuts_with_reads(limits(512), &stream, &reads);
        let per_step = cuts_per_step(&c, 19, 301, 4);
        assert!(per_step.len() >= 14, "{c:?}");
        for s in &per_step {
            assert_eq!(s, &[(181, 301, CutReason::Period)], "{c:?}");
        }
    }

    #[test]
    fn given_a_second_loop_reading_every_step_should_align_to_its_own_reads() {
        // A 301-op step read at its end every step, run 12 times; 37 ops of
        // set-up (a new model and optimizer); the same loop again, now 37 ops
        // later in the period. The first loop's reads are at other offsets:
        // the second loop's phase must come from its own reads, within its
        // first four steps, so that each of its steps is one chunk ending at
        // its read.
        let step: Vec<u64> = (0..301).map(sig).collect();
        let first = loop_stream(19, &step, 12);
        let second_at = first.len() + 37;
        let mut stream = first.clone();
        stream.extend((0..37).map(|i| sig(2_000_000 + i)));
        stream.extend(step.iter().cycle().take(12 * 301));
        let reads = |i: usize| {
            let end = |start: usize| i >= start && (i - start) % 301 == 300;
            if i < first.len() {
                end(19)
            } else {
                end(second_at)
            }
        };
        let c = cuts_with_reads(limits(512), &stream, &reads);
        let settled: Vec<_> = c
            .iter()
            .filter(|&&(start, _, _)| start >= second_at + 4 * 301)
            .collect();
        assert!(settled.len() >= 7, "{settled:?}");
        for &&(start, len, reason) in &settled[..settled.len() - 1] {
            assert_eq!(
                ((start - second_at) % 301, len, reason),
                (0, 301, CutReason::Period),
                "{settled:?}"
            );
        }
    }

    #[test]
    fn given_a_value_read_long_after_it_is_computed_should_end_a_chunk_where_it_is_computed() {
        // A 234-op training step computes its loss at op 40 and reads it at
        // its end, every step: once settled, each step is a 41-op chunk
        // ending at the loss (launched while the backward pass records) and
        // a 193-op chunk ending at the read, the same every step.
        let step: Vec<u64> = (0..234).map(sig).collect();
        let stream = loop_stream(37, &step, 30);
        let reads = |i: usize| (i >= 37 && (i - 37) % 234 == 233).then(|| i - 193);
        let c = cuts_reading(limits(512), &stream, &reads);
        let steps = cuts_per_step(&c, 37, 234, 5);
        assert!(steps.len() >= 20, "{c:?}");
        for s in &steps {
            assert_eq!(
                s,
                &vec![(0, 41, CutReason::Period), (41, 193, CutReason::Period)],
                "{c:?}"
            );
        }
    }

    #[test]
    fn given_a_value_read_right_after_it_is_computed_should_not_add_a_chunk() {
        // A decode step reads the token it computes last: one chunk a step.
        let step: Vec<u64> = (0..300).map(sig).collect();
        let stream = loop_stream(11, &step, 20);
        let reads = |i: usize| (i >= 11 && (i - 11) % 300 == 299).then(|| i - 3);
        let c = cuts_reading(limits(512), &stream, &reads);
        for s in cuts_per_step(&c, 11, 300, 5) {
            assert_eq!(s, vec![(0, 300, CutReason::Period)], "{c:?}");
        }
    }

    #[test]
    fn given_a_long_step_reading_a_value_computed_early_should_cut_every_step_the_same_way() {
        // A 1,500-op step (three segments) computes its loss at op 400 and
        // reads it at op 1,499: segments and the loss's chunk end at the same
        // offsets every step, one of them at the loss.
        let step: Vec<u64> = (0..1500).map(sig).collect();
        let stream = loop_stream(23, &step, 14);
        let reads = |i: usize| (i >= 23 && (i - 23) % 1500 == 1499).then(|| i - 1099);
        let c = cuts_reading(limits(512), &stream, &reads);
        let steps = cuts_per_step(&c, 23, 1500, 5);
        assert!(steps.len() >= 7, "{c:?}");
        assert!(
            steps[0].iter().any(|&(at, len, _)| at + len == 401),
            "{:?}",
            steps[0]
        );
        assert!(
            steps[0].iter().all(|&(_, len, _)| len <= 512),
            "{:?}",
            steps[0]
        );
        for s in &steps[1..] {
            assert_eq!(s, &steps[0], "{c:?}");
        }
    }

    #[test]
    fn given_reads_that_start_after_the_period_settled_should_not_move_it() {
        // A 301-op step run 10 times without a read, then read every step at
        // op 180: the chunks compiled by then keep their cuts.
        let step: Vec<u64> = (0..301).map(sig).collect();
        let stream = loop_stream(19, &step, 30);
        let reads = |i: usize| i >= 19 + 10 * 301 && (i - 19) % 301 == 180;
        let plain = cuts(limits(512), &stream);
        let read = cuts_with_reads(limits(512), &stream, &reads);
        assert_eq!(period_cuts(&plain), period_cuts(&read));
    }

    #[test]
    fn given_two_reads_every_step_should_keep_one_of_them_as_the_phase() {
        // The loss and an accuracy read at ops 60 and 200 of a 234-op step:
        // two chunks a step, at the same places every step.
        let step: Vec<u64> = (0..234).map(sig).collect();
        let stream = loop_stream(5, &step, 30);
        let reads = |i: usize| i >= 5 && matches!((i - 5) % 234, 60 | 200);
        let c = cuts_with_reads(limits(512), &stream, &reads);
        let per_step = cuts_per_step(&c, 5, 234, 4);
        assert!(per_step.len() >= 24, "{c:?}");
        for s in &per_step {
            assert_eq!(s, &per_step[0], "{c:?}");
            assert_eq!(s.len(), 2, "{c:?}");
        }
    }

    #[test]
    fn given_a_read_every_step_of_a_long_step_should_end_a_segment_at_the_read() {
        // A 1,500-op step (three segments) reading at op 700.
        let step: Vec<u64> = (0..1500).map(sig).collect();
        let stream = loop_stream(3, &step, 12);
        let reads = |i: usize| i >= 3 && (i - 3) % 1500 == 700;
        let c = cuts_with_reads(limits(512), &stream, &reads);
        let per_step = cuts_per_step(&c, 3, 1500, 4);
        assert!(per_step.len() >= 6, "{c:?}");
        for s in &per_step {
            assert_eq!(s, &per_step[0], "{c:?}");
            assert_eq!(s.len(), 3, "{c:?}");
            assert!(s.iter().any(|&(start, _, _)| start == 701), "{c:?}");
        }
    }

    #[test]
    fn given_reads_every_n_steps_should_not_move_the_period_cuts() {
        // Logging every 7 steps, at two different points of the step.
        let step: Vec<u64> = (0..234).map(sig).collect();
        let stream = loop_stream(11, &step, 60);
        let reads = |i: usize| {
            let (n, at) = ((i.max(11) - 11) / 234, (i.max(11) - 11) % 234);
            i >= 11 && ((n % 7 == 3 && at == 50) || (n % 7 == 5 && at == 180))
        };
        let plain = cuts(limits(512), &stream);
        let read = cuts_with_reads(limits(512), &stream, &reads);
        assert_eq!(period_cuts(&plain), period_cuts(&read));
        // A few kinds of chunk, whatever the reads: each compiles once.
        let kinds: std::collections::HashSet<&[u64]> = read
            .iter()
            .filter(|&&(start, _, _)| start > 11 + 3 * 234)
            .map(|&(start, len, _)| &stream[start..start + len])
            .collect();
        assert!(kinds.len() <= 5, "{} kinds of chunk", kinds.len());
    }

    #[test]
    fn given_a_2000_op_loop_without_reads_should_cut_every_iteration_the_same_way() {
        let step: Vec<u64> = (0..2000).map(sig).collect();
        let stream = loop_stream(123, &step, 12);
        let c = cuts(limits(512), &stream);
        let per_step = cuts_per_step(&c, 123, 2000, 3);
        assert!(per_step.len() >= 8);
        for s in &per_step {
            assert_eq!(s, &per_step[0], "{c:?}");
        }
        // Four segments of 500 ops, at the same offsets each time.
        assert_eq!(per_step[0].len(), 4, "{:?}", per_step[0]);
        assert!(
            per_step[0]
                .iter()
                .all(|&(_, len, r)| len == 500 && r == CutReason::Period)
        );
    }

    #[test]
    fn given_repeated_layers_in_a_step_should_find_the_step_not_the_layer() {
        // Embedding, four identical 40-op layers, a loss, an optimizer.
        let layer: Vec<u64> = (0..40).map(|i| sig(500 + i)).collect();
        let mut step: Vec<u64> = (0..10).map(sig).collect();
        for _ in 0..4 {
            step.extend(&layer);
        }
        step.extend((0..30).map(|i| sig(900 + i)));
        let mut w = Window::new(limits(4096));
        for &s in &loop_stream(5, &step, 6) {
            w.record(s, 1, 0);
        }
        assert_eq!(w.period(), Some(step.len()));
    }

    #[test]
    fn given_the_same_loop_started_at_another_point_should_cut_at_the_same_phase() {
        // The phase is a property of the ops: a loop entered one way or
        // another (another prologue, a read first) cuts at the same op.
        let step: Vec<u64> = (0..300).map(sig).collect();
        let offsets = |prologue: u64| {
            let c = cuts(limits(512), &loop_stream(prologue, &step, 8));
            c.iter()
                .filter(|&&(_, _, r)| r == CutReason::Period)
                .map(|&(start, len, _)| (start + len - prologue as usize) % 300)
                .collect::<std::collections::BTreeSet<_>>()
        };
        assert_eq!(offsets(0), offsets(77));
        assert_eq!(offsets(0).len(), 1);
    }

    #[test]
    fn given_a_stream_that_stops_repeating_should_drop_the_period() {
        let step: Vec<u64> = (0..50).map(sig).collect();
        let mut w = Window::new(limits(512));
        for &s in &loop_stream(0, &step, 4) {
            w.record(s, 1, 0);
        }
        assert_eq!(w.period(), Some(50));
        w.record(sig(99_999), 1, 0);
        assert_eq!(w.period(), None);
    }

    #[test]
    fn given_a_decode_loop_called_again_and_again_should_keep_the_step_period() {
        // generate(): a 40-op prefill, then 150 decode steps of 20 ops, called
        // five times. The whole call (3,040 ops) repeats too, and from the
        // third call on it has matched longer than the step, which restarts
        // at every prefill; the step, which fits in one chunk, still wins.
        let prefill: Vec<u64> = (1000..1040).map(sig).collect();
        let step: Vec<u64> = (0..20).map(sig).collect();
        let mut w = Window::new(limits(512));
        for _ in 0..5 {
            for &s in &prefill {
                w.record(s, 1, 0);
            }
            for _ in 0..150 {
                for &s in &step {
                    w.record(s, 1, 0);
                }
            }
            assert_eq!(w.period(), Some(20));
        }
    }

    #[test]
    fn reasons_have_stable_indices_and_names() {
        for (i, r) in CutReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
            assert!(!r.name().is_empty());
        }
    }
}
