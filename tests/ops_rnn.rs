//! The fused LSTM and GRU cells against a host reference in every mode: the
//! states from the cell equations, the gradients by central differences of
//! the host's cell.

mod common;

use common::*;
use eagertpu::{DType, Tensor};

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

const B: usize = 3;
const H: usize = 4;

/// The host's LSTM step of summed gates `[B, 4H]` and `cx` `[B, H]`: (hy, cy).
fn host_lstm(gates: &[f64], cx: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let (mut hy, mut cy) = (vec![0.0; B * H], vec![0.0; B * H]);
    for b in 0..B {
        for j in 0..H {
            let g = |k: usize| gates[b * 4 * H + k * H + j];
            let c = sigmoid(g(1)) * cx[b * H + j] + sigmoid(g(0)) * g(2).tanh();
            cy[b * H + j] = c;
            hy[b * H + j] = sigmoid(g(3)) * c.tanh();
        }
    }
    (hy, cy)
}

/// The host's GRU step of input gates and hidden gates `[B, 3H]` and `hx`.
fn host_gru(a: &[f64], h: &[f64], hx: &[f64]) -> Vec<f64> {
    let mut hy = vec![0.0; B * H];
    for b in 0..B {
        for j in 0..H {
            let (ai, hi) = (
                |k: usize| a[b * 3 * H + k * H + j],
                |k: usize| h[b * 3 * H + k * H + j],
            );
            let r = sigmoid(ai(0) + hi(0));
            let z = sigmoid(ai(1) + hi(1));
            let n = (ai(2) + r * hi(2)).tanh();
            hy[b * H + j] = n + z * (hx[b * H + j] - n);
        }
    }
    hy
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn bias_sum(rows: &[f64], width: usize) -> Vec<f64> {
    (0..width)
        .map(|j| rows.iter().skip(j).step_by(width).sum())
        .collect()
}

const TOL: (f64, f64) = (1e-6, 1e-7);

all_modes! {
fn lstm_cell_and_its_gradient_match_the_host() {
    let f = DType::F64;
    let (ig, hg) = (Host::random(f, &[3, 16], 1200), Host::random(f, &[3, 16], 1201));
    let (ib, hb) = (Host::random(f, &[16], 1202), Host::random(f, &[16], 1203));
    let cx = Host::random(f, &[3, 4], 1204);
    let gates: Vec<f64> = (0..B * 4 * H).map(|i| ig.data[i] + hg.data[i] + ib.data[i % 16] + hb.data[i % 16]).collect();
    let (want_hy, want_cy) = host_lstm(&gates, &cx.data);
    let (ibt, hbt) = (ib.tensor(), hb.tensor());
    let cell = Tensor::lstm_cell(&ig.tensor(), &hg.tensor(), &cx.tensor(), Some(&ibt), Some(&hbt)).unwrap();
    assert_close_tol("lstm hy", &cell.hy, &Host::new(f, &[3, 4], want_hy), TOL);
    assert_close_tol("lstm cy", &cell.cy, &Host::new(f, &[3, 4], want_cy), TOL);

    let (ghy, gcy) = (Host::random(f, &[3, 4], 1205), Host::random(f, &[3, 4], 1206));
    // loss = <hy, ghy> + <cy, gcy>, as a function of the gates and of cx.
    let loss = |gates: &[f64], cx: &[f64]| {
        let (hy, cy) = host_lstm(gates, cx);
        dot(&hy, &ghy.data) + dot(&cy, &gcy.data)
    };
    let want_gates = central_differences(&gates, 1e-6, |g| loss(g, &cx.data));
    let want_cx = central_differences(&cx.data, 1e-6, |c| loss(&gates, c));
    let (gh, gc) = (ghy.tensor(), gcy.tensor());
    let grad = Tensor::lstm_cell_backward(Some(&gh), Some(&gc), &cx.tensor(), &cell.cy, &cell.workspace, true).unwrap();
    assert_close_tol("lstm d gates", &grad.gates, &Host::new(f, &[3, 16], want_gates.clone()), TOL);
    assert_close_tol("lstm d cx", &grad.cx, &Host::new(f, &[3, 4], want_cx), TOL);
    assert_close_tol("lstm d bias", grad.bias.as_ref().unwrap(), &Host::new(f, &[16], bias_sum(&want_gates, 16)), TOL);

    // Only cy's gradient given (hy unused), and no bias.
    let only_cy = Tensor::lstm_cell_backward(None, Some(&gc), &cx.tensor(), &cell.cy, &cell.workspace, false).unwrap();
    let want = central_differences(&gates, 1e-6, |g| dot(&host_lstm(g, &cx.data).1, &gcy.data));
    assert_close_tol("lstm d gates from cy only", &only_cy.gates, &Host::new(f, &[3, 16], want), TOL);
    assert!(only_cy.bias.is_none());
}
}

all_modes! {
fn gru_cell_and_its_gradient_match_the_host() {
    let f = DType::F64;
    let (ig, hg) = (Host::random(f, &[3, 12], 1210), Host::random(f, &[3, 12], 1211));
    let (ib, hb) = (Host::random(f, &[12], 1212), Host::random(f, &[12], 1213));
    let hx = Host::random(f, &[3, 4], 1214);
    let a: Vec<f64> = (0..B * 3 * H).map(|i| ig.data[i] + ib.data[i % 12]).collect();
    let h: Vec<f64> = (0..B * 3 * H).map(|i| hg.data[i] + hb.data[i % 12]).collect();
    let (ibt, hbt) = (ib.tensor(), hb.tensor());
    let (hy, workspace) = Tensor::gru_cell(&ig.tensor(), &hg.tensor(), &hx.tensor(), Some(&ibt), Some(&hbt)).unwrap();
    assert_close_tol("gru hy", &hy, &Host::new(f, &[3, 4], host_gru(&a, &h, &hx.data)), TOL);

    let ghy = Host::random(f, &[3, 4], 1215);
    let loss = |a: &[f64], h: &[f64], x: &[f64]| dot(&host_gru(a, h, x), &ghy.data);
    let want_a = central_differences(&a, 1e-6, |v| loss(v, &h, &hx.data));
    let want_h = central_differences(&h, 1e-6, |v| loss(&a, v, &hx.data));
    let want_x = central_differences(&hx.data, 1e-6, |v| loss(&a, &h, v));
    let grad = Tensor::gru_cell_backward(&ghy.tensor(), &workspace, true).unwrap();
    assert_close_tol("gru d input gates", &grad.input_gates, &Host::new(f, &[3, 12], want_a.clone()), TOL);
    assert_close_tol("gru d hidden gates", &grad.hidden_gates, &Host::new(f, &[3, 12], want_h.clone()), TOL);
    assert_close_tol("gru d hx", &grad.hx, &Host::new(f, &[3, 4], want_x), TOL);
    assert_close_tol("gru d input bias", grad.input_bias.as_ref().unwrap(), &Host::new(f, &[12], bias_sum(&want_a, 12)), TOL);
    assert_close_tol("gru d hidden bias", grad.hidden_bias.as_ref().unwrap(), &Host::new(f, &[12], bias_sum(&want_h, 12)), TOL);
    let unbiased = Tensor::gru_cell_backward(&ghy.tensor(), &workspace, false).unwrap();
    assert!(unbiased.input_bias.is_none() && unbiased.hidden_bias.is_none());
}
}

all_modes! {
fn rnn_cells_reject_mismatched_gates_naming_them() {
    let f = DType::F32;
    let (ig, cx) = (Host::random(f, &[3, 16], 1220).tensor(), Host::random(f, &[3, 4], 1221).tensor());
    let short = Host::random(f, &[3, 12], 1222).tensor();
    let r = Tensor::lstm_cell(&ig, &short, &cx, None, None).map(|c| c.hy);
    assert_err(r, "lstm_cell", &["hidden_gates float32[3, 12]", "[3, 16]"]);
    let bias = Host::random(f, &[12], 1223).tensor();
    let r = Tensor::gru_cell(&short, &short, &cx, Some(&bias), Some(&ig));
    assert_err(r, "gru_cell", &["hidden_bias float32[3, 16]", "[12]"]);
    let r = Tensor::lstm_cell(&ig, &ig, &ig, None, None).map(|c| c.hy);
    assert_err(r, "lstm_cell", &["input_gates float32[3, 16] for a state float32[3, 16]"]);
}
}
