//! Inference for convolutions and their two gradients, with the semantics of
//! `torch.nn.functional.conv{1,2,3}d`: an input `[N, C, *spatial]`, a weight
//! `[O, C / groups, *kernel]`, an output `[N, O, *out]` with
//! `out = (spatial + 2 * padding - dilation * (kernel - 1) - 1) / stride + 1`.
//!
//! The gradients carry the shape of what they differentiate against (the
//! input's or the weight's) as an attribute, and check that `grad_out` has
//! the shape the forward convolution would give: with a stride, several input
//! sizes give one output size, so the output alone does not say which.

use super::{arity, float_only, same_dtype};
use crate::error::{Error, Result};
use crate::op::ConvSpec;
use crate::shape::{Shape, ShapeDisplay, TensorType, check_shape};

/// Spatial dims a convolution or a pooling may have (1-d, 2-d or 3-d).
pub(crate) const MAX_SPATIAL: usize = 3;

/// Padded sizes and kernel spans stay below this, so the lowering's sums of
/// a few of them never overflow an i64.
const MAX_EXTENT: i128 = 1 << 62;

/// The padded size `size + 2 * padding` and the span `dilation * (kernel - 1)
/// + 1` of spatial dim `i`, computed without overflow; an error from 2^62 on.
pub(crate) fn extents(
    op: &'static str,
    i: usize,
    size: i64,
    k: i64,
    p: i64,
    d: i64,
) -> Result<(i64, i64)> {
    let padded = i128::from(size) + 2 * i128::from(p);
    let span = i128::from(d) * (i128::from(k) - 1) + 1;
    if padded >= MAX_EXTENT || span >= MAX_EXTENT {
        return Err(Error::Invalid {
            op,
            message: format!(
                "got size {size} with padding {p} and a kernel of {k} with dilation {d} in spatial \
                 dim {i}, expected a padded size and a kernel span below 2^62"
            ),
        });
    }
    Ok((padded as i64, span as i64))
}

/// Each of `values` is at least `min`; `what` names the list in the error.
pub(crate) fn at_least(op: &'static str, what: &str, values: &[i64], min: i64) -> Result<()> {
    if values.iter().any(|v| *v < min) {
        return Err(Error::Invalid {
            op,
            message: format!(
                "got {what} {}, expected every value to be at least {min}",
                ShapeDisplay(values)
            ),
        });
    }
    Ok(())
}

