//! Index checks: on the host in debug mode, on the device in strict and fused
//! mode.
//!
//! XLA clamps an out-of-range gather or scatter index instead of failing. Debug
//! mode checks indices on the host before running each op; strict and fused
//! mode cannot (the indices are on the device, often not computed yet), so each
//! index op records a few more ops that compute whether any of its indices is
//! out of range, folded into one running int32 flag: 0 while every index was
//! in range, else the number of the first op that had one out of range. The
//! flag is read with the next host read or `sync()` (one 4-byte read), and a
//! set flag is an error naming that op and the line that recorded it, as CUDA
//! reports a device-side assert at the next synchronization.

use std::sync::Arc;

use fusion::{DType, Op, Scalar};

use super::{Launch, Recorder, Stream, StreamState};
use crate::completion::Blame;
use crate::context::Runtime;
use crate::error::Result;
use crate::host;
use crate::metrics::Counters;
use crate::value::Value;

/// Index ops checked between two host reads: beyond this, later ops share
/// the last number (the error then names the last one recorded).
pub(super) const MAX_CHECKS: usize = 1 << 16;

/// What a set flag blames.
#[derive(Clone)]
pub(super) struct IndexCheck {
    blame: Blame,
    dim: usize,
    size: i64,
}

/// The running flag of one trace and the ops it covers, and those of other
/// traces taken with it (a read that cut several).
#[derive(Default)]
pub(super) struct IndexChecks {
    flag: Option<Arc<Value>>,
    checks: Vec<IndexCheck>,
    others: Vec<IndexChecks>,
}

impl IndexChecks {
    pub(super) fn is_empty(&self) -> bool {
        self.flag.is_none() && self.others.is_empty()
    }

    /// The checks of a flag computed elsewhere (a compiled graph called
    /// directly: its program computes the flag its first call recorded).
    pub(super) fn of(flag: Arc<Value>, checks: Vec<IndexCheck>) -> IndexChecks {
        IndexChecks {
            flag: Some(flag),
            checks,
            others: Vec::new(),
        }
    }

    /// The checks a read can take without launching anything: all of them,
    /// unless the running flag is pending, whose ops are then left for a
    /// later read (the flags merged in are launched).
    pub(super) fn take_readable(&mut self) -> IndexChecks {
        if self.flag.as_ref().is_some_and(|f| f.is_pending()) {
            IndexChecks {
                others: std::mem::take(&mut self.others),
                ..IndexChecks::default()
            }
        } else {
            std::mem::take(self)
        }
    }

    /// Ends a running flag that was launched: kept with the others to be
    /// read, and the next check starts a running flag of its own. So a read
    /// that launches nothing (its value launched by a period's lead) reads
    /// every launched check, and none of them twice.
    fn seal_launched(&mut self) {
        if let Some(flag) = self.flag.take_if(|f| !f.is_pending()) {
            let checks = std::mem::take(&mut self.checks);
            self.others.push(IndexChecks::of(flag, checks));
        }
    }

    /// The running flag and its checks, when nothing else was merged in.
    pub(super) fn only(&self) -> Option<(&Arc<Value>, &[IndexCheck])> {
        match (&self.flag, self.others.is_empty()) {
            (Some(flag), true) => Some((flag, &self.checks)),
            _ => None,
        }
    }

    /// The flags merged in beyond the newest `keep`, oldest first, taken out
    /// to be read now: each direct call of a graph with index checks adds
    /// one, and a loop that never reads must not hold them all. Merged flags
    /// are launched (a trace is cut before its flag is merged elsewhere).
    pub(super) fn take_oldest(&mut self, keep: usize) -> Vec<IndexChecks> {
        let n = self.others.len().saturating_sub(keep);
        self.others.drain(..n).collect()
    }

    /// Adds `other`'s checks, to be read with these.
    pub(super) fn merge(&mut self, other: IndexChecks) {
        if other.is_empty() {
            return;
        }
        if self.is_empty() {
            *self = other;
        } else {
            self.others.push(other);
        }
    }
}

/// Index-check flags of direct calls kept for the next host read; past
/// this, the oldest is read at the next call (long done by then: a 4-byte
/// read, and its error, if any, at that call).
pub(super) const UNREAD_FLAGS: usize = 64;

