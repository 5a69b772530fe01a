//! The shipped topologies in topologies/: each is exactly what the generator
//! writes today, loads, has the stated facts, and reproduces the cut bounds
//! of synthesis.md §6.
//!
//! To rewrite the files after a deliberate generator change:
//! `RSCC_UPDATE_TOPOLOGIES=1 cargo test --test topologies -- shipped_files_are_exactly`.

use rscc::front::generate::{generate, shipped, GenParams};
use rscc::front::{load_topology, topo_json};
use rscc::ir::Topology;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("topologies")
}

fn load(file: &str) -> Topology {
    load_topology(&dir().join(file)).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn shipped_files_are_exactly_what_the_generator_writes() {
    let update = std::env::var_os("RSCC_UPDATE_TOPOLOGIES").is_some();
    for (file, kind, params) in shipped() {
        let t = generate(kind, &params).unwrap();
        let text = topo_json::to_json(&t);
        let path = dir().join(file);
        if update {
            std::fs::create_dir_all(dir()).unwrap();
            std::fs::write(&path, &text).unwrap();
        }
        let on_disk =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            on_disk == text,
            "{file} differs from `rscc topo generate {kind}` with {params:?}; \
             regenerate with RSCC_UPDATE_TOPOLOGIES=1 cargo test --test topologies -- shipped_files_are_exactly"
        );
    }
}

#[test]
fn every_json_in_topologies_is_a_shipped_one() {
    let mut on_disk: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|f| f.ends_with(".json"))
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = shipped().iter().map(|(f, _, _)| f.to_string()).collect();
    listed.sort();
    assert_eq!(on_disk, listed);
}

/// Sum of capacities of a rank's links of one kind, (egress, ingress).
fn kind_bw(t: &Topology, rank: usize, kind: &str) -> (f64, f64) {
    use petgraph::Direction::{Incoming, Outgoing};
    let n = t.ranks[rank];
    let sum = |d| {
        t.graph
            .edges_directed(n, d)
            .filter(|e| e.weight().kind == kind)
            .map(|e| e.weight().capacity_gbps())
            .sum::<f64>()
    };
    (sum(Outgoing), sum(Incoming))
}

struct Facts {
    file: &'static str,
    name: &'static str,
    ranks: usize,
    hosts: usize,
    sms: Option<u32>,
    /// Link kind whose per-GPU capacity is checked, and that capacity.
    kind: &'static str,
    kind_gbps: f64,
    /// Total per-GPU egress = ingress (`Topology::gpu_bandwidth`).
    total_gbps: f64,
    nics: usize,
    switches: usize,
}

