//! The event plan (steps 1 and 2 of the module doc): the program's steps
//! numbered globally, their events, the pairing of sends with receives,
//! the dependencies, the happens-before edges and an execution order
//! (Kahn), and the buffering a program will meet (`deadlock_free_plan`).

use crate::ir::resolve::resolve;
use crate::ir::{Buf, Location, Program, Resolved, Step, StepKind};
use crate::verify::structure::Index;
use crate::verify::{at, location, VerifyError};

/// The flattened program with pairing and an execution order. Global step
/// ids, event ids and arena offsets are u32 (a Program read from XML or
/// lowered has far fewer than 2³² steps; `plan` checks).
pub(super) struct Plan<'p> {
    pub(super) p: &'p Program,
    /// The steps in execution order, each with the fields execution reads.
    /// Execution follows happens-before, which jumps all over the ranks;
    /// reading the steps in the order they run, with the message and
    /// snapshot arenas numbered in that order too, keeps those reads
    /// sequential and leaves only the ranks' own state to random access.
    pub(super) run: Vec<Instr>,
    pub(super) idx: Index,
    /// The message arena's size in chunks (the most in flight at once).
    pub(super) msg_total: usize,
    /// The snapshot arena's size: vector clocks (a rank's threadblock
    /// count each) that some waiter has yet to read, at most at once.
    pub(super) snap_total: usize,
}

pub(super) const NONE: u32 = u32::MAX;

/// A step as execution reads it, with everything resolved that execution
/// would otherwise look up elsewhere, in 32 bytes: the structural rules
/// have passed, so threadblocks and steps number fewer than 2¹⁶, offsets
/// fit an i16 (≤ 32767, or −1) and `cnt` a u8 (≤ 71; a `nop`'s is 0 here,
/// and its offsets −1, as execution ignores them).
#[derive(Clone, Copy)]
pub(super) struct Instr {
    /// Where the step is: `<gpu>` position, threadblock position, step.
    pub(super) gi: u32,
    pub(super) ti: u16,
    pub(super) si: u16,
    pub(super) kind: StepKind,
    pub(super) srcbuf: Buf,
    pub(super) dstbuf: Buf,
    pub(super) cnt: u8,
    pub(super) srcoff: i16,
    pub(super) dstoff: i16,
    /// Receiving steps: where the incoming message starts in the arena.
    pub(super) msg_in: u32,
    /// Sending steps: where the outgoing message starts in the arena.
    pub(super) msg_out: u32,
    /// Steps with a dependency: where the target's snapshot starts in the
    /// snapshot arena (NONE if it has none).
    pub(super) dep_snap: u32,
    /// `hasdep` steps some step waits on: where this step's snapshot
    /// starts (NONE for every other step).
    pub(super) snap: u32,
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
fn recv_event(first: u32, kind: StepKind, i: u32) -> u32 {
    if kind.sends() {
        first + 2 * i
    } else {
        first + i
    }
}

/// The send event of call i of a sending step whose first event is `first`.
fn send_event(first: u32, kind: StepKind, i: u32) -> u32 {
    if kind.recvs() {
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
/// executor's do. (One slot under those rules deadlocks every ring; a
/// model with one message per step that frees the slot when the receive
/// starts misses deadlocks the executor hits: graded tree classes, whose
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
    let fl = Flat::new(p);
    let total = fl.loc.len();
    let ev = events(p, split, total)?;
    let pair_prev = pair(&fl, &res)?;
    let dep_of = dependencies(&fl, &res);
    let (start, indeg, targets) = adjacency(&fl, split, &ev, &dep_of, &pair_prev);
    let order = order(&fl, &ev, &start, indeg, &targets)?;
    drop((start, targets, ev));
    let (run, msg_total, snap_total) = instrs(&fl, &order, &pair_prev, &dep_of)?;
    Ok(Plan {
        p,
        run,
        idx,
        msg_total,
        snap_total,
    })
}

/// The program's steps numbered globally: rank by rank, threadblock by
/// threadblock.
struct Flat<'p> {
    p: &'p Program,
    /// Per gpu, the global id of each threadblock's first step.
    base: Vec<Vec<u32>>,
    /// (gi, ti, si) per global step id.
    loc: Vec<(u32, u32, u32)>,
    /// The kind of each step by global id (what the edges of a step's
    /// peer need, without three pointer hops into the Program).
    kinds: Vec<StepKind>,
}

impl<'p> Flat<'p> {
    fn new(p: &'p Program) -> Flat<'p> {
        let mut base: Vec<Vec<u32>> = Vec::with_capacity(p.gpus.len());
        let mut loc = Vec::with_capacity(p.num_steps());
        let mut kinds = Vec::with_capacity(p.num_steps());
        for (gi, g) in p.gpus.iter().enumerate() {
            let mut b = Vec::with_capacity(g.tbs.len());
            for (ti, t) in g.tbs.iter().enumerate() {
                b.push(loc.len() as u32);
                for si in 0..t.steps.len() {
                    loc.push((gi as u32, ti as u32, si as u32));
                    kinds.push(t.steps[si].kind);
                }
            }
            base.push(b);
        }
        Flat {
            p,
            base,
            loc,
            kinds,
        }
    }
    fn here(&self, gid: usize) -> String {
        let p = self.p;
        let (gi, ti, si) = self.loc[gid];
        at(p, p.gpus[gi as usize].id as usize, ti as usize, si as usize)
    }
    fn locate(&self, gid: usize) -> Option<Location> {
        let p = self.p;
        let (gi, ti, si) = self.loc[gid];
        location(p, gi as usize, ti as usize, si as usize)
    }
}

/// Events: a step's first event, and its last (the same for one-event
/// steps; the next id for receive-then-send steps).
struct Events {
    first: Vec<u32>,
    last: Vec<u32>,
    /// Events in all.
    nodes: usize,
}

/// Number the events of the `total` steps (see `Events`).
fn events(p: &Program, split: bool, total: usize) -> Result<Events, VerifyError> {
    let mut first = vec![0u32; total];
    let mut last = vec![0u32; total];
    let mut nodes = 0usize;
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
    }
    Ok(Events { first, last, nodes })
}

/// Per receiving step, the step that sends it its message.
fn pair(fl: &Flat, res: &Resolved) -> Result<Vec<u32>, VerifyError> {
    let (p, base, total) = (fl.p, &fl.base, fl.loc.len());
    // Pairing (counts and cnt already checked by the structure pass): the
    // k-th send of a threadblock with the k-th receive of the peer's
    // threadblock on the same channel.
    let mut pair_prev = vec![NONE; total];
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
                        fl.here(rcv),
                        rs.cnt,
                        ss.cnt
                    ),
                )
                .with_at(fl.locate(rcv)));
            }
            pair_prev[rcv] = snd as u32;
        }
    }
    for (gid, &prev) in pair_prev.iter().enumerate() {
        if prev == NONE && fl.kinds[gid].recvs() {
            return Err(VerifyError::new(
                "pairing",
                format!("{} receives but nothing is sent to it", fl.here(gid)),
            )
            .with_at(fl.locate(gid)));
        }
    }
    Ok(pair_prev)
}

