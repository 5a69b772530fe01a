//! Synthesis: Topology × Spec → Algorithm.
//!
//! Every synthesizer is one file here and one line of [`REGISTRY`]: a value
//! implementing [`Synthesizer`], which says whether it serves a request
//! ([`Synthesizer::offer`], or why not, as data), and hands the driver its
//! candidates best first, built only when the driver asks for them. The
//! driver (`compile/`) lowers and verifies them, keeps the first that fits
//! the runtime, and for `--algo auto` scores every registered synthesizer
//! in the simulator. `synth/` never calls `lower`, `verify` or `sim`: a
//! synthesizer that searches by simulated time ([`Search`]) is handed the
//! driver's score.
//!
//! Work two synthesizers need (the rings, the mixture LP) is computed once
//! per request through [`Context::shared`], and a later request on the
//! same machine with the same solver options may take it
//! ([`Context::adopt`]).

pub mod blocks;
pub mod direct;
pub mod flow;
pub mod forest;
pub mod gap;
pub mod halving;
pub mod hier;
pub mod hring;
pub mod mix;
pub mod pack;
pub mod pat;
pub mod ring;
pub mod sccl;
pub mod tree;

use crate::ir::msccl;
use crate::ir::{Algorithm, Collective, Topology};
use std::any::{Any, TypeId};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// A synthesizer's name: the key of [`REGISTRY`] and of `--algo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algo {
    Ring,
    Direct,
    Tree,
    Hier,
    Mix,
    Flow,
    Pack,
    Sccl,
    Gap,
    HierRing,
    HierHalving,
    HierPat,
    HierBlocks,
}

/// Every synthesizer, in the order `auto` compiles them (the ring first:
/// it is the baseline and always applies).
pub const REGISTRY: [(Algo, &dyn Synthesizer); 13] = [
    (Algo::Ring, &ring::Ring),
    (Algo::Direct, &direct::Direct),
    (Algo::Tree, &tree::Tree),
    (Algo::Hier, &hier::Hier),
    (Algo::Mix, &mix::Mix),
    (Algo::Flow, &flow::Flow),
    (Algo::Pack, &pack::Pack),
    (Algo::Sccl, &sccl::Sccl),
    (Algo::Gap, &gap::GapSynth),
    (Algo::HierRing, &hring::HierRing),
    (Algo::HierHalving, &halving::HierHalving),
    (Algo::HierPat, &pat::HierPat),
    (Algo::HierBlocks, &blocks::HierBlocks),
];

impl Algo {
    /// Every synthesizer, in registry order.
    pub fn all() -> impl Iterator<Item = Algo> {
        REGISTRY.into_iter().map(|(a, _)| a)
    }
    pub fn parse(s: &str) -> Option<Algo> {
        Algo::all().find(|a| a.name() == s)
    }
    pub fn synthesizer(self) -> &'static dyn Synthesizer {
        REGISTRY
            .into_iter()
            .find(|(a, _)| *a == self)
            .map(|(_, s)| s)
            .expect("every Algo is registered")
    }
    pub fn name(self) -> &'static str {
        self.synthesizer().name()
    }
    /// The registered names, comma-separated (help and error texts).
    pub fn names() -> String {
        Algo::all().map(Algo::name).collect::<Vec<_>>().join(", ")
    }
}

/// A synthesizer: one algorithm family.
pub trait Synthesizer: Sync {
    /// Its `--algo` name.
    fn name(&self) -> &'static str;
    /// One line saying what it builds.
    fn summary(&self) -> &'static str;
    /// Whether `auto` scores it on this request: `Err(reason)` skips it
    /// there (it is still available by name). Default: whenever it offers.
    fn in_auto(&self, _ctx: &Context) -> Result<(), String> {
        Ok(())
    }
    /// What it offers for the request, or why it cannot serve it.
    fn offer(&self, ctx: &Context) -> Result<Offer, SynthError>;
}

/// A candidate Algorithm, built when the driver asks for it (the driver
/// stops at the first candidate that fits the runtime's limits, so a long
/// fallback list costs nothing until it is needed).
pub type Candidate = Box<dyn FnOnce() -> Algorithm>;

