//! Hierarchical, NIC-aware reduce-scatter for several hosts with the same
//! number of GPUs each (rail-optimised fabrics).
//!
//! For the shard of rank o = (host h, local index k): on every other host
//! h′, the GPUs send their contribution to their local GPU k (the *rail
//! aggregator*: it shares rail k with o), which reduces them and sends one
//! partial sum to o across rail k; o's own host-mates send to o directly.
//! Every NIC carries (H − 1) partial sums per shard on its rail instead of
//! raw contributions, and the intra-host and inter-host phases pipeline.
//!
//! `abroad = m` moves m of o's host-mates (local indices k+1 … k+m) off
//! o's NVLink port: each sends its contribution across its own rail to its
//! peer on another host, where it joins that host's partial sum for o (the
//! peer forwards one partial sum to the aggregator either way, so this adds
//! no NVLink traffic there). That trades NVLink ingress at o for idle NIC
//! capacity — on 2 × DGX-H100 half a host-mate per shard on average is what
//! the cut bound needs (docs/algorithms.md), which the LP mixture
//! (`synth/mix.rs`) finds by mixing m = 0 and m = 1.

use super::{ready, Context, Offer, SynthError, Synthesizer};
use crate::ir::{Algorithm, Spec, Topology, Transfer};

/// The hierarchical synthesizer.
pub struct Hier;

impl Synthesizer for Hier {
    fn name(&self) -> &'static str {
        "hier"
    }
    fn summary(&self) -> &'static str {
        "hierarchical, NIC-aware (several hosts, or one host's groups)"
    }
    fn offer(&self, ctx: &Context) -> Result<Offer, SynthError> {
        let topo = ctx.topo;
        let hs = groups(topo).ok_or_else(|| {
            SynthError::not_offered(
                "hier",
                format!(
                    "it needs at least two hosts with the same number (≥ 2) of GPUs, or on one host (4 to {GROUPS_MAX_RANKS} GPUs) groups of the same size that reach each other at a lower route α than the rest (sockets, PCIe switches, hives); {} has {} host(s) and no such groups",
                    topo.name,
                    topo.num_hosts()
                ),
            )
        })?;
        let spec = Spec::reduce_scatter(ctx.ranks(), ctx.opts.chunks.unwrap_or(1));
        Ok(Offer::new(vec![ready(hier_algorithm(spec, &hs, 0))]))
    }
}

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

/// Most ranks for which one host is split into groups ([`groups`]): the
/// split needs every pair's route.
pub const GROUPS_MAX_RANKS: usize = 32;

/// The groups `hier` treats as hosts: the hosts ([`hosts`]) when there are
/// several; on one host, the coarsest split into ≥ 2 groups of the same
/// size (≥ 2 GPUs) whose members reach each other at a lower route α than
/// they reach the rest — CPU sockets behind a slower inter-socket link,
/// PCIe switches, xGMI hives. Each pair counts the larger α of its two
/// directions. None when no such split exists (a switch or a full mesh:
/// one α; a ring or a cube mesh: the lower-α pairs connect everything).
pub fn groups(topo: &Topology) -> Option<Vec<Vec<usize>>> {
    if topo.num_hosts() > 1 {
        return hosts(topo);
    }
    let n = topo.num_ranks();
    if !(4..=GROUPS_MAX_RANKS).contains(&n) {
        return None;
    }
    let routes = topo.all_routes();
    let alpha = |u: usize, v: usize| {
        let a = |x: usize, y: usize| routes[x][y].as_ref().map_or(f64::INFINITY, |r| r.alpha_us);
        a(u, v).max(a(v, u))
    };
    let mut levels: Vec<f64> = (0..n)
        .flat_map(|u| (u + 1..n).map(move |v| (u, v)))
        .map(|(u, v)| alpha(u, v))
        .filter(|a| a.is_finite())
        .collect();
    levels.sort_by(|a, b| b.total_cmp(a));
    levels.dedup_by(|a, b| (*a - *b).abs() <= 1e-9 * b.abs().max(1.0));
    // From the largest α down: the components of "closer than this level".
    for &level in &levels {
        let close = |u: usize, v: usize| alpha(u, v) < level - 1e-9 * level.max(1.0);
        let mut comp = vec![usize::MAX; n];
        let mut out: Vec<Vec<usize>> = Vec::new();
        for s in 0..n {
            if comp[s] != usize::MAX {
                continue;
            }
            let mut group = Vec::new();
            let mut stack = vec![s];
            comp[s] = out.len();
            while let Some(u) = stack.pop() {
                group.push(u);
                for (v, c) in comp.iter_mut().enumerate() {
                    if *c == usize::MAX && close(u, v) {
                        *c = out.len();
                        stack.push(v);
                    }
                }
            }
            group.sort_unstable();
            out.push(group);
        }
        let g = out[0].len();
        if out.len() >= 2 && g >= 2 && out.iter().all(|x| x.len() == g) {
            return Some(out);
        }
    }
    None
}

