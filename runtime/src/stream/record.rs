//! Recording: the nodes one API call adds to a stream's trace.

use std::hash::{Hash, Hasher};
use std::sync::{Arc, Weak};

use fusion::hash::FxHasher;
use fusion::{DType, Op, Scalar, TensorType};
use smallvec::SmallVec;

use fusion::policy::CutReason;

use super::{Stream, StreamState};
use crate::completion::Blame;
use crate::context::Runtime;
use crate::error::Result;
use crate::metrics::Counters;
use crate::origin::Origin;
use crate::value::Value;

pub(super) struct TraceNode {
    pub(super) op: Op,
    pub(super) inputs: SmallVec<[Arc<Value>; 3]>,
    /// Weak: a value nobody holds any more is not exported.
    pub(super) output: Weak<Value>,
    pub(super) ty: TensorType,
    pub(super) origin: Origin,
    /// A scalar (`Op::Full`) that is a parameter whatever its value, even 0,
    /// 1 or -1: an RNG key. Its value is no part of the op's signature either.
    pub(super) lift: bool,
    /// The API call that recorded it (a per-stream sequence number; the
    /// calls of one `OneOp` scope share the first one's): a chunk run op by
    /// op runs each call's nodes as one program, as strict mode does.
    pub(super) call: u32,
    /// What the window compares (`signature_of`); 0 outside fused mode.
    pub(super) signature: u64,
}

impl TraceNode {
    pub(super) fn blame(&self, chunk_ops: usize) -> Blame {
        Blame {
            op: self.op.name(),
            inputs: self.inputs.iter().map(|v| v.ty.clone()).collect(),
            origin: self.origin.clone(),
            chunk_ops,
        }
    }

    /// What the window compares to find the loop: the op's name, its
    /// result's and inputs' dtypes and ranks, not their sizes. A decode step
    /// whose attention mask grows by a token is the same step every token:
    /// its period is the step, found while the sizes change (the sizes'
    /// changes are the tiers' concern: `tiers::Shapes`). With sizes, no step
    /// repeated, and once a second `generate()` call began, the whole call
    /// was the period, cut into segments at offsets that fell anywhere in a
    /// step: new chunk keys at every token.
    fn signature_of(&self) -> u64 {
        let mut h = FxHasher::default();
        match &self.op {
            // A key changes every step; the loop still repeats. So does a
            // scalar that reaches the program as a parameter: an optimizer's
            // step size changes at every step, and its program does not.
            Op::Full { ty, .. } if self.lift => ty.hash(&mut h),
            Op::Full { value, ty } if !is_key_constant(*value) => {
                h.write_u8(1);
                ty.hash(&mut h);
            }
            op => {
                op.name().hash(&mut h);
                self.ty.dtype.hash(&mut h);
                self.ty.rank().hash(&mut h);
            }
        }
        for v in &self.inputs {
            v.ty.dtype.hash(&mut h);
            v.ty.rank().hash(&mut h);
        }
        h.finish()
    }
}

/// 0, 1 and -1 stay in the program (they enable simplifications); every other
/// scalar becomes a parameter (`launch.rs`).
pub(super) fn is_key_constant(s: Scalar) -> bool {
    let x = s.as_f64();
    x == 0.0 || x == 1.0 || x == -1.0 || matches!(s, Scalar::Bool(_))
}

/// Whether a scalar node (`Op::Full`) of `value` reaches its program as a
/// parameter: an RNG key (`lift`) always, any other scalar unless it is a
/// key constant.
pub(super) fn is_parameter(value: Scalar, lift: bool) -> bool {
    lift || !is_key_constant(value)
}

/// Records the nodes of one API call into the active trace of `st`.
pub(crate) struct Recorder<'a> {
    pub(super) st: &'a mut StreamState,
    pub(super) stream: &'a Stream,
    pub(super) rt: &'a Runtime,
    pub(super) origin: Origin,
    pub(super) call: u32,
    /// Nodes of the active trace the window has seen (those before this
    /// call's), in fused mode; `None` in the other modes.
    pub(super) fed: Option<usize>,
}

impl Recorder<'_> {
    /// Records `op` over `inputs`; checks them first (`Op::infer`).
    pub fn node(&mut self, op: Op, inputs: &[&Arc<Value>]) -> Result<Arc<Value>> {
        self.push(op, inputs, false)
    }

    fn push(&mut self, op: Op, inputs: &[&Arc<Value>], lift: bool) -> Result<Arc<Value>> {
        // A node a replay plan has at this place has its result type and
        // signature there (`replay.rs`): no inference, no hashing.
        let known = match self.fed {
            Some(_) => {
                let index = self.st.trace.nodes.len();
                self.st.trace.replay.step(index, &op, inputs, lift)
            }
            None => None,
        };
        let (ty, signature) = match known {
            Some((ty, signature)) => (ty, Some(signature)),
            None => {
                let types: SmallVec<[TensorType; 3]> =
                    inputs.iter().map(|v| v.ty.clone()).collect();
                (op.infer(&types)?, None)
            }
        };
        // A value pending in another thread's trace: that trace is cut first,
        // so that no trace reads another's pending values.
        for v in inputs {
            if v.trace != self.st.active && v.trace != u32::MAX && v.is_pending() {
                let index =
                    self.stream
                        .flush_trace(self.rt, self.st, v.trace, CutReason::CrossThread)?;
                self.st.trace.index.merge(index);
            }
        }
        // Where the window will see this node: after the ones it has seen
        // and this call's earlier ones.
        let computed_at = self.fed.map_or(0, |fed| {
            self.st.trace.window.seen() + (self.st.trace.nodes.len() - fed) as u64 + 1
        });
        let trace = &mut self.st.trace.nodes;
        let out = Value::pending(ty.clone(), trace.len(), self.st.active, computed_at);
        let mut node = TraceNode {
            op,
            inputs: inputs.iter().map(|v| Arc::clone(v)).collect(),
            output: Arc::downgrade(&out),
            ty,
            origin: self.origin.clone(),
            lift,
            call: self.call,
            signature: 0,
        };
        node.signature = match signature {
            Some(s) => s,
            None if self.fed.is_some() => node.signature_of(),
            None => 0,
        };
        trace.push(node);
        Counters::add(&self.rt.counters.ops_recorded, 1);
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
    ///
    /// Outside a compiled graph a number other than a key constant is the
    /// stream's ready value for it (`Stream::number`), not a node: a third
    /// of an elementwise loop's nodes were its numbers, each recorded, fed to
    /// the window, replayed and bound. (Every mode does the same, so a
    /// program strict mode compiled is the one fused mode looks up.) In a
    /// compiled graph it is a `Full` node, lifted at the cut: the graph's
    /// direct calls keep it as a constant of its program.
    pub fn scalar(&mut self, value: Scalar, dtype: DType) -> Result<Arc<Value>> {
        if !self.st.in_graph() && !is_key_constant(value) {
            return self.stream.number(self.rt, self.st, value, dtype);
        }
        self.node(
            Op::Full {
                value,
                ty: TensorType::scalar(dtype),
            },
            &[],
        )
    }
}
