//! The topology JSON loader's error paths beyond the fixtures (which
//! tests/fixtures.rs runs): a missing file, a directory, and a good file
//! of the same shape as a bad one.

use std::path::{Path, PathBuf};
use std::process::Command;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/topo")
        .join(name)
}

/// Run `rscc topo show FILE` and return (exit code, stdout, stderr).
fn show(path: &Path) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rscc"))
        .args(["topo", "show"])
        .arg(path)
        .output()
        .expect("run rscc");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn check_error(path: &Path, want: &[&str]) {
    let (code, stdout, stderr) = show(path);
    let name = path.display().to_string();
    assert_eq!(code, Some(2), "{name}: exit code; stderr: {stderr}");
    assert!(stdout.is_empty(), "{name}: nothing on stdout, got {stdout}");
    assert!(!stderr.contains("panicked"), "{name}: panic: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{name}: one line on stderr, got {stderr:?}");
    let line = lines[0];
    assert!(
        line.starts_with(&format!("error: {name}: ")),
        "{name}: the line must name the file: {line}"
    );
    for w in want {
        assert!(line.contains(w), "{name}: expected {w:?} in {line:?}");
    }
}

#[test]
fn missing_file_and_directory() {
    check_error(&data("no_such_file.json"), &["No such file"]);
    let (code, _, stderr) = show(&data(""));
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[test]
fn a_good_file_still_loads() {
    // The same shape as one_way.json with the link made duplex: exit 0.
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("rscc-topo-errors");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("ok.json");
    std::fs::write(
        &p,
        r#"{"name": "ok", "nodes": [{"id": "gpu0", "kind": "gpu", "rank": 0}, {"id": "gpu1", "kind": "gpu", "rank": 1}],
           "links": [{"from": "gpu0", "to": "gpu1", "bw_gbps": 25, "alpha_us": 1, "kind": "nvlink"}]}"#,
    )
    .unwrap();
    let (code, stdout, stderr) = show(&p);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("topology ok"), "{stdout}");
    assert!(stdout.contains("1x25"), "{stdout}");
}
