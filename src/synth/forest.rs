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
//!
//! Split ([`Form::Split`]), every chunk is a class of its own on a channel
//! of its own (chunk j of owner d on channel (d·k + j) mod `lanes`, k
//! chunks per shard), so each tree edge of each chunk is a connection of
//! its own. Links share their bandwidth fairly among the connections that
//! cross them (the simulator's max-min allocation, as the hardware's
//! arbitration does), and then every connection moves the same bytes: a
//! chunk whose edges cross links with m_e connections each moves at least
//! at min_e c_e / m_e, so every chunk ends by the packing's integral
//! utilisation. Grouped by owner instead, one connection carries all of an
//! owner's chunks over an edge, connections of unequal volume share a link
//! equally, and the busiest ones finish late while the links they leave
//! idle wait (a generated 3-cube, random seed 2, `pack`'s 3-chunk plan
//! at 1 GiB: 7388.5 µs grouped, 84.8 % of the bound; 6701.1 µs split,
//! 93.5 %).

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

/// How [`algorithm`] lays a class out in steps and channels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// A class is one message per edge, owner d on channel d mod lanes.
    Classes,
    /// A class moves chunk by chunk in a wave, owner d on channel d mod
    /// lanes.
    Pipelined,
    /// Every chunk a class of its own on a channel of its own.
    Split,
}

impl Form {
    /// The suffix of the Algorithm's name.
    fn suffix(self) -> &'static str {
        match self {
            Form::Classes => "",
            Form::Pipelined => "-pipelined",
            Form::Split => "-split",
        }
    }
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
/// on `n` ranks and at most `lanes` channels, laid out as `form`, named
/// `{name}{lanes}` with the form's suffix, and its number of levels (the
/// deepest tree's height plus one).
pub fn algorithm(
    name: &str,
    n: usize,
    chunks: usize,
    classes: &[Class],
    lanes: usize,
    form: Form,
) -> (Algorithm, usize) {
    let lanes = lanes.max(1);
    // (step, u, v, owner, first chunk, chunks, channel) per message; the
    // deepest tree's height.
    let mut msgs: Vec<(usize, usize, usize, usize, usize, usize, usize)> = Vec::new();
    let mut top = 0;
    for c in classes {
        let h = heights(&c.parent, c.owner);
        for u in (0..n).filter(|&u| u != c.owner) {
            top = top.max(h[u]);
            let (v, d) = (c.parent[u], c.owner);
            match form {
                Form::Classes => msgs.push((h[u], u, v, d, c.first, c.len, d % lanes)),
                Form::Pipelined => {
                    for j in 0..c.len {
                        msgs.push((h[u] + j, u, v, d, c.first + j, 1, d % lanes));
                    }
                }
                Form::Split => {
                    for j in c.first..c.first + c.len {
                        msgs.push((h[u], u, v, d, j, 1, (d * chunks + j) % lanes));
                    }
                }
            }
        }
    }
    msgs.sort_unstable();
    let mut sub: FxHashMap<(usize, usize, usize, usize), usize> = FxHashMap::default();
    let subs: Vec<usize> = msgs
        .iter()
        .map(|&(step, u, v, .., ch)| {
            let k = sub.entry((step, u, v, ch)).or_insert(0);
            *k += 1;
            *k - 1
        })
        .collect();
    let per_step = subs.iter().copied().max().unwrap_or(0) + 1;
    let mut transfers = Vec::with_capacity(chunks * n * n.saturating_sub(1));
    for (&(step, u, v, d, first, len, channel), &k) in msgs.iter().zip(&subs) {
        for c in first..first + len {
            transfers.push(Transfer {
                step: step * per_step + k,
                chunk: d * chunks + c,
                src: u,
                dst: v,
                channel,
            });
        }
    }
    let levels = if msgs.is_empty() { 0 } else { top + 1 };
    (
        Algorithm {
            name: format!("{name}{lanes}{}", form.suffix()),
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

/// Test support for the forest builders' users (`pack`, `flow`).
#[cfg(test)]
pub(crate) mod testing {
    use crate::front::generate::{generate, GenParams};
    use crate::ir::{Algorithm, Topology};

    /// `rscc topo generate random --seed seed`.
    pub fn random_fabric(seed: u64) -> Topology {
        let params = GenParams {
            seed: Some(seed),
            ..GenParams::default()
        };
        generate("random", &params).unwrap()
    }

    /// `a` checked, lowered with the default options and simulated on
    /// `topo` at `size` bytes: its time (µs).
    pub fn simulated_us(topo: &Topology, a: &Algorithm, size: u64) -> f64 {
        use crate::lower::{lower, LowerOptions};
        use crate::sim::{simulate, SimOptions};
        a.check().unwrap();
        let prog = lower(a, &LowerOptions::default()).unwrap();
        simulate(&prog, topo, size, &SimOptions::default())
            .unwrap()
            .time_us
    }
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
        let (a, levels) = algorithm("t", 3, 1, &all, 3, Form::Classes);
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

    /// Split, every chunk is a message of its own on a channel of its own:
    /// chunk j of owner d on channel (d·k + j) mod lanes, so that with a
    /// channel per chunk no connection carries two chunks; grouped, an
    /// owner's class is one message on the owner's channel.
    #[test]
    fn split_gives_every_chunk_a_connection_of_its_own() {
        let (n, k) = (3, 2);
        let classes: Vec<Class> = (0..n)
            .map(|d| Class {
                owner: d,
                first: 0,
                len: k,
                parent: (0..n)
                    .map(|u| if u == d { usize::MAX } else { d })
                    .collect(),
            })
            .collect();
        let (split, _) = algorithm("t", n, k, &classes, n * k, Form::Split);
        split.check().unwrap();
        assert_eq!(split.name, "t6-split");
        let mut connections = std::collections::HashSet::new();
        for t in &split.transfers {
            assert_eq!(t.channel, t.chunk % (n * k), "{t:?}");
            assert!(connections.insert((t.src, t.dst, t.channel)), "{t:?}");
        }
        let (grouped, _) = algorithm("t", n, k, &classes, n, Form::Classes);
        grouped.check().unwrap();
        assert!(grouped.transfers.iter().all(|t| t.channel == t.chunk / k));
        // On fewer channels than chunks, chunks share them in turn.
        let (two, _) = algorithm("t", n, k, &classes, 2, Form::Split);
        two.check().unwrap();
        assert!(two.transfers.iter().all(|t| t.channel == t.chunk % 2));
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
        let (one, _) = algorithm("t", n, 3, &classes, n, Form::Classes);
        let (wave, levels) = algorithm("t", n, 3, &classes, n, Form::Pipelined);
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
