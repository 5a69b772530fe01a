mod common;

use rscc::compile::{compile, CompileOptions};
use rscc::synth::Algo;

#[test]
fn ring8_compiles_and_verifies() {
    let t = common::ring(8);
    let c = compile(&t, &CompileOptions::algo(Algo::Ring, None)).expect("compiles");
    assert_eq!(c.report.modes, vec!["out-of-place", "in-place"]);
    assert_eq!(c.program.ngpus, 8);
}

#[test]
fn dgx1_uses_six_rings() {
    let t = common::dgx1();
    let c = compile(&t, &CompileOptions::algo(Algo::Ring, None)).expect("compiles");
    assert_eq!(c.program.nchannels, 6);
    assert_eq!(c.program.nchunksperloop, 48);
}

#[test]
fn switch_and_small() {
    for n in [1, 2, 3, 16] {
        let t = common::switch(n, 450.0);
        compile(&t, &CompileOptions::algo(Algo::Ring, None))
            .unwrap_or_else(|e| panic!("n={n}: {e}"));
    }
    for chunks in [1, 2, 3, 5] {
        let t = common::dgx1();
        let o = CompileOptions::algo(Algo::Ring, Some(chunks));
        compile(&t, &o).unwrap_or_else(|e| panic!("chunks={chunks}: {e}"));
    }
}

#[test]
fn big_ring_fits_step_limit() {
    let t = common::ring(100);
    let c = compile(&t, &CompileOptions::algo(Algo::Ring, None)).expect("compiles");
    assert!(c
        .program
        .gpus
        .iter()
        .flat_map(|g| g.tbs.iter())
        .all(|t| t.steps.len() <= 64));
}

#[test]
fn absurd_chunk_counts_are_refused_before_any_work() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rscc"))
        .args([
            "synth",
            "--topo",
            "topologies/dgx-h100.json",
            "--algo",
            "ring",
            "--chunks",
            "100000000",
            "-o",
            "/dev/null",
        ])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("int16"));
}
