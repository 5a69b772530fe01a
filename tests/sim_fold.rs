//! The simulator's host fold (src/sim/fold.rs): a program that is the
//! same on every host of a machine of identical hosts runs as one host's
//! threadblocks, and predicts what the full run predicts — the time, each
//! rank's end, and every link's bytes.

mod common;

use common::hosts;
use rscc::compile::{compile, CompileOptions};
use rscc::ir::{Collective, Program, Topology};
use rscc::sim::{simulate, SimOptions, SimResult};
use rscc::synth::Algo;

fn program(t: &Topology, algo: Algo, op: Collective) -> Program {
    let mut o = CompileOptions::algo(algo, None);
    o.op = op;
    compile(t, &o)
        .unwrap_or_else(|e| panic!("{algo:?} {op:?}: {e}"))
        .program
}

fn run(p: &Program, t: &Topology, size: u64, fold: bool) -> SimResult {
    simulate(
        p,
        t,
        size,
        &SimOptions {
            fold,
            ..SimOptions::default()
        },
    )
    .unwrap()
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs()).max(1.0)
}

/// How far a full run's times may drift from the folded one: the full run
/// computes each host's rates separately, and over thousands of tiles
/// their rounding can move one host's events by a little (4 × DGX-H100,
/// `hier`'s allreduce at 1 GiB: its images end up to 0.09 % apart; the
/// folded run is the symmetric trajectory exactly).
const DRIFT: f64 = 2e-3;

/// Folded and full runs agree on everything they report.
fn agree(p: &Program, t: &Topology, what: &str) -> usize {
    let mut folded = 1;
    for size in [1 << 10, 1 << 20, 48 << 20, 1 << 30] {
        let (f, full) = (run(p, t, size, true), run(p, t, size, false));
        assert_eq!(full.folded, 1);
        folded = f.folded;
        assert!(
            close(f.time_us, full.time_us, DRIFT),
            "{what} at {size} B: folded {} µs, full {} µs",
            f.time_us,
            full.time_us
        );
        for (r, (a, b)) in f.rank_end_us.iter().zip(&full.rank_end_us).enumerate() {
            assert!(
                close(*a, *b, DRIFT),
                "{what} at {size} B: rank {r} ends {a} vs {b}"
            );
        }
        for (l, (a, b)) in f.link_bytes.iter().zip(&full.link_bytes).enumerate() {
            assert!(
                close(*a, *b, 1e-9),
                "{what} at {size} B: link {l} {a} vs {b} B"
            );
        }
        assert_eq!(f.steps_executed, full.steps_executed, "{what}");
        assert_eq!(f.flows, full.flows, "{what}");
    }
    folded
}

#[test]
fn folded_runs_predict_what_full_runs_predict() {
    let t = hosts("dgx-h100", 4);
    for (algo, op) in [
        (Algo::Hier, Collective::ReduceScatter),
        (Algo::Hier, Collective::AllGather),
        (Algo::Hier, Collective::AllReduce),
        (Algo::Ring, Collective::ReduceScatter),
        (Algo::HierRing, Collective::ReduceScatter),
        (Algo::HierHalving, Collective::ReduceScatter),
    ] {
        let p = program(&t, algo, op);
        let h = agree(&p, &t, &format!("4 x DGX-H100 {algo:?} {op:?}"));
        // The flat ring visits the hosts in an order of its own.
        let want = if algo == Algo::Ring { 1 } else { 4 };
        assert_eq!(h, want, "{algo:?} {op:?}");
    }
}

/// 16 × DGX-A100 with 48 SMs per GPU: `hier`'s rail tree (not the star)
/// folds sixteen ways and agrees with the full run.
#[test]
fn rail_trees_fold_on_sixteen_hosts() {
    let mut t = hosts("dgx-a100", 16);
    for r in 0..t.num_ranks() {
        let n = t.ranks[r];
        t.graph[n].sms = Some(48);
    }
    let p = program(&t, Algo::Hier, Collective::ReduceScatter);
    assert!(p.name.contains("hier"), "{}", p.name);
    assert_eq!(agree(&p, &t, "16 x DGX-A100 hier"), 16);
}

