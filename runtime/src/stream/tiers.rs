//! Tiered execution of fused chunks, as a JIT tiers code: recording never
//! waits for the compile of a fused program.
//!
//! - A chunk whose program is in memory runs as one program.
//! - Seen for the first time, a chunk whose program is on disk runs as it at
//!   once; otherwise it runs as its ops one by one (each API call's nodes as
//!   one program: the programs strict mode runs), and is compiled only once it has been seen
//!   `EAGERTPU_HOT_THRESHOLD` times (2): a chunk that never repeats never
//!   costs a compile of its own.
//! - A hot chunk is queued on the background compile pool and keeps running
//!   op by op until its program is in the cache; the next occurrence then runs
//!   as one program (a promotion). Results are the same either way: the
//!   single-op programs compute each op as the fused program does.

use std::collections::HashSet;
use std::num::NonZeroUsize;
use std::sync::{Arc, Weak};

use fusion::Graph;
use fusion::hash::FxBuild;
use lru::LruCache;
use smallvec::SmallVec;

use super::liveness::{Launch, fail};
use super::record::TraceNode;
use super::{Stream, StreamState};
use crate::cache::Program;
use crate::context::Runtime;
use crate::error::Error;
use crate::metrics::Counters;
use crate::value::Value;

/// Chunk keys whose sightings are remembered.
const SIGHTINGS: usize = 1 << 14;

/// What a stream remembers of the fused chunks it has run.
pub(super) struct Tiers {
    /// Graph hash -> times seen without a program.
    sightings: LruCache<u64, u32, FxBuild>,
    /// Chunks queued or compiling in the background.
    compiling: HashSet<u64, FxBuild>,
    /// Every chunk key seen (for `chunk_keys`).
    keys: HashSet<u64, FxBuild>,
}

impl Default for Tiers {
    fn default() -> Self {
        Tiers {
            sightings: LruCache::with_hasher(
                NonZeroUsize::new(SIGHTINGS).unwrap_or(NonZeroUsize::MIN),
                FxBuild::default(),
            ),
            compiling: HashSet::default(),
            keys: HashSet::default(),
        }
    }
}

/// The ranges of a chunk's launches recorded by one API call each: what a
/// chunk runs as when it runs op by op (the programs strict mode runs).
pub(super) fn calls(launches: &[Launch]) -> Vec<std::ops::Range<usize>> {
    let mut out: Vec<std::ops::Range<usize>> = vec![];
    for (i, l) in launches.iter().enumerate() {
        match out.last_mut() {
            Some(r) if launches[r.start].node.call == l.node.call => r.end = i + 1,
            _ => out.push(i..i + 1),
        }
    }
    out
}

/// Whether a chunk's launches come from more than one API call.
pub(super) fn several_calls(launches: &[Launch]) -> bool {
    launches
        .first()
        .is_some_and(|f| launches.iter().any(|l| l.node.call != f.node.call))
}

impl Stream {
    /// The fused program for `graph` if it is ready; otherwise records the
    /// sighting (queueing the compile once the chunk is hot) and returns
    /// `None`: run the chunk op by op.
    pub(super) fn fused_program(
        &self,
        rt: &Runtime,
        st: &mut StreamState,
        graph: &Graph,
    ) -> Option<Arc<Program>> {
        let key = graph.key_hash();
        if st.tiers.keys.insert(key) {
            Counters::add(&rt.counters.chunk_keys, 1);
        }
        if let Some(p) = rt.cache.loaded(graph, &rt.counters) {
            if st.tiers.compiling.remove(&key) {
                Counters::add(&rt.counters.promotions, 1);
            }
            return Some(p);
        }
        if rt.compiler.failed(key) {
            return None;
        }
        let seen = match st.tiers.sightings.get_mut(&key) {
            Some(n) => {
                *n = n.saturating_add(1);
                *n
            }
            None => {
                st.tiers.sightings.put(key, 1);
                1
            }
        };
        if seen == 1
            && rt.cache.has_disk()
            && let Some(p) = rt.cache.load_from_disk(graph, &rt.counters)
        {
            return Some(p);
        }
        if seen < rt.hot_threshold || st.tiers.compiling.contains(&key) {
            if st.tiers.compiling.contains(&key) {
                Counters::add(&rt.counters.chunks_op_by_op_while_compiling, 1);
            }
            return None;
        }
        if !rt.compiler.enabled() {
            // EAGERTPU_COMPILE_THREADS=0: compile here, now.
            return match rt.cache.get(graph, &rt.counters) {
                Ok(p) => Some(p),
                Err(_) => {
                    rt.compiler.mark_failed(key);
                    None
                }
            };
        }
        if rt.compiler.submit(graph.clone()) {
            st.tiers.compiling.insert(key);
            Counters::add(&rt.counters.chunks_op_by_op_while_compiling, 1);
        }
        None
    }

