//! `EAGERTPU_CHECK_HAZARDS=1`: checks every launch for the two ways an eager
//! runtime computes with the wrong memory, and fails at the op that would.
//!
//! - **Donation** (before the launch): no parameter the program donates is
//!   still held by a launched chunk that is not known to be done. `donate`
//!   already declines such parameters; this checks the rule from the other
//!   side, the outstanding chunks' own lists of the buffers they read.
//! - **Address independence** (after it): the program is run again, as a
//!   second executable compiled from the same text, on copies of its inputs
//!   made while the originals are alive (so at other addresses), and every
//!   output must be bitwise equal. A result that depends on where its inputs
//!   live means the plugin reused something it cached for an earlier buffer
//!   at the same address (XNNPACK's packed dot operands on the XLA CPU
//!   plugin did, issue 8). The second executable keeps its last inputs until
//!   its next check, so no check reuses an address its executable has seen
//!   last; the checked executable sees exactly the addresses it would see
//!   without the check.
//!
//! A checked launch waits for its chunk (failures still surface where the
//! mode puts them) and copies every input and output to the host: a debugging
//! mode, several times slower, and it holds each program's last check inputs.
//! The checker's own work is not counted in the metrics (except
//! `hazard_checks`), so counts are the same with it on.

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use fusion::hash::FxBuild;
use fusion::{Graph, TensorType};
use lru::LruCache;

use super::Param;
use crate::cache::CompileCache;
use crate::completion::Completion;
use crate::error::{Error, Result};
use crate::host;
use crate::lock;
use crate::pjrt::{Buffer, Device, Executable};

/// Second executables kept (least recently checked ones are dropped).
const TWINS: usize = 1024;

/// A second executable of a checked program and its last check's buffers.
struct Twin {
    exe: Executable,
    /// The last check's inputs and outputs (a donated input's memory is an
    /// output's), alive until the next check has made its copies.
    last_buffers: Vec<Buffer>,
}

pub(crate) struct HazardChecker {
    twins: Mutex<LruCache<Graph, Twin, FxBuild>>,
}

impl Default for HazardChecker {
    fn default() -> Self {
        HazardChecker {
            twins: Mutex::new(LruCache::with_hasher(
                NonZeroUsize::new(TWINS).unwrap_or(NonZeroUsize::MIN),
                FxBuild::default(),
            )),
        }
    }
}

/// The host bytes of every input of a launch, taken before it runs (a
/// donated input is gone after).
pub(super) struct Snapshot {
    inputs: Vec<(TensorType, Vec<u8>)>,
}

impl HazardChecker {
    /// (buffers, executables) the checker keeps alive.
    pub fn held(&self) -> (usize, usize) {
        let twins = lock(&self.twins);
        let buffers = twins.iter().map(|(_, t)| t.last_buffers.len()).sum();
        (buffers, twins.len())
    }

    /// Before a launch: fails if a parameter `graph` donates may still be
    /// read by an outstanding chunk that the launch does not run after
    /// (`upstream`: the chunks it reads from, directly or not).
    pub(super) fn check_donations(
        graph: &Graph,
        params: &[Param],
        kept: &[i64],
        outstanding: &[Arc<Completion>],
        upstream: &[Arc<Completion>],
    ) -> Result<()> {
        for (i, p) in params.iter().enumerate() {
            if graph.aliased_output(i).is_none() || kept.contains(&(i as i64)) {
                continue;
            }
            let unordered = |c: &&Arc<Completion>| !upstream.iter().any(|u| Arc::ptr_eq(u, c));
            if let Some(reader) = outstanding
                .iter()
                .filter(unordered)
                .find(|c| c.may_read(&p.buffer))
            {
                let b = reader.blame();
                return Err(Error::Hazard(format!(
                    "it donates input {i} ({}) while an execution that reads it has not \
                     completed: {} recorded at {}",
                    graph
                        .param_types()
                        .nth(i)
                        .map(|t| t.to_string())
                        .unwrap_or_default(),
                    b.op,
                    b.origin
                )));
            }
        }
        Ok(())
    }

    /// Copies every input of a launch to the host (waiting for each).
    pub(super) fn snapshot(graph: &Graph, params: &[Param]) -> Result<Snapshot> {
        let inputs = graph
            .param_types()
            .zip(params)
            .map(|(ty, p)| Ok((ty.clone(), host::read_bytes(&p.buffer, ty)?)))
            .collect::<Result<_>>()?;
        Ok(Snapshot { inputs })
    }

    /// After a launch that completed: runs `graph` again as a second
    /// executable on fresh copies of `snapshot` and compares with `outputs`.
    pub(super) fn check_addresses(
        &self,
        cache: &CompileCache,
        device: &Device,
        graph: &Graph,
        snapshot: &Snapshot,
        outputs: &[Arc<Buffer>],
    ) -> Result<()> {
        let copies = snapshot
            .inputs
            .iter()
            .map(|(ty, bytes)| Buffer::from_host(device, ty.dtype, &ty.shape, bytes))
            .collect::<Result<Vec<Buffer>>>()?;
        let mut twins = lock(&self.twins);
        if !twins.contains(graph) {
            let exe = cache.compile_uncounted(graph)?;
            twins.put(
                graph.clone(),
                Twin {
                    exe,
                    last_buffers: vec![],
                },
            );
        }
        let twin = twins
            .get_mut(graph)
            .ok_or_else(|| Error::Internal("a checked program's twin vanished".into()))?;
        let inputs: Vec<&Buffer> = copies.iter().collect();
        let (rerun, done) = twin.exe.execute(&inputs, device)?;
        if let Some(done) = done {
            done.wait()?;
        }
        let verdict = compare(graph, outputs, &rerun);
        twin.last_buffers = copies.into_iter().chain(rerun).collect();
        verdict
    }
}

