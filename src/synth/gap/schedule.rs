//! From a [`Plan`] to a schedule: the LP's shares rounded to whole chunks
//! (as is and tied by the symmetries), the relayed groups cut into pieces
//! by pattern, and the [`Algorithm`] with its steps and channels.

use super::model::{Owner, Via};
use super::{Gap, Plan};
use crate::ir::{Algorithm, Spec, Transfer};
use rustc_hash::FxHashMap;
use std::collections::BTreeSet;

/// Piece patterns a relayed group may be cut into (relative sizes).
pub const PATTERNS: [&[usize]; 6] = [
    &[1],
    &[1, 2],
    &[1, 2, 3],
    &[2, 3, 6],
    &[1, 1],
    &[1, 2, 3, 4],
];
/// The pattern every group starts with.
const START_PATTERN: usize = 2;

impl Gap {
    /// The LP's shares rounded to `chunks` chunks per shard (largest
    /// remainder), every group in the start pattern.
    pub fn start(&self, chunks: usize) -> Plan {
        let counts = self
            .owners
            .iter()
            .map(|o| round(&o.shares, chunks))
            .collect();
        self.with_start_pattern(chunks, counts)
    }

    /// Like [`Gap::start`], but tied: each orbit's first shard rounded
    /// as there, and its counts mapped to every shard tied to it, so the
    /// plan is as symmetric as the topology.
    pub fn tied_start(&self, chunks: usize) -> Plan {
        let shares: Vec<&[f64]> = self.owners.iter().map(|o| &o.shares[..]).collect();
        self.tied(chunks, &shares)
    }

