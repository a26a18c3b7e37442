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
//!   repeats it), and the long one does not cut either in the gap where the
//!   short one stopped matching and is not yet found again (the next call's
//!   first steps). Signatures hold ops, dtypes and ranks, not sizes
//!   (`stream::record`): a decode step whose mask grows is one period. Periods
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
//!   loss of a training step, read at the step's end), the chunk ends where
//!   the value is computed instead: it is launched there and computes while
//!   the rest of the step records, so the read finds its value launched,
//!   launches nothing and hardly waits, and the device runs the rest of the
//!   step while the host records the next. One launch per step, as with no
//!   read at all (a period longer than a window keeps its segments and ends
//!   one at the lead too). A read every step then costs little more than a
//!   read every N steps.
//! - **Length.** A period of at least an eighth of the window is a chunk of
//!   its own; shorter ones are grouped, as many as fit after the last cut
//!   (cut at a period boundary where the next one would overflow); a longer
//!   one is cut into `ceil(period / max_ops)` equal
//!   segments at fixed offsets from its phase.

mod drift;
pub use drift::SizeDrift;

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
    /// A compiled graph (`torch.compile`) starts or ends: its ops are one
    /// chunk of their own.
    Graph,
    /// An event is recorded (`torch.tpu.Event.record`): the work before it
    /// is launched, so that the event completes when that work does.
    Event,
}

