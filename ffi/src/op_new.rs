//! `etpu_op_new`: the runtime's matrix products, sums and softmaxes over
//! operands as `etpu_pointwise` takes them (views of storages, handles,
//! numbers), each result into a new allocation. A functional ATen kernel
//! (`mm`, `addmm`, `sum`, `_log_softmax`, ...) thus reads its inputs, runs the
//! op and makes its output in one C call, where reading each input as a
//! handle, running the op on handles and adopting the result took a call
//! each, and a free for every handle.

use std::ffi::c_char;

use eagertpu::{BinaryOp, Scalar, Tensor};

use crate::handles::dims;
use crate::ops::reduction_from;
use crate::pointwise::{Value, into_new_allocation, operand_args, read_operands};
use crate::types::{OperandArg, StorageHandle};
use crate::{Failure, FfiResult, c_api, c_str};

/// What each op takes, for errors.
const SIGNATURES: &str = "matmul (a, b); addmm (bias, a, b, beta, alpha: numbers): beta * bias + alpha * a @ b, \
    bias ignored when beta is 0; sum (x, dims: an integer with a bit per reduced dim, none meaning all, keepdim); \
    softmax and log_softmax (x, dim); softmax_backward and log_softmax_backward (grad, output, dim); \
    nll_loss_backward (grad, input, target, total_weight, reduction: 0 none, 1 mean, 2 sum, ignore_index)";

fn bad_args(op: &str, args: &[Value]) -> Failure {
    let got: Vec<String> = args
        .iter()
        .map(|a| match a {
            Value::Tensor(t) => t.ty().to_string(),
            Value::Scalar(s) => format!("scalar {s}"),
        })
        .collect();
    Failure::invalid(format!(
        "op_new: {op} got ({}); expected {SIGNATURES}",
        got.join(", ")
    ))
}

/// The dims whose bits `mask` sets, in order.
fn dims_of(mask: Scalar) -> Vec<i64> {
    let bits = mask.as_i64() as u64;
    (0..64).filter(|d| bits >> d & 1 == 1).collect()
}

/// `beta * bias + alpha * product`, `bias` ignored when `beta` is 0 (as
/// ATen's addmm: a NaN in it then does not show).
fn scaled_sum(
    bias: &Tensor,
    product: Tensor,
    beta: Scalar,
    alpha: Scalar,
) -> eagertpu::Result<Tensor> {
    let product = if alpha.as_f64() == 1.0 {
        product
    } else {
        product.binary_op(BinaryOp::Mul, alpha)?
    };
    if beta.as_f64() == 0.0 {
        return Ok(product);
    }
    let bias = if beta.as_f64() == 1.0 {
        bias.clone()
    } else {
        bias.binary_op(BinaryOp::Mul, beta)?
    };
    bias.binary_op(BinaryOp::Add, &product)
}

/// Runs `op` over the read operands.
fn run(op: &str, args: &[Value]) -> FfiResult<Tensor> {
    use Value::{Scalar as S, Tensor as T};
    let result = match (op, args) {
        ("matmul", [T(a), T(b)]) => a.matmul(b),
        ("addmm", [T(bias), T(a), T(b), S(beta), S(alpha)]) => {
            a.matmul(b).and_then(|p| scaled_sum(bias, p, *beta, *alpha))
        }
        ("sum", [T(x), S(mask), S(keepdim)]) => x.sum(&dims_of(*mask), keepdim.as_i64() != 0),
        ("softmax", [T(x), S(dim)]) => x.softmax(dim.as_i64()),
        ("log_softmax", [T(x), S(dim)]) => x.log_softmax(dim.as_i64()),
        ("softmax_backward", [T(grad), T(output), S(dim)]) => {
            Tensor::softmax_backward(grad, output, dim.as_i64(), false)
        }
        ("log_softmax_backward", [T(grad), T(output), S(dim)]) => {
            Tensor::softmax_backward(grad, output, dim.as_i64(), true)
        }
        (
            "nll_loss_backward",
            [
                T(grad),
                T(x),
                T(target),
                T(total_weight),
                S(r),
                S(ignore_index),
            ],
        ) => {
            let r = i32::try_from(r.as_i64()).map_err(|_| bad_args(op, args))?;
            grad.nll_loss_backward(
                x,
                target,
                None,
                reduction_from(r)?,
                ignore_index.as_i64(),
                total_weight,
            )
        }
        _ => return Err(bad_args(op, args)),
    };
    Ok(result?)
}

