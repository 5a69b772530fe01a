//! Exact search in SCCL's model (synthesis.md §2.1, §8): k-synchronous
//! allgather / reduce-scatter on a graph of unit link capacities.
//!
//! The model: ranks joined by directed links with integer multiplicities
//! `cap[a][b]`. An instance (S, R, C) asks for an allgather with C chunks per
//! rank (chunk c starts on rank c / C) in S steps; step k has `rounds[k] ≥ 1`
//! rounds with Σ rounds = R; in step k a link a→b carries at most
//! `cap[a][b] · rounds[k]` chunks, and a rank may send a chunk in step k only
//! if it held it before step k. Reduce-scatter is the time reverse of
//! allgather on the reversed graph (SCCL's non-combining dual).
//!
//! Each instance is decided by a MILP (good_lp + HiGHS, see
//! [`decide_allgather`]); an `Unsat` is HiGHS's infeasibility proof of that
//! MILP, a `Sat` is re-checked by an independent validator before it is
//! returned. [`search`] explores every (S, R) that is not dominated by an
//! answer already found, for C = 1, 2, …, without SCCL's monotonic-
//! feasibility assumption, and [`frontier`] returns its Pareto points.

// Rank × rank matrices read more clearly with index loops.
#![allow(clippy::needless_range_loop)]

use super::{ready, Context, Offer, SynthError, Synthesizer};
use crate::ir::{Algorithm, NodeKind, Spec, Topology, Transfer};
use good_lp::solvers::highs::highs;
use good_lp::{
    variable, Expression, ProblemVariables, ResolutionError, Solution as _, SolverModel, Variable,
};
use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, Instant};

/// The SCCL-model synthesizer: the Pareto frontier up to `--chunks`
/// (default 6) chunks per rank, candidates bandwidth-best first (lowest
/// R/C, then fewest steps).
pub struct Sccl;

impl Synthesizer for Sccl {
    fn name(&self) -> &'static str {
        "sccl"
    }
    fn summary(&self) -> &'static str {
        "exact SCCL-model search (unit link capacities; ≤ 16 ranks)"
    }
    fn in_auto(&self, _ctx: &Context) -> Result<(), String> {
        Err("by name only: its model has unit link capacities and its search takes minutes".into())
    }
    fn offer(&self, ctx: &Context) -> Result<Offer, SynthError> {
        let o = &ctx.opts;
        let fail = |e: SearchError| SynthError::failed("sccl", e.to_string());
        let caps = UnitTopology::from_topology(ctx.topo).map_err(fail)?;
        let chunks = o.chunks.unwrap_or(6);
        let limit = Duration::from_secs_f64(o.time_limit_s);
        let rep = search(&caps, SccCollective::ReduceScatter, chunks, limit).map_err(fail)?;
        let front = rep.frontier();
        let mut sched: Vec<&Schedule> = rep
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
            return Err(SynthError::failed(
                "sccl",
                format!(
                    "no schedule found within {chunks} chunks and {} s",
                    o.time_limit_s
                ),
            ));
        }
        Ok(Offer::new(
            sched
                .into_iter()
                .map(|s| ready(to_reduce_scatter(s)))
                .collect(),
        ))
    }
}

/// Largest rank count the search accepts (the cut bound enumerates subsets).
pub const MAX_RANKS: usize = 16;

/// Largest MILP (chunk × link × step variables) an instance may need.
pub const MAX_VARIABLES: usize = 2_000_000;

/// Errors of the SCCL-model search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SearchError {
    /// The topology cannot be used (shape, no links, too many ranks).
    Topology(String),
    /// Some rank cannot reach another one.
    Disconnected { from: usize, to: usize },
    /// The request itself is malformed (zero chunks, zero time limit, …).
    Request(String),
    /// The solver failed for a reason other than infeasibility or time.
    Solver(String),
    /// The time limit ran out before the search was complete.
    TimeLimit { decided: usize, unknown: Vec<Point> },
}

