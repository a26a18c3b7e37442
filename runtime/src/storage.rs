//! Storages: the memory behind a foreign framework's tensors (PyTorch's on
//! `tpu`), addressed as PyTorch addresses them.
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
//! The buffer invariant (`value.rs`) holds here without locks on the device:
//! a write through any view records ops and then rebinds the storage to the
//! new value; the old value is only dropped, so an op already launched (or
//! recorded) that reads it keeps its buffer alive until it has completed, and
//! the next read of the storage sees the new value, whose reads wait for the
//! chunk that defines it. [`release`] drops the storage's reference the same
//! way. A write holds the table's lock from reading the old contents to
//! rebinding, so a read on another thread (autograd's device thread, a second
//! Python thread) sees the old value or the new one, never a buffer being
//! donated.
//!
//! Reading a storage as another dtype than it holds (`Tensor.view(dtype)`,
//! `torch.save` reading every storage as bytes) reinterprets its bits on the
//! device (`bitcast_convert`): no host round trip, no sync.

use std::collections::BTreeMap;
use std::sync::{LazyLock, Mutex, MutexGuard, PoisonError};

use fusion::DType;

use crate::error::{Error, Result};
use crate::tensor::{Device, Tensor};
use crate::timing::{Stage, timed};

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

fn invalid(message: String) -> Error {
    Error::Storage(message)
}

/// The allocation holding `address`, and the address's byte offset in it.
fn find(map: &mut BTreeMap<u64, Storage>, address: u64) -> Result<(u64, &mut Storage)> {
    let (base, s) = map
        .range_mut(..=address)
        .next_back()
        .ok_or_else(|| invalid(format!("address {address:#x} is not in a tpu allocation")))?;
    let off = address - base;
    if off > s.nbytes || (off == s.nbytes && s.nbytes > 0) {
        return Err(invalid(format!(
            "address {address:#x} is past the end of the tpu allocation at {base:#x} ({} bytes)",
            s.nbytes
        )));
    }
    Ok((off, s))
}

/// A view's element offset, and the storage's element count, for `dtype`.
fn geometry(byte_offset: u64, nbytes: u64, dtype: DType) -> Result<(i64, i64)> {
    let size = dtype.size_in_bytes() as u64;
    if !byte_offset.is_multiple_of(size) {
        return Err(invalid(format!(
            "a {dtype} view at byte offset {byte_offset} is not aligned to its {size}-byte elements"
        )));
    }
    Ok(((byte_offset / size) as i64, (nbytes / size) as i64))
}

/// `value`'s bytes as `n` elements of `dtype`, on the device: the bytes in
/// order, cut or padded with zeros to `n` elements' worth. A bool is one byte,
/// 0 or 1, as PyTorch stores it.
fn reinterpret(value: &Tensor, dtype: DType, n: i64) -> Result<Tensor> {
    let flat = value.reshape(&[value.numel()])?;
    let bytes = match value.dtype() {
        DType::U8 => flat,
        DType::Bool => flat.to_dtype(DType::U8)?,
        d if d.size_in_bytes() == 1 => flat.bitcast(DType::U8)?,
        _ => {
            let b = flat.bitcast(DType::U8)?;
            b.reshape(&[b.numel()])?
        }
    };
    let wanted = n * dtype.size_in_bytes() as i64;
    let have = bytes.numel();
    let bytes = if have > wanted {
        bytes.slice(0, 0, wanted, 1)?
    } else if have < wanted {
        bytes.pad(&[0, wanted - have], 0)?
    } else {
        bytes
    };
    match dtype {
        DType::U8 => Ok(bytes),
        DType::Bool => bytes.ne(0),
        d if d.size_in_bytes() == 1 => bytes.bitcast(d),
        d => bytes.reshape(&[n, d.size_in_bytes() as i64])?.bitcast(d),
    }
}

