//! The orthogonal decompositions against host references computed here:
//! QR (orthonormal Q, upper R, their product), ormqr (multiplying by the Q
//! the Householder reflectors stand for), eigh (the eigenvalues a symmetric
//! matrix was built from, orthonormal eigenvectors) and SVD (the singular
//! values a matrix was built from, orthonormal factors).

mod common;

use common::*;
use eagertpu::DType;

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
        let qtq = matmul_f64(&transpose_f64(&q.data, m, k), &q.data, k, m, k);
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
        let qr = matmul_f64(&q.data, &r.data, m, k, n);
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
    let ct = Host::new(DType::F64, &[2, m as i64], transpose_f64(&c.data, m, 2));
    let qt = transpose_f64(&full.data, m, m);
    for (left, transpose) in [(true, false), (true, true), (false, false), (false, true)] {
        let op_q = if transpose { &qt } else { &full.data };
        let (input, want) = if left {
            (&c, matmul_f64(op_q, &c.data, m, m, 2))
        } else {
            (&ct, matmul_f64(&ct.data, op_q, 2, m, m))
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
    let xtx = matmul_f64(&transpose_f64(x, rows, cols), x, cols, rows, cols);
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
                let av = matmul_f64(&data[b * n * n..(b + 1) * n * n], vb, n, n, n);
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
            let v = transpose_f64(&vh.data, vrows, n);
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
