//! One op stream per device: record -> infer -> window -> canonicalize ->
//! lower -> compile cache -> launch. The three modes differ only in when the
//! stream is cut: debug cuts after every op and waits; strict cuts after every
//! op and does not wait; fused asks the window policy.
//!
//! Each thread recording on a device appends to a trace of its own, with a
//! window of its own: two threads training two models at once each see their
//! own loop repeat, and cut it the same way every step. (The PyTorch backend
//! runs a thread's backward passes on the thread itself, so a training step's
//! forward pass, backward pass and optimizer step land in one trace.) An op
//! reading a value pending in another thread's trace first cuts that trace
//! (`cross_thread`), so no trace ever holds another's pending values; a host
//! read cuts the trace holding the value read and the reader's own; `sync()`
//! and a mode switch cut them all. At a cut, the pending nodes become one
//! `Graph`:
//! - ready inputs become parameters; a parameter nothing outside the chunk
//!   holds any more is donated to an output of its type (updated in place);
//! - scalars other than 0, 1 and -1 become 0-d parameters, so a learning rate
//!   or step count that changes every step never changes the program; RNG
//!   keys always do, whatever their value (a number operand outside a
//!   compiled graph is already a ready 0-d value, one per distinct number
//!   and stream, so it costs its ops no node: `Recorder::scalar`);
//! - a node's output leaves the device only if something outside the trace
//!   still holds it; nodes nothing needs are dropped.
//!
//! The stream's state (the traces, their windows, the scalar cache, the tiers)
//! is one lock. A cut that is the last thing its caller does under it (the
//! cut after a recorded call in strict and fused mode, a host read's) binds
//! its chunk there and returns it as a `Deferred`; the caller hands it to the
//! plugin after releasing the lock, and drops the chunk's trace nodes then
//! too (a cut of fused mode's window hands it to the stream's launcher thread
//! instead, and recording goes on: `launcher.rs`). Its exported values are in flight meanwhile (`Value`): another
//! thread's op or read that meets one waits until it is ready. The launched
//! chunks not yet known done are kept apart from the state, so a deferred
//! chunk joins them without the lock.
//!
//! In fused mode, a chunk that ran as a compiled program leaves a replay plan:
//! the next chunk of the same ops skips inference while it records and, if it
//! binds its tensors as the plan did, runs the plan's program without a graph
//! (`replay.rs`).
//!
//! Launch errors in strict and fused mode mark the chunk's results failed; the
//! error surfaces when something depending on them is read. A chunk of several
//! ops that fails to compile or execute is re-run op by op to name the op.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use fusion::DType;
use fusion::hash::FxBuild;
use fusion::policy::{CutReason, SizeDrift, Window};

use crate::completion::Completion;
use crate::config::Mode;
use crate::context::Runtime;
use crate::error::{Error, Result};
use crate::lock;
use crate::metrics::Counters;
use crate::pjrt::{Buffer, Device};
use crate::timing::{Stage, timed};
use crate::trace;
use crate::value::Value;

pub use crate::origin::Origin;

mod checks;
mod crowding;
mod donation;
mod graphs;
mod hazards;
mod launch;
mod launcher;
mod liveness;
mod record;
mod replay;
mod tiers;

pub(crate) use hazards::HazardChecker;
use launch::{Deferred, Param};
use liveness::{Launch, fail, liveness};
pub(crate) use record::Recorder;
use record::TraceNode;

/// Number values kept per stream (numbers repeat: a learning rate).
pub(super) const SCALAR_CACHE: usize = 4096;

