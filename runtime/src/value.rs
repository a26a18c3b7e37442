//! Values: the runtime's side of a tensor. A value is pending (recorded, not
//! yet launched), ready (backed by a device buffer, possibly still being
//! computed) or failed (its op failed; reading it returns that error). Values
//! are reference counted: a tensor handle holds one reference, and every
//! recorded op that reads it holds one.
//!
//! # The buffer invariant
//!
//! A device buffer is never donated, freed or overwritten while an execution
//! that reads it has not completed, and every read waits for the execution
//! that defines the value. How each holds:
//! - **Definition**: a ready value keeps the `Completion` of the chunk that
//!   computes it until that is known done; launches pass the buffer to PJRT,
//!   which orders the reading execution after its definition event, and host
//!   reads (`PJRT_Buffer_ToHostBuffer`, `Value::wait`) wait for it.
//! - **Readers**: a launched chunk's `Completion` holds an `Arc` of every input
//!   buffer until it is known done (our own usage hold; PJRT keeps one too).
//!   Dropping a tensor, rebinding a storage after an in-place op, or freeing a
//!   handle across the C ABI only drops a reference: the memory goes back to
//!   the plugin when the last reader has completed.
//! - **Donation** (`stream::Stream::donate`): a parameter is donated only when
//!   its value and the launch are the only holders of its buffer, that is when
//!   no tensor, view, host read or unfinished reader holds it, save the
//!   chunks the launch reads results of (directly or not): the device runs
//!   the launch after them, so they are done before it writes the buffer.
//! - **Scalars**: the per-stream cache of lifted scalar buffers is shared by
//!   many launches and is never donated (a lifted scalar has no value).
//!
//! Addresses are no identity: the allocator hands a freed address to the next
//! buffer, so a plugin that caches work by input address computes with stale
//! data in an eager runtime (XNNPACK's dot on the XLA CPU plugin did, issue 8;
//! see `pjrt::required_xla_options`). `EAGERTPU_CHECK_HAZARDS=1` checks both
//! the donation rule and address independence at every launch
//! (`stream/hazards.rs`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use fusion::TensorType;

use crate::completion::Completion;
use crate::error::{Error, Result};
use crate::lock;
use crate::pjrt::Buffer;

/// A launched value's buffer, and the chunk computing it (until known done).
pub(crate) type Launched = (Arc<Buffer>, Option<Arc<Completion>>);

pub(crate) enum State {
    Pending,
    Ready {
        buffer: Arc<Buffer>,
        /// The chunk computing the buffer, until known to be done.
        done: Option<Arc<Completion>>,
    },
    Failed(Error),
}

pub(crate) struct Value {
    pub ty: TensorType,
    /// While pending: the position of the node producing it in its stream's
    /// trace (so a chunk finds producers without a map).
    pub slot: u32,
    /// While pending: the trace holding that node (one per recording thread;
    /// `u32::MAX` for a value created ready).
    pub trace: u32,
    /// In fused mode: the position in its trace's op stream just after the
    /// op computing it (`fusion::policy::Window::seen` then); 0 if unknown.
    /// A host read tells the window how far back its value was computed.
    pub computed_at: u64,
    state: Mutex<State>,
    /// Whether `state` has left `Pending` (it never goes back): the stream
    /// asks every input of every op, and a load is cheaper than the lock.
    launched: AtomicBool,
}

impl Value {
    /// A value to be computed by the node at `slot` of trace `trace`, the
    /// op before stream position `computed_at` (0: unknown).
    pub fn pending(ty: TensorType, slot: usize, trace: u32, computed_at: u64) -> Arc<Value> {
        Arc::new(Value {
            ty,
            slot: slot as u32,
            trace,
            computed_at,
            state: Mutex::new(State::Pending),
            launched: AtomicBool::new(false),
        })
    }

    /// A value whose buffer is already computed (a host upload).
    pub fn ready(ty: TensorType, buffer: Buffer) -> Arc<Value> {
        Value::launched(ty, buffer, None)
    }

    /// A value computed by a launch outside any stream's trace (a
    /// collective): its buffer, and the launch's completion.
    pub fn computed(ty: TensorType, buffer: Buffer, done: Arc<Completion>) -> Arc<Value> {
        Value::launched(ty, buffer, Some(done))
    }

    fn launched(ty: TensorType, buffer: Buffer, done: Option<Arc<Completion>>) -> Arc<Value> {
        Arc::new(Value {
            ty,
            slot: u32::MAX,
            trace: u32::MAX,
            computed_at: 0,
            state: Mutex::new(State::Ready {
                buffer: Arc::new(buffer),
                done,
            }),
            launched: AtomicBool::new(true),
        })
    }

    /// The buffer to pass to a launch (PJRT orders it after its producer);
    /// `None` if pending; the error if the value is known to have failed.
    pub fn buffer(&self) -> Result<Option<Launched>> {
        let mut state = lock(&self.state);
        if let State::Ready { done: Some(d), .. } = &*state
            && let Some(e) = d.known_failure()
        {
            *state = State::Failed(e);
        }
        match &*state {
            State::Pending => Ok(None),
            State::Ready { buffer, done } => Ok(Some((buffer.clone(), done.clone()))),
            State::Failed(e) => Err(e.clone()),
        }
    }

    pub fn is_pending(&self) -> bool {
        !self.launched.load(Ordering::Acquire)
    }

    /// Waits until the value is computed; its buffer, or the error that
    /// stopped it. The value must not be pending.
    pub fn wait(&self) -> Result<Arc<Buffer>> {
        let (buffer, done) = match &*lock(&self.state) {
            State::Pending => {
                return Err(Error::Internal(
                    "waiting on a value that was never launched".into(),
                ));
            }
            State::Ready { buffer, done } => (buffer.clone(), done.clone()),
            State::Failed(e) => return Err(e.clone()),
        };
        if let Some(done) = done {
            if let Err(e) = done.wait() {
                *lock(&self.state) = State::Failed(e.clone());
                return Err(e);
            }
            if let State::Ready { done, .. } = &mut *lock(&self.state) {
                *done = None;
            }
        }
        Ok(buffer)
    }

    pub fn set_ready(&self, buffer: Buffer, done: Option<Arc<Completion>>) {
        *lock(&self.state) = State::Ready {
            buffer: Arc::new(buffer),
            done,
        };
        self.launched.store(true, Ordering::Release);
    }

    pub fn set_failed(&self, error: Error) {
        *lock(&self.state) = State::Failed(error);
        self.launched.store(true, Ordering::Release);
    }
}
