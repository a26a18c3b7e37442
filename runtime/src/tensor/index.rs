//! Indexing with tensors: index_select, gather, scatter, dynamic slices,
//! PyTorch's advanced indexing (`index`, `index_put`), index_add, index_fill,
//! take and put.
//! In debug mode an out-of-range index is an error at the op (as on CPU);
//! compiled code clamps it, as XLA does.

use fusion::shape::normalize_dim;
use fusion::{DType, Op, Scalar, ScatterReduce};

use super::Tensor;
use crate::error::Result;

fusion::named_ops! {
    /// How [`Tensor::scatter_reduce`] combines the elements landing on one
    /// place (PyTorch's `reduce` names).
    ScatterReduction {
        Sum sum,
        Prod prod,
        /// The mean of those elements (and of `self`'s, with
        /// `include_self`); integers divide rounding down.
        Mean mean,
        Amax amax,
        Amin amin,
    }
}

impl Tensor {
    /// `torch.scatter_reduce`: a copy of `self` where each place `index`
    /// names along `dim` holds `reduce` of the `src` elements landing there,
    /// and of its own element with `include_self` (places nothing lands on
    /// keep theirs). NaN wins `amax` and `amin`, as in PyTorch.
    #[track_caller]
    pub fn scatter_reduce(
        &self,
        dim: i64,
        index: &Tensor,
        src: &Tensor,
        reduce: ScatterReduction,
        include_self: bool,
    ) -> Result<Tensor> {
        let d = normalize_dim("scatter_reduce", dim, self.rank())?;
        let combine = |base: &Tensor, how: ScatterReduce| {
            base.op(
                Op::Scatter {
                    dim: d,
                    reduce: how,
                },
                &[index, src],
            )
        };
        // Without include_self, the places src lands on start from the
        // reduction's identity instead of self's element.
        let start = |identity: Scalar| -> Result<Tensor> {
            if include_self {
                Ok(self.clone())
            } else {
                self.scatter(
                    dim,
                    index,
                    &src.full_like(identity)?.to_dtype(self.dtype())?,
                )
            }
        };
        let (lowest, highest) = match self.dtype() {
            DType::Bool => (Scalar::Bool(false), Scalar::Bool(true)),
            d if d.is_float() => (
                Scalar::Float(f64::NEG_INFINITY),
                Scalar::Float(f64::INFINITY),
            ),
            DType::U8 => (Scalar::Int(0), Scalar::Int(u8::MAX.into())),
            DType::I8 => (Scalar::Int(i8::MIN.into()), Scalar::Int(i8::MAX.into())),
            DType::I16 => (Scalar::Int(i16::MIN.into()), Scalar::Int(i16::MAX.into())),
            DType::I32 => (Scalar::Int(i32::MIN.into()), Scalar::Int(i32::MAX.into())),
            _ => (Scalar::Int(i64::MIN), Scalar::Int(i64::MAX)),
        };
        match reduce {
            ScatterReduction::Sum => combine(&start(Scalar::Int(0))?, ScatterReduce::Add),
            ScatterReduction::Prod => combine(&start(Scalar::Int(1))?, ScatterReduce::Mul),
            ScatterReduction::Amax => combine(&start(lowest)?, ScatterReduce::Max),
            ScatterReduction::Amin => combine(&start(highest)?, ScatterReduce::Min),
            ScatterReduction::Mean => {
                let sums = combine(&start(Scalar::Int(0))?, ScatterReduce::Add)?;
                // How many elements each place averages: 1 (its own) where
                // nothing lands or with include_self, plus what lands.
                let ones = self.ones_like()?;
                let base = if include_self {
                    ones
                } else {
                    ones.scatter(dim, index, &src.zeros_like()?.to_dtype(self.dtype())?)?
                };
                let counts =
                    base.scatter_add(dim, index, &src.ones_like()?.to_dtype(self.dtype())?)?;
                if self.dtype().is_float() {
                    sums.div(&counts)
                } else {
                    sums.floor_divide(&counts)
                }
            }
        }
    }

    /// The entries of `dim` listed in the 1-d integer tensor `index`.
    #[track_caller]
    pub fn index_select(&self, dim: i64, index: &Tensor) -> Result<Tensor> {
        let d = normalize_dim("index_select", dim, self.rank())?;
        self.op(Op::IndexSelect { dim: d }, &[index])
    }

