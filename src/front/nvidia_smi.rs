//! `nvidia-smi topo -m` → Topology (topologies.md §5).
//!
//! The matrix gives NVLink counts (`NV#`) and PCIe distances (`PIX`, `PXB`,
//! `PHB`, `NODE`, `SYS`) but no bandwidths, switch structure or NIC speeds:
//! those come from the GPU model (`--gpu`, or inferred from the NV# counts)
//! and are listed in the report's assumptions. Tab- or space-separated;
//! NIC columns either `NICj` (with a "NIC Legend") or `mlx5_*` names.

// Matrix code: index loops read more clearly than iterator chains here.
#![allow(clippy::needless_range_loop)]

use super::builder::{
    gbps, Builder, Format, GpuInfo, GpuLinkInfo, ImportOptions, ImportReport, NicInfo,
};
use super::FrontError;
use crate::ir::hardware::{
    gpu_model, GpuModel, ALPHA_GPU_LINK_US, ALPHA_NVSWITCH_US, ALPHA_PCIE_US, ALPHA_SYS_US,
    GPU_MODELS, SYS_UNKNOWN_GBPS,
};
use crate::ir::NodeKind;
use petgraph::graph::NodeIndex;
use std::collections::{BTreeMap, HashMap};

/// One cell of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cell {
    SelfCell,
    Nv(u32),
    Pix,
    Pxb,
    Phb,
    Node,
    Sys,
}

fn cell(tok: &str) -> Option<Cell> {
    let t = tok.trim();
    Some(match t {
        "X" => Cell::SelfCell,
        "PIX" => Cell::Pix,
        "PXB" => Cell::Pxb,
        "PHB" => Cell::Phb,
        "NODE" => Cell::Node,
        "SYS" | "SOC" => Cell::Sys,
        _ => {
            let n = t.strip_prefix("NV")?.parse::<u32>().ok()?;
            // More than 1024 bonded links is not a real machine.
            if n > 1024 {
                return None;
            }
            Cell::Nv(n)
        }
    })
}

/// The parsed matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    /// Device names in column order (`GPU0`…, then NICs as named in the
    /// header, legend applied: `mlx5_0`).
    pub devices: Vec<String>,
    pub num_gpus: usize,
    /// `cells[i][j]` for devices i, j.
    pub cells: Vec<Vec<Cell>>,
    /// NUMA key of each GPU (NUMA Affinity, else CPU Affinity text).
    pub gpu_numa: Vec<String>,
}

/// Parse the text of `nvidia-smi topo -m`.
pub fn parse(text: &str, file: &str) -> Result<Matrix, FrontError> {
    let err = |line: usize, m: String| FrontError::at_line(file, line, m);
    let lines: Vec<&str> = text.lines().collect();
    // Header: first line whose first token is GPU0.
    let (hidx, header) = lines
        .iter()
        .enumerate()
        .find(|(_, l)| {
            l.split_whitespace().next() == Some("GPU0")
                && l.split_whitespace()
                    .nth(1)
                    .is_none_or(|t| cell(t).is_none())
        })
        .ok_or_else(|| {
            FrontError::new(
                file,
                "no matrix header (a line starting with GPU0 GPU1 …) found",
            )
        })?;
    let toks: Vec<&str> = header.split_whitespace().collect();
    let mut cols: Vec<String> = Vec::new();
    for t in toks {
        if t == "CPU" || t == "NUMA" || t == "GPU" {
            break;
        }
        cols.push(t.to_string());
    }
    let num_gpus = cols.iter().take_while(|c| is_gpu_name(c)).count();
    if num_gpus == 0 {
        return Err(err(hidx + 1, "header names no GPU columns".into()));
    }
    for (k, c) in cols.iter().enumerate().take(num_gpus) {
        if *c != format!("GPU{k}") {
            return Err(err(
                hidx + 1,
                format!("column {} is \"{c}\", expected GPU{k}", k + 1),
            ));
        }
    }
    let has_numa_col = header.contains("NUMA Affinity");
    let n = cols.len();
    let mut cells = vec![vec![Cell::SelfCell; n]; n];
    let mut seen = vec![false; n];
    let mut gpu_numa = vec![String::new(); num_gpus];
    for (li, l) in lines.iter().enumerate().skip(hidx + 1) {
        let t: Vec<&str> = l.split_whitespace().collect();
        let Some(first) = t.first() else { continue };
        let Some(row) = cols.iter().position(|c| c == first) else {
            continue;
        };
        if t.len() < n + 1 {
            return Err(err(
                li + 1,
                format!(
                    "row {first} has {} cells, the header has {n} device columns",
                    t.len() - 1
                ),
            ));
        }
        for j in 0..n {
            cells[row][j] = cell(t[j + 1]).ok_or_else(|| {
                err(li + 1, format!("row {first}, column {}: \"{}\" is not a topology cell (X, NV#, PIX, PXB, PHB, NODE, SYS)", cols[j], t[j + 1]))
            })?;
        }
        if row < num_gpus {
            let rest = &t[n + 1..];
            // CPU affinity, then NUMA affinity (if the column exists).
            gpu_numa[row] = if has_numa_col && rest.len() >= 2 {
                rest[1].to_string()
            } else {
                rest.first().map(|s| s.to_string()).unwrap_or_default()
            };
        }
        seen[row] = true;
    }
    for k in 0..num_gpus {
        if !seen[k] {
            return Err(FrontError::new(file, format!("no matrix row for GPU{k}")));
        }
    }
    // NIC legend.
    let mut legend: HashMap<String, String> = HashMap::new();
    for l in &lines {
        let t = l.trim();
        if let Some((a, b)) = t.split_once(':') {
            let a = a.trim();
            if a.starts_with("NIC")
                && a[3..].chars().all(|c| c.is_ascii_digit())
                && !a[3..].is_empty()
            {
                legend.insert(a.to_string(), b.trim().to_string());
            }
        }
    }
    let devices = cols
        .iter()
        .map(|c| legend.get(c).cloned().unwrap_or_else(|| c.clone()))
        .collect();
    // NIC rows missing: fill from the GPU rows (the matrix is symmetric).
    for i in num_gpus..n {
        if !seen[i] {
            for j in 0..num_gpus {
                cells[i][j] = cells[j][i];
            }
        }
    }
    Ok(Matrix {
        devices,
        num_gpus,
        cells,
        gpu_numa,
    })
}

