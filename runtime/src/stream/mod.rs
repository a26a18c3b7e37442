//! One op stream per device: record -> infer -> window -> canonicalize ->
//! lower -> compile cache -> launch. The three modes differ only in when the
//! stream is cut: debug cuts after every op and waits; strict cuts after every
//! op and does not wait; fused asks the window policy.
//!
//! Every thread recording on a device appends to that device's trace (so the
//! forward pass, autograd's backward thread and the optimizer step land in one
//! stream). At a cut, the pending nodes become one `Graph`:
//! - ready inputs become parameters; a parameter nothing outside the chunk
//!   holds any more is donated to an output of its type (updated in place);
//! - scalars other than 0, 1 and -1 become 0-d parameters, so a learning rate
//!   or step count that changes every step never changes the program; RNG
//!   keys always do, whatever their value;
//! - a node's output leaves the device only if something outside the trace
//!   still holds it; nodes nothing needs are dropped.
//!
//! Launch errors in strict and fused mode mark the chunk's results failed; the
//! error surfaces when something depending on them is read. A chunk of several
//! ops that fails to compile or execute is re-run op by op to name the op.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use fusion::DType;
use fusion::hash::FxBuild;
use fusion::policy::{CutReason, Window};

use crate::config::Mode;
use crate::context::Runtime;
use crate::error::{Error, Result};
use crate::metrics::Counters;
use crate::pjrt::{Buffer, Device};
use crate::timing::{Stage, timed};
use crate::value::{Completion, Value, lock};

pub use crate::origin::Origin;

mod checks;
mod hazards;
mod launch;
mod liveness;
mod record;
mod tiers;

pub(crate) use hazards::HazardChecker;
use launch::Param;
use liveness::{Launch, fail, liveness};
pub(crate) use record::Recorder;
use record::TraceNode;

/// Scalar buffers kept per stream (lifted scalars repeat: a learning rate).
pub(super) const SCALAR_CACHE: usize = 4096;

pub(super) struct StreamState {
    trace: Vec<TraceNode>,
    /// Addresses of the ready values the pending trace reads (its parameters).
    params: HashSet<usize, FxBuild>,
    window: Window,
    scalars: HashMap<(DType, u64), Arc<Buffer>, FxBuild>,
    /// Launched chunks not yet known to be done (for `sync`).
    outstanding: Vec<Arc<Completion>>,
    /// Index checks not yet read (strict and fused mode).
    index: checks::IndexChecks,
    /// Fused chunks seen, and those compiling in the background.
    tiers: tiers::Tiers,
    /// API calls recorded (numbers each call's nodes).
    calls: u32,
}

/// A device and its op stream.
pub(crate) struct Stream {
    pub index: usize,
    pub device: Device,
    state: Mutex<StreamState>,
}

impl Stream {
    pub fn new(index: usize, device: Device, window: fusion::policy::WindowLimits) -> Stream {
        Stream {
            index,
            device,
            state: Mutex::new(StreamState {
                trace: vec![],
                params: HashSet::default(),
                window: Window::new(window),
                scalars: HashMap::default(),
                outstanding: vec![],
                index: checks::IndexChecks::default(),
                tiers: tiers::Tiers::default(),
                calls: 0,
            }),
        }
    }

    /// Records the node(s) `build` adds for one API call at `origin`, then
    /// applies the mode's cut policy. On a bad input nothing is recorded.
    pub fn record(
        &self,
        rt: &Runtime,
        origin: Origin,
        build: impl FnOnce(&mut Recorder) -> Result<Arc<Value>>,
    ) -> Result<Arc<Value>> {
        timed(Stage::Record, || self.record_untimed(rt, origin, build))
    }

    fn record_untimed(
        &self,
        rt: &Runtime,
        origin: Origin,
        build: impl FnOnce(&mut Recorder) -> Result<Arc<Value>>,
    ) -> Result<Arc<Value>> {
        let mut st = lock(&self.state);
        let before = st.trace.len();
        st.calls = st.calls.wrapping_add(1);
        let call = st.calls;
        let mut rec = Recorder {
            trace: &mut st.trace,
            origin,
            counters: &rt.counters,
            call,
        };
        let out = match build(&mut rec) {
            Ok(v) => v,
            Err(e) => {
                st.trace.truncate(before);
                return Err(e);
            }
        };
        if rt.effective_mode() != Mode::Debug {
            self.record_index_checks(rt, &mut st, before)?;
        }
        match rt.effective_mode() {
            Mode::Debug => self.flush(rt, &mut st, CutReason::EveryOp, true)?,
            Mode::Strict => self.flush(rt, &mut st, CutReason::EveryOp, false)?,
            Mode::Fused => {
                let mut cut = None;
                let st = &mut *st;
                for i in before..st.trace.len() {
                    for v in &st.trace[i].inputs {
                        if !v.is_pending() {
                            st.params.insert(Arc::as_ptr(v) as usize);
                        }
                    }
                    let sig = st.trace[i].signature();
                    if let Some(reason) = st.window.record(sig, i + 1, st.params.len()) {
                        cut = Some(reason);
                    }
                }
                if let Some(reason) = cut {
                    self.flush(rt, st, reason, false)?;
                }
            }
        }
        Ok(out)
    }

