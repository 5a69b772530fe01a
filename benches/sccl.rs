//! SCCL-model exact search timings (issue 4, "DGX-1 exact results").
//!
//! Run: `cargo bench --bench sccl` (release build). Prints every decided
//! instance with its outcome and time, the frontier, and the total time per
//! topology. Exits 1 if an oracle of synthesis.md §8 is not reproduced.

use rscc::synth::sccl::{search, Point, SccCollective, UnitTopology};
use std::process::ExitCode;
use std::time::{Duration, Instant};

fn dgx1() -> UnitTopology {
    let m = rscc::front::generate::DGX1_NVLINKS;
    UnitTopology::new("dgx1", m.iter().map(|r| r.to_vec()).collect()).expect("valid matrix")
}

fn main() -> ExitCode {
    // `cargo bench` passes `--bench`; ignore arguments.
    let cases: Vec<(UnitTopology, SccCollective, Vec<Point>)> = vec![
        (
            dgx1(),
            SccCollective::ReduceScatter,
            vec![Point::new(2, 3, 2), Point::new(3, 7, 6)],
        ),
        (
            dgx1(),
            SccCollective::Allgather,
            vec![Point::new(2, 3, 2), Point::new(3, 7, 6)],
        ),
        (
            UnitTopology::ring(8).expect("ring"),
            SccCollective::ReduceScatter,
            vec![Point::new(4, 7, 2)],
        ),
        (
            UnitTopology::line(4).expect("line"),
            SccCollective::ReduceScatter,
            vec![Point::new(3, 3, 1)],
        ),
    ];
    let mut ok = true;
    for (topo, coll, want) in cases {
        let t0 = Instant::now();
        let rep = match search(&topo, coll, 6, Duration::from_secs(120)) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("{}: {e}", topo.name);
                ok = false;
                continue;
            }
        };
        let total = t0.elapsed();
        println!(
            "== {} {:?}: S >= {}, R/C >= {}/{}",
            topo.name, coll, rep.steps_lb, rep.rounds_per_chunk_lb.0, rep.rounds_per_chunk_lb.1
        );
        println!(
            "{:<12} {:<8} {:<12} {:>10}",
            "(S,R,C)", "outcome", "rounds", "ms"
        );
        for a in &rep.attempts {
            println!(
                "{:<12} {:<8} {:<12} {:>10.1}",
                a.point.to_string(),
                a.outcome,
                a.rounds_per_step
                    .as_ref()
                    .map(|r| format!("{r:?}"))
                    .unwrap_or_default(),
                a.elapsed.as_secs_f64() * 1e3
            );
        }
        let f = rep.frontier();
        let fs: Vec<String> = f.iter().map(|p| p.to_string()).collect();
        println!(
            "frontier {}  least-steps {}  complete {}  total {:.1} ms\n",
            fs.join(" "),
            rep.least_steps().map(|p| p.to_string()).unwrap_or_default(),
            rep.complete,
            total.as_secs_f64() * 1e3
        );
        if f != want || !rep.complete {
            eprintln!("{}: expected frontier {want:?}", topo.name);
            ok = false;
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
