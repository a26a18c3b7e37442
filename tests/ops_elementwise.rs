//! Elementwise ops against host references: every op, every dtype it supports,
//! broadcasting and PyTorch's type promotion.

mod common;

use common::*;
use eagertpu::{DType, Tensor};

fn sign(x: f64) -> f64 {
    if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        x
    }
}

fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2))
}

fn gelu_tanh(x: f64) -> f64 {
    let c = (2.0 / std::f64::consts::PI).sqrt();
    0.5 * x * (1.0 + (c * (x + 0.044715 * x * x * x)).tanh())
}

type UnaryRef = fn(f64) -> f64;

/// (name, input range, reference, float function?)
fn unary_cases() -> Vec<(&'static str, (f64, f64), UnaryRef, bool)> {
    vec![
        ("neg", (-3.0, 3.0), |x| -x, false),
        ("abs", (-3.0, 3.0), f64::abs, false),
        ("exp", (-3.0, 3.0), f64::exp, true),
        ("log", (0.05, 3.0), f64::ln, true),
        ("log1p", (-0.9, 3.0), f64::ln_1p, true),
        ("sqrt", (0.0, 3.0), f64::sqrt, true),
        ("rsqrt", (0.05, 3.0), |x| 1.0 / x.sqrt(), true),
        ("tanh", (-3.0, 3.0), f64::tanh, true),
        ("sigmoid", (-3.0, 3.0), |x| 1.0 / (1.0 + (-x).exp()), true),
        ("relu", (-3.0, 3.0), |x| x.max(0.0), false),
        ("gelu", (-3.0, 3.0), gelu, true),
        ("gelu_tanh", (-3.0, 3.0), gelu_tanh, true),
        ("sin", (-3.0, 3.0), f64::sin, true),
        ("cos", (-3.0, 3.0), f64::cos, true),
        ("floor", (-3.0, 3.0), f64::floor, false),
        ("ceil", (-3.0, 3.0), f64::ceil, false),
        ("round", (-3.0, 3.0), f64::round_ties_even, false),
        ("sign", (-3.0, 3.0), sign, false),
        ("erf", (-3.0, 3.0), erf, true),
    ]
}

fn apply_unary(name: &str, t: &Tensor) -> eagertpu::Result<Tensor> {
    match name {
        "neg" => t.neg(),
        "abs" => t.abs(),
        "exp" => t.exp(),
        "log" => t.log(),
        "log1p" => t.log1p(),
        "sqrt" => t.sqrt(),
        "rsqrt" => t.rsqrt(),
        "tanh" => t.tanh(),
        "sigmoid" => t.sigmoid(),
        "relu" => t.relu(),
        "gelu" => t.gelu(),
        "gelu_tanh" => t.gelu_tanh(),
        "sin" => t.sin(),
        "cos" => t.cos(),
        "floor" => t.floor(),
        "ceil" => t.ceil(),
        "round" => t.round(),
        "sign" => t.sign(),
        "erf" => t.erf(),
        "logical_not" => t.logical_not(),
        "isnan" => t.isnan(),
        "bitwise_not" => t.bitwise_not(),
        other => panic!("unknown op {other}"),
    }
}

all_modes! {
fn unary_ops_match_the_host_reference_for_every_numeric_dtype() {
    for (i, (name, (lo, hi), f, float_fn)) in unary_cases().into_iter().enumerate() {
        for dtype in numeric() {
            let (lo, hi) = if dtype == DType::U8 {
                (lo.max(0.0), hi.max(1.0))
            } else {
                (lo, hi)
            };
            // Ints get integer inputs; float functions of ints need the same domain.
            let (lo, hi) = if dtype.is_float() {
                (lo, hi)
            } else {
                (lo.ceil(), hi.floor())
            };
            let x = Host::random_in(dtype, &[3, 5], 100 + i as u64, lo, hi);
            let out = if float_fn && !dtype.is_float() {
                DType::F32
            } else {
                dtype
            };
            let want = x.map(out, f);
            let got =
                apply_unary(name, &x.tensor()).unwrap_or_else(|e| panic!("{name} {dtype}: {e}"));
            let tol = tolerance(out);
            // Functions made of several rounded steps get a little more room in 16 bits.
            let tol = if matches!(name, "gelu" | "gelu_tanh")
                && matches!(out, DType::F16 | DType::BF16)
            {
                (tol.0 * 2.0, tol.1 * 2.0)
            } else {
                tol
            };
            assert_close_tol(&format!("{name}({dtype})"), &got, &want, tol);
        }
    }
}
}

