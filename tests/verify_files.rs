//! `rscc verify` on hand-written files in other tools' style (msccl-tools
//! all-pairs with scratch, nop chains and fused `re` runs; legacy rings):
//! valid ones exit 0, the broken one exits 1 naming the rule, an unreadable
//! one exits 2.

use std::process::Command;

fn verify(path: &str) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rscc"))
        .args(["verify", path])
        .output()
        .expect("runs");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn other_tools_files_verify() {
    for f in [
        "tests/data/xml/allpairs_rs_4_8mib.xml",
        "tests/data/xml/legacy_ring_rs_4.xml",
        "tests/data/xml/lenient.xml",
        "tests/data/xml/ring_rs_8.xml",
        "tests/data/exec/allpairs_4.xml",
        "tests/data/exec/ring_scratch_3.xml",
    ] {
        let (code, text) = verify(f);
        assert_eq!(code, 0, "{f}: {text}");
        assert!(text.contains("valid reduce-scatter"), "{f}: {text}");
    }
}

/// msccl-tools' all-pairs moves four chunks per step and sends before it
/// receives on each pair. MSCCL runs such a step as one message only while
/// the four chunks fit one 2 MiB Simple tile; above that it is four
/// messages, both ends fill their two-slot FIFOs and wait for each other.
/// Unbounded (`maxBytes="0"`) the file is a deadlock, and the error says
/// which `maxBytes` makes it safe; with that bound it verifies (above).
#[test]
fn multi_chunk_steps_deadlock_once_split_unless_maxbytes_keeps_them_whole() {
    let (code, text) = verify("tests/data/xml/allpairs_rs_4.xml");
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("[deadlock]"), "{text}");
    assert!(text.contains("maxBytes ≤ 8388608"), "{text}");
}

#[test]
fn broken_file_is_rejected_with_rules() {
    let (code, text) = verify("tests/data/exec/broken_ring_4.xml");
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("[pairing]"), "{text}");
}

#[test]
fn unreadable_file_exits_2() {
    let (code, text) = verify("tests/data/xml/bad/tab.xml");
    assert_eq!(code, 2, "{text}");
    let (code, _) = verify("tests/data/does-not-exist.xml");
    assert_eq!(code, 2);
}

#[test]
fn rank_count_must_match_the_topology() {
    let out = Command::new(env!("CARGO_BIN_EXE_rscc"))
        .args([
            "verify",
            "tests/data/xml/allpairs_rs_4.xml",
            "--topo",
            "topologies/dgx-h100.json",
        ])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ngpus"));
}

/// A ring that reduces into the input buffer (as msccl-tools' out-of-place
/// ring and SCCL's ncclized files do): each broken rule is reported once
/// with its count and where else it broke, and the verdict says the file
/// is otherwise correct if the input buffer may be overwritten. The same
/// file with a wrong result says it is still wrong.
#[test]
fn input_writers_get_one_line_per_rule_and_a_conditional_verdict() {
    let f = "tests/data/xml/ring_inputwrite_4.xml";
    let (code, text) = verify(f);
    assert_eq!(code, 1, "{text}");
    assert_eq!(text.matches(": [input-write]").count(), 2, "{text}");
    assert!(text.contains("broken 8 times in all"), "{text}");
    assert!(text.contains("and 5 more"), "{text}");
    assert!(
        text.contains("otherwise correct (out-of-place) if the input buffer may be overwritten"),
        "{text}"
    );
    assert!(text.contains("1 rule(s) broken (8 errors)"), "{text}");
    let out = Command::new(env!("CARGO_BIN_EXE_rscc"))
        .args(["verify", f, "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["valid"], false);
    assert_eq!(v["correct_if_input_writable"], true);
    assert_eq!(v["rules"][0]["rule"], "input-write");
    assert_eq!(v["rules"][0]["count"], 8);
    assert_eq!(v["errors"][0]["at"]["line"], 6);
    assert_eq!(v["errors"].as_array().unwrap().len(), 8);
    // Rank 3 ends with its own chunk 2 instead of 3: wrong either way.
    let text = std::fs::read_to_string(f).unwrap();
    let last = r#"<step s="5" type="rrc" srcbuf="i" srcoff="3" dstbuf="o""#;
    assert!(text.contains(last));
    let wrong = text.replace(
        last,
        r#"<step s="5" type="rrc" srcbuf="i" srcoff="2" dstbuf="o""#,
    );
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("rscc-inputwrite");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("wrong.xml");
    std::fs::write(&p, wrong).unwrap();
    let (code, text) = verify(p.to_str().unwrap());
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("with the input buffer writable it is still wrong"),
        "{text}"
    );
    assert!(!text.contains("otherwise correct"), "{text}");
}

/// A legacy-dialect file is judged as such, with a line saying which
/// runtime accepts it; `--runtime` judges for one runtime's rules.
#[test]
fn each_runtime_gets_its_own_verdict() {
    let legacy = "tests/data/xml/legacy_ring_rs_4.xml";
    let (code, text) = verify(legacy);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("runtimes: executor: rejects it ([runtime]); legacy: its rules hold"),
        "{text}"
    );
    let run = |f: &str, rt: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_rscc"))
            .args(["verify", f, "--runtime", rt])
            .output()
            .expect("runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(legacy, "executor");
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("[runtime] coll=\"reduce_scatter\""), "{err}");
    assert_eq!(run(legacy, "legacy").0, Some(0));
    // An executor file with maxBytes 0: never selected by legacy.
    let (code, err) = run("tests/data/xml/ring_rs_8.xml", "legacy");
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("[bytes-window] maxBytes 0"), "{err}");
}

/// Valid but huge counts cost bounded time and memory: 2·10⁹ scratch
/// chunks per rank (no offset reaches past 32 837, so the verifier keeps
/// state for no more) verify as fast as the file they came from, and an
/// nchunksperloop beyond what int16 offsets and `cnt` can reach is refused
/// for its geometry (fuzz/regressions/: both made the verifier allocate
/// gigabytes, the first aborting).
#[test]
fn huge_counts_are_bounded() {
    let started = std::time::Instant::now();
    let (code, text) = verify("fuzz/regressions/verify/scratch-2e9-chunks");
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("valid reduce-scatter"), "{text}");
    let (code, text) = verify("fuzz/regressions/run/nchunksperloop-9644444");
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("[geometry]") && text.contains("nchunksperloop 9644444 is above 32838"),
        "{text}"
    );
    assert!(started.elapsed().as_secs() < 30, "{:?}", started.elapsed());
}
