//! Why DGX-1 at 64 KiB stays above 1.1 × the α-aware bound: a fluid
//! relaxation of the two-wave shape every DGX-1 small-message schedule has
//! in the cost model (docs/algorithms.md "Latency trees", last paragraph).
//!
//! Run: `cargo run --release --example dgx1_windows`.
//!
//! Every NVLink has α = 0.7 µs, so a step started at 0 moves bytes from
//! 0.7 µs on, and any later step (it waits for an arrival, ≥ 0.7 µs) from
//! 1.4 µs on. Below T = 2.1 µs a far rank f's contribution to owner d
//! (no NVLink between them) reaches d in one of three ways: stored and
//! forwarded by a relay r adjacent to both (first hop in [0.7, T − 0.7],
//! merged at r with whatever else r forwards to d, second hop in
//! [1.4, T]), or as one message over the route f → d (both links in
//! [1.4, T]). Both windows are w = T − 1.4 wide. Per owner, the LP picks
//! the share of the shard's elements for each vector of choices (one per
//! far rank), charges every link its bytes in its window, and minimises w.
//! The columns differ in where the neighbours' own contributions — sent
//! directly, merged nowhere — are charged; in the last, a neighbour may also
//! send them in the first window to another neighbour of the owner that
//! relays those elements, to be merged there.

use good_lp::solvers::highs::highs;
use good_lp::{constraint, variable, Expression, ProblemVariables, Solution, SolverModel};
use rscc::front::generate::{generate, GenParams};
use rscc::ir::Collective;
use std::collections::HashMap;

/// Where the neighbours' own (unmerged) bytes go.
#[derive(Clone, Copy)]
enum Own {
    /// Not charged: they could cross between the windows.
    Free,
    /// With the first hops (sent at step 0).
    First,
    /// With the second hops (sent after an arrival).
    Second,
    /// Split between the two as the LP likes.
    Split,
    /// Split, or sent in the first window to another neighbour of d that
    /// relays those elements and merges them.
    Via,
}

fn solve(topo: &rscc::ir::Topology, shard: f64, own: Own) -> f64 {
    let n = topo.num_ranks();
    let mut cap = vec![0.0; n * n];
    for u in 0..n {
        for (v, b) in topo.direct_neighbours(u) {
            if v != u {
                cap[u * n + v] = b * 1e3; // bytes per µs
            }
        }
    }
    let rank_of = |x| topo.ranks.iter().position(|&r| r == x).unwrap();
    let mut vars = ProblemVariables::new();
    let w = vars.add(variable().min(0.0));
    let mut first: HashMap<(usize, usize), Expression> = HashMap::new();
    let mut second: HashMap<(usize, usize), Expression> = HashMap::new();
    let mut sums = Vec::new();
    let mut le0: Vec<Expression> = Vec::new();
    for d in 0..n {
        let far: Vec<usize> = (0..n)
            .filter(|&u| u != d && cap[u * n + d] == 0.0)
            .collect();
        // Per far rank: its relays, then usize::MAX for its own route.
        let options: Vec<Vec<usize>> = far
            .iter()
            .map(|&f| {
                let mut v: Vec<usize> = (0..n)
                    .filter(|&r| cap[f * n + r] > 0.0 && cap[r * n + d] > 0.0)
                    .collect();
                v.push(usize::MAX);
                v
            })
            .collect();
        let mut vectors: Vec<Vec<usize>> = vec![vec![]];
        for o in &options {
            vectors = vectors
                .into_iter()
                .flat_map(|c| o.iter().map(move |&x| [c.clone(), vec![x]].concat()))
                .collect();
        }
        let mut sum = Expression::from(0.0);
        let mut relayed = vec![Expression::from(0.0); n];
        let mut via = vec![Expression::from(0.0); n];
        for c in &vectors {
            let x = vars.add(variable().min(0.0));
            sum += x;
            if matches!(own, Own::Via) {
                let used: Vec<usize> = c.iter().copied().filter(|&r| r != usize::MAX).collect();
                for r in (0..n).filter(|&r| cap[r * n + d] > 0.0 && !used.contains(&r)) {
                    let mut tot = Expression::from(0.0);
                    for &r2 in used.iter().filter(|&&r2| cap[r * n + r2] > 0.0) {
                        let v = vars.add(variable().min(0.0));
                        tot += v;
                        via[r] += v;
                        *first.entry((r, r2)).or_default() += v;
                    }
                    le0.push(tot - x * shard);
                }
            }
            let mut used = vec![false; n];
            for (j, &r) in c.iter().enumerate() {
                if r == usize::MAX {
                    for e in topo.route(far[j], d).unwrap().links {
                        let (a, b) = topo.graph.edge_endpoints(e).unwrap();
                        *second.entry((rank_of(a), rank_of(b))).or_default() += x * shard;
                    }
                } else {
                    *first.entry((far[j], r)).or_default() += x * shard;
                    used[r] = true;
                }
            }
            for r in (0..n).filter(|&r| used[r]) {
                *second.entry((r, d)).or_default() += x * shard;
                relayed[r] += x;
            }
        }
        sums.push(sum);
        for r in (0..n).filter(|&r| cap[r * n + d] > 0.0) {
            // r's own bytes not merged into what it relays to d.
            let a = vars.add(variable().min(0.0));
            let b = vars.add(variable().min(0.0));
            sums.push(
                Expression::from(a) + b + via[r].clone() + relayed[r].clone() * shard - shard,
            );
            match own {
                Own::First => sums.push(Expression::from(b)),
                Own::Second => sums.push(Expression::from(a)),
                Own::Free | Own::Split | Own::Via => {}
            }
            if !matches!(own, Own::Free) {
                *first.entry((r, d)).or_default() += a;
                *second.entry((r, d)).or_default() += b;
            }
        }
    }
    let mut m = vars.minimise(w).using(highs);
    let (owners, rest) = sums.split_at(n);
    for s in owners {
        m = m.with(constraint!(s.clone() == 1.0));
    }
    for s in rest {
        m = m.with(constraint!(s.clone() == 0.0));
    }
    for s in le0 {
        m = m.with(constraint!(s <= 0.0));
    }
    for map in [&first, &second] {
        for (&(u, v), e) in map {
            m = m.with(constraint!(e.clone() <= cap[u * n + v] * w));
        }
    }
    m.solve().expect("the window LP is feasible").value(w)
}

fn main() {
    let topo = generate("dgx1-v100", &GenParams::default()).expect("dgx1-v100");
    println!("| size | α-aware bound | own bytes not charged | with the first hops | with the second hops | split | split, or via a relay |");
    println!("|---|---|---|---|---|---|---|");
    for size in [16u64 << 10, 32 << 10, 64 << 10] {
        let lb = rscc::bound::alpha_bound_us(&topo, Collective::ReduceScatter, size).unwrap();
        let shard = size as f64 / topo.num_ranks() as f64;
        let t: Vec<String> = [Own::Free, Own::First, Own::Second, Own::Split, Own::Via]
            .iter()
            .map(|&o| {
                let t = 1.4 + solve(&topo, shard, o);
                format!("{t:.3} µs ({:.3} ×)", t / lb)
            })
            .collect();
        println!("| {} KiB | {lb:.3} µs | {} |", size >> 10, t.join(" | "));
    }
}
