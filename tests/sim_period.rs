//! The simulator's jump over repeating tiles (src/sim/period.rs): a run
//! that jumps predicts what the step-by-step run predicts — the time, each
//! rank's end, every link's bytes, the steps and flows — and jumps where
//! the pipeline repeats.

mod common;

use common::hosts;
use rscc::compile::{compile, CompileOptions};
use rscc::ir::{Collective, Program, Runtime, Topology};
use rscc::sim::{simulate, SimOptions, SimResult};
use rscc::synth::Algo;

fn program(t: &Topology, algo: Algo, op: Collective, rt: Runtime) -> Program {
    let mut o = CompileOptions::algo(algo, None);
    o.op = op;
    o.lower.runtime = rt;
    compile(t, &o)
        .unwrap_or_else(|e| panic!("{algo:?} {op:?}: {e}"))
        .program
}

/// The step-by-step run and the jumping one, with `base`'s other options.
fn both(p: &Program, t: &Topology, size: u64, base: &SimOptions) -> (SimResult, SimResult) {
    let run = |skip_periods| {
        simulate(
            p,
            t,
            size,
            &SimOptions {
                skip_periods,
                ..base.clone()
            },
        )
        .unwrap()
    };
    (run(false), run(true))
}

/// Within rounding: what a jump may differ by.
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// Both runs report the same, up to rounding; the tiles the jump skipped.
fn agree(p: &Program, t: &Topology, size: u64, base: &SimOptions, what: &str) -> u64 {
    let (step, jump) = both(p, t, size, base);
    assert_eq!(step.tiles_skipped, 0);
    assert!(
        close(step.time_us, jump.time_us),
        "{what} at {size} B: step by step {} µs, jumping {} µs",
        step.time_us,
        jump.time_us
    );
    for (a, b) in step.rank_end_us.iter().zip(&jump.rank_end_us) {
        assert!(
            close(*a, *b),
            "{what} at {size} B: a rank ends at {a} vs {b}"
        );
    }
    for (a, b) in step.link_bytes.iter().zip(&jump.link_bytes) {
        assert!(
            close(*a, *b),
            "{what} at {size} B: a link carries {a} vs {b}"
        );
    }
    assert_eq!(
        (step.steps_executed, step.flows),
        (jump.steps_executed, jump.flows),
        "{what} at {size} B"
    );
    jump.tiles_skipped
}

/// Pipelines that fill and repeat: the run jumps over all but a few of
/// its tiles and predicts the same, for every op, on one host and on a
/// folded machine of hosts.
#[test]
fn repeating_tiles_are_jumped_over() {
    let cases = [
        ("dgx-h100", 1, Algo::Direct, Collective::ReduceScatter),
        ("dgx-h100", 1, Algo::Direct, Collective::AllGather),
        ("dgx-h100", 1, Algo::Ring, Collective::AllReduce),
        ("mi300x", 1, Algo::Direct, Collective::AllReduce),
        ("dgx-a100", 2, Algo::Hier, Collective::ReduceScatter),
    ];
    for (kind, h, algo, op) in cases {
        let t = hosts(kind, h);
        let p = program(&t, algo, op, Runtime::default());
        let what = format!("{h} × {kind} {algo:?} {op:?}");
        let skipped = agree(&p, &t, 1 << 30, &SimOptions::default(), &what);
        let tiles = simulate(&p, &t, 1 << 30, &SimOptions::default())
            .unwrap()
            .tiles;
        assert!(
            skipped * 2 >= tiles,
            "{what}: {skipped} of {tiles} tiles skipped"
        );
    }
}

/// RCCL's local passes (flows over each GPU's memory) and the CPU
/// executor's shared-memory model repeat too.
#[test]
fn local_passes_and_shared_memory_repeat() {
    let t = hosts("mi300x", 1);
    let p = program(&t, Algo::Direct, Collective::ReduceScatter, Runtime::Rccl);
    let rccl = SimOptions::for_runtime(Runtime::Rccl);
    assert!(agree(&p, &t, 1 << 30, &rccl, "mi300x RCCL direct") > 0);
    let cpu = SimOptions {
        shared_mem: Some(rscc::sim::SharedMem {
            gbps: 50.0,
            call_us: 1.0,
            zero_copy: true,
        }),
        ..SimOptions::default()
    };
    let p = program(&t, Algo::Ring, Collective::AllReduce, Runtime::default());
    assert!(agree(&p, &t, 1 << 30, &cpu, "mi300x shared-memory ring") > 0);
}

/// A pipeline that repeats for a few tiles but on an unstable orbit: on
/// 2 × DGX-H100, `hier`'s allreduce at 1 GiB repeats from its third to its
/// sixth tile, then every difference grows 25-fold per tile and the run
/// leaves the orbit for a slower one. A jump from the repeat would
/// predict 0.3 % less than the step-by-step run; the growth keeps it from
/// jumping.
#[test]
fn an_unstable_repeat_is_not_jumped_over() {
    let t = hosts("dgx-h100", 2);
    let p = program(&t, Algo::Hier, Collective::AllReduce, Runtime::default());
    agree(
        &p,
        &t,
        1 << 30,
        &SimOptions::default(),
        "2 × DGX-H100 hier allreduce",
    );
}

/// Sizes with a shorter last tile, with fewer tiles than a period needs,
/// and without tiling: every run agrees.
#[test]
fn every_size_agrees() {
    let t = hosts("dgx-a100", 1);
    let p = program(
        &t,
        Algo::Direct,
        Collective::ReduceScatter,
        Runtime::default(),
    );
    for size in [
        1u64 << 20,
        3 << 20,
        48 << 20,
        (1 << 30) + 12_345 * 4,
        3 << 29,
    ] {
        agree(&p, &t, size, &SimOptions::default(), "dgx-a100 direct");
    }
    let untiled = SimOptions {
        tiling: false,
        ..SimOptions::default()
    };
    assert_eq!(agree(&p, &t, 1 << 30, &untiled, "untiled"), 0);
}
