//! Binary elementwise ops against host references: arithmetic, comparisons,
//! logical and bitwise ops with broadcasting and PyTorch's type promotion,
//! `where`, `clamp`, and int64 shifts, gcd and lcm.

mod common;

use common::*;
use eagertpu::{DType, Tensor};

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
