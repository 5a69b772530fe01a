//! Topology → NCCL topology XML (`NCCL_TOPO_FILE`), following NCCL's
//! lexical rules: no XML declaration, no tabs, double quotes, one tag per
//! line (topologies.md §4.2). RCCL's version-2 dialect is written when the
//! topology has xGMI links.
//!
//! NCCL XML carries no link bandwidths: NVLink / xGMI bandwidth follows from
//! the GPU's `sm` / `gcn`, PCIe from `link_speed` × `link_width`, NICs from
//! `speed`. The writer picks the values that the importer
//! (`front::nccl_xml`) reads back as the topology's bandwidths, and warns
//! where no such value exists.

use crate::ir::{NodeKind, Topology};
use petgraph::graph::NodeIndex;
use petgraph::visit::EdgeRef;
use petgraph::Direction;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt::Write as _;

/// Export failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ExportError(pub String);

/// The written XML and what could not be expressed exactly.
#[derive(Debug, Clone)]
pub struct Exported {
    pub xml: String,
    pub warnings: Vec<String>,
}

use crate::ir::hardware::{cpu_attrs, nvlink_sm as nvidia_sm, pcie_attrs, xgmi_arch as amd_arch};

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\t', " ")
}

fn is_fabric(kind: &str) -> bool {
    matches!(kind, "nvlink" | "nvswitch" | "xgmi")
}

/// Write `t` as NCCL (or RCCL) topology XML. `nic_gbps` gives NIC speeds
/// (GB/s) the topology itself cannot hold (an imported single host); NICs
/// not in it take the speed of their network link, else 100 Gb/s.
pub fn to_nccl_xml(
    t: &Topology,
    nic_gbps: &HashMap<NodeIndex, f64>,
) -> Result<Exported, ExportError> {
    let g = &t.graph;
    let mut warnings = Vec::new();
    let rccl = g.edge_references().any(|e| e.weight().kind == "xgmi");
    let hosts = hosts(t);
    let host_of = |n: NodeIndex| host_of(t, &hosts, n);

    // Per-host busids.
    let mut next_bus: Vec<u32> = vec![1; hosts.len()];
    let mut busid: HashMap<NodeIndex, String> = HashMap::new();
    let (cpus, parent) = pcie_tree(t);
    let children = children(t, &parent);
    let orphans = orphans(t, &hosts, &parent, &mut warnings);

    let nv_targets = fabric_targets(t, &mut warnings);
    gpu_busids(t, &hosts, &mut next_bus, &mut busid)?;
    let nvswitch_bus = nvswitch_busids(t, &hosts, &nv_targets, &mut next_bus)?;

    let mut out = String::new();
    let _ = writeln!(out, "<system version=\"{}\">", if rccl { 2 } else { 1 });
    let mut nic_dev = 0usize;
    let mut gpu_dev: Vec<usize> = vec![0; hosts.len()];
    for (h, hname) in hosts.iter().enumerate() {
        let mut host_cpus: Vec<NodeIndex> =
            cpus.iter().copied().filter(|&c| host_of(c) == h).collect();
        let virtual_cpu = host_cpus.is_empty();
        if virtual_cpu {
            host_cpus.push(NodeIndex::end());
        }
        for (ci, &c) in host_cpus.iter().enumerate() {
            let sys_bw = if virtual_cpu {
                None
            } else {
                g.edges_directed(c, Direction::Outgoing)
                    .find(|e| g[e.target()].kind == NodeKind::Cpu)
                    .map(|e| e.weight().bw_gbps)
            };
            let hh = if hosts.len() > 1 {
                format!(" host_hash=\"0x{:x}\"", h + 1)
            } else {
                String::new()
            };
            let _ = writeln!(out, "  <cpu{hh} numaid=\"{ci}\" {}>", cpu_attrs(sys_bw));
            let _ = hname;
            let mut items: Vec<(NodeIndex, f64)> = if virtual_cpu {
                Vec::new()
            } else {
                children
                    .get(&c)
                    .cloned()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|n| (n, parent[&n].1))
                    .collect()
            };
            if ci == 0 {
                items.extend(orphans[h].iter().map(|&n| (n, 48.0)));
            }
            let mut ctx = Ctx {
                t,
                children: &children,
                parent: &parent,
                busid: &mut busid,
                next_bus: &mut next_bus,
                nv_targets: &nv_targets,
                nvswitch_bus: &nvswitch_bus,
                nic_gbps,
                nic_dev: &mut nic_dev,
                gpu_dev: &mut gpu_dev,
                warnings: &mut warnings,
                host: h,
                multi_host: hosts.len() > 1,
                out: &mut out,
            };
            for (n, bw) in items {
                ctx.write_dev(n, bw, 2)?;
            }
            let _ = writeln!(out, "  </cpu>");
        }
    }
    out.push_str("</system>\n");
    warnings.sort();
    warnings.dedup();
    Ok(Exported { xml: out, warnings })
}

