//! The hardware table: link rates, latencies, SM counts and architecture
//! names, each stated once with its source (../shared/reference/
//! topologies.md §). The generators build machines from it, the importers
//! read dumps with it, and the NCCL XML exporter writes its inverse, so an
//! exported machine imports back to the same rates.
//!
//! Two PCIe figures coexist on purpose: the generators use the hardware
//! rate of a ×16 link ([`PCIE_GEN4_X16_GBPS`]), the importers NCCL's own
//! model of a dump's `link_speed` × `link_width` ([`PCIE_LANES`]), which is
//! what NCCL itself plans with.

/// α of one GPU↔GPU NVLink / xGMI hop, µs (TE-CCL NDv2, §3).
pub const ALPHA_GPU_LINK_US: f64 = 0.7;
/// α of one GPU↔NVSwitch hop, µs (TE-CCL DGX-2: GPU→switch→GPU = 0.7).
pub const ALPHA_NVSWITCH_US: f64 = 0.35;
/// α of one PCIe hop of an imported machine (device↔switch↔CPU), µs:
/// ≈1 µs per PCIe transfer of two hops (§3).
pub const ALPHA_PCIE_US: f64 = 0.5;
/// α of the CPU↔CPU (SMP interconnect) hop, µs.
pub const ALPHA_SYS_US: f64 = 0.5;
/// α of one NIC↔network-switch hop, µs: TE-CCL's IB α (§3); NIC → switch
/// → NIC is then 2.6 µs, TACCL's IB α.
pub const ALPHA_NET_US: f64 = 1.3;
/// α of a generated machine's PCIe link, µs (§3, default α–β table:
/// "PCIe ≈1 µs").
pub const PCIE_ALPHA_US: f64 = 1.0;

/// Per-direction bandwidth of one NVLink 2/3/4 link, GB/s (§1).
pub const NVLINK_GBPS: f64 = 25.0;
/// PCIe Gen4 ×16 hardware rate per direction: 16 GT/s × 16 lanes × 128/130 / 8.
pub const PCIE_GEN4_X16_GBPS: f64 = 31.5;
/// PCIe Gen5 ×16 hardware rate per direction: 32 GT/s × 16 lanes × 128/130 / 8.
pub const PCIE_GEN5_X16_GBPS: f64 = 63.0;

/// A GPU's memory bandwidth, GB/s of bytes touched, that its concurrent
/// local `cpy` and `re` passes share (max-min fairly; `cpy` touches 2 ×
/// its bytes, `re` 3 ×) when the simulator charges them: for a runtime
/// without fused steps (RCCL, `SimOptions::for_runtime`), which runs a
/// reduction as a receive and a separate local pass. 1 TB/s is the HBM
/// bandwidth of the slowest AMD GPU RCCL runs MSCCL files on (MI50 /
/// Vega20, a vendor figure; MI100 1.2, an MI250X GCD 1.6, MI300X 5.3 TB/s),
/// so the charge errs high. Fused steps (`rrc`, `rrs`, …) reduce while the
/// data streams and are not charged, as the links bound them.
pub const LOCAL_MEM_GBPS: f64 = 1000.0;

/// Core time of one primitive call of the CPU executor, µs: its poll,
/// FIFO hand-off and flag updates, apart from the data it moves
/// (`sim::SharedMem`). Measured on the 2-core development machine with one
/// worker: `rscc run --builtin ring --ranks 8 --sizes 4K --workers 1`
/// makes 56 calls of 512 B in 4.5 µs, the 8-rank `direct` (112 calls) in
/// about 12 µs; both are about 0.1 µs per call once the bytes are paid.
pub const CPU_CALL_US: f64 = 0.1;
/// Memory bandwidth the CPU model assumes when none was measured, GB/s of
/// bytes touched: a 2-channel DDR4 server core pair's `a += b` (the
/// development machine measures 31–37 with `membw::measure`).
pub const CPU_MEM_GBPS: f64 = 30.0;

