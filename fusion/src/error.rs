//! Errors for bad input: every variant names the op, what it was given and what
//! it expected.

use crate::dtype::DType;
use crate::shape::ShapeDisplay;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    #[error(
        "{op}: shapes {} and {} cannot be broadcast together (expected each dim to be equal or 1)",
        ShapeDisplay(.lhs),
        ShapeDisplay(.rhs)
    )]
    Broadcast {
        op: &'static str,
        lhs: Vec<i64>,
        rhs: Vec<i64>,
    },

    #[error("{op}: got {got}, expected {expected}")]
    ShapeMismatch {
        op: &'static str,
        got: String,
        expected: String,
    },

    #[error("{op}: dtype {got} is not supported (expected {expected})")]
    UnsupportedDType {
        op: &'static str,
        got: DType,
        expected: &'static str,
    },

    #[error("{op}: got dtypes {lhs} and {rhs}, expected both to be the same")]
    DTypeMismatch {
        op: &'static str,
        lhs: DType,
        rhs: DType,
    },

    #[error(
        "{op}: dim {dim} is out of range for a tensor with {rank} dims (expected a dim in [{}, {}])",
        -(*.rank.max(&1) as i64),
        *.rank.max(&1) as i64 - 1
    )]
    BadDim {
        op: &'static str,
        dim: i64,
        rank: usize,
    },

    #[error("{op}: index {index} is out of range for dim {dim} of size {size}")]
    IndexOutOfRange {
        op: &'static str,
        index: i64,
        dim: usize,
        size: i64,
    },

    /// Found on the device after the op ran (strict and fused mode): XLA
    /// clamped the index, so results computed from it are wrong.
    #[error(
        "{op}: an index was out of range for dim {dim} of size {size} (found at the next sync: \
         the device clamped it, so results computed from it are wrong)"
    )]
    IndexOutOfRangeOnDevice {
        op: &'static str,
        dim: usize,
        size: i64,
    },

    #[error(
        "{op}: cannot reshape a tensor of shape {} ({} elements) to {} ({} elements)",
        ShapeDisplay(.from),
        .from.iter().product::<i64>(),
        ShapeDisplay(.to),
        .to.iter().product::<i64>()
    )]
    Reshape {
        op: &'static str,
        from: Vec<i64>,
        to: Vec<i64>,
    },

    #[error("{op}: got {got} inputs, expected {expected}")]
    Arity {
        op: &'static str,
        got: usize,
        expected: usize,
    },

    #[error("{op}: {message}")]
    Invalid { op: &'static str, message: String },
}

impl Error {
    /// The op the error is about.
    pub fn op(&self) -> &'static str {
        match self {
            Error::Broadcast { op, .. }
            | Error::ShapeMismatch { op, .. }
            | Error::UnsupportedDType { op, .. }
            | Error::DTypeMismatch { op, .. }
            | Error::BadDim { op, .. }
            | Error::IndexOutOfRange { op, .. }
            | Error::IndexOutOfRangeOnDevice { op, .. }
            | Error::Reshape { op, .. }
            | Error::Arity { op, .. }
            | Error::Invalid { op, .. } => op,
        }
    }
}
