//! Gap: a two-wave reduce-scatter for meshes of diameter two (DGX-1's
//! hybrid cube-mesh), tuned for medium messages (tens of KiB).
//!
//! Every rank u sends its contribution to shard d in one of two ways:
//!
//! - a *neighbour* of d (one hop away) sends its own bytes straight to d
//!   at step 0, on channels of their own;
//! - a *far* rank (two hops away) sends to a *relay* — a neighbour of d it
//!   has a link to — which adds it to its own contribution and forwards
//!   the sum (store-and-forward), or sends cut-through over its two-hop
//!   route.
//!
//! With α per hop, the relayed sums cannot reach d before 2α, so a
//! neighbour's own bytes fill d's ingress links in the *gap* before the
//! second wave arrives; the fewest-hop trees (`tree`) merge everything
//! first and leave that window empty. Which relay (or route) each far rank
//! uses is a per-shard *vector*; a window LP ([`solve`]) splits every
//! shard among the vectors so that each ingress link finishes both waves
//! at once, and the shares are rounded to `chunks` chunks per shard. The
//! LP has many optima; it is solved with [`GAP_LPS`] solver seeds, and
//! each answer is a start for the search.
//!
//! In the max-min fair cost model concurrent pieces on a link finish in
//! size order, so relayed groups are cut into *pieces* in harmonic-like
//! proportions (1:2:3 …) that pipeline the two hops. The rounding and the
//! piece patterns are then improved by a deterministic local search
//! ([`Gap::search`]) that the driver scores in the simulator with a fixed
//! evaluation budget: same input, same schedule. It climbs from the best
//! start, then restarts from the next best. The LP and the search are
//! tuned for one message size: [`GAP_SIZE`] (64 KiB), and for `auto` also
//! [`GAP_MEDIUM_SIZE`] (1 MiB), where the LP loads the links evenly.
//! Where the topology has symmetries (`automorphisms`: DGX-1 has four),
//! the search moves whole orbits of shards at once.
//!
//! The parts: `model` (the shape a topology must have, the vectors, the
//! topology's symmetries and the ties between shards they give), `lp`
//! (the window LP and [`solve`]), `schedule` (a [`Plan`]'s rounding,
//! pieces and [`Algorithm`](crate::ir::Algorithm)) and `search`
//! ([`Gap::search`]). This file holds the synthesizer, the defaults and
//! the two types the parts share, [`Gap`] and [`Plan`].

mod lp;
mod model;
mod schedule;
mod search;

pub use lp::solve;
pub use model::{offered, Via};
pub use schedule::PATTERNS;
pub use search::SearchStats;

use super::{
    Budget, Candidate, Context, Offer, Score, Search, Searched, Stop, SynthError, Synthesizer,
};
use model::Owner;
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// The gap synthesizer: the window LP's roundings, improved by the
/// driver-scored search ([`Gap::search`]).
pub struct GapSynth;

impl Synthesizer for GapSynth {
    fn name(&self) -> &'static str {
        "gap"
    }
    fn summary(&self) -> &'static str {
        "two-wave relay schedule for diameter-two meshes, tuned for medium messages by a simulator-scored search"
    }
    /// The search for [`GAP_SIZE`], and for `auto` the one for
    /// [`GAP_MEDIUM_SIZE`]: one shape, its LP and its search tuned for
    /// each end of the sizes it serves.
    fn offer(&self, ctx: &Context) -> Result<Offer, SynthError> {
        offered(ctx.topo).map_err(|why| SynthError::not_offered("gap", why))?;
        let search = |size: u64, budget: Budget| -> Result<Box<dyn Search + Send>, SynthError> {
            let o = &ctx.opts;
            let g = solve(ctx.topo, o.time_limit_s, o.seed, size)
                .map_err(|e| SynthError::failed("gap", e))?;
            let start = g.start(o.chunks.unwrap_or(GAP_CHUNKS));
            Ok(Box::new(GapSearch {
                g: Arc::new(g),
                start,
                seed: o.seed,
                size,
                budget,
            }))
        };
        let small = Budget {
            evals: GAP_EVALS,
            steps: GAP_WORK,
        };
        let medium = Budget {
            evals: GAP_MEDIUM_EVALS,
            steps: GAP_MEDIUM_WORK,
        };
        // The medium search only adds candidates: where its LP fails, the
        // small one still serves.
        Ok(Offer {
            search: Some(search(GAP_SIZE, small)?),
            more_searches: search(GAP_MEDIUM_SIZE, medium).into_iter().collect(),
            ..Offer::default()
        })
    }
}

/// The search over a window LP solved for one message size.
struct GapSearch {
    g: Arc<Gap>,
    start: Plan,
    seed: u32,
    /// The size the LP was solved for and the search scores.
    size: u64,
    budget: Budget,
}

