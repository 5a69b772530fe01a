//! Chains (items 2 and 3 of the module doc): per rank and run, the
//! operations the trees give, each keyed by its transfer (step,
//! send-or-receive, chunk, src, dst):
//! - reduce in-tree: receive-and-reduce each child's partial sum into an
//!   accumulator, then send it to the parent (a leaf just sends its input);
//! - copy out-tree: receive the chunk from the parent into its output slot
//!   (the owner copies its input there), then send it to each child. Each
//!   send is its own chain behind the receive (they wait for it, not for
//!   each other); with one child the receive and send fuse into `rcs`.
//!
//! An allreduce runs both per chunk: the broadcast receive follows the
//! rank's reduce send (under in-place aliasing it overwrites the input
//! that send read), and the owner's broadcast follows its reduction.

use super::runs::{chunks_per_block, Block, Runs};
use crate::ir::{Algorithm, Collective};
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
    /// Receive from `peer` into `dst`.
    Recv,
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
    /// Allreduce: per reduction run (its first block), the run's last
    /// reduce op, which the broadcast of the run's blocks follows, and
    /// the run's chain, which the first broadcast op may continue.
    /// Allgather: per owned block, the copy of the owner's input.
    run_tail: HashMap<usize, (usize, Vec<usize>)>,
    /// Per broadcast receive run (its first block), the receive.
    brecv: HashMap<usize, usize>,
    /// Dependencies off the chains, (op, the op it also waits for): a
    /// broadcast message over blocks that several reduction runs end, or
    /// that several receives (or the owner's copies) wrote.
    pub(super) joins: Vec<(usize, usize)>,
}

/// What building every chain of one lowering reads.
struct Ctx<'a> {
    blocks: &'a [Block],
    runs: &'a Runs,
    bruns: &'a Runs,
    cps: usize,
}

/// Chunks in blocks [rs, re).
fn chunks_of(blocks: &[Block], rs: usize, re: usize) -> u32 {
    blocks[rs..re].iter().map(|x| x.len as u32).sum()
}

/// The chains of ranks `ranks` (all blocks), one `RankChains` per rank.
pub(super) fn build(
    alg: &Algorithm,
    trees: &super::Trees,
    ranks: std::ops::Range<usize>,
) -> Vec<RankChains> {
    let (blocks, runs, bruns) = (trees.blocks, trees.runs, trees.bruns);
    let (per_chunk, per_bcast) = (trees.per_chunk, trees.per_bcast);
    // Per block: children and parent of every rank, as a CSR over the
    // block's transfers sorted by receiver (buffers reused across blocks).
    let spec = alg.spec;
    let n = spec.ranks;
    let total = spec.total_chunks();
    let cps = spec.chunks();
    let lo = ranks.start;
    let mut per_rank = vec![0usize; ranks.len()];
    for t in alg.edges() {
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
            run_tail: HashMap::default(),
            brecv: HashMap::default(),
            joins: Vec::new(),
        })
        .collect();
    let cx = Ctx {
        blocks,
        runs,
        bruns,
        cps,
    };
    let mut bkids: Vec<(usize, usize, usize, usize)> = Vec::new();
    let mut bkid_start = vec![0usize; n + 1];
    let mut bparent: Vec<Option<(usize, usize, usize)>> = vec![None; n];
    // Per rank: whether it forwards the block in its broadcast tree (read
    // only with relays in turn, for children outside `ranks`).
    let mut forwards = vec![false; if trees.relays_in_turn { n } else { 0 }];
    let mut by_dst: Vec<(usize, usize, usize, usize)> = Vec::new();
    let mut child_start = vec![0usize; n + 1];
    let mut parent: Vec<Option<(usize, usize, usize)>> = vec![None; n];
    // An allreduce's broadcast messages follow reductions of later
    // blocks too: every reduction first, then every broadcast.
    let passes = if spec.coll == Collective::AllReduce {
        2
    } else {
        1
    };
    for (pass, (bi, b)) in (0..passes).flat_map(|p| blocks.iter().enumerate().map(move |x| (p, x)))
    {
        // The reduce in-tree: per rank its children (dst, step, src,
        // channel) and its parent edge; the copy out-tree: per rank its
        // children (src, step, dst, channel) and its parent edge. Each
        // only in the pass that reads it.
        if pass == 0 {
            tree_csr(
                &trees.frame,
                &ranks,
                &per_chunk[b.start],
                true,
                &mut by_dst,
                &mut child_start,
                &mut parent,
            );
        }
        if pass + 1 == passes {
            tree_csr(
                &trees.frame,
                &ranks,
                &per_bcast[b.start],
                false,
                &mut bkids,
                &mut bkid_start,
                &mut bparent,
            );
            if trees.relays_in_turn {
                forwards.iter_mut().for_each(|f| *f = false);
                for &(src, _, _, _) in &per_bcast[b.start] {
                    forwards[src] = true;
                }
            }
        }
        for v in ranks.clone() {
            let children = || &by_dst[child_start[v]..child_start[v + 1]];
            let rc = &mut out[v - lo];
            match spec.coll {
                Collective::ReduceScatter => rc.push_run(&cx, v, bi, children(), parent[v], false),
                Collective::AllReduce if pass == 0 => {
                    rc.push_run(&cx, v, bi, children(), parent[v], true)
                }
                Collective::AllGather | Collective::AllReduce => {
                    let kids = &bkids[bkid_start[v]..bkid_start[v + 1]];
                    // Children that forward the block: their own children
                    // in its tree.
                    let relays = |u: usize| forwards[u];
                    let in_turn = trees
                        .relays_in_turn
                        .then_some(&relays as &dyn Fn(usize) -> bool);
                    let reduce = spec.coll == Collective::AllReduce;
                    rc.push_bcast(&cx, v, bi, bparent[v], kids, in_turn, reduce)
                }
            }
        }
    }
    out
}

