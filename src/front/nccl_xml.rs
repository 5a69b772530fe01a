//! NCCL topology XML (`NCCL_TOPO_DUMP_FILE` / `NCCL_TOPO_FILE`, version 1)
//! and RCCL's version-2 dialect with `<xgmi>` → Topology.
//!
//! Read leniently, as NCCL's own parser does (topologies.md §4.2): comments,
//! a leading blank line, a stray `<?xml …?>` prolog, tabs, single or double
//! quotes, unknown elements and attributes. What cannot mean a topology (no
//! GPUs, GPUs that cannot reach each other, broken markup) is refused with
//! the file, line and element. See docs/topology-import.md.

use super::builder::{
    gbps, unreachable_from_first, Builder, Format, GpuInfo, GpuLinkInfo, ImportOptions,
    ImportReport, NicInfo,
};
use super::FrontError;
use crate::ir::hardware::{
    self, nvlink_per_link, xgmi_per_link, ALPHA_GPU_LINK_US, ALPHA_NET_US, ALPHA_NVSWITCH_US,
    ALPHA_PCIE_US, ALPHA_SYS_US,
};
use crate::ir::NodeKind;
use petgraph::graph::NodeIndex;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Deepest element nesting accepted (real files have < 12 levels).
const MAX_DEPTH: usize = 64;
/// The NVLink target NCCL writes when the remote end is not visible.
pub const SENTINEL_BUSID: &str = "fffffff:ff:ff.0";

/// One XML element.
#[derive(Debug, Clone, PartialEq)]
pub struct Element {
    pub name: String,
    pub attrs: Vec<(String, String)>,
    pub children: Vec<Element>,
    /// 1-based line of the start tag.
    pub line: usize,
}

impl Element {
    pub fn attr(&self, k: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    }
    fn describe(&self) -> String {
        format!("line {}: <{}>", self.line, self.name)
    }
}

/// The `version` attribute of the root `<system>` element, if it can be
/// found cheaply (used by format detection).
pub fn declared_version(text: &str) -> Option<u32> {
    let i = text.find("<system")?;
    let rest = &text[i..];
    let end = rest.find('>')?;
    let tag = &rest[..end];
    let j = tag.find("version")?;
    let v: String = tag[j + 7..]
        .chars()
        .skip_while(|c| *c == '=' || *c == '"' || *c == '\'' || c.is_whitespace())
        .take_while(|c| c.is_ascii_digit())
        .collect();
    v.parse().ok()
}

