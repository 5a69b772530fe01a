//! The hardware topology: a directed multigraph of GPUs, switches, NICs and
//! CPUs joined by links. Ranks are the GPUs. Every other stage reads it;
//! only `front/` builds it.

use petgraph::graph::{DiGraph, EdgeIndex, NodeIndex};
use petgraph::visit::EdgeRef;
use serde::{Deserialize, Serialize};
use std::collections::{BinaryHeap, HashMap};

/// What a node is. Only GPUs compute (and reduce); the others forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeKind {
    Gpu,
    Switch,
    Nic,
    Cpu,
}

impl NodeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeKind::Gpu => "gpu",
            NodeKind::Switch => "switch",
            NodeKind::Nic => "nic",
            NodeKind::Cpu => "cpu",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Unique name from the topology file.
    pub id: String,
    pub kind: NodeKind,
    /// The communicator rank, for GPUs only.
    pub rank: Option<usize>,
    /// Host (machine) the node belongs to, if the topology spans several.
    pub host: Option<String>,
    /// Streaming multiprocessors (or compute units) of a GPU: bounds the
    /// threadblocks per rank a schedule may use.
    pub sms: Option<u32>,
    /// A GPU's memory bandwidth, GB/s: what its local `cpy`/`re` passes
    /// share where the simulator charges them (RCCL's reduced step set).
    pub mem_gbps: Option<f64>,
}

/// One direction of a (possibly bundled) physical link.
#[derive(Debug, Clone, PartialEq)]
pub struct Link {
    /// Bandwidth of one physical link in GB/s (1e9 B/s) in this direction.
    pub bw_gbps: f64,
    /// Latency in µs paid once per transfer crossing this link.
    pub alpha_us: f64,
    /// Number of parallel physical links bundled here.
    pub count: u32,
    /// nvlink, nvswitch, pcie, ib, xgmi, ethernet, shm, ...
    pub kind: String,
}

impl Link {
    /// Capacity of the bundle in GB/s.
    pub fn capacity_gbps(&self) -> f64 {
        self.bw_gbps * self.count as f64
    }
}

/// What a route that leaves a relay GPU over PCIe — NCCL's PXN, a GPU
/// reaching a NIC through a peer over NVLink — adds to its cost when
/// routes are chosen (not to its α): NCCL takes a NIC behind the GPU's own
/// PCIe switches (PXB) before PXN, so a GPU-free route to a NIC wins
/// unless the relay saves more than this.
pub const PXN_PENALTY_US: f64 = 1.0;

/// `g` with the parallel links of one direction and one kind merged into
/// one bundle (first occurrence's place kept); unchanged when there are
/// none. Links of one kind between the same two nodes are one physical
/// connection whose lanes the hardware stripes every transfer over
/// (NVLinks or xGMI links between two GPUs, the ports between a GPU and a
/// switch), so their capacities add up whatever their rates: the bundle
/// has the links' total `count`, their mean rate per link (so that
/// `capacity_gbps` is the sum), and the least α of them, which keeps
/// every α-aware bound valid. Links of different kinds (NVLink beside
/// PCIe) are different transports, of which a peer connection uses one:
/// they stay separate, and a route picks one (docs/topology-format.md).
fn bundle_parallel_links(g: DiGraph<Node, Link>) -> DiGraph<Node, Link> {
    type Key = (usize, usize, String);
    let key = |e: EdgeIndex| -> Key {
        let (a, b) = g.edge_endpoints(e).expect("edge of this graph");
        (a.index(), b.index(), g[e].kind.clone())
    };
    let mut seen = std::collections::HashSet::new();
    if g.edge_indices().all(|e| seen.insert(key(e))) {
        return g;
    }
    let mut out: DiGraph<Node, Link> = DiGraph::with_capacity(g.node_count(), g.edge_count());
    for n in g.node_indices() {
        out.add_node(g[n].clone());
    }
    let mut at: std::collections::HashMap<Key, EdgeIndex> = std::collections::HashMap::new();
    for e in g.edge_indices() {
        let k = key(e);
        match at.get(&k) {
            Some(&m) => {
                let (b, l) = (&mut out[m], &g[e]);
                let capacity = b.capacity_gbps() + l.capacity_gbps();
                b.count = b.count.saturating_add(l.count);
                b.bw_gbps = if b.count > 0 {
                    capacity / b.count as f64
                } else {
                    capacity
                };
                b.alpha_us = b.alpha_us.min(l.alpha_us);
            }
            None => {
                let (a, b) = g.edge_endpoints(e).expect("edge of this graph");
                let m = out.add_edge(a, b, g[e].clone());
                at.insert(k, m);
            }
        }
    }
    out
}

