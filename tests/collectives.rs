//! Issue 11, its first layer: each collective op of the IR lowers to
//! StableHLO that runs as one execution across the devices of a four-device
//! CPU client (`Executable::execute_replicated`), checked against a host
//! reference for every reduction, several dtypes and two group layouts.

use std::sync::OnceLock;

use eagertpu::internals::fusion::{
    Collective, CollectiveReduce, DType, Graph, Op, ReplicaGroups, TensorType, lower::lower,
};
use eagertpu::internals::pjrt::{
    Buffer, Client, CompileOptions, Executable, OptionValue, Placement, Plugin, locate,
};

const REPLICAS: usize = 4;
/// Elements of each replica's 1-d operand (a multiple of every group size).
const LEN: usize = 4;

fn four() -> &'static Client {
    static CLIENT: OnceLock<Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        let found = locate::resolve(Some("cpu")).expect("make setup installs the CPU plugin");
        let options = [("cpu_device_count", OptionValue::Int(REPLICAS as i64))];
        Client::create(Plugin::load(&found.path).unwrap(), &options).unwrap()
    })
}

/// Replica `r`'s operand: small integers of both signs, never 0 (so that
/// products say something), or a pattern of bools.
fn operand(dtype: DType, r: usize) -> Vec<f64> {
    (0..LEN)
        .map(|i| match dtype {
            DType::Bool => (r + i).is_multiple_of(3) as u8 as f64,
            _ => match ((r * 5 + i * 3) % 7) as f64 - 3.0 {
                0.0 => 4.0,
                v => v,
            },
        })
        .collect()
}

fn bytes(dtype: DType, values: &[f64]) -> Vec<u8> {
    match dtype {
        DType::F32 => values
            .iter()
            .flat_map(|&v| (v as f32).to_le_bytes())
            .collect(),
        DType::I32 => values
            .iter()
            .flat_map(|&v| (v as i32).to_le_bytes())
            .collect(),
        DType::Bool => values.iter().map(|&v| v as u8).collect(),
        d => panic!("no host encoding for {d} here"),
    }
}

fn values(dtype: DType, b: &Buffer) -> Vec<f64> {
    let n: i64 = b.dims().unwrap().iter().product();
    let mut raw = vec![0u8; n as usize * dtype.size_in_bytes()];
    b.to_host(&mut raw).unwrap();
    match dtype {
        DType::F32 => raw
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64)
            .collect(),
        DType::I32 => raw
            .chunks(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()) as f64)
            .collect(),
        DType::Bool => raw.iter().map(|&v| v as f64).collect(),
        d => panic!("no host decoding for {d} here"),
    }
}

/// Runs `c` on every replica's operand as one replicated execution; each
/// replica's result.
fn run(c: &Collective, dtype: DType) -> Vec<Vec<f64>> {
    let operands: Vec<Vec<f64>> = (0..REPLICAS).map(|r| operand(dtype, r)).collect();
    run_on(c, dtype, &operands)
}

/// Runs `c` with replica `r`'s operand `operands[r]`.
fn run_on(c: &Collective, dtype: DType, operands: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let mut graph = Graph::new();
    let x = graph.param(TensorType::new(dtype, &[LEN as i64]));
    let y = graph
        .push(Op::Collective(Box::new(c.clone())), &[x])
        .unwrap();
    graph.output(y);
    let devices = four().devices();
    let options = CompileOptions {
        placement: Placement::Replicated {
            device_ids: devices.iter().map(|d| d.id() as i64).collect(),
        },
        xla: Default::default(),
    };
    let exe = Executable::compile(four(), &lower(&graph), &options)
        .unwrap_or_else(|e| panic!("{} of {dtype}: {e}", c.name()));
    let inputs: Vec<Buffer> = devices
        .iter()
        .enumerate()
        .map(|(r, d)| Buffer::from_host(d, dtype, &[LEN as i64], &bytes(dtype, &operands[r])))
        .collect::<Result<_, _>>()
        .unwrap();
    let lists: Vec<Vec<&Buffer>> = inputs.iter().map(|b| vec![b]).collect();
    exe.execute_replicated(&lists)
        .unwrap()
        .into_iter()
        .map(|(outputs, done)| {
            if let Some(done) = done {
                done.wait().unwrap();
            }
            values(dtype, &outputs[0])
        })
        .collect()
}

/// The members of replica `r`'s group, in group order.
fn group_of(groups: &ReplicaGroups, r: usize) -> &[u32] {
    groups
        .groups()
        .iter()
        .find(|g| g.contains(&(r as u32)))
        .unwrap()
}

