//! Lower bounds on the time of a collective on a topology
//! (synthesis.md §5): the exact bandwidth (cut) bound x*, the α-aware bound
//! for small sizes, and the SCCL-style step bound.
//!
//! x* = max over cuts S (with at least one GPU inside and one outside) of
//! |S ∩ GPUs| / B⁺(S) for allgather, and the same on the reversed graph
//! (capacity *entering* S) for reduce-scatter. It is computed exactly with
//! rational arithmetic by Dinkelbach (Newton) iteration on the cut ratio,
//! each step an exact max-flow / min-cut on rational capacities.

mod flow;
pub mod report;

use crate::ir::{Collective, NodeKind, Topology};
use num_bigint::BigInt;
use num_rational::BigRational;
use num_traits::{One, Signed, ToPrimitive, Zero};
use petgraph::graph::NodeIndex;
use petgraph::visit::EdgeRef;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;

/// Why a bound could not be computed.
#[derive(Debug, Clone, PartialEq)]
pub enum BoundError {
    /// The topology has fewer than two ranks.
    TooFewRanks(usize),
    /// The collective has no bound here (e.g. allreduce).
    Unsupported(Collective),
    /// Data cannot get from one rank to another at all.
    Unreachable { from: String, to: String },
    /// A link capacity is not a finite positive number.
    BadCapacity { from: String, to: String, gbps: f64 },
}

impl fmt::Display for BoundError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BoundError::TooFewRanks(n) => {
                write!(f, "the topology has {n} rank(s); a bound needs at least 2")
            }
            BoundError::Unsupported(c) => {
                write!(f, "no lower bound is implemented for {}", c.display())
            }
            BoundError::Unreachable { from, to } => write!(
                f,
                "no path from {from} to {to}: the collective cannot complete on this topology"
            ),
            BoundError::BadCapacity { from, to, gbps } => write!(
                f,
                "link {from} -> {to} has capacity {gbps} GB/s; it must be finite and positive"
            ),
        }
    }
}

impl std::error::Error for BoundError {}

/// The cut that attains x*.
#[derive(Debug, Clone, PartialEq)]
pub struct BindingCut {
    /// Node ids of S (for reduce-scatter: the side the data must *enter*;
    /// for allgather: the side it must *leave*).
    pub inside: Vec<String>,
    /// Node ids of V ∖ S.
    pub outside: Vec<String>,
    /// |S ∩ GPUs|.
    pub gpus_inside: usize,
    /// Capacity crossing the cut in the binding direction, GB/s, exact.
    pub capacity_gbps: BigRational,
}

/// The exact bandwidth bound of a collective on a topology.
#[derive(Debug, Clone, PartialEq)]
pub struct BandwidthBound {
    pub coll: Collective,
    pub ranks: usize,
    /// x* in seconds·GB/s per byte-of-shard units: T* = (M/N)·x* with M in
    /// GB and T in s; |S ∩ GPUs| / (GB/s).
    pub x_star: BigRational,
    /// algbw limit N / x*, GB/s.
    pub algbw_limit_gbps: f64,
    pub binding_cut: BindingCut,
}

impl BandwidthBound {
    /// x* as a reduced fraction "p/q" (or "p" when q = 1).
    pub fn x_star_string(&self) -> String {
        ratio_string(&self.x_star)
    }
    pub fn x_star_f64(&self) -> f64 {
        ratio_f64(&self.x_star)
    }
}

/// "p/q", or "p" for integers.
pub fn ratio_string(r: &BigRational) -> String {
    if r.denom().is_one() {
        r.numer().to_string()
    } else {
        format!("{}/{}", r.numer(), r.denom())
    }
}

/// Nearest f64 of a rational.
pub fn ratio_f64(r: &BigRational) -> f64 {
    r.to_f64().unwrap_or(f64::NAN)
}

/// The rational a user meant by `x`: the simplest fraction within a relative
/// 1e-12 of the f64 (so 12.5 → 25/2, 1000/23 as f64 → 1000/23, 0.3 → 3/10).
/// `None` for non-finite or non-positive values.
pub fn f64_to_rational(x: f64) -> Option<BigRational> {
    if !x.is_finite() || x <= 0.0 {
        return None;
    }
    let exact = BigRational::from_float(x)?;
    let tol = &exact * BigRational::new(BigInt::one(), BigInt::from(1_000_000_000_000i64));
    // Continued-fraction convergents of the exact value.
    let (mut p0, mut q0) = (BigInt::zero(), BigInt::one());
    let (mut p1, mut q1) = (BigInt::one(), BigInt::zero());
    let mut rest = exact.clone();
    for _ in 0..64 {
        let a = rest.floor();
        let ai = a.to_integer();
        let p2 = &ai * &p1 + &p0;
        let q2 = &ai * &q1 + &q0;
        let conv = BigRational::new(p2.clone(), q2.clone());
        if (&conv - &exact).abs() <= tol {
            return Some(conv);
        }
        let frac = &rest - &a;
        if frac.is_zero() {
            return Some(conv);
        }
        rest = frac.recip();
        p0 = std::mem::replace(&mut p1, p2);
        q0 = std::mem::replace(&mut q1, q2);
    }
    Some(exact)
}

