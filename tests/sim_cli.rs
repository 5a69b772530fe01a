//! `rscc simulate` rendering and errors, through the library, plus the
//! exit code of an unreadable file.

mod common;

use rscc::cli::simulate::{report, table};
use rscc::sim::{self, programs, SimOptions};
use std::process::Command;

#[test]
fn json_rows_have_the_documented_keys() {
    let topo = common::ring(8);
    let p = programs::ring_reduce_scatter(8).unwrap();
    let sizes = rscc::cli::sizes::parse_sizes("1K:1M:4").unwrap();
    let out = report(&p, &topo, &sizes, &SimOptions::default(), true, None).unwrap();
    let v: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(v.len(), sizes.len());
    for (row, &s) in v.iter().zip(&sizes) {
        assert_eq!(row["size_bytes"], s);
        for k in [
            "time_us",
            "algbw_gbps",
            "busbw_gbps",
            "bound_us",
            "bound_ratio",
        ] {
            assert!(row[k].as_f64().is_some(), "{k} in {row}");
        }
        let r = row["bound_ratio"].as_f64().unwrap();
        assert!(r > 0.0 && r <= 1.0, "{r}");
    }
}

#[test]
fn table_has_nccl_tests_columns_and_trace_is_written() {
    let topo = common::ring(8);
    let p = programs::ring_reduce_scatter(8).unwrap();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("rscc-sim-cli");
    std::fs::create_dir_all(&dir).unwrap();
    let tr = dir.join("t.json");
    let out = report(
        &p,
        &topo,
        &[1 << 20, 1 << 22],
        &SimOptions::default(),
        false,
        Some(&tr),
    )
    .unwrap();
    for col in [
        "size",
        "count",
        "type",
        "time",
        "algbw",
        "busbw",
        "bound",
        "bound/time",
        "float",
    ] {
        assert!(out.contains(col), "{col} missing:\n{out}");
    }
    assert!(out.contains("4194304"), "{out}");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&tr).unwrap()).unwrap();
    let evs = doc["traceEvents"].as_array().unwrap();
    // One slice per step execution and a counter track per used link.
    let slices = evs.iter().filter(|e| e["ph"] == "X").count();
    assert_eq!(slices, 8 * 8);
    assert!(evs
        .iter()
        .any(|e| e["ph"] == "C" && e["name"] == "gpu0 -> gpu1"));
    let rows = sim::busbw_table(&p, &topo, &[1 << 20], &SimOptions::default()).unwrap();
    assert!(table(&p, &topo, &rows, &SimOptions::default()).contains("tile 2097152 B"));
}

#[test]
fn rank_mismatch_is_exit_2() {
    let topo = common::ring(8);
    let p = programs::ring_reduce_scatter(4).unwrap();
    let e = report(&p, &topo, &[1024], &SimOptions::default(), false, None).unwrap_err();
    assert_eq!(e.code, 2);
    assert!(
        e.msg.contains("4 GPUs") && e.msg.contains("8 ranks"),
        "{}",
        e.msg
    );
}

#[test]
fn unreadable_inputs_exit_2() {
    let o = Command::new(env!("CARGO_BIN_EXE_rscc"))
        .args([
            "simulate",
            "/nonexistent/a.xml",
            "--topo",
            "/nonexistent/t.json",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let o = Command::new(env!("CARGO_BIN_EXE_rscc"))
        .args(["simulate", "a.xml", "--topo", "t.json", "--sizes", "2K:1K"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--sizes"));
}

#[test]
fn ring_baseline_matches_the_ring_program() {
    let topo = common::ring(8);
    let opts = SimOptions::default();
    let base = sim::report::ring_baseline(&topo, &[1 << 24], &opts)
        .unwrap()
        .unwrap();
    let p = programs::ring_reduce_scatter(8).unwrap();
    let direct = sim::busbw_table(&p, &topo, &[1 << 24], &opts).unwrap();
    assert_eq!(base, direct);
}

/// A size outside the file's [minBytes, maxBytes] window is still
/// simulated, with a note naming the window: ring8's small-message band
/// (maxBytes 32 MiB) at 64 MiB, where MSCCL would not use it. The runtime's
/// window rules (`Program::serves`): executor inclusive with 0 = no limit,
/// legacy exclusive with a 128 MiB default.
#[test]
fn sizes_outside_the_window_get_a_note() {
    let o = Command::new(env!("CARGO_BIN_EXE_rscc"))
        .args(["simulate", "schedules/ring8/extra/small-rs.xml"])
        .args(["--topo", "topologies/ring8.json", "--sizes", "1M,64M"])
        .output()
        .unwrap();
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("67108864 B is outside the file's window")
            && err.contains("maxBytes 33554432")
            && !err.contains("1048576 B"),
        "{err}"
    );
    let mut p =
        rscc::front::msccl_xml::load(std::path::Path::new("schedules/ring8/extra/small-rs.xml"))
            .unwrap();
    assert!(p.serves(32 << 20) && !p.serves((32 << 20) + 1));
    p.max_bytes = Some(0);
    assert!(p.serves(1 << 40));
    p.runtime = rscc::ir::Runtime::Legacy;
    p.max_bytes = Some(32 << 20);
    assert!(p.serves((32 << 20) - 1) && !p.serves(32 << 20));
    p.max_bytes = None;
    assert!(p.serves((128 << 20) - 1) && !p.serves(128 << 20));
    p.min_bytes = 4096;
    assert!(!p.serves(4095));
}

/// A file that breaks the runtime's rules (here its geometry: i_chunks no
/// longer match nchunksperloop) is still simulated as written, with a
/// warning naming the broken rule; a valid file gets none.
#[test]
fn a_file_that_breaks_a_rule_is_simulated_with_a_warning() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("rscc-sim-warn");
    std::fs::create_dir_all(&dir).unwrap();
    let text = std::fs::read_to_string("schedules/ring8/rs.xml").unwrap();
    let broken = dir.join("broken.xml");
    let re = |s: &str| {
        let start = s.find("nchunksperloop=\"").unwrap() + "nchunksperloop=\"".len();
        let end = start + s[start..].find('"').unwrap();
        format!("{}800{}", &s[..start], &s[end..])
    };
    std::fs::write(&broken, re(&text)).unwrap();
    for (file, warned) in [
        (broken.as_path(), true),
        (std::path::Path::new("schedules/ring8/rs.xml"), false),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_rscc"))
            .arg("simulate")
            .arg(file)
            .args(["--topo", "topologies/ring8.json", "--sizes", "1M"])
            .output()
            .unwrap();
        assert!(o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(
            err.contains("warning") && err.contains("geometry"),
            warned,
            "{err}"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// `--step-by-step` runs every tile; the table agrees with the default
/// run, which jumps over repeating tiles (docs/cost-model.md §4.3).
#[test]
fn step_by_step_agrees_with_the_jumping_run() {
    let run = |extra: &[&str]| {
        let mut args = vec![
            "simulate",
            "schedules/dgx-h100/rs.xml",
            "--topo",
            "topologies/dgx-h100.json",
            "--sizes",
            "1G,4G",
            "--json",
        ];
        args.extend_from_slice(extra);
        let (code, out, err) = common::rscc(&args);
        assert_eq!(code, 0, "{err}");
        let v: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
        v.iter()
            .map(|r| r["time_us"].as_f64().unwrap())
            .collect::<Vec<_>>()
    };
    let (jump, step) = (run(&[]), run(&["--step-by-step"]));
    assert_eq!(jump.len(), 2);
    for (a, b) in jump.iter().zip(&step) {
        assert!((a - b).abs() <= 1e-9 * b, "{a} vs {b}");
    }
}
