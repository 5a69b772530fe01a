//! `rocm-smi --showtopo` → Topology (topologies.md §6).
//!
//! Reads the "Weight", "Hops", "Link Type" and "Numa Nodes" blocks with
//! lenient spacing. A pair is a direct xGMI link when its link type is
//! `XGMI` (or, without that block, its hop count is 1). The output gives no
//! link counts or bandwidths: one link per xGMI pair at the per-link
//! bandwidth of the GPU model (`--gpu`, or inferred), stated in the report.

// Matrix code: index loops read more clearly than iterator chains here.
#![allow(clippy::needless_range_loop)]

use super::builder::{gbps, Builder, Format, GpuInfo, GpuLinkInfo, ImportOptions, ImportReport};
use super::FrontError;
use crate::ir::hardware::{
    gpu_model, ALPHA_GPU_LINK_US, ALPHA_PCIE_US, ALPHA_SYS_US, GPU_MODELS, SYS_UNKNOWN_GBPS,
};
use crate::ir::NodeKind;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    None,
    Weight,
    Hops,
    LinkType,
    Numa,
}

/// What the four blocks say.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ShowTopo {
    pub num_gpus: usize,
    pub weight: Option<Vec<Vec<String>>>,
    pub hops: Option<Vec<Vec<String>>>,
    pub link_type: Option<Vec<Vec<String>>>,
    /// GPU → NUMA node.
    pub numa: BTreeMap<usize, i64>,
}

fn gpu_index(tok: &str) -> Option<usize> {
    let t = tok.trim().trim_end_matches(':');
    let d = t
        .strip_prefix("GPU[")
        .and_then(|x| x.strip_suffix(']'))
        .or_else(|| t.strip_prefix("GPU"))?;
    d.trim().parse().ok()
}

/// Parse `rocm-smi --showtopo` text.
pub fn parse(text: &str, file: &str) -> Result<ShowTopo, FrontError> {
    let err = |line: usize, m: String| FrontError::at_line(file, line, m);
    let mut st = ShowTopo::default();
    let mut block = Block::None;
    let mut header: Vec<usize> = Vec::new();
    let mut rows: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    let flush = |st: &mut ShowTopo,
                 block: Block,
                 header: &[usize],
                 rows: &mut BTreeMap<usize, Vec<String>>|
     -> Result<(), String> {
        if matches!(block, Block::None | Block::Numa) || header.is_empty() {
            rows.clear();
            return Ok(());
        }
        let n = header.len();
        let mut m = vec![vec![String::new(); n]; n];
        for (k, h) in header.iter().enumerate() {
            if *h != k {
                return Err(format!(
                    "matrix header column {} is GPU{h}, expected GPU{k}",
                    k + 1
                ));
            }
        }
        for i in 0..n {
            let r = rows
                .get(&i)
                .ok_or_else(|| format!("no row for GPU{i} in a {n}-GPU block"))?;
            m[i].clone_from(r);
        }
        st.num_gpus = st.num_gpus.max(n);
        let slot = match block {
            Block::Weight => &mut st.weight,
            Block::Hops => &mut st.hops,
            _ => &mut st.link_type,
        };
        *slot = Some(m);
        rows.clear();
        Ok(())
    };
    for (li, line) in text.lines().enumerate() {
        let l = line.trim();
        let lower = l.to_ascii_lowercase();
        let new_block = if lower.contains("weight between two gpus") {
            Some(Block::Weight)
        } else if lower.contains("hops between two gpus") {
            Some(Block::Hops)
        } else if lower.contains("link type between two gpus") {
            Some(Block::LinkType)
        } else if lower.contains("numa nodes") {
            Some(Block::Numa)
        } else if l.starts_with("===") || l.starts_with("---") {
            Some(Block::None)
        } else {
            None
        };
        if let Some(nb) = new_block {
            flush(&mut st, block, &header, &mut rows).map_err(|m| err(li + 1, m))?;
            block = nb;
            header.clear();
            continue;
        }
        if l.is_empty() {
            continue;
        }
        match block {
            Block::None => {}
            Block::Numa => {
                // "GPU 0 : (Topology) Numa Node: 0" / "GPU[0]\t\t: (Topology) Numa Node: 0"
                if let Some((lhs, rhs)) = l.split_once(':') {
                    if rhs.contains("Numa Node:") {
                        let g = gpu_index(&lhs.split_whitespace().collect::<String>()).ok_or_else(
                            || err(li + 1, format!("cannot read the GPU in \"{lhs}\"")),
                        )?;
                        let v = rhs.rsplit(':').next().unwrap_or("").trim();
                        let v: i64 = v.parse().map_err(|_| {
                            err(li + 1, format!("NUMA node \"{v}\" is not a number"))
                        })?;
                        st.numa.insert(g, v);
                    }
                }
            }
            _ => {
                let toks: Vec<&str> = l.split_whitespace().collect();
                if toks.iter().all(|t| gpu_index(t).is_some()) && header.is_empty() {
                    header = toks.iter().filter_map(|t| gpu_index(t)).collect();
                    continue;
                }
                let Some(g) = toks.first().and_then(|t| gpu_index(t)) else {
                    return Err(err(
                        li + 1,
                        format!("unexpected line in a matrix block: \"{l}\""),
                    ));
                };
                if header.is_empty() {
                    return Err(err(li + 1, "matrix row before the GPU header".into()));
                }
                if toks.len() != header.len() + 1 {
                    return Err(err(
                        li + 1,
                        format!(
                            "row GPU{g} has {} cells, the header has {}",
                            toks.len() - 1,
                            header.len()
                        ),
                    ));
                }
                rows.insert(g, toks[1..].iter().map(|s| s.to_string()).collect());
            }
        }
    }
    flush(&mut st, block, &header, &mut rows).map_err(|m| err(text.lines().count(), m))?;
    if st.num_gpus == 0 {
        return Err(FrontError::new(
            file,
            "no GPU matrix found (expected the \"Weight/Hops/Link Type between two GPUs\" blocks of rocm-smi --showtopo)",
        ));
    }
    for m in [&st.weight, &st.hops, &st.link_type].into_iter().flatten() {
        if m.len() != st.num_gpus {
            return Err(FrontError::new(
                file,
                "the blocks disagree on the number of GPUs",
            ));
        }
    }
    Ok(st)
}