/// The allreduce bound of a partition of the GPUs into k groups (`group`
/// of a GPU; a GPU of no group is a group of its own): every element is
/// transferred between groups at least 2(k − 1) times (one-way gossip
/// among k groups needs 2k − 2 calls; a reduction only compresses what a
/// call carries). Each such transfer starts in its group and ends in
/// another, so it leaves every region of the graph that holds its group's
/// GPUs and no other GPU, and enters such a region of the receiving
/// group. With E_g the least egress capacity of a region around group g
/// (a minimum cut between g's GPUs and all other GPUs over the routed
/// links) and I_g the least ingress, T ≥ 2(k−1)·S / Σ E_g and T ≥
/// 2(k−1)·S / Σ I_g, so x* = 2N(k−1) / min(Σ E_g, Σ I_g) (0 with fewer
/// than two groups). The cut matters where a GPU's own links are wider
/// than what lies behind them: a PCIe switch per GPU with a narrower
/// uplink bounds the GPU's traffic by the uplink.
fn gossip_bound<G: Eq + std::hash::Hash + Clone>(
    topo: &Topology,
    net: &RoutedNet,
    group: impl Fn(NodeIndex) -> Option<G>,
) -> Result<BigRational, BoundError> {
    let mut members: std::collections::HashMap<Option<G>, Vec<usize>> = Default::default();
    let mut singletons: Vec<Vec<usize>> = Vec::new();
    for &r in &topo.ranks {
        match group(r) {
            Some(k) => members.entry(Some(k)).or_default().push(r.index()),
            None => singletons.push(vec![r.index()]),
        }
    }
    let groups: Vec<Vec<usize>> = members.into_values().chain(singletons).collect();
    if groups.len() < 2 {
        return Ok(BigRational::zero());
    }
    let RoutedNet {
        n,
        edges,
        reversed,
        sc,
    } = net;
    let (mut egress, mut ingress) = (BigRational::zero(), BigRational::zero());
    for (i, own) in groups.iter().enumerate() {
        let others: Vec<usize> = groups
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != i)
            .flat_map(|(_, m)| m.iter().copied())
            .collect();
        egress += flow::min_cut_between(*n, edges, sc, own, &others);
        ingress += flow::min_cut_between(*n, reversed, sc, own, &others);
    }
    let through = egress.min(ingress);
    if through.is_zero() {
        return Ok(BigRational::zero());
    }
    let n = topo.num_ranks();
    Ok(BigRational::from_integer(BigInt::from(2 * n * (groups.len() - 1))) / through)
}

/// The routed links with their exact capacities, both ways, scaled to
/// integers: what every partition of [`gossip_bound`] cuts (the routes are
/// computed once for all of them).
struct RoutedNet {
    n: usize,
    edges: Vec<(usize, usize, BigRational)>,
    reversed: Vec<(usize, usize, BigRational)>,
    sc: flow::Scaled,
}

impl RoutedNet {
    fn new(topo: &Topology, routed: &[bool]) -> Result<RoutedNet, BoundError> {
        let g = &topo.graph;
        let mut edges = Vec::new();
        for e in g.edge_references() {
            let (a, b) = (e.source().index(), e.target().index());
            if routed[e.id().index()] && a != b {
                edges.push((a, b, link_capacity(topo, e)?));
            }
        }
        let reversed = edges.iter().map(|(a, b, c)| (*b, *a, c.clone())).collect();
        let sc = flow::scale(&edges);
        Ok(RoutedNet {
            n: g.node_count(),
            edges,
            reversed,
            sc,
        })
    }
}

/// A link bundle's capacity, exact: rate × count (an error unless finite
/// and positive).
fn link_capacity(
    topo: &Topology,
    e: petgraph::graph::EdgeReference<'_, crate::ir::Link>,
) -> Result<BigRational, BoundError> {
    let g = &topo.graph;
    let l = e.weight();
    f64_to_rational(l.bw_gbps)
        .filter(|_| l.count > 0)
        .map(|r| r * BigRational::from_integer(BigInt::from(l.count)))
        .ok_or_else(|| BoundError::BadCapacity {
            from: g[e.source()].id.clone(),
            to: g[e.target()].id.clone(),
            gbps: l.capacity_gbps(),
        })
}

/// Node ids, capacities (exact) and GPU flags of the graph the cut bound
/// is taken on (reversed for reduce-scatter): the links some rank-to-rank
/// route crosses ([`Topology::routed_links`]), since no transfer can use
/// the others.
struct CutGraph {
    n: usize,
    /// (from, to, capacity) in the orientation the bound uses.
    edges: Vec<(usize, usize, BigRational)>,
    gpus: Vec<usize>,
}

