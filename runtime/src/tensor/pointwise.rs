//! Pointwise ops beyond the elementwise ones, as PyTorch defines them:
//! `addcmul`, `addcdiv` (Adam's moment updates) and `lerp` (its first moment
//! in the foreach kernels), one op each (`Op::Ternary`) where their scalar is
//! a number that does not promote them; `hypot`, `xlogy` and `fmod`, which
//! record their few ops in one call, so a foreign caller reaches each in one
//! C ABI call.
//! And the orthogonal polynomials of `torch.special` at elementwise degrees.

use fusion::shape::broadcast_shapes;
use fusion::{BinaryOp, DType, Op, Polynomial, ResultType, Scalar, TernaryOp};

use std::sync::Arc;

use super::{Operand, Tensor};
use crate::error::Result;
use crate::value::Value;

fn invalid(op: &'static str, message: String) -> crate::error::Error {
    fusion::Error::Invalid { op, message }.into()
}

impl Tensor {
    /// The polynomial `kind` of degree `trunc(n)` at `self`, elementwise
    /// (`torch.special.chebyshev_polynomial_t(x, n)` and its kin; 0 for a
    /// negative degree). x and n broadcast and promote as a binary op's
    /// operands, to a float dtype.
    #[track_caller]
    pub fn polynomial(&self, kind: Polynomial, n: &Tensor) -> Result<Tensor> {
        let mut dtype = Operand::from(n).promoted_with(self);
        if !dtype.is_float() {
            dtype = DType::DEFAULT_FLOAT;
        }
        let shape = broadcast_shapes(kind.name(), self.shape(), n.shape())?;
        let x = self.to_dtype(dtype)?.expand(&shape)?;
        let n = n.to_dtype(dtype)?.expand(&shape)?;
        x.op(Op::Polynomial(kind), &[&n])
    }

