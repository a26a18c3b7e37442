//! Layer and batch normalization as autograd needs them: the output with the
//! statistics it was computed from (PyTorch's `native_layer_norm` and
//! `native_batch_norm`), and the gradients computed from those statistics.
//! (`Tensor::layer_norm`, one `Op`, is the layer norm forward alone.)

use fusion::DType;

use super::Tensor;
use crate::error::Result;

/// The dtype the statistics are computed and kept in: float32 for 16-bit
/// inputs, as PyTorch keeps them.
fn stat_dtype(dtype: DType) -> DType {
    match dtype {
        DType::F16 | DType::BF16 => DType::F32,
        d => d,
    }
}

/// The normalized dims of `x` (its trailing `normalized_shape`), checked
/// with the affine parameters against them.
fn normalized_dims(
    op: &'static str,
    x: &Tensor,
    normalized_shape: &[i64],
    params: [Option<&Tensor>; 2],
) -> Result<Vec<i64>> {
    x.expect_float(op, "a floating-point input")?;
    let (n, rank) = (normalized_shape.len(), x.rank());
    if n == 0 || n > rank || x.shape()[rank - n..] != *normalized_shape {
        return Err(fusion::Error::ShapeMismatch {
            op,
            got: format!(
                "normalized_shape {normalized_shape:?} for an input {}",
                x.ty()
            ),
            expected: "normalized_shape equal to the input's trailing dims".into(),
        }
        .into());
    }
    for p in params.into_iter().flatten() {
        if p.shape() != normalized_shape {
            return Err(fusion::Error::ShapeMismatch {
                op,
                got: format!("a weight or bias {}", p.ty()),
                expected: format!("the normalized_shape {normalized_shape:?}"),
            }
            .into());
        }
    }
    Ok((rank - n..rank).map(|d| d as i64).collect())
}

/// What `Tensor::batch_norm_with_stats` returns (PyTorch's
/// `native_batch_norm`, with the new running statistics it would store).
#[derive(Clone, Debug)]
pub struct BatchNormOutput {
    /// The normalized input, in the input's dtype and shape.
    pub y: Tensor,
    /// In training, the batch mean of each channel (`[C]`, float32 for
    /// 16-bit inputs); in eval, an empty `[0]`.
    pub save_mean: Tensor,
    /// In training, `1 / sqrt(var + eps)` of each channel, `var` the biased
    /// batch variance (`[C]`, as `save_mean`); in eval, an empty `[0]`.
    pub save_invstd: Tensor,
    /// In training with running statistics, the new running mean,
    /// `running_mean * (1 - momentum) + mean * momentum`, in the running
    /// mean's dtype: for the caller to store. `None` otherwise.
    pub running_mean: Option<Tensor>,
    /// As `running_mean`: `running_var * (1 - momentum) + var * momentum *
    /// n / (n - 1)`, the unbiased batch variance over the `n` values of each
    /// channel (`var` itself when `n <= 1`).
    pub running_var: Option<Tensor>,
}

/// An error naming `op` unless the gradient `grad_out` has `input`'s shape.
fn expect_grad_like(op: &'static str, grad_out: &Tensor, input: &Tensor) -> Result<()> {
    if grad_out.shape() == input.shape() {
        return Ok(());
    }
    Err(fusion::Error::ShapeMismatch {
        op,
        got: format!("grad_out {}", grad_out.ty()),
        expected: format!("the input's shape {:?}", input.shape()),
    }
    .into())
}

