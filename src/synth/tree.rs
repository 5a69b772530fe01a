//! Latency trees: per shard, a reduction in-tree along fewest GPU-to-GPU
//! hops to the owner, for topologies where some ranks are not direct
//! neighbours (hybrid cube-mesh, rings, partial meshes).
//!
//! The direct schedule sends every contribution straight to its owner over
//! a multi-hop route, so on such machines several routes share each link.
//! Here a rank at hop distance k from the owner sends to a neighbour at
//! distance k − 1, which adds it to its own contribution first: every
//! transfer crosses exactly one GPU-to-GPU hop, each shard moves N − 1
//! times in all, and the tree has as many levels as the owner's
//! eccentricity (the step bound of `bound::min_steps` for the worst
//! shard). Among candidate parents the least-loaded link (transfers so far
//! on the directed pair, over all shards) wins, ties to the lower rank.
//! Rank u at distance k sends at step D − k, D the deepest level over all
//! shards, so children always send before their parent.

use crate::ir::{Algorithm, Spec, Topology, Transfer};
use std::collections::VecDeque;

/// The latency-tree algorithm, or None when some rank cannot reach an
/// owner through direct neighbours.
pub fn tree_algorithm(spec: Spec, topo: &Topology) -> Option<Algorithm> {
    let n = spec.ranks;
    // into[v]: ranks that reach v in one hop.
    let mut into: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut is_nbr = vec![false; n * n];
    for u in 0..n {
        for (v, _) in topo.direct_neighbours(u) {
            if v != u && !is_nbr[u * n + v] {
                is_nbr[u * n + v] = true;
                into[v].push(u);
            }
        }
    }
    for l in into.iter_mut() {
        l.sort_unstable();
    }
    // Hop distance of every rank to every owner (BFS over reversed hops).
    let mut dist = vec![usize::MAX; n * n]; // dist[o * n + u]
    for o in 0..n {
        let d = &mut dist[o * n..(o + 1) * n];
        d[o] = 0;
        let mut q = VecDeque::from([o]);
        while let Some(v) = q.pop_front() {
            for &u in &into[v] {
                if d[u] == usize::MAX {
                    d[u] = d[v] + 1;
                    q.push_back(u);
                }
            }
        }
        if d.contains(&usize::MAX) {
            return None;
        }
    }
    let depth = dist.iter().copied().max().unwrap_or(0);
    let mut load = vec![0usize; n * n];
    let mut transfers = Vec::with_capacity(spec.total_chunks() * n.saturating_sub(1));
    for o in 0..n {
        let d = &dist[o * n..(o + 1) * n];
        // Parents, farthest ranks first so deeper levels are balanced first.
        let mut order: Vec<usize> = (0..n).filter(|&u| u != o).collect();
        order.sort_by_key(|&u| (std::cmp::Reverse(d[u]), u));
        let mut parent = vec![usize::MAX; n];
        for &u in &order {
            let p = (0..n)
                .filter(|&v| is_nbr[u * n + v] && d[v] + 1 == d[u])
                .min_by_key(|&v| (load[u * n + v], v))?;
            parent[u] = p;
            load[u * n + p] += spec.chunks;
        }
        for j in 0..spec.chunks {
            let chunk = o * spec.chunks + j;
            for &u in &order {
                transfers.push(Transfer {
                    step: depth - d[u],
                    chunk,
                    src: u,
                    dst: parent[u],
                    channel: 0,
                });
            }
        }
    }
    Some(Algorithm {
        name: "tree".into(),
        spec,
        transfers,
    })
}

/// Whether latency trees differ from the direct schedule: some pair of
/// ranks is not direct neighbours.
pub fn applies(topo: &Topology) -> bool {
    let n = topo.num_ranks();
    (0..n).any(|u| {
        let nb = topo.direct_neighbours(u);
        (0..n).any(|v| v != u && !nb.iter().any(|&(w, _)| w == v))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::front::generate::{generate, GenParams};

    #[test]
    fn ring8_trees_are_two_half_rings() {
        let topo = generate("ring", &GenParams::default()).unwrap();
        assert_eq!(topo.num_ranks(), 8);
        assert!(applies(&topo));
        let a = tree_algorithm(Spec::reduce_scatter(8, 1), &topo).unwrap();
        a.check().unwrap();
        // Four levels: the opposite rank is 4 hops away.
        assert_eq!(a.num_steps(), 4);
        // Every transfer is one hop on the ring.
        for t in &a.transfers {
            let d = (t.src + 8 - t.dst) % 8;
            assert!(d == 1 || d == 7, "{t:?}");
        }
    }

    #[test]
    fn dgx1_trees_have_two_levels() {
        let topo = generate("dgx1-v100", &GenParams::default()).unwrap();
        assert!(applies(&topo));
        let a = tree_algorithm(Spec::reduce_scatter(8, 2), &topo).unwrap();
        a.check().unwrap();
        assert_eq!(a.num_steps(), 2);
    }

    #[test]
    fn not_offered_on_a_switch() {
        let topo = generate("dgx-h100", &GenParams::default()).unwrap();
        assert!(!applies(&topo));
    }
}
