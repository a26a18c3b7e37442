//! The tensor handle table and the entry points that make, read and free
//! tensors. A handle is a number, never a pointer: a stale or forged handle
//! is looked up and refused.

use std::ffi::{c_char, c_void};
use std::sync::{LazyLock, Mutex, PoisonError};

use eagertpu::internals::Slots;
use eagertpu::{DType, Device, Tensor};

use crate::types::TensorHandle;
use crate::{Failure, FfiResult, at, c_api, put};

/// Live tensors by handle (a `Slots` key: a stale handle never finds the
/// tensor that took its slot).
static TABLE: LazyLock<Mutex<Slots<Tensor>>> = LazyLock::new(Mutex::default);

fn table() -> std::sync::MutexGuard<'static, Slots<Tensor>> {
    TABLE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Registers a tensor; its new handle.
pub(crate) fn insert(t: Tensor) -> TensorHandle {
    TensorHandle(table().insert(t))
}

/// The tensor behind `h` (`what` names the argument in errors).
pub(crate) fn get(h: TensorHandle, what: &str) -> FfiResult<Tensor> {
    if h.0 == 0 {
        return Err(Failure::bad_handle(format!(
            "{what} is a null tensor handle"
        )));
    }
    let found = table().get_mut(h.0).map(|t| t.clone());
    found.ok_or_else(|| {
        Failure::bad_handle(format!(
            "{what} is tensor handle {}, which is unknown or was already freed",
            h.0
        ))
    })
}

/// The tensor behind `h`, or none for handle 0 (an optional argument).
pub(crate) fn get_optional(h: TensorHandle, what: &str) -> FfiResult<Option<Tensor>> {
    if h.0 == 0 {
        return Ok(None);
    }
    get(h, what).map(Some)
}

/// Registers `t` and writes its handle to `out`.
///
/// # Safety
/// `out` must be NULL or writable.
pub(crate) unsafe fn put_tensor(out: *mut TensorHandle, t: Tensor) -> FfiResult {
    if out.is_null() {
        return Err(Failure::invalid("out is NULL"));
    }
    // SAFETY: non-null and writable (the caller's contract).
    unsafe { put(out, insert(t), "out") }
}

/// Writes a (values, indices) result: `values` must not be NULL; `indices`
/// may be, when the caller does not want them.
///
/// # Safety
/// Each pointer must be NULL or writable.
pub(crate) unsafe fn put_pair(
    values: *mut TensorHandle,
    indices: *mut TensorHandle,
    (v, i): (Tensor, Tensor),
) -> FfiResult {
    if values.is_null() {
        return Err(Failure::invalid("values is NULL"));
    }
    // SAFETY: as the caller guarantees.
    unsafe {
        put_tensor(values, v)?;
        if !indices.is_null() {
            put_tensor(indices, i)?;
        }
    }
    Ok(())
}

/// The dtype numbered `code` in `etpu_dtype`.
pub(crate) fn dtype_from(code: i32) -> FfiResult<DType> {
    usize::try_from(code)
        .ok()
        .and_then(|i| DType::ALL.get(i).copied())
        .ok_or_else(|| {
            Failure::invalid(format!(
                "dtype {code} is not an etpu_dtype (0..={})",
                DType::ALL.len() - 1
            ))
        })
}

/// The `etpu_dtype` number of `d`.
pub(crate) fn dtype_code(d: DType) -> i32 {
    DType::ALL.iter().position(|x| *x == d).unwrap_or(0) as i32
}

/// Reads `len` dims (NULL is fine when `len` is 0).
///
/// # Safety
/// `p` must be NULL or valid for `len` reads.
pub(crate) unsafe fn dims<'a>(p: *const i64, len: usize, what: &str) -> FfiResult<&'a [i64]> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Failure::invalid(format!(
            "{what} is NULL but its length is {len}"
        )));
    }
    // SAFETY: non-null and valid for `len` elements (the caller's contract).
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// The `n` tensors of a handle list (`what` names it in errors).
///
/// # Safety
/// `p` must be NULL or valid for `n` reads.
pub(crate) unsafe fn tensors(
    p: *const TensorHandle,
    n: usize,
    what: &str,
) -> FfiResult<Vec<Tensor>> {
    if n == 0 {
        return Ok(vec![]);
    }
    if p.is_null() {
        return Err(Failure::invalid(format!(
            "{what} is NULL but its length is {n}"
        )));
    }
    // SAFETY: non-null and valid for `n` handles (the caller's contract).
    let handles = unsafe { std::slice::from_raw_parts(p, n) };
    handles
        .iter()
        .enumerate()
        .map(|(i, h)| get(*h, &format!("{what}[{i}]")))
        .collect()
}

/// Number of live handles (for leak checks).
pub fn live_handles() -> usize {
    table().len()
}

