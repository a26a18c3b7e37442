//! Storage entry points: PyTorch's allocator registers its `tpu` allocations
//! (keeping the id each gets) and kernels read and write views of them. The
//! table, views, `resize_` copies and dtype reinterpretation live in the
//! runtime (`runtime/src/storage.rs`); these only decode the arguments.

use std::ffi::c_char;

use eagertpu::storage::{self, StorageId};

use crate::handles::{device_index, dims, dtype_code, dtype_from, get, put_tensor};
use crate::types::{MemoryCounts, StorageHandle, TensorHandle};
use crate::{Failure, at, c_api, put};

/// The runtime's id for `h`.
pub(crate) fn id(h: StorageHandle) -> StorageId {
    StorageId(h.0)
}

fn signed(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

c_api! {
    /// Device `device`'s allocation statistics and, where the plugin keeps
    /// them, its own memory statistics (-1 where it does not).
    fn etpu_memory_usage(device: i64, out: *mut MemoryCounts) {
        let d = crate::handles::device(device)?;
        let u = storage::usage(d.index());
        let reported = d.reported_memory()?;
        let device_bytes = |f: fn(&eagertpu::MemoryStats) -> Option<i64>| reported.as_ref().and_then(f).unwrap_or(-1);
        let usage = MemoryCounts {
            allocations: signed(u.allocations),
            bytes: signed(u.bytes),
            peak_allocations: signed(u.peak_allocations),
            peak_bytes: signed(u.peak_bytes),
            allocated_count: signed(u.allocated_count),
            allocated_bytes: signed(u.allocated_bytes),
            freed_count: signed(u.freed_count),
            freed_bytes: signed(u.freed_bytes),
            device_bytes_in_use: device_bytes(|m| Some(m.bytes_in_use)),
            device_peak_bytes_in_use: device_bytes(|m| m.peak_bytes_in_use),
            device_bytes_limit: device_bytes(|m| m.bytes_limit),
        };
        // SAFETY: `out` is NULL or writable.
        unsafe { put(out, usage, "out") }
    }

    /// Resets device `device`'s statistics: `what` 1, the peaks (to what is
    /// live now); 2, the allocated and freed counts.
    fn etpu_memory_reset(device: i64, what: i32) {
        let d = crate::handles::device(device)?;
        match what {
            1 => storage::reset_peak(d.index()),
            2 => storage::reset_accumulated(d.index()),
            _ => return Err(Failure::invalid(format!("etpu_memory_reset: what is {what}, expected 1 (peaks) or 2 (accumulated counts)"))),
        }
        Ok(())
    }

    /// Device `device`'s kind as the plugin names it (`cpu`, `TPU v5 lite`),
    /// written as `eagertpu_metrics_report` writes its text.
    fn etpu_device_kind(device: i64, buf: *mut c_char, capacity: usize, length: *mut usize) {
        let d = crate::handles::device(device)?;
        crate::write_text(d.kind(), buf, capacity, length)
    }

    /// The plugin's platform name (`cpu`, `tpu`, `cuda`), written as
    /// `etpu_device_kind`.
    fn etpu_platform_name(buf: *mut c_char, capacity: usize, length: *mut usize) {
        let d = crate::handles::device(0)?;
        crate::write_text(&d.platform()?, buf, capacity, length)
    }

    /// Registers an allocation of `nbytes` on device `device`; writes its id
    /// to `out`.
    fn etpu_storage_new(device: i64, nbytes: usize, out: *mut StorageHandle) {
        let index = device_index(device)?;
        let StorageId(n) = storage::register(index, nbytes as u64)?;
        // SAFETY: `out` is NULL or writable.
        unsafe { put(out, StorageHandle(n), "out") }
    }

    /// Registers a new allocation on `value`'s device holding `value` as a
    /// contiguous `dtype` array of `sizes[0..rank]` (converted and broadcast
    /// to it), and writes its id to `out`: a kernel's fresh result in one
    /// call, with no allocation made before it and no view written. Nothing
    /// is allocated when it fails; `value` stays the caller's.
    fn etpu_storage_holding(
        value: TensorHandle,
        dtype: i32,
        sizes: *const i64,
        rank: usize,
        origin: *const c_char,
        out: *mut StorageHandle,
    ) {
        let dtype = dtype_from(dtype)?;
        let value = get(value, "value")?;
        // SAFETY: `sizes`, `origin` and `out` as documented.
        unsafe {
            let sizes = dims(sizes, rank, "sizes")?;
            let device = value.device().index();
            let StorageId(n) = at(origin, || storage::register_holding(device, dtype, sizes, value))?;
            put(out, StorageHandle(n), "out")
        }
    }

    /// Forgets allocation `storage` (its value is freed when unused).
    fn etpu_storage_free(storage: StorageHandle) {
        Ok(storage::release(id(storage))?)
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

    /// The view of `storage` at `byte_offset` (`dtype`, `sizes[0..rank]`,
    /// `strides[0..rank]` in elements) as a tensor.
    fn etpu_view_read(
        storage: StorageHandle,
        byte_offset: u64,
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
            let view = at(origin, || storage::read_view(id(storage), byte_offset, dtype, sizes, strides))?;
            put_tensor(out, view)
        }
    }

    /// Allocation `storage`'s contents as `dtype` elements, as they are held
    /// (the shape they were last written with): what every view of it is
    /// read from.
    fn etpu_storage_read(storage: StorageHandle, dtype: i32, out: *mut TensorHandle) {
        let dtype = dtype_from(dtype)?;
        let contents = storage::read_contents(id(storage), dtype)?;
        // SAFETY: `out` is NULL or writable.
        unsafe { put_tensor(out, contents) }
    }

    /// Writes `value` into the view, rebuilding the storage's contents;
    /// `value` is converted to the view's dtype and broadcast to its shape.
    fn etpu_view_write(
        storage: StorageHandle,
        byte_offset: u64,
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
            at(origin, || storage::write_view(id(storage), byte_offset, dtype, sizes, strides, value))
        }
    }

    /// Copies the first `nbytes` of allocation `src` into allocation `dst`,
    /// as its elements: growing or shrinking a storage (`resize_`). Bytes
    /// past the copied ones are zero.
    fn etpu_storage_copy(dst: StorageHandle, src: StorageHandle, nbytes: usize) {
        Ok(storage::copy_prefix(id(dst), id(src), nbytes as u64)?)
    }

    /// The dtype of an allocation's contents (`etpu_dtype`; -1 if never written).
    fn etpu_storage_dtype(storage: StorageHandle, out: *mut i32) {
        let code = storage::contents_dtype(id(storage))?.map_or(-1, dtype_code);
        // SAFETY: `out` is NULL or writable.
        unsafe { put(out, code, "out") }
    }
}

