//! The tree-packing LP, solved by column generation.
//!
//! Columns are reduction in-trees: for owner d, a tree over the ranks
//! rooted at d whose every edge u → v is a route that relays through no
//! GPU (GPUs relay by being inner nodes of the tree, where they also add
//! their own contribution). A tree carries one unit of d's shard over each
//! of its edges, so it loads link e once per edge whose route crosses e.
//! The master LP
//!
//! ```text
//! minimise t
//! subject to  Σ_{T of d} w_T = 1                   for every owner d      (dual μ_d)
//!             Σ_T w_T · load_T(e) ≤ t · c_e        for every link e       (dual −π_e)
//! ```
//!
//! (capacities in units of the widest link, so that t and the duals are of
//! order one) over the trees found so far is solved with HiGHS; its duals
//! price every edge u → v at Σ_{e on its route} π_e, and the cheapest
//! in-tree per owner is a minimum spanning arborescence
//! ([`super::arborescence`]). A tree cheaper than μ_d joins the master;
//! when no owner has one the master is optimal over *all* trees.
//!
//! The first pool comes from multiplicative weights: a few dozen passes in
//! which each owner takes its cheapest tree when a link costs
//! exp(κ · load / busiest load) per unit of capacity. The loop stops when
//! the certificate below is within 0.05 % of the master, when the master
//! has not moved for 8 rounds, or after 400 rounds or the time
//! limit.
//!
//! Any prices π ≥ 0 with Σ π_e c_e = 1 certify a lower bound (weak
//! duality): a packing of utilisation t has t = t · Σ π_e c_e ≥ Σ_e π_e
//! load(e) = Σ_d Σ_T w_T cost_π(T) ≥ Σ_d min_T cost_π(T). [`Packing::lower`]
//! is the best such bound over every round's duals, their running mean
//! and the warm-up's weights (degenerate duals that put all the price on
//! one link certify little), so it holds however the loop ended.
//!
//! Once the pool is final the master is solved again with a tie-break,
//! `+ 10⁻⁴ · Σ_T w_T · tie(T)` where tie(T) = Σ over T's edges of
//! [v ≠ d] + α(u→v)/α_max: among the pool's optimal packings it prefers
//! trees that send straight to the owner and over short routes (relays
//! cost store-and-forward and a second α that the LP does not see), as the
//! flow LP does. Pricing never sees the tie-break, which would tilt the
//! duals and with them the certificate.

use super::super::flow::Routes;
use super::arborescence::min_out_arborescence;
use crate::ir::Topology;
use good_lp::solvers::highs::highs;
use good_lp::solvers::{DualValues, SolutionWithDual};
use good_lp::{constraint, variable, Expression, ProblemVariables, Solution, SolverModel};
use rustc_hash::{FxHashMap, FxHashSet};
use std::time::Instant;

/// Most master solves before the loop stops (the bound stays valid
/// either way).
const MAX_ROUNDS: usize = 400;

/// Multiplicative-weights passes that seed the master, and their price
/// exponent.
const WARM_PASSES: usize = 32;
const WARM_KAPPA: f64 = 8.0;

/// Rounds without progress of the master after which the loop stops.
const STALL: usize = 8;

/// The loop stops when the master is within this fraction of the
/// certificate.
const GAP: f64 = 5e-4;

/// Weight of the tie-break in the master (whose capacities are in units of
/// the widest link, so t is of order one).
const TIE: f64 = 1e-4;

/// Most moves of an integral packing's local search.
const LOCAL_MOVES: usize = 2000;

