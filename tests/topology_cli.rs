//! `rscc topo generate` and `rscc topo show` through the binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn rscc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rscc"))
        .args(args)
        .output()
        .expect("run rscc")
}

fn shipped(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("topologies")
        .join(file)
}

fn tmp(name: &str) -> PathBuf {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("rscc-topo-cli");
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

#[test]
fn generate_to_stdout_matches_the_shipped_file() {
    let out = rscc(&["topo", "generate", "dgx-h100", "--hosts", "2"]);
    assert_eq!(out.status.code(), Some(0));
    let want = std::fs::read(shipped("dgx-h100x2.json")).unwrap();
    assert!(
        out.stdout == want,
        "stdout differs from topologies/dgx-h100x2.json"
    );
}

#[test]
fn generate_to_file_then_show() {
    let p = tmp("ring16.json");
    let ps = p.to_str().unwrap();
    let out = rscc(&[
        "topo", "generate", "ring", "--gpus", "16", "--bw", "50", "--alpha", "0.5", "-o", ps,
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    let out = rscc(&["topo", "show", ps]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("topology ring16"), "{text}");
    assert!(text.contains("16 GPUs, 1 host"), "{text}");
    // 16 GPUs: still a matrix; rank 0 reaches 1 and 15 over one 50 GB/s link.
    assert!(text.contains("1x50"), "{text}");
    let out = rscc(&["topo", "show", ps, "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["gpus"], 16);
    assert_eq!(v["ranks"][5]["egress_gbps"], 100.0);
    assert_eq!(v["ranks"][5]["by_kind"]["nvlink"]["ingress_gbps"], 100.0);
    let direct = v["direct"].as_array().unwrap();
    assert_eq!(direct.len(), 32);
    assert!(direct
        .iter()
        .any(|d| d["from"] == 0 && d["to"] == 15 && d["capacity_gbps"] == 50.0));
    let _ = std::fs::remove_file(&p);
}

#[test]
fn show_json_of_a_multi_host_file() {
    let out = rscc(&[
        "topo",
        "show",
        shipped("dgx-a100x4.json").to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["hosts"], 4);
    assert_eq!(v["gpus"], 32);
    assert_eq!(v["nics"], 32);
    assert_eq!(v["ranks"][31]["host"], "h3");
    assert_eq!(v["ranks"][31]["sms"], 108);
    let rail0 = v["attachments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == "rail0")
        .unwrap();
    assert_eq!(rail0["groups"][0]["peers"].as_array().unwrap().len(), 4);
    assert_eq!(rail0["groups"][0]["bw_gbps"], 25.0);
}

#[test]
fn bad_generate_arguments_exit_2_with_one_line() {
    let cases: &[&[&str]] = &[
        &["topo", "generate", "ring", "--gpus", "1"],
        &["topo", "generate", "ring", "--bw", "0"],
        &["topo", "generate", "ring", "--bw", "-3"],
        &["topo", "generate", "ring", "--alpha", "NaN"],
        &["topo", "generate", "ring", "--hosts", "2"],
        &["topo", "generate", "dgx1-v100", "--gpus", "16"],
        &["topo", "generate", "dgx-a100", "--hosts", "0"],
        &["topo", "generate", "dgx-a100", "--hosts", "100000"],
        &["topo", "generate", "fully-connected", "--gpus", "100000"],
    ];
    for args in cases {
        let out = rscc(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    // clap's own errors (unknown kind, non-numeric value) are exit 2 too.
    for args in [
        &["topo", "generate", "torus"][..],
        &["topo", "generate", "ring", "--gpus", "many"][..],
    ] {
        let out = rscc(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}

#[test]
fn unwritable_output_is_exit_2() {
    let out = rscc(&[
        "topo",
        "generate",
        "ring",
        "-o",
        "/nonexistent-dir/x/ring.json",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/nonexistent-dir/x/ring.json: cannot write"),
        "{err}"
    );
}

/// Output into a pipe that closes early (`rscc topo show … | head`) ends
/// the process quietly, by SIGPIPE as other tools do, not with a panic.
#[cfg(unix)]
#[test]
fn a_closed_pipe_ends_the_output_without_a_panic() {
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    let t = tmp("pipe.json");
    let gen = rscc(&[
        "topo",
        "generate",
        "dgx-h100",
        "--hosts",
        "64",
        "-o",
        t.to_str().unwrap(),
    ]);
    assert!(
        gen.status.success(),
        "{}",
        String::from_utf8_lossy(&gen.stderr)
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_rscc"))
        .args(["topo", "show", t.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run rscc");
    // The table is far larger than a pipe's buffer: read one line, close.
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("topology"), "{first}");
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.signal(), Some(13), "{:?} {err}", out.status);
}
