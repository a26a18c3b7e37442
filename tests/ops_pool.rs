//! Max pooling with indices and average pooling against host references
//! written here after PyTorch's CPU kernels: windows scanned in row-major
//! order, padding never taken by a max, a later element replacing the max only
//! when strictly greater or NaN; averages divided by the window clipped to the
//! padded input, by its input elements, or by an override. 1-d, 2-d and 3-d,
//! padding, dilation, ceil mode (including a dropped last window), ties, NaN
//! and -inf, unbatched input, every float dtype and an integer one; the
//! backward of max pooling as the caller does it (a scatter_add at the
//! indices); the backward of average pooling against a host loop that
//! spreads each output's gradient over its window; all three modes.

mod common;

use common::builders::check_err;
use common::*;
use eagertpu::{DType, Tensor};

/// A pooling: kernel, stride, padding, dilation (one value per spatial dim).
#[derive(Clone, Copy, Debug)]
struct Pool {
    kernel: &'static [i64],
    stride: &'static [i64],
    padding: &'static [i64],
    dilation: &'static [i64],
}

/// PyTorch's `pooling_output_shape` for one dim.
fn out_size(size: i64, k: i64, s: i64, p: i64, d: i64, ceil_mode: bool) -> i64 {
    let num = size + 2 * p - d * (k - 1) - 1 + if ceil_mode { s - 1 } else { 0 };
    let mut o = num.div_euclid(s) + 1;
    if ceil_mode && (o - 1) * s >= size + p {
        o -= 1;
    }
    o
}

/// Leading (batch, channel) dims, input plane and output plane.
fn planes(shape: &[i64], pool: &Pool, ceil_mode: bool) -> (Vec<i64>, Vec<i64>, Vec<i64>) {
    let n = pool.kernel.len();
    let lead = shape[..shape.len() - n].to_vec();
    let plane = shape[shape.len() - n..].to_vec();
    let out = (0..n)
        .map(|i| {
            out_size(
                plane[i],
                pool.kernel[i],
                pool.stride[i],
                pool.padding[i],
                pool.dilation[i],
                ceil_mode,
            )
        })
        .collect();
    (lead, plane, out)
}

/// Max pooling by PyTorch's CPU algorithm: values and flat plane indices.
fn max_pool_ref(x: &Host, pool: &Pool, ceil_mode: bool) -> (Host, Host) {
    let (lead, plane, out) = planes(&x.shape, pool, ceil_mode);
    let (plane_n, out_n) = (numel(&plane), numel(&out));
    let mut values = vec![];
    let mut indices = vec![];
    for l in 0..numel(&lead) {
        let base = &x.data[l * plane_n..(l + 1) * plane_n];
        for o in 0..out_n {
            let oi = unravel(o, &out);
            let mut best: Option<(f64, usize)> = None;
            for k in 0..numel(pool.kernel) {
                let ki = unravel(k, pool.kernel);
                let pos: Vec<i64> = (0..plane.len())
                    .map(|d| oi[d] * pool.stride[d] - pool.padding[d] + ki[d] * pool.dilation[d])
                    .collect();
                if pos.iter().zip(&plane).any(|(p, s)| *p < 0 || p >= s) {
                    continue;
                }
                let i = ravel(&pos, &plane);
                let v = base[i];
                best = match best {
                    // The first element in the window starts as the index,
                    // with -inf as the value.
                    None if v > f64::NEG_INFINITY || v.is_nan() => Some((v, i)),
                    None => Some((f64::NEG_INFINITY, i)),
                    Some((m, _)) if v > m || v.is_nan() => Some((v, i)),
                    keep => keep,
                };
            }
            let (v, i) = best.expect("every window holds an input element");
            values.push(v);
            indices.push(i as f64);
        }
    }
    let mut shape = lead.clone();
    shape.extend(&out);
    (
        Host::new(x.dtype, &shape, values),
        Host::new(DType::I64, &shape, indices),
    )
}

