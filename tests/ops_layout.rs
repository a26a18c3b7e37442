//! Creation and layout ops against host references computed with plain loops:
//! every op, every dtype it supports, several shapes, edge cases.

mod common;

use common::builders::*;
use common::*;
use eagertpu::{DType, Device, Element, Result, Tensor, default_device};

fn round_trip<T: Element + PartialEq>(data: &[T]) {
    let dev = default_device().unwrap();
    let f: Vec<f64> = data.iter().map(|x| x.to_f64()).collect();
    for shape in [vec![12], vec![3, 4], vec![2, 3, 2]] {
        for t in [Tensor::from_slice(data, &shape), dev.tensor(data, &shape)] {
            let t = t.unwrap();
            assert_eq!((t.dtype(), t.shape()), (T::DTYPE, shape.as_slice()));
            assert_eq!(t.to_vec::<T>().unwrap(), data, "{}", T::DTYPE);
            assert_eq!(t.to_f64_vec().unwrap(), f, "{}", T::DTYPE);
        }
    }
    let s = Tensor::scalar(data[5]).unwrap();
    assert_eq!((s.shape(), s.item::<T>().unwrap()), (&[][..], data[5]));
    let v = Tensor::from_vec(data.to_vec()).unwrap();
    assert_eq!(v.to_vec::<T>().unwrap(), data);
    let empty = Tensor::from_slice::<T>(&[], &[0, 3]).unwrap();
    assert_eq!(empty.shape(), &[0, 3]);
    assert_eq!(empty.to_vec::<T>().unwrap(), vec![]);
    let bad = Tensor::from_slice(data, &[5]);
    check_err(bad, &["tensor", "12 elements", "[5]"]);
}

fn conv<T>(v: &[f64], f: impl Fn(f64) -> T) -> Vec<T> {
    v.iter().map(|&x| f(x)).collect()
}

all_modes! {
fn from_slice_round_trips_every_dtype() {
    use half::{bf16, f16};
    let ints = |lo, hi| {
        let v = (0..10).map(|i| (i * 7 - 30) as f64);
        v.chain([lo, hi]).collect::<Vec<_>>()
    };
    let fl = |big, tiny| {
        let v = [0.0, -1.5, 2.25, 1e-3, -7.0, 100.0, 0.1, 3.0];
        let v = v.into_iter().chain([f64::INFINITY, -0.5]);
        v.chain([big, tiny]).collect::<Vec<_>>()
    };
    round_trip(&conv(&fl(3.4e38, 1.2e-38), |x| x as f32));
    round_trip(&fl(f64::MAX, f64::MIN_POSITIVE));
    round_trip(&conv(&fl(65504.0, 6e-8), f16::from_f64));
    round_trip(&conv(&fl(3e38, 1e-38), bf16::from_f64));
    round_trip(&conv(&ints(-128.0, 127.0), |x| x as i8));
    round_trip(&conv(&ints(-32768.0, 32767.0), |x| x as i16));
    round_trip(&conv(&ints(-2147483648.0, 2147483647.0), |x| x as i32));
    let mut i64s = conv(&ints(0.0, 0.0), |x| x as i64);
    i64s[10..].copy_from_slice(&[i64::MIN, i64::MAX]);
    round_trip(&i64s);
    round_trip(&conv(&ints(-30.0, 225.0), |x| (x + 30.0) as u8));
    round_trip(&(0..12).map(|i| i % 3 == 1).collect::<Vec<_>>());
}
}

all_modes! {
fn full_zeros_ones_and_likes_for_every_dtype() {
    for dtype in ALL {
        let v = fill(dtype);
        for shape in [&[][..], &[3], &[2, 0, 3], &[2, 3, 4]] {
            let want = |x: f64| Host::new(dtype, shape, vec![x; numel(shape)]);
            let full = match dtype {
                d if d.is_float() => Tensor::full(shape, v, dtype),
                DType::Bool => Tensor::full(shape, true, dtype),
                _ => Tensor::full(shape, v as i64, dtype),
            };
            check("full", full, &want(v));
            check("zeros", Tensor::zeros(shape, dtype), &want(0.0));
            check("ones", Tensor::ones(shape, dtype), &want(1.0));
            let x = distinct(dtype, shape).tensor();
            check("full_like", x.full_like(v), &want(v));
            check("zeros_like", x.zeros_like(), &want(0.0));
            check("ones_like", x.ones_like(), &want(1.0));
        }
    }
    // A float fill truncates into an int dtype and rounds into a narrow float.
    let got = Tensor::full(&[2], 2.7, DType::I32);
    check("full int 2.7", got, &vec1(DType::I32, &[2.0, 2.0]));
    let got = Tensor::full(&[3], 1.0 / 3.0, DType::BF16).unwrap();
    let third = Host::new(DType::BF16, &[3], vec![1.0 / 3.0; 3]);
    assert_close_tol("full bf16 1/3", &got, &third, (0.0, 0.0));
    check_err(Tensor::full(&[2, -3], 1, DType::F32), &["full"]);
}
}

