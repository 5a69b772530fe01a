//! Tree packing: the reduction trees of every owner that load the
//! topology's links least, found by column generation over all
//! single-route in-trees ([`lp`]), rounded to chunks and built by
//! [`super::forest`].
//!
//! Its LP optimum is the best any schedule of reduction trees over rscc's
//! routes can reach at large sizes: it has no per-owner order (unlike
//! `flow`) and no fixed families (unlike `mix`), GPUs relay as inner tree
//! nodes, and switches only route. Where the cut bound x* counts several
//! paths between one pair of GPUs that single routes cannot use, the
//! LP's certified lower bound ([`lp::Packing::lower`]) is the tighter
//! yardstick (docs/cost-model.md).

pub mod arborescence;
pub mod lp;

use super::{
    forest, Budget, Candidate, Context, Offer, Score, Search, Searched, Stop, SynthError,
    Synthesizer,
};
use crate::ir::msccl::{MAX_CHANNELS, MAX_CHUNKS_PER_LOOP};
use crate::ir::Algorithm;
use forest::Form;
pub use lp::{Integral, Packing};
use std::rc::Rc;
use std::sync::Arc;

/// The packing synthesizer.
pub struct Pack;

/// Most ranks `pack` is offered for: each round prices N arborescences
/// over up to N² edges.
pub const PACK_MAX_RANKS: usize = 64;

/// Largest chunk count per shard tried when rounding.
const PACK_MAX_CHUNKS: usize = 16;

/// A request's packings, solved once: over all trees, and over layered
/// trees.
struct Solved(Result<(Rc<Packing>, Rc<Packing>), String>);

/// The request's packing LP over all trees (shared with every stage that
/// asks): its optimum and certificate bound every schedule over rscc's
/// routes.
pub fn packing(ctx: &Context) -> Result<Rc<Packing>, SynthError> {
    packings(ctx).map(|p| p.0)
}

/// The packing over all trees and the one over layered trees
/// ([`lp::solve_layered`]).
fn packings(ctx: &Context) -> Result<(Rc<Packing>, Rc<Packing>), SynthError> {
    let n = ctx.ranks();
    if n > PACK_MAX_RANKS {
        return Err(SynthError::not_offered(
            "pack",
            format!("{n} ranks (offered up to {PACK_MAX_RANKS})"),
        ));
    }
    if n < 2 {
        return Err(SynthError::not_offered("pack", "fewer than two ranks"));
    }
    ctx.shared(|c| {
        let (tl, seed) = (c.opts.time_limit_s, c.opts.seed);
        Solved(lp::solve(c.topo, tl, seed).and_then(|full| {
            let layered = lp::solve_layered(c.topo, tl, seed)?;
            Ok((Rc::new(full), Rc::new(layered)))
        }))
    })
    .0
    .clone()
    .map_err(|e| SynthError::failed("pack", e))
}

impl Synthesizer for Pack {
    fn name(&self) -> &'static str {
        "pack"
    }
    fn summary(&self) -> &'static str {
        "tree-packing LP by column generation (bandwidth-optimal over single-route reduction trees)"
    }
    fn offer(&self, ctx: &Context) -> Result<Offer, SynthError> {
        let (full, layered) = packings(ctx)?;
        let most = PACK_MAX_CHUNKS
            .min(MAX_CHUNKS_PER_LOOP / full.n.max(1))
            .max(1);
        let counts: Vec<usize> = match ctx.opts.chunks {
            Some(c) => vec![c],
            None => (1..=most).collect(),
        };
        let plans = plans(ctx, &[&full, &layered], &counts);
        Ok(Offer {
            search: Some(Box::new(PackSearch {
                plans,
                lanes: ctx.ranks().min(MAX_CHANNELS),
                deeper: ctx.opts.chunks.is_none(),
            })),
            ..Offer::default()
        })
    }
}

/// Message size the packings are scored at: large, where bandwidth decides.
pub const PACK_SIZE: u64 = 1 << 30;

/// How much faster at [`PACK_SIZE`] a plan with more chunks must be than
/// one with fewer (a smaller gain is tile rounding, not bandwidth, and
/// more chunks cost steps and pipeline fill at medium sizes).
const PACK_GAIN: f64 = 0.005;

/// Largest chunk count whose local search is tried (more chunks fill
/// longer, so they rarely win).
const SEARCH_MAX_CHUNKS: usize = 8;

