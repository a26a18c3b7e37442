//! Inference for the discrete Fourier transform (`Op::Fft`).

use super::{arity, unsupported};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::FftKind;
use crate::shape::TensorType;

pub(super) fn fft(
    op: &'static str,
    kind: FftKind,
    lengths: &[i64],
    inputs: &[TensorType],
) -> Result<TensorType> {
    arity(op, inputs, 1)?;
    let x = &inputs[0];
    let d = x.dtype;
    let real_input = kind == FftKind::RealForward;
    if real_input && !matches!(d, DType::F32 | DType::F64) {
        return Err(unsupported(op, d, "float32 or float64"));
    }
    if !real_input && !d.is_complex() {
        return Err(unsupported(op, d, "complex64 or complex128"));
    }
    let k = lengths.len();
    if !(1..=3).contains(&k) || x.rank() < k || lengths.iter().any(|&n| n < 1) {
        return Err(Error::Invalid {
            op,
            message: format!(
                "got signal sizes {lengths:?} for {x}, expected one to three positive sizes \
                 of its last dims"
            ),
        });
    }
    // The input's trailing dims: the signal, but for a real inverse's last
    // dim, which holds its first n / 2 + 1 terms.
    let mut expected = lengths.to_vec();
    if kind == FftKind::RealInverse {
        expected[k - 1] = lengths[k - 1] / 2 + 1;
    }
    let trailing = &x.shape[x.rank() - k..];
    if trailing != expected.as_slice() {
        return Err(Error::ShapeMismatch {
            op,
            got: format!("{x}"),
            expected: format!("last dims {expected:?} for the signal sizes {lengths:?}"),
        });
    }
    let mut shape = x.shape.clone();
    let last = shape.len() - 1;
    Ok(match kind {
        FftKind::Forward | FftKind::Inverse => x.clone(),
        FftKind::RealForward => {
            shape[last] = lengths[k - 1] / 2 + 1;
            TensorType::new(d.to_complex(), &shape)
        }
        FftKind::RealInverse => {
            shape[last] = lengths[k - 1];
            TensorType::new(d.real_part(), &shape)
        }
    })
}
