//! `rscc topo …`: topology commands. `generate` writes a generated topology
//! as rscc JSON; `show` prints what a topology file holds. More subcommands
//! (import, export) are added as variants of [`TopoCmd`].

use super::{CliError, CliResult};
use crate::front::generate::{generate, GenParams, KINDS};
use crate::front::{load_topology, topo_json};
use crate::ir::summary::{summary, Report};
use clap::{Args, Subcommand};
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  rscc topo generate dgx-h100 --hosts 2 -o h100x2.json\n  rscc topo show topologies/dgx1-v100.json\n  rscc topo show topologies/dgx-a100.json --json"
)]
pub struct TopoArgs {
    #[command(subcommand)]
    pub cmd: TopoCmd,
}

/// Topology subcommands.
#[derive(Subcommand, Debug)]
pub enum TopoCmd {
    /// Generate a topology (rscc JSON) from a built-in generator.
    Generate(GenerateArgs),
    /// Show a topology file: GPUs, links, switches and NICs, per-GPU bandwidth.
    Show(ShowArgs),
    /// Import a real machine's dump (NCCL/RCCL XML, nvidia-smi, rocm-smi) as rscc JSON.
    Import(super::topo_import::ImportArgs),
    /// Export a topology as NCCL topology XML (NCCL_TOPO_FILE).
    Export(super::topo_export::ExportArgs),
}

#[derive(Args, Debug)]
#[command(
    allow_negative_numbers = true,
    after_help = "Examples:\n  rscc topo generate ring --gpus 16 --bw 50\n  rscc topo generate dgx-a100 --hosts 4 -o dgx-a100x4.json\n  rscc topo generate mi300x --nics true\n  rscc topo generate random --seed 7\n\n\
--bw is the kind's per-link bandwidth (GB/s per direction): per link for ring, line, fully-connected, \
dgx1-v100, mi300x and cpu-shm; per NVLink for dgx2-v100, dgx-a100 and dgx-h100 (the GPU's switch port \
is its NVLink count times this); per GPU port for switch. --alpha is the α of those links (µs).\n\
Constants and their sources: docs/topology-format.md."
)]
pub struct GenerateArgs {
    /// Topology kind.
    #[arg(value_parser = clap::builder::PossibleValuesParser::new(KINDS))]
    pub kind: String,
    /// Number of GPUs (ranks) per host; fixed machines accept only their own count.
    #[arg(long, value_name = "N")]
    pub gpus: Option<usize>,
    /// Number of hosts, joined rail-optimised through their NICs (dgx-a100, dgx-h100, mi300x).
    #[arg(long, value_name = "H")]
    pub hosts: Option<usize>,
    /// Per-link bandwidth, GB/s per direction (see below).
    #[arg(long, value_name = "GBPS")]
    pub bw: Option<f64>,
    /// Per-link latency α, µs.
    #[arg(long, value_name = "US")]
    pub alpha: Option<f64>,
    /// Attach one NIC per GPU (mi300x; default: only when --hosts > 1).
    #[arg(long, value_name = "BOOL")]
    pub nics: Option<bool>,
    /// NIC line rate, GB/s per direction (also the rail links' rate).
    #[arg(long, value_name = "GBPS")]
    pub nic_bw: Option<f64>,
    /// α of each NIC ↔ rail switch link, µs.
    #[arg(long, value_name = "US")]
    pub ib_alpha: Option<f64>,
    /// SM count of every GPU (generic kinds: ring, line, fully-connected, switch).
    #[arg(long, value_name = "N")]
    pub sms: Option<u32>,
    /// Seed of `random`: the fabric's shape, counts and rates.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Write to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  rscc topo show topologies/dgx1-v100.json\n  rscc topo show topologies/dgx-h100x2.json --json"
)]
pub struct ShowArgs {
    /// Topology file (rscc JSON).
    pub file: PathBuf,
    /// Print machine-readable JSON instead of tables.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: TopoArgs) -> CliResult {
    match args.cmd {
        TopoCmd::Generate(a) => run_generate(a),
        TopoCmd::Show(a) => run_show(a),
        TopoCmd::Import(a) => super::topo_import::run(a),
        TopoCmd::Export(a) => super::topo_export::run(a),
    }
}

