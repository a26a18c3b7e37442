//! Launch: a cut chunk becomes a graph with parameters (scalars lifted, dead
//! inputs donated), is found in the compile cache, and runs; a chunk that
//! fails is re-run op by op to name the op.

use std::collections::HashMap;
use std::sync::Arc;

use fusion::hash::FxBuild;
use fusion::{DType, Graph, Op, Scalar, TensorType, ValueId};
use smallvec::SmallVec;

use super::liveness::{Launch, fail};
use super::record::{TraceNode, is_parameter};
use super::replay::{Binding, Plan};
use super::{HazardChecker, SCALAR_CACHE, Stream, StreamState, checks, tiers};
use crate::cache::Program;
use crate::completion::{Blame, Completion};
use crate::config::Mode;
use crate::context::Runtime;
use crate::error::{Error, Result};
use crate::host;
use crate::metrics::Counters;
use crate::pjrt::Buffer;
use crate::trace;
use crate::value::Value;

/// What a launch did: `failure`, the first error of a chunk re-run op by op
/// after failing; `plan`, how a fused chunk was bound to the ready program it
/// ran as (to replay it).
pub(super) struct Launched {
    pub(super) failure: Option<Error>,
    pub(super) plan: Option<(Binding, Arc<Graph>, Arc<Program>)>,
    /// Bound but not yet handed to the plugin (a launch asked to defer).
    pub(super) deferred: Option<Run>,
}

impl Launched {
    fn failed(failure: Option<Error>) -> Launched {
        Launched {
            failure,
            plan: None,
            deferred: None,
        }
    }
}

/// A chunk bound to its program: what the plugin call takes.
pub(super) struct Run {
    program: Arc<Program>,
    params: Vec<Param>,
    /// Aliased parameters not donated (`Stream::kept_by_readers`).
    kept: SmallVec<[i64; 4]>,
    /// The chunk's last op, blamed for a failure of the whole.
    blamed: Blame,
    /// Buffers donated.
    donated: usize,
}

/// How running a bound chunk failed: as a whole (nothing ran; every result
/// fails with the error), or run op by op after failing (each result is
/// ready or failed on its own; the first failure).
enum RunFailure {
    Whole(Error),
    Isolated(Option<Error>),
}

/// A chunk cut and bound under the stream's state lock, run by the thread
/// that cut it once the lock is released ([`Stream::run_deferred`]): the
/// plugin call (tens of microseconds, most of it waking the plugin's worker)
/// and the drop of the chunk's trace nodes then hold up no other thread's
/// recording. Its exported values are in flight until then (`Value`).
pub(super) struct Deferred {
    /// The cut trace's nodes, owned (the launches' nodes, by index).
    pub(super) nodes: Vec<TraceNode>,
    /// Each launch: its node's index, and the value it exports.
    pub(super) exports: Vec<(u32, Option<Arc<Value>>)>,
    pub(super) run: Option<Run>,
}

impl Drop for Deferred {
    /// A chunk whose launch never ran or did not finish (a panic) fails the
    /// values it left in flight: no reader waits for them forever.
    fn drop(&mut self) {
        for v in self.exports.iter().filter_map(|(_, v)| v.as_ref()) {
            v.fail_if_in_flight(Error::Internal(
                "a chunk was cut but its launch never completed".into(),
            ));
        }
    }
}

/// A parameter of a chunk: an input buffer, and the value it came from
/// (none for a lifted scalar); `lift`: a scalar that is always a
/// parameter of its own (`Recorder::key`: half an RNG key, or an index
/// check's number).
pub(super) struct Param {
    pub(super) value: Option<Arc<Value>>,
    pub(super) buffer: Arc<Buffer>,
    pub(super) done: Option<Arc<Completion>>,
    pub(super) lift: bool,
}

