//! Threadblocks (items 3 and 4 of the module doc): one per (MSCCL
//! channel, send peer, receive peer), receive and send peers paired where
//! a chain receives from one and sends to the other; each threadblock's
//! ops sorted by key, and a chain's last receive fused with its send into
//! `rrs`.

use super::chains::{Op, OpKind, RankChains, Slot};
use crate::ir::StepKind;
use rustc_hash::FxHashMap as HashMap;

/// A step before field assignment: its kind, its op and the send fused
/// with it.
pub(super) type TbStep = (StepKind, usize, Option<usize>);

/// One rank's threadblocks and where its ops went.
pub(super) struct Placement {
    /// TB keys (chan, send, recv) with -1 as none, in the order made.
    pub(super) tb_keys: Vec<(u32, i64, i64)>,
    /// A TB's id (its place in the stable numbering) by its place in
    /// `tb_keys`.
    pub(super) new_id: Vec<usize>,
    /// Per TB (by id): (step kind, op, the fused send) before field
    /// assignment.
    pub(super) tb_steps: Vec<Vec<TbStep>>,
    /// Op id → (tb, step position).
    pub(super) pos_of_op: Vec<(usize, usize)>,
}

/// Threadblocks of one rank's chains, their steps and every op's place.
/// `rel` is how the rank's frame numbers a peer (`Frame::rank`): ties
/// between pairings break by it.
pub(super) fn place(rc: &RankChains, rel: impl Fn(usize) -> usize) -> Placement {
    let rops = &rc.ops;
    let (next_in_chain, in_chains) = chain_links(rc);
    let (tb_keys, tb_of_op) = assign(rc, &in_chains, rel);
    let (new_id, tb_ops) = number(rops, &tb_keys, &tb_of_op);
    let (tb_steps, pos_of_op) = fuse(rops, &tb_ops, &next_in_chain);
    Placement {
        tb_keys,
        new_id,
        tb_steps,
        pos_of_op,
    }
}

/// Per op: the op after it in its chain, and how many chains hold it.
fn chain_links(rc: &RankChains) -> (Vec<usize>, Vec<u32>) {
    let (rops, chains, cops) = (&rc.ops, &rc.chains, &rc.chain_ops);
    // The op after each op in its chain; a receive shared by several
    // chains has none (it never fuses with a send).
    const NONE: usize = usize::MAX;
    let mut next_in_chain = vec![NONE; rops.len()];
    let mut in_chains = vec![0u32; rops.len()];
    for chain in chains {
        for i in chain.clone() {
            in_chains[cops[i]] += 1;
            if i + 1 < chain.end {
                next_in_chain[cops[i]] = cops[i + 1];
            }
        }
    }
    for (next, &k) in next_in_chain.iter_mut().zip(&in_chains) {
        if k > 1 {
            *next = NONE;
        }
    }
    (next_in_chain, in_chains)
}

/// TB keys (chan, send, recv) and every op's TB (its place in the keys):
/// fusable pairs first, most frequent first, then one TB per remaining
/// receive peer, send peer and the local copy.
fn assign(
    rc: &RankChains,
    in_chains: &[u32],
    rel: impl Fn(usize) -> usize,
) -> (Vec<(u32, i64, i64)>, Vec<usize>) {
    let (rops, chains, cops) = (&rc.ops, &rc.chains, &rc.chain_ops);
    // Fusable (chan, recv peer, send peer) candidates: a receive followed
    // in its chain by a send on the same channel (a reduction's last
    // receive and its send; a broadcast's receive and its first send).
    let mut cand: HashMap<(u32, u32, u32), usize> = HashMap::default();
    for chain in chains {
        for i in chain.start..chain.end.saturating_sub(1) {
            if in_chains[cops[i]] != 1 {
                continue;
            }
            let (a, b) = (&rops[cops[i]], &rops[cops[i + 1]]);
            let recv = matches!(a.kind, OpKind::RecvReduce | OpKind::Recv);
            if recv && b.kind == OpKind::Send && a.chan == b.chan {
                *cand.entry((a.chan, a.peer, b.peer)).or_default() += 1;
            }
        }
    }
    let mut cand: Vec<((u32, u32, u32), usize)> = cand.into_iter().collect();
    let rel_key =
        |&((ch, k, p), _): &((u32, u32, u32), usize)| (ch, rel(k as usize), rel(p as usize));
    cand.sort_unstable_by(|x, y| y.1.cmp(&x.1).then(rel_key(x).cmp(&rel_key(y))));
    // TB keys (chan, send, recv) with -1 as none.
    let mut tb_keys: Vec<(u32, i64, i64)> = Vec::new();
    let mut recv_tb: HashMap<(u32, u32), usize> = HashMap::default();
    let mut send_tb: HashMap<(u32, u32), usize> = HashMap::default();
    for ((ch, k, p), _) in cand {
        if !recv_tb.contains_key(&(ch, k)) && !send_tb.contains_key(&(ch, p)) {
            recv_tb.insert((ch, k), tb_keys.len());
            send_tb.insert((ch, p), tb_keys.len());
            tb_keys.push((ch, p as i64, k as i64));
        }
    }
    let mut local_tb = None;
    let mut tb_of_op = vec![0usize; rops.len()];
    for (i, o) in rops.iter().enumerate() {
        tb_of_op[i] = match o.kind {
            OpKind::RecvReduce | OpKind::Recv => {
                *recv_tb.entry((o.chan, o.peer)).or_insert_with(|| {
                    tb_keys.push((o.chan, -1, o.peer as i64));
                    tb_keys.len() - 1
                })
            }
            OpKind::Send => *send_tb.entry((o.chan, o.peer)).or_insert_with(|| {
                tb_keys.push((o.chan, o.peer as i64, -1));
                tb_keys.len() - 1
            }),
            OpKind::Copy => *local_tb.get_or_insert_with(|| {
                tb_keys.push((0, -1, -1));
                tb_keys.len() - 1
            }),
        };
    }
    (tb_keys, tb_of_op)
}

