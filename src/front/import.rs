//! Importing real machines: the shared part of the NCCL/RCCL topology XML,
//! `nvidia-smi topo -m` and `rocm-smi --showtopo` readers. Holds the import
//! result ([`ImportReport`]), the per-generation link facts
//! (topologies.md §1, §3), format detection and the graph builder the
//! three readers share. See docs/topology-import.md.

use super::{hosts, nccl_xml, nvidia_smi, rocm_smi, topo_json, FrontError};
use crate::ir::{Link, Node, NodeKind, Topology};
use petgraph::graph::{DiGraph, NodeIndex};
use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use crate::ir::hardware::GpuModel;
use crate::ir::hardware::{
    ALPHA_GPU_LINK_US, ALPHA_NET_US, ALPHA_NVSWITCH_US, ALPHA_PCIE_US, ALPHA_SYS_US,
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

/// Guess the format from the content.
pub fn detect(text: &str) -> Option<Format> {
    let t = text.trim_start_matches('\u{feff}');
    let trimmed = t.trim_start();
    if trimmed.starts_with('{') {
        return Some(Format::Json);
    }
    if trimmed.starts_with('<') {
        return Some(
            if nccl_xml::declared_version(t) == Some(2) || t.contains("<xgmi") {
                Format::RcclXml
            } else {
                Format::NcclXml
            },
        );
    }
    if t.contains("ROCm System Management Interface")
        || t.contains("between two GPUs")
        || t.contains("(Topology) Numa Node")
    {
        return Some(Format::RocmSmi);
    }
    for line in t.lines() {
        let toks: Vec<&str> = line.split_whitespace().collect();
        if toks.len() >= 2 && toks[0].starts_with("GPU0") && toks[1].starts_with("GPU1") {
            return Some(Format::NvidiaSmi);
        }
        if toks.len() >= 2 && toks[0] == "GPU0" && toks[1] == "X" {
            return Some(Format::NvidiaSmi);
        }
    }
    None
}

/// Import text of any supported format. `file` names the source in
/// messages.
pub fn import_text(
    text: &str,
    file: &str,
    opts: &ImportOptions,
) -> Result<ImportReport, FrontError> {
    let text = text.trim_start_matches('\u{feff}');
    let format = match opts.format {
        Some(f) => f,
        None => detect(text).ok_or_else(|| {
            FrontError::new(
                file,
                "unrecognised topology format: expected rscc topology JSON, NCCL/RCCL topology XML, \
                 `nvidia-smi topo -m` or `rocm-smi --showtopo` output (use --format to force one)",
            )
        })?,
    };
    match format {
        Format::NcclXml | Format::RcclXml => nccl_xml::import(text, file, format, opts),
        Format::NvidiaSmi => nvidia_smi::import(text, file, opts),
        Format::RocmSmi => rocm_smi::import(text, file, opts),
        Format::Json => {
            let topology = topo_json::parse(text, file)?;
            Ok(report_from_topology(topology, Format::Json))
        }
    }
}

/// Import a file (see [`import_text`]).
pub fn import_file(path: &Path, opts: &ImportOptions) -> Result<ImportReport, FrontError> {
    let text = super::read_text(path)?;
    import_text(&text, &path.display().to_string(), opts)
}

/// A report for an already-built topology (rscc JSON): GPU and NIC facts
/// are read back from the graph.
pub fn report_from_topology(topology: Topology, format: Format) -> ImportReport {
    use petgraph::visit::EdgeRef;
    let g = &topology.graph;
    let mut gpus = Vec::new();
    for (r, &n) in topology.ranks.iter().enumerate() {
        let mut links = Vec::new();
        let mut link_gbps = 0.0f64;
        for e in g.edges_directed(n, petgraph::Direction::Outgoing) {
            let w = e.weight();
            let t = &g[e.target()];
            let fabric = match w.kind.as_str() {
                "nvlink" | "nvswitch" => "nvlink",
                "xgmi" => "xgmi",
                _ => continue,
            };
            let target_kind = match t.kind {
                NodeKind::Gpu => "gpu",
                NodeKind::Switch => "nvswitch",
                _ => "cpu",
            };
            link_gbps = link_gbps.max(w.bw_gbps);
            links.push(GpuLinkInfo {
                target: t.id.clone(),
                count: w.count,
                target_kind,
                fabric,
            });
        }
        gpus.push(GpuInfo {
            rank: r,
            node_id: g[n].id.clone(),
            busid: None,
            host: g[n].host.clone(),
            arch: String::new(),
            link_gbps,
            links,
        });
    }
    let mut nics = Vec::new();
    for n in g.node_indices() {
        if g[n].kind != NodeKind::Nic {
            continue;
        }
        // Speed: the widest link towards a switch that is not PCIe.
        let gbps = g
            .edges_directed(n, petgraph::Direction::Outgoing)
            .filter(|e| e.weight().kind != "pcie")
            .map(|e| e.weight().capacity_gbps())
            .fold(0.0, f64::max);
        nics.push(NicInfo {
            node: n,
            node_id: g[n].id.clone(),
            names: vec![g[n].id.clone()],
            ports: 1,
            gbps,
            host: g[n].host.clone(),
        });
    }
    ImportReport {
        topology,
        format,
        warnings: Vec::new(),
        assumptions: Vec::new(),
        gpus,
        nics,
    }
}

/// `hosts` copies of an imported single-host topology joined
/// rail-optimised (NIC k of every host on rail switch k) at the slowest
/// NIC's speed from the dump.
pub fn replicate(
    report: &ImportReport,
    hosts: usize,
    file: &str,
) -> Result<ImportReport, FrontError> {
    if hosts == 1 {
        return Ok(report.clone());
    }
    let nic_gbps = report.rail_gbps().ok_or_else(|| {
        FrontError::new(
            file,
            format!(
                "--hosts {hosts}: the imported topology has no NIC, so hosts cannot be joined \
                 (the input lists no network device)"
            ),
        )
    })?;
    let mut assumptions = report.assumptions.clone();
    let mut warnings = report.warnings.clone();
    let speeds: Vec<f64> = report.nics.iter().map(|n| n.gbps).collect();
    if speeds.iter().any(|&s| (s - nic_gbps).abs() > 1e-9) {
        warnings.push(format!(
            "NIC speeds differ ({}); every rail link uses the slowest, {nic_gbps} GB/s",
            speeds
                .iter()
                .map(|s| format!("{s}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    assumptions.push(format!(
        "{hosts} hosts joined rail-optimised: NIC k of every host on switch rail{{k}} ({} rails, {nic_gbps} GB/s, α {ALPHA_NET_US} µs per NIC↔switch link)",
        report.nics.len()
    ));
    let topology = hosts::replicate_hosts(
        &report.topology,
        hosts,
        hosts::RailParams {
            nic_gbps,
            alpha_us: ALPHA_NET_US,
        },
    )
    .map_err(|m| FrontError::new(file, m))?;
    // Per-host copies of the GPU / NIC facts.
    let n = report.gpus.len();
    let mut gpus = Vec::with_capacity(n * hosts);
    for h in 0..hosts {
        for gi in &report.gpus {
            let mut c = gi.clone();
            c.rank = h * n + gi.rank;
            c.node_id = format!("h{h}/{}", gi.node_id);
            c.host = Some(format!("h{h}"));
            gpus.push(c);
        }
    }
    let mut nics = Vec::new();
    let g = &topology.graph;
    let mut by_id: HashMap<&str, NodeIndex> = HashMap::new();
    for v in g.node_indices() {
        if g[v].kind == NodeKind::Nic {
            by_id.insert(g[v].id.as_str(), v);
        }
    }
    for h in 0..hosts {
        for ni in &report.nics {
            let id = format!("h{h}/{}", ni.node_id);
            if let Some(&node) = by_id.get(id.as_str()) {
                let mut c = ni.clone();
                c.node = node;
                c.node_id = id;
                c.host = Some(format!("h{h}"));
                nics.push(c);
            }
        }
    }
    Ok(ImportReport {
        topology,
        format: report.format,
        warnings,
        assumptions,
        gpus,
        nics,
    })
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
    fn detects_formats() {
        assert_eq!(detect("{\"name\":1}"), Some(Format::Json));
        assert_eq!(detect("\n<system version=\"1\">"), Some(Format::NcclXml));
        assert_eq!(
            detect("<!-- c -->\n<system version=\"2\">"),
            Some(Format::RcclXml)
        );
        assert_eq!(
            detect("\tGPU0\tGPU1\nGPU0\t X \tNV1\n"),
            Some(Format::NvidiaSmi)
        );
        assert_eq!(
            detect("=== Weight between two GPUs ===\n  GPU0 GPU1\n"),
            Some(Format::RocmSmi)
        );
        assert_eq!(detect("hello"), None);
    }

    #[test]
    fn bom_and_crlf_are_tolerated() {
        let t = "\u{feff}\tGPU0\tGPU1\r\nGPU0\t X \tNV4\t0-3\r\nGPU1\tNV4\t X \t0-3\r\n";
        let r = import_text(t, "crlf.txt", &ImportOptions::default()).unwrap();
        assert_eq!(r.format, Format::NvidiaSmi);
        assert_eq!(r.gpus[0].fabric_links(), 4);
    }

    #[test]
    fn gbps_formatting() {
        assert_eq!(gbps(25.0), "25");
        assert_eq!(gbps(12.5), "12.5");
        assert_eq!(gbps(0.1875), "0.1875");
    }
}