/// The optimal fractional packing found.
#[derive(Debug, Clone)]
pub struct Packing {
    pub n: usize,
    /// Per owner: its trees (`parent[u]` for every rank u ≠ owner) and
    /// their weights, which sum to 1; in an allreduce's packing
    /// ([`solve_allreduce`]) then per owner its out-trees (`parent[v]`:
    /// the rank v receives from).
    pub trees: Vec<Vec<(Vec<usize>, f64)>>,
    /// The packing's max link utilisation per unit of shard: t · (S/N) is
    /// its large-message time, comparable with the cut bound x* · (S/N).
    pub t: f64,
    /// A lower bound on t over every fractional packing of reduction trees
    /// on single GPU-free routes (weak duality at the final prices).
    pub lower: f64,
    /// Master LPs solved.
    pub rounds: usize,
    /// Every tree pricing found (the integral packings choose among them).
    pool: Vec<Column>,
    /// Per link row: capacity, GB/s.
    cap: Vec<f64>,
}

/// An integral packing: per owner, trees and how many of its chunks each
/// carries.
#[derive(Debug, Clone)]
pub struct Integral {
    pub chunks: usize,
    pub trees: Vec<Vec<(Vec<usize>, usize)>>,
    /// Max link utilisation per unit of shard (as [`Packing::t`]).
    pub u: f64,
}

/// A tree found by pricing.
#[derive(Debug, Clone)]
struct Column {
    owner: usize,
    parent: Vec<usize>,
    /// (link row, edges of the tree crossing it).
    load: Vec<(usize, f64)>,
    tie: f64,
}

/// The problem: GPU-free edges, their routes' links as LP rows.
struct Net {
    n: usize,
    /// (u, v): u may send to v.
    arcs: Vec<(usize, usize)>,
    /// Per arc: the rows of the links its route crosses.
    rows: Vec<Vec<usize>>,
    /// Per row: link capacity, GB/s.
    cap: Vec<f64>,
    /// Per arc: α(u→v) / α_max.
    alpha: Vec<f64>,
    /// Layered trees only: per owner, every rank's hops to it over the
    /// GPU-free edges; an edge must lead strictly closer.
    hops: Option<Vec<Vec<usize>>>,
    /// An allreduce's packing: column groups n … 2n − 1 are the owners'
    /// broadcast out-trees, beside their reduction in-trees.
    joint: bool,
}

impl Net {
    fn new(topo: &Topology) -> Result<Net, String> {
        let r = Routes::new(topo);
        let mut arcs: Vec<(usize, usize)> = r.links.keys().copied().collect();
        arcs.sort_unstable();
        let alpha_max = r.alpha_max();
        let mut row_of: FxHashMap<usize, usize> = FxHashMap::default();
        let mut cap = Vec::new();
        let mut rows = Vec::with_capacity(arcs.len());
        for &(u, v) in &arcs {
            let mut rs = Vec::new();
            for &e in &r.links[&(u, v)] {
                let row = *row_of.entry(e).or_insert_with(|| {
                    cap.push(topo.graph[petgraph::graph::EdgeIndex::new(e)].capacity_gbps());
                    cap.len() - 1
                });
                rs.push(row);
            }
            rows.push(rs);
        }
        if let Some(i) = cap.iter().position(|&c| !(c > 0.0 && c.is_finite())) {
            return Err(format!(
                "pack: a link on a route has capacity {} GB/s",
                cap[i]
            ));
        }
        let alpha = arcs
            .iter()
            .map(|&(u, v)| r.alpha[u * r.n + v] / alpha_max)
            .collect();
        Ok(Net {
            n: r.n,
            arcs,
            rows,
            cap,
            alpha,
            hops: None,
            joint: false,
        })
    }

    /// Column groups: one per owner's in-trees, and with `joint` one per
    /// owner's out-trees after them.
    fn groups(&self) -> usize {
        if self.joint {
            2 * self.n
        } else {
            self.n
        }
    }

    /// Hops from every rank to every owner over the GPU-free edges.
    fn hop_counts(&self) -> Vec<Vec<usize>> {
        (0..self.n)
            .map(|d| {
                let mut dist = vec![usize::MAX; self.n];
                dist[d] = 0;
                let mut frontier = vec![d];
                while !frontier.is_empty() {
                    let mut next = Vec::new();
                    for &(u, v) in &self.arcs {
                        if dist[u] == usize::MAX && frontier.contains(&v) {
                            dist[u] = dist[v] + 1;
                            next.push(u);
                        }
                    }
                    frontier = next;
                }
                dist
            })
            .collect()
    }