/// A GPU model: the per-link and per-GPU facts of §1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuModel {
    pub name: &'static str,
    /// "nvlink" or "xgmi".
    pub fabric: &'static str,
    /// Hardware bandwidth of one NVLink / xGMI link, GB/s per direction.
    pub link_gbps: f64,
    /// Physical NVLink / xGMI links per GPU.
    pub links_per_gpu: u32,
    /// PCIe bandwidth to the host (NCCL model `width × speed / 80`), GB/s.
    pub pcie_gbps: f64,
    /// Typical NIC speed of systems with this GPU, GB/s (used only when the
    /// input gives no NIC speed).
    pub nic_gbps: f64,
    /// SMs / CUs (per GCD for MI250).
    pub sms: u32,
    /// HBM bandwidth, GB/s (per GCD for MI250/MI250X): vendor figures,
    /// unconfirmed (V100 0.9, A100 80 GB 2.0, H100 SXM 3.35, H200 4.8,
    /// B200 8 TB/s; MI100 1.23, MI210 1.6, MI250(X) 3.2 per package,
    /// MI300X 5.3 TB/s).
    pub mem_gbps: f64,
}

const fn model(
    name: &'static str,
    fabric: &'static str,
    link_gbps: f64,
    links_per_gpu: u32,
    pcie_gbps: f64,
    nic_gbps: f64,
    sms: u32,
) -> GpuModel {
    GpuModel {
        name,
        fabric,
        link_gbps,
        links_per_gpu,
        pcie_gbps,
        nic_gbps,
        sms,
        mem_gbps: 0.0,
    }
}

impl GpuModel {
    /// The model with its HBM bandwidth.
    const fn mem(self, mem_gbps: f64) -> GpuModel {
        GpuModel { mem_gbps, ..self }
    }
}

/// Known GPU models (`--gpu` values), from §1–§2.
pub const GPU_MODELS: &[GpuModel] = &[
    model("v100", "nvlink", 25.0, 6, 12.0, 12.5, 80).mem(900.0),
    model("a100", "nvlink", 25.0, 12, 24.0, 25.0, 108).mem(2039.0),
    model("h100", "nvlink", 25.0, 18, 48.0, 50.0, 132).mem(3350.0),
    model("h200", "nvlink", 25.0, 18, 48.0, 50.0, 132).mem(4800.0),
    model("b200", "nvlink", 50.0, 18, 48.0, 50.0, 148).mem(8000.0),
    model("mi100", "xgmi", 46.0, 3, 24.0, 25.0, 120).mem(1229.0),
    model("mi210", "xgmi", 50.0, 3, 24.0, 25.0, 104).mem(1638.0),
    model("mi250", "xgmi", 50.0, 8, 24.0, 25.0, 110).mem(1638.0),
    model("mi250x", "xgmi", 50.0, 8, 24.0, 25.0, 110).mem(1638.0),
    model("mi300x", "xgmi", 64.0, 7, 48.0, 50.0, 304).mem(5300.0),
];

/// Look a model up by name (case-insensitive; "h20" and "h800" read as
/// H100-class, and so on).
pub fn gpu_model(name: &str) -> Option<GpuModel> {
    let n = name.trim().to_ascii_lowercase();
    let n = match n.as_str() {
        "h20" | "h800" | "gh200" => "h100",
        "a800" => "a100",
        "b300" | "gb200" | "gb300" => "b200",
        "mi325x" | "mi308x" | "mi355x" => "mi300x",
        other => other,
    };
    GPU_MODELS.iter().copied().find(|m| m.name == n)
}

/// A shipped model by its exact name (the generators' machines).
pub fn known(name: &str) -> GpuModel {
    gpu_model(name).expect("a model of GPU_MODELS")
}

/// Names accepted by `--gpu`, for messages.
pub fn gpu_model_names() -> String {
    GPU_MODELS
        .iter()
        .map(|m| m.name)
        .collect::<Vec<_>>()
        .join("|")
}

/// An NVLink generation by NVIDIA `sm` (§1).
#[derive(Debug, Clone, Copy)]
pub struct NvlinkGen {
    /// The `sm` values of its GPUs (inclusive range).
    pub sm: (u32, u32),
    /// Per-link hardware bandwidth, GB/s per direction.
    pub link_gbps: f64,
    pub name: &'static str,
    /// Most links per GPU of the generation: the exporter tells
    /// generations of one link rate apart by a GPU's link count.
    pub links_per_gpu: u32,
}

const fn nvlink(sm: (u32, u32), link_gbps: f64, name: &'static str, links: u32) -> NvlinkGen {
    NvlinkGen {
        sm,
        link_gbps,
        name,
        links_per_gpu: links,
    }
}

