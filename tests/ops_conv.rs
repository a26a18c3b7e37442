//! Convolutions and their two gradients against host references computed here
//! by definition: every (input, weight, output) triple a convolution connects
//! is enumerated with plain loops; the forward sums `x * w` into the output,
//! the input gradient sums `grad_out * w` into the input, the weight gradient
//! sums `grad_out * x` into the weight. 1-d, 2-d and 3-d; strides that skip
//! input rows, padding, dilation, groups, depthwise, unbatched; every float
//! dtype; all three modes.

mod common;

use common::builders::check_err;
use common::*;
use eagertpu::{DType, Tensor};

/// One convolution: shapes and attributes (one value per spatial dim).
#[derive(Clone, Debug)]
struct Case {
    x: &'static [i64],
    w: &'static [i64],
    stride: &'static [i64],
    padding: &'static [i64],
    dilation: &'static [i64],
    groups: i64,
}

const CASES: [Case; 9] = [
    // 1-d, plain.
    Case {
        x: &[2, 3, 10],
        w: &[4, 3, 3],
        stride: &[1],
        padding: &[0],
        dilation: &[1],
        groups: 1,
    },
    // 1-d, stride 3 with dilation 2 and padding 2: the last input element is
    // never reached.
    Case {
        x: &[2, 2, 13],
        w: &[3, 2, 4],
        stride: &[3],
        padding: &[2],
        dilation: &[2],
        groups: 1,
    },
    // 2-d, stride 2, padding, dilation and groups 2; W = 7 does not divide.
    Case {
        x: &[2, 4, 7, 7],
        w: &[6, 2, 3, 2],
        stride: &[2, 2],
        padding: &[1, 1],
        dilation: &[2, 1],
        groups: 2,
    },
    // Depthwise (groups = channels, two outputs per channel).
    Case {
        x: &[2, 3, 6, 5],
        w: &[6, 1, 3, 3],
        stride: &[1, 1],
        padding: &[1, 1],
        dilation: &[1, 1],
        groups: 3,
    },
    // A 1x1 kernel with padding 1 and stride 2 (padding larger than the kernel).
    Case {
        x: &[1, 2, 4, 4],
        w: &[3, 2, 1, 1],
        stride: &[2, 2],
        padding: &[1, 1],
        dilation: &[1, 1],
        groups: 1,
    },
    // 3-d, mixed strides and padding.
    Case {
        x: &[1, 2, 5, 4, 4],
        w: &[2, 2, 2, 3, 2],
        stride: &[2, 1, 2],
        padding: &[0, 1, 1],
        dilation: &[1, 1, 1],
        groups: 1,
    },
    // 1-d, groups 2 with stride 2 and dilation 2.
    Case {
        x: &[3, 4, 11],
        w: &[6, 2, 3],
        stride: &[2],
        padding: &[1],
        dilation: &[2],
        groups: 2,
    },
    // Unbatched 2-d input [C, H, W].
    Case {
        x: &[3, 5, 5],
        w: &[2, 3, 2, 2],
        stride: &[1, 2],
        padding: &[0, 1],
        dilation: &[1, 1],
        groups: 1,
    },
    // An empty batch.
    Case {
        x: &[0, 2, 5],
        w: &[3, 2, 3],
        stride: &[1],
        padding: &[1],
        dilation: &[1],
        groups: 1,
    },
];

/// The output shape, by PyTorch's formula (batched shapes).
fn out_shape(x: &[i64], w: &[i64], c: &Case) -> Vec<i64> {
    let mut out = vec![x[0], w[0]];
    for i in 0..x.len() - 2 {
        let reach = c.dilation[i] * (w[2 + i] - 1) + 1;
        out.push((x[2 + i] + 2 * c.padding[i] - reach) / c.stride[i] + 1);
    }
    out
}

