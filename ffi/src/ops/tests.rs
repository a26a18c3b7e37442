//! An op name not in its family's table is an error listing the table's
//! names, and the next call works.

use std::ffi::c_void;

use super::*;
use crate::handles::{etpu_tensor_free, etpu_tensor_from_host};
use crate::{ETPU_INVALID_ARGUMENT, ETPU_OK, Status, last_error};

const ORIGIN: *const c_char = c"ops.rs:test".as_ptr();

/// The call failed as an unknown `family` op named "median", listing `names`.
#[track_caller]
fn unknown_median(status: Status, family: &str, names: impl Iterator<Item = &'static str>) {
    unknown_op(status, family, "median", names)
}

/// The call failed as an unknown `family` op named `op`, listing `names`.
#[track_caller]
fn unknown_op(status: Status, family: &str, op: &str, names: impl Iterator<Item = &'static str>) {
    assert_eq!(status, ETPU_INVALID_ARGUMENT, "{family}");
    let names: Vec<&str> = names.collect();
    let want = format!(
        "unknown {family} op \"{op}\" (expected one of: {})",
        names.join(", ")
    );
    let e = last_error();
    assert!(e.contains(&want), "{e:?} lacks {want:?}");
}

#[test]
fn an_unknown_op_name_is_an_error_listing_the_table() {
    let (v, shape) = ([1.0f64, 2.0, 3.0, 4.0], [2i64, 2]);
    let (mut x, mut out, mut indices) = (TensorHandle(0), TensorHandle(0), TensorHandle(0));
    let (dims, op) = ([1i64], c"median".as_ptr());
    // SAFETY: every pointer is valid for the lengths passed; `x` and
    // `out` are handles this test owns, freed once.
    unsafe {
        let (data, bytes) = (v.as_ptr().cast::<c_void>(), size_of_val(&v));
        assert_eq!(
            etpu_tensor_from_host(0, 9, shape.as_ptr(), 2, data, bytes, ORIGIN, &mut x),
            ETPU_OK
        );
        let status = etpu_reduce(op, x, dims.as_ptr(), 1, false, ORIGIN, &mut out);
        unknown_median(status, "reduction", Reduce::ALL.iter().map(|r| r.name()));
        let status = etpu_argreduce(op, x, 1, true, false, ORIGIN, &mut out);
        unknown_median(
            status,
            "arg-reduction",
            ArgReduce::ALL.iter().map(|r| r.name()),
        );
        let status = etpu_cumulative(op, x, 1, ORIGIN, &mut out);
        unknown_median(
            status,
            "cumulative",
            Cumulative::ALL.iter().map(|c| c.name()),
        );
        let status = etpu_extreme_dim(op, x, 1, false, ORIGIN, &mut out, &mut indices);
        unknown_median(status, "extreme", Extreme::ALL.iter().map(|e| e.name()));
        // Median is an order statistic: ask those for a reduction's name.
        let sum = c"sum".as_ptr();
        let status = etpu_order_statistic(sum, 1, x, 1, false, ORIGIN, &mut out, &mut indices);
        unknown_op(
            status,
            "order statistic",
            "sum",
            OrderStatisticKind::ALL.iter().map(|k| k.name()),
        );
        let status = etpu_pointwise_loss(op, 1.0, x, x, TensorHandle(0), 1, ORIGIN, &mut out);
        unknown_median(
            status,
            "pointwise loss",
            PointwiseLossKind::ALL.iter().map(|k| k.name()),
        );
        // The next call works.
        let status = etpu_reduce(sum, x, dims.as_ptr(), 1, false, ORIGIN, &mut out);
        assert_eq!(status, ETPU_OK, "{}", last_error());
        assert_eq!(etpu_tensor_free(out), ETPU_OK);
        assert_eq!(etpu_tensor_free(x), ETPU_OK);
    }
}
