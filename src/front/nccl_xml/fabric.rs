//! The GPU fabric: each GPU's `<nvlink>`, `<xgmi>` and `<c2c>` entries
//! become GPU↔GPU links (counts read from both ends), GPU↔NVSwitch links
//! (the switch chips collapsed into one node per host, or one shared node
//! for the sentinel target of a multi-host file) and GPU↔CPU links.

use super::{int_attr, is_sentinel, norm_busid, Walk};
use crate::front::builder::GpuLinkInfo;
use crate::ir::hardware::{ALPHA_GPU_LINK_US, ALPHA_NVSWITCH_US, ALPHA_PCIE_US};
use crate::ir::NodeKind;
use petgraph::graph::NodeIndex;
use std::collections::{BTreeMap, HashMap};

/// The fabric links of the ranked GPUs (`keep`), added to the graph; returns
/// what each GPU's entries said, per index into `w.gpus`.
pub(super) fn fabric(
    w: &mut Walk,
    keep: &[usize],
    link_bw: &[f64],
    multi: bool,
) -> BTreeMap<usize, Vec<GpuLinkInfo>> {
    // Lookup: (host, busid) → gpu record.
    let mut by_busid: HashMap<(usize, String), usize> = HashMap::new();
    for &i in keep {
        if let Some(b) = &w.gpus[i].busid {
            by_busid.insert((w.gpus[i].host, b.clone()), i);
        }
    }
    let Links {
        infos,
        pair,
        nvs_links,
        any_fabric,
    } = links(w, keep, &by_busid, link_bw);
    nvswitches(w, nvs_links, link_bw, multi);
    gpu_pairs(w, pair, link_bw);
    if !any_fabric {
        let nvidia = keep.iter().any(|&i| w.gpus[i].gcn.is_none());
        w.warnings.push(format!(
            "no {} information in the file (a PCI-only skeleton{}): GPUs are joined only through PCIe and the CPUs",
            if nvidia { "NVLink" } else { "xGMI" },
            if keep.iter().any(|&i| !w.gpus[i].has_gpu_el) {
                "; NCCL fuses NVLink facts at run time"
            } else {
                " or a PCIe-only machine"
            }
        ));
    }
    infos
}

