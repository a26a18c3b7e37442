//! `torch.fft`'s entry point: ATen's three transform kernels in one call.

use std::ffi::c_char;

use eagertpu::FftNorm;

use crate::handles::{dims, get, put_tensor};
use crate::types::TensorHandle;
use crate::{Failure, at, c_api};

c_api! {
    /// The discrete Fourier transform of `x` over `dims[0..ndims]`: `kind`
    /// 0 complex to complex (`arg` 1 forward, 0 inverse), 1 real to
    /// complex (`arg` 1 for the one-sided half along the last of `dims`),
    /// 2 complex to real (`arg` the last of `dims`' output size);
    /// `normalization` 0 none, 1 by 1/sqrt(n), 2 by 1/n (ATen's
    /// `fft_norm_mode`).
    fn etpu_fft(
        x: TensorHandle,
        kind: i32,
        dims_ptr: *const i64,
        ndims: usize,
        normalization: i64,
        arg: i64,
        origin: *const c_char,
        out: *mut TensorHandle,
    ) {
        let x = get(x, "x")?;
        let norm = FftNorm::from_code(normalization).ok_or_else(|| {
            Failure::invalid(format!(
                "fft normalization {normalization} is not 0 (none), 1 (by 1/sqrt(n)) or 2 (by 1/n)"
            ))
        })?;
        // SAFETY: strings and pointers as documented.
        unsafe {
            let fft_dims = dims(dims_ptr, ndims, "dims")?;
            let t = match kind {
                0 => at(origin, || x.fft_c2c(fft_dims, norm, arg != 0))?,
                1 => at(origin, || x.fft_r2c(fft_dims, norm, arg != 0))?,
                2 => at(origin, || x.fft_c2r(fft_dims, norm, arg))?,
                _ => {
                    return Err(Failure::invalid(format!(
                        "fft kind {kind} is not 0 (c2c), 1 (r2c) or 2 (c2r)"
                    )));
                }
            };
            put_tensor(out, t)
        }
    }
}
