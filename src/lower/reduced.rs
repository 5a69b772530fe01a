//! The reduced step set (item 7 of the module doc): every fused step
//! rewritten with `s`, `r`, `re` and `cpy` only, for runtimes that build
//! only those kernels (RCCL, `Runtime::fused_steps`). Per step, with `x`
//! the received data, `S`/`D` its src/dst and `T` a scratch range private
//! to the threadblock:
//!
//! | step | becomes |
//! |---|---|
//! | `rcs` D | `r` D; `s` D |
//! | `rrc` S → D, S = D | `r` T; `re` T → D |
//! | `rrc` S → D, never aliased | `r` D; `re` S → D |
//! | `rrc` S → D, aliased in place | `r` T; `re` S → T; `cpy` T → D |
//! | `rrs` S | `r` T; `re` S → T; `s` T |
//! | `rrcs` S → D | the `rrc` form, then `s` D |
//!
//! "Aliased in place": under the op's in-place aliasing (`o` inside `i`
//! for reduce-scatter, `i` inside `o` for allgather, `o` = `i` for
//! allreduce) the two ranges overlap, so receiving into D first would
//! overwrite S before it is read. A file that allows out-of-place calls
//! never writes `i`, and none of these forms does unless the fused step
//! did. `T` is one range per threadblock, as long as its largest `cnt`:
//! a threadblock runs its steps (and tiles) in order, so each use ends
//! before the next begins.
//!
//! A step's dependency moves to the first step of its form that reads or
//! writes anything but `T` (a receive into `T` may run ahead), and a wait
//! on a step waits for the last step of its form.
//!
//! **Send threadblocks.** A threadblock runs its steps one after another,
//! so in `r T; re S → T; s T` the next receive waits for the send, and
//! the send for the local pass: per tile the hop costs the pass plus the
//! transfer, where the fused `rrs` reduces while the data streams. Where
//! the rank has threadblocks to spare (`LowerOptions::max_tbs`), a
//! threadblock that receives, reduces and forwards (an `rrs` or `rrcs`;
//! most reduced chunks first) gives all its sends, in order, to a new
//! threadblock on the same channel with the same send peer (the old one
//! keeps the receive peer, so every connection still has one threadblock
//! at each end). Each form gets a scratch range of its own instead of
//! `T`, since a receive may now run ahead of the previous send. The next
//! tile's receive and reduction then overlap this tile's send, as two
//! threadblocks run at once. The split keeps every ordering the
//! threadblock's program order gave:
//! - a send waits on the step of the old threadblock that wrote its data
//!   last, or, when others wait on the send, on the old threadblock's
//!   latest step (they relied on everything before it);
//! - `nop`s go with the step whose wait they carry (to the send
//!   threadblock for a plain `s`), and a `nop` carries a send's own wait
//!   where it waits twice;
//! - a step others wait on also waits on the latest earlier moved send
//!   whose data another threadblock writes (a write after it must not
//!   overtake the send);
//! - a threadblock that writes, after a send, data that send reads keeps
//!   its sends.
//!
//! `auto` scores every program both with and without send threadblocks
//! (`LowerOptions::send_tbs`).

use crate::ir::{Buf, Collective, GpuProgram, Program, Step, StepKind, Threadblock};
use rustc_hash::FxHashMap as HashMap;

/// Where a rewritten step lies: (threadblock index in the rewritten GPU,
/// position).
type Loc = (usize, usize);