impl fmt::Display for SearchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SearchError::Topology(m) => write!(f, "sccl: unusable topology: {m}"),
            SearchError::Disconnected { from, to } => {
                write!(f, "sccl: rank {from} cannot reach rank {to}")
            }
            SearchError::Request(m) => write!(f, "sccl: invalid request: {m}"),
            SearchError::Solver(m) => write!(f, "sccl: solver error: {m}"),
            SearchError::TimeLimit { decided, unknown } => {
                write!(
                    f,
                    "sccl: time limit reached after {decided} instances; undecided:"
                )?;
                for p in unknown {
                    write!(f, " {p}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for SearchError {}

/// Ranks and integer link capacities: `cap(a, b)` links from a to b, each
/// carrying one chunk per round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitTopology {
    pub name: String,
    cap: Vec<Vec<u32>>,
}

impl UnitTopology {
    /// From a square capacity matrix (`cap[a][b]` links a→b, zero diagonal).
    pub fn new(name: impl Into<String>, cap: Vec<Vec<u32>>) -> Result<Self, SearchError> {
        let name = name.into();
        let n = cap.len();
        if n == 0 {
            return Err(SearchError::Topology(format!("{name}: no ranks")));
        }
        for (a, row) in cap.iter().enumerate() {
            if row.len() != n {
                return Err(SearchError::Topology(format!(
                    "{name}: row {a} has {} entries, expected {n}",
                    row.len()
                )));
            }
            if row[a] != 0 {
                return Err(SearchError::Topology(format!(
                    "{name}: rank {a} has a link to itself"
                )));
            }
        }
        Ok(UnitTopology { name, cap })
    }

    /// Count the direct GPU–GPU links of a topology (a bundle of `count`
    /// links counts `count` units). Switches, NICs and CPUs are not part of
    /// SCCL's link model; paths through them are ignored, so a switched
    /// topology is rejected.
    pub fn from_topology(topo: &Topology) -> Result<Self, SearchError> {
        let n = topo.num_ranks();
        let mut cap = vec![vec![0u32; n]; n];
        let rank_of = |node: petgraph::graph::NodeIndex| {
            topo.graph[node]
                .rank
                .filter(|_| topo.graph[node].kind == NodeKind::Gpu)
        };
        for e in topo.graph.edge_indices() {
            let Some((a, b)) = topo.graph.edge_endpoints(e) else {
                continue;
            };
            if let (Some(ra), Some(rb)) = (rank_of(a), rank_of(b)) {
                if ra < n && rb < n && ra != rb {
                    cap[ra][rb] = cap[ra][rb].saturating_add(topo.graph[e].count);
                }
            }
        }
        if n > 1 && cap.iter().all(|r| r.iter().all(|&c| c == 0)) {
            return Err(SearchError::Topology(format!(
                "{}: no direct GPU-GPU links (switched fabrics are not in the SCCL unit-link model)",
                topo.name
            )));
        }
        UnitTopology::new(topo.name.clone(), cap)
    }

    /// Bidirectional ring of `n` ranks, one link each way between neighbours.
    pub fn ring(n: usize) -> Result<Self, SearchError> {
        let mut cap = vec![vec![0u32; n]; n];
        for a in 0..n {
            let b = (a + 1) % n;
            if a != b {
                cap[a][b] = 1;
                cap[b][a] = 1;
            }
        }
        UnitTopology::new(format!("ring({n})"), cap)
    }

    /// Bidirectional line 0 – 1 – … – n−1, one link each way.
    pub fn line(n: usize) -> Result<Self, SearchError> {
        let mut cap = vec![vec![0u32; n]; n];
        for a in 1..n {
            cap[a - 1][a] = 1;
            cap[a][a - 1] = 1;
        }
        UnitTopology::new(format!("line({n})"), cap)
    }

    pub fn ranks(&self) -> usize {
        self.cap.len()
    }

    /// Links from a to b (0 when out of range).
    pub fn cap(&self, a: usize, b: usize) -> u32 {
        self.cap.get(a).and_then(|r| r.get(b)).copied().unwrap_or(0)
    }

    /// The same ranks with every link reversed.
    pub fn reversed(&self) -> Self {
        let n = self.ranks();
        let cap = (0..n)
            .map(|a| (0..n).map(|b| self.cap[b][a]).collect())
            .collect();
        UnitTopology {
            name: format!("{} (reversed)", self.name),
            cap,
        }
    }

    /// Directed links with capacity > 0, as (src, dst, cap).
    fn edges(&self) -> Vec<(usize, usize, u32)> {
        let n = self.ranks();
        let mut out = Vec::new();
        for a in 0..n {
            for b in 0..n {
                if self.cap[a][b] > 0 {
                    out.push((a, b, self.cap[a][b]));
                }
            }
        }
        out
    }

    /// Hop distances `dist[a][b]` (None: unreachable).
    fn distances(&self) -> Vec<Vec<Option<usize>>> {
        let n = self.ranks();
        (0..n)
            .map(|s| {
                let mut d = vec![None; n];
                d[s] = Some(0);
                let mut q = VecDeque::from([s]);
                while let Some(u) = q.pop_front() {
                    let du = d[u].unwrap_or(0);
                    for v in 0..n {
                        if self.cap[u][v] > 0 && d[v].is_none() {
                            d[v] = Some(du + 1);
                            q.push_back(v);
                        }
                    }
                }
                d
            })
            .collect()
    }

    /// Hop distances, or the first unreachable pair.
    fn checked_distances(&self) -> Result<Vec<Vec<usize>>, SearchError> {
        let d = self.distances();
        let mut out = Vec::with_capacity(d.len());
        for (a, row) in d.into_iter().enumerate() {
            let mut r = Vec::with_capacity(row.len());
            for (b, x) in row.into_iter().enumerate() {
                r.push(x.ok_or(SearchError::Disconnected { from: a, to: b })?);
            }
            out.push(r);
        }
        Ok(out)
    }
}

/// Which collective an instance is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SccCollective {
    Allgather,
    ReduceScatter,
}

/// An (S, R, C) instance: steps, total rounds, chunks per rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Point {
    pub steps: usize,
    pub rounds: usize,
    pub chunks: usize,
}

impl Point {
    pub fn new(steps: usize, rounds: usize, chunks: usize) -> Self {
        Point {
            steps,
            rounds,
            chunks,
        }
    }
    /// `self` is at least as good as `o` in both steps and rounds per chunk.
    pub fn dominates(&self, o: &Point) -> bool {
        self.steps <= o.steps && self.rounds * o.chunks <= o.rounds * self.chunks
    }
}

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({},{},{})", self.steps, self.rounds, self.chunks)
    }
}

/// One chunk movement. For allgather: `src` copies `chunk` to `dst`. For
/// reduce-scatter: `src` sends its partial sum of `chunk` to `dst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Send {
    pub step: usize,
    /// Global round index within the whole schedule (0..R): the round of
    /// `step` in which this send runs (a link with cap k carries at most k
    /// chunks per round).
    pub round: usize,
    pub chunk: usize,
    pub src: usize,
    pub dst: usize,
}

/// A schedule in the SCCL model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    pub coll: SccCollective,
    pub point: Point,
    pub ranks: usize,
    /// Rounds of each step (length S, each ≥ 1, sum R).
    pub rounds_per_step: Vec<usize>,
    /// Sorted by (step, round, chunk, src, dst).
    pub sends: Vec<Send>,
}

/// The answer for one instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Sat(Schedule),
    /// Proven infeasible within the model.
    Unsat,
    /// The time limit ran out first.
    Unknown,
}

