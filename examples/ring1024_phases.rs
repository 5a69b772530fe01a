//! Where the time of emitting the 1024-GPU ring goes, phase by phase.
//!
//! Run: `cargo run --release --example ring1024_phases` (ITERS=n for more
//! rounds, default 3). Per round it times the candidates the driver tries
//! (ringx2, rejected for needing 34 channels, then ringx1): building each
//! Algorithm, lowering, verifying; then `compile` + writing the XML to a
//! file as `rscc synth -o` does. docs/benchmarks.md quotes these figures.

use rscc::compile::{self, CompileOptions};
use rscc::front::generate::{generate, GenParams};
use rscc::synth::{Algo, Context, SynthOptions};
use std::time::Instant;

fn main() {
    let topo = generate(
        "ring",
        &GenParams {
            gpus: Some(1024),
            ..Default::default()
        },
    )
    .expect("ring 1024");
    let iters: usize = std::env::var("ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    for _ in 0..iters {
        let t = Instant::now();
        let ctx = Context::new(&topo, &SynthOptions::default()).expect("a request");
        let mut cands = Algo::Ring
            .synthesizer()
            .offer(&ctx)
            .expect("ring candidates")
            .candidates
            .into_iter();
        let a2 = (cands.next().expect("ringx2"))();
        let build2 = t.elapsed().as_secs_f64();
        let rejected = rscc::lower::lower(&a2, &Default::default()).is_err();
        let lower2 = t.elapsed().as_secs_f64() - build2;
        drop(a2);
        let t = Instant::now();
        let a1 = (cands.next().expect("ringx1"))();
        let build1 = t.elapsed().as_secs_f64();
        let p = rscc::lower::lower(&a1, &Default::default()).expect("lowers");
        let lower1 = t.elapsed().as_secs_f64() - build1;
        let t = Instant::now();
        rscc::verify::verify(&p, &Default::default()).expect("verifies");
        let verify = t.elapsed().as_secs_f64();
        println!(
            "ringx2 build {build2:.3} lower {lower2:.3} (rejected: {rejected}); ringx1 build {build1:.3} lower {lower1:.3} verify {verify:.3}"
        );
        let t = Instant::now();
        let c = compile::compile(&topo, &CompileOptions::algo(Algo::Ring, None)).expect("compile");
        let t_compile = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let path = std::path::Path::new("target/ring1024_phases.xml");
        let mut w = std::io::BufWriter::new(std::fs::File::create(path).expect("create"));
        rscc::back::msccl_xml::write(&c.program, &mut w).expect("write");
        std::io::Write::flush(&mut w).expect("flush");
        drop(w);
        let t_write = t.elapsed().as_secs_f64();
        let _ = std::fs::remove_file(path);
        println!(
            "compile {t_compile:.3} write {t_write:.3} total {:.3}",
            t_compile + t_write
        );
    }
}