    /// `self + alpha * other` (`torch.add` with `alpha`), broadcast and
    /// promoted as `self + other` is: alpha never changes the result's
    /// dtype, and, as in PyTorch, is refused when it is a float and the
    /// result integral, or a bool and the result not bool.
    #[track_caller]
    pub fn add_scaled<'a>(
        &self,
        other: impl Into<Operand<'a>>,
        alpha: impl Into<Scalar>,
    ) -> Result<Tensor> {
        self.scaled_op(BinaryOp::Add, other.into(), alpha.into())
    }

    /// `self - alpha * other` (`torch.sub` with `alpha`), as
    /// [`Tensor::add_scaled`].
    #[track_caller]
    pub fn sub_scaled<'a>(
        &self,
        other: impl Into<Operand<'a>>,
        alpha: impl Into<Scalar>,
    ) -> Result<Tensor> {
        self.scaled_op(BinaryOp::Sub, other.into(), alpha.into())
    }

    #[track_caller]
    fn scaled_op(&self, op: BinaryOp, other: Operand, alpha: Scalar) -> Result<Tensor> {
        let dtype = other.promoted_with(self);
        let refused = match alpha {
            Scalar::Bool(_) => dtype != DType::Bool,
            Scalar::Float(_) => !dtype.is_float(),
            Scalar::Int(_) => false,
        };
        if refused {
            return Err(invalid(
                op.name(),
                format!(
                    "got alpha {alpha} for {} and {}; expected an alpha of the result's kind \
                     ({dtype}: a float alpha needs a floating-point result, a bool alpha a bool one)",
                    self.ty(),
                    describe(&other)
                ),
            ));
        }
        let unit = match alpha {
            Scalar::Bool(b) => b,
            Scalar::Int(i) => i == 1,
            Scalar::Float(f) => f == 1.0,
        };
        if unit {
            return self.binary_op(op, other);
        }
        match other {
            // In the result's dtype first: an int64 `other` scaled by 2.5 for
            // a float64 result multiplies in float64, as PyTorch does.
            Operand::Tensor(t) => {
                // Back to it after: a bool result scaled by an int alpha.
                let scaled = t.to_dtype(dtype)?.mul(alpha)?.to_dtype(dtype)?;
                self.binary_op(op, &scaled)
            }
            Operand::Scalar(s) => {
                let product = match (s, alpha) {
                    (Scalar::Float(_), _) | (_, Scalar::Float(_)) => {
                        Scalar::Float(s.as_f64() * alpha.as_f64())
                    }
                    _ => Scalar::Int(s.as_i64().wrapping_mul(alpha.as_i64())),
                };
                self.binary_op(op, product)
            }
        }
    }

    /// `op` over `self`, `tensors` and scalar `s` as one op
    /// (`Op::Ternary`), where the scalar does not promote the tensors' dtype
    /// (a float value of integer tensors does: those keep the composed
    /// form, and its errors); `None` then.
    #[track_caller]
    fn ternary(&self, op: TernaryOp, tensors: &[&Tensor], s: Scalar) -> Option<Result<Tensor>> {
        let promoted = tensors.iter().fold(
            ResultType::new().tensor(self.dtype(), self.rank()),
            |r, t| r.tensor(t.dtype(), t.rank()),
        );
        let dtype = promoted.finish();
        if dtype.is_bool()
            || matches!(s, Scalar::Bool(_))
            || promoted.scalar(s.category()).finish() != dtype
        {
            return None;
        }
        // PyTorch's CPU kernels take the scalar in float32 for half floats.
        let scalar_dtype = super::optim::opmath(dtype);
        Some(self.record(op.name(), tensors, |r| {
            let k = r.scalar(s, scalar_dtype)?;
            let mut inputs: Vec<&Arc<Value>> = Vec::with_capacity(tensors.len() + 2);
            inputs.push(&self.value);
            inputs.extend(tensors.iter().map(|t| &t.value));
            inputs.push(&k);
            r.node(Op::Ternary(op), &inputs)
        }))
    }

    /// `self + value * t1 * t2`, broadcast and promoted over the three
    /// tensors (`torch.addcmul`).
    #[track_caller]
    pub fn addcmul(&self, t1: &Tensor, t2: &Tensor, value: impl Into<Scalar>) -> Result<Tensor> {
        let value = value.into();
        if let Some(r) = self.ternary(TernaryOp::Addcmul, &[t1, t2], value) {
            return r;
        }
        let product = t1.mul(value)?.mul(t2)?;
        self.add(&product)
    }

    /// `self + value * t1 / t2` (`torch.addcdiv`): floating point or complex
    /// only, as in PyTorch, which refuses integer division here.
    #[track_caller]
    pub fn addcdiv(&self, t1: &Tensor, t2: &Tensor, value: impl Into<Scalar>) -> Result<Tensor> {
        if !t1.dtype().is_inexact() && !t2.dtype().is_inexact() {
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
        let value = value.into();
        if let Some(r) = self.ternary(TernaryOp::Addcdiv, &[t1, t2], value) {
            return r;
        }
        let quotient = t1.mul(value)?.div(t2)?;
        self.add(&quotient)
    }

    /// `self + weight * (end - self)` (`torch.lerp`), floating point or
    /// complex only, with PyTorch's form for weights of magnitude 0.5 and
    /// more (`end - (end - self) * (1 - weight)`), so that weight 1 gives
    /// `end` exactly.
    #[track_caller]
    pub fn lerp<'a>(&self, end: &Tensor, weight: impl Into<Operand<'a>>) -> Result<Tensor> {
        for t in [self, end] {
            if !t.dtype().is_inexact() {
                return Err(invalid(
                    "lerp",
                    format!("got {}; expected floating point or complex tensors", t.ty()),
                ));
            }
        }
        let weight = weight.into();
        if let Operand::Scalar(w) = weight
            && let Some(r) = self.ternary(TernaryOp::Lerp, &[end], w)
        {
            return r;
        }
        let diff = end.sub(self)?;
        match weight {
            Operand::Scalar(w) if w.as_f64().abs() < 0.5 => self.add(&diff.mul(w)?),
            Operand::Scalar(w) => end.sub(&diff.mul(1.0 - w.as_f64())?),
            Operand::Tensor(w) => {
                let near = self.add(&diff.mul(w)?)?;
                let far = end.sub(&diff.mul(&w.binary_op_reversed(BinaryOp::Sub, 1.0)?)?)?;
                Tensor::where_(&w.abs()?.lt(0.5)?, &near, &far)
            }
        }
    }

    /// `sqrt(self^2 + other^2)` (`torch.hypot`): floating point only, as in
    /// PyTorch.
    #[track_caller]
    pub fn hypot<'a>(&self, other: impl Into<Operand<'a>>) -> Result<Tensor> {
        let other = other.into();
        let dtype = other.promoted_with(self);
        if !dtype.is_float() {
            return Err(invalid(
                "hypot",
                format!(
                    "got {} and {}; expected a floating-point operand",
                    self.ty(),
                    describe(&other)
                ),
            ));
        }
        let squared = match other {
            Operand::Tensor(t) => t.mul(t)?,
            Operand::Scalar(s) => return self.mul(self)?.add(s.as_f64() * s.as_f64())?.sqrt(),
        };
        self.mul(self)?.add(&squared)?.sqrt()
    }

    /// `self * log(other)`, and 0 where `self` is 0 unless `other` is NaN
    /// (`torch.xlogy`); integers compute in float32.
    #[track_caller]
    pub fn xlogy<'a>(&self, other: impl Into<Operand<'a>>) -> Result<Tensor> {
        self.times_log(other.into(), Tensor::log, f64::ln)
    }

    /// `self * log1p(other)`, and 0 where `self` is 0 unless `other` is NaN
    /// (`torch.special.xlog1py`); integers compute in float32.
    #[track_caller]
    pub fn xlog1py<'a>(&self, other: impl Into<Operand<'a>>) -> Result<Tensor> {
        self.times_log(other.into(), Tensor::log1p, f64::ln_1p)
    }

    /// `self * log(other)` for the logarithm `log` (`log_of` on a number),
    /// as xlogy and xlog1py define it.
    #[track_caller]
    fn times_log(
        &self,
        other: Operand,
        log: fn(&Tensor) -> Result<Tensor>,
        log_of: fn(f64) -> f64,
    ) -> Result<Tensor> {
        let dtype = other.promoted_with(self).to_float();
        let x = self.to_dtype(dtype)?;
        let zero = x.eq(0.0)?;
        match other {
            Operand::Tensor(y) => {
                let y = y.to_dtype(dtype)?;
                let product = x.mul(&log(&y)?)?;
                let r = Tensor::where_(&zero, 0.0, &product)?;
                Tensor::where_(&y.isnan()?, &y, &r)
            }
            Operand::Scalar(s) if s.as_f64().is_nan() => x.full_like(f64::NAN),
            Operand::Scalar(s) => Tensor::where_(&zero, 0.0, &x.mul(log_of(s.as_f64()))?),
        }
    }

    /// `|self|` with the sign of `other` (its sign bit: -0 counts as
    /// negative), as `torch.copysign`; integers compute in float32.
    #[track_caller]
    pub fn copysign<'a>(&self, other: impl Into<Operand<'a>>) -> Result<Tensor> {
        let other = other.into();
        let dtype = other.promoted_with(self).to_float();
        let magnitude = self.to_dtype(dtype)?.abs()?;
        let negative = match other {
            Operand::Tensor(y) => y.to_dtype(dtype)?.activation(crate::Activation::Signbit)?,
            Operand::Scalar(s) => {
                return if s.as_f64().is_sign_negative() {
                    magnitude.neg()
                } else {
                    Ok(magnitude)
                };
            }
        };
        Tensor::where_(&negative, &magnitude.neg()?, &magnitude)
    }

    /// The Heaviside step (`torch.heaviside`): 0 below zero, 1 above, and
    /// `values` where `self` is zero (NaN gives 0, as PyTorch). Both in
    /// the same dtype, as PyTorch requires.
    #[track_caller]
    pub fn heaviside(&self, values: &Tensor) -> Result<Tensor> {
        if values.dtype() != self.dtype() {
            return Err(invalid(
                "heaviside",
                format!(
                    "got {} and values {}; heaviside is not yet implemented for tensors with different dtypes",
                    self.ty(),
                    values.ty()
                ),
            ));
        }
        let step = self.gt(0i64)?.to_dtype(self.dtype())?;
        Tensor::where_(&self.eq(0i64)?, values, &step)
    }

    /// The remainder of truncated division, with `self`'s sign (C's `fmod`,
    /// `torch.fmod`): Python's remainder (the divisor's sign) moved by one
    /// divisor where the signs differ, so integers stay exact.
    #[track_caller]
    pub fn fmod<'a>(&self, other: impl Into<Operand<'a>>) -> Result<Tensor> {
        let other = other.into();
        let r = self.remainder(other)?;
        let moved = r.sub(other)?;
        let differ = r.ne(0.0)?.logical_and(&r.lt(0.0)?.ne(&self.lt(0.0)?)?)?;
        Tensor::where_(&differ, &moved, &r)
    }

    /// Whether each element is +inf or -inf (`torch.isinf`); false for
    /// integers and bools.
    #[track_caller]
    pub fn isinf(&self) -> Result<Tensor> {
        self.infinity_test(0)
    }

    /// Whether each element is +inf (`torch.isposinf`).
    #[track_caller]
    pub fn isposinf(&self) -> Result<Tensor> {
        self.infinity_test(1)
    }

    /// Whether each element is -inf (`torch.isneginf`).
    #[track_caller]
    pub fn isneginf(&self) -> Result<Tensor> {
        self.infinity_test(-1)
    }

    /// `sign` 0: either infinity; 1: +inf; -1: -inf.
    #[track_caller]
    fn infinity_test(&self, sign: i32) -> Result<Tensor> {
        if !self.dtype().is_float() {
            return self.device().full(self.shape(), false, DType::Bool);
        }
        match sign {
            0 => self.abs()?.eq(f64::INFINITY),
            1 => self.eq(f64::INFINITY),
            _ => self.eq(f64::NEG_INFINITY),
        }
    }

    /// `log(exp(self) + exp(other))` (`torch.logaddexp`), computed as
    /// `max + log1p(exp(-|self - other|))` so that nothing overflows; where
    /// both are the same infinity, that infinity. Floating point only.
    #[track_caller]
    pub fn logaddexp<'a>(&self, other: impl Into<Operand<'a>>) -> Result<Tensor> {
        self.log_add_exp(other.into(), "logaddexp", 1.0)
    }

    /// `log2(2^self + 2^other)` (`torch.logaddexp2`), as
    /// [`Tensor::logaddexp`] in base 2.
    #[track_caller]
    pub fn logaddexp2<'a>(&self, other: impl Into<Operand<'a>>) -> Result<Tensor> {
        self.log_add_exp(other.into(), "logaddexp2", std::f64::consts::LN_2)
    }

    /// `log_b(b^self + b^other)` for the base whose natural log is `ln_base`.
    #[track_caller]
    fn log_add_exp(&self, other: Operand, op: &'static str, ln_base: f64) -> Result<Tensor> {
        let dtype = other.promoted_with(self);
        // PyTorch has a complex logaddexp, not a complex logaddexp2.
        let complex = dtype.is_complex() && op == "logaddexp";
        if !dtype.is_float() && !complex {
            return Err(invalid(
                op,
                format!(
                    "got {} and {}; expected a floating-point{} operand",
                    self.ty(),
                    describe(&other),
                    if op == "logaddexp" { " or complex" } else { "" }
                ),
            ));
        }
        let a = self.to_dtype(dtype)?;
        let b = match other {
            Operand::Tensor(t) => t.to_dtype(dtype)?,
            Operand::Scalar(s) => self.device().full(&[], s, dtype)?,
        };
        if complex {
            return complex_log_add_exp(&a, &b);
        }
        let larger = a.maximum(&b)?;
        let gap = a.sub(&b)?.abs()?;
        let tail = gap.mul(-ln_base)?.exp()?.log1p()?.mul(1.0 / ln_base)?;
        let sum = larger.add(&tail)?;
        // inf - inf is NaN: equal infinities give themselves.
        let same_infinity = a.eq(&b)?.logical_and(&a.abs()?.eq(f64::INFINITY)?)?;
        Tensor::where_(&same_infinity, &a, &sum)
    }

    /// Whether each element of `self` is among `test`'s (`torch.isin`); with
    /// `invert`, whether it is not. Bool, `self`'s shape; the two compare
    /// in their promoted dtype. Each element is compared with every test
    /// element (memory `self.numel() * test.numel()`): the sizes
    /// `generate()`'s stopping checks use.
    #[track_caller]
    pub fn isin<'a>(&self, test: impl Into<Operand<'a>>, invert: bool) -> Result<Tensor> {
        let found = match test.into() {
            Operand::Scalar(s) => self.eq(s)?,
            Operand::Tensor(t) => {
                let column = self.reshape(&[self.numel(), 1])?;
                let row = t.reshape(&[t.numel()])?;
                column.eq(&row)?.any(&[1], false)?.reshape(self.shape())?
            }
        };
        if invert {
            found.logical_not()
        } else {
            Ok(found)
        }
    }

    /// Division rounded toward zero (`torch.div(rounding_mode="trunc")`):
    /// integers stay exact (the floor quotient moved up by one where the
    /// division is inexact and the signs differ); floats truncate `a / b`.
    #[track_caller]
    pub fn div_trunc<'a>(&self, other: impl Into<Operand<'a>>) -> Result<Tensor> {
        let other = other.into();
        if other.promoted_with(self).is_float() {
            return self.div(other)?.activation(super::Activation::Trunc);
        }
        let floor = self.floor_divide(other)?;
        let inexact = self.remainder(other)?.ne(0)?;
        let signs_differ = match other {
            Operand::Tensor(t) => self.lt(0)?.ne(&t.lt(0)?)?,
            Operand::Scalar(s) => self.lt(0)?.ne(s.as_f64() < 0.0)?,
        };
        let up = inexact.logical_and(&signs_differ)?;
        Tensor::where_(&up, &floor.add(1)?, &floor)
    }
}

