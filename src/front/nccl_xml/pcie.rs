//! The `<cpu>` / `<pci>` tree: one CPU node per NUMA node and the SYS
//! mesh between a host's CPUs, PCIe switches and bridges, the GPUs and NICs
//! placed under them (with what their `<gpu>`, `<nic>` and `<net>`
//! elements say), and PCIe and CPU link rates by NCCL's rules.

use super::xml::Element;
use super::{int_attr, norm_busid, GpuRec, NetRec, Walk};
use crate::front::builder::gbps;
use crate::front::FrontError;
use crate::ir::hardware::{self, ALPHA_PCIE_US, ALPHA_SYS_US};
use crate::ir::NodeKind;
use petgraph::graph::NodeIndex;
use std::collections::HashMap;

/// PCIe bandwidth from sysfs strings: `width × per-lane / 80` GB/s
/// (topologies.md §4.4). Returns (GB/s, notes on defaults used).
pub fn pcie_gbps(speed: Option<&str>, width: Option<&str>) -> (f64, Vec<String>) {
    let mut notes = Vec::new();
    let s = speed.unwrap_or("").trim();
    // Prefix match on the number, as NCCL does ("32 GT/s PCIe/s" is Gen5).
    let num: String = s
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let lane = match num.parse::<f64>().ok().and_then(hardware::pcie_lane) {
        Some(lane) => lane,
        None => {
            notes.push(format!(
                "link_speed {}: Gen3 (8 GT/s) assumed",
                if s.is_empty() {
                    "missing or empty".to_string()
                } else {
                    format!("\"{s}\" unknown")
                }
            ));
            60.0
        }
    };
    let w = match width.map(str::trim).and_then(|w| w.parse::<u32>().ok()) {
        Some(0) => {
            notes.push("link_width 0: ×16 assumed".into());
            16
        }
        Some(w) if w <= 32 => w,
        Some(w) => {
            notes.push(format!("link_width {w} implausible: ×16 assumed"));
            16
        }
        None => {
            notes.push("link_width missing: ×16 assumed".into());
            16
        }
    };
    (w as f64 * lane / 80.0, notes)
}

fn cpu_sys_gbps(cpu: &Element) -> (f64, String) {
    let model = cpu
        .attr("modelid")
        .and_then(|m| m.trim().parse::<u32>().ok());
    hardware::cpu_sys(
        cpu.attr("arch").unwrap_or(""),
        cpu.attr("vendor").unwrap_or(""),
        model,
    )
}

impl Walk {
    fn pcie_link(&mut self, el: &Element) -> f64 {
        let (bw, notes) = pcie_gbps(el.attr("link_speed"), el.attr("link_width"));
        for n in notes {
            self.assumptions.insert(format!("PCIe {n} (NCCL's rule)"));
        }
        bw
    }

    fn walk(&mut self, el: &Element, parent: NodeIndex, host: usize, cpu: NodeIndex) {
        for c in &el.children {
            match c.name.as_str() {
                "pci" => self.pci(c, parent, host, cpu),
                "nic" => {
                    // A NIC without PCI placement: LOC attachment; use its
                    // network speed for the link to the CPU.
                    let nics = self.nic_el(c, host, None);
                    for n in nics {
                        let sp = self.nic_speed(n);
                        self.b.duplex(n, parent, sp, ALPHA_PCIE_US, 1, "pcie");
                        self.assumptions.insert(
                            "a <nic> directly under <cpu> (no PCI placement) is attached to its CPU at its network speed".into(),
                        );
                    }
                }
                "gpu" => {
                    // A <gpu> without PCI placement: Gen3 ×16 assumed.
                    let g = self.b.node("gpu", NodeKind::Gpu, self.host(host));
                    self.b.duplex(g, parent, 12.0, ALPHA_PCIE_US, 1, "pcie");
                    self.assumptions
                        .insert("a <gpu> without a <pci> parent: PCIe Gen3 ×16 (12 GB/s) to its CPU assumed".into());
                    self.gpu_el(c, g, None, host, cpu);
                }
                "nvlink" | "xgmi" | "c2c" | "net" | "pcilink" => {
                    // pcilink: Broadcom P2P switch link, rare; ignored.
                    self.ignored.insert(format!(
                        "<{}> outside its usual parent (line {})",
                        c.name, c.line
                    ));
                }
                other => {
                    self.ignored
                        .insert(format!("<{other}> (first at line {})", c.line));
                }
            }
        }
    }

