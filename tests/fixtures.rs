//! The bad-input fixtures, each carrying what it must produce: every file
//! under tests/data/xml/bad/ ends with `<!-- expect: TEXT -->` comments
//! (after `</algo>`, where the runtime's reader allows comments), and every
//! topology under tests/data/topo/ has a `NAME.expect` file beside it with
//! `expect: TEXT` lines (JSON has no comments). One harness runs each file
//! through the CLI (`rscc verify` for MSCCL XML, `rscc topo show` for
//! topologies) and checks: exit code 2 (or the file's `expect-exit: N`),
//! nothing on stdout, no panic, one line on stderr that names the file and
//! contains every expected text. A fixture without an expectation fails.

use std::path::{Path, PathBuf};
use std::process::Command;

fn dir(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// The `expect:` texts and the exit code a fixture declares in `text`.
fn expectations(text: &str, open: &str, close: &str) -> (Vec<String>, i32) {
    let mut want = Vec::new();
    let mut exit = 2;
    for line in text.lines() {
        let Some(body) = line
            .trim()
            .strip_prefix(open)
            .and_then(|l| l.strip_suffix(close))
        else {
            continue;
        };
        let body = body.trim();
        if let Some(w) = body.strip_prefix("expect:") {
            want.push(w.trim().to_string());
        } else if let Some(c) = body.strip_prefix("expect-exit:") {
            exit = c.trim().parse().expect("expect-exit: N");
        }
    }
    (want, exit)
}

fn check(args: &[&str], path: &Path, want: &[String], exit: i32) {
    let name = path.display().to_string();
    assert!(!want.is_empty(), "{name}: the fixture declares no expect:");
    let out = Command::new(env!("CARGO_BIN_EXE_rscc"))
        .args(args)
        .arg(path)
        .output()
        .expect("run rscc");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(exit), "{name}: exit code; {stderr}");
    assert!(stdout.is_empty(), "{name}: nothing on stdout, got {stdout}");
    assert!(!stderr.contains("panicked"), "{name}: panic: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{name}: one line on stderr, got {stderr:?}");
    assert!(
        lines[0].starts_with(&format!("error: {name}: ")),
        "{name}: the line must name the file: {}",
        lines[0]
    );
    for w in want {
        assert!(
            lines[0].contains(w.as_str()),
            "{name}: expected {w:?} in {:?}",
            lines[0]
        );
    }
}

fn files(rel: &str, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir(rel))
        .expect("fixture directory")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    assert!(!v.is_empty(), "{rel} has no .{ext} fixtures");
    v
}

#[test]
fn bad_msccl_xml_files() {
    for path in files("tests/data/xml/bad", "xml") {
        let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
        let (want, exit) = expectations(&text, "<!--", "-->");
        check(&["verify"], &path, &want, exit);
    }
}

#[test]
fn bad_topology_files() {
    for path in files("tests/data/topo", "json") {
        let mut side = path.clone().into_os_string();
        side.push(".expect");
        let text = std::fs::read_to_string(&side)
            .unwrap_or_else(|_| panic!("{}: no .expect file beside it", path.display()));
        let (want, exit) = expectations(&text, "", "");
        check(&["topo", "show"], &path, &want, exit);
    }
}