/// Per step with a dependency, the global id of the step it waits on.
fn dependencies(fl: &Flat, res: &Resolved) -> Vec<u32> {
    let (base, total) = (&fl.base, fl.loc.len());
    let mut dep_of = vec![NONE; total];
    for t in &res.tbs {
        for si in 0..t.steps {
            if let Some((d, ds)) = res.deps[t.first_step + si] {
                let dt = &res.tbs[d];
                dep_of[base[t.gpu][t.local] as usize + si] = base[dt.gpu][dt.local] + ds as u32;
            }
        }
    }
    dep_of
}

/// Every edge of the event graph (see `plan`), passed to `f`.
fn for_each_edge(
    fl: &Flat,
    split: bool,
    ev: &Events,
    dep_of: &[u32],
    pair_prev: &[u32],
    f: &mut dyn FnMut(u32, u32),
) {
    let (p, first, last) = (fl.p, &ev.first, &ev.last);
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
                let sk = fl.kinds[snd];
                for i in 0..calls_of(st, split) {
                    let (r, sent) = (recv_event(fm, st.kind, i), send_event(first[snd], sk, i));
                    f(sent, r);
                    if cons2 != NONE {
                        // Two slots: message m needs message m − 2
                        // consumed.
                        f(cons2, sent);
                    }
                    // A fused receive-and-send holds its input slot
                    // until its own output has room.
                    let consumed = if st.kind.sends() {
                        send_event(fm, st.kind, i)
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
}

/// The event graph as a compressed adjacency: per event its first edge in
/// `targets`, its in-degree, and the edges' targets. Every edge, in one
/// enumeration run twice: to count out-degrees, then to fill the
/// compressed adjacency.
fn adjacency(
    fl: &Flat,
    split: bool,
    ev: &Events,
    dep_of: &[u32],
    pair_prev: &[u32],
) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let nodes = ev.nodes;
    let for_each_edge =
        |f: &mut dyn FnMut(u32, u32)| for_each_edge(fl, split, ev, dep_of, pair_prev, f);
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
    (start, indeg, targets)
}

/// The steps in an execution order, or the deadlock when the event graph
/// has a cycle.
fn order(
    fl: &Flat,
    ev: &Events,
    start: &[u32],
    mut indeg: Vec<u32>,
    targets: &[u32],
) -> Result<Vec<u32>, VerifyError> {
    let (first, nodes, total) = (&ev.first, ev.nodes, fl.loc.len());
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
                fl.here(s)
            ),
        )
        .with_at(fl.locate(s)));
    }
    Ok(order)
}

/// Slots of an arena handed out in execution order and given back once
/// their last reader has run, so the arena holds only what is live at
/// once (the messages in flight, the vector clocks some waiter has yet to
/// read) and stays small and warm in the cache.
#[derive(Default)]
struct Arena {
    /// Free slots, by length.
    free: Vec<Vec<u32>>,
    /// Entries handed out so far (the arena's size).
    size: usize,
}

