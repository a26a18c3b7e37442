//! Entry points for counter-based random numbers.

use std::ffi::c_char;

use eagertpu::{Distribution, Scalar};
use smallvec::SmallVec;

use crate::handles::{device, dims, dtype_from, put_tensor};
use crate::pointwise::{Value, decode, read, view};
use crate::types::{OperandArg, TensorHandle};
use crate::{Failure, at, c_api, c_str};

/// Most parameters of a distribution.
const MAX_PARAMS: usize = 4;

c_api! {
    /// Samples uniform in [0, 1) of shape `dims[0..rank]` and float `dtype`
    /// (`etpu_dtype`), from the Threefry generator keyed by (`key0`, `key1`):
    /// the same key gives the same samples. Keys are program parameters, so a
    /// new key never compiles a new program.
    fn etpu_rand_uniform(
        device_index: i64,
        key0: u64,
        key1: u64,
        dims_ptr: *const i64,
        rank: usize,
        dtype: i32,
        origin: *const c_char,
        out: *mut TensorHandle,
    ) {
        let d = dtype_from(dtype)?;
        let dev = device(device_index)?;
        // SAFETY: pointers and strings as documented.
        unsafe {
            let shape = dims(dims_ptr, rank, "dims")?;
            let t = at(origin, || dev.rand_uniform((key0, key1), shape, d))?;
            put_tensor(out, t)
        }
    }

    /// Fills view `out` (on device `device_index`) with samples of
    /// `distribution` keyed by (`key0`, `key1`), converted to its dtype:
    /// "uniform" (from, to), "normal" (mean, std), "integers" (from[, to]:
    /// [from, to), or the dtype's range), "exponential" (lambda), "bernoulli"
    /// (p: a scalar, or a tensor of probabilities shaped as `out`), "gamma"
    /// (a float tensor of shapes: a standard gamma sample per element) and
    /// "poisson" (a float tensor of rates: a count per element) and
    /// "binomial" (float tensors of counts and probabilities, one dtype,
    /// broadcast). `args` are scalar operands, or the tensors of "bernoulli",
    /// "gamma", "poisson" or "binomial".
    fn etpu_sample(
        device_index: i64,
        distribution: *const c_char,
        args: *const OperandArg,
        nargs: usize,
        key0: u64,
        key1: u64,
        out: *const i64,
        origin: *const c_char,
    ) {
        if nargs > MAX_PARAMS || (nargs > 0 && args.is_null()) {
            return Err(Failure::invalid(format!(
                "sample: got {nargs} arguments at {args:?}; expected 0 to {MAX_PARAMS}"
            )));
        }
        let dev = device(device_index)?;
        // SAFETY: strings, operands and the view descriptor as documented.
        unsafe {
            let name = c_str(distribution, "distribution")?;
            let raw = if nargs == 0 { &[][..] } else { std::slice::from_raw_parts(args, nargs) };
            let out = view(out, "out")?;
            at(origin, || -> crate::FfiResult<()> {
                let mut values: SmallVec<[Value; 4]> = SmallVec::new();
                for (i, a) in raw.iter().enumerate() {
                    values.push(read(decode(a, i)?)?);
                }
                let key = (key0, key1);
                let sample = match (name, values.as_slice()) {
                    ("bernoulli", [Value::Tensor(p)]) => p.bernoulli(key)?,
                    ("gamma", [Value::Tensor(alpha)]) => alpha.standard_gamma(key)?,
                    ("poisson", [Value::Tensor(rate)]) => rate.poisson(key)?,
                    ("binomial", [Value::Tensor(count), Value::Tensor(prob)]) => {
                        count.binomial(prob, key)?
                    }
                    _ => {
                        let mut params: SmallVec<[Scalar; 4]> = SmallVec::new();
                        for v in &values {
                            match v {
                                Value::Scalar(s) => params.push(*s),
                                Value::Tensor(t) => {
                                    return Err(Failure::invalid(format!(
                                        "sample: {name} got a tensor {} among its parameters; expected numbers \
                                         (a tensor only as bernoulli's probabilities, gamma's shapes, \
                                         poisson's rates or binomial's counts and probabilities)",
                                        t.ty()
                                    )));
                                }
                            }
                        }
                        let d = Distribution::from_name(name, &params).ok_or_else(|| {
                            Failure::invalid(format!(
                                "sample: unknown distribution \"{name}\" (expected uniform, normal, integers, \
                                 exponential, bernoulli, or gamma, poisson or binomial of tensors)"
                            ))
                        })??;
                        dev.sample(key, out.sizes, out.dtype, d)?
                    }
                };
                out.write(sample)?;
                Ok(())
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handles::{etpu_tensor_free, etpu_tensor_to_host};
    use crate::{ETPU_INVALID_ARGUMENT, ETPU_OK, last_error};

    const ORIGIN: *const c_char = c"random.rs:test".as_ptr();
    const F64: i32 = 9;
    const I64: i32 = 5;

    fn draw(k0: u64, k1: u64) -> Vec<f64> {
        let shape = [64i64];
        let mut t = TensorHandle(0);
        let mut out = vec![0f64; 64];
        // SAFETY: `shape` and `out` are valid for the lengths passed; the
        // handle is this function's, freed once.
        unsafe {
            let s = etpu_rand_uniform(0, k0, k1, shape.as_ptr(), 1, F64, ORIGIN, &mut t);
            assert_eq!(s, ETPU_OK, "{}", last_error());
            let s = etpu_tensor_to_host(t, out.as_mut_ptr().cast(), 64 * 8, std::ptr::null());
            assert_eq!(s, ETPU_OK, "{}", last_error());
            assert_eq!(etpu_tensor_free(t), ETPU_OK);
        }
        out
    }

    #[test]
    fn the_same_key_draws_the_same_samples_in_every_mode() {
        for mode in [
            eagertpu::Mode::Debug,
            eagertpu::Mode::Strict,
            eagertpu::Mode::Fused,
        ] {
            let _mode = eagertpu::with_mode(mode).unwrap();
            let (a, b, c) = (draw(0, 1), draw(0, 1), draw(1, 0));
            assert_eq!(a, b);
            assert!(a.iter().zip(&c).all(|(u, v)| u != v));
            assert!(a.iter().chain(&c).all(|u| (0.0..1.0).contains(u)));
        }
    }

    #[test]
    fn an_integer_dtype_is_an_error_naming_the_op() {
        let shape = [4i64];
        let mut out = TensorHandle(0);
        // SAFETY: `shape` is valid for one read; `out` is writable.
        let s = unsafe { etpu_rand_uniform(0, 1, 2, shape.as_ptr(), 1, I64, ORIGIN, &mut out) };
        assert_eq!(s, ETPU_INVALID_ARGUMENT);
        let e = last_error();
        assert!(e.contains("rand") && e.contains("int64"), "{e}");
    }
}
