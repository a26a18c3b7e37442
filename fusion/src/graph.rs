//! `Graph`: one program (a chunk of the op stream) as data.
//!
//! Values are numbered in order of definition; a value is either a parameter
//! (an input buffer) or the output of a node. Building a graph in stream order
//! numbers values by first appearance, which is what makes two steps of a
//! training loop produce equal graphs. Equality and hashing cover the
//! definitions and outputs, never values: a graph is a compile-cache key.

use std::hash::{Hash, Hasher};

use crate::hash::FxHasher;

use smallvec::SmallVec;

use crate::error::Result;
use crate::op::Op;
use crate::shape::TensorType;

/// A value in a graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub u32);

/// An op applied to earlier values.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    pub op: Op,
    pub inputs: SmallVec<[ValueId; 3]>,
}

/// How a value is defined.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Def {
    /// The n-th parameter (input buffer) of the program.
    Param(TensorType),
    Node(Node),
}

#[derive(Clone, Debug, Default)]
pub struct Graph {
    defs: Vec<Def>,
    /// The type of every value, by id (derived from `defs`).
    types: Vec<TensorType>,
    outputs: Vec<ValueId>,
    /// (parameter index, output index): the parameter's buffer is donated to
    /// the output (input/output aliasing).
    aliases: Vec<(u32, u32)>,
    num_params: usize,
    /// A hash of everything above, kept up to date as the graph grows, so a
    /// cache lookup does not walk the graph to hash it.
    hash: u64,
}

impl PartialEq for Graph {
    fn eq(&self, other: &Self) -> bool {
        self.defs == other.defs && self.outputs == other.outputs && self.aliases == other.aliases
    }
}

impl Eq for Graph {}

impl Hash for Graph {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

impl Graph {
    pub fn new() -> Graph {
        Graph::default()
    }

    /// An empty graph with room for `values` parameters and nodes (a chunk's
    /// graph is built at its final size instead of growing by doubling).
    pub fn with_capacity(values: usize) -> Graph {
        Graph {
            defs: Vec::with_capacity(values),
            types: Vec::with_capacity(values),
            ..Graph::default()
        }
    }

