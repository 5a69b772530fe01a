//! The driver: synthesize → lower → verify, the one path every emitted
//! schedule takes (nothing leaves here unverified); and `--algo auto`:
//! compile every applicable algorithm, score each in the simulator across
//! the size range, and pick the best per size band.

use crate::ir::{Algorithm, Program, Proto, Runtime, Topology};
use crate::lower::{self, LowerError, LowerOptions};
use crate::sim::{self, SimOptions};
use crate::synth::{self, Algo, SynthOptions};
use crate::verify::{self, VerifyOptions, VerifyReport};
use std::fmt;

#[derive(Debug, Clone)]
pub struct CompileOptions {
    pub algo: Algo,
    pub synth: SynthOptions,
    pub proto: Proto,
    pub runtime: Runtime,
    pub inplace: bool,
    pub outofplace: bool,
    pub min_bytes: i64,
    pub max_bytes: i64,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            algo: Algo::Auto,
            synth: SynthOptions::default(),
            proto: Proto::Simple,
            runtime: Runtime::Executor,
            inplace: true,
            outofplace: true,
            min_bytes: 0,
            max_bytes: 0,
        }
    }
}

impl CompileOptions {
    /// One algorithm with a chunk count (tests, scripts).
    pub fn algo(algo: Algo, chunks: Option<usize>) -> Self {
        let mut o = CompileOptions {
            algo,
            ..Default::default()
        };
        o.synth.chunks = chunks;
        o
    }
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
}

#[derive(Debug, Clone)]
pub enum CompileError {
    /// The request cannot be met (bad options, impossible limits).
    Request(String),
    /// rscc produced a schedule its own verifier rejects: a bug.
    Internal(String),
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CompileError::Request(m) => f.write_str(m),
            CompileError::Internal(m) => write!(f, "internal error (please report): {m}"),
        }
    }
}

impl std::error::Error for CompileError {}

/// Synthesize, lower and verify a reduce-scatter for `topo`. With
/// `Algo::Auto` the candidate that is best across the default size range
/// (least total time over the scored sizes) is returned.
pub fn compile(topo: &Topology, opts: &CompileOptions) -> Result<Compiled, CompileError> {
    if opts.algo == Algo::Auto {
        let sel = auto(topo, opts, &default_sizes(), &SimOptions::default(), None)?;
        let w = sel.overall;
        return Ok(sel.candidates.into_iter().nth(w).expect("winner index"));
    }
    compile_one(topo, opts.algo, opts)
}

/// Compile one algorithm: its candidates in order, the first that fits
/// at every size.
pub fn compile_one(
    topo: &Topology,
    algo: Algo,
    opts: &CompileOptions,
) -> Result<Compiled, CompileError> {
    if algo == Algo::Gap {
        return compile_gap(topo, opts).map(|(c, _)| c);
    }
    let cands =
        synth::candidates(topo, algo, &opts.synth).map_err(|e| CompileError::Request(e.0))?;
    first_fit(topo, algo, cands, opts, false)
}

