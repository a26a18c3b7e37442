//! Entry points for reflection and replication padding and for upsampling
//! (`Tensor::pad_edges`, `Tensor::upsample` and their backwards).

use std::ffi::c_char;

use eagertpu::{Interpolation, PadMode};

use crate::handles::{dims, get, put_tensor};
use crate::types::TensorHandle;
use crate::{Failure, FfiResult, at, c_api, c_str};

c_api! {
    /// `x` with its last `npadding / 2` dims padded by reflection
    /// (`reflect`) or replication: `padding` holds (before, after) pairs,
    /// the last dim's first, as `torch.nn.functional.pad`.
    fn etpu_pad_edges(
        x: TensorHandle,
        padding: *const i64,
        npadding: usize,
        reflect: bool,
        origin: *const c_char,
        out: *mut TensorHandle,
    ) {
        let x = get(x, "x")?;
        // SAFETY: pointers and strings as documented.
        unsafe {
            let p = dims(padding, npadding, "padding")?;
            let t = at(origin, || x.pad_edges(p, pad_mode(reflect)))?;
            put_tensor(out, t)
        }
    }

    /// The gradient of `etpu_pad_edges` with respect to its input, whose
    /// shape is `input_dims[0..rank]`, from the padded tensor's gradient.
    fn etpu_pad_edges_backward(
        grad_out: TensorHandle,
        input_dims: *const i64,
        rank: usize,
        padding: *const i64,
        npadding: usize,
        reflect: bool,
        origin: *const c_char,
        out: *mut TensorHandle,
    ) {
        let g = get(grad_out, "grad_out")?;
        // SAFETY: pointers and strings as documented.
        unsafe {
            let (shape, p) = (dims(input_dims, rank, "input_dims")?, dims(padding, npadding, "padding")?);
            let t = at(origin, || g.pad_edges_backward(shape, p, pad_mode(reflect)))?;
            put_tensor(out, t)
        }
    }

    /// `x` (N, C and `k` spatial dims) resized to `output_size[0..k]` by
    /// `mode` (`"nearest"`, `"nearest-exact"`, `"linear"`); `scales[0..k]`
    /// are the caller's scale factors (0 or NULL: none).
    fn etpu_upsample(
        x: TensorHandle,
        mode: *const c_char,
        align_corners: bool,
        output_size: *const i64,
        k: usize,
        scales: *const f64,
        origin: *const c_char,
        out: *mut TensorHandle,
    ) {
        let x = get(x, "x")?;
        // SAFETY: pointers and strings as documented.
        unsafe {
            let mode = interpolation(c_str(mode, "mode")?, align_corners)?;
            let size = dims(output_size, k, "output_size")?;
            let scales = scale_list(scales, k);
            let t = at(origin, || x.upsample(size, &scales, mode))?;
            put_tensor(out, t)
        }
    }

    /// The gradient of `etpu_upsample` with respect to its input, whose
    /// shape is `input_dims[0..k + 2]`, from the resized tensor's gradient.
    fn etpu_upsample_backward(
        grad_out: TensorHandle,
        mode: *const c_char,
        align_corners: bool,
        output_size: *const i64,
        k: usize,
        input_dims: *const i64,
        scales: *const f64,
        origin: *const c_char,
        out: *mut TensorHandle,
    ) {
        let g = get(grad_out, "grad_out")?;
        // SAFETY: pointers and strings as documented.
        unsafe {
            let mode = interpolation(c_str(mode, "mode")?, align_corners)?;
            let size = dims(output_size, k, "output_size")?;
            let shape = dims(input_dims, k + 2, "input_dims")?;
            let scales = scale_list(scales, k);
            let t = at(origin, || g.upsample_backward(shape, size, &scales, mode))?;
            put_tensor(out, t)
        }
    }
}

fn pad_mode(reflect: bool) -> PadMode {
    if reflect {
        PadMode::Reflect
    } else {
        PadMode::Replicate
    }
}

fn interpolation(mode: &str, align_corners: bool) -> FfiResult<Interpolation> {
    match mode {
        "nearest" => Ok(Interpolation::Nearest),
        "nearest-exact" => Ok(Interpolation::NearestExact),
        "linear" => Ok(Interpolation::Linear { align_corners }),
        _ => Err(Failure::invalid(format!(
            "unknown interpolation {mode:?} (expected nearest, nearest-exact or linear)"
        ))),
    }
}

/// `k` scales from `p` (NULL: none); a scale of 0 or less (or NaN) is none.
///
/// # Safety
/// `p` must be NULL or valid for `k` doubles.
unsafe fn scale_list(p: *const f64, k: usize) -> Vec<Option<f64>> {
    if p.is_null() {
        return vec![None; k];
    }
    // SAFETY: non-null and valid for `k` doubles (the caller's contract).
    let s = unsafe { std::slice::from_raw_parts(p, k) };
    s.iter().map(|&v| (v > 0.0).then_some(v)).collect()
}
