//! Compiled graphs (`torch.compile`): the ops of one call of a graph are one
//! chunk of their own, whatever the window would have cut.
//!
//! A graph call opens a scope on the calling thread's trace: what was pending
//! before it is cut first (`CutReason::Graph`), so the graph's chunk holds
//! only its own ops; inside the scope no window limit, period or lead cuts
//! (the window does not even see the ops, so an eager loop around the call
//! keeps its period); closing the scope cuts the graph's ops and compiles
//! them at once through the compile cache (memory, disk, single flight), in
//! strict mode as in fused mode, with no hotness threshold: a graph is
//! compiled because the user asked for it.
//!
//! Each graph keeps replay plans of its own (`replay.rs`), swapped in for the
//! scope, so its next calls bind to its program without building, hashing or
//! looking up a graph, and the eager loop's plans are never evicted by it.
//! In debug mode no scope opens: the graph's ops run one by one, as every op
//! does there.
//!
//! A scope checks its index ops with a flag of its own, numbered from 1
//! (`checks.rs`), read with the next host read as the eager ops' flag is:
//! so its program computes the same flag at every call, and a direct call
//! hands the flag it computed, with the checks of its first call, to that
//! read.
//!
//! A graph that draws random numbers (dropout) is called directly too: its
//! draws' keys are parameters of its program (`Recorder::key`: two halves
//! per draw, in the order drawn), and each direct call takes as many new
//! keys from its caller as the captured call drew ([`Stream::graph_draws`]),
//! so every call samples anew and a caller drawing them from the generator
//! the graph's kernels would have used gets the samples an eager call gets.

use std::sync::{Arc, Mutex, Weak};

use fusion::policy::CutReason;
use fusion::{DType, Graph, Scalar, TensorType};

use super::checks::{IndexCheck, IndexChecks, UNREAD_FLAGS};
use super::donation;
use super::launch::Param;
use super::liveness::Launch;
use super::{Stream, StreamState, lock, replay};
use crate::cache::Program;
use crate::completion::{Blame, Completion, Retired};
use crate::config::Mode;
use crate::context::Runtime;
use crate::error::{Error, Result};
use crate::metrics::Counters;
use crate::pjrt::Buffer;
use crate::value::{Launched, Value};

/// Graphs whose replay plans a stream keeps; past this, all are dropped (the
/// next call of each builds its chunk in full once, and finds its program in
/// the cache).
const MAX_GRAPHS: usize = 1024;

/// An open graph call on a trace: which graph, and the trace's own plans,
/// put back when it closes.
pub(super) struct GraphScope {
    id: u64,
    outer: replay::Replay,
    /// The trace's index checks, put back (with the call's) when it closes.
    outer_index: IndexChecks,
    /// The chunks the call launched, and the last one (a call launched as
    /// one chunk can be called directly next time).
    launched: u32,
    last: Option<GraphLaunch>,
}

/// A graph call's chunk as it ran: its program, its parameters (value,
/// buffer, whether an RNG key), the values it exported, in order.
pub(super) struct GraphLaunch {
    id: u64,
    program: Arc<Program>,
    /// The chunk's graph: a direct call that updates inputs in place runs
    /// a variant of it that donates them (`DirectCall::donations`).
    graph: Arc<Graph>,
    params: Vec<(Option<Arc<Value>>, Arc<Buffer>, bool)>,
    exports: Vec<Arc<Value>>,
    blame: Blame,
    /// No donation, and its index checks (if any) all in the flag it
    /// exports: the program computes the same function of its parameters at
    /// every call (an RNG key among them is new at each call).
    pure: bool,
    index: Option<ExportedFlag>,
}

/// The index-check flag a graph's program exports (at `export`), and the
/// checks its numbers name.
#[derive(Clone)]
struct ExportedFlag {
    export: usize,
    checks: Arc<[IndexCheck]>,
}

/// Where a parameter of a directly called graph comes from.
enum Source {
    Input(usize),
    /// A lifted scalar (a constant of the graph: an index check's number).
    Constant(Arc<Buffer>),
    /// Half `.1` (0 or 1) of the key of the call's draw `.0`.
    Key(usize, usize),
}

