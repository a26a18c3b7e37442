//! EagerTPU's op IR, shape/dtype inference and StableHLO emission.
//!
//! Nothing here knows about PJRT: a `Graph` of `Op`s goes in, MLIR text comes out.

pub mod collective;
pub mod dtype;
pub mod elementwise;
pub mod error;
pub mod graph;
pub mod hash;
mod infer;
pub mod lower;
pub mod op;
pub mod policy;
pub mod scalar;
pub mod shape;

pub use dtype::{Category, DType, ResultType};
pub use elementwise::{BinaryResult, UnaryResult};
pub use error::{Error, Result};
pub use graph::{Def, Graph, Node, ValueId};
pub use op::{
    ArgReduceOp, BinaryOp, Collective, CollectiveReduce, ConvSpec, EighOutput, F64, FftKind,
    HouseholderOutput, IndexOperand, LuOutput, Op, Polynomial, PoolSpec, ReduceOp, Reduction,
    ReplicaGroups, ScanOp, ScatterReduce, SortOutput, TernaryOp, UnaryOp,
};
pub use scalar::Scalar;
pub use shape::{Dims, Shape, TensorType};