const FACTS: &[Facts] = &[
    Facts {
        file: "ring8.json",
        name: "ring8",
        ranks: 8,
        hosts: 1,
        sms: None,
        kind: "nvlink",
        kind_gbps: 50.0,
        total_gbps: 50.0,
        nics: 0,
        switches: 0,
    },
    Facts {
        file: "dgx1-v100.json",
        name: "dgx1-v100",
        ranks: 8,
        hosts: 1,
        sms: Some(80),
        kind: "nvlink",
        kind_gbps: 150.0,
        total_gbps: 150.0,
        nics: 0,
        switches: 0,
    },
    Facts {
        file: "dgx2-v100.json",
        name: "dgx2-v100",
        ranks: 16,
        hosts: 1,
        sms: Some(80),
        kind: "nvlink",
        kind_gbps: 150.0,
        total_gbps: 150.0,
        nics: 0,
        switches: 1,
    },
    Facts {
        file: "dgx-a100.json",
        name: "dgx-a100",
        ranks: 8,
        hosts: 1,
        sms: Some(108),
        kind: "nvlink",
        kind_gbps: 300.0,
        total_gbps: 331.5,
        nics: 8,
        switches: 1,
    },
    Facts {
        file: "dgx-h100.json",
        name: "dgx-h100",
        ranks: 8,
        hosts: 1,
        sms: Some(132),
        kind: "nvlink",
        kind_gbps: 450.0,
        total_gbps: 513.0,
        nics: 8,
        switches: 1,
    },
    Facts {
        file: "mi300x.json",
        name: "mi300x",
        ranks: 8,
        hosts: 1,
        sms: Some(304),
        kind: "xgmi",
        kind_gbps: 448.0,
        total_gbps: 448.0,
        nics: 0,
        switches: 0,
    },
    Facts {
        file: "cpu-shm.json",
        name: "cpu-shm8",
        ranks: 8,
        hosts: 1,
        sms: None,
        kind: "shm",
        kind_gbps: 70.0,
        total_gbps: 70.0,
        nics: 0,
        switches: 0,
    },
    Facts {
        file: "dgx-h100x2.json",
        name: "dgx-h100x2",
        ranks: 16,
        hosts: 2,
        sms: Some(132),
        kind: "nvlink",
        kind_gbps: 450.0,
        total_gbps: 513.0,
        nics: 16,
        switches: 2 + 8,
    },
    Facts {
        file: "dgx-a100x4.json",
        name: "dgx-a100x4",
        ranks: 32,
        hosts: 4,
        sms: Some(108),
        kind: "nvlink",
        kind_gbps: 300.0,
        total_gbps: 331.5,
        nics: 32,
        switches: 4 + 8,
    },
];

#[test]
fn shipped_files_have_their_facts() {
    for f in FACTS {
        let t = load(f.file);
        assert_eq!(t.name, f.name, "{}", f.file);
        assert_eq!(t.num_ranks(), f.ranks, "{}", f.file);
        assert_eq!(t.num_hosts(), f.hosts, "{}", f.file);
        assert!(!t.description.is_empty(), "{}", f.file);
        let count = |k| t.graph.node_weights().filter(|n| n.kind == k).count();
        assert_eq!(count(rscc::ir::NodeKind::Nic), f.nics, "{}", f.file);
        assert_eq!(count(rscc::ir::NodeKind::Switch), f.switches, "{}", f.file);
        for r in 0..t.num_ranks() {
            let node = t.node(t.ranks[r]);
            assert_eq!(node.rank, Some(r));
            assert_eq!(node.sms, f.sms, "{} rank {r}", f.file);
            let (o, i) = kind_bw(&t, r, f.kind);
            assert!(
                (o - f.kind_gbps).abs() < 1e-9 && (i - f.kind_gbps).abs() < 1e-9,
                "{} rank {r}: {} {o}/{i}",
                f.file,
                f.kind
            );
            let (o, i) = t.gpu_bandwidth(r);
            assert!(
                (o - f.total_gbps).abs() < 1e-9 && (i - f.total_gbps).abs() < 1e-9,
                "{} rank {r}: total {o}/{i}",
                f.file
            );
        }
        // Every rank pair has a route.
        let routes = t.all_routes();
        for (s, row) in routes.iter().enumerate() {
            for (d, r) in row.iter().enumerate() {
                assert_eq!(r.is_some(), s != d, "{}: route {s} -> {d}", f.file);
            }
        }
        // Ranks of one host are contiguous: host of rank r is h{r / 8 or 16}.
        if f.hosts > 1 {
            let per = f.ranks / f.hosts;
            for r in 0..f.ranks {
                assert_eq!(t.host_of(r), format!("h{}", r / per), "{}", f.file);
            }
        }
    }
}

