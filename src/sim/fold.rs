//! Host symmetry: where every host of a machine is the same and the
//! program does on each host what it does on the next, the simulation
//! runs one host's threadblocks instead of every host's.
//!
//! The symmetry is the shift σ of every host's nodes by k hosts (the i-th
//! node of host h to the i-th node of host h + k mod H, for the least k
//! that divides H and works; nodes of no host, such as rail switches,
//! stay). It applies to a (program, topology) pair when
//! - σ is an automorphism of the topology: nodes keep their kind, SMs and
//!   memory rate, and every link maps to a link of the same rate, α,
//!   count and kind;
//! - σ maps the program to itself: each threadblock of rank r has an
//!   image on rank σ(r) with the peers mapped by σ, the same channel and
//!   the same steps (kinds, counts, merged `re` continuations, and
//!   dependencies on the images of the threadblocks they wait for), and
//!   each connection's image is served by the images of its ends;
//! - σ maps routes to routes: the route the simulator takes for a
//!   connection's image is the image of its route (automatic where the
//!   least-cost path is the only one; checked against the image's own
//!   route where paths tie).
//!
//! Then every run is the same on every host up to σ, instant by
//! instant: the max-min fair rates are unique, hence symmetric, and a
//! threadblock's progress depends only on its own steps, messages and
//! rates. With m = H / k images of every rank, the folded run keeps one
//! member per orbit — the threadblocks and connections of one rank per
//! rank orbit — and lets a flow of a representative connection stand for
//! its m images: on a link of an orbit of s links it counts m / s times
//! per crossing, which is the load those images put on each link of the
//! orbit. Rates, times and the bytes per link come out as the full run's
//! (to floating-point rounding); the work is divided by m.

use crate::ir::resolve::Resolved;
use crate::ir::{NodeKind, Topology};
use petgraph::graph::{EdgeIndex, NodeIndex};
use petgraph::visit::EdgeRef;
use std::collections::HashMap;

/// A program's host symmetry on a topology, resolved to what the engine
/// folds.
pub(super) struct Fold {
    /// m: the number of images of every rank, threadblock and connection.
    pub order: usize,
    /// Per rank: the representative of its orbit.
    pub rank_rep: Vec<usize>,
    /// Per global threadblock: its image under σ.
    pub tb_image: Vec<usize>,
    /// Per global threadblock: the representative of its orbit (a
    /// threadblock of a representative rank).
    pub tb_rep: Vec<usize>,
    /// Per connection: the representative of its orbit (the member sent
    /// from a representative rank).
    pub conn_rep: Vec<usize>,
    /// Per link (edge index): the representative of its orbit.
    pub link_rep: Vec<usize>,
    /// Per link: m / the size of its orbit, how many times one crossing
    /// of a representative flow counts on it.
    pub link_weight: Vec<usize>,
    /// Per representative connection: its route's links and α.
    pub routes: HashMap<usize, (Vec<EdgeIndex>, f64)>,
}

