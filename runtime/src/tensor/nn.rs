//! Matmul and the composite nn ops.

use fusion::shape::normalize_dim;
use fusion::{F64, Op, Reduction};

use super::Tensor;
use crate::error::Result;

impl Tensor {
    /// `torch.matmul`: batched and broadcasting; 1-d operands are vectors.
    #[track_caller]
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        self.op(Op::Matmul, &[other])
    }

    #[track_caller]
    pub fn softmax(&self, dim: i64) -> Result<Tensor> {
        let dim = normalize_dim("softmax", dim, self.rank())?;
        self.op(Op::Softmax { dim }, &[])
    }

    #[track_caller]
    pub fn log_softmax(&self, dim: i64) -> Result<Tensor> {
        let dim = normalize_dim("log_softmax", dim, self.rank())?;
        self.op(Op::LogSoftmax { dim }, &[])
    }

    /// The gradient of `softmax` along `dim` given its result `output`:
    /// `output * (grad - sum(grad * output))`; with `log`, the gradient of
    /// `log_softmax`: `grad - exp(output) * sum(grad)`.
    #[track_caller]
    pub fn softmax_backward(grad: &Tensor, output: &Tensor, dim: i64, log: bool) -> Result<Tensor> {
        let name = if log {
            "log_softmax_backward"
        } else {
            "softmax_backward"
        };
        let dim = normalize_dim(name, dim, output.rank())? as i64;
        if log {
            grad.sub(&output.exp()?.mul(&grad.sum(&[dim], true)?)?)
        } else {
            output.mul(&grad.sub(&grad.mul(output)?.sum(&[dim], true)?)?)
        }
    }

    /// Layer normalization over the trailing `normalized_shape` dims, with an
    /// optional elementwise `weight` and `bias` of that shape.
    #[track_caller]
    pub fn layer_norm(
        &self,
        normalized_shape: &[i64],
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
    ) -> Result<Tensor> {
        let n = normalized_shape.len();
        let rank = self.rank();
        if n == 0 || n > rank || self.shape()[rank - n..] != *normalized_shape {
            return Err(fusion::Error::ShapeMismatch {
                op: "layer_norm",
                got: format!(
                    "normalized_shape {normalized_shape:?} for an input {}",
                    self.ty()
                ),
                expected: "normalized_shape equal to the input's trailing dims".into(),
            }
            .into());
        }
        let params: Vec<&Tensor> = weight.into_iter().chain(bias).collect();
        self.op(
            Op::LayerNorm {
                normalized_dims: n,
                eps: F64(eps),
                weight: weight.is_some(),
                bias: bias.is_some(),
            },
            &params,
        )
    }

    /// Softmax cross-entropy of logits `[N, C]` (or `[C]`) against integer class
    /// `target`s `[N]` (or `[]`), averaged over targets not equal to -100.
    #[track_caller]
    pub fn cross_entropy(&self, target: &Tensor) -> Result<Tensor> {
        self.cross_entropy_with(target, Reduction::Mean)
    }

    #[track_caller]
    pub fn cross_entropy_with(&self, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
        self.op(Op::CrossEntropy { reduction }, &[target])
    }
}
