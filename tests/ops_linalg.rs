//! The Cholesky factor, its `info`, the triangular solve and the LU
//! factorization with its solve, against host references computed here in
//! plain f64 loops (the textbook unblocked Cholesky, forward and back
//! substitution, getrf's partial pivoting): batches, both triangles, both
//! sides, unit diagonals, transposes, failures at every order, and errors.
//! The orthogonal decompositions are in `ops_orthogonal.rs`, LDL^T in
//! `ops_ldl.rs`.

mod common;

use common::*;
use eagertpu::{DType, Tensor};

/// n x n matrices `a` (row-major) of a batch, each symmetric
/// positive-definite: `m m^T + n I` for a random `m`.
fn spd(batch: usize, n: usize, seed: u64) -> Host {
    let m = Host::random(DType::F64, &[(batch * n * n) as i64], seed);
    let mut data = vec![0.0; batch * n * n];
    for b in 0..batch {
        let at = |i: usize, j: usize| m.data[b * n * n + i * n + j];
        for i in 0..n {
            for j in 0..n {
                let dot: f64 = (0..n).map(|k| at(i, k) * at(j, k)).sum();
                data[b * n * n + i * n + j] = dot + if i == j { n as f64 } else { 0.0 };
            }
        }
    }
    Host::new(DType::F32, &[batch as i64, n as i64, n as i64], data)
}

/// The lower factor of one matrix by the textbook loop, and LAPACK's info:
/// 0, or the order of the first leading minor that is not positive-definite.
fn host_cholesky(a: &[f64], n: usize) -> (Vec<f64>, i32) {
    let mut l = vec![0.0; n * n];
    for j in 0..n {
        let pivot = a[j * n + j] - (0..j).map(|k| l[j * n + k] * l[j * n + k]).sum::<f64>();
        if pivot <= 0.0 || pivot.is_nan() {
            return (l, j as i32 + 1);
        }
        l[j * n + j] = pivot.sqrt();
        for i in j + 1..n {
            let s = a[i * n + j] - (0..j).map(|k| l[i * n + k] * l[j * n + k]).sum::<f64>();
            l[i * n + j] = s / l[j * n + j];
        }
    }
    (l, 0)
}

#[test]
fn cholesky_matches_the_textbook_factor_in_both_triangles() {
    let (batch, n) = (3, 5);
    let a = spd(batch, n, 11);
    let mut lower = Vec::new();
    for b in 0..batch {
        let (l, info) = host_cholesky(&a.data[b * n * n..(b + 1) * n * n], n);
        assert_eq!(info, 0);
        lower.extend(l);
    }
    let shape = [batch as i64, n as i64, n as i64];
    let want_lower = Host::new(DType::F32, &shape, lower.clone());
    let t = a.tensor();
    assert_close_tol(
        "cholesky",
        &t.cholesky(false).unwrap(),
        &want_lower,
        (1e-4, 1e-4),
    );
    // The upper factor is the lower one transposed.
    let mut upper = vec![0.0; lower.len()];
    for b in 0..batch {
        for i in 0..n {
            for j in 0..n {
                upper[b * n * n + j * n + i] = lower[b * n * n + i * n + j];
            }
        }
    }
    let want_upper = Host::new(DType::F32, &shape, upper);
    assert_close_tol(
        "cholesky upper",
        &t.cholesky(true).unwrap(),
        &want_upper,
        (1e-4, 1e-4),
    );
    // Only the named triangle is read: garbage in the other changes nothing.
    let garbage = t
        .tril(0)
        .unwrap()
        .add(&t.triu(1).unwrap().mul(100.0).unwrap())
        .unwrap();
    assert_close_tol(
        "cholesky of tril",
        &garbage.cholesky(false).unwrap(),
        &want_lower,
        (1e-4, 1e-4),
    );
    let (_, info) = t.cholesky_ex(false).unwrap();
    assert_eq!(info.dtype(), DType::I32);
    assert_eq!(info.to_vec::<i32>().unwrap(), vec![0; batch]);
}

#[test]
fn cholesky_info_names_the_first_failing_minor_at_every_order() {
    let n = 9;
    let a = spd(n, n, 5);
    // Matrix b fails first at order b + 1: its pivot b made negative.
    let mut data = a.data.clone();
    for b in 0..n {
        data[b * n * n + b * n + b] = -50.0;
    }
    let mut want = Vec::new();
    for b in 0..n {
        want.push(host_cholesky(&data[b * n * n..(b + 1) * n * n], n).1);
    }
    assert_eq!(
        want,
        (1..=n as i32).collect::<Vec<_>>(),
        "the host reference"
    );
    let failing = Host::new(DType::F32, &a.shape, data).tensor();
    for upper in [false, true] {
        let (_, info) = failing.cholesky_ex(upper).unwrap();
        assert_eq!(info.to_vec::<i32>().unwrap(), want, "upper {upper}");
    }
    // A zero pivot fails too.
    let zero =
        Tensor::from_slice(&[1.0f32, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0], &[3, 3]).unwrap();
    let (_, info) = zero.cholesky_ex(false).unwrap();
    assert_eq!(info.to_vec::<i32>().unwrap(), vec![2]);
}

