//! Simulator oracles: closed-form times the cost model must reproduce.

use petgraph::graph::{DiGraph, NodeIndex};
use rscc::ir::{
    Buf, Collective, GpuProgram, Link, Node, NodeKind, Program, Proto, Runtime, Step, StepKind,
    Threadblock, Topology,
};
use rscc::sim::{self, programs, SimError, SimOptions};

fn gpu_nodes(g: &mut DiGraph<Node, Link>, n: usize) -> Vec<NodeIndex> {
    (0..n)
        .map(|r| {
            g.add_node(Node {
                id: format!("gpu{r}"),
                kind: NodeKind::Gpu,
                rank: Some(r),
                host: None,
                sms: None,
                mem_gbps: None,
            })
        })
        .collect()
}

fn link(bw: f64, alpha: f64) -> Link {
    Link {
        bw_gbps: bw,
        alpha_us: alpha,
        count: 1,
        kind: "nvlink".into(),
    }
}

/// ring8-style: n GPUs in a bidirectional ring.
fn ring_topo(n: usize, bw: f64, alpha: f64) -> Topology {
    let mut g = DiGraph::new();
    let gs = gpu_nodes(&mut g, n);
    // Two GPUs are one neighbour pair: one link each way (a second pair
    // of entries would add up to twice the bandwidth).
    for i in 0..if n == 2 { 1 } else { n } {
        let j = (i + 1) % n;
        g.add_edge(gs[i], gs[j], link(bw, alpha));
        g.add_edge(gs[j], gs[i], link(bw, alpha));
    }
    Topology::new("ring".into(), String::new(), g)
}

/// n GPUs on one switch; per-port bandwidth `bw`, α per link.
fn switch_topo(n: usize, bw: &[f64], alpha: f64) -> Topology {
    let mut g = DiGraph::new();
    let gs = gpu_nodes(&mut g, n);
    let sw = g.add_node(Node {
        id: "sw".into(),
        kind: NodeKind::Switch,
        rank: None,
        host: None,
        sms: None,
        mem_gbps: None,
    });
    for (i, &gn) in gs.iter().enumerate() {
        let b = bw[i % bw.len()];
        g.add_edge(gn, sw, link(b, alpha));
        g.add_edge(sw, gn, link(b, alpha));
    }
    Topology::new("switch".into(), String::new(), g)
}

fn prog(n: usize, chunks: usize, gpus: Vec<GpuProgram>) -> Program {
    Program {
        name: "t".into(),
        proto: Proto::Simple,
        coll: Collective::ReduceScatter,
        runtime: Runtime::Executor,
        nchannels: 1,
        nchunksperloop: chunks as i64,
        ngpus: n as i64,
        inplace: true,
        outofplace: true,
        min_bytes: 0,
        max_bytes: Some(0),
        gpus,
    }
}

fn tb(id: i64, send: i64, recv: i64, steps: Vec<Step>) -> Threadblock {
    let steps = steps
        .into_iter()
        .enumerate()
        .map(|(i, mut s)| {
            s.s = i as i64;
            s
        })
        .collect();
    Threadblock {
        id,
        send,
        recv,
        chan: 0,
        steps,
        line: 0,
    }
}

fn gpu(id: usize, n: usize, tbs: Vec<Threadblock>) -> GpuProgram {
    GpuProgram {
        id: id as i64,
        i_chunks: n as i64,
        o_chunks: 1,
        s_chunks: n as i64,
        tbs,
        line: 0,
    }
}

/// A send of input chunk `c`.
fn send(c: usize) -> Step {
    Step::new(StepKind::Send)
        .src(Buf::Input, c)
        .dst(Buf::Input, c)
}

/// A receive of the message carrying input chunk `c` into scratch chunk `d`.
fn recv(c: usize, d: usize) -> Step {
    Step::new(StepKind::Recv)
        .src(Buf::Input, c)
        .dst(Buf::Scratch, d)
}