fn cut_graph(topo: &Topology, coll: Collective, routed: &[bool]) -> Result<CutGraph, BoundError> {
    let reverse = match coll {
        Collective::ReduceScatter => true,
        Collective::AllGather => false,
        // Bounded through its halves' cut graphs (`bandwidth_bound`).
        Collective::AllReduce => return Err(BoundError::Unsupported(coll)),
    };
    let g = &topo.graph;
    let n = g.node_count();
    let mut edges = Vec::with_capacity(g.edge_count());
    for e in g.edge_references() {
        if !routed[e.id().index()] {
            continue;
        }
        let (a, b) = (e.source().index(), e.target().index());
        let cap = link_capacity(topo, e)?;
        if a == b {
            continue;
        }
        edges.push(if reverse { (b, a, cap) } else { (a, b, cap) });
    }
    let mut gpus = Vec::new();
    for &r in &topo.ranks {
        gpus.push(r.index());
    }
    Ok(CutGraph { n, edges, gpus })
}

/// The exact bandwidth lower bound x* of `coll` on `topo` (synthesis.md §5.1).
/// Reduce-scatter is bounded on the reversed graph. Switches, NICs and CPUs
/// are non-compute vertices.
///
/// Allreduce: the largest of several valid bounds. Its outputs contain a
/// reduce-scatter's and need every rank's data everywhere, so both halves'
/// x* bound it; and for any partition of the GPUs into k groups every
/// element must cross between groups at least 2(k − 1) times (one-way
/// gossip among k parties needs 2k − 2 calls), each over a routed link
/// leaving its group (`gossip_bound`): taken for every GPU alone, every
/// host, and the two sides of each half's binding cut. On regular
/// machines (a switch, DGX-1, rings, hosts on rails) that is the sum of
/// the two halves' x*, what reduce-scatter then allgather takes; where
/// the halves bind different cuts it can be less, and a schedule that
/// overlaps them can beat the sum. The binding cut reported is the
/// reduce-scatter's.
pub fn bandwidth_bound(topo: &Topology, coll: Collective) -> Result<BandwidthBound, BoundError> {
    bandwidth_bound_routed(topo, coll, &topo.routed_links())
}

/// [`bandwidth_bound`] over `routed` ([`Topology::routed_links`]), for a
/// caller that has them.
pub fn bandwidth_bound_routed(
    topo: &Topology,
    coll: Collective,
    routed: &[bool],
) -> Result<BandwidthBound, BoundError> {
    let nr = topo.num_ranks();
    if nr < 2 {
        return Err(BoundError::TooFewRanks(nr));
    }
    if coll == Collective::AllReduce {
        let rs = bandwidth_bound_routed(topo, Collective::ReduceScatter, routed)?;
        let ag = bandwidth_bound_routed(topo, Collective::AllGather, routed)?;
        // Groups: every GPU alone, and (on several hosts) every host.
        let mut x_star = rs.x_star.clone().max(ag.x_star.clone());
        let by_gpu = |v: NodeIndex| Some(v.index());
        let net = RoutedNet::new(topo, routed)?;
        x_star = x_star.max(gossip_bound(topo, &net, by_gpu)?);
        if topo.num_hosts() > 1 {
            let by_host = |v: NodeIndex| topo.graph[v].host.as_ref().map(|h| h.to_string());
            x_star = x_star.max(gossip_bound(topo, &net, by_host)?);
        }
        // The two sides of each half's binding cut: every element crosses
        // it both ways.
        for cut in [&rs.binding_cut, &ag.binding_cut] {
            let inside: std::collections::HashSet<&str> =
                cut.inside.iter().map(|s| s.as_str()).collect();
            let side = |v: NodeIndex| Some(inside.contains(topo.graph[v].id.as_str()));
            x_star = x_star.max(gossip_bound(topo, &net, side)?);
        }
        return Ok(BandwidthBound {
            coll,
            ranks: nr,
            algbw_limit_gbps: nr as f64 / ratio_f64(&x_star),
            x_star,
            binding_cut: rs.binding_cut,
        });
    }
    let cg = cut_graph(topo, coll, routed)?;
    // Start from the best per-GPU cut S = V ∖ {v}: (N − 1) / (capacity into v
    // in the cut graph).
    let mut into = vec![BigRational::zero(); cg.n];
    for (a, b, c) in &cg.edges {
        if a != b {
            into[*b] += c;
        }
    }
    let mut best: Option<(BigRational, usize)> = None;
    let nm1 = BigRational::from_integer(BigInt::from(nr - 1));
    for &v in &cg.gpus {
        if into[v].is_zero() {
            let mut inside = vec![true; cg.n];
            inside[v] = false;
            return Err(unreachable_err(topo, &cg, &inside));
        }
        let r = &nm1 / &into[v];
        if best.as_ref().is_none_or(|(b, _)| r > *b) {
            best = Some((r, v));
        }
    }
    let (mut x, v0) = best.ok_or(BoundError::TooFewRanks(nr))?;
    let mut side = vec![true; cg.n];
    side[v0] = false;
    // Dinkelbach: x is feasible iff for every GPU v, max-flow from a source
    // with capacity 1 into every GPU, edge capacities scaled by x, reaches N.
    // A violating min cut has a strictly larger ratio; move x to it.
    let sc = flow::scale(&cg.edges);
    let mut clean = 0usize;
    let mut k = 0usize;
    let mut net = flow::Feasibility::new(cg.n, &cg.edges, &sc, &cg.gpus, &x);
    while clean < cg.gpus.len() {
        let v = cg.gpus[k % cg.gpus.len()];
        k += 1;
        let (ok, reach) = net.check(v);
        if !ok {
            let inside = reach;
            let r = cut_ratio(&cg, &inside).ok_or_else(|| unreachable_err(topo, &cg, &inside))?;
            if r <= x {
                // Cannot happen with exact arithmetic; stop rather than loop.
                break;
            }
            x = r;
            side = inside;
            clean = 0;
            net = flow::Feasibility::new(cg.n, &cg.edges, &sc, &cg.gpus, &x);
        } else {
            clean += 1;
        }
    }
    let g = &topo.graph;
    let mut inside_ids = Vec::new();
    let mut outside_ids = Vec::new();
    for ni in g.node_indices() {
        if side[ni.index()] {
            inside_ids.push(g[ni].id.clone());
        } else {
            outside_ids.push(g[ni].id.clone());
        }
    }
    let gpus_inside = cg.gpus.iter().filter(|&&v| side[v]).count();
    let capacity = cut_capacity(&cg, &side);
    let algbw = nr as f64 / ratio_f64(&x);
    Ok(BandwidthBound {
        coll,
        ranks: nr,
        x_star: x,
        algbw_limit_gbps: algbw,
        binding_cut: BindingCut {
            inside: inside_ids,
            outside: outside_ids,
            gpus_inside,
            capacity_gbps: capacity,
        },
    })
}

