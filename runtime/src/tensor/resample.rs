//! Resampling: reflection and replication padding of the last 1-3 dims, and
//! nearest, nearest-exact and (bi/tri)linear upsampling of the 1-3 spatial
//! dims after N and C, with their gradients (PyTorch's `reflection_pad*d`,
//! `replication_pad*d`, `upsample_*` and their backwards).
//!
//! Each is a gather per resized dim: a dim reads its input through one index
//! vector (`index_select`), and the gradient adds back at the same indices
//! (`scatter_add`), so the two always agree. Padding builds its indices on
//! the device (exact integer math); upsampling builds them, and the linear
//! weights, on the host with PyTorch's float rounding, so the taps match the
//! CPU kernels bit for bit.

use fusion::DType;
use num_traits::{AsPrimitive, Float, ToPrimitive};

use super::Tensor;
use crate::error::{Error, Result};

/// How `pad_edges` fills the padding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PadMode {
    /// Mirrored about the edge element, which is not repeated
    /// (`mode="reflect"`).
    Reflect,
    /// The edge element repeated (`mode="replicate"`).
    Replicate,
}

/// How `upsample` reads between input positions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interpolation {
    /// The input position `floor(j * in / out)` (`mode="nearest"`).
    Nearest,
    /// The input position `floor((j + 1/2) * in / out)`
    /// (`mode="nearest-exact"`).
    NearestExact,
    /// Linear in each dim between the two nearest positions (`"linear"`,
    /// `"bilinear"`, `"trilinear"`); `align_corners` maps the corner
    /// positions onto each other.
    Linear { align_corners: bool },
}

fn invalid(op: &'static str, message: String) -> Error {
    fusion::Error::Invalid { op, message }.into()
}

/// PyTorch's name of a padding of `k` dims (and of its backward).
fn pad_name(mode: PadMode, k: usize, backward: bool) -> &'static str {
    const NAMES: [[&str; 6]; 2] = [
        [
            "reflection_pad1d",
            "reflection_pad2d",
            "reflection_pad3d",
            "reflection_pad1d_backward",
            "reflection_pad2d_backward",
            "reflection_pad3d_backward",
        ],
        [
            "replication_pad1d",
            "replication_pad2d",
            "replication_pad3d",
            "replication_pad1d_backward",
            "replication_pad2d_backward",
            "replication_pad3d_backward",
        ],
    ];
    let family = &NAMES[(mode == PadMode::Replicate) as usize];
    family[k.clamp(1, 3) - 1 + 3 * backward as usize]
}

/// PyTorch's name of an upsampling of `k` spatial dims (and its backward).
fn upsample_name(mode: Interpolation, k: usize, backward: bool) -> &'static str {
    const NAMES: [[&str; 6]; 3] = [
        [
            "upsample_nearest1d",
            "upsample_nearest2d",
            "upsample_nearest3d",
            "upsample_nearest1d_backward",
            "upsample_nearest2d_backward",
            "upsample_nearest3d_backward",
        ],
        [
            "_upsample_nearest_exact1d",
            "_upsample_nearest_exact2d",
            "_upsample_nearest_exact3d",
            "_upsample_nearest_exact1d_backward",
            "_upsample_nearest_exact2d_backward",
            "_upsample_nearest_exact3d_backward",
        ],
        [
            "upsample_linear1d",
            "upsample_bilinear2d",
            "upsample_trilinear3d",
            "upsample_linear1d_backward",
            "upsample_bilinear2d_backward",
            "upsample_trilinear3d_backward",
        ],
    ];
    let family = match mode {
        Interpolation::Nearest => &NAMES[0],
        Interpolation::NearestExact => &NAMES[1],
        Interpolation::Linear { .. } => &NAMES[2],
    };
    family[k.clamp(1, 3) - 1 + 3 * backward as usize]
}

impl Tensor {
    /// `self` with `index` (1-D int64) selected along `d`.
    fn take_along(&self, d: usize, index: &Tensor) -> Result<Tensor> {
        self.index_select(d as i64, index)
    }

    /// The transpose of `take_along`: `self`'s slices along `d` added into
    /// zeros whose dim `d` has `size` entries, each at its index.
    fn untake_along(&self, d: usize, index: &Tensor, size: i64) -> Result<Tensor> {
        let shape = self.shape().to_vec();
        let mut column = vec![1; shape.len()];
        column[d] = shape[d];
        let wide = index.reshape(&column)?.expand(&shape)?;
        let mut zeros = shape;
        zeros[d] = size;
        self.device()
            .zeros(&zeros, self.dtype())?
            .scatter_add(d as i64, &wide, self)
    }
}