/// The hierarchical algorithm with `abroad` host-mates per shard sent
/// across their rail (0 ≤ abroad ≤ g − 1).
pub fn hier_algorithm(spec: Spec, hosts: &[Vec<usize>], abroad: usize) -> Algorithm {
    let n = spec.ranks;
    let nh = hosts.len();
    let g = hosts[0].len();
    let abroad = abroad.min(g - 1);
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
            // Host-mates of o that go abroad, and where to.
            let away = |k: usize| -> Option<usize> {
                let d = (k + g - ko) % g;
                (d >= 1 && d <= abroad).then(|| (ho + 1 + (ko + k) % (nh - 1)) % nh)
            };
            for (h, members) in hosts.iter().enumerate() {
                let agg = members[ko];
                // Host h's aggregator sends its partial sums across the rail
                // in the order q = 0, 1, … (owner host h+1 first) and keeps
                // its own host's shard last (q = H − 1): its host-mates send
                // their contributions in that same order, so the first rail
                // send waits for one shard's worth of intra-host traffic
                // per tile, not all of it.
                let q = (ho + nh - h - 1) % nh;
                for (k, &s) in members.iter().enumerate() {
                    if k == ko {
                        continue;
                    }
                    let intra = q * g + 1 + (ko + g - k - 1) % g;
                    match (h == ho).then(|| away(k)).flatten() {
                        Some(h2) => transfers.push(Transfer {
                            step: 0,
                            chunk,
                            src: s,
                            dst: hosts[h2][k],
                            // Not the rail channel: on one connection the
                            // next tile's contribution would wait behind
                            // this tile's rail partial sum (one receiving
                            // threadblock), serialising the tiles.
                            channel: 2,
                        }),
                        None => transfers.push(Transfer {
                            step: intra,
                            chunk,
                            src: s,
                            dst: agg,
                            channel: 0,
                        }),
                    }
                }
                if h != ho {
                    // Across rail ko. Numbered after every intra-host step
                    // (in rail order q), so the owner's accumulation takes
                    // its host-mates' contributions first, as they arrive,
                    // and the late rail partial sums last; the other way
                    // round, host-mate messages would wait unconsumed for
                    // the rail and fill the connection buffers (2 tiles),
                    // stalling the next tile's intra-host sends.
                    let step = nh * g + q;
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
        name: if abroad == 0 {
            "hier".into()
        } else {
            format!("hier-abroad{abroad}")
        },
        spec,
        transfers,
        bcast: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::front::generate::{generate, GenParams};

    /// One host splits into groups only where some GPUs reach each other
    /// at a lower α than the rest: not on a switch, a full mesh, a ring or
    /// DGX-1's cube mesh (the shipped single hosts); several hosts are
    /// their hosts.
    #[test]
    fn groups_are_hosts_or_lower_alpha_domains() {
        for kind in [
            "dgx1-v100",
            "ring",
            "dgx-h100",
            "dgx-a100",
            "mi300x",
            "switch",
        ] {
            let t = generate(kind, &GenParams::default()).unwrap();
            assert_eq!(groups(&t), None, "{kind}");
        }
        let two = generate(
            "dgx-h100",
            &GenParams {
                hosts: Some(2),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(groups(&two), hosts(&two));
        assert_eq!(groups(&two).unwrap().len(), 2);
    }

    /// The ordering rules of docs/algorithms.md: per chunk, rail transfers
    /// come after every intra-host transfer, and a host's intra-host
    /// transfers follow the aggregator's rail order q (own host's shard last).
    #[test]
    fn rail_order_and_owner_order() {
        let topo = generate(
            "dgx-a100",
            &GenParams {
                hosts: Some(4),
                ..Default::default()
            },
        )
        .unwrap();
        let hs = hosts(&topo).unwrap();
        let (nh, g) = (hs.len(), hs[0].len());
        let a = hier_algorithm(Spec::reduce_scatter(nh * g, 1), &hs, 0);
        a.check().unwrap();
        let host = |r: usize| hs.iter().position(|m| m.contains(&r)).unwrap();
        for t in &a.transfers {
            let (hs_, hd) = (host(t.src), host(t.dst));
            let ho = host(t.chunk);
            if hs_ != hd {
                // Rail: after every intra-host step, in rail order q.
                assert_eq!(t.step, nh * g + (ho + nh - hs_ - 1) % nh, "{t:?}");
            } else {
                let q = (ho + nh - hs_ - 1) % nh;
                assert!(t.step > q * g && t.step < (q + 1) * g, "{t:?}");
            }
        }
    }
}