fn cut_capacity(cg: &CutGraph, inside: &[bool]) -> BigRational {
    let mut c = BigRational::zero();
    for (a, b, cap) in &cg.edges {
        if inside[*a] && !inside[*b] {
            c += cap;
        }
    }
    c
}

/// |S ∩ GPUs| / B⁺(S); None when GPUs are inside and nothing leaves.
fn cut_ratio(cg: &CutGraph, inside: &[bool]) -> Option<BigRational> {
    let k = cg.gpus.iter().filter(|&&v| inside[v]).count();
    let c = cut_capacity(cg, inside);
    if c.is_zero() {
        if k == 0 {
            return Some(BigRational::zero());
        }
        return None;
    }
    Some(BigRational::from_integer(BigInt::from(k)) / c)
}

fn unreachable_err(topo: &Topology, cg: &CutGraph, inside: &[bool]) -> BoundError {
    let g = &topo.graph;
    let a = cg.gpus.iter().find(|&&v| inside[v]);
    let b = cg.gpus.iter().find(|&&v| !inside[v]);
    let name = |v: Option<&usize>| {
        v.map(|&v| g[petgraph::graph::NodeIndex::new(v)].id.clone())
            .unwrap_or_else(|| "?".into())
    };
    // In the cut graph data leaves `inside`; for reduce-scatter that graph is
    // reversed, so in the topology the missing path is outside → inside.
    BoundError::Unreachable {
        from: name(a),
        to: name(b),
    }
}

/// The bandwidth-bound time T* = (S/N)·x* in µs, with S the per-rank input
/// bytes of a reduce-scatter (the full buffer; nccl-tests' size).
pub fn time_bound_us(b: &BandwidthBound, size_bytes: u64) -> f64 {
    // (S/N bytes) · x* [1/(GB/s)] = S/N/1e9 · x* s = S/N · x* / 1e3 µs.
    size_bytes as f64 / b.ranks as f64 * b.x_star_f64() / 1e3
}

/// The latency terms of the α-aware bound, computed once per topology (one
/// Dijkstra on α per rank): the least α of any route between two distinct
/// ranks, and what the per-link shard-path term needs (every rank's
/// ingress links and the α distances from every rank to their tails).
#[derive(Debug, Clone)]
pub struct LatencyTerms {
    /// min over ranks s ≠ d of α_min(s, d), µs.
    pub alpha_min_us: f64,
    ranks: usize,
    /// Per rank d: its ingress links as (tail node index, α µs, GB/s).
    inlinks: Vec<Vec<(usize, f64, f64)>>,
    /// dist[s · nodes + v]: least α of a path from rank s to node v, µs.
    dist: Vec<f64>,
    nodes: usize,
    /// The cut latency terms of one op ([`latency_terms_for`]); none from
    /// [`latency_terms`].
    cuts: Vec<CutTerm>,
}

/// One cut's latency term (docs/cost-model.md §2, "Cut latency"): `demand`
/// pieces of S/N bytes must cross the cut over `links`, each (a, c): no
/// byte crosses it before a µs (the least α of a route through it from a
/// GPU on the sending side to one on the receiving side), at most c GB/s.
/// Sorted by a.
#[derive(Debug, Clone)]
struct CutTerm {
    demand: usize,
    links: Vec<(f64, f64)>,
    /// Where every element the cut carries must bring the contributions
    /// of every GPU on the sending side (reduce-scatter into the cut,
    /// allreduce both ways): how many those are ("Aggregation latency").
    contributors: Option<usize>,
}

/// See [`LatencyTerms`].
pub fn latency_terms(topo: &Topology) -> Result<LatencyTerms, BoundError> {
    latency_terms_routed(topo, &topo.routed_links())
}

