//! Per-owner reduction trees to an Algorithm: the construction `flow` and
//! `pack` share.
//!
//! A [`Class`] is a run of consecutive chunks of one owner's shard that
//! reduce along one in-tree (`parent[u]` for every rank u ≠ owner). A
//! class moves as one step per edge, a transfer's step its rank's height
//! in the class's tree (leaves 0), so every rank sends after all of its
//! children. Pipelined, chunk j of a class (j = 0, 1, …) moves at step
//! h + j instead, h its sender's height: a rank forwards chunk j while its
//! children send chunk j + 1, so a class pipelines chunk by chunk where a
//! chunk is one message (under MSCCL's 2 MiB tile, as the tiles pipeline a
//! chunk above it), for a message per chunk. Owner d's trees run on
//! channel d mod `lanes`, so each owner's reduction pipelines in its own
//! threadblocks; the k-th message of one (step, pair, channel) moves to
//! sub-step k, so no channel carries two messages of one step on one
//! connection.

use super::mix;
use crate::ir::{Algorithm, Spec, Topology, Transfer};
use rustc_hash::FxHashMap;

/// Chunks `first .. first + len` of `owner`'s shard, reduced along
/// `parent` (`parent[u]` is where rank u sends; unused at the owner).
#[derive(Debug, Clone, PartialEq)]
pub struct Class {
    pub owner: usize,
    pub first: usize,
    pub len: usize,
    pub parent: Vec<usize>,
}

/// Each rank's height in the in-tree `parent` rooted at `root` (leaves 0).
fn heights(parent: &[usize], root: usize) -> Vec<usize> {
    let n = parent.len();
    let mut height = vec![0usize; n];
    // Depth first, then relax parents from the deepest ranks up.
    let mut depth = vec![usize::MAX; n];
    depth[root] = 0;
    for s in 0..n {
        let mut path = Vec::new();
        let mut v = s;
        while depth[v] == usize::MAX {
            path.push(v);
            v = parent[v];
        }
        let mut d = depth[v];
        for &u in path.iter().rev() {
            d += 1;
            depth[u] = d;
        }
    }
    let mut by_depth: Vec<usize> = (0..n).filter(|&u| u != root).collect();
    by_depth.sort_by_key(|&u| std::cmp::Reverse(depth[u]));
    for u in by_depth {
        let p = parent[u];
        if p != root {
            height[p] = height[p].max(height[u] + 1);
        }
    }
    height
}

/// The Algorithm of `classes` (which cover every owner's `chunks` chunks)
/// on `n` ranks and at most `lanes` channels, named `{name}{lanes}` (with
/// `-pipelined` when each class moves chunk by chunk), and its number of
/// levels (the deepest tree's height plus one).
pub fn algorithm(
    name: &str,
    n: usize,
    chunks: usize,
    classes: &[Class],
    lanes: usize,
    pipelined: bool,
) -> (Algorithm, usize) {
    let lanes = lanes.max(1);
    // (step, u, v, owner, first chunk, chunks) per message; the deepest
    // tree's height.
    let mut msgs: Vec<(usize, usize, usize, usize, usize, usize)> = Vec::new();
    let mut top = 0;
    for c in classes {
        let h = heights(&c.parent, c.owner);
        for u in (0..n).filter(|&u| u != c.owner) {
            top = top.max(h[u]);
            if pipelined {
                for j in 0..c.len {
                    msgs.push((h[u] + j, u, c.parent[u], c.owner, c.first + j, 1));
                }
            } else {
                msgs.push((h[u], u, c.parent[u], c.owner, c.first, c.len));
            }
        }
    }
    msgs.sort_unstable();
    let mut sub: FxHashMap<(usize, usize, usize, usize), usize> = FxHashMap::default();
    let subs: Vec<usize> = msgs
        .iter()
        .map(|&(step, u, v, d, ..)| {
            let k = sub.entry((step, u, v, d % lanes)).or_insert(0);
            *k += 1;
            *k - 1
        })
        .collect();
    let per_step = subs.iter().copied().max().unwrap_or(0) + 1;
    let mut transfers = Vec::with_capacity(chunks * n * n.saturating_sub(1));
    for (&(step, u, v, d, first, len), &k) in msgs.iter().zip(&subs) {
        for c in first..first + len {
            transfers.push(Transfer {
                step: step * per_step + k,
                chunk: d * chunks + c,
                src: u,
                dst: v,
                channel: d % lanes,
            });
        }
    }
    let levels = if msgs.is_empty() { 0 } else { top + 1 };
    (
        Algorithm {
            name: format!("{name}{lanes}{}", if pipelined { "-pipelined" } else { "" }),
            spec: Spec::reduce_scatter(n, chunks),
            transfers,
            bcast: Vec::new(),
        },
        levels,
    )
}

/// The message size [`estimate`] optimises for.
const REFERENCE_BYTES: u64 = 1 << 30;

/// MSCCL's per-tile store-and-forward fill, (tiles + levels − 1) / tiles,
/// of a schedule with `chunks` chunks per shard and `levels` levels on `n`
/// ranks, at a 1 GiB message with the simulator's 2 MiB tiles: in the last
/// tile the top of every tree waits for the levels below it.
pub fn fill(n: usize, chunks: usize, levels: usize) -> f64 {
    let tile = crate::ir::msccl::SIMPLE_TILE_BYTES as f64;
    let shard = (REFERENCE_BYTES / n.max(1) as u64) as f64;
    let tiles = (shard / chunks.max(1) as f64 / tile).ceil().max(1.0);
    (tiles + levels as f64 - 1.0) / tiles
}