/// Program steps the scoring may lower in all before it stops: every
/// plan on 8 ranks (100–250 steps each), about ten on 16, three on 32
/// (simulating one 32-rank plan at 1 GiB takes 0.1–2 s on two cores).
const PACK_WORK: usize = 5_000;

/// The integral packings worth scoring, fewest chunks first (then best
/// [`forest::estimate`]): for each of `packings` (all trees, layered
/// trees) and each chunk count, its rounding, and its local search
/// ([`Packing::integral`]) up to [`SEARCH_MAX_CHUNKS`] chunks (any count
/// asked for by `--chunks`) where the rounding is more than 0.1 % above the
/// LP; a plan that is a kept one with every count scaled is dropped.
fn plans(ctx: &Context, packings: &[&Packing], counts: &[usize]) -> Vec<Arc<Integral>> {
    let mut out: Vec<(f64, Arc<Integral>)> = Vec::new();
    // Plans already kept, as per-owner trees with their share of the
    // shard: a plan that is another with every count scaled (a star with
    // 2 chunks per shard where 1 does) only fills longer.
    let mut kept: Vec<Shares> = Vec::new();
    let mut add = |i: Integral, out: &mut Vec<(f64, Arc<Integral>)>| {
        let shares: Shares = i
            .trees
            .iter()
            .map(|ts| {
                let mut v: Vec<_> = ts
                    .iter()
                    .map(|(p, k)| {
                        let g = gcd(*k, i.chunks);
                        (p.clone(), (k / g, i.chunks / g))
                    })
                    .collect();
                v.sort();
                v
            })
            .collect();
        if !kept.contains(&shares) {
            kept.push(shares);
            let (a, levels) = i.build(1);
            let est = forest::estimate(ctx.topo, &a, levels).unwrap_or(f64::INFINITY);
            out.push((est, Arc::new(i)));
        }
    };
    for p in packings {
        for &c in counts {
            let r = p.rounding(c);
            let slow = r.u > p.t * (1.0 + 1e-3);
            add(r, &mut out);
            if slow && (c <= SEARCH_MAX_CHUNKS || counts.len() == 1) {
                if let Some(m) = p.integral(c) {
                    add(m, &mut out);
                }
            }
        }
    }
    out.sort_by(|a, b| a.1.chunks.cmp(&b.1.chunks).then(a.0.total_cmp(&b.0)));
    out.into_iter().map(|x| x.1).collect()
}

/// A plan as per-owner trees, each with its share of the shard as a
/// reduced fraction.
type Shares = Vec<Vec<(Vec<usize>, (usize, usize))>>;

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a.max(1)
    } else {
        gcd(b, a % b)
    }
}

/// Scores each plan at [`PACK_SIZE`] in the simulator, grouped, then the
/// best few split, and keeps the fastest.
struct PackSearch {
    plans: Vec<Arc<Integral>>,
    lanes: usize,
    /// Whether to offer the winner's deeper pipelines (not where the
    /// request fixes the chunk count).
    deeper: bool,
}

/// Plans scored at once (on up to as many cores; fixed, so the answer is
/// the same on any machine): the budget is asked between batches.
const SCORE_BATCH: usize = 2;

/// How many of the fastest grouped plans (of more than one chunk per
/// shard) are also scored split.
const SPLIT_PLANS: usize = 8;

/// Chunks per loop (all owners' together) the grouped winner's counts
/// are scaled up to, pipelined, for medium sizes: below MSCCL's tile a
/// chunk is one message, so a class pipelines only chunk by chunk, and a
/// class of `k` chunks on a tree of `h` levels takes about (k + h − 1)
/// hops of a chunk where its load is k. Scaled by p, the same trees and
/// loads take (p·k + h − 1) hops of a p times smaller chunk: the fill
/// shrinks p-fold, for p times the messages, each with its α. Which
/// factor pays depends on the size, so each is scored (a generated 8-GPU
/// mesh, seed 72, at 16 MiB: 96.5 µs with 2 chunks per shard, 64.0 with
/// 8). p is the power of two that comes closest from below: the runtime
/// takes a file only for the counts its chunks per shard divide, so no
/// odd factor is added to the winner's. 512 serves 16-GPU plans of three
/// chunks per shard, which 256 scales only fourfold (2 × p4de at 16 MiB:
/// 1463 µs with 192 chunks per loop, 1444 with 384), and 1024 the same
/// on 32 GPUs (4 × p4de at 1 GiB: 93.5 → 94.4 % of the bound).
const PIPELINE_CHUNKS: [usize; 5] = [64, 128, 256, 512, 1024];

