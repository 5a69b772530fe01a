//! What a topology holds, for people and scripts (`rscc topo show`): node
//! counts, each GPU's capacity by link kind, the direct GPU → GPU links
//! aggregated per pair, and every switch, NIC and CPU with its links
//! grouped by attributes. The CLI renders it as tables or serialises it.

use super::{NodeKind, Topology};
use petgraph::graph::{EdgeIndex, NodeIndex};
use petgraph::visit::EdgeRef;
use petgraph::Direction;
use serde::Serialize;
use std::collections::BTreeMap;

/// Everything `topo show` prints; also its `--json` form.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Report {
    pub file: String,
    pub name: String,
    pub description: String,
    pub hosts: usize,
    pub gpus: usize,
    pub switches: usize,
    pub nics: usize,
    pub cpus: usize,
    /// Directed links (a duplex link counts twice).
    pub directed_links: usize,
    pub ranks: Vec<GpuRow>,
    /// Direct GPU → GPU links, aggregated per ordered pair.
    pub direct: Vec<DirectLink>,
    /// Switch, NIC and CPU nodes with what they attach to.
    pub attachments: Vec<Attachment>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GpuRow {
    pub rank: usize,
    pub id: String,
    pub host: Option<String>,
    pub sms: Option<u32>,
    /// Sum of the capacities of all links out of / into this GPU, GB/s.
    pub egress_gbps: f64,
    pub ingress_gbps: f64,
    /// The same split by link kind.
    pub by_kind: BTreeMap<String, KindBw>,
}

/// Egress and ingress capacity of one link kind at a GPU, GB/s.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct KindBw {
    pub egress_gbps: f64,
    pub ingress_gbps: f64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DirectLink {
    pub from: usize,
    pub to: usize,
    /// Physical links over all parallel edges.
    pub count: u32,
    /// Total capacity, GB/s per direction.
    pub capacity_gbps: f64,
    /// Per-link bandwidth when every edge has the same; else null.
    pub bw_gbps: Option<f64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Attachment {
    pub id: String,
    pub kind: String,
    pub host: Option<String>,
    pub groups: Vec<LinkGroup>,
}

/// Links of one node with identical attributes, to several peers.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LinkGroup {
    /// "both" (a link each way), "out" (from this node) or "in" (to it).
    pub dir: String,
    pub count: u32,
    pub bw_gbps: f64,
    pub alpha_us: f64,
    pub kind: String,
    pub peers: Vec<String>,
}

/// The summary of a topology read from `file`.
pub fn summary(t: &Topology, file: &str) -> Report {
    let g = &t.graph;
    let count_kind = |k: NodeKind| g.node_indices().filter(|&n| g[n].kind == k).count();
    let ranks = (0..t.num_ranks())
        .map(|r| {
            let n = t.ranks[r];
            let node = t.node(n);
            let (egress_gbps, ingress_gbps) = t.gpu_bandwidth(r);
            let mut by_kind: BTreeMap<String, KindBw> = BTreeMap::new();
            for e in g.edges_directed(n, Direction::Outgoing) {
                by_kind
                    .entry(e.weight().kind.clone())
                    .or_default()
                    .egress_gbps += e.weight().capacity_gbps();
            }
            for e in g.edges_directed(n, Direction::Incoming) {
                by_kind
                    .entry(e.weight().kind.clone())
                    .or_default()
                    .ingress_gbps += e.weight().capacity_gbps();
            }
            GpuRow {
                rank: r,
                id: node.id.clone(),
                host: node.host.clone(),
                sms: node.sms,
                egress_gbps,
                ingress_gbps,
                by_kind,
            }
        })
        .collect();
    let mut direct = Vec::new();
    for (r, &n) in t.ranks.iter().enumerate() {
        let mut per_peer: BTreeMap<usize, Vec<EdgeIndex>> = BTreeMap::new();
        for e in g.edges_directed(n, Direction::Outgoing) {
            if let Some(peer) = g[e.target()].rank {
                per_peer.entry(peer).or_default().push(e.id());
            }
        }
        for (peer, es) in per_peer {
            let count = es.iter().map(|&e| g[e].count).sum();
            let capacity_gbps = es.iter().map(|&e| g[e].capacity_gbps()).sum();
            let bw0 = g[es[0]].bw_gbps;
            let bw_gbps = es.iter().all(|&e| g[e].bw_gbps == bw0).then_some(bw0);
            direct.push(DirectLink {
                from: r,
                to: peer,
                count,
                capacity_gbps,
                bw_gbps,
            });
        }
    }
    let attachments = g
        .node_indices()
        .filter(|&n| g[n].kind != NodeKind::Gpu)
        .map(|n| Attachment {
            id: g[n].id.clone(),
            kind: g[n].kind.as_str().to_string(),
            host: g[n].host.clone(),
            groups: link_groups(t, n),
        })
        .collect();
    Report {
        file: file.to_string(),
        name: t.name.clone(),
        description: t.description.clone(),
        hosts: t.num_hosts(),
        gpus: t.num_ranks(),
        switches: count_kind(NodeKind::Switch),
        nics: count_kind(NodeKind::Nic),
        cpus: count_kind(NodeKind::Cpu),
        directed_links: g.edge_count(),
        ranks,
        direct,
        attachments,
    }
}

/// Links of node `n`, paired into duplex where an equal link runs back,
/// grouped by (direction, attributes), peers in graph order.
fn link_groups(t: &Topology, n: NodeIndex) -> Vec<LinkGroup> {
    let g = &t.graph;
    let outs: Vec<_> = g.edges_directed(n, Direction::Outgoing).collect();
    let ins: Vec<_> = g.edges_directed(n, Direction::Incoming).collect();
    let mut in_used = vec![false; ins.len()];
    // (dir, peer, edge) in a deterministic order: by peer index.
    let mut items: Vec<(&'static str, NodeIndex, EdgeIndex)> = Vec::new();
    for o in &outs {
        let twin = ins
            .iter()
            .enumerate()
            .find(|(i, e)| !in_used[*i] && e.source() == o.target() && e.weight() == o.weight())
            .map(|(i, _)| i);
        let dir = match twin {
            Some(i) => {
                in_used[i] = true;
                "both"
            }
            None => "out",
        };
        items.push((dir, o.target(), o.id()));
    }
    for (i, e) in ins.iter().enumerate() {
        if !in_used[i] {
            items.push(("in", e.source(), e.id()));
        }
    }
    items.sort_by_key(|&(_, peer, e)| (peer.index(), e.index()));
    let mut groups: Vec<LinkGroup> = Vec::new();
    for (dir, peer, e) in items {
        let l = &g[e];
        let peer_id = g[peer].id.clone();
        match groups.iter_mut().find(|gr| {
            gr.dir == dir
                && gr.count == l.count
                && gr.bw_gbps == l.bw_gbps
                && gr.alpha_us == l.alpha_us
                && gr.kind == l.kind
        }) {
            Some(gr) => gr.peers.push(peer_id),
            None => groups.push(LinkGroup {
                dir: dir.to_string(),
                count: l.count,
                bw_gbps: l.bw_gbps,
                alpha_us: l.alpha_us,
                kind: l.kind.clone(),
                peers: vec![peer_id],
            }),
        }
    }
    groups
}
