//! Reflection and replication padding and nearest, nearest-exact and linear
//! upsampling against a host reference in every mode. The host resamples
//! dim by dim through taps (the source positions and weights each output
//! position reads, from the definitions in PyTorch's docs); the gradients
//! are checked as adjoints: <op(x), g> == <x, op_backward(g)>.

mod common;

use common::*;
use eagertpu::{DType, Interpolation, PadMode, Tensor};

/// What output position `j` of a resampled dim reads: (source, weight) pairs.
type Taps = Vec<Vec<(i64, f64)>>;

fn pad_taps(size: i64, before: i64, after: i64, mode: PadMode) -> Taps {
    let last = size - 1;
    (-before..size + after)
        .map(|i| {
            let source = match mode {
                PadMode::Replicate => i.clamp(0, last),
                PadMode::Reflect if i < 0 => -i,
                PadMode::Reflect if i > last => 2 * last - i,
                PadMode::Reflect => i,
            };
            vec![(source, 1.0)]
        })
        .collect()
}

fn upsample_taps(input: i64, output: i64, mode: Interpolation) -> Taps {
    let ratio = input as f64 / output as f64;
    (0..output)
        .map(|j| {
            let j = j as f64;
            match mode {
                Interpolation::Nearest => vec![(((j * ratio).floor() as i64).min(input - 1), 1.0)],
                Interpolation::NearestExact => {
                    vec![((((j + 0.5) * ratio).floor() as i64).min(input - 1), 1.0)]
                }
                Interpolation::Linear { align_corners } => {
                    let source = if align_corners {
                        if output > 1 {
                            j * (input - 1) as f64 / (output - 1) as f64
                        } else {
                            0.0
                        }
                    } else {
                        ((j + 0.5) * ratio - 0.5).max(0.0)
                    };
                    let low = (source.floor() as i64).min(input - 1);
                    let high = low + (low < input - 1) as i64;
                    let w = (source - low as f64).clamp(0.0, 1.0);
                    vec![(low, 1.0 - w), (high, w)]
                }
            }
        })
        .collect()
}