/// The factors p ≥ 2 (powers of two, each once) that scale a plan of
/// `chunks` chunks per shard on `owners` owners to about each of
/// [`PIPELINE_CHUNKS`] chunks per loop, from below.
fn pipeline_factors(owners: usize, chunks: usize) -> Vec<usize> {
    let mut factors: Vec<usize> = Vec::new();
    for per_loop in PIPELINE_CHUNKS {
        // A power of two: the file then serves the counts the winner's
        // does, with no new odd factor in its divisor.
        let most = per_loop / owners.max(1) / chunks.max(1);
        if most < 2 {
            continue;
        }
        let p = 1 << most.ilog2();
        if !factors.contains(&p) {
            factors.push(p);
        }
    }
    factors
}

/// The sizes at which a schedule of `chunks` chunks per shard on `n`
/// ranks has chunks of one MSCCL tile at most, and of at least 1/64 of
/// one (32 KiB): above, the tiles pipeline every chunk, and more chunks
/// only add messages; below, a message's α weighs as much as its bytes
/// on fast links (32 KiB takes 0.33 µs at 100 GB/s, against α of 0.7 µs
/// and more), and a variant that reached 1 MiB there (32 chunks per loop)
/// won no cell on eight fabrics measured, while each size scored costs a
/// simulation.
fn single_message_sizes(n: usize, chunks: usize) -> std::ops::Range<u64> {
    let top = (n * chunks) as u64 * crate::ir::msccl::SIMPLE_TILE_BYTES;
    top / 64..top + 1
}

impl PackSearch {
    /// The channels a plan's form starts from: one per owner grouped, one
    /// per chunk split (within MSCCL's channels).
    fn lanes(&self, plan: &Integral, form: Form) -> usize {
        match form {
            Form::Split => (plan.trees.len() * plan.chunks).clamp(1, MAX_CHANNELS),
            _ => self.lanes,
        }
    }

    /// `plan` laid out as `form`, scored on its channels or, where that
    /// exceeds the threadblocks the GPU has, on the most channels (halving)
    /// within them: ((over the limits, time), channels). A plan over the
    /// SMs on every channel count scores by its excess on its first. (An
    /// allreduce holds both halves' threadblocks: on one channel per owner
    /// a good plan can exceed the GPU where a poor one with fewer peers
    /// fits.)
    fn score(&self, plan: &Integral, form: Form, score: &Score) -> ((f64, f64), usize) {
        let (mut l, mut first) = (self.lanes(plan, form), None);
        loop {
            match score(&plan.build_form(l, form).0) {
                Ok(ends) => return ((0.0, ends.iter().copied().fold(0.0, f64::max)), l),
                Err(excess) => {
                    let full = *first.get_or_insert(excess);
                    if !excess.is_finite() || l == 1 {
                        return ((full, 0.0), l);
                    }
                    l /= 2;
                }
            }
        }
    }
}

