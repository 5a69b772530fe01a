//! Chrome trace-event JSON (opens in Perfetto / chrome://tracing): process
//! "links" with one counter track per link (its total rate in GB/s), and
//! one process per rank with one thread track per threadblock (a slice per
//! step execution).

use super::Trace;
use crate::ir::{Program, Topology};
use serde_json::{json, Value};

/// Build the trace document. Times are µs, as Chrome expects.
pub fn chrome_trace(trace: &Trace, prog: &Program, topo: &Topology) -> Value {
    let mut ev: Vec<Value> = Vec::new();
    let links_pid = 0;
    ev.push(
        json!({"ph": "M", "pid": links_pid, "name": "process_name", "args": {"name": "links"}}),
    );
    let link_name = |l: usize| {
        let e = petgraph::graph::EdgeIndex::new(l);
        match topo.graph.edge_endpoints(e) {
            Some((a, b)) => format!("{} -> {}", topo.graph[a].id, topo.graph[b].id),
            None => format!("link {l}"),
        }
    };
    for ld in &trace.loads {
        ev.push(json!({
            "ph": "C", "pid": links_pid, "ts": ld.time_us,
            "name": link_name(ld.link), "args": {"GB/s": ld.gbps}
        }));
    }
    for g in &prog.gpus {
        let pid = g.id + 1;
        ev.push(json!({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": format!("rank {}", g.id)}}));
        for (li, tb) in g.tbs.iter().enumerate() {
            ev.push(json!({"ph": "M", "pid": pid, "tid": li, "name": "thread_name",
                "args": {"name": format!("tb {} (send {}, recv {}, chan {})", tb.id, tb.send, tb.recv, tb.chan)}}));
        }
    }
    let rank_gpu: std::collections::HashMap<usize, &crate::ir::GpuProgram> = prog
        .gpus
        .iter()
        .filter(|g| g.id >= 0)
        .map(|g| (g.id as usize, g))
        .collect();
    for s in &trace.spans {
        let kind = rank_gpu
            .get(&s.rank)
            .and_then(|g| g.tbs.get(s.tb))
            .and_then(|t| t.steps.get(s.step))
            .map(|st| st.kind.as_str())
            .unwrap_or("?");
        ev.push(json!({
            "ph": "X", "pid": s.rank + 1, "tid": s.tb, "ts": s.start_us,
            "dur": (s.end_us - s.start_us).max(0.0),
            "name": format!("{kind} #{}", s.step),
            "args": {"tile": s.tile, "step": s.step}
        }));
    }
    json!({"traceEvents": ev, "displayTimeUnit": "ns"})
}