/// Calls `f(x_flat, w_flat, out_flat)` for every input element, weight
/// element and output element a convolution of batched shapes `x` and `w`
/// multiplies together.
fn for_each_tap(x: &[i64], w: &[i64], c: &Case, mut f: impl FnMut(usize, usize, usize)) {
    let out = out_shape(x, w, c);
    let n = x.len() - 2;
    let per_group_out = w[0] / c.groups;
    let kernel = &w[2..];
    for o_flat in 0..numel(&out) {
        let oi = unravel(o_flat, &out);
        let (batch, oc) = (oi[0], oi[1]);
        let group = oc / per_group_out;
        for cl in 0..w[1] {
            let ic = group * w[1] + cl;
            for k_flat in 0..numel(kernel) {
                let k = unravel(k_flat, kernel);
                let mut xi = vec![batch, ic];
                let mut inside = true;
                for d in 0..n {
                    let pos = oi[2 + d] * c.stride[d] - c.padding[d] + k[d] * c.dilation[d];
                    inside &= (0..x[2 + d]).contains(&pos);
                    xi.push(pos);
                }
                if inside {
                    let mut wi = vec![oc, cl];
                    wi.extend(&k);
                    f(ravel(&xi, x), ravel(&wi, w), o_flat);
                }
            }
        }
    }
}

/// A reference result: values and the sum of the magnitudes of the terms
/// behind each (the scale rounding errors are relative to).
struct Reference {
    shape: Vec<i64>,
    values: Vec<f64>,
    magnitude: Vec<f64>,
}

impl Reference {
    fn new(shape: &[i64]) -> Reference {
        let n = numel(shape);
        Reference {
            shape: shape.to_vec(),
            values: vec![0.0; n],
            magnitude: vec![0.0; n],
        }
    }

    fn add(&mut self, i: usize, a: f64, b: f64) {
        self.values[i] += a * b;
        self.magnitude[i] += (a * b).abs();
    }
}

/// Relative error allowed against the terms' magnitude: accumulation in f64
/// or f32, and for 16-bit floats the final rounding to the dtype.
fn rtol(dtype: DType) -> f64 {
    match dtype {
        DType::F64 => 1e-12,
        DType::F32 => 1e-5,
        DType::F16 => 2e-3,
        _ => 1e-2,
    }
}

#[track_caller]
fn check(what: &str, got: &Tensor, want: &Reference, dtype: DType) {
    assert_eq!(got.dtype(), dtype, "{what}: dtype");
    assert_eq!(got.shape(), want.shape.as_slice(), "{what}: shape");
    let g = Host::of(got).data;
    let bad: Vec<(usize, f64, f64)> = (0..g.len())
        .filter(|&i| {
            let error = (g[i] - want.values[i]).abs();
            error.is_nan() || error > rtol(dtype) * want.magnitude[i] + 1e-12
        })
        .map(|i| (i, g[i], want.values[i]))
        .collect();
    assert!(
        bad.is_empty(),
        "{what} ({dtype}): {} of {} differ, first (index, got, want): {:?}",
        bad.len(),
        g.len(),
        &bad[..bad.len().min(5)]
    );
}

/// `shape` with a batch dim of 1 in front when `c` is unbatched.
fn batched(shape: &[i64], c: &Case) -> Vec<i64> {
    if c.x.len() < c.w.len() {
        std::iter::once(1).chain(shape.iter().copied()).collect()
    } else {
        shape.to_vec()
    }
}

/// Runs the forward convolution and both gradients of `c` in `dtype` and
/// compares them with the references.
fn run_case(c: &Case, dtype: DType, seed: u64) {
    let what = format!("{c:?}");
    let x = Host::random(dtype, c.x, seed);
    let w = Host::random(dtype, c.w, seed + 1);
    let (xb, wb) = (batched(c.x, c), c.w.to_vec());
    let ob = out_shape(&xb, &wb, c);
    let out_user: Vec<i64> = if xb.len() == c.x.len() {
        ob.clone()
    } else {
        ob[1..].to_vec()
    };
    let grad = Host::random(dtype, &out_user, seed + 2);

    let mut fwd = Reference::new(&ob);
    let mut dx = Reference::new(&xb);
    let mut dw = Reference::new(&wb);
    for_each_tap(&xb, &wb, c, |xi, wi, oi| {
        fwd.add(oi, x.data[xi], w.data[wi]);
        dx.add(xi, grad.data[oi], w.data[wi]);
        dw.add(wi, grad.data[oi], x.data[xi]);
    });
    // Unbatched results drop the batch dim.
    fwd.shape = out_user.clone();
    dx.shape = c.x.to_vec();

    let (xt, wt, gt) = (x.tensor(), w.tensor(), grad.tensor());
    let y = xt
        .conv(&wt, c.stride, c.padding, c.dilation, c.groups)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let gx = gt
        .conv_backward_input(&wt, c.x, c.stride, c.padding, c.dilation, c.groups)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let gw = gt
        .conv_backward_weight(&xt, c.w, c.stride, c.padding, c.dilation, c.groups)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    check(&format!("conv {what}"), &y, &fwd, dtype);
    check(&format!("grad_input {what}"), &gx, &dx, dtype);
    check(&format!("grad_weight {what}"), &gw, &dw, dtype);
}

