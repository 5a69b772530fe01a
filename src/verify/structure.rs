//! Static rules: structure, MSCCL limits, connection pairing, dependency
//! rules (msccl-xml.md §3, §6, §8.1, §8.2 items 1–10), one function per
//! family. Every rule by the name it is reported under (docs/verifier.md
//! has the same table):
//!
//! - the program ([`program`]): `ngpus`
//!   (≥ 1), `nchannels` (1..=32), `geometry` (nchunksperloop a positive
//!   multiple of ngpus, or for allreduce ≥ 1; in-place or out-of-place allowed), `bytes-window`
//!   (0 ≤ minBytes; maxBytes 0 or ≥ minBytes), `gpu-ids` (one `<gpu>` per
//!   rank).
//! - each GPU ([`gpu`]): `geometry` (`i_chunks`, `o_chunks` as the op's
//!   buffers have them, msccl-xml.md §5.2; `s_chunks` ≥ 0),
//!   `gpu-ids` (≥ 1 threadblock), `tb-ids` (dense, unique), `tb-count` (the
//!   runtime's id limit; the SM count), `parse-nodes` (< 4096 per rank).
//! - its threadblocks ([`threadblocks`]): `peer` (−1 or another rank),
//!   `channel` (0..nchannels), `connection` (one threadblock per channel,
//!   peer and direction; ≤ 32 per channel and direction), `step-count`
//!   (64 executor, 256 legacy).
//! - their steps ([`steps`]): `step-index` (`s` = position), `peer` (a
//!   send-type step has a send peer, a receive-type one a receive peer),
//!   `count` (1..=71), `range` (every named range inside its buffer),
//!   `input-write` (out-of-place files never write `i`), `dependency`
//!   (both or neither of depid/deps; another threadblock of the GPU; not a
//!   `nop`; target id ≤ 127), `hasdep` (the target publishes), `nop-chain`
//!   (a real step after `nop`s with dependencies has one itself),
//!   `re-fusion` (fused `re` steps have equal cnt).
//! - connections ([`pairing`]): `pairing` (a sender iff a receiver; equal
//!   numbers of sends and receives; the k-th of each with equal cnt).

use super::{VerifyError, VerifyOptions};
use crate::ir::msccl;
use crate::ir::{Buf, Collective, GpuProgram, Location, Program, Runtime, StepKind, Threadblock};
use rustc_hash::FxHashMap as HashMap;

/// Most TBs with a send (or receive) peer on one channel.
const MAX_PEER_TBS_PER_CHAN: usize = msccl::MAX_TBS_PER_CHANNEL;
const MAX_CNT: i64 = msccl::MAX_CNT as i64;
const MAX_DEP_TARGET_TB: i64 = msccl::MAX_DEP_TARGET_TB as i64;
const MAX_PARSE_NODES: usize = msccl::MAX_PARSE_NODES;
const MAX_OFF: i64 = msccl::MAX_CHUNKS_PER_LOOP as i64;
/// Chunks a step can reach in any buffer: an int16 offset plus `cnt`.
pub(crate) const REACH: i64 = MAX_OFF + msccl::MAX_CNT as i64;
const MAX_CHANNELS: i64 = msccl::MAX_CHANNELS as i64;

macro_rules! fail {
    ($errs:expr, $rule:expr, $($arg:tt)*) => {
        $errs.push(VerifyError::new($rule, format!($($arg)*)))
    };
}

macro_rules! fail_at {
    ($errs:expr, $at:expr, $rule:expr, $($arg:tt)*) => {
        $errs.push(VerifyError::located($rule, $at, format!($($arg)*)))
    };
}

/// Map rank → index into `p.gpus`, and per GPU TB id → index. Only valid
/// after `check` passed.
pub(crate) struct Index {
    pub gpu_of_rank: Vec<usize>,
    pub tb_of_id: Vec<HashMap<i64, usize>>,
}

impl Index {
    pub fn new(p: &Program) -> Self {
        let n = p.ngpus.max(0) as usize;
        let mut gpu_of_rank = vec![usize::MAX; n];
        for (gi, g) in p.gpus.iter().enumerate() {
            if g.id >= 0 && (g.id as usize) < n {
                gpu_of_rank[g.id as usize] = gi;
            }
        }
        let tb_of_id = p
            .gpus
            .iter()
            .map(|g| g.tbs.iter().enumerate().map(|(i, t)| (t.id, i)).collect())
            .collect();
        Index {
            gpu_of_rank,
            tb_of_id,
        }
    }
}

