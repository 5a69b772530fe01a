//! RCCL's runtime end to end: AMD machines get files that use only the
//! step types RCCL builds (s, r, re, cpy, nop) within its 64 threadblocks,
//! every op, verified under RCCL's rules and correct on the CPU executor;
//! fused files are refused for RCCL with the rule and the first step; the
//! runtime a file is for is in its name.

mod common;

use common::{fresh_dir, random_fabric, rscc};
use rscc::exec::{DType, RedOp};
use rscc::ir::{Collective, Program, Runtime, StepKind};
use rscc::verify::{verify, VerifyOptions};
use std::path::Path;

fn kinds_run_on_rccl(p: &Program) -> bool {
    p.gpus
        .iter()
        .flat_map(|g| g.tbs.iter().flat_map(|t| t.steps.iter()))
        .all(|s| Runtime::Rccl.runs(s.kind))
}

fn rccl() -> VerifyOptions {
    VerifyOptions {
        runtime: Some(Runtime::Rccl),
        ..VerifyOptions::default()
    }
}

/// `rscc synth -o DIR/` on an AMD machine writes RCCL files by default,
/// for every op: named for RCCL, within its rules, correct in both call
/// modes.
#[test]
fn amd_machines_get_rccl_files_for_every_op() {
    let dir = fresh_dir("rccl");
    let out = format!("{}/", dir.display());
    // The MI300X generator's machine and an imported RCCL dump (PCIe only:
    // no xGMI link says AMD, the dump's format does).
    let imported = dir.join("vega20.json");
    let (code, _, err) = rscc(&[
        "topo",
        "import",
        "tests/data/real/rccl-xml/rccl_topo_8p_pcie_Vega20-gfx906_8GPU_PCIe.xml",
        "-o",
        imported.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    for topo in ["topologies/mi300x.json", imported.to_str().unwrap()] {
        for op in ["reduce-scatter", "allgather", "allreduce"] {
            let (code, _, err) = rscc(&[
                "synth", "--topo", topo, "--op", op, "--sizes", "1K,1M,1G", "-o", &out,
            ]);
            assert_eq!(code, 0, "{topo} {op}: {err}");
        }
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "xml"))
            .collect();
        files.sort();
        assert!(files.len() >= 3, "{files:?}");
        for f in &files {
            let name = f.file_name().unwrap().to_string_lossy().to_string();
            assert!(name.contains("-rccl-"), "{name}");
            let p = rscc::front::msccl_xml::load(f).unwrap();
            assert!(p.name.starts_with("rscc_rccl_"), "{}", p.name);
            assert!(kinds_run_on_rccl(&p), "{name}");
            assert!(p.max_tbs_per_rank() <= 64, "{name}");
            verify(&p, &rccl()).unwrap_or_else(|e| panic!("{name}: {e}"));
            for inplace in [false, true] {
                assert_eq!(
                    common::wrong(&p, inplace, DType::F32, RedOp::Sum, &[64 << 10]),
                    0,
                    "{name} inplace {inplace}"
                );
            }
            std::fs::remove_file(f).unwrap();
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A file with fused steps is refused for RCCL, naming the rule, the first
/// step and why; the same file holds for the executor, and `verify` says
/// which runtimes take it.
#[test]
fn fused_files_are_refused_for_rccl() {
    let f = "schedules/dgx-h100/rs.xml";
    let (code, _, err) = rscc(&["verify", f, "--runtime", "rccl"]);
    assert_ne!(code, 0);
    assert!(err.contains("[step-kind]"), "{err}");
    assert!(err.contains("does not run on the rccl runtime"), "{err}");
    let (code, out, err) = rscc(&["verify", f]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("rccl: rejects it ([step-kind])"), "{out}");
    // The shipped AMD schedules hold for every runtime.
    let (code, out, err) = rscc(&["verify", "schedules/mi300x/ar.xml"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("rccl: its rules hold"), "{out}");
}

/// RCCL's 64 threadblocks bound synthesis: where a schedule would need
/// more, the driver takes one within the limit (or says why none fits);
/// the executor target of the same machine may use more.
#[test]
fn rccl_keeps_within_64_threadblocks() {
    let t = rscc::front::load_topology(Path::new("topologies/dgx1-v100.json")).unwrap();
    let mut o = rscc::compile::CompileOptions::algo(rscc::synth::Algo::Gap, None);
    o.lower.runtime = Runtime::Rccl;
    match rscc::compile::compile(&t, &o) {
        Ok(c) => {
            assert!(c.program.max_tbs_per_rank() <= 64);
            assert!(kinds_run_on_rccl(&c.program));
            verify(&c.program, &rccl()).unwrap();
        }
        Err(e) => {
            let m = e.to_string();
            assert!(m.contains("64"), "{m}");
        }
    }
    // The executor's gap schedule for DGX-1 on the whole GPU uses more
    // than 64.
    let mut whole = rscc::compile::CompileOptions::algo(rscc::synth::Algo::Gap, None);
    whole.max_tbs = Some(80);
    let c = rscc::compile::compile(&t, &whole).unwrap();
    assert!(c.program.max_tbs_per_rank() > 64);
    assert!(c
        .program
        .gpus
        .iter()
        .flat_map(|g| g.tbs.iter().flat_map(|t| t.steps.iter()))
        .any(|s| s.kind == StepKind::RecvReduceSend || s.kind == StepKind::RecvReduceCopy));
}

/// Where an RCCL band's schedule needs counts divisible by k > 1 (an
/// imported MI250X: k = 3), the one-chunk fall-through files are written
/// for RCCL too, so every call of the sweep gets an rscc schedule.
#[test]
fn rccl_directories_serve_every_count() {
    let d = fresh_dir("rccl-k1");
    let topo = d.join("mi250x.json");
    let (code, _, err) = rscc(&[
        "topo",
        "import",
        "tests/data/real/rccl-xml/rccl_topo_8p1h_MI250X-gfx90a_8GCD_1hive.xml",
        "-o",
        topo.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let dir = format!("{}/out/", d.display());
    let (code, _, err) = rscc(&["synth", "--topo", topo.to_str().unwrap(), "-o", &dir]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("RCCL reads MSCCL_ALGO_DIR unsorted"), "{err}");
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    assert!(
        names.iter().any(|n| n.starts_with("rs.k1-rccl-")),
        "{names:?}"
    );
    let (code, out, err) = rscc(&["verify", &dir, "--runtime", "rccl", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let g = &v["groups"][0];
    assert_eq!(g["served"], g["calls"], "{g}");
    let _ = std::fs::remove_dir_all(&d);
}

/// Send threadblocks keep every ordering the fused program had: on a
/// generated fabric whose allreduce candidates have broadcast sends behind
/// `nop` waits and waiters that relied on program order through a send
/// (seed 26: `flow` and the tree pairs), no RCCL candidate is rejected as
/// a race, and the files written have send-only threadblocks and verify.
#[test]
fn send_threadblocks_keep_every_ordering() {
    let dir = fresh_dir("rccl-split");
    let topo = random_fabric(&dir, 26);
    let out = format!("{}/", dir.join("out").display());
    let (code, json, err) = rscc(&[
        "synth",
        "--topo",
        topo.to_str().unwrap(),
        "--op",
        "allreduce",
        "--runtime",
        "rccl",
        "--json",
        "-o",
        &out,
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let skipped: Vec<&str> = v["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s.as_str())
        .collect();
    assert!(
        skipped.iter().all(|s| !s.contains("[race]")),
        "{skipped:#?}"
    );
    let mut split = 0;
    for f in v["files"].as_array().unwrap() {
        let path = f["path"].as_str().unwrap();
        let p = rscc::front::msccl_xml::load(Path::new(path)).unwrap();
        verify(&p, &rccl()).unwrap_or_else(|e| panic!("{path}: {e}"));
        split += p
            .gpus
            .iter()
            .flat_map(|g| &g.tbs)
            .filter(|t| t.send >= 0 && t.recv < 0 && t.steps.iter().any(|s| s.depid >= 0))
            .count();
    }
    assert!(split > 0, "no file has send threadblocks");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `auto`'s RCCL selection on the shipped MI300X at one size.
fn mi300x_rccl(size: u64) -> (rscc::ir::Topology, rscc::compile::Selection) {
    let t = rscc::front::load_topology(Path::new("topologies/mi300x.json")).unwrap();
    let mut opts = rscc::compile::CompileOptions::default();
    opts.lower.runtime = Runtime::Rccl;
    let sim = rscc::sim::SimOptions::for_runtime(Runtime::Rccl);
    let sel = rscc::compile::auto(&t, &opts, &[size], &sim, None).unwrap();
    (t, sel)
}

/// Where a shard is under MSCCL's 2 MiB tile, RCCL reduces a message in a
/// pass of its own only once it has all arrived: on the MI300X mesh at
/// 16 MiB (2 MiB shards) the direct exchange with each shard in several
/// messages overlaps those passes with the wire, at least 8 % faster than
/// one message per pair (`auto` takes the seven directed rings there,
/// faster still).
#[test]
fn rccl_pipelines_the_direct_exchange_below_the_tile() {
    let (t, mut sel) = mi300x_rccl(16 << 20);
    sel.complete(&t).unwrap();
    let time = |name: &str| {
        (0..sel.candidates.len())
            .filter(|&c| sel.candidates[c].algorithm.name == name)
            .map(|c| sel.times_us[c][0])
            .fold(f64::INFINITY, f64::min)
    };
    let pipelined = time("direct-pipelined");
    assert!(
        pipelined * 1.08 <= time("direct"),
        "{pipelined} against {} us",
        time("direct")
    );
    assert!(sel.times_us[sel.winners[0]][0] <= pipelined);
}

/// MI300X's full mesh of eight GPUs has seven xGMI links per GPU: rings
/// used both ways take six, and the seven arc-disjoint directed rings
/// take them all. `auto`'s 1 GiB reduce-scatter for RCCL is those rings,
/// above 98 % of the bound, where the six reach at most 6/7 of it.
#[test]
fn directed_rings_use_every_link_of_a_mesh_of_eight() {
    let size = 1u64 << 30;
    let (t, sel) = mi300x_rccl(size);
    let w = &sel.candidates[sel.winners[0]];
    assert!(
        w.algorithm.name.starts_with("ringx7"),
        "{}",
        w.algorithm.name
    );
    let bound = rscc::bound::alpha_bound_us(&t, Collective::ReduceScatter, size).unwrap();
    let ratio = bound / sel.times_us[sel.winners[0]][0];
    assert!(ratio > 0.98, "{ratio}");
}

/// A ring's channels run in step, moving a tile and then reducing it, so
/// on RCCL the links and the memory take turns; staggered, one channel's
/// local pass overlaps another's transfer. On the 16-GCD MI250 VM at
/// 1 GiB `auto`'s RCCL pick is a staggered schedule, at least 10 % faster
/// than the same schedule unstaggered and within 5 % of the fused
/// runtime's best.
#[test]
fn rccl_staggers_channels_that_run_in_step() {
    let t = rscc::front::import::import_file(
        Path::new("tests/data/real/rccl-xml/rccl_topo_16p1h_vm_MI250-gfx90a_16GCD_VM.xml"),
        &Default::default(),
    )
    .unwrap()
    .topology;
    let size = [1u64 << 30];
    let pick = |rt: Runtime| {
        let mut opts = rscc::compile::CompileOptions::default();
        opts.lower.runtime = rt;
        let sim = rscc::sim::SimOptions::for_runtime(rt);
        rscc::compile::auto(&t, &opts, &size, &sim, None).unwrap()
    };
    let sel = pick(Runtime::Rccl);
    let w = sel.winners[0];
    let name = &sel.candidates[w].algorithm.name;
    let plain = name
        .strip_suffix("-staggered")
        .unwrap_or_else(|| panic!("{name}"));
    let unstaggered = (0..sel.candidates.len())
        .filter(|&c| sel.candidates[c].algorithm.name == plain)
        .map(|c| sel.times_us[c][0])
        .fold(f64::INFINITY, f64::min);
    let rccl = sel.times_us[w][0];
    assert!(rccl * 1.1 <= unstaggered, "{rccl} against {unstaggered} us");
    let fused = pick(Runtime::Executor);
    let best = fused.times_us[fused.winners[0]][0];
    assert!(rccl <= 1.05 * best, "RCCL {rccl} against fused {best} us");
}
