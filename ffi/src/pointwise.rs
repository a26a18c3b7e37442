//! Pointwise ops over any operands in one call: `etpu_pointwise` takes each
//! operand as a tensor handle, a view of a storage or a Python number, and
//! writes the result into a view (or returns a new handle). A PyTorch kernel
//! thus reads its inputs, runs the op and writes its `out=` tensor in one C
//! call, with no handles in between.
//!
//! A view descriptor is an `int64_t` array: `{storage, byte_offset, dtype,
//! rank, sizes[0..rank], strides[0..rank]}` (the storage id as
//! `etpu_view_read` takes it, bit for bit; strides in elements).

use std::collections::HashMap;
use std::ffi::c_char;
use std::sync::LazyLock;

use eagertpu::internals::fusion::hash::FxBuild;
use eagertpu::storage::{StorageId, read_view, register_holding, write_view};
use eagertpu::{Activation, BinaryOp, DType, Operand, Scalar, Tensor, UnaryOp};
use smallvec::SmallVec;

use crate::handles::{device_index, dims, dtype_from, get, put_tensor};
use crate::ops::scalar;
use crate::types::{
    ETPU_OPERAND_HANDLE, ETPU_OPERAND_SCALAR, ETPU_OPERAND_VIEW, OperandArg, StorageHandle,
    TensorHandle,
};
use crate::{Failure, FfiResult, at, c_api, c_str, put};

/// A view descriptor, decoded.
pub(crate) struct View<'a> {
    pub(crate) storage: StorageId,
    pub(crate) byte_offset: u64,
    pub(crate) dtype: DType,
    pub(crate) sizes: &'a [i64],
    pub(crate) strides: &'a [i64],
}

impl View<'_> {
    /// The view's elements, as a tensor.
    pub(crate) fn read(&self) -> eagertpu::Result<Tensor> {
        read_view(
            self.storage,
            self.byte_offset,
            self.dtype,
            self.sizes,
            self.strides,
        )
    }

    /// Writes `value` (converted and broadcast to the view) into it.
    pub(crate) fn write(&self, value: Tensor) -> eagertpu::Result<()> {
        write_view(
            self.storage,
            self.byte_offset,
            self.dtype,
            self.sizes,
            self.strides,
            value,
        )
    }
}

/// Most dims a view may have (as PyTorch's own limit of 25 for TensorIterator).
const MAX_RANK: i64 = 64;

/// Most operands of one pointwise op.
pub(crate) const MAX_OPERANDS: usize = 8;

/// Decodes the descriptor at `p` (`what` names it in errors).
///
/// # Safety
/// `p` must be NULL or point at a descriptor: 4 + 2 * rank `int64_t`s.
pub(crate) unsafe fn view<'a>(p: *const i64, what: &str) -> FfiResult<View<'a>> {
    if p.is_null() {
        return Err(Failure::invalid(format!("view {what} is NULL")));
    }
    // SAFETY: the header is four elements (the caller's contract).
    let head = unsafe { std::slice::from_raw_parts(p, 4) };
    let rank = head[3];
    if !(0..=MAX_RANK).contains(&rank) {
        return Err(Failure::invalid(format!(
            "view {what} has rank {rank}, expected 0 to {MAX_RANK}"
        )));
    }
    let rank = rank as usize;
    // SAFETY: sizes and strides follow the header (the caller's contract).
    let dims = unsafe { std::slice::from_raw_parts(p.add(4), 2 * rank) };
    Ok(View {
        storage: StorageId(head[0] as u64),
        byte_offset: head[1] as u64,
        dtype: dtype_from(head[2] as i32)?,
        sizes: &dims[..rank],
        strides: &dims[rank..],
    })
}

/// An operand, decoded: a view is read later, inside the op's origin.
pub(crate) enum Arg<'a> {
    Tensor(Tensor),
    View(View<'a>),
    Scalar(Scalar),
}

