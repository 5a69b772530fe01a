//! `rscc topo export`: write a topology as NCCL topology XML, for
//! `NCCL_TOPO_FILE`.

use super::{CliError, CliResult};
use crate::back::nccl_xml;
use clap::{Args, ValueEnum};
use std::collections::HashMap;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// NCCL topology XML (RCCL's version 2 when the topology has xGMI links).
    NcclXml,
}

#[derive(Args, Debug)]
#[command(
    after_help = "Example:\n  rscc topo export machine.json --format nccl-xml -o topo.xml\n  NCCL_TOPO_FILE=topo.xml ./all_reduce_perf …"
)]
pub struct ExportArgs {
    /// Topology in any format `--topo` takes (rscc JSON, NCCL/RCCL XML, nvidia-smi, rocm-smi).
    pub file: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value = "nccl-xml")]
    pub format: ExportFormat,
    /// GPU model, for nvidia-smi / rocm-smi inputs.
    #[arg(long)]
    pub gpu: Option<String>,
    /// Write here (default: standard output).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

pub fn run(args: ExportArgs) -> CliResult {
    let opts = super::topo_import::options(None, args.gpu.as_deref(), None)?;
    let r = super::topo_import::import_with(&args.file, &opts, 1)?;
    let speeds: HashMap<_, _> = r
        .nics
        .iter()
        .filter(|n| n.gbps > 0.0)
        .map(|n| (n.node, n.gbps))
        .collect();
    let ex = match args.format {
        ExportFormat::NcclXml => nccl_xml::to_nccl_xml(&r.topology, &speeds)
            .map_err(|e| CliError::input(format!("{}: {e}", args.file.display())))?,
    };
    for w in &ex.warnings {
        eprintln!("warning: {w}");
    }
    eprintln!("note: NCCL XML holds no latencies; link bandwidths are implied by sm/gcn, link_speed × link_width and net speed");
    match &args.output {
        Some(p) => std::fs::write(p, &ex.xml)
            .map_err(|e| CliError::input(format!("{}: cannot write: {e}", p.display())))?,
        None => print!("{}", ex.xml),
    }
    Ok(())
}
