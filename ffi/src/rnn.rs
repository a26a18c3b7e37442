//! Entry points for the fused LSTM and GRU cells and their gradients
//! (`Tensor::lstm_cell`, `Tensor::gru_cell` and their backwards). Optional
//! tensors (biases, gradients) are handle 0 when absent; an absent result
//! is written as handle 0.

use std::ffi::c_char;

use eagertpu::Tensor;

use crate::handles::{get, get_optional, put_all};
use crate::types::TensorHandle;
use crate::{at, c_api};

c_api! {
    /// One LSTM step (gates `[B, 4H]` in PyTorch's order i, f, g, o; biases
    /// `[4H]` or 0): `hy`, `cy` and the workspace its backward reads.
    fn etpu_lstm_cell(
        input_gates: TensorHandle,
        hidden_gates: TensorHandle,
        cx: TensorHandle,
        input_bias: TensorHandle,
        hidden_bias: TensorHandle,
        origin: *const c_char,
        hy: *mut TensorHandle,
        cy: *mut TensorHandle,
        workspace: *mut TensorHandle,
    ) {
        let (ig, hg, c) = (get(input_gates, "input_gates")?, get(hidden_gates, "hidden_gates")?, get(cx, "cx")?);
        let (ib, hb) = (get_optional(input_bias, "input_bias")?, get_optional(hidden_bias, "hidden_bias")?);
        // SAFETY: pointers as documented.
        unsafe {
            let cell = at(origin, || Tensor::lstm_cell(&ig, &hg, &c, ib.as_ref(), hb.as_ref()))?;
            put_all(&mut [(hy, Some(cell.hy), "hy"), (cy, Some(cell.cy), "cy"), (workspace, Some(cell.workspace), "workspace")])
        }
    }

    /// The gradient of `etpu_lstm_cell` (`grad_hy`, `grad_cy` may be 0):
    /// with respect to the summed gates, to `cx`, and (when `has_bias`, else
    /// handle 0) to a bias.
    fn etpu_lstm_cell_backward(
        grad_hy: TensorHandle,
        grad_cy: TensorHandle,
        cx: TensorHandle,
        cy: TensorHandle,
        workspace: TensorHandle,
        has_bias: bool,
        origin: *const c_char,
        grad_gates: *mut TensorHandle,
        grad_cx: *mut TensorHandle,
        grad_bias: *mut TensorHandle,
    ) {
        let (ghy, gcy) = (get_optional(grad_hy, "grad_hy")?, get_optional(grad_cy, "grad_cy")?);
        let (c, y, w) = (get(cx, "cx")?, get(cy, "cy")?, get(workspace, "workspace")?);
        // SAFETY: pointers as documented.
        unsafe {
            let g = at(origin, || Tensor::lstm_cell_backward(ghy.as_ref(), gcy.as_ref(), &c, &y, &w, has_bias))?;
            put_all(&mut [(grad_gates, Some(g.gates), "grad_gates"), (grad_cx, Some(g.cx), "grad_cx"), (grad_bias, g.bias, "grad_bias")])
        }
    }

    /// One GRU step (gates `[B, 3H]` in PyTorch's order r, z, n; biases
    /// `[3H]` or 0): `hy` and the workspace its backward reads.
    fn etpu_gru_cell(
        input_gates: TensorHandle,
        hidden_gates: TensorHandle,
        hx: TensorHandle,
        input_bias: TensorHandle,
        hidden_bias: TensorHandle,
        origin: *const c_char,
        hy: *mut TensorHandle,
        workspace: *mut TensorHandle,
    ) {
        let (ig, hg, h) = (get(input_gates, "input_gates")?, get(hidden_gates, "hidden_gates")?, get(hx, "hx")?);
        let (ib, hb) = (get_optional(input_bias, "input_bias")?, get_optional(hidden_bias, "hidden_bias")?);
        // SAFETY: pointers as documented.
        unsafe {
            let (y, w) = at(origin, || Tensor::gru_cell(&ig, &hg, &h, ib.as_ref(), hb.as_ref()))?;
            put_all(&mut [(hy, Some(y), "hy"), (workspace, Some(w), "workspace")])
        }
    }

    /// The gradient of `etpu_gru_cell`: with respect to the input gates, the
    /// hidden gates, `hx`, and (when `has_bias`, else handle 0) the biases.
    fn etpu_gru_cell_backward(
        grad_hy: TensorHandle,
        workspace: TensorHandle,
        has_bias: bool,
        origin: *const c_char,
        grad_input_gates: *mut TensorHandle,
        grad_hidden_gates: *mut TensorHandle,
        grad_hx: *mut TensorHandle,
        grad_input_bias: *mut TensorHandle,
        grad_hidden_bias: *mut TensorHandle,
    ) {
        let (g, w) = (get(grad_hy, "grad_hy")?, get(workspace, "workspace")?);
        // SAFETY: pointers as documented.
        unsafe {
            let d = at(origin, || Tensor::gru_cell_backward(&g, &w, has_bias))?;
            put_all(&mut [
                (grad_input_gates, Some(d.input_gates), "grad_input_gates"),
                (grad_hidden_gates, Some(d.hidden_gates), "grad_hidden_gates"),
                (grad_hx, Some(d.hx), "grad_hx"),
                (grad_input_bias, d.input_bias, "grad_input_bias"),
                (grad_hidden_bias, d.hidden_bias, "grad_hidden_bias"),
            ])
        }
    }
}
