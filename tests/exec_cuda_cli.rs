//! `rscc run --backend cuda` without a GPU: a plain message and exit code 2,
//! never a panic. (On a machine with a CUDA driver the no-driver cases are
//! skipped; bench/gpu-check.sh covers that side.)

use std::process::Command;

fn rscc(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rscc"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run rscc");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn no_driver_exits_2_with_a_plain_message() {
    if rscc::exec::cuda::driver_present() {
        eprintln!("skipped: a CUDA driver is present");
        return;
    }
    for mode in ["virtual", "multi"] {
        let (code, text) = rscc(&[
            "run",
            "schedules/ring8/rs.xml",
            "--backend",
            "cuda",
            "--gpu-mode",
            mode,
            "--sizes",
            "64K",
            "--check",
        ]);
        assert_eq!(code, 2, "{text}");
        assert!(text.contains("no CUDA driver found"), "{text}");
        assert!(!text.contains("panicked"), "{text}");
    }
}

#[test]
fn bad_cuda_arguments_exit_2() {
    let (code, text) = rscc(&[
        "run",
        "schedules/ring8/rs.xml",
        "--backend",
        "cuda",
        "--gpu-mode",
        "cluster",
    ]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("--gpu-mode"), "{text}");
    // i64 / u8 are CPU-only; refused before any CUDA call.
    let (code, text) = rscc(&[
        "run",
        "schedules/ring8/rs.xml",
        "--backend",
        "cuda",
        "--dtype",
        "i64",
    ]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("cuda backend"), "{text}");
}