impl Stream {
    /// Launches a chunk, bound to `plan`'s program if it binds (`replay.rs`).
    /// `Err`: nothing ran and every result fails with it. A `failure`: the
    /// chunk was run op by op after failing, each result is ready or failed on
    /// its own, and that is the first failure. With `defer` (and no wait, no
    /// hazard check, no compiled graph), a chunk bound to its program is
    /// returned unrun in `deferred`, its results in flight.
    pub(super) fn launch(
        &self,
        rt: &Runtime,
        st: &mut StreamState,
        launches: &[Launch],
        wait: bool,
        defer: bool,
        plan: Option<&Plan>,
    ) -> Result<Launched> {
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
        self.outstanding().retain(|c| !c.done_ok());
        let replayed = match plan {
            Some(plan) => {
                let bound = plan.bind(launches, |value, dtype, key| {
                    self.lifted_scalar(rt, st, value, dtype, key)
                })?;
                if bound.is_none() {
                    Counters::add(&rt.counters.replay_misses, 1);
                }
                bound.map(|params| (plan.graph.clone(), params, plan.program.clone()))
            }
            None => None,
        };
        let mut planned = None;
        let (graph, params, program) = match replayed {
            Some(bound) => {
                Counters::add(&rt.counters.replayed_chunks, 1);
                Counters::add(&rt.counters.replayed_ops, launches.len() as u64);
                Counters::add(&rt.counters.memory_hits, 1);
                bound
            }
            None => {
                let (graph, params, binding) = self.build_graph(rt, st, launches, !debug)?;
                let graph = Arc::new(graph);
                let program = if st.in_graph() && launches.len() > 1 {
                    // A compiled graph: compiled now, whatever its hotness.
                    match rt.cache.get(&graph, &rt.counters) {
                        Ok(p) => {
                            planned = Some((binding, graph.clone(), p.clone()));
                            p
                        }
                        Err(e) => return Ok(Launched::failed(self.isolate(rt, launches, e))),
                    }
                } else if rt.effective_mode() == Mode::Fused && tiers::several_calls(launches) {
                    match self.fused_program(rt, st, &graph, launches) {
                        Ok(p) => {
                            planned = Some((binding, graph.clone(), p.clone()));
                            p
                        }
                        Err(parts) => {
                            drop(params);
                            return Ok(Launched::failed(self.run_parts(rt, st, launches, parts)));
                        }
                    }
                } else {
                    match rt.cache.get(&graph, &rt.counters) {
                        Ok(p) => p,
                        Err(e) if launches.len() > 1 => {
                            return Ok(Launched::failed(self.isolate(rt, launches, e)));
                        }
                        Err(e) => return Err(blame(e)),
                    }
                };
                (graph, params, program)
            }
        };
        // Number operands read as parameters (the others are lifted above).
        let numbers = params
            .iter()
            .filter(|p| p.value.as_ref().is_some_and(|v| v.number))
            .count();
        Counters::add(&rt.counters.lifted_scalars, numbers as u64);
        // The unfinished chunks this one reads from, directly or not: the
        // device starts it only once they are done, so a buffer that only
        // they still read (the forward pass of a step reads the weights its
        // optimizer updates) is donated at once, with no wait on the host.
        let upstream = match graph.num_aliases() {
            0 => vec![],
            _ => Completion::upstream(params.iter().filter_map(|p| p.done.clone())),
        };
        let kept = self.kept_by_readers(rt, &graph, &params, &upstream);
        let snapshot = match &rt.hazards {
            Some(_) => {
                HazardChecker::check_donations(
                    &graph,
                    &params,
                    &kept,
                    &self.outstanding(),
                    &upstream,
                )
                .map_err(blame)?;
                Some(HazardChecker::snapshot(&graph, &params)?)
            }
            None => None,
        };
        if st.in_graph() {
            Self::note_graph_launch(st, &program, &graph, &params, launches);
        }
        let run = Run {
            donated: graph.num_aliases() - kept.len(),
            program,
            params,
            kept,
            blamed: last.clone().expect("a chunk has nodes"),
        };
        if defer && snapshot.is_none() && !st.in_graph() {
            // Bound: the plugin call and what follows it need nothing of the
            // state, and run after its lock is released (`Deferred`).
            for v in launches.iter().filter_map(|l| l.export.as_ref()) {
                v.set_in_flight();
            }
            return Ok(Launched {
                failure: None,
                plan: planned,
                deferred: Some(run),
            });
        }
        let (completion, params) = match self.execute_run(rt, run, launches) {
            Ok(ran) => ran,
            Err(RunFailure::Isolated(failure)) => return Ok(Launched::failed(failure)),
            Err(RunFailure::Whole(e)) => return Err(e),
        };
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
        Ok(Launched {
            failure: None,
            plan: planned,
            deferred: None,
        })
    }

