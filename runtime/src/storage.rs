//! Storages: the memory behind a foreign framework's tensors (PyTorch's on
//! `tpu`).
//!
//! PyTorch's allocator (in the backend) hands out addresses in a reserved,
//! never-mapped range (its `data_ptr()`s) and registers each allocation here,
//! keeping the [`StorageId`] it gets beside the allocation. An allocation's
//! contents are a runtime value holding all its elements in order, in the
//! shape it was last written whole with (a flat tensor after a partial
//! write). A kernel reads a tensor as (storage, byte offset, dtype, sizes,
//! strides) -> a view of that value, and writes a result into a tensor (or a
//! view of one) by rebuilding the value. Those are ordinary ops, so they
//! fuse; the common case, a whole contiguous tensor read in the shape it was
//! written with, records no op at all (a PyTorch `a + b` is one runtime op,
//! not four).
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

use std::fmt;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError};

use fusion::DType;

use crate::error::{Error, Result};
use crate::slots::Slots;
use crate::tensor::{Device, Tensor};
use crate::timing::{Stage, timed};
use crate::value::Value;

struct Storage {
    device: usize,
    nbytes: u64,
    /// The contents: a flat tensor, once something was written (or read).
    value: Option<Tensor>,
}

/// A registered allocation: a key of the storage table (`Slots`), a number,
/// never a pointer; a stale id never finds the allocation that took its slot.
/// The backend keeps it beside its allocation (PyTorch's `DataPtr` context),
/// so a kernel names the storage it reads: no search by address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StorageId(pub u64);

impl fmt::Display for StorageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// What a device's allocations add up to, as PyTorch's allocator statistics
/// count them (`torch.tpu.memory_stats`): live now, the peak since the last
/// `reset_peak`, and allocated and freed since the last `reset_accumulated`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub allocations: u64,
    pub bytes: u64,
    pub peak_allocations: u64,
    pub peak_bytes: u64,
    pub allocated_count: u64,
    pub allocated_bytes: u64,
    pub freed_count: u64,
    pub freed_bytes: u64,
}

/// Every live allocation, and their usage by device.
#[derive(Default)]
struct Table {
    slots: Slots<Storage>,
    totals: Vec<Usage>,
}

impl Table {
    fn insert(&mut self, s: Storage) -> StorageId {
        if self.totals.len() <= s.device {
            self.totals.resize(s.device + 1, Usage::default());
        }
        let u = &mut self.totals[s.device];
        u.allocations += 1;
        u.bytes += s.nbytes;
        u.peak_allocations = u.peak_allocations.max(u.allocations);
        u.peak_bytes = u.peak_bytes.max(u.bytes);
        u.allocated_count += 1;
        u.allocated_bytes += s.nbytes;
        StorageId(self.slots.insert(s))
    }

    fn get(&mut self, id: StorageId) -> Result<&mut Storage> {
        self.slots.get_mut(id.0).ok_or_else(|| unknown(id))
    }

    fn remove(&mut self, id: StorageId) -> Result<Storage> {
        let storage = self.slots.remove(id.0).ok_or_else(|| unknown(id))?;
        let u = &mut self.totals[storage.device];
        u.allocations -= 1;
        u.bytes -= storage.nbytes;
        u.freed_count += 1;
        u.freed_bytes += storage.nbytes;
        Ok(storage)
    }
}

static STORAGES: LazyLock<Mutex<Table>> = LazyLock::new(Mutex::default);

fn storages() -> MutexGuard<'static, Table> {
    STORAGES.lock().unwrap_or_else(PoisonError::into_inner)
}

fn invalid(message: String) -> Error {
    Error::Storage(message)
}

fn unknown(id: StorageId) -> Error {
    invalid(format!(
        "no tpu allocation with id {id} (unknown, or freed already)"
    ))
}