    /// The cheapest in-tree rooted at `d` when link row i costs `price[i]`
    /// per unit (plus `tie_weight` times the tie-break), as a column, and
    /// its price-only cost.
    fn cheapest(&self, d: usize, price: &[f64], tie_weight: f64) -> Result<(Column, f64), String> {
        if d >= self.n {
            return self.cheapest_out(d, price, tie_weight);
        }
        let arc_cost = |a: usize| -> f64 { self.rows[a].iter().map(|&r| price[r]).sum() };
        let tie = |a: usize| -> f64 {
            let (_, v) = self.arcs[a];
            (if v == d { 0.0 } else { 1.0 }) + self.alpha[a]
        };
        // Out-arborescence on the reversed edges: v → u for u sends to v.
        let allowed: Vec<usize> = (0..self.arcs.len())
            .filter(|&a| {
                let (u, v) = self.arcs[a];
                self.hops.as_ref().is_none_or(|h| h[d][v] < h[d][u])
            })
            .collect();
        let rev: Vec<(usize, usize, f64)> = allowed
            .iter()
            .map(|&a| {
                let (u, v) = self.arcs[a];
                (v, u, arc_cost(a) + tie_weight * tie(a))
            })
            .collect();
        let entering = min_out_arborescence(self.n, d, &rev).ok_or_else(|| {
            format!("pack: some rank has no chain of GPU-free routes towards rank {d}")
        })?;
        Ok(self.column(d, d, |u| {
            let a = allowed[entering[u]];
            (a, self.arcs[a].1, arc_cost(a), tie(a))
        }))
    }

    /// The column of group `g` whose tree is rooted at `root`: every
    /// other rank u's arc, the rank its chunk goes to or comes from, the
    /// arc's price and its tie-break (`edge(u)`); and its price-only cost.
    fn column(
        &self,
        g: usize,
        root: usize,
        edge: impl Fn(usize) -> (usize, usize, f64, f64),
    ) -> (Column, f64) {
        let mut parent = vec![usize::MAX; self.n];
        let mut load: FxHashMap<usize, f64> = FxHashMap::default();
        let (mut cost, mut t) = (0.0, 0.0);
        for u in (0..self.n).filter(|&u| u != root) {
            let (a, p, c, tie) = edge(u);
            parent[u] = p;
            cost += c;
            t += tie;
            for &r in &self.rows[a] {
                *load.entry(r).or_default() += 1.0;
            }
        }
        let mut load: Vec<(usize, f64)> = load.into_iter().collect();
        load.sort_unstable_by_key(|x| x.0);
        (
            Column {
                owner: g,
                parent,
                load,
                tie: t,
            },
            cost,
        )
    }
}

impl Net {
    /// The cheapest out-tree of column group `g` (owner g − n): a minimum
    /// spanning arborescence from the owner over the GPU-free edges as
    /// they are (u → v: u sends the chunk on to v), as a column whose
    /// `parent[v]` is the rank v receives from, and its price-only cost.
    /// The tie-break prefers sends from the owner and short routes.
    fn cheapest_out(
        &self,
        g: usize,
        price: &[f64],
        tie_weight: f64,
    ) -> Result<(Column, f64), String> {
        let d = g - self.n;
        let arc_cost = |a: usize| -> f64 { self.rows[a].iter().map(|&r| price[r]).sum() };
        let tie = |a: usize| -> f64 {
            let (u, _) = self.arcs[a];
            (if u == d { 0.0 } else { 1.0 }) + self.alpha[a]
        };
        let fwd: Vec<(usize, usize, f64)> = (0..self.arcs.len())
            .map(|a| {
                let (u, v) = self.arcs[a];
                (u, v, arc_cost(a) + tie_weight * tie(a))
            })
            .collect();
        let entering = min_out_arborescence(self.n, d, &fwd).ok_or_else(|| {
            format!("pack: rank {d} has no chain of GPU-free routes to some rank")
        })?;
        Ok(self.column(g, d, |v| {
            let a = entering[v];
            (a, self.arcs[a].0, arc_cost(a), tie(a))
        }))
    }
}

