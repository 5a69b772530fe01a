//! Multi-host schedules where a star across the rail does not fit the
//! threadblock budget: `hier` falls back to a shallower-fan-out rail tree
//! that moves the same data, within every MSCCL limit, and a connection
//! whose messages are split over channels runs its groups in order.

mod common;

use common::hosts;
use rscc::compile::{compile, CompileOptions};
use rscc::ir::{Collective, Program};
use rscc::synth::Algo;

fn max_tbs(p: &Program) -> usize {
    p.gpus.iter().map(|g| g.tbs.len()).max().unwrap_or(0)
}

/// `p` computes the reduce-scatter on the CPU executor at `size` bytes
/// per rank, in and out of place.
fn runs_correct(p: &Program, size: u64, what: &str) {
    for inplace in [false, true] {
        let r = rscc::exec::run_program(
            p,
            &rscc::exec::RunOptions {
                sizes: vec![size],
                iters: 1,
                warmup: 0,
                check: true,
                inplace: Some(inplace),
                ..Default::default()
            },
        )
        .unwrap();
        assert!(
            r.rows.iter().all(|x| x.wrong == Some(0)),
            "{what} inplace {inplace}"
        );
    }
}

/// 16 × DGX-A100 with 48 SMs per GPU (the default budget: 24 threadblocks
/// per rank): the star needs a threadblock per
/// rail peer (15 each way) on top of the host-mates, so `hier` takes a
/// radix tree on the rail, and the simulated time at 1 GiB stays within
/// 10 % of the star's (same volume per link; one more α level).
#[test]
fn hier_takes_a_rail_tree_when_the_star_does_not_fit() {
    let mut t = hosts("dgx-a100", 16);
    let star = compile(&t, &CompileOptions::algo(Algo::Hier, None)).expect("star");
    assert_eq!(star.algorithm.name, "hier");
    for r in 0..t.num_ranks() {
        let n = t.ranks[r];
        t.graph[n].sms = Some(48);
    }
    let tree = compile(&t, &CompileOptions::algo(Algo::Hier, None)).expect("tree");
    assert!(
        tree.algorithm.name.starts_with("hier-r"),
        "{}",
        tree.algorithm.name
    );
    assert!(max_tbs(&tree.program) <= 24);
    assert!(!tree.fallbacks.is_empty(), "the star was tried first");
    let at = |c: &rscc::compile::Compiled| {
        rscc::sim::simulate(&c.program, &t, 1 << 30, &Default::default())
            .unwrap()
            .time_us
    };
    let (ts, tt) = (at(&star), at(&tree));
    assert!(tt <= 1.10 * ts, "tree {tt} µs vs star {ts} µs");
}

/// A ring of 100 sends 99 messages on each connection, more than a
/// threadblock's 64 steps: each connection's messages are split into
/// groups on channels of their own (at most 64 steps per threadblock;
/// `ring` takes a ring each way, two groups each: four threadblocks per
/// rank), and a group's first send waits for the previous group's last
/// send on the same connection. The CPU executor computes the
/// reduce-scatter with it, in and out of place.
#[test]
fn connection_groups_run_in_order() {
    let t = common::ring(100);
    let c = compile(&t, &CompileOptions::algo(Algo::Ring, None)).expect("compiles");
    let p = &c.program;
    assert!(p.nchannels >= 2, "{} channels", p.nchannels);
    assert!(max_tbs(p) <= 4, "{} threadblocks per rank", max_tbs(p));
    let mut chained = 0;
    for g in &p.gpus {
        let mut senders: Vec<_> = g.tbs.iter().filter(|t| t.send >= 0).collect();
        senders.sort_by_key(|t| (t.send, t.chan));
        for w in senders.windows(2) {
            let (a, b) = (w[0], w[1]);
            assert!(a.steps.len() <= 64 && b.steps.len() <= 64);
            if a.send != b.send {
                continue;
            }
            let last = a.steps.iter().rposition(|s| s.kind.sends()).unwrap();
            let first = b.steps.iter().position(|s| s.kind.sends()).unwrap();
            // The wait is on the first send itself or on a nop before it.
            let waits = b.steps[..=first]
                .iter()
                .any(|s| s.depid == a.id && s.deps as usize == last);
            assert!(
                waits,
                "rank {}: tb {} does not wait for tb {}",
                g.id, b.id, a.id
            );
            assert!(a.steps[last].hasdep);
            chained += 1;
        }
    }
    assert!(chained >= p.gpus.len(), "{chained} chained threadblocks");
    runs_correct(p, 64 << 10, "ring of 100");
}

