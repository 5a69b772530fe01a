//! Every real dump that imports yields a verified schedule (issue 6 goal),
//! and imported machines of a shipped system give the same cut bound where
//! they describe the same links.

use rscc::bound::bandwidth_bound;
use rscc::compile::{compile, CompileOptions};
use rscc::ir::Collective;
use rscc::synth::Algo;
use std::path::{Path, PathBuf};

fn dumps() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in ["nccl-xml", "rccl-xml", "nvidia-smi-topo", "rocm-smi-topo"] {
        let d = Path::new("tests/data/real").join(dir);
        for e in std::fs::read_dir(&d).expect("test data").flatten() {
            out.push(e.path());
        }
    }
    out.sort();
    assert!(
        out.len() >= 30,
        "expected the real dumps, found {}",
        out.len()
    );
    out
}

#[test]
fn every_importable_dump_gets_a_verified_schedule() {
    let mut ok = 0;
    for f in dumps() {
        let Ok(topo) = rscc::front::load_topology(&f) else {
            continue;
        };
        let c = compile(&topo, &CompileOptions::algo(Algo::Ring, None))
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert_eq!(c.program.ngpus as usize, topo.num_ranks());
        // The flow LP's schedule verifies too, or is refused as a request
        // (e.g. a rank with no GPU-free route), never an internal error.
        match compile(&topo, &CompileOptions::algo(Algo::Flow, None)) {
            Ok(c) => assert_eq!(c.program.ngpus as usize, topo.num_ranks()),
            Err(rscc::compile::CompileError::Request(_)) => {}
            Err(e) => panic!("{}: flow: {e}", f.display()),
        }
        ok += 1;
    }
    assert!(ok >= 35, "only {ok} dumps imported");
}

#[test]
fn imported_hosts_match_the_shipped_bound() {
    // Inside one host the NVSwitch port (450 GB/s on H100, 300 on A100) or
    // the DGX-1's six NVLinks bind the reduce-scatter, whatever PCIe and
    // NIC details the dump adds: no rank-to-rank route crosses those (the
    // NVLink routes are cheaper), so the cut bound leaves them out
    // (`Topology::routed_links`). Counting them would put the dumps' limits
    // up to 8 % above the shipped ones.
    let x = |t: &rscc::ir::Topology| {
        bandwidth_bound(t, Collective::ReduceScatter)
            .unwrap()
            .x_star
    };
    let shipped = |name: &str| {
        x(&rscc::front::load_topology(Path::new(&format!("topologies/{name}.json"))).unwrap())
    };
    let imported =
        |f: &str| x(&rscc::front::load_topology(&Path::new("tests/data/real").join(f)).unwrap());
    for (f, name) in [
        ("nccl-xml/ibm-cloud-vpc_gx3d-8xH100_topo.xml", "dgx-h100"),
        (
            "nccl-xml/oci-hpc_BM.GPU.H100.8_H100-topology-kubernetes.xml",
            "dgx-h100",
        ),
        (
            "nccl-xml/aliyun-SimAI_SimCCL_topo_8A100_4CX6.xml",
            "dgx-a100",
        ),
        (
            "nvidia-smi-topo/DGX1-V100-SXM2_8GPU_hybrid-cube-mesh_1xEDR_oneflow-dlperf.txt",
            "dgx1-v100",
        ),
    ] {
        assert_eq!(imported(f), shipped(name), "{f} vs {name}");
    }
}

