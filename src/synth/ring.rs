//! The ring synthesizer: NCCL-style rings, the baseline every other
//! algorithm is compared with.
//!
//! Ring orders come from, in this order of preference:
//! 1. edge-disjoint Hamiltonian cycles over direct GPU–GPU links (link
//!    multiplicity counts: a double NVLink can carry two cycles), each used
//!    in both directions (DGX-1: 3 cycles → 6 rings, every link busy);
//!    where ranks have an odd number of links, arc-disjoint directed
//!    cycles as well, each a ring in its own direction
//!    (`find_directed_rings`: a mesh of 8 gives 7), offered as a further
//!    candidate group;
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

use super::{Context, Offer, SynthError, Synthesizer};
use crate::ir::msccl::MAX_CHANNELS;
use crate::ir::{Algorithm, NodeKind, Spec, Topology, Transfer};
use std::collections::HashMap;
use std::ops::ControlFlow;
use std::rc::Rc;

/// The ring synthesizer.
pub struct Ring;

/// The ring orders of a request's topology ([`find_rings`]), shared with
/// the mixture's families.
pub struct Rings(pub Vec<Vec<usize>>);

/// The request's ring orders, found once.
pub fn rings(ctx: &Context) -> Rc<Rings> {
    ctx.shared(|c| Rings(find_rings(c.topo)))
}

impl Synthesizer for Ring {
    fn name(&self) -> &'static str {
        "ring"
    }
    fn summary(&self) -> &'static str {
        "NCCL-style rings (the baseline)"
    }
    fn offer(&self, ctx: &Context) -> Result<Offer, SynthError> {
        let o = &ctx.opts;
        if let Some(c) = o.chunks.filter(|&c| c > MAX_CHANNELS) {
            return Err(SynthError::Options(format!(
                "--algo ring --chunks {c}: every chunk of a shard gets its own channel (chunks sharing one would move as multi-chunk steps, which deadlock a ring once MSCCL splits them), and MSCCL has at most {MAX_CHANNELS} channels"
            )));
        }
        let n = ctx.ranks();
        let rings = rings(ctx);
        // Full ring set first, then halves (fewer channels) as fallbacks;
        // each is built only when the one before it does not fit.
        let mut out: Vec<super::Candidate> = Vec::new();
        let mut r = rings.0.len();
        loop {
            let c = o.chunks.unwrap_or(r);
            let rings = rings.clone();
            out.push(Box::new(move || {
                ring_algorithm(Spec::reduce_scatter(n, c), &rings.0[..r])
            }));
            if r == 1 {
                break;
            }
            r = r.div_ceil(2);
        }
        // Every ring on k channels (k chunks per ring and shard), k = 2, 4,
        // …: a connection's tiles pay their α one after another (docs/
        // cost-model.md §6), so one flow per link leaves the link idle for
        // α per tile, and k flows overlap it (2 × A100 on NVLink at 1 GiB:
        // 90.9 % of the bound on one channel, 99.4 % on 16). Auto scores
        // each for the size bands; the budget keeps the scoring cheap at
        // scale.
        let splits = |rings: &Rc<Rings>| {
            let r = rings.0.len();
            let mut split = Vec::new();
            if o.chunks.is_none() {
                let mut k = 2;
                while k * r <= MAX_CHANNELS && n * k * r <= SPLIT_RINGS_BUDGET {
                    let rings = rings.clone();
                    let spec = Spec::reduce_scatter(n, k * r);
                    split.push(vec![
                        Box::new(move || ring_algorithm(spec, &rings.0)) as super::Candidate
                    ]);
                    k *= 2;
                }
            }
            split
        };
        let mut bands = splits(&rings);
        // Directed rings where they use links the rings above leave idle
        // (an odd number of links per rank): scored beside them, with
        // their own channel splits.
        let mut more = Vec::new();
        if let Some(d) = find_directed_rings(ctx.topo, rings.0.len()) {
            let d = Rc::new(Rings(d));
            bands.extend(splits(&d));
            let c = o.chunks.unwrap_or(d.0.len());
            more.push(vec![
                Box::new(move || ring_algorithm(Spec::reduce_scatter(n, c), &d.0))
                    as super::Candidate,
            ]);
        }
        Ok(Offer {
            candidates: out,
            more,
            bands,
            ..Offer::default()
        })
    }
}