/// A PCIe parent and the bandwidth of the link to it, per node.
type Parents = HashMap<NodeIndex, (NodeIndex, f64)>;

/// Per GPU, its fabric links: (target, count, bandwidth, kind).
type FabricTargets = HashMap<NodeIndex, Vec<(NodeIndex, u32, f64, String)>>;

/// The hosts, in node order (one unnamed host when there are none).
fn hosts(t: &Topology) -> Vec<String> {
    let g = &t.graph;
    // Hosts.
    let mut hosts: Vec<String> = Vec::new();
    for n in g.node_indices() {
        let h = g[n].host.clone().unwrap_or_default();
        if (g[n].kind != NodeKind::Switch || g[n].host.is_some()) && !hosts.contains(&h) {
            hosts.push(h);
        }
    }
    if hosts.is_empty() {
        hosts.push(String::new());
    }
    hosts
}

/// Node n's host, as a place in `hosts`.
fn host_of(t: &Topology, hosts: &[String], n: NodeIndex) -> usize {
    let g = &t.graph;
    let h = g[n].host.clone().unwrap_or_default();
    hosts.iter().position(|x| *x == h).unwrap_or(0)
}

/// The CPUs, and the PCIe tree: every node's parent found by a BFS from
/// each CPU over pcie/c2c links, not through GPUs, NICs or other CPUs.
fn pcie_tree(t: &Topology) -> (Vec<NodeIndex>, Parents) {
    let g = &t.graph;
    let mut parent: HashMap<NodeIndex, (NodeIndex, f64)> = HashMap::new();
    let cpus: Vec<NodeIndex> = g
        .node_indices()
        .filter(|&n| g[n].kind == NodeKind::Cpu)
        .collect();
    let mut q: VecDeque<NodeIndex> = cpus.iter().copied().collect();
    let mut seen: HashMap<NodeIndex, bool> = cpus.iter().map(|&c| (c, true)).collect();
    while let Some(u) = q.pop_front() {
        for e in g.edges_directed(u, Direction::Outgoing) {
            let v = e.target();
            if seen.contains_key(&v) || e.weight().kind != "pcie" || g[v].kind == NodeKind::Cpu {
                continue;
            }
            seen.insert(v, true);
            parent.insert(v, (u, e.weight().capacity_gbps()));
            if g[v].kind == NodeKind::Switch {
                q.push_back(v);
            }
        }
    }
    (cpus, parent)
}

/// Children lists, in node order.
fn children(t: &Topology, parent: &Parents) -> BTreeMap<NodeIndex, Vec<NodeIndex>> {
    let g = &t.graph;
    let mut children: BTreeMap<NodeIndex, Vec<NodeIndex>> = BTreeMap::new();
    for n in g.node_indices() {
        if let Some(&(p, _)) = parent.get(&n) {
            children.entry(p).or_default().push(n);
        }
    }
    children
}

/// GPUs and NICs without a PCIe path, per host: written under the host's
/// first CPU (or a virtual one).
fn orphans(
    t: &Topology,
    hosts: &[String],
    parent: &Parents,
    warnings: &mut Vec<String>,
) -> Vec<Vec<NodeIndex>> {
    let g = &t.graph;
    let host_of = |n: NodeIndex| host_of(t, hosts, n);
    let mut orphans: Vec<Vec<NodeIndex>> = vec![Vec::new(); hosts.len()];
    for &r in &t.ranks {
        if !parent.contains_key(&r) {
            orphans[host_of(r)].push(r);
        }
    }
    for n in g.node_indices() {
        if g[n].kind == NodeKind::Nic && !parent.contains_key(&n) {
            orphans[host_of(n)].push(n);
        }
    }
    if orphans.iter().any(|o| !o.is_empty()) {
        warnings.push(
            "some GPUs/NICs have no PCIe path to a CPU in the topology; written under the host's first CPU with a Gen5 ×16 link".into(),
        );
    }
    orphans
}