/// The ring of msccl-xml.md §7.1, generalised, built here step by step.
fn ring_program(n: usize) -> Program {
    let gpus: Vec<GpuProgram> = (0..n)
        .map(|r| {
            let c = |k: usize| (r + 2 * n - 1 - k) % n;
            let mut steps = vec![Step::new(StepKind::Send)
                .src(Buf::Input, c(0))
                .dst(Buf::Input, c(0))];
            for k in 1..n - 1 {
                steps.push(
                    Step::new(StepKind::RecvReduceSend)
                        .src(Buf::Input, c(k))
                        .dst(Buf::Input, c(k)),
                );
            }
            steps.push(
                Step::new(StepKind::RecvReduceCopy)
                    .src(Buf::Input, r)
                    .dst(Buf::Output, 0),
            );
            let mut g = gpu(
                r,
                n,
                vec![tb(0, ((r + 1) % n) as i64, ((r + n - 1) % n) as i64, steps)],
            );
            g.s_chunks = 0;
            g
        })
        .collect();
    prog(n, n, gpus)
}

fn no_tiling() -> SimOptions {
    SimOptions {
        tiling: false,
        ..SimOptions::default()
    }
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs()
}

#[test]
fn tiny_ring() {
    for n in [2usize, 3, 4, 5, 8] {
        for a in [0.0, 1.0] {
            let topo = ring_topo(n, 25.0, a);
            for m in [1000 * n as u64, 1024, 1 << 20] {
                let r = sim::simulate(&ring_program(n), &topo, m, &no_tiling());
                assert!(r.is_ok(), "n={n} a={a} m={m}: {r:?}");
            }
        }
    }
}

#[test]
fn library_ring_is_the_textbook_ring() {
    let mut a = programs::ring_reduce_scatter(8).unwrap();
    a.name = "t".into();
    assert_eq!(a, ring_program(8));
}

#[test]
fn ring8_textbook_time_every_size() {
    let (n, beta, alpha) = (8usize, 25.0, 1.0);
    let topo = ring_topo(n, beta, alpha);
    let p = ring_program(n);
    let mut m: u64 = 1 << 10;
    while m <= 1 << 30 {
        let r = sim::simulate(&p, &topo, m, &no_tiling()).unwrap_or_else(|e| panic!("m={m}: {e}"));
        let nf = n as f64;
        let expect = (nf - 1.0) * alpha + (nf - 1.0) / nf * m as f64 / (beta * 1e3);
        assert!(
            rel(r.time_us, expect) < 1e-3,
            "M = {m}: simulated {} µs, textbook {expect} µs",
            r.time_us
        );
        assert_eq!(r.tiles, 1);
        assert_eq!(r.steps_executed, (n * n) as u64);
        assert_eq!(r.flows, (n * (n - 1)) as u64);
        m *= 2;
    }
}

#[test]
fn ring_with_tiling_is_pipelined_and_bounded() {
    let (n, beta, alpha) = (8usize, 25.0, 1.0);
    let topo = ring_topo(n, beta, alpha);
    let p = ring_program(n);
    let m = 1u64 << 30;
    let tiled = sim::simulate(&p, &topo, m, &SimOptions::default()).unwrap();
    let flat = sim::simulate(&p, &topo, m, &no_tiling()).unwrap();
    assert_eq!(tiled.tiles, (m / 8) / (2 << 20));
    // Every byte of N−1 chunks still crosses one 25 GB/s link per rank.
    let link_limited = (n as f64 - 1.0) / n as f64 * m as f64 / (beta * 1e3);
    assert!(tiled.time_us >= link_limited);
    assert!(flat.time_us >= link_limited);
    // All ranks run in lockstep: per tile, N−1 sends of one tile, each
    // paying α: tiles · (N−1) · (α + T/β).
    let t = (2u64 << 20) as f64;
    let lockstep = tiled.tiles as f64 * (n as f64 - 1.0) * (alpha + t / (beta * 1e3));
    assert!(
        rel(tiled.time_us, lockstep) < 1e-3,
        "{} vs {lockstep}",
        tiled.time_us
    );
    // Each link carried exactly N−1 chunks (ring direction only).
    let carried: f64 = tiled.link_bytes.iter().sum();
    assert!(rel(carried, (n * (n - 1)) as f64 * m as f64 / n as f64) < 1e-9);
}

