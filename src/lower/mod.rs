//! Lowering: Algorithm (per-chunk reduce and copy trees) → Program (MSCCL
//! threadblocks, channels, steps, dependencies).
//!
//! One mechanism does it all (docs/architecture.md "Lowering"):
//! 1. chunks whose trees are identical and whose indices are consecutive
//!    form a *block* that moves as one multi-chunk step (`cnt` > 1); and
//!    per rank, consecutive blocks (of one owner or several) in which that
//!    rank's whole reduce subtree is identical form a *run* it moves as
//!    one message (its receives, reduction and send once for the run).
//!    The receiver of such a message may split the run further — a
//!    receive then spans several of its chains and must head them all or
//!    follow one op they share, else the sender's run is cut there too
//!    (`Runs`). A broadcast has runs of its own: an allgather's
//!    (`Runs::edges`) are the consecutive blocks a rank receives over one
//!    edge, which its parent sends once it has them all; an allreduce's
//!    (`Runs::broadcast`) those of one owner whose path from the owner
//!    agrees, nested in the parent's (by edge with `bcast_edges`). Both
//!    matter where the two trees of a chunk change at different chunks —
//!    a pair of two synthesizers' halves — which cuts the blocks at both
//!    halves' boundaries: each half still moves its own messages;
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
//!    dependency (`hasdep` on the target); an operation that waits on
//!    several (a broadcast message over blocks that several reductions
//!    end) gets a `nop` in front of it per extra one, as MSCCL steps wait
//!    on one dependency each;
//! 6. MSCCL limits: when a threadblock would exceed the runtime's steps per
//!    threadblock, every connection's messages are split in key order into
//!    groups of at most G (group g of logical channel l on channel
//!    g · logical channels + l: `regroup`), starting from G = the steps
//!    per threadblock, and lowering retries with a smaller G while a
//!    threadblock is still over; a connection's groups run in order
//!    (`chain_groups`); more than 32 channels is an error. A connection
//!    takes as many channels as its own messages need, whatever the
//!    others carry and wherever its steps lie;
//! 7. for a runtime without fused steps (RCCL), every `rrc`, `rrs`, `rcs`
//!    and `rrcs` is rewritten with `r`, `re`, `cpy` and `s` (`reduced`)
//!    before the limits of item 6 are checked; where the threadblock
//!    budget allows, a threadblock that reduces and forwards gives its
//!    sends to a threadblock of their own, so that its next receive and
//!    reduction overlap the previous send.

mod chains;
mod reduced;
mod runs;
mod stagger;
mod steps;
mod threadblocks;

use crate::ir::{Algorithm, Collective, GpuProgram, Program, Proto, Runtime};
use chains::RankChains;
pub use reduced::fused_len;
use runs::{Block, Runs};
use rustc_hash::FxHashMap as HashMap;
pub use stagger::{stagger, stagger_waits};