/// Each output window of an average pooling: its input positions (inside
/// the input) as flat plane indices, and its divisor (PyTorch's CPU rule).
fn avg_windows(
    plane: &[i64],
    out: &[i64],
    pool: &Pool,
    include_pad: bool,
    divisor: Option<i64>,
) -> Vec<(Vec<usize>, i64)> {
    (0..numel(out))
        .map(|o| {
            let oi = unravel(o, out);
            let (mut padded, mut inside) = (1, 1);
            let (mut lo, mut hi) = (vec![], vec![]);
            for d in 0..plane.len() {
                let start = oi[d] * pool.stride[d] - pool.padding[d];
                let end = (start + pool.kernel[d]).min(plane[d] + pool.padding[d]);
                padded *= end - start;
                let (s, e) = (start.max(0), end.min(plane[d]));
                inside *= e - s;
                lo.push(s);
                hi.push(e);
            }
            let extent: Vec<i64> = lo.iter().zip(&hi).map(|(s, e)| e - s).collect();
            let positions = (0..numel(&extent))
                .map(|k| {
                    let pos: Vec<i64> = unravel(k, &extent)
                        .iter()
                        .zip(&lo)
                        .map(|(a, b)| a + b)
                        .collect();
                    ravel(&pos, plane)
                })
                .collect();
            let count = divisor.unwrap_or(if include_pad { padded } else { inside });
            (positions, count)
        })
        .collect()
}

/// The backward of average pooling on the host: each output's gradient,
/// divided by its window's divisor, added to every input element of the
/// window.
fn avg_pool_backward_ref(
    grad: &Host,
    input: &[i64],
    pool: &Pool,
    ceil_mode: bool,
    include_pad: bool,
    divisor: Option<i64>,
) -> Host {
    let (lead, plane, out) = planes(input, pool, ceil_mode);
    let (plane_n, out_n) = (numel(&plane), numel(&out));
    let windows = avg_windows(&plane, &out, pool, include_pad, divisor);
    let mut data = vec![0.0; numel(input)];
    for l in 0..numel(&lead) {
        for (o, (positions, count)) in windows.iter().enumerate() {
            let g = grad.data[l * out_n + o] / *count as f64;
            for &p in positions {
                data[l * plane_n + p] += g;
            }
        }
    }
    Host::new(grad.dtype, input, data)
}

/// Average pooling by PyTorch's CPU algorithm, in f64.
fn avg_pool_ref(
    x: &Host,
    pool: &Pool,
    ceil_mode: bool,
    include_pad: bool,
    divisor: Option<i64>,
) -> Host {
    let (lead, plane, out) = planes(&x.shape, pool, ceil_mode);
    let plane_n = numel(&plane);
    let windows = avg_windows(&plane, &out, pool, include_pad, divisor);
    let mut values = vec![];
    for l in 0..numel(&lead) {
        let base = &x.data[l * plane_n..(l + 1) * plane_n];
        for (positions, count) in &windows {
            let sum: f64 = positions.iter().map(|&p| base[p]).sum();
            values.push(sum / *count as f64);
        }
    }
    let mut shape = lead;
    shape.extend(&out);
    Host::new(x.dtype, &shape, values)
}

/// Small integers (many ties), with NaN and -inf sprinkled in for floats.
fn tie_data(dtype: DType, shape: &[i64], seed: u64) -> Host {
    let mut rng = Rng::new(seed);
    let data = (0..numel(shape))
        .map(|_| match rng.int(0, 19) {
            0 | 1 if dtype.is_float() => f64::NAN,
            2 if dtype.is_float() => f64::NEG_INFINITY,
            _ => rng.int(-2, 2) as f64,
        })
        .collect();
    Host::new(dtype, shape, data)
}

const MAX_CASES: [(&[i64], Pool); 7] = [
    (
        &[2, 3, 11],
        Pool {
            kernel: &[3],
            stride: &[2],
            padding: &[1],
            dilation: &[1],
        },
    ),
    (
        &[1, 2, 10],
        Pool {
            kernel: &[3],
            stride: &[1],
            padding: &[2],
            dilation: &[2],
        },
    ),
    (
        &[2, 2, 7, 8],
        Pool {
            kernel: &[3, 2],
            stride: &[2, 2],
            padding: &[1, 1],
            dilation: &[1, 1],
        },
    ),
    (
        &[1, 3, 6, 7],
        Pool {
            kernel: &[2, 3],
            stride: &[1, 2],
            padding: &[1, 1],
            dilation: &[2, 1],
        },
    ),
    // Unbatched [C, H, W] with odd sizes: ceil mode adds a partial window.
    (
        &[3, 5, 5],
        Pool {
            kernel: &[2, 2],
            stride: &[2, 2],
            padding: &[0, 0],
            dilation: &[1, 1],
        },
    ),
    (
        &[1, 2, 4, 5, 4],
        Pool {
            kernel: &[2, 2, 2],
            stride: &[2, 2, 2],
            padding: &[0, 1, 1],
            dilation: &[1, 1, 1],
        },
    ),
    // Ceil mode drops the window that would start in the right padding.
    (
        &[1, 1, 4],
        Pool {
            kernel: &[2],
            stride: &[3],
            padding: &[1],
            dilation: &[1],
        },
    ),
];

