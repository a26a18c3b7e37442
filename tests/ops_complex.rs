//! Complex numbers (complex64, complex128) through the op set: transfers,
//! elementwise math against num-complex on the host, type promotion, the
//! parts (real, imag, conj, angle, polar, complex), bit reinterpretation
//! (`view_as_real` and back), matmul and reductions, and the discrete
//! Fourier transforms against a direct O(n^2) sum in f64, in every mode;
//! the ops with no complex form refuse it with the op's name.

mod common;

use common::*;
use eagertpu::{Activation, Complex32, Complex64, DType, FftNorm, Tensor};

/// `n` complex numbers with parts in [-2, 2).
fn numbers(n: usize, seed: u64) -> Vec<Complex64> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|_| Complex64::new(rng.uniform(-2.0, 2.0), rng.uniform(-2.0, 2.0)))
        .collect()
}

/// `values` as a tensor of `dtype` (complex64 rounds each part to f32).
fn upload(values: &[Complex64], shape: &[i64], dtype: DType) -> Tensor {
    let t = match dtype {
        DType::C64 => {
            let narrow: Vec<Complex32> = values
                .iter()
                .map(|z| Complex32::new(z.re as f32, z.im as f32))
                .collect();
            Tensor::from_slice(&narrow, shape)
        }
        DType::C128 => Tensor::from_slice(values, shape),
        d => panic!("{d} is not complex"),
    };
    t.unwrap()
}

/// A complex tensor's values, widened to complex128 on the host.
fn download(t: &Tensor) -> Vec<Complex64> {
    match t.dtype() {
        DType::C64 => t
            .to_vec::<Complex32>()
            .unwrap()
            .into_iter()
            .map(|z| Complex64::new(z.re as f64, z.im as f64))
            .collect(),
        DType::C128 => t.to_vec::<Complex64>().unwrap(),
        d => panic!("{d} is not complex"),
    }
}

/// The values as `dtype` stores them.
fn rounded(values: &[Complex64], dtype: DType) -> Vec<Complex64> {
    values
        .iter()
        .map(|z| Complex64::new(round(dtype, z.re), round(dtype, z.im)))
        .collect()
}

fn assert_near(what: &str, got: &[Complex64], want: &[Complex64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let scale = 1.0 + w.norm();
        assert!(
            (g - w).norm() <= tol * scale,
            "{what}[{i}]: got {g}, expected {w} (tolerance {tol})"
        );
    }
}