/// On machines whose GPUs relay for each other over uneven links (MI250X
/// xGMI meshes, islands joined by PCIe), `auto`'s winner at 1 GiB — the
/// tree packing on the MI250X mesh and on Rome's PCIe islands, the
/// hierarchical schedule over the host's groups (`hier::groups`) on two
/// xGMI hives — beats the ring by a wide margin. Figures from the
/// simulator and the cut bound (docs/benchmarks.md "Imported machines").
/// The MI250X hive's ring is itself two cycles (four rings) packed over
/// its xGMI pairs (63 % of the bound at 1 GiB; the greedy's single cycle
/// gives 31.5 %), so the packing's lead there is 1.28×, not 2.4×.
#[test]
fn synthesized_schedules_win_on_uneven_meshes() {
    use rscc::sim::{simulate, SimOptions};
    for (file, algo, min_bound_pct, min_x_ring) in [
        (
            "rccl-xml/rccl_topo_8p1h_MI250X-gfx90a_8GCD_1hive.xml",
            Algo::Pack,
            85.0,
            1.25,
        ),
        (
            "rccl-xml/rccl_topo_8p_rome_Vega20-gfx906_8GPU_Rome.xml",
            Algo::Pack,
            80.0,
            5.0,
        ),
        (
            "rocm-smi-topo/AMD-8GPU-64GiB_two-4GPU-xGMI-hives_showtopo_unattributed-test-fixture.txt",
            Algo::Hier,
            99.0,
            1.7,
        ),
    ] {
        let topo = rscc::front::load_topology(&Path::new("tests/data/real").join(file)).unwrap();
        let s = 1u64 << 30;
        let sel = rscc::compile::auto(
            &topo,
            &CompileOptions::default(),
            &[s],
            &SimOptions::default(),
            None,
        )
        .unwrap();
        let win = &sel.candidates[sel.winners[0]];
        assert_eq!(win.algo, algo, "{file}: {}", win.algorithm.name);
        let t = simulate(&win.program, &topo, s, &SimOptions::default()).unwrap().time_us;
        let b = bandwidth_bound(&topo, Collective::ReduceScatter).unwrap();
        let pct = 100.0 * rscc::bound::time_bound_us(&b, s) / t;
        let ring = compile(&topo, &CompileOptions::algo(Algo::Ring, None)).unwrap();
        let t_ring = simulate(&ring.program, &topo, s, &SimOptions::default())
            .unwrap()
            .time_us;
        assert!(pct >= min_bound_pct, "{file}: {pct:.1} % of the bound");
        assert!(t_ring / t >= min_x_ring, "{file}: {:.2} x ring", t_ring / t);
    }
}

/// One host whose GPUs sit in domains joined by a slower link (PCIe
/// switches under two CPU sockets, xGMI hives) splits into groups that
/// `hier` treats as hosts: reduce within a group, cross once per partial
/// sum. At 64 KiB that beats the direct schedule (every contribution
/// crossing the inter-socket link on its own) by 1.4–1.5× on p4d and NDv2
/// (docs/benchmarks.md "Imported machines").
#[test]
fn one_host_splits_into_groups_for_hier() {
    use rscc::sim::{simulate, SimOptions};
    let load = |f: &str| rscc::front::load_topology(&Path::new("tests/data/real").join(f)).unwrap();
    let p4d = load("nccl-xml/aws-ofi-nccl_p4d-24xl-topo.xml");
    assert_eq!(
        rscc::synth::hier::groups(&p4d),
        Some(vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]])
    );
    let ndv4 = load("nccl-xml/azure-azhpc-images_ndv4-topo.xml");
    assert_eq!(
        rscc::synth::hier::groups(&ndv4),
        Some(vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]])
    );
    let hives = load("rccl-xml/rccl_topo_4p4h_MI100-gfx908_16GPU_4hives.xml");
    assert_eq!(rscc::synth::hier::groups(&hives).map(|g| g.len()), Some(2));
    for topo in [p4d, load("nccl-xml/azure-azhpc-images_ndv2-topo.xml")] {
        let t = |algo| {
            let c = compile(&topo, &CompileOptions::algo(algo, None)).unwrap();
            simulate(&c.program, &topo, 64 << 10, &SimOptions::default())
                .unwrap()
                .time_us
        };
        let (hier, direct) = (t(Algo::Hier), t(Algo::Direct));
        assert!(
            hier * 1.35 <= direct,
            "{}: hier {hier} vs direct {direct}",
            topo.name
        );
    }
}

