//! Tests only: runs kernel.cu on the CPU, compiled by the host C++ compiler
//! with the shims of emu_shim.h (one host thread per CUDA block, one thread
//! per block), on the same encoded plan, FIFO layout and progress keys the
//! GPU path uses, and checks the result against the CPU reference. This
//! exercises the kernel's interpreter (step kinds, FIFO counters across
//! launches, depid/deps keys, tiles, in place, the stall record) without a
//! GPU; it cannot exercise warp-level parallelism or GPU memory ordering.

use super::layout::{self, DevStep, DevTb};
use super::{Raw, KERNEL_SRC};
use crate::exec::elem::{self, Max, Min, Op, Prod, Sum};
use crate::exec::{check_outputs, chunk_for, plan, DType, RedOp};
use crate::ir::spec::Alias;
use crate::ir::{Collective, Program};
use half::{bf16, f16};
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

fn have_cxx() -> bool {
    static HAVE: OnceLock<bool> = OnceLock::new();
    *HAVE.get_or_init(|| {
        Command::new("c++")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

fn dcode(d: DType) -> i32 {
    match d {
        DType::F32 => 0,
        DType::F64 => 1,
        DType::F16 => 2,
        DType::Bf16 => 3,
        _ => 4,
    }
}

/// The host compiler's flags for the emulator.
const FLAGS: [&str; 4] = ["-std=c++17", "-O1", "-pthread", "-DRSCC_HOST_EMU"];

/// Build (once per dtype × op) the emulator binary.
fn emulator(d: DType, op: RedOp) -> PathBuf {
    // Tests run in parallel; build each binary once, one build at a time.
    static BUILD: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = BUILD.lock().unwrap_or_else(|e| e.into_inner());
    // Named by what goes into the build, so that a later test run takes
    // the binary an earlier one built from the same sources, and the
    // system's temp dir keeps one per dtype × op and version of them.
    let sources = [
        KERNEL_SRC,
        include_str!("emu_shim.h"),
        include_str!("emu_main.cpp"),
    ];
    let mut h = std::hash::DefaultHasher::new();
    std::hash::Hash::hash(&sources, &mut h);
    std::hash::Hash::hash(&FLAGS, &mut h);
    let dir = std::env::temp_dir().join(format!(
        "rscc-emu-{:016x}-{}-{}",
        std::hash::Hasher::finish(&h),
        d.name(),
        op.name()
    ));
    let bin = dir.join("emu");
    if bin.exists() {
        return bin;
    }
    // Another test process may build the same binary at once: each
    // writes the sources and builds in a directory of its own, and the
    // rename that publishes the binary is atomic.
    let work = dir.join(format!("build-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("kernel.cu"), sources[0]).unwrap();
    std::fs::write(work.join("emu_shim.h"), sources[1]).unwrap();
    std::fs::write(work.join("emu_main.cpp"), sources[2]).unwrap();
    let tmp = work.join("emu");
    let out = Command::new("c++")
        .args(FLAGS)
        .arg(format!("-DRSCC_DTYPE={}", dcode(d)))
        .arg(format!(
            "-DRSCC_OP={}",
            match op {
                RedOp::Sum => 0,
                RedOp::Prod => 1,
                RedOp::Max => 2,
                RedOp::Min => 3,
            }
        ))
        .arg("-I")
        .arg(&work)
        .arg(work.join("emu_main.cpp"))
        .arg("-o")
        .arg(&tmp)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "c++ failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::rename(&tmp, &bin).unwrap();
    let _ = std::fs::remove_dir_all(&work);
    bin
}

struct Case {
    size: u64,
    tile_bytes: u64,
    slots: u64,
    inplace: bool,
    works: u64,
    timeout_ms: u64,
    /// `RunOptions::zero_copy` (the kernel runs in one process here).
    zero_copy: bool,
}

/// Run `prog` through the emulated kernel; returns (status[8], wrong).
fn run<T: Raw, O: Op<T>>(prog: &Program, c: &Case) -> ([u64; 8], u64) {
    let (status, wrong, _) = run_full::<T, O>(prog, c);
    (status, wrong)
}

/// `run`, and the flag lines the kernel left (FLAG_WORDS per threadblock).
fn run_full<T: Raw, O: Op<T>>(prog: &Program, c: &Case) -> ([u64; 8], u64, Vec<u64>) {
    let pl = plan::build(prog).unwrap();
    let zero_copy = if c.zero_copy {
        plan::zero_copy_sends(&pl, c.inplace)
    } else {
        Vec::new()
    };
    let enc = layout::encode(&pl, &zero_copy).unwrap();
    let n = pl.nranks;
    let esz = std::mem::size_of::<T>() as u64;
    let chunk = chunk_for(c.size, esz as usize, pl.c);
    let count = pl
        .coll
        .element_count(n, chunk * pl.c as u64 * esz, esz as usize);
    let geo = layout::geometry(chunk, c.tile_bytes, esz, c.slots, pl.max_cnt() as u64);
    let mut f: Vec<u8> = Vec::new();
    let put = |f: &mut Vec<u8>, v: u64| f.extend_from_slice(&v.to_le_bytes());
    for v in [
        n as u64,
        enc.tbs.len() as u64,
        enc.steps.len() as u64,
        pl.fifos.len() as u64,
        geo.chunk,
        geo.tile,
        geo.ntiles,
        enc.step_stride,
        geo.slots,
        count,
        c.works,
        c.timeout_ms * 1_000_000,
        esz,
        c.inplace as u64,
        geo.merge,
        pl.bufs.i_chunks as u64 * chunk,
        pl.bufs.o_chunks as u64 * chunk,
        match pl.bufs.alias {
            Alias::OutInInput => 0,
            Alias::InputInOut => 1,
            Alias::Same => 2,
        },
    ] {
        put(&mut f, v);
    }
    for &s in &pl.s_chunks {
        put(&mut f, s as u64);
    }
    let i32s = |f: &mut Vec<u8>, xs: &[i32]| {
        for x in xs {
            f.extend_from_slice(&x.to_le_bytes());
        }
    };
    for s in &enc.steps {
        let DevStep {
            kind,
            src_buf,
            src_off,
            dst_buf,
            dst_off,
            cnt,
            dep_tb,
            dep_step,
        } = *s;
        i32s(
            &mut f,
            &[
                kind, src_buf, src_off, dst_buf, dst_off, cnt, dep_tb, dep_step,
            ],
        );
    }
    for t in &enc.tbs {
        let DevTb {
            rank,
            first_step,
            nsteps,
            send_fifo,
            recv_fifo,
            pad,
        } = *t;
        i32s(&mut f, &[rank, first_step, nsteps, send_fifo, recv_fifo]);
        i32s(&mut f, &pad);
    }
    // Rank r's input: the pattern at its global indices (an allgather's
    // shard is r's part of the full buffer).
    let i_len = pl.bufs.i_chunks * chunk as usize;
    for r in 0..n {
        let mut cell = vec![0u8; esz as usize];
        let base = if pl.coll == Collective::AllGather {
            r * i_len
        } else {
            0
        };
        for idx in base..base + i_len {
            T::from_pattern(elem::pattern(O::OP, r, idx)).put(&mut cell);
            f.extend_from_slice(&cell);
        }
    }
    let bin = emulator(T::DTYPE, O::OP);
    let dir = bin.parent().unwrap().to_path_buf();
    // The binary's directory is shared by test processes: the run's files
    // carry the process id.
    let tag = format!(
        "{}-{}-{}-{}",
        prog.name,
        c.size,
        c.inplace,
        std::process::id()
    );
    let (inp, outp) = (
        dir.join(format!("{tag}.in")),
        dir.join(format!("{tag}.out")),
    );
    std::fs::write(&inp, &f).unwrap();
    let st = Command::new(&bin).arg(&inp).arg(&outp).status().unwrap();
    assert!(st.success(), "emulator failed: {st}");
    let out = std::fs::read(&outp).unwrap();
    let _ = std::fs::remove_file(&inp);
    let _ = std::fs::remove_file(&outp);
    let mut status = [0u64; 8];
    for (k, s) in status.iter_mut().enumerate() {
        *s = u64::from_le_bytes(out[8 * k..8 * k + 8].try_into().unwrap());
    }
    let body = &out[64..];
    let per = pl.bufs.o_chunks * (chunk * esz) as usize;
    let outs: Vec<Vec<T>> = (0..n)
        .map(|r| {
            body[r * per..(r + 1) * per]
                .chunks_exact(esz as usize)
                .map(T::get)
                .collect()
        })
        .collect();
    let refs: Vec<&[T]> = outs.iter().map(|v| v.as_slice()).collect();
    let (wrong, _) = check_outputs::<T, O>(pl.coll, &refs, n, pl.c, chunk as usize);
    let flags = body[n * per..]
        .chunks_exact(8)
        .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    (status, wrong, flags)
}

fn case(size: u64, tile_bytes: u64, inplace: bool) -> Case {
    Case {
        size,
        tile_bytes,
        slots: 2,
        inplace,
        // In place, a second launch would reduce already-reduced input;
        // out of place, two launches check FIFO counters across launches.
        works: if inplace { 1 } else { 2 },
        timeout_ms: 20_000,
        zero_copy: true,
    }
}

fn skip() -> bool {
    if !have_cxx() {
        eprintln!("skipped: no host C++ compiler (c++) for the kernel emulation");
        return true;
    }
    false
}

#[test]
fn emulated_kernel_runs_the_builtin_schedules() {
    if skip() {
        return;
    }
    use crate::exec::builtin;
    // Ring, 2 channels: many tiles (64-byte tiles), out of place and in place.
    for (size, tile, inpl) in [(4096, 64, false), (4096, 64, true), (1000, 1 << 20, false)] {
        let (st, wrong) = run::<f32, Sum>(&builtin::ring(4, 2), &case(size, tile, inpl));
        assert_eq!(st[0], 0, "stall {st:?}");
        assert_eq!(wrong, 0, "ring size {size} tile {tile} inplace {inpl}");
    }
    // All-pairs: in place only, scratch, multi-chunk steps, nop chain, re.
    let (st, wrong) = run::<f32, Sum>(&builtin::allpairs(4), &case(8192, 256, true));
    assert_eq!((st[0], wrong), (0, 0));
    // Every send copied into its slot (--no-zero-copy), and zero-copy
    // sends that share FIFOs with copied ones (the ring's first send, then
    // rrs): both ways each slot's source word must be rewritten per send.
    for zero_copy in [false, true] {
        let mut c = case(4096, 64, false);
        c.zero_copy = zero_copy;
        c.slots = 3;
        let (st, wrong) = run::<f32, Sum>(&builtin::ring(4, 1), &c);
        assert_eq!((st[0], wrong), (0, 0), "zero_copy {zero_copy}");
    }
}

#[test]
fn emulated_kernel_runs_shipped_schedules() {
    if skip() {
        return;
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    // Small tiles (many per chunk), and small chunks, where multi-chunk
    // steps move several chunks per FIFO slot by MSCCL's rule whatever the
    // staging tile (ring8's small band has cnt > slots: one slot per chunk
    // stalls it, as first seen on an H200).
    for (f, size, tile) in [
        ("ring8/rs.xml", 16384, 128),
        ("dgx-h100/rs.xml", 16384, 128),
        ("dgx1-v100/rs.xml", 16384, 128),
        ("ring8/extra/small-rs.xml", 4096, 256 << 10),
        ("ring8/extra/small-rs.xml", 16384, 128),
        ("dgx1-v100/rs.xml", 4096, 256 << 10),
        ("ring8/ag.xml", 16384, 128),
        ("dgx-h100/ag.xml", 16384, 128),
        ("dgx1-v100/ag.xml", 16384, 128),
        ("ring8/ar.xml", 16384, 128),
        ("dgx-h100/ar.xml", 16384, 128),
        ("dgx1-v100/ar.xml", 16384, 128),
        ("dgx-a100x4/ar.xml", 16384, 256 << 10),
        // RCCL files: r into scratch, re, cpy, s only.
        ("mi300x/rs.xml", 16384, 128),
        ("mi300x/ag.xml", 16384, 128),
        ("mi300x/ar.xml", 16384, 128),
    ] {
        let p = crate::front::msccl_xml::load(&root.join("schedules").join(f)).unwrap();
        // Every call mode the file declares (each op aliases differently).
        let modes = [(p.outofplace, false), (p.inplace, true)];
        for inplace in modes.iter().filter(|m| m.0).map(|m| m.1) {
            let mut c = case(size, tile, inplace);
            c.timeout_ms = 5_000;
            let (st, wrong) = run::<f32, Sum>(&p, &c);
            let at = format!("{f} at {size} B, tile {tile} B, inplace {inplace}");
            assert_eq!(st[0], 0, "{at}: stall {st:?}");
            assert_eq!(wrong, 0, "{at}");
        }
    }
}

/// A fused allreduce (one chunk per loop) at element counts that are not
/// multiples of the ranks: 1, 3 and 1001 floats, small and many tiles.
#[test]
fn emulated_kernel_runs_a_fused_allreduce_at_any_count() {
    if skip() {
        return;
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for (t, algo) in [
        ("ring8.json", crate::synth::Algo::Ring),
        ("dgx-h100.json", crate::synth::Algo::Direct),
    ] {
        let topo = crate::front::load_topology(&root.join("topologies").join(t)).unwrap();
        let mut opts = crate::compile::CompileOptions::algo(algo, Some(1));
        opts.op = Collective::AllReduce;
        let c = crate::compile::compile(&topo, &opts).unwrap();
        let fused = c.algorithm.fused().expect("a composed allreduce fuses");
        let p = crate::lower::lower(&fused, &Default::default()).unwrap();
        crate::verify::verify(&p, &Default::default()).unwrap();
        assert_eq!(p.nchunksperloop, 1);
        for (size, tile) in [(4, 128), (12, 128), (4004, 128), (4004, 256 << 10)] {
            for inplace in [false, true] {
                let (st, wrong) = run::<f32, Sum>(&p, &case(size, tile, inplace));
                let at = format!("{t} fused {algo:?} at {size} B, tile {tile}, inplace {inplace}");
                assert_eq!(st[0], 0, "{at}: stall {st:?}");
                assert_eq!(wrong, 0, "{at}");
            }
        }
    }
}

#[test]
fn emulated_kernel_dtypes_and_ops() {
    if skip() {
        return;
    }
    use crate::exec::builtin;
    let p = builtin::ring(3, 1);
    let c = case(3 * 1024, 96, false);
    assert_eq!(run::<f64, Min>(&p, &c), ([0; 8], 0));
    assert_eq!(run::<f16, Sum>(&p, &c), ([0; 8], 0));
    assert_eq!(run::<bf16, Max>(&p, &c), ([0; 8], 0));
    assert_eq!(run::<i32, Prod>(&p, &c), ([0; 8], 0));
    // Allgather copies bit for bit whatever the type; allreduce reduces.
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("schedules");
    let ag = crate::front::msccl_xml::load(&root.join("ring8/ag.xml")).unwrap();
    let ar = crate::front::msccl_xml::load(&root.join("ring8/ar.xml")).unwrap();
    let c = case(16384, 256, false);
    assert_eq!(run::<f16, Sum>(&ag, &c), ([0; 8], 0));
    assert_eq!(run::<f64, Min>(&ar, &c), ([0; 8], 0));
    assert_eq!(run::<bf16, Max>(&ar, &c), ([0; 8], 0));
    assert_eq!(run::<i32, Prod>(&ar, &c), ([0; 8], 0));
}

/// The built-in n-rank ring with every sending step of rank 0 made a nop.
fn ring_rank0_silent(n: usize) -> Program {
    let mut p = crate::exec::builtin::ring(n, 1);
    for tb in &mut p.gpus[0].tbs {
        for s in &mut tb.steps {
            if s.kind.sends() {
                s.kind = crate::ir::StepKind::Nop;
                s.cnt = 0;
            }
        }
    }
    p
}

#[test]
fn emulated_kernel_reports_a_stall() {
    if skip() {
        return;
    }
    // Rank 0 never sends: its peer's receive must time out, not hang.
    let p = ring_rank0_silent(2);
    let mut c = case(1024, 1 << 20, false);
    c.timeout_ms = 200;
    let (st, _) = run::<f32, Sum>(&p, &c);
    assert_eq!(st[0], 1, "no stall recorded: {st:?}");
    assert_eq!(st[4], 1, "expected a receive wait: {st:?}");
}

#[test]
fn emulated_kernel_lists_every_waiting_block() {
    if skip() {
        return;
    }
    // A 3-rank ring whose rank 0 never sends: rank 1 waits for rank 0's
    // data and rank 2 for rank 1's (rank 0's one receive gets rank 2's
    // first send and ends).
    let p = ring_rank0_silent(3);
    let mut c = case(3 * 1024, 1 << 20, false);
    c.timeout_ms = 200;
    let (st, _, flags) = run_full::<f32, Sum>(&p, &c);
    assert_eq!(st[0], 1, "no stall recorded: {st:?}");
    let pl = plan::build(&p).unwrap();
    let left = layout::left_waits(&flags);
    let mut ranks: Vec<usize> = left.iter().map(|w| pl.tbs[w.tb].rank).collect();
    ranks.sort_unstable();
    assert_eq!(ranks, [1, 2], "{left:?}");
    assert!(left.iter().all(|w| w.what == 1), "{left:?}");
    // The host's report names each of them, the one that timed out first.
    let crate::exec::ExecError::Stalled(rep) = super::run::stall_report(&pl, &st, &flags, 200)
    else {
        panic!("not a stall")
    };
    assert_eq!(rep.waits.len(), 2, "{rep}");
    assert_eq!(rep.waits[0].tb, pl.tbs[st[1] as usize].id);
    assert!(rep.to_string().contains("data from rank 0"), "{rep}");
}