    /// Hands a bound chunk to the plugin and makes its exported values ready;
    /// the chunk's completion (kept with the stream's outstanding ones) and
    /// its parameters. Needs nothing of the stream's state: a deferred chunk
    /// runs here after the state's lock is released.
    fn execute_run(
        &self,
        rt: &Runtime,
        run: Run,
        launches: &[Launch],
    ) -> std::result::Result<(Arc<Completion>, Vec<Param>), RunFailure> {
        let Run {
            program,
            params,
            kept,
            blamed,
            donated,
        } = run;
        let inputs: Vec<&Buffer> = params.iter().map(|p| p.buffer.as_ref()).collect();
        let (outputs, event) = match program.exe.execute_keeping(&inputs, &self.device, &kept) {
            Ok(x) => x,
            Err(e) if launches.len() > 1 => {
                drop(inputs);
                drop(params);
                return Err(RunFailure::Isolated(self.isolate(rt, launches, e)));
            }
            Err(e) => return Err(RunFailure::Whole(blamed.error(e))),
        };
        Counters::add(&rt.counters.executions, 1);
        Counters::add(&rt.counters.donated_buffers, donated as u64);
        let deps: Vec<Arc<Completion>> = params
            .iter()
            .filter_map(|p| p.done.clone())
            .filter(|d| !d.done_ok())
            .collect();
        let reads = params.iter().map(|p| p.buffer.clone()).collect();
        let retired = Some(self.launcher.retired.clone());
        let completion = Completion::new(event, blamed, deps, reads, retired);
        trace::execution(&completion, &completion.blame().origin, launches.len());
        let exported = launches.iter().filter_map(|l| l.export.as_ref());
        for (value, buffer) in exported.zip(outputs) {
            value.set_ready(buffer, Some(completion.clone()));
        }
        self.outstanding().push(completion.clone());
        Ok((completion, params))
    }

    /// Runs a chunk [`Stream::launch`] bound and deferred, after the state's
    /// lock is released: its failure is left in its results and with the
    /// outstanding chunks (for `sync`), as a launch that does not wait does.
    /// Its trace nodes are dropped here too, outside the lock.
    pub(super) fn run_deferred(&self, rt: &Runtime, mut deferred: Deferred) {
        let Some(run) = deferred.run.take() else {
            return;
        };
        // The deferred chunk keeps its exports until it drops, after the
        // launch (or a panic inside it): those still in flight then fail.
        let launches: Vec<Launch> = deferred
            .exports
            .iter()
            .map(|(index, export)| Launch {
                node: &deferred.nodes[*index as usize],
                index: *index,
                export: export.clone(),
                from: SmallVec::new(),
            })
            .collect();
        let failure = match self.execute_run(rt, run, &launches) {
            Ok(_) => None,
            Err(RunFailure::Isolated(failure)) => failure,
            Err(RunFailure::Whole(e)) => Some(fail(&launches, e)),
        };
        if let Some(e) = failure {
            self.outstanding().push(Completion::failed(e));
        }
    }

