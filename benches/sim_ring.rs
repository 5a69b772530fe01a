//! Simulator performance goals (issue 3): a 1024-GPU ring reduce-scatter
//! at 1 GiB in under 2 s and a 64-GPU one in under 100 ms (release).
//!
//! Run: `cargo bench --bench sim_ring` (prints a table; exits 1 when a goal
//! is missed). Plain harness, no criterion: each case is run a few times and
//! the best and median wall times are reported.

use petgraph::graph::DiGraph;
use rscc::ir::{Link, Node, NodeKind, Topology};
use rscc::sim::{self, programs, SimOptions};
use std::time::Instant;

fn ring(n: usize) -> Topology {
    let mut g = DiGraph::new();
    let gs: Vec<_> = (0..n)
        .map(|r| {
            g.add_node(Node {
                id: format!("gpu{r}"),
                kind: NodeKind::Gpu,
                rank: Some(r),
                host: None,
                sms: None,
                mem_gbps: None,
            })
        })
        .collect();
    for i in 0..n {
        let j = (i + 1) % n;
        for (a, b) in [(i, j), (j, i)] {
            g.add_edge(
                gs[a],
                gs[b],
                Link {
                    bw_gbps: 25.0,
                    alpha_us: 1.0,
                    count: 1,
                    kind: "nvlink".into(),
                },
            );
        }
    }
    Topology::new(format!("ring{n}"), String::new(), g)
}

fn main() {
    let size = 1u64 << 30;
    let mut ok = true;
    println!(
        "{:>6} {:>10} {:>8} {:>12} {:>8} {:>12} {:>12} {:>10}",
        "ranks", "size", "tiles", "steps", "flows", "best (ms)", "median (ms)", "goal (ms)"
    );
    for (n, goal_ms, reps) in [(64usize, 100.0, 9), (1024, 2000.0, 3)] {
        let topo = ring(n);
        let p = programs::ring_reduce_scatter(n).expect("n ≥ 2");
        let opts = SimOptions::default();
        let mut times = Vec::new();
        let mut last = None;
        for _ in 0..reps {
            let t0 = Instant::now();
            let r = sim::simulate(&p, &topo, size, &opts).expect("simulates");
            times.push(t0.elapsed().as_secs_f64() * 1e3);
            last = Some(r);
        }
        times.sort_by(f64::total_cmp);
        let r = last.expect("reps ≥ 1");
        let med = times[times.len() / 2];
        println!(
            "{:>6} {:>10} {:>8} {:>12} {:>8} {:>12.1} {:>12.1} {:>10.0}   simulated {:.1} µs",
            n, size, r.tiles, r.steps_executed, r.flows, times[0], med, goal_ms, r.time_us
        );
        if med > goal_ms {
            ok = false;
        }
    }
    if !ok {
        eprintln!("a performance goal was missed");
        std::process::exit(1);
    }
}