    /// Every LP answer's rounding, as is and tied, without repeats (the
    /// main answer's first).
    pub fn starts(&self, chunks: usize) -> Vec<Plan> {
        let mut out: Vec<Plan> = Vec::new();
        let main: Vec<&[f64]> = self.owners.iter().map(|o| &o.shares[..]).collect();
        let all = std::iter::once(main).chain(
            self.alts
                .iter()
                .map(|a| a.iter().map(|s| &s[..]).collect::<Vec<_>>()),
        );
        for shares in all {
            let counts = shares.iter().map(|s| round(s, chunks)).collect();
            for p in [
                self.with_start_pattern(chunks, counts),
                self.tied(chunks, &shares),
            ] {
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
        out
    }

    /// The rounding of `shares` with each orbit's first shard's counts
    /// mapped to every shard tied to it.
    fn tied(&self, chunks: usize, shares: &[&[f64]]) -> Plan {
        let mut counts: Vec<Vec<usize>> = shares.iter().map(|s| round(s, chunks)).collect();
        for (d, t) in self.ties.iter().enumerate() {
            if let Some((f, map)) = t {
                let mut row = vec![0; map.len()];
                for (v, &w) in map.iter().enumerate() {
                    row[w] = counts[*f][v];
                }
                counts[d] = row;
            }
        }
        self.with_start_pattern(chunks, counts)
    }

    fn with_start_pattern(&self, chunks: usize, counts: Vec<Vec<usize>>) -> Plan {
        let patterns = self
            .owners
            .iter()
            .map(|o| vec![START_PATTERN; o.vectors.len()])
            .collect();
        Plan {
            chunks,
            counts,
            patterns,
        }
    }

    /// The Algorithm of a plan.
    pub fn algorithm(&self, plan: &Plan) -> Algorithm {
        let (n, c) = (self.n, plan.chunks);
        let mut transfers = Vec::new();
        let mut used: FxHashMap<(usize, usize), BTreeSet<usize>> = FxHashMap::default();
        // Smallest channel free on every given connection; marks it used.
        let mut take = |conns: &[(usize, usize)]| -> usize {
            let ch = (0..)
                .find(|ch| {
                    conns
                        .iter()
                        .all(|k| !used.get(k).is_some_and(|s| s.contains(ch)))
                })
                .expect("a free channel");
            for &k in conns {
                used.entry(k).or_default().insert(ch);
            }
            ch
        };
        for (d, o) in self.owners.iter().enumerate() {
            let cnt = &plan.counts[d];
            let used: Vec<usize> = (0..o.vectors.len()).filter(|&i| cnt[i] > 0).collect();
            let order = self
                .orders
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry((d, used))
                .or_insert_with_key(|(_, used)| own_run_order(o, used))
                .clone();
            let (own_step, seg_of) = own_segments(o, &order, cnt);
            let relay_step = o.nbrs.len() + 1;
            let mut off = 0;
            let mut own_ch: FxHashMap<(usize, usize), usize> = FxHashMap::default();
            for &vi in &order {
                let v = &o.vectors[vi];
                let mut route_ch: FxHashMap<usize, usize> = FxHashMap::default();
                for p in pieces(cnt[vi], PATTERNS[plan.patterns[d][vi]]) {
                    // Each piece: per relay, the send to the owner shares
                    // a channel with its last child's receive, so lowering
                    // fuses them (rrs); other children on channels of their
                    // own.
                    let mut ch: FxHashMap<(usize, usize), usize> = FxHashMap::default();
                    for &r in &o.nbrs {
                        let kids: Vec<usize> = (0..o.far.len())
                            .filter(|&j| v[j] == Via::Relay(r))
                            .map(|j| o.far[j])
                            .collect();
                        if let Some(&last) = kids.iter().max() {
                            let cc = take(&[(r, d), (last, r)]);
                            ch.insert((r, d), cc);
                            ch.insert((last, r), cc);
                            for &f in kids.iter().filter(|&&f| f != last) {
                                ch.insert((f, r), take(&[(f, r)]));
                            }
                        }
                    }
                    for x in 0..p {
                        let chunk = d * c + off + x;
                        for (j, &f) in o.far.iter().enumerate() {
                            match v[j] {
                                Via::Route => {
                                    let cc = *route_ch.entry(f).or_insert_with(|| take(&[(f, d)]));
                                    transfers.push(Transfer {
                                        step: relay_step - 1,
                                        chunk,
                                        src: f,
                                        dst: d,
                                        channel: cc,
                                    });
                                }
                                Via::Relay(r) => transfers.push(Transfer {
                                    step: 0,
                                    chunk,
                                    src: f,
                                    dst: r,
                                    channel: ch[&(f, r)],
                                }),
                            }
                        }
                        for &r in &o.nbrs {
                            if v.contains(&Via::Relay(r)) {
                                transfers.push(Transfer {
                                    step: relay_step,
                                    chunk,
                                    src: r,
                                    dst: d,
                                    channel: ch[&(r, d)],
                                });
                            } else {
                                let seg = seg_of[&(r, off + x)];
                                let cc = *own_ch.entry((r, seg)).or_insert_with(|| take(&[(r, d)]));
                                transfers.push(Transfer {
                                    step: own_step[&r],
                                    chunk,
                                    src: r,
                                    dst: d,
                                    channel: cc,
                                });
                            }
                        }
                    }
                    off += p;
                }
            }
        }
        // Compact the channel numbers.
        let mut ids: Vec<usize> = transfers.iter().map(|t| t.channel).collect();
        ids.sort_unstable();
        ids.dedup();
        for t in &mut transfers {
            t.channel = ids.binary_search(&t.channel).expect("a channel");
        }
        Algorithm {
            name: "gap".into(),
            spec: Spec::reduce_scatter(n, c),
            transfers,
            bcast: Vec::new(),
        }
    }
}

/// Per neighbour of `o`, the step key of its own chunks, and the segment
/// of each of its own chunks, keyed by (neighbour, position among the
/// shard's chunks in `order`): the owner's own part of [`Gap::algorithm`].
fn own_segments(o: &Owner, order: &[usize], cnt: &[usize]) -> OwnSegments {
    // Own step keys: widest own range first, so the narrower
    // (nested) ranges follow its receive at the owner.
    let mut own_len: Vec<(usize, usize)> = o
        .nbrs
        .iter()
        .map(|&r| {
            let l: usize = order
                .iter()
                .filter(|&&i| !o.vectors[i].contains(&Via::Relay(r)))
                .map(|&i| cnt[i])
                .sum();
            (l, r)
        })
        .collect();
    own_len.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let own_step: FxHashMap<usize, usize> = own_len
        .iter()
        .enumerate()
        .map(|(i, &(_, r))| (r, i))
        .collect();
    // Own chunks per neighbour, cut into segments at every
    // boundary of a wider neighbour's segment, so each segment's
    // receive at the owner heads its chains or follows one op
    // they share (lowering then keeps it one message).
    let vec_of: Vec<usize> = order
        .iter()
        .flat_map(|&vi| std::iter::repeat_n(vi, cnt[vi]))
        .collect();
    let mut cuts = BTreeSet::new();
    let mut seg_of: FxHashMap<(usize, usize), usize> = FxHashMap::default();
    for &(_, r) in &own_len {
        let mut seg = 0;
        let mut prev: Option<usize> = None;
        for (x, &vi) in vec_of.iter().enumerate() {
            if o.vectors[vi].contains(&Via::Relay(r)) {
                continue;
            }
            match prev {
                None => {
                    cuts.insert(x);
                }
                Some(p) if p + 1 != x || cuts.contains(&x) => {
                    seg += 1;
                    cuts.insert(p + 1);
                    cuts.insert(x);
                }
                Some(_) => {}
            }
            seg_of.insert((r, x), seg);
            prev = Some(x);
        }
        if let Some(p) = prev {
            cuts.insert(p + 1);
        }
    }
    (own_step, seg_of)
}

/// Per neighbour, its own step key; per (neighbour, chunk position), the
/// segment.
type OwnSegments = (FxHashMap<usize, usize>, FxHashMap<(usize, usize), usize>);

/// `shares` (a distribution) as `chunks` whole chunks: largest remainder,
/// ties to the lower index.
fn round(shares: &[f64], chunks: usize) -> Vec<usize> {
    let exact: Vec<f64> = shares.iter().map(|s| s * chunks as f64).collect();
    let mut cnt: Vec<usize> = exact.iter().map(|x| x.floor() as usize).collect();
    let mut rem: Vec<(f64, usize)> = exact
        .iter()
        .enumerate()
        .map(|(i, x)| (x - cnt[i] as f64, i))
        .collect();
    rem.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let left = chunks.saturating_sub(cnt.iter().sum::<usize>());
    for &(_, i) in rem.iter().cycle().take(left) {
        cnt[i] += 1;
    }
    cnt
}

/// Group sizes of `k` chunks cut in the proportions of `pattern` (each
/// piece at least one chunk; the last takes the remainder).
pub(super) fn pieces(k: usize, pattern: &[usize]) -> Vec<usize> {
    let tot: usize = pattern.iter().sum();
    let mut ps: Vec<usize> = pattern
        .iter()
        .map(|&p| p * k / tot)
        .filter(|&p| p > 0)
        .collect();
    let s: usize = ps.iter().sum();
    match ps.last_mut() {
        Some(l) => *l += k - s,
        None if k > 0 => ps.push(k),
        None => {}
    }
    ps
}

/// The shard's used vectors in the order that leaves each neighbour's own
/// chunks (those of vectors it does not relay) in the fewest runs: every
/// permutation up to 6 used vectors, index order beyond.
fn own_run_order(o: &Owner, used: &[usize]) -> Vec<usize> {
    let runs = |ord: &[usize]| -> usize {
        o.nbrs
            .iter()
            .map(|&r| {
                let mut prev = false;
                let mut runs = 0;
                for &i in ord {
                    let own = !o.vectors[i].contains(&Via::Relay(r));
                    runs += usize::from(own && !prev);
                    prev = own;
                }
                runs
            })
            .sum()
    };
    let used = used.to_vec();
    if used.len() > 6 {
        return used;
    }
    fn permute(k: usize, p: &mut Vec<usize>, f: &mut dyn FnMut(&[usize])) {
        if k == p.len() {
            f(p);
            return;
        }
        for i in k..p.len() {
            p.swap(k, i);
            permute(k + 1, p, f);
            p.swap(k, i);
        }
    }
    let mut best = used.clone();
    let mut best_runs = runs(&best);
    let mut perm = used;
    permute(0, &mut perm, &mut |ord| {
        let r = runs(ord);
        if r < best_runs {
            best_runs = r;
            best = ord.to_vec();
        }
    });
    best
}

#[cfg(test)]
mod tests {
    use super::super::solve;
    use super::super::testing::dgx1;
    use super::*;
    use crate::lower::{lower, LowerOptions};

    #[test]
    fn pieces_cover_the_group() {
        assert_eq!(pieces(6, &[1, 2, 3]), [1, 2, 3]);
        assert_eq!(pieces(7, &[1, 2, 3]), [1, 2, 4]);
        assert_eq!(pieces(2, &[1, 2, 3]), [2]);
        assert_eq!(pieces(1, &[2, 3, 6]), [1]);
        assert_eq!(pieces(0, &[1, 2]), Vec::<usize>::new());
        for k in 0..30 {
            for p in PATTERNS {
                assert_eq!(pieces(k, p).iter().sum::<usize>(), k, "{k} {p:?}");
            }
        }
    }

    #[test]
    fn each_own_segment_is_one_message() {
        // A neighbour's own chunks are cut into segments, one channel each,
        // so that each lowers to one message at step 0 (a segment lowered
        // as several messages on one threadblock pays α for each).
        let topo = dgx1();
        let g = solve(&topo, 30.0, 0, super::super::GAP_SIZE).unwrap();
        for start in [g.start(24), g.tied_start(24), g.start(28)] {
            for q in 0..PATTERNS.len() {
                let mut p = start.clone();
                p.patterns.iter_mut().for_each(|r| r.fill(q));
                let prog = lower(&g.algorithm(&p), &LowerOptions::default()).unwrap();
                for gpu in &prog.gpus {
                    for tb in gpu.tbs.iter().filter(|tb| tb.recv < 0) {
                        assert_eq!(
                            tb.steps.len(),
                            1,
                            "rank {} tb {} pattern {q}",
                            gpu.id,
                            tb.id
                        );
                    }
                }
            }
        }
    }
}