/// GPU fabric links (to GPUs and switches); a warning for any other.
fn fabric_targets(t: &Topology, warnings: &mut Vec<String>) -> FabricTargets {
    let g = &t.graph;
    let mut nv_targets: FabricTargets = HashMap::new();
    for &r in &t.ranks {
        for e in g.edges_directed(r, Direction::Outgoing) {
            let w = e.weight();
            if !is_fabric(&w.kind) {
                continue;
            }
            let v = e.target();
            match g[v].kind {
                NodeKind::Gpu | NodeKind::Switch => {
                    nv_targets
                        .entry(r)
                        .or_default()
                        .push((v, w.count, w.bw_gbps, w.kind.clone()));
                }
                _ => warnings.push(format!(
                    "{} link {} → {} is not to a GPU or switch; not written",
                    w.kind, g[r].id, g[v].id
                )),
            }
        }
    }
    nv_targets
}

/// Busids of the GPUs, per host in rank order from `next_bus`.
fn gpu_busids(
    t: &Topology,
    hosts: &[String],
    next_bus: &mut [u32],
    busid: &mut HashMap<NodeIndex, String>,
) -> Result<(), ExportError> {
    let host_of = |n: NodeIndex| host_of(t, hosts, n);
    // Busids: GPUs first (in rank order), then switches, NICs.
    for &r in &t.ranks {
        let h = host_of(r);
        let b = next_bus[h];
        if b > 0xff {
            return Err(ExportError(format!(
                "host {h} has more than 255 GPUs; NCCL XML bus ids cannot number them"
            )));
        }
        next_bus[h] += 1;
        busid.insert(r, format!("0000:{b:02x}:00.0"));
    }
    Ok(())
}

/// Busids of the NVSwitches, per (host, switch), after the GPUs'.
fn nvswitch_busids(
    t: &Topology,
    hosts: &[String],
    nv_targets: &FabricTargets,
    next_bus: &mut [u32],
) -> Result<HashMap<(usize, NodeIndex), String>, ExportError> {
    let g = &t.graph;
    let host_of = |n: NodeIndex| host_of(t, hosts, n);
    let mut nvswitch_bus: HashMap<(usize, NodeIndex), String> = HashMap::new();
    for &r in &t.ranks {
        for (v, _, _, _) in nv_targets.get(&r).cloned().unwrap_or_default() {
            if g[v].kind == NodeKind::Switch {
                let h = host_of(r);
                if let std::collections::hash_map::Entry::Vacant(slot) = nvswitch_bus.entry((h, v))
                {
                    let b = next_bus[h];
                    if b > 0xff {
                        return Err(ExportError("too many PCI devices for NCCL bus ids".into()));
                    }
                    next_bus[h] += 1;
                    slot.insert(format!("0000:{b:02x}:00.0"));
                }
            }
        }
    }
    Ok(nvswitch_bus)
}

struct Ctx<'a> {
    t: &'a Topology,
    children: &'a BTreeMap<NodeIndex, Vec<NodeIndex>>,
    parent: &'a HashMap<NodeIndex, (NodeIndex, f64)>,
    busid: &'a mut HashMap<NodeIndex, String>,
    next_bus: &'a mut Vec<u32>,
    nv_targets: &'a HashMap<NodeIndex, Vec<(NodeIndex, u32, f64, String)>>,
    nvswitch_bus: &'a HashMap<(usize, NodeIndex), String>,
    nic_gbps: &'a HashMap<NodeIndex, f64>,
    nic_dev: &'a mut usize,
    gpu_dev: &'a mut Vec<usize>,
    warnings: &'a mut Vec<String>,
    host: usize,
    multi_host: bool,
    out: &'a mut String,
}