    /// Launches everything pending on this stream (a cut for `reason`).
    pub fn cut(&self, rt: &Runtime, reason: CutReason) -> Result<()> {
        // The window is not reset: where the period cuts depends on the ops
        // alone, not on cuts (a mode switch in a loop moves nothing).
        let mut st = lock(&self.state);
        self.flush(rt, &mut st, reason, false)
    }

    /// Waits for `value`, launching its chunk first if it is pending.
    pub fn read(&self, rt: &Runtime, value: &Value) -> Result<Arc<Buffer>> {
        let checks = self.prepare_read(rt, value)?;
        Counters::add(&rt.counters.host_syncs, 1);
        let buffer = value.wait()?;
        self.release_done();
        self.take_index_error(rt, checks)?;
        Ok(buffer)
    }

    /// Chunks known done release the input buffers they hold: a read that
    /// waited frees the dead inputs of what it waited for now, not at the
    /// next launch.
    fn release_done(&self) {
        lock(&self.state).outstanding.retain(|c| !c.done_ok());
    }

    /// Launches `value`'s chunk if it is pending (and any pending index
    /// check); takes the index checks to read with it.
    fn prepare_read(&self, rt: &Runtime, value: &Value) -> Result<checks::IndexChecks> {
        let mut st = lock(&self.state);
        if value.is_pending() || !st.index.is_empty() {
            self.flush(rt, &mut st, CutReason::HostRead, false)?;
        }
        Ok(std::mem::take(&mut st.index))
    }

    /// Copies `value` to the host with `copy`, launching its chunk first if it
    /// is pending. The copy waits for the chunk itself (one wake-up, not two);
    /// if it fails, the error is the chunk's, naming its op.
    pub fn read_with<T>(
        &self,
        rt: &Runtime,
        value: &Value,
        copy: impl FnOnce(&Buffer) -> Result<T>,
    ) -> Result<T> {
        let checks = self.prepare_read(rt, value)?;
        Counters::add(&rt.counters.host_syncs, 1);
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

    /// Launches everything pending and waits for every launched chunk;
    /// returns the first failure.
    pub fn sync(&self, rt: &Runtime) -> Result<()> {
        let (outstanding, checks) = {
            let mut st = lock(&self.state);
            self.flush(rt, &mut st, CutReason::Sync, false)?;
            (
                std::mem::take(&mut st.outstanding),
                std::mem::take(&mut st.index),
            )
        };
        let mut first = Ok(());
        for c in outstanding {
            if let Err(e) = c.wait()
                && first.is_ok()
            {
                first = Err(e);
            }
        }
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
        timed(Stage::Cut, || self.flush_untimed(rt, st, reason, wait))
    }

    fn flush_untimed(
        &self,
        rt: &Runtime,
        st: &mut StreamState,
        reason: CutReason,
        wait: bool,
    ) -> Result<()> {
        let capacity = st.trace.capacity();
        let nodes = std::mem::replace(&mut st.trace, Vec::with_capacity(capacity.min(4096)));
        st.params.clear();
        if nodes.is_empty() {
            return Ok(());
        }
        let launches = liveness(nodes);
        if launches.iter().all(|l| l.export.is_none()) {
            return Ok(());
        }
        rt.counters.cut(reason);
        let failure = match self.launch(rt, st, &launches, wait) {
            Ok(isolated) => isolated,
            Err(e) => Some(fail(&launches, e)),
        };
        match failure {
            // A hazard is the runtime's failure, not the program's: at once.
            Some(e) if wait || matches!(e.root(), Error::Hazard(_)) => Err(e),
            Some(e) => {
                // `sync()` reports it too, even if nothing reads the results.
                st.outstanding.push(Completion::failed(e));
                Ok(())
            }
            None => Ok(()),
        }
    }
}
