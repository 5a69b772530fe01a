//! `--algo auto`: compile every registered synthesizer that `auto`
//! scores, simulate each candidate at every size, and choose per size
//! band. The ring is a candidate wherever it fits the runtime's limits,
//! so the choice is then never slower than the ring at any scored size.

use super::target::MadeHalves as Halves;
use super::{
    compile_offer, small_shaped, CompileError, CompileOptions, Compiled, SearchScores, Target,
};
use crate::ir::{Algorithm, Collective, Program, Topology};
use crate::sim::{self, SimOptions};
use crate::synth::{Algo, Offer, REGISTRY};

/// Sizes `auto` scores by default: 1 KiB … 4 GiB in steps of 4×.
pub fn default_sizes() -> Vec<u64> {
    (0..12).map(|i| 1024u64 << (2 * i)).collect()
}

/// A size band of the selection: [min_bytes, max_bytes] (inclusive; the
/// last band's max is None = unbounded) and the winning candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Band {
    pub min_bytes: u64,
    pub max_bytes: Option<u64>,
    pub candidate: usize,
}

/// The outcome of `--algo auto`.
#[derive(Debug, Clone)]
pub struct Selection {
    pub sizes: Vec<u64>,
    /// Every candidate that compiled (the ring first).
    pub candidates: Vec<Compiled>,
    /// `times_us[c][s]`: simulated time of candidate c at size s, or
    /// where `pruned[c][s]`, a lower bound of it.
    pub times_us: Vec<Vec<f64>>,
    /// `pruned[c][s]`: candidate c was not simulated at size s, since its
    /// link-load bound there is above another candidate's simulated time
    /// (`times_us` holds the bound). No size's winner is pruned, nor
    /// `overall` anywhere, nor the best schedule that serves every size at
    /// the largest size; [`Selection::fall_through_files`] simulates what
    /// it compares, and [`Selection::complete`] every pruned cell.
    pub pruned: Vec<Vec<bool>>,
    /// The simulator's options the times were computed with.
    pub simopts: SimOptions,
    /// Best candidate per size.
    pub winners: Vec<usize>,
    pub bands: Vec<Band>,
    /// Best candidate over the whole range (least total time), those for
    /// size bands only aside.
    pub overall: usize,
    /// Algorithms that did not apply or fit, with the reason.
    pub skipped: Vec<String>,
    /// An allreduce's scored halves (`paired`): each distinct
    /// reduce-scatter or allgather half program, by its
    /// [`Program::schedule_digest`], and its simulated time per size of
    /// `sizes` (∞ where it did not run to the end), which a selection
    /// after this one takes instead of simulating again.
    pub half_times: Vec<((u64, u64), Vec<f64>)>,
    /// An allreduce's best halves run one after the other, per size of
    /// `sizes`: the least time of a reduce-scatter half alone plus the
    /// least of an allgather half alone, each within the threadblock
    /// budget (∞ where none is; empty for the other ops, and where the
    /// candidates give fewer than two halves to pair). Where the
    /// chosen allreduce is slower, one kernel holding the two halves is
    /// slower than the two run in turn, or does not fit the budget.
    pub halves_us: Vec<f64>,
    /// What the synthesizers' searches simulated ([`Target::scores`]): a
    /// selection after this one starts its searches from them, and its
    /// scoring takes a candidate's time at a size from them where the
    /// search scored the same program there.
    pub search_scores: SearchScores,
    /// The synthesizers' shared analyses (their LPs), which a selection
    /// after this one with the same solver options takes
    /// ([`crate::synth::Context::adopt`]).
    pub analyses: crate::synth::Analyses,
}

/// Progress callback: (done, total, what).
pub type Progress<'a> = &'a (dyn Fn(usize, usize, &str) + Sync);

/// Compile every applicable algorithm, simulate each at every size, and
/// choose per size. The ring is a candidate wherever it fits the runtime's
/// limits, so the choice is then never slower than the ring at any scored
/// size.
pub fn auto(
    topo: &Topology,
    opts: &CompileOptions,
    sizes: &[u64],
    simopts: &SimOptions,
    progress: Option<Progress>,
) -> Result<Selection, CompileError> {
    auto_after(topo, opts, sizes, simopts, progress, None)
}

/// [`auto`], after `prior`, a selection on the same topology: a candidate
/// whose program is the same schedule as one of `prior`'s
/// ([`Program::same_schedule`](crate::ir::Program::same_schedule)) takes
/// that one's simulated times where `prior` has them at the same sizes
/// and simulator options, instead of simulating again (`rscc synth -o
/// DIR/`'s one-chunk-per-shard selection after the main one, where most
/// candidates already had one chunk per shard); so does an allreduce half
/// ([`Selection::half_times`]), and a program a search scored
/// ([`Selection::search_scores`]).
pub fn auto_after(
    topo: &Topology,
    opts: &CompileOptions,
    sizes: &[u64],
    simopts: &SimOptions,
    progress: Option<Progress>,
    prior: Option<&Selection>,
) -> Result<Selection, CompileError> {
    if sizes.is_empty() {
        return Err(CompileError::Request("no sizes to score".into()));
    }
    let searched = prior.map(|p| p.search_scores.clone()).unwrap_or_default();
    let (mut candidates, mut skipped, halves, search_scores, analyses) =
        candidates(topo, opts, progress, searched, prior.map(|p| &p.analyses))?;
    let mut sorted = sizes.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    // Times `prior` has for the same sizes and simulator options.
    let known = prior.filter(|p| p.sizes == sorted && p.simopts == *simopts);
    // The searches' times, where they simulated as the scoring does.
    let searched =
        (*simopts == SimOptions::for_runtime(opts.lower.runtime)).then_some(&search_scores);
    let Scores {
        mut times_us,
        mut pruned,
    } = score(
        topo,
        &candidates,
        &sorted,
        None,
        simopts,
        progress,
        known,
        searched,
    )?;
    let mut half_times = Vec::new();
    let mut halves_us = Vec::new();
    if opts.op == Collective::AllReduce {
        // Each pair is scored at the sizes it was the first fitting pair for.
        let (extra, at): (Vec<Compiled>, Vec<Vec<bool>>) = paired(
            topo,
            opts,
            &candidates,
            halves,
            &sorted,
            simopts,
            known,
            &mut half_times,
            &mut halves_us,
            &mut skipped,
        )
        .into_iter()
        .unzip();
        let more = score(
            topo,
            &extra,
            &sorted,
            Some(&at),
            simopts,
            progress,
            known,
            searched,
        )?;
        times_us.extend(more.times_us);
        pruned.extend(more.pruned);
        candidates.extend(extra);
    }
    let mut scored = Scored {
        topo,
        candidates: &candidates,
        sorted: &sorted,
        simopts,
        times_us: &mut times_us,
        pruned: &mut pruned,
    };
    // Above a size-limited winner's limit the band goes to the best
    // schedule that serves every size at the largest size (`choose`).
    scored.exact_best(sorted.len() - 1, |c| candidates[c].max_size.is_none())?;
    let (winners, bands) = choose(&candidates, &sorted, scored.times_us);
    // One schedule for every size: the least total time over the scored
    // sizes, i.e. the least expected time when each scored size is equally
    // likely. (A geometric mean of ratios to the best per size would let
    // a schedule 3.5x faster at the small sizes but 1.7x slower from 1 MiB
    // up win on DGX-1 — where the time is spent.)
    //
    // Candidates for size bands only (`Offer::bands`: the channel-split
    // rings, and what is built from them) are not a lone file: they gain
    // a few percent at the largest sizes, and with no fall-through file
    // beside them their count divisor (k = 32 on an NVSwitch box: 94 of
    // the 236 reduce-scatter calls of `rscc verify DIR/`'s sweep, where
    // the direct schedule serves all) would send most calls to the
    // runtime's own algorithms.
    // Pruned cells hold lower bounds, so the least total is certain once
    // the candidate with it has none.
    let overall = loop {
        let serve_all = (0..candidates.len())
            .filter(|&c| candidates[c].max_size.is_none() && !candidates[c].band_only);
        let overall = least(serve_all, |c| scored.times_us[c].iter().sum()).unwrap_or(0);
        if !scored.simulate_pruned(|c| c == overall)? {
            break overall;
        }
    };
    Ok(Selection {
        sizes: sorted,
        candidates,
        times_us,
        pruned,
        simopts: simopts.clone(),
        winners,
        bands,
        overall,
        skipped,
        half_times,
        halves_us,
        search_scores,
        analyses,
    })
}