/// Decodes operand `i`.
///
/// # Safety
/// A view operand's `view` must be NULL or point at a descriptor.
pub(crate) unsafe fn decode<'a>(a: &OperandArg, i: usize) -> FfiResult<Arg<'a>> {
    // The operand's name, built only for an error message.
    let named = |e: Failure| Failure {
        message: format!("args[{i}]: {}", e.message),
        ..e
    };
    match a.kind {
        ETPU_OPERAND_HANDLE => Ok(Arg::Tensor(get(a.handle, "the handle").map_err(named)?)),
        // SAFETY: as this function's contract.
        ETPU_OPERAND_VIEW => Ok(Arg::View(unsafe {
            view(a.view, "the view").map_err(named)?
        })),
        ETPU_OPERAND_SCALAR => Ok(Arg::Scalar(scalar(a.scalar, "the scalar").map_err(named)?)),
        kind => Err(Failure::invalid(format!(
            "args[{i}] has operand kind {kind}; expected ETPU_OPERAND_HANDLE (0), ETPU_OPERAND_VIEW (1) or ETPU_OPERAND_SCALAR (2)"
        ))),
    }
}

/// A read operand: a tensor or a scalar.
pub(crate) enum Value {
    Tensor(Tensor),
    Scalar(Scalar),
}

impl Value {
    fn operand(&self) -> Operand<'_> {
        match self {
            Value::Tensor(t) => Operand::Tensor(t),
            Value::Scalar(s) => Operand::Scalar(*s),
        }
    }
}

pub(crate) fn read(arg: Arg) -> eagertpu::Result<Value> {
    Ok(match arg {
        Arg::Tensor(t) => Value::Tensor(t),
        Arg::View(v) => Value::Tensor(v.read()?),
        Arg::Scalar(s) => Value::Scalar(s),
    })
}

/// What `op` takes, for errors.
const SIGNATURES: &str = "a unary op (x), a binary op (a, b: one may be a scalar), \
    add and sub with alpha (a, b, alpha: a scalar; b may be a scalar), \
    where (condition, x, y), addcmul and addcdiv (self, t1, t2, value: a scalar), lerp (self, end, weight), \
    masked_scale (x, bool mask, scale), _dirichlet_grad (x, alpha, total), isinf isposinf isneginf (x), \
    hypot, xlogy, xlog1py, copysign, heaviside, fmod, div_trunc, logaddexp, logaddexp2, isin and isin_invert \
    (a, b: b may be a scalar), \
    searchsorted and searchsorted_right (sorted sequence, values: a tensor or a scalar), \
    an activation (x, scalar parameters...) or its backward (grad, saved, scalar parameters..., saved_is_result)";

fn bad_args(op: &str, args: &[Value]) -> eagertpu::Error {
    let got: Vec<String> = args
        .iter()
        .map(|a| match a {
            Value::Tensor(t) => t.ty().to_string(),
            Value::Scalar(s) => format!("scalar {s}"),
        })
        .collect();
    eagertpu::Error::Op(eagertpu::internals::fusion::Error::Invalid {
        op: "pointwise",
        message: format!("{op} got ({}); expected {SIGNATURES}", got.join(", ")),
    })
}

/// A pointwise op, found by name.
#[derive(Clone, Copy)]
enum Pointwise {
    Unary(UnaryOp),
    Binary(BinaryOp),
    Where,
    Addcmul,
    Addcdiv,
    Lerp,
    MaskedScale,
    /// `_dirichlet_grad`: (x, alpha, total).
    DirichletGrad,
    /// A unary op the runtime composes (isinf, isposinf, isneginf): (x).
    ComposedUnary(fn(&Tensor) -> eagertpu::Result<Tensor>),
    /// A binary op the runtime composes (hypot, xlogy, xlog1py, copysign,
    /// heaviside, fmod, div_trunc, logaddexp, logaddexp2, isin, isin_invert):
    /// (a, b), `b` a tensor or a number.
    Composed(fn(&Tensor, Operand) -> eagertpu::Result<Tensor>),
}