/// The rails-first butterfly (`hier-pat`): adding H / (most significant
/// radix) hosts shifts the most significant digit and nothing else, so
/// on 8 × DGX-H100 (one digit, radix 8) the program is the same on every
/// host and folds eight ways, and on 16 × DGX-H100 with the one-round
/// butterfly forced out by the budget (radix 8 over radix 2 at 32
/// threadblocks per rank) it repeats every 2 hosts and folds eight ways.
#[test]
fn butterflies_fold_at_their_top_digit() {
    let t = hosts("dgx-h100", 8);
    let p = program(&t, Algo::HierPat, Collective::ReduceScatter);
    assert!(p.name.contains("hier-pat"), "{}", p.name);
    assert_eq!(agree(&p, &t, "8 x DGX-H100 hier-pat"), 8);
    let t = hosts("dgx-h100", 16);
    let mut o = CompileOptions::algo(Algo::HierPat, None);
    o.max_tbs = Some(32);
    let c = compile(&t, &o).expect("hier-pat within 32 threadblocks");
    assert_eq!(c.algorithm.name, "hier-pat-8-2");
    assert_eq!(agree(&c.program, &t, "16 x DGX-H100 hier-pat-8-2"), 8);
}

/// `hier-blocks` aggregates piece p of owner host h_o on host h at GPU
/// (P·(h_o + h) + p) mod g: a shift by k hosts moves it 2kP GPUs, so on
/// 4 × DGX-H100 (P = 2) the program repeats every 2 hosts and folds two
/// ways, and on 16 (P = 1) every 4 hosts, four ways.
#[test]
fn hier_blocks_repeats_every_g_over_2p_hosts() {
    let t = hosts("dgx-h100", 4);
    let p = program(&t, Algo::HierBlocks, Collective::ReduceScatter);
    assert_eq!(agree(&p, &t, "4 x DGX-H100 hier-blocks"), 2);
    let t = hosts("dgx-h100", 16);
    let p = program(&t, Algo::HierBlocks, Collective::ReduceScatter);
    assert_eq!(run(&p, &t, 1 << 20, true).folded, 4);
}

/// `ring`'s rail rings enter host h at GPU (ring + h) mod 8: on 16 hosts
/// the program repeats every 8 hosts, and folds two ways.
#[test]
fn rail_rings_fold_at_their_period() {
    let t = hosts("dgx-h100", 16);
    let p = program(&t, Algo::Ring, Collective::ReduceScatter);
    assert_eq!(agree(&p, &t, "16 x DGX-H100 ring"), 2);
}

/// RCCL's reduced step set on 2 × MI300X: the local `re`/`cpy` passes
/// share each GPU's memory (a pseudo-link per rank), and the folded run
/// still predicts the full run's times.
#[test]
fn local_passes_fold_with_their_ranks() {
    let t = hosts("mi300x", 2);
    let mut o = CompileOptions::algo(Algo::Hier, None);
    o.lower.runtime = rscc::ir::Runtime::Rccl;
    let p = compile(&t, &o).unwrap().program;
    let opts = |fold| SimOptions {
        fold,
        ..SimOptions::for_runtime(rscc::ir::Runtime::Rccl)
    };
    for size in [1u64 << 10, 1 << 20, 1 << 30] {
        let f = simulate(&p, &t, size, &opts(true)).unwrap();
        let full = simulate(&p, &t, size, &opts(false)).unwrap();
        assert_eq!((f.folded, full.folded), (2, 1));
        assert!(
            close(f.time_us, full.time_us, DRIFT),
            "{size} B: {} vs {}",
            f.time_us,
            full.time_us
        );
    }
}

/// A host unlike the others (one NIC slower) breaks the symmetry: the run
/// is not folded, and still what it was.
#[test]
fn a_host_unlike_the_others_is_not_folded() {
    let mut t = hosts("dgx-h100", 4);
    let p = program(&t, Algo::Hier, Collective::ReduceScatter);
    assert_eq!(run(&p, &t, 1 << 20, true).folded, 4);
    let e = t
        .graph
        .edge_indices()
        .find(|&e| t.graph[e].kind == "ib")
        .expect("a NIC link");
    t.graph[e].bw_gbps /= 2.0;
    let (f, full) = (run(&p, &t, 1 << 30, true), run(&p, &t, 1 << 30, false));
    assert_eq!(f.folded, 1);
    assert_eq!(f.time_us, full.time_us);
}