fn run_generate(a: GenerateArgs) -> CliResult {
    let params = GenParams {
        gpus: a.gpus,
        hosts: a.hosts,
        bw_gbps: a.bw,
        alpha_us: a.alpha,
        nics: a.nics,
        nic_gbps: a.nic_bw,
        ib_alpha_us: a.ib_alpha,
        sms: a.sms,
        seed: a.seed,
    };
    let t = generate(&a.kind, &params).map_err(CliError::input)?;
    topo_json::validate(&t).map_err(|e| CliError::input(format!("generated {}: {e}", a.kind)))?;
    let text = topo_json::to_json(&t);
    match a.output {
        None => {
            print!("{text}");
            Ok(())
        }
        Some(path) => {
            std::fs::write(&path, text)
                .map_err(|e| CliError::input(format!("{}: cannot write: {e}", path.display())))?;
            eprintln!(
                "wrote {}: {} ({} GPUs, {} host{})",
                path.display(),
                t.name,
                t.num_ranks(),
                t.num_hosts(),
                if t.num_hosts() == 1 { "" } else { "s" }
            );
            Ok(())
        }
    }
}

fn run_show(a: ShowArgs) -> CliResult {
    let t = load_topology(&a.file).map_err(CliError::input)?;
    let r = summary(&t, &a.file.display().to_string());
    if a.json {
        let s = serde_json::to_string_pretty(&r)
            .map_err(|e| CliError::input(format!("cannot serialise the report: {e}")))?;
        println!("{s}");
    } else {
        print!("{}", render(&r));
    }
    Ok(())
}

// ---------------------------------------------------------------- text