/// Lower bound on rounds per chunk, R/C ≥ num/den: the cut bound
/// max over rank sets X (∅ ≠ X ≠ all) of |X| / (links leaving X) for
/// allgather; reduce-scatter uses links entering X. Exact (subset
/// enumeration, at most [`MAX_RANKS`] ranks).
pub fn rounds_per_chunk_bound(
    topo: &UnitTopology,
    coll: SccCollective,
) -> Result<(usize, usize), SearchError> {
    let g = oriented(topo, coll);
    let n = g.ranks();
    check_size(&g)?;
    g.checked_distances()?;
    if n == 1 {
        return Ok((0, 1));
    }
    let mut best = (0usize, 1usize);
    for mask in 1u32..((1u32 << n) - 1) {
        let size = mask.count_ones() as usize;
        let mut out = 0usize;
        for a in 0..n {
            if mask & (1 << a) == 0 {
                continue;
            }
            for b in 0..n {
                if mask & (1 << b) == 0 {
                    out += g.cap[a][b] as usize;
                }
            }
        }
        // Connectivity was checked, so out > 0.
        if out > 0 && size * best.1 > best.0 * out {
            best = (size, out);
        }
    }
    let g = gcd(best.0, best.1).max(1);
    Ok((best.0 / g, best.1 / g))
}

