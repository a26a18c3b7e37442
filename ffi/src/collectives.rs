//! Process groups and collectives across the ABI (issue 11): a group is a
//! handle like a tensor; each rank's thread calls a collective with its own
//! rank and tensor, and gets its result once every rank has called it (the
//! runtime's rendezvous: a mismatch or a missing rank is an error on every
//! rank, never a hang). The torch.distributed backend (python/csrc) is built
//! on these.

use std::ffi::c_char;
use std::sync::{LazyLock, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use eagertpu::internals::Slots;
use eagertpu::{CollectiveReduce, ProcessGroup};

use crate::handles::{device, get, put_tensor};
use crate::types::{GroupHandle, TensorHandle};
use crate::{Failure, FfiResult, at, c_api, put};

/// Live groups by handle, with the rank each handle is for: each rank holds
/// a handle of its own to one group, and freeing it is the rank leaving.
static GROUPS: LazyLock<Mutex<Slots<(ProcessGroup, usize)>>> = LazyLock::new(Mutex::default);

fn groups() -> MutexGuard<'static, Slots<(ProcessGroup, usize)>> {
    GROUPS.lock().unwrap_or_else(PoisonError::into_inner)
}

fn group_of(h: GroupHandle) -> FfiResult<ProcessGroup> {
    groups()
        .get_mut(h.0)
        .map(|(g, _)| g.clone())
        .ok_or_else(|| {
            Failure::bad_handle(format!(
                "group handle {} is unknown or was already freed",
                h.0
            ))
        })
}

/// `etpu_reduce` codes, numbered as c10d's `ReduceOp`.
fn reduce_from(code: i32) -> FfiResult<CollectiveReduce> {
    match code {
        0 => Ok(CollectiveReduce::Sum),
        1 => Ok(CollectiveReduce::Avg),
        2 => Ok(CollectiveReduce::Prod),
        3 => Ok(CollectiveReduce::Min),
        4 => Ok(CollectiveReduce::Max),
        _ => Err(Failure::invalid(format!(
            "reduction {code} is not one of ETPU_REDUCE_SUM (0), ETPU_REDUCE_AVG (1), \
             ETPU_REDUCE_PRODUCT (2), ETPU_REDUCE_MIN (3), ETPU_REDUCE_MAX (4)"
        ))),
    }
}

fn rank_from(rank: i64) -> FfiResult<usize> {
    usize::try_from(rank).map_err(|_| Failure::invalid(format!("rank {rank} is negative")))
}

