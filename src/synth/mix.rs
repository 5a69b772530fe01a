//! The LP mixture: bandwidth-optimal combinations of tree families.
//!
//! Each *family* is a complete reduce-scatter with one chunk per shard (a
//! single ring, the direct schedule, the hierarchical schedule with m
//! host-mates abroad, …). Routing a shard through family i puts a known
//! load on every link (its transfers' routes). The LP (good_lp + HiGHS)
//! chooses the fraction y_i of every shard that goes through each family so
//! that the most loaded link, relative to its capacity, is as light as
//! possible:
//!
//!   minimise t (+ 10⁻⁶ · Σ_i y_i · solo_i, a tie-break towards families
//!   that are good alone)  subject to  Σ_i y_i · load_i(e) ≤ t · cap(e)  for every link e,
//!                           Σ_i y_i = 1,  y ≥ 0.
//!
//! t · (S / N) is then the mixture's bandwidth time for a message of S bytes
//! (the cost model's large-message limit), to be compared with the cut bound
//! x*·(S/N). The fractions are rounded to C chunks per shard (largest
//! remainder); chunk j of every shard follows the family it is assigned to.

use super::{direct, hier, ring, Candidate, Context, Offer, SynthError, Synthesizer};
use crate::ir::{Algorithm, Spec, Topology, Transfer};
use good_lp::solvers::highs::highs;
use good_lp::{constraint, variable, Expression, ProblemVariables, Solution, SolverModel};
use std::collections::HashMap;
use std::rc::Rc;

/// The mixture synthesizer.
pub struct Mix;

/// Largest chunk count the mixture tries when rounding its fractions.
const MIX_MAX_CHUNKS: usize = 16;

/// A request's families ([`families`]) and their LP's answer, solved once
/// (the flow synthesizer compares its own optimum with it).
pub struct MixLp {
    pub families: Vec<Algorithm>,
    /// Each family's [`link_loads`] (empty where it has a transfer
    /// without a route, which `lp` reports).
    pub loads: Vec<HashMap<usize, f64>>,
    pub lp: Result<Mixture, String>,
}

/// The request's mixture LP.
pub fn lp(ctx: &Context) -> Rc<MixLp> {
    ctx.shared(|c| {
        let families = families(c);
        let trees = c.topo.route_trees();
        let loads: Result<Vec<_>, String> = families
            .iter()
            .map(|f| loads_with(c.topo, f, &trees))
            .collect();
        let (loads, lp) = match loads {
            Ok(l) => {
                let lp = solve(c.topo, &l, c.opts.time_limit_s, c.opts.seed);
                (l, lp)
            }
            Err(e) => (vec![HashMap::new(); families.len()], Err(e)),
        };
        MixLp {
            families,
            loads,
            lp,
        }
    })
}

impl Synthesizer for Mix {
    fn name(&self) -> &'static str {
        "mix"
    }
    fn summary(&self) -> &'static str {
        "LP mixture of tree families (bandwidth-optimal within them)"
    }
    fn offer(&self, ctx: &Context) -> Result<Offer, SynthError> {
        let shared = lp(ctx);
        let m = shared
            .lp
            .as_ref()
            .map_err(|e| SynthError::failed("mix", e.clone()))?;
        let chunks = match ctx.opts.chunks {
            Some(c) => c,
            None => best_chunk_count(ctx.topo, &shared.loads, m),
        };
        let counts = round(&m.weights, chunks);
        // Chunks of a family move together; if that is rejected (a ring
        // family's multi-chunk steps deadlock once split), each chunk on
        // its own channels.
        Ok(Offer::new(
            [false, true]
                .into_iter()
                .map(|spread| {
                    let (shared, counts) = (shared.clone(), counts.clone());
                    Box::new(move || combine(&shared.families, &counts, "mix", spread)) as Candidate
                })
                .collect(),
        ))
    }
}

