//! Validation of a Program into an executable plan: threadblocks indexed
//! globally, connections resolved to FIFOs, dependencies resolved to
//! threadblocks, and every buffer range that a step touches at run time
//! checked against the buffers the executor allocates. These checks run
//! even with `--no-verify`: they are what keeps the executor memory-safe on
//! any input.

use super::ExecError;
use crate::ir::{Buf, Collective, Program, StepKind};
use std::collections::HashMap;

#[derive(Debug, Clone)]
pub(crate) struct StepPlan {
    pub kind: StepKind,
    pub src: (Buf, usize),
    pub dst: (Buf, usize),
    pub cnt: usize,
    /// (global threadblock index, step position) to wait for.
    pub dep: Option<(usize, usize)>,
    /// Publish progress after this step (`hasdep="1"`, not on a `nop`).
    pub publish: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct TbPlan {
    pub rank: usize,
    pub id: i64,
    pub chan: i64,
    pub send_peer: Option<usize>,
    pub recv_peer: Option<usize>,
    pub send_fifo: Option<usize>,
    pub recv_fifo: Option<usize>,
    pub steps: Vec<StepPlan>,
    /// Threadblocks (global index) that wait on this one's progress.
    pub waiters: Vec<usize>,
}

/// One connection; chan/from/to are kept for messages.
#[allow(dead_code)]
#[derive(Debug, Clone)]
pub(crate) struct Fifodesc {
    pub chan: i64,
    pub from: usize,
    pub to: usize,
    pub producer: Option<usize>,
    pub consumer: Option<usize>,
}

#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub nranks: usize,
    /// nchunksperloop.
    pub c: usize,
    pub s_chunks: Vec<usize>,
    pub tbs: Vec<TbPlan>,
    pub rank_tbs: Vec<Vec<usize>>,
    pub fifos: Vec<Fifodesc>,
    pub max_steps: usize,
}

impl Plan {
    /// The widest multi-chunk step (at least 1): a tile never needs to hold
    /// more chunks than that.
    pub fn max_cnt(&self) -> usize {
        self.tbs
            .iter()
            .flat_map(|t| t.steps.iter())
            .map(|s| s.cnt)
            .max()
            .unwrap_or(1)
            .max(1)
    }
}

/// One size's tile and call structure, in elements, for both executors:
/// `(tile, merge)`. A call of a `cnt > 1` step moves up to `merge` adjacent
/// chunks through one FIFO slot, by MSCCL's rule with its Simple tile
/// (msccl_setup.cc: mscclSetupCount, `SIMPLE_TILE_BYTES`): a chunk of at
/// most half that tile merges up to `min(tile / chunk, 71)` chunks. The
/// verifier checks deadlock freedom under exactly that rule (one message
/// per step while `cnt` chunks fit the Simple tile), so the executors must
/// not derive it from their own staging tile: with `--tile 256K`,
/// ring8-small-rs stalled at its own maxBytes of 32 MiB. When calls merge,
/// one tile holds the widest merged call (it may exceed `tile`); otherwise
/// chunks are staged in tiles of `tile` elements (the `--tile` option), one
/// call per chunk per tile, as MSCCL does per Simple tile.
pub fn tile_and_merge(chunk: usize, tile: usize, max_cnt: usize, esize: usize) -> (usize, usize) {
    let chunk = chunk.max(1);
    let simple = (crate::ir::msccl::SIMPLE_TILE_BYTES as usize / esize.max(1)).max(1);
    let merge = if chunk <= simple / 2 {
        (simple / chunk).clamp(1, crate::ir::msccl::MAX_CNT)
    } else {
        1
    };
    let staged = tile.max(1).min(chunk);
    let widest = merge.min(max_cnt.max(1));
    if widest > 1 {
        (staged.max(widest * chunk), merge)
    } else {
        (staged, 1)
    }
}

fn bad(
    rank: usize,
    tb: i64,
    step: Option<usize>,
    line: usize,
    msg: impl Into<String>,
) -> ExecError {
    ExecError::Malformed {
        rank,
        tb,
        step,
        line,
        msg: msg.into(),
    }
}

