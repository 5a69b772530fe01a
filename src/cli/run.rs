//! `rscc run`: execute a schedule on real data and report times like
//! nccl-tests (and correctness with `--check`).

use super::sizes::parse_sizes;
use super::{CliError, CliResult};
use crate::exec::{self, DType, RedOp, Report, RunOptions};
use crate::ir::Program;
use crate::verify::{verify, VerifyOptions};
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  rscc run rs.xml --backend cpu --sizes 1K:256M --dtype f32 --redop sum --check\n  rscc run rs.xml --sizes 16M --iters 50 --json\n  rscc run rs.xml --backend cuda --gpu-mode virtual --sizes 4K:1G --check"
)]
pub struct RunArgs {
    /// MSCCL XML schedule to run.
    pub file: Option<PathBuf>,
    /// Executor backend: cpu, or cuda (NVIDIA GPUs; needs the CUDA driver
    /// and NVRTC at run time).
    #[arg(long, default_value = "cpu")]
    pub backend: String,
    /// With --backend cuda: `virtual` runs all ranks on one GPU (--device);
    /// `multi` runs rank r on GPU r (peer-to-peer).
    #[arg(long, default_value = "virtual")]
    pub gpu_mode: String,
    /// With --backend cuda --gpu-mode virtual: the GPU to use.
    #[arg(long, default_value_t = 0)]
    pub device: usize,
    /// Per-rank input sizes: 64K, 1K:256M (powers of two), 1M,4M.
    #[arg(long, default_value = "64K:16M")]
    pub sizes: String,
    /// f32 f64 f16 bf16 i32 i64 u8.
    #[arg(long, default_value = "f32")]
    pub dtype: String,
    /// sum prod max min.
    #[arg(long, default_value = "sum")]
    pub redop: String,
    #[arg(long, default_value_t = 20)]
    pub iters: u64,
    #[arg(long, default_value_t = 5)]
    pub warmup: u64,
    /// Check results against an independent reference (exit 1 if wrong).
    #[arg(long)]
    pub check: bool,
    /// Skip the verifier (the watchdog still stops a stalled run).
    #[arg(long)]
    pub no_verify: bool,
    /// Run in place (the buffers alias as the op's in-place call does: the output is the input's shard for reduce-scatter, the input the output's shard for allgather, one buffer for allreduce); default out of place
    /// when the schedule allows it.
    #[arg(long)]
    pub inplace: bool,
    /// Staging tile (bytes): chunks are moved in tiles of this size, one
    /// FIFO slot each. A multi-chunk step whose chunks MSCCL would merge
    /// (chunk ≤ 1 MiB, its 2 MiB Simple tile) moves them as one slot
    /// instead, however large.
    #[arg(long, default_value = "256K")]
    pub tile: String,
    /// Slots (tiles) per connection FIFO, 1..64; 2 is the MSCCL runtime's
    /// depth and what the verifier assumes.
    #[arg(long, default_value_t = 2)]
    pub slots: usize,
    /// Watchdog: stop after this many ms without progress.
    #[arg(long, default_value_t = 2000)]
    pub stall_ms: u64,
    /// CPU worker threads that run the threadblocks as tasks (0: one per
    /// 256 KiB of memory traffic per call, up to the cores).
    #[arg(long, default_value_t = 0)]
    pub workers: usize,
    /// Copy every send into its FIFO slot, as MSCCL does (by default a send
    /// whose data lies in one of the sender's buffers, and stays there until
    /// taken, hands the receiver where it lies instead).
    #[arg(long)]
    pub no_zero_copy: bool,
    /// Run every step of a reduction chain alone (by default the CPU
    /// backend reduces a chain's ready links in one pass over their range;
    /// the results are the same bit for bit).
    #[arg(long)]
    pub no_fuse_chains: bool,
    /// Neither pin workers to memory nodes nor place buffers on them (by
    /// default, on a machine of several nodes, each worker runs on one
    /// node's CPUs and each rank's buffers are first written there;
    /// docs/executor.md "Memory placement").
    #[arg(long)]
    pub no_placement: bool,
    /// Testing aid: treat the CPUs as this many memory nodes.
    #[arg(long, hide = true)]
    pub split_nodes: Option<usize>,
    /// Skip the memory-bandwidth measurement.
    #[arg(long)]
    pub no_membw: bool,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
    /// Synthesize for this topology, then run (with --op).
    #[arg(long)]
    pub topo: Option<PathBuf>,
    /// With --topo on the CPU: run the cost model's pick as it is, without
    /// timing its best candidates on this machine first.
    #[arg(long)]
    pub no_tune: bool,
    /// Collective to synthesize with --topo: reduce-scatter, allgather or
    /// allreduce (a FILE says its own).
    #[arg(long)]
    pub op: Option<String>,
    /// Run a built-in schedule instead of a file: ring | allpairs.
    #[arg(long, hide = true)]
    pub builtin: Option<String>,
    /// Ranks for --builtin.
    #[arg(long, hide = true, default_value_t = 8)]
    pub ranks: usize,
    /// Channels for --builtin ring.
    #[arg(long, hide = true, default_value_t = 1)]
    pub channels: usize,
}