all_modes! {
fn unary_ops_on_bool_follow_pytorch() {
    let x = Host::random(DType::Bool, &[7], 1);
    // Float functions compute bools in float32.
    assert_close(
        "exp(bool)",
        &x.tensor().exp().unwrap(),
        &x.map(DType::F32, f64::exp),
    );
    assert_close("sign(bool)", &x.tensor().sign().unwrap(), &x);
    for name in ["neg", "abs", "relu", "floor"] {
        let e = err_text(apply_unary(name, &x.tensor()));
        assert!(e.contains(name) && e.contains("bool"), "{name}: {e}");
    }
}
}

all_modes! {
fn logical_not_and_isnan_give_bools() {
    for dtype in ALL {
        let x = Host::random(dtype, &[4, 3], 7);
        let want = x.map(DType::Bool, |v| (v == 0.0) as u8 as f64);
        assert_close(
            &format!("logical_not({dtype})"),
            &x.tensor().logical_not().unwrap(),
            &want,
        );
    }
    for dtype in FLOATS {
        let mut x = Host::random(dtype, &[10], 8);
        x.data[2] = f64::NAN;
        x.data[7] = f64::NAN;
        x.data[5] = f64::INFINITY;
        let want = x.map(DType::Bool, |v| v.is_nan() as u8 as f64);
        assert_close(
            &format!("isnan({dtype})"),
            &x.tensor().isnan().unwrap(),
            &want,
        );
    }
    let ints = Host::random(DType::I32, &[5], 9);
    assert_close(
        "isnan(int32)",
        &ints.tensor().isnan().unwrap(),
        &ints.map(DType::Bool, |_| 0.0),
    );
}
}

/// A host reference of a binary op, and its result dtype given the compute dtype.
type BinaryRef = (Box<dyn Fn(f64, f64) -> f64>, fn(DType) -> DType);

/// Python's modulo: the sign of the divisor.
fn py_mod(a: f64, b: f64) -> f64 {
    let r = a % b;
    if r != 0.0 && (r < 0.0) != (b < 0.0) {
        r + b
    } else {
        r
    }
}

fn bits(f: fn(i64, i64) -> i64) -> impl Fn(f64, f64) -> f64 {
    move |a, b| f(a as i64, b as i64) as f64
}

fn apply_binary(name: &str, a: &Tensor, b: &Tensor) -> eagertpu::Result<Tensor> {
    match name {
        "add" => a.add(b),
        "sub" => a.sub(b),
        "mul" => a.mul(b),
        "div" => a.div(b),
        "pow" => a.pow(b),
        "maximum" => a.maximum(b),
        "minimum" => a.minimum(b),
        "remainder" => a.remainder(b),
        "atan2" => a.atan2(b),
        "eq" => a.eq(b),
        "ne" => a.ne(b),
        "lt" => a.lt(b),
        "le" => a.le(b),
        "gt" => a.gt(b),
        "ge" => a.ge(b),
        "logical_and" => a.logical_and(b),
        "logical_or" => a.logical_or(b),
        "logical_xor" => a.logical_xor(b),
        "bitwise_and" => a.bitwise_and(b),
        "bitwise_or" => a.bitwise_or(b),
        "bitwise_xor" => a.bitwise_xor(b),
        other => panic!("unknown op {other}"),
    }
}

