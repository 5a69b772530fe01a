//! Symbolic execution of a Program (msccl-xml.md §11 "Validator").
//!
//! 1. Pair the k-th send with the k-th receive on every connection and merge
//!    paired steps into rendezvous groups (chains such as s → rrs → rrc).
//! 2. Order the groups by program order and `depid/deps` edges (Kahn); a
//!    cycle, or a group whose chain closes on itself, is a deadlock.
//! 3. Execute the groups in that order with symbolic values: each slot holds
//!    the multiset of (rank, input chunk) contributions it sums. Values are
//!    fingerprinted (count plus two independent 64-bit random-key sums, a
//!    homomorphism of multiset union), so a run costs O(steps · cnt); only
//!    when the post-condition fails is the run repeated with exact multisets
//!    to say which contributions are missing or repeated.
//! 4. Races: within a rank, two accesses to one slot by different
//!    threadblocks (at least one a write) must be ordered by program order
//!    and explicit dependencies (vector clocks over the rank's threadblocks).

use super::structure::Index;
use super::{at, location, VerifyError};
use crate::ir::resolve::resolve;
use crate::ir::{Buf, Program, Step, StepKind};
use std::collections::HashMap;

/// A symbolic value: the multiset of contributions a slot sums.
trait Sym: Clone + PartialEq {
    fn input(rank: usize, chunk: usize) -> Self;
    fn add(&mut self, other: &Self);
    /// The reduce-scatter result for global chunk `chunk` over `n` ranks.
    fn expected(n: usize, chunk: usize) -> Self;
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn key(rank: usize, chunk: usize, seed: u64) -> u64 {
    splitmix(((rank as u64) << 32 | chunk as u64) ^ seed)
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Fp {
    n: u64,
    a: u64,
    b: u64,
}

const SEED_A: u64 = 0x5bd1_e995_1234_5678;
const SEED_B: u64 = 0x2545_f491_4f6c_dd1d;

impl Sym for Fp {
    fn input(rank: usize, chunk: usize) -> Self {
        Fp {
            n: 1,
            a: key(rank, chunk, SEED_A),
            b: key(rank, chunk, SEED_B),
        }
    }
    fn add(&mut self, o: &Self) {
        self.n = self.n.wrapping_add(o.n);
        self.a = self.a.wrapping_add(o.a);
        self.b = self.b.wrapping_add(o.b);
    }
    fn expected(n: usize, chunk: usize) -> Self {
        let mut v = Fp { n: 0, a: 0, b: 0 };
        for q in 0..n {
            v.add(&Fp::input(q, chunk));
        }
        v
    }
}

/// Exact multiset, sorted.
#[derive(Clone, PartialEq, Eq, Debug)]
struct Exact(Vec<(u32, u32)>);

impl Sym for Exact {
    fn input(rank: usize, chunk: usize) -> Self {
        Exact(vec![(rank as u32, chunk as u32)])
    }
    fn add(&mut self, o: &Self) {
        let mut v = Vec::with_capacity(self.0.len() + o.0.len());
        let (mut i, mut j) = (0, 0);
        while i < self.0.len() || j < o.0.len() {
            if j == o.0.len() || (i < self.0.len() && self.0[i] <= o.0[j]) {
                v.push(self.0[i]);
                i += 1;
            } else {
                v.push(o.0[j]);
                j += 1;
            }
        }
        self.0 = v;
    }
    fn expected(n: usize, chunk: usize) -> Self {
        Exact((0..n as u32).map(|q| (q, chunk as u32)).collect())
    }
}

impl Exact {
    /// Why `self` differs from `want`.
    fn diff(&self, want: &Exact) -> String {
        let count = |v: &Exact| {
            let mut m: HashMap<(u32, u32), usize> = HashMap::new();
            for &k in &v.0 {
                *m.entry(k).or_default() += 1;
            }
            m
        };
        let (got, exp) = (count(self), count(want));
        let mut parts = Vec::new();
        let mut keys: Vec<_> = got.keys().chain(exp.keys()).copied().collect();
        keys.sort_unstable();
        keys.dedup();
        for k in keys {
            let (g, e) = (
                got.get(&k).copied().unwrap_or(0),
                exp.get(&k).copied().unwrap_or(0),
            );
            if g == e {
                continue;
            }
            let what = if e == 0 {
                format!(
                    "holds rank {}'s input chunk {} which does not belong here",
                    k.0, k.1
                )
            } else if g == 0 {
                format!(
                    "misses rank {}'s contribution (input chunk {}): never reduced",
                    k.0, k.1
                )
            } else {
                format!(
                    "counts rank {}'s contribution (input chunk {}) {g} times: reduced twice",
                    k.0, k.1
                )
            };
            parts.push(what);
            if parts.len() == 3 {
                parts.push("…".into());
                break;
            }
        }
        parts.join("; ")
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    OutOfPlace,
    InPlace,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::OutOfPlace => "out-of-place",
            Mode::InPlace => "in-place",
        }
    }
}

/// The flattened program with pairing and an execution order. Global step
/// ids, event ids and offsets are u32 (a Program read from XML or lowered
/// has far fewer than 2³² steps; `plan` checks).
struct Plan<'p> {
    p: &'p Program,
    /// (gi, ti, si) per global step id.
    loc: Vec<(u32, u32, u32)>,
    /// The fields execution reads, per global step id, packed: execution
    /// visits steps in happens-before order, all over memory, and one
    /// small record costs one cache miss where the Program's steps cost
    /// three pointer hops.
    steps: Vec<Instr>,
    /// Steps in execution order (each at its first event).
    order: Vec<u32>,
    idx: Index,
    /// Chunks in all messages (the arena's size; one slot per chunk sent).
    msg_total: usize,
    /// `hasdep` steps (snapshots of vector clocks).
    nsnaps: usize,
}

