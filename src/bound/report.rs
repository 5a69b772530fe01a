//! What `rscc bound` reports: x*, the algbw limit, the binding cut and
//! what its capacity is made of by link kind, the step bound, and at a
//! size the bandwidth and α-aware time bounds. The CLI renders it as text
//! or serialises it.

use super::{
    bandwidth_bound_routed, latency_terms_for_routed, min_steps, ratio_f64, ratio_string,
    time_bound_us, BoundError,
};
use crate::ir::{Collective, Topology};
use num_rational::BigRational;
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};

/// An exact rational with its float value.
#[derive(Debug, Clone, Serialize)]
pub struct Fraction {
    pub fraction: String,
    pub float: f64,
}

impl Fraction {
    fn of(r: &BigRational) -> Fraction {
        Fraction {
            fraction: ratio_string(r),
            float: ratio_f64(r),
        }
    }
}

/// The cut that decides x*.
#[derive(Debug, Clone, Serialize)]
pub struct CutReport {
    pub inside: Vec<String>,
    pub outside: Vec<String>,
    pub gpus_inside: usize,
    pub capacity_gbps: Fraction,
    /// "into inside" (reduce-scatter) or "out of inside" (allgather).
    pub direction: &'static str,
    /// The crossing capacity by link kind: why two descriptions of one
    /// machine differ (e.g. an imported dump's PCIe paths add GPU ingress
    /// the NVLink-only model lacks). Only links some rank-to-rank route
    /// crosses count, as in the bound.
    pub capacity_by_kind_gbps: BTreeMap<String, f64>,
    /// Links across the cut that no route crosses, by kind: capacity the
    /// bound does not count (e.g. a PCIe link beside an NVLink between the
    /// same two GPUs, where the route takes the NVLink).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub unrouted_by_kind_gbps: BTreeMap<String, f64>,
}

/// The bounds of a collective on a topology.
#[derive(Debug, Clone, Serialize)]
pub struct BoundReport {
    pub topology: String,
    pub op: &'static str,
    pub ranks: usize,
    pub x_star: Fraction,
    pub algbw_limit_gbps: f64,
    pub binding_cut: CutReport,
    pub min_steps: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_bound_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alpha_bound_us: Option<f64>,
    /// The α-aware bound's cut latency term alone (docs/cost-model.md §2);
    /// `alpha_bound_us` is the largest of it, α_min + T_bw and the shard
    /// path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut_latency_us: Option<f64>,
}

/// The report for `coll` on `topo`, with the time bounds at `size`.
pub fn report(
    topo: &Topology,
    coll: Collective,
    size: Option<u64>,
) -> Result<BoundReport, BoundError> {
    let routed = topo.routed_links();
    let b = bandwidth_bound_routed(topo, coll, &routed)?;
    let steps = min_steps(topo, coll)?;
    let (time_bound_us, alpha_bound_us, cut_latency_us) = match size {
        Some(s) => {
            let lat = latency_terms_for_routed(topo, &b, &routed)?;
            (
                Some(time_bound_us(&b, s)),
                Some(lat.bound_us(&b, s)),
                Some(lat.cut_latency_us(s)),
            )
        }
        None => (None, None, None),
    };
    let cut = &b.binding_cut;
    let inside: HashSet<&str> = cut.inside.iter().map(|s| s.as_str()).collect();
    let mut by_kind: BTreeMap<String, f64> = BTreeMap::new();
    let mut unrouted: BTreeMap<String, f64> = BTreeMap::new();
    for e in topo.graph.edge_indices() {
        let (a, z) = topo.link_ends(e);
        let (ia, iz) = (
            inside.contains(topo.node(a).id.as_str()),
            inside.contains(topo.node(z).id.as_str()),
        );
        let crosses = if coll != Collective::AllGather {
            !ia && iz
        } else {
            ia && !iz
        };
        if crosses {
            let to = if routed[e.index()] {
                &mut by_kind
            } else {
                &mut unrouted
            };
            *to.entry(topo.link(e).kind.clone()).or_default() += topo.link(e).capacity_gbps();
        }
    }
    Ok(BoundReport {
        topology: topo.name.clone(),
        op: coll.display(),
        ranks: b.ranks,
        x_star: Fraction::of(&b.x_star),
        algbw_limit_gbps: b.algbw_limit_gbps,
        binding_cut: CutReport {
            inside: cut.inside.clone(),
            outside: cut.outside.clone(),
            gpus_inside: cut.gpus_inside,
            capacity_gbps: Fraction::of(&cut.capacity_gbps),
            direction: if coll != Collective::AllGather {
                "into inside"
            } else {
                "out of inside"
            },
            capacity_by_kind_gbps: by_kind,
            unrouted_by_kind_gbps: unrouted,
        },
        min_steps: steps,
        size_bytes: size,
        time_bound_us,
        alpha_bound_us,
        cut_latency_us,
    })
}
