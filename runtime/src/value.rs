//! Values: the runtime's side of a tensor. A value is pending (recorded, not
//! yet launched), in flight (its chunk cut and bound, being handed to the
//! plugin outside the stream's lock), ready (backed by a device buffer,
//! possibly still being computed) or failed (its op failed; reading it
//! returns that error). A read of a value in flight waits the few
//! microseconds until it is ready or failed. Values
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
//!   buffer until it is known done (our own usage hold; PJRT keeps one too);
//!   then it may leave them to the stream's launcher thread to drop
//!   (`completion::Retired`), references that block no donation.
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
    /// Taken from its trace and bound to a program that the thread which cut
    /// it is handing to the plugin (`stream::Deferred`): no trace holds it,
    /// and it has no buffer yet.
    InFlight,
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
    /// A number operand (`Recorder::scalar`): a ready 0-d value the stream
    /// shares between the ops reading that number, a parameter of their
    /// programs.
    pub number: bool,
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
            number: false,
        })
    }

    /// A value whose buffer is already computed (a host upload).
    pub fn ready(ty: TensorType, buffer: Buffer) -> Arc<Value> {
        Value::launched(ty, buffer, None, false)
    }

    /// A number operand's 0-d value (see the `number` field).
    pub fn number(ty: TensorType, buffer: Buffer) -> Arc<Value> {
        Value::launched(ty, buffer, None, true)
    }

    /// A value computed by a launch outside any stream's trace (a
    /// collective): its buffer, and the launch's completion.
    pub fn computed(ty: TensorType, buffer: Buffer, done: Arc<Completion>) -> Arc<Value> {
        Value::launched(ty, buffer, Some(done), false)
    }

    fn launched(
        ty: TensorType,
        buffer: Buffer,
        done: Option<Arc<Completion>>,
        number: bool,
    ) -> Arc<Value> {
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
            number,
        })
    }

    /// The buffer to pass to a launch (PJRT orders it after its producer);
    /// `None` if pending; the error if the value is known to have failed.
    pub fn buffer(&self) -> Result<Option<Launched>> {
        let mut state = self.settled();
        if let State::Ready { done: Some(d), .. } = &*state
            && let Some(e) = d.known_failure()
        {
            *state = State::Failed(e);
        }
        match &*state {
            State::Pending => Ok(None),
            State::Ready { buffer, done } => Ok(Some((buffer.clone(), done.clone()))),
            State::Failed(e) => Err(e.clone()),
            State::InFlight => Err(Error::Internal("a value still in flight".into())),
        }
    }

    /// The state once the value is not in flight. The thread launching it
    /// makes it ready or failed without the stream's lock and without
    /// waiting on anything of ours, so this wait is one plugin call long.
    fn settled(&self) -> std::sync::MutexGuard<'_, State> {
        let mut rounds = 0u32;
        loop {
            let state = lock(&self.state);
            if !matches!(*state, State::InFlight) {
                return state;
            }
            drop(state);
            rounds += 1;
            back_off(rounds);
        }
    }

    pub fn is_pending(&self) -> bool {
        !self.launched.load(Ordering::Acquire)
    }

    /// Waits until the value is computed; its buffer, or the error that
    /// stopped it. The value must not be pending.
    pub fn wait(&self) -> Result<Arc<Buffer>> {
        let (buffer, done) = match &*self.settled() {
            State::Pending | State::InFlight => {
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

    /// Marks a value whose chunk is bound and about to be handed to the
    /// plugin: no longer pending, not yet readable.
    pub fn set_in_flight(&self) {
        *lock(&self.state) = State::InFlight;
        self.launched.store(true, Ordering::Release);
    }

    pub fn set_ready(&self, buffer: impl Into<Arc<Buffer>>, done: Option<Arc<Completion>>) {
        *lock(&self.state) = State::Ready {
            buffer: buffer.into(),
            done,
        };
        self.launched.store(true, Ordering::Release);
    }

    /// Fails the value if it is still in flight: the launch that was to make
    /// it ready never ran (it panicked, or was dropped unrun).
    pub fn fail_if_in_flight(&self, error: Error) {
        let mut state = lock(&self.state);
        if matches!(*state, State::InFlight) {
            *state = State::Failed(error);
        }
    }

    pub fn set_failed(&self, error: Error) {
        *lock(&self.state) = State::Failed(error);
        self.launched.store(true, Ordering::Release);
    }
}

/// One round of a wait for a hand-over that takes microseconds (a launch):
/// spin, then yield the core, then sleep briefly.
pub(crate) fn back_off(round: u32) {
    match round {
        0..64 => std::hint::spin_loop(),
        64..1024 => std::thread::yield_now(),
        _ => std::thread::sleep(std::time::Duration::from_micros(20)),
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use fusion::DType;

    use super::*;

    fn f32s(values: &[f32]) -> Buffer {
        let rt = crate::context::get().expect("the XLA CPU plugin (make setup)");
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let dims = [values.len() as i64];
        Buffer::from_host(&rt.streams[0].device, DType::F32, &dims, &bytes).unwrap()
    }

    /// A value in flight is no longer pending; reading it waits until the
    /// thread launching it makes it ready, then gets that buffer.
    #[test]
    fn a_read_of_a_value_in_flight_waits_for_its_buffer() {
        let ty = TensorType::new(DType::F32, &[2]);
        let value = Value::pending(ty, 0, 0, 0);
        value.set_in_flight();
        assert!(!value.is_pending());
        let buffer = f32s(&[1.5, -2.0]);
        let launcher = {
            let value = value.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(30));
                value.set_ready(buffer, None);
            })
        };
        let start = Instant::now();
        let got = value.wait().unwrap();
        assert!(start.elapsed() >= Duration::from_millis(30));
        let mut host = [0u8; 8];
        got.to_host(&mut host).unwrap();
        assert_eq!(host[..4], 1.5f32.to_le_bytes());
        assert_eq!(host[4..], (-2.0f32).to_le_bytes());
        launcher.join().unwrap();
    }

    /// A value in flight whose launch fails reads as that failure.
    #[test]
    fn a_read_of_a_value_in_flight_gets_its_launch_failure() {
        let value = Value::pending(TensorType::new(DType::F32, &[2]), 0, 0, 0);
        value.set_in_flight();
        let launcher = {
            let value = value.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(10));
                value.set_failed(Error::Internal("the launch failed".into()));
            })
        };
        let err = value.buffer().err().expect("the launch's failure");
        assert!(err.to_string().contains("the launch failed"), "{err}");
        launcher.join().unwrap();
    }
}