/// NVLink generations; the exporter writes the first `sm` of a range.
pub const NVLINK_GENS: &[NvlinkGen] = &[
    nvlink((60, 69), 20.0, "NVLink 1 (P100)", 4),
    nvlink((70, 79), 25.0, "NVLink 2 (V100)", 6),
    nvlink((86, 89), 14.0625, "NVLink 3 bridge (SM86)", 4),
    nvlink((80, 85), 25.0, "NVLink 3 (A100)", 12),
    nvlink((90, 99), 25.0, "NVLink 4 (H100/H200/H20)", 18),
    nvlink((100, 199), 50.0, "NVLink 5 (Blackwell)", 18),
];

/// NVLink per-link hardware bandwidth and generation for an NVIDIA `sm`.
pub fn nvlink_per_link(sm: u32) -> Option<(f64, &'static str)> {
    NVLINK_GENS
        .iter()
        .find(|g| (g.sm.0..=g.sm.1).contains(&sm))
        .map(|g| (g.link_gbps, g.name))
}

/// The `sm` whose per-link NVLink bandwidth ([`nvlink_per_link`]) is `bw`;
/// among generations of one rate, the first whose GPUs have at least
/// `links` links. `false`: no generation has that rate, and the nearest
/// current one (sm ≥ 90) is given.
pub fn nvlink_sm(bw: f64, links: u32) -> (u32, bool) {
    let mut by_sm: Vec<&NvlinkGen> = NVLINK_GENS
        .iter()
        .filter(|g| (g.link_gbps - bw).abs() < 1e-9)
        .collect();
    by_sm.sort_by_key(|g| g.sm.0);
    if let Some(g) = by_sm
        .iter()
        .find(|g| links <= g.links_per_gpu)
        .or(by_sm.last())
    {
        return (g.sm.0, true);
    }
    let nearest = NVLINK_GENS
        .iter()
        .filter(|g| g.sm.0 >= 90)
        .min_by(|a, b| {
            (a.link_gbps - bw)
                .abs()
                .total_cmp(&(b.link_gbps - bw).abs())
                .then(a.sm.0.cmp(&b.sm.0))
        })
        .expect("current generations");
    (nearest.sm.0, false)
}

/// An xGMI (Infinity Fabric) generation by RCCL `gcn` (§1).
#[derive(Debug, Clone, Copy)]
pub struct XgmiGen {
    /// `gcn` values without the `gfx` prefix.
    pub gcn: &'static [&'static str],
    pub link_gbps: f64,
    pub name: &'static str,
    /// HBM bandwidth of one GPU (GCD), GB/s: vendor figures, unconfirmed.
    pub mem_gbps: f64,
    /// What the exporter writes for this rate: CUs (`sm`), `gcn`, and the
    /// PCI class of the GPU; None for a generation that shares its rate
    /// with an earlier entry.
    pub export: XgmiExport,
}

type XgmiExport = Option<(u32, &'static str, &'static str)>;

const fn xgmi(
    gcn: &'static [&'static str],
    (link_gbps, mem_gbps): (f64, f64),
    name: &'static str,
    export: XgmiExport,
) -> XgmiGen {
    XgmiGen {
        gcn,
        link_gbps,
        name,
        mem_gbps,
        export,
    }
}

pub const XGMI_GENS: &[XgmiGen] = &[
    xgmi(
        &["908"],
        (46.0, 1229.0),
        "Infinity Fabric, MI100",
        Some((120, "gfx908", "0x038000")),
    ),
    xgmi(
        &["906"],
        (46.0, 1024.0),
        "Infinity Fabric, Vega20 (MI50/MI60; MI100 figure assumed)",
        None,
    ),
    xgmi(
        &["90a", "910"],
        (50.0, 1638.0),
        "Infinity Fabric, MI200 (gfx90a)",
        Some((104, "gfx90a", "0x038000")),
    ),
    xgmi(
        &["940", "941", "942"],
        (64.0, 5300.0),
        "Infinity Fabric, MI300 (gfx94x)",
        Some((304, "gfx942", "0x120000")),
    ),
    xgmi(
        &["950"],
        (64.0, 8000.0),
        "Infinity Fabric, MI355X (gfx950; MI300 figure assumed)",
        None,
    ),
];

/// The xGMI generation of an RCCL `gcn` attribute.
pub fn xgmi_gen(gcn: &str) -> Option<&'static XgmiGen> {
    let g = gcn.trim().to_ascii_lowercase();
    let g = g.strip_prefix("gfx").unwrap_or(&g).to_string();
    XGMI_GENS.iter().find(|x| x.gcn.contains(&g.as_str()))
}

/// xGMI per-link hardware bandwidth from an RCCL `gcn` attribute.
pub fn xgmi_per_link(gcn: &str) -> Option<(f64, &'static str)> {
    xgmi_gen(gcn).map(|x| (x.link_gbps, x.name))
}