/// Relative margin by which a candidate must be faster than one before it
/// to be preferred: closer times are the same up to the simulator's
/// rounding (a run that jumps over repeating tiles and one that steps
/// through them differ by less than 1e-10), and the first candidate keeps
/// such a tie. The ring comes first, so no choice is slower than it.
const TIE: f64 = 1e-9;

/// The best of `order`, taken in turn: the first, replaced by each later
/// one that is faster than the best so far by more than [`TIE`].
fn least(order: impl IntoIterator<Item = usize>, time: impl Fn(usize) -> f64) -> Option<usize> {
    order.into_iter().fold(None, |best, c| match best {
        Some(b) if time(c) >= time(b) * (1.0 - TIE) => Some(b),
        _ => Some(c),
    })
}

/// `t` to 30 significant bits (a relative step of about 1e-9): a key that
/// ranks times the same up to the simulator's rounding as equal, except
/// for the rare pair on either side of a step.
fn rounded(t: f64) -> f64 {
    const DROP: u32 = 52 - 30;
    if !t.is_finite() {
        return t;
    }
    let half = 1u64 << (DROP - 1);
    f64::from_bits((t.to_bits() + half) & !((1u64 << DROP) - 1))
}

/// The ring that stands for the runtime's own algorithm: every report
/// compares with it, and a fall-through file must not be slower.
fn is_ring(c: &Compiled) -> bool {
    c.algo == Algo::Ring && !c.algorithm.spec.is_fused() && c.max_size.is_none()
}

/// Candidate `c` simulated at `size` bytes.
fn simulate(
    topo: &Topology,
    c: &Compiled,
    size: u64,
    simopts: &SimOptions,
) -> Result<sim::SimResult, CompileError> {
    sim::simulate(&c.program, topo, size, simopts)
        .map_err(|e| CompileError::Internal(format!("simulating {}: {e}", c.algo.name())))
}

/// Candidates' scores with what simulates the cells [`score`] left out
/// (`pruned`), so that what a choice reads can be made exact.
struct Scored<'a> {
    topo: &'a Topology,
    candidates: &'a [Compiled],
    sorted: &'a [u64],
    simopts: &'a SimOptions,
    times_us: &'a mut [Vec<f64>],
    pruned: &'a mut [Vec<bool>],
}

impl Scored<'_> {
    /// Simulates the pruned cells of the candidates `which` picks;
    /// whether there were any.
    fn simulate_pruned(&mut self, which: impl Fn(usize) -> bool) -> Result<bool, CompileError> {
        let cells: Vec<(usize, usize)> = (0..self.candidates.len())
            .filter(|&c| which(c))
            .flat_map(|c| (0..self.sorted.len()).map(move |s| (c, s)))
            .filter(|&(c, s)| self.pruned[c][s])
            .collect();
        let (topo, candidates, sorted, simopts) =
            (self.topo, self.candidates, self.sorted, self.simopts);
        let runs = crate::par::map(&cells, |&(c, s)| {
            simulate(topo, &candidates[c], sorted[s], simopts)
        });
        for (&(c, s), r) in cells.iter().zip(runs) {
            self.times_us[c][s] = r?.time_us;
            self.pruned[c][s] = false;
        }
        Ok(!cells.is_empty())
    }

    /// The candidate among `among` with the least time at size `si`, each
    /// pruned cell on the way simulated (its bound is below its time, so
    /// the least is certain once its cell is simulated).
    fn exact_best(
        &mut self,
        si: usize,
        among: impl Fn(usize) -> bool,
    ) -> Result<Option<usize>, CompileError> {
        loop {
            let best = least((0..self.candidates.len()).filter(|&c| among(c)), |c| {
                self.times_us[c][si]
            });
            match best {
                Some(c) if self.pruned[c][si] => {
                    self.simulate_pruned(|x| x == c)?;
                }
                b => return Ok(b),
            }
        }
    }
}

/// What [`candidates`] returns.
type Candidates = (
    Vec<Compiled>,
    Vec<String>,
    Halves,
    SearchScores,
    crate::synth::Analyses,
);