    fn mix<T: Hash + ?Sized>(&mut self, tag: u8, part: &T) {
        let mut h = FxHasher::default();
        h.write_u8(tag);
        part.hash(&mut h);
        self.hash = (self.hash.rotate_left(5) ^ h.finish()).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    /// Adds a parameter of type `ty`.
    pub fn param(&mut self, ty: TensorType) -> ValueId {
        let id = self.next_id();
        self.mix(0, &ty);
        self.types.push(ty.clone());
        self.defs.push(Def::Param(ty));
        self.num_params += 1;
        id
    }

    /// Adds `op` applied to `inputs`; checks the inputs (`Op::infer`).
    pub fn push(&mut self, op: Op, inputs: &[ValueId]) -> Result<ValueId> {
        let ty = {
            let input_types: SmallVec<[TensorType; 3]> =
                inputs.iter().map(|v| self.ty(*v).clone()).collect();
            op.infer(&input_types)?
        };
        Ok(self.push_inferred(op, inputs, ty))
    }

    /// Adds a node whose output type the caller already inferred.
    pub fn push_inferred(&mut self, op: Op, inputs: &[ValueId], ty: TensorType) -> ValueId {
        let id = self.next_id();
        self.mix(1, &(&op, inputs));
        self.types.push(ty);
        self.defs.push(Def::Node(Node {
            op,
            inputs: SmallVec::from_slice(inputs),
        }));
        id
    }

    /// Marks `v` as a program output (in call order).
    pub fn output(&mut self, v: ValueId) {
        self.mix(2, &v);
        self.outputs.push(v);
    }

    /// Donates parameter `param` (by parameter order) to output `output`:
    /// they must have the same type.
    pub fn alias(&mut self, param: usize, output: usize) {
        self.mix(3, &(param, output));
        self.aliases.push((param as u32, output as u32));
    }

    /// The output a parameter is donated to, if any.
    pub fn aliased_output(&self, param: usize) -> Option<usize> {
        self.aliases
            .iter()
            .find(|(p, _)| *p as usize == param)
            .map(|(_, o)| *o as usize)
    }

    /// The graph's hash (what `Hash` feeds a hasher): equal graphs have
    /// equal hashes; unequal ones rarely do.
    pub fn key_hash(&self) -> u64 {
        self.hash
    }

    /// Parameters donated to an output.
    pub fn num_aliases(&self) -> usize {
        self.aliases.len()
    }

    fn next_id(&self) -> ValueId {
        ValueId(self.defs.len() as u32)
    }

    pub fn ty(&self, v: ValueId) -> &TensorType {
        &self.types[v.0 as usize]
    }

    pub fn defs(&self) -> &[Def] {
        &self.defs
    }

    pub fn outputs(&self) -> &[ValueId] {
        &self.outputs
    }

    pub fn num_params(&self) -> usize {
        self.num_params
    }

    /// Parameter types in parameter order.
    pub fn param_types(&self) -> impl Iterator<Item = &TensorType> {
        self.defs.iter().filter_map(|d| match d {
            Def::Param(t) => Some(t),
            Def::Node(_) => None,
        })
    }

    pub fn output_types(&self) -> impl Iterator<Item = &TensorType> {
        self.outputs.iter().map(|v| self.ty(*v))
    }

    /// For each parameter, the outputs that every node reading it feeds
    /// (is, or is an input of, directly or through other nodes): a bitset
    /// over the outputs, `is_set(&sets[param], output)`. Such an output can
    /// be written over the parameter's buffer with no copy: each read of the
    /// parameter is done before the output exists, in whatever order the
    /// compiler runs the graph. Given any other output, XLA's copy insertion
    /// (which orders by data dependence) copies the parameter first.
    pub fn outputs_after_reads(&self) -> Vec<Vec<u64>> {
        let words = self.outputs.len().div_ceil(64).max(1);
        let n = self.defs.len();
        // feeds[j]: the outputs value j feeds.
        let mut feeds = vec![0u64; n * words];
        for (k, out) in self.outputs.iter().enumerate() {
            feeds[out.0 as usize * words + k / 64] |= 1 << (k % 64);
        }
        for j in (0..n).rev() {
            let Def::Node(node) = &self.defs[j] else {
                continue;
            };
            let (before, from_j) = feeds.split_at_mut(j * words);
            for input in &node.inputs {
                let i = input.0 as usize * words;
                for (w, bits) in before[i..i + words].iter_mut().enumerate() {
                    *bits |= from_j[w];
                }
            }
        }
        let mut param_of = vec![u32::MAX; n];
        let mut next = 0;
        for (j, def) in self.defs.iter().enumerate() {
            if let Def::Param(_) = def {
                param_of[j] = next;
                next += 1;
            }
        }
        let mut after = vec![vec![!0u64; words]; self.num_params];
        for (j, def) in self.defs.iter().enumerate() {
            let Def::Node(node) = def else { continue };
            for input in &node.inputs {
                let p = param_of[input.0 as usize];
                if p != u32::MAX {
                    for (w, bits) in after[p as usize].iter_mut().enumerate() {
                        *bits &= feeds[j * words + w];
                    }
                }
            }
        }
        after
    }

    /// The nodes in order.
    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.defs.iter().filter_map(|d| match d {
            Def::Node(n) => Some(n),
            Def::Param(_) => None,
        })
    }
}

/// Whether bit `k` of the bitset `set` is set.
pub fn is_set(set: &[u64], k: usize) -> bool {
    set.get(k / 64).is_some_and(|w| w & (1 << (k % 64)) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::op::BinaryOp;

    fn add_graph(n: i64) -> Graph {
        let mut g = Graph::new();
        let a = g.param(TensorType::new(DType::F32, &[n]));
        let b = g.param(TensorType::new(DType::F32, &[n]));
        let c = g.push(Op::Binary(BinaryOp::Add), &[a, b]).unwrap();
        g.output(c);
        g
    }

    #[test]
    fn an_output_follows_a_parameter_s_reads_only_when_every_reader_feeds_it() {
        // A training chunk's weight `w`: the backward reads it (`gx = g * w`,
        // an output nothing else uses) and the update computes `w2 = w - g`.
        // A second parameter `h` is read by the backward only.
        let f = |shape: &[i64]| TensorType::new(DType::F32, shape);
        let mul = Op::Binary(BinaryOp::Mul);
        let sub = Op::Binary(BinaryOp::Sub);
        let mut g = Graph::new();
        let w = g.param(f(&[4]));
        let grad = g.param(f(&[4]));
        let h = g.param(f(&[4]));
        let gx = g.push(mul.clone(), &[grad, w]).unwrap();
        let gh = g.push(mul, &[gx, h]).unwrap();
        let w2 = g.push(sub.clone(), &[w, grad]).unwrap();
        let out = g.push(sub, &[w2, gh]).unwrap();
        for v in [gx, w2, out] {
            g.output(v);
        }
        let after = g.outputs_after_reads();
        let outputs = |p: usize| (0..3).filter(|&k| is_set(&after[p], k)).collect::<Vec<_>>();
        // `w` is read by `gx`'s node and `w2`'s: only `out` follows both.
        assert_eq!(outputs(0), vec![2]);
        // `grad` likewise; `h` is read by `gh`, which feeds `out` only.
        assert_eq!(outputs(1), vec![2]);
        assert_eq!(outputs(2), vec![2]);
        // Seventy outputs (two words of bits): the reader of `a` feeds the
        // last one only.
        let mut g = Graph::new();
        let a = g.param(f(&[2]));
        let b = g.param(f(&[2]));
        for _ in 0..69 {
            let v = g.push(Op::Binary(BinaryOp::Add), &[b, b]).unwrap();
            g.output(v);
        }
        let v = g.push(Op::Binary(BinaryOp::Add), &[a, b]).unwrap();
        g.output(v);
        let after = g.outputs_after_reads();
        assert_eq!(
            (0..70)
                .filter(|&k| is_set(&after[0], k))
                .collect::<Vec<_>>(),
            vec![69]
        );
        assert!((0..70).all(|k| !is_set(&after[1], k)));
    }

    #[test]
    fn equal_programs_compare_equal_and_shapes_matter() {
        assert_eq!(add_graph(4), add_graph(4));
        assert_ne!(add_graph(4), add_graph(5));
    }

    #[test]
    fn push_checks_inputs() {
        let mut g = Graph::new();
        let a = g.param(TensorType::new(DType::F32, &[3]));
        let b = g.param(TensorType::new(DType::F32, &[4]));
        let e = g.push(Op::Binary(BinaryOp::Add), &[a, b]).unwrap_err();
        assert!(e.to_string().contains("add"), "{e}");
    }
}
