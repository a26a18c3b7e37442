//! The negative log-likelihood loss over log-probabilities (PyTorch's
//! `nll_loss`, which `cross_entropy` calls after `log_softmax`) and its
//! gradient. (`Tensor::cross_entropy`, one `Op`, takes logits.)

use fusion::{BinaryOp, DType, Op, Reduction, named_ops};

use super::Tensor;
use crate::error::Result;

/// Checks the operands of `op`: log-probabilities `[N, C]` or `[C]`, integer
/// targets `[N]` or `[]`, an optional float weight `[C]`: errors in PyTorch's
/// terms before the op's own inference.
fn check_operands(
    op: &'static str,
    input: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
) -> Result<()> {
    let bad = |got: String, expected: &str| -> crate::error::Error {
        fusion::Error::ShapeMismatch {
            op,
            got,
            expected: expected.into(),
        }
        .into()
    };
    input.expect_float(op, "floating-point log-probabilities")?;
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
    Ok(())
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
        check_operands("nll_loss", self, target, weight)?;
        let weight = weight.map(|w| w.to_dtype(self.dtype())).transpose()?;
        let mut operands = vec![target];
        operands.extend(weight.as_ref());
        let weighted = weight.is_some();
        let loss = self.op(
            Op::NllLoss {
                reduction,
                ignore_index,
                weighted,
            },
            &operands,
        )?;
        let total_weight = self.op(
            Op::NllLossTotalWeight {
                ignore_index,
                weighted,
            },
            &operands,
        )?;
        Ok((loss, total_weight))
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
        check_operands("nll_loss_backward", input, target, weight)?;
        let dtype = input.dtype();
        // The gradient and the total weight in the input's dtype (PyTorch
        // hands them over in it; a caller of this API may not).
        let grad = self.to_dtype(dtype)?;
        let total_weight = total_weight.to_dtype(dtype)?;
        let weight = weight.map(|w| w.to_dtype(dtype)).transpose()?;
        let mut operands = vec![input, target, &total_weight];
        operands.extend(weight.as_ref());
        grad.op(
            Op::NllLossBackward {
                reduction,
                ignore_index,
                weighted: weight.is_some(),
            },
            &operands,
        )
    }
}

/// A loss taken element by element between an input and its target, then
/// reduced: PyTorch's `mse_loss`, `smooth_l1_loss`, `huber_loss` and
/// `binary_cross_entropy`. `d` below is `input - target`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PointwiseLoss {
    /// `d^2`.
    Mse,
    /// `d^2 / (2 beta)` where `|d| < beta`, else `|d| - beta / 2`; beta 0 is
    /// the L1 loss. `beta >= 0`.
    SmoothL1 { beta: f64 },
    /// `d^2 / 2` where `|d| < delta`, else `delta (|d| - delta / 2)`.
    /// `delta > 0`.
    Huber { delta: f64 },
    /// `-(t log(x) + (1 - t) log(1 - x))` of probabilities `x`, each log
    /// clamped at -100 as PyTorch does (x of 0 or 1 gives a finite loss; x
    /// outside [0, 1] gives NaN, where the CPU raises after a host sync).
    BinaryCrossEntropy,
}

named_ops! {
    /// The pointwise losses by name, without their parameter
    /// ([`PointwiseLoss::of`] adds smooth L1's `beta` and Huber's `delta`).
    PointwiseLossKind {
        /// [`PointwiseLoss::Mse`].
        Mse mse_loss,
        /// [`PointwiseLoss::SmoothL1`].
        SmoothL1 smooth_l1_loss,
        /// [`PointwiseLoss::Huber`].
        Huber huber_loss,
        /// [`PointwiseLoss::BinaryCrossEntropy`].
        BinaryCrossEntropy binary_cross_entropy,
    }
}

impl PointwiseLoss {
    /// The loss of `kind` with its parameter (`beta` or `delta`; ignored by
    /// the others).
    pub fn of(kind: PointwiseLossKind, parameter: f64) -> PointwiseLoss {
        match kind {
            PointwiseLossKind::Mse => PointwiseLoss::Mse,
            PointwiseLossKind::SmoothL1 => PointwiseLoss::SmoothL1 { beta: parameter },
            PointwiseLossKind::Huber => PointwiseLoss::Huber { delta: parameter },
            PointwiseLossKind::BinaryCrossEntropy => PointwiseLoss::BinaryCrossEntropy,
        }
    }

    /// Which loss, without its parameter.
    pub fn kind(self) -> PointwiseLossKind {
        match self {
            PointwiseLoss::Mse => PointwiseLossKind::Mse,
            PointwiseLoss::SmoothL1 { .. } => PointwiseLossKind::SmoothL1,
            PointwiseLoss::Huber { .. } => PointwiseLossKind::Huber,
            PointwiseLoss::BinaryCrossEntropy => PointwiseLossKind::BinaryCrossEntropy,
        }
    }