/// The output shape of a convolution of an input of shape `x` by a weight of
/// shape `w`, or an error naming both shapes and what was expected of them.
/// The weight's rank says how many spatial dims there are.
pub(crate) fn conv_output(
    op: &'static str,
    x: &[i64],
    w: &[i64],
    spec: &ConvSpec,
) -> Result<Shape> {
    let (xs, ws) = (ShapeDisplay(x), ShapeDisplay(w));
    if !(3..=MAX_SPATIAL + 2).contains(&w.len()) {
        return Err(Error::ShapeMismatch {
            op,
            got: format!("weight {ws}"),
            expected: "a 3-d, 4-d or 5-d weight [out_channels, in_channels / groups, *kernel]"
                .into(),
        });
    }
    let n = w.len() - 2;
    let lists = [
        ("stride", &spec.stride),
        ("padding", &spec.padding),
        ("dilation", &spec.dilation),
    ];
    if lists.iter().any(|(_, l)| l.len() != n) {
        let got: Vec<String> = lists
            .iter()
            .map(|(name, l)| format!("{name} {}", ShapeDisplay(l)))
            .collect();
        return Err(Error::ShapeMismatch {
            op,
            got: format!("{} for weight {ws}", got.join(", ")),
            expected: format!("{n} values in each (one per spatial dim)"),
        });
    }
    at_least(op, "stride", &spec.stride, 1)?;
    at_least(op, "dilation", &spec.dilation, 1)?;
    at_least(op, "padding", &spec.padding, 0)?;
    if spec.groups < 1 {
        return Err(Error::Invalid {
            op,
            message: format!("got groups {}, expected at least 1", spec.groups),
        });
    }
    if x.len() != n + 2 {
        return Err(Error::ShapeMismatch {
            op,
            got: format!("input {xs} and weight {ws}"),
            expected: format!("a {}-d input [N, C, *spatial] for {n} spatial dims", n + 2),
        });
    }
    let (c, o, g) = (x[1], w[0], spec.groups);
    if c % g != 0 || o % g != 0 {
        return Err(Error::ShapeMismatch {
            op,
            got: format!(
                "input {xs} with {c} channels, weight {ws} with {o} output channels and groups {g}"
            ),
            expected: format!("input and output channels divisible by groups {g}"),
        });
    }
    if i128::from(w[1]) * i128::from(g) != i128::from(c) {
        return Err(Error::ShapeMismatch {
            op,
            got: format!("input {xs} and weight {ws} with groups {g}"),
            expected: format!(
                "weight dim 1 to be the input channels / groups = {c} / {g} = {}",
                c / g
            ),
        });
    }
    let mut out: Shape = [x[0], o].into_iter().collect();
    for i in 0..n {
        let (size, k) = (x[2 + i], w[2 + i]);
        let (s, p, d) = (spec.stride[i], spec.padding[i], spec.dilation[i]);
        if k < 1 {
            return Err(Error::ShapeMismatch {
                op,
                got: format!("weight {ws}"),
                expected: "a kernel of at least 1 in every spatial dim".into(),
            });
        }
        let (padded, span) = extents(op, i, size, k, p, d)?;
        if padded < span {
            return Err(Error::ShapeMismatch {
                op,
                got: format!(
                    "input {xs} (size {padded} with padding {p} in spatial dim {i}) and weight {ws} \
                     (a kernel of {k} spanning {span} with dilation {d})"
                ),
                expected: "a kernel no larger than the padded input".into(),
            });
        }
        out.push((padded - span) / s + 1);
    }
    Ok(out)
}

pub(super) fn conv(op: &'static str, spec: &ConvSpec, inputs: &[TensorType]) -> Result<TensorType> {
    arity(op, inputs, 2)?;
    let (x, w) = (&inputs[0], &inputs[1]);
    float_only(op, x)?;
    same_dtype(op, x, w)?;
    let shape = conv_output(op, &x.shape, &w.shape, spec)?;
    Ok(x.with_shape(shape))
}

/// `grad_out` must have the shape of the forward convolution's output.
fn check_grad(
    op: &'static str,
    grad: &TensorType,
    expected: &[i64],
    forward: String,
) -> Result<()> {
    if grad.shape.as_slice() != expected {
        return Err(Error::ShapeMismatch {
            op,
            got: format!("grad_out {grad} for {forward}"),
            expected: format!(
                "grad_out of the convolution's output shape {}",
                ShapeDisplay(expected)
            ),
        });
    }
    Ok(())
}

pub(super) fn backward_input(
    op: &'static str,
    spec: &ConvSpec,
    input: &[i64],
    inputs: &[TensorType],
) -> Result<TensorType> {
    arity(op, inputs, 2)?;
    let (grad, w) = (&inputs[0], &inputs[1]);
    float_only(op, grad)?;
    same_dtype(op, grad, w)?;
    check_shape(op, input)?;
    let expected = conv_output(op, input, &w.shape, spec)?;
    let forward = format!("an input {} and weight {w}", ShapeDisplay(input));
    check_grad(op, grad, &expected, forward)?;
    Ok(TensorType::new(grad.dtype, input))
}

pub(super) fn backward_weight(
    op: &'static str,
    spec: &ConvSpec,
    weight: &[i64],
    inputs: &[TensorType],
) -> Result<TensorType> {
    arity(op, inputs, 2)?;
    let (grad, x) = (&inputs[0], &inputs[1]);
    float_only(op, grad)?;
    same_dtype(op, grad, x)?;
    check_shape(op, weight)?;
    let expected = conv_output(op, &x.shape, weight, spec)?;
    let forward = format!("an input {x} and weight {}", ShapeDisplay(weight));
    check_grad(op, grad, &expected, forward)?;
    Ok(TensorType::new(grad.dtype, weight))
}

