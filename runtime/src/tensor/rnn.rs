//! The fused LSTM and GRU cells and their gradients (PyTorch's
//! `_thnn_fused_lstm_cell` and `_thnn_fused_gru_cell`, what `nn.LSTM` and
//! `nn.GRU` call per time step once the input and hidden projections are
//! done). Gates are `[B, k H]`, the pieces in PyTorch's order: LSTM
//! `i, f, g, o`; GRU `r, z, n`.

use super::Tensor;
use crate::error::Result;

/// An LSTM cell's results: the new hidden and cell states, and the
/// workspace its gradient reads (the activated gates, `[B, 4H]`).
pub struct LstmCell {
    pub hy: Tensor,
    pub cy: Tensor,
    pub workspace: Tensor,
}

/// The gradients of an LSTM cell: with respect to its summed gates
/// (`[B, 4H]`), to `cx`, and to a bias (the gates' gradient summed over the
/// batch) when the cell had one.
pub struct LstmCellGrad {
    pub gates: Tensor,
    pub cx: Tensor,
    pub bias: Option<Tensor>,
}

/// The gradients of a GRU cell: with respect to its input gates, hidden
/// gates and `hx`, and to the two biases when the cell had them.
pub struct GruCellGrad {
    pub input_gates: Tensor,
    pub hidden_gates: Tensor,
    pub hx: Tensor,
    pub input_bias: Option<Tensor>,
    pub hidden_bias: Option<Tensor>,
}

/// Checks gates `[B, k H]` (and biases `[k H]`) against a state `[B, H]`.
fn check_gates(
    op: &'static str,
    k: i64,
    gates: &[(&str, Option<&Tensor>)],
    state: &Tensor,
) -> Result<()> {
    let bad = |got: String, expected: String| -> crate::error::Error {
        fusion::Error::ShapeMismatch { op, got, expected }.into()
    };
    let &[batch, hidden] = state.shape() else {
        return Err(bad(
            format!("a state {}", state.ty()),
            "a state [batch, hidden]".into(),
        ));
    };
    for &(what, t) in gates {
        let Some(t) = t else { continue };
        let want: Vec<i64> = if what.ends_with("bias") {
            vec![k * hidden]
        } else {
            vec![batch, k * hidden]
        };
        if t.shape() != want || t.dtype() != state.dtype() {
            return Err(bad(
                format!("{what} {} for a state {}", t.ty(), state.ty()),
                format!("{what} {}{want:?}", state.dtype()),
            ));
        }
    }
    Ok(())
}

/// `gates` split into `k` pieces along dim 1.
fn pieces(gates: &Tensor, k: i64) -> Result<Vec<Tensor>> {
    let h = gates.shape()[1] / k;
    (0..k)
        .map(|i| gates.slice(1, i * h, (i + 1) * h, 1))
        .collect()
}

/// `1 - x`.
fn one_minus(x: &Tensor) -> Result<Tensor> {
    x.binary_op_reversed(fusion::BinaryOp::Sub, 1.0)
}

/// `x` plus `bias` when there is one.
fn plus(x: Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    match bias {
        Some(b) => &x + b,
        None => Ok(x),
    }
}

impl Tensor {
    /// One LSTM step: gates `input_gates + hidden_gates (+ biases)` give
    /// `i, f, g, o`; `cy = sigmoid(f) cx + sigmoid(i) tanh(g)` and
    /// `hy = sigmoid(o) tanh(cy)`.
    #[track_caller]
    pub fn lstm_cell(
        input_gates: &Tensor,
        hidden_gates: &Tensor,
        cx: &Tensor,
        input_bias: Option<&Tensor>,
        hidden_bias: Option<&Tensor>,
    ) -> Result<LstmCell> {
        check_gates(
            "lstm_cell",
            4,
            &[
                ("input_gates", Some(input_gates)),
                ("hidden_gates", Some(hidden_gates)),
                ("input_bias", input_bias),
                ("hidden_bias", hidden_bias),
            ],
            cx,
        )?;
        let gates = plus(
            plus((input_gates + hidden_gates)?, input_bias)?,
            hidden_bias,
        )?;
        let g = pieces(&gates, 4)?;
        let (i, f, c, o) = (
            g[0].sigmoid()?,
            g[1].sigmoid()?,
            g[2].tanh()?,
            g[3].sigmoid()?,
        );
        let cy = (&(&f * cx)? + &(&i * &c)?)?;
        let hy = (&o * &cy.tanh()?)?;
        let workspace = Tensor::cat(&[&i, &f, &c, &o], 1)?;
        Ok(LstmCell { hy, cy, workspace })
    }