/// The host reference of a binary op whose inputs are already in the compute
/// dtype, and the result dtype given the compute dtype.
fn binary_ref(name: &str) -> BinaryRef {
    let same: fn(DType) -> DType = |d| d;
    let float: fn(DType) -> DType = |d| if d.is_float() { d } else { DType::F32 };
    let boolean: fn(DType) -> DType = |_| DType::Bool;
    let b = |x: bool| x as u8 as f64;
    match name {
        "add" => (Box::new(|a, c| a + c), same),
        "sub" => (Box::new(|a, c| a - c), same),
        "mul" => (Box::new(|a, c| a * c), same),
        "div" => (Box::new(|a, c| a / c), float),
        "pow" => (Box::new(f64::powf), same),
        "maximum" => (Box::new(f64::max), same),
        "minimum" => (Box::new(f64::min), same),
        "remainder" => (Box::new(py_mod), same),
        "atan2" => (Box::new(f64::atan2), float),
        "eq" => (Box::new(move |a, c| b(a == c)), boolean),
        "ne" => (Box::new(move |a, c| b(a != c)), boolean),
        "lt" => (Box::new(move |a, c| b(a < c)), boolean),
        "le" => (Box::new(move |a, c| b(a <= c)), boolean),
        "gt" => (Box::new(move |a, c| b(a > c)), boolean),
        "ge" => (Box::new(move |a, c| b(a >= c)), boolean),
        "logical_and" => (Box::new(move |a, c| b(a != 0.0 && c != 0.0)), boolean),
        "logical_or" => (Box::new(move |a, c| b(a != 0.0 || c != 0.0)), boolean),
        "logical_xor" => (Box::new(move |a, c| b((a != 0.0) != (c != 0.0))), boolean),
        "bitwise_and" => (Box::new(bits(|a, c| a & c)), same),
        "bitwise_or" => (Box::new(bits(|a, c| a | c)), same),
        "bitwise_xor" => (Box::new(bits(|a, c| a ^ c)), same),
        other => panic!("unknown op {other}"),
    }
}

/// `a op b` on the host with broadcasting, computing in `compute`.
fn host_binary(name: &str, a: &Host, b: &Host, compute: DType) -> Host {
    let (f, out_of) = binary_ref(name);
    let out = out_of(compute);
    let shape = broadcast(&a.shape, &b.shape);
    // Division-like ops compute ints as floats.
    let compute = if matches!(name, "div" | "atan2") {
        out
    } else {
        compute
    };
    let data = (0..numel(&shape))
        .map(|i| {
            let idx = unravel(i, &shape);
            let x = round(compute, a.data[broadcast_source(&idx, &a.shape)]);
            let y = round(compute, b.data[broadcast_source(&idx, &b.shape)]);
            f(x, y)
        })
        .collect();
    Host::new(out, &shape, data)
}

/// Inputs that keep every op in its domain: no zero divisors, pow bases > 0
/// for floats and small exponents for ints.
fn binary_inputs(name: &str, dtype: DType, sa: &[i64], sb: &[i64], seed: u64) -> (Host, Host) {
    let mut a = Host::random(dtype, sa, seed);
    let mut b = Host::random(dtype, sb, seed + 1);
    if name == "pow" {
        if dtype.is_float() {
            a = Host::random_in(dtype, sa, seed, 0.5, 2.0);
            b = Host::random_in(dtype, sb, seed + 1, -2.0, 2.0);
        } else {
            let lo = if dtype == DType::U8 { 0.0 } else { -4.0 };
            a = Host::random_in(dtype, sa, seed, lo, 4.0);
            b = Host::random_in(dtype, sb, seed + 1, 0.0, 3.0);
        }
    }
    if matches!(name, "div" | "remainder") {
        b = b.map(dtype, |v| if v == 0.0 { 3.0 } else { v });
    }
    (a, b)
}

const ARITH: [&str; 9] = [
    "add",
    "sub",
    "mul",
    "div",
    "pow",
    "maximum",
    "minimum",
    "remainder",
    "atan2",
];
const COMPARE: [&str; 6] = ["eq", "ne", "lt", "le", "gt", "ge"];
const LOGICAL: [&str; 3] = ["logical_and", "logical_or", "logical_xor"];
const BITWISE: [&str; 3] = ["bitwise_and", "bitwise_or", "bitwise_xor"];

all_modes! {
fn binary_ops_match_the_host_reference_with_broadcasting() {
    let shapes: [(&[i64], &[i64]); 3] = [(&[4, 3], &[4, 3]), (&[3, 1, 4], &[5, 4]), (&[2, 3], &[])];
    for (k, name) in ARITH
        .iter()
        .chain(COMPARE.iter())
        .chain(LOGICAL.iter())
        .enumerate()
    {
        for dtype in numeric() {
            if *name == "atan2" && !dtype.is_float() {
                continue;
            }
            for (s, (sa, sb)) in shapes.iter().enumerate() {
                let (a, b) = binary_inputs(name, dtype, sa, sb, (k * 31 + s) as u64);
                let want = host_binary(name, &a, &b, dtype);
                let got = apply_binary(name, &a.tensor(), &b.tensor())
                    .unwrap_or_else(|e| panic!("{name} {dtype}: {e}"));
                assert_close(
                    &format!("{name}({dtype}{sa:?}, {dtype}{sb:?})"),
                    &got,
                    &want,
                );
            }
        }
    }
}
}

