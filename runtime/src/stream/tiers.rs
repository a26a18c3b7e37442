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
//!   as one program (a promotion). Results agree to rounding: a fused
//!   program may round differently from its ops run one by one (XLA
//!   contracts a multiply and an add of two ops into one fused
//!   multiply-add), so when a promotion happens can change a run's last
//!   bits. Deterministic (`EAGERTPU_DETERMINISTIC`,
//!   `torch.use_deterministic_algorithms`), it happens at the hot sighting,
//!   compiled on the recording thread, and a program on disk waits for it
//!   too: the bits depend on the op stream alone, with a cold or warm cache.
//! - A chunk whose ops are those of an earlier chunk, some with other sizes
//!   (a decode step slicing a `input_ids` that grows by a token), is split:
//!   the calls whose ops changed run one by one, as strict mode runs them, and
//!   each run of calls between them is a chunk of its own, tiered in turn
//!   but hot at first sight (the chunk it is part of has recurred), so the
//!   bulk of the step keeps one key and is compiled once, as soon as the
//!   step splits. The whole chunk, new at every token, is never compiled.

use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::num::NonZeroUsize;
use std::ops::Range;
use std::sync::{Arc, Weak};

use fusion::Graph;
use fusion::Op;
use fusion::hash::{FxBuild, FxHasher};
use fusion::policy::SizeDrift;
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
    /// A chunk's structure (`Shapes::structure`) -> the exact signature of
    /// each of its ops the last time it ran without a program.
    structures: LruCache<u64, Vec<u64>, FxBuild>,
    /// Launching the parts of a split chunk (`run_parts`).
    in_split: bool,
}

/// What a chunk is made of: `structure` hashes its ops without their sizes
/// (names, dtypes, ranks) and how they are wired; `exact` is each op's full
/// signature (its parameters and input types).
struct Shapes {
    structure: u64,
    exact: Vec<u64>,
}

impl Shapes {
    fn of(launches: &[Launch]) -> Shapes {
        let mut structure = FxHasher::default();
        let mut exact = Vec::with_capacity(launches.len());
        for l in launches {
            let node = &l.node;
            // The op without sizes: name, dtypes and ranks.
            node.op.name().hash(&mut structure);
            node.ty.dtype.hash(&mut structure);
            for v in &node.inputs {
                v.ty.dtype.hash(&mut structure);
                v.ty.shape.len().hash(&mut structure);
            }
            l.from.hash(&mut structure);
            exact.push(exact_signature(node));
        }
        Shapes {
            structure: structure.finish(),
            exact,
        }
    }
}

impl StreamState {
    /// Notes whether a chunk of the active trace (not a part of a split one)
    /// was split with most of its ops resized. The second such chunk in a
    /// row makes the trace drift (`fusion::policy::SizeDrift`): the chunks
    /// are mostly new each time, and so will the next be. (A decode step
    /// whose mask grows changes a few ops and keeps one program for its
    /// bulk; a loop whose batch size changed once runs its new chunk split
    /// once, then compiles it.)
    fn chunk_resized(&mut self, resized: bool) {
        if self.tiers.in_split {
            return;
        }
        let trace = &mut self.trace;
        trace.resized_in_a_row = if resized {
            trace.resized_in_a_row + 1
        } else {
            0
        };
        if trace.resized_in_a_row >= 2 {
            trace.resized_in_a_row = 0;
            trace.drift = Some(SizeDrift::new());
        }
    }
}

/// A node's exact signature: its op with its parameters, and its inputs'
/// types (sizes included).
pub(super) fn exact_signature(node: &TraceNode) -> u64 {
    let mut h = FxHasher::default();
    match &node.op {
        // A scalar's value is a parameter (a learning rate, a random key),
        // not a change of size.
        Op::Full { ty, .. } => ty.hash(&mut h),
        op => op.hash(&mut h),
    }
    for v in &node.inputs {
        v.ty.hash(&mut h);
    }
    h.finish()
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
            structures: LruCache::with_hasher(
                NonZeroUsize::new(SIGHTINGS).unwrap_or(NonZeroUsize::MIN),
                FxBuild::default(),
            ),
            in_split: false,
        }
    }
}