/// Every registered synthesizer `auto` scores, compiled: its schedule,
/// its search's extras and its small-message schedule, without repeats;
/// why each synthesizer or candidate was skipped; for an allreduce
/// every candidate's halves, its allreduce fitting or not
/// ([`Target::made_halves`]: every composed candidate is built through
/// [`Target::shaped`]); what the searches simulated, from `searched` on
/// ([`Target::scores`]); and the synthesizers' shared analyses, from
/// `analyses` on where those fit the request.
fn candidates(
    topo: &Topology,
    opts: &CompileOptions,
    progress: Option<Progress>,
    searched: SearchScores,
    analyses: Option<&crate::synth::Analyses>,
) -> Result<Candidates, CompileError> {
    let t = Target::new(topo, opts).knowing(searched);
    let mut ctx = t.context(&opts.synth)?;
    if let Some(a) = analyses {
        ctx.adopt(a);
    }
    let mut candidates: Vec<Compiled> = Vec::new();
    let mut skipped = Vec::new();
    for (i, (a, syn)) in REGISTRY.into_iter().enumerate() {
        if let Some(p) = progress {
            p(i, REGISTRY.len() + 1, &format!("synthesizing {}", a.name()));
        }
        if let Err(why) = syn.in_auto(&ctx) {
            skipped.push(format!("{}: not scored: {why}", a.name()));
            continue;
        }
        let mut found = Vec::new();
        // Per candidate found from here: whether it has the owner's lanes
        // in turn (`Target::shaped_with_lanes`).
        let mut lanes_in_turn: Vec<bool> = Vec::new();
        let offer = match syn.offer(&ctx) {
            Ok(o) => o,
            Err(e) => {
                skipped.push(e.to_string());
                continue;
            }
        };
        let Offer {
            candidates: cands,
            small: smalls,
            more,
            bands,
            search,
            more_searches,
        } = offer;
        // The searches at other sizes run beside the main one: each keeps
        // a core busy while the other waits on its slowest simulation,
        // and neither's result depends on the other's.
        let (main, beside) = if more_searches.is_empty() {
            (compile_offer(&t, &ctx, a, cands, search, opts), Vec::new())
        } else {
            let sopts = ctx.opts.clone();
            let (main, beside) = std::thread::scope(|sc| {
                let beside = sc.spawn(|| {
                    more_searches
                        .into_iter()
                        .map(|s| super::search::run(&t, &sopts, a, s, opts))
                        .collect::<Vec<_>>()
                });
                let main = compile_offer(&t, &ctx, a, cands, search, opts);
                (main, beside.join())
            });
            let beside = beside.unwrap_or_else(|p| std::panic::resume_unwind(p));
            (main, beside)
        };
        match main {
            Ok(y) => {
                found.push(y.main);
                found.extend(y.extras);
                lanes_in_turn.resize(found.len(), false);
            }
            // The ring too: where no ring fits the runtime's limits (1024
            // ranks on RCCL, whose threadblocks hold at most 64 steps), the
            // other candidates are all there is.
            Err(e) if e.is_request() => skipped.push(e.to_string()),
            Err(e) => return Err(e),
        }
        for r in beside {
            match r {
                Ok(y) => {
                    found.push(y.main);
                    found.extend(y.extras);
                    lanes_in_turn.resize(found.len(), false);
                }
                Err(e) if e.is_request() => skipped.push(e.to_string()),
                Err(e) => return Err(e),
            }
        }
        let groups = std::iter::once(smalls)
            .chain(more)
            .map(|g| (g, false))
            .chain(bands.into_iter().map(|g| (g, true)));
        for (group, band_only) in groups {
            // An allgather's group also with the owner's lanes in turn on
            // one and on two channels, where it has them
            // (`Target::shaped_with_lanes`; the first list is the plain one).
            for (i, shaped) in t.shaped_with_lanes(a, group).into_iter().enumerate() {
                let in_turn = i > 0;
                match small_shaped(&t, a, shaped, opts) {
                    Ok(Some(c)) => {
                        lanes_in_turn.push(in_turn);
                        found.push(Compiled { band_only, ..c });
                    }
                    Ok(None) => {}
                    Err(e) if e.is_request() => skipped.push(format!("small-message {e}")),
                    Err(e) => return Err(e),
                }
            }
        }
        // Every allreduce also fused: one chunk up and down its shallowest
        // tree pair, which serves every count (Algorithm::fused).
        let fusable: Vec<(Algo, Algorithm)> = found
            .iter()
            .filter_map(|c| c.algorithm.fused().map(|f| (c.algo, f)))
            .collect();
        let fitted = crate::par::map(&fusable, |(a, f)| {
            super::fit::first_fit(topo, *a, vec![crate::synth::ready(f.clone())], opts, false)
        });
        for ((_, f), fit) in fusable.iter().zip(fitted) {
            match fit {
                Ok(c) => found.push(c),
                Err(e) => skipped.push(format!("{}: {e}", f.name)),
            }
        }
        let forms = found.len();
        lanes_in_turn.resize(forms, false);
        // The allreduce of `pack`'s joint packing: both halves' trees
        // packed on the links together, where the composed candidates pack
        // each half alone (`pack::allreduce_candidates`).
        if opts.op == Collective::AllReduce && a == Algo::Pack {
            match crate::synth::pack::allreduce_candidates(&ctx)
                .map_err(CompileError::from)
                .and_then(|cands| super::fit::first_fit(t.topo, a, cands, opts, false))
            {
                Ok(c) => found.push(c),
                Err(e) => skipped.push(format!("pack-joint: {e}")),
            }
        }
        // A composed allreduce whose broadcast landed on the reduction's
        // channels (all of its own did not fit the runtime's channels or
        // the threadblock budget) is also scored with them folded onto
        // fewer of its own (`Algorithm::bcast_folds`): that keeps the
        // halves pipelining at large sizes, while the shared form's fewer
        // threadblocks can win at small ones.
        if opts.op == Collective::AllReduce {
            let shared: Vec<&Compiled> = found[..forms]
                .iter()
                .filter(|c| c.algorithm.bcast_shares_channels())
                .collect();
            let folded = crate::par::map(&shared, |c| {
                let (rs, ag) = c.algorithm.halves()?;
                let cands = Algorithm::bcast_folds(&ag)
                    .into_iter()
                    .map(|own| {
                        let mut x = Algorithm::allreduce_on(&rs, &ag, own);
                        x.name = format!("{}-folded", c.algorithm.name);
                        crate::synth::ready(x)
                    })
                    .collect();
                refit(topo, c, cands, opts)
            });
            found.extend(folded.into_iter().flatten());
        }
        // Without fused steps, every schedule also without send
        // threadblocks: the split overlaps a hop's local pass with its
        // send, but its extra waits can cost more than that gains.
        // And each with its channels staggered (lower::stagger): one
        // channel's local passes overlapping another's transfers, where
        // several channels carry the same connections.
        if !opts.lower.runtime.fused_steps() {
            let o = with_lowering(opts, |l| l.send_tbs = false);
            let plain = crate::par::map(&found, |c| {
                refit(topo, c, vec![crate::synth::ready(c.algorithm.clone())], &o)
            });
            // Only where the stagger adds a wait to the program as it is
            // (most candidates have one channel per connection).
            let o = with_lowering(opts, |l| l.stagger = true);
            let waits: Vec<&Compiled> = found
                .iter()
                .filter(|c| !crate::lower::stagger_waits(&c.program).is_empty())
                .collect();
            let staggered = crate::par::map(&waits, |c| {
                let mut x = c.algorithm.clone();
                x.name += "-staggered";
                refit(topo, c, vec![crate::synth::ready(x)], &o)
            });
            found.extend(plain.into_iter().flatten());
            found.extend(staggered.into_iter().flatten());
        }
        // An allgather or allreduce also with its broadcast block by block
        // where its broadcast runs merge blocks, and an allreduce's also
        // with its runs by edge where they differ from by path
        // (LowerOptions::bcast_runs, bcast_edges): smaller messages are
        // forwarded sooner, which wins at medium sizes on some machines,
        // and larger ones pay fewer α rounds, which wins elsewhere.
        if opts.op != Collective::ReduceScatter && opts.lower.bcast_runs {
            let forms_of: Vec<(bool, bool)> = found[..forms]
                .iter()
                .map(|c| crate::lower::broadcast_runs(&c.algorithm))
                .collect();
            // (name suffix, lowering, whether a candidate's form differs).
            type Form = (
                &'static str,
                crate::lower::LowerOptions,
                fn((bool, bool)) -> bool,
            );
            let extra: [Form; 2] = [
                (
                    "blockwise",
                    crate::lower::LowerOptions {
                        bcast_runs: false,
                        ..opts.lower.clone()
                    },
                    |(merge, _)| merge,
                ),
                (
                    "edges",
                    crate::lower::LowerOptions {
                        bcast_edges: true,
                        ..opts.lower.clone()
                    },
                    |(_, differ)| differ,
                ),
            ];
            for (suffix, lower, differs) in extra {
                let o = CompileOptions {
                    lower,
                    ..opts.clone()
                };
                // Not the forms with the owner's lanes in turn: their
                // broadcast runs won no cell of `bench/ops-compare.sh`'s
                // 378 either way, and cost an allgather's synthesis.
                let differing: Vec<&Compiled> = found[..forms]
                    .iter()
                    .zip(&forms_of)
                    .zip(&lanes_in_turn)
                    .filter(|&((_, &f), &in_turn)| differs(f) && !in_turn)
                    .map(|((c, _), _)| c)
                    .collect();
                let more = crate::par::map(&differing, |c| {
                    let mut a = c.algorithm.clone();
                    a.name = format!("{}-{suffix}", a.name);
                    refit(topo, c, vec![crate::synth::ready(a)], &o)
                });
                found.extend(more.into_iter().flatten());
            }
        }
        // An allgather or allreduce also with each rank's broadcast sends
        // to its relays in turn (LowerOptions::relays_in_turn), where some
        // rank sends a chunk to two relays on other hosts (through its
        // NIC): it wins there at medium and large sizes, and loses α
        // rounds elsewhere.
        if opts.op != Collective::ReduceScatter && !opts.lower.relays_in_turn {
            let o = with_lowering(opts, |l| l.relays_in_turn = true);
            let abroad: Vec<&Compiled> = found[..forms]
                .iter()
                .filter(|c| relays_abroad(&c.algorithm, topo))
                .collect();
            let turns = crate::par::map(&abroad, |c| {
                let mut a = c.algorithm.clone();
                a.name = format!("{}-inturn", a.name);
                refit(topo, c, vec![crate::synth::ready(a)], &o)
            });
            found.extend(turns.into_iter().flatten());
        }
        for c in found {
            // A candidate identical to an earlier one (e.g. a mixture
            // that puts all weight on one family) is not scored twice.
            // (It serves a lone file if either was offered for one.)
            match candidates
                .iter_mut()
                .find(|x| x.program.same_schedule(&c.program))
            {
                Some(x) => {
                    x.band_only &= c.band_only;
                    skipped.push(format!(
                        "{}: the same schedule as {}",
                        c.algorithm.name, x.algorithm.name
                    ))
                }
                None => candidates.push(c),
            }
        }
    }
    // Small-message schedules serve only up to their limit: some
    // candidate must serve every size.
    if !candidates.iter().any(|c| c.max_size.is_none()) {
        return Err(CompileError::Request(format!(
            "no synthesizer has a schedule for every size that fits the runtime's limits: {}",
            skipped.join("; ")
        )));
    }
    let halves = t.made_halves();
    let scores = std::mem::take(&mut *t.scores().lock().unwrap_or_else(|e| e.into_inner()));
    Ok((candidates, skipped, halves, scores, ctx.analyses()))
}