/// `start, start + step, ...` before `end`, by stepping.
fn arange_ref(start: f64, end: f64, step: f64) -> Vec<f64> {
    let mut out = vec![];
    loop {
        let x = start + out.len() as f64 * step;
        if (step > 0.0 && x >= end) || (step < 0.0 && x <= end) {
            return out;
        }
        out.push(x);
    }
}

all_modes! {
fn arange_follows_torch_dtype_rules_and_steps() {
    let (long, float) = (DType::I64, DType::F32);
    let quarters = arange_ref(0.0, 2.0, 0.25);
    let down = vec![1.0, 0.5, 0.0, -0.5];
    let tenths: Vec<f64> = (0..10).map(|i| i as f64 * 0.1).collect();
    let cases = [
        (Tensor::arange(0, 5, 1), long, arange_ref(0.0, 5.0, 1.0)),
        (Tensor::arange(0, 10, 3), long, vec![0.0, 3.0, 6.0, 9.0]),
        (Tensor::arange(5, -3, -2), long, vec![5.0, 3.0, 1.0, -1.0]),
        (Tensor::arange(-3, 4, 2), long, arange_ref(-3.0, 4.0, 2.0)),
        (Tensor::arange(3, 3, 1), long, vec![]),
        (Tensor::arange(0, 5.0, 1), float, arange_ref(0.0, 5.0, 1.0)),
        (Tensor::arange(0.5, 3, 1), float, vec![0.5, 1.5, 2.5]),
        (Tensor::arange(0, 2, 0.25), float, quarters),
        (Tensor::arange(1.0, -1.0, -0.5), float, down),
        (Tensor::arange(0.0, 1.0, 0.1), float, tenths),
    ];
    for (i, (got, dtype, want)) in cases.into_iter().enumerate() {
        check(&format!("arange case {i}"), got, &vec1(dtype, &want));
    }
    let dev = default_device().unwrap();
    for dtype in numeric() {
        let got = dev.arange_with(2, 12, 3, dtype);
        check("arange_with", got, &vec1(dtype, &[2.0, 5.0, 8.0, 11.0]));
        let got = dev.arange_with(40, 20, -7, dtype);
        check("arange_with", got, &vec1(dtype, &[40.0, 33.0, 26.0]));
        if dtype != DType::U8 {
            let want = vec1(dtype, &arange_ref(6.0, -5.0, -2.0));
            check("arange_with", dev.arange_with(6, -5, -2, dtype), &want);
        }
        if dtype.is_float() {
            let got = dev.arange_with(-1.5, 2.0, 0.5, dtype);
            let want = vec1(dtype, &arange_ref(-1.5, 2.0, 0.5));
            check("arange_with", got, &want);
        } else {
            // As torch: integer dtypes step from the truncated start by the
            // truncated step.
            let got = dev.arange_with(1.5, 7, 2.5, dtype);
            check("arange_with", got, &vec1(dtype, &[1.0, 3.0, 5.0]));
        }
    }
    check_err(Tensor::arange(0, 5, 0), &["arange", "non-zero step"]);
    check_err(Tensor::arange(0, 5, -1), &["arange", "points away"]);
    check_err(Tensor::arange(0.0, f64::NAN, 1), &["arange", "finite"]);
    let bad = dev.arange_with(0, 3, 0.5, DType::I32);
    check_err(bad, &["arange", "step 0.5"]);
    let bad = dev.arange_with(0, 3, 1, DType::Bool);
    check_err(bad, &["arange", "bool"]);
}
}

all_modes! {
fn int64_bounds_beyond_2_pow_53_count_and_fill_exactly() {
    // 2^60 + 1 is no f64: a length or a value computed through one is off.
    let big: i64 = (1 << 60) + 1;
    let up = Tensor::arange(big, big + 3, 1).unwrap();
    assert_eq!(up.to_vec::<i64>().unwrap(), vec![big, big + 1, big + 2]);
    let down = Tensor::arange(big, -big, -(big / 3 + 7)).unwrap();
    let want: Vec<i64> = (0..)
        .map(|k: i64| big - k * (big / 3 + 7))
        .take_while(|&x| x > -big)
        .collect();
    assert_eq!(down.to_vec::<i64>().unwrap(), want);
    let dev = default_device().unwrap();
    let filled = dev.full(&[2], big, DType::I64).unwrap();
    let shifted = (&filled + big).unwrap().clamp_min(big + 2 + big).unwrap();
    assert_eq!(shifted.to_vec::<i64>().unwrap(), vec![2 * big + 2; 2]);
}
}

/// torch.linspace: the first half steps up from `start`, the rest steps down
/// from `end`; integer dtypes truncate the ends and each value toward 0.
fn linspace_ref(start: f64, end: f64, n: i64, dtype: DType) -> Host {
    let int = !dtype.is_float();
    let (s, e) = match int {
        true => (start.trunc(), end.trunc()),
        false => (start, end),
    };
    let step = (e - s) / (n - 1).max(1) as f64;
    let data = (0..n).map(|i| {
        let up = i < n / 2 || n == 1;
        let (base, k) = if up { (s, i) } else { (e, i + 1 - n) };
        let v = base + step * k as f64;
        if int { v.trunc() } else { v }
    });
    Host::new(dtype, &[n], data.collect())
}