#[test]
fn routes_take_the_expected_paths() {
    // DGX-1: ranks 0 and 5 share no NVLink, so the route relays through a GPU.
    let t = load("dgx1-v100.json");
    let r = t.route(0, 5).unwrap();
    assert!(r.through_gpu);
    assert_eq!(r.links.len(), 2);
    let r = t.route(0, 1).unwrap();
    assert_eq!((r.links.len(), r.bottleneck_gbps), (1, 50.0));
    // A100 × 4: inside a host over the NVSwitch, across hosts over the rail.
    let t = load("dgx-a100x4.json");
    let r = t.route(0, 7).unwrap();
    assert_eq!(r.links.len(), 2);
    assert!((r.alpha_us - 0.7).abs() < 1e-9);
    let r = t.route(3, 8 + 3).unwrap();
    // gpu -> nic (pcie) -> rail3 (ib) -> nic -> gpu
    assert_eq!(r.links.len(), 4, "{r:?}");
    assert!(!r.through_gpu);
    assert_eq!(r.bottleneck_gbps, 25.0);
    assert!((r.alpha_us - (1.0 + 1.3 + 1.3 + 1.0)).abs() < 1e-9);
}

// ------------------------------------------------- cut bound cross-check

/// Edmonds–Karp max-flow on a small graph with f64 capacities.
struct Flow {
    head: Vec<Vec<usize>>,
    to: Vec<usize>,
    cap: Vec<f64>,
}

impl Flow {
    fn new(n: usize) -> Self {
        Flow {
            head: vec![Vec::new(); n],
            to: Vec::new(),
            cap: Vec::new(),
        }
    }
    fn add(&mut self, u: usize, v: usize, c: f64) {
        self.head[u].push(self.to.len());
        self.to.push(v);
        self.cap.push(c);
        self.head[v].push(self.to.len());
        self.to.push(u);
        self.cap.push(0.0);
    }
    fn max_flow(mut self, s: usize, t: usize) -> f64 {
        let mut total = 0.0;
        loop {
            let mut prev = vec![usize::MAX; self.head.len()];
            let mut q = VecDeque::from([s]);
            prev[s] = usize::MAX - 1;
            while let Some(u) = q.pop_front() {
                for &e in &self.head[u] {
                    let v = self.to[e];
                    if prev[v] == usize::MAX && self.cap[e] > 1e-12 {
                        prev[v] = e;
                        q.push_back(v);
                    }
                }
            }
            if prev[t] == usize::MAX {
                return total;
            }
            let mut f = f64::INFINITY;
            let mut v = t;
            while v != s {
                let e = prev[v];
                f = f.min(self.cap[e]);
                v = self.to[e ^ 1];
            }
            let mut v = t;
            while v != s {
                let e = prev[v];
                self.cap[e] -= f;
                self.cap[e ^ 1] += f;
                v = self.to[e ^ 1];
            }
            total += f;
        }
    }
}

/// Is x feasible for reduce-scatter (synthesis.md §5.1: the AG test on the
/// reversed graph, capacities scaled by x, a unit source edge into every GPU)?
fn rs_feasible(t: &Topology, x: f64) -> bool {
    use petgraph::visit::EdgeRef;
    let n = t.graph.node_count();
    let src = n;
    let ranks = t.num_ranks() as f64;
    t.ranks.iter().all(|&v| {
        let mut f = Flow::new(n + 1);
        for e in t.graph.edge_references() {
            // Reversed: e.target() -> e.source().
            f.add(
                e.target().index(),
                e.source().index(),
                x * e.weight().capacity_gbps(),
            );
        }
        for &u in &t.ranks {
            f.add(src, u.index(), 1.0);
        }
        f.max_flow(src, v.index()) >= ranks * (1.0 - 1e-9)
    })
}

/// x* is the bound: feasible at x*, infeasible just below it.
fn assert_bound(t: &Topology, x_star: f64) {
    assert!(
        rs_feasible(t, x_star * (1.0 + 1e-9)),
        "{}: infeasible at x* = {x_star}",
        t.name
    );
    assert!(
        !rs_feasible(t, x_star * (1.0 - 1e-6)),
        "{}: feasible below x* = {x_star}",
        t.name
    );
}

