//! The resolved Program: what every consumer of a Program needs before it
//! can run one — ranks mapped to their `<gpu>`, threadblocks numbered
//! globally, connections paired with their sending and receiving
//! threadblock, dependencies resolved to (threadblock, step) — built and
//! checked once. The verifier, the simulator and the executors consume it
//! (as naga's validator hands its `ModuleInfo` to the back ends), so the
//! three agree on what a Program's references mean and reject a broken
//! reference with the same words.
//!
//! It checks only what resolution needs: `ngpus ≥ 1`; every rank has
//! exactly one `<gpu>`; threadblock ids are unique per rank; peers are
//! other ranks; each connection (channel, sender → receiver) has at most
//! one sending and one receiving threadblock; a step that sends (receives)
//! has a send (receive) peer; `cnt ≥ 0` (but on a `nop`); a dependency names another
//! threadblock of the same rank and one of its steps. The verifier's
//! rulebook (docs/verifier.md) checks everything else.

use super::program::{Program, Step, StepKind};
use rustc_hash::FxHashMap as HashMap;
use std::fmt;

/// Where in a Program: a rank, a threadblock (by id), a step (by
/// position), and the file line where known (0: not from a file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Location {
    pub rank: Option<usize>,
    pub tb: Option<i64>,
    pub step: Option<usize>,
    pub line: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(r) = self.rank {
            parts.push(format!("rank {r}"));
        }
        if let Some(t) = self.tb {
            parts.push(format!("threadblock {t} (line {})", self.line));
        } else if self.line > 0 {
            parts.push(format!("line {}", self.line));
        }
        if let Some(s) = self.step {
            parts.push(format!("step {s}"));
        }
        if parts.is_empty() {
            f.write_str("the program")
        } else {
            f.write_str(&parts.join(", "))
        }
    }
}

/// A reference in the Program that does not resolve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{at}: {reason}")]
pub struct ResolveError {
    pub at: Location,
    pub reason: String,
}

/// A threadblock, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TbRef {
    pub rank: usize,
    /// Index into `Program::gpus` and into that GPU's `tbs`.
    pub gpu: usize,
    pub local: usize,
    pub id: i64,
    pub chan: i64,
    pub send_peer: Option<usize>,
    pub recv_peer: Option<usize>,
    /// Index into [`Resolved::conns`].
    pub send_conn: Option<usize>,
    pub recv_conn: Option<usize>,
    /// Its first step's global id (steps are numbered in threadblock
    /// order).
    pub first_step: usize,
    pub steps: usize,
}

/// How a send's data may reach its receiver ([`Resolved::zero_copy_sends`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZeroCopy {
    /// Copied into the FIFO slot, as MSCCL does.
    No,
    /// Read where it lies; nothing writes it during the run.
    Stable,
    /// Read where it lies; every write to it happens before the send, so
    /// it holds until the sender's rank starts its next iteration.
    Ordered,
}

/// One connection: a channel from one rank to another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conn {
    pub chan: i64,
    pub from: usize,
    pub to: usize,
    /// Global threadblock indices of its two ends (None: no threadblock
    /// serves that end).
    pub sender: Option<usize>,
    pub receiver: Option<usize>,
}

/// A Program's references, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub ranks: usize,
    /// Per rank, its index into `Program::gpus`.
    pub gpu_of_rank: Vec<usize>,
    /// Every threadblock, rank by rank, each rank's in file order.
    pub tbs: Vec<TbRef>,
    /// Per rank, the range of its threadblocks in `tbs`.
    pub rank_tbs: Vec<std::ops::Range<usize>>,
    /// Connections in the order their first end appears.
    pub conns: Vec<Conn>,
    /// Per global step id, the (global threadblock, step position) it
    /// waits for.
    pub deps: Vec<Option<(usize, usize)>>,
}

