//! Entry points for convolutions and their gradients, and pooling.
//!
//! Per-spatial-dim lists (`stride`, `padding`, `dilation`, `kernel`) hold
//! `nspatial` values each; a NULL list takes PyTorch's default: stride 1 for
//! convolutions and the kernel for pooling, padding 0, dilation 1. The kernel
//! of a pooling is required. The number of spatial dims must agree with the
//! tensors (a convolution's weight is `[O, C / groups, *kernel]`; pooling
//! reduces the trailing `nspatial` dims of `[N, C, *spatial]` or
//! `[C, *spatial]`).

use std::ffi::c_char;

use crate::handles::{dims, get, put_pair, put_tensor};
use crate::types::TensorHandle;
use crate::{at, c_api};

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
}

#[cfg(test)]
mod tests {
    //! The entry points called as C calls them, against small references
    //! computed here with loops; every mode; NULL defaults and errors.

    use std::ffi::c_void;

    use super::*;
    use crate::handles::{etpu_tensor_free, etpu_tensor_from_host, etpu_tensor_to_host};
    use crate::{ETPU_BAD_HANDLE, ETPU_INVALID_ARGUMENT, ETPU_OK, Status, last_error};

    const F64: i32 = 9;
    const ORIGIN: *const c_char = c"conv_pool.rs:test".as_ptr();

    #[track_caller]
    fn ok(status: Status) {
        assert_eq!(status, ETPU_OK, "{}", last_error());
    }

    fn upload(v: &[f64], shape: &[i64]) -> TensorHandle {
        let mut t = TensorHandle(0);
        // SAFETY: `shape` and `v` are valid for the lengths passed.
        ok(unsafe {
            etpu_tensor_from_host(
                0,
                F64,
                shape.as_ptr(),
                shape.len(),
                v.as_ptr().cast::<c_void>(),
                size_of_val(v),
                &mut t,
            )
        });
        t
    }

    fn read<T: Copy + Default>(t: TensorHandle, n: usize) -> Vec<T> {
        let mut out = vec![T::default(); n];
        // SAFETY: `out` is valid for `n` elements of T.
        ok(unsafe {
            etpu_tensor_to_host(
                t,
                out.as_mut_ptr().cast::<c_void>(),
                n * size_of::<T>(),
                std::ptr::null(),
            )
        });
        // SAFETY: a handle this test owns, freed once.
        ok(unsafe { etpu_tensor_free(t) });
        out
    }

    /// A 1-d convolution by definition: calls `f(x_flat, w_flat, out_flat)`
    /// for every product it sums.
    fn taps(
        x: [usize; 3],
        w: [usize; 3],
        s: usize,
        p: usize,
        mut f: impl FnMut(usize, usize, usize),
    ) {
        let len = (x[2] + 2 * p - w[2]) / s + 1;
        for (n, o, j) in
            (0..x[0]).flat_map(|n| (0..w[0]).flat_map(move |o| (0..len).map(move |j| (n, o, j))))
        {
            for c in 0..w[1] {
                for k in 0..w[2] {
                    let i = (j * s + k) as i64 - p as i64;
                    if (0..x[2] as i64).contains(&i) {
                        f(
                            (n * x[1] + c) * x[2] + i as usize,
                            (o * w[1] + c) * w[2] + k,
                            (n * w[0] + o) * len + j,
                        );
                    }
                }
            }
        }
    }