fn is_gpu_name(c: &str) -> bool {
    c.strip_prefix("GPU")
        .is_some_and(|d| !d.is_empty() && d.chars().all(|x| x.is_ascii_digit()))
}

/// Infer the GPU model from the NV# counts (§5): NV18 → H100-class,
/// NV12 → A100, NV6 everywhere / NV1–NV2 → V100, none → A100 PCIe-class.
fn infer_model(m: &Matrix) -> (GpuModel, String) {
    let g = m.num_gpus;
    let max_nv = (0..g)
        .flat_map(|i| (0..g).map(move |j| (i, j)))
        .filter_map(|(i, j)| match m.cells[i][j] {
            Cell::Nv(k) => Some(k),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let (name, why) = match max_nv {
        k if k >= 13 => ("h100", format!("NV{k} seen: H100-class (NVLink 4, 25 GB/s per link) assumed; for B200 pass --gpu b200")),
        k if k >= 7 => ("a100", format!("NV{k} seen: A100-class (NVLink 3) assumed")),
        k if k >= 1 => ("v100", format!("NV{k} seen: V100-class (NVLink 2) assumed")),
        _ => ("a100", "no NVLink in the matrix: A100-class PCIe/NIC figures assumed".into()),
    };
    (gpu_model(name).unwrap_or(GPU_MODELS[0]), why)
}

/// Import `nvidia-smi topo -m` text.
/// Import `nvidia-smi topo -m` text.
pub fn import(text: &str, file: &str, opts: &ImportOptions) -> Result<ImportReport, FrontError> {
    let m = parse(text, file)?;
    let g = m.num_gpus;
    let mut warnings = Vec::new();
    let mut assumptions = Vec::new();
    let model = choose_model(&m, opts, &mut assumptions);
    symmetry(&m, &mut warnings);
    let mut b = Builder::default();
    let gpus = gpu_nodes(&mut b, g, model);
    let infos = nvlinks(&mut b, &m, model, &gpus, &mut warnings, &mut assumptions);

    // PCIe: CPUs by NUMA key; switches as groups of devices at PIX/PXB.
    let n = m.devices.len();
    let numa_of = numa_of(&m);
    let (cpu_nodes, cpu_list) = cpus(&mut b, &numa_of, &mut assumptions);
    let groups = pcie_groups(&m);
    let nic_gbps = opts.nic_gbps.unwrap_or(model.nic_gbps);
    let (dev_nodes, nics) = nic_nodes(&mut b, &m, &gpus, nic_gbps);
    let pcie = Pcie {
        groups: &groups,
        numa_of: &numa_of,
        cpu_nodes: &cpu_nodes,
        cpu_list: &cpu_list,
        dev_nodes: &dev_nodes,
    };
    let nswitch = pcie_links(&mut b, &pcie, model);
    assumptions.push(format!(
        "PCIe: devices at PIX/PXB share one switch per group ({nswitch} switches), others attach to their NUMA node's CPU; every PCIe link {} GB/s",
        gbps(model.pcie_gbps)
    ));
    if n > g {
        assumptions.push(format!(
            "NIC speed {} GB/s ({}); the matrix gives none",
            gbps(nic_gbps),
            if opts.nic_gbps.is_some() {
                "--nic-gbps".to_string()
            } else {
                format!("typical for {} systems; pass --nic-gbps", model.name)
            }
        ));
    } else {
        warnings
            .push("the matrix lists no NICs: --hosts cannot join copies of this machine".into());
    }
    let name = std::path::Path::new(file)
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_else(|| "imported".into());
    let description = format!(
        "Imported from {file} (nvidia-smi topo -m): {g} {} GPUs, {} NICs.",
        model.name,
        n - g
    );
    assumptions.push(super::builder::alpha_assumption());
    let mut topology = b.finish(name, description, file)?;
    topology.vendor = Format::NvidiaSmi.vendor();
    let gpu_infos = GpuInfo::of_text_dump(&model, infos);
    Ok(ImportReport {
        topology,
        format: Format::NvidiaSmi,
        warnings,
        assumptions,
        gpus: gpu_infos,
        nics,
    })
}

/// The GPU model (`--gpu`, or inferred), with its assumption.
fn choose_model(m: &Matrix, opts: &ImportOptions, assumptions: &mut Vec<String>) -> GpuModel {
    let (model, why) = match opts.gpu {
        Some(md) => (md, format!("--gpu {}", md.name)),
        None => infer_model(m),
    };
    assumptions.push(format!(
    "GPU model {}: {why}; NVLink {} GB/s per link per direction (hardware figure, topologies.md §1), PCIe {} GB/s, {} SMs",
    model.name,
    gbps(model.link_gbps),
    gbps(model.pcie_gbps),
    model.sms
));
    model
}

/// Symmetry check of NV counts: a warning per asymmetric pair.
fn symmetry(m: &Matrix, warnings: &mut Vec<String>) {
    let g = m.num_gpus;
    for i in 0..g {
        for j in 0..g {
            if i != j && m.cells[i][j] != m.cells[j][i] {
                warnings.push(format!(
                "matrix is not symmetric: GPU{i}→GPU{j} {:?} vs GPU{j}→GPU{i} {:?}; the larger NVLink count is used",
                m.cells[i][j], m.cells[j][i]
            ));
            }
        }
    }
}

/// NVLinks between GPUs i and j: the larger of the two cells' NV# counts.
fn nv(m: &Matrix, i: usize, j: usize) -> u32 {
    let a = match m.cells[i][j] {
        Cell::Nv(k) => k,
        _ => 0,
    };
    let b = match m.cells[j][i] {
        Cell::Nv(k) => k,
        _ => 0,
    };
    a.max(b)
}

/// One node per GPU, ranked in matrix order.
fn gpu_nodes(b: &mut Builder, g: usize, model: GpuModel) -> Vec<NodeIndex> {
    (0..g)
        .map(|r| {
            let n = b.node(&format!("gpu{r}"), NodeKind::Gpu, None);
            b.g[n].rank = Some(r);
            b.g[n].sms = Some(model.sms);
            b.g[n].mem_gbps = Some(model.mem_gbps);
            n
        })
        .collect()
}

/// The NVLinks: to one NVSwitch node, or GPU to GPU; per GPU its links.
fn nvlinks(
    b: &mut Builder,
    m: &Matrix,
    model: GpuModel,
    gpus: &[NodeIndex],
    warnings: &mut Vec<String>,
    assumptions: &mut Vec<String>,
) -> Vec<Vec<GpuLinkInfo>> {
    let g = m.num_gpus;
    let nv = |i: usize, j: usize| nv(m, i, j);
    let row_sum: Vec<u32> = (0..g)
        .map(|i| (0..g).filter(|&j| j != i).map(|j| nv(i, j)).sum())
        .collect();
    // NVSwitch: every pair NV-connected and some row sum exceeds what one
    // GPU physically has: the counts are per-GPU switch links.
    let all_pairs_nv = g > 1 && (0..g).all(|i| (0..g).all(|j| i == j || nv(i, j) > 0));
    let switched = all_pairs_nv && row_sum.iter().any(|&s| s > model.links_per_gpu);
    let mut infos: Vec<Vec<GpuLinkInfo>> = vec![Vec::new(); g];
    if switched {
        let sw = b.node("nvswitch", NodeKind::Switch, None);
        for i in 0..g {
            let k = (0..g)
                .filter(|&j| j != i)
                .map(|j| nv(i, j))
                .max()
                .unwrap_or(0);
            b.duplex(gpus[i], sw, model.link_gbps, ALPHA_NVSWITCH_US, k, "nvlink");
            infos[i].push(GpuLinkInfo {
                target: "nvswitch".into(),
                count: k,
                target_kind: "nvswitch",
                fabric: "nvlink",
            });
        }
        assumptions.push(format!(
            "every GPU pair shows NV# and a GPU's row adds up to more than {} links: NVSwitch system; one switch node, each GPU linked to it with its NV# count",
            model.links_per_gpu
        ));
    } else {
        for i in 0..g {
            for j in 0..g {
                let k = nv(i, j);
                if i != j && k > 0 {
                    if i < j {
                        b.duplex(
                            gpus[i],
                            gpus[j],
                            model.link_gbps,
                            ALPHA_GPU_LINK_US,
                            k,
                            "nvlink",
                        );
                    }
                    infos[i].push(GpuLinkInfo {
                        target: format!("GPU{j}"),
                        count: k,
                        target_kind: "gpu",
                        fabric: "nvlink",
                    });
                }
            }
        }
        for (i, &s) in row_sum.iter().enumerate() {
            if s > model.links_per_gpu {
                warnings.push(format!(
                    "GPU{i} has {s} NVLinks in the matrix, more than the {} of a {}",
                    model.links_per_gpu, model.name
                ));
            }
        }
    }
    infos
}

/// A NUMA key per device: a GPU's own; a NIC's that of the nearest GPU
/// that is not SYS.
fn numa_of(m: &Matrix) -> Vec<String> {
    let (g, n) = (m.num_gpus, m.devices.len());
    let mut numa_of: Vec<String> = Vec::with_capacity(n);
    for i in 0..n {
        if i < g {
            numa_of.push(m.gpu_numa[i].clone());
        } else {
            // A NIC's NUMA: that of the nearest GPU that is not SYS.
            let rank_of = |c: Cell| match c {
                Cell::Pix => 0,
                Cell::Pxb => 1,
                Cell::Phb => 2,
                Cell::Node => 3,
                _ => 9,
            };
            let best = (0..g)
                .map(|j| (rank_of(m.cells[i][j]), j))
                .min()
                .filter(|(r, _)| *r < 9)
                .map(|(_, j)| m.gpu_numa[j].clone());
            numa_of.push(best.unwrap_or_else(|| m.gpu_numa.first().cloned().unwrap_or_default()));
        }
    }
    numa_of
}

/// One CPU node per NUMA key, every pair of them linked: the nodes by key
/// and in order.
fn cpus(
    b: &mut Builder,
    numa_of: &[String],
    assumptions: &mut Vec<String>,
) -> (BTreeMap<String, NodeIndex>, Vec<NodeIndex>) {
    let mut cpu_nodes: BTreeMap<String, NodeIndex> = BTreeMap::new();
    let mut numa_keys: Vec<String> = Vec::new();
    for k in numa_of {
        if !numa_keys.contains(k) {
            numa_keys.push(k.clone());
        }
    }
    for (c, k) in numa_keys.iter().enumerate() {
        let node = b.node(&format!("cpu{c}"), NodeKind::Cpu, None);
        cpu_nodes.insert(k.clone(), node);
    }
    let cpu_list: Vec<_> = numa_keys
        .iter()
        .filter_map(|k| cpu_nodes.get(k).copied())
        .collect();
    for i in 0..cpu_list.len() {
        for j in i + 1..cpu_list.len() {
            b.duplex(
                cpu_list[i],
                cpu_list[j],
                SYS_UNKNOWN_GBPS,
                ALPHA_SYS_US,
                1,
                "sys",
            );
        }
    }
    if cpu_list.len() > 1 {
        assumptions.push(
            "CPU↔CPU links 16 GB/s (NCCL's AMD/SKL-class figure; the matrix gives none)".into(),
        );
    }
    (cpu_nodes, cpu_list)
}

/// Devices grouped by PIX/PXB relations (union-find), by representative.
fn pcie_groups(m: &Matrix) -> BTreeMap<usize, Vec<usize>> {
    let n = m.devices.len();
    // Union-find over PIX/PXB relations.
    let mut parent: Vec<usize> = (0..n).collect();
    fn find(p: &mut [usize], x: usize) -> usize {
        let mut r = x;
        while p[r] != r {
            r = p[r];
        }
        let mut y = x;
        while p[y] != r {
            let nx = p[y];
            p[y] = r;
            y = nx;
        }
        r
    }
    for i in 0..n {
        for j in i + 1..n {
            if matches!(m.cells[i][j], Cell::Pix | Cell::Pxb) {
                let (a, c) = (find(&mut parent, i), find(&mut parent, j));
                parent[a] = c;
            }
        }
    }
    let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for i in 0..n {
        let r = find(&mut parent, i);
        groups.entry(r).or_default().push(i);
    }
    groups
}

/// One node per NIC: every device's node (GPUs first), and the NICs.
fn nic_nodes(
    b: &mut Builder,
    m: &Matrix,
    gpus: &[NodeIndex],
    nic_gbps: f64,
) -> (Vec<NodeIndex>, Vec<NicInfo>) {
    let (g, n) = (m.num_gpus, m.devices.len());
    let mut dev_nodes: Vec<NodeIndex> = gpus.to_vec();
    let mut nics = Vec::new();
    for i in g..n {
        let name = &m.devices[i];
        let node = b.node(&format!("nic:{name}"), NodeKind::Nic, None);
        dev_nodes.push(node);
        nics.push(NicInfo {
            node,
            node_id: b.g[node].id.clone(),
            names: vec![name.clone()],
            ports: 1,
            gbps: nic_gbps,
            host: None,
        });
    }
    (dev_nodes, nics)
}

/// What the PCIe links join: the device groups, NUMA keys, CPU nodes and
/// device nodes.
struct Pcie<'a> {
    groups: &'a BTreeMap<usize, Vec<usize>>,
    numa_of: &'a [String],
    cpu_nodes: &'a BTreeMap<String, NodeIndex>,
    cpu_list: &'a [NodeIndex],
    dev_nodes: &'a [NodeIndex],
}

/// The PCIe links: a lone device to its NUMA node's CPU, a group through
/// one switch; the number of switches.
fn pcie_links(b: &mut Builder, pc: &Pcie, model: GpuModel) -> usize {
    let (groups, numa_of, cpu_nodes) = (pc.groups, pc.numa_of, pc.cpu_nodes);
    let (cpu_list, dev_nodes) = (pc.cpu_list, pc.dev_nodes);
    let mut nswitch = 0;
    for members in groups.values() {
        let cpu = cpu_nodes
            .get(&numa_of[members[0]])
            .copied()
            .unwrap_or(cpu_list[0]);
        if members.len() == 1 {
            b.duplex(
                dev_nodes[members[0]],
                cpu,
                model.pcie_gbps,
                ALPHA_PCIE_US,
                1,
                "pcie",
            );
        } else {
            let sw = b.node(&format!("pcisw{nswitch}"), NodeKind::Switch, None);
            nswitch += 1;
            b.duplex(sw, cpu, model.pcie_gbps, ALPHA_PCIE_US, 1, "pcie");
            for &d in members {
                b.duplex(dev_nodes[d], sw, model.pcie_gbps, ALPHA_PCIE_US, 1, "pcie");
            }
        }
    }
    nswitch
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tabs_and_spaces_parse_alike() {
        let tab = "\tGPU0\tGPU1\tmlx5_0\tCPU Affinity\nGPU0\t X \tNV2\tPIX\t0-3\nGPU1\tNV2\t X \tSYS\t4-7\nmlx5_0\tPIX\tSYS\t X \n";
        let sp = tab.replace('\t', "    ");
        let a = parse(tab, "t").unwrap();
        let b = parse(&sp, "t").unwrap();
        assert_eq!(a, b);
        assert_eq!(a.num_gpus, 2);
        assert_eq!(a.devices[2], "mlx5_0");
        assert_eq!(a.cells[0][1], Cell::Nv(2));
        assert_eq!(a.gpu_numa, vec!["0-3", "4-7"]);
    }

    #[test]
    fn bad_cell_is_refused_with_line() {
        let t = "\tGPU0\tGPU1\nGPU0\t X \tNVx\nGPU1\tNV2\t X \n";
        let e = parse(t, "m.txt").unwrap_err();
        assert!(e.to_string().contains("m.txt: line 2"), "{e}");
    }

    #[test]
    fn pcie_only_pair_still_connected() {
        let t = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tSYS\t0-3\t0\nGPU1\tSYS\t X \t4-7\t1\n";
        let r = import(t, "t", &ImportOptions::default()).unwrap();
        assert_eq!(r.topology.num_ranks(), 2);
        assert!(r.topology.route(0, 1).is_some());
    }
}