#[cfg(test)]
mod tests {
    use crate::dtype::DType;
    use crate::op::{ConvSpec, Op};
    use crate::shape::{Shape, TensorType};

    fn spec(stride: &[i64], padding: &[i64], dilation: &[i64], groups: i64) -> Box<ConvSpec> {
        Box::new(ConvSpec {
            stride: stride.into(),
            padding: padding.into(),
            dilation: dilation.into(),
            groups,
        })
    }

    fn t(shape: &[i64]) -> TensorType {
        TensorType::new(DType::F32, shape)
    }

    fn err(op: Op, inputs: &[TensorType]) -> String {
        op.infer(inputs).unwrap_err().to_string()
    }

    #[track_caller]
    fn has(e: &str, words: &[&str]) {
        assert!(words.iter().all(|w| e.contains(w)), "{e:?} lacks {words:?}");
    }

    #[test]
    fn output_sizes_follow_pytorch() {
        let s = spec(&[2, 1], &[1, 0], &[2, 1], 2);
        let out = Op::Conv(s).infer(&[t(&[2, 4, 7, 6]), t(&[6, 2, 3, 2])]);
        // (7 + 2 - 5) / 2 + 1 = 3 and (6 - 2) / 1 + 1 = 5.
        assert_eq!(out.unwrap(), t(&[2, 6, 3, 5]));
        let s1 = spec(&[3], &[2], &[2], 1);
        let out = Op::Conv(s1).infer(&[t(&[1, 3, 13]), t(&[5, 3, 4])]);
        // (13 + 4 - 7) / 3 + 1 = 4.
        assert_eq!(out.unwrap(), t(&[1, 5, 4]));
    }

    #[test]
    fn bad_groups_and_channels_name_the_shapes() {
        let e = err(
            Op::Conv(spec(&[1, 1], &[0, 0], &[1, 1], 2)),
            &[t(&[1, 3, 5, 5]), t(&[4, 1, 3, 3])],
        );
        has(
            &e,
            &[
                "conv2d",
                "[1, 3, 5, 5]",
                "[4, 1, 3, 3]",
                "groups 2",
                "divisible",
            ],
        );
        let e = err(
            Op::Conv(spec(&[1], &[0], &[1], 2)),
            &[t(&[1, 4, 5]), t(&[6, 4, 3])],
        );
        has(
            &e,
            &[
                "conv1d",
                "[1, 4, 5]",
                "[6, 4, 3]",
                "input channels / groups = 4 / 2 = 2",
            ],
        );
        let e = err(
            Op::Conv(spec(&[1], &[0], &[1], 0)),
            &[t(&[1, 4, 5]), t(&[6, 4, 3])],
        );
        has(&e, &["conv1d", "groups 0", "at least 1"]);
        let e = err(
            Op::Conv(spec(&[i64::MAX], &[i64::MAX], &[i64::MAX], i64::MAX)),
            &[t(&[1, i64::MAX, 5]), t(&[i64::MAX, 2, i64::MAX])],
        );
        has(&e, &["conv1d", "groups 9223372036854775807"]);
        let e = err(
            Op::Conv(spec(&[i64::MAX], &[i64::MAX / 2], &[i64::MAX], 1)),
            &[t(&[1, 2, 5]), t(&[3, 2, i64::MAX])],
        );
        has(&e, &["conv1d", "below 2^62"]);
    }