/// What a graph output is: a program output, or one of the inputs.
enum Output {
    Program(usize),
    Input(usize),
}

/// A graph whose calls run its program on the inputs' buffers: no op is
/// recorded (`Stream::graph_call`).
pub(super) struct DirectCall {
    program: Arc<Program>,
    inputs: Vec<TensorType>,
    params: Vec<Source>,
    outputs: Vec<Output>,
    out_types: Vec<TensorType>,
    blame: Blame,
    index: Option<ExportedFlag>,
    /// The random draws of a call (each takes a new key).
    draws: usize,
    /// The inputs each call updates: aot_autograd copies the result it
    /// returns for one into it (an optimizer's parameters and state,
    /// BatchNorm's running stats), so that input's buffer is donated to that
    /// result when nothing else holds it.
    donations: Vec<Donation>,
    donating: Mutex<Donating>,
}

/// An input a graph's call updates, and the program result that is its new
/// value.
struct Donation {
    input: usize,
    /// Its parameter of the program.
    param: usize,
    /// The program result (`DirectCall::program`'s output) it becomes.
    export: usize,
}

/// The program that donates a graph's updated inputs (the captured program
/// with their parameters aliased to their results), and what each call
/// returned as their new values.
struct Donating {
    program: DonatingProgram,
    /// Per donation: the value the last call returned as the input's new
    /// value. The input is donated only if it holds that value now, which
    /// shows that the caller copied the result into it (as aot_autograd's
    /// wrapper does) and that the donation names the right input.
    returned: Vec<Weak<Value>>,
}

enum DonatingProgram {
    /// Compiling in the background.
    Compiling(Box<Graph>),
    Ready(Arc<Program>),
    /// No donating program: the captured one runs every call.
    Unavailable,
}

/// A direct call's results, and the inputs it updated: for each donated
/// input, its new value. The input's buffer went to that value, so the
/// caller of [`Stream::graph_call`] makes the input's allocation hold it.
pub(crate) struct DirectResults {
    pub(crate) outputs: Vec<Arc<Value>>,
    pub(crate) updated: Vec<(usize, Arc<Value>)>,
}

impl Stream {
    /// Opens a call of compiled graph `id` on this thread's trace; false
    /// (nothing opened) in debug mode.
    pub fn graph_begin(&self, rt: &Runtime, id: u64) -> Result<bool> {
        if rt.effective_mode() == Mode::Debug {
            return Ok(false);
        }
        let mut st = lock(&self.state);
        st.enter();
        if let Some(open) = &st.trace.graph {
            return Err(Error::Internal(format!(
                "compiled graph {id} called while graph {} is still open on this thread",
                open.id
            )));
        }
        self.flush(rt, &mut st, CutReason::Graph, false)?;
        let plans = st.graph_plans.remove(&id).unwrap_or_default();
        let outer = std::mem::replace(&mut st.trace.replay, plans);
        let outer_index = std::mem::take(&mut st.trace.index);
        st.trace.graph = Some(GraphScope {
            id,
            outer,
            outer_index,
            launched: 0,
            last: None,
        });
        Counters::add(&rt.counters.compiled_graph_calls, 1);
        Ok(true)
    }

    /// Closes this thread's open graph call: its ops run as one program.
    /// Nothing open is no error (debug mode opened none).
    pub fn graph_end(&self, rt: &Runtime) -> Result<()> {
        let mut st = lock(&self.state);
        st.enter();
        if st.trace.graph.is_none() {
            return Ok(());
        }
        let flushed = self.flush(rt, &mut st, CutReason::Graph, false);
        Self::close(&mut st);
        flushed
    }

    fn close(st: &mut StreamState) {
        let Some(scope) = st.trace.graph.take() else {
            return;
        };
        let plans = std::mem::replace(&mut st.trace.replay, scope.outer);
        let call_index = std::mem::replace(&mut st.trace.index, scope.outer_index);
        st.trace.index.merge(call_index);
        if st.graph_plans.len() >= MAX_GRAPHS {
            st.graph_plans.clear();
        }
        st.graph_plans.insert(scope.id, plans);
        st.last_graph_launch = scope.last.filter(|_| scope.launched == 1);
    }

