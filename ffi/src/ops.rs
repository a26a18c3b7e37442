//! Op entry points. Each takes its tensors by handle, an `origin` string (the
//! caller's `file:line`, named by errors that surface later; may be NULL) and
//! writes a new handle to `out`. Ops families take the op's name as a string
//! (`"exp"`, `"add"`, `"sum"`), as PyTorch's op names.

use std::ffi::c_char;

use eagertpu::{
    ArgReduce, BinaryOp, Cumulative, Extreme, OrderStatistic, OrderStatisticKind, PointwiseLoss,
    PointwiseLossKind, Polynomial, Reduce, Reduction, Scalar, ScatterReduction, Tensor, UnaryOp,
};

use crate::handles::{device, dims, dtype_from, get, get_optional, put_all, put_pair, put_tensor};
use crate::types::{ETPU_SCALAR_BOOL, ETPU_SCALAR_FLOAT, ETPU_SCALAR_INT, ScalarArg, TensorHandle};
use crate::{Failure, FfiResult, at, c_api, c_str};

fn unknown(family: &str, op: &str, known: &str) -> Failure {
    Failure::invalid(format!(
        "unknown {family} op \"{op}\" (expected one of: {known})"
    ))
}

/// The op of a table (`all`, each with its `name`) called `op`, or an error
/// naming the `family` and listing the table's names.
fn from_table<T: Copy>(
    family: &str,
    op: &str,
    all: &[T],
    name: fn(T) -> &'static str,
) -> FfiResult<T> {
    all.iter().copied().find(|&t| name(t) == op).ok_or_else(|| {
        let names: Vec<&str> = all.iter().map(|&t| name(t)).collect();
        unknown(family, op, &names.join(", "))
    })
}

pub(crate) fn unary_op(op: &str) -> FfiResult<UnaryOp> {
    from_table("unary", op, UnaryOp::ALL, UnaryOp::name)
}

pub(crate) fn binary_op(op: &str) -> FfiResult<BinaryOp> {
    from_table("binary", op, BinaryOp::ALL, BinaryOp::name)
}

/// Decodes a tagged scalar argument (`what` names it in the error).
pub(crate) fn scalar(s: ScalarArg, what: &str) -> FfiResult<Scalar> {
    match s.kind {
        ETPU_SCALAR_BOOL => Ok(Scalar::Bool(s.int != 0)),
        ETPU_SCALAR_INT => Ok(Scalar::Int(s.int)),
        ETPU_SCALAR_FLOAT => Ok(Scalar::Float(s.float)),
        kind => Err(Failure::invalid(format!(
            "{what} has scalar kind {kind}; expected ETPU_SCALAR_BOOL (0), ETPU_SCALAR_INT (1) or ETPU_SCALAR_FLOAT (2)"
        ))),
    }
}

/// An optional tagged scalar argument: NULL is none.
///
/// # Safety
/// `s` must be NULL or point at an `etpu_scalar`.
unsafe fn optional_scalar(s: *const ScalarArg, what: &str) -> FfiResult<Option<Scalar>> {
    // SAFETY: NULL or valid, as the caller guarantees.
    match unsafe { s.as_ref() } {
        None => Ok(None),
        Some(s) => scalar(*s, what).map(Some),
    }
}

