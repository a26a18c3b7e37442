//! Inference for reductions, matmul and the composite nn ops.

use super::{arity, check_dims, float_only, same_dtype, unsupported};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::{ReduceOp, Reduction};
use crate::shape::{Shape, TensorType, broadcast_shapes};

/// The shape left after reducing `dims` (all when empty).
pub fn reduced_shape(shape: &[i64], dims: &[usize], keepdim: bool) -> Shape {
    let all = dims.is_empty();
    let mut out = Shape::new();
    for (i, &d) in shape.iter().enumerate() {
        if all || dims.contains(&i) {
            if keepdim {
                out.push(1);
            }
        } else {
            out.push(d);
        }
    }
    out
}

pub(super) fn reduce(
    op: &'static str,
    r: ReduceOp,
    dims: &[usize],
    keepdim: bool,
    inputs: &[TensorType],
) -> Result<TensorType> {
    arity(op, inputs, 1)?;
    let x = &inputs[0];
    check_dims(op, dims, x.rank())?;
    let complex_ok = matches!(
        r,
        ReduceOp::Sum | ReduceOp::Prod | ReduceOp::Mean | ReduceOp::LogSumExp
    );
    if x.dtype.is_complex() && !complex_ok {
        return Err(unsupported(op, x.dtype, "a real dtype"));
    }
    let dtype = match r {
        // PyTorch sums and multiplies bools and ints in int64.
        ReduceOp::Sum | ReduceOp::Prod => {
            if x.dtype.is_inexact() {
                x.dtype
            } else {
                DType::I64
            }
        }
        ReduceOp::Max | ReduceOp::Min => {
            // No identity: PyTorch rejects amax/amin over a dim of size 0.
            let all = dims.is_empty();
            let empty = (0..x.rank()).find(|&d| (all || dims.contains(&d)) && x.shape[d] == 0);
            if let Some(d) = empty {
                return Err(Error::Invalid {
                    op,
                    message: format!(
                        "got an empty reduction over dim {d} of size 0 of {x}, expected every reduced dim to be non-empty"
                    ),
                });
            }
            x.dtype
        }
        ReduceOp::Mean if x.dtype.is_complex() => x.dtype,
        ReduceOp::Mean | ReduceOp::Var { .. } => {
            float_only(op, x)?;
            x.dtype
        }
        ReduceOp::LogSumExp => x.dtype.to_float(),
    };
    Ok(TensorType {
        dtype,
        shape: reduced_shape(&x.shape, dims, keepdim),
    })
}

pub(super) fn arg_reduce(
    op: &'static str,
    dim: Option<usize>,
    keepdim: bool,
    inputs: &[TensorType],
) -> Result<TensorType> {
    arity(op, inputs, 1)?;
    let x = &inputs[0];
    if x.dtype.is_bool() || x.dtype.is_complex() {
        return Err(unsupported(op, x.dtype, "a real numeric dtype"));
    }
    if x.numel() == 0 {
        return Err(Error::Invalid {
            op,
            message: format!("got an empty tensor {x}, expected at least one element"),
        });
    }
    let shape = match dim {
        Some(d) => {
            check_dims(op, &[d], x.rank())?;
            if x.rank() == 0 {
                Shape::new()
            } else {
                reduced_shape(&x.shape, &[d], keepdim)
            }
        }
        None if keepdim => x.shape.iter().map(|_| 1).collect(),
        None => Shape::new(),
    };
    Ok(TensorType {
        dtype: DType::I64,
        shape,
    })
}

pub(super) fn matmul(op: &'static str, inputs: &[TensorType]) -> Result<TensorType> {
    arity(op, inputs, 2)?;
    let (a, b) = (&inputs[0], &inputs[1]);
    if a.rank() == 0 || b.rank() == 0 {
        return Err(Error::ShapeMismatch {
            op,
            got: format!("{a} and {b}"),
            expected: "both arguments to be at least 1-d".into(),
        });
    }
    same_dtype(op, a, b)?;
    if a.dtype.is_bool() {
        return Err(unsupported(op, a.dtype, "a numeric dtype"));
    }
    let k_a = a.shape[a.rank() - 1];
    let k_b = if b.rank() == 1 {
        b.shape[0]
    } else {
        b.shape[b.rank() - 2]
    };
    if k_a != k_b {
        return Err(Error::ShapeMismatch {
            op,
            got: format!("{a} @ {b}"),
            expected: format!(
                "the last dim of the first ({k_a}) to equal the {} dim of the second ({k_b})",
                if b.rank() == 1 {
                    "only"
                } else {
                    "second-to-last"
                }
            ),
        });
    }
    let a_batch = if a.rank() > 2 {
        &a.shape[..a.rank() - 2]
    } else {
        &[][..]
    };
    let b_batch = if b.rank() > 2 {
        &b.shape[..b.rank() - 2]
    } else {
        &[][..]
    };
    let mut shape = broadcast_shapes(op, a_batch, b_batch)?;
    if a.rank() >= 2 {
        shape.push(a.shape[a.rank() - 2]);
    }
    if b.rank() >= 2 {
        shape.push(b.shape[b.rank() - 1]);
    }
    Ok(TensorType {
        dtype: a.dtype,
        shape,
    })
}

