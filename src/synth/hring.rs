//! Hierarchical ring (`--algo hier-ring`), a reference for `hier`: per
//! shard of o = (host h_o, local k_o), every host reduces along its own
//! ring of GPUs (local k_o + 1 → k_o + 2 → … → k_o, channel 0), then the
//! rail aggregators of rail k_o pass the partial sum around the ring of
//! hosts (h_o + 1 → h_o + 2 → … → h_o, channel 1), each adding its host's
//! part: NCCL-like rings, one per rail, across the hosts. It moves what
//! `hier` moves over every link (H − 1 partial sums per GPU on its rail),
//! with g − 1 + H − 1 hops of latency per shard and a few threadblocks
//! per rank (more where channel groups split a connection). `auto` does
//! not score it: bench/cluster.sh prints it beside `auto`.

use super::{hier, ready, Context, Offer, SynthError, Synthesizer};
use crate::ir::{Algorithm, Spec, Transfer};

/// The hierarchical-ring synthesizer.
pub struct HierRing;

impl Synthesizer for HierRing {
    fn name(&self) -> &'static str {
        "hier-ring"
    }
    fn summary(&self) -> &'static str {
        "reference: a ring inside each host, then a ring of hosts per rail"
    }
    fn in_auto(&self, _ctx: &Context) -> Result<(), String> {
        Err("by name only: a reference algorithm (bench/cluster.sh)".into())
    }
    fn offer(&self, ctx: &Context) -> Result<Offer, SynthError> {
        let hs = reference_groups("hier-ring", ctx)?;
        let spec = Spec::reduce_scatter(ctx.ranks(), ctx.opts.chunks.unwrap_or(1));
        Ok(Offer::new(vec![ready(hier_ring(spec, &hs))]))
    }
}

/// `hier`'s groups (hosts, or one host's lower-α groups), or why a
/// reference algorithm named `name` is not offered.
pub(super) fn reference_groups(
    name: &'static str,
    ctx: &Context,
) -> Result<Vec<Vec<usize>>, SynthError> {
    hier::groups(ctx.topo).ok_or_else(|| {
        SynthError::not_offered(
            name,
            format!(
                "it needs what hier needs: at least two hosts with the same number of GPUs, or one host's groups; {} has {} host(s) and no such groups",
                ctx.topo.name,
                ctx.topo.num_hosts()
            ),
        )
    })
}

/// The hierarchical ring over `hosts` (ranks in local order, every host
/// the same size).
pub fn hier_ring(spec: Spec, hosts: &[Vec<usize>]) -> Algorithm {
    let nh = hosts.len();
    let g = hosts[0].len();
    let where_ = hier::positions(spec.ranks, hosts);
    let mut transfers = Vec::new();
    let c = spec.chunks();
    for (o, &(ho, ko)) in where_.iter().enumerate() {
        for j in 0..c {
            let chunk = o * c + j;
            for (h, members) in hosts.iter().enumerate() {
                // One host-mate connection carries every host's shard of
                // one rail at each hop: sub-step q, owner host h + 1 first
                // and the own host's last (as `hier` orders its rail), and
                // within it chunk j, so no connection has two messages of
                // one step (nor a multi-chunk step, which MSCCL splits
                // into one message per chunk at large sizes).
                let q = (ho + nh - h - 1) % nh;
                for i in 0..g - 1 {
                    transfers.push(Transfer {
                        step: (i * nh + q) * c + j,
                        chunk,
                        src: members[(ko + 1 + i) % g],
                        dst: members[(ko + 2 + i) % g],
                        channel: 0,
                    });
                }
            }
            for i in 0..nh - 1 {
                transfers.push(Transfer {
                    step: ((g - 1) * nh + i) * c + j,
                    chunk,
                    src: hosts[(ho + 1 + i) % nh][ko],
                    dst: hosts[(ho + 2 + i) % nh][ko],
                    channel: 1,
                });
            }
        }
    }
    Algorithm::reduce_scatter("hier-ring", spec, transfers)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A valid reduction per shard; every GPU sends H − 1 partial sums on
    /// its rail and (g − 1)·H chunks to its next host-mate, per chunk of a
    /// shard, each at a step of its own on its connection.
    #[test]
    fn rings_inside_hosts_then_around_each_rail() {
        for (nh, g, c) in [(2usize, 2usize, 1usize), (3, 4, 2), (8, 8, 1)] {
            let hs: Vec<Vec<usize>> = (0..nh).map(|h| (h * g..h * g + g).collect()).collect();
            let a = hier_ring(Spec::reduce_scatter(nh * g, c), &hs);
            a.check().unwrap_or_else(|e| panic!("H={nh} g={g}: {e}"));
            let mut rail = vec![0usize; nh * g];
            let mut intra = vec![0usize; nh * g];
            for t in &a.transfers {
                if t.src / g == t.dst / g {
                    assert_eq!(t.dst % g, (t.src % g + 1) % g, "{t:?}");
                    intra[t.src] += 1;
                } else {
                    assert_eq!(t.dst / g, (t.src / g + 1) % nh, "{t:?}");
                    assert_eq!(t.src % g, (t.chunk / c) % g, "rail k carries shards k");
                    rail[t.src] += 1;
                }
            }
            assert!(rail.iter().all(|&k| k == c * (nh - 1)), "{rail:?}");
            assert!(intra.iter().all(|&k| k == c * (g - 1) * nh), "{intra:?}");
            let mut steps = std::collections::HashSet::new();
            for t in &a.transfers {
                assert!(steps.insert((t.src, t.dst, t.step)), "{t:?}");
            }
        }
    }
}
