//! rscc: a compiler for GPU collective-communication schedules.
//!
//! Pipeline (see docs/architecture.md):
//! `front` (files → Topology / Program) → `synth` (Topology × Spec →
//! Algorithm) → `lower` (Algorithm → Program) → `verify` (Program → proof or
//! error) → `back` (Program → MSCCL XML). `bound` scores against the limit,
//! `sim` predicts time, `exec` runs a Program on real data.

pub mod back;
pub mod bound;
pub mod cli;
pub mod compile;
pub mod exec;
pub mod front;
pub mod fuzz;
pub mod ir;
pub mod lower;
pub mod par;
pub mod sim;
pub mod synth;
pub mod verify;
