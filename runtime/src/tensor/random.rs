//! Counter-based random numbers: a draw is a pure function of its key.
//!
//! The same key gives the same samples on every call, in every mode and on
//! every device of a plugin; a different key gives independent ones. Keys reach the
//! program as parameters (never compiled in, even 0 or 1), so drawing with a
//! new key every step compiles nothing new. Splitting and advancing keys is
//! the caller's business (PyTorch's generator keeps a seed and an offset).

use std::panic::Location;

use fusion::{DType, Op, Scalar};

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

/// A distribution to sample: what PyTorch's in-place random fills draw.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Distribution {
    /// Uniform in `[from, to)`.
    Uniform { from: f64, to: f64 },
    /// Normal (Box-Muller over two uniform draws).
    Normal { mean: f64, std: f64 },
    /// Integers in `[from, to)`: `floor(u (to - from)) + from`, drawn in
    /// float64 so every integer of a large range is reachable. Without `to`,
    /// the dtype's range (`random_()`: up to 2^24 + 1 for float32, 2^53 for
    /// int64 and float64, as PyTorch).
    Integers { from: i64, to: Option<i64> },
    /// Exponential with rate `lambda`: `-log(1 - u) / lambda`.
    Exponential { lambda: f64 },
    /// 1 with probability `p`, else 0.
    Bernoulli { p: f64 },
}

/// An error of `op` about its arguments.
fn invalid(op: &'static str, message: String) -> crate::error::Error {
    fusion::Error::Invalid { op, message }.into()
}

/// `s` as an exact integer.
fn integer(op: &'static str, s: Scalar) -> Result<i64> {
    match s {
        Scalar::Int(v) => Ok(v),
        Scalar::Bool(b) => Ok(b as i64),
        s if s.as_f64().fract() == 0.0 && s.as_f64().abs() < 2f64.powi(63) => Ok(s.as_f64() as i64),
        s => Err(invalid(op, format!("got a bound {s}, expected an integer"))),
    }
}

impl Distribution {
    /// The distribution called `name` with `params` (uniform: from, to;
    /// normal: mean, std; integers: from[, to]; exponential: lambda;
    /// bernoulli: p), or None for an unknown name.
    pub fn from_name(name: &str, params: &[Scalar]) -> Option<Result<Distribution>> {
        let (name, counts): (&'static str, &[usize]) = match name {
            "uniform" => ("uniform", &[2]),
            "normal" => ("normal", &[2]),
            "integers" => ("integers", &[1, 2]),
            "exponential" => ("exponential", &[1]),
            "bernoulli" => ("bernoulli", &[1]),
            _ => return None,
        };
        if !counts.contains(&params.len()) {
            let got = params.iter().map(|p| p.to_string()).collect::<Vec<_>>();
            return Some(Err(invalid(
                name,
                format!(
                    "got the parameters ({}), expected {counts:?} of them",
                    got.join(", ")
                ),
            )));
        }
        let f = |i: usize| params[i].as_f64();
        Some(match name {
            "uniform" => Ok(Distribution::Uniform {
                from: f(0),
                to: f(1),
            }),
            "normal" => Ok(Distribution::Normal {
                mean: f(0),
                std: f(1),
            }),
            "integers" => integer(name, params[0]).and_then(|from| {
                let to = params.get(1).map(|&s| integer(name, s)).transpose()?;
                Ok(Distribution::Integers { from, to })
            }),
            "exponential" => Ok(Distribution::Exponential { lambda: f(0) }),
            _ => Ok(Distribution::Bernoulli { p: f(0) }),
        })
    }

    fn name(self) -> &'static str {
        match self {
            Distribution::Uniform { .. } => "uniform",
            Distribution::Normal { .. } => "normal",
            Distribution::Integers { .. } => "integers",
            Distribution::Exponential { .. } => "exponential",
            Distribution::Bernoulli { .. } => "bernoulli",
        }
    }
}

/// The end of `random_()`'s range for `dtype` (the integers it holds
/// exactly, as PyTorch).
fn default_end(dtype: DType) -> i64 {
    match dtype {
        DType::Bool => 2,
        DType::U8 => 256,
        DType::I8 => 128,
        DType::I16 => 1 << 15,
        DType::I32 => 1 << 31,
        DType::F16 => (1 << 11) + 1,
        DType::BF16 => (1 << 8) + 1,
        DType::F32 => (1 << 24) + 1,
        DType::I64 | DType::F64 | DType::C64 | DType::C128 => 1 << 53,
    }
}