/// Every pointwise op by name: one hash lookup a call, not a scan of names.
static BY_NAME: LazyLock<HashMap<&'static str, Pointwise, FxBuild>> = LazyLock::new(|| {
    let unary = UnaryOp::ALL
        .iter()
        .map(|&u| (u.name(), Pointwise::Unary(u)));
    let binary = BinaryOp::ALL
        .iter()
        .map(|&b| (b.name(), Pointwise::Binary(b)));
    let composite = [
        ("where", Pointwise::Where),
        ("addcmul", Pointwise::Addcmul),
        ("addcdiv", Pointwise::Addcdiv),
        ("lerp", Pointwise::Lerp),
        ("masked_scale", Pointwise::MaskedScale),
        ("_dirichlet_grad", Pointwise::DirichletGrad),
        ("hypot", Pointwise::Composed(|a, b| a.hypot(b))),
        ("xlogy", Pointwise::Composed(|a, b| a.xlogy(b))),
        ("fmod", Pointwise::Composed(|a, b| a.fmod(b))),
        ("div_trunc", Pointwise::Composed(|a, b| a.div_trunc(b))),
        ("logaddexp", Pointwise::Composed(|a, b| a.logaddexp(b))),
        ("logaddexp2", Pointwise::Composed(|a, b| a.logaddexp2(b))),
        ("xlog1py", Pointwise::Composed(|a, b| a.xlog1py(b))),
        ("copysign", Pointwise::Composed(|a, b| a.copysign(b))),
        (
            "heaviside",
            Pointwise::Composed(|a, b| a.heaviside(&tensor_of(a, b)?)),
        ),
        ("isin", Pointwise::Composed(|a, b| a.isin(b, false))),
        ("isin_invert", Pointwise::Composed(|a, b| a.isin(b, true))),
        (
            "searchsorted",
            Pointwise::Composed(|seq, v| seq.searchsorted(&tensor_of(seq, v)?, false)),
        ),
        (
            "searchsorted_right",
            Pointwise::Composed(|seq, v| seq.searchsorted(&tensor_of(seq, v)?, true)),
        ),
        ("isinf", Pointwise::ComposedUnary(Tensor::isinf)),
        ("isposinf", Pointwise::ComposedUnary(Tensor::isposinf)),
        ("isneginf", Pointwise::ComposedUnary(Tensor::isneginf)),
    ];
    unary.chain(binary).chain(composite).collect()
});

/// `operand` as a tensor on `like`'s device (a number as a 0-d tensor of
/// its own dtype).
fn tensor_of(like: &Tensor, operand: Operand) -> eagertpu::Result<Tensor> {
    match operand {
        Operand::Tensor(t) => Ok(t.clone()),
        Operand::Scalar(s) => {
            let dtype = match s {
                Scalar::Bool(_) => DType::Bool,
                Scalar::Int(_) => DType::I64,
                Scalar::Float(_) => DType::F64,
            };
            like.device().full(&[], s, dtype)
        }
    }
}

/// The scalars of `args` as f64s (bools as 0 and 1), or None if one is a tensor.
fn params(args: &[Value]) -> Option<Vec<f64>> {
    args.iter()
        .map(|a| match a {
            Value::Scalar(s) => Some(s.as_f64()),
            Value::Tensor(_) => None,
        })
        .collect()
}

/// An activation (`Activation::from_name`) over `args`: `(x, params...)`, or
/// for `<name>_backward`, `(grad, saved, params..., saved_is_result)`.
fn activation(op: &str, args: &[Value]) -> Option<eagertpu::Result<Tensor>> {
    use Value::Tensor as T;
    let (name, backward) = match op.strip_suffix("_backward") {
        Some(name) => (name, true),
        None => (op, false),
    };
    let bad = || Some(Err(bad_args(op, args)));
    match (backward, args) {
        (false, [T(x), rest @ ..]) => {
            let Some(p) = params(rest) else { return bad() };
            let a = Activation::from_name(name, &p)?;
            Some(a.and_then(|a| x.activation(a)))
        }
        (true, [T(grad), T(saved), rest @ .., Value::Scalar(is_result)]) => {
            let Some(p) = params(rest) else { return bad() };
            let a = Activation::from_name(name, &p)?;
            Some(a.and_then(|a| grad.activation_backward(saved, a, is_result.as_f64() != 0.0)))
        }
        _ => Activation::from_name(name, &[]).and_then(|_| bad()),
    }
}

