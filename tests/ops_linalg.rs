//! The Cholesky factor, its `info` and the triangular solve against host
//! references computed here in plain f64 loops (the textbook unblocked
//! Cholesky, forward and back substitution): batches, both triangles, both
//! sides, unit diagonals, transposes, failures at every order, and errors.

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

/// `a` [m, n] row-major times `b` [n, p] on the host.
fn host_matmul(a: &[f64], b: &[f64], m: usize, n: usize, p: usize) -> Vec<f64> {
    let mut out = vec![0.0; m * p];
    for i in 0..m {
        for j in 0..p {
            out[i * p + j] = (0..n).map(|k| a[i * n + k] * b[k * p + j]).sum();
        }
    }
    out
}

fn host_transpose(a: &[f64], m: usize, n: usize) -> Vec<f64> {
    (0..m * n).map(|p| a[(p % m) * n + p / m]).collect()
}

#[test]
fn qr_gives_orthonormal_q_upper_r_and_their_product() {
    for (m, n, complete) in [(5, 3, false), (5, 3, true), (3, 5, false), (4, 4, true)] {
        let a = Host::random(DType::F64, &[m as i64, n as i64], (m * 7 + n) as u64);
        let (q, r) = a.tensor().qr(complete).unwrap();
        let k = if complete { m } else { m.min(n) };
        assert_eq!(q.shape(), &[m as i64, k as i64]);
        assert_eq!(r.shape(), &[k as i64, n as i64]);
        let (q, r) = (Host::of(&q), Host::of(&r));
        // q^T q = I, r upper triangular, q r = a: each computed on the host.
        let qtq = host_matmul(&host_transpose(&q.data, m, k), &q.data, k, m, k);
        for i in 0..k {
            for j in 0..k {
                let want = if i == j { 1.0 } else { 0.0 };
                assert!(
                    (qtq[i * k + j] - want).abs() < 1e-12,
                    "{m}x{n}: (q^T q)[{i},{j}] = {}",
                    qtq[i * k + j]
                );
            }
        }
        for i in 0..k {
            for j in 0..i.min(n) {
                assert_eq!(r.data[i * n + j], 0.0, "r below the diagonal");
            }
        }
        let qr = host_matmul(&q.data, &r.data, m, k, n);
        for (got, want) in qr.iter().zip(&a.data) {
            assert!(
                (got - want).abs() < 1e-12,
                "{m}x{n} complete {complete}: q r = {got}, a = {want}"
            );
        }
    }
}

#[test]
fn ormqr_multiplies_by_the_q_it_stands_for() {
    let (m, n) = (5, 3);
    let a = Host::random(DType::F64, &[m as i64, n as i64], 2).tensor();
    let (factors, tau) = a.geqrf().unwrap();
    let q = Host::of(&factors.householder_product(&tau).unwrap()); // m x n
    // The full q: the reflectors applied to the m x m identity.
    let eye = a.device().eye(m as i64, m as i64, DType::F64).unwrap();
    let full = Host::of(&factors.ormqr(&tau, &eye, true, false).unwrap());
    for i in 0..m {
        for j in 0..n {
            assert!((full.data[i * m + j] - q.data[i * n + j]).abs() < 1e-12);
        }
    }
    let c = Host::random(DType::F64, &[m as i64, 2], 3);
    let ct = Host::new(DType::F64, &[2, m as i64], host_transpose(&c.data, m, 2));
    let qt = host_transpose(&full.data, m, m);
    for (left, transpose) in [(true, false), (true, true), (false, false), (false, true)] {
        let op_q = if transpose { &qt } else { &full.data };
        let (input, want) = if left {
            (&c, host_matmul(op_q, &c.data, m, m, 2))
        } else {
            (&ct, host_matmul(&ct.data, op_q, 2, m, m))
        };
        let got = Host::of(
            &factors
                .ormqr(&tau, &input.tensor(), left, transpose)
                .unwrap(),
        );
        for (g, w) in got.data.iter().zip(&want) {
            assert!(
                (g - w).abs() < 1e-12,
                "left {left} transpose {transpose}: {g} vs {w}"
            );
        }
    }
}

