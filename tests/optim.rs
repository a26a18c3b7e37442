//! Optimizer steps (`Adam`, `Sgd`: PyTorch's fused Adam, AdamW and SGD)
//! against host references over several steps, in every mode: weight decay
//! both ways, AMSGrad, maximize, a tensor learning rate, AMP's grad_scale
//! (the gradient stored back unscaled) and found_inf (nothing changes), and
//! half-precision parameters updated in float32.

mod common;

use common::*;
use eagertpu::{Adam, AdamParam, DType, GradScaling, Sgd, SgdParam, Tensor};

/// One parameter's Adam state on the host.
#[derive(Clone)]
struct HostAdam {
    param: Vec<f64>,
    grad: Vec<f64>,
    m: Vec<f64>,
    v: Vec<f64>,
    max_v: Vec<f64>,
}

/// PyTorch's Adam step `step` (counted from 1) on the host, in f64.
fn host_adam(s: &mut HostAdam, hp: &Adam, lr: f64, step: f64, grad_scale: f64) {
    let (b1, b2) = (hp.beta1, hp.beta2);
    let bias1 = 1.0 - b1.powf(step);
    let bias2_sqrt = (1.0 - b2.powf(step)).sqrt();
    for i in 0..s.param.len() {
        s.grad[i] /= grad_scale;
        let mut g = if hp.maximize { -s.grad[i] } else { s.grad[i] };
        let mut w = s.param[i];
        if hp.weight_decay != 0.0 {
            if hp.decoupled {
                w -= lr * hp.weight_decay * w;
            } else {
                g += hp.weight_decay * w;
            }
        }
        s.m[i] = b1 * s.m[i] + (1.0 - b1) * g;
        s.v[i] = b2 * s.v[i] + (1.0 - b2) * g * g;
        s.max_v[i] = s.max_v[i].max(s.v[i]);
        let v = if hp.amsgrad { s.max_v[i] } else { s.v[i] };
        let denom = v.sqrt() / bias2_sqrt + hp.eps;
        s.param[i] = w - lr / bias1 * s.m[i] / denom;
    }
}

fn t(dtype: DType, v: &[f64]) -> Tensor {
    Host::new(dtype, &[v.len() as i64], v.to_vec()).tensor()
}

fn close(what: &str, got: &Tensor, want: &[f64], dtype: DType) {
    assert_close_tol(
        what,
        got,
        &Host::new(dtype, &[want.len() as i64], want.to_vec()),
        tolerance(dtype),
    );
}

const ADAMS: [Adam; 3] = [
    Adam {
        beta1: 0.9,
        beta2: 0.999,
        weight_decay: 0.0,
        eps: 1e-8,
        amsgrad: false,
        maximize: false,
        decoupled: false,
    },
    Adam {
        beta1: 0.8,
        beta2: 0.99,
        weight_decay: 0.1,
        eps: 1e-6,
        amsgrad: true,
        maximize: false,
        decoupled: true,
    },
    Adam {
        beta1: 0.9,
        beta2: 0.95,
        weight_decay: 0.05,
        eps: 1e-8,
        amsgrad: false,
        maximize: true,
        decoupled: false,
    },
];

all_modes! {
fn adam_and_adamw_steps_match_the_host_over_several_steps() {
    for dtype in [DType::F32, DType::BF16] {
        for (k, hp) in ADAMS.iter().enumerate() {
            let n = 7;
            let init = HostAdam {
                param: Host::random(DType::F64, &[n], 10 + k as u64).data,
                grad: vec![0.0; n as usize],
                m: vec![0.0; n as usize],
                v: vec![0.0; n as usize],
                max_v: vec![0.0; n as usize],
            };
            let round = |v: &[f64]| Host::new(dtype, &[n], v.to_vec()).data;
            let mut host = HostAdam { param: round(&init.param), ..init.clone() };
            let mut param = t(dtype, &host.param);
            let (mut m, mut v, mut mx) = (t(dtype, &host.m), t(dtype, &host.v), t(dtype, &host.max_v));
            for step in 1..=3 {
                let g = round(&Host::random(DType::F64, &[n], 100 * step + k as u64).data);
                host.grad = g.clone();
                // A tensor learning rate on the last step (PyTorch's tensor_lr).
                let lr = 0.01 * step as f64;
                host_adam(&mut host, hp, lr, step as f64, 1.0);
                let grad = t(dtype, &g);
                let count = Tensor::from_slice(&[step as f32], &[]).unwrap();
                let p = AdamParam {
                    param: &param,
                    grad: &grad,
                    exp_avg: &m,
                    exp_avg_sq: &v,
                    max_exp_avg_sq: hp.amsgrad.then_some(&mx),
                    step: &count,
                };
                let lr_tensor = Tensor::from_slice(&[lr], &[1]).unwrap();
                let u = if step == 3 {
                    hp.step(&p, &lr_tensor, GradScaling::default())
                } else {
                    hp.step(&p, lr, GradScaling::default())
                }
                .unwrap();
                param = u.param;
                m = u.exp_avg;
                v = u.exp_avg_sq;
                if let Some(new) = u.max_exp_avg_sq {
                    mx = new;
                }
                // Half precision: each step rounds the state to the dtype.
                host.param = round(&host.param);
                host.m = round(&host.m);
                host.v = round(&host.v);
                host.max_v = round(&host.max_v);
                let what = format!("adam {k} {dtype} step {step}");
                assert_eq!(param.dtype(), dtype, "{what}");
                close(&format!("{what} param"), &param, &host.param, dtype);
                close(&format!("{what} exp_avg"), &m, &host.m, dtype);
                close(&format!("{what} exp_avg_sq"), &v, &host.v, dtype);
            }
        }
    }
}
}