/// Every structural violation of `p` judged for each of `runtimes`: per
/// runtime, the violations in the order the GPUs, threadblocks and steps
/// come. The rules
/// that do not depend on the runtime (most of them: every step's) are
/// checked once, and the GPUs are checked in ranges on the machine's
/// cores.
pub(crate) fn check_for(
    p: &Program,
    opts: &VerifyOptions,
    runtimes: &[Runtime],
) -> Vec<Vec<VerifyError>> {
    let mut errs = Vec::new();
    if !program(p, &mut errs) {
        return vec![errs; runtimes.len()];
    }
    let idx = Index::new(p);
    let parts = crate::par::ranges(p.gpus.len(), 64);
    let found = crate::par::map(&parts, |range| {
        let mut out = vec![Vec::new(); runtimes.len()];
        let mut shared = Vec::new();
        for g in &p.gpus[range.clone()] {
            for (list, &rt) in out.iter_mut().zip(runtimes) {
                let o = VerifyOptions {
                    runtime: Some(rt),
                    ..opts.clone()
                };
                gpu(p, g, &o, list);
                threadblocks(p, g, rt, list);
            }
            let gi = idx.gpu_of_rank[g.id as usize];
            for (ti, t) in g.tbs.iter().enumerate() {
                steps(p, g, &idx.tb_of_id[gi], ti, t, opts, &mut shared);
            }
            for list in &mut out {
                list.extend(shared.iter().cloned());
            }
            shared.clear();
        }
        out
    });
    let mut out = vec![Vec::new(); runtimes.len()];
    for part in found {
        for (list, mut more) in out.iter_mut().zip(part) {
            list.append(&mut more);
        }
    }
    // Pairing only where everything else holds.
    if out.iter().any(Vec::is_empty) {
        let pairs: Vec<VerifyError> =
            crate::par::map(&parts, |range| pairing(p, &idx, range.clone()))
                .into_iter()
                .flatten()
                .collect();
        for list in out.iter_mut().filter(|l| l.is_empty()) {
            list.extend(pairs.iter().cloned());
        }
    }
    out
}

/// A threadblock's location (tb by id).
fn tb_at(r: i64, t: &Threadblock, step: Option<usize>) -> Location {
    Location {
        rank: Some(r as usize),
        tb: Some(t.id),
        step,
        line: step.map_or(t.line, |s| t.steps[s].line),
    }
}

/// The program-wide rules; false when the rest cannot be checked.
fn program(p: &Program, errs: &mut Vec<VerifyError>) -> bool {
    if p.ngpus < 1 {
        fail!(errs, "ngpus", "ngpus is {}; it must be at least 1", p.ngpus);
        return false;
    }
    let n = p.ngpus as usize;
    if !(1..=MAX_CHANNELS).contains(&p.nchannels) {
        fail!(
            errs,
            "nchannels",
            "nchannels is {}; it must be 1..={MAX_CHANNELS}",
            p.nchannels
        );
    }
    // Reduce-scatter and allgather cut the buffer into ngpus shards; an
    // allreduce may have any number of chunks (msccl-xml.md §5).
    let shards = p.coll != Collective::AllReduce;
    if p.nchunksperloop < 1 || (shards && p.nchunksperloop % p.ngpus != 0) {
        let want = if shards {
            format!("a positive multiple of ngpus {}", p.ngpus)
        } else {
            "at least 1".to_string()
        };
        fail!(
            errs,
            "geometry",
            "nchunksperloop {} must be {want}",
            p.nchunksperloop
        );
        return false;
    }
    if p.nchunksperloop > REACH {
        // Beyond this no step can name a chunk, so the chunks there are
        // never read or written (and the symbolic pass would hold state
        // for every one of them).
        fail!(
            errs,
            "geometry",
            "nchunksperloop {} is above {REACH}: step offsets are int16 (at most {MAX_OFF}) and cnt at most {}, so the chunks past that can never be read or written",
            p.nchunksperloop,
            msccl::MAX_CNT
        );
        return false;
    }
    if !p.inplace && !p.outofplace {
        fail!(
            errs,
            "geometry",
            "the algorithm allows neither in-place nor out-of-place calls"
        );
    }
    if p.min_bytes < 0 {
        fail!(errs, "bytes-window", "minBytes {} is negative", p.min_bytes);
    }
    if let Some(mx) = p.max_bytes {
        if mx < 0 || (mx > 0 && mx < p.min_bytes) {
            fail!(
                errs,
                "bytes-window",
                "maxBytes {mx} must be 0 (no limit) or at least minBytes {}",
                p.min_bytes
            );
        }
    }
    // Exactly one <gpu> per rank.
    let mut seen = vec![0usize; n];
    for g in &p.gpus {
        if g.id < 0 || g.id as usize >= n {
            fail!(
                errs,
                "gpu-ids",
                "<gpu id=\"{}\"> (line {}) is outside 0..{}",
                g.id,
                g.line,
                n - 1
            );
        } else {
            seen[g.id as usize] += 1;
        }
    }
    for (r, &c) in seen.iter().enumerate() {
        if c == 0 {
            fail!(errs, "gpu-ids", "rank {r} has no <gpu> element");
        } else if c > 1 {
            fail!(errs, "gpu-ids", "rank {r} has {c} <gpu> elements");
        }
    }
    errs.is_empty()
}

