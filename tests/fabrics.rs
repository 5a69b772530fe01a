//! Generated fabrics (`rscc topo generate random`): machines nobody fitted
//! rscc to. On each, the tree packing's schedule verifies, its LP sits
//! between its own certificate and the cut bound, the certificate holds
//! (the schedule, and every other synthesizer's, simulates above it at
//! 1 GiB), and `auto` is never slower than the ring. The 200-fabric sweep
//! of quality is a bench (bench/fabrics.sh). Allgather and allreduce hold
//! their bounds and compute their ops there too.

use rscc::bound::{bandwidth_bound, time_bound_us};
use rscc::compile::{compile_one, CompileOptions};
use rscc::front::generate::{generate, GenParams};
use rscc::ir::Collective;
use rscc::sim::{simulate, SimOptions};
use rscc::synth::{pack, Algo, Context, SynthOptions};

const FABRICS: u64 = 16;
const S: u64 = 1 << 30;

fn fabric(seed: u64) -> rscc::ir::Topology {
    generate(
        "random",
        &GenParams {
            seed: Some(seed),
            ..GenParams::default()
        },
    )
    .unwrap()
}

#[test]
fn the_packing_verifies_and_its_certificate_holds_on_generated_fabrics() {
    for seed in 0..FABRICS {
        let topo = fabric(seed);
        let name = &topo.description[..topo.description.find(':').unwrap()];
        let ctx = Context::new(&topo, &SynthOptions::default()).unwrap();
        let p = pack::packing(&ctx).unwrap();
        let b = bandwidth_bound(&topo, Collective::ReduceScatter).unwrap();
        let x = b.x_star_f64();
        assert!(p.t >= x * (1.0 - 1e-6), "{name}: LP {} below x* {x}", p.t);
        assert!(p.lower <= p.t * (1.0 + 1e-9), "{name}");
        assert!(
            p.lower >= x * (1.0 - 1e-3),
            "{name}: certificate {} more than 0.1 % below x* {x}: column generation stopped early",
            p.lower
        );
        // The certificate in µs at S, as `time_bound_us` gives x*'s.
        let lower_us = time_bound_us(&b, S) * p.lower / x;
        let c = compile_one(&topo, Algo::Pack, &CompileOptions::algo(Algo::Pack, None))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let so = SimOptions::default();
        let t = simulate(&c.program, &topo, S, &so).unwrap().time_us;
        assert!(
            t >= lower_us * (1.0 - 1e-9),
            "{name}: {t} µs below the certificate {lower_us}"
        );
        for algo in [Algo::Ring, Algo::Direct, Algo::Mix, Algo::Flow, Algo::Hier] {
            if let Ok(c) = compile_one(&topo, algo, &CompileOptions::algo(algo, None)) {
                let t = simulate(&c.program, &topo, S, &so).unwrap().time_us;
                assert!(
                    t >= lower_us * (1.0 - 1e-9),
                    "{name}: {} at {t} µs is below the packing's certificate {lower_us}",
                    algo.name()
                );
            }
        }
    }
}

#[test]
fn auto_is_never_slower_than_the_ring_on_generated_fabrics() {
    let sizes = [1u64 << 20, 16 << 20, S];
    for seed in (0..FABRICS).step_by(4) {
        let topo = fabric(seed);
        let sel = rscc::compile::auto(
            &topo,
            &Default::default(),
            &sizes,
            &SimOptions::default(),
            None,
        )
        .unwrap();
        let ring = compile_one(&topo, Algo::Ring, &CompileOptions::algo(Algo::Ring, None)).unwrap();
        for (i, &s) in sizes.iter().enumerate() {
            let w = sel.winners[i];
            let t = sel.times_us[w][i];
            let tr = simulate(&ring.program, &topo, s, &SimOptions::default())
                .unwrap()
                .time_us;
            assert!(
                t <= tr * (1.0 + 1e-9),
                "seed {seed} at {s} B: {t} µs vs ring {tr}"
            );
        }
    }
}

/// Allgather and allreduce on generated fabrics (some with links that
/// differ by direction, all unfitted): `pack`'s schedule of each op
/// verifies (compile does), computes its op on the CPU executor, and
/// simulates at 1 GiB no faster than the op's cut bound; the allreduce
/// takes no longer than its two halves one after the other.
#[test]
fn allgather_and_allreduce_hold_on_generated_fabrics() {
    use rscc::exec::{run_program, RunOptions};
    for seed in (1..FABRICS).step_by(5) {
        let topo = fabric(seed);
        let name = &topo.name;
        let mut t = Vec::new();
        for op in [
            Collective::ReduceScatter,
            Collective::AllGather,
            Collective::AllReduce,
        ] {
            let mut o = CompileOptions::algo(Algo::Pack, None);
            o.op = op;
            let c = compile_one(&topo, Algo::Pack, &o).unwrap();
            assert_eq!(c.program.coll, op);
            let time = simulate(&c.program, &topo, S, &SimOptions::default())
                .unwrap()
                .time_us;
            let bound = time_bound_us(&bandwidth_bound(&topo, op).unwrap(), S);
            assert!(
                time >= bound * (1.0 - 1e-9),
                "{name} {}: {time} µs below the bound {bound}",
                op.display()
            );
            if op != Collective::ReduceScatter {
                let r = run_program(
                    &c.program,
                    &RunOptions {
                        sizes: vec![4 << 10],
                        iters: 1,
                        warmup: 0,
                        check: true,
                        ..RunOptions::default()
                    },
                )
                .unwrap();
                assert!(
                    r.rows.iter().all(|x| x.wrong == Some(0)),
                    "{name} {}",
                    op.display()
                );
            }
            t.push(time);
        }
        assert!(
            t[2] <= 1.02 * (t[0] + t[1]),
            "{name}: allreduce {} µs, halves {} + {} µs",
            t[2],
            t[0],
            t[1]
        );
    }
}