const NONE: u32 = u32::MAX;

/// A step as execution reads it, with everything resolved that execution
/// would otherwise look up elsewhere.
#[derive(Clone, Copy)]
struct Instr {
    kind: StepKind,
    srcbuf: Buf,
    dstbuf: Buf,
    hasdep: bool,
    cnt: i64,
    srcoff: i64,
    dstoff: i64,
    /// Receiving steps: where the incoming message starts in the arena.
    msg_in: u32,
    /// Sending steps: where the outgoing message starts in the arena.
    msg_out: u32,
    /// Steps with a dependency: the target's snapshot (NONE if it has none).
    dep_snap: u32,
    /// `hasdep` steps: this step's snapshot.
    snap: u32,
}

/// Primitive calls of a step when multi-chunk steps are split: k for
/// `cnt` = k, one chunk each. MSCCL makes ⌈k / maxAllowedCount⌉ calls
/// (msccl_setup.cc: mscclSetupCount; maxAllowedCount = tile / chunk, 1 once
/// a chunk is half a tile or more), so k is the most there can be — exact
/// at large sizes, more messages than MSCCL's (the stricter FIFO test)
/// between. Each call is one message through the connection's FIFO.
/// Local steps are one event.
fn calls_of(s: &Step, split: bool) -> u32 {
    if split && (s.kind.sends() || s.kind.recvs()) {
        s.cnt.max(1) as u32
    } else {
        1
    }
}

/// Events of a step: per call a receive then a send (`rrs`, `rcs`,
/// `rrcs`), or one of them, or one local event.
fn events_of(s: &Step, split: bool) -> usize {
    let per_call = if s.kind.sends() && s.kind.recvs() {
        2
    } else {
        1
    };
    calls_of(s, split) as usize * per_call
}

/// The receive event of call i of a receiving step whose first event is
/// `first`.
fn recv_event(first: u32, s: &Step, i: u32) -> u32 {
    if s.kind.sends() {
        first + 2 * i
    } else {
        first + i
    }
}

/// The send event of call i of a sending step whose first event is `first`.
fn send_event(first: u32, s: &Step, i: u32) -> u32 {
    if s.kind.recvs() {
        first + 2 * i + 1
    } else {
        first + i
    }
}