use crate::ir::msccl::MAX_CHANNELS;

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
    /// A broadcast moves, per rank, one message over consecutive blocks:
    /// an allgather's (and with `bcast_edges` an allreduce's) those it
    /// receives over the same edge, whatever their owners or the rest of
    /// their trees (a tree's pieces, a butterfly's shards), its parent
    /// sending it once it has them all; an allreduce's those of one owner
    /// whose path from the owner agrees (blocks the reduction's trees
    /// split: a pair of two synthesizers' halves), which nest in its
    /// parent's. Without, it moves block by block: more, smaller
    /// messages, which a rank forwards sooner (`auto` scores both).
    pub bcast_runs: bool,
    /// An allreduce's broadcast runs by edge, as an allgather's (fewer,
    /// larger messages than by path; `auto` scores both where they
    /// differ).
    pub bcast_edges: bool,
    /// Threadblocks per rank the program may use (the compile's budget).
    /// A runtime without fused steps spends what the lowering leaves of
    /// it on send threadblocks (`reduced`); the runtime's own limit
    /// applies as well.
    pub max_tbs: usize,
    /// For a runtime without fused steps: give a threadblock that
    /// reduces and forwards a send threadblock of its own where `max_tbs`
    /// allows (`reduced`). `auto` scores RCCL candidates both ways.
    pub send_tbs: bool,
    /// For a runtime without fused steps: start each channel one step
    /// after the channel below on the same connections, so that one
    /// channel's local passes overlap another's transfers (`stagger`).
    /// `auto` scores RCCL candidates both ways.
    pub stagger: bool,
    /// Allgather and an allreduce's broadcast: a rank sends a chunk to
    /// its children that forward it
    /// (inner nodes of the chunk's broadcast tree) one after another, in
    /// step order, and to its leaves side by side behind its receive.
    /// Where relays share the sender's link (an owner's rail peers on
    /// several hosts), the first relay then has the whole tile a share of
    /// the time earlier and forwards it while the next one arrives,
    /// instead of every relay getting its tile at the end (`auto` scores
    /// such candidates both ways; docs/architecture.md "Lowering").
    pub relays_in_turn: bool,
    /// Ranks per host on a machine of identical hosts whose ranks are
    /// numbered host by host (0: none, one host). Where the lowering
    /// breaks a tie by rank or chunk numbers, it reads them relative to
    /// the first rank of a host (`Frame`), so a schedule that is the
    /// same on every host up to the shift from one host to the next lowers
    /// to a program that is too, which the simulator runs as one host's
    /// (src/sim/fold.rs).
    pub host_ranks: usize,
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
            bcast_runs: true,
            bcast_edges: false,
            max_tbs: usize::MAX,
            send_tbs: true,
            stagger: false,
            relays_in_turn: false,
            host_ranks: 0,
        }
    }
}

/// Rank and chunk numbers as the lowering compares them: relative to the
/// first rank of a host (`LowerOptions::host_ranks`), modulo the ranks
/// (chunks), so that hosts alike compare alike. Without hosts every base
/// is 0 and the numbers are the ranks' own.
#[derive(Debug, Clone, Copy)]
pub(super) struct Frame {
    n: usize,
    /// Ranks per host (n without hosts).
    period: usize,
    /// Chunks per rank's shard.
    cps: usize,
}

impl Frame {
    fn new(n: usize, host_ranks: usize, cps: usize) -> Frame {
        let period = if host_ranks > 0 && n.is_multiple_of(host_ranks) {
            host_ranks
        } else {
            n.max(1)
        };
        Frame {
            n: n.max(1),
            period,
            cps: cps.max(1),
        }
    }
    /// The first rank of `v`'s host.
    pub(super) fn base(&self, v: usize) -> usize {
        v - v % self.period
    }
    /// Rank `p` seen from the host of rank `v`.
    pub(super) fn rank(&self, v: usize, p: usize) -> usize {
        (p + self.n - self.base(v)) % self.n
    }
    /// Chunk `c` seen from the host of rank `v`.
    pub(super) fn chunk(&self, v: usize, c: usize) -> usize {
        let total = self.n * self.cps;
        (c + total - self.base(v) * self.cps % total) % total
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
    /// Its first ranks, lowered alone, already need more threadblocks
    /// than [`LowerOptions::max_tbs`] (from 256 ranks on, the first 8).
    #[error("at least {at_least} threadblocks per rank exceed {max}")]
    Threadblocks { at_least: usize, max: usize },
}

/// Ranks from which a lowering first lowers a few alone, to refuse early
/// what needs more threadblocks than `max_tbs` (a rank's threadblocks
/// come from its own steps, so the most of some ranks' bounds the
/// program's): at 1024 GPUs one lowering takes 0.2–0.7 s, and `hier`'s
/// wider trees are refused after it. Below this, every program is
/// lowered whole, as a search scores a plan over the budget by its
/// excess.
const PROBE_MIN_RANKS: usize = 256;

/// Ranks lowered first, from rank 0: one host of eight GPUs.
const PROBE_RANKS: usize = 8;

impl LowerError {
    /// Whether the Algorithm is valid but does not fit the runtime.
    pub fn is_limit(&self) -> bool {
        !matches!(self, LowerError::Algorithm(_))
    }
}

/// Lower an Algorithm into a Program that fits `opts.runtime`'s limits.
pub fn lower(alg: &Algorithm, opts: &LowerOptions) -> Result<Program, LowerError> {
    let max_steps = opts.runtime.max_steps();
    let nlogical = alg.num_channels().max(1);
    // Messages per connection, at least: a message moves at most a
    // shard's chunks, all at one step, so a connection has at least
    // ⌈k / chunks per shard⌉ of them for k transfers, and one per step it
    // sends at.
    let mut per_conn: HashMap<(usize, usize, usize), Vec<usize>> = HashMap::default();
    for t in alg.edges() {
        per_conn
            .entry((t.src, t.dst, t.channel))
            .or_default()
            .push(t.step);
    }
    let cps = alg.spec.chunks().max(1);
    let per_conn: Vec<usize> = per_conn
        .into_values()
        .map(|mut steps| {
            let k = steps.len();
            steps.sort_unstable();
            steps.dedup();
            steps.len().max(k.div_ceil(cps))
        })
        .collect();
    // Skip the ungrouped attempt when some connection alone would carry
    // more messages than a threadblock may have steps.
    let crowded = per_conn.iter().any(|&k| k > max_steps);
    let first = max_steps.max(1);
    let mut group = if crowded { first } else { usize::MAX };
    // The tree check runs once the channel count may fit (it is
    // O(transfers); a candidate that cannot fit fails fast without it).
    let mut checked = false;
    loop {
        // Channels needed at least with this group size.
        let groups = per_conn
            .iter()
            .map(|&k| k.div_ceil(group))
            .max()
            .unwrap_or(1);
        let need = nlogical * groups.max(1);
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
        let prog = lower_grouped(alg, opts, group)?;
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
            let mut prog = prog;
            dependency_targets_first(&mut prog);
            return Ok(prog);
        }
        if group <= 1 {
            return Err(LowerError::Steps {
                steps: longest,
                max_steps,
            });
        }
        // Next group size: what makes the longest TB fit, roughly.
        let next = if group == usize::MAX {
            first
        } else {
            group * max_steps / (longest + 1)
        };
        group = next.min(group - 1).max(1);
    }
}