/// Rewrite `p`'s fused steps into the reduced set (in place), with send
/// threadblocks (module doc) while a rank has fewer than `max_tbs`.
pub(super) fn rewrite(p: &mut Program, max_tbs: usize) {
    let coll = p.coll;
    let inplace = p.inplace;
    let c = p.nchunksperloop.max(0) as usize;
    let n = p.ngpus.max(1) as usize;
    let bufs = coll.buffers(c, n);
    for g in &mut p.gpus {
        let rank = g.id.max(0) as usize;
        // Where a range lies in the in-place address space (scratch never
        // aliases): the full buffer's chunk index.
        let place = |b: Buf, off: i64| -> (Buf, i64) {
            if !inplace {
                return (b, off);
            }
            match (coll, b) {
                (Collective::ReduceScatter, Buf::Output) => {
                    (Buf::Input, (rank * bufs.o_chunks) as i64 + off)
                }
                (Collective::AllGather, Buf::Input) => {
                    (Buf::Output, (rank * bufs.i_chunks) as i64 + off)
                }
                (Collective::AllReduce, Buf::Output) => (Buf::Input, off),
                _ => (b, off),
            }
        };
        let overlap = |s: &Step| {
            let (a, x) = place(s.srcbuf, s.srcoff);
            let (b, y) = place(s.dstbuf, s.dstoff);
            a == b && x < y + s.cnt && y < x + s.cnt
        };
        // Whether two (buffer, offset, count) ranges meet in memory.
        let meet = |a: (Buf, i64, i64), b: (Buf, i64, i64)| {
            let (x, i) = place(a.0, a.1);
            let (y, j) = place(b.0, b.1);
            x == y && i < j + b.2 && j < i + a.2
        };
        let split = send_threadblocks(g, max_tbs, meet);
        // Per chunk (in the in-place address space): up to two of the
        // threadblocks that write it. A moved send whose data no other
        // threadblock writes cannot race with a later write, so nothing
        // needs to wait for it.
        let mut writers: HashMap<(Buf, i64), [usize; 2]> = HashMap::default();
        if split.iter().any(|&b| b) {
            for (ti, t) in g.tbs.iter().enumerate() {
                for (b, off, cnt) in t.steps.iter().filter_map(written) {
                    for c in off..off + cnt {
                        let w = writers.entry(place(b, c)).or_insert([ti, ti]);
                        if w[0] != ti {
                            w[1] = ti;
                        }
                    }
                }
            }
        }
        let written_elsewhere = |ti: usize, (b, off, cnt): (Buf, i64, i64)| {
            (off..off + cnt).any(|c| {
                writers
                    .get(&place(b, c))
                    .is_some_and(|w| w[0] != ti || w[1] != ti)
            })
        };
        let ntb = g.tbs.len();
        let mut scratch = g.s_chunks.max(0);
        // Per threadblock: its steps (a split one's own, then its send
        // threadblock's at index ntb + k), and per old step the locations
        // of its form's first step, of the step its wait moves to and of
        // its last step.
        let mut news: Vec<Vec<Step>> = Vec::with_capacity(ntb);
        let mut sends: Vec<Vec<Step>> = Vec::new();
        let mut maps: Vec<Vec<(Loc, Loc, Loc)>> = Vec::with_capacity(ntb);
        // Waits the split adds: (waiting step, step waited on).
        let mut extra: Vec<(Loc, Loc)> = Vec::new();
        for (ti, t) in g.tbs.iter().enumerate() {
            let mut out: Vec<Step> = Vec::with_capacity(t.steps.len() * 2);
            let mut map = Vec::with_capacity(t.steps.len());
            if !split[ti] {
                // One scratch range for the threadblock: its steps run in
                // order, so each use ends before the next begins.
                let temp_cnt = t
                    .steps
                    .iter()
                    .filter(|s| needs_temp(s, overlap(s)))
                    .map(|s| s.cnt)
                    .max();
                let temp = temp_cnt.map(|k| {
                    let off = scratch;
                    scratch += k;
                    off
                });
                for s in &t.steps {
                    let first = out.len();
                    let wait = expand(s, overlap(s), temp.unwrap_or(0), &mut out);
                    map.push(((ti, first), (ti, first + wait), (ti, out.len() - 1)));
                }
            } else {
                // The sends go to threadblock `st`; a send waits on the
                // step of this threadblock that wrote its data last, and
                // every form gets a scratch range of its own (a receive
                // may now overwrite one before the send has read it).
                let st = ntb + sends.len();
                let mut sout: Vec<Step> = Vec::new();
                // Per old step: its form's last step left here.
                let mut last_here: Vec<Option<Loc>> = Vec::with_capacity(t.steps.len());
                let mut last_send: Option<Loc> = None;
                // A run of nops carries waits of the step after it: they
                // go where that step's wait goes (its send threadblock for
                // a plain send).
                let mut pending: Vec<usize> = Vec::new();
                let mut slots: Vec<Option<(Loc, Loc, Loc)>> = vec![None; t.steps.len()];
                for (si, s) in t.steps.iter().enumerate() {
                    if s.kind == StepKind::Nop {
                        pending.push(si);
                        last_here.push(None);
                        continue;
                    }
                    let temp = needs_temp(s, overlap(s)).then(|| {
                        let off = scratch;
                        scratch += s.cnt;
                        off
                    });
                    let mut form = Vec::new();
                    let wait = expand(s, overlap(s), temp.unwrap_or(0), &mut form);
                    let send = s.kind.sends().then(|| form.pop()).flatten();
                    // A step others wait on vouched for every earlier step
                    // of the threadblock, the moved sends included: its
                    // form's last step waits on the latest of them whose
                    // data another threadblock writes (a nop carries that
                    // wait where the step has its own).
                    let mut wait = wait;
                    let behind = (send.is_none() && s.hasdep).then_some(last_send).flatten();
                    let nop = behind.is_some() && wait + 1 == form.len() && s.depid >= 0;
                    if nop {
                        form.insert(form.len() - 1, Step::new(StepKind::Nop));
                        wait += 1;
                    }
                    // The latest step left here before this form.
                    let before = out.len().checked_sub(1).map(|p| (ti, p));
                    let waits_here = wait < form.len();
                    for k in pending.drain(..) {
                        let c = Step {
                            depid: -1,
                            deps: -1,
                            hasdep: false,
                            ..t.steps[k].clone()
                        };
                        let at = if waits_here {
                            out.push(c);
                            (ti, out.len() - 1)
                        } else {
                            sout.push(c);
                            (st, sout.len() - 1)
                        };
                        slots[k] = Some((at, at, at));
                    }
                    let first = out.len();
                    let kept = form.len();
                    out.extend(form);
                    let here = (kept > 0).then(|| (ti, out.len() - 1));
                    last_here.push(here);
                    let Some(send) = send else {
                        if let Some(b) = behind {
                            extra.push(((ti, out.len() - 1 - usize::from(nop)), b));
                        }
                        slots[si] = Some(((ti, first), (ti, first + wait), (ti, out.len() - 1)));
                        continue;
                    };
                    // The send waits on the step that wrote its data last;
                    // one that others wait on vouches for every earlier
                    // step, so it waits on the latest step left here.
                    let read = (send.srcbuf, send.srcoff, send.cnt);
                    let writer = here.or_else(|| {
                        if s.hasdep {
                            return before;
                        }
                        (0..si)
                            .rev()
                            .find(|&k| written(&t.steps[k]).is_some_and(|w| meet(w, read)))
                            .and_then(|k| last_here[k])
                    });
                    // A send that waits twice: a nop carries its own wait.
                    let own = (kept == 0 && writer.is_some() && s.depid >= 0).then(|| {
                        sout.push(Step::new(StepKind::Nop));
                        (st, sout.len() - 1)
                    });
                    let at = (st, sout.len());
                    sout.push(send);
                    if written_elsewhere(ti, read) {
                        last_send = Some(at);
                    }
                    if let Some(w) = writer {
                        extra.push((at, w));
                    }
                    let wait_at = if wait < kept {
                        (ti, first + wait)
                    } else {
                        own.unwrap_or(at)
                    };
                    let first_at = if kept > 0 {
                        (ti, first)
                    } else {
                        own.unwrap_or(at)
                    };
                    slots[si] = Some((first_at, wait_at, at));
                }
                // Trailing nops wait here.
                for k in pending.drain(..) {
                    out.push(Step {
                        depid: -1,
                        deps: -1,
                        hasdep: false,
                        ..t.steps[k].clone()
                    });
                    let at = (ti, out.len() - 1);
                    slots[k] = Some((at, at, at));
                }
                map = slots
                    .into_iter()
                    .map(|m| m.unwrap_or(((ti, 0), (ti, 0), (ti, 0))))
                    .collect();
                sends.push(sout);
            }
            maps.push(map);
            news.push(out);
        }
        news.extend(sends);
        // Threadblock ids: the old ones, then one per send threadblock.
        let next_id = g.tbs.iter().map(|t| t.id + 1).max().unwrap_or(0);
        let ids: Vec<i64> = (0..news.len())
            .map(|i| {
                if i < ntb {
                    g.tbs[i].id
                } else {
                    next_id + (i - ntb) as i64
                }
            })
            .collect();
        // Dependencies: the waiting step's id and the target's position
        // in the rewritten threadblocks.
        let pos_of_id: std::collections::HashMap<i64, usize> =
            g.tbs.iter().enumerate().map(|(i, t)| (t.id, i)).collect();
        let mut waits = extra;
        for (ti, t) in g.tbs.iter().enumerate() {
            for (si, s) in t.steps.iter().enumerate() {
                if s.depid < 0 || s.deps < 0 {
                    continue;
                }
                let Some(&dt) = pos_of_id.get(&s.depid) else {
                    continue;
                };
                let Some(&(_, _, last)) = maps[dt].get(s.deps as usize) else {
                    continue;
                };
                waits.push((maps[ti][si].1, last));
            }
        }
        for ((wt, w), (dt, d)) in waits {
            news[wt][w].depid = ids[dt];
            news[wt][w].deps = d as i64;
            news[dt][d].hasdep = true;
        }
        // The old threadblock each send threadblock's sends come from.
        let origins: Vec<usize> = (0..ntb).filter(|&i| split[i]).collect();
        let old = std::mem::take(&mut g.tbs);
        let mut tbs: Vec<Threadblock> = Vec::with_capacity(news.len());
        for (i, steps) in news.into_iter().enumerate() {
            let mut t = if i < ntb {
                let mut t = old[i].clone();
                if split[i] {
                    t.send = -1;
                }
                t
            } else {
                let o = &old[origins[i - ntb]];
                Threadblock {
                    id: ids[i],
                    send: o.send,
                    recv: -1,
                    chan: o.chan,
                    steps: Vec::new(),
                    line: 0,
                }
            };
            t.steps = steps;
            for (k, s) in t.steps.iter_mut().enumerate() {
                s.s = k as i64;
            }
            tbs.push(t);
        }
        g.tbs = tbs;
        g.s_chunks = scratch;
    }
}

