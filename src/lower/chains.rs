//! Chains (items 2 and 3 of the module doc): per rank and run, the
//! operations the tree gives — receive-and-reduce each child's partial sum
//! into an accumulator, then send it to the parent (a leaf just sends its
//! input) — each keyed by its transfer (step, send-or-receive, chunk, src,
//! dst).

use super::runs::{chunks_per_block, Block, Runs};
use crate::ir::Algorithm;
use rustc_hash::FxHashMap as HashMap;

/// A slot an operation names, before scratch allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Slot {
    In(u32),
    Out(u32),
    /// The accumulator of the chunks from c on (scratch).
    Acc(u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OpKind {
    /// Receive from `peer`, add `src`, write `dst`.
    RecvReduce,
    /// Send `src` to `peer`.
    Send,
    /// dst = src (a single rank).
    Copy,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Op {
    pub(super) kind: OpKind,
    /// (step, 0 for sends / 1 for receives, chunk, src, dst).
    pub(super) key: (u32, u32, u32, u32, u32),
    pub(super) chan: u32,
    pub(super) peer: u32,
    pub(super) src: Slot,
    pub(super) dst: Slot,
    /// Chunks it moves (the step's `cnt`).
    pub(super) cnt: u32,
}

/// One rank's operations and its chains: per run a chain, the op ids it
/// runs in order (ranges into `chain_ops`). A receive that spans several of
/// the rank's runs is one op at the head of each of their chains
/// (`shared`).
pub(super) struct RankChains {
    pub(super) ops: Vec<Op>,
    pub(super) chains: Vec<std::ops::Range<usize>>,
    pub(super) chain_ops: Vec<usize>,
    shared: HashMap<(usize, usize), usize>,
}

/// What building every chain of one lowering reads.
struct Ctx<'a, F> {
    blocks: &'a [Block],
    runs: &'a Runs,
    cps: usize,
    mchan: &'a F,
}

/// Chunks in blocks [rs, re).
fn chunks_of(blocks: &[Block], rs: usize, re: usize) -> u32 {
    blocks[rs..re].iter().map(|x| x.len as u32).sum()
}

/// The chains of ranks `ranks` (all blocks), one `RankChains` per rank.
pub(super) fn build(
    alg: &Algorithm,
    blocks: &[Block],
    runs: &Runs,
    per_chunk: &[Vec<(usize, usize, usize, usize)>],
    mchan: &impl Fn(usize, usize) -> usize,
    ranks: std::ops::Range<usize>,
) -> Vec<RankChains> {
    // Per block: children and parent of every rank, as a CSR over the
    // block's transfers sorted by receiver (buffers reused across blocks).
    let spec = alg.spec;
    let n = spec.ranks;
    let total = spec.total_chunks();
    let cps = spec.chunks;
    let lo = ranks.start;
    let mut per_rank = vec![0usize; ranks.len()];
    for t in &alg.transfers {
        if ranks.contains(&t.src) {
            per_rank[t.src - lo] += 1;
        }
        if ranks.contains(&t.dst) {
            per_rank[t.dst - lo] += 1;
        }
    }
    let mut out: Vec<RankChains> = per_rank
        .iter()
        .map(|&k| RankChains {
            ops: Vec::with_capacity(k / chunks_per_block(blocks, total) + blocks.len()),
            chains: Vec::with_capacity(blocks.len()),
            chain_ops: Vec::with_capacity(k),
            shared: HashMap::default(),
        })
        .collect();
    let cx = Ctx {
        blocks,
        runs,
        cps,
        mchan,
    };
    let mut by_dst: Vec<(usize, usize, usize, usize)> = Vec::new();
    let mut child_start = vec![0usize; n + 1];
    let mut parent: Vec<Option<(usize, usize, usize)>> = vec![None; n];
    for (bi, b) in blocks.iter().enumerate() {
        by_dst.clear();
        by_dst.extend(
            per_chunk[b.start]
                .iter()
                .map(|&(src, dst, step, ch)| (dst, step, src, ch)),
        );
        by_dst.sort_unstable();
        child_start.iter_mut().for_each(|x| *x = 0);
        parent.iter_mut().for_each(|x| *x = None);
        for &(dst, step, src, ch) in &by_dst {
            child_start[dst + 1] += 1;
            parent[src] = Some((dst, step, ch));
        }
        for v in 0..n {
            child_start[v + 1] += child_start[v];
        }
        for v in ranks.clone() {
            let children = &by_dst[child_start[v]..child_start[v + 1]];
            out[v - lo].push_run(&cx, v, bi, children, parent[v]);
        }
    }
    out
}

impl RankChains {
    /// Rank v's chain for its run containing block `bi`, built at the
    /// run's first block (elsewhere nothing): `children` are v's children
    /// (dst, step, src, channel) in block bi's tree, `parent` its parent
    /// edge (dst, step, channel).
    fn push_run<F: Fn(usize, usize) -> usize>(
        &mut self,
        cx: &Ctx<F>,
        v: usize,
        bi: usize,
        children: &[(usize, usize, usize, usize)],
        parent: Option<(usize, usize, usize)>,
    ) {
        let (blocks, runs, cps, mchan) = (cx.blocks, cx.runs, cx.cps, cx.mchan);
        let b = &blocks[bi];
        // v's chain for a run is built at the run's first block.
        let (rs, re) = runs.run(v, bi, blocks);
        if rs != bi {
            return;
        }
        let (ops, chains) = (&mut self.ops, &mut self.chains);
        let (cops, shared) = (&mut self.chain_ops, &mut self.shared);
        // Sizes fit u32: chunks per loop ≤ 32767 (MSCCL's offsets), and
        // ranks, steps and channels are far below 2³².
        let c0 = b.start as u32;
        let cnt = chunks_of(blocks, rs, re);
        let chain_start = cops.len();
        let is_root = v == b.owner;
        let acc_at = |c: u32| {
            if is_root {
                Slot::Out(c - (v * cps) as u32)
            } else {
                Slot::Acc(c)
            }
        };
        let acc = acc_at(c0);
        let vv = v as u32;
        for (j, &(_, step, src, ch)) in children.iter().enumerate() {
            let (cs, ce) = runs.run(src, bi, blocks);
            if (cs, ce) == (rs, re) {
                cops.push(ops.len());
                ops.push(Op {
                    kind: OpKind::RecvReduce,
                    key: (step as u32, 1, c0, src as u32, vv),
                    chan: mchan(ch, step) as u32,
                    peer: src as u32,
                    src: if j == 0 { Slot::In(c0) } else { acc },
                    dst: acc,
                    cnt,
                });
                continue;
            }
            // The child's message spans several of v's runs: one
            // receive, made at the first of them.
            let id = *shared.entry((src, cs)).or_insert_with(|| {
                let s0 = blocks[cs].start as u32;
                ops.push(Op {
                    kind: OpKind::RecvReduce,
                    key: (step as u32, 1, s0, src as u32, vv),
                    chan: mchan(ch, step) as u32,
                    peer: src as u32,
                    src: if j == 0 { Slot::In(s0) } else { acc_at(s0) },
                    dst: acc_at(s0),
                    cnt: chunks_of(blocks, cs, ce),
                });
                ops.len() - 1
            });
            cops.push(id);
        }
        if let Some((dst, step, ch)) = parent {
            cops.push(ops.len());
            ops.push(Op {
                kind: OpKind::Send,
                key: (step as u32, 0, c0, vv, dst as u32),
                chan: mchan(ch, step) as u32,
                peer: dst as u32,
                src: if children.is_empty() {
                    Slot::In(c0)
                } else {
                    acc
                },
                dst: Slot::In(c0),
                cnt,
            });
        } else if is_root && children.is_empty() {
            cops.push(ops.len());
            ops.push(Op {
                kind: OpKind::Copy,
                key: (0, 0, c0, vv, vv),
                chan: 0,
                peer: vv,
                src: Slot::In(c0),
                dst: acc,
                cnt,
            });
        }
        chains.push(chain_start..cops.len());
    }
}