/// One tree's edges (src, dst, step, channel) grouped by the rank they
/// meet at — the receiver for an in-tree (`by_dst`), the sender for an
/// out-tree — into `list` as (that rank, step, the other rank, channel),
/// sorted with the other rank as that rank's `Frame` numbers it, with
/// `start[v]..start[v + 1]` rank v's; and per rank its own edge toward
/// that rank (rank, step, channel) in `link`. Only the lists and links
/// of `ranks` are filled (the edges that meet none of them are left
/// out, which at a thousand ranks is most of each tree).
fn tree_csr(
    frame: &super::Frame,
    ranks: &std::ops::Range<usize>,
    edges: &[(usize, usize, usize, usize)],
    by_dst: bool,
    list: &mut Vec<(usize, usize, usize, usize)>,
    start: &mut [usize],
    link: &mut [Option<(usize, usize, usize)>],
) {
    list.clear();
    list.extend(
        edges
            .iter()
            .map(|&(src, dst, step, ch)| {
                if by_dst {
                    (dst, step, src, ch)
                } else {
                    (src, step, dst, ch)
                }
            })
            .filter(|&(at, _, other, _)| ranks.contains(&at) || ranks.contains(&other)),
    );
    list.sort_unstable_by_key(|&(at, step, other, ch)| (at, step, frame.rank(at, other), ch));
    start.iter_mut().for_each(|x| *x = 0);
    link.iter_mut().for_each(|x| *x = None);
    for &(at, step, other, ch) in list.iter() {
        start[at + 1] += 1;
        link[other] = Some((at, step, ch));
    }
    for v in 0..start.len() - 1 {
        start[v + 1] += start[v];
    }
}

impl RankChains {
    /// A broadcast send of `cnt` chunks from `c0` (output slots) to `dst`.
    fn bsend(v: u32, c0: u32, step: usize, dst: usize, ch: usize, cnt: u32) -> Op {
        Op {
            kind: OpKind::Send,
            key: (step as u32, 0, c0, v, dst as u32),
            chan: ch as u32,
            peer: dst as u32,
            src: Slot::Out(c0),
            dst: Slot::Out(c0),
            cnt,
        }
    }