/// Channel-split rings are offered while ranks × channels stays within
/// this (a ring's simulation is one flow per rank, channel and step).
const SPLIT_RINGS_BUDGET: usize = 512;

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
    // 1. Direct GPU–GPU links with multiplicities.
    let cap = pair_links(topo);
    let mut rings = Vec::new();
    for cycle in pack_cycles(n, cap, false) {
        let mut rev = cycle.clone();
        rev[1..].reverse();
        rings.push(cycle);
        rings.push(rev);
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
        return vec![oriented(topo, c)];
    }
    // 4. Rank order over multi-hop routes.
    vec![oriented(topo, (0..n).collect())]
}

/// Direct GPU–GPU links per rank pair, multiplicities counted
/// (undirected: the lesser of the two directions' counts).
fn pair_links(topo: &Topology) -> Vec<Vec<u32>> {
    let n = topo.num_ranks();
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
    cap
}

/// Arc-disjoint directed Hamiltonian cycles over the direct GPU–GPU
/// links, each a ring in its own direction, where they are more than
/// [`find_rings`]' cycles used both ways (`both` rings): those take two of
/// a rank's links each, so a rank with an odd number keeps one idle (a
/// full mesh of 8 — MI300X, whose symmetric digraph splits into 7
/// directed Hamiltonian cycles — uses 6 of 7 links both ways).
pub fn find_directed_rings(topo: &Topology, both: usize) -> Option<Vec<Vec<usize>>> {
    let n = topo.num_ranks();
    if n < 3 {
        return None;
    }
    let cap = pair_links(topo);
    let arcs = (0..n)
        .map(|a| cap[a].iter().sum::<u32>() as usize)
        .min()
        .unwrap_or(0)
        .min(2 * MAX_CYCLES);
    if arcs <= both {
        return None;
    }
    let directed = pack_cycles(n, cap, true);
    (directed.len() > both).then_some(directed)
}

