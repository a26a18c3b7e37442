//! Making tensors: from host data, and filled, ranged and spaced on the device.

use std::panic::Location;

use fusion::{BinaryOp, DType, Op, Scalar, TensorType};

use super::{Device, Tensor, default_device};
use crate::context;
use crate::error::Result;
use crate::host::Element;
use crate::metrics::Counters;
use crate::pjrt::Buffer;
use crate::value::Value;

impl Device {
    /// A tensor of `shape` holding `data` (row-major), copied to this device.
    pub fn tensor<T: Element>(&self, data: &[T], shape: &[i64]) -> Result<Tensor> {
        let ty = TensorType::new(T::DTYPE, shape);
        fusion::shape::check_shape("tensor", shape)?;
        if data.len() as i64 != ty.numel() {
            return Err(fusion::Error::ShapeMismatch {
                op: "tensor",
                got: format!("{} elements", data.len()),
                expected: format!("{} elements for shape {:?}", ty.numel(), shape),
            }
            .into());
        }
        let rt = context::get()?;
        let span = crate::trace::to_device(&ty);
        let buffer = T::with_bytes(data, |bytes| {
            Buffer::from_host(&self.stream.device, T::DTYPE, shape, bytes)
        })?;
        drop(span);
        Counters::add(&rt.counters.transfers_to_device, 1);
        Counters::add(
            &rt.counters.bytes_to_device,
            std::mem::size_of_val(data) as u64,
        );
        Ok(Tensor::new(Value::ready(ty, buffer), self.stream))
    }

    /// A tensor of `dtype` and `shape` from raw bytes in the device's element
    /// layout (little-endian, row-major; bools as 0 or 1).
    pub fn tensor_from_bytes(&self, dtype: DType, shape: &[i64], bytes: &[u8]) -> Result<Tensor> {
        fusion::shape::check_shape("tensor", shape)?;
        let ty = TensorType::new(dtype, shape);
        let expected = ty.numel() as usize * dtype.size_in_bytes();
        if bytes.len() != expected {
            return Err(fusion::Error::ShapeMismatch {
                op: "tensor",
                got: format!("{} bytes", bytes.len()),
                expected: format!("{expected} bytes for a {dtype} tensor of shape {shape:?}"),
            }
            .into());
        }
        if dtype == DType::Bool && bytes.iter().any(|b| *b > 1) {
            return Err(fusion::Error::Invalid {
                op: "tensor",
                message: "bool data must be bytes 0 or 1".into(),
            }
            .into());
        }
        let rt = context::get()?;
        let span = crate::trace::to_device(&ty);
        let buffer = Buffer::from_host(&self.stream.device, dtype, shape, bytes)?;
        drop(span);
        Counters::add(&rt.counters.transfers_to_device, 1);
        Counters::add(&rt.counters.bytes_to_device, bytes.len() as u64);
        Ok(Tensor::new(Value::ready(ty, buffer), self.stream))
    }

    /// A 0-d tensor holding `value`.
    pub fn scalar<T: Element>(&self, value: T) -> Result<Tensor> {
        self.tensor(&[value], &[])
    }

    #[track_caller]
    fn create(&self, op: Op) -> Result<Tensor> {
        let origin = crate::origin::current(Location::caller());
        let rt = context::get()?;
        let value = self.stream.record(rt, origin, |r| r.node(op, &[]))?;
        Ok(Tensor::new(value, self.stream))
    }

    /// A tensor of `shape` and `dtype` filled with `value`.
    #[track_caller]
    pub fn full(&self, shape: &[i64], value: impl Into<Scalar>, dtype: DType) -> Result<Tensor> {
        self.create(Op::Full {
            value: value.into(),
            ty: TensorType::new(dtype, shape),
        })
    }

    #[track_caller]
    pub fn zeros(&self, shape: &[i64], dtype: DType) -> Result<Tensor> {
        self.full(shape, 0, dtype)
    }

    #[track_caller]
    pub fn ones(&self, shape: &[i64], dtype: DType) -> Result<Tensor> {
        self.full(shape, 1, dtype)
    }