/// (`sm`, `gcn`, PCI class) of an AMD GPU whose xGMI per-link bandwidth is
/// `bw`; `false`: no generation has that rate (MI300's is given).
pub fn xgmi_arch(bw: f64) -> (u32, &'static str, &'static str, bool) {
    let export = |x: &XgmiGen| x.export;
    match XGMI_GENS
        .iter()
        .filter(|x| (x.link_gbps - bw).abs() < 1e-9)
        .find_map(export)
    {
        Some((sm, gcn, class)) => (sm, gcn, class, true),
        None => {
            let (sm, gcn, class) = XGMI_GENS
                .iter()
                .rev()
                .find_map(export)
                .expect("an exported generation");
            (sm, gcn, class, false)
        }
    }
}

/// PCIe per-lane figures of NCCL's model (`width × lane / 80` GB/s, §4.4):
/// (GT/s, lane figure, the sysfs `link_speed` string written on export).
pub const PCIE_LANES: &[(f64, f64, &str)] = &[
    (64.0, 480.0, "64.0 GT/s PCIe"),
    (32.0, 240.0, "32.0 GT/s PCIe"),
    (16.0, 120.0, "16.0 GT/s PCIe"),
    (8.0, 60.0, "8.0 GT/s PCIe"),
    (5.0, 30.0, "5.0 GT/s PCIe"),
    (2.5, 15.0, "2.5 GT/s PCIe"),
];

/// NCCL's lane figure for a link speed in GT/s.
pub fn pcie_lane(gts: f64) -> Option<f64> {
    PCIE_LANES
        .iter()
        .find(|&&(g, _, _)| (g - gts).abs() < 1e-9)
        .map(|&(_, lane, _)| lane)
}

/// `link_speed`, `link_width` whose NCCL bandwidth equals `bw`, or the
/// nearest ×16 one (with `false`).
pub fn pcie_attrs(bw: f64) -> (&'static str, u32, bool) {
    for w in [16u32, 8, 4, 2, 1, 32] {
        for &(_, lane, s) in PCIE_LANES {
            if (w as f64 * lane / 80.0 - bw).abs() < 1e-9 {
                return (s, w, true);
            }
        }
    }
    let mut best = PCIE_LANES[0];
    for &p in PCIE_LANES {
        if (16.0 * p.1 / 80.0 - bw).abs() < (16.0 * best.1 / 80.0 - bw).abs() {
            best = p;
        }
    }
    (best.2, 16, false)
}

/// A CPU's SMP-interconnect bandwidth in NCCL's model (§4.4).
#[derive(Debug, Clone, Copy)]
pub struct CpuSys {
    /// `arch` ("" = any).
    pub arch: &'static str,
    /// `vendor` ("" = any).
    pub vendor: &'static str,
    /// Smallest Intel `modelid` of the row (Intel rows only).
    pub min_model: u32,
    pub gbps: f64,
    pub name: &'static str,
    /// The `<cpu>` attributes the exporter writes for this bandwidth.
    pub attrs: &'static str,
}

const fn cpu(
    arch: &'static str,
    vendor: &'static str,
    min_model: u32,
    gbps: f64,
    name: &'static str,
    attrs: &'static str,
) -> CpuSys {
    CpuSys {
        arch,
        vendor,
        min_model,
        gbps,
        name,
        attrs,
    }
}

const INTEL: &str = "GenuineIntel";

/// Rows in match order (Intel newest first).
pub const CPU_SYS: &[CpuSys] = &[
    cpu("arm64", "", 0, 6.0, "ARM", "arch=\"arm64\""),
    cpu("ppc64", "", 0, 32.0, "POWER9", "arch=\"ppc64\""),
    cpu(
        "",
        INTEL,
        0xCF,
        40.0,
        "Intel ERP",
        "arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"207\"",
    ),
    cpu(
        "",
        INTEL,
        0x8F,
        22.0,
        "Intel SRP",
        "arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"143\"",
    ),
    cpu(
        "",
        INTEL,
        0x55,
        10.0,
        "Intel SKL",
        "arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"85\"",
    ),
    cpu(
        "",
        INTEL,
        0,
        6.0,
        "Intel BDW",
        "arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"79\"",
    ),
    cpu(
        "",
        "AuthenticAMD",
        0,
        16.0,
        "AMD",
        "arch=\"x86_64\" vendor=\"AuthenticAMD\" familyid=\"25\" modelid=\"1\"",
    ),
];