fn reduce(op: CollectiveReduce, dtype: DType, xs: &[Vec<f64>]) -> Vec<f64> {
    (0..xs[0].len())
        .map(|i| {
            let column = xs.iter().map(|x| x[i]);
            let v = match op {
                CollectiveReduce::Sum | CollectiveReduce::Avg => column.sum(),
                CollectiveReduce::Prod => column.product(),
                CollectiveReduce::Max => column.fold(f64::MIN, f64::max),
                CollectiveReduce::Min => column.fold(f64::MAX, f64::min),
            };
            match (op, dtype) {
                (CollectiveReduce::Avg, _) => v / xs.len() as f64,
                // A bool sum is a logical or, a bool product a logical and.
                (_, DType::Bool) => (v != 0.0) as u8 as f64,
                _ => v,
            }
        })
        .collect()
}

fn layouts() -> Vec<ReplicaGroups> {
    vec![
        ReplicaGroups::all(REPLICAS as u32),
        ReplicaGroups::new("all_reduce", vec![vec![0, 2], vec![1, 3]]).unwrap(),
    ]
}

#[test]
fn all_reduce_gives_each_replica_its_groups_reduction() {
    use CollectiveReduce::*;
    for groups in layouts() {
        for (dtype, ops) in [
            (DType::F32, vec![Sum, Avg, Prod, Max, Min]),
            (DType::I32, vec![Sum, Prod, Max, Min]),
            (DType::Bool, vec![Sum, Min]),
        ] {
            for op in ops {
                let c = Collective::AllReduce {
                    op,
                    groups: groups.clone(),
                };
                let got = run(&c, dtype);
                for (r, got) in got.iter().enumerate() {
                    let members: Vec<Vec<f64>> = group_of(&groups, r)
                        .iter()
                        .map(|&m| operand(dtype, m as usize))
                        .collect();
                    assert_eq!(
                        got,
                        &reduce(op, dtype, &members),
                        "{op:?} of {dtype} over {:?}, replica {r}",
                        groups.groups()
                    );
                }
            }
        }
    }
}

#[test]
fn all_gather_reduce_scatter_and_all_to_all_move_the_groups_blocks() {
    let dtype = DType::F32;
    for groups in layouts() {
        let n = groups.group_size();
        let block = LEN / n;
        let gather = run(
            &Collective::AllGather {
                dim: 0,
                groups: groups.clone(),
            },
            dtype,
        );
        let scatter = run(
            &Collective::ReduceScatter {
                op: CollectiveReduce::Sum,
                dim: 0,
                groups: groups.clone(),
            },
            dtype,
        );
        let to_all = run(
            &Collective::AllToAll {
                split_dim: 0,
                concat_dim: 0,
                groups: groups.clone(),
            },
            dtype,
        );
        for r in 0..REPLICAS {
            let members = group_of(&groups, r);
            let k = members.iter().position(|&m| m as usize == r).unwrap();
            let xs: Vec<Vec<f64>> = members
                .iter()
                .map(|&m| operand(dtype, m as usize))
                .collect();
            let what = |c: &str| format!("{c} over {:?}, replica {r}", groups.groups());
            assert_eq!(gather[r], xs.concat(), "{}", what("all_gather"));
            let sum = reduce(CollectiveReduce::Sum, dtype, &xs);
            assert_eq!(
                scatter[r],
                sum[k * block..(k + 1) * block],
                "{}",
                what("reduce_scatter")
            );
            let received: Vec<f64> = xs
                .iter()
                .flat_map(|x| x[k * block..(k + 1) * block].to_vec())
                .collect();
            assert_eq!(to_all[r], received, "{}", what("all_to_all"));
        }
    }
}

#[test]
fn broadcast_gives_each_group_its_roots_tensor_bit_for_bit() {
    // Replica r's floats include -0.0 and NaN: they arrive as they left.
    let floats: Vec<Vec<f64>> = (0..REPLICAS)
        .map(|r| vec![r as f64 + 0.5, -0.0, f64::NAN, -(r as f64) * 1e30])
        .collect();
    for groups in layouts() {
        let root = 1;
        let c = Collective::Broadcast {
            root,
            groups: groups.clone(),
        };
        for (dtype, operands) in [
            (DType::F32, floats.clone()),
            (
                DType::I32,
                (0..REPLICAS).map(|r| operand(DType::I32, r)).collect(),
            ),
            (
                DType::Bool,
                (0..REPLICAS).map(|r| operand(DType::Bool, r)).collect(),
            ),
        ] {
            let got = run_on(&c, dtype, &operands);
            for (r, got) in got.iter().enumerate() {
                let from = group_of(&groups, r)[root as usize] as usize;
                let want: Vec<f64> = operands[from].iter().map(|&v| v as f32 as f64).collect();
                let same = got.iter().zip(&want).all(|(g, w)| {
                    (g.is_nan() && w.is_nan())
                        || (g == w && g.is_sign_negative() == w.is_sign_negative())
                });
                assert!(
                    same,
                    "{dtype} over {:?}, replica {r}: got {got:?}, expected replica {from}'s {want:?}",
                    groups.groups()
                );
            }
        }
    }
}