    /// `start, start + step, ...` up to (excluding) `end`, as `torch.arange`:
    /// int64 when all three are integers, else float32.
    #[track_caller]
    pub fn arange(
        &self,
        start: impl Into<Scalar>,
        end: impl Into<Scalar>,
        step: impl Into<Scalar>,
    ) -> Result<Tensor> {
        let (start, end, step) = (start.into(), end.into(), step.into());
        let float = [start, end, step]
            .iter()
            .any(|s| matches!(s, Scalar::Float(_)));
        let dtype = if float {
            DType::DEFAULT_FLOAT
        } else {
            DType::DEFAULT_INT
        };
        self.arange_with(start, end, step, dtype)
    }

    /// `arange` with an explicit dtype.
    #[track_caller]
    pub fn arange_with(
        &self,
        start: impl Into<Scalar>,
        end: impl Into<Scalar>,
        step: impl Into<Scalar>,
        dtype: DType,
    ) -> Result<Tensor> {
        let (start, end, step) = (start.into(), end.into(), step.into());
        let (s, e, st) = (start.as_f64(), end.as_f64(), step.as_f64());
        if st == 0.0 || !s.is_finite() || !e.is_finite() || !st.is_finite() {
            return Err(fusion::Error::Invalid {
                op: "arange",
                message: format!("start {start}, end {end}, step {step}: expected finite bounds and a non-zero step"),
            }
            .into());
        }
        if dtype.is_int() && step.as_i64() == 0 {
            return Err(fusion::Error::Invalid {
                op: "arange",
                message: format!(
                    "step {step} truncates to 0 in {dtype}; expected a step of at least 1 in magnitude"
                ),
            }
            .into());
        }
        if (e - s) * st < 0.0 {
            return Err(fusion::Error::Invalid {
                op: "arange",
                message: format!(
                    "start {start}, end {end}: the step {step} points away from the end"
                ),
            }
            .into());
        }
        let integral = |x: Scalar| !matches!(x, Scalar::Float(_));
        let len = if integral(start) && integral(end) && integral(step) {
            // Exactly, in integers: int64 bounds beyond 2^53 do not survive f64.
            let (s, e, st) = (
                start.as_i64() as i128,
                end.as_i64() as i128,
                step.as_i64() as i128,
            );
            let span = e - s;
            (if span == 0 {
                0
            } else {
                (span + st - st.signum()) / st
            })
            .max(0) as i64
        } else {
            ((e - s) / st).ceil().max(0.0) as i64
        };
        self.create(Op::Arange {
            start,
            step,
            len,
            dtype,
        })
    }

    /// The `n` x `m` identity of `dtype`: ones on the diagonal (`torch.eye`).
    #[track_caller]
    pub fn eye(&self, n: i64, m: i64, dtype: DType) -> Result<Tensor> {
        if n < 0 || m < 0 {
            return Err(fusion::Error::Invalid {
                op: "eye",
                message: format!("got {n} x {m}, expected non-negative sizes"),
            }
            .into());
        }
        if n == 0 || m == 0 {
            return self.zeros(&[n, m], dtype);
        }
        let rows = self.arange_with(0, n, 1, DType::I64)?.reshape(&[n, 1])?;
        let columns = self.arange_with(0, m, 1, DType::I64)?;
        rows.eq(&columns)?.to_dtype(dtype)
    }

    /// `steps` values evenly spaced from `start` to `end` inclusive (float32).
    #[track_caller]
    pub fn linspace(&self, start: f64, end: f64, steps: i64) -> Result<Tensor> {
        self.linspace_with(start, end, steps, DType::DEFAULT_FLOAT)
    }

