//! The topology JSON loader's error paths, through `rscc topo show`: every
//! bad file under tests/data/topo/ must end with exit code 2 and one line
//! on stderr that names the file and the reason — never a panic.

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

/// (file, substrings the one error line must contain besides the file name)
const CASES: &[(&str, &[&str])] = &[
    ("truncated.json", &["line 5, column", "EOF while parsing"]),
    (
        "wrong_type.json",
        &["line 4", "invalid type: string \"0\", expected i64"],
    ),
    (
        "wrong_type_bw.json",
        &["line 8", "invalid type: string \"fast\", expected f64"],
    ),
    (
        "unknown_field.json",
        &["line 8", "unknown field `bandwidth`"],
    ),
    (
        "unknown_node_kind.json",
        &["line 5", "unknown variant `tpu`"],
    ),
    ("missing_field.json", &["line 8", "missing field `kind`"]),
    (
        "unknown_node.json",
        &["links[1] (gpu1 -> gpu9): unknown node \"gpu9\""],
    ),
    (
        "duplicate_id.json",
        &["nodes[1]: duplicate node id \"gpu0\""],
    ),
    (
        "zero_bw.json",
        &["links[0] (gpu0 -> gpu1): bw_gbps must be positive, got 0"],
    ),
    ("negative_bw.json", &["bw_gbps must be positive, got -25"]),
    ("huge_bw.json", &["line 8", "number out of range"]),
    (
        "negative_alpha.json",
        &["alpha_us must be non-negative, got -0.5"],
    ),
    ("zero_count.json", &["count must be at least 1"]),
    ("self_link.json", &["links[1]: \"gpu1\" links to itself"]),
    (
        "rank_gap.json",
        &[
            "ranks must be 0..2 without gaps: rank 2 is missing",
            "\"gpu3\" with rank 3",
        ],
    ),
    ("rank_not_zero_based.json", &["rank 0 is missing"]),
    (
        "duplicate_rank.json",
        &["rank 0 is given to more than one gpu"],
    ),
    (
        "negative_rank.json",
        &["nodes[0] \"gpu0\": negative rank -1"],
    ),
    (
        "gpu_without_rank.json",
        &["nodes[1] \"gpu1\": a gpu needs a rank"],
    ),
    (
        "rank_on_switch.json",
        &["only gpu nodes have a rank (this one is a switch)"],
    ),
    ("no_gpus.json", &["the topology has no gpu nodes"]),
    (
        "unreachable.json",
        &["rank 2 (\"gpu2\") cannot be reached from rank 0 (\"gpu0\")"],
    ),
    (
        "one_way.json",
        &["rank 1 (\"gpu1\") cannot reach rank 0 (\"gpu0\")"],
    ),
    ("empty.json", &["the file is empty"]),
    ("not_json.json", &["unrecognised topology format"]),
    (
        "not_utf8.json",
        &["not UTF-8 text (invalid byte at offset 0)"],
    ),
];

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
fn every_bad_file_is_one_line_and_exit_2() {
    for (file, want) in CASES {
        check_error(&data(file), want);
    }
}

#[test]
fn every_file_in_the_data_directory_is_covered() {
    let mut files: Vec<String> = std::fs::read_dir(data(""))
        .expect("tests/data/topo exists")
        .map(|e| {
            e.expect("dir entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    files.sort();
    let mut listed: Vec<String> = CASES.iter().map(|(f, _)| f.to_string()).collect();
    listed.sort();
    assert_eq!(files, listed);
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
    let dir = std::env::temp_dir().join(format!("rscc-topo-errors-{}", std::process::id()));
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