    /// `torch.gather`: along `dim`, `out[..i..] = self[..index[..i..]..]`.
    #[track_caller]
    pub fn gather(&self, dim: i64, index: &Tensor) -> Result<Tensor> {
        let d = normalize_dim("gather", dim, self.rank())?;
        self.op(Op::Gather { dim: d }, &[index])
    }

    /// `torch.scatter`: a copy of `self` with `src` written at `index` along `dim`.
    #[track_caller]
    pub fn scatter(&self, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        let d = normalize_dim("scatter", dim, self.rank())?;
        self.op(
            Op::Scatter {
                dim: d,
                reduce: ScatterReduce::Replace,
            },
            &[index, src],
        )
    }

    /// `torch.scatter_add`: a copy of `self` with `src` added at `index` along `dim`.
    #[track_caller]
    pub fn scatter_add(&self, dim: i64, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        let d = normalize_dim("scatter_add", dim, self.rank())?;
        self.op(
            Op::Scatter {
                dim: d,
                reduce: ScatterReduce::Add,
            },
            &[index, src],
        )
    }

    /// A `sizes` block starting at the 0-d integer tensors `starts` (one per
    /// dim); starts are clamped so the block fits, as `lax.dynamic_slice`.
    #[track_caller]
    pub fn dynamic_slice(&self, starts: &[&Tensor], sizes: &[i64]) -> Result<Tensor> {
        self.op(
            Op::DynamicSlice {
                sizes: sizes.into(),
            },
            starts,
        )
    }

    /// A copy of `self` with `update` written at `starts` (clamped to fit).
    #[track_caller]
    pub fn dynamic_update_slice(&self, update: &Tensor, starts: &[&Tensor]) -> Result<Tensor> {
        let mut inputs = vec![update];
        inputs.extend_from_slice(starts);
        self.op(Op::DynamicUpdateSlice, &inputs)
    }
}

fn invalid(op: &'static str, message: String) -> crate::Error {
    fusion::Error::Invalid { op, message }.into()
}

/// The indexing of a tensor by a list of optional index tensors, as PyTorch
/// defines it: the index tensors, broadcast together to `batch`, pick along
/// the dims `dims`; when those dims are not adjacent, the batch dims go first
/// in the result.
struct Plan {
    /// The indexed dims, ascending.
    dims: Vec<usize>,
    /// The integer index tensor of each indexed dim.
    index: Vec<Tensor>,
    /// The broadcast shape of the index tensors.
    batch: Vec<i64>,
    /// The tensor indexed, with the indexed dims moved first when they are
    /// not adjacent.
    x: Tensor,
    /// The permutation applied to get `x` (none when the dims are adjacent).
    perm: Option<Vec<i64>>,
    /// Where the indexed dims start in `x`.
    first: usize,
}

impl Plan {
    #[track_caller]
    fn new(op: &'static str, x: &Tensor, indices: &[Option<&Tensor>]) -> Result<Plan> {
        let what = || format!("a tensor of shape {:?} ({})", x.shape(), x.dtype());
        if indices.len() > x.rank() {
            return Err(invalid(
                op,
                format!("too many indices ({}) for {}", indices.len(), what()),
            ));
        }
        let (mut dims, mut index) = (vec![], vec![]);
        for (d, t) in indices.iter().enumerate() {
            let Some(t) = t else { continue };
            if !t.dtype().is_int() {
                return Err(invalid(
                    op,
                    format!(
                        "the index tensor for dim {d} of {} is {}{:?}; expected an integer tensor \
                         (a bool mask goes as its true positions, one index tensor per dim)",
                        what(),
                        t.dtype(),
                        t.shape()
                    ),
                ));
            }
            dims.push(d);
            index.push((*t).clone());
        }
        if dims.is_empty() {
            return Err(invalid(
                op,
                format!("expected at least one index tensor for {}", what()),
            ));
        }
        let mut batch = index[0].shape().to_vec();
        for t in &index[1..] {
            batch = fusion::shape::broadcast_shapes(op, &batch, t.shape())
                .map_err(|_| {
                    let shapes: Vec<&[i64]> = index.iter().map(|t| t.shape()).collect();
                    invalid(
                        op,
                        format!("index tensors of shapes {shapes:?} do not broadcast together"),
                    )
                })?
                .to_vec();
        }
        let adjacent = dims.windows(2).all(|w| w[1] == w[0] + 1);
        let (xp, perm, first) = if adjacent {
            (x.clone(), None, dims[0])
        } else {
            let mut perm: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
            perm.extend((0..x.rank() as i64).filter(|d| !dims.contains(&(*d as usize))));
            (x.permute(&perm)?, Some(perm), 0)
        };
        Ok(Plan {
            dims,
            index,
            batch,
            x: xp,
            perm,
            first,
        })
    }

