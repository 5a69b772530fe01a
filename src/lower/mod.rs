//! Lowering: Algorithm (per-chunk reduction trees) → Program (MSCCL
//! threadblocks, channels, steps, dependencies).
//!
//! One mechanism does it all (docs/architecture.md "Lowering"):
//! 1. chunks whose trees are identical and whose indices are consecutive
//!    form a *block* that moves as one multi-chunk step (`cnt` > 1); and
//!    per rank, consecutive blocks of one owner in which that rank's whole
//!    subtree is identical form a *run* it moves as one message (its
//!    receives, reduction and send once for the run). The receiver of such
//!    a message may split the run further — a receive then spans several
//!    of its chains and must head them all or follow one op they share
//!    (an MSCCL step waits on one dependency), else the sender's run is
//!    cut there too (`Runs`);
//! 2. per rank and block, the tree gives a chain of operations: receive-and-
//!    reduce each child's partial sum into an accumulator (the output slot at
//!    the owner, a scratch slot elsewhere), then send the accumulator to the
//!    parent; a leaf just sends its input;
//! 3. each operation carries the key (step, send-or-receive, chunk, src,
//!    dst) of its transfer, sends before receives within a step;
//!    threadblocks are one per (MSCCL channel, send peer, receive peer),
//!    receive and send peers paired where a chain receives from one and
//!    sends to the other, and each threadblock's steps are sorted by key.
//!    Both ends of every connection therefore list its transfers in the same
//!    (step, chunk) order. Every data or program-order edge goes to a later
//!    step, or stays within a step and goes to a larger chunk (a receive is
//!    never followed by a send of the same step in one threadblock), so the
//!    result cannot deadlock with unbounded connection buffers. With
//!    bounded ones it can, when a threadblock sends two messages of one
//!    step on one connection (docs/architecture.md "Lowering"); the
//!    verifier catches that, so `compile` never emits it. A receive at
//!    step s is adjacent to the send of the same accumulator at step s+1,
//!    so a ring fuses into `rrs`;
//! 4. a receive followed in the same threadblock by the send of the same
//!    accumulator fuses into `rrs`;
//! 5. operations of one chain in different threadblocks get a `depid/deps`
//!    dependency (`hasdep` on the target);
//! 6. MSCCL limits: when a threadblock would exceed the runtime's steps per
//!    threadblock, transfers are spread over more channels by step window
//!    (channel = logical channel × windows + step / window) and lowering
//!    retries with a smaller window; more than 32 channels is an error.

use crate::ir::{
    Algorithm, Buf, Collective, GpuProgram, Program, Proto, Runtime, Step, StepKind, Threadblock,
};
use rustc_hash::FxHashMap as HashMap;

use crate::ir::msccl::{MAX_CHANNELS, MAX_CNT};

#[derive(Debug, Clone)]
pub struct LowerOptions {
    pub name: String,
    pub proto: Proto,
    pub runtime: Runtime,
    pub inplace: bool,
    pub outofplace: bool,
    pub min_bytes: i64,
    /// `maxBytes` to write (0 = no limit for the executor).
    pub max_bytes: i64,
}