/// A dependency names its threadblock in an int8 (ids up to
/// [`MAX_DEP_TARGET_TB`](crate::ir::msccl::MAX_DEP_TARGET_TB)). Where a
/// rank has more threadblocks than that and some step waits on one above
/// it, the rank's threadblocks are renumbered with every threadblock some
/// step waits on first, each group in its order (an id only names a
/// threadblock: the runtime launches one block per id and reads its
/// channel and peers from the threadblock). Other ranks, and programs
/// whose targets are all low, are left as they are.
fn dependency_targets_first(prog: &mut Program) {
    let max = crate::ir::msccl::MAX_DEP_TARGET_TB as i64;
    for g in &mut prog.gpus {
        let steps = || g.tbs.iter().flat_map(|t| t.steps.iter());
        if !steps().any(|s| s.depid > max) {
            continue;
        }
        let n = g.tbs.len();
        let mut target = vec![false; n];
        for s in steps() {
            if let Ok(d) = usize::try_from(s.depid) {
                target[d] = true;
            }
        }
        let order = (0..n)
            .filter(|&i| target[i])
            .chain((0..n).filter(|&i| !target[i]));
        let mut id = vec![0i64; n];
        for (k, i) in order.enumerate() {
            id[i] = k as i64;
        }
        for t in &mut g.tbs {
            t.id = id[t.id as usize];
            for s in &mut t.steps {
                if let Ok(d) = usize::try_from(s.depid) {
                    s.depid = id[d];
                }
            }
        }
        g.tbs.sort_by_key(|t| t.id);
    }
}

/// How `alg`'s broadcast runs (`LowerOptions::bcast_runs`) compare, as
/// (by edge they merge some blocks, by edge they differ from by path): an
/// allgather's are by edge; where they merge nothing, lowering block by
/// block gives the same program, and where an allreduce's by edge equal
/// its by path, so does `bcast_edges`.
pub fn broadcast_runs(alg: &Algorithm) -> (bool, bool) {
    let spec = alg.spec;
    if spec.coll == Collective::ReduceScatter {
        return (false, false);
    }
    let total = spec.total_chunks();
    let per_chunk = runs::per_chunk(&alg.transfers, total);
    let per_bcast = runs::per_chunk(&alg.bcast, total);
    let blocks = runs::blocks(spec, &per_chunk, &per_bcast);
    let n = spec.ranks;
    let edges = Runs::edges(n, &blocks, &per_bcast);
    let differ = spec.coll == Collective::AllReduce
        && !edges.same_as(&Runs::broadcast(n, &blocks, &per_bcast), n, blocks.len());
    (edges.merges(), differ)
}