fn run_max(shape: &[i64], pool: &Pool, ceil_mode: bool, dtype: DType, seed: u64) {
    let what = format!("max_pool {shape:?} {pool:?} ceil {ceil_mode} {dtype}");
    let x = tie_data(dtype, shape, seed);
    let (want_v, want_i) = max_pool_ref(&x, pool, ceil_mode);
    let (v, i) = x
        .tensor()
        .max_pool(
            pool.kernel,
            pool.stride,
            pool.padding,
            pool.dilation,
            ceil_mode,
        )
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_close_tol(&format!("{what}: values"), &v, &want_v, (0.0, 0.0));
    assert_close_tol(&format!("{what}: indices"), &i, &want_i, (0.0, 0.0));
}

all_modes! {
    fn max_pool_values_and_indices_match_pytorchs_scan() {
        for (c, (shape, pool)) in MAX_CASES.iter().enumerate() {
            for ceil_mode in [false, true] {
                for dtype in [DType::F32, DType::F64] {
                    run_max(shape, pool, ceil_mode, dtype, c as u64);
                }
            }
        }
    }
}

all_modes! {
    fn max_pool_in_16_bit_floats_and_integers() {
        for c in [0, 2, 4] {
            let (shape, pool) = &MAX_CASES[c];
            for dtype in [DType::F16, DType::BF16, DType::I32] {
                run_max(shape, pool, true, dtype, 50 + c as u64);
            }
        }
    }
}

all_modes! {
    fn ties_take_the_first_index_and_nans_the_last() {
        // One window of six: ties at 1 and 3; NaNs at 2 and 4.
        let t = |v: &[f64]| Host::new(DType::F32, &[1, 1, 6], v.to_vec()).tensor();
        let one = |x: &Tensor| x.max_pool(&[6], &[], &[], &[], false).unwrap();
        let (v, i) = one(&t(&[0.0, 5.0, 1.0, 5.0, 2.0, -1.0]));
        assert_eq!((Host::of(&v).data, Host::of(&i).data), (vec![5.0], vec![1.0]));
        let (v, i) = one(&t(&[0.0, 5.0, f64::NAN, 5.0, f64::NAN, 9.0]));
        assert!(Host::of(&v).data[0].is_nan());
        assert_eq!(Host::of(&i).data, vec![4.0]);
        let (v, i) = one(&t(&[f64::NEG_INFINITY; 6]));
        assert_eq!((Host::of(&v).data, Host::of(&i).data), (vec![f64::NEG_INFINITY], vec![0.0]));
    }
}

all_modes! {
    fn the_max_pool_backward_is_a_scatter_add_at_the_indices() {
        let (shape, pool) = &MAX_CASES[2];
        let x = tie_data(DType::F32, shape, 77);
        let (_, want_i) = max_pool_ref(&x, pool, true);
        let out = &want_i.shape;
        let grad = Host::random(DType::F32, out, 78);
        let mut want = vec![0.0; x.numel()];
        let (plane_n, out_n) = (numel(&shape[2..]), numel(&out[2..]));
        for (o, g) in grad.data.iter().enumerate() {
            let l = o / out_n;
            want[l * plane_n + want_i.data[o] as usize] += g;
        }
        let (_, i) = x
            .tensor()
            .max_pool(pool.kernel, pool.stride, pool.padding, pool.dilation, true)
            .unwrap();
        let (n, c) = (shape[0], shape[1]);
        let flat = |t: &Tensor, len: usize| t.reshape(&[n, c, len as i64]).unwrap();
        let zeros = Tensor::zeros(&[n, c, plane_n as i64], DType::F32).unwrap();
        let dx = zeros
            .scatter_add(2, &flat(&i, out_n), &flat(&grad.tensor(), out_n))
            .unwrap()
            .reshape(shape)
            .unwrap();
        assert_close("max_pool backward", &dx, &Host::new(DType::F32, shape, want));
    }
}