all_modes! {
fn bitwise_ops_work_on_ints_and_bools_only() {
    for name in BITWISE {
        for dtype in INTS.iter().copied().chain([DType::Bool]) {
            let (a, b) = binary_inputs(name, dtype, &[6], &[2, 6], 3);
            let want = host_binary(name, &a, &b, dtype);
            let got = apply_binary(name, &a.tensor(), &b.tensor()).unwrap();
            assert_close(&format!("{name}({dtype})"), &got, &want);
        }
        let f = Host::random(DType::F32, &[3], 1).tensor();
        let e = err_text(apply_binary(name, &f, &f));
        assert!(e.contains(name) && e.contains("float32"), "{e}");
    }
}
}

all_modes! {
fn bool_arithmetic_follows_pytorch() {
    let a = Host::random(DType::Bool, &[8], 11);
    let b = Host::random(DType::Bool, &[8], 12);
    // add is or, mul is and; the result stays bool.
    assert_close(
        "add(bool)",
        &a.tensor().add(&b.tensor()).unwrap(),
        &host_binary("logical_or", &a, &b, DType::Bool),
    );
    assert_close(
        "mul(bool)",
        &a.tensor().mul(&b.tensor()).unwrap(),
        &host_binary("logical_and", &a, &b, DType::Bool),
    );
    let e = err_text(a.tensor().sub(&b.tensor()));
    assert!(e.contains("sub") && e.contains("bool"), "{e}");
}
}

all_modes! {
fn mixed_dtypes_promote_like_pytorch() {
    // (lhs dtype, lhs shape, rhs dtype, rhs shape, result of torch.add)
    type Case<'a> = (DType, &'a [i64], DType, &'a [i64], DType);
    let cases: [Case; 9] = [
        (DType::I32, &[4], DType::F16, &[4], DType::F16),
        (DType::U8, &[4], DType::I8, &[4], DType::I16),
        (DType::Bool, &[4], DType::I64, &[4], DType::I64),
        (DType::F16, &[4], DType::BF16, &[4], DType::F32),
        (DType::F32, &[4], DType::F64, &[], DType::F32),
        (DType::I8, &[4], DType::I64, &[], DType::I8),
        (DType::I16, &[4], DType::F64, &[], DType::F64),
        (DType::F32, &[], DType::F64, &[], DType::F64),
        (DType::I64, &[2, 4], DType::F32, &[4], DType::F32),
    ];
    for (i, (da, sa, db, sb, want_dtype)) in cases.into_iter().enumerate() {
        let a = Host::random(da, sa, 50 + i as u64);
        let b = Host::random(db, sb, 60 + i as u64);
        let got = a.tensor().add(&b.tensor()).unwrap();
        assert_eq!(got.dtype(), want_dtype, "{da}{sa:?} + {db}{sb:?}");
        assert_close(
            &format!("{da} + {db}"),
            &got,
            &host_binary("add", &a, &b, want_dtype),
        );
        // Comparisons compute in the promoted dtype and give bools.
        let lt = a.tensor().lt(&b.tensor()).unwrap();
        assert_close(
            &format!("{da} < {db}"),
            &lt,
            &host_binary("lt", &a, &b, want_dtype),
        );
    }
}
}

