//! The toolkit the three importers (`nccl_xml`, `nvidia_smi`, `rocm_smi`)
//! share: the import result (`ImportReport`, with what was read about each
//! GPU and NIC), the input `Format` and the `ImportOptions`, the graph
//! `Builder` (unique node ids, duplex links, the checks every front end
//! applies), the connectivity check, the α assumption line and GB/s
//! formatting. The importers build on this module; only the dispatcher
//! (`import`, which re-exports the public items) calls the importers.

use super::{topo_json, FrontError};
use crate::ir::{Link, Node, NodeKind, Topology};
use petgraph::graph::{DiGraph, NodeIndex};
use std::collections::HashMap;
use std::fmt;

use crate::ir::hardware::{
    GpuModel, ALPHA_GPU_LINK_US, ALPHA_NET_US, ALPHA_NVSWITCH_US, ALPHA_PCIE_US, ALPHA_SYS_US,
};

/// The input formats the importers read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// NCCL topology XML (`NCCL_TOPO_DUMP_FILE`, `NCCL_TOPO_FILE`), version 1.
    NcclXml,
    /// RCCL topology XML (version 2, `<xgmi>`).
    RcclXml,
    /// `nvidia-smi topo -m` text.
    NvidiaSmi,
    /// `rocm-smi --showtopo` text.
    RocmSmi,
    /// rscc's own topology JSON.
    Json,
}

impl Format {
    /// Whose GPUs a dump of this format describes (JSON says it itself).
    pub fn vendor(self) -> Option<crate::ir::Vendor> {
        use crate::ir::Vendor;
        match self {
            Format::NcclXml | Format::NvidiaSmi => Some(Vendor::Nvidia),
            Format::RcclXml | Format::RocmSmi => Some(Vendor::Amd),
            Format::Json => None,
        }
    }
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::NcclXml => "nccl-xml",
            Format::RcclXml => "rccl-xml",
            Format::NvidiaSmi => "nvidia-smi",
            Format::RocmSmi => "rocm-smi",
            Format::Json => "json",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Options of an import.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// Force the format instead of detecting it from the content.
    pub format: Option<Format>,
    /// GPU model for the text formats (nvidia-smi, rocm-smi), which carry no
    /// bandwidths. Also overrides the per-link bandwidth read from XML.
    pub gpu: Option<GpuModel>,
    /// NIC speed in GB/s where the input gives none.
    pub nic_gbps: Option<f64>,
}

/// One NVLink / xGMI / C2C entry of a GPU, as the input gave it.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuLinkInfo {
    /// Remote end: a busid, a GPU name (`GPU3`), `nvswitch` or `cpu`.
    pub target: String,
    pub count: u32,
    /// "gpu", "nvswitch" or "cpu".
    pub target_kind: &'static str,
    /// "nvlink", "xgmi" or "c2c".
    pub fabric: &'static str,
}

/// What was read about one GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuInfo {
    pub rank: usize,
    /// Node id in the topology.
    pub node_id: String,
    pub busid: Option<String>,
    pub host: Option<String>,
    /// Model or architecture as understood (`sm90`, `gfx942`, `h100`, …).
    pub arch: String,
    /// Per-link bandwidth used for this GPU's NVLink/xGMI links, GB/s.
    pub link_gbps: f64,
    pub links: Vec<GpuLinkInfo>,
}

impl GpuInfo {
    /// The GPUs of a text dump (nvidia-smi, rocm-smi): ranks in order,
    /// named `gpu<rank>`, one model for all, each with its links.
    pub fn of_text_dump(model: &GpuModel, links: Vec<Vec<GpuLinkInfo>>) -> Vec<GpuInfo> {
        links
            .into_iter()
            .enumerate()
            .map(|(r, links)| GpuInfo {
                rank: r,
                node_id: format!("gpu{r}"),
                busid: None,
                host: None,
                arch: model.name.into(),
                link_gbps: model.link_gbps,
                links,
            })
            .collect()
    }

    /// Total NVLink/xGMI link count (both GPU-direct and to switches).
    pub fn fabric_links(&self) -> u32 {
        self.links
            .iter()
            .filter(|l| l.fabric != "c2c")
            .map(|l| l.count)
            .sum()
    }
}

/// What was read about one NIC (one ASIC; a dual-port NIC has `ports` 2).
#[derive(Debug, Clone, PartialEq)]
pub struct NicInfo {
    pub node: NodeIndex,
    pub node_id: String,
    /// Device names (`mlx5_0`, …), one per port.
    pub names: Vec<String>,
    pub ports: usize,
    /// Total network bandwidth over its ports, GB/s per direction.
    pub gbps: f64,
    pub host: Option<String>,
}