all_modes! {
fn linspace_spaces_evenly_with_exact_ends() {
    let cases = [(0.0, 1.0, 5), (-1.0, 2.0, 7), (5.0, 5.0, 3), (3.0, -3.0, 4)];
    let more = [(0.1, 0.7, 7), (2.0, 9.0, 0), (2.0, 9.0, 1), (2.0, 9.0, 2)];
    for (start, end, n) in cases.into_iter().chain(more).chain([(-0.3, 1.9, 100)]) {
        let what = format!("linspace({start}, {end}, {n})");
        let got = Tensor::linspace(start, end, n);
        let want = linspace_ref(start, end, n, DType::F32);
        check(&what, got.clone(), &want);
        // Both ends are exactly the requested values (rounded to the dtype).
        let v = got.unwrap().to_f64_vec().unwrap();
        if n >= 1 {
            assert_eq!(v[0], round(DType::F32, start), "{what}: first");
        }
        if n >= 2 {
            assert_eq!(v[v.len() - 1], round(DType::F32, end), "{what}: last");
        }
    }
    let dev = default_device().unwrap();
    for dtype in numeric() {
        let got = dev.linspace_with(0.0, 20.0, 5, dtype);
        let want = vec1(dtype, &[0.0, 5.0, 10.0, 15.0, 20.0]);
        check("linspace_with", got, &want);
        let got = dev.linspace_with(0.0, 10.0, 4, dtype);
        check("linspace_with", got, &linspace_ref(0.0, 10.0, 4, dtype));
        let got = dev.linspace_with(30.0, 1.0, 1, dtype);
        check("linspace_with 1 step", got, &vec1(dtype, &[30.0]));
        let got = dev.linspace_with(30.0, 1.0, 0, dtype);
        check("linspace_with 0 steps", got, &vec1(dtype, &[]));
    }
    // Integer dtypes: [0, 3.33, 6.67, 10] rounds toward zero, ends exact.
    let got = dev.linspace_with(0.0, 10.0, 4, DType::I32);
    let want = vec1(DType::I32, &[0.0, 3.0, 6.0, 10.0]);
    check("linspace int", got, &want);
    let got = dev.linspace_with(-2.7, 7.9, 3, DType::I64);
    check(
        "linspace int ends",
        got,
        &vec1(DType::I64, &[-2.0, 2.0, 7.0]),
    );
    check_err(Tensor::linspace(0.0, 1.0, -1), &["linspace", "steps -1"]);
}
}

all_modes! {
fn to_device_keeps_the_values() {
    // Every device the plugin has (EAGERTPU_DEVICE_COUNT, or its default).
    for dtype in ALL {
        let x = distinct(dtype, &[3, 4]);
        let t = x.tensor();
        for dev in Device::all().unwrap() {
            let moved = t.to_device(&dev).unwrap();
            assert!(moved.device() == dev);
            // Usable by ops on its new device.
            let got = moved.add(&moved.zeros_like().unwrap());
            check(&format!("to_device {dev:?}"), got, &x);
            let back = moved.to_device(&t.device()).unwrap();
            assert!(back.device() == t.device());
            check("to_device back", Ok(back), &x);
        }
    }
}
}

all_modes! {
fn reshape_view_flatten_squeeze_unsqueeze_keep_row_major_order() {
    for dtype in ALL {
        let x = distinct(dtype, &[2, 3, 4]);
        let t = x.tensor();
        let cases: [(&str, Result<Tensor>, &[i64]); 16] = [
            ("reshape", t.reshape(&[4, 6]), &[4, 6]),
            ("reshape -1", t.reshape(&[-1, 2]), &[12, 2]),
            ("reshape -1", t.reshape(&[2, -1, 3]), &[2, 4, 3]),
            ("reshape", t.reshape(&[24]), &[24]),
            ("reshape", t.reshape(&[1, 24, 1]), &[1, 24, 1]),
            ("view", t.view(&[6, 4]), &[6, 4]),
            ("flatten(0, -1)", t.flatten(0, -1), &[24]),
            ("flatten(1, 2)", t.flatten(1, 2), &[2, 12]),
            ("flatten(0, 1)", t.flatten(0, 1), &[6, 4]),
            ("flatten(1, 1)", t.flatten(1, 1), &[2, 3, 4]),
            ("unsqueeze(0)", t.unsqueeze(0), &[1, 2, 3, 4]),
            ("unsqueeze(3)", t.unsqueeze(3), &[2, 3, 4, 1]),
            ("unsqueeze(-1)", t.unsqueeze(-1), &[2, 3, 4, 1]),
            ("unsqueeze(-2)", t.unsqueeze(-2), &[2, 3, 1, 4]),
            ("unsqueeze(-4)", t.unsqueeze(-4), &[1, 2, 3, 4]),
            ("squeeze()", t.squeeze(None), &[2, 3, 4]),
        ];
        for (what, got, shape) in cases {
            check(what, got, &reshaped(&x, shape));
        }
        let y = distinct(dtype, &[1, 3, 1, 2]);
        let u = y.tensor();
        let s = Host::new(dtype, &[], vec![y.data[4]]);
        let z = s.tensor();
        let one = u.reshape(&[6]).unwrap().narrow(0, 4, 1).unwrap();
        let cases: [(&str, &Host, Result<Tensor>, &[i64]); 10] = [
            ("squeeze()", &y, u.squeeze(None), &[3, 2]),
            ("squeeze(0)", &y, u.squeeze(Some(0)), &[3, 1, 2]),
            ("squeeze(1)", &y, u.squeeze(Some(1)), &[1, 3, 1, 2]),
            ("squeeze(-2)", &y, u.squeeze(Some(-2)), &[1, 3, 2]),
            // 0-d: flatten and unsqueeze give [1], squeeze keeps [].
            ("flatten 0-d", &s, z.flatten(0, -1), &[1]),
            ("unsqueeze(0) 0-d", &s, z.unsqueeze(0), &[1]),
            ("unsqueeze(-1) 0-d", &s, z.unsqueeze(-1), &[1]),
            ("squeeze 0-d", &s, z.squeeze(None), &[]),
            ("reshape 0-d", &s, z.reshape(&[1, 1]), &[1, 1]),
            ("[1] to 0-d", &s, one.reshape(&[]), &[]),
        ];
        for (what, x, got, shape) in cases {
            check(what, got, &reshaped(x, shape));
        }
    }
    // Reshaping a transposed tensor reads it in its new row-major order.
    let x = distinct(DType::I32, &[2, 3]);
    let got = x.tensor().t().unwrap().reshape(&[6]);
    let want = build(DType::I32, &[6], |i| x.at(&[i[0] % 2, i[0] / 2]));
    check("t then reshape", got, &want);
}
}