/// A GPU-to-GPU route: the links a transfer occupies, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    pub links: Vec<EdgeIndex>,
    /// Sum of the links' α, µs.
    pub alpha_us: f64,
    /// Smallest link capacity on the route, GB/s.
    pub bottleneck_gbps: f64,
    /// True when the route passes through another GPU (NVB-style relay).
    pub through_gpu: bool,
}

#[derive(Debug, Clone)]
pub struct Topology {
    pub name: String,
    pub description: String,
    pub graph: DiGraph<Node, Link>,
    /// `ranks[r]` is the node of rank r.
    pub ranks: Vec<NodeIndex>,
    /// Who made the GPUs, when the input says (the JSON `vendor`, or the
    /// dump's format); see [`Topology::gpu_vendor`].
    pub vendor: Option<Vendor>,
}

/// The GPUs' maker: it decides which MSCCL runtime loads the schedules
/// (NVIDIA's executor, or RCCL on AMD GPUs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vendor {
    Nvidia,
    Amd,
}

impl Vendor {
    pub fn name(self) -> &'static str {
        match self {
            Vendor::Nvidia => "nvidia",
            Vendor::Amd => "amd",
        }
    }
    pub fn parse(s: &str) -> Option<Vendor> {
        match s {
            "nvidia" => Some(Vendor::Nvidia),
            "amd" => Some(Vendor::Amd),
            _ => None,
        }
    }
}

impl Topology {
    /// Build from nodes and directed links; ranks are read from the nodes.
    /// The caller (a front end) is responsible for validation. Parallel
    /// links of one direction and one kind become one bundle whose
    /// capacity is their sum (`bundle_parallel_links`), so every stage
    /// (routes, the bound, the simulator, the synthesizers) sees all of
    /// their capacity: a route crosses a bundle, never one link of several.
    pub fn new(name: String, description: String, graph: DiGraph<Node, Link>) -> Self {
        let graph = bundle_parallel_links(graph);
        let mut ranked: Vec<(usize, NodeIndex)> = graph
            .node_indices()
            .filter_map(|n| graph[n].rank.map(|r| (r, n)))
            .collect();
        ranked.sort();
        let ranks = ranked.into_iter().map(|(_, n)| n).collect();
        Topology {
            name,
            description,
            graph,
            ranks,
            vendor: None,
        }
    }

    /// The GPUs' maker: the stated one, else AMD when any link is xGMI
    /// (Infinity Fabric) and NVIDIA when any is NVLink or NVSwitch; None
    /// for a machine that says neither (PCIe only, or abstract).
    pub fn gpu_vendor(&self) -> Option<Vendor> {
        if self.vendor.is_some() {
            return self.vendor;
        }
        let has = |k: &str| self.graph.edge_weights().any(|l| l.kind == k);
        if has("xgmi") {
            Some(Vendor::Amd)
        } else if has("nvlink") || has("nvswitch") {
            Some(Vendor::Nvidia)
        } else {
            None
        }
    }

    /// The runtime that loads this machine's schedules by default: RCCL on
    /// AMD GPUs, NVIDIA's MSCCL executor otherwise.
    pub fn default_runtime(&self) -> crate::ir::Runtime {
        match self.gpu_vendor() {
            Some(Vendor::Amd) => crate::ir::Runtime::Rccl,
            _ => crate::ir::Runtime::Executor,
        }
    }

    pub fn num_ranks(&self) -> usize {
        self.ranks.len()
    }

    /// The same machine with every link's direction reversed: where a
    /// reduce-scatter made for it is, reversed in time, an allgather for
    /// this one (ir/algorithm.rs).
    pub fn reversed(&self) -> Topology {
        let mut g: DiGraph<Node, Link> =
            DiGraph::with_capacity(self.graph.node_count(), self.graph.edge_count());
        for n in self.graph.node_indices() {
            g.add_node(self.graph[n].clone());
        }
        for e in self.graph.edge_references() {
            g.add_edge(e.target(), e.source(), e.weight().clone());
        }
        Topology {
            name: self.name.clone(),
            description: self.description.clone(),
            graph: g,
            ranks: self.ranks.clone(),
            vendor: self.vendor,
        }
    }

