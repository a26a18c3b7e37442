//! The LDL^T factorization of symmetric indefinite matrices (Bunch-Kaufman
//! pivoting, LAPACK's `sytf2`) and its solve, against the textbook loops
//! written here: swaps, 2x2 blocks, a zero column, batches.

mod common;

use common::*;
use eagertpu::{DType, Tensor};

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
        u = matmul_f64(&u, &l, n, n, n);
        k += width;
    }
    let ud = matmul_f64(&u, &d, n, n, n);
    matmul_f64(&ud, &transpose_f64(&u, n, n), n, n, n)
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
    let ax = matmul_f64(&a[..n * n], &x[..n * k], n, n, k);
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
