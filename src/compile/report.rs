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
    let rows = if per_band && sel.is_some() {
        let one = |i: usize| {
            sim::report::busbw_table(&served[i].program, topo, &sizes[i..=i], &so)
                .map(|mut r| r.remove(0))
        };
        (0..sizes.len()).map(one).collect::<Result<Vec<_>, _>>()?
    } else {
        sim::report::busbw_table(&chosen.program, topo, &sizes, &so)?
    };
    let ring = match sel.and_then(|s| s.candidates.iter().find(|c| c.algo == Algo::Ring)) {
        Some(r) => Some(r.clone()),
        None if chosen.algo == Algo::Ring => Some(chosen.clone()),
        None => compile_one(topo, Algo::Ring, opts).ok(),
    };
    let ring_rows = ring.and_then(|r| sim::report::busbw_table(&r.program, topo, &sizes, &so).ok());
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
                .map(|rr| rr[i].time_us / r.time_us),
        })
        .collect())
}