    fn pci(&mut self, el: &Element, parent: NodeIndex, host: usize, cpu: NodeIndex) {
        let Some(busid) = el.attr("busid").map(norm_busid) else {
            self.warnings.push(format!(
                "{}: <pci> without busid skipped with its subtree",
                el.describe()
            ));
            return;
        };
        let class = el.attr("class").map(|c| c.trim().to_ascii_lowercase());
        let has_gpu = el.children.iter().any(|c| c.name == "gpu");
        let has_nic = el.children.iter().any(|c| c.name == "nic");
        let bw = self.pcie_link(el);
        let class_str = class.as_deref().unwrap_or("");
        if has_gpu || (!has_nic && (class_str.starts_with("0x03") || class_str.starts_with("0x12")))
        {
            let gpu_els: Vec<&Element> = el.children.iter().filter(|c| c.name == "gpu").collect();
            if gpu_els.is_empty() {
                let g = self
                    .b
                    .node(&format!("gpu@{busid}"), NodeKind::Gpu, self.host(host));
                self.b.duplex(g, parent, bw, ALPHA_PCIE_US, 1, "pcie");
                self.gpus.push(GpuRec {
                    node: g,
                    busid: Some(busid.clone()),
                    host,
                    cpu,
                    rank: None,
                    dev: None,
                    sm: None,
                    gcn: None,
                    links: Vec::new(),
                    line: el.line,
                    has_gpu_el: false,
                });
            } else {
                if gpu_els.len() > 1 {
                    self.warnings.push(format!(
                        "{}: {} <gpu> elements under one <pci> (uGPU partitions); each becomes a rank sharing the PCIe link",
                        el.describe(),
                        gpu_els.len()
                    ));
                }
                for ge in gpu_els {
                    let g = self
                        .b
                        .node(&format!("gpu@{busid}"), NodeKind::Gpu, self.host(host));
                    self.b.duplex(g, parent, bw, ALPHA_PCIE_US, 1, "pcie");
                    self.gpu_el(ge, g, Some(busid.clone()), host, cpu);
                }
            }
            return;
        }
        if has_nic || class_str.starts_with("0x02") {
            let nic_els: Vec<&Element> = el.children.iter().filter(|c| c.name == "nic").collect();
            let mut nodes = Vec::new();
            for ne in nic_els {
                nodes.extend(self.nic_el(ne, host, Some(&busid)));
            }
            if nodes.is_empty() {
                // Skeleton NIC (class only).
                let n = self.b.node(
                    &format!("{}nic@{busid}", self.prefix(host)),
                    NodeKind::Nic,
                    self.host(host),
                );
                self.nics.push((n, Vec::new(), host));
                self.unknown_nic_speed += 1;
                nodes.push(n);
            }
            for n in nodes {
                self.b.duplex(n, parent, bw, ALPHA_PCIE_US, 1, "pcie");
            }
            return;
        }
        if class_str.starts_with("0x0680") && class_str != "0x068001" {
            self.nvswitch_busids.insert((host, busid));
            return;
        }
        if el.children.is_empty() {
            // A leaf of unknown kind (storage, or a bare busid): nothing to model.
            if class.is_none() {
                self.ignored.insert(format!(
                    "<pci> leaves without class attribute (first at line {}): device kind unknown",
                    el.line
                ));
            }
            return;
        }
        // A PCIe switch / bridge (or an unknown device with children).
        let key = (host, busid.clone());
        let node = match self.pci_nodes.get(&key) {
            Some(&n) => n,
            None => {
                let n = self.b.node(
                    &format!("{}pci@{busid}", self.prefix(host)),
                    NodeKind::Switch,
                    self.host(host),
                );
                self.b.duplex(n, parent, bw, ALPHA_PCIE_US, 1, "pcie");
                self.pci_nodes.insert(key, n);
                if busid.starts_with("ffff:") {
                    self.virtual_switches += 1;
                }
                n
            }
        };
        self.walk(el, node, host, cpu);
    }