#[test]
fn direct_all_pairs_on_a_switch() {
    let (n, b, alpha) = (8usize, 50.0, 0.5);
    let topo = switch_topo(n, &[b], alpha);
    let p = programs::direct_reduce_scatter(n).unwrap();
    for m in [1u64 << 28, 1 << 30] {
        let r = sim::simulate(&p, &topo, m, &no_tiling()).unwrap();
        let nf = n as f64;
        // Route α: GPU → switch → GPU = 2 · 0.5 µs.
        let expect = (nf - 1.0) / nf * m as f64 / (b * 1e3) + 2.0 * alpha;
        assert!(
            rel(r.time_us, expect) < 1e-3,
            "M = {m}: {} vs {expect}",
            r.time_us
        );
    }
    // The switch bound is the same bandwidth term: ratio → 1 at large M.
    let rows = sim::busbw_table(&p, &topo, &[1 << 30], &no_tiling()).unwrap();
    let ratio = rows[0].bound_ratio.unwrap();
    assert!(ratio > 0.99 && ratio <= 1.0 + 1e-9, "{ratio}");
}

#[test]
fn max_min_fair_sharing() {
    // Ports: gpu0 50, gpu1 100, gpu2 50, gpu3 150 (per direction).
    // Flows A: 0→2, B: 1→2, C: 1→3. sw→gpu2 is shared by A and B: 25 each.
    // gpu1→sw (100) carries B (25) and C, so C gets 75 (max-min).
    let topo = switch_topo(4, &[50.0, 100.0, 50.0, 150.0], 0.0);
    let n = 4;
    let p = prog(
        n,
        n,
        vec![
            gpu(0, n, vec![tb(0, 2, -1, vec![send(2)])]),
            gpu(
                1,
                n,
                vec![tb(0, 2, -1, vec![send(2)]), tb(1, 3, -1, vec![send(3)])],
            ),
            gpu(
                2,
                n,
                vec![
                    tb(0, -1, 0, vec![recv(2, 2)]),
                    tb(1, -1, 1, vec![recv(2, 2)]),
                ],
            ),
            gpu(3, n, vec![tb(0, -1, 1, vec![recv(3, 3)])]),
        ],
    );
    let size = 4_000_000u64; // chunk = 1 MB
    let opts = SimOptions {
        trace: true,
        ..no_tiling()
    };
    let res = sim::simulate(&p, &topo, size, &opts).unwrap();
    let c = 1e6;
    // A and B: 1 MB at 25 GB/s = 40 µs; C: 1 MB at 75 GB/s = 13.33 µs.
    assert!(rel(res.time_us, c / 25e3) < 1e-9, "{}", res.time_us);
    let tr = res.trace.unwrap();
    let c_span = tr
        .spans
        .iter()
        .find(|sp| sp.rank == 1 && sp.tb == 1)
        .unwrap();
    assert!(rel(c_span.end_us, c / 75e3) < 1e-9, "{}", c_span.end_us);
    // After C ends nothing changes for A and B (their bottleneck is sw→gpu2).
    assert!(tr.loads.iter().any(|l| (l.gbps - 100.0).abs() < 1e-9));
}

#[test]
fn tiling_replays_the_program_per_tile() {
    // One send of a whole chunk over one 10 GB/s link with α 2 µs: each
    // tile is a separate send: tiles · (α + T / b).
    let topo = ring_topo(2, 10.0, 2.0);
    let s = send(1);
    let r = recv(1, 0);
    let p = prog(
        2,
        2,
        vec![
            gpu(0, 2, vec![tb(0, 1, -1, vec![s])]),
            gpu(1, 2, vec![tb(0, -1, 0, vec![r])]),
        ],
    );
    let opts = SimOptions {
        tile_bytes: 1 << 20,
        ..SimOptions::default()
    };
    let size = 2 * 5 * (1u64 << 20) + 2 * 1000; // chunk = 5 MiB + 1000 B
    let res = sim::simulate(&p, &topo, size, &opts).unwrap();
    assert_eq!(res.tiles, 6);
    let expect = 6.0 * 2.0 + (size / 2) as f64 / 10e3;
    assert!(
        rel(res.time_us, expect) < 1e-9,
        "{} vs {expect}",
        res.time_us
    );
    assert_eq!(res.steps_executed, 12);
}

