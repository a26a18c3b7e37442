//! Bad input: each kind of mistake gives an error naming the op, what it got
//! and what it expected; nothing panics, and the next op works.

mod common;

use common::*;
use eagertpu::{DType, Tensor};

/// After an error, the runtime still computes correctly.
fn next_op_works() {
    let a = Host::random(DType::F32, &[2, 3], 1);
    let got = (&a.tensor() * 2.0).unwrap();
    assert_close("2a after an error", &got, &a.map(DType::F32, |v| 2.0 * v));
}

fn expect_error<T: std::fmt::Debug>(r: eagertpu::Result<T>, must_contain: &[&str]) {
    let e = err_text(r);
    for part in must_contain {
        assert!(e.contains(part), "error {e:?} should mention {part:?}");
    }
    next_op_works();
}

#[test]
fn shape_mismatch() {
    let a = Tensor::zeros(&[2, 3], DType::F32).unwrap();
    let b = Tensor::zeros(&[4], DType::F32).unwrap();
    expect_error(a.add(&b), &["add", "[2, 3]", "[4]", "broadcast"]);
    expect_error(&a * &b, &["mul", "[2, 3]", "[4]"]);
    let m = Tensor::zeros(&[3, 5], DType::F32).unwrap();
    expect_error(
        m.matmul(&a),
        &["matmul", "float32[3, 5]", "float32[2, 3]", "last dim"],
    );
    expect_error(
        Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[2, 2]),
        &["tensor", "3 elements", "4 elements"],
    );
}

#[test]
fn dtype_mismatch_and_unsupported_dtypes() {
    let f = Tensor::zeros(&[2, 2], DType::F32).unwrap();
    let d = Tensor::zeros(&[2, 2], DType::F64).unwrap();
    let i = Tensor::zeros(&[2, 2], DType::I32).unwrap();
    let b = Tensor::zeros(&[2, 2], DType::Bool).unwrap();
    expect_error(f.matmul(&d), &["matmul", "float32", "float64", "same"]);
    expect_error(i.mean_all(), &["mean", "int32", "floating-point"]);
    expect_error(
        f.bitwise_and(&f),
        &["bitwise_and", "float32", "integer or bool"],
    );
    expect_error(b.neg(), &["neg", "bool"]);
    expect_error(
        f.softmax(0).and_then(|_| i.softmax(0)),
        &["softmax", "int32"],
    );
    expect_error(Tensor::where_(&f, &f, &f), &["where", "float32", "bool"]);
    expect_error(
        f.to_vec::<i64>(),
        &["to_vec", "float32", "int64", "to_dtype"],
    );
}

#[test]
fn bad_dims() {
    let a = Tensor::zeros(&[2, 3], DType::F32).unwrap();
    expect_error(a.sum(&[5], false), &["sum", "dim 5", "2 dims", "[-2, 1]"]);
    expect_error(a.softmax(-3), &["softmax", "dim -3"]);
    expect_error(a.permute(&[0, 0]), &["permute", "more than once"]);
    expect_error(a.transpose(0, 2), &["transpose", "dim 2"]);
    expect_error(a.unsqueeze(4), &["unsqueeze", "dim 4"]);
}

#[test]
fn index_out_of_range() {
    // Tensor indices are checked on the host in debug mode.
    let _debug = in_mode(eagertpu::Mode::Debug);
    let a = Tensor::zeros(&[2, 3], DType::F32).unwrap();
    expect_error(a.select(1, 3), &["select", "index 3", "size 3"]);
    expect_error(a.narrow(0, 1, 5), &["narrow", "exceeds", "size 2"]);
    let idx = Tensor::from_slice(&[0i64, 7], &[2]).unwrap();
    expect_error(
        a.index_select(1, &idx),
        &["index_select", "index 7", "size 3", "tests/errors.rs"],
    );
    let neg = Tensor::from_slice(&[[0i64, 1], [-1, 0]].concat(), &[2, 2]).unwrap();
    expect_error(a.gather(1, &neg), &["gather", "index -1"]);
}

#[test]
fn reshape_to_a_different_element_count() {
    let a = Tensor::zeros(&[2, 3], DType::F32).unwrap();
    expect_error(
        a.reshape(&[4]),
        &["reshape", "[2, 3]", "6 elements", "[4]", "4 elements"],
    );
    expect_error(a.reshape(&[-1, 4]), &["reshape", "[2, 3]", "[-1, 4]"]);
    expect_error(a.reshape(&[-1, -1]), &["reshape", "more than one -1"]);
    expect_error(a.expand(&[4, 3]), &["expand", "float32[2, 3]", "[4, 3]"]);
}

#[test]
fn errors_from_deferred_work_name_the_callers_line() {
    let _debug = in_mode(eagertpu::Mode::Debug);
    let a = Tensor::zeros(&[3], DType::F32).unwrap();
    let idx = Tensor::from_slice(&[5i64], &[1]).unwrap();
    let line = line!() + 1;
    let e = err_text(a.index_select(0, &idx));
    assert!(e.contains(&format!("tests/errors.rs:{line}")), "{e}");
    assert!(e.contains("index_select(float32[3], int64[1])"), "{e}");
    next_op_works();
}

#[test]
fn many_errors_in_a_row_leave_the_runtime_working() {
    let a = Tensor::zeros(&[2, 3], DType::F32).unwrap();
    for _ in 0..100 {
        assert!(a.reshape(&[7]).is_err());
        assert!(a.sum(&[9], true).is_err());
        assert!(a.to_vec::<u8>().is_err());
    }
    next_op_works();
}