c_api! {
    /// A group of `size` ranks, rank `r` on device `devices[r]`, whose
    /// collectives fail when a rank has not arrived after `timeout_seconds`
    /// (0: `EAGERTPU_COLLECTIVE_TIMEOUT`). Writes one handle per rank to
    /// `out[0..size]`, each freed by its rank.
    fn etpu_group_new(devices: *const i64, size: usize, timeout_seconds: f64, out: *mut GroupHandle) {
        if out.is_null() {
            return Err(Failure::invalid("out is NULL"));
        }
        // SAFETY: `devices` is NULL or holds `size` elements.
        let indices = unsafe { crate::handles::dims(devices, size, "devices")? };
        let devices = indices.iter().map(|&d| device(d)).collect::<FfiResult<Vec<_>>>()?;
        let group = if timeout_seconds > 0.0 && timeout_seconds.is_finite() {
            ProcessGroup::with_timeout(&devices, Duration::from_secs_f64(timeout_seconds))?
        } else if timeout_seconds == 0.0 {
            ProcessGroup::new(&devices)?
        } else {
            return Err(Failure::invalid(format!(
                "process_group: got a timeout of {timeout_seconds} s; expected a positive number \
                 of seconds, or 0 for EAGERTPU_COLLECTIVE_TIMEOUT"
            )));
        };
        let mut table = groups();
        for r in 0..size {
            // SAFETY: `out` holds `size` writable elements (the caller's contract).
            unsafe { out.add(r).write(GroupHandle(table.insert((group.clone(), r)))) };
        }
        Ok(())
    }

    /// Frees one rank's handle to a group: the rank calls no more of its
    /// collectives, so one the others wait for (or call later) fails at
    /// once, naming it, instead of at the timeout.
    fn etpu_group_free(group: GroupHandle) {
        let (g, rank) = groups().remove(group.0).ok_or_else(|| {
            Failure::bad_handle(format!("group handle {} is unknown or was already freed", group.0))
        })?;
        Ok(g.leave(rank)?)
    }

    /// Rank `rank`'s device.
    fn etpu_group_device(group: GroupHandle, rank: i64, out: *mut i64) {
        let g = group_of(group)?;
        let d = g.device(rank_from(rank)?).ok_or_else(|| {
            Failure::invalid(format!("rank {rank} is not in 0..{}", g.size()))
        })?;
        // SAFETY: `out` is NULL or writable.
        unsafe { put(out, d.index() as i64, "out") }
    }

    /// Every rank's `x` reduced (`etpu_reduce`); every rank gets the result.
    fn etpu_all_reduce(group: GroupHandle, rank: i64, x: TensorHandle, reduce: i32, origin: *const c_char, out: *mut TensorHandle) {
        let (g, x, op, rank) = (group_of(group)?, get(x, "x")?, reduce_from(reduce)?, rank_from(rank)?);
        // SAFETY: `origin` and `out` as documented.
        unsafe { put_tensor(out, at(origin, || g.all_reduce(rank, &x, op))?) }
    }

    /// Every rank's `x` concatenated along `dim` in rank order.
    fn etpu_all_gather(group: GroupHandle, rank: i64, x: TensorHandle, dim: i64, origin: *const c_char, out: *mut TensorHandle) {
        let (g, x, rank) = (group_of(group)?, get(x, "x")?, rank_from(rank)?);
        // SAFETY: `origin` and `out` as documented.
        unsafe { put_tensor(out, at(origin, || g.all_gather(rank, &x, dim))?) }
    }

    /// The reduction of every rank's `x`, split along `dim` into one block
    /// per rank: this rank's block.
    fn etpu_reduce_scatter(group: GroupHandle, rank: i64, x: TensorHandle, reduce: i32, dim: i64, origin: *const c_char, out: *mut TensorHandle) {
        let (g, x, op, rank) = (group_of(group)?, get(x, "x")?, reduce_from(reduce)?, rank_from(rank)?);
        // SAFETY: `origin` and `out` as documented.
        unsafe { put_tensor(out, at(origin, || g.reduce_scatter(rank, &x, op, dim))?) }
    }

    /// Rank `root`'s `x`, bit for bit, on every rank.
    fn etpu_broadcast(group: GroupHandle, rank: i64, x: TensorHandle, root: i64, origin: *const c_char, out: *mut TensorHandle) {
        let (g, x, root, rank) = (group_of(group)?, get(x, "x")?, rank_from(root)?, rank_from(rank)?);
        // SAFETY: `origin` and `out` as documented.
        unsafe { put_tensor(out, at(origin, || g.broadcast(rank, &x, root))?) }
    }

    /// `x` split along `split_dim` into one block per rank, block `k` sent to
    /// rank `k`; the blocks received concatenated along `concat_dim`.
    fn etpu_all_to_all(group: GroupHandle, rank: i64, x: TensorHandle, split_dim: i64, concat_dim: i64, origin: *const c_char, out: *mut TensorHandle) {
        let (g, x, rank) = (group_of(group)?, get(x, "x")?, rank_from(rank)?);
        // SAFETY: `origin` and `out` as documented.
        unsafe { put_tensor(out, at(origin, || g.all_to_all(rank, &x, split_dim, concat_dim))?) }
    }

    /// Returns once every rank has called it and this rank's earlier work has run.
    fn etpu_barrier(group: GroupHandle, rank: i64, origin: *const c_char) {
        let (g, rank) = (group_of(group)?, rank_from(rank)?);
        // SAFETY: `origin` as documented.
        unsafe { at(origin, || g.barrier(rank)) }
    }
}