    /// Rank v's broadcast for block `bi`, in an allreduce (`reduce`) once
    /// every reduction is built:
    /// 1. at the first block of v's reduction run, that run's chain (an
    ///    allgather: at the owner, the copy of its input to its output);
    /// 2. at the first block of v's broadcast receive run, the receive
    ///    from `bparent` (src, step, channel) of the whole run, in an
    ///    allreduce after the last reduce op of every reduction run it
    ///    overlaps (the receive overwrites, in place, the input those
    ///    sends read);
    /// 3. per child in `bkids` (src, step, dst, channel), the send of the
    ///    child's receive run, after whatever wrote each of its blocks at
    ///    v: v's receive of the run holding it, or at the owner its
    ///    reduction (the copy). It is made at the first block of the
    ///    child's run where those exist: there, or where an allgather's
    ///    run spans shards v received in later runs or owns, at the last
    ///    of them.
    ///
    /// The first op of 2 or 3 that moves exactly the range of the op
    /// before it continues that op's chain (so a reduction's last receive
    /// and its send, or a receive and its send, may fuse); every other is
    /// a chain of its own behind its first predecessor, and further
    /// predecessors are `joins`. With `in_turn` (which children relay the
    /// block), the sends to relays come first, each after the one before
    /// ([`LowerOptions::relays_in_turn`](super::LowerOptions)).
    #[allow(clippy::too_many_arguments)]
    fn push_bcast(
        &mut self,
        cx: &Ctx,
        v: usize,
        bi: usize,
        bparent: Option<(usize, usize, usize)>,
        bkids: &[(usize, usize, usize, usize)],
        in_turn: Option<&dyn Fn(usize) -> bool>,
        reduce: bool,
    ) {
        let blocks = cx.blocks;
        let vv = v as u32;
        // 1. `open` is the reduction's chain (the copy's) while it may
        // continue.
        let mut open = None;
        if reduce {
            if let Some((_, chain)) = self.run_tail.get_mut(&bi) {
                let chain = std::mem::take(chain);
                open = Some(self.chain_ops.len());
                self.chain_ops.extend(chain);
            }
        } else if v == blocks[bi].owner {
            let b = &blocks[bi];
            let c0 = b.start as u32;
            open = Some(self.chain_ops.len());
            let id = self.ops.len();
            let own = Slot::In(c0 - (v * cx.cps) as u32);
            self.push_copy(vv, c0, own, Slot::Out(c0), b.len as u32);
            self.run_tail.insert(bi, (id, Vec::new()));
        }
        // The distinct reduction tails of blocks [a, b), in order.
        let tails = |me: &Self, a: usize, b: usize| -> Vec<usize> {
            let mut out: Vec<usize> = Vec::new();
            let mut x = a;
            while x < b {
                let (s, e) = cx.runs.run(v, x);
                out.push(me.run_tail[&s].0);
                x = e;
            }
            out
        };
        // What wrote blocks [a, b) at v, in order, and the block at which
        // the last of them exists.
        let writers = |me: &Self, a: usize, b: usize| -> (Vec<usize>, usize) {
            let mut out: Vec<usize> = Vec::new();
            let mut ready = a;
            let mut x = a;
            while x < b {
                let (id, next) = if blocks[x].owner == v {
                    let (s, e) = cx.runs.run(v, x);
                    if !reduce {
                        ready = ready.max(x);
                    }
                    (me.run_tail.get(&s).map(|t| t.0), e)
                } else {
                    let (s, e) = cx.bruns.run(v, x);
                    ready = ready.max(s);
                    (me.brecv.get(&s).copied(), e)
                };
                if let Some(id) = id.filter(|id| !out.contains(id)) {
                    out.push(id);
                }
                x = next;
            }
            (out, ready)
        };
        // 2. The receive.
        let (ra, rb) = cx.bruns.run(v, bi);
        if let Some((src, step, ch)) = bparent.filter(|_| ra == bi) {
            let c0 = blocks[ra].start as u32;
            let cnt = chunks_of(blocks, ra, rb);
            let op = Op {
                kind: OpKind::Recv,
                key: (step as u32, 1, c0, src as u32, vv),
                chan: ch as u32,
                peer: src as u32,
                src: Slot::Out(c0),
                dst: Slot::Out(c0),
                cnt,
            };
            let preds = if reduce {
                tails(self, ra, rb)
            } else {
                Vec::new()
            };
            let id = self.place(op, &preds, true, &mut open);
            self.brecv.insert(ra, id);
        }
        // 3. The sends (to relays first when in turn; stable, so each
        // group keeps (step, dst) order).
        let mut order: Vec<&(usize, usize, usize, usize)> = bkids.iter().collect();
        if let Some(relays) = in_turn {
            order.sort_by_key(|&&(_, _, dst, _)| !relays(dst));
        }
        // The last send to a relay, with its predecessors.
        let mut last_relay: Option<(usize, Vec<usize>)> = None;
        for &&(_, step, dst, ch) in &order {
            let (ka, kb) = cx.bruns.run(dst, bi);
            let (mut preds, ready) = writers(self, ka, kb);
            if ready != bi {
                continue;
            }
            debug_assert!(
                !preds.is_empty(),
                "rank {v} sends blocks {ka}..{kb} it has not"
            );
            let c0 = blocks[ka].start as u32;
            let cnt = chunks_of(blocks, ka, kb);
            let op = Self::bsend(vv, c0, step, dst, ch, cnt);
            // It moves exactly what its one predecessor wrote.
            let mut same = preds.len() == 1
                && if blocks[ka].owner == v {
                    kb == ka + 1
                } else {
                    cx.bruns.run(v, ka) == (ka, kb)
                };
            let relay = in_turn.is_some_and(|relays| relays(dst));
            let own = preds.clone();
            if let Some((prev, prev_preds)) = last_relay.as_ref().filter(|_| relay) {
                // After the previous relay's send, which already waited
                // for the same predecessors (any others join).
                preds.retain(|p| !prev_preds.contains(p));
                preds.insert(0, *prev);
                same = true;
            }
            let id = self.place(op, &preds, same, &mut open);
            if relay {
                last_relay = Some((id, own));
            }
        }
        if let Some(start) = open {
            self.chains.push(start..self.chain_ops.len());
        }
    }

