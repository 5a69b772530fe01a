//! CPU executor: correctness over a grid of schedules, dtypes, redops,
//! rank counts and sizes; wrong-result reports; the watchdog; malformed
//! programs; the `rscc run` command line.

mod common;

use common::rscc;

use rscc::exec::{builtin, run_program, DType, ExecError, RedOp, RunOptions};
use rscc::ir::{Buf, Program, StepKind};
use std::time::{Duration, Instant};

fn opts(dtype: DType, redop: RedOp, sizes: Vec<u64>) -> RunOptions {
    RunOptions {
        dtype,
        redop,
        sizes,
        iters: 1,
        warmup: 1,
        check: true,
        inplace: None,
        tile_bytes: 64,
        fifo_slots: 2,
        stall_timeout: Duration::from_secs(5),
        membw_bytes: 0,
        workers: 0,
        inject_fault: None,
        zero_copy: true,
        fuse_chains: true,
        placement: rscc::exec::Placement::Auto,
    }
}

fn assert_correct(p: &Program, o: &RunOptions) {
    let rep = run_program(p, o).unwrap_or_else(|e| panic!("{}: {e}", p.name));
    assert_eq!(rep.rows.len(), o.sizes.len());
    for r in &rep.rows {
        assert_eq!(
            r.wrong,
            Some(0),
            "{} {:?} {:?} inplace={} size {}: {:?}",
            p.name,
            o.dtype,
            o.redop,
            rep.inplace,
            r.size_bytes,
            r.wrong_chunks.first()
        );
        assert!(r.time_us > 0.0);
    }
}

#[test]
fn every_dtype_and_redop_on_ring_and_allpairs() {
    for d in DType::ALL {
        for op in RedOp::ALL {
            let e = d.size() as u64;
            // ring 4: C = 4; 4·100 elements per rank -> chunk 100 elements,
            // tiles of 64 B: several tiles and a short last one.
            let mut o = opts(d, op, vec![400 * e, 4 * e]);
            assert_correct(&builtin::ring(4, 1), &o);
            // all-pairs 3: C = 9, multi-chunk steps, scratch, nop, re run.
            o.sizes = vec![9 * 37 * e, 9 * e];
            assert_correct(&builtin::allpairs(3), &o);
        }
    }
}

#[test]
fn rank_counts_sizes_and_modes() {
    for n in [2usize, 3, 4, 8, 16] {
        let small = 4 * n as u64; // one f32 element per chunk (ring, C = N)
        let mut o = opts(DType::F32, RedOp::Sum, vec![small, 4 * 1000 * n as u64 + 4]);
        o.tile_bytes = 1024;
        assert_correct(&builtin::ring(n, 1), &o);
        o.inplace = Some(true);
        assert_correct(&builtin::ring(n, 1), &o);
        o.inplace = None;
        let mut o2 = o.clone();
        o2.dtype = DType::I32;
        o2.redop = RedOp::Max;
        o2.sizes = vec![8 * n as u64, 8 * 333 * n as u64];
        assert_correct(&builtin::ring(n, 2), &o2);
        let mut o3 = opts(
            DType::I64,
            RedOp::Sum,
            vec![8 * (n * n) as u64, 8 * (n * n * 50) as u64],
        );
        o3.tile_bytes = 256;
        assert_correct(&builtin::allpairs(n), &o3);
    }
}

#[test]
fn a_few_mib_with_two_slot_fifos() {
    let mut o = opts(DType::F32, RedOp::Sum, vec![3 << 20]);
    o.tile_bytes = 64 << 10;
    o.fifo_slots = 2;
    assert_correct(&builtin::ring(8, 1), &o);
    o.dtype = DType::Bf16;
    o.redop = RedOp::Min;
    o.inplace = Some(true);
    assert_correct(&builtin::allpairs(4), &o);
}

