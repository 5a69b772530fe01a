//! Flow trees: the per-edge reduction LP, bandwidth-optimal over reduction
//! trees whose every edge is one route that relays through no GPU.
//!
//! For owner d every other rank u sends each element of d's shard exactly
//! once, as a partial sum (its own contribution plus whatever it received
//! for that element), to one rank closer to d. `f[d][u→v]` is the fraction
//! of the shard u sends to v. Ranks are ordered per owner (by the α of
//! their route to d, or by maximum adjacency from d: both are solved, the
//! better kept) and u may send only to ranks before it, so however the
//! elements are split every element's parents form a tree. The LP (good_lp
//! + HiGHS):
//!
//! ```text
//! minimise t + 10⁻⁶ · Σ f · ([v ≠ d] + α(u→v) / α_max)
//! subject to  Σ_v f[d][u→v] = 1                    for every owner d, rank u ≠ d,
//!             Σ_{d, u→v routed over e} f[d][u→v] ≤ t · c_e   for every link e,
//! ```
//!
//! (the small term prefers sending straight to the owner, then short
//! routes)
//! gives t · (S/N) as the bandwidth time of a message of S bytes, to compare
//! with the cut bound x*·(S/N) (docs/cost-model.md §1). Every rank sends
//! exactly one shard per owner, which is what the single-GPU cuts ask; the
//! LP reaches x* where x* needs no multi-path or GPU-relayed routes (every
//! shipped topology but DGX-1, 1.07 x*: it needs two-hop relays through
//! GPUs).
//!
//! The fractions are rounded to C chunks per shard (largest remainder per
//! owner and rank; C trades rounding against pipeline fill,
//! [`FlowLp::chunk_count`]); chunk j of d's shard leaves u for the edge its range
//! falls in. Consecutive chunks with the same parents form a class that
//! moves as one step; a transfer's step is its rank's height in the class's
//! tree (leaves 0). Owner d's trees run on channel d mod L (L = N, at most
//! 32, fewer when the threadblocks exceed the GPU's SMs), so each owner's
//! reduction pipelines in its own threadblocks; the k-th message of one
//! (step, pair, channel) moves to sub-step k, so no channel carries two
//! messages of one step on one connection. (Sharing channels by message
//! index instead, so that a threadblock mixed owners, left the busiest link
//! idle a quarter of the time at 1 GiB: relays waited on children queued
//! behind other owners' messages.)

use super::{forest, mix, Candidate, Context, Offer, SynthError, Synthesizer};
use crate::ir::msccl::MAX_CHANNELS;
use crate::ir::{Algorithm, Topology};
use std::rc::Rc;

/// The flow synthesizer.
pub struct Flow;

/// A request's flow LP, solved once.
struct Lp(Result<Rc<FlowLp>, String>);

fn lp(ctx: &Context) -> Result<Rc<FlowLp>, SynthError> {
    let n = ctx.ranks();
    if n > FLOW_MAX_RANKS {
        return Err(SynthError::not_offered(
            "flow",
            format!("{n} ranks (offered up to {FLOW_MAX_RANKS}: its LP has about N^3 variables)"),
        ));
    }
    ctx.shared(|c| Lp(solve(c.topo, c.opts.time_limit_s, c.opts.seed).map(Rc::new)))
        .0
        .clone()
        .map_err(|e| SynthError::failed("flow", e))
}

