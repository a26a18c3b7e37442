//! EagerTPU: an eager-first TPU runtime.
//!
//! ```no_run
//! use eagertpu::{DType, Tensor};
//! # fn main() -> eagertpu::Result<()> {
//! let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
//! let y = (&x.matmul(&x)? * 0.5)?.relu()?;
//! assert_eq!(y.to_vec::<f32>()?, vec![3.5, 5.0, 7.5, 11.0]);
//! let ids = Tensor::arange(0, 4, 1)?; // int64
//! assert_eq!(ids.dtype(), DType::I64);
//! # Ok(()) }
//! ```
//!
//! Ops run on the device of a PJRT plugin (libtpu on a TPU host, the XLA CPU
//! plugin elsewhere); `EAGERTPU_MODE` picks how (see README.md). Every op
//! returns a `Result`: bad input is an error naming the op, what it got and
//! what it expected, and the next op works.

pub use fusion::policy::CutReason;
pub use fusion::{BinaryOp, CollectiveReduce, DType, Polynomial, Reduction, Scalar, UnaryOp};
pub use runtime::pjrt::MemoryStats;
/// Storages addressed as a foreign framework's allocator addresses them (the
/// PyTorch backend's `tpu` memory).
pub use runtime::storage;
pub use runtime::{
    Activation, Adam, AdamParam, AdamUpdate, ArgReduce, BatchNormOutput, Complex32, Complex64,
    Cumulative, Device, Distribution, Element, Error, Extreme, FftNorm, GradScaling, GruCellGrad,
    Interpolation, KeyValueStore, KvFailure, LstmCell, LstmCellGrad, Manifest, Marker, Metrics,
    Mode, ModeGuard, Operand, OrderStatistic, OrderStatisticKind, PadMode, PointwiseLoss,
    PointwiseLossKind, ProcessGroup, Reduce, Result, ScatterReduction, Sgd, SgdParam, SgdUpdate,
    Subgroups, Tensor, as_one_op, begin_one_op, check_distributed_store, default_device,
    end_one_op, manifest, metrics, mode, note_fallback, set_check_nan, set_deterministic,
    set_distributed_store, set_mode, shutdown, sync, timing, trace, wait_for_compiles, with_mode,
    with_origin,
};

/// Lower layers, for tools and tests: the op IR and the PJRT wrappers.
pub mod internals {
    pub use fusion;
    pub use runtime::bench_hooks;
    pub use runtime::pjrt;
    pub use runtime::slots::Slots;
}
