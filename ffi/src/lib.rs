//! The C ABI of EagerTPU (`include/eagertpu.h`): what the PyTorch backend (and
//! any other foreign caller) uses.
//!
//! - Tensors are opaque handles (`etpu_tensor`, a `uint64_t`; 0 is none) kept
//!   in a table, so a null, unknown or freed handle is an error, never a crash.
//! - Every function returns a status (`ETPU_OK` = 0); on failure
//!   `eagertpu_last_error()` gives this thread's message. Nothing unwinds out:
//!   a panic becomes `ETPU_PANIC` with its message.
//! - Ops take an origin string (the caller's `file:line`, may be NULL) that
//!   errors from deferred execution name.
//!
//! Every `extern "C"` function is declared through [`c_api!`], which also
//! records its C signature; `tests/header.rs` checks the hand-written header
//! against that table, so the two cannot drift apart.

/// Every op recorded allocates (its value, its trace node's operand list,
/// the storage table's entry) and every cut frees them by the hundred: with
/// glibc's malloc and free about a tenth of a fused training loop's samples,
/// mimalloc's thread-local free lists make the fused chain's op rate 5%
/// higher and the tiny MLP's step 7% shorter (measured side by side). The
/// plugin and PyTorch keep their own allocators.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod collectives;
mod conv_pool;
mod distributed;
mod events;
mod fft;
mod foreach;
mod handles;
mod index;
mod linalg;
mod op_lists;
mod op_new;
mod ops;
mod optim;
mod pointwise;
mod profiler;
mod random;
mod resample;
mod rnn;
mod storage;
mod types;

use std::cell::RefCell;
use std::ffi::{CStr, CString, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};

use eagertpu::storage::StorageId;
use eagertpu::{Error, Mode};

pub use op_lists::{BEGIN as OP_LISTS_BEGIN, END as OP_LISTS_END, elementwise_op_lists};
pub use types::{
    CType, ETPU_OPERAND_HANDLE, ETPU_OPERAND_SCALAR, ETPU_OPERAND_VIEW, ETPU_SCALAR_BOOL,
    ETPU_SCALAR_FLOAT, ETPU_SCALAR_INT, Signature,
};

/// Version of the C ABI; bumped on any incompatible change to `eagertpu.h`.
pub const EAGERTPU_ABI_VERSION: u32 = 5;

/// Status codes (`etpu_status`).
pub type Status = i32;
pub const ETPU_OK: Status = 0;
/// Bad input: shapes, dtypes, dims, indices, unknown op names, null pointers.
pub const ETPU_INVALID_ARGUMENT: Status = 1;
/// A null, unknown or already freed tensor handle.
pub const ETPU_BAD_HANDLE: Status = 2;
/// The runtime failed: no plugin, a compile or execution error, a failed value.
pub const ETPU_FAILED: Status = 3;
/// A bug: a panic was caught at the boundary.
pub const ETPU_PANIC: Status = 4;

/// An error crossing the boundary: a status and a message.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) status: Status,
    pub(crate) message: String,
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        let status = match e.root() {
            Error::Op(_)
            | Error::Config { .. }
            | Error::Storage(_)
            | Error::FallbackRefused { .. } => ETPU_INVALID_ARGUMENT,
            _ => ETPU_FAILED,
        };
        Failure {
            status,
            message: e.to_string(),
        }
    }
}

impl Failure {
    pub(crate) fn invalid(message: impl Into<String>) -> Failure {
        Failure {
            status: ETPU_INVALID_ARGUMENT,
            message: message.into(),
        }
    }

    pub(crate) fn bad_handle(message: impl Into<String>) -> Failure {
        Failure {
            status: ETPU_BAD_HANDLE,
            message: message.into(),
        }
    }
}