/// The number of channels of a batch norm input (dim 1) and the dims its
/// statistics are taken over (every other dim), with the per-channel tensors
/// checked against them.
fn batch_norm_dims(
    op: &'static str,
    x: &Tensor,
    per_channel: &[(&str, Option<&Tensor>)],
) -> Result<(i64, Vec<i64>)> {
    x.expect_float(op, "a floating-point input")?;
    if x.rank() < 2 {
        return Err(fusion::Error::ShapeMismatch {
            op,
            got: format!("an input {}", x.ty()),
            expected: "an input with at least 2 dims, [N, C, ...]".into(),
        }
        .into());
    }
    let c = x.shape()[1];
    for (what, t) in per_channel {
        if let Some(t) = t
            && t.shape() != [c]
        {
            return Err(fusion::Error::ShapeMismatch {
                op,
                got: format!("{what} {}", t.ty()),
                expected: format!("[{c}], one value per channel of the input {}", x.ty()),
            }
            .into());
        }
    }
    let dims = std::iter::once(0).chain(2..x.rank() as i64).collect();
    Ok((c, dims))
}

/// A per-channel `[C]` tensor shaped `[1, C, 1, ...]` to broadcast against
/// a rank-`rank` input.
#[track_caller]
fn channels(t: &Tensor, rank: usize) -> Result<Tensor> {
    let mut shape = vec![1; rank];
    shape[1] = t.shape()[0];
    t.reshape(&shape)
}

/// Both tensors, or an error naming `op` and saying when they are needed.
fn both<'a>(
    op: &'static str,
    pair: (Option<&'a Tensor>, Option<&'a Tensor>),
    needed: &str,
) -> Result<(&'a Tensor, &'a Tensor)> {
    match pair {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(fusion::Error::Invalid {
            op,
            message: format!("{needed} are needed"),
        }
        .into()),
    }
}

impl Tensor {
    /// PyTorch's `native_batch_norm` of an input `[N, C, ...]` over every
    /// dim but the channel dim 1, computed in float32 for 16-bit inputs:
    /// `y = (x - mean) / sqrt(var + eps) * weight + bias` per channel, where
    /// in training `mean` and `var` are the batch's (the biased variance)
    /// and in eval the running statistics (which must then be given).
    /// `weight`, `bias` and the running statistics are `[C]`. See
    /// `BatchNormOutput` for the statistics returned; the running
    /// statistics given are not written.
    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    pub fn batch_norm_with_stats(
        &self,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        running_mean: Option<&Tensor>,
        running_var: Option<&Tensor>,
        training: bool,
        momentum: f64,
        eps: f64,
    ) -> Result<BatchNormOutput> {
        let op = "batch_norm";
        let (c, dims) = batch_norm_dims(
            op,
            self,
            &[
                ("weight", weight),
                ("bias", bias),
                ("running_mean", running_mean),
                ("running_var", running_var),
            ],
        )?;
        let (rank, st) = (self.rank(), stat_dtype(self.dtype()));
        let x = self.to_dtype(st)?;
        // The statistics normalized by: the running ones in eval, else the
        // batch's.
        let running = if training {
            None
        } else {
            let needed = "running_mean and running_var (in eval)";
            Some(both(op, (running_mean, running_var), needed)?)
        };
        let mean = match running {
            Some((m, _)) => m.to_dtype(st)?,
            None => x.mean(&dims, false)?,
        };
        let centered = (&x - &channels(&mean, rank)?)?;
        let var = match running {
            Some((_, v)) => v.to_dtype(st)?,
            None => (&centered * &centered)?.mean(&dims, false)?,
        };
        let invstd = (&var + eps)?.rsqrt()?;
        let mut y = (&centered * &channels(&invstd, rank)?)?;
        if let Some(w) = weight {
            y = (&y * &channels(&w.to_dtype(st)?, rank)?)?;
        }
        if let Some(b) = bias {
            y = (&y + &channels(&b.to_dtype(st)?, rank)?)?;
        }
        let y = y.to_dtype(self.dtype())?;
        if !training {
            let empty = self.device().zeros(&[0], st)?;
            return Ok(BatchNormOutput {
                y,
                save_mean: empty.clone(),
                save_invstd: empty,
                running_mean: None,
                running_var: None,
            });
        }
        // running * (1 - momentum) + batch * momentum * scale, computed in
        // float32 for 16-bit running statistics, kept in their dtype.
        let update = |running: Option<&Tensor>, batch: &Tensor, scale: f64| {
            running
                .map(|r| {
                    let old = (&r.to_dtype(stat_dtype(r.dtype()))? * (1.0 - momentum))?;
                    (&old + &(batch * (momentum * scale))?)?.to_dtype(r.dtype())
                })
                .transpose()
        };
        let n = if c == 0 { 0 } else { self.numel() / c };
        let unbias = if n > 1 {
            n as f64 / (n - 1) as f64
        } else {
            1.0
        };
        Ok(BatchNormOutput {
            running_mean: update(running_mean, &mean, 1.0)?,
            running_var: update(running_var, &var, unbias)?,
            y,
            save_mean: mean,
            save_invstd: invstd,
        })
    }