/// The tree families the mixture LP combines, one chunk per shard each:
/// every single ring, the direct schedule (when it applies), and where
/// `hier` has groups (several hosts, or one host's sockets, PCIe switches
/// or hives: [`hier::groups`]) the hierarchical schedule with 0 … g−1
/// group-mates abroad.
pub fn families(ctx: &Context) -> Vec<Algorithm> {
    let topo = ctx.topo;
    let spec = Spec::reduce_scatter(topo.num_ranks(), 1);
    let mut out = Vec::new();
    for r in &ring::rings(ctx).0 {
        let mut a = ring::ring_algorithm(spec, std::slice::from_ref(r));
        a.name = "ring".into();
        out.push(a);
    }
    if direct::applies(topo) {
        out.push(direct::direct_algorithm(spec));
    }
    if let Some(hs) = hier::groups(topo) {
        for m in 0..hs[0].len() {
            out.push(hier::hier_algorithm(spec, &hs, m));
        }
    }
    out
}

/// Smallest C ≤ MIX_MAX_CHUNKS whose rounding stays within 1 % of the LP
/// optimum (else the best C found).
fn best_chunk_count(topo: &Topology, loads: &[HashMap<usize, f64>], m: &Mixture) -> usize {
    let util = |counts: &[usize], c: usize| -> f64 {
        let mut per_link: HashMap<usize, f64> = HashMap::new();
        for (i, l) in loads.iter().enumerate() {
            for (&e, &v) in l {
                *per_link.entry(e).or_default() += v * counts[i] as f64 / c as f64;
            }
        }
        per_link
            .iter()
            .map(|(&e, &v)| v / topo.graph[petgraph::graph::EdgeIndex::new(e)].capacity_gbps())
            .fold(0.0, f64::max)
    };
    let mut best = (f64::INFINITY, 1);
    for c in 1..=MIX_MAX_CHUNKS {
        let counts = round(&m.weights, c);
        let u = util(&counts, c);
        if u <= m.t * 1.01 {
            return c;
        }
        if u < best.0 - 1e-12 {
            best = (u, c);
        }
    }
    best.1
}

/// The result of the LP.
#[derive(Debug, Clone)]
pub struct Mixture {
    /// Fraction of each shard per family (same order as the input).
    pub weights: Vec<f64>,
    /// Optimal max link utilisation per unit of shard: time = t·(S/N) / 1e3
    /// µs for S bytes with capacities in GB/s.
    pub t: f64,
}

/// Bytes each directed link carries per byte of shard, for one family
/// (with one chunk per shard).
pub fn link_loads(topo: &Topology, fam: &Algorithm) -> Result<HashMap<usize, f64>, String> {
    loads_with(topo, fam, &topo.route_trees())
}

/// [`link_loads`] over `trees`, every rank's route tree ([`Topology::route_trees`]),
/// which the families share: each (sender, receiver) pair is routed from
/// its sender's tree.
fn loads_with(
    topo: &Topology,
    fam: &Algorithm,
    trees: &[Vec<Option<petgraph::graph::EdgeIndex>>],
) -> Result<HashMap<usize, f64>, String> {
    let mut pairs: rustc_hash::FxHashMap<(usize, usize), usize> = Default::default();
    for t in &fam.transfers {
        *pairs.entry((t.src, t.dst)).or_default() += 1;
    }
    let mut pairs: Vec<((usize, usize), usize)> = pairs.into_iter().collect();
    pairs.sort_unstable();
    // Per link (edge index): its load, once a route crosses it.
    let mut loads: Vec<Option<f64>> = vec![None; topo.graph.edge_count()];
    let per_chunk = 1.0 / fam.spec.chunks() as f64;
    for ((src, dst), k) in pairs {
        let r = topo
            .route_from_tree(src, dst, &trees[src])
            .ok_or_else(|| format!("no route from rank {src} to rank {dst}"))?;
        for e in r.links {
            // k additions, not one product: the same sum, bit for bit,
            // as adding each transfer's share in turn.
            let l = loads[e.index()].get_or_insert(0.0);
            for _ in 0..k {
                *l += per_chunk;
            }
        }
    }
    Ok(loads
        .into_iter()
        .enumerate()
        .filter_map(|(e, l)| Some((e, l?)))
        .collect())
}