/// Parse XML text into its root element (lenient; see the module docs).
/// Returns the root and lexical warnings.
pub fn parse_xml(text: &str, file: &str) -> Result<(Element, Vec<String>), FrontError> {
    let err = |line: usize, m: String| FrontError::new(file, format!("line {line}: {m}"));
    let b = text.as_bytes();
    let mut i = 0usize;
    let mut line = 1usize;
    let mut warnings = Vec::new();
    let mut stack: Vec<Element> = Vec::new();
    let mut root: Option<Element> = None;
    let mut saw_tab = false;
    while i < b.len() {
        let c = b[i];
        if c != b'<' {
            if c == b'\n' {
                line += 1;
            } else if c == b'\t' {
                saw_tab = true;
            }
            i += 1;
            continue;
        }
        let start_line = line;
        // Comment, declaration, doctype.
        if text[i..].starts_with("<!--") {
            let end = text[i + 4..]
                .find("-->")
                .ok_or_else(|| err(start_line, "comment `<!--` is never closed".into()))?;
            line += text[i..i + 4 + end].matches('\n').count();
            i += 4 + end + 3;
            continue;
        }
        if text[i..].starts_with("<?") || text[i..].starts_with("<!") {
            let end = text[i..]
                .find('>')
                .ok_or_else(|| err(start_line, "`<?`/`<!` is never closed".into()))?;
            if text[i..].starts_with("<?xml") {
                warnings.push(format!(
                    "line {start_line}: XML declaration `<?xml …?>` skipped (NCCL and RCCL reject it; remove it before giving the file to NCCL)"
                ));
            }
            line += text[i..i + end].matches('\n').count();
            i += end + 1;
            continue;
        }
        // A tag: find its end, respecting quotes.
        let mut j = i + 1;
        let mut quote: Option<u8> = None;
        while j < b.len() {
            let d = b[j];
            match quote {
                Some(q) if d == q => quote = None,
                Some(_) => {}
                None if d == b'"' || d == b'\'' => quote = Some(d),
                None if d == b'>' => break,
                None if d == b'<' => {
                    return Err(err(
                        line,
                        "`<` inside a tag (a tag is not closed with `>`)".into(),
                    ))
                }
                None => {}
            }
            if d == b'\n' {
                line += 1;
            }
            j += 1;
        }
        if j >= b.len() {
            return Err(err(start_line, "tag is never closed with `>`".into()));
        }
        let inner = &text[i + 1..j];
        i = j + 1;
        if let Some(name) = inner.strip_prefix('/') {
            let name = name.trim();
            let open = stack.pop().ok_or_else(|| {
                err(
                    start_line,
                    format!("closing tag </{name}> without an opening tag"),
                )
            })?;
            if open.name != name {
                return Err(err(
                    start_line,
                    format!(
                        "closing tag </{name}> does not match <{}> opened at line {}",
                        open.name, open.line
                    ),
                ));
            }
            match stack.last_mut() {
                Some(p) => p.children.push(open),
                None => {
                    if root.is_some() {
                        return Err(err(open.line, "more than one root element".into()));
                    }
                    root = Some(open);
                }
            }
            continue;
        }
        let self_closing = inner.trim_end().ends_with('/');
        let body = if self_closing {
            inner.trim_end().trim_end_matches('/')
        } else {
            inner
        };
        let el = parse_tag(body, start_line, file)?;
        if self_closing {
            match stack.last_mut() {
                Some(p) => p.children.push(el),
                None => {
                    if root.is_some() {
                        return Err(err(start_line, "more than one root element".into()));
                    }
                    root = Some(el);
                }
            }
        } else {
            if stack.len() >= MAX_DEPTH {
                return Err(err(
                    start_line,
                    format!("elements nested deeper than {MAX_DEPTH} levels"),
                ));
            }
            if root.is_some() && stack.is_empty() {
                return Err(err(start_line, "more than one root element".into()));
            }
            stack.push(el);
        }
    }
    if let Some(open) = stack.pop() {
        return Err(err(
            open.line,
            format!("<{}> is never closed (end of file reached)", open.name),
        ));
    }
    if saw_tab {
        warnings.push(
            "the file contains tab characters, which NCCL's parser rejects (read anyway)".into(),
        );
    }
    let root = root.ok_or_else(|| {
        FrontError::new(
            file,
            "no XML element found (the file is empty or only comments)",
        )
    })?;
    Ok((root, warnings))
}

fn parse_tag(body: &str, line: usize, file: &str) -> Result<Element, FrontError> {
    let err = |m: String| FrontError::new(file, format!("line {line}: {m}"));
    let body = body.trim();
    let name_end = body.find(|c: char| c.is_whitespace()).unwrap_or(body.len());
    let name = &body[..name_end];
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == ':')
    {
        return Err(err(format!("bad element name \"{name}\"")));
    }
    let mut attrs = Vec::new();
    let mut rest = body[name_end..].trim_start();
    while !rest.is_empty() {
        let eq = rest.find('=').ok_or_else(|| {
            err(format!(
                "<{name}>: attribute without a value near \"{}\"",
                short(rest)
            ))
        })?;
        let key = rest[..eq].trim();
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(err(format!(
                "<{name}>: bad attribute near \"{}\"",
                short(rest)
            )));
        }
        let after = rest[eq + 1..].trim_start();
        let q = after.chars().next().unwrap_or(' ');
        if q != '"' && q != '\'' {
            return Err(err(format!("<{name}>: value of \"{key}\" is not quoted")));
        }
        let close = after[1..]
            .find(q)
            .ok_or_else(|| err(format!("<{name}>: value of \"{key}\" is not closed")))?;
        let val = unescape(&after[1..1 + close]);
        attrs.push((key.to_string(), val));
        rest = after[1 + close + 1..].trim_start();
    }
    Ok(Element {
        name: name.to_string(),
        attrs,
        children: Vec::new(),
        line,
    })
}