/// The nvidia-smi dump of a DGX-1 describes the shipped DGX-1's NVLinks in
/// another numbering, plus PCIe, CPUs and a NIC. Its schedules match the
/// shipped machine's: three Hamiltonian cycles (six rings, each on four
/// channels) at 1 GiB, whatever the labels, and the two-wave gap schedule over the NVLink
/// pairs at 64 KiB, although every pair of its GPUs also reaches each
/// other over PCIe (a far pair's cheapest route is two NVLinks through a
/// GPU, so it is not a hop). Without the ring packing (`ring::pack_cycles`)
/// and the rule that a hop is one link (`synth::tree::hops`) it would get
/// 4 rings (61 % of the bound) and the direct schedule at 64 KiB (7.6 µs
/// against the trees' 1.86).
#[test]
fn imported_dgx1_gets_the_shipped_dgx1_schedules() {
    use rscc::sim::SimOptions;
    let shipped = rscc::front::load_topology(Path::new("topologies/dgx1-v100.json")).unwrap();
    let dump = rscc::front::load_topology(Path::new(
        "tests/data/real/nvidia-smi-topo/DGX1-V100-SXM2_8GPU_hybrid-cube-mesh_1xEDR_oneflow-dlperf.txt",
    ))
    .unwrap();
    assert!(rscc::synth::tree::applies(&dump));
    let sizes = [64u64 << 10, 1 << 30];
    let pick = |topo| {
        let sel = rscc::compile::auto(
            topo,
            &CompileOptions::default(),
            &sizes,
            &SimOptions::default(),
            None,
        )
        .unwrap();
        sel.winners
            .iter()
            .enumerate()
            .map(|(s, &w)| (sel.candidates[w].algorithm.name.clone(), sel.times_us[w][s]))
            .collect::<Vec<_>>()
    };
    let (a, b) = (pick(&shipped), pick(&dump));
    // The gap search's path depends on the rank numbering (which shard's
    // moves it tries first), so at 64 KiB the two may land on different
    // local optima (with the default search both reach 1.714–1.715 µs; a
    // climb from one LP answer put them at 1.714 and 1.735).
    for (((na, ta), (nb, tb)), tol) in a.iter().zip(&b).zip([0.02, 0.01]) {
        assert_eq!(na, nb);
        assert!((tb / ta - 1.0).abs() < tol, "{nb}: {tb} vs shipped {ta}");
    }
    assert!(rscc::synth::gap::offered(&dump).is_ok());
    assert_eq!(b[0].0, "gap", "{b:?}");
    assert_eq!(b[1].0, "ringx6-c4", "{b:?}");
}

/// On the 8-GCD MI250 dump a GCD reaches the GCDs it has no xGMI link to
/// more cheaply over PCIe (1.0 µs against 1.4 over two xGMI links) but at
/// 24 GB/s against 50, shared by every such pair. Trees grow over the xGMI
/// links only (`synth::tree::hops`), so they are offered there and beat the
/// direct schedule over PCIe at 64 KiB by about 1.3× (docs/benchmarks.md
/// "Imported machines").
#[test]
fn trees_grow_over_links_not_pcie() {
    use rscc::sim::{simulate, SimOptions};
    let topo = rscc::front::load_topology(Path::new(
        "tests/data/real/rccl-xml/rccl_topo_8p_90a_gfx90a_8GCD.xml",
    ))
    .unwrap();
    assert!(rscc::synth::tree::applies(&topo));
    let s = 64u64 << 10;
    let t = |algo| {
        let c = compile(&topo, &CompileOptions::algo(algo, None)).unwrap();
        simulate(&c.program, &topo, s, &SimOptions::default())
            .unwrap()
            .time_us
    };
    let (tree, direct) = (t(Algo::Tree), t(Algo::Direct));
    assert!(tree * 1.2 < direct, "tree {tree} µs vs direct {direct} µs");
    // On a switch no two GPUs share a link, so no trees.
    let h100 = rscc::front::load_topology(Path::new("topologies/dgx-h100.json")).unwrap();
    let why = rscc::synth::tree::offered(&h100).err().unwrap();
    assert!(why.contains("do not connect every rank"), "{why}");
}

/// `pack`'s allreduce on the four-hive MI100 (RCCL: 64 threadblocks for
/// both halves at once) takes no longer than its reduce-scatter followed
/// by its allgather. On one channel per owner every good plan's allreduce
/// is over the limit; scored there by its excess, a star-like plan that
/// fits won and ran at 12.5 % of the bound, 7.8 × the halves' sum. Each
/// plan is scored on the channels it fits (docs/algorithms.md "Tree
/// packing").
#[test]
fn pack_allreduce_fits_rccl_without_losing_its_plan() {
    use rscc::sim::{simulate, SimOptions};
    let file = "rccl-xml/rccl_topo_4p4h_MI100-gfx908_16GPU_4hives.xml";
    let topo = rscc::front::load_topology(&Path::new("tests/data/real").join(file)).unwrap();
    let rt = topo.default_runtime();
    assert_eq!(rt, rscc::ir::Runtime::Rccl);
    let so = SimOptions::for_runtime(rt);
    let t = |op: Collective| {
        let mut o = CompileOptions::algo(Algo::Pack, None);
        o.op = op;
        o.lower.runtime = rt;
        let c = compile(&topo, &o).unwrap();
        assert!(c.program.max_tbs_per_rank() <= 64);
        simulate(&c.program, &topo, 1 << 30, &so).unwrap().time_us
    };
    let (rs, ag, ar) = (
        t(Collective::ReduceScatter),
        t(Collective::AllGather),
        t(Collective::AllReduce),
    );
    assert!(
        ar <= 1.01 * (rs + ag),
        "allreduce {ar} µs, halves {rs} + {ag} µs"
    );
}

