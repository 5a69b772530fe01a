//! The Algorithm IR: what synthesis produces. A chunk-level reduce-scatter
//! is one in-tree per chunk, rooted at the chunk's owner: every other rank
//! sends its partial sum of that chunk to its parent exactly once, after it
//! has received (and added) the partial sums of all its children.
//!
//! Routes are not part of the Algorithm: a tree edge is a GPU-to-GPU send,
//! and the topology decides which links it crosses.

use super::spec::Spec;
use std::fmt;

/// One tree edge: `src` sends its partial sum of `chunk` to `dst`, which
/// adds it to its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Transfer {
    /// Logical time: a transfer may start once all transfers into `src`
    /// for this chunk have finished; larger steps happen later. Lowering
    /// orders every connection by (step, chunk).
    pub step: usize,
    /// Global chunk index, 0..spec.total_chunks().
    pub chunk: usize,
    pub src: usize,
    pub dst: usize,
    /// Logical channel (a ring, a tree class); lowering maps it to MSCCL
    /// channels.
    pub channel: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Algorithm {
    pub name: String,
    pub spec: Spec,
    pub transfers: Vec<Transfer>,
}

/// Why an Algorithm is not a valid reduce-scatter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlgorithmError(pub String);

impl fmt::Display for AlgorithmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for AlgorithmError {}

impl Algorithm {
    /// Number of logical channels used.
    pub fn num_channels(&self) -> usize {
        self.transfers
            .iter()
            .map(|t| t.channel + 1)
            .max()
            .unwrap_or(1)
    }

    /// Largest step + 1.
    pub fn num_steps(&self) -> usize {
        self.transfers.iter().map(|t| t.step + 1).max().unwrap_or(0)
    }

    /// Check the tree structure: per chunk, every non-owner rank sends
    /// exactly once, the owner never sends, nothing is sent to itself, the
    /// edges reach the owner (no cycles), and a rank sends only after all
    /// its children's transfers (strictly larger step).
    pub fn check(&self) -> Result<(), AlgorithmError> {
        let n = self.spec.ranks;
        let total = self.spec.total_chunks();
        // Transfers grouped by chunk (a CSR of indices), then one reusable
        // parent table per chunk: O(transfers + chunks·ranks) time and
        // O(transfers + ranks) memory.
        let mut start = vec![0usize; total + 1];
        for t in &self.transfers {
            if t.chunk >= total || t.src >= n || t.dst >= n {
                return Err(AlgorithmError(format!(
                    "transfer {t:?} names a chunk or rank out of range"
                )));
            }
            if t.src == t.dst {
                return Err(AlgorithmError(format!("transfer {t:?} sends to itself")));
            }
            if t.src == self.spec.owner(t.chunk) {
                return Err(AlgorithmError(format!(
                    "chunk {} is sent away by its owner rank {}",
                    t.chunk, t.src
                )));
            }
            start[t.chunk + 1] += 1;
        }
        for c in 0..total {
            start[c + 1] += start[c];
        }
        let mut fill = start.clone();
        let mut by_chunk = vec![0usize; self.transfers.len()];
        for (i, t) in self.transfers.iter().enumerate() {
            by_chunk[fill[t.chunk]] = i;
            fill[t.chunk] += 1;
        }
        drop(fill);
        let mut par: Vec<Option<(usize, usize)>> = vec![None; n];
        for c in 0..total {
            let mine = &by_chunk[start[c]..start[c + 1]];
            for &i in mine {
                let t = &self.transfers[i];
                if par[t.src].is_some() {
                    return Err(AlgorithmError(format!(
                        "rank {} sends chunk {} twice",
                        t.src, t.chunk
                    )));
                }
                par[t.src] = Some((t.dst, t.step));
            }
            let owner = self.spec.owner(c);
            for r in 0..n {
                if r == owner {
                    continue;
                }
                let Some((p, step)) = par[r] else {
                    return Err(AlgorithmError(format!(
                        "rank {r} never sends its contribution to chunk {c}"
                    )));
                };
                // The parent's own send must come strictly later.
                if let Some((_, pstep)) = par[p] {
                    if pstep <= step {
                        return Err(AlgorithmError(format!(
                            "chunk {c}: rank {p} forwards at step {pstep} before receiving from rank {r} at step {step}"
                        )));
                    }
                }
                // No walk to the root is needed: steps strictly increase
                // along parent edges, so following parents cannot cycle and
                // must stop at the only rank without a parent, the owner.
            }
            for &i in mine {
                par[self.transfers[i].src] = None;
            }
        }
        Ok(())
    }
}
