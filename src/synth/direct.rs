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

use crate::ir::{Algorithm, Spec, Transfer};

/// Peers per channel and direction used by the direct schedule.
const PEERS_PER_CHANNEL: usize = 31;

pub fn direct_algorithm(spec: Spec) -> Algorithm {
    let n = spec.ranks;
    let mut transfers = Vec::with_capacity(spec.total_chunks() * n.saturating_sub(1));
    for o in 0..n {
        for j in 0..spec.chunks {
            let chunk = o * spec.chunks + j;
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
    }
}
