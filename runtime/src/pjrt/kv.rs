//! The key-value store through which PJRT's multi-process clients (libtpu,
//! the CUDA plugin) find their peers: `PJRT_Client_Create`'s `kv_get`,
//! `kv_try_get` and `kv_put` callbacks, served by a [`KeyValueStore`]
//! (PyTorch's c10d store when PyTorch drives the job). The CPU plugin takes
//! the callbacks and never calls them; [`check_store`] calls them as a
//! plugin does, so the wiring is tested on any machine.

use std::ffi::{c_char, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr::null_mut;
use std::sync::Arc;
use std::time::Duration;

use pjrt_sys::*;

/// Why a store call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KvFailure {
    /// No value under the key (a try-get).
    NotFound(String),
    /// No value arrived within the get's timeout.
    Timeout(String),
    /// The store itself failed (unreachable, closed).
    Unavailable(String),
}

impl KvFailure {
    fn code(&self) -> PJRT_Error_Code {
        match self {
            KvFailure::NotFound(_) => PJRT_Error_Code_NOT_FOUND,
            KvFailure::Timeout(_) => PJRT_Error_Code_DEADLINE_EXCEEDED,
            KvFailure::Unavailable(_) => PJRT_Error_Code_UNAVAILABLE,
        }
    }

    fn message(&self) -> &str {
        match self {
            KvFailure::NotFound(m) | KvFailure::Timeout(m) | KvFailure::Unavailable(m) => m,
        }
    }
}

/// A store shared by every process of a job.
pub trait KeyValueStore: Send + Sync {
    /// The value under `key`, waiting up to `timeout` for a process to put it.
    fn get(&self, key: &str, timeout: Duration) -> Result<Vec<u8>, KvFailure>;
    /// The value under `key` now, or `NotFound`.
    fn try_get(&self, key: &str) -> Result<Vec<u8>, KvFailure>;
    fn put(&self, key: &str, value: &[u8]) -> Result<(), KvFailure>;
}

/// A store and the callbacks that serve it to a plugin. The client keeps it
/// alive: the plugin may call the callbacks as long as the client lives.
pub struct KvCallbacks {
    store: Box<Arc<dyn KeyValueStore>>,
}

impl KvCallbacks {
    pub fn new(store: Arc<dyn KeyValueStore>) -> KvCallbacks {
        KvCallbacks {
            store: Box::new(store),
        }
    }

    fn user_arg(&self) -> *mut c_void {
        (&*self.store as *const Arc<dyn KeyValueStore>)
            .cast_mut()
            .cast()
    }

    /// Hands the callbacks to `PJRT_Client_Create`.
    pub(super) fn install(&self, args: &mut PJRT_Client_Create_Args) {
        args.kv_get_callback = Some(kv_get);
        args.kv_get_user_arg = self.user_arg();
        args.kv_try_get_callback = Some(kv_try_get);
        args.kv_try_get_user_arg = self.user_arg();
        args.kv_put_callback = Some(kv_put);
        args.kv_put_user_arg = self.user_arg();
    }
}

/// A key as the store takes it (PJRT's keys are text).
///
/// # Safety
/// `key` must point at `size` readable bytes (or be null with size 0).
unsafe fn key_of(key: *const c_char, size: usize) -> String {
    if key.is_null() || size == 0 {
        return String::new();
    }
    // SAFETY: `size` readable bytes at `key` (the caller's contract).
    let bytes = unsafe { std::slice::from_raw_parts(key.cast::<u8>(), size) };
    String::from_utf8_lossy(bytes).into_owned()
}

/// The store behind a callback's user argument.
///
/// # Safety
/// `user_arg` must be a `KvCallbacks::user_arg` of a live `KvCallbacks`.
unsafe fn store_of<'a>(user_arg: *mut c_void) -> &'a Arc<dyn KeyValueStore> {
    // SAFETY: the caller's contract.
    unsafe { &*user_arg.cast::<Arc<dyn KeyValueStore>>() }
}

/// Bytes of a value returned to the plugin: its length, then its bytes; the
/// plugin frees it with `free_value` (which gets only the pointer).
const LENGTH: usize = size_of::<usize>();