    /// The gradient of `lstm_cell` from the gradients of `hy` and `cy`
    /// (either may be absent: zero), the cell's `cx`, `cy` and workspace.
    #[track_caller]
    pub fn lstm_cell_backward(
        grad_hy: Option<&Tensor>,
        grad_cy: Option<&Tensor>,
        cx: &Tensor,
        cy: &Tensor,
        workspace: &Tensor,
        has_bias: bool,
    ) -> Result<LstmCellGrad> {
        check_gates(
            "lstm_cell_backward",
            4,
            &[("workspace", Some(workspace))],
            cx,
        )?;
        let g = pieces(workspace, 4)?;
        let (i, f, c, o) = (&g[0], &g[1], &g[2], &g[3]);
        let zero = || cx.zeros_like();
        let ghy = grad_hy.cloned().map_or_else(zero, Ok)?;
        let gcy = grad_cy.cloned().map_or_else(zero, Ok)?;
        let tcy = cy.tanh()?;
        // d cy: directly, and through hy = o tanh(cy).
        let dc = (&gcy + &(&(&ghy * o)? * &one_minus(&(&tcy * &tcy)?)?)?)?;
        let di = (&(&dc * c)? * &(i * &one_minus(i)?)?)?;
        let df = (&(&dc * cx)? * &(f * &one_minus(f)?)?)?;
        let dg = (&(&dc * i)? * &one_minus(&(c * c)?)?)?;
        let dout = (&(&ghy * &tcy)? * &(o * &one_minus(o)?)?)?;
        let gates = Tensor::cat(&[&di, &df, &dg, &dout], 1)?;
        let bias = has_bias.then(|| gates.sum(&[0], false)).transpose()?;
        Ok(LstmCellGrad {
            cx: (&dc * f)?,
            gates,
            bias,
        })
    }

    /// One GRU step: `r = sigmoid(a_r + b_r)`, `z = sigmoid(a_z + b_z)`,
    /// `n = tanh(a_n + r b_n)`, `hy = n + z (hx - n)`, where `a` are the
    /// input gates (plus `input_bias`) and `b` the hidden gates (plus
    /// `hidden_bias`). Returns `hy` and the workspace its gradient reads
    /// (`r, z, b_n, hx, n`: `[B, 5H]`).
    #[track_caller]
    pub fn gru_cell(
        input_gates: &Tensor,
        hidden_gates: &Tensor,
        hx: &Tensor,
        input_bias: Option<&Tensor>,
        hidden_bias: Option<&Tensor>,
    ) -> Result<(Tensor, Tensor)> {
        check_gates(
            "gru_cell",
            3,
            &[
                ("input_gates", Some(input_gates)),
                ("hidden_gates", Some(hidden_gates)),
                ("input_bias", input_bias),
                ("hidden_bias", hidden_bias),
            ],
            hx,
        )?;
        let a = pieces(&plus(input_gates.clone(), input_bias)?, 3)?;
        let b = pieces(&plus(hidden_gates.clone(), hidden_bias)?, 3)?;
        let r = (&a[0] + &b[0])?.sigmoid()?;
        let z = (&a[1] + &b[1])?.sigmoid()?;
        let n = (&a[2] + &(&r * &b[2])?)?.tanh()?;
        let hy = (&n + &(&z * &(hx - &n)?)?)?;
        let workspace = Tensor::cat(&[&r, &z, &b[2], hx, &n], 1)?;
        Ok((hy, workspace))
    }

    /// The gradient of `gru_cell` from the gradient of `hy` and the cell's
    /// workspace.
    #[track_caller]
    pub fn gru_cell_backward(
        grad_hy: &Tensor,
        workspace: &Tensor,
        has_bias: bool,
    ) -> Result<GruCellGrad> {
        check_gates(
            "gru_cell_backward",
            5,
            &[("workspace", Some(workspace))],
            grad_hy,
        )?;
        let w = pieces(workspace, 5)?;
        let (r, z, hn, x, n) = (&w[0], &w[1], &w[2], &w[3], &w[4]);
        let g = grad_hy;
        // Through n's tanh, z's and r's sigmoids.
        let dn = (&(g * &one_minus(z)?)? * &one_minus(&(n * n)?)?)?;
        let dz = (&(g * &(x - n)?)? * &(z * &one_minus(z)?)?)?;
        let dr = (&(&dn * hn)? * &(r * &one_minus(r)?)?)?;
        let input_gates = Tensor::cat(&[&dr, &dz, &dn], 1)?;
        let hidden_gates = Tensor::cat(&[&dr, &dz, &(&dn * r)?], 1)?;
        let sum_batch = |t: &Tensor| has_bias.then(|| t.sum(&[0], false)).transpose();
        Ok(GruCellGrad {
            input_bias: sum_batch(&input_gates)?,
            hidden_bias: sum_batch(&hidden_gates)?,
            hx: (g * z)?,
            input_gates,
            hidden_gates,
        })
    }
}
