//! The discrete Fourier transform: `stablehlo.fft` over the trailing dims.

use super::{Emitter, V, i64_array};
use crate::op::FftKind;
use crate::shape::TensorType;

pub(super) fn fft(e: &mut Emitter, kind: FftKind, lengths: &[i64], x: &V, out: TensorType) -> V {
    let attrs = format!(
        "fft_type = #stablehlo<fft_type {}>, fft_length = {}",
        kind.mlir(),
        i64_array(lengths.iter().copied())
    );
    e.op("stablehlo.fft", &[x], &attrs, out)
}