    /// The gradients of `batch_norm_with_stats` with respect to the input,
    /// the weight and the bias (PyTorch's `native_batch_norm_backward`),
    /// `self` being the gradient of `y`: in training from the `save_mean`
    /// and `save_invstd` it returned, in eval from the running statistics.
    /// With `xhat = (x - mean) * invstd` and `w` the weight (1 without one),
    /// per channel and summing over every dim but 1:
    /// - input: `w * invstd * (dy - mean(dy) - xhat * mean(dy * xhat))` in
    ///   training (the batch statistics depend on `x`), `w * invstd * dy` in
    ///   eval; in the input's dtype;
    /// - weight: `sum(dy * xhat)`; bias: `sum(dy)`; `[C]`, in the weight's
    ///   dtype (the input's without a weight).
    ///
    /// Each is computed when asked for in `output_mask`, computed in
    /// float32 for 16-bit inputs.
    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    pub fn batch_norm_backward(
        &self,
        input: &Tensor,
        weight: Option<&Tensor>,
        running_mean: Option<&Tensor>,
        running_var: Option<&Tensor>,
        save_mean: Option<&Tensor>,
        save_invstd: Option<&Tensor>,
        training: bool,
        eps: f64,
        output_mask: [bool; 3],
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let op = "batch_norm_backward";
        // The statistics not used (the saved ones in eval, [0] there) are
        // not checked.
        let stats = if training {
            [("save_mean", save_mean), ("save_invstd", save_invstd)]
        } else {
            [("running_mean", running_mean), ("running_var", running_var)]
        };
        let (_, dims) = batch_norm_dims(op, input, &[("weight", weight), stats[0], stats[1]])?;
        expect_grad_like(op, self, input)?;
        let (rank, st) = (input.rank(), stat_dtype(input.dtype()));
        let (mean, invstd) = if training {
            let (m, i) = both(
                op,
                (save_mean, save_invstd),
                "save_mean and save_invstd (in training)",
            )?;
            (m.to_dtype(st)?, i.to_dtype(st)?)
        } else {
            let needed = "running_mean and running_var (in eval)";
            let (m, v) = both(op, (running_mean, running_var), needed)?;
            (m.to_dtype(st)?, (&v.to_dtype(st)? + eps)?.rsqrt()?)
        };
        let invstd = channels(&invstd, rank)?;
        let dy = self.to_dtype(st)?;
        let xhat = (&(&input.to_dtype(st)? - &channels(&mean, rank)?)? * &invstd)?;
        let grad_input = if output_mask[0] {
            let scale = match weight {
                Some(w) => (&invstd * &channels(&w.to_dtype(st)?, rank)?)?,
                None => invstd.clone(),
            };
            let g = if training {
                let mean_dy = dy.mean(&dims, true)?;
                let mean_dy_xhat = (&dy * &xhat)?.mean(&dims, true)?;
                (&(&dy - &mean_dy)? - &(&xhat * &mean_dy_xhat)?)?
            } else {
                dy.clone()
            };
            Some((&g * &scale)?.to_dtype(input.dtype())?)
        } else {
            None
        };
        let param = weight.map_or(input.dtype(), Tensor::dtype);
        let grad_weight = if output_mask[1] {
            Some((&dy * &xhat)?.sum(&dims, false)?.to_dtype(param)?)
        } else {
            None
        };
        let grad_bias = if output_mask[2] {
            Some(dy.sum(&dims, false)?.to_dtype(param)?)
        } else {
            None
        };
        Ok((grad_input, grad_weight, grad_bias))
    }

