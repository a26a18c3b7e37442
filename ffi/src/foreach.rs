//! PyTorch's `_foreach_` ops in one call: `op` over a list of operand groups
//! (one group an item), each result written into its item's view
//! (`etpu_pointwise_foreach`) or into a new allocation
//! (`etpu_pointwise_foreach_new`). The groups run as `etpu_pointwise` runs
//! one op; errors name the item.

use std::ffi::c_char;

use eagertpu::Tensor;
use eagertpu::storage::{StorageId, register_holding};

use crate::handles::{device_index, dims, dtype_from};
use crate::pointwise::{MAX_OPERANDS, castable, read_operands, run, view, write_result};
use crate::types::{OperandArg, StorageHandle};
use crate::{Failure, FfiResult, at, c_api, c_str};

c_api! {
    /// `op` over `count` groups of `nargs` operands (PyTorch's `_foreach_`
    /// ops: one call for a list of tensors): group `i` is
    /// `args[i * nargs .. (i + 1) * nargs]`, run as `etpu_pointwise` runs
    /// it, its result written into view `outs[i]`. The groups run in order,
    /// so a group reads what an earlier one wrote; a failing group stops the
    /// call with an error naming it, the groups before it written.
    fn etpu_pointwise_foreach(
        op: *const c_char,
        args: *const OperandArg,
        nargs: usize,
        count: usize,
        outs: *const *const i64,
        origin: *const c_char,
    ) {
        if nargs == 0 || nargs > MAX_OPERANDS || (count > 0 && (args.is_null() || outs.is_null())) {
            return Err(Failure::invalid(format!(
                "pointwise_foreach: got {count} groups of {nargs} operands at {args:?}, outs at {outs:?}; \
                 expected 1 to {MAX_OPERANDS} operands a group and non-NULL arrays"
            )));
        }
        // SAFETY: strings, operands and descriptors as documented.
        unsafe {
            let op = c_str(op, "op")?;
            let raw = std::slice::from_raw_parts(args, nargs * count);
            let outs = std::slice::from_raw_parts(outs, count);
            // One op: one program in debug and strict modes, not one per item.
            at(origin, || -> FfiResult<()> {
                eagertpu::as_one_op(|| -> FfiResult<()> {
                    for (i, (group, &out)) in raw.chunks_exact(nargs).zip(outs).enumerate() {
                        let out = view(out, "out").map_err(|e| item_failure(op, i, count, e))?;
                        let value = run_group(op, i, count, group)?;
                        write_result(op, &out, value).map_err(|e| item_failure(op, i, count, e))?;
                    }
                    Ok(())
                })?
            })
        }
    }

    /// `op` over `count` groups of `nargs` operands, as
    /// `etpu_pointwise_foreach` runs them, each result into a new allocation
    /// on `device` holding it as a contiguous `dtype` array of
    /// `sizes[i][0..ranks[i]]` (converted and broadcast to it, as
    /// `etpu_pointwise_new` makes one), the ids written to `storages[0..count]`:
    /// a functional `_foreach_` op's results in one call. Nothing is allocated
    /// and no id written when any group fails.
    fn etpu_pointwise_foreach_new(
        op: *const c_char,
        args: *const OperandArg,
        nargs: usize,
        count: usize,
        device: i64,
        dtype: i32,
        sizes: *const *const i64,
        ranks: *const usize,
        origin: *const c_char,
        storages: *mut StorageHandle,
    ) {
        if nargs == 0
            || nargs > MAX_OPERANDS
            || (count > 0 && (args.is_null() || sizes.is_null() || ranks.is_null() || storages.is_null()))
        {
            return Err(Failure::invalid(format!(
                "pointwise_foreach_new: got {count} groups of {nargs} operands at {args:?}, sizes at {sizes:?}, \
                 ranks at {ranks:?}, storages at {storages:?}; expected 1 to {MAX_OPERANDS} operands a group and \
                 non-NULL arrays"
            )));
        }
        let device = device_index(device)?;
        let dtype = dtype_from(dtype)?;
        // SAFETY: strings, operands, dims and the result array as documented.
        unsafe {
            let op = c_str(op, "op")?;
            let raw = std::slice::from_raw_parts(args, nargs * count);
            let sizes = std::slice::from_raw_parts(sizes, count);
            let ranks = std::slice::from_raw_parts(ranks, count);
            let ids = at(origin, || -> FfiResult<Vec<StorageId>> {
                let mut ids: Vec<StorageId> = Vec::with_capacity(count);
                let made = eagertpu::as_one_op(|| -> FfiResult<()> {
                    for (i, group) in raw.chunks_exact(nargs).enumerate() {
                        let item = |e: Failure| item_failure(op, i, count, e);
                        let shape = dims(sizes[i], ranks[i], "sizes").map_err(item)?;
                        let value = run_group(op, i, count, group)?;
                        castable(op, &value, dtype).map_err(item)?;
                        ids.push(register_holding(device, dtype, shape, value).map_err(|e| item(e.into()))?);
                    }
                    Ok(())
                })
                .map_err(Failure::from)
                .and_then(|made| made);
                if let Err(e) = made {
                    for id in ids {
                        // Made in this call and never handed out: released whole.
                        let _ = eagertpu::storage::release(id);
                    }
                    return Err(e);
                }
                Ok(ids)
            })?;
            for (i, id) in ids.into_iter().enumerate() {
                storages.add(i).write(StorageHandle(id.0));
            }
            Ok(())
        }
    }
}

