//! NCCL topology XML (`NCCL_TOPO_DUMP_FILE` / `NCCL_TOPO_FILE`, version 1)
//! and RCCL's version-2 dialect with `<xgmi>` → Topology.
//!
//! Read leniently, as NCCL's own parser does (topologies.md §4.2): comments,
//! a leading blank line, a stray `<?xml …?>` prolog, tabs, single or double
//! quotes, unknown elements and attributes. What cannot mean a topology (no
//! GPUs, GPUs that cannot reach each other, broken markup) is refused with
//! the file, line and element. See docs/topology-import.md.
//!
//! The parts, in the order an import runs them: `xml` parses the text into
//! elements; `pcie` walks the `<cpu>` / `<pci>` tree into CPU, PCIe switch,
//! GPU and NIC nodes; `gpus` orders the GPUs into ranks and reads their
//! models; `fabric` adds the NVLink / xGMI / C2C links; `network` reports
//! the NICs and joins the hosts of a multi-host file. This file holds the
//! state they share (`Walk`) and `import`, which runs them.

mod fabric;
mod gpus;
mod network;
mod pcie;
mod xml;

pub use pcie::pcie_gbps;
pub use xml::{declared_version, parse_xml, Element};

use super::builder::{
    unreachable_from_first, Builder, Format, GpuInfo, ImportOptions, ImportReport,
};
use super::FrontError;
use petgraph::graph::NodeIndex;
use std::collections::{BTreeSet, HashMap};

/// The NVLink target NCCL writes when the remote end is not visible.
pub const SENTINEL_BUSID: &str = "fffffff:ff:ff.0";

/// Normalise a busid for lookups: lower case, trimmed, domain without
/// leading zeros beyond 4 digits kept as written.
fn norm_busid(s: &str) -> String {
    s.trim().to_ascii_lowercase()
}

fn is_sentinel(busid: &str) -> bool {
    let b = norm_busid(busid);
    b == SENTINEL_BUSID || b == "ffffffff:ff:ff.0"
}

/// Parse an integer attribute (decimal or 0x-hex).
fn int_attr(s: &str) -> Option<i64> {
    let t = s.trim();
    if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        i64::from_str_radix(h, 16).ok()
    } else {
        t.parse().ok()
    }
}

