//! Counter-based random numbers: a draw is a pure function of its key.
//!
//! The same key gives the same samples on every call, in every mode and on
//! every device of a plugin; a different key gives independent ones. Keys reach the
//! program as parameters (never compiled in, even 0 or 1), so drawing with a
//! new key every step compiles nothing new. Splitting and advancing keys is
//! the caller's business (PyTorch's generator keeps a seed and an offset).

use std::panic::Location;

use fusion::{DType, Op};

use super::{Device, Tensor};
use crate::context;
use crate::error::Result;

impl Device {
    /// Samples uniform in `[0, 1)` of `shape` and a float `dtype`, from the
    /// Threefry generator keyed by `key`. 16-bit floats are drawn as f32 and
    /// rounded, staying below 1.
    #[track_caller]
    pub fn rand_uniform(&self, key: (u64, u64), shape: &[i64], dtype: DType) -> Result<Tensor> {
        let origin = crate::origin::current(Location::caller());
        let rt = context::get()?;
        let op = Op::RandUniform {
            shape: shape.into(),
            dtype,
        };
        let value = self.stream.record(rt, origin, |r| {
            // The bits of each key, as the int64 the program takes.
            let k0 = r.key(key.0 as i64)?;
            let k1 = r.key(key.1 as i64)?;
            r.node(op, &[&k0, &k1])
        })?;
        Ok(Tensor::new(value, self.stream))
    }
}

impl Tensor {
    /// [`Device::rand_uniform`] on `device`.
    #[track_caller]
    pub fn rand_uniform(
        device: &Device,
        key: (u64, u64),
        shape: &[i64],
        dtype: DType,
    ) -> Result<Tensor> {
        device.rand_uniform(key, shape, dtype)
    }
}