impl Search for PackSearch {
    fn score_size(&self) -> u64 {
        PACK_SIZE
    }
    fn budget(&self) -> Budget {
        Budget {
            evals: self.plans.len(),
            steps: PACK_WORK,
        }
    }
    /// The fastest plan grouped (one channel per owner) within the budget,
    /// a plan with more chunks preferred only where it is [`PACK_GAIN`]
    /// faster; then the [`SPLIT_PLANS`] fastest of them with more than one
    /// chunk per shard split (one channel per chunk; these few runs come
    /// on top of the budget, which bounds the plans), and the split one
    /// where it is [`PACK_GAIN`] faster than every grouped one. The
    /// candidates are the winner on the channels it starts from, half as
    /// many, and so on (the driver keeps the first that fits, and an
    /// allreduce's halves on every channel count it tried are what `auto`
    /// pairs); the extras, the fastest of the other form and the grouped
    /// winner chunk by chunk (`forest::algorithm`'s pipelined form, for
    /// where a chunk is one message), and at the sizes where a chunk is one
    /// message, the winner with its counts scaled to about
    /// [`PIPELINE_CHUNKS`] chunks per loop, pipelined.
    fn run(self: Box<Self>, stop: &Stop, score: &Score) -> Searched {
        let better = |a: (f64, f64), b: (f64, f64)| {
            a.0 < b.0 || (a.0 == b.0 && a.1 < b.1 * (1.0 - PACK_GAIN))
        };
        // Per plan scored grouped: (key, plan, channels), SCORE_BATCH
        // plans at a time, the budget asked before each.
        let mut grouped: Vec<((f64, f64), usize, usize)> = Vec::new();
        let mut k = 0;
        while k < self.plans.len() && (k == 0 || !stop(k)) {
            let batch: Vec<usize> = (k..self.plans.len().min(k + SCORE_BATCH)).collect();
            let keys = crate::par::map(&batch, |&i| {
                self.score(&self.plans[i], Form::Classes, score)
            });
            for (&i, (key, l)) in batch.iter().zip(keys) {
                grouped.push((key, i, l));
            }
            k += batch.len();
        }
        let mut best_grouped: Option<((f64, f64), usize, usize)> = None;
        for &g in &grouped {
            if best_grouped.is_none_or(|b| better(g.0, b.0)) {
                best_grouped = Some(g);
            }
        }
        let mut order: Vec<_> = grouped
            .iter()
            .filter(|g| self.plans[g.1].chunks > 1)
            .collect();
        order.sort_by(|a, b| a.0 .0.total_cmp(&b.0 .0).then(a.0 .1.total_cmp(&b.0 .1)));
        let mut best_split: Option<((f64, f64), usize, usize)> = None;
        let split: Vec<usize> = order.into_iter().take(SPLIT_PLANS).map(|g| g.1).collect();
        let keys = crate::par::map(&split, |&i| self.score(&self.plans[i], Form::Split, score));
        for (&i, (key, l)) in split.iter().zip(keys) {
            if best_split.is_none_or(|b| key < b.0) {
                best_split = Some((key, i, l));
            }
        }
        let split_wins = match (best_grouped, best_split) {
            (Some(g), Some(s)) => better(s.0, g.0),
            (None, Some(_)) => true,
            _ => false,
        };
        let build = |plan: &Arc<Integral>, form: Form, lanes: usize| {
            let plan = plan.clone();
            Box::new(move || plan.build_form(lanes, form).0) as Candidate
        };
        let grouped_best = best_grouped.map(|b| (b, Form::Classes));
        let split_best = best_split.map(|b| (b, Form::Split));
        let (win, other) = if split_wins {
            (split_best, grouped_best)
        } else {
            (grouped_best, split_best)
        };
        // The first plan is always scored, so some form has a winner.
        let ((_, k, _), form) = win.expect("a scored plan");
        let plan = &self.plans[k];
        let mut lanes = vec![self.lanes(plan, form)];
        while let Some(&l) = lanes.last().filter(|&&l| l > 1) {
            lanes.push(l / 2);
        }
        let candidates = lanes.into_iter().map(|l| build(plan, form, l)).collect();
        let mut extras: Vec<Candidate> = Vec::new();
        if let Some(((_, k, l), form)) = other {
            extras.push(build(&self.plans[k], form, l));
        }
        let (k, l) = best_grouped.map_or((0, self.lanes), |b| (b.1, b.2));
        extras.push(build(&self.plans[k], Form::Pipelined, l));
        // The grouped winner's trees deeper in the pipeline, for where a
        // chunk is one message: where they have levels to fill (a star's
        // chunks leave at once, however many there are).
        let win = &self.plans[k];
        let mut below: Vec<(Candidate, std::ops::Range<u64>)> = Vec::new();
        let levels = win.build(1).1;
        let factors = if self.deeper && levels > 1 {
            pipeline_factors(win.trees.len(), win.chunks)
        } else {
            Vec::new()
        };
        for p in factors {
            let plan = Arc::new(win.scaled(p));
            let sizes = single_message_sizes(plan.trees.len(), plan.chunks);
            below.push((build(&plan, Form::Pipelined, l), sizes));
        }
        Searched {
            candidates,
            extras,
            below,
        }
    }
}

impl Integral {
    /// This plan with every count multiplied by `p`: the same trees and
    /// loads, `p` times the chunks.
    pub fn scaled(&self, p: usize) -> Integral {
        Integral {
            chunks: self.chunks * p,
            trees: self
                .trees
                .iter()
                .map(|ts| ts.iter().map(|(t, k)| (t.clone(), k * p)).collect())
                .collect(),
            u: self.u,
        }
    }

