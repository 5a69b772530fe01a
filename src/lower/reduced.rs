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

use crate::ir::{Buf, Collective, Program, Step, StepKind};

/// Rewrite `p`'s fused steps into the reduced set (in place).
pub(super) fn rewrite(p: &mut Program) {
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
        let mut scratch = g.s_chunks.max(0);
        // Per threadblock: the new steps, and per old step (first new
        // position, position its wait moves to, last new position).
        let mut maps: Vec<Vec<(usize, usize, usize)>> = Vec::with_capacity(g.tbs.len());
        let mut news: Vec<Vec<Step>> = Vec::with_capacity(g.tbs.len());
        for t in &g.tbs {
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
            let mut out: Vec<Step> = Vec::with_capacity(t.steps.len() * 2);
            let mut map = Vec::with_capacity(t.steps.len());
            for s in &t.steps {
                let first = out.len();
                let wait = expand(s, overlap(s), temp.unwrap_or(0), &mut out);
                map.push((first, first + wait, out.len() - 1));
            }
            maps.push(map);
            news.push(out);
        }
        // Dependencies: the waiting step's id and the target's position
        // in the rewritten threadblocks.
        let pos_of_id: std::collections::HashMap<i64, usize> =
            g.tbs.iter().enumerate().map(|(i, t)| (t.id, i)).collect();
        let mut targets = Vec::new();
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
                let w = maps[ti][si].1;
                news[ti][w].depid = s.depid;
                news[ti][w].deps = last as i64;
                targets.push((dt, last));
            }
        }
        for (dt, last) in targets {
            news[dt][last].hasdep = true;
        }
        for (t, steps) in g.tbs.iter_mut().zip(news) {
            t.steps = steps;
            for (i, s) in t.steps.iter_mut().enumerate() {
                s.s = i as i64;
            }
        }
        g.s_chunks = scratch;
    }
}

/// How many steps `p` (in the reduced set) would have with fused steps:
/// each `r` with the `re`, `cpy`, `nop` and `s` steps after it that
/// complete its form counts once, as the fused step it replaces, and
/// every other step once. A search's budget of work counts these, so that
/// a runtime without fused steps gets as many plans scored as one with.
pub fn fused_len(p: &Program) -> usize {
    let mut n = 0;
    for t in p.gpus.iter().flat_map(|g| &g.tbs) {
        let mut after_recv = false;
        for s in &t.steps {
            match s.kind {
                StepKind::Recv => {
                    n += 1;
                    after_recv = true;
                }
                StepKind::Reduce | StepKind::Copy | StepKind::Nop if after_recv => {}
                StepKind::Send if after_recv => after_recv = false,
                _ => {
                    n += 1;
                    after_recv = false;
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
        let mut p = crate::exec::builtin::ring(4, 2);
        let before = p.num_steps();
        rewrite(&mut p);
        p.runtime = Runtime::Rccl;
        assert!(kinds(&p).iter().all(|&k| Runtime::Rccl.runs(k)));
        // rrs: 3 steps, rrc aliased in place: 3, s: 1.
        assert_eq!(p.num_steps(), 3 * before - 2 * 4 * 2);
        assert!(p.gpus.iter().all(|g| g.s_chunks == 2));
        verify(&p, &rccl()).unwrap();
        assert_eq!(wrong(&p), 0);
    }

    #[test]
    fn dependencies_move_to_the_form_that_reads_shared_data() {
        // All-pairs: scratch, nops and re; a rewritten executor schedule
        // with cross-threadblock chains (direct on a switch).
        let mut p = crate::exec::builtin::allpairs(4);
        rewrite(&mut p);
        verify(&p, &rccl()).unwrap();
        assert_eq!(wrong(&p), 0);
        let t = crate::front::load_topology(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/topologies/dgx-h100.json"
        )))
        .unwrap();
        let c = compile_one(&t, Algo::Direct, &CompileOptions::default()).unwrap();
        let mut p = c.program.clone();
        rewrite(&mut p);
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
            let mut r = p.clone();
            rewrite(&mut r);
            assert!(r.num_steps() > before, "{}", p.name);
            assert_eq!(fused_len(&r), before, "{}", p.name);
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
