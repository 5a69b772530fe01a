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
    // Every ring chunk needs its own channel: more than 32 is refused up
    // front, not reported as a verifier deadlock.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rscc"))
        .args(["synth", "--topo", "topologies/ring8.json", "--algo", "ring"])
        .args(["--chunks", "40", "-o", "/dev/null"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("at most 32 channels") && !err.contains("deadlock]"),
        "{err}"
    );
}

/// Lowering's order rules out deadlock only with unbounded connection
/// buffers (docs/architecture.md "Lowering"): per-chunk trees that differ
/// between a shard's chunks, all squeezed onto channel 0, put two messages
/// of one step on one connection, and the ring of such threadblocks waits
/// for buffer room forever. The verifier (one-message FIFO) and the
/// simulator (two) must both say so — this is why `compile` verifies and
/// why `tree` gives every class its own channel.
#[test]
fn bounded_buffer_deadlock_is_caught_not_emitted() {
    use rscc::front::generate::{generate, GenParams};
    use rscc::ir::Spec;
    let topo = generate("ring", &GenParams::default()).unwrap();
    let mut a = rscc::synth::tree::tree_algorithm(Spec::reduce_scatter(8, 3), &topo).unwrap();
    a.check().unwrap();
    let fine = rscc::lower::lower(&a, &Default::default()).unwrap();
    rscc::verify::verify(&fine, &Default::default()).unwrap();
    for t in &mut a.transfers {
        t.channel = 0;
    }
    let p = rscc::lower::lower(&a, &Default::default()).unwrap();
    let e = rscc::verify::verify(&p, &Default::default()).unwrap_err();
    assert_eq!(e.rule, "deadlock", "{e:?}");
    let s = rscc::sim::simulate(&p, &topo, 1 << 16, &Default::default());
    assert!(matches!(s, Err(rscc::sim::SimError::Deadlock(_))), "{s:?}");
}

/// Every band file of a band directory, each read back and verified as
/// written: (minBytes, maxBytes, path), sorted. The fall-through files
/// (`{op}.k1-…`, `ar.k1.fused-…`, tests/algo_dir.rs) are verified too but
/// are not bands; those that serve every count together cover exactly the
/// bands whose files need a count divisor k > 1.
fn band_files(dir: &std::path::Path) -> Vec<(i64, Option<i64>, String)> {
    let mut bands = Vec::new();
    let mut falls = Vec::new();
    let mut divided = Vec::new();
    for e in std::fs::read_dir(dir).expect("the directory") {
        let path = e.expect("entry").path();
        let p = rscc::front::msccl_xml::load(&path).expect("reads back");
        rscc::verify::verify(&p, &Default::default())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let row = (p.min_bytes, p.max_bytes, path.display().to_string());
        if path.file_name().unwrap().to_string_lossy().contains(".k1") {
            if p.count_divisor() == 1 {
                falls.push(row);
            }
        } else {
            if p.count_divisor() > 1 {
                divided.push(row.clone());
            }
            bands.push(row);
        }
    }
    // Both sets are unions of intervals with endpoints among these
    // points: equal on the points and their neighbours, equal everywhere.
    let range = |r: &(i64, Option<i64>, String)| {
        let hi = match r.1 {
            None | Some(0) => i64::MAX,
            Some(m) => m,
        };
        (r.0, hi)
    };
    let covers = |set: &[(i64, Option<i64>, String)], x: i64| {
        set.iter().any(|r| {
            let (lo, hi) = range(r);
            lo <= x && x <= hi
        })
    };
    for r in divided.iter().chain(&falls) {
        let (lo, hi) = range(r);
        for x in [lo - 1, lo, hi, hi.saturating_add(1)] {
            assert_eq!(
                covers(&divided, x),
                covers(&falls, x),
                "at {x} B: bands needing k > 1 {divided:?}, fall-through files {falls:?}"
            );
        }
    }
    bands.sort();
    bands
}

