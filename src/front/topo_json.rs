//! rscc's own topology JSON format (docs/topology-format.md): read with
//! full validation, and written back (the generators use the writer).

use super::FrontError;
use crate::ir::{Link, Node, NodeKind, Topology};
use petgraph::graph::DiGraph;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TopoFile {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// "nvidia" or "amd": whose GPUs (decides the default runtime).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor: Option<String>,
    pub nodes: Vec<NodeJson>,
    pub links: Vec<LinkJson>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NodeJson {
    pub id: String,
    pub kind: NodeKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sms: Option<u32>,
    /// GB/s of the GPU's memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_gbps: Option<f64>,
}

fn one() -> u32 {
    1
}
fn yes() -> bool {
    true
}
fn is_one(c: &u32) -> bool {
    *c == 1
}
fn is_true(b: &bool) -> bool {
    *b
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LinkJson {
    pub from: String,
    pub to: String,
    /// GB/s per direction, per physical link.
    pub bw_gbps: f64,
    /// µs per transfer.
    pub alpha_us: f64,
    /// Parallel physical links (default 1).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub count: u32,
    /// Both directions (default true).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub duplex: bool,
    pub kind: String,
}

/// Parse and validate topology JSON text. `file` names the source in errors.
pub fn parse(text: &str, file: &str) -> Result<Topology, FrontError> {
    let tf: TopoFile = serde_json::from_str(text).map_err(|e| {
        // serde_json's message ends with " at line L column C"; state the
        // position once, in front.
        let msg = e.to_string();
        let suffix = format!(" at line {} column {}", e.line(), e.column());
        let msg = msg.strip_suffix(&suffix).unwrap_or(&msg);
        FrontError::new(
            file,
            format!("line {}, column {}: {}", e.line(), e.column(), msg),
        )
    })?;
    build(&tf, file)
}

/// Validate a parsed file and build the Topology.
pub fn build(tf: &TopoFile, file: &str) -> Result<Topology, FrontError> {
    let err = |m: String| FrontError::new(file, m);
    let mut g: DiGraph<Node, Link> = DiGraph::new();
    let mut ids = HashMap::new();
    for (i, n) in tf.nodes.iter().enumerate() {
        if n.id.is_empty() {
            return Err(err(format!("nodes[{i}]: empty id")));
        }
        if ids.contains_key(n.id.as_str()) {
            return Err(err(format!("nodes[{i}]: duplicate node id \"{}\"", n.id)));
        }
        let rank = match (n.kind, n.rank) {
            (NodeKind::Gpu, Some(r)) if r >= 0 => Some(r as usize),
            (NodeKind::Gpu, Some(r)) => {
                return Err(err(format!("nodes[{i}] \"{}\": negative rank {r}", n.id)))
            }
            (NodeKind::Gpu, None) => {
                return Err(err(format!("nodes[{i}] \"{}\": a gpu needs a rank", n.id)))
            }
            (k, Some(_)) => {
                return Err(err(format!(
                    "nodes[{i}] \"{}\": only gpu nodes have a rank (this one is a {})",
                    n.id,
                    k.as_str()
                )))
            }
            (_, None) => None,
        };
        if let Some(m) = n.mem_gbps {
            if n.kind != NodeKind::Gpu {
                return Err(err(format!(
                    "nodes[{i}] \"{}\": only gpu nodes have a mem_gbps (this one is a {})",
                    n.id,
                    n.kind.as_str()
                )));
            }
            if let Some(why) = bad_bw(m) {
                return Err(err(format!("nodes[{i}] \"{}\": mem_gbps {why}", n.id)));
            }
        }
        let idx = g.add_node(Node {
            id: n.id.clone(),
            kind: n.kind,
            rank,
            host: n.host.clone(),
            sms: n.sms,
            mem_gbps: n.mem_gbps,
        });
        ids.insert(n.id.as_str(), idx);
    }
    for (i, l) in tf.links.iter().enumerate() {
        let a = *ids.get(l.from.as_str()).ok_or_else(|| {
            err(format!(
                "links[{i}] ({} -> {}): unknown node \"{}\"",
                l.from, l.to, l.from
            ))
        })?;
        let b = *ids.get(l.to.as_str()).ok_or_else(|| {
            err(format!(
                "links[{i}] ({} -> {}): unknown node \"{}\"",
                l.from, l.to, l.to
            ))
        })?;
        if a == b {
            return Err(err(format!("links[{i}]: \"{}\" links to itself", l.from)));
        }
        if let Some(why) = bad_bw(l.bw_gbps) {
            return Err(err(format!(
                "links[{i}] ({} -> {}): bw_gbps {why}",
                l.from, l.to
            )));
        }
        if let Some(why) = bad_alpha(l.alpha_us) {
            return Err(err(format!(
                "links[{i}] ({} -> {}): alpha_us {why}",
                l.from, l.to
            )));
        }
        if l.count == 0 {
            return Err(err(format!(
                "links[{i}] ({} -> {}): count must be at least 1",
                l.from, l.to
            )));
        }
        let link = Link {
            bw_gbps: l.bw_gbps,
            alpha_us: l.alpha_us,
            count: l.count,
            kind: l.kind.clone(),
        };
        g.add_edge(a, b, link.clone());
        if l.duplex {
            g.add_edge(b, a, link);
        }
    }
    let mut topo = Topology::new(tf.name.clone(), tf.description.clone(), g);
    if let Some(v) = &tf.vendor {
        topo.vendor = Some(
            crate::ir::Vendor::parse(v)
                .ok_or_else(|| err(format!("vendor \"{v}\" is not one of \"nvidia\", \"amd\"")))?,
        );
    }
    validate(&topo).map_err(err)?;
    Ok(topo)
}

/// Most GPUs a topology may have: beyond what MSCCL XML can express at all
/// (every rank's parse table holds 4096 nodes and each `<gpu>` element is
/// one), and what keeps the all-pairs stages bounded.
pub const MAX_RANKS: usize = super::generate::MAX_RANKS;
/// Most nodes and links of any kind (switches, NICs, CPUs included).
pub const MAX_NODES: usize = 1 << 16;
pub const MAX_LINKS: usize = 1 << 20;
/// The bandwidths a topology may give, GB/s (a link's per direction, a
/// GPU's memory): 1 kB/s to 1 EB/s. Within them every time rscc computes
/// from a bandwidth — bytes (up to 2^64) over a capacity (up to 2^32
/// links bundled) — is a finite, nonzero number; beyond them the
/// simulator's rates overflow to ∞ or its times to ∞.
pub const BW_GBPS: (f64, f64) = (1e-6, 1e9);
/// The most α a link may have, µs (1000 s), for the same reason.
pub const MAX_ALPHA_US: f64 = 1e9;

/// Why `bw` (GB/s) is not a bandwidth a topology may give, if it is not.
fn bad_bw(bw: f64) -> Option<String> {
    let (lo, hi) = BW_GBPS;
    (!(bw.is_finite() && (lo..=hi).contains(&bw))).then(|| {
        format!(
            "must be a number from {lo:e} to {hi:e} GB/s, got {}",
            num(bw)
        )
    })
}

/// `x` as a message quotes it: in exponent form where plain digits would
/// run long.
fn num(x: f64) -> String {
    if x.is_finite() && x != 0.0 && !(1e-4..1e9).contains(&x.abs()) {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

/// Why `alpha` (µs) is not an α a link may have, if it is not.
fn bad_alpha(alpha: f64) -> Option<String> {
    (!(alpha.is_finite() && (0.0..=MAX_ALPHA_US).contains(&alpha))).then(|| {
        format!(
            "must be a number from 0 to {MAX_ALPHA_US:e} µs, got {}",
            num(alpha)
        )
    })
}

/// Checks every front end applies: ranks are exactly 0..N-1, 1 ≤ N ≤
/// [`MAX_RANKS`], at most [`MAX_NODES`] nodes and [`MAX_LINKS`] directed
/// links, and every rank can reach every other.
pub fn validate(t: &Topology) -> Result<(), String> {
    let n = t.num_ranks();
    if n == 0 {
        return Err("the topology has no gpu nodes".into());
    }
    if n > MAX_RANKS {
        return Err(format!(
            "the topology has {n} GPUs; rscc takes at most {MAX_RANKS} (MSCCL XML cannot express more: every rank's parse table holds 4096 nodes, one per <gpu> element)"
        ));
    }
    if t.graph.node_count() > MAX_NODES {
        return Err(format!(
            "the topology has {} nodes; rscc takes at most {MAX_NODES}",
            t.graph.node_count()
        ));
    }
    if t.graph.edge_count() > MAX_LINKS {
        return Err(format!(
            "the topology has {} directed links; rscc takes at most {MAX_LINKS}",
            t.graph.edge_count()
        ));
    }
    // The numbers, for topologies built otherwise than from this format
    // (imports, generators, replication).
    for e in t.graph.edge_indices() {
        let (a, b) = t.graph.edge_endpoints(e).expect("an edge of the graph");
        let l = &t.graph[e];
        let name = || format!("link {} -> {}", t.node(a).id, t.node(b).id);
        if let Some(why) = bad_bw(l.bw_gbps) {
            return Err(format!("{}: bandwidth {why}", name()));
        }
        if let Some(why) = bad_alpha(l.alpha_us) {
            return Err(format!("{}: alpha {why}", name()));
        }
    }
    for &idx in &t.ranks {
        if let Some(why) = t.node(idx).mem_gbps.and_then(bad_bw) {
            return Err(format!(
                "gpu \"{}\": memory bandwidth {why}",
                t.node(idx).id
            ));
        }
    }
    for (want, &idx) in t.ranks.iter().enumerate() {
        let node = t.node(idx);
        let got = node.rank.unwrap_or(usize::MAX);
        if got != want {
            return Err(if got < want {
                format!("rank {got} is given to more than one gpu (\"{}\")", node.id)
            } else {
                format!(
                    "ranks must be 0..{} without gaps: rank {want} is missing (next is \"{}\" with rank {got})",
                    n - 1,
                    node.id
                )
            });
        }
    }
    // Reachability: from rank 0 forward, and every rank reaches rank 0.
    use petgraph::visit::{Bfs, Reversed};
    let mut seen = vec![false; t.graph.node_count()];
    let mut bfs = Bfs::new(&t.graph, t.ranks[0]);
    while let Some(v) = bfs.next(&t.graph) {
        seen[v.index()] = true;
    }
    let mut back = vec![false; t.graph.node_count()];
    let rev = Reversed(&t.graph);
    let mut bfs = Bfs::new(rev, t.ranks[0]);
    while let Some(v) = bfs.next(rev) {
        back[v.index()] = true;
    }
    for (r, &idx) in t.ranks.iter().enumerate() {
        if !seen[idx.index()] {
            return Err(format!(
                "rank {r} (\"{}\") cannot be reached from rank 0 (\"{}\")",
                t.node(idx).id,
                t.node(t.ranks[0]).id
            ));
        }
        if !back[idx.index()] {
            return Err(format!(
                "rank {r} (\"{}\") cannot reach rank 0 (\"{}\")",
                t.node(idx).id,
                t.node(t.ranks[0]).id
            ));
        }
    }
    Ok(())
}

/// The file form of a topology. Opposite directions with equal attributes
/// are folded into one duplex link.
pub fn to_file(t: &Topology) -> TopoFile {
    use petgraph::visit::EdgeRef;
    let nodes = t
        .graph
        .node_indices()
        .map(|i| {
            let n = t.node(i);
            NodeJson {
                id: n.id.clone(),
                kind: n.kind,
                rank: n.rank.map(|r| r as i64),
                host: n.host.clone(),
                sms: n.sms,
                mem_gbps: n.mem_gbps,
            }
        })
        .collect();
    let mut used = vec![false; t.graph.edge_count()];
    let mut links = Vec::new();
    for e in t.graph.edge_references() {
        if used[e.id().index()] {
            continue;
        }
        used[e.id().index()] = true;
        let (a, b) = (e.source(), e.target());
        let w = e.weight();
        let twin = t
            .graph
            .edges_connecting(b, a)
            .find(|r| !used[r.id().index()] && r.weight() == w)
            .map(|r| r.id());
        if let Some(tw) = twin {
            used[tw.index()] = true;
        }
        links.push(LinkJson {
            from: t.node(a).id.clone(),
            to: t.node(b).id.clone(),
            bw_gbps: w.bw_gbps,
            alpha_us: w.alpha_us,
            count: w.count,
            duplex: twin.is_some(),
            kind: w.kind.clone(),
        });
    }
    TopoFile {
        name: t.name.clone(),
        description: t.description.clone(),
        vendor: t.vendor.map(|v| v.name().to_string()),
        nodes,
        links,
    }
}

/// Pretty JSON text of a topology, newline-terminated.
pub fn to_json(t: &Topology) -> String {
    let mut s = serde_json::to_string_pretty(&to_file(t)).expect("topology serialises");
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A topology built otherwise than from this format (here by a
    /// generator) is held to the same numbers: a bandwidth or α whose
    /// times would overflow is named with its link, and the quoted number
    /// is short; the ends of the ranges are accepted.
    #[test]
    fn built_topologies_keep_bandwidth_and_alpha_in_range() {
        use crate::front::generate::{generate, GenParams};
        let ring = |bw: f64, alpha: f64| {
            let p = GenParams {
                gpus: Some(4),
                bw_gbps: Some(bw),
                alpha_us: Some(alpha),
                ..GenParams::default()
            };
            validate(&generate("ring", &p).unwrap())
        };
        let e = ring(1e308, 1.0).unwrap_err();
        assert_eq!(
            e,
            "link gpu0 -> gpu1: bandwidth must be a number from 1e-6 to 1e9 GB/s, got 1e308"
        );
        let e = ring(25.0, 1e12).unwrap_err();
        assert_eq!(
            e,
            "link gpu0 -> gpu1: alpha must be a number from 0 to 1e9 µs, got 1e12"
        );
        assert!(ring(1e-7, 1.0).is_err());
        let (lo, hi) = BW_GBPS;
        for bw in [lo, hi] {
            assert_eq!(ring(bw, 0.0), Ok(()));
        }
        assert_eq!(ring(25.0, MAX_ALPHA_US), Ok(()));
    }

    /// A valid topology beyond MSCCL's reach is refused with the limit.
    #[test]
    fn too_many_gpus_is_a_stated_limit() {
        let n = MAX_RANKS + 1;
        let nodes: Vec<String> = (0..n)
            .map(|r| format!(r#"{{"id":"g{r}","kind":"gpu","rank":{r}}}"#))
            .chain([r#"{"id":"sw","kind":"switch"}"#.to_string()])
            .collect();
        let links: Vec<String> = (0..n)
            .map(|r| {
                format!(r#"{{"from":"g{r}","to":"sw","bw_gbps":25,"alpha_us":1,"kind":"nvlink"}}"#)
            })
            .collect();
        let text = format!(
            r#"{{"name":"big","nodes":[{}],"links":[{}]}}"#,
            nodes.join(","),
            links.join(",")
        );
        let e = parse(&text, "big.json").unwrap_err().to_string();
        assert!(e.starts_with("big.json: "), "{e}");
        assert!(e.contains("4097 GPUs") && e.contains("at most 4096"), "{e}");
    }
}