    /// Push `op` after `preds` (the first on its chain, the rest as
    /// `joins`): it continues the open chain (`open`, its start) when
    /// `same` (it moves the range of the chain's last op) and that op is
    /// its first predecessor; otherwise the open chain closes and `op`
    /// heads a chain of its own behind that predecessor (or with none,
    /// first in it). `op`'s chain is left open. Returns `op`'s id.
    fn place(&mut self, op: Op, preds: &[usize], same: bool, open: &mut Option<usize>) -> usize {
        let id = self.ops.len();
        let continues = same && !preds.is_empty() && preds.first() == self.chain_ops.last();
        match open.take() {
            Some(start) if continues => {
                self.push_op(op);
                *open = Some(start);
            }
            o => {
                if let Some(start) = o {
                    self.chains.push(start..self.chain_ops.len());
                }
                let s = self.chain_ops.len();
                if let Some(&p) = preds.first() {
                    self.chain_ops.push(p);
                }
                self.push_op(op);
                *open = Some(s);
            }
        }
        self.joins.extend(preds.iter().skip(1).map(|&p| (id, p)));
        id
    }

    fn push_op(&mut self, op: Op) {
        self.chain_ops.push(self.ops.len());
        self.ops.push(op);
    }

    fn push_copy(&mut self, v: u32, c0: u32, src: Slot, dst: Slot, cnt: u32) {
        self.push_op(Op {
            kind: OpKind::Copy,
            key: (0, 0, c0, v, v),
            chan: 0,
            peer: v,
            src,
            dst,
            cnt,
        });
    }