    /// Makes graph `id`'s later calls direct (`graph_call`) if its last call
    /// ran as one pure chunk whose parameters were its `inputs` (the values
    /// the call read, in order) and lifted scalars, and whose `outputs` are
    /// that chunk's results or inputs. True if it did.
    ///
    /// `updates` pairs an input with the output the caller copies into it
    /// after each call (`(input, output)`, as aot_autograd's metadata says):
    /// such an input is donated to that output's program result at the
    /// calls where nothing else holds it (`graph_call`).
    pub fn graph_capture(
        &self,
        rt: &Runtime,
        id: u64,
        inputs: &[Arc<Value>],
        outputs: &[Arc<Value>],
        updates: &[(usize, usize)],
    ) -> Result<bool> {
        if rt.effective_mode() == Mode::Debug {
            return Ok(false);
        }
        let mut st = lock(&self.state);
        st.enter();
        let Some(last) = st.last_graph_launch.take() else {
            return Ok(false);
        };
        if last.id != id || !last.pure {
            return Ok(false);
        }
        let position = |v: &Arc<Value>| inputs.iter().position(|i| Arc::ptr_eq(i, v));
        let mut params = Vec::with_capacity(last.params.len());
        let mut halves = 0;
        for (value, buffer, key) in &last.params {
            params.push(match value {
                // A tensor that is not an input (a constant the graph holds):
                // not known to stay the same, so no direct call.
                Some(v) => match position(v) {
                    Some(k) => Source::Input(k),
                    None => return Ok(false),
                },
                // The halves of each draw's key are lifted in order.
                None if *key => {
                    halves += 1;
                    Source::Key((halves - 1) / 2, (halves - 1) % 2)
                }
                None => Source::Constant(buffer.clone()),
            });
        }
        if halves % 2 != 0 {
            return Err(Error::Internal(format!(
                "compiled graph {id}: its chunk lifted {halves} RNG key halves, expected two per draw"
            )));
        }
        let mut outs = Vec::with_capacity(outputs.len());
        for o in outputs {
            match last.exports.iter().position(|e| Arc::ptr_eq(e, o)) {
                Some(j) => outs.push(Output::Program(j)),
                None => match position(o) {
                    Some(k) => outs.push(Output::Input(k)),
                    None => return Ok(false),
                },
            }
        }
        let out_types: Vec<TensorType> = last.exports.iter().map(|v| v.ty.clone()).collect();
        let donations = donations(updates, inputs, &params, &outs, &out_types);
        let returned = donations
            .iter()
            .map(|d| Arc::downgrade(&last.exports[d.export]))
            .collect();
        let program = if donations.is_empty() {
            DonatingProgram::Unavailable
        } else {
            let mut graph = (*last.graph).clone();
            for d in &donations {
                graph.alias(d.param, d.export);
            }
            Self::donating_program(rt, graph)
        };
        let call = DirectCall {
            program: last.program,
            inputs: inputs.iter().map(|v| v.ty.clone()).collect(),
            params,
            outputs: outs,
            out_types,
            blame: last.blame,
            index: last.index,
            draws: halves / 2,
            donations,
            donating: Mutex::new(Donating { program, returned }),
        };
        if st.direct_calls.len() >= MAX_GRAPHS {
            st.direct_calls.clear();
        }
        st.direct_calls.insert(id, Arc::new(call));
        Ok(true)
    }

    /// How many random draws a direct call of graph `id` makes (the keys
    /// [`Stream::graph_call`] takes); `None` when it has no direct call.
    pub fn graph_draws(&self, rt: &Runtime, id: u64) -> Option<usize> {
        if rt.effective_mode() == Mode::Debug {
            return None;
        }
        let st = lock(&self.state);
        st.direct_calls.get(&id).map(|c| c.draws)
    }

