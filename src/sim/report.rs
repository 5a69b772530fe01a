//! nccl-tests-style reports: time, algbw, busbw, and the ratio to the
//! lower bound, per size. `rscc simulate` prints these rows; `rscc synth`
//! calls [`busbw_table`] after writing XML.

use super::{SimError, SimOptions};
use crate::bound;
use crate::ir::{Program, Topology};
use serde::Serialize;

/// One size of a report (nccl-tests' definitions, DESIGN.md).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// nccl-tests' S: per-rank input bytes for reduce-scatter.
    pub size_bytes: u64,
    /// Elements per rank in the call (recvcount for reduce-scatter).
    pub count: u64,
    #[serde(rename = "type")]
    pub dtype: &'static str,
    pub time_us: f64,
    /// S / t, GB/s.
    pub algbw_gbps: f64,
    /// algbw · (N−1)/N (reduce-scatter, allgather), · 2(N−1)/N (allreduce).
    pub busbw_gbps: f64,
    /// α-aware lower bound (synthesis.md §5.3), µs; None when unavailable.
    pub bound_us: Option<f64>,
    /// bound / time (1.0 = at the limit).
    pub bound_ratio: Option<f64>,
}

/// Simulate `prog` at every size and score it against the bound.
pub fn busbw_table(
    prog: &Program,
    topo: &Topology,
    sizes: &[u64],
    opts: &SimOptions,
) -> Result<Vec<Row>, SimError> {
    // Sizes are independent runs of one preparation: simulate them on
    // the available cores.
    let prepared = super::prepare(prog, topo, opts)?;
    let results = crate::par::map(sizes, |&s| prepared.run(s));
    let times = results
        .into_iter()
        .map(|r| r.map(|x| x.time_us))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Scorer::new(topo, prog.coll).rows(sizes, &times))
}

/// What scores a time against the bound: the op's bandwidth bound and
/// the topology's latency terms, computed once for any number of rows.
pub struct Scorer {
    coll: crate::ir::Collective,
    ranks: usize,
    bw: Option<bound::BandwidthBound>,
    lat: Option<bound::LatencyTerms>,
}

impl Scorer {
    pub fn new(topo: &Topology, coll: crate::ir::Collective) -> Self {
        let routed = topo.routed_links();
        let bw = bound::bandwidth_bound_routed(topo, coll, &routed).ok();
        let lat = bw
            .as_ref()
            .and_then(|b| bound::latency_terms_for_routed(topo, b, &routed).ok());
        Scorer {
            coll,
            ranks: topo.num_ranks(),
            bw,
            lat,
        }
    }

    /// The rows of a schedule of this op whose simulated time at
    /// `sizes[i]` is `times_us[i]`.
    pub fn rows(&self, sizes: &[u64], times_us: &[f64]) -> Vec<Row> {
        sizes
            .iter()
            .zip(times_us)
            .map(|(&s, &t)| {
                let algbw = if t > 0.0 { s as f64 / t / 1e3 } else { 0.0 };
                let bound_us = self
                    .bw
                    .as_ref()
                    .zip(self.lat.as_ref())
                    .map(|(b, l)| l.bound_us(b, s));
                Row {
                    size_bytes: s,
                    count: self.coll.element_count(self.ranks, s, 4),
                    dtype: "float",
                    time_us: t,
                    algbw_gbps: algbw,
                    busbw_gbps: algbw * self.coll.busbw_factor(self.ranks),
                    bound_us,
                    bound_ratio: bound_us.filter(|_| t > 0.0).map(|b| b / t),
                }
            })
            .collect()
    }
}

/// The ring baseline on the same topology, scored the same way: the
/// reduce-scatter ring in rank order ([`super::programs::ring_reduce_scatter`]),
/// for `rscc synth`'s "× the ring" column. `None` below 2 ranks.
pub fn ring_baseline(
    topo: &Topology,
    sizes: &[u64],
    opts: &SimOptions,
) -> Result<Option<Vec<Row>>, SimError> {
    match super::programs::ring_reduce_scatter(topo.num_ranks()) {
        Some(p) => busbw_table(&p, topo, sizes, opts).map(Some),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use crate::ir::Collective;

    #[test]
    fn factors_and_counts() {
        assert_eq!(Collective::ReduceScatter.busbw_factor(8), 7.0 / 8.0);
        assert_eq!(Collective::AllReduce.busbw_factor(4), 1.5);
        assert_eq!(
            Collective::ReduceScatter.element_count(8, 1 << 20, 4),
            32768
        );
        assert_eq!(Collective::AllReduce.element_count(8, 1 << 20, 4), 262144);
    }
}