#[test]
fn shipped_topologies_reproduce_the_cut_bounds_of_synthesis_md_6() {
    // Ring(8) unit links: 7/2 rounds per chunk; at 25 GB/s per link, 7/50.
    assert_bound(&load("ring8.json"), 7.0 / 50.0);
    assert_bound(&load("dgx1-v100.json"), 7.0 / 150.0);
    assert_bound(&load("dgx2-v100.json"), 1.0 / 10.0);
    assert_bound(&load("dgx-a100.json"), 7.0 / 300.0);
    assert_bound(&load("dgx-a100x4.json"), 3.0 / 25.0);
    assert_bound(&load("dgx-h100.json"), 7.0 / 450.0);
    assert_bound(&load("dgx-h100x2.json"), 3.0 / 100.0);
    assert_bound(&load("mi300x.json"), 7.0 / 448.0);
    assert_bound(&load("cpu-shm.json"), 7.0 / 70.0);
}

#[test]
fn generated_multi_host_variants_reproduce_the_cut_bounds() {
    let hosts = |h| GenParams {
        hosts: Some(h),
        ..Default::default()
    };
    assert_bound(&generate("dgx-a100", &hosts(2)).unwrap(), 3.0 / 65.0);
    assert_bound(&generate("dgx-h100", &hosts(4)).unwrap(), 31.0 / 500.0);
    // FullyConnected(8) unit links: 1 round per chunk; at 25 GB/s, 1/25.
    assert_bound(
        &generate("fully-connected", &GenParams::default()).unwrap(),
        1.0 / 25.0,
    );
}

/// Parallel links of one direction with equal attributes add up: two
/// 50 GB/s entries between a pair are the same machine as one entry with
/// `count: 2` — the same bound, the same routes, the same schedule, the
/// same simulated time (docs/topology-format.md: "several links between
/// the same pair add up").
#[test]
fn parallel_entries_add_up_like_a_count() {
    let gpus = r#""nodes":[{"id":"g0","kind":"gpu","rank":0},{"id":"g1","kind":"gpu","rank":1},{"id":"g2","kind":"gpu","rank":2}]"#;
    let two = format!(
        r#"{{"name":"p",{gpus},"links":[
          {{"from":"g0","to":"g1","bw_gbps":50,"alpha_us":1,"kind":"nvlink"}},
          {{"from":"g0","to":"g1","bw_gbps":50,"alpha_us":1,"kind":"nvlink"}},
          {{"from":"g1","to":"g2","bw_gbps":50,"alpha_us":1,"kind":"nvlink"}},
          {{"from":"g2","to":"g0","bw_gbps":25,"alpha_us":1,"kind":"nvlink"}}]}}"#
    );
    let counted = format!(
        r#"{{"name":"p",{gpus},"links":[
          {{"from":"g0","to":"g1","bw_gbps":50,"alpha_us":1,"count":2,"kind":"nvlink"}},
          {{"from":"g1","to":"g2","bw_gbps":50,"alpha_us":1,"kind":"nvlink"}},
          {{"from":"g2","to":"g0","bw_gbps":25,"alpha_us":1,"kind":"nvlink"}}]}}"#
    );
    let (a, b) = (
        topo_json::parse(&two, "two.json").unwrap(),
        topo_json::parse(&counted, "counted.json").unwrap(),
    );
    assert_eq!(a.graph.edge_count(), b.graph.edge_count());
    let ba = rscc::bound::bandwidth_bound(&a, rscc::ir::Collective::ReduceScatter).unwrap();
    let bb = rscc::bound::bandwidth_bound(&b, rscc::ir::Collective::ReduceScatter).unwrap();
    assert_eq!(ba.x_star, bb.x_star);
    for s in 0..3 {
        for d in (0..3).filter(|&d| d != s) {
            let (ra, rb) = (a.route(s, d).unwrap(), b.route(s, d).unwrap());
            assert_eq!(ra.bottleneck_gbps, rb.bottleneck_gbps, "{s} -> {d}");
        }
    }
    let opts = rscc::compile::CompileOptions::default();
    let (ca, cb) = (
        rscc::compile::compile(&a, &opts).unwrap(),
        rscc::compile::compile(&b, &opts).unwrap(),
    );
    assert_eq!(
        rscc::back::msccl_xml::to_string(&ca.program),
        rscc::back::msccl_xml::to_string(&cb.program)
    );
    let so = rscc::sim::SimOptions::default();
    let t = |t: &Topology| {
        rscc::sim::simulate(&ca.program, t, 1 << 30, &so)
            .unwrap()
            .time_us
    };
    assert_eq!(t(&a), t(&b));
    // Different attributes stay separate links.
    let mixed = two.replacen(
        r#""bw_gbps":50,"alpha_us":1,"kind":"nvlink"},"#,
        r#""bw_gbps":24,"alpha_us":1,"kind":"pcie"},"#,
        1,
    );
    assert_ne!(mixed, two);
    let m = topo_json::parse(&mixed, "mixed.json").unwrap();
    assert_eq!(m.graph.edge_count(), a.graph.edge_count() + 2);
}