/// Import `rocm-smi --showtopo` text.
pub fn import(text: &str, file: &str, opts: &ImportOptions) -> Result<ImportReport, FrontError> {
    let st = parse(text, file)?;
    let g = st.num_gpus;
    let mut warnings = Vec::new();
    let mut assumptions = Vec::new();
    let direct = |i: usize, j: usize| -> bool {
        if let Some(lt) = &st.link_type {
            lt[i][j].eq_ignore_ascii_case("XGMI")
        } else if let Some(h) = &st.hops {
            h[i][j] == "1"
        } else {
            st.weight.as_ref().is_some_and(|w| w[i][j] == "15")
        }
    };
    if st.link_type.is_none() {
        warnings.push(
            "no \"Link Type\" block: pairs at 1 hop (or weight 15) taken as direct xGMI".into(),
        );
    }
    let full_mesh = g > 1 && (0..g).all(|i| (0..g).all(|j| i == j || direct(i, j)));
    let (model, why) = match opts.gpu {
        Some(m) => (m, format!("--gpu {}", m.name)),
        None if full_mesh && g == 8 => (
            gpu_model("mi300x").unwrap_or(GPU_MODELS[0]),
            "8 GPUs in a full xGMI mesh: MI300X assumed".to_string(),
        ),
        None => (
            gpu_model("mi250").unwrap_or(GPU_MODELS[0]),
            "MI200-class (gfx90a) xGMI assumed; pass --gpu to choose (mi100, mi210, mi250, mi300x)"
                .to_string(),
        ),
    };
    assumptions.push(format!(
        "GPU model {}: {why}; one xGMI link per XGMI pair at {} GB/s per direction (hardware figure, topologies.md §1; rocm-smi gives no link counts); PCIe {} GB/s",
        model.name,
        gbps(model.link_gbps),
        gbps(model.pcie_gbps)
    ));
    let mut b = Builder::default();
    let gpus: Vec<_> = (0..g)
        .map(|r| {
            let n = b.node(&format!("gpu{r}"), NodeKind::Gpu, None);
            b.g[n].rank = Some(r);
            b.g[n].sms = Some(model.sms);
            b.g[n].mem_gbps = Some(model.mem_gbps);
            n
        })
        .collect();
    let mut infos: Vec<Vec<GpuLinkInfo>> = vec![Vec::new(); g];
    for i in 0..g {
        for j in 0..g {
            if i == j {
                continue;
            }
            if direct(i, j) != direct(j, i) {
                warnings.push(format!(
                    "GPU{i}↔GPU{j}: link type differs by direction; linked both ways"
                ));
            }
            if direct(i, j) || direct(j, i) {
                if i < j {
                    b.duplex(
                        gpus[i],
                        gpus[j],
                        model.link_gbps,
                        ALPHA_GPU_LINK_US,
                        1,
                        "xgmi",
                    );
                }
                infos[i].push(GpuLinkInfo {
                    target: format!("GPU{j}"),
                    count: 1,
                    target_kind: "gpu",
                    fabric: "xgmi",
                });
            }
        }
    }
    // NUMA nodes → CPUs.
    if st.numa.is_empty() {
        assumptions.push("no \"Numa Nodes\" block: all GPUs on one CPU".into());
    }
    let mut cpus: BTreeMap<i64, petgraph::graph::NodeIndex> = BTreeMap::new();
    for r in 0..g {
        let numa = st.numa.get(&r).copied().unwrap_or(0);
        let cpu = match cpus.get(&numa) {
            Some(&c) => c,
            None => {
                let c = b.node(&format!("cpu{numa}"), NodeKind::Cpu, None);
                cpus.insert(numa, c);
                c
            }
        };
        b.duplex(gpus[r], cpu, model.pcie_gbps, ALPHA_PCIE_US, 1, "pcie");
    }
    let cl: Vec<_> = cpus.values().copied().collect();
    for i in 0..cl.len() {
        for j in i + 1..cl.len() {
            b.duplex(cl[i], cl[j], SYS_UNKNOWN_GBPS, ALPHA_SYS_US, 1, "sys");
        }
    }
    if cl.len() > 1 {
        assumptions.push("NUMA node↔NUMA node links 16 GB/s (NCCL's AMD CPU figure)".into());
    }
    warnings.push(
        "rocm-smi --showtopo lists no NICs: --hosts cannot join copies of this machine".into(),
    );
    let name = std::path::Path::new(file)
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_else(|| "imported".into());
    let description = format!(
        "Imported from {file} (rocm-smi --showtopo): {g} {} GPUs.",
        model.name
    );
    assumptions.push(super::builder::alpha_assumption());
    let mut topology = b.finish(name, description, file)?;
    topology.vendor = Format::RocmSmi.vendor();
    let gpu_infos = GpuInfo::of_text_dump(&model, infos);
    Ok(ImportReport {
        topology,
        format: Format::RocmSmi,
        warnings,
        assumptions,
        gpus: gpu_infos,
        nics: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenient_numa_lines() {
        assert_eq!(gpu_index("GPU[3]"), Some(3));
        assert_eq!(gpu_index("GPU3"), Some(3));
        let t = "== Link Type between two GPUs ==\n   GPU0   GPU1\nGPU0  0  XGMI\nGPU1 XGMI    0\n== Numa Nodes ==\nGPU[0]\t\t: (Topology) Numa Node: 0\nGPU 1          : (Topology) Numa Node: 1\n";
        let st = parse(t, "t").unwrap();
        assert_eq!(st.num_gpus, 2);
        assert_eq!(st.numa.get(&1), Some(&1));
        let r = import(t, "t", &ImportOptions::default()).unwrap();
        assert_eq!(r.topology.gpu_bandwidth(0).0, 50.0 + 24.0);
    }

    #[test]
    fn ragged_row_refused() {
        let t = "== Hops between two GPUs ==\n GPU0 GPU1\nGPU0 0 1\nGPU1 1\n";
        let e = parse(t, "r.txt").unwrap_err();
        assert!(e.to_string().contains("r.txt: line 4"), "{e}");
    }
}
