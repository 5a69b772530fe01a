//! The window LP: [`solve`] builds the vectors, solves the LP with
//! [`GAP_LPS`](super::GAP_LPS) HiGHS seeds (the main answer and its
//! alternative optima) and finds the ties between shards; `window_lp` is
//! one solve.

use super::model::{automorphisms, link, shape, ties, vectors, Owner, Via};
use super::{Gap, GAP_LPS};
use crate::ir::{Route, Topology};
use good_lp::solvers::highs::highs;
use good_lp::{constraint, variable, Expression, ProblemVariables, Solution, SolverModel};
use petgraph::graph::EdgeIndex;
use rustc_hash::FxHashMap;

/// Extra time, in units of a hop's α, a link may stay busy past the
/// second wave's window (the LP's slack: own bytes may trail).
const SLACK_ALPHAS: f64 = 0.4;
/// Temperature of the search's soft maximum over per-rank end times, in
/// units of a hop's α.
const SOFTMAX_ALPHAS: f64 = 0.03;

/// Solve the window LP for `topo` at message size `size` (nccl-tests' S):
/// minimise the second-wave window w such that on every link the first
/// hops (far → relay) fit in w, the relayed and routed bytes fit in w, and
/// everything fits in w + slack (the own bytes start a hop's α earlier).
/// The slack is a fixed time, so the size sets how much the own bytes may
/// trail: on DGX-1 at 64 KiB more than half of the busiest link's time
/// (0.28 of 0.53 µs), at 1 MiB 4 % of it, where the LP balances the
/// links' whole loads.
pub fn solve(topo: &Topology, time_limit_s: f64, seed: u32, size: u64) -> Result<Gap, String> {
    let (hops, per_owner) = shape(topo)?;
    let n = topo.num_ranks();
    // Every route once (the LP asks for each many times).
    let routes = topo.all_routes();
    let (mut owners, alpha) = vectors(topo, &hops, &routes, per_owner)?;
    // The LP has many optima, and HiGHS's seed picks the vertex: seeds
    // GAP_LPS·seed + i, the first the main answer. The others share what
    // is left of the time limit and are skipped when it is spent (or
    // when one fails: they only add starts).
    let lp_seed = |i: usize| ((u64::from(seed) * GAP_LPS as u64 + i as u64) % (1 << 31)) as u32;
    let t0 = std::time::Instant::now();
    let main = window_lp(
        topo,
        &routes,
        &owners,
        alpha,
        size,
        time_limit_s,
        lp_seed(0),
    )?;
    for (o, shares) in owners.iter_mut().zip(main) {
        o.shares = shares;
    }
    let mut alts: Vec<Vec<Vec<f64>>> = Vec::new();
    for i in 1..GAP_LPS {
        let left = time_limit_s - t0.elapsed().as_secs_f64();
        if left <= 0.0 {
            break;
        }
        if let Ok(shares) = window_lp(topo, &routes, &owners, alpha, size, left, lp_seed(i)) {
            alts.push(shares);
        }
    }
    let key = |u: usize, v: usize| -> Option<(u64, u64)> {
        let l = topo.link(link(&routes, u, v).ok()?);
        Some((l.capacity_gbps().to_bits(), l.alpha_us.to_bits()))
    };
    let ties = ties(&owners, &automorphisms(n, &key));
    Ok(Gap {
        n,
        owners,
        alts,
        temp_us: SOFTMAX_ALPHAS * alpha.max(1e-3),
        orders: Default::default(),
        ties,
    })
}

/// One solve of the window LP over `owners`' vectors at message size
/// `size` (HiGHS seed `seed`): each shard's shares per vector.
fn window_lp(
    topo: &Topology,
    routes: &[Vec<Option<Route>>],
    owners: &[Owner],
    alpha: f64,
    size: u64,
    time_limit_s: f64,
    seed: u32,
) -> Result<Vec<Vec<f64>>, String> {
    let route = |u: usize, v: usize| routes[u][v].as_ref().ok_or(format!("no route {u} → {v}"));
    let shard = size as f64 / owners.len() as f64;
    let mut vars = ProblemVariables::new();
    let w = vars.add(variable().min(0.0));
    // Per link: first hops, relayed sums, own bytes, routed bytes.
    let mut load: FxHashMap<EdgeIndex, [Expression; 4]> = FxHashMap::default();
    let mut add = |e: EdgeIndex, k: usize, x: Expression| {
        load.entry(e).or_default()[k] += x;
    };
    let mut xs = Vec::new();
    let mut sums = Vec::new();
    for (d, o) in owners.iter().enumerate() {
        let mut sum = Expression::from(0.0);
        let mut vx = Vec::new();
        for v in &o.vectors {
            let x = vars.add(variable().min(0.0));
            sum += x;
            vx.push(x);
            for (j, via) in v.iter().enumerate() {
                match *via {
                    Via::Relay(r) => add(link(routes, o.far[j], r)?, 0, x * shard),
                    Via::Route => {
                        for &e in &route(o.far[j], d)?.links {
                            add(e, 3, x * shard);
                        }
                    }
                }
            }
            for &r in &o.nbrs {
                let k = if v.contains(&Via::Relay(r)) { 1 } else { 2 };
                add(link(routes, r, d)?, k, x * shard);
            }
        }
        sums.push(sum);
        xs.push(vx);
    }
    let slack = SLACK_ALPHAS * alpha;
    let mut m = super::super::highs_options(vars.minimise(w).using(highs), time_limit_s, seed);
    for s in sums {
        m = m.with(constraint!(s == 1.0));
    }
    let mut edges: Vec<_> = load.into_iter().collect();
    edges.sort_by_key(|(e, _)| e.index());
    for (e, [f, g, o, r]) in edges {
        // Bytes per µs.
        let c = topo.link(e).capacity_gbps() * 1e3;
        m = m.with(constraint!(f.clone() <= c * w));
        m = m.with(constraint!(g.clone() + r.clone() <= c * w));
        m = m.with(constraint!(f + g + o + r <= c * w + c * slack));
    }
    let s = m
        .solve()
        .map_err(|e| format!("gap: the window LP failed: {e}"))?;
    Ok(xs
        .iter()
        .map(|vx| vx.iter().map(|&x| s.value(x).max(0.0)).collect())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::super::testing::dgx1;
    use super::super::GAP_SIZE;
    use super::*;
    use crate::lower::{lower, LowerOptions};
    use crate::verify::{verify, VerifyOptions};

    #[test]
    fn lp_shares_are_a_distribution_and_every_plan_is_a_reduce_scatter() {
        let topo = dgx1();
        let g = solve(&topo, 30.0, 0, GAP_SIZE).unwrap();
        for o in &g.owners {
            let s: f64 = o.shares.iter().sum();
            assert!((s - 1.0).abs() < 1e-6, "{s}");
            assert_eq!(o.far.len(), 3);
            assert_eq!(o.nbrs.len(), 4);
        }
        for c in [1, 5, 24] {
            let p = g.start(c);
            assert!(p.counts.iter().all(|row| row.iter().sum::<usize>() == c));
            let a = g.algorithm(&p);
            a.check().expect("a valid reduce-scatter");
            let prog = lower(&a, &LowerOptions::default()).expect("lowers");
            verify(&prog, &VerifyOptions::default()).expect("verifies");
        }
    }
}
