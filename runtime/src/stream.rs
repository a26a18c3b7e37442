//! One op stream per device: record -> infer -> (cut) -> build graph -> compile
//! cache -> launch.
//!
//! Every thread recording on a device appends to that device's `Trace`. An op
//! is recorded as a node over values; its output is a new pending value. When
//! the mode's policy cuts (debug: after every op), the pending nodes become one
//! `Graph`: ready inputs become parameters, and a node's output is exported only
//! if something outside the trace still holds it, so dead temporaries never
//! leave the device. Nodes nothing needs are dropped before compiling.

use std::panic::Location;
use std::sync::{Arc, Mutex, Weak};

use fusion::{Graph, Op, Scalar, TensorType, ValueId};
use smallvec::SmallVec;

use crate::context::Runtime;
use crate::error::{Error, Result};
use crate::host;
use crate::metrics::Counters;
use crate::pjrt::{Buffer, Device};
use crate::value::{Value, lock};

/// Where an op was recorded: the user's call site.
pub type Origin = &'static Location<'static>;

struct TraceNode {
    op: Op,
    inputs: SmallVec<[Arc<Value>; 3]>,
    /// Weak: a value nobody holds any more is not exported.
    output: Weak<Value>,
    ty: TensorType,
    origin: Origin,
}

#[derive(Default)]
struct Trace {
    nodes: Vec<TraceNode>,
}

/// Records the nodes of one API call.
pub(crate) struct Recorder<'a> {
    trace: &'a mut Trace,
    origin: Origin,
    counters: &'a Counters,
}

impl Recorder<'_> {
    /// Records `op` over `inputs`; checks them first (`Op::infer`).
    pub fn node(&mut self, op: Op, inputs: &[&Arc<Value>]) -> Result<Arc<Value>> {
        let types: SmallVec<[TensorType; 3]> = inputs.iter().map(|v| v.ty.clone()).collect();
        let ty = op.infer(&types)?;
        let out = Value::pending(ty.clone());
        self.trace.nodes.push(TraceNode {
            op,
            inputs: inputs.iter().map(|v| Arc::clone(v)).collect(),
            output: Arc::downgrade(&out),
            ty,
            origin: self.origin,
        });
        Counters::add(&self.counters.ops_recorded, 1);
        Ok(out)
    }

    /// A 0-d value holding `value` as `dtype` (a scalar operand).
    pub fn scalar(&mut self, value: Scalar, dtype: fusion::DType) -> Result<Arc<Value>> {
        self.node(
            Op::Full {
                value,
                ty: TensorType::scalar(dtype),
            },
            &[],
        )
    }
}

/// A device and its op stream.
pub(crate) struct Stream {
    pub index: usize,
    pub device: Device,
    trace: Mutex<Trace>,
}

/// One node of a chunk being launched.
struct Launch {
    node: TraceNode,
    /// The value to bind the result to, when exported.
    export: Option<Arc<Value>>,
}