impl Arena {
    /// A slot of `len` entries; None when the arena would pass u32.
    fn take(&mut self, len: u32) -> Option<u32> {
        if let Some(at) = self.free.get_mut(len as usize).and_then(Vec::pop) {
            return Some(at);
        }
        let at = self.size;
        self.size += len as usize;
        (self.size < NONE as usize).then_some(at as u32)
    }
    fn give(&mut self, at: u32, len: u32) {
        let len = len as usize;
        if self.free.len() <= len {
            self.free.resize_with(len + 1, Vec::new);
        }
        self.free[len].push(at);
    }
}

/// The steps as execution reads them, in `order`, with their message and
/// snapshot slots ([`Arena`]): a sender runs before its receiver (its
/// first event precedes its send, which precedes the receive, the
/// receiver's first event) and a dependency's target before its waiters,
/// so every slot a step reads was handed out before it. A receiver gives
/// its message's slot back after taking its own output's; a target's
/// snapshot slot comes back after its last waiter, and a `hasdep` step no
/// step waits on takes none. Returns the steps and both arenas' sizes.
fn instrs(
    fl: &Flat,
    order: &[u32],
    pair_prev: &[u32],
    dep_of: &[u32],
) -> Result<(Vec<Instr>, usize, usize), VerifyError> {
    let p = fl.p;
    let total = fl.loc.len();
    let too_big = |what: &str, n: usize| {
        VerifyError::new(
            "size",
            format!("{n} {what} is more than the verifier handles"),
        )
    };
    let narrow =
        |v: i64, what: &str| i16::try_from(v).map_err(|_| too_big(what, v.unsigned_abs() as usize));
    // Waiters per dependency target, counted down as they run.
    let mut waiters = vec![0u32; total];
    for &d in dep_of.iter().filter(|&&d| d != NONE) {
        waiters[d as usize] += 1;
    }
    // Each step packed in a pass over the Program in its own order, with
    // its sender's and its target's ids in `msg_in` and `dep_snap` and, if
    // it publishes (`hasdep`), its waiter count in `snap` for now; then
    // gathered in execution order (independent reads, which the processor
    // overlaps); then the arenas' slots assigned in that order.
    let mut packed = Vec::with_capacity(total);
    for (gi, g) in p.gpus.iter().enumerate() {
        for (ti, t) in g.tbs.iter().enumerate() {
            for (si, s) in t.steps.iter().enumerate() {
                let gid = packed.len();
                let nop = s.kind == StepKind::Nop;
                packed.push(Instr {
                    gi: gi as u32,
                    ti: u16::try_from(ti).map_err(|_| too_big("threadblocks on a rank", ti))?,
                    si: u16::try_from(si).map_err(|_| too_big("steps in a threadblock", si))?,
                    kind: s.kind,
                    srcbuf: s.srcbuf,
                    dstbuf: s.dstbuf,
                    cnt: if nop {
                        0
                    } else {
                        u8::try_from(s.cnt).map_err(|_| {
                            too_big("chunks in a step", s.cnt.unsigned_abs() as usize)
                        })?
                    },
                    srcoff: if nop {
                        -1
                    } else {
                        narrow(s.srcoff, "as a step's offset")?
                    },
                    dstoff: if nop {
                        -1
                    } else {
                        narrow(s.dstoff, "as a step's offset")?
                    },
                    msg_in: pair_prev[gid],
                    msg_out: NONE,
                    dep_snap: dep_of[gid],
                    snap: if s.hasdep { waiters[gid] } else { 0 },
                });
            }
        }
    }
    let mut run: Vec<Instr> = order.iter().map(|&g| packed[g as usize]).collect();
    drop(packed);
    let tbs = |s: &Instr| p.gpus[s.gi as usize].tbs.len() as u32;
    let (mut msgs, mut snaps) = (Arena::default(), Arena::default());
    // Per step id, once it has run: its message's and its snapshot's slot.
    let mut msg_at = vec![NONE; total];
    let mut snap_at = vec![NONE; total];
    for (s, &gid) in run.iter_mut().zip(order) {
        let gid = gid as usize;
        let len = u32::from(s.cnt);
        if s.kind.sends() {
            s.msg_out = msgs
                .take(len)
                .ok_or_else(|| too_big("chunks in messages", msgs.size))?;
            msg_at[gid] = s.msg_out;
        }
        if s.kind.recvs() {
            s.msg_in = msg_at[s.msg_in as usize];
            msgs.give(s.msg_in, len);
        }
        let d = s.dep_snap;
        if d != NONE {
            s.dep_snap = snap_at[d as usize];
            waiters[d as usize] -= 1;
            if waiters[d as usize] == 0 && s.dep_snap != NONE {
                snaps.give(s.dep_snap, tbs(s));
            }
        }
        let waited_on = s.snap > 0;
        s.snap = NONE;
        if waited_on {
            s.snap = snaps
                .take(tbs(s))
                .ok_or_else(|| too_big("vector-clock entries", snaps.size))?;
            snap_at[gid] = s.snap;
        }
    }
    Ok((run, msgs.size, snaps.size))
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
pub(super) fn deadlock_free_plan(p: &Program) -> Result<Plan<'_>, VerifyError> {
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
