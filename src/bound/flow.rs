//! Exact max-flow / min-cut (Dinic) on rational capacities.

use num_bigint::BigInt;
use num_integer::Integer;
use num_rational::BigRational;
use num_traits::{One, ToPrimitive, Zero};
use std::collections::VecDeque;
use std::ops::{AddAssign, SubAssign};

/// Capacity arithmetic: exact integers (fast path) or big rationals.
pub(super) trait Cap:
    Clone + PartialOrd + Zero + for<'a> AddAssign<&'a Self> + for<'a> SubAssign<&'a Self>
{
}
impl Cap for i128 {}
impl Cap for BigInt {}
impl Cap for BigRational {}

struct Arc<C> {
    to: usize,
    cap: C,
}

struct Net<C> {
    adj: Vec<Vec<usize>>,
    arcs: Vec<Arc<C>>,
}

impl<C: Cap> Net<C> {
    fn new(n: usize) -> Self {
        Net {
            adj: vec![Vec::new(); n],
            arcs: Vec::new(),
        }
    }
    fn add(&mut self, a: usize, b: usize, cap: C) {
        self.adj[a].push(self.arcs.len());
        self.arcs.push(Arc { to: b, cap });
        self.adj[b].push(self.arcs.len());
        self.arcs.push(Arc {
            to: a,
            cap: C::zero(),
        });
    }
    fn levels(&self, s: usize) -> Vec<usize> {
        let mut lvl = vec![usize::MAX; self.adj.len()];
        lvl[s] = 0;
        let mut q = VecDeque::from([s]);
        while let Some(u) = q.pop_front() {
            for &a in &self.adj[u] {
                let arc = &self.arcs[a];
                if lvl[arc.to] == usize::MAX && arc.cap > C::zero() {
                    lvl[arc.to] = lvl[u] + 1;
                    q.push_back(arc.to);
                }
            }
        }
        lvl
    }
    /// One augmentation along a level-graph path (iterative DFS).
    fn augment(&mut self, s: usize, t: usize, lvl: &[usize], it: &mut [usize]) -> Option<C> {
        let mut path: Vec<usize> = Vec::new();
        let mut u = s;
        loop {
            if u == t {
                let mut f = self.arcs[*path.first()?].cap.clone();
                for &a in &path[1..] {
                    if self.arcs[a].cap < f {
                        f = self.arcs[a].cap.clone();
                    }
                }
                for &a in &path {
                    self.arcs[a].cap -= &f;
                    self.arcs[a ^ 1].cap += &f;
                }
                return Some(f);
            }
            let mut advanced = false;
            while it[u] < self.adj[u].len() {
                let a = self.adj[u][it[u]];
                let arc = &self.arcs[a];
                if arc.cap > C::zero() && lvl[arc.to] == lvl[u].wrapping_add(1) {
                    path.push(a);
                    u = arc.to;
                    advanced = true;
                    break;
                }
                it[u] += 1;
            }
            if !advanced {
                // Dead end: retreat.
                let a = path.pop()?;
                let from = self.arcs[a ^ 1].to;
                it[from] += 1;
                u = from;
            }
        }
    }
    /// Dinic max-flow; the flow value and the source side of a min cut.
    fn max_flow(mut self, src: usize, sink: usize) -> (C, Vec<bool>) {
        let mut total = C::zero();
        loop {
            let lvl = self.levels(src);
            if lvl[sink] == usize::MAX {
                let side = lvl.iter().map(|&l| l != usize::MAX).collect();
                return (total, side);
            }
            let mut it = vec![0usize; self.adj.len()];
            while let Some(f) = self.augment(src, sink, &lvl, &mut it) {
                total += &f;
            }
        }
    }
}

/// Exact capacities of the cut graph as integers: capacity e = ints[e] / scale.
pub(super) struct Scaled {
    pub ints: Vec<BigInt>,
    pub scale: BigInt,
}

pub(super) fn scale(edges: &[(usize, usize, BigRational)]) -> Scaled {
    let mut l = BigInt::one();
    for (_, _, c) in edges {
        l = l.lcm(c.denom());
    }
    let ints = edges
        .iter()
        .map(|(_, _, c)| c.numer() * (&l / c.denom()))
        .collect();
    Scaled { ints, scale: l }
}