/// What the GPUs' link entries gave, before the switch and pair links are
/// added.
struct Links {
    /// Per GPU (index into `w.gpus`), its entries for the report.
    infos: BTreeMap<usize, Vec<GpuLinkInfo>>,
    /// (lower GPU, higher GPU, fabric) → (count listed by the lower one, by
    /// the higher one, line of the first entry).
    pair: BTreeMap<(usize, usize, &'static str), (u32, u32, usize)>,
    /// GPU↔NVSwitch entries: (gpu, count, sentinel target).
    nvs_links: Vec<(usize, u32, bool)>,
    /// Some GPU has an NVLink/xGMI entry to another device.
    any_fabric: bool,
}

/// Read every link entry of the ranked GPUs: C2C and CPU-bound NVLink
/// links are added at once, GPU↔GPU and GPU↔NVSwitch ones collected.
fn links(
    w: &mut Walk,
    keep: &[usize],
    by_busid: &HashMap<(usize, String), usize>,
    link_bw: &[f64],
) -> Links {
    // GPU fabric links.
    let mut infos: BTreeMap<usize, Vec<GpuLinkInfo>> = BTreeMap::new();
    let mut pair: BTreeMap<(usize, usize, &'static str), (u32, u32, usize)> = BTreeMap::new();
    let mut nvs_links: Vec<(usize, u32, bool)> = Vec::new(); // (gpu, count, sentinel)
    let mut any_fabric = false;
    for &i in keep {
        let links = w.gpus[i].links.clone();
        for (el, fabric) in links {
            let count = match el.attr("count").and_then(int_attr) {
                Some(c) if c > 0 && c <= 1024 => c as u32,
                Some(c) => {
                    w.warnings.push(format!(
                        "{}: count {c} unusable; link ignored",
                        el.describe()
                    ));
                    continue;
                }
                None => {
                    w.warnings
                        .push(format!("{}: count missing; 1 assumed", el.describe()));
                    1
                }
            };
            if fabric == "c2c" {
                let bw = el
                    .attr("bw")
                    .and_then(|b| b.trim().parse::<f64>().ok())
                    .filter(|b| *b > 0.0 && b.is_finite());
                match bw {
                    Some(mbps) => {
                        let (gn, cpu) = (w.gpus[i].node, w.gpus[i].cpu);
                        w.b.duplex(gn, cpu, mbps / 1000.0, ALPHA_PCIE_US, count, "c2c");
                        infos.entry(i).or_default().push(GpuLinkInfo {
                            target: "cpu".into(),
                            count,
                            target_kind: "cpu",
                            fabric: "c2c",
                        });
                    }
                    None => w.warnings.push(format!(
                        "{}: <c2c> without a usable bw; ignored",
                        el.describe()
                    )),
                }
                continue;
            }
            let Some(target) = el.attr("target").map(norm_busid) else {
                w.warnings.push(format!(
                    "{}: <{}> without target; ignored",
                    el.describe(),
                    el.name
                ));
                continue;
            };
            let tclass = el
                .attr("tclass")
                .map(|t| t.trim().to_ascii_lowercase())
                .unwrap_or_default();
            let host = w.gpus[i].host;
            if w.gpus[i].busid.as_deref() == Some(target.as_str()) {
                w.warnings.push(format!(
                    "{}: <{}> targets the GPU's own busid {target} (self-link, seen in Azure NC A100 v4 files); ignored",
                    el.describe(),
                    el.name
                ));
                continue;
            }
            any_fabric = true;
            if tclass == "0x068001" {
                let (gn, cpu) = (w.gpus[i].node, w.gpus[i].cpu);
                w.b.duplex(gn, cpu, link_bw[i], ALPHA_NVSWITCH_US, count, "nvlink");
                infos.entry(i).or_default().push(GpuLinkInfo {
                    target,
                    count,
                    target_kind: "cpu",
                    fabric,
                });
                continue;
            }
            let sentinel = is_sentinel(&target);
            let to_switch = sentinel
                || tclass.starts_with("0x0680")
                || w.nvswitch_busids.contains(&(host, target.clone()));
            if to_switch && fabric == "nvlink" {
                nvs_links.push((i, count, sentinel));
                infos.entry(i).or_default().push(GpuLinkInfo {
                    target,
                    count,
                    target_kind: "nvswitch",
                    fabric,
                });
                continue;
            }
            match by_busid.get(&(host, target.clone())) {
                Some(&j) => {
                    let (a, b, fwd) = if i < j { (i, j, true) } else { (j, i, false) };
                    let e = pair.entry((a, b, fabric)).or_insert((0, 0, el.line));
                    if fwd {
                        e.0 = e.0.saturating_add(count)
                    } else {
                        e.1 = e.1.saturating_add(count)
                    }
                    infos.entry(i).or_default().push(GpuLinkInfo {
                        target,
                        count,
                        target_kind: "gpu",
                        fabric,
                    });
                }
                None => {
                    if tclass.is_empty() && fabric == "nvlink" {
                        w.warnings.push(format!(
                            "{}: target {target} is not a GPU in the file and has no tclass; taken as an NVSwitch",
                            el.describe()
                        ));
                        nvs_links.push((i, count, false));
                        infos.entry(i).or_default().push(GpuLinkInfo {
                            target,
                            count,
                            target_kind: "nvswitch",
                            fabric,
                        });
                    } else {
                        w.warnings.push(format!(
                            "{}: <{}> target {target} is not a GPU in this file; link ignored",
                            el.describe(),
                            el.name
                        ));
                    }
                }
            }
        }
    }
    Links {
        infos,
        pair,
        nvs_links,
        any_fabric,
    }
}

/// GPU↔NVSwitch links, one switch node per host (or one shared by all).
fn nvswitches(w: &mut Walk, nvs_links: Vec<(usize, u32, bool)>, link_bw: &[f64], multi: bool) {
    let mut nvs_nodes: HashMap<usize, NodeIndex> = HashMap::new();
    let mut shared_nvs: Option<NodeIndex> = None;
    // NVSwitch: one vertex per host (explicit busids), one shared vertex
    // for the sentinel when the file spans several hosts (MNNVL clique).
    for (i, count, sentinel) in nvs_links {
        let host = w.gpus[i].host;
        let sw = if sentinel && multi {
            *shared_nvs.get_or_insert_with(|| w.b.node("nvswitch", NodeKind::Switch, None))
        } else {
            let id = format!("{}nvswitch", w.prefix(host));
            let h = w.host(host);
            *nvs_nodes
                .entry(host)
                .or_insert_with(|| w.b.node(&id, NodeKind::Switch, h))
        };
        let gn = w.gpus[i].node;
        // Sum counts over switch chips: look for an existing edge.
        let existing = w.b.g.find_edge(gn, sw);
        match existing {
            Some(e) => {
                w.b.g[e].count = w.b.g[e].count.saturating_add(count);
                if let Some(e2) = w.b.g.find_edge(sw, gn) {
                    w.b.g[e2].count = w.b.g[e2].count.saturating_add(count);
                }
            }
            None => {
                w.b.duplex(gn, sw, link_bw[i], ALPHA_NVSWITCH_US, count, "nvlink")
            }
        }
    }
    if !nvs_nodes.is_empty() || shared_nvs.is_some() {
        w.assumptions.insert(
            "NVSwitch chips collapsed into one switch node per host; each GPU's link to it has the GPU's total NVLink count".into(),
        );
        if shared_nvs.is_some() {
            w.assumptions.insert(
                "sentinel NVLink target fffffff:ff:ff.0 in a multi-host file: one NVLink fabric shared by all hosts (MNNVL)".into(),
            );
        }
    }
}

/// GPU↔GPU links, with the larger count of the two ends.
fn gpu_pairs(
    w: &mut Walk,
    pair: BTreeMap<(usize, usize, &'static str), (u32, u32, usize)>,
    link_bw: &[f64],
) {
    for ((a, b, fabric), (ab, ba, line)) in pair {
        let c = ab.max(ba);
        if ab != ba {
            w.warnings.push(format!(
                "line {line}: {fabric} between rank-order GPUs {} and {} listed as {ab} one way and {ba} the other; {c} used both ways",
                w.b.g[w.gpus[a].node].id,
                w.b.g[w.gpus[b].node].id
            ));
        }
        let bw = link_bw[a].min(link_bw[b]);
        let (na, nb) = (w.gpus[a].node, w.gpus[b].node);
        w.b.duplex(na, nb, bw, ALPHA_GPU_LINK_US, c, fabric);
    }
}

#[cfg(test)]
mod tests {
    use super::super::imp;

    #[test]
    fn gpu_gpu_links_read_from_both_ends() {
        let t = r#"<system version="1"><cpu numaid="0">
<pci busid="0000:01:00.0" class="0x030200"><gpu dev="0" sm="70" rank="0"><nvlink target="0000:02:00.0" count="2" tclass="0x030200"/></gpu></pci>
<pci busid="0000:02:00.0" class="0x030200"><gpu dev="1" sm="70" rank="1"><nvlink target="0000:01:00.0" count="1" tclass="0x030200"/></gpu></pci>
</cpu></system>"#;
        let r = imp(t).unwrap();
        let t0 = &r.topology;
        let e = t0.graph.find_edge(t0.ranks[0], t0.ranks[1]).unwrap();
        assert_eq!(t0.graph[e].count, 2);
        assert_eq!(t0.graph[e].bw_gbps, 25.0);
        let e = t0.graph.find_edge(t0.ranks[1], t0.ranks[0]).unwrap();
        assert_eq!(t0.graph[e].count, 2);
        assert!(
            r.warnings.iter().any(|w| w.contains("2 one way and 1")),
            "{:?}",
            r.warnings
        );
    }

    #[test]
    fn multi_host_sentinel_shares_fabric() {
        let t = r#"<system version="1">
<cpu numaid="0" host_hash="0x1"><pci busid="0000:01:00.0" class="0x030200"><gpu dev="0" sm="100" rank="0"><nvlink target="fffffff:ff:ff.0" count="18" tclass="0x068000"/></gpu></pci></cpu>
<cpu numaid="0" host_hash="0x2"><pci busid="0000:01:00.0" class="0x030200"><gpu dev="0" sm="100" rank="0"><nvlink target="fffffff:ff:ff.0" count="18" tclass="0x068000"/></gpu></pci></cpu>
</system>"#;
        let r = imp(t).unwrap();
        assert_eq!(r.topology.num_ranks(), 2);
        assert_eq!(r.topology.num_hosts(), 2);
        // 18 NVLink 5 links + PCIe without link_speed (Gen3 ×16 = 12).
        assert_eq!(r.topology.gpu_bandwidth(0).0, 18.0 * 50.0 + 12.0);
    }
}