/// `e` as the failure of item `i` of a `_foreach_` call's `count`.
fn item_failure(op: &str, i: usize, count: usize, e: Failure) -> Failure {
    Failure {
        message: format!("{op}: item {i} of {count}: {}", e.message),
        ..e
    }
}

/// Reads group `i` of a `_foreach_` call's operands and runs `op` over it
/// (errors name the item).
///
/// # Safety
/// A view operand's `view` must be NULL or point at a descriptor.
unsafe fn run_group(op: &str, i: usize, count: usize, group: &[OperandArg]) -> FfiResult<Tensor> {
    let item = |e: Failure| item_failure(op, i, count, e);
    // SAFETY: as this function's contract.
    let values = unsafe { read_operands(group) }.map_err(item)?;
    run(op, &values).map_err(|e| item(e.into()))
}

#[cfg(test)]
mod tests {
    use std::ffi::CStr;

    use eagertpu::DType;

    use super::*;
    use crate::handles::dtype_code;
    use crate::pointwise::tests::{contents, f32_tensor, free, handle, number};
    use crate::{ETPU_INVALID_ARGUMENT, ETPU_OK, last_error};

    const ORIGIN: *const c_char = c"foreach.rs:test".as_ptr();

    /// `op` over groups of `nargs` operands into new f32 allocations of
    /// `shapes` (their ids, or the status and the ids array as the call left it).
    fn foreach_new_f32(
        op: &CStr,
        args: &[OperandArg],
        nargs: usize,
        shapes: &[&[i64]],
    ) -> Result<Vec<StorageHandle>, (i32, Vec<StorageHandle>)> {
        let sizes: Vec<*const i64> = shapes.iter().map(|s| s.as_ptr()).collect();
        let ranks: Vec<usize> = shapes.iter().map(|s| s.len()).collect();
        let mut storages = vec![StorageHandle(0); shapes.len()];
        // SAFETY: every pointer is valid for the lengths passed.
        let status = unsafe {
            etpu_pointwise_foreach_new(
                op.as_ptr(),
                args.as_ptr(),
                nargs,
                shapes.len(),
                0,
                dtype_code(DType::F32),
                sizes.as_ptr(),
                ranks.as_ptr(),
                ORIGIN,
                storages.as_mut_ptr(),
            )
        };
        if status == ETPU_OK {
            Ok(storages)
        } else {
            Err((status, storages))
        }
    }

    #[test]
    fn a_foreach_op_makes_each_result_its_own_allocation_or_none_on_failure() {
        let a = f32_tensor(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
        let b = f32_tensor(&[-1.0, 5.0, 0.5], &[3]);
        let args = [handle(a), number(2.0), handle(b), number(-3.0)];
        let made = foreach_new_f32(c"mul", &args, 2, &[&[2, 2], &[3]]).unwrap();
        assert_eq!(contents(made[0], 4), [2.0, 4.0, 6.0, 8.0]);
        assert_eq!(contents(made[1], 3), [3.0, -15.0, -1.5]);
        // The second item's result does not fit its shape: the call fails
        // naming it, and hands out no id (the first item's is released).
        let (status, ids) = foreach_new_f32(c"mul", &args, 2, &[&[2, 2], &[2]]).unwrap_err();
        assert_eq!(status, ETPU_INVALID_ARGUMENT);
        assert!(
            last_error().contains("mul: item 1 of 2"),
            "{}",
            last_error()
        );
        assert!(
            ids.iter().all(|s| s.0 == 0),
            "a failed call handed out {ids:?}"
        );
        // The next call works.
        let again = foreach_new_f32(c"neg", &[handle(b)], 1, &[&[3]]).unwrap();
        assert_eq!(contents(again[0], 3), [1.0, -5.0, -0.5]);
        free(&[made[0], made[1], again[0]], &[a, b]);
    }
}