    fn gpu_el(
        &mut self,
        el: &Element,
        g: NodeIndex,
        busid: Option<String>,
        host: usize,
        cpu: NodeIndex,
    ) {
        let rank = el.attr("rank").and_then(int_attr);
        if el.attr("rank").is_some() && rank.is_none() {
            self.warnings.push(format!(
                "{}: rank \"{}\" is not a number (ignored)",
                el.describe(),
                el.attr("rank").unwrap_or("")
            ));
        }
        let mut links = Vec::new();
        for c in &el.children {
            match c.name.as_str() {
                "nvlink" => links.push((c.clone(), "nvlink")),
                "xgmi" => links.push((c.clone(), "xgmi")),
                "c2c" => links.push((c.clone(), "c2c")),
                other => {
                    self.ignored
                        .insert(format!("<{other}> under <gpu> (first at line {})", c.line));
                }
            }
        }
        self.gpus.push(GpuRec {
            node: g,
            busid,
            host,
            cpu,
            rank,
            dev: el.attr("dev").and_then(int_attr),
            sm: el
                .attr("sm")
                .and_then(int_attr)
                .and_then(|s| u32::try_from(s).ok()),
            gcn: el.attr("gcn").map(str::to_string),
            links,
            line: el.line,
            has_gpu_el: true,
        });
    }

    /// NIC nodes for a `<nic>` element: one per ASIC (ports with the same
    /// guid are one dual-port NIC).
    fn nic_el(&mut self, el: &Element, host: usize, busid: Option<&str>) -> Vec<NodeIndex> {
        let mut groups: Vec<(String, Vec<NetRec>)> = Vec::new();
        for (k, net) in el.children.iter().enumerate() {
            if net.name != "net" {
                self.ignored.insert(format!(
                    "<{}> under <nic> (first at line {})",
                    net.name, net.line
                ));
                continue;
            }
            if net.attr("dev").is_none() {
                self.warnings.push(format!(
                    "{}: <net> without dev skipped (NCCL skips it too)",
                    net.describe()
                ));
                continue;
            }
            let name = net
                .attr("name")
                .map(str::to_string)
                .unwrap_or_else(|| format!("net{}", net.attr("dev").unwrap_or("")));
            let mbps = self.net_speed(net);
            let guid = net.attr("guid").map(|g| g.trim().to_ascii_lowercase());
            let key = match guid.as_deref() {
                Some(g) if !g.is_empty() && g != "0x0" && g != "0" => g.to_string(),
                _ => format!("#{k}"),
            };
            match groups.iter_mut().find(|(g, _)| *g == key) {
                Some((_, v)) => v.push(NetRec { name, mbps }),
                None => groups.push((key, vec![NetRec { name, mbps }])),
            }
        }
        let mut out = Vec::new();
        for (_, ports) in groups {
            if ports.len() > 1 {
                self.assumptions.insert(
                    "ports with the same guid are one multi-port NIC: one NIC node with the ports' total speed".into(),
                );
            }
            let base = ports
                .first()
                .map(|p| p.name.clone())
                .unwrap_or_else(|| busid.unwrap_or("nic").to_string());
            let n = self.b.node(
                &format!("{}nic:{base}", self.prefix(host)),
                NodeKind::Nic,
                self.host(host),
            );
            self.nics.push((n, ports, host));
            out.push(n);
        }
        out
    }

    fn net_speed(&mut self, net: &Element) -> f64 {
        let raw = net.attr("speed");
        let parsed = raw.and_then(|s| s.trim().parse::<f64>().ok());
        match parsed {
            Some(v) if v > 0.0 && v <= 3_200_000.0 => v,
            Some(v) if v > 3_200_000.0 && v.is_finite() => {
                let mut x = v;
                while x > 3_200_000.0 {
                    x /= 1000.0;
                }
                self.warnings.push(format!(
                    "{}: speed=\"{}\" Mb/s is implausible; read as {} Mb/s (÷1000 until ≤ 3.2 Tb/s)",
                    net.describe(),
                    raw.unwrap_or(""),
                    x
                ));
                x
            }
            _ => {
                self.warnings.push(format!(
                    "{}: speed {} unusable; NCCL's default 10000 Mb/s (10 Gb/s) used",
                    net.describe(),
                    raw.map(|r| format!("\"{r}\""))
                        .unwrap_or_else(|| "missing".into())
                ));
                10000.0
            }
        }
    }

