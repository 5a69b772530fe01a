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
        "allreduce" | "all-reduce" | "ar" => Ok(Collective::AllReduce),
        other => Err(CliError::input(format!(
            "--op {other}: expected reduce-scatter, allgather or allreduce"
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
    let route = route_bound(topo, coll, &r);
    if as_json {
        #[derive(serde::Serialize)]
        struct Out<'a> {
            #[serde(flatten)]
            report: &'a bound::report::BoundReport,
            #[serde(skip_serializing_if = "Option::is_none")]
            route_bound: Option<RouteBound>,
        }
        let out = Out {
            report: &r,
            route_bound: route,
        };
        return serde_json::to_string_pretty(&out).map_err(CliError::input);
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
    if !cut.unrouted_by_kind_gbps.is_empty() {
        let kinds: Vec<String> = cut
            .unrouted_by_kind_gbps
            .iter()
            .map(|(k, v)| format!("{k} {v:.2}"))
            .collect();
        out += &format!(
            "  not counted: {} GB/s on links across the cut that no rank-to-rank route takes (each pair's route is its least-α path)\n",
            kinds.join(", ")
        );
    }
    out += &format!("min steps  {}\n", r.min_steps);
    if let Some(rb) = &route {
        out += &format!(
            "route bound {:.6} = {:.4} x* (every schedule over single routes; tree-packing certificate){}\n",
            rb.per_unit,
            rb.over_x_star,
            if rb.binds { ": it binds" } else { "" }
        );
    }
    if let (Some(s), Some(tb), Some(ab)) = (r.size_bytes, r.time_bound_us, r.alpha_bound_us) {
        out +=
            &format!("size       {s} B\nbandwidth bound {tb:.3} µs\nα-aware bound   {ab:.3} µs\n");
        if let Some(c) = r.cut_latency_us {
            out += &format!(
                "  cut latency term {c:.3} µs (the cuts' data after their routes' α; a reduction's combined values one α later){}\n",
                if c >= ab * (1.0 - 1e-12) {
                    ": it binds"
                } else {
                    ""
                }
            );
        }
        if let Some(t) = route.as_ref().and_then(|rb| rb.time_bound_us) {
            out += &format!("route bound     {t:.3} µs\n");
        }
    }
    Ok(out)
}

/// The routing-model bound (docs/cost-model.md §1.1).
#[derive(Debug, serde::Serialize)]
struct RouteBound {
    /// Per unit of shard, as x*.
    per_unit: f64,
    over_x_star: f64,
    /// More than 0.1 % above x*: the cut bound cannot be reached over
    /// single routes, and this is the yardstick.
    binds: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    time_bound_us: Option<f64>,
}

/// The tree-packing certificate: for reduce-scatter of its reduction
/// trees, up to [`PACK_MAX_RANKS`](crate::synth::pack::PACK_MAX_RANKS)
/// ranks; for allreduce of its reduction and broadcast trees packed
/// together ([`lp::solve_allreduce`]: every byte either half puts on a
/// link counts against it), up to
/// [`JOINT_MAX_RANKS`](crate::synth::pack::JOINT_MAX_RANKS), as `auto`
/// offers it (on 64 ranks the LP takes seconds); None for allgather,
/// elsewhere, or when the LP fails.
///
/// [`lp::solve_allreduce`]: crate::synth::pack::lp::solve_allreduce
fn route_bound(
    topo: &Topology,
    coll: Collective,
    r: &bound::report::BoundReport,
) -> Option<RouteBound> {
    if r.ranks > crate::synth::pack::PACK_MAX_RANKS {
        return None;
    }
    let p = match coll {
        Collective::ReduceScatter => crate::synth::pack::lp::solve(topo, 30.0, 0).ok()?,
        Collective::AllReduce if r.ranks <= crate::synth::pack::JOINT_MAX_RANKS => {
            crate::synth::pack::lp::solve_allreduce(topo, 30.0, 0).ok()?
        }
        Collective::AllReduce => return None,
        Collective::AllGather => return None,
    };
    let over = p.lower / r.x_star.float;
    Some(RouteBound {
        per_unit: p.lower,
        over_x_star: over,
        binds: over > 1.0 + 1e-3,
        time_bound_us: r.time_bound_us.map(|t| t * over.max(1.0)),
    })
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