/// `opts` with its lowering options changed by `f`: the request for a
/// derived form of the same candidates.
fn with_lowering(
    opts: &CompileOptions,
    f: impl FnOnce(&mut crate::lower::LowerOptions),
) -> CompileOptions {
    let mut o = opts.clone();
    f(&mut o.lower);
    o
}

/// The first fit of `cands`, forms derived from candidate `c` (folded,
/// without send threadblocks, block by block, relays in turn): `c`'s
/// synthesizer, its size limit if it had one, its band-only flag and the
/// sizes it is scored at.
fn refit(
    topo: &Topology,
    c: &Compiled,
    cands: Vec<crate::synth::Candidate>,
    o: &CompileOptions,
) -> Option<Compiled> {
    let limited = c.max_size.is_some();
    super::fit::first_fit(topo, c.algo, cands, o, limited)
        .ok()
        .map(|x| Compiled {
            band_only: c.band_only,
            scored: c.scored.clone(),
            ..x
        })
}

/// Whether, in `a`'s broadcast (an allgather, or an allreduce's second
/// half), some rank sends one chunk to two or more relays (ranks that
/// forward it) on hosts other than its own, whose routes leave through
/// the network: where relays share the sender's NIC, serving them in
/// turn lets the first forward sooner.
fn relays_abroad(a: &Algorithm, topo: &Topology) -> bool {
    let relays: std::collections::HashSet<(usize, usize)> =
        a.bcast.iter().map(|t| (t.chunk, t.src)).collect();
    let mut abroad: rustc_hash::FxHashMap<(usize, usize), usize> = Default::default();
    a.bcast.iter().any(|t| {
        if topo.host_of(t.src) == topo.host_of(t.dst) || !relays.contains(&(t.chunk, t.dst)) {
            return false;
        }
        let k = abroad.entry((t.chunk, t.src)).or_insert(0);
        *k += 1;
        *k >= 2
    })
}

/// Allreduces of two synthesizers: at every scored size, a reduce-scatter
/// half of the allreduce candidates followed by an allgather half
/// ([`Algorithm::paired`]) of another candidate, the fastest two such
/// pairs by their sum with different reduce-scatter halves that fit (a
/// candidate's own composition taking one place where it ranks among
/// them). A composed candidate is one synthesizer's reduce-scatter and
/// its own allgather; the best pair of halves often is not (a pieced
/// tree's reduce-scatter and a plain tree's allgather), and running it as
/// one program makes the allreduce no slower than the reduce-scatter
/// followed by the allgather wherever the pair fits the runtime. Each
/// half is scored as its own op's program.
#[allow(clippy::too_many_arguments)]
fn paired(
    topo: &Topology,
    opts: &CompileOptions,
    candidates: &[Compiled],
    halves: Halves,
    sorted: &[u64],
    simopts: &SimOptions,
    known: Option<&Selection>,
    half_times: &mut Vec<((u64, u64), Vec<f64>)>,
    halves_us: &mut Vec<f64>,
    skipped: &mut Vec<String>,
) -> Vec<(Compiled, Vec<bool>)> {
    if halves.len() < 2 {
        return Vec::new();
    }
    let budget = opts.tb_budget(topo);
    let turns = |ag: &Algorithm| !opts.lower.relays_in_turn && relays_abroad(ag, topo);
    // Every half's forms: its reduce-scatter, and its allgather with its
    // relays side by side and, where some are abroad, in turn (`pair`
    // lowers both; the faster counts per size).
    let forms: Vec<(usize, bool, bool)> = (0..halves.len())
        .flat_map(|i| {
            let turn = turns(&halves[i].2);
            [(i, false, false), (i, true, false), (i, true, true)]
                .into_iter()
                .filter(move |&(_, gather, in_turn)| !in_turn || (gather && turn))
        })
        .collect();
    let lower = |&(i, gather, in_turn): &(usize, bool, bool)| -> Option<Program> {
        let (algo, rs, ag) = &halves[i];
        let (op, a) = if gather {
            (Collective::AllGather, ag)
        } else {
            (Collective::ReduceScatter, rs)
        };
        let o = CompileOptions { op, ..opts.clone() };
        let lo = crate::lower::LowerOptions {
            relays_in_turn: in_turn,
            ..o.lower_options(topo, *algo, false)
        };
        crate::lower::lower(a, &lo)
            .ok()
            .filter(|p| p.max_tbs_per_rank() <= budget)
    };
    // Each distinct program is simulated once per size (halves of several
    // candidates are often one schedule), or not at all where `known`
    // scored it at these sizes. Programs are told apart by their digest
    // and lowered again to be simulated, so that no more than one per
    // core is held at a time (at hundreds of GPUs a half is hundreds of
    // MB).
    let digests: Vec<Option<(u64, u64)>> =
        crate::par::map(&forms, |f| lower(f).map(|p| p.schedule_digest()));
    let mut distinct: Vec<(u64, u64)> = Vec::new();
    let mut first: Vec<usize> = Vec::new();
    for (f, d) in digests.iter().enumerate() {
        if let Some(d) = d {
            if !distinct.contains(d) {
                distinct.push(*d);
                first.push(f);
            }
        }
    }
    let prior = |d: &(u64, u64)| -> Option<&Vec<f64>> {
        known?
            .half_times
            .iter()
            .find(|(k, _)| k == d)
            .map(|(_, t)| t)
    };
    let todo: Vec<usize> = (0..distinct.len())
        .filter(|&k| prior(&distinct[k]).is_none())
        .collect();
    let runs = crate::par::map(&todo, |&k| {
        let p = lower(&forms[first[k]]).expect("lowered before");
        let Ok(p) = sim::prepare(&p, topo, simopts) else {
            return vec![f64::INFINITY; sorted.len()];
        };
        sorted
            .iter()
            .map(|&s| p.run(s).map_or(f64::INFINITY, |r| r.time_us))
            .collect::<Vec<f64>>()
    });
    let mut dtimes: Vec<Vec<f64>> = distinct
        .iter()
        .map(|d| prior(d).cloned().unwrap_or_default())
        .collect();
    for (&k, t) in todo.iter().zip(runs) {
        dtimes[k] = t;
    }
    // Per half (2i: reduce-scatter, 2i + 1: allgather) and size, its
    // time: ∞ where it does not lower within the runtime's limits and
    // the SMs, or does not run to the end. Only scored: nothing here is
    // emitted unless its allreduce passes `first_fit` below.
    let mut times = vec![vec![f64::INFINITY; sorted.len()]; 2 * halves.len()];
    for (&(i, gather, _), d) in forms.iter().zip(&digests) {
        if let Some(k) = d.and_then(|d| distinct.iter().position(|x| *x == d)) {
            let t = &mut times[2 * i + gather as usize];
            t.iter_mut()
                .zip(&dtimes[k])
                .for_each(|(a, &b)| *a = a.min(b));
        }
    }
    half_times.extend(distinct.into_iter().zip(dtimes));
    let least = |gather: bool, si: usize| {
        (0..halves.len())
            .map(|i| times[2 * i + gather as usize][si])
            .fold(f64::INFINITY, f64::min)
    };
    *halves_us = (0..sorted.len())
        .map(|si| least(false, si) + least(true, si))
        .collect();
    // One synthesizer's own two halves are its composed candidate, when
    // that allreduce fitted; a pair with a half of a candidate for size
    // bands only is one too.
    let (composed, band_half): (Vec<bool>, Vec<bool>) = halves
        .iter()
        .map(|(algo, rs, ag)| {
            candidates
                .iter()
                .filter(|c| {
                    c.algo == *algo
                        && c.algorithm.halves().is_some_and(|(r, a)| {
                            r.transfers == rs.transfers && a.bcast == ag.bcast
                        })
                })
                .fold((false, false), |(_, band), c| (true, band || c.band_only))
        })
        .unzip();
    // Per size the (reduce-scatter, allgather) halves by the sum of their
    // times, fastest first: the first PAIRS_PER_SIZE with different
    // reduce-scatter halves that fit the runtime as one program are
    // scored there — a synthesizer's own composed candidate counts as
    // one, and is scored anyway — trying at most PAIR_TRIES pairs for
    // each (the two fastest halves can need more threadblocks
    // together than the SMs: dgx-a100x4 at 64 KiB). The best sum is not
    // always the best program: on generated fabric 7 at 16 MiB the
    // eight-lane reduce-scatter half ranks first with every allgather
    // half and its own allreduce takes 449.8 µs, where the four-lane half
    // with `hier`'s allgather takes 430.0; the second slot keeps that one.
    const PAIR_TRIES: usize = 4;
    const PAIRS_PER_SIZE: usize = 2;
    let h = halves.len();
    let ranked = |si: usize| -> Vec<(usize, usize)> {
        let t = |i: usize, gather: bool| times[2 * i + gather as usize][si];
        let mut v: Vec<(f64, usize, usize)> = (0..h)
            .flat_map(|i| (0..h).map(move |j| (i, j)))
            .filter(|&(i, j)| t(i, false).is_finite() && t(j, true).is_finite())
            .map(|(i, j)| (t(i, false) + t(j, true), i, j))
            .collect();
        // Sums within rounding of each other rank by their halves' order,
        // not by the rounding.
        v.sort_by(|x, y| {
            rounded(x.0)
                .total_cmp(&rounded(y.0))
                .then((x.1, x.2).cmp(&(y.1, y.2)))
        });
        v.into_iter()
            .filter(|&(_, i, j)| i != j || composed[i])
            .map(|(_, i, j)| (i, j))
            .collect()
    };
    let mut made: std::collections::BTreeMap<(usize, usize), Vec<Compiled>> = Default::default();
    let mut at: std::collections::BTreeMap<(usize, usize), Vec<bool>> = Default::default();
    // Halves by their reduce-scatter schedule: several synthesizers often
    // have the same one (`mix` is `hier` on rail-optimised hosts).
    let rs_class: Vec<usize> = (0..h)
        .map(|i| {
            (0..i)
                .find(|&k| halves[k].1.transfers == halves[i].1.transfers)
                .unwrap_or(i)
        })
        .collect();
    for si in 0..sorted.len() {
        let (mut tries, mut fitted) = (0, Vec::new());
        for (i, j) in ranked(si) {
            if fitted.contains(&rs_class[i]) {
                continue;
            }
            if i != j {
                if tries == PAIR_TRIES {
                    break;
                }
                tries += 1;
                let forms = made
                    .entry((i, j))
                    .or_insert_with(|| pair(topo, opts, &halves[i], &halves[j], skipped));
                if forms.is_empty() {
                    continue;
                }
                at.entry((i, j))
                    .or_insert_with(|| vec![false; sorted.len()])[si] = true;
            }
            tries = 0;
            fitted.push(rs_class[i]);
            if fitted.len() == PAIRS_PER_SIZE {
                break;
            }
        }
    }
    made.into_iter()
        .filter_map(|(k, forms)| Some((k, forms, at.get(&k)?.clone())))
        .flat_map(|((i, j), forms, at)| {
            let band_only = band_half[i] || band_half[j];
            forms
                .into_iter()
                .map(move |c| (Compiled { band_only, ..c }, at.clone()))
        })
        .collect()
}

