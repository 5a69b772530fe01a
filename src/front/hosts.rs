//! Multi-host topologies: replicate a single-host topology and join the
//! hosts through a rail-optimised network (NIC k of every host on rail
//! switch k), as in topologies.md §2.10.

use crate::ir::{Link, Node, NodeKind, Topology};
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;

/// Parameters of the inter-host network.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RailParams {
    /// NIC ↔ rail switch bandwidth per direction, GB/s (400 Gb/s = 50).
    pub nic_gbps: f64,
    /// α of each NIC ↔ switch link, µs.
    pub alpha_us: f64,
}

/// `hosts` copies of `single` (which must be one host), rank r of host h
/// becoming rank h·N + r, node ids prefixed `h{h}/`, and NIC k (k-th NIC
/// node in `single`'s order) of every host linked to switch `rail{k}`.
/// With `hosts == 1` the topology is returned with host names set and no
/// rail switches. Errors if `hosts == 0`, or `hosts > 1` and there is no NIC.
pub fn replicate_hosts(
    single: &Topology,
    hosts: usize,
    rail: RailParams,
) -> Result<Topology, String> {
    if hosts == 0 {
        return Err("--hosts must be at least 1".into());
    }
    if single.num_hosts() > 1 {
        return Err("the topology to replicate already spans several hosts".into());
    }
    let nics: Vec<NodeIndex> = single
        .graph
        .node_indices()
        .filter(|&n| single.graph[n].kind == NodeKind::Nic)
        .collect();
    if hosts > 1 && nics.is_empty() {
        return Err(format!(
            "cannot join {hosts} hosts of \"{}\": it has no NIC nodes",
            single.name
        ));
    }
    let n = single.num_ranks();
    let mut g: DiGraph<Node, Link> = DiGraph::new();
    let mut host_nics: Vec<Vec<NodeIndex>> = Vec::new();
    for h in 0..hosts {
        let mut map = vec![NodeIndex::end(); single.graph.node_count()];
        for v in single.graph.node_indices() {
            let src = &single.graph[v];
            let id = if hosts == 1 {
                src.id.clone()
            } else {
                format!("h{h}/{}", src.id)
            };
            map[v.index()] = g.add_node(Node {
                id,
                kind: src.kind,
                rank: src.rank.map(|r| h * n + r),
                host: Some(format!("h{h}")),
                sms: src.sms,
                mem_gbps: src.mem_gbps,
            });
        }
        for e in single.graph.edge_references() {
            g.add_edge(
                map[e.source().index()],
                map[e.target().index()],
                e.weight().clone(),
            );
        }
        host_nics.push(nics.iter().map(|v| map[v.index()]).collect());
    }
    if hosts > 1 {
        for k in 0..nics.len() {
            let sw = g.add_node(Node {
                id: format!("rail{k}"),
                kind: NodeKind::Switch,
                rank: None,
                host: None,
                sms: None,
                mem_gbps: None,
            });
            let link = Link {
                bw_gbps: rail.nic_gbps,
                alpha_us: rail.alpha_us,
                count: 1,
                kind: "ib".into(),
            };
            for hn in &host_nics {
                g.add_edge(hn[k], sw, link.clone());
                g.add_edge(sw, hn[k], link.clone());
            }
        }
    }
    let name = if hosts == 1 {
        single.name.clone()
    } else {
        format!("{}x{hosts}", single.name)
    };
    let description = if hosts == 1 {
        single.description.clone()
    } else {
        format!(
            "{hosts} hosts of: {} Joined rail-optimised: NIC k of every host on switch rail{{k}}, {} GB/s, {} us per link.",
            single.description,
            rail.nic_gbps,
            rail.alpha_us,
        )
    };
    let mut t = Topology::new(name, description, g);
    t.vendor = single.vendor;
    // The rails' figures come from the caller (`--nic-gbps`): the copy is
    // held to every front end's checks.
    super::topo_json::validate(&t)?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::front::generate::{generate, GenParams};

    /// A rail bandwidth out of range is refused with its link named, as a
    /// file's would be; one in range replicates.
    #[test]
    fn rails_are_held_to_the_bandwidth_range() {
        let one = generate("dgx-a100", &GenParams::default()).unwrap();
        let rail = |nic_gbps| RailParams {
            nic_gbps,
            alpha_us: 1.3,
        };
        let e = replicate_hosts(&one, 2, rail(1e12)).unwrap_err();
        assert!(
            e.contains("-> rail0: bandwidth must be a number from 1e-6 to 1e9 GB/s, got 1e12"),
            "{e}"
        );
        assert_eq!(
            replicate_hosts(&one, 2, rail(25.0)).unwrap().num_ranks(),
            16
        );
    }
}