impl Default for LowerOptions {
    fn default() -> Self {
        LowerOptions {
            name: "rscc".into(),
            proto: Proto::Simple,
            runtime: Runtime::Executor,
            inplace: true,
            outofplace: true,
            min_bytes: 0,
            max_bytes: 0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LowerError {
    /// The Algorithm is not a valid set of reduction trees.
    #[error("invalid algorithm: {0}")]
    Algorithm(String),
    /// Keeping every threadblock within the runtime's steps needs more
    /// channels than MSCCL has.
    #[error("exceeds MSCCL limits: needs {channels} channels (at most {}) to keep every threadblock within {max_steps} steps; use fewer logical channels (rings) or fewer chunks", MAX_CHANNELS)]
    Channels { channels: usize, max_steps: usize },
    /// A threadblock exceeds the runtime's steps even with one step per
    /// channel window.
    #[error("exceeds MSCCL limits: a threadblock needs {steps} steps even with one step per channel window (limit {max_steps})")]
    Steps { steps: usize, max_steps: usize },
}

impl LowerError {
    /// Whether the Algorithm is valid but does not fit the runtime.
    pub fn is_limit(&self) -> bool {
        !matches!(self, LowerError::Algorithm(_))
    }
}

/// A slot an operation names, before scratch allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    In(u32),
    Out(u32),
    /// The accumulator of the chunks from c on (scratch).
    Acc(u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpKind {
    /// Receive from `peer`, add `src`, write `dst`.
    RecvReduce,
    /// Send `src` to `peer`.
    Send,
    /// dst = src (a single rank).
    Copy,
}

#[derive(Debug, Clone, Copy)]
struct Op {
    kind: OpKind,
    /// (step, 0 for sends / 1 for receives, chunk, src, dst).
    key: (u32, u32, u32, u32, u32),
    chan: u32,
    peer: u32,
    src: Slot,
    dst: Slot,
    /// Chunks it moves (the step's `cnt`).
    cnt: u32,
}

struct Block {
    start: usize,
    len: usize,
    owner: usize,
}

/// Message runs (item 1 of the module doc): per rank, consecutive blocks
/// of one owner whose partial sums that rank computes identically — its
/// whole subtree is the same — so it moves them as one message. Only owners
/// whose shard is several blocks have runs; elsewhere a run is a block.
struct Runs {
    /// Per owner with several blocks: (first block, blocks, offset in
    /// `cut`).
    owner: Vec<Option<(usize, usize, usize)>>,
    /// `cut[off + v·(nb − 1) + i]`: rank v's run ends between blocks
    /// first + i and first + i + 1.
    cut: Vec<bool>,
}

/// One block's tree: every rank's parent edge (dst, step, channel) and its
/// children (step, src, channel) sorted as the chains list them.
struct TreeView {
    parent: Vec<Option<(usize, usize, usize)>>,
    kid_start: Vec<usize>,
    kids: Vec<(usize, usize, usize)>,
}

impl TreeView {
    fn new(n: usize, transfers: &[(usize, usize, usize, usize)]) -> TreeView {
        let mut parent = vec![None; n];
        let mut by_dst: Vec<(usize, usize, usize, usize)> = transfers
            .iter()
            .map(|&(src, dst, step, ch)| (dst, step, src, ch))
            .collect();
        by_dst.sort_unstable();
        let mut kid_start = vec![0usize; n + 1];
        for &(dst, step, src, ch) in &by_dst {
            kid_start[dst + 1] += 1;
            parent[src] = Some((dst, step, ch));
        }
        for v in 0..n {
            kid_start[v + 1] += kid_start[v];
        }
        let kids = by_dst
            .iter()
            .map(|&(_, st, src, ch)| (st, src, ch))
            .collect();
        TreeView {
            parent,
            kid_start,
            kids,
        }
    }
    fn kids(&self, v: usize) -> &[(usize, usize, usize)] {
        &self.kids[self.kid_start[v]..self.kid_start[v + 1]]
    }
}

impl Runs {
    fn new(n: usize, blocks: &[Block], per_chunk: &[Vec<(usize, usize, usize, usize)>]) -> Runs {
        let mut runs = Runs {
            owner: vec![None; n],
            cut: Vec::new(),
        };
        let mut b = 0;
        while b < blocks.len() {
            let o = blocks[b].owner;
            let mut e = b + 1;
            while e < blocks.len() && blocks[e].owner == o {
                e += 1;
            }
            if e - b > 1 {
                let off = runs.cut.len();
                runs.cut.resize(off + n * (e - b - 1), false);
                runs.owner[o] = Some((b, e - b, off));
                let views: Vec<TreeView> = (b..e)
                    .map(|x| TreeView::new(n, &per_chunk[blocks[x].start]))
                    .collect();
                runs.cut_owner(n, o, &blocks[b..e], &views);
            }
            b = e;
        }
        runs
    }

    /// Rank v's run containing block b: blocks [start, end).
    fn run(&self, v: usize, b: usize, blocks: &[Block]) -> (usize, usize) {
        let Some((first, nb, off)) = self.owner[blocks[b].owner] else {
            return (b, b + 1);
        };
        let cut = &self.cut[off + v * (nb - 1)..off + (v + 1) * (nb - 1)];
        let i = b - first;
        let mut s = i;
        while s > 0 && !cut[s - 1] {
            s -= 1;
        }
        let mut e = i;
        while e + 1 < nb && !cut[e] {
            e += 1;
        }
        (first + s, first + e + 1)
    }

    /// The cuts of one owner's blocks `bl` (trees `views`):
    /// 1. rank v is cut between blocks i and i + 1 unless its parent edge
    ///    and children agree and every child is uncut there (so its
    ///    subtree is identical); the owner is always cut;
    /// 2. a run holds at most MAX_CNT chunks, and a parent is cut wherever
    ///    a child is (a message never spans a child's two messages);
    /// 3. a receive that spans several of the receiver's runs is one step
    ///    in all their chains, and an MSCCL step waits on one dependency:
    ///    it must have the same predecessor in each (or none); where it
    ///    does not, the child is cut at the receiver's cuts.
    fn cut_owner(&mut self, n: usize, o: usize, bl: &[Block], views: &[TreeView]) {
        let (_, nb, off) = self.owner[o].expect("owner with several blocks");
        let w = nb - 1;
        let at = |v: usize, i: usize| off + v * w + i;
        // Mark v cut at i, and every ancestor (block i's tree) up to the
        // first one already cut.
        let mark_up = |cut: &mut Vec<bool>, mut v: usize, i: usize| {
            cut[at(v, i)] = true;
            while let Some((p, _, _)) = views[i].parent[v] {
                if cut[at(p, i)] {
                    break;
                }
                cut[at(p, i)] = true;
                v = p;
            }
        };
        for i in 0..w {
            let (a, b) = (&views[i], &views[i + 1]);
            let differs: Vec<usize> = (0..n)
                .filter(|&v| v == o || a.parent[v] != b.parent[v] || a.kids(v) != b.kids(v))
                .collect();
            for v in differs {
                mark_up(&mut self.cut, v, i);
            }
        }
        for v in 0..n {
            let mut acc = bl[0].len;
            for i in 0..w {
                let next = bl[i + 1].len;
                if self.cut[at(v, i)] {
                    acc = next;
                } else if acc + next > MAX_CNT {
                    mark_up(&mut self.cut, v, i);
                    acc = next;
                } else {
                    acc += next;
                }
            }
        }
        let run = |cut: &[bool], v: usize, i: usize| {
            let mut s = i;
            while s > 0 && !cut[at(v, s - 1)] {
                s -= 1;
            }
            let mut e = i;
            while e < w && !cut[at(v, e)] {
                e += 1;
            }
            (s, e + 1)
        };
        loop {
            let mut changed = false;
            for p in 0..n {
                let mut qs = 0;
                while qs < nb {
                    let (_, qe) = run(&self.cut, p, qs);
                    for &(_, c, _) in views[qs].kids(p) {
                        let (rs, re) = run(&self.cut, c, qs);
                        if rs != qs || re == qe {
                            continue;
                        }
                        // Shared by p's runs in [rs, re): same predecessor?
                        let pred = |q: usize| {
                            let kids = views[q].kids(p);
                            let k = kids.iter().position(|x| x.1 == c).expect("child");
                            (k > 0).then(|| (kids[k - 1].1, run(&self.cut, kids[k - 1].1, q).0))
                        };
                        let first = pred(qs);
                        let mut q = qe;
                        let mut same = true;
                        while q < re {
                            same &= pred(q) == first;
                            q = run(&self.cut, p, q).1;
                        }
                        if !same {
                            for i in rs..re - 1 {
                                if self.cut[at(p, i)] && !self.cut[at(c, i)] {
                                    self.cut[at(c, i)] = true;
                                    changed = true;
                                }
                            }
                        }
                    }
                    qs = qe;
                }
            }
            if !changed {
                break;
            }
        }
    }
}

/// Chunks per block on average (at least 1): transfers of a block are
/// lowered once for all its chunks.
fn chunks_per_block(blocks: &[Block], total: usize) -> usize {
    total.div_ceil(blocks.len().max(1)).max(1)
}

/// Lower an Algorithm into a Program that fits `opts.runtime`'s limits.
pub fn lower(alg: &Algorithm, opts: &LowerOptions) -> Result<Program, LowerError> {
    if alg.spec.coll != Collective::ReduceScatter {
        return Err(LowerError::Algorithm(format!(
            "lowering supports reduce-scatter, not {}",
            alg.spec.coll.display()
        )));
    }
    let max_steps = opts.runtime.max_steps();
    let steps = alg.num_steps().max(1);
    // Skip the one-window attempt when some connection alone would carry
    // more transfers than a threadblock may have steps.
    let mut per_conn: HashMap<(usize, usize, usize), usize> = HashMap::default();
    for t in &alg.transfers {
        *per_conn.entry((t.src, t.dst, t.channel)).or_default() += 1;
    }
    let blocks_hint = alg.spec.chunks.max(1);
    let crowded = per_conn
        .values()
        .any(|&k| k.div_ceil(blocks_hint) > max_steps);
    let mut window = if crowded {
        max_steps.saturating_sub(2).max(1).min(steps)
    } else {
        steps
    };
    // The tree check runs once the channel count is known to fit (it is
    // O(transfers); a candidate that cannot fit fails fast without it).
    let mut checked = false;
    loop {
        // Channels needed at this window, known before lowering.
        let need = alg.num_channels() * steps.div_ceil(window);
        if need > MAX_CHANNELS {
            return Err(LowerError::Channels {
                channels: need,
                max_steps,
            });
        }
        if !checked {
            alg.check().map_err(|e| LowerError::Algorithm(e.0))?;
            checked = true;
        }
        let prog = lower_with_window(alg, opts, window)?;
        let nch = prog.nchannels as usize;
        let longest = prog
            .gpus
            .iter()
            .flat_map(|g| g.tbs.iter())
            .map(|t| t.steps.len())
            .max()
            .unwrap_or(0);
        if nch > MAX_CHANNELS {
            return Err(LowerError::Channels {
                channels: nch,
                max_steps,
            });
        }
        if longest <= max_steps {
            return Ok(prog);
        }
        if window <= 1 {
            return Err(LowerError::Steps {
                steps: longest,
                max_steps,
            });
        }
        // Next window: what makes the longest TB fit, roughly.
        let next = if window == steps {
            max_steps.saturating_sub(2).max(1)
        } else {
            window / 2
        };
        window = next.min(window - 1).max(1);
    }
}

fn lower_with_window(
    alg: &Algorithm,
    opts: &LowerOptions,
    window: usize,
) -> Result<Program, LowerError> {
    let spec = alg.spec;
    let n = spec.ranks;
    let total = spec.total_chunks();
    let nwin = alg.num_steps().max(1).div_ceil(window);
    let mchan = |logical: usize, step: usize| logical * nwin + step / window;

    // Per chunk: transfers sorted, as the block signature.
    let mut per_chunk: Vec<Vec<(usize, usize, usize, usize)>> = vec![Vec::new(); total];
    for t in &alg.transfers {
        per_chunk[t.chunk].push((t.src, t.dst, t.step, t.channel));
    }
    for v in per_chunk.iter_mut() {
        v.sort_unstable();
    }
    let mut blocks: Vec<Block> = Vec::new();
    let mut block_of = vec![0usize; total];
    for c in 0..total {
        let owner = spec.owner(c);
        if let Some(b) = blocks.last_mut() {
            if b.owner == owner
                && b.len < MAX_CNT
                && b.start + b.len == c
                && per_chunk[b.start] == per_chunk[c]
            {
                b.len += 1;
                block_of[c] = blocks.len() - 1;
                continue;
            }
        }
        block_of[c] = blocks.len();
        blocks.push(Block {
            start: c,
            len: 1,
            owner,
        });
    }
    // Ranks are independent from here on: lower contiguous ranges of them
    // on the available cores (large programs only).
    let parts_n = crate::par::threads(n / 64);
    let per = n.div_ceil(parts_n);
    let ranges: Vec<std::ops::Range<usize>> = (0..parts_n)
        .map(|k| k * per..((k + 1) * per).min(n))
        .collect();
    let runs = Runs::new(n, &blocks, &per_chunk);
    let parts = crate::par::map(&ranges, |r| {
        lower_ranks(alg, &blocks, &runs, &per_chunk, mchan, r.clone())
    });
    let mut gpus = Vec::with_capacity(n);
    let mut max_chan = 0usize;
    for (g, m) in parts {
        gpus.extend(g);
        max_chan = max_chan.max(m);
    }
    Ok(Program {
        name: opts.name.clone(),
        proto: opts.proto,
        coll: Collective::ReduceScatter,
        runtime: opts.runtime,
        nchannels: max_chan as i64 + 1,
        nchunksperloop: total as i64,
        ngpus: n as i64,
        inplace: opts.inplace,
        outofplace: opts.outofplace,
        min_bytes: opts.min_bytes,
        max_bytes: Some(opts.max_bytes),
        gpus,
    })
}

/// Lower ranks `ranks` (all blocks): their threadblocks, and the largest
/// channel they use.
fn lower_ranks(
    alg: &Algorithm,
    blocks: &[Block],
    runs: &Runs,
    per_chunk: &[Vec<(usize, usize, usize, usize)>],
    mchan: impl Fn(usize, usize) -> usize,
    ranks: std::ops::Range<usize>,
) -> (Vec<GpuProgram>, usize) {
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
    // Per rank: its ops; per run a chain, the op ids it runs in order
    // (ranges into `chain_ops`). A receive that spans several of the
    // rank's runs is one op at the head of each of their chains (`shared`).
    let mut ops: Vec<Vec<Op>> = per_rank
        .iter()
        .map(|&k| Vec::with_capacity(k / chunks_per_block(blocks, total) + blocks.len()))
        .collect();
    let mut chains: Vec<Vec<std::ops::Range<usize>>> =
        vec![Vec::with_capacity(blocks.len()); ranks.len()];
    let mut chain_ops: Vec<Vec<usize>> = per_rank.iter().map(|&k| Vec::with_capacity(k)).collect();
    let mut shared: Vec<HashMap<(usize, usize), usize>> = vec![HashMap::default(); ranks.len()];
    let mut by_dst: Vec<(usize, usize, usize, usize)> = Vec::new();
    let mut child_start = vec![0usize; n + 1];
    let mut parent: Vec<Option<(usize, usize, usize)>> = vec![None; n];
    let chunks_of =
        |rs: usize, re: usize| -> u32 { blocks[rs..re].iter().map(|x| x.len as u32).sum() };
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
            // v's chain for a run is built at the run's first block.
            let (rs, re) = runs.run(v, bi, blocks);
            if rs != bi {
                continue;
            }
            let children = &by_dst[child_start[v]..child_start[v + 1]];
            let (ops, chains) = (&mut ops[v - lo], &mut chains[v - lo]);
            let (cops, shared) = (&mut chain_ops[v - lo], &mut shared[v - lo]);
            // Sizes fit u32: chunks per loop ≤ 32767 (MSCCL's offsets), and
            // ranks, steps and channels are far below 2³².
            let c0 = b.start as u32;
            let cnt = chunks_of(rs, re);
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
                        cnt: chunks_of(cs, ce),
                    });
                    ops.len() - 1
                });
                cops.push(id);
            }
            if let Some((dst, step, ch)) = parent[v] {
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

    let mut gpus = Vec::with_capacity(ranks.len());
    let mut max_chan = 0usize;
    for v in ranks.clone() {
        let rops = &ops[v - lo];
        let chains = &chains[v - lo];
        let cops = &chain_ops[v - lo];
        // The op after each op in its chain; a receive shared by several
        // chains has none (it never fuses with a send).
        const NONE: usize = usize::MAX;
        let mut next_in_chain = vec![NONE; rops.len()];
        let mut in_chains = vec![0u32; rops.len()];
        for chain in chains {
            for i in chain.clone() {
                in_chains[cops[i]] += 1;
                if i + 1 < chain.end {
                    next_in_chain[cops[i]] = cops[i + 1];
                }
            }
        }
        for (next, &k) in next_in_chain.iter_mut().zip(&in_chains) {
            if k > 1 {
                *next = NONE;
            }
        }
        // Fusable (chan, recv peer, send peer) candidates: the last receive
        // of a chain followed by its send on the same channel.
        let mut cand: HashMap<(u32, u32, u32), usize> = HashMap::default();
        for chain in chains {
            if chain.len() >= 2 && in_chains[cops[chain.end - 2]] == 1 {
                let (a, b) = (&rops[cops[chain.end - 2]], &rops[cops[chain.end - 1]]);
                if a.kind == OpKind::RecvReduce && b.kind == OpKind::Send && a.chan == b.chan {
                    *cand.entry((a.chan, a.peer, b.peer)).or_default() += 1;
                }
            }
        }
        let mut cand: Vec<((u32, u32, u32), usize)> = cand.into_iter().collect();
        cand.sort_unstable_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
        // TB keys (chan, send, recv) with -1 as none.
        let mut tb_keys: Vec<(u32, i64, i64)> = Vec::new();
        let mut recv_tb: HashMap<(u32, u32), usize> = HashMap::default();
        let mut send_tb: HashMap<(u32, u32), usize> = HashMap::default();
        for ((ch, k, p), _) in cand {
            if !recv_tb.contains_key(&(ch, k)) && !send_tb.contains_key(&(ch, p)) {
                recv_tb.insert((ch, k), tb_keys.len());
                send_tb.insert((ch, p), tb_keys.len());
                tb_keys.push((ch, p as i64, k as i64));
            }
        }
        let mut local_tb = None;
        let mut tb_of_op = vec![0usize; rops.len()];
        for (i, o) in rops.iter().enumerate() {
            tb_of_op[i] = match o.kind {
                OpKind::RecvReduce => *recv_tb.entry((o.chan, o.peer)).or_insert_with(|| {
                    tb_keys.push((o.chan, -1, o.peer as i64));
                    tb_keys.len() - 1
                }),
                OpKind::Send => *send_tb.entry((o.chan, o.peer)).or_insert_with(|| {
                    tb_keys.push((o.chan, o.peer as i64, -1));
                    tb_keys.len() - 1
                }),
                OpKind::Copy => *local_tb.get_or_insert_with(|| {
                    tb_keys.push((0, -1, -1));
                    tb_keys.len() - 1
                }),
            };
        }
        // Stable TB numbering: by (chan, recv, send).
        let mut perm: Vec<usize> = (0..tb_keys.len()).collect();
        perm.sort_unstable_by_key(|&t| (tb_keys[t].0, tb_keys[t].2, tb_keys[t].1));
        let mut new_id = vec![0usize; tb_keys.len()];
        for (i, &t) in perm.iter().enumerate() {
            new_id[t] = i;
        }
        let mut tb_ops: Vec<Vec<usize>> = vec![Vec::new(); tb_keys.len()];
        for (i, &t) in tb_of_op.iter().enumerate() {
            tb_ops[new_id[t]].push(i);
        }
        for list in tb_ops.iter_mut() {
            list.sort_unstable_by_key(|&i| rops[i].key);
        }
        // Fuse and place: op id → (tb, step position).
        let mut pos_of_op = vec![(0usize, 0usize); rops.len()];
        // Per TB: (step kind, op ids) before field assignment.
        let mut tb_steps: Vec<Vec<(StepKind, usize, Option<usize>)>> =
            vec![Vec::new(); tb_keys.len()];
        for (t, list) in tb_ops.iter().enumerate() {
            let mut i = 0;
            while i < list.len() {
                let a = &rops[list[i]];
                // Only the chain's last receive may fuse with its send: an
                // earlier one would skip the remaining children.
                let fuse = i + 1 < list.len() && next_in_chain[list[i]] == list[i + 1] && {
                    let b = &rops[list[i + 1]];
                    a.kind == OpKind::RecvReduce
                        && b.kind == OpKind::Send
                        && a.dst == b.src
                        && matches!(a.dst, Slot::Acc(_))
                };
                let pos = tb_steps[t].len();
                if fuse {
                    pos_of_op[list[i]] = (t, pos);
                    pos_of_op[list[i + 1]] = (t, pos);
                    tb_steps[t].push((StepKind::RecvReduceSend, list[i], Some(list[i + 1])));
                    i += 2;
                } else {
                    pos_of_op[list[i]] = (t, pos);
                    let kind = match a.kind {
                        OpKind::RecvReduce => StepKind::RecvReduceCopy,
                        OpKind::Send => StepKind::Send,
                        OpKind::Copy => StepKind::Copy,
                    };
                    tb_steps[t].push((kind, list[i], None));
                    i += 1;
                }
            }
        }
        // Scratch: the chunks whose accumulators some step still names, in
        // chunk order, packed (a chunk's slot = accumulator chunks before
        // it), so a receive spanning several runs names one contiguous range.
        let mut acc_used: Vec<(u32, u32)> = Vec::new();
        for steps in &tb_steps {
            for &(kind, a, _) in steps {
                let o = &rops[a];
                let names = |s: Slot| matches!(s, Slot::Acc(_));
                let named = match kind {
                    StepKind::RecvReduceSend => Some(o.src),
                    _ if names(o.src) => Some(o.src),
                    _ if o.kind != OpKind::Send && names(o.dst) => Some(o.dst),
                    _ => None,
                };
                if let Some(Slot::Acc(c)) = named {
                    acc_used.push((c, c + o.cnt));
                }
            }
        }
        acc_used.sort_unstable();
        // Merged ranges with the scratch offset of their first chunk.
        let mut acc_ranges: Vec<(u32, u32, usize)> = Vec::new();
        let mut s_chunks = 0usize;
        for (a, b) in acc_used {
            match acc_ranges.last_mut() {
                Some(last) if a <= last.1 => {
                    if b > last.1 {
                        s_chunks += (b - last.1) as usize;
                        last.1 = b;
                    }
                }
                _ => {
                    acc_ranges.push((a, b, s_chunks));
                    s_chunks += (b - a) as usize;
                }
            }
        }
        let place = |s: Slot| -> (Buf, usize) {
            match s {
                Slot::In(c) => (Buf::Input, c as usize),
                Slot::Out(k) => (Buf::Output, k as usize),
                Slot::Acc(c) => {
                    let i = acc_ranges.partition_point(|r| r.1 <= c);
                    let off = acc_ranges
                        .get(i)
                        .filter(|r| r.0 <= c)
                        .map_or(0, |r| r.2 + (c - r.0) as usize);
                    (Buf::Scratch, off)
                }
            }
        };
        // Dependencies along chains across threadblocks.
        let mut dep_of: HashMap<(usize, usize), (usize, usize)> = HashMap::default();
        for chain in chains {
            for i in chain.start..chain.end.saturating_sub(1) {
                let (pa, pb) = (pos_of_op[cops[i]], pos_of_op[cops[i + 1]]);
                if pa.0 != pb.0 {
                    dep_of.insert(pb, pa);
                }
            }
        }
        let mut tbs: Vec<Threadblock> = tb_keys
            .iter()
            .enumerate()
            .map(|(t, &(ch, send, recv))| {
                max_chan = max_chan.max(ch as usize);
                Threadblock {
                    id: new_id[t] as i64,
                    send,
                    recv,
                    chan: ch as i64,
                    steps: Vec::new(),
                    line: 0,
                }
            })
            .collect();
        tbs.sort_by_key(|t| t.id);
        for (t, steps) in tb_steps.iter().enumerate() {
            for (pos, &(kind, a, b)) in steps.iter().enumerate() {
                let oa = &rops[a];
                let mut st = Step::new(kind).count(oa.cnt as usize);
                st.s = pos as i64;
                match kind {
                    StepKind::RecvReduceSend => {
                        let (sb, so) = place(oa.src);
                        // dst is informational: where the peer puts it.
                        st = st.src(sb, so).dst(sb, so);
                        let _ = b;
                    }
                    StepKind::RecvReduceCopy | StepKind::Copy => {
                        let (sb, so) = place(oa.src);
                        let (db, dof) = place(oa.dst);
                        st = st.src(sb, so).dst(db, dof);
                    }
                    StepKind::Send => {
                        let (sb, so) = place(oa.src);
                        st = st.src(sb, so).dst(sb, so);
                    }
                    _ => {}
                }
                if let Some(&(dt, dp)) = dep_of.get(&(t, pos)) {
                    st.depid = dt as i64;
                    st.deps = dp as i64;
                }
                tbs[t].steps.push(st);
            }
        }
        // hasdep on every target.
        let targets: Vec<(usize, usize)> = dep_of.values().copied().collect();
        for (t, p) in targets {
            tbs[t].steps[p].hasdep = true;
        }
        gpus.push(GpuProgram {
            id: v as i64,
            i_chunks: total as i64,
            o_chunks: cps as i64,
            s_chunks: s_chunks as i64,
            tbs,
            line: 0,
        });
    }
    (gpus, max_chan)
}
