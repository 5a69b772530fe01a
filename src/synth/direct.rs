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
        let spec = Spec::reduce_scatter(ctx.ranks(), ctx.opts.chunks.unwrap_or(1));
        Ok(Offer::new(vec![ready(direct_algorithm(spec))]))
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

/// Peers per channel and direction used by the direct schedule.
const PEERS_PER_CHANNEL: usize = 31;

pub fn direct_algorithm(spec: Spec) -> Algorithm {
    let n = spec.ranks;
    let mut transfers = Vec::with_capacity(spec.total_chunks() * n.saturating_sub(1));
    for o in 0..n {
        for j in 0..spec.chunks() {
            let chunk = o * spec.chunks() + j;
            for s in (0..n).filter(|&s| s != o) {
                let step = (o + n - s - 1) % n;
                transfers.push(Transfer {
                    step,
                    chunk,
                    src: s,
                    dst: o,
                    channel: step / PEERS_PER_CHANNEL,
                });
            }
        }
    }
    Algorithm {
        name: "direct".into(),
        spec,
        transfers,
        bcast: Vec::new(),
    }
}