/// [`latency_terms`] over `routed` ([`Topology::routed_links`]).
fn latency_terms_routed(topo: &Topology, routed: &[bool]) -> Result<LatencyTerms, BoundError> {
    let nr = topo.num_ranks();
    if nr < 2 {
        return Err(BoundError::TooFewRanks(nr));
    }
    let g = &topo.graph;
    let nodes = g.node_count();
    let b_in: Vec<f64> = (0..nr).map(|d| topo.gpu_bandwidth(d).1).collect();
    let mut alpha_min_us = f64::INFINITY;
    let mut all = Vec::with_capacity(nr * nodes);
    for s in 0..nr {
        // Links without capacity carry nothing: they are no path (so a
        // reachable d always has a positive-capacity ingress link with a
        // finite distance to its tail, and the shard path is finite).
        let dist = dijkstra(topo, &[topo.ranks[s].index()], false, carrying_alpha);
        for (d, &dn) in topo.ranks.iter().enumerate() {
            if d == s {
                continue;
            }
            let t = dist[dn.index()];
            if !t.is_finite() || b_in[d] <= 0.0 {
                return Err(BoundError::Unreachable {
                    from: g[topo.ranks[s]].id.clone(),
                    to: g[dn].id.clone(),
                });
            }
            alpha_min_us = alpha_min_us.min(t);
        }
        all.extend_from_slice(&dist);
    }
    // Only links some route crosses carry a shard's bytes (as in the cut
    // bound).
    let inlinks = topo
        .ranks
        .iter()
        .map(|&dn| {
            g.edges_directed(dn, petgraph::Direction::Incoming)
                .filter(|e| e.weight().capacity_gbps() > 0.0 && routed[e.id().index()])
                .map(|e| {
                    (
                        e.source().index(),
                        e.weight().alpha_us.max(0.0),
                        e.weight().capacity_gbps(),
                    )
                })
                .collect()
        })
        .collect();
    Ok(LatencyTerms {
        alpha_min_us,
        ranks: nr,
        inlinks,
        dist: all,
        nodes,
        cuts: Vec::new(),
    })
}

/// [`latency_terms`] with the cut latency terms of `b`'s op
/// (docs/cost-model.md §2): over its binding cut and, on several hosts,
/// over every host and the rest of the machine. Each such cut S with GPUs
/// on both sides must be crossed by data in the op's direction — into S
/// for reduce-scatter (|S ∩ GPUs| shards), out of S for allgather (as
/// many), both ways for allreduce (every element: N shards each way) —
/// and a byte crosses a link of the cut only after the α of a whole route
/// from a GPU on the sending side, through that link, to one on the
/// receiving side: on hosts joined by NICs every inter-host byte waits
/// the NIC route's α, not the least α between two host-mates.
pub fn latency_terms_for(topo: &Topology, b: &BandwidthBound) -> Result<LatencyTerms, BoundError> {
    latency_terms_for_routed(topo, b, &topo.routed_links())
}

/// [`latency_terms_for`] over `routed` ([`Topology::routed_links`]).
pub fn latency_terms_for_routed(
    topo: &Topology,
    b: &BandwidthBound,
    routed: &[bool],
) -> Result<LatencyTerms, BoundError> {
    let mut lat = latency_terms_routed(topo, routed)?;
    let g = &topo.graph;
    let n = g.node_count();
    let nr = topo.num_ranks();
    let mut sets: Vec<Vec<bool>> = Vec::new();
    let ids: std::collections::HashMap<&str, usize> = g
        .node_indices()
        .map(|v| (g[v].id.as_str(), v.index()))
        .collect();
    let mut binding = vec![false; n];
    for id in &b.binding_cut.inside {
        if let Some(&v) = ids.get(id.as_str()) {
            binding[v] = true;
        }
    }
    sets.push(binding);
    if topo.num_hosts() > 1 {
        let mut hosts: Vec<&str> = Vec::new();
        for v in g.node_indices() {
            if let Some(h) = g[v].host.as_deref() {
                if !hosts.contains(&h) {
                    hosts.push(h);
                }
            }
        }
        for h in hosts {
            let on: Vec<bool> = g
                .node_indices()
                .map(|v| g[v].host.as_deref() == Some(h))
                .collect();
            sets.push(on.iter().map(|&x| !x).collect());
            sets.push(on);
        }
    }
    // Directions: true = into S.
    let dirs: &[bool] = match b.coll {
        Collective::ReduceScatter => &[true],
        Collective::AllGather => &[false],
        Collective::AllReduce => &[true, false],
    };
    for set in &sets {
        let k = topo.ranks.iter().filter(|r| set[r.index()]).count();
        if k == 0 || k == nr {
            continue;
        }
        let demand = if b.coll == Collective::AllReduce {
            nr
        } else {
            k
        };
        // Reductions carry contributions; an allgather's copies do not.
        let reduces = b.coll != Collective::AllGather;
        for &into in dirs {
            // The sending side: outside S for data entering it.
            let send_side = !into;
            let starts = |side: bool| -> Vec<usize> {
                topo.ranks
                    .iter()
                    .map(|r| r.index())
                    .filter(|&v| set[v] == side)
                    .collect()
            };
            let from = dijkstra(topo, &starts(send_side), false, carrying_alpha);
            let to = dijkstra(topo, &starts(!send_side), true, carrying_alpha);
            let mut links: Vec<(f64, f64)> = g
                .edge_references()
                .filter(|e| {
                    routed[e.id().index()]
                        && e.weight().capacity_gbps() > 0.0
                        && set[e.source().index()] == send_side
                        && set[e.target().index()] != send_side
                })
                .map(|e| {
                    (
                        from[e.source().index()]
                            + e.weight().alpha_us.max(0.0)
                            + to[e.target().index()],
                        e.weight().capacity_gbps(),
                    )
                })
                .filter(|l| l.0.is_finite())
                .collect();
            links.sort_by(|x, y| x.0.total_cmp(&y.0));
            if !links.is_empty() {
                let senders = if into { nr - k } else { k };
                lat.cuts.push(CutTerm {
                    demand,
                    links,
                    contributors: reduces.then_some(senders),
                });
            }
        }
    }
    Ok(lat)
}