    /// The Algorithm on at most `lanes` channels, each tree's chunks one
    /// class, and its levels.
    pub fn build(&self, lanes: usize) -> (Algorithm, usize) {
        self.build_form(lanes, Form::Classes)
    }

    /// [`Integral::build`], laid out as `form` (`forest::algorithm`).
    pub fn build_form(&self, lanes: usize, form: Form) -> (Algorithm, usize) {
        let n = self.trees.len();
        forest::algorithm("pack", n, self.chunks, &self.classes(0..n), lanes, form)
    }

    /// The allreduce of an allreduce's packing ([`lp::solve_allreduce`]):
    /// the reduce-scatter of its in-trees, then the broadcast down its
    /// out-trees, each half on at most `lanes` channels of its own. An
    /// out-tree (`parent[v]`: the rank v receives from) is the in-tree of
    /// the reversed fabric with the same parents, so the broadcast is
    /// the allgather dual of the reduce-scatter built on those trees.
    pub fn build_allreduce(&self, lanes: usize) -> Algorithm {
        let n = self.trees.len() / 2;
        let name = "pack-joint";
        let half = |groups| {
            let classes = self.classes(groups);
            forest::algorithm(name, n, self.chunks, &classes, lanes, Form::Classes).0
        };
        Algorithm::allreduce(&half(0..n), &half(n..2 * n).allgather_dual())
    }

    /// The classes of column groups `groups` (owner: the group's index
    /// less the range's start), each tree's chunks one class.
    fn classes(&self, groups: std::ops::Range<usize>) -> Vec<forest::Class> {
        let start = groups.start;
        let mut classes = Vec::new();
        for g in groups {
            let mut first = 0;
            for (parent, len) in &self.trees[g] {
                classes.push(forest::Class {
                    owner: g - start,
                    first,
                    len: *len,
                    parent: parent.clone(),
                });
                first += len;
            }
        }
        classes
    }
}

/// Most chunks per shard an allreduce's packing is rounded to.
const JOINT_MAX_CHUNKS: usize = 4;

/// Most ranks the allreduce's joint packing is offered for: on 8 ×
/// DGX-H100 (64 ranks) its LP and its candidate's scoring doubled the
/// allreduce's synthesis (9.9 → 19.2 s) and won no band.
pub const JOINT_MAX_RANKS: usize = 32;

