//! `rscc simulate`: predicted time of an MSCCL XML schedule on a topology,
//! in nccl-tests' layout, scored against the lower bound.

use super::{sizes, CliError, CliResult};
use crate::ir::{Program, Topology};
use crate::sim::{self, report::Row, SimError, SimOptions};
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
#[command(
    about = "Simulate an MSCCL XML schedule: time, algbw, busbw and ratio to the bound per size",
    after_help = "Example:\n  rscc simulate rs.xml --topo topologies/dgx-h100.json --sizes 1K:1G\n  rscc simulate rs.xml --topo ring8.json --sizes 1M,1G --json --trace rs.trace.json"
)]
pub struct SimulateArgs {
    /// MSCCL XML file.
    pub file: PathBuf,
    /// Topology file of the machine the schedule targets.
    #[arg(long)]
    pub topo: PathBuf,
    /// Sizes (nccl-tests' S): 1K:1G, 1K:1G:4, 4M, or a comma list.
    #[arg(long, default_value = "1K:1G")]
    pub sizes: String,
    /// Tile size in bytes (default 2M, MSCCL Simple).
    #[arg(long)]
    pub tile: Option<String>,
    /// Treat each chunk as one message (no tile pipelining).
    #[arg(long)]
    pub no_tiling: bool,
    /// Run every tile, never jumping over tiles that repeat (the times
    /// agree within 1e-10; docs/cost-model.md §4.3).
    #[arg(long)]
    pub step_by_step: bool,
    /// Machine-readable output: one object per size.
    #[arg(long)]
    pub json: bool,
    /// Write a Chrome trace-event file of the largest size.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// The runtime the file runs on: rccl charges its local `re`/`cpy`
    /// passes (it has no fused steps); the others run them for free.
    #[arg(long, value_enum, default_value = "executor")]
    pub runtime: super::synth::RuntimeArg,
}

fn sim_err(e: SimError) -> CliError {
    match e {
        SimError::Deadlock(_) => CliError::check(e),
        _ => CliError::input(e),
    }
}

/// Options from the arguments.
pub fn options(args: &SimulateArgs) -> Result<SimOptions, CliError> {
    let mut o = SimOptions {
        tiling: !args.no_tiling,
        skip_periods: !args.step_by_step,
        ..SimOptions::for_runtime(args.runtime.runtime())
    };
    if let Some(t) = &args.tile {
        o.tile_bytes = sizes::parse_size(t).map_err(|e| CliError::input(format!("--tile: {e}")))?;
        if o.tile_bytes == 0 {
            return Err(CliError::input("--tile must be at least 1 byte"));
        }
    }
    Ok(o)
}

/// The nccl-tests-style table.
pub fn table(prog: &Program, topo: &Topology, rows: &[Row], opts: &SimOptions) -> String {
    let tiling = if opts.tiling {
        format!("tile {} B", opts.tile_bytes)
    } else {
        "no tiling".into()
    };
    let mut s = format!(
        "# rscc simulate: {} on {} ({} ranks), {}, {}\n#\n",
        prog.name,
        topo.name,
        topo.num_ranks(),
        prog.coll.display(),
        tiling
    );
    s += &format!(
        "# {:>12} {:>12} {:>6} {:>12} {:>9} {:>9} {:>12} {:>10}\n",
        "size", "count", "type", "time", "algbw", "busbw", "bound", "bound/time"
    );
    s += &format!(
        "# {:>12} {:>12} {:>6} {:>12} {:>9} {:>9} {:>12} {:>10}\n",
        "(B)", "(elements)", "", "(us)", "(GB/s)", "(GB/s)", "(us)", ""
    );
    for r in rows {
        let b = r.bound_us.map_or("-".into(), |b| format!("{b:.2}"));
        let q = r.bound_ratio.map_or("-".into(), |q| format!("{q:.3}"));
        s += &format!(
            "  {:>12} {:>12} {:>6} {:>12.2} {:>9.2} {:>9.2} {:>12} {:>10}\n",
            r.size_bytes, r.count, r.dtype, r.time_us, r.algbw_gbps, r.busbw_gbps, b, q
        );
    }
    s
}

/// Simulate at every size and render (table or JSON); optionally write the
/// trace of the largest size.
pub fn report(
    prog: &Program,
    topo: &Topology,
    size_list: &[u64],
    opts: &SimOptions,
    as_json: bool,
    trace: Option<&std::path::Path>,
) -> Result<String, CliError> {
    let rows = sim::busbw_table(prog, topo, size_list, opts).map_err(sim_err)?;
    if let Some(path) = trace {
        let largest = size_list.iter().copied().max().unwrap_or(0);
        let traced = SimOptions {
            trace: true,
            ..opts.clone()
        };
        let r = sim::simulate(prog, topo, largest, &traced).map_err(sim_err)?;
        let doc = sim::trace::chrome_trace(&r.trace.unwrap_or_default(), prog, topo);
        let text = serde_json::to_string(&doc).map_err(CliError::input)?;
        std::fs::write(path, text)
            .map_err(|e| CliError::input(format!("{}: {e}", path.display())))?;
    }
    if as_json {
        return serde_json::to_string_pretty(&rows).map_err(CliError::input);
    }
    Ok(table(prog, topo, &rows, opts))
}

pub fn run(args: SimulateArgs) -> CliResult {
    let size_list =
        sizes::parse_sizes(&args.sizes).map_err(|e| CliError::input(format!("--sizes: {e}")))?;
    let opts = options(&args)?;
    let topo = crate::front::load_topology(&args.topo).map_err(CliError::input)?;
    let prog = crate::front::msccl_xml::load(&args.file).map_err(CliError::input)?;
    // The simulator times the program as written; say when the runtime's
    // rules (geometry, limits, bounds) do not hold for it, since its times
    // then describe a file no runtime runs as intended.
    let broken = crate::verify::structural(&prog, &Default::default());
    if !broken.is_empty() {
        let mut rules: Vec<&str> = broken.iter().map(|e| e.rule).collect();
        rules.sort_unstable();
        rules.dedup();
        eprintln!(
            "warning: {}: breaks {} rule(s) ({}; `rscc verify` says where): the times are those of the program as written",
            args.file.display(),
            broken.len(),
            rules.join(", ")
        );
    }
    sizes::window_notes(&prog, &size_list);
    let out = report(
        &prog,
        &topo,
        &size_list,
        &opts,
        args.json,
        args.trace.as_deref(),
    )?;
    println!("{}", out.trim_end());
    Ok(())
}
