//! Hierarchical, NIC-aware reduce-scatter for several hosts with the same
//! number of GPUs each (rail-optimised fabrics).
//!
//! For the shard of rank o = (host h, local index k): on every other host
//! h′, the GPUs send their contribution to their local GPU k (the *rail
//! aggregator*: it shares rail k with o), which reduces them and sends one
//! partial sum to o across rail k; o's own host-mates send to o directly.
//! Every NIC carries (H − 1) partial sums per shard on its rail instead of
//! raw contributions, and the intra-host and inter-host phases pipeline
//! (different chunks use different links). Within a host, sends to
//! aggregators are staggered like the direct schedule.

use crate::ir::{Algorithm, Spec, Topology, Transfer};

/// Hosts as lists of ranks in local order, if every host has the same
/// number of GPUs (≥ 2) and there are ≥ 2 hosts.
pub fn hosts(topo: &Topology) -> Option<Vec<Vec<usize>>> {
    let mut by_host: Vec<(String, Vec<usize>)> = Vec::new();
    for r in 0..topo.num_ranks() {
        let h = topo.host_of(r).to_string();
        match by_host.iter_mut().find(|(name, _)| *name == h) {
            Some((_, v)) => v.push(r),
            None => by_host.push((h, vec![r])),
        }
    }
    let g = by_host.first()?.1.len();
    if by_host.len() < 2 || g < 2 || by_host.iter().any(|(_, v)| v.len() != g) {
        return None;
    }
    Some(by_host.into_iter().map(|(_, v)| v).collect())
}

pub fn hier_algorithm(spec: Spec, hosts: &[Vec<usize>]) -> Algorithm {
    let n = spec.ranks;
    let g = hosts[0].len();
    let mut where_ = vec![(0usize, 0usize); n];
    for (h, members) in hosts.iter().enumerate() {
        for (k, &r) in members.iter().enumerate() {
            where_[r] = (h, k);
        }
    }
    let mut transfers = Vec::new();
    for (o, &(ho, ko)) in where_.iter().enumerate() {
        for j in 0..spec.chunks {
            let chunk = o * spec.chunks + j;
            for (h, members) in hosts.iter().enumerate() {
                let agg = members[ko];
                for (k, &s) in members.iter().enumerate() {
                    if k == ko {
                        continue;
                    }
                    // Intra-host send to the aggregator (or to o itself).
                    let step = (ko + g - k - 1) % g;
                    transfers.push(Transfer {
                        step,
                        chunk,
                        src: s,
                        dst: agg,
                        channel: 0,
                    });
                }
                if h != ho {
                    // Across rail ko, after the intra-host phase; staggered
                    // over hosts.
                    let step = g + (ho + hosts.len() - h - 1) % hosts.len();
                    transfers.push(Transfer {
                        step,
                        chunk,
                        src: agg,
                        dst: o,
                        channel: 1,
                    });
                }
            }
        }
    }
    Algorithm {
        name: "hier".into(),
        spec,
        transfers,
    }
}