/// One GPU's buffers, threadblock ids and counts.
fn gpu(p: &Program, g: &GpuProgram, opts: &VerifyOptions, errs: &mut Vec<VerifyError>) {
    let r = g.id;
    let n = p.ngpus as usize;
    let max_tb_id = opts.runtime.unwrap_or(p.runtime).max_tb_id();
    // Buffer geometry (§5.2): each buffer as the op has it, or 0 in an
    // in-place-only file that never names it.
    let want = p.coll.buffers(p.nchunksperloop as usize, n);
    let names = |buf: Buf| {
        g.tbs.iter().flat_map(|t| t.steps.iter()).any(|s| {
            s.kind != StepKind::Nop
                && ((s.srcbuf == buf && s.srcoff >= 0) || (s.dstbuf == buf && s.dstoff >= 0))
        })
    };
    for (name, buf, have, want) in [
        ("i_chunks", Buf::Input, g.i_chunks, want.i_chunks),
        ("o_chunks", Buf::Output, g.o_chunks, want.o_chunks),
    ] {
        let ok = have == want as i64 || (have == 0 && !p.outofplace && !names(buf));
        if !ok {
            fail!(
                errs,
                "geometry",
                "rank {r}: {name} is {have} but a {} of nchunksperloop {} over {n} ranks has {want}{}",
                p.coll.display(),
                p.nchunksperloop,
                if p.outofplace {
                    ""
                } else {
                    " (or 0 for an in-place-only file that never names it)"
                }
            );
        }
    }
    if g.s_chunks < 0 {
        fail!(
            errs,
            "geometry",
            "rank {r}: s_chunks {} is negative",
            g.s_chunks
        );
    }
    if g.tbs.is_empty() {
        fail!(errs, "gpu-ids", "rank {r} has no threadblocks");
    }
    // Threadblock ids dense, unique, within the runtime's range.
    let mut ids: Vec<i64> = g.tbs.iter().map(|t| t.id).collect();
    ids.sort_unstable();
    for (want, &id) in ids.iter().enumerate() {
        if id != want as i64 {
            if want > 0 && ids[want - 1] == id {
                fail!(
                    errs,
                    "tb-ids",
                    "rank {r}: threadblock id {id} is used twice"
                );
            } else {
                fail!(
                    errs,
                    "tb-ids",
                    "rank {r}: threadblock ids must be dense 0..{}: id {want} is missing",
                    g.tbs.len() - 1
                );
            }
            break;
        }
    }
    if g.tbs.len() > max_tb_id {
        fail!(
            errs,
            "tb-count",
            "rank {r}: {} threadblocks exceed the {} runtime's limit of {max_tb_id}",
            g.tbs.len(),
            opts.runtime.unwrap_or(p.runtime).name()
        );
    }
    if let Some(m) = opts.max_tbs {
        if g.tbs.len() > m {
            fail!(
                errs,
                "tb-count",
                "rank {r}: {} threadblocks exceed the GPU's {m} SMs (all must be co-resident)",
                g.tbs.len()
            );
        }
    }
    let nodes = 1 + n + g.tbs.len() + g.tbs.iter().map(|t| t.steps.len()).sum::<usize>();
    if nodes > MAX_PARSE_NODES {
        fail!(
            errs,
            "parse-nodes",
            "rank {r}: {nodes} XML nodes (1 + ngpus + tbs + steps) exceed the runtime parser's {MAX_PARSE_NODES}"
        );
    }
}

