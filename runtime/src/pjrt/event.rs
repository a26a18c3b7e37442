//! `Event`: completion of asynchronous PJRT work (a transfer or an execution).

use std::sync::Arc;

use pjrt_sys::*;

use super::api::{Plugin, pjrt_call};
use super::live;
use crate::error::Result;

/// An owned `PJRT_Event`, destroyed on drop.
pub struct Event {
    plugin: Arc<Plugin>,
    raw: *mut PJRT_Event,
}

// SAFETY: PJRT events may be awaited, queried and destroyed from any thread.
unsafe impl Send for Event {}
// SAFETY: as above; `&Event` only exposes thread-safe PJRT calls.
unsafe impl Sync for Event {}

impl Event {
    /// Takes ownership of `raw` (non-null).
    pub(super) fn from_raw(plugin: Arc<Plugin>, raw: *mut PJRT_Event) -> Event {
        live::EVENTS.inc();
        Event { plugin, raw }
    }

    /// Blocks until the event completes; returns its error, if any.
    pub fn wait(&self) -> Result<()> {
        let mut args = PJRT_Event_Await_Args {
            event: self.raw,
            ..Default::default()
        };
        pjrt_call!(self.plugin, PJRT_Event_Await, &mut args)
    }

    /// Whether the event has completed (successfully or not).
    pub fn is_ready(&self) -> Result<bool> {
        let mut args = PJRT_Event_IsReady_Args {
            event: self.raw,
            ..Default::default()
        };
        pjrt_call!(self.plugin, PJRT_Event_IsReady, &mut args)?;
        Ok(args.is_ready)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let mut args = PJRT_Event_Destroy_Args {
            event: self.raw,
            ..Default::default()
        };
        if let Err(e) = pjrt_call!(self.plugin, PJRT_Event_Destroy, &mut args) {
            tracing::warn!("destroying a PJRT event: {e}");
        }
        live::EVENTS.dec();
    }
}