/// Every size's roofline fraction is against the bandwidth sampled around
/// that size's calls, which its row reports; the run's figure is their
/// mean.
#[test]
fn each_size_has_the_bandwidth_sampled_around_its_calls() {
    let mut o = opts(DType::F32, RedOp::Sum, vec![64 << 10, 1 << 20]);
    o.membw_bytes = 1 << 20;
    let rep = run_program(&builtin::ring(4, 1), &o).unwrap();
    let bs: Vec<f64> = rep.rows.iter().map(|r| r.membw_gbps.unwrap()).collect();
    for (r, &b) in rep.rows.iter().zip(&bs) {
        assert!(b.is_finite() && b > 0.0, "{b}");
        let want = 5.0 * r.algbw_gbps / b;
        assert!(
            (r.membw_frac.unwrap() - want).abs() <= 1e-12 * want,
            "{r:?}"
        );
    }
    let mean = bs.iter().sum::<f64>() / bs.len() as f64;
    assert!((rep.membw_gbps.unwrap() - mean).abs() <= 1e-12 * mean);
    // Without the measurement nothing is reported.
    o.membw_bytes = 0;
    let rep = run_program(&builtin::ring(4, 1), &o).unwrap();
    assert!(rep.membw_gbps.is_none());
    assert!(rep
        .rows
        .iter()
        .all(|r| r.membw_gbps.is_none() && r.membw_frac.is_none()));
}

#[test]
fn wrong_results_are_reported_per_rank_and_chunk() {
    let mut p = builtin::ring(4, 1);
    // Rank 2's last step reduces the wrong input chunk into its output.
    let last = p.gpus[2].tbs[0].steps.len() - 1;
    p.gpus[2].tbs[0].steps[last].srcoff = 0;
    let rep = run_program(&p, &opts(DType::I32, RedOp::Sum, vec![4 * 4 * 10])).expect("runs");
    let row = &rep.rows[0];
    assert!(row.wrong.unwrap_or(0) > 0);
    assert_eq!(row.correct, Some(false));
    assert!(!rep.correct());
    assert!(row
        .wrong_chunks
        .iter()
        .all(|w| w.rank == 2 && w.chunk == 0 && w.input_chunk == 2));
}

/// A 4-rank ring whose every rank starts by receiving instead of sending:
/// a cycle of waits.
fn stalled_ring() -> Program {
    let mut p = builtin::ring(4, 1);
    for g in &mut p.gpus {
        let st = &mut g.tbs[0].steps[0];
        st.kind = StepKind::Recv;
        st.dstbuf = Buf::Output;
        st.dstoff = 0;
    }
    p
}

#[test]
fn watchdog_stops_a_stalled_schedule_and_names_the_waiters() {
    let p = stalled_ring();
    let mut o = opts(DType::F32, RedOp::Sum, vec![4 * 4 * 64]);
    o.stall_timeout = Duration::from_millis(300);
    let t0 = Instant::now();
    let err = run_program(&p, &o).expect_err("must stall");
    assert!(t0.elapsed() < Duration::from_secs(5));
    let ExecError::Stalled(rep) = &err else {
        panic!("expected a stall, got {err}");
    };
    assert!(
        rep.waits.iter().any(|w| w.rank == 2
            && w.tb == 0
            && w.step == 0
            && w.waiting_for
                .contains("receive #1 from rank 1 on chan 0 (0 sent so far")),
        "{err}"
    );
    assert_eq!(rep.waits.len(), 4, "{err}");
    assert!(err.to_string().contains("watchdog"));
}

#[test]
fn dependency_on_a_step_without_hasdep_stalls() {
    let mut p = builtin::allpairs(3);
    for g in &mut p.gpus {
        for st in &mut g.tbs[1].steps {
            st.hasdep = false;
        }
    }
    let mut o = opts(DType::F32, RedOp::Sum, vec![4 * 9 * 4]);
    o.stall_timeout = Duration::from_millis(300);
    match run_program(&p, &o) {
        Err(ExecError::Stalled(rep)) => {
            assert!(
                rep.waits
                    .iter()
                    .any(|w| w.waiting_for.contains("dependency on tb 1 step")),
                "{rep}"
            )
        }
        other => panic!("expected a stall, got {other:?}"),
    }
}