/// One GPU's threadblocks: peers, channels, connections, step counts.
fn threadblocks(p: &Program, g: &GpuProgram, runtime: Runtime, errs: &mut Vec<VerifyError>) {
    let r = g.id;
    let n = p.ngpus as usize;
    let max_steps = runtime.max_steps();
    // One TB per (chan, peer, direction); ≤ 32 peer TBs per channel.
    let mut send_conn: HashMap<(i64, i64), i64> = HashMap::default();
    let mut recv_conn: HashMap<(i64, i64), i64> = HashMap::default();
    let mut sends_per_chan: HashMap<i64, usize> = HashMap::default();
    let mut recvs_per_chan: HashMap<i64, usize> = HashMap::default();
    for t in &g.tbs {
        let tb = t.id;
        let at = tb_at(r, t, None);
        for (what, peer) in [("send", t.send), ("recv", t.recv)] {
            if peer < -1 || peer >= n as i64 {
                fail_at!(
                    errs,
                    at,
                    "peer",
                    "rank {r} tb {tb} (line {}): {what}=\"{peer}\" is not -1 or a rank 0..{}",
                    t.line,
                    n - 1
                );
            } else if peer == r {
                fail_at!(
                    errs,
                    at,
                    "peer",
                    "rank {r} tb {tb} (line {}): {what} peer is its own rank",
                    t.line
                );
            }
        }
        if t.chan < 0 || t.chan >= p.nchannels {
            fail_at!(
                errs,
                at,
                "channel",
                "rank {r} tb {tb} (line {}): chan {} is outside 0..nchannels-1 = 0..{}",
                t.line,
                t.chan,
                p.nchannels - 1
            );
        }
        if t.send >= 0 {
            if let Some(other) = send_conn.insert((t.chan, t.send), tb) {
                fail_at!(
                    errs,
                    at,
                    "connection",
                    "rank {r}: tbs {other} and {tb} both send to rank {} on channel {}",
                    t.send,
                    t.chan
                );
            }
            *sends_per_chan.entry(t.chan).or_default() += 1;
        }
        if t.recv >= 0 {
            if let Some(other) = recv_conn.insert((t.chan, t.recv), tb) {
                fail_at!(
                    errs,
                    at,
                    "connection",
                    "rank {r}: tbs {other} and {tb} both receive from rank {} on channel {}",
                    t.recv,
                    t.chan
                );
            }
            *recvs_per_chan.entry(t.chan).or_default() += 1;
        }
        if t.steps.len() > max_steps {
            fail_at!(
                errs,
                at,
                "step-count",
                "rank {r} tb {tb}: {} steps exceed the {} runtime's {max_steps} per threadblock",
                t.steps.len(),
                runtime.name()
            );
        }
        // The first step of a kind the runtime does not run: every launch
        // that selects the file fails (RCCL's reduced kernel set).
        if let Some((i, st)) = t
            .steps
            .iter()
            .enumerate()
            .find(|(_, st)| !runtime.runs(st.kind))
        {
            fail_at!(
                errs,
                tb_at(r, t, Some(i)),
                "step-kind",
                "rank {r} tb {tb} step {i}: type \"{}\" does not run on the {} runtime (it runs only s, r, re, cpy and nop; every launch that selects the file fails)",
                st.kind.as_str(),
                runtime.name()
            );
        }
    }
    // In channel order, sends then receives (a map's order is the hash's).
    let mut per_chan: Vec<(i64, usize)> = sends_per_chan.into_iter().collect();
    per_chan.sort_unstable();
    let mut recvs: Vec<(i64, usize)> = recvs_per_chan.into_iter().collect();
    recvs.sort_unstable();
    per_chan.extend(recvs);
    for (c, k) in &per_chan {
        if *k > MAX_PEER_TBS_PER_CHAN {
            fail!(
                errs,
                "connection",
                "rank {r}: {k} threadblocks with a peer in one direction on channel {c} (at most {MAX_PEER_TBS_PER_CHAN})"
            );
        }
    }
}