    /// Calls graph `id` directly: its program runs on `inputs`' buffers
    /// (launching those still pending first) with `keys` for its random
    /// draws, nothing is recorded, and the outputs come back. `None` when
    /// the graph has no direct call, the inputs' types are not those it was
    /// captured with, or `keys` are not one per draw (the caller then calls
    /// it through a graph scope).
    ///
    /// With `held`, each input is an allocation's contents, which the caller
    /// holds `held` more times (its handles), and an updated input
    /// (`graph_capture`) that nothing else holds is donated to its result:
    /// the caller must then make its allocation hold the new value
    /// (`DirectResults::updated`). Without, nothing is donated.
    pub fn graph_call(
        &self,
        rt: &Runtime,
        id: u64,
        inputs: &[Arc<Value>],
        keys: &[(u64, u64)],
        held: Option<usize>,
    ) -> Result<Option<DirectResults>> {
        if rt.effective_mode() == Mode::Debug {
            return Ok(None);
        }
        // What it donates must not depend on whether the launcher has run
        // the chunks handed to it (they hold their values until then).
        self.launcher.settle();
        let mut st = lock(&self.state);
        st.enter();
        let Some(call) = st.direct_calls.get(&id).cloned() else {
            return Ok(None);
        };
        if inputs.len() != call.inputs.len()
            || inputs.iter().zip(&call.inputs).any(|(v, t)| v.ty != *t)
            || keys.len() != call.draws
        {
            return Ok(None);
        }
        for v in inputs {
            if v.is_pending() {
                let index = if v.trace == st.active {
                    self.flush(rt, &mut st, CutReason::Graph, false)?;
                    std::mem::take(&mut st.trace.index)
                } else {
                    self.flush_trace(rt, &mut st, v.trace, CutReason::Graph)?
                };
                st.trace.index.merge(index);
            }
        }
        let mut launched = Vec::with_capacity(inputs.len());
        for v in inputs {
            launched.push(v.buffer()?.ok_or_else(|| {
                Error::Internal(
                    "a compiled graph's input is pending after its trace was cut".into(),
                )
            })?);
        }
        // The bits of each key half, as the int64 the program takes.
        let mut halves = Vec::with_capacity(2 * keys.len());
        for &(k0, k1) in keys {
            for half in [k0, k1] {
                halves.push(self.lifted_scalar(
                    rt,
                    &mut st,
                    Scalar::Int(half as i64),
                    DType::I64,
                    true,
                )?);
            }
        }
        let buffers: Vec<&Buffer> = call
            .params
            .iter()
            .map(|p| match p {
                Source::Input(k) => launched[*k].0.as_ref(),
                Source::Constant(b) => b.as_ref(),
                Source::Key(draw, half) => halves[2 * draw + half].as_ref(),
            })
            .collect();
        let deps: Vec<Arc<Completion>> = launched
            .iter()
            .filter_map(|(_, d)| d.clone())
            .filter(|d| !d.done_ok())
            .collect();
        let donating = match held {
            Some(held) if !call.donations.is_empty() => {
                // Settled chunks let go of the buffers they read.
                self.outstanding().retain(|c| !c.finished());
                let upstream = Completion::upstream(deps.iter().cloned());
                call.kept(
                    rt,
                    inputs,
                    &launched,
                    &upstream,
                    &self.launcher.retired,
                    held,
                )
            }
            _ => None,
        };
        let (program, kept) = match &donating {
            Some((p, kept)) => (p, kept.as_slice()),
            None => (&call.program, &[][..]),
        };
        let (outputs, event) = program
            .exe
            .execute_keeping(&buffers, &self.device, kept)
            .map_err(|e| call.blame.error(e))?;
        Counters::add(&rt.counters.executions, 1);
        Counters::add(&rt.counters.compiled_graph_calls, 1);
        Counters::add(&rt.counters.direct_graph_calls, 1);
        let reads: Vec<Arc<Buffer>> = launched.iter().map(|(b, _)| b.clone()).collect();
        let retired = Some(self.launcher.retired.clone());
        let done = Completion::new(event, call.blame.clone(), deps, reads, retired);
        crate::trace::execution(&done, &call.blame.origin, call.blame.chunk_ops);
        let mut outstanding = self.outstanding();
        outstanding.retain(|c| !c.done_ok());
        outstanding.push(done.clone());
        drop(outstanding);
        let results: Vec<Arc<Value>> = outputs
            .into_iter()
            .zip(&call.out_types)
            .map(|(b, ty)| Value::computed(ty.clone(), b, done.clone()))
            .collect();
        if let Some(flag) = &call.index {
            let checks = IndexChecks::of(results[flag.export].clone(), flag.checks.to_vec());
            st.trace.index.merge(checks);
            for old in st.trace.index.take_oldest(UNREAD_FLAGS) {
                self.take_index_error(rt, old)?;
            }
        }
        let mut updated = vec![];
        if let Some((_, kept)) = &donating {
            for d in &call.donations {
                if !kept.contains(&(d.param as i64)) {
                    updated.push((d.input, results[d.export].clone()));
                }
            }
            Counters::add(&rt.counters.donated_buffers, updated.len() as u64);
        }
        if !call.donations.is_empty() {
            call.returned(&results);
        }
        let outputs = call
            .outputs
            .iter()
            .map(|o| match o {
                Output::Program(j) => results[*j].clone(),
                Output::Input(k) => inputs[*k].clone(),
            })
            .collect();
        Ok(Some(DirectResults { outputs, updated }))
    }

