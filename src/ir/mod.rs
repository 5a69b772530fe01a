//! The central types every stage talks through: Topology, Spec, Algorithm,
//! Program. Stages depend on `ir`, never on each other's internals.

pub mod algorithm;
pub mod hardware;
pub mod msccl;
pub mod program;
pub mod resolve;
pub mod spec;
pub mod summary;
pub mod topology;

pub use algorithm::{Algorithm, AlgorithmError, LeastNeeds, Transfer};
pub use program::{
    Buf, Collective, GpuProgram, Program, Proto, Runtime, Step, StepKind, Threadblock,
};
pub use resolve::{Location, Resolved};
pub use spec::Spec;
pub use topology::{Link, Node, NodeKind, Route, Topology, Vendor};
