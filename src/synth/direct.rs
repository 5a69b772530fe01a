//! Direct (all-pairs) reduce-scatter: every rank sends its contribution to
//! each chunk straight to the chunk's owner, which reduces them as they
//! arrive. One transfer per pair and shard, one hop of latency: the
//! latency-optimal shape on switched machines, and bandwidth-optimal where
//! every pair has its own link (full meshes).
//!
//! Sender s sends to owner o at step (o − s − 1) mod N, so at every step the
//! sends form a permutation (no owner is hit by two senders at once). Steps
//! are spread over channels in windows of 31 so that no channel has more
//! than 31 peers in one direction (MSCCL allows 32).

use super::{ready, Context, Offer, SynthError, Synthesizer};
use crate::ir::{Algorithm, Spec, Topology, Transfer};

/// The direct synthesizer.
pub struct Direct;

impl Synthesizer for Direct {
    fn name(&self) -> &'static str {
        "direct"
    }
    fn summary(&self) -> &'static str {
        "all-pairs: every rank sends straight to each owner"
    }
    fn in_auto(&self, ctx: &Context) -> Result<(), String> {
        if applies(ctx.topo) {
            Ok(())
        } else {
            Err(format!(
                "{} ranks (offered for at most {DIRECT_MAX_RANKS}, with 2(N-1) threadblocks within the SM count)",
                ctx.ranks()
            ))
        }
    }
    fn offer(&self, ctx: &Context) -> Result<Offer, SynthError> {
        let n = ctx.ranks();
        let spec = Spec::reduce_scatter(n, ctx.opts.chunks.unwrap_or(1));
        // Where the runtime reduces in a pass of its own (RCCL), each
        // shard in k messages, k = 2, 4, …, for the size bands where a
        // shard is under MSCCL's tile: there one message per pair is
        // reduced only once it has all arrived, and k messages overlap the
        // passes with the wire (a runtime that reduces on the fly gains
        // nothing from them). Auto scores each; the budget keeps that
        // cheap (a direct's simulation is one flow per pair and message).
        let mut bands = Vec::new();
        if ctx.local_passes && ctx.opts.chunks.is_none() {
            let mut k = 2;
            while n * (n - 1) * k <= PIPELINED_BUDGET {
                bands.push(vec![ready(direct_pipelined(Spec::reduce_scatter(n, k)))]);
                k *= 2;
            }
        }
        Ok(Offer {
            bands,
            ..Offer::new(vec![ready(direct_algorithm(spec))])
        })
    }
}

/// Most ranks for which `auto` scores the direct schedule: beyond it the
/// 2(N−1) threadblocks per rank crowd the GPU and the flow simulation of
/// N(N−1) concurrent transfers dominates `auto`'s time.
pub const DIRECT_MAX_RANKS: usize = 32;

/// Whether `auto` scores the direct schedule on `topo` (and the mixture
/// uses it as a family).
pub fn applies(topo: &Topology) -> bool {
    let n = topo.num_ranks();
    let sms = topo.min_sms().map(|s| s as usize).unwrap_or(usize::MAX);
    (2..=DIRECT_MAX_RANKS).contains(&n) && 2 * (n - 1) <= sms
}

/// Pipelined direct schedules are offered while pairs × messages per pair
/// stays within this.
const PIPELINED_BUDGET: usize = 512;

/// Peers per channel and direction used by the direct schedule.
const PEERS_PER_CHANNEL: usize = 31;

pub fn direct_algorithm(spec: Spec) -> Algorithm {
    build(spec, false)
}

/// The direct schedule with each of a shard's chunks a message of its own:
/// sender s sends chunk j of owner o's shard at step j·N + (o − s − 1) mod
/// N, so each pair's connection carries its chunks one after another and
/// the owner reduces chunk j while chunk j + 1 is on the wire. With one
/// message per pair (`direct_algorithm`) MSCCL moves the whole shard as
/// one tile below its 2 MiB tile, and a runtime without fused steps
/// (RCCL: receive, then a local `re` pass) reduces it only after it has
/// all arrived. Named `direct-pipelined`.
pub fn direct_pipelined(spec: Spec) -> Algorithm {
    build(spec, true)
}

/// Sender s sends owner o's chunks at step (o − s − 1) mod N, all in one
/// message per pair, or `pipelined` chunk j at step j·N + that.
fn build(spec: Spec, pipelined: bool) -> Algorithm {
    let n = spec.ranks;
    let k = spec.chunks();
    let mut transfers = Vec::with_capacity(spec.total_chunks() * n.saturating_sub(1));
    for o in 0..n {
        for j in 0..k {
            for s in (0..n).filter(|&s| s != o) {
                let base = (o + n - s - 1) % n;
                transfers.push(Transfer {
                    step: if pipelined { j * n + base } else { base },
                    chunk: o * k + j,
                    src: s,
                    dst: o,
                    channel: base / PEERS_PER_CHANNEL,
                });
            }
        }
    }
    Algorithm {
        name: if pipelined {
            "direct-pipelined"
        } else {
            "direct"
        }
        .into(),
        spec,
        transfers,
        bcast: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each pair's connection carries the owner's k chunks one after
    /// another, every step is a permutation, and the classic form moves
    /// the same chunks over the same pairs in one step per pair.
    #[test]
    fn pipelined_direct_sends_a_pairs_chunks_one_after_another() {
        let (n, k) = (5, 3);
        let p = direct_pipelined(Spec::reduce_scatter(n, k));
        p.check().unwrap();
        assert_eq!(p.name, "direct-pipelined");
        assert_eq!(p.transfers.len(), n * (n - 1) * k);
        for s in 0..n {
            for o in (0..n).filter(|&o| o != s) {
                let steps: Vec<(usize, usize)> = p
                    .transfers
                    .iter()
                    .filter(|t| t.src == s && t.dst == o)
                    .map(|t| (t.chunk, t.step))
                    .collect();
                assert_eq!(steps.len(), k);
                for w in steps.windows(2) {
                    assert_eq!(w[1].0, w[0].0 + 1, "{s}->{o}: {steps:?}");
                    assert_eq!(w[1].1, w[0].1 + n, "{s}->{o}: {steps:?}");
                }
            }
        }
        let mut per_step = std::collections::HashMap::new();
        for t in &p.transfers {
            let e = per_step.entry(t.step).or_insert((Vec::new(), Vec::new()));
            e.0.push(t.src);
            e.1.push(t.dst);
        }
        for (step, (mut srcs, mut dsts)) in per_step {
            srcs.sort_unstable();
            dsts.sort_unstable();
            srcs.dedup();
            dsts.dedup();
            assert_eq!((srcs.len(), dsts.len()), (n, n), "step {step}");
        }
        let plain = direct_algorithm(Spec::reduce_scatter(n, k));
        let pairs = |a: &Algorithm| {
            let mut v: Vec<_> = a
                .transfers
                .iter()
                .map(|t| (t.src, t.dst, t.chunk))
                .collect();
            v.sort_unstable();
            v
        };
        assert_eq!(pairs(&p), pairs(&plain));
    }
}
