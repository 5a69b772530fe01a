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
use std::collections::HashMap;
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
    let mut tb_of_id: Vec<HashMap<i64, usize>> = vec![HashMap::new(); n];
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
    let mut conn_of: HashMap<(i64, usize, usize), usize> = HashMap::new();
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
    use crate::ir::Threadblock;

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