fn short(s: &str) -> String {
    s.chars().take(24).collect()
}

fn unescape(s: &str) -> String {
    if !s.contains('&') {
        return s.to_string();
    }
    s.replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

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

/// Import NCCL / RCCL topology XML text.
pub fn import(
    text: &str,
    file: &str,
    format: Format,
    opts: &ImportOptions,
) -> Result<ImportReport, FrontError> {
    let (root, lex_warnings) = parse_xml(text, file)?;
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
    let mut warnings = lex_warnings;
    let version = root.attr("version").and_then(int_attr);
    let format = match (version, format) {
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
    };

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

    if w.gpus.is_empty() {
        let bare = root
            .children
            .iter()
            .flat_map(|c| c.children.iter())
            .any(|p| p.name == "pci" && p.attr("class").is_none());
        return Err(ferr(format!(
            "line {}: no GPUs: no <gpu> element and no <pci> with a GPU class (0x03xxxx / 0x12xxxx){}; \
             rscc needs at least one GPU",
            root.line,
            if bare { "; the file lists bare PCI bus ids without class attributes, so device kinds are unknown" } else { "" }
        )));
    }

    // Ranks.
    let any_ranked = w.gpus.iter().any(|g| g.rank.is_some());
    let mut order: Vec<usize> = (0..w.gpus.len()).collect();
    let mut keep: Vec<usize>;
    if any_ranked {
        keep = order
            .iter()
            .copied()
            .filter(|&i| w.gpus[i].rank.is_some())
            .collect();
        for i in order.iter().filter(|&&i| w.gpus[i].rank.is_none()) {
            let g = &w.gpus[*i];
            w.warnings.push(format!(
                "line {}: GPU {} has no rank attribute and is skipped (NCCL skips it too)",
                g.line,
                g.busid.clone().unwrap_or_default()
            ));
            // Keep the graph shape (it still forwards over PCIe) but it is no rank.
            let (node, id) = (
                g.node,
                format!("unranked-gpu@{}", g.busid.clone().unwrap_or_default()),
            );
            w.b.g[node].kind = NodeKind::Switch;
            w.b.rename(node, &id);
        }
        keep.sort_by_key(|&i| (w.gpus[i].rank, i));
        for pair in keep.windows(2) {
            let (a, b) = (&w.gpus[pair[0]], &w.gpus[pair[1]]);
            if a.rank == b.rank && a.host == b.host {
                return Err(ferr(format!(
                    "line {}: <gpu rank=\"{}\"> repeats the rank of the GPU at line {}",
                    b.line,
                    b.rank.unwrap_or(0),
                    a.line
                )));
            }
        }
        if multi {
            keep.sort_by_key(|&i| (w.gpus[i].host, w.gpus[i].rank, i));
        }
        let dense = keep
            .iter()
            .enumerate()
            .all(|(k, &i)| w.gpus[i].rank == Some(k as i64));
        if !dense && !multi {
            w.warnings
                .push("ranks in the file are not 0..N-1; renumbered in rank order".into());
        }
        if multi {
            w.assumptions.insert(
                "multi-host file: ranks numbered host by host (host_hash order), by rank within each host".into(),
            );
        }
    } else if w.gpus.iter().all(|g| g.dev.is_some()) {
        order.sort_by_key(|&i| (w.gpus[i].host, w.gpus[i].dev, i));
        keep = order;
        w.assumptions
            .insert("no rank attributes: GPUs ranked in dev order".into());
    } else {
        order.sort_by_key(|&i| (w.gpus[i].host, w.gpus[i].busid.clone(), i));
        keep = order;
        w.assumptions.insert(
            "no rank attributes: GPUs ranked in PCI bus id order (the order nvidia-smi and CUDA_DEVICE_ORDER=PCI_BUS_ID use)".into(),
        );
    }

    // Per-GPU model facts.
    let mut link_bw: Vec<f64> = vec![0.0; w.gpus.len()];
    let mut arch: Vec<String> = vec![String::new(); w.gpus.len()];
    for &i in &keep {
        let g = &w.gpus[i];
        let amd = g.gcn.is_some() || g.links.iter().any(|(_, f)| *f == "xgmi");
        let (bw, what): (f64, String) = if let Some(m) = opts.gpu {
            (m.link_gbps, format!("--gpu {}", m.name))
        } else if amd {
            match g.gcn.as_deref().and_then(xgmi_per_link) {
                Some((b, w)) => (b, w.to_string()),
                None => (
                    46.0,
                    format!(
                        "unknown AMD GPU (gcn {:?}): MI100 figure assumed",
                        g.gcn.as_deref().unwrap_or("missing")
                    ),
                ),
            }
        } else {
            match g.sm.and_then(nvlink_per_link) {
                Some((b, w)) => (b, w.to_string()),
                None => (
                    25.0,
                    format!(
                        "sm {} unknown: NVLink 25 GB/s per link assumed",
                        g.sm.map(|s| s.to_string())
                            .unwrap_or_else(|| "missing".into())
                    ),
                ),
            }
        };
        link_bw[i] = bw;
        arch[i] = match (&g.gcn, g.sm) {
            (Some(c), _) => {
                if c.starts_with("gfx") {
                    c.clone()
                } else {
                    format!("gfx{c}")
                }
            }
            (None, Some(s)) => format!("sm{s}"),
            (None, None) => "unknown".into(),
        };
        let own = g.busid.as_deref().unwrap_or("");
        if g.links
            .iter()
            .any(|(el, f)| *f != "c2c" && el.attr("target").map(norm_busid).as_deref() != Some(own))
        {
            w.assumptions.insert(format!(
                "{} per-link bandwidth {} GB/s per direction: hardware figure ({what}; topologies.md §1), not NCCL's model value",
                if amd { "xGMI" } else { "NVLink" },
                gbps(bw)
            ));
        }
    }

    // Name GPUs by rank.
    for (r, &i) in keep.iter().enumerate() {
        let n = w.gpus[i].node;
        w.b.g[n].rank = Some(r);
        let id = format!("{}gpu{r}", w.prefix(w.gpus[i].host));
        w.b.rename(n, &id);
        if let Some(m) = opts.gpu {
            w.b.g[n].sms = Some(m.sms);
        }
    }

    // Lookup: (host, busid) → gpu record.
    let mut by_busid: HashMap<(usize, String), usize> = HashMap::new();
    for &i in &keep {
        if let Some(b) = &w.gpus[i].busid {
            by_busid.insert((w.gpus[i].host, b.clone()), i);
        }
    }

    // GPU fabric links.
    let mut infos: BTreeMap<usize, Vec<GpuLinkInfo>> = BTreeMap::new();
    let mut pair: BTreeMap<(usize, usize, &'static str), (u32, u32, usize)> = BTreeMap::new();
    let mut nvs_nodes: HashMap<usize, NodeIndex> = HashMap::new();
    let mut shared_nvs: Option<NodeIndex> = None;
    let mut nvs_links: Vec<(usize, u32, bool)> = Vec::new(); // (gpu, count, sentinel)
    let mut any_fabric = false;
    for &i in &keep {
        let links = w.gpus[i].links.clone();
        for (el, fabric) in links {
            let count = match el.attr("count").and_then(int_attr) {
                Some(c) if c > 0 && c <= 1024 => c as u32,
                Some(c) => {
                    w.warnings.push(format!(
                        "{}: count {c} unusable; link ignored",
                        el.describe()
                    ));
                    continue;
                }
                None => {
                    w.warnings
                        .push(format!("{}: count missing; 1 assumed", el.describe()));
                    1
                }
            };
            if fabric == "c2c" {
                let bw = el
                    .attr("bw")
                    .and_then(|b| b.trim().parse::<f64>().ok())
                    .filter(|b| *b > 0.0 && b.is_finite());
                match bw {
                    Some(mbps) => {
                        let (gn, cpu) = (w.gpus[i].node, w.gpus[i].cpu);
                        w.b.duplex(gn, cpu, mbps / 1000.0, ALPHA_PCIE_US, count, "c2c");
                        infos.entry(i).or_default().push(GpuLinkInfo {
                            target: "cpu".into(),
                            count,
                            target_kind: "cpu",
                            fabric: "c2c",
                        });
                    }
                    None => w.warnings.push(format!(
                        "{}: <c2c> without a usable bw; ignored",
                        el.describe()
                    )),
                }
                continue;
            }
            let Some(target) = el.attr("target").map(norm_busid) else {
                w.warnings.push(format!(
                    "{}: <{}> without target; ignored",
                    el.describe(),
                    el.name
                ));
                continue;
            };
            let tclass = el
                .attr("tclass")
                .map(|t| t.trim().to_ascii_lowercase())
                .unwrap_or_default();
            let host = w.gpus[i].host;
            if w.gpus[i].busid.as_deref() == Some(target.as_str()) {
                w.warnings.push(format!(
                    "{}: <{}> targets the GPU's own busid {target} (self-link, seen in Azure NC A100 v4 files); ignored",
                    el.describe(),
                    el.name
                ));
                continue;
            }
            any_fabric = true;
            if tclass == "0x068001" {
                let (gn, cpu) = (w.gpus[i].node, w.gpus[i].cpu);
                w.b.duplex(gn, cpu, link_bw[i], ALPHA_NVSWITCH_US, count, "nvlink");
                infos.entry(i).or_default().push(GpuLinkInfo {
                    target,
                    count,
                    target_kind: "cpu",
                    fabric,
                });
                continue;
            }
            let sentinel = is_sentinel(&target);
            let to_switch = sentinel
                || tclass.starts_with("0x0680")
                || w.nvswitch_busids.contains(&(host, target.clone()));
            if to_switch && fabric == "nvlink" {
                nvs_links.push((i, count, sentinel));
                infos.entry(i).or_default().push(GpuLinkInfo {
                    target,
                    count,
                    target_kind: "nvswitch",
                    fabric,
                });
                continue;
            }
            match by_busid.get(&(host, target.clone())) {
                Some(&j) => {
                    let (a, b, fwd) = if i < j { (i, j, true) } else { (j, i, false) };
                    let e = pair.entry((a, b, fabric)).or_insert((0, 0, el.line));
                    if fwd {
                        e.0 = e.0.saturating_add(count)
                    } else {
                        e.1 = e.1.saturating_add(count)
                    }
                    infos.entry(i).or_default().push(GpuLinkInfo {
                        target,
                        count,
                        target_kind: "gpu",
                        fabric,
                    });
                }
                None => {
                    if tclass.is_empty() && fabric == "nvlink" {
                        w.warnings.push(format!(
                            "{}: target {target} is not a GPU in the file and has no tclass; taken as an NVSwitch",
                            el.describe()
                        ));
                        nvs_links.push((i, count, false));
                        infos.entry(i).or_default().push(GpuLinkInfo {
                            target,
                            count,
                            target_kind: "nvswitch",
                            fabric,
                        });
                    } else {
                        w.warnings.push(format!(
                            "{}: <{}> target {target} is not a GPU in this file; link ignored",
                            el.describe(),
                            el.name
                        ));
                    }
                }
            }
        }
    }
    // NVSwitch: one vertex per host (explicit busids), one shared vertex
    // for the sentinel when the file spans several hosts (MNNVL clique).
    for (i, count, sentinel) in nvs_links {
        let host = w.gpus[i].host;
        let sw = if sentinel && multi {
            *shared_nvs.get_or_insert_with(|| w.b.node("nvswitch", NodeKind::Switch, None))
        } else {
            let id = format!("{}nvswitch", w.prefix(host));
            let h = w.host(host);
            *nvs_nodes
                .entry(host)
                .or_insert_with(|| w.b.node(&id, NodeKind::Switch, h))
        };
        let gn = w.gpus[i].node;
        // Sum counts over switch chips: look for an existing edge.
        let existing = w.b.g.find_edge(gn, sw);
        match existing {
            Some(e) => {
                w.b.g[e].count = w.b.g[e].count.saturating_add(count);
                if let Some(e2) = w.b.g.find_edge(sw, gn) {
                    w.b.g[e2].count = w.b.g[e2].count.saturating_add(count);
                }
            }
            None => {
                w.b.duplex(gn, sw, link_bw[i], ALPHA_NVSWITCH_US, count, "nvlink")
            }
        }
    }
    if !nvs_nodes.is_empty() || shared_nvs.is_some() {
        w.assumptions.insert(
            "NVSwitch chips collapsed into one switch node per host; each GPU's link to it has the GPU's total NVLink count".into(),
        );
        if shared_nvs.is_some() {
            w.assumptions.insert(
                "sentinel NVLink target fffffff:ff:ff.0 in a multi-host file: one NVLink fabric shared by all hosts (MNNVL)".into(),
            );
        }
    }
    for ((a, b, fabric), (ab, ba, line)) in pair {
        let c = ab.max(ba);
        if ab != ba {
            w.warnings.push(format!(
                "line {line}: {fabric} between rank-order GPUs {} and {} listed as {ab} one way and {ba} the other; {c} used both ways",
                w.b.g[w.gpus[a].node].id,
                w.b.g[w.gpus[b].node].id
            ));
        }
        let bw = link_bw[a].min(link_bw[b]);
        let (na, nb) = (w.gpus[a].node, w.gpus[b].node);
        w.b.duplex(na, nb, bw, ALPHA_GPU_LINK_US, c, fabric);
    }
    if !any_fabric {
        let nvidia = keep.iter().any(|&i| w.gpus[i].gcn.is_none());
        w.warnings.push(format!(
            "no {} information in the file (a PCI-only skeleton{}): GPUs are joined only through PCIe and the CPUs",
            if nvidia { "NVLink" } else { "xGMI" },
            if keep.iter().any(|&i| !w.gpus[i].has_gpu_el) {
                "; NCCL fuses NVLink facts at run time"
            } else {
                " or a PCIe-only machine"
            }
        ));
    }

    // NICs.
    let mut nics = Vec::new();
    for (n, ports, host) in &w.nics {
        let (mbps, names): (f64, Vec<String>) = if ports.is_empty() {
            let d = opts.nic_gbps.map(|g| g * 8000.0).unwrap_or(100_000.0);
            (d, vec![w.b.g[*n].id.clone()])
        } else {
            (
                ports.iter().map(|p| p.mbps).sum(),
                ports.iter().map(|p| p.name.clone()).collect(),
            )
        };
        nics.push(NicInfo {
            node: *n,
            node_id: w.b.g[*n].id.clone(),
            ports: names.len(),
            names,
            gbps: mbps / 8000.0,
            host: w.host(*host),
        });
    }
    if w.unknown_nic_speed > 0 {
        w.assumptions.insert(format!(
            "{} NIC(s) known only by PCI class (no <net>): {} GB/s assumed{}",
            w.unknown_nic_speed,
            gbps(opts.nic_gbps.unwrap_or(12.5)),
            if opts.nic_gbps.is_some() {
                " (--nic-gbps)"
            } else {
                " (100 Gb/s; pass --nic-gbps)"
            }
        ));
    }
    // Multi-host: join the hosts' NICs through one network switch.
    if multi {
        let hosts_with_nic: BTreeSet<usize> = w.nics.iter().map(|(_, _, h)| *h).collect();
        if hosts_with_nic.len() == hash_order.len() {
            let sw = w.b.node("net", NodeKind::Switch, None);
            for ni in &nics {
                w.b.duplex(ni.node, sw, ni.gbps, ALPHA_NET_US, 1, "ib");
            }
            w.assumptions.insert(
                "multi-host file: hosts joined by one network switch over every NIC at the NIC's speed".into(),
            );
        }
    }
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
    let topology = w.b.finish(name, description, file)?;
    Ok(ImportReport {
        topology,
        format,
        warnings: w.warnings,
        assumptions: w.assumptions.into_iter().collect(),
        gpus,
        nics,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn imp(text: &str) -> Result<ImportReport, FrontError> {
        import(text, "t.xml", Format::NcclXml, &ImportOptions::default())
    }

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
    fn lexer_leniency() {
        let t = "\n<?xml version=\"1.0\"?>\n<!-- c -->\n<system version='1'>\n\t<cpu numaid=\"0\"><pci busid=\"0000:01:00.0\" class=\"0x030200\"/><pci busid=\"0000:02:00.0\" class=\"0x030200\"/></cpu></system>\n";
        let (root, warns) = parse_xml(t, "t").unwrap();
        assert_eq!(root.name, "system");
        assert_eq!(root.line, 4);
        assert_eq!(root.children[0].children.len(), 2);
        assert_eq!(warns.len(), 2, "{warns:?}");
    }

    #[test]
    fn lexer_errors_name_lines() {
        let e = parse_xml("<system>\n<cpu>\n</system>", "f.xml").unwrap_err();
        assert!(e.to_string().contains("f.xml: line 3"), "{e}");
        let e = parse_xml("<system>\n<cpu numaid=0/>\n</system>", "f.xml").unwrap_err();
        assert!(
            e.to_string().contains("line 2") && e.to_string().contains("not quoted"),
            "{e}"
        );
        let e = parse_xml("<!-- x", "f.xml").unwrap_err();
        assert!(e.to_string().contains("never closed"));
        let deep = "<a>".repeat(100);
        assert!(parse_xml(&deep, "f").is_err());
    }

    #[test]
    fn gpu_gpu_links_read_from_both_ends() {
        let t = r#"<system version="1"><cpu numaid="0">
<pci busid="0000:01:00.0" class="0x030200"><gpu dev="0" sm="70" rank="0"><nvlink target="0000:02:00.0" count="2" tclass="0x030200"/></gpu></pci>
<pci busid="0000:02:00.0" class="0x030200"><gpu dev="1" sm="70" rank="1"><nvlink target="0000:01:00.0" count="1" tclass="0x030200"/></gpu></pci>
</cpu></system>"#;
        let r = imp(t).unwrap();
        let t0 = &r.topology;
        let e = t0.graph.find_edge(t0.ranks[0], t0.ranks[1]).unwrap();
        assert_eq!(t0.graph[e].count, 2);
        assert_eq!(t0.graph[e].bw_gbps, 25.0);
        let e = t0.graph.find_edge(t0.ranks[1], t0.ranks[0]).unwrap();
        assert_eq!(t0.graph[e].count, 2);
        assert!(
            r.warnings.iter().any(|w| w.contains("2 one way and 1")),
            "{:?}",
            r.warnings
        );
    }

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

    #[test]
    fn multi_host_sentinel_shares_fabric() {
        let t = r#"<system version="1">
<cpu numaid="0" host_hash="0x1"><pci busid="0000:01:00.0" class="0x030200"><gpu dev="0" sm="100" rank="0"><nvlink target="fffffff:ff:ff.0" count="18" tclass="0x068000"/></gpu></pci></cpu>
<cpu numaid="0" host_hash="0x2"><pci busid="0000:01:00.0" class="0x030200"><gpu dev="0" sm="100" rank="0"><nvlink target="fffffff:ff:ff.0" count="18" tclass="0x068000"/></gpu></pci></cpu>
</system>"#;
        let r = imp(t).unwrap();
        assert_eq!(r.topology.num_ranks(), 2);
        assert_eq!(r.topology.num_hosts(), 2);
        // 18 NVLink 5 links + PCIe without link_speed (Gen3 ×16 = 12).
        assert_eq!(r.topology.gpu_bandwidth(0).0, 18.0 * 50.0 + 12.0);
    }

    #[test]
    fn unranked_gpus_are_skipped_when_others_have_ranks() {
        let t = r#"<system version="1"><cpu numaid="0">
<pci busid="0000:01:00.0" class="0x030200"><gpu dev="0" sm="90" rank="0"/></pci>
<pci busid="0000:02:00.0" class="0x030200"/>
<pci busid="0000:03:00.0" class="0x030200"><gpu dev="2" sm="90" rank="5"/></pci>
</cpu></system>"#;
        let r = imp(t).unwrap();
        assert_eq!(r.topology.num_ranks(), 2);
        assert_eq!(r.gpus[1].busid.as_deref(), Some("0000:03:00.0"));
        assert!(r
            .warnings
            .iter()
            .any(|w| w.contains("line 3") && w.contains("no rank")));
        assert!(r.warnings.iter().any(|w| w.contains("renumbered")));
        let t2 = t.replace("rank=\"5\"", "rank=\"0\"");
        let e = imp(&t2).unwrap_err();
        assert!(
            e.msg.contains("line 4") && e.msg.contains("repeats the rank"),
            "{e}"
        );
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