pub(crate) fn build(p: &Program) -> Result<Plan, ExecError> {
    if p.coll != Collective::ReduceScatter {
        return Err(ExecError::Unsupported(format!(
            "collective {} (the CPU executor runs reduce-scatter)",
            p.coll.display()
        )));
    }
    if p.ngpus < 1 || p.ngpus > 4096 {
        return Err(ExecError::Unsupported(format!(
            "ngpus={} out of range 1..4096",
            p.ngpus
        )));
    }
    let n = p.ngpus as usize;
    if p.nchunksperloop < 1 || p.nchunksperloop % p.ngpus != 0 {
        return Err(ExecError::Unsupported(format!(
            "nchunksperloop={} is not a positive multiple of ngpus={}",
            p.nchunksperloop, p.ngpus
        )));
    }
    if p.nchunksperloop > 1 << 20 {
        return Err(ExecError::Unsupported(format!(
            "nchunksperloop={} above 2^20",
            p.nchunksperloop
        )));
    }
    let c = p.nchunksperloop as usize;
    let total_tbs: usize = p.gpus.iter().map(|g| g.tbs.len()).sum();
    if total_tbs > 16384 {
        return Err(ExecError::Unsupported(format!(
            "{total_tbs} threadblocks in all (the CPU executor runs one thread each; at most 16384)"
        )));
    }
    // Index gpus by id.
    let mut by_rank: Vec<Option<usize>> = vec![None; n];
    for (gi, g) in p.gpus.iter().enumerate() {
        if g.id < 0 || g.id >= p.ngpus {
            return Err(bad(
                0,
                -1,
                None,
                g.line,
                format!("<gpu id={}> outside 0..{}", g.id, n),
            ));
        }
        let slot = &mut by_rank[g.id as usize];
        if slot.is_some() {
            return Err(bad(g.id as usize, -1, None, g.line, "duplicate <gpu> id"));
        }
        *slot = Some(gi);
    }
    let mut s_chunks = vec![0usize; n];
    let mut tbs: Vec<TbPlan> = Vec::new();
    let mut rank_tbs: Vec<Vec<usize>> = vec![Vec::new(); n];
    // (rank, tb id) -> global index
    let mut tb_index: Vec<HashMap<i64, usize>> = vec![HashMap::new(); n];
    for (r, gi) in by_rank.iter().enumerate() {
        let Some(gi) = gi else {
            return Err(bad(r, -1, None, 0, "no <gpu> for this rank"));
        };
        let g = &p.gpus[*gi];
        if g.s_chunks < 0 || g.s_chunks > 1 << 20 {
            return Err(bad(
                r,
                -1,
                None,
                g.line,
                format!("s_chunks={} out of range", g.s_chunks),
            ));
        }
        s_chunks[r] = g.s_chunks as usize;
        for tb in &g.tbs {
            if tb_index[r].insert(tb.id, tbs.len()).is_some() {
                return Err(bad(r, tb.id, None, tb.line, "duplicate threadblock id"));
            }
            let peer = |v: i64, what: &str| -> Result<Option<usize>, ExecError> {
                if v == -1 {
                    Ok(None)
                } else if v < 0 || v >= p.ngpus {
                    Err(bad(
                        r,
                        tb.id,
                        None,
                        tb.line,
                        format!("{what}={v} is not a rank in 0..{n}"),
                    ))
                } else if v as usize == r {
                    Err(bad(
                        r,
                        tb.id,
                        None,
                        tb.line,
                        format!("{what}={v} is the threadblock's own rank"),
                    ))
                } else {
                    Ok(Some(v as usize))
                }
            };
            let send_peer = peer(tb.send, "send")?;
            let recv_peer = peer(tb.recv, "recv")?;
            rank_tbs[r].push(tbs.len());
            tbs.push(TbPlan {
                rank: r,
                id: tb.id,
                chan: tb.chan,
                send_peer,
                recv_peer,
                send_fifo: None,
                recv_fifo: None,
                steps: Vec::new(),
                waiters: Vec::new(),
            });
        }
    }
    // Connections.
    let mut fifos: Vec<Fifodesc> = Vec::new();
    let mut fifo_map: HashMap<(i64, usize, usize), usize> = HashMap::new();
    for gi in 0..tbs.len() {
        let (r, chan) = (tbs[gi].rank, tbs[gi].chan);
        for (is_send, peer) in [(true, tbs[gi].send_peer), (false, tbs[gi].recv_peer)] {
            let Some(q) = peer else { continue };
            let key = if is_send { (chan, r, q) } else { (chan, q, r) };
            let fi = *fifo_map.entry(key).or_insert_with(|| {
                fifos.push(Fifodesc {
                    chan,
                    from: key.1,
                    to: key.2,
                    producer: None,
                    consumer: None,
                });
                fifos.len() - 1
            });
            let f = &mut fifos[fi];
            let end = if is_send {
                &mut f.producer
            } else {
                &mut f.consumer
            };
            if let Some(other) = *end {
                return Err(bad(
                    r,
                    tbs[gi].id,
                    None,
                    0,
                    format!(
                        "threadblocks {} and {} share the connection chan {} {} -> {}",
                        tbs[other].id, tbs[gi].id, chan, key.1, key.2
                    ),
                ));
            }
            *end = Some(gi);
            if is_send {
                tbs[gi].send_fifo = Some(fi);
            } else {
                tbs[gi].recv_fifo = Some(fi);
            }
        }
    }
    // Steps.
    let mut max_steps = 0;
    let mut waiters: Vec<Vec<usize>> = vec![Vec::new(); tbs.len()];
    for (r, gi) in by_rank.iter().enumerate() {
        let Some(gi) = gi else { continue };
        let g = &p.gpus[*gi];
        for tb in &g.tbs {
            let me = tb_index[r][&tb.id];
            max_steps = max_steps.max(tb.steps.len());
            let mut steps = Vec::with_capacity(tb.steps.len());
            for (pos, st) in tb.steps.iter().enumerate() {
                let err = |msg: String| bad(r, tb.id, Some(pos), st.line, msg);
                let k = st.kind;
                let dep = match (st.depid, st.deps) {
                    (-1, _) => None,
                    (d, s) => {
                        let Some(&t) = tb_index[r].get(&d) else {
                            return Err(err(format!("depid={d} is not a threadblock of rank {r}")));
                        };
                        if t == me {
                            return Err(err(format!("depid={d} is the step's own threadblock")));
                        }
                        let tlen = p.gpus[*gi]
                            .tbs
                            .iter()
                            .find(|x| x.id == d)
                            .map_or(0, |x| x.steps.len());
                        if s < 0 || s as usize >= tlen {
                            return Err(err(format!(
                                "deps={s} is not a step of threadblock {d} (0..{tlen})"
                            )));
                        }
                        if !waiters[t].contains(&me) {
                            waiters[t].push(me);
                        }
                        Some((t, s as usize))
                    }
                };
                let cnt = if k == StepKind::Nop {
                    0
                } else if st.cnt < 1 || st.cnt > 1 << 20 {
                    return Err(err(format!("cnt={} (a {} needs cnt >= 1)", st.cnt, k)));
                } else {
                    st.cnt as usize
                };
                let range =
                    |used: bool, b: Buf, off: i64, what: &str| -> Result<(Buf, usize), ExecError> {
                        if !used {
                            return Ok((b, 0));
                        }
                        let have = match b {
                            Buf::Input => c,
                            Buf::Output => c / n,
                            Buf::Scratch => s_chunks[r],
                        };
                        if off < 0 || off as usize + cnt > have {
                            return Err(err(format!(
                                "{what} {}[{}..{}) is outside the buffer ({} chunks)",
                                b.letter(),
                                off,
                                off + cnt as i64,
                                have
                            )));
                        }
                        Ok((b, off as usize))
                    };
                let src = range(k.reads_src(), st.srcbuf, st.srcoff, "src")?;
                let dst = range(k.writes_dst(), st.dstbuf, st.dstoff, "dst")?;
                if k.sends() && tbs[me].send_fifo.is_none() {
                    return Err(err(format!("a {k} step in a threadblock with send=-1")));
                }
                if k.recvs() && tbs[me].recv_fifo.is_none() {
                    return Err(err(format!("a {k} step in a threadblock with recv=-1")));
                }
                steps.push(StepPlan {
                    kind: k,
                    src,
                    dst,
                    cnt,
                    dep,
                    publish: st.hasdep && k != StepKind::Nop,
                });
            }
            tbs[me].steps = steps;
        }
    }
    for (t, w) in waiters.into_iter().enumerate() {
        tbs[t].waiters = w;
    }
    Ok(Plan {
        nranks: n,
        c,
        s_chunks,
        tbs,
        rank_tbs,
        fifos,
        max_steps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_calls_follow_msccls_simple_tile_not_the_staging_tile() {
        // f32, Simple tile 2 MiB = 524288 elements. ring8-small-rs at
        // 32 MiB: 52428-element chunks, steps of up to 10 chunks: one call
        // of 10 chunks whatever --tile says (the verifier assumed that).
        assert_eq!(tile_and_merge(52_428, 65_536, 10, 4), (524_280, 10));
        // Tiny chunks: at most 71 per call; the tile holds the widest step.
        assert_eq!(tile_and_merge(6, 65_536, 10, 4), (60, 71));
        assert_eq!(tile_and_merge(6, 16, 10, 4), (60, 71));
        // A chunk above half the Simple tile: one call per chunk, staged in
        // --tile pieces.
        assert_eq!(tile_and_merge(300_000, 65_536, 10, 4), (65_536, 1));
        // Single-chunk steps: the staging tile, at most the chunk.
        assert_eq!(tile_and_merge(1_000, 65_536, 1, 4), (1_000, 1));
        assert_eq!(tile_and_merge(100_000, 256, 1, 2), (256, 1));
        // Degenerate inputs do not divide by zero.
        assert_eq!(tile_and_merge(0, 0, 0, 0).0, 1);
    }
}
