//! SCCL's model: ranks joined by links of integer unit capacity
//! ([`UnitTopology`]), instances ([`Point`]), schedules ([`Schedule`]) and
//! the answers for one instance ([`Decision`]); the lower bounds on steps
//! and on rounds per chunk; and [`validate`], which checks a schedule
//! against the model independently of how it was found.

use super::{SearchError, MAX_RANKS};
use crate::ir::{NodeKind, Topology};
use std::collections::VecDeque;
use std::fmt;

/// Ranks and integer link capacities: `cap(a, b)` links from a to b, each
/// carrying one chunk per round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitTopology {
    pub name: String,
    cap: Vec<Vec<u32>>,
}

impl UnitTopology {
    /// From a square capacity matrix (`cap[a][b]` links a→b, zero diagonal).
    pub fn new(name: impl Into<String>, cap: Vec<Vec<u32>>) -> Result<Self, SearchError> {
        let name = name.into();
        let n = cap.len();
        if n == 0 {
            return Err(SearchError::Topology(format!("{name}: no ranks")));
        }
        for (a, row) in cap.iter().enumerate() {
            if row.len() != n {
                return Err(SearchError::Topology(format!(
                    "{name}: row {a} has {} entries, expected {n}",
                    row.len()
                )));
            }
            if row[a] != 0 {
                return Err(SearchError::Topology(format!(
                    "{name}: rank {a} has a link to itself"
                )));
            }
        }
        Ok(UnitTopology { name, cap })
    }

    /// Count the direct GPU–GPU links of a topology (a bundle of `count`
    /// links counts `count` units). Switches, NICs and CPUs are not part of
    /// SCCL's link model; paths through them are ignored, so a switched
    /// topology is rejected.
    pub fn from_topology(topo: &Topology) -> Result<Self, SearchError> {
        let n = topo.num_ranks();
        let mut cap = vec![vec![0u32; n]; n];
        let rank_of = |node: petgraph::graph::NodeIndex| {
            topo.graph[node]
                .rank
                .filter(|_| topo.graph[node].kind == NodeKind::Gpu)
        };
        for e in topo.graph.edge_indices() {
            let Some((a, b)) = topo.graph.edge_endpoints(e) else {
                continue;
            };
            if let (Some(ra), Some(rb)) = (rank_of(a), rank_of(b)) {
                if ra < n && rb < n && ra != rb {
                    cap[ra][rb] = cap[ra][rb].saturating_add(topo.graph[e].count);
                }
            }
        }
        if n > 1 && cap.iter().all(|r| r.iter().all(|&c| c == 0)) {
            return Err(SearchError::Topology(format!(
                "{}: no direct GPU-GPU links (switched fabrics are not in the SCCL unit-link model)",
                topo.name
            )));
        }
        UnitTopology::new(topo.name.clone(), cap)
    }

    /// Bidirectional ring of `n` ranks, one link each way between neighbours.
    pub fn ring(n: usize) -> Result<Self, SearchError> {
        let mut cap = vec![vec![0u32; n]; n];
        for a in 0..n {
            let b = (a + 1) % n;
            if a != b {
                cap[a][b] = 1;
                cap[b][a] = 1;
            }
        }
        UnitTopology::new(format!("ring({n})"), cap)
    }

    /// Bidirectional line 0 – 1 – … – n−1, one link each way.
    pub fn line(n: usize) -> Result<Self, SearchError> {
        let mut cap = vec![vec![0u32; n]; n];
        for a in 1..n {
            cap[a - 1][a] = 1;
            cap[a][a - 1] = 1;
        }
        UnitTopology::new(format!("line({n})"), cap)
    }

    pub fn ranks(&self) -> usize {
        self.cap.len()
    }

    /// Links from a to b (0 when out of range).
    pub fn cap(&self, a: usize, b: usize) -> u32 {
        self.cap.get(a).and_then(|r| r.get(b)).copied().unwrap_or(0)
    }

