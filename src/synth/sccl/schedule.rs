//! Schedule conversion: the time reversal that turns an allgather schedule
//! into a reduce-scatter one (and back), and [`to_reduce_scatter`], which
//! turns a schedule into the central [`Algorithm`] with its channels.

use super::{SccCollective, Schedule, Send};
use crate::ir::{Algorithm, Spec, Transfer};

/// Time-reverse an allgather schedule on G into a reduce-scatter schedule on
/// G reversed: step k → S−1−k, round r → R−1−r, every send flipped.
pub(super) fn time_reverse(s: &Schedule) -> Schedule {
    let sn = s.point.steps;
    let rn = s.point.rounds;
    let mut sends: Vec<Send> = s
        .sends
        .iter()
        .map(|x| Send {
            step: sn - 1 - x.step,
            round: rn - 1 - x.round,
            chunk: x.chunk,
            src: x.dst,
            dst: x.src,
        })
        .collect();
    sends.sort();
    let mut rounds_per_step = s.rounds_per_step.clone();
    rounds_per_step.reverse();
    Schedule {
        coll: match s.coll {
            SccCollective::Allgather => SccCollective::ReduceScatter,
            SccCollective::ReduceScatter => SccCollective::Allgather,
        },
        point: s.point,
        ranks: s.ranks,
        rounds_per_step,
        sends,
    }
}

/// Convert a reduce-scatter schedule into an Algorithm: one in-tree per
/// chunk rooted at its owner, `Transfer.step` = the global round index (so
/// sends into a rank come strictly before the rank's own send); channels as
/// described in the body (distinct per parallel link in a round).
/// An allgather schedule is time-reversed first (valid when the graph is
/// symmetric; otherwise pass the reduce-scatter schedule from
/// [`decide`](super::decide)).
pub fn to_reduce_scatter(s: &Schedule) -> Algorithm {
    let rs;
    let s = match s.coll {
        SccCollective::ReduceScatter => s,
        SccCollective::Allgather => {
            rs = time_reverse(s);
            &rs
        }
    };
    // Channels: the chunks one link carries in one round go on distinct
    // channels (one per parallel link), so no connection carries two
    // messages in one step. And a rank's send of a chunk never shares a
    // channel with a receive of that chunk other than its last one: lowering
    // pairs a receive and a send on one channel into one threadblock and may
    // fuse them into `rrs`, which is only correct for the last receive.
    let mut sends = s.sends.clone();
    sends.sort_by_key(|x| (x.round, x.src, x.dst, x.chunk));
    let n = s.ranks;
    let total = n * s.point.chunks;
    // incoming[chunk][rank]: (round, src, channel) of the receives so far.
    let mut incoming: Vec<Vec<Vec<(usize, usize, usize)>>> = vec![vec![Vec::new(); n]; total];
    let mut transfers: Vec<Transfer> = Vec::with_capacity(sends.len());
    let mut group_used: Vec<usize> = Vec::new();
    for (i, x) in sends.iter().enumerate() {
        let same_group = i
            .checked_sub(1)
            .and_then(|j| sends.get(j))
            .is_some_and(|p| (p.round, p.src, p.dst) == (x.round, x.src, x.dst));
        if !same_group {
            group_used.clear();
        }
        let mut forbidden = group_used.clone();
        if let Some(inc) = incoming.get(x.chunk).and_then(|r| r.get(x.src)) {
            if let Some(last) = inc.iter().map(|&(r, src, _)| (r, src)).max() {
                forbidden.extend(
                    inc.iter()
                        .filter(|&&(r, src, _)| (r, src) != last)
                        .map(|&(_, _, ch)| ch),
                );
            }
        }
        let channel = (0..).find(|c| !forbidden.contains(c)).unwrap_or(0);
        group_used.push(channel);
        if let Some(inc) = incoming.get_mut(x.chunk).and_then(|r| r.get_mut(x.dst)) {
            inc.push((x.round, x.src, channel));
        }
        transfers.push(Transfer {
            step: x.round,
            chunk: x.chunk,
            src: x.src,
            dst: x.dst,
            channel,
        });
    }
    transfers.sort_by_key(|t| (t.step, t.chunk, t.src, t.dst));
    Algorithm {
        name: format!(
            "sccl-S{}-R{}-C{}",
            s.point.steps, s.point.rounds, s.point.chunks
        ),
        spec: Spec::reduce_scatter(s.ranks, s.point.chunks),
        transfers,
        bcast: Vec::new(),
    }
}
