//! The driver: synthesize → lower → verify, the one path every emitted
//! schedule takes (nothing leaves here unverified).
//!
//! Synthesizers make reduce-scatters; the driver makes the requested op
//! from them ([`Target`], target.rs): an allgather is the dual of a reduce-scatter
//! made for the reversed topology, an allreduce a reduce-scatter followed
//! by its dual (ir/algorithm.rs). Scores, limits and the verifier always
//! see the op itself on the machine itself.
//!
//! - [`fit`]: a synthesizer's candidates in order, the first that lowers
//!   within the runtime's limits and passes the verifier.
//! - [`search`]: a synthesizer's [`Search`](crate::synth::Search) run with
//!   the driver's score (lower with the request's options, simulate).
//! - [`auto`](mod@auto): every registered synthesizer compiled, each candidate scored
//!   in the simulator across the size range, the best per size band.

pub mod auto;
pub mod fit;
pub mod report;
pub mod search;
mod target;

pub use auto::{auto, auto_after, default_sizes, Band, BandFile, FallThrough, Progress, Selection};
pub(crate) use target::lower_shaped;
pub use target::{shape, SearchScores, Target};

use crate::ir::{Algorithm, Collective, Program, Runtime, Topology};
use crate::lower::LowerOptions;
use crate::synth::{Algo, Candidate, Context, Offer, SynthError, SynthOptions};
use crate::verify::VerifyReport;

/// What the driver compiles: one synthesizer, or every one with the
/// best per size band.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Every registered synthesizer `auto` scores, the best per size.
    Auto,
    /// One synthesizer.
    One(Algo),
}

impl Mode {
    /// `auto` or a registered synthesizer's name.
    pub fn parse(s: &str) -> Option<Mode> {
        if s == "auto" {
            Some(Mode::Auto)
        } else {
            Algo::parse(s).map(Mode::One)
        }
    }
}

#[derive(Debug, Clone)]
pub struct CompileOptions {
    pub mode: Mode,
    /// The collective to build.
    pub op: Collective,
    pub synth: SynthOptions,
    /// What the emitted file says (protocol, runtime, call modes, size
    /// band); its `name` is set per schedule ([`CompileOptions::lower_options`]).
    pub lower: LowerOptions,
    /// At most this many threadblocks per rank (None: the GPUs' SMs and the
    /// runtime's limit). An MSCCL kernel needs all its threadblocks
    /// resident at once; a lower budget leaves SMs to compute kernels and
    /// to a second collective running beside it.
    pub max_tbs: Option<usize>,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            mode: Mode::Auto,
            op: Collective::ReduceScatter,
            synth: SynthOptions::default(),
            lower: LowerOptions::default(),
            max_tbs: None,
        }
    }
}

impl CompileOptions {
    /// One algorithm with a chunk count (tests, scripts).
    pub fn algo(algo: Algo, chunks: Option<usize>) -> Self {
        let mut o = CompileOptions {
            mode: Mode::One(algo),
            ..Default::default()
        };
        o.synth.chunks = chunks;
        o
    }

    /// The lowering options of this request for a schedule of `algo`
    /// (`fused`: a fused allreduce, named `ar_fused_`).
    pub fn lower_options(&self, topo: &Topology, algo: Algo, fused: bool) -> LowerOptions {
        let op = match self.op {
            Collective::ReduceScatter => String::new(),
            Collective::AllReduce if fused => "ar_fused_".to_string(),
            o => format!("{}_", o.short()),
        };
        // The runtime a file is for is in its name where it is not the
        // executor's format alone (RCCL runs only the reduced step set).
        let rt = match self.lower.runtime {
            Runtime::Rccl => "rccl_",
            Runtime::Executor | Runtime::Legacy => "",
        };
        LowerOptions {
            name: format!(
                "rscc_{rt}{op}{}_{}_{}",
                algo.name(),
                sanitize(&topo.name),
                topo.num_ranks()
            ),
            max_tbs: self.tb_budget(topo),
            host_ranks: topo.host_ranks(),
            ..self.lower.clone()
        }
    }

    /// Threadblocks per rank a schedule may use: at most the GPUs' SMs
    /// (all of them must be co-resident), the runtime's threadblock limit
    /// (64 on RCCL) and the request's `max_tbs`, which defaults to
    /// [`default_max_tbs`].
    pub fn tb_budget(&self, topo: &Topology) -> usize {
        let sms = topo.min_sms().map_or(usize::MAX, |s| s as usize);
        let asked = self.max_tbs.unwrap_or_else(|| default_max_tbs(topo));
        sms.min(self.lower.runtime.max_tb_id()).min(asked)
    }
}