fn leak_value(value: Vec<u8>) -> (*mut c_char, usize) {
    let n = value.len();
    let mut bytes = Vec::with_capacity(LENGTH + n);
    bytes.extend_from_slice(&n.to_le_bytes());
    bytes.extend_from_slice(&value);
    let base = Box::into_raw(bytes.into_boxed_slice()).cast::<u8>();
    // SAFETY: the allocation holds LENGTH + n bytes.
    (unsafe { base.add(LENGTH) }.cast(), n)
}

unsafe extern "C" fn free_value(value: *mut c_char) {
    if value.is_null() {
        return;
    }
    // SAFETY: `value` came from `leak_value`: LENGTH bytes of length before it.
    unsafe {
        let base = value.cast::<u8>().sub(LENGTH);
        let n = usize::from_le_bytes(std::ptr::read_unaligned(base.cast::<[u8; LENGTH]>()));
        drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
            base,
            LENGTH + n,
        )));
    }
}

/// The error a failed callback returns, made by the plugin's `callback_error`.
///
/// # Safety
/// `make` must be null or point at the plugin's error maker.
unsafe fn failed(make: *mut PJRT_CallbackError, failure: &KvFailure) -> *mut PJRT_Error {
    // SAFETY: the caller's contract.
    match unsafe { make.as_ref() }.and_then(|f| *f) {
        // SAFETY: the plugin's function, with a message valid for the call.
        Some(f) => unsafe {
            f(
                failure.code(),
                failure.message().as_ptr().cast(),
                failure.message().len(),
            )
        },
        None => null_mut(),
    }
}

/// Runs a store call, a panic being a failure (nothing unwinds into the plugin).
fn guarded<T>(call: impl FnOnce() -> Result<T, KvFailure>) -> Result<T, KvFailure> {
    catch_unwind(AssertUnwindSafe(call)).unwrap_or_else(|_| {
        Err(KvFailure::Unavailable(
            "the key-value store panicked".into(),
        ))
    })
}

/// Hands a get's value to the plugin (with its deleter), or its failure.
///
/// # Safety
/// `make` as in `failed`.
unsafe fn hand_back(
    got: Result<Vec<u8>, KvFailure>,
    value: &mut *mut c_char,
    value_size: &mut usize,
    deleter: &mut PJRT_KeyValueGetCallback_ValueDeleter,
    make: *mut PJRT_CallbackError,
) -> *mut PJRT_Error {
    match got {
        Ok(bytes) => {
            (*value, *value_size) = leak_value(bytes);
            *deleter = Some(free_value);
            null_mut()
        }
        // SAFETY: the caller's contract.
        Err(f) => unsafe { failed(make, &f) },
    }
}

unsafe extern "C" fn kv_get(args: *mut c_void) -> *mut PJRT_Error {
    // SAFETY: the plugin passes its PJRT_KeyValueGetCallback_Args, valid and
    // exclusively ours for the call, with our user argument.
    let args = unsafe { &mut *args.cast::<PJRT_KeyValueGetCallback_Args>() };
    // SAFETY: as above.
    let (store, key) = unsafe { (store_of(args.user_arg), key_of(args.key, args.key_size)) };
    let timeout = Duration::from_millis(u64::try_from(args.timeout_in_ms).unwrap_or(0));
    let got = guarded(|| store.get(&key, timeout));
    // SAFETY: the plugin's error maker.
    unsafe {
        hand_back(
            got,
            &mut args.value,
            &mut args.value_size,
            &mut args.value_deleter_callback,
            args.callback_error,
        )
    }
}

unsafe extern "C" fn kv_try_get(args: *mut c_void) -> *mut PJRT_Error {
    // SAFETY: as in `kv_get`, with PJRT_KeyValueTryGetCallback_Args.
    let args = unsafe { &mut *args.cast::<PJRT_KeyValueTryGetCallback_Args>() };
    // SAFETY: as above.
    let (store, key) = unsafe { (store_of(args.user_arg), key_of(args.key, args.key_size)) };
    let got = guarded(|| store.try_get(&key));
    // SAFETY: the plugin's error maker.
    unsafe {
        hand_back(
            got,
            &mut args.value,
            &mut args.value_size,
            &mut args.value_deleter_callback,
            args.callback_error,
        )
    }
}

