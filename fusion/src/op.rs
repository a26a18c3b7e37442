//! The op IR: an `Op` holds attributes only; operands live on the graph `Node`
//! (so renumbering values never touches an op). Attributes are normalized
//! (non-negative dims, concrete shapes) before an op is recorded, so two equal
//! ops compare equal and hash alike: the compile cache keys on them.

pub use crate::collective::{Collective, CollectiveReduce, ReplicaGroups};
use crate::dtype::DType;
use crate::scalar::Scalar;
use crate::shape::{Dims, Shape, TensorType};

pub use crate::elementwise::{BinaryOp, BinaryResult, UnaryOp, UnaryResult};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Sum,
    Mean,
    Prod,
    Max,
    Min,
    /// Variance with Bessel's correction `correction` (1: unbiased, PyTorch's default).
    Var {
        correction: i64,
    },
    LogSumExp,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArgReduceOp {
    ArgMax,
    ArgMin,
}

/// Running reductions along one dim (`torch.cumsum`, `torch.cumprod`,
/// `torch.cummax`, `torch.cummin`, `torch.logcumsumexp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScanOp {
    Sum,
    Prod,
    /// The running maximum (a NaN, once met, stays: PyTorch's).
    Max,
    /// The running minimum (a NaN, once met, stays).
    Min,
    /// Where the running maximum was (int64; the latest of equal ones).
    ArgMax,
    /// Where the running minimum was (int64; the latest of equal ones).
    ArgMin,
    /// `log(sum(exp(x)))` so far, without overflow (floats only).
    LogSumExp,
}

/// How a scatter combines each `src` element with the element it lands on
/// (several landing on one combine in any order: PyTorch's
/// `scatter_reduce` without `mean`, which the runtime composes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScatterReduce {
    /// The src element replaces it (one of several, unspecified which).
    Replace,
    Add,
    Mul,
    /// The larger (NaN wins, as PyTorch's `amax`).
    Max,
    /// The smaller (NaN wins).
    Min,
}

/// Which of an LU factorization's results an `Op::Lu` gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LuOutput {
    /// [..., m, n]: L below the diagonal (its unit diagonal implied), U on
    /// and above.
    Factors,
    /// int32 [..., min(m, n)], 1-based: step i swapped row i with row
    /// `pivots[i] - 1`.
    Pivots,
    /// int32 [...]: 0, or the 1-based step of the first zero pivot (U is
    /// singular).
    Info,
}

/// Which of a Householder QR's results an `Op::Householder` gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HouseholderOutput {
    /// [..., m, n]: R on and above the diagonal, each reflector's vector
    /// below it (its leading 1 implied), as LAPACK's `geqrf`.
    Factors,
    /// [..., min(m, n)]: each reflector's scale tau.
    Tau,
}

/// Which of a symmetric eigendecomposition's results an `Op::Eigh` gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EighOutput {
    /// [..., n]: the eigenvalues, ascending.
    Values,
    /// [..., n, n]: orthonormal eigenvectors, column i for eigenvalue i.
    Vectors,
}

crate::named_ops! {
    /// The classical orthogonal polynomials of `torch.special`, each `p_n(x)`
    /// of an elementwise degree n (`Op::Polynomial`).
    Polynomial {
        /// Chebyshev of the first kind, T_n.
        ChebyshevT chebyshev_polynomial_t,
        /// Chebyshev of the second kind, U_n.
        ChebyshevU chebyshev_polynomial_u,
        /// Chebyshev of the third kind, V_n.
        ChebyshevV chebyshev_polynomial_v,
        /// Chebyshev of the fourth kind, W_n.
        ChebyshevW chebyshev_polynomial_w,
        /// T_n(2x - 1), on [0, 1].
        ShiftedChebyshevT shifted_chebyshev_polynomial_t,
        /// U_n(2x - 1).
        ShiftedChebyshevU shifted_chebyshev_polynomial_u,
        /// V_n(2x - 1).
        ShiftedChebyshevV shifted_chebyshev_polynomial_v,
        /// W_n(2x - 1).
        ShiftedChebyshevW shifted_chebyshev_polynomial_w,
        /// The physicists' Hermite H_n.
        HermiteH hermite_polynomial_h,
        /// The probabilists' Hermite He_n.
        HermiteHe hermite_polynomial_he,
        /// Laguerre L_n.
        Laguerre laguerre_polynomial_l,
        /// Legendre P_n.
        Legendre legendre_polynomial_p,
    }
}