/// `x` resampled along dim `d` through `taps`.
fn host_resample(x: &Host, d: usize, taps: &Taps) -> Host {
    let mut shape = x.shape.clone();
    shape[d] = taps.len() as i64;
    let data = (0..numel(&shape))
        .map(|flat| {
            let mut idx = unravel(flat, &shape);
            let j = idx[d] as usize;
            taps[j]
                .iter()
                .map(|&(source, w)| {
                    idx[d] = source;
                    w * x.at(&idx)
                })
                .sum()
        })
        .collect();
    Host::new(x.dtype, &shape, data)
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Asserts `forward`'s adjoint is `backward`: <forward(x), g> equals
/// <x, backward(g)> for random x and g (f64).
fn assert_adjoint(
    what: &str,
    input_shape: &[i64],
    forward: impl Fn(&Tensor) -> eagertpu::Result<Tensor>,
    backward: impl Fn(&Tensor) -> eagertpu::Result<Tensor>,
) {
    let x = Host::random(DType::F64, input_shape, 1100);
    let y = forward(&x.tensor()).unwrap_or_else(|e| panic!("{what}: {e}"));
    let g = Host::random(DType::F64, y.shape(), 1101);
    let gx = backward(&g.tensor()).unwrap_or_else(|e| panic!("{what} backward: {e}"));
    assert_eq!(gx.shape(), input_shape, "{what}: the gradient's shape");
    let (lhs, rhs) = (
        dot(&Host::of(&y).data, &g.data),
        dot(&x.data, &Host::of(&gx).data),
    );
    assert!(
        (lhs - rhs).abs() <= 1e-9 * lhs.abs().max(1.0),
        "{what}: <op(x), g> = {lhs} but <x, op'(g)> = {rhs}"
    );
}

const PADDINGS: [&[i64]; 5] = [
    &[1, 2],
    &[0, 3, 2, 0],
    &[-1, 2, 1, 1],
    &[2, 2, 1, 0, 0, 1],
    &[2, 2],
];

all_modes! {
fn edge_padding_matches_the_host_and_its_adjoint() {
    for mode in [PadMode::Reflect, PadMode::Replicate] {
        for padding in PADDINGS {
            let k = padding.len() / 2;
            let shape: Vec<i64> = [2, 3, 4, 5][..k + 1].to_vec();
            for dtype in [DType::F32, DType::I64] {
                let x = Host::random(dtype, &shape, 1110);
                let mut want = x.clone();
                for (i, pair) in padding.chunks(2).enumerate() {
                    let d = shape.len() - 1 - i;
                    want = host_resample(&want, d, &pad_taps(shape[d], pair[0], pair[1], mode));
                }
                let what = format!("pad_edges({dtype}{shape:?}, {padding:?}, {mode:?})");
                let got = x.tensor().pad_edges(padding, mode).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_close(&what, &got, &want);
            }
            assert_adjoint(
                &format!("pad_edges({shape:?}, {padding:?}, {mode:?})"),
                &shape,
                |x| x.pad_edges(padding, mode),
                |g| g.pad_edges_backward(&shape, padding, mode),
            );
        }
    }
}
}

/// (input shape, output size) of 1-3 spatial dims.
fn upsample_cases() -> Vec<(Vec<i64>, Vec<i64>)> {
    vec![
        (vec![2, 3, 6], vec![9]),
        (vec![2, 3, 6], vec![1]),
        (vec![2, 3, 4, 5], vec![7, 3]),
        (vec![1, 2, 4, 5], vec![8, 10]),
        (vec![1, 2, 3, 4, 5], vec![2, 5, 1]),
    ]
}

fn interpolations() -> [Interpolation; 4] {
    [
        Interpolation::Nearest,
        Interpolation::NearestExact,
        Interpolation::Linear {
            align_corners: false,
        },
        Interpolation::Linear {
            align_corners: true,
        },
    ]
}

all_modes! {
fn upsampling_matches_the_host_and_its_adjoint() {
    for (shape, size) in upsample_cases() {
        let scales = vec![None; size.len()];
        for mode in interpolations() {
            for dtype in [DType::F32, DType::F64] {
                let x = Host::random(dtype, &shape, 1120);
                let mut want = Host::new(DType::F64, &shape, x.data.clone());
                for (i, &out) in size.iter().enumerate().rev() {
                    want = host_resample(&want, i + 2, &upsample_taps(shape[i + 2], out, mode));
                }
                let want = Host::new(dtype, &want.shape, want.data);
                let what = format!("upsample({dtype}{shape:?} to {size:?}, {mode:?})");
                let got = x.tensor().upsample(&size, &scales, mode).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_close_tol(&what, &got, &want, (1e-5, 1e-6));
            }
            assert_adjoint(
                &format!("upsample({shape:?} to {size:?}, {mode:?})"),
                &shape,
                |x| x.upsample(&size, &scales, mode),
                |g| g.upsample_backward(&shape, &size, &scales, mode),
            );
        }
    }
}
}

all_modes! {
fn a_scale_factor_sets_the_source_positions() {
    // A scale factor of 1.7 on a dim of 5 gives 8 outputs read at
    // floor(j / 1.7), not floor(j * 5 / 8): at j = 5, 2 rather than 3.
    let x = Host::random(DType::F64, &[1, 1, 5], 1130);
    let got = x.tensor().upsample(&[8], &[Some(1.7)], Interpolation::Nearest).unwrap();
    let taps: Taps = (0..8).map(|j| vec![(((j as f64 / 1.7).floor() as i64).min(4), 1.0)]).collect();
    assert_close("nearest with scale 1.7", &got, &host_resample(&x, 2, &taps));
    let by_size = x.tensor().upsample(&[8], &[None], Interpolation::Nearest).unwrap();
    assert_close("nearest by size", &by_size, &host_resample(&x, 2, &upsample_taps(5, 8, Interpolation::Nearest)));
}
}

all_modes! {
fn resampling_rejects_bad_arguments_with_pytorch_messages() {
    let x = Host::random(DType::F32, &[1, 1, 2, 2], 1140).tensor();
    assert_err(
        x.pad_edges(&[3, 3, 3, 3], PadMode::Reflect),
        "reflection_pad2d",
        &["Padding size should be less than the corresponding input dimension", "padding (3, 3) at dimension 3", "[1, 1, 2, 2]"],
    );
    assert_err(x.pad_edges(&[-3, 0, 0, 0], PadMode::Replicate), "replication_pad2d", &["[1, 1, 2, -1]", ">= 1"]);
    let empty = Tensor::zeros(&[1, 1, 0, 2], DType::F32).unwrap();
    assert_err(empty.pad_edges(&[1, 1, 1, 1], PadMode::Reflect), "reflection_pad2d", &["Expected 3D or 4D", "[1, 1, 0, 2]"]);
    assert_err(x.pad_edges(&[1, 1, 1], PadMode::Reflect), "reflection_pad1d", &["3 values"]);
    let none = [None, None];
    assert_err(x.upsample(&[3], &[None], Interpolation::Nearest), "upsample_nearest1d", &["3-D input", "[1, 1, 2, 2]"]);
    assert_err(x.upsample(&[0, 3], &none, Interpolation::Nearest), "upsample_nearest2d", &["greater than 0", "[0, 3]"]);
    let ints = Tensor::zeros(&[1, 1, 2, 2], DType::I32).unwrap();
    let linear = Interpolation::Linear { align_corners: false };
    assert_err(ints.upsample(&[3, 3], &none, linear), "upsample_bilinear2d", &["int32", "floating-point"]);
    let g = Host::random(DType::F32, &[1, 1, 3, 3], 1141).tensor();
    assert_err(g.upsample_backward(&[1, 1, 2, 2], &[4, 4], &none, linear), "upsample_bilinear2d_backward", &["float32[1, 1, 3, 3]", "[1, 1, 4, 4]"]);
}
}