/// The threadblocks per rank a schedule may use unless the request says
/// otherwise: half the GPUs' SMs (rounded down, at least 1), unbounded
/// where no GPU states its SMs. An MSCCL kernel's threadblocks wait on
/// each other and on their peers, so all of them must be resident at
/// once; FSDP runs a reduce-scatter beside the next allgather on another
/// stream (and HSDP an allreduce beside them), so two rscc kernels that
/// each keep within half the SMs can both be resident once the compute
/// kernels beside them drain, where two that need more can wait on each
/// other forever. NCCL's own kernels keep within its channel count (one
/// block per channel, at most 32), which rscc's schedules, with one
/// threadblock per peer and channel, cannot match without giving up the
/// bandwidth that is their point; `--max-tbs` sets another budget (up to
/// the SMs).
pub fn default_max_tbs(topo: &Topology) -> usize {
    topo.min_sms()
        .map_or(usize::MAX, |s| (s as usize / 2).max(1))
}

/// A verified schedule and where it came from.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub algo: Algo,
    pub algorithm: Algorithm,
    pub program: Program,
    pub report: VerifyReport,
    /// Candidates dropped for exceeding runtime limits, with the reason.
    pub fallbacks: Vec<String>,
    /// The largest size (nccl-tests' S) the schedule may run at, when it is
    /// safe only up to a size: its multi-chunk steps deadlock once MSCCL
    /// splits them into one message per chunk, so `maxBytes` says where
    /// the split starts (docs/verifier.md). None: every size.
    pub max_size: Option<u64>,
    /// A schedule for size bands only, never `auto`'s lone file
    /// ([`crate::synth::Offer::bands`], and what is built from it).
    pub band_only: bool,
    /// The sizes `auto` scores it at: every size, or for a schedule built
    /// for some sizes only ([`crate::synth::Searched::below`], and what is
    /// built from it) those. Unscored, a size is never its band.
    pub scored: std::ops::Range<u64>,
}

