//! Shapes, tensor types and the dimension arithmetic ops share.

use std::fmt;

use smallvec::SmallVec;

use crate::dtype::DType;
use crate::error::{Error, Result};

/// Dimension sizes, outermost first. Concrete: a PJRT executable is compiled
/// for fixed shapes.
pub type Shape = SmallVec<[i64; 4]>;
/// A list of (normalized, non-negative) dimension indices.
pub type Dims = SmallVec<[usize; 4]>;

/// The type of a tensor value: element type and shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorType {
    pub dtype: DType,
    pub shape: Shape,
}

impl TensorType {
    pub fn new(dtype: DType, shape: &[i64]) -> TensorType {
        TensorType {
            dtype,
            shape: Shape::from_slice(shape),
        }
    }

    pub fn scalar(dtype: DType) -> TensorType {
        TensorType {
            dtype,
            shape: Shape::new(),
        }
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    pub fn numel(&self) -> i64 {
        numel(&self.shape)
    }

    pub fn with_dtype(&self, dtype: DType) -> TensorType {
        TensorType {
            dtype,
            shape: self.shape.clone(),
        }
    }

    pub fn with_shape(&self, shape: Shape) -> TensorType {
        TensorType {
            dtype: self.dtype,
            shape,
        }
    }

    /// The MLIR type, `tensor<2x3xf32>` (`tensor<f32>` for 0-d).
    pub fn mlir(&self) -> String {
        let mut s = String::with_capacity(16);
        self.write_mlir(&mut s);
        s
    }

    pub fn write_mlir(&self, out: &mut String) {
        out.push_str("tensor<");
        for d in &self.shape {
            out.push_str(&d.to_string());
            out.push('x');
        }
        out.push_str(self.dtype.mlir());
        out.push('>');
    }
}

impl fmt::Display for TensorType {
    /// `float32[2, 3]`, PyTorch-style.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.dtype, ShapeDisplay(&self.shape))
    }
}

/// Displays a shape as `[2, 3]`.
pub struct ShapeDisplay<'a>(pub &'a [i64]);

impl fmt::Display for ShapeDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

pub fn numel(shape: &[i64]) -> i64 {
    shape.iter().product()
}

/// Sizes must be non-negative and the element count must fit an i64.
pub fn check_shape(op: &'static str, shape: &[i64]) -> Result<()> {
    if let Some(d) = shape.iter().find(|d| **d < 0) {
        return Err(Error::Invalid {
            op,
            message: format!("negative size {d} in shape {}", ShapeDisplay(shape)),
        });
    }
    if shape
        .iter()
        .try_fold(1i64, |acc, d| acc.checked_mul(*d))
        .is_none()
    {
        return Err(Error::Invalid {
            op,
            message: format!("shape {} has more than 2^63 elements", ShapeDisplay(shape)),
        });
    }
    Ok(())
}

/// Normalizes a possibly negative `dim` for a tensor of `rank` dims.
pub fn normalize_dim(op: &'static str, dim: i64, rank: usize) -> Result<usize> {
    // A 0-d tensor accepts dim 0 and -1, as in PyTorch.
    let r = rank.max(1) as i64;
    if dim < -r || dim >= r {
        return Err(Error::BadDim { op, dim, rank });
    }
    Ok(if dim < 0 {
        (dim + r) as usize
    } else {
        dim as usize
    })
}

/// Normalizes a list of dims; repeated dims are an error.
pub fn normalize_dims(op: &'static str, dims: &[i64], rank: usize) -> Result<Dims> {
    let mut out = Dims::new();
    for &d in dims {
        let n = normalize_dim(op, d, rank)?;
        if out.contains(&n) {
            return Err(Error::Invalid {
                op,
                message: format!("dim {d} appears more than once in {dims:?}"),
            });
        }
        out.push(n);
    }
    Ok(out)
}

/// PyTorch/NumPy broadcasting of two shapes.
pub fn broadcast_shapes(op: &'static str, a: &[i64], b: &[i64]) -> Result<Shape> {
    let rank = a.len().max(b.len());
    let mut out = Shape::with_capacity(rank);
    for i in 0..rank {
        let da = if i + a.len() >= rank {
            a[i + a.len() - rank]
        } else {
            1
        };
        let db = if i + b.len() >= rank {
            b[i + b.len() - rank]
        } else {
            1
        };
        out.push(match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => {
                return Err(Error::Broadcast {
                    op,
                    lhs: a.to_vec(),
                    rhs: b.to_vec(),
                });
            }
        });
    }
    Ok(out)
}

/// Row-major strides of `shape`, in elements.
pub fn strides(shape: &[i64]) -> Vec<i64> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting_aligns_trailing_dims() {
        assert_eq!(
            broadcast_shapes("add", &[3, 1], &[4]).unwrap().as_slice(),
            &[3, 4]
        );
        assert_eq!(
            broadcast_shapes("add", &[], &[2, 2]).unwrap().as_slice(),
            &[2, 2]
        );
        assert_eq!(
            broadcast_shapes("add", &[5, 1, 3], &[4, 1])
                .unwrap()
                .as_slice(),
            &[5, 4, 3]
        );
        let e = broadcast_shapes("add", &[3], &[4]).unwrap_err().to_string();
        assert!(
            e.contains("add") && e.contains("[3]") && e.contains("[4]"),
            "{e}"
        );
    }

    #[test]
    fn dims_normalize_like_pytorch() {
        assert_eq!(normalize_dim("sum", -1, 3).unwrap(), 2);
        assert_eq!(normalize_dim("sum", 0, 0).unwrap(), 0);
        assert!(normalize_dim("sum", 3, 3).is_err());
        assert!(normalize_dims("sum", &[0, -3], 3).is_err());
    }
}
