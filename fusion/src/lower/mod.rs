//! StableHLO emission: a `Graph` becomes one MLIR module with a `@main` function.
//!
//! Ops are written in MLIR's generic form (`"stablehlo.add"(%a, %b) : (...) -> ...`),
//! which every StableHLO version since 0.9 parses. Attribute syntax follows
//! StableHLO 1.x (`array<i64: ...>`), the range the XLA CPU plugin (1.13) and
//! libtpu (1.24) accept. Float constants are written as bit patterns, so they
//! round-trip exactly.
//!
//! `Emitter` knows value types, so each op family (one file each) only says
//! which StableHLO ops to emit; conversions and broadcasts are no-ops when the
//! value already has the wanted type.

mod bessel;
mod collective;
mod conv;
mod create;
mod elementwise;
mod emitter;
mod fft;
mod index;
mod layout;
mod ldl;
mod linalg;
mod nn;
mod polynomial;
mod pool;
mod random;
mod reduce;
mod reparameterized;
mod scan;
mod special;
mod view;

pub use emitter::{Cmp, Emitter, Unsigned, V};
pub(crate) use emitter::{dim_list, i64_array};

use std::fmt::Write;

use crate::graph::{Def, Graph, ValueId};
use crate::op::Op;
use crate::scalar::Scalar;
use crate::shape::TensorType;

/// What the lowering may assume of the compiler its modules go to. The
/// values computed never depend on it; only which of equivalent programs is
/// emitted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Target {
    /// The compiler runs a dot as an Eigen tensor contraction, in the
    /// operand order the module gives (the XLA CPU plugin, whose XNNPACK
    /// dots are off: `required_xla_options` in the runtime). Eigen runs
    /// `x @ w.T` (a linear layer's forward: the weight contracted on its
    /// minor dim, as the right operand) 2-3x slower than `(w @ x.T).T` when
    /// the weight has more rows than `x`; see [`nn::linear_weight_first`].
    pub eigen_dots: bool,
}

impl Target {
    /// The target of a PJRT platform (`cpu`, `tpu`, `cuda`, ...).
    pub fn of_platform(platform: &str) -> Target {
        Target {
            eigen_dots: platform == "cpu",
        }
    }
}

/// Lowers a whole graph to an MLIR module whose `@main` takes the graph's
/// parameters and returns its outputs, assuming nothing of the compiler.
pub fn lower(graph: &Graph) -> String {
    lower_for(graph, Target::default())
}

/// Lowers a whole graph for `target`'s compiler.
pub fn lower_for(graph: &Graph, target: Target) -> String {
    let mut e = Emitter::new();
    let mut values: Vec<V> = Vec::with_capacity(graph.defs().len());
    let mut args = 0;
    for def in graph.defs() {
        let v = match def {
            Def::Param(ty) => {
                args += 1;
                Emitter::argument(args - 1, ty.clone())
            }
            Def::Node(node) => {
                let inputs: Vec<V> = node
                    .inputs
                    .iter()
                    .map(|v| values[v.0 as usize].clone())
                    .collect();
                let out = graph.ty(ValueId(values.len() as u32)).clone();
                match weight_of_linear(graph, target, &node.op, &node.inputs, &inputs) {
                    Some(weight) => {
                        let w = emit_weight(&mut e, &values, &weight, &inputs[1].ty);
                        nn::linear_weight_first(&mut e, &inputs[0], &w, out)
                    }
                    None => lower_op(&mut e, &node.op, &inputs, out),
                }
            }
        };
        values.push(v);
    }
    let outputs: Vec<&V> = graph
        .outputs()
        .iter()
        .map(|v| &values[v.0 as usize])
        .collect();

    let mut text = String::with_capacity(e.body().len() + 512);
    text.push_str(
        "module @eagertpu attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n",
    );
    text.push_str("  func.func public @main(");
    for (n, ty) in graph.param_types().enumerate() {
        if n > 0 {
            text.push_str(", ");
        }
        let _ = write!(text, "%arg{n}: {}", ty.mlir());
        if let Some(out) = graph.aliased_output(n) {
            let _ = write!(text, " {{tf.aliasing_output = {out} : i32}}");
        }
    }
    text.push_str(") -> (");
    let out_types: Vec<&TensorType> = outputs.iter().map(|v| &v.ty).collect();
    write_type_list(&mut text, &out_types);
    text.push_str(") {\n");
    text.push_str(e.body());
    text.push_str("    \"func.return\"(");
    for (i, v) in outputs.iter().enumerate() {
        if i > 0 {
            text.push_str(", ");
        }
        let _ = write!(text, "{v}");
    }
    text.push_str(") : (");
    write_type_list(&mut text, &out_types);
    text.push_str(") -> ()\n  }\n}\n");
    text
}

