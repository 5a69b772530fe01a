//! Synthesis: Topology × Spec → Algorithm. Each algorithm lives in its own
//! file; `candidates` returns an algorithm's candidates, best first (the
//! driver in `compile.rs` lowers them and keeps the first that fits the
//! runtime's limits; `--algo auto` compares all of them in the simulator).

pub mod direct;
pub mod flow;
pub mod gap;
pub mod hier;
pub mod mix;
pub mod ring;
pub mod sccl;
pub mod tree;

use crate::ir::{Algorithm, Spec, Topology};
use std::fmt;

/// Which synthesizer to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algo {
    /// Every applicable algorithm, scored by the simulator per size.
    Auto,
    /// NCCL-style rings (the baseline).
    Ring,
    /// All-pairs: every rank sends straight to each owner.
    Direct,
    /// Fewest-hop reduction trees (topologies with non-neighbour ranks).
    Tree,
    /// Hierarchical, NIC-aware (several hosts).
    Hier,
    /// LP mixture of tree families (bandwidth-optimal within them).
    Mix,
    /// Per-edge reduction LP (bandwidth-optimal over single-route trees).
    Flow,
    /// Exact SCCL-model search (unit link capacities; ≤ 16 ranks).
    Sccl,
    /// Two-wave relay schedule for diameter-two meshes, tuned for medium
    /// messages by a simulator-scored search (the driver runs it).
    Gap,
}