/// Two A100s joined by NVLink (the SimAI dump): one ring leaves the link
/// idle for α in every tile (2 MiB in 7 µs, α 0.7 µs), so it stays near
/// 91 % of the bound at 1 GiB; the channel-split rings overlap that α and
/// `auto` takes one there, above 97 %. The single file (`overall`) still
/// serves every count: its count divisor divides the ring's.
#[test]
fn channel_split_rings_overlap_the_tiles_alpha() {
    use rscc::bound::alpha_bound_us;
    let (topo, sel) = auto_on(
        "tests/data/real/nccl-xml/aliyun-SimAI_SimCCL_topo_2A100_1CX6.xml",
        &[1 << 20, 1 << 30],
    );
    let bound = alpha_bound_us(&topo, Collective::ReduceScatter, 1 << 30).unwrap();
    let ring = sel.times_us[0][1];
    assert_eq!(sel.candidates[0].algorithm.name, "ring");
    assert!(bound / ring < 0.92, "one ring: {}", bound / ring);
    let w = sel.winners[1];
    let name = &sel.candidates[w].algorithm.name;
    assert!(name.starts_with("ring-c"), "{name}");
    assert!(
        bound / sel.times_us[w][1] > 0.97,
        "{name}: {}",
        bound / sel.times_us[w][1]
    );
    assert!(sel.candidates[w].program.count_divisor() > 1);
    // For size bands only: the lone file is another schedule.
    assert!(sel.candidates[w].band_only);
    assert!(!sel.candidates[sel.overall].band_only);
    assert_eq!(sel.candidates[sel.overall].program.count_divisor(), 1);
}

/// On the MI250X hive (one 8-GCD package, xGMI links of two widths) the
/// packed trees' classes chunk by chunk pipeline where a chunk is under
/// MSCCL's tile: `auto` takes the pipelined form at 256 MiB, where the
/// class form (one message of a whole class per hop) is slower by more
/// than 10 % (docs/algorithms.md "Flow trees", pipelined classes).
#[test]
fn pipelined_classes_win_where_a_chunk_is_one_message() {
    let (_, sel) = auto_on(
        "tests/data/real/rccl-xml/rccl_topo_8p1h_MI250X-gfx90a_8GCD_1hive.xml",
        &[256 << 20],
    );
    let time_of = |name: &str| {
        let c = sel
            .candidates
            .iter()
            .position(|c| c.algorithm.name == name)
            .unwrap_or_else(|| panic!("no {name} among the candidates"));
        sel.times_us[c][0]
    };
    let w = &sel.candidates[sel.winners[0]].algorithm.name;
    assert!(w.ends_with("-pipelined"), "{w}");
    let class = w.trim_end_matches("-pipelined");
    assert!(
        time_of(class) > 1.1 * time_of(w),
        "{class} {} µs, {w} {} µs",
        time_of(class),
        time_of(w)
    );
}

/// A dump imported and replicated to `hosts` hosts, joined
/// rail-optimised (`rscc topo import F --hosts H`).
fn replicated(path: &str, hosts: usize) -> rscc::ir::Topology {
    let one = rscc::front::import::import_file(Path::new(path), &Default::default()).unwrap();
    rscc::front::import::replicate(&one, hosts, path)
        .unwrap()
        .topology
}

/// A dump and `auto`'s selection on it at `sizes` (default options).
fn auto_on(path: &str, sizes: &[u64]) -> (rscc::ir::Topology, rscc::compile::Selection) {
    let topo = rscc::front::load_topology(Path::new(path)).unwrap();
    let sel = rscc::compile::auto(
        &topo,
        &CompileOptions::default(),
        sizes,
        &rscc::sim::SimOptions::default(),
        None,
    )
    .unwrap();
    (topo, sel)
}