/// The gap schedule (`synth::gap`): the window LP's rounding, improved by
/// the local search with each plan lowered and simulated at
/// [`gap::GAP_SIZE`](synth::gap::GAP_SIZE) (a plan over the GPU's SM count
/// scores above every plan within it, by its excess; one that cannot be
/// lowered, ∞), within `opts.synth.evals` schedules (default: the budget
/// of [`gap::GAP_EVALS`](synth::gap::GAP_EVALS)) or the time limit.
/// The best plan is emitted if it passes the verifier, else the search's
/// best start, else the main LP answer's rounding.
/// Also the search's starts (the best of all LP answers' roundings, and
/// the best of the main answer's) where they differ, for `auto` to score
/// at large sizes.
fn compile_gap(
    topo: &Topology,
    opts: &CompileOptions,
) -> Result<(Compiled, Vec<Compiled>), CompileError> {
    use synth::gap;
    let req = |e: String| CompileError::Request(e);
    synth::check_request(topo, &opts.synth).map_err(|e| req(e.0))?;
    let o = &opts.synth;
    let g =
        gap::solve(topo, o.time_limit_s, o.seed).map_err(|e| req(format!("--algo gap: {e}")))?;
    let start = g.start(o.chunks.unwrap_or(gap::GAP_CHUNKS));
    let lopts = LowerOptions::default();
    let sms = topo.min_sms().map(|s| s as usize);
    let simopts = SimOptions::default();
    // Program steps lowered so far: the default budget's measure of work.
    let work = std::sync::atomic::AtomicUsize::new(0);
    let score = |a: &Algorithm| -> Result<Vec<f64>, f64> {
        let p = lower::lower(a, &lopts).map_err(|_| f64::INFINITY)?;
        work.fetch_add(p.num_steps(), std::sync::atomic::Ordering::Relaxed);
        if let Some(m) = sms.filter(|&m| p.max_tbs_per_rank() > m) {
            return Err((p.max_tbs_per_rank() - m) as f64);
        }
        let r = sim::simulate(&p, topo, gap::GAP_SIZE, &simopts).map_err(|_| f64::INFINITY)?;
        Ok(r.rank_end_us)
    };
    // check_request bounds the limit, so the deadline cannot overflow.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs_f64(o.time_limit_s);
    let stop = |spent: usize| {
        let spent_all = match o.evals {
            Some(e) => spent >= e,
            None => {
                spent >= gap::GAP_EVALS
                    || work.load(std::sync::atomic::Ordering::Relaxed) >= gap::GAP_WORK
            }
        };
        spent_all || std::time::Instant::now() >= deadline
    };
    let (best, stats) = g.search(start.clone(), o.seed, &stop, &score);
    let one = |plans: Vec<&gap::Plan>| {
        let cands = plans
            .into_iter()
            .map(|p| {
                let a = g.algorithm(p);
                Box::new(move || a) as synth::Candidate
            })
            .collect();
        first_fit(topo, Algo::Gap, cands, opts, true)
    };
    let searched = one(vec![&best, &stats.start, &start])?;
    // The starts only where they differ and fit (they are extra
    // candidates: one over the limits is simply not offered).
    let mut origins = Vec::new();
    let mut seen = vec![&best];
    for p in [&stats.start, &stats.lp_start] {
        if seen.contains(&p) {
            continue;
        }
        seen.push(p);
        match one(vec![p]) {
            Ok(c) => origins.push(c),
            Err(CompileError::Request(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok((searched, origins))
}

/// The algorithm's small-message candidate (`synth::small_candidates`), if
/// it has one — possibly safe only up to a size (`max_size`); a
/// `Request` error when it has one and none fits.
pub fn compile_small(
    topo: &Topology,
    algo: Algo,
    opts: &CompileOptions,
) -> Result<Option<Compiled>, CompileError> {
    let cands =
        synth::small_candidates(topo, algo, &opts.synth).map_err(|e| CompileError::Request(e.0))?;
    if cands.is_empty() {
        return Ok(None);
    }
    first_fit(topo, algo, cands, opts, true).map(Some)
}

/// The first of `cands` that lowers within the runtime's limits and passes
/// the verifier. With `limited`, a candidate that deadlocks only once MSCCL
/// splits its multi-chunk steps is taken with `maxBytes` set to where the
/// split starts (and `max_size` saying so).
fn first_fit(
    topo: &Topology,
    algo: Algo,
    cands: Vec<synth::Candidate>,
    opts: &CompileOptions,
    limited: bool,
) -> Result<Compiled, CompileError> {
    let lopts = LowerOptions {
        name: format!(
            "rscc_{}_{}_{}",
            algo.name(),
            sanitize(&topo.name),
            topo.num_ranks()
        ),
        proto: opts.proto,
        runtime: opts.runtime,
        inplace: opts.inplace,
        outofplace: opts.outofplace,
        min_bytes: opts.min_bytes,
        max_bytes: opts.max_bytes,
    };
    let vopts = VerifyOptions {
        max_tbs: topo.min_sms().map(|s| s as usize),
    };
    let mut fallbacks = Vec::new();
    for cand in cands {
        let alg = cand();
        match lower::lower(&alg, &lopts) {
            Ok(program) => {
                if let Some(m) = vopts.max_tbs {
                    if program.max_tbs_per_rank() > m {
                        fallbacks.push(format!(
                            "{}: {} threadblocks per rank exceed the GPU's {m} SMs",
                            alg.name,
                            program.max_tbs_per_rank()
                        ));
                        continue;
                    }
                }
                // A candidate the verifier rejects is never emitted; the
                // next one is tried, and the reason is reported.
                let (program, report, max_size) = match verify::verify(&program, &vopts) {
                    Ok(r) => (program, r, None),
                    Err(e) => match size_limited(program, &vopts, limited, &e) {
                        Some((p, r, m)) => (p, r, Some(m)),
                        None => {
                            fallbacks.push(format!("{}: rejected by the verifier: {e}", alg.name));
                            continue;
                        }
                    },
                };
                return Ok(Compiled {
                    algo,
                    algorithm: alg,
                    program,
                    report,
                    fallbacks,
                    max_size,
                });
            }
            Err(LowerError::Limits(m)) => fallbacks.push(format!("{}: {m}", alg.name)),
            Err(LowerError::Algorithm(m)) => {
                return Err(CompileError::Internal(format!(
                    "{} is not a valid algorithm: {m}",
                    alg.name
                )))
            }
        }
    }
    Err(CompileError::Request(format!(
        "{}: no candidate fits the runtime's limits and passes the verifier: {}",
        algo.name(),
        fallbacks.join("; ")
    )))
}

/// A program the verifier rejected for a deadlock, made safe by a
/// `maxBytes` that keeps every multi-chunk step one message (when
/// `allowed`, the deadlock needs the split, and the program's own
/// `maxBytes` does not already forbid larger sizes).
fn size_limited(
    mut program: Program,
    vopts: &VerifyOptions,
    allowed: bool,
    e: &verify::VerifyError,
) -> Option<(Program, VerifyReport, u64)> {
    if !allowed || e.rule != "deadlock" {
        return None;
    }
    let limit = verify::one_message_up_to(&program)?;
    let limit = match program.max_bytes {
        Some(m) if m > 0 => limit.min(m as u64),
        _ => limit,
    };
    if (limit as i64) < program.min_bytes.max(1) {
        return None;
    }
    program.max_bytes = Some(limit as i64);
    let report = verify::verify(&program, vopts).ok()?;
    Some((program, report, limit))
}

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
    /// `times_us[c][s]`: simulated time of candidate c at size s.
    pub times_us: Vec<Vec<f64>>,
    /// Best candidate per size.
    pub winners: Vec<usize>,
    pub bands: Vec<Band>,
    /// Best candidate over the whole range.
    pub overall: usize,
    /// Algorithms that did not apply or fit, with the reason.
    pub skipped: Vec<String>,
}

/// Progress callback: (done, total, what).
pub type Progress<'a> = &'a (dyn Fn(usize, usize, &str) + Sync);

/// Compile every applicable algorithm, simulate each at every size, and
/// choose per size. The ring is always a candidate, so the choice is never
/// slower than the ring at any scored size.
pub fn auto(
    topo: &Topology,
    opts: &CompileOptions,
    sizes: &[u64],
    simopts: &SimOptions,
    progress: Option<Progress>,
) -> Result<Selection, CompileError> {
    if sizes.is_empty() {
        return Err(CompileError::Request("no sizes to score".into()));
    }
    // Every synthesizer but the exact SCCL-model search (unit capacities).
    let algos: Vec<Algo> = Algo::ALL
        .into_iter()
        .filter(|a| !matches!(a, Algo::Auto | Algo::Sccl))
        .collect();
    let mut candidates = Vec::new();
    let mut skipped = Vec::new();
    for (i, &a) in algos.iter().enumerate() {
        if let Some(p) = progress {
            p(i, algos.len() + 1, &format!("synthesizing {}", a.name()));
        }
        if a == Algo::Tree {
            let why = if topo.num_ranks() > synth::DIRECT_MAX_RANKS {
                Some(format!(
                    "{} ranks (offered up to {})",
                    topo.num_ranks(),
                    synth::DIRECT_MAX_RANKS
                ))
            } else {
                synth::tree::not_offered(topo)
            };
            if let Some(why) = why {
                skipped.push(format!("tree: not offered: {why}"));
                continue;
            }
        }
        if a == Algo::Flow {
            if let Err(why) = synth::flow_promising(topo, &opts.synth) {
                skipped.push(why);
                continue;
            }
        }
        if a == Algo::Gap {
            if let Err(why) = synth::gap::offered(topo) {
                skipped.push(format!("gap: not offered: {why}"));
                continue;
            }
        }
        if a == Algo::Direct && !synth::direct_applies(topo) {
            skipped.push(format!(
                "direct: not offered for {} ranks (at most {} and 2(N-1) threadblocks within the SM count)",
                topo.num_ranks(),
                synth::DIRECT_MAX_RANKS
            ));
            continue;
        }
        let mut found = Vec::new();
        if a == Algo::Gap {
            // Gap gives up to three: the searched plan, and the search's
            // starts (the best of all LP answers' roundings, and of the
            // main answer's), whose even link loads serve large messages
            // (the search scores 64 KiB only and may trade them away:
            // MI100 8P6L is at 100 % of the cut bound at 1 MiB with the
            // main answer's rounding, 81 % with the searched plan).
            match compile_gap(topo, opts) {
                Ok((c, starts)) => {
                    found.push(c);
                    found.extend(starts);
                }
                Err(CompileError::Request(m)) => skipped.push(m),
                Err(e) => return Err(e),
            }
        } else {
            match compile_one(topo, a, opts) {
                Ok(c) => found.push(c),
                Err(CompileError::Request(m)) if a != Algo::Ring => skipped.push(m),
                Err(e) => return Err(e),
            }
        }
        match compile_small(topo, a, opts) {
            Ok(c) => found.extend(c),
            Err(CompileError::Request(m)) => skipped.push(format!("small-message {m}")),
            Err(e) => return Err(e),
        }
        for c in found {
            // A candidate identical to an earlier one (e.g. a mixture
            // that puts all weight on one family) is not scored twice.
            let same = |x: &Compiled| {
                let mut p = x.program.clone();
                p.name = c.program.name.clone();
                p.max_bytes = c.program.max_bytes;
                p == c.program
            };
            match candidates.iter().find(|x| same(x)) {
                Some(x) => skipped.push(format!(
                    "{}: the same schedule as {}",
                    c.algorithm.name, x.algorithm.name
                )),
                None => candidates.push(c),
            }
        }
    }
    let mut sorted = sizes.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    // Every (candidate, size) run is independent: simulate them on the
    // available cores, largest programs first for balance.
    let mut jobs: Vec<(usize, usize)> = (0..candidates.len())
        .flat_map(|ci| (0..sorted.len()).map(move |si| (ci, si)))
        .collect();
    jobs.sort_by_key(|&(ci, si)| {
        (
            std::cmp::Reverse(candidates[ci].program.num_steps()),
            ci,
            si,
        )
    });
    let total = jobs.len();
    let done = std::sync::atomic::AtomicUsize::new(0);
    let results = crate::par::map(&jobs, |&(ci, si)| {
        let c = &candidates[ci];
        // Scored only below its limit: its band ends one byte below it.
        if c.max_size.is_some_and(|m| sorted[si] >= m) {
            return Ok(f64::INFINITY);
        }
        let r = sim::simulate(&c.program, topo, sorted[si], simopts);
        let k = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Some(p) = progress {
            p(
                k + 1,
                total,
                &format!("simulated {} at {} B", c.algo.name(), sorted[si]),
            );
        }
        r.map(|r| r.time_us)
            .map_err(|e| CompileError::Internal(format!("simulating {}: {e}", c.algo.name())))
    });
    let mut times_us = vec![vec![0.0; sorted.len()]; candidates.len()];
    for (&(ci, si), r) in jobs.iter().zip(results) {
        times_us[ci][si] = r?;
    }
    let winners: Vec<usize> = (0..sorted.len())
        .map(|si| {
            (0..candidates.len())
                .min_by(|&a, &b| times_us[a][si].total_cmp(&times_us[b][si]).then(a.cmp(&b)))
                .unwrap_or(0)
        })
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
        let w = (0..candidates.len())
            .filter(|&c| candidates[c].max_size.is_none())
            .min_by(|&a, &b| {
                times_us[a][last]
                    .total_cmp(&times_us[b][last])
                    .then(a.cmp(&b))
            })
            .expect("the ring runs at every size");
        bands.push(Band {
            min_bytes: m,
            max_bytes: None,
            candidate: w,
        });
    }
    // One schedule for every size: the least total time over the scored
    // sizes, i.e. the least expected time when each scored size is equally
    // likely. (A geometric mean of ratios to the best per size, used
    // before, let a schedule 3.5x faster at the small sizes but 1.7x slower
    // from 1 MiB up win on DGX-1 — where the time is spent.)
    let overall = (0..candidates.len())
        .filter(|&c| candidates[c].max_size.is_none())
        .min_by(|&a, &b| {
            let total = |c: usize| -> f64 { times_us[c].iter().sum() };
            total(a).total_cmp(&total(b)).then(a.cmp(&b))
        })
        .unwrap_or(0);
    Ok(Selection {
        sizes: sorted,
        candidates,
        times_us,
        winners,
        bands,
        overall,
        skipped,
    })
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