/// Beyond what MSCCL XML can express at all (1024 `<gpu>` elements), synth
/// says so, with the limit and the largest rank count, and exits 2.
#[test]
fn beyond_mscclxml_reach_is_a_clear_error() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("rscc-cluster");
    std::fs::create_dir_all(&dir).unwrap();
    let topo = dir.join("h256.json");
    let topo_s = topo.to_str().unwrap();
    let (rc, _, err) = common::rscc(&[
        "topo", "generate", "dgx-h100", "--hosts", "256", "-o", topo_s,
    ]);
    assert_eq!(rc, 0, "{err}");
    let out = dir.join("out");
    let (rc, _, err) = common::rscc(&["synth", "--topo", topo_s, "-o", out.to_str().unwrap()]);
    assert_eq!(rc, 2, "{err}");
    assert!(
        err.contains("2048 GPUs")
            && err.contains("at most 1024 <gpu> elements")
            && err.contains("is 1024"),
        "{err}"
    );
    assert!(!out.exists(), "nothing written");
    std::fs::remove_dir_all(&dir).ok();
}

/// 16 × DGX-H100 (128 GPUs): `hier`'s small-message schedule spreads each
/// host-mate connection's 16 messages per tile over two channels, so
/// their α rounds overlap: within the default budget, and faster than the
/// main schedule at 1 KiB and 1 MiB by at least a fifth (10.2 against
/// 15.1 µs, 12.4 against 17.2 µs), while the main schedule stays ahead
/// at 1 GiB, where `auto` keeps it.
#[test]
fn spread_host_mate_connections_serve_small_messages() {
    let t = hosts("dgx-h100", 16);
    let opts = CompileOptions::default();
    let main = rscc::compile::compile_one(&t, Algo::Hier, &opts).expect("main");
    let small = rscc::compile::compile_small(&t, Algo::Hier, &opts)
        .expect("compiles")
        .expect("hier offers a small-message schedule");
    assert_eq!(main.algorithm.name, "hier");
    assert_eq!(small.algorithm.name, "hier-s2");
    assert!(max_tbs(&small.program) <= opts.tb_budget(&t));
    let at = |c: &rscc::compile::Compiled, size: u64| {
        rscc::sim::simulate(&c.program, &t, size, &Default::default())
            .unwrap()
            .time_us
    };
    for size in [1 << 10, 1 << 20] {
        let (m, s) = (at(&main, size), at(&small, size));
        assert!(s <= 0.8 * m, "{size} B: spread {s} µs vs {m} µs");
    }
    assert!(at(&main, 1 << 30) < at(&small, 1 << 30));
}

/// Rails first (`hier-pat`) on 16 × DGX-H100 (128 GPUs): the lowering
/// moves consecutive shards a rank treats alike as one message, so every
/// rank sends one message per rail partner (a 16-host butterfly of radix
/// 16: 15 partners) and one per host-mate — where a message per shard
/// would be 112 rail messages — within the default budget; it beats
/// `hier`'s small-message schedule at 1 KiB by a third and runs correct.
#[test]
fn rails_first_butterfly_moves_many_shards_per_message() {
    let t = hosts("dgx-h100", 16);
    let opts = CompileOptions::default();
    let pat = rscc::compile::compile_one(&t, Algo::HierPat, &opts).expect("hier-pat");
    assert_eq!(pat.algorithm.name, "hier-pat-16");
    assert!(max_tbs(&pat.program) <= opts.tb_budget(&t));
    for (r, gpu) in pat.program.gpus.iter().enumerate() {
        let (mut rail, mut mates) = (0, 0);
        for tb in &gpu.tbs {
            let sends = tb.steps.iter().filter(|s| s.kind.sends()).count();
            if tb.send as usize / 8 == r / 8 {
                mates += sends;
            } else {
                rail += sends;
            }
        }
        assert_eq!((rail, mates), (15, 7), "rank {r}");
    }
    let small = rscc::compile::compile_small(&t, Algo::Hier, &opts)
        .expect("compiles")
        .expect("hier offers a small-message schedule");
    let at = |p: &Program| {
        rscc::sim::simulate(p, &t, 1 << 10, &Default::default())
            .unwrap()
            .time_us
    };
    let (p, s) = (at(&pat.program), at(&small.program));
    assert!(p * 1.5 <= s, "1 KiB: hier-pat {p:.2} µs against {s:.2}");
    runs_correct(&pat.program, 4 << 10, "hier-pat");
}

