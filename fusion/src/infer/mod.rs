//! Shape and dtype inference: `Op::infer` checks an op's inputs and gives its
//! output type, or an error naming the op, what it got and what it expected.
//! Every mode runs it when an op is recorded, so bad input fails at the
//! caller's line even when execution is deferred.

mod collective;
mod conv;
mod elementwise;
mod fft;
mod layout;
mod linalg;
mod pool;
mod random;
mod reduce;
mod scan;
mod view;

pub(crate) use elementwise::binary_compute_dtype;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::Op;
use crate::shape::TensorType;

impl Op {
    /// The output type of this op applied to inputs of types `inputs`.
    pub fn infer(&self, inputs: &[TensorType]) -> Result<TensorType> {
        let op = self.name();
        match self {
            Op::Full { ty, .. } => {
                arity(op, inputs, 0)?;
                check_shape(op, &ty.shape)?;
                Ok(ty.clone())
            }
            Op::Arange { len, dtype, .. } => {
                arity(op, inputs, 0)?;
                if *dtype == DType::Bool {
                    return Err(unsupported(op, *dtype, "a numeric dtype"));
                }
                check_shape(op, &[*len])?;
                Ok(TensorType::new(*dtype, &[*len]))
            }
            Op::RandUniform { shape, dtype } => random::rand_uniform(op, shape, *dtype, inputs),
            Op::RandGamma | Op::RandPoisson => random::rand_loop(op, 1, inputs),
            Op::RandBinomial => random::rand_loop(op, 2, inputs),
            Op::DirichletGrad => random::same_floats(op, 3, inputs),
            Op::Unary(u) => elementwise::unary(op, *u, inputs),
            Op::Binary(b) => elementwise::binary(op, *b, inputs),
            Op::Where => elementwise::where_(op, inputs),
            Op::Ternary(t) => elementwise::ternary(op, *t, inputs),
            Op::Clamp { min, max } => elementwise::clamp(op, *min, *max, inputs),
            Op::Cast(dtype) => {
                arity(op, inputs, 1)?;
                Ok(inputs[0].with_dtype(*dtype))
            }
            Op::Bitcast(dtype) => elementwise::bitcast(op, *dtype, inputs),
            Op::Reshape(shape) => layout::reshape(op, shape, inputs),
            Op::Permute(perm) => layout::permute(op, perm, inputs),
            Op::BroadcastTo(shape) => layout::broadcast_to(op, shape, inputs),
            Op::Slice {
                dim,
                start,
                end,
                step,
            } => layout::slice(op, *dim, *start, *end, *step, inputs),
            Op::Concat { dim } => layout::concat(op, *dim, inputs),
            Op::Pad { low, high, .. } => layout::pad(op, low, high, inputs),
            Op::Flip(dims) => {
                arity(op, inputs, 1)?;
                check_dims(op, dims, inputs[0].rank())?;
                Ok(inputs[0].clone())
            }
            Op::IndexSelect { dim } => layout::index_select(op, *dim, inputs),
            Op::Gather { dim } => layout::gather(op, *dim, inputs),
            Op::Scatter { dim, .. } => layout::scatter(op, *dim, inputs),
            Op::DynamicSlice { sizes } => layout::dynamic_slice(op, sizes, inputs),
            Op::DynamicUpdateSlice => layout::dynamic_update_slice(op, inputs),
            Op::AsStrided {
                sizes,
                strides,
                offset,
            } => view::as_strided(op, sizes, strides, *offset, inputs),
            Op::AsStridedScatter {
                sizes,
                strides,
                offset,
            } => view::as_strided_scatter(op, sizes, strides, *offset, inputs),
            Op::Reduce {
                op: r,
                dims,
                keepdim,
            } => reduce::reduce(op, *r, dims, *keepdim, inputs),
            Op::ArgReduce { dim, keepdim, .. } => reduce::arg_reduce(op, *dim, *keepdim, inputs),
            Op::Scan { op: scan_op, dim } => scan::scan(op, *scan_op, *dim, inputs),
            Op::Sort { dim, output, .. } => scan::sort(op, *dim, *output, inputs),
            Op::Matmul => reduce::matmul(op, inputs),
            Op::Fft { kind, lengths } => fft::fft(op, *kind, lengths, inputs),
            Op::Cholesky { .. } => linalg::cholesky(op, inputs),
            Op::CholeskyInfo { .. } => linalg::cholesky_info(op, inputs),
            Op::Lu { output } => linalg::lu(op, *output, inputs),
            Op::Ldl { output } => linalg::ldl(op, *output, inputs),
            Op::LdlSolve => linalg::ldl_solve(op, inputs),
            Op::Polynomial(_) => {
                arity(op, inputs, 2)?;
                float_only(op, &inputs[0])?;
                if inputs[1] != inputs[0] {
                    return Err(Error::ShapeMismatch {
                        op,
                        got: format!("x {} and n {}", inputs[0], inputs[1]),
                        expected: "x and n of one shape and dtype".into(),
                    });
                }
                Ok(inputs[0].clone())
            }
            Op::LuPermutation { rows } => linalg::lu_permutation(op, *rows, inputs),
            Op::Householder { output } => linalg::householder(op, *output, inputs),
            Op::Eigh { output, .. } => linalg::eigh(op, *output, inputs),
            Op::ApplyHouseholder { left, .. } => linalg::apply_householder(op, *left, inputs),
            Op::TriangularSolve { left, .. } => linalg::triangular_solve(op, *left, inputs),
            Op::Softmax { dim } | Op::LogSoftmax { dim } => {
                arity(op, inputs, 1)?;
                float_only(op, &inputs[0])?;
                check_dims(op, &[*dim], inputs[0].rank())?;
                Ok(inputs[0].clone())
            }
            Op::LayerNorm {
                normalized_dims,
                weight,
                bias,
                ..
            } => reduce::layer_norm(op, *normalized_dims, *weight, *bias, inputs),
            Op::CrossEntropy { reduction } => reduce::cross_entropy(op, *reduction, inputs),
            Op::NllLoss {
                reduction,
                weighted,
                ..
            } => reduce::nll_loss(op, *reduction, *weighted, inputs),
            Op::NllLossTotalWeight { weighted, .. } => {
                reduce::nll_loss_total_weight(op, *weighted, inputs)
            }
            Op::NllLossBackward {
                reduction,
                weighted,
                ..
            } => reduce::nll_loss_backward(op, *reduction, *weighted, inputs),
            Op::IndexCheck { .. } => reduce::index_check(op, inputs),
            Op::Conv(spec) => conv::conv(op, spec, inputs),
            Op::ConvBackwardInput { spec, input } => conv::backward_input(op, spec, input, inputs),
            Op::ConvBackwardWeight { spec, weight } => {
                conv::backward_weight(op, spec, weight, inputs)
            }
            Op::MaxPool(pool) => pool::max_pool(op, pool, false, inputs),
            Op::MaxPoolIndices(pool) => pool::max_pool(op, pool, true, inputs),
            Op::AvgPool {
                pool,
                divisor_override,
                ..
            } => pool::avg_pool(op, pool, *divisor_override, inputs),
            Op::Collective(c) => collective::infer(op, c, inputs),
        }
    }
}