all_modes! {
fn scalars_promote_only_across_categories() {
    let i8s = Host::random(DType::I8, &[5], 70);
    let t = i8s.tensor();
    // int8 + 1000 stays int8 (1000 wraps to -24, as PyTorch computes).
    let got = t.add(1000).unwrap();
    assert_close("int8 + 1000", &got, &i8s.map(DType::I8, |v| v - 24.0));
    // int8 * 2.5 is float32.
    let got = t.mul(2.5).unwrap();
    assert_close("int8 * 2.5", &got, &i8s.map(DType::F32, |v| v * 2.5));
    // float16 * 0.1 stays float16, with 0.1 rounded to float16 first.
    let h = Host::random(DType::F16, &[5], 71);
    let tenth = round(DType::F16, 0.1);
    assert_close(
        "f16 * 0.1",
        &h.tensor().mul(0.1).unwrap(),
        &h.map(DType::F16, |v| v * tenth),
    );
    // bool + 1 is int64; bool | true stays bool.
    let b = Host::random(DType::Bool, &[5], 72);
    assert_close(
        "bool + 1",
        &b.tensor().add(1).unwrap(),
        &b.map(DType::I64, |v| v + 1.0),
    );
    assert_close(
        "bool or true",
        &b.tensor().logical_or(true).unwrap(),
        &b.map(DType::Bool, |_| 1.0),
    );
    // int32 < 0.5 compares as floats.
    let i = Host::random(DType::I32, &[6], 73);
    assert_close(
        "int32 < 0.5",
        &i.tensor().lt(0.5).unwrap(),
        &i.map(DType::Bool, |v| (v < 0.5) as u8 as f64),
    );
}
}

all_modes! {
fn operators_on_references() {
    let a = Host::random(DType::F32, &[2, 3], 80);
    let b = Host::random(DType::F32, &[3], 81);
    let (ta, tb) = (a.tensor(), b.tensor());
    assert_close(
        "&a + &b",
        &(&ta + &tb).unwrap(),
        &host_binary("add", &a, &b, DType::F32),
    );
    assert_close(
        "&a - &b",
        &(&ta - &tb).unwrap(),
        &host_binary("sub", &a, &b, DType::F32),
    );
    assert_close(
        "&a * &b",
        &(&ta * &tb).unwrap(),
        &host_binary("mul", &a, &b, DType::F32),
    );
    assert_close(
        "&a / &b",
        &(&ta / &tb).unwrap(),
        &host_binary("div", &a, &b, DType::F32),
    );
    assert_close(
        "&a * 2.0",
        &(&ta * 2.0).unwrap(),
        &a.map(DType::F32, |v| v * 2.0),
    );
    assert_close(
        "1.0 - &a",
        &(1.0 - &ta).unwrap(),
        &a.map(DType::F32, |v| 1.0 - v),
    );
    assert_close(
        "2 / &a",
        &(2 / &ta).unwrap(),
        &a.map(DType::F32, |v| 2.0 / v),
    );
    assert_close("-&a", &(-&ta).unwrap(), &a.map(DType::F32, |v| -v));
    assert_close(
        "a + 3 (owned)",
        &(ta.clone() + 3).unwrap(),
        &a.map(DType::F32, |v| v + 3.0),
    );
}
}

all_modes! {
fn where_selects_with_broadcasting_and_promotion() {
    let c = Host::random(DType::Bool, &[3, 1], 90);
    let x = Host::random(DType::I32, &[4], 91);
    let y = Host::random(DType::F16, &[3, 4], 92);
    let got = Tensor::where_(&c.tensor(), &x.tensor(), &y.tensor()).unwrap();
    let shape = [3i64, 4];
    let data = (0..12)
        .map(|i| {
            let idx = unravel(i, &shape);
            if c.data[broadcast_source(&idx, &c.shape)] != 0.0 {
                x.data[broadcast_source(&idx, &x.shape)]
            } else {
                y.data[i]
            }
        })
        .collect();
    assert_close("where", &got, &Host::new(DType::F16, &shape, data));
    // A scalar branch takes the tensor's dtype (within its category).
    let got = Tensor::where_(&c.tensor(), &y.tensor(), 0.0).unwrap();
    assert_eq!(got.dtype(), DType::F16);
    for dtype in ALL {
        let x = Host::random(dtype, &[3, 4], 93);
        let got = Tensor::where_(&c.tensor(), &x.tensor(), &x.tensor()).unwrap();
        assert_close(&format!("where({dtype})"), &got, &x);
    }
    let e = err_text(Tensor::where_(&x.tensor(), &x.tensor(), &x.tensor()));
    assert!(e.contains("where") && e.contains("bool"), "{e}");
}
}