/// The allreduce of the machine's joint packing ([`lp::solve_allreduce`]),
/// for `auto` to score beside the composed ones: of its roundings to 1 …
/// `JOINT_MAX_CHUNKS` (4) chunks per shard (each also locally searched where
/// the rounding is above the LP) the one with the least utilisation, a
/// plan with more chunks preferred only where it is 0.5 % less utilised
/// (`PACK_GAIN`); built on one channel per owner per half, then half as
/// many, and so on (the driver keeps the first that fits). An error
/// on fewer than 2 or more than [`JOINT_MAX_RANKS`] ranks, or where its
/// LP fails.
pub fn allreduce_candidates(ctx: &Context) -> Result<Vec<Candidate>, SynthError> {
    let n = ctx.ranks();
    if !(2..=JOINT_MAX_RANKS).contains(&n) {
        return Err(SynthError::not_offered(
            "pack",
            format!("{n} ranks (its joint packing is offered from 2 up to {JOINT_MAX_RANKS})"),
        ));
    }
    struct Joint(Result<Rc<Packing>, String>);
    let p = ctx
        .shared(|c| {
            Joint(lp::solve_allreduce(c.topo, c.opts.time_limit_s, c.opts.seed).map(Rc::new))
        })
        .0
        .clone()
        .map_err(|e| SynthError::failed("pack", e))?;
    let most = JOINT_MAX_CHUNKS.min(MAX_CHUNKS_PER_LOOP / n).max(1);
    let counts: Vec<usize> = match ctx.opts.chunks {
        Some(c) => vec![c],
        None => (1..=most).collect(),
    };
    let mut best: Option<Integral> = None;
    for c in counts {
        let r = p.rounding(c);
        let plan = match p.integral(c) {
            Some(m) if m.u < r.u => m,
            _ => r,
        };
        if best
            .as_ref()
            .is_none_or(|b| plan.u < b.u * (1.0 - PACK_GAIN))
        {
            best = Some(plan);
        }
    }
    let plan = Arc::new(best.expect("at least one chunk count"));
    let mut lanes = vec![n.min(MAX_CHANNELS / 2)];
    while let Some(&l) = lanes.last().filter(|&&l| l > 1) {
        lanes.push(l / 2);
    }
    Ok(lanes
        .into_iter()
        .map(|l| {
            let plan = plan.clone();
            Box::new(move || plan.build_allreduce(l)) as Candidate
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bound::bandwidth_bound;
    use crate::front::generate::{generate, GenParams};
    use crate::ir::Collective;

    /// Each rung scales by the power of two that comes closest from
    /// below, once: 16 owners of three chunks (48 per loop) reach 96, 192,
    /// 384 and 768; 8 owners of one chunk 64 … 1024; a plan already at
    /// 256 per loop only the last two rungs, one at 1024 none.
    #[test]
    fn pipeline_factors_climb_each_rung_from_below() {
        assert_eq!(pipeline_factors(16, 3), vec![2, 4, 8, 16]);
        assert_eq!(pipeline_factors(8, 1), vec![8, 16, 32, 64, 128]);
        assert_eq!(pipeline_factors(32, 8), vec![2, 4]);
        assert_eq!(pipeline_factors(64, 16), Vec::<usize>::new());
    }

    /// The packing is never below the cut bound, its certified bound never
    /// above the packing, and every rounding builds valid trees.
    #[test]
    fn between_its_certificate_and_above_the_cut_bound() {
        for name in ["dgx1-v100", "switch", "dgx2-v100", "mi300x", "line", "ring"] {
            let topo = generate(name, &GenParams::default()).unwrap();
            let p = lp::solve(&topo, 10.0, 0).unwrap();
            let x = bandwidth_bound(&topo, Collective::ReduceScatter)
                .unwrap()
                .x_star_f64();
            assert!(p.t >= x * (1.0 - 1e-6), "{name}: {} < x* {x}", p.t);
            assert!(p.lower <= p.t * (1.0 + 1e-9), "{name}");
            assert!(
                p.lower >= x * (1.0 - 1e-3),
                "{name}: certificate {} below x* {x}",
                p.lower
            );
            for c in [1, 3, 7] {
                for lanes in [1, 4, topo.num_ranks()] {
                    let a = p
                        .integral(c)
                        .unwrap_or_else(|| p.rounding(c))
                        .build(lanes)
                        .0;
                    a.check()
                        .unwrap_or_else(|e| panic!("{name} c{c} l{lanes}: {e}"));
                    assert!(a.num_channels() <= lanes);
                }
            }
        }
    }

    /// An allreduce's joint packing lies between the allreduce bound and
    /// the two halves packed alone (on machines whose links are the same
    /// both ways, where the allgather's packing is the reduce-scatter's),
    /// its certificate below it, and it builds valid allreduces. On random
    /// fabric 5 (5 GPUs under PCIe switches; GPU 2 on one 16 GB/s link) it
    /// is 1/6 below the halves': the reduce-scatter half alone sends all of
    /// GPU 2's partial sums straight to it, which the broadcast half needs.
    #[test]
    fn the_joint_allreduce_packing_is_between_the_bound_and_the_halves() {
        let random5 = GenParams {
            seed: Some(5),
            ..GenParams::default()
        };
        for (name, params) in [
            ("dgx1-v100", GenParams::default()),
            ("switch", GenParams::default()),
            ("ring", GenParams::default()),
            ("random", random5),
        ] {
            let topo = generate(name, &params).unwrap();
            let p = lp::solve_allreduce(&topo, 10.0, 0).unwrap();
            let halves = 2.0 * lp::solve(&topo, 10.0, 0).unwrap().t;
            let x = bandwidth_bound(&topo, Collective::AllReduce)
                .unwrap()
                .x_star_f64();
            assert!(p.t >= x * (1.0 - 1e-6), "{name}: {} < x* {x}", p.t);
            assert!(p.t <= halves * (1.0 + 1e-6), "{name}: {} > {halves}", p.t);
            assert!(p.lower <= p.t * (1.0 + 1e-9), "{name}");
            if name == "random" {
                assert!(
                    p.t <= halves * (5.0 / 6.0) * (1.0 + 1e-6),
                    "{} vs {halves}",
                    p.t
                );
            }
            for c in [1, 3] {
                for lanes in [1, 4] {
                    let a = p.rounding(c).build_allreduce(lanes);
                    assert_eq!(a.spec.coll, Collective::AllReduce);
                    a.check()
                        .unwrap_or_else(|e| panic!("{name} c{c} l{lanes}: {e}"));
                }
            }
        }
    }

    /// Split, a plan's chunks share each link fairly and end together:
    /// on a generated 3-cube (random seed 2) and an 8-GPU mesh (seed 49)
    /// the same integral packings move 1 GiB faster split than grouped,
    /// where one connection per owner and edge carries several chunks and
    /// the busiest connections finish while the links the others left
    /// wait; at 16 GiB split comes within a few per cent of the plan's own
    /// link loads.
    #[test]
    fn split_plans_finish_near_their_link_loads() {
        use forest::testing::{random_fabric, simulated_us};
        for (seed, chunks) in [(2, 3), (49, 4)] {
            let topo = random_fabric(seed);
            let n = topo.num_ranks();
            let p = lp::solve(&topo, 10.0, 0).unwrap();
            let plan = p.integral(chunks).unwrap_or_else(|| p.rounding(chunks));
            let time = |form: Form, lanes: usize, size: u64| {
                simulated_us(&topo, &plan.build_form(lanes, form).0, size)
            };
            let lanes = (n * chunks).min(MAX_CHANNELS);
            let (grouped, split) = (
                time(Form::Classes, n, 1 << 30),
                time(Form::Split, lanes, 1 << 30),
            );
            // Measured: seed 2 7388.5 → 6701.1 µs, seed 49 2292.9 → 2242.6.
            let most = if seed == 2 { 0.95 } else { 0.99 };
            assert!(split <= most * grouped, "seed {seed}: {split} vs {grouped}");
            // The plan's own link loads at 16 GiB (u per unit of shard):
            // split is within 0.5 % (seed 2) and 1.2 % (seed 49) of them.
            let shard = (16u64 << 30) as f64 / n as f64;
            let loads = plan.u * shard / 1e3;
            let big = time(Form::Split, lanes, 16 << 30);
            assert!(big <= 1.02 * loads, "seed {seed}: {big} vs {loads}");
            assert!(big >= loads * (1.0 - 1e-9), "seed {seed}: {big} vs {loads}");
        }
    }

    /// Below MSCCL's tile a chunk is one message, so a class pipelines
    /// only chunk by chunk: the same trees with every count scaled,
    /// pipelined, fill shorter at medium sizes. A generated 8-GPU mesh
    /// (seed 72, 6 levels), its 2-chunk plan at 16 MiB.
    #[test]
    fn scaled_plans_pipeline_where_a_chunk_is_one_message() {
        use forest::testing::{random_fabric, simulated_us};
        let topo = random_fabric(72);
        let n = topo.num_ranks();
        let p = lp::solve(&topo, 10.0, 0).unwrap();
        let plan = p.integral(2).unwrap_or_else(|| p.rounding(2));
        let time = |plan: &Integral, form: Form| {
            simulated_us(&topo, &plan.build_form(n, form).0, 16 << 20)
        };
        let plain = time(&plan, Form::Classes).min(time(&plan, Form::Pipelined));
        let scaled = plan.scaled(4);
        assert_eq!((scaled.chunks, scaled.u), (8, plan.u));
        let deeper = time(&scaled, Form::Pipelined);
        // Measured: 96.5 µs (the better of grouped and pipelined), 64.0.
        assert!(deeper <= 0.8 * plain, "{deeper} vs {plain}");
        // 64 chunks per loop: one tile (2 MiB) each at 128 MiB, 32 KiB at
        // 2 MiB.
        assert_eq!(single_message_sizes(n, 8), 2 << 20..(128 << 20) + 1);
    }

    /// Where single routes can carry the cut bound the packing reaches it;
    /// on DGX-1 that needs GPUs relaying inside the trees, which the flow
    /// LP's per-owner orders do not allow (it stays at 1.07 x*).
    #[test]
    fn reaches_the_cut_bound_where_routes_allow() {
        for name in ["dgx1-v100", "dgx-h100", "ring", "dgx2-v100"] {
            let topo = generate(name, &GenParams::default()).unwrap();
            let p = lp::solve(&topo, 10.0, 0).unwrap();
            let x = bandwidth_bound(&topo, Collective::ReduceScatter)
                .unwrap()
                .x_star_f64();
            assert!((p.t / x - 1.0).abs() < 1e-6, "{name}: {} vs x* {x}", p.t);
            assert!(
                (p.lower / x - 1.0).abs() < 1e-4,
                "{name}: {} vs x* {x}",
                p.lower
            );
        }
    }
}
