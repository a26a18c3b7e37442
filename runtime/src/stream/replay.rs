//! Trace-guarded replay: a loop that settled records the same chunks every
//! step, so once a chunk has run as a compiled program, the next chunk made
//! of the same ops is bound to that program directly.
//!
//! - **Plan.** A fused chunk launched with a program that was ready leaves a
//!   plan: each node's op, input types, result type and window signature, the
//!   chunk's wiring and exports, which parameter each input became and which
//!   parameters were donated, the graph and its program.
//! - **Guard, while recording.** Node `i` of a trace is compared with node
//!   `i` of each plan still matching (op and attributes, input types; a
//!   lifted scalar's value is no part of it). A match takes the plan's result
//!   type and signature: no type inference, no hashing. A mismatch drops the
//!   plan for this chunk; with no plan left, recording is the full path.
//! - **Guard, at the cut.** A chunk whose every node matched a plan of its
//!   length, with the same nodes live and exported, is bound to the plan's
//!   parameters: the same tensors in the same places (none shared that the
//!   plan kept apart), equal lifted scalars where the plan shared one, and
//!   the same inputs dead (donated). Then the plan's program runs: no graph
//!   is built, canonicalized, hashed or looked up. Any difference is a
//!   `replay_miss`, and the chunk takes the full path, which leaves a new
//!   plan.
//!
//! What the guards compare is what the full path's graph is made of, so a
//! replayed chunk runs the program the full path would have found, on the
//! same buffers.

use std::collections::HashMap;
use std::sync::Arc;

use fusion::hash::FxBuild;
use fusion::{DType, Graph, Op, Scalar, TensorType};
use smallvec::SmallVec;

use super::launch::Param;
use super::liveness::Launch;
use super::record::is_parameter;
use crate::cache::Program;
use crate::error::{Error, Result};
use crate::host;
use crate::pjrt::Buffer;
use crate::value::Value;

/// Plans kept per trace (a training step cut in two keeps two).
const MAX_PLANS: usize = 4;

/// What a live node of a planned chunk was.
struct PlanNode {
    op: Op,
    inputs: SmallVec<[TensorType; 3]>,
    ty: TensorType,
    lift: bool,
    signature: u64,
}

impl PlanNode {
    /// Whether `op` over `inputs` is this node: the same op and attributes
    /// over the same input types. A scalar that reaches the program as a
    /// parameter matches whatever its value; a scalar compiled in (0, 1, -1,
    /// a bool) only itself.
    fn matches(&self, op: &Op, inputs: &[&Arc<Value>], lift: bool) -> bool {
        if self.lift != lift
            || inputs.len() != self.inputs.len()
            || !inputs.iter().zip(&self.inputs).all(|(v, t)| v.ty == *t)
        {
            return false;
        }
        match (op, &self.op) {
            (
                Op::Full { value, ty },
                Op::Full {
                    value: was,
                    ty: was_ty,
                },
            ) => {
                ty == was_ty
                    && match (is_parameter(*value, lift), is_parameter(*was, lift)) {
                        (true, true) => true,
                        (false, false) => value == was,
                        _ => false,
                    }
            }
            (op, was) => op == was,
        }
    }
}

/// A live node of a planned chunk: its place in the trace, where its inputs
/// come from, whether its result left the device.
struct PlanLaunch {
    index: u32,
    from: SmallVec<[Option<u32>; 3]>,
    export: bool,
}

/// How the full path bound a chunk to its graph's parameters, in the order
/// it met them (`Stream::build_graph`).
#[derive(Default)]
pub(super) struct Binding {
    /// For each parameter occurrence (an input from outside the chunk, or a
    /// lifted scalar), the parameter it became.
    pub(super) slots: Vec<u32>,
    /// For each parameter, whether it was dead (nothing outside the chunk
    /// held it: donated to an output of its type if one was free).
    pub(super) dead: Vec<bool>,
}

/// A chunk that ran as a compiled program, to bind its next occurrences to.
pub(super) struct Plan {
    /// By trace index; `None` for a node that did not run (no result needed).
    nodes: Vec<Option<PlanNode>>,
    launches: Vec<PlanLaunch>,
    binding: Binding,
    pub(super) graph: Arc<Graph>,
    pub(super) program: Arc<Program>,
}

impl Plan {
    /// The plan of a chunk of `len` nodes launched as `launches` with
    /// `graph`, `program` and `binding`.
    pub(super) fn new(
        len: usize,
        launches: &[Launch],
        binding: Binding,
        graph: Arc<Graph>,
        program: Arc<Program>,
    ) -> Plan {
        let mut planned: Vec<Option<PlanNode>> = (0..len).map(|_| None).collect();
        for l in launches {
            let n = l.node;
            planned[l.index as usize] = Some(PlanNode {
                op: n.op.clone(),
                inputs: n.inputs.iter().map(|v| v.ty.clone()).collect(),
                ty: n.ty.clone(),
                lift: n.lift,
                signature: n.signature,
            });
        }
        Plan {
            nodes: planned,
            launches: launches
                .iter()
                .map(|l| PlanLaunch {
                    index: l.index,
                    from: l.from.clone(),
                    export: l.export.is_some(),
                })
                .collect(),
            binding,
            graph,
            program,
        }
    }

    /// Whether `launches` run the nodes this plan ran, wired and exported
    /// the same way.
    fn fits(&self, launches: &[Launch]) -> bool {
        launches.len() == self.launches.len()
            && launches.iter().zip(&self.launches).all(|(l, p)| {
                l.index == p.index && l.export.is_some() == p.export && l.from == p.from
            })
    }