impl Stream {
    /// Records the checks of the index ops in `trace[from..]`.
    pub(super) fn record_index_checks(
        &self,
        rt: &Runtime,
        st: &mut StreamState,
        from: usize,
    ) -> Result<()> {
        let end = st.trace.nodes.len();
        for i in from..end {
            let node = &st.trace.nodes[i];
            let Some(ix) = node.op.index_operand() else {
                continue;
            };
            let index = node.inputs[ix.index_input].clone();
            let bounded = &node.inputs[ix.bounded_by].ty;
            if index.ty.numel() == 0 || bounded.rank() == 0 {
                continue;
            }
            let dim = if ix.dim == usize::MAX {
                bounded.rank() - 1
            } else {
                ix.dim
            };
            let size = bounded.shape[dim];
            let ignore = ix.ignore;
            let origin = node.origin.clone();
            let check = IndexCheck {
                blame: node.blame(1),
                dim,
                size,
            };
            st.calls = st.calls.wrapping_add(1);
            let call = st.calls;
            st.trace.index.seal_launched();
            for old in st.trace.index.take_oldest(UNREAD_FLAGS) {
                // A loop that never reads: its oldest flags, long done.
                self.take_index_error(rt, old)?;
            }
            let number = st.trace.index.checks.len().min(MAX_CHECKS - 1) as i64 + 1;
            let previous = st.trace.index.flag.clone();
            let fed = st.compares_plans(rt).then_some(from);
            let mut rec = Recorder {
                st,
                stream: self,
                rt,
                origin,
                call,
                fed,
            };
            let flag = out_of_range(&mut rec, &index, size, ignore, number, previous.as_ref())?;
            st.trace.index.flag = Some(flag);
            if st.trace.index.checks.len() < MAX_CHECKS {
                st.trace.index.checks.push(check);
            }
        }
        Ok(())
    }

    /// Reads the flag of the index ops launched since the last read, if any
    /// (the trace holding it must have been flushed). A set flag is the error
    /// of the first op that had an index out of range.
    pub(super) fn take_index_error(&self, rt: &Runtime, checks: IndexChecks) -> Result<()> {
        for other in checks.others {
            self.take_index_error(rt, other)?;
        }
        let Some(flag) = checks.flag else {
            return Ok(());
        };
        let buffer = flag.wait()?;
        Counters::add(&rt.counters.transfers_to_host, 1);
        Counters::add(&rt.counters.bytes_to_host, 4);
        let first = host::read_i64(&buffer, &flag.ty)?
            .first()
            .copied()
            .unwrap_or(0);
        if first <= 0 {
            return Ok(());
        }
        let c = &checks.checks[(first as usize - 1).min(checks.checks.len() - 1)];
        Err(c.blame.error(
            fusion::Error::IndexOutOfRangeOnDevice {
                op: c.blame.op,
                dim: c.dim,
                size: c.size,
            }
            .into(),
        ))
    }
}

/// `number` if any element of `index` is outside `[0, size)` (other than
/// `ignore`), folded into `previous` (which keeps the first number set).
fn out_of_range(
    rec: &mut Recorder,
    index: &Arc<Value>,
    size: i64,
    ignore: Option<i64>,
    number: i64,
    previous: Option<&Arc<Value>>,
) -> Result<Arc<Value>> {
    // The op's number is a parameter, like an RNG key: numbering never
    // changes the program.
    let number = rec.key(number)?;
    // The first check after a read folds into a clean flag too: a step
    // records the same ops whether or not the host read before it, so a
    // loop that logs every N steps still repeats every step (`policy`).
    let clean = rec.scalar(Scalar::Int(0), DType::I32)?;
    let previous = previous.unwrap_or(&clean);
    rec.node(Op::IndexCheck { size, ignore }, &[index, &number, previous])
}

/// Debug mode checks tensor indices on the host before running: an
/// out-of-range index is an error at the op, as on CPU, instead of XLA's
/// silent clamping.
pub(super) fn check_indices_on_host(launches: &[Launch]) -> Result<()> {
    for l in launches {
        let Some(ix) = l.node.op.index_operand() else {
            continue;
        };
        let index = &l.node.inputs[ix.index_input];
        let bounded = &l.node.inputs[ix.bounded_by];
        if index.is_pending() {
            continue;
        }
        let buffer = index.wait()?;
        let dim = if ix.dim == usize::MAX {
            bounded.ty.rank().saturating_sub(1)
        } else {
            ix.dim
        };
        let size = bounded.ty.shape.get(dim).copied().unwrap_or(1);
        for i in host::read_i64(&buffer, &index.ty)? {
            if (i < 0 || i >= size) && ix.ignore != Some(i) {
                return Err(l.node.blame(1).error(
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
