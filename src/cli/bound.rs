//! `rscc bound`: the lower bounds of a collective on a topology.

use super::{sizes, CliError, CliResult};
use crate::bound;
use crate::ir::{Collective, Topology};
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
#[command(
    about = "Lower bounds: exact bandwidth limit x*, binding cut, step bound",
    after_help = "Example:\n  rscc bound --topo topologies/dgx-h100.json --op reduce-scatter --size 1G\n  rscc bound --topo ring8.json --json"
)]
pub struct BoundArgs {
    /// Topology file.
    #[arg(long)]
    pub topo: PathBuf,
    /// Collective: reduce-scatter or allgather.
    #[arg(long, default_value = "reduce-scatter")]
    pub op: String,
    /// Message size (nccl-tests' S, e.g. 1G) for the time bounds.
    #[arg(long)]
    pub size: Option<String>,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

/// Parse an op name.
pub fn parse_op(s: &str) -> Result<Collective, CliError> {
    match s.to_ascii_lowercase().as_str() {
        "reduce-scatter" | "reducescatter" | "reduce_scatter" | "rs" => {
            Ok(Collective::ReduceScatter)
        }
        "allgather" | "all-gather" | "ag" => Ok(Collective::AllGather),
        other => Err(CliError::input(format!(
            "--op {other}: expected reduce-scatter or allgather"
        ))),
    }
}

fn list(ids: &[String], max: usize) -> String {
    if ids.len() <= max {
        ids.join(" ")
    } else {
        format!("{} … (+{} more)", ids[..max].join(" "), ids.len() - max)
    }
}

/// The report text (or JSON) for a topology, op and optional size.
pub fn render(
    topo: &Topology,
    coll: Collective,
    size: Option<u64>,
    as_json: bool,
) -> Result<String, CliError> {
    let r = bound::report::report(topo, coll, size).map_err(CliError::input)?;
    if as_json {
        return serde_json::to_string_pretty(&r).map_err(CliError::input);
    }
    let cut = &r.binding_cut;
    let dir = if coll == Collective::ReduceScatter {
        "enters"
    } else {
        "leaves"
    };
    let mut out = String::new();
    out += &format!(
        "topology   {} ({} ranks)\nop         {}\n",
        r.topology, r.ranks, r.op
    );
    out += &format!(
        "x*         {} = {:.6} (time ≥ S/N · x* / 1e3 µs, S in bytes)\n",
        r.x_star.fraction, r.x_star.float
    );
    out += &format!("algbw limit {:.2} GB/s (N / x*)\n", r.algbw_limit_gbps);
    out += &format!(
        "binding cut {} GPU(s) inside; data {dir} it at {} GB/s\n  inside:  {}\n  outside: {}\n",
        cut.gpus_inside,
        cut.capacity_gbps.fraction,
        list(&cut.inside, 16),
        list(&cut.outside, 16)
    );
    let kinds: Vec<String> = cut
        .capacity_by_kind_gbps
        .iter()
        .map(|(k, v)| format!("{k} {v:.2}"))
        .collect();
    out += &format!("  crossing: {} GB/s\n", kinds.join(", "));
    out += &format!("min steps  {}\n", r.min_steps);
    if let (Some(s), Some(tb), Some(ab)) = (r.size_bytes, r.time_bound_us, r.alpha_bound_us) {
        out +=
            &format!("size       {s} B\nbandwidth bound {tb:.3} µs\nα-aware bound   {ab:.3} µs\n");
    }
    Ok(out)
}

pub fn run(args: BoundArgs) -> CliResult {
    let coll = parse_op(&args.op)?;
    let size = match &args.size {
        Some(s) => Some(sizes::parse_size(s).map_err(|e| CliError::input(format!("--size: {e}")))?),
        None => None,
    };
    let topo = crate::front::load_topology(&args.topo).map_err(CliError::input)?;
    print!("{}", render(&topo, coll, size, args.json)?);
    if args.json {
        println!();
    }
    Ok(())
}
