//! Lowering: Algorithm (per-chunk reduction trees) → Program (MSCCL
//! threadblocks, channels, steps, dependencies).
//!
//! One mechanism does it all (docs/architecture.md "Lowering"):
//! 1. chunks whose trees are identical and whose indices are consecutive
//!    form a *block* that moves as one multi-chunk step (`cnt` > 1);
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
//!    (step, chunk) order. Every happens-before edge goes to a later step,
//!    or stays within a step and goes to a larger chunk (a receive is never
//!    followed by a send of the same step in one threadblock), so the
//!    result cannot deadlock; and a receive at step s is adjacent to the send
//!    of the same accumulator at step s+1, so a ring fuses into `rrs`;
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
use std::collections::HashMap;
use std::fmt;

/// Largest chunks per step.
const MAX_CNT: usize = 71;
/// Largest number of channels.
pub const MAX_CHANNELS: usize = 32;

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

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LowerError {
    /// The Algorithm is not a valid set of reduction trees.
    Algorithm(String),
    /// No lowering fits the runtime's limits.
    Limits(String),
}

impl fmt::Display for LowerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LowerError::Algorithm(m) => write!(f, "invalid algorithm: {m}"),
            LowerError::Limits(m) => write!(f, "exceeds MSCCL limits: {m}"),
        }
    }
}

impl std::error::Error for LowerError {}

/// A slot an operation names, before scratch allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    In(usize),
    Out(usize),
    /// The accumulator of block b (scratch).
    Acc(usize),
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
    key: (usize, usize, usize, usize, usize),
    chan: usize,
    peer: usize,
    src: Slot,
    dst: Slot,
    block: usize,
}

struct Block {
    start: usize,
    len: usize,
    owner: usize,
}