/// `ring` or its reverse, whichever its routes make cheaper (least total
/// α, then the widest bottleneck; `ring` on a tie): data moves from each
/// rank to the next, and on links that differ by direction — a one-way
/// ring — only one orientation has short routes.
fn oriented(topo: &Topology, ring: Vec<usize>) -> Vec<usize> {
    let n = ring.len();
    let cost = |r: &[usize]| -> (f64, f64) {
        let mut alpha = 0.0;
        let mut neck = f64::INFINITY;
        for i in 0..n {
            match topo.route(r[i], r[(i + 1) % n]) {
                Some(x) => {
                    alpha += x.alpha_us;
                    neck = neck.min(x.bottleneck_gbps);
                }
                None => return (f64::INFINITY, 0.0),
            }
        }
        (alpha, neck)
    };
    let mut rev = ring.clone();
    rev[1..].reverse();
    let (a, b) = (cost(&ring), cost(&rev));
    if b.0 < a.0 || (b.0 == a.0 && b.1 > a.1) {
        rev
    } else {
        ring
    }
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

/// Most edge-disjoint Hamiltonian cycles (each used in both directions)
/// ring search looks for: 16 rings (and as many directed cycles).
const MAX_CYCLES: usize = 8;

/// Edge-disjoint Hamiltonian cycles over the pair multiplicities `cap`
/// (symmetric; a cycle uses one unit of each pair it crosses), as many as
/// the search finds up to the degree bound ⌊min over ranks of Σ cap / 2⌋
/// (and [`MAX_CYCLES`]); with `directed`, arc-disjoint directed cycles (a
/// cycle uses one unit of each pair in its own direction only) up to
/// min over ranks of Σ cap (and 2 · [`MAX_CYCLES`]). Taking the first cycle found and repeating
/// depends on the rank labels: on the DGX-1 cube mesh in nvidia-smi's
/// numbering the first cycle leaves no room for a third, where the tools'
/// numbering gives three. So when that greedy packing stops short of the
/// bound, a backtracking search over which cycles to take (in canonical
/// order, so each set is tried once) runs within [`SEARCH_BUDGET`] node
/// expansions, and the largest packing found is kept.
fn pack_cycles(n: usize, mut cap: Vec<Vec<u32>>, directed: bool) -> Vec<Vec<usize>> {
    let degree = (0..n)
        .map(|a| cap[a].iter().sum::<u32>() as usize)
        .min()
        .unwrap_or(0);
    let target = if directed {
        degree.min(2 * MAX_CYCLES)
    } else {
        (degree / 2).min(MAX_CYCLES)
    };
    let mut greedy = Vec::new();
    {
        let mut c = cap.clone();
        while greedy.len() < target {
            let Some(cycle) = hamiltonian(n, |a, b| c[a][b] > 0) else {
                break;
            };
            take(&mut c, &cycle, directed, false);
            greedy.push(cycle);
        }
    }
    if greedy.len() >= target {
        return greedy;
    }
    let mut best = greedy;
    let mut search = Packing {
        n,
        target,
        directed,
        budget: SEARCH_BUDGET,
    };
    let mut chosen = Vec::new();
    search.run(&mut cap, &mut chosen, &mut best);
    best
}

/// Remove (or, with `back`, restore) one unit of every pair `cycle`
/// crosses: in both directions, or with `directed` in its own.
fn take(cap: &mut [Vec<u32>], cycle: &[usize], directed: bool, back: bool) {
    let n = cycle.len();
    let step = |c: &mut u32| {
        if back {
            *c += 1;
        } else {
            *c -= 1;
        }
    };
    for w in 0..n {
        let (a, b) = (cycle[w], cycle[(w + 1) % n]);
        step(&mut cap[a][b]);
        if !directed {
            step(&mut cap[b][a]);
        }
    }
}

/// The backtracking search of [`pack_cycles`].
struct Packing {
    n: usize,
    target: usize,
    directed: bool,
    /// Node expansions left.
    budget: usize,
}

impl Packing {
    /// Every Hamiltonian cycle of the remaining pairs not before the last
    /// one chosen (lexicographically), in turn taken and searched below,
    /// until a packing of `target` cycles is found or the budget runs out.
    fn run(
        &mut self,
        cap: &mut Vec<Vec<u32>>,
        chosen: &mut Vec<Vec<usize>>,
        best: &mut Vec<Vec<usize>>,
    ) {
        if chosen.len() > best.len() {
            *best = chosen.clone();
        }
        if best.len() >= self.target || self.budget == 0 {
            return;
        }
        let (n, directed) = (self.n, self.directed);
        let mut cycles = Vec::new();
        let c = &*cap;
        each_hamiltonian(
            n,
            |a, b| c[a][b] > 0,
            &mut self.budget,
            |cycle| {
                // Undirected: one direction of each cycle. None before the
                // last chosen.
                if (directed || cycle[1] < cycle[n - 1])
                    && chosen.last().is_none_or(|l| cycle >= l.as_slice())
                {
                    cycles.push(cycle.to_vec());
                }
                ControlFlow::Continue(())
            },
        );
        for cycle in cycles {
            take(cap, &cycle, directed, false);
            chosen.push(cycle);
            self.run(cap, chosen, best);
            let cycle = chosen.pop().expect("pushed above");
            take(cap, &cycle, directed, true);
            if best.len() >= self.target || self.budget == 0 {
                return;
            }
        }
    }
}

/// Hamiltonian cycles starting at 0 over `edge(a, b)`, by iterative
/// depth-first search (neighbours in rank order, nearest first), handed to
/// `f` in the order found until it returns `Break` or `budget` node
/// expansions run out. Each cycle comes once per direction.
fn each_hamiltonian(
    n: usize,
    edge: impl Fn(usize, usize) -> bool,
    budget: &mut usize,
    mut f: impl FnMut(&[usize]) -> ControlFlow<()>,
) {
    if n < 3 {
        return;
    }
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
    while let Some(&v) = path.last() {
        let i = next_idx.last_mut().expect("one index per path entry");
        if path.len() == n {
            // A full path: a cycle if it closes; then backtrack.
            if *i == 0 && edge(v, 0) && f(&path).is_break() {
                return;
            }
            *i = usize::MAX;
        }
        let mut advanced = false;
        while *i < nbrs[v].len() {
            let w = nbrs[v][*i];
            *i += 1;
            if !on[w] {
                if *budget == 0 {
                    return;
                }
                *budget -= 1;
                on[w] = true;
                path.push(w);
                next_idx.push(0);
                advanced = true;
                break;
            }
        }
        if !advanced {
            let w = path.pop().expect("non-empty in the loop");
            on[w] = false;
            next_idx.pop();
        }
    }
}

/// The first Hamiltonian cycle [`each_hamiltonian`] finds, within
/// [`SEARCH_BUDGET`].
fn hamiltonian(n: usize, edge: impl Fn(usize, usize) -> bool) -> Option<Vec<usize>> {
    let (mut found, mut budget) = (None, SEARCH_BUDGET);
    each_hamiltonian(n, edge, &mut budget, |c| {
        found = Some(c.to_vec());
        ControlFlow::Break(())
    });
    found
}

/// Ring reduce-scatter with the given ring orders and `chunks` chunks per
/// shard (at most `rings.len()` rings are used: one per chunk block).
pub fn ring_algorithm(spec: Spec, rings: &[Vec<usize>]) -> Algorithm {
    let n = spec.ranks;
    let c = spec.chunks();
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
            "ring{}{}",
            if r > 1 {
                format!("x{r}")
            } else {
                String::new()
            },
            // Several chunks per ring and shard: each on its own channel.
            if c > r && c.is_multiple_of(r) {
                format!("-c{}", c / r)
            } else {
                String::new()
            }
        ),
        spec,
        transfers,
        bcast: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-way ring whose links run against rank order (r+1 → r): the
    /// ring follows the links, so every hop is one link.
    #[test]
    fn rings_follow_one_way_links() {
        let n = 4;
        let nodes: Vec<String> = (0..n)
            .map(|r| format!(r#"{{"id":"g{r}","kind":"gpu","rank":{r}}}"#))
            .collect();
        let links: Vec<String> = (0..n)
            .map(|r| {
                format!(
                    r#"{{"from":"g{}","to":"g{r}","bw_gbps":50,"alpha_us":1,"kind":"nvlink","duplex":false}}"#,
                    (r + 1) % n
                )
            })
            .collect();
        let text = format!(
            r#"{{"name":"back4","nodes":[{}],"links":[{}]}}"#,
            nodes.join(","),
            links.join(",")
        );
        let topo = crate::front::topo_json::parse(&text, "back4").unwrap();
        let rings = find_rings(&topo);
        assert_eq!(rings.len(), 1);
        let r = &rings[0];
        for i in 0..n {
            let route = topo.route(r[i], r[(i + 1) % n]).unwrap();
            assert_eq!(route.links.len(), 1, "{r:?}");
        }
    }

    /// NVLink counts of a DGX-1 in nvidia-smi's numbering (the oneflow
    /// dump in ../shared/topologies-real/nvidia-smi-topo): the tools'
    /// numbering relabelled, so three edge-disjoint Hamiltonian cycles
    /// exist, but the first one the depth-first search takes leaves room
    /// for only one more.
    fn dgx1_smi() -> Vec<Vec<u32>> {
        let pairs = [
            (0, 1, 1),
            (0, 2, 1),
            (0, 3, 2),
            (0, 4, 2),
            (1, 2, 2),
            (1, 3, 1),
            (1, 5, 2),
            (2, 3, 2),
            (2, 6, 1),
            (3, 7, 1),
            (4, 5, 1),
            (4, 6, 1),
            (4, 7, 2),
            (5, 6, 2),
            (5, 7, 1),
            (6, 7, 2),
        ];
        let mut cap = vec![vec![0u32; 8]; 8];
        for (a, b, m) in pairs {
            cap[a][b] = m;
            cap[b][a] = m;
        }
        cap
    }

    #[test]
    fn packs_three_cycles_on_a_relabelled_dgx1() {
        let cap = dgx1_smi();
        // Taking the first cycle found, again and again, stops at two.
        let mut c = cap.clone();
        let mut greedy = 0;
        while let Some(cycle) = hamiltonian(8, |a, b| c[a][b] > 0) {
            take(&mut c, &cycle, false, false);
            greedy += 1;
        }
        assert_eq!(greedy, 2);
        let cycles = pack_cycles(8, cap.clone(), false);
        assert_eq!(cycles.len(), 3, "{cycles:?}");
        // Each is Hamiltonian, and together they use every NVLink once.
        let mut used = vec![vec![0u32; 8]; 8];
        for cy in &cycles {
            let mut seen = cy.clone();
            seen.sort_unstable();
            assert_eq!(seen, (0..8).collect::<Vec<_>>());
            for w in 0..8 {
                let (a, b) = (cy[w], cy[(w + 1) % 8]);
                used[a][b] += 1;
                used[b][a] += 1;
            }
        }
        assert_eq!(used, cap);
    }

    #[test]
    fn packing_stops_at_the_degree_bound() {
        // A ring (degree 2) and K4 (degree 3) hold one cycle each.
        let ring: Vec<Vec<u32>> = (0..6)
            .map(|a| {
                (0..6)
                    .map(|b| u32::from((a + 1) % 6 == b || (b + 1) % 6 == a))
                    .collect()
            })
            .collect();
        assert_eq!(pack_cycles(6, ring, false).len(), 1);
        let clique: Vec<Vec<u32>> = (0..4)
            .map(|a| (0..4).map(|b| u32::from(a != b)).collect())
            .collect();
        assert_eq!(pack_cycles(4, clique, false).len(), 1);
        // K5 (degree 4) splits into two Hamiltonian cycles.
        let k5: Vec<Vec<u32>> = (0..5)
            .map(|a| (0..5).map(|b| u32::from(a != b)).collect())
            .collect();
        assert_eq!(pack_cycles(5, k5, false).len(), 2);
    }

    /// Every cycle Hamiltonian, and no arc used more often than `cap`
    /// allows; returns the arcs used.
    fn check_directed(n: usize, cycles: &[Vec<usize>], cap: &[Vec<u32>]) -> Vec<Vec<u32>> {
        let mut used = vec![vec![0u32; n]; n];
        for cy in cycles {
            let mut seen = cy.clone();
            seen.sort_unstable();
            assert_eq!(seen, (0..n).collect::<Vec<_>>());
            for w in 0..n {
                used[cy[w]][cy[(w + 1) % n]] += 1;
            }
        }
        for a in 0..n {
            for b in 0..n {
                assert!(used[a][b] <= cap[a][b], "{a} -> {b}: {cycles:?}");
            }
        }
        used
    }

    #[test]
    fn directed_cycles_use_the_odd_link() {
        // K8: cycles used both ways take 6 of each rank's 7 links; the
        // complete symmetric digraph on 8 vertices splits into 7
        // arc-disjoint directed Hamiltonian cycles (Tillson), every arc
        // used once.
        let k8: Vec<Vec<u32>> = (0..8)
            .map(|a| (0..8).map(|b| u32::from(a != b)).collect())
            .collect();
        assert_eq!(pack_cycles(8, k8.clone(), false).len(), 3);
        let cycles = pack_cycles(8, k8.clone(), true);
        assert_eq!(cycles.len(), 7, "{cycles:?}");
        assert_eq!(check_directed(8, &cycles, &k8), k8);
        // MI300X's eight GPUs, a full xGMI mesh: 6 rings both ways, 7
        // directed ones, one per link.
        let topo = crate::front::generate::generate(
            "mi300x",
            &crate::front::generate::GenParams::default(),
        )
        .unwrap();
        assert_eq!(find_rings(&topo).len(), 6);
        let rings = find_directed_rings(&topo, 6).unwrap();
        assert_eq!(rings.len(), 7);
        check_directed(8, &rings, &k8);
        assert!(find_directed_rings(&topo, 7).is_none());
    }

    #[test]
    fn enumerates_each_cycle_once_per_direction() {
        // Cycles of K4 found within a budget, and the budget left.
        let k4 = |mut budget: usize| {
            let mut n = 0;
            each_hamiltonian(
                4,
                |a, b| a != b,
                &mut budget,
                |_| {
                    n += 1;
                    ControlFlow::Continue(())
                },
            );
            (n, budget)
        };
        // Three Hamiltonian cycles, six directed ones.
        assert_eq!(k4(SEARCH_BUDGET).0, 6);
        // The budget stops the search.
        assert_eq!(k4(2), (0, 0));
    }
}