/// The steps of threadblock `ti` of GPU `g`; `tb_of_id` maps that GPU's
/// threadblock ids to positions.
fn steps(
    p: &Program,
    g: &GpuProgram,
    tb_of_id: &HashMap<i64, usize>,
    ti: usize,
    t: &Threadblock,
    opts: &VerifyOptions,
    errs: &mut Vec<VerifyError>,
) {
    let r = g.id;
    let tb = t.id;
    let mut prev_nop_dep = false;
    let fused = crate::ir::msccl::reduce_continuations(&t.steps);
    let mut prev_re: Option<&crate::ir::Step> = None;
    for (si, s) in t.steps.iter().enumerate() {
        let here = Here(p, r as usize, ti, si);
        let at = tb_at(r, t, Some(si));
        if s.s != si as i64 {
            fail_at!(
                errs,
                at,
                "step-index",
                "{here}: s=\"{}\" but the runtime numbers steps by position ({si})",
                s.s
            );
        }
        if s.kind.sends() && t.send < 0 {
            fail_at!(
                errs,
                at,
                "peer",
                "{here}: {} sends but tb {tb} has send=-1",
                s.kind
            );
        }
        if s.kind.recvs() && t.recv < 0 {
            fail_at!(
                errs,
                at,
                "peer",
                "{here}: {} receives but tb {tb} has recv=-1",
                s.kind
            );
        }
        if s.kind != StepKind::Nop {
            if s.cnt < 1 || s.cnt > MAX_CNT {
                fail_at!(
                    errs,
                    at,
                    "count",
                    "{here}: cnt {} must be 1..={MAX_CNT}",
                    s.cnt
                );
            }
            // Every buffer the step names: used fields must be in range;
            // informational ones may be -1 (unused) or in range.
            let used_src = s.kind.reads_src();
            let used_dst = s.kind.writes_dst() || s.kind.reads_dst();
            for (which, buf, off, used) in [
                ("src", s.srcbuf, s.srcoff, used_src),
                ("dst", s.dstbuf, s.dstoff, used_dst),
            ] {
                let size = g.chunks(buf);
                if off == -1 && !used {
                    continue;
                }
                if !(0..=MAX_OFF).contains(&off) || off + s.cnt.max(1) > size {
                    fail_at!(
                        errs,
                        at,
                        "range",
                        "{here}: {which} {}[{off}..{}] is outside the {} chunks of buffer {}",
                        buf.letter(),
                        off + s.cnt,
                        size,
                        buf.letter()
                    );
                }
            }
            if p.outofplace && !opts.input_writable && s.kind.writes_dst() && s.dstbuf == Buf::Input
            {
                fail_at!(
                    errs,
                    at,
                    "input-write",
                    "{here}: {} writes the input buffer i, but the algorithm allows out-of-place calls, whose send buffer is const",
                    s.kind
                );
            }
        }
        dependency(g, tb_of_id, ti, si, &here, at, errs);
        if s.kind == StepKind::Nop {
            prev_nop_dep |= s.depid >= 0;
        } else {
            if prev_nop_dep && s.depid < 0 {
                fail_at!(
                    errs,
                    at,
                    "nop-chain",
                    "{here}: follows nop steps with dependencies, so it must itself have depid >= 0"
                );
            }
            prev_nop_dep = false;
        }
        // The re steps the runtime fuses need equal cnt.
        if s.kind == StepKind::Reduce {
            if let Some(q) = fused[si].then_some(prev_re).flatten() {
                if q.cnt != s.cnt {
                    fail_at!(
                        errs,
                        at,
                        "re-fusion",
                        "{here}: the runtime fuses this re with the previous one and keeps only the last cnt ({} vs {})",
                        s.cnt,
                        q.cnt
                    );
                }
            }
            prev_re = Some(s);
        }
    }
}