    /// PyTorch's linspace: the first half counts up from `start`, the second
    /// half down from `end`, so both ends are exact (one step gives `start`);
    /// integer dtypes truncate the ends first. Computed in float64 from
    /// lifted scalars, so other ends never compile another program.
    #[track_caller]
    pub fn linspace_with(&self, start: f64, end: f64, steps: i64, dtype: DType) -> Result<Tensor> {
        if steps < 0 || dtype == DType::Bool {
            return Err(fusion::Error::Invalid {
                op: "linspace",
                message: format!(
                    "steps {steps} of {dtype}: expected a non-negative number of steps of a numeric dtype"
                ),
            }
            .into());
        }
        let (start, end) = if dtype.is_float() {
            (start, end)
        } else {
            (start.trunc(), end.trunc())
        };
        if steps <= 1 {
            return self.full(&[steps], start, DType::F64)?.to_dtype(dtype);
        }
        let step = (end - start) / (steps - 1) as f64;
        let i = self.arange_with(0, steps, 1, DType::F64)?;
        let up = i.mul(step)?.add(start)?;
        let down = i
            .binary_op_reversed(BinaryOp::Sub, (steps - 1) as f64)?
            .mul(step)?;
        let down = down.binary_op_reversed(BinaryOp::Sub, end)?;
        let first_half = i.lt((steps / 2) as f64)?;
        Tensor::where_(&first_half, &up, &down)?.to_dtype(dtype)
    }
}

/// Constructors on the default device (device 0).
impl Tensor {
    /// A tensor of `shape` holding `data` (row-major) on the default device.
    pub fn from_slice<T: Element>(data: &[T], shape: &[i64]) -> Result<Tensor> {
        default_device()?.tensor(data, shape)
    }

    /// A 1-d tensor holding `data`.
    pub fn from_vec<T: Element>(data: Vec<T>) -> Result<Tensor> {
        let n = data.len() as i64;
        default_device()?.tensor(&data, &[n])
    }

    /// A 0-d tensor.
    pub fn scalar<T: Element>(value: T) -> Result<Tensor> {
        default_device()?.scalar(value)
    }

    #[track_caller]
    pub fn full(shape: &[i64], value: impl Into<Scalar>, dtype: DType) -> Result<Tensor> {
        default_device()?.full(shape, value, dtype)
    }

    #[track_caller]
    pub fn zeros(shape: &[i64], dtype: DType) -> Result<Tensor> {
        default_device()?.zeros(shape, dtype)
    }

    #[track_caller]
    pub fn ones(shape: &[i64], dtype: DType) -> Result<Tensor> {
        default_device()?.ones(shape, dtype)
    }

    #[track_caller]
    pub fn arange(
        start: impl Into<Scalar>,
        end: impl Into<Scalar>,
        step: impl Into<Scalar>,
    ) -> Result<Tensor> {
        default_device()?.arange(start, end, step)
    }

    #[track_caller]
    pub fn linspace(start: f64, end: f64, steps: i64) -> Result<Tensor> {
        default_device()?.linspace(start, end, steps)
    }

    /// A tensor filled with `value`, shaped and typed like `self`, on its device.
    #[track_caller]
    pub fn full_like(&self, value: impl Into<Scalar>) -> Result<Tensor> {
        self.device().full(self.shape(), value, self.dtype())
    }

    #[track_caller]
    pub fn zeros_like(&self) -> Result<Tensor> {
        self.full_like(0)
    }

    #[track_caller]
    pub fn ones_like(&self) -> Result<Tensor> {
        self.full_like(1)
    }

    /// Copies the tensor to `device` (through the host).
    pub fn to_device(&self, device: &Device) -> Result<Tensor> {
        if *device == self.device() {
            return Ok(self.clone());
        }
        macro_rules! copy {
            ($($d:ident => $t:ty),*) => {
                match self.dtype() {
                    $(DType::$d => device.tensor(&self.to_vec::<$t>()?, self.shape()),)*
                }
            };
        }
        copy!(Bool => bool, U8 => u8, I8 => i8, I16 => i16, I32 => i32, I64 => i64,
            F16 => half::f16, BF16 => half::bf16, F32 => f32, F64 => f64,
            C64 => num_complex::Complex32, C128 => num_complex::Complex64)
    }
}