/// Checks that a view at `byte_offset` starts inside `s` (`id`).
fn inside(id: StorageId, s: &Storage, byte_offset: u64) -> Result<()> {
    if byte_offset > s.nbytes || (byte_offset == s.nbytes && s.nbytes > 0) {
        return Err(invalid(format!(
            "byte offset {byte_offset} is past the end of tpu allocation {id} ({} bytes)",
            s.nbytes
        )));
    }
    Ok(())
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

/// The dims of `held` (a row-major shape) that a view of `sizes` and
/// `strides` at `offset` takes in its order, if it is a permutation of them.
fn permutation_of(held: &[i64], sizes: &[i64], strides: &[i64], offset: i64) -> Option<Vec<i64>> {
    if offset != 0 || held.len() != sizes.len() {
        return None;
    }
    let mut row_major = vec![1i64; held.len()];
    for d in (0..held.len().saturating_sub(1)).rev() {
        row_major[d] = row_major[d + 1] * held[d + 1];
    }
    let mut taken = vec![false; held.len()];
    let mut dims = Vec::with_capacity(held.len());
    for (&size, &stride) in sizes.iter().zip(strides) {
        let d = (0..held.len())
            .find(|&d| !taken[d] && held[d] == size && (size == 1 || row_major[d] == stride))?;
        taken[d] = true;
        dims.push(d as i64);
    }
    Some(dims)
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

/// Registers an allocation of `nbytes` on device `device`; its id.
pub fn register(device: usize, nbytes: u64) -> Result<StorageId> {
    Device::get(device)?;
    Ok(storages().insert(Storage {
        device,
        nbytes,
        value: None,
    }))
}

/// Registers an allocation on device `device` that holds `value` as a
/// contiguous `dtype` array of `sizes` (converted and broadcast to it): an
/// op's result given its own allocation at once, with no view written.
pub fn register_holding(
    device: usize,
    dtype: DType,
    sizes: &[i64],
    value: Tensor,
) -> Result<StorageId> {
    Device::get(device)?;
    let numel = sizes.iter().product::<i64>();
    if sizes.iter().any(|&d| d < 0) {
        return Err(invalid(format!(
            "an allocation of shape {sizes:?}: a negative size"
        )));
    }
    let value = fit(value, dtype, sizes)?;
    Ok(storages().insert(Storage {
        device,
        nbytes: numel as u64 * dtype.size_in_bytes() as u64,
        value: Some(value),
    }))
}

/// Forgets allocation `id` (its value is freed when unused).
pub fn release(id: StorageId) -> Result<()> {
    storages().remove(id).map(|_| ())
}

/// The number of registered allocations and their total bytes, on `device`
/// (all devices when `None`).
pub fn stats(device: Option<usize>) -> (u64, u64) {
    let table = storages();
    match device {
        Some(d) => table
            .totals
            .get(d)
            .map_or((0, 0), |u| (u.allocations, u.bytes)),
        None => table
            .totals
            .iter()
            .fold((0, 0), |(n, b), u| (n + u.allocations, b + u.bytes)),
    }
}

/// Device `device`'s allocation statistics.
pub fn usage(device: usize) -> Usage {
    storages().totals.get(device).copied().unwrap_or_default()
}

/// Starts device `device`'s peaks again from what is live now
/// (`torch.tpu.reset_peak_memory_stats`).
pub fn reset_peak(device: usize) {
    if let Some(u) = storages().totals.get_mut(device) {
        u.peak_allocations = u.allocations;
        u.peak_bytes = u.bytes;
    }
}

/// Zeroes device `device`'s allocated and freed counts
/// (`torch.tpu.reset_accumulated_memory_stats`).
pub fn reset_accumulated(device: usize) {
    if let Some(u) = storages().totals.get_mut(device) {
        u.allocated_count = 0;
        u.allocated_bytes = 0;
        u.freed_count = 0;
        u.freed_bytes = 0;
    }
}

/// The view of allocation `id` at `byte_offset`, of `dtype`, `sizes` and
/// `strides` (in elements), as a tensor.
pub fn read_view(
    id: StorageId,
    byte_offset: u64,
    dtype: DType,
    sizes: &[i64],
    strides: &[i64],
) -> Result<Tensor> {
    timed(Stage::Views, || {
        let mut table = storages();
        let s = table.get(id)?;
        inside(id, s, byte_offset)?;
        let (offset, n) = geometry(byte_offset, s.nbytes, dtype)?;
        let all = contents(s, dtype, n)?;
        drop(table);
        // Each read records its view op, even of a view read before: reusing
        // the earlier read's value while it was pending in the trace (one
        // reshape a step for a bias's gradient, not three) made a step's op
        // count depend on where the trace had been cut, and a long step cut
        // at the window's limit never repeated (a 683-op GPT step read every
        // 50 steps: a new chunk key every few steps, 1.9x slower).
        let view = if is_whole(sizes, strides, offset, n) {
            // No op when the shape is the one the storage was written with.
            if all.shape() == sizes {
                return Ok(all);
            }
            all.reshape(sizes)?
        } else if let Some(dims) = permutation_of(all.shape(), sizes, strides, offset) {
            // A transpose of the contents as held (a weight's `w.t()`): one
            // op, not a flattening and an `as_strided`.
            all.permute(&dims)?
        } else {
            all.reshape(&[n])?.as_strided(sizes, strides, offset)?
        };
        Ok(view)
    })
}

/// Allocation `id`'s contents as `dtype` elements, as they are held (in the
/// shape they were last written with): the value every view of the
/// allocation is read from (`read_view`), with no op recorded when `dtype`
/// is the one they were written as. A compiled graph that read views of the
/// allocation is called directly on it (`Stream::graph_capture`).
pub fn read_contents(id: StorageId, dtype: DType) -> Result<Tensor> {
    timed(Stage::Views, || {
        let mut table = storages();
        let s = table.get(id)?;
        let (_, n) = geometry(0, s.nbytes, dtype)?;
        contents(s, dtype, n)
    })
}

/// Writes `value` (converted to `dtype`, broadcast to `sizes`) into the view
/// of allocation `id` at `byte_offset`, rebuilding the allocation's contents.
pub fn write_view(
    id: StorageId,
    byte_offset: u64,
    dtype: DType,
    sizes: &[i64],
    strides: &[i64],
    value: Tensor,
) -> Result<()> {
    timed(Stage::Views, || {
        let value = fit(value, dtype, sizes)?;
        let mut table = storages();
        let s = table.get(id)?;
        inside(id, s, byte_offset)?;
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

/// Makes allocation `id` hold `new` where its contents are `old` (a direct
/// graph call donated `old`'s buffer to `new`, the allocation's updated
/// value: `Stream::graph_call`). False, with nothing changed, where it holds
/// anything else.
pub(crate) fn replace_contents(id: StorageId, old: &Arc<Value>, new: Tensor) -> Result<bool> {
    let mut table = storages();
    let s = table.get(id)?;
    match &s.value {
        Some(held) if held.is(old) => {
            s.value = Some(new);
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// Copies the first `nbytes` of allocation `src` into allocation `dst`, as
/// its elements: growing or shrinking a storage (`resize_`). Bytes past the
/// copied ones are zero.
pub fn copy_prefix(dst: StorageId, src: StorageId, nbytes: u64) -> Result<()> {
    let mut table = storages();
    let source = table.get(src)?.value.clone();
    let d = table.get(dst)?;
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

/// The dtype of the contents of allocation `id` (`None` if never written).
pub fn contents_dtype(id: StorageId) -> Result<Option<DType>> {
    Ok(storages().get(id)?.value.as_ref().map(Tensor::dtype))
}
