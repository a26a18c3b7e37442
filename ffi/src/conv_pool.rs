//! Entry points for convolutions and their gradients, pooling, and batch
//! norm with its gradients.
//!
//! Per-spatial-dim lists (`stride`, `padding`, `dilation`, `kernel`) hold
//! `nspatial` values each; a NULL list takes PyTorch's default: stride 1 for
//! convolutions and the kernel for pooling, padding 0, dilation 1. The kernel
//! of a pooling is required. The number of spatial dims must agree with the
//! tensors (a convolution's weight is `[O, C / groups, *kernel]`; pooling
//! reduces the trailing `nspatial` dims of `[N, C, *spatial]` or
//! `[C, *spatial]`).

use std::ffi::c_char;

use eagertpu::Tensor;

use crate::handles::{dims, get, get_optional, put_pair, put_tensor};
use crate::types::TensorHandle;
use crate::{Failure, FfiResult, at, c_api, put};

/// `n` values at `p`, or `default` repeated `n` times when `p` is NULL.
///
/// # Safety
/// `p` must be NULL or valid for `n` reads.
unsafe fn list(p: *const i64, n: usize, default: i64) -> Vec<i64> {
    if p.is_null() || n == 0 {
        return vec![default; n];
    }
    // SAFETY: non-null and valid for `n` reads (the caller's contract).
    unsafe { std::slice::from_raw_parts(p, n) }.to_vec()
}

/// A convolution's stride, padding and dilation (NULL: 1, 0 and 1).
///
/// # Safety
/// Each pointer must be NULL or valid for `n` reads.
unsafe fn conv_lists(
    stride: *const i64,
    padding: *const i64,
    dilation: *const i64,
    n: usize,
) -> (Vec<i64>, Vec<i64>, Vec<i64>) {
    // SAFETY: as this function's contract.
    unsafe {
        (
            list(stride, n, 1),
            list(padding, n, 0),
            list(dilation, n, 1),
        )
    }
}

/// A pooling's stride: `n` values at `p`, or none (the kernel) when NULL.
///
/// # Safety
/// `p` must be NULL or valid for `n` reads.
unsafe fn pool_stride(p: *const i64, n: usize) -> Vec<i64> {
    if p.is_null() {
        return vec![];
    }
    // SAFETY: as this function's contract.
    unsafe { list(p, n, 1) }
}

/// Writes each result computed to its pointer, and handle 0 to each
/// pointer not NULL whose result was not computed, after checking that each
/// result computed has a pointer, so that nothing is registered when the
/// call fails.
///
/// # Safety
/// Each pointer must be NULL or writable.
unsafe fn put_computed<const N: usize>(
    results: [(*mut TensorHandle, Option<Tensor>, &str); N],
) -> FfiResult {
    if let Some((_, _, what)) = results.iter().find(|(p, t, _)| p.is_null() && t.is_some()) {
        return Err(Failure::invalid(format!(
            "{what} is NULL, but there is a result for it"
        )));
    }
    for (p, t, what) in results {
        // SAFETY: non-null and writable (checked above; the caller's contract).
        unsafe {
            match t {
                Some(t) => put_tensor(p, t)?,
                None if !p.is_null() => put(p, TensorHandle(0), what)?,
                None => {}
            }
        }
    }
    Ok(())
}