impl Stream {
    pub fn new(index: usize, device: Device) -> Stream {
        Stream {
            index,
            device,
            trace: Mutex::default(),
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
        let mut trace = lock(&self.trace);
        let before = trace.nodes.len();
        let mut rec = Recorder {
            trace: &mut trace,
            origin,
            counters: &rt.counters,
        };
        let out = match build(&mut rec) {
            Ok(v) => v,
            Err(e) => {
                trace.nodes.truncate(before);
                return Err(e);
            }
        };
        // Debug mode: cut after every op and wait for it.
        self.flush_locked(rt, &mut trace)?;
        Ok(out)
    }

    /// Runs everything pending on this stream.
    pub fn flush(&self, rt: &Runtime) -> Result<()> {
        let mut trace = lock(&self.trace);
        self.flush_locked(rt, &mut trace)
    }

    fn flush_locked(&self, rt: &Runtime, trace: &mut Trace) -> Result<()> {
        let nodes = std::mem::take(&mut trace.nodes);
        if nodes.is_empty() {
            return Ok(());
        }
        let launches = liveness(nodes);
        if launches.iter().all(|l| l.export.is_none()) {
            return Ok(());
        }
        let (graph, params) = match build_graph(&launches) {
            Ok(g) => g,
            Err(e) => return Err(fail(&launches, e)),
        };
        match self.launch(rt, &launches, &graph, &params) {
            Ok(()) => Ok(()),
            Err(e) => Err(fail(&launches, e)),
        }
    }

    fn launch(
        &self,
        rt: &Runtime,
        launches: &[Launch],
        graph: &Graph,
        params: &[Param],
    ) -> Result<()> {
        let blame = |cause: Error| blame(launches, cause);
        check_indices(launches)?;
        let program = rt.cache.get(graph, &rt.counters).map_err(blame)?;
        let inputs: Vec<&Buffer> = params.iter().map(|p| p.buffer.as_ref()).collect();
        let (outputs, done) = program.exe.execute(&inputs, &self.device).map_err(blame)?;
        Counters::add(&rt.counters.executions, 1);
        if let Some(done) = done {
            done.wait().map_err(blame)?;
        }
        if rt.check_nan.load(std::sync::atomic::Ordering::Relaxed) {
            check_finite(launches, params, &outputs).map_err(blame)?;
        }
        let exported = launches.iter().filter_map(|l| l.export.as_ref());
        for (value, buffer) in exported.zip(outputs) {
            value.set_ready(buffer);
        }
        Ok(())
    }
}

/// Decides which nodes run and which outputs leave the device.
fn liveness(nodes: Vec<TraceNode>) -> Vec<Launch> {
    let n = nodes.len();
    let producer = |v: &Arc<Value>| {
        nodes
            .iter()
            .position(|m| std::ptr::eq(m.output.as_ptr(), Arc::as_ptr(v)))
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
    nodes
        .into_iter()
        .enumerate()
        .filter(|(i, _)| live[*i])
        .map(|(i, node)| Launch {
            node,
            export: export[i].take(),
        })
        .collect()
}

/// A parameter of a chunk: a ready value and its buffer.
struct Param {
    value: Arc<Value>,
    buffer: Arc<Buffer>,
}

/// The chunk as a graph, and its parameters in order.
fn build_graph(launches: &[Launch]) -> Result<(Graph, Vec<Param>)> {
    let mut graph = Graph::new();
    let mut params: Vec<Param> = vec![];
    let mut param_values: Vec<(*const Value, ValueId)> = vec![];
    let mut produced: Vec<(*const Value, ValueId)> = Vec::with_capacity(launches.len());
    let mut outputs = vec![];
    for l in launches {
        let mut ids: SmallVec<[ValueId; 3]> = SmallVec::new();
        for input in &l.node.inputs {
            let ptr = Arc::as_ptr(input);
            let known = produced
                .iter()
                .chain(param_values.iter())
                .find(|(p, _)| std::ptr::eq(*p, ptr))
                .map(|(_, id)| *id);
            let id = match known {
                Some(id) => id,
                None => {
                    let buffer = input.buffer()?.ok_or_else(|| {
                        Error::Internal("an input is pending outside the chunk being run".into())
                    })?;
                    let id = graph.param(input.ty.clone());
                    params.push(Param {
                        value: input.clone(),
                        buffer,
                    });
                    param_values.push((ptr, id));
                    id
                }
            };
            ids.push(id);
        }
        let id = graph.push_inferred(l.node.op.clone(), &ids, l.node.ty.clone());
        produced.push((l.node.output.as_ptr(), id));
        if l.export.is_some() {
            outputs.push(id);
        }
    }
    for id in outputs {
        graph.output(id);
    }
    Ok((graph, params))
}

/// Wraps `cause` with the op it is about: the last node of the chunk (the
/// user's op; earlier nodes are its helpers).
fn blame(launches: &[Launch], cause: Error) -> Error {
    if matches!(cause, Error::AtOp { .. }) {
        return cause;
    }
    let Some(last) = launches.last() else {
        return cause;
    };
    at_op(&last.node, cause)
}

fn at_op(node: &TraceNode, cause: Error) -> Error {
    let inputs: Vec<String> = node.inputs.iter().map(|v| v.ty.to_string()).collect();
    Error::AtOp {
        op: node.op.name(),
        inputs: inputs.join(", "),
        origin: node.origin.to_string(),
        cause: Box::new(cause),
    }
}

/// Marks every exported value failed with `error`, and returns it.
fn fail(launches: &[Launch], error: Error) -> Error {
    let error = blame(launches, error);
    for l in launches {
        if let Some(v) = &l.export {
            v.set_failed(error.clone());
        }
    }
    error
}

/// Checks tensor indices on the host before running (debug mode runs each op
/// alone, so an index is always a ready parameter): an out-of-range index is an
/// error at the op, as on CPU, instead of XLA's silent clamping.
fn check_indices(launches: &[Launch]) -> Result<()> {
    for l in launches {
        let Some(ix) = l.node.op.index_operand() else {
            continue;
        };
        let index = &l.node.inputs[ix.index_input];
        let bounded = &l.node.inputs[ix.bounded_by];
        let Some(buffer) = index.buffer()? else {
            continue;
        };
        let dim = if ix.dim == usize::MAX {
            bounded.ty.rank().saturating_sub(1)
        } else {
            ix.dim
        };
        let size = bounded.ty.shape.get(dim).copied().unwrap_or(1);
        let allow_ignore = matches!(l.node.op, Op::CrossEntropy { .. });
        for i in host::read_i64(&buffer, &index.ty)? {
            if (i < 0 || i >= size) && !(allow_ignore && i == -100) {
                return Err(at_op(
                    &l.node,
                    fusion::Error::IndexOutOfRange {
                        op: l.node.op.name(),
                        index: i,
                        dim,
                        size,
                    }
                    .into(),
                ));
            }
        }
    }
    Ok(())
}

/// `EAGERTPU_CHECK_NAN=1`: an exported float output with NaN/Inf, from inputs
/// that had none, is an error at the op that produced it.
fn check_finite(launches: &[Launch], params: &[Param], outputs: &[Buffer]) -> Result<()> {
    for p in params {
        let ty = &p.value.ty;
        if ty.dtype.is_float() && host::count_non_finite(&p.buffer, ty)? != (0, 0) {
            return Ok(());
        }
    }
    let exported = launches.iter().filter(|l| l.export.is_some());
    for (l, out) in exported.zip(outputs) {
        if !l.node.ty.dtype.is_float() {
            continue;
        }
        let (nan, inf) = host::count_non_finite(out, &l.node.ty)?;
        if nan + inf > 0 {
            return Err(at_op(
                &l.node,
                Error::NonFinite {
                    output: l.node.ty.to_string(),
                    nan,
                    inf,
                },
            ));
        }
    }
    Ok(())
}