    /// The chunk as a graph and its parameters: ready inputs become parameters,
    /// scalars are lifted, and (with `donate`) dead inputs are donated. The
    /// binding says which parameter each input became (to replay the chunk).
    fn build_graph(
        &self,
        rt: &Runtime,
        st: &mut StreamState,
        launches: &[Launch],
        donate: bool,
    ) -> Result<(Graph, Vec<Param>, Binding)> {
        // One value per node, plus the parameters (most read a few).
        let mut graph = Graph::with_capacity(launches.len() + launches.len() / 4 + 8);
        let mut params: Vec<Param> = vec![];
        // Parameters (graph id, index) by value address, and how many chunk
        // nodes read each.
        let mut param_ids: HashMap<usize, (ValueId, u32, usize), FxBuild> = HashMap::default();
        let mut ids: Vec<ValueId> = Vec::with_capacity(launches.len());
        // For each node, the parameter it updates in place, if any
        // (`Stream::donate`).
        let mut updates: Vec<Option<u32>> = Vec::with_capacity(launches.len());
        let mut lifted: HashMap<(DType, u64), (ValueId, u32), FxBuild> = HashMap::default();
        let mut binding = Binding::default();
        for l in launches {
            let node = &l.node;
            let mut updated = None;
            let id = match &node.op {
                Op::Full { value, ty } if is_parameter(*value, node.lift) => {
                    // One parameter per distinct scalar: a loop of `x * 0.9`
                    // reads one, not one per op. (So which scalars are equal
                    // is part of the program, as in torch_xla; a random key
                    // is not shared, or a key with equal halves would make a
                    // program of its own.)
                    let key = (ty.dtype, host::scalar_bits(*value, ty.dtype).0);
                    let shared = if node.lift { None } else { lifted.get(&key) };
                    let p = match shared {
                        Some(&(p, index)) => {
                            binding.slots.push(index);
                            p
                        }
                        None => {
                            binding.slots.push(params.len() as u32);
                            let buffer = self.lifted_scalar(rt, st, *value, ty.dtype, node.lift)?;
                            let p = graph.param(TensorType::scalar(ty.dtype));
                            params.push(Param {
                                value: None,
                                buffer,
                                done: None,
                                lift: node.lift,
                            });
                            if !node.lift {
                                lifted.insert(key, (p, params.len() as u32 - 1));
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
                        // Its first input of its own type: what it updates.
                        let first = updated.is_none() && input.ty == node.ty;
                        if let Some(k) = from {
                            if first {
                                updated = updates[*k as usize];
                            }
                            inputs.push(ids[*k as usize]);
                            continue;
                        }
                        let addr = Arc::as_ptr(input) as usize;
                        if let Some((id, index, uses)) = param_ids.get_mut(&addr) {
                            *uses += 1;
                            if first {
                                updated = Some(*index);
                            }
                            binding.slots.push(*index);
                            inputs.push(*id);
                            continue;
                        }
                        if first {
                            updated = Some(params.len() as u32);
                        }
                        binding.slots.push(params.len() as u32);
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
                            lift: false,
                        });
                        param_ids.insert(addr, (id, params.len() as u32 - 1, 1));
                        inputs.push(id);
                    }
                    graph.push_inferred(op.clone(), &inputs, node.ty.clone())
                }
            };
            ids.push(id);
            updates.push(updated);
        }
        // For each output, the parameter it updates.
        let mut updated_params = vec![];
        for ((l, id), updated) in launches.iter().zip(&ids).zip(&updates) {
            if l.export.is_some() {
                graph.output(*id);
                updated_params.push(*updated);
            }
        }
        binding.dead = vec![false; params.len()];
        if donate {
            let uses: HashMap<usize, usize, FxBuild> = param_ids
                .iter()
                .map(|(addr, (_, _, uses))| (*addr, *uses))
                .collect();
            Self::donate(
                &mut graph,
                &params,
                &uses,
                &updated_params,
                &mut binding.dead,
            );
        }
        Ok((graph, params, binding))
    }

    /// The buffer of a scalar lifted to a parameter (`key`: an RNG key),
    /// counted; the full path, a replayed chunk and a graph's direct call
    /// all take it here.
    pub(super) fn lifted_scalar(
        &self,
        rt: &Runtime,
        st: &mut StreamState,
        value: Scalar,
        dtype: DType,
        key: bool,
    ) -> Result<Arc<Buffer>> {
        Counters::add(&rt.counters.lifted_scalars, 1);
        // A random key never repeats: not worth a cache slot. Any other
        // scalar is the buffer of the stream's value for that number, and so
        // is a small key: an index check's number (`checks.rs`), 1 in every
        // step of a loop that reads each step (uploaded at every launch
        // before).
        if key && !(0..=checks::MAX_CHECKS as i64).contains(&value.as_i64()) {
            return Ok(Arc::new(self.upload_scalar(rt, value, dtype)?));
        }
        let number = self.number(rt, st, value, dtype)?;
        let (buffer, _) = number
            .buffer()?
            .ok_or_else(|| Error::Internal("a number operand's value has no buffer".into()))?;
        Ok(buffer)
    }

    /// Number operand `value` as a `dtype` 0-d value of this stream, one per
    /// distinct number (`Recorder::scalar`): uploaded once, read by every op
    /// of that number as an input, so its ops record, replay and bind with
    /// no node of its own.
    pub(super) fn number(
        &self,
        rt: &Runtime,
        st: &mut StreamState,
        value: Scalar,
        dtype: DType,
    ) -> Result<Arc<Value>> {
        let key = (dtype, host::scalar_bits(value, dtype).0);
        if let Some(v) = st.numbers.get(&key) {
            return Ok(v.clone());
        }
        let buffer = self.upload_scalar(rt, value, dtype)?;
        if st.numbers.len() >= SCALAR_CACHE {
            st.numbers.clear();
        }
        let v = Value::number(fusion::TensorType::scalar(dtype), buffer);
        st.numbers.insert(key, v.clone());
        Ok(v)
    }