impl Resolved {
    /// Per global step id: whether the executors may run its send
    /// zero-copy, handing the receiver the data where it lies on the
    /// sender instead of a copy in a FIFO slot, in the aliasing mode
    /// `inplace` (docs/executor.md "Zero-copy sends"). The data a step
    /// sends lies in a buffer for a plain `s` (its source) and for `rcs`
    /// and `rrcs` (their destination, which they write before sending);
    /// such a send is
    /// - [`ZeroCopy::Stable`]: an `s` whose source no step of its rank
    ///   writes (through the in-place aliasing of `i` and `o` too): the
    ///   same from the start of a run to its end;
    /// - [`ZeroCopy::Ordered`]: every other step of its rank that writes
    ///   the range happens before the send in that rank's program order
    ///   and dependencies (`depid`/`deps`), tile by tile: the range holds
    ///   the sent data from the send until the rank's next iteration
    ///   writes it again;
    /// - [`ZeroCopy::No`] otherwise, for every other step, and for steps
    ///   with out-of-range fields. Chunk granularity: every tile and
    ///   merged call of a chunk lies inside it, and tiles of a chunk are
    ///   disjoint.
    pub fn zero_copy_sends(&self, p: &Program, inplace: bool) -> Vec<ZeroCopy> {
        let nsteps: usize = self.tbs.iter().map(|t| t.steps).sum();
        let mut zc = vec![ZeroCopy::No; nsteps];
        if p.ngpus < 1 || p.nchunksperloop < 1 {
            return zc;
        }
        let bufs = p.coll.buffers(p.nchunksperloop as usize, p.ngpus as usize);
        // A step's chunks [off, off + cnt) as a range of the rank's memory
        // after aliasing (`Buffers::slot`); None for out-of-range fields.
        let range = |rank: usize, b: super::Buf, off: i64, cnt: i64| -> Option<(usize, usize)> {
            // Beyond 2^32 chunks nothing can run (plan::build allows 2^20).
            let ok = |v: i64| usize::try_from(v).ok().filter(|&v| v <= 1 << 32);
            let (off, cnt) = (ok(off)?, ok(cnt)?);
            let a = bufs.slot(rank, inplace, b, off);
            Some((a, a + cnt))
        };
        // Per rank, every write: (first, end, global step id); a write with
        // fields out of range rules out zero-copy on its rank.
        let mut written: Vec<Vec<(usize, usize, usize)>> = vec![Vec::new(); self.ranks];
        let mut unknown = vec![false; self.ranks];
        // Per global step id, its threadblock (for program order).
        let mut tb_of = vec![0usize; nsteps];
        for (k, t) in self.tbs.iter().enumerate() {
            for pos in 0..t.steps {
                tb_of[t.first_step + pos] = k;
                let s = self.step(p, k, pos);
                if s.kind.writes_dst() {
                    match range(t.rank, s.dstbuf, s.dstoff, s.cnt) {
                        Some((a, e)) => written[t.rank].push((a, e, t.first_step + pos)),
                        None => unknown[t.rank] = true,
                    }
                }
            }
        }
        // Happens-before inside a rank: a backward walk over program order
        // and dependencies from the send, marking with a per-walk stamp.
        // The walks share a budget of visits (a few per step); sends past
        // it stay copied, so the analysis stays linear on huge programs.
        let mut budget = 8 * nsteps + 1_000_000;
        let mut seen = vec![0u32; nsteps];
        let mut stamp = 0u32;
        let mut stack = Vec::new();
        for (k, t) in self.tbs.iter().enumerate() {
            for pos in 0..t.steps {
                let s = self.step(p, k, pos);
                let (b, off) = match s.kind {
                    StepKind::Send => (s.srcbuf, s.srcoff),
                    StepKind::RecvCopySend | StepKind::RecvReduceCopySend => (s.dstbuf, s.dstoff),
                    _ => continue,
                };
                let Some((a, e)) = range(t.rank, b, off, s.cnt) else {
                    continue;
                };
                if s.cnt < 1 || unknown[t.rank] {
                    continue;
                }
                let me = t.first_step + pos;
                let others: Vec<usize> = written[t.rank]
                    .iter()
                    .filter(|&&(wa, we, g)| wa < e && a < we && g != me)
                    .map(|w| w.2)
                    .collect();
                if others.is_empty() {
                    zc[me] = if s.kind == StepKind::Send {
                        ZeroCopy::Stable
                    } else {
                        ZeroCopy::Ordered
                    };
                    continue;
                }
                stamp += 1;
                stack.clear();
                stack.push(me);
                seen[me] = stamp;
                let mut walked = true;
                while let Some(g) = stack.pop() {
                    if budget == 0 {
                        walked = false;
                        break;
                    }
                    budget -= 1;
                    let tb = &self.tbs[tb_of[g]];
                    let mut preds = [
                        None,
                        self.deps[g].map(|(d, ds)| self.tbs[d].first_step + ds),
                    ];
                    if g > tb.first_step {
                        preds[0] = Some(g - 1);
                    }
                    for q in preds.into_iter().flatten() {
                        if q < nsteps && seen[q] != stamp {
                            seen[q] = stamp;
                            stack.push(q);
                        }
                    }
                }
                if walked && others.iter().all(|&g| seen[g] == stamp) {
                    zc[me] = ZeroCopy::Ordered;
                }
            }
        }
        zc
    }

