//! Latency trees: per shard, a reduction in-tree along fewest GPU-to-GPU
//! hops to the owner, for topologies where some ranks are not one hop
//! apart (hybrid cube-mesh, rings, partial meshes): a hop is a pair of
//! GPUs joined by one link (`hops`).
//!
//! The direct schedule sends every contribution straight to its owner over
//! a multi-hop route, so on such machines several routes share each link.
//! Here a rank at hop distance k from the owner sends to a neighbour at
//! distance k − 1, which adds it to its own contribution first: every
//! transfer crosses exactly one GPU-to-GPU hop, each shard moves N − 1
//! times in all, and the tree has as many levels as the owner's
//! eccentricity (the step bound of `bound::min_steps` for the worst
//! shard). Rank u at distance k sends at step D − k, D the deepest level
//! over all shards, so children always send before their parent.
//!
//! A shard is split into tree *classes* (chunks), each with its own trees
//! and channel, so an owner's ingress links all carry last hops at once
//! (on DGX-1 the far ranks' partial sums reach the owner through several
//! relays in parallel instead of one). See [`tree_algorithm`]. By default
//! the classes are *graded* — groups of 1, 2 and 3 chunks — so the light
//! ones run a hop ahead of the heavy ones and the levels of a shard
//! overlap ([`HopGraph::graded`]); where their multi-chunk steps would
//! deadlock once MSCCL splits them per chunk (rings), the verifier rejects
//! them and the driver takes equal classes.
//!
//! For small messages `auto` also scores *pieced members*
//! ([`HopGraph::pieced`]): one tree per member and owner, its chunks cut
//! into pieces that pipeline along the critical path while the branches
//! with slack move as one message (lowering's runs). On rings that is
//! within 1.07 × the α-aware bound at 64 KiB, safe below 32 MiB.

use super::{Candidate, Context, Offer, SynthError, Synthesizer};
use crate::ir::{Algorithm, Spec, Topology, Transfer};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;
use std::rc::Rc;

/// The latency-tree synthesizer.
pub struct Tree;

/// Most ranks for which `auto` scores latency trees (their hop graph and
/// the simulation of their many messages grow quickly with N).
pub const AUTO_MAX_RANKS: usize = super::direct::DIRECT_MAX_RANKS;

/// A request's hop graph ([`offered`]), built once.
struct Hops(Result<Rc<HopGraph>, String>);

fn hop_graph(ctx: &Context) -> Result<Rc<HopGraph>, SynthError> {
    ctx.shared(|c| Hops(offered(c.topo).map(Rc::new)))
        .0
        .clone()
        .map_err(|why| SynthError::not_offered("tree", why))
}

impl Synthesizer for Tree {
    fn name(&self) -> &'static str {
        "tree"
    }
    fn summary(&self) -> &'static str {
        "fewest-hop reduction trees (topologies with non-neighbour ranks)"
    }
    fn in_auto(&self, ctx: &Context) -> Result<(), String> {
        if ctx.ranks() > AUTO_MAX_RANKS {
            return Err(format!(
                "{} ranks (scored up to {AUTO_MAX_RANKS})",
                ctx.ranks()
            ));
        }
        Ok(())
    }
    /// `--chunks c`: c classes of one chunk. By default graded classes
    /// (GRADES groups of the default class count k), then fewer groups,
    /// then k equal classes, then one class: each a fallback for when the
    /// one before exceeds the runtime's limits (DGX-1's 80 SMs hold two
    /// groups, not three) or is rejected by the verifier (rings:
    /// multi-chunk sends start every chain). All are built from one hop
    /// graph, each only when the driver asks for it. The small-message
    /// candidate is the pieced member ([`HopGraph::pieced`]), whose slack
    /// branches move as multi-chunk steps.
    fn offer(&self, ctx: &Context) -> Result<Offer, SynthError> {
        let g = hop_graph(ctx)?;
        let n = ctx.ranks();
        let mut offer = Offer::default();
        if let Some(c) = ctx.opts.chunks {
            offer
                .candidates
                .push(Box::new(move || g.algorithm(Spec::reduce_scatter(n, c))));
            return Ok(offer);
        }
        let k = g.default_classes();
        for grades in (2..=GRADES).rev() {
            let g = g.clone();
            offer.candidates.push(Box::new(move || g.graded(k, grades)));
        }
        for k in [k, 1].into_iter().take(if k > 1 { 2 } else { 1 }) {
            let g = g.clone();
            offer
                .candidates
                .push(Box::new(move || g.algorithm(Spec::reduce_scatter(n, k))) as Candidate);
        }
        offer.small.push(Box::new(move || g.pieced(k, &PIECES)));
        Ok(offer)
    }
}

