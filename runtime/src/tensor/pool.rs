//! Max and average pooling with the semantics of PyTorch's
//! `max_pool{1,2,3}d_with_indices` and `avg_pool{1,2,3}d`, over the trailing
//! `kernel.len()` dims of `[N, C, *spatial]` or `[C, *spatial]`.
//!
//! Each list holds one value per spatial dim, or one value for all of them;
//! an empty `stride` is the kernel (PyTorch's default), an empty `padding`
//! is 0 and an empty `dilation` 1. The backward of max pooling is the
//! caller's: a `scatter_add` of the gradient at the indices, over the
//! flattened spatial plane. The backward of average pooling is
//! [`Tensor::avg_pool_backward`], composed of pooling and a transposed
//! convolution.

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

    /// The gradient of [`Tensor::avg_pool`] with respect to its input, of
    /// shape `input_sizes` (`[N, C, *spatial]` or `[C, *spatial]`), from
    /// `self` = the gradient of its output and the pooling's attributes
    /// (`avg_pool2d_backward`).
    ///
    /// Each output's gradient, divided by its window's divisor, is spread
    /// over the window: a transposed depthwise convolution with a kernel of
    /// ones. The divisors come from pooling ones: `avg(ones)` is `count /
    /// divisor` and a sum pool (divisor 1) of ones is `count`. Ceil mode's
    /// last windows overhang the input: the gradient is spread over an input
    /// extended to hold them, then cropped.
    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    pub fn avg_pool_backward(
        &self,
        input_sizes: &[i64],
        kernel: &[i64],
        stride: &[i64],
        padding: &[i64],
        ceil_mode: bool,
        count_include_pad: bool,
        divisor_override: Option<i64>,
    ) -> Result<Tensor> {
        let op = "avg_pool_backward";
        let n = kernel.len();
        self.expect_float(op, "a floating-point gradient")?;
        if n == 0 || !(n + 1..=n + 2).contains(&input_sizes.len()) {
            return Err(fusion::Error::ShapeMismatch {
                op,
                got: format!("input sizes {input_sizes:?} for a kernel {kernel:?}"),
                expected: format!(
                    "{} or {} input dims ([N, C, *spatial] or [C, *spatial]) and a kernel of 1 to 3 dims",
                    n + 2,
                    n + 1
                ),
            }
            .into());
        }
        let (lead, spatial) = input_sizes.split_at(input_sizes.len() - n);
        let dtype = self.dtype();
        let device = self.device();
        let plane: Vec<i64> = [1, 1].iter().chain(spatial).copied().collect();
        let ones = device.ones(&plane, dtype)?;
        let pool = |divisor| {
            ones.avg_pool(
                kernel,
                stride,
                padding,
                ceil_mode,
                count_include_pad,
                divisor,
            )
        };
        let avg = pool(divisor_override)?;
        let out = &avg.shape()[2..];
        let want: Vec<i64> = lead.iter().chain(out).copied().collect();
        if self.shape() != want.as_slice() {
            return Err(fusion::Error::ShapeMismatch {
                op,
                got: format!(
                    "a gradient {} for an input of sizes {input_sizes:?}",
                    self.ty()
                ),
                expected: format!("the pooling's output shape {want:?}"),
            }
            .into());
        }
        let count = pool(Some(1))?;
        let scale = avg.div(&count.maximum(1)?)?;
        let planes: i64 = lead.iter().product();
        let mut grad_shape = vec![planes, 1];
        grad_shape.extend(out);
        let grad = self.reshape(&grad_shape)?.mul(&scale)?;
        let window: Vec<i64> = [1, 1].iter().chain(kernel).copied().collect();
        let ones_kernel = device.ones(&window, dtype)?;
        let spec = spec(kernel, stride, padding, &[], ceil_mode);
        // The input extended to hold every window (ceil mode's overhang).
        let mut extended = vec![planes, 1];
        extended.extend((0..n).map(|d| {
            let reach = (out[d] - 1) * spec.stride[d] + kernel[d] - 2 * spec.padding[d];
            spatial[d].max(reach)
        }));
        let mut spread = grad.conv_backward_input(
            &ones_kernel,
            &extended,
            &spec.stride,
            &spec.padding,
            &spec.dilation,
            1,
        )?;
        for (d, &size) in spatial.iter().enumerate() {
            if extended[d + 2] != size {
                spread = spread.slice((d + 2) as i64, 0, size, 1)?;
            }
        }
        spread.reshape(input_sizes)
    }
}