pub(crate) fn arity(op: &'static str, inputs: &[TensorType], expected: usize) -> Result<()> {
    if inputs.len() != expected {
        return Err(Error::Arity {
            op,
            got: inputs.len(),
            expected,
        });
    }
    Ok(())
}

pub(crate) fn unsupported(op: &'static str, got: DType, expected: &'static str) -> Error {
    Error::UnsupportedDType { op, got, expected }
}

/// `b` must have `a`'s dtype (no promotion for this op).
pub(crate) fn same_dtype(op: &'static str, a: &TensorType, b: &TensorType) -> Result<()> {
    if a.dtype != b.dtype {
        return Err(Error::DTypeMismatch {
            op,
            lhs: a.dtype,
            rhs: b.dtype,
        });
    }
    Ok(())
}

pub(crate) fn float_only(op: &'static str, t: &TensorType) -> Result<()> {
    if !t.dtype.is_float() {
        return Err(unsupported(op, t.dtype, "a floating-point dtype"));
    }
    Ok(())
}

pub(crate) fn int_only(op: &'static str, what: &str, t: &TensorType) -> Result<()> {
    if !t.dtype.is_int() {
        return Err(Error::Invalid {
            op,
            message: format!("{what} has dtype {}, expected an integer dtype", t.dtype),
        });
    }
    Ok(())
}

pub(crate) use crate::shape::check_shape;

/// Normalized dims must be in range and distinct.
pub(crate) fn check_dims(op: &'static str, dims: &[usize], rank: usize) -> Result<()> {
    for (i, &d) in dims.iter().enumerate() {
        if d >= rank.max(1) {
            return Err(Error::BadDim {
                op,
                dim: d as i64,
                rank,
            });
        }
        if dims[..i].contains(&d) {
            return Err(Error::Invalid {
                op,
                message: format!("dim {d} appears more than once in {dims:?}"),
            });
        }
    }
    Ok(())
}
