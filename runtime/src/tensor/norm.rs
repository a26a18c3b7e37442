//! Layer normalization as autograd needs it: the output with the statistics
//! it was computed from (PyTorch's `native_layer_norm`), and the gradients
//! computed from those statistics. (`Tensor::layer_norm`, one `Op`, is the
//! forward alone.)

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

impl Tensor {
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
        if self.shape() != input.shape() {
            return Err(fusion::Error::ShapeMismatch {
                op,
                got: format!("grad_out {}", self.ty()),
                expected: format!("the input's shape {:?}", input.shape()),
            }
            .into());
        }
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