    /// The shape of the indexed tensor (permuted).
    fn sizes(&self) -> &[i64] {
        self.x.shape()
    }

    /// `[pre..., batch..., post...]`: the shape of the result of indexing.
    fn result_shape(&self) -> Vec<i64> {
        let s = self.sizes();
        let mut out = s[..self.first].to_vec();
        out.extend_from_slice(&self.batch);
        out.extend_from_slice(&s[self.first + self.dims.len()..]);
        out
    }

    /// `[pre..., prod(indexed), post...]`: the indexed dims flattened into one.
    fn flat_shape(&self) -> Vec<i64> {
        let s = self.sizes();
        let mut out = s[..self.first].to_vec();
        out.push(s[self.first..self.first + self.dims.len()].iter().product());
        out.extend_from_slice(&s[self.first + self.dims.len()..]);
        out
    }

    /// The linear (row-major) index into the flattened indexed dims, of shape
    /// `[numel(batch)]`. Negative indices count from the end; with several
    /// index tensors, an index out of range in its own dim makes the linear
    /// index out of range (so that the gather or scatter refuses it).
    #[track_caller]
    fn linear_index(&self) -> Result<Tensor> {
        let sizes = &self.sizes()[self.first..self.first + self.dims.len()];
        let total: i64 = sizes.iter().product();
        let several = self.index.len() > 1;
        let mut linear: Option<Tensor> = None;
        let mut bad: Option<Tensor> = None;
        let mut stride = 1;
        for (i, &size) in self.index.iter().zip(sizes).rev() {
            let i = if i.dtype() == DType::I64 {
                i.clone()
            } else {
                i.to_dtype(DType::I64)?
            };
            let i = Tensor::where_(&i.lt(0i64)?, &i.add(size)?, &i)?;
            let i = i.expand(&self.batch)?;
            if several {
                let out = i.lt(0i64)?.logical_or(&i.ge(size)?)?;
                bad = Some(match bad {
                    None => out,
                    Some(b) => b.logical_or(&out)?,
                });
            }
            let term = if stride == 1 { i } else { i.mul(stride)? };
            linear = Some(match linear {
                None => term,
                Some(l) => l.add(&term)?,
            });
            stride *= size;
        }
        let mut linear = linear.expect("at least one index tensor");
        if let Some(bad) = bad {
            linear = Tensor::where_(&bad, total, &linear)?;
        }
        linear.reshape(&[self.batch.iter().product()])
    }

    /// `t` (shaped like the permuted tensor) in the original dim order.
    #[track_caller]
    fn unpermute(&self, t: Tensor) -> Result<Tensor> {
        let Some(perm) = &self.perm else {
            return Ok(t);
        };
        let mut inverse = vec![0i64; perm.len()];
        for (i, &p) in perm.iter().enumerate() {
            inverse[p as usize] = i as i64;
        }
        t.permute(&inverse)
    }
}

/// Whether `s` is one (an alpha that changes nothing).
fn is_one(s: Scalar) -> bool {
    match s {
        Scalar::Bool(b) => b,
        Scalar::Int(i) => i == 1,
        Scalar::Float(f) => f == 1.0,
    }
}

impl Tensor {
    /// PyTorch's advanced indexing `self[i0, :, i2]`: `indices[d]` is the
    /// integer index tensor for dim `d`, or `None` for a full slice (trailing
    /// dims not listed are full slices too). The index tensors broadcast
    /// together to a shape B and negative indices count from the end. The
    /// result is `self`'s shape with the indexed dims replaced by B, in their
    /// place when they are adjacent, else first (as in NumPy). Bool masks are
    /// not taken: pass their true positions (`nonzero`), one tensor per dim.
    #[track_caller]
    pub fn index(&self, indices: &[Option<&Tensor>]) -> Result<Tensor> {
        let p = Plan::new("index", self, indices)?;
        let shape = p.result_shape();
        if shape.contains(&0) {
            return self.device().zeros(&shape, self.dtype());
        }
        let flat = p.x.reshape(&p.flat_shape())?;
        flat.index_select(p.first as i64, &p.linear_index()?)?
            .reshape(&shape)
    }

