//! Exact max-flow / min-cut on integer or rational capacities:
//! highest-label push–relabel with global relabelling and the gap rule
//! (phase one only: the maximum preflow gives the flow value and a cut).
//!
//! Highest-label order matters here: the bound's networks send flow from
//! every GPU to one sink, and processing the farthest vertices first lets
//! excess merge on its way, so each vertex is discharged about once (Dinic
//! needed one phase per distance: O(N·E) per sink on a 1024-GPU ring).

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

#[derive(Clone)]
pub(super) struct Arc<C> {
    to: usize,
    cap: C,
}

/// A residual network; arc `a ^ 1` is the reverse of arc `a`.
#[derive(Clone)]
pub(super) struct Net<C> {
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

    /// Distance of every vertex to `sink` in the residual graph (`usize::MAX`
    /// where the sink cannot be reached).
    fn dist_to(&self, sink: usize) -> Vec<usize> {
        let mut d = vec![usize::MAX; self.adj.len()];
        d[sink] = 0;
        let mut q = VecDeque::from([sink]);
        while let Some(w) = q.pop_front() {
            for &b in &self.adj[w] {
                // Arc b leaves w; its reverse b ^ 1 enters w from arcs[b].to.
                let u = self.arcs[b].to;
                if d[u] == usize::MAX && self.arcs[b ^ 1].cap > C::zero() {
                    d[u] = d[w] + 1;
                    q.push_back(u);
                }
            }
        }
        d
    }

