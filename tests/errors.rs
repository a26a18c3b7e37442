//! Bad input: each kind of mistake gives an error naming the op, what it got
//! and what it expected; nothing panics, and the next op works.

mod common;

use common::*;
use eagertpu::{DType, Reduction, Tensor};

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

/// Reductions, softmax and matmul refuse bad dims and dtypes, naming the op.
#[test]
fn bad_reduction_and_nn_input_is_an_error_naming_the_op() {
    let x = Host::random(DType::F32, &[2, 3, 4], 1).tensor();
    let ints = Host::random(DType::I32, &[2, 3], 2).tensor();
    let range = &["out of range"][..];
    assert_err(x.sum(&[3], false), "sum", &["dim 3", "out of range"]);
    assert_err(x.sum(&[-4], true), "sum", &["dim -4", "out of range"]);
    assert_err(x.sum(&[0, -3], false), "sum", &["more than once"]);
    assert_err(x.mean(&[5], false), "mean", range);
    assert_err(x.prod(&[3], false), "prod", range);
    assert_err(x.max(&[7], false), "amax", range);
    assert_err(x.min(&[-9], false), "amin", range);
    assert_err(x.var(&[3], 1, false), "var", range);
    assert_err(
        x.logsumexp(&[1, 1], false),
        "logsumexp",
        &["more than once"],
    );
    assert_err(
        Tensor::scalar(1.0f32).unwrap().sum(&[1], false),
        "sum",
        range,
    );
    assert_err(ints.mean(&[0], false), "mean", &["int32", "floating"]);
    assert_err(x.argmax(Some(3), false), "argmax", range);
    assert_err(x.argmin(Some(-4), true), "argmin", range);
    assert_err(x.softmax(3), "softmax", range);
    assert_err(x.log_softmax(-4), "log_softmax", range);
    assert_err(ints.softmax(0), "softmax", &["int32"]);

    let m = |s: &[i64], d| Host::random(d, s, 3).tensor();
    let (f, d, b) = (DType::F32, DType::F64, DType::Bool);
    let dims = &["(3)", "(4)"][..];
    assert_err(m(&[2, 3], f).matmul(&m(&[4, 5], f)), "matmul", dims);
    assert_err(m(&[3], f).matmul(&m(&[4], f)), "matmul", dims);
    assert_err(
        m(&[2, 3, 4], f).matmul(&m(&[3, 4, 5], f)),
        "matmul",
        &["broadcast"],
    );
    assert_err(
        m(&[2, 3], f).matmul(&m(&[3, 2], d)),
        "matmul",
        &["float32", "float64"],
    );
    assert_err(m(&[2, 3], b).matmul(&m(&[3, 2], b)), "matmul", &["bool"]);
    assert_err(m(&[], f).matmul(&m(&[3], f)), "matmul", &["1-d"]);

    let ln =
        |x: &Tensor, n: &[i64], w: Option<&Tensor>, b: Option<&Tensor>| x.layer_norm(n, w, b, 1e-5);
    let shape = &["normalized_shape"][..];
    assert_err(ln(&x, &[3], None, None), "layer_norm", shape);
    assert_err(ln(&x, &[2, 3, 4, 1], None, None), "layer_norm", shape);
    assert_err(ln(&x, &[], None, None), "layer_norm", shape);
    assert_err(
        ln(&x, &[4], Some(&m(&[3], f)), None),
        "layer_norm",
        &["weight"],
    );
    assert_err(
        ln(&x, &[4], None, Some(&m(&[4], d))),
        "layer_norm",
        &["float64"],
    );
    assert_err(ln(&ints, &[3], None, None), "layer_norm", &["int32"]);

    let logits = m(&[4, 3], f);
    let target = |v: &[i64]| Tensor::from_slice(v, &[v.len() as i64]).unwrap();
    let ce = "cross_entropy";
    assert_err(
        logits.cross_entropy(&m(&[4], f)),
        ce,
        &["target", "float32"],
    );
    assert_err(
        logits.cross_entropy(&target(&[0, 1, 2, 0, 1])),
        ce,
        &["target"],
    );
    assert_err(
        logits.cross_entropy(&m(&[4, 3], DType::I64)),
        ce,
        &["target"],
    );
    assert_err(
        m(&[2, 4, 3], f).cross_entropy(&target(&[0, 1])),
        ce,
        &["input"],
    );
    assert_err(ints.cross_entropy(&target(&[0, 1])), ce, &["int32"]);
    // In debug mode class indices are checked on the host: C and negative
    // ones (other than the ignored -100) are out of range, and the next op
    // still works.
    let _debug = in_mode(eagertpu::Mode::Debug);
    assert_err(
        logits.cross_entropy(&target(&[0, 3, 1, 2])),
        ce,
        &["out of range", "3"],
    );
    let r = logits.cross_entropy_with(&target(&[0, 1, -5, 2]), Reduction::None);
    assert_err(r, ce, &["out of range", "-5"]);
    let r = m(&[3], f).cross_entropy(&Tensor::scalar(3i64).unwrap());
    assert_err(r, ce, &["out of range", "3"]);
    // The next op works: mean cross-entropy over the rows not ignored.
    let h = Host::random(f, &[4, 3], 3);
    let (mut total, mut n) = (0.0, 0.0);
    for (row, t) in [(0usize, 0usize), (1, 2), (3, 1)] {
        let v = &h.data[row * 3..row * 3 + 3];
        let lse = v.iter().map(|x| x.exp()).sum::<f64>().ln();
        total += lse - v[t];
        n += 1.0;
    }
    let got = logits
        .cross_entropy(&target(&[0, 2, -100, 1]))
        .unwrap()
        .item::<f32>()
        .unwrap();
    assert!(
        (got as f64 - total / n).abs() < 1e-5,
        "cross_entropy after an error: {got}, expected {}",
        total / n
    );
}

/// A chunk whose program fails to compile is run op by op to find the op,
/// and a read gets the compile's own error at that op's line, in every mode:
/// also where an op reads a result no one holds (a number operand, the
/// product feeding a sum), which has no value of its own to wait on. (An
/// unknown XLA option fails every compile; test children have no disk
/// cache.)
#[test]
fn a_chunk_that_fails_to_compile_gives_the_compile_error_at_the_op() {
    if !body_runs_here(
        "a_chunk_that_fails_to_compile_gives_the_compile_error_at_the_op",
        &[("EAGERTPU_XLA_OPTIONS", "xla_cpu_no_such_option=true")],
    ) {
        return;
    }
    let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[4]).unwrap();
    for mode in [
        eagertpu::Mode::Debug,
        eagertpu::Mode::Strict,
        eagertpu::Mode::Fused,
    ] {
        let _mode = in_mode(mode);
        for round in 0..3 {
            let line = line!() + 1;
            let sum = (&x * 2.0).and_then(|p| p.sum(&[0], false));
            let e = err_text(sum.and_then(|s| s.to_vec::<f32>()));
            for part in [
                "No such compile option",
                "xla_cpu_no_such_option",
                &format!("tests/errors.rs:{line}"),
            ] {
                assert!(
                    e.contains(part),
                    "{mode:?}, round {round}: {e:?} should mention {part:?}"
                );
            }
            assert!(
                !e.contains("internal error"),
                "{mode:?}, round {round}: {e}"
            );
        }
    }
}