/// Runs `op` over the read operands.
pub(crate) fn run(op: &str, args: &[Value]) -> eagertpu::Result<Tensor> {
    use Value::{Scalar as S, Tensor as T};
    let Some(kind) = BY_NAME.get(op) else {
        if let Some(result) = activation(op, args) {
            return result;
        }
        return Err(eagertpu::Error::Op(
            eagertpu::internals::fusion::Error::Invalid {
                op: "pointwise",
                message: format!("unknown op \"{op}\" (expected {SIGNATURES})"),
            },
        ));
    };
    match (*kind, args) {
        (Pointwise::Unary(u), [T(x)]) => x.unary_op(u),
        (Pointwise::Binary(b), [T(a), rhs]) => a.binary_op(b, rhs.operand()),
        (Pointwise::Binary(BinaryOp::Add), [T(a), rhs, S(alpha)]) => {
            a.add_scaled(rhs.operand(), *alpha)
        }
        (Pointwise::Binary(BinaryOp::Sub), [T(a), rhs, S(alpha)]) => {
            a.sub_scaled(rhs.operand(), *alpha)
        }
        (Pointwise::Binary(b), [S(s), T(a)]) => a.binary_op_reversed(b, *s),
        (Pointwise::Where, [T(c), x, y]) => Tensor::where_(c, x.operand(), y.operand()),
        (Pointwise::Addcmul, [T(s), T(t1), T(t2), S(v)]) => s.addcmul(t1, t2, *v),
        (Pointwise::Addcdiv, [T(s), T(t1), T(t2), S(v)]) => s.addcdiv(t1, t2, *v),
        (Pointwise::Lerp, [T(s), T(e), w]) => s.lerp(e, w.operand()),
        (Pointwise::MaskedScale, [T(x), T(mask), S(scale)]) => x.masked_scale(mask, scale.as_f64()),
        (Pointwise::DirichletGrad, [T(x), T(alpha), T(total)]) => x.dirichlet_grad(alpha, total),
        (Pointwise::ComposedUnary(f), [T(x)]) => f(x),
        (Pointwise::Composed(f), [T(a), b]) => f(a, b.operand()),
        // A number first: a 0-d tensor of the dtype it promotes to with `b`.
        (Pointwise::Composed(f), [S(s), T(b)]) => {
            let dtype = Operand::Scalar(*s).promoted_with(b);
            f(&b.device().full(&[], *s, dtype)?, Operand::Tensor(b))
        }
        _ => Err(bad_args(op, args)),
    }
}

/// The `nargs` operands at `args` of a `call` (named in the error).
///
/// # Safety
/// `args` must be NULL or valid for `nargs` reads.
pub(crate) unsafe fn operand_args<'a>(
    call: &str,
    args: *const OperandArg,
    nargs: usize,
) -> FfiResult<&'a [OperandArg]> {
    if nargs == 0 || nargs > MAX_OPERANDS || args.is_null() {
        return Err(Failure::invalid(format!(
            "{call}: got {nargs} operands at {args:?}; expected 1 to {MAX_OPERANDS}"
        )));
    }
    // SAFETY: non-null and valid for `nargs` reads (the caller's contract).
    Ok(unsafe { std::slice::from_raw_parts(args, nargs) })
}

/// Reads the operands (views inside the caller's origin).
///
/// # Safety
/// A view operand's `view` must be NULL or point at a descriptor.
pub(crate) unsafe fn read_operands(raw: &[OperandArg]) -> FfiResult<SmallVec<[Value; 4]>> {
    let mut values: SmallVec<[Value; 4]> = SmallVec::new();
    for (i, a) in raw.iter().enumerate() {
        // SAFETY: as this function's contract.
        values.push(read(unsafe { decode(a, i)? })?);
    }
    Ok(values)
}