#[test]
fn malformed_programs_are_refused_before_running() {
    let mut p = builtin::ring(4, 1);
    p.gpus[0].tbs[0].steps[1].srcoff = 4;
    let e = run_program(&p, &opts(DType::F32, RedOp::Sum, vec![64])).expect_err("out of range");
    assert!(
        matches!(
            e,
            ExecError::Malformed {
                rank: 0,
                step: Some(1),
                ..
            }
        ),
        "{e}"
    );
    let mut p = builtin::ring(4, 1);
    p.gpus[3].tbs[0].send = 3;
    assert!(matches!(
        run_program(&p, &opts(DType::F32, RedOp::Sum, vec![64])),
        Err(ExecError::Malformed { rank: 3, .. })
    ));
    let mut p = builtin::allpairs(3);
    p.gpus[1].tbs[0].steps[1].depid = 9;
    assert!(matches!(
        run_program(&p, &opts(DType::F32, RedOp::Sum, vec![64])),
        Err(ExecError::Malformed { rank: 1, .. })
    ));
    let mut p = builtin::ring(2, 1);
    p.gpus[0].tbs[0].steps[0].dstbuf = Buf::Scratch;
    p.gpus[0].tbs[0].steps[1].dstbuf = Buf::Scratch;
    assert!(run_program(&p, &opts(DType::F32, RedOp::Sum, vec![64])).is_err());
    // An in-place-only program cannot run out of place.
    let mut o = opts(DType::F32, RedOp::Sum, vec![64]);
    o.inplace = Some(false);
    assert!(matches!(
        run_program(&builtin::allpairs(2), &o),
        Err(ExecError::Unsupported(_))
    ));
}