/// `synth --sizes … -o DIR/` writes one verified file per size band with
/// non-overlapping, gap-free [minBytes, maxBytes], and its table scores each
/// size with the file that serves it (not the single overall choice).
#[test]
fn band_directory_files_cover_the_sizes_and_the_table_uses_them() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("rscc-bands");
    let _ = std::fs::remove_dir_all(&dir);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rscc"))
        .args([
            "synth",
            "--topo",
            "topologies/dgx1-v100.json",
            "--sizes",
            "1K:4G",
            "-o",
        ])
        .arg(format!("{}/", dir.display()))
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("write one file per band"), "{err}");
    let files = band_files(&dir);
    // The two-wave gap schedule serves DGX-1's smallest sizes.
    assert!(files[0].2.contains("rs-gap-"), "{files:?}");
    let bands: Vec<(i64, Option<i64>)> =
        files.into_iter().map(|(min, max, _)| (min, max)).collect();
    assert!(
        bands.len() >= 2,
        "DGX-1 has a small-size and a large-size band: {bands:?}"
    );
    assert_eq!(bands[0].0, 0);
    for w in bands.windows(2) {
        assert_eq!(w[0].1.map(|m| m + 1), Some(w[1].0), "{bands:?}");
    }
    assert_eq!(
        bands.last().unwrap().1,
        Some(0),
        "the last band is unbounded"
    );
    // At 1 KiB the small-size band's schedule beats the ring severalfold.
    let row = err
        .lines()
        .find(|l| l.split_whitespace().next() == Some("1024"))
        .expect("a 1 KiB row");
    let x_ring: f64 = row.split_whitespace().last().unwrap().parse().unwrap();
    assert!(x_ring > 2.0, "{row}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `tree`'s default is graded classes; on DGX-1 three weight groups need
/// 117 threadblocks per rank, more than a V100's 80 SMs, so with the
/// whole GPU the driver says so and takes two groups; within the default
/// budget (40, half the SMs) two groups do not fit either, and it takes
/// the equal classes.
#[test]
fn tree_falls_back_to_fewer_grades_within_the_sm_count() {
    let t = rscc::front::load_topology(std::path::Path::new("topologies/dgx1-v100.json"))
        .expect("shipped");
    let mut whole = CompileOptions::algo(Algo::Tree, None);
    whole.max_tbs = Some(80);
    let c = compile(&t, &whole).expect("compiles");
    assert_eq!(c.algorithm.name, "tree-graded2");
    assert!(c.program.max_tbs_per_rank() <= 80);
    assert_eq!(c.fallbacks.len(), 1, "{:?}", c.fallbacks);
    assert!(
        c.fallbacks[0].starts_with("tree-graded3: ")
            && c.fallbacks[0].contains("exceed the requested 80"),
        "{:?}",
        c.fallbacks
    );
    let c = compile(&t, &CompileOptions::algo(Algo::Tree, None)).expect("compiles");
    assert_eq!(c.algorithm.name, "tree");
    assert!(c.program.max_tbs_per_rank() <= 40);
    assert_eq!(c.fallbacks.len(), 2, "{:?}", c.fallbacks);
    assert!(
        c.fallbacks[1].starts_with("tree-graded2: ")
            && c.fallbacks[1].contains("half the GPU's 80 SMs (the default budget"),
        "{:?}",
        c.fallbacks
    );
}

/// On ring8 `auto` also scores `tree`'s pieced members, safe only up to
/// 32 MiB (their multi-chunk steps deadlock once MSCCL splits them). With
/// `-o DIR/` the small-size band is that schedule with maxBytes one byte
/// below the limit (so a legacy file's exclusive bound is the limit), the
/// next band starts at it, and every file verifies as written; the
/// single-file pick (`-o FILE`) is never size-limited.
#[test]
fn size_limited_small_message_schedule_gets_its_own_band() {
    let t =
        rscc::front::load_topology(std::path::Path::new("topologies/ring8.json")).expect("shipped");
    let small = rscc::compile::compile_small(&t, Algo::Tree, &CompileOptions::default())
        .expect("compiles")
        .expect("tree has a small-message candidate on ring8");
    assert_eq!(small.algorithm.name, "tree-pieced");
    assert_eq!(small.max_size, Some(32 << 20));
    assert_eq!(small.program.max_bytes, Some(32 << 20));
    let whole = compile(&t, &CompileOptions::default()).expect("compiles");
    assert_eq!(whole.max_size, None);

    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("rscc-limited");
    let _ = std::fs::remove_dir_all(&dir);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rscc"))
        .args(["synth", "--topo", "topologies/ring8.json", "-o"])
        .arg(format!("{}/", dir.display()))
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let bands = band_files(&dir);
    assert_eq!(bands[0].0, 0);
    assert!(bands[0].2.contains("rs-tree-"), "{bands:?}");
    assert_eq!(bands[0].1, Some((32 << 20) - 1), "{bands:?}");
    assert_eq!(bands[1].0, 32 << 20, "{bands:?}");
    assert_eq!(bands.last().unwrap().1, Some(0), "{bands:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Synthesis is deterministic: the same input and `--seed` give the same
/// schedule byte for byte (the LPs' solver seed is `--seed`, HiGHS's
/// `random_seed`); a seed HiGHS cannot take is refused up front.
#[test]
fn same_input_and_seed_give_the_same_schedule() {
    let load = |p: &str| rscc::front::load_topology(std::path::Path::new(p)).expect("loads");
    for (topo, algo) in [
        (load("topologies/dgx-h100x2.json"), Algo::Mix),
        // The flow LP has several optima there: each seed picks its own
        // (`rscc synth --algo flow --seed 0/1/12345` differ), always the same one.
        (load("topologies/dgx-h100x2.json"), Algo::Flow),
    ] {
        for seed in [0, 7] {
            let mut o = CompileOptions::algo(algo, None);
            o.synth.seed = seed;
            let a = compile(&topo, &o).expect("compiles");
            let b = compile(&topo, &o).expect("compiles");
            assert_eq!(
                rscc::back::msccl_xml::to_string(&a.program),
                rscc::back::msccl_xml::to_string(&b.program),
                "{} {:?} seed {seed}",
                topo.name,
                algo
            );
        }
    }
    let run = |seed: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_rscc"))
            .args(["synth", "--topo", "topologies/ring8.json", "--algo", "ring"])
            .args(["--seed", seed, "-o", "/dev/null"])
            .output()
            .expect("runs")
    };
    assert!(run("3").status.success());
    let bad = run("2147483648");
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--seed"));
}

/// `--algo gap` where it is not offered is a request error naming the
/// file and the reason; where it is, the same `--evals` and `--seed` give
/// the same file byte for byte, and `--evals 0` is refused.
#[test]
fn gap_refuses_with_a_reason_and_its_search_is_deterministic() {
    let gap = |topo: &str, extra: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_rscc"))
            .args(["synth", "--topo", topo, "--algo", "gap"])
            .args(extra)
            .output()
            .expect("runs")
    };
    let out = gap("topologies/ring8.json", &["-o", "/dev/null"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("topologies/ring8.json") && err.contains("more than two GPU-to-GPU links"),
        "{err}"
    );
    let dgx1 = "topologies/dgx1-v100.json";
    assert_eq!(gap(dgx1, &["--evals", "0"]).status.code(), Some(2));
    // A time limit too large for a deadline is refused, not a panic.
    let out = gap(dgx1, &["--time-limit", "1e20"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--time-limit"));
    let run = |seed: &str| {
        let out = gap(dgx1, &["--evals", "40", "--seed", seed]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    let a = run("5");
    assert!(String::from_utf8_lossy(&a).contains("<algo "));
    assert_eq!(a, run("5"));
}

/// `synth --json` prints the files written (each verified, with its
/// band), the per-size table and the notes as JSON on stdout; without
/// `-v` no "skipped" note reaches stderr, with it they do.
#[test]
fn synth_json_lists_the_files_and_the_table_and_v_adds_the_reasons() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("rscc-json");
    let _ = std::fs::remove_dir_all(&dir);
    let run = |extra: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_rscc"))
            .args(["synth", "--topo", "topologies/ring8.json", "-o"])
            .arg(format!("{}/", dir.display()))
            .args(extra)
            .output()
            .expect("runs")
    };
    let out = run(&["--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(v["ranks"], 8);
    let files = v["files"].as_array().unwrap();
    assert!(files.len() >= 2, "ring8 has a small-message band: {v}");
    for f in files {
        assert!(std::path::Path::new(f["path"].as_str().unwrap()).is_file());
        assert_eq!(f["verified"].as_array().unwrap().len(), 2, "{f}");
    }
    assert_eq!(files[0]["min_bytes"], 0);
    assert!(files.last().unwrap()["max_bytes"].is_null());
    assert_eq!(v["table"].as_array().unwrap().len(), 6);
    let quiet = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!quiet.contains("not scored"), "{quiet}");
    let verbose = run(&["-v"]);
    let err = String::from_utf8_lossy(&verbose.stderr);
    assert!(err.contains("note: sccl: not scored"), "{err}");
    assert!(
        !err.contains('\r'),
        "no progress line when stderr is not a terminal"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Where no ring fits the runtime's limits, `auto` chooses among the
/// other synthesizers instead of refusing the request: on 2 × DGX-A100
/// with 64 chunks per shard a ring needs a channel per chunk, where MSCCL
/// has 32, and `hier` fits. Where nothing fits, the refusal lists every
/// synthesizer's reason (exit 2).
#[test]
fn auto_chooses_without_a_ring_and_refuses_only_when_nothing_fits() {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("rscc-no-ring");
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let topo = d.join("a2.json");
    let (code, _, err) = common::rscc(&[
        "topo",
        "generate",
        "dgx-a100",
        "--hosts",
        "2",
        "-o",
        topo.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let t = topo.to_str().unwrap();
    let ring = ["synth", "--topo", t, "--chunks", "64"];
    let out = d.join("ring.xml");
    let (code, _, err) =
        common::rscc(&[&ring[..], &["--algo", "ring", "-o", out.to_str().unwrap()]].concat());
    assert_eq!(code, 2, "the ring must not fit: {err}");
    let dir = format!("{}/", d.join("auto").display());
    let (code, out, err) = common::rscc(&[&ring[..], &["-o", &dir, "-v"]].concat());
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("--algo ring --chunks 64"), "{err}");
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(!files.is_empty());
    for f in &files {
        let p = rscc::front::msccl_xml::load(f).unwrap();
        assert!(!p.name.contains("ring"), "{}", p.name);
        let (code, _, err) = common::rscc(&["verify", f.to_str().unwrap(), "--topo", t]);
        assert_eq!(code, 0, "{}: {err}", f.display());
    }
    // The × ring column is empty: there is no ring to compare with.
    let table = format!("{out}{err}");
    assert!(
        table.lines().any(|l| l.trim_end().ends_with(" -")),
        "{table}"
    );
    let (code, _, err) = common::rscc(&[&ring[..], &["--max-tbs", "1", "-o", &dir]].concat());
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("no synthesizer has a schedule for every size")
            && err.contains("--algo ring --chunks 64")
            && err.contains("hier:"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&d);
}