pub(super) fn layer_norm(
    op: &'static str,
    normalized_dims: usize,
    weight: bool,
    bias: bool,
    inputs: &[TensorType],
) -> Result<TensorType> {
    arity(op, inputs, 1 + weight as usize + bias as usize)?;
    let x = &inputs[0];
    float_only(op, x)?;
    if normalized_dims == 0 || normalized_dims > x.rank() {
        return Err(Error::ShapeMismatch {
            op,
            got: format!("{normalized_dims} normalized dims for an input {x}"),
            expected: format!("between 1 and {} normalized dims", x.rank()),
        });
    }
    let normalized = &x.shape[x.rank() - normalized_dims..];
    for p in &inputs[1..] {
        if p.shape.as_slice() != normalized {
            return Err(Error::ShapeMismatch {
                op,
                got: format!("weight/bias {p} for an input {x}"),
                expected: format!("the normalized shape {normalized:?}"),
            });
        }
        same_dtype(op, x, p)?;
    }
    Ok(x.clone())
}

pub(super) fn cross_entropy(
    op: &'static str,
    reduction: Reduction,
    inputs: &[TensorType],
) -> Result<TensorType> {
    arity(op, inputs, 2)?;
    class_targets(op, &inputs[0], &inputs[1])?;
    Ok(loss_type(&inputs[0], &inputs[1], reduction))
}

/// The loss of `reduction` over rows of `input` with a target each: one per
/// row, or 0-d.
fn loss_type(input: &TensorType, target: &TensorType, reduction: Reduction) -> TensorType {
    let shape = match reduction {
        Reduction::None => target.shape.clone(),
        Reduction::Mean | Reduction::Sum => Shape::new(),
    };
    TensorType {
        dtype: input.dtype,
        shape,
    }
}

/// Checks scores `input` (`[N, C]` or `[C]`, floating point) against class
/// indices `target` (`[N]` or `[]`, integer).
fn class_targets(op: &'static str, input: &TensorType, target: &TensorType) -> Result<()> {
    float_only(op, input)?;
    if !target.dtype.is_int() {
        return Err(Error::Invalid {
            op,
            message: format!(
                "target has dtype {}, expected class indices of an integer dtype",
                target.dtype
            ),
        });
    }
    let ok = match input.rank() {
        1 => target.rank() == 0,
        2 => target.rank() == 1 && target.shape[0] == input.shape[0],
        _ => false,
    };
    if !ok {
        return Err(Error::ShapeMismatch {
            op,
            got: format!("input {input} and target {target}"),
            expected: "input [N, C] with target [N], or input [C] with a 0-d target".into(),
        });
    }
    Ok(())
}

/// `nll_loss`'s operands, `(log_probs, target[, weight])`, starting at
/// `inputs[0]`: checked, the weight a float per class of the input's dtype.
fn nll_operands(op: &'static str, inputs: &[TensorType], weighted: bool) -> Result<()> {
    arity(op, inputs, 2 + weighted as usize)?;
    let (input, target) = (&inputs[0], &inputs[1]);
    class_targets(op, input, target)?;
    if weighted {
        let w = &inputs[2];
        let classes = input.shape[input.rank() - 1];
        if w.shape.as_slice() != [classes] || w.dtype != input.dtype {
            return Err(Error::ShapeMismatch {
                op,
                got: format!("weight {w} for an input {input}"),
                expected: format!("a weight per class: {}[{classes}]", input.dtype),
            });
        }
    }
    Ok(())
}

pub(super) fn nll_loss(
    op: &'static str,
    reduction: Reduction,
    weighted: bool,
    inputs: &[TensorType],
) -> Result<TensorType> {
    nll_operands(op, inputs, weighted)?;
    Ok(loss_type(&inputs[0], &inputs[1], reduction))
}

pub(super) fn nll_loss_total_weight(
    op: &'static str,
    weighted: bool,
    inputs: &[TensorType],
) -> Result<TensorType> {
    nll_operands(op, inputs, weighted)?;
    Ok(TensorType::scalar(inputs[0].dtype))
}

/// `(grad, log_probs, target, total_weight[, weight])`.
pub(super) fn nll_loss_backward(
    op: &'static str,
    reduction: Reduction,
    weighted: bool,
    inputs: &[TensorType],
) -> Result<TensorType> {
    arity(op, inputs, 4 + weighted as usize)?;
    let (grad, input, target, total) = (&inputs[0], &inputs[1], &inputs[2], &inputs[3]);
    let mut operands = vec![input.clone(), target.clone()];
    operands.extend(inputs.get(4).cloned());
    nll_operands(op, &operands, weighted)?;
    let want = loss_type(input, target, reduction);
    if grad != &want || total != &TensorType::scalar(input.dtype) {
        return Err(Error::ShapeMismatch {
            op,
            got: format!("grad {grad} and total weight {total}"),
            expected: format!(
                "grad {want} (the loss's type) and a total weight {}",
                TensorType::scalar(input.dtype)
            ),
        });
    }
    Ok(input.clone())
}

/// `(index, number, previous)` of `Op::IndexCheck`.
pub(super) fn index_check(op: &'static str, inputs: &[TensorType]) -> Result<TensorType> {
    arity(op, inputs, 3)?;
    let (index, number, previous) = (&inputs[0], &inputs[1], &inputs[2]);
    if !index.dtype.is_int()
        || number != &TensorType::scalar(DType::I64)
        || previous != &TensorType::scalar(DType::I32)
    {
        return Err(Error::Invalid {
            op,
            message: format!(
                "got index {index}, number {number} and flag {previous}; expected integer \
                 indices, an int64 number and an int32 flag, both 0-d"
            ),
        });
    }
    Ok(TensorType::scalar(DType::I32))
}