/// The hop graph the trees grow on, computed once per topology: the width
/// of every direct-neighbour hop, each rank's candidate parents, every
/// rank's hop distance to every owner, and each rank's ingress in units of
/// its narrowest incoming hop.
pub struct HopGraph {
    n: usize,
    /// cap[u·n + v]: width of the hop u → v (0: not one hop apart).
    cap: Vec<f64>,
    /// next[u]: ranks u reaches in one hop, ascending.
    next: Vec<Vec<usize>>,
    /// dist[o·n + u]: hops from u to owner o.
    dist: Vec<usize>,
    depth: usize,
    /// Per rank: B_in over its narrowest incoming direct hop.
    ingress_units: Vec<f64>,
}

impl HopGraph {
    /// The hop graph over `hops`; None when some rank cannot reach an
    /// owner over them.
    pub fn new(topo: &Topology) -> Option<HopGraph> {
        let n = topo.num_ranks();
        HopGraph::from_hops(n, &hops(topo), topo)
    }

    /// [`HopGraph::new`] from hops already found (`hops[u]`: (v, width)).
    fn from_hops(n: usize, hops: &[Vec<(usize, f64)>], topo: &Topology) -> Option<HopGraph> {
        let mut cap = vec![0.0f64; n * n];
        let mut next: Vec<Vec<usize>> = vec![Vec::new(); n];
        // into[v]: ranks that reach v in one hop.
        let mut into: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut narrowest = vec![f64::INFINITY; n];
        for (u, hops) in hops.iter().enumerate() {
            for &(v, b) in hops {
                if v != u && cap[u * n + v] == 0.0 {
                    cap[u * n + v] = if b > 0.0 { b } else { f64::MIN_POSITIVE };
                    next[u].push(v);
                    into[v].push(u);
                    if b > 0.0 {
                        narrowest[v] = narrowest[v].min(b);
                    }
                }
            }
            next[u].sort_unstable();
        }
        // Hop distance of every rank to every owner (BFS over reversed
        // hops).
        let mut dist = vec![usize::MAX; n * n];
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
        let ingress_units = (0..n)
            .map(|d| {
                let b_in = topo.gpu_bandwidth(d).1;
                if narrowest[d].is_finite() && b_in > 0.0 {
                    b_in / narrowest[d]
                } else {
                    1.0
                }
            })
            .collect();
        Some(HopGraph {
            n,
            cap,
            next,
            dist,
            depth,
            ingress_units,
        })
    }

    /// Every rank but owner `o`, farthest from it first (then by rank):
    /// children before their parents, the order trees are built and
    /// emitted in.
    fn farthest_first(&self, o: usize) -> Vec<usize> {
        let n = self.n;
        let d = &self.dist[o * n..(o + 1) * n];
        let mut order: Vec<usize> = (0..n).filter(|&u| u != o).collect();
        order.sort_by_key(|&u| (std::cmp::Reverse(d[u]), u));
        order
    }