/// Candidates `rscc run --topo` times on the CPU before it runs one: the
/// cost model's best few by total time over the sizes.
const TUNE_CANDIDATES: usize = 3;
/// Most time one tuning probe spends per size, by the model's estimate
/// (µs).
const TUNE_PROBE_US: f64 = 50_000.0;

fn load(args: &RunArgs, ropts: &RunOptions) -> Result<Program, CliError> {
    if let Some(t) = &args.topo {
        // Synthesize (auto), lower and verify, then run that Program.
        let op = match args.op.as_deref() {
            None => crate::ir::Collective::ReduceScatter,
            Some(s) => crate::ir::Collective::parse(s).ok_or_else(|| {
                CliError::input(format!(
                    "--op {s}: expected reduce-scatter, allgather or allreduce"
                ))
            })?,
        };
        if args.file.is_some() || args.builtin.is_some() {
            return Err(CliError::input("give --topo or a FILE, not both"));
        }
        let topo = crate::front::load_topology(t).map_err(CliError::input)?;
        let opts = crate::compile::CompileOptions {
            op,
            ..Default::default()
        };
        let c = if backend_mode(args)?.is_none() {
            // Pick for the CPU executor and these sizes: its cost model
            // (sim::SharedMem) with this machine's memory bandwidth.
            let sizes =
                parse_sizes(&args.sizes).map_err(|e| CliError::input(format!("--sizes: {e}")))?;
            let gbps = if args.no_membw {
                crate::ir::hardware::CPU_MEM_GBPS
            } else {
                exec::membw::measure(64 << 20, 2)
            };
            let so = crate::sim::SimOptions {
                shared_mem: Some(crate::sim::SharedMem {
                    gbps,
                    call_us: crate::ir::hardware::CPU_CALL_US,
                    zero_copy: !args.no_zero_copy,
                }),
                ..Default::default()
            };
            // One chunk per shard: on the CPU the cores, not links, move
            // the data, so more chunks (channels, rings) add calls and no
            // bandwidth; tiles already pipeline a chunk.
            let mut opts = opts;
            opts.synth.chunks = Some(1);
            let sel = crate::compile::auto(&topo, &opts, &sizes, &so, None)
                .map_err(|e| CliError::compile(t, e))?;
            let w = if args.no_tune {
                sel.overall
            } else {
                tune(&sel, ropts)
            };
            sel.candidates
                .into_iter()
                .nth(w)
                .ok_or_else(|| CliError::input(format!("{}: no schedule", t.display())))?
        } else {
            crate::compile::compile(&topo, &opts).map_err(|e| CliError::compile(t, e))?
        };
        eprintln!(
            "synthesized {} for {} ({} ranks)",
            c.algorithm.name,
            topo.name,
            topo.num_ranks()
        );
        return Ok(c.program);
    }
    if args.op.is_some() {
        return Err(CliError::input("--op needs --topo"));
    }
    match (&args.builtin, &args.file) {
        (Some(b), None) => {
            if !(1..=256).contains(&args.ranks) || !(1..=32).contains(&args.channels) {
                return Err(CliError::input(
                    "--ranks must be 1..256 and --channels 1..32",
                ));
            }
            match b.as_str() {
                "ring" => Ok(exec::builtin::ring(args.ranks, args.channels)),
                "allpairs" if args.ranks >= 2 => Ok(exec::builtin::allpairs(args.ranks)),
                _ => Err(CliError::input(format!(
                    "unknown --builtin '{b}' (ring, allpairs with --ranks >= 2)"
                ))),
            }
        }
        (None, Some(f)) => crate::front::msccl_xml::load(f).map_err(CliError::input),
        (Some(_), Some(_)) => Err(CliError::input("give a FILE or --builtin, not both")),
        (None, None) => Err(CliError::input("no schedule: give an MSCCL XML FILE")),
    }
}