impl LatencyTerms {
    /// The shard-path term: max over ranks s ≠ d of the earliest time by
    /// which one shard (S/N bytes) carrying s's contribution can have
    /// entered d, µs.
    ///
    /// Every element of d's shard needs a byte that carries s's
    /// contribution and enters d over one of d's ingress links e = (u, d).
    /// Such a byte belongs to a transfer whose route reaches e, and every
    /// transfer pays its whole route's α before its bytes move, so it
    /// crosses e no earlier than a_e(s) = α_min(s, u) + α_e; e carries at
    /// most c_e. The term is the least T with Σ_e c_e · (T − a_e(s))⁺ ≥ S/N.
    /// Where all of d's ingress links lie on a cheapest path from s this
    /// is α_min(s, d) + (S/N)/B_in(d); where some do not (on DGX-1 a far
    /// GPU's partial sums reach the owner over two of its four neighbours
    /// at the least α) it is larger. (synthesis.md §5.3 charges the whole
    /// shard store-and-forward on every hop, Σ_e (α_e + (S/N)/b_e); that is
    /// not a lower bound once a shard is split or pipelined — the
    /// bidirectional ring8 reduce-scatter reaches 7/50 per shard byte-time,
    /// below its 4 hops · 2/50 — so rscc uses this form.)
    pub fn shard_path_us(&self, size_bytes: u64) -> f64 {
        let nr = self.ranks;
        // Bytes to enter, in GB/s · µs (1 GB/s moves 1e3 bytes per µs).
        let need = size_bytes as f64 / nr as f64 / 1e3;
        let mut worst = 0.0f64;
        let mut arr: Vec<(f64, f64)> = Vec::new();
        for (d, links) in self.inlinks.iter().enumerate() {
            for s in 0..nr {
                if s == d {
                    continue;
                }
                let ds = &self.dist[s * self.nodes..(s + 1) * self.nodes];
                arr.clear();
                arr.extend(
                    links
                        .iter()
                        .filter(|&&(u, _, _)| ds[u].is_finite())
                        .map(|&(u, a, c)| (ds[u] + a, c)),
                );
                worst = worst.max(fill_time(&mut arr, need));
            }
        }
        worst
    }

    /// The α-aware lower bound (docs/cost-model.md §2):
    /// max(α_min + T_bw, shard path, cut latency). No byte crosses any link before the
    /// α of the route that carries it has elapsed (the cost model charges a
    /// message's α before its bytes move), so the T_bw bytes that must cross
    /// the binding cut move only after α_min.
    pub fn bound_us(&self, b: &BandwidthBound, size_bytes: u64) -> f64 {
        (self.alpha_min_us + time_bound_us(b, size_bytes))
            .max(self.shard_path_us(size_bytes))
            .max(self.cut_latency_us(size_bytes))
    }

    /// The cut latency term: the largest over the cuts of
    /// [`latency_terms_for`] of the least T by which their demand can have
    /// crossed them, with the sending side's contributions combined where
    /// the op reduces (docs/cost-model.md §2, "Aggregation latency"), µs (0
    /// without cuts).
    pub fn cut_latency_us(&self, size_bytes: u64) -> f64 {
        let piece = size_bytes as f64 / self.ranks as f64 / 1e3;
        self.cuts
            .iter()
            .map(|c| {
                let need = piece * c.demand as f64;
                let plain = fill_sorted(&c.links, need);
                match c.contributors {
                    Some(m) if m >= 2 && self.alpha_min_us > 0.0 => {
                        plain.max(aggregation_us(&c.links, need, m, self.alpha_min_us))
                    }
                    _ => plain,
                }
            })
            .fold(0.0, f64::max)
    }
}

