//! The ring synthesizer: NCCL-style rings, the baseline every other
//! algorithm is compared with.
//!
//! Ring orders come from, in this order of preference:
//! 1. edge-disjoint Hamiltonian cycles over direct GPU–GPU links (link
//!    multiplicity counts: a double NVLink can carry two cycles), each used
//!    in both directions (DGX-1: 3 cycles → 6 rings, every link busy);
//! 2. on several hosts, one ring per rail: ring k enters host h at local GPU
//!    (k+h) mod g and leaves it at local GPU (k+h+1) mod g, so every ring
//!    crosses hosts on a different NIC (NCCL's multi-rail rings);
//! 3. a Hamiltonian cycle over "direct" neighbours (no GPU in between:
//!    through a switch a hop is one GPU-to-GPU send);
//! 4. rank order, each hop following its multi-hop route.
//!
//! Chunk j of every shard goes to ring ⌊j·R/C⌋ (contiguous blocks, so a
//! ring moves its chunks with one multi-chunk step); on its ring a chunk
//! owned by rank o starts at o's successor and is reduced hop by hop until
//! it reaches o after N−1 steps.

use crate::ir::{Algorithm, NodeKind, Spec, Topology, Transfer};
use std::collections::HashMap;

/// Node expansions allowed per Hamiltonian-cycle search.
const SEARCH_BUDGET: usize = 200_000;

/// Ring orders for a topology (each a permutation of 0..N), best first.
pub fn find_rings(topo: &Topology) -> Vec<Vec<usize>> {
    let n = topo.num_ranks();
    if n <= 2 {
        return if n == 2 {
            vec![vec![0, 1]]
        } else {
            vec![vec![0]]
        };
    }
    // 1. Direct GPU–GPU links with multiplicities (undirected: min of the
    // two directions' counts).
    let mut mult: HashMap<(usize, usize), u32> = HashMap::new();
    for e in topo.graph.edge_indices() {
        let (a, b) = topo.link_ends(e);
        let (na, nb) = (topo.node(a), topo.node(b));
        if na.kind == NodeKind::Gpu && nb.kind == NodeKind::Gpu {
            if let (Some(ra), Some(rb)) = (na.rank, nb.rank) {
                *mult.entry((ra, rb)).or_default() += topo.link(e).count;
            }
        }
    }
    let mut cap = vec![vec![0u32; n]; n];
    for (&(a, b), &m) in &mult {
        let back = mult.get(&(b, a)).copied().unwrap_or(0);
        cap[a][b] = m.min(back);
    }
    let mut rings = Vec::new();
    while let Some(cycle) = hamiltonian(n, |a, b| cap[a][b] > 0) {
        for w in 0..n {
            let (a, b) = (cycle[w], cycle[(w + 1) % n]);
            cap[a][b] -= 1;
            cap[b][a] -= 1;
        }
        let mut rev = cycle.clone();
        rev[1..].reverse();
        rings.push(cycle);
        rings.push(rev);
        if rings.len() >= 16 {
            break;
        }
    }
    if !rings.is_empty() {
        return rings;
    }
    // 2. Several hosts: one ring per rail.
    if let Some(r) = rail_rings(topo) {
        return r;
    }
    // 3. Direct neighbours (through switches/NICs).
    let adj: Vec<Vec<bool>> = (0..n)
        .map(|a| {
            let mut row = vec![false; n];
            for (b, _) in topo.direct_neighbours(a) {
                row[b] = true;
            }
            row
        })
        .collect();
    if let Some(c) = hamiltonian(n, |a, b| adj[a][b] && adj[b][a]) {
        return vec![c];
    }
    // 4. Rank order over multi-hop routes.
    vec![(0..n).collect()]
}