impl Ctx<'_> {
    fn bus(&mut self, n: NodeIndex) -> Result<String, ExportError> {
        if let Some(b) = self.busid.get(&n) {
            return Ok(b.clone());
        }
        let b = self.next_bus[self.host];
        if b > 0xff {
            return Err(ExportError(
                "more than 255 PCI devices on one host; NCCL bus ids cannot number them".into(),
            ));
        }
        self.next_bus[self.host] += 1;
        let s = format!("0000:{b:02x}:00.0");
        self.busid.insert(n, s.clone());
        Ok(s)
    }

    fn write_dev(&mut self, n: NodeIndex, bw: f64, depth: usize) -> Result<(), ExportError> {
        if depth > 60 {
            return Err(ExportError("PCIe tree deeper than 60 levels".into()));
        }
        let g = &self.t.graph;
        let pad = "  ".repeat(depth);
        let (speed, width, exact) = pcie_attrs(bw);
        if !exact {
            self.warnings.push(format!(
                "PCIe bandwidth {bw} GB/s of {} has no exact NCCL link_speed × link_width; written as {speed} ×16",
                g[n].id
            ));
        }
        let bus = self.bus(n)?;
        match g[n].kind {
            NodeKind::Switch => {
                let _ = writeln!(
                    self.out,
                    "{pad}<pci busid=\"{bus}\" class=\"0x060400\" vendor=\"0x0000\" device=\"0x0000\" subsystem_vendor=\"0x0000\" subsystem_device=\"0x0000\" link_speed=\"{speed}\" link_width=\"{width}\">"
                );
                for c in self.children.get(&n).cloned().unwrap_or_default() {
                    let cbw = self.parent.get(&c).map(|p| p.1).unwrap_or(bw);
                    self.write_dev(c, cbw, depth + 1)?;
                }
                let _ = writeln!(self.out, "{pad}</pci>");
            }
            NodeKind::Gpu => self.write_gpu(n, &pad, &bus, speed, width)?,
            NodeKind::Nic => {
                let gb = self.nic_gbps.get(&n).copied().or_else(|| {
                    g.edges_directed(n, Direction::Outgoing)
                        .filter(|e| e.weight().kind != "pcie")
                        .map(|e| e.weight().capacity_gbps())
                        .reduce(f64::max)
                });
                let gb = match gb {
                    Some(x) => x,
                    None => {
                        self.warnings.push(format!(
                            "NIC {} has no known speed; written as 100000 Mb/s",
                            g[n].id
                        ));
                        12.5
                    }
                };
                let dev = *self.nic_dev;
                *self.nic_dev += 1;
                let name = g[n]
                    .id
                    .rsplit('/')
                    .next()
                    .unwrap_or("nic")
                    .trim_start_matches("nic:");
                let _ = writeln!(
                    self.out,
                    "{pad}<pci busid=\"{bus}\" class=\"0x020000\" vendor=\"0x15b3\" device=\"0x0000\" subsystem_vendor=\"0x15b3\" subsystem_device=\"0x0000\" link_speed=\"{speed}\" link_width=\"{width}\">"
                );
                let _ = writeln!(self.out, "{pad}  <nic>");
                let _ = writeln!(
                    self.out,
                    "{pad}    <net name=\"{}\" dev=\"{dev}\" speed=\"{}\" port=\"1\" latency=\"0.000000\" guid=\"0x{:x}\" maxconn=\"131072\" gdr=\"1\"/>",
                    esc(name),
                    (gb * 8000.0).round() as u64,
                    dev + 1
                );
                let _ = writeln!(self.out, "{pad}  </nic>");
                let _ = writeln!(self.out, "{pad}</pci>");
            }
            NodeKind::Cpu => {}
        }
        Ok(())
    }

    fn write_gpu(
        &mut self,
        n: NodeIndex,
        pad: &str,
        bus: &str,
        speed: &str,
        width: u32,
    ) -> Result<(), ExportError> {
        let g = &self.t.graph;
        let links = self.nv_targets.get(&n).cloned().unwrap_or_default();
        let amd = links.iter().any(|l| l.3 == "xgmi");
        let per_link = links.iter().map(|l| l.2).fold(0.0, f64::max);
        let total: u32 = links.iter().map(|l| l.1).sum();
        if links.iter().any(|l| (l.2 - per_link).abs() > 1e-9) {
            self.warnings.push(format!(
                "GPU {} has fabric links of different per-link bandwidths; NCCL XML holds one per GPU ({per_link} GB/s written)",
                g[n].id
            ));
        }
        let rank = g[n].rank.unwrap_or(0);
        let dev = self.gpu_dev[self.host];
        self.gpu_dev[self.host] += 1;
        let (class, gpu_attrs, tclass_gpu) = if amd {
            let (sm, gcn, tc, exact) = amd_arch(per_link);
            if !exact {
                self.warnings.push(format!(
                    "xGMI per-link bandwidth {per_link} GB/s of {} matches no RCCL architecture; written as {gcn}",
                    g[n].id
                ));
            }
            (tc, format!("sm=\"{sm}\" gcn=\"{gcn}\" arch=\"38911\""), tc)
        } else {
            let (sm, exact) = if links.is_empty() {
                (90, true)
            } else {
                nvidia_sm(per_link, total)
            };
            if !exact {
                self.warnings.push(format!(
                    "NVLink per-link bandwidth {per_link} GB/s of {} matches no NVLink generation; written as sm {sm}",
                    g[n].id
                ));
            }
            ("0x030200", format!("sm=\"{sm}\""), "0x030200")
        };
        let _ = writeln!(
            self.out,
            "{pad}<pci busid=\"{bus}\" class=\"{class}\" vendor=\"{}\" device=\"0x0000\" subsystem_vendor=\"0x0000\" subsystem_device=\"0x0000\" link_speed=\"{speed}\" link_width=\"{width}\">",
            if amd { "0x1002" } else { "0x10de" }
        );
        let _ = writeln!(
            self.out,
            "{pad}  <gpu dev=\"{dev}\" {gpu_attrs} rank=\"{rank}\" gdr=\"1\">"
        );
        for (v, count, _, kind) in links {
            let el = if kind == "xgmi" { "xgmi" } else { "nvlink" };
            let (target, tclass) =
                if g[v].kind == NodeKind::Switch && g[v].host.is_none() && self.multi_host {
                    // A fabric shared by several hosts (MNNVL): NCCL's sentinel.
                    ("fffffff:ff:ff.0".to_string(), "0x068000")
                } else if g[v].kind == NodeKind::Switch {
                    match self.nvswitch_bus.get(&(self.host, v)) {
                        Some(b) => (b.clone(), "0x068000"),
                        None => continue,
                    }
                } else {
                    match self.busid.get(&v) {
                        Some(b) => (b.clone(), tclass_gpu),
                        None => continue,
                    }
                };
            let _ = writeln!(
                self.out,
                "{pad}    <{el} target=\"{target}\" count=\"{count}\" tclass=\"{tclass}\"/>"
            );
        }
        let _ = writeln!(self.out, "{pad}  </gpu>");
        let _ = writeln!(self.out, "{pad}</pci>");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcie_attrs_exact() {
        assert_eq!(pcie_attrs(24.0), ("16.0 GT/s PCIe", 16, true));
        assert_eq!(pcie_attrs(0.1875), ("2.5 GT/s PCIe", 1, true));
        assert!(!pcie_attrs(7.0).2);
    }

    #[test]
    fn inexact_bandwidths_are_warned_and_orphans_placed() {
        let json = r#"{"name":"t","nodes":[
            {"id":"a","kind":"gpu","rank":0},{"id":"b","kind":"gpu","rank":1},
            {"id":"c","kind":"gpu","rank":2}],
          "links":[{"from":"a","to":"b","bw_gbps":33,"alpha_us":0.7,"count":2,"kind":"nvlink"},
                   {"from":"b","to":"c","bw_gbps":33,"alpha_us":0.7,"kind":"nvlink"}]}"#;
        let t = crate::front::topo_json::parse(json, "t.json").unwrap();
        let ex = to_nccl_xml(&t, &HashMap::new()).unwrap();
        assert!(
            ex.warnings
                .iter()
                .any(|w| w.contains("matches no NVLink generation")),
            "{:?}",
            ex.warnings
        );
        assert!(
            ex.warnings.iter().any(|w| w.contains("no PCIe path")),
            "{:?}",
            ex.warnings
        );
        assert!(ex.xml.contains("count=\"2\""));
        assert_eq!(ex.xml.matches("<gpu ").count(), 3);
        // It still reads back with the same GPU links (at the written generation's bandwidth).
        let r = crate::front::import::import_text(&ex.xml, "x.xml", &Default::default()).unwrap();
        assert_eq!(r.topology.num_ranks(), 3);
        assert_eq!(r.gpus[1].fabric_links(), 3);
    }

    #[test]
    fn sm_choice() {
        assert_eq!(nvidia_sm(25.0, 6), (70, true));
        assert_eq!(nvidia_sm(25.0, 18), (90, true));
        assert_eq!(nvidia_sm(50.0, 18), (100, true));
        assert!(!nvidia_sm(33.0, 4).1);
    }
}
