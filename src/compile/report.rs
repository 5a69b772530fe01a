//! What `rscc synth` reports beside the files it writes: the predicted
//! time at a few sizes, the ratio to the bound and to the ring, each size
//! by the schedule that serves it (the same simulator and bound as
//! `rscc simulate`).

use super::{compile_one, CompileOptions, Compiled, Selection};
use crate::ir::Topology;
use crate::sim::{self, SimError, SimOptions};
use crate::synth::Algo;
use serde::Serialize;

/// Sizes the synth report scores (nccl-tests' S).
pub const REPORT_SIZES: [u64; 6] = [1 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20, 1 << 30];

/// One size of the report.
#[derive(Debug, Clone, Serialize)]
pub struct ReportRow {
    pub size_bytes: u64,
    /// The schedule that serves this size.
    pub schedule: String,
    pub time_us: f64,
    pub busbw_gbps: f64,
    /// bound / time (None: no bound).
    pub bound_ratio: Option<f64>,
    /// ring time / time (None: no ring to compare, or nothing moves).
    pub vs_ring: Option<f64>,
}

/// The report of a synthesis: with `per_band`, each size by the schedule
/// of its band (what `-o DIR/` wrote), else every size by `chosen`.
pub fn synth_report(
    topo: &Topology,
    opts: &CompileOptions,
    chosen: &Compiled,
    sel: Option<&Selection>,
    per_band: bool,
) -> Result<Vec<ReportRow>, SimError> {
    let so = SimOptions::for_runtime(opts.lower.runtime);
    let sizes = REPORT_SIZES;
    let served: Vec<&Compiled> = match sel.filter(|_| per_band) {
        Some(s) => sizes
            .iter()
            .map(|&size| &s.candidates[s.band_of(size).candidate])
            .collect(),
        None => vec![chosen; sizes.len()],
    };
    let ring = match sel.and_then(|s| s.candidates.iter().find(|c| c.algo == Algo::Ring)) {
        Some(r) => Some(r.clone()),
        None if chosen.algo == Algo::Ring => Some(chosen.clone()),
        None => compile_one(topo, Algo::Ring, opts).ok(),
    };
    // Every (schedule, size) the report needs: a time `auto` already
    // simulated with these options (the schedule is one of its candidates
    // and the size one it scored), or a new simulation.
    let scored = |c: &Compiled, size: u64| -> Option<f64> {
        let s = sel.filter(|s| s.simopts == so)?;
        let ci = s
            .candidates
            .iter()
            .position(|x| std::ptr::eq(x, c) || (x.algo == c.algo && x.program == c.program))?;
        let si = s.sizes.iter().position(|&x| x == size)?;
        Some(s.times_us[ci][si]).filter(|t| t.is_finite() && !s.pruned[ci][si])
    };
    let mut jobs: Vec<(&Compiled, u64)> = served.iter().copied().zip(sizes).collect();
    if let Some(r) = &ring {
        jobs.extend(sizes.iter().map(|&s| (r, s)));
    }
    let known: Vec<Option<f64>> = jobs.iter().map(|&(c, s)| scored(c, s)).collect();
    // The distinct programs among the jobs (the ring is often the chosen
    // schedule itself), each prepared once for its sizes, and each
    // (program, size) simulated once.
    let mut programs: Vec<&Compiled> = Vec::new();
    let program_of: Vec<usize> = jobs
        .iter()
        .map(|&(c, _)| {
            match programs
                .iter()
                .position(|p| std::ptr::eq(*p, c) || p.program == c.program)
            {
                Some(i) => i,
                None => {
                    programs.push(c);
                    programs.len() - 1
                }
            }
        })
        .collect();
    let mut cells: Vec<(usize, u64)> = (0..jobs.len())
        .filter(|&j| known[j].is_none())
        .map(|j| (program_of[j], jobs[j].1))
        .collect();
    cells.sort_unstable();
    cells.dedup();
    let prepared: Vec<std::sync::OnceLock<Result<sim::Prepared, SimError>>> = programs
        .iter()
        .map(|_| std::sync::OnceLock::new())
        .collect();
    let runs = crate::par::map(&cells, |&(p, size)| {
        let prep = prepared[p].get_or_init(|| sim::prepare(&programs[p].program, topo, &so));
        prep.as_ref()
            .map_err(Clone::clone)
            .and_then(|prep| prep.run(size))
            .map(|r| r.time_us)
    });
    let mut times = known;
    for j in 0..jobs.len() {
        if times[j].is_some() {
            continue;
        }
        let cell = (program_of[j], jobs[j].1);
        match &runs[cells.partition_point(|c| *c < cell)] {
            Ok(t) => times[j] = Some(*t),
            // The ring is only a comparison: without it, no ratio.
            Err(_) if j >= sizes.len() => {}
            Err(e) => return Err(e.clone()),
        }
    }
    let scorer = sim::report::Scorer::new(topo, chosen.program.coll);
    let own: Vec<f64> = times[..sizes.len()]
        .iter()
        .map(|t| t.unwrap_or(f64::NAN))
        .collect();
    let rows = scorer.rows(&sizes, &own);
    let ring_rows: Option<Vec<f64>> = times[sizes.len()..].iter().copied().collect();
    let ring_rows = ring_rows.filter(|r| r.len() == sizes.len());
    Ok(rows
        .iter()
        .enumerate()
        .map(|(i, r)| ReportRow {
            size_bytes: r.size_bytes,
            schedule: served[i].algorithm.name.clone(),
            time_us: r.time_us,
            busbw_gbps: r.busbw_gbps,
            bound_ratio: r.bound_ratio,
            // A one-GPU machine moves nothing: no ratio.
            vs_ring: ring_rows
                .as_ref()
                .filter(|_| r.time_us > 0.0)
                .map(|rr| rr[i] / r.time_us),
        })
        .collect())
}