/// A candidate that is already built.
pub fn ready(a: Algorithm) -> Candidate {
    Box::new(move || a)
}

/// What a synthesizer offers for one request.
#[derive(Default)]
pub struct Offer {
    /// Candidates for every size, best first: the driver emits the first
    /// that fits (and passes the verifier).
    pub candidates: Vec<Candidate>,
    /// Small-message candidates `auto` scores beside them, best first:
    /// they may be safe only up to a size (multi-chunk steps that deadlock
    /// once MSCCL splits them), which the driver works out.
    pub small: Vec<Candidate>,
    /// Further groups `auto` scores as well, each its own first fit and,
    /// like `small`, limited to the sizes where it is safe (`hier`'s
    /// three-channel star and rail lanes, `flow`'s pipelined and split
    /// classes).
    pub more: Vec<Vec<Candidate>>,
    /// Groups like `more` that serve size bands only, never a lone file
    /// (`-o FILE`): `ring`'s channel-split rings, whose many chunks per
    /// shard leave most counts to the runtime where no fall-through file
    /// stands beside them.
    pub bands: Vec<Vec<Candidate>>,
    /// A search the driver runs with its own score; when present it
    /// replaces `candidates`.
    pub search: Option<Box<dyn Search>>,
    /// Searches at other sizes that `auto` runs as well, on a thread
    /// beside `search`, their schedules scored beside the rest like
    /// `more` (`gap`'s search for medium messages). A request by name
    /// runs `search` only.
    pub more_searches: Vec<Box<dyn Search + Send>>,
}

impl Offer {
    pub fn new(candidates: Vec<Candidate>) -> Offer {
        Offer {
            candidates,
            ..Offer::default()
        }
    }
}

/// The driver's score of a candidate: per-rank end times (µs) at
/// [`Search::score_size`], or how far it is over the runtime's limits
/// (`Err(excess)`, ∞ when it cannot be lowered).
pub type Score<'a> = dyn Fn(&Algorithm) -> Result<Vec<f64>, f64> + Sync + 'a;
/// Asked between batches with the number of schedules scored so far:
/// whether the budget is spent.
pub type Stop<'a> = dyn Fn(usize) -> bool + Sync + 'a;

/// The default budget of a [`Search`] when the request sets no `evals`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Schedules scored.
    pub evals: usize,
    /// Program steps lowered in all (large schedules stop sooner).
    pub steps: usize,
}

/// A search guided by the driver's score (simulated time).
pub trait Search {
    /// The message size (bytes, nccl-tests' S) the score simulates.
    fn score_size(&self) -> u64;
    /// Its budget when the request sets none.
    fn budget(&self) -> Budget;
    /// Run it within `stop`.
    fn run(self: Box<Self>, stop: &Stop, score: &Score) -> Searched;
}

/// What a [`Search`] found.
pub struct Searched {
    /// Candidates for the result, best first.
    pub candidates: Vec<Candidate>,
    /// Further schedules `auto` may score (each compiled on its own, and
    /// dropped where it does not fit).
    pub extras: Vec<Candidate>,
    /// Schedules `auto` scores like `extras`, but only at the sizes
    /// (nccl-tests' S) in each one's range: built for some sizes, they
    /// add nothing at the others (`pack`'s trees with their counts scaled,
    /// pipelined, for where a chunk is one message but not a tiny one).
    pub below: Vec<(Candidate, std::ops::Range<u64>)>,
}