pub(crate) type FfiResult<T = ()> = Result<T, Failure>;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(message: &str) {
    let c = CString::new(message.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

/// Runs an entry point's body: converts its result to a status, records the
/// message of a failure, and stops any panic at the boundary.
pub(crate) fn guard(body: impl FnOnce() -> FfiResult) -> Status {
    let result = eagertpu::timing::timed(eagertpu::timing::Stage::Abi, || {
        catch_unwind(AssertUnwindSafe(body))
    });
    match result {
        Ok(Ok(())) => ETPU_OK,
        Ok(Err(f)) => {
            set_last_error(&f.message);
            f.status
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("(no message)");
            set_last_error(&format!(
                "internal error (a bug in EagerTPU, please report it): {what}"
            ));
            ETPU_PANIC
        }
    }
}

/// This thread's last error message, for the entry points' unit tests.
#[cfg(test)]
pub(crate) fn last_error() -> String {
    // SAFETY: a NUL-terminated string valid until this thread's next failure.
    unsafe { CStr::from_ptr(eagertpu_last_error()) }
        .to_string_lossy()
        .into_owned()
}

/// Reads a C string argument (NULL is an error naming `what`).
///
/// # Safety
/// `p` must be NULL or point at a NUL-terminated string.
pub(crate) unsafe fn c_str<'a>(p: *const c_char, what: &str) -> FfiResult<&'a str> {
    if p.is_null() {
        return Err(Failure::invalid(format!("{what} is NULL")));
    }
    // SAFETY: non-null and NUL-terminated, as the caller guarantees.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str()
        .map_err(|_| Failure::invalid(format!("{what} is not UTF-8")))
}

/// Runs `f` with the ops it records attributed to `origin` (the caller's
/// `file:line`; NULL: "an unknown C caller").
///
/// # Safety
/// `origin` must be NULL or a NUL-terminated string.
pub(crate) unsafe fn at<T, E>(
    origin: *const c_char,
    f: impl FnOnce() -> Result<T, E>,
) -> FfiResult<T>
where
    Failure: From<E>,
{
    let o = if origin.is_null() {
        "an unknown C caller"
    } else {
        // SAFETY: non-null and NUL-terminated (the caller's contract).
        unsafe { c_str(origin, "origin")? }
    };
    Ok(eagertpu::with_origin(o, f)?)
}

/// Writes `value` to an out-pointer (NULL is an error naming `what`).
///
/// # Safety
/// `p` must be NULL or valid for a write of `T`.
pub(crate) unsafe fn put<T>(p: *mut T, value: T, what: &str) -> FfiResult {
    if p.is_null() {
        return Err(Failure::invalid(format!("{what} is NULL")));
    }
    // SAFETY: non-null and writable, as the caller guarantees.
    unsafe { p.write(value) };
    Ok(())
}

/// Declares `extern "C"` entry points and records their C signatures.
///
/// Each body returns `FfiResult`; the generated function wraps it in
/// [`guard`]. Argument types must implement [`CType`].
macro_rules! c_api {
    ($(
        $(#[$doc:meta])*
        fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $body:block
    )*) => {
        $(
            $(#[$doc])*
            ///
            /// # Safety
            /// Pointer arguments must be NULL or valid for the documented
            /// access; strings must be NUL-terminated.
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> $crate::Status {
                $crate::guard(move || $body)
            }
        )*
        /// The C signature of every entry point declared here.
        pub fn signatures() -> Vec<$crate::Signature> {
            vec![$($crate::Signature {
                name: stringify!($name),
                ret: "etpu_status",
                args: vec![$(<$ty as $crate::CType>::C_NAME),*],
            }),*]
        }
    };
}
pub(crate) use c_api;

/// The library version, a static NUL-terminated string.
#[unsafe(no_mangle)]
pub extern "C" fn eagertpu_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// The C ABI version (`EAGERTPU_ABI_VERSION`).
#[unsafe(no_mangle)]
pub extern "C" fn eagertpu_abi_version() -> u32 {
    EAGERTPU_ABI_VERSION
}

/// This thread's last error message ("" if none); valid until this thread's
/// next failing call.
#[unsafe(no_mangle)]
pub extern "C" fn eagertpu_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// Every entry point, with its C signature (for the header check).
pub fn all_signatures() -> Vec<Signature> {
    let mut v = vec![
        Signature {
            name: "eagertpu_version",
            ret: "const char*",
            args: vec![],
        },
        Signature {
            name: "eagertpu_abi_version",
            ret: "uint32_t",
            args: vec![],
        },
        Signature {
            name: "eagertpu_last_error",
            ret: "const char*",
            args: vec![],
        },
    ];
    v.extend(runtime_api::signatures());
    v.extend(handles::signatures());
    v.extend(ops::signatures());
    v.extend(conv_pool::signatures());
    v.extend(index::signatures());
    v.extend(linalg::signatures());
    v.extend(fft::signatures());
    v.extend(profiler::signatures());
    v.extend(random::signatures());
    v.extend(resample::signatures());
    v.extend(rnn::signatures());
    v.extend(storage::signatures());
    v.extend(pointwise::signatures());
    v.extend(op_new::signatures());
    v.extend(foreach::signatures());
    v.extend(optim::signatures());
    v.extend(collectives::signatures());
    v.extend(distributed::signatures());
    v.extend(events::signatures());
    v
}

/// Mode numbers of the C ABI (`etpu_mode`).
pub(crate) fn mode_from(m: i32) -> FfiResult<Mode> {
    match m {
        0 => Ok(Mode::Debug),
        1 => Ok(Mode::Strict),
        2 => Ok(Mode::Fused),
        _ => Err(Failure::invalid(format!(
            "mode {m} is not one of ETPU_MODE_DEBUG (0), ETPU_MODE_STRICT (1), ETPU_MODE_FUSED (2)"
        ))),
    }
}

mod runtime_api {
    use std::ffi::c_char;

    use super::*;
    use crate::types::{StorageHandle, TensorHandle};

    c_api! {
        /// Number of devices of the loaded plugin.
        fn eagertpu_device_count(out: *mut i64) {
            let n = eagertpu::Device::count()? as i64;
            // SAFETY: `out` is NULL or writable (the caller's contract).
            unsafe { put(out, n, "out") }
        }

        /// Switches the execution mode (`etpu_mode`); pending work runs first.
        fn eagertpu_set_mode(mode: i32) {
            eagertpu::set_mode(mode_from(mode)?)?;
            Ok(())
        }

        /// The current execution mode (`etpu_mode`).
        fn eagertpu_get_mode(out: *mut i32) {
            let m = match eagertpu::mode()? {
                Mode::Debug => 0,
                Mode::Strict => 1,
                Mode::Fused => 2,
            };
            // SAFETY: `out` is NULL or writable.
            unsafe { put(out, m, "out") }
        }

        /// Runs everything pending and waits; reports every failure since the
        /// previous sync.
        fn eagertpu_sync() {
            eagertpu::sync()?;
            Ok(())
        }

        /// Runs everything pending, waits, and stops the background compile
        /// pool: call before the process exits.
        fn eagertpu_shutdown() {
            eagertpu::shutdown()?;
            Ok(())
        }

        /// Waits until the fused chunks queued for background compilation are
        /// compiled.
        fn eagertpu_wait_for_compiles() {
            eagertpu::wait_for_compiles()?;
            Ok(())
        }

        /// Opens a call of compiled graph `id` (torch.compile) on device
        /// `device` for this thread: what is pending runs first, and the ops
        /// recorded until `eagertpu_graph_end` run as one program, compiled at
        /// once and replayed at the graph's next calls. `opened`: 0 in debug
        /// mode, where the graph's ops run one by one.
        fn eagertpu_graph_begin(device: i64, id: u64, opened: *mut i32) {
            let device = crate::handles::device(device)?;
            let open = device.graph_begin(id)?;
            // SAFETY: `opened` is NULL or writable (the caller's contract).
            unsafe { put(opened, i32::from(open), "opened") }
        }

        /// Closes this thread's open graph call on `device` and launches its
        /// ops as one program (nothing open: nothing to do).
        fn eagertpu_graph_end(device: i64) {
            Ok(crate::handles::device(device)?.graph_end()?)
        }

        /// After a call of graph `id` through a scope: makes its later calls
        /// direct if that call ran as one chunk whose parameters were the
        /// `n_inputs` tensors it read and whose results are the `n_outputs`
        /// it returned (`captured`: 1 if so). `updates` holds `n_updates`
        /// pairs (input, output): inputs the caller updates with those
        /// outputs after each call, donated to them where nothing else holds
        /// them (`eagertpu_graph_call`).
        fn eagertpu_graph_capture(
            device: i64,
            id: u64,
            inputs: *const TensorHandle,
            n_inputs: usize,
            outputs: *const TensorHandle,
            n_outputs: usize,
            updates: *const i64,
            n_updates: usize,
            captured: *mut i32,
        ) {
            let device = crate::handles::device(device)?;
            // SAFETY: `inputs`, `outputs` and `updates` as documented.
            let (ins, outs, pairs) = unsafe {
                (
                    crate::handles::tensors(inputs, n_inputs, "inputs")?,
                    crate::handles::tensors(outputs, n_outputs, "outputs")?,
                    crate::handles::dims(updates, 2 * n_updates, "updates")?,
                )
            };
            let mut updated = Vec::with_capacity(n_updates);
            for pair in pairs.chunks_exact(2) {
                let (Ok(k), Ok(o)) = (usize::try_from(pair[0]), usize::try_from(pair[1])) else {
                    return Err(Failure::invalid(format!("graph {id}: update ({}, {}) names a negative index", pair[0], pair[1])));
                };
                if k >= n_inputs || o >= n_outputs {
                    return Err(Failure::invalid(format!(
                        "graph {id}: update ({k}, {o}) is out of range for {n_inputs} inputs and {n_outputs} outputs"
                    )));
                }
                updated.push((k, o));
            }
            let ok = device.graph_capture_updating(id, &ins, &outs, &updated)?;
            // SAFETY: `captured` is NULL or writable.
            unsafe { put(captured, i32::from(ok), "captured") }
        }

        /// The random draws a direct call of captured graph `id` makes (the
        /// keys `eagertpu_graph_call` takes), or -1 when it has no direct call.
        fn eagertpu_graph_draws(device: i64, id: u64, draws: *mut i64) {
            let device = crate::handles::device(device)?;
            let n = device.graph_draws(id)?.map_or(-1, |n| n as i64);
            // SAFETY: `draws` is NULL or writable (the caller's contract).
            unsafe { put(draws, n, "draws") }
        }

        /// Calls captured graph `id` on the `n_inputs` tensors, each the
        /// contents of allocation `storages[i]`: its program runs on their
        /// buffers, with `n_keys` keys (`keys` holds two halves each) for its
        /// random draws; nothing is recorded, and `n_outputs` new handles
        /// are written to `outputs`. An input the graph updates
        /// (`eagertpu_graph_capture`) that nothing but its allocation and
        /// its handle holds is donated: its allocation then holds the
        /// updated value. `called` is 0 (nothing written) when the graph has
        /// no direct call, the inputs' types differ from the captured ones,
        /// or `n_keys` is not its number of draws.
        fn eagertpu_graph_call(
            device: i64,
            id: u64,
            inputs: *const TensorHandle,
            storages: *const StorageHandle,
            n_inputs: usize,
            keys: *const u64,
            n_keys: usize,
            outputs: *mut TensorHandle,
            n_outputs: usize,
            called: *mut i32,
        ) {
            let device = crate::handles::device(device)?;
            // SAFETY: `inputs`, `storages` and `keys` as documented.
            let (ins, ids, halves) = unsafe {
                (
                    crate::handles::tensors(inputs, n_inputs, "inputs")?,
                    crate::handles::dims(storages.cast::<i64>(), n_inputs, "storages")?,
                    crate::handles::dims(keys.cast::<i64>(), 2 * n_keys, "keys")?,
                )
            };
            let keys: Vec<(u64, u64)> = halves.chunks_exact(2).map(|k| (k[0] as u64, k[1] as u64)).collect();
            let ids: Vec<StorageId> = ids.iter().map(|&n| crate::storage::id(StorageHandle(n as u64))).collect();
            // Each input is held by its handle and by `ins`.
            let results = device.graph_call_on_storages(id, &ins, &keys, &ids, 2)?;
            let Some(results) = results.filter(|r| r.len() == n_outputs) else {
                // SAFETY: `called` is NULL or writable.
                return unsafe { put(called, 0, "called") };
            };
            if outputs.is_null() && n_outputs > 0 {
                return Err(Failure::invalid("outputs is NULL"));
            }
            for (i, t) in results.into_iter().enumerate() {
                // SAFETY: `outputs` holds `n_outputs` writable handles.
                unsafe { crate::handles::put_tensor(outputs.add(i), t)? };
            }
            // SAFETY: `called` is NULL or writable.
            unsafe { put(called, 1, "called") }
        }

        /// Makes the first op producing NaN/Inf an error naming it (0 or 1).
        fn eagertpu_set_check_nan(on: i32) {
            eagertpu::set_check_nan(on != 0)?;
            Ok(())
        }

        /// Fused mode's results depend only on the op stream (0 or 1; PyTorch's
        /// `torch.use_deterministic_algorithms`).
        fn eagertpu_set_deterministic(on: i32) {
            eagertpu::set_deterministic(on != 0)?;
            Ok(())
        }

        /// Begins one op of the caller's: the runtime ops this thread calls
        /// until the matching `etpu_one_op_end` run as one program in debug
        /// and strict modes (a `_foreach` op over a list launches once, not
        /// once per tensor). Scopes nest.
        fn etpu_one_op_begin() {
            eagertpu::begin_one_op();
            Ok(())
        }

        /// Ends the scope `etpu_one_op_begin` began; the outermost one's end
        /// launches what it recorded (in debug mode, and waits: a launch
        /// error is returned here). ETPU_INVALID_ARGUMENT when this thread
        /// began no scope.
        fn etpu_one_op_end() {
            eagertpu::end_one_op()?;
            Ok(())
        }

        /// The metrics report as text: writes at most `capacity` bytes
        /// (NUL-terminated) to `buf` and the full size (with the NUL) to
        /// `length`. `buf` may be NULL to ask for the size.
        fn eagertpu_metrics_report(buf: *mut c_char, capacity: usize, length: *mut usize) {
            let text = eagertpu::metrics()?.report();
            write_text(&text, buf, capacity, length)
        }

        /// Counts a CPU fallback of `op` (an op run on the CPU for lack of a
        /// kernel); `*first` is 1 the first time for `op` (warn then). Under
        /// `EAGERTPU_FALLBACK=error` it is refused: ETPU_INVALID_ARGUMENT, a
        /// message naming the op.
        fn eagertpu_note_fallback(op: *const c_char, first: *mut bool) {
            // SAFETY: `op` is NUL-terminated and `first` writable (the caller's contract).
            unsafe {
                let op = c_str(op, "op")?;
                let is_first = eagertpu::note_fallback(op)?;
                put(first, is_first, "first")
            }
        }

        /// The metrics as one JSON object (counters as numbers), written as
        /// `eagertpu_metrics_report` writes its text.
        fn eagertpu_metrics_json(buf: *mut c_char, capacity: usize, length: *mut usize) {
            let text = eagertpu::metrics()?.to_json();
            write_text(&text, buf, capacity, length)
        }
    }
}

/// Writes `text` NUL-terminated into `buf` (at most `capacity` bytes) and its
/// full size with the NUL to `length`.
pub(crate) fn write_text(
    text: &str,
    buf: *mut c_char,
    capacity: usize,
    length: *mut usize,
) -> FfiResult<()> {
    // SAFETY: `length` is NULL or writable (the caller's contract).
    unsafe { put(length, text.len() + 1, "length")? };
    if !buf.is_null() && capacity > 0 {
        let n = text.len().min(capacity - 1);
        // SAFETY: `buf` is valid for `capacity` bytes (the caller's contract)
        // and `n + 1 <= capacity`.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
            *buf.add(n) = 0;
        }
    }
    Ok(())
}
