//! A foreign key-value store (PyTorch's c10d store) for PJRT's distributed
//! client: the caller's three functions become the runtime's
//! `KeyValueStore`, which `PJRT_Client_Create` gets (issue 11).

use std::ffi::{c_char, c_void};
use std::sync::Arc;
use std::time::Duration;

use eagertpu::{KeyValueStore, KvFailure};

use crate::types::{KvGet, KvGetFn, KvPut, KvPutFn, KvTryGet, KvTryGetFn};
use crate::{Failure, c_api};

/// `etpu_kv_status`.
const KV_OK: i32 = 0;
const KV_NOT_FOUND: i32 = 1;
const KV_TIMEOUT: i32 = 2;

/// The caller's store: its functions and their user argument, which the
/// caller keeps alive for the process.
struct ForeignStore {
    get: KvGet,
    try_get: KvTryGet,
    put: KvPut,
    user: usize,
}

/// Copies delivered bytes into the `Vec<u8>` at `sink`.
unsafe extern "C" fn deliver(sink: *mut c_void, bytes: *const c_char, size: usize) {
    if sink.is_null() || (bytes.is_null() && size > 0) {
        return;
    }
    // SAFETY: `sink` is the Vec<u8> a ForeignStore call passed, alive for the
    // call; `size` readable bytes at `bytes`.
    unsafe {
        let out = &mut *sink.cast::<Vec<u8>>();
        out.clear();
        if size > 0 {
            out.extend_from_slice(std::slice::from_raw_parts(bytes.cast::<u8>(), size));
        }
    }
}

/// A call's outcome: the delivered bytes, or the failure they describe.
fn outcome(status: i32, bytes: Vec<u8>, key: &str) -> Result<Vec<u8>, KvFailure> {
    let message = || format!("{key}: {}", String::from_utf8_lossy(&bytes));
    match status {
        KV_OK => Ok(bytes),
        KV_NOT_FOUND => Err(KvFailure::NotFound(message())),
        KV_TIMEOUT => Err(KvFailure::Timeout(message())),
        _ => Err(KvFailure::Unavailable(message())),
    }
}

impl KeyValueStore for ForeignStore {
    fn get(&self, key: &str, timeout: Duration) -> Result<Vec<u8>, KvFailure> {
        let mut bytes: Vec<u8> = vec![];
        let ms = i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX);
        // SAFETY: the caller's function and user argument; key and sink valid
        // for the call.
        let status = unsafe {
            (self.get)(
                self.user as *mut c_void,
                key.as_ptr().cast(),
                key.len(),
                ms,
                (&mut bytes as *mut Vec<u8>).cast(),
                deliver,
            )
        };
        outcome(status, bytes, key)
    }

    fn try_get(&self, key: &str) -> Result<Vec<u8>, KvFailure> {
        let mut bytes: Vec<u8> = vec![];
        // SAFETY: as in `get`.
        let status = unsafe {
            (self.try_get)(
                self.user as *mut c_void,
                key.as_ptr().cast(),
                key.len(),
                (&mut bytes as *mut Vec<u8>).cast(),
                deliver,
            )
        };
        outcome(status, bytes, key)
    }

    fn put(&self, key: &str, value: &[u8]) -> Result<(), KvFailure> {
        let mut bytes: Vec<u8> = vec![];
        // SAFETY: as in `get`; the value valid for the call.
        let status = unsafe {
            (self.put)(
                self.user as *mut c_void,
                key.as_ptr().cast(),
                key.len(),
                value.as_ptr().cast(),
                value.len(),
                (&mut bytes as *mut Vec<u8>).cast(),
                deliver,
            )
        };
        outcome(status, bytes, key).map(drop)
    }
}

c_api! {
    /// Makes this process node `node_id` of `num_nodes`, its plugin's
    /// client finding the others through the caller's store (`get`,
    /// `try_get`, `put` with `user`, kept alive by the caller for the
    /// process). Before the runtime starts (the first op), once.
    fn etpu_set_distributed_store(node_id: i64, num_nodes: i64, get: KvGetFn, try_get: KvTryGetFn, put: KvPutFn, user: *mut c_void) {
        let (Some(get), Some(try_get), Some(put)) = (get, try_get, put) else {
            return Err(Failure::invalid("distributed store: get, try_get and put must not be NULL"));
        };
        let index = |n: i64, what: &str| {
            usize::try_from(n).map_err(|_| Failure::invalid(format!("distributed store: {what} {n} is negative")))
        };
        let store = ForeignStore { get, try_get, put, user: user as usize };
        Ok(eagertpu::set_distributed_store(Arc::new(store), index(node_id, "node")?, index(num_nodes, "node count")?)?)
    }

    /// Calls the store's functions as a plugin's distributed client does
    /// when it starts: this node puts its key, then reads every node's within
    /// `timeout_ms`. A node missing is an error naming it.
    fn etpu_check_distributed_store(timeout_ms: i64) {
        let ms = u64::try_from(timeout_ms).map_err(|_| Failure::invalid(format!("timeout {timeout_ms} ms is negative")))?;
        Ok(eagertpu::check_distributed_store(Duration::from_millis(ms))?)
    }
}
