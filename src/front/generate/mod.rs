//! Topology generators: pure functions that build a [`Topology`] (no I/O).
//!
//! `generate(kind, params)` dispatches on the kind name (see [`KINDS`]);
//! there is one function per kind. Every constant is stated, with its
//! source, in the generated topology's `description` and in
//! docs/topology-format.md. Multi-host systems are built by
//! [`super::hosts::replicate_hosts`] (rail-optimised, topologies.md §2.10).
//!
//! The kinds live in `generic.rs` (ring, line, fully-connected, switch),
//! `nvidia.rs` (the DGX machines) and `amd_cpu.rs` (mi300x, cpu-shm); this
//! file holds the dispatch, the parameters and the helpers they share.

mod amd_cpu;
mod generic;
mod nvidia;
pub mod random;

pub use amd_cpu::{cpu_shm, mi300x};
pub use generic::{fully_connected, line, ring, switch};
pub use nvidia::{dgx1_v100, dgx2_v100, dgx_a100, dgx_h100, DGX1_NVLINKS};

use super::hosts::{replicate_hosts, RailParams};
use crate::ir::{Link, Node, NodeKind, Topology};
use petgraph::graph::{DiGraph, NodeIndex};

/// Every kind `generate` accepts.
pub const KINDS: &[&str] = &[
    "ring",
    "line",
    "fully-connected",
    "switch",
    "dgx1-v100",
    "dgx2-v100",
    "dgx-a100",
    "dgx-h100",
    "mi300x",
    "cpu-shm",
    "random",
];

/// Largest number of ranks a generator builds (keeps graphs and the
/// all-pairs route computations of later stages reasonable).
pub const MAX_RANKS: usize = 4096;
/// Largest N for `fully-connected` and `cpu-shm` (N·(N−1) directed links).
pub const MAX_MESH: usize = 256;

/// Optional parameters; `None` means the kind's default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GenParams {
    /// Number of GPUs (ranks) per host. Fixed machines accept only their own count.
    pub gpus: Option<usize>,
    /// Number of hosts, joined rail-optimised (default 1).
    pub hosts: Option<usize>,
    /// The kind's main per-link bandwidth, GB/s per direction (see each kind).
    pub bw_gbps: Option<f64>,
    /// The kind's main per-link α, µs.
    pub alpha_us: Option<f64>,
    /// Attach one NIC per GPU (only `mi300x` lets this be turned on or off;
    /// the DGX A100/H100 always have their NICs).
    pub nics: Option<bool>,
    /// NIC line rate, GB/s per direction (also the rail link rate).
    pub nic_gbps: Option<f64>,
    /// α of each NIC ↔ rail-switch link, µs.
    pub ib_alpha_us: Option<f64>,
    /// SM count stamped on every GPU (generic kinds only; default none).
    pub sms: Option<u32>,
    /// The seed of `random` (default 0).
    pub seed: Option<u64>,
}

use crate::ir::hardware::ALPHA_NET_US as IB_ALPHA_US;

/// Build a topology of the named kind.
pub fn generate(kind: &str, p: &GenParams) -> Result<Topology, String> {
    if kind != "random" && p.seed.is_some() {
        return Err(format!(
            "{kind} is not drawn at random; --seed applies to random only"
        ));
    }
    match kind {
        "ring" => ring(p),
        "line" => line(p),
        "fully-connected" => fully_connected(p),
        "switch" => switch(p),
        "dgx1-v100" => dgx1_v100(p),
        "dgx2-v100" => dgx2_v100(p),
        "dgx-a100" => dgx_a100(p),
        "dgx-h100" => dgx_h100(p),
        "mi300x" => mi300x(p),
        "cpu-shm" => cpu_shm(p),
        "random" => random::random(p),
        _ => Err(format!(
            "unknown topology kind \"{kind}\" (known: {})",
            KINDS.join(", ")
        )),
    }
}