/// The allreduce of `rs`'s reduce-scatter half and `ag`'s allgather half
/// in every form that fits (none: the reason is in `skipped`). The
/// halves' chunkings differ, so the allreduce's blocks are cut by both
/// halves' trees: its broadcast is lowered both with messages over the
/// blocks its own trees leave whole and block by block (sooner
/// forwarding), each on channels of its own where they fit, else on the
/// reduction's and also folded onto fewer of its own
/// ([`Algorithm::bcast_folds`]).
fn pair(
    topo: &Topology,
    opts: &CompileOptions,
    rs: &(Algo, Algorithm, Algorithm),
    ag: &(Algo, Algorithm, Algorithm),
    skipped: &mut Vec<String>,
) -> Vec<Compiled> {
    let (algo, r, _) = rs;
    let a = &ag.2;
    let name = format!("{} + {}", r.name, a.name);
    let mut made: Vec<Compiled> = Vec::new();
    // Without fused steps, each form also without send threadblocks.
    let splits: &[bool] = if opts.lower.runtime.fused_steps() {
        &[true]
    } else {
        &[true, false]
    };
    // Where the allgather half has relays abroad, each form also with
    // them in turn.
    let turns: &[bool] = if !opts.lower.relays_in_turn && relays_abroad(a, topo) {
        &[false, true]
    } else {
        &[false]
    };
    let combos: Vec<((bool, bool), bool)> = [true, false]
        .into_iter()
        .flat_map(|b| splits.iter().map(move |&s| (b, s)))
        .flat_map(|f| turns.iter().map(move |&t| (f, t)))
        .collect();
    // Each form is lowered and verified on its own, the forms side by side
    // on the cores (at 32 ranks and more each is a second or so of one
    // core); they join `made` in their order.
    let fitted = crate::par::map(&combos, |&((bcast_runs, send_tbs), in_turn)| {
        let o = CompileOptions {
            lower: crate::lower::LowerOptions {
                bcast_runs,
                send_tbs,
                relays_in_turn: in_turn || opts.lower.relays_in_turn,
                ..opts.lower.clone()
            },
            ..opts.clone()
        };
        let forms = |owns: Vec<usize>, suffix: &str| -> Vec<crate::synth::Candidate> {
            owns.into_iter()
                .filter_map(|own| Algorithm::paired(r, a, own))
                .map(|mut x| {
                    x.name += suffix;
                    if in_turn {
                        x.name += "-inturn";
                    }
                    crate::synth::ready(x)
                })
                .collect()
        };
        let cands = forms(vec![a.num_channels(), 0], "");
        super::fit::first_fit(topo, *algo, cands, &o, true).map(|c| {
            // On the reduction's channels: also folded onto fewer of
            // its own, scored beside it.
            let folded = c.algorithm.bcast_shares_channels().then(|| {
                let cands = forms(Algorithm::bcast_folds(a), "-folded");
                super::fit::first_fit(topo, *algo, cands, &o, true).ok()
            });
            (c, folded.flatten())
        })
    });
    for (&((bcast_runs, send_tbs), in_turn), fit) in combos.iter().zip(fitted) {
        match fit {
            Ok((c, folded)) => {
                for c in std::iter::once(c).chain(folded) {
                    if made.iter().all(|m| m.program != c.program) {
                        made.push(c);
                    }
                }
            }
            Err(e) => {
                let form = if bcast_runs {
                    ""
                } else {
                    " (broadcast block by block)"
                };
                let split = if send_tbs {
                    ""
                } else {
                    " (no send threadblocks)"
                };
                let turn = if in_turn { " (relays in turn)" } else { "" };
                skipped.push(format!("{name}{form}{split}{turn}: {e}"));
            }
        }
    }
    made
}

/// Simulated times of candidates per size, with the cells left out by
/// their lower bound ([`Selection::pruned`]).
struct Scores {
    times_us: Vec<Vec<f64>>,
    pruned: Vec<Vec<bool>>,
}

