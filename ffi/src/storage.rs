//! Storage entry points: PyTorch's allocator registers its `tpu` allocations
//! and kernels read and write views of them. The table, views, `resize_`
//! copies and dtype reinterpretation live in the runtime
//! (`runtime/src/storage.rs`); these only decode the arguments.

use std::ffi::c_char;

use eagertpu::storage;

use crate::handles::{dims, dtype_code, dtype_from, get, put_tensor};
use crate::types::TensorHandle;
use crate::{Failure, at, c_api, put};

c_api! {
    /// Registers an allocation of `nbytes` at `base` on device `device`.
    fn etpu_storage_new(device: i64, base: u64, nbytes: usize) {
        let index = usize::try_from(device).map_err(|_| Failure::invalid(format!("device {device} is negative")))?;
        Ok(storage::register(index, base, nbytes as u64)?)
    }

    /// Forgets the allocation at `base` (its value is freed when unused).
    fn etpu_storage_free(base: u64) {
        Ok(storage::release(base)?)
    }

    /// Number of registered allocations, and their total bytes on `device`
    /// (all devices when `device` is -1).
    fn etpu_storage_stats(device: i64, count: *mut i64, bytes: *mut i64) {
        let (n, b) = storage::stats(usize::try_from(device).ok());
        // SAFETY: `count` and `bytes` are NULL or writable.
        unsafe {
            put(count, n as i64, "count")?;
            put(bytes, b as i64, "bytes")
        }
    }

    /// The view (`address` = storage base + byte offset, `dtype`,
    /// `sizes[0..rank]`, `strides[0..rank]` in elements) as a tensor.
    fn etpu_view_read(
        address: u64,
        dtype: i32,
        sizes: *const i64,
        strides: *const i64,
        rank: usize,
        origin: *const c_char,
        out: *mut TensorHandle,
    ) {
        let dtype = dtype_from(dtype)?;
        // SAFETY: pointers and `origin` as documented.
        unsafe {
            let (sizes, strides) = (dims(sizes, rank, "sizes")?, dims(strides, rank, "strides")?);
            let view = at(origin, || storage::read_view(address, dtype, sizes, strides))?;
            put_tensor(out, view)
        }
    }

    /// Writes `value` into the view, rebuilding the storage's contents;
    /// `value` is converted to the view's dtype and broadcast to its shape.
    fn etpu_view_write(
        address: u64,
        dtype: i32,
        sizes: *const i64,
        strides: *const i64,
        rank: usize,
        value: TensorHandle,
        origin: *const c_char,
    ) {
        let dtype = dtype_from(dtype)?;
        let value = get(value, "value")?;
        // SAFETY: pointers and `origin` as documented.
        unsafe {
            let (sizes, strides) = (dims(sizes, rank, "sizes")?, dims(strides, rank, "strides")?);
            at(origin, || storage::write_view(address, dtype, sizes, strides, value))
        }
    }

    /// Copies the first `nbytes` of the allocation at `src` into the
    /// allocation at `dst` (both base addresses), as its elements: growing or
    /// shrinking a storage (`resize_`). Bytes past the copied ones are zero.
    fn etpu_storage_copy(dst: u64, src: u64, nbytes: usize) {
        Ok(storage::copy_prefix(dst, src, nbytes as u64)?)
    }

    /// The dtype of an allocation's contents (`etpu_dtype`; -1 if never written).
    fn etpu_storage_dtype(address: u64, out: *mut i32) {
        let code = storage::contents_dtype(address)?.map_or(-1, dtype_code);
        // SAFETY: `out` is NULL or writable.
        unsafe { put(out, code, "out") }
    }
}