    /// Tree classes `tree` uses by default: enough that every unit of an
    /// owner's ingress can carry a class's last hop — the largest, over
    /// ranks, of the capacity of the links into it
    /// (`Topology::gpu_bandwidth`) over its narrowest direct-neighbour hop
    /// (DGX-1: 6 NVLinks; a bidirectional ring: 2; one switch port: 1), at
    /// most [`MAX_TREE_CLASSES`].
    pub fn default_classes(&self) -> usize {
        let units = self.ingress_units.iter().copied().fold(1.0, f64::max);
        (units.round() as usize).clamp(1, MAX_TREE_CLASSES)
    }

    /// The latency-tree algorithm with `spec.chunks()` tree classes of one
    /// chunk each (`spec.ranks` must be the topology's rank count).
    ///
    /// Chunk j of every shard belongs to class j and gets its own trees:
    /// per class, owner and rank (farthest first) the parent is the
    /// candidate whose directed pair carries the least load *at that
    /// level* relative to its capacity (ties to the lower rank), preferring
    /// pairs not yet used at that level in the class. Class j runs on
    /// logical channel j, so classes move in parallel threadblocks and
    /// share the links (max-min fair) rather than queue behind one another;
    /// the m-th message a class puts on one directed pair at one level goes
    /// to channel j + m·k (k classes), so no channel carries two messages
    /// of one level on one connection.
    pub fn algorithm(&self, spec: Spec) -> Algorithm {
        assert_eq!(spec.ranks, self.n, "spec and hop graph disagree on ranks");
        self.weighted(&vec![1; spec.chunks()])
    }

    /// *Graded* classes: `grades` groups of k classes, the classes of
    /// group g (1-based) g chunks each — k classes of weight 1, then k of
    /// weight 2, … Sharing a link max-min fairly, the light classes finish
    /// each hop first and move on to the next while the heavy ones still
    /// cross, so the hops of one shard overlap instead of every class
    /// paying store-and-forward of the same size at every level
    /// (docs/algorithms.md "Latency trees").
    pub fn graded(&self, k: usize, grades: usize) -> Algorithm {
        let weights: Vec<usize> = (1..=grades)
            .flat_map(|g| std::iter::repeat_n(g, k))
            .collect();
        let mut a = self.weighted(&weights);
        a.name = format!("tree-graded{grades}");
        a
    }

    /// Tree classes of unequal size: class j owns `weights[j]` consecutive
    /// chunks of every shard, all with the class's trees, so lowering moves
    /// them as one `cnt = weights[j]` step. Parents are chosen as in
    /// [`HopGraph::algorithm`], with load counted in chunks.
    pub fn weighted(&self, weights: &[usize]) -> Algorithm {
        let n = self.n;
        assert!(weights.iter().all(|&w| w > 0), "empty tree class");
        let spec = Spec::reduce_scatter(n, weights.iter().sum());
        let k = weights.len();
        let total = spec.chunks();
        let (dist, depth) = (&self.dist, self.depth);
        let parents = self.parents(weights);
        let mut uses: FxHashMap<(usize, usize, usize), usize> = FxHashMap::default();
        let mut transfers = Vec::with_capacity(total * n * n.saturating_sub(1));
        let mut offset = 0;
        for (j, &w) in weights.iter().enumerate() {
            uses.clear();
            for o in 0..n {
                let d = &dist[o * n..(o + 1) * n];
                let order = self.farthest_first(o);
                for &u in &order {
                    let step = depth - d[u];
                    let p = parents[j][o * n + u];
                    let m = uses.entry((step, u, p)).or_insert(0);
                    for i in 0..w {
                        transfers.push(Transfer {
                            step,
                            chunk: o * total + offset + i,
                            src: u,
                            dst: p,
                            channel: j + *m * k,
                        });
                    }
                    *m += 1;
                }
            }
            offset += w;
        }
        Algorithm {
            name: "tree".into(),
            spec,
            transfers,
            bcast: Vec::new(),
        }
    }