/// Build the event graph and an execution order.
///
/// With `split`, a step with `cnt` = k is k primitive calls, one message
/// each ([`calls_of`]: MSCCL's split at large sizes; rscc's CPU executor
/// splits exactly when MSCCL would); without, one. Each call is a
/// receive event R then a send event S (`rrs`, `rcs`, `rrcs`), or one of
/// them; a local step is one event. Edges: the events of a step in order;
/// program order (last event of a step → first event of the next);
/// dependencies (last event of the target → first event of the waiter); on
/// each connection the m-th message's send → its receive (the data), and
/// the consumption of message m − 2 → the send of message m: a FIFO of two
/// messages, MSCCL's depth per connection (NCCL_STEPS slots hold two 2 MiB
/// tiles; the simulator and the CPU executor default to the same). A
/// message is consumed by its receive event, or, in a fused
/// receive-and-send, by the send event of the same call: the primitive
/// holds its input slot until its own output has room, as MSCCL's and the
/// executor's do. (One slot under those rules deadlocks every ring; one
/// message per step and freeing the slot when the receive starts, as
/// before, missed deadlocks the executor hit: graded tree classes, whose
/// `cnt` = 2 and 3 steps put several messages of one step on one ring
/// connection.) A cycle is a deadlock.
fn plan(p: &Program, split: bool) -> Result<Plan<'_>, VerifyError> {
    let idx = Index::new(p);
    // The structural rules have passed, so every reference resolves.
    let res = resolve(p).map_err(|e| VerifyError::new("internal", e.to_string()))?;
    if p.num_steps() >= (u32::MAX / 4) as usize {
        return Err(VerifyError::new(
            "size",
            format!("{} steps is more than the verifier handles", p.num_steps()),
        ));
    }
    let mut base: Vec<Vec<u32>> = Vec::with_capacity(p.gpus.len());
    let mut loc = Vec::with_capacity(p.num_steps());
    for (gi, g) in p.gpus.iter().enumerate() {
        let mut b = Vec::with_capacity(g.tbs.len());
        for (ti, t) in g.tbs.iter().enumerate() {
            b.push(loc.len() as u32);
            for si in 0..t.steps.len() {
                loc.push((gi as u32, ti as u32, si as u32));
            }
        }
        base.push(b);
    }
    let total = loc.len();
    let step_of = |gid: usize| {
        let (gi, ti, si) = loc[gid];
        &p.gpus[gi as usize].tbs[ti as usize].steps[si as usize]
    };
    let here = |gid: usize| {
        let (gi, ti, si) = loc[gid];
        at(p, p.gpus[gi as usize].id as usize, ti as usize, si as usize)
    };
    let locate = |gid: usize| {
        let (gi, ti, si) = loc[gid];
        location(p, gi as usize, ti as usize, si as usize)
    };
    // Events: a step's first event, and its last (the same for one-event
    // steps; the next id for receive-then-send steps).
    // Also: each sending step's offset in the message arena, and each
    // hasdep step's snapshot index.
    let mut first = vec![0u32; total];
    let mut last = vec![0u32; total];
    let mut nodes = 0usize;
    let mut msg_off = vec![NONE; total];
    let mut snap_of = vec![NONE; total];
    let (mut msg_total, mut nsnaps) = (0usize, 0usize);
    for (gid, s) in p.steps().enumerate() {
        first[gid] = nodes as u32;
        nodes += events_of(s, split);
        if nodes >= (u32::MAX / 2) as usize {
            return Err(VerifyError::new(
                "size",
                format!(
                    "{} steps with {nodes}+ messages are more than the verifier handles",
                    p.num_steps()
                ),
            ));
        }
        last[gid] = nodes as u32 - 1;
        if s.kind.sends() {
            msg_off[gid] = msg_total.min(NONE as usize) as u32;
            msg_total += s.cnt.max(0) as usize;
        }
        if s.hasdep {
            snap_of[gid] = nsnaps as u32;
            nsnaps += 1;
        }
    }
    if msg_total >= NONE as usize {
        return Err(VerifyError::new(
            "size",
            format!("{msg_total} chunks in messages is more than the verifier handles"),
        ));
    }
    // Pairing (counts and cnt already checked by the structure pass): the
    // k-th send of a threadblock with the k-th receive of the peer's
    // threadblock on the same channel.
    let mut pair_prev = vec![NONE; total];
    let mut msg_in = vec![NONE; total];
    for c in &res.conns {
        let (Some(sk), Some(rk)) = (c.sender, c.receiver) else {
            continue;
        };
        let (st, rt) = (&res.tbs[sk], &res.tbs[rk]);
        let t = &p.gpus[st.gpu].tbs[st.local];
        let u = &p.gpus[rt.gpu].tbs[rt.local];
        let sends = t.steps.iter().enumerate().filter(|(_, s)| s.kind.sends());
        let recvs = u.steps.iter().enumerate().filter(|(_, s)| s.kind.recvs());
        for ((si, ss), (ri, rs)) in sends.zip(recvs) {
            let snd = base[st.gpu][st.local] as usize + si;
            let rcv = base[rt.gpu][rt.local] as usize + ri;
            if ss.cnt != rs.cnt && rs.kind != StepKind::Nop {
                return Err(VerifyError::new(
                    "pairing",
                    format!(
                        "{}: receives {} chunks but {} were sent",
                        here(rcv),
                        rs.cnt,
                        ss.cnt
                    ),
                )
                .with_at(locate(rcv)));
            }
            pair_prev[rcv] = snd as u32;
            msg_in[rcv] = msg_off[snd];
        }
    }
    for (gid, &prev) in pair_prev.iter().enumerate() {
        if step_of(gid).kind.recvs() && prev == NONE {
            return Err(VerifyError::new(
                "pairing",
                format!("{} receives but nothing is sent to it", here(gid)),
            )
            .with_at(locate(gid)));
        }
    }
    let mut dep_of = vec![NONE; total];
    for t in &res.tbs {
        for si in 0..t.steps {
            if let Some((d, ds)) = res.deps[t.first_step + si] {
                let dt = &res.tbs[d];
                dep_of[base[t.gpu][t.local] as usize + si] = base[dt.gpu][dt.local] + ds as u32;
            }
        }
    }
    // Every edge, in one enumeration run twice: to count out-degrees, then
    // to fill the compressed adjacency.
    let for_each_edge = |f: &mut dyn FnMut(u32, u32)| {
        let mut me = 0usize;
        for t in p.gpus.iter().flat_map(|g| g.tbs.iter()) {
            // Where the last two messages this threadblock received were
            // consumed (its connection's (m−2)-th and (m−1)-th).
            let (mut cons2, mut cons1) = (NONE, NONE);
            for (si, st) in t.steps.iter().enumerate() {
                let (fm, lm) = (first[me], last[me]);
                for e in fm..lm {
                    f(e, e + 1);
                }
                if si > 0 {
                    f(last[me - 1], fm);
                }
                if dep_of[me] != NONE {
                    f(last[dep_of[me] as usize], fm);
                }
                if st.kind.recvs() {
                    let snd = pair_prev[me] as usize;
                    let ss = step_of(snd);
                    for i in 0..calls_of(st, split) {
                        let (r, sent) = (recv_event(fm, st, i), send_event(first[snd], ss, i));
                        f(sent, r);
                        if cons2 != NONE {
                            // Two slots: message m needs message m − 2
                            // consumed.
                            f(cons2, sent);
                        }
                        // A fused receive-and-send holds its input slot
                        // until its own output has room.
                        let consumed = if st.kind.sends() {
                            send_event(fm, st, i)
                        } else {
                            r
                        };
                        cons2 = cons1;
                        cons1 = consumed;
                    }
                }
                me += 1;
            }
        }
    };
    let mut start = vec![0u32; nodes + 1];
    let mut indeg = vec![0u32; nodes];
    for_each_edge(&mut |a, b| {
        start[a as usize + 1] += 1;
        indeg[b as usize] += 1;
    });
    for i in 0..nodes {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut targets = vec![0u32; start[nodes] as usize];
    for_each_edge(&mut |a, b| {
        targets[fill[a as usize] as usize] = b;
        fill[a as usize] += 1;
    });
    drop(fill);
    // Kahn's algorithm (FIFO: deterministic for a given Program). Steps
    // execute at their first event (a sender's first event precedes its
    // send event, which precedes the receive).
    let mut step_at = vec![NONE; nodes];
    for (gid, &f) in first.iter().enumerate() {
        step_at[f as usize] = gid as u32;
    }
    // Every event enters the queue at most once, so a vector with a read
    // position is the FIFO.
    let mut queue: Vec<u32> = Vec::with_capacity(nodes);
    queue.extend((0..nodes as u32).filter(|&g| indeg[g as usize] == 0));
    let mut order = Vec::with_capacity(total);
    let mut head = 0usize;
    while let Some(&g) = queue.get(head) {
        head += 1;
        if step_at[g as usize] != NONE {
            order.push(step_at[g as usize]);
        }
        for &h in &targets[start[g as usize] as usize..start[g as usize + 1] as usize] {
            indeg[h as usize] -= 1;
            if indeg[h as usize] == 0 {
                queue.push(h);
            }
        }
    }
    let done = head;
    if done < nodes {
        let blocked = |g: &usize| indeg[first[*g] as usize] > 0;
        let blocked_steps = (0..total).filter(blocked).count();
        let s = (0..total).find(blocked).unwrap_or(0);
        return Err(VerifyError::new(
            "deadlock",
            format!(
                "the happens-before graph (program order, dependencies, send/receive pairing) has a cycle: {} can never run ({blocked_steps} steps blocked)",
                here(s)
            ),
        )
        .with_at(locate(s)));
    }
    let steps = p
        .steps()
        .enumerate()
        .map(|(gid, s)| Instr {
            kind: s.kind,
            srcbuf: s.srcbuf,
            dstbuf: s.dstbuf,
            hasdep: s.hasdep,
            cnt: s.cnt,
            srcoff: s.srcoff,
            dstoff: s.dstoff,
            msg_in: msg_in[gid],
            msg_out: msg_off[gid],
            dep_snap: match dep_of[gid] {
                NONE => NONE,
                d => snap_of[d as usize],
            },
            snap: snap_of[gid],
        })
        .collect();
    Ok(Plan {
        p,
        loc,
        steps,
        order,
        idx,
        msg_total,
        nsnaps,
    })
}