/// Solve the packing LP on `topo`. Err when some rank cannot reach an
/// owner over GPU-free routes, a routed link has no capacity, or the
/// solver fails.
pub fn solve(topo: &Topology, time_limit_s: f64, seed: u32) -> Result<Packing, String> {
    solve_with(Net::new(topo)?, time_limit_s, seed)
}

/// The same LP over *layered* trees only: every edge leads to a rank
/// strictly fewer GPU-free hops from the owner, so a tree is at most as
/// deep as the fabric's hop diameter. A restriction (its optimum may lie
/// above the full LP's, and its certificate bounds layered trees only),
/// whose shallow trees fill MSCCL's per-tile pipeline sooner.
pub fn solve_layered(topo: &Topology, time_limit_s: f64, seed: u32) -> Result<Packing, String> {
    let mut net = Net::new(topo)?;
    net.hops = Some(net.hop_counts());
    solve_with(net, time_limit_s, seed)
}

/// The allreduce's LP: every owner's reduction in-trees and broadcast
/// out-trees packed together on the links (an out-tree carries one unit
/// of the owner's reduced shard over each of its edges), so that where
/// one half's trees leave a link free the other's may take it. Column
/// group d < n of the packing is owner d's in-trees, group n + d its
/// out-trees (`parent[v]`: the rank v receives from). Its optimum is the
/// best any allreduce of reduction trees and broadcast trees over rscc's
/// routes can reach at large sizes with both halves' traffic on the links
/// at once, as a pipelined composition has it; its certificate bounds
/// every such packing.
pub fn solve_allreduce(topo: &Topology, time_limit_s: f64, seed: u32) -> Result<Packing, String> {
    let mut net = Net::new(topo)?;
    net.joint = true;
    solve_with(net, time_limit_s, seed)
}