impl Compiled {
    /// The synthesizer's name, and `-fused` for a fused allreduce (file
    /// names of band directories).
    pub fn form(&self) -> String {
        if self.algorithm.spec.is_fused() {
            format!("{}-fused", self.algo.name())
        } else {
            self.algo.name().to_string()
        }
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum CompileError {
    /// The synthesizer cannot serve the request (bad options, not
    /// offered for the topology, its solver found nothing).
    #[error(transparent)]
    Synth(#[from] SynthError),
    /// No candidate fits the runtime's limits and passes the verifier.
    #[error("{algo}: no candidate fits the runtime's limits and passes the verifier: {}", .reasons.join("; "))]
    NoFit {
        algo: &'static str,
        reasons: Vec<String>,
    },
    /// The request is malformed (no sizes to score).
    #[error("{0}")]
    Request(String),
    /// rscc produced a schedule its own verifier rejects, or the
    /// simulator cannot run: a bug.
    #[error("internal error (please report): {0}")]
    Internal(String),
}

impl CompileError {
    /// Whether the request, not rscc, is at fault (exit code 2).
    pub fn is_request(&self) -> bool {
        !matches!(self, CompileError::Internal(_))
    }
}

/// Synthesize, lower and verify the op of `opts` for `topo`. With
/// [`Mode::Auto`] the candidate that is best across the default size range
/// (least total time over the scored sizes) is returned.
pub fn compile(topo: &Topology, opts: &CompileOptions) -> Result<Compiled, CompileError> {
    match opts.mode {
        Mode::Auto => {
            let sel = auto(topo, opts, &default_sizes(), &Default::default(), None)?;
            let w = sel.overall;
            Ok(sel.candidates.into_iter().nth(w).expect("winner index"))
        }
        Mode::One(algo) => compile_one(topo, algo, opts),
    }
}

/// Everything one synthesizer yields for a request, compiled.
pub struct Yield {
    /// The schedule for every size.
    pub main: Compiled,
    /// A search's further schedules that fit (for `auto` to score).
    pub extras: Vec<Compiled>,
}

/// Compile one synthesizer: its candidates in order (or its search's),
/// the first that fits at every size.
pub fn compile_one(
    topo: &Topology,
    algo: Algo,
    opts: &CompileOptions,
) -> Result<Compiled, CompileError> {
    compile_one_for(topo, algo, opts, opts.op)
}

/// `compile_one` with the synthesizers told that the result becomes
/// `op` (`Context::op`): an allreduce's allgather half made as a
/// reduce-scatter on the reversed machine is an allgather's dual.
pub(crate) fn compile_one_for(
    topo: &Topology,
    algo: Algo,
    opts: &CompileOptions,
    op: Collective,
) -> Result<Compiled, CompileError> {
    let t = Target::new(topo, opts);
    let mut ctx = t.context(&opts.synth)?;
    ctx.op = op;
    let offer = algo.synthesizer().offer(&ctx)?;
    compile_offer(&t, &ctx, algo, offer.candidates, offer.search, opts).map(|y| y.main)
}

/// The synthesizer's small-message candidate, if it has one — possibly
/// safe only up to a size (`max_size`); an error when it has one and none
/// fits.
pub fn compile_small(
    topo: &Topology,
    algo: Algo,
    opts: &CompileOptions,
) -> Result<Option<Compiled>, CompileError> {
    let t = Target::new(topo, opts);
    let ctx = t.context(&opts.synth)?;
    let offer = algo.synthesizer().offer(&ctx)?;
    small(&t, algo, offer.small, opts)
}

/// A synthesizer's schedule for one algorithm and, where it has one, its
/// small-message schedule (`None` when it has none; the error when none
/// of them fits), from one offer.
pub fn compile_with_small(
    topo: &Topology,
    algo: Algo,
    opts: &CompileOptions,
) -> Result<(Compiled, Option<Result<Compiled, CompileError>>), CompileError> {
    let t = Target::new(topo, opts);
    let ctx = t.context(&opts.synth)?;
    let Offer {
        candidates,
        small: smalls,
        search,
        ..
    } = algo.synthesizer().offer(&ctx)?;
    let main = compile_offer(&t, &ctx, algo, candidates, search, opts)?.main;
    Ok((main, small(&t, algo, smalls, opts).transpose()))
}

fn small(
    t: &Target,
    algo: Algo,
    cands: Vec<Candidate>,
    opts: &CompileOptions,
) -> Result<Option<Compiled>, CompileError> {
    small_shaped(t, algo, t.shaped(algo, cands), opts)
}

/// [`small`] of candidates already made into the target's op.
fn small_shaped(
    t: &Target,
    algo: Algo,
    shaped: Vec<Candidate>,
    opts: &CompileOptions,
) -> Result<Option<Compiled>, CompileError> {
    if shaped.is_empty() {
        return Ok(None);
    }
    fit::first_fit(t.topo, algo, shaped, opts, true).map(Some)
}

/// An offer's candidates (or its search's) compiled.
pub(crate) fn compile_offer(
    t: &Target,
    ctx: &Context,
    algo: Algo,
    candidates: Vec<Candidate>,
    search: Option<Box<dyn crate::synth::Search>>,
    opts: &CompileOptions,
) -> Result<Yield, CompileError> {
    match search {
        Some(s) => search::run(t, &ctx.opts, algo, s, opts),
        None => Ok(Yield {
            main: fit::first_fit(t.topo, algo, t.shaped(algo, candidates), opts, false)?,
            extras: Vec::new(),
        }),
    }
}

/// Keep names to [A-Za-z0-9_.-] (msccl-xml.md §2).
pub fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Runtime;

    fn load(name: &str) -> Topology {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("topologies")
            .join(name);
        crate::front::load_topology(&p).unwrap()
    }

    #[test]
    fn the_budget_is_half_the_sms_unless_asked_up_to_all_of_them() {
        let v100 = load("dgx1-v100.json");
        let mut o = CompileOptions::default();
        assert_eq!(o.tb_budget(&v100), 40);
        o.max_tbs = Some(80);
        assert_eq!(o.tb_budget(&v100), 80);
        o.max_tbs = Some(500);
        assert_eq!(o.tb_budget(&v100), 80, "never above the SMs");
        o.max_tbs = Some(7);
        assert_eq!(o.tb_budget(&v100), 7);
        // RCCL's 64 binds below half of MI300X's 304 CUs.
        let mi300x = load("mi300x.json");
        let mut o = CompileOptions::default();
        o.lower.runtime = Runtime::Rccl;
        assert_eq!(o.tb_budget(&mi300x), 64);
        // No GPU states its SMs: only the runtime's limit.
        let cpu = load("cpu-shm.json");
        assert_eq!(default_max_tbs(&cpu), usize::MAX);
        assert_eq!(
            CompileOptions::default().tb_budget(&cpu),
            Runtime::Executor.max_tb_id()
        );
    }
}
