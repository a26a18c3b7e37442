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
        // A transposed convolution with an output padding of a stride or
        // more asks for an input the forward convolution would have read
        // into more outputs than `self` has: those outputs' gradients are
        // zero (nothing of the result depends on them), so `self` is padded
        // with them at the end.
        let kernel = &weight.shape()[2.min(weight.rank())..];
        let grad = self.pad_to_forward_output(kernel, input_sizes, stride, padding, dilation)?;
        let this = grad.as_ref().unwrap_or(self);
        let spec = spec(n, stride, padding, dilation, groups);
        if input_sizes.len() + 1 == weight.rank() && this.rank() + 1 == weight.rank() {
            let op = Op::ConvBackwardInput {
                spec,
                input: batched(input_sizes).into(),
            };
            let grad = this.reshape(&batched(this.shape()))?.op(op, &[weight])?;
            return grad.reshape(input_sizes);
        }
        let op = Op::ConvBackwardInput {
            spec,
            input: input_sizes.into(),
        };
        this.op(op, &[weight])
    }

    /// `self` (an output gradient) zero-padded at the end of each spatial
    /// dim to the forward convolution's output size for `input_sizes`, when
    /// it is smaller there and the same elsewhere; `None` when nothing is
    /// to pad (a mismatch is left to the op's own shape check).
    fn pad_to_forward_output(
        &self,
        k: &[i64],
        input_sizes: &[i64],
        stride: &[i64],
        padding: &[i64],
        dilation: &[i64],
    ) -> Result<Option<Tensor>> {
        let n = k.len();
        let (g, x) = (self.shape(), input_sizes);
        if n == 0
            || g.len() < n
            || x.len() != g.len()
            || [stride, padding, dilation].iter().any(|v| v.len() != n)
        {
            return Ok(None);
        }
        let mut amounts = vec![];
        for i in (0..n).rev() {
            let (gi, xi) = (g[g.len() - n + i], x[x.len() - n + i]);
            let expected =
                (xi + 2 * padding[i] - dilation[i] * (k[i] - 1) - 1).div_euclid(stride[i]) + 1;
            if gi > expected {
                return Ok(None);
            }
            amounts.extend([0, expected - gi]);
        }
        if amounts.iter().all(|&a| a == 0) {
            return Ok(None);
        }
        Ok(Some(self.pad(&amounts, 0.0)?))
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
        // As in conv_backward_input: a transposed convolution's output
        // padding leaves outputs of zero gradient off `self`.
        let kernel = &weight_sizes[2.min(weight_sizes.len())..];
        let padded =
            self.pad_to_forward_output(kernel, input.shape(), stride, padding, dilation)?;
        let this = padded.as_ref().unwrap_or(self);
        if input.rank() + 1 == weight_sizes.len() && this.rank() + 1 == weight_sizes.len() {
            let grad = this.reshape(&batched(this.shape()))?;
            let x = input.reshape(&batched(input.shape()))?;
            return grad.op(op, &[&x]);
        }
        this.op(op, &[input])
    }
}