/// The ranges of a chunk's launches recorded by one API call (or one
/// `OneOp` scope) each: what a chunk runs as when it runs op by op (the
/// programs strict mode runs).
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

/// The parts a chunk runs as when some of its ops changed sizes since the
/// last time the same structure ran (`changed` per launch): each call with a
/// changed op alone, each run of unchanged calls between them as one part.
fn split_at_changes(launches: &[Launch], changed: &[bool]) -> Vec<Range<usize>> {
    let mut parts: Vec<Range<usize>> = vec![];
    let mut stable: Option<Range<usize>> = None;
    for call in calls(launches) {
        if changed[call.clone()].iter().any(|c| *c) {
            parts.extend(stable.take());
            parts.push(call);
        } else {
            stable = Some(match stable {
                Some(r) => r.start..call.end,
                None => call,
            });
        }
    }
    parts.extend(stable);
    parts
}

/// Whether a chunk's launches come from more than one API call.
pub(super) fn several_calls(launches: &[Launch]) -> bool {
    launches
        .first()
        .is_some_and(|f| launches.iter().any(|l| l.node.call != f.node.call))
}

impl Stream {
    /// The fused program for `graph` if it is ready. Otherwise `Err(parts)`:
    /// run the chunk as those parts. Its API calls one by one, while its
    /// sightings are counted (the compile queued once the chunk is hot); or,
    /// when some of its ops changed sizes since its structure last ran, the
    /// changed calls one by one and the unchanged runs between them as chunks
    /// of their own, and the whole chunk is never compiled.
    pub(super) fn fused_program(
        &self,
        rt: &Runtime,
        st: &mut StreamState,
        graph: &Graph,
        launches: &[Launch],
    ) -> Result<Arc<Program>, Vec<Range<usize>>> {
        let key = graph.key_hash();
        if let Some(p) = rt.cache.loaded(graph, &rt.counters) {
            if st.tiers.compiling.remove(&key) {
                Counters::add(&rt.counters.promotions, 1);
            }
            st.chunk_resized(false);
            return Ok(p);
        }
        let Shapes { structure, exact } = Shapes::of(launches);
        let before = st.tiers.structures.put(structure, exact.clone());
        // The first chunk after a drift compares with no chunk of before it.
        let refit = std::mem::take(&mut st.trace.refit);
        if let Some(before) = before.filter(|_| !refit)
            && before.len() == exact.len()
            && before != exact
        {
            let changed: Vec<bool> = before.iter().zip(&exact).map(|(b, n)| b != n).collect();
            let parts = split_at_changes(launches, &changed);
            if parts.len() > 1 {
                Counters::add(&rt.counters.chunks_split, 1);
                // Most of its ops changed sizes (constants aside)?
                let (ops, changed_ops) = launches
                    .iter()
                    .zip(&changed)
                    .filter(|(l, _)| !matches!(l.node.op, Op::Full { .. }))
                    .fold((0, 0), |(n, k), (_, c)| (n + 1, k + usize::from(*c)));
                st.chunk_resized(2 * changed_ops > ops);
                return Err(parts);
            }
        }
        st.chunk_resized(false);
        // A split chunk is no key of its own: its parts are.
        if st.tiers.keys.insert(key) {
            Counters::add(&rt.counters.chunk_keys, 1);
        }
        self.sighted(rt, st, graph, key).ok_or_else(|| {
            Counters::add(&rt.counters.chunks_op_by_op, 1);
            calls(launches)
        })
    }