    /// The parameters of `launches` bound as the plan's were, or `None` if
    /// they differ where the graph would (then the full path runs).
    /// `scalar(value, dtype, lift)` gives a lifted scalar's buffer (`lift`:
    /// an RNG key).
    pub(super) fn bind(
        &self,
        launches: &[Launch],
        mut scalar: impl FnMut(Scalar, DType, bool) -> Result<Arc<Buffer>>,
    ) -> Result<Option<Vec<Param>>> {
        if !self.fits(launches) {
            return Ok(None);
        }
        let slots = &self.binding.slots;
        let count = self.binding.dead.len();
        let mut params: Vec<Param> = Vec::with_capacity(count);
        let mut uses = vec![0usize; count];
        // Per parameter: the (dtype, bits) of a lifted scalar.
        let mut scalars: Vec<Option<(DType, u64)>> = Vec::with_capacity(count);
        let mut at: HashMap<usize, usize, FxBuild> = HashMap::default();
        let mut next = 0usize;
        for l in launches {
            let node = l.node;
            match &node.op {
                Op::Full { value, ty } if is_parameter(*value, node.lift) => {
                    let Some(&p) = slots.get(next) else {
                        return Ok(None);
                    };
                    next += 1;
                    let key = (ty.dtype, host::scalar_bits(*value, ty.dtype).0);
                    if p as usize == params.len() {
                        params.push(Param {
                            value: None,
                            buffer: scalar(*value, ty.dtype, node.lift)?,
                            done: None,
                            lift: node.lift,
                        });
                        scalars.push(Some(key));
                    } else if node.lift || scalars.get(p as usize) != Some(&Some(key)) {
                        return Ok(None);
                    }
                }
                _ => {
                    for (input, from) in node.inputs.iter().zip(&l.from) {
                        if from.is_some() {
                            continue;
                        }
                        let Some(&p) = slots.get(next) else {
                            return Ok(None);
                        };
                        next += 1;
                        let p = p as usize;
                        let addr = Arc::as_ptr(input) as usize;
                        if p == params.len() {
                            if at.insert(addr, p).is_some() {
                                return Ok(None);
                            }
                            let (buffer, done) = input.buffer()?.ok_or_else(|| {
                                Error::Internal(
                                    "an input is pending outside the chunk being run".into(),
                                )
                            })?;
                            params.push(Param {
                                value: Some(input.clone()),
                                buffer,
                                done,
                                lift: false,
                            });
                            scalars.push(None);
                        } else if at.get(&addr) != Some(&p) {
                            return Ok(None);
                        }
                        uses[p] += 1;
                    }
                }
            }
        }
        if next != slots.len() || params.len() != count {
            return Ok(None);
        }
        // Dead now where it was dead then: the program's donations hold.
        for (i, p) in params.iter().enumerate() {
            let dead = p
                .value
                .as_ref()
                .is_some_and(|v| Arc::strong_count(v) == uses[i] + 1);
            if dead != self.binding.dead[i] {
                return Ok(None);
            }
        }
        Ok(Some(params))
    }
}

/// A trace's plans and which of them the chunk being recorded still matches.
#[derive(Default)]
pub(super) struct Replay {
    plans: Vec<Arc<Plan>>,
    /// Bit `i`: plan `i` matches every node recorded since the last cut.
    candidates: u32,
    /// Nodes compared since the last cut (a node recorded out of turn, after
    /// a failed call's nodes were dropped, ends the match).
    compared: usize,
}

impl Replay {
    /// Node `index` of the chunk being recorded is `op` over `inputs`: its
    /// result type and signature if a plan still matching has it there.
    #[inline]
    pub(super) fn step(
        &mut self,
        index: usize,
        op: &Op,
        inputs: &[&Arc<Value>],
        lift: bool,
    ) -> Option<(TensorType, u64)> {
        if self.candidates == 0 {
            return None;
        }
        if index != self.compared {
            self.candidates = 0;
            return None;
        }
        self.compared += 1;
        let mut known = None;
        for (i, plan) in self.plans.iter().enumerate() {
            let bit = 1u32 << i;
            if self.candidates & bit == 0 {
                continue;
            }
            match plan.nodes.get(index) {
                None => self.candidates &= !bit,
                // Did not run then: whether it runs now is checked at the cut.
                Some(None) => {}
                Some(Some(n)) if n.matches(op, inputs, lift) => {
                    if known.is_none() {
                        known = Some((n.ty.clone(), n.signature));
                    }
                }
                Some(Some(_)) => self.candidates &= !bit,
            }
        }
        known
    }

    /// The chunk of `len` nodes being cut: the plan it matched, node for
    /// node, if any. Matching starts over for the next chunk.
    pub(super) fn take(&mut self, len: usize) -> Option<Arc<Plan>> {
        let found = self
            .plans
            .iter()
            .enumerate()
            .find(|(i, p)| {
                self.candidates & (1 << i) != 0 && p.nodes.len() == len && self.compared == len
            })
            .map(|(_, p)| p.clone());
        self.restart();
        found
    }

    /// A new plan, replacing the oldest beyond `MAX_PLANS`.
    pub(super) fn insert(&mut self, plan: Plan) {
        self.plans.insert(0, Arc::new(plan));
        self.plans.truncate(MAX_PLANS);
        self.restart();
    }

    /// Every plan is a candidate again (a chunk begins).
    fn restart(&mut self) {
        self.candidates = (1u32 << self.plans.len()) - 1;
        self.compared = 0;
    }
}
