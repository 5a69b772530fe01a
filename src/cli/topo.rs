//! `rscc topo …`: topology commands. (In this branch only `import` and
//! `export`; `generate` and `show` live in another branch.)

use super::CliResult;
use clap::{Args, Subcommand};

#[derive(Args, Debug)]
pub struct TopoArgs {
    #[command(subcommand)]
    pub cmd: TopoCmd,
}

#[derive(Subcommand, Debug)]
pub enum TopoCmd {
    /// Import a real machine's dump (NCCL/RCCL XML, nvidia-smi, rocm-smi) as rscc JSON.
    Import(super::topo_import::ImportArgs),
    /// Export a topology as NCCL topology XML (NCCL_TOPO_FILE).
    Export(super::topo_export::ExportArgs),
}

pub fn run(args: TopoArgs) -> CliResult {
    match args.cmd {
        TopoCmd::Import(a) => super::topo_import::run(a),
        TopoCmd::Export(a) => super::topo_export::run(a),
    }
}