/// Reads the operands (views inside the caller's origin) and runs `op` over them.
///
/// # Safety
/// A view operand's `view` must be NULL or point at a descriptor.
unsafe fn read_and_run(op: &str, raw: &[OperandArg]) -> FfiResult<Tensor> {
    // SAFETY: as this function's contract.
    let values = unsafe { read_operands(raw)? };
    Ok(run(op, &values)?)
}

/// The end of an entry point that makes its result's allocation: `make`'s
/// value (made under the caller's `origin`) into a new allocation on
/// `device` holding it as a contiguous `dtype` array of `sizes` (refused,
/// as an `out=` view refuses it, when the value's dtype cannot be cast to
/// `dtype`), its id written to `storage`. Nothing is allocated on failure.
///
/// # Safety
/// `origin` must be NULL or a C string; `storage` NULL or writable.
pub(crate) unsafe fn into_new_allocation(
    op: &str,
    device: i64,
    dtype: i32,
    sizes: &[i64],
    origin: *const c_char,
    storage: *mut StorageHandle,
    make: impl FnOnce() -> FfiResult<Tensor>,
) -> FfiResult {
    let device = device_index(device)?;
    let dtype = dtype_from(dtype)?;
    // SAFETY: as this function's contract.
    unsafe {
        let id = at(origin, || -> FfiResult<StorageId> {
            let value = make()?;
            castable(op, &value, dtype)?;
            Ok(register_holding(device, dtype, sizes, value)?)
        })?;
        put(storage, StorageHandle(id.0), "storage")
    }
}

/// Writes `op`'s result into its `out=` or in-place view: refused, as in
/// PyTorch, when the result's dtype cannot be cast to the view's (a float
/// result into an integer tensor would otherwise be truncated silently).
pub(crate) fn write_result(op: &str, out: &View, value: Tensor) -> FfiResult {
    castable(op, &value, out.dtype)?;
    Ok(out.write(value)?)
}

/// Refuses a result that cannot be cast to `dtype`, the dtype of the
/// tensor it goes into.
pub(crate) fn castable(op: &str, value: &Tensor, dtype: DType) -> FfiResult {
    if !value.dtype().can_cast_to(dtype) {
        return Err(Failure::invalid(format!(
            "{op}: result type {} can't be cast to the desired output type {dtype} (the result of {} \
             goes into an out= or in-place tensor of that dtype)",
            value.dtype(),
            value.ty()
        )));
    }
    Ok(())
}

