//! The model: the shape a topology must have for the gap schedule (every
//! far rank two GPU-to-GPU links from the owner, through a neighbour),
//! each shard's far ranks, neighbours and vectors (one way per far rank:
//! a relay or its route), and the topology's symmetries
//! ([`automorphisms`]) with the ties between shards they give.

use super::super::tree::hops;
use super::GAP_MAX_RANKS;
use crate::ir::{Route, Topology};
use petgraph::graph::EdgeIndex;
use rustc_hash::FxHashMap;

/// Most relay vectors per shard.
const MAX_VECTORS: usize = 512;
/// Most partial assignments the symmetry search tries ([`automorphisms`]).
const MAX_SYMMETRY_NODES: usize = 200_000;

/// How a far rank's contribution reaches the owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Via {
    /// Through this neighbour of the owner, which reduces it first.
    Relay(usize),
    /// Cut-through over the topology's route.
    Route,
}

/// One shard's options: its far ranks, its neighbours, and every vector
/// (one `Via` per far rank) with the LP's share.
#[derive(Debug, Clone)]
pub(super) struct Owner {
    pub(super) far: Vec<usize>,
    pub(super) nbrs: Vec<usize>,
    pub(super) vectors: Vec<Vec<Via>>,
    pub(super) shares: Vec<f64>,
}

/// The hops (one-link routes) of `topo` and each shard's far ranks and
/// neighbours, or why the gap schedule is not offered.
pub fn offered(topo: &Topology) -> Result<(), String> {
    shape(topo).map(|_| ())
}

pub(super) type Shape = (Vec<Vec<(usize, f64)>>, Vec<(Vec<usize>, Vec<usize>)>);

pub(super) fn shape(topo: &Topology) -> Result<Shape, String> {
    let n = topo.num_ranks();
    if !(4..=GAP_MAX_RANKS).contains(&n) {
        return Err(format!("{n} ranks (offered for 4 to {GAP_MAX_RANKS})"));
    }
    let hops = hops(topo);
    let is_hop = |u: usize, v: usize| hops[u].iter().any(|&(x, _)| x == v);
    let mut per_owner = Vec::new();
    for d in 0..n {
        let nbrs: Vec<usize> = (0..n).filter(|&u| u != d && is_hop(u, d)).collect();
        let far: Vec<usize> = (0..n).filter(|&u| u != d && !is_hop(u, d)).collect();
        if nbrs.is_empty() {
            return Err(format!(
                "rank {d} has no GPU-to-GPU link (GPUs joined through switches, NICs or PCIe: there every rank is one route from every other, and direct covers it)"
            ));
        }
        for &f in &far {
            if !nbrs.iter().any(|&r| is_hop(f, r)) {
                return Err(format!(
                    "rank {f} is more than two GPU-to-GPU links from rank {d} (the gap schedule relays through one neighbour)"
                ));
            }
        }
        per_owner.push((far, nbrs));
    }
    if per_owner.iter().all(|(far, _)| far.is_empty()) {
        return Err(
            "every pair of ranks has a link, so there is no second wave (direct covers it)".into(),
        );
    }
    let vectors: usize = per_owner
        .iter()
        .map(|(far, nbrs)| {
            far.iter()
                .map(|&f| nbrs.iter().filter(|&&r| is_hop(f, r)).count() + 1)
                .product::<usize>()
        })
        .max()
        .unwrap_or(1);
    if vectors > MAX_VECTORS {
        return Err(format!(
            "{vectors} relay choices for one shard (at most {MAX_VECTORS})"
        ));
    }
    Ok((hops, per_owner))
}

/// The one link u → v (its route when that is a single link).
pub(super) fn link(routes: &[Vec<Option<Route>>], u: usize, v: usize) -> Result<EdgeIndex, String> {
    match routes[u][v].as_ref().map(|r| &r.links[..]) {
        Some(&[e]) => Ok(e),
        _ => Err(format!("no link {u} → {v}")),
    }
}

/// Each shard's far ranks, neighbours and every vector (one way per far
/// rank: each relay it has a link to, or its route), shares still zero;
/// and the largest α of a neighbour's link.
pub(super) fn vectors(
    topo: &Topology,
    hops: &[Vec<(usize, f64)>],
    routes: &[Vec<Option<Route>>],
    per_owner: Vec<(Vec<usize>, Vec<usize>)>,
) -> Result<(Vec<Owner>, f64), String> {
    let is_hop = |u: usize, v: usize| hops[u].iter().any(|&(x, _)| x == v);
    let mut owners = Vec::new();
    let mut alpha = 0.0f64;
    for (d, (far, nbrs)) in per_owner.into_iter().enumerate() {
        let mut vectors: Vec<Vec<Via>> = vec![vec![]];
        for &f in &far {
            let mut opts: Vec<Via> = nbrs
                .iter()
                .filter(|&&r| is_hop(f, r))
                .map(|&r| Via::Relay(r))
                .collect();
            opts.push(Via::Route);
            vectors = vectors
                .into_iter()
                .flat_map(|v| {
                    opts.iter().map(move |&o| {
                        let mut v = v.clone();
                        v.push(o);
                        v
                    })
                })
                .collect();
        }
        for &r in &nbrs {
            alpha = alpha.max(topo.link(link(routes, r, d)?).alpha_us);
        }
        owners.push(Owner {
            far,
            nbrs,
            shares: vec![0.0; vectors.len()],
            vectors,
        });
    }
    Ok((owners, alpha))
}

