//! The completion of one launched chunk: its PJRT event, what to blame if it
//! fails (the op, its inputs and the line that recorded it), the chunks it
//! read from (so a failure names the first op that failed along a chain), and
//! the input buffers it reads, held until it is known done (the readers half
//! of the buffer invariant in `value.rs`).

use std::panic::Location;
use std::sync::{Arc, Mutex, OnceLock};

use fusion::TensorType;

use crate::error::{Error, Result};
use crate::lock;
use crate::pjrt::{Buffer, Event};

/// Which op to name when something about a launched chunk fails.
#[derive(Clone)]
pub(crate) struct Blame {
    pub op: &'static str,
    pub inputs: Vec<TensorType>,
    pub origin: crate::origin::Origin,
    /// Ops in the chunk, when more than one.
    pub chunk_ops: usize,
}

impl Blame {
    pub fn error(&self, cause: Error) -> Error {
        if matches!(cause, Error::AtOp { .. }) {
            return cause;
        }
        let inputs: Vec<String> = self.inputs.iter().map(|t| t.to_string()).collect();
        let cause = if self.chunk_ops > 1 {
            Error::Internal(format!(
                "in a fused chunk of {} ops ending with this one: {cause}",
                self.chunk_ops
            ))
        } else {
            cause
        };
        Error::AtOp {
            op: self.op,
            inputs: inputs.join(", "),
            origin: self.origin.to_string(),
            cause: Box::new(cause),
        }
    }
}

/// The completion of one launched chunk: its PJRT event, what to blame if it
/// fails, the chunks it read from (to name the first failure in a chain), and
/// the input buffers it reads (held until it is known done).
pub(crate) struct Completion {
    event: Mutex<Option<Event>>,
    result: OnceLock<Result<()>>,
    blame: Blame,
    deps: Mutex<Vec<Arc<Completion>>>,
    reads: Mutex<Vec<Arc<Buffer>>>,
    /// Where the reads go once the chunk is known done: a stream's launcher
    /// drops them (`Retired`); without one, they drop where that is found.
    retired: Option<Arc<Retired>>,
}

impl Completion {
    pub fn new(
        event: Option<Event>,
        blame: Blame,
        deps: Vec<Arc<Completion>>,
        reads: Vec<Arc<Buffer>>,
        retired: Option<Arc<Retired>>,
    ) -> Arc<Completion> {
        let c = Completion {
            event: Mutex::new(event),
            result: OnceLock::new(),
            blame,
            deps: Mutex::new(deps),
            reads: Mutex::new(reads),
            retired,
        };
        if lock(&c.event).is_none() {
            let _ = c.result.set(Ok(()));
            c.release();
        }
        Arc::new(c)
    }

    /// A chunk still running that reads `reads` (for the hazard checker's
    /// tests: it completes when waited on).
    #[cfg(test)]
    pub fn unfinished(blame: Blame, reads: Vec<Arc<Buffer>>) -> Arc<Completion> {
        Arc::new(Completion {
            event: Mutex::new(None),
            result: OnceLock::new(),
            blame,
            deps: Mutex::new(vec![]),
            reads: Mutex::new(reads),
            retired: None,
        })
    }

    /// Drops what only an unfinished chunk needs.
    fn release(&self) {
        lock(&self.deps).clear();
        let reads = std::mem::take(&mut *lock(&self.reads));
        match &self.retired {
            Some(retired) => retired.retire(reads),
            None => drop(reads),
        }
    }

    /// Whether the chunk may still be reading `buffer`: it holds the buffer
    /// and is not known to be done (never blocks).
    pub fn may_read(&self, buffer: &Arc<Buffer>) -> bool {
        self.result.get().is_none() && lock(&self.reads).iter().any(|b| Arc::ptr_eq(b, buffer))
    }

    /// How many references to `buffer` the chunk holds while it may still be
    /// reading it (never blocks).
    pub fn holds(&self, buffer: &Arc<Buffer>) -> usize {
        if self.result.get().is_some() {
            return 0;
        }
        lock(&self.reads)
            .iter()
            .filter(|b| Arc::ptr_eq(b, buffer))
            .count()
    }