/// Lower with every connection's messages in groups of at most `group`
/// (usize::MAX: one group), group g of logical channel l on MSCCL
/// channel g · logical channels + l.
fn lower_grouped(
    alg: &Algorithm,
    opts: &LowerOptions,
    group: usize,
) -> Result<Program, LowerError> {
    let spec = alg.spec;
    let n = spec.ranks;
    let total = spec.total_chunks();
    let nlogical = alg.num_channels().max(1);

    let per_chunk = runs::per_chunk(&alg.transfers, total);
    let per_bcast = runs::per_chunk(&alg.bcast, total);
    let blocks = runs::blocks(spec, &per_chunk, &per_bcast);
    // A reduction's message spans the blocks in which a rank's whole
    // reduce subtree agrees (whatever the blocks' broadcast trees); a
    // broadcast's, those a rank receives over one edge, unless asked not
    // to.
    let runs = if spec.coll.reduces() {
        Runs::new(n, &blocks, &per_chunk)
    } else {
        Runs::blocks_only()
    };
    let bruns = match spec.coll {
        _ if !opts.bcast_runs => Runs::blocks_only(),
        Collective::AllReduce if !opts.bcast_edges => Runs::broadcast(n, &blocks, &per_bcast),
        Collective::AllReduce | Collective::AllGather => Runs::edges(n, &blocks, &per_bcast),
        Collective::ReduceScatter => Runs::blocks_only(),
    };
    let trees = Trees {
        frame: Frame::new(n, opts.host_ranks, spec.chunks()),
        blocks: &blocks,
        runs: &runs,
        bruns: &bruns,
        per_chunk: &per_chunk,
        per_bcast: &per_bcast,
        relays_in_turn: opts.relays_in_turn && spec.coll != Collective::ReduceScatter,
    };
    let grouping = (nlogical, group);
    // At scale the first ranks go first, alone: over the budget, the rest
    // is not lowered; within it, they are the program's first ranks.
    let probe = (n >= PROBE_MIN_RANKS && opts.max_tbs < usize::MAX)
        .then(|| lower_ranks(alg, &trees, grouping, 0..PROBE_RANKS));
    if let Some((first, _)) = &probe {
        let most = first.iter().map(|g| g.tbs.len()).max().unwrap_or(0);
        if most > opts.max_tbs {
            return Err(LowerError::Threadblocks {
                at_least: most,
                max: opts.max_tbs,
            });
        }
    }
    // Ranks are independent: lower contiguous ranges of the rest on the
    // available cores (large programs only).
    let done = if probe.is_some() { PROBE_RANKS } else { 0 };
    let ranges: Vec<std::ops::Range<usize>> = crate::par::ranges(n - done, 64)
        .into_iter()
        .map(|r| r.start + done..r.end + done)
        .collect();
    let parts = crate::par::map(&ranges, |r| lower_ranks(alg, &trees, grouping, r.clone()));
    let mut gpus = Vec::with_capacity(n);
    let mut max_chan = 0usize;
    for (g, m) in probe.into_iter().chain(parts) {
        gpus.extend(g);
        max_chan = max_chan.max(m);
    }
    let mut prog = Program {
        name: opts.name.clone(),
        proto: opts.proto,
        coll: spec.coll,
        runtime: opts.runtime,
        nchannels: max_chan as i64 + 1,
        nchunksperloop: total as i64,
        ngpus: n as i64,
        inplace: opts.inplace,
        outofplace: opts.outofplace,
        min_bytes: opts.min_bytes,
        max_bytes: Some(opts.max_bytes),
        gpus,
    };
    if max_chan >= nlogical {
        chain_groups(&mut prog, nlogical);
    }
    if !opts.runtime.fused_steps() {
        let tbs = if opts.send_tbs {
            opts.max_tbs.min(opts.runtime.max_tb_id())
        } else {
            0
        };
        reduced::rewrite(&mut prog, tbs);
        if opts.stagger {
            stagger::stagger(&mut prog);
        }
    }
    Ok(prog)
}

