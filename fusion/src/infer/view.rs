//! Inference for strided views of a flat storage (`as_strided` and its write).

use super::{arity, check_shape, same_dtype};
use crate::error::{Error, Result};
use crate::shape::{ShapeDisplay, TensorType};

/// Checks a view of `sizes`/`strides` at `offset` fits a storage of `n` elements.
fn check_view(op: &'static str, sizes: &[i64], strides: &[i64], offset: i64, n: i64) -> Result<()> {
    check_shape(op, sizes)?;
    if sizes.len() != strides.len() {
        return Err(Error::ShapeMismatch {
            op,
            got: format!(
                "sizes {} and strides {}",
                ShapeDisplay(sizes),
                ShapeDisplay(strides)
            ),
            expected: "one stride per size".into(),
        });
    }
    if offset < 0 || strides.iter().any(|s| *s < 0) {
        return Err(Error::Invalid {
            op,
            message: format!(
                "offset {offset} and strides {} must be non-negative",
                ShapeDisplay(strides)
            ),
        });
    }
    if sizes.contains(&0) {
        return Ok(());
    }
    let last = offset
        + sizes
            .iter()
            .zip(strides)
            .map(|(s, d)| (s - 1) * d)
            .sum::<i64>();
    if last >= n {
        return Err(Error::IndexOutOfRange {
            op,
            index: last,
            dim: 0,
            size: n,
        });
    }
    Ok(())
}

fn storage<'a>(op: &'static str, inputs: &'a [TensorType]) -> Result<&'a TensorType> {
    let s = &inputs[0];
    if s.rank() != 1 {
        return Err(Error::ShapeMismatch {
            op,
            got: format!("a storage {s}"),
            expected: "a 1-d storage".into(),
        });
    }
    Ok(s)
}

pub(super) fn as_strided(
    op: &'static str,
    sizes: &[i64],
    strides: &[i64],
    offset: i64,
    inputs: &[TensorType],
) -> Result<TensorType> {
    arity(op, inputs, 1)?;
    let s = storage(op, inputs)?;
    check_view(op, sizes, strides, offset, s.shape[0])?;
    Ok(TensorType::new(s.dtype, sizes))
}

pub(super) fn as_strided_scatter(
    op: &'static str,
    sizes: &[i64],
    strides: &[i64],
    offset: i64,
    inputs: &[TensorType],
) -> Result<TensorType> {
    arity(op, inputs, 2)?;
    let s = storage(op, inputs)?;
    check_view(op, sizes, strides, offset, s.shape[0])?;
    let v = &inputs[1];
    if v.shape.as_slice() != sizes {
        return Err(Error::ShapeMismatch {
            op,
            got: format!("a value {v}"),
            expected: format!("the view's shape {}", ShapeDisplay(sizes)),
        });
    }
    same_dtype(op, s, v)?;
    Ok(s.clone())
}