all_modes! {
fn clamp_matches_pytorch() {
    for dtype in numeric() {
        let x = Host::random(dtype, &[4, 4], 100);
        let (lo, hi) = if dtype == DType::U8 {
            (5.0, 30.0)
        } else {
            (-1.0, 2.0)
        };
        let t = x.tensor();
        assert_close(
            &format!("clamp({dtype})"),
            &t.clamp(lo as i64, hi as i64).unwrap(),
            &x.map(dtype, |v| v.max(lo).min(hi)),
        );
        assert_close(
            &format!("clamp_min({dtype})"),
            &t.clamp_min(lo as i64).unwrap(),
            &x.map(dtype, |v| v.max(lo)),
        );
        assert_close(
            &format!("clamp_max({dtype})"),
            &t.clamp_max(hi as i64).unwrap(),
            &x.map(dtype, |v| v.min(hi)),
        );
    }
    // A float bound makes an int tensor float, as torch.clamp does.
    let x = Host::random(DType::I32, &[6], 101);
    let got = x.tensor().clamp(-1.5, 2.5).unwrap();
    assert_close(
        "clamp(int32, float)",
        &got,
        &x.map(DType::F32, |v| v.clamp(-1.5, 2.5)),
    );
    // NaN stays NaN; min > max gives max.
    let mut f = Host::random(DType::F32, &[4], 102);
    f.data[1] = f64::NAN;
    assert_close(
        "clamp(nan)",
        &f.tensor().clamp(-0.5, 0.5).unwrap(),
        &f.map(
            DType::F32,
            |v| if v.is_nan() { v } else { v.clamp(-0.5, 0.5) },
        ),
    );
    assert_close(
        "clamp(lo > hi)",
        &f.tensor().clamp(1.0, -1.0).unwrap(),
        &f.map(DType::F32, |v| if v.is_nan() { v } else { -1.0 }),
    );
}
}

all_modes! {
fn cast_between_all_dtypes() {
    for from in ALL {
        for to in ALL {
            // Negative values have no uint8 image in PyTorch (it is undefined).
            let x = if to == DType::U8 && from != DType::Bool {
                Host::random_in(from, &[3, 4], 110, 0.0, 3.0)
            } else {
                Host::random(from, &[3, 4], 110)
            };
            let want = x.map(to, |v| {
                if to.is_float() || to == DType::Bool {
                    v
                } else {
                    v.trunc()
                }
            });
            let got = x.tensor().to_dtype(to).unwrap();
            assert_close(&format!("{from} -> {to}"), &got, &want);
        }
    }
}
}

all_modes! {
fn edge_values_follow_pytorch() {
    // round: halves go to the even neighbour.
    for dtype in FLOATS {
        let x = Host::new(dtype, &[6], vec![0.5, 1.5, 2.5, -0.5, -2.5, 2.25]);
        let want = Host::new(dtype, &[6], vec![0.0, 2.0, 2.0, -0.0, -2.0, 2.0]);
        assert_close(
            &format!("round({dtype})"),
            &x.tensor().round().unwrap(),
            &want,
        );
    }
    // remainder takes the divisor's sign; fmod-style results are fixed up.
    let a = Host::new(DType::F32, &[4], vec![-3.5, 3.5, -3.5, 4.0]);
    let b = Host::new(DType::F32, &[4], vec![2.0, -2.0, -2.0, 2.0]);
    let want = Host::new(DType::F32, &[4], vec![0.5, -0.5, -1.5, 0.0]);
    assert_close(
        "remainder",
        &a.tensor().remainder(&b.tensor()).unwrap(),
        &want,
    );
    let a = Host::new(DType::I32, &[4], vec![-7.0, 7.0, -7.0, 6.0]);
    let b = Host::new(DType::I32, &[4], vec![3.0, -3.0, -3.0, 3.0]);
    let want = Host::new(DType::I32, &[4], vec![2.0, -2.0, -1.0, 0.0]);
    assert_close(
        "remainder(int32)",
        &a.tensor().remainder(&b.tensor()).unwrap(),
        &want,
    );
    // sign(0) is 0, relu(-0.0) is 0, maximum propagates NaN.
    let z = Host::new(DType::F32, &[3], vec![0.0, -2.0, 3.0]);
    assert_close(
        "sign",
        &z.tensor().sign().unwrap(),
        &Host::new(DType::F32, &[3], vec![0.0, -1.0, 1.0]),
    );
    let n = Host::new(DType::F32, &[2], vec![f64::NAN, 1.0]);
    let m = Host::new(DType::F32, &[2], vec![0.0, f64::NAN]);
    assert_close(
        "maximum(nan)",
        &n.tensor().maximum(&m.tensor()).unwrap(),
        &Host::new(DType::F32, &[2], vec![f64::NAN, f64::NAN]),
    );
    // Integer division is true division.
    let i = Host::new(DType::I64, &[2], vec![7.0, -7.0]);
    assert_close(
        "7 / 2",
        &i.tensor().div(2).unwrap(),
        &Host::new(DType::F32, &[2], vec![3.5, -3.5]),
    );
}
}

