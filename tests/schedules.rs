//! Regression: the schedule emitted for every shipped topology is pinned,
//! both as an insta snapshot and as the committed file in
//! schedules/<topology>/ (`rs.xml`, `ag.xml`, `ar.xml`; the extra
//! synthesizers' pins under `extra/`, which the runtime does not read),
//! each for the runtime `rscc synth` targets by default (RCCL for the AMD
//! machine, whose files use only `s`, `r`, `re`, `cpy` and `nop`).
//! Regenerate schedules/ with `RSCC_UPDATE_SCHEDULES=1 cargo test --test
//! schedules` and review snapshot changes with `cargo insta review`.

use rscc::compile::{compile, CompileOptions};
use rscc::ir::Collective;
use rscc::verify::{verify, VerifyOptions};
use std::path::Path;

fn shipped() -> Vec<(String, std::path::PathBuf)> {
    let mut v: Vec<_> = std::fs::read_dir("topologies")
        .expect("topologies/ exists")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| (p.file_stem().unwrap().to_string_lossy().to_string(), p))
        .collect();
    v.sort();
    assert!(v.len() >= 9, "expected the shipped topologies");
    v
}

fn emit(path: &Path, op: Collective) -> String {
    let topo = rscc::front::load_topology(path).expect("shipped topology loads");
    // The runtime `rscc synth` targets by default: RCCL on AMD GPUs.
    let mut opts = CompileOptions {
        op,
        ..CompileOptions::default()
    };
    opts.lower.runtime = topo.default_runtime();
    opts.lower.max_bytes = opts.lower.runtime.encode_max_bytes(None);
    let c = compile(&topo, &opts).expect("compiles");
    assert_eq!(c.program.coll, op);
    rscc::back::msccl_xml::to_string(&c.program)
}

/// The emitted text reads back and verifies, and equals both its
/// snapshot `stem` and schedules/`file` (rewritten instead with
/// RSCC_UPDATE_SCHEDULES set); a stale file is pushed to `stale`.
fn pin(stem: &str, file: &str, xml: &str, stale: &mut Vec<String>) {
    let p = rscc::front::msccl_xml::parse(xml, stem).expect("own XML parses");
    verify(&p, &VerifyOptions::default()).expect("own XML verifies");
    // An RCCL file (named so) also keeps RCCL's rules.
    if p.name.starts_with("rscc_rccl_") {
        let o = VerifyOptions {
            runtime: Some(rscc::ir::Runtime::Rccl),
            ..VerifyOptions::default()
        };
        verify(&p, &o).expect("an RCCL file keeps RCCL's rules");
    }
    let file = Path::new("schedules").join(file);
    if std::env::var_os("RSCC_UPDATE_SCHEDULES").is_some() {
        std::fs::create_dir_all(file.parent().expect("a folder")).expect("make the folder");
        std::fs::write(&file, xml).expect("write schedule");
    } else if std::fs::read_to_string(&file).ok().as_deref() != Some(xml) {
        stale.push(file.display().to_string());
    }
    insta::assert_snapshot!(stem.to_string(), xml);
}

fn no_stale(stale: &[String]) {
    assert!(
        stale.is_empty(),
        "schedules/ differs from what the code emits: {stale:?} (regenerate with RSCC_UPDATE_SCHEDULES=1 cargo test --test schedules)"
    );
}

/// Every shipped topology's schedule of `op`, pinned as snapshot
/// {name}-{rs,ag,ar} and file schedules/{name}/{rs,ag,ar}.xml: one folder
/// per machine, so that loading one folder as MSCCL_ALGO_DIR cannot mix
/// machines (and the runtime does not read subfolders).
fn pin_op(op: Collective) {
    let mut stale = Vec::new();
    for (name, path) in shipped() {
        pin(
            &format!("{name}-{}", op.short()),
            &format!("{name}/{}.xml", op.short()),
            &emit(&path, op),
            &mut stale,
        );
    }
    no_stale(&stale);
}

