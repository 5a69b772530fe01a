//! Synthesis: Topology × Spec → Algorithm. Each algorithm lives in its own
//! file; `synthesize` picks by name.

pub mod ring;
pub mod sccl;

use crate::ir::{Algorithm, Spec, Topology};
use std::fmt;

/// Which synthesizer to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algo {
    /// NCCL-style rings (the baseline).
    Ring,
}

impl Algo {
    pub fn parse(s: &str) -> Option<Algo> {
        match s {
            "ring" => Some(Algo::Ring),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Algo::Ring => "ring",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SynthError(pub String);

impl fmt::Display for SynthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SynthError {}

/// Candidate Algorithms for `algo`, best first; the driver lowers them in
/// order and keeps the first that fits the runtime's limits. `chunks` is the
/// requested chunks per shard (None: the synthesizer's choice).
pub fn candidates(
    topo: &Topology,
    algo: Algo,
    chunks: Option<usize>,
) -> Result<Vec<Algorithm>, SynthError> {
    let n = topo.num_ranks();
    if n == 0 {
        return Err(SynthError("the topology has no GPUs".into()));
    }
    if chunks == Some(0) {
        return Err(SynthError("--chunks must be at least 1".into()));
    }
    match algo {
        Algo::Ring => {
            let rings = ring::find_rings(topo);
            // Full ring set first, then halves (fewer channels) as fallbacks.
            let mut out = Vec::new();
            let mut r = rings.len();
            loop {
                let c = chunks.unwrap_or(r);
                out.push(ring::ring_algorithm(
                    Spec::reduce_scatter(n, c),
                    &rings[..r],
                ));
                if r == 1 || chunks.is_some_and(|c| c < r) {
                    break;
                }
                r = r.div_ceil(2);
            }
            if let Some(c) = chunks {
                // With fixed chunks the ring count is min(rings, c); keep one.
                out.dedup_by(|a, b| a.transfers == b.transfers);
                let _ = c;
            }
            Ok(out)
        }
    }
}