/// Per-slot access history for race detection: the last write and the
/// latest read by one threadblock since then, each packed as
/// `tb << 32 | step` (`NO_ACCESS` when none). Reads by further threadblocks
/// since the write (rare) live in the rank's `more_reads`.
#[derive(Clone, Copy)]
struct Access {
    write: u64,
    read: u64,
}

const NO_ACCESS: u64 = u64::MAX;

fn pack(tb: usize, step: usize) -> u64 {
    (tb as u64) << 32 | step as u64
}

fn unpack(a: u64) -> (u32, u32) {
    ((a >> 32) as u32, a as u32)
}

struct Rank<V> {
    val: Vec<Option<V>>,
    acc: Vec<Access>,
    /// Reads of a slot by a second, third … threadblock since its last write.
    more_reads: HashMap<usize, Vec<(u32, u32)>>,
    /// Threadblocks on this rank.
    t: usize,
    /// Vector clock per TB (row-major t × t): steps of each TB known complete.
    vc: Vec<u32>,
}

/// Slot index within a rank, after aliasing.
fn slot(p: &Program, gi: usize, mode: Mode, buf: Buf, off: usize) -> usize {
    let g = &p.gpus[gi];
    let c = p.nchunksperloop as usize;
    let cps = (p.nchunksperloop / p.ngpus) as usize;
    match (buf, mode) {
        (Buf::Input, _) => off,
        (Buf::Output, Mode::InPlace) => g.id as usize * cps + off,
        (Buf::Output, Mode::OutOfPlace) => c + off,
        (Buf::Scratch, _) => c + g.o_chunks.max(0) as usize + off,
    }
}

