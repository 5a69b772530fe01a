//! `rscc topo import`: read a real machine's topology dump and write rscc
//! topology JSON; print what was understood and assumed on stderr.

use super::{CliError, CliResult};
use crate::front::import::{self, Format, ImportOptions, ImportReport};
use crate::front::topo_json;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
#[command(after_help = "Examples:\n  \
    rscc topo import dump.xml -o machine.json\n  \
    rscc topo import nvidia-smi-topo.txt --gpu h100 --hosts 8 -o cluster.json\n  \
    rscc topo import showtopo.txt --format rocm-smi --gpu mi300x")]
pub struct ImportArgs {
    /// The dump: NCCL/RCCL topology XML, `nvidia-smi topo -m` or `rocm-smi --showtopo` output.
    pub file: PathBuf,
    /// Input format (detected from the content when omitted).
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// GPU model for per-link bandwidths (h100|h200|a100|v100|b200|mi300x|mi250|mi250x|mi210|mi100).
    #[arg(long)]
    pub gpu: Option<String>,
    /// Join this many copies of the machine rail-optimised through its NICs.
    #[arg(long, default_value_t = 1)]
    pub hosts: usize,
    /// NIC speed in GB/s where the dump gives none (nvidia-smi, PCI-only skeletons).
    #[arg(long)]
    pub nic_gbps: Option<f64>,
    /// Write the topology JSON here (default: standard output).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Print the import report (GPUs, NICs, warnings, assumptions) as JSON on stderr instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// Parse the shared `--gpu` / `--nic-gbps` / `--format` options.
pub fn options(
    format: Option<Format>,
    gpu: Option<&str>,
    nic_gbps: Option<f64>,
) -> Result<ImportOptions, CliError> {
    let gpu = match gpu {
        None => None,
        Some(g) => Some(crate::ir::hardware::gpu_model(g).ok_or_else(|| {
            CliError::input(format!(
                "--gpu {g}: unknown GPU model (known: {})",
                crate::ir::hardware::gpu_model_names()
            ))
        })?),
    };
    if let Some(n) = nic_gbps {
        if !(n.is_finite() && n > 0.0) {
            return Err(CliError::input(format!(
                "--nic-gbps must be positive, got {n}"
            )));
        }
    }
    Ok(ImportOptions {
        format,
        gpu,
        nic_gbps,
    })
}

/// Readable summary of an import.
pub fn summary(r: &ImportReport) -> String {
    use std::fmt::Write as _;
    let t = &r.topology;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} ({}): {} GPUs, {} NICs, {} hosts, {} nodes, {} directed links",
        t.name,
        r.format,
        t.num_ranks(),
        r.nics.len(),
        t.num_hosts(),
        t.graph.node_count(),
        t.graph.edge_count()
    );
    let _ = writeln!(
        s,
        "{:>5}  {:<12} {:<14} {:<10} {:>6} {:>9} {:>10}  fabric targets",
        "rank", "node", "busid", "arch", "links", "GB/s/lnk", "GPU GB/s"
    );
    for gi in &r.gpus {
        let targets: Vec<String> = gi
            .links
            .iter()
            .map(|l| {
                format!(
                    "{}×{}",
                    l.count,
                    if l.target_kind == "gpu" {
                        l.target.as_str()
                    } else {
                        l.target_kind
                    }
                )
            })
            .collect();
        let (out, _) = t.gpu_bandwidth(gi.rank);
        let _ = writeln!(
            s,
            "{:>5}  {:<12} {:<14} {:<10} {:>6} {:>9} {:>10}  {}",
            gi.rank,
            gi.node_id,
            gi.busid.as_deref().unwrap_or("-"),
            gi.arch,
            gi.fabric_links(),
            import::gbps(gi.link_gbps),
            import::gbps(out),
            targets.join(" ")
        );
    }
    for n in &r.nics {
        let _ = writeln!(
            s,
            "  NIC {:<24} ports {} {:>7} GB/s  ({})",
            n.node_id,
            n.ports,
            import::gbps(n.gbps),
            n.names.join(", ")
        );
    }
    for w in &r.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    for a in &r.assumptions {
        let _ = writeln!(s, "assumed: {a}");
    }
    s
}

/// The report as JSON (for scripts).
pub fn report_json(r: &ImportReport) -> serde_json::Value {
    let t = &r.topology;
    serde_json::json!({
        "name": t.name,
        "format": r.format.as_str(),
        "gpus": r.gpus.iter().map(|g| serde_json::json!({
            "rank": g.rank, "node": g.node_id, "busid": g.busid, "host": g.host, "arch": g.arch,
            "link_gbps": g.link_gbps, "fabric_links": g.fabric_links(),
            "gpu_gbps": t.gpu_bandwidth(g.rank).0,
            "links": g.links.iter().map(|l| serde_json::json!({
                "target": l.target, "count": l.count, "target_kind": l.target_kind, "fabric": l.fabric
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "nics": r.nics.iter().map(|n| serde_json::json!({
            "node": n.node_id, "names": n.names, "ports": n.ports, "gbps": n.gbps, "host": n.host
        })).collect::<Vec<_>>(),
        "warnings": r.warnings,
        "assumptions": r.assumptions,
    })
}

/// Import with the CLI's options, including `--hosts`.
pub fn import_with(
    file: &std::path::Path,
    opts: &ImportOptions,
    hosts: usize,
) -> Result<ImportReport, CliError> {
    if hosts == 0 {
        return Err(CliError::input("--hosts must be at least 1"));
    }
    let r = import::import_file(file, opts).map_err(CliError::input)?;
    if hosts > 1 {
        import::replicate(&r, hosts, &file.display().to_string()).map_err(CliError::input)
    } else {
        Ok(r)
    }
}

pub fn run(args: ImportArgs) -> CliResult {
    let opts = options(args.format, args.gpu.as_deref(), args.nic_gbps)?;
    let r = import_with(&args.file, &opts, args.hosts)?;
    if args.json {
        eprintln!(
            "{}",
            serde_json::to_string_pretty(&report_json(&r)).unwrap_or_default()
        );
    } else {
        eprint!("{}", summary(&r));
    }
    let text = topo_json::to_json(&r.topology);
    match &args.output {
        Some(p) => std::fs::write(p, text)
            .map_err(|e| CliError::input(format!("{}: cannot write: {e}", p.display())))?,
        None => print!("{text}"),
    }
    Ok(())
}