    /// The step of global threadblock `tb` at `pos`.
    pub fn step<'p>(&self, p: &'p Program, tb: usize, pos: usize) -> &'p Step {
        let t = &self.tbs[tb];
        &p.gpus[t.gpu].tbs[t.local].steps[pos]
    }

    /// The location of global threadblock `tb`'s step `pos` (None: the
    /// threadblock itself).
    pub fn location(&self, p: &Program, tb: usize, pos: Option<usize>) -> Location {
        let t = &self.tbs[tb];
        let th = &p.gpus[t.gpu].tbs[t.local];
        Location {
            rank: Some(t.rank),
            tb: Some(t.id),
            step: pos,
            line: th.line,
        }
    }

    pub fn num_steps(&self) -> usize {
        self.deps.len()
    }
}

/// Resolve `p`'s references.
pub fn resolve(p: &Program) -> Result<Resolved, ResolveError> {
    let gpu_of_rank = gpus(p)?;
    let (mut tbs, rank_tbs, tb_of_id) = threadblocks(p, &gpu_of_rank)?;
    let conns = connections(p, &mut tbs)?;
    let deps = dependencies(p, &tbs, &tb_of_id)?;
    Ok(Resolved {
        ranks: gpu_of_rank.len(),
        gpu_of_rank,
        tbs,
        rank_tbs,
        conns,
        deps,
    })
}

fn fail<T>(at: Location, reason: String) -> Result<T, ResolveError> {
    Err(ResolveError { at, reason })
}

/// Each rank's `<gpu>`.
fn gpus(p: &Program) -> Result<Vec<usize>, ResolveError> {
    if p.ngpus < 1 {
        return fail(
            Location::default(),
            format!("ngpus is {}; it must be at least 1", p.ngpus),
        );
    }
    let n = p.ngpus as usize;
    let mut by_rank: Vec<Option<usize>> = vec![None; n];
    for (gi, g) in p.gpus.iter().enumerate() {
        let at = Location {
            line: g.line,
            ..Location::default()
        };
        if g.id < 0 || g.id as usize >= n {
            return fail(at, format!("gpu id {} is not a rank 0..{}", g.id, n - 1));
        }
        if by_rank[g.id as usize].replace(gi).is_some() {
            return fail(at, format!("gpu id {} appears twice", g.id));
        }
    }
    by_rank
        .iter()
        .enumerate()
        .map(|(r, gi)| match gi {
            Some(gi) => Ok(*gi),
            None => fail(
                Location {
                    rank: Some(r),
                    ..Location::default()
                },
                "no <gpu> for this rank".into(),
            ),
        })
        .collect()
}

type Threadblocks = (
    Vec<TbRef>,
    Vec<std::ops::Range<usize>>,
    Vec<HashMap<i64, usize>>,
);

/// Every threadblock with its peers, rank by rank; per rank, id → index.
fn threadblocks(p: &Program, gpu_of_rank: &[usize]) -> Result<Threadblocks, ResolveError> {
    let n = gpu_of_rank.len();
    let mut tbs: Vec<TbRef> = Vec::with_capacity(p.num_tbs());
    let mut rank_tbs = Vec::with_capacity(n);
    let mut tb_of_id: Vec<HashMap<i64, usize>> = vec![HashMap::default(); n];
    let mut first_step = 0usize;
    for (rank, &gi) in gpu_of_rank.iter().enumerate() {
        let start = tbs.len();
        for (local, tb) in p.gpus[gi].tbs.iter().enumerate() {
            let at = Location {
                rank: Some(rank),
                tb: Some(tb.id),
                step: None,
                line: tb.line,
            };
            if tb_of_id[rank].insert(tb.id, tbs.len()).is_some() {
                return fail(at, format!("threadblock id {} appears twice", tb.id));
            }
            let peer = |v: i64, what: &str| -> Result<Option<usize>, ResolveError> {
                if v == -1 {
                    Ok(None)
                } else if v < 0 || v as usize >= n || v as usize == rank {
                    fail(
                        at,
                        format!("{what} peer {v} is not another rank 0..{}", n - 1),
                    )
                } else {
                    Ok(Some(v as usize))
                }
            };
            tbs.push(TbRef {
                rank,
                gpu: gi,
                local,
                id: tb.id,
                chan: tb.chan,
                send_peer: peer(tb.send, "send")?,
                recv_peer: peer(tb.recv, "recv")?,
                send_conn: None,
                recv_conn: None,
                first_step,
                steps: tb.steps.len(),
            });
            first_step += tb.steps.len();
        }
        rank_tbs.push(start..tbs.len());
    }
    Ok((tbs, rank_tbs, tb_of_id))
}