/// The topologies shipped in `topologies/`: (file name, kind, parameters).
/// `tests/topologies.rs` regenerates each and compares with the file.
pub fn shipped() -> Vec<(&'static str, &'static str, GenParams)> {
    let hosts = |h: usize| GenParams {
        hosts: Some(h),
        ..GenParams::default()
    };
    vec![
        ("ring8.json", "ring", GenParams::default()),
        ("dgx1-v100.json", "dgx1-v100", GenParams::default()),
        ("dgx2-v100.json", "dgx2-v100", GenParams::default()),
        ("dgx-a100.json", "dgx-a100", GenParams::default()),
        ("dgx-h100.json", "dgx-h100", GenParams::default()),
        ("mi300x.json", "mi300x", GenParams::default()),
        ("cpu-shm.json", "cpu-shm", GenParams::default()),
        ("dgx-h100x2.json", "dgx-h100", hosts(2)),
        ("dgx-a100x4.json", "dgx-a100", hosts(4)),
    ]
}

// ---------------------------------------------------------------- helpers

struct Builder {
    g: DiGraph<Node, Link>,
}

impl Builder {
    fn new() -> Self {
        Builder { g: DiGraph::new() }
    }
    fn node(
        &mut self,
        id: String,
        kind: NodeKind,
        rank: Option<usize>,
        sms: Option<u32>,
    ) -> NodeIndex {
        self.g.add_node(Node {
            id,
            kind,
            rank,
            host: None,
            sms,
            mem_gbps: None,
        })
    }
    fn gpu(&mut self, rank: usize, sms: Option<u32>) -> NodeIndex {
        self.node(format!("gpu{rank}"), NodeKind::Gpu, Some(rank), sms)
    }
    /// A GPU of a known model: its SMs and memory bandwidth.
    fn gpu_of(&mut self, rank: usize, m: crate::ir::hardware::GpuModel) -> NodeIndex {
        let n = self.gpu(rank, Some(m.sms));
        self.g[n].mem_gbps = Some(m.mem_gbps);
        n
    }
    /// Both directions of a link, with equal attributes.
    fn duplex(
        &mut self,
        a: NodeIndex,
        b: NodeIndex,
        bw_gbps: f64,
        alpha_us: f64,
        count: u32,
        kind: &str,
    ) {
        let link = Link {
            bw_gbps,
            alpha_us,
            count,
            kind: kind.to_string(),
        };
        self.g.add_edge(a, b, link.clone());
        self.g.add_edge(b, a, link);
    }
    fn finish(self, name: String, description: String) -> Topology {
        Topology::new(name, description, self.g)
    }
}

fn positive(what: &str, v: Option<f64>, default: f64) -> Result<f64, String> {
    let x = v.unwrap_or(default);
    if x.is_finite() && x > 0.0 {
        Ok(x)
    } else {
        Err(format!("{what} must be a positive number, got {x}"))
    }
}

fn non_negative(what: &str, v: Option<f64>, default: f64) -> Result<f64, String> {
    let x = v.unwrap_or(default);
    if x.is_finite() && x >= 0.0 {
        Ok(x)
    } else {
        Err(format!("{what} must be a non-negative number, got {x}"))
    }
}

/// Number of GPUs for a generic kind: default `default`, at least `min`, at most `max`.
fn gpu_count(
    kind: &str,
    p: &GenParams,
    default: usize,
    min: usize,
    max: usize,
) -> Result<usize, String> {
    let n = p.gpus.unwrap_or(default);
    if n < min || n > max {
        return Err(format!(
            "{kind}: --gpus must be between {min} and {max}, got {n}"
        ));
    }
    Ok(n)
}

/// Fixed machines: `--gpus`, if given, must equal the machine's count.
fn fixed_count(kind: &str, p: &GenParams, n: usize) -> Result<usize, String> {
    match p.gpus {
        Some(g) if g != n => Err(format!(
            "{kind} has exactly {n} GPUs per host; --gpus {g} is not possible"
        )),
        _ => Ok(n),
    }
}

