//! SCCL-model exact search: the known-optimal oracles of synthesis.md §8.

mod common;

use rscc::lower::{lower, LowerOptions};
use rscc::synth::sccl::{
    decide, frontier, search, to_reduce_scatter, validate, Decision, Point, SccCollective,
    SearchError, UnitTopology,
};
use rscc::verify::{verify, VerifyOptions};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

fn dgx1() -> UnitTopology {
    UnitTopology::from_topology(&common::dgx1()).expect("dgx1 has direct links")
}

#[test]
fn dgx1_unit_capacities_come_from_the_topology() {
    let g = dgx1();
    assert_eq!(g.ranks(), 8);
    for a in 0..8 {
        let out: u32 = (0..8).map(|b| g.cap(a, b)).sum();
        assert_eq!(out, 6, "rank {a} has 6 NVLinks");
        for b in 0..8 {
            assert_eq!(g.cap(a, b), g.cap(b, a));
        }
    }
    assert_eq!(g.cap(0, 1), 2);
    assert_eq!(g.cap(0, 2), 1);
    assert_eq!(g.cap(0, 5), 0);
}

#[test]
fn dgx1_reduce_scatter_frontier() {
    let g = dgx1();
    let rep = search(&g, SccCollective::ReduceScatter, 6, LIMIT).expect("search runs");
    assert!(rep.complete, "every instance decided: {:?}", rep.attempts);
    assert_eq!(rep.steps_lb, 2);
    assert_eq!(rep.rounds_per_chunk_lb, (7, 6));
    assert_eq!(
        rep.frontier(),
        vec![Point::new(2, 3, 2), Point::new(3, 7, 6)],
        "attempts: {:?}",
        rep.attempts
    );
    assert_eq!(rep.least_steps(), Some(Point::new(2, 2, 1)));
    let unsat = rep.unsat();
    for (r, c) in [(4, 3), (5, 4), (6, 5), (7, 6)] {
        assert!(
            unsat.contains(&Point::new(2, r, c)),
            "2 steps at R/C = {r}/{c} must be proven infeasible: {unsat:?}"
        );
    }
    // Nothing below R/C = 3/2 in 2 steps was found, for any C <= 6.
    assert!(rep
        .found
        .iter()
        .all(|s| s.point.steps > 2 || 2 * s.point.rounds >= 3 * s.point.chunks));
    // Every send is needed: N·C chunks × (N−1) ranks.
    for p in [Point::new(2, 3, 2), Point::new(3, 7, 6)] {
        let s = rep.schedule(p).expect("frontier point has a schedule");
        assert_eq!(s.sends.len(), 8 * p.chunks * 7);
        assert_eq!(s.rounds_per_step.iter().sum::<usize>(), p.rounds);
        validate(&g, s).expect("schedule is valid in the model");
    }
    // (3,7,6): 48 directed NVLinks × 7 rounds = 336 link-slots, all busy.
    let s = rep.schedule(Point::new(3, 7, 6)).unwrap();
    assert_eq!(s.sends.len(), 48 * 7);
    // frontier() agrees with search().
    assert_eq!(frontier(&g, 6, LIMIT).unwrap(), rep.frontier());
}

#[test]
fn dgx1_frontier_schedules_lower_and_verify() {
    let g = dgx1();
    for p in [
        Point::new(2, 2, 1),
        Point::new(2, 3, 2),
        Point::new(3, 7, 6),
    ] {
        let Decision::Sat(s) = decide(&g, SccCollective::ReduceScatter, p, LIMIT).unwrap() else {
            panic!("{p} must be sat");
        };
        let alg = to_reduce_scatter(&s);
        alg.check().unwrap_or_else(|e| panic!("{p}: {e}"));
        assert_eq!(alg.spec.chunks(), p.chunks);
        assert_eq!(alg.transfers.len(), 8 * 7 * p.chunks);
        assert_eq!(alg.num_steps(), p.rounds);
        let prog = lower(&alg, &LowerOptions::default()).unwrap_or_else(|e| panic!("{p}: {e}"));
        let rep = verify(&prog, &VerifyOptions::default()).unwrap_or_else(|e| panic!("{p}: {e}"));
        assert_eq!(rep.modes, vec!["out-of-place", "in-place"]);
    }
}

