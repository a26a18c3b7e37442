//! Event entry points (`torch.tpu.Event` through the backend's device guard):
//! recording an event launches what is pending on the device; the event is
//! complete when the chunks launched before it are (`eagertpu::Marker`).

use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError};

use eagertpu::Marker;
use eagertpu::internals::Slots;

use crate::handles::device;
use crate::types::EventHandle;
use crate::{Failure, FfiResult, c_api, put};

static EVENTS: LazyLock<Mutex<Slots<Arc<Marker>>>> = LazyLock::new(Mutex::default);

fn events() -> MutexGuard<'static, Slots<Arc<Marker>>> {
    EVENTS.lock().unwrap_or_else(PoisonError::into_inner)
}

fn event_of(h: EventHandle) -> FfiResult<Arc<Marker>> {
    events().get_mut(h.0).cloned().ok_or_else(|| {
        Failure::bad_handle(format!(
            "event handle {} is unknown or was already freed",
            h.0
        ))
    })
}

c_api! {
    /// Records an event after the work issued so far on `device`; `timing`
    /// 1: it notes when that work finished (`etpu_event_elapsed_ms`).
    fn etpu_event_record(device_index: i64, timing: i32, out: *mut EventHandle) {
        let marker = device(device_index)?.record_event(timing != 0)?;
        let h = EventHandle(events().insert(Arc::new(marker)));
        // SAFETY: `out` is NULL or writable.
        unsafe { put(out, h, "out") }
    }

    /// Frees an event handle (the work it follows goes on).
    fn etpu_event_free(event: EventHandle) {
        events()
            .remove(event.0)
            .map(|_| ())
            .ok_or_else(|| Failure::bad_handle(format!("event handle {} is unknown or was already freed", event.0)))
    }

    /// `*done` = 1 when the work before the event has finished (never blocks).
    fn etpu_event_query(event: EventHandle, done: *mut bool) {
        let finished = event_of(event)?.query();
        // SAFETY: `done` is NULL or writable.
        unsafe { put(done, finished, "done") }
    }

    /// Waits for the work before the event; its first failure.
    fn etpu_event_synchronize(event: EventHandle) {
        Ok(event_of(event)?.wait()?)
    }

    /// Milliseconds from `start` to `end` on the device's timeline (both
    /// recorded with `timing`); waits for both.
    fn etpu_event_elapsed_ms(start: EventHandle, end: EventHandle, ms: *mut f64) {
        let (a, b) = (event_of(start)?, event_of(end)?);
        let elapsed = a.elapsed_ms(&b)?;
        // SAFETY: `ms` is NULL or writable.
        unsafe { put(ms, elapsed, "ms") }
    }
}