all_modes! {
    fn conv_and_its_gradients_match_the_definition_in_f32_and_f64() {
        for (i, c) in CASES.iter().enumerate() {
            for dtype in [DType::F32, DType::F64] {
                run_case(c, dtype, 10 * i as u64);
            }
        }
    }
}

all_modes! {
    fn conv_and_its_gradients_in_16_bit_floats_compute_in_f32() {
        for i in [2, 3, 6] {
            for dtype in [DType::F16, DType::BF16] {
                run_case(&CASES[i], dtype, 100 + i as u64);
            }
        }
    }
}

all_modes! {
    fn a_single_value_applies_to_every_spatial_dim() {
        let x = Host::random(DType::F32, &[1, 2, 6, 6], 7);
        let w = Host::random(DType::F32, &[2, 2, 3, 3], 8);
        let (xt, wt) = (x.tensor(), w.tensor());
        let one = xt.conv(&wt, &[2], &[1], &[1], 1).unwrap();
        let each = xt.conv(&wt, &[2, 2], &[1, 1], &[1, 1], 1).unwrap();
        assert_eq!(one.shape(), &[1, 2, 3, 3]);
        assert_eq!(Host::of(&one), Host::of(&each));
    }
}

all_modes! {
    fn bad_convolutions_are_errors_naming_the_op_and_shapes() {
        let x = Tensor::zeros(&[1, 3, 5, 5], DType::F32).unwrap();
        let w = Tensor::zeros(&[4, 1, 3, 3], DType::F32).unwrap();
        check_err(
            x.conv(&w, &[1], &[0], &[1], 2),
            &["conv2d", "[1, 3, 5, 5]", "[4, 1, 3, 3]", "divisible by groups 2"],
        );
        let w7 = Tensor::zeros(&[4, 3, 7, 7], DType::F32).unwrap();
        check_err(
            x.conv(&w7, &[1], &[0], &[1], 1),
            &["conv2d", "[4, 3, 7, 7]", "no larger than the padded input"],
        );
        check_err(
            x.conv(&w7, &[1, 1, 1], &[0], &[1], 1),
            &["stride [1, 1, 1]", "[4, 3, 7, 7]", "2 values in each"],
        );
        let wd = Tensor::zeros(&[4, 3, 3, 3], DType::F64).unwrap();
        check_err(x.conv(&wd, &[1], &[0], &[1], 1), &["conv2d", "float32", "float64"]);
        // Gradients check grad_out against the forward convolution's output.
        let w = Tensor::zeros(&[4, 3, 3, 3], DType::F32).unwrap();
        let g = Tensor::zeros(&[1, 4, 3, 4], DType::F32).unwrap();
        check_err(
            g.conv_backward_input(&w, &[1, 3, 5, 5], &[1], &[0], &[1], 1),
            &["conv_backward_input", "grad_out float32[1, 4, 3, 4]", "[1, 4, 3, 3]"],
        );
        check_err(
            g.conv_backward_weight(&x, &[4, 3, 3, 3], &[1], &[0], &[1], 1),
            &["conv_backward_weight", "grad_out float32[1, 4, 3, 4]", "[1, 4, 3, 3]"],
        );
        // The runtime is still usable.
        let y = x.conv(&w, &[1], &[0], &[1], 1).unwrap();
        assert_eq!(Host::of(&y).data, vec![0.0; 36]);
    }
}
