//! Elementwise ops from views to a view in one call: read the inputs'
//! views, run the op, write the result into the output's view. The same as
//! `etpu_view_read` + `etpu_unary` (or `etpu_binary`, `etpu_binary_scalar`) +
//! `etpu_view_write` and the frees of the handles between them, for the ops
//! PyTorch calls most, at a third of the calls.
//!
//! A view descriptor is an `int64_t` array: `{address, dtype, rank,
//! sizes[0..rank], strides[0..rank]}` (the address as `etpu_view_read`
//! takes it, bit for bit; strides in elements).

use std::ffi::c_char;

use eagertpu::{DType, Tensor};

use crate::handles::dtype_from;
use crate::ops::{binary_op, scalar, unary_op};
use crate::types::ScalarArg;
use crate::{Failure, FfiResult, at, c_api, c_str};
use eagertpu::storage::{read_view, write_view};

/// A view descriptor, decoded.
struct View<'a> {
    address: u64,
    dtype: DType,
    sizes: &'a [i64],
    strides: &'a [i64],
}

/// Most dims a view may have (as PyTorch's own limit of 25 for TensorIterator).
const MAX_RANK: i64 = 64;

/// Decodes the descriptor at `p` (`what` names it in errors).
///
/// # Safety
/// `p` must be NULL or point at a descriptor: 3 + 2 * rank `int64_t`s.
unsafe fn view<'a>(p: *const i64, what: &str) -> FfiResult<View<'a>> {
    if p.is_null() {
        return Err(Failure::invalid(format!("view {what} is NULL")));
    }
    // SAFETY: the header is three elements (the caller's contract).
    let head = unsafe { std::slice::from_raw_parts(p, 3) };
    let rank = head[2];
    if !(0..=MAX_RANK).contains(&rank) {
        return Err(Failure::invalid(format!(
            "view {what} has rank {rank}, expected 0 to {MAX_RANK}"
        )));
    }
    let rank = rank as usize;
    // SAFETY: sizes and strides follow the header (the caller's contract).
    let dims = unsafe { std::slice::from_raw_parts(p.add(3), 2 * rank) };
    Ok(View {
        address: head[0] as u64,
        dtype: dtype_from(head[1] as i32)?,
        sizes: &dims[..rank],
        strides: &dims[rank..],
    })
}

impl View<'_> {
    fn read(&self) -> FfiResult<Tensor> {
        Ok(read_view(
            self.address,
            self.dtype,
            self.sizes,
            self.strides,
        )?)
    }

    fn write(&self, value: Tensor) -> FfiResult {
        Ok(write_view(
            self.address,
            self.dtype,
            self.sizes,
            self.strides,
            value,
        )?)
    }
}

c_api! {
    /// `out = op(x)` (an `etpu_unary` op) from view `x` into view `out`.
    fn etpu_view_unary(op: *const c_char, x: *const i64, out: *const i64, origin: *const c_char) {
        // SAFETY: strings and descriptors as documented.
        unsafe {
            let op = unary_op(c_str(op, "op")?)?;
            let (x, out) = (view(x, "x")?, view(out, "out")?);
            at(origin, || out.write(x.read()?.unary_op(op)?))
        }
    }

    /// `out = op(a, b)` (an `etpu_binary` op) from views `a` and `b` into view
    /// `out`; the result is converted to `out`'s dtype and broadcast to its shape.
    fn etpu_view_binary(op: *const c_char, a: *const i64, b: *const i64, out: *const i64, origin: *const c_char) {
        // SAFETY: strings and descriptors as documented.
        unsafe {
            let op = binary_op(c_str(op, "op")?)?;
            let (a, b, out) = (view(a, "a")?, view(b, "b")?, view(out, "out")?);
            at(origin, || out.write(a.read()?.binary_op(op, &b.read()?)?))
        }
    }

    /// `out = op(a, s)`, or `op(s, a)` when `reversed` (as
    /// `etpu_binary_scalar`), from view `a` into view `out`.
    fn etpu_view_binary_scalar(
        op: *const c_char,
        a: *const i64,
        value: ScalarArg,
        reversed: bool,
        out: *const i64,
        origin: *const c_char,
    ) {
        // SAFETY: strings and descriptors as documented.
        unsafe {
            let op = binary_op(c_str(op, "op")?)?;
            let (a, out) = (view(a, "a")?, view(out, "out")?);
            let s = scalar(value, "value")?;
            at(origin, || {
                let a = a.read()?;
                out.write(if reversed { a.binary_op_reversed(op, s) } else { a.binary_op(op, s) }?)
            })
        }
    }
}