    /// Maximum flow from `src` to `sink`; the flow value and the source
    /// side of a minimum cut (every vertex that cannot reach the sink in the
    /// final residual graph).
    fn max_flow(mut self, src: usize, sink: usize) -> (C, Vec<bool>) {
        let n = self.adj.len();
        let mut excess = vec![C::zero(); n];
        let mut h = vec![0usize; n];
        let mut cur = vec![0usize; n];
        // Vertices at each height, active ones by height, and counts for the
        // gap rule. Heights ≥ n mean "cannot reach the sink" (phase one).
        let mut active: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut count = vec![0usize; n + 1];
        let mut top = 0usize;
        for i in 0..self.adj[src].len() {
            let a = self.adj[src][i];
            let c = self.arcs[a].cap.clone();
            if c > C::zero() {
                let to = self.arcs[a].to;
                self.arcs[a].cap -= &c;
                self.arcs[a ^ 1].cap += &c;
                excess[to] += &c;
            }
        }
        let relabel_all = |net: &Self,
                           h: &mut Vec<usize>,
                           count: &mut Vec<usize>,
                           active: &mut Vec<Vec<usize>>,
                           excess: &[C],
                           cur: &mut Vec<usize>|
         -> usize {
            let d = net.dist_to(sink);
            count.iter_mut().for_each(|c| *c = 0);
            active.iter_mut().for_each(Vec::clear);
            let mut top = 0;
            for v in 0..n {
                h[v] = if v == src { n } else { d[v].min(n) };
                cur[v] = 0;
                if h[v] < n {
                    count[h[v]] += 1;
                    if v != sink && excess[v] > C::zero() {
                        active[h[v]].push(v);
                        top = top.max(h[v]);
                    }
                }
            }
            top
        };
        top = top.max(relabel_all(
            &self,
            &mut h,
            &mut count,
            &mut active,
            &excess,
            &mut cur,
        ));
        let mut relabels = 0usize;
        loop {
            while top > 0 && active[top].is_empty() {
                top -= 1;
            }
            let Some(u) = active[top].pop() else { break };
            if h[u] != top || u == sink || u == src || excess[u] <= C::zero() {
                continue;
            }
            // Discharge u.
            while excess[u] > C::zero() {
                if cur[u] == self.adj[u].len() {
                    // Relabel: one more than the lowest residual neighbour.
                    let old = h[u];
                    let mut m = n;
                    for &a in &self.adj[u] {
                        if self.arcs[a].cap > C::zero() {
                            m = m.min(h[self.arcs[a].to] + 1);
                        }
                    }
                    count[old] -= 1;
                    relabels += 1;
                    if count[old] == 0 {
                        // Gap: nothing at height `old` any more, so nothing
                        // above it (below n) can reach the sink.
                        for v in 0..n {
                            if h[v] > old && h[v] < n {
                                count[h[v]] -= 1;
                                h[v] = n;
                            }
                        }
                        h[u] = n;
                        break;
                    }
                    h[u] = m.min(n);
                    cur[u] = 0;
                    if h[u] >= n {
                        break;
                    }
                    count[h[u]] += 1;
                    continue;
                }
                let a = self.adj[u][cur[u]];
                let to = self.arcs[a].to;
                if self.arcs[a].cap > C::zero() && h[u] == h[to] + 1 {
                    let f = if self.arcs[a].cap < excess[u] {
                        self.arcs[a].cap.clone()
                    } else {
                        excess[u].clone()
                    };
                    self.arcs[a].cap -= &f;
                    self.arcs[a ^ 1].cap += &f;
                    excess[u] -= &f;
                    let was_idle = excess[to] <= C::zero();
                    excess[to] += &f;
                    if was_idle && to != sink && to != src && h[to] < n {
                        // u may have been relabelled above `top`.
                        active[h[to]].push(to);
                        top = top.max(h[to]);
                    }
                } else {
                    cur[u] += 1;
                }
            }
            if excess[u] > C::zero() && h[u] < n {
                active[h[u]].push(u);
                top = top.max(h[u]);
            }
            if relabels > n {
                relabels = 0;
                top = relabel_all(&self, &mut h, &mut count, &mut active, &excess, &mut cur);
            }
        }
        let d = self.dist_to(sink);
        let side = d.iter().map(|&x| x == usize::MAX).collect();
        (excess[sink].clone(), side)
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

/// The network that tests whether a rate x is feasible: a super-source with
/// an arc of capacity 1 into every GPU, every edge capacity multiplied by
/// `x`, all scaled to integers (with x = p/q and capacities c_e = k_e / L,
/// everything is multiplied by q·L; i128 when the total fits, big integers
/// otherwise). Built once per x, copied per sink.
pub(super) enum Feasibility {
    Small {
        net: Net<i128>,
        need: i128,
        n: usize,
    },
    Big {
        net: Net<BigInt>,
        need: BigInt,
        n: usize,
    },
}

impl Feasibility {
    pub(super) fn new(
        n: usize,
        edges: &[(usize, usize, BigRational)],
        sc: &Scaled,
        gpus: &[usize],
        x: &BigRational,
    ) -> Self {
        let (p, q) = (x.numer(), x.denom());
        let src_cap = q * &sc.scale;
        let caps: Vec<BigInt> = sc.ints.iter().map(|k| p * k).collect();
        let need = &src_cap * BigInt::from(gpus.len());
        let total: BigInt = caps.iter().sum::<BigInt>() + &need;
        let src = n;
        let small = |v: &BigInt| v.to_i128();
        if total.bits() < 120 {
            // Every capacity and every partial sum fits in an i128.
            let mut net: Net<i128> = Net::new(n + 1);
            for (k, (a, b, _)) in edges.iter().enumerate() {
                net.add(*a, *b, small(&caps[k]).unwrap_or(i128::MAX));
            }
            for &g in gpus {
                net.add(src, g, small(&src_cap).unwrap_or(i128::MAX));
            }
            let need = small(&need).unwrap_or(i128::MAX);
            Feasibility::Small { net, need, n }
        } else {
            let mut net: Net<BigInt> = Net::new(n + 1);
            for (k, (a, b, _)) in edges.iter().enumerate() {
                net.add(*a, *b, caps[k].clone());
            }
            for &g in gpus {
                net.add(src, g, src_cap.clone());
            }
            Feasibility::Big { net, need, n }
        }
    }

    /// Does the max-flow into `sink` reach `gpus.len()` (scaled)? Also the
    /// source side of a minimum cut (without the source).
    pub(super) fn check(&self, sink: usize) -> (bool, Vec<bool>) {
        match self {
            Feasibility::Small { net, need, n } => {
                let (f, mut side) = net.clone().max_flow(*n, sink);
                side.truncate(*n);
                (f >= *need, side)
            }
            Feasibility::Big { net, need, n } => {
                let (f, mut side) = net.clone().max_flow(*n, sink);
                side.truncate(*n);
                (f >= *need, side)
            }
        }
    }
}

/// The least capacity of a cut that separates every vertex of `from` from
/// every vertex of `to` (`from` on the source side), exact: a max-flow from
/// a super-source with unbounded arcs into `from` to a super-sink with
/// unbounded arcs out of `to`, on the capacities of `sc` (i128 when their
/// total fits, big integers otherwise).
pub(super) fn min_cut_between(
    n: usize,
    edges: &[(usize, usize, BigRational)],
    sc: &Scaled,
    from: &[usize],
    to: &[usize],
) -> BigRational {
    let (src, sink) = (n, n + 1);
    let unbounded: BigInt = sc.ints.iter().sum::<BigInt>() + BigInt::one();
    let value: BigInt = if unbounded.bits() < 120 {
        let inf = unbounded.to_i128().unwrap_or(i128::MAX);
        let mut net: Net<i128> = Net::new(n + 2);
        for (k, (a, b, _)) in edges.iter().enumerate() {
            net.add(*a, *b, sc.ints[k].to_i128().unwrap_or(i128::MAX));
        }
        for &v in from {
            net.add(src, v, inf);
        }
        for &v in to {
            net.add(v, sink, inf);
        }
        BigInt::from(net.max_flow(src, sink).0)
    } else {
        let mut net: Net<BigInt> = Net::new(n + 2);
        for (k, (a, b, _)) in edges.iter().enumerate() {
            net.add(*a, *b, sc.ints[k].clone());
        }
        for &v in from {
            net.add(src, v, unbounded.clone());
        }
        for &v in to {
            net.add(v, sink, unbounded.clone());
        }
        net.max_flow(src, sink).0
    };
    BigRational::new(value, sc.scale.clone())
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
    fn min_cut_between_groups() {
        // 0 → switch 2 (5/2), switch 2 → 3 (1/3), switch 2 → 4 (1/2),
        // 1 → 3 (7): from {0} to {3, 4} the switch's two links bind (5/6);
        // from {0, 1} to {3} the 1/3 and 7 bind; the integer path takes
        // the scale 6 and gives the rational back.
        let edges = vec![
            (0, 2, q(5, 2)),
            (2, 3, q(1, 3)),
            (2, 4, q(1, 2)),
            (1, 3, q(7, 1)),
        ];
        let sc = scale(&edges);
        assert_eq!(min_cut_between(5, &edges, &sc, &[0], &[3, 4]), q(5, 6));
        assert_eq!(min_cut_between(5, &edges, &sc, &[0, 1], &[3]), q(22, 3));
        assert_eq!(min_cut_between(5, &edges, &sc, &[3], &[0]), q(0, 1));
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
        let (ok, side2) = Feasibility::new(3, &edges, &sc, &[0, 1, 2], &q(1, 1)).check(2);
        assert!(!ok);
        assert_eq!(side2, side);
        let (ok, _) = Feasibility::new(3, &edges, &sc, &[0, 1, 2], &q(2, 1)).check(2);
        assert!(ok);
    }

    /// Reference: Edmonds–Karp on plain integers.
    fn edmonds_karp(n: usize, edges: &[(usize, usize, i64)], s: usize, t: usize) -> i64 {
        let mut cap = vec![vec![0i64; n]; n];
        for &(a, b, c) in edges {
            cap[a][b] += c;
        }
        let mut total = 0;
        loop {
            let mut prev = vec![usize::MAX; n];
            prev[s] = s;
            let mut q = VecDeque::from([s]);
            while let Some(u) = q.pop_front() {
                for v in 0..n {
                    if prev[v] == usize::MAX && cap[u][v] > 0 {
                        prev[v] = u;
                        q.push_back(v);
                    }
                }
            }
            if prev[t] == usize::MAX {
                return total;
            }
            let mut f = i64::MAX;
            let mut v = t;
            while v != s {
                f = f.min(cap[prev[v]][v]);
                v = prev[v];
            }
            let mut v = t;
            while v != s {
                cap[prev[v]][v] -= f;
                cap[v][prev[v]] += f;
                v = prev[v];
            }
            total += f;
        }
    }

    /// Push–relabel agrees with Edmonds–Karp on random graphs, and its cut
    /// is a minimum cut (capacity equal to the flow, source inside, sink
    /// outside).
    #[test]
    fn push_relabel_matches_reference() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        for _case in 0..300 {
            let n = 2 + rnd(12) as usize;
            let m = rnd(40) as usize;
            let mut edges = Vec::new();
            for _ in 0..m {
                let a = rnd(n as u64) as usize;
                let b = rnd(n as u64) as usize;
                if a != b {
                    edges.push((a, b, rnd(20) as i64));
                }
            }
            let (s, t) = (0, n - 1);
            let want = edmonds_karp(n, &edges, s, t);
            let mut net: Net<i128> = Net::new(n);
            for &(a, b, c) in &edges {
                net.add(a, b, c as i128);
            }
            let (f, side) = net.max_flow(s, t);
            assert_eq!(f, want as i128, "n {n} edges {edges:?}");
            assert!(side[s] && !side[t]);
            let cut: i64 = edges
                .iter()
                .filter(|&&(a, b, _)| side[a] && !side[b])
                .map(|e| e.2)
                .sum();
            assert_eq!(cut, want, "cut is not minimum: {edges:?}");
        }
    }
}