#[test]
fn buffer_depth_bounds_the_messages_in_flight() {
    // 0 → 1 fast (100 GB/s), 1 → 2 slow (1 GB/s), α 0. Rank 0 sends four
    // 1 MB chunks to rank 1, which forwards each (rcs) to rank 2. Rank 1
    // takes message k only when its forward of k−1 is done, so rank 0 runs
    // D messages ahead: with the default buffer (4 MiB, 2 MiB tiles) D = 2,
    // so send 3 starts when message 1 is taken, at 10 + 1000 µs.
    let mut g = DiGraph::new();
    let gs = gpu_nodes(&mut g, 3);
    g.add_edge(gs[0], gs[1], link(100.0, 0.0));
    g.add_edge(gs[1], gs[2], link(1.0, 0.0));
    let topo = Topology::new("chain".into(), String::new(), g);
    let rcs = |c: usize| {
        Step::new(StepKind::RecvCopySend)
            .src(Buf::Input, c)
            .dst(Buf::Scratch, c)
    };
    let p = prog(
        3,
        4,
        vec![
            gpu(0, 3, vec![tb(0, 1, -1, (0..4).map(send).collect())]),
            gpu(1, 3, vec![tb(0, 2, 0, (0..4).map(rcs).collect())]),
            gpu(
                2,
                3,
                vec![tb(0, -1, 1, (0..4).map(|c| recv(c, c)).collect())],
            ),
        ],
    );
    let size = 4_000_000u64; // chunk = 1 MB, one tile
    let start_of_send3 = |opts: &SimOptions| {
        let res = sim::simulate(&p, &topo, size, opts).unwrap();
        assert!(rel(res.time_us, 4010.0) < 1e-9, "{}", res.time_us);
        let spans = res.trace.unwrap().spans;
        spans
            .iter()
            .find(|sp| sp.rank == 0 && sp.step == 3)
            .unwrap()
            .start_us
    };
    let d2 = SimOptions {
        trace: true,
        ..SimOptions::default()
    };
    assert!(rel(start_of_send3(&d2), 1010.0) < 1e-9);
    // 512 KiB tiles: D = 8; the chunk is 2 tiles, nothing waits for room.
    let d8 = SimOptions {
        tile_bytes: 1 << 19,
        ..d2.clone()
    };
    let res = sim::simulate(&p, &topo, size, &d8).unwrap();
    assert_eq!(res.tiles, 2);
    // Without tiling the buffer is unbounded: send 3 starts at 30 µs.
    let flat = SimOptions {
        tiling: false,
        ..d2
    };
    assert!(rel(start_of_send3(&flat), 30.0) < 1e-9);
}

#[test]
fn dependencies_order_threadblocks() {
    // Rank 0: tb 0 sends chunk 0; tb 1 waits for tb 0 step 0 then copies.
    // With a memory bandwidth the copy costs 2·bytes / mem.
    let topo = ring_topo(2, 10.0, 0.0);
    let mut cpy = Step::new(StepKind::Copy)
        .src(Buf::Input, 0)
        .dst(Buf::Output, 0);
    cpy.depid = 0;
    cpy.deps = 0;
    let mut snd = send(1);
    snd.hasdep = true;
    let r = recv(1, 0);
    let p = prog(
        2,
        2,
        vec![
            gpu(
                0,
                2,
                vec![tb(0, 1, -1, vec![snd]), tb(1, -1, -1, vec![cpy])],
            ),
            gpu(1, 2, vec![tb(0, -1, 0, vec![r])]),
        ],
    );
    let size = 2_000_000u64; // chunk 1 MB: send 100 µs
    let opts = SimOptions {
        mem_gbps: Some(1000.0),
        ..no_tiling()
    };
    let res = sim::simulate(&p, &topo, size, &opts).unwrap();
    // 100 µs send, then copy 2 MB / 1000 GB/s = 2 µs.
    assert!(rel(res.time_us, 102.0) < 1e-9, "{}", res.time_us);
    let free = sim::simulate(&p, &topo, size, &no_tiling()).unwrap();
    assert!(rel(free.time_us, 100.0) < 1e-9);
}