/// Where the weight `w` of a linear layer's `x @ w.T` is in the graph.
enum Weight {
    /// A matrix value, which the matmul's right operand transposes.
    Matrix(ValueId),
    /// A row-major block of a flat storage, which the right operand views
    /// transposed (`w.t()` of a PyTorch tensor: sizes `[in, out]`, strides
    /// `[1, in]`).
    Storage { storage: ValueId, offset: i64 },
}

/// For a matmul that an Eigen contraction runs faster weight first: the
/// weight `w` of `x @ w.T` (the matmul's right operand is a transpose of a
/// row-major `w`), when `w` has more rows than `x` (the output has more
/// columns than rows). Measured on the XLA CPU plugin, 2 cores, f32, rows x
/// in x out: 64x512x784 616 -> 295 us, 64x784x512 363 -> 170-250, 32x64x6282
/// 272 -> 148, 256x512x512 622 -> 537, 512x768x3072 7970 -> 7530; with more
/// rows than columns it loses (1024x512x512 1623 -> 1960, 64x512x10 24 ->
/// 45), so those stay as they are.
fn weight_of_linear(
    graph: &Graph,
    target: Target,
    op: &Op,
    ids: &[ValueId],
    inputs: &[V],
) -> Option<Weight> {
    if !target.eigen_dots || !matches!(op, Op::Matmul) || inputs.len() != 2 {
        return None;
    }
    let (x, rhs) = (&inputs[0].ty, &inputs[1].ty);
    if x.rank() < 2 || rhs.rank() != 2 {
        return None;
    }
    let rows: i64 = x.shape[..x.rank() - 1].iter().product();
    let (k, n) = (rhs.shape[0], rhs.shape[1]);
    if rows >= n {
        return None;
    }
    let Def::Node(view) = &graph.defs()[ids[1].0 as usize] else {
        return None;
    };
    match &view.op {
        Op::Permute(perm) if perm.as_slice() == [1, 0] => Some(Weight::Matrix(view.inputs[0])),
        Op::AsStrided {
            strides, offset, ..
        } if strides.as_slice() == [1, k] && graph.ty(view.inputs[0]).rank() == 1 => {
            Some(Weight::Storage {
                storage: view.inputs[0],
                offset: *offset,
            })
        }
        _ => None,
    }
}

/// The weight `[out, in]` of a linear layer whose transpose is `rhs`.
fn emit_weight(e: &mut Emitter, values: &[V], weight: &Weight, rhs: &TensorType) -> V {
    let (k, n) = (rhs.shape[0], rhs.shape[1]);
    match weight {
        Weight::Matrix(w) => values[w.0 as usize].clone(),
        Weight::Storage { storage, offset } => {
            view::as_strided(e, &values[storage.0 as usize], &[n, k], &[k, 1], *offset)
        }
    }
}

fn write_type_list(out: &mut String, tys: &[&TensorType]) {
    for (i, t) in tys.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        t.write_mlir(out);
    }
}

