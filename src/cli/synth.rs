//! `rscc synth`: topology in, verified MSCCL XML out.

use super::{CliError, CliResult};
use crate::compile::{compile, CompileError, CompileOptions};
use crate::front;
use crate::ir::{Proto, Runtime};
use crate::synth::Algo;
use clap::{Args, ValueEnum};
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Op {
    #[value(name = "reduce-scatter")]
    ReduceScatter,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum RuntimeArg {
    /// Azure/msccl-executor-nccl (coll="reducescatter").
    Executor,
    /// microsoft/msccl (coll="reduce_scatter").
    Legacy,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
#[allow(clippy::upper_case_acronyms)]
pub enum ProtoArg {
    Simple,
    LL,
    LL128,
}

#[derive(Args, Debug)]
#[command(
    after_help = "Example:\n  rscc synth --topo topologies/dgx-h100.json --op reduce-scatter -o rs.xml\n  rscc synth --topo topologies/dgx1-v100.json --op reduce-scatter --algo ring --chunks 12 --runtime legacy -o rs-legacy.xml"
)]
pub struct SynthArgs {
    /// Topology file (rscc JSON, or an imported format).
    #[arg(long)]
    pub topo: PathBuf,
    /// Collective to synthesize.
    #[arg(long, value_enum, default_value = "reduce-scatter")]
    pub op: Op,
    /// Synthesizer.
    #[arg(long, default_value = "ring")]
    pub algo: String,
    /// Chunks per rank's output shard (default: the synthesizer's choice).
    #[arg(long)]
    pub chunks: Option<usize>,
    /// NCCL protocol written into the file.
    #[arg(long, value_enum, default_value = "simple")]
    pub proto: ProtoArg,
    /// Runtime the file targets.
    #[arg(long, value_enum, default_value = "executor")]
    pub runtime: RuntimeArg,
    /// Only in-place calls (default: both in-place and out-of-place).
    #[arg(long, conflicts_with = "outofplace")]
    pub inplace: bool,
    /// Only out-of-place calls.
    #[arg(long)]
    pub outofplace: bool,
    /// Output file (default: standard output).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

pub fn run(a: SynthArgs) -> CliResult {
    let topo = front::load_topology(&a.topo).map_err(CliError::input)?;
    let algo = Algo::parse(&a.algo)
        .ok_or_else(|| CliError::input(format!("unknown --algo \"{}\" (known: ring)", a.algo)))?;
    let runtime = match a.runtime {
        RuntimeArg::Executor => Runtime::Executor,
        RuntimeArg::Legacy => Runtime::Legacy,
    };
    let (inplace, outofplace) = match (a.inplace, a.outofplace, runtime) {
        (true, _, _) => (true, false),
        (_, true, _) => (false, true),
        // Legacy uses a file only for calls whose in-place-ness equals
        // `inplace`: default to in-place there.
        (false, false, Runtime::Legacy) => (true, false),
        (false, false, Runtime::Executor) => (true, true),
    };
    let opts = CompileOptions {
        algo,
        chunks: a.chunks,
        proto: match a.proto {
            ProtoArg::Simple => Proto::Simple,
            ProtoArg::LL => Proto::LL,
            ProtoArg::LL128 => Proto::LL128,
        },
        runtime,
        inplace,
        outofplace,
        min_bytes: 0,
        // Executor: 0 = no upper limit. Legacy: 0 would mean "never", so
        // write a real upper bound (1 TiB, exclusive).
        max_bytes: if runtime == Runtime::Legacy {
            1 << 40
        } else {
            0
        },
    };
    let c = compile(&topo, &opts).map_err(|e| match e {
        CompileError::Request(m) => CliError::input(format!("{}: {m}", a.topo.display())),
        CompileError::Internal(m) => CliError::check(m),
    })?;
    for f in &c.fallbacks {
        eprintln!("note: skipped {f}");
    }
    let p = &c.program;
    match &a.output {
        Some(path) => {
            let file = std::fs::File::create(path)
                .map_err(|e| CliError::input(format!("{}: {e}", path.display())))?;
            let mut w = std::io::BufWriter::new(file);
            crate::back::msccl_xml::write(p, &mut w)
                .and_then(|_| w.flush())
                .map_err(|e| CliError::input(format!("{}: {e}", path.display())))?;
        }
        None => {
            let stdout = std::io::stdout();
            let mut w = std::io::BufWriter::new(stdout.lock());
            crate::back::msccl_xml::write(p, &mut w)
                .and_then(|_| w.flush())
                .map_err(|e| CliError::input(format!("stdout: {e}")))?;
        }
    }
    eprintln!(
        "{}: {} on {} ranks, {} chunks/loop, {} channels, {} threadblocks (max {} per rank), {} steps; verified {}",
        a.output.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "stdout".into()),
        c.algorithm.name,
        p.ngpus,
        p.nchunksperloop,
        p.nchannels,
        p.num_tbs(),
        p.max_tbs_per_rank(),
        p.num_steps(),
        c.report.modes.join(" and ")
    );
    Ok(())
}