#[test]
fn local_passes_share_their_gpus_memory() {
    // Rank 0 runs two `re` passes at once (two threadblocks), rank 1 one:
    // a `re` of b bytes moves 3b through its GPU's memory, and concurrent
    // passes on one GPU share it max-min fairly.
    let mut topo = ring_topo(2, 10.0, 0.0);
    let re = || {
        Step::new(StepKind::Reduce)
            .src(Buf::Input, 0)
            .dst(Buf::Scratch, 0)
    };
    let p = prog(
        2,
        2,
        vec![
            gpu(
                0,
                2,
                vec![tb(0, -1, -1, vec![re()]), tb(1, -1, -1, vec![re()])],
            ),
            gpu(1, 2, vec![tb(0, -1, -1, vec![re()])]),
        ],
    );
    let size = 2_000_000u64; // chunk 1 MB: 3 MB touched per pass
    let opts = SimOptions {
        mem_gbps: Some(1000.0),
        ..no_tiling()
    };
    let res = sim::simulate(&p, &topo, size, &opts).unwrap();
    // Rank 0: 6 MB at 1000 GB/s = 6 µs; rank 1: 3 µs.
    assert!(rel(res.rank_end_us[0], 6.0) < 1e-9, "{:?}", res.rank_end_us);
    assert!(rel(res.rank_end_us[1], 3.0) < 1e-9, "{:?}", res.rank_end_us);
    // A GPU's own figure wins over the option's.
    let g0 = topo.ranks[0];
    topo.graph[g0].mem_gbps = Some(3000.0);
    let res = sim::simulate(&p, &topo, size, &opts).unwrap();
    assert!(rel(res.rank_end_us[0], 2.0) < 1e-9, "{:?}", res.rank_end_us);
    // RCCL's defaults charge them, the executor's do not.
    let rccl = SimOptions::for_runtime(Runtime::Rccl);
    assert!(rccl.mem_gbps.is_some());
    assert!(SimOptions::for_runtime(Runtime::Executor)
        .mem_gbps
        .is_none());
    // The link counters hold the topology's links only.
    assert_eq!(res.link_bytes.len(), topo.graph.edge_count());
}

#[test]
fn fused_re_runs_read_each_source_once() {
    // One threadblock reduces three scratch ranges into o[0]: the parser
    // fuses the three `re` steps into one pass that reads dst and the
    // three sources and writes dst (5 MB for 1 MB chunks, not 9). A `re`
    // that waits on another threadblock starts a run of its own.
    let topo = ring_topo(2, 10.0, 0.0);
    let re = |src: usize| {
        Step::new(StepKind::Reduce)
            .src(Buf::Scratch, src)
            .dst(Buf::Output, 0)
    };
    let size = 2_000_000u64; // chunk 1 MB
    let opts = SimOptions {
        mem_gbps: Some(1000.0),
        ..no_tiling()
    };
    let idle = || gpu(1, 2, vec![tb(0, -1, -1, vec![Step::new(StepKind::Nop)])]);
    let fused = prog(
        2,
        2,
        vec![
            gpu(0, 2, vec![tb(0, -1, -1, vec![re(0), re(1), re(2)])]),
            idle(),
        ],
    );
    let res = sim::simulate(&fused, &topo, size, &opts).unwrap();
    assert!(rel(res.rank_end_us[0], 5.0) < 1e-9, "{:?}", res.rank_end_us);
    let mut nop = Step::new(StepKind::Nop);
    nop.hasdep = true;
    let mut waits = re(1);
    waits.depid = 1;
    waits.deps = 0;
    let split = prog(
        2,
        2,
        vec![
            gpu(
                0,
                2,
                vec![
                    tb(0, -1, -1, vec![re(0), waits, re(2)]),
                    tb(1, -1, -1, vec![nop]),
                ],
            ),
            idle(),
        ],
    );
    // re(0): 3 MB; re(1) waits, so it starts a run (3 MB) that re(2)
    // continues (1 MB).
    let res = sim::simulate(&split, &topo, size, &opts).unwrap();
    assert!(rel(res.rank_end_us[0], 7.0) < 1e-9, "{:?}", res.rank_end_us);
}

