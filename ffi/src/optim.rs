//! Optimizer steps over a list of parameters in one call (PyTorch's fused
//! Adam, AdamW and SGD): each parameter's tensors are views of their
//! storages, read, stepped by the runtime (`eagertpu::Adam`, `Sgd`) and
//! written back in place, one parameter after another.

use std::ffi::c_char;

use eagertpu::{Adam, AdamParam, GradScaling, Operand, Sgd, SgdParam, Tensor};

use crate::pointwise::{Value, View, decode, read, view};
use crate::types::{ETPU_OPERAND_HANDLE, ETPU_OPERAND_VIEW, OperandArg};
use crate::{Failure, FfiResult, at, c_api};

/// Operands a parameter of `etpu_fused_adam` takes.
const ADAM_SLOTS: usize = 6;
/// Operands a parameter of `etpu_fused_sgd` takes.
const SGD_SLOTS: usize = 3;

/// Whether operand `a` is the C ABI's "absent" (a handle operand of handle 0).
fn absent(a: &OperandArg) -> bool {
    a.kind == ETPU_OPERAND_HANDLE && a.handle.0 == 0
}

/// An optional tensor operand, read.
///
/// # Safety
/// As `decode`.
unsafe fn optional_tensor(a: &OperandArg, what: &str) -> FfiResult<Option<Tensor>> {
    if absent(a) {
        return Ok(None);
    }
    // SAFETY: as this function's contract.
    match read(unsafe { decode(a, 0) }.map_err(|e| named(what, e))?)? {
        Value::Tensor(t) => Ok(Some(t)),
        Value::Scalar(_) => Err(Failure::invalid(format!(
            "{what} must be a tensor, got a number"
        ))),
    }
}

fn named(what: &str, e: Failure) -> Failure {
    Failure {
        message: format!("{what}: {}", e.message),
        ..e
    }
}

/// A learning rate: a number or a one-element tensor.
enum Lr {
    Number(f64),
    Tensor(Tensor),
}

impl Lr {
    /// # Safety
    /// As `decode`.
    unsafe fn of(a: &OperandArg) -> FfiResult<Lr> {
        // SAFETY: as this function's contract.
        Ok(
            match read(unsafe { decode(a, 0) }.map_err(|e| named("lr", e))?)? {
                Value::Tensor(t) => Lr::Tensor(t),
                Value::Scalar(s) => Lr::Number(s.as_f64()),
            },
        )
    }

    fn operand(&self) -> Operand<'_> {
        match self {
            Lr::Number(x) => Operand::from(*x),
            Lr::Tensor(t) => Operand::Tensor(t),
        }
    }
}

/// The view of a tensor a step updates in place.
///
/// # Safety
/// `a.view` must be NULL or point at a descriptor.
unsafe fn mutable_view<'a>(a: &OperandArg, what: &str) -> FfiResult<View<'a>> {
    if a.kind != ETPU_OPERAND_VIEW {
        return Err(Failure::invalid(format!(
            "{what} has operand kind {}; a tensor updated in place must be a view (ETPU_OPERAND_VIEW)",
            a.kind
        )));
    }
    // SAFETY: as this function's contract.
    unsafe { view(a.view, what) }
}

/// Reads the operands of `count` parameters of `slots` each, in turn, and
/// hands each parameter's to `step`, naming the parameter in its errors.
///
/// # Safety
/// `tensors` must hold `count * slots` operands as `decode` takes them.
unsafe fn each_parameter(
    op: &str,
    tensors: *const OperandArg,
    count: usize,
    slots: usize,
    mut step: impl FnMut(&[OperandArg]) -> FfiResult,
) -> FfiResult {
    if count > 0 && tensors.is_null() {
        return Err(Failure::invalid(format!(
            "{op}: tensors is NULL for {count} parameters"
        )));
    }
    if count == 0 {
        return Ok(());
    }
    // SAFETY: `count * slots` operands (the caller's contract).
    let all = unsafe { std::slice::from_raw_parts(tensors, count * slots) };
    for (i, group) in all.chunks_exact(slots).enumerate() {
        step(group).map_err(|e| named(&format!("{op}: parameter {i} of {count}"), e))?;
    }
    Ok(())
}

/// Reads the view `v` as a tensor.
fn tensor_of(v: &View, what: &str) -> FfiResult<Tensor> {
    v.read().map_err(|e| named(what, e.into()))
}

/// What every step reads besides its parameters: the learning rate and
/// AMP's scaling tensors.
struct StepInputs {
    lr: Lr,
    grad_scale: Option<Tensor>,
    found_inf: Option<Tensor>,
}

impl StepInputs {
    /// # Safety
    /// As `decode`.
    unsafe fn read(
        lr: &OperandArg,
        grad_scale: &OperandArg,
        found_inf: &OperandArg,
    ) -> FfiResult<StepInputs> {
        // SAFETY: as this function's contract.
        unsafe {
            Ok(StepInputs {
                lr: Lr::of(lr)?,
                grad_scale: optional_tensor(grad_scale, "grad_scale")?,
                found_inf: optional_tensor(found_inf, "found_inf")?,
            })
        }
    }

    fn scaling(&self) -> GradScaling<'_> {
        GradScaling {
            grad_scale: self.grad_scale.as_ref(),
            found_inf: self.found_inf.as_ref(),
        }
    }
}

