//! Topology generators: pure functions that build a [`Topology`] (no I/O).
//!
//! `generate(kind, params)` dispatches on the kind name (see [`KINDS`]);
//! there is one function per kind. Every constant is stated, with its
//! source, in the generated topology's `description` and in
//! docs/topology-format.md. Multi-host systems are built by
//! [`super::hosts::replicate_hosts`] (rail-optimised, topologies.md §2.10).

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
}

use crate::ir::hardware::{
    known, ALPHA_GPU_LINK_US, ALPHA_NET_US as IB_ALPHA_US, NVLINK_GBPS, PCIE_ALPHA_US,
    PCIE_GEN4_X16_GBPS, PCIE_GEN5_X16_GBPS,
};

/// Build a topology of the named kind.
pub fn generate(kind: &str, p: &GenParams) -> Result<Topology, String> {
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
        })
    }
    fn gpu(&mut self, rank: usize, sms: Option<u32>) -> NodeIndex {
        self.node(format!("gpu{rank}"), NodeKind::Gpu, Some(rank), sms)
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

// ---------------------------------------------------------------- generic kinds

const GENERIC_GBPS: f64 = 25.0;
const GENERIC_ALPHA_US: f64 = 1.0;
const GENERIC_SOURCE: &str = "Defaults 25 GB/s per direction per link (one NVLink 2/3/4 link, topologies.md §1) and α 1 µs; both can be set with --bw/--alpha. Shape as in SCCL's generic topologies (msccl-tools msccl/topologies/generic.py, synthesis.md §4.3).";

fn generic_links(p: &GenParams) -> Result<(f64, f64), String> {
    Ok((
        positive("--bw", p.bw_gbps, GENERIC_GBPS)?,
        non_negative("--alpha", p.alpha_us, GENERIC_ALPHA_US)?,
    ))
}

/// N GPUs in a bidirectional ring: gpu i ↔ gpu i+1 mod N (one link per
/// neighbour pair; with N = 2 a single duplex link).
pub fn ring(p: &GenParams) -> Result<Topology, String> {
    unused("ring", p, false, false, true)?;
    let n = gpu_count("ring", p, 8, 2, MAX_RANKS)?;
    let (bw, alpha) = generic_links(p)?;
    let mut b = Builder::new();
    let g: Vec<_> = (0..n).map(|r| b.gpu(r, p.sms)).collect();
    let pairs = if n == 2 { 1 } else { n };
    for i in 0..pairs {
        b.duplex(g[i], g[(i + 1) % n], bw, alpha, 1, "nvlink");
    }
    let desc = format!(
        "{n} GPUs in a bidirectional ring, gpu i <-> gpu i+1 mod {n}, one {} GB/s link per neighbour pair per direction, alpha {} us. {GENERIC_SOURCE}",
        fmt_num(bw),
        fmt_num(alpha)
    );
    Ok(b.finish(format!("ring{n}"), desc))
}

/// N GPUs in a line: gpu i ↔ gpu i+1 for i < N−1.
pub fn line(p: &GenParams) -> Result<Topology, String> {
    unused("line", p, false, false, true)?;
    let n = gpu_count("line", p, 8, 2, MAX_RANKS)?;
    let (bw, alpha) = generic_links(p)?;
    let mut b = Builder::new();
    let g: Vec<_> = (0..n).map(|r| b.gpu(r, p.sms)).collect();
    for i in 0..n - 1 {
        b.duplex(g[i], g[i + 1], bw, alpha, 1, "nvlink");
    }
    let desc = format!(
        "{n} GPUs in a line, gpu i <-> gpu i+1, one {} GB/s link per neighbour pair per direction, alpha {} us. {GENERIC_SOURCE}",
        fmt_num(bw),
        fmt_num(alpha)
    );
    Ok(b.finish(format!("line{n}"), desc))
}

/// N GPUs with one direct link between every pair.
pub fn fully_connected(p: &GenParams) -> Result<Topology, String> {
    unused("fully-connected", p, false, false, true)?;
    let n = gpu_count("fully-connected", p, 8, 2, MAX_MESH)?;
    let (bw, alpha) = generic_links(p)?;
    let mut b = Builder::new();
    let g: Vec<_> = (0..n).map(|r| b.gpu(r, p.sms)).collect();
    for i in 0..n {
        for j in i + 1..n {
            b.duplex(g[i], g[j], bw, alpha, 1, "nvlink");
        }
    }
    let desc = format!(
        "{n} GPUs fully connected, one {} GB/s link per pair per direction, alpha {} us. {GENERIC_SOURCE}",
        fmt_num(bw),
        fmt_num(alpha)
    );
    Ok(b.finish(format!("fully-connected{n}"), desc))
}

/// N GPUs on one switch vertex; `--bw` is each GPU's port bandwidth.
pub fn switch(p: &GenParams) -> Result<Topology, String> {
    unused("switch", p, false, false, true)?;
    let n = gpu_count("switch", p, 8, 2, MAX_RANKS)?;
    let (bw, alpha) = generic_links(p)?;
    let mut b = Builder::new();
    let g: Vec<_> = (0..n).map(|r| b.gpu(r, p.sms)).collect();
    let sw = b.node("switch".into(), NodeKind::Switch, None, None);
    for &v in &g {
        b.duplex(v, sw, bw, alpha, 1, "nvlink");
    }
    let desc = format!(
        "{n} GPUs on one switch (forwards, never reduces), one {} GB/s port per GPU per direction, alpha {} us per GPU <-> switch link (2x per GPU-to-GPU route). {GENERIC_SOURCE}",
        fmt_num(bw),
        fmt_num(alpha)
    );
    Ok(b.finish(format!("switch{n}"), desc))
}

// ---------------------------------------------------------------- NVIDIA machines

/// DGX-1 NVLink counts in the synthesis tools' numbering (synthesis.md §4.1:
/// msccl-tools `nvidia.py::dgx1`, TE-CCL `dgx1.py`/`ndv2.py`, TACCL `ndv2`).
pub const DGX1_NVLINKS: [[u32; 8]; 8] = [
    [0, 2, 1, 1, 2, 0, 0, 0],
    [2, 0, 1, 2, 0, 1, 0, 0],
    [1, 1, 0, 2, 0, 0, 2, 0],
    [1, 2, 2, 0, 0, 0, 0, 1],
    [2, 0, 0, 0, 0, 2, 1, 1],
    [0, 1, 0, 0, 2, 0, 1, 2],
    [0, 0, 2, 0, 1, 1, 0, 2],
    [0, 0, 0, 1, 1, 2, 2, 0],
];

/// DGX-1 (8 × V100, hybrid cube-mesh), NVLink only.
pub fn dgx1_v100(p: &GenParams) -> Result<Topology, String> {
    unused("dgx1-v100", p, false, false, false)?;
    let n = fixed_count("dgx1-v100", p, 8)?;
    let bw = positive("--bw", p.bw_gbps, NVLINK_GBPS)?;
    let alpha = non_negative("--alpha", p.alpha_us, ALPHA_GPU_LINK_US)?;
    let mut b = Builder::new();
    let g: Vec<_> = (0..n).map(|r| b.gpu(r, Some(known("v100").sms))).collect();
    for i in 0..n {
        for j in i + 1..n {
            let c = DGX1_NVLINKS[i][j];
            if c > 0 {
                b.duplex(g[i], g[j], bw, alpha, c, "nvlink");
            }
        }
    }
    let desc = format!(
        "DGX-1 / NDv2: 8 x V100 SXM2 (80 SMs each) in the hybrid cube-mesh, NVLink only (no PCIe, CPU or NIC nodes). \
Per-pair NVLink counts in the synthesis tools' numbering (synthesis.md §4.1: msccl-tools nvidia.py::dgx1, TE-CCL dgx1.py/ndv2.py, TACCL generic.py::ndv2; nvidia-smi GPU i is tool index p[i], p = (0,2,3,1,4,6,7,5), topologies.md §2.1), \
each link {} GB/s per direction (NVLink 2, topologies.md §1), 6 links = {} GB/s per GPU; alpha {} us per NVLink (TE-CCL NDv2, topologies.md §3). \
Reduce-scatter cut bound x* = 7/150 (algbw 171.43 GB/s, synthesis.md §6).",
        fmt_num(bw),
        fmt_num(6.0 * bw),
        fmt_num(alpha)
    );
    Ok(b.finish("dgx1-v100".into(), desc))
}

/// DGX-2 (16 × V100 on NVSwitch), one switch vertex, 6 NVLinks per GPU port.
pub fn dgx2_v100(p: &GenParams) -> Result<Topology, String> {
    unused("dgx2-v100", p, false, false, false)?;
    let n = fixed_count("dgx2-v100", p, 16)?;
    let bw = positive("--bw", p.bw_gbps, NVLINK_GBPS)?;
    let alpha = non_negative("--alpha", p.alpha_us, 0.35)?;
    let mut b = Builder::new();
    let g: Vec<_> = (0..n).map(|r| b.gpu(r, Some(known("v100").sms))).collect();
    let sw = b.node("nvswitch".into(), NodeKind::Switch, None, None);
    for &v in &g {
        b.duplex(v, sw, bw, alpha, 6, "nvlink");
    }
    let desc = format!(
        "DGX-2 / HGX-2: 16 x V100 SXM3 (80 SMs each). The 12 NVSwitch chips are modelled as one switch vertex (nvidia-smi shows NV6 for every pair, topologies.md §2.2): \
each GPU has a port of 6 NVLink 2 links x {} GB/s = {} GB/s per direction (topologies.md §1, §2.2; synthesis.md §4.2 'Nominal hardware'), \
alpha {} us per GPU <-> switch link (TE-CCL dgx2.py, topologies.md §3). No NICs. Reduce-scatter cut bound x* = 1/10 (algbw 160 GB/s, synthesis.md §6).",
        fmt_num(bw),
        fmt_num(6.0 * bw),
        fmt_num(alpha)
    );
    Ok(b.finish("dgx2-v100".into(), desc))
}

/// An 8-GPU NVSwitch machine with one NIC per GPU.
struct SwitchedMachine {
    kind: &'static str,
    sms: u32,
    nvlinks: u32,
    nic_gbps: f64,
    pcie_gbps: f64,
    about: &'static str,
}

fn switched_machine(m: &SwitchedMachine, p: &GenParams) -> Result<Topology, String> {
    unused(m.kind, p, true, true, false)?;
    if p.nics == Some(false) {
        return Err(format!(
            "{} always has its 8 NICs; --nics false is not possible",
            m.kind
        ));
    }
    let n = fixed_count(m.kind, p, 8)?;
    let bw = positive("--bw", p.bw_gbps, NVLINK_GBPS)?;
    let alpha = non_negative("--alpha", p.alpha_us, 0.35)?;
    let nic = positive("--nic-bw", p.nic_gbps, m.nic_gbps)?;
    let ib_alpha = non_negative("--ib-alpha", p.ib_alpha_us, IB_ALPHA_US)?;
    let mut b = Builder::new();
    let g: Vec<_> = (0..n).map(|r| b.gpu(r, Some(m.sms))).collect();
    let sw = b.node("nvswitch".into(), NodeKind::Switch, None, None);
    for &v in &g {
        b.duplex(v, sw, bw, alpha, m.nvlinks, "nvlink");
    }
    for (r, &v) in g.iter().enumerate() {
        let nc = b.node(format!("nic{r}"), NodeKind::Nic, None, None);
        b.duplex(v, nc, m.pcie_gbps, PCIE_ALPHA_US, 1, "pcie");
    }
    let port = m.nvlinks as f64 * bw;
    let desc = format!(
        "{} One switch vertex 'nvswitch' stands for the NVSwitch chips: each GPU has a port of {} NVLink links x {} GB/s = {} GB/s per direction (topologies.md §1), \
alpha {} us per GPU <-> switch link (TE-CCL's NVSwitch alpha for DGX-2, topologies.md §3). \
NIC k serves GPU k (one compute NIC per GPU), {} GB/s per direction, joined to its GPU over PCIe at {} GB/s per direction (hardware rate, above the NIC's, so the NIC binds), alpha {} us (topologies.md §3). \
On one host the NICs join no switch and add no GPU ingress. With --hosts H > 1, NIC k of every host links to rail switch rail{{k}} (rail-optimised fabric, topologies.md §2.10) at the NIC rate with alpha {} us per NIC <-> rail link (TE-CCL IB alpha; NIC -> rail -> NIC = {} us, TACCL's IB alpha; topologies.md §3).",
        m.about,
        m.nvlinks,
        fmt_num(bw),
        fmt_num(port),
        fmt_num(alpha),
        fmt_num(nic),
        fmt_num(m.pcie_gbps),
        fmt_num(PCIE_ALPHA_US),
        fmt_num(ib_alpha),
        fmt_num(2.0 * ib_alpha)
    );
    let t = b.finish(m.kind.to_string(), desc);
    multi_host(t, p, nic)
}

/// DGX A100: 8 × A100, NVSwitch (12 × 25 GB/s per GPU), 8 × 200 Gb/s NICs.
pub fn dgx_a100(p: &GenParams) -> Result<Topology, String> {
    switched_machine(
        &SwitchedMachine {
            kind: "dgx-a100",
            sms: known("a100").sms,
            nvlinks: known("a100").links_per_gpu,
            nic_gbps: known("a100").nic_gbps,
            pcie_gbps: PCIE_GEN4_X16_GBPS,
            about: "DGX A100 / HGX A100: 8 x A100 SXM4 (108 SMs each), NVSwitch 2 (6 chips, 2 links from every GPU to each, all pairs NV12: topologies.md §2.3). \
NICs: 8 x ConnectX-6 HDR 200 Gb/s = 25 GB/s (topologies.md §2.3; NDv4 and ForestColl a100_topology use 25 GB/s per GPU NIC, synthesis.md §4.3); GPU <-> NIC over PCIe Gen4 x16 (16 GT/s x 16 x 128/130 / 8 = 31.5 GB/s). \
Cut bounds x* = 7/300, 3/65, 3/25 for 1, 2, 4 hosts (synthesis.md §6).",
        },
        p,
    )
}

/// DGX H100: 8 × H100, NVSwitch (18 × 25 GB/s per GPU), 8 × 400 Gb/s NICs.
pub fn dgx_h100(p: &GenParams) -> Result<Topology, String> {
    switched_machine(
        &SwitchedMachine {
            kind: "dgx-h100",
            sms: known("h100").sms,
            nvlinks: known("h100").links_per_gpu,
            nic_gbps: known("h100").nic_gbps,
            pcie_gbps: PCIE_GEN5_X16_GBPS,
            about: "DGX H100 / HGX H100: 8 x H100 SXM (132 SMs each), NVSwitch 3 (4 chips, 5+5+4+4 links per GPU, all pairs NV18: topologies.md §2.4). \
NICs: 8 single-port ConnectX-7 at 400 Gb/s = 50 GB/s, one per GPU (DGX H100 User Guide Table 6, topologies.md §2.5; synthesis.md §4.3); GPU <-> NIC over PCIe Gen5 x16 (32 GT/s x 16 x 128/130 / 8 = 63 GB/s). \
Cut bounds x* = 7/450, 3/100, 31/500 for 1, 2, 4 hosts (synthesis.md §6).",
        },
        p,
    )
}

// ---------------------------------------------------------------- AMD, CPU

/// MI300X: 8 GPUs in a full xGMI mesh (7 links each), NICs optional.
pub fn mi300x(p: &GenParams) -> Result<Topology, String> {
    unused("mi300x", p, true, true, false)?;
    let n = fixed_count("mi300x", p, 8)?;
    let bw = positive("--bw", p.bw_gbps, known("mi300x").link_gbps)?;
    let alpha = non_negative("--alpha", p.alpha_us, ALPHA_GPU_LINK_US)?;
    let nic = positive("--nic-bw", p.nic_gbps, known("mi300x").nic_gbps)?;
    let ib_alpha = non_negative("--ib-alpha", p.ib_alpha_us, IB_ALPHA_US)?;
    let hosts = p.hosts.unwrap_or(1);
    let with_nics = match p.nics {
        Some(x) => x,
        None => hosts > 1,
    };
    if hosts > 1 && !with_nics {
        return Err("mi300x: --hosts > 1 needs the NICs (--nics false was given)".into());
    }
    let mut b = Builder::new();
    let g: Vec<_> = (0..n)
        .map(|r| b.gpu(r, Some(known("mi300x").sms)))
        .collect();
    for i in 0..n {
        for j in i + 1..n {
            b.duplex(g[i], g[j], bw, alpha, 1, "xgmi");
        }
    }
    if with_nics {
        for (r, &v) in g.iter().enumerate() {
            let nc = b.node(format!("nic{r}"), NodeKind::Nic, None, None);
            b.duplex(v, nc, PCIE_GEN5_X16_GBPS, PCIE_ALPHA_US, 1, "pcie");
        }
    }
    let nic_text = if with_nics {
        format!(
            "NIC k serves GPU k: one 400G ConnectX-7 per GPU as in RCCL's topo_8p_940 model (topologies.md §2.8), {} GB/s per direction, over PCIe Gen5 x16 at {} GB/s (32 GT/s x 16 x 128/130 / 8), alpha {} us. \
With --hosts H > 1, NIC k of every host links to rail switch rail{{k}} (topologies.md §2.10) at the NIC rate, alpha {} us per NIC <-> rail link (TE-CCL IB alpha, topologies.md §3).",
            fmt_num(nic),
            fmt_num(PCIE_GEN5_X16_GBPS),
            fmt_num(PCIE_ALPHA_US),
            fmt_num(ib_alpha)
        )
    } else {
        "No NICs (generate with --nics true or --hosts H > 1 to add one 400G NIC per GPU)."
            .to_string()
    };
    let desc = format!(
        "MI300X: 8 OAM GPUs (304 CUs each) in a full Infinity Fabric (xGMI) mesh, 7 peer links per GPU (ROCm mi300.md, topologies.md §1, §2.8). \
Per link {} GB/s per direction: the hardware figure of 64 GB/s (128 bidir; 896 bidir aggregate over 7 links), an unconfirmed vendor figure in topologies.md §1, \
chosen over RCCL's tuning-model 48 because absolute limits use hardware figures (topologies.md §1 notes); 7 links = {} GB/s per GPU. \
alpha {} us per link: the references give no xGMI alpha, so TE-CCL's point-to-point NVLink alpha (topologies.md §3) is assumed. {}",
        fmt_num(bw),
        fmt_num(7.0 * bw),
        fmt_num(alpha),
        nic_text
    );
    let t = b.finish("mi300x".into(), desc);
    multi_host(t, p, nic)
}

/// N ranks of one shared-memory CPU machine, fully connected.
pub fn cpu_shm(p: &GenParams) -> Result<Topology, String> {
    unused("cpu-shm", p, false, false, false)?;
    let n = gpu_count("cpu-shm", p, 8, 2, MAX_MESH)?;
    let bw = positive("--bw", p.bw_gbps, 10.0)?;
    let alpha = non_negative("--alpha", p.alpha_us, 0.5)?;
    let mut b = Builder::new();
    let g: Vec<_> = (0..n)
        .map(|r| b.node(format!("rank{r}"), NodeKind::Gpu, Some(r), None))
        .collect();
    for i in 0..n {
        for j in i + 1..n {
            b.duplex(g[i], g[j], bw, alpha, 1, "shm");
        }
    }
    let desc = format!(
        "{n} ranks of one shared-memory CPU machine (threads of the CPU executor, or MPI processes on one node), modelled as fully connected: \
every rank pair has a 'shm' link of {} GB/s per direction with alpha {} us. These are assumptions, not measurements or figures from the references: \
{} GB/s is about one core's memcpy rate between caches/DRAM, {} us a cache-line handoff plus flag poll; set --bw/--alpha to a measured rate. \
Ranks are 'gpu' nodes only because ranks are GPUs in the format; no SM count is given (no threadblock limit).",
        fmt_num(bw),
        fmt_num(alpha),
        fmt_num(bw),
        fmt_num(alpha)
    );
    Ok(b.finish(format!("cpu-shm{n}"), desc))
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
