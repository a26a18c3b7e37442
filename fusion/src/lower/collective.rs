//! Collectives: `stablehlo.all_reduce`, `all_gather`, `reduce_scatter` and
//! `all_to_all` over the op's replica groups (cross-replica: no channel).

use super::{Cmp, Emitter, V};
use crate::collective::{Collective, CollectiveReduce, ReplicaGroups};
use crate::dtype::DType;
use crate::shape::TensorType;

pub(super) fn lower(e: &mut Emitter, c: &Collective, x: &V, out: TensorType) -> V {
    let groups = format!("replica_groups = {}", c.groups().mlir());
    match c {
        Collective::AllReduce { op, groups: g } => {
            let sum = reducing(e, "stablehlo.all_reduce", *op, x, &groups, out);
            averaged(e, *op, sum, g.group_size())
        }
        Collective::Broadcast { root, groups: g } => broadcast(e, *root, g, x, &groups),
        Collective::AllGather { dim, .. } => {
            let attrs = format!("all_gather_dim = {dim} : i64, {groups}");
            e.op("stablehlo.all_gather", &[x], &attrs, out)
        }
        Collective::ReduceScatter { op, dim, groups: g } => {
            let attrs = format!("scatter_dimension = {dim} : i64, {groups}");
            let sum = reducing(e, "stablehlo.reduce_scatter", *op, x, &attrs, out);
            averaged(e, *op, sum, g.group_size())
        }
        Collective::AllToAll {
            split_dim,
            concat_dim,
            groups: g,
        } => {
            let attrs = format!(
                "split_dimension = {split_dim} : i64, concat_dimension = {concat_dim} : i64, \
                 split_count = {} : i64, {groups}",
                g.group_size()
            );
            e.op("stablehlo.all_to_all", &[x], &attrs, out)
        }
    }
}

/// The root's tensor on every replica of its group, as an all-reduce sum of
/// the root's bits and zeros elsewhere (the CPU plugin has no
/// `collective_broadcast`): floats travel as integers of their width, so
/// -0.0 and NaN payloads arrive as they left; bools as a logical or.
fn broadcast(e: &mut Emitter, root: u32, g: &ReplicaGroups, x: &V, groups: &str) -> V {
    let dtype = x.ty.dtype;
    let bits = match dtype {
        DType::F16 | DType::BF16 => Some(DType::I16),
        DType::F32 => Some(DType::I32),
        DType::F64 => Some(DType::I64),
        _ => None,
    };
    let payload = match bits {
        Some(int) => e.op("stablehlo.bitcast_convert", &[x], "", x.ty.with_dtype(int)),
        None => x.clone(),
    };
    let id = e
        .unsigned_op(
            "stablehlo.replica_id",
            &[],
            "",
            &[TensorType::scalar(DType::I32)],
        )
        .remove(0);
    let id = e.from_unsigned(&id);
    // Whether this replica is its group's root: one comparison per group.
    let mut is_root: Option<V> = None;
    for group in g.groups() {
        let replica = e.scalar(group[root as usize] as i64, DType::I32);
        let here = e.compare(Cmp::Eq, &id, &replica);
        is_root = Some(match is_root {
            Some(any) => e.binary("stablehlo.or", &any, &here),
            None => here,
        });
    }
    let is_root = is_root.expect("replica groups are never empty");
    let zeros = e.splat(0, &payload);
    let masked = e.select(&is_root, &payload, &zeros);
    let sum = reducing(
        e,
        "stablehlo.all_reduce",
        CollectiveReduce::Sum,
        &masked,
        groups,
        masked.ty.clone(),
    );
    match bits {
        Some(_) => e.op("stablehlo.bitcast_convert", &[&sum], "", x.ty.clone()),
        None => sum,
    }
}

/// A collective whose region combines two elements with `op` (an average
/// sums: `averaged` divides).
fn reducing(
    e: &mut Emitter,
    name: &str,
    op: CollectiveReduce,
    x: &V,
    attrs: &str,
    out: TensorType,
) -> V {
    let elem = TensorType::scalar(x.ty.dtype);
    let boolean = x.ty.dtype == DType::Bool;
    e.region_op(
        name,
        &[x],
        &[elem.clone(), elem],
        |e, args| {
            let (a, b) = (&args[0], &args[1]);
            vec![match op {
                CollectiveReduce::Sum | CollectiveReduce::Max if boolean => {
                    e.binary("stablehlo.or", a, b)
                }
                CollectiveReduce::Prod | CollectiveReduce::Min if boolean => {
                    e.binary("stablehlo.and", a, b)
                }
                CollectiveReduce::Sum | CollectiveReduce::Avg => e.add(a, b),
                CollectiveReduce::Prod => e.mul(a, b),
                // The plain ops: the CPU plugin's all-reduce accepts a
                // region of one add, multiply, maximum, minimum, and or or
                // only (not `Emitter::maximum`'s NaN-propagating select), so
                // a NaN meeting a number gives what the plugin's maximum
                // gives.
                CollectiveReduce::Max => e.binary("stablehlo.maximum", a, b),
                CollectiveReduce::Min => e.binary("stablehlo.minimum", a, b),
            }]
        },
        attrs,
        &[out],
    )
    .remove(0)
}

fn averaged(e: &mut Emitter, op: CollectiveReduce, sum: V, group_size: usize) -> V {
    match op {
        CollectiveReduce::Avg => e.binary_const("stablehlo.divide", &sum, group_size as f64),
        _ => sum,
    }
}

#[cfg(test)]
mod tests {
    use crate::collective::{Collective, CollectiveReduce, ReplicaGroups};
    use crate::dtype::DType;
    use crate::graph::Graph;
    use crate::op::Op;
    use crate::shape::TensorType;

    fn lowered(c: Collective, x: TensorType) -> String {
        let mut g = Graph::new();
        let p = g.param(x);
        let y = g.push(Op::Collective(Box::new(c)), &[p]).unwrap();
        g.output(y);
        crate::lower::lower(&g)
    }

    #[test]
    fn each_collective_is_its_stablehlo_op_over_the_replica_groups() {
        let pairs = ReplicaGroups::new("all_reduce", vec![vec![0, 2], vec![1, 3]]).unwrap();
        let text = lowered(
            Collective::AllReduce {
                op: CollectiveReduce::Avg,
                groups: pairs.clone(),
            },
            TensorType::new(DType::F32, &[3]),
        );
        for words in [
            "\"stablehlo.all_reduce\"(%arg0)",
            "stablehlo.add",
            "replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>",
            "stablehlo.divide",
        ] {
            assert!(text.contains(words), "expected {words:?} in\n{text}");
        }
        let text = lowered(
            Collective::AllReduce {
                op: CollectiveReduce::Min,
                groups: pairs.clone(),
            },
            TensorType::new(DType::Bool, &[3]),
        );
        assert!(
            text.contains("stablehlo.and") && !text.contains("divide"),
            "{text}"
        );
        let text = lowered(
            Collective::AllToAll {
                split_dim: 0,
                concat_dim: 1,
                groups: pairs,
            },
            TensorType::new(DType::I32, &[4, 3]),
        );
        for words in [
            "split_dimension = 0 : i64, concat_dimension = 1 : i64, split_count = 2 : i64",
            "-> tensor<2x6xi32>",
        ] {
            assert!(text.contains(words), "expected {words:?} in\n{text}");
        }
    }
}