/// `x` with its dims reordered: output dim i is input dim `perm[i]`.
fn permute_ref(x: &Host, perm: &[usize]) -> Host {
    let shape: Vec<i64> = perm.iter().map(|&p| x.shape[p]).collect();
    build(x.dtype, &shape, |o| {
        let mut i = vec![0; o.len()];
        for (k, &p) in perm.iter().enumerate() {
            i[p] = o[k];
        }
        x.at(&i)
    })
}

all_modes! {
fn permute_transpose_and_t() {
    for dtype in ALL {
        let x = distinct(dtype, &[2, 3, 4]);
        let t = x.tensor();
        for perm in [[2, 0, 1], [1, 2, 0], [0, 2, 1], [-1, 0, -2], [0, 1, 2]] {
            let p = perm.map(|d| norm(d, 3));
            let what = format!("permute{perm:?}");
            check(&what, t.permute(&perm), &permute_ref(&x, &p));
        }
        let want = permute_ref(&x, &[2, 1, 0]);
        check("transpose(0, 2)", t.transpose(0, 2), &want);
        let want = permute_ref(&x, &[0, 2, 1]);
        check("transpose(-1, -2)", t.transpose(-1, -2), &want);
        check("transpose(1, 1)", t.transpose(1, 1), &x);
        let m = distinct(dtype, &[3, 5]);
        let want = build(dtype, &[5, 3], |i| m.at(&[i[1], i[0]]));
        check("t", m.tensor().t(), &want);
        let v = distinct(dtype, &[4]);
        check("t of 1-d", v.tensor().t(), &v);
        let s = Host::new(dtype, &[], vec![1.0]);
        check("t of 0-d", s.tensor().t(), &s);
    }
    let x = distinct(DType::F32, &[2, 3, 4, 5]);
    let want = permute_ref(&x, &[3, 1, 0, 2]);
    check("permute rank 4", x.tensor().permute(&[3, 1, 0, 2]), &want);
    check_err(x.tensor().t(), &["t:", "at most 2 dims"]);
}
}

all_modes! {
fn expand_and_broadcast_to() {
    let cases: [(&[i64], &[i64], &[i64]); 6] = [
        (&[3, 1], &[2, 3, 4], &[2, 3, 4]),
        (&[3, 1], &[-1, 5], &[3, 5]),
        (&[1], &[2, 3], &[2, 3]),
        (&[], &[2, 2], &[2, 2]),
        (&[1, 4], &[3, -1], &[3, 4]),
        (&[2, 1, 3], &[4, 2, 0, 3], &[4, 2, 0, 3]),
    ];
    for dtype in ALL {
        for (from, to, shape) in cases {
            let x = distinct(dtype, from);
            let want = build(dtype, shape, |o| x.data[broadcast_source(o, from)]);
            let what = format!("expand {from:?} -> {to:?}");
            check(&what, x.tensor().expand(to), &want);
            check(&what, x.tensor().broadcast_to(to), &want);
        }
    }
    // By hand: a column broadcast across rows.
    let col = Host::new(DType::I32, &[2, 1], vec![7.0, -1.0]).tensor();
    let want = [7.0, 7.0, 7.0, -1.0, -1.0, -1.0];
    let want = Host::new(DType::I32, &[2, 3], want.to_vec());
    check("expand by hand", col.expand(&[2, 3]), &want);
    check_err(col.expand(&[-1, 2, 3]), &["expand", "-1"]);
    check_err(col.expand(&[3, 3]), &["expand", "[2, 1]", "[3, 3]"]);
    check_err(col.broadcast_to(&[2]), &["expand", "[2, 1]"]);
    check("after expand errors", col.expand(&[2, 3]), &want);
}
}

