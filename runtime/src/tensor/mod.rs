//! `Tensor`: the Rust API for eager tensor code.
//!
//! A tensor is a handle to a value on one device. Every op checks its inputs
//! when called (a bad shape, dtype, dim or index is an `Err` naming the op, what
//! it got and what it expected) and records the op on the device's stream;
//! failures never panic and leave the runtime usable. Ops are `#[track_caller]`:
//! errors that surface later name the line that called the op.

mod activation;
mod conv;
mod create;
mod device;
mod elementwise;
mod fft;
pub(crate) mod group;
mod index;
mod layout;
mod linalg;
mod loss;
mod nn;
mod norm;
mod ops;
mod optim;
mod order;
mod pointwise;
mod pool;
mod random;
mod reduce;
mod resample;
mod rnn;
mod scan;

use std::panic::Location;
use std::sync::Arc;

use fusion::{DType, TensorType};

pub use activation::Activation;
pub use device::{Device, default_device};
pub use elementwise::Operand;
pub use fft::FftNorm;
pub use group::{ProcessGroup, Subgroups};
pub use index::ScatterReduction;
pub use loss::{PointwiseLoss, PointwiseLossKind};
pub use norm::BatchNormOutput;
pub use optim::{Adam, AdamParam, AdamUpdate, GradScaling, Sgd, SgdParam, SgdUpdate};
pub use order::{OrderStatistic, OrderStatisticKind};
pub use random::Distribution;
pub use reduce::{ArgReduce, Extreme, Reduce};
pub use resample::{Interpolation, PadMode};
pub use rnn::{GruCellGrad, LstmCell, LstmCellGrad};
pub use scan::Cumulative;

use crate::context::{self, Runtime};
use crate::error::{Error, Result};
use crate::host::{self, Element};
use crate::metrics::Counters;
use crate::stream::{Recorder, Stream};
use crate::value::Value;

/// A multi-dimensional array on a device.
#[derive(Clone)]
pub struct Tensor {
    value: Arc<Value>,
    stream: &'static Stream,
}

impl Tensor {
    fn new(value: Arc<Value>, stream: &'static Stream) -> Tensor {
        Tensor { value, stream }
    }

    /// Whether this tensor is `value`.
    pub(crate) fn is(&self, value: &Arc<Value>) -> bool {
        Arc::ptr_eq(&self.value, value)
    }

    /// The dimension sizes, outermost first.
    pub fn shape(&self) -> &[i64] {
        &self.value.ty.shape
    }

    pub fn dtype(&self) -> DType {
        self.value.ty.dtype
    }

    /// Dtype and shape.
    pub fn ty(&self) -> &TensorType {
        &self.value.ty
    }

    /// An error naming `op` unless this tensor's dtype is floating-point
    /// (`expected` says what `op` takes).
    pub(crate) fn expect_float(&self, op: &'static str, expected: &'static str) -> Result<()> {
        if self.dtype().is_float() {
            return Ok(());
        }
        Err(fusion::Error::UnsupportedDType {
            op,
            got: self.dtype(),
            expected,
        }
        .into())
    }

    /// Number of dims.
    pub fn rank(&self) -> usize {
        self.value.ty.rank()
    }

    /// Number of elements.
    pub fn numel(&self) -> i64 {
        self.value.ty.numel()
    }

    /// The device the tensor lives on.
    pub fn device(&self) -> Device {
        Device::from_stream(self.stream)
    }

    /// Records the op(s) `build` adds, over this tensor's stream, at the
    /// caller's location; every tensor in `others` must be on the same device.
    #[track_caller]
    fn record(
        &self,
        op_name: &'static str,
        others: &[&Tensor],
        build: impl FnOnce(&mut Recorder) -> Result<Arc<Value>>,
    ) -> Result<Tensor> {
        let origin = crate::origin::current(Location::caller());
        let rt = context::get()?;
        same_device(op_name, self, others)?;
        let value = self.stream.record(rt, origin, build)?;
        Ok(Tensor::new(value, self.stream))
    }

    /// Records an op whose only inputs are `self` and `others`, in that order.
    #[track_caller]
    fn op(&self, op: fusion::Op, others: &[&Tensor]) -> Result<Tensor> {
        let name = op.name();
        self.record(name, others, |r| {
            let mut inputs: Vec<&Arc<Value>> = Vec::with_capacity(1 + others.len());
            inputs.push(&self.value);
            inputs.extend(others.iter().map(|t| &t.value));
            r.node(op, &inputs)
        })
    }