/// The aggregation latency of a cut (docs/cost-model.md §2): `need`
/// (GB/s · µs) of elements must cross `links` (sorted (a, c), as in
/// [`fill_sorted`]), each element bringing the contributions of `m` ≥ 2
/// GPUs on the sending side, and combining two of them takes a transfer
/// between two GPUs, at least `alpha` µs, before the combined value can
/// leave. A fraction y of the elements may cross as m values of one
/// contribution each; the rest needs a combined value, which crosses a
/// link no sooner than `alpha` after its a. So T is at least
/// `max(fill(need · (1 + (m − 1) · y)), alpha + fill(need · (1 − y)))`
/// for some y below 1, or `fill(need · m)` with y = 1. Returns the least
/// such T, µs: the first term grows with y and the second falls, so it is
/// where they meet (bisection), or y = 1's.
fn aggregation_us(links: &[(f64, f64)], need: f64, m: usize, alpha: f64) -> f64 {
    let spread = (m - 1) as f64;
    let sent = |y: f64| fill_sorted(links, need * (1.0 + spread * y));
    let combined = |y: f64| alpha + fill_sorted(links, need * (1.0 - y));
    let all_single = sent(1.0);
    if sent(0.0) >= combined(0.0) {
        return sent(0.0);
    }
    // sent(lo) < combined(lo); sent(hi) ≥ combined(hi) or hi = 1.
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..64 {
        let mid = 0.5 * (lo + hi);
        if sent(mid) < combined(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    // At the meeting point y* both terms are at least sent(lo) and
    // combined(hi) (sent rises, combined falls): a bound from below.
    sent(lo).max(combined(hi)).min(all_single)
}

/// The least T with Σ c · (T − a)⁺ ≥ need over `arr` = [(a, c)], c > 0
/// (infinity when `arr` is empty).
fn fill_time(arr: &mut [(f64, f64)], need: f64) -> f64 {
    arr.sort_by(|x, y| x.0.total_cmp(&y.0));
    fill_sorted(arr, need)
}

/// [`fill_time`] over `arr` already sorted by a.
fn fill_sorted(arr: &[(f64, f64)], need: f64) -> f64 {
    let (mut cap, mut weighted) = (0.0f64, 0.0f64);
    for (i, &(a, c)) in arr.iter().enumerate() {
        cap += c;
        weighted += c * a;
        // With links 0..=i open: Σ c (T − a) = cap·T − weighted.
        let t = (need + weighted) / cap;
        if i + 1 == arr.len() || t <= arr[i + 1].0 {
            return t;
        }
    }
    f64::INFINITY
}

/// synthesis.md §5.3's α-aware figure as written: max over ranks s ≠ d of
/// the cheapest path s → d when every link on it costs α_e + (S/N)/b_e —
/// one whole shard stored and forwarded hop by hop, µs.
///
/// **Not a lower bound** for schedules that split or pipeline a shard: at
/// large sizes the bidirectional ring reduce-scatter on ring8 beats it
/// (docs/cost-model.md §2). It is the natural target at small sizes, where a
/// shard moves as one message per hop, and `benches/synth_goals.rs` reports
/// the ratio to it beside the ratio to the valid bound
/// ([`LatencyTerms::bound_us`]).
pub fn store_forward_shard_us(topo: &Topology, size_bytes: u64) -> Result<f64, BoundError> {
    let nr = topo.num_ranks();
    if nr < 2 {
        return Err(BoundError::TooFewRanks(nr));
    }
    let shard = size_bytes as f64 / nr as f64;
    let g = &topo.graph;
    let mut worst = 0.0f64;
    for s in 0..nr {
        let dist = dijkstra(topo, &[topo.ranks[s].index()], false, |l| {
            l.alpha_us.max(0.0) + shard / (l.capacity_gbps().max(1e-12) * 1e3)
        });
        for (d, &dn) in topo.ranks.iter().enumerate() {
            if d == s {
                continue;
            }
            let t = dist[dn.index()];
            if !t.is_finite() {
                return Err(BoundError::Unreachable {
                    from: g[topo.ranks[s]].id.clone(),
                    to: g[dn].id.clone(),
                });
            }
            worst = worst.max(t);
        }
    }
    Ok(worst)
}

/// The shard-path term of the α-aware bound ([`LatencyTerms::shard_path_us`]).
pub fn shard_path_bound_us(topo: &Topology, size_bytes: u64) -> Result<f64, BoundError> {
    Ok(latency_terms(topo)?.shard_path_us(size_bytes))
}

/// The α-aware lower bound for a message of `size_bytes` (nccl-tests' S):
/// max(α_min + T_bw, slowest best shard path), µs (docs/cost-model.md §2).
pub fn alpha_bound_us(
    topo: &Topology,
    coll: Collective,
    size_bytes: u64,
) -> Result<f64, BoundError> {
    let b = bandwidth_bound(topo, coll)?;
    alpha_bound_with(&b, topo, size_bytes)
}

/// As [`alpha_bound_us`], reusing an already computed bandwidth bound.
pub fn alpha_bound_with(
    b: &BandwidthBound,
    topo: &Topology,
    size_bytes: u64,
) -> Result<f64, BoundError> {
    Ok(latency_terms_for(topo, b)?.bound_us(b, size_bytes))
}

#[derive(PartialEq)]
struct Item(f64, usize);
impl Eq for Item {}
impl PartialOrd for Item {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Item {
    fn cmp(&self, o: &Self) -> Ordering {
        o.0.total_cmp(&self.0).then_with(|| o.1.cmp(&self.1))
    }
}

/// Least total weight `w` of a path from any of `starts` (node indices)
/// to every node, or with `reverse` from every node to the nearest of them.
fn dijkstra(
    topo: &Topology,
    starts: &[usize],
    reverse: bool,
    w: impl Fn(&crate::ir::Link) -> f64,
) -> Vec<f64> {
    let g = &topo.graph;
    let mut dist = vec![f64::INFINITY; g.node_count()];
    let mut heap = BinaryHeap::new();
    for &s in starts {
        dist[s] = 0.0;
        heap.push(Item(0.0, s));
    }
    let dir = if reverse {
        petgraph::Direction::Incoming
    } else {
        petgraph::Direction::Outgoing
    };
    while let Some(Item(d, u)) = heap.pop() {
        if d > dist[u] {
            continue;
        }
        for e in g.edges_directed(NodeIndex::new(u), dir) {
            let v = if reverse { e.source() } else { e.target() }.index();
            let nd = d + w(e.weight());
            if nd < dist[v] {
                dist[v] = nd;
                heap.push(Item(nd, v));
            }
        }
    }
    dist
}

/// A link's α as a path weight, where links without capacity carry
/// nothing and are no path.
fn carrying_alpha(l: &crate::ir::Link) -> f64 {
    if l.capacity_gbps() > 0.0 {
        l.alpha_us.max(0.0)
    } else {
        f64::INFINITY
    }
}

/// SCCL-style step lower bound: the largest number of GPU-to-GPU hops any
/// shard must travel (a hop may pass through switches and NICs, which do not
/// count). Every schedule needs at least this many communication steps.
pub fn min_steps(topo: &Topology, coll: Collective) -> Result<usize, BoundError> {
    if coll == Collective::AllReduce {
        // A reduction to the owner, then its broadcast.
        return Ok(
            min_steps(topo, Collective::ReduceScatter)? + min_steps(topo, Collective::AllGather)?
        );
    }
    let nr = topo.num_ranks();
    if nr < 2 {
        return Err(BoundError::TooFewRanks(nr));
    }
    let adj: Vec<Vec<usize>> = (0..nr)
        .map(|r| {
            topo.direct_neighbours(r)
                .into_iter()
                .map(|(d, _)| d)
                .collect()
        })
        .collect();
    let mut worst = 0;
    for s in 0..nr {
        let mut dist = vec![usize::MAX; nr];
        dist[s] = 0;
        let mut q = VecDeque::from([s]);
        while let Some(u) = q.pop_front() {
            for &v in &adj[u] {
                if dist[v] == usize::MAX {
                    dist[v] = dist[u] + 1;
                    q.push_back(v);
                }
            }
        }
        for (d, &dd) in dist.iter().enumerate() {
            if dd == usize::MAX {
                let g = &topo.graph;
                return Err(BoundError::Unreachable {
                    from: g[topo.ranks[s]].id.clone(),
                    to: g[topo.ranks[d]].id.clone(),
                });
            }
            worst = worst.max(dd);
        }
    }
    Ok(worst)
}

/// True when a node only forwards (switch, NIC, CPU).
pub fn is_forwarding(kind: NodeKind) -> bool {
    kind != NodeKind::Gpu
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rational_recovery() {
        let r = |x: f64| ratio_string(&f64_to_rational(x).unwrap());
        assert_eq!(r(12.5), "25/2");
        assert_eq!(r(25.0), "25");
        assert_eq!(r(0.3), "3/10");
        assert_eq!(r(1000.0 / 23.0), "1000/23");
        assert_eq!(r(1000.0 / 105.0), "200/21");
        assert!(f64_to_rational(0.0).is_none());
        assert!(f64_to_rational(f64::NAN).is_none());
    }

    /// One link opening at 2 µs with 100 GB/s; 4 contributors, combining
    /// two takes 1 µs.
    #[test]
    fn aggregation_latency_meets_between_single_and_combined() {
        let links = [(2.0, 100.0)];
        // Large: y · 4 · need ≈ what the link carries in 1 µs: the term is
        // (m − 1)/m · α above the plain fill (2 + 100 = 102 µs).
        let t = aggregation_us(&links, 100.0 * 100.0, 4, 1.0);
        assert!((t - (102.0 + 0.75)).abs() < 1e-9, "{t}");
        // Small: four single contributions (2 + 4 · 0.01) cross before a
        // combined value could start (2 + 1).
        let t = aggregation_us(&links, 1.0, 4, 1.0);
        assert!((t - 2.04).abs() < 1e-9, "{t}");
        // In between (0.5 µs of bytes): (1 + 3y) · 0.5 = 1 + (1 − y) · 0.5
        // at y = 1/2, T = 2 + 1.25, above the plain fill (2.5) and below
        // all single (4) and all combined (3.5).
        let t = aggregation_us(&links, 50.0, 4, 1.0);
        assert!((t - 3.25).abs() < 1e-9, "{t}");
        // No faster than four single contributions where combining waits
        // longer: (1 + 3y) · 0.2 = 1 + (1 − y) · 0.2 only at y > 1.
        let t = aggregation_us(&links, 20.0, 4, 1.0);
        assert!((t - (2.0 + 4.0 * 0.2)).abs() < 1e-9, "{t}");
    }
}
