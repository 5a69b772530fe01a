//! The GPU kernel compiles to PTX through NVRTC for sm_80 and sm_90, for
//! every dtype and reduction the cuda backend supports. Needs only the NVRTC
//! shared library (no driver, no GPU). Skips with a printed reason when the
//! library cannot be found, unless RSCC_REQUIRE_NVRTC=1 (set by .ci/run,
//! which installs NVRTC), in which case a missing library fails the test.

use rscc::exec::cuda::{compile_ptx, nvrtc_present};
use rscc::exec::{DType, RedOp};

fn nvrtc_or_skip() -> bool {
    if nvrtc_present() {
        return true;
    }
    if std::env::var("RSCC_REQUIRE_NVRTC").is_ok_and(|v| v == "1") {
        panic!("RSCC_REQUIRE_NVRTC=1 but libnvrtc could not be loaded (LD_LIBRARY_PATH?)");
    }
    eprintln!("skipped: libnvrtc.so not found (pip install nvidia-cuda-nvrtc-cu12 and add its lib dir to LD_LIBRARY_PATH)");
    false
}

const DTYPES: [DType; 5] = [DType::F32, DType::F64, DType::F16, DType::Bf16, DType::I32];

#[test]
fn kernel_compiles_for_sm80_and_sm90() {
    if !nvrtc_or_skip() {
        return;
    }
    for arch in [(8, 0), (9, 0)] {
        for d in DTYPES {
            let ops: &[RedOp] = if d == DType::F32 || d == DType::Bf16 {
                &RedOp::ALL
            } else {
                &[RedOp::Sum, RedOp::Max]
            };
            for &op in ops {
                let ptx = compile_ptx(arch, d, op)
                    .unwrap_or_else(|e| panic!("{arch:?} {} {}: {e}", d.name(), op.name()));
                let target = format!(".target sm_{}{}", arch.0, arch.1);
                assert!(ptx.contains(&target), "{target} missing");
                assert!(ptx.contains(".entry rscc_run"), "no rscc_run entry");
                assert!(ptx.contains(".entry rscc_copy"), "no rscc_copy entry");
                // The data path uses 16-byte vector accesses.
                assert!(
                    ptx.contains("ld.global.cg.v4.u32"),
                    "no 16-byte vector load"
                );
                assert!(
                    ptx.contains("st.global.v4.u32") || ptx.contains("st.v4.u32"),
                    "no 16-byte vector store"
                );
                // Visibility before a counter moves: system scope for peers
                // on other GPUs, GPU scope for virtual ranks.
                assert!(ptx.contains("membar.sys") || ptx.contains("fence.sc.sys"));
                assert!(ptx.contains("membar.gl") || ptx.contains("fence.sc.gpu"));
                // Consumed FIFO slots leave L2 without a DRAM write-back.
                assert!(ptx.contains("discard.global.L2"), "no L2 discard");
                // Buffer loads stream with an evict-first L2 policy.
                assert!(ptx.contains("createpolicy.fractional.L2::evict_first"));
                assert!(ptx.contains("L2::cache_hint.v4.u32"), "no hinted load");
                // A call's waits join in one barrier that ANDs their
                // outcomes.
                assert!(ptx.contains("bar.red.and"), "no AND barrier");
            }
        }
    }
}

#[test]
fn unsupported_dtypes_are_refused_before_compiling() {
    for d in [DType::I64, DType::U8] {
        let e = compile_ptx((9, 0), d, RedOp::Sum).unwrap_err();
        assert!(e.to_string().contains("cuda backend"), "{e}");
    }
}

/// NVRTC's built-in ptxas assembles the kernel into sm_80 / sm_90 machine
/// code (so the inline PTX is valid there), with no spills, and few enough
/// registers that 512-thread blocks fit (≤ 128 per thread).
#[test]
fn kernel_assembles_to_cubin_without_spills() {
    if !nvrtc_or_skip() {
        return;
    }
    for arch in [(8, 0), (9, 0)] {
        for d in DTYPES {
            let (size, log) = rscc::exec::cuda::compile_cubin(arch, d, RedOp::Sum)
                .unwrap_or_else(|e| panic!("{arch:?} {}: {e}", d.name()));
            assert!(size > 0);
            eprintln!("sm_{}{} {}: {}", arch.0, arch.1, d.name(), log.trim());
            for line in log.lines().filter(|l| l.contains("spill stores")) {
                assert!(line.contains(" 0 bytes spill stores"), "{line}");
            }
            for line in log
                .lines()
                .filter(|l| l.contains("Used ") && l.contains("registers"))
            {
                let regs: u32 = line
                    .split("Used ")
                    .nth(1)
                    .and_then(|x| x.split_whitespace().next())
                    .and_then(|x| x.parse().ok())
                    .unwrap_or(999);
                assert!(regs <= 128, "{line}");
            }
        }
    }
}