    /// The unfinished chunks a chunk reading from `direct` runs after on the
    /// device: `direct` and, transitively, the chunks they read from. Each
    /// once; never blocks.
    pub fn upstream(direct: impl IntoIterator<Item = Arc<Completion>>) -> Vec<Arc<Completion>> {
        let mut found: Vec<Arc<Completion>> = vec![];
        let mut todo: Vec<Arc<Completion>> = direct.into_iter().collect();
        while let Some(c) = todo.pop() {
            if c.result.get().is_some() || found.iter().any(|f| Arc::ptr_eq(f, &c)) {
                continue;
            }
            todo.extend(lock(&c.deps).iter().cloned());
            found.push(c);
        }
        found
    }

    /// What this chunk's failure would be blamed on.
    pub fn blame(&self) -> &Blame {
        &self.blame
    }

    /// A chunk that failed to launch.
    pub fn failed(error: Error) -> Arc<Completion> {
        let c = Completion {
            event: Mutex::new(None),
            result: OnceLock::new(),
            blame: Blame {
                op: "",
                inputs: vec![],
                origin: crate::origin::Origin::Rust(Location::caller()),
                chunk_ops: 0,
            },
            deps: Mutex::new(vec![]),
            reads: Mutex::new(vec![]),
            retired: None,
        };
        let _ = c.result.set(Err(error));
        Arc::new(c)
    }

    /// Blocks until the chunk ran. On failure, the error names the first op
    /// that failed along the chain of chunks this one read from.
    pub fn wait(&self) -> Result<()> {
        if let Some(r) = self.result.get() {
            return r.clone();
        }
        let mut event = lock(&self.event);
        if let Some(r) = self.result.get() {
            return r.clone();
        }
        let outcome = match event.as_ref() {
            Some(e) => e.wait(),
            None => Ok(()),
        };
        let result = outcome.map_err(|cause| {
            let deps: Vec<Arc<Completion>> = lock(&self.deps).clone();
            deps.iter()
                .find_map(|d| d.wait().err())
                .unwrap_or_else(|| self.blame.error(cause))
        });
        let _ = self.result.set(result.clone());
        *event = None;
        self.release();
        result
    }

    /// Whether the chunk is known to have run successfully (never blocks).
    pub fn done_ok(&self) -> bool {
        self.finished() && self.wait().is_ok()
    }

    /// Whether the chunk has finished, well or not (never blocks).
    /// One that has is settled (its held buffers released).
    pub fn finished(&self) -> bool {
        if self.result.get().is_some() {
            return true;
        }
        let ready = lock(&self.event)
            .as_ref()
            .is_none_or(|e| e.is_ready().unwrap_or(false));
        if ready {
            // Ready: this returns at once.
            let _ = self.wait();
        }
        ready
    }

    /// Calls `f` once the chunk has finished (at once if it has), from the
    /// plugin's thread: for events that time the device's work.
    pub fn on_finished(&self, f: Box<dyn FnOnce() + Send>) -> Result<()> {
        let event = lock(&self.event);
        match event.as_ref() {
            Some(e) if self.result.get().is_none() => e.on_ready(f),
            _ => {
                f();
                Ok(())
            }
        }
    }

    /// The failure, if the chunk is known to have failed (never blocks).
    pub fn known_failure(&self) -> Option<Error> {
        self.result.get().and_then(|r| r.clone().err())
    }
}

/// The input buffers of chunks known done, left for a stream's launcher
/// thread to drop. Destroying a buffer costs the plugin about a microsecond,
/// and a training step's chunk reads tens of buffers that die with it (the
/// activations its backward read): on the recording thread, at the loss
/// read that finds the chunk done, that was 4% of a small model's step. The
/// launcher drops them when it next runs, which is before the next chunk it
/// launches allocates its outputs: no more memory is held than before.
///
/// Buffers are left only while the launcher will run again without being
/// woken (it is running a chunk, polling for the next, or asleep on a timer
/// until then); otherwise they drop where the chunk was found done, as they
/// would with no launcher. A donation check counts the references held here
/// as released (`holds`): their chunks are done.
#[derive(Default)]
pub(crate) struct Retired {
    state: Mutex<RetiredState>,
    /// Held while buffers taken from here are being dropped: the exit hook
    /// waits for that (no thread may be inside the plugin once its static
    /// destructors run: `pjrt::before_plugin_teardown`).
    dropping: Mutex<()>,
}

