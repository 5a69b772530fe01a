//! The collective specification: what must be computed, independent of how.
//!
//! Pre- and post-conditions as data (SCCL style), over `ranks` ranks and
//! `total` global chunks (`nchunksperloop`); global chunk c belongs to
//! rank `c · ranks / total` ([`Spec::owner`]). A reduce-scatter or an
//! allgather cuts each rank's shard into `chunks = total / ranks` chunks,
//! so chunk c belongs to rank `c / chunks`; an allreduce may have any
//! number of chunks, fewer than the ranks included (a fused allreduce of
//! one chunk reduces the whole buffer to rank 0 and broadcasts it from
//! there):
//!
//! | op | pre: rank r holds | post: rank r holds |
//! |---|---|---|
//! | reduce-scatter | input chunks 0..C (every global chunk) | output chunk k = Σ over ranks q of q's input chunk `r·chunks + k`, each contribution exactly once |
//! | allgather | input chunk k = its own global chunk `r·chunks + k` | output chunk c = an exact copy of the owner's input of global chunk c, for every c |
//! | allreduce | input chunks 0..C | output chunk c = Σ over ranks q of q's input chunk c, for every c |
//!
//! The buffers' sizes and in-place aliasing per op are MSCCL's
//! (../shared/reference/msccl-xml.md §5.2): [`Collective::buffers`].

use super::program::Collective;

/// A collective over `ranks` ranks and `total` chunks per loop (for a
/// reduce-scatter or an allgather, `ranks` shards of `total / ranks`
/// chunks each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Spec {
    pub coll: Collective,
    pub ranks: usize,
    /// Chunks of the full buffer (`nchunksperloop`): a multiple of `ranks`
    /// for reduce-scatter and allgather, any count ≥ 1 for allreduce.
    pub total: usize,
    /// The schedule must be correct when the buffers alias as the op's
    /// in-place call does ([`Collective::buffers`]).
    pub inplace: bool,
    /// The schedule must be correct with separate `i` and `o` (then it may
    /// never write `i`).
    pub outofplace: bool,
}

impl Spec {
    /// The op over `ranks` shards of `chunks` chunks each.
    pub fn new(coll: Collective, ranks: usize, chunks: usize) -> Self {
        Spec {
            coll,
            ranks,
            total: ranks * chunks,
            inplace: true,
            outofplace: true,
        }
    }
    pub fn reduce_scatter(ranks: usize, chunks: usize) -> Self {
        Spec::new(Collective::ReduceScatter, ranks, chunks)
    }
    /// Total chunks of the full buffer (`nchunksperloop`).
    pub fn total_chunks(&self) -> usize {
        self.total
    }
    /// Chunks per rank's shard (`total / ranks`; 0 for a fused allreduce
    /// of fewer chunks than ranks).
    pub fn chunks(&self) -> usize {
        self.total / self.ranks.max(1)
    }
    /// The rank global chunk `c` belongs to: where its reduction ends
    /// (reduce-scatter), where its broadcast starts (allgather), where the
    /// two meet (allreduce). With shards of k chunks this is `c / k`.
    pub fn owner(&self, c: usize) -> usize {
        c * self.ranks / self.total.max(1)
    }
    /// A fused allreduce: fewer chunks than ranks, each reduced to one rank
    /// and broadcast from it (no rank owns a shard).
    pub fn is_fused(&self) -> bool {
        self.coll == Collective::AllReduce && self.total < self.ranks
    }
}

/// One rank's buffers for an op: chunks of `i` and `o`, and where `i`
/// and `o` meet in an in-place call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Buffers {
    pub i_chunks: usize,
    pub o_chunks: usize,
    pub alias: Alias,
}

impl Buffers {
    /// Chunk `off` of `buf` as an index into one rank's memory after the
    /// call's aliasing: out of place `i`, `o` and scratch side by side; in
    /// place the op's alias (msccl-xml.md §5.2) puts one buffer inside the
    /// other at `rank`'s shard, and scratch follows the full buffer. The
    /// verifier's slots and the executors' zero-copy analysis both use it.
    pub fn slot(&self, rank: usize, inplace: bool, buf: super::Buf, off: usize) -> usize {
        use super::Buf;
        let full = self.i_chunks.max(self.o_chunks);
        let shard = rank * self.i_chunks.min(self.o_chunks);
        match (inplace, buf) {
            (false, Buf::Input) => off,
            (false, Buf::Output) => self.i_chunks + off,
            (false, Buf::Scratch) => self.i_chunks + self.o_chunks + off,
            (true, Buf::Scratch) => full + off,
            (true, Buf::Input) => match self.alias {
                Alias::InputInOut => shard + off,
                Alias::OutInInput | Alias::Same => off,
            },
            (true, Buf::Output) => match self.alias {
                Alias::OutInInput => shard + off,
                Alias::InputInOut | Alias::Same => off,
            },
        }
    }
}

/// How an in-place call's buffers overlap (msccl-xml.md §5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alias {
    /// `o` is `i[rank·chunks ..]` (reduce-scatter).
    OutInInput,
    /// `i` is `o[rank·chunks ..]` (allgather).
    InputInOut,
    /// `o` is `i` (allreduce).
    Same,
}

impl Collective {
    /// Rank buffers for `total` chunks per loop over `ranks` ranks.
    pub fn buffers(self, total: usize, ranks: usize) -> Buffers {
        let shard = total / ranks.max(1);
        match self {
            Collective::ReduceScatter => Buffers {
                i_chunks: total,
                o_chunks: shard,
                alias: Alias::OutInInput,
            },
            Collective::AllGather => Buffers {
                i_chunks: shard,
                o_chunks: total,
                alias: Alias::InputInOut,
            },
            Collective::AllReduce => Buffers {
                i_chunks: total,
                o_chunks: total,
                alias: Alias::Same,
            },
        }
    }
    /// Whether the op reduces (its transfers may add).
    pub fn reduces(self) -> bool {
        !matches!(self, Collective::AllGather)
    }
    /// The `--op` spelling.
    pub fn parse(s: &str) -> Option<Collective> {
        match s {
            "reduce-scatter" | "reducescatter" | "reduce_scatter" | "rs" => {
                Some(Collective::ReduceScatter)
            }
            "allgather" | "all-gather" | "ag" => Some(Collective::AllGather),
            "allreduce" | "all-reduce" | "ar" => Some(Collective::AllReduce),
            _ => None,
        }
    }
    /// The short name files are named by (`rs`, `ag`, `ar`).
    pub fn short(self) -> &'static str {
        match self {
            Collective::ReduceScatter => "rs",
            Collective::AllGather => "ag",
            Collective::AllReduce => "ar",
        }
    }
}