/// x with op(a) x = b (left) or x op(a) = b, by substitution on the host.
#[allow(clippy::too_many_arguments)]
fn host_solve(
    a: &[f64],
    b: &[f64],
    n: usize,
    k: usize,
    upper: bool,
    left: bool,
    unit: bool,
    transpose: bool,
) -> Vec<f64> {
    // op(a) as a dense matrix holding only its triangle.
    let mut m = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            let keep = if upper { j >= i } else { j <= i };
            let v = if i == j && unit {
                1.0
            } else if keep {
                a[i * n + j]
            } else {
                0.0
            };
            if transpose {
                m[j * n + i] = v
            } else {
                m[i * n + j] = v
            }
        }
    }
    let lower_now = upper == transpose;
    // Left: solve m x = b column by column; right: x m = b is m^T x^T = b^T.
    let mm: Vec<f64> = if left {
        m
    } else {
        (0..n * n).map(|p| m[(p % n) * n + p / n]).collect()
    };
    let lower_solve = if left { lower_now } else { !lower_now };
    let mut x = vec![0.0; n * k];
    for c in 0..k {
        let rhs = |i: usize| if left { b[i * k + c] } else { b[c * n + i] };
        let mut col = vec![0.0; n];
        let order: Vec<usize> = if lower_solve {
            (0..n).collect()
        } else {
            (0..n).rev().collect()
        };
        for &i in &order {
            let s: f64 = (0..n)
                .filter(|&j| j != i)
                .map(|j| mm[i * n + j] * col[j])
                .sum();
            col[i] = (rhs(i) - s) / mm[i * n + i];
        }
        for i in 0..n {
            if left {
                x[i * k + c] = col[i]
            } else {
                x[c * n + i] = col[i]
            }
        }
    }
    x
}

#[test]
fn solve_triangular_matches_substitution_on_every_side_and_triangle() {
    let (n, k) = (4, 3);
    let mut a = Host::random(DType::F32, &[n as i64, n as i64], 3);
    for i in 0..n {
        a.data[i * n + i] += 4.0f64.copysign(a.data[i * n + i]);
    }
    for (upper, left, unit, transpose) in [
        (false, true, false, false),
        (true, true, false, false),
        (false, false, false, false),
        (true, false, true, false),
        (false, true, false, true),
        (true, false, false, true),
        (false, true, true, true),
    ] {
        let b_shape: [i64; 2] = if left {
            [n as i64, k as i64]
        } else {
            [k as i64, n as i64]
        };
        let b = Host::random(DType::F32, &b_shape, 9);
        let want = host_solve(&a.data, &b.data, n, k, upper, left, unit, transpose);
        let got = a
            .tensor()
            .solve_triangular(&b.tensor(), upper, left, unit, transpose);
        let what = format!("solve upper {upper} left {left} unit {unit} transpose {transpose}");
        check_tol(
            &what,
            got,
            &Host::new(DType::F32, &b_shape, want),
            (1e-4, 1e-4),
        );
    }
    // Batch dims broadcast: one matrix against a batch of right-hand sides.
    let b = Host::random(DType::F32, &[2, n as i64, k as i64], 4);
    let got = a
        .tensor()
        .solve_triangular(&b.tensor(), false, true, false, false)
        .unwrap();
    assert_eq!(got.shape(), &[2, n as i64, k as i64]);
    for i in 0..2 {
        let want = host_solve(
            &a.data,
            &b.data[i * n * k..(i + 1) * n * k],
            n,
            k,
            false,
            true,
            false,
            false,
        );
        let part = got.select(0, i as i64).unwrap();
        assert_close_tol(
            "broadcast solve",
            &part,
            &Host::new(DType::F32, &[n as i64, k as i64], want),
            (1e-4, 1e-4),
        );
    }
}

#[test]
fn bad_input_names_the_op_and_what_it_expected() {
    let rect = Tensor::from_slice(&[1.0f32; 6], &[2, 3]).unwrap();
    assert_err(rect.cholesky(false), "cholesky", &["[2, 3]", "square"]);
    let ints = Tensor::from_slice(&[1i64, 0, 0, 1], &[2, 2]).unwrap();
    assert_err(
        ints.cholesky_ex(false),
        "cholesky",
        &["int64", "float32 or float64"],
    );
    let eye = Tensor::from_slice(&[1.0f32, 0.0, 0.0, 1.0], &[2, 2]).unwrap();
    let b = Tensor::from_slice(&[1.0f32; 3], &[3, 1]).unwrap();
    assert_err(
        eye.solve_triangular(&b, false, true, false, false),
        "triangular_solve",
        &["2 rows"],
    );
    let b64 = Tensor::from_slice(&[1.0f64; 2], &[2, 1]).unwrap();
    assert_err(
        eye.solve_triangular(&b64, false, true, false, false),
        "triangular_solve",
        &["float32", "float64"],
    );
}

