//! Optimizer steps, as PyTorch's fused optimizers compute them
//! (`_fused_adam_`, `_fused_adamw_`, `_fused_sgd_`): a parameter's whole
//! update is recorded in one call, so a step over a model's parameters is one
//! C ABI call and lands in one chunk.
//!
//! Everything stays on the device: the step count is a device tensor, so the
//! bias corrections never read it on the host (a host read per step would cut
//! the training loop's chunk). Half-precision parameters are updated in
//! float32 and rounded once, as PyTorch's fused kernels do. AMP's
//! `grad_scale` divides the gradient (which is stored back unscaled, as
//! PyTorch does), and a nonzero `found_inf` makes the step change nothing.

use fusion::{BinaryOp, DType};

use super::{Operand, Tensor};
use crate::error::Result;

fn invalid(op: &'static str, message: String) -> crate::error::Error {
    fusion::Error::Invalid { op, message }.into()
}

/// AMP's gradient scaling for one step (`torch.amp.GradScaler`): the scale
/// the gradients carry, and a flag set when one of them was not finite.
#[derive(Clone, Copy, Default)]
pub struct GradScaling<'a> {
    pub grad_scale: Option<&'a Tensor>,
    pub found_inf: Option<&'a Tensor>,
}

/// Adam's and AdamW's hyper-parameters (the learning rate is passed to each
/// step: it may be a tensor).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Adam {
    pub beta1: f64,
    pub beta2: f64,
    pub weight_decay: f64,
    pub eps: f64,
    pub amsgrad: bool,
    pub maximize: bool,
    /// AdamW: the weight decay shrinks the parameter instead of adding to
    /// the gradient.
    pub decoupled: bool,
}

/// One parameter's tensors going into an Adam step. `step` is the 0-d step
/// count, already incremented for this step (as PyTorch's optimizers do
/// before calling the fused kernel).
pub struct AdamParam<'a> {
    pub param: &'a Tensor,
    pub grad: &'a Tensor,
    pub exp_avg: &'a Tensor,
    pub exp_avg_sq: &'a Tensor,
    /// AMSGrad's running maximum of `exp_avg_sq` (with `amsgrad` only).
    pub max_exp_avg_sq: Option<&'a Tensor>,
    pub step: &'a Tensor,
}

/// The new values of a parameter's tensors after a step.
#[derive(Debug)]
pub struct AdamUpdate {
    pub param: Tensor,
    /// The gradient, unscaled by `grad_scale`.
    pub grad: Tensor,
    pub exp_avg: Tensor,
    pub exp_avg_sq: Tensor,
    pub max_exp_avg_sq: Option<Tensor>,
}

/// SGD's hyper-parameters (the learning rate is passed to each step).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sgd {
    pub weight_decay: f64,
    pub momentum: f64,
    pub dampening: f64,
    pub nesterov: bool,
    pub maximize: bool,
}

/// One parameter's tensors going into an SGD step.
pub struct SgdParam<'a> {
    pub param: &'a Tensor,
    pub grad: &'a Tensor,
    /// The momentum buffer (with a nonzero momentum only).
    pub momentum_buffer: Option<&'a Tensor>,
}

/// The new values of a parameter's tensors after an SGD step.
#[derive(Debug)]
pub struct SgdUpdate {
    pub param: Tensor,
    /// The gradient, unscaled by `grad_scale`.
    pub grad: Tensor,
    pub momentum_buffer: Option<Tensor>,
}

/// The dtype a step computes in: float32 for half-precision parameters.
pub(super) fn opmath(dtype: DType) -> DType {
    match dtype {
        DType::F16 | DType::BF16 => DType::F32,
        d => d,
    }
}

/// Checks that `t` (the parameter's `what`) is a floating tensor of the
/// parameter's shape.
fn check_like(op: &'static str, what: &str, t: &Tensor, param: &Tensor) -> Result<()> {
    if t.shape() != param.shape() || !t.dtype().is_float() {
        return Err(invalid(
            op,
            format!(
                "got {what} {} for a parameter {}; expected a floating-point tensor of the parameter's shape",
                t.ty(),
                param.ty()
            ),
        ));
    }
    Ok(())
}