/// The candidate of `sel` that runs fastest here: the cost model's best
/// [`TUNE_CANDIDATES`] by total time over the sizes (the model's pick
/// first), each timed per size as the run itself will be — the mean of
/// `--iters` calls after one warm-up call — but for at most about
/// [`TUNE_PROBE_US`] by the model's estimate (at least one call); the
/// least total of the mean times wins. The model does not see caches or
/// how the workers share the cores (docs/cost-model.md §4.4), so where its
/// best few are close the machine decides. The mean of back-to-back calls
/// falls with their count (ranks run ahead into the next call, as GPUs do
/// on their streams: the 16-rank direct exchange at 1 MiB takes 1009 µs
/// per call over 5 calls and 538 over 50, docs/executor.md), so a probe
/// of fewer calls than the run ranks schedules by another measure; one
/// call decided by noise. A candidate that fails to run is passed over; if none runs, the
/// model's pick stands (the real run reports why).
fn tune(sel: &crate::compile::Selection, ropts: &RunOptions) -> usize {
    // The CPU model scores every cell (`Selection::pruned`), so these are
    // all simulated times.
    debug_assert!(sel.pruned.iter().flatten().all(|&p| !p));
    let total = |c: usize| -> f64 { sel.times_us[c].iter().sum() };
    let mut order: Vec<usize> = (0..sel.candidates.len())
        .filter(|&c| sel.candidates[c].max_size.is_none())
        .collect();
    order.sort_by(|&a, &b| {
        (a != sel.overall)
            .cmp(&(b != sel.overall))
            .then(total(a).total_cmp(&total(b)))
            .then(a.cmp(&b))
    });
    order.truncate(TUNE_CANDIDATES);
    if order.len() < 2 {
        return sel.overall;
    }
    let mut best: Option<(f64, usize)> = None;
    let mut said = Vec::new();
    'cand: for &c in &order {
        let name = &sel.candidates[c].algorithm.name;
        let mut t = 0.0;
        for &size in &ropts.sizes {
            // The selection's sizes are sorted; the request's need not be.
            let est = sel
                .sizes
                .iter()
                .position(|&s| s == size)
                .and_then(|i| sel.times_us[c].get(i).copied())
                .unwrap_or(f64::INFINITY);
            let probe = RunOptions {
                sizes: vec![size],
                iters: probe_calls(est, ropts.iters),
                warmup: 1,
                check: false,
                membw_bytes: 0,
                ..ropts.clone()
            };
            match exec::run_program(&sel.candidates[c].program, &probe) {
                Ok(rep) => t += rep.rows.iter().map(|r| r.time_us).sum::<f64>(),
                Err(e) => {
                    said.push(format!("{name} did not run ({e})"));
                    continue 'cand;
                }
            }
        }
        said.push(format!("{name} {t:.1} µs"));
        if best.is_none_or(|(bt, _)| t < bt) {
            best = Some((t, c));
        }
    }
    let w = best.map_or(sel.overall, |(_, c)| c);
    eprintln!(
        "tuned on this machine (per size the mean of --iters calls, or of about {} ms of them, after a warm-up; --no-tune runs the cost model's pick, {}): {}",
        TUNE_PROBE_US / 1e3,
        sel.candidates[sel.overall].algorithm.name,
        said.join(", ")
    );
    w
}

/// Timed calls of one probe: the run's `iters`, but no more than fit in
/// [`TUNE_PROBE_US`] by the model's estimate `est_us` of one call, and at
/// least one.
fn probe_calls(est_us: f64, iters: u64) -> u64 {
    let fit = if est_us.is_finite() && est_us > 0.0 {
        (TUNE_PROBE_US / est_us).floor() as u64
    } else {
        1
    };
    fit.min(iters).max(1)
}