/// The shift of `topo`'s hosts by `k`: the node and link permutations and
/// the number of images H / k, when it is an automorphism that moves every
/// rank.
fn host_shift(topo: &Topology, k: usize) -> Option<(Vec<NodeIndex>, Vec<usize>, usize)> {
    let g = &topo.graph;
    let mut hosts: Vec<(&str, Vec<NodeIndex>)> = Vec::new();
    let mut at: HashMap<&str, usize> = HashMap::new();
    for n in g.node_indices() {
        if let Some(h) = g[n].host.as_deref() {
            let i = *at.entry(h).or_insert_with(|| {
                hosts.push((h, Vec::new()));
                hosts.len() - 1
            });
            hosts[i].1.push(n);
        }
    }
    let nh = hosts.len();
    if nh < 2
        || k == 0
        || k >= nh
        || !nh.is_multiple_of(k)
        || hosts.iter().any(|(_, v)| v.len() != hosts[0].1.len())
    {
        return None;
    }
    let mut pi: Vec<NodeIndex> = g.node_indices().collect();
    for (h, (_, nodes)) in hosts.iter().enumerate() {
        for (j, &n) in nodes.iter().enumerate() {
            pi[n.index()] = hosts[(h + k) % nh].1[j];
        }
    }
    // Every rank moves (a GPU of no host would be fixed by σ).
    if topo.ranks.iter().any(|&n| g[n].host.is_none()) {
        return None;
    }
    for n in g.node_indices() {
        let (a, b) = (&g[n], &g[pi[n.index()]]);
        if a.kind != b.kind
            || a.rank.is_some() != b.rank.is_some()
            || a.sms != b.sms
            || a.mem_gbps.map(f64::to_bits) != b.mem_gbps.map(f64::to_bits)
        {
            return None;
        }
        if a.kind == NodeKind::Gpu && a.rank.is_none() {
            return None;
        }
    }
    let mut by_ends: HashMap<(NodeIndex, NodeIndex), Vec<EdgeIndex>> = HashMap::new();
    for e in g.edge_references() {
        by_ends
            .entry((e.source(), e.target()))
            .or_default()
            .push(e.id());
    }
    let mut lambda = vec![usize::MAX; g.edge_count()];
    let mut used = vec![false; g.edge_count()];
    for e in g.edge_references() {
        let l = e.weight();
        let to = (pi[e.source().index()], pi[e.target().index()]);
        let m = by_ends.get(&to)?.iter().copied().find(|&m| {
            let k = &g[m];
            !used[m.index()]
                && k.kind == l.kind
                && k.count == l.count
                && k.bw_gbps.to_bits() == l.bw_gbps.to_bits()
                && k.alpha_us.to_bits() == l.alpha_us.to_bits()
        })?;
        used[m.index()] = true;
        lambda[e.id().index()] = m.index();
    }
    Some((pi, lambda, nh / k))
}

/// The host symmetry of `res` (a resolved program) on `topo` with the
/// most images: the shift by the fewest hosts k (a divisor of H) under
/// which the machine, the program and the routes are invariant and
/// `same_steps` (the engine's comparison of its step records under
/// [`Fold::tb_image`]) holds. A schedule built the same on every host
/// folds at k = 1; one whose hosts differ with a period (rings that enter
/// host h at GPU h mod 8) at that period. None where there is none.
pub(super) fn find(
    topo: &Topology,
    res: &Resolved,
    same_steps: impl Fn(&Fold) -> bool,
) -> Option<Fold> {
    let nh = topo.num_hosts();
    (1..nh)
        .filter(|k| nh.is_multiple_of(*k))
        .find_map(|k| shifted(topo, res, k).filter(|f| same_steps(f)))
}

