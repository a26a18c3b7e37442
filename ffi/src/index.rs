//! Entry points for PyTorch's advanced indexing (`x[i, :, j]`, `index_put_`),
//! index_add, index_fill, take and put_.
//!
//! A list of optional index tensors is a pointer and a length: entry `d`
//! indexes dim `d`, and a 0 handle is a full slice (`:`). Index tensors are
//! integer tensors; a bool mask goes as its true positions, one index tensor
//! per dim it covers.

use std::ffi::c_char;

use eagertpu::Tensor;

use crate::handles::{get, get_optional, put_tensor};
use crate::ops::scalar;
use crate::types::{ScalarArg, TensorHandle};
use crate::{Failure, FfiResult, at, c_api};

/// The `n` optional index tensors at `p` (handle 0: none).
///
/// # Safety
/// `p` must be NULL or valid for `n` reads.
unsafe fn optional_list(p: *const TensorHandle, n: usize) -> FfiResult<Vec<Option<Tensor>>> {
    if n == 0 {
        return Ok(vec![]);
    }
    if p.is_null() {
        return Err(Failure::invalid(format!(
            "indices is NULL but its length is {n}"
        )));
    }
    // SAFETY: non-null and valid for `n` reads (the caller's contract).
    let handles = unsafe { std::slice::from_raw_parts(p, n) };
    handles
        .iter()
        .map(|h| get_optional(*h, "indices[i]"))
        .collect()
}

c_api! {
    /// `out = x[indices[0], ..., indices[n - 1]]` (`aten::index`): each entry
    /// an integer index tensor, or 0 for a full slice. The index tensors
    /// broadcast together; negative indices count from the end; when the
    /// indexed dims are not adjacent, the broadcast dims go first.
    fn etpu_index(x: TensorHandle, indices: *const TensorHandle, n: usize, origin: *const c_char, out: *mut TensorHandle) {
        let x = get(x, "x")?;
        // SAFETY: pointers as documented.
        unsafe {
            let list = optional_list(indices, n)?;
            let refs: Vec<Option<&Tensor>> = list.iter().map(Option::as_ref).collect();
            let t = at(origin, || x.index(&refs))?;
            put_tensor(out, t)
        }
    }

    /// `out` = x with `values` (cast to x's dtype, broadcast to the indexed
    /// shape) written at `x[indices...]`, or added there when `accumulate`
    /// (repeated positions sum).
    fn etpu_index_put(x: TensorHandle, indices: *const TensorHandle, n: usize, values: TensorHandle, accumulate: bool, origin: *const c_char, out: *mut TensorHandle) {
        let (x, v) = (get(x, "x")?, get(values, "values")?);
        // SAFETY: pointers as documented.
        unsafe {
            let list = optional_list(indices, n)?;
            let refs: Vec<Option<&Tensor>> = list.iter().map(Option::as_ref).collect();
            let t = at(origin, || x.index_put(&refs, &v, accumulate))?;
            put_tensor(out, t)
        }
    }

    /// `out = x.index_add(dim, index, source, alpha=alpha)`.
    fn etpu_index_add(x: TensorHandle, dim: i64, index: TensorHandle, source: TensorHandle, alpha: ScalarArg, origin: *const c_char, out: *mut TensorHandle) {
        let (x, i, s) = (get(x, "x")?, get(index, "index")?, get(source, "source")?);
        let alpha = scalar(alpha, "alpha")?;
        // SAFETY: pointers as documented.
        unsafe {
            let t = at(origin, || x.index_add(dim, &i, &s, alpha))?;
            put_tensor(out, t)
        }
    }

    /// `out = x.index_fill(dim, index, value)`; negative indices count from the end.
    fn etpu_index_fill(x: TensorHandle, dim: i64, index: TensorHandle, value: ScalarArg, origin: *const c_char, out: *mut TensorHandle) {
        let (x, i) = (get(x, "x")?, get(index, "index")?);
        let v = scalar(value, "value")?;
        // SAFETY: pointers as documented.
        unsafe {
            let t = at(origin, || x.index_fill(dim, &i, v))?;
            put_tensor(out, t)
        }
    }

    /// `out = torch.take(x, index)`: flat positions, negative ones from the end.
    fn etpu_take(x: TensorHandle, index: TensorHandle, origin: *const c_char, out: *mut TensorHandle) {
        let (x, i) = (get(x, "x")?, get(index, "index")?);
        // SAFETY: pointers as documented.
        unsafe {
            let t = at(origin, || x.take(&i))?;
            put_tensor(out, t)
        }
    }

    /// `out` = x with `source` written (or added, when `accumulate`) at the
    /// flat positions `index` (`Tensor.put_`).
    fn etpu_put(x: TensorHandle, index: TensorHandle, source: TensorHandle, accumulate: bool, origin: *const c_char, out: *mut TensorHandle) {
        let (x, i, s) = (get(x, "x")?, get(index, "index")?, get(source, "source")?);
        // SAFETY: pointers as documented.
        unsafe {
            let t = at(origin, || x.put(&i, &s, accumulate))?;
            put_tensor(out, t)
        }
    }
}