/// An op's name, its result and the host function it must match.
type Binary = (&'static str, Tensor, fn(Complex64, Complex64) -> Complex64);
type Unary = (&'static str, Tensor, fn(Complex64) -> Complex64);
type ToReal = (&'static str, Tensor, fn(Complex64) -> f64);

fn tol(dtype: DType) -> f64 {
    if dtype == DType::C64 { 2e-6 } else { 1e-13 }
}

all_modes! {
    fn complex_values_cross_the_host_boundary_exactly() {
        let values = vec![
            Complex64::new(1.0, -0.0),
            Complex64::new(f64::MIN_POSITIVE, f64::MAX),
            Complex64::new(f64::NAN, f64::NEG_INFINITY),
            Complex64::new(0.1, 1e-300),
        ];
        let t = upload(&values, &[2, 2], DType::C128);
        assert_eq!((t.dtype(), t.shape()), (DType::C128, &[2i64, 2][..]));
        let back = download(&t);
        for (g, w) in back.iter().zip(&values) {
            assert_eq!((g.re.to_bits(), g.im.to_bits()), (w.re.to_bits(), w.im.to_bits()));
        }
        // Through an op as well (a fused or compiled program's output).
        let same = (&t * 1.0).unwrap();
        assert_eq!(download(&same)[3], values[3]);
    }
}

all_modes! {
    fn elementwise_math_matches_num_complex() {
        for dtype in [DType::C64, DType::C128] {
            let a = rounded(&numbers(24, 1), dtype);
            let b = rounded(&numbers(24, 2), dtype);
            let (ta, tb) = (upload(&a, &[4, 6], dtype), upload(&b, &[4, 6], dtype));
            let binary: [Binary; 4] = [
                ("add", (&ta + &tb).unwrap(), |x, y| x + y),
                ("sub", (&ta - &tb).unwrap(), |x, y| x - y),
                ("mul", (&ta * &tb).unwrap(), |x, y| x * y),
                ("div", (&ta / &tb).unwrap(), |x, y| x / y),
            ];
            for (name, got, f) in binary {
                assert_eq!(got.dtype(), dtype, "{name}");
                let want: Vec<Complex64> = a.iter().zip(&b).map(|(&x, &y)| f(x, y)).collect();
                assert_near(&format!("{name} {dtype}"), &download(&got), &want, tol(dtype));
            }
            let unary: [Unary; 8] = [
                ("neg", ta.neg().unwrap(), |z| -z),
                ("exp", ta.exp().unwrap(), |z| z.exp()),
                ("log", ta.log().unwrap(), |z| z.ln()),
                ("sqrt", ta.sqrt().unwrap(), |z| z.sqrt()),
                ("sin", ta.sin().unwrap(), |z| z.sin()),
                ("tanh", ta.tanh().unwrap(), |z| z.tanh()),
                ("conj_physical", ta.conj_physical().unwrap(), |z| z.conj()),
                ("sgn", ta.sgn().unwrap(), |z| z / z.norm()),
            ];
            for (name, got, f) in unary {
                assert_eq!(got.dtype(), dtype, "{name}");
                let want: Vec<Complex64> = a.iter().map(|&z| f(z)).collect();
                assert_near(&format!("{name} {dtype}"), &download(&got), &want, 4.0 * tol(dtype));
            }
            // The parts and the magnitudes are real, of the parts' dtype.
            let part = dtype.real_part();
            let real: [ToReal; 4] = [
                ("abs", ta.abs().unwrap(), |z| z.norm()),
                ("angle", ta.angle().unwrap(), |z| z.arg()),
                ("real", ta.real().unwrap(), |z| z.re),
                ("imag", ta.imag().unwrap(), |z| z.im),
            ];
            for (name, got, f) in real {
                assert_eq!(got.dtype(), part, "{name} of {dtype}");
                let want = Host::new(part, &[4, 6], a.iter().map(|&z| f(z)).collect());
                assert_close(&format!("{name} {dtype}"), &got, &want);
            }
            // sgn is 0 at 0, not NaN.
            let zero = upload(&[Complex64::new(0.0, 0.0)], &[1], dtype);
            assert_eq!(download(&zero.sgn().unwrap()), vec![Complex64::new(0.0, 0.0)]);
        }
    }
}

all_modes! {
    fn complex_numbers_are_built_from_their_parts() {
        let re = Host::random(DType::F64, &[3, 5], 3);
        let im = Host::random(DType::F64, &[3, 5], 4);
        for dtype in [DType::F32, DType::F64] {
            let (tr, ti) = (re.tensor().to_dtype(dtype).unwrap(), im.tensor().to_dtype(dtype).unwrap());
            let z = tr.complex(&ti).unwrap();
            assert_eq!(z.dtype(), dtype.to_complex());
            let want: Vec<Complex64> = re
                .data
                .iter()
                .zip(&im.data)
                .map(|(&r, &i)| Complex64::new(round(dtype, r), round(dtype, i)))
                .collect();
            assert_eq!(download(&z), want, "complex of {dtype}");
            // polar(abs, angle) = abs (cos angle + i sin angle).
            let p = tr.abs().unwrap().polar(&ti).unwrap();
            let want: Vec<Complex64> = want
                .iter()
                .map(|z| Complex64::from_polar(z.re.abs(), z.im))
                .collect();
            assert_near(&format!("polar {dtype}"), &download(&p), &want, tol(dtype.to_complex()));
        }
        // Parts of two dtypes are an error, as in PyTorch.
        let f32s = re.tensor().to_dtype(DType::F32).unwrap();
        let msg = err_text(f32s.complex(&re.tensor()));
        assert!(msg.contains("complex") && msg.contains("float32") && msg.contains("float64"), "{msg}");
    }
}

all_modes! {
    fn complex_operands_promote_as_in_pytorch() {
        let z = upload(&numbers(4, 5), &[4], DType::C64);
        let f64s = Host::random(DType::F64, &[4], 6).tensor();
        let ints = Tensor::from_slice(&[1i64, -2, 3, 4], &[4]).unwrap();
        // torch.promote_types: complex64 with float64 is complex128; with an
        // integer, complex64; a real scalar keeps the complex dtype.
        assert_eq!((&z + &f64s).unwrap().dtype(), DType::C128);
        assert_eq!((&z * &ints).unwrap().dtype(), DType::C64);
        assert_eq!((&z * 2.5).unwrap().dtype(), DType::C64);
        assert_eq!(ints.to_dtype(DType::C128).unwrap().dtype(), DType::C128);
        // A real value converted is a complex one with no imaginary part;
        // a complex one converted to a real dtype is its real part.
        let back = z.to_dtype(DType::F32).unwrap();
        let want: Vec<f64> = download(&z).iter().map(|c| c.re).collect();
        assert_eq!(Host::of(&back).data, want);
        let sum = (&z + &ints).unwrap();
        let want: Vec<Complex64> = download(&z)
            .iter()
            .zip([1.0, -2.0, 3.0, 4.0])
            .map(|(c, i)| c + i)
            .collect();
        assert_near("complex64 + int64", &download(&sum), &want, tol(DType::C64));
    }
}

all_modes! {
    fn complex_bits_read_as_reals_and_back() {
        for dtype in [DType::C64, DType::C128] {
            let values = rounded(&numbers(6, 7), dtype);
            let z = upload(&values, &[2, 3], dtype);
            let parts = z.bitcast(dtype.real_part()).unwrap();
            assert_eq!(parts.shape(), &[2, 3, 2]);
            let want: Vec<f64> = values.iter().flat_map(|c| [c.re, c.im]).collect();
            assert_eq!(Host::of(&parts).data, want, "view_as_real of {dtype}");
            assert_eq!(download(&parts.bitcast(dtype).unwrap()), values, "and back");
            // As bytes: the little-endian bits of each part in turn.
            let bytes = z.bitcast(DType::U8).unwrap();
            let size = dtype.size_in_bytes() as i64;
            assert_eq!(bytes.shape(), &[2, 3, size]);
            let got: Vec<u8> = Host::of(&bytes).data.iter().map(|&b| b as u8).collect();
            let want: Vec<u8> = values
                .iter()
                .flat_map(|c| match dtype {
                    DType::C64 => [(c.re as f32).to_le_bytes(), (c.im as f32).to_le_bytes()].concat(),
                    _ => [c.re.to_le_bytes(), c.im.to_le_bytes()].concat(),
                })
                .collect();
            assert_eq!(got, want, "{dtype} as bytes");
            assert_eq!(download(&bytes.bitcast(dtype).unwrap()), values, "bytes back to {dtype}");
        }
    }
}

all_modes! {
    fn matmul_and_reductions_of_complex_tensors() {
        let (a, b) = (numbers(6, 8), numbers(12, 9));
        let (ta, tb) = (upload(&a, &[2, 3], DType::C128), upload(&b, &[3, 4], DType::C128));
        let mut want = vec![Complex64::new(0.0, 0.0); 8];
        for i in 0..2 {
            for j in 0..4 {
                want[i * 4 + j] = (0..3).map(|k| a[i * 3 + k] * b[k * 4 + j]).sum();
            }
        }
        assert_near("matmul", &download(&ta.matmul(&tb).unwrap()), &want, 1e-13);
        let sums: Vec<Complex64> = (0..3).map(|j| a[j] + a[3 + j]).collect();
        assert_near("sum", &download(&ta.sum(&[0], false).unwrap()), &sums, 1e-13);
        let mean = a.iter().sum::<Complex64>() / 6.0;
        assert_near("mean", &download(&ta.mean_all().unwrap()), &[mean], 1e-13);
        // The variance of complex numbers: the mean squared distance from
        // their mean (Bessel's correction), real.
        let column_means: Vec<Complex64> = (0..3).map(|j| (a[j] + a[3 + j]) / 2.0).collect();
        let var: Vec<f64> = (0..3)
            .map(|j| (a[j] - column_means[j]).norm_sqr() + (a[3 + j] - column_means[j]).norm_sqr())
            .collect();
        let got = ta.var(&[0], 1, false).unwrap();
        assert_close("var", &got, &Host::new(DType::F64, &[3], var));
        let prod: Complex64 = a.iter().product();
        assert_near("prod", &download(&ta.prod(&[0, 1], false).unwrap()), &[prod], 1e-13);
    }
}

/// `sum_k x_k e^(sign 2 pi i j k / n)` along the last dim of rows of `n`.
fn dft(x: &[Complex64], n: usize, sign: f64) -> Vec<Complex64> {
    x.chunks(n)
        .flat_map(|row| {
            (0..n).map(move |j| {
                (0..n)
                    .map(|k| {
                        let theta = sign * 2.0 * std::f64::consts::PI * (j * k) as f64 / n as f64;
                        row[k] * Complex64::from_polar(1.0, theta)
                    })
                    .sum::<Complex64>()
            })
        })
        .collect()
}

all_modes! {
    fn fourier_transforms_match_the_direct_sum() {
        for dtype in [DType::C64, DType::C128] {
            let x = rounded(&numbers(3 * 10, 10), dtype);
            let t = upload(&x, &[3, 10], dtype);
            let forward = dft(&x, 10, -1.0);
            let got = t.fft_c2c(&[1], FftNorm::None, true).unwrap();
            assert_near(&format!("fft {dtype}"), &download(&got), &forward, 4.0 * tol(dtype));
            // ifft (by 1/n) and the orthonormal forms (1/sqrt(n) both ways).
            let inverse: Vec<Complex64> = dft(&x, 10, 1.0).iter().map(|z| z / 10.0).collect();
            let got = t.fft_c2c(&[-1], FftNorm::ByN, false).unwrap();
            assert_near(&format!("ifft {dtype}"), &download(&got), &inverse, 4.0 * tol(dtype));
            let ortho: Vec<Complex64> = forward.iter().map(|z| z / 10f64.sqrt()).collect();
            let got = t.fft_c2c(&[1], FftNorm::ByRootN, true).unwrap();
            assert_near(&format!("ortho {dtype}"), &download(&got), &ortho, 4.0 * tol(dtype));
            // Along dim 0 (moved last and back).
            let (xs, columns_of) = (&x, |j: usize| (0..3).map(move |i| (i, j)));
            let columns: Vec<Complex64> = (0..10).flat_map(columns_of).map(|(i, j)| xs[i * 10 + j]).collect();
            let by_column = dft(&columns, 3, -1.0);
            let want: Vec<Complex64> = (0..3)
                .flat_map(|i| (0..10).map(move |j| (i, j)))
                .map(|(i, j)| by_column[j * 3 + i])
                .collect();
            let got = t.fft_c2c(&[0], FftNorm::None, true).unwrap();
            assert_near(&format!("fft dim 0 {dtype}"), &download(&got), &want, 4.0 * tol(dtype));
        }
    }
}

all_modes! {
    fn real_transforms_keep_the_one_sided_half() {
        let n = 9;
        let x = Host::random(DType::F64, &[2, n as i64], 11);
        let complex: Vec<Complex64> = x.data.iter().map(|&r| Complex64::new(r, 0.0)).collect();
        let full = dft(&complex, n, -1.0);
        let half: Vec<Complex64> = full.chunks(n).flat_map(|row| row[..n / 2 + 1].to_vec()).collect();
        let t = x.tensor();
        let got = t.fft_r2c(&[1], FftNorm::None, true).unwrap();
        assert_eq!((got.dtype(), got.shape()), (DType::C128, &[2i64, 5][..]));
        assert_near("rfft", &download(&got), &half, 1e-12);
        let two_sided = t.fft_r2c(&[1], FftNorm::None, false).unwrap();
        assert_near("rfft two-sided", &download(&two_sided), &full, 1e-12);
        // irfft of the half gives the signal back, for an odd and an even n.
        let back = got.fft_c2r(&[1], FftNorm::ByN, n as i64).unwrap();
        assert_eq!((back.dtype(), back.shape()), (DType::F64, &[2i64, 9][..]));
        assert_close_tol("irfft", &back, &x, (1e-12, 1e-12));
        let even = Host::random(DType::F32, &[4, 8], 12);
        let round_trip = even
            .tensor()
            .fft_r2c(&[0, 1], FftNorm::ByRootN, true)
            .unwrap()
            .fft_c2r(&[0, 1], FftNorm::ByRootN, 8)
            .unwrap();
        assert_close_tol("rfft2 and back", &round_trip, &even, (1e-5, 1e-5));
    }
}

all_modes! {
    fn four_dims_transform_in_groups_of_at_most_three() {
        let shape = [2i64, 3, 2, 4];
        let x = numbers(48, 13);
        let t = upload(&x, &shape, DType::C128);
        let got = download(&t.fft_c2c(&[0, 1, 2, 3], FftNorm::None, true).unwrap());
        // The 4-d transform, directly: sum over every index of x e^(-2 pi i sum_d j_d k_d / n_d).
        let strides = strides(&shape);
        for (flat, g) in got.iter().enumerate() {
            let j = unravel(flat, &shape);
            let want: Complex64 = (0..48)
                .map(|f| {
                    let k = unravel(f, &shape);
                    let phase: f64 = (0..4).map(|d| (j[d] * k[d]) as f64 / shape[d] as f64).sum();
                    x[f] * Complex64::from_polar(1.0, -2.0 * std::f64::consts::PI * phase)
                })
                .sum();
            assert!((g - want).norm() < 1e-11, "at {j:?} (strides {strides:?}): got {g}, expected {want}");
        }
    }
}

all_modes! {
    fn ops_without_a_complex_form_refuse_it_by_name() {
        let z = upload(&numbers(4, 14), &[4], DType::C64);
        for (op, r) in [
            ("lt", z.lt(&z)),
            ("maximum", z.maximum(&z)),
            ("floor", z.floor()),
            ("amax", z.max(&[0], false)),
            ("clamp", z.clamp_min(0.0)),
            ("sort", z.sort(0, false).map(|(v, _)| v)),
        ] {
            let msg = err_text(r);
            assert!(msg.contains(op) && msg.contains("complex64"), "{op}: {msg}");
        }
        let real = Tensor::from_slice(&[1.0f32, 2.0], &[2]).unwrap();
        let msg = err_text(real.imag());
        assert!(msg.contains("imag") && msg.contains("float32"), "{msg}");
        let msg = err_text(real.fft_c2c(&[0], FftNorm::None, true));
        assert!(msg.contains("_fft_c2c") && msg.contains("complex64"), "{msg}");
        let msg = err_text(real.fft_r2c(&[], FftNorm::None, true));
        assert!(msg.contains("_fft_r2c") && msg.contains("at least one"), "{msg}");
        // The next op works.
        assert_eq!(download(&(&z + &z).unwrap()).len(), 4);
    }
}

all_modes! {
    fn cholesky_factors_hermitian_matrices_and_triangular_solves_invert_them() {
        let n = 4;
        // a = m m^H + n I: Hermitian positive-definite.
        let m = numbers(n * n, 15);
        let mut a = vec![Complex64::new(0.0, 0.0); n * n];
        for i in 0..n {
            for j in 0..n {
                a[i * n + j] = (0..n).map(|k| m[i * n + k] * m[j * n + k].conj()).sum::<Complex64>()
                    + if i == j { n as f64 } else { 0.0 };
            }
        }
        let ta = upload(&a, &[n as i64, n as i64], DType::C128);
        let l = download(&ta.cholesky(false).unwrap());
        // Lower-triangular, a real positive diagonal, and l l^H = a.
        for i in 0..n {
            assert!(l[i * n + i].re > 0.0 && l[i * n + i].im.abs() < 1e-12, "pivot {i}: {}", l[i * n + i]);
            for j in i + 1..n {
                assert_eq!(l[i * n + j], Complex64::new(0.0, 0.0), "above the diagonal at ({i}, {j})");
            }
        }
        let mut product = vec![Complex64::new(0.0, 0.0); n * n];
        for i in 0..n {
            for j in 0..n {
                product[i * n + j] = (0..n).map(|k| l[i * n + k] * l[j * n + k].conj()).sum();
            }
        }
        assert_near("l l^H", &product, &a, 1e-12);
        // The upper factor is l^H.
        let u = download(&ta.cholesky(true).unwrap());
        let lh: Vec<Complex64> = (0..n * n).map(|f| l[(f % n) * n + f / n].conj()).collect();
        assert_near("upper factor", &u, &lh, 1e-12);
        // Solving l x = b by forward substitution on the host.
        let b = numbers(n * 2, 16);
        let mut x = vec![Complex64::new(0.0, 0.0); n * 2];
        for c in 0..2 {
            for i in 0..n {
                let s: Complex64 = (0..i).map(|k| l[i * n + k] * x[k * 2 + c]).sum();
                x[i * 2 + c] = (b[i * 2 + c] - s) / l[i * n + i];
            }
        }
        let tl = upload(&l, &[n as i64, n as i64], DType::C128);
        let tb = upload(&b, &[n as i64, 2], DType::C128);
        let got = tl.solve_triangular(&tb, false, true, false, false).unwrap();
        assert_near("solve_triangular", &download(&got), &x, 1e-12);
        // A matrix that is not positive-definite: info names its order.
        a[2 * n + 2] = Complex64::new(-100.0, 0.0);
        let (_, info) = upload(&a, &[n as i64, n as i64], DType::C128).cholesky_ex(false).unwrap();
        assert_eq!(info.to_vec::<i32>().unwrap(), vec![3]);
    }
}

all_modes! {
    fn logsumexp_and_logaddexp_of_complex_tensors_match_the_host() {
        // Parts up to 60: exp of them alone overflows float32.
        let a: Vec<Complex64> = numbers(12, 17).iter().map(|z| z * 30.0).collect();
        let b = numbers(12, 18);
        for dtype in [DType::C64, DType::C128] {
            let (a, b) = (rounded(&a, dtype), rounded(&b, dtype));
            let (ta, tb) = (upload(&a, &[3, 4], dtype), upload(&b, &[3, 4], dtype));
            // log(sum exp) along each row, in f64 shifted by the row's
            // largest real part.
            let want: Vec<Complex64> = a
                .chunks(4)
                .map(|row| {
                    let m = row.iter().map(|z| z.re).fold(f64::MIN, f64::max);
                    row.iter().map(|z| (z - m).exp()).sum::<Complex64>().ln() + m
                })
                .collect();
            let got = ta.logsumexp(&[1], false).unwrap();
            assert_eq!(got.dtype(), dtype);
            assert_near(&format!("logsumexp {dtype}"), &download(&got), &want, 4.0 * tol(dtype));
            let want: Vec<Complex64> = a
                .iter()
                .zip(&b)
                .map(|(&x, &y)| {
                    let (hi, lo) = if x.re >= y.re { (x, y) } else { (y, x) };
                    hi + ((lo - hi).exp() + 1.0).ln()
                })
                .collect();
            let got = ta.logaddexp(&tb).unwrap();
            assert_near(&format!("logaddexp {dtype}"), &download(&got), &want, 4.0 * tol(dtype));
        }
        // logaddexp2 has no complex form in PyTorch: refused by name.
        let z = upload(&b, &[12], DType::C64);
        let e = z.logaddexp2(&z).unwrap_err().to_string();
        assert!(e.contains("logaddexp2") && e.contains("expected a floating-point operand"), "{e}");
    }
}

all_modes! {
    fn inverse_trigonometric_functions_of_complex_tensors_match_num_complex() {
        for dtype in [DType::C64, DType::C128] {
            let a = rounded(&numbers(24, 19), dtype);
            let ta = upload(&a, &[4, 6], dtype);
            let unary: [Unary; 3] = [
                ("asin", ta.activation(Activation::Asin).unwrap(), |z| z.asin()),
                ("acos", ta.activation(Activation::Acos).unwrap(), |z| z.acos()),
                ("atan", ta.activation(Activation::Atan).unwrap(), |z| z.atan()),
            ];
            for (name, got, f) in unary {
                assert_eq!(got.dtype(), dtype, "{name}");
                let want: Vec<Complex64> = a.iter().map(|&z| f(z)).collect();
                assert_near(&format!("{name} {dtype}"), &download(&got), &want, 4.0 * tol(dtype));
            }
        }
        // Near 0 the logarithm formulas lose every digit (num-complex's
        // among them); the device keeps them: asin(z) and atan(z) are z to
        // first order (the next terms are below z's last digit here).
        let tiny = [Complex64::new(1e-20, -3e-21), Complex64::new(-2e-12, 5e-13)];
        let t = upload(&tiny, &[2], DType::C128);
        for a in [Activation::Asin, Activation::Atan] {
            let got = download(&t.activation(a).unwrap());
            for (g, z) in got.iter().zip(&tiny) {
                assert!((g - z).norm() <= 1e-15 * z.norm(), "{a:?}({z}): got {g}");
            }
        }
    }
}

all_modes! {
    fn lu_of_complex_matrices_reconstructs_them_and_solves() {
        let n = 4;
        let a = numbers(n * n, 43);
        let ta = upload(&a, &[n as i64, n as i64], DType::C128);
        let (factors, pivots, info) = ta.lu_factor_ex().unwrap();
        assert_eq!(info.to_vec::<i32>().unwrap(), vec![0]);
        let f = download(&factors);
        let perm = pivots.lu_permutation(n as i64).unwrap().to_vec::<i32>().unwrap();
        // a[perm] = l u, l unit lower and u upper from the factors.
        for i in 0..n {
            for j in 0..n {
                let lu: Complex64 = (0..=i.min(j))
                    .map(|k| if k == i { f[k * n + j] } else { f[i * n + k] * f[k * n + j] })
                    .sum();
                let want = a[perm[i] as usize * n + j];
                assert!((lu - want).norm() < 1e-12, "({i}, {j}): {lu} vs {want}");
            }
        }
        // Each pivot is the entry of largest |re| + |im| left in its column.
        let size = |z: Complex64| z.re.abs() + z.im.abs();
        let first = (0..n).map(|i| size(a[i * n])).fold(0.0, f64::max);
        assert_eq!(size(a[perm[0] as usize * n]), first);
        // Solving a x = b with the factors: a x is b.
        let b = numbers(n * 2, 44);
        let tb = upload(&b, &[n as i64, 2], DType::C128);
        let x = download(&factors.lu_solve(&pivots, &tb, true, false).unwrap());
        for i in 0..n {
            for c in 0..2 {
                let ax: Complex64 = (0..n).map(|k| a[i * n + k] * x[k * 2 + c]).sum();
                assert!((ax - b[i * 2 + c]).norm() < 1e-12, "row {i}, column {c}");
            }
        }
    }
}

all_modes! {
    fn householder_qr_of_complex_matrices_is_unitary_times_upper() {
        let (m, n) = (5, 3);
        let a = numbers(m * n, 45);
        let ta = upload(&a, &[m as i64, n as i64], DType::C128);
        let (q, r) = ta.qr(false).unwrap();
        let (q, r) = (download(&q), download(&r));
        // q [m, n] with orthonormal columns, r [n, n] upper with a real
        // diagonal (LAPACK's), and q r = a.
        for i in 0..n {
            for j in 0..n {
                let dot: Complex64 = (0..m).map(|k| q[k * n + i].conj() * q[k * n + j]).sum();
                let want = if i == j { 1.0 } else { 0.0 };
                assert!((dot - want).norm() < 1e-12, "q^H q at ({i}, {j}): {dot}");
                if i > j {
                    assert_eq!(r[i * n + j], Complex64::new(0.0, 0.0), "below r's diagonal");
                }
            }
            assert!(r[i * n + i].im.abs() < 1e-12, "r's diagonal is real: {}", r[i * n + i]);
        }
        for i in 0..m {
            for j in 0..n {
                let qr: Complex64 = (0..n).map(|k| q[i * n + k] * r[k * n + j]).sum();
                assert!((qr - a[i * n + j]).norm() < 1e-12, "q r at ({i}, {j})");
            }
        }
    }
}
