//! The negative log-likelihood loss over log-probabilities (PyTorch's
//! `nll_loss`, which `cross_entropy` calls after `log_softmax`) and its
//! gradient. (`Tensor::cross_entropy`, one `Op`, takes logits.)

use fusion::{DType, Reduction};

use super::Tensor;
use crate::error::Result;

/// Checks the operands of `op`: log-probabilities `[N, C]` or `[C]`, integer
/// targets `[N]` or `[]`, an optional float weight `[C]`. The shape of the
/// targets.
fn rows(
    op: &'static str,
    input: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
) -> Result<Vec<i64>> {
    let bad = |got: String, expected: &str| -> crate::error::Error {
        fusion::Error::ShapeMismatch {
            op,
            got,
            expected: expected.into(),
        }
        .into()
    };
    if !input.dtype().is_float() {
        return Err(fusion::Error::UnsupportedDType {
            op,
            got: input.dtype(),
            expected: "floating-point log-probabilities",
        }
        .into());
    }
    let rank = input.rank();
    if rank != 1 && rank != 2 {
        return Err(bad(
            format!("input {}", input.ty()),
            "log-probabilities [N, C] or [C]",
        ));
    }
    if target.dtype().is_float() || target.dtype() == DType::Bool {
        return Err(bad(
            format!("target {}", target.ty()),
            "integer class targets",
        ));
    }
    if target.shape() != &input.shape()[..rank - 1] {
        return Err(bad(
            format!("target {} for an input {}", target.ty(), input.ty()),
            "a target per row of the input",
        ));
    }
    if let Some(w) = weight
        && (w.shape() != &input.shape()[rank - 1..] || !w.dtype().is_float())
    {
        return Err(bad(
            format!("weight {} for an input {}", w.ty(), input.ty()),
            "a float weight per class",
        ));
    }
    Ok(target.shape().to_vec())
}

impl Tensor {
    /// PyTorch's `nll_loss` of log-probabilities `self` (`[N, C]` or `[C]`)
    /// against class `target`s (`[N]` or `[]`): `(loss, total_weight)`.
    /// A target's loss is `-self[target] * weight[target]` (weight 1 without
    /// one); a target equal to `ignore_index` weighs 0, and a target out of
    /// range is an error (at the op in debug mode, at the next read or sync
    /// otherwise). `total_weight` is the weights' sum, what `Mean` divides by.
    #[track_caller]
    pub fn nll_loss(
        &self,
        target: &Tensor,
        weight: Option<&Tensor>,
        reduction: Reduction,
        ignore_index: i64,
    ) -> Result<(Tensor, Tensor)> {
        let rows = rows("nll_loss", self, target, weight)?;
        let t = target.to_dtype(DType::I64)?;
        let ignored = t.eq(ignore_index)?;
        // Ignored targets pick class 0 (a checked gather) and weigh 0.
        let safe = Tensor::where_(&ignored, 0i64, &t)?;
        let column: Vec<i64> = rows.iter().copied().chain([1]).collect();
        let picked = self.gather(-1, &safe.reshape(&column)?)?.reshape(&rows)?;
        let w = match weight {
            Some(w) => w
                .to_dtype(self.dtype())?
                .index_select(0, &safe.reshape(&[-1])?)?
                .reshape(&rows)?,
            None => self.device().ones(&rows, self.dtype())?,
        };
        let w = Tensor::where_(&ignored, 0.0, &w)?;
        let loss = (&picked * &w)?.neg()?;
        let total_weight = w.sum_all()?;
        let out = match reduction {
            Reduction::None => loss,
            Reduction::Sum => loss.sum_all()?,
            Reduction::Mean => (&loss.sum_all()? / &total_weight)?,
        };
        Ok((out, total_weight))
    }

    /// The gradient of `nll_loss` with respect to its `input`, `self` being
    /// the gradient of the loss and `total_weight` what `nll_loss` returned.
    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    pub fn nll_loss_backward(
        &self,
        input: &Tensor,
        target: &Tensor,
        weight: Option<&Tensor>,
        reduction: Reduction,
        ignore_index: i64,
        total_weight: &Tensor,
    ) -> Result<Tensor> {
        let rows = rows("nll_loss_backward", input, target, weight)?;
        let classes = input.shape()[input.rank() - 1];
        let column: Vec<i64> = rows.iter().copied().chain([1]).collect();
        let t = target.to_dtype(DType::I64)?.reshape(&column)?;
        // Each row one-hot at its target, scaled by the target's weight; an
        // ignored (or out-of-range) target gives a row of zeros.
        let hit = t
            .eq(&input.device().arange(0i64, classes, 1i64)?)?
            .logical_and(&t.ne(ignore_index)?)?;
        let w = match weight {
            Some(w) => w.to_dtype(input.dtype())?,
            None => input.device().ones(&[], input.dtype())?,
        };
        let one_hot = Tensor::where_(&hit, &w, 0.0)?;
        let g = match reduction {
            Reduction::None if input.rank() == 2 => self.reshape(&column)?,
            Reduction::Mean => (self / total_weight)?,
            _ => self.clone(),
        };
        (&one_hot * &g)?.neg()
    }
}