    fn close(got: &[f64], want: &[f64]) {
        assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-12, "{got:?} vs {want:?}");
        }
    }

    fn run_everything() {
        let xv: Vec<f64> = (0..10).map(|i| i as f64 * 0.5 - 2.0).collect();
        let wv: Vec<f64> = (0..12).map(|i| (i % 5) as f64 - 1.5).collect();
        let gv: Vec<f64> = (0..9).map(|i| 1.0 - i as f64 * 0.25).collect();
        let (x, w, g) = (
            upload(&xv, &[1, 2, 5]),
            upload(&wv, &[3, 2, 2]),
            upload(&gv, &[1, 3, 3]),
        );
        let (mut y, mut dx, mut dw) = (vec![0.0; 9], vec![0.0; 10], vec![0.0; 12]);
        taps([1, 2, 5], [3, 2, 2], 2, 1, |xi, wi, oi| {
            y[oi] += xv[xi] * wv[wi];
            dx[xi] += gv[oi] * wv[wi];
            dw[wi] += gv[oi] * xv[xi];
        });
        let (stride, padding) = ([2i64], [1i64]);
        let mut out = TensorHandle(0);
        // SAFETY: valid handles, lists of `nspatial` values or NULL, a writable `out`.
        unsafe {
            ok(etpu_conv(
                x,
                w,
                stride.as_ptr(),
                padding.as_ptr(),
                std::ptr::null(),
                1,
                1,
                ORIGIN,
                &mut out,
            ));
            close(&read::<f64>(out, 9), &y);
            let sizes = [1i64, 2, 5];
            ok(etpu_conv_backward_input(
                g,
                w,
                sizes.as_ptr(),
                3,
                stride.as_ptr(),
                padding.as_ptr(),
                std::ptr::null(),
                1,
                1,
                ORIGIN,
                &mut out,
            ));
            close(&read::<f64>(out, 10), &dx);
            let sizes = [3i64, 2, 2];
            ok(etpu_conv_backward_weight(
                g,
                x,
                sizes.as_ptr(),
                3,
                stride.as_ptr(),
                padding.as_ptr(),
                std::ptr::null(),
                1,
                1,
                ORIGIN,
                &mut out,
            ));
            close(&read::<f64>(out, 12), &dw);
        }

        // Max pool of [1, 3, 2, 3, 0, 5] by windows of 2 (NULL stride: 2).
        let pv = [1.0, 3.0, 2.0, 3.0, 0.0, 5.0];
        let p = upload(&pv, &[1, 1, 6]);
        let mut want = (vec![], vec![]);
        for start in (0..6).step_by(2) {
            let i = if pv[start + 1] > pv[start] {
                start + 1
            } else {
                start
            };
            want.0.push(pv[i]);
            want.1.push(i as i64);
        }
        let (kernel, mut values, mut indices) = ([2i64], TensorHandle(0), TensorHandle(0));
        let null = std::ptr::null();
        // SAFETY: as above; `indices` may be NULL.
        unsafe {
            ok(etpu_max_pool(
                p,
                kernel.as_ptr(),
                null,
                null,
                null,
                1,
                false,
                ORIGIN,
                &mut values,
                &mut indices,
            ));
            assert_eq!(read::<f64>(values, 3), want.0);
            assert_eq!(read::<i64>(indices, 3), want.1);
            ok(etpu_max_pool(
                p,
                kernel.as_ptr(),
                null,
                null,
                null,
                1,
                false,
                ORIGIN,
                &mut values,
                std::ptr::null_mut(),
            ));
            assert_eq!(read::<f64>(values, 3), want.0);
        }

        // Average pool of 6 by windows of 2, stride 2, padding 1, ceil mode,
        // padding not counted: windows [-1, 1), [1, 3), [3, 5), [5, 7).
        let mut avg = vec![];
        for start in [-1i64, 1, 3, 5] {
            let inside: Vec<f64> = (start..start + 2)
                .filter(|i| (0..6).contains(i))
                .map(|i| pv[i as usize])
                .collect();
            avg.push(inside.iter().sum::<f64>() / inside.len() as f64);
        }
        let (stride, padding) = ([2i64], [1i64]);
        // SAFETY: as above.
        unsafe {
            ok(etpu_avg_pool(
                p,
                kernel.as_ptr(),
                stride.as_ptr(),
                padding.as_ptr(),
                1,
                true,
                false,
                0,
                ORIGIN,
                &mut out,
            ));
            close(&read::<f64>(out, 4), &avg);
            // A divisor override of 4 divides every window sum by 4.
            ok(etpu_avg_pool(
                p,
                kernel.as_ptr(),
                stride.as_ptr(),
                padding.as_ptr(),
                1,
                true,
                false,
                4,
                ORIGIN,
                &mut out,
            ));
            let sums: Vec<f64> = [-1i64, 1, 3, 5]
                .iter()
                .map(|s| {
                    (*s..s + 2)
                        .filter(|i| (0..6).contains(i))
                        .map(|i| pv[i as usize])
                        .sum::<f64>()
                        / 4.0
                })
                .collect();
            close(&read::<f64>(out, 4), &sums);
        }

        for t in [x, w, g, p] {
            // SAFETY: handles this test owns, freed once.
            ok(unsafe { etpu_tensor_free(t) });
        }
    }

    #[test]
    fn convolutions_and_pooling_through_the_c_abi_in_every_mode() {
        for mode in [
            eagertpu::Mode::Debug,
            eagertpu::Mode::Strict,
            eagertpu::Mode::Fused,
        ] {
            let _mode = eagertpu::with_mode(mode).unwrap();
            run_everything();
        }
    }

    #[test]
    fn bad_arguments_are_errors_naming_what_is_wrong() {
        let x = upload(&[0.0; 10], &[1, 2, 5]);
        let w = upload(&[0.0; 6], &[3, 1, 2]);
        let (null, mut out) = (std::ptr::null(), TensorHandle(0));
        // SAFETY: valid or deliberately bad handles; lists valid or NULL.
        unsafe {
            let s = etpu_conv(x, w, null, null, null, 1, 2, ORIGIN, &mut out);
            assert_eq!(s, ETPU_INVALID_ARGUMENT);
            let e = last_error();
            assert!(
                e.contains("conv1d") && e.contains("[3, 1, 2]") && e.contains("groups 2"),
                "{e}"
            );
            let s = etpu_conv(
                x,
                TensorHandle(u64::MAX),
                null,
                null,
                null,
                1,
                1,
                ORIGIN,
                &mut out,
            );
            assert_eq!(s, ETPU_BAD_HANDLE);
            assert!(
                last_error().contains("w is tensor handle"),
                "{}",
                last_error()
            );
            let s = etpu_max_pool(
                x,
                null,
                null,
                null,
                null,
                1,
                false,
                ORIGIN,
                &mut out,
                std::ptr::null_mut(),
            );
            assert_eq!(s, ETPU_INVALID_ARGUMENT);
            assert!(last_error().contains("kernel is NULL"), "{}", last_error());
            let k = [2i64];
            let s = etpu_max_pool(
                x,
                k.as_ptr(),
                null,
                null,
                null,
                1,
                false,
                ORIGIN,
                std::ptr::null_mut(),
                &mut out,
            );
            assert_eq!(s, ETPU_INVALID_ARGUMENT);
            assert!(last_error().contains("values is NULL"), "{}", last_error());
            // divisor_override 0 is none, not a division by zero.
            let s = etpu_avg_pool(
                x,
                k.as_ptr(),
                null,
                null,
                1,
                false,
                true,
                0,
                ORIGIN,
                &mut out,
            );
            assert_eq!(s, ETPU_OK, "{}", last_error());
            ok(etpu_tensor_free(out));
            ok(etpu_tensor_free(x));
            ok(etpu_tensor_free(w));
        }
    }
}