unsafe extern "C" fn kv_put(args: *mut c_void) -> *mut PJRT_Error {
    // SAFETY: as in `kv_get`, with PJRT_KeyValuePutCallback_Args.
    let args = unsafe { &mut *args.cast::<PJRT_KeyValuePutCallback_Args>() };
    // SAFETY: as above; the value is `value_size` bytes valid for the call.
    let (store, key, value) = unsafe {
        let value = if args.value.is_null() {
            &[][..]
        } else {
            std::slice::from_raw_parts(args.value.cast::<u8>(), args.value_size)
        };
        (
            store_of(args.user_arg),
            key_of(args.key, args.key_size),
            value,
        )
    };
    match guarded(|| store.put(&key, value)) {
        Ok(()) => null_mut(),
        // SAFETY: the plugin's error maker.
        Err(f) => unsafe { failed(args.callback_error, &f) },
    }
}

thread_local! {
    /// The failure `check_store`'s stand-in error maker was handed.
    static CHECK_FAILURE: std::cell::RefCell<Option<KvFailure>> = const { std::cell::RefCell::new(None) };
}

/// What `check_store` hands the callbacks as the plugin's error maker: it
/// keeps the failure and returns a marker (never given to a plugin).
unsafe extern "C" fn check_error(
    code: PJRT_Error_Code,
    message: *const c_char,
    size: usize,
) -> *mut PJRT_Error {
    // SAFETY: `size` bytes at `message` (the callbacks' contract).
    let m = unsafe { key_of(message, size) };
    let failure = match code {
        PJRT_Error_Code_NOT_FOUND => KvFailure::NotFound(m),
        PJRT_Error_Code_DEADLINE_EXCEEDED => KvFailure::Timeout(m),
        _ => KvFailure::Unavailable(m),
    };
    CHECK_FAILURE.with(|f| *f.borrow_mut() = Some(failure));
    std::ptr::NonNull::dangling().as_ptr()
}