/// Parallel links of one kind add up whatever their rates and α (two xGMI
/// bridges of different widths between a pair): one bundle with the sum
/// of their capacities and the least α, so the cut bound, every route's
/// bottleneck and the synthesized schedule see both. Links of different
/// kinds (NVLink beside PCIe) stay two transports, and a route takes one.
#[test]
fn parallel_links_of_one_kind_add_up_whatever_their_rates() {
    let gpus = r#""nodes":[{"id":"g0","kind":"gpu","rank":0},{"id":"g1","kind":"gpu","rank":1}]"#;
    let pair = |second: &str| {
        format!(
            r#"{{"name":"p",{gpus},"links":[
              {{"from":"g0","to":"g1","bw_gbps":50,"alpha_us":1,"kind":"xgmi"}},
              {second}]}}"#
        )
    };
    let uneven = topo_json::parse(
        &pair(r#"{"from":"g0","to":"g1","bw_gbps":25,"alpha_us":2,"count":2,"kind":"xgmi"}"#),
        "uneven.json",
    )
    .unwrap();
    assert_eq!(uneven.graph.edge_count(), 2, "one bundle per direction");
    let r = uneven.route(0, 1).unwrap();
    assert!((r.bottleneck_gbps - 100.0).abs() < 1e-9, "{r:?}");
    assert_eq!(r.alpha_us, 1.0);
    let b = rscc::bound::bandwidth_bound(&uneven, rscc::ir::Collective::ReduceScatter).unwrap();
    let one = topo_json::parse(
        &pair(r#"{"from":"g0","to":"g1","bw_gbps":50,"alpha_us":1,"kind":"xgmi"}"#),
        "even.json",
    )
    .unwrap();
    let even = rscc::bound::bandwidth_bound(&one, rscc::ir::Collective::ReduceScatter).unwrap();
    // 100 GB/s in each direction against 100 GB/s: the same limit.
    assert!(
        (b.x_star_f64() - even.x_star_f64()).abs() < 1e-12,
        "{} vs {}",
        b.x_star_string(),
        even.x_star_string()
    );
    // Written back, the bundle keeps its capacity.
    let again = topo_json::parse(&topo_json::to_json(&uneven), "again.json").unwrap();
    assert!((again.route(0, 1).unwrap().bottleneck_gbps - 100.0).abs() < 1e-9);
    // NVLink beside PCIe: two links per direction; the route takes the
    // NVLink (least α), and the bound counts what routes can use.
    let kinds = topo_json::parse(
        &pair(r#"{"from":"g0","to":"g1","bw_gbps":25,"alpha_us":2,"kind":"pcie"}"#),
        "kinds.json",
    )
    .unwrap();
    assert_eq!(kinds.graph.edge_count(), 4);
    assert_eq!(kinds.route(0, 1).unwrap().bottleneck_gbps, 50.0);
    // `rscc bound` counts the NVLink across the cut and names the PCIe
    // link as capacity no route takes.
    let r = rscc::bound::report::report(&kinds, rscc::ir::Collective::ReduceScatter, None).unwrap();
    let cut = &r.binding_cut;
    assert_eq!(cut.capacity_by_kind_gbps.get("xgmi"), Some(&50.0));
    assert_eq!(cut.unrouted_by_kind_gbps.get("pcie"), Some(&25.0));
}

/// The same on shipped machines: DGX-1, DGX-2 and 4 × DGX-A100 written
/// with one entry per physical link (no `count`) are the shipped files'
/// machines — the same links and the same cut bound.
#[test]
fn shipped_machines_written_link_by_link_are_the_same() {
    for file in ["dgx1-v100.json", "dgx2-v100.json", "dgx-a100x4.json"] {
        let text = std::fs::read_to_string(dir().join(file)).unwrap();
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let mut links = Vec::new();
        for l in v["links"].as_array().unwrap() {
            let c = l.get("count").and_then(|c| c.as_u64()).unwrap_or(1);
            let mut one = l.clone();
            one.as_object_mut().unwrap().remove("count");
            links.extend(std::iter::repeat_n(one, c as usize));
        }
        v["links"] = serde_json::Value::Array(links);
        let split = topo_json::parse(&v.to_string(), file).unwrap();
        let shipped = load(file);
        assert_eq!(
            split.graph.edge_count(),
            shipped.graph.edge_count(),
            "{file}"
        );
        let rs = rscc::ir::Collective::ReduceScatter;
        assert_eq!(
            rscc::bound::bandwidth_bound(&split, rs).unwrap().x_star,
            rscc::bound::bandwidth_bound(&shipped, rs).unwrap().x_star,
            "{file}"
        );
    }
}

/// Whose GPUs a machine has decides the runtime `rscc synth` targets: the
/// JSON `vendor`, else the links (xGMI: AMD; NVLink/NVSwitch: NVIDIA), and
/// an import's format says it for dumps with neither.
#[test]
fn the_gpus_vendor_picks_the_default_runtime() {
    use rscc::ir::{Runtime, Vendor};
    let load = |p: &str| rscc::front::load_topology(Path::new(p)).unwrap();
    let mi = load("topologies/mi300x.json");
    assert_eq!(mi.gpu_vendor(), Some(Vendor::Amd));
    assert_eq!(mi.default_runtime(), Runtime::Rccl);
    let h = load("topologies/dgx-h100.json");
    assert_eq!(h.gpu_vendor(), Some(Vendor::Nvidia));
    assert_eq!(h.default_runtime(), Runtime::Executor);
    // PCIe only: the RCCL XML format says AMD; the JSON round trip keeps it.
    let v = load("tests/data/real/rccl-xml/rccl_topo_8p_pcie_Vega20-gfx906_8GPU_PCIe.xml");
    assert!(v.graph.edge_weights().all(|l| l.kind != "xgmi"));
    assert_eq!(v.vendor, Some(Vendor::Amd));
    let back = rscc::front::topo_json::parse(&rscc::front::topo_json::to_json(&v), "v").unwrap();
    assert_eq!(back.vendor, Some(Vendor::Amd));
    assert_eq!(back.default_runtime(), Runtime::Rccl);
    // Its GPUs' memory comes from the dump's gcn (gfx906: 1 TB/s).
    let g0 = v.ranks[0];
    assert_eq!(v.graph[g0].mem_gbps, Some(1024.0));
    // A PCIe-only machine that says nothing is NVIDIA's executor's.
    let c = load("topologies/cpu-shm.json");
    assert_eq!(c.default_runtime(), Runtime::Executor);
}