impl Search for GapSearch {
    fn score_size(&self) -> u64 {
        self.size
    }
    fn budget(&self) -> Budget {
        self.budget
    }
    /// The searched plan, then the search's best start, then the main LP
    /// answer's rounding; as extras the starts where they differ (the
    /// best of all LP answers' roundings, and of the main answer's):
    /// their even link loads serve larger messages, which the search,
    /// scoring its own size only, may trade away (MI100 8P6L is at 100 %
    /// of the cut bound at 1 MiB with the 64 KiB LP's main rounding, 81 %
    /// with the plan searched at 64 KiB).
    fn run(self: Box<Self>, stop: &Stop, score: &Score) -> Searched {
        let (best, stats) = self.g.search(self.start.clone(), self.seed, stop, score);
        let g = self.g;
        let cand = |p: &Plan| -> Candidate {
            let (g, p) = (g.clone(), p.clone());
            Box::new(move || g.algorithm(&p))
        };
        let candidates = vec![cand(&best), cand(&stats.start), cand(&self.start)];
        let mut seen = vec![&best];
        let mut extras = Vec::new();
        for p in [&stats.start, &stats.lp_start] {
            if !seen.contains(&p) {
                seen.push(p);
                extras.push(cand(p));
            }
        }
        Searched {
            candidates,
            extras,
            below: Vec::new(),
        }
    }
}

/// Chunks per shard by default.
pub const GAP_CHUNKS: usize = 24;
/// Message size the LP and the search optimise for: the top of the
/// small-message range.
pub const GAP_SIZE: u64 = 64 << 10;
/// Message size of `auto`'s second search: medium messages, where a
/// link's bytes take several α and the plan must load the links evenly
/// (the window LP at 64 KiB lets the own bytes trail by more than half of
/// the busiest link's time; DGX-1's plan for 64 KiB is at 64 % of the
/// bound at 1 MiB, the one for 1 MiB at 77 %).
pub const GAP_MEDIUM_SIZE: u64 = 1 << 20;
/// The medium search's budget, a fifth of [`GAP_EVALS`] and the same
/// fraction of [`GAP_WORK`]: on DGX-1, Vega20 4P1H, the gfx90a "alt" dump
/// and the MI250X hive the climb reaches within it what it reaches with
/// the default budget.
pub const GAP_MEDIUM_EVALS: usize = 200;
/// See [`GAP_MEDIUM_EVALS`].
pub const GAP_MEDIUM_WORK: usize = GAP_WORK / 5;
/// The search's default budget: at most GAP_EVALS schedules, and at most
/// GAP_WORK program steps lowered (a schedule's lowering and simulation
/// cost about its steps, so the budget is about the same time on every
/// topology: DGX-1's schedules of about 620 steps stop after about 710,
/// 0.34 s on two cores; the MI250 dumps' programs of 700–870 steps after
/// 530–750, 0.65–0.83 s for their whole `auto`). The 96 start schedules
/// of [`Gap::search`] count.
pub const GAP_EVALS: usize = 1000;
/// See [`GAP_EVALS`].
pub const GAP_WORK: usize = 450_000;
/// Window LP solves (HiGHS seeds) whose roundings the search starts from.
pub const GAP_LPS: usize = 8;
/// Most ranks offered (the LP has one variable per shard and vector).
pub const GAP_MAX_RANKS: usize = 16;

/// Vector order per (shard, used vectors).
type RunOrders = FxHashMap<(usize, Vec<usize>), Vec<usize>>;

/// The LP's answer for a topology, ready to be rounded and searched.
#[derive(Debug)]
pub struct Gap {
    n: usize,
    owners: Vec<Owner>,
    /// The shares (per shard, per vector) of the LP's other optima found
    /// with other HiGHS seeds: more starts for the search.
    alts: Vec<Vec<Vec<f64>>>,
    /// Softmax temperature for the search, µs.
    temp_us: f64,
    /// [`own_run_order`] per (shard, used vectors): the search asks for
    /// the same few sets thousands of times.
    orders: std::sync::Mutex<RunOrders>,
    /// Per shard, the shard it is tied to by a symmetry of the topology
    /// (its orbit's first) and where that shard's vectors map to in its
    /// own; None for an orbit's first.
    ties: Vec<Option<(usize, Vec<usize>)>>,
}

/// Chunks per vector and a piece pattern per vector, for every shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub chunks: usize,
    counts: Vec<Vec<usize>>,
    patterns: Vec<Vec<usize>>,
}

/// A small topology shared by the unit tests of the parts.
#[cfg(test)]
mod testing {
    use crate::front::generate::{generate, GenParams};
    use crate::ir::Topology;

    pub(super) fn dgx1() -> Topology {
        generate("dgx1-v100", &GenParams::default()).unwrap()
    }
}