    /// `self[indices] = values` (`index_put`), or `+=` when `accumulate`
    /// (repeated positions then sum; without it, which of them wins is
    /// unspecified): a copy of `self` with `values` (cast to `self`'s dtype,
    /// broadcast to the shape `self.index(indices)` has) written at the
    /// positions `self.index(indices)` reads.
    #[track_caller]
    pub fn index_put(
        &self,
        indices: &[Option<&Tensor>],
        values: &Tensor,
        accumulate: bool,
    ) -> Result<Tensor> {
        let p = Plan::new("index_put", self, indices)?;
        let shape = p.result_shape();
        let n: i64 = p.batch.iter().product();
        if n == 0 || self.numel() == 0 {
            return Ok(self.clone());
        }
        let fshape = p.flat_shape();
        let v = if values.dtype() == self.dtype() {
            values.clone()
        } else {
            values.to_dtype(self.dtype())?
        };
        let v = v.expand(&shape).map_err(|_| {
            invalid(
                "index_put",
                format!(
                    "values of shape {:?} do not broadcast to the indexed shape {shape:?} \
                     (of a tensor of shape {:?})",
                    values.shape(),
                    self.shape()
                ),
            )
        })?;
        let mut vflat = fshape.clone();
        vflat[p.first] = n;
        let v = v.reshape(&vflat)?;
        let mut ishape = vec![1; fshape.len()];
        ishape[p.first] = n;
        let idx = p.linear_index()?.reshape(&ishape)?.expand(&vflat)?;
        let flat = p.x.reshape(&fshape)?;
        let d = p.first as i64;
        let updated = if accumulate {
            flat.scatter_add(d, &idx, &v)?
        } else {
            flat.scatter(d, &idx, &v)?
        };
        p.unpermute(updated.reshape(p.sizes())?)
    }

    /// `torch.index_add`: a copy of `self` with `alpha * source` added along
    /// `dim` at the positions `index` (0-d or 1-d, integer) lists; repeated
    /// positions sum. `source` has `self`'s shape with `dim` of size
    /// `index.numel()`, and is cast to `self`'s dtype.
    #[track_caller]
    pub fn index_add(
        &self,
        dim: i64,
        index: &Tensor,
        source: &Tensor,
        alpha: impl Into<Scalar>,
    ) -> Result<Tensor> {
        let op = "index_add";
        let alpha = alpha.into();
        let d = normalize_dim(op, dim, self.rank())?;
        expect_list_index(op, index)?;
        if !self.dtype().is_float() && matches!(alpha, Scalar::Float(_)) {
            return Err(invalid(
                op,
                format!(
                    "for an integral tensor ({}), alpha must not be a floating point number",
                    self.dtype()
                ),
            ));
        }
        let n = index.numel();
        let mut want = if self.rank() == 0 {
            vec![1]
        } else {
            self.shape().to_vec()
        };
        want[d] = n;
        let src_ok = if self.rank() == 0 {
            source.numel() == n && source.rank() <= 1
        } else {
            source.shape() == want.as_slice()
        };
        if !src_ok {
            return Err(invalid(
                op,
                format!(
                    "source of shape {:?} does not match self of shape {:?} with {n} indices \
                     along dim {d} (expected {:?})",
                    source.shape(),
                    self.shape(),
                    if self.rank() == 0 { &[][..] } else { &want[..] }
                ),
            ));
        }
        if n == 0 || source.numel() == 0 {
            return Ok(self.clone());
        }
        let mut src = if source.dtype() == self.dtype() {
            source.clone()
        } else {
            source.to_dtype(self.dtype())?
        };
        if !is_one(alpha) {
            src = src.mul(alpha)?;
            if src.dtype() != self.dtype() {
                src = src.to_dtype(self.dtype())?;
            }
        }
        if self.rank() == 0 {
            return self.add(&src.reshape(&[])?);
        }
        let mut ishape = vec![1; self.rank()];
        ishape[d] = n;
        let idx = index
            .to_dtype(DType::I64)?
            .reshape(&ishape)?
            .expand(source.shape())?;
        self.scatter_add(d as i64, &idx, &src)
    }

