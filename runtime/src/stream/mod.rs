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
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, Weak};

use fusion::hash::{FxBuild, FxHasher};
use fusion::policy::{CutReason, Window};
use fusion::{DType, Graph, Op, Scalar, TensorType, ValueId};
use smallvec::SmallVec;

use crate::config::Mode;
use crate::context::Runtime;
use crate::error::{Error, Result};
use crate::host;
use crate::metrics::Counters;
use crate::pjrt::{Buffer, Device};
use crate::value::{Blame, Completion, Value, lock};

pub use crate::origin::Origin;

mod checks;
mod hazards;

pub(crate) use hazards::HazardChecker;

struct TraceNode {
    op: Op,
    inputs: SmallVec<[Arc<Value>; 3]>,
    /// Weak: a value nobody holds any more is not exported.
    output: Weak<Value>,
    ty: TensorType,
    origin: Origin,
    /// A scalar (`Op::Full`) that is a parameter whatever its value, even 0,
    /// 1 or -1: an RNG key. Its value is no part of the op's signature either.
    lift: bool,
}

impl TraceNode {
    fn blame(&self, chunk_ops: usize) -> Blame {
        Blame {
            op: self.op.name(),
            inputs: self.inputs.iter().map(|v| v.ty.clone()).collect(),
            origin: self.origin.clone(),
            chunk_ops,
        }
    }

    /// Op and input types: what the window compares to find the loop.
    fn signature(&self) -> u64 {
        let mut h = FxHasher::default();
        match &self.op {
            // A key changes every step; the loop still repeats.
            Op::Full { ty, .. } if self.lift => ty.hash(&mut h),
            op => op.hash(&mut h),
        }
        for v in &self.inputs {
            v.ty.hash(&mut h);
        }
        h.finish()
    }
}

/// Records the nodes of one API call.
pub(crate) struct Recorder<'a> {
    trace: &'a mut Vec<TraceNode>,
    origin: Origin,
    counters: &'a Counters,
}

impl Recorder<'_> {
    /// Records `op` over `inputs`; checks them first (`Op::infer`).
    pub fn node(&mut self, op: Op, inputs: &[&Arc<Value>]) -> Result<Arc<Value>> {
        self.push(op, inputs, false)
    }

    fn push(&mut self, op: Op, inputs: &[&Arc<Value>], lift: bool) -> Result<Arc<Value>> {
        let types: SmallVec<[TensorType; 3]> = inputs.iter().map(|v| v.ty.clone()).collect();
        let ty = op.infer(&types)?;
        let out = Value::pending(ty.clone(), self.trace.len());
        self.trace.push(TraceNode {
            op,
            inputs: inputs.iter().map(|v| Arc::clone(v)).collect(),
            output: Arc::downgrade(&out),
            ty,
            origin: self.origin.clone(),
            lift,
        });
        Counters::add(&self.counters.ops_recorded, 1);
        Ok(out)
    }

    /// A 0-d int64 value holding `value` that reaches the program as a
    /// parameter whatever its value (an RNG key: a key of 0 or 1 must not
    /// compile a program of its own).
    pub fn key(&mut self, value: i64) -> Result<Arc<Value>> {
        let op = Op::Full {
            value: Scalar::Int(value),
            ty: TensorType::scalar(DType::I64),
        };
        self.push(op, &[], true)
    }

    /// A 0-d value holding `value` as `dtype` (a scalar operand).
    pub fn scalar(&mut self, value: Scalar, dtype: DType) -> Result<Arc<Value>> {
        self.node(
            Op::Full {
                value,
                ty: TensorType::scalar(dtype),
            },
            &[],
        )
    }
}

/// Scalar buffers kept per stream (lifted scalars repeat: a learning rate).
const SCALAR_CACHE: usize = 4096;

struct StreamState {
    trace: Vec<TraceNode>,
    /// Addresses of the ready values the pending trace reads (its parameters).
    params: HashSet<usize, FxBuild>,
    window: Window,
    scalars: HashMap<(DType, u64), Arc<Buffer>, FxBuild>,
    /// Launched chunks not yet known to be done (for `sync`).
    outstanding: Vec<Arc<Completion>>,
    /// Index checks not yet read (strict and fused mode).
    index: checks::IndexChecks,
}