/// Solve the mixture LP over families given by their [`link_loads`] (each
/// with one chunk per shard).
pub fn solve(
    topo: &Topology,
    loads: &[HashMap<usize, f64>],
    time_limit_s: f64,
    seed: u32,
) -> Result<Mixture, String> {
    if loads.is_empty() {
        return Err("no families to mix".into());
    }
    let mut vars = ProblemVariables::new();
    let t = vars.add(variable().min(0.0));
    let ys: Vec<_> = loads
        .iter()
        .map(|_| vars.add(variable().min(0.0).max(1.0)))
        .collect();
    // Among optimal mixtures prefer families that are good on their own
    // (a tiny penalty on each family's solo utilisation): the LP has many
    // optima, and the simplest ones round to few chunks.
    let solo: Vec<f64> = loads
        .iter()
        .map(|m| {
            m.iter()
                .map(|(&e, &l)| l / topo.graph[petgraph::graph::EdgeIndex::new(e)].capacity_gbps())
                .fold(0.0, f64::max)
        })
        .collect();
    let scale = solo
        .iter()
        .copied()
        .fold(f64::INFINITY, f64::min)
        .max(1e-300);
    let mut objective = Expression::from(t);
    for (i, &y) in ys.iter().enumerate() {
        objective += y * (1e-6 * solo[i] / scale);
    }
    let mut model = super::highs_options(vars.minimise(objective).using(highs), time_limit_s, seed)
        .with(constraint!(ys.iter().copied().sum::<Expression>() == 1.0));
    let mut links: Vec<usize> = loads.iter().flat_map(|m| m.keys().copied()).collect();
    links.sort_unstable();
    links.dedup();
    for e in links {
        let cap = topo.graph[petgraph::graph::EdgeIndex::new(e)].capacity_gbps();
        let mut lhs = Expression::from(0.0);
        for (i, m) in loads.iter().enumerate() {
            if let Some(&l) = m.get(&e) {
                lhs += ys[i] * (l / cap);
            }
        }
        model = model.with(constraint!(lhs <= t));
    }
    let sol = model
        .solve()
        .map_err(|e| format!("the mixture LP failed: {e}"))?;
    Ok(Mixture {
        weights: ys.iter().map(|&y| sol.value(y).max(0.0)).collect(),
        t: sol.value(t),
    })
}

/// Integer chunk counts per family summing to `chunks` (largest remainder).
pub fn round(weights: &[f64], chunks: usize) -> Vec<usize> {
    let total: f64 = weights.iter().sum::<f64>().max(1e-12);
    let exact: Vec<f64> = weights.iter().map(|w| w / total * chunks as f64).collect();
    let mut counts: Vec<usize> = exact.iter().map(|x| x.floor() as usize).collect();
    let mut rest: Vec<(usize, f64)> = exact
        .iter()
        .enumerate()
        .map(|(i, x)| (i, x - x.floor()))
        .collect();
    rest.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut left = chunks - counts.iter().sum::<usize>();
    for (i, _) in rest {
        if left == 0 {
            break;
        }
        counts[i] += 1;
        left -= 1;
    }
    counts
}

/// Build the mixed Algorithm: `counts[i]` chunks of every shard follow
/// family i (consecutive chunks, so they move together as one multi-chunk
/// step). With `spread`, each of those chunks gets its own copy of the
/// family's channels instead, so every step moves one chunk: a family that
/// starts every chain with a send (a ring) deadlocks once MSCCL splits a
/// multi-chunk step into one message per chunk (docs/verifier.md).
pub fn combine(families: &[Algorithm], counts: &[usize], name: &str, spread: bool) -> Algorithm {
    let n = families[0].spec.ranks;
    let chunks: usize = counts.iter().sum();
    let spec = Spec::reduce_scatter(n, chunks);
    let mut transfers = Vec::new();
    let mut first_chunk = 0;
    let mut chan_base = 0;
    for (f, &k) in families.iter().zip(counts) {
        if k == 0 {
            continue;
        }
        let ch = f.num_channels();
        for t in &f.transfers {
            let o = f.spec.owner(t.chunk);
            for j in 0..k {
                transfers.push(Transfer {
                    chunk: o * chunks + first_chunk + j,
                    channel: chan_base + t.channel + if spread { j * ch } else { 0 },
                    ..*t
                });
            }
        }
        first_chunk += k;
        chan_base += if spread { k * ch } else { ch };
    }
    Algorithm {
        name: name.into(),
        spec,
        transfers,
        bcast: Vec::new(),
    }
}
