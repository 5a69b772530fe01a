//! The Pareto search over instances (SCCL's `pareto-optimal`, without its
//! monotonic-feasibility assumption): [`search`] and its
//! [`SearchReport`], and [`frontier`], the reduce-scatter frontier.

use super::model::{check_size, oriented};
use super::{
    decide, rounds_per_chunk_bound, steps_bound, Decision, Point, SccCollective, Schedule,
    SearchError, UnitTopology,
};
use std::time::{Duration, Instant};

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