c_api! {
    /// `conv{1,2,3}d(x, w)` without bias: `x` `[N, C, *spatial]` or
    /// `[C, *spatial]`, `w` `[O, C / groups, *kernel]`.
    fn etpu_conv(
        x: TensorHandle,
        w: TensorHandle,
        stride: *const i64,
        padding: *const i64,
        dilation: *const i64,
        nspatial: usize,
        groups: i64,
        origin: *const c_char,
        out: *mut TensorHandle,
    ) {
        let (x, w) = (get(x, "x")?, get(w, "w")?);
        // SAFETY: pointers and strings as documented.
        unsafe {
            let (s, p, d) = conv_lists(stride, padding, dilation, nspatial);
            let t = at(origin, || x.conv(&w, &s, &p, &d, groups))?;
            put_tensor(out, t)
        }
    }

    /// The gradient of `etpu_conv` with respect to its input, whose sizes are
    /// `input_sizes[0..rank]`.
    fn etpu_conv_backward_input(
        grad_out: TensorHandle,
        w: TensorHandle,
        input_sizes: *const i64,
        rank: usize,
        stride: *const i64,
        padding: *const i64,
        dilation: *const i64,
        nspatial: usize,
        groups: i64,
        origin: *const c_char,
        out: *mut TensorHandle,
    ) {
        let (g, w) = (get(grad_out, "grad_out")?, get(w, "w")?);
        // SAFETY: pointers and strings as documented.
        unsafe {
            let sizes = dims(input_sizes, rank, "input_sizes")?;
            let (s, p, d) = conv_lists(stride, padding, dilation, nspatial);
            let t = at(origin, || g.conv_backward_input(&w, sizes, &s, &p, &d, groups))?;
            put_tensor(out, t)
        }
    }

    /// The gradient of `etpu_conv` with respect to its weight, whose sizes
    /// are `weight_sizes[0..rank]`.
    fn etpu_conv_backward_weight(
        grad_out: TensorHandle,
        x: TensorHandle,
        weight_sizes: *const i64,
        rank: usize,
        stride: *const i64,
        padding: *const i64,
        dilation: *const i64,
        nspatial: usize,
        groups: i64,
        origin: *const c_char,
        out: *mut TensorHandle,
    ) {
        let (g, x) = (get(grad_out, "grad_out")?, get(x, "x")?);
        // SAFETY: pointers and strings as documented.
        unsafe {
            let sizes = dims(weight_sizes, rank, "weight_sizes")?;
            let (s, p, d) = conv_lists(stride, padding, dilation, nspatial);
            let t = at(origin, || g.conv_backward_weight(&x, sizes, &s, &p, &d, groups))?;
            put_tensor(out, t)
        }
    }

    /// Max pooling over the trailing `nspatial` dims: the max of each window
    /// to `values`, and (unless `indices` is NULL) its int64 flat index within
    /// the spatial plane to `indices`, as `max_pool2d_with_indices`.
    fn etpu_max_pool(
        x: TensorHandle,
        kernel: *const i64,
        stride: *const i64,
        padding: *const i64,
        dilation: *const i64,
        nspatial: usize,
        ceil_mode: bool,
        origin: *const c_char,
        values: *mut TensorHandle,
        indices: *mut TensorHandle,
    ) {
        let x = get(x, "x")?;
        // SAFETY: pointers and strings as documented.
        unsafe {
            let k = dims(kernel, nspatial, "kernel")?;
            let s = pool_stride(stride, nspatial);
            let (p, d) = (list(padding, nspatial, 0), list(dilation, nspatial, 1));
            let pair = at(origin, || x.max_pool(k, &s, &p, &d, ceil_mode))?;
            put_pair(values, indices, pair)
        }
    }

    /// Average pooling over the trailing `nspatial` dims (zero padding);
    /// `divisor_override` 0 means none.
    fn etpu_avg_pool(
        x: TensorHandle,
        kernel: *const i64,
        stride: *const i64,
        padding: *const i64,
        nspatial: usize,
        ceil_mode: bool,
        count_include_pad: bool,
        divisor_override: i64,
        origin: *const c_char,
        out: *mut TensorHandle,
    ) {
        let x = get(x, "x")?;
        let divisor = (divisor_override != 0).then_some(divisor_override);
        // SAFETY: pointers and strings as documented.
        unsafe {
            let k = dims(kernel, nspatial, "kernel")?;
            let (s, p) = (pool_stride(stride, nspatial), list(padding, nspatial, 0));
            let t = at(origin, || x.avg_pool(k, &s, &p, ceil_mode, count_include_pad, divisor))?;
            put_tensor(out, t)
        }
    }

    /// The gradient of `etpu_avg_pool` with respect to its input, whose sizes
    /// are `input_sizes[0..rank]`, from the gradient of its output
    /// `grad_out` and the pooling's attributes (`divisor_override` 0: none).
    fn etpu_avg_pool_backward(
        grad_out: TensorHandle,
        input_sizes: *const i64,
        rank: usize,
        kernel: *const i64,
        stride: *const i64,
        padding: *const i64,
        nspatial: usize,
        ceil_mode: bool,
        count_include_pad: bool,
        divisor_override: i64,
        origin: *const c_char,
        out: *mut TensorHandle,
    ) {
        let g = get(grad_out, "grad_out")?;
        let divisor = (divisor_override != 0).then_some(divisor_override);
        // SAFETY: pointers and strings as documented.
        unsafe {
            let sizes = dims(input_sizes, rank, "input_sizes")?;
            let k = dims(kernel, nspatial, "kernel")?;
            let (s, p) = (pool_stride(stride, nspatial), list(padding, nspatial, 0));
            let t = at(origin, || g.avg_pool_backward(sizes, k, &s, &p, ceil_mode, count_include_pad, divisor))?;
            put_tensor(out, t)
        }
    }

    /// PyTorch's `native_batch_norm` of `x` `[N, C, ...]` over every dim
    /// but 1 (`Tensor::batch_norm_with_stats`): `y`, and in training the
    /// batch's `save_mean` and `save_invstd` (`[C]`, float32 for 16-bit `x`;
    /// `[0]` in eval). `weight`, `bias`, `running_mean` and `running_var`
    /// may be 0 (none; eval needs the running statistics). In training with
    /// running statistics, their new values (in their dtypes, for the caller
    /// to store; the tensors given are not written) go to `new_running_mean`
    /// and `new_running_var`, which may otherwise be NULL (or get 0);
    /// nothing is written when the call fails.
    fn etpu_batch_norm(
        x: TensorHandle,
        weight: TensorHandle,
        bias: TensorHandle,
        running_mean: TensorHandle,
        running_var: TensorHandle,
        training: bool,
        momentum: f64,
        eps: f64,
        origin: *const c_char,
        y: *mut TensorHandle,
        save_mean: *mut TensorHandle,
        save_invstd: *mut TensorHandle,
        new_running_mean: *mut TensorHandle,
        new_running_var: *mut TensorHandle,
    ) {
        let x = get(x, "x")?;
        let (w, b) = (get_optional(weight, "weight")?, get_optional(bias, "bias")?);
        let rm = get_optional(running_mean, "running_mean")?;
        let rv = get_optional(running_var, "running_var")?;
        if y.is_null() || save_mean.is_null() || save_invstd.is_null() {
            return Err(Failure::invalid("y, save_mean and save_invstd must not be NULL"));
        }
        // SAFETY: pointers and strings as documented.
        unsafe {
            let out = at(origin, || {
                x.batch_norm_with_stats(w.as_ref(), b.as_ref(), rm.as_ref(), rv.as_ref(), training, momentum, eps)
            })?;
            put_computed([
                (new_running_mean, out.running_mean, "new_running_mean"),
                (new_running_var, out.running_var, "new_running_var"),
            ])?;
            put_tensor(y, out.y)?;
            put_tensor(save_mean, out.save_mean)?;
            put_tensor(save_invstd, out.save_invstd)
        }
    }

    /// The gradients of `etpu_batch_norm` (`Tensor::batch_norm_backward`)
    /// from `grad_out`: in training from the `save_mean` and `save_invstd`
    /// it returned, in eval from `running_mean` and `running_var` (the
    /// others may be 0). `weight` may be 0 (none). Each gradient asked for
    /// (`want_input`, `want_weight`, `want_bias`) is written to its pointer;
    /// a pointer whose gradient is not asked for may be NULL, or gets 0.
    fn etpu_batch_norm_backward(
        grad_out: TensorHandle,
        x: TensorHandle,
        weight: TensorHandle,
        running_mean: TensorHandle,
        running_var: TensorHandle,
        save_mean: TensorHandle,
        save_invstd: TensorHandle,
        training: bool,
        eps: f64,
        want_input: bool,
        want_weight: bool,
        want_bias: bool,
        origin: *const c_char,
        grad_x: *mut TensorHandle,
        grad_weight: *mut TensorHandle,
        grad_bias: *mut TensorHandle,
    ) {
        let (dy, x) = (get(grad_out, "grad_out")?, get(x, "x")?);
        let w = get_optional(weight, "weight")?;
        let rm = get_optional(running_mean, "running_mean")?;
        let rv = get_optional(running_var, "running_var")?;
        let sm = get_optional(save_mean, "save_mean")?;
        let si = get_optional(save_invstd, "save_invstd")?;
        let want = [want_input, want_weight, want_bias];
        // SAFETY: pointers and strings as documented.
        unsafe {
            let (dx, dw, db) = at(origin, || {
                dy.batch_norm_backward(
                    &x, w.as_ref(), rm.as_ref(), rv.as_ref(), sm.as_ref(), si.as_ref(), training, eps, want,
                )
            })?;
            put_computed([(grad_x, dx, "grad_x"), (grad_weight, dw, "grad_weight"), (grad_bias, db, "grad_bias")])
        }
    }
}

#[cfg(test)]
mod tests;