/// The pending ops one thread recorded, and its cut policy's state.
pub(super) struct Trace {
    nodes: Vec<TraceNode>,
    /// Addresses of the ready values the pending nodes read (their parameters).
    params: HashSet<usize, FxBuild>,
    window: Window,
    /// Index checks not yet read (strict and fused mode).
    index: checks::IndexChecks,
    /// Chunks to replay, and which the one being recorded matches.
    replay: replay::Replay,
    /// The compiled graph being called on this thread, if any (`graphs.rs`).
    graph: Option<graphs::GraphScope>,
    /// While the sizes of this thread's ops change at every iteration (two
    /// chunks in a row split with most of their ops resized, `tiers.rs`):
    /// each call is launched as it is recorded, until the segments between
    /// host reads repeat.
    drift: Option<SizeDrift>,
    /// Chunks in a row split with most of their ops resized.
    resized_in_a_row: u32,
    /// The drift just ended: the next chunk is not split by comparing it
    /// with the last one of before the drift.
    refit: bool,
    /// The `OneOp` scope this thread recorded its last call in, and that
    /// call's number: the calls of one scope share it (`TraceNode::call`).
    scope_call: Option<(u64, u32)>,
}

impl Trace {
    fn new(limits: fusion::policy::WindowLimits) -> Trace {
        Trace {
            nodes: vec![],
            params: HashSet::default(),
            window: Window::new(limits),
            index: checks::IndexChecks::default(),
            replay: replay::Replay::default(),
            graph: None,
            drift: None,
            resized_in_a_row: 0,
            refit: false,
            scope_call: None,
        }
    }
}

/// Traces of threads other than the active one kept at most: past this, the
/// empty ones are dropped (a thread that comes back starts a new window).
const MAX_PARKED_TRACES: usize = 64;

thread_local! {
    /// This thread's trace key (the same on every device).
    static TRACE_KEY: u32 = {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    };
}

fn this_thread_trace() -> u32 {
    TRACE_KEY.with(|k| *k)
}

