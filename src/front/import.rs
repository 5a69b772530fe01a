//! Importing real machines: the entry point of the NCCL/RCCL topology XML,
//! `nvidia-smi topo -m` and `rocm-smi --showtopo` readers. Detects the
//! format, hands the text to its reader, builds the report of an rscc JSON
//! topology, and joins copies of an imported host ([`replicate`]). The
//! import result ([`ImportReport`]) and the graph builder the three readers
//! share live in `front/builder.rs`; the public items are re-exported here.
//! See docs/topology-import.md.

pub use super::builder::{
    alpha_assumption, gbps, Format, GpuInfo, GpuLinkInfo, ImportOptions, ImportReport, NicInfo,
};
use super::{hosts, nccl_xml, nvidia_smi, rocm_smi, topo_json, FrontError};
use crate::ir::hardware::ALPHA_NET_US;
use crate::ir::{NodeKind, Topology};
use petgraph::graph::NodeIndex;
use std::collections::HashMap;
use std::path::Path;

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
            let mut report = report_from_topology(topology, Format::Json);
            // A NIC with no network link has no speed of its own: the
            // one given for the dump's NICs stands in.
            if let Some(g) = opts.nic_gbps {
                for nic in report.nics.iter_mut().filter(|n| n.gbps <= 0.0) {
                    nic.gbps = g;
                    report.assumptions.push(format!(
                        "{}: no network link, so its speed is --nic-gbps {g} GB/s",
                        nic.node_id
                    ));
                }
            }
            Ok(report)
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
    if let Some(nic) = report
        .nics
        .iter()
        .find(|n| n.gbps.is_nan() || n.gbps <= 0.0)
    {
        return Err(FrontError::new(
            file,
            format!(
                "--hosts {hosts}: NIC {} has no network link, so its speed is unknown \
                 (give it with --nic-gbps)",
                nic.node_id
            ),
        ));
    }
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
}
