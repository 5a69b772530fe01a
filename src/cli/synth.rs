//! `rscc synth`: topology in, verified MSCCL XML out.

use super::{CliError, CliResult};
use crate::compile::{self, CompileError, CompileOptions, Compiled};
use crate::front;
use crate::ir::{Proto, Runtime};
use crate::sim::{self, SimOptions};
use crate::synth::{Algo, SynthOptions};
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
    /// Synthesizer: auto (score every applicable one in the simulator and
    /// pick per size), ring, direct, tree, hier, mix, flow, sccl, gap.
    #[arg(long, default_value = "auto")]
    pub algo: String,
    /// Sizes (bytes per rank, nccl-tests' S) that `auto` scores, e.g. 1K:4G.
    /// With `-o DIR/` one file per size band is written.
    #[arg(long)]
    pub sizes: Option<String>,
    /// Seconds any solver or search may take (best-so-far after that; at
    /// most 1e9).
    #[arg(long, default_value_t = 30.0)]
    pub time_limit: f64,
    /// Seed of the LP solver (HiGHS `random_seed`) in the mixture and flow
    /// LPs (the gap LP is solved with seeds 8·seed … 8·seed+7), and of the
    /// gap search's kicks: the same input and seed give the same file, byte
    /// for byte; another seed may pick another of several optimal LP
    /// solutions.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=2147483647))]
    pub seed: u32,
    /// Schedules the gap search may simulate (its budget; the same budget
    /// and seed give the same file on any machine). Default: 1000, or fewer
    /// where the schedules are large (at most 450000 program steps
    /// lowered in all; under 0.8 s on two cores).
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=100_000_000))]
    pub evals: Option<usize>,
    /// Chunks per rank's output shard (default: the synthesizer's choice;
    /// for tree, this many equal classes instead of its graded ones).
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
    /// Output file, or a directory (ending in '/') for one file per size
    /// band with `--algo auto` (default: standard output).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

pub fn run(a: SynthArgs) -> CliResult {
    let topo = front::load_topology(&a.topo).map_err(CliError::input)?;
    let algo = Algo::parse(&a.algo).ok_or_else(|| {
        CliError::input(format!(
            "unknown --algo \"{}\" (known: auto, ring, direct, tree, hier, mix, flow, sccl, gap)",
            a.algo
        ))
    })?;
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
        synth: SynthOptions {
            chunks: a.chunks,
            time_limit_s: a.time_limit,
            seed: a.seed,
            evals: a.evals,
        },
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
            LEGACY_MAX
        } else {
            0
        },
    };
    let sizes = match &a.sizes {
        Some(s) => {
            super::sizes::parse_sizes(s).map_err(|e| CliError::input(format!("--sizes: {e}")))?
        }
        None => compile::default_sizes(),
    };
    let to_dir = a
        .output
        .as_ref()
        .is_some_and(|p| p.to_string_lossy().ends_with('/') || p.is_dir());
    if to_dir && algo != Algo::Auto {
        return Err(CliError::input(
            "-o DIR/ writes one file per size band and needs --algo auto",
        ));
    }
    let req = |e: CompileError| match e {
        CompileError::Request(m) => CliError::input(format!("{}: {m}", a.topo.display())),
        CompileError::Internal(m) => CliError::check(m),
    };
    let started = std::time::Instant::now();
    let progress = |done: usize, total: usize, what: &str| {
        if started.elapsed().as_secs_f64() > 1.0 {
            eprint!("\r[{done}/{total}] {what:<60}");
        }
    };
    let (chosen, selection) = if algo == Algo::Auto {
        let sel = compile::auto(
            &topo,
            &opts,
            &sizes,
            &SimOptions::default(),
            Some(&progress),
        )
        .map_err(req)?;
        if started.elapsed().as_secs_f64() > 1.0 {
            eprintln!();
        }
        (sel.candidates[sel.overall].clone(), Some(sel))
    } else {
        (compile::compile_one(&topo, algo, &opts).map_err(req)?, None)
    };
    for f in &chosen.fallbacks {
        eprintln!("note: skipped {f}");
    }
    if selection.is_none() {
        // A faster small-message variant safe only up to a size: say so.
        if let Ok(Some(small)) = compile::compile_small(&topo, algo, &opts) {
            if let Some(m) = small.max_size {
                eprintln!(
                    "note: for calls up to {m} B, {} is faster at small sizes (its multi-chunk steps deadlock once MSCCL splits them above that size); `rscc synth --topo … -o DIR/` writes it as its own size band",
                    small.algorithm.name
                );
            }
        }
    }
    if let Some(sel) = &selection {
        for s in &sel.skipped {
            eprintln!("note: {s}");
        }
    }
    if to_dir {
        let sel = selection.as_ref().expect("auto");
        let dir = a.output.clone().unwrap_or_default();
        std::fs::create_dir_all(&dir)
            .map_err(|e| CliError::input(format!("{}: {e}", dir.display())))?;
        for b in &sel.bands {
            let mut p = sel.candidates[b.candidate].program.clone();
            p.min_bytes = b.min_bytes as i64;
            p.max_bytes = Some(match (b.max_bytes, runtime) {
                (None, Runtime::Executor) => 0,
                (None, Runtime::Legacy) => LEGACY_MAX,
                (Some(m), Runtime::Executor) => m as i64,
                // Legacy's upper bound is exclusive.
                (Some(m), Runtime::Legacy) => m as i64 + 1,
            });
            let name = format!(
                "rs-{}-{}-{}.xml",
                sel.candidates[b.candidate].algo.name(),
                b.min_bytes,
                b.max_bytes
                    .map(|m| m.to_string())
                    .unwrap_or_else(|| "inf".into())
            );
            write_xml(&p, Some(&dir.join(&name)))?;
            eprintln!(
                "{}: {} for {} B .. {} B",
                dir.join(&name).display(),
                sel.candidates[b.candidate].algorithm.name,
                b.min_bytes,
                b.max_bytes
                    .map(|m| m.to_string())
                    .unwrap_or_else(|| "∞".into())
            );
        }
    } else {
        write_xml(&chosen.program, a.output.as_deref())?;
        let p = &chosen.program;
        eprintln!(
            "{}: {} on {} ranks, {} chunks/loop, {} channels, {} threadblocks (max {} per rank), {} steps; verified {}",
            a.output.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "stdout".into()),
            chosen.algorithm.name,
            p.ngpus,
            p.nchunksperloop,
            p.nchannels,
            p.num_tbs(),
            p.max_tbs_per_rank(),
            p.num_steps(),
            chosen.report.modes.join(" and ")
        );
    }
    report(&topo, &opts, &chosen, selection.as_ref(), to_dir);
    Ok(())
}