    /// Whether every link has a reverse of equal rate, α, count and kind
    /// (then [`Topology::reversed`] is the same machine).
    pub fn is_symmetric(&self) -> bool {
        type Key = (usize, usize, u64, u64, u32, String);
        let key = |a: NodeIndex, b: NodeIndex, l: &Link| -> Key {
            (
                a.index(),
                b.index(),
                l.bw_gbps.to_bits(),
                l.alpha_us.to_bits(),
                l.count,
                l.kind.clone(),
            )
        };
        let mut fwd: Vec<Key> = self
            .graph
            .edge_references()
            .map(|e| key(e.source(), e.target(), e.weight()))
            .collect();
        let mut rev: Vec<Key> = self
            .graph
            .edge_references()
            .map(|e| key(e.target(), e.source(), e.weight()))
            .collect();
        fwd.sort_unstable();
        rev.sort_unstable();
        fwd == rev
    }

    pub fn node(&self, n: NodeIndex) -> &Node {
        &self.graph[n]
    }

    pub fn link(&self, e: EdgeIndex) -> &Link {
        &self.graph[e]
    }

    pub fn link_ends(&self, e: EdgeIndex) -> (NodeIndex, NodeIndex) {
        self.graph
            .edge_endpoints(e)
            .expect("edge index from this graph")
    }

    /// Number of distinct hosts (1 when no node names a host).
    pub fn num_hosts(&self) -> usize {
        let mut hosts: Vec<&str> = self
            .ranks
            .iter()
            .map(|&n| self.graph[n].host.as_deref().unwrap_or(""))
            .collect();
        hosts.sort();
        hosts.dedup();
        hosts.len()
    }

    /// Ranks per host where there are two or more hosts of as many ranks
    /// each, numbered host by host (ranks kR … kR + R − 1 on one host);
    /// else 0.
    pub fn host_ranks(&self) -> usize {
        let (n, h) = (self.num_ranks(), self.num_hosts());
        if h < 2 || !n.is_multiple_of(h) {
            return 0;
        }
        let r = n / h;
        let mut seen = std::collections::HashSet::new();
        for b in (0..n).step_by(r) {
            let host = self.host_of(b);
            if !seen.insert(host) || (b..b + r).any(|x| self.host_of(x) != host) {
                return 0;
            }
        }
        r
    }

    /// Host name of a rank ("" when none is given).
    pub fn host_of(&self, rank: usize) -> &str {
        self.graph[self.ranks[rank]].host.as_deref().unwrap_or("")
    }

    /// Smallest SM count over the GPUs, if any GPU states one.
    pub fn min_sms(&self) -> Option<u32> {
        self.ranks.iter().filter_map(|&n| self.graph[n].sms).min()
    }

    /// Total egress / ingress capacity of a rank's GPU over all its links, GB/s.
    pub fn gpu_bandwidth(&self, rank: usize) -> (f64, f64) {
        let n = self.ranks[rank];
        let out = self
            .graph
            .edges_directed(n, petgraph::Direction::Outgoing)
            .map(|e| e.weight().capacity_gbps())
            .sum();
        let inn = self
            .graph
            .edges_directed(n, petgraph::Direction::Incoming)
            .map(|e| e.weight().capacity_gbps())
            .sum();
        (out, inn)
    }

    /// Routes from `src` rank to every node: the path of least total α,
    /// ties broken by the widest bottleneck, then by fewest hops. Paths may
    /// pass through switches, NICs, CPUs and (as relays) other GPUs; a
    /// relay GPU that forwards over PCIe counts [`PXN_PENALTY_US`] more
    /// in the choice (not in the route's α), and equally close NICs are
    /// taken in turn (GPU i of a host its i-th).
    /// Returns, per node, the predecessor edge on the chosen path.
    pub fn route_tree(&self, src: usize) -> Vec<Option<EdgeIndex>> {
        self.route_tree_ties(src).0
    }

