//! Profiler activities: what the runtime did and when, for `torch.profiler`
//! (the PyTorch backend hands them to Kineto as the `tpu` device's trace).
//!
//! Off unless a session records (`start`): each site then costs one atomic
//! load. Times are wall-clock nanoseconds since the Unix epoch
//! (`CLOCK_REALTIME`, the clock of PyTorch's own profiler events), so the
//! activities line up with the CPU ops that caused them. Each activity
//! names the user's line it is blamed on: the call that read a value, the
//! last op of a chunk, the op whose program compiled.
//!
//! - `Compile`: a program compiled (on the recording thread or a background
//!   compile thread); `DiskLoad`: one loaded from the on-disk cache.
//! - `Execute`: a program run, from its launch until the plugin reports its
//!   outputs ready (`PJRT_Event_OnReady`): the device's time, queueing
//!   behind earlier work included.
//! - `HostRead`: a host sync (`.item()`, `.cpu()`, a print): from the call
//!   until the value is on the host.
//! - `ToDevice`: a host-to-device copy.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::completion::Completion;
use crate::origin::Origin;

/// The kinds of activity, each a row of the device in the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum Kind {
    Compile = 0,
    DiskLoad = 1,
    Execute = 2,
    HostRead = 3,
    ToDevice = 4,
}

impl Kind {
    pub const ALL: [Kind; 5] = [
        Kind::Compile,
        Kind::DiskLoad,
        Kind::Execute,
        Kind::HostRead,
        Kind::ToDevice,
    ];

    /// The activity's name in the trace.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Compile => "eagertpu::compile",
            Kind::DiskLoad => "eagertpu::load_from_disk_cache",
            Kind::Execute => "eagertpu::execute",
            Kind::HostRead => "eagertpu::host_read",
            Kind::ToDevice => "eagertpu::to_device",
        }
    }
}

/// One recorded activity.
#[derive(Clone, Debug)]
pub struct Activity {
    pub kind: Kind,
    /// What it was about (`"37 ops"`, `"float32[64, 10]"`), or empty.
    pub detail: String,
    pub start_ns: i64,
    pub end_ns: i64,
    /// The device (0 where the runtime has one device or none applies).
    pub device: i32,
    /// The user's line (`file.py:12`), or empty where none is known.
    pub origin: Arc<str>,
}

/// Most activities kept per session; later ones are counted, not kept.
const MAX_ACTIVITIES: usize = 1 << 20;

static RECORDING: AtomicBool = AtomicBool::new(false);
static ACTIVITIES: Mutex<Vec<Activity>> = Mutex::new(Vec::new());
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// Executions whose completion callback has not run yet.
static PENDING: AtomicU64 = AtomicU64::new(0);

/// How long `stop` waits for the callbacks of executions that are done.
const CALLBACK_GRACE: std::time::Duration = std::time::Duration::from_millis(200);

/// Whether a session is recording.
#[inline]
pub fn recording() -> bool {
    RECORDING.load(Ordering::Relaxed)
}

/// Starts a session: activities from now on are kept (earlier ones dropped).
pub fn start() {
    ACTIVITIES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
    DROPPED.store(0, Ordering::Relaxed);
    RECORDING.store(true, Ordering::SeqCst);
}

/// Ends the session: its activities, and how many did not fit. The plugin
/// reports a finished execution from its own thread, a moment after a host
/// wait for it returns: `stop` gives those callbacks a short grace; an
/// execution still running after it is not in the session.
pub fn stop() -> (Vec<Activity>, u64) {
    let deadline = std::time::Instant::now() + CALLBACK_GRACE;
    while PENDING.load(Ordering::SeqCst) > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
    RECORDING.store(false, Ordering::SeqCst);
    let taken = std::mem::take(&mut *ACTIVITIES.lock().unwrap_or_else(PoisonError::into_inner));
    (taken, DROPPED.swap(0, Ordering::Relaxed))
}