    /// `value` as a `dtype` 0-d buffer on this stream's device.
    fn upload_scalar(&self, rt: &Runtime, value: Scalar, dtype: DType) -> Result<Buffer> {
        let (bits, len) = host::scalar_bits(value, dtype);
        // Little-endian bits, then zeros (a complex128's imaginary part).
        let mut element = [0u8; 16];
        element[..8].copy_from_slice(&bits.to_le_bytes());
        let bytes = &element[..len];
        let span = trace::to_device(&fusion::TensorType::scalar(dtype));
        let buffer = Buffer::from_host(&self.device, dtype, &[], bytes)?;
        drop(span);
        Counters::add(&rt.counters.transfers_to_device, 1);
        Counters::add(&rt.counters.bytes_to_device, bytes.len() as u64);
        Ok(buffer)
    }

    /// A chunk of several ops failed to compile or run: run its ops one by one
    /// (waiting for each) to find the op that fails. That op's results, and
    /// everything computed from them, fail with an error naming it; the other
    /// ops' results are computed. Returns the first failure, if any.
    ///
    /// An op reads the results of the chunk's earlier ops from this run, not
    /// from their values: a result no one holds has no value to wait on (a
    /// scalar operand, an intermediate of a chunk split by API call).
    fn isolate(&self, rt: &Runtime, launches: &[Launch], chunk_error: Error) -> Option<Error> {
        tracing::warn!(
            target: "eagertpu::exec",
            "a fused chunk of {} ops failed ({chunk_error}); running it op by op to find the op",
            launches.len()
        );
        let mut first = None;
        let mut results: Vec<Result<Arc<Buffer>>> = Vec::with_capacity(launches.len());
        for l in launches {
            let inputs: Result<Vec<Arc<Buffer>>> = l
                .node
                .inputs
                .iter()
                .zip(&l.from)
                .map(|(input, from)| match from {
                    Some(k) => results.get(*k as usize).cloned().unwrap_or_else(|| {
                        Err(Error::Internal("an op ran before its input".into()))
                    }),
                    None => input.wait(),
                })
                .collect();
            let outcome = inputs.and_then(|inputs| self.run_alone(rt, l.node, &inputs));
            if let Some(out) = l.node.output.upgrade() {
                match &outcome {
                    Ok(buffer) => out.set_ready(buffer.clone(), None),
                    Err(e) => out.set_failed(e.clone()),
                }
            }
            if let Err(e) = &outcome {
                first.get_or_insert_with(|| e.clone());
            }
            results.push(outcome);
        }
        first
    }

    /// Runs one node as its own program on `inputs` and waits for it.
    fn run_alone(
        &self,
        rt: &Runtime,
        node: &TraceNode,
        inputs: &[Arc<Buffer>],
    ) -> Result<Arc<Buffer>> {
        let mut graph = Graph::new();
        let ids: SmallVec<[ValueId; 3]> = node
            .inputs
            .iter()
            .map(|input| graph.param(input.ty.clone()))
            .collect();
        let id = graph.push_inferred(node.op.clone(), &ids, node.ty.clone());
        graph.output(id);
        let blame = |e: Error| node.blame(1).error(e);
        let program = rt.cache.get(&graph, &rt.counters).map_err(blame)?;
        let inputs: Vec<&Buffer> = inputs.iter().map(|b| b.as_ref()).collect();
        let span = trace::span(trace::Kind::Execute, Some(&node.origin), || "1 op".into());
        let (mut outputs, done) = program.exe.execute(&inputs, &self.device).map_err(blame)?;
        Counters::add(&rt.counters.executions, 1);
        if let Some(done) = done {
            done.wait().map_err(blame)?;
        }
        drop(span);
        Ok(Arc::new(outputs.remove(0)))
    }
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

#[cfg(test)]
mod tests {
    use fusion::{DType, TensorType};

    use super::*;

    /// A deferred chunk dropped before its launch completed (a panic on the
    /// launcher) fails the values it left in flight, and only those.
    #[test]
    fn a_deferred_chunk_dropped_unlaunched_fails_its_values_in_flight() {
        let ty = TensorType::new(DType::F32, &[2]);
        let in_flight = Value::pending(ty.clone(), 0, 0, 0);
        in_flight.set_in_flight();
        let failed_before = Value::pending(ty, 1, 0, 0);
        failed_before.set_in_flight();
        failed_before.set_failed(Error::Internal("its own failure".into()));
        drop(Deferred {
            nodes: vec![],
            exports: vec![
                (0, Some(in_flight.clone())),
                (1, Some(failed_before.clone())),
            ],
            run: None,
        });
        let err = in_flight.buffer().err().expect("failed").to_string();
        assert!(err.contains("its launch never completed"), "{err}");
        let err = failed_before.buffer().err().expect("failed").to_string();
        assert!(err.contains("its own failure"), "{err}");
    }
}