    /// [`Topology::route_tree`] and, per node, whether another path ties
    /// with the chosen one on the route's cost somewhere along it (then
    /// which one is chosen depends on node order, and a symmetry of the
    /// machine need not map routes to routes).
    pub fn route_tree_ties(&self, src: usize) -> (Vec<Option<EdgeIndex>>, Vec<bool>) {
        let g = &self.graph;
        let n = g.node_count();
        // Cost = (alpha in nanoseconds rounded, -bottleneck, hops, NIC
        // turn): lexicographic.
        #[derive(PartialEq, PartialOrd, Clone, Copy)]
        struct Cost(f64, f64, u32, u32);
        // Equally close NICs are taken in turn, as NCCL hands them out: the
        // NIC of ordinal k among its host's m NICs costs (k − i) mod m in
        // the last place on a route from the i-th GPU of a host, so where
        // several NICs tie GPU i takes its i-th (a rail pair, GPU i to GPU
        // i of another host, the same on both ends).
        let nic_turn = {
            let mut ordinal = vec![0u32; n];
            let mut count: HashMap<Option<&str>, u32> = HashMap::new();
            for v in g.node_indices() {
                if g[v].kind == NodeKind::Nic {
                    let c = count.entry(g[v].host.as_deref()).or_insert(0);
                    ordinal[v.index()] = *c;
                    *c += 1;
                }
            }
            let src_host = g[self.ranks[src]].host.as_deref();
            let local = (0..src)
                .filter(|&r| g[self.ranks[r]].host.as_deref() == src_host)
                .count() as u32;
            move |v: NodeIndex| -> u32 {
                if g[v].kind != NodeKind::Nic {
                    return 0;
                }
                let m = count[&g[v].host.as_deref()];
                (ordinal[v.index()] + m - local % m) % m
            }
        };
        let mut best: Vec<Option<Cost>> = vec![None; n];
        let mut pred: Vec<Option<EdgeIndex>> = vec![None; n];
        let mut done = vec![false; n];
        let mut tied = vec![false; n];
        #[derive(PartialEq)]
        struct Item(Cost, NodeIndex);
        impl Eq for Item {}
        impl PartialOrd for Item {
            fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
                Some(self.cmp(o))
            }
        }
        impl Ord for Item {
            fn cmp(&self, o: &Self) -> std::cmp::Ordering {
                // Min-heap on cost.
                o.0.partial_cmp(&self.0)
                    .unwrap_or(std::cmp::Ordering::Equal)
                    .then_with(|| o.1.cmp(&self.1))
            }
        }
        let s = self.ranks[src];
        best[s.index()] = Some(Cost(0.0, -f64::INFINITY, 0, 0));
        let mut heap = BinaryHeap::new();
        heap.push(Item(Cost(0.0, -f64::INFINITY, 0, 0), s));
        while let Some(Item(c, u)) = heap.pop() {
            if done[u.index()] {
                continue;
            }
            done[u.index()] = true;
            for e in g.edges_directed(u, petgraph::Direction::Outgoing) {
                let v = e.target();
                if done[v.index()] {
                    continue;
                }
                let l = e.weight();
                let bneck = (-c.1).min(l.capacity_gbps());
                // A relay GPU that forwards over PCIe (NCCL's PXN: over
                // NVLink to a GPU near a NIC) costs the choice a
                // penalty, not the route's α.
                let pxn = u != s && g[u].kind == NodeKind::Gpu && l.kind == "pcie";
                let a = c.0 + l.alpha_us + if pxn { PXN_PENALTY_US } else { 0.0 };
                let nc = Cost((a * 1e6).round() / 1e6, -bneck, c.2 + 1, c.3 + nic_turn(v));
                if best[v.index()].is_none_or(|b| nc < b) {
                    best[v.index()] = Some(nc);
                    pred[v.index()] = Some(e.id());
                    tied[v.index()] = tied[u.index()];
                    heap.push(Item(nc, v));
                } else if best[v.index()] == Some(nc) {
                    tied[v.index()] = true;
                }
            }
        }
        (pred, tied)
    }

    /// The route between two ranks, or None if `dst` cannot be reached.
    pub fn route(&self, src: usize, dst: usize) -> Option<Route> {
        let pred = self.route_tree(src);
        self.route_from_tree(src, dst, &pred)
    }

    /// Extract the route to `dst` from a `route_tree(src)` result.
    pub fn route_from_tree(
        &self,
        src: usize,
        dst: usize,
        pred: &[Option<EdgeIndex>],
    ) -> Option<Route> {
        let s = self.ranks[src];
        let mut v = self.ranks[dst];
        let mut links = Vec::new();
        while v != s {
            let e = pred[v.index()]?;
            links.push(e);
            v = self.link_ends(e).0;
            if links.len() > self.graph.node_count() {
                return None;
            }
        }
        links.reverse();
        let alpha_us = links.iter().map(|&e| self.graph[e].alpha_us).sum();
        let bottleneck_gbps = links
            .iter()
            .map(|&e| self.graph[e].capacity_gbps())
            .fold(f64::INFINITY, f64::min);
        let through_gpu = links.iter().skip(1).any(|&e| {
            let (a, _) = self.link_ends(e);
            self.graph[a].kind == NodeKind::Gpu
        });
        Some(Route {
            links,
            alpha_us,
            bottleneck_gbps,
            through_gpu,
        })
    }

    /// Per link (edge index): whether some rank-to-rank route
    /// ([`Topology::route`]) crosses it. Every transfer between ranks —
    /// relays through GPUs included, each hop its own transfer — follows
    /// such a route, so the other links (PCIe beside NVLink, a NIC on a
    /// single host) can never carry data. The route trees come from
    /// [`Topology::route_trees`].
    pub fn routed_links(&self) -> Vec<bool> {
        let g = &self.graph;
        let mut used = vec![false; g.edge_count()];
        let mut seen = vec![usize::MAX; g.node_count()];
        for (src, pred) in self.route_trees().iter().enumerate() {
            seen[self.ranks[src].index()] = src;
            for &d in &self.ranks {
                let mut v = d;
                while seen[v.index()] != src {
                    seen[v.index()] = src;
                    let Some(e) = pred[v.index()] else { break };
                    used[e.index()] = true;
                    v = g.edge_endpoints(e).expect("edge of the graph").0;
                }
            }
        }
        used
    }

    /// Every rank's [`Topology::route_tree`], in rank order (computed on
    /// the available cores from 64 ranks).
    pub fn route_trees(&self) -> Vec<Vec<Option<EdgeIndex>>> {
        let ranges = crate::par::ranges(self.num_ranks(), 64);
        crate::par::map(&ranges, |r| {
            r.clone().map(|s| self.route_tree(s)).collect::<Vec<_>>()
        })
        .into_iter()
        .flatten()
        .collect()
    }

    /// All-pairs routes, `routes[src][dst]` (None on the diagonal).
    pub fn all_routes(&self) -> Vec<Vec<Option<Route>>> {
        (0..self.num_ranks())
            .map(|s| {
                let pred = self.route_tree(s);
                (0..self.num_ranks())
                    .map(|d| {
                        if d == s {
                            None
                        } else {
                            self.route_from_tree(s, d, &pred)
                        }
                    })
                    .collect()
            })
            .collect()
    }

    /// Ranks `src` can reach without passing through another GPU
    /// ("direct" neighbours: over a link, a switch, or NICs), with the
    /// route's bottleneck capacity.
    pub fn direct_neighbours(&self, src: usize) -> Vec<(usize, f64)> {
        let g = &self.graph;
        let s = self.ranks[src];
        let mut bneck = vec![0.0f64; g.node_count()];
        bneck[s.index()] = f64::INFINITY;
        // Widest-path search restricted to non-GPU intermediates.
        let mut stack = vec![s];
        let mut out = Vec::new();
        let mut seen = vec![false; g.node_count()];
        seen[s.index()] = true;
        while let Some(u) = stack.pop() {
            for e in g.edges_directed(u, petgraph::Direction::Outgoing) {
                let v = e.target();
                let b = bneck[u.index()].min(e.weight().capacity_gbps());
                if b > bneck[v.index()] {
                    bneck[v.index()] = b;
                    if g[v].kind == NodeKind::Gpu {
                        seen[v.index()] = true;
                    } else {
                        stack.push(v);
                    }
                }
            }
        }
        for (r, &n) in self.ranks.iter().enumerate() {
            if r != src && bneck[n.index()] > 0.0 {
                out.push((r, bneck[n.index()]));
            }
        }
        out
    }
}