/// The range a fused step writes (None: it writes nothing this
/// threadblock reads again: a send, an `rrs`, a `nop`).
fn written(s: &Step) -> Option<(Buf, i64, i64)> {
    match s.kind {
        StepKind::Send | StepKind::RecvReduceSend | StepKind::Nop => None,
        _ => Some((s.dstbuf, s.dstoff, s.cnt)),
    }
}

/// Which threadblocks give their sends to a threadblock of their own:
/// those that receive, reduce and forward (an `rrs` or `rrcs`), most
/// reduced chunks first, while the rank stays within `max_tbs`. A
/// threadblock that later overwrites data one of its sends reads keeps
/// its sends (the send would no longer be ordered before the write).
fn send_threadblocks(
    g: &GpuProgram,
    max_tbs: usize,
    meet: impl Fn((Buf, i64, i64), (Buf, i64, i64)) -> bool,
) -> Vec<bool> {
    let mut split = vec![false; g.tbs.len()];
    let mut spare = max_tbs.saturating_sub(g.tbs.len());
    if spare == 0 {
        return split;
    }
    let mut cands: Vec<(i64, usize)> = Vec::new();
    for (ti, t) in g.tbs.iter().enumerate() {
        if t.send < 0 || t.recv < 0 {
            continue;
        }
        let weight: i64 = t
            .steps
            .iter()
            .filter(|s| {
                matches!(
                    s.kind,
                    StepKind::RecvReduceSend | StepKind::RecvReduceCopySend
                )
            })
            .map(|s| s.cnt)
            .sum();
        let safe = t.steps.iter().enumerate().all(|(j, s)| {
            let read = match s.kind {
                StepKind::Send => (s.srcbuf, s.srcoff, s.cnt),
                StepKind::RecvCopySend | StepKind::RecvReduceCopySend => {
                    (s.dstbuf, s.dstoff, s.cnt)
                }
                _ => return true,
            };
            t.steps[j + 1..]
                .iter()
                .all(|w| written(w).is_none_or(|w| !meet(w, read)))
        });
        if weight > 0 && safe {
            cands.push((weight, ti));
        }
    }
    cands.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for (_, ti) in cands {
        if spare == 0 {
            break;
        }
        split[ti] = true;
        spare -= 1;
    }
    split
}