/// Why a synthesizer produced nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SynthError {
    /// The options cannot be met on any topology (a zero chunk count, a
    /// time limit out of range).
    #[error("{0}")]
    Options(String),
    /// The synthesizer does not apply to this topology or request.
    #[error("{algo}: not offered: {why}")]
    NotOffered { algo: &'static str, why: String },
    /// It applies, but its solver found nothing.
    #[error("{algo}: {why}")]
    Failed { algo: &'static str, why: String },
}

impl SynthError {
    pub fn not_offered(algo: &'static str, why: impl Into<String>) -> SynthError {
        SynthError::NotOffered {
            algo,
            why: why.into(),
        }
    }
    pub fn failed(algo: &'static str, why: impl Into<String>) -> SynthError {
        SynthError::Failed {
            algo,
            why: why.into(),
        }
    }
}

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
    /// Schedules a search may score (its budget: the same count gives the
    /// same schedule on any machine); None: the search's [`Budget`].
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

/// Largest `--time-limit` in seconds (about 31 years): larger ones would
/// overflow the deadlines the searches compute.
pub const MAX_TIME_LIMIT_S: f64 = 1e9;

/// One request: the topology, the options, and the work synthesizers
/// share, computed once.
pub struct Context<'t> {
    pub topo: &'t Topology,
    pub opts: SynthOptions,
    /// The runtime reduces in local passes of its own, after a message has
    /// arrived (RCCL: receive, then `re`), not on the fly: forms that only
    /// overlap those passes with the wire are offered where this holds.
    pub local_passes: bool,
    /// The op the reduce-scatters are made for: an allreduce composes each
    /// with its dual, so a shard's reduction feeds its broadcast piece by
    /// piece.
    pub op: Collective,
    shared: Analyses,
}

/// The analyses a request's synthesizers share ([`Context::shared`]):
/// each is a function of the machine and the solver options (time limit,
/// seed) only, never of the chunk count or the op, so a later request on
/// the same machine with the same solver options may take them
/// ([`Context::adopt`]: `-o DIR/`'s one-chunk selection after the main
/// one, which would otherwise solve the same LPs again).
#[derive(Clone, Default)]
pub struct Analyses {
    /// The solver options they were made with: time limit (its bits) and
    /// seed.
    made_with: (u64, u64),
    values: Rc<RefCell<HashMap<TypeId, Rc<dyn Any>>>>,
}

impl std::fmt::Debug for Analyses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Analyses({})", self.values.borrow().len())
    }
}