fn solve_with(net: Net, time_limit_s: f64, seed: u32) -> Result<Packing, String> {
    let start = Instant::now();
    // First trees, by multiplicative weights: each owner's cheapest tree
    // when a link costs exp(κ · its load / the busiest load) per unit of
    // capacity, the load being that of every tree chosen so far. A few
    // dozen passes give the master a pool near the optimum, where pricing
    // from one tree per owner creeps (120 rounds and 29 s on a 24-GPU
    // three-host mesh).
    let mut cols = Vec::new();
    let mut seen: FxHashSet<(usize, Vec<usize>)> = FxHashSet::default();
    let mut load = vec![0.0; net.cap.len()];
    let tie = 1e-6 / net.cap.iter().fold(0.0, |a: f64, &b| a.max(b));
    // The best certificate seen, and its prices: every round's duals,
    // their running mean and the last multiplicative weights are tried
    // (any prices certify; degenerate duals often put everything on one
    // link, which certifies little, while the mean and the weights spread
    // it).
    let mut best = (0.0f64, vec![0.0; net.cap.len()]);
    let consider = |pi: &[f64], best: &mut (f64, Vec<f64>)| {
        let c = certificate(&net, pi);
        if c > best.0 {
            *best = (c, pi.to_vec());
        }
    };
    let mut warm_price = Vec::new();
    for _ in 0..WARM_PASSES {
        let most = load
            .iter()
            .zip(&net.cap)
            .map(|(l, c)| l / c)
            .fold(0.0, f64::max);
        let price: Vec<f64> = load
            .iter()
            .zip(&net.cap)
            .map(|(l, c)| (WARM_KAPPA * if most > 0.0 { l / c / most } else { 0.0 }).exp() / c)
            .collect();
        warm_price.clone_from(&price);
        for d in 0..net.groups() {
            let (c, _) = net.cheapest(d, &price, tie)?;
            for &(r, l) in &c.load {
                load[r] += l;
            }
            if seen.insert((d, c.parent.clone())) {
                cols.push(c);
            }
        }
    }
    consider(&warm_price, &mut best);
    let mut mean = vec![0.0; net.cap.len()];
    let mut rounds = 0;
    let mut history = Vec::new();
    loop {
        // Pricing runs on the pure LP (min t): the tie-break's weights
        // would tilt the duals, and with them the certificate.
        let (weights, pi, mu) = master(&net, &cols, 0.0, time_limit_s, seed)?;
        rounds += 1;
        let mut added = false;
        // Stop once the prices certify the master to within GAP: the
        // last rounds of column generation creep.
        let u = utilisation(&net, &cols, &weights);
        consider(&pi, &mut best);
        let scale: f64 = pi
            .iter()
            .zip(&net.cap)
            .map(|(p, c)| p * c)
            .sum::<f64>()
            .max(1e-300);
        for (m, p) in mean.iter_mut().zip(&pi) {
            *m += (p / scale - *m) / rounds as f64;
        }
        consider(&mean, &mut best);
        let close = u <= best.0 * (1.0 + GAP);
        // ... or once the master has not moved for STALL rounds: with a
        // good first pool it is optimal early while degenerate duals keep
        // the certificate creeping up for dozens of rounds.
        history.push(u);
        let stalled =
            history.len() > STALL && history[history.len() - 1 - STALL] <= u * (1.0 + 1e-6);
        if !close && !stalled && rounds < MAX_ROUNDS && start.elapsed().as_secs_f64() < time_limit_s
        {
            for (d, &m) in mu.iter().enumerate() {
                // The tie-break only orders trees of equal price.
                let (c, cost) = net.cheapest(d, &pi, 1e-9)?;
                let reduced = cost - m;
                if reduced < -1e-9 - 1e-7 * m.abs() && seen.insert((d, c.parent.clone())) {
                    cols.push(c);
                    added = true;
                }
            }
        }
        if !added {
            // Among the optimal packings of the pool, the tie-break's.
            let tied = master(&net, &cols, TIE, time_limit_s, seed)
                .map(|m| m.0)
                .unwrap_or(weights);
            return Ok(Packing {
                rounds,
                ..finish(&net, &cols, &tied, &best.1)
            });
        }
    }
}

/// The master's answer: per column its weight, per link row its price π,
/// per owner its dual μ.
type Master = (Vec<f64>, Vec<f64>, Vec<f64>);

/// Solve the master over `cols`, with the tie-break at weight `tie`.
fn master(
    net: &Net,
    cols: &[Column],
    tie: f64,
    time_limit_s: f64,
    seed: u32,
) -> Result<Master, String> {
    // Capacities in units of the widest link, so that t and the duals are
    // of order one, well above the solver's tolerances.
    let unit = net.cap.iter().copied().fold(0.0, f64::max);
    let mut vars = ProblemVariables::new();
    let t = vars.add(variable().min(0.0));
    let w: Vec<_> = cols.iter().map(|_| vars.add(variable().min(0.0))).collect();
    let mut objective = Expression::from(t);
    let mut sums = vec![Expression::from(0.0); net.groups()];
    let mut loads = vec![Expression::from(0.0); net.cap.len()];
    for (c, &x) in cols.iter().zip(&w) {
        objective += x * (tie * c.tie);
        sums[c.owner] += x;
        for &(r, l) in &c.load {
            loads[r] += x * l;
        }
    }
    let mut model =
        super::super::highs_options(vars.minimise(objective).using(highs), time_limit_s, seed);
    let owner_rows: Vec<_> = sums
        .into_iter()
        .map(|s| model.add_constraint(constraint!(s == 1.0)))
        .collect();
    let link_rows: Vec<_> = loads
        .into_iter()
        .zip(&net.cap)
        .map(|(l, &c)| model.add_constraint(constraint!(l <= t * (c / unit))))
        .collect();
    let mut sol = model
        .solve()
        .map_err(|e| format!("the packing LP failed: {e}"))?;
    let weights = w.iter().map(|&x| sol.value(x).max(0.0)).collect();
    let duals = sol.compute_dual();
    let pi = link_rows
        .into_iter()
        .map(|r| (-duals.dual(r)).max(0.0))
        .collect();
    let mu = owner_rows.into_iter().map(|r| duals.dual(r)).collect();
    Ok((weights, pi, mu))
}