    /// Runs a chunk as its ops one by one: each API call's nodes as one
    /// program, the programs strict mode runs, without waiting. A result only
    /// later calls read is donated to its last reader, as in strict mode.
    /// Returns the first failure; each result is ready or failed on its own.
    pub(super) fn run_op_by_op(
        &self,
        rt: &Runtime,
        st: &mut StreamState,
        launches: &[Launch],
    ) -> Option<Error> {
        Counters::add(&rt.counters.chunks_op_by_op, 1);
        let n = launches.len();
        // Readers of each node's result in later calls.
        let mut readers = vec![0u32; n];
        for l in launches {
            for k in l.from.iter().flatten() {
                if launches[*k as usize].node.call != l.node.call {
                    readers[*k as usize] += 1;
                }
            }
        }
        let mut results: Vec<Option<Arc<Value>>> = vec![None; n];
        let mut first = None;
        for range in calls(launches) {
            let mut unit: Vec<Launch> = Vec::with_capacity(range.len());
            for (m, l) in launches[range.clone()].iter().enumerate() {
                let mut inputs = SmallVec::new();
                let mut from = SmallVec::new();
                for (input, source) in l.node.inputs.iter().zip(&l.from) {
                    match source.map(|k| k as usize) {
                        Some(k) if range.contains(&k) => {
                            inputs.push(input.clone());
                            from.push(Some((k - range.start) as u32));
                        }
                        Some(k) => {
                            readers[k] -= 1;
                            // The last reader takes the only reference, so
                            // the result can be donated to it.
                            let result = if readers[k] == 0 {
                                results[k].take()
                            } else {
                                results[k].clone()
                            };
                            let Some(result) = result else {
                                let e = Error::Internal("an op ran before its input".into());
                                return Some(first.unwrap_or(e));
                            };
                            inputs.push(result);
                            from.push(None);
                        }
                        None => {
                            inputs.push(input.clone());
                            from.push(None);
                        }
                    }
                }
                let k = range.start + m;
                let export = match &l.export {
                    Some(v) => Some(v.clone()),
                    None if readers[k] > 0 => {
                        Some(Value::pending(l.node.ty.clone(), u32::MAX as usize))
                    }
                    None => None,
                };
                let mut node = detached(&l.node, inputs);
                if let Some(out) = &export {
                    node.output = Arc::downgrade(out);
                    if readers[k] > 0 {
                        results[k] = Some(out.clone());
                    }
                }
                unit.push(Launch { node, export, from });
            }
            let failure = match self.launch(rt, st, &unit, false) {
                Ok(failure) => failure,
                Err(e) => Some(fail(&unit, e)),
            };
            if let Some(e) = failure {
                first.get_or_insert(e);
            }
        }
        first
    }
}

/// A copy of `node` reading `inputs`, bound to no value.
fn detached(node: &TraceNode, inputs: SmallVec<[Arc<Value>; 3]>) -> TraceNode {
    TraceNode {
        op: node.op.clone(),
        inputs,
        output: Weak::new(),
        ty: node.ty.clone(),
        origin: node.origin.clone(),
        lift: node.lift,
        call: node.call,
    }
}