impl Device {
    /// Samples of `d` of `shape` and `dtype`, keyed by `key` (as
    /// [`Device::rand_uniform`]: the same key, the same samples). Uniform,
    /// normal and exponential samples need a float dtype; bad parameters
    /// (`from > to`, a negative std, `p` outside [0, 1], ...) are errors.
    #[track_caller]
    pub fn sample(
        &self,
        key: (u64, u64),
        shape: &[i64],
        dtype: DType,
        d: Distribution,
    ) -> Result<Tensor> {
        let op = d.name();
        let check = |ok: bool, what: String| if ok { Ok(()) } else { Err(invalid(op, what)) };
        if matches!(
            d,
            Distribution::Uniform { .. }
                | Distribution::Normal { .. }
                | Distribution::Exponential { .. }
        ) {
            check(
                dtype.is_float(),
                format!("got a {dtype} tensor, expected a floating-point one"),
            )?;
        }
        // Draws in float32, or float64 for float64 results.
        let draw = if dtype == DType::F64 {
            DType::F64
        } else {
            DType::F32
        };
        match d {
            Distribution::Uniform { from, to } => {
                check(
                    from <= to,
                    format!("expects from <= to, got from={from} to={to}"),
                )?;
                let u = self.rand_uniform(key, shape, draw)?;
                u.mul(to - from)?.add(from)?.to_dtype(dtype)
            }
            Distribution::Normal { mean, std } => {
                check(std >= 0.0, format!("expects std >= 0, got std={std}"))?;
                let two: Vec<i64> = [2].iter().chain(shape).copied().collect();
                let u = self.rand_uniform(key, &two, draw)?;
                let u1 = u.slice(0, 0, 1, 1)?.reshape(shape)?;
                let u2 = u.slice(0, 1, 2, 1)?.reshape(shape)?;
                let radius = u1
                    .binary_scalar(fusion::BinaryOp::Sub, Scalar::from(1.0), true)?
                    .log()?
                    .mul(-2.0)?
                    .sqrt()?;
                let z = radius.mul(&u2.mul(2.0 * std::f64::consts::PI)?.cos()?)?;
                z.mul(std)?.add(mean)?.to_dtype(dtype)
            }
            Distribution::Integers { from, to } => {
                let to = to.unwrap_or_else(|| default_end(dtype));
                check(
                    from < to,
                    format!("expects from < to, got from={from} to={to}"),
                )?;
                // The offset in float64, then `from` added in int64: exact
                // for bounds beyond 2^53 (2^60 + k stays itself).
                let u = self.rand_uniform(key, shape, DType::F64)?;
                let range = to.wrapping_sub(from) as u64 as f64;
                let offset = u.mul(range)?.floor()?.to_dtype(DType::I64)?;
                offset.add(from)?.to_dtype(dtype)
            }
            Distribution::Exponential { lambda } => {
                check(
                    lambda > 0.0,
                    format!("expects lambda > 0, got lambda={lambda}"),
                )?;
                let u = self.rand_uniform(key, shape, draw)?;
                let one_minus = u.binary_scalar(fusion::BinaryOp::Sub, Scalar::from(1.0), true)?;
                one_minus.log()?.mul(-1.0 / lambda)?.to_dtype(dtype)
            }
            Distribution::Bernoulli { p } => {
                check(
                    (0.0..=1.0).contains(&p),
                    format!("expects p in [0, 1], got p={p}"),
                )?;
                self.rand_uniform(key, shape, DType::F32)?
                    .lt(p)?
                    .to_dtype(dtype)
            }
        }
    }
}

impl Tensor {
    /// 1 where a uniform draw keyed by `key` is below `self` (probabilities),
    /// else 0, in `self`'s dtype (`torch.bernoulli`).
    #[track_caller]
    pub fn bernoulli(&self, key: (u64, u64)) -> Result<Tensor> {
        self.expect_float("bernoulli", "floating-point probabilities")?;
        let u = self.device().rand_uniform(key, self.shape(), DType::F32)?;
        u.lt(self)?.to_dtype(self.dtype())
    }