#[test]
fn every_shipped_topology_has_its_schedule() {
    pin_op(Collective::ReduceScatter);
}

#[test]
fn every_shipped_topology_has_its_allgather() {
    pin_op(Collective::AllGather);
}

#[test]
fn every_shipped_topology_has_its_allreduce() {
    pin_op(Collective::AllReduce);
}

/// The small-message schedules `auto` writes as a size band of their own
/// (`compile_small`: ring8's pieced tree members, safe below 32 MiB, with
/// that `maxBytes`) are pinned the same way, as {name}-small-rs.
#[test]
fn small_message_band_schedules_are_pinned() {
    let mut stale = Vec::new();
    let mut pinned = Vec::new();
    for (name, path) in shipped() {
        let topo = rscc::front::load_topology(&path).expect("shipped topology loads");
        let small = rscc::compile::compile_small(
            &topo,
            rscc::synth::Algo::Tree,
            &CompileOptions::default(),
        );
        if let Ok(Some(c)) = small {
            pin(
                &format!("{name}-small-rs"),
                &format!("{name}/extra/small-rs.xml"),
                &rscc::back::msccl_xml::to_string(&c.program),
                &mut stale,
            );
            pinned.push(name);
        }
    }
    assert_eq!(pinned, ["ring8"]);
    no_stale(&stale);
}

/// The gap schedules (`compile_one(Gap)`: the window LP's rounding after
/// its default, deterministic search budget) that `auto` writes as the
/// small-message band where gap is offered are pinned the same way, as
/// {name}-gap-rs.
#[test]
fn gap_schedules_are_pinned() {
    let mut stale = Vec::new();
    let mut pinned = Vec::new();
    for (name, path) in shipped() {
        let topo = rscc::front::load_topology(&path).expect("shipped topology loads");
        if rscc::synth::gap::offered(&topo).is_err() {
            continue;
        }
        let c =
            rscc::compile::compile_one(&topo, rscc::synth::Algo::Gap, &CompileOptions::default())
                .expect("gap compiles where it is offered");
        pin(
            &format!("{name}-gap-rs"),
            &format!("{name}/extra/gap-rs.xml"),
            &rscc::back::msccl_xml::to_string(&c.program),
            &mut stale,
        );
        pinned.push(name);
    }
    assert_eq!(pinned, ["dgx1-v100"]);
    no_stale(&stale);
}

/// An RCCL reduce-scatter and allreduce where reductions are forwarded
/// (ring8's rings: every hop receives, reduces and sends), pinned as
/// ring8-rccl-{rs,ar}: within the threadblock budget each reducing
/// threadblock gives its sends to a threadblock of its own.
#[test]
fn rccl_send_threadblocks_are_pinned() {
    let mut stale = Vec::new();
    let path = Path::new("topologies/ring8.json");
    let topo = rscc::front::load_topology(path).expect("shipped topology loads");
    for op in [Collective::ReduceScatter, Collective::AllReduce] {
        let mut opts = CompileOptions {
            op,
            ..CompileOptions::default()
        };
        opts.lower.runtime = rscc::ir::Runtime::Rccl;
        opts.lower.max_bytes = opts.lower.runtime.encode_max_bytes(None);
        let c = compile(&topo, &opts).expect("compiles for RCCL");
        // Send-only threadblocks, each send after a reduction waiting on it.
        let senders: Vec<_> = c.program.gpus[0]
            .tbs
            .iter()
            .filter(|t| t.send >= 0 && t.recv < 0)
            .collect();
        assert!(!senders.is_empty(), "{op:?}");
        assert!(senders.iter().any(|t| t.steps.iter().any(|s| s.depid >= 0)));
        assert!(c.program.max_tbs_per_rank() <= opts.tb_budget(&topo));
        pin(
            &format!("ring8-rccl-{}", op.short()),
            &format!("ring8/extra/rccl-{}.xml", op.short()),
            &rscc::back::msccl_xml::to_string(&c.program),
            &mut stale,
        );
    }
    no_stale(&stale);
}