// ---------------------------------------------------------------- padding ----

/// The shape of `input` with its last `k` dims padded by `padding` (`k`
/// (before, after) pairs, the last dim's first; negative ones crop), after
/// PyTorch's checks and with its messages.
fn padded_shape(input: &[i64], padding: &[i64], mode: PadMode, backward: bool) -> Result<Vec<i64>> {
    let k = padding.len() / 2;
    let op = pad_name(mode, k, backward);
    if !padding.len().is_multiple_of(2) || !(1..=3).contains(&k) {
        return Err(invalid(
            op,
            format!(
                "padding holds (before, after) pairs for 1 to 3 dims, got {} values",
                padding.len()
            ),
        ));
    }
    let rank = input.len();
    // Every dim but a batch dim is non-empty.
    let spatial_ok = (rank.saturating_sub(k + 1)..rank).all(|d| input[d] != 0);
    if !(rank == k + 1 || rank == k + 2) || !spatial_ok {
        return Err(invalid(
            op,
            format!(
                "Expected {}D or {}D (batch mode) tensor with possibly 0 batch size and other non-zero \
                 dimensions for input, but got: {input:?}",
                k + 1,
                k + 2
            ),
        ));
    }
    let mut shape = input.to_vec();
    for i in 0..k {
        let d = rank - 1 - i;
        let (before, after) = (padding[2 * i], padding[2 * i + 1]);
        if mode == PadMode::Reflect && (before >= input[d] || after >= input[d]) {
            return Err(invalid(
                op,
                format!(
                    "Padding size should be less than the corresponding input dimension, but got: \
                     padding ({before}, {after}) at dimension {d} of input {input:?}"
                ),
            ));
        }
        shape[d] = input[d] + before + after;
    }
    if (0..k).any(|i| shape[rank - 1 - i] < 1) {
        return Err(invalid(
            op,
            format!(
                "input of shape {input:?} is too small for padding {padding:?}: the calculated output \
                 shape {shape:?} must be >= 1 in every padded dimension"
            ),
        ));
    }
    Ok(shape)
}

impl Tensor {
    /// Where output position `j` of a padded dim of `size` reads: input
    /// position `j - before`, mirrored about the first and last elements or
    /// clamped to them.
    fn pad_index(&self, size: i64, before: i64, after: i64, mode: PadMode) -> Result<Tensor> {
        let i = self.device().arange(-before, size + after, 1i64)?;
        let last = size - 1;
        match mode {
            PadMode::Replicate => i.clamp(0i64, last),
            // For -last <= i <= 2 last: last - |last - |i||.
            PadMode::Reflect => {
                let mirrored = i.abs()?.binary_op_reversed(fusion::BinaryOp::Sub, last)?;
                mirrored
                    .abs()?
                    .binary_op_reversed(fusion::BinaryOp::Sub, last)
            }
        }
    }

    /// `self` with its last `k` dims padded by reflection or replication:
    /// `padding` holds `k` (before, after) pairs, the last dim's first, as
    /// `torch.nn.functional.pad`; negative ones crop. The input is `k + 1`-
    /// or `k + 2`-D (batched), `k` from 1 to 3.
    #[track_caller]
    pub fn pad_edges(&self, padding: &[i64], mode: PadMode) -> Result<Tensor> {
        let shape = padded_shape(self.shape(), padding, mode, false)?;
        if shape.contains(&0) {
            return self.device().zeros(&shape, self.dtype());
        }
        let mut x = self.clone();
        for (i, pair) in padding.chunks(2).enumerate() {
            let d = self.rank() - 1 - i;
            if pair != [0, 0] {
                x = x.take_along(d, &self.pad_index(self.shape()[d], pair[0], pair[1], mode)?)?;
            }
        }
        Ok(x)
    }

    /// The gradient of `pad_edges` with respect to its input (of shape
    /// `input_shape`), `self` being the gradient of the padded tensor.
    #[track_caller]
    pub fn pad_edges_backward(
        &self,
        input_shape: &[i64],
        padding: &[i64],
        mode: PadMode,
    ) -> Result<Tensor> {
        let shape = padded_shape(input_shape, padding, mode, true)?;
        if self.shape() != shape {
            return Err(fusion::Error::ShapeMismatch {
                op: pad_name(mode, padding.len() / 2, true),
                got: format!("a gradient {}", self.ty()),
                expected: format!("shape {shape:?} (input {input_shape:?} padded by {padding:?})"),
            }
            .into());
        }
        if input_shape.contains(&0) {
            return self.device().zeros(input_shape, self.dtype());
        }
        let mut g = self.clone();
        for (i, pair) in padding.chunks(2).enumerate() {
            let d = input_shape.len() - 1 - i;
            let size = input_shape[d];
            if pair != [0, 0] {
                g = g.untake_along(d, &self.pad_index(size, pair[0], pair[1], mode)?, size)?;
            }
        }
        Ok(g)
    }
}