/// An operand for an error message.
fn describe(o: &Operand) -> String {
    match o {
        Operand::Tensor(t) => t.ty().to_string(),
        Operand::Scalar(s) => format!("the number {s}"),
    }
}

/// `log(exp(a) + exp(b))` of complex operands, as PyTorch computes it: with
/// `hi` the operand of the larger real part (`a` on a tie) and `lo` the
/// other, `hi + log1p(exp(lo - hi))`; NaN in either part of either operand
/// gives NaN in both parts; equal infinite real parts give `lo` when they
/// are -inf (the angle is lost) and `log(exp(lo) + exp(hi))` when +inf.
fn complex_log_add_exp(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let a_is_hi = a.real()?.ge(&b.real()?)?;
    let hi = Tensor::where_(&a_is_hi, a, b)?;
    let lo = Tensor::where_(&a_is_hi, b, a)?;
    let general = lo.sub(&hi)?.exp()?.log1p()?.add(&hi)?;
    let lo_re = lo.real()?;
    let same_infinity = lo_re
        .abs()?
        .eq(f64::INFINITY)?
        .logical_and(&lo_re.eq(&hi.real()?)?)?;
    let both_infinite = lo.exp()?.add(&hi.exp()?)?.log()?;
    let infinite = Tensor::where_(&lo_re.lt(0.0)?, &lo, &both_infinite)?;
    let r = Tensor::where_(&same_infinity, &infinite, &general)?;
    let nan = a.isnan()?.logical_or(&b.isnan()?)?;
    Tensor::where_(&nan, &r.mul(f64::NAN)?, &r)
}