#[test]
fn cli_runs_builtin_schedules_and_reports() {
    let (code, out, err) = rscc(&[
        "run",
        "--builtin",
        "ring",
        "--ranks",
        "4",
        "--sizes",
        "1K:4K",
        "--check",
        "--iters",
        "2",
        "--warmup",
        "1",
        "--no-membw",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("algbw") && out.contains("busbw") && out.contains("#wrong"),
        "{out}"
    );
    assert_eq!(
        out.lines()
            .filter(|l| l.trim_start().starts_with("1024") || l.trim_start().starts_with("4096"))
            .count(),
        2,
        "{out}"
    );

    let (code, out, err) = rscc(&[
        "run",
        "--builtin",
        "allpairs",
        "--ranks",
        "3",
        "--sizes",
        "1000",
        "--check",
        "--iters",
        "1",
        "--json",
        "--no-membw",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    let row = &v["rows"][0];
    // 1000 B = 250 f32 -> 243 (multiple of 9 chunks).
    assert_eq!(row["size_bytes"], 972);
    assert_eq!(row["correct"], true);
    for k in ["time_us", "algbw_gbps", "busbw_gbps"] {
        assert!(row[k].as_f64().is_some(), "{k}");
    }
    assert!(err.contains("ran 972 B"), "{err}");
    // It says the runtime would not take the file for the call as asked.
    assert!(
        err.contains("MSCCL would not select this file for a call of 1000 B"),
        "{err}"
    );

    let (code, _, err) = rscc(&["run", "--builtin", "ring", "--backend", "cuda"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not available"));
    let (code, _, _) = rscc(&["run", "--builtin", "ring", "--dtype", "complex"]);
    assert_eq!(code, 2);
    let (code, _, _) = rscc(&["run", "--builtin", "ring", "--sizes", "9:1"]);
    assert_eq!(code, 2);
    for slots in ["0", "65"] {
        let (code, _, err) = rscc(&["run", "--builtin", "ring", "--slots", slots]);
        assert_eq!(code, 2, "--slots {slots}: {err}");
        assert!(err.contains("--slots must be 1 .. 64"), "{err}");
    }
}

/// A ring that exercises the remaining step types: partial sums are also
/// stored in scratch (`rrcs`), the full sum is forwarded once more by its
/// owner (`rcs` into scratch) and copied to the output at the end (`cpy`).
/// Rank r, step k handles chunk (r − k) mod N.
fn relay_ring(n: usize) -> Program {
    use rscc::ir::Step;
    let mut p = builtin::ring(n, 1);
    p.name = format!("rs_relay_ring_{n}");
    for (r, g) in p.gpus.iter_mut().enumerate() {
        let c = |k: usize| (r + n * 4 - k) % n;
        let mut steps = vec![Step::new(StepKind::Send)
            .src(Buf::Input, r)
            .dst(Buf::Scratch, 1)];
        for k in 1..n {
            steps.push(
                Step::new(StepKind::RecvReduceCopySend)
                    .src(Buf::Input, c(k))
                    .dst(Buf::Scratch, k),
            );
        }
        steps.push(
            Step::new(StepKind::RecvCopySend)
                .src(Buf::Scratch, 0)
                .dst(Buf::Scratch, n),
        );
        steps.push(
            Step::new(StepKind::Recv)
                .src(Buf::Scratch, n)
                .dst(Buf::Scratch, 0),
        );
        steps.push(
            Step::new(StepKind::Copy)
                .src(Buf::Scratch, n)
                .dst(Buf::Output, 0),
        );
        for (k, s) in steps.iter_mut().enumerate() {
            s.s = k as i64;
        }
        g.s_chunks = n as i64 + 1;
        g.tbs[0].steps = steps;
    }
    p
}

#[test]
fn rcs_rrcs_and_cpy_through_scratch() {
    for n in [2usize, 3, 5, 8] {
        for inplace in [Some(false), Some(true)] {
            for (d, op) in [
                (DType::F64, RedOp::Sum),
                (DType::I32, RedOp::Prod),
                (DType::F16, RedOp::Max),
            ] {
                let mut o = opts(
                    d,
                    op,
                    vec![(d.size() * n) as u64, (d.size() * n * 777) as u64],
                );
                o.inplace = inplace;
                o.tile_bytes = 512;
                o.iters = 2;
                assert_correct(&relay_ring(n), &o);
            }
        }
    }
    // Breaking the final copy is caught: rank 1's output is never written.
    let mut p = relay_ring(3);
    let last = p.gpus[1].tbs[0].steps.len() - 1;
    p.gpus[1].tbs[0].steps[last].kind = StepKind::Nop;
    let rep = run_program(&p, &opts(DType::F32, RedOp::Sum, vec![4 * 3 * 8])).expect("runs");
    assert_eq!(rep.rows[0].wrong, Some(8));
    assert!(rep.rows[0]
        .wrong_chunks
        .iter()
        .all(|w| w.rank == 1 && w.got == -12345.5));
}

#[test]
fn absurd_programs_are_refused_not_allocated() {
    let mut p = builtin::ring(2, 1);
    p.nchunksperloop = 1 << 40;
    assert!(matches!(
        run_program(&p, &opts(DType::F32, RedOp::Sum, vec![64])),
        Err(ExecError::Unsupported(_))
    ));
    let (code, _, err) = rscc(&["run", "--topo", "x.json", "--op", "reduce-scatter"]);
    assert_eq!(code, 2, "{err}");
}

/// Every synthesizer's schedule for every shipped single host of 8 GPUs
/// (and the flow LP's on an imported MI250X mesh, and a ring with more
/// chunks than rings) computes the right result on real data in both
/// aliasing modes, with 64-byte staging tiles, so that a chunk of a
/// single-chunk step is several tiles (a multi-chunk step is one merged
/// call at this size, as in MSCCL; tests/witnesses.rs runs every shipped
/// file at a size where MSCCL splits such steps too). A schedule `compile`
/// emits (it passed the verifier) never stalls here.
#[test]
fn every_synthesizers_schedule_computes_the_right_result() {
    use rscc::compile::{compile, CompileOptions};
    use rscc::synth::Algo;
    let load = |p: &str| rscc::front::load_topology(std::path::Path::new(p)).unwrap();
    let mut cases = Vec::new();
    for t in [
        "cpu-shm",
        "dgx-a100",
        "dgx-h100",
        "dgx1-v100",
        "mi300x",
        "ring8",
    ] {
        let topo = load(&format!("topologies/{t}.json"));
        for algo in Algo::all() {
            if algo != Algo::Sccl {
                cases.push((topo.clone(), CompileOptions::algo(algo, None)));
            }
        }
    }
    cases.push((
        load("topologies/ring8.json"),
        CompileOptions::algo(Algo::Ring, Some(4)),
    ));
    cases.push((
        load("tests/data/real/rccl-xml/rccl_topo_8p1h_MI250X-gfx90a_8GCD_1hive.xml"),
        CompileOptions::algo(Algo::Flow, None),
    ));
    let mut ran = 0;
    for (topo, copts) in &cases {
        let c = match compile(topo, copts) {
            Ok(c) => c,
            Err(e) if e.is_request() => continue, // does not apply
            Err(e) => panic!("{} {:?}: {e}", topo.name, copts.mode),
        };
        let chunks = c.program.nchunksperloop as u64;
        for inplace in [false, true] {
            // 33 elements per chunk, 64-byte tiles: several tiles a chunk.
            let mut o = opts(DType::F32, RedOp::Sum, vec![chunks * 4 * 33, chunks * 4]);
            o.inplace = Some(inplace);
            assert_correct(&c.program, &o);
        }
        ran += 1;
    }
    assert!(ran >= 28, "only {ran} schedules ran");
}

/// Reduction chains in one pass (docs/executor.md): the direct
/// exchange's chains of `rrc` (one threadblock per peer, each waiting on
/// the one before) give the right result fused and one step at a time,
/// for every dtype and redop, in and out of place, on one and two
/// workers, with one tile and with several; fused runs report their
/// chained steps, and runs with `fuse_chains` off none.
#[test]
fn reduction_chains_in_one_pass_compute_what_their_steps_do() {
    use rscc::compile::{compile, CompileOptions};
    use rscc::synth::Algo;
    let topo = rscc::front::load_topology(std::path::Path::new("topologies/cpu-shm.json")).unwrap();
    let c = compile(&topo, &CompileOptions::algo(Algo::Direct, Some(1))).unwrap();
    let p = &c.program;
    let n = p.ngpus as u64;
    let chunks = p.nchunksperloop as u64;
    // The chains to fuse: a rank's `rrc`s into its output, each waiting on
    // another threadblock's.
    let links = p.gpus[0]
        .tbs
        .iter()
        .flat_map(|t| &t.steps)
        .filter(|s| s.kind == StepKind::RecvReduceCopy && s.depid >= 0)
        .count() as u64;
    assert!(links + 1 >= n - 1, "{}: {links} chained rrc", p.name);
    for d in DType::ALL {
        for op in RedOp::ALL {
            let e = d.size() as u64;
            for (workers, inplace) in [(1, false), (2, true), (2, false)] {
                for fuse in [true, false] {
                    // 300 elements per chunk in 64-byte tiles, and one.
                    let mut o = opts(d, op, vec![chunks * e * 300, chunks * e]);
                    o.workers = workers;
                    o.inplace = Some(inplace);
                    o.fuse_chains = fuse;
                    assert_correct(p, &o);
                    let rep = run_program(p, &o).unwrap();
                    for r in &rep.rows {
                        let k = r.chained_steps.expect("the CPU backend counts them");
                        let tiles = (r.size_bytes / chunks).div_ceil(64);
                        if fuse && workers == 1 {
                            // One worker runs every link; each chain's
                            // links after the first join a pass, but for
                            // links that find their message not yet in.
                            assert!(k > 0.0, "{d:?} {op:?} {} B: no chained steps", r.size_bytes);
                            assert!(k <= (links * tiles) as f64 * n as f64);
                        } else if !fuse {
                            assert_eq!(k, 0.0);
                        }
                    }
                }
            }
        }
    }
}

/// The verifier's buffering model and the executor agree on a schedule
/// whose multi-chunk sends start every chain of a ring (graded tree classes
/// on ring8): split per chunk it deadlocks in both; as one message per step
/// the executor completes it. Both follow MSCCL's rule: a `cnt` = 2 step is
/// one message while a chunk is at most half the 2 MiB Simple tile.
#[test]
fn split_multi_chunk_steps_deadlock_in_the_verifier_and_the_executor_alike() {
    use rscc::front::generate::{generate, GenParams};
    use rscc::lower::{lower, LowerOptions};
    use rscc::synth::tree::HopGraph;
    let topo = generate("ring", &GenParams::default()).unwrap();
    let g = HopGraph::new(&topo).unwrap();
    let p = lower(&g.weighted(&[2, 2]), &LowerOptions::default()).unwrap();
    assert_eq!(
        rscc::verify::verify(&p, &Default::default())
            .unwrap_err()
            .rule,
        "deadlock"
    );
    let chunks = p.nchunksperloop as u64;
    let half_simple = rscc::ir::msccl::SIMPLE_TILE_BYTES / 2 / 4;
    // f32 chunks one element above half the Simple tile: every cnt = 2
    // step is two messages, whatever the staging tile.
    let mut o = opts(DType::F32, RedOp::Sum, vec![chunks * 4 * (half_simple + 1)]);
    o.tile_bytes = 256 << 10;
    o.stall_timeout = Duration::from_millis(500);
    o.warmup = 0;
    match run_program(&p, &o) {
        Err(e @ ExecError::Stalled(_)) => assert!(e.to_string().contains("FIFO full"), "{e}"),
        other => panic!("expected a stall, got {:?}", other.map(|r| r.rows.len())),
    }
    // Exactly half the Simple tile, and tiny chunks in 64-byte staging
    // tiles: each step is one message.
    for elems in [half_simple, 33] {
        let mut o = opts(DType::F32, RedOp::Sum, vec![chunks * 4 * elems]);
        o.tile_bytes = 64;
        o.warmup = 0;
        assert_correct(&p, &o);
    }
}

/// A shipped schedule that the verifier passed under the one-message rule
/// (ring8-small-rs, maxBytes 32 MiB, steps of up to 10 chunks) runs at its
/// maxBytes with the default staging tile and at 16 KiB with a tiny one.
/// Both stalled while the executor merged chunks by its own `--tile`.
#[test]
fn small_band_runs_up_to_its_max_bytes_with_any_tile() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/schedules/ring8/extra/small-rs.xml"
    );
    let p = rscc::front::msccl_xml::load(std::path::Path::new(path)).unwrap();
    let max = p.max_bytes.expect("ring8-small-rs has maxBytes") as u64;
    assert_eq!(max, 32 << 20);
    let mut o = opts(DType::F32, RedOp::Sum, vec![max]);
    o.tile_bytes = RunOptions::default().tile_bytes;
    o.warmup = 0;
    assert_correct(&p, &o);
    let mut o = opts(DType::F32, RedOp::Sum, vec![16 << 10]);
    o.tile_bytes = 512;
    assert_correct(&p, &o);
}

/// Threadblocks are tasks on a pool of workers: any pool size, from one
/// worker for every threadblock of every rank to more workers than there
/// are cores, runs every step kind (`s r rcs rrs rrc rrcs cpy re nop`,
/// multi-chunk steps, dependencies, scratch) to the right result, and a
/// stalled schedule is reported whatever the pool.
#[test]
fn worker_pools_of_any_size_run_every_step_kind_and_report_stalls() {
    let topo = rscc::front::load_topology(std::path::Path::new("topologies/cpu-shm.json")).unwrap();
    let direct = rscc::compile::compile(
        &topo,
        &rscc::compile::CompileOptions::algo(rscc::synth::Algo::Direct, None),
    )
    .expect("direct applies to cpu-shm")
    .program;
    assert!(direct.gpus.iter().map(|g| g.tbs.len()).sum::<usize>() >= 100);
    let progs = [
        builtin::ring(5, 1),
        builtin::allpairs(3),
        relay_ring(4),
        direct,
    ];
    for workers in [1usize, 2, 3, 7] {
        for p in &progs {
            let c = p.nchunksperloop as u64;
            let mut o = opts(DType::F32, RedOp::Sum, vec![c * 4 * 37, c * 4]);
            o.workers = workers;
            o.iters = 3;
            assert_correct(p, &o);
            let rep = run_program(p, &o).unwrap();
            let tbs: usize = p.gpus.iter().map(|g| g.tbs.len()).sum();
            assert_eq!(rep.threads, workers.min(tbs), "{}", p.name);
            assert_eq!(rep.threadblocks, tbs);
        }
        let mut o = opts(DType::F32, RedOp::Sum, vec![4 * 4 * 64]);
        o.stall_timeout = Duration::from_millis(200);
        o.workers = workers;
        match run_program(&stalled_ring(), &o) {
            Err(ExecError::Stalled(rep)) => assert_eq!(rep.waits.len(), 4, "{rep}"),
            other => panic!("{workers} workers: expected a stall, got {other:?}"),
        }
    }
}

/// The memory-placement path (workers pinned to nodes, each rank's
/// buffers first written on its node) computes what the unplaced run
/// does, for every step kind and any pool size; on a one-node machine the
/// CPUs are split into nodes to run it.
#[test]
fn placed_workers_and_buffers_compute_the_same_results() {
    let progs = [builtin::ring(5, 1), builtin::allpairs(3), relay_ring(4)];
    for placement in [
        rscc::exec::Placement::Split(2),
        rscc::exec::Placement::Split(3),
        rscc::exec::Placement::Off,
    ] {
        for workers in [1usize, 2, 4] {
            for p in &progs {
                let c = p.nchunksperloop as u64;
                let mut o = opts(DType::F32, RedOp::Sum, vec![c * 4 * 37, c * 4 * 5000]);
                o.workers = workers;
                o.placement = placement;
                assert_correct(p, &o);
            }
        }
    }
}

/// A threadblock that fails mid-run (a fault injected through the hidden
/// `RunOptions::inject_fault`, standing in for an executor bug) stops the
/// whole run at once with an error naming it: no hang until the watchdog,
/// no rows reported, whatever the pool size.
#[test]
fn a_failing_threadblock_stops_the_run_with_its_name() {
    let p = builtin::ring(4, 1);
    for workers in [1usize, 2, 4] {
        let mut o = opts(DType::F32, RedOp::Sum, vec![4 * 4 * 1000]);
        o.stall_timeout = Duration::from_secs(60);
        o.workers = workers;
        o.iters = 5;
        // Global index 2: rank 2's only threadblock.
        o.inject_fault = Some(2);
        let t0 = Instant::now();
        match run_program(&p, &o) {
            Err(ExecError::Fault { rank, tb, msg }) => {
                assert_eq!((rank, tb), (2, 0));
                assert!(msg.contains("injected fault"), "{msg}");
            }
            other => panic!("{workers} workers: expected a fault, got {other:?}"),
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    }
}

/// `rscc run --topo` picks with the CPU executor's cost model
/// (`sim::SharedMem`), for the sizes it runs: on the 8-rank cpu-shm that
/// is the single ring at every size (with zero-copy sends the model ties
/// direct exchange with it at large sizes and charges direct's extra
/// calls), where the GPU model's pick for the same topology is direct.
/// Without `--no-tune` it first times the model's best few on this
/// machine, the model's pick first, and runs the fastest of them.
#[test]
fn run_with_topo_picks_for_the_cpu_executor() {
    let run = |size: &str, tune: bool| {
        let mut a = vec![
            "run",
            "--topo",
            "topologies/cpu-shm.json",
            "--op",
            "reduce-scatter",
            "--sizes",
            size,
            "--iters",
            "1",
            "--warmup",
            "0",
            "--no-membw",
            "--check",
        ];
        if !tune {
            a.push("--no-tune");
        }
        common::rscc(&a)
    };
    for size in ["4K", "16M"] {
        let (code, out, err) = run(size, false);
        assert_eq!(code, 0, "{err}");
        assert!(!err.contains("tuned on this machine"), "{err}");
        assert!(
            err.contains("synthesized ring for cpu-shm8"),
            "{size}: {err}"
        );
        assert!(out.contains("rscc_ring_cpu-shm8_8"), "{out}");
    }
    let (code, out, err) = run("64K", true);
    assert_eq!(code, 0, "{err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("tuned on this machine"))
        .unwrap_or_else(|| panic!("{err}"));
    // The model's pick first, then the next best: each with its time.
    let (_, timed) = line.split_once("): ").unwrap();
    let names: Vec<&str> = timed
        .split(", ")
        .map(|t| t.split(' ').next().unwrap())
        .collect();
    assert!(names.len() >= 2 && names[0] == "ring", "{line}");
    assert!(timed.contains(" µs"), "{line}");
    let ran = err
        .lines()
        .find_map(|l| l.strip_prefix("synthesized "))
        .and_then(|l| l.split(' ').next())
        .unwrap();
    // Run with --check: exit 0 means the tuned pick's results are right.
    assert!(names.contains(&ran), "{ran} not among {names:?}: {out}");
    let (code, _, err) = common::rscc(&[
        "synth",
        "--topo",
        "topologies/cpu-shm.json",
        "--sizes",
        "1G",
    ]);
    assert_eq!(code, 0, "{err}");
}

/// A threadblock that handed over data zero-copy which its rank's next
/// work rewrites (ring8's allgather sends from the output after copying
/// the input there) ends its work only when the receiver has taken it;
/// when the receiver never does, the watchdog names that wait. Copying
/// every send, the same schedule stalls only on the starved receivers.
#[test]
fn watchdog_names_a_zero_copy_handover_nobody_takes() {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut p = rscc::front::msccl_xml::load(&root.join("schedules/ring8/ag.xml")).unwrap();
    // Rank 1's threadblock on channel 0 from rank 0 takes nothing.
    let g1 = p.gpus.iter().position(|g| g.id == 1).unwrap();
    let tb = p.gpus[g1]
        .tbs
        .iter_mut()
        .find(|t| t.recv == 0 && t.chan == 0)
        .unwrap();
    for s in &mut tb.steps {
        s.kind = StepKind::Nop;
        s.cnt = 0;
    }
    for zero_copy in [true, false] {
        let mut o = opts(DType::F32, RedOp::Sum, vec![16 * 1024]);
        o.stall_timeout = Duration::from_millis(300);
        // One tile: the sender's two messages fit its two slots, so it
        // finishes its steps and then waits.
        o.tile_bytes = 1 << 20;
        o.zero_copy = zero_copy;
        let err = run_program(&p, &o).expect_err("must stall");
        let ExecError::Stalled(rep) = &err else {
            panic!("expected a stall, got {err}");
        };
        let drains = rep
            .waits
            .iter()
            .filter(|w| {
                w.waiting_for
                    .contains("to take the data it handed over zero-copy")
            })
            .collect::<Vec<_>>();
        if zero_copy {
            assert!(
                drains.iter().any(|w| w.rank == 0
                    && w.waiting_for.starts_with("rank 1 ")
                    && w.waiting_for.ends_with("chan 0")),
                "{err}"
            );
        } else {
            assert!(drains.is_empty(), "{err}");
        }
    }
}
