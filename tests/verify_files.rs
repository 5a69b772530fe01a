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