const AVG_CASES: [(&[i64], Pool); 4] = [
    (
        &[2, 3, 11],
        Pool {
            kernel: &[3],
            stride: &[2],
            padding: &[1],
            dilation: &[1],
        },
    ),
    (
        &[2, 2, 7, 8],
        Pool {
            kernel: &[3, 2],
            stride: &[2, 2],
            padding: &[1, 1],
            dilation: &[1, 1],
        },
    ),
    (
        &[3, 5, 5],
        Pool {
            kernel: &[3, 3],
            stride: &[2, 2],
            padding: &[1, 1],
            dilation: &[1, 1],
        },
    ),
    (
        &[1, 2, 5, 4, 5],
        Pool {
            kernel: &[2, 3, 2],
            stride: &[2, 2, 1],
            padding: &[1, 1, 0],
            dilation: &[1, 1, 1],
        },
    ),
];

fn run_avg(c: usize, ceil_mode: bool, include_pad: bool, divisor: Option<i64>, dtype: DType) {
    let (shape, pool) = &AVG_CASES[c];
    let what = format!(
        "avg_pool {shape:?} {pool:?} ceil {ceil_mode} include_pad {include_pad} divisor {divisor:?}"
    );
    let x = Host::random(dtype, shape, c as u64);
    let want = avg_pool_ref(&x, pool, ceil_mode, include_pad, divisor);
    let got = x
        .tensor()
        .avg_pool(
            pool.kernel,
            pool.stride,
            pool.padding,
            ceil_mode,
            include_pad,
            divisor,
        )
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_close(&what, &got, &want);
}

all_modes! {
    fn avg_pool_divides_by_pytorchs_counts() {
        for c in 0..AVG_CASES.len() {
            for ceil_mode in [false, true] {
                for include_pad in [false, true] {
                    for dtype in [DType::F32, DType::F64] {
                        run_avg(c, ceil_mode, include_pad, None, dtype);
                    }
                }
            }
            run_avg(c, true, true, Some(5), DType::F32);
            run_avg(c, false, false, Some(-2), DType::F64);
        }
    }
}

all_modes! {
    fn avg_pool_in_16_bit_floats_accumulates_in_f32() {
        for dtype in [DType::F16, DType::BF16] {
            run_avg(1, true, false, None, dtype);
            run_avg(2, true, true, None, dtype);
        }
    }
}

all_modes! {
    fn bad_pooling_is_an_error_naming_the_op_and_shapes() {
        let x = Tensor::zeros(&[1, 2, 6, 6], DType::F32).unwrap();
        check_err(
            x.max_pool(&[3], &[], &[2], &[], false),
            &["max_pool1d", "padding 2", "kernel of 3", "at most half"],
        );
        check_err(
            x.max_pool(&[7, 7], &[], &[], &[], false),
            &["max_pool2d", "float32[1, 2, 6, 6]", "output of size 0", "at least 1"],
        );
        check_err(
            x.avg_pool(&[2, 2, 2, 2], &[], &[], false, true, None),
            &["avg_pool", "4 spatial dims", "1, 2 or 3"],
        );
        check_err(
            x.avg_pool(&[2, 2], &[1, 1, 1], &[], false, true, None),
            &["avg_pool2d", "stride [1, 1, 1]", "2 values in each"],
        );
        let b = Tensor::zeros(&[1, 2, 6], DType::Bool).unwrap();
        check_err(b.max_pool(&[2], &[], &[], &[], false), &["max_pool1d", "bool"]);
        let i = Tensor::zeros(&[1, 2, 6], DType::I64).unwrap();
        check_err(
            i.avg_pool(&[2], &[], &[], false, true, None),
            &["avg_pool1d", "int64", "floating-point"],
        );
        check_err(
            x.avg_pool(&[2], &[], &[], false, true, Some(0)),
            &["avg_pool1d", "divisor_override 0"],
        );
        // The runtime is still usable.
        let (v, _) = x.max_pool(&[2, 2], &[], &[], &[], false).unwrap();
        assert_eq!(v.shape(), &[1, 2, 3, 3]);
    }
}