/// Emits one op.
fn lower_op(e: &mut Emitter, op: &Op, inputs: &[V], out: TensorType) -> V {
    if out.shape.contains(&0) {
        // No elements to compute: some ops (a gather from an empty operand)
        // would not even verify.
        return e.constant(Scalar::Int(0), out);
    }
    match op {
        Op::Full { value, ty } => e.constant(*value, ty.clone()),
        Op::Arange {
            start, step, len, ..
        } => create::arange(e, *start, *step, *len, out),
        Op::Unary(u) => elementwise::unary(e, *u, &inputs[0], out),
        Op::Binary(b) => elementwise::binary(e, *b, &inputs[0], &inputs[1], out),
        Op::Where => elementwise::where_(e, inputs, out),
        Op::Ternary(t) => elementwise::ternary(e, *t, inputs, out),
        Op::Clamp { min, max } => elementwise::clamp(e, &inputs[0], *min, *max, out),
        Op::Cast(dtype) => e.convert(&inputs[0], *dtype),
        Op::Bitcast(_) => layout::bitcast(e, &inputs[0], out),
        Op::Reshape(shape) => e.reshape(&inputs[0], shape),
        Op::Permute(perm) => e.transpose(&inputs[0], perm),
        Op::BroadcastTo(shape) => e.broadcast_to(&inputs[0], shape),
        Op::Slice {
            dim,
            start,
            end,
            step,
        } => layout::slice(e, &inputs[0], *dim, *start, *end, *step),
        Op::Concat { dim } => layout::concat(e, inputs, *dim, out),
        Op::Pad { low, high, value } => layout::pad(e, &inputs[0], low, high, *value),
        Op::Flip(dims) => layout::flip(e, &inputs[0], dims),
        Op::IndexSelect { dim } => index::index_select(e, &inputs[0], &inputs[1], *dim, out),
        Op::Gather { dim } => index::gather(e, &inputs[0], &inputs[1], *dim),
        Op::Scatter { dim, reduce } => index::scatter(e, inputs, *dim, *reduce),
        Op::DynamicSlice { sizes } => index::dynamic_slice(e, inputs, sizes),
        Op::DynamicUpdateSlice => index::dynamic_update_slice(e, inputs),
        Op::AsStrided {
            sizes,
            strides,
            offset,
        } => view::as_strided(e, &inputs[0], sizes, strides, *offset),
        Op::AsStridedScatter {
            sizes,
            strides,
            offset,
        } => view::as_strided_scatter(e, &inputs[0], &inputs[1], sizes, strides, *offset),
        Op::Reduce { op, dims, .. } => reduce::reduce(e, *op, &inputs[0], dims, out),
        Op::ArgReduce { op, dim, .. } => reduce::arg_reduce(e, *op, &inputs[0], *dim, out),
        Op::Scan { op, dim } => scan::scan(e, *op, &inputs[0], *dim, out),
        Op::Sort {
            dim,
            descending,
            output,
        } => scan::sort(e, &inputs[0], *dim, *descending, *output, out),
        Op::Matmul => nn::matmul(e, &inputs[0], &inputs[1], out),
        Op::Fft { kind, lengths } => fft::fft(e, *kind, lengths, &inputs[0], out),
        Op::Cholesky { upper } => linalg::cholesky(e, &inputs[0], *upper),
        Op::CholeskyInfo { upper } => linalg::cholesky_info(e, &inputs[0], *upper, out),
        Op::Lu { output } => linalg::lu(e, &inputs[0], *output),
        Op::Ldl { output } => ldl::ldl(e, &inputs[0], *output),
        Op::LdlSolve => ldl::ldl_solve(e, inputs),
        Op::Polynomial(kind) => polynomial::polynomial(e, *kind, &inputs[0], &inputs[1]),
        Op::LuPermutation { .. } => linalg::lu_permutation(e, &inputs[0], out),
        Op::Householder { output } => linalg::householder(e, &inputs[0], *output),
        Op::Eigh { lower, output } => linalg::eigh(e, &inputs[0], *lower, *output),
        Op::ApplyHouseholder { left, transpose } => {
            linalg::apply_householder(e, inputs, *left, *transpose)
        }
        Op::TriangularSolve {
            left,
            lower,
            unit_diagonal,
            transpose,
        } => linalg::triangular_solve(
            e,
            &inputs[0],
            &inputs[1],
            *left,
            *lower,
            *unit_diagonal,
            *transpose,
        ),
        Op::Softmax { dim } => nn::softmax(e, &inputs[0], *dim, false),
        Op::LogSoftmax { dim } => nn::softmax(e, &inputs[0], *dim, true),
        Op::LayerNorm {
            normalized_dims,
            eps,
            weight,
            bias,
        } => nn::layer_norm(e, inputs, *normalized_dims, eps.0, *weight, *bias),
        Op::CrossEntropy { reduction } => {
            nn::cross_entropy(e, &inputs[0], &inputs[1], *reduction, out)
        }
        Op::NllLoss {
            reduction,
            ignore_index,
            ..
        } => nn::nll_loss(e, inputs, *reduction, *ignore_index, out),
        Op::NllLossTotalWeight { ignore_index, .. } => {
            nn::nll_loss_total_weight(e, inputs, *ignore_index, out)
        }
        Op::NllLossBackward {
            reduction,
            ignore_index,
            ..
        } => nn::nll_loss_backward(e, inputs, *reduction, *ignore_index, out),
        Op::IndexCheck { size, ignore } => index::index_check(e, inputs, *size, *ignore),
        Op::RandUniform { .. } => random::rand_uniform(e, &inputs[0], &inputs[1], out),
        Op::RandGamma => random::gamma(e, &inputs[0], &inputs[1], &inputs[2]),
        Op::RandPoisson => random::poisson(e, &inputs[0], &inputs[1], &inputs[2]),
        Op::RandBinomial => random::binomial(e, &inputs[0], &inputs[1], &inputs[2], &inputs[3]),
        Op::DirichletGrad => reparameterized::dirichlet_grad(e, &inputs[0], &inputs[1], &inputs[2]),
        Op::Conv(spec) => conv::conv(e, &inputs[0], &inputs[1], spec, out),
        Op::ConvBackwardInput { spec, .. } => {
            conv::backward_input(e, &inputs[0], &inputs[1], spec, out)
        }
        Op::ConvBackwardWeight { spec, .. } => {
            conv::backward_weight(e, &inputs[0], &inputs[1], spec, out)
        }
        Op::MaxPool(pool) => pool::max_pool(e, &inputs[0], pool, out),
        Op::MaxPoolIndices(pool) => pool::max_pool_indices(e, &inputs[0], pool, out),
        Op::AvgPool {
            pool,
            count_include_pad,
            divisor_override,
        } => pool::avg_pool(
            e,
            &inputs[0],
            pool,
            *count_include_pad,
            *divisor_override,
            out,
        ),
        Op::Collective(c) => collective::lower(e, c, &inputs[0], out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use smallvec::smallvec;

    /// `x @ w.T` with `x` of `rows` rows, `w` of shape `[out, 512]`.
    fn linear(rows: i64, out: i64) -> Graph {
        let mut g = Graph::new();
        let x = g.param(TensorType::new(DType::F32, &[rows, 512]));
        let w = g.param(TensorType::new(DType::F32, &[out, 512]));
        let wt = g.push(Op::Permute(smallvec![1, 0]), &[w]).unwrap();
        let y = g.push(Op::Matmul, &[x, wt]).unwrap();
        g.output(y);
        g
    }

    /// The same product with the transpose a view of a PyTorch storage: the
    /// weight `[out, 512]` at element `offset` of a flat buffer.
    fn linear_of_storage(rows: i64, out: i64, offset: i64) -> Graph {
        let mut g = Graph::new();
        let x = g.param(TensorType::new(DType::F32, &[rows, 512]));
        let storage = g.param(TensorType::new(DType::F32, &[offset + out * 512]));
        let view = Op::AsStrided {
            sizes: smallvec![512, out],
            strides: smallvec![1, 512],
            offset,
        };
        let wt = g.push(view, &[storage]).unwrap();
        let y = g.push(Op::Matmul, &[x, wt]).unwrap();
        g.output(y);
        g
    }

    #[test]
    fn a_linear_layer_wider_than_its_batch_is_emitted_weight_first_for_eigen_dots() {
        let eigen = Target::of_platform("cpu");
        assert!(eigen.eigen_dots && !Target::of_platform("tpu").eigen_dots);
        let text = lower_for(&linear(64, 784), eigen);
        assert!(text.contains("optimization_barrier"), "{text}");
        assert!(
            text.contains("(%arg1, %"),
            "the weight is the dot's left operand: {text}"
        );
        // Other targets, and a batch with more rows than the layer has
        // outputs, keep the plain product.
        for offset in [0, 96] {
            let text = lower_for(&linear_of_storage(64, 784, offset), eigen);
            assert!(text.contains("optimization_barrier"), "{text}");
            assert_eq!(text.contains("stablehlo.slice"), offset > 0, "{text}");
        }
        for text in [
            lower(&linear(64, 784)),
            lower_for(&linear(1024, 512), eigen),
            lower_for(&linear_of_storage(1024, 512, 0), eigen),
        ] {
            assert!(!text.contains("optimization_barrier"), "{text}");
        }
    }
}