/// The result of an import: the topology and everything that had to be
/// assumed or was suspicious.
#[derive(Debug, Clone)]
pub struct ImportReport {
    pub topology: Topology,
    pub format: Format,
    pub warnings: Vec<String>,
    pub assumptions: Vec<String>,
    /// Per rank.
    pub gpus: Vec<GpuInfo>,
    /// Per NIC node, in node order.
    pub nics: Vec<NicInfo>,
}

impl ImportReport {
    /// Rail speed for `--hosts`: the slowest NIC's speed (GB/s).
    pub fn rail_gbps(&self) -> Option<f64> {
        self.nics.iter().map(|n| n.gbps).reduce(f64::min)
    }
}

/// Graph builder shared by the importers: unique node ids, duplex links.
#[derive(Debug, Default)]
pub(crate) struct Builder {
    pub g: DiGraph<Node, Link>,
    ids: HashMap<String, NodeIndex>,
}

impl Builder {
    /// Add a node; the id gets a `#k` suffix if taken.
    pub fn node(&mut self, id: &str, kind: NodeKind, host: Option<String>) -> NodeIndex {
        let mut name = id.to_string();
        let mut k = 2;
        while self.ids.contains_key(&name) {
            name = format!("{id}#{k}");
            k += 1;
        }
        let n = self.g.add_node(Node {
            id: name.clone(),
            kind,
            rank: None,
            host,
            sms: None,
            mem_gbps: None,
        });
        self.ids.insert(name, n);
        n
    }

    /// Rename a node (keeps ids unique).
    pub fn rename(&mut self, n: NodeIndex, id: &str) {
        let old = self.g[n].id.clone();
        if old == id {
            return;
        }
        self.ids.remove(&old);
        let mut name = id.to_string();
        let mut k = 2;
        while self.ids.contains_key(&name) {
            name = format!("{id}#{k}");
            k += 1;
        }
        self.g[n].id = name.clone();
        self.ids.insert(name, n);
    }

    /// Both directions of a link.
    pub fn duplex(
        &mut self,
        a: NodeIndex,
        b: NodeIndex,
        bw_gbps: f64,
        alpha_us: f64,
        count: u32,
        kind: &str,
    ) {
        let l = Link {
            bw_gbps,
            alpha_us,
            count: count.max(1),
            kind: kind.to_string(),
        };
        self.g.add_edge(a, b, l.clone());
        self.g.add_edge(b, a, l);
    }

    /// Finish: build the Topology and run the checks every front end
    /// applies, naming the file.
    pub fn finish(
        self,
        name: String,
        description: String,
        file: &str,
    ) -> Result<Topology, FrontError> {
        let t = Topology::new(name, description, self.g);
        topo_json::validate(&t).map_err(|m| FrontError::new(file, m))?;
        Ok(t)
    }
}

/// Ranks (indices into `gpus`) that cannot reach GPU 0 through any link,
/// treating links as undirected. Used to refuse disconnected inputs with a
/// message naming the element.
pub(crate) fn unreachable_from_first(g: &DiGraph<Node, Link>, gpus: &[NodeIndex]) -> Vec<usize> {
    let Some(&first) = gpus.first() else {
        return Vec::new();
    };
    let mut seen = vec![false; g.node_count()];
    let mut stack = vec![first];
    seen[first.index()] = true;
    while let Some(u) = stack.pop() {
        for v in g.neighbors_undirected(u) {
            if !seen[v.index()] {
                seen[v.index()] = true;
                stack.push(v);
            }
        }
    }
    gpus.iter()
        .enumerate()
        .filter(|(_, n)| !seen[n.index()])
        .map(|(i, _)| i)
        .collect()
}

/// The α defaults every import applies, as an assumption line.
pub fn alpha_assumption() -> String {
    format!(
        "latencies (α, µs; topologies.md §3 defaults, the input gives none): GPU↔GPU NVLink/xGMI {ALPHA_GPU_LINK_US}, GPU↔NVSwitch {ALPHA_NVSWITCH_US} per hop, PCIe {ALPHA_PCIE_US} per hop, CPU↔CPU {ALPHA_SYS_US}, NIC↔network switch {ALPHA_NET_US}"
    )
}

/// Format a GB/s figure without noise (`25`, `12.5`, `0.1875`).
pub fn gbps(x: f64) -> String {
    let s = format!("{x:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gbps_formatting() {
        assert_eq!(gbps(25.0), "25");
        assert_eq!(gbps(12.5), "12.5");
        assert_eq!(gbps(0.1875), "0.1875");
    }
}