    /// Tree *members* cut into *pieces*: `k` members, each with one tree
    /// per owner (parents as in [`HopGraph::weighted`], a member weighing
    /// its pieces' sum), and each member's chunks of a shard cut into
    /// pieces of `pieces[g]` chunks. A transfer on a longest path of its
    /// member's tree (the *critical* transfers: u's subtree height plus
    /// its distance is the tree's depth) gets its piece's own channel, so
    /// the pieces pipeline along the path, the light ones a hop ahead
    /// (sharing a link max-min fairly). Every other transfer lies on a
    /// branch with slack: it keeps one channel and one step for all the
    /// pieces of its member, so lowering moves it as one message per hop
    /// (a *run*, src/lower) instead of one per piece competing with the
    /// critical pieces for the links. Every transfer goes at step = its
    /// sender's subtree height (as soon as its children), so a branch with
    /// slack reaches the owner before the critical pieces — its receive
    /// heads the owner's chains, as a run spanning them must.
    pub fn pieced(&self, k: usize, pieces: &[usize]) -> Algorithm {
        let n = self.n;
        assert!(k > 0 && pieces.iter().all(|&w| w > 0), "empty tree piece");
        let g = pieces.len();
        let member: usize = pieces.iter().sum();
        let spec = Spec::reduce_scatter(n, k * member);
        let total = spec.chunks();
        let dist = &self.dist;
        let parents = self.parents(&vec![member; k]);
        // Channel bases: piece (i, q) → i·g + q; member i's slack
        // transfers → k·g + i, a channel of their own (sharing a piece's
        // would queue the merged message and the piece's critical ones in
        // one threadblock: ring8 64 KiB 1.12 instead of 1.067 × the
        // bound). The m-th message of one base on one directed pair at one
        // step goes to base + m·k·(g + 1).
        let bases = k * (g + 1);
        let mut uses: FxHashMap<(usize, usize, usize, usize), usize> = FxHashMap::default();
        let mut transfers = Vec::with_capacity(total * n * n.saturating_sub(1));
        let mut height = vec![0usize; n];
        for (i, par) in parents.iter().enumerate() {
            for o in 0..n {
                let d = &dist[o * n..(o + 1) * n];
                let p = &par[o * n..(o + 1) * n];
                let order = self.farthest_first(o);
                height.iter_mut().for_each(|h| *h = 0);
                for &u in &order {
                    height[p[u]] = height[p[u]].max(height[u] + 1);
                }
                let depth = height[o];
                for &u in &order {
                    let step = height[u];
                    let critical = height[u] + d[u] == depth;
                    let mut off = i * member;
                    for (q, &w) in pieces.iter().enumerate() {
                        let base = if critical { i * g + q } else { k * g + i };
                        let m = if critical || q == 0 {
                            let m = uses.entry((base, step, u, p[u])).or_insert(0);
                            *m += 1;
                            *m - 1
                        } else {
                            uses[&(base, step, u, p[u])] - 1
                        };
                        for x in 0..w {
                            transfers.push(Transfer {
                                step,
                                chunk: o * total + off + x,
                                src: u,
                                dst: p[u],
                                channel: base + m * bases,
                            });
                        }
                        off += w;
                    }
                }
            }
        }
        Algorithm {
            name: "tree-pieced".into(),
            spec,
            transfers,
            bcast: Vec::new(),
        }
    }