/// Blocks of consecutive shards: on 16 × DGX-H100 a GPU sends each
/// host-mate 3 messages (two pieces of 8 shards, then the last hop to the
/// owner) where `hier`'s per-shard trees send 16, it fits the budget,
/// `auto` takes it at 1 MiB, 1.2× faster than the per-shard trees' best
/// there (10.18 against 12.40 µs), and it runs correct.
#[test]
fn blocks_of_consecutive_shards_serve_medium_sizes() {
    let t = hosts("dgx-h100", 16);
    let opts = CompileOptions::default();
    let blocks = rscc::compile::compile_one(&t, Algo::HierBlocks, &opts).expect("hier-blocks");
    assert!(max_tbs(&blocks.program) <= opts.tb_budget(&t));
    let mates = |p: &Program| {
        p.gpus
            .iter()
            .enumerate()
            .flat_map(|(r, gpu)| {
                gpu.tbs
                    .iter()
                    .filter(move |tb| tb.send >= 0 && tb.send as usize / 8 == r / 8)
                    .map(|tb| tb.steps.iter().filter(|s| s.kind.sends()).count())
            })
            .max()
            .unwrap()
    };
    assert_eq!(mates(&blocks.program), 3);
    let sizes = [1u64 << 20];
    let sel = rscc::compile::auto(&t, &opts, &sizes, &Default::default(), None).unwrap();
    let won = &sel.candidates[sel.winners[0]];
    assert_eq!(won.algorithm.name, "hier-blocks");
    let t_blocks = sel.times_us[sel.winners[0]][0];
    // `hier`'s per-shard trees: its main schedule, spread and star.
    let per_shard = |c: &rscc::compile::Compiled| {
        c.algo == Algo::Hier
            && !["blocks", "pat"]
                .iter()
                .any(|x| c.algorithm.name.contains(x))
    };
    let trees = sel
        .candidates
        .iter()
        .zip(&sel.times_us)
        .filter(|(c, _)| per_shard(c))
        .map(|(_, t)| t[0])
        .fold(f64::INFINITY, f64::min);
    assert!(
        t_blocks * 1.2 <= trees,
        "1 MiB: hier-blocks {t_blocks:.2} µs against {trees:.2}"
    );
    runs_correct(&blocks.program, 256 << 10, "hier-blocks");
}