all_modes! {
fn bitwise_not_flips_every_bit_of_integers_and_negates_bools() {
    for dtype in [DType::I8, DType::I16, DType::I32, DType::I64] {
        // ~x = -x - 1 in two's complement, exact at the ends of the range.
        let x = Host::new(dtype, &[4], vec![0.0, -1.0, 5.0, -128.0]);
        let got = x.tensor().bitwise_not().unwrap();
        assert_eq!(Host::of(&got), x.map(dtype, |v| -v - 1.0), "{dtype}");
    }
    let big = Tensor::from_slice(&[i64::MAX, i64::MIN, 1 << 60], &[3]).unwrap();
    assert_eq!(big.bitwise_not().unwrap().to_vec::<i64>().unwrap(), [i64::MIN, i64::MAX, !(1i64 << 60)]);
    let bytes = Host::new(DType::U8, &[3], vec![0.0, 1.0, 200.0]);
    assert_eq!(Host::of(&bytes.tensor().bitwise_not().unwrap()), bytes.map(DType::U8, |v| 255.0 - v));
    let bools = Host::new(DType::Bool, &[2], vec![0.0, 1.0]);
    assert_eq!(Host::of(&bools.tensor().bitwise_not().unwrap()), Host::new(DType::Bool, &[2], vec![1.0, 0.0]));
    let e = err_text(Host::random(DType::F32, &[2], 1).tensor().bitwise_not());
    assert!(e.contains("bitwise_not") && e.contains("float32") && e.contains("integer"), "{e}");
}
}

