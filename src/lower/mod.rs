//! Lowering: Algorithm (per-chunk reduce and copy trees) → Program (MSCCL
//! threadblocks, channels, steps, dependencies).
//!
//! One mechanism does it all (docs/architecture.md "Lowering"):
//! 1. chunks whose trees are identical and whose indices are consecutive
//!    form a *block* that moves as one multi-chunk step (`cnt` > 1); and
//!    per rank, consecutive blocks of one owner in which that rank's whole
//!    reduce subtree is identical form a *run* it moves as one message
//!    (its receives, reduction and send once for the run). The receiver
//!    of such a message may split the run further — a receive then spans
//!    several of its chains and must head them all or follow one op they
//!    share, else the sender's run is cut there too (`Runs`). An
//!    allreduce's broadcast has runs of its own (`Runs::broadcast`): a rank
//!    receives as one message the consecutive blocks whose path from the
//!    owner agrees, and forwards sub-ranges of it. Both matter where the
//!    two trees of a chunk change at different chunks — a pair of two
//!    synthesizers' halves — which cuts the blocks at both halves'
//!    boundaries: each half still moves its own messages;
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
//!    threadblock, transfers are spread over more channels by step window
//!    (channel = logical channel × windows + step / window), starting from
//!    the widest window in which no connection is over the limit, and
//!    lowering retries with a smaller window; one connection's windows run
//!    in order (`chain_windows`); more than 32 channels is an error;
//! 7. for a runtime without fused steps (RCCL), every `rrc`, `rrs`, `rcs`
//!    and `rrcs` is rewritten with `r`, `re`, `cpy` and `s` (`reduced`)
//!    before the limits of item 6 are checked.

mod chains;
mod reduced;
mod runs;
mod steps;
mod threadblocks;

use crate::ir::{Algorithm, Collective, GpuProgram, Program, Proto, Runtime};
use chains::RankChains;
use runs::{Block, Runs};
use rustc_hash::FxHashMap as HashMap;

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
    /// An allreduce's broadcast moves, per rank, one message over
    /// consecutive blocks whose path from the owner agrees (blocks the
    /// reduction's trees split: a pair of two synthesizers' halves).
    /// Without, it moves block by block: more, smaller messages, which a
    /// rank forwards sooner (`auto` scores a pair both ways).
    pub bcast_runs: bool,
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

/// Lower an Algorithm into a Program that fits `opts.runtime`'s limits.
pub fn lower(alg: &Algorithm, opts: &LowerOptions) -> Result<Program, LowerError> {
    let max_steps = opts.runtime.max_steps();
    let steps = alg.num_steps().max(1);
    // Skip the one-window attempt when some connection alone would carry
    // more transfers than a threadblock may have steps.
    let mut per_conn: HashMap<(usize, usize, usize), usize> = HashMap::default();
    for t in alg.edges() {
        *per_conn.entry((t.src, t.dst, t.channel)).or_default() += 1;
    }
    let blocks_hint = alg.spec.chunks().max(1);
    let crowded = per_conn
        .values()
        .any(|&k| k.div_ceil(blocks_hint) > max_steps);
    let mut window = if crowded {
        widest_window(alg, max_steps.saturating_sub(2).max(1), blocks_hint)
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
            widest_window(alg, max_steps.saturating_sub(2).max(1), blocks_hint)
        } else {
            window * max_steps / (longest + 1)
        };
        window = next.min(window - 1).max(1);
    }
}