    /// Notes a chunk launched inside a graph scope (`launch.rs`).
    pub(super) fn note_graph_launch(
        st: &mut StreamState,
        program: &Arc<Program>,
        graph: &Arc<Graph>,
        params: &[Param],
        launches: &[Launch],
    ) {
        if st.trace.graph.is_none() {
            return;
        }
        let exports: Vec<Arc<Value>> = launches.iter().filter_map(|l| l.export.clone()).collect();
        let checked = launches.iter().any(|l| l.node.op.index_operand().is_some());
        // The scope's own flag, exported by this chunk.
        let index = st.trace.index.only().and_then(|(flag, checks)| {
            let export = exports.iter().position(|e| Arc::ptr_eq(e, flag))?;
            Some(ExportedFlag {
                export,
                checks: checks.into(),
            })
        });
        // Lifted scalars are RNG keys, new at each call (taken by the direct
        // call), and the numbers of index checks, the same at each call
        // (numbered within the scope).
        let pure = graph.num_aliases() == 0 && (index.is_some() || !checked);
        let Some(scope) = st.trace.graph.as_mut() else {
            return;
        };
        // Which lifted scalars are halves of RNG keys (read by a draw), not
        // index checks' numbers: each lifted node is a parameter of its own,
        // in the chunk's order.
        let mut read_by_draw = vec![false; launches.len()];
        for l in launches {
            if l.node.op.draws() {
                for &k in l.from.iter().flatten() {
                    read_by_draw[k as usize] = true;
                }
            }
        }
        let mut drawn = launches
            .iter()
            .zip(&read_by_draw)
            .filter(|(l, _)| l.node.lift)
            .map(|(_, &drawn)| drawn);
        scope.launched += 1;
        scope.last = Some(GraphLaunch {
            id: scope.id,
            program: program.clone(),
            graph: graph.clone(),
            params: params
                .iter()
                .map(|p| {
                    (
                        p.value.clone(),
                        p.buffer.clone(),
                        p.lift && drawn.next() == Some(true),
                    )
                })
                .collect(),
            exports,
            blame: launches
                .last()
                .map(|l| l.node.blame(launches.len()))
                .expect("a chunk has nodes"),
            pure,
            index,
        });
    }

    /// The program of `graph` (a captured program with the updated inputs
    /// aliased to their results): from memory or the disk, or compiled in
    /// the background (then used once ready), or here when chunks compile
    /// on the caller's thread. A failed compile leaves the call without it.
    fn donating_program(rt: &Runtime, graph: Graph) -> DonatingProgram {
        if let Some(p) = rt.cache.loaded(&graph, &rt.counters) {
            return DonatingProgram::Ready(p);
        }
        if rt.cache.has_disk()
            && let Some(p) = rt.cache.load_from_disk(&graph, &rt.counters)
        {
            return DonatingProgram::Ready(p);
        }
        if rt.deterministic() || !rt.compiler.enabled() {
            return match rt.cache.get(&graph, &rt.counters) {
                Ok(p) => DonatingProgram::Ready(p),
                Err(_) => DonatingProgram::Unavailable,
            };
        }
        if rt.compiler.submit(graph.clone()) {
            DonatingProgram::Compiling(Box::new(graph))
        } else {
            DonatingProgram::Unavailable
        }
    }
}