    /// The same ranks with every link reversed.
    pub fn reversed(&self) -> Self {
        let n = self.ranks();
        let cap = (0..n)
            .map(|a| (0..n).map(|b| self.cap[b][a]).collect())
            .collect();
        UnitTopology {
            name: format!("{} (reversed)", self.name),
            cap,
        }
    }

    /// Directed links with capacity > 0, as (src, dst, cap).
    pub(super) fn edges(&self) -> Vec<(usize, usize, u32)> {
        let n = self.ranks();
        let mut out = Vec::new();
        for a in 0..n {
            for b in 0..n {
                if self.cap[a][b] > 0 {
                    out.push((a, b, self.cap[a][b]));
                }
            }
        }
        out
    }

    /// Hop distances `dist[a][b]` (None: unreachable).
    fn distances(&self) -> Vec<Vec<Option<usize>>> {
        let n = self.ranks();
        (0..n)
            .map(|s| {
                let mut d = vec![None; n];
                d[s] = Some(0);
                let mut q = VecDeque::from([s]);
                while let Some(u) = q.pop_front() {
                    let du = d[u].unwrap_or(0);
                    for v in 0..n {
                        if self.cap[u][v] > 0 && d[v].is_none() {
                            d[v] = Some(du + 1);
                            q.push_back(v);
                        }
                    }
                }
                d
            })
            .collect()
    }

    /// Hop distances, or the first unreachable pair.
    pub(super) fn checked_distances(&self) -> Result<Vec<Vec<usize>>, SearchError> {
        let d = self.distances();
        let mut out = Vec::with_capacity(d.len());
        for (a, row) in d.into_iter().enumerate() {
            let mut r = Vec::with_capacity(row.len());
            for (b, x) in row.into_iter().enumerate() {
                r.push(x.ok_or(SearchError::Disconnected { from: a, to: b })?);
            }
            out.push(r);
        }
        Ok(out)
    }
}

/// Which collective an instance is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SccCollective {
    Allgather,
    ReduceScatter,
}

/// An (S, R, C) instance: steps, total rounds, chunks per rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Point {
    pub steps: usize,
    pub rounds: usize,
    pub chunks: usize,
}

impl Point {
    pub fn new(steps: usize, rounds: usize, chunks: usize) -> Self {
        Point {
            steps,
            rounds,
            chunks,
        }
    }
    /// `self` is at least as good as `o` in both steps and rounds per chunk.
    pub fn dominates(&self, o: &Point) -> bool {
        self.steps <= o.steps && self.rounds * o.chunks <= o.rounds * self.chunks
    }
}

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({},{},{})", self.steps, self.rounds, self.chunks)
    }
}

/// One chunk movement. For allgather: `src` copies `chunk` to `dst`. For
/// reduce-scatter: `src` sends its partial sum of `chunk` to `dst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Send {
    pub step: usize,
    /// Global round index within the whole schedule (0..R): the round of
    /// `step` in which this send runs (a link with cap k carries at most k
    /// chunks per round).
    pub round: usize,
    pub chunk: usize,
    pub src: usize,
    pub dst: usize,
}

/// A schedule in the SCCL model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    pub coll: SccCollective,
    pub point: Point,
    pub ranks: usize,
    /// Rounds of each step (length S, each ≥ 1, sum R).
    pub rounds_per_step: Vec<usize>,
    /// Sorted by (step, round, chunk, src, dst).
    pub sends: Vec<Send>,
}

/// The answer for one instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Sat(Schedule),
    /// Proven infeasible within the model.
    Unsat,
    /// The time limit ran out first.
    Unknown,
}