/// NCCL reaches a NIC behind the GPU's own PCIe switches (PXB) before one
/// through a peer GPU over NVLink (PXN). The aliyun 8 × A100 dump has four
/// NIC bonds on PCIe switches shared by two GPUs each; replicated to two
/// hosts, every GPU's route to its peer on the other host leaves through
/// a NIC no more than one other such route uses (with the least-α rule
/// alone, five of the eight went through one NIC, over NVSwitch to GPU 1),
/// and `hier` reaches 95 % of the bound at 1 GiB there (39.9 % before).
#[test]
fn rail_routes_spread_over_the_nics() {
    let t = replicated(
        "tests/data/real/nccl-xml/aliyun-SimAI_SimCCL_topo_8A100_4CX6.xml",
        2,
    );
    assert_eq!(t.num_ranks(), 16);
    let mut per_nic = std::collections::HashMap::new();
    for a in 0..8 {
        let r = t.route(a, a + 8).unwrap();
        let nic = r
            .links
            .iter()
            .map(|&e| t.link_ends(e).1)
            .find(|&v| t.graph[v].kind == rscc::ir::NodeKind::Nic)
            .unwrap();
        *per_nic.entry(nic).or_insert(0) += 1;
    }
    assert!(per_nic.values().all(|&k| k <= 2), "{per_nic:?}");
    let c = compile(&t, &CompileOptions::algo(Algo::Hier, None)).unwrap();
    let size = 1u64 << 30;
    let time = rscc::sim::simulate(&c.program, &t, size, &Default::default())
        .unwrap()
        .time_us;
    let bound = rscc::bound::alpha_bound_us(&t, Collective::ReduceScatter, size).unwrap();
    assert!(bound / time > 0.95, "{} of the bound", bound / time);
}

/// The MI300X VM dump's GPUs reach its NICs through the CPUs, and the
/// route rule's NIC hand-out leaves two NICs to two GPUs each and two to
/// none. Replicated to two hosts, `hier`'s rail lanes with each chunk
/// aggregated at its owner's position load those two NICs with two
/// positions' chunks; `RailLoads::balance` moves chunks to the positions on
/// lighter rails, and the balanced schedule verifies and runs faster at
/// 1 GiB (83.5 % of the bound against 71.6 %).
#[test]
fn rail_lanes_balance_shared_nics() {
    let t = replicated(
        "tests/data/real/rccl-xml/rccl_topo_8p_940vm_MI300X-gfx942_8GPU_VM.xml",
        2,
    );
    let hosts = rscc::synth::hier::hosts(&t).unwrap();
    let (nh, g, c) = (hosts.len(), hosts[0].len(), 4);
    let table = rscc::synth::hier::RailLoads::new(&t, &hosts)
        .and_then(|l| l.balance(c))
        .expect("the rails are uneven");
    assert_eq!(table.len(), g * c);
    // Chunks per NIC: the owners' positions put 2c on two NICs; the
    // balanced table spreads them.
    let nic_of = |a: usize| {
        let r = t.route(hosts[0][a], hosts[1][a]).unwrap();
        r.links
            .iter()
            .map(|&e| t.link_ends(e).1)
            .find(|&v| t.graph[v].kind == rscc::ir::NodeKind::Nic)
            .unwrap()
    };
    let most = |pos: &mut dyn Iterator<Item = usize>| {
        let mut per = std::collections::HashMap::new();
        for a in pos {
            *per.entry(nic_of(a)).or_insert(0) += 1;
        }
        per.into_values().max().unwrap()
    };
    let own = most(&mut (0..g).flat_map(|k| std::iter::repeat_n(k, c)));
    let balanced = most(&mut table.iter().copied());
    assert_eq!(own, 2 * c);
    assert!(balanced < own, "{balanced} chunks on one NIC");
    let spec = rscc::ir::Spec::reduce_scatter(nh * g, c);
    let size = 1u64 << 30;
    let time = |a: rscc::ir::Algorithm| {
        let opts = CompileOptions::default();
        let c = rscc::compile::fit::first_fit(
            &t,
            Algo::Hier,
            vec![rscc::synth::ready(a)],
            &opts,
            false,
        )
        .unwrap();
        rscc::sim::simulate(&c.program, &t, size, &Default::default())
            .unwrap()
            .time_us
    };
    let plain = time(rscc::synth::hier::hier_tree_lanes(
        spec, &hosts, nh, true, None,
    ));
    let balanced_us = time(rscc::synth::hier::hier_tree_lanes(
        spec,
        &hosts,
        nh,
        true,
        Some(&table),
    ));
    assert!(
        balanced_us < 0.9 * plain,
        "{balanced_us} µs balanced against {plain}"
    );
}