/// Which transform an `Op::Fft` computes (`stablehlo.fft`'s types).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FftKind {
    /// Complex to complex, `sum_k x_k e^(-2 pi i jk / n)`, unnormalized.
    Forward,
    /// Complex to complex, the inverse, divided by the signal's size.
    Inverse,
    /// Real to complex, the forward transform's first `n / 2 + 1` terms
    /// along the last dim (the rest are their conjugates).
    RealForward,
    /// Complex to real: the inverse of `RealForward`, divided by the
    /// signal's size.
    RealInverse,
}

impl FftKind {
    /// StableHLO's name of the transform.
    pub fn mlir(self) -> &'static str {
        match self {
            FftKind::Forward => "FFT",
            FftKind::Inverse => "IFFT",
            FftKind::RealForward => "RFFT",
            FftKind::RealInverse => "IRFFT",
        }
    }
}

/// Which of a sort's two results an `Op::Sort` gives (an op has one output).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SortOutput {
    /// The sorted elements.
    Values,
    /// Where each sorted element was along the dim (int64).
    Indices,
}

/// The pointwise ops of three operands and a scalar (`Op::Ternary`); low
/// precision floats compute in float32, as PyTorch's CPU kernels do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TernaryOp {
    /// `x + s * a * b`.
    Addcmul,
    /// `x + s * a / b`: floating point or complex.
    Addcdiv,
    /// `x + w * (end - x)` where `|w| < 0.5`, else `end - (end - x) * (1 -
    /// w)` (weight 1 gives `end` exactly): floating point or complex.
    Lerp,
}

impl TernaryOp {
    pub fn name(self) -> &'static str {
        match self {
            TernaryOp::Addcmul => "addcmul",
            TernaryOp::Addcdiv => "addcdiv",
            TernaryOp::Lerp => "lerp",
        }
    }

    /// How many tensors it takes before its scalar.
    pub fn tensors(self) -> usize {
        match self {
            TernaryOp::Addcmul | TernaryOp::Addcdiv => 3,
            TernaryOp::Lerp => 2,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reduction {
    None,
    Mean,
    Sum,
}

/// A value of `f64` that hashes and compares by bit pattern (op attributes).
#[derive(Clone, Copy, Debug)]
pub struct F64(pub f64);

impl PartialEq for F64 {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for F64 {}

impl std::hash::Hash for F64 {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.to_bits().hash(state)
    }
}

/// The attributes of an N-d convolution (`torch.nn.functional.conv{1,2,3}d`),
/// one entry per spatial dim in each list.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConvSpec {
    pub stride: Shape,
    /// Zeros added on both sides of each spatial dim.
    pub padding: Shape,
    /// Spacing between kernel taps.
    pub dilation: Shape,
    /// Input and output channels split into this many independent convolutions.
    pub groups: i64,
}

impl ConvSpec {
    /// Number of spatial dims: the length of the lists (0 if they disagree).
    pub fn spatial(&self) -> usize {
        let n = self.stride.len();
        if self.padding.len() == n && self.dilation.len() == n {
            n
        } else {
            0
        }
    }
}

/// The attributes of N-d pooling over the trailing spatial dims of
/// `[N, C, *spatial]` or `[C, *spatial]`, one entry per spatial dim.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PoolSpec {
    pub kernel: Shape,
    pub stride: Shape,
    /// Implicit padding on both sides (never part of a max; zeros for an average).
    pub padding: Shape,
    /// Spacing between window taps (1 for average pooling).
    pub dilation: Shape,
    /// Output sizes round up, adding a last partial window when it starts
    /// inside the input or its left padding (PyTorch's rule).
    pub ceil_mode: bool,
}

impl PoolSpec {
    /// Number of spatial dims.
    pub fn spatial(&self) -> usize {
        self.kernel.len()
    }
}

