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

/// Lowers a whole graph to an MLIR module whose `@main` takes the graph's
/// parameters and returns its outputs.
pub fn lower(graph: &Graph) -> String {
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
                lower_op(&mut e, &node.op, &inputs, out)
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