/// Lower bound on steps: the largest hop distance a chunk must travel.
pub fn steps_bound(topo: &UnitTopology) -> Result<usize, SearchError> {
    let d = topo.checked_distances()?;
    Ok(d.iter().flatten().copied().max().unwrap_or(0))
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn check_size(g: &UnitTopology) -> Result<(), SearchError> {
    if g.ranks() > MAX_RANKS {
        return Err(SearchError::Topology(format!(
            "{}: {} ranks; the SCCL-model search handles at most {MAX_RANKS}",
            g.name,
            g.ranks()
        )));
    }
    Ok(())
}

/// The graph the allgather MILP runs on.
fn oriented(topo: &UnitTopology, coll: SccCollective) -> UnitTopology {
    match coll {
        SccCollective::Allgather => topo.clone(),
        SccCollective::ReduceScatter => topo.reversed(),
    }
}

/// Decide an instance for a collective. Reduce-scatter is solved as an
/// allgather on the reversed graph and time-reversed, so the returned
/// schedule's sends are partial-sum sends on `topo` itself.
pub fn decide(
    topo: &UnitTopology,
    coll: SccCollective,
    p: Point,
    time_limit: Duration,
) -> Result<Decision, SearchError> {
    let g = oriented(topo, coll);
    match decide_allgather(&g, p, time_limit)? {
        Decision::Sat(s) => match coll {
            SccCollective::Allgather => Ok(Decision::Sat(s)),
            SccCollective::ReduceScatter => {
                let rs = time_reverse(&s);
                validate(topo, &rs).map_err(SearchError::Solver)?;
                Ok(Decision::Sat(rs))
            }
        },
        d => Ok(d),
    }
}

/// Time-reverse an allgather schedule on G into a reduce-scatter schedule on
/// G reversed: step k → S−1−k, round r → R−1−r, every send flipped.
fn time_reverse(s: &Schedule) -> Schedule {
    let sn = s.point.steps;
    let rn = s.point.rounds;
    let mut sends: Vec<Send> = s
        .sends
        .iter()
        .map(|x| Send {
            step: sn - 1 - x.step,
            round: rn - 1 - x.round,
            chunk: x.chunk,
            src: x.dst,
            dst: x.src,
        })
        .collect();
    sends.sort();
    let mut rounds_per_step = s.rounds_per_step.clone();
    rounds_per_step.reverse();
    Schedule {
        coll: match s.coll {
            SccCollective::Allgather => SccCollective::ReduceScatter,
            SccCollective::ReduceScatter => SccCollective::Allgather,
        },
        point: s.point,
        ranks: s.ranks,
        rounds_per_step,
        sends,
    }
}

/// Decide an allgather instance on `g` with a MILP:
/// - binary `x[c][e][k]`: chunk c crosses link e in step k (only where the
///   link's source can hold c by step k, and never into c's owner);
/// - integer `rounds[k]` in 1..=R−S+1, Σ rounds = R;
/// - every non-owner receives every chunk exactly once;
/// - a rank forwards c in step k only if it received c in an earlier step;
/// - Σ_c `x[c][e][k]` ≤ cap(e) · `rounds[k]`;
/// - symmetry breaking: the chunks of one owner are interchangeable, so
///   they are ordered by a weighted count of their first-step sends.
///
/// - saturation: when a rank's ingress capacity over R rounds equals the
///   chunks it must receive, its incoming capacity rows are equalities.
///
/// Trivial cases are answered without the solver (S below the largest
/// distance, R < S, R below the cut bound: Unsat). Before the MILP, the
/// per-owner aggregate (a relaxation, see `aggregate`) is solved: its
/// infeasibility proves Unsat; when feasible, the MILP is first tried with
/// the aggregate's rounds vector fixed (only a Sat is taken from that try),
/// then with free rounds.
pub fn decide_allgather(
    g: &UnitTopology,
    p: Point,
    time_limit: Duration,
) -> Result<Decision, SearchError> {
    let n = g.ranks();
    check_size(g)?;
    if p.chunks == 0 || p.steps == 0 {
        if n == 1 {
            return Ok(Decision::Sat(Schedule {
                coll: SccCollective::Allgather,
                point: p,
                ranks: 1,
                rounds_per_step: vec![1; p.steps],
                sends: vec![],
            }));
        }
        return Err(SearchError::Request(format!(
            "instance {p}: steps and chunks must be at least 1"
        )));
    }
    if time_limit.is_zero() {
        return Err(SearchError::Request(
            "the time limit must be positive".into(),
        ));
    }
    let dist = g.checked_distances()?;
    let (bn, bd) = rounds_per_chunk_bound(g, SccCollective::Allgather)?;
    let diameter = dist.iter().flatten().copied().max().unwrap_or(0);
    if p.rounds < p.steps || p.steps < diameter || p.rounds * bd < p.chunks * bn {
        return Ok(Decision::Unsat);
    }
    let (s, c) = (p.steps, p.chunks);
    let total = n * c;
    let edges = g.edges();
    let size = total.saturating_mul(edges.len()).saturating_mul(s);
    if size > MAX_VARIABLES {
        return Err(SearchError::Request(format!(
            "instance {p} on {} needs about {size} variables (at most {MAX_VARIABLES})",
            g.name
        )));
    }
    // Fast path for refutations: the per-owner aggregate is a relaxation,
    // so its infeasibility proves Unsat (a feasible aggregate need not split
    // into chunks; the full MILP then decides).
    let deadline = Instant::now() + time_limit;
    let left = || deadline.saturating_duration_since(Instant::now());
    match aggregate(g, p, &dist, &edges, time_limit)? {
        Agg::Infeasible => return Ok(Decision::Unsat),
        Agg::Feasible(rounds) if !left().is_zero() => {
            // The aggregate's rounds vector usually admits a schedule, and
            // the MILP with fixed rounds is several times faster. Only its
            // Sat is used; otherwise the rounds stay free below.
            if let Decision::Sat(sched) = full_milp(g, p, &dist, &edges, Some(&rounds), left())? {
                return Ok(Decision::Sat(sched));
            }
        }
        _ => {}
    }
    let time_limit = left();
    if time_limit.is_zero() {
        return Ok(Decision::Unknown);
    }
    full_milp(g, p, &dist, &edges, None, time_limit)
}

/// The full MILP (see [`decide_allgather`]); `fixed` pins the rounds vector.
fn full_milp(
    g: &UnitTopology,
    p: Point,
    dist: &[Vec<usize>],
    edges: &[(usize, usize, u32)],
    fixed: Option<&[usize]>,
    time_limit: Duration,
) -> Result<Decision, SearchError> {
    let n = g.ranks();
    let (s, r, c) = (p.steps, p.rounds, p.chunks);
    let total = n * c;
    let mut vars = ProblemVariables::new();
    let rounds: Vec<Variable> = (0..s)
        .map(|k| match fixed.and_then(|f| f.get(k)) {
            Some(&rk) => vars.add(variable().integer().min(rk as f64).max(rk as f64)),
            None => vars.add(variable().integer().min(1).max((r - s + 1) as f64)),
        })
        .collect();
    // x[chunk][edge][step]
    let x: Vec<Grid> = (0..total)
        .map(|ch| grid(&mut vars, edges, dist, ch / c, s, || variable().binary()))
        .collect();
    let mut model = vars
        .minimise(Expression::from(0.0))
        .using(highs)
        .set_time_limit(time_limit.as_secs_f64());
    let out_of = flow_rows(&mut model, n, p, edges, &rounds, &x, |ch| ch / c, 1.0);
    // Symmetry breaking among one owner's chunks: weight of first-step sends.
    for o in 0..n {
        for i in 1..c {
            let w = |ch: usize| -> Expression {
                let mut e = Expression::from(0.0);
                for (j, &ei) in out_of[o].iter().enumerate() {
                    if let Some(var) = x[ch][ei][0] {
                        e.add_mul((1usize << j) as f64, var);
                    }
                }
                e
            };
            let prev = w(o * c + i - 1);
            let cur = w(o * c + i);
            model.add_constraint((cur - prev).leq(0.0));
        }
    }
    let sol = match model.solve() {
        Ok(sol) => sol,
        Err(ResolutionError::Infeasible) => return Ok(Decision::Unsat),
        Err(ResolutionError::Other("NoSolutionFound")) => return Ok(Decision::Unknown),
        Err(e) => return Err(SearchError::Solver(format!("instance {p}: {e}"))),
    };
    // Extract and assign rounds within each step.
    let rounds_per_step: Vec<usize> = rounds
        .iter()
        .map(|&v| sol.value(v).round().max(0.0) as usize)
        .collect();
    let mut moves = Vec::new();
    for (ch, xc) in x.iter().enumerate() {
        for (ei, xe) in xc.iter().enumerate() {
            for (k, var) in xe.iter().enumerate() {
                if var.is_some_and(|v| sol.value(v) > 0.5) {
                    moves.push((ch, ei, k));
                }
            }
        }
    }
    let mut sends = assign_rounds(edges, &rounds_per_step, moves);
    sends.sort();
    let sched = Schedule {
        coll: SccCollective::Allgather,
        point: p,
        ranks: n,
        rounds_per_step,
        sends,
    };
    validate(g, &sched).map_err(|m| SearchError::Solver(format!("instance {p}: {m}")))?;
    Ok(Decision::Sat(sched))
}

/// The per-owner aggregate of the MILP: integer `f[o][e][k]` = how many of
/// owner o's chunks cross link e in step k. Summing the binary model's
/// `x[c][e][k]` over an owner's chunks satisfies every row here, so this is a
/// relaxation: when HiGHS proves it infeasible, the instance is Unsat. (A
/// feasible aggregate need not decompose into chunks, so Sat still needs the
/// full model.)
fn aggregate(
    g: &UnitTopology,
    p: Point,
    dist: &[Vec<usize>],
    edges: &[(usize, usize, u32)],
    time_limit: Duration,
) -> Result<Agg, SearchError> {
    let n = g.ranks();
    let (s, r, c) = (p.steps, p.rounds, p.chunks);
    let mut vars = ProblemVariables::new();
    let rounds: Vec<Variable> = (0..s)
        .map(|_| vars.add(variable().integer().min(1).max((r - s + 1) as f64)))
        .collect();
    // f[owner][edge][step]
    let f: Vec<Grid> = (0..n)
        .map(|o| {
            grid(&mut vars, edges, dist, o, s, || {
                variable().integer().min(0).max(c as f64)
            })
        })
        .collect();
    let mut model = vars
        .minimise(Expression::from(0.0))
        .using(highs)
        .set_time_limit(time_limit.as_secs_f64());
    flow_rows(&mut model, n, p, edges, &rounds, &f, |o| o, c as f64);
    match model.solve() {
        Err(ResolutionError::Infeasible) => Ok(Agg::Infeasible),
        Ok(sol) => Ok(Agg::Feasible(
            rounds
                .iter()
                .map(|&v| sol.value(v).round().max(1.0) as usize)
                .collect(),
        )),
        Err(ResolutionError::Other("NoSolutionFound")) => Ok(Agg::Unknown),
        Err(e) => Err(SearchError::Solver(format!(
            "instance {p} (aggregate): {e}"
        ))),
    }
}

/// One commodity's variables: `[edge][step]`, `None` where the link cannot
/// carry it in that step.
type Grid = Vec<Vec<Option<Variable>>>;

/// A commodity owned by `o`: one variable per link `a → b` (b ≠ o) and step
/// k in which `a` can hold it (its distance from `o` is at most k).
fn grid(
    vars: &mut ProblemVariables,
    edges: &[(usize, usize, u32)],
    dist: &[Vec<usize>],
    o: usize,
    steps: usize,
    var: impl Fn() -> good_lp::VariableDefinition,
) -> Grid {
    edges
        .iter()
        .map(|&(a, b, _)| {
            (0..steps)
                .map(|k| (b != o && dist[o][a] <= k).then(|| vars.add(var())))
                .collect()
        })
        .collect()
}

/// The rows the MILP and its per-owner aggregate share, over commodities
/// `grids[q]` owned by `owner(q)`: every other rank receives `demand` of
/// each; causality (a rank forwards in step k only what it received
/// before k); link capacity per step, `cap · rounds[k]`, as an equality for
/// links into a saturated rank. Returns the outgoing links per rank.
#[allow(clippy::too_many_arguments)]
fn flow_rows(
    model: &mut impl SolverModel,
    n: usize,
    p: Point,
    edges: &[(usize, usize, u32)],
    rounds: &[Variable],
    grids: &[Grid],
    owner: impl Fn(usize) -> usize,
    demand: f64,
) -> Vec<Vec<usize>> {
    let sum_rounds: Expression = rounds.iter().copied().sum();
    model.add_constraint(sum_rounds.eq(p.rounds as f64));
    let mut into: Vec<Vec<usize>> = vec![vec![]; n];
    let mut out_of: Vec<Vec<usize>> = vec![vec![]; n];
    for (ei, &(a, b, _)) in edges.iter().enumerate() {
        into[b].push(ei);
        out_of[a].push(ei);
    }
    for (q, gq) in grids.iter().enumerate() {
        let o = owner(q);
        for v in (0..n).filter(|&v| v != o) {
            let recv: Expression = into[v]
                .iter()
                .flat_map(|&ei| gq[ei].iter().flatten().copied())
                .sum();
            model.add_constraint(recv.eq(demand));
            for k in 0..p.steps {
                let before: Expression = into[v]
                    .iter()
                    .flat_map(|&ei| gq[ei][..k].iter().flatten().copied())
                    .sum();
                for &ei in &out_of[v] {
                    if let Some(var) = gq[ei][k] {
                        model.add_constraint((Expression::from(var) - before.clone()).leq(0.0));
                    }
                }
            }
        }
    }
    // A rank whose ingress capacity over R rounds equals the (N−1)·C chunks
    // it must receive has every incoming link busy in every round: the
    // capacity rows into it are equalities (implied, but a much tighter LP).
    let saturated: Vec<bool> = (0..n)
        .map(|v| {
            let inn: usize = into[v].iter().map(|&ei| edges[ei].2 as usize).sum();
            inn * p.rounds == (n - 1) * p.chunks
        })
        .collect();
    for (ei, &(_, b, cap)) in edges.iter().enumerate() {
        for (k, &rk) in rounds.iter().enumerate() {
            let load: Expression = grids.iter().filter_map(|gq| gq[ei][k]).sum();
            let row = load - (cap as f64) * rk;
            model.add_constraint(if saturated[b] {
                row.eq(0.0)
            } else {
                row.leq(0.0)
            });
        }
    }
    out_of
}

enum Agg {
    Infeasible,
    /// Feasible, with this rounds vector.
    Feasible(Vec<usize>),
    Unknown,
}

/// Turn moves (chunk, edge, step) into sends: within step k, the chunks one
/// link carries fill its `cap` parallel links round by round.
fn assign_rounds(
    edges: &[(usize, usize, u32)],
    rounds_per_step: &[usize],
    mut moves: Vec<(usize, usize, usize)>,
) -> Vec<Send> {
    let mut base = Vec::with_capacity(rounds_per_step.len());
    let mut acc = 0;
    for &rk in rounds_per_step {
        base.push(acc);
        acc += rk;
    }
    moves.sort_by_key(|&(ch, ei, k)| (ei, k, ch));
    let mut sends = Vec::with_capacity(moves.len());
    let mut i = 0usize;
    for (j, &(ch, ei, k)) in moves.iter().enumerate() {
        let same = j
            .checked_sub(1)
            .and_then(|q| moves.get(q))
            .is_some_and(|&(_, e2, k2)| (e2, k2) == (ei, k));
        i = if same { i + 1 } else { 0 };
        let Some(&(a, b, cap)) = edges.get(ei) else {
            continue;
        };
        sends.push(Send {
            step: k,
            round: base.get(k).copied().unwrap_or(0) + i / cap.max(1) as usize,
            chunk: ch,
            src: a,
            dst: b,
        });
    }
    sends
}

/// Check a schedule against the model on `topo`, independently of how it
/// was found: step/round bookkeeping, link capacity per round, every
/// non-owner gets (allgather) / every non-owner sends (reduce-scatter) each
/// chunk exactly once, and causality.
pub fn validate(topo: &UnitTopology, s: &Schedule) -> Result<(), String> {
    let n = topo.ranks();
    let Point {
        steps,
        rounds,
        chunks,
    } = s.point;
    if s.ranks != n {
        return Err(format!("schedule has {} ranks, topology {n}", s.ranks));
    }
    if s.rounds_per_step.len() != steps
        || s.rounds_per_step.contains(&0)
        || s.rounds_per_step.iter().sum::<usize>() != rounds
    {
        return Err(format!(
            "rounds per step {:?} do not fit {}",
            s.rounds_per_step, s.point
        ));
    }
    let mut step_of_round = Vec::with_capacity(rounds);
    for (k, &rk) in s.rounds_per_step.iter().enumerate() {
        step_of_round.extend(std::iter::repeat_n(k, rk));
    }
    let total = n * chunks;
    let mut load = vec![vec![vec![0u32; n]; n]; rounds];
    // For allgather: arrival step of chunk at rank; for reduce-scatter:
    // departure step of each rank's partial sum.
    let mut when: Vec<Vec<Option<usize>>> = vec![vec![None; n]; total];
    let mut parent: Vec<Vec<Option<usize>>> = vec![vec![None; n]; total];
    for x in &s.sends {
        if x.chunk >= total || x.src >= n || x.dst >= n || x.step >= steps || x.round >= rounds {
            return Err(format!("send {x:?} out of range"));
        }
        if step_of_round[x.round] != x.step {
            return Err(format!("send {x:?}: round not in its step"));
        }
        let l = &mut load[x.round][x.src][x.dst];
        *l += 1;
        if *l > topo.cap(x.src, x.dst) {
            return Err(format!(
                "link {}->{} carries {} chunks in round {} (capacity {})",
                x.src,
                x.dst,
                l,
                x.round,
                topo.cap(x.src, x.dst)
            ));
        }
        let owner = x.chunk / chunks;
        let (node, other) = match s.coll {
            SccCollective::Allgather => (x.dst, x.src),
            SccCollective::ReduceScatter => (x.src, x.dst),
        };
        if node == owner {
            return Err(format!("send {x:?} involves the owner wrongly"));
        }
        if when[x.chunk][node].is_some() {
            return Err(format!("send {x:?}: rank {node} handles chunk twice"));
        }
        when[x.chunk][node] = Some(x.step);
        parent[x.chunk][node] = Some(other);
    }
    for (ch, w) in when.iter().enumerate() {
        let owner = ch / chunks;
        for v in 0..n {
            if v == owner {
                continue;
            }
            let Some(kv) = w[v] else {
                return Err(format!("chunk {ch}: rank {v} is never reached"));
            };
            let Some(p) = parent[ch][v] else {
                return Err(format!("chunk {ch}: rank {v} has no partner"));
            };
            if p == owner {
                continue;
            }
            let Some(kp) = w[p] else {
                return Err(format!("chunk {ch}: rank {p} is never reached"));
            };
            let ok = match s.coll {
                // the sender received it in an earlier step
                SccCollective::Allgather => kp < kv,
                // the receiver forwards its sum in a later step
                SccCollective::ReduceScatter => kp > kv,
            };
            if !ok {
                return Err(format!(
                    "chunk {ch}: rank {p} (step {kp}) and rank {v} (step {kv}) are out of order"
                ));
            }
        }
    }
    Ok(())
}

/// Convert a reduce-scatter schedule into an Algorithm: one in-tree per
/// chunk rooted at its owner, `Transfer.step` = the global round index (so
/// sends into a rank come strictly before the rank's own send); channels as
/// described in the body (distinct per parallel link in a round).
/// An allgather schedule is time-reversed first (valid when the graph is
/// symmetric; otherwise pass the reduce-scatter schedule from [`decide`]).
pub fn to_reduce_scatter(s: &Schedule) -> Algorithm {
    let rs;
    let s = match s.coll {
        SccCollective::ReduceScatter => s,
        SccCollective::Allgather => {
            rs = time_reverse(s);
            &rs
        }
    };
    // Channels: the chunks one link carries in one round go on distinct
    // channels (one per parallel link), so no connection carries two
    // messages in one step. And a rank's send of a chunk never shares a
    // channel with a receive of that chunk other than its last one: lowering
    // pairs a receive and a send on one channel into one threadblock and may
    // fuse them into `rrs`, which is only correct for the last receive.
    let mut sends = s.sends.clone();
    sends.sort_by_key(|x| (x.round, x.src, x.dst, x.chunk));
    let n = s.ranks;
    let total = n * s.point.chunks;
    // incoming[chunk][rank]: (round, src, channel) of the receives so far.
    let mut incoming: Vec<Vec<Vec<(usize, usize, usize)>>> = vec![vec![Vec::new(); n]; total];
    let mut transfers: Vec<Transfer> = Vec::with_capacity(sends.len());
    let mut group_used: Vec<usize> = Vec::new();
    for (i, x) in sends.iter().enumerate() {
        let same_group = i
            .checked_sub(1)
            .and_then(|j| sends.get(j))
            .is_some_and(|p| (p.round, p.src, p.dst) == (x.round, x.src, x.dst));
        if !same_group {
            group_used.clear();
        }
        let mut forbidden = group_used.clone();
        if let Some(inc) = incoming.get(x.chunk).and_then(|r| r.get(x.src)) {
            if let Some(last) = inc.iter().map(|&(r, src, _)| (r, src)).max() {
                forbidden.extend(
                    inc.iter()
                        .filter(|&&(r, src, _)| (r, src) != last)
                        .map(|&(_, _, ch)| ch),
                );
            }
        }
        let channel = (0..).find(|c| !forbidden.contains(c)).unwrap_or(0);
        group_used.push(channel);
        if let Some(inc) = incoming.get_mut(x.chunk).and_then(|r| r.get_mut(x.dst)) {
            inc.push((x.round, x.src, channel));
        }
        transfers.push(Transfer {
            step: x.round,
            chunk: x.chunk,
            src: x.src,
            dst: x.dst,
            channel,
        });
    }
    transfers.sort_by_key(|t| (t.step, t.chunk, t.src, t.dst));
    Algorithm {
        name: format!(
            "sccl-S{}-R{}-C{}",
            s.point.steps, s.point.rounds, s.point.chunks
        ),
        spec: Spec::reduce_scatter(s.ranks, s.point.chunks),
        transfers,
    }
}

/// One decided instance of a search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub point: Point,
    /// "sat", "unsat" or "unknown".
    pub outcome: &'static str,
    pub rounds_per_step: Option<Vec<usize>>,
    pub elapsed: Duration,
}