/// Fails if the rerun's outputs differ from the first run's.
fn compare(graph: &Graph, outputs: &[Arc<Buffer>], rerun: &[Buffer]) -> Result<()> {
    for (k, ((ty, first), again)) in graph.output_types().zip(outputs).zip(rerun).enumerate() {
        let (a, b) = (host::read_bytes(first, ty)?, host::read_bytes(again, ty)?);
        if a != b {
            let size = ty.dtype.size_in_bytes().max(1);
            let differing = a
                .chunks(size)
                .zip(b.chunks(size))
                .filter(|(x, y)| x != y)
                .count();
            return Err(Error::Hazard(format!(
                "its result depends on where its inputs are in device memory: run again \
                     on copies of its inputs at other addresses, output {k} ({ty}) differs in \
                     {differing} of {} elements. The plugin computed with data it cached for an \
                     earlier buffer at the same address (a stale cache keyed by address); \
                     see EAGERTPU_XLA_OPTIONS in the README",
                ty.numel()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::panic::Location;

    use fusion::{BinaryOp, DType, Op};

    use super::*;
    use crate::completion::Blame;
    use crate::origin::Origin;

    fn f32s(values: &[f32]) -> Arc<Buffer> {
        let rt = crate::context::get().expect("the XLA CPU plugin (make setup)");
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let dims = [values.len() as i64];
        Arc::new(Buffer::from_host(&rt.streams[0].device, DType::F32, &dims, &bytes).unwrap())
    }

    /// `a + b` over two `float32[4]` parameters; `a` donated to the result.
    fn add_graph() -> Graph {
        let mut g = Graph::new();
        let ty = TensorType::new(DType::F32, &[4]);
        let a = g.param(ty.clone());
        let b = g.param(ty);
        let c = g.push(Op::Binary(BinaryOp::Add), &[a, b]).unwrap();
        g.output(c);
        g.alias(0, 0);
        g
    }

    fn params(buffers: &[&Arc<Buffer>]) -> Vec<Param> {
        buffers
            .iter()
            .map(|b| Param {
                value: None,
                buffer: Arc::clone(b),
                done: None,
                lift: false,
            })
            .collect()
    }

    fn reader() -> Blame {
        Blame {
            op: "matmul",
            inputs: vec![],
            origin: Origin::Rust(Location::caller()),
            chunk_ops: 1,
        }
    }

    #[test]
    fn a_donation_while_a_launched_chunk_reads_the_buffer_is_a_hazard() {
        let (a, b) = (f32s(&[1.0; 4]), f32s(&[2.0; 4]));
        let graph = add_graph();
        let running = Completion::unfinished(reader(), vec![a.clone()]);
        let err = HazardChecker::check_donations(
            &graph,
            &params(&[&a, &b]),
            &[],
            std::slice::from_ref(&running),
            &[],
        )
        .unwrap_err()
        .to_string();
        for word in [
            "donates input 0 (float32[4])",
            "matmul recorded at",
            "hazards.rs",
        ] {
            assert!(err.contains(word), "expected {word:?} in {err}");
        }
        // A reader the launch runs after (it reads that chunk's results) is
        // no hazard: the device starts the launch once the reader is done.
        let outstanding = std::slice::from_ref(&running);
        HazardChecker::check_donations(&graph, &params(&[&a, &b]), &[], outstanding, outstanding)
            .unwrap();
        // A reader of the other (not donated) input is no hazard; a finished
        // reader is none either.
        let of_b = Completion::unfinished(reader(), vec![b.clone()]);
        HazardChecker::check_donations(&graph, &params(&[&a, &b]), &[], &[of_b], &[]).unwrap();
        running.wait().unwrap();
        HazardChecker::check_donations(&graph, &params(&[&a, &b]), &[], &[running], &[]).unwrap();
    }

    #[test]
    fn a_result_that_changes_when_rerun_at_other_addresses_is_a_hazard() {
        let rt = crate::context::get().unwrap();
        let device = &rt.streams[0].device;
        let checker = HazardChecker::default();
        let graph = add_graph();
        let (a, b) = (f32s(&[1.0, 2.0, 3.0, 4.0]), f32s(&[10.0, 20.0, 30.0, 40.0]));
        let snapshot = HazardChecker::snapshot(&graph, &params(&[&a, &b])).unwrap();
        // The right sums pass, twice (the second time on the kept twin).
        for _ in 0..2 {
            let right = f32s(&[11.0, 22.0, 33.0, 44.0]);
            checker
                .check_addresses(&rt.cache, device, &graph, &snapshot, &[right])
                .unwrap();
        }
        // A result computed from stale data in one element does not.
        let stale = f32s(&[11.0, 22.0, 33.0, 45.0]);
        let err = checker
            .check_addresses(&rt.cache, device, &graph, &snapshot, &[stale])
            .unwrap_err()
            .to_string();
        for word in [
            "depends on where its inputs are in device memory",
            "output 0 (float32[4]) differs in 1 of 4 elements",
        ] {
            assert!(err.contains(word), "expected {word:?} in {err}");
        }
    }
}