fn run_avg_backward(
    c: usize,
    ceil_mode: bool,
    include_pad: bool,
    divisor: Option<i64>,
    dtype: DType,
) {
    let (shape, pool) = &AVG_CASES[c];
    let what = format!(
        "avg_pool_backward {shape:?} {pool:?} ceil {ceil_mode} include_pad {include_pad} divisor {divisor:?} {dtype}"
    );
    let (lead, _, out) = planes(shape, pool, ceil_mode);
    let out_shape: Vec<i64> = lead.iter().chain(&out).copied().collect();
    let grad = Host::random(dtype, &out_shape, 300 + c as u64);
    let want = avg_pool_backward_ref(&grad, shape, pool, ceil_mode, include_pad, divisor);
    let got = grad
        .tensor()
        .avg_pool_backward(
            shape,
            pool.kernel,
            pool.stride,
            pool.padding,
            ceil_mode,
            include_pad,
            divisor,
        )
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_close(&what, &got, &want);
}

all_modes! {
    fn avg_pool_backward_spreads_each_gradient_over_its_window() {
        for c in 0..AVG_CASES.len() {
            for ceil_mode in [false, true] {
                for include_pad in [false, true] {
                    run_avg_backward(c, ceil_mode, include_pad, None, DType::F32);
                }
            }
            run_avg_backward(c, true, false, Some(5), DType::F64);
            run_avg_backward(c, false, true, Some(-2), DType::F32);
        }
        run_avg_backward(1, true, false, None, DType::BF16);
    }
}

all_modes! {
    fn avg_pool_backward_with_overhanging_ceil_mode_windows() {
        // 7 by windows of 3, stride 2, no padding, ceil mode: the last window
        // starts at 6 and overhangs by 2; 8 with padding 1: one more.
        let pool = Pool {
            kernel: &[3],
            stride: &[2],
            padding: &[0],
            dilation: &[1],
        };
        for (size, padding) in [(7, 0), (8, 1), (6, 1)] {
            let pool = Pool {
                padding: if padding == 0 { &[0] } else { &[1] },
                ..pool
            };
            let shape = [2, 3, size];
            for (include_pad, divisor) in [(true, None), (false, None), (false, Some(4))] {
                let (_, _, out) = planes(&shape, &pool, true);
                let grad = Host::random(DType::F64, &[2, 3, out[0]], size as u64);
                let want = avg_pool_backward_ref(&grad, &shape, &pool, true, include_pad, divisor);
                let got = grad.tensor().avg_pool_backward(
                    &shape,
                    pool.kernel,
                    pool.stride,
                    pool.padding,
                    true,
                    include_pad,
                    divisor,
                );
                let what = format!("avg_pool_backward [2, 3, {size}] padding {padding} include_pad {include_pad} divisor {divisor:?}");
                common::builders::check(&what, got, &want);
            }
        }
    }
}

all_modes! {
    fn bad_avg_pool_backward_is_an_error_naming_the_shapes() {
        let grad = Tensor::zeros(&[1, 2, 3, 3], DType::F32).unwrap();
        check_err(
            grad.avg_pool_backward(&[1, 2, 8, 8], &[2, 2], &[], &[], false, true, None),
            &["avg_pool_backward", "float32[1, 2, 3, 3]", "[1, 2, 8, 8]", "[1, 2, 4, 4]"],
        );
        check_err(
            grad.avg_pool_backward(&[6, 6], &[2, 2], &[], &[], false, true, None),
            &["avg_pool_backward", "[6, 6]", "4 or 3 input dims"],
        );
        let ints = Tensor::zeros(&[1, 2, 3, 3], DType::I32).unwrap();
        check_err(
            ints.avg_pool_backward(&[1, 2, 6, 6], &[2, 2], &[], &[], false, true, None),
            &["avg_pool_backward", "int32"],
        );
        // The runtime is still usable.
        let dx = grad
            .avg_pool_backward(&[1, 2, 6, 6], &[2, 2], &[], &[], false, true, None)
            .unwrap();
        assert_eq!(dx.shape(), &[1, 2, 6, 6]);
    }
}
