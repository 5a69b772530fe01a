//! The collective specification: what must be computed, independent of how.

use super::program::Collective;

/// Reduce-scatter over `ranks` ranks, each rank's output shard cut into
/// `chunks` chunks (so the full input buffer holds `ranks * chunks`).
///
/// Pre-condition: every rank r holds input chunks 0..ranks*chunks.
/// Post-condition: rank r's output chunk k holds the sum over all ranks q of
/// q's input chunk `r*chunks + k`, each contribution exactly once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Spec {
    pub coll: Collective,
    pub ranks: usize,
    /// Chunks per rank's output shard.
    pub chunks: usize,
    /// The schedule must be correct when `o` aliases `i[rank*chunks..]`.
    pub inplace: bool,
    /// The schedule must be correct with separate `i` and `o` (then it may
    /// never write `i`).
    pub outofplace: bool,
}

impl Spec {
    pub fn reduce_scatter(ranks: usize, chunks: usize) -> Self {
        Spec {
            coll: Collective::ReduceScatter,
            ranks,
            chunks,
            inplace: true,
            outofplace: true,
        }
    }
    /// Total chunks of the full input buffer (`nchunksperloop`).
    pub fn total_chunks(&self) -> usize {
        self.ranks * self.chunks
    }
    /// The rank that owns (ends with the reduction of) global chunk `c`.
    pub fn owner(&self, c: usize) -> usize {
        c / self.chunks
    }
}