    fn nic_speed(&self, n: NodeIndex) -> f64 {
        self.nics
            .iter()
            .find(|(m, _, _)| *m == n)
            .map(|(_, p, _)| p.iter().map(|x| x.mbps).sum::<f64>() / 8000.0)
            .unwrap_or(12.5)
    }
}

/// The CPUs: one node per (host, NUMA id), the walk of everything under
/// each, and the inter-CPU (SYS) links.
pub(super) fn cpus(
    w: &mut Walk,
    root: &Element,
    hash_order: &[String],
    file: &str,
) -> Result<(), FrontError> {
    let ferr = |m: String| FrontError::new(file, m);
    // CPUs.
    let mut cpus: Vec<(NodeIndex, usize, f64, String)> = Vec::new();
    let mut cpu_by_key: HashMap<(usize, String), NodeIndex> = HashMap::new();
    for c in &root.children {
        if c.name != "cpu" {
            if c.name != "nic" {
                w.ignored.insert(format!(
                    "<{}> under <system> (first at line {})",
                    c.name, c.line
                ));
            }
            continue;
        }
        let h = c
            .attr("host_hash")
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        let host = hash_order.iter().position(|x| *x == h).unwrap_or(0);
        let numa = c.attr("numaid").unwrap_or("?").trim().to_string();
        let key = (host, numa.clone());
        let node = match cpu_by_key.get(&key) {
            Some(&n) => n,
            None => {
                let n = w.b.node(
                    &format!("{}cpu{numa}", w.prefix(host)),
                    NodeKind::Cpu,
                    w.host(host),
                );
                let (bw, what) = cpu_sys_gbps(c);
                cpus.push((n, host, bw, what));
                cpu_by_key.insert(key, n);
                n
            }
        };
        w.walk(c, node, host, node);
    }
    // A <nic> directly under <system> is not placed anywhere: ignore.
    if cpus.is_empty() {
        return Err(ferr(format!(
            "line {}: <system> has no <cpu> element, so no GPU can be placed (not a usable topology)",
            root.line
        )));
    }

    // Inter-CPU (SYS) links: full mesh per host.
    for i in 0..cpus.len() {
        for j in i + 1..cpus.len() {
            if cpus[i].1 == cpus[j].1 {
                let bw = cpus[i].2.min(cpus[j].2);
                w.b.duplex(cpus[i].0, cpus[j].0, bw, ALPHA_SYS_US, 1, "sys");
                w.assumptions.insert(format!(
                    "CPU↔CPU links: NCCL's model figure for the CPU ({}: {} GB/s)",
                    cpus[i].3,
                    gbps(bw)
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::imp;
    use super::*;
    use crate::front::builder::Format;

    #[test]
    fn pcie_rules() {
        assert_eq!(pcie_gbps(Some("16 GT/s"), Some("16")).0, 24.0);
        assert_eq!(pcie_gbps(Some("32.0 GT/s PCIe"), Some("16")).0, 48.0);
        assert_eq!(pcie_gbps(Some("32 GT/s PCIe/s"), Some("16")).0, 48.0);
        assert_eq!(pcie_gbps(Some("2.5 GT/s PCIe"), Some("1")).0, 0.1875);
        let (bw, notes) = pcie_gbps(Some(""), Some("0"));
        assert_eq!(bw, 12.0);
        assert_eq!(notes.len(), 2);
    }

    #[test]
    fn implausible_net_speed_clamped() {
        let t = r#"<system version="2"><cpu numaid="0">
<pci busid="0000:01:00.0" class="0x120000"><gpu dev="0" gcn="gfx942" rank="0"/></pci>
<pci busid="0000:02:00.0" class="0x020000"><nic><net name="cxi0" dev="0" speed="200000000"/></nic></pci>
</cpu></system>"#;
        let r = imp(t).unwrap();
        assert_eq!(r.format, Format::RcclXml);
        assert_eq!(r.nics[0].gbps, 25.0);
        assert!(r.warnings.iter().any(|w| w.contains("implausible")));
    }
}
