//! Liveness: which nodes of a cut trace run, and which outputs leave the
//! device (those something outside the trace still holds).

use std::sync::Arc;

use smallvec::SmallVec;

use super::record::TraceNode;
use crate::error::Error;
use crate::value::Value;

/// One node of a chunk being launched: the trace's node, borrowed (a node is
/// a few hundred bytes; a chunk of thousands was copied once more here).
pub(super) struct Launch<'a> {
    pub(super) node: &'a TraceNode,
    /// The node's place in the trace cut.
    pub(super) index: u32,
    /// The value to bind the result to, when exported.
    pub(super) export: Option<Arc<Value>>,
    /// For each input: the launch (index in the chunk) that produces it, or
    /// `None` for a ready value (a parameter).
    pub(super) from: SmallVec<[Option<u32>; 3]>,
}

/// Decides which nodes run and which outputs leave the device. A node that
/// does not run lets go of its inputs here, so that they do not count as
/// readers when the chunk's dead inputs are donated.
pub(super) fn liveness(nodes: &mut [TraceNode]) -> Vec<Launch<'_>> {
    let n = nodes.len();
    // Uses of each node's output by later nodes of this trace, and for each
    // input the node of this trace that produces it. A pending input is
    // produced by the node at its slot: the whole trace is being launched,
    // and every value it reads is pending in it or ready.
    let mut uses = vec![0usize; n];
    let mut inputs_from: Vec<SmallVec<[Option<usize>; 3]>> = Vec::with_capacity(n);
    for node in nodes.iter() {
        let from: SmallVec<[Option<usize>; 3]> = node
            .inputs
            .iter()
            .map(|v| {
                let slot = v.slot as usize;
                (slot < n && std::ptr::eq(nodes[slot].output.as_ptr(), Arc::as_ptr(v)))
                    .then_some(slot)
            })
            .collect();
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
        } else {
            nodes[i].inputs.clear();
        }
    }
    let nodes: &[TraceNode] = nodes;
    let mut launches = Vec::with_capacity(next as usize);
    for (i, node) in nodes.iter().enumerate() {
        if live[i] {
            launches.push(Launch {
                node,
                index: i as u32,
                export: export[i].take(),
                from: inputs_from[i]
                    .iter()
                    .map(|f| f.map(|j| position[j]))
                    .collect(),
            });
        }
    }
    launches
}

/// Marks every exported value failed with `error`, and returns it.
pub(super) fn fail(launches: &[Launch], error: Error) -> Error {
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
