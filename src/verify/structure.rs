//! Static rules: structure, MSCCL limits, connection pairing, dependency
//! rules (msccl-xml.md §3, §6, §8.1, §8.2 items 1–10).

use super::{at, VerifyError, VerifyOptions};
use crate::ir::{Buf, Collective, Program, StepKind};
use std::collections::HashMap;

use crate::ir::msccl;

/// Most TBs with a send (or receive) peer on one channel.
const MAX_PEER_TBS_PER_CHAN: usize = msccl::MAX_TBS_PER_CHANNEL;
const MAX_CNT: i64 = msccl::MAX_CNT as i64;
const MAX_DEP_TARGET_TB: i64 = msccl::MAX_DEP_TARGET_TB as i64;
const MAX_PARSE_NODES: usize = msccl::MAX_PARSE_NODES;
const MAX_OFF: i64 = msccl::MAX_CHUNKS_PER_LOOP as i64;

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

pub(crate) fn check(p: &Program, opts: &VerifyOptions) -> Vec<VerifyError> {
    let mut errs = Vec::new();
    macro_rules! fail {
        ($rule:expr, $($arg:tt)*) => { errs.push(VerifyError::new($rule, format!($($arg)*))) };
    }
    if p.coll != Collective::ReduceScatter {
        fail!(
            "collective",
            "coll {} is not supported: rscc verifies reduce-scatter schedules",
            p.coll.display()
        );
        return errs;
    }
    if p.ngpus < 1 {
        fail!("ngpus", "ngpus is {}; it must be at least 1", p.ngpus);
        return errs;
    }
    let n = p.ngpus as usize;
    if !(1..=32).contains(&p.nchannels) {
        fail!(
            "nchannels",
            "nchannels is {}; it must be 1..=32",
            p.nchannels
        );
    }
    if p.nchunksperloop < 1 || p.nchunksperloop % p.ngpus != 0 {
        fail!(
            "geometry",
            "nchunksperloop {} must be a positive multiple of ngpus {}",
            p.nchunksperloop,
            p.ngpus
        );
        return errs;
    }
    if !p.inplace && !p.outofplace {
        fail!(
            "geometry",
            "the algorithm allows neither in-place nor out-of-place calls"
        );
    }
    if p.min_bytes < 0 {
        fail!("bytes-window", "minBytes {} is negative", p.min_bytes);
    }
    if let Some(mx) = p.max_bytes {
        if mx < 0 || (mx > 0 && mx < p.min_bytes) {
            fail!(
                "bytes-window",
                "maxBytes {mx} must be 0 (no limit) or at least minBytes {}",
                p.min_bytes
            );
        }
    }
    let cps = p.nchunksperloop / p.ngpus;
    // Exactly one <gpu> per rank.
    let mut seen = vec![0usize; n];
    for g in &p.gpus {
        if g.id < 0 || g.id as usize >= n {
            fail!(
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
            fail!("gpu-ids", "rank {r} has no <gpu> element");
        } else if c > 1 {
            fail!("gpu-ids", "rank {r} has {c} <gpu> elements");
        }
    }
    if !errs.is_empty() {
        return errs;
    }
    let idx = Index::new(p);
    let max_steps = p.runtime.max_steps();
    let max_tb_id = p.runtime.max_tb_id();

    for g in &p.gpus {
        let r = g.id;
        // Buffer geometry (§5.2).
        if g.i_chunks != p.nchunksperloop {
            fail!(
                "geometry",
                "rank {r}: i_chunks is {} but must equal nchunksperloop {}",
                g.i_chunks,
                p.nchunksperloop
            );
        }
        let names_o = g.tbs.iter().flat_map(|t| t.steps.iter()).any(|s| {
            s.kind != StepKind::Nop
                && (s.srcbuf == Buf::Output || s.dstbuf == Buf::Output)
                && (s.srcoff >= 0 || s.dstoff >= 0)
        });
        let o_ok = g.o_chunks == cps || (g.o_chunks == 0 && !p.outofplace && !names_o);
        if !o_ok {
            fail!(
                "geometry",
                "rank {r}: o_chunks is {} but must be nchunksperloop/ngpus = {cps}{}",
                g.o_chunks,
                if p.outofplace {
                    ""
                } else {
                    " (or 0 for an in-place-only file that never names o)"
                }
            );
        }
        if g.s_chunks < 0 {
            fail!("geometry", "rank {r}: s_chunks {} is negative", g.s_chunks);
        }
        if g.tbs.is_empty() {
            fail!("gpu-ids", "rank {r} has no threadblocks");
        }
        // Threadblock ids dense, unique, within the runtime's range.
        let mut ids: Vec<i64> = g.tbs.iter().map(|t| t.id).collect();
        ids.sort_unstable();
        for (want, &id) in ids.iter().enumerate() {
            if id != want as i64 {
                if want > 0 && ids[want - 1] == id {
                    fail!("tb-ids", "rank {r}: threadblock id {id} is used twice");
                } else {
                    fail!(
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
                "tb-count",
                "rank {r}: {} threadblocks exceed the {:?} runtime's limit of {max_tb_id}",
                g.tbs.len(),
                p.runtime
            );
        }
        if let Some(m) = opts.max_tbs {
            if g.tbs.len() > m {
                fail!(
                    "tb-count",
                    "rank {r}: {} threadblocks exceed the GPU's {m} SMs (all must be co-resident)",
                    g.tbs.len()
                );
            }
        }
        let nodes = 1 + n + g.tbs.len() + g.tbs.iter().map(|t| t.steps.len()).sum::<usize>();
        if nodes > MAX_PARSE_NODES {
            fail!(
                "parse-nodes",
                "rank {r}: {nodes} XML nodes (1 + ngpus + tbs + steps) exceed the runtime parser's {MAX_PARSE_NODES}"
            );
        }
        // One TB per (chan, peer, direction); ≤ 32 peer TBs per channel.
        let mut send_conn: HashMap<(i64, i64), i64> = HashMap::new();
        let mut recv_conn: HashMap<(i64, i64), i64> = HashMap::new();
        let mut sends_per_chan: HashMap<i64, usize> = HashMap::new();
        let mut recvs_per_chan: HashMap<i64, usize> = HashMap::new();
        for t in &g.tbs {
            let tb = t.id;
            for (what, peer) in [("send", t.send), ("recv", t.recv)] {
                if peer < -1 || peer >= n as i64 {
                    fail!(
                        "peer",
                        "rank {r} tb {tb} (line {}): {what}=\"{peer}\" is not -1 or a rank 0..{}",
                        t.line,
                        n - 1
                    );
                } else if peer == r {
                    fail!(
                        "peer",
                        "rank {r} tb {tb} (line {}): {what} peer is its own rank",
                        t.line
                    );
                }
            }
            if t.chan < 0 || t.chan >= p.nchannels {
                fail!(
                    "channel",
                    "rank {r} tb {tb} (line {}): chan {} is outside 0..nchannels-1 = 0..{}",
                    t.line,
                    t.chan,
                    p.nchannels - 1
                );
            }
            if t.send >= 0 {
                if let Some(other) = send_conn.insert((t.chan, t.send), tb) {
                    fail!(
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
                    fail!(
                        "connection",
                        "rank {r}: tbs {other} and {tb} both receive from rank {} on channel {}",
                        t.recv,
                        t.chan
                    );
                }
                *recvs_per_chan.entry(t.chan).or_default() += 1;
            }
            if t.steps.len() > max_steps {
                fail!(
                    "step-count",
                    "rank {r} tb {tb}: {} steps exceed the {:?} runtime's {max_steps} per threadblock",
                    t.steps.len(),
                    p.runtime
                );
            }
        }
        for (c, k) in sends_per_chan.iter().chain(recvs_per_chan.iter()) {
            if *k > MAX_PEER_TBS_PER_CHAN {
                fail!(
                    "connection",
                    "rank {r}: {k} threadblocks with a peer in one direction on channel {c} (at most {MAX_PEER_TBS_PER_CHAN})"
                );
            }
        }
        // Steps.
        let gi = idx.gpu_of_rank[r as usize];
        for (ti, t) in g.tbs.iter().enumerate() {
            let tb = t.id;
            let mut prev_nop_dep = false;
            for (si, s) in t.steps.iter().enumerate() {
                let here = Here(p, r as usize, ti, si);
                if s.s != si as i64 {
                    fail!(
                        "step-index",
                        "{here}: s=\"{}\" but the runtime numbers steps by position ({si})",
                        s.s
                    );
                }
                if s.kind.sends() && t.send < 0 {
                    fail!("peer", "{here}: {} sends but tb {tb} has send=-1", s.kind);
                }
                if s.kind.recvs() && t.recv < 0 {
                    fail!(
                        "peer",
                        "{here}: {} receives but tb {tb} has recv=-1",
                        s.kind
                    );
                }
                if s.kind != StepKind::Nop {
                    if s.cnt < 1 || s.cnt > MAX_CNT {
                        fail!("count", "{here}: cnt {} must be 1..={MAX_CNT}", s.cnt);
                    }
                    // Every buffer the step names: used fields must be in
                    // range; informational ones may be -1 (unused) or in range.
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
                            fail!(
                                "range",
                                "{here}: {which} {}[{off}..{}] is outside the {} chunks of buffer {}",
                                buf.letter(),
                                off + s.cnt,
                                size,
                                buf.letter()
                            );
                        }
                    }
                    if p.outofplace && s.kind.writes_dst() && s.dstbuf == Buf::Input {
                        fail!(
                            "input-write",
                            "{here}: {} writes the input buffer i, but the algorithm allows out-of-place calls, whose send buffer is const",
                            s.kind
                        );
                    }
                }
                // Dependencies (§6).
                if (s.depid >= 0) != (s.deps >= 0) || s.depid < -1 || s.deps < -1 {
                    fail!(
                        "dependency",
                        "{here}: depid={} deps={}: both must be -1 or both name a step",
                        s.depid,
                        s.deps
                    );
                } else if let Some((d, ds)) = s.dep() {
                    match idx.tb_of_id[gi].get(&(d as i64)) {
                        None => fail!(
                            "dependency",
                            "{here}: depid {d} is not a threadblock of rank {r}"
                        ),
                        Some(&dti) => {
                            let dt = &g.tbs[dti];
                            if dti == ti {
                                fail!("dependency", "{here}: depends on its own threadblock");
                            } else if ds >= dt.steps.len() {
                                fail!(
                                    "dependency",
                                    "{here}: deps {ds} is beyond the {} steps of tb {d}",
                                    dt.steps.len()
                                );
                            } else {
                                let target = &dt.steps[ds];
                                if target.kind == StepKind::Nop {
                                    fail!(
                                        "dependency",
                                        "{here}: waits on tb {d} step {ds}, a nop, which publishes nothing"
                                    );
                                } else if !target.hasdep {
                                    fail!(
                                        "hasdep",
                                        "{here}: waits on tb {d} step {ds}, which lacks hasdep=\"1\" (the waiter would never be released in the last tile)"
                                    );
                                }
                                if d as i64 > MAX_DEP_TARGET_TB {
                                    fail!(
                                        "dependency",
                                        "{here}: dependency target tb {d} has an id above {MAX_DEP_TARGET_TB} (stored in an int8)"
                                    );
                                }
                            }
                        }
                    }
                }
                if s.kind == StepKind::Nop {
                    prev_nop_dep |= s.depid >= 0;
                } else {
                    if prev_nop_dep && s.depid < 0 {
                        fail!(
                            "nop-chain",
                            "{here}: follows nop steps with dependencies, so it must itself have depid >= 0"
                        );
                    }
                    prev_nop_dep = false;
                }
                // Adjacent fusable re steps need equal cnt.
                if s.kind == StepKind::Reduce && si > 0 {
                    let q = &t.steps[si - 1];
                    if q.kind == StepKind::Reduce
                        && q.srcbuf == s.srcbuf
                        && q.dstbuf == s.dstbuf
                        && q.dstoff == s.dstoff
                        && s.depid < 0
                        && !q.hasdep
                        && q.cnt != s.cnt
                    {
                        fail!(
                            "re-fusion",
                            "{here}: the runtime fuses this re with the previous one and keeps only the last cnt ({} vs {})",
                            s.cnt,
                            q.cnt
                        );
                    }
                }
            }
        }
    }
    if !errs.is_empty() {
        return errs;
    }
    // Connection pairing (§8.2 item 3).
    for g in &p.gpus {
        let a = g.id as usize;
        for t in &g.tbs {
            if t.send < 0 {
                continue;
            }
            let b = t.send as usize;
            let gb = &p.gpus[idx.gpu_of_rank[b]];
            let Some(rt) = gb
                .tbs
                .iter()
                .find(|u| u.recv == a as i64 && u.chan == t.chan)
            else {
                fail!(
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
                fail!(
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
                    fail!(
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
                fail!(
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
        f.write_str(&at(self.0, self.1, self.2, self.3))
    }
}