all_modes! {
fn grad_scale_unscales_the_gradient_and_found_inf_skips_the_step() {
    let hp = ADAMS[0];
    let (param, grad) = (t(DType::F32, &[1.0, -2.0]), t(DType::F32, &[4.0, 8.0]));
    let zeros = t(DType::F32, &[0.0, 0.0]);
    let step = Tensor::from_slice(&[1.0f32], &[]).unwrap();
    let p = AdamParam { param: &param, grad: &grad, exp_avg: &zeros, exp_avg_sq: &zeros, max_exp_avg_sq: None, step: &step };
    let scale = Tensor::from_slice(&[2.0f32], &[]).unwrap();
    let no_inf = Tensor::from_slice(&[0.0f32], &[1]).unwrap();
    let scaling = GradScaling { grad_scale: Some(&scale), found_inf: Some(&no_inf) };
    let u = hp.step(&p, 0.1, scaling).unwrap();
    let mut host = HostAdam { param: vec![1.0, -2.0], grad: vec![4.0, 8.0], m: vec![0.0; 2], v: vec![0.0; 2], max_v: vec![0.0; 2] };
    host_adam(&mut host, &hp, 0.1, 1.0, 2.0);
    close("scaled param", &u.param, &host.param, DType::F32);
    close("unscaled grad", &u.grad, &[2.0, 4.0], DType::F32);
    // An infinite gradient somewhere: nothing changes, not even the gradient.
    let inf = Tensor::from_slice(&[1.0f32], &[1]).unwrap();
    let u = hp.step(&p, 0.1, GradScaling { grad_scale: Some(&scale), found_inf: Some(&inf) }).unwrap();
    close("skipped param", &u.param, &[1.0, -2.0], DType::F32);
    close("skipped grad", &u.grad, &[4.0, 8.0], DType::F32);
    close("skipped exp_avg", &u.exp_avg, &[0.0, 0.0], DType::F32);
}
}

all_modes! {
fn sgd_steps_with_momentum_nesterov_and_weight_decay_match_the_host() {
    let cases = [
        Sgd { weight_decay: 0.0, momentum: 0.0, dampening: 0.0, nesterov: false, maximize: false },
        Sgd { weight_decay: 0.01, momentum: 0.9, dampening: 0.1, nesterov: false, maximize: false },
        Sgd { weight_decay: 0.0, momentum: 0.9, dampening: 0.0, nesterov: true, maximize: true },
    ];
    for (k, hp) in cases.iter().enumerate() {
        let n = 5;
        let mut w = Host::random(DType::F32, &[n], 20 + k as u64).data;
        let mut buf = vec![0.0; n as usize];
        let mut param = t(DType::F32, &w);
        let mut buffer = t(DType::F32, &buf);
        for step in 0..3u64 {
            let g = Host::random(DType::F32, &[n], 200 + step).data;
            let lr = 0.1;
            for i in 0..n as usize {
                let mut d = if hp.maximize { -g[i] } else { g[i] };
                d += hp.weight_decay * w[i];
                if hp.momentum != 0.0 {
                    buf[i] = if step == 0 { d } else { hp.momentum * buf[i] + (1.0 - hp.dampening) * d };
                    d = if hp.nesterov { d + hp.momentum * buf[i] } else { buf[i] };
                }
                w[i] -= lr * d;
            }
            let grad = t(DType::F32, &g);
            let p = SgdParam { param: &param, grad: &grad, momentum_buffer: (hp.momentum != 0.0).then_some(&buffer) };
            let u = hp.step(&p, lr, step == 0, GradScaling::default()).unwrap();
            param = u.param;
            if let Some(b) = u.momentum_buffer {
                buffer = b;
            }
            close(&format!("sgd {k} step {step}"), &param, &w, DType::F32);
        }
    }
}
}

all_modes! {
fn a_step_with_mismatched_state_is_refused_naming_it() {
    let hp = ADAMS[1];
    let (param, grad) = (t(DType::F32, &[1.0, 2.0]), t(DType::F32, &[1.0, 2.0]));
    let short = t(DType::F32, &[0.0]);
    let step = Tensor::from_slice(&[1.0f32], &[]).unwrap();
    let p = AdamParam { param: &param, grad: &grad, exp_avg: &short, exp_avg_sq: &grad, max_exp_avg_sq: Some(&grad), step: &step };
    assert_err(hp.step(&p, 0.1, GradScaling::default()), "fused_adamw", &["exp_avg float32[1]", "parameter float32[2]"]);
    let p = AdamParam { max_exp_avg_sq: None, exp_avg: &grad, ..p };
    assert_err(hp.step(&p, 0.1, GradScaling::default()), "fused_adamw", &["amsgrad needs max_exp_avg_sq"]);
    let ints = Tensor::from_slice(&[1i64, 2], &[2]).unwrap();
    let p = SgdParam { param: &ints, grad: &ints, momentum_buffer: None };
    let sgd = Sgd { weight_decay: 0.0, momentum: 0.0, dampening: 0.0, nesterov: false, maximize: false };
    assert_err(sgd.step(&p, 0.1, true, GradScaling::default()), "fused_sgd", &["int64[2]", "floating-point"]);
}
}
