//! The one simulator (synthesis.md §9): predicted time of a Program on a
//! Topology for a message size, under the cost model of docs/cost-model.md.
//!
//! Flow-level, event-driven and exact: every send is a flow along
//! `Topology::route(src, dst)`; it pays the route's α, then shares every link
//! on the route max-min fairly with the other active flows. Threadblocks run
//! their steps in program order per tile, honour `depid`/`deps`, pair the
//! k-th send with the k-th receive of each connection, and a send needs free
//! slots in the connection's buffer.

mod engine;
mod fold;
mod period;
pub mod programs;
pub mod report;
pub mod trace;

use crate::ir::{Program, Topology};
use std::fmt;

pub use engine::{prepare, simulate, Prepared};
pub use report::{busbw_table, Row};

use crate::ir::msccl::{NCCL_BUFFSIZE, NCCL_STEPS, SIMPLE_TILE_BYTES};

/// Knobs of the cost model.
#[derive(Debug, Clone, PartialEq)]
pub struct SimOptions {
    /// Tile size per chunk, bytes. Default 2 MiB: MSCCL's Simple protocol
    /// tile is MSCCL_CHUNKSTEPS = NCCL_STEPS/2 = 4 buffer steps of
    /// NCCL_BUFFSIZE/NCCL_STEPS = 512 KiB (msccl-xml.md §5.3).
    pub tile_bytes: u64,
    /// Replay the program per tile (MSCCL). `false`: one tile per chunk.
    pub tiling: bool,
    /// Buffer slots per connection (NCCL_STEPS).
    pub slots: u32,
    /// Bytes per slot (NCCL_BUFFSIZE / NCCL_STEPS). With tiling, a
    /// connection holds D = max(2, slots·slot_bytes / tile_bytes) messages
    /// (sent, not yet taken by the receiving step): the k-th send waits until
    /// the receiver has taken message k − D. At least 2 because MSCCL moves
    /// a tile in slices, so a tile as large as the buffer still streams.
    /// Without tiling the buffer is unbounded.
    pub slot_bytes: u64,
    /// Charge local `cpy`/`re` passes (`cpy` touches 2 × its bytes, `re`
    /// 3 ×) against each GPU's memory bandwidth, shared by its concurrent
    /// passes: the GPU's `mem_gbps`, else this figure in GB/s; `None`:
    /// local steps are free.
    pub mem_gbps: Option<f64>,
    /// The CPU executor's model instead of the GPUs' (all ranks are
    /// threads of one machine, and its cores move every byte): see
    /// [`SharedMem`]. None: transfers cross the topology's links.
    pub shared_mem: Option<SharedMem>,
    /// Record a trace (one track per link and per threadblock).
    pub trace: bool,
    /// Run a program that is the same on every host of a machine of
    /// identical hosts as one host's threadblocks (`fold.rs`; the same
    /// times and loads). Off with a trace, which records every
    /// threadblock, and under `shared_mem`.
    pub fold: bool,
    /// Jump over tiles that repeat (`period.rs`): once the whole state
    /// at a tile boundary is the state of an earlier boundary shifted in
    /// time (within rounding), the run goes on from as many periods later
    /// as the full tiles allow. Off with a trace.
    pub skip_periods: bool,
}

/// The cost of a step on the CPU executor: the memory it touches (`s`,
/// `r`, `cpy` 2 × its bytes; `rrs`, `rrc`, `rcs`, `re` 3 ×; `rrcs` 4 ×)
/// plus `call_us` of core time per primitive call, all on one resource of
/// `gbps` that every rank shares (the cores and their memory), max-min
/// fairly. A route's α still delays each message. A zero-copy send
/// (`Resolved::zero_copy_sends`: the receiver reads the sender's buffer)
/// writes no slot: an `s` touches nothing, an `rcs` 2 × its bytes, an
/// `rrcs` 3 ×; without zero-copy a plain `s` that an `rrc` then reduces
/// costs 5 touches per byte where a ring's `rrs` costs 3.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SharedMem {
    /// GB/s of bytes touched (read or written), all ranks together.
    pub gbps: f64,
    /// Core time of one primitive call apart from its data, µs.
    pub call_us: f64,
    /// The executor runs sends zero-copy where `Resolved::zero_copy_sends`
    /// allows it (`RunOptions::zero_copy`), in the aliasing mode it runs
    /// by default: out of place when the program allows it.
    pub zero_copy: bool,
}

impl SharedMem {
    /// Bytes touched per byte moved by a step of `kind`.
    pub fn touches(kind: crate::ir::StepKind) -> f64 {
        use crate::ir::StepKind::*;
        match kind {
            Nop => 0.0,
            Send | Recv | Copy => 2.0,
            RecvReduceSend | RecvReduceCopy | RecvCopySend | Reduce => 3.0,
            RecvReduceCopySend => 4.0,
        }
    }

    /// Bytes a step of `kind` moving `bytes` costs on the shared resource:
    /// its touches plus its call's core time.
    pub fn cost(&self, kind: crate::ir::StepKind, bytes: f64) -> f64 {
        Self::touches(kind) * bytes + self.call_us * self.gbps * 1e3
    }