/// How many steps `p` (in the reduced set) would have with fused steps:
/// each `r` with the `re`, `cpy`, `nop` and `s` steps after it that
/// complete its form counts once, as the fused step it replaces, and so
/// does a send threadblock's `s` that waits on the `r`, `re` or `cpy`
/// ending a form of a receive-only threadblock on its channel (the form
/// it was split from); every other step counts once. A search's budget of
/// work counts these, so that a runtime without fused steps gets as many
/// plans scored as one with.
pub fn fused_len(p: &Program) -> usize {
    let mut n = 0;
    for g in &p.gpus {
        let by_id: HashMap<i64, &Threadblock> = g.tbs.iter().map(|t| (t.id, t)).collect();
        // The `s` continues a form of the threadblock it waits on.
        let split_send = |t: &Threadblock, s: &Step| {
            t.recv < 0
                && s.kind == StepKind::Send
                && by_id.get(&s.depid).is_some_and(|o| {
                    o.send < 0
                        && o.recv >= 0
                        && o.chan == t.chan
                        && o.steps.get(s.deps.max(0) as usize).is_some_and(|d| {
                            matches!(d.kind, StepKind::Recv | StepKind::Reduce | StepKind::Copy)
                        })
                })
        };
        for t in &g.tbs {
            let mut after_recv = false;
            for s in &t.steps {
                match s.kind {
                    StepKind::Recv => {
                        n += 1;
                        after_recv = true;
                    }
                    StepKind::Reduce | StepKind::Copy | StepKind::Nop if after_recv => {}
                    StepKind::Send if after_recv => after_recv = false,
                    _ if split_send(t, s) => {}
                    _ => {
                        n += 1;
                        after_recv = false;
                    }
                }
            }
        }
    }
    n
}

