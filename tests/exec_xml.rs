//! The CPU executor on hand-written MSCCL XML files (tests/data/exec):
//! msccl-tools-style ring and all-pairs reduce-scatter shapes with scratch,
//! nop chains and fusable `re` runs; and a hand-broken file that the
//! watchdog must stop (`rscc run --no-verify`).

use rscc::exec::{run_program, DType, RedOp, RunOptions};
use rscc::front::msccl_xml::load;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/exec")
        .join(name)
}

#[test]
fn hand_written_files_run_correctly() {
    for (file, ranks) in [
        ("ring_8.xml", 8),
        ("ring_scratch_3.xml", 3),
        ("allpairs_2.xml", 2),
        ("allpairs_4.xml", 4),
    ] {
        let p = load(&data(file)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.ngpus, ranks);
        for (d, op) in [
            (DType::F32, RedOp::Sum),
            (DType::F16, RedOp::Prod),
            (DType::I64, RedOp::Max),
            (DType::U8, RedOp::Min),
        ] {
            let e = d.size() as u64;
            let c = p.nchunksperloop as u64;
            let o = RunOptions {
                dtype: d,
                redop: op,
                sizes: vec![c * e, c * e * 100, 256 << 10],
                iters: 2,
                warmup: 1,
                check: true,
                tile_bytes: 1024,
                stall_timeout: Duration::from_secs(5),
                ..RunOptions::default()
            };
            let rep = run_program(&p, &o).unwrap_or_else(|e| panic!("{file}: {e}"));
            for r in &rep.rows {
                assert_eq!(
                    r.wrong,
                    Some(0),
                    "{file} {d:?} {op:?} size {}: {:?}",
                    r.size_bytes,
                    r.wrong_chunks
                );
            }
        }
    }
}

#[test]
fn cli_checks_a_file_and_the_watchdog_stops_a_broken_one() {
    let bin = env!("CARGO_BIN_EXE_rscc");
    let ring = data("ring_8.xml");
    let out = Command::new(bin)
        .args([
            "run",
            ring.to_str().unwrap_or(""),
            "--backend",
            "cpu",
            "--sizes",
            "4K:16K",
            "--check",
            "--iters",
            "2",
            "--no-membw",
        ])
        .output()
        .expect("rscc runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let broken = data("broken_ring_4.xml");
    let t0 = Instant::now();
    let out = Command::new(bin)
        .args([
            "run",
            broken.to_str().unwrap_or(""),
            "--no-verify",
            "--sizes",
            "4K",
            "--stall-ms",
            "500",
            "--no-membw",
        ])
        .output()
        .expect("rscc runs");
    assert!(t0.elapsed() < Duration::from_secs(10));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("watchdog"), "{err}");
    for r in 0..4 {
        let want = format!("rank {r} tb 0 step 0 (r)");
        assert!(err.contains(&want), "{want} missing in {err}");
    }
    assert!(
        err.contains("receive #1 from rank 3 on chan 0 (0 sent so far; sender rank 3 tb 0)"),
        "{err}"
    );
}

#[test]
fn unreadable_files_exit_2() {
    let out = Command::new(env!("CARGO_BIN_EXE_rscc"))
        .args(["run", "/nonexistent/rs.xml"])
        .output()
        .expect("rscc runs");
    assert_eq!(out.status.code(), Some(2));
}