    /// Records two ops of `self` alone that belong together (values and
    /// where they came from: max pooling, sort), as one call at the caller's
    /// location.
    #[track_caller]
    fn op_pair(&self, values: fusion::Op, indices: fusion::Op) -> Result<(Tensor, Tensor)> {
        let name = values.name();
        let mut second = None;
        let first = self.record(name, &[], |r| {
            let v = r.node(values, &[&self.value])?;
            second = Some(r.node(indices, &[&self.value])?);
            Ok(v)
        })?;
        let second =
            second.ok_or_else(|| Error::Internal(format!("{name}: no indices recorded")))?;
        Ok((first, Tensor::new(second, self.stream)))
    }

    /// Waits for the tensor's value (a host sync); returns its buffer.
    #[track_caller]
    fn ready(&self, rt: &Runtime) -> Result<Arc<crate::pjrt::Buffer>> {
        self.stream.read(rt, &self.value)
    }

    /// Copies the elements to the host, in row-major order. `T` must be the
    /// tensor's dtype (convert first with [`Tensor::to_dtype`]).
    #[track_caller]
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        if T::DTYPE != self.dtype() {
            return Err(fusion::Error::Invalid {
                op: "to_vec",
                message: format!(
                    "the tensor {} has dtype {}, but {} was requested; convert first with .to_dtype(DType::{:?})",
                    self.ty(),
                    self.dtype(),
                    T::DTYPE,
                    T::DTYPE
                ),
            }
            .into());
        }
        let rt = context::get()?;
        let out = self
            .stream
            .read_with(rt, &self.value, |b| host::read::<T>(b, self.ty()))?;
        Counters::add(&rt.counters.transfers_to_host, 1);
        Counters::add(
            &rt.counters.bytes_to_host,
            (self.numel() as usize * self.dtype().size_in_bytes()) as u64,
        );
        Ok(out)
    }

    /// Copies the elements into `dst` as raw bytes (the device's element
    /// layout, row-major); `dst` must be exactly the tensor's size.
    #[track_caller]
    pub fn read_bytes(&self, dst: &mut [u8]) -> Result<()> {
        let size = self.numel() as usize * self.dtype().size_in_bytes();
        if dst.len() != size {
            return Err(fusion::Error::ShapeMismatch {
                op: "to_host",
                got: format!("a destination of {} bytes", dst.len()),
                expected: format!("{size} bytes for the tensor {}", self.ty()),
            }
            .into());
        }
        let rt = context::get()?;
        self.stream.read_with(rt, &self.value, |b| b.to_host(dst))?;
        Counters::add(&rt.counters.transfers_to_host, 1);
        Counters::add(&rt.counters.bytes_to_host, size as u64);
        Ok(())
    }

    /// Copies the elements to the host as f64, whatever the dtype.
    #[track_caller]
    pub fn to_f64_vec(&self) -> Result<Vec<f64>> {
        let rt = context::get()?;
        let out = self
            .stream
            .read_with(rt, &self.value, |b| host::read_f64(b, self.ty()))?;
        Counters::add(&rt.counters.transfers_to_host, 1);
        Ok(out)
    }

    /// The value of a one-element tensor.
    #[track_caller]
    pub fn item<T: Element>(&self) -> Result<T> {
        if self.numel() != 1 {
            return Err(fusion::Error::ShapeMismatch {
                op: "item",
                got: format!("a tensor {} with {} elements", self.ty(), self.numel()),
                expected: "exactly one element".into(),
            }
            .into());
        }
        Ok(self.to_vec::<T>()?[0])
    }

    /// The address of this tensor's device buffer once computed, as JAX's
    /// `Array.unsafe_buffer_pointer()`: two tensors at one address share
    /// memory (an update reused its input's). Never dereferenced here.
    #[track_caller]
    pub fn unsafe_buffer_pointer(&self) -> Result<usize> {
        self.ready(context::get()?)?.device_address()
    }

    /// Waits until this tensor is computed; its error if it failed.
    #[track_caller]
    pub fn sync(&self) -> Result<()> {
        self.ready(context::get()?).map(|_| ())
    }
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tensor({} on {:?})", self.ty(), self.device())
    }
}

/// Every tensor of one op must be on one device, as in PyTorch.
fn same_device(op: &'static str, first: &Tensor, others: &[&Tensor]) -> Result<()> {
    if let Some(other) = others
        .iter()
        .find(|t| !std::ptr::eq(t.stream, first.stream))
    {
        return Err(fusion::Error::Invalid {
            op,
            message: format!(
                "expected all tensors on one device, got tensors on {:?} and {:?}",
                first.device(),
                other.device()
            ),
        }
        .into());
    }
    Ok(())
}

/// Runs everything recorded so far, on every device, and waits for it;
/// returns the first failure.
pub fn sync() -> Result<()> {
    let rt = context::get()?;
    let mut first = Ok(());
    for s in &rt.streams {
        if let Err(e) = s.sync(rt)
            && first.is_ok()
        {
            first = Err(e);
        }
    }
    first
}