impl CutReason {
    pub const ALL: [CutReason; 12] = [
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
        CutReason::Graph,
        CutReason::Event,
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
            CutReason::Graph => "graph",
            CutReason::Event => "event",
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
/// The fewest ops between a value's computation and its read for a short
/// period to lead (`Window::lead`).
const SHORT_LEAD_LAG: u64 = 16;

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
    /// A period that fit in one chunk and stopped matching: its length and
    /// where it stopped (see `update_phase`).
    lost_short: Option<(usize, u64)>,
    /// The latest read at the phase's origin that recurred in the two
    /// periods before it (see `reads_at_origin`). It changes only with the
    /// reads and the phase, so it is found there, not at every op of a
    /// short period (that search was ~3% of a Rust chain's profile).
    origin_read: Option<u64>,
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
            lost_short: None,
            origin_read: None,
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
    ///
    /// Returns whether the period cuts here: a read that recurs where a
    /// chunk of the period starts cuts the pending chunk, even if the value
    /// it reads was launched before (by a lead), since the period waits for
    /// it to cut (`cuts_after`).
    pub fn host_read(&mut self, computed_at: Option<u64>) -> bool {
        let lag = computed_at
            .filter(|&c| c <= self.seen)
            .map(|c| self.seen - c);
        if let Some(last) = self.reads.back_mut()
            && last.at == self.seen
        {
            // Two reads at one place: the earlier value leads.
            last.lag = last.lag.max(lag);
            return self.period_cut_at_read();
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
        self.origin_read = self.find_origin_read();
        self.period_cut_at_read()
    }

    /// Whether the ops seen so far end a period at a read that recurs there
    /// (the read just made).
    fn period_cut_at_read(&self) -> bool {
        self.phase.is_some_and(|phase| {
            !self.leads(phase)
                && (self.seen - phase.origin).is_multiple_of(phase.period as u64)
                && self.reads_at_origin(phase)
        })
    }

    /// Whether the period's one cut is its lead: a period that fits in a
    /// chunk and reads a value computed well before the read is cut where
    /// the value is computed, not at the read too. Its chunk (from one lead
    /// to the next) is launched while the rest of the period records, the
    /// read finds its value launched and launches nothing: one launch per
    /// period, not two (each costs the host tens of microseconds on the CPU
    /// plugin).
    fn leads(&self, phase: Phase) -> bool {
        phase.lead.is_some() && phase.period <= self.limits.max_ops && self.lead_holds(phase)
    }

    /// Whether `phase`'s lead cuts: always for a period of a useful size (a
    /// chunk of its own anyway); a short one, which is grouped with others
    /// into one chunk, only while the reads that placed the lead go on (the
    /// read cut each period anyway: a 52-op SGD step read every step cut at
    /// the read, launching there and waiting, where a longer step was
    /// launched at its loss). Once they stop, it is grouped again.
    fn lead_holds(&self, phase: Phase) -> bool {
        let p = phase.period as u64;
        p * 8 >= self.limits.max_ops as u64
            || self.reads.back().is_some_and(|r| r.at + 2 * p >= self.seen)
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
        let lag_at = |at: u64| self.reads.iter().find(|r| r.at == at).and_then(|r| r.lag);
        self.reads.iter().rev().find_map(|r| {
            let lag = r.lag?;
            // The read recurs (three periods); its value's place in two is
            // enough (a first step differs: an optimizer's lazy state).
            let repeats = self.recurring(r.at, p, began) && lag_at(r.at - p) == Some(lag);
            let offset = (r.at - lag + p - origin % p) % p;
            // A short period (grouped when nothing reads) leads only for a
            // value computed well before its read: the ops recorded meanwhile
            // are what the early launch overlaps, and a few are not worth
            // moving its cut (`x = x - g * lr; x.sync()` would split each
            // update from its product).
            let short = p * 8 < self.limits.max_ops as u64;
            let far = lag * 8 >= p && (!short || lag >= SHORT_LEAD_LAG);
            (repeats && far && lag < p && offset != 0).then_some(offset)
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
        // Nor does a long period take over in the gap where a short one
        // stopped matching and has not been found again (the start of the
        // next generate() call, whose first step differs a little): its
        // cuts would fall at other offsets of the step at every call. For
        // three short periods (one to differ, one to propose it again, one to
        // confirm it) the reads cut, as before it was found.
        let long = LONG_PERIOD_WINDOWS * self.limits.max_ops;
        let in_gap = self
            .lost_short
            .is_some_and(|(p, at)| self.seen - at <= 3 * p as u64);
        let best = match longest(false) {
            Some(c) if c.period > long => match longest(true) {
                Some(fits) => Some(fits),
                None if in_gap => None,
                None => Some(c),
            },
            best => best,
        };
        // (A shorter period found and lost inside the gap, the layers of the
        // step, does not end it.)
        if let Some(phase) = self.phase
            && phase.period <= self.limits.max_ops
            && best.is_none_or(|c| c.period != phase.period)
            && !(in_gap && self.lost_short.is_some_and(|(p, _)| p >= phase.period))
        {
            self.lost_short = Some((phase.period, self.seen));
        }
        match (best, self.phase) {
            (None, None) => {}
            (None, Some(_)) => {
                self.phase = None;
                self.origin_read = None;
            }
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
                self.origin_read = self.find_origin_read();
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

    /// Whether a read recurring every period at `phase`'s origin came in
    /// the last two periods.
    fn reads_at_origin(&self, phase: Phase) -> bool {
        self.origin_read
            .is_some_and(|at| at + 2 * phase.period as u64 >= self.seen)
    }

    /// The latest read at the current phase's origin (modulo its period)
    /// that recurred in the two periods before it, since the phase began.
    fn find_origin_read(&self) -> Option<u64> {
        let phase = self.phase?;
        let p = phase.period as u64;
        self.reads
            .iter()
            .rev()
            .map(|r| r.at)
            .find(|&at| at % p == phase.origin % p && self.recurring(at, p, phase.began))
    }

    /// Whether the ops seen so far end a chunk of `phase`'s period, the
    /// pending chunk holding `ops` ops.
    fn cuts_after(&self, phase: Phase, ops: usize) -> bool {
        let p = phase.period as u64;
        let max = self.limits.max_ops as u64;
        let r = (self.seen - phase.origin) % p;
        if phase.lead == Some(r) && self.lead_holds(phase) {
            return true;
        }
        if self.leads(phase) {
            return false;
        }
        if r <= 1 && self.reads_at_origin(phase) {
            // The loop reads here every period: the read cuts, after the
            // caller has dropped the step's temporaries, as it cut the
            // period's first chunks (cut while they were still held, the
            // chunk would export them: another program). If the read does
            // not come, the chunk ends one op late.
            return r == 1 && ops > 1 && !self.read_at(self.seen - 1);
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
mod tests;