    #[test]
    fn bad_ranks_attributes_and_sizes_are_errors() {
        let e = err(
            Op::Conv(spec(&[1, 1], &[0, 0], &[1, 1], 1)),
            &[t(&[1, 3, 5]), t(&[4, 3, 3, 3])],
        );
        has(&e, &["conv2d", "input [1, 3, 5]", "4-d input"]);
        let e = err(
            Op::Conv(spec(&[1, 1], &[0, 0], &[1, 1], 1)),
            &[t(&[1, 3, 5, 5]), t(&[4, 3, 3])],
        );
        has(
            &e,
            &[
                "conv2d",
                "stride [1, 1]",
                "weight [4, 3, 3]",
                "1 values in each",
            ],
        );
        let e = err(
            Op::Conv(spec(&[1, 1], &[0], &[1, 1], 1)),
            &[t(&[1, 3, 5, 5]), t(&[4, 3, 3, 3])],
        );
        has(
            &e,
            &[
                "convolution",
                "padding [0]",
                "weight [4, 3, 3, 3]",
                "2 values in each",
            ],
        );
        let e = err(
            Op::Conv(spec(&[0, 1], &[0, 0], &[1, 1], 1)),
            &[t(&[1, 3, 5, 5]), t(&[4, 3, 3, 3])],
        );
        has(&e, &["conv2d", "stride [0, 1]", "at least 1"]);
        let e = err(
            Op::Conv(spec(&[1, 1], &[0, 0], &[3, 1], 1)),
            &[t(&[1, 3, 5, 5]), t(&[4, 3, 3, 3])],
        );
        has(
            &e,
            &[
                "conv2d",
                "[1, 3, 5, 5]",
                "spanning 7",
                "no larger than the padded input",
            ],
        );
        let e = err(
            Op::Conv(spec(&[1, 1, 1, 1], &[0; 4], &[1; 4], 1)),
            &[t(&[1, 1, 2, 2, 2, 2]), t(&[1, 1, 1, 1, 1, 1])],
        );
        has(
            &e,
            &[
                "convolution",
                "weight [1, 1, 1, 1, 1, 1]",
                "3-d, 4-d or 5-d",
            ],
        );
    }

    #[test]
    fn dtypes_must_be_float_and_agree() {
        let s = spec(&[1], &[0], &[1], 1);
        let e = err(
            Op::Conv(s.clone()),
            &[
                TensorType::new(DType::I32, &[1, 1, 4]),
                TensorType::new(DType::I32, &[1, 1, 2]),
            ],
        );
        has(&e, &["conv1d", "int32", "floating-point"]);
        let e = err(
            Op::Conv(s),
            &[t(&[1, 1, 4]), TensorType::new(DType::F64, &[1, 1, 2])],
        );
        has(&e, &["conv1d", "float32", "float64"]);
    }

    #[test]
    fn gradients_check_grad_out_against_the_forward_shape() {
        let s = spec(&[2], &[1], &[1], 1);
        let input: Shape = [2, 3, 8].into_iter().collect();
        let ok = Op::ConvBackwardInput {
            spec: s.clone(),
            input: input.clone(),
        }
        .infer(&[t(&[2, 4, 4]), t(&[4, 3, 3])]);
        assert_eq!(ok.unwrap(), t(&[2, 3, 8]));
        let e = err(
            Op::ConvBackwardInput {
                spec: s.clone(),
                input,
            },
            &[t(&[2, 4, 5]), t(&[4, 3, 3])],
        );
        has(
            &e,
            &[
                "conv_backward_input",
                "grad_out float32[2, 4, 5]",
                "[2, 4, 4]",
            ],
        );
        let weight: Shape = [4, 3, 3].into_iter().collect();
        let ok = Op::ConvBackwardWeight {
            spec: s.clone(),
            weight: weight.clone(),
        }
        .infer(&[t(&[2, 4, 4]), t(&[2, 3, 8])]);
        assert_eq!(ok.unwrap(), t(&[4, 3, 3]));
        let e = err(
            Op::ConvBackwardWeight { spec: s, weight },
            &[t(&[2, 4, 4]), t(&[2, 2, 8])],
        );
        has(
            &e,
            &[
                "conv_backward_weight",
                "[2, 2, 8]",
                "[4, 3, 3]",
                "= 2 / 1 = 2",
            ],
        );
    }
}