c_api! {
    /// `out = op(x)` for a unary op by name (`"exp"`, `"relu"`, ...).
    fn etpu_unary(op: *const c_char, x: TensorHandle, origin: *const c_char, out: *mut TensorHandle) {
        // SAFETY: strings and pointers as documented.
        unsafe {
            let op = unary_op(c_str(op, "op")?)?;
            let x = get(x, "x")?;
            let t = at(origin, || x.unary_op(op))?;
            put_tensor(out, t)
        }
    }

    /// `out = op(a, b)` with broadcasting and promotion (`"add"`, `"lt"`, ...).
    fn etpu_binary(op: *const c_char, a: TensorHandle, b: TensorHandle, origin: *const c_char, out: *mut TensorHandle) {
        // SAFETY: strings and pointers as documented.
        unsafe {
            let op = binary_op(c_str(op, "op")?)?;
            let (a, b) = (get(a, "a")?, get(b, "b")?);
            let t = at(origin, || a.binary_op(op, &b))?;
            put_tensor(out, t)
        }
    }

    /// `out = op(a, s)`, or `op(s, a)` when `reversed`, with a scalar `s` that
    /// promotes like a Python number.
    fn etpu_binary_scalar(
        op: *const c_char,
        a: TensorHandle,
        value: ScalarArg,
        reversed: bool,
        origin: *const c_char,
        out: *mut TensorHandle,
    ) {
        // SAFETY: strings and pointers as documented.
        unsafe {
            let op = binary_op(c_str(op, "op")?)?;
            let a = get(a, "a")?;
            let s = scalar(value, "value")?;
            let t = at(origin, || if reversed { a.binary_op_reversed(op, s) } else { a.binary_op(op, s) })?;
            put_tensor(out, t)
        }
    }

    /// `out = where(condition, x, y)`.
    fn etpu_where(condition: TensorHandle, x: TensorHandle, y: TensorHandle, origin: *const c_char, out: *mut TensorHandle) {
        let (c, x, y) = (get(condition, "condition")?, get(x, "x")?, get(y, "y")?);
        // SAFETY: strings and pointers as documented.
        unsafe {
            let t = at(origin, || Tensor::where_(&c, &x, &y))?;
            put_tensor(out, t)
        }
    }

    /// `out = x` converted to `dtype` (`etpu_dtype`).
    fn etpu_cast(x: TensorHandle, dtype: i32, origin: *const c_char, out: *mut TensorHandle) {
        let (x, d) = (get(x, "x")?, dtype_from(dtype)?);
        // SAFETY: strings and pointers as documented.
        unsafe {
            let t = at(origin, || x.to_dtype(d))?;
            put_tensor(out, t)
        }
    }

    /// A tensor of shape `dims[0..rank]` and `dtype` filled with `value`.
    fn etpu_full(device: i64, dims_ptr: *const i64, rank: usize, value: ScalarArg, dtype: i32, origin: *const c_char, out: *mut TensorHandle) {
        let d = dtype_from(dtype)?;
        let v = scalar(value, "value")?;
        let dev = crate::handles::device(device)?;
        // SAFETY: pointers as documented.
        unsafe {
            let shape = dims(dims_ptr, rank, "dims")?;
            let t = at(origin, || dev.full(shape, v, d))?;
            put_tensor(out, t)
        }
    }

    /// `out = x` reshaped to `dims[0..rank]` (one dim may be -1).
    fn etpu_reshape(x: TensorHandle, dims_ptr: *const i64, rank: usize, origin: *const c_char, out: *mut TensorHandle) {
        let x = get(x, "x")?;
        // SAFETY: pointers as documented.
        unsafe {
            let shape = dims(dims_ptr, rank, "dims")?;
            let t = at(origin, || x.reshape(shape))?;
            put_tensor(out, t)
        }
    }

    /// `out = x` with dims permuted (`perm[0..rank]`).
    fn etpu_permute(x: TensorHandle, perm: *const i64, rank: usize, origin: *const c_char, out: *mut TensorHandle) {
        let x = get(x, "x")?;
        // SAFETY: pointers as documented.
        unsafe {
            let p = dims(perm, rank, "perm")?;
            let t = at(origin, || x.permute(p))?;
            put_tensor(out, t)
        }
    }

    /// `out = x` reversed along `dims[0..n]` (negative dims count from the end).
    fn etpu_flip(x: TensorHandle, dims_ptr: *const i64, n: usize, origin: *const c_char, out: *mut TensorHandle) {
        let x = get(x, "x")?;
        // SAFETY: pointers as documented.
        unsafe {
            let d = dims(dims_ptr, n, "dims")?;
            let t = at(origin, || x.flip(d))?;
            put_tensor(out, t)
        }
    }

    /// `out = x` shifted by `shifts[i]` along `dims[i]` (`torch.roll`; `n`
    /// dims, or none: the flattened tensor by the one shift).
    fn etpu_roll(
        x: TensorHandle,
        shifts_ptr: *const i64,
        nshifts: usize,
        dims_ptr: *const i64,
        n: usize,
        origin: *const c_char,
        out: *mut TensorHandle,
    ) {
        let x = get(x, "x")?;
        // SAFETY: pointers as documented.
        unsafe {
            let shifts = dims(shifts_ptr, nshifts, "shifts")?;
            let d = dims(dims_ptr, n, "dims")?;
            let t = at(origin, || x.roll(shifts, d))?;
            put_tensor(out, t)
        }
    }

    /// The `n` x `m` identity of `dtype` on device `device_index` (`torch.eye`).
    fn etpu_eye(device_index: i64, n: i64, m: i64, dtype: i32, origin: *const c_char, out: *mut TensorHandle) {
        let d = dtype_from(dtype)?;
        let dev = device(device_index)?;
        // SAFETY: `origin` and `out` as documented.
        unsafe {
            let t = at(origin, || dev.eye(n, m, d))?;
            put_tensor(out, t)
        }
    }

    /// `steps` values from `start` to `end` inclusive, of `dtype`, on device
    /// `device_index` (`torch.linspace`: both ends exact; integer dtypes
    /// truncate the ends and each value).
    fn etpu_linspace(device_index: i64, start: f64, end: f64, steps: i64, dtype: i32, origin: *const c_char, out: *mut TensorHandle) {
        let d = dtype_from(dtype)?;
        let dev = device(device_index)?;
        // SAFETY: `origin` and `out` as documented.
        unsafe {
            let t = at(origin, || dev.linspace_with(start, end, steps, d))?;
            put_tensor(out, t)
        }
    }

    /// `out = x` broadcast to `dims[0..rank]` (-1 keeps a dim).
    fn etpu_expand(x: TensorHandle, dims_ptr: *const i64, rank: usize, origin: *const c_char, out: *mut TensorHandle) {
        let x = get(x, "x")?;
        // SAFETY: pointers as documented.
        unsafe {
            let shape = dims(dims_ptr, rank, "dims")?;
            let t = at(origin, || x.expand(shape))?;
            put_tensor(out, t)
        }
    }

    /// `out = x[start:end:step]` along `dim` (Python rules).
    fn etpu_slice(x: TensorHandle, dim: i64, start: i64, end: i64, step: i64, origin: *const c_char, out: *mut TensorHandle) {
        let x = get(x, "x")?;
        // SAFETY: pointers as documented.
        unsafe {
            let t = at(origin, || x.slice(dim, start, end, step))?;
            put_tensor(out, t)
        }
    }

    /// `out = cat(xs[0..n], dim)`.
    fn etpu_cat(xs: *const TensorHandle, n: usize, dim: i64, origin: *const c_char, out: *mut TensorHandle) {
        if xs.is_null() && n > 0 {
            return Err(Failure::invalid("xs is NULL"));
        }
        let handles: &[TensorHandle] = if n == 0 {
            &[]
        } else {
            // SAFETY: `xs` is valid for `n` reads (the caller's contract).
            unsafe { std::slice::from_raw_parts(xs, n) }
        };
        let tensors: Vec<Tensor> = handles.iter().map(|h| get(*h, "xs[i]")).collect::<FfiResult<_>>()?;
        let refs: Vec<&Tensor> = tensors.iter().collect();
        // SAFETY: pointers as documented.
        unsafe {
            let t = at(origin, || Tensor::cat(&refs, dim))?;
            put_tensor(out, t)
        }
    }

    /// `out = op(x, dims[0..ndims], keepdim)` for a reduction of
    /// `Reduce`'s table: `"sum"`, `"mean"`, `"prod"`, `"max"`, `"min"`,
    /// `"logsumexp"`, `"any"`, `"all"`, `"count_nonzero"` (without keepdim);
    /// no dims: all dims.
    fn etpu_reduce(op: *const c_char, x: TensorHandle, dims_ptr: *const i64, ndims: usize, keepdim: bool, origin: *const c_char, out: *mut TensorHandle) {
        let x = get(x, "x")?;
        // SAFETY: strings and pointers as documented.
        unsafe {
            let op = from_table("reduction", c_str(op, "op")?, Reduce::ALL, Reduce::name)?;
            let d = dims(dims_ptr, ndims, "dims")?;
            let t = at(origin, || x.reduce(op, d, keepdim))?;
            put_tensor(out, t)
        }
    }

    /// `out = matmul(a, b)`.
    fn etpu_matmul(a: TensorHandle, b: TensorHandle, origin: *const c_char, out: *mut TensorHandle) {
        let (a, b) = (get(a, "a")?, get(b, "b")?);
        // SAFETY: pointers as documented.
        unsafe {
            let t = at(origin, || a.matmul(&b))?;
            put_tensor(out, t)
        }
    }

    /// `out = softmax(x, dim)`, or `log_softmax` when `log`.
    fn etpu_softmax(x: TensorHandle, dim: i64, log: bool, origin: *const c_char, out: *mut TensorHandle) {
        let x = get(x, "x")?;
        // SAFETY: pointers as documented.
        unsafe {
            let t = at(origin, || if log { x.log_softmax(dim) } else { x.softmax(dim) })?;
            put_tensor(out, t)
        }
    }

    /// The gradient of `softmax` (`log_softmax` when `log`) along `dim`,
    /// given the gradient of its result `grad` and the result `output`.
    fn etpu_softmax_backward(grad: TensorHandle, output: TensorHandle, dim: i64, log: bool, origin: *const c_char, out: *mut TensorHandle) {
        let (grad, output) = (get(grad, "grad")?, get(output, "output")?);
        // SAFETY: pointers as documented.
        unsafe {
            let t = at(origin, || Tensor::softmax_backward(&grad, &output, dim, log))?;
            put_tensor(out, t)
        }
    }

    /// The gradient of an embedding lookup (`embedding_dense_backward`),
    /// `[num_weights, D]`: the rows of `grad` (`indices`' shape then `D`)
    /// summed into the rows their integer `indices` name; rows looked up at
    /// `padding_idx` (negative: none, as ATen passes it) give none; with
    /// `scale_grad_by_freq`, each row is divided by its index's count.
    fn etpu_embedding_backward(
        grad: TensorHandle,
        indices: TensorHandle,
        num_weights: i64,
        padding_idx: i64,
        scale_grad_by_freq: bool,
        origin: *const c_char,
        out: *mut TensorHandle,
    ) {
        let (grad, indices) = (get(grad, "grad")?, get(indices, "indices")?);
        let padding_idx = (padding_idx >= 0).then_some(padding_idx);
        // SAFETY: pointers as documented.
        unsafe {
            let t = at(origin, || grad.embedding_backward(&indices, num_weights, padding_idx, scale_grad_by_freq))?;
            put_tensor(out, t)
        }
    }

    /// `torch.triu(x, k)` when `upper`, else `torch.tril(x, k)`: the
    /// elements on one side of diagonal `k` of the last two dims, zeros elsewhere.
    fn etpu_triangle(x: TensorHandle, k: i64, upper: bool, origin: *const c_char, out: *mut TensorHandle) {
        let x = get(x, "x")?;
        // SAFETY: pointers as documented.
        unsafe {
            let t = at(origin, || if upper { x.triu(k) } else { x.tril(k) })?;
            put_tensor(out, t)
        }
    }

    /// `out = trace(x)`: the sum of the main diagonal of the matrix `x`.
    fn etpu_trace(x: TensorHandle, origin: *const c_char, out: *mut TensorHandle) {
        let x = get(x, "x")?;
        // SAFETY: pointers as documented.
        unsafe {
            let t = at(origin, || x.trace())?;
            put_tensor(out, t)
        }
    }

    /// PyTorch's `native_layer_norm` over the trailing dims
    /// `normalized_shape[0..n]`: `y`, `mean` and `rstd` (float32 for 16-bit
    /// `x`). `weight` and `bias` may be 0 (none).
    fn etpu_layer_norm(
        x: TensorHandle,
        normalized_shape: *const i64,
        n: usize,
        weight: TensorHandle,
        bias: TensorHandle,
        eps: f64,
        origin: *const c_char,
        y: *mut TensorHandle,
        mean: *mut TensorHandle,
        rstd: *mut TensorHandle,
    ) {
        let x = get(x, "x")?;
        let (w, b) = (get_optional(weight, "weight")?, get_optional(bias, "bias")?);
        if y.is_null() || mean.is_null() || rstd.is_null() {
            return Err(Failure::invalid("y, mean and rstd must not be NULL"));
        }
        // SAFETY: pointers as documented.
        unsafe {
            let shape = dims(normalized_shape, n, "normalized_shape")?;
            let (out, m, r) =
                at(origin, || x.layer_norm_with_stats(shape, w.as_ref(), b.as_ref(), eps))?;
            put_tensor(y, out)?;
            put_tensor(mean, m)?;
            put_tensor(rstd, r)
        }
    }

    /// The gradients of `etpu_layer_norm` from `grad_out` and the `mean`
    /// and `rstd` it returned: bit 0 of `mask` asks for the input's, bit 1
    /// the weight's, bit 2 the bias's. A gradient not computed (not asked
    /// for, or no weight or bias: 0) is written as 0.
    fn etpu_layer_norm_backward(
        grad_out: TensorHandle,
        x: TensorHandle,
        normalized_shape: *const i64,
        n: usize,
        mean: TensorHandle,
        rstd: TensorHandle,
        weight: TensorHandle,
        bias: TensorHandle,
        mask: i32,
        origin: *const c_char,
        grad_x: *mut TensorHandle,
        grad_weight: *mut TensorHandle,
        grad_bias: *mut TensorHandle,
    ) {
        let (dy, x) = (get(grad_out, "grad_out")?, get(x, "x")?);
        let (m, r) = (get(mean, "mean")?, get(rstd, "rstd")?);
        let (w, b) = (get_optional(weight, "weight")?, get_optional(bias, "bias")?);
        let want = [mask & 1 != 0, mask & 2 != 0, mask & 4 != 0];
        // SAFETY: pointers as documented.
        unsafe {
            let shape = dims(normalized_shape, n, "normalized_shape")?;
            let [dx, dw, db] = at(origin, || {
                dy.layer_norm_backward(&x, shape, &m, &r, w.as_ref(), b.as_ref(), want)
            })?;
            put_all(&mut [(grad_x, dx, "grad_x"), (grad_weight, dw, "grad_weight"), (grad_bias, db, "grad_bias")])
        }
    }

    /// Softmax cross-entropy of `logits` against class `target`s;
    /// `reduction` 0 none, 1 mean, 2 sum.
    fn etpu_cross_entropy(logits: TensorHandle, target: TensorHandle, reduction: i32, origin: *const c_char, out: *mut TensorHandle) {
        let (l, t) = (get(logits, "logits")?, get(target, "target")?);
        let r = reduction_from(reduction)?;
        // SAFETY: pointers as documented.
        unsafe {
            let t = at(origin, || l.cross_entropy_with(&t, r))?;
            put_tensor(out, t)
        }
    }

    /// PyTorch's `nll_loss` of log-probabilities `input` (`[N, C]` or `[C]`)
    /// against class `target`s: the loss and the total weight. `weight` may
    /// be 0 (none); `reduction` 0 none, 1 mean, 2 sum.
    fn etpu_nll_loss(
        input: TensorHandle,
        target: TensorHandle,
        weight: TensorHandle,
        reduction: i32,
        ignore_index: i64,
        origin: *const c_char,
        loss: *mut TensorHandle,
        total_weight: *mut TensorHandle,
    ) {
        let (x, t) = (get(input, "input")?, get(target, "target")?);
        let w = get_optional(weight, "weight")?;
        let r = reduction_from(reduction)?;
        if loss.is_null() || total_weight.is_null() {
            return Err(Failure::invalid("loss and total_weight must not be NULL"));
        }
        // SAFETY: pointers as documented.
        unsafe {
            let (l, tw) = at(origin, || x.nll_loss(&t, w.as_ref(), r, ignore_index))?;
            put_tensor(loss, l)?;
            put_tensor(total_weight, tw)
        }
    }

    /// The gradient of `etpu_nll_loss` with respect to its input, from the
    /// loss's gradient `grad_out` and the total weight it returned.
    fn etpu_nll_loss_backward(
        grad_out: TensorHandle,
        input: TensorHandle,
        target: TensorHandle,
        weight: TensorHandle,
        reduction: i32,
        ignore_index: i64,
        total_weight: TensorHandle,
        origin: *const c_char,
        out: *mut TensorHandle,
    ) {
        let (g, x, t) = (get(grad_out, "grad_out")?, get(input, "input")?, get(target, "target")?);
        let (w, tw) = (get_optional(weight, "weight")?, get(total_weight, "total_weight")?);
        let r = reduction_from(reduction)?;
        // SAFETY: pointers as documented.
        unsafe {
            let grad = at(origin, || g.nll_loss_backward(&x, &t, w.as_ref(), r, ignore_index, &tw))?;
            put_tensor(out, grad)
        }
    }

    /// A loss taken element by element and reduced (`loss`: `"mse_loss"`,
    /// `"smooth_l1_loss"` with `parameter` beta, `"huber_loss"` with
    /// `parameter` delta, `"binary_cross_entropy"`), times `weight` (0: none).
    fn etpu_pointwise_loss(
        loss: *const c_char,
        parameter: f64,
        input: TensorHandle,
        target: TensorHandle,
        weight: TensorHandle,
        reduction: i32,
        origin: *const c_char,
        out: *mut TensorHandle,
    ) {
        let (x, t, w) = (get(input, "input")?, get(target, "target")?, get_optional(weight, "weight")?);
        let r = reduction_from(reduction)?;
        // SAFETY: strings and pointers as documented.
        unsafe {
            let kind = pointwise_loss(c_str(loss, "loss")?, parameter)?;
            let l = at(origin, || x.pointwise_loss(&t, w.as_ref(), kind, r))?;
            put_tensor(out, l)
        }
    }

    /// The gradient of `etpu_pointwise_loss` with respect to its input, from
    /// the loss's gradient `grad_out`.
    fn etpu_pointwise_loss_backward(
        loss: *const c_char,
        parameter: f64,
        grad_out: TensorHandle,
        input: TensorHandle,
        target: TensorHandle,
        weight: TensorHandle,
        reduction: i32,
        origin: *const c_char,
        out: *mut TensorHandle,
    ) {
        let (g, x, t) = (get(grad_out, "grad_out")?, get(input, "input")?, get(target, "target")?);
        let w = get_optional(weight, "weight")?;
        let r = reduction_from(reduction)?;
        // SAFETY: strings and pointers as documented.
        unsafe {
            let kind = pointwise_loss(c_str(loss, "loss")?, parameter)?;
            let grad = at(origin, || g.pointwise_loss_backward(&x, &t, w.as_ref(), kind, r))?;
            put_tensor(out, grad)
        }
    }

    /// `out = index_select(x, dim, index)`.
    fn etpu_index_select(x: TensorHandle, dim: i64, index: TensorHandle, origin: *const c_char, out: *mut TensorHandle) {
        let (x, i) = (get(x, "x")?, get(index, "index")?);
        // SAFETY: pointers as documented.
        unsafe {
            let t = at(origin, || x.index_select(dim, &i))?;
            put_tensor(out, t)
        }
    }

    /// `out = gather(x, dim, index)` (`torch.gather`).
    fn etpu_gather(x: TensorHandle, dim: i64, index: TensorHandle, origin: *const c_char, out: *mut TensorHandle) {
        let (x, i) = (get(x, "x")?, get(index, "index")?);
        // SAFETY: pointers as documented.
        unsafe {
            let t = at(origin, || x.gather(dim, &i))?;
            put_tensor(out, t)
        }
    }

    /// `out` = `x` with `src` written (or added, when `add`) at `index` along `dim`.
    fn etpu_scatter(x: TensorHandle, dim: i64, index: TensorHandle, src: TensorHandle, add: bool, origin: *const c_char, out: *mut TensorHandle) {
        let (x, i, s) = (get(x, "x")?, get(index, "index")?, get(src, "src")?);
        // SAFETY: pointers as documented.
        unsafe {
            let t = at(origin, || if add { x.scatter_add(dim, &i, &s) } else { x.scatter(dim, &i, &s) })?;
            put_tensor(out, t)
        }
    }

    /// `torch.scatter_reduce`: x where index names places along dim, each
    /// holding `reduce` (sum prod mean amax amin) of the src elements landing
    /// there and, with `include_self`, of its own.
    fn etpu_scatter_reduce(
        x: TensorHandle,
        dim: i64,
        index: TensorHandle,
        src: TensorHandle,
        reduce: *const c_char,
        include_self: bool,
        origin: *const c_char,
        out: *mut TensorHandle,
    ) {
        let (x, i, s) = (get(x, "x")?, get(index, "index")?, get(src, "src")?);
        // SAFETY: strings and pointers as documented.
        unsafe {
            let how = from_table("scatter_reduce", c_str(reduce, "reduce")?, ScatterReduction::ALL, ScatterReduction::name)?;
            let t = at(origin, || x.scatter_reduce(dim, &i, &s, how, include_self))?;
            put_tensor(out, t)
        }
    }

    /// `start, start + step, ...` below `end`, as `dtype`.
    fn etpu_arange(device: i64, start: ScalarArg, end: ScalarArg, step: ScalarArg, dtype: i32, origin: *const c_char, out: *mut TensorHandle) {
        let d = dtype_from(dtype)?;
        let (start, end, step) = (scalar(start, "start")?, scalar(end, "end")?, scalar(step, "step")?);
        let dev = crate::handles::device(device)?;
        // SAFETY: pointers as documented.
        unsafe {
            let t = at(origin, || dev.arange_with(start, end, step, d))?;
            put_tensor(out, t)
        }
    }

    /// `out = clamp(x, lo, hi)`; a NULL bound is none.
    fn etpu_clamp(x: TensorHandle, lo: *const ScalarArg, hi: *const ScalarArg, origin: *const c_char, out: *mut TensorHandle) {
        let x = get(x, "x")?;
        // SAFETY: pointers as documented.
        unsafe {
            let (lo, hi) = (optional_scalar(lo, "lo")?, optional_scalar(hi, "hi")?);
            let t = at(origin, || match (lo, hi) {
                (Some(lo), Some(hi)) => x.clamp(lo, hi),
                (Some(lo), None) => x.clamp_min(lo),
                (None, Some(hi)) => x.clamp_max(hi),
                (None, None) => Ok(x.clone()),
            })?;
            put_tensor(out, t)
        }
    }

    /// `argmax`/`argmin` (`op`, of `ArgReduce`'s table) along `dim` (the
    /// flattened tensor unless `has_dim`).
    fn etpu_argreduce(op: *const c_char, x: TensorHandle, dim: i64, has_dim: bool, keepdim: bool, origin: *const c_char, out: *mut TensorHandle) {
        let x = get(x, "x")?;
        // SAFETY: strings and pointers as documented.
        unsafe {
            let op = from_table("arg-reduction", c_str(op, "op")?, ArgReduce::ALL, ArgReduce::name)?;
            let t = at(origin, || x.arg_reduce(op, has_dim.then_some(dim), keepdim))?;
            put_tensor(out, t)
        }
    }

    /// `out = op(x, dim)` for `"cumsum"` and `"cumprod"` (`Cumulative`'s
    /// table): running sums or products along `dim` (ints and bools
    /// accumulate in int64).
    fn etpu_cumulative(op: *const c_char, x: TensorHandle, dim: i64, origin: *const c_char, out: *mut TensorHandle) {
        let x = get(x, "x")?;
        // SAFETY: strings and pointers as documented.
        unsafe {
            let op = from_table("cumulative", c_str(op, "op")?, Cumulative::ALL, Cumulative::name)?;
            let t = at(origin, || x.cumulative(op, dim))?;
            put_tensor(out, t)
        }
    }

    /// The polynomial `kind` (`"chebyshev_polynomial_t"` ... of the
    /// `Polynomial` table) of degree `trunc(n)` at `x`, elementwise.
    fn etpu_polynomial(kind: *const c_char, x: TensorHandle, n: TensorHandle, origin: *const c_char, out: *mut TensorHandle) {
        let (x, n) = (get(x, "x")?, get(n, "n")?);
        // SAFETY: strings and pointers as documented.
        unsafe {
            let kind = from_table("polynomial", c_str(kind, "kind")?, Polynomial::ALL, Polynomial::name)?;
            let t = at(origin, || x.polynomial(kind, &n))?;
            put_tensor(out, t)
        }
    }

    /// `x` sorted stably along `dim` to `values` and, unless `indices` is
    /// NULL, the int64 positions of the sorted elements to `indices`.
    fn etpu_sort(x: TensorHandle, dim: i64, descending: bool, origin: *const c_char, values: *mut TensorHandle, indices: *mut TensorHandle) {
        let x = get(x, "x")?;
        // SAFETY: strings and pointers as documented.
        unsafe {
            let pair = at(origin, || x.sort(dim, descending))?;
            put_pair(values, indices, pair)
        }
    }

    /// The `k` largest (smallest unless `largest`) elements along `dim`, in
    /// sorted order, to `values` and, unless `indices` is NULL, their int64
    /// positions to `indices`.
    fn etpu_topk(
        x: TensorHandle,
        k: i64,
        dim: i64,
        largest: bool,
        sorted: bool,
        origin: *const c_char,
        values: *mut TensorHandle,
        indices: *mut TensorHandle,
    ) {
        let x = get(x, "x")?;
        // SAFETY: strings and pointers as documented.
        unsafe {
            let pair = at(origin, || x.topk(k, dim, largest, sorted))?;
            put_pair(values, indices, pair)
        }
    }

    /// The order statistic `stat` (`"median"`, `"nanmedian"`, `"kthvalue"`
    /// with `k`, `"mode"`) of each row along `dim`: values and int64 indices.
    fn etpu_order_statistic(
        stat: *const c_char,
        k: i64,
        x: TensorHandle,
        dim: i64,
        keepdim: bool,
        origin: *const c_char,
        values: *mut TensorHandle,
        indices: *mut TensorHandle,
    ) {
        let x = get(x, "x")?;
        // SAFETY: strings and pointers as documented.
        unsafe {
            let name = c_str(stat, "stat")?;
            let kind = from_table("order statistic", name, OrderStatisticKind::ALL, OrderStatisticKind::name)?;
            let stat = OrderStatistic::of(kind, k);
            let pair = at(origin, || x.order_statistic(stat, dim, keepdim))?;
            put_pair(values, indices, pair)
        }
    }

    /// The median of all elements of `x` (NaN ignored when `ignore_nan`).
    fn etpu_median_all(x: TensorHandle, ignore_nan: bool, origin: *const c_char, out: *mut TensorHandle) {
        let x = get(x, "x")?;
        // SAFETY: pointers as documented.
        unsafe {
            let t = at(origin, || x.median_all(ignore_nan))?;
            put_tensor(out, t)
        }
    }

    /// Variance over `dims[0..ndims]` with Bessel's `correction`.
    fn etpu_var(x: TensorHandle, dims_ptr: *const i64, ndims: usize, correction: i64, keepdim: bool, origin: *const c_char, out: *mut TensorHandle) {
        let x = get(x, "x")?;
        // SAFETY: pointers as documented.
        unsafe {
            let d = dims(dims_ptr, ndims, "dims")?;
            let t = at(origin, || x.var(d, correction, keepdim))?;
            put_tensor(out, t)
        }
    }

    /// The standard deviation: the square root of `etpu_var`'s result.
    fn etpu_std(x: TensorHandle, dims_ptr: *const i64, ndims: usize, correction: i64, keepdim: bool, origin: *const c_char, out: *mut TensorHandle) {
        let x = get(x, "x")?;
        // SAFETY: pointers as documented.
        unsafe {
            let d = dims(dims_ptr, ndims, "dims")?;
            let t = at(origin, || x.std(d, correction, keepdim))?;
            put_tensor(out, t)
        }
    }

    /// `torch.linalg.vector_norm(x, ord, dims[0..ndims], keepdim)` of a
    /// floating-point `x` (no dims: all dims).
    fn etpu_vector_norm(x: TensorHandle, ord: f64, dims_ptr: *const i64, ndims: usize, keepdim: bool, origin: *const c_char, out: *mut TensorHandle) {
        let x = get(x, "x")?;
        // SAFETY: pointers as documented.
        unsafe {
            let d = dims(dims_ptr, ndims, "dims")?;
            let t = at(origin, || x.vector_norm(ord, d, keepdim))?;
            put_tensor(out, t)
        }
    }

    /// `torch.max(x, dim)` or `torch.min(x, dim)` (`op`: `"max"`, `"min"`,
    /// `Extreme`'s table): the extremes along `dim` to `values` and, unless
    /// `indices` is NULL, the int64 index of the first of each to `indices`.
    fn etpu_extreme_dim(op: *const c_char, x: TensorHandle, dim: i64, keepdim: bool, origin: *const c_char, values: *mut TensorHandle, indices: *mut TensorHandle) {
        let x = get(x, "x")?;
        // SAFETY: strings and pointers as documented.
        unsafe {
            let op = from_table("extreme", c_str(op, "op")?, Extreme::ALL, Extreme::name)?;
            let pair = at(origin, || x.extreme_dim(op, dim, keepdim))?;
            put_pair(values, indices, pair)
        }
    }
}

/// A reduction code of the C ABI: 0 none, 1 mean, 2 sum (ATen's own codes).
pub(crate) fn reduction_from(code: i32) -> FfiResult<Reduction> {
    match code {
        0 => Ok(Reduction::None),
        1 => Ok(Reduction::Mean),
        2 => Ok(Reduction::Sum),
        _ => Err(Failure::invalid(format!(
            "reduction {code} is not 0 (none), 1 (mean) or 2 (sum)"
        ))),
    }
}

/// A pointwise loss by its PyTorch name.
fn pointwise_loss(name: &str, parameter: f64) -> FfiResult<PointwiseLoss> {
    let kind = from_table(
        "pointwise loss",
        name,
        PointwiseLossKind::ALL,
        PointwiseLossKind::name,
    )?;
    Ok(PointwiseLoss::of(kind, parameter))
}

#[cfg(test)]
mod tests;