/// The indices `x[start:end:step]` reads from a dim of `size`, by Python's rules.
fn py_slice(size: i64, start: i64, end: i64, step: i64) -> Vec<i64> {
    let fix = |i: i64| (if i < 0 { i.saturating_add(size) } else { i }).clamp(0, size);
    (fix(start)..fix(end)).step_by(step as usize).collect()
}

all_modes! {
fn slice_follows_python_rules() {
    let (max, min) = (i64::MAX, i64::MIN);
    let cases = [(0, 1, 4, 1), (1, -4, -1, 1), (1, -100, 100, 1)];
    let steps = [(0, 2, 100, 2), (1, 0, max, 3), (-1, 1, 6, 4)];
    let empty = [(1, 5, 2, 1), (0, 7, 9, 1), (0, 5, 5, 1)];
    let ends = [(0, -2, max, 1), (1, min, -5, 1), (0, 0, 5, 1)];
    for dtype in ALL {
        let x = distinct(dtype, &[5, 6]);
        let all = cases.iter().chain(&steps).chain(&empty).chain(&ends);
        for &(dim, start, end, step) in all {
            let d = norm(dim, 2);
            let idx = py_slice(x.shape[d], start, end, step);
            let shape = with_dim(&x.shape, d, idx.len() as i64);
            let want = build(dtype, &shape, |o| at_with(&x, o, d, idx[o[d] as usize]));
            let what = format!("slice({dim}, {start}, {end}, {step})");
            check(&what, x.tensor().slice(dim, start, end, step), &want);
        }
    }
    // By hand: x[1:, ::2] of a 3x5 matrix, and v[-2:] of a vector.
    let x = Host::new(DType::I64, &[3, 5], (0..15).map(|v| v as f64).collect());
    let rows = x.tensor().slice(0, 1, i64::MAX, 1).unwrap();
    let want = [5.0, 7.0, 9.0, 10.0, 12.0, 14.0];
    let want = Host::new(DType::I64, &[2, 3], want.to_vec());
    check("x[1:, ::2]", rows.slice(1, 0, i64::MAX, 2), &want);
    let v = vec1(DType::F32, &[1.0, 2.0, 3.0, 4.0]).tensor();
    let want = vec1(DType::F32, &[3.0, 4.0]);
    check("v[-2:]", v.slice(0, -2, i64::MAX, 1), &want);
    for step in [0, -1] {
        check_err(v.slice(0, 0, 4, step), &["slice", "positive step"]);
    }
}
}

all_modes! {
fn narrow_and_select() {
    let narrows = [(0, 1, 2), (1, -3, 2), (2, 0, 3), (1, 2, 0), (1, 5, 0)];
    let selects = [(0, 0), (0, -1), (1, 2), (1, -5), (2, 1), (-1, 2)];
    for dtype in ALL {
        let x = distinct(dtype, &[4, 5, 3]);
        let t = x.tensor();
        for (dim, start, len) in narrows.into_iter().chain([(-1, 1, 2)]) {
            let d = norm(dim, 3);
            let s = if start < 0 { start + x.shape[d] } else { start };
            let shape = with_dim(&x.shape, d, len);
            let want = build(dtype, &shape, |o| at_with(&x, o, d, o[d] + s));
            let what = format!("narrow({dim}, {start}, {len})");
            check(&what, t.narrow(dim, start, len), &want);
        }
        for (dim, index) in selects {
            let d = norm(dim, 3);
            let at = if index < 0 { index + x.shape[d] } else { index };
            let mut shape = x.shape.clone();
            shape.remove(d);
            let want = build(dtype, &shape, |o| {
                let mut i = o.to_vec();
                i.insert(d, at);
                x.at(&i)
            });
            let what = format!("select({dim}, {index})");
            check(&what, t.select(dim, index), &want);
        }
        let v = distinct(dtype, &[6]);
        let want = Host::new(dtype, &[], vec![v.data[4]]);
        check("select of 1-d", v.tensor().select(0, -2), &want);
    }
}
}

/// `torch.cat` on the host, with the result in `dtype`.
fn cat_ref(xs: &[&Host], dim: usize, dtype: DType) -> Host {
    let mut shape = xs[0].shape.clone();
    shape[dim] = xs.iter().map(|x| x.shape[dim]).sum();
    build(dtype, &shape, |o| {
        let mut i = o.to_vec();
        for x in xs {
            if i[dim] < x.shape[dim] {
                return x.at(&i);
            }
            i[dim] -= x.shape[dim];
        }
        unreachable!()
    })
}

