//! Profiler entry points: the PyTorch backend's Kineto plugin starts a
//! session and, when it stops, reads its activities (`eagertpu::trace`).

use std::ffi::{CString, c_void};

use eagertpu::trace;

use crate::types::{TraceActivity, TraceEachFn};
use crate::{Failure, c_api, put};

/// A C string of `s` (a NUL inside becomes a space).
fn c_string(s: &str) -> CString {
    CString::new(s.replace('\0', " ")).unwrap_or_default()
}

c_api! {
    /// Starts recording the runtime's activities (compiles, loads from the
    /// disk cache, executions, host reads, copies to the device); what an
    /// earlier session left is dropped.
    fn etpu_trace_start() {
        trace::start();
        Ok(())
    }

    /// Stops recording and calls `each(user, activity)` for every activity
    /// of the session, in the order recorded (its strings valid during the
    /// call); unless `dropped` is NULL, the number that did not fit (a
    /// session keeps 2^20).
    fn etpu_trace_stop(user: *mut c_void, each: TraceEachFn, dropped: *mut u64) {
        let Some(each) = each else {
            return Err(Failure::invalid("each is NULL"));
        };
        let (activities, lost) = trace::stop();
        for a in &activities {
            let (name, detail, origin) = (c_string(a.kind.name()), c_string(&a.detail), c_string(&a.origin));
            let activity = TraceActivity {
                kind: a.kind as i32,
                device: a.device,
                start_ns: a.start_ns,
                end_ns: a.end_ns,
                name: name.as_ptr(),
                detail: detail.as_ptr(),
                origin: origin.as_ptr(),
            };
            // SAFETY: the caller's function, called as documented; the
            // strings outlive the call.
            unsafe { each(user, &activity) };
        }
        if dropped.is_null() {
            return Ok(());
        }
        // SAFETY: non-null and writable, as documented.
        unsafe { put(dropped, lost, "dropped") }
    }
}
