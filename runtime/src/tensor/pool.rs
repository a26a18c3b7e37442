//! Max and average pooling with the semantics of PyTorch's
//! `max_pool{1,2,3}d_with_indices` and `avg_pool{1,2,3}d`, over the trailing
//! `kernel.len()` dims of `[N, C, *spatial]` or `[C, *spatial]`.
//!
//! Each list holds one value per spatial dim, or one value for all of them;
//! an empty `stride` is the kernel (PyTorch's default), an empty `padding`
//! is 0 and an empty `dilation` 1. The backward of max pooling is the
//! caller's: a `scatter_add` of the gradient at the indices, over the
//! flattened spatial plane.

use fusion::{Op, PoolSpec, Shape};

use super::Tensor;
use crate::error::Result;

/// `values` for each of `n` dims: as given, one value repeated, or `default`
/// when empty.
fn per_dim(values: &[i64], n: usize, default: &[i64]) -> Shape {
    match values {
        [] => default.into(),
        [v] => std::iter::repeat_n(*v, n.max(1)).collect(),
        _ => values.into(),
    }
}

fn spec(
    kernel: &[i64],
    stride: &[i64],
    padding: &[i64],
    dilation: &[i64],
    ceil_mode: bool,
) -> Box<PoolSpec> {
    let n = kernel.len();
    let kernel: Shape = kernel.into();
    Box::new(PoolSpec {
        stride: per_dim(stride, n, &kernel),
        padding: per_dim(padding, n, &vec![0; n]),
        dilation: per_dim(dilation, n, &vec![1; n]),
        kernel,
        ceil_mode,
    })
}

impl Tensor {
    /// The max of each window and where it is: (values, int64 indices), the
    /// indices flat within each spatial plane (`h * W + w`), as
    /// `max_pool2d_with_indices`. Padding never wins; NaN does; ties pick the
    /// first index.
    #[track_caller]
    pub fn max_pool(
        &self,
        kernel: &[i64],
        stride: &[i64],
        padding: &[i64],
        dilation: &[i64],
        ceil_mode: bool,
    ) -> Result<(Tensor, Tensor)> {
        let spec = spec(kernel, stride, padding, dilation, ceil_mode);
        self.op_pair(Op::MaxPool(spec.clone()), Op::MaxPoolIndices(spec))
    }

    /// The mean of each window (zero padding): divided by `divisor_override`
    /// when given, else by the window's size clipped to the padded input
    /// (`count_include_pad`) or by its number of input elements.
    #[track_caller]
    pub fn avg_pool(
        &self,
        kernel: &[i64],
        stride: &[i64],
        padding: &[i64],
        ceil_mode: bool,
        count_include_pad: bool,
        divisor_override: Option<i64>,
    ) -> Result<Tensor> {
        let op = Op::AvgPool {
            pool: spec(kernel, stride, padding, &[], ceil_mode),
            count_include_pad,
            divisor_override,
        };
        self.op(op, &[])
    }
}