/// Rank permutations σ that keep every GPU-to-GPU link: `key(u, v)` (the
/// link's capacity and α, None without one) equals `key(σu, σv)`.
/// Backtracking over ranks in order; stops after [`MAX_SYMMETRY_NODES`]
/// partial assignments (then the symmetries found so far).
pub(super) fn automorphisms(
    n: usize,
    key: &dyn Fn(usize, usize) -> Option<(u64, u64)>,
) -> Vec<Vec<usize>> {
    fn extend(
        sigma: &mut Vec<usize>,
        free: &mut [bool],
        key: &dyn Fn(usize, usize) -> Option<(u64, u64)>,
        nodes: &mut usize,
        out: &mut Vec<Vec<usize>>,
    ) {
        let i = sigma.len();
        if i == free.len() {
            out.push(sigma.clone());
            return;
        }
        for t in 0..free.len() {
            if !free[t] || *nodes >= MAX_SYMMETRY_NODES {
                continue;
            }
            *nodes += 1;
            let fits =
                (0..i).all(|j| key(i, j) == key(t, sigma[j]) && key(j, i) == key(sigma[j], t));
            if fits {
                free[t] = false;
                sigma.push(t);
                extend(sigma, free, key, nodes, out);
                sigma.pop();
                free[t] = true;
            }
        }
    }
    let mut out = Vec::new();
    extend(&mut Vec::new(), &mut vec![true; n], key, &mut 0, &mut out);
    out
}

/// Each shard's tie to the first shard of its orbit under `auts`: a σ
/// with σ(first) = shard, and where σ takes each of the first's vectors
/// (far ranks and relays mapped by σ, a route stays a route).
pub(super) fn ties(owners: &[Owner], auts: &[Vec<usize>]) -> Vec<Option<(usize, Vec<usize>)>> {
    let n = owners.len();
    let mut out: Vec<Option<(usize, Vec<usize>)>> = vec![None; n];
    let mut placed = vec![false; n];
    for first in 0..n {
        if placed[first] {
            continue;
        }
        placed[first] = true;
        for sigma in auts {
            let d = sigma[first];
            if placed[d] {
                continue;
            }
            let (of, od) = (&owners[first], &owners[d]);
            let index: FxHashMap<&[Via], usize> = od
                .vectors
                .iter()
                .enumerate()
                .map(|(i, v)| (&v[..], i))
                .collect();
            let map: Option<Vec<usize>> = of
                .vectors
                .iter()
                .map(|v| {
                    let mut w = vec![Via::Route; od.far.len()];
                    for (j, via) in v.iter().enumerate() {
                        let k = od.far.iter().position(|&f| f == sigma[of.far[j]])?;
                        w[k] = match *via {
                            Via::Relay(r) => Via::Relay(sigma[r]),
                            Via::Route => Via::Route,
                        };
                    }
                    index.get(&w[..]).copied()
                })
                .collect();
            if let Some(map) = map {
                placed[d] = true;
                out[d] = Some((first, map));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::solve;
    use super::super::testing::dgx1;
    use super::*;
    use crate::front::generate::{generate, GenParams};

    #[test]
    fn offered_on_the_cube_mesh_only() {
        assert!(offered(&dgx1()).is_ok());
        let why = offered(
            &generate(
                "ring",
                &GenParams {
                    gpus: Some(8),
                    ..Default::default()
                },
            )
            .unwrap(),
        )
        .unwrap_err();
        assert!(why.contains("more than two"), "{why}");
        let why = offered(
            &generate(
                "switch",
                &GenParams {
                    gpus: Some(8),
                    ..Default::default()
                },
            )
            .unwrap(),
        )
        .unwrap_err();
        assert!(why.contains("no GPU-to-GPU link"), "{why}");
        let mesh = GenParams {
            gpus: Some(8),
            ..Default::default()
        };
        let why = offered(&generate("fully-connected", &mesh).unwrap()).unwrap_err();
        assert!(why.contains("every pair"), "{why}");
    }

    #[test]
    fn dgx1_ties_shards_by_its_four_symmetries() {
        let topo = dgx1();
        let g = solve(&topo, 30.0, 0, super::super::GAP_SIZE).unwrap();
        // The cube-mesh's NVLink pairs (with their counts) have four
        // symmetries: orbits {0, 2, 4, 6} and {1, 3, 5, 7}.
        let firsts: Vec<Option<usize>> = g.ties.iter().map(|t| t.as_ref().map(|x| x.0)).collect();
        assert_eq!(
            firsts,
            [
                None,
                None,
                Some(0),
                Some(1),
                Some(0),
                Some(1),
                Some(0),
                Some(1)
            ]
        );
        let p = g.tied_start(24);
        for (d, t) in g.ties.iter().enumerate() {
            let Some((f, map)) = t else { continue };
            // A bijection of the vectors that keeps each vector's shape.
            let mut seen = map.clone();
            seen.sort_unstable();
            assert_eq!(seen, (0..map.len()).collect::<Vec<_>>());
            for (v, &w) in map.iter().enumerate() {
                assert_eq!(p.counts[d][w], p.counts[*f][v]);
                let relays = |d: usize, v: usize| {
                    g.owners[d].vectors[v]
                        .iter()
                        .filter(|x| matches!(x, Via::Relay(_)))
                        .count()
                };
                assert_eq!(relays(d, w), relays(*f, v));
            }
        }
        // A 6-ring's rotations and reflections; a 4-cycle with one
        // double link keeps only the reflection through it.
        let key = |u: usize, v: usize| ((u + 1) % 6 == v || (v + 1) % 6 == u).then_some((1, 1));
        assert_eq!(automorphisms(6, &key).len(), 12);
        let lopsided = |u: usize, v: usize| match (u.min(v), u.max(v)) {
            (0, 1) => Some((2, 1)),
            (1, 2) | (2, 3) | (0, 3) => Some((1, 1)),
            _ => None,
        };
        assert_eq!(automorphisms(4, &lopsided).len(), 2);
    }
}