all_modes! {
fn cat_and_stack() {
    for dtype in ALL {
        let a = distinct(dtype, &[2, 3]);
        let b = Host::random(dtype, &[2, 1], 5);
        let c = Host::random(dtype, &[2, 4], 6);
        let z = distinct(dtype, &[2, 0]);
        let d = Host::random(dtype, &[3, 3], 7);
        let [ta, tb, tc, tz, td] = [&a, &b, &c, &z, &d].map(Host::tensor);
        let got = Tensor::cat(&[&ta, &tb, &tz, &tc], 1);
        check("cat dim 1", got, &cat_ref(&[&a, &b, &z, &c], 1, dtype));
        let got = Tensor::cat(&[&tc, &ta], -1);
        check("cat dim -1", got, &cat_ref(&[&c, &a], 1, dtype));
        let got = Tensor::cat(&[&ta, &td, &ta], 0);
        check("cat dim 0", got, &cat_ref(&[&a, &d, &a], 0, dtype));
        check("cat of one", Tensor::cat(&[&ta], 0), &a);
        // stack: a new dim at 0, 1, 2 == -1, -3 == 0.
        let q = Host::random(dtype, &[2, 3], 8);
        let r = Host::random(dtype, &[2, 3], 9);
        let [tq, tr] = [&q, &r].map(Host::tensor);
        let parts = [&a, &q, &r];
        for (dim, d) in [(0, 0), (1, 1), (2, 2), (-1, 2), (-3, 0)] {
            let mut shape = vec![2, 3];
            shape.insert(d, 3);
            let want = build(dtype, &shape, |o| {
                let mut i = o.to_vec();
                let k = i.remove(d);
                parts[k as usize].at(&i)
            });
            let got = Tensor::stack(&[&ta, &tq, &tr], dim);
            check(&format!("stack dim {dim}"), got, &want);
        }
    }
    // Stacking 0-d tensors gives a vector.
    let [p, q] = [3i32, -1].map(|v| Tensor::scalar(v).unwrap());
    let want = vec1(DType::I32, &[3.0, -1.0, 3.0]);
    check("stack 0-d", Tensor::stack(&[&p, &q, &p], -1), &want);
    // Dtypes promote as torch.cat does.
    use DType::*;
    let cases: [(&[DType], DType); 5] = [
        (&[I32, F16, U8], F16),
        (&[U8, I8], I16),
        (&[Bool, I64, Bool], I64),
        (&[F16, BF16], F32),
        (&[I16, F64, F32, I8], F64),
    ];
    for (k, (dtypes, want)) in cases.into_iter().enumerate() {
        let hs: Vec<Host> = (0..dtypes.len())
            .map(|i| Host::random(dtypes[i], &[2, i as i64 + 1], (k * 9 + i) as u64))
            .collect();
        let ts: Vec<Tensor> = hs.iter().map(Host::tensor).collect();
        let got = Tensor::cat(&ts.iter().collect::<Vec<_>>(), 1);
        let want_cat = cat_ref(&hs.iter().collect::<Vec<_>>(), 1, want);
        check(&format!("cat {dtypes:?}"), got, &want_cat);
        let cols: Vec<Tensor> = ts.iter().map(|t| t.narrow(1, 0, 1).unwrap()).collect();
        let got = Tensor::stack(&cols.iter().collect::<Vec<_>>(), 0);
        let n = hs.len() as i64;
        let want = build(want, &[n, 2, 1], |o| hs[o[0] as usize].at(&[o[1], 0]));
        check(&format!("stack {dtypes:?}"), got, &want);
    }
}
}

/// `F.pad` on the host: (before, after) pairs from the last dim.
fn pad_ref(x: &Host, pad: &[i64], value: f64) -> Host {
    let r = x.rank();
    let (mut low, mut high) = (vec![0; r], vec![0; r]);
    for k in 0..pad.len() / 2 {
        low[r - 1 - k] = pad[2 * k];
        high[r - 1 - k] = pad[2 * k + 1];
    }
    let shape: Vec<i64> = (0..r).map(|d| x.shape[d] + low[d] + high[d]).collect();
    build(x.dtype, &shape, |o| {
        let i: Vec<i64> = (0..r).map(|d| o[d] - low[d]).collect();
        let inside = (0..r).all(|d| i[d] >= 0 && i[d] < x.shape[d]);
        if inside { x.at(&i) } else { value }
    })
}

all_modes! {
fn pad_pads_from_the_last_dim_and_crops_when_negative() {
    let pads: [&[i64]; 4] = [&[1, 2], &[0, 1, 2, 0], &[0, 0], &[]];
    let more: [&[i64]; 3] = [
        &[1, 0, 2, 1, 1, 1],
        &[-1, 1, 0, -2],
        &[0, -2, -1, -1, -1, 0],
    ];
    for dtype in ALL {
        let x = distinct(dtype, &[3, 4, 2]);
        let t = x.tensor();
        let v = fill(dtype);
        for pad in pads.into_iter().chain(more) {
            let what = format!("pad {pad:?}");
            let got = match dtype {
                d if d.is_float() => t.pad(pad, v),
                DType::Bool => t.pad(pad, true),
                _ => t.pad(pad, v as i64),
            };
            check(&what, got, &pad_ref(&x, pad, v));
            check(&what, t.pad(pad, 0), &pad_ref(&x, pad, 0.0));
        }
    }
    // By hand: (left 1, right 0) on the last dim, (top 0, bottom 1) on the first.
    let x = Host::new(DType::I32, &[2, 2], vec![1.0, 2.0, 3.0, 4.0]).tensor();
    let want = [0.0, 1.0, 2.0, 0.0, 3.0, 4.0, 0.0, 0.0, 0.0];
    let want = Host::new(DType::I32, &[3, 3], want.to_vec());
    check("pad by hand", x.pad(&[1, 0, 0, 1], 0), &want);
    check_err(x.pad(&[1, 2, 3], 0), &["pad", "3 padding values"]);
    check_err(x.pad(&[1, 2, 3, 4, 5, 6], 0), &["pad", "6 padding values"]);
    check_err(x.pad(&[0, 0, -3, 0], 0), &["pad", "negative size"]);
}
}