/// Now, on the trace's clock.
pub fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// Keeps `activity` if a session is recording.
pub fn record(activity: Activity) {
    if !recording() {
        return;
    }
    let mut all = ACTIVITIES.lock().unwrap_or_else(PoisonError::into_inner);
    if all.len() < MAX_ACTIVITIES {
        all.push(activity);
    } else {
        DROPPED.fetch_add(1, Ordering::Relaxed);
    }
}

/// Records an activity of `kind` that began at `start_ns` and ends now.
pub fn record_since(kind: Kind, start_ns: i64, origin: Option<&Origin>, detail: String) {
    record(Activity {
        kind,
        detail,
        start_ns,
        end_ns: now_ns(),
        device: 0,
        origin: origin_text(origin),
    });
}

/// Records an execution launched now when `done` completes (from the
/// plugin's thread). A plugin that cannot call back leaves it out; the
/// program runs the same.
pub(crate) fn execution(done: &Completion, origin: &Origin, ops: usize) {
    if !recording() {
        return;
    }
    let (start_ns, origin) = (now_ns(), origin.clone());
    let detail = format!("{ops} op{}", if ops == 1 { "" } else { "s" });
    PENDING.fetch_add(1, Ordering::SeqCst);
    let registered = done.on_finished(Box::new(move || {
        record_since(Kind::Execute, start_ns, Some(&origin), detail);
        PENDING.fetch_sub(1, Ordering::SeqCst);
    }));
    if registered.is_err() {
        PENDING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// An activity being timed: recorded when dropped (`span`).
pub struct Span {
    kind: Kind,
    detail: String,
    origin: Arc<str>,
    start_ns: i64,
}

impl Drop for Span {
    fn drop(&mut self) {
        record(Activity {
            kind: self.kind,
            detail: std::mem::take(&mut self.detail),
            start_ns: self.start_ns,
            end_ns: now_ns(),
            device: 0,
            origin: self.origin.clone(),
        });
    }
}

/// Times an activity from now until the returned guard drops; `None` (and
/// nothing built) when no session records.
pub fn span(kind: Kind, origin: Option<&Origin>, detail: impl FnOnce() -> String) -> Option<Span> {
    recording().then(|| Span {
        kind,
        detail: detail(),
        origin: origin_text(origin),
        start_ns: now_ns(),
    })
}

/// Times a host-to-device copy of a `ty` tensor, blamed on the op being
/// recorded for the foreign caller, if any.
pub(crate) fn to_device(ty: &fusion::TensorType) -> Option<Span> {
    let origin = recording().then(crate::origin::foreign).flatten();
    span(Kind::ToDevice, origin.as_ref(), || ty.to_string())
}

/// The user's line of `origin`, or empty.
pub fn origin_text(origin: Option<&Origin>) -> Arc<str> {
    origin.map_or_else(|| Arc::from(""), |o| Arc::from(o.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_keeps_what_it_recorded_and_nothing_outside_it() {
        record(Activity {
            kind: Kind::Compile,
            detail: String::new(),
            start_ns: 1,
            end_ns: 2,
            device: 0,
            origin: Arc::from(""),
        });
        start();
        {
            let _s = span(Kind::HostRead, None, || "the unit test's read".into());
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let (kept, dropped) = stop();
        assert_eq!(dropped, 0);
        // Other tests of this process may record while the session is on.
        let reads: Vec<&Activity> = kept
            .iter()
            .filter(|a| a.detail == "the unit test's read")
            .collect();
        assert_eq!(reads.len(), 1, "{kept:?}");
        assert_eq!(reads[0].kind, Kind::HostRead);
        assert!(
            reads[0].end_ns - reads[0].start_ns >= 2_000_000,
            "{:?}",
            reads[0]
        );
        // A timestamp near now on the Unix clock (PyTorch's profiler clock).
        assert!((now_ns() - reads[0].end_ns).abs() < 60_000_000_000);
    }
}