/// One operation. Inputs (in order) are listed per variant.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    // ------------------------------------------------------- creation (no inputs)
    /// A tensor of `ty` filled with `value` (full, zeros, ones, scalar operands).
    Full { value: Scalar, ty: TensorType },
    /// `start + i * step` for `i` in `0..len`.
    Arange {
        start: Scalar,
        step: Scalar,
        len: i64,
        dtype: DType,
    },
    /// (key0, key1: 0-d int64) samples uniform in `[0, 1)` of `shape` and a
    /// float `dtype`, from the counter-based Threefry generator keyed by
    /// (key0, key1): equal keys give equal samples in every mode. The keys are
    /// operands, not attributes, so a new key never compiles a new program.
    RandUniform { shape: Shape, dtype: DType },
    /// (alpha: float, key0, key1) a sample of the standard gamma distribution
    /// of shape `alpha` per element (`torch._standard_gamma`): Marsaglia and
    /// Tsang's rejection method in a loop that runs until every element is
    /// accepted, each round drawing from the Threefry state the keys start.
    /// Never below the dtype's smallest normal (as the CPU); NaN where
    /// `alpha` is negative or NaN.
    RandGamma,
    /// (rate: float, key0, key1) a Poisson sample per element
    /// (`torch.poisson`), in the rate's dtype: Knuth's product of uniforms
    /// below rate 10, Hoermann's transformed rejection (PTRS) from 10 on, as
    /// the CPU kernel; 0 for rate 0; NaN where the rate is negative, NaN or
    /// infinite.
    RandPoisson,
    /// (count: float, prob: float, key0, key1) a binomial sample per element
    /// (`torch.binomial`), count and prob of one type: inversion below
    /// `count q` 10 (q the smaller of p and 1 - p), Hoermann's BTRS from 10
    /// on, as the CPU kernel; 0 for a count or p at or below 0, the count for
    /// p at or above 1, NaN for a NaN count or p.
    RandBinomial,
    /// (x, alpha, total: float, one type and shape) the scaled
    /// reparameterized gradient `-(dF/dalpha) / f / (1 - x)` of a
    /// Beta(alpha, beta = total - alpha) sample `x`, beta held fixed
    /// (`torch._dirichlet_grad`, which Dirichlet's and Beta's `rsample()`
    /// backward combines).
    DirichletGrad,

    // ------------------------------------------------------------ elementwise
    /// (x)
    Unary(UnaryOp),
    /// (lhs, rhs), broadcast and promoted.
    Binary(BinaryOp),
    /// (condition: bool, x, y), broadcast and promoted.
    Where,
    /// (x, a, b, s: a 0-d number) or, for `lerp`, (x, end, weight: 0-d),
    /// broadcast and promoted over the tensors: `torch.addcmul`,
    /// `addcdiv` and `lerp` as one op each (an optimizer's moment updates:
    /// three ops each, per parameter, before).
    Ternary(TernaryOp),
    /// (x) clamped to `[min, max]`.
    Clamp {
        min: Option<Scalar>,
        max: Option<Scalar>,
    },
    /// (x) converted to `DType`.
    Cast(DType),
    /// (x) with its bits read as `DType` (`Tensor.view(dtype)`): an element
    /// size that halves (or less) adds a last dim of the ratio, one that grows
    /// takes a last dim of the ratio away. Not to or from bool.
    Bitcast(DType),

    // ----------------------------------------------------------------- layout
    /// (x) with a new shape of the same element count.
    Reshape(Shape),
    /// (x) with dims permuted: output dim i is input dim `perm[i]`.
    Permute(Dims),
    /// (x) broadcast to a shape (PyTorch `expand` semantics).
    BroadcastTo(Shape),
    /// (x) restricted to `start..end` by `step` along `dim`.
    Slice {
        dim: usize,
        start: i64,
        end: i64,
        step: i64,
    },
    /// (x0, x1, ...) joined along `dim`.
    Concat { dim: usize },
    /// (x) padded with `value`: `low[i]`/`high[i]` elements before/after dim i
    /// (negative pads crop).
    Pad {
        low: Shape,
        high: Shape,
        value: Scalar,
    },
    /// (x) reversed along `dims`.
    Flip(Dims),

    // --------------------------------------------------------------- indexing
    /// (x, index: 1-d int) selects entries of `dim`.
    IndexSelect { dim: usize },
    /// (x, index: int, same rank) `out[i][j] = x[index[i][j]][j]` for dim 0.
    Gather { dim: usize },
    /// (x, index, src) writes `src` into a copy of `x`, or combines it with
    /// what is there (`reduce`).
    Scatter { dim: usize, reduce: ScatterReduce },
    /// (x, start_0, ..., start_{r-1}: 0-d int) a `sizes` block; starts are clamped
    /// so the block fits, as XLA does.
    DynamicSlice { sizes: Shape },
    /// (x, update, start_0, ..., start_{r-1}) writes `update` into a copy of `x`.
    DynamicUpdateSlice,
    /// (storage: 1-d) the elements of a strided view of a flat storage:
    /// `out[i] = storage[offset + sum(i_k * strides[k])]` (PyTorch's
    /// `as_strided`; how every view of a `tpu` tensor is read).
    AsStrided {
        sizes: Shape,
        strides: Shape,
        offset: i64,
    },
    /// (storage: 1-d, value: `sizes`) a copy of the storage with the view's
    /// elements replaced by `value` (a write through a view).
    AsStridedScatter {
        sizes: Shape,
        strides: Shape,
        offset: i64,
    },

    // ------------------------------------------------------------- reductions
    /// (x) reduced over `dims` (all dims when empty).
    Reduce {
        op: ReduceOp,
        dims: Dims,
        keepdim: bool,
    },
    /// (x) index of the max/min along `dim` (the flattened tensor when `None`).
    ArgReduce {
        op: ArgReduceOp,
        dim: Option<usize>,
        keepdim: bool,
    },

    // ------------------------------------------------------- scans and sorting
    /// (x) the running sum or product along `dim`, of `x`'s shape: element i
    /// reduces elements 0..=i. Ints and bools accumulate in int64 (PyTorch's
    /// default dtype for them); floats keep their dtype.
    Scan { op: ScanOp, dim: usize },
    /// (x) sorted along `dim`, stably (equal elements keep their order), NaN
    /// above every number (last ascending, first descending), as PyTorch's
    /// `sort(stable=True)`. One result per op, as `MaxPool`/`MaxPoolIndices`:
    /// a sort records two ops; each lowers to a whole `stablehlo.sort` of
    /// (values, indices) and keeps one of its results.
    Sort {
        dim: usize,
        descending: bool,
        output: SortOutput,
    },

    // ----------------------------------------------------------------- linalg
    /// (a, b) `torch.matmul` semantics: batched, broadcasting, 1-d promotion.
    Matmul,
    /// (x) the discrete Fourier transform over its last `lengths.len()`
    /// dims (one to three), the signal's sizes `lengths` (a real inverse's
    /// input has `lengths.last / 2 + 1` elements along its last dim).
    Fft { kind: FftKind, lengths: Shape },
    /// (a [..., n, n]) the Cholesky factor of symmetric positive-definite
    /// matrices: lower-triangular `l` with `l @ l^T == a` (`upper`: `u^T @ u
    /// == a`), zeros in the other triangle, only `a`'s lower (upper) triangle
    /// read. From the first pivot that is not positive on, NaN. float32 and
    /// float64.
    Cholesky { upper: bool },
    /// (a [..., n, n]) int32 [...]: 0 for each matrix `Cholesky` factors,
    /// else the order of its first leading minor that is not
    /// positive-definite (LAPACK's `info`, which `torch.linalg.cholesky_ex`
    /// reports). The plugins' factorization gives NaN everywhere on a
    /// failure, so the order is found by factoring leading minors, a binary
    /// search run only when some matrix failed.
    CholeskyInfo { upper: bool },
    /// (x, n) the polynomial of degree `trunc(n)` at x, elementwise (x and n
    /// of one shape and float dtype; 0 for a negative degree): PyTorch's
    /// recurrences and closed forms, the recurrence a loop up to the
    /// largest degree.
    Polynomial(Polynomial),
    /// (a [..., m, n]) LU factorization with partial pivoting, LAPACK's
    /// `getrf` (`torch.linalg.lu_factor_ex`): `a[perm] == l @ u`. One result
    /// per op, as `Sort`: each lowers the whole factorization (a loop of
    /// min(m, n) steps) and keeps one. float32 and float64.
    Lu { output: LuOutput },
    /// (a [..., n, n]) LDL^T factorization of symmetric matrices with
    /// Bunch-Kaufman pivoting, LAPACK's `sytrf` (lower; only the lower
    /// triangle read; `torch.linalg.ldl_factor_ex`). The results are `Lu`'s
    /// three: the factors (L below the diagonal, D's 1x1 and 2x2 blocks on
    /// and below it, zeros above), int32 1-based pivots [..., n] (negative
    /// and equal for the two steps of a 2x2 block) and info. One result per
    /// op, as `Lu`. float32 and float64.
    Ldl { output: LuOutput },
    /// (factors [..., n, n], pivots int32 [..., n], b [..., n, k]) x with
    /// `a @ x == b` from `Ldl`'s results, LAPACK's `sytrs`. Batch dims equal
    /// (the runtime broadcasts them).
    LdlSolve,
    /// (pivots int32 [..., k]) int32 [..., rows]: where the row swaps of
    /// `Lu`'s pivots take `0..rows`: `a[perm] == l @ u`.
    LuPermutation { rows: i64 },
    /// (a [..., m, n]) Householder QR, LAPACK's `geqrf`: `a == q @ r` with
    /// `q = h_0 h_1 ... h_{k-1}`, `h_i = I - tau_i v_i v_i^T`. One result per
    /// op, as `Lu`. float32 and float64.
    Householder { output: HouseholderOutput },
    /// (a [..., n, n]) eigendecomposition of symmetric matrices, only the
    /// `lower` (or upper) triangle read: `a == v @ diag(w) @ v^T`, w
    /// ascending (`torch.linalg.eigh`). XLA's own decomposition (the `Eigh`
    /// custom call: cyclic Jacobi sweeps on the CPU, native on the TPU).
    /// One result per op, as `Lu`. float32 and float64.
    Eigh { lower: bool, output: EighOutput },
    /// (factors [..., m, k], tau [..., k], c) `c` multiplied by `q` of the
    /// reflectors (`Householder`'s outputs): `q @ c` (`left`) or `c @ q`, of
    /// `q^T` with `transpose`; LAPACK's `ormqr`. `c` is [..., m, p] (`left`)
    /// or [..., p, m].
    ApplyHouseholder { left: bool, transpose: bool },
    /// (a [..., n, n], b [..., n, k] (`left`) or [..., k, n]) x with `op(a) @
    /// x == b` (`left`) or `x @ op(a) == b`, where `op(a)` is `a` or, with
    /// `transpose`, `a^T`; `a` triangular (`lower` or upper; the other
    /// triangle never read), its diagonal taken as ones with
    /// `unit_diagonal`. Batch dims equal (the runtime broadcasts them).
    TriangularSolve {
        left: bool,
        lower: bool,
        unit_diagonal: bool,
        transpose: bool,
    },

    // ------------------------------------------------------------- composites
    /// (x)
    Softmax { dim: usize },
    /// (x)
    LogSoftmax { dim: usize },
    /// (x[, weight][, bias]) normalized over the last `normalized_dims` dims.
    LayerNorm {
        normalized_dims: usize,
        eps: F64,
        weight: bool,
        bias: bool,
    },
    /// (logits [N, C] or [C], target: int [N] or []) softmax cross-entropy.
    CrossEntropy { reduction: Reduction },
    /// (log_probs [N, C] or [C], target: int [N] or [][, weight [C]])
    /// PyTorch's `nll_loss`: a row's loss is `-log_probs[target] *
    /// weight[target]` (weight 1 without one), 0 where the target is
    /// `ignore_index`; reduced by `reduction`, `Mean` dividing by the summed
    /// weights (`NllLossTotalWeight`). One op, not a gather and a dozen
    /// pointwise ops: it is in every classifier's step.
    NllLoss {
        reduction: Reduction,
        ignore_index: i64,
        weighted: bool,
    },
    /// (the operands of `NllLoss`) the sum of the weights of the targets
    /// `NllLoss` counts: 0-d, of the log-probabilities' dtype.
    NllLossTotalWeight { ignore_index: i64, weighted: bool },
    /// (grad, log_probs, target, total_weight [][, weight]) the gradient of
    /// `NllLoss` with respect to its log-probabilities: `grad` has the
    /// loss's shape, `total_weight` is what `NllLossTotalWeight` gave.
    NllLossBackward {
        reduction: Reduction,
        ignore_index: i64,
        weighted: bool,
    },
    /// (index: int, number: int64 [], previous: int32 []) the running
    /// index-check flag of strict and fused mode: `previous` where it is set
    /// (non-zero), else `number` where an element of `index` other than
    /// `ignore` is outside `[0, size)`, else 0. (One op for what an index op
    /// checks, recorded after it: a dozen ops each before.)
    IndexCheck { size: i64, ignore: Option<i64> },

    // ------------------------------------------------------------ convolution
    /// (x [N, C, *spatial], weight [O, C / groups, *kernel]) the convolution of
    /// `torch.nn.functional.conv{1,2,3}d`, without bias: [N, O, *out].
    Conv(Box<ConvSpec>),
    /// (grad_out [N, O, *out], weight) the gradient of `Conv` with respect to
    /// its input, of shape `input`.
    ConvBackwardInput { spec: Box<ConvSpec>, input: Shape },
    /// (grad_out [N, O, *out], x) the gradient of `Conv` with respect to its
    /// weight, of shape `weight`.
    ConvBackwardWeight { spec: Box<ConvSpec>, weight: Shape },

    // ---------------------------------------------------------------- pooling
    /// (x [N, C, *spatial] or [C, *spatial]) the max of each window; NaN wins.
    MaxPool(Box<PoolSpec>),
    /// (x) where `MaxPool` found each max: int64 flat indices within each
    /// spatial plane (`max_pool2d_with_indices`); the first index on ties, the
    /// last NaN when there are NaNs, as PyTorch.
    MaxPoolIndices(Box<PoolSpec>),
    /// (x) the mean of each window: divided by `divisor_override` if given, else
    /// by the window's size clipped to the padded input (`count_include_pad`)
    /// or by its number of input elements.
    AvgPool {
        pool: Box<PoolSpec>,
        count_include_pad: bool,
        divisor_override: Option<i64>,
    },

    // ------------------------------------------------------------ collectives
    /// (x) a collective over the replicas of a replicated program
    /// (`collective.rs`): always a program of its own.
    Collective(Box<Collective>),
}