/// A device and its op stream.
pub(crate) struct Stream {
    pub index: usize,
    pub device: Device,
    state: Mutex<StreamState>,
}

/// One node of a chunk being launched.
struct Launch {
    node: TraceNode,
    /// The value to bind the result to, when exported.
    export: Option<Arc<Value>>,
    /// For each input: the launch (index in the chunk) that produces it, or
    /// `None` for a ready value (a parameter).
    from: SmallVec<[Option<u32>; 3]>,
}

/// A parameter of a chunk: an input buffer, and the value it came from
/// (none for a lifted scalar).
struct Param {
    value: Option<Arc<Value>>,
    buffer: Arc<Buffer>,
    done: Option<Arc<Completion>>,
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
        let mut st = lock(&self.state);
        let before = st.trace.len();
        let mut rec = Recorder {
            trace: &mut st.trace,
            origin,
            counters: &rt.counters,
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
        let mut st = lock(&self.state);
        if reason == CutReason::ModeSwitch {
            st.window.reset();
        }
        self.flush(rt, &mut st, reason, false)
    }

    /// Waits for `value`, launching its chunk first if it is pending.
    pub fn read(&self, rt: &Runtime, value: &Value) -> Result<Arc<Buffer>> {
        let checks = self.prepare_read(rt, value)?;
        Counters::add(&rt.counters.host_syncs, 1);
        let buffer = value.wait()?;
        self.take_index_error(rt, checks)?;
        Ok(buffer)
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

    /// Launches a chunk. `Err`: nothing ran and every result fails with it.
    /// `Ok(Some(e))`: the chunk was run op by op after failing, each result is
    /// ready or failed on its own, and `e` is the first failure.
    fn launch(
        &self,
        rt: &Runtime,
        st: &mut StreamState,
        launches: &[Launch],
        wait: bool,
    ) -> Result<Option<Error>> {
        let last = launches.last().map(|l| l.node.blame(launches.len()));
        let blame = |cause: Error| match &last {
            Some(b) => b.error(cause),
            None => cause,
        };
        let debug = rt.effective_mode() == Mode::Debug;
        if debug {
            checks::check_indices_on_host(launches)?;
        }
        // Chunks known done release the input buffers they hold, so that
        // their last readers no longer block a donation.
        st.outstanding.retain(|c| !c.done_ok());
        let (graph, params) = self.build_graph(rt, st, launches, !debug)?;
        let snapshot = match &rt.hazards {
            Some(_) => {
                HazardChecker::check_donations(&graph, &params, &st.outstanding).map_err(blame)?;
                Some(HazardChecker::snapshot(&graph, &params)?)
            }
            None => None,
        };
        let program = match rt.cache.get(&graph, &rt.counters) {
            Ok(p) => p,
            Err(e) if launches.len() > 1 => return Ok(self.isolate(rt, launches, e)),
            Err(e) => return Err(blame(e)),
        };
        let inputs: Vec<&Buffer> = params.iter().map(|p| p.buffer.as_ref()).collect();
        let (outputs, event) = match program.exe.execute(&inputs, &self.device) {
            Ok(x) => x,
            Err(e) if launches.len() > 1 => {
                drop(inputs);
                drop(params);
                return Ok(self.isolate(rt, launches, e));
            }
            Err(e) => return Err(blame(e)),
        };
        Counters::add(&rt.counters.executions, 1);
        let deps: Vec<Arc<Completion>> = params
            .iter()
            .filter_map(|p| p.done.clone())
            .filter(|d| !d.done_ok())
            .collect();
        let reads = params.iter().map(|p| p.buffer.clone()).collect();
        let blamed = last.clone().expect("a chunk has nodes");
        let completion = Completion::new(event, blamed, deps, reads);
        let exported = launches.iter().filter_map(|l| l.export.as_ref());
        for (value, buffer) in exported.zip(outputs) {
            value.set_ready(buffer, Some(completion.clone()));
        }
        st.outstanding.push(completion.clone());
        if let (Some(checker), Some(snapshot)) = (&rt.hazards, snapshot)
            && completion.wait().is_ok()
        {
            Counters::add(&rt.counters.hazard_checks, 1);
            let outputs = launches
                .iter()
                .filter_map(|l| l.export.as_ref())
                .map(|v| v.wait())
                .collect::<Result<Vec<_>>>()?;
            checker
                .check_addresses(&rt.cache, &self.device, &graph, &snapshot, &outputs)
                .map_err(blame)?;
        }
        if wait {
            completion.wait()?;
            if rt.check_nan() {
                check_finite(launches, &params)?;
            }
        }
        Ok(None)
    }

    /// The chunk as a graph and its parameters: ready inputs become parameters,
    /// scalars are lifted, and (with `donate`) dead inputs are donated.
    fn build_graph(
        &self,
        rt: &Runtime,
        st: &mut StreamState,
        launches: &[Launch],
        donate: bool,
    ) -> Result<(Graph, Vec<Param>)> {
        let mut graph = Graph::new();
        let mut params: Vec<Param> = vec![];
        // Parameters by value address, and how many chunk nodes read each.
        let mut param_ids: HashMap<usize, (ValueId, usize), FxBuild> = HashMap::default();
        let mut ids: Vec<ValueId> = Vec::with_capacity(launches.len());
        let mut lifted: HashMap<(DType, u64), ValueId, FxBuild> = HashMap::default();
        for l in launches {
            let node = &l.node;
            let id = match &node.op {
                Op::Full { value, ty } if node.lift || !is_key_constant(*value) => {
                    // One parameter per distinct scalar: a loop of `x * 0.9`
                    // reads one, not one per op. (So which scalars are equal
                    // is part of the program, as in torch_xla; a random key
                    // is not shared, or a key with equal halves would make a
                    // program of its own.)
                    let key = (ty.dtype, host::scalar_bits(*value, ty.dtype).0);
                    let shared = if node.lift { None } else { lifted.get(&key) };
                    let p = match shared {
                        Some(p) => *p,
                        None => {
                            // A random key never repeats: not worth a cache slot.
                            let buffer =
                                self.scalar_buffer(rt, st, *value, ty.dtype, !node.lift)?;
                            let p = graph.param(TensorType::scalar(ty.dtype));
                            params.push(Param {
                                value: None,
                                buffer,
                                done: None,
                            });
                            Counters::add(&rt.counters.lifted_scalars, 1);
                            if !node.lift {
                                lifted.insert(key, p);
                            }
                            p
                        }
                    };
                    if ty.rank() == 0 {
                        p
                    } else {
                        graph.push_inferred(Op::BroadcastTo(ty.shape.clone()), &[p], ty.clone())
                    }
                }
                op => {
                    let mut inputs: SmallVec<[ValueId; 3]> = SmallVec::new();
                    for (input, from) in node.inputs.iter().zip(&l.from) {
                        if let Some(k) = from {
                            inputs.push(ids[*k as usize]);
                            continue;
                        }
                        let addr = Arc::as_ptr(input) as usize;
                        if let Some((id, uses)) = param_ids.get_mut(&addr) {
                            *uses += 1;
                            inputs.push(*id);
                            continue;
                        }
                        let (buffer, done) = input.buffer()?.ok_or_else(|| {
                            Error::Internal(
                                "an input is pending outside the chunk being run".into(),
                            )
                        })?;
                        let id = graph.param(input.ty.clone());
                        params.push(Param {
                            value: Some(input.clone()),
                            buffer,
                            done,
                        });
                        param_ids.insert(addr, (id, 1));
                        inputs.push(id);
                    }
                    graph.push_inferred(op.clone(), &inputs, node.ty.clone())
                }
            };
            ids.push(id);
        }
        for (l, id) in launches.iter().zip(&ids) {
            if l.export.is_some() {
                graph.output(*id);
            }
        }
        if donate {
            let uses: HashMap<usize, usize, FxBuild> = param_ids
                .iter()
                .map(|(addr, (_, uses))| (*addr, *uses))
                .collect();
            self.donate(rt, &mut graph, &params, &uses);
        }
        Ok((graph, params))
    }

    /// Aliases each parameter nothing outside the chunk holds to an output of
    /// its type, so an update like `w = w - lr * g` reuses `w`'s memory.
    ///
    /// The invariant (see `value.rs`): a buffer is donated only when no one
    /// else holds it. No tensor or view holds its value (the value's only
    /// references are this chunk's), and no unfinished chunk or host read
    /// holds the buffer: its only holders are the value and this launch.
    /// A dead input that is still being read is not donated; its update gets
    /// fresh memory (`donations_blocked_by_readers`).
    fn donate(
        &self,
        rt: &Runtime,
        graph: &mut Graph,
        params: &[Param],
        uses: &HashMap<usize, usize, FxBuild>,
    ) {
        let mut taken = vec![false; graph.outputs().len()];
        for (i, p) in params.iter().enumerate() {
            let Some(v) = &p.value else { continue };
            let internal = uses.get(&(Arc::as_ptr(v) as usize)).copied().unwrap_or(0);
            // References: this parameter's own, plus the chunk's readers.
            if Arc::strong_count(v) != internal + 1 {
                continue;
            }
            // The value's state and this parameter.
            if Arc::strong_count(&p.buffer) != 2 {
                Counters::add(&rt.counters.donations_blocked_by_readers, 1);
                continue;
            }
            let out = graph
                .output_types()
                .enumerate()
                .position(|(k, t)| !taken[k] && *t == v.ty);
            if let Some(k) = out {
                taken[k] = true;
                graph.alias(i, k);
                Counters::add(&rt.counters.donated_buffers, 1);
            }
        }
    }

    fn scalar_buffer(
        &self,
        rt: &Runtime,
        st: &mut StreamState,
        value: Scalar,
        dtype: DType,
        cache: bool,
    ) -> Result<Arc<Buffer>> {
        let (bits, len) = host::scalar_bits(value, dtype);
        let key = (dtype, bits);
        if let Some(b) = st.scalars.get(&key) {
            return Ok(b.clone());
        }
        let bytes = &bits.to_le_bytes()[..len];
        let buffer = Arc::new(Buffer::from_host(&self.device, dtype, &[], bytes)?);
        Counters::add(&rt.counters.transfers_to_device, 1);
        Counters::add(&rt.counters.bytes_to_device, bytes.len() as u64);
        if !cache {
            return Ok(buffer);
        }
        if st.scalars.len() >= SCALAR_CACHE {
            st.scalars.clear();
        }
        st.scalars.insert(key, buffer.clone());
        Ok(buffer)
    }

    /// A chunk of several ops failed to compile or run: run its ops one by one
    /// (waiting for each) to find the op that fails. That op's results, and
    /// everything computed from them, fail with an error naming it; the other
    /// ops' results are computed. Returns the first failure, if any.
    fn isolate(&self, rt: &Runtime, launches: &[Launch], chunk_error: Error) -> Option<Error> {
        tracing::warn!(
            target: "eagertpu::exec",
            "a fused chunk of {} ops failed ({chunk_error}); running it op by op to find the op",
            launches.len()
        );
        let mut first = None;
        for l in launches {
            let Some(out) = l.node.output.upgrade() else {
                continue;
            };
            match self.run_alone(rt, &l.node) {
                Ok(buffer) => out.set_ready(buffer, None),
                Err(e) => {
                    first.get_or_insert_with(|| e.clone());
                    out.set_failed(e);
                }
            }
        }
        first
    }

    /// Runs one node as its own program and waits for it. A failed input
    /// fails it with the input's error.
    fn run_alone(&self, rt: &Runtime, node: &TraceNode) -> Result<Buffer> {
        let mut graph = Graph::new();
        let mut buffers = vec![];
        let mut ids: SmallVec<[ValueId; 3]> = SmallVec::new();
        for input in &node.inputs {
            buffers.push(input.wait()?);
            ids.push(graph.param(input.ty.clone()));
        }
        let id = graph.push_inferred(node.op.clone(), &ids, node.ty.clone());
        graph.output(id);
        let blame = |e: Error| node.blame(1).error(e);
        let program = rt.cache.get(&graph, &rt.counters).map_err(blame)?;
        let inputs: Vec<&Buffer> = buffers.iter().map(|b| b.as_ref()).collect();
        let (mut outputs, done) = program.exe.execute(&inputs, &self.device).map_err(blame)?;
        Counters::add(&rt.counters.executions, 1);
        if let Some(done) = done {
            done.wait().map_err(blame)?;
        }
        Ok(outputs.remove(0))
    }
}

/// 0, 1 and -1 stay in the program (they enable simplifications); every other
/// scalar becomes a parameter.
fn is_key_constant(s: Scalar) -> bool {
    let x = s.as_f64();
    x == 0.0 || x == 1.0 || x == -1.0 || matches!(s, Scalar::Bool(_))
}

/// Decides which nodes run and which outputs leave the device.
fn liveness(nodes: Vec<TraceNode>) -> Vec<Launch> {
    let n = nodes.len();
    // A pending input is produced by the node at its slot: the whole trace
    // is being launched, and every value it reads is pending in it or ready.
    let producer = |v: &Arc<Value>| {
        let slot = v.slot as usize;
        (slot < n && std::ptr::eq(nodes[slot].output.as_ptr(), Arc::as_ptr(v))).then_some(slot)
    };
    // Uses of each node's output by later nodes of this trace.
    let mut uses = vec![0usize; n];
    let mut inputs_from: Vec<SmallVec<[Option<usize>; 3]>> = Vec::with_capacity(n);
    for node in &nodes {
        let from: SmallVec<[Option<usize>; 3]> = node.inputs.iter().map(producer).collect();
        for j in from.iter().flatten() {
            uses[*j] += 1;
        }
        inputs_from.push(from);
    }
    let mut export: Vec<Option<Arc<Value>>> = nodes
        .iter()
        .enumerate()
        .map(|(i, node)| {
            node.output.upgrade().filter(|v| {
                // Held by more than this upgrade and this trace's own readers.
                Arc::strong_count(v) > 1 + uses[i]
            })
        })
        .collect();
    let mut live = vec![false; n];
    for i in (0..n).rev() {
        if export[i].is_some() {
            live[i] = true;
        }
        if live[i] {
            for j in inputs_from[i].iter().flatten() {
                live[*j] = true;
            }
        }
    }
    // Position of each live node among the launches.
    let mut position = vec![0u32; n];
    let mut next = 0;
    for i in 0..n {
        if live[i] {
            position[i] = next;
            next += 1;
        }
    }
    nodes
        .into_iter()
        .enumerate()
        .filter(|(i, _)| live[*i])
        .map(|(i, node)| Launch {
            node,
            export: export[i].take(),
            from: inputs_from[i]
                .iter()
                .map(|f| f.map(|j| position[j]))
                .collect(),
        })
        .collect()
}

/// Marks every exported value failed with `error`, and returns it.
fn fail(launches: &[Launch], error: Error) -> Error {
    let error = match launches.last() {
        Some(l) => l.node.blame(1).error(error),
        None => error,
    };
    for l in launches {
        if let Some(v) = &l.export {
            v.set_failed(error.clone());
        }
    }
    error
}

/// `EAGERTPU_CHECK_NAN=1`: an exported float output with NaN/Inf, from inputs
/// that had none, is an error at the op that produced it.
fn check_finite(launches: &[Launch], params: &[Param]) -> Result<()> {
    for p in params {
        let Some(v) = &p.value else { continue };
        if v.ty.dtype.is_float() && host::count_non_finite(&p.buffer, &v.ty)? != (0, 0) {
            return Ok(());
        }
    }
    for l in launches {
        let Some(v) = &l.export else { continue };
        if !v.ty.dtype.is_float() {
            continue;
        }
        let buffer = v.wait()?;
        let (nan, inf) = host::count_non_finite(&buffer, &v.ty)?;
        if nan + inf > 0 {
            return Err(l.node.blame(1).error(Error::NonFinite {
                output: v.ty.to_string(),
                nan,
                inf,
            }));
        }
    }
    Ok(())
}
