//! Collectives: a replica's result type from its operand's (every replica
//! passes the same type).

use super::{arity, float_only};
use crate::collective::{Collective, CollectiveReduce, ReplicaGroups};
use crate::error::{Error, Result};
use crate::shape::TensorType;

pub(super) fn infer(op: &'static str, c: &Collective, inputs: &[TensorType]) -> Result<TensorType> {
    arity(op, inputs, 1)?;
    let x = &inputs[0];
    match c {
        Collective::AllReduce { op: reduce, .. } => {
            if *reduce == CollectiveReduce::Avg {
                float_only(op, x)?;
            }
            Ok(x.clone())
        }
        Collective::Broadcast { root, groups } => {
            if *root as usize >= groups.group_size() {
                return Err(Error::Invalid {
                    op,
                    message: format!(
                        "got root {root}; expected a position in the group's {} replicas",
                        groups.group_size()
                    ),
                });
            }
            Ok(x.clone())
        }
        Collective::AllGather { dim, groups } => {
            along(op, *dim, x)?;
            let mut shape = x.shape.clone();
            shape[*dim] *= groups.group_size() as i64;
            Ok(x.with_shape(shape))
        }
        Collective::ReduceScatter {
            op: reduce,
            dim,
            groups,
        } => {
            if *reduce == CollectiveReduce::Avg {
                float_only(op, x)?;
            }
            along(op, *dim, x)?;
            let mut shape = x.shape.clone();
            shape[*dim] = split(op, "scatter", *dim, x, groups)?;
            Ok(x.with_shape(shape))
        }
        Collective::AllToAll {
            split_dim,
            concat_dim,
            groups,
        } => {
            along(op, *split_dim, x)?;
            along(op, *concat_dim, x)?;
            let mut shape = x.shape.clone();
            shape[*split_dim] = split(op, "split", *split_dim, x, groups)?;
            shape[*concat_dim] *= groups.group_size() as i64;
            Ok(x.with_shape(shape))
        }
    }
}

/// `dim` must be a dim of `x` (a collective along a dim needs one).
fn along(op: &'static str, dim: usize, x: &TensorType) -> Result<()> {
    if dim >= x.rank() {
        return Err(Error::BadDim {
            op,
            dim: dim as i64,
            rank: x.rank(),
        });
    }
    Ok(())
}

/// The size of one replica's block of `x` split along `dim` over a group.
fn split(
    op: &'static str,
    what: &str,
    dim: usize,
    x: &TensorType,
    groups: &ReplicaGroups,
) -> Result<i64> {
    let n = groups.group_size() as i64;
    let size = x.shape[dim];
    if size % n != 0 {
        return Err(Error::Invalid {
            op,
            message: format!(
                "got {x}, whose {what} dim {dim} has size {size}; expected a multiple of the \
                 group's {n} replicas"
            ),
        });
    }
    Ok(size / n)
}

#[cfg(test)]
mod tests {
    use crate::collective::{Collective, CollectiveReduce, ReplicaGroups};
    use crate::dtype::DType;
    use crate::op::Op;
    use crate::shape::TensorType;

    fn t(dtype: DType, shape: &[i64]) -> TensorType {
        TensorType::new(dtype, shape)
    }

    fn infer(c: Collective, x: TensorType) -> crate::Result<TensorType> {
        Op::Collective(Box::new(c)).infer(&[x])
    }

    #[test]
    fn collectives_give_each_replica_its_block_of_the_group() {
        let pairs = ReplicaGroups::new("all_gather", vec![vec![0, 1], vec![2, 3]]).unwrap();
        let four = ReplicaGroups::all(4);
        let x = t(DType::F32, &[8, 3]);
        let all_reduce = |op, groups: &ReplicaGroups| Collective::AllReduce {
            op,
            groups: groups.clone(),
        };
        assert_eq!(
            infer(all_reduce(CollectiveReduce::Max, &four), x.clone()),
            Ok(x.clone())
        );
        let gather = Collective::AllGather {
            dim: 1,
            groups: pairs.clone(),
        };
        assert_eq!(infer(gather, x.clone()), Ok(t(DType::F32, &[8, 6])));
        let scatter = Collective::ReduceScatter {
            op: CollectiveReduce::Sum,
            dim: 0,
            groups: four.clone(),
        };
        assert_eq!(infer(scatter, x.clone()), Ok(t(DType::F32, &[2, 3])));
        let to_all = Collective::AllToAll {
            split_dim: 0,
            concat_dim: 1,
            groups: pairs,
        };
        assert_eq!(infer(to_all, x.clone()), Ok(t(DType::F32, &[4, 6])));
        // A 0-d tensor reduces; an integer one sums but has no average.
        let scalar = t(DType::I64, &[]);
        assert_eq!(
            infer(all_reduce(CollectiveReduce::Sum, &four), scalar.clone()),
            Ok(scalar.clone())
        );
        let e = infer(all_reduce(CollectiveReduce::Avg, &four), scalar.clone()).unwrap_err();
        assert!(
            e.to_string()
                .contains("all_reduce: dtype int64 is not supported"),
            "{e}"
        );
        let e = infer(
            Collective::AllGather {
                dim: 0,
                groups: four.clone(),
            },
            scalar,
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("all_gather: dim 0 is out of range"),
            "{e}"
        );
        let e = infer(
            Collective::Broadcast {
                root: 4,
                groups: four.clone(),
            },
            x.clone(),
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("broadcast: got root 4; expected a position in the group's 4 replicas"),
            "{e}"
        );
        let e = infer(
            Collective::ReduceScatter {
                op: CollectiveReduce::Sum,
                dim: 1,
                groups: four,
            },
            x,
        )
        .unwrap_err();
        assert!(
            e.to_string().contains(
                "reduce_scatter: got float32[8, 3], whose scatter dim 1 has size 3; expected a \
                 multiple of the group's 4 replicas"
            ),
            "{e}"
        );
    }
}
