//! Inference for layout and indexing ops.

use super::{arity, check_dims, check_shape, int_only, same_dtype};
use crate::error::{Error, Result};
use crate::shape::{Shape, ShapeDisplay, TensorType, numel};

pub(super) fn reshape(
    op: &'static str,
    shape: &Shape,
    inputs: &[TensorType],
) -> Result<TensorType> {
    arity(op, inputs, 1)?;
    check_shape(op, shape)?;
    let x = &inputs[0];
    if numel(shape) != x.numel() {
        return Err(Error::Reshape {
            op,
            from: x.shape.to_vec(),
            to: shape.to_vec(),
        });
    }
    Ok(x.with_shape(shape.clone()))
}

pub(super) fn permute(
    op: &'static str,
    perm: &[usize],
    inputs: &[TensorType],
) -> Result<TensorType> {
    arity(op, inputs, 1)?;
    let x = &inputs[0];
    if perm.len() != x.rank() {
        return Err(Error::ShapeMismatch {
            op,
            got: format!(
                "{} dims in the permutation {perm:?} for a tensor {x}",
                perm.len()
            ),
            expected: format!("{} dims", x.rank()),
        });
    }
    check_dims(op, perm, x.rank())?;
    Ok(x.with_shape(perm.iter().map(|&p| x.shape[p]).collect()))
}

pub(super) fn broadcast_to(
    op: &'static str,
    shape: &Shape,
    inputs: &[TensorType],
) -> Result<TensorType> {
    arity(op, inputs, 1)?;
    check_shape(op, shape)?;
    let x = &inputs[0];
    let bad = || Error::ShapeMismatch {
        op,
        got: format!("a tensor {x}"),
        expected: format!(
            "a shape that broadcasts to {} (each dim equal or 1, aligned from the right)",
            ShapeDisplay(shape)
        ),
    };
    if x.rank() > shape.len() {
        return Err(bad());
    }
    let lead = shape.len() - x.rank();
    for (i, &d) in x.shape.iter().enumerate() {
        if d != 1 && d != shape[lead + i] {
            return Err(bad());
        }
    }
    Ok(x.with_shape(shape.clone()))
}

pub(super) fn slice(
    op: &'static str,
    dim: usize,
    start: i64,
    end: i64,
    step: i64,
    inputs: &[TensorType],
) -> Result<TensorType> {
    arity(op, inputs, 1)?;
    let x = &inputs[0];
    check_dims(op, &[dim], x.rank())?;
    if x.rank() == 0 {
        return Err(Error::Invalid {
            op,
            message: "got a 0-d tensor, expected at least one dim to slice".into(),
        });
    }
    if step <= 0 {
        return Err(Error::Invalid {
            op,
            message: format!("step {step}, expected a positive step"),
        });
    }
    let size = x.shape[dim];
    if start < 0 || start > size {
        return Err(Error::IndexOutOfRange {
            op,
            index: start,
            dim,
            size,
        });
    }
    if end < start || end > size {
        return Err(Error::IndexOutOfRange {
            op,
            index: end,
            dim,
            size,
        });
    }
    let mut shape = x.shape.clone();
    shape[dim] = (end - start + step - 1) / step;
    Ok(x.with_shape(shape))
}

pub(super) fn concat(op: &'static str, dim: usize, inputs: &[TensorType]) -> Result<TensorType> {
    let Some(first) = inputs.first() else {
        return Err(Error::Invalid {
            op,
            message: "got no tensors, expected at least one".into(),
        });
    };
    check_dims(op, &[dim], first.rank())?;
    let mut dtype = first.dtype;
    let mut total = 0;
    for t in inputs {
        let same_rank = t.rank() == first.rank();
        let same_dims =
            same_rank && (0..t.rank()).all(|i| i == dim || t.shape[i] == first.shape[i]);
        if !same_dims || t.rank() == 0 {
            return Err(Error::ShapeMismatch {
                op,
                got: format!("tensors {first} and {t}"),
                expected: format!("the same shape except in dim {dim}"),
            });
        }
        total += t.shape[dim];
        dtype = dtype.promote(t.dtype);
    }
    let mut shape = first.shape.clone();
    shape[dim] = total;
    Ok(TensorType { dtype, shape })
}

pub(super) fn pad(
    op: &'static str,
    low: &Shape,
    high: &Shape,
    inputs: &[TensorType],
) -> Result<TensorType> {
    arity(op, inputs, 1)?;
    let x = &inputs[0];
    if low.len() != x.rank() || high.len() != x.rank() {
        return Err(Error::ShapeMismatch {
            op,
            got: format!("{} padded dims for a tensor {x}", low.len().max(high.len())),
            expected: format!("at most {} dims", x.rank()),
        });
    }
    let mut shape = x.shape.clone();
    for i in 0..x.rank() {
        shape[i] += low[i] + high[i];
        if shape[i] < 0 {
            return Err(Error::Invalid {
                op,
                message: format!(
                    "padding ({}, {}) of dim {i} of size {} gives a negative size",
                    low[i], high[i], x.shape[i]
                ),
            });
        }
    }
    Ok(x.with_shape(shape))
}

