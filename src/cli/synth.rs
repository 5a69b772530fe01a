//! `rscc synth`: topology in, verified MSCCL XML out.

use super::{CliError, CliResult};
use crate::compile::report::{synth_report, ReportRow};
use crate::compile::{self, CompileOptions, Compiled, Mode, Selection};
use crate::front;
use crate::ir::{Collective, Program, Proto, Runtime};
use crate::lower::LowerOptions;
use crate::sim::SimOptions;
use crate::synth::{Algo, SynthOptions};
use clap::{Args, ValueEnum};
use serde::Serialize;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Op {
    #[value(name = "reduce-scatter")]
    ReduceScatter,
    #[value(name = "allgather")]
    AllGather,
    #[value(name = "allreduce")]
    AllReduce,
}

impl Op {
    pub fn collective(self) -> Collective {
        match self {
            Op::ReduceScatter => Collective::ReduceScatter,
            Op::AllGather => Collective::AllGather,
            Op::AllReduce => Collective::AllReduce,
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum RuntimeArg {
    /// Azure/msccl-executor-nccl (coll="reducescatter").
    Executor,
    /// microsoft/msccl (coll="reduce_scatter").
    Legacy,
    /// ROCm/rccl: the executor's format with RCCL's limits and its reduced
    /// step set (s, r, re, cpy, nop).
    Rccl,
}

impl RuntimeArg {
    pub fn runtime(self) -> Runtime {
        match self {
            RuntimeArg::Executor => Runtime::Executor,
            RuntimeArg::Legacy => Runtime::Legacy,
            RuntimeArg::Rccl => Runtime::Rccl,
        }
    }
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
    /// Collective to synthesize: a reduce-scatter, or the allgather (its
    /// dual on the reversed machine) or allreduce (reduce-scatter, then
    /// allgather) every synthesizer makes from one.
    #[arg(long, value_enum, default_value = "reduce-scatter")]
    pub op: Op,
    /// Synthesizer: auto (score every applicable one in the simulator and
    /// pick per size), or one by name (the error for an unknown name lists
    /// them; docs/algorithms.md describes each).
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
    /// Runtime the file targets (default: rccl for AMD GPUs, else executor).
    #[arg(long, value_enum)]
    pub runtime: Option<RuntimeArg>,
    /// At most N threadblocks per rank, up to the GPUs' SM count (default:
    /// half the SMs, and at most 64 on RCCL). MSCCL needs every
    /// threadblock resident at once: half the SMs each lets two
    /// collectives run side by side (FSDP's reduce-scatter beside the next
    /// allgather); raise it where a collective always runs alone.
    #[arg(long, value_name = "N")]
    pub max_tbs: Option<usize>,
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
    /// Print the files written, the per-size table and the notes as JSON on
    /// standard output (needs -o).
    #[arg(long, requires = "output")]
    pub json: bool,
    /// Also say why each synthesizer or candidate was skipped.
    #[arg(short, long)]
    pub verbose: bool,
}

pub fn run(a: SynthArgs) -> CliResult {
    let topo = front::load_topology(&a.topo).map_err(CliError::input)?;
    let mode = Mode::parse(&a.algo).ok_or_else(|| {
        CliError::input(format!(
            "unknown --algo \"{}\" (known: auto, {})",
            a.algo,
            Algo::names()
        ))
    })?;
    if a.max_tbs == Some(0) {
        return Err(CliError::input("--max-tbs must be at least 1"));
    }
    let opts = options(
        &a,
        mode,
        a.runtime
            .map_or(topo.default_runtime(), RuntimeArg::runtime),
    );
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
    if to_dir && mode != Mode::Auto {
        return Err(CliError::input(
            "-o DIR/ writes one file per size band and needs --algo auto",
        ));
    }
    let fail = |e| CliError::compile(&a.topo, e);
    let mut notes = Vec::new();
    let mut why = Vec::new();
    let (chosen, selection) = match mode {
        Mode::Auto => {
            let sel = auto_with_progress(&topo, &opts, &sizes, None).map_err(fail)?;
            why.extend(sel.skipped.iter().cloned());
            notes.extend(slower_than_halves(&sel, opts.tb_budget(&topo)));
            (sel.candidates[sel.overall].clone(), Some(sel))
        }
        Mode::One(algo) => {
            let (c, small) = compile::compile_with_small(&topo, algo, &opts).map_err(fail)?;
            // A faster small-message variant safe only up to a size: say so.
            if let Some(Ok(small)) = small {
                if let Some(m) = small.max_size {
                    notes.push(format!(
                        "for calls up to {m} B, {} is faster at small sizes (its multi-chunk steps deadlock once MSCCL splits them above that size); `rscc synth --topo … -o DIR/` writes it as its own size band",
                        small.algorithm.name
                    ));
                }
            }
            (c, None)
        }
    };
    why.splice(
        0..0,
        chosen.fallbacks.iter().map(|f| format!("skipped {f}")),
    );
    // Bands whose schedule serves only counts that are multiples of k > 1
    // get a one-chunk-per-shard file that sorts after them (the executor
    // falls through to it). RCCL reads the directory unsorted: there a
    // count both serve runs either (both are correct), and every other
    // count still gets rscc's schedule instead of plain RCCL.
    let mut one = match &selection {
        Some(sel)
            if to_dir
                && opts.lower.runtime != Runtime::Legacy
                && sel.bands.iter().any(|b| sel.band_k(b) > 1) =>
        {
            let mut o = opts.clone();
            o.synth.chunks = Some(1);
            // Candidates that already had one chunk per shard keep the
            // main selection's times.
            match auto_with_progress(&topo, &o, &sizes, Some(sel)) {
                Ok(s) => Some(s),
                Err(e) => {
                    notes.push(format!("no one-chunk-per-shard fall-through files: {e}"));
                    None
                }
            }
        }
        _ => None,
    };
    if one.is_some() && opts.lower.runtime == Runtime::Rccl {
        notes.push("RCCL reads MSCCL_ALGO_DIR unsorted: for the counts both a band file and its one-chunk fall-through (.k1) serve, either may run".into());
    }
    let files = match (&selection, to_dir) {
        (Some(sel), true) => {
            let dir = a.output.as_deref().unwrap_or(Path::new("."));
            let one = match one.as_mut() {
                Some(o) => {
                    let ft = sel.fall_through_files(o, &topo).map_err(fail)?;
                    Some((&*o, ft))
                }
                None => None,
            };
            let (files, written) = write_bands(sel, one, dir, &mut notes)?;
            let rt = opts.lower.runtime;
            if rt != Runtime::Legacy {
                notes.extend(super::verify_dir::after_writing(dir, rt, &written));
            }
            files
        }
        _ => {
            write_xml(&chosen.program, a.output.as_deref())?;
            let path = a
                .output
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "stdout".into());
            vec![FileOut::new(path, &chosen, &chosen.program, None)]
        }
    };
    let table = match synth_report(&topo, &opts, &chosen, selection.as_ref(), to_dir) {
        Ok(t) => t,
        Err(_) => {
            notes.push(format!(
                "the simulator could not score this schedule on {}",
                topo.name
            ));
            Vec::new()
        }
    };
    if let Some(s) = selection.as_ref().filter(|s| !to_dir && s.bands.len() > 1) {
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
        notes.push(format!(
            "the best schedule depends on the size ({}); write one file per band with -o DIR/",
            names.join(", ")
        ));
    }
    let out = SynthOut {
        topology: topo.name.clone(),
        ranks: topo.num_ranks(),
        files,
        table,
        notes,
        skipped: why,
    };
    if a.json {
        let text = serde_json::to_string_pretty(&out).map_err(CliError::input)?;
        println!("{text}");
    } else {
        print_human(&out, a.verbose);
    }
    Ok(())
}

/// The compile options of the arguments.
fn options(a: &SynthArgs, mode: Mode, runtime: Runtime) -> CompileOptions {
    let (inplace, outofplace) = match (a.inplace, a.outofplace, runtime) {
        (true, _, _) => (true, false),
        (_, true, _) => (false, true),
        // Legacy uses a file only for calls whose in-place-ness equals
        // `inplace`: default to in-place there.
        (false, false, Runtime::Legacy) => (true, false),
        (false, false, Runtime::Executor | Runtime::Rccl) => (true, true),
    };
    CompileOptions {
        mode,
        op: a.op.collective(),
        synth: SynthOptions {
            chunks: a.chunks,
            time_limit_s: a.time_limit,
            seed: a.seed,
            evals: a.evals,
        },
        lower: LowerOptions {
            proto: match a.proto {
                ProtoArg::Simple => Proto::Simple,
                ProtoArg::LL => Proto::LL,
                ProtoArg::LL128 => Proto::LL128,
            },
            runtime,
            inplace,
            outofplace,
            min_bytes: 0,
            max_bytes: runtime.encode_max_bytes(None),
            ..LowerOptions::default()
        },
        max_tbs: a.max_tbs,
    }
}

/// For an allreduce, the sizes where its best schedule is more than 1 %
/// slower than its best reduce-scatter and allgather halves run one after
/// the other ([`Selection::halves_us`]: the halves of its own candidates,
/// not what `--op reduce-scatter` and `--op allgather` would pick), as a
/// note.
fn slower_than_halves(sel: &Selection, budget: usize) -> Option<String> {
    let cells: Vec<String> = sel
        .halves_us
        .iter()
        .enumerate()
        .filter_map(|(si, &halves)| {
            let t = sel.times_us[sel.winners[si]][si];
            (t > halves * 1.01)
                .then(|| format!("{} B: {t:.2} µs against {halves:.2}", sel.sizes[si]))
        })
        .collect();
    let why = if budget == usize::MAX {
        "one program holding both is slower than the two in turn".to_string()
    } else {
        format!("one kernel holding both is slower than the two in turn, or needs more than {budget} threadblocks per rank: --max-tbs raises the budget up to the SMs")
    };
    (!cells.is_empty()).then(|| {
        format!(
            "the allreduce is slower than its best reduce-scatter and allgather halves run one after the other at {} ({why})",
            cells.join(", ")
        )
    })
}

/// `auto`, with a progress line on stderr when it is a terminal and the
/// work takes more than a second.
fn auto_with_progress(
    topo: &crate::ir::Topology,
    opts: &CompileOptions,
    sizes: &[u64],
    prior: Option<&Selection>,
) -> Result<Selection, compile::CompileError> {
    let tty = std::io::stderr().is_terminal();
    let started = std::time::Instant::now();
    let shown = std::sync::atomic::AtomicBool::new(false);
    let progress = |done: usize, total: usize, what: &str| {
        if tty && started.elapsed().as_secs_f64() > 1.0 {
            shown.store(true, std::sync::atomic::Ordering::Relaxed);
            eprint!("\r[{done}/{total}] {what:<60}");
        }
    };
    let sel = compile::auto_after(
        topo,
        opts,
        sizes,
        &SimOptions::for_runtime(opts.lower.runtime),
        Some(&progress),
        prior,
    );
    if shown.load(std::sync::atomic::Ordering::Relaxed) {
        eprint!("\r{:<80}\r", "");
    }
    sel
}

/// What `rscc synth` did (its `--json`).
#[derive(Debug, Serialize)]
struct SynthOut {
    topology: String,
    ranks: usize,
    files: Vec<FileOut>,
    table: Vec<ReportRow>,
    notes: Vec<String>,
    /// Synthesizers and candidates skipped, and why.
    skipped: Vec<String>,
}

/// One file written.
#[derive(Debug, Serialize)]
struct FileOut {
    path: String,
    schedule: String,
    min_bytes: u64,
    /// Inclusive; None: no upper limit.
    max_bytes: Option<u64>,
    chunks_per_loop: i64,
    channels: i64,
    threadblocks: usize,
    max_threadblocks_per_rank: usize,
    steps: usize,
    /// The aliasing modes the verifier proved.
    verified: Vec<String>,
}

impl FileOut {
    fn new(path: String, c: &Compiled, p: &Program, band: Option<&compile::Band>) -> FileOut {
        FileOut {
            path,
            schedule: c.algorithm.name.clone(),
            min_bytes: band.map_or(0, |b| b.min_bytes),
            max_bytes: match band {
                Some(b) => b.max_bytes,
                None => c.max_size,
            },
            chunks_per_loop: p.nchunksperloop,
            channels: p.nchannels,
            threadblocks: p.num_tbs(),
            max_threadblocks_per_rank: p.max_tbs_per_rank(),
            steps: p.num_steps(),
            verified: c.report.modes.iter().map(|m| m.to_string()).collect(),
        }
    }
}

/// File names written and their programs' headers ([`Program::header`]).
type Written = Vec<(String, Program)>;

/// Write the band files (and fall-through files) into `dir`; notes on
/// files of other schedules it replaced, and on counts it leaves to the
/// runtime, go to `notes`. Returns the files and, per file name, its
/// program's header.
fn write_bands(
    sel: &Selection,
    one: Option<(&Selection, compile::FallThrough)>,
    dir: &Path,
    notes: &mut Vec<String>,
) -> Result<(Vec<FileOut>, Written), CliError> {
    std::fs::create_dir_all(dir).map_err(|e| CliError::input(format!("{}: {e}", dir.display())))?;
    let mut out = Vec::new();
    let mut written = Vec::new();
    let mut files: Vec<(compile::BandFile, &Compiled)> = sel
        .band_files()
        .into_iter()
        .map(|f| {
            let c = &sel.candidates[f.band.candidate];
            (f, c)
        })
        .collect();
    if let Some((one, ft)) = one {
        for (f, c) in ft.files {
            files.push((f, &one.candidates[c]));
        }
        for (lo, hi) in ft.left {
            let hi = hi.map_or("∞".to_string(), |m| format!("{m} B"));
            notes.push(format!(
                "from {lo} B to {hi}, no schedule that serves every count is as fast as the ring, so the counts the band files reject (not multiples of their count divisor) are left to the runtime's own {}",
                sel.candidates[0].program.coll.display()
            ));
        }
    }
    for (f, c) in files {
        let path = dir.join(&f.name);
        // Replacing another machine's file of the same name loses it.
        if let Ok(old) = crate::front::msccl_xml::load(&path) {
            if old.name != f.program.name {
                notes.push(format!(
                    "{}: replaced a file written for another schedule or machine ({}); keep one machine per directory",
                    path.display(),
                    old.name
                ));
            }
        }
        write_xml(&f.program, Some(&path))?;
        written.push((f.name.clone(), f.program.header()));
        out.push(FileOut::new(
            path.display().to_string(),
            c,
            &f.program,
            Some(&f.band),
        ));
    }
    Ok((out, written))
}

fn print_human(out: &SynthOut, verbose: bool) {
    for f in &out.files {
        let band = match (f.min_bytes, f.max_bytes) {
            (0, None) => String::new(),
            (lo, hi) => format!(
                " for {lo} B .. {} B",
                hi.map(|m| m.to_string()).unwrap_or_else(|| "∞".into())
            ),
        };
        eprintln!(
            "{}: {}{band} on {} ranks, {} chunks/loop, {} channels, {} threadblocks (max {} per rank), {} steps; verified {}",
            f.path,
            f.schedule,
            out.ranks,
            f.chunks_per_loop,
            f.channels,
            f.threadblocks,
            f.max_threadblocks_per_rank,
            f.steps,
            f.verified.join(" and ")
        );
    }
    if verbose {
        for s in &out.skipped {
            eprintln!("note: {s}");
        }
    }
    if !out.table.is_empty() {
        eprintln!(
            "{:>12} {:>12} {:>10} {:>10} {:>8}",
            "size(B)", "time(us)", "busbw", "bound%", "x ring"
        );
    }
    for r in &out.table {
        eprintln!(
            "{:>12} {:>12.2} {:>10.2} {:>10} {:>8}",
            r.size_bytes,
            r.time_us,
            r.busbw_gbps,
            r.bound_ratio
                .map(|x| format!("{:.1}", 100.0 * x))
                .unwrap_or_else(|| "-".into()),
            r.vs_ring
                .map(|x| format!("{x:.2}"))
                .unwrap_or_else(|| "-".into())
        );
    }
    for n in &out.notes {
        eprintln!("note: {n}");
    }
}

fn write_xml(p: &Program, path: Option<&Path>) -> CliResult {
    let res = match path {
        Some(path) => std::fs::File::create(path).and_then(|file| {
            let mut w = std::io::BufWriter::new(file);
            crate::back::msccl_xml::write(p, &mut w).and_then(|_| w.flush())
        }),
        None => {
            let stdout = std::io::stdout();
            let mut w = std::io::BufWriter::new(stdout.lock());
            crate::back::msccl_xml::write(p, &mut w).and_then(|_| w.flush())
        }
    };
    let name = path.map_or("stdout".into(), |p| p.display().to_string());
    res.map_err(|e| CliError::input(format!("{name}: {e}")))
}