c_api! {
    /// A tensor of `dtype` and shape `dims[0..rank]` from `nbytes` bytes at
    /// `data` (row-major, the dtype's size per element; bools 0 or 1), on
    /// device `device`; the copy is blamed on `origin` (the caller's
    /// `file:line`; may be NULL) in profiler traces.
    fn etpu_tensor_from_host(
        device: i64,
        dtype: i32,
        dims_ptr: *const i64,
        rank: usize,
        data: *const c_void,
        nbytes: usize,
        origin: *const c_char,
        out: *mut TensorHandle,
    ) {
        let dtype = dtype_from(dtype)?;
        // SAFETY: `dims_ptr` is NULL or valid for `rank` reads.
        let shape = unsafe { dims(dims_ptr, rank, "dims")? };
        if data.is_null() && nbytes > 0 {
            return Err(Failure::invalid("data is NULL"));
        }
        let bytes: &[u8] = if nbytes == 0 {
            &[]
        } else {
            // SAFETY: `data` is valid for `nbytes` reads (the caller's contract).
            unsafe { std::slice::from_raw_parts(data.cast::<u8>(), nbytes) }
        };
        let index = device_index(device)?;
        // SAFETY: `origin` is NULL or NUL-terminated; `out` NULL or writable.
        unsafe {
            let t = at(origin, || Device::get(index)?.tensor_from_bytes(dtype, shape, bytes))?;
            put_tensor(out, t)
        }
    }

    /// Copies the tensor's elements to `dst` (exactly its size in bytes),
    /// waiting for it; a failure of the op that computed it is reported here.
    /// A host sync, counted at `origin` (the caller's `file:line`, may be NULL).
    fn etpu_tensor_to_host(t: TensorHandle, dst: *mut c_void, nbytes: usize, origin: *const c_char) {
        let tensor = get(t, "t")?;
        if dst.is_null() && nbytes > 0 {
            return Err(Failure::invalid("dst is NULL"));
        }
        let bytes: &mut [u8] = if nbytes == 0 {
            &mut []
        } else {
            // SAFETY: `dst` is valid for `nbytes` writes (the caller's contract).
            unsafe { std::slice::from_raw_parts_mut(dst.cast::<u8>(), nbytes) }
        };
        // SAFETY: `origin` is NULL or NUL-terminated (the caller's contract).
        unsafe { at(origin, || tensor.read_bytes(bytes)) }
    }

    /// Releases a handle (the value is freed when nothing else needs it).
    fn etpu_tensor_free(t: TensorHandle) {
        if t.0 == 0 {
            return Err(Failure::bad_handle("t is a null tensor handle"));
        }
        // The tensor drops after the table's lock is released.
        let removed = table().remove(t.0);
        match removed {
            Some(_) => Ok(()),
            None => Err(Failure::bad_handle(format!(
                "t is tensor handle {}, which is unknown or was already freed",
                t.0
            ))),
        }
    }

    /// A second handle to the same tensor.
    fn etpu_tensor_clone(t: TensorHandle, out: *mut TensorHandle) {
        let tensor = get(t, "t")?;
        // SAFETY: `out` is NULL or writable.
        unsafe { put_tensor(out, tensor) }
    }

    /// The tensor's dtype (`etpu_dtype`).
    fn etpu_tensor_dtype(t: TensorHandle, out: *mut i32) {
        let tensor = get(t, "t")?;
        // SAFETY: `out` is NULL or writable.
        unsafe { put(out, dtype_code(tensor.dtype()), "out") }
    }

    /// The tensor's number of dims.
    fn etpu_tensor_rank(t: TensorHandle, out: *mut usize) {
        let tensor = get(t, "t")?;
        // SAFETY: `out` is NULL or writable.
        unsafe { put(out, tensor.rank(), "out") }
    }

    /// Writes the tensor's dims to `out[0..capacity]` (capacity >= rank).
    fn etpu_tensor_dims(t: TensorHandle, out: *mut i64, capacity: usize) {
        let tensor = get(t, "t")?;
        let shape = tensor.shape();
        if capacity < shape.len() {
            return Err(Failure::invalid(format!(
                "capacity {capacity} is smaller than the rank {}",
                shape.len()
            )));
        }
        if shape.is_empty() {
            return Ok(());
        }
        if out.is_null() {
            return Err(Failure::invalid("out is NULL"));
        }
        // SAFETY: `out` is valid for `capacity >= shape.len()` writes.
        unsafe { std::ptr::copy_nonoverlapping(shape.as_ptr(), out, shape.len()) };
        Ok(())
    }

    /// The index of the tensor's device.
    fn etpu_tensor_device(t: TensorHandle, out: *mut i64) {
        let tensor = get(t, "t")?;
        // SAFETY: `out` is NULL or writable.
        unsafe { put(out, tensor.device().index() as i64, "out") }
    }

    /// Waits until the tensor is computed; its op's error if it failed.
    fn etpu_tensor_sync(t: TensorHandle) {
        get(t, "t")?.sync()?;
        Ok(())
    }

    /// Number of live tensor handles.
    fn etpu_live_tensors(out: *mut i64) {
        // SAFETY: `out` is NULL or writable.
        unsafe { put(out, live_handles() as i64, "out") }
    }
}

/// The device numbered `index`.
pub(crate) fn device(index: i64) -> FfiResult<Device> {
    Ok(Device::get(device_index(index)?)?)
}

/// A device index as the C ABI passes it, refused when negative.
pub(crate) fn device_index(index: i64) -> FfiResult<usize> {
    usize::try_from(index).map_err(|_| Failure::invalid(format!("device {index} is negative")))
}

/// Writes each result to its pointer (an absent one as handle 0), after
/// checking that no pointer is NULL, so that nothing is registered when the
/// call fails.
///
/// # Safety
/// Each pointer must be NULL or writable.
pub(crate) unsafe fn put_all(
    results: &mut [(*mut TensorHandle, Option<Tensor>, &str)],
) -> FfiResult {
    if let Some((_, _, what)) = results.iter().find(|(p, _, _)| p.is_null()) {
        return Err(Failure::invalid(format!("{what} is NULL")));
    }
    for (p, t, what) in results.iter_mut() {
        // SAFETY: non-null and writable (checked above; the caller's contract).
        unsafe {
            match t.take() {
                Some(t) => put_tensor(*p, t)?,
                None => put(*p, TensorHandle(0), what)?,
            }
        }
    }
    Ok(())
}