#[test]
fn dgx1_two_steps_infeasible_below_three_halves() {
    let g = dgx1();
    for (r, c) in [(4, 3), (5, 4), (6, 5), (7, 6)] {
        let p = Point::new(2, r, c);
        assert_eq!(
            decide(&g, SccCollective::ReduceScatter, p, LIMIT).unwrap(),
            Decision::Unsat,
            "{p}"
        );
    }
    // And feasible at R/C = 3/2.
    assert!(matches!(
        decide(&g, SccCollective::ReduceScatter, Point::new(2, 3, 2), LIMIT).unwrap(),
        Decision::Sat(_)
    ));
}

#[test]
fn ring8_and_line4_frontiers() {
    let ring = UnitTopology::from_topology(&common::ring(8)).unwrap();
    assert_eq!(ring, {
        let mut r = UnitTopology::ring(8).unwrap();
        r.name = ring.name.clone();
        r
    });
    assert_eq!(
        frontier(&ring, 6, LIMIT).unwrap(),
        vec![Point::new(4, 7, 2)]
    );
    let line = UnitTopology::line(4).unwrap();
    assert_eq!(
        frontier(&line, 6, LIMIT).unwrap(),
        vec![Point::new(3, 3, 1)]
    );
    // Ring(8) search also meets (4,4,1) on the way, dominated by (4,7,2).
    let rep = search(&ring, SccCollective::ReduceScatter, 6, LIMIT).unwrap();
    assert_eq!(rep.least_steps(), Some(Point::new(4, 4, 1)));
}

#[test]
fn asymmetric_graph_reduce_scatter_uses_the_reversed_graph() {
    // A directed 3-cycle 0→1→2→0 with a shortcut 0→2: reduce-scatter must
    // run on the reversed links, and its schedule uses only real links.
    let g = UnitTopology::new("tri", vec![vec![0, 1, 1], vec![0, 0, 1], vec![1, 0, 0]]).unwrap();
    for coll in [SccCollective::Allgather, SccCollective::ReduceScatter] {
        let rep = search(&g, coll, 4, LIMIT).unwrap();
        assert!(rep.complete);
        for s in &rep.found {
            validate(&g, s).unwrap_or_else(|e| panic!("{coll:?} {}: {e}", s.point));
            if coll == SccCollective::ReduceScatter {
                let alg = to_reduce_scatter(s);
                alg.check().unwrap();
                let prog = lower(&alg, &LowerOptions::default()).unwrap();
                verify(&prog, &VerifyOptions::default()).unwrap();
            }
        }
    }
}

#[test]
fn unusable_inputs_are_clear_errors() {
    let sw = common::switch(4, 450.0);
    assert!(matches!(
        UnitTopology::from_topology(&sw),
        Err(SearchError::Topology(_))
    ));
    let g = dgx1();
    assert!(matches!(
        frontier(&g, 6, Duration::ZERO),
        Err(SearchError::Request(_))
    ));
    let big = UnitTopology::ring(17).unwrap();
    assert!(matches!(
        frontier(&big, 2, LIMIT),
        Err(SearchError::Topology(_))
    ));
}

#[test]
fn time_limit_gives_unknown_or_error_never_a_wrong_answer() {
    let g = dgx1();
    match frontier(&g, 6, Duration::from_millis(1)) {
        Err(SearchError::TimeLimit { unknown, .. }) => assert!(!unknown.is_empty()),
        other => panic!("a 1 ms budget cannot finish the DGX-1 search: {other:?}"),
    }
    // A tiny per-instance limit may still find (3,7,6) but must never
    // claim it infeasible.
    let d = decide(
        &g,
        SccCollective::ReduceScatter,
        Point::new(3, 7, 6),
        Duration::from_millis(1),
    )
    .unwrap();
    assert_ne!(d, Decision::Unsat);
}

#[test]
fn dgx1_allgather_frontier_matches_sccl() {
    let g = dgx1();
    let rep = search(&g, SccCollective::Allgather, 6, LIMIT).unwrap();
    assert!(rep.complete);
    assert_eq!(
        rep.frontier(),
        vec![Point::new(2, 3, 2), Point::new(3, 7, 6)]
    );
    assert_eq!(rep.least_steps(), Some(Point::new(2, 2, 1)));
    // SCCL's "found on the way" points.
    for p in [
        Point::new(3, 4, 3),
        Point::new(3, 5, 4),
        Point::new(3, 6, 5),
    ] {
        assert!(rep.schedule(p).is_some(), "{p} found");
    }
    for s in &rep.found {
        validate(&g, s).unwrap();
    }
}