/// The donations of a captured call: each `(input, output)` update whose
/// input is one parameter of the program and no output of the call (which
/// must keep its values), and whose output is one of the program's results,
/// of the input's type; each input and result once.
fn donations(
    updates: &[(usize, usize)],
    inputs: &[Arc<Value>],
    params: &[Source],
    outputs: &[Output],
    out_types: &[TensorType],
) -> Vec<Donation> {
    let mut found: Vec<Donation> = Vec::with_capacity(updates.len());
    for &(input, output) in updates {
        let Some(Output::Program(export)) = outputs.get(output) else {
            continue;
        };
        let mut reading = params
            .iter()
            .enumerate()
            .filter(|(_, s)| matches!(s, Source::Input(k) if *k == input));
        let (Some((param, _)), None) = (reading.next(), reading.next()) else {
            continue;
        };
        let returned = outputs
            .iter()
            .any(|o| matches!(o, Output::Input(k) if *k == input));
        let taken = returned
            || found
                .iter()
                .any(|d| d.input == input || d.export == *export);
        if !taken
            && inputs
                .get(input)
                .is_some_and(|v| v.ty == out_types[*export])
        {
            found.push(Donation {
                input,
                param,
                export: *export,
            });
        }
    }
    found
}

impl DirectCall {
    /// The parameters (of the donating program) not to donate at this call:
    /// `None` to run the captured program (no donating program yet, or
    /// nothing to donate). An input is donated when it holds the value the
    /// last call returned for it, nothing but its allocation and the call
    /// (`held` references) holds that value, and no chunk holds its buffer
    /// but those this call runs after (`upstream`).
    fn kept(
        &self,
        rt: &Runtime,
        inputs: &[Arc<Value>],
        launched: &[Launched],
        upstream: &[Arc<Completion>],
        retired: &Retired,
        held: usize,
    ) -> Option<(Arc<Program>, Vec<i64>)> {
        let mut donating = lock(&self.donating);
        if let DonatingProgram::Compiling(graph) = &donating.program {
            if rt.compiler.failed(graph.key_hash()) {
                donating.program = DonatingProgram::Unavailable;
            } else if let Some(p) = rt.cache.loaded(graph, &rt.counters) {
                Counters::add(&rt.counters.promotions, 1);
                donating.program = DonatingProgram::Ready(p);
            }
        }
        let DonatingProgram::Ready(program) = &donating.program else {
            return None;
        };
        let mut kept = Vec::new();
        for (d, returned) in self.donations.iter().zip(&donating.returned) {
            let v = &inputs[d.input];
            let copied = returned.upgrade().is_some_and(|r| Arc::ptr_eq(&r, v));
            // The allocation's reference, and the call's.
            let only_allocation = Arc::strong_count(v) == held + 1;
            // Held by the value, `launched` and the chunks run before?
            let read_elsewhere = donation::read_elsewhere(&launched[d.input].0, upstream, retired);
            if copied && only_allocation && read_elsewhere {
                Counters::add(&rt.counters.donations_blocked_by_readers, 1);
            }
            if !(copied && only_allocation) || read_elsewhere {
                kept.push(d.param as i64);
            }
        }
        (kept.len() < self.donations.len()).then(|| (program.clone(), kept))
    }

    /// Notes what a call returned for its updated inputs (`results`: the
    /// program's).
    fn returned(&self, results: &[Arc<Value>]) {
        let mut donating = lock(&self.donating);
        for (d, returned) in self.donations.iter().zip(donating.returned.iter_mut()) {
            *returned = Arc::downgrade(&results[d.export]);
        }
    }
}

impl StreamState {
    /// Whether this thread's trace is inside a compiled graph's call.
    pub(super) fn in_graph(&self) -> bool {
        self.trace.graph.is_some()
    }

    /// Whether recorded nodes are compared with replay plans: in fused mode,
    /// and in a compiled graph's call in every mode.
    pub(super) fn compares_plans(&self, rt: &Runtime) -> bool {
        self.in_graph() || rt.effective_mode() == Mode::Fused
    }
}
