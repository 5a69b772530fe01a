//! Symbolic execution (steps 3 and 4 of the module doc): the plan's steps
//! run in order over symbolic values per rank and slot, with every access
//! checked for races against the rank's vector clocks.

use super::plan::{Plan, NONE};
use super::values::Sym;
use super::Mode;
use crate::ir::{Buf, Collective, Program, StepKind};
use crate::verify::{at, location, VerifyError};
use rustc_hash::FxHashMap as HashMap;

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

/// A slot of a rank's memory: its value and its access history, side by
/// side (execution reads both at once).
#[derive(Clone)]
struct Cell<V> {
    val: Option<V>,
    acc: Access,
}

/// One rank during execution: its slots' values and access histories, and
/// its threadblocks' vector clocks.
pub(super) struct Rank<V> {
    cells: Vec<Cell<V>>,
    /// Reads of a slot by a second, third … threadblock since its last write.
    more_reads: HashMap<usize, Vec<(u32, u32)>>,
    /// Threadblocks on this rank.
    t: usize,
    /// Vector clock per TB (row-major t × t): steps of each TB known complete.
    vc: Vec<u32>,
    /// Slot of chunk 0 of `i`, `o` and scratch (`Buf` order) after the
    /// mode's aliasing: chunk k of a buffer is its base plus k.
    base: [usize; 3],
}

impl<V> Rank<V> {
    /// The value in slot `s` (None: never written).
    pub(super) fn value(&self, s: usize) -> Option<&V> {
        self.cells[s].val.as_ref()
    }
    fn slot(&self, buf: Buf, off: i16) -> usize {
        self.base[buf as usize] + off as usize
    }
}

/// Slot index within a rank, after aliasing (`Buffers::slot`).
pub(super) fn slot(p: &Program, gi: usize, mode: Mode, buf: Buf, off: usize) -> usize {
    let b = p.coll.buffers(p.nchunksperloop as usize, p.ngpus as usize);
    b.slot(p.gpus[gi].id as usize, mode == Mode::InPlace, buf, off)
}

/// Slots of a rank in `mode` (`s_chunks` of scratch).
fn slots(p: &Program, mode: Mode, s_chunks: usize) -> usize {
    let c = p.nchunksperloop as usize;
    let b = p.coll.buffers(c, p.ngpus as usize);
    match mode {
        Mode::OutOfPlace => b.i_chunks + b.o_chunks + s_chunks,
        Mode::InPlace => c + s_chunks,
    }
}

/// The symbolic value of rank `r`'s input chunk `k`: the (rank, global
/// chunk) contribution it holds (for allgather, its own shard's chunk).
pub(super) fn input_value<V: Sym>(p: &Program, r: usize, k: usize) -> V {
    match p.coll {
        Collective::AllGather => V::input(r, r * (p.nchunksperloop / p.ngpus) as usize + k),
        Collective::ReduceScatter | Collective::AllReduce => V::input(r, k),
    }
}

pub(super) fn execute<V: Sym>(plan: &Plan, mode: Mode) -> Result<Vec<Rank<V>>, VerifyError> {
    let p = plan.p;
    let b = p.coll.buffers(p.nchunksperloop as usize, p.ngpus as usize);
    let mut ranks: Vec<Rank<V>> = p
        .gpus
        .iter()
        .enumerate()
        .map(|(gi, g)| {
            // Scratch past what an offset can reach is never touched (the
            // structural rules hold: offsets ≤ 32767, cnt ≤ 71), so a file
            // declaring 2³¹ scratch chunks costs no more than one with
            // 32838.
            let scratch = g.s_chunks.clamp(0, crate::verify::structure::REACH) as usize;
            let slots = slots(p, mode, scratch);
            let empty = Cell {
                val: None,
                acc: Access {
                    write: NO_ACCESS,
                    read: NO_ACCESS,
                },
            };
            let mut cells = vec![empty; slots];
            for k in 0..b.i_chunks {
                cells[slot(p, gi, mode, Buf::Input, k)].val =
                    Some(input_value(p, g.id as usize, k));
            }
            let t = g.tbs.len();
            Rank {
                cells,
                more_reads: HashMap::default(),
                t,
                vc: vec![0; t * t],
                base: [Buf::Input, Buf::Output, Buf::Scratch].map(|buf| slot(p, gi, mode, buf, 0)),
            }
        })
        .collect();
    // Messages in flight, a slot per chunk; vector clocks after `hasdep`
    // steps for their waiters (both arenas as the plan hands them out).
    let mut msgs: Vec<V> = vec![V::expected(0, 0); plan.msg_total];
    let mut snaps: Vec<u32> = vec![0; plan.snap_total];
    for st in &plan.run {
        let (gi, ti, si) = (st.gi as usize, st.ti as usize, st.si as usize);
        let g = &p.gpus[gi];
        let here = || format!("{} in {} mode", at(p, g.id as usize, ti, si), mode.name());
        let rk = &mut ranks[gi];
        let t = rk.t;
        // Happens-before: program order plus the dependency.
        let row = ti * t..(ti + 1) * t;
        if st.dep_snap != NONE {
            let snap = &snaps[st.dep_snap as usize..][..t];
            for (x, y) in rk.vc[row.clone()].iter_mut().zip(snap) {
                *x = (*x).max(*y);
            }
        }
        rk.vc[ti * t + ti] = si as u32 + 1;
        let cnt = st.cnt as usize;
        // Pairing and equal counts were checked by `plan`.
        let (msg_in, msg_out) = (st.msg_in as usize, st.msg_out as usize);
        for j in 0..cnt {
            let src = (st.srcoff >= 0).then(|| rk.slot(st.srcbuf, st.srcoff) + j);
            let dst = (st.dstoff >= 0).then(|| rk.slot(st.dstbuf, st.dstoff) + j);
            let read = |rk: &mut Rank<V>, s: usize, buf: Buf, off: i16| -> Result<V, VerifyError> {
                check_access(rk, s, ti, si, false).map_err(|(t2, s2, w)| {
                    race(p, g.id, ti, si, t2, s2, w, buf, off as i64 + j as i64, mode)
                })?;
                rk.cells[s].val.clone().ok_or_else(|| {
                    VerifyError::new(
                        "uninitialised-read",
                        format!(
                            "{}: reads {}[{}], which nothing has written",
                            here(),
                            buf.letter(),
                            off as i64 + j as i64
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
                        st.dstoff as i64 + j as i64,
                        mode,
                    )
                })?;
                if st.kind.sends() {
                    rk.cells[d].val = value.clone();
                } else {
                    rk.cells[d].val = value;
                    continue;
                }
            }
            if st.kind.sends() {
                if let Some(v) = value {
                    msgs[msg_out + j] = v;
                }
            }
        }
        if st.snap != NONE {
            snaps[st.snap as usize..][..t].copy_from_slice(&rk.vc[row]);
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
    let a = &mut rk.cells[s].acc;
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
