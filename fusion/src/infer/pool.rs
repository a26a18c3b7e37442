//! Inference for max and average pooling over the trailing spatial dims of
//! `[N, C, *spatial]` or `[C, *spatial]`, with PyTorch's checks and output
//! sizes (`pooling_output_shape`): padding at most half the effective kernel,
//! and in ceil mode a last window only if it starts inside the input or its
//! left padding.

use super::conv::{MAX_SPATIAL, at_least, extents};
use super::{arity, float_only, unsupported};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::op::PoolSpec;
use crate::shape::{Shape, ShapeDisplay, TensorType};

/// The first list (the kernel) has one to three values, one per spatial dim,
/// and the others as many.
fn check_lists(op: &'static str, lists: &[(&str, &[i64])]) -> Result<usize> {
    let n = lists[0].1.len();
    if n == 0 || n > MAX_SPATIAL {
        return Err(Error::Invalid {
            op,
            message: format!(
                "got {n} spatial dims ({} {}), expected 1, 2 or 3",
                lists[0].0,
                ShapeDisplay(lists[0].1)
            ),
        });
    }
    if lists.iter().any(|(_, l)| l.len() != n) {
        let got: Vec<String> = lists
            .iter()
            .map(|(name, l)| format!("{name} {}", ShapeDisplay(l)))
            .collect();
        return Err(Error::ShapeMismatch {
            op,
            got: got.join(", "),
            expected: format!("{n} values in each (one per spatial dim)"),
        });
    }
    Ok(n)
}

/// Output size of one spatial dim (PyTorch's `pooling_output_shape`), from
/// its padded size and kernel span (both below 2^62).
fn pooled_size(size: i64, padded: i64, span: i64, s: i64, p: i64, ceil_mode: bool) -> i64 {
    let (size, padded, span, s, p) = (
        size as i128,
        padded as i128,
        span as i128,
        s as i128,
        p as i128,
    );
    let extra = if ceil_mode { s - 1 } else { 0 };
    let mut out = (padded - span + extra).div_euclid(s) + 1;
    if ceil_mode && (out - 1) * s >= size + p {
        out -= 1;
    }
    // At most padded + 1.
    out as i64
}

/// The output shape of pooling `x` with `spec`.
pub(crate) fn pool_output(op: &'static str, x: &TensorType, spec: &PoolSpec) -> Result<Shape> {
    let n = check_lists(
        op,
        &[
            ("kernel", &spec.kernel),
            ("stride", &spec.stride),
            ("padding", &spec.padding),
            ("dilation", &spec.dilation),
        ],
    )?;
    at_least(op, "kernel", &spec.kernel, 1)?;
    at_least(op, "stride", &spec.stride, 1)?;
    at_least(op, "dilation", &spec.dilation, 1)?;
    at_least(op, "padding", &spec.padding, 0)?;
    for i in 0..n {
        let (k, p, d) = (spec.kernel[i], spec.padding[i], spec.dilation[i]);
        let (twice_p, span) = extents(op, i, 0, k, p, d)?;
        if twice_p > span {
            return Err(Error::Invalid {
                op,
                message: format!(
                    "got padding {p} for a kernel of {k} with dilation {d} in spatial dim {i}, \
                     expected at most half the effective kernel size ({})",
                    span / 2
                ),
            });
        }
    }
    if x.rank() != n + 1 && x.rank() != n + 2 {
        return Err(Error::ShapeMismatch {
            op,
            got: format!("an input {x}"),
            expected: format!(
                "a {}-d [C, *spatial] or {}-d [N, C, *spatial] input for {n} spatial dims",
                n + 1,
                n + 2
            ),
        });
    }
    let lead = x.rank() - n;
    let mut out: Shape = x.shape[..lead].into();
    for i in 0..n {
        let size = x.shape[lead + i];
        let (k, s, p, d) = (
            spec.kernel[i],
            spec.stride[i],
            spec.padding[i],
            spec.dilation[i],
        );
        let (padded, span) = extents(op, i, size, k, p, d)?;
        let o = pooled_size(size, padded, span, s, p, spec.ceil_mode);
        if size < 1 || o < 1 {
            return Err(Error::ShapeMismatch {
                op,
                got: format!(
                    "an input {x} whose spatial dim {i} of size {size} gives an output of size {o} \
                     (kernel {}, stride {}, padding {}, dilation {})",
                    ShapeDisplay(&spec.kernel),
                    ShapeDisplay(&spec.stride),
                    ShapeDisplay(&spec.padding),
                    ShapeDisplay(&spec.dilation)
                ),
                expected: "every output size to be at least 1".into(),
            });
        }
        out.push(o);
    }
    Ok(out)
}

pub(super) fn max_pool(
    op: &'static str,
    spec: &PoolSpec,
    indices: bool,
    inputs: &[TensorType],
) -> Result<TensorType> {
    arity(op, inputs, 1)?;
    let x = &inputs[0];
    if x.dtype.is_bool() {
        return Err(unsupported(op, x.dtype, "a numeric dtype"));
    }
    let shape = pool_output(op, x, spec)?;
    let dtype = if indices { DType::I64 } else { x.dtype };
    Ok(TensorType { dtype, shape })
}