/// The executor's options from the command line.
fn run_options(
    args: &RunArgs,
    dtype: DType,
    redop: RedOp,
    sizes: Vec<u64>,
    tile: usize,
) -> RunOptions {
    RunOptions {
        dtype,
        redop,
        sizes,
        iters: args.iters,
        warmup: args.warmup,
        check: args.check,
        inplace: args.inplace.then_some(true),
        tile_bytes: tile,
        fifo_slots: args.slots,
        stall_timeout: Duration::from_millis(args.stall_ms.max(10)),
        membw_bytes: if args.no_membw { 0 } else { 256 << 20 },
        workers: args.workers,
        inject_fault: None,
        zero_copy: !args.no_zero_copy,
        fuse_chains: !args.no_fuse_chains,
        placement: match (args.no_placement, args.split_nodes) {
            (true, _) => exec::Placement::Off,
            (false, Some(k)) => exec::Placement::Split(k),
            (false, None) => exec::Placement::Auto,
        },
    }
}

pub fn run(args: RunArgs) -> CliResult {
    match args.backend.as_str() {
        "cpu" | "cuda" => {}
        b => {
            return Err(CliError::input(format!(
                "unknown backend '{b}' (cpu, cuda)"
            )))
        }
    }
    let dtype = DType::parse(&args.dtype).ok_or_else(|| {
        CliError::input(format!(
            "unknown dtype '{}' (f32 f64 f16 bf16 i32 i64 u8)",
            args.dtype
        ))
    })?;
    let redop = RedOp::parse(&args.redop).ok_or_else(|| {
        CliError::input(format!("unknown redop '{}' (sum prod max min)", args.redop))
    })?;
    let sizes = parse_sizes(&args.sizes).map_err(|e| CliError::input(format!("--sizes: {e}")))?;
    let tile = super::sizes::parse_size(&args.tile)
        .map_err(|e| CliError::input(format!("--tile: {e}")))?;
    if tile == 0 || tile > 1 << 30 {
        return Err(CliError::input("--tile must be 1 B .. 1 GiB"));
    }
    if args.iters == 0 {
        return Err(CliError::input("--iters must be at least 1"));
    }
    if !(1..=64).contains(&args.slots) {
        return Err(CliError::input("--slots must be 1 .. 64"));
    }
    backend_mode(&args)?;
    let ropts = run_options(&args, dtype, redop, sizes, tile as usize);
    let prog = load(&args, &ropts)?;
    run_program_cli(&prog, &args, ropts)
}

/// Verify (unless `--no-verify`), run and print. The synthesize-then-run
/// path (`--topo … --op …`) calls this with its Program.
pub fn run_program_cli(prog: &Program, args: &RunArgs, opts: RunOptions) -> CliResult {
    if !args.no_verify {
        verify(prog, &VerifyOptions::default())
            .map_err(|e| CliError::check(format!("{}: verification failed: {e}", prog.name)))?;
    }
    super::sizes::window_notes(prog, &opts.sizes);
    let dtype = opts.dtype;
    let rep = match backend_mode(args)? {
        None => exec::run_program(prog, &opts),
        Some(mode) => exec::cuda::run_program_cuda(prog, &opts, mode),
    };
    let rep = match rep {
        Ok(r) => r,
        Err(e @ exec::ExecError::Stalled(_)) => return Err(CliError::check(e)),
        Err(e @ exec::ExecError::Spawn(_)) => return Err(CliError::check(e)),
        Err(e @ exec::ExecError::Fault { .. }) => return Err(CliError::check(e)),
        Err(e) => return Err(CliError::input(format!("{}: {e}", prog.name))),
    };
    for r in &rep.rows {
        if r.size_bytes != r.requested_bytes {
            // The call as asked: MSCCL would not take this file for it
            // (docs/msccl-xml.md "Which file a call gets").
            let mult = match prog.coll {
                crate::ir::Collective::AllReduce => 1,
                _ => prog.ngpus.max(1) as u64,
            };
            let per = dtype.size() as u64 * mult;
            let why = if r.requested_bytes % per != 0 {
                format!(
                    "it is not a whole count of {} elements per rank",
                    dtype.name()
                )
            } else {
                format!(
                    "its count {} × {mult} is not a multiple of nchunksperloop {}",
                    r.requested_bytes / per,
                    prog.nchunksperloop
                )
            };
            eprintln!(
                "note: MSCCL would not select this file for a call of {} B ({why}), and such a call runs plain NCCL; ran {} B, the nearest size it selects the file for",
                r.requested_bytes, r.size_bytes
            );
        }
    }
    if args.json {
        let s = serde_json::to_string_pretty(&rep).map_err(|e| CliError::input(e.to_string()))?;
        println!("{s}");
    } else {
        print_table(&rep, &args.backend);
    }
    if !rep.correct() {
        return Err(CliError::check(format!(
            "{}: wrong results (see above)",
            prog.name
        )));
    }
    Ok(())
}

