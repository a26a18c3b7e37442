//! Matmul and the composite nn ops.

use fusion::shape::normalize_dim;
use fusion::{DType, F64, Op, Reduction};

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
        let dtype = output.dtype();
        if matches!(dtype, DType::F16 | DType::BF16) {
            // In float32, rounded once at the end, as PyTorch's kernels
            // compute it: in 16 bits, `grad - sum` cancels to a few ulps.
            let (g, y) = (grad.to_dtype(DType::F32)?, output.to_dtype(DType::F32)?);
            return Tensor::softmax_backward(&g, &y, dim, log)?.to_dtype(dtype);
        }
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

    /// The gradient of an embedding lookup (`embedding_dense_backward`):
    /// `[num_weights, D]`, the rows of `self` (the gradient of the lookup's
    /// result, `indices`' shape then `D`) summed into the rows their
    /// `indices` name. Rows looked up at `padding_idx` give no gradient (a
    /// negative `padding_idx` counts from the end, as in
    /// `torch.nn.functional.embedding`); with `scale_grad_by_freq`, each row
    /// is divided by how often its index occurs in `indices`.
    #[track_caller]
    pub fn embedding_backward(
        &self,
        indices: &Tensor,
        num_weights: i64,
        padding_idx: Option<i64>,
        scale_grad_by_freq: bool,
    ) -> Result<Tensor> {
        let op = "embedding_backward";
        let invalid = |message: String| -> crate::error::Error {
            fusion::Error::Invalid { op, message }.into()
        };
        if !indices.dtype().is_int() {
            return Err(invalid(format!(
                "expected integer indices, got {} (with a gradient {})",
                indices.ty(),
                self.ty()
            )));
        }
        let n = indices.numel();
        let width = self.shape().last().copied().unwrap_or(0);
        if self.rank() == 0 || self.numel() != n * width {
            return Err(invalid(format!(
                "a gradient {} for indices {} (expected the indices' shape then the embedding width)",
                self.ty(),
                indices.ty()
            )));
        }
        if num_weights < 0 {
            return Err(invalid(format!(
                "num_weights {num_weights} (expected at least 0)"
            )));
        }
        let padding_idx = match padding_idx {
            Some(p) if !(-num_weights..num_weights).contains(&p) => {
                return Err(invalid(format!(
                    "padding_idx {p} for {num_weights} weights (expected a row in [{}, {}])",
                    -num_weights,
                    num_weights - 1
                )));
            }
            Some(p) => Some(p.rem_euclid(num_weights.max(1))),
            None => None,
        };
        let zeros = self.device().zeros(&[num_weights, width], self.dtype())?;
        if n == 0 {
            return Ok(zeros);
        }
        let index = indices.to_dtype(DType::I64)?.reshape(&[n])?;
        let mut rows = self.reshape(&[n, width])?;
        if let Some(p) = padding_idx {
            // A row at padding_idx is dropped, not scaled by zero: a NaN or
            // inf gradient there stays out, as on PyTorch's CPU.
            let kept = index.ne(p)?.reshape(&[n, 1])?;
            rows = Tensor::where_(&kept, &rows, 0)?;
        }
        if scale_grad_by_freq {
            let ones = self.device().ones(&[n], self.dtype())?;
            let counts = self
                .device()
                .zeros(&[num_weights], self.dtype())?
                .index_add(0, &index, &ones, 1)?;
            let freq = counts.index_select(0, &index)?.reshape(&[n, 1])?;
            rows = rows.div(&freq)?;
        }
        zeros.index_add(0, &index, &rows, 1)
    }
}