thread_local! {
    /// How many `OneOp` scopes this thread is in.
    static ONE_OP_DEPTH: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    /// Outermost `OneOp` scopes this thread has entered: the number of the
    /// one it is in, if any. (A trace is one thread's, so the number need
    /// not be unique across threads.)
    static ONE_OP_SCOPE: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// While alive, the calls this thread records are one op to debug and
/// strict modes: they are not cut after each call, and when the outermost
/// scope has ended they are cut together ([`Stream::end_one_op`]), so they
/// run as one program. A `_foreach` op over a list, or a fused optimizer
/// step over every parameter, is one op of the caller's; it launches once,
/// not once per tensor. Fused mode cuts as its window says, scope or not.
pub(crate) struct OneOp(());

impl OneOp {
    pub(crate) fn enter() -> OneOp {
        OneOp::begin();
        OneOp(())
    }

    /// Enters a scope with no guard (the C ABI's: [`OneOp::leave`] ends it).
    pub(crate) fn begin() {
        let depth = ONE_OP_DEPTH.with(|d| {
            d.set(d.get() + 1);
            d.get()
        });
        if depth == 1 {
            ONE_OP_SCOPE.with(|s| s.set(s.get().wrapping_add(1)));
        }
    }

    /// Leaves a scope entered without a guard; false if this thread is in
    /// none.
    pub(crate) fn leave() -> bool {
        ONE_OP_DEPTH.with(|d| match d.get() {
            0 => false,
            n => {
                d.set(n - 1);
                true
            }
        })
    }

    /// How many scopes this thread is in.
    pub(crate) fn depth() -> u32 {
        ONE_OP_DEPTH.with(|d| d.get())
    }

    /// The outermost scope this thread is in, if any (a number no other
    /// scope of this thread has).
    fn current() -> Option<u64> {
        (OneOp::depth() > 0).then(|| ONE_OP_SCOPE.with(|s| s.get()))
    }
}

impl Drop for OneOp {
    fn drop(&mut self) {
        OneOp::leave();
    }
}

pub(super) struct StreamState {
    /// The trace of thread `active` (the last one to record here).
    trace: Trace,
    active: u32,
    /// The other threads' traces, by key.
    parked: Vec<(u32, Trace)>,
    /// The other threads that recorded here lately: how many record at once.
    recent: crowding::Recent,
    limits: fusion::policy::WindowLimits,
    /// Numbers as ready 0-d values, by dtype and bits: the operands of ops
    /// outside compiled graphs (`Recorder::scalar`), and the buffers of the
    /// scalars lifted at a cut (`Stream::lifted_scalar`).
    numbers: HashMap<(DType, u64), Arc<Value>, FxBuild>,
    /// Fused chunks seen, and those compiling in the background.
    tiers: tiers::Tiers,
    /// API calls recorded (numbers each call's nodes).
    calls: u32,
    /// The replay plans of each compiled graph, by graph id (`graphs.rs`).
    graph_plans: HashMap<u64, replay::Replay, FxBuild>,
    /// The chunk of the graph call closed last on this stream, if it was one.
    last_graph_launch: Option<graphs::GraphLaunch>,
    /// Graphs called directly, by graph id.
    direct_calls: HashMap<u64, Arc<graphs::DirectCall>, FxBuild>,
}

/// A chunk a recorded call's cut bound, and who hands it to the plugin once
/// the state's lock is released.
enum Bound {
    /// The recording thread (a strict-mode op, a drifting loop's call).
    ForCaller(Deferred),
    /// The stream's launcher thread (a cut of fused mode's window), unless
    /// the host is crowded (`Stream::hand_over`).
    ForLauncher(Deferred),
}

/// A device and its op stream.
pub(crate) struct Stream {
    pub index: usize,
    pub device: Device,
    state: Mutex<StreamState>,
    /// Launched chunks not yet known to be done (for `sync`). Apart from the
    /// state: a chunk handed to the plugin outside the state's lock
    /// (`Deferred`) joins them without it. Taken inside the state's lock or
    /// alone, never the other way round.
    outstanding: Mutex<Vec<Arc<Completion>>>,
    /// The thread fused mode's period and window cuts hand their chunks to.
    pub(crate) launcher: launcher::Launcher,
}

impl Stream {
    pub fn new(index: usize, device: Device, window: fusion::policy::WindowLimits) -> Stream {
        Stream {
            index,
            device,
            state: Mutex::new(StreamState::new(window)),
            outstanding: Mutex::default(),
            launcher: launcher::Launcher::default(),
        }
    }

    fn outstanding(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Completion>>> {
        lock(&self.outstanding)
    }

    /// Records the node(s) `build` adds for one API call at `origin`, then
    /// applies the mode's cut policy. On a bad input nothing is recorded.
    pub fn record(
        &self,
        rt: &Runtime,
        origin: Origin,
        build: impl FnOnce(&mut Recorder) -> Result<Arc<Value>>,
    ) -> Result<Arc<Value>> {
        timed(Stage::Record, || {
            let mut st = lock(&self.state);
            let (out, deferred) = self.record_locked(rt, &mut st, origin, build)?;
            drop(st);
            match deferred {
                Some(Bound::ForLauncher(d)) => self.hand_over(rt, d),
                Some(Bound::ForCaller(d)) => self.run_deferred(rt, d),
                None => {}
            }
            Ok(out)
        })
    }

    /// [`Stream::record`] under the state's lock: the value, and the chunk
    /// its cut bound, to run once the lock is released (on the launcher
    /// thread, if the flag says so: `launcher.rs`).
    fn record_locked(
        &self,
        rt: &Runtime,
        st: &mut StreamState,
        origin: Origin,
        build: impl FnOnce(&mut Recorder) -> Result<Arc<Value>>,
    ) -> Result<(Arc<Value>, Option<Bound>)> {
        st.enter();
        let before = st.trace.nodes.len();
        let call = st.call_number();
        let in_graph = st.in_graph();
        let fed = st.compares_plans(rt).then_some(before);
        let mut rec = Recorder {
            st: &mut *st,
            stream: self,
            rt,
            origin,
            call,
            fed,
        };
        let out = match build(&mut rec) {
            Ok(v) => v,
            Err(e) => {
                st.trace.nodes.truncate(before);
                return Err(e);
            }
        };
        if rt.effective_mode() != Mode::Debug {
            self.record_index_checks(rt, st, before)?;
        }
        if in_graph {
            // The graph's end cuts it (`graphs.rs`).
            return Ok((out, None));
        }
        let deferred = match rt.effective_mode() {
            // The scope's end cuts it.
            Mode::Debug | Mode::Strict if OneOp::depth() > 0 => None,
            Mode::Debug => {
                self.flush(rt, st, CutReason::EveryOp, true)?;
                None
            }
            Mode::Strict => self
                .flush_deferred(rt, st, CutReason::EveryOp)?
                .map(Bound::ForCaller),
            Mode::Fused => {
                let mut cut = None;
                let trace = &mut st.trace;
                if let Some(drift) = &mut trace.drift {
                    for node in &trace.nodes[before..] {
                        drift.record(tiers::exact_signature(node));
                    }
                    // Launched now, as strict mode launches the call (the
                    // calls of a `OneOp` scope, at its end: one program).
                    if OneOp::depth() == 0 {
                        cut = Some(CutReason::EveryOp);
                    }
                    Counters::add(&rt.counters.drifting_calls, 1);
                }
                for i in before..trace.nodes.len() {
                    for v in &trace.nodes[i].inputs {
                        if !v.is_pending() {
                            trace.params.insert(Arc::as_ptr(v) as usize);
                        }
                    }
                    let sig = trace.nodes[i].signature;
                    if let Some(reason) = trace.window.record(sig, i + 1, trace.params.len()) {
                        cut = Some(reason);
                    }
                }
                match cut {
                    Some(reason) => self.flush_deferred(rt, st, reason)?.map(|d| match reason {
                        CutReason::EveryOp => Bound::ForCaller(d),
                        _ => Bound::ForLauncher(d),
                    }),
                    None => None,
                }
            }
        };
        Ok((out, deferred))
    }

    /// Cuts what this thread recorded in a [`OneOp`] scope that ended, as
    /// debug and strict modes cut one op: launched as one program (and, with
    /// `wait`, the debug mode's, waited for). Fused mode cuts as its window
    /// says, except while its trace drifts: then it launches each call as
    /// strict mode does, and so a scope's calls at the scope's end.
    pub(crate) fn end_one_op(&self, rt: &Runtime, wait: bool) -> Result<()> {
        let mut st = lock(&self.state);
        // This thread's trace is not made the active one unless it drifts:
        // it may have recorded nothing here (another device's stream).
        if rt.effective_mode() == Mode::Fused && !st.drifts(this_thread_trace()) {
            return Ok(());
        }
        st.enter();
        if st.in_graph() || st.trace.nodes.is_empty() {
            return Ok(());
        }
        self.flush(rt, &mut st, CutReason::EveryOp, wait)
    }

    /// Launches everything pending on this stream (a cut for `reason`).
    pub fn cut(&self, rt: &Runtime, reason: CutReason) -> Result<()> {
        // The window is not reset: where the period cuts depends on the ops
        // alone, not on cuts (a mode switch in a loop moves nothing).
        let mut st = lock(&self.state);
        self.flush_all(rt, &mut st, reason).map(|_| ())
    }

    /// Launches every thread's trace; their index checks, to read.
    fn flush_all(
        &self,
        rt: &Runtime,
        st: &mut StreamState,
        reason: CutReason,
    ) -> Result<checks::IndexChecks> {
        let mut index = std::mem::take(&mut st.trace.index);
        self.flush(rt, st, reason, false)?;
        let keys: Vec<u32> = st
            .parked
            .iter()
            .filter(|(_, t)| !t.nodes.is_empty() || !t.index.is_empty())
            .map(|(k, _)| *k)
            .collect();
        for key in keys {
            let checks = self.flush_trace(rt, st, key, reason)?;
            index.merge(checks);
        }
        Ok(index)
    }

    /// Launches the trace of thread `key`; its index checks, to read.
    fn flush_trace(
        &self,
        rt: &Runtime,
        st: &mut StreamState,
        key: u32,
        reason: CutReason,
    ) -> Result<checks::IndexChecks> {
        let home = st.active;
        st.activate(key);
        let flushed = self.flush(rt, st, reason, false);
        let index = std::mem::take(&mut st.trace.index);
        st.activate(home);
        flushed.map(|_| index)
    }

    /// Waits for `value`, launching its chunk first if it is pending.
    #[track_caller]
    pub fn read(&self, rt: &Runtime, value: &Value) -> Result<Arc<Buffer>> {
        let site = crate::origin::current(std::panic::Location::caller());
        let _span = trace::span(trace::Kind::HostRead, Some(&site), || value.ty.to_string());
        let checks = self.prepare_read(rt, value)?;
        rt.counters.host_sync(site);
        let buffer = value.wait()?;
        self.release_done();
        self.take_index_error(rt, checks)?;
        Ok(buffer)
    }

    /// Chunks known done release the input buffers they hold: a read that
    /// waited frees the dead inputs of what it waited for now, not at the
    /// next launch.
    fn release_done(&self) {
        self.outstanding().retain(|c| !c.done_ok());
    }

    /// Launches `value`'s chunk if it is pending; takes the index checks to
    /// read with it: those launched, the running flag's pending ops left for
    /// a later read. So a read of a value a period's lead launched launches
    /// nothing: an index error is reported by the first read after the
    /// chunk that had it was launched, as CUDA reports a device-side assert.
    /// The chunk it cuts runs after the state's lock is released.
    fn prepare_read(&self, rt: &Runtime, value: &Value) -> Result<checks::IndexChecks> {
        let mut st = lock(&self.state);
        let (index, deferred) = self.prepare_read_locked(rt, &mut st, value)?;
        drop(st);
        if let Some(d) = deferred {
            self.run_deferred(rt, d);
        }
        Ok(index)
    }

    fn prepare_read_locked(
        &self,
        rt: &Runtime,
        st: &mut StreamState,
        value: &Value,
    ) -> Result<(checks::IndexChecks, Option<Deferred>)> {
        st.enter();
        // Where the loop reads is part of its stream: a read that recurs every
        // period moves the period's cuts onto it (`fusion::policy`).
        // The period may cut here even when the value read is no longer
        // pending: the policy waits for the read to cut (unless the period
        // has a lead, whose cut is the period's only one).
        let mut period_cut = false;
        if rt.effective_mode() == Mode::Fused {
            let computed_at = (value.trace == st.active).then_some(value.computed_at);
            period_cut = st.trace.window.host_read(computed_at.filter(|&c| c > 0));
            if let Some(drift) = &mut st.trace.drift
                && drift.end_segment()
            {
                st.trace.drift = None;
                st.trace.refit = true;
            }
        }
        let mut index = checks::IndexChecks::default();
        if value.trace != st.active && value.is_pending() {
            index = self.flush_trace(rt, st, value.trace, CutReason::HostRead)?;
        }
        let deferred = if value.is_pending() {
            self.flush_deferred(rt, st, CutReason::HostRead)?
        } else if period_cut {
            self.flush_deferred(rt, st, CutReason::Period)?
        } else {
            None
        };
        index.merge(st.trace.index.take_readable());
        Ok((index, deferred))
    }

    /// Copies `value` to the host with `copy`, launching its chunk first if it
    /// is pending. The copy waits for the chunk itself (one wake-up, not two);
    /// if it fails, the error is the chunk's, naming its op.
    #[track_caller]
    pub fn read_with<T>(
        &self,
        rt: &Runtime,
        value: &Value,
        copy: impl FnOnce(&Buffer) -> Result<T>,
    ) -> Result<T> {
        let site = crate::origin::current(std::panic::Location::caller());
        let _span = trace::span(trace::Kind::HostRead, Some(&site), || value.ty.to_string());
        let checks = self.prepare_read(rt, value)?;
        rt.counters.host_sync(site);
        let (buffer, done) = value
            .buffer()?
            .ok_or_else(|| Error::Internal("reading a value that was never launched".into()))?;
        match copy(&buffer) {
            Ok(out) => {
                self.release_done();
                self.take_index_error(rt, checks)?;
                Ok(out)
            }
            Err(e) => Err(match value.wait() {
                Err(chunk_error) => chunk_error,
                Ok(_) => {
                    drop(done);
                    e
                }
            }),
        }
    }

    /// Keeps `done` (a launch made outside this stream's traces: a
    /// collective) with the stream's launched chunks, so that `sync` waits
    /// for it and its inputs stay held until it is known done, read or not.
    pub(crate) fn track(&self, done: Arc<Completion>) {
        let mut outstanding = self.outstanding();
        outstanding.retain(|c| !c.done_ok());
        outstanding.push(done);
    }

    /// Waits until at most `most` of the chunks launched on this device are
    /// unfinished, oldest first. A failed chunk counts as finished: its
    /// error surfaces where its values are read.
    pub(crate) fn wait_until_in_flight_at_most(&self, most: usize) {
        self.launcher.settle();
        loop {
            let oldest = {
                let mut outstanding = self.outstanding();
                outstanding.retain(|c| !c.done_ok());
                let mut unfinished = outstanding.iter().filter(|c| !c.finished());
                if unfinished.clone().count() <= most {
                    return;
                }
                unfinished.next().cloned()
            };
            if let Some(c) = oldest {
                let _ = c.wait();
            }
        }
    }

    /// Records an event (`torch.tpu.Event.record`): launches everything
    /// pending; the event is complete when the chunks launched so far are.
    pub fn record_marker(&self, rt: &Runtime, timing: bool) -> Result<crate::marker::Marker> {
        self.launcher.settle();
        let pending = {
            let mut st = lock(&self.state);
            let checks = self.flush_all(rt, &mut st, CutReason::Event)?;
            // Index checks are read at the next host read or sync (the
            // oldest now, past a bound, as a direct graph call reads them).
            st.trace.index.merge(checks);
            for old in st.trace.index.take_oldest(checks::UNREAD_FLAGS) {
                self.take_index_error(rt, old)?;
            }
            let mut outstanding = self.outstanding();
            outstanding.retain(|c| !c.finished());
            outstanding.clone()
        };
        crate::marker::Marker::new(pending, timing)
    }

    /// Launches everything pending and waits for every launched chunk;
    /// returns the first failure.
    pub fn sync(&self, rt: &Runtime) -> Result<()> {
        self.launcher.settle();
        let (outstanding, checks) = {
            let mut st = lock(&self.state);
            let checks = self.flush_all(rt, &mut st, CutReason::Sync)?;
            (std::mem::take(&mut *self.outstanding()), checks)
        };
        let mut first = Ok(());
        for c in outstanding {
            if let Err(e) = c.wait()
                && first.is_ok()
            {
                first = Err(e);
            }
        }
        // Everything is done: nothing it read stays held.
        self.launcher.retired.collect();
        first?;
        self.take_index_error(rt, checks)
    }

    /// Cuts the trace and launches it; with `wait`, waits for it and returns
    /// its error. Without, a failure is left in the results.
    fn flush(
        &self,
        rt: &Runtime,
        st: &mut StreamState,
        reason: CutReason,
        wait: bool,
    ) -> Result<()> {
        self.cut_trace(rt, st, reason, wait, false).map(|_| ())
    }

    /// Cuts the trace and binds it; the chunk is left for the caller to run
    /// once it has released the state's lock ([`Stream::run_deferred`]), when
    /// it can be. A caller whose cut is the last thing it does under the lock
    /// (the cut after an op, a host read's) cuts this way.
    fn flush_deferred(
        &self,
        rt: &Runtime,
        st: &mut StreamState,
        reason: CutReason,
    ) -> Result<Option<Deferred>> {
        self.cut_trace(rt, st, reason, false, true)
    }

    fn cut_trace(
        &self,
        rt: &Runtime,
        st: &mut StreamState,
        reason: CutReason,
        wait: bool,
        defer: bool,
    ) -> Result<Option<Deferred>> {
        // A chunk handed to the launcher holds its values, and so their
        // buffers, until it has run: which of this chunk's inputs are dead
        // (donated, part of its program's key) must not depend on how far
        // the launcher got. It is usually done long before the next cut.
        self.launcher.settle();
        timed(Stage::Cut, || {
            let capacity = st.trace.nodes.capacity();
            let mut nodes =
                std::mem::replace(&mut st.trace.nodes, Vec::with_capacity(capacity.min(4096)));
            st.trace.params.clear();
            // The plan these nodes matched, node for node, if any (only fused
            // mode's recording compares nodes with plans).
            let plan = st.trace.replay.take(nodes.len());
            if nodes.is_empty() {
                return Ok(None);
            }
            let ops = nodes.len();
            let launches = liveness(&mut nodes);
            tracing::debug!(
                target: "eagertpu::cuts",
                reason = reason.name(),
                ops,
                live = launches.len(),
                at = st.trace.window.seen(),
                phase = ?st.trace.window.phase(),
            );
            if launches.iter().all(|l| l.export.is_none()) {
                return Ok(None);
            }
            rt.counters.cut(reason);
            let mut deferred = None;
            let failure = match self.launch(rt, st, &launches, wait, defer, plan.as_deref()) {
                Ok(launched) => {
                    if let Some((binding, graph, program)) = launched.plan.filter(|_| rt.replay) {
                        let plan = replay::Plan::new(ops, &launches, binding, graph, program);
                        st.trace.replay.insert(plan);
                    }
                    deferred = launched.deferred;
                    launched.failure
                }
                Err(e) => Some(fail(&launches, e)),
            };
            if let Some(run) = deferred {
                let exports = launches.into_iter().map(|l| (l.index, l.export)).collect();
                return Ok(Some(Deferred {
                    nodes,
                    exports,
                    run: Some(run),
                }));
            }
            match failure {
                // A hazard is the runtime's failure, not the program's: at once.
                Some(e) if wait || matches!(e.root(), Error::Hazard(_)) => Err(e),
                Some(e) => {
                    // `sync()` reports it too, even if nothing reads the results.
                    self.outstanding().push(Completion::failed(e));
                    Ok(None)
                }
                None => Ok(None),
            }
        })
    }
}

impl StreamState {
    /// The number of the API call being recorded: a new one, or, inside a
    /// `OneOp` scope, the number of the scope's first call. A `_foreach` op
    /// or an optimizer step is one call to strict mode (one program), and so
    /// to a fused chunk run op by op: the same program, not one per tensor.
    fn call_number(&mut self) -> u32 {
        let scope = OneOp::current();
        match (scope, self.trace.scope_call) {
            (Some(scope), Some((last, call))) if scope == last => call,
            _ => {
                self.calls = self.calls.wrapping_add(1);
                self.trace.scope_call = scope.map(|scope| (scope, self.calls));
                self.calls
            }
        }
    }

    fn new(limits: fusion::policy::WindowLimits) -> StreamState {
        StreamState {
            trace: Trace::new(limits),
            active: this_thread_trace(),
            parked: vec![],
            recent: crowding::Recent::default(),
            limits,
            numbers: HashMap::default(),
            tiers: tiers::Tiers::default(),
            calls: 0,
            graph_plans: HashMap::default(),
            last_graph_launch: None,
            direct_calls: HashMap::default(),
        }
    }

    /// Whether thread `key`'s trace drifts (its sizes change at every
    /// iteration: `Trace::drift`).
    fn drifts(&self, key: u32) -> bool {
        if key == self.active {
            return self.trace.drift.is_some();
        }
        self.parked
            .iter()
            .any(|(k, t)| *k == key && t.drift.is_some())
    }

    /// Makes the calling thread's trace the active one, to record into it;
    /// taking over from another thread, notes whether the host is crowded
    /// (`crowding`).
    fn enter(&mut self) {
        let key = this_thread_trace();
        if key == self.active {
            return;
        }
        self.recent.took_over(self.active, key);
        self.activate(key);
    }

    /// Makes thread `key`'s trace the active one (`trace`), parking the one
    /// that was.
    fn activate(&mut self, key: u32) {
        if key == self.active {
            return;
        }
        let incoming = match self.parked.iter().position(|(k, _)| *k == key) {
            Some(i) => self.parked.swap_remove(i).1,
            None => Trace::new(self.limits),
        };
        let outgoing = std::mem::replace(&mut self.trace, incoming);
        self.parked.push((self.active, outgoing));
        self.active = key;
        if self.parked.len() > MAX_PARKED_TRACES {
            self.parked
                .retain(|(_, t)| !t.nodes.is_empty() || !t.index.is_empty());
        }
    }
}