/// A number for people: at most 3 decimals, no trailing zeros.
fn num(x: f64) -> String {
    let s = format!("{:.3}", x);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

fn wrap(text: &str, width: usize, indent: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for w in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + w.len() > width {
            out.push_str(indent);
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(w);
    }
    if !line.is_empty() {
        out.push_str(indent);
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// Left-aligned table with two spaces between columns.
fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    let mut w = vec![0; cols];
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            line.push_str(c);
            if i + 1 < r.len() {
                line.push_str(&" ".repeat(w[i] - c.chars().count() + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Largest GPU count shown as a matrix; bigger topologies get a list.
const MATRIX_MAX: usize = 16;

/// The text form of a report.
pub fn render(r: &Report) -> String {
    let mut s = String::new();
    s.push_str(&format!("topology {}  ({})\n", r.name, r.file));
    s.push_str(&format!(
        "{} GPU{}, {} host{}, {} switch{}, {} NIC{}, {} CPU{}, {} directed links\n",
        r.gpus,
        if r.gpus == 1 { "" } else { "s" },
        r.hosts,
        if r.hosts == 1 { "" } else { "s" },
        r.switches,
        if r.switches == 1 { "" } else { "es" },
        r.nics,
        if r.nics == 1 { "" } else { "s" },
        r.cpus,
        if r.cpus == 1 { "" } else { "s" },
        r.directed_links
    ));
    if !r.description.is_empty() {
        s.push_str("\ndescription:\n");
        s.push_str(&wrap(&r.description, 96, "  "));
    }

    s.push_str("\nGPUs (bandwidth = sum of link capacities, GB/s per direction)\n");
    let mut rows = vec![vec![
        "rank".to_string(),
        "id".into(),
        "host".into(),
        "sms".into(),
        "egress".into(),
        "ingress".into(),
        "by link kind (egress/ingress)".into(),
    ]];
    for g in &r.ranks {
        rows.push(vec![
            g.rank.to_string(),
            g.id.clone(),
            g.host.clone().unwrap_or_else(|| "-".into()),
            g.sms.map_or_else(|| "-".into(), |x| x.to_string()),
            num(g.egress_gbps),
            num(g.ingress_gbps),
            g.by_kind
                .iter()
                .map(|(k, b)| format!("{k} {}/{}", num(b.egress_gbps), num(b.ingress_gbps)))
                .collect::<Vec<_>>()
                .join(", "),
        ]);
    }
    s.push_str(&table(&rows));

    s.push('\n');
    if r.direct.is_empty() {
        s.push_str("Direct GPU-to-GPU links: none\n");
    } else if r.gpus <= MATRIX_MAX {
        s.push_str(
            "Direct GPU-to-GPU links (row -> column: links x GB/s per link, or total GB/s)\n",
        );
        let mut cell = vec![vec![".".to_string(); r.gpus]; r.gpus];
        for (i, row) in cell.iter_mut().enumerate() {
            row[i] = "-".into();
        }
        for d in &r.direct {
            if let Some(c) = cell.get_mut(d.from).and_then(|row| row.get_mut(d.to)) {
                *c = match d.bw_gbps {
                    Some(bw) => format!("{}x{}", d.count, num(bw)),
                    None => num(d.capacity_gbps),
                };
            }
        }
        let mut rows = vec![std::iter::once(String::new())
            .chain((0..r.gpus).map(|j| j.to_string()))
            .collect::<Vec<_>>()];
        for (i, row) in cell.into_iter().enumerate() {
            rows.push(std::iter::once(i.to_string()).chain(row).collect());
        }
        s.push_str(&table(&rows));
    } else {
        s.push_str(
            "Direct GPU-to-GPU links (rank -> peers: links x GB/s per link, or total GB/s)\n",
        );
        let mut per: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        for d in &r.direct {
            let what = match d.bw_gbps {
                Some(bw) => format!("{}x{}", d.count, num(bw)),
                None => num(d.capacity_gbps),
            };
            per.entry(d.from)
                .or_default()
                .push(format!("{} ({what})", d.to));
        }
        for (from, peers) in per {
            s.push_str(&format!("  {from} -> {}\n", peers.join(", ")));
        }
    }

    if !r.attachments.is_empty() {
        s.push_str(
            "\nSwitches, NICs and CPUs (<-> a link each way, -> out of, <- into the node)\n",
        );
        for a in &r.attachments {
            let host = a
                .host
                .as_deref()
                .map(|h| format!(", host {h}"))
                .unwrap_or_default();
            s.push_str(&format!("  {} ({}{host})\n", a.id, a.kind));
            for gr in &a.groups {
                let arrow = match gr.dir.as_str() {
                    "both" => "<->",
                    "out" => "->",
                    _ => "<-",
                };
                s.push_str(&format!(
                    "    {arrow} {}: {} x {} GB/s {}, alpha {} us\n",
                    gr.peers.join(" "),
                    gr.count,
                    num(gr.bw_gbps),
                    gr.kind,
                    num(gr.alpha_us)
                ));
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::front::generate::{generate, GenParams};
    use crate::ir::summary::KindBw;

    #[test]
    fn num_formats() {
        assert_eq!(num(300.0), "300");
        assert_eq!(num(31.5), "31.5");
        assert_eq!(num(0.35), "0.35");
        assert_eq!(num(0.1 + 0.2), "0.3");
        assert_eq!(num(-0.0), "0");
    }

    #[test]
    fn report_of_dgx1() {
        let t = generate("dgx1-v100", &GenParams::default()).unwrap();
        let r = summary(&t, "x.json");
        assert_eq!(r.gpus, 8);
        assert_eq!(r.direct.len(), 32); // 16 pairs, both directions
        let d01 = r.direct.iter().find(|d| d.from == 0 && d.to == 1).unwrap();
        assert_eq!(
            (d01.count, d01.capacity_gbps, d01.bw_gbps),
            (2, 50.0, Some(25.0))
        );
        assert!(r.direct.iter().all(|d| !(d.from == 0 && d.to == 5)));
        assert_eq!(
            r.ranks[3].by_kind["nvlink"],
            KindBw {
                egress_gbps: 150.0,
                ingress_gbps: 150.0
            }
        );
        let text = render(&r);
        assert!(text.contains("2x25"), "{text}");
        assert!(text.contains("8 GPUs, 1 host"), "{text}");
    }

    #[test]
    fn report_groups_switch_ports() {
        let t = generate(
            "dgx-a100",
            &GenParams {
                hosts: Some(2),
                ..Default::default()
            },
        )
        .unwrap();
        let r = summary(&t, "x.json");
        assert_eq!(r.hosts, 2);
        assert_eq!((r.switches, r.nics), (2 + 8, 16));
        let sw = r
            .attachments
            .iter()
            .find(|a| a.id == "h1/nvswitch")
            .unwrap();
        assert_eq!(sw.groups.len(), 1);
        assert_eq!(sw.groups[0].dir, "both");
        assert_eq!(sw.groups[0].count, 12);
        assert_eq!(sw.groups[0].peers.len(), 8);
        let rail = r.attachments.iter().find(|a| a.id == "rail3").unwrap();
        assert_eq!(rail.groups[0].peers, vec!["h0/nic3", "h1/nic3"]);
        assert!(r.direct.is_empty());
        assert!(render(&r).contains("Direct GPU-to-GPU links: none"));
    }
}
