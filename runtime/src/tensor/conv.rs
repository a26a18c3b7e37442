//! Convolutions with the semantics of `torch.nn.functional.conv{1,2,3}d`
//! (without bias: the caller adds it), and their gradients with respect to
//! the input and the weight (what `convolution_backward` computes).
//!
//! The number of spatial dims is the weight's rank minus 2. `stride`,
//! `padding` (zeros on both sides) and `dilation` hold one value per spatial
//! dim, or one value for all of them (PyTorch's `_pair`, `_triple`). An input
//! without a batch dim (`[C, *spatial]`) is treated as a batch of one.

use fusion::{ConvSpec, Op, Shape};

use super::Tensor;
use crate::error::Result;

/// One value for every one of `n` dims, or the list as given (inference
/// checks its length).
fn per_dim(values: &[i64], n: usize) -> Shape {
    match values {
        [v] => std::iter::repeat_n(*v, n.max(1)).collect(),
        _ => values.into(),
    }
}

fn spec(n: usize, stride: &[i64], padding: &[i64], dilation: &[i64], groups: i64) -> Box<ConvSpec> {
    Box::new(ConvSpec {
        stride: per_dim(stride, n),
        padding: per_dim(padding, n),
        dilation: per_dim(dilation, n),
        groups,
    })
}

/// `shape` with a leading batch dim of 1.
fn batched(shape: &[i64]) -> Vec<i64> {
    std::iter::once(1).chain(shape.iter().copied()).collect()
}

impl Tensor {
    /// `conv{1,2,3}d(self, weight)`: `self` is `[N, C, *spatial]` (or
    /// `[C, *spatial]`), `weight` is `[O, C / groups, *kernel]`; the result is
    /// `[N, O, *out]` with `out = (spatial + 2 * padding - dilation *
    /// (kernel - 1) - 1) / stride + 1`.
    #[track_caller]
    pub fn conv(
        &self,
        weight: &Tensor,
        stride: &[i64],
        padding: &[i64],
        dilation: &[i64],
        groups: i64,
    ) -> Result<Tensor> {
        let n = weight.rank().saturating_sub(2);
        let op = Op::Conv(spec(n, stride, padding, dilation, groups));
        if self.rank() + 1 == weight.rank() {
            let out = self.reshape(&batched(self.shape()))?.op(op, &[weight])?;
            return out.reshape(&out.shape()[1..]);
        }
        self.op(op, &[weight])
    }

    /// The gradient of [`Tensor::conv`] with respect to its input, of shape
    /// `input_sizes`, from `self` = the gradient of the output and the
    /// convolution's `weight` and attributes. The input sizes matter: with a
    /// stride, several input sizes give the same output size.
    #[track_caller]
    pub fn conv_backward_input(
        &self,
        weight: &Tensor,
        input_sizes: &[i64],
        stride: &[i64],
        padding: &[i64],
        dilation: &[i64],
        groups: i64,
    ) -> Result<Tensor> {
        let n = weight.rank().saturating_sub(2);
        let spec = spec(n, stride, padding, dilation, groups);
        if input_sizes.len() + 1 == weight.rank() && self.rank() + 1 == weight.rank() {
            let op = Op::ConvBackwardInput {
                spec,
                input: batched(input_sizes).into(),
            };
            let grad = self.reshape(&batched(self.shape()))?.op(op, &[weight])?;
            return grad.reshape(input_sizes);
        }
        let op = Op::ConvBackwardInput {
            spec,
            input: input_sizes.into(),
        };
        self.op(op, &[weight])
    }

    /// The gradient of [`Tensor::conv`] with respect to its weight, of shape
    /// `weight_sizes`, from `self` = the gradient of the output and the
    /// convolution's `input` and attributes.
    #[track_caller]
    pub fn conv_backward_weight(
        &self,
        input: &Tensor,
        weight_sizes: &[i64],
        stride: &[i64],
        padding: &[i64],
        dilation: &[i64],
        groups: i64,
    ) -> Result<Tensor> {
        let n = weight_sizes.len().saturating_sub(2);
        let op = Op::ConvBackwardWeight {
            spec: spec(n, stride, padding, dilation, groups),
            weight: weight_sizes.into(),
        };
        if input.rank() + 1 == weight_sizes.len() && self.rank() + 1 == weight_sizes.len() {
            let grad = self.reshape(&batched(self.shape()))?;
            let x = input.reshape(&batched(input.shape()))?;
            return grad.op(op, &[&x]);
        }
        self.op(op, &[input])
    }
}