    /// PyTorch's `native_layer_norm` over the trailing `normalized_shape`
    /// dims: `(y, mean, rstd)`, `y` in the input's dtype, the statistics in
    /// float32 for 16-bit inputs and shaped as the input with the normalized
    /// dims 1 (what `layer_norm_backward` takes).
    #[track_caller]
    pub fn layer_norm_with_stats(
        &self,
        normalized_shape: &[i64],
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
    ) -> Result<(Tensor, Tensor, Tensor)> {
        let dims = normalized_dims("layer_norm", self, normalized_shape, [weight, bias])?;
        let st = stat_dtype(self.dtype());
        let x = self.to_dtype(st)?;
        let mean = x.mean(&dims, true)?;
        let centered = (&x - &mean)?;
        let variance = (&centered * &centered)?.mean(&dims, true)?;
        let rstd = (&variance + eps)?.rsqrt()?;
        let mut y = (&centered * &rstd)?;
        if let Some(w) = weight {
            y = (&y * &w.to_dtype(st)?)?;
        }
        if let Some(b) = bias {
            y = (&y + &b.to_dtype(st)?)?;
        }
        Ok((y.to_dtype(self.dtype())?, mean, rstd))
    }

    /// The gradients of `layer_norm_with_stats` with respect to the input,
    /// the weight and the bias, `self` being the gradient of `y`, from the
    /// `mean` and `rstd` it returned. Each is computed when asked for in
    /// `want` (and, for the weight and the bias, when there is one); each
    /// has the dtype of what it is the gradient of.
    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    pub fn layer_norm_backward(
        &self,
        input: &Tensor,
        normalized_shape: &[i64],
        mean: &Tensor,
        rstd: &Tensor,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        want: [bool; 3],
    ) -> Result<[Option<Tensor>; 3]> {
        let op = "layer_norm_backward";
        let dims = normalized_dims(op, input, normalized_shape, [weight, bias])?;
        expect_grad_like(op, self, input)?;
        let leading: Vec<i64> = (0..dims[0]).collect();
        let st = stat_dtype(input.dtype());
        let dy = self.to_dtype(st)?;
        let xhat = (&(&input.to_dtype(st)? - mean)? * rstd)?;
        let grad_input = if want[0] {
            // d x = rstd (g - mean(g) - xhat mean(g xhat)), g = dy w.
            let g = match weight {
                Some(w) => (&dy * &w.to_dtype(st)?)?,
                None => dy.clone(),
            };
            let mean_g = g.mean(&dims, true)?;
            let mean_gx = (&g * &xhat)?.mean(&dims, true)?;
            let inner = (&(&g - &mean_g)? - &(&xhat * &mean_gx)?)?;
            Some((rstd * &inner)?.to_dtype(input.dtype())?)
        } else {
            None
        };
        // Summed over the leading dims; an input with none is one row (a
        // sum over no dims would be a sum over all of them).
        let over_rows = |t: Tensor| {
            if leading.is_empty() {
                Ok(t)
            } else {
                t.sum(&leading, false)
            }
        };
        let grad_weight = match weight {
            Some(w) if want[1] => Some(over_rows((&dy * &xhat)?)?.to_dtype(w.dtype())?),
            _ => None,
        };
        let grad_bias = match bias {
            Some(b) if want[2] => Some(over_rows(dy.clone())?.to_dtype(b.dtype())?),
            _ => None,
        };
        Ok([grad_input, grad_weight, grad_bias])
    }
}
