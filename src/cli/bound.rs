//! `rscc bound`: the lower bounds of a collective on a topology.

use super::{sizes, CliError, CliResult};
use crate::bound::{self, BandwidthBound};
use crate::ir::{Collective, Topology};
use clap::Args;
use serde_json::json;
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

fn frac(r: &num_rational::BigRational) -> serde_json::Value {
    json!({"fraction": bound::ratio_string(r), "float": bound::ratio_f64(r)})
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
    let b: BandwidthBound = bound::bandwidth_bound(topo, coll).map_err(CliError::input)?;
    let steps = bound::min_steps(topo, coll).map_err(CliError::input)?;
    let times = match size {
        Some(s) => Some((
            s,
            bound::time_bound_us(&b, s),
            bound::alpha_bound_with(&b, topo, s).map_err(CliError::input)?,
        )),
        None => None,
    };
    let cut = &b.binding_cut;
    // What the binding cut's capacity is made of, by link kind: it explains
    // why two descriptions of one machine differ (e.g. an imported dump's
    // PCIe paths add GPU ingress the NVLink-only model lacks).
    let by_kind = {
        let inside: std::collections::HashSet<&str> =
            cut.inside.iter().map(|s| s.as_str()).collect();
        let mut m: std::collections::BTreeMap<String, f64> = std::collections::BTreeMap::new();
        for e in topo.graph.edge_indices() {
            let (a, z) = topo.link_ends(e);
            let (ia, iz) = (
                inside.contains(topo.node(a).id.as_str()),
                inside.contains(topo.node(z).id.as_str()),
            );
            let crosses = if coll == Collective::ReduceScatter {
                !ia && iz
            } else {
                ia && !iz
            };
            if crosses {
                *m.entry(topo.link(e).kind.clone()).or_default() += topo.link(e).capacity_gbps();
            }
        }
        m
    };
    if as_json {
        let mut v = json!({
            "topology": topo.name,
            "op": coll.display(),
            "ranks": b.ranks,
            "x_star": frac(&b.x_star),
            "algbw_limit_gbps": b.algbw_limit_gbps,
            "binding_cut": {
                "inside": cut.inside,
                "outside": cut.outside,
                "gpus_inside": cut.gpus_inside,
                "capacity_gbps": frac(&cut.capacity_gbps),
                "direction": if coll == Collective::ReduceScatter { "into inside" } else { "out of inside" },
                "capacity_by_kind_gbps": by_kind,
            },
            "min_steps": steps,
        });
        if let Some((s, tb, ab)) = times {
            v["size_bytes"] = json!(s);
            v["time_bound_us"] = json!(tb);
            v["alpha_bound_us"] = json!(ab);
        }
        return serde_json::to_string_pretty(&v).map_err(CliError::input);
    }
    let dir = if coll == Collective::ReduceScatter {
        "enters"
    } else {
        "leaves"
    };
    let mut out = String::new();
    out += &format!(
        "topology   {} ({} ranks)\nop         {}\n",
        topo.name,
        b.ranks,
        coll.display()
    );
    out += &format!(
        "x*         {} = {:.6} (time ≥ S/N · x* / 1e3 µs, S in bytes)\n",
        b.x_star_string(),
        b.x_star_f64()
    );
    out += &format!("algbw limit {:.2} GB/s (N / x*)\n", b.algbw_limit_gbps);
    out += &format!(
        "binding cut {} GPU(s) inside; data {dir} it at {} GB/s\n  inside:  {}\n  outside: {}\n",
        cut.gpus_inside,
        bound::ratio_string(&cut.capacity_gbps),
        list(&cut.inside, 16),
        list(&cut.outside, 16)
    );
    let kinds: Vec<String> = by_kind.iter().map(|(k, v)| format!("{k} {v:.2}")).collect();
    out += &format!("  crossing: {} GB/s\n", kinds.join(", "));
    out += &format!("min steps  {steps}\n");
    if let Some((s, tb, ab)) = times {
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