impl Op {
    /// Whether the op draws random numbers from keys among its operands
    /// (the last two).
    pub fn draws(&self) -> bool {
        matches!(
            self,
            Op::RandUniform { .. } | Op::RandGamma | Op::RandPoisson | Op::RandBinomial
        )
    }

    /// PyTorch's name for the op, used in error messages.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Full { .. } => "full",
            Op::Arange { .. } => "arange",
            Op::RandUniform { .. } => "rand",
            Op::RandGamma => "_standard_gamma",
            Op::RandPoisson => "poisson",
            Op::RandBinomial => "binomial",
            Op::DirichletGrad => "_dirichlet_grad",
            Op::Unary(u) => u.name(),
            Op::Binary(b) => b.name(),
            Op::Where => "where",
            Op::Ternary(t) => t.name(),
            Op::Clamp { .. } => "clamp",
            Op::Cast(_) => "to",
            Op::Bitcast(_) => "view_dtype",
            Op::Reshape(_) => "reshape",
            Op::Permute(_) => "permute",
            Op::BroadcastTo(_) => "expand",
            Op::Slice { .. } => "slice",
            Op::Concat { .. } => "cat",
            Op::Pad { .. } => "pad",
            Op::Flip(_) => "flip",
            Op::IndexSelect { .. } => "index_select",
            Op::Gather { .. } => "gather",
            Op::Scatter { reduce, .. } => match reduce {
                ScatterReduce::Replace => "scatter",
                ScatterReduce::Add => "scatter_add",
                ScatterReduce::Mul => "scatter_mul",
                ScatterReduce::Max => "scatter_amax",
                ScatterReduce::Min => "scatter_amin",
            },
            Op::DynamicSlice { .. } => "dynamic_slice",
            Op::DynamicUpdateSlice => "dynamic_update_slice",
            Op::AsStrided { .. } => "as_strided",
            Op::AsStridedScatter { .. } => "as_strided_scatter",
            Op::Reduce { op, .. } => match op {
                ReduceOp::Sum => "sum",
                ReduceOp::Mean => "mean",
                ReduceOp::Prod => "prod",
                ReduceOp::Max => "amax",
                ReduceOp::Min => "amin",
                ReduceOp::Var { .. } => "var",
                ReduceOp::LogSumExp => "logsumexp",
            },
            Op::ArgReduce { op, .. } => match op {
                ArgReduceOp::ArgMax => "argmax",
                ArgReduceOp::ArgMin => "argmin",
            },
            Op::Scan { op, .. } => match op {
                ScanOp::Sum => "cumsum",
                ScanOp::Prod => "cumprod",
                ScanOp::Max => "cummax",
                ScanOp::Min => "cummin",
                ScanOp::ArgMax => "cummax_indices",
                ScanOp::ArgMin => "cummin_indices",
                ScanOp::LogSumExp => "logcumsumexp",
            },
            Op::Sort { .. } => "sort",
            Op::Cholesky { .. } | Op::CholeskyInfo { .. } => "cholesky",
            Op::TriangularSolve { .. } => "triangular_solve",
            Op::Lu { .. } => "lu_factor",
            Op::Ldl { .. } => "ldl_factor",
            Op::LdlSolve => "ldl_solve",
            Op::Polynomial(kind) => kind.name(),
            Op::LuPermutation { .. } => "lu_permutation",
            Op::Householder { .. } => "geqrf",
            Op::ApplyHouseholder { .. } => "ormqr",
            Op::Eigh { .. } => "eigh",
            Op::Matmul => "matmul",
            Op::Fft { kind, .. } => match kind {
                FftKind::Forward | FftKind::Inverse => "_fft_c2c",
                FftKind::RealForward => "_fft_r2c",
                FftKind::RealInverse => "_fft_c2r",
            },
            Op::Softmax { .. } => "softmax",
            Op::LogSoftmax { .. } => "log_softmax",
            Op::LayerNorm { .. } => "layer_norm",
            Op::CrossEntropy { .. } => "cross_entropy",
            Op::NllLoss { .. } => "nll_loss",
            Op::NllLossTotalWeight { .. } => "nll_loss_total_weight",
            Op::NllLossBackward { .. } => "nll_loss_backward",
            Op::IndexCheck { .. } => "index_check",
            Op::Conv(spec) => match spec.spatial() {
                1 => "conv1d",
                2 => "conv2d",
                3 => "conv3d",
                _ => "convolution",
            },
            Op::ConvBackwardInput { .. } => "conv_backward_input",
            Op::ConvBackwardWeight { .. } => "conv_backward_weight",
            Op::MaxPool(pool) | Op::MaxPoolIndices(pool) => match pool.spatial() {
                1 => "max_pool1d",
                2 => "max_pool2d",
                3 => "max_pool3d",
                _ => "max_pool",
            },
            Op::AvgPool { pool, .. } => match pool.spatial() {
                1 => "avg_pool1d",
                2 => "avg_pool2d",
                3 => "avg_pool3d",
                _ => "avg_pool",
            },
            Op::Collective(c) => c.name(),
        }
    }

    /// For ops that index with a tensor: (index input, the dim it indexes, and
    /// the input whose dim bounds it). Debug mode checks these indices on the host.
    pub fn index_operand(&self) -> Option<IndexOperand> {
        match self {
            Op::IndexSelect { dim } | Op::Gather { dim } | Op::Scatter { dim, .. } => {
                Some(IndexOperand {
                    index_input: 1,
                    bounded_by: 0,
                    dim: *dim,
                    ignore: None,
                })
            }
            Op::CrossEntropy { .. } => Some(IndexOperand {
                index_input: 1,
                bounded_by: 0,
                dim: usize::MAX,
                ignore: Some(-100),
            }),
            Op::NllLoss { ignore_index, .. } => Some(IndexOperand {
                index_input: 1,
                bounded_by: 0,
                dim: usize::MAX,
                ignore: Some(*ignore_index),
            }),
            _ => None,
        }
    }
}

/// Which input of an op holds indices into which dim of which other input.
/// `dim == usize::MAX` means the last dim; an index equal to `ignore` is
/// allowed whatever the bound (a loss's `ignore_index`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexOperand {
    pub index_input: usize,
    pub bounded_by: usize,
    pub dim: usize,
    pub ignore: Option<i64>,
}