fn execute<V: Sym>(plan: &Plan, mode: Mode) -> Result<Vec<Rank<V>>, VerifyError> {
    let p = plan.p;
    let c = p.nchunksperloop as usize;
    let mut ranks: Vec<Rank<V>> = p
        .gpus
        .iter()
        .map(|g| {
            let slots = c + g.o_chunks.max(0) as usize + g.s_chunks.max(0) as usize;
            let mut val = vec![None; slots];
            for (k, v) in val.iter_mut().enumerate().take(c) {
                *v = Some(V::input(g.id as usize, k));
            }
            let t = g.tbs.len();
            Rank {
                val,
                acc: vec![
                    Access {
                        write: NO_ACCESS,
                        read: NO_ACCESS
                    };
                    slots
                ],
                more_reads: HashMap::new(),
                t,
                vc: vec![0; t * t],
            }
        })
        .collect();
    // Messages in flight: one arena slot per chunk sent, at the sending
    // step's offset. Snapshots of vector clocks after `hasdep` steps.
    let mut msgs: Vec<V> = vec![V::expected(0, 0); plan.msg_total];
    let mut snaps: Vec<Vec<u32>> = vec![Vec::new(); plan.nsnaps];
    for &gid in &plan.order {
        let gid = gid as usize;
        {
            let (gi, ti, si) = plan.loc[gid];
            let (gi, ti, si) = (gi as usize, ti as usize, si as usize);
            let g = &p.gpus[gi];
            let st = &plan.steps[gid];
            let here = || format!("{} in {} mode", at(p, g.id as usize, ti, si), mode.name());
            let rk = &mut ranks[gi];
            let t = rk.t;
            // Happens-before: program order plus the dependency.
            if st.dep_snap != NONE {
                let snap = &snaps[st.dep_snap as usize];
                for (x, y) in rk.vc[ti * t..(ti + 1) * t].iter_mut().zip(snap) {
                    *x = (*x).max(*y);
                }
            }
            rk.vc[ti * t + ti] = si as u32 + 1;
            let cnt = if st.kind == StepKind::Nop {
                0
            } else {
                st.cnt as usize
            };
            // Pairing and equal counts were checked by `plan`.
            let (msg_in, msg_out) = (st.msg_in as usize, st.msg_out as usize);
            #[allow(clippy::needless_range_loop)]
            for j in 0..cnt {
                let src =
                    (st.srcoff >= 0).then(|| slot(p, gi, mode, st.srcbuf, st.srcoff as usize + j));
                let dst =
                    (st.dstoff >= 0).then(|| slot(p, gi, mode, st.dstbuf, st.dstoff as usize + j));
                let read =
                    |rk: &mut Rank<V>, s: usize, buf: Buf, off: i64| -> Result<V, VerifyError> {
                        check_access(rk, s, ti, si, false).map_err(|(t2, s2, w)| {
                            race(p, g.id, ti, si, t2, s2, w, buf, off + j as i64, mode)
                        })?;
                        rk.val[s].clone().ok_or_else(|| {
                            VerifyError::new(
                                "uninitialised-read",
                                format!(
                                    "{}: reads {}[{}], which nothing has written",
                                    here(),
                                    buf.letter(),
                                    off + j as i64
                                ),
                            )
                            .with_at(location(p, gi, ti, si))
                        })
                    };
                let value = match st.kind {
                    StepKind::Send => Some(read(rk, src.unwrap_or(0), st.srcbuf, st.srcoff)?),
                    StepKind::Recv | StepKind::RecvCopySend => {
                        Some(std::mem::replace(&mut msgs[msg_in + j], V::expected(0, 0)))
                    }
                    StepKind::RecvReduceSend
                    | StepKind::RecvReduceCopy
                    | StepKind::RecvReduceCopySend => {
                        let mut v = std::mem::replace(&mut msgs[msg_in + j], V::expected(0, 0));
                        v.add(&read(rk, src.unwrap_or(0), st.srcbuf, st.srcoff)?);
                        Some(v)
                    }
                    StepKind::Copy => Some(read(rk, src.unwrap_or(0), st.srcbuf, st.srcoff)?),
                    StepKind::Reduce => {
                        let mut v = read(rk, dst.unwrap_or(0), st.dstbuf, st.dstoff)?;
                        v.add(&read(rk, src.unwrap_or(0), st.srcbuf, st.srcoff)?);
                        Some(v)
                    }
                    StepKind::Nop => None,
                };
                if st.kind.writes_dst() {
                    let d = dst.unwrap_or(0);
                    check_access(rk, d, ti, si, true).map_err(|(t2, s2, w)| {
                        race(
                            p,
                            g.id,
                            ti,
                            si,
                            t2,
                            s2,
                            w,
                            st.dstbuf,
                            st.dstoff + j as i64,
                            mode,
                        )
                    })?;
                    if st.kind.sends() {
                        rk.val[d] = value.clone();
                    } else {
                        rk.val[d] = value;
                        continue;
                    }
                }
                if st.kind.sends() {
                    if let Some(v) = value {
                        msgs[msg_out + j] = v;
                    }
                }
            }
            if st.hasdep {
                snaps[st.snap as usize] = rk.vc[ti * t..(ti + 1) * t].to_vec();
            }
        }
    }
    Ok(ranks)
}