    /// Per class (weights[j] chunks) and owner o: every rank's parent,
    /// `parents[j][o·n + u]` (the owner's own entry is unused).
    fn parents(&self, weights: &[usize]) -> Vec<Vec<usize>> {
        let n = self.n;
        let (cap, dist, depth) = (&self.cap, &self.dist, self.depth);
        // Per (level, u, v): chunks on u → v at that level over all
        // classes, and messages of the current class there. Hash maps:
        // only direct pairs at their levels occur, far fewer than
        // levels × n².
        let mut load: FxHashMap<(usize, usize, usize), usize> = FxHashMap::default();
        let mut uses: FxHashMap<(usize, usize, usize), usize> = FxHashMap::default();
        let mut out = Vec::with_capacity(weights.len());
        for &w in weights {
            uses.clear();
            let mut par = vec![usize::MAX; n * n];
            for o in 0..n {
                let d = &dist[o * n..(o + 1) * n];
                let order = self.farthest_first(o);
                for &u in &order {
                    let step = depth - d[u];
                    let key = |v: usize| {
                        let at = (step, u, v);
                        let l = load.get(&at).copied().unwrap_or(0);
                        (
                            uses.get(&at).copied().unwrap_or(0),
                            l as f64 / cap[u * n + v],
                        )
                    };
                    // BFS distances: a rank at distance ≥ 1 has a
                    // neighbour one hop closer.
                    let p = self.next[u]
                        .iter()
                        .copied()
                        .filter(|&v| d[v] + 1 == d[u])
                        .min_by(|&a, &b| {
                            let (ua, la) = key(a);
                            let (ub, lb) = key(b);
                            ua.cmp(&ub).then(la.total_cmp(&lb)).then(a.cmp(&b))
                        })
                        .expect("a rank one hop closer to the owner");
                    *uses.entry((step, u, p)).or_insert(0) += 1;
                    *load.entry((step, u, p)).or_insert(0) += w;
                    par[o * n + u] = p;
                }
            }
            out.push(par);
        }
        out
    }
}

/// The latency-tree algorithm with `spec.chunks()` tree classes, or None
/// when some rank cannot reach an owner through hops
/// ([`HopGraph::algorithm`]).
pub fn tree_algorithm(spec: Spec, topo: &Topology) -> Option<Algorithm> {
    HopGraph::new(topo).map(|g| g.algorithm(spec))
}

/// [`HopGraph::default_classes`] of `topo` (1 when it has no hop graph).
pub fn default_classes(topo: &Topology) -> usize {
    HopGraph::new(topo).map_or(1, |g| g.default_classes())
}

/// Most tree classes (channels) `tree` uses by default.
pub const MAX_TREE_CLASSES: usize = 8;

/// Weight groups of `tree`'s default graded classes ([`HopGraph::graded`]).
pub const GRADES: usize = 3;

/// Pieces of a member in `tree`'s small-message candidate
/// ([`HopGraph::pieced`]), in chunks.
pub const PIECES: [usize; 4] = [1, 2, 3, 4];

/// The hops trees grow on, per rank: the GPUs it has a link to — its
/// cheapest route to them is that one link, no switch, CPU or GPU in
/// between — with the link's capacity. Through switches, PCIe or the CPUs
/// a pair is not a hop even when that route is the cheapest: on the
/// 8-GCD MI250 dumps a GCD reaches the GCDs it has no xGMI link to over
/// PCIe at 1.0 µs against 1.4 over two xGMI links, but at 24 GB/s against
/// 50, shared by every such pair, and trees over the xGMI links alone
/// beat the direct schedule over PCIe at 64 KiB and 1 MiB. On a DGX-1
/// whose dump includes PCIe only the NVLink pairs are hops, as on the
/// NVLink-only DGX-1.
pub(crate) fn hops(topo: &Topology) -> Vec<Vec<(usize, f64)>> {
    let n = topo.num_ranks();
    (0..n)
        .map(|u| {
            let pred = topo.route_tree(u);
            (0..n)
                .filter(|&v| v != u)
                .filter_map(|v| {
                    let r = topo.route_from_tree(u, v, &pred)?;
                    (r.links.len() == 1).then_some((v, r.bottleneck_gbps))
                })
                .collect()
        })
        .collect()
}