/// The symmetry of the shift by `k` hosts, if it is one.
fn shifted(topo: &Topology, res: &Resolved, k: usize) -> Option<Fold> {
    let (pi, lambda, order) = host_shift(topo, k)?;
    let g = &topo.graph;
    let n = topo.num_ranks();
    let sigma: Vec<usize> = (0..n)
        .map(|r| g[pi[topo.ranks[r].index()]].rank)
        .collect::<Option<_>>()?;
    if res.ranks != n {
        return None;
    }
    // Threadblock images: by (send peer, receive peer, channel), in file
    // order among equals.
    type Key = (Option<usize>, Option<usize>, i64);
    let mut tb_image = vec![usize::MAX; res.tbs.len()];
    for r in 0..n {
        let (mine, theirs) = (res.rank_tbs[r].clone(), res.rank_tbs[sigma[r]].clone());
        if mine.len() != theirs.len() {
            return None;
        }
        let mut at: HashMap<Key, std::collections::VecDeque<usize>> = HashMap::new();
        for t in theirs {
            let tb = &res.tbs[t];
            at.entry((tb.send_peer, tb.recv_peer, tb.chan))
                .or_default()
                .push_back(t);
        }
        for t in mine {
            let tb = &res.tbs[t];
            let key = (
                tb.send_peer.map(|p| sigma[p]),
                tb.recv_peer.map(|p| sigma[p]),
                tb.chan,
            );
            let img = at.get_mut(&key)?.pop_front()?;
            if res.tbs[img].steps != tb.steps {
                return None;
            }
            tb_image[t] = img;
        }
    }
    // Connection images, served by the images of their ends.
    let conn_at: HashMap<(usize, usize, i64), usize> = res
        .conns
        .iter()
        .enumerate()
        .map(|(i, c)| ((c.from, c.to, c.chan), i))
        .collect();
    let mut conn_image = vec![usize::MAX; res.conns.len()];
    for (i, c) in res.conns.iter().enumerate() {
        let j = *conn_at.get(&(sigma[c.from], sigma[c.to], c.chan))?;
        let d = &res.conns[j];
        if d.sender != c.sender.map(|t| tb_image[t])
            || d.receiver != c.receiver.map(|t| tb_image[t])
        {
            return None;
        }
        conn_image[i] = j;
    }
    // Orbits: each of exactly `order` members, one per host.
    let mut rank_rep = vec![usize::MAX; n];
    for r in 0..n {
        if rank_rep[r] != usize::MAX {
            continue;
        }
        let mut x = r;
        for k in 0..order {
            if k > 0 && x == r {
                return None;
            }
            rank_rep[x] = r;
            x = sigma[x];
        }
        if x != r {
            return None;
        }
    }
    let tb_rep = orbits(&tb_image, order, |t| {
        rank_rep[res.tbs[t].rank] == res.tbs[t].rank
    })?;
    let conn_rep = orbits(&conn_image, order, |i| {
        rank_rep[res.conns[i].from] == res.conns[i].from
    })?;
    let ne = g.edge_count();
    let mut link_rep = vec![usize::MAX; ne];
    let mut link_weight = vec![0; ne];
    for e in 0..ne {
        if link_rep[e] != usize::MAX {
            continue;
        }
        let mut orbit = vec![e];
        let mut x = lambda[e];
        while x != e {
            if orbit.len() > order {
                return None;
            }
            orbit.push(x);
            x = lambda[x];
        }
        if !order.is_multiple_of(orbit.len()) {
            return None;
        }
        for &x in &orbit {
            link_rep[x] = e;
            link_weight[x] = order / orbit.len();
        }
    }
    // Routes of the representatives, and those of their images where
    // paths tie.
    let mut trees: HashMap<usize, (Vec<Option<EdgeIndex>>, Vec<bool>)> = HashMap::new();
    let mut routes = HashMap::new();
    for (i, c) in res.conns.iter().enumerate() {
        if conn_rep[i] != i {
            continue;
        }
        let tree = trees
            .entry(c.from)
            .or_insert_with(|| topo.route_tree_ties(c.from));
        let route = topo.route_from_tree(c.from, c.to, &tree.0)?;
        let tied = tree.1[topo.ranks[c.to].index()];
        if tied {
            let (mut links, mut x) = (route.links.clone(), i);
            for _ in 1..order {
                x = conn_image[x];
                for l in links.iter_mut() {
                    *l = EdgeIndex::new(lambda[l.index()]);
                }
                let d = &res.conns[x];
                let tree = trees
                    .entry(d.from)
                    .or_insert_with(|| topo.route_tree_ties(d.from));
                if topo.route_from_tree(d.from, d.to, &tree.0)?.links != links {
                    return None;
                }
            }
        }
        routes.insert(i, (route.links, route.alpha_us));
    }
    Some(Fold {
        order,
        rank_rep,
        tb_image,
        tb_rep,
        conn_rep,
        link_rep,
        link_weight,
        routes,
    })
}

/// Per item: the representative of its orbit under `image`, where every
/// item `is_rep` picks is the one representative of an orbit of exactly
/// `order` items; None where that does not hold.
fn orbits(image: &[usize], order: usize, is_rep: impl Fn(usize) -> bool) -> Option<Vec<usize>> {
    let mut rep = vec![usize::MAX; image.len()];
    for i in (0..image.len()).filter(|&i| is_rep(i)) {
        let mut x = i;
        for _ in 0..order {
            if rep[x] != usize::MAX {
                return None;
            }
            rep[x] = i;
            x = image[x];
        }
        if x != i {
            return None;
        }
    }
    (!rep.contains(&usize::MAX)).then_some(rep)
}