/// Rank `v`'s op keys with their chunk and ranks seen from the host of
/// the message's sender (`v` for its sends and copies, the peer for its
/// receives): both ends of a connection sort its messages alike, and
/// hosts alike sort alike.
fn relative_keys(ops: &mut [chains::Op], v: usize, frame: &Frame) {
    for o in ops.iter_mut() {
        let from = if o.kind == chains::OpKind::Recv || o.kind == chains::OpKind::RecvReduce {
            o.peer as usize
        } else {
            v
        };
        let (step, dir, c, a, b) = o.key;
        o.key = (
            step,
            dir,
            frame.chunk(from, c as usize) as u32,
            frame.rank(from, a as usize) as u32,
            frame.rank(from, b as usize) as u32,
        );
    }
}

/// Put every connection's messages (per rank: its sends to one peer, or
/// its receives from one, on one logical channel) in groups of at most
/// `group` in key order, group g on channel g · `nlogical` + the logical
/// channel. Both ends of a connection list its messages in the same key
/// order, so they agree on every message's channel.
fn regroup(ops: &mut [chains::Op], nlogical: usize, group: usize) {
    use chains::OpKind;
    if group == usize::MAX {
        return;
    }
    let mut by_conn: HashMap<(u32, u32, bool), Vec<usize>> = HashMap::default();
    for (i, o) in ops.iter().enumerate() {
        if o.kind != OpKind::Copy {
            by_conn
                .entry((o.chan, o.peer, o.kind == OpKind::Send))
                .or_default()
                .push(i);
        }
    }
    for list in by_conn.values_mut() {
        list.sort_unstable_by_key(|&i| ops[i].key);
        for (j, &i) in list.iter().enumerate() {
            let g = (j / group) as u32;
            ops[i].chan += g * nlogical as u32;
        }
    }
}

/// Each connection's groups run one after the other: a threadblock's
/// first send on group g ≥ 1 of a connection waits for the last send of
/// group g − 1 (the threadblock on the channel `nlogical` lower with the
/// same send peer). Without it every group's threadblock starts at once,
/// so later groups' transfers share the links with the first group's and
/// delay what the next phase needs first (on 128 × DGX-H100 the rail
/// sends waited for the whole intra-host phase: 71 % of the bound at
/// 1 GiB instead of 99 %). The edge joins two sends of one connection in
/// its key order, so the dependency order stays acyclic; a send that
/// already waits on something gets a `nop` in front that carries the
/// group edge (MSCCL's one dependency per step). Receives need no edge:
/// their data arrives in the sender's order.
fn chain_groups(prog: &mut Program, nlogical: usize) {
    use crate::ir::{Step, StepKind};
    let nl = nlogical as i64;
    for g in &mut prog.gpus {
        let by_send: HashMap<(i64, i64), usize> = g
            .tbs
            .iter()
            .enumerate()
            .filter(|(_, t)| t.send >= 0)
            .map(|(i, t)| ((t.chan, t.send), i))
            .collect();
        for b in 0..g.tbs.len() {
            let (chan, send) = (g.tbs[b].chan, g.tbs[b].send);
            if send < 0 || chan < nl {
                continue;
            }
            let Some(&a) = by_send.get(&(chan - nl, send)) else {
                continue;
            };
            let Some(last) = g.tbs[a].steps.iter().rposition(|s| s.kind.sends()) else {
                continue;
            };
            let Some(j) = g.tbs[b].steps.iter().position(|s| s.kind.sends()) else {
                continue;
            };
            let dep_id = g.tbs[a].id;
            g.tbs[a].steps[last].hasdep = true;
            let step = &mut g.tbs[b].steps[j];
            if step.depid < 0 {
                step.depid = dep_id;
                step.deps = last as i64;
                continue;
            }
            let mut nop = Step::new(StepKind::Nop).count(0);
            nop.depid = dep_id;
            nop.deps = last as i64;
            let id = g.tbs[b].id;
            g.tbs[b].steps.insert(j, nop);
            for (i, s) in g.tbs[b].steps.iter_mut().enumerate() {
                s.s = i as i64;
            }
            // Steps that wait on this threadblock's steps from j on now
            // wait one later.
            for t in &mut g.tbs {
                for s in &mut t.steps {
                    if s.depid == id && s.deps >= j as i64 {
                        s.deps += 1;
                    }
                }
            }
        }
    }
}