/// The hop graph latency trees grow on, or why they are not offered on
/// `topo`: every pair of ranks has a link (the trees would be the direct
/// schedule), or the GPUs' links do not connect every rank to every owner
/// (switched or PCIe-joined GPUs: there the direct and hierarchical
/// schedules cover it). Computes the hops once.
pub fn offered(topo: &Topology) -> Result<HopGraph, String> {
    let n = topo.num_ranks();
    let hops = hops(topo);
    if hops.iter().all(|h| h.len() + 1 >= n) {
        return Err(
            "every pair of ranks has a link, so the trees would be the direct schedule".into(),
        );
    }
    HopGraph::from_hops(n, &hops, topo).ok_or_else(|| {
        "the GPUs' links do not connect every rank (trees grow over GPU-to-GPU links, not through switches or PCIe)".into()
    })
}

/// Whether latency trees are offered: some pair of ranks has no link,
/// and the links connect every rank ([`offered`]).
pub fn applies(topo: &Topology) -> bool {
    offered(topo).is_ok()
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
    fn classes_spread_last_hops_over_the_ingress() {
        let topo = generate("dgx1-v100", &GenParams::default()).unwrap();
        let k = default_classes(&topo);
        assert_eq!(k, 6, "6 NVLinks into every DGX-1 GPU");
        let a = tree_algorithm(Spec::reduce_scatter(8, k), &topo).unwrap();
        a.check().unwrap();
        assert_eq!(a.num_steps(), 2);
        // No channel carries two messages of one step on one connection.
        let mut seen = std::collections::HashSet::new();
        for t in &a.transfers {
            assert!(seen.insert((t.channel, t.step, t.src, t.dst)), "{t:?}");
        }
        // Every owner takes its last hops from all four neighbours, and
        // its doubly linked neighbours carry more of them.
        for o in 0..8 {
            let mut from = [0usize; 8];
            for t in a.transfers.iter().filter(|t| t.dst == o && t.step == 1) {
                from[t.src] += 1;
            }
            let nbrs: Vec<usize> = (0..8).filter(|&u| from[u] > 0).collect();
            assert_eq!(nbrs.len(), 4, "owner {o}: {from:?}");
        }
    }

    #[test]
    fn ring_classes_take_both_directions() {
        let topo = generate("ring", &GenParams::default()).unwrap();
        assert_eq!(default_classes(&topo), 2);
        let a = tree_algorithm(Spec::reduce_scatter(8, 2), &topo).unwrap();
        a.check().unwrap();
        // The opposite rank's partial sum goes one way in one class and
        // the other way in the other.
        for o in 0..8 {
            let far = (o + 4) % 8;
            let dirs: std::collections::BTreeSet<usize> = a
                .transfers
                .iter()
                .filter(|t| t.src == far && t.chunk / 2 == o)
                .map(|t| (t.dst + 8 - far) % 8)
                .collect();
            assert_eq!(dirs, [1, 7].into_iter().collect(), "owner {o}");
        }
    }

    #[test]
    fn graded_classes_move_as_multi_chunk_steps_and_pipeline() {
        use crate::lower::{lower, LowerOptions};
        use crate::sim::{simulate, SimOptions};
        let topo = generate("dgx1-v100", &GenParams::default()).unwrap();
        let g = HopGraph::new(&topo).unwrap();
        let a = g.graded(6, 2);
        a.check().unwrap();
        assert_eq!(a.name, "tree-graded2");
        // Weights 1 ×6, 2 ×6: 18 chunks per shard, twelve classes.
        assert_eq!(a.spec.chunks(), 18);
        let p = lower(&a, &LowerOptions::default()).unwrap();
        crate::verify::verify(&p, &Default::default()).unwrap();
        let mut cnts: Vec<i64> = p.steps().map(|s| s.cnt).collect();
        cnts.sort_unstable();
        cnts.dedup();
        assert_eq!(cnts, vec![1, 2], "a class moves as one step");
        // The light classes run ahead: faster than equal classes at 64 KiB.
        let eq = lower(
            &g.algorithm(Spec::reduce_scatter(8, 6)),
            &LowerOptions::default(),
        )
        .unwrap();
        let so = SimOptions::default();
        let t_graded = simulate(&p, &topo, 64 << 10, &so).unwrap().time_us;
        let t_equal = simulate(&eq, &topo, 64 << 10, &so).unwrap().time_us;
        assert!(t_graded < 0.97 * t_equal, "{t_graded} vs {t_equal}");
    }

    /// On a ring the graded classes' multi-chunk sends start every chain,
    /// so once MSCCL splits them into one message per chunk each rank fills
    /// its two-slot FIFOs before anyone receives: the verifier rejects them
    /// and `tree` falls back to equal classes there.
    #[test]
    fn graded_classes_on_a_ring_are_rejected_as_a_deadlock() {
        use crate::lower::{lower, LowerOptions};
        let topo = generate("ring", &GenParams::default()).unwrap();
        let g = HopGraph::new(&topo).unwrap();
        let p = lower(&g.graded(2, 2), &LowerOptions::default()).unwrap();
        let e = crate::verify::verify(&p, &Default::default()).unwrap_err();
        assert_eq!(e.rule, "deadlock", "{e}");
        let eq = lower(
            &g.algorithm(Spec::reduce_scatter(8, 2)),
            &LowerOptions::default(),
        )
        .unwrap();
        crate::verify::verify(&eq, &Default::default()).unwrap();
    }

    /// Pieced members on ring8: each member's critical side moves as its
    /// pieces (1, 2, 3, 4 chunks, own channels), the side with slack as one
    /// 10-chunk message per hop. Those steps deadlock once MSCCL splits
    /// them, so the file is safe only with maxBytes ≤ 32 MiB — and with it,
    /// 64 KiB is within 1.1 × the α-aware bound (equal classes: 1.24 ×).
    #[test]
    fn pieced_members_pipeline_the_critical_side_and_merge_the_rest() {
        use crate::ir::Collective;
        use crate::lower::{lower, LowerOptions};
        use crate::sim::{simulate, SimOptions};
        let topo = generate("ring", &GenParams::default()).unwrap();
        let g = HopGraph::new(&topo).unwrap();
        let a = g.pieced(2, &PIECES);
        a.check().unwrap();
        assert_eq!(a.name, "tree-pieced");
        assert_eq!(a.spec.chunks(), 20);
        let p = lower(&a, &LowerOptions::default()).unwrap();
        let mut cnts: Vec<i64> = p.steps().map(|s| s.cnt).collect();
        cnts.sort_unstable();
        cnts.dedup();
        assert_eq!(cnts, vec![1, 2, 3, 4, 10]);
        let e = crate::verify::verify(&p, &Default::default()).unwrap_err();
        assert_eq!(e.rule, "deadlock", "{e}");
        let limit = crate::verify::one_message_up_to(&p).unwrap();
        assert_eq!(limit, 32 << 20);
        let mut safe = p.clone();
        safe.max_bytes = Some(limit as i64);
        crate::verify::verify(&safe, &Default::default()).unwrap();
        let lb = crate::bound::alpha_bound_us(&topo, Collective::ReduceScatter, 64 << 10).unwrap();
        let t = simulate(&safe, &topo, 64 << 10, &SimOptions::default())
            .unwrap()
            .time_us;
        assert!(t <= 1.1 * lb, "{t} vs {lb}");
        let eq = lower(
            &g.algorithm(Spec::reduce_scatter(8, 2)),
            &LowerOptions::default(),
        )
        .unwrap();
        let t_eq = simulate(&eq, &topo, 64 << 10, &SimOptions::default())
            .unwrap()
            .time_us;
        assert!(t < 0.9 * t_eq, "{t} vs equal classes {t_eq}");
    }

    #[test]
    fn one_class_on_a_switch() {
        let topo = generate("dgx-h100", &GenParams::default()).unwrap();
        assert_eq!(default_classes(&topo), 1);
    }

    #[test]
    fn not_offered_on_a_switch() {
        let topo = generate("dgx-h100", &GenParams::default()).unwrap();
        assert!(!applies(&topo));
    }
}