impl Synthesizer for Flow {
    fn name(&self) -> &'static str {
        "flow"
    }
    fn summary(&self) -> &'static str {
        "per-edge reduction LP (bandwidth-optimal over single-route trees)"
    }
    /// Scored only where its LP optimum is more than 1 % below the
    /// mixture's (the families' best), i.e. where it promises more
    /// bandwidth at large sizes: otherwise the families pipeline better.
    fn in_auto(&self, ctx: &Context) -> Result<(), String> {
        let f = lp(ctx).map_err(|e| e.to_string())?;
        match &mix::lp(ctx).lp {
            Ok(m) if f.t >= 0.99 * m.t => Err(format!(
                "its LP optimum ({:.4}) is not 1 % below the mixture's ({:.4}), whose families pipeline better",
                f.t, m.t
            )),
            _ => Ok(()),
        }
    }
    fn offer(&self, ctx: &Context) -> Result<Offer, SynthError> {
        let lp = lp(ctx)?;
        let c = ctx.opts.chunks.unwrap_or_else(|| lp.chunk_count(ctx.topo));
        // One channel per owner (at most 32; split, per chunk), then
        // halving the channels while the threadblocks exceed the runtime's
        // limits.
        let form = |form: forest::Form, first: usize| -> Vec<Candidate> {
            let mut lanes = vec![first];
            while let Some(&l) = lanes.last().filter(|&&l| l > 1) {
                lanes.push(l / 2);
            }
            lanes
                .into_iter()
                .map(|lanes| {
                    let lp = lp.clone();
                    Box::new(move || lp.build(c, lanes, form).0) as Candidate
                })
                .collect()
        };
        // The classes also chunk by chunk, scored beside them: they
        // pipeline where a chunk is one message, at a message per chunk;
        // and split, a channel per chunk, where fair shares of unequal
        // connections leave links idle (`forest::Form::Split`).
        let per_owner = ctx.ranks().min(MAX_CHANNELS);
        let mut more = vec![form(forest::Form::Pipelined, per_owner)];
        if c > 1 {
            let per_chunk = (ctx.ranks() * c).min(MAX_CHANNELS);
            more.push(form(forest::Form::Split, per_chunk));
        }
        Ok(Offer {
            candidates: form(forest::Form::Classes, per_owner),
            more,
            ..Offer::default()
        })
    }
}
use good_lp::solvers::highs::highs;
use good_lp::{constraint, variable, Expression, ProblemVariables, Solution, SolverModel};
use rustc_hash::FxHashMap;

/// Most ranks `flow` is offered for (its LP has about N³ variables).
pub const FLOW_MAX_RANKS: usize = 32;

/// Largest chunk count per shard tried when rounding.
const FLOW_MAX_CHUNKS: usize = 16;

/// The LP's answer.
#[derive(Debug, Clone)]
pub struct FlowLp {
    n: usize,
    /// order[d]: the ranks, d first; u sends only to ranks before it.
    order: Vec<Vec<usize>>,
    /// Per owner and rank u ≠ d: (v, fraction) over u's allowed edges.
    frac: Vec<Vec<Vec<(usize, f64)>>>,
    /// Optimal max link utilisation per unit of shard (as `mix::Mixture::t`).
    pub t: f64,
}

/// Per pair of ranks: the route's links when it relays through no GPU, its
/// bottleneck width, and every pair's route α.
pub(super) struct Routes {
    pub(super) n: usize,
    pub(super) links: FxHashMap<(usize, usize), Vec<usize>>,
    width: FxHashMap<(usize, usize), f64>,
    pub(super) alpha: Vec<f64>,
}

impl Routes {
    pub(super) fn new(topo: &Topology) -> Routes {
        let n = topo.num_ranks();
        let mut links = FxHashMap::default();
        let mut width = FxHashMap::default();
        let mut alpha = vec![f64::INFINITY; n * n];
        for u in 0..n {
            let pred = topo.route_tree(u);
            for v in (0..n).filter(|&v| v != u) {
                if let Some(r) = topo.route_from_tree(u, v, &pred) {
                    alpha[u * n + v] = r.alpha_us;
                    if !r.through_gpu {
                        links.insert((u, v), r.links.iter().map(|e| e.index()).collect());
                        width.insert((u, v), r.bottleneck_gbps);
                    }
                }
            }
        }
        Routes {
            n,
            links,
            width,
            alpha,
        }
    }

    /// The largest finite route α (at least 10⁻⁹): the tie-breaks'
    /// scale.
    pub(super) fn alpha_max(&self) -> f64 {
        self.alpha
            .iter()
            .copied()
            .filter(|a| a.is_finite())
            .fold(1e-9, f64::max)
    }

    /// α of u's route to d (0 for d itself).
    fn alpha_to(&self, u: usize, d: usize) -> f64 {
        if u == d {
            0.0
        } else {
            self.alpha[u * self.n + d]
        }
    }

    /// Ranks by the α of their route to d, then by rank (d first).
    fn alpha_order(&self, d: usize) -> Vec<usize> {
        let mut ord: Vec<usize> = (0..self.n).collect();
        ord.sort_by(|&x, &y| {
            self.alpha_to(x, d)
                .total_cmp(&self.alpha_to(y, d))
                .then(x.cmp(&y))
        });
        ord
    }

    /// Maximum-adjacency order from d: next the rank with the widest
    /// GPU-free routes, in sum, into the ranks already placed (ties: lower
    /// α to d, then lower rank), so every rank gets wide edges forward.
    fn adjacency_order(&self, d: usize) -> Vec<usize> {
        let n = self.n;
        let mut placed = vec![false; n];
        let mut into = vec![0.0f64; n];
        let mut ord = Vec::with_capacity(n);
        let mut next = Some(d);
        while let Some(v) = next {
            placed[v] = true;
            ord.push(v);
            for u in (0..n).filter(|&u| !placed[u]) {
                into[u] += self.width.get(&(u, v)).copied().unwrap_or(0.0);
            }
            next = (0..n).filter(|&u| !placed[u]).max_by(|&x, &y| {
                into[x]
                    .total_cmp(&into[y])
                    .then(self.alpha_to(y, d).total_cmp(&self.alpha_to(x, d)))
                    .then(y.cmp(&x))
            });
        }
        ord
    }
}