// ------------------------------------------------------------ upsampling ----
// Each resized spatial dim is one gather, the last dim first as the CPU
// kernels accumulate; the backward goes in reverse.

/// The output shape `(N, C, output_size...)` of an upsampling of `input`,
/// checked.
fn upsampled_shape(
    op: &'static str,
    input: &[i64],
    output_size: &[i64],
    scales: &[Option<f64>],
) -> Result<Vec<i64>> {
    let k = output_size.len();
    if input.len() != k + 2 || scales.len() != k {
        return Err(invalid(
            op,
            format!(
                "expected a {}-D input (N, C and {k} spatial dims) and {k} scales, got an input of shape \
                 {input:?} and {} scales",
                k + 2,
                scales.len()
            ),
        ));
    }
    if input[2..].iter().chain(output_size).any(|&s| s <= 0) {
        return Err(invalid(
            op,
            format!(
                "input and output sizes should be greater than 0, but got input of shape {input:?} and \
                 output_size {output_size:?}"
            ),
        ));
    }
    Ok([&input[..2], output_size].concat())
}

/// [`nearest_source`] on `like`'s device, for `mode` (nearest or nearest-exact).
fn nearest_index(
    like: &Tensor,
    mode: Interpolation,
    input: i64,
    output: i64,
    scale: Option<f64>,
) -> Result<Tensor> {
    let exact = mode == Interpolation::NearestExact;
    let index = nearest_source(input, output, scale, exact);
    like.device().tensor(&index, &[output])
}

/// The input position each output position of a nearest resize reads:
/// `floor(j r)` (exact: `floor((j + 1/2) r)`), clamped to the input, in
/// `f32` as the CPU kernels compute it.
fn nearest_source(input: i64, output: i64, scale: Option<f64>, exact: bool) -> Vec<i64> {
    // PyTorch's ratio of input to output positions: 1 / scale when the
    // caller gave a positive scale, else in / out.
    let r = match scale {
        Some(s) if s > 0.0 => (1.0 / s) as f32,
        _ => input as f32 / output as f32,
    };
    (0..output)
        .map(|j| {
            if output == input {
                j
            } else if !exact && output == 2 * input {
                j / 2
            } else {
                let source = if exact {
                    ((j as f64 + 0.5) * r as f64) as f32
                } else {
                    j as f32 * r
                };
                (source.floor() as i64).min(input - 1)
            }
        })
        .collect()
}

/// Linear interpolation along one dim: output `j` is
/// `w0[j] x[i0[j]] + w1[j] x[i1[j]]`. The weights are shaped to broadcast
/// along their dim.
struct Taps {
    i0: Tensor,
    i1: Tensor,
    w0: Tensor,
    w1: Tensor,
}

/// The accumulation type of PyTorch's linear kernels (`f64` for `f64`
/// tensors, `f32` for the others): its value of `v`.
fn of<T: Float>(v: impl ToPrimitive) -> T {
    T::from(v).unwrap_or_else(T::nan)
}

/// PyTorch's linear taps in the accumulation type `T`: the source position
/// is `r j` (align_corners) or `r (j + 1/2) - 1/2` clamped at 0; the lower
/// neighbour is its floor and the upper one the next (the same at the
/// edge). `trailing`: how many dims follow the resized one.
fn linear_taps<T: Float + AsPrimitive<i64> + crate::host::Element>(
    like: &Tensor,
    input: i64,
    output: i64,
    align_corners: bool,
    scale: Option<f64>,
    trailing: usize,
) -> Result<Taps> {
    let (zero, one, half) = (of::<T>(0.0), of::<T>(1.0), of::<T>(0.5));
    let r = if align_corners {
        if output > 1 {
            of::<T>(input - 1) / of::<T>(output - 1)
        } else {
            zero
        }
    } else {
        match scale {
            Some(s) if s > 0.0 => of::<T>(1.0 / s),
            _ => of::<T>(input) / of::<T>(output),
        }
    };
    let n = output as usize;
    let (mut i0, mut i1) = (vec![0i64; n], vec![0i64; n]);
    let (mut w0, mut w1) = (vec![one; n], vec![zero; n]);
    for j in 0..n {
        if input == output {
            (i0[j], i1[j]) = (j as i64, j as i64);
            continue;
        }
        let jt = of::<T>(j);
        let mut source = if align_corners {
            r * jt
        } else {
            r * (jt + half) - half
        };
        if !align_corners && source < zero {
            source = zero;
        }
        i0[j] = source.floor().as_().min(input - 1);
        let mut frac = source - of::<T>(i0[j]);
        if frac < zero {
            frac = zero;
        }
        if frac > one {
            frac = one;
        }
        w1[j] = frac;
        w0[j] = one - frac;
        i1[j] = i0[j] + (i0[j] < input - 1) as i64;
    }
    let device = like.device();
    let mut column = vec![1; trailing + 1];
    column[0] = output;
    let weights = |w: &[T]| device.tensor(w, &column)?.to_dtype(like.dtype());
    Ok(Taps {
        i0: device.tensor(&i0, &[output])?,
        i1: device.tensor(&i1, &[output])?,
        w0: weights(&w0)?,
        w1: weights(&w1)?,
    })
}