/// The blocks, runs and per-chunk trees (reduce and copy edges as (src,
/// dst, step, channel)) every rank's lowering reads.
struct Trees<'a> {
    frame: Frame,
    blocks: &'a [Block],
    runs: &'a Runs,
    bruns: &'a Runs,
    per_chunk: &'a [Vec<(usize, usize, usize, usize)>],
    per_bcast: &'a [Vec<(usize, usize, usize, usize)>],
    /// [`LowerOptions::relays_in_turn`].
    relays_in_turn: bool,
}

/// Lower ranks `ranks` (all blocks): their threadblocks, and the largest
/// channel they use.
fn lower_ranks(
    alg: &Algorithm,
    t: &Trees,
    grouping: (usize, usize),
    ranks: std::ops::Range<usize>,
) -> (Vec<GpuProgram>, usize) {
    let spec = alg.spec;
    let bufs = spec.coll.buffers(spec.total_chunks(), spec.ranks);
    let mut rank_chains = chains::build(alg, t, ranks.clone());
    for (v, rc) in ranks.clone().zip(&mut rank_chains) {
        relative_keys(&mut rc.ops, v, &t.frame);
        regroup(&mut rc.ops, grouping.0, grouping.1);
    }
    let mut gpus = Vec::with_capacity(ranks.len());
    let mut max_chan = 0usize;
    for (v, rc) in ranks.zip(&rank_chains) {
        let (gpu, m) = lower_rank(v, rc, bufs, &t.frame);
        max_chan = max_chan.max(m);
        gpus.push(gpu);
    }
    (gpus, max_chan)
}