/// Calls `callbacks` as a plugin's distributed client does when it starts:
/// node `node_id` puts its key, then reads every node's within `timeout`
/// (`kv_get`) and reads its own back (`kv_try_get`). Every node of a job
/// running it proves the store reaches them all. The failure names the node
/// missing.
pub fn check_store(
    callbacks: &KvCallbacks,
    node_id: usize,
    num_nodes: usize,
    timeout: Duration,
) -> Result<(), KvFailure> {
    let key = |n: usize| format!("eagertpu/check/node/{n}");
    let mut make_error: PJRT_CallbackError = Some(check_error);
    let fail = || {
        CHECK_FAILURE
            .with(|f| f.borrow_mut().take())
            .unwrap_or(KvFailure::Unavailable("no message".into()))
    };
    let mine = key(node_id);
    let value = format!("node {node_id} of {num_nodes}");
    let mut put = PJRT_KeyValuePutCallback_Args {
        struct_size: PJRT_KeyValuePutCallback_Args::STRUCT_SIZE,
        key: mine.as_ptr().cast(),
        key_size: mine.len(),
        value: value.as_ptr().cast(),
        value_size: value.len(),
        callback_error: &mut make_error,
        user_arg: callbacks.user_arg(),
        ..Default::default()
    };
    // SAFETY: our own args, valid for the call, with our user argument.
    if !unsafe { kv_put((&mut put as *mut PJRT_KeyValuePutCallback_Args).cast()) }.is_null() {
        return Err(fail());
    }
    for n in 0..num_nodes {
        let theirs = key(n);
        let mut get = PJRT_KeyValueGetCallback_Args {
            struct_size: PJRT_KeyValueGetCallback_Args::STRUCT_SIZE,
            key: theirs.as_ptr().cast(),
            key_size: theirs.len(),
            timeout_in_ms: i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX),
            callback_error: &mut make_error,
            user_arg: callbacks.user_arg(),
            ..Default::default()
        };
        // SAFETY: as above.
        if !unsafe { kv_get((&mut get as *mut PJRT_KeyValueGetCallback_Args).cast()) }.is_null() {
            return Err(match fail() {
                KvFailure::Timeout(m) => KvFailure::Timeout(format!(
                    "node {n} of {num_nodes} did not put {theirs} within {timeout:?}: {m}"
                )),
                other => other,
            });
        }
        // SAFETY: the value the callback returned, freed by its deleter.
        let got = unsafe {
            let bytes = key_of(get.value, get.value_size);
            if let Some(free) = get.value_deleter_callback {
                free(get.value);
            }
            bytes
        };
        if got != format!("node {n} of {num_nodes}") {
            return Err(KvFailure::Unavailable(format!(
                "{theirs} holds {got:?}; expected \"node {n} of {num_nodes}\" (do the nodes agree on the job's size?)"
            )));
        }
    }
    let mut try_get = PJRT_KeyValueTryGetCallback_Args {
        struct_size: PJRT_KeyValueTryGetCallback_Args::STRUCT_SIZE,
        key: mine.as_ptr().cast(),
        key_size: mine.len(),
        callback_error: &mut make_error,
        user_arg: callbacks.user_arg(),
        ..Default::default()
    };
    // SAFETY: as above.
    if !unsafe { kv_try_get((&mut try_get as *mut PJRT_KeyValueTryGetCallback_Args).cast()) }
        .is_null()
    {
        return Err(fail());
    }
    // SAFETY: the value the callback returned, freed by its deleter.
    unsafe {
        if let Some(free) = try_get.value_deleter_callback {
            free(try_get.value);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Mutex;

    use super::*;

    /// A store of one process; `get` of `panics` panics.
    #[derive(Default)]
    struct Memory(Mutex<HashMap<String, Vec<u8>>>);

    impl KeyValueStore for Memory {
        fn get(&self, key: &str, _timeout: Duration) -> Result<Vec<u8>, KvFailure> {
            assert!(!key.ends_with("/panics"), "a store bug");
            self.try_get(key)
                .map_err(|_| KvFailure::Timeout(format!("{key} never came")))
        }
        fn try_get(&self, key: &str) -> Result<Vec<u8>, KvFailure> {
            let map = self.0.lock().unwrap();
            map.get(key)
                .cloned()
                .ok_or_else(|| KvFailure::NotFound(key.into()))
        }
        fn put(&self, key: &str, value: &[u8]) -> Result<(), KvFailure> {
            self.0.lock().unwrap().insert(key.into(), value.to_vec());
            Ok(())
        }
    }

    #[test]
    fn values_cross_to_the_plugin_and_back_whole() {
        for value in [vec![], vec![0u8, 255, 7], vec![42u8; 100_000]] {
            let (p, n) = leak_value(value.clone());
            assert_eq!(n, value.len());
            // SAFETY: `p` holds `n` bytes until freed below.
            let back = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), n) }.to_vec();
            // SAFETY: a value from leak_value, freed once.
            unsafe { free_value(p) };
            assert_eq!(back, value);
        }
    }

    #[test]
    fn the_check_passes_for_one_node_and_names_a_missing_one() {
        let memory = Arc::new(Memory::default());
        let callbacks = KvCallbacks::new(memory.clone());
        check_store(&callbacks, 0, 1, Duration::from_millis(10)).unwrap();
        assert_eq!(
            memory.try_get("eagertpu/check/node/0").unwrap(),
            b"node 0 of 1"
        );
        let e = check_store(&callbacks, 0, 3, Duration::from_millis(10)).unwrap_err();
        assert!(
            matches!(&e, KvFailure::Timeout(m) if m.contains("node 1 of 3 did not put eagertpu/check/node/1")),
            "{e:?}"
        );
        // A store that panics fails the call; nothing unwinds into the plugin.
        memory.put("eagertpu/check/node/1", b"x").unwrap();
        let mut make_error: PJRT_CallbackError = Some(check_error);
        let key = "eagertpu/check/panics";
        let mut get = PJRT_KeyValueGetCallback_Args {
            struct_size: PJRT_KeyValueGetCallback_Args::STRUCT_SIZE,
            key: key.as_ptr().cast(),
            key_size: key.len(),
            callback_error: &mut make_error,
            user_arg: callbacks.user_arg(),
            ..Default::default()
        };
        // SAFETY: our own args with our user argument.
        let error = unsafe { kv_get((&mut get as *mut PJRT_KeyValueGetCallback_Args).cast()) };
        assert!(!error.is_null());
        let failure = CHECK_FAILURE.with(|f| f.borrow_mut().take());
        assert_eq!(
            failure,
            Some(KvFailure::Unavailable(
                "the key-value store panicked".into()
            ))
        );
    }
}