/// The TBs' ids, and per TB (by id) its ops sorted by key.
fn number(
    rops: &[Op],
    tb_keys: &[(u32, i64, i64)],
    tb_of_op: &[usize],
) -> (Vec<usize>, Vec<Vec<usize>>) {
    // Stable TB numbering: by (chan, recv, send).
    let mut perm: Vec<usize> = (0..tb_keys.len()).collect();
    perm.sort_unstable_by_key(|&t| (tb_keys[t].0, tb_keys[t].2, tb_keys[t].1));
    let mut new_id = vec![0usize; tb_keys.len()];
    for (i, &t) in perm.iter().enumerate() {
        new_id[t] = i;
    }
    let mut tb_ops: Vec<Vec<usize>> = vec![Vec::new(); tb_keys.len()];
    for (i, &t) in tb_of_op.iter().enumerate() {
        tb_ops[new_id[t]].push(i);
    }
    for list in tb_ops.iter_mut() {
        list.sort_unstable_by_key(|&i| rops[i].key);
    }
    (new_id, tb_ops)
}

/// Each TB's steps, a receive fused with the send that follows it in its
/// chain where it may, and every op's (tb, step position).
fn fuse(
    rops: &[Op],
    tb_ops: &[Vec<usize>],
    next_in_chain: &[usize],
) -> (Vec<Vec<TbStep>>, Vec<(usize, usize)>) {
    // Fuse and place: op id → (tb, step position).
    let mut pos_of_op = vec![(0usize, 0usize); rops.len()];
    // Per TB: (step kind, op ids) before field assignment.
    let mut tb_steps: Vec<Vec<TbStep>> = vec![Vec::new(); tb_ops.len()];
    for (t, list) in tb_ops.iter().enumerate() {
        let mut i = 0;
        while i < list.len() {
            let a = &rops[list[i]];
            // Only the chain's last receive may fuse with its send: an
            // earlier one would skip the remaining children. A partial
            // sum in scratch is sent without being kept (`rrs`); a value
            // that lands in the output is kept and forwarded (`rrcs`,
            // `rcs`).
            let fused = (i + 1 < list.len() && next_in_chain[list[i]] == list[i + 1])
                .then(|| {
                    let b = &rops[list[i + 1]];
                    if b.kind != OpKind::Send || a.dst != b.src || a.cnt != b.cnt {
                        return None;
                    }
                    match (a.kind, a.dst) {
                        (OpKind::RecvReduce, Slot::Acc(_)) => Some(StepKind::RecvReduceSend),
                        (OpKind::RecvReduce, Slot::Out(_)) => Some(StepKind::RecvReduceCopySend),
                        (OpKind::Recv, Slot::Out(_)) => Some(StepKind::RecvCopySend),
                        _ => None,
                    }
                })
                .flatten();
            let pos = tb_steps[t].len();
            if let Some(kind) = fused {
                pos_of_op[list[i]] = (t, pos);
                pos_of_op[list[i + 1]] = (t, pos);
                tb_steps[t].push((kind, list[i], Some(list[i + 1])));
                i += 2;
            } else {
                pos_of_op[list[i]] = (t, pos);
                let kind = match a.kind {
                    OpKind::RecvReduce => StepKind::RecvReduceCopy,
                    OpKind::Recv => StepKind::Recv,
                    OpKind::Send => StepKind::Send,
                    OpKind::Copy => StepKind::Copy,
                };
                tb_steps[t].push((kind, list[i], None));
                i += 1;
            }
        }
    }
    (tb_steps, pos_of_op)
}