/// One GPU per host (a 1-GPU dump imported with `--hosts 64`, NCCL's PAT
/// case): `hier` applies with no host-mate phase, and its rails-first
/// butterfly is recursive halving over the nodes (radices 16 and 4),
/// which `auto` picks at 1 KiB and 1 GiB — ≥ 10× faster than the ring at
/// 1 KiB (15.2 against 478.8 µs) and within 1 % of the bound at 1 GiB —
/// and which runs correct.
#[test]
fn one_gpu_per_host_gets_the_butterfly() {
    let dir = common::fresh_dir("one-gpu-hosts");
    let f = dir.join("one64.json");
    let (rc, _, e) = common::rscc(&[
        "topo",
        "import",
        "tests/data/real/nccl-xml/aliyun-SimAI_SimCCL_topo_1A100_1CX6.xml",
        "--hosts",
        "64",
        "-o",
        f.to_str().unwrap(),
    ]);
    assert_eq!(rc, 0, "{e}");
    let t = rscc::front::load_topology(&f).unwrap();
    assert_eq!((t.num_ranks(), t.num_hosts()), (64, 64));
    let sizes = [1u64 << 10, 1 << 30];
    let sel = rscc::compile::auto(
        &t,
        &CompileOptions::default(),
        &sizes,
        &Default::default(),
        None,
    )
    .unwrap();
    let ring = (0..sel.candidates.len())
        .find(|&c| sel.candidates[c].algo == Algo::Ring)
        .expect("the ring is scored");
    for (s, &w) in sel.winners.iter().enumerate() {
        let name = &sel.candidates[w].algorithm.name;
        assert!(name.starts_with("hier-pat"), "{} B: {name}", sizes[s]);
    }
    let w = sel.winners[0];
    assert!(sel.times_us[w][0] * 10.0 <= sel.times_us[ring][0]);
    let bound = rscc::bound::alpha_bound_us(&t, Collective::ReduceScatter, 1 << 30).unwrap();
    let big = sel.times_us[sel.winners[1]][1];
    assert!(
        big <= bound * 1.01,
        "1 GiB: {big:.1} µs against the bound's {bound:.1}"
    );
    runs_correct(
        &sel.candidates[w].program,
        4 << 10,
        "hier-pat, one GPU per host",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The reference algorithms bench/cluster.sh prints beside `auto`
/// (`--algo hier-ring`, `--algo hier-halving`) compile on 4 × DGX-A100
/// within the budget, verify, run correct on the CPU executor in and out
/// of place, and are not among `auto`'s candidates.
#[test]
fn reference_algorithms_compile_and_run_correct() {
    let t = hosts("dgx-a100", 4);
    let opts = CompileOptions::default();
    for (algo, name) in [
        (Algo::HierRing, "hier-ring"),
        (Algo::HierHalving, "hier-halving"),
    ] {
        assert_eq!(algo.name(), name);
        let c = rscc::compile::compile_one(&t, algo, &opts).expect(name);
        assert_eq!(c.algorithm.name, name);
        assert!(max_tbs(&c.program) <= opts.tb_budget(&t), "{name}");
        runs_correct(&c.program, 4 << 10, name);
    }
    let sel = rscc::compile::auto(
        &t,
        &opts,
        &[1 << 20],
        &rscc::sim::SimOptions::default(),
        None,
    )
    .expect("auto");
    assert!(sel
        .candidates
        .iter()
        .all(|c| c.algo != Algo::HierRing && c.algo != Algo::HierHalving));
    assert!(sel
        .skipped
        .iter()
        .any(|s| s.starts_with("hier-ring: not scored")));
}

/// The simulator leaves out of the rate computation links that cannot
/// bind (a GPU's PCIe link to its NIC, which carries exactly the NIC's
/// flows at a higher rate), except with a trace, which keeps every link:
/// both give the same times and per-link bytes, bit for bit, on 4 ×
/// DGX-H100's `hier` and its spread schedule at three sizes.
#[test]
fn links_that_cannot_bind_change_no_rate() {
    let t = hosts("dgx-h100", 4);
    let opts = CompileOptions::default();
    let main = rscc::compile::compile_one(&t, Algo::Hier, &opts).expect("main");
    let small = rscc::compile::compile_small(&t, Algo::Hier, &opts)
        .expect("compiles")
        .expect("a small-message schedule");
    for c in [&main, &small] {
        for size in [1u64 << 10, 1 << 24, 1 << 28] {
            let run = |trace: bool| {
                let o = rscc::sim::SimOptions {
                    trace,
                    // Step by step either way (a trace never jumps).
                    skip_periods: false,
                    ..Default::default()
                };
                rscc::sim::simulate(&c.program, &t, size, &o).unwrap()
            };
            let (kept, left_out) = (run(true), run(false));
            assert_eq!(kept.time_us.to_bits(), left_out.time_us.to_bits(), "{size}");
            assert_eq!(kept.link_bytes, left_out.link_bytes, "{size}");
            assert_eq!(kept.rank_end_us, left_out.rank_end_us, "{size}");
        }
    }
}

/// On a few hosts the star fits three channels per connection, and `auto`
/// scores it beside the two-channel spread: on 4 × DGX-A100 at 1 KiB it
/// picks the three-channel star (`hier-s3`), ≥ 1.1× faster than every
/// other candidate but the rails-first butterfly (`hier-pat`, one rail
/// round and one host-mate hop there, as the star: within 1 %), and its
/// schedule runs correct.
#[test]
fn three_channel_star_serves_small_messages_on_few_hosts() {
    let t = hosts("dgx-a100", 4);
    let sel = rscc::compile::auto(
        &t,
        &CompileOptions::default(),
        &[1024],
        &Default::default(),
        None,
    )
    .unwrap();
    let w = sel.winners[0];
    let name = &sel.candidates[w].algorithm.name;
    assert_eq!(name, "hier-s3", "1 KiB pick");
    let pat = |c: usize| sel.candidates[c].algorithm.name.starts_with("hier-pat");
    let others = (0..sel.candidates.len())
        .filter(|&c| c != w && !pat(c))
        .map(|c| sel.times_us[c][0])
        .fold(f64::INFINITY, f64::min);
    assert!(
        sel.times_us[w][0] * 1.1 <= others,
        "{name} {:.2} µs against {others:.2} µs",
        sel.times_us[w][0]
    );
    let butterfly = (0..sel.candidates.len())
        .find(|&c| pat(c))
        .expect("hier-pat scored");
    assert!(sel.times_us[butterfly][0] <= sel.times_us[w][0] * 1.01);
    runs_correct(&sel.candidates[w].program, 4096, "hier-s3");
}

/// `auto`'s pick at 16 MiB on `h` hosts of `kind`: named `want`, within
/// 0.9 of the bound, and computing the reduce-scatter.
fn lanes_at_16_mib(kind: &str, h: usize, want: &str) -> Program {
    let t = hosts(kind, h);
    let s = 16u64 << 20;
    let sel = rscc::compile::auto(
        &t,
        &CompileOptions::default(),
        &[s],
        &Default::default(),
        None,
    )
    .unwrap();
    let w = sel.winners[0];
    let name = &sel.candidates[w].algorithm.name;
    assert_eq!(name, want, "16 MiB pick on {h} × {kind}");
    let bound = rscc::bound::alpha_bound_us(&t, Collective::ReduceScatter, s).unwrap();
    assert!(
        sel.times_us[w][0] * 0.9 <= bound,
        "{name} {:.2} µs against the bound {bound:.2} µs",
        sel.times_us[w][0]
    );
    runs_correct(&sel.candidates[w].program, 64 << 10, name);
    sel.candidates[w].program.clone()
}

/// Rail lanes (docs/algorithms.md "Hierarchical"): with C chunks per
/// shard, each lane a step and a rail channel of its own, the NICs start
/// after one chunk of intra-host traffic. On 2 × DGX-A100 at 16 MiB the
/// graded lanes (chunks 0, 1, 2–3, 4–7: as early a start, fewer α rounds
/// than eight equal lanes) reach 0.9 of the bound and beat four lanes
/// (52.8 against 53.4 µs).
#[test]
fn rail_lanes_carry_16_mib_near_the_bound_on_two_hosts() {
    lanes_at_16_mib("dgx-a100", 2, "hier-c8-graded");
}

/// Rail lanes with the owner's own host in one message per host-mate
/// (docs/algorithms.md "Hierarchical"): on 4 × DGX-H100 at 16 MiB three
/// lanes keep the NICs busy from 8 µs, and with the own host's round
/// unsplit the owner's port finishes with them (with that round in
/// pieces too, 87.9 % of the bound); under RCCL the round keeps its pieces.
#[test]
fn own_host_round_in_one_message_reaches_the_bound_on_four_hosts() {
    let program = lanes_at_16_mib("dgx-h100", 4, "hier-c3");
    let t = hosts("dgx-h100", 4);
    // One message per host-mate into the owner: rank 0 sends its
    // host-mate rank 1 three pieces per remote host and rank 1's own
    // shard whole.
    let sends = |p: &Program| -> usize {
        p.gpus[0]
            .tbs
            .iter()
            .filter(|tb| tb.send == 1)
            .map(|tb| tb.steps.iter().filter(|st| st.kind.sends()).count())
            .sum()
    };
    assert_eq!(sends(&program), 3 * 3 + 1);
    // Where the runtime reduces in a pass of its own after each message
    // (RCCL), and for an allreduce, the own host's round keeps its pieces.
    use rscc::synth::Synthesizer;
    for (local_passes, op, whole) in [
        (false, Collective::ReduceScatter, true),
        (false, Collective::AllGather, true),
        (true, Collective::ReduceScatter, false),
        (false, Collective::AllReduce, false),
    ] {
        let mut ctx = rscc::synth::Context::new(&t, &Default::default()).unwrap();
        ctx.local_passes = local_passes;
        ctx.op = op;
        let offer = rscc::synth::hier::Hier.offer(&ctx).unwrap();
        let c3 = offer
            .more
            .into_iter()
            .flatten()
            .map(|c| c())
            .find(|a| a.name == "hier-c3")
            .expect("hier-c3 offered");
        // Rank 1's contributions to rank 0's own shard (chunks 0..3).
        let steps: std::collections::BTreeSet<usize> = c3
            .transfers
            .iter()
            .filter(|x| x.src == 1 && x.dst == 0 && x.chunk < 3)
            .map(|x| x.step)
            .collect();
        assert_eq!(
            steps.len(),
            if whole { 1 } else { 3 },
            "{op:?} {local_passes}"
        );
    }
}

/// Rail trees with the fewest relays first for a reduction
/// (docs/algorithms.md "Rail trees at scale"): after the star, radix 16
/// on 32 hosts for a reduce-scatter or an allreduce, radix ⌈√32⌉ = 6 for
/// an allgather, whose dual trees broadcast.
#[test]
fn rail_trees_fewest_relays_first_for_a_reduction() {
    use rscc::synth::Synthesizer;
    let t = hosts("dgx-h100", 32);
    for (op, want) in [
        (Collective::ReduceScatter, "hier-r16"),
        (Collective::AllReduce, "hier-r16"),
        (Collective::AllGather, "hier-r6"),
    ] {
        let mut ctx = rscc::synth::Context::new(&t, &Default::default()).unwrap();
        ctx.op = op;
        let offer = rscc::synth::hier::Hier.offer(&ctx).unwrap();
        let second = offer.candidates.into_iter().nth(1).expect("a rail tree")();
        assert_eq!(second.name, want, "{op:?}");
    }
}