/// The result of [`search`].
#[derive(Debug, Clone)]
pub struct SearchReport {
    pub coll: SccCollective,
    pub steps_lb: usize,
    /// R/C ≥ num/den.
    pub rounds_per_chunk_lb: (usize, usize),
    /// Every instance decided, in order.
    pub attempts: Vec<Attempt>,
    /// Every satisfiable instance found, with its schedule, in order.
    pub found: Vec<Schedule>,
    /// True when no instance was left undecided (the frontier is exact for
    /// every chunk count explored).
    pub complete: bool,
    /// Largest chunk count explored.
    pub max_chunks_explored: usize,
    pub elapsed: Duration,
}

impl SearchReport {
    /// Pareto-optimal points among those found (fewer steps or fewer rounds
    /// per chunk), sorted by steps; among equal (S, R/C) the smallest C.
    pub fn frontier(&self) -> Vec<Point> {
        let pts: Vec<Point> = self.found.iter().map(|s| s.point).collect();
        let mut out: Vec<Point> = pts
            .iter()
            .copied()
            .filter(|p| {
                !pts.iter()
                    .any(|q| q != p && q.dominates(p) && (!p.dominates(q) || q.chunks < p.chunks))
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }
    /// The first instance found with the fewest steps (least-steps answer).
    pub fn least_steps(&self) -> Option<Point> {
        self.found
            .iter()
            .map(|s| s.point)
            .min_by_key(|p| (p.steps, p.chunks, p.rounds))
    }
    /// Instances proven infeasible.
    pub fn unsat(&self) -> Vec<Point> {
        self.attempts
            .iter()
            .filter(|a| a.outcome == "unsat")
            .map(|a| a.point)
            .collect()
    }
    /// The schedule found for a point, if any.
    pub fn schedule(&self, p: Point) -> Option<&Schedule> {
        self.found.iter().find(|s| s.point == p)
    }
}

/// Pareto search (SCCL's `pareto-optimal`, without the monotonic-feasibility
/// assumption). For C = 1, 2, … ≤ `max_chunks`: R from ⌈C · lb⌉ upward, and
/// for each R every S from the steps bound to R that no point found so far
/// dominates, stopping at the first Sat (larger S is then dominated). R
/// grows until every S at this R is dominated. The search ends after the
/// chunk count whose best point reaches the rounds-per-chunk bound.
/// `time_limit` bounds the whole search.
pub fn search(
    topo: &UnitTopology,
    coll: SccCollective,
    max_chunks: usize,
    time_limit: Duration,
) -> Result<SearchReport, SearchError> {
    if max_chunks == 0 {
        return Err(SearchError::Request("max_chunks must be at least 1".into()));
    }
    if time_limit.is_zero() {
        return Err(SearchError::Request(
            "the time limit must be positive".into(),
        ));
    }
    let start = Instant::now();
    let g = oriented(topo, coll);
    check_size(&g)?;
    let s_lb = steps_bound(&g)?;
    let (bn, bd) = rounds_per_chunk_bound(&g, SccCollective::Allgather)?;
    let mut rep = SearchReport {
        coll,
        steps_lb: s_lb,
        rounds_per_chunk_lb: (bn, bd),
        attempts: vec![],
        found: vec![],
        complete: true,
        max_chunks_explored: 0,
        elapsed: Duration::ZERO,
    };
    let n = g.ranks();
    if n == 1 {
        return Ok(rep);
    }
    let mut unknown = Vec::new();
    for c in 1..=max_chunks {
        rep.max_chunks_explored = c;
        let mut r = (c * bn).div_ceil(bd).max(s_lb).max(1);
        // Safety net: with S = s_lb, R = s_lb · N · C always suffices
        // (forward along BFS trees, one hop per step).
        let r_max = s_lb.max(1) * n * c;
        while r <= r_max {
            let mut any = false;
            for s in s_lb.max(1)..=r {
                let p = Point::new(s, r, c);
                if rep.found.iter().any(|f| f.point.dominates(&p)) {
                    continue;
                }
                any = true;
                let left = time_limit.saturating_sub(start.elapsed());
                if left.is_zero() {
                    unknown.push(p);
                    return Err(SearchError::TimeLimit {
                        decided: rep.attempts.len(),
                        unknown,
                    });
                }
                let t0 = Instant::now();
                let d = decide(topo, coll, p, left)?;
                let elapsed = t0.elapsed();
                match d {
                    Decision::Sat(sched) => {
                        rep.attempts.push(Attempt {
                            point: p,
                            outcome: "sat",
                            rounds_per_step: Some(sched.rounds_per_step.clone()),
                            elapsed,
                        });
                        rep.found.push(sched);
                        break;
                    }
                    Decision::Unsat => rep.attempts.push(Attempt {
                        point: p,
                        outcome: "unsat",
                        rounds_per_step: None,
                        elapsed,
                    }),
                    Decision::Unknown => {
                        rep.complete = false;
                        unknown.push(p);
                        rep.attempts.push(Attempt {
                            point: p,
                            outcome: "unknown",
                            rounds_per_step: None,
                            elapsed,
                        });
                    }
                }
            }
            if !any {
                break;
            }
            r += 1;
        }
        let at_bound = rep
            .found
            .iter()
            .any(|f| f.point.chunks == c && f.point.rounds * bd == c * bn);
        if at_bound {
            break;
        }
    }
    rep.elapsed = start.elapsed();
    Ok(rep)
}

/// The reduce-scatter Pareto frontier of `caps` for C ≤ `max_chunks` (the
/// search stops earlier once the rounds-per-chunk bound is reached). Fails
/// with [`SearchError::TimeLimit`] unless every instance was decided.
pub fn frontier(
    caps: &UnitTopology,
    max_chunks: usize,
    time_limit: Duration,
) -> Result<Vec<Point>, SearchError> {
    let rep = search(caps, SccCollective::ReduceScatter, max_chunks, time_limit)?;
    if !rep.complete {
        return Err(SearchError::TimeLimit {
            decided: rep.attempts.len(),
            unknown: rep
                .attempts
                .iter()
                .filter(|a| a.outcome == "unknown")
                .map(|a| a.point)
                .collect(),
        });
    }
    Ok(rep.frontier())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dgx1() -> UnitTopology {
        let m = crate::front::generate::DGX1_NVLINKS;
        UnitTopology::new("dgx1", m.iter().map(|r| r.to_vec()).collect()).unwrap()
    }

    const T: Duration = Duration::from_secs(60);

    #[test]
    fn bounds() {
        let g = dgx1();
        assert_eq!(steps_bound(&g).unwrap(), 2);
        assert_eq!(
            rounds_per_chunk_bound(&g, SccCollective::ReduceScatter).unwrap(),
            (7, 6)
        );
        let r = UnitTopology::ring(8).unwrap();
        assert_eq!(steps_bound(&r).unwrap(), 4);
        assert_eq!(
            rounds_per_chunk_bound(&r, SccCollective::Allgather).unwrap(),
            (7, 2)
        );
        let l = UnitTopology::line(4).unwrap();
        assert_eq!(
            rounds_per_chunk_bound(&l, SccCollective::Allgather).unwrap(),
            (3, 1)
        );
    }

    #[test]
    fn bad_inputs_are_errors() {
        assert!(UnitTopology::new("x", vec![vec![0, 1], vec![1]]).is_err());
        assert!(UnitTopology::new("x", vec![vec![1]]).is_err());
        assert!(UnitTopology::new("x", vec![]).is_err());
        let split =
            UnitTopology::new("x", vec![vec![0, 1, 0], vec![1, 0, 0], vec![0, 0, 0]]).unwrap();
        assert!(matches!(
            steps_bound(&split),
            Err(SearchError::Disconnected { .. })
        ));
        assert!(search(&split, SccCollective::Allgather, 2, T).is_err());
        let g = dgx1();
        assert!(matches!(
            search(&g, SccCollective::ReduceScatter, 2, Duration::ZERO),
            Err(SearchError::Request(_))
        ));
        assert!(matches!(
            search(&g, SccCollective::ReduceScatter, 0, T),
            Err(SearchError::Request(_))
        ));
        assert!(decide(&g, SccCollective::Allgather, Point::new(0, 1, 1), T).is_err());
        assert!(matches!(
            decide(
                &g,
                SccCollective::Allgather,
                Point::new(1000, 2000, 1000),
                T
            ),
            Err(SearchError::Request(_))
        ));
    }

    #[test]
    fn trivial_unsat_without_solver() {
        let g = dgx1();
        // One step cannot reach distance-2 ranks; R < S; below the cut bound.
        for p in [
            Point::new(1, 5, 1),
            Point::new(3, 2, 1),
            Point::new(3, 6, 6),
        ] {
            assert_eq!(
                decide(&g, SccCollective::Allgather, p, T).unwrap(),
                Decision::Unsat,
                "{p}"
            );
        }
    }

    #[test]
    fn dgx1_least_steps_is_sat_and_valid() {
        let g = dgx1();
        let Decision::Sat(s) =
            decide(&g, SccCollective::ReduceScatter, Point::new(2, 2, 1), T).unwrap()
        else {
            panic!("(2,2,1) must be sat");
        };
        assert_eq!(s.sends.len(), 56);
        assert_eq!(s.rounds_per_step, vec![1, 1]);
        validate(&g, &s).unwrap();
        let alg = to_reduce_scatter(&s);
        alg.check().unwrap();
    }

    #[test]
    fn validator_rejects_broken_schedules() {
        let g = dgx1();
        let Decision::Sat(s) =
            decide(&g, SccCollective::Allgather, Point::new(2, 2, 1), T).unwrap()
        else {
            panic!("(2,2,1) must be sat");
        };
        validate(&g, &s).unwrap();
        // Drop a send: some rank misses a chunk.
        let mut t = s.clone();
        t.sends.pop();
        assert!(validate(&g, &t).is_err());
        // Reverse the time order: causality breaks.
        let mut t = s.clone();
        for x in &mut t.sends {
            x.step = 1 - x.step;
            x.round = 1 - x.round;
        }
        assert!(validate(&g, &t).is_err());
        // Route a send over a missing link (0 -> 5 has no NVLink).
        let mut t = s.clone();
        t.sends[0].dst = 5;
        t.sends[0].src = 0;
        assert!(validate(&g, &t).is_err());
    }

    #[test]
    fn dominance() {
        assert!(Point::new(2, 3, 2).dominates(&Point::new(2, 2, 1)));
        assert!(!Point::new(2, 2, 1).dominates(&Point::new(2, 3, 2)));
        assert!(Point::new(3, 7, 6).dominates(&Point::new(3, 4, 3)));
        assert!(!Point::new(3, 7, 6).dominates(&Point::new(2, 3, 2)));
    }
}
