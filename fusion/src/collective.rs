//! Collectives as ops (issue 11): what one replica of a replicated program
//! does with the same op on every other replica of its group. A graph with a
//! collective is the program each replica runs (SPMD); the runtime launches
//! it once across the group's devices.

use std::fmt::Write;

use crate::error::{Error, Result};

/// How a reducing collective combines the replicas' values. On bool tensors
/// `Sum` and `Max` are a logical or, `Prod` and `Min` a logical and (as
/// NCCL's and gloo's reductions of bool).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CollectiveReduce {
    Sum,
    /// The sum divided by the group's size (floating-point tensors only).
    Avg,
    Prod,
    Max,
    Min,
}

/// Which replicas exchange values: a partition of the program's replicas
/// `0..n` into groups of equal size (XLA's `replica_groups`: every replica
/// is listed, each once).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReplicaGroups(Vec<Vec<u32>>);

impl ReplicaGroups {
    /// Checks that `groups` partition `0..n` into non-empty groups of one
    /// size; `op` names the collective in the error.
    pub fn new(op: &'static str, groups: Vec<Vec<u32>>) -> Result<ReplicaGroups> {
        let bad = |message: String| Error::Invalid { op, message };
        let size = groups.first().map_or(0, |g| g.len());
        if size == 0 {
            return Err(bad(format!(
                "got replica groups {groups:?}; expected at least one non-empty group"
            )));
        }
        if let Some(g) = groups.iter().find(|g| g.len() != size) {
            return Err(bad(format!(
                "got replica groups {groups:?}: group {g:?} has {} replicas, the first {size}; \
                 expected groups of one size",
                g.len()
            )));
        }
        let n = groups.len() * size;
        let mut seen = vec![false; n];
        for &r in groups.iter().flatten() {
            match seen.get_mut(r as usize) {
                Some(s) if !*s => *s = true,
                _ => {
                    return Err(bad(format!(
                        "got replica groups {groups:?}; expected each replica of 0..{n} \
                         exactly once (replica {r} is {})",
                        if (r as usize) < n {
                            "listed twice"
                        } else {
                            "out of range"
                        }
                    )));
                }
            }
        }
        Ok(ReplicaGroups(groups))
    }

    /// One group of all `n` replicas.
    pub fn all(n: u32) -> ReplicaGroups {
        ReplicaGroups(vec![(0..n).collect()])
    }

    pub fn groups(&self) -> &[Vec<u32>] {
        &self.0
    }

    /// Replicas of the program (all groups together).
    pub fn replicas(&self) -> usize {
        self.0.len() * self.group_size()
    }

    /// Replicas in each group.
    pub fn group_size(&self) -> usize {
        self.0[0].len()
    }

    /// `dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>`.
    pub fn mlir(&self) -> String {
        let mut s = String::from("dense<[");
        for (i, g) in self.0.iter().enumerate() {
            s.push_str(if i > 0 { ", [" } else { "[" });
            for (j, r) in g.iter().enumerate() {
                let _ = write!(s, "{}{r}", if j > 0 { ", " } else { "" });
            }
            s.push(']');
        }
        let _ = write!(s, "]> : tensor<{}x{}xi64>", self.0.len(), self.group_size());
        s
    }
}

/// A collective: what it does, and over which replica groups.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Collective {
    /// Every replica gets the reduction of its group's tensors.
    AllReduce {
        op: CollectiveReduce,
        groups: ReplicaGroups,
    },
    /// Every replica gets its group's tensors concatenated along `dim`, in
    /// group order.
    AllGather { dim: usize, groups: ReplicaGroups },
    /// The reduction of the group's tensors, split along `dim` into one
    /// block per replica; replica `k` of a group gets block `k`.
    ReduceScatter {
        op: CollectiveReduce,
        dim: usize,
        groups: ReplicaGroups,
    },
    /// Every replica gets the tensor of replica `root` of its group (its
    /// position in the group), bit for bit.
    Broadcast { root: u32, groups: ReplicaGroups },
    /// Each replica splits its tensor along `split_dim` into one block per
    /// replica of its group, sends block `k` to replica `k` and concatenates
    /// what it receives along `concat_dim`, in group order.
    AllToAll {
        split_dim: usize,
        concat_dim: usize,
        groups: ReplicaGroups,
    },
}

impl Collective {
    /// PyTorch's (`torch.distributed`) name for the collective.
    pub fn name(&self) -> &'static str {
        match self {
            Collective::AllReduce { .. } => "all_reduce",
            Collective::AllGather { .. } => "all_gather",
            Collective::ReduceScatter { .. } => "reduce_scatter",
            Collective::Broadcast { .. } => "broadcast",
            Collective::AllToAll { .. } => "all_to_all",
        }
    }

    pub fn groups(&self) -> &ReplicaGroups {
        match self {
            Collective::AllReduce { groups, .. }
            | Collective::AllGather { groups, .. }
            | Collective::ReduceScatter { groups, .. }
            | Collective::Broadcast { groups, .. }
            | Collective::AllToAll { groups, .. } => groups,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replica_groups_partition_the_replicas_into_groups_of_one_size() {
        let g = ReplicaGroups::new("all_reduce", vec![vec![0, 2], vec![1, 3]]).unwrap();
        assert_eq!((g.replicas(), g.group_size()), (4, 2));
        assert_eq!(g.mlir(), "dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>");
        assert_eq!(
            ReplicaGroups::all(3).mlir(),
            "dense<[[0, 1, 2]]> : tensor<1x3xi64>"
        );
        for (groups, words) in [
            (vec![], "at least one non-empty group"),
            (
                vec![vec![0, 1], vec![2]],
                "group [2] has 1 replicas, the first 2",
            ),
            (vec![vec![0, 1], vec![1, 2]], "replica 1 is listed twice"),
            (
                vec![vec![0, 4]],
                "each replica of 0..2 exactly once (replica 4 is out of range",
            ),
        ] {
            let e = ReplicaGroups::new("all_gather", groups)
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("all_gather: "), "{e}");
            assert!(e.contains(words), "expected {words:?} in {e}");
        }
    }
}
