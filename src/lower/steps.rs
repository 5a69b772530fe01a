//! Steps (items 5 and 6 of the module doc's per-rank part): scratch slots
//! packed per chunk, `depid/deps` dependencies along chains across
//! threadblocks (`hasdep` on the target), and the threadblocks' MSCCL
//! steps with their buffers and offsets.

use super::chains::{Op, OpKind, RankChains, Slot};
use super::threadblocks::{Placement, TbStep};
use crate::ir::{Buf, Step, StepKind, Threadblock};
use rustc_hash::FxHashMap as HashMap;

/// Scratch: the accumulator ranges (first chunk, end, scratch offset of the
/// first chunk) and the scratch chunks.
pub(super) fn scratch(rops: &[Op], tb_steps: &[Vec<TbStep>]) -> (Vec<(u32, u32, usize)>, usize) {
    // Scratch: the chunks whose accumulators some step still names, in
    // chunk order, packed (a chunk's slot = accumulator chunks before
    // it), so a receive spanning several runs names one contiguous range.
    let mut acc_used: Vec<(u32, u32)> = Vec::new();
    for steps in tb_steps {
        for &(kind, a, _) in steps {
            let o = &rops[a];
            let names = |s: Slot| matches!(s, Slot::Acc(_));
            let named = match kind {
                StepKind::RecvReduceSend => Some(o.src),
                _ if names(o.src) => Some(o.src),
                _ if o.kind != OpKind::Send && names(o.dst) => Some(o.dst),
                _ => None,
            };
            if let Some(Slot::Acc(c)) = named {
                acc_used.push((c, c + o.cnt));
            }
        }
    }
    acc_used.sort_unstable();
    // Merged ranges with the scratch offset of their first chunk.
    let mut acc_ranges: Vec<(u32, u32, usize)> = Vec::new();
    let mut s_chunks = 0usize;
    for (a, b) in acc_used {
        match acc_ranges.last_mut() {
            Some(last) if a <= last.1 => {
                if b > last.1 {
                    s_chunks += (b - last.1) as usize;
                    last.1 = b;
                }
            }
            _ => {
                acc_ranges.push((a, b, s_chunks));
                s_chunks += (b - a) as usize;
            }
        }
    }
    (acc_ranges, s_chunks)
}

/// Buffer and offset of slot `s` (`acc_ranges` from `scratch`).
fn slot_place(acc_ranges: &[(u32, u32, usize)], s: Slot) -> (Buf, usize) {
    match s {
        Slot::In(c) => (Buf::Input, c as usize),
        Slot::Out(k) => (Buf::Output, k as usize),
        Slot::Acc(c) => {
            let i = acc_ranges.partition_point(|r| r.1 <= c);
            let off = acc_ranges
                .get(i)
                .filter(|r| r.0 <= c)
                .map_or(0, |r| r.2 + (c - r.0) as usize);
            (Buf::Scratch, off)
        }
    }
}

/// Dependencies along chains and `joins` across threadblocks: (tb, step)
/// → the (tb, step)s it waits on, sorted.
pub(super) fn dependencies(
    rc: &RankChains,
    pos_of_op: &[(usize, usize)],
) -> HashMap<(usize, usize), Vec<(usize, usize)>> {
    let (chains, cops) = (&rc.chains, &rc.chain_ops);
    let mut dep_of: HashMap<(usize, usize), Vec<(usize, usize)>> = HashMap::default();
    let mut add = |a: usize, b: usize| {
        let (pa, pb) = (pos_of_op[a], pos_of_op[b]);
        if pa.0 != pb.0 {
            dep_of.entry(pb).or_default().push(pa);
        }
    };
    for chain in chains {
        for i in chain.start..chain.end.saturating_sub(1) {
            add(cops[i], cops[i + 1]);
        }
    }
    for &(op, pred) in &rc.joins {
        add(pred, op);
    }
    for v in dep_of.values_mut() {
        v.sort_unstable();
        v.dedup();
    }
    dep_of
}

/// The rank's threadblocks with their steps, and the largest channel they
/// use.
pub(super) fn threadblocks(
    rops: &[Op],
    pl: &Placement,
    acc_ranges: &[(u32, u32, usize)],
    dep_of: &HashMap<(usize, usize), Vec<(usize, usize)>>,
) -> (Vec<Threadblock>, usize) {
    let (tb_keys, new_id, tb_steps) = (&pl.tb_keys, &pl.new_id, &pl.tb_steps);
    let place = |s: Slot| slot_place(acc_ranges, s);
    let mut max_chan = 0usize;
    let mut tbs: Vec<Threadblock> = tb_keys
        .iter()
        .enumerate()
        .map(|(t, &(ch, send, recv))| {
            max_chan = max_chan.max(ch as usize);
            Threadblock {
                id: new_id[t] as i64,
                send,
                recv,
                chan: ch as i64,
                steps: Vec::new(),
                line: 0,
            }
        })
        .collect();
    tbs.sort_by_key(|t| t.id);
    // An MSCCL step waits on one dependency: a step with k of them is
    // preceded in its threadblock by k − 1 `nop`s that carry the others.
    // `at[t][pos]`: the step's position with those nops.
    let at: Vec<Vec<usize>> = tb_steps
        .iter()
        .enumerate()
        .map(|(t, steps)| {
            let mut next = 0usize;
            (0..steps.len())
                .map(|pos| {
                    next += dep_of.get(&(t, pos)).map_or(0, |d| d.len() - 1);
                    next += 1;
                    next - 1
                })
                .collect()
        })
        .collect();
    for (t, steps) in tb_steps.iter().enumerate() {
        for (pos, &(kind, a, b)) in steps.iter().enumerate() {
            let deps = dep_of.get(&(t, pos)).map_or(&[][..], |d| &d[..]);
            for &(dt, dp) in deps.iter().take(deps.len().saturating_sub(1)) {
                let mut nop = Step::new(StepKind::Nop).count(0);
                nop.s = tbs[t].steps.len() as i64;
                nop.depid = dt as i64;
                nop.deps = at[dt][dp] as i64;
                tbs[t].steps.push(nop);
            }
            let oa = &rops[a];
            let mut st = Step::new(kind).count(oa.cnt as usize);
            st.s = at[t][pos] as i64;
            match kind {
                StepKind::RecvReduceSend => {
                    let (sb, so) = place(oa.src);
                    // dst is informational: where the peer puts it.
                    st = st.src(sb, so).dst(sb, so);
                    let _ = b;
                }
                StepKind::RecvReduceCopy | StepKind::RecvReduceCopySend | StepKind::Copy => {
                    let (sb, so) = place(oa.src);
                    let (db, dof) = place(oa.dst);
                    st = st.src(sb, so).dst(db, dof);
                }
                StepKind::Send => {
                    let (sb, so) = place(oa.src);
                    st = st.src(sb, so).dst(sb, so);
                }
                StepKind::Recv | StepKind::RecvCopySend => {
                    // src is informational: where the peer took it from.
                    let (db, dof) = place(oa.dst);
                    st = st.src(db, dof).dst(db, dof);
                }
                _ => {}
            }
            if let Some(&(dt, dp)) = deps.last() {
                st.depid = dt as i64;
                st.deps = at[dt][dp] as i64;
            }
            tbs[t].steps.push(st);
        }
    }
    // hasdep on every target.
    for &(t, p) in dep_of.values().flatten() {
        tbs[t].steps[at[t][p]].hasdep = true;
    }
    (tbs, max_chan)
}