/// The max link utilisation per unit of shard of the master's weights.
fn utilisation(net: &Net, cols: &[Column], weights: &[f64]) -> f64 {
    let mut load = vec![0.0; net.cap.len()];
    let mut total = vec![0.0; net.groups()];
    for (c, &w) in cols.iter().zip(weights) {
        total[c.owner] += w;
    }
    for (c, &w) in cols.iter().zip(weights) {
        for &(r, l) in &c.load {
            load[r] += w / total[c.owner].max(1e-12) * l;
        }
    }
    load.iter()
        .zip(&net.cap)
        .map(|(l, c)| l / c)
        .fold(0.0, f64::max)
}

/// The lower bound prices π certify by weak duality, scaled so that
/// Σ π c = 1: Σ_d min_T cost_π(T) (0 when every price is 0).
fn certificate(net: &Net, pi: &[f64]) -> f64 {
    let scale: f64 = pi.iter().zip(&net.cap).map(|(p, c)| p * c).sum();
    if scale <= 0.0 {
        return 0.0;
    }
    let p: Vec<f64> = pi.iter().map(|x| x / scale).collect();
    (0..net.groups())
        .map(|d| net.cheapest(d, &p, 0.0).map(|x| x.1).unwrap_or(0.0))
        .sum()
}

/// The packing of the master's weights, its utilisation, and the bound
/// the prices `pi` certify.
fn finish(net: &Net, cols: &[Column], weights: &[f64], pi: &[f64]) -> Packing {
    let n = net.n;
    let mut trees = vec![Vec::new(); net.groups()];
    let mut load = vec![0.0; net.cap.len()];
    let mut total = vec![0.0; net.groups()];
    for (c, &w) in cols.iter().zip(weights) {
        total[c.owner] += w;
    }
    for (c, &w) in cols.iter().zip(weights) {
        if w > 1e-9 {
            let w = w / total[c.owner];
            trees[c.owner].push((c.parent.clone(), w));
            for &(r, l) in &c.load {
                load[r] += w * l;
            }
        }
    }
    let t = load
        .iter()
        .zip(&net.cap)
        .map(|(l, c)| l / c)
        .fold(0.0, f64::max);
    let lower = certificate(net, pi);
    Packing {
        n,
        trees,
        t,
        lower: lower.min(t),
        rounds: 0,
        pool: cols.to_vec(),
        cap: net.cap.clone(),
    }
}

impl Packing {
    /// The largest-remainder rounding of the LP's weights to `chunks`
    /// whole chunks per owner.
    pub fn rounding(&self, chunks: usize) -> Integral {
        self.integral_from(chunks, &self.rounded(chunks))
    }