    /// The loss as PyTorch names it.
    pub fn name(self) -> &'static str {
        self.kind().name()
    }

    /// Checks the operands and the parameter, naming the loss.
    fn check(self, input: &Tensor, target: &Tensor) -> Result<()> {
        let op = self.name();
        let invalid = |message: String| -> crate::error::Error {
            fusion::Error::Invalid { op, message }.into()
        };
        match self {
            PointwiseLoss::SmoothL1 { beta } if beta.is_nan() || beta < 0.0 => {
                return Err(invalid(format!("beta must be >= 0, got {beta}")));
            }
            PointwiseLoss::Huber { delta } if delta.is_nan() || delta <= 0.0 => {
                return Err(invalid(format!("delta must be > 0, got {delta}")));
            }
            PointwiseLoss::BinaryCrossEntropy if target.shape() != input.shape() => {
                return Err(fusion::Error::ShapeMismatch {
                    op,
                    got: format!("target {} for an input {}", target.ty(), input.ty()),
                    expected: "a target of the input's shape".into(),
                }
                .into());
            }
            _ => {}
        }
        input.expect_float(op, "a floating-point input")
    }
}

/// `loss` (elementwise) summed or averaged over all its elements as asked.
fn reduce(loss: Tensor, reduction: Reduction) -> Result<Tensor> {
    match reduction {
        Reduction::None => Ok(loss),
        Reduction::Sum => loss.sum_all(),
        Reduction::Mean => loss.mean_all(),
    }
}

impl Tensor {
    /// `loss` of `self` against `target` element by element, times `weight`
    /// (broadcast) when given, reduced as asked.
    #[track_caller]
    pub fn pointwise_loss(
        &self,
        target: &Tensor,
        weight: Option<&Tensor>,
        loss: PointwiseLoss,
        reduction: Reduction,
    ) -> Result<Tensor> {
        loss.check(self, target)?;
        let elementwise = match loss {
            PointwiseLoss::Mse => {
                let d = (self - target)?;
                (&d * &d)?
            }
            PointwiseLoss::SmoothL1 { beta } => {
                let d = (self - target)?;
                let l1 = d.abs()?;
                if beta > 0.0 {
                    let quadratic = (&d * &d)?.mul(0.5 / beta)?;
                    Tensor::where_(&l1.lt(beta)?, &quadratic, &l1.sub(0.5 * beta)?)?
                } else {
                    l1
                }
            }
            PointwiseLoss::Huber { delta } => {
                let d = (self - target)?;
                let z = d.abs()?;
                let quadratic = (&d * &d)?.mul(0.5)?;
                let linear = z.sub(0.5 * delta)?.mul(delta)?;
                Tensor::where_(&z.lt(delta)?, &quadratic, &linear)?
            }
            PointwiseLoss::BinaryCrossEntropy => {
                let log_p = self.log()?.clamp_min(-100.0)?;
                let log_q = self.neg()?.log1p()?.clamp_min(-100.0)?;
                (&(&target.sub(1.0)? * &log_q)? - &(target * &log_p)?)?
            }
        };
        let weighted = match weight {
            Some(w) => (&elementwise * w)?,
            None => elementwise,
        };
        reduce(weighted, reduction)
    }

    /// The gradient of `pointwise_loss` with respect to its `input`, `self`
    /// being the gradient of the loss.
    #[track_caller]
    pub fn pointwise_loss_backward(
        &self,
        input: &Tensor,
        target: &Tensor,
        weight: Option<&Tensor>,
        loss: PointwiseLoss,
        reduction: Reduction,
    ) -> Result<Tensor> {
        loss.check(input, target)?;
        // d loss / d input, element by element.
        let slope = match loss {
            PointwiseLoss::Mse => (input - target)?.mul(2.0)?,
            // d / beta inside (-beta, beta), -1 or 1 outside; at d == 0 with
            // beta 0 it is -1, as on the CPU.
            PointwiseLoss::SmoothL1 { beta } => {
                let d = (input - target)?;
                let inside = if beta > 0.0 {
                    d.mul(1.0 / beta)?
                } else {
                    d.zeros_like()?
                };
                let outside = Tensor::where_(&d.ge(beta)?, 1.0, &inside)?;
                Tensor::where_(&d.le(-beta)?, -1.0, &outside)?
            }
            PointwiseLoss::Huber { delta } => (input - target)?.clamp(-delta, delta)?,
            // (x - t) / max(x (1 - x), 1e-12)
            PointwiseLoss::BinaryCrossEntropy => {
                let denominator =
                    (&input.binary_op_reversed(BinaryOp::Sub, 1.0)? * input)?.clamp_min(1e-12)?;
                ((input - target)? / &denominator)?
            }
        };
        let mut grad = (&slope * self)?;
        if let Some(w) = weight {
            grad = (&grad * w)?;
        }
        if reduction == Reduction::Mean {
            grad = grad.mul(1.0 / input.numel().max(1) as f64)?;
        }
        Ok(grad)
    }
}