/// Reject parameters a kind does not use, so that a typo is not silently ignored.
fn unused(
    kind: &str,
    p: &GenParams,
    allow_hosts: bool,
    allow_nics: bool,
    allow_sms: bool,
) -> Result<(), String> {
    if !allow_hosts && p.hosts.is_some_and(|h| h != 1) {
        return Err(format!(
            "{kind} is a single-host topology without NICs; --hosts is only for dgx-a100, dgx-h100 and mi300x"
        ));
    }
    if !allow_nics && (p.nics.is_some() || p.nic_gbps.is_some() || p.ib_alpha_us.is_some()) {
        return Err(format!(
            "{kind} has no NICs; --nics, --nic-bw and --ib-alpha do not apply"
        ));
    }
    if !allow_sms && p.sms.is_some() {
        return Err(format!(
            "{kind} has a fixed SM count; --sms applies to generic kinds only"
        ));
    }
    Ok(())
}

fn fmt_num(x: f64) -> String {
    format!("{x}")
}

/// Join single-host `t` into `hosts` hosts, or return it unchanged when `hosts` is 1.
fn multi_host(t: Topology, p: &GenParams, nic_gbps: f64) -> Result<Topology, String> {
    let hosts = p.hosts.unwrap_or(1);
    if hosts == 0 {
        return Err("--hosts must be at least 1".into());
    }
    if hosts.saturating_mul(t.num_ranks()) > MAX_RANKS {
        return Err(format!(
            "--hosts {hosts} × {} GPUs exceeds the generator limit of {MAX_RANKS} ranks",
            t.num_ranks()
        ));
    }
    let ib_alpha = non_negative("--ib-alpha", p.ib_alpha_us, IB_ALPHA_US)?;
    if hosts == 1 {
        // One host: no host names, like every other single-host kind.
        return Ok(t);
    }
    replicate_hosts(
        &t,
        hosts,
        RailParams {
            nic_gbps,
            alpha_us: ib_alpha,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::front::topo_json;

    #[test]
    fn dgx1_matrix_is_symmetric_with_six_links_per_gpu() {
        for (i, row) in DGX1_NVLINKS.iter().enumerate() {
            assert_eq!(row[i], 0);
            assert_eq!(row.iter().sum::<u32>(), 6, "row {i}");
            for (j, &c) in row.iter().enumerate() {
                assert_eq!(c, DGX1_NVLINKS[j][i]);
            }
        }
        let pairs: usize = (0..8)
            .flat_map(|i| (i + 1..8).map(move |j| (i, j)))
            .filter(|&(i, j)| DGX1_NVLINKS[i][j] > 0)
            .count();
        assert_eq!(pairs, 16);
    }

    #[test]
    fn every_kind_generates_a_valid_topology() {
        for &k in KINDS {
            let t = generate(k, &GenParams::default()).unwrap();
            topo_json::validate(&t).unwrap();
            assert!(!t.description.is_empty());
            // Round trip through the JSON writer and reader.
            let text = topo_json::to_json(&t);
            let back = topo_json::parse(&text, "mem").unwrap();
            assert_eq!(back.num_ranks(), t.num_ranks());
            assert_eq!(back.graph.edge_count(), t.graph.edge_count(), "{k}");
            assert_eq!(topo_json::to_json(&back), text, "{k}");
        }
    }

    #[test]
    fn ring_shapes() {
        let t = ring(&GenParams::default()).unwrap();
        assert_eq!(t.name, "ring8");
        assert_eq!(t.graph.edge_count(), 16);
        for r in 0..8 {
            assert_eq!(t.gpu_bandwidth(r), (50.0, 50.0));
        }
        let two = ring(&GenParams {
            gpus: Some(2),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(two.graph.edge_count(), 2);
        let l = line(&GenParams {
            gpus: Some(4),
            bw_gbps: Some(10.0),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(l.graph.edge_count(), 6);
        assert_eq!(l.gpu_bandwidth(0), (10.0, 10.0));
        assert_eq!(l.gpu_bandwidth(1), (20.0, 20.0));
    }

    #[test]
    fn switch_and_fully_connected() {
        let p = GenParams {
            gpus: Some(5),
            bw_gbps: Some(100.0),
            alpha_us: Some(0.5),
            sms: Some(10),
            ..Default::default()
        };
        let s = switch(&p).unwrap();
        assert_eq!(s.num_ranks(), 5);
        assert_eq!(s.gpu_bandwidth(3), (100.0, 100.0));
        assert_eq!(s.min_sms(), Some(10));
        let r = s.route(0, 4).unwrap();
        assert_eq!(r.links.len(), 2);
        assert!((r.alpha_us - 1.0).abs() < 1e-12);
        let f = fully_connected(&p).unwrap();
        assert_eq!(f.graph.edge_count(), 20);
        assert_eq!(f.gpu_bandwidth(0), (400.0, 400.0));
    }

    #[test]
    fn machines_have_their_constants() {
        let d = dgx1_v100(&GenParams::default()).unwrap();
        assert_eq!(d.min_sms(), Some(80));
        for r in 0..8 {
            assert_eq!(d.gpu_bandwidth(r), (150.0, 150.0));
        }
        let a = dgx_a100(&GenParams::default()).unwrap();
        assert_eq!(a.num_ranks(), 8);
        assert_eq!(a.min_sms(), Some(108));
        assert_eq!(a.gpu_bandwidth(0), (300.0 + 31.5, 300.0 + 31.5));
        let h = dgx_h100(&GenParams {
            hosts: Some(2),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(h.name, "dgx-h100x2");
        assert_eq!(h.num_ranks(), 16);
        assert_eq!(h.num_hosts(), 2);
        assert_eq!(h.host_of(9), "h1");
        let m = mi300x(&GenParams::default()).unwrap();
        assert_eq!(m.gpu_bandwidth(0), (448.0, 448.0));
        assert_eq!(m.min_sms(), Some(304));
        let mn = mi300x(&GenParams {
            nics: Some(true),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(mn.graph.node_count(), 16);
    }

    #[test]
    fn bad_parameters_are_errors_not_panics() {
        let bad = [
            (
                "ring",
                GenParams {
                    gpus: Some(1),
                    ..Default::default()
                },
            ),
            (
                "ring",
                GenParams {
                    gpus: Some(0),
                    ..Default::default()
                },
            ),
            (
                "ring",
                GenParams {
                    gpus: Some(usize::MAX),
                    ..Default::default()
                },
            ),
            (
                "fully-connected",
                GenParams {
                    gpus: Some(1000),
                    ..Default::default()
                },
            ),
            (
                "ring",
                GenParams {
                    bw_gbps: Some(0.0),
                    ..Default::default()
                },
            ),
            (
                "ring",
                GenParams {
                    bw_gbps: Some(f64::NAN),
                    ..Default::default()
                },
            ),
            (
                "ring",
                GenParams {
                    alpha_us: Some(-1.0),
                    ..Default::default()
                },
            ),
            (
                "ring",
                GenParams {
                    hosts: Some(2),
                    ..Default::default()
                },
            ),
            (
                "dgx1-v100",
                GenParams {
                    gpus: Some(4),
                    ..Default::default()
                },
            ),
            (
                "dgx1-v100",
                GenParams {
                    sms: Some(4),
                    ..Default::default()
                },
            ),
            (
                "dgx2-v100",
                GenParams {
                    nics: Some(true),
                    ..Default::default()
                },
            ),
            (
                "dgx-a100",
                GenParams {
                    hosts: Some(0),
                    ..Default::default()
                },
            ),
            (
                "ring",
                GenParams {
                    seed: Some(3),
                    ..Default::default()
                },
            ),
            (
                "random",
                GenParams {
                    gpus: Some(8),
                    ..Default::default()
                },
            ),
            (
                "dgx-a100",
                GenParams {
                    hosts: Some(usize::MAX),
                    ..Default::default()
                },
            ),
            (
                "dgx-a100",
                GenParams {
                    nics: Some(false),
                    ..Default::default()
                },
            ),
            (
                "mi300x",
                GenParams {
                    hosts: Some(2),
                    nics: Some(false),
                    ..Default::default()
                },
            ),
            ("torus", GenParams::default()),
        ];
        for (k, p) in bad {
            let e = generate(k, &p).unwrap_err();
            assert!(!e.is_empty() && !e.contains('\n'), "{k}: {e}");
        }
    }
}