#[test]
fn deterministic() {
    let topo = switch_topo(8, &[50.0, 40.0], 0.3);
    let p = programs::direct_reduce_scatter(8).unwrap();
    let a = sim::simulate(&p, &topo, 123_456_789, &SimOptions::default()).unwrap();
    let b = sim::simulate(&p, &topo, 123_456_789, &SimOptions::default()).unwrap();
    assert_eq!(a, b);
}

#[test]
fn errors_are_clear() {
    // Wrong rank count.
    let topo = ring_topo(8, 25.0, 1.0);
    let e = sim::simulate(&ring_program(4), &topo, 1 << 20, &SimOptions::default()).unwrap_err();
    assert_eq!(
        e,
        SimError::RankMismatch {
            program: 4,
            topology: 8
        }
    );
    assert!(e.to_string().contains("4 GPUs"));
    // No route: two islands.
    let mut g = DiGraph::new();
    let gs = gpu_nodes(&mut g, 4);
    for (a, b) in [(0, 1), (2, 3)] {
        g.add_edge(gs[a], gs[b], link(1.0, 0.0));
        g.add_edge(gs[b], gs[a], link(1.0, 0.0));
    }
    let islands = Topology::new("islands".into(), String::new(), g);
    let e = sim::simulate(&ring_program(4), &islands, 1 << 20, &SimOptions::default()).unwrap_err();
    assert!(matches!(e, SimError::NoRoute { .. }), "{e}");
    // Deadlock: both ranks receive before they send.
    let topo2 = ring_topo(2, 10.0, 0.0);
    let r = recv(0, 0);
    let s = send(0);
    let p = prog(
        2,
        2,
        vec![
            gpu(0, 2, vec![tb(0, 1, 1, vec![r.clone(), s.clone()])]),
            gpu(1, 2, vec![tb(0, 0, 0, vec![r, s])]),
        ],
    );
    let e = sim::simulate(&p, &topo2, 1024, &SimOptions::default()).unwrap_err();
    assert!(matches!(e, SimError::Deadlock(_)), "{e}");
    assert!(e.to_string().contains("rank 0"), "{e}");
    // A send step in a threadblock without a send peer.
    let s = send(0);
    let p = prog(
        2,
        2,
        vec![gpu(0, 2, vec![tb(0, -1, -1, vec![s])]), gpu(1, 2, vec![])],
    );
    let e = sim::simulate(&p, &topo2, 1024, &SimOptions::default()).unwrap_err();
    assert!(matches!(e, SimError::BadProgram(_)), "{e}");
    assert!(
        e.to_string()
            .contains("rank 0, threadblock 0 (line 0), step 0: 's' sends"),
        "{e}"
    );
    // A dependency on a threadblock that does not exist.
    let mut c = Step::new(StepKind::Copy)
        .src(Buf::Input, 0)
        .dst(Buf::Output, 0);
    c.depid = 7;
    c.deps = 0;
    let p = prog(
        2,
        2,
        vec![gpu(0, 2, vec![tb(0, -1, -1, vec![c])]), gpu(1, 2, vec![])],
    );
    let e = sim::simulate(&p, &topo2, 1024, &SimOptions::default()).unwrap_err();
    assert!(
        e.to_string()
            .contains("rank 0, threadblock 0 (line 0), step 0: depid 7 is not"),
        "{e}"
    );
    // Zero tile size.
    let bad = SimOptions {
        tile_bytes: 0,
        ..SimOptions::default()
    };
    assert!(matches!(
        sim::simulate(&ring_program(8), &topo, 1024, &bad),
        Err(SimError::BadOptions(_))
    ));
}

