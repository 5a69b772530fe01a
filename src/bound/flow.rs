//! Exact max-flow / min-cut (Dinic) on rational capacities.

use num_rational::BigRational;
use num_traits::{One, Zero};
use std::collections::VecDeque;

struct Arc {
    to: usize,
    cap: BigRational,
}

struct Net {
    adj: Vec<Vec<usize>>,
    arcs: Vec<Arc>,
}

impl Net {
    fn new(n: usize) -> Self {
        Net {
            adj: vec![Vec::new(); n],
            arcs: Vec::new(),
        }
    }
    fn add(&mut self, a: usize, b: usize, cap: BigRational) {
        self.adj[a].push(self.arcs.len());
        self.arcs.push(Arc { to: b, cap });
        self.adj[b].push(self.arcs.len());
        self.arcs.push(Arc {
            to: a,
            cap: BigRational::zero(),
        });
    }
    fn levels(&self, s: usize) -> Vec<usize> {
        let mut lvl = vec![usize::MAX; self.adj.len()];
        lvl[s] = 0;
        let mut q = VecDeque::from([s]);
        while let Some(u) = q.pop_front() {
            for &a in &self.adj[u] {
                let arc = &self.arcs[a];
                if lvl[arc.to] == usize::MAX && arc.cap > BigRational::zero() {
                    lvl[arc.to] = lvl[u] + 1;
                    q.push_back(arc.to);
                }
            }
        }
        lvl
    }
    /// One blocking-flow augmentation along a level-graph path (iterative DFS).
    fn augment(
        &mut self,
        s: usize,
        t: usize,
        lvl: &[usize],
        it: &mut [usize],
    ) -> Option<BigRational> {
        let mut path: Vec<usize> = Vec::new();
        let mut u = s;
        loop {
            if u == t {
                let mut f = self.arcs[path[0]].cap.clone();
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
                if arc.cap > BigRational::zero() && lvl[arc.to] == lvl[u].wrapping_add(1) {
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
}

/// Max-flow from a super-source with an arc of capacity 1 into every GPU in
/// `gpus`, every edge capacity multiplied by `x`, to node `sink`. Returns the
/// flow value and the source side of a minimum cut (without the source).
pub(super) fn max_flow_from_gpus(
    n: usize,
    edges: &[(usize, usize, BigRational)],
    gpus: &[usize],
    x: &BigRational,
    sink: usize,
) -> (BigRational, Vec<bool>) {
    let src = n;
    let mut net = Net::new(n + 1);
    for (a, b, c) in edges {
        net.add(*a, *b, c * x);
    }
    for &g in gpus {
        net.add(src, g, BigRational::one());
    }
    let mut total = BigRational::zero();
    loop {
        let lvl = net.levels(src);
        if lvl[sink] == usize::MAX {
            let side = (0..n).map(|v| lvl[v] != usize::MAX).collect();
            return (total, side);
        }
        let mut it = vec![0usize; n + 1];
        while let Some(f) = net.augment(src, sink, &lvl, &mut it) {
            total += f;
        }
    }
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
    }
}