pub(super) fn index_select(
    op: &'static str,
    dim: usize,
    inputs: &[TensorType],
) -> Result<TensorType> {
    arity(op, inputs, 2)?;
    let (x, index) = (&inputs[0], &inputs[1]);
    check_dims(op, &[dim], x.rank())?;
    int_only(op, "index", index)?;
    if index.rank() > 1 {
        return Err(Error::ShapeMismatch {
            op,
            got: format!("index {index}"),
            expected: "a 1-d (or 0-d) index".into(),
        });
    }
    let mut shape = x.shape.clone();
    if x.rank() == 0 {
        return Ok(x.clone());
    }
    shape[dim] = index.numel();
    Ok(x.with_shape(shape))
}

pub(super) fn gather(op: &'static str, dim: usize, inputs: &[TensorType]) -> Result<TensorType> {
    arity(op, inputs, 2)?;
    let (x, index) = (&inputs[0], &inputs[1]);
    check_dims(op, &[dim], x.rank())?;
    int_only(op, "index", index)?;
    same_rank_bounded(op, x, index, dim, "input")?;
    Ok(x.with_shape(index.shape.clone()))
}

pub(super) fn scatter(op: &'static str, dim: usize, inputs: &[TensorType]) -> Result<TensorType> {
    arity(op, inputs, 3)?;
    let (x, index, src) = (&inputs[0], &inputs[1], &inputs[2]);
    check_dims(op, &[dim], x.rank())?;
    int_only(op, "index", index)?;
    same_rank_bounded(op, x, index, dim, "self")?;
    if src.rank() != index.rank() || (0..index.rank()).any(|i| index.shape[i] > src.shape[i]) {
        return Err(Error::ShapeMismatch {
            op,
            got: format!("index {index} and src {src}"),
            expected: "src with the rank of index and each dim at least index's".into(),
        });
    }
    same_dtype(op, x, src)?;
    Ok(x.clone())
}

/// `index` has `x`'s rank and is no larger than `x` outside `dim`.
fn same_rank_bounded(
    op: &'static str,
    x: &TensorType,
    index: &TensorType,
    dim: usize,
    name: &str,
) -> Result<()> {
    let ok =
        index.rank() == x.rank() && (0..x.rank()).all(|i| i == dim || index.shape[i] <= x.shape[i]);
    if !ok {
        return Err(Error::ShapeMismatch {
            op,
            got: format!("{name} {x} and index {index}"),
            expected: format!(
                "index with the rank of {name} and each dim except {dim} at most {name}'s"
            ),
        });
    }
    Ok(())
}

fn starts(op: &'static str, x: &TensorType, starts: &[TensorType]) -> Result<()> {
    if starts.len() != x.rank() {
        return Err(Error::Arity {
            op,
            got: starts.len() + 1,
            expected: x.rank() + 1,
        });
    }
    for s in starts {
        if s.rank() != 0 || !s.dtype.is_int() {
            return Err(Error::ShapeMismatch {
                op,
                got: format!("start index {s}"),
                expected: "a 0-d integer tensor".into(),
            });
        }
    }
    Ok(())
}

pub(super) fn dynamic_slice(
    op: &'static str,
    sizes: &Shape,
    inputs: &[TensorType],
) -> Result<TensorType> {
    let Some(x) = inputs.first() else {
        return Err(Error::Arity {
            op,
            got: 0,
            expected: 1,
        });
    };
    starts(op, x, &inputs[1..])?;
    if sizes.len() != x.rank() || (0..x.rank()).any(|i| sizes[i] < 0 || sizes[i] > x.shape[i]) {
        return Err(Error::ShapeMismatch {
            op,
            got: format!("slice sizes {} for a tensor {x}", ShapeDisplay(sizes)),
            expected: "one size per dim, each at most the dim's size".into(),
        });
    }
    Ok(x.with_shape(sizes.clone()))
}

pub(super) fn dynamic_update_slice(op: &'static str, inputs: &[TensorType]) -> Result<TensorType> {
    if inputs.len() < 2 {
        return Err(Error::Arity {
            op,
            got: inputs.len(),
            expected: 2,
        });
    }
    let (x, update) = (&inputs[0], &inputs[1]);
    starts(op, x, &inputs[2..])?;
    if update.rank() != x.rank() || (0..x.rank()).any(|i| update.shape[i] > x.shape[i]) {
        return Err(Error::ShapeMismatch {
            op,
            got: format!("update {update} for a tensor {x}"),
            expected: "an update of the same rank, no larger in any dim".into(),
        });
    }
    same_dtype(op, x, update)?;
    Ok(x.clone())
}