/// Solve the LP for two per-owner orders — by route α, and maximum
/// adjacency — and keep the better (neither wins everywhere: MI250X's
/// one-hive LP reaches 0.84 x* by α and 0.56 by adjacency, the 16-GCD MI250
/// 0.42 and 0.55). Err when some rank has no GPU-free route towards an
/// owner (the LP would be infeasible) or the solver fails.
pub fn solve(topo: &Topology, time_limit_s: f64, seed: u32) -> Result<FlowLp, String> {
    let r = Routes::new(topo);
    let by_alpha = solve_ordered(
        topo,
        &r,
        (0..r.n).map(|d| r.alpha_order(d)).collect(),
        time_limit_s,
        seed,
    )?;
    let by_adjacency = solve_ordered(
        topo,
        &r,
        (0..r.n).map(|d| r.adjacency_order(d)).collect(),
        time_limit_s,
        seed,
    )?;
    Ok(if by_adjacency.t < by_alpha.t * (1.0 - 1e-9) {
        by_adjacency
    } else {
        by_alpha
    })
}

/// The LP with rank u allowed to send only to ranks before it in
/// `order[d]` (which starts with d).
fn solve_ordered(
    topo: &Topology,
    r: &Routes,
    order: Vec<Vec<usize>>,
    time_limit_s: f64,
    seed: u32,
) -> Result<FlowLp, String> {
    let n = r.n;
    let alpha_max = r.alpha_max();
    let mut vars = ProblemVariables::new();
    let t = vars.add(variable().min(0.0));
    let mut objective = Expression::from(t);
    let mut sums = Vec::new();
    // (d, u, v, variable) for every allowed edge.
    let mut edges = Vec::new();
    for (d, ord) in order.iter().enumerate() {
        for (i, &u) in ord.iter().enumerate().skip(1) {
            let mut sum = Expression::from(0.0);
            let mut any = false;
            for &v in &ord[..i] {
                if r.links.contains_key(&(u, v)) {
                    let f = vars.add(variable().min(0.0).max(1.0));
                    // Relays cost store-and-forward and a second α that
                    // the LP does not see: among optima, prefer sending
                    // straight to the owner, then short routes.
                    let relay = if v == d { 0.0 } else { 1.0 };
                    objective += f * (1e-6 * (relay + r.alpha[u * n + v] / alpha_max));
                    sum += f;
                    edges.push((d, u, v, f));
                    any = true;
                }
            }
            if !any {
                return Err(format!(
                    "flow: rank {u} has no route towards owner {d} that relays through no GPU"
                ));
            }
            sums.push(sum);
        }
    }
    let mut load: FxHashMap<usize, Expression> = FxHashMap::default();
    for &(_, u, v, f) in &edges {
        for &e in &r.links[&(u, v)] {
            *load.entry(e).or_default() += f;
        }
    }
    let mut model = super::highs_options(vars.minimise(objective).using(highs), time_limit_s, seed);
    for s in sums {
        model = model.with(constraint!(s == 1.0));
    }
    let mut load: Vec<(usize, Expression)> = load.into_iter().collect();
    load.sort_by_key(|(e, _)| *e);
    for (e, l) in load {
        let cap = topo.graph[petgraph::graph::EdgeIndex::new(e)].capacity_gbps();
        if cap <= 0.0 {
            return Err(format!("flow: link {e} on a route has no capacity"));
        }
        model = model.with(constraint!(l <= t * cap));
    }
    let sol = model
        .solve()
        .map_err(|e| format!("the flow LP failed: {e}"))?;
    let mut frac = vec![vec![Vec::new(); n]; n];
    for &(d, u, v, f) in &edges {
        frac[d][u].push((v, sol.value(f).max(0.0)));
    }
    Ok(FlowLp {
        n,
        order,
        frac,
        t: sol.value(t),
    })
}

impl FlowLp {
    /// The Algorithm with `chunks` chunks per shard on at most `lanes`
    /// logical channels.
    pub fn algorithm(&self, chunks: usize, lanes: usize) -> Algorithm {
        self.build(chunks, lanes, forest::Form::Classes).0
    }