/// A random n x n orthogonal matrix (row-major), a product of Givens
/// rotations by random angles over every pair of rows.
fn host_orthogonal(n: usize, seed: u64) -> Vec<f64> {
    let mut rng = Rng::new(seed);
    let mut q: Vec<f64> = (0..n * n)
        .map(|p| if p % (n + 1) == 0 { 1.0 } else { 0.0 })
        .collect();
    for i in 0..n {
        for j in i + 1..n {
            let (s, c) = rng.uniform(0.0, std::f64::consts::TAU).sin_cos();
            for col in 0..n {
                let (x, y) = (q[i * n + col], q[j * n + col]);
                q[i * n + col] = c * x - s * y;
                q[j * n + col] = s * x + c * y;
            }
        }
    }
    q
}

/// `q diag(d) w^T` for q [m, k], d [k], w [n, k] (row-major).
fn host_compose(q: &[f64], d: &[f64], w: &[f64], m: usize, n: usize) -> Vec<f64> {
    let k = d.len();
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            out[i * n + j] = (0..k).map(|p| q[i * k + p] * d[p] * w[j * k + p]).sum();
        }
    }
    out
}

/// Asserts that the columns of `x` [rows, cols] are orthonormal.
fn assert_orthonormal_columns(what: &str, x: &[f64], rows: usize, cols: usize, tol: f64) {
    let xtx = host_matmul(&host_transpose(x, rows, cols), x, cols, rows, cols);
    for i in 0..cols {
        for j in 0..cols {
            let want = if i == j { 1.0 } else { 0.0 };
            let got = xtx[i * cols + j];
            assert!((got - want).abs() < tol, "{what}: (x^T x)[{i},{j}] = {got}");
        }
    }
}