#[derive(Debug)]
struct GpuRec {
    node: NodeIndex,
    busid: Option<String>,
    host: usize,
    cpu: NodeIndex,
    rank: Option<i64>,
    dev: Option<i64>,
    sm: Option<u32>,
    gcn: Option<String>,
    /// (element, fabric) of each nvlink / xgmi / c2c child.
    links: Vec<(Element, &'static str)>,
    line: usize,
    /// From a `<gpu>` element (false: skeleton `pci` with a GPU class).
    has_gpu_el: bool,
}

#[derive(Debug)]
struct NetRec {
    name: String,
    mbps: f64,
}

struct Walk {
    b: Builder,
    warnings: Vec<String>,
    assumptions: BTreeSet<String>,
    gpus: Vec<GpuRec>,
    /// NIC node → ports.
    nics: Vec<(NodeIndex, Vec<NetRec>, usize)>,
    /// (host, busid) → NVSwitch pci elements (class 0x068000).
    nvswitch_busids: BTreeSet<(usize, String)>,
    /// (host, busid) → PCI switch node (repeated busids merge).
    pci_nodes: HashMap<(usize, String), NodeIndex>,
    host_names: Vec<Option<String>>,
    ignored: BTreeSet<String>,
    virtual_switches: usize,
    unknown_nic_speed: usize,
}

impl Walk {
    fn host(&self, h: usize) -> Option<String> {
        self.host_names[h].clone()
    }
    fn prefix(&self, h: usize) -> String {
        match &self.host_names[h] {
            Some(n) => format!("{n}/"),
            None => String::new(),
        }
    }
}

/// Import NCCL / RCCL topology XML text.
pub fn import(
    text: &str,
    file: &str,
    format: Format,
    opts: &ImportOptions,
) -> Result<ImportReport, FrontError> {
    let (root, lex_warnings) = parse_xml(text, file)?;
    let ferr = |m: String| FrontError::new(file, m);
    let mut warnings = lex_warnings;
    let format = dialect(&root, file, format, &mut warnings)?;

    // Hosts: distinct host_hash values of the <cpu> elements.
    let mut hash_order: Vec<String> = Vec::new();
    for c in root.children.iter().filter(|c| c.name == "cpu") {
        let h = c
            .attr("host_hash")
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if !hash_order.contains(&h) {
            hash_order.push(h);
        }
    }
    let multi = hash_order.len() > 1;
    let host_names: Vec<Option<String>> = (0..hash_order.len().max(1))
        .map(|i| if multi { Some(format!("h{i}")) } else { None })
        .collect();

    let mut w = Walk {
        b: Builder::default(),
        warnings,
        assumptions: BTreeSet::new(),
        gpus: Vec::new(),
        nics: Vec::new(),
        nvswitch_busids: BTreeSet::new(),
        pci_nodes: HashMap::new(),
        host_names,
        ignored: BTreeSet::new(),
        virtual_switches: 0,
        unknown_nic_speed: 0,
    };

    pcie::cpus(&mut w, &root, &hash_order, file)?;
    gpus::require_gpus(&w, &root, file)?;
    let keep = gpus::ranks(&mut w, multi, file)?;
    let (link_bw, arch) = gpus::model_facts(&mut w, &keep, opts);
    gpus::name_by_rank(&mut w, &keep, opts);
    let mut infos = fabric::fabric(&mut w, &keep, &link_bw, multi);
    let nics = network::nics(&mut w, opts, multi, hash_order.len());
    if w.virtual_switches > 0 {
        w.assumptions.insert(format!(
            "{} virtual PCIe switch(es) (busid ffff:ff:…, VM images) modelled as real switches",
            w.virtual_switches
        ));
    }
    w.assumptions.insert(super::builder::alpha_assumption());
    for ig in &w.ignored {
        w.warnings.push(format!("ignored: {ig}"));
    }

    // Refuse GPUs that cannot reach each other, naming the element.
    let gpu_nodes: Vec<NodeIndex> = keep.iter().map(|&i| w.gpus[i].node).collect();
    let unreachable = unreachable_from_first(&w.b.g, &gpu_nodes);
    if let Some(&r) = unreachable.first() {
        let g = &w.gpus[keep[r]];
        return Err(ferr(format!(
            "line {}: GPU rank {r} ({}) cannot reach rank 0 through any link in the file; \
             {} of {} GPUs are cut off (not a usable topology)",
            g.line,
            g.busid.clone().unwrap_or_default(),
            unreachable.len(),
            keep.len()
        )));
    }

    let gpus: Vec<GpuInfo> = keep
        .iter()
        .enumerate()
        .map(|(r, &i)| GpuInfo {
            rank: r,
            node_id: w.b.g[w.gpus[i].node].id.clone(),
            busid: w.gpus[i].busid.clone(),
            host: w.host(w.gpus[i].host),
            arch: arch[i].clone(),
            link_gbps: link_bw[i],
            links: infos.remove(&i).unwrap_or_default(),
        })
        .collect();
    let name = std::path::Path::new(file)
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_else(|| "imported".into());
    let description = format!(
        "Imported from {} ({}): {} GPUs, {} NICs{}.",
        file,
        format,
        gpus.len(),
        nics.len(),
        if multi {
            format!(", {} hosts", hash_order.len())
        } else {
            String::new()
        }
    );
    let mut topology = w.b.finish(name, description, file)?;
    topology.vendor = format.vendor();
    Ok(ImportReport {
        topology,
        format,
        warnings: w.warnings,
        assumptions: w.assumptions.into_iter().collect(),
        gpus,
        nics,
    })
}

/// The root must be `<system>`; its version decides the dialect read.
fn dialect(
    root: &Element,
    file: &str,
    format: Format,
    warnings: &mut Vec<String>,
) -> Result<Format, FrontError> {
    let ferr = |m: String| FrontError::new(file, m);
    if root.name == "graphs" {
        return Err(ferr(format!(
            "line {}: <graphs> is an NCCL graph file (NCCL_GRAPH_FILE: channels and rings), not a topology; \
             give the matching NCCL_TOPO_DUMP_FILE output instead",
            root.line
        )));
    }
    if root.name != "system" {
        return Err(ferr(format!(
            "line {}: root element is <{}>, expected <system> (NCCL/RCCL topology XML)",
            root.line, root.name
        )));
    }
    let version = root.attr("version").and_then(int_attr);
    Ok(match (version, format) {
        (Some(2), _) => Format::RcclXml,
        (Some(1), Format::RcclXml) => {
            warnings.push(format!(
                "line {}: <system version=\"1\"> is NCCL's dialect; read as NCCL XML",
                root.line
            ));
            Format::NcclXml
        }
        (Some(1), f) => f,
        (v, f) => {
            warnings.push(format!(
                "line {}: <system> version {} unknown (1 = NCCL, 2 = RCCL); read anyway",
                root.line,
                v.map(|v| v.to_string()).unwrap_or_else(|| "missing".into())
            ));
            f
        }
    })
}

/// The import of a test file with the default options, for the unit tests.
#[cfg(test)]
fn imp(text: &str) -> Result<ImportReport, FrontError> {
    import(text, "t.xml", Format::NcclXml, &ImportOptions::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_no_gpus_and_graph_files() {
        let e = imp(
            "<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:00:16.0\"/></cpu></system>",
        )
        .unwrap_err();
        assert!(
            e.msg.contains("no GPUs") && e.msg.contains("without class"),
            "{e}"
        );
        let e = imp("<graphs version=\"1\"><graph/></graphs>").unwrap_err();
        assert!(e.msg.contains("graph file"), "{e}");
    }

    #[test]
    fn refuses_cut_off_gpus_in_multi_host_without_nics() {
        let t = r#"<system version="1">
<cpu numaid="0" host_hash="0x1"><pci busid="0000:01:00.0" class="0x030200"><gpu dev="0" sm="90" rank="0"/></pci></cpu>
<cpu numaid="0" host_hash="0x2"><pci busid="0000:01:00.0" class="0x030200"><gpu dev="0" sm="90" rank="1"/></pci></cpu>
</system>"#;
        let e = imp(t).unwrap_err();
        assert!(
            e.msg.contains("line 3") && e.msg.contains("cannot reach"),
            "{e}"
        );
    }
}