    /// Rank v's reduction chain for its run containing block `bi`, built
    /// at the run's first block (elsewhere nothing): `children` are v's
    /// children (dst, step, src, channel) in block bi's tree, `parent` its
    /// parent edge (dst, step, channel). The owner's accumulator is its
    /// output shard, or in an allreduce (`allreduce`) o at the global
    /// chunk index, whose chain is kept for [`RankChains::push_bcast`].
    fn push_run(
        &mut self,
        cx: &Ctx,
        v: usize,
        bi: usize,
        children: &[(usize, usize, usize, usize)],
        parent: Option<(usize, usize, usize)>,
        allreduce: bool,
    ) {
        let shard = if allreduce { 0 } else { (v * cx.cps) as u32 };
        let Some(start) = self.push_reduce(cx, v, bi, children, parent, |c| c - shard) else {
            return;
        };
        if allreduce {
            let chain: Vec<usize> = self.chain_ops.drain(start..).collect();
            let tail = *chain.last().expect("a reduction op");
            self.run_tail.insert(bi, (tail, chain));
        } else {
            self.chains.push(start..self.chain_ops.len());
        }
    }

    /// The reduction ops of rank v's run containing block `bi` (see
    /// [`RankChains::push_run`]), the owner's accumulator being its output
    /// chunk `out(c)` for global chunk c; the start of the chain they begin
    /// in `chain_ops`, which the caller closes (None off the run's first
    /// block).
    fn push_reduce(
        &mut self,
        cx: &Ctx,
        v: usize,
        bi: usize,
        children: &[(usize, usize, usize, usize)],
        parent: Option<(usize, usize, usize)>,
        out: impl Fn(u32) -> u32,
    ) -> Option<usize> {
        let (blocks, runs) = (cx.blocks, cx.runs);
        let b = &blocks[bi];
        // v's chain for a run is built at the run's first block.
        let (rs, re) = runs.run(v, bi);
        if rs != bi {
            return None;
        }
        let ops = &mut self.ops;
        let (cops, shared) = (&mut self.chain_ops, &mut self.shared);
        // Sizes fit u32: chunks per loop ≤ 32767 (MSCCL's offsets), and
        // ranks, steps and channels are far below 2³².
        let c0 = b.start as u32;
        let cnt = chunks_of(blocks, rs, re);
        let chain_start = cops.len();
        let is_root = v == b.owner;
        // Where some rank's message carries this owner's partial sums
        // together with another owner's, the owner receives them into
        // scratch like everyone else, and only its last receive (or a copy
        // after it) writes the output.
        let root_scratch = is_root && runs.mixed(v);
        let acc_at = |c: u32| {
            if is_root && !root_scratch {
                Slot::Out(out(c))
            } else {
                Slot::Acc(c)
            }
        };
        let acc = acc_at(c0);
        let vv = v as u32;
        let last = children.len().saturating_sub(1);
        let mut copy_out = None;
        for (j, &(_, step, src, ch)) in children.iter().enumerate() {
            let (cs, ce) = runs.run(src, bi);
            if (cs, ce) == (rs, re) {
                let dst = if root_scratch && j == last {
                    Slot::Out(out(c0))
                } else {
                    acc
                };
                cops.push(ops.len());
                ops.push(Op {
                    kind: OpKind::RecvReduce,
                    key: (step as u32, 1, c0, src as u32, vv),
                    chan: ch as u32,
                    peer: src as u32,
                    src: if j == 0 { Slot::In(c0) } else { acc },
                    dst,
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
                    chan: ch as u32,
                    peer: src as u32,
                    src: if j == 0 { Slot::In(s0) } else { acc_at(s0) },
                    dst: acc_at(s0),
                    cnt: chunks_of(blocks, cs, ce),
                });
                ops.len() - 1
            });
            cops.push(id);
            if root_scratch && j == last {
                copy_out = Some(step as u32);
            }
        }
        if let Some(step) = copy_out {
            cops.push(ops.len());
            ops.push(Op {
                kind: OpKind::Copy,
                key: (step, 2, c0, vv, vv),
                chan: 0,
                peer: vv,
                src: acc,
                dst: Slot::Out(out(c0)),
                cnt,
            });
        }
        if let Some((dst, step, ch)) = parent {
            cops.push(ops.len());
            ops.push(Op {
                kind: OpKind::Send,
                key: (step as u32, 0, c0, vv, dst as u32),
                chan: ch as u32,
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
                dst: Slot::Out(out(c0)),
                cnt,
            });
        }
        Some(chain_start)
    }
}
