//! NVIDIA machines: DGX-1 (V100, hybrid cube-mesh), DGX-2 (V100 on
//! NVSwitch), DGX A100 and DGX H100 (NVSwitch with a NIC per GPU).

use super::{fixed_count, fmt_num, multi_host, non_negative, positive, unused, Builder, GenParams};
use crate::ir::hardware::{
    known, ALPHA_GPU_LINK_US, ALPHA_NET_US as IB_ALPHA_US, NVLINK_GBPS, PCIE_ALPHA_US,
    PCIE_GEN4_X16_GBPS, PCIE_GEN5_X16_GBPS,
};
use crate::ir::{NodeKind, Topology};

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
    let g: Vec<_> = (0..n).map(|r| b.gpu_of(r, known("v100"))).collect();
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
    let g: Vec<_> = (0..n).map(|r| b.gpu_of(r, known("v100"))).collect();
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
    gpu: crate::ir::hardware::GpuModel,
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
    let g: Vec<_> = (0..n).map(|r| b.gpu_of(r, m.gpu)).collect();
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
            gpu: known("a100"),
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
            gpu: known("h100"),
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
