//! Pointwise ops composed of several elementwise ones, as PyTorch defines
//! them: `addcmul`, `addcdiv` (Adam's moment updates) and `lerp` (its first
//! moment in the foreach kernels). Each records its few ops in one call, so a
//! foreign caller reaches it in one C ABI call.

use fusion::{BinaryOp, Scalar};

use super::{Operand, Tensor};
use crate::error::Result;

fn invalid(op: &'static str, message: String) -> crate::error::Error {
    fusion::Error::Invalid { op, message }.into()
}

impl Tensor {
    /// `self + value * t1 * t2`, broadcast and promoted over the three
    /// tensors (`torch.addcmul`).
    #[track_caller]
    pub fn addcmul(&self, t1: &Tensor, t2: &Tensor, value: impl Into<Scalar>) -> Result<Tensor> {
        let value = value.into();
        let product = t1.mul(value)?.mul(t2)?;
        self.add(&product)
    }

    /// `self + value * t1 / t2` (`torch.addcdiv`): floating point only, as in
    /// PyTorch, which refuses integer division here.
    #[track_caller]
    pub fn addcdiv(&self, t1: &Tensor, t2: &Tensor, value: impl Into<Scalar>) -> Result<Tensor> {
        if !t1.dtype().is_float() && !t2.dtype().is_float() {
            return Err(invalid(
                "addcdiv",
                format!(
                    "got integer tensors {} and {}; expected a floating point tensor to divide \
                     (PyTorch no longer divides integers here: use addcmul with 1 / t2)",
                    t1.ty(),
                    t2.ty()
                ),
            ));
        }
        let quotient = t1.mul(value.into())?.div(t2)?;
        self.add(&quotient)
    }

    /// `self + weight * (end - self)` (`torch.lerp`), floating point only, with
    /// PyTorch's form for weights of magnitude 0.5 and more
    /// (`end - (end - self) * (1 - weight)`), so that weight 1 gives `end`
    /// exactly.
    #[track_caller]
    pub fn lerp<'a>(&self, end: &Tensor, weight: impl Into<Operand<'a>>) -> Result<Tensor> {
        for t in [self, end] {
            if !t.dtype().is_float() {
                return Err(invalid(
                    "lerp",
                    format!("got {}; expected floating point tensors", t.ty()),
                ));
            }
        }
        let diff = end.sub(self)?;
        match weight.into() {
            Operand::Scalar(w) if w.as_f64().abs() < 0.5 => self.add(&diff.mul(w)?),
            Operand::Scalar(w) => end.sub(&diff.mul(1.0 - w.as_f64())?),
            Operand::Tensor(w) => {
                let near = self.add(&diff.mul(w)?)?;
                let far = end.sub(&diff.mul(&w.binary_op_reversed(BinaryOp::Sub, 1.0)?)?)?;
                Tensor::where_(&w.abs()?.lt(0.5)?, &near, &far)
            }
        }
    }
}