/// The dependency of step `si` of threadblock `ti` (§6).
fn dependency(
    g: &GpuProgram,
    tb_of_id: &HashMap<i64, usize>,
    ti: usize,
    si: usize,
    here: &Here,
    at: Location,
    errs: &mut Vec<VerifyError>,
) {
    let r = g.id;
    let s = &g.tbs[ti].steps[si];
    if (s.depid >= 0) != (s.deps >= 0) || s.depid < -1 || s.deps < -1 {
        fail_at!(
            errs,
            at,
            "dependency",
            "{here}: depid={} deps={}: both must be -1 or both name a step",
            s.depid,
            s.deps
        );
        return;
    }
    let Some((d, ds)) = s.dep() else { return };
    let Some(&dti) = tb_of_id.get(&(d as i64)) else {
        fail_at!(
            errs,
            at,
            "dependency",
            "{here}: depid {d} is not a threadblock of rank {r}"
        );
        return;
    };
    let dt = &g.tbs[dti];
    if dti == ti {
        fail_at!(
            errs,
            at,
            "dependency",
            "{here}: depends on its own threadblock"
        );
    } else if ds >= dt.steps.len() {
        fail_at!(
            errs,
            at,
            "dependency",
            "{here}: deps {ds} is beyond the {} steps of tb {d}",
            dt.steps.len()
        );
    } else {
        let target = &dt.steps[ds];
        if target.kind == StepKind::Nop {
            fail_at!(
                errs,
                at,
                "dependency",
                "{here}: waits on tb {d} step {ds}, a nop, which publishes nothing"
            );
        } else if !target.hasdep {
            fail_at!(
                errs,
                at,
                "hasdep",
                "{here}: waits on tb {d} step {ds}, which lacks hasdep=\"1\" (the waiter would never be released in the last tile)"
            );
        }
        if d as i64 > MAX_DEP_TARGET_TB {
            fail_at!(
                errs,
                at,
                "dependency",
                "{here}: dependency target tb {d} has an id above {MAX_DEP_TARGET_TB} (stored in an int8)"
            );
        }
    }
}

/// Connection pairing (§8.2 item 3), for the `<gpu>` elements in `gpus`.
fn pairing(p: &Program, idx: &Index, gpus: std::ops::Range<usize>) -> Vec<VerifyError> {
    let mut errs = Vec::new();
    for g in &p.gpus[gpus] {
        let a = g.id as usize;
        for t in &g.tbs {
            if t.send < 0 {
                continue;
            }
            let at = tb_at(g.id, t, None);
            let b = t.send as usize;
            let gb = &p.gpus[idx.gpu_of_rank[b]];
            let Some(rt) = gb
                .tbs
                .iter()
                .find(|u| u.recv == a as i64 && u.chan == t.chan)
            else {
                fail_at!(
                    errs,
                    at,
                    "pairing",
                    "rank {a} tb {} sends to rank {b} on channel {}, but rank {b} has no threadblock receiving from rank {a} on that channel",
                    t.id,
                    t.chan
                );
                continue;
            };
            let sends: Vec<(usize, i64)> = t
                .steps
                .iter()
                .enumerate()
                .filter(|(_, s)| s.kind.sends())
                .map(|(i, s)| (i, s.cnt))
                .collect();
            let recvs: Vec<(usize, i64)> = rt
                .steps
                .iter()
                .enumerate()
                .filter(|(_, s)| s.kind.recvs())
                .map(|(i, s)| (i, s.cnt))
                .collect();
            if sends.len() != recvs.len() {
                fail_at!(
                    errs,
                    at,
                    "pairing",
                    "connection rank {a} -> rank {b} channel {}: tb {} of rank {a} sends {} times but tb {} of rank {b} receives {} times",
                    t.chan,
                    t.id,
                    sends.len(),
                    rt.id,
                    recvs.len()
                );
                continue;
            }
            for (k, (s, r)) in sends.iter().zip(recvs.iter()).enumerate() {
                if s.1 != r.1 {
                    fail_at!(
                        errs,
                        tb_at(g.id, t, Some(s.0)),
                        "pairing",
                        "connection rank {a} -> rank {b} channel {}: send #{k} (rank {a} tb {} step {}) has cnt {} but its receive (rank {b} tb {} step {}) has cnt {}",
                        t.chan,
                        t.id,
                        s.0,
                        s.1,
                        rt.id,
                        r.0,
                        r.1
                    );
                    break;
                }
            }
        }
        for t in &g.tbs {
            if t.recv < 0 {
                continue;
            }
            let b = t.recv as usize;
            let gb = &p.gpus[idx.gpu_of_rank[b]];
            if !gb.tbs.iter().any(|u| u.send == g.id && u.chan == t.chan) {
                fail_at!(
                    errs,
                    tb_at(g.id, t, None),
                    "pairing",
                    "rank {} tb {} receives from rank {b} on channel {}, but rank {b} has no threadblock sending to rank {} on that channel",
                    g.id,
                    t.id,
                    t.chan,
                    g.id
                );
            }
        }
    }
    errs
}

/// A step's location, formatted only when a message needs it.
struct Here<'a>(&'a Program, usize, usize, usize);

impl std::fmt::Display for Here<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&super::at(self.0, self.1, self.2, self.3))
    }
}