/// The estimated large-message time of `a` (which has `levels` levels) per
/// unit of shard: its max link utilisation times its [`fill`]; None when
/// some transfer has no route.
pub fn estimate(topo: &Topology, a: &Algorithm, levels: usize) -> Option<f64> {
    let loads = mix::link_loads(topo, a).ok()?;
    let u = loads
        .iter()
        .map(|(&e, &l)| l / topo.graph[petgraph::graph::EdgeIndex::new(e)].capacity_gbps())
        .fold(0.0, f64::max);
    Some(u * fill(topo.num_ranks(), a.spec.chunks(), levels))
}

/// The chunk count in `1..=max_chunks` with the least [`estimate`]. More
/// chunks round an LP's fractions closer but make each chunk fewer tiles,
/// so deep trees fill longer (16-GCD MI250 VM, 10 levels: the closest
/// rounding of the flow LP, 9 chunks, simulates at 35.5 % of the bound;
/// this choice, 2 chunks, at 38.3 %). `build(c)` is the Algorithm with c
/// chunks per shard and its levels.
pub fn chunk_count(
    topo: &Topology,
    max_chunks: usize,
    build: impl Fn(usize) -> (Algorithm, usize),
) -> usize {
    let mut best = (f64::INFINITY, 1);
    for c in 1..=max_chunks {
        let (a, levels) = build(c);
        let Some(est) = estimate(topo, &a, levels) else {
            continue;
        };
        if est < best.0 * (1.0 - 1e-9) {
            best = (est, c);
        }
    }
    best.1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heights_count_the_longest_path_from_a_leaf() {
        // 3 → 2 → 1 → 0 and 4 → 0.
        let parent = vec![usize::MAX, 0, 1, 2, 0];
        assert_eq!(heights(&parent, 0), vec![0, 2, 1, 0, 0]);
    }

    #[test]
    fn a_chain_sends_bottom_up_one_step_per_level() {
        let classes = [Class {
            owner: 0,
            first: 0,
            len: 1,
            parent: vec![usize::MAX, 0, 1],
        }];
        // Owners 1 and 2 send straight to their owner.
        let mut all = classes.to_vec();
        all.push(Class {
            owner: 1,
            first: 0,
            len: 1,
            parent: vec![1, usize::MAX, 1],
        });
        all.push(Class {
            owner: 2,
            first: 0,
            len: 1,
            parent: vec![2, 2, usize::MAX],
        });
        let (a, levels) = algorithm("t", 3, 1, &all, 3, false);
        a.check().unwrap();
        assert_eq!(levels, 2);
        let step = |src, dst, chunk| {
            a.transfers
                .iter()
                .find(|t| t.src == src && t.dst == dst && t.chunk == chunk)
                .unwrap()
                .step
        };
        assert!(step(2, 1, 0) < step(1, 0, 0));
    }

    /// A class of three chunks down the chain 3 → 2 → 1 → 0: as one class
    /// every hop moves all three at once (one step per level); pipelined,
    /// each chunk is a message of its own, a hop's chunk j follows its
    /// chunk j − 1 and the hop below's chunk j, and the hops overlap.
    #[test]
    fn pipelined_classes_move_chunk_by_chunk_in_a_wave() {
        let n = 4;
        let mut classes = vec![Class {
            owner: 0,
            first: 0,
            len: 3,
            parent: vec![usize::MAX, 0, 1, 2],
        }];
        for d in 1..n {
            classes.push(Class {
                owner: d,
                first: 0,
                len: 3,
                parent: (0..n)
                    .map(|u| if u == d { usize::MAX } else { d })
                    .collect(),
            });
        }
        let (one, _) = algorithm("t", n, 3, &classes, n, false);
        let (wave, levels) = algorithm("t", n, 3, &classes, n, true);
        one.check().unwrap();
        wave.check().unwrap();
        assert_eq!(levels, 3);
        assert_eq!(wave.name, "t4-pipelined");
        let steps = |a: &Algorithm, src: usize| -> Vec<usize> {
            let mut s: Vec<usize> = a
                .transfers
                .iter()
                .filter(|t| t.src == src && t.chunk < 3)
                .map(|t| t.step)
                .collect();
            s.sort_unstable();
            s
        };
        // Class form: one step per hop, all three chunks in it.
        for u in 1..n {
            let s = steps(&one, u);
            assert!(s.iter().all(|&x| x == s[0]), "{u}: {s:?}");
        }
        // Pipelined: chunk j of a hop follows chunk j − 1 of it, and
        // follows chunk j of the hop below it.
        let at = |src: usize, chunk: usize| {
            wave.transfers
                .iter()
                .find(|t| t.src == src && t.chunk == chunk)
                .unwrap()
                .step
        };
        for j in 0..3 {
            if j > 0 {
                assert!(at(3, j - 1) < at(3, j));
            }
            assert!(at(3, j) < at(2, j) && at(2, j) < at(1, j));
        }
        // The hops overlap: rank 2 forwards chunk 0 before rank 3 sends
        // its last chunk.
        assert!(at(2, 0) < at(3, 2));
    }
}
