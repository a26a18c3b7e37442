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

use super::{Stream, StreamState, lock, replay, this_thread_trace};
use crate::config::Mode;
use crate::context::Runtime;
use crate::error::{Error, Result};
use crate::metrics::Counters;
use fusion::policy::CutReason;

/// Graphs whose replay plans a stream keeps; past this, all are dropped (the
/// next call of each builds its chunk in full once, and finds its program in
/// the cache).
const MAX_GRAPHS: usize = 1024;

/// An open graph call on a trace: which graph, and the trace's own plans,
/// put back when it closes.
pub(super) struct GraphScope {
    id: u64,
    outer: replay::Replay,
}

impl Stream {
    /// Opens a call of compiled graph `id` on this thread's trace; false
    /// (nothing opened) in debug mode.
    pub fn graph_begin(&self, rt: &Runtime, id: u64) -> Result<bool> {
        if rt.effective_mode() == Mode::Debug {
            return Ok(false);
        }
        let mut st = lock(&self.state);
        st.activate(this_thread_trace());
        if let Some(open) = &st.trace.graph {
            return Err(Error::Internal(format!(
                "compiled graph {id} called while graph {} is still open on this thread",
                open.id
            )));
        }
        self.flush(rt, &mut st, CutReason::Graph, false)?;
        let plans = st.graph_plans.remove(&id).unwrap_or_default();
        let outer = std::mem::replace(&mut st.trace.replay, plans);
        st.trace.graph = Some(GraphScope { id, outer });
        Counters::add(&rt.counters.compiled_graph_calls, 1);
        Ok(true)
    }

    /// Closes this thread's open graph call: its ops run as one program.
    /// Nothing open is no error (debug mode opened none).
    pub fn graph_end(&self, rt: &Runtime) -> Result<()> {
        let mut st = lock(&self.state);
        st.activate(this_thread_trace());
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
        if st.graph_plans.len() >= MAX_GRAPHS {
            st.graph_plans.clear();
        }
        st.graph_plans.insert(scope.id, plans);
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