/// `gap`'s second search, its window LP solved and its plans scored at
/// 1 MiB, serves the medium sizes of the diameter-two meshes: at 1 MiB
/// `auto` is at least 10 % faster than the 64 KiB search's plan (`--algo
/// gap`) on the shipped DGX-1 and on two dumps no constant was fitted to,
/// and reaches 75 % of the α-aware bound on DGX-1 (66 % with the 64 KiB
/// search's plans alone) and 90 % on the others (docs/algorithms.md
/// "Gap").
#[test]
fn gap_tuned_for_medium_messages_serves_1_mib() {
    use rscc::sim::{simulate, SimOptions};
    let s = 1u64 << 20;
    for (path, least) in [
        ("topologies/dgx1-v100.json", 0.75),
        (
            "tests/data/real/rccl-xml/rccl_topo_8p_90a_1_gfx90a_8GCD_alt.xml",
            0.9,
        ),
        (
            "tests/data/real/rccl-xml/rccl_topo_4p1h_Vega20-gfx906_4P1H.xml",
            0.9,
        ),
    ] {
        let (topo, sel) = auto_on(path, &[s]);
        let t = sel.times_us[sel.winners[0]][0];
        let small = rscc::compile::compile_one(&topo, Algo::Gap, &CompileOptions::default())
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        let t_small = simulate(&small.program, &topo, s, &SimOptions::default())
            .unwrap()
            .time_us;
        let b = bandwidth_bound(&topo, Collective::ReduceScatter).unwrap();
        let lb = rscc::bound::latency_terms_for(&topo, &b)
            .unwrap()
            .bound_us(&b, s);
        assert!(
            t <= 0.9 * t_small,
            "{path}: auto {t} µs, the 64 KiB search's plan {t_small} µs"
        );
        assert!(
            lb / t >= least,
            "{path}: {t} µs at 1 MiB is {:.3} of the bound {lb} µs",
            lb / t
        );
    }
}

/// Several hosts that each split the same way (sockets, PCIe switches,
/// hives) give `hier` those groups too (`hier::sub_host_groups`, offered
/// beside the hosts): on two OCI A100 hosts (PCIe only in the dump) the
/// star over sockets keeps each aggregation inside a socket, where over
/// whole hosts half of every GPU's contributions cross the inter-socket
/// link, and is faster at 1 GiB (docs/algorithms.md "Hierarchical",
/// sub-host groups). Hosts without such a split (NVSwitch) and single
/// hosts have none.
#[test]
fn replicated_hosts_split_into_the_same_groups_for_hier() {
    use rscc::ir::Spec;
    use rscc::lower::{lower, LowerOptions};
    use rscc::sim::{simulate, SimOptions};
    use rscc::synth::hier::{groups, hier_tree, sub_host_groups};
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("rscc-sub-host");
    std::fs::create_dir_all(&dir).unwrap();
    let two = |f: &str| {
        let out = dir.join(format!("{}.json", f.replace('/', "_")));
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_rscc"))
            .args(["topo", "import", "--hosts", "2", "-o"])
            .arg(&out)
            .arg(Path::new("tests/data/real").join(f))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        rscc::front::load_topology(&out).unwrap()
    };
    let p4d = two("nccl-xml/aws-ofi-nccl_p4d-24xl-topo.xml");
    let sockets: Vec<Vec<usize>> = (0..4).map(|g| (4 * g..4 * g + 4).collect()).collect();
    assert_eq!(sub_host_groups(&p4d), Some(sockets));
    assert_eq!(
        groups(&p4d).map(|g| g.len()),
        Some(2),
        "hier's groups stay the hosts"
    );
    let one = rscc::front::load_topology(Path::new(
        "tests/data/real/nccl-xml/aws-ofi-nccl_p4d-24xl-topo.xml",
    ))
    .unwrap();
    assert_eq!(sub_host_groups(&one), None);
    let nvswitch = rscc::front::generate::generate(
        "dgx-h100",
        &rscc::front::generate::GenParams {
            hosts: Some(2),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(sub_host_groups(&nvswitch), None);
    let oci = two("nccl-xml/oci-hpc_BM.GPU4.8-A100_topo-flattened.xml");
    let time = |hs: &[Vec<usize>]| {
        let a = hier_tree(Spec::reduce_scatter(16, 1), hs, 0, hs.len(), 1);
        let p = lower(&a, &LowerOptions::default()).unwrap();
        simulate(&p, &oci, 1 << 30, &SimOptions::default())
            .unwrap()
            .time_us
    };
    let (sub, hosts) = (
        time(&sub_host_groups(&oci).expect("sockets")),
        time(&groups(&oci).unwrap()),
    );
    assert!(sub * 1.05 < hosts, "sockets {sub} µs, hosts {hosts} µs");
}