    /// Counts a sighting of a chunk without a program: its program if the
    /// disk has it (at first sight) or once compiled here
    /// (`EAGERTPU_COMPILE_THREADS=0`); `None` to run it op by op, its compile
    /// queued once it is hot.
    fn sighted(
        &self,
        rt: &Runtime,
        st: &mut StreamState,
        graph: &Graph,
        key: u64,
    ) -> Option<Arc<Program>> {
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
        let deterministic = rt.deterministic();
        if seen == 1
            && !deterministic
            && rt.cache.has_disk()
            && let Some(p) = rt.cache.load_from_disk(graph, &rt.counters)
        {
            return Some(p);
        }
        // A part of a split chunk is hot at first sight: the chunk it is
        // part of has recurred already (its structure ran before), and will
        // again (a decode step whose calls split the same way every token
        // from its second or third token on: compiled then, not one token
        // later).
        let threshold = if st.tiers.in_split {
            1
        } else {
            rt.hot_threshold
        };
        if seen < threshold || (st.tiers.compiling.contains(&key) && !deterministic) {
            if st.tiers.compiling.contains(&key) {
                Counters::add(&rt.counters.chunks_op_by_op_while_compiling, 1);
            }
            return None;
        }
        if deterministic || !rt.compiler.enabled() {
            // Compile here, now (from the disk if it has the program; or
            // waiting for the pool if it compiles it already): deterministic,
            // or EAGERTPU_COMPILE_THREADS=0.
            st.tiers.compiling.remove(&key);
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

    /// Runs a chunk as `parts` (ranges of its launches, in order), each
    /// launched as a chunk of its own: an API call's nodes as the program
    /// strict mode runs, several calls tiered in turn. A result one part
    /// passes to a later one is never donated to it: strict mode launches an
    /// op while its caller still holds its inputs, so its program donates
    /// none, and an op run here must run that same program (one compile
    /// serves both modes; a donating variant is another program, and on the
    /// XLA CPU plugin some compile several times slower). Returns the first
    /// failure; each result is ready or failed on its own.
    pub(super) fn run_parts(
        &self,
        rt: &Runtime,
        st: &mut StreamState,
        launches: &[Launch],
        parts: Vec<Range<usize>>,
    ) -> Option<Error> {
        let n = launches.len();
        let mut part_of = vec![0u32; n];
        for (p, range) in parts.iter().enumerate() {
            for slot in &mut part_of[range.clone()] {
                *slot = p as u32;
            }
        }
        // Readers of each node's result in later parts.
        let mut readers = vec![0u32; n];
        for (i, l) in launches.iter().enumerate() {
            for k in l.from.iter().flatten() {
                if part_of[*k as usize] != part_of[i] {
                    readers[*k as usize] += 1;
                }
            }
        }
        let mut results: Vec<Option<Arc<Value>>> = vec![None; n];
        // Results whose last reader is in the part being launched: held until
        // it is launched, so that it does not donate them.
        let mut released = Vec::new();
        let mut first = None;
        for range in parts {
            let mut unit_nodes: Vec<TraceNode> = Vec::with_capacity(range.len());
            let mut unit_exits = Vec::with_capacity(range.len());
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
                            if readers[k] == 0 {
                                released.push(k);
                            }
                            let Some(result) = results[k].clone() else {
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
                    None if readers[k] > 0 => Some(Value::pending(
                        l.node.ty.clone(),
                        u32::MAX as usize,
                        u32::MAX,
                        0,
                    )),
                    None => None,
                };
                let mut node = detached(l.node, inputs);
                if let Some(out) = &export {
                    node.output = Arc::downgrade(out);
                    if readers[k] > 0 {
                        results[k] = Some(out.clone());
                    }
                }
                unit_nodes.push(node);
                unit_exits.push((export, from));
            }
            let unit: Vec<Launch> = unit_nodes
                .iter()
                .zip(unit_exits)
                .enumerate()
                .map(|(i, (node, (export, from)))| Launch {
                    node,
                    index: i as u32,
                    export,
                    from,
                })
                .collect();
            let outer = std::mem::replace(&mut st.tiers.in_split, true);
            let launched = self.launch(rt, st, &unit, false, false, None);
            st.tiers.in_split = outer;
            let failure = match launched {
                Ok(launched) => launched.failure,
                Err(e) => Some(fail(&unit, e)),
            };
            for k in released.drain(..) {
                results[k] = None;
            }
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
        signature: node.signature,
    }
}