/// The connections, each with at most one sending and one receiving
/// threadblock; sets the threadblocks' `send_conn` / `recv_conn`.
fn connections(p: &Program, tbs: &mut [TbRef]) -> Result<Vec<Conn>, ResolveError> {
    let mut conns: Vec<Conn> = Vec::new();
    let mut conn_of: HashMap<(i64, usize, usize), usize> = HashMap::default();
    for k in 0..tbs.len() {
        let (rank, chan) = (tbs[k].rank, tbs[k].chan);
        for (sends, peer) in [(true, tbs[k].send_peer), (false, tbs[k].recv_peer)] {
            let Some(q) = peer else { continue };
            let key = if sends {
                (chan, rank, q)
            } else {
                (chan, q, rank)
            };
            let c = *conn_of.entry(key).or_insert_with(|| {
                conns.push(Conn {
                    chan,
                    from: key.1,
                    to: key.2,
                    sender: None,
                    receiver: None,
                });
                conns.len() - 1
            });
            let end = if sends {
                &mut conns[c].sender
            } else {
                &mut conns[c].receiver
            };
            if let Some(other) = end.replace(k) {
                let t = &p.gpus[tbs[k].gpu].tbs[tbs[k].local];
                return fail(
                    Location {
                        rank: Some(rank),
                        tb: Some(t.id),
                        step: None,
                        line: t.line,
                    },
                    format!(
                        "threadblock {} already {} rank {q} on channel {chan}",
                        tbs[other].id,
                        if sends { "sends to" } else { "receives from" }
                    ),
                );
            }
            if sends {
                tbs[k].send_conn = Some(c);
            } else {
                tbs[k].recv_conn = Some(c);
            }
        }
    }
    Ok(conns)
}