/// Lower bound on rounds per chunk, R/C ≥ num/den: the cut bound
/// max over rank sets X (∅ ≠ X ≠ all) of |X| / (links leaving X) for
/// allgather; reduce-scatter uses links entering X. Exact (subset
/// enumeration, at most [`MAX_RANKS`] ranks).
pub fn rounds_per_chunk_bound(
    topo: &UnitTopology,
    coll: SccCollective,
) -> Result<(usize, usize), SearchError> {
    let g = oriented(topo, coll);
    let n = g.ranks();
    check_size(&g)?;
    g.checked_distances()?;
    if n == 1 {
        return Ok((0, 1));
    }
    let mut best = (0usize, 1usize);
    for mask in 1u32..((1u32 << n) - 1) {
        let size = mask.count_ones() as usize;
        let mut out = 0usize;
        for a in 0..n {
            if mask & (1 << a) == 0 {
                continue;
            }
            for b in 0..n {
                if mask & (1 << b) == 0 {
                    out += g.cap[a][b] as usize;
                }
            }
        }
        // Connectivity was checked, so out > 0.
        if out > 0 && size * best.1 > best.0 * out {
            best = (size, out);
        }
    }
    let g = gcd(best.0, best.1).max(1);
    Ok((best.0 / g, best.1 / g))
}