all_modes! {
fn flip_reverses_the_given_dims() {
    let dim_sets: [&[i64]; 7] = [&[0], &[1], &[0, 2], &[-1], &[], &[0, 1, 2], &[2, -3]];
    for dtype in ALL {
        let x = distinct(dtype, &[2, 3, 4]);
        for dims in dim_sets {
            let flipped: Vec<usize> = dims.iter().map(|&d| norm(d, 3)).collect();
            let want = build(dtype, &x.shape, |o| {
                let mut i = o.to_vec();
                flipped.iter().for_each(|&d| i[d] = x.shape[d] - 1 - o[d]);
                x.at(&i)
            });
            check(&format!("flip {dims:?}"), x.tensor().flip(dims), &want);
        }
    }
    let v = vec1(DType::I8, &[1.0, 2.0, 3.0]).tensor();
    let want = vec1(DType::I8, &[3.0, 2.0, 1.0]);
    check("flip by hand", v.flip(&[0]), &want);
    check_err(v.flip(&[0, -1]), &["flip", "more than once"]);
}
}

all_modes! {
fn bad_input_names_the_op_and_the_next_op_works() {
    let x = distinct(DType::F32, &[2, 3]);
    let t = x.tensor();
    let i2 = ix(DType::I64, &[2, 2], &[0, 1, 1, 0]);
    let i1 = ix(DType::I64, &[2], &[0, 1]);
    let other = Tensor::zeros(&[3, 3], DType::F32).unwrap();
    let doubles = t.to_dtype(DType::F64).unwrap();
    let cases: Vec<(Result<Tensor>, &[&str])> = vec![
        (t.reshape(&[4]), &["reshape", "[2, 3]", "[4]"]),
        (t.view(&[-1, 4]), &["reshape", "[-1, 4]"]),
        (t.permute(&[1, 1]), &["permute", "more than once"]),
        (t.permute(&[0]), &["permute", "1 dims"]),
        (t.transpose(0, 2), &["transpose", "dim 2"]),
        (t.narrow(1, 2, 5), &["narrow", "exceeds", "size 3"]),
        (t.narrow(0, 3, 1), &["narrow", "index 3", "size 2"]),
        (t.narrow(0, -3, 1), &["narrow", "index -3"]),
        (t.select(1, 3), &["select", "index 3", "size 3"]),
        (t.select(0, -3), &["select", "index -3", "size 2"]),
        (t.slice(2, 0, 1, 1), &["slice", "dim 2"]),
        (Tensor::cat(&[&t, &other], 1), &["cat", "[2, 3]", "[3, 3]"]),
        (Tensor::cat(&[], 0), &["cat", "no tensors"]),
        (Tensor::stack(&[&t, &other], 0), &["cat", "same shape"]),
        (t.gather(1, &i1), &["gather", "int64[2]", "rank"]),
        (t.gather(1, &t), &["gather", "index", "integer"]),
        (t.index_select(0, &i2), &["index_select", "1-d"]),
        (t.scatter_add(1, &i2, &doubles), &["scatter_add", "float64"]),
        (t.squeeze(Some(2)), &["squeeze", "dim 2"]),
        (t.unsqueeze(4), &["unsqueeze", "dim 4"]),
        (t.flatten(1, 0), &["flatten", "comes after"]),
    ];
    for (got, words) in cases {
        check_err(got, words);
    }
    // The runtime stays usable.
    let want = build(DType::F32, &[3, 2], |o| x.at(&[o[1], o[0]]) * 2.0);
    check("after the errors", t.t().and_then(|u| u.mul(2.0)), &want);
    // Debug mode checks tensor indices on the host.
    if eagertpu::mode().unwrap() == eagertpu::Mode::Debug {
        let bad = t.index_select(1, &ix(DType::I32, &[2], &[1, 3]));
        check_err(bad, &["index_select", "index 3", "size 3"]);
        let bad = t.gather(0, &ix(DType::I64, &[1, 1], &[2]));
        check_err(bad, &["gather", "index 2", "size 2"]);
        let got = t.index_select(1, &ix(DType::I32, &[2], &[2, 0]));
        let want = build(DType::F32, &[2, 2], |o| x.at(&[o[0], 2 - 2 * o[1]]));
        check("after an index error", got, &want);
    }
}
}

/// `torch.roll` on the host: element `i` of each rolled dim moves to
/// `(i + shift) mod n`.
fn host_roll(x: &Host, shifts: &[i64], dims: &[usize]) -> Host {
    let mut out = x.clone();
    for (&shift, &d) in shifts.iter().zip(dims) {
        let src = out.clone();
        let n = x.shape[d];
        for (flat, v) in out.data.iter_mut().enumerate() {
            let mut idx = unravel(flat, &x.shape);
            idx[d] = (idx[d] - shift).rem_euclid(n);
            *v = src.data[ravel(&idx, &x.shape)];
        }
    }
    out
}