/// Rank v's program from its chains (`bufs` its buffers), and the
/// largest channel it uses.
fn lower_rank(
    v: usize,
    rc: &RankChains,
    bufs: crate::ir::spec::Buffers,
    frame: &Frame,
) -> (GpuProgram, usize) {
    let pl = threadblocks::place(rc, |p| frame.rank(v, p));
    let (acc_ranges, s_chunks) = steps::scratch(&rc.ops, &pl.tb_steps);
    let dep_of = steps::dependencies(rc, &pl.pos_of_op);
    let (tbs, max_chan) = steps::threadblocks(&rc.ops, &pl, &acc_ranges, &dep_of);
    let gpu = GpuProgram {
        id: v as i64,
        i_chunks: bufs.i_chunks as i64,
        o_chunks: bufs.o_chunks as i64,
        s_chunks: s_chunks as i64,
        tbs,
        line: 0,
    };
    (gpu, max_chan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Spec, Step, Transfer};
    use crate::verify::{verify, VerifyOptions};

    fn t(step: usize, chunk: usize, src: usize, dst: usize) -> Transfer {
        Transfer {
            step,
            chunk,
            src,
            dst,
            channel: 0,
        }
    }

    /// A rank with more threadblocks than a dependency can name (int8):
    /// the direct allreduce on 40 ranks has 156 per rank, and its
    /// broadcast waits on 78 of them; with rank 0's first threadblock
    /// swapped with its 151st, a dependency names id 150 and the verifier
    /// rejects the program. Renumbering gives every target a low id, and
    /// it verifies again.
    #[test]
    fn dependency_targets_get_the_low_ids() {
        let rs = crate::synth::direct::direct_algorithm(Spec::reduce_scatter(40, 1));
        let ar = Algorithm::allreduce(&rs, &rs.allgather_dual());
        let mut p = lower(&ar, &LowerOptions::default()).unwrap();
        assert!(p.max_tbs_per_rank() > 128, "{}", p.max_tbs_per_rank());
        let swap = |x: i64| match x {
            0 => 150,
            150 => 0,
            x => x,
        };
        let g = &mut p.gpus[0];
        for t in &mut g.tbs {
            t.id = swap(t.id);
            for s in &mut t.steps {
                s.depid = swap(s.depid);
            }
        }
        g.tbs.sort_by_key(|t| t.id);
        assert!(g.tbs.iter().flat_map(|t| &t.steps).any(|s| s.depid > 127));
        let e = verify(&p, &VerifyOptions::default()).unwrap_err();
        assert_eq!(e.rule, "dependency", "{e}");
        dependency_targets_first(&mut p);
        for g in &p.gpus {
            for (i, t) in g.tbs.iter().enumerate() {
                assert_eq!(t.id, i as i64);
                assert!(t.steps.iter().all(|s| s.depid <= 127));
            }
        }
        verify(&p, &VerifyOptions::default()).unwrap();
    }

    #[test]
    fn frames_number_ranks_and_chunks_from_the_host() {
        // 3 hosts of 4 ranks, 2 chunks per shard.
        let f = Frame::new(12, 4, 2);
        assert_eq!((f.base(0), f.base(5), f.base(11)), (0, 4, 8));
        // Rank 9 seen from rank 5's host (ranks 4..8) and the shift of
        // both by one host: the same number.
        assert_eq!(f.rank(5, 9), 5);
        assert_eq!(f.rank(9, 1), 5);
        assert_eq!(f.chunk(5, 18), 10);
        assert_eq!(f.chunk(9, 2), 10);
        // Without hosts the numbers are the ranks' own.
        let g = Frame::new(12, 0, 2);
        assert_eq!((g.rank(7, 3), g.chunk(7, 3)), (3, 3));
    }

    /// Three ranks, 100 chunks per shard. Shard 0's chunks 1–98 go 2 → 1
    /// → 0 one step apart (two dense connections of about 100 messages),
    /// chunks 0 and 99 go 2 → 0 at the first and the last step (a sparse
    /// connection at both ends of the schedule); shards 1 and 2 move as
    /// one message each. The dense connections need two channels; the
    /// sparse one keeps a single threadblock, every threadblock stays
    /// within 64 steps, and the program verifies.
    #[test]
    fn a_sparse_connection_keeps_one_threadblock() {
        let k = 100;
        let mut tr = Vec::new();
        for c in 0..k {
            match c {
                0 => tr.extend([t(0, c, 2, 0), t(0, c, 1, 0)]),
                99 => tr.extend([t(100, c, 2, 0), t(100, c, 1, 0)]),
                _ => tr.extend([t(c, c, 2, 1), t(c + 1, c, 1, 0)]),
            }
        }
        for owner in 1..3 {
            for c in owner * k..(owner + 1) * k {
                for src in (0..3).filter(|&s| s != owner) {
                    tr.push(t(0, c, src, owner));
                }
            }
        }
        let alg = Algorithm {
            name: "sparse".into(),
            spec: Spec::reduce_scatter(3, k),
            transfers: tr,
            bcast: Vec::new(),
        };
        let p = lower(&alg, &LowerOptions::default()).expect("lowers");
        assert!(p.nchannels >= 2, "{} channels", p.nchannels);
        let g0 = &p.gpus[0];
        let from2 = g0.tbs.iter().filter(|t| t.recv == 2).count();
        assert_eq!(from2, 1, "rank 0 receives from rank 2 in one threadblock");
        for g in &p.gpus {
            for tb in &g.tbs {
                assert!(tb.steps.len() <= 64, "rank {} tb {}", g.id, tb.id);
            }
        }
        verify(&p, &VerifyOptions::default()).expect("verifies");
    }

    /// An allgather on six ranks where owner 0 sends its chunk to relays
    /// 1 and 2 (which forward it to 3 and 4) and to leaf 5; every other
    /// owner sends straight to all. With `relays_in_turn` rank 0's send
    /// to relay 2 waits for its send to relay 1 and the leaf's send waits
    /// for neither; without, every send of rank 0 waits only for the copy
    /// of its input. Both verify.
    #[test]
    fn relays_in_turn_chain_only_the_sends_to_relays() {
        let n = 6;
        let mut bcast = vec![
            t(0, 0, 0, 1),
            t(1, 0, 0, 2),
            t(2, 0, 0, 5),
            t(1, 0, 1, 3),
            t(2, 0, 2, 4),
        ];
        for o in 1..n {
            bcast.extend((0..n).filter(|&d| d != o).map(|d| t(0, o, o, d)));
        }
        let alg = Algorithm {
            name: "relays".into(),
            spec: Spec {
                coll: Collective::AllGather,
                ..Spec::reduce_scatter(n, 1)
            },
            transfers: Vec::new(),
            bcast,
        };
        alg.check().expect("a valid allgather");
        // Rank 0's step that sends its own chunk to `peer`, and the
        // threadblock that holds it.
        let send_to = |p: &Program, peer: i64| -> (i64, Step) {
            let tb = p.gpus[0]
                .tbs
                .iter()
                .find(|tb| tb.send == peer)
                .expect("a send threadblock");
            let st = tb
                .steps
                .iter()
                .find(|s| s.srcoff == 0 && s.kind.sends())
                .expect("the send of chunk 0");
            (tb.id, st.clone())
        };
        for in_turn in [false, true] {
            let opts = LowerOptions {
                relays_in_turn: in_turn,
                ..LowerOptions::default()
            };
            let p = lower(&alg, &opts).expect("lowers");
            verify(&p, &VerifyOptions::default()).expect("verifies");
            let (tb1, _) = send_to(&p, 1);
            let (_, to2) = send_to(&p, 2);
            let (_, to5) = send_to(&p, 5);
            assert_eq!(
                to2.depid == tb1,
                in_turn,
                "relay 2 after relay 1: {in_turn}"
            );
            assert_ne!(to5.depid, tb1, "the leaf waits for no relay");
        }
        // The same broadcast after a reduction (an allreduce): rank 0's
        // send to relay 2 follows its send to relay 1 only in turn.
        let rs = Algorithm::reduce_scatter(
            "star",
            Spec::reduce_scatter(n, 1),
            (0..n)
                .flat_map(|o| (0..n).filter(move |&s| s != o).map(move |s| t(0, o, s, o)))
                .collect(),
        );
        let ar = Algorithm::allreduce(&rs, &alg);
        ar.check().expect("a valid allreduce");
        for in_turn in [false, true] {
            let opts = LowerOptions {
                relays_in_turn: in_turn,
                ..LowerOptions::default()
            };
            let p = lower(&ar, &opts).expect("lowers");
            verify(&p, &VerifyOptions::default()).expect("verifies");
            // Rank 0's broadcast send of chunk 0 (from its output) to
            // `peer`, and its threadblock.
            let bsend = |peer: i64| -> (i64, Step) {
                p.gpus[0]
                    .tbs
                    .iter()
                    .filter(|tb| tb.send == peer)
                    .find_map(|tb| {
                        let st = tb.steps.iter().find(|s| {
                            s.kind.sends() && s.srcbuf == crate::ir::Buf::Output && s.srcoff == 0
                        })?;
                        Some((tb.id, st.clone()))
                    })
                    .expect("the broadcast send of chunk 0")
            };
            let ((tb1, _), (_, to2)) = (bsend(1), bsend(2));
            assert_eq!(to2.depid == tb1, in_turn, "allreduce, in turn: {in_turn}");
        }
    }

    /// From 256 ranks a program whose first ranks need more threadblocks
    /// than `max_tbs` is refused before the rest are lowered; below, it is
    /// lowered whole (a search scores it by its excess).
    #[test]
    fn over_the_budget_at_scale_is_refused_from_its_first_ranks() {
        let direct = |n| crate::synth::direct::direct_algorithm(Spec::reduce_scatter(n, 1));
        let opts = LowerOptions {
            max_tbs: 8,
            ..LowerOptions::default()
        };
        match lower(&direct(PROBE_MIN_RANKS), &opts) {
            Err(LowerError::Threadblocks { at_least, max: 8 }) => assert!(at_least > 8),
            other => panic!("{:?}", other.map(|p| p.max_tbs_per_rank())),
        }
        let whole = lower(&direct(PROBE_MIN_RANKS - 1), &opts).unwrap();
        assert!(whole.max_tbs_per_rank() > 8);
        // Within the budget the probe changes nothing.
        let roomy = LowerOptions {
            max_tbs: 1 << 20,
            ..LowerOptions::default()
        };
        let p = lower(&direct(PROBE_MIN_RANKS), &roomy).unwrap();
        assert_eq!(
            p,
            lower(&direct(PROBE_MIN_RANKS), &LowerOptions::default()).unwrap()
        );
    }
}