impl<'t> Context<'t> {
    /// A request, after the checks every request passes ([`check_request`]).
    pub fn new(topo: &'t Topology, opts: &SynthOptions) -> Result<Context<'t>, SynthError> {
        check_request(topo, opts)?;
        Ok(Context {
            topo,
            opts: opts.clone(),
            local_passes: false,
            op: Collective::ReduceScatter,
            shared: Analyses {
                made_with: (opts.time_limit_s.to_bits(), opts.seed.into()),
                values: Rc::default(),
            },
        })
    }

    /// This request's shared analyses, to hand to a later one.
    pub fn analyses(&self) -> Analyses {
        self.shared.clone()
    }

    /// Takes `earlier`'s analyses, made for the same machine, where they
    /// were made with this request's solver options (else keeps its own):
    /// the two requests then share them.
    pub fn adopt(&mut self, earlier: &Analyses) {
        if earlier.made_with == self.shared.made_with {
            self.shared = earlier.clone();
        }
    }

    /// The value of type `T` for this request, made by `make` the first
    /// time it is asked for (each shared analysis is its own type, e.g.
    /// [`ring::Rings`], so the type is the key).
    pub fn shared<T: Any>(&self, make: impl FnOnce(&Self) -> T) -> Rc<T> {
        let key = TypeId::of::<T>();
        if let Some(v) = self.shared.values.borrow().get(&key) {
            return v.clone().downcast::<T>().expect("keyed by its type");
        }
        // Not borrowed while `make` runs: it may ask for other values.
        let v = Rc::new(make(self));
        self.shared.values.borrow_mut().insert(key, v.clone());
        v
    }

    pub fn ranks(&self) -> usize {
        self.topo.num_ranks()
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

/// The checks every request passes before any synthesizer runs: GPUs to
/// synthesize for, a chunk count the runtime's offsets hold, a positive
/// time limit.
pub fn check_request(topo: &Topology, o: &SynthOptions) -> Result<(), SynthError> {
    let n = topo.num_ranks();
    let bad = |m: String| Err(SynthError::Options(m));
    if n == 0 {
        return bad("the topology has no GPUs".into());
    }
    if n > msccl::MAX_SUBS {
        return bad(format!(
            "the topology has {n} GPUs; an MSCCL XML file holds at most {} <gpu> elements (the runtimes' parser keeps {} children per element and does not check past that), so the largest rank count any schedule can serve is {}",
            msccl::MAX_SUBS,
            msccl::MAX_SUBS,
            msccl::MAX_SUBS
        ));
    }
    if o.chunks == Some(0) {
        return bad("--chunks must be at least 1".into());
    }
    if let Some(c) = o.chunks {
        if n.saturating_mul(c) > msccl::MAX_CHUNKS_PER_LOOP {
            return bad(format!(
                "--chunks {c} on {n} ranks gives {} chunks per loop; MSCCL offsets are int16, so at most {}",
                n.saturating_mul(c),
                msccl::MAX_CHUNKS_PER_LOOP
            ));
        }
    }
    if !(o.time_limit_s > 0.0 && o.time_limit_s <= MAX_TIME_LIMIT_S) {
        return bad(format!(
            "--time-limit must be a positive number of seconds up to {MAX_TIME_LIMIT_S:e}, got {}",
            o.time_limit_s
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `rscc topo generate ring`: 8 GPUs on a ring.
    fn ring8() -> Topology {
        crate::front::generate::generate("ring", &crate::front::generate::GenParams::default())
            .unwrap()
    }

    #[test]
    fn registry_names_are_unique_and_parse_back() {
        let names: Vec<&str> = Algo::all().map(Algo::name).collect();
        for (i, n) in names.iter().enumerate() {
            assert!(!names[..i].contains(n), "{n} registered twice");
            assert_eq!(Algo::parse(n).map(Algo::name), Some(*n));
        }
        assert_eq!(Algo::parse("auto"), None, "auto is a driver mode");
        assert_eq!(REGISTRY[0].0, Algo::Ring, "auto compiles the ring first");
    }

    /// The worked example of docs/architecture.md ("Adding a
    /// synthesizer"), as written there: its offer lowers and verifies.
    #[test]
    fn the_documented_example_synthesizer_works() {
        use crate::ir::Spec;
        pub struct IdRing;
        impl Synthesizer for IdRing {
            fn name(&self) -> &'static str {
                "idring"
            }
            fn summary(&self) -> &'static str {
                "one ring in rank order"
            }
            fn offer(&self, ctx: &Context) -> Result<Offer, SynthError> {
                let n = ctx.ranks();
                let order: Vec<usize> = (0..n).collect();
                let spec = Spec::reduce_scatter(n, ctx.opts.chunks.unwrap_or(1));
                Ok(Offer::new(vec![ready(super::ring::ring_algorithm(
                    spec,
                    &[order],
                ))]))
            }
        }
        let topo = ring8();
        let ctx = Context::new(&topo, &SynthOptions::default()).unwrap();
        let mut offer = IdRing.offer(&ctx).unwrap();
        let alg = (offer.candidates.remove(0))();
        alg.check().unwrap();
        let p = crate::lower::lower(&alg, &Default::default()).unwrap();
        crate::verify::verify(&p, &Default::default()).unwrap();
    }

    #[test]
    fn shared_values_are_made_once() {
        let topo = ring8();
        let ctx = Context::new(&topo, &SynthOptions::default()).unwrap();
        let made = std::cell::Cell::new(0);
        struct V(usize);
        let a = ctx.shared(|_| {
            made.set(made.get() + 1);
            V(7)
        });
        let b = ctx.shared(|_| {
            made.set(made.get() + 1);
            V(8)
        });
        assert_eq!((a.0, b.0, made.get()), (7, 7, 1));
    }

    #[test]
    fn a_later_request_takes_the_analyses_made_with_its_solver_options() {
        let topo = ring8();
        let first = Context::new(&topo, &SynthOptions::default()).unwrap();
        struct V(usize);
        first.shared(|_| V(7));
        let one_chunk = SynthOptions {
            chunks: Some(1),
            ..SynthOptions::default()
        };
        let mut later = Context::new(&topo, &one_chunk).unwrap();
        later.adopt(&first.analyses());
        assert_eq!(later.shared(|_| V(8)).0, 7);
        // Another seed may give another LP answer: its own.
        let seeded = SynthOptions {
            seed: 1,
            ..SynthOptions::default()
        };
        let mut other = Context::new(&topo, &seeded).unwrap();
        other.adopt(&first.analyses());
        assert_eq!(other.shared(|_| V(9)).0, 9);
    }
}