#[test]
fn report_rows_use_nccl_tests_definitions() {
    let topo = ring_topo(8, 25.0, 1.0);
    let p = ring_program(8);
    let rows = sim::busbw_table(&p, &topo, &[1 << 20, 1 << 30], &no_tiling()).unwrap();
    let r = &rows[1];
    assert_eq!(r.size_bytes, 1 << 30);
    assert_eq!(r.count, (1u64 << 30) / 4 / 8);
    assert!(rel(r.algbw_gbps, (1u64 << 30) as f64 / r.time_us / 1e3) < 1e-12);
    assert!(rel(r.busbw_gbps, r.algbw_gbps * 7.0 / 8.0) < 1e-12);
    // Ring on a bidirectional ring uses one direction: half the limit.
    let ratio = r.bound_ratio.unwrap();
    assert!((ratio - 0.5).abs() < 0.01, "{ratio}");
    // At 1 KiB the α term dominates: 4 hops of 1 µs to the farthest rank.
    let small = sim::busbw_table(&p, &topo, &[1024], &no_tiling()).unwrap();
    let b = small[0].bound_us.unwrap();
    assert!(b > 4.0 && b < 4.01, "{b}");
    assert!(b <= small[0].time_us);
}

/// The worked example of docs/cost-model.md, number for number.
#[test]
fn worked_example_in_docs() {
    let topo = ring_topo(8, 25.0, 1.0);
    let p = ring_program(8);
    let s = 8u64 << 20; // 8 MiB: chunk 1 MiB, one 2 MiB tile
    let r = sim::simulate(&p, &topo, s, &SimOptions::default()).unwrap();
    assert_eq!(r.tiles, 1);
    assert!((r.time_us - 300.60).abs() < 0.01, "{}", r.time_us);
    let row = &sim::busbw_table(&p, &topo, &[s], &SimOptions::default()).unwrap()[0];
    assert!((row.algbw_gbps - 27.91).abs() < 0.01, "{}", row.algbw_gbps);
    assert!((row.busbw_gbps - 24.42).abs() < 0.01, "{}", row.busbw_gbps);
    // α_min + T_bw = 1 + 146.80 µs (docs/cost-model.md §2).
    assert!((row.bound_us.unwrap() - 147.80).abs() < 0.01);
    assert!((row.bound_ratio.unwrap() - 0.492).abs() < 0.001);
    // 64 MiB: chunk 8 MiB = 4 tiles; lockstep 4 · 7 · (1 + 2 MiB / 25 GB/s).
    let r = sim::simulate(&p, &topo, 64 << 20, &SimOptions::default()).unwrap();
    assert_eq!(r.tiles, 4);
    assert!((r.time_us - 2376.82).abs() < 0.01, "{}", r.time_us);
}

/// The bound is a lower bound of the simulator: on random rings and
/// switches, with random bandwidths, α, sizes and tiling, no schedule beats it.
#[test]
fn simulated_times_never_beat_the_bound() {
    let mut seed: u64 = 0x2545f4914f6cdd1d;
    let mut rnd = move |m: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % m
    };
    for _ in 0..60 {
        let n = 2 + rnd(7) as usize;
        let alpha = rnd(4) as f64 * 0.5;
        let bws: Vec<f64> = (0..n).map(|_| (5 + rnd(60)) as f64).collect();
        let topo = if rnd(2) == 0 {
            ring_topo(n, bws[0], alpha)
        } else {
            switch_topo(n, &bws, alpha)
        };
        let p = if rnd(2) == 0 {
            programs::ring_reduce_scatter(n).unwrap()
        } else {
            programs::direct_reduce_scatter(n).unwrap()
        };
        let size = 1u64 << (10 + rnd(21));
        let opts = SimOptions {
            tiling: rnd(2) == 0,
            tile_bytes: 1 << (16 + rnd(6)),
            ..SimOptions::default()
        };
        let row = &sim::busbw_table(&p, &topo, &[size], &opts).unwrap()[0];
        let b = row.bound_us.unwrap();
        assert!(
            b <= row.time_us * (1.0 + 1e-9),
            "{} on {} ranks, {size} B: bound {b} > time {}",
            p.name,
            n,
            row.time_us
        );
    }
}