#[cfg(test)]
mod tests {
    use eagertpu::DType;

    use super::*;
    use crate::pointwise::tests::{allocated, contents, f32_tensor, free};
    use crate::{ETPU_BAD_HANDLE, ETPU_INVALID_ARGUMENT, ETPU_OK, last_error};

    const ORIGIN: *const c_char = c"storage.rs:test".as_ptr();

    /// `value` held by a new allocation of `dtype` and `sizes` (its id, or the status).
    fn holding(value: TensorHandle, dtype: DType, sizes: &[i64]) -> Result<StorageHandle, i32> {
        let mut storage = StorageHandle(0);
        // SAFETY: `sizes` is valid for its length; `storage` is writable.
        let status = unsafe {
            etpu_storage_holding(
                value,
                dtype_code(dtype),
                sizes.as_ptr(),
                sizes.len(),
                ORIGIN,
                &mut storage,
            )
        };
        allocated(status, storage)
    }

    #[test]
    fn a_value_is_held_by_a_new_allocation_converted_and_broadcast() {
        let v = f32_tensor(&[1.5, -2.0], &[2]);
        let same = holding(v, DType::F32, &[2]).unwrap();
        assert_eq!(contents(same, 2), [1.5, -2.0]);
        let broadcast = holding(v, DType::F32, &[3, 2]).unwrap();
        assert_eq!(contents(broadcast, 6), [1.5, -2.0, 1.5, -2.0, 1.5, -2.0]);
        // Converted: an f64 allocation holds the value's f64s (read back as f32 here).
        let wider = holding(v, DType::F64, &[2]).unwrap();
        let mut dtype = 0;
        // SAFETY: `dtype` is writable.
        assert_eq!(unsafe { etpu_storage_dtype(wider, &mut dtype) }, ETPU_OK);
        assert_eq!(dtype, dtype_code(DType::F64));
        // The handle is still the caller's: it reads the same after all three.
        let again = holding(v, DType::F32, &[2]).unwrap();
        assert_eq!(contents(again, 2), [1.5, -2.0]);
        free(&[same, broadcast, wider, again], &[v]);
    }

    #[test]
    fn a_refused_value_allocates_nothing_and_the_next_call_works() {
        let v = f32_tensor(&[1.0, 2.0, 3.0], &[3]);
        assert_eq!(holding(v, DType::F32, &[2]), Err(ETPU_INVALID_ARGUMENT));
        assert!(last_error().contains("[2]"), "{}", last_error());
        assert_eq!(holding(v, DType::F32, &[-1]), Err(ETPU_INVALID_ARGUMENT));
        assert!(last_error().contains("negative"), "{}", last_error());
        assert_eq!(
            holding(TensorHandle(0), DType::F32, &[3]),
            Err(ETPU_BAD_HANDLE)
        );
        let s = holding(v, DType::F32, &[3]).unwrap();
        assert_eq!(contents(s, 3), [1.0, 2.0, 3.0]);
        free(&[s], &[v]);
    }
}