/// Record an access by (ti, si) to slot `s`; on a race return the other
/// access (tb, step, was_write).
fn check_access<V>(
    rk: &mut Rank<V>,
    s: usize,
    ti: usize,
    si: usize,
    write: bool,
) -> Result<(), (u32, u32, bool)> {
    let t = rk.t;
    let vc = &rk.vc[ti * t..(ti + 1) * t];
    // Is (tb, step) ordered before the current step? (Own TB: program order.)
    let ordered = |(tb, q): (u32, u32)| tb as usize == ti || vc[tb as usize] > q;
    let a = &mut rk.acc[s];
    if a.write != NO_ACCESS && !ordered(unpack(a.write)) {
        let (wt, wp) = unpack(a.write);
        return Err((wt, wp, true));
    }
    if write {
        if a.read != NO_ACCESS && !ordered(unpack(a.read)) {
            let (rt, rp) = unpack(a.read);
            return Err((rt, rp, false));
        }
        a.write = pack(ti, si);
        a.read = NO_ACCESS;
        if !rk.more_reads.is_empty() {
            if let Some(more) = rk.more_reads.remove(&s) {
                if let Some(&(rt, rp)) = more.iter().find(|&&r| !ordered(r)) {
                    return Err((rt, rp, false));
                }
            }
        }
    } else if a.read == NO_ACCESS || unpack(a.read).0 as usize == ti {
        a.read = pack(ti, si);
    } else {
        let more = rk.more_reads.entry(s).or_default();
        if let Some(r) = more.iter_mut().find(|r| r.0 as usize == ti) {
            r.1 = si as u32;
        } else {
            more.push((ti as u32, si as u32));
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn race(
    p: &Program,
    rank: i64,
    ti: usize,
    si: usize,
    t2: u32,
    s2: u32,
    other_wrote: bool,
    buf: Buf,
    off: i64,
    mode: Mode,
) -> VerifyError {
    VerifyError::new(
        "race",
        format!(
            "{} and rank {rank} tb {t2} step {s2} both access {}[{off}] ({} by the other) without a dependency ordering them ({} mode)",
            at(p, rank as usize, ti, si),
            buf.letter(),
            if other_wrote { "written" } else { "read" },
            mode.name()
        ),
    )
    .with_at(
        p.gpus
            .iter()
            .position(|g| g.id == rank)
            .and_then(|gi| location(p, gi, ti, si)),
    )
}

fn postcondition<V: Sym>(
    plan: &Plan,
    mode: Mode,
    ranks: &[Rank<V>],
) -> Result<(), (usize, usize, V, V)> {
    let p = plan.p;
    let n = p.ngpus as usize;
    let cps = (p.nchunksperloop / p.ngpus) as usize;
    for r in 0..n {
        let gi = plan.idx.gpu_of_rank[r];
        let buf = if p.gpus[gi].o_chunks > 0 {
            Buf::Output
        } else {
            Buf::Input
        };
        for k in 0..cps {
            let off = if buf == Buf::Output { k } else { r * cps + k };
            let s = slot(p, gi, mode, buf, off);
            let want = V::expected(n, r * cps + k);
            match &ranks[gi].val[s] {
                Some(v) if *v == want => {}
                Some(v) => return Err((r, k, v.clone(), want)),
                None => return Err((r, k, V::expected(0, 0), want)),
            }
        }
    }
    Ok(())
}

/// (largest `cnt` of a communicating step, largest message size S at which
/// MSCCL still moves every such step as one message): with S / nchunksperloop
/// bytes per chunk, a `cnt` = k step is one call while k chunks fit one
/// Simple tile (maxAllowedCount ≥ k).
pub(crate) fn one_message_up_to(p: &Program) -> (u64, u64) {
    let max_cnt = p
        .steps()
        .filter(|s| s.kind.sends() || s.kind.recvs())
        .map(|s| s.cnt.max(1) as u64)
        .max()
        .unwrap_or(1);
    let tile = crate::ir::msccl::SIMPLE_TILE_BYTES;
    let chunks = p.nchunksperloop.max(1) as u64;
    (max_cnt, tile * chunks / max_cnt)
}

/// The event plan under the buffering the program will meet. MSCCL moves a
/// multi-chunk step as one message only while `cnt` chunks fit in one
/// Simple tile (2 MiB; maxAllowedCount ≥ cnt), and as several above that
/// ([`calls_of`] counts one per chunk), so a file is checked per chunk
/// unless its `maxBytes` keeps
/// every call below that size. When the per-chunk check finds a cycle and
/// the one-message check does not, the error says which `maxBytes` would
/// make the file safe.
fn deadlock_free_plan(p: &Program) -> Result<Plan<'_>, VerifyError> {
    let (max_cnt, one_call_up_to) = one_message_up_to(p);
    let small_only = matches!(p.max_bytes, Some(m) if m > 0 && (m as u64) <= one_call_up_to);
    match plan(p, !small_only) {
        Err(e) if e.rule == "deadlock" && max_cnt > 1 && !small_only && plan(p, false).is_ok() => {
            Err(VerifyError::new(
                "deadlock",
                format!(
                    "{}. The cycle needs MSCCL's split of multi-chunk steps (cnt up to {max_cnt}) into one message per chunk, which happens above {one_call_up_to} B; with maxBytes ≤ {one_call_up_to} each step stays one message and the file is safe",
                    e.msg
                ),
            )
            .with_at(e.at))
        }
        r => r,
    }
}

/// Run every declared aliasing mode; returns the modes proven.
pub(crate) fn run(p: &Program) -> Result<Vec<&'static str>, VerifyError> {
    let plan = deadlock_free_plan(p)?;
    let mut modes = Vec::new();
    let mut todo = Vec::new();
    if p.outofplace {
        todo.push(Mode::OutOfPlace);
    }
    if p.inplace {
        todo.push(Mode::InPlace);
    }
    // The aliasing modes are independent runs: use a thread each.
    let results = crate::par::map(&todo, |&mode| check_mode(&plan, mode));
    for (mode, r) in todo.iter().zip(results) {
        r?;
        modes.push(mode.name());
    }
    Ok(modes)
}

/// Execute one aliasing mode and check the post-condition.
fn check_mode(plan: &Plan, mode: Mode) -> Result<(), VerifyError> {
    let p = plan.p;
    let ranks = execute::<Fp>(plan, mode)?;
    if let Err((r, k, _, _)) = postcondition(plan, mode, &ranks) {
        // Diagnose exactly.
        let exact = execute::<Exact>(plan, mode)?;
        let detail = match postcondition(plan, mode, &exact) {
            Err((r2, k2, got, want)) => {
                let where_ = if p.gpus[plan.idx.gpu_of_rank[r2]].o_chunks > 0 {
                    format!("o[{k2}]")
                } else {
                    format!("i[{}]", r2 * (p.nchunksperloop / p.ngpus) as usize + k2)
                };
                if got.0.is_empty() {
                    format!("rank {r2} output chunk {k2} ({where_}) is never written")
                } else {
                    format!("rank {r2} output chunk {k2} ({where_}) {}", got.diff(&want))
                }
            }
            Ok(()) => format!("rank {r} output chunk {k} is wrong"),
        };
        return Err(VerifyError::new(
            "postcondition",
            format!("{} mode: {detail}", mode.name()),
        ));
    }
    Ok(())
}