/// The linear taps of dim `d` of `like` (`f64` tensors accumulate in `f64`,
/// the others in `f32`).
fn taps_for(
    like: &Tensor,
    d: usize,
    input: i64,
    output: i64,
    align_corners: bool,
    scale: Option<f64>,
) -> Result<Taps> {
    let trailing = like.rank() - 1 - d;
    if like.dtype() == DType::F64 {
        linear_taps::<f64>(like, input, output, align_corners, scale, trailing)
    } else {
        linear_taps::<f32>(like, input, output, align_corners, scale, trailing)
    }
}

impl Tensor {
    /// `self` (`N, C` and `k` spatial dims, `k` from 1 to 3) resized to
    /// `output_size` (`k` sizes) as `torch.nn.functional.interpolate` does;
    /// `scales` (`k`, `None` or a positive scale) are the caller's scale
    /// factors, which PyTorch uses for the positions when given.
    #[track_caller]
    pub fn upsample(
        &self,
        output_size: &[i64],
        scales: &[Option<f64>],
        mode: Interpolation,
    ) -> Result<Tensor> {
        let k = output_size.len();
        let op = upsample_name(mode, k, false);
        let shape = upsampled_shape(op, self.shape(), output_size, scales)?;
        if let Interpolation::Linear { .. } = mode {
            self.expect_float(op, "a floating-point input")?;
        }
        if shape.contains(&0) {
            return self.device().zeros(&shape, self.dtype());
        }
        let mut x = self.clone();
        for i in (0..k).rev() {
            let (d, input, output) = (i + 2, self.shape()[i + 2], output_size[i]);
            if input == output {
                continue;
            }
            x = match mode {
                Interpolation::Linear { align_corners } => {
                    let t = taps_for(self, d, input, output, align_corners, scales[i])?;
                    let low = (&x.take_along(d, &t.i0)? * &t.w0)?;
                    (&low + &(&x.take_along(d, &t.i1)? * &t.w1)?)?
                }
                _ => x.take_along(d, &nearest_index(self, mode, input, output, scales[i])?)?,
            };
        }
        Ok(x)
    }

    /// The gradient of `upsample` with respect to its input (of shape
    /// `input_shape`), `self` being the gradient of the resized tensor.
    #[track_caller]
    pub fn upsample_backward(
        &self,
        input_shape: &[i64],
        output_size: &[i64],
        scales: &[Option<f64>],
        mode: Interpolation,
    ) -> Result<Tensor> {
        let k = output_size.len();
        let op = upsample_name(mode, k, true);
        let shape = upsampled_shape(op, input_shape, output_size, scales)?;
        if self.shape() != shape {
            return Err(fusion::Error::ShapeMismatch {
                op,
                got: format!("a gradient {}", self.ty()),
                expected: format!("shape {shape:?}"),
            }
            .into());
        }
        if input_shape.contains(&0) {
            return self.device().zeros(input_shape, self.dtype());
        }
        let mut g = self.clone();
        for i in 0..k {
            let (d, input, output) = (i + 2, input_shape[i + 2], output_size[i]);
            if input == output {
                continue;
            }
            g = match mode {
                Interpolation::Linear { align_corners } => {
                    let t = taps_for(self, d, input, output, align_corners, scales[i])?;
                    let low = (&g * &t.w0)?.untake_along(d, &t.i0, input)?;
                    (&low + &(&g * &t.w1)?.untake_along(d, &t.i1, input)?)?
                }
                _ => g.untake_along(
                    d,
                    &nearest_index(self, mode, input, output, scales[i])?,
                    input,
                )?,
            };
        }
        Ok(g)
    }
}