impl Algo {
    pub const ALL: [Algo; 9] = [
        Algo::Auto,
        Algo::Ring,
        Algo::Direct,
        Algo::Tree,
        Algo::Hier,
        Algo::Mix,
        Algo::Flow,
        Algo::Sccl,
        Algo::Gap,
    ];
    pub fn parse(s: &str) -> Option<Algo> {
        Algo::ALL.into_iter().find(|a| a.name() == s)
    }
    pub fn name(self) -> &'static str {
        match self {
            Algo::Auto => "auto",
            Algo::Ring => "ring",
            Algo::Direct => "direct",
            Algo::Tree => "tree",
            Algo::Hier => "hier",
            Algo::Mix => "mix",
            Algo::Flow => "flow",
            Algo::Sccl => "sccl",
            Algo::Gap => "gap",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SynthError(pub String);

impl fmt::Display for SynthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SynthError {}

/// Options every synthesizer understands.
#[derive(Debug, Clone)]
pub struct SynthOptions {
    /// Chunks per shard (None: the synthesizer's choice).
    pub chunks: Option<usize>,
    /// Seconds allowed for any solver call.
    pub time_limit_s: f64,
    /// HiGHS `random_seed` for the mixture, flow and gap LPs, and the
    /// seed of the gap search's kicks (0 … 2³¹ − 1).
    pub seed: u32,
    /// Schedules the gap search may simulate (its budget: the same count
    /// gives the same schedule on any machine); None: the default budget
    /// (`gap::GAP_EVALS` schedules or `gap::GAP_WORK` program steps).
    pub evals: Option<usize>,
}

impl Default for SynthOptions {
    fn default() -> Self {
        SynthOptions {
            chunks: None,
            time_limit_s: 30.0,
            seed: 0,
            evals: None,
        }
    }
}

/// The options every LP rscc solves with HiGHS takes: the time limit (a
/// best-so-far answer after it) and the random seed (`--seed`).
pub(crate) fn highs_options(
    p: good_lp::solvers::highs::HighsProblem,
    time_limit_s: f64,
    seed: u32,
) -> good_lp::solvers::highs::HighsProblem {
    p.set_time_limit(time_limit_s)
        .set_option("random_seed", seed.min(i32::MAX as u32) as i32)
}

/// Largest `--time-limit` in seconds (about 31 years): larger ones would
/// overflow the deadlines the searches compute.
pub const MAX_TIME_LIMIT_S: f64 = 1e9;

/// Most chunks in the full buffer (int16 offsets).
pub const MAX_CHUNKS_PER_LOOP: usize = 32767;

/// Largest chunk count the mixture tries when rounding its fractions.
const MIX_MAX_CHUNKS: usize = 16;

/// A candidate Algorithm, built when the driver asks for it (it stops at
/// the first candidate that fits the runtime's limits, so a large fallback
/// list costs nothing until it is needed).
pub type Candidate = Box<dyn FnOnce() -> Algorithm>;

fn built(algs: Vec<Algorithm>) -> Vec<Candidate> {
    algs.into_iter()
        .map(|a| Box::new(move || a) as Candidate)
        .collect()
}

/// Extra candidates for small messages, compiled and scored by `auto`
/// beside [`candidates`]' first fit: `tree`'s pieced members
/// ([`tree::HopGraph::pieced`]), whose slack branches move as multi-chunk
/// steps and so are often safe only up to a size (compile says which).
/// Empty for every other algorithm and under `--chunks`.
pub fn small_candidates(
    topo: &Topology,
    algo: Algo,
    o: &SynthOptions,
) -> Result<Vec<Candidate>, SynthError> {
    if algo != Algo::Tree || o.chunks.is_some() {
        return Ok(Vec::new());
    }
    let Ok(g) = tree::offered(topo) else {
        return Ok(Vec::new());
    };
    let k = g.default_classes();
    Ok(vec![Box::new(move || g.pieced(k, &tree::PIECES))])
}

/// The checks every request passes before any synthesizer runs: GPUs to
/// synthesize for, a chunk count the runtime's offsets hold, a positive
/// time limit.
pub fn check_request(topo: &Topology, o: &SynthOptions) -> Result<(), SynthError> {
    let n = topo.num_ranks();
    if n == 0 {
        return Err(SynthError("the topology has no GPUs".into()));
    }
    if o.chunks == Some(0) {
        return Err(SynthError("--chunks must be at least 1".into()));
    }
    // Offsets are int16 in the runtime (msccl-xml.md §8.3): refuse before
    // building an Algorithm of that size.
    if let Some(c) = o.chunks {
        if n.saturating_mul(c) > MAX_CHUNKS_PER_LOOP {
            return Err(SynthError(format!(
                "--chunks {c} on {n} ranks gives {} chunks per loop; MSCCL offsets are int16, so at most {MAX_CHUNKS_PER_LOOP}",
                n.saturating_mul(c)
            )));
        }
    }
    if !(o.time_limit_s > 0.0 && o.time_limit_s <= MAX_TIME_LIMIT_S) {
        return Err(SynthError(format!(
            "--time-limit must be a positive number of seconds up to {MAX_TIME_LIMIT_S:e}, got {}",
            o.time_limit_s
        )));
    }
    Ok(())
}

/// Candidate Algorithms for one (non-auto) algorithm, best first.
pub fn candidates(
    topo: &Topology,
    algo: Algo,
    o: &SynthOptions,
) -> Result<Vec<Candidate>, SynthError> {
    check_request(topo, o)?;
    let n = topo.num_ranks();
    match algo {
        Algo::Auto => Err(SynthError(
            "auto is resolved by the driver (compile::compile)".into(),
        )),
        Algo::Ring => {
            if let Some(c) = o.chunks.filter(|&c| c > crate::ir::program::MAX_CHANNELS) {
                return Err(SynthError(format!(
                    "--algo ring --chunks {c}: every chunk of a shard gets its own channel (chunks sharing one would move as multi-chunk steps, which deadlock a ring once MSCCL splits them), and MSCCL has at most {} channels",
                    crate::ir::program::MAX_CHANNELS
                )));
            }
            let rings = std::rc::Rc::new(ring::find_rings(topo));
            // Full ring set first, then halves (fewer channels) as fallbacks;
            // each is built only when the one before it does not fit.
            let mut out: Vec<Candidate> = Vec::new();
            let mut r = rings.len();
            loop {
                let c = o.chunks.unwrap_or(r);
                let rings = rings.clone();
                out.push(Box::new(move || {
                    ring::ring_algorithm(Spec::reduce_scatter(n, c), &rings[..r])
                }));
                if r == 1 {
                    break;
                }
                r = r.div_ceil(2);
            }
            Ok(out)
        }
        Algo::Tree => {
            let g = tree::offered(topo).map_err(|why| SynthError(format!("--algo tree: {why}")))?;
            // `--chunks c`: c classes of one chunk. By default graded
            // classes (GRADES groups of the default class count k), then
            // fewer groups, then k equal classes, then one class: each a
            // fallback for when the one before exceeds the runtime's limits
            // (DGX-1's 80 SMs hold two groups, not three) or is rejected by
            // the verifier (rings: multi-chunk sends start every chain).
            // All are built from one hop graph, each only when the driver
            // asks for it.
            let g = std::rc::Rc::new(g);
            let mut out: Vec<Candidate> = Vec::new();
            if let Some(c) = o.chunks {
                out.push(Box::new(move || g.algorithm(Spec::reduce_scatter(n, c))));
                return Ok(out);
            }
            let k = g.default_classes();
            for grades in (2..=tree::GRADES).rev() {
                let g = g.clone();
                out.push(Box::new(move || g.graded(k, grades)));
            }
            for k in [k, 1].into_iter().take(if k > 1 { 2 } else { 1 }) {
                let g = g.clone();
                out.push(Box::new(move || g.algorithm(Spec::reduce_scatter(n, k))));
            }
            Ok(out)
        }
        Algo::Direct => Ok(built(vec![direct::direct_algorithm(Spec::reduce_scatter(
            n,
            o.chunks.unwrap_or(1),
        ))])),
        Algo::Hier => {
            let hs = hier_hosts(topo)?;
            Ok(built(vec![hier::hier_algorithm(
                Spec::reduce_scatter(n, o.chunks.unwrap_or(1)),
                &hs,
                0,
            )]))
        }
        Algo::Mix => {
            let fams = families(topo);
            let m = mix::solve(topo, &fams, o.time_limit_s, o.seed).map_err(SynthError)?;
            let chunks = match o.chunks {
                Some(c) => c,
                None => best_chunk_count(topo, &fams, &m),
            };
            let counts = mix::round(&m.weights, chunks);
            // Chunks of a family move together; if that is rejected (a
            // ring family's multi-chunk steps deadlock once split), each
            // chunk on its own channels.
            let fams = std::rc::Rc::new(fams);
            Ok([false, true]
                .into_iter()
                .map(|spread| {
                    let (fams, counts) = (fams.clone(), counts.clone());
                    Box::new(move || mix::combine(&fams, &counts, "mix", spread)) as Candidate
                })
                .collect())
        }
        Algo::Flow => {
            if n > flow::FLOW_MAX_RANKS {
                return Err(SynthError(format!(
                    "flow: offered up to {} ranks (its LP has about N^3 variables); {} has {n}",
                    flow::FLOW_MAX_RANKS,
                    topo.name
                )));
            }
            let lp =
                std::rc::Rc::new(flow::solve(topo, o.time_limit_s, o.seed).map_err(SynthError)?);
            let c = o.chunks.unwrap_or_else(|| lp.chunk_count(topo));
            // One channel per owner (at most 32), then halving the channels
            // while the threadblocks exceed the runtime's limits.
            let mut lanes = vec![n.min(crate::ir::program::MAX_CHANNELS)];
            while *lanes.last().unwrap() > 1 {
                let l = *lanes.last().unwrap();
                lanes.push(l / 2);
            }
            Ok(lanes
                .into_iter()
                .map(|lanes| {
                    let lp = lp.clone();
                    Box::new(move || lp.algorithm(c, lanes)) as Candidate
                })
                .collect())
        }
        Algo::Gap => {
            // The LP's rounding, unsearched (`compile::compile_one` runs the
            // search, which needs the simulator).
            let g = gap::solve(topo, o.time_limit_s, o.seed)
                .map_err(|e| SynthError(format!("--algo gap: {e}")))?;
            let p = g.start(o.chunks.unwrap_or(gap::GAP_CHUNKS));
            Ok(built(vec![g.algorithm(&p)]))
        }
        Algo::Sccl => {
            // The Pareto frontier up to `chunks` (default 6) chunks per rank;
            // candidates bandwidth-best first (lowest R/C, then fewest steps).
            let caps =
                sccl::UnitTopology::from_topology(topo).map_err(|e| SynthError(e.to_string()))?;
            let limit = std::time::Duration::from_secs_f64(o.time_limit_s);
            let rep = sccl::search(
                &caps,
                sccl::SccCollective::ReduceScatter,
                o.chunks.unwrap_or(6),
                limit,
            )
            .map_err(|e| SynthError(e.to_string()))?;
            let front = rep.frontier();
            let mut sched: Vec<&sccl::Schedule> = rep
                .found
                .iter()
                .filter(|s| front.contains(&s.point))
                .collect();
            sched.sort_by(|a, b| {
                let (pa, pb) = (a.point, b.point);
                (pa.rounds * pb.chunks)
                    .cmp(&(pb.rounds * pa.chunks))
                    .then(pa.steps.cmp(&pb.steps))
            });
            if sched.is_empty() {
                return Err(SynthError(format!(
                    "sccl: no schedule found within {} chunks and {} s",
                    o.chunks.unwrap_or(6),
                    o.time_limit_s
                )));
            }
            Ok(built(
                sched.into_iter().map(sccl::to_reduce_scatter).collect(),
            ))
        }
    }
}

/// Whether `auto` should score `flow`: its LP optimum is more than 1 %
/// below the mixture's (the families' best), i.e. it promises more
/// bandwidth at large sizes. `Err(reason)` when not; both LPs take
/// milliseconds at the ≤ 32 ranks `flow` is offered for.
pub fn flow_promising(topo: &Topology, o: &SynthOptions) -> Result<(), String> {
    let n = topo.num_ranks();
    if n > flow::FLOW_MAX_RANKS {
        return Err(format!(
            "flow: not offered for {n} ranks (at most {})",
            flow::FLOW_MAX_RANKS
        ));
    }
    let f = flow::solve(topo, o.time_limit_s, o.seed)?;
    match mix::solve(topo, &families(topo), o.time_limit_s, o.seed) {
        Ok(m) if f.t >= 0.99 * m.t => Err(format!(
            "flow: not scored: its LP optimum ({:.4}) is not 1 % below the mixture's ({:.4}), whose families pipeline better",
            f.t, m.t
        )),
        _ => Ok(()),
    }
}

fn hier_hosts(topo: &Topology) -> Result<Vec<Vec<usize>>, SynthError> {
    hier::groups(topo).ok_or_else(|| {
        SynthError(format!(
            "--algo hier needs at least two hosts with the same number (≥ 2) of GPUs, or on one host (4 to {} GPUs) groups of the same size that reach each other at a lower route α than the rest (sockets, PCIe switches, hives); {} has {} host(s) and no such groups",
            hier::GROUPS_MAX_RANKS,
            topo.name,
            topo.num_hosts()
        ))
    })
}

/// Most ranks for which the direct schedule is a candidate: beyond it the
/// 2(N−1) threadblocks per rank crowd the GPU and the flow simulation of
/// N(N−1) concurrent transfers dominates `auto`'s time.
pub const DIRECT_MAX_RANKS: usize = 32;

/// Whether the direct schedule is offered for `topo`.
pub fn direct_applies(topo: &Topology) -> bool {
    let n = topo.num_ranks();
    let sms = topo.min_sms().map(|s| s as usize).unwrap_or(usize::MAX);
    (2..=DIRECT_MAX_RANKS).contains(&n) && 2 * (n - 1) <= sms
}

/// The tree families the mixture LP combines, one chunk per shard each:
/// every single ring, the direct schedule (when it applies), and where
/// `hier` has groups (several hosts, or one host's sockets, PCIe switches
/// or hives: [`hier::groups`]) the hierarchical schedule with 0 … g−1
/// group-mates abroad.
pub fn families(topo: &Topology) -> Vec<Algorithm> {
    let n = topo.num_ranks();
    let spec = Spec::reduce_scatter(n, 1);
    let mut out = Vec::new();
    for r in ring::find_rings(topo) {
        let mut a = ring::ring_algorithm(spec, std::slice::from_ref(&r));
        a.name = "ring".into();
        out.push(a);
    }
    if direct_applies(topo) {
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
fn best_chunk_count(topo: &Topology, fams: &[Algorithm], m: &mix::Mixture) -> usize {
    let loads: Vec<_> = fams
        .iter()
        .map(|f| mix::link_loads(topo, f).unwrap_or_default())
        .collect();
    let util = |counts: &[usize], c: usize| -> f64 {
        let mut per_link: std::collections::HashMap<usize, f64> = std::collections::HashMap::new();
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
        let counts = mix::round(&m.weights, c);
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