    /// Bytes touched per byte moved by a zero-copy send of `kind`: its
    /// own copy into the slot is gone.
    pub fn touches_zero_copy(kind: crate::ir::StepKind) -> f64 {
        use crate::ir::StepKind::*;
        match kind {
            Send => 0.0,
            RecvCopySend => 2.0,
            RecvReduceCopySend => 3.0,
            k => Self::touches(k),
        }
    }

    /// `cost` of a zero-copy send.
    pub fn zero_copy_cost(&self, kind: crate::ir::StepKind, bytes: f64) -> f64 {
        Self::touches_zero_copy(kind) * bytes + self.call_us * self.gbps * 1e3
    }
}

impl SimOptions {
    /// The defaults for files of runtime `rt`: one that runs only the
    /// reduced step set (RCCL) pays for its local `re`/`cpy` passes
    /// ([`LOCAL_MEM_GBPS`](crate::ir::hardware::LOCAL_MEM_GBPS) per
    /// threadblock), which are what that runtime does instead of fused
    /// steps.
    pub fn for_runtime(rt: crate::ir::Runtime) -> Self {
        SimOptions {
            mem_gbps: (!rt.fused_steps()).then_some(crate::ir::hardware::LOCAL_MEM_GBPS),
            ..SimOptions::default()
        }
    }
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            tile_bytes: SIMPLE_TILE_BYTES,
            tiling: true,
            slots: NCCL_STEPS,
            slot_bytes: NCCL_BUFFSIZE / NCCL_STEPS as u64,
            mem_gbps: None,
            shared_mem: None,
            trace: false,
            fold: true,
            skip_periods: true,
        }
    }
}

/// A threadblock's step execution, for the trace.
#[derive(Debug, Clone, PartialEq)]
pub struct TbSpan {
    pub rank: usize,
    /// Index of the threadblock in the rank's `tbs`.
    pub tb: usize,
    pub tile: u64,
    pub step: usize,
    pub start_us: f64,
    pub end_us: f64,
}

/// A change of a link's total rate, for the trace.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkLoad {
    /// Edge index in the topology graph.
    pub link: usize,
    pub time_us: f64,
    pub gbps: f64,
}

/// What was recorded with `SimOptions::trace`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Trace {
    pub spans: Vec<TbSpan>,
    pub loads: Vec<LinkLoad>,
}

/// The outcome of one simulation.
#[derive(Debug, Clone, PartialEq)]
pub struct SimResult {
    /// Predicted completion time, µs.
    pub time_us: f64,
    /// Per rank: when its last step completes, µs (the largest is
    /// `time_us`).
    pub rank_end_us: Vec<f64>,
    /// Bytes per chunk (S / nchunksperloop).
    pub chunk_bytes: f64,
    /// Tiles per chunk replayed.
    pub tiles: u64,
    /// Tiles of every threadblock jumped over as repeats of a period
    /// (`SimOptions::skip_periods`), each counted in `steps_executed`,
    /// `flows` and `link_bytes` as if run.
    pub tiles_skipped: u64,
    /// Step executions (steps × tiles).
    pub steps_executed: u64,
    /// Network transfers (flows) simulated.
    pub flows: u64,
    /// Bytes carried per link (edge index order), summed over flows.
    pub link_bytes: Vec<f64>,
    /// How many threadblocks each simulated one stood for: the images of
    /// its host symmetry where the run was folded (`SimOptions::fold`;
    /// H / k for a shift by k of H hosts), else 1.
    pub folded: usize,
    pub trace: Option<Trace>,
}

/// Why a Program cannot be simulated on a Topology.
#[derive(Debug, Clone, PartialEq)]
pub enum SimError {
    /// The Program is for a different number of ranks.
    RankMismatch { program: i64, topology: usize },
    /// Two ranks of a connection have no route between them.
    NoRoute { from: usize, to: usize },
    /// The Program is malformed in a way the simulator cannot run.
    BadProgram(String),
    /// The program can make no progress (a cycle of waits).
    Deadlock(String),
    /// Bad simulator options.
    BadOptions(String),
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::RankMismatch { program, topology } => write!(
                f,
                "the program is for {program} GPUs (ngpus) but the topology has {topology} ranks"
            ),
            SimError::NoRoute { from, to } => write!(
                f,
                "the program sends from rank {from} to rank {to}, but the topology has no route between them"
            ),
            SimError::BadProgram(m) => write!(f, "cannot simulate the program: {m}"),
            SimError::Deadlock(m) => write!(f, "deadlock: {m}"),
            SimError::BadOptions(m) => write!(f, "bad simulator options: {m}"),
        }
    }
}

impl std::error::Error for SimError {}

/// Check that a Program and Topology agree on the rank count.
pub fn check_ranks(prog: &Program, topo: &Topology) -> Result<(), SimError> {
    if prog.ngpus < 0 || prog.ngpus as usize != topo.num_ranks() {
        return Err(SimError::RankMismatch {
            program: prog.ngpus,
            topology: topo.num_ranks(),
        });
    }
    Ok(())
}