/// The storage's contents as a `dtype` tensor of `n` elements in some shape
/// (zeros if never written).
fn contents(s: &mut Storage, dtype: DType, n: i64) -> Result<Tensor> {
    match &s.value {
        Some(v) if v.dtype() == dtype => Ok(v.clone()),
        // Another dtype's view of the same bytes.
        Some(v) => reinterpret(v, dtype, n),
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
fn fit(value: Tensor, dtype: DType, sizes: &[i64]) -> Result<Tensor> {
    let mut v = value;
    if v.dtype() != dtype {
        v = v.to_dtype(dtype)?;
    }
    if v.shape() != sizes {
        v = v.broadcast_to(sizes).map_err(|e| {
            invalid(format!(
                "writing a {} value into a {dtype}{sizes:?} view: {e}",
                v.ty()
            ))
        })?;
    }
    Ok(v)
}

/// Registers an allocation of `nbytes` at `base` on device `device`.
pub fn register(device: usize, base: u64, nbytes: u64) -> Result<()> {
    Device::get(device)?;
    let mut map = storages();
    let end = base + nbytes;
    let overlaps = map
        .range(..end.max(base + 1))
        .next_back()
        .is_some_and(|(b, s)| b + s.nbytes > base || *b == base);
    if overlaps {
        return Err(invalid(format!(
            "allocation {base:#x} (+{nbytes}) overlaps a registered one"
        )));
    }
    map.insert(
        base,
        Storage {
            device,
            nbytes,
            value: None,
        },
    );
    Ok(())
}

/// Forgets the allocation at `base` (its value is freed when unused).
pub fn release(base: u64) -> Result<()> {
    storages()
        .remove(&base)
        .map(|_| ())
        .ok_or_else(|| invalid(format!("no tpu allocation at {base:#x} (freed twice?)")))
}

/// The number of registered allocations and their total bytes, on `device`
/// (all devices when `None`).
pub fn stats(device: Option<usize>) -> (u64, u64) {
    let map = storages();
    let on = |s: &&Storage| device.is_none_or(|d| s.device == d);
    let count = map.values().filter(on).count() as u64;
    let bytes = map.values().filter(on).map(|s| s.nbytes).sum();
    (count, bytes)
}

/// The view (`address` = storage base + byte offset, `dtype`, `sizes`,
/// `strides` in elements) as a tensor.
pub fn read_view(address: u64, dtype: DType, sizes: &[i64], strides: &[i64]) -> Result<Tensor> {
    timed(Stage::Views, || {
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
            all.reshape(sizes)
        } else {
            all.reshape(&[n])?.as_strided(sizes, strides, offset)
        }
    })
}

/// Writes `value` (converted to `dtype`, broadcast to `sizes`) into the view,
/// rebuilding its storage's contents.
pub fn write_view(
    address: u64,
    dtype: DType,
    sizes: &[i64],
    strides: &[i64],
    value: Tensor,
) -> Result<()> {
    timed(Stage::Views, || {
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

/// Copies the first `nbytes` of the allocation at `src` into the allocation
/// at `dst` (both base addresses), as its elements: growing or shrinking a
/// storage (`resize_`). Bytes past the copied ones are zero.
pub fn copy_prefix(dst: u64, src: u64, nbytes: u64) -> Result<()> {
    let mut map = storages();
    let source = match map.get(&src) {
        Some(s) => s.value.clone(),
        None => return Err(invalid(format!("no tpu allocation at {src:#x}"))),
    };
    let d = map
        .get_mut(&dst)
        .ok_or_else(|| invalid(format!("no tpu allocation at {dst:#x}")))?;
    // Never written: zeros, which the destination already reads as.
    let Some(v) = source else { return Ok(()) };
    let dtype = v.dtype();
    let size = dtype.size_in_bytes() as u64;
    if !nbytes.is_multiple_of(size) || !d.nbytes.is_multiple_of(size) {
        return Err(invalid(format!(
            "copying {nbytes} bytes of a {dtype} storage into one of {} bytes: not whole {size}-byte elements",
            d.nbytes
        )));
    }
    let (n, total) = ((nbytes / size) as i64, (d.nbytes / size) as i64);
    let v = v.reshape(&[v.numel()])?;
    let part = if n == v.numel() {
        v
    } else {
        v.slice(0, 0, n, 1)?
    };
    d.value = Some(if total == n {
        part
    } else {
        let rest = Device::get(d.device)?.zeros(&[total - n], dtype)?;
        Tensor::cat(&[&part, &rest], 0)?
    });
    Ok(())
}

/// The dtype of the contents of the allocation holding `address` (`None` if
/// never written).
pub fn contents_dtype(address: u64) -> Result<Option<DType>> {
    let mut map = storages();
    let (_, s) = find(&mut map, address)?;
    Ok(s.value.as_ref().map(Tensor::dtype))
}
