//! Deciding one instance: [`decide`] (either collective, through the
//! allgather on the oriented graph) and [`decide_allgather`], the MILP
//! (good_lp + HiGHS) with its per-owner aggregate relaxation, the rows both
//! share, and the assignment of a step's sends to rounds.

use super::model::{check_size, oriented};
use super::schedule::time_reverse;
use super::{
    rounds_per_chunk_bound, validate, Decision, Point, SccCollective, Schedule, SearchError, Send,
    UnitTopology, MAX_VARIABLES,
};
use good_lp::solvers::highs::highs;
use good_lp::{
    variable, Expression, ProblemVariables, ResolutionError, Solution as _, SolverModel, Variable,
};
use std::time::{Duration, Instant};

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

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::super::to_reduce_scatter;
    use super::*;

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
}