/// Per global step, its checked peers and count, and the step it waits for.
fn dependencies(
    p: &Program,
    tbs: &[TbRef],
    tb_of_id: &[HashMap<i64, usize>],
) -> Result<Vec<Option<(usize, usize)>>, ResolveError> {
    let mut deps = Vec::with_capacity(tbs.last().map_or(0, |t| t.first_step + t.steps));
    for (k, t) in tbs.iter().enumerate() {
        let tb = &p.gpus[t.gpu].tbs[t.local];
        for (si, st) in tb.steps.iter().enumerate() {
            let at = Location {
                rank: Some(t.rank),
                tb: Some(t.id),
                step: Some(si),
                line: tb.line,
            };
            if st.kind.sends() && t.send_peer.is_none() {
                return fail(
                    at,
                    format!("'{}' sends but the threadblock has no send peer", st.kind),
                );
            }
            if st.kind.recvs() && t.recv_peer.is_none() {
                return fail(
                    at,
                    format!(
                        "'{}' receives but the threadblock has no recv peer",
                        st.kind
                    ),
                );
            }
            if st.cnt < 0 && st.kind != StepKind::Nop {
                return fail(at, format!("negative cnt {}", st.cnt));
            }
            deps.push(match (st.depid, st.deps) {
                (-1, _) => None,
                (d, s) => {
                    let Some(&di) = tb_of_id[t.rank].get(&d) else {
                        return fail(
                            at,
                            format!("depid {d} is not a threadblock of rank {}", t.rank),
                        );
                    };
                    if di == k {
                        return fail(at, format!("depid {d} is the step's own threadblock"));
                    }
                    if s < 0 || s as usize >= tbs[di].steps {
                        return fail(
                            at,
                            format!(
                                "deps {s} is past the {} steps of threadblock {d}",
                                tbs[di].steps
                            ),
                        );
                    }
                    Some((di, s as usize))
                }
            });
        }
    }
    Ok(deps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::builtin;
    use crate::ir::{Buf, Threadblock};

    #[test]
    fn a_ring_resolves_to_one_connection_per_hop() {
        let p = builtin::ring(4, 1);
        let r = resolve(&p).unwrap();
        assert_eq!((r.ranks, r.tbs.len(), r.conns.len()), (4, 4, 4));
        for c in &r.conns {
            let (s, d) = (c.sender.unwrap(), c.receiver.unwrap());
            assert_eq!((r.tbs[s].rank, r.tbs[d].rank), (c.from, c.to));
            assert_eq!(r.tbs[s].send_conn, r.tbs[d].recv_conn);
        }
        assert_eq!(r.num_steps(), p.num_steps());
    }

    #[test]
    fn zero_copy_sends_hand_over_data_no_later_step_rewrites() {
        use ZeroCopy::*;
        // Ring reduce-scatter: each rank's first step sends an input chunk
        // that no step writes (rrc writes the output), in either mode; its
        // rrs forwards a sum that lies in no buffer.
        let p = builtin::ring(4, 1);
        let r = resolve(&p).unwrap();
        for inplace in [false, true] {
            let zc = r.zero_copy_sends(&p, inplace);
            for (k, t) in r.tbs.iter().enumerate() {
                for pos in 0..t.steps {
                    let send = r.step(&p, k, pos).kind == StepKind::Send;
                    let want = if send { Stable } else { No };
                    assert_eq!(zc[t.first_step + pos], want, "tb {k} step {pos}");
                }
            }
        }
        // Rank 0 sends i[0], which in place is its output o[0], which its
        // rrc writes after the send: zero-copy out of place only.
        let mut p = builtin::ring(2, 1);
        p.gpus[0].tbs[0].steps[0].srcoff = 0;
        let r = resolve(&p).unwrap();
        assert_eq!(r.zero_copy_sends(&p, false)[0], Stable);
        assert_eq!(r.zero_copy_sends(&p, true)[0], No);
        // A write to the sent chunk that the send does not wait for rules
        // it out in both modes; another rank's writes do not.
        let mut p = builtin::ring(2, 1);
        let sent = p.gpus[0].tbs[0].steps[0].srcoff;
        p.gpus[0].tbs[0].steps[1].dstbuf = Buf::Input;
        p.gpus[0].tbs[0].steps[1].dstoff = sent;
        p.gpus[1].tbs[0].steps[1].dstbuf = Buf::Input;
        p.gpus[1].tbs[0].steps[1].dstoff = p.gpus[1].tbs[0].steps[0].srcoff + 1;
        let r = resolve(&p).unwrap();
        for inplace in [false, true] {
            let zc = r.zero_copy_sends(&p, inplace);
            assert_eq!(zc[0], No, "inplace {inplace}");
            assert_eq!(zc[r.tbs[1].first_step], Stable, "inplace {inplace}");
        }
        // ring8's allgather copies its input into its output, then sends
        // from there after a dependency on that copy, and forwards with
        // rcs into chunks only the rcs writes: all ordered.
        let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let mut ag = crate::front::msccl_xml::load(&root.join("schedules/ring8/ag.xml")).unwrap();
        let r = resolve(&ag).unwrap();
        for inplace in [false, true] {
            let zc = r.zero_copy_sends(&ag, inplace);
            for (k, t) in r.tbs.iter().enumerate() {
                for pos in 0..t.steps {
                    let kind = r.step(&ag, k, pos).kind;
                    let want = if kind.sends() { Ordered } else { No };
                    assert_eq!(zc[t.first_step + pos], want, "{kind} tb {k} step {pos}");
                }
            }
        }
        // Without the dependency the copy may come after the send.
        let (g, tb) = (0, 1);
        assert_eq!(ag.gpus[g].tbs[tb].steps[0].kind, StepKind::Send);
        ag.gpus[g].tbs[tb].steps[0].depid = -1;
        ag.gpus[g].tbs[tb].steps[0].deps = -1;
        let r = resolve(&ag).unwrap();
        let first = r
            .tbs
            .iter()
            .position(|t| t.gpu == g && t.local == tb)
            .unwrap();
        assert_eq!(r.zero_copy_sends(&ag, false)[r.tbs[first].first_step], No);
        // Its second send still waits for its own copy.
        assert_eq!(
            r.zero_copy_sends(&ag, false)[r.tbs[first].first_step + 1],
            Ordered
        );
    }

    #[test]
    fn broken_references_name_their_place() {
        let err = |p: &Program| resolve(p).unwrap_err().to_string();
        let mut p = builtin::ring(4, 1);
        p.gpus[2].id = 1;
        assert!(err(&p).contains("gpu id 1 appears twice"), "{}", err(&p));
        let mut p = builtin::ring(4, 1);
        p.gpus[3].tbs[0].send = 3;
        assert!(err(&p).starts_with("rank 3, threadblock 0"), "{}", err(&p));
        assert!(err(&p).contains("send peer 3 is not another rank"));
        let mut p = builtin::allpairs(3);
        p.gpus[1].tbs[0].steps[1].depid = 9;
        p.gpus[1].tbs[0].steps[1].deps = 0;
        assert!(
            err(&p).contains("step 1: depid 9 is not a threadblock of rank 1"),
            "{}",
            err(&p)
        );
        let mut p = builtin::ring(4, 1);
        let dup = p.gpus[0].tbs[0].clone();
        p.gpus[0].tbs.push(Threadblock { id: 1, ..dup });
        assert!(err(&p).contains("already sends to rank 1"), "{}", err(&p));
    }
}
