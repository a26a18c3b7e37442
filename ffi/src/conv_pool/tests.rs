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
            std::ptr::null(),
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
fn taps(x: [usize; 3], w: [usize; 3], s: usize, p: usize, mut f: impl FnMut(usize, usize, usize)) {
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
        // Its backward: each input is in one window, whose gradient is
        // divided by 4 (the override).
        let grad = upload(&[1.0, 2.0, 3.0, 4.0], &[1, 1, 4]);
        let sizes = [1i64, 1, 6];
        ok(etpu_avg_pool_backward(
            grad,
            sizes.as_ptr(),
            3,
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
        close(&read::<f64>(out, 6), &[0.25, 0.5, 0.5, 0.75, 0.75, 1.0]);
        ok(etpu_tensor_free(grad));
    }

    for t in [x, w, g, p] {
        // SAFETY: handles this test owns, freed once.
        ok(unsafe { etpu_tensor_free(t) });
    }
}

/// Batch norm of `[2, 2, 2]` (channel `c` holds elements `i` with
/// `i / 2 % 2 == c`), forward in training and eval and backward, against
/// loops; NULL outputs not wanted.
fn batch_norm_through_the_c_abi() {
    let xv = [1.0, 2.0, -1.0, 0.5, 3.0, 5.0, 2.0, -2.0];
    let (wv, bv, rmv, rvv) = ([2.0, 0.5], [0.25, -1.0], [0.5, -0.5], [1.5, 2.0]);
    let (momentum, eps) = (0.1, 1e-5);
    let ch = |i: usize| i / 2 % 2;
    let (mut mean, mut var) = ([0.0f64; 2], [0.0f64; 2]);
    for (i, v) in xv.iter().enumerate() {
        mean[ch(i)] += v / 4.0;
    }
    for (i, v) in xv.iter().enumerate() {
        var[ch(i)] += (v - mean[ch(i)]).powi(2) / 4.0;
    }
    let invstd = var.map(|v| 1.0 / (v + eps).sqrt());
    let y: Vec<f64> = (0..8)
        .map(|i| (xv[i] - mean[ch(i)]) * invstd[ch(i)] * wv[ch(i)] + bv[ch(i)])
        .collect();
    let new_rm: Vec<f64> = (0..2).map(|c| rmv[c] * 0.9 + mean[c] * 0.1).collect();
    let new_rv: Vec<f64> = (0..2)
        .map(|c| rvv[c] * 0.9 + var[c] * 0.1 * 4.0 / 3.0)
        .collect();
    let (x, w, b) = (
        upload(&xv, &[2, 2, 2]),
        upload(&wv, &[2]),
        upload(&bv, &[2]),
    );
    let (rm, rv) = (upload(&rmv, &[2]), upload(&rvv, &[2]));
    let mut h = [TensorHandle(0); 5];
    let [hy, hm, hi, hrm, hrv] = &mut h;
    // SAFETY: valid handles (or 0), writable outputs.
    unsafe {
        ok(etpu_batch_norm(
            x, w, b, rm, rv, true, momentum, eps, ORIGIN, hy, hm, hi, hrm, hrv,
        ));
    }
    let [hy, hm, hi, hrm, hrv] = h;
    close(&read::<f64>(hy, 8), &y);
    close(&read::<f64>(hrm, 2), &new_rm);
    close(&read::<f64>(hrv, 2), &new_rv);

    // The gradients of sum(g * y): the input's, the weight's; the bias's
    // is not asked for, its pointer NULL.
    let gv = [0.5, -1.0, 2.0, 0.0, 1.0, 1.5, -0.5, 0.25];
    let g = upload(&gv, &[2, 2, 2]);
    let xhat: Vec<f64> = (0..8)
        .map(|i| (xv[i] - mean[ch(i)]) * invstd[ch(i)])
        .collect();
    let (mut mean_g, mut mean_gx) = ([0.0; 2], [0.0; 2]);
    for i in 0..8 {
        mean_g[ch(i)] += gv[i] / 4.0;
        mean_gx[ch(i)] += gv[i] * xhat[i] / 4.0;
    }
    let dx: Vec<f64> = (0..8)
        .map(|i| {
            let c = ch(i);
            wv[c] * invstd[c] * (gv[i] - mean_g[c] - xhat[i] * mean_gx[c])
        })
        .collect();
    let dw: Vec<f64> = mean_gx.iter().map(|m| m * 4.0).collect();
    let (mut gx, mut gw) = (TensorHandle(0), TensorHandle(0));
    let null = std::ptr::null_mut();
    // SAFETY: as above; the bias's gradient pointer may be NULL.
    unsafe {
        ok(etpu_batch_norm_backward(
            g, x, w, rm, rv, hm, hi, true, eps, true, true, false, ORIGIN, &mut gx, &mut gw, null,
        ));
    }
    close(&read::<f64>(gx, 8), &dx);
    close(&read::<f64>(gw, 2), &dw);

    // Eval: the running statistics; nothing to update, so the running
    // outputs may be NULL; save_mean is empty.
    let y: Vec<f64> = (0..8)
        .map(|i| {
            let c = ch(i);
            (xv[i] - rmv[c]) / (rvv[c] + eps).sqrt() * wv[c] + bv[c]
        })
        .collect();
    let (mut ey, mut em, mut ei) = (TensorHandle(0), TensorHandle(0), TensorHandle(0));
    // SAFETY: as above.
    unsafe {
        ok(etpu_batch_norm(
            x, w, b, rm, rv, false, momentum, eps, ORIGIN, &mut ey, &mut em, &mut ei, null, null,
        ));
    }
    close(&read::<f64>(ey, 8), &y);
    assert!(read::<f64>(em, 0).is_empty());
    for t in [x, w, b, rm, rv, g, hm, hi, ei] {
        // SAFETY: handles this test owns, freed once.
        ok(unsafe { etpu_tensor_free(t) });
    }
}

#[test]
fn batch_norm_through_the_c_abi_in_every_mode() {
    for mode in [
        eagertpu::Mode::Debug,
        eagertpu::Mode::Strict,
        eagertpu::Mode::Fused,
    ] {
        let _mode = eagertpu::with_mode(mode).unwrap();
        batch_norm_through_the_c_abi();
    }
}

#[test]
fn batch_norm_errors_name_what_is_wrong() {
    let x = upload(&[1.0, 2.0, 3.0], &[3]);
    let x2 = upload(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
    let rm = upload(&[0.0, 0.0], &[2]);
    let none = TensorHandle(0);
    let null = std::ptr::null_mut();
    let (mut y, mut m, mut i) = (TensorHandle(0), TensorHandle(0), TensorHandle(0));
    // SAFETY: valid handles or 0; outputs writable or NULL.
    unsafe {
        let s = etpu_batch_norm(
            x, none, none, none, none, true, 0.1, 1e-5, ORIGIN, &mut y, &mut m, &mut i, null, null,
        );
        assert_eq!(s, ETPU_INVALID_ARGUMENT);
        let e = last_error();
        assert!(e.contains("batch_norm") && e.contains("float64[3]"), "{e}");
        // A new running mean and nowhere to put it.
        let s = etpu_batch_norm(
            x2, none, none, rm, none, true, 0.1, 1e-5, ORIGIN, &mut y, &mut m, &mut i, null, null,
        );
        assert_eq!(s, ETPU_INVALID_ARGUMENT);
        let e = last_error();
        assert!(e.contains("new_running_mean is NULL"), "{e}");
        // The input's gradient asked for, with a NULL pointer.
        let s = etpu_batch_norm_backward(
            x2, x2, none, rm, rm, none, none, false, 1e-5, true, false, false, ORIGIN, null, null,
            null,
        );
        assert_eq!(s, ETPU_INVALID_ARGUMENT);
        let e = last_error();
        assert!(e.contains("grad_x is NULL"), "{e}");
        for t in [x, x2, rm] {
            ok(etpu_tensor_free(t));
        }
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