c_api! {
    /// `op` over `args[0..nargs]` (see `SIGNATURES`) into a new allocation on
    /// `device` that holds the result as a contiguous `dtype` array of
    /// `sizes[0..rank]` (converted and broadcast to it, refused as an `out=`
    /// view refuses a dtype the result cannot be cast to), its id written to
    /// `storage`. Nothing is allocated when it fails.
    fn etpu_op_new(
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
            let raw = operand_args("op_new", args, nargs)?;
            into_new_allocation(op, device, dtype, sizes, origin, storage, || run(op, &read_operands(raw)?))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::{CStr, c_void};

    use eagertpu::DType;

    use super::*;
    use crate::handles::dtype_code;
    use crate::handles::etpu_tensor_from_host;
    use crate::last_error;
    use crate::pointwise::tests::{allocated, contents, f32_tensor, free, handle, number};
    use crate::types::TensorHandle;
    use crate::{ETPU_INVALID_ARGUMENT, ETPU_OK};

    const ORIGIN: *const c_char = c"op_new.rs:test".as_ptr();

    /// `op(args)` into a new f32 allocation of `sizes` (its id, or the status).
    fn op_f32(op: &CStr, args: &[OperandArg], sizes: &[i64]) -> Result<StorageHandle, i32> {
        let mut storage = StorageHandle(0);
        // SAFETY: every pointer is valid for the lengths passed.
        let status = unsafe {
            etpu_op_new(
                op.as_ptr(),
                args.as_ptr(),
                args.len(),
                0,
                dtype_code(DType::F32),
                sizes.as_ptr(),
                sizes.len(),
                ORIGIN,
                &mut storage,
            )
        };
        allocated(status, storage)
    }

    /// A `[dims]` int64 tensor on device 0.
    fn i64_tensor(v: &[i64], dims: &[i64]) -> TensorHandle {
        let mut t = TensorHandle(0);
        // SAFETY: `v` and `dims` are valid for the lengths passed; `t` is writable.
        let status = unsafe {
            etpu_tensor_from_host(
                0,
                dtype_code(DType::I64),
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

    fn integer(n: i64) -> OperandArg {
        let mut a = number(0.0);
        a.scalar.kind = crate::types::ETPU_SCALAR_INT;
        a.scalar.int = n;
        a
    }

    #[test]
    fn each_op_matches_its_host_reference() {
        // a: [[1, 2, 3], [4, 5, 6]], b: [[1, 0], [0, 1], [2, -1]].
        let a = f32_tensor(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
        let b = f32_tensor(&[1.0, 0.0, 0.0, 1.0, 2.0, -1.0], &[3, 2]);
        let bias = f32_tensor(&[10.0, 20.0], &[2]);
        let mm = op_f32(c"matmul", &[handle(a), handle(b)], &[2, 2]).unwrap();
        assert_eq!(contents(mm, 4), [7.0, -1.0, 16.0, -1.0]);
        // 0.5 * bias + 2 * a @ b, the bias broadcast over the rows.
        let args = [handle(bias), handle(a), handle(b), number(0.5), number(2.0)];
        let addmm = op_f32(c"addmm", &args, &[2, 2]).unwrap();
        assert_eq!(contents(addmm, 4), [19.0, 8.0, 37.0, 8.0]);
        // beta 0: the bias is not read into the result (a NaN in it stays out).
        let nan_bias = f32_tensor(&[f32::NAN, 1.0], &[2]);
        let args = [
            handle(nan_bias),
            handle(a),
            handle(b),
            number(0.0),
            number(1.0),
        ];
        let no_bias = op_f32(c"addmm", &args, &[2, 2]).unwrap();
        assert_eq!(contents(no_bias, 4), [7.0, -1.0, 16.0, -1.0]);
        // Sums over dim 0 (mask 0b01), over dim 1 kept, and over all (mask 0).
        let cols = op_f32(c"sum", &[handle(a), integer(0b01), integer(0)], &[3]).unwrap();
        assert_eq!(contents(cols, 3), [5.0, 7.0, 9.0]);
        let rows = op_f32(c"sum", &[handle(a), integer(0b10), integer(1)], &[2, 1]).unwrap();
        assert_eq!(contents(rows, 2), [6.0, 15.0]);
        let all = op_f32(c"sum", &[handle(a), integer(0), integer(0)], &[]).unwrap();
        assert_eq!(contents(all, 1), [21.0]);
        // log_softmax along dim 1 against the host's.
        let ls = op_f32(c"log_softmax", &[handle(a), integer(1)], &[2, 3]).unwrap();
        let want: Vec<f32> = [[1.0f64, 2.0, 3.0], [4.0, 5.0, 6.0]]
            .iter()
            .flat_map(|r| {
                let lse = r.iter().map(|v| v.exp()).sum::<f64>().ln();
                r.iter().map(move |v| (v - lse) as f32).collect::<Vec<_>>()
            })
            .collect();
        for (g, w) in contents(ls, 6).iter().zip(&want) {
            assert!((g - w).abs() < 1e-5, "{g} against {w}");
        }
        // nll_loss's gradient, mean over targets [0, 2] (total weight 2):
        // -1/2 at each target's class, 0 elsewhere.
        let target = i64_tensor(&[0, 2], &[2]);
        let (grad, total) = (f32_tensor(&[1.0], &[]), f32_tensor(&[2.0], &[]));
        let args = [
            handle(grad),
            handle(a),
            handle(target),
            handle(total),
            integer(1),
            integer(-100),
        ];
        let nll = op_f32(c"nll_loss_backward", &args, &[2, 3]).unwrap();
        assert_eq!(contents(nll, 6), [-0.5, 0.0, 0.0, 0.0, 0.0, -0.5]);
        free(
            &[mm, addmm, no_bias, cols, rows, all, ls, nll],
            &[a, b, bias, nan_bias, target, grad, total],
        );
    }

    #[test]
    fn bad_operands_allocate_nothing_and_the_next_call_works() {
        let a = f32_tensor(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]);
        // Shapes that do not multiply: the runtime's own error.
        assert_eq!(
            op_f32(c"matmul", &[handle(a), handle(a)], &[2, 3]),
            Err(ETPU_INVALID_ARGUMENT)
        );
        assert!(last_error().contains("[2, 3]"), "{}", last_error());
        // An op the table does not have, and operands an op does not take.
        assert_eq!(
            op_f32(c"frobnicate", &[handle(a)], &[2, 3]),
            Err(ETPU_INVALID_ARGUMENT)
        );
        let e = last_error();
        assert!(
            e.contains("frobnicate got (") && e.contains("expected matmul (a, b)"),
            "{e}"
        );
        assert_eq!(
            op_f32(c"softmax", &[handle(a), handle(a)], &[2, 3]),
            Err(ETPU_INVALID_ARGUMENT)
        );
        // A dim out of range.
        assert_eq!(
            op_f32(c"softmax", &[handle(a), integer(2)], &[2, 3]),
            Err(ETPU_INVALID_ARGUMENT)
        );
        assert!(last_error().contains("softmax"), "{}", last_error());
        // A result that does not fit the allocation's shape.
        assert_eq!(
            op_f32(c"sum", &[handle(a), integer(0b01), integer(0)], &[2]),
            Err(ETPU_INVALID_ARGUMENT)
        );
        let s = op_f32(c"softmax", &[handle(a), integer(-1)], &[2, 3]).unwrap();
        let got = contents(s, 6);
        assert!((got[0] + got[1] + got[2] - 1.0).abs() < 1e-6, "{got:?}");
        free(&[s], &[a]);
    }
}