/// The CPU model (`SimOptions::shared_mem`): every byte any step touches
/// shares one resource, whatever the links. On 2 ranks the ring is one
/// `s` (2 touches per byte) and one `rrc` (3) per rank on a chunk of S/2:
/// 10 · S/2 bytes through `gbps`, plus the calls; the links' 1 GB/s do
/// not matter. The 8-rank `direct` (an `s` and an `rrc` per contribution:
/// 7 · 5 touches per output byte) then costs 35/23 of the ring (an `s`,
/// six `rrs` and an `rrc`: 2 + 7 · 3) with every send copied, and ties
/// it when sends are zero-copy (21 touches each).
#[test]
fn the_cpu_model_charges_every_touch_on_one_shared_resource() {
    use rscc::compile::{compile, CompileOptions};
    use rscc::sim::SharedMem;
    let cpu = |gbps: f64, call_us: f64, zero_copy: bool| SimOptions {
        shared_mem: Some(SharedMem {
            gbps,
            call_us,
            zero_copy,
        }),
        ..SimOptions::default()
    };
    let load = |n: usize| {
        let p = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("rscc-cpu-model-{n}.json"));
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_rscc"))
            .args([
                "topo",
                "generate",
                "cpu-shm",
                "--gpus",
                &n.to_string(),
                "--bw",
                "1",
                "--alpha",
                "0",
            ])
            .args(["-o", p.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(out.status.success());
        rscc::front::load_topology(&p).unwrap()
    };
    let so = cpu(10.0, 0.0, false);
    let t2 = load(2);
    let s: u64 = 64 << 20;
    let ring = rscc::exec::builtin::ring(2, 1);
    let r = sim::simulate(&ring, &t2, s, &so).unwrap();
    let want = 10.0 * (s / 2) as f64 / 10e3;
    assert!(
        (r.time_us / want - 1.0).abs() < 0.02,
        "{} vs {want}",
        r.time_us
    );
    // Calls cost their time on the same resource.
    let so_calls = cpu(10.0, 1.0, false);
    let small = sim::simulate(&ring, &t2, 8, &so_calls).unwrap();
    assert!(
        small.time_us >= 2.0 && small.time_us < 5.0,
        "{}",
        small.time_us
    );
    // Direct against the ring on 8 ranks, large size: 35/23.
    let t8 = load(8);
    let prog = |a| {
        compile(&t8, &CompileOptions::algo(a, Some(1)))
            .unwrap()
            .program
    };
    let (ring8, direct8) = (
        prog(rscc::synth::Algo::Ring),
        prog(rscc::synth::Algo::Direct),
    );
    // (ring, direct) at 256 MiB per rank under `o`.
    let both = |o: &SimOptions| {
        let t = |p| sim::simulate(p, &t8, 256 << 20, o).unwrap().time_us;
        (t(&ring8), t(&direct8))
    };
    let (tr, td) = both(&so);
    assert!(
        (td / tr - 35.0 / 23.0).abs() < 0.03,
        "direct {td} ring {tr}"
    );
    // With zero-copy sends (the executor's default) direct's sends and the
    // ring's first send touch nothing: 21 touches per byte each.
    let (tr_zc, td_zc) = both(&cpu(10.0, 0.0, true));
    assert!(
        (tr_zc / tr - 21.0 / 23.0).abs() < 0.03,
        "ring {tr_zc} vs {tr}"
    );
    assert!(
        (td_zc / tr_zc - 1.0).abs() < 0.03,
        "direct {td_zc} ring {tr_zc}"
    );
    // Under the GPU model the same full mesh favours direct (N - 1 links).
    let g = SimOptions::default();
    let (gr, gd) = both(&g);
    assert!(gd < gr / 3.0, "GPU model: direct {gd} ring {gr}");
    // Bad figures are refused.
    let bad = cpu(0.0, 0.0, false);
    assert!(matches!(
        sim::simulate(&ring, &t2, s, &bad),
        Err(SimError::BadOptions(_))
    ));
}