/// The SMP bandwidth assumed where a dump names no CPU model (the text
/// formats): NCCL's figure for AMD, the CPUs of most GPU servers.
pub const SYS_UNKNOWN_GBPS: f64 = 16.0;

/// The SMP bandwidth (GB/s) and CPU name of a `<cpu>` element's `arch`,
/// `vendor` and `modelid`.
pub fn cpu_sys(arch: &str, vendor: &str, model: Option<u32>) -> (f64, String) {
    let (arch, vendor) = (arch.trim(), vendor.trim());
    if vendor == "GenuineIntel" && model.is_none() && arch != "arm64" && arch != "ppc64" {
        return (10.0, "Intel (model unknown; SKL assumed)".into());
    }
    let hit = CPU_SYS.iter().find(|c| {
        (c.arch.is_empty() || c.arch == arch)
            && (c.vendor.is_empty() || c.vendor == vendor)
            && model.unwrap_or(0) >= c.min_model
    });
    match hit {
        Some(c) => (c.gbps, c.name.into()),
        None if vendor.contains("Shanghai") || vendor.contains("Centaur") => {
            (6.0, "Zhaoxin".into())
        }
        None => (10.0, "unknown CPU (SKL figure assumed)".into()),
    }
}

/// The `<cpu>` attributes whose SMP bandwidth ([`cpu_sys`]) is `sys_bw`
/// (an x86 CPU for 6 GB/s; AMD when none matches).
pub fn cpu_attrs(sys_bw: Option<f64>) -> &'static str {
    let amd = CPU_SYS.last().expect("rows").attrs;
    let Some(b) = sys_bw else { return amd };
    CPU_SYS
        .iter()
        .filter(|c| c.arch.is_empty())
        .find(|c| (c.gbps - b).abs() < 1e-9)
        .or_else(|| CPU_SYS.iter().find(|c| (c.gbps - b).abs() < 1e-9))
        .map_or(amd, |c| c.attrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_resolve() {
        assert_eq!(gpu_model("H100").map(|m| m.link_gbps), Some(25.0));
        assert_eq!(gpu_model("b200").map(|m| m.link_gbps), Some(50.0));
        assert_eq!(gpu_model("h20").map(|m| m.name), Some("h100"));
        assert!(gpu_model("k80").is_none());
    }

    #[test]
    fn exporter_inverses_read_back() {
        for g in NVLINK_GENS {
            let (sm, exact) = nvlink_sm(g.link_gbps, g.links_per_gpu);
            assert!(exact);
            assert_eq!(nvlink_per_link(sm).map(|x| x.0), Some(g.link_gbps));
        }
        assert_eq!(nvlink_sm(25.0, 6).0, 70);
        assert_eq!(nvlink_sm(25.0, 12).0, 80);
        assert_eq!(nvlink_sm(25.0, 18).0, 90);
        assert_eq!(nvlink_sm(30.0, 4), (90, false));
        assert_eq!(nvlink_sm(40.0, 4), (100, false));
        for x in XGMI_GENS {
            let (_, gcn, _, exact) = xgmi_arch(x.link_gbps);
            assert!(exact);
            assert_eq!(xgmi_per_link(gcn).map(|y| y.0), Some(x.link_gbps));
        }
        assert_eq!(xgmi_arch(10.0).1, "gfx942");
        for &(_, lane, _) in PCIE_LANES {
            let (s, w, exact) = pcie_attrs(16.0 * lane / 80.0);
            assert!(exact && w == 16, "{s}");
        }
        for c in CPU_SYS.iter().filter(|c| c.arch.is_empty()) {
            let attrs = cpu_attrs(Some(c.gbps));
            let model = attrs
                .split("modelid=\"")
                .nth(1)
                .and_then(|r| r.split('"').next())
                .and_then(|m| m.parse().ok());
            let vendor = if attrs.contains("Intel") {
                "GenuineIntel"
            } else {
                "AuthenticAMD"
            };
            assert_eq!(cpu_sys("x86_64", vendor, model).0, c.gbps, "{attrs}");
        }
        assert_eq!(cpu_sys("arm64", "", None).0, 6.0);
        assert_eq!(cpu_sys("ppc64", "IBM", None).0, 32.0);
        assert_eq!(cpu_sys("x86_64", "GenuineIntel", None).0, 10.0);
        assert_eq!(cpu_sys("x86_64", "CentaurHauls", None).1, "Zhaoxin");
    }
}