/// LAPACK's getrf by the textbook loop (partial pivoting, the first of equal
/// candidates): (factors, 1-based pivots, info).
fn host_lu(a: &[f64], m: usize, n: usize) -> (Vec<f64>, Vec<i32>, i32) {
    let mut a = a.to_vec();
    let (mut pivots, mut info) = (Vec::new(), 0);
    for k in 0..m.min(n) {
        let mut p = k;
        for i in k + 1..m {
            if a[i * n + k].abs() > a[p * n + k].abs() {
                p = i;
            }
        }
        pivots.push(p as i32 + 1);
        for j in 0..n {
            a.swap(k * n + j, p * n + j);
        }
        let pivot = a[k * n + k];
        if pivot == 0.0 {
            if info == 0 {
                info = k as i32 + 1;
            }
            continue;
        }
        for i in k + 1..m {
            let l = a[i * n + k] / pivot;
            a[i * n + k] = l;
            for j in k + 1..n {
                a[i * n + j] -= l * a[k * n + j];
            }
        }
    }
    (a, pivots, info)
}

#[test]
fn lu_matches_getrf_on_square_wide_tall_and_singular_matrices() {
    for (m, n) in [(4, 4), (3, 5), (5, 3), (1, 1)] {
        let a = Host::random(DType::F64, &[2, m as i64, n as i64], (m * 10 + n) as u64);
        let (factors, pivots, info) = a.tensor().lu_factor_ex().unwrap();
        let mut want_f = Vec::new();
        let mut want_p = Vec::new();
        for b in 0..2 {
            let (f, p, i) = host_lu(&a.data[b * m * n..(b + 1) * m * n], m, n);
            assert_eq!(i, 0);
            want_f.extend(f);
            want_p.extend(p);
        }
        assert_close_tol(
            "lu factors",
            &factors,
            &Host::new(DType::F64, &a.shape, want_f),
            (1e-9, 1e-9),
        );
        assert_eq!(pivots.to_vec::<i32>().unwrap(), want_p, "{m}x{n}");
        assert_eq!(info.to_vec::<i32>().unwrap(), vec![0, 0]);
    }
    // Rows 0 and 1 are parallel: the last step meets a zero pivot.
    let singular = [1.0, 2.0, 3.0, 2.0, 4.0, 6.0, 1.0, 0.0, 1.0];
    let (f, p, i) = host_lu(&singular, 3, 3);
    let t = Tensor::from_slice(&singular, &[3, 3]).unwrap();
    let (factors, pivots, info) = t.lu_factor_ex().unwrap();
    assert_eq!(info.to_vec::<i32>().unwrap(), vec![i]);
    assert_eq!(i, 3);
    assert_eq!(pivots.to_vec::<i32>().unwrap(), p);
    assert_close_tol(
        "singular lu",
        &factors,
        &Host::new(DType::F64, &[3, 3], f),
        (1e-12, 1e-12),
    );
}

#[test]
fn lu_solve_and_the_permutation_solve_what_they_should() {
    let n = 5;
    let mut a = Host::random(DType::F64, &[n as i64, n as i64], 21);
    for i in 0..n {
        a.data[i * n + i] += 3.0;
    }
    let t = a.tensor();
    let (factors, pivots, _) = t.lu_factor_ex().unwrap();
    // a[perm] == l @ u, the host's permutation from the host's pivots.
    let (_, host_pivots, _) = host_lu(&a.data, n, n);
    let mut perm: Vec<i32> = (0..n as i32).collect();
    for (i, &p) in host_pivots.iter().enumerate() {
        perm.swap(i, p as usize - 1);
    }
    assert_eq!(
        pivots
            .lu_permutation(n as i64)
            .unwrap()
            .to_vec::<i32>()
            .unwrap(),
        perm
    );
    // Solutions checked by multiplying back on the host.
    let b = Host::random(DType::F64, &[n as i64, 2], 8);
    for (left, adjoint) in [(true, false), (true, true), (false, false), (false, true)] {
        let rhs = if left {
            b.clone()
        } else {
            Host::new(DType::F64, &[2, n as i64], b.data.clone())
        };
        let x = Host::of(
            &factors
                .lu_solve(&pivots, &rhs.tensor(), left, adjoint)
                .unwrap(),
        );
        let m = |i: usize, j: usize| {
            if adjoint {
                a.data[j * n + i]
            } else {
                a.data[i * n + j]
            }
        };
        for r in 0..2 {
            for i in 0..n {
                let got: f64 = if left {
                    (0..n).map(|j| m(i, j) * x.data[j * 2 + r]).sum()
                } else {
                    (0..n).map(|j| x.data[r * n + j] * m(j, i)).sum()
                };
                let want = if left {
                    rhs.data[i * 2 + r]
                } else {
                    rhs.data[r * n + i]
                };
                assert!(
                    (got - want).abs() < 1e-9,
                    "left {left} adjoint {adjoint}: {got} vs {want}"
                );
            }
        }
    }
}