/// A one-element tensor as a 0-d tensor of `dtype` (a learning rate, a grad
/// scale, a step count).
fn as_scalar_tensor(op: &'static str, what: &str, t: &Tensor, dtype: DType) -> Result<Tensor> {
    if t.numel() != 1 {
        return Err(invalid(
            op,
            format!("got {what} {}; expected a one-element tensor", t.ty()),
        ));
    }
    t.reshape(&[])?.to_dtype(dtype)
}

/// `x * s` for a number or a one-element tensor `s`.
fn times(op: &'static str, what: &str, x: &Tensor, s: Operand) -> Result<Tensor> {
    match s {
        Operand::Scalar(s) => x.mul(s),
        Operand::Tensor(t) => x.mul(&as_scalar_tensor(op, what, t, x.dtype())?),
    }
}

/// The gradient, unscaled, in the compute dtype.
fn unscaled(op: &'static str, grad: &Tensor, c: DType, scaling: GradScaling) -> Result<Tensor> {
    let g = grad.to_dtype(c)?;
    match scaling.grad_scale {
        Some(s) => g.div(&as_scalar_tensor(op, "grad_scale", s, c)?),
        None => Ok(g),
    }
}

/// `new`, or `old` where `found_inf` is set (the step is skipped).
fn unless_inf(
    op: &'static str,
    found_inf: Option<&Tensor>,
    old: &Tensor,
    new: Tensor,
) -> Result<Tensor> {
    match found_inf {
        Some(f) => {
            let skip = as_scalar_tensor(op, "found_inf", f, DType::F32)?.ne(0.0)?;
            Tensor::where_(&skip, old, &new)
        }
        None => Ok(new),
    }
}

/// What every step starts from: the dtype it computes in, the gradient
/// unscaled (stored back as it is), and the gradient it descends along
/// (negated to maximize).
struct Start {
    c: DType,
    grad: Tensor,
    g: Tensor,
}

impl Start {
    fn of(
        op: &'static str,
        param: &Tensor,
        grad: &Tensor,
        maximize: bool,
        scaling: GradScaling,
    ) -> Result<Start> {
        if !param.dtype().is_float() {
            return Err(invalid(
                op,
                format!(
                    "got a parameter {}; expected a floating-point tensor",
                    param.ty()
                ),
            ));
        }
        check_like(op, "grad", grad, param)?;
        let c = opmath(param.dtype());
        let grad = unscaled(op, grad, c, scaling)?;
        let g = if maximize { grad.neg()? } else { grad.clone() };
        Ok(Start { c, grad, g })
    }
}