all_modes! {
fn roll_matches_the_host_on_every_dim_and_flattened() {
    let x = Host::random(DType::F32, &[3, 4, 5], 11);
    for (shifts, dims) in [
        (vec![1], vec![0]),
        (vec![-2], vec![2]),
        (vec![7, -3], vec![1, -1]),
        (vec![0, 3, 9], vec![0, 1, 2]),
    ] {
        let got = x.tensor().roll(&shifts, &dims).unwrap();
        let ds: Vec<usize> = dims.iter().map(|&d| if d < 0 { (d + 3) as usize } else { d as usize }).collect();
        assert_close(&format!("roll {shifts:?} {dims:?}"), &got, &host_roll(&x, &shifts, &ds));
    }
    // No dims: the flattened tensor, shape kept.
    let got = x.tensor().roll(&[13], &[]).unwrap();
    let flat = Host::new(DType::F32, &[60], x.data.clone());
    let want = host_roll(&flat, &[13], &[0]);
    assert_close("roll flattened", &got, &Host::new(DType::F32, &[3, 4, 5], want.data));
    let ints = Host::random(DType::I64, &[6], 3);
    assert_close("roll int64", &ints.tensor().roll(&[2], &[0]).unwrap(), &host_roll(&ints, &[2], &[0]));
}
}

all_modes! {
fn eye_is_the_identity_of_any_shape_and_dtype() {
    let dev = default_device().unwrap();
    for (n, m) in [(3, 3), (2, 5), (4, 1), (0, 3)] {
        for dtype in [DType::F32, DType::I64, DType::Bool] {
            let data = (0..n * m).map(|i| if i / m == i % m { 1.0 } else { 0.0 }).collect();
            let got = dev.eye(n, m, dtype).unwrap();
            assert_close(&format!("eye {n}x{m} {dtype}"), &got, &Host::new(dtype, &[n, m], data));
        }
    }
}
}

#[test]
fn bad_roll_and_eye_are_named() {
    // One mode-switching test at a time: its check compiles programs.
    let _m = in_mode(eagertpu::Mode::Strict);
    let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]).unwrap();
    assert_err(x.roll(&[1, 2], &[0]), "roll", &["same length"]);
    assert_err(x.roll(&[1, 2], &[]), "roll", &["one shift"]);
    assert_err(x.roll(&[1], &[3]), "roll", &["dim"]);
    assert_err(
        default_device().unwrap().eye(-1, 2, DType::F32),
        "eye",
        &["non-negative"],
    );
}

/// linspace's ends reach its programs as parameters: other ends (a schedule
/// that changes every step) compile nothing new. (Checked in strict mode,
/// where each op is a program of its own; a fused chunk's cuts depend on the
/// ops recorded before it.)
#[test]
fn linspace_with_other_ends_compiles_nothing_new() {
    let _m = in_mode(eagertpu::Mode::Strict);
    // (0, 1 and -1 stay constants in a program: ends other than those.)
    let first = Tensor::linspace(0.5, 2.0, 7).unwrap();
    first.to_vec::<f32>().unwrap();
    let before = eagertpu::metrics().unwrap();
    let got = Tensor::linspace(-3.0, 5.5, 7).unwrap();
    check(
        "linspace(-3, 5.5, 7)",
        Ok(got),
        &linspace_ref(-3.0, 5.5, 7, DType::F32),
    );
    let after = eagertpu::metrics().unwrap();
    assert_eq!(
        after.misses + after.disk_hits,
        before.misses + before.disk_hits,
        "{}",
        after.report()
    );
    assert_err(
        default_device()
            .unwrap()
            .linspace_with(0.0, 1.0, 3, DType::Bool),
        "linspace",
        &["bool"],
    );
}

all_modes! {
fn triu_and_tril_keep_one_side_of_a_diagonal() {
    for (c, shape) in [&[4, 5][..], &[2, 3, 3], &[5, 2], &[1, 0, 3]].into_iter().enumerate() {
        for dtype in [DType::F32, DType::I64, DType::Bool] {
            let x = Host::random(dtype, shape, 700 + c as u64);
            let (h, w) = (shape[shape.len() - 2], shape[shape.len() - 1]);
            for k in [-2i64, -1, 0, 1, 3] {
                let keep = |i: usize, upper: bool| {
                    let (r, col) = ((i as i64 / w) % h, i as i64 % w);
                    if upper { col - r >= k } else { col - r <= k }
                };
                let side = |upper: bool| {
                    let data = x.data.iter().enumerate().map(|(i, v)| if keep(i, upper) { *v } else { 0.0 });
                    Host::new(dtype, shape, data.collect())
                };
                let w = format!("{dtype}{shape:?} k={k}");
                assert_eq!(Host::of(&x.tensor().triu(k).unwrap()), side(true), "triu {w}");
                assert_eq!(Host::of(&x.tensor().tril(k).unwrap()), side(false), "tril {w}");
            }
        }
    }
    assert_err(Host::random(DType::F32, &[3], 1).tensor().triu(0), "triu", &["at least 2 dims", "[3]"]);
}
}