/// The first `slots` operands of a parameter's `group`, views updated in
/// place (`names` names them in errors), and what they hold now.
///
/// # Safety
/// As `mutable_view`, for each of them.
unsafe fn read_views<'a>(
    group: &[OperandArg],
    names: &[&str],
    slots: usize,
) -> FfiResult<(Vec<View<'a>>, Vec<Tensor>)> {
    let views: Vec<View> = (0..slots)
        // SAFETY: as this function's contract.
        .map(|s| unsafe { mutable_view(&group[s], names[s]) })
        .collect::<FfiResult<_>>()?;
    let tensors = views
        .iter()
        .zip(names)
        .map(|(v, what)| tensor_of(v, what))
        .collect::<FfiResult<_>>()?;
    Ok((views, tensors))
}

/// Writes a step's new values into the views they were read from.
fn write_back(views: &[View], new: Vec<Tensor>) -> FfiResult {
    for (v, t) in views.iter().zip(new) {
        v.write(t)?;
    }
    Ok(())
}

c_api! {
    /// One Adam step (`decoupled`: AdamW) over `count` parameters, as
    /// PyTorch's `_fused_adam_` and `_fused_adamw_`: `tensors[6 * i .. 6 * i + 6]`
    /// are parameter `i`'s param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq
    /// (with `amsgrad`; otherwise absent: a handle operand of handle 0) and
    /// step (its 0-d count, already incremented). The first five are views,
    /// updated in place (grad with its unscaled value). `lr` is a number or
    /// a one-element tensor; `grad_scale` and `found_inf` are tensors or
    /// absent. A parameter that fails stops the call with an error naming
    /// it, the parameters before it updated.
    fn etpu_fused_adam(
        tensors: *const OperandArg,
        count: usize,
        lr: OperandArg,
        beta1: f64,
        beta2: f64,
        weight_decay: f64,
        eps: f64,
        amsgrad: bool,
        maximize: bool,
        decoupled: bool,
        grad_scale: OperandArg,
        found_inf: OperandArg,
        origin: *const c_char,
    ) {
        let hp = Adam { beta1, beta2, weight_decay, eps, amsgrad, maximize, decoupled };
        let op = if decoupled { "fused_adamw" } else { "fused_adam" };
        // SAFETY: operands and descriptors as documented.
        unsafe {
            at(origin, || -> FfiResult {
                let inputs = StepInputs::read(&lr, &grad_scale, &found_inf)?;
                // One op: one program in debug and strict modes, not one per parameter.
                eagertpu::as_one_op(|| each_parameter(op, tensors, count, ADAM_SLOTS, |g| {
                    let names = ["param", "grad", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"];
                    let (views, read) = read_views(g, &names, if amsgrad { 5 } else { 4 })?;
                    let step = optional_tensor(&g[5], "step")?.ok_or_else(|| Failure::invalid("step is absent"))?;
                    let p = AdamParam {
                        param: &read[0],
                        grad: &read[1],
                        exp_avg: &read[2],
                        exp_avg_sq: &read[3],
                        max_exp_avg_sq: read.get(4),
                        step: &step,
                    };
                    let u = hp.step(&p, inputs.lr.operand(), inputs.scaling())?;
                    let mut new = vec![u.param, u.grad, u.exp_avg, u.exp_avg_sq];
                    new.extend(u.max_exp_avg_sq);
                    write_back(&views, new)
                }))?
            })
        }
    }

    /// One SGD step over `count` parameters, as PyTorch's `_fused_sgd_`:
    /// `tensors[3 * i .. 3 * i + 3]` are parameter `i`'s param, grad and
    /// momentum buffer (with a nonzero `momentum`; otherwise absent), views
    /// updated in place (grad with its unscaled value). On the first step
    /// the momentum buffer becomes the gradient. `lr`, `grad_scale` and
    /// `found_inf` as `etpu_fused_adam` takes them.
    fn etpu_fused_sgd(
        tensors: *const OperandArg,
        count: usize,
        lr: OperandArg,
        weight_decay: f64,
        momentum: f64,
        dampening: f64,
        nesterov: bool,
        maximize: bool,
        is_first_step: bool,
        grad_scale: OperandArg,
        found_inf: OperandArg,
        origin: *const c_char,
    ) {
        let hp = Sgd { weight_decay, momentum, dampening, nesterov, maximize };
        // SAFETY: operands and descriptors as documented.
        unsafe {
            at(origin, || -> FfiResult {
                let inputs = StepInputs::read(&lr, &grad_scale, &found_inf)?;
                eagertpu::as_one_op(|| each_parameter("fused_sgd", tensors, count, SGD_SLOTS, |g| {
                    let names = ["param", "grad", "momentum_buffer"];
                    let (views, read) = read_views(g, &names, if momentum != 0.0 { 3 } else { 2 })?;
                    let p = SgdParam { param: &read[0], grad: &read[1], momentum_buffer: read.get(2) };
                    let u = hp.step(&p, inputs.lr.operand(), is_first_step, inputs.scaling())?;
                    let mut new = vec![u.param, u.grad];
                    new.extend(u.momentum_buffer);
                    write_back(&views, new)
                }))?
            })
        }
    }
}