impl Adam {
    /// One Adam (or AdamW) step of parameter `p` with learning rate `lr` (a
    /// number or a one-element tensor).
    #[track_caller]
    pub fn step<'a>(
        &self,
        p: &AdamParam,
        lr: impl Into<Operand<'a>>,
        scaling: GradScaling,
    ) -> Result<AdamUpdate> {
        let op = if self.decoupled {
            "fused_adamw"
        } else {
            "fused_adam"
        };
        let lr = lr.into();
        let param = p.param;
        for (what, t) in [("exp_avg", p.exp_avg), ("exp_avg_sq", p.exp_avg_sq)] {
            check_like(op, what, t, param)?;
        }
        let max_sq = match (self.amsgrad, p.max_exp_avg_sq) {
            (true, Some(m)) => {
                check_like(op, "max_exp_avg_sq", m, param)?;
                Some(m)
            }
            (true, None) => {
                return Err(invalid(op, "amsgrad needs max_exp_avg_sq, got none".into()));
            }
            (false, _) => None,
        };
        let Start { c, grad, mut g } = Start::of(op, param, p.grad, self.maximize, scaling)?;
        let mut w = param.to_dtype(c)?;
        if self.weight_decay != 0.0 {
            if self.decoupled {
                // w - lr * wd * w
                let decay = times(op, "lr", &w, lr)?.mul(self.weight_decay)?;
                w = w.sub(&decay)?;
            } else {
                g = g.add(&w.mul(self.weight_decay)?)?;
            }
        }
        let m = p
            .exp_avg
            .to_dtype(c)?
            .mul(self.beta1)?
            .add(&g.mul(1.0 - self.beta1)?)?;
        let v = p
            .exp_avg_sq
            .to_dtype(c)?
            .mul(self.beta2)?
            .add(&g.mul(&g)?.mul(1.0 - self.beta2)?)?;
        let step = as_scalar_tensor(op, "step", p.step, c)?;
        let bias1 = step
            .binary_op_reversed(BinaryOp::Pow, self.beta1)?
            .binary_op_reversed(BinaryOp::Sub, 1.0)?;
        let bias2_sqrt = step
            .binary_op_reversed(BinaryOp::Pow, self.beta2)?
            .binary_op_reversed(BinaryOp::Sub, 1.0)?
            .sqrt()?;
        let max_v = match max_sq {
            Some(mx) => Some(mx.to_dtype(c)?.maximum(&v)?),
            None => None,
        };
        let denom = max_v
            .as_ref()
            .unwrap_or(&v)
            .sqrt()?
            .div(&bias2_sqrt)?
            .add(self.eps)?;
        let step_size = times(op, "lr", &bias1.binary_op_reversed(BinaryOp::Div, 1.0)?, lr)?;
        let w = w.sub(&m.div(&denom)?.mul(&step_size)?)?;
        let back = |old: &Tensor, new: Tensor| {
            unless_inf(op, scaling.found_inf, old, new.to_dtype(old.dtype())?)
        };
        Ok(AdamUpdate {
            param: back(param, w)?,
            grad: back(p.grad, grad)?,
            exp_avg: back(p.exp_avg, m)?,
            exp_avg_sq: back(p.exp_avg_sq, v)?,
            max_exp_avg_sq: match (max_sq, max_v) {
                (Some(old), Some(new)) => Some(back(old, new)?),
                _ => None,
            },
        })
    }
}

impl Sgd {
    /// One SGD step of parameter `p` with learning rate `lr` (a number or a
    /// one-element tensor). On the first step the momentum buffer is the
    /// gradient itself.
    #[track_caller]
    pub fn step<'a>(
        &self,
        p: &SgdParam,
        lr: impl Into<Operand<'a>>,
        is_first_step: bool,
        scaling: GradScaling,
    ) -> Result<SgdUpdate> {
        let op = "fused_sgd";
        let lr = lr.into();
        let param = p.param;
        let buffer = match (self.momentum != 0.0, p.momentum_buffer) {
            (true, Some(b)) => {
                check_like(op, "momentum_buffer", b, param)?;
                Some(b)
            }
            (true, None) => {
                return Err(invalid(
                    op,
                    "a nonzero momentum needs a momentum buffer, got none".into(),
                ));
            }
            (false, _) => None,
        };
        let Start { c, grad, mut g } = Start::of(op, param, p.grad, self.maximize, scaling)?;
        let w = param.to_dtype(c)?;
        if self.weight_decay != 0.0 {
            g = g.add(&w.mul(self.weight_decay)?)?;
        }
        let new_buffer = match buffer {
            Some(_) if is_first_step => Some(g.clone()),
            Some(b) => Some(
                b.to_dtype(c)?
                    .mul(self.momentum)?
                    .add(&g.mul(1.0 - self.dampening)?)?,
            ),
            None => None,
        };
        if let Some(b) = &new_buffer {
            g = if self.nesterov {
                g.add(&b.mul(self.momentum)?)?
            } else {
                b.clone()
            };
        }
        let w = w.sub(&times(op, "lr", &g, lr)?)?;
        let back = |old: &Tensor, new: Tensor| {
            unless_inf(op, scaling.found_inf, old, new.to_dtype(old.dtype())?)
        };
        Ok(SgdUpdate {
            param: back(param, w)?,
            grad: back(p.grad, grad)?,
            momentum_buffer: match (buffer, new_buffer) {
                (Some(old), Some(new)) => Some(back(old, new)?),
                _ => None,
            },
        })
    }
}