/// `None` for the CPU backend, the GPU placement for cuda.
fn backend_mode(args: &RunArgs) -> Result<Option<exec::cuda::Mode>, CliError> {
    if args.backend != "cuda" {
        return Ok(None);
    }
    match args.gpu_mode.as_str() {
        "virtual" => Ok(Some(exec::cuda::Mode::Virtual {
            device: args.device,
        })),
        "multi" => Ok(Some(exec::cuda::Mode::MultiGpu)),
        m => Err(CliError::input(format!(
            "unknown --gpu-mode '{m}' (virtual, multi)"
        ))),
    }
}

fn print_table(rep: &Report, backend: &str) {
    println!(
        "# rscc run: {} on {}, {} ranks, {} threadblocks, {} {}, {}, tile {} B",
        rep.name,
        backend,
        rep.ranks,
        rep.threadblocks,
        rep.threads,
        if backend == "cuda" {
            "threads per block"
        } else {
            "worker threads"
        },
        if rep.inplace {
            "in place"
        } else {
            "out of place"
        },
        rep.tile_bytes
    );
    if rep.membw_gbps.is_some() {
        let how = if backend == "cuda" {
            "device copy a = b, measured first"
        } else {
            "a += b on all cores, the mean of the best of 2 passes right before and right after each size's run"
        };
        println!("# memory bandwidth B ({how}); %membw = (N+1)*size/time / B");
    }
    println!(
        "# {:>12} {:>12} {:>8} {:>6} {:>11} {:>8} {:>8} {:>7} {:>7} {:>7}",
        "size", "count", "type", "redop", "time(us)", "algbw", "busbw", "B", "%membw", "#wrong"
    );
    for r in &rep.rows {
        println!(
            "  {:>12} {:>12} {:>8} {:>6} {:>11.1} {:>8.2} {:>8.2} {:>7} {:>7} {:>7}",
            r.size_bytes,
            r.count,
            rep.dtype,
            rep.redop,
            r.time_us,
            r.algbw_gbps,
            r.busbw_gbps,
            r.membw_gbps.map_or("-".to_string(), |b| format!("{b:.1}")),
            r.membw_frac
                .map_or("-".to_string(), |f| format!("{:.0}%", f * 100.0)),
            r.wrong.map_or("N/A".to_string(), |w| w.to_string())
        );
    }
    for r in rep.rows.iter().filter(|r| r.wrong.unwrap_or(0) > 0) {
        eprintln!("wrong results at size {} B:", r.size_bytes);
        for w in r.wrong_chunks.iter().take(20) {
            eprintln!(
                "  rank {} output chunk {} (input chunk {}): {} wrong elements, first at {}: got {} want {}",
                w.rank, w.chunk, w.input_chunk, w.wrong, w.first_elem, w.got, w.want
            );
        }
        if r.wrong_chunks.len() > 20 {
            eprintln!("  … and {} more chunks", r.wrong_chunks.len() - 20);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_make_the_runs_calls_within_their_time() {
        assert_eq!(probe_calls(TUNE_PROBE_US, 20), 1);
        assert_eq!(probe_calls(TUNE_PROBE_US * 10.0, 20), 1);
        assert_eq!(probe_calls(TUNE_PROBE_US / 4.0, 20), 4);
        assert_eq!(probe_calls(TUNE_PROBE_US / 4.5, 20), 4);
        assert_eq!(probe_calls(1.0, 20), 20);
        assert_eq!(probe_calls(1.0, 50), 50);
        assert_eq!(probe_calls(1.0, 0), 1);
        assert_eq!(probe_calls(0.0, 20), 1);
        assert_eq!(probe_calls(f64::INFINITY, 20), 1);
        assert_eq!(probe_calls(f64::NAN, 20), 1);
    }
}
