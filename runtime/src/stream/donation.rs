//! Donation: which of a chunk's inputs give their buffers to its outputs.
//! That an input is dead (nothing outside the chunk holds its value) is a
//! property of the program, decided when the graph is built (`donate`);
//! whether its buffer may be donated at this launch (no unfinished chunk or
//! host read still reads it) is decided at the launch (`kept_by_readers`).

use std::collections::HashMap;
use std::sync::Arc;

use fusion::graph::is_set;
use fusion::hash::FxBuild;
use fusion::{Graph, TensorType};
use smallvec::SmallVec;

use super::Stream;
use super::launch::Param;
use crate::completion::{Completion, Retired};
use crate::context::Runtime;
use crate::metrics::Counters;
use crate::pjrt::Buffer;

impl Stream {
    /// Aliases each parameter nothing outside the chunk holds to an output of
    /// its type, so an update like `w = w - lr * g` reuses `w`'s memory.
    /// Whether a value is dead is a property of the program, so the aliases
    /// (part of the program's key) are the same at every step; whether its
    /// buffer can be donated now is decided at launch (`kept_by_readers`).
    /// `dead[i]`: parameter `i` is dead (whether or not an output was free).
    ///
    /// A dead parameter goes first to the output that updates it
    /// (`updated[k]`: output `k` is computed from that parameter through the
    /// first input of its own type of each op, as `w.mul_(c)` then
    /// `w.addcdiv_(m, d)` are). Given any other output of its type, XLA
    /// must keep the old value alive while the update is computed, and
    /// copies both in and out: an AdamW step's parameters and moments
    /// were copied twice over.
    ///
    /// Either way only to an output that every reader of the parameter
    /// feeds (`Graph::outputs_after_reads`). XLA orders a parameter's reads
    /// before the write of the output it is donated to by data dependence
    /// alone, and copies the parameter otherwise: a training chunk's weight
    /// read by the backward's `grad @ w` and updated by the optimizer, or
    /// the last step's activation given to this step's, was copied every
    /// step (the bench MLP: its 512x512 weight and a 64x512 activation). An
    /// output in fresh memory costs no copy.
    pub(super) fn donate(
        graph: &mut Graph,
        params: &[Param],
        uses: &HashMap<usize, usize, FxBuild>,
        updated: &[Option<u32>],
        dead: &mut [bool],
    ) {
        for (i, p) in params.iter().enumerate() {
            let Some(v) = &p.value else { continue };
            let internal = uses.get(&(Arc::as_ptr(v) as usize)).copied().unwrap_or(0);
            // References: this parameter's own, plus the chunk's readers.
            dead[i] = Arc::strong_count(v) == internal + 1;
        }
        if !dead.contains(&true) {
            return;
        }
        let after_reads = graph.outputs_after_reads();
        let types: Vec<TensorType> = graph.output_types().cloned().collect();
        let mut taken = vec![false; types.len()];
        let mut aliased = vec![false; params.len()];
        for (k, p) in updated.iter().enumerate() {
            let Some(i) = p.map(|p| p as usize) else {
                continue;
            };
            let own_type = params[i].value.as_ref().is_some_and(|v| v.ty == types[k]);
            if dead[i] && !aliased[i] && own_type && is_set(&after_reads[i], k) {
                taken[k] = true;
                aliased[i] = true;
                graph.alias(i, k);
            }
        }
        for (i, p) in params.iter().enumerate() {
            let Some(v) = &p.value else { continue };
            if !dead[i] || aliased[i] {
                continue;
            }
            if let Some(k) = (0..types.len())
                .find(|&k| !taken[k] && types[k] == v.ty && is_set(&after_reads[i], k))
            {
                taken[k] = true;
                graph.alias(i, k);
            }
        }
    }

    /// Whether parameter `i` is donated and its buffer is held by more than
    /// its value, this launch and the `upstream` chunks it runs after (by a
    /// chunk it does not read from, or a host read, still reading it).
    fn blocked(&self, graph: &Graph, i: usize, p: &Param, upstream: &[Arc<Completion>]) -> bool {
        graph.aliased_output(i).is_some()
            && read_elsewhere(&p.buffer, upstream, &self.launcher.retired)
    }

    /// The aliased parameters whose buffer must not be donated at this launch.
    ///
    /// The invariant (see `value.rs`): a buffer is donated only when no one
    /// else holds it: no tensor or view holds its value (`donate`), and no
    /// unfinished chunk or host read holds the buffer, its only holders being
    /// the value, this launch and the `upstream` chunks the device runs
    /// before it. A dead input still read elsewhere is kept: its update gets
    /// fresh memory (`donations_blocked_by_readers`).
    pub(super) fn kept_by_readers(
        &self,
        rt: &Runtime,
        graph: &Graph,
        params: &[Param],
        upstream: &[Arc<Completion>],
    ) -> SmallVec<[i64; 4]> {
        let mut kept = SmallVec::new();
        if graph.num_aliases() == 0 {
            return kept;
        }
        for (i, p) in params.iter().enumerate() {
            if self.blocked(graph, i, p, upstream) {
                Counters::add(&rt.counters.donations_blocked_by_readers, 1);
                kept.push(i as i64);
            }
        }
        kept
    }
}

/// Whether an input's `buffer` is held by more than its value, the launch
/// reading it and the `upstream` chunks that launch runs after: by a chunk
/// it does not read from, or a host read, still reading it. Such a buffer is
/// not donated (the buffer invariant, `value.rs`); a fused chunk's launch
/// and a graph's direct call both ask.
pub(super) fn read_elsewhere(
    buffer: &Arc<Buffer>,
    upstream: &[Arc<Completion>],
    retired: &Retired,
) -> bool {
    // Counted before the total: a reader letting go in between can only
    // make the buffer look free, which it then is. The references of done
    // chunks left to the launcher are no readers.
    let ordered: usize = upstream.iter().map(|c| c.holds(buffer)).sum();
    Arc::strong_count(buffer) > 2 + ordered + retired.holds(buffer)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A buffer held by its value, the launch and a done chunk's reads left
    /// to the launcher is read nowhere else: it may be donated. Held once
    /// more, it is.
    #[test]
    fn references_left_to_the_launcher_do_not_block_a_donation() {
        let buffer = crate::completion::tests::buffer();
        let launch_hold = buffer.clone();
        let retired = Retired::default();
        retired.collector_wakes();
        retired.retire(vec![buffer.clone()]);
        assert!(!read_elsewhere(&buffer, &[], &retired));
        let reader = buffer.clone();
        assert!(read_elsewhere(&buffer, &[], &retired));
        drop((reader, launch_hold));
        retired.collect();
    }
}
