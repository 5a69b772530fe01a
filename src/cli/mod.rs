//! The command line: parse arguments, call the library, print. Each
//! subcommand lives in its own file with its clap `Args` and a `run`.
//!
//! Exit codes: 0 success; 1 input read but a check failed; 2 unusable input
//! or arguments.

pub mod bound;
pub mod run;
pub mod simulate;
pub mod sizes;
pub mod topo;

use clap::{Parser, Subcommand};

pub mod synth;
pub mod verify;
mod verify_dir;
use std::fmt;
use std::process::ExitCode;

pub mod topo_export;
pub mod topo_import;

/// An error that ends the command with a message and an exit code.
#[derive(Debug)]
pub struct CliError {
    pub code: u8,
    pub msg: String,
}

impl CliError {
    /// Unusable input or arguments (exit 2).
    pub fn input(msg: impl fmt::Display) -> Self {
        CliError {
            code: 2,
            msg: msg.to_string(),
        }
    }
    /// A check failed (exit 1).
    pub fn check(msg: impl fmt::Display) -> Self {
        CliError {
            code: 1,
            msg: msg.to_string(),
        }
    }
}

impl CliError {
    /// A compile error for the topology file `topo`: the request's fault
    /// (exit 2, naming the file), or rscc's (exit 1).
    pub fn compile(topo: &std::path::Path, e: crate::compile::CompileError) -> Self {
        if e.is_request() {
            CliError::input(format!("{}: {e}", topo.display()))
        } else {
            CliError::check(e)
        }
    }
}

pub type CliResult = Result<(), CliError>;

#[derive(Parser, Debug)]
#[command(
    name = "rscc",
    version,
    about = "Synthesize, verify and emit GPU collective schedules (reduce-scatter, allgather, allreduce) as MSCCL XML",
    after_help = "Example:\n  rscc synth --topo topologies/dgx-h100.json --op reduce-scatter -o rs.xml\n  rscc verify rs.xml --topo topologies/dgx-h100.json"
)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Synthesize a verified schedule and write MSCCL XML.
    Synth(synth::SynthArgs),
    /// Verify an MSCCL XML file symbolically.
    Verify(verify::VerifyArgs),
    /// Topology files: generate, show, import, export.
    Topo(topo::TopoArgs),
    Bound(bound::BoundArgs),
    Simulate(simulate::SimulateArgs),
    /// Run a schedule on real data (CPU executor) and time it like nccl-tests.
    Run(run::RunArgs),
}

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let res: CliResult = match cli.cmd {
        Command::Synth(a) => synth::run(a),
        Command::Verify(a) => verify::run(a),
        Command::Topo(a) => topo::run(a),
        Command::Bound(a) => bound::run(a),
        Command::Simulate(a) => simulate::run(a),
        Command::Run(a) => run::run(a),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", e.msg);
            ExitCode::from(e.code)
        }
    }
}