/// `times_us[c][s]`: simulated time of candidate c at size `sorted[s]`
/// (∞ at and above a size-limited candidate's limit, and at the sizes
/// `only[c]` leaves out); taken from `known` (scored at `sorted` with the
/// same simulator options) where it has the same schedule's finite,
/// simulated time, else from `searched` where a search simulated the
/// same program at that size with the same options.
///
/// Sizes are scored in ascending order, and a candidate is simulated at a
/// size only where it can win there. Its link-load bound — the most bytes
/// one of its links carries, at that link's capacity — grows linearly
/// with the size (a chunk is S / nchunksperloop bytes) and is below its
/// simulated time (no link carries more than its capacity: `sim`'s flows
/// are max-min fair), so once some candidate's time at a size is known,
/// every candidate whose bound is above it is slower there. Per size, the
/// two best candidates of the size before and the ring run first; a
/// candidate whose bound is then above the best time at the size is left
/// out, its cell holding the bound ([`Selection::pruned`]). The bound
/// comes from the candidate's first simulation, at the smallest size,
/// where it is cheap. Models whose link bytes are not the schedule's bytes
/// (the CPU model's shared-memory costs) or that trace score every cell.
#[allow(clippy::too_many_arguments)]
fn score(
    topo: &Topology,
    candidates: &[Compiled],
    sorted: &[u64],
    only: Option<&[Vec<bool>]>,
    simopts: &SimOptions,
    progress: Option<Progress>,
    known: Option<&Selection>,
    searched: Option<&SearchScores>,
) -> Result<Scores, CompileError> {
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
    // Per candidate, the known candidate with the same schedule.
    let same: Vec<Option<usize>> = match known {
        Some(k) => {
            let mut by_hash: rustc_hash::FxHashMap<u64, Vec<usize>> = Default::default();
            for (i, c) in k.candidates.iter().enumerate() {
                by_hash
                    .entry(c.program.schedule_hash())
                    .or_default()
                    .push(i);
            }
            candidates
                .iter()
                .map(|c| {
                    by_hash
                        .get(&c.program.schedule_hash())?
                        .iter()
                        .copied()
                        .find(|&i| k.candidates[i].program.same_schedule(&c.program))
                })
                .collect()
        }
        None => vec![None; candidates.len()],
    };
    let (n, ns) = (candidates.len(), sorted.len());
    // Scored only below its limit (its band ends one byte below it), and
    // at the sizes it is built for.
    let skip = |ci: usize, si: usize| {
        candidates[ci].max_size.is_some_and(|m| sorted[si] >= m)
            || !candidates[ci].scored.contains(&sorted[si])
            || only.is_some_and(|o| !o[ci][si])
    };
    // Per candidate, its program's digest where searches scored some.
    let digests: Vec<Option<(u64, u64)>> = candidates
        .iter()
        .map(|c| {
            searched
                .filter(|s| !s.is_empty())
                .map(|_| c.program.schedule_digest())
        })
        .collect();
    let reuse = |ci: usize, si: usize| -> Option<f64> {
        let from_search = || {
            let key = (digests[ci]?, sorted[si]);
            searched?.get(&key).map(|(t, _)| *t)
        };
        let from_known = || {
            let (k, i) = (known?, same[ci]?);
            Some(k.times_us[i][si]).filter(|t| t.is_finite() && !k.pruned[i][si])
        };
        from_known().or_else(from_search)
    };
    let prunable = simopts.shared_mem.is_none() && !simopts.trace;
    let ring = candidates.iter().position(is_ring);
    let caps: Vec<f64> = topo
        .graph
        .edge_weights()
        .map(|l| l.capacity_gbps() * 1e3)
        .collect();
    let total = n * ns;
    let done = AtomicUsize::new(0);
    // Each candidate prepared for the simulator once, on its first run,
    // for every size after it.
    let prepared: Vec<std::sync::OnceLock<Result<sim::Prepared, sim::SimError>>> =
        (0..n).map(|_| std::sync::OnceLock::new()).collect();
    type Run = Result<(f64, f64), CompileError>;
    type Runs = Vec<((usize, usize), Run)>;
    // Largest programs first, for balance on the cores.
    let by_size = |jobs: &mut Vec<(usize, usize)>| {
        jobs.sort_by_key(|&(ci, si)| {
            (
                std::cmp::Reverse(candidates[ci].program.num_steps()),
                ci,
                si,
            )
        })
    };
    // One (candidate, size) job: its time and link-load bound per byte of
    // S.
    let simulate_one = |ci: usize, si: usize| -> Run {
        let c = &candidates[ci];
        let r = prepared[ci]
            .get_or_init(|| sim::prepare(&c.program, topo, simopts))
            .as_ref()
            .map_err(|e| CompileError::Internal(format!("simulating {}: {e}", c.algo.name())))
            .and_then(|p| {
                p.run(sorted[si]).map_err(|e| {
                    CompileError::Internal(format!("simulating {}: {e}", c.algo.name()))
                })
            });
        let k = done.fetch_add(1, Ordering::Relaxed);
        if let Some(p) = progress {
            p(
                k + 1,
                total,
                &format!("simulated {} at {} B", c.algo.name(), sorted[si]),
            );
        }
        r.map(|r| {
            let load = r
                .link_bytes
                .iter()
                .zip(&caps)
                .map(|(b, c)| b / c)
                .fold(0.0, f64::max);
            (r.time_us, load / sorted[si].max(1) as f64)
        })
    };
    // Simulates jobs on the available cores.
    let run = |mut jobs: Vec<(usize, usize)>| -> Runs {
        by_size(&mut jobs);
        let results = crate::par::map(&jobs, |&(ci, si)| simulate_one(ci, si));
        jobs.into_iter().zip(results).collect()
    };
    let mut times_us = vec![vec![f64::INFINITY; ns]; n];
    let mut pruned = vec![vec![false; ns]; n];
    let mut exact = vec![vec![false; ns]; n];
    // µs per byte of S: below the candidate's time at every size.
    let mut load: Vec<Option<f64>> = vec![None; n];
    fn record(
        results: Runs,
        times_us: &mut [Vec<f64>],
        exact: &mut [Vec<bool>],
        load: &mut [Option<f64>],
    ) -> Result<(), CompileError> {
        for ((ci, si), r) in results {
            let (t, l) = r?;
            times_us[ci][si] = t;
            exact[ci][si] = true;
            load[ci].get_or_insert(l);
        }
        Ok(())
    }
    for si in 0..ns {
        let mut todo = Vec::new();
        for ci in (0..n).filter(|&ci| !skip(ci, si)) {
            match reuse(ci, si) {
                // The smallest size is simulated anyway where bounds are
                // used: it is cheap, and it gives the candidate's loads.
                Some(t) if !(prunable && si == 0) => {
                    times_us[ci][si] = t;
                    exact[ci][si] = true;
                }
                _ => todo.push((ci, si)),
            }
        }
        if !prunable || si == 0 {
            record(run(todo), &mut times_us, &mut exact, &mut load)?;
            continue;
        }
        // The two best of the size before, and the ring.
        let mut before: Vec<usize> = (0..n)
            .filter(|&x| exact[x][si - 1] && times_us[x][si - 1].is_finite())
            .collect();
        before.sort_by(|&a, &b| {
            times_us[a][si - 1]
                .total_cmp(&times_us[b][si - 1])
                .then(a.cmp(&b))
        });
        before.truncate(2);
        type Cells = Vec<(usize, usize)>;
        let (mut first, mut rest): (Cells, Cells) = todo
            .into_iter()
            .partition(|&(ci, _)| Some(ci) == ring || before.contains(&ci));
        // The rest is pruned against the best of `first` and the cells
        // already known. A core that would wait for the last of `first`
        // meanwhile runs the rest in turn, each while its bound is not
        // above the best of `first` so far (the best at the end is no
        // larger, so a job skipped then is pruned then); a result is kept
        // only where the pruning keeps its job, so the scores are those of
        // running `first`, then what is left, one after the other.
        by_size(&mut first);
        by_size(&mut rest);
        let bounds: Vec<Option<f64>> = rest
            .iter()
            .map(|&(ci, si)| load[ci].map(|l| l * sorted[si] as f64))
            .collect();
        let nf = first.len();
        let jobs: Vec<(usize, (usize, usize))> =
            first.iter().chain(&rest).copied().enumerate().collect();
        // Positive times order as their bit patterns do.
        let so_far = AtomicU64::new(best_exact(&times_us, &exact, si).to_bits());
        let mut results = crate::par::map(&jobs, |&(k, (ci, si))| {
            let best = f64::from_bits(so_far.load(Ordering::Relaxed));
            let bound = k.checked_sub(nf).and_then(|r| bounds[r]);
            if bound.is_some_and(|b| b > best * (1.0 + 1e-9)) {
                return None;
            }
            let r = simulate_one(ci, si);
            if let (true, Ok((t, _))) = (k < nf, &r) {
                so_far.fetch_min(t.to_bits(), Ordering::Relaxed);
            }
            Some(r)
        });
        let ahead = results.split_off(nf);
        let firsts = first.into_iter().zip(results);
        let firsts = firsts.filter_map(|(j, r)| r.map(|r| (j, r))).collect();
        record(firsts, &mut times_us, &mut exact, &mut load)?;
        let best = best_exact(&times_us, &exact, si);
        let (mut kept, mut left) = (Vec::new(), Vec::new());
        for (((ci, si), bound), ran) in rest.into_iter().zip(bounds).zip(ahead) {
            match bound.filter(|&b| b > best * (1.0 + 1e-9)) {
                Some(b) => {
                    times_us[ci][si] = b;
                    pruned[ci][si] = true;
                    if ran.is_none() {
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                }
                None => match ran {
                    Some(r) => kept.push(((ci, si), r)),
                    None => left.push((ci, si)),
                },
            }
        }
        record(kept, &mut times_us, &mut exact, &mut load)?;
        record(run(left), &mut times_us, &mut exact, &mut load)?;
    }
    Ok(Scores { times_us, pruned })
}

/// The least simulated time at size `si` so far (∞ where there is none).
fn best_exact(times_us: &[Vec<f64>], exact: &[Vec<bool>], si: usize) -> f64 {
    times_us
        .iter()
        .zip(exact)
        .filter(|(_, e)| e[si])
        .map(|(t, _)| t[si])
        .fold(f64::INFINITY, f64::min)
}

/// The best candidate per size and the bands they form.
fn choose(
    candidates: &[Compiled],
    sorted: &[u64],
    times_us: &[Vec<f64>],
) -> (Vec<usize>, Vec<Band>) {
    let winners: Vec<usize> = (0..sorted.len())
        .map(|si| least(0..candidates.len(), |c| times_us[c][si]).unwrap_or(0))
        .collect();
    // Bands: a new band starts at the first size a different candidate
    // wins, or at the size limit of a schedule safe only up to one (its
    // band ends one byte below the limit, so a legacy file's exclusive
    // upper bound is the limit itself; scored sizes above the limit never
    // pick it).
    let mut bands: Vec<Band> = Vec::new();
    for (si, &w) in winners.iter().enumerate() {
        match bands.last_mut() {
            Some(b) if b.candidate == w => {}
            Some(b) => {
                let end = candidates[b.candidate]
                    .max_size
                    .map_or(sorted[si] - 1, |m| (m - 1).min(sorted[si] - 1));
                b.max_bytes = Some(end);
                bands.push(Band {
                    min_bytes: end + 1,
                    max_bytes: None,
                    candidate: w,
                });
            }
            None => bands.push(Band {
                min_bytes: 0,
                max_bytes: None,
                candidate: w,
            }),
        }
    }
    if let Some(m) = bands.last().and_then(|b| candidates[b.candidate].max_size) {
        // The largest scored size is within the limit: above it, the best
        // schedule that runs at every size (at the largest scored size).
        bands.last_mut().expect("a band").max_bytes = Some(m - 1);
        let last = sorted.len() - 1;
        let w = least(
            (0..candidates.len()).filter(|&c| candidates[c].max_size.is_none()),
            |c| times_us[c][last],
        )
        .expect("`candidates` keeps one that runs at every size");
        bands.push(Band {
            min_bytes: m,
            max_bytes: None,
            candidate: w,
        });
    }
    (winners, bands)
}

/// The fall-through files of a band directory
/// ([`Selection::fall_through_files`]).
#[derive(Debug, Clone)]
pub struct FallThrough {
    /// Each file and the index of its schedule in the one-chunk selection.
    pub files: Vec<(BandFile, usize)>,
    /// Size ranges [min, max] (None: unbounded) of bands needing k > 1
    /// where no schedule that serves every count is as fast as the ring:
    /// the counts the band's files reject are left to the runtime there.
    pub left: Vec<(u64, Option<u64>)>,
}

/// One file of a band directory (`rscc synth -o DIR/`).
#[derive(Debug, Clone)]
pub struct BandFile {
    /// File name: `rs-<algo>-<minBytes>-<maxBytes|inf>.xml`.
    pub name: String,
    pub band: Band,
    /// The band's schedule with its `minBytes`/`maxBytes` written for its
    /// runtime ([`Runtime::encode_max_bytes`](crate::ir::Runtime::encode_max_bytes)).
    pub program: Program,
}

impl Selection {
    /// Simulates every pruned cell ([`Selection::pruned`]), so that
    /// `times_us` holds every candidate's simulated time at every size.
    pub fn complete(&mut self, topo: &Topology) -> Result<(), CompileError> {
        self.scored(topo).simulate_pruned(|_| true)?;
        Ok(())
    }

    fn scored<'a>(&'a mut self, topo: &'a Topology) -> Scored<'a> {
        Scored {
            topo,
            candidates: &self.candidates,
            sorted: &self.sizes,
            simopts: &self.simopts,
            times_us: &mut self.times_us,
            pruned: &mut self.pruned,
        }
    }

    /// The band a size (nccl-tests' S) falls in.
    pub fn band_of(&self, size: u64) -> &Band {
        self.bands
            .iter()
            .find(|b| size >= b.min_bytes && b.max_bytes.is_none_or(|m| size <= m))
            .expect("the bands cover every size")
    }

    /// The band directory: one file per band, its schedule limited to the
    /// band, named so that the names say which op, runtime (`rccl-` for
    /// RCCL) and algorithm serve which sizes.
    pub fn band_files(&self) -> Vec<BandFile> {
        self.bands
            .iter()
            .map(|b| {
                let c = &self.candidates[b.candidate];
                let mut program = c.program.clone();
                program.min_bytes = b.min_bytes as i64;
                program.max_bytes = Some(program.runtime.encode_max_bytes(b.max_bytes));
                // RCCL files say so in their names too.
                let rt = match program.runtime {
                    crate::ir::Runtime::Rccl => "rccl-",
                    _ => "",
                };
                let name = format!(
                    "{}-{rt}{}-{}-{}.xml",
                    program.coll.short(),
                    c.form(),
                    b.min_bytes,
                    b.max_bytes
                        .map(|m| m.to_string())
                        .unwrap_or_else(|| "inf".into())
                );
                BandFile {
                    name,
                    band: b.clone(),
                    program,
                }
            })
            .collect()
    }

    /// The count divisor k of band `b`'s schedule (chunks per shard for
    /// reduce-scatter and allgather, all chunks for allreduce,
    /// [`Program::count_divisor`]): the runtime takes its file only for
    /// counts that are multiples of k (docs/msccl-xml.md "Which file a
    /// call gets").
    pub fn band_k(&self, b: &Band) -> usize {
        self.candidates[b.candidate].program.count_divisor().max(1) as usize
    }

    /// Fall-through files for the bands whose schedule needs a count
    /// divisor k > 1. `one` is a selection over the same sizes, made with
    /// one chunk per shard. Its schedules form tiers by their own divisor
    /// d, a proper divisor of k: d = 1 serves every count (one chunk per
    /// shard for reduce-scatter and allgather, a fused allreduce of one
    /// chunk), and for an allreduce d = ngpus (one chunk per shard,
    /// composed) serves the multiples of ngpus at the composed schedule's
    /// bandwidth. Per tier, the tier's schedules that run at every size
    /// compete per scored size inside the band, and each run of sizes one
    /// of them wins becomes a file limited to that part of the band
    /// (merged across bands where the same schedule wins on both sides) —
    /// at the sizes where the winner is no slower than `one`'s ring. The
    /// ring stands for what the runtime runs for a count no file serves
    /// (NCCL's ring); a one-chunk allreduce slower than it would make those
    /// calls slower than plain NCCL, so there the calls are left to the
    /// runtime, and `left` says where.
    /// Names sort after the band's own `{op}-…` file and larger divisors
    /// first — `{op}.k1-ALGO-MIN-MAX.xml` for one chunk per shard, then
    /// `ar.k1.fused-ALGO-MIN-MAX.xml` ('-' < '.') — so the executor takes
    /// each exactly for the counts every earlier file rejects.
    ///
    /// Each tier's best and the ring are simulated first where `one` left
    /// them out ([`Selection::pruned`]).
    pub fn fall_through_files(
        &self,
        one: &mut Selection,
        topo: &Topology,
    ) -> Result<FallThrough, CompileError> {
        let divisor = |c: &Compiled| c.program.count_divisor().max(1) as usize;
        let mut tiers: Vec<usize> = one
            .candidates
            .iter()
            .filter(|c| c.max_size.is_none())
            .map(divisor)
            .collect();
        tiers.sort_unstable_by(|a, b| b.cmp(a));
        tiers.dedup();
        let ring = one.candidates.iter().position(is_ring);
        // Per size: each tier's best (Some(divisor)), then the ring (None).
        let mut scored = one.scored(topo);
        let cands = scored.candidates;
        for si in 0..scored.sorted.len() {
            for tier in tiers.iter().copied().map(Some).chain([None]) {
                scored.exact_best(si, |c| match tier {
                    Some(d) => cands[c].max_size.is_none() && divisor(&cands[c]) == d,
                    None => Some(c) == ring,
                })?;
            }
        }
        Ok(self.fall_through_of(one, &tiers, ring))
    }

    /// [`Selection::fall_through_files`] once `one`'s tier bests and ring
    /// are simulated.
    fn fall_through_of(
        &self,
        one: &Selection,
        tiers: &[usize],
        ring: Option<usize>,
    ) -> FallThrough {
        let divisor = |c: usize| one.candidates[c].program.count_divisor().max(1) as usize;
        let tiers = tiers.to_vec();
        let mut left: Vec<(u64, Option<u64>)> = Vec::new();
        // (min, max, schedule in `one`, the band's own candidate).
        let mut parts: Vec<(u64, Option<u64>, usize, usize)> = Vec::new();
        for d in tiers {
            let eligible: Vec<usize> = (0..one.candidates.len())
                .filter(|&c| one.candidates[c].max_size.is_none() && divisor(c) == d)
                .collect();
            let needs = |b: &&Band| {
                let k = self.band_k(b);
                k > d && k.is_multiple_of(d)
            };
            let tier_start = parts.len();
            for b in self.bands.iter().filter(needs) {
                let inside = |s: u64| s >= b.min_bytes && b.max_bytes.is_none_or(|m| s <= m);
                let mut at: Vec<(u64, usize)> = one
                    .sizes
                    .iter()
                    .enumerate()
                    .filter(|&(_, &s)| inside(s))
                    .map(|(j, &s)| (s, j))
                    .collect();
                if at.is_empty() {
                    // A band above every scored size: judged at the largest.
                    at.push((b.min_bytes, one.sizes.len() - 1));
                }
                let best = |j: usize| -> Option<usize> {
                    let t = |c: usize| one.times_us[c][j];
                    let w = least(eligible.iter().copied(), t)?;
                    ring.is_none_or(|r| t(w) <= t(r) * (1.0 + TIE)).then_some(w)
                };
                // Runs of sizes with one winner (or none): (first size, winner).
                let mut runs: Vec<(u64, Option<usize>)> = Vec::new();
                for &(s, j) in &at {
                    let w = best(j);
                    if runs.last().is_none_or(|r| r.1 != w) {
                        runs.push((s, w));
                    }
                }
                for (i, &(lo, w)) in runs.iter().enumerate() {
                    let min_bytes = if i == 0 { b.min_bytes } else { lo };
                    let max_bytes = match runs.get(i + 1) {
                        Some(&(next, _)) => Some(next - 1),
                        None => b.max_bytes,
                    };
                    let Some(c) = w else {
                        if d == 1 {
                            match left.last_mut() {
                                Some(l) if l.1.is_some_and(|m| m + 1 == min_bytes) => {
                                    l.1 = max_bytes
                                }
                                _ => left.push((min_bytes, max_bytes)),
                            }
                        }
                        continue;
                    };
                    // One file across bands where the same schedule wins on
                    // both sides of their boundary.
                    match parts[tier_start..].last_mut() {
                        Some(p) if p.2 == c && p.1.is_some_and(|m| m + 1 == min_bytes) => {
                            p.1 = max_bytes;
                        }
                        _ => parts.push((min_bytes, max_bytes, c, b.candidate)),
                    }
                }
            }
        }
        let mut files = Vec::new();
        for (min_bytes, max_bytes, c, primary) in parts {
            let x = &one.candidates[c];
            let mut program = x.program.clone();
            program.min_bytes = min_bytes as i64;
            program.max_bytes = Some(program.runtime.encode_max_bytes(max_bytes));
            let rt = match program.runtime {
                crate::ir::Runtime::Rccl => "rccl-",
                _ => "",
            };
            let tier = if x.algorithm.spec.is_fused() {
                "k1.fused"
            } else {
                "k1"
            };
            let name = format!(
                "{}.{tier}-{rt}{}-{}-{}.xml",
                program.coll.short(),
                x.algo.name(),
                min_bytes,
                max_bytes
                    .map(|m| m.to_string())
                    .unwrap_or_else(|| "inf".into())
            );
            files.push((
                BandFile {
                    name,
                    band: Band {
                        min_bytes,
                        max_bytes,
                        candidate: primary,
                    },
                    program,
                },
                c,
            ));
        }
        FallThrough { files, left }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_later_candidate_wins_only_by_more_than_rounding() {
        let t = [100.0, 100.0 * (1.0 - 1e-12), 99.0, 99.0 * (1.0 - 1e-10)];
        // 1 is 100 up to rounding: 0 keeps it; 2 is faster; 3 is 2 up
        // to rounding.
        assert_eq!(least(0..2, |c| t[c]), Some(0));
        assert_eq!(least(0..4, |c| t[c]), Some(2));
        assert_eq!(least([1, 0], |c| t[c]), Some(1));
        assert_eq!(least(std::iter::empty(), |c: usize| t[c]), None);
        // An unfinished run (∞) loses to any time and keeps a tie with
        // another.
        let u = [f64::INFINITY, 5.0, f64::INFINITY];
        assert_eq!(least(0..3, |c| u[c]), Some(1));
        assert_eq!(least([0, 2], |c| u[c]), Some(0));
    }

    #[test]
    fn rounded_keys_equal_times_up_to_rounding() {
        let a = 27395.3336;
        assert_eq!(rounded(a), rounded(a * (1.0 + 1e-15)));
        assert_eq!(rounded(a), rounded(a * (1.0 - 1e-15)));
        assert!(rounded(a) < rounded(a * (1.0 + 1e-8)));
        assert!((rounded(a) - a).abs() <= a * 1e-9);
        assert_eq!(rounded(f64::INFINITY), f64::INFINITY);
    }
}