    /// A packing in which every owner sends `chunks` whole chunks, each
    /// along one tree of the pool, found by local search from the
    /// rounding: while it helps, move one chunk of some owner from a tree
    /// crossing the busiest link to another of its trees, the move that
    /// lowers (max utilisation, Σ utilisation²) most. None when no move
    /// improves on the rounding. Deterministic.
    pub fn integral(&self, chunks: usize) -> Option<Integral> {
        let mut y = self.rounded(chunks);
        let util = |load: &[f64]| -> (f64, f64) {
            load.iter()
                .zip(&self.cap)
                .fold((0.0, 0.0), |(m, q), (l, c)| {
                    let u = l / c;
                    (f64::max(m, u), q + u * u)
                })
        };
        let mut load = vec![0.0; self.cap.len()];
        for (c, &k) in self.pool.iter().zip(&y) {
            for &(r, l) in &c.load {
                load[r] += l * k as f64;
            }
        }
        let by_owner: Vec<Vec<usize>> = (0..self.trees.len())
            .map(|d| {
                (0..self.pool.len())
                    .filter(|&k| self.pool[k].owner == d)
                    .collect()
            })
            .collect();
        let mut moved = false;
        for _ in 0..LOCAL_MOVES {
            let now = util(&load);
            let hot = (0..load.len())
                .max_by(|&a, &b| {
                    (load[a] / self.cap[a])
                        .total_cmp(&(load[b] / self.cap[b]))
                        .then(b.cmp(&a))
                })
                .expect("a link");
            let on_hot = |k: usize| self.pool[k].load.iter().any(|&(r, _)| r == hot);
            let mut best: Option<((f64, f64), usize, usize)> = None;
            for cols in &by_owner {
                for &i in cols.iter().filter(|&&i| y[i] > 0 && on_hot(i)) {
                    for &j in cols.iter().filter(|&&j| j != i) {
                        let mut trial = load.clone();
                        for &(r, l) in &self.pool[i].load {
                            trial[r] -= l;
                        }
                        for &(r, l) in &self.pool[j].load {
                            trial[r] += l;
                        }
                        let v = util(&trial);
                        let better = |a: (f64, f64), b: (f64, f64)| {
                            a.0 < b.0 * (1.0 - 1e-12)
                                || (a.0 <= b.0 * (1.0 + 1e-12) && a.1 < b.1 * (1.0 - 1e-12))
                        };
                        if better(v, now) && best.as_ref().is_none_or(|b| better(v, b.0)) {
                            best = Some((v, i, j));
                        }
                    }
                }
            }
            let Some((_, i, j)) = best else { break };
            y[i] -= 1;
            y[j] += 1;
            for &(r, l) in &self.pool[i].load {
                load[r] -= l;
            }
            for &(r, l) in &self.pool[j].load {
                load[r] += l;
            }
            moved = true;
        }
        moved.then(|| self.integral_from(chunks, &y))
    }

    /// Per pool column: chunks by largest remainder of the LP weights.
    fn rounded(&self, chunks: usize) -> Vec<usize> {
        let mut y = vec![0; self.pool.len()];
        for d in 0..self.trees.len() {
            let cols: Vec<usize> = (0..self.pool.len())
                .filter(|&k| self.pool[k].owner == d)
                .collect();
            let w: Vec<f64> = cols
                .iter()
                .map(|&k| {
                    self.trees[d]
                        .iter()
                        .find(|t| t.0 == self.pool[k].parent)
                        .map_or(0.0, |t| t.1)
                })
                .collect();
            for (&k, c) in cols.iter().zip(super::super::mix::round(&w, chunks)) {
                y[k] = c;
            }
        }
        y
    }

    fn integral_from(&self, chunks: usize, y: &[usize]) -> Integral {
        let mut trees = vec![Vec::new(); self.trees.len()];
        let mut load = vec![0.0; self.cap.len()];
        for (c, &k) in self.pool.iter().zip(y) {
            if k > 0 {
                trees[c.owner].push((c.parent.clone(), k));
                for &(r, l) in &c.load {
                    load[r] += l * k as f64;
                }
            }
        }
        let u = load
            .iter()
            .zip(&self.cap)
            .map(|(l, c)| l / c / chunks as f64)
            .fold(0.0, f64::max);
        Integral { chunks, trees, u }
    }
}