/// `ln |gamma(x)|`: Lanczos (g = 7, nine terms), reflected below 1/2.
fn lgamma(x: f64) -> f64 {
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    let pi = std::f64::consts::PI;
    if x < 0.5 {
        return (pi / (pi * x).sin().abs()).ln() - lgamma(1.0 - x);
    }
    let x = x - 1.0;
    let a = C[1..]
        .iter()
        .enumerate()
        .fold(C[0], |a, (i, c)| a + c / (x + i as f64 + 1.0));
    let t = x + 7.5;
    0.5 * (2.0 * pi).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The digamma function for x > 0: the recurrence up to 10, then the
/// asymptotic series.
fn digamma(mut x: f64) -> f64 {
    let mut shift = 0.0;
    while x < 10.0 {
        shift -= 1.0 / x;
        x += 1.0;
    }
    let x2 = 1.0 / (x * x);
    let series = x2
        * (1.0 / 12.0 - x2 * (1.0 / 120.0 - x2 * (1.0 / 252.0 - x2 * (1.0 / 240.0 - x2 / 132.0))));
    shift + x.ln() - 0.5 / x - series
}

all_modes! {
fn special_functions_match_the_host_reference() {
    let cases: [(&str, (f64, f64), UnaryRef); 6] = [
        ("asinh", (-3.0, 3.0), f64::asinh),
        ("acosh", (1.0, 4.0), f64::acosh),
        ("atanh", (-0.9, 0.9), f64::atanh),
        ("erfc", (-3.0, 3.0), |x| 1.0 - erf(x)),
        ("lgamma", (-3.5, 6.0), lgamma),
        ("digamma", (0.2, 6.0), digamma),
    ];
    for (i, (name, (lo, hi), f)) in cases.into_iter().enumerate() {
        for dtype in [DType::F32, DType::F64, DType::BF16] {
            let x = Host::random_in(dtype, &[4, 6], 300 + i as u64, lo, hi);
            let t = x.tensor();
            let got = match name {
                "asinh" => t.asinh(),
                "acosh" => t.acosh(),
                "atanh" => t.atanh(),
                "erfc" => t.erfc(),
                "lgamma" => t.lgamma(),
                _ => t.digamma(),
            }
            .unwrap_or_else(|e| panic!("{name} {dtype}: {e}"));
            // XLA's series are good to ~1e-13 in f64, not to the last bit.
            let tol = if dtype == DType::F64 { (1e-10, 1e-12) } else { tolerance(dtype) };
            assert_close_tol(&format!("{name}({dtype})"), &got, &x.map(dtype, f), tol);
        }
    }
    // digamma's poles as PyTorch has them: -inf at +0, +inf at -0, NaN at
    // the negative integers; lgamma is +inf at all of them.
    let poles = Host::new(DType::F32, &[4], vec![0.0, -0.0, -1.0, -3.0]).tensor();
    let psi = poles.digamma().unwrap().to_vec::<f32>().unwrap();
    assert!(psi[0] == f32::NEG_INFINITY && psi[1] == f32::INFINITY, "{psi:?}");
    assert!(psi[2].is_nan() && psi[3].is_nan(), "{psi:?}");
    let lg = poles.lgamma().unwrap().to_vec::<f32>().unwrap();
    assert!(lg.iter().all(|v| *v == f32::INFINITY), "{lg:?}");
}
}

/// Euclid on the host, as C computes it on |a| and |b|.
fn host_gcd(a: i64, b: i64) -> i64 {
    let (mut a, mut b) = (a.wrapping_abs(), b.wrapping_abs());
    while a != 0 {
        (a, b) = (b % a, a);
    }
    b
}

#[test]
fn shifts_gcd_and_lcm_are_exact_on_int64() {
    let mut rng = common::Rng::new(5);
    let a: Vec<i64> = (0..64)
        .map(|i| match i {
            0 => i64::MIN,
            1 => i64::MAX,
            2 => 0,
            _ => rng.uniform(-1e12, 1e12) as i64,
        })
        .collect();
    let shifts: Vec<i64> = (0..64).map(|i| i * 67 % 70 - 2).collect(); // -2 ..= 67
    let (ta, ts) = (
        Tensor::from_slice(&a, &[64]).unwrap(),
        Tensor::from_slice(&shifts, &[64]).unwrap(),
    );
    let left: Vec<i64> = a
        .iter()
        .zip(&shifts)
        .map(|(&x, &s)| if (0..64).contains(&s) { x << s } else { 0 })
        .collect();
    let right: Vec<i64> = a
        .iter()
        .zip(&shifts)
        .map(|(&x, &s)| x >> if (0..64).contains(&s) { s } else { 63 })
        .collect();
    assert_eq!(
        ta.bitwise_left_shift(&ts).unwrap().to_vec::<i64>().unwrap(),
        left
    );
    assert_eq!(
        ta.bitwise_right_shift(&ts)
            .unwrap()
            .to_vec::<i64>()
            .unwrap(),
        right
    );
    let b: Vec<i64> = a.iter().rev().map(|&x| x / 1000 + 7).collect();
    let tb = Tensor::from_slice(&b, &[64]).unwrap();
    let gcd: Vec<i64> = a.iter().zip(&b).map(|(&x, &y)| host_gcd(x, y)).collect();
    assert_eq!(ta.gcd(&tb).unwrap().to_vec::<i64>().unwrap(), gcd);
    let lcm: Vec<i64> = a
        .iter()
        .zip(&b)
        .zip(&gcd)
        .map(|((&x, &y), &g)| {
            if g == 0 {
                0
            } else {
                (x.wrapping_div(g)).wrapping_mul(y).wrapping_abs()
            }
        })
        .collect();
    assert_eq!(ta.lcm(&tb).unwrap().to_vec::<i64>().unwrap(), lcm);
    // Consecutive Fibonacci numbers take Euclid's most steps.
    let fib = Tensor::from_slice(&[7540113804746346429i64, 1], &[2]).unwrap();
    let next = Tensor::from_slice(&[4660046610375530309i64, 0], &[2]).unwrap();
    assert_eq!(fib.gcd(&next).unwrap().to_vec::<i64>().unwrap(), [1, 1]);
    let e = err_text(
        Host::random(DType::F32, &[2], 1)
            .tensor()
            .gcd(&ta.narrow(0, 0, 2).unwrap()),
    );
    assert!(
        e.contains("gcd") && e.contains("float32") && e.contains("integer"),
        "{e}"
    );
    let bools = Host::new(DType::Bool, &[2], vec![0.0, 1.0]).tensor();
    assert!(err_text(bools.bitwise_left_shift(&bools)).contains("bool"));
}