pub(super) fn avg_pool(
    op: &'static str,
    spec: &PoolSpec,
    divisor_override: Option<i64>,
    inputs: &[TensorType],
) -> Result<TensorType> {
    arity(op, inputs, 1)?;
    let x = &inputs[0];
    float_only(op, x)?;
    if spec.dilation.iter().any(|d| *d != 1) {
        return Err(Error::Invalid {
            op,
            message: format!(
                "got dilation {}, expected no dilation (all 1) for average pooling",
                ShapeDisplay(&spec.dilation)
            ),
        });
    }
    if let Some(d) = divisor_override
        && d == 0
    {
        return Err(Error::Invalid {
            op,
            message: "got divisor_override 0, expected a non-zero divisor".into(),
        });
    }
    let shape = pool_output(op, x, spec)?;
    Ok(x.with_shape(shape))
}

#[cfg(test)]
mod tests {
    use crate::dtype::DType;
    use crate::op::{Op, PoolSpec};
    use crate::shape::TensorType;

    fn spec(kernel: &[i64], stride: &[i64], padding: &[i64], ceil_mode: bool) -> Box<PoolSpec> {
        Box::new(PoolSpec {
            kernel: kernel.into(),
            stride: stride.into(),
            padding: padding.into(),
            dilation: kernel.iter().map(|_| 1).collect(),
            ceil_mode,
        })
    }

    fn t(shape: &[i64]) -> TensorType {
        TensorType::new(DType::F32, shape)
    }

    #[track_caller]
    fn has(e: &str, words: &[&str]) {
        assert!(words.iter().all(|w| e.contains(w)), "{e:?} lacks {words:?}");
    }

    #[test]
    fn output_sizes_follow_pytorch() {
        // floor((5 + 2 - 3) / 2) + 1 = 3; ceil gives 3 too.
        let s = spec(&[3], &[2], &[1], false);
        assert_eq!(
            Op::MaxPool(s).infer(&[t(&[2, 3, 5])]).unwrap(),
            t(&[2, 3, 3])
        );
        // Unbatched [C, H, W], ceil mode: H (6 - 2 + 1) / 2 + 1 = 3 and
        // W (7 - 3 + 1) / 2 + 1 = 3, both last windows starting inside.
        let s = spec(&[2, 3], &[2, 2], &[0, 0], true);
        let out = Op::MaxPoolIndices(s).infer(&[t(&[3, 6, 7])]).unwrap();
        assert_eq!(out, TensorType::new(DType::I64, &[3, 3, 3]));
        // Ceil mode drops a last window starting in the right padding: size
        // 4, kernel 2, stride 3, padding 1 gives (4 + 2 - 2 + 2) / 3 + 1 = 3,
        // but window 2 would start at 2 * 3 - 1 = 5, past the input.
        let s = spec(&[2], &[3], &[1], true);
        assert_eq!(Op::MaxPool(s).infer(&[t(&[1, 4])]).unwrap(), t(&[1, 2]));
    }

    #[test]
    fn bad_pooling_is_an_error_naming_the_op_and_shapes() {
        let e = Op::MaxPool(spec(&[3, 3], &[1, 1], &[2, 0], false))
            .infer(&[t(&[1, 1, 8, 8])])
            .unwrap_err()
            .to_string();
        has(
            &e,
            &["max_pool2d", "padding 2", "kernel of 3", "at most half"],
        );
        let e = Op::MaxPool(spec(&[3, 3], &[1, 1], &[0, 0], false))
            .infer(&[t(&[8, 8])])
            .unwrap_err()
            .to_string();
        has(
            &e,
            &["max_pool2d", "float32[8, 8]", "3-d [C, *spatial]", "4-d"],
        );
        let e = Op::AvgPool {
            pool: spec(&[4], &[1], &[0], false),
            count_include_pad: true,
            divisor_override: None,
        }
        .infer(&[t(&[1, 2, 3])])
        .unwrap_err()
        .to_string();
        has(
            &e,
            &[
                "avg_pool1d",
                "float32[1, 2, 3]",
                "output of size 0",
                "at least 1",
            ],
        );
        let e = Op::MaxPool(spec(&[2], &[0], &[0], false))
            .infer(&[t(&[1, 2, 3])])
            .unwrap_err()
            .to_string();
        has(&e, &["max_pool1d", "stride [0]", "at least 1"]);
        let e = Op::AvgPool {
            pool: spec(&[2], &[1], &[0], false),
            count_include_pad: true,
            divisor_override: Some(0),
        }
        .infer(&[t(&[1, 2, 3])])
        .unwrap_err()
        .to_string();
        has(&e, &["avg_pool1d", "divisor_override 0"]);
        let e = Op::AvgPool {
            pool: spec(&[2], &[1], &[0], false),
            count_include_pad: true,
            divisor_override: None,
        }
        .infer(&[TensorType::new(DType::I64, &[1, 2, 3])])
        .unwrap_err()
        .to_string();
        has(&e, &["avg_pool1d", "int64", "floating-point"]);
        let e = Op::MaxPool(spec(&[2], &[1], &[0], false))
            .infer(&[TensorType::new(DType::Bool, &[1, 2, 3])])
            .unwrap_err()
            .to_string();
        has(&e, &["max_pool1d", "bool"]);
        let huge = PoolSpec {
            kernel: [i64::MAX].into_iter().collect(),
            stride: [i64::MAX].into_iter().collect(),
            padding: [i64::MAX / 2].into_iter().collect(),
            dilation: [i64::MAX].into_iter().collect(),
            ceil_mode: true,
        };
        let e = Op::MaxPool(Box::new(huge))
            .infer(&[t(&[1, 2, 3])])
            .unwrap_err()
            .to_string();
        has(&e, &["max_pool1d", "below 2^62"]);
    }
}
