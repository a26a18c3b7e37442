//! Values: the runtime's side of a tensor. A value is pending (recorded, not
//! yet computed), ready (backed by a device buffer) or failed (its op failed;
//! reading it returns that error). Values are reference counted: a tensor
//! handle holds one reference, and every recorded op that reads it holds one.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use fusion::TensorType;

use crate::error::{Error, Result};
use crate::pjrt::Buffer;

/// Locks a mutex, ignoring poisoning (state is updated atomically under it).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) enum State {
    Pending,
    Ready(Arc<Buffer>),
    Failed(Error),
}

pub(crate) struct Value {
    pub ty: TensorType,
    state: Mutex<State>,
}

impl Value {
    pub fn pending(ty: TensorType) -> Arc<Value> {
        Arc::new(Value {
            ty,
            state: Mutex::new(State::Pending),
        })
    }

    pub fn ready(ty: TensorType, buffer: Buffer) -> Arc<Value> {
        Arc::new(Value {
            ty,
            state: Mutex::new(State::Ready(Arc::new(buffer))),
        })
    }

    /// The buffer if ready, `None` if pending, the error if failed.
    pub fn buffer(&self) -> Result<Option<Arc<Buffer>>> {
        match &*lock(&self.state) {
            State::Pending => Ok(None),
            State::Ready(b) => Ok(Some(b.clone())),
            State::Failed(e) => Err(e.clone()),
        }
    }

    pub fn set_ready(&self, buffer: Buffer) {
        *lock(&self.state) = State::Ready(Arc::new(buffer));
    }

    pub fn set_failed(&self, error: Error) {
        *lock(&self.state) = State::Failed(error);
    }
}
