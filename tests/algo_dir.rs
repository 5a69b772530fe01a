//! `rscc verify DIR/`: the runtime's per-call selection over a directory
//! (msccl-selection.md §2, §5): which file serves each call of the sweep,
//! where the runtime falls back, shadowed files, and entries that would
//! break the runtime.

mod common;

use common::rscc;

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("rscc-dir-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// schedules/ keeps one folder per machine: as MSCCL_ALGO_DIR the whole
/// folder loads nothing (the runtime reads no subfolders), one machine's
/// folder only that machine's files. Copied flat into one directory, the
/// alphabetically first 8-rank file would serve every 8-rank call (the
/// reference's shadowing finding) and the others be shadowed.
#[test]
fn one_folder_per_machine_and_why() {
    let (code, out, err) = rscc(&["verify", "schedules/"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("dgx-h100/: a directory"), "{out}");
    assert!(!out.contains("calls served"), "{out}");
    let (code, out, err) = rscc(&["verify", "schedules/dgx-h100/"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("8 ranks, reduce-scatter: 236 of 236 calls served"),
        "{out}"
    );
    let d = tmp("flat");
    for e in std::fs::read_dir("schedules").unwrap() {
        let m = e.unwrap().path();
        for op in ["rs", "ag", "ar"] {
            let f = m.join(format!("{op}.xml"));
            if f.exists() {
                let name = format!("{}-{op}.xml", m.file_name().unwrap().to_string_lossy());
                std::fs::copy(&f, d.join(name)).unwrap();
            }
        }
    }
    let dir = format!("{}/", d.display());
    let (code, out, err) = rscc(&["verify", &dir]);
    assert_eq!(code, 0, "{err}");
    let rs8 = out
        .split(" (executor runtime), ")
        .find(|g| g.starts_with("8 ranks, reduce-scatter"))
        .expect("an 8-rank reduce-scatter group");
    assert!(rs8.contains("236 of 236 calls served"), "{rs8}");
    let line = |f: &str| {
        rs8.lines()
            .find(|l| l.trim_start().starts_with(f))
            .unwrap()
            .to_string()
    };
    assert!(line("cpu-shm-rs.xml").contains("236 calls"), "{rs8}");
    assert!(line("dgx-h100-rs.xml").contains("shadowed"), "{rs8}");
    let _ = std::fs::remove_dir_all(&d);
}

/// ring8's band files need recvcounts that are multiples of 20 (tree,
/// below 32 MiB) or of 2 (pack): `-o DIR/` also writes a one-chunk-per-
/// shard file per such band, sorting after it, so every call of the sweep
/// gets an rscc schedule; without those files most calls fall back, and
/// `--json` says which.
#[test]
fn fall_through_files_serve_the_counts_the_bands_reject() {
    let d = tmp("ring8");
    let dir = format!("{}/", d.display());
    let (code, _, err) = rscc(&["synth", "--topo", "topologies/ring8.json", "-o", &dir]);
    assert_eq!(code, 0, "{err}");
    let group = |dir: &str| -> serde_json::Value {
        let (code, out, err) = rscc(&["verify", dir, "--json"]);
        assert_eq!(code, 0, "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v["groups"][0].clone()
    };
    let g = group(&dir);
    assert_eq!(g["ranks"], 8);
    assert_eq!(g["served"], g["calls"], "{g}");
    // The bands' own files still take the calls they serve.
    let per = g["per_file"].as_array().unwrap();
    let calls_of = |prefix: &str| -> u64 {
        per.iter()
            .filter(|f| f[0].as_str().unwrap().starts_with(prefix))
            .map(|f| f[1].as_u64().unwrap())
            .sum()
    };
    assert!(calls_of("rs-") > 0 && calls_of("rs.k1-") > 0, "{per:?}");
    // Each fall-through file has one chunk per shard.
    for e in std::fs::read_dir(&d).unwrap() {
        let p = e.unwrap().path();
        if p.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("rs.k1-")
        {
            let prog = rscc::front::msccl_xml::load(&p).unwrap();
            assert_eq!(prog.nchunksperloop, prog.ngpus);
            std::fs::remove_file(&p).unwrap();
        }
    }
    let g = group(&dir);
    let (calls, served) = (g["calls"].as_u64().unwrap(), g["served"].as_u64().unwrap());
    assert!(served < calls / 2, "{served} of {calls}");
    let fb = g["fallbacks"].as_array().unwrap();
    // An odd count is never served (k = 2 and k = 20).
    assert!(fb.iter().any(|c| c["count"] == 12345));
    // A count of 2^20 fp32 (S = 32 MiB) is: the pack band.
    assert!(!fb
        .iter()
        .any(|c| c["count"] == 1 << 20 && c["dtype"] == "float"));
    let _ = std::fs::remove_dir_all(&d);
}

/// A non-XML entry, a file of the other dialect and (for RCCL) fused steps
/// are hazards: named, and exit 1. A legacy "directory" is a request error.
#[test]
fn entries_that_break_the_runtime_are_named() {
    let d = tmp("hazards");
    std::fs::write(d.join("README"), "notes\n").unwrap();
    std::fs::copy("schedules/dgx-h100/rs.xml", d.join("rs.xml")).unwrap();
    let dir = format!("{}/", d.display());
    let (code, _, err) = rscc(&["verify", &dir]);
    assert_eq!(code, 1);
    assert!(err.contains("README: not an MSCCL XML file"), "{err}");
    let (code, _, err) = rscc(&["verify", &dir, "--runtime", "rccl"]);
    assert_eq!(code, 1);
    assert!(err.contains("rs.xml: has \"rrc\" steps"), "{err}");
    std::fs::remove_file(d.join("README")).unwrap();
    let (code, out, err) = rscc(&["verify", &dir]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("236 of 236 calls served"), "{out}");
    let (code, _, err) = rscc(&["verify", &dir, "--runtime", "legacy"]);
    assert_eq!(code, 2);
    assert!(err.contains("MSCCL_XML_FILES"), "{err}");
    let (code, _, err) = rscc(&["verify", &dir, "--topo", "topologies/dgx-h100.json"]);
    assert_eq!(code, 2);
    assert!(err.contains("--topo applies to one file"), "{err}");
    // The AMD machine's own directory is clean for RCCL.
    let a = tmp("amd");
    let adir = format!("{}/", a.display());
    let (code, _, err) = rscc(&["synth", "--topo", "topologies/mi300x.json", "-o", &adir]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = rscc(&["verify", &adir, "--runtime", "rccl"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("(rccl runtime), 8 ranks, reduce-scatter"),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&d);
    let _ = std::fs::remove_dir_all(&a);
}

/// `synth -o DIR/` into a directory that holds another machine's files
/// says so: a same-named file it replaced, and files that the runtime
/// tries before the ones it wrote.
#[test]
fn writing_beside_another_machine_is_reported() {
    let d = tmp("mixed");
    let dir = format!("{}/", d.display());
    let synth = |t: &str| rscc(&["synth", "--topo", t, "--sizes", "1K,1M", "-o", &dir]);
    let (code, _, err) = synth("topologies/dgx-h100.json");
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("note: "), "{err}");
    // Same band names: the second machine's file replaces the first's.
    let (code, _, err) = synth("topologies/cpu-shm.json");
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(
            "replaced a file written for another schedule or machine (rscc_direct_dgx-h100_8)"
        ),
        "{err}"
    );
    // Other names: the earlier machine's file shadows the new ones.
    let (code, _, err) = synth("topologies/ring8.json");
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("the runtime tries rs-direct-0-inf.xml first"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// An SM budget: by default `synth` keeps every file within half the
/// SMs (the search scores within it), `--max-tbs N` sets another budget,
/// `verify --topo` says what share of the SMs a file needs resident at
/// once and warns above half, and a budget of 0 is a request error.
#[test]
fn threadblock_budget_and_sm_share() {
    let d = tmp("budget");
    let dir = format!("{}/", d.display());
    let (code, _, err) = rscc(&[
        "synth",
        "--topo",
        "topologies/dgx1-v100.json",
        "--sizes",
        "1K,64K,1G",
        "-o",
        &dir,
    ]);
    assert_eq!(code, 0, "{err}");
    for e in std::fs::read_dir(&d).unwrap() {
        let p = rscc::front::msccl_xml::load(&e.unwrap().path()).unwrap();
        assert!(
            p.max_tbs_per_rank() <= 40,
            "{}: {}",
            p.name,
            p.max_tbs_per_rank()
        );
    }
    // The gap search on the whole GPU takes more than half of it.
    let file = d.join("gap-80.xml");
    let f = file.to_str().unwrap();
    let (code, _, err) = rscc(&[
        "synth",
        "--topo",
        "topologies/dgx1-v100.json",
        "--algo",
        "gap",
        "--max-tbs",
        "80",
        "-o",
        f,
    ]);
    assert_eq!(code, 0, "{err}");
    let p = rscc::front::msccl_xml::load(&file).unwrap();
    let tbs = p.max_tbs_per_rank();
    assert!((41..=80).contains(&tbs), "{tbs}");
    let (code, out, err) = rscc(&["verify", f, "--topo", "topologies/dgx1-v100.json"]);
    assert_eq!(code, 0, "{err}");
    let share = format!(
        "needs {tbs} threadblocks per rank resident at once, {:.0} % of the GPU's 80 SMs (more than half",
        100.0 * tbs as f64 / 80.0
    );
    assert!(out.contains(&share), "{out}");
    // The default for the same request stays within half.
    let (code, _, err) = rscc(&[
        "synth",
        "--topo",
        "topologies/dgx1-v100.json",
        "--algo",
        "gap",
        "-o",
        f,
    ]);
    assert_eq!(code, 0, "{err}");
    let p = rscc::front::msccl_xml::load(&file).unwrap();
    assert!(p.max_tbs_per_rank() <= 40, "{}", p.max_tbs_per_rank());
    let (code, _, err) = rscc(&[
        "synth",
        "--topo",
        "topologies/dgx1-v100.json",
        "--max-tbs",
        "0",
        "-o",
        &dir,
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("--max-tbs must be at least 1"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

/// An allreduce file serves only counts that are multiples of its
/// nchunksperloop (sizeMultiplier is 1), and a composed allreduce has at
/// least ngpus chunks. `-o DIR/` also writes fused allreduces of one chunk
/// (`ar.k1.fused-*`, one pass up and one down a tree) where they are no
/// slower than the ring, so the counts 1 to 7 and the odd counts of small
/// calls get an rscc schedule — on shipped machines and a generated fabric
/// — and those files run correct at such counts, in place and out of
/// place; what is left to the runtime, `synth` says.
#[test]
fn fused_allreduces_serve_every_count() {
    let fab = tmp("fused-topology");
    let fab_topo = common::random_fabric(&fab, 5);
    for (name, topo) in [
        ("dgx-h100", "topologies/dgx-h100.json".to_string()),
        ("dgx1-v100", "topologies/dgx1-v100.json".to_string()),
        ("fabric", fab_topo.display().to_string()),
    ] {
        let d = tmp(&format!("fused-{name}"));
        let dir = format!("{}/", d.display());
        let (code, _, synth_err) =
            rscc(&["synth", "--topo", &topo, "--op", "allreduce", "-o", &dir]);
        assert_eq!(code, 0, "{name}: {synth_err}");
        let group = || -> serde_json::Value {
            let (code, out, err) = rscc(&["verify", &dir, "--json"]);
            assert_eq!(code, 0, "{err}");
            let v: serde_json::Value = serde_json::from_str(&out).unwrap();
            v["groups"][0].clone()
        };
        let g = group();
        assert_eq!(g["op"], "allreduce");
        let fb = g["fallbacks"].as_array().unwrap();
        // Every call up to 64 KiB is served; larger odd counts may be
        // left to the runtime, and then synth said so.
        for c in fb {
            assert!(c["bytes"].as_u64().unwrap() > 65536, "{name}: {c}");
        }
        if !fb.is_empty() {
            assert!(
                synth_err.contains("are left to the runtime's own allreduce"),
                "{synth_err}"
            );
        }
        if name == "dgx1-v100" {
            // Its bands need counts that are multiples of 48 or 144, which
            // no power of two is: those with a multiple of 8 get the
            // one-chunk-per-shard tier, composed, before the fused one.
            let per = g["per_file"].as_array().unwrap();
            let calls = |prefix: &str| -> u64 {
                per.iter()
                    .filter(|f| f[0].as_str().unwrap().starts_with(prefix))
                    .map(|f| f[1].as_u64().unwrap())
                    .sum()
            };
            assert!(calls("ar.k1-") > 0 && calls("ar.k1.fused-") > 0, "{per:?}");
        }
        let mut fused = Vec::new();
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let file = p.file_name().unwrap().to_string_lossy().to_string();
            let prog = rscc::front::msccl_xml::load(&p).unwrap();
            if file.starts_with("ar.k1.fused-") {
                assert_eq!(prog.nchunksperloop, 1, "{file}");
                fused.push(p);
            } else if file.starts_with("ar.k1-") {
                // One chunk per shard: the multiples of ngpus.
                assert_eq!(prog.nchunksperloop, prog.ngpus, "{file}");
            } else {
                assert!(prog.nchunksperloop >= prog.ngpus, "{file}");
            }
        }
        assert!(!fused.is_empty(), "{name}: no fused fall-through file");
        for p in &fused {
            let f = p.to_str().unwrap();
            // Counts 1, 3 and 1001 floats.
            for mode in [&[][..], &["--inplace"][..]] {
                let mut args = vec!["run", f, "--sizes", "4,12,4004", "--check"];
                args.extend_from_slice(mode);
                let (code, out, err) = rscc(&args);
                assert_eq!(code, 0, "{f} {mode:?}: {out}{err}");
                assert!(!err.contains("would not select"), "{err}");
            }
        }
        // Without them the odd counts run plain NCCL.
        for p in &fused {
            std::fs::remove_file(p).unwrap();
        }
        let g = group();
        let fb = g["fallbacks"].as_array().unwrap();
        assert!(fb.iter().any(|c| c["count"] == 3), "{g}");
        assert!(fb.iter().any(|c| c["count"] == 999), "{g}");
        let _ = std::fs::remove_dir_all(&d);
    }
    let _ = std::fs::remove_dir_all(&fab);
}