    /// The Algorithm laid out as `form` (`forest::algorithm`), and its
    /// number of levels (the deepest tree's height plus one).
    fn build(&self, chunks: usize, lanes: usize, form: forest::Form) -> (Algorithm, usize) {
        let n = self.n;
        // parent[i·n + u] for the owner at hand.
        let mut parent = vec![usize::MAX; chunks * n];
        let mut classes = Vec::new();
        for d in 0..n {
            let ord = &self.order[d];
            for &u in ord.iter().skip(1) {
                let fr = &self.frac[d][u];
                let counts = mix::round(&fr.iter().map(|x| x.1).collect::<Vec<_>>(), chunks);
                let mut i = 0;
                for (&(v, _), &c) in fr.iter().zip(&counts) {
                    for _ in 0..c {
                        parent[i * n + u] = v;
                        i += 1;
                    }
                }
            }
            // Classes: runs of chunks with the same parents.
            let mut a = 0;
            while a < chunks {
                let same = |b: usize| {
                    ord.iter()
                        .skip(1)
                        .all(|&u| parent[b * n + u] == parent[a * n + u])
                };
                let mut b = a + 1;
                while b < chunks && same(b) {
                    b += 1;
                }
                classes.push(forest::Class {
                    owner: d,
                    first: a,
                    len: b - a,
                    parent: parent[a * n..(a + 1) * n].to_vec(),
                });
                a = b;
            }
        }
        forest::algorithm("flow", n, chunks, &classes, lanes, form)
    }

    /// The chunk count ≤ 16 with the least estimated large-message time
    /// ([`forest::chunk_count`]).
    pub fn chunk_count(&self, topo: &Topology) -> usize {
        forest::chunk_count(topo, FLOW_MAX_CHUNKS, |c| {
            self.build(c, 1, forest::Form::Classes)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::front::generate::{generate, GenParams};

    /// Split (a channel per chunk), the flow LP's trees on a generated
    /// 3-cube (random seed 2) move 1 GiB faster than grouped by owner or
    /// pipelined: every connection carries one chunk, so fair shares
    /// leave no link idle while another owner's connection lags (c = 3:
    /// 6454.8 µs against 7108.3 grouped and 7329.4 pipelined).
    #[test]
    fn split_trees_serve_the_three_cube() {
        use forest::testing::{random_fabric, simulated_us};
        let topo = random_fabric(2);
        let n = topo.num_ranks();
        let lp = solve(&topo, 10.0, 0).unwrap();
        let c = lp.chunk_count(&topo);
        let time = |form: forest::Form, lanes: usize| {
            simulated_us(&topo, &lp.build(c, lanes, form).0, 1 << 30)
        };
        let split = time(forest::Form::Split, (n * c).min(MAX_CHANNELS));
        let grouped = time(forest::Form::Classes, n);
        let piped = time(forest::Form::Pipelined, n);
        assert!(
            split < 0.97 * grouped.min(piped),
            "{split} {grouped} {piped}"
        );
    }

    /// The LP is a restriction of what the cut bound allows, so its
    /// optimum is never below x*; and every rounding builds valid trees.
    #[test]
    fn never_below_the_cut_bound_and_always_valid_trees() {
        for name in ["dgx1-v100", "switch", "dgx2-v100", "mi300x", "line"] {
            let topo = generate(name, &GenParams::default()).unwrap();
            let lp = solve(&topo, 10.0, 0).unwrap();
            let b =
                crate::bound::bandwidth_bound(&topo, crate::ir::Collective::ReduceScatter).unwrap();
            assert!(lp.t >= b.x_star_f64() * (1.0 - 1e-6), "{name}");
            for c in [1, 3, 7] {
                for lanes in [1, 4, topo.num_ranks()] {
                    let a = lp.algorithm(c, lanes);
                    a.check()
                        .unwrap_or_else(|e| panic!("{name} c{c} l{lanes}: {e}"));
                    assert!(a.num_channels() <= lanes);
                }
            }
        }
    }

    #[test]
    fn reaches_the_cut_bound_on_a_switch_and_a_ring() {
        for name in ["dgx-h100", "ring"] {
            let topo = generate(name, &GenParams::default()).unwrap();
            let lp = solve(&topo, 10.0, 0).unwrap();
            let b =
                crate::bound::bandwidth_bound(&topo, crate::ir::Collective::ReduceScatter).unwrap();
            assert!(
                (lp.t / b.x_star_f64() - 1.0).abs() < 1e-6,
                "{name}: {}",
                lp.t
            );
            let c = lp.chunk_count(&topo);
            let a = lp.algorithm(c, 4);
            a.check().unwrap();
        }
    }
}