    /// A standard gamma sample of shape `self` per element, keyed by `key`
    /// (`torch._standard_gamma`; `torch.distributions.Gamma`, `Beta` and
    /// `Dirichlet` sample through it). In `self`'s float dtype, never below
    /// its smallest normal value (as the CPU); NaN where the shape is
    /// negative or NaN.
    #[track_caller]
    pub fn standard_gamma(&self, key: (u64, u64)) -> Result<Tensor> {
        self.draw_per_element(Op::RandGamma, &[], key, "floating-point shapes (alpha)")
    }

    /// A Poisson sample of rate `self` per element, keyed by `key`
    /// (`torch.poisson`), in `self`'s float dtype; NaN where the rate is
    /// negative, NaN or infinite.
    #[track_caller]
    pub fn poisson(&self, key: (u64, u64)) -> Result<Tensor> {
        self.draw_per_element(Op::RandPoisson, &[], key, "floating-point rates")
    }

    /// A binomial sample of `self` trials of probability `prob` per element,
    /// keyed by `key` (`torch.binomial`); both float tensors of one dtype,
    /// broadcast together. 0 for a count or probability at or below 0, the
    /// count for a probability at or above 1, NaN for a NaN count or
    /// probability.
    #[track_caller]
    pub fn binomial(&self, prob: &Tensor, key: (u64, u64)) -> Result<Tensor> {
        let op = Op::RandBinomial;
        if prob.dtype() != self.dtype() {
            return Err(invalid(
                op.name(),
                format!(
                    "got counts {} and probabilities {}, expected one float dtype",
                    self.ty(),
                    prob.ty()
                ),
            ));
        }
        let shape = fusion::shape::broadcast_shapes(op.name(), self.shape(), prob.shape())?;
        let count = self.broadcast_to(&shape)?;
        let prob = prob.broadcast_to(&shape)?;
        count.draw_per_element(op, &[&prob], key, "floating-point counts")
    }

    /// The scaled reparameterized gradient `-(dF/dalpha) / f / (1 - x)` of
    /// Beta(alpha, beta = total - alpha) samples `self` (x), beta held fixed
    /// (`torch._dirichlet_grad`, which Dirichlet's and Beta's `rsample()`
    /// backward combines). `alpha` and `total` broadcast to `self`'s shape;
    /// all three of one float dtype.
    #[track_caller]
    pub fn dirichlet_grad(&self, alpha: &Tensor, total: &Tensor) -> Result<Tensor> {
        let op = Op::DirichletGrad;
        if alpha.dtype() != self.dtype() || total.dtype() != self.dtype() {
            return Err(invalid(
                op.name(),
                format!(
                    "got x {}, alpha {} and total {}, expected one float dtype",
                    self.ty(),
                    alpha.ty(),
                    total.ty()
                ),
            ));
        }
        self.expect_float(op.name(), "floating-point samples")?;
        let alpha = alpha.broadcast_to(self.shape())?;
        let total = total.broadcast_to(self.shape())?;
        self.op(op, &[&alpha, &total])
    }

    /// Records `op`, a sampler with parameters per element (`self`, then
    /// `others`).
    #[track_caller]
    fn draw_per_element(
        &self,
        op: Op,
        others: &[&Tensor],
        key: (u64, u64),
        expected: &'static str,
    ) -> Result<Tensor> {
        self.expect_float(op.name(), expected)?;
        self.record(op.name(), others, |r| {
            let k0 = r.key(key.0 as i64)?;
            let k1 = r.key(key.1 as i64)?;
            let mut inputs = vec![&self.value];
            inputs.extend(others.iter().map(|t| &t.value));
            inputs.extend([&k0, &k1]);
            r.node(op, &inputs)
        })
    }

    /// `where(mask, self, 0) * scale`: dropout's output from its keep mask,
    /// and its gradient (PyTorch's `_masked_scale`).
    #[track_caller]
    pub fn masked_scale(&self, mask: &Tensor, scale: f64) -> Result<Tensor> {
        if mask.dtype() != DType::Bool {
            return Err(invalid(
                "masked_scale",
                format!("got a mask {}, expected a bool one", mask.ty()),
            ));
        }
        Tensor::where_(mask, self, 0.0)?.mul(scale)
    }
}