/// One ring per rail on a multi-host topology with equal hosts.
fn rail_rings(topo: &Topology) -> Option<Vec<Vec<usize>>> {
    let hosts = super::hier::hosts(topo)?;
    let n = topo.num_ranks();
    let g = hosts[0].len();
    let mut rings = Vec::new();
    for k in 0..g {
        let mut order = Vec::with_capacity(n);
        for (h, members) in hosts.iter().enumerate() {
            let entry = (k + h) % g;
            let exit = if h + 1 == hosts.len() {
                k
            } else {
                (k + h + 1) % g
            };
            // Visit entry, then the others in cyclic order, ending at exit.
            order.push(members[entry]);
            let mut j = (entry + 1) % g;
            while j != entry {
                if j != exit {
                    order.push(members[j]);
                }
                j = (j + 1) % g;
            }
            if exit != entry {
                order.push(members[exit]);
            }
        }
        rings.push(order);
    }
    Some(rings)
}

/// A Hamiltonian cycle starting at 0 over `edge(a, b)`, by depth-first
/// search (neighbours in rank order, nearest first) with a node budget.
fn hamiltonian(n: usize, edge: impl Fn(usize, usize) -> bool) -> Option<Vec<usize>> {
    let nbrs: Vec<Vec<usize>> = (0..n)
        .map(|a| {
            let mut v: Vec<usize> = (0..n).filter(|&b| b != a && edge(a, b)).collect();
            v.sort_by_key(|&b| (b + n - a) % n);
            v
        })
        .collect();
    let mut path = vec![0usize];
    let mut on = vec![false; n];
    on[0] = true;
    let mut next_idx = vec![0usize];
    let mut budget = SEARCH_BUDGET;
    while let Some(&v) = path.last() {
        if path.len() == n && edge(v, 0) {
            return Some(path);
        }
        let i = next_idx.last_mut()?;
        let mut advanced = false;
        if path.len() < n {
            while *i < nbrs[v].len() {
                let w = nbrs[v][*i];
                *i += 1;
                if !on[w] {
                    budget = budget.checked_sub(1)?;
                    on[w] = true;
                    path.push(w);
                    next_idx.push(0);
                    advanced = true;
                    break;
                }
            }
        }
        if !advanced {
            let w = path.pop()?;
            on[w] = false;
            next_idx.pop();
            if path.is_empty() {
                return None;
            }
        }
    }
    None
}

/// Ring reduce-scatter with the given ring orders and `chunks` chunks per
/// shard (at most `rings.len()` rings are used: one per chunk block).
pub fn ring_algorithm(spec: Spec, rings: &[Vec<usize>]) -> Algorithm {
    use crate::ir::program::MAX_CHANNELS;
    let n = spec.ranks;
    let c = spec.chunks;
    let r = rings.len().min(c).max(1);
    let mut transfers = Vec::with_capacity(spec.total_chunks() * n.saturating_sub(1));
    for (ri, ring) in rings.iter().take(r).enumerate() {
        let mut pos = vec![0usize; n];
        for (i, &v) in ring.iter().enumerate() {
            pos[v] = i;
        }
        for o in 0..n {
            for j in 0..c {
                if j * r / c != ri {
                    continue;
                }
                let chunk = o * c + j;
                for t in 0..n - 1 {
                    let src = ring[(pos[o] + 1 + t) % n];
                    let dst = ring[(pos[o] + 2 + t) % n];
                    transfers.push(Transfer {
                        step: t,
                        chunk,
                        src,
                        dst,
                        // One channel per chunk: chunks of one ring on
                        // one channel would move as a multi-chunk step,
                        // which MSCCL splits into one message per chunk,
                        // and every rank's first send would then overfill
                        // the two-slot FIFO before anyone receives.
                        channel: if c <= MAX_CHANNELS { j } else { ri },
                    });
                }
            }
        }
    }
    Algorithm {
        name: format!(
            "ring{}",
            if r > 1 {
                format!("x{r}")
            } else {
                String::new()
            }
        ),
        spec,
        transfers,
    }
}
