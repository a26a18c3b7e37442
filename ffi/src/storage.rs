//! Storages: the memory behind PyTorch tensors on `tpu`.
//!
//! PyTorch's allocator (in the backend) hands out addresses in a reserved,
//! never-mapped range and registers each allocation here. An allocation's
//! contents are a runtime value holding all its elements in order, in the
//! shape it was last written whole with (a flat tensor after a partial
//! write). A kernel reads a tensor as (address, dtype, sizes, strides) -> a
//! view of that value, and writes a result into a tensor (or a view of one)
//! by rebuilding the value. Those are ordinary ops, so they fuse; the common
//! case, a whole contiguous tensor read in the shape it was written with,
//! records no op at all (a PyTorch `a + b` is one runtime op, not four).
//! `data_ptr()` is the base address plus the byte offset, so an address
//! anywhere inside an allocation resolves.
//!
//! The buffer invariant (`runtime/src/value.rs`) holds here without locks on
//! the device: a write through any view records ops and then rebinds the
//! storage to the new value; the old value is only dropped, so an op already
//! launched (or recorded) that reads it keeps its buffer alive until it has
//! completed, and the next read of the storage sees the new value, whose
//! reads wait for the chunk that defines it. `etpu_storage_free` drops the
//! storage's reference the same way. A write holds the storage table's lock
//! from reading the old contents to rebinding, so a read on another thread
//! (autograd's device thread, a second Python thread) sees the old value or
//! the new one, never a buffer being donated.

use std::collections::BTreeMap;
use std::ffi::c_char;
use std::sync::{LazyLock, Mutex, MutexGuard, PoisonError};

use eagertpu::timing::{self, Stage};
use eagertpu::{DType, Device, Tensor};

use crate::handles::{dims, dtype_from, get, put_tensor};
use crate::types::TensorHandle;
use crate::{Failure, FfiResult, at, c_api, put};

struct Storage {
    device: usize,
    nbytes: u64,
    /// The contents: a flat tensor, once something was written (or read).
    value: Option<Tensor>,
}

static STORAGES: LazyLock<Mutex<BTreeMap<u64, Storage>>> = LazyLock::new(Mutex::default);

fn storages() -> MutexGuard<'static, BTreeMap<u64, Storage>> {
    STORAGES.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The allocation holding `address`, and the address's byte offset in it.
fn find(map: &mut BTreeMap<u64, Storage>, address: u64) -> FfiResult<(u64, &mut Storage)> {
    let (base, s) = map.range_mut(..=address).next_back().ok_or_else(|| {
        Failure::invalid(format!("address {address:#x} is not in a tpu allocation"))
    })?;
    let off = address - base;
    if off > s.nbytes || (off == s.nbytes && s.nbytes > 0) {
        return Err(Failure::invalid(format!(
            "address {address:#x} is past the end of the tpu allocation at {base:#x} ({} bytes)",
            s.nbytes
        )));
    }
    Ok((off, s))
}

/// A view's element offset, and the storage's element count, for `dtype`.
fn geometry(byte_offset: u64, nbytes: u64, dtype: DType) -> FfiResult<(i64, i64)> {
    let size = dtype.size_in_bytes() as u64;
    if !byte_offset.is_multiple_of(size) {
        return Err(Failure::invalid(format!(
            "a {dtype} view at byte offset {byte_offset} is not aligned to its {size}-byte elements"
        )));
    }
    Ok(((byte_offset / size) as i64, (nbytes / size) as i64))
}