    /// `torch.index_fill`: a copy of `self` with `value` (cast to `self`'s
    /// dtype) written along `dim` at the positions `index` (0-d or 1-d,
    /// integer; negative ones count from the end) lists.
    #[track_caller]
    pub fn index_fill(&self, dim: i64, index: &Tensor, value: impl Into<Scalar>) -> Result<Tensor> {
        let op = "index_fill";
        let value = value.into();
        let d = normalize_dim(op, dim, self.rank())?;
        expect_list_index(op, index)?;
        let n = index.numel();
        if n == 0 || self.numel() == 0 {
            return Ok(self.clone());
        }
        if self.rank() == 0 {
            return self.device().full(&[], value, self.dtype());
        }
        let size = self.shape()[d];
        let i = index.to_dtype(DType::I64)?;
        let i = Tensor::where_(&i.lt(0i64)?, &i.add(size)?, &i)?;
        let (mut ishape, mut shape) = (vec![1; self.rank()], self.shape().to_vec());
        ishape[d] = n;
        shape[d] = n;
        let idx = i.reshape(&ishape)?.expand(&shape)?;
        let src = self.device().full(&shape, value, self.dtype())?;
        self.scatter(d as i64, &idx, &src)
    }

    /// `torch.take`: the elements of the flattened `self` at the integer
    /// positions `index` (negative ones count from the end), in `index`'s shape.
    #[track_caller]
    pub fn take(&self, index: &Tensor) -> Result<Tensor> {
        if index.numel() == 0 {
            return self.device().zeros(index.shape(), self.dtype());
        }
        let flat = self.flat_positions("take", index)?;
        self.reshape(&[self.numel()])?
            .index_select(0, &flat)?
            .reshape(index.shape())
    }

    /// `Tensor.put_` (take's transpose): a copy of `self` with the elements
    /// of `source` written (or added, when `accumulate`) at the flat positions
    /// `index` (negative ones count from the end); `source` and `index` have
    /// as many elements.
    #[track_caller]
    pub fn put(&self, index: &Tensor, source: &Tensor, accumulate: bool) -> Result<Tensor> {
        if index.numel() != source.numel() {
            return Err(invalid(
                "put",
                format!(
                    "expected source and index to have as many elements, got source of shape \
                     {:?} and index of shape {:?}",
                    source.shape(),
                    index.shape()
                ),
            ));
        }
        if index.numel() == 0 {
            return Ok(self.clone());
        }
        let flat = self.flat_positions("put", index)?;
        let src = source.reshape(&[source.numel()])?;
        let src = if src.dtype() == self.dtype() {
            src
        } else {
            src.to_dtype(self.dtype())?
        };
        let x = self.reshape(&[self.numel()])?;
        let r = if accumulate {
            x.scatter_add(0, &flat, &src)?
        } else {
            x.scatter(0, &flat, &src)?
        };
        r.reshape(self.shape())
    }

    /// `index` (integer, nonempty) flattened, as positions into the flattened
    /// `self`, negative ones counted from the end.
    #[track_caller]
    fn flat_positions(&self, op: &'static str, index: &Tensor) -> Result<Tensor> {
        if !index.dtype().is_int() {
            return Err(invalid(
                op,
                format!(
                    "expected an integer index, got {}{:?}",
                    index.dtype(),
                    index.shape()
                ),
            ));
        }
        if self.numel() == 0 {
            return Err(invalid(
                op,
                format!(
                    "{} indices into an empty tensor (of shape {:?})",
                    index.numel(),
                    self.shape()
                ),
            ));
        }
        let i = index.reshape(&[index.numel()])?.to_dtype(DType::I64)?;
        Tensor::where_(&i.lt(0i64)?, &i.add(self.numel())?, &i)
    }
}

/// An error naming `op` unless `index` is a 0-d or 1-d integer tensor (the
/// positions along one dim that index_add and index_fill take).
fn expect_list_index(op: &'static str, index: &Tensor) -> Result<()> {
    if index.rank() <= 1 && index.dtype().is_int() {
        return Ok(());
    }
    Err(invalid(
        op,
        format!(
            "expected a 0-d or 1-d integer index, got {}{:?}",
            index.dtype(),
            index.shape()
        ),
    ))
}