#[test]
fn eigh_finds_the_eigenvalues_a_matrix_was_made_of_and_their_vectors() {
    let n = 5;
    let lambda = [-3.0, -0.5, 0.0, 2.0, 7.5];
    for (dtype, tol) in [(DType::F64, 1e-12), (DType::F32, 2e-5)] {
        // Two matrices of a batch: q diag(lambda) q^T for two rotations.
        let mut data = Vec::new();
        for seed in [1, 2] {
            let q = host_orthogonal(n, seed);
            data.extend(host_compose(&q, &lambda, &q, n, n));
        }
        for upper in [false, true] {
            // The triangle not read holds garbage.
            let mut stored = data.clone();
            for b in 0..2 {
                for i in 0..n {
                    for j in 0..n {
                        let unread = if upper { i > j } else { i < j };
                        if unread {
                            stored[b * n * n + i * n + j] = 100.0 + (i * n + j) as f64;
                        }
                    }
                }
            }
            let a = Host::new(dtype, &[2, n as i64, n as i64], stored).tensor();
            let (w, v) = a.eigh(upper).unwrap();
            assert_eq!(w.shape(), &[2, n as i64]);
            let (w, v) = (Host::of(&w), Host::of(&v));
            for b in 0..2 {
                for (i, want) in lambda.iter().enumerate() {
                    let got = w.data[b * n + i];
                    assert!(
                        (got - want).abs() < tol * 10.0,
                        "{dtype:?} upper {upper}: w[{b},{i}] = {got}, want {want}"
                    );
                }
                let vb = &v.data[b * n * n..(b + 1) * n * n];
                assert_orthonormal_columns("eigh's vectors", vb, n, n, tol);
                // a v_i = lambda_i v_i, on the host, against the symmetric a.
                let av = host_matmul(&data[b * n * n..(b + 1) * n * n], vb, n, n, n);
                for i in 0..n {
                    for col in 0..n {
                        let (got, want) = (av[i * n + col], lambda[col] * vb[i * n + col]);
                        assert!(
                            (got - want).abs() < tol * 10.0,
                            "{dtype:?}: (a v)[{i},{col}] = {got}, lambda v = {want}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn svd_recovers_the_singular_values_and_gives_orthonormal_factors() {
    // Full rank and rank-deficient (zeros among the singular values), tall,
    // wide and square, reduced and full.
    let cases: [(usize, usize, &[f64]); 4] = [
        (5, 3, &[4.0, 2.5, 0.25]),
        (3, 5, &[3.0, 1.0, 0.0]),
        (4, 4, &[6.0, 6.0 / 7.0, 0.0, 0.0]),
        (6, 2, &[1.5, 1.0]),
    ];
    for (m, n, sigma) in cases {
        let k = m.min(n);
        let u0 = host_orthogonal(m, m as u64);
        let v0 = host_orthogonal(n, 10 + n as u64);
        // The first k columns of each.
        let cols = |q: &[f64], rows: usize| -> Vec<f64> {
            (0..rows * k).map(|p| q[(p / k) * rows + p % k]).collect()
        };
        let a = host_compose(&cols(&u0, m), sigma, &cols(&v0, n), m, n);
        let t = Host::new(DType::F64, &[m as i64, n as i64], a.clone()).tensor();
        let s = Host::of(&t.svdvals().unwrap());
        for (i, want) in sigma.iter().enumerate() {
            assert!(
                (s.data[i] - want).abs() < 1e-12,
                "{m}x{n}: s[{i}] = {}, want {want}",
                s.data[i]
            );
        }
        for full in [false, true] {
            let (u, s, vh) = t.svd(full).unwrap();
            let (ucols, vrows) = if full { (m, n) } else { (k, k) };
            assert_eq!(u.shape(), &[m as i64, ucols as i64]);
            assert_eq!(vh.shape(), &[vrows as i64, n as i64]);
            let (u, s, vh) = (Host::of(&u), Host::of(&s), Host::of(&vh));
            assert_orthonormal_columns("u", &u.data, m, ucols, 1e-12);
            let v = host_transpose(&vh.data, vrows, n);
            assert_orthonormal_columns("v", &v, n, vrows, 1e-12);
            // u[:, :k] diag(s) vh[:k] == a.
            let u_k: Vec<f64> = (0..m * k)
                .map(|p| u.data[(p / k) * ucols + p % k])
                .collect();
            let v_k: Vec<f64> = (0..n * k).map(|p| v[(p / k) * vrows + p % k]).collect();
            let back = host_compose(&u_k, &s.data, &v_k, m, n);
            for (got, want) in back.iter().zip(&a) {
                assert!(
                    (got - want).abs() < 1e-12,
                    "{m}x{n} full {full}: u s vh = {got}, a = {want}"
                );
            }
        }
    }
}

/// LAPACK's `sytf2` (lower) on one row-major matrix, as its loops are
/// written: only the lower triangle read and written. (factors with zeros
/// above, 1-based pivots, info).
fn host_ldl(a: &[f64], n: usize) -> (Vec<f64>, Vec<i32>, i32) {
    let mut a = a.to_vec();
    let at = |i: usize, j: usize| i * n + j;
    let alpha = (1.0 + 17f64.sqrt()) / 8.0;
    let (mut pivots, mut info) = (vec![0; n], 0);
    let mut k = 0;
    while k < n {
        let mut kstep = 1;
        let absakk = a[at(k, k)].abs();
        let (mut imax, mut colmax) = (k, 0.0);
        // idamax: the first of the largest.
        for i in k + 1..n {
            if i == k + 1 || a[at(i, k)].abs() > colmax {
                colmax = a[at(i, k)].abs();
                imax = i;
            }
        }
        let mut kp = k;
        if absakk.max(colmax) == 0.0 || absakk.is_nan() {
            if info == 0 {
                info = k as i32 + 1;
            }
        } else {
            if absakk < alpha * colmax {
                let mut rowmax: f64 = 0.0;
                for j in k..imax {
                    rowmax = rowmax.max(a[at(imax, j)].abs());
                }
                for j in imax + 1..n {
                    rowmax = rowmax.max(a[at(j, imax)].abs());
                }
                if absakk >= alpha * colmax * (colmax / rowmax) {
                } else if a[at(imax, imax)].abs() >= alpha * rowmax {
                    kp = imax;
                } else {
                    kp = imax;
                    kstep = 2;
                }
            }
            let kk = k + kstep - 1;
            if kp != kk {
                for i in kp + 1..n {
                    a.swap(at(i, kk), at(i, kp));
                }
                for j in kk + 1..kp {
                    a.swap(at(j, kk), at(kp, j));
                }
                a.swap(at(kk, kk), at(kp, kp));
                if kstep == 2 {
                    a.swap(at(k + 1, k), at(kp, k));
                }
            }
            if kstep == 1 {
                let d11 = 1.0 / a[at(k, k)];
                for j in k + 1..n {
                    for i in j..n {
                        a[at(i, j)] -= d11 * a[at(i, k)] * a[at(j, k)];
                    }
                }
                for i in k + 1..n {
                    a[at(i, k)] *= d11;
                }
            } else if k + 2 < n {
                let d21 = a[at(k + 1, k)];
                let d11 = a[at(k + 1, k + 1)] / d21;
                let d22 = a[at(k, k)] / d21;
                let t = 1.0 / (d11 * d22 - 1.0);
                let d21 = t / d21;
                for j in k + 2..n {
                    let wk = d21 * (d11 * a[at(j, k)] - a[at(j, k + 1)]);
                    let wkp1 = d21 * (d22 * a[at(j, k + 1)] - a[at(j, k)]);
                    for i in j..n {
                        a[at(i, j)] -= a[at(i, k)] * wk + a[at(i, k + 1)] * wkp1;
                    }
                    a[at(j, k)] = wk;
                    a[at(j, k + 1)] = wkp1;
                }
            }
        }
        if kstep == 1 {
            pivots[k] = kp as i32 + 1;
        } else {
            pivots[k] = -(kp as i32 + 1);
            pivots[k + 1] = -(kp as i32 + 1);
        }
        k += kstep;
    }
    for i in 0..n {
        for j in i + 1..n {
            a[at(i, j)] = 0.0;
        }
    }
    (a, pivots, info)
}

/// A symmetric matrix from its factors: P_0 L_0 P_1 L_1 ... D ... L_1^T
/// P_1^T L_0^T P_0^T, built as LAPACK defines them (each step's swap then
/// its unit lower block column), applied to the identity on the host.
fn host_ldl_product(f: &[f64], pivots: &[i32], n: usize) -> Vec<f64> {
    // U = P_0 L_0 P_1 L_1 ... as a dense matrix, and D.
    let mut u: Vec<f64> = (0..n * n)
        .map(|i| f64::from(u8::from(i % (n + 1) == 0)))
        .collect();
    let mut d = vec![0.0; n * n];
    let mut k = 0;
    while k < n {
        let block = pivots[k] < 0;
        let (kk, kp) = if block {
            (k + 1, (-pivots[k] - 1) as usize)
        } else {
            (k, (pivots[k] - 1) as usize)
        };
        // u := u P_k (swap columns kk and kp), then u := u L_k.
        for i in 0..n {
            u.swap(i * n + kk, i * n + kp);
        }
        let width = if block { 2 } else { 1 };
        let mut l = (0..n * n)
            .map(|i| f64::from(u8::from(i % (n + 1) == 0)))
            .collect::<Vec<_>>();
        for c in k..k + width {
            for r in k + width..n {
                l[r * n + c] = f[r * n + c];
            }
            for r in k..k + width {
                d[r * n + c] = f[r.max(c) * n + r.min(c)];
            }
        }
        u = host_matmul(&u, &l, n, n, n);
        k += width;
    }
    let ud = host_matmul(&u, &d, n, n, n);
    host_matmul(&ud, &host_transpose(&u, n, n), n, n, n)
}

/// Random symmetric matrices with no dominant diagonal: Bunch-Kaufman takes
/// 2x2 blocks and swaps on them.
fn symmetric_indefinite(batch: usize, n: usize, seed: u64, garbage_above: bool) -> Host {
    let m = Host::random(DType::F64, &[(batch * n * n) as i64], seed);
    let mut data = m.data.clone();
    for b in 0..batch {
        for i in 0..n {
            data[b * n * n + i * n + i] *= 0.1;
            for j in i + 1..n {
                data[b * n * n + i * n + j] = if garbage_above {
                    1e6 + j as f64
                } else {
                    data[b * n * n + j * n + i]
                };
            }
        }
    }
    Host::new(DType::F64, &[batch as i64, n as i64, n as i64], data)
}

#[test]
fn ldl_matches_sytf2_with_swaps_blocks_and_a_zero_column() {
    let (batch, n) = (4, 7);
    let a = symmetric_indefinite(batch, n, 31, true);
    let (factors, pivots, info) = a.tensor().ldl_factor_ex().unwrap();
    let (mut want_f, mut want_p) = (Vec::new(), Vec::new());
    for b in 0..batch {
        let (f, p, i) = host_ldl(&a.data[b * n * n..(b + 1) * n * n], n);
        assert_eq!(i, 0);
        // The factors are those of a (its lower triangle mirrored).
        let mut full = a.data[b * n * n..(b + 1) * n * n].to_vec();
        for r in 0..n {
            for c in r + 1..n {
                full[r * n + c] = full[c * n + r];
            }
        }
        let back = host_ldl_product(&f, &p, n);
        let worst = back
            .iter()
            .zip(&full)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f64::max);
        assert!(worst < 1e-9, "the host's factors rebuild a to {worst}");
        want_f.extend(f);
        want_p.extend(p);
    }
    // The test exercises what it means to: 2x2 blocks and 1x1 swaps.
    assert!(want_p.iter().any(|&p| p < 0), "no 2x2 block in {want_p:?}");
    let swapped_1x1 = want_p
        .iter()
        .enumerate()
        .any(|(i, &p)| p > 0 && p as usize != i % n + 1);
    assert!(swapped_1x1, "no swapped 1x1 pivot in {want_p:?}");
    assert_eq!(pivots.to_vec::<i32>().unwrap(), want_p);
    assert_eq!(info.to_vec::<i32>().unwrap(), vec![0; batch]);
    assert_close_tol(
        "ldl factors",
        &factors,
        &Host::new(DType::F64, &a.shape, want_f),
        (1e-9, 1e-9),
    );

    // float32 too, against the float64 reference.
    let a32 = Host::new(DType::F32, &a.shape, a.data.clone());
    let (f32_factors, f32_pivots, _) = a32.tensor().ldl_factor_ex().unwrap();
    assert_eq!(f32_factors.dtype(), DType::F32);
    assert_eq!(
        f32_pivots.to_vec::<i32>().unwrap(),
        pivots.to_vec::<i32>().unwrap()
    );
    assert_close_tol(
        "float32 ldl factors",
        &f32_factors,
        &Host::new(DType::F32, &a.shape, Host::of(&factors).data),
        (1e-3, 1e-4),
    );

    // A zero first column: info names it and the factorization goes on.
    let zero_column = [0.0, 0.0, 0.0, 0.0, 1.0, 2.0, 0.0, 2.0, 1.0];
    let (f, p, i) = host_ldl(&zero_column, 3);
    assert_eq!(i, 1);
    let (factors, pivots, info) = Tensor::from_slice(&zero_column, &[3, 3])
        .unwrap()
        .ldl_factor_ex()
        .unwrap();
    assert_eq!(info.to_vec::<i32>().unwrap(), vec![1]);
    assert_eq!(pivots.to_vec::<i32>().unwrap(), p);
    assert_close_tol(
        "zero-column ldl",
        &factors,
        &Host::new(DType::F64, &[3, 3], f),
        (1e-12, 1e-12),
    );

    // Empty matrices and batches.
    let (f, p, i) = Tensor::zeros(&[0, 2, 2], DType::F32)
        .unwrap()
        .ldl_factor_ex()
        .unwrap();
    assert_eq!(
        (f.shape(), p.shape(), i.shape()),
        (&[0i64, 2, 2][..], &[0i64, 2][..], &[0i64][..])
    );
}

/// The largest |a x - b| of an n x n `a` and n x k `x` and `b` (the first
/// elements of each slice).
fn residual(a: &[f64], x: &[f64], b: &[f64], n: usize, k: usize) -> f64 {
    let ax = host_matmul(&a[..n * n], &x[..n * k], n, n, k);
    ax.iter()
        .zip(b)
        .map(|(p, q)| (p - q).abs())
        .fold(0.0, f64::max)
}

#[test]
fn ldl_solve_solves_with_the_factors_of_every_batch_element() {
    let (batch, n) = (3, 6);
    let a = symmetric_indefinite(batch, n, 44, false);
    let (factors, pivots, _) = a.tensor().ldl_factor_ex().unwrap();
    let b = Host::random(DType::F64, &[batch as i64, n as i64, 2], 9);
    let x = Host::of(&factors.ldl_solve(&pivots, &b.tensor()).unwrap());
    for e in 0..batch {
        let (a, x, b) = (
            &a.data[e * n * n..],
            &x.data[e * n * 2..],
            &b.data[e * n * 2..],
        );
        let worst = residual(a, x, b, n, 2);
        assert!(worst < 1e-9, "batch element {e}: |a x - b| = {worst}");
    }
    // One matrix's factors broadcast over a batch of right-hand sides.
    let one = factors.narrow(0, 0, 1).unwrap().squeeze(Some(0)).unwrap();
    let p0 = pivots.narrow(0, 0, 1).unwrap().squeeze(Some(0)).unwrap();
    let x = Host::of(&one.ldl_solve(&p0, &b.tensor()).unwrap());
    for e in 0..batch {
        let worst = residual(&a.data, &x.data[e * n * 2..], &b.data[e * n * 2..], n, 2);
        assert!(
            worst < 1e-9,
            "broadcast factors, right-hand side {e}: {worst}"
        );
    }
    let e = factors.ldl_solve(
        &pivots,
        &Tensor::zeros(&[batch as i64, n as i64 + 1, 2], DType::F64).unwrap(),
    );
    let e = e.unwrap_err().to_string();
    assert!(e.contains("ldl_solve") && e.contains("[..., n, k]"), "{e}");
}