/// Lower bound on steps: the largest hop distance a chunk must travel.
pub fn steps_bound(topo: &UnitTopology) -> Result<usize, SearchError> {
    let d = topo.checked_distances()?;
    Ok(d.iter().flatten().copied().max().unwrap_or(0))
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

pub(super) fn check_size(g: &UnitTopology) -> Result<(), SearchError> {
    if g.ranks() > MAX_RANKS {
        return Err(SearchError::Topology(format!(
            "{}: {} ranks; the SCCL-model search handles at most {MAX_RANKS}",
            g.name,
            g.ranks()
        )));
    }
    Ok(())
}

/// The graph the allgather MILP runs on.
pub(super) fn oriented(topo: &UnitTopology, coll: SccCollective) -> UnitTopology {
    match coll {
        SccCollective::Allgather => topo.clone(),
        SccCollective::ReduceScatter => topo.reversed(),
    }
}

/// Check a schedule against the model on `topo`, independently of how it
/// was found: step/round bookkeeping, link capacity per round, every
/// non-owner gets (allgather) / every non-owner sends (reduce-scatter) each
/// chunk exactly once, and causality.
pub fn validate(topo: &UnitTopology, s: &Schedule) -> Result<(), String> {
    let n = topo.ranks();
    let Point {
        steps,
        rounds,
        chunks,
    } = s.point;
    if s.ranks != n {
        return Err(format!("schedule has {} ranks, topology {n}", s.ranks));
    }
    if s.rounds_per_step.len() != steps
        || s.rounds_per_step.contains(&0)
        || s.rounds_per_step.iter().sum::<usize>() != rounds
    {
        return Err(format!(
            "rounds per step {:?} do not fit {}",
            s.rounds_per_step, s.point
        ));
    }
    let mut step_of_round = Vec::with_capacity(rounds);
    for (k, &rk) in s.rounds_per_step.iter().enumerate() {
        step_of_round.extend(std::iter::repeat_n(k, rk));
    }
    let total = n * chunks;
    let mut load = vec![vec![vec![0u32; n]; n]; rounds];
    // For allgather: arrival step of chunk at rank; for reduce-scatter:
    // departure step of each rank's partial sum.
    let mut when: Vec<Vec<Option<usize>>> = vec![vec![None; n]; total];
    let mut parent: Vec<Vec<Option<usize>>> = vec![vec![None; n]; total];
    for x in &s.sends {
        if x.chunk >= total || x.src >= n || x.dst >= n || x.step >= steps || x.round >= rounds {
            return Err(format!("send {x:?} out of range"));
        }
        if step_of_round[x.round] != x.step {
            return Err(format!("send {x:?}: round not in its step"));
        }
        let l = &mut load[x.round][x.src][x.dst];
        *l += 1;
        if *l > topo.cap(x.src, x.dst) {
            return Err(format!(
                "link {}->{} carries {} chunks in round {} (capacity {})",
                x.src,
                x.dst,
                l,
                x.round,
                topo.cap(x.src, x.dst)
            ));
        }
        let owner = x.chunk / chunks;
        let (node, other) = match s.coll {
            SccCollective::Allgather => (x.dst, x.src),
            SccCollective::ReduceScatter => (x.src, x.dst),
        };
        if node == owner {
            return Err(format!("send {x:?} involves the owner wrongly"));
        }
        if when[x.chunk][node].is_some() {
            return Err(format!("send {x:?}: rank {node} handles chunk twice"));
        }
        when[x.chunk][node] = Some(x.step);
        parent[x.chunk][node] = Some(other);
    }
    for (ch, w) in when.iter().enumerate() {
        let owner = ch / chunks;
        for v in 0..n {
            if v == owner {
                continue;
            }
            let Some(kv) = w[v] else {
                return Err(format!("chunk {ch}: rank {v} is never reached"));
            };
            let Some(p) = parent[ch][v] else {
                return Err(format!("chunk {ch}: rank {v} has no partner"));
            };
            if p == owner {
                continue;
            }
            let Some(kp) = w[p] else {
                return Err(format!("chunk {ch}: rank {p} is never reached"));
            };
            let ok = match s.coll {
                // the sender received it in an earlier step
                SccCollective::Allgather => kp < kv,
                // the receiver forwards its sum in a later step
                SccCollective::ReduceScatter => kp > kv,
            };
            if !ok {
                return Err(format!(
                    "chunk {ch}: rank {p} (step {kp}) and rank {v} (step {kv}) are out of order"
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::decide;
    use super::super::testing::*;
    use super::*;

    #[test]
    fn bounds() {
        let g = dgx1();
        assert_eq!(steps_bound(&g).unwrap(), 2);
        assert_eq!(
            rounds_per_chunk_bound(&g, SccCollective::ReduceScatter).unwrap(),
            (7, 6)
        );
        let r = UnitTopology::ring(8).unwrap();
        assert_eq!(steps_bound(&r).unwrap(), 4);
        assert_eq!(
            rounds_per_chunk_bound(&r, SccCollective::Allgather).unwrap(),
            (7, 2)
        );
        let l = UnitTopology::line(4).unwrap();
        assert_eq!(
            rounds_per_chunk_bound(&l, SccCollective::Allgather).unwrap(),
            (3, 1)
        );
    }

    #[test]
    fn dominance() {
        assert!(Point::new(2, 3, 2).dominates(&Point::new(2, 2, 1)));
        assert!(!Point::new(2, 2, 1).dominates(&Point::new(2, 3, 2)));
        assert!(Point::new(3, 7, 6).dominates(&Point::new(3, 4, 3)));
        assert!(!Point::new(3, 7, 6).dominates(&Point::new(2, 3, 2)));
    }

    #[test]
    fn validator_rejects_broken_schedules() {
        let g = dgx1();
        let Decision::Sat(s) =
            decide(&g, SccCollective::Allgather, Point::new(2, 2, 1), T).unwrap()
        else {
            panic!("(2,2,1) must be sat");
        };
        validate(&g, &s).unwrap();
        // Drop a send: some rank misses a chunk.
        let mut t = s.clone();
        t.sends.pop();
        assert!(validate(&g, &t).is_err());
        // Reverse the time order: causality breaks.
        let mut t = s.clone();
        for x in &mut t.sends {
            x.step = 1 - x.step;
            x.round = 1 - x.round;
        }
        assert!(validate(&g, &t).is_err());
        // Route a send over a missing link (0 -> 5 has no NVLink).
        let mut t = s.clone();
        t.sends[0].dst = 5;
        t.sends[0].src = 0;
        assert!(validate(&g, &t).is_err());
    }
}