/// Legacy maxBytes when there is no upper limit (exclusive): 1 TiB.
const LEGACY_MAX: i64 = 1 << 40;

fn write_xml(p: &crate::ir::Program, path: Option<&std::path::Path>) -> CliResult {
    match path {
        Some(path) => {
            let file = std::fs::File::create(path)
                .map_err(|e| CliError::input(format!("{}: {e}", path.display())))?;
            let mut w = std::io::BufWriter::new(file);
            crate::back::msccl_xml::write(p, &mut w)
                .and_then(|_| w.flush())
                .map_err(|e| CliError::input(format!("{}: {e}", path.display())))
        }
        None => {
            let stdout = std::io::stdout();
            let mut w = std::io::BufWriter::new(stdout.lock());
            crate::back::msccl_xml::write(p, &mut w)
                .and_then(|_| w.flush())
                .map_err(|e| CliError::input(format!("stdout: {e}")))
        }
    }
}

/// Predicted busbw at a few sizes, the ratio to the bound and to the ring
/// (stderr; the same simulator and bound as `rscc simulate`). `per_band`:
/// each size by the schedule of its band (what `-o DIR/` wrote), else by
/// `chosen`.
fn report(
    topo: &crate::ir::Topology,
    opts: &CompileOptions,
    chosen: &Compiled,
    sel: Option<&compile::Selection>,
    per_band: bool,
) {
    let sizes: Vec<u64> = vec![1 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20, 1 << 30];
    let so = SimOptions::default();
    let rows = match sel.filter(|_| per_band) {
        Some(s) => sizes
            .iter()
            .map(|&size| {
                let b = s
                    .bands
                    .iter()
                    .find(|b| size >= b.min_bytes && b.max_bytes.is_none_or(|m| size <= m))
                    .expect("the bands cover every size");
                let prog = &s.candidates[b.candidate].program;
                sim::report::busbw_table(prog, topo, &[size], &so).map(|mut r| r.remove(0))
            })
            .collect(),
        None => sim::report::busbw_table(&chosen.program, topo, &sizes, &so),
    };
    let Ok(rows) = rows else {
        eprintln!(
            "note: the simulator could not score this schedule on {}",
            topo.name
        );
        return;
    };
    let ring_rows = if chosen.algo == Algo::Ring && !per_band {
        Some(rows.clone())
    } else {
        let ring = match sel.and_then(|s| s.candidates.iter().find(|c| c.algo == Algo::Ring)) {
            Some(r) => Some(r.clone()),
            None => compile::compile_one(topo, Algo::Ring, opts).ok(),
        };
        ring.and_then(|r| sim::report::busbw_table(&r.program, topo, &sizes, &so).ok())
    };
    eprintln!(
        "{:>12} {:>12} {:>10} {:>10} {:>8}",
        "size(B)", "time(us)", "busbw", "bound%", "x ring"
    );
    for (i, r) in rows.iter().enumerate() {
        // A one-GPU machine moves nothing: no ratio.
        let vs_ring = ring_rows
            .as_ref()
            .filter(|_| r.time_us > 0.0)
            .map(|rr| format!("{:.2}", rr[i].time_us / r.time_us))
            .unwrap_or_else(|| "-".into());
        eprintln!(
            "{:>12} {:>12.2} {:>10.2} {:>10} {:>8}",
            r.size_bytes,
            r.time_us,
            r.busbw_gbps,
            r.bound_ratio
                .map(|x| format!("{:.1}", 100.0 * x))
                .unwrap_or_else(|| "-".into()),
            vs_ring
        );
    }
    if let Some(s) = sel.filter(|_| !per_band) {
        if s.bands.len() > 1 {
            let names: Vec<String> = s
                .bands
                .iter()
                .map(|b| {
                    format!(
                        "{}≥{}B",
                        s.candidates[b.candidate].algorithm.name, b.min_bytes
                    )
                })
                .collect();
            eprintln!(
                "note: the best schedule depends on the size ({}); write one file per band with -o DIR/",
                names.join(", ")
            );
        }
    }
}