/// The widest step window in which no connection carries more than
/// `limit` transfers each way together (per `blocks` chunks, which move as
/// one message) — a threadblock's step count is about its connections'
/// in a window, and a sparse connection needs few windows: channels =
/// logical channels × windows. Binary search; the count grows with the
/// window.
fn widest_window(alg: &Algorithm, limit: usize, blocks: usize) -> usize {
    let steps = alg.num_steps().max(1);
    let fits = |w: usize| {
        let mut per: HashMap<(usize, usize, usize, usize), usize> = HashMap::default();
        for t in alg.edges() {
            let (a, b) = (t.src.min(t.dst), t.src.max(t.dst));
            *per.entry((a, b, t.channel, t.step / w)).or_default() += 1;
        }
        per.values().all(|&k| k.div_ceil(blocks) <= limit)
    };
    let (mut lo, mut hi) = (1usize, steps);
    if fits(hi) {
        return hi;
    }
    while lo + 1 < hi {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
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

    let per_chunk = runs::per_chunk(&alg.transfers, total);
    let per_bcast = runs::per_chunk(&alg.bcast, total);
    let blocks = runs::blocks(spec, &per_chunk, &per_bcast);
    // Ranks are independent from here on: lower contiguous ranges of them
    // on the available cores (large programs only).
    let parts_n = crate::par::threads(n / 64);
    let per = n.div_ceil(parts_n);
    let ranges: Vec<std::ops::Range<usize>> = (0..parts_n)
        .map(|k| k * per..((k + 1) * per).min(n))
        .collect();
    // Messages that span blocks are reductions' (a rank's whole reduce
    // subtree agrees, whatever the blocks' broadcast trees); a broadcast
    // moves block by block.
    let runs = if spec.coll.reduces() {
        Runs::new(n, &blocks, &per_chunk)
    } else {
        Runs::blocks_only(n)
    };
    // A broadcast's messages span blocks only in an allreduce (whose
    // blocks the reduction's trees split too), unless asked not to.
    let bruns = if spec.coll == Collective::AllReduce && opts.bcast_runs {
        Runs::broadcast(n, &blocks, &per_bcast)
    } else {
        Runs::blocks_only(n)
    };
    let trees = Trees {
        blocks: &blocks,
        runs: &runs,
        bruns: &bruns,
        per_chunk: &per_chunk,
        per_bcast: &per_bcast,
    };
    let parts = crate::par::map(&ranges, |r| lower_ranks(alg, &trees, &mchan, r.clone()));
    let mut gpus = Vec::with_capacity(n);
    let mut max_chan = 0usize;
    for (g, m) in parts {
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
    if nwin > 1 {
        chain_windows(&mut prog, nwin);
    }
    if !opts.runtime.fused_steps() {
        reduced::rewrite(&mut prog);
    }
    Ok(prog)
}

/// Threadblocks that differ only in their step window (same logical
/// channel, send peer and receive peer) run one after the other: the
/// first step of each waits for the last step of the previous window's.
/// Unchained, every window's threadblock starts at once, so later
/// windows' transfers share the links with the first window's and delay
/// what the next phase needs first (on 128 × DGX-H100 the rail sends
/// waited for the whole intra-host phase: 71 % of the bound at 1 GiB
/// instead of 99 %). Data edges only go to later steps, so later windows,
/// and these edges keep the dependency order acyclic. A first step that
/// already waits on something gets a `nop` in front that carries the
/// window edge (MSCCL's one dependency per step).
fn chain_windows(prog: &mut Program, nwin: usize) {
    use crate::ir::{Step, StepKind};
    for g in &mut prog.gpus {
        let mut order: Vec<(i64, i64, i64, i64, usize)> = g
            .tbs
            .iter()
            .enumerate()
            .filter(|(_, t)| !t.steps.is_empty())
            .map(|(i, t)| {
                (
                    t.chan / nwin as i64,
                    t.send,
                    t.recv,
                    t.chan % nwin as i64,
                    i,
                )
            })
            .collect();
        order.sort_unstable();
        for w in order.windows(2) {
            let (a, b) = (w[0], w[1]);
            if (a.0, a.1, a.2) != (b.0, b.1, b.2) {
                continue;
            }
            let (ta, tb) = (a.4, b.4);
            let last = g.tbs[ta].steps.len() - 1;
            if g.tbs[ta].steps[last].kind == StepKind::Nop {
                continue;
            }
            let dep_id = g.tbs[ta].id;
            g.tbs[ta].steps[last].hasdep = true;
            let first = &mut g.tbs[tb].steps[0];
            if first.depid < 0 {
                first.depid = dep_id;
                first.deps = last as i64;
                continue;
            }
            let mut nop = Step::new(StepKind::Nop).count(0);
            nop.depid = dep_id;
            nop.deps = last as i64;
            let id = g.tbs[tb].id;
            g.tbs[tb].steps.insert(0, nop);
            for (i, s) in g.tbs[tb].steps.iter_mut().enumerate() {
                s.s = i as i64;
            }
            // Steps that wait on this threadblock now wait one later.
            for t in &mut g.tbs {
                for s in &mut t.steps {
                    if s.depid == id && s.deps >= 0 {
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
    blocks: &'a [Block],
    runs: &'a Runs,
    bruns: &'a Runs,
    per_chunk: &'a [Vec<(usize, usize, usize, usize)>],
    per_bcast: &'a [Vec<(usize, usize, usize, usize)>],
}

/// Lower ranks `ranks` (all blocks): their threadblocks, and the largest
/// channel they use.
fn lower_ranks(
    alg: &Algorithm,
    t: &Trees,
    mchan: &impl Fn(usize, usize) -> usize,
    ranks: std::ops::Range<usize>,
) -> (Vec<GpuProgram>, usize) {
    let spec = alg.spec;
    let bufs = spec.coll.buffers(spec.total_chunks(), spec.ranks);
    let rank_chains = chains::build(alg, t, mchan, ranks.clone());
    let mut gpus = Vec::with_capacity(ranks.len());
    let mut max_chan = 0usize;
    for (v, rc) in ranks.zip(&rank_chains) {
        let (gpu, m) = lower_rank(v, rc, bufs);
        max_chan = max_chan.max(m);
        gpus.push(gpu);
    }
    (gpus, max_chan)
}

/// Rank v's program from its chains (`bufs` its buffers), and the
/// largest channel it uses.
fn lower_rank(v: usize, rc: &RankChains, bufs: crate::ir::spec::Buffers) -> (GpuProgram, usize) {
    let pl = threadblocks::place(rc);
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
