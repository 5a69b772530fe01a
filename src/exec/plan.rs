//! Validation of a Program into an executable plan: threadblocks indexed
//! globally, connections resolved to FIFOs, dependencies resolved to
//! threadblocks, and every buffer range that a step touches at run time
//! checked against the buffers the executor allocates. These checks run
//! even with `--no-verify`: they are what keeps the executor memory-safe on
//! any input.

use super::ExecError;
pub(crate) use crate::ir::resolve::ZeroCopy;
use crate::ir::resolve::{resolve, Resolved};
use crate::ir::{Buf, Collective, Program, StepKind};

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
    /// How its send's data reaches the receiver, out of place and in
    /// place (`Resolved::zero_copy_sends`).
    pub zero_copy: [ZeroCopy; 2],
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
    pub coll: Collective,
    pub nranks: usize,
    /// nchunksperloop.
    pub c: usize,
    /// Chunks of `i` and `o` per rank, and how an in-place call aliases
    /// them (the op's geometry).
    pub bufs: crate::ir::spec::Buffers,
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

/// Per threadblock and step, how its send's data reaches the receiver
/// (`Resolved::zero_copy_sends`) in the aliasing mode `inplace`.
pub(crate) fn zero_copy_sends(plan: &Plan, inplace: bool) -> Vec<Vec<ZeroCopy>> {
    plan.tbs
        .iter()
        .map(|t| {
            t.steps
                .iter()
                .map(|s| s.zero_copy[inplace as usize])
                .collect()
        })
        .collect()
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
    if p.ngpus < 1 || p.ngpus > 4096 {
        return Err(ExecError::Unsupported(format!(
            "ngpus={} out of range 1..4096",
            p.ngpus
        )));
    }
    let n = p.ngpus as usize;
    let shards = p.coll != Collective::AllReduce;
    if p.nchunksperloop < 1 || (shards && p.nchunksperloop % p.ngpus != 0) {
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
    // Ranks, threadblocks, connections and dependencies, resolved once.
    let res = resolve(p).map_err(|e| {
        bad(
            e.at.rank.unwrap_or(0),
            e.at.tb.unwrap_or(-1),
            e.at.step,
            e.at.line,
            e.reason,
        )
    })?;
    let mut s_chunks = vec![0usize; n];
    for (r, &gi) in res.gpu_of_rank.iter().enumerate() {
        let g = &p.gpus[gi];
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
    }
    let rank_tbs: Vec<Vec<usize>> = res.rank_tbs.iter().map(|r| r.clone().collect()).collect();
    let fifos: Vec<Fifodesc> = res
        .conns
        .iter()
        .map(|c| Fifodesc {
            chan: c.chan,
            from: c.from,
            to: c.to,
            producer: c.sender,
            consumer: c.receiver,
        })
        .collect();
    let mut tbs: Vec<TbPlan> = res
        .tbs
        .iter()
        .map(|t| TbPlan {
            rank: t.rank,
            id: t.id,
            chan: t.chan,
            send_peer: t.send_peer,
            recv_peer: t.recv_peer,
            send_fifo: t.send_conn,
            recv_fifo: t.recv_conn,
            steps: Vec::new(),
            waiters: Vec::new(),
        })
        .collect();
    let bufs = p.coll.buffers(c, n);
    let max_steps = steps(p, &res, bufs, &s_chunks, &mut tbs)?;
    Ok(Plan {
        coll: p.coll,
        nranks: n,
        c,
        bufs,
        s_chunks,
        tbs,
        rank_tbs,
        fifos,
        max_steps,
    })
}

/// Every threadblock's steps with their buffer ranges checked against the
/// buffers the executor allocates, and who waits on whom; the most steps
/// of a threadblock.
fn steps(
    p: &Program,
    res: &Resolved,
    bufs: crate::ir::spec::Buffers,
    s_chunks: &[usize],
    tbs: &mut [TbPlan],
) -> Result<usize, ExecError> {
    let mut max_steps = 0;
    let mut waiters: Vec<Vec<usize>> = vec![Vec::new(); tbs.len()];
    let zc = [res.zero_copy_sends(p, false), res.zero_copy_sends(p, true)];
    for (me, t) in res.tbs.iter().enumerate() {
        let r = t.rank;
        let tb = &p.gpus[t.gpu].tbs[t.local];
        max_steps = max_steps.max(tb.steps.len());
        let mut steps = Vec::with_capacity(tb.steps.len());
        for (pos, st) in tb.steps.iter().enumerate() {
            let err = |msg: String| bad(r, tb.id, Some(pos), st.line, msg);
            let k = st.kind;
            let dep = res.deps[t.first_step + pos];
            if let Some((d, _)) = dep {
                if !waiters[d].contains(&me) {
                    waiters[d].push(me);
                }
            }
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
                        Buf::Input => bufs.i_chunks,
                        Buf::Output => bufs.o_chunks,
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
            steps.push(StepPlan {
                kind: k,
                src,
                dst,
                cnt,
                dep,
                publish: st.hasdep && k != StepKind::Nop,
                zero_copy: [zc[0][t.first_step + pos], zc[1][t.first_step + pos]],
            });
        }
        tbs[me].steps = steps;
    }
    for (t, w) in waiters.into_iter().enumerate() {
        tbs[t].waiters = w;
    }
    Ok(max_steps)
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
