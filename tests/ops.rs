//! Allgather and allreduce end to end: the shipped schedules of every op
//! run correct on the CPU executor in both aliasing modes, every dtype and
//! reduction; files written by another tool (MSCCL's production files)
//! verify and run; wrong files are caught by the verifier and by the
//! executor's check; the CLI takes `--op` everywhere.

mod common;

use common::wrong;
use rscc::compile::{compile, CompileOptions};
use rscc::exec::{DType, RedOp};
use rscc::ir::{Buf, Collective, Program, StepKind};
use rscc::synth::Algo;
use rscc::verify::{verify, verify_all, VerifyOptions};
use std::path::Path;

fn load(path: &Path) -> Program {
    rscc::front::msccl_xml::load(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn ops_files(op: Collective) -> Vec<std::path::PathBuf> {
    // schedules/<topology>/<op>.xml, one folder per shipped topology.
    let mut v: Vec<_> = std::fs::read_dir("schedules")
        .expect("schedules/ exists")
        .map(|e| e.unwrap().path().join(format!("{}.xml", op.short())))
        .filter(|p| p.exists())
        .collect();
    v.sort();
    v
}

/// Every shipped topology has an allgather and an allreduce schedule, and
/// each computes its op on real data, in place and out of place.
#[test]
fn shipped_schedules_of_every_op_run_correct() {
    let topos = common::shipped().len();
    for op in [Collective::AllGather, Collective::AllReduce] {
        let files = ops_files(op);
        assert_eq!(files.len(), topos, "one {} file per topology", op.display());
        for f in files {
            let p = load(&f);
            assert_eq!(p.coll, op, "{}", f.display());
            for inplace in [false, true] {
                let w = wrong(&p, inplace, DType::F32, RedOp::Sum, &[4 << 10, 96 << 10]);
                assert_eq!(w, 0, "{} (inplace {inplace})", f.display());
            }
        }
    }
}

#[test]
fn every_dtype_and_reduction() {
    for op in ["ag", "ar"] {
        let p = load(Path::new(&format!("schedules/dgx1-v100/{op}.xml")));
        for dtype in DType::ALL {
            for redop in RedOp::ALL {
                let w = wrong(&p, false, dtype, redop, &[8 << 10]);
                assert_eq!(w, 0, "{op} {dtype} {redop}");
            }
        }
    }
}

/// MSCCL's production allgather and allreduce (msccl-tools output, in
/// place, 32 channels) verify and run correct: the geometry and the
/// semantics of every step kind agree with another tool's.
#[test]
fn production_msccl_files_verify_and_run() {
    for (file, op) in [
        ("ndv5-ag-1k-512k.xml", Collective::AllGather),
        ("ndv5-ar-4m.xml", Collective::AllReduce),
    ] {
        let p = load(&Path::new("tests/data/msccl").join(file));
        assert_eq!(p.coll, op);
        let r = verify(&p, &VerifyOptions::default()).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(r.modes, vec!["in-place"], "{file}");
        assert_eq!(
            wrong(&p, true, DType::F32, RedOp::Sum, &[64 << 10]),
            0,
            "{file}"
        );
    }
}

/// The ring allgather of `ring8`, built in code.
fn ring8(op: Collective) -> Program {
    let topo = rscc::front::load_topology(Path::new("topologies/ring8.json")).unwrap();
    let mut o = CompileOptions::algo(Algo::Ring, Some(1));
    o.op = op;
    compile(&topo, &o).unwrap().program
}

/// An allgather whose owner copies the wrong input chunk: the verifier
/// names the output chunk and what it holds; the executor's check counts
/// the wrong elements.
#[test]
fn a_wrong_allgather_is_caught_twice() {
    let mut p = ring8(Collective::AllGather);
    assert_eq!(p.nchunksperloop, 8);
    // Rank 0's copy of its shard into o[0] reads i[0]; make every rank
    // forward rank 0's chunk but rank 0's own o[0] read nothing valid:
    // point the copy at rank 0's output chunk 1 instead.
    let st = p.gpus[0]
        .tbs
        .iter_mut()
        .flat_map(|t| t.steps.iter_mut())
        .find(|s| s.kind == StepKind::Copy)
        .expect("the owner's copy");
    st.dstoff = 1;
    let e = verify_all(&p, &VerifyOptions::default()).unwrap_err();
    assert!(!e.is_empty());
    let rules: Vec<&str> = e.iter().map(|x| x.rule).collect();
    assert!(
        rules
            .iter()
            .any(|r| ["postcondition", "race", "uninitialised-read"].contains(r)),
        "{rules:?}"
    );
    assert!(wrong(&p, false, DType::F32, RedOp::Sum, &[4 << 10]) > 0);
}

/// What SCCL's `compose allreduce` emits (synthesis.md): an allreduce
/// whose broadcast reads a scratch chunk nothing wrote. The verifier
/// rejects it with the rule and the first location.
#[test]
fn a_composed_allreduce_reading_unwritten_scratch_is_rejected() {
    let mut p = ring8(Collective::AllReduce);
    let g = &mut p.gpus[0];
    let fresh = g.s_chunks;
    g.s_chunks += 1;
    // The owner's first broadcast send reads the new, never-written slot.
    let (t, s) = g
        .tbs
        .iter()
        .enumerate()
        .flat_map(|(t, tb)| tb.steps.iter().enumerate().map(move |(s, st)| (t, s, st)))
        .find(|(_, _, st)| st.kind == StepKind::Send && st.srcbuf == Buf::Output)
        .map(|(t, s, _)| (t, s))
        .expect("a broadcast send from o");
    let tb_id = g.tbs[t].id;
    let st = &mut g.tbs[t].steps[s];
    st.srcbuf = Buf::Scratch;
    st.srcoff = fresh;
    st.dstbuf = Buf::Scratch;
    st.dstoff = fresh;
    let e = verify_all(&p, &VerifyOptions::default()).unwrap_err();
    let first = &e[0];
    assert_eq!(first.rule, "uninitialised-read", "{e:?}");
    let at = first.at.as_ref().expect("a location");
    assert_eq!(
        (at.rank, at.tb, at.step),
        (Some(0), Some(tb_id), Some(s)),
        "{first}"
    );
    assert!(
        first.to_string().contains(&format!("s[{fresh}]")),
        "{first}"
    );
}

/// On a one-way ring (links differ by direction) the allgather is made
/// for the reversed ring and loads the links as the reduce-scatter does:
/// both finish at the same simulated time. The allreduce's allgather half
/// is made for the reversed ring too, so it takes their sum, not the
/// reversed links' detour, and computes the sum.
#[test]
fn allgather_is_the_dual_on_a_one_way_ring() {
    let nodes: Vec<String> = (0..4)
        .map(|r| format!(r#"{{"id":"g{r}","kind":"gpu","rank":{r}}}"#))
        .collect();
    let links: Vec<String> = (0..4)
        .map(|r| {
            format!(
                r#"{{"from":"g{r}","to":"g{}","bw_gbps":50,"alpha_us":1,"kind":"nvlink","duplex":false}}"#,
                (r + 1) % 4
            )
        })
        .collect();
    let text = format!(
        r#"{{"name":"oneway4","nodes":[{}],"links":[{}]}}"#,
        nodes.join(","),
        links.join(",")
    );
    let topo = rscc::front::topo_json::parse(&text, "oneway4").unwrap();
    assert!(!topo.is_symmetric());
    let time = |op: Collective| {
        let mut o = CompileOptions::algo(Algo::Pack, None);
        o.op = op;
        let c = compile(&topo, &o).unwrap();
        assert_eq!(c.program.coll, op);
        let r = rscc::sim::simulate(&c.program, &topo, 64 << 20, &Default::default()).unwrap();
        (r.time_us, c.program)
    };
    let (rs, _) = time(Collective::ReduceScatter);
    let (ag, _) = time(Collective::AllGather);
    assert!(
        (ag - rs).abs() <= 0.01 * rs,
        "allgather {ag} µs, reduce-scatter {rs} µs"
    );
    let (t, ar) = time(Collective::AllReduce);
    assert!(
        t <= 1.02 * (rs + ag),
        "allreduce {t} µs, halves {rs} + {ag} µs"
    );
    assert_eq!(wrong(&ar, false, DType::F32, RedOp::Sum, &[4 << 10]), 0);
}

/// `--op` on synth (band files named by op, so one MSCCL_ALGO_DIR holds
/// all three), run, bound; verify and simulate read the op from the file;
/// bad requests exit 2.
#[test]
fn the_cli_takes_the_op_everywhere() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("rscc-ops-cli");
    let _ = std::fs::remove_dir_all(&dir);
    let out = format!("{}/", dir.display());
    for op in ["reduce-scatter", "allgather", "allreduce"] {
        let (rc, _, err) = common::rscc(&[
            "synth",
            "--topo",
            "topologies/ring8.json",
            "--op",
            op,
            "--sizes",
            "1K,1G",
            "-o",
            &out,
        ]);
        assert_eq!(rc, 0, "{op}: {err}");
    }
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    for short in ["ag", "ar", "rs"] {
        assert!(
            names.iter().any(|n| n.starts_with(&format!("{short}-"))),
            "{short}: {names:?}"
        );
    }
    let ar = dir.join(names.iter().find(|n| n.starts_with("ar-")).unwrap());
    let ar = ar.to_str().unwrap();
    let (rc, o, e) = common::rscc(&["verify", ar]);
    assert_eq!(rc, 0, "{e}");
    assert!(o.contains("valid allreduce"), "{o}");
    let (rc, o, e) = common::rscc(&[
        "simulate",
        ar,
        "--topo",
        "topologies/ring8.json",
        "--sizes",
        "1M",
    ]);
    assert_eq!(rc, 0, "{e}");
    assert!(o.contains("allreduce"), "{o}");
    let (rc, o, e) = common::rscc(&[
        "run",
        "--topo",
        "topologies/ring8.json",
        "--op",
        "allgather",
        "--sizes",
        "4K",
        "--iters",
        "1",
        "--check",
        "--no-membw",
    ]);
    assert_eq!(rc, 0, "{o}{e}");
    let (rc, o, e) = common::rscc(&[
        "bound",
        "--topo",
        "topologies/dgx1-v100.json",
        "--op",
        "allreduce",
        "--json",
    ]);
    assert_eq!(rc, 0, "{e}");
    let v: serde_json::Value = serde_json::from_str(&o).unwrap();
    // On DGX-1 the allreduce bound is its two halves' x* added: 2 · 7/150.
    assert_eq!(v["x_star"]["fraction"], "7/75", "{o}");
    for bad in [
        vec![
            "synth",
            "--topo",
            "topologies/ring8.json",
            "--op",
            "allgather",
            "--chunks",
            "0",
        ],
        vec![
            "synth",
            "--topo",
            "topologies/ring8.json",
            "--op",
            "alltoall",
        ],
        vec!["run", "--topo", "topologies/ring8.json", "--op", "alltoall"],
        vec!["run", ar, "--backend", "cuda"],
    ] {
        let (rc, _, e) = common::rscc(&bad);
        assert_eq!(rc, 2, "{bad:?}: {e}");
        assert!(e.contains("error"), "{bad:?}: {e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `auto`'s allreduce is no slower than its own reduce-scatter followed by
/// its allgather where the halves' best schedules differ in synthesizer
/// or chunking: dgx-h100x2 at 16 MiB (`hier-c2`'s reduce-scatter and
/// `hier`'s allgather in one program, 70.1 µs, so the second half starts
/// per chunk as its reduction lands, against 34.7 + 37.0 for the
/// reduce-scatter and `hier-c3`'s allgather with its rail lanes in turn
/// on two channels). On ring8 at 64 KiB both halves are the pieced
/// tree (20 chunks per shard; the allgather moves the pieces' shared
/// branches as one message, docs/architecture.md "Lowering"), and the
/// allreduce must keep each half's messages to stay ahead of them. On
/// dgx-a100x4 at 16 MiB the allreduce's broadcast serves its relays in
/// turn to keep within 2 % of the halves: the allgather half is `hier`'s
/// paced lanes (`hier_tree_paced`, 77.0 µs), whose allreduce needs 58
/// threadblocks per rank against the budget of 54, and the allreduce
/// takes 149.7 µs against 69.7 + 77.0 (docs/benchmarks.md "Paced
/// lanes": the goal is not met there).
#[test]
fn allreduce_is_no_slower_than_its_halves() {
    for (name, size, gain) in [
        ("ring8", 64u64 << 10, 1.0),
        ("dgx-h100x2", 16 << 20, 1.0),
        ("dgx-a100x4", 16 << 20, 1.025),
    ] {
        let path = format!("topologies/{name}.json");
        let topo = rscc::front::load_topology(Path::new(&path)).unwrap();
        let best = |op: Collective| -> (f64, String) {
            let o = CompileOptions {
                op,
                ..CompileOptions::default()
            };
            let sel = rscc::compile::auto(&topo, &o, &[size], &Default::default(), None).unwrap();
            let w = sel.winners[0];
            (sel.times_us[w][0], sel.candidates[w].algorithm.name.clone())
        };
        let (rs, rs_name) = best(Collective::ReduceScatter);
        let (ag, ag_name) = best(Collective::AllGather);
        let (ar, ar_name) = best(Collective::AllReduce);
        assert!(
            ar <= gain * (rs + ag) * (1.0 + 1e-9),
            "{name} at {size} B: allreduce {ar_name} {ar:.3} µs, {rs_name} {rs:.3} + {ag_name} {ag:.3} µs"
        );
    }
}

/// An allgather whose owners send to several relays over one link (4 ×
/// DGX-A100: each GPU's three rail peers behind its NIC) is scored also
/// with those sends in turn (`LowerOptions::relays_in_turn`): at 16 MiB,
/// one tile per chunk, `auto` picks that form, ≥ 1.05× faster than every
/// candidate with its relays served side by side (the first relay then
/// forwards inside its host while the next one's tile crosses the rail;
/// measured 89.65 µs against 94.95 for `pack`'s deeper pipeline, the
/// best side by side, and more than 1.1× for every other); at 1 KiB,
/// where each send in turn adds a rail α, it keeps the side-by-side
/// form.
#[test]
fn allgather_relays_in_turn_serve_medium_sizes() {
    let topo = rscc::front::load_topology(Path::new("topologies/dgx-a100x4.json")).unwrap();
    let o = CompileOptions {
        op: Collective::AllGather,
        ..CompileOptions::default()
    };
    let sizes = [1u64 << 10, 16 << 20];
    let mut sel = rscc::compile::auto(&topo, &o, &sizes, &Default::default(), None).unwrap();
    // Every side-by-side form's time, not the bound of those left out.
    sel.complete(&topo).unwrap();
    let in_turn = |c: usize| sel.candidates[c].algorithm.name.ends_with("-inturn");
    assert!(sel.candidates.iter().enumerate().any(|(c, _)| in_turn(c)));
    let best_side_by_side = |si: usize| {
        (0..sel.candidates.len())
            .filter(|&c| !in_turn(c))
            .map(|c| sel.times_us[c][si])
            .fold(f64::INFINITY, f64::min)
    };
    let (small, medium) = (sel.winners[0], sel.winners[1]);
    assert!(
        !in_turn(small),
        "1 KiB: {}",
        sel.candidates[small].algorithm.name
    );
    assert!(
        in_turn(medium),
        "16 MiB: {}",
        sel.candidates[medium].algorithm.name
    );
    let (t, base) = (sel.times_us[medium][1], best_side_by_side(1));
    assert!(
        t * 1.05 <= base,
        "16 MiB: in turn {t:.2} µs against {base:.2} µs side by side"
    );
}

/// The allgather's rail lanes leave the owner in turn
/// (`Algorithm::owner_lanes_in_turn`, docs/algorithms.md "Allgather and
/// allreduce"): on 2 × DGX-H100 at 16 MiB the dual of `hier`'s lanes
/// sends every lane at once, the lanes share the NIC and end together,
/// and the hosts forward them after the last. `auto` scores the lanes in
/// turn beside it and picks them, ≥ 1.1× faster than every candidate
/// without them (measured 37.0 µs against 42.6), and the file computes
/// its op.
#[test]
fn allgather_lanes_leave_the_owner_in_turn() {
    let (sel, w) = allgather_form_wins("dgx-h100x2", 16 << 20, "-lanes", 1.1);
    computes_its_op(&sel.candidates[w].program, &[4096, 1 << 20]);
}

/// The allgather's paced lanes (`hier::hier_tree_paced`, docs/algorithms.md
/// "Hierarchical"): on 4 × DGX-A100 at 1 GiB the doubling lanes' host
/// falls behind forwarding each lane while the next one arrives, and its
/// host-mates still forward for 137 µs after the NICs are done. `auto`
/// picks the paced form, ≥ 0.97 × the bound and ≥ 1.02× faster than every
/// candidate without it (measured 4083.9 µs; the doubling lanes of 32
/// chunks, which `hier` no longer offers beside them, took 4190.7), and
/// the file computes its op.
#[test]
fn allgather_paced_lanes_keep_the_host_forwarding() {
    let s = 1u64 << 30;
    let (sel, w) = allgather_form_wins("dgx-a100x4", s, "-paced", 1.02);
    let topo = rscc::front::load_topology(Path::new("topologies/dgx-a100x4.json")).unwrap();
    let bound = rscc::bound::time_bound_us(
        &rscc::bound::bandwidth_bound(&topo, Collective::AllGather).unwrap(),
        s,
    );
    let t = sel.times_us[w][0];
    assert!(t <= bound / 0.97, "{t} µs against the bound {bound}");
    computes_its_op(&sel.candidates[w].program, &[1 << 20]);
}

/// `auto`'s allgather on the shipped topology `name` at `size`, every
/// candidate simulated: its winner is a form whose name has `form`, and
/// at least `gain` × faster than every candidate without it. Returns the
/// selection and the winner.
fn allgather_form_wins(
    name: &str,
    size: u64,
    form: &str,
    gain: f64,
) -> (rscc::compile::Selection, usize) {
    let path = format!("topologies/{name}.json");
    let topo = rscc::front::load_topology(Path::new(&path)).unwrap();
    let o = CompileOptions {
        op: Collective::AllGather,
        ..CompileOptions::default()
    };
    let mut sel = rscc::compile::auto(&topo, &o, &[size], &Default::default(), None).unwrap();
    sel.complete(&topo).unwrap();
    let has = |c: usize| sel.candidates[c].algorithm.name.contains(form);
    let w = sel.winners[0];
    assert!(
        has(w),
        "{name} at {size} B: {}",
        sel.candidates[w].algorithm.name
    );
    let without = (0..sel.candidates.len())
        .filter(|&c| !has(c))
        .map(|c| sel.times_us[c][0])
        .fold(f64::INFINITY, f64::min);
    let t = sel.times_us[w][0];
    assert!(
        t * gain <= without,
        "{name} at {size} B: {form} {t:.2} µs against {without:.2} µs without"
    );
    (sel, w)
}

/// An allreduce whose broadcast, on channels of its own, exceeds the
/// threadblock budget lands on the reduction's channels, and `auto` also
/// scores it with those channels folded onto fewer of its own
/// (`Algorithm::bcast_folds`): `mix` on 2 × DGX-H100 takes 5 channels and
/// 34 threadblocks per rank per half, 68 against the default 66; with
/// its broadcast on 3 channels it takes 66, wins at 1 GiB within 3 % of
/// the bound, where the shared form (one threadblock running a tile's
/// broadcast before the next tile's reduction) is more than 1.2× slower.
/// The folded file computes its op.
#[test]
fn an_allreduce_folds_its_broadcast_channels_to_fit_the_budget() {
    let topo = rscc::front::load_topology(Path::new("topologies/dgx-h100x2.json")).unwrap();
    let o = CompileOptions {
        op: Collective::AllReduce,
        ..CompileOptions::default()
    };
    let s = 1u64 << 30;
    let sel = rscc::compile::auto(&topo, &o, &[s], &Default::default(), None).unwrap();
    let time = |name: &str| -> (f64, &rscc::compile::Compiled) {
        let i = (0..sel.candidates.len())
            .find(|&i| sel.candidates[i].algorithm.name == name)
            .unwrap_or_else(|| panic!("no candidate {name}"));
        (sel.times_us[i][0], &sel.candidates[i])
    };
    let (folded, c) = time("mix-folded");
    let (shared, d) = time("mix");
    assert_eq!(
        sel.winners[0],
        sel.candidates
            .iter()
            .position(|x| std::ptr::eq(x, c))
            .unwrap()
    );
    assert!(d.algorithm.bcast_shares_channels() && !c.algorithm.bcast_shares_channels());
    assert!(c.program.max_tbs_per_rank() <= o.tb_budget(&topo));
    let (rs, ag) = c.algorithm.halves().expect("a composed allreduce");
    assert_eq!(
        c.algorithm.num_channels(),
        rs.num_channels() + ag.num_channels()
    );
    assert!(
        ag.num_channels() < rs.num_channels(),
        "{}",
        ag.num_channels()
    );
    let bound = rscc::bound::time_bound_us(
        &rscc::bound::bandwidth_bound(&topo, Collective::AllReduce).unwrap(),
        s,
    );
    assert!(
        folded <= bound / 0.97,
        "{folded} µs against the bound {bound}"
    );
    assert!(shared >= 1.2 * folded, "{shared} vs {folded}");
    computes_its_op(&c.program, &[64 << 10]);
}

/// Around rings, the broadcast can go on around them on the reduction's
/// threadblocks (`Algorithm::allgather_along`, NCCL's ring allreduce):
/// on DGX-A100 at 1 GiB each half alone takes the ring split over 32
/// channels, which as an allreduce with the dual broadcast needs 64
/// threadblocks per rank against the budget of 54 (half the SMs); going
/// on around, it needs 32, and the allreduce is no slower than the
/// reduce-scatter followed by the allgather. The file computes its op.
#[test]
fn a_ring_allreduce_goes_on_around_its_rings() {
    let topo = rscc::front::load_topology(Path::new("topologies/dgx-a100.json")).unwrap();
    let s = 1u64 << 30;
    let best = |op: Collective| {
        let o = CompileOptions {
            op,
            ..CompileOptions::default()
        };
        let sel = rscc::compile::auto(&topo, &o, &[s], &Default::default(), None).unwrap();
        let w = sel.winners[0];
        (sel.times_us[w][0], sel.candidates[w].clone())
    };
    let (rs, r) = best(Collective::ReduceScatter);
    let (ag, _) = best(Collective::AllGather);
    let (ar, c) = best(Collective::AllReduce);
    assert!(c.algorithm.name.ends_with("-along"), "{}", c.algorithm.name);
    assert_eq!(c.algorithm.num_channels(), r.algorithm.num_channels());
    assert_eq!(
        c.program.max_tbs_per_rank(),
        r.program.max_tbs_per_rank(),
        "one threadblock per ring and channel"
    );
    assert!(
        ar <= (rs + ag) * (1.0 + 1e-9),
        "allreduce {ar:.2} µs against {rs:.2} + {ag:.2}"
    );
    computes_its_op(&c.program, &[64 << 10]);
}

/// The program computes its op on the CPU executor at `sizes`, checked
/// against the reference.
fn computes_its_op(p: &Program, sizes: &[u64]) {
    let r = rscc::exec::run_program(
        p,
        &rscc::exec::RunOptions {
            sizes: sizes.to_vec(),
            iters: 1,
            warmup: 0,
            check: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(r.rows.iter().all(|x| x.wrong == Some(0)), "{}", p.name);
}

/// `rscc synth -o DIR/`'s one-chunk-per-shard selection runs after the
/// main one and takes the main one's times for the schedules both have
/// (`compile::auto_after`), and for the allreduce halves both rank pairs
/// by: its times and choices are exactly those of the same selection made
/// What `auto` leaves out by a candidate's link-load bound changes no
/// choice: with every cell simulated, the same winner per size and the
/// same lone schedule; every bound below the time it stands for; and the
/// same fall-through files (their tiers' best and the ring are simulated
/// on demand). Checked on an AMD dump for RCCL, whose local passes the
/// simulator charges, and on ring8's allreduce, whose bands need
/// fall-through files.
#[test]
fn pruned_cells_change_no_choice() {
    let amd = Path::new("tests/data/real/rccl-xml/rccl_topo_8p1h_MI250X-gfx90a_8GCD_1hive.xml");
    let sizes: Vec<u64> = (0..6).map(|i| 1024u64 << (4 * i)).collect();
    for (path, op, rt) in [
        (amd, Collective::ReduceScatter, rscc::ir::Runtime::Rccl),
        (
            Path::new("topologies/ring8.json"),
            Collective::AllReduce,
            rscc::ir::Runtime::Executor,
        ),
    ] {
        let topo = rscc::front::load_topology(path).unwrap();
        let mut o = CompileOptions {
            op,
            ..CompileOptions::default()
        };
        o.lower.runtime = rt;
        let so = rscc::sim::SimOptions::for_runtime(rt);
        let sel = rscc::compile::auto(&topo, &o, &sizes, &so, None).unwrap();
        let pruned = sel.pruned.iter().flatten().filter(|&&p| p).count();
        assert!(pruned > 0, "{}: nothing pruned", path.display());
        let mut all = sel.clone();
        all.complete(&topo).unwrap();
        for c in 0..sel.candidates.len() {
            for s in 0..sizes.len() {
                if sel.pruned[c][s] {
                    assert!(
                        sel.times_us[c][s] <= all.times_us[c][s] * (1.0 + 1e-9),
                        "{}: bound {} above the time {}",
                        sel.candidates[c].algorithm.name,
                        sel.times_us[c][s],
                        all.times_us[c][s]
                    );
                } else {
                    assert_eq!(sel.times_us[c][s], all.times_us[c][s]);
                }
            }
        }
        let n = sel.candidates.len();
        for (s, size) in sizes.iter().enumerate() {
            let best = (0..n)
                .min_by(|&a, &b| {
                    all.times_us[a][s]
                        .total_cmp(&all.times_us[b][s])
                        .then(a.cmp(&b))
                })
                .unwrap();
            assert_eq!(sel.winners[s], best, "{} at {size} B", path.display());
        }
        let total = |c: usize| -> f64 { all.times_us[c].iter().sum() };
        let overall = (0..n)
            .filter(|&c| sel.candidates[c].max_size.is_none() && !sel.candidates[c].band_only)
            .min_by(|&a, &b| total(a).total_cmp(&total(b)).then(a.cmp(&b)))
            .unwrap();
        assert_eq!(sel.overall, overall);
        if sel.bands.iter().any(|b| sel.band_k(b) > 1) {
            let mut one_o = o.clone();
            one_o.synth.chunks = Some(1);
            let mut one =
                rscc::compile::auto_after(&topo, &one_o, &sizes, &so, None, Some(&sel)).unwrap();
            let mut one_all = one.clone();
            one_all.complete(&topo).unwrap();
            let files = |ft: rscc::compile::FallThrough| -> Vec<(String, Program)> {
                ft.files
                    .into_iter()
                    .map(|(f, _)| (f.name, f.program))
                    .collect()
            };
            let a = files(sel.fall_through_files(&mut one, &topo).unwrap());
            let b = files(sel.fall_through_files(&mut one_all, &topo).unwrap());
            assert!(!a.is_empty());
            assert_eq!(a, b, "{}", path.display());
        }
    }
}

/// alone.
#[test]
fn a_selection_after_another_reuses_its_times_exactly() {
    let topo = rscc::front::load_topology(Path::new("topologies/ring8.json")).unwrap();
    let sizes = [1u64 << 10, 64 << 10, 1 << 20, 1 << 30];
    let so = rscc::sim::SimOptions::default();
    let main = CompileOptions {
        op: Collective::AllReduce,
        ..CompileOptions::default()
    };
    let mut one = main.clone();
    one.synth.chunks = Some(1);
    let first = rscc::compile::auto(&topo, &main, &sizes, &so, None).unwrap();
    let alone = rscc::compile::auto(&topo, &one, &sizes, &so, None).unwrap();
    let after = rscc::compile::auto_after(&topo, &one, &sizes, &so, None, Some(&first)).unwrap();
    assert_eq!(alone.winners, after.winners);
    assert_eq!(alone.bands, after.bands);
    // A cell one of them left out by its bound, the other may have taken
    // from the first: compare every simulated time.
    let (mut alone, mut after) = (alone, after);
    alone.complete(&topo).unwrap();
    after.complete(&topo).unwrap();
    assert_eq!(alone.times_us, after.times_us);
    // Some of them were the main selection's.
    let shared = after
        .candidates
        .iter()
        .filter(|c| {
            first
                .candidates
                .iter()
                .any(|f| f.program.same_schedule(&c.program))
        })
        .count();
    assert!(shared >= 2, "{shared}");
    // So were some of the halves its pairs are ranked by, with the same
    // times.
    assert_eq!(alone.half_times.len(), after.half_times.len());
    for ((p, t), (q, u)) in alone.half_times.iter().zip(&after.half_times) {
        assert_eq!(p, q);
        assert_eq!(t, u);
    }
    let reused = after
        .half_times
        .iter()
        .filter(|(p, _)| first.half_times.iter().any(|(q, _)| q == p))
        .count();
    assert!(reused >= 2, "{reused}");
}

/// What a synthesizer's search simulated is not simulated again: `auto`'s
/// scoring takes a candidate's time where the search scored the same
/// program at that size, and a selection after it starts its searches
/// from those times. Each time taken so is the simulator's.
#[test]
fn the_searches_times_are_the_simulators_where_taken() {
    let topo = common::random_topology(72);
    let main = CompileOptions::default();
    let so = rscc::sim::SimOptions::for_runtime(main.lower.runtime);
    let sizes = [1u64 << 10, 1 << 30];
    let first = rscc::compile::auto(&topo, &main, &sizes, &so, None).unwrap();
    assert!(!first.search_scores.is_empty());
    let mut taken = 0;
    for (c, cand) in first.candidates.iter().enumerate() {
        let d = cand.program.schedule_digest();
        for (s, &size) in sizes.iter().enumerate() {
            if let Some((t, _)) = first.search_scores.get(&(d, size)) {
                let r = rscc::sim::simulate(&cand.program, &topo, size, &so).unwrap();
                assert_eq!(r.time_us, *t, "{} at {size}", cand.algorithm.name);
                assert_eq!(
                    first.times_us[c][s], *t,
                    "{} at {size}",
                    cand.algorithm.name
                );
                taken += 1;
            }
        }
    }
    assert!(taken >= 1, "{taken}");
    let mut one = main.clone();
    one.synth.chunks = Some(1);
    let alone = rscc::compile::auto(&topo, &one, &sizes, &so, None).unwrap();
    let after = rscc::compile::auto_after(&topo, &one, &sizes, &so, None, Some(&first)).unwrap();
    assert_eq!(alone.bands, after.bands);
    assert_eq!(alone.times_us, after.times_us);
    assert!(first
        .search_scores
        .keys()
        .all(|k| after.search_scores.contains_key(k)));
}

/// Where the halves packed alone load one GPU's link twice, `auto`'s
/// allreduce is the joint packing's (`pack::allreduce_candidates`: both
/// halves' trees on the links at once): on random fabric 5 (GPU 2 on one
/// 16 GB/s PCIe link) it is at least 1.1× faster at 1 GiB than every
/// composed allreduce, and it computes its op.
#[test]
fn the_joint_packing_serves_an_allreduce_the_halves_overload() {
    let topo = common::random_topology(5);
    let o = CompileOptions {
        op: Collective::AllReduce,
        ..CompileOptions::default()
    };
    let sel = rscc::compile::auto(&topo, &o, &[1 << 30], &Default::default(), None).unwrap();
    let w = sel.winners[0];
    let joint = &sel.candidates[w];
    assert!(
        joint.algorithm.name.starts_with("pack-joint"),
        "{}",
        joint.algorithm.name
    );
    let composed = (0..sel.candidates.len())
        .filter(|&i| !sel.candidates[i].algorithm.name.starts_with("pack-joint"))
        .map(|i| sel.times_us[i][0])
        .fold(f64::INFINITY, f64::min);
    assert!(
        sel.times_us[w][0] * 1.1 <= composed,
        "{} vs {composed}",
        sel.times_us[w][0]
    );
    computes_its_op(&joint.program, &[4 << 10, 64 << 10]);
}

/// An allreduce's selection keeps its best halves run one after the
/// other per size (`Selection::halves_us`), which `rscc synth` compares
/// with the chosen allreduce in a note. On DGX-1 at 64 KiB, within the
/// default budget of 40 threadblocks per rank, the halves in turn are
/// faster than any allreduce (docs/benchmarks.md "Allgather and
/// allreduce": every `gap` pair needs 52–72 threadblocks); on ring8 the
/// allreduce is no slower than its halves.
#[test]
fn an_allreduce_selection_keeps_its_halves_in_turn() {
    let o = CompileOptions {
        op: Collective::AllReduce,
        ..CompileOptions::default()
    };
    let s = 64u64 << 10;
    for (name, slower) in [("dgx1-v100", true), ("ring8", false)] {
        let path = format!("topologies/{name}.json");
        let topo = rscc::front::load_topology(Path::new(&path)).unwrap();
        let sel = rscc::compile::auto(&topo, &o, &[s], &Default::default(), None).unwrap();
        let ar = sel.times_us[sel.winners[0]][0];
        let halves = sel.halves_us[0];
        assert!(halves.is_finite(), "{name}: no halves");
        assert_eq!(
            ar > halves * 1.01,
            slower,
            "{name}: allreduce {ar} µs, halves in turn {halves} µs"
        );
    }
}
