//! Every real dump in tests/data/real/ (copied from ../shared/topologies-real
//! with its SOURCES.tsv line) either imports with the expected facts or is
//! refused with a reason that is right for that file.

// Link-count matrices: index loops read more clearly here.
#![allow(clippy::needless_range_loop)]

use rscc::front::import::{self, Format, ImportOptions, ImportReport};
use rscc::front::{load_topology, topo_json};
use rscc::ir::NodeKind;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/real")
        .join(rel)
}

fn imp(rel: &str) -> ImportReport {
    import::import_file(&data(rel), &ImportOptions::default())
        .unwrap_or_else(|e| panic!("{rel} should import: {e}"))
}

/// What a file must give.
enum Expect {
    Ok {
        format: Format,
        gpus: usize,
        /// Every GPU's NVLink/xGMI link total (None: differs per GPU).
        links_per_gpu: Option<u32>,
        /// Per-link bandwidth GB/s.
        link_gbps: f64,
        /// Sorted (descending) per-switch counts of every GPU, if NVSwitch.
        fanout: Option<&'static [u32]>,
        nics: usize,
        /// Speed of every NIC, GB/s.
        nic_gbps: Option<f64>,
        /// A warning must contain this.
        warning: Option<&'static str>,
    },
    Refused(&'static str),
}

fn expectations() -> Vec<(&'static str, Expect)> {
    use Expect::*;
    let ok = |format, gpus, links, bw, fanout, nics, nic_gbps, warning| Ok {
        format,
        gpus,
        links_per_gpu: links,
        link_gbps: bw,
        fanout,
        nics,
        nic_gbps,
        warning,
    };
    let n = Format::NcclXml;
    let r = Format::RcclXml;
    vec![
        // NCCL XML. A100 SXM (SimAI): 6 NVSwitch × 2 links; 4 (+1) bonded CX-6 200G.
        ("nccl-xml/aliyun-SimAI_SimCCL_topo_8A100_4CX6.xml", ok(n, 8, Some(12), 25.0, Some(&[2, 2, 2, 2, 2, 2][..]), 5, Some(25.0), None)),
        ("nccl-xml/aliyun-SimAI_SimCCL_topo_4A100_2CX6.xml", ok(n, 4, Some(12), 25.0, Some(&[2, 2, 2, 2, 2, 2][..]), 3, Some(25.0), None)),
        ("nccl-xml/aliyun-SimAI_SimCCL_topo_2A100_1CX6.xml", ok(n, 2, Some(12), 25.0, Some(&[2, 2, 2, 2, 2, 2][..]), 2, Some(25.0), None)),
        ("nccl-xml/aliyun-SimAI_SimCCL_topo_1A100_1CX6.xml", ok(n, 1, Some(12), 25.0, Some(&[2, 2, 2, 2, 2, 2][..]), 2, Some(25.0), None)),
        // Bare busids without class: nothing is known to be a GPU.
        ("nccl-xml/aws-ofi-nccl_g5.48xl-topo.xml", Refused("no GPUs")),
        // PCI-only skeletons: 4 switches × (2 GPU + 1 EFA); EFA speed unknown.
        ("nccl-xml/aws-ofi-nccl_p4d-24xl-topo.xml", ok(n, 8, Some(0), 25.0, None, 4, Some(12.5), Some("no NVLink information"))),
        ("nccl-xml/aws-ofi-nccl_p4de-24xl-topo.xml", ok(n, 8, Some(0), 25.0, None, 4, Some(12.5), Some("no NVLink information"))),
        // A graph file, not a topology.
        ("nccl-xml/azure-azhpc-images_ncv4-graph.xml", Refused("NCCL graph file")),
        // Self-targeted NVLinks are ignored; eth0 100G directly under the CPU.
        ("nccl-xml/azure-azhpc-images_ncv4-topo.xml", ok(n, 4, Some(0), 25.0, None, 1, Some(12.5), Some("own busid"))),
        // Before PR 314: bridge pairs 0001↔0002 and 0003↔0004, count 12.
        ("nccl-xml/azure-azhpc-images_ncv4-topo_before-PR314.xml", ok(n, 4, Some(12), 25.0, None, 1, Some(12.5), None)),
        ("nccl-xml/azure-azhpc-images_ndv2-topo.xml", ok(n, 8, Some(0), 25.0, None, 1, Some(12.5), Some("no NVLink information"))),
        ("nccl-xml/azure-azhpc-images_ndv4-topo.xml", ok(n, 8, Some(0), 25.0, None, 8, Some(12.5), Some("no NVLink information"))),
        // H100: 4 NVSwitch chips, 5+5+4+4; 8 × CX-7 200G.
        ("nccl-xml/ibm-cloud-vpc_gx3d-8xH100_topo.xml", ok(n, 8, Some(18), 25.0, Some(&[5, 5, 4, 4][..]), 8, Some(25.0), None)),
        // 2 × A100 PCIe, one dual-port 100G CX-6 Dx (2 ports, same guid).
        ("nccl-xml/nccl-issue2397_2xA100-PCIe_RoCE-dualport.xml", ok(n, 2, Some(0), 25.0, None, 1, Some(25.0), Some("no NVLink information"))),
        // OCI H100: 8 dual-port CX-7 at 180000 / 200000 Mb/s per port.
        ("nccl-xml/oci-hpc_BM.GPU.H100.8_H100-topology.xml", ok(n, 8, Some(18), 25.0, Some(&[5, 5, 4, 4][..]), 8, Some(45.0), None)),
        ("nccl-xml/oci-hpc_BM.GPU.H100.8_H100-topology-kubernetes.xml", ok(n, 8, Some(18), 25.0, Some(&[5, 5, 4, 4][..]), 8, Some(50.0), None)),
        ("nccl-xml/oci-hpc_BM.GPU4.8-A100_topo-flattened.xml", ok(n, 8, Some(0), 25.0, None, 8, Some(12.5), Some("no NVLink information"))),
        ("nccl-xml/oci-hpc_BM.GPU4.8-A100_topo-flattened-b4.xml", ok(n, 8, Some(0), 25.0, None, 8, Some(12.5), Some("no NVLink information"))),
        // RCCL XML.
        ("rccl-xml/rccl_topo_8p_940_MI300X-gfx942_8GPU_8xCX7-400G.xml", ok(r, 8, Some(7), 64.0, None, 8, Some(50.0), None)),
        ("rccl-xml/rccl_topo_8p_940vm_MI300X-gfx942_8GPU_VM.xml", ok(r, 8, Some(7), 64.0, None, 8, Some(50.0), None)),
        // Slingshot speed="200000000" clamped to 200 Gb/s.
        ("rccl-xml/rccl_topo_4p_940_MI300A-gfx940_4APU.xml", ok(r, 4, Some(3), 64.0, None, 4, Some(25.0), Some("implausible"))),
        ("rccl-xml/rccl_topo_8p1h_MI250X-gfx90a_8GCD_1hive.xml", ok(r, 8, None, 50.0, None, 4, Some(25.0), None)),
        ("rccl-xml/rccl_topo_8p1h_4_MI250X-gfx90a_8GCD_8NIC.xml", ok(r, 8, None, 50.0, None, 8, Some(25.0), None)),
        ("rccl-xml/rccl_topo_16p1h_vm_MI250-gfx90a_16GCD_VM.xml", ok(r, 16, None, 50.0, None, 8, Some(25.0), None)),
        ("rccl-xml/rccl_topo_8p_90a_gfx90a_8GCD.xml", ok(r, 8, Some(3), 50.0, None, 1, None, None)),
        ("rccl-xml/rccl_topo_8p_90a_1_gfx90a_8GCD_alt.xml", ok(r, 8, Some(3), 50.0, None, 1, None, None)),
        ("rccl-xml/rccl_topo_8p6l_MI100-gfx908_8P6L.xml", ok(r, 8, Some(6), 46.0, None, 1, Some(25.0), None)),
        ("rccl-xml/rccl_topo_8p6l_6nic_MI100-gfx908_8P6L_6NIC.xml", ok(r, 8, Some(6), 46.0, None, 6, Some(25.0), None)),
        ("rccl-xml/rccl_topo_4p3l_MI100-gfx908_4P3L.xml", ok(r, 4, Some(3), 46.0, None, 2, Some(1.25), None)),
        ("rccl-xml/rccl_topo_4p3l_2h_MI100-gfx908_2x4P3L.xml", ok(r, 8, Some(3), 46.0, None, 1, Some(25.0), None)),
        ("rccl-xml/rccl_topo_4p4h_MI100-gfx908_16GPU_4hives.xml", ok(r, 16, Some(3), 46.0, None, 16, Some(25.0), None)),
        ("rccl-xml/rccl_topo_4p1h_Vega20-gfx906_4P1H.xml", ok(r, 4, Some(2), 46.0, None, 1, Some(12.5), None)),
        ("rccl-xml/rccl_topo_8p_rome_Vega20-gfx906_8GPU_Rome.xml", ok(r, 8, Some(2), 46.0, None, 1, Some(25.0), None)),
        ("rccl-xml/rccl_topo_8p_pcie_Vega20-gfx906_8GPU_PCIe.xml", ok(r, 8, Some(0), 46.0, None, 1, Some(12.5), Some("no xGMI information"))),
        ("rccl-xml/rccl_topo_8p_pcie_2nic_Vega20-gfx906_8GPU_PCIe_2NIC.xml", ok(r, 8, Some(0), 46.0, None, 2, Some(12.5), Some("no xGMI information"))),
        // nvidia-smi.
        ("nvidia-smi-topo/DGX1-V100-SXM2_8GPU_hybrid-cube-mesh_1xEDR_oneflow-dlperf.txt", ok(Format::NvidiaSmi, 8, Some(6), 25.0, None, 1, Some(12.5), None)),
        ("nvidia-smi-topo/HGX-A100-SXM4-80GB_8GPU_8xCX-RoCE100G_deepep-issue13.txt", ok(Format::NvidiaSmi, 8, Some(12), 25.0, Some(&[12][..]), 8, Some(25.0), None)),
        ("nvidia-smi-topo/GCP-A4-B200_8GPU_8xRoCE_google-dranet-gke-rdma.txt", ok(Format::NvidiaSmi, 8, Some(18), 25.0, Some(&[18][..]), 8, Some(50.0), None)),
        // rocm-smi.
        ("rocm-smi-topo/MI210_4GPU_xGMI-bridge_showtopo_archer2-gpu-docs.txt", ok(Format::RocmSmi, 4, Some(3), 50.0, None, 0, None, None)),
        ("rocm-smi-topo/AMD-8GPU-64GiB_two-4GPU-xGMI-hives_showtopo_unattributed-test-fixture.txt", ok(Format::RocmSmi, 8, Some(3), 50.0, None, 0, None, None)),
    ]
}

#[test]
fn every_real_file_is_listed_and_has_a_source_line() {
    let sources = std::fs::read_to_string(data("SOURCES.tsv")).unwrap();
    let listed: Vec<&str> = expectations().iter().map(|(f, _)| *f).collect();
    let mut on_disk = Vec::new();
    for d in ["nccl-xml", "rccl-xml", "nvidia-smi-topo", "rocm-smi-topo"] {
        for e in std::fs::read_dir(data(d)).unwrap() {
            let name = format!("{d}/{}", e.unwrap().file_name().to_string_lossy());
            on_disk.push(name);
        }
    }
    on_disk.sort();
    let mut l = listed.clone();
    l.sort();
    assert_eq!(
        on_disk, l,
        "every file in tests/data/real has an expectation"
    );
    for f in listed {
        assert!(
            sources.lines().any(|s| s.starts_with(&format!("{f}\t"))),
            "{f} has no SOURCES.tsv line"
        );
    }
}

/// Per-GPU counts to each NVSwitch busid, sorted descending.
fn fanout(r: &ImportReport, rank: usize) -> Vec<u32> {
    let mut v: Vec<u32> = r.gpus[rank]
        .links
        .iter()
        .filter(|l| l.target_kind == "nvswitch")
        .map(|l| l.count)
        .collect();
    v.sort_by(|a, b| b.cmp(a));
    v
}

#[test]
fn every_real_file_imports_or_is_refused_for_the_right_reason() {
    let mut failures = Vec::new();
    for (file, exp) in expectations() {
        let res = import::import_file(&data(file), &ImportOptions::default());
        match (exp, res) {
            (Expect::Refused(why), Err(e)) => {
                let m = e.to_string();
                if !(m.contains(why)
                    && m.contains(file.rsplit('/').next().unwrap())
                    && m.contains("line "))
                {
                    failures.push(format!(
                        "{file}: refusal should name file, line and \"{why}\": {m}"
                    ));
                }
            }
            (Expect::Refused(why), Ok(_)) => {
                failures.push(format!("{file}: should be refused ({why}) but imported"))
            }
            (Expect::Ok { .. }, Err(e)) => failures.push(format!("{file}: should import: {e}")),
            (
                Expect::Ok {
                    format,
                    gpus,
                    links_per_gpu,
                    link_gbps,
                    fanout: fo,
                    nics,
                    nic_gbps,
                    warning,
                },
                Ok(r),
            ) => {
                let t = &r.topology;
                let mut f = |m: String| failures.push(format!("{file}: {m}"));
                if r.format != format {
                    f(format!("format {} != {}", r.format, format));
                }
                if t.num_ranks() != gpus || r.gpus.len() != gpus {
                    f(format!("{} GPUs, expected {gpus}", t.num_ranks()));
                }
                if let Err(e) = topo_json::validate(t) {
                    f(format!("does not validate: {e}"));
                }
                for gi in &r.gpus {
                    if let Some(l) = links_per_gpu {
                        if gi.fabric_links() != l {
                            f(format!(
                                "rank {} has {} fabric links, expected {l}",
                                gi.rank,
                                gi.fabric_links()
                            ));
                        }
                    }
                    if gi.fabric_links() > 0 && (gi.link_gbps - link_gbps).abs() > 1e-9 {
                        f(format!(
                            "rank {} per-link {} GB/s, expected {link_gbps}",
                            gi.rank, gi.link_gbps
                        ));
                    }
                    if let Some(fo) = fo {
                        if fanout(&r, gi.rank) != fo {
                            f(format!(
                                "rank {} NVSwitch fan-out {:?}, expected {fo:?}",
                                gi.rank,
                                fanout(&r, gi.rank)
                            ));
                        }
                    }
                }
                // The graph agrees with the report: a GPU's fabric capacity = links × per-link bw.
                for gi in &r.gpus {
                    let n = t.ranks[gi.rank];
                    let cap: f64 = t
                        .graph
                        .edges_directed(n, petgraph::Direction::Outgoing)
                        .filter(|e| matches!(e.weight().kind.as_str(), "nvlink" | "xgmi"))
                        .map(|e| e.weight().capacity_gbps())
                        .sum();
                    let want = gi.fabric_links() as f64 * gi.link_gbps;
                    // GPU-direct links are max'ed over both ends, so the graph may exceed one side's listing.
                    if cap + 1e-9 < want && fo.is_some() {
                        f(format!("rank {} fabric capacity {cap} < {want}", gi.rank));
                    }
                }
                let nic_nodes = t
                    .graph
                    .node_indices()
                    .filter(|&v| t.graph[v].kind == NodeKind::Nic)
                    .count();
                if r.nics.len() != nics || nic_nodes != nics {
                    f(format!(
                        "{} NICs ({} nodes), expected {nics}",
                        r.nics.len(),
                        nic_nodes
                    ));
                }
                if let Some(s) = nic_gbps {
                    for ni in &r.nics {
                        if (ni.gbps - s).abs() > 1e-9 {
                            f(format!(
                                "NIC {} at {} GB/s, expected {s}",
                                ni.node_id, ni.gbps
                            ));
                        }
                    }
                }
                if let Some(w) = warning {
                    if !r.warnings.iter().any(|x| x.contains(w)) {
                        f(format!("no warning containing \"{w}\": {:?}", r.warnings));
                    }
                }
                if r.assumptions.is_empty() {
                    f("no assumptions listed".into());
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Direct GPU↔GPU link counts of a topology, as a matrix.
fn gpu_link_matrix(r: &ImportReport) -> Vec<Vec<u32>> {
    let t = &r.topology;
    let n = t.num_ranks();
    let mut m = vec![vec![0u32; n]; n];
    for i in 0..n {
        for j in 0..n {
            if let Some(e) = t.graph.find_edge(t.ranks[i], t.ranks[j]) {
                m[i][j] = t.graph[e].count;
            }
        }
    }
    m
}

#[test]
fn dgx1_matrix_equals_the_tools_matrix_under_p() {
    // microsoft/msccl-tools msccl/topologies/nvidia.py::dgx1().
    let tools = [
        [0, 2, 1, 1, 2, 0, 0, 0],
        [2, 0, 1, 2, 0, 1, 0, 0],
        [1, 1, 0, 2, 0, 0, 2, 0],
        [1, 2, 2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2, 1, 1],
        [0, 1, 0, 0, 2, 0, 1, 2],
        [0, 0, 2, 0, 1, 1, 0, 2],
        [0, 0, 0, 1, 1, 2, 2, 0],
    ];
    let p = [0, 2, 3, 1, 4, 6, 7, 5];
    let r = imp("nvidia-smi-topo/DGX1-V100-SXM2_8GPU_hybrid-cube-mesh_1xEDR_oneflow-dlperf.txt");
    let m = gpu_link_matrix(&r);
    for i in 0..8 {
        for j in 0..8 {
            assert_eq!(m[i][j], tools[p[i]][p[j]], "nvidia-smi GPU{i}–GPU{j}");
        }
    }
    // 24 links, 48 directed, 16 pairs of which 8 double.
    let pairs: Vec<u32> = (0..8)
        .flat_map(|i| (i + 1..8).map(move |j| (i, j)))
        .map(|(i, j)| m[i][j])
        .filter(|&c| c > 0)
        .collect();
    assert_eq!(pairs.len(), 16);
    assert_eq!(pairs.iter().filter(|&&c| c == 2).count(), 8);
    // The one NIC sits on a PCIe switch with GPUs 2 and 3 (PIX).
    let t = &r.topology;
    let nic = t
        .graph
        .node_indices()
        .find(|&v| t.graph[v].kind == NodeKind::Nic)
        .unwrap();
    let sw = t.graph.neighbors(nic).next().unwrap();
    assert_eq!(t.graph[sw].kind, NodeKind::Switch);
    let mut on_sw: Vec<usize> = t
        .graph
        .neighbors(sw)
        .filter_map(|v| t.graph[v].rank)
        .collect();
    on_sw.sort();
    assert_eq!(on_sw, vec![2, 3]);
}

#[test]
fn hgx_a100_smi_matches_the_a100_xml_dump() {
    let smi = imp("nvidia-smi-topo/HGX-A100-SXM4-80GB_8GPU_8xCX-RoCE100G_deepep-issue13.txt");
    let xml = imp("nccl-xml/aliyun-SimAI_SimCCL_topo_8A100_4CX6.xml");
    for r in 0..8 {
        assert_eq!(smi.gpus[r].fabric_links(), 12);
        assert_eq!(xml.gpus[r].fabric_links(), 12);
        let cap = |rep: &ImportReport| {
            let t = &rep.topology;
            t.graph
                .edges_directed(t.ranks[r], petgraph::Direction::Outgoing)
                .filter(|e| e.weight().kind == "nvlink")
                .map(|e| e.weight().capacity_gbps())
                .sum::<f64>()
        };
        assert_eq!(cap(&smi), 300.0);
        assert_eq!(cap(&xml), 300.0);
    }
    // PCIe grouping: 4 switches of 2 GPUs + 2 NICs.
    let t = &smi.topology;
    let mut groups = BTreeMap::new();
    for v in t
        .graph
        .node_indices()
        .filter(|&v| t.graph[v].kind == NodeKind::Switch && t.graph[v].id.starts_with("pcisw"))
    {
        let gpus = t
            .graph
            .neighbors(v)
            .filter(|&u| t.graph[u].kind == NodeKind::Gpu)
            .count();
        let nics = t
            .graph
            .neighbors(v)
            .filter(|&u| t.graph[u].kind == NodeKind::Nic)
            .count();
        groups.insert(t.graph[v].id.clone(), (gpus, nics));
    }
    assert_eq!(groups.len(), 4);
    assert!(groups.values().all(|&g| g == (2, 2)), "{groups:?}");
}

#[test]
fn mi250x_pair_counts_are_4_2_1() {
    for f in [
        "rccl-xml/rccl_topo_8p1h_MI250X-gfx90a_8GCD_1hive.xml",
        "rccl-xml/rccl_topo_8p1h_4_MI250X-gfx90a_8GCD_8NIC.xml",
    ] {
        let r = imp(f);
        let m = gpu_link_matrix(&r);
        let mut seen: Vec<u32> = m.iter().flatten().copied().filter(|&c| c > 0).collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen, vec![1, 2, 4], "{f}");
        // The two GCDs of one package (4 links) pair up every GPU exactly once.
        for i in 0..8 {
            assert_eq!(m[i].iter().filter(|&&c| c == 4).count(), 1, "{f} GCD {i}");
        }
    }
}

#[test]
fn mi300x_is_a_full_xgmi_mesh() {
    let r = imp("rccl-xml/rccl_topo_8p_940_MI300X-gfx942_8GPU_8xCX7-400G.xml");
    let m = gpu_link_matrix(&r);
    for i in 0..8 {
        for j in 0..8 {
            assert_eq!(m[i][j], u32::from(i != j));
        }
    }
}

#[test]
fn gpu_option_sets_the_per_link_bandwidth() {
    let f = data("nvidia-smi-topo/GCP-A4-B200_8GPU_8xRoCE_google-dranet-gke-rdma.txt");
    let opts = ImportOptions {
        gpu: rscc::ir::hardware::gpu_model("b200"),
        ..Default::default()
    };
    let r = import::import_file(&f, &opts).unwrap();
    assert_eq!(r.gpus[0].link_gbps, 50.0);
    assert!(r.assumptions.iter().any(|a| a.contains("--gpu b200")));
    let (out, _) = r.topology.gpu_bandwidth(0);
    assert_eq!(out, 18.0 * 50.0 + 48.0);
}

#[test]
fn load_topology_detects_every_format() {
    for f in [
        "nccl-xml/ibm-cloud-vpc_gx3d-8xH100_topo.xml",
        "rccl-xml/rccl_topo_8p_940_MI300X-gfx942_8GPU_8xCX7-400G.xml",
        "nvidia-smi-topo/DGX1-V100-SXM2_8GPU_hybrid-cube-mesh_1xEDR_oneflow-dlperf.txt",
        "rocm-smi-topo/MI210_4GPU_xGMI-bridge_showtopo_archer2-gpu-docs.txt",
    ] {
        let t = load_topology(&data(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(t.num_ranks() >= 4);
        // JSON written from it loads back the same.
        let j = topo_json::to_json(&t);
        let back = topo_json::parse(&j, "x").unwrap();
        assert_eq!(back.num_ranks(), t.num_ranks());
        assert_eq!(back.graph.edge_count(), t.graph.edge_count());
    }
}

#[test]
fn hosts_32_on_an_8_gpu_dump_is_fast_and_rail_optimised() {
    let f = data("nccl-xml/ibm-cloud-vpc_gx3d-8xH100_topo.xml");
    let start = std::time::Instant::now();
    let r = import::import_file(&f, &ImportOptions::default()).unwrap();
    let big = import::replicate(&r, 32, "x").unwrap();
    let took = start.elapsed();
    // The < 1 s goal is measured by the benchmark (docs/benchmarks.md);
    // here only a gross regression (or a hang) fails, on any CI machine.
    assert!(took.as_secs_f64() < 20.0, "took {took:?}");
    let t = &big.topology;
    assert_eq!(t.num_ranks(), 256);
    assert_eq!(t.num_hosts(), 32);
    topo_json::validate(t).unwrap();
    // 8 rails, each joining NIC k of all 32 hosts at the dump's 200G.
    let rails: Vec<_> = t
        .graph
        .node_indices()
        .filter(|&v| t.graph[v].id.starts_with("rail"))
        .collect();
    assert_eq!(rails.len(), 8);
    for &rl in &rails {
        assert_eq!(t.graph.neighbors(rl).count(), 32);
        for e in t.graph.edges(rl) {
            assert_eq!(e.weight().bw_gbps, 25.0);
        }
    }
    assert_eq!(big.nics.len(), 256);
}

#[test]
fn hosts_need_nics() {
    let f = data("rocm-smi-topo/MI210_4GPU_xGMI-bridge_showtopo_archer2-gpu-docs.txt");
    let r = import::import_file(&f, &ImportOptions::default()).unwrap();
    let e = import::replicate(&r, 2, "f.txt").unwrap_err();
    assert!(e.to_string().contains("no NIC"), "{e}");
}