/// The storage's contents as a `dtype` tensor of `n` elements in some shape
/// (zeros if never written).
fn contents(s: &mut Storage, dtype: DType, n: i64) -> FfiResult<Tensor> {
    match &s.value {
        Some(v) if v.dtype() == dtype => Ok(v.clone()),
        // Another dtype's view of the same bytes (`torch.save` reads every
        // storage as bytes; `Tensor.view(dtype)`): reinterpreted through the
        // host, a sync. Rare enough not to need a device-side bitcast yet.
        Some(v) => {
            let bytes = usize::try_from(v.numel())
                .map_err(|_| Failure::invalid("a storage with a negative size".to_string()))?
                * v.dtype().size_in_bytes();
            let mut host = vec![0u8; bytes];
            v.read_bytes(&mut host)?;
            let wanted = n as usize * dtype.size_in_bytes();
            host.resize(wanted, 0);
            Ok(Device::get(s.device)?.tensor_from_bytes(dtype, &[n], &host)?)
        }
        None => {
            let v = Device::get(s.device)?.zeros(&[n], dtype)?;
            s.value = Some(v.clone());
            Ok(v)
        }
    }
}

fn is_whole(sizes: &[i64], strides: &[i64], offset: i64, n: i64) -> bool {
    let numel: i64 = sizes.iter().product();
    let mut expect = 1;
    let contiguous = sizes.iter().zip(strides).rev().all(|(&size, &stride)| {
        let ok = size == 1 || stride == expect;
        expect *= size;
        ok
    });
    offset == 0 && numel == n && contiguous
}

/// `value` converted to `dtype` and broadcast to `sizes`, as PyTorch writes a
/// result into an `out=` tensor or a view.
fn fit(value: Tensor, dtype: DType, sizes: &[i64]) -> FfiResult<Tensor> {
    let mut v = value;
    if v.dtype() != dtype {
        v = v.to_dtype(dtype)?;
    }
    if v.shape() != sizes {
        v = v.broadcast_to(sizes).map_err(|e| {
            Failure::invalid(format!(
                "writing a {} value into a {dtype}{sizes:?} view: {}",
                v.ty(),
                e
            ))
        })?;
    }
    Ok(v)
}

/// Reads the view arguments.
///
/// # Safety
/// `sizes` and `strides` must be NULL or valid for `rank` reads.
unsafe fn view_args<'a>(
    sizes: *const i64,
    strides: *const i64,
    rank: usize,
) -> FfiResult<(&'a [i64], &'a [i64])> {
    // SAFETY: as the caller guarantees.
    unsafe { Ok((dims(sizes, rank, "sizes")?, dims(strides, rank, "strides")?)) }
}

/// The view (`address` = storage base + byte offset, `dtype`, `sizes`,
/// `strides` in elements) as a tensor. Ops it records take the origin of the
/// enclosing `at`.
pub(crate) fn read_view(
    address: u64,
    dtype: DType,
    sizes: &[i64],
    strides: &[i64],
) -> FfiResult<Tensor> {
    timing::timed(Stage::Views, || {
        let mut map = storages();
        let (byte_offset, s) = find(&mut map, address)?;
        let (offset, n) = geometry(byte_offset, s.nbytes, dtype)?;
        let all = contents(s, dtype, n)?;
        drop(map);
        if is_whole(sizes, strides, offset, n) {
            // No op when the shape is the one the storage was written with.
            if all.shape() == sizes {
                return Ok(all);
            }
            Ok(all.reshape(sizes)?)
        } else {
            Ok(all.reshape(&[n])?.as_strided(sizes, strides, offset)?)
        }
    })
}

/// Writes `value` (converted to `dtype`, broadcast to `sizes`) into the
/// view, rebuilding its storage's contents. Ops it records take the origin
/// of the enclosing `at`.
pub(crate) fn write_view(
    address: u64,
    dtype: DType,
    sizes: &[i64],
    strides: &[i64],
    value: Tensor,
) -> FfiResult {
    timing::timed(Stage::Views, || {
        let value = fit(value, dtype, sizes)?;
        let mut map = storages();
        let (byte_offset, s) = find(&mut map, address)?;
        let (offset, n) = geometry(byte_offset, s.nbytes, dtype)?;
        let new = if is_whole(sizes, strides, offset, n) {
            // The whole storage, in order: its new contents are the value, kept
            // in its shape so that the next read of it is no op.
            value
        } else {
            let all = contents(s, dtype, n)?;
            all.reshape(&[n])?
                .as_strided_scatter(&value, sizes, strides, offset)?
        };
        s.value = Some(new);
        Ok(())
    })
}