/// Lower an Algorithm into a Program that fits `opts.runtime`'s limits.
pub fn lower(alg: &Algorithm, opts: &LowerOptions) -> Result<Program, LowerError> {
    alg.check().map_err(|e| LowerError::Algorithm(e.0))?;
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
    let mut per_conn: HashMap<(usize, usize, usize), usize> = HashMap::new();
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
    loop {
        // Channels needed at this window, known before lowering.
        let need = alg.num_channels() * steps.div_ceil(window);
        if need > MAX_CHANNELS {
            return Err(LowerError::Limits(format!(
                "needs {need} channels (at most {MAX_CHANNELS}) to keep every threadblock within {max_steps} steps; use fewer logical channels (rings) or fewer chunks"
            )));
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
            return Err(LowerError::Limits(format!(
                "needs {nch} channels (at most {MAX_CHANNELS}) to keep every threadblock within {max_steps} steps; use fewer logical channels (rings) or fewer chunks"
            )));
        }
        if longest <= max_steps {
            return Ok(prog);
        }
        if window <= 1 {
            return Err(LowerError::Limits(format!(
                "a threadblock needs {longest} steps even with one step per channel window (limit {max_steps})"
            )));
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
    // Per block: children and parent of every rank.
    let cps = spec.chunks;
    let mut ops: Vec<Vec<Op>> = vec![Vec::new(); n]; // per rank
                                                     // Per rank, per block: the chain's op ids, a contiguous range.
    let mut chains: Vec<Vec<std::ops::Range<usize>>> = vec![Vec::with_capacity(blocks.len()); n];
    for (bi, b) in blocks.iter().enumerate() {
        let mut children: Vec<Vec<(usize, usize, usize)>> = vec![Vec::new(); n];
        let mut parent: Vec<Option<(usize, usize, usize)>> = vec![None; n];
        for &(src, dst, step, ch) in &per_chunk[b.start] {
            children[dst].push((step, src, ch));
            parent[src] = Some((dst, step, ch));
        }
        for v in 0..n {
            children[v].sort_unstable();
            let c0 = b.start;
            let chain_start = ops[v].len();
            let is_root = v == b.owner;
            let acc = if is_root {
                Slot::Out(c0 - v * cps)
            } else {
                Slot::Acc(bi)
            };
            for (j, &(step, src, ch)) in children[v].iter().enumerate() {
                ops[v].push(Op {
                    kind: OpKind::RecvReduce,
                    key: (step, 1, c0, src, v),
                    chan: mchan(ch, step),
                    peer: src,
                    src: if j == 0 { Slot::In(c0) } else { acc },
                    dst: acc,
                    block: bi,
                });
            }
            if let Some((dst, step, ch)) = parent[v] {
                ops[v].push(Op {
                    kind: OpKind::Send,
                    key: (step, 0, c0, v, dst),
                    chan: mchan(ch, step),
                    peer: dst,
                    src: if children[v].is_empty() {
                        Slot::In(c0)
                    } else {
                        acc
                    },
                    dst: Slot::In(c0),
                    block: bi,
                });
            } else if is_root && children[v].is_empty() {
                ops[v].push(Op {
                    kind: OpKind::Copy,
                    key: (0, 0, c0, v, v),
                    chan: 0,
                    peer: v,
                    src: Slot::In(c0),
                    dst: acc,
                    block: bi,
                });
            }
            chains[v].push(chain_start..ops[v].len());
        }
    }

    let mut gpus = Vec::with_capacity(n);
    let mut max_chan = 0usize;
    for v in 0..n {
        let rops = &ops[v];
        // Fusable (chan, recv peer, send peer) candidates: the last receive
        // of a chain followed by its send on the same channel.
        let mut cand: HashMap<(usize, usize, usize), usize> = HashMap::new();
        for chain in &chains[v] {
            if chain.len() >= 2 {
                let (a, b) = (&rops[chain.end - 2], &rops[chain.end - 1]);
                if a.kind == OpKind::RecvReduce && b.kind == OpKind::Send && a.chan == b.chan {
                    *cand.entry((a.chan, a.peer, b.peer)).or_default() += 1;
                }
            }
        }
        let mut cand: Vec<((usize, usize, usize), usize)> = cand.into_iter().collect();
        cand.sort_unstable_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
        // TB keys (chan, send, recv) with -1 as none.
        let mut tb_keys: Vec<(usize, i64, i64)> = Vec::new();
        let mut recv_tb: HashMap<(usize, usize), usize> = HashMap::new();
        let mut send_tb: HashMap<(usize, usize), usize> = HashMap::new();
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
        let mut next_in_chain = vec![usize::MAX; rops.len()];
        for chain in &chains[v] {
            let end = chain.end.saturating_sub(1).max(chain.start);
            for (i, next) in next_in_chain[chain.start..end].iter_mut().enumerate() {
                *next = chain.start + i + 1;
            }
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
        // Scratch: accumulators still named by some step.
        let mut acc_used: Vec<usize> = Vec::new();
        for steps in &tb_steps {
            for &(kind, a, _) in steps {
                let o = &rops[a];
                let names = |s: Slot| matches!(s, Slot::Acc(_));
                let uses = match kind {
                    StepKind::RecvReduceSend => names(o.src),
                    _ => names(o.src) || (o.kind != OpKind::Send && names(o.dst)),
                };
                if uses {
                    acc_used.push(o.block);
                }
            }
        }
        acc_used.sort_unstable();
        acc_used.dedup();
        let mut acc_off: HashMap<usize, usize> = HashMap::new();
        let mut s_chunks = 0usize;
        for b in acc_used {
            acc_off.insert(b, s_chunks);
            s_chunks += blocks[b].len;
        }
        let place = |s: Slot| -> (Buf, usize) {
            match s {
                Slot::In(c) => (Buf::Input, c),
                Slot::Out(k) => (Buf::Output, k),
                Slot::Acc(b) => (Buf::Scratch, acc_off.get(&b).copied().unwrap_or(0)),
            }
        };
        // Dependencies along chains across threadblocks.
        let mut dep_of: HashMap<(usize, usize), (usize, usize)> = HashMap::new();
        for chain in &chains[v] {
            for i in chain.start..chain.end.saturating_sub(1) {
                let (pa, pb) = (pos_of_op[i], pos_of_op[i + 1]);
                if pa.0 != pb.0 {
                    dep_of.insert(pb, pa);
                }
            }
        }
        let mut tbs: Vec<Threadblock> = tb_keys
            .iter()
            .enumerate()
            .map(|(t, &(ch, send, recv))| {
                max_chan = max_chan.max(ch);
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
                let cnt = blocks[oa.block].len;
                let mut st = Step::new(kind).count(cnt);
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