#[derive(Default)]
struct RetiredState {
    buffers: Vec<Arc<Buffer>>,
    /// Whether the launcher will run again by itself.
    collector_awake: bool,
}

impl Retired {
    /// Leaves `buffers` to the launcher if it will run again by itself;
    /// drops them here otherwise.
    pub fn retire(&self, buffers: Vec<Arc<Buffer>>) {
        if buffers.is_empty() {
            return;
        }
        let mut state = lock(&self.state);
        if state.collector_awake {
            state.buffers.extend(buffers);
            return;
        }
        drop(state);
        drop(buffers);
    }

    /// Drops the buffers left so far, on the calling thread.
    pub fn collect(&self) {
        let _dropping = lock(&self.dropping);
        let buffers = std::mem::take(&mut lock(&self.state).buffers);
        drop(buffers);
    }

    /// The launcher is about to sleep until woken (or the process exits):
    /// what it was left is dropped now, once any drop under way is done,
    /// and what is retired from now on drops where it is.
    pub fn collector_sleeps(&self) {
        lock(&self.state).collector_awake = false;
        self.collect();
    }

    /// The launcher runs again, and will until it next sleeps untimed.
    pub fn collector_wakes(&self) {
        lock(&self.state).collector_awake = true;
    }

    /// How many references to `buffer` are left here.
    pub fn holds(&self, buffer: &Arc<Buffer>) -> usize {
        let state = lock(&self.state);
        state
            .buffers
            .iter()
            .filter(|b| Arc::ptr_eq(b, buffer))
            .count()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use fusion::DType;

    use super::*;

    /// A one-element float32 buffer on device 0.
    pub(crate) fn buffer() -> Arc<Buffer> {
        let rt = crate::context::get().expect("the XLA CPU plugin (make setup)");
        let bytes = 1.5f32.to_le_bytes();
        Arc::new(Buffer::from_host(&rt.streams[0].device, DType::F32, &[1], &bytes).unwrap())
    }

    /// Buffers are left only to a launcher that will run again by itself;
    /// they are dropped when it collects, or before it sleeps untimed, and
    /// on the retiring thread while it sleeps.
    #[test]
    fn retired_buffers_are_held_only_while_the_launcher_is_awake() {
        let retired = Retired::default();
        let b = buffer();
        retired.retire(vec![b.clone()]);
        assert_eq!(
            Arc::strong_count(&b),
            1,
            "no launcher awake: dropped at once"
        );

        retired.collector_wakes();
        retired.retire(vec![b.clone(), b.clone()]);
        assert_eq!(retired.holds(&b), 2);
        assert_eq!(Arc::strong_count(&b), 3, "left to the launcher");
        retired.collect();
        assert_eq!(Arc::strong_count(&b), 1, "collected");

        retired.retire(vec![b.clone()]);
        retired.collector_sleeps();
        assert_eq!(Arc::strong_count(&b), 1, "dropped before the untimed sleep");
        retired.retire(vec![b.clone()]);
        assert_eq!(retired.holds(&b), 0);
        assert_eq!(Arc::strong_count(&b), 1, "asleep: dropped where retired");
    }

    /// A done chunk's reads go to its `Retired` when it is found done.
    #[test]
    fn a_done_chunks_reads_are_retired() {
        let retired = Arc::new(Retired::default());
        retired.collector_wakes();
        let b = buffer();
        let blame = Blame {
            op: "add",
            inputs: vec![],
            origin: crate::origin::Origin::Rust(Location::caller()),
            chunk_ops: 1,
        };
        let done = Completion::new(None, blame, vec![], vec![b.clone()], Some(retired.clone()));
        assert!(done.finished());
        assert_eq!(done.holds(&b), 0, "done: it reads nothing any more");
        assert_eq!(retired.holds(&b), 1);
        retired.collect();
        assert_eq!(Arc::strong_count(&b), 1);
    }
}