/// Is x feasible for sink `sink`: does the max-flow from a super-source
/// with an arc of capacity 1 into every GPU, every edge capacity multiplied
/// by `x`, reach `gpus.len()`? Also returns the source side of a minimum
/// cut (without the source). All arithmetic is exact: with x = p/q and
/// capacities c_e = k_e / L, everything is multiplied by q·L (integers; i128
/// when the total fits, big integers otherwise).
pub(super) fn feasible_for(
    n: usize,
    edges: &[(usize, usize, BigRational)],
    sc: &Scaled,
    gpus: &[usize],
    x: &BigRational,
    sink: usize,
) -> (bool, Vec<bool>) {
    let (p, q) = (x.numer(), x.denom());
    let src_cap = q * &sc.scale;
    let caps: Vec<BigInt> = sc.ints.iter().map(|k| p * k).collect();
    let need = &src_cap * BigInt::from(gpus.len());
    let total: BigInt = caps.iter().sum::<BigInt>() + &need;
    let src = n;
    if total.bits() < 120 {
        // Every capacity and every partial sum fits in an i128.
        let i = |v: &BigInt| v.to_i128().unwrap_or(i128::MAX);
        let mut net: Net<i128> = Net::new(n + 1);
        for (k, (a, b, _)) in edges.iter().enumerate() {
            net.add(*a, *b, i(&caps[k]));
        }
        for &g in gpus {
            net.add(src, g, i(&src_cap));
        }
        let (f, mut side) = net.max_flow(src, sink);
        side.truncate(n);
        (f >= i(&need), side)
    } else {
        let mut net: Net<BigInt> = Net::new(n + 1);
        for (k, (a, b, _)) in edges.iter().enumerate() {
            net.add(*a, *b, caps[k].clone());
        }
        for &g in gpus {
            net.add(src, g, src_cap.clone());
        }
        let (f, mut side) = net.max_flow(src, sink);
        side.truncate(n);
        (f >= need, side)
    }
}

/// Max-flow on rational capacities (a cross-check for the integer path).
#[cfg(test)]
pub(super) fn max_flow_from_gpus(
    n: usize,
    edges: &[(usize, usize, BigRational)],
    gpus: &[usize],
    x: &BigRational,
    sink: usize,
) -> (BigRational, Vec<bool>) {
    let src = n;
    let mut net: Net<BigRational> = Net::new(n + 1);
    for (a, b, c) in edges {
        net.add(*a, *b, c * x);
    }
    for &g in gpus {
        net.add(src, g, BigRational::one());
    }
    let (f, mut side) = net.max_flow(src, sink);
    side.truncate(n);
    (f, side)
}

#[cfg(test)]
mod tests {
    use super::*;
    use num_bigint::BigInt;

    fn q(a: i64, b: i64) -> BigRational {
        BigRational::new(BigInt::from(a), BigInt::from(b))
    }

    #[test]
    fn two_paths_and_cut() {
        // gpus 0,1 → 2 (sink) with capacities 1/2 and 3; x = 1.
        let edges = vec![(0, 2, q(1, 2)), (1, 2, q(3, 1))];
        let (v, side) = max_flow_from_gpus(3, &edges, &[0, 1, 2], &q(1, 1), 2);
        // 1/2 through 0, 1 through 1, 1 directly into the sink.
        assert_eq!(v, q(5, 2));
        assert_eq!(side, vec![true, false, false]);
        // The integer path agrees: 5/2 ≥ 3 is false at x = 1, true at x = 2.
        let sc = scale(&edges);
        assert_eq!(sc.scale, BigInt::from(2));
        let (ok, side2) = feasible_for(3, &edges, &sc, &[0, 1, 2], &q(1, 1), 2);
        assert!(!ok);
        assert_eq!(side2, side);
        let (ok, _) = feasible_for(3, &edges, &sc, &[0, 1, 2], &q(2, 1), 2);
        assert!(ok);
    }
}