/// Whether the step's reduced form uses the threadblock's scratch range.
fn needs_temp(s: &Step, aliased: bool) -> bool {
    match s.kind {
        StepKind::RecvReduceSend => true,
        StepKind::RecvReduceCopy | StepKind::RecvReduceCopySend => same(s) || aliased,
        _ => false,
    }
}

/// src and dst name the same range.
fn same(s: &Step) -> bool {
    s.srcbuf == s.dstbuf && s.srcoff == s.dstoff
}

/// Push the reduced form of `s` (scratch range at `temp`); returns the
/// index within the form its dependency moves to.
fn expand(s: &Step, aliased: bool, temp: i64, out: &mut Vec<Step>) -> usize {
    let k = s.cnt as usize;
    let step = |kind: StepKind, src: (Buf, i64), dst: (Buf, i64)| {
        Step::new(kind)
            .count(k)
            .src(src.0, src.1 as usize)
            .dst(dst.0, dst.1 as usize)
    };
    let (src, dst, t) = (
        (s.srcbuf, s.srcoff),
        (s.dstbuf, s.dstoff),
        (Buf::Scratch, temp),
    );
    // The reduced form of "dst ← x ⊕ src"; returns the wait index.
    let reduce_into_dst = |out: &mut Vec<Step>| -> usize {
        if same(s) {
            out.push(step(StepKind::Recv, t, t));
            out.push(step(StepKind::Reduce, t, dst));
            1
        } else if !aliased {
            out.push(step(StepKind::Recv, dst, dst));
            out.push(step(StepKind::Reduce, src, dst));
            0
        } else {
            out.push(step(StepKind::Recv, t, t));
            out.push(step(StepKind::Reduce, src, t));
            out.push(step(StepKind::Copy, t, dst));
            1
        }
    };
    match s.kind {
        StepKind::RecvCopySend => {
            out.push(step(StepKind::Recv, dst, dst));
            out.push(step(StepKind::Send, dst, dst));
            0
        }
        StepKind::RecvReduceCopy => reduce_into_dst(out),
        StepKind::RecvReduceCopySend => {
            let w = reduce_into_dst(out);
            out.push(step(StepKind::Send, dst, dst));
            w
        }
        StepKind::RecvReduceSend => {
            out.push(step(StepKind::Recv, t, t));
            out.push(step(StepKind::Reduce, src, t));
            out.push(step(StepKind::Send, t, t));
            1
        }
        _ => {
            let mut c = s.clone();
            c.depid = -1;
            c.deps = -1;
            c.hasdep = false;
            out.push(c);
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::{compile_one, CompileOptions};
    use crate::exec::{run_program, RunOptions};
    use crate::ir::Runtime;
    use crate::synth::Algo;
    use crate::verify::{verify, VerifyOptions};

    fn rccl() -> VerifyOptions {
        VerifyOptions {
            runtime: Some(Runtime::Rccl),
            ..VerifyOptions::default()
        }
    }

    /// Wrong elements of a checked CPU run, in place and out of place as
    /// the program allows.
    fn wrong(p: &Program) -> u64 {
        let mut total = 0;
        for (ok, inplace) in [(p.outofplace, false), (p.inplace, true)] {
            if !ok {
                continue;
            }
            let opts = RunOptions {
                sizes: vec![4096 * p.nchunksperloop as u64],
                iters: 1,
                warmup: 0,
                check: true,
                inplace: Some(inplace),
                ..RunOptions::default()
            };
            let r = run_program(p, &opts).unwrap_or_else(|e| panic!("{}: {e}", p.name));
            total += r.rows.iter().map(|x| x.wrong.unwrap()).sum::<u64>();
        }
        total
    }

    fn kinds(p: &Program) -> Vec<StepKind> {
        p.gpus
            .iter()
            .flat_map(|g| g.tbs.iter().flat_map(|t| t.steps.iter().map(|s| s.kind)))
            .collect()
    }

    #[test]
    fn the_ring_in_the_reduced_set() {
        // rrs and rrc (src i, dst o: aliased in place) in both call modes.
        let ring = crate::exec::builtin::ring(4, 2);
        let before = ring.num_steps();
        let tbs = ring.max_tbs_per_rank();
        let mut p = ring.clone();
        rewrite(&mut p, tbs);
        p.runtime = Runtime::Rccl;
        assert!(kinds(&p).iter().all(|&k| Runtime::Rccl.runs(k)));
        // rrs: 3 steps, rrc aliased in place: 3, s: 1.
        assert_eq!(p.num_steps(), 3 * before - 2 * 4 * 2);
        assert!(p.gpus.iter().all(|g| g.s_chunks == 2));
        assert_eq!(p.max_tbs_per_rank(), tbs);
        verify(&p, &rccl()).unwrap();
        assert_eq!(wrong(&p), 0);
        // With threadblocks to spare, each ring threadblock's sends get
        // one of their own (waiting on the reduction before each), and
        // each form its own scratch range.
        let mut p = ring.clone();
        rewrite(&mut p, usize::MAX);
        p.runtime = Runtime::Rccl;
        assert_eq!(p.max_tbs_per_rank(), 2 * tbs);
        assert_eq!(p.num_steps(), 3 * before - 2 * 4 * 2);
        for g in &p.gpus {
            for t in &g.tbs {
                assert!(t.send < 0 || t.recv < 0, "rank {} tb {}", g.id, t.id);
                if t.send >= 0 {
                    // Every send after the first waits on a reduction.
                    assert!(t.steps[1..].iter().all(|s| s.depid >= 0));
                }
            }
        }
        verify(&p, &rccl()).unwrap();
        assert_eq!(wrong(&p), 0);
    }

    #[test]
    fn dependencies_move_to_the_form_that_reads_shared_data() {
        // All-pairs: scratch, nops and re; a rewritten executor schedule
        // with cross-threadblock chains (direct on a switch).
        let mut p = crate::exec::builtin::allpairs(4);
        rewrite(&mut p, usize::MAX);
        verify(&p, &rccl()).unwrap();
        assert_eq!(wrong(&p), 0);
        let t = crate::front::load_topology(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/topologies/dgx-h100.json"
        )))
        .unwrap();
        let c = compile_one(&t, Algo::Direct, &CompileOptions::default()).unwrap();
        let mut p = c.program.clone();
        rewrite(&mut p, usize::MAX);
        verify(&p, &rccl()).unwrap();
        assert_eq!(wrong(&p), 0);
        // Every dependency target is the last step of a form, and every
        // waiting step waits on a step that exists.
        for g in &p.gpus {
            for t in &g.tbs {
                for s in &t.steps {
                    if s.depid >= 0 {
                        let d = g.tbs.iter().find(|x| x.id == s.depid).unwrap();
                        assert!(d.steps[s.deps as usize].hasdep);
                    }
                }
            }
        }
    }

    #[test]
    fn fused_len_counts_the_steps_before_the_rewrite() {
        let t = crate::front::load_topology(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/topologies/ring8.json"
        )))
        .unwrap();
        let mut programs = vec![crate::exec::builtin::ring(4, 2)];
        for op in [Collective::ReduceScatter, Collective::AllReduce] {
            for algo in [Algo::Ring, Algo::Direct, Algo::Tree] {
                let o = CompileOptions {
                    op,
                    ..CompileOptions::default()
                };
                programs.push(compile_one(&t, algo, &o).unwrap().program);
            }
        }
        for p in programs {
            let before = p.num_steps();
            // Without and with send threadblocks.
            for tbs in [0, usize::MAX] {
                let mut r = p.clone();
                rewrite(&mut r, tbs);
                assert!(r.num_steps() > before, "{}", p.name);
                assert_eq!(fused_len(&r), before, "{} ({tbs})", p.name);
            }
        }
    }

    #[test]
    fn every_op_lowers_to_the_reduced_set() {
        let t = crate::front::load_topology(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/topologies/ring8.json"
        )))
        .unwrap();
        for op in [
            Collective::ReduceScatter,
            Collective::AllGather,
            Collective::AllReduce,
        ] {
            for algo in [Algo::Ring, Algo::Direct, Algo::Tree] {
                let mut o = CompileOptions {
                    op,
                    ..CompileOptions::default()
                };
                o.lower.runtime = Runtime::Rccl;
                let c = compile_one(&t, algo, &o).unwrap();
                assert!(
                    kinds(&c.program).iter().all(|&k| Runtime::Rccl.runs(k)),
                    "{op:?} {algo:?}"
                );
                assert!(c.program.max_tbs_per_rank() <= 64);
                verify(&c.program, &rccl()).unwrap();
                assert_eq!(wrong(&c.program), 0, "{op:?} {algo:?}");
            }
        }
    }
}