c_api! {
    /// Registers an allocation of `nbytes` at `base` on device `device`.
    fn etpu_storage_new(device: i64, base: u64, nbytes: usize) {
        let index = usize::try_from(device).map_err(|_| Failure::invalid(format!("device {device} is negative")))?;
        Device::get(index)?;
        let mut map = storages();
        let end = base + nbytes as u64;
        let overlaps = map
            .range(..end.max(base + 1))
            .next_back()
            .is_some_and(|(b, s)| b + s.nbytes > base || *b == base);
        if overlaps {
            return Err(Failure::invalid(format!("allocation {base:#x} (+{nbytes}) overlaps a registered one")));
        }
        map.insert(base, Storage {
            device: index,
            nbytes: nbytes as u64,
            value: None,
        });
        Ok(())
    }

    /// Forgets the allocation at `base` (its value is freed when unused).
    fn etpu_storage_free(base: u64) {
        storages()
            .remove(&base)
            .map(|_| ())
            .ok_or_else(|| Failure::invalid(format!("no tpu allocation at {base:#x} (freed twice?)")))
    }

    /// Number of registered allocations, and their total bytes on `device`
    /// (all devices when `device` is -1).
    fn etpu_storage_stats(device: i64, count: *mut i64, bytes: *mut i64) {
        let map = storages();
        let on = |s: &&Storage| device < 0 || s.device as i64 == device;
        let n = map.values().filter(on).count() as i64;
        let b: u64 = map.values().filter(on).map(|s| s.nbytes).sum();
        // SAFETY: `count` and `bytes` are NULL or writable.
        unsafe {
            put(count, n, "count")?;
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
            let (sizes, strides) = view_args(sizes, strides, rank)?;
            let view = at(origin, || read_view(address, dtype, sizes, strides))?;
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
            let (sizes, strides) = view_args(sizes, strides, rank)?;
            at(origin, || write_view(address, dtype, sizes, strides, value))
        }
    }

    /// Copies the first `nbytes` of the allocation at `src` into the
    /// allocation at `dst` (both base addresses), as its elements: growing or
    /// shrinking a storage (`resize_`). Bytes past the copied ones are zero.
    fn etpu_storage_copy(dst: u64, src: u64, nbytes: usize) {
        let mut map = storages();
        let source = match map.get(&src) {
            Some(s) => s.value.clone(),
            None => return Err(Failure::invalid(format!("no tpu allocation at {src:#x}"))),
        };
        let d = map
            .get_mut(&dst)
            .ok_or_else(|| Failure::invalid(format!("no tpu allocation at {dst:#x}")))?;
        // Never written: zeros, which the destination already reads as.
        let Some(v) = source else { return Ok(()) };
        let dtype = v.dtype();
        let size = dtype.size_in_bytes();
        if !nbytes.is_multiple_of(size) || !(d.nbytes as usize).is_multiple_of(size) {
            return Err(Failure::invalid(format!(
                "copying {nbytes} bytes of a {dtype} storage into one of {} bytes: not whole {size}-byte elements",
                d.nbytes
            )));
        }
        let (n, total) = ((nbytes / size) as i64, (d.nbytes as usize / size) as i64);
        let v = v.reshape(&[v.numel()])?;
        let part = if n == v.numel() { v } else { v.slice(0, 0, n, 1)? };
        d.value = Some(if total == n {
            part
        } else {
            let rest = Device::get(d.device)?.zeros(&[total - n], dtype)?;
            Tensor::cat(&[&part, &rest], 0)?
        });
        Ok(())
    }

    /// The dtype of an allocation's contents (`etpu_dtype`; -1 if never written).
    fn etpu_storage_dtype(address: u64, out: *mut i32) {
        let mut map = storages();
        let (_, s) = find(&mut map, address)?;
        let code = s.value.as_ref().map_or(-1, |v| crate::handles::dtype_code(v.dtype()));
        // SAFETY: `out` is NULL or writable.
        unsafe { put(out, code, "out") }
    }
}
