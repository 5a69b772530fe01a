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
//!
//! The parts: `model` (the unit-capacity topology, instances, schedules,
//! the bounds and the independent validator), `milp` (deciding one
//! instance), `schedule` (time reversal and the conversion to an
//! [`Algorithm`](crate::ir::Algorithm)) and `search` (the Pareto search).
//! This file holds the synthesizer and the errors.

// Rank × rank matrices read more clearly with index loops.
#![allow(clippy::needless_range_loop)]

mod milp;
mod model;
mod schedule;
mod search;

pub use milp::{decide, decide_allgather};
pub use model::{
    rounds_per_chunk_bound, steps_bound, validate, Decision, Point, SccCollective, Schedule, Send,
    UnitTopology,
};
pub use schedule::to_reduce_scatter;
pub use search::{frontier, search, Attempt, SearchReport};

use super::{ready, Context, Offer, SynthError, Synthesizer};
use std::fmt;
use std::time::Duration;

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

/// Small inputs shared by the unit tests of the parts.
#[cfg(test)]
mod testing {
    use super::UnitTopology;
    use std::time::Duration;

    pub(super) fn dgx1() -> UnitTopology {
        let m = crate::front::generate::DGX1_NVLINKS;
        UnitTopology::new("dgx1", m.iter().map(|r| r.to_vec()).collect()).unwrap()
    }

    pub(super) const T: Duration = Duration::from_secs(60);
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;

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
}