c_api! {
    /// `op` over `args[0..nargs]` (broadcast and promoted as PyTorch does),
    /// written into view `out` (converted to its dtype and broadcast to its
    /// shape) when `out` is not NULL, else returned as a new handle in
    /// `result`.
    fn etpu_pointwise(
        op: *const c_char,
        args: *const OperandArg,
        nargs: usize,
        out: *const i64,
        origin: *const c_char,
        result: *mut TensorHandle,
    ) {
        // SAFETY: strings, operands and descriptors as documented.
        unsafe {
            let op = c_str(op, "op")?;
            let raw = operand_args("pointwise", args, nargs)?;
            let out = if out.is_null() { None } else { Some(view(out, "out")?) };
            let value = at(origin, || -> FfiResult<Option<Tensor>> {
                let value = read_and_run(op, raw)?;
                Ok(match &out {
                    Some(o) => {
                        write_result(op, o, value)?;
                        None
                    }
                    None => Some(value),
                })
            })?;
            match value {
                Some(t) => put_tensor(result, t),
                None => Ok(()),
            }
        }
    }

    /// `op` over `args[0..nargs]`, as `etpu_pointwise` runs it, into a new
    /// allocation on `device` that holds the result as a contiguous `dtype`
    /// array of `sizes[0..rank]` (converted and broadcast to it, refused as
    /// an `out=` view refuses a dtype the result cannot be cast to), written
    /// to `storage`: a kernel's fresh result in one call, with no allocation
    /// made before it and no view written. Nothing is allocated when it fails.
    fn etpu_pointwise_new(
        op: *const c_char,
        args: *const OperandArg,
        nargs: usize,
        device: i64,
        dtype: i32,
        sizes: *const i64,
        rank: usize,
        origin: *const c_char,
        storage: *mut StorageHandle,
    ) {
        // SAFETY: strings, operands, dims and `storage` as documented.
        unsafe {
            let op = c_str(op, "op")?;
            let sizes = dims(sizes, rank, "sizes")?;
            let raw = operand_args("pointwise_new", args, nargs)?;
            into_new_allocation(op, device, dtype, sizes, origin, storage, || read_and_run(op, raw))
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::ffi::{CStr, c_void};

    use super::*;
    use crate::handles::{
        dtype_code, etpu_tensor_free, etpu_tensor_from_host, etpu_tensor_to_host,
    };
    use crate::storage::{etpu_storage_free, etpu_storage_read, etpu_view_read};
    use crate::types::{ETPU_SCALAR_FLOAT, ScalarArg};
    use crate::{ETPU_INVALID_ARGUMENT, ETPU_OK, last_error};

    const ORIGIN: *const c_char = c"pointwise.rs:test".as_ptr();

    pub(crate) fn handle(t: TensorHandle) -> OperandArg {
        OperandArg {
            kind: ETPU_OPERAND_HANDLE,
            handle: t,
            view: std::ptr::null(),
            scalar: ScalarArg {
                kind: 0,
                int: 0,
                float: 0.0,
            },
        }
    }

    pub(crate) fn number(x: f64) -> OperandArg {
        OperandArg {
            kind: ETPU_OPERAND_SCALAR,
            handle: TensorHandle(0),
            view: std::ptr::null(),
            scalar: ScalarArg {
                kind: ETPU_SCALAR_FLOAT,
                int: 0,
                float: x,
            },
        }
    }

    /// A `[dims]` f32 tensor on device 0.
    pub(crate) fn f32_tensor(v: &[f32], dims: &[i64]) -> TensorHandle {
        let mut t = TensorHandle(0);
        // SAFETY: `v` and `dims` are valid for the lengths passed; `t` is writable.
        let status = unsafe {
            etpu_tensor_from_host(
                0,
                dtype_code(DType::F32),
                dims.as_ptr(),
                dims.len(),
                v.as_ptr().cast::<c_void>(),
                size_of_val(v),
                ORIGIN,
                &mut t,
            )
        };
        assert_eq!(status, ETPU_OK, "{}", last_error());
        t
    }

    /// `op(args)` into a new f32 allocation of `sizes` (its id, or the status).
    fn new_f32(
        op: &CStr,
        args: &[OperandArg],
        dtype: DType,
        sizes: &[i64],
    ) -> Result<StorageHandle, i32> {
        let mut storage = StorageHandle(0);
        // SAFETY: every pointer is valid for the lengths passed.
        let status = unsafe {
            etpu_pointwise_new(
                op.as_ptr(),
                args.as_ptr(),
                args.len(),
                0,
                dtype_code(dtype),
                sizes.as_ptr(),
                sizes.len(),
                ORIGIN,
                &mut storage,
            )
        };
        allocated(status, storage)
    }

    /// A call's new allocation, or its status; a failed call must hand out none.
    pub(crate) fn allocated(status: i32, storage: StorageHandle) -> Result<StorageHandle, i32> {
        if status == ETPU_OK {
            Ok(storage)
        } else {
            assert_eq!(
                storage.0, 0,
                "a failed call handed out storage {}",
                storage.0
            );
            Err(status)
        }
    }

    /// The f32 contents of allocation `storage` (`n` elements).
    pub(crate) fn contents(storage: StorageHandle, n: usize) -> Vec<f32> {
        let (mut t, mut out) = (TensorHandle(0), vec![0f32; n]);
        // SAFETY: `t` is writable; `out` holds `n` f32s.
        unsafe {
            assert_eq!(
                etpu_storage_read(storage, dtype_code(DType::F32), &mut t),
                ETPU_OK,
                "{}",
                last_error()
            );
            let status = etpu_tensor_to_host(t, out.as_mut_ptr().cast::<c_void>(), n * 4, ORIGIN);
            assert_eq!(status, ETPU_OK, "{}", last_error());
            assert_eq!(etpu_tensor_free(t), ETPU_OK);
        }
        out
    }

    /// Frees allocations and handles this test owns, each once.
    pub(crate) fn free(storages: &[StorageHandle], handles: &[TensorHandle]) {
        // SAFETY: ids and handles the caller owns and frees only here.
        unsafe {
            for &s in storages {
                assert_eq!(etpu_storage_free(s), ETPU_OK);
            }
            for &h in handles {
                assert_eq!(etpu_tensor_free(h), ETPU_OK);
            }
        }
    }

    #[test]
    fn a_result_goes_into_a_new_allocation_of_the_given_dtype_and_shape() {
        let a = f32_tensor(&[1.0, 2.0, 3.0, 4.0], &[2, 2]);
        let row = f32_tensor(&[10.0, 20.0], &[2]);
        // A number operand; the result as it is.
        let s = new_f32(c"mul", &[handle(a), number(2.5)], DType::F32, &[2, 2]).unwrap();
        assert_eq!(contents(s, 4), [2.5, 5.0, 7.5, 10.0]);
        // Broadcast operands.
        let t = new_f32(c"add", &[handle(a), handle(row)], DType::F32, &[2, 2]).unwrap();
        assert_eq!(contents(t, 4), [11.0, 22.0, 13.0, 24.0]);
        // The result broadcast to the allocation's shape, as an out= view takes it.
        let u = new_f32(c"neg", &[handle(row)], DType::F32, &[3, 2]).unwrap();
        assert_eq!(contents(u, 6), [-10.0, -20.0, -10.0, -20.0, -10.0, -20.0]);
        // The allocation is 16 bytes: a view at its end is past it.
        let (sizes, strides, mut out) = ([1i64], [1i64], TensorHandle(0));
        // SAFETY: the dims are valid for one element; `out` is writable.
        let status = unsafe {
            etpu_view_read(
                s,
                16,
                dtype_code(DType::F32),
                sizes.as_ptr(),
                strides.as_ptr(),
                1,
                ORIGIN,
                &mut out,
            )
        };
        assert_eq!(status, ETPU_INVALID_ARGUMENT);
        assert!(last_error().contains("(16 bytes)"), "{}", last_error());
        free(&[s, t, u], &[a, row]);
    }

    #[test]
    fn a_failing_op_allocates_nothing_and_the_next_call_works() {
        let a = f32_tensor(&[1.0, 2.0], &[2]);
        assert_eq!(
            new_f32(c"frobnicate", &[handle(a)], DType::F32, &[2]),
            Err(ETPU_INVALID_ARGUMENT)
        );
        assert!(
            last_error().contains("unknown op \"frobnicate\""),
            "{}",
            last_error()
        );
        // A float result refused for an integer allocation, as an out= view refuses it.
        assert_eq!(
            new_f32(c"mul", &[handle(a), number(0.5)], DType::I64, &[2]),
            Err(ETPU_INVALID_ARGUMENT)
        );
        let e = last_error();
        assert!(
            e.contains("mul: result type float32 can't be cast to the desired output type int64"),
            "{e}"
        );
        // Shapes that do not broadcast to the allocation's.
        assert_eq!(
            new_f32(c"neg", &[handle(a)], DType::F32, &[3]),
            Err(ETPU_INVALID_ARGUMENT)
        );
        assert!(last_error().contains("[3]"), "{}", last_error());
        let s = new_f32(c"mul", &[handle(a), number(0.5)], DType::F32, &[2]).unwrap();
        assert_eq!(contents(s, 2), [0.5, 1.0]);
        free(&[s], &[a]);
    }
}
