//! Multi-host schedules where a star across the rail does not fit the
//! threadblock budget: `hier` falls back to a shallower-fan-out rail tree
//! that moves the same data, within every MSCCL limit, and threadblocks
//! split into step windows run one window after the other.

mod common;

use rscc::compile::{compile, CompileOptions};
use rscc::front::generate::{generate, GenParams};
use rscc::ir::Program;
use rscc::synth::Algo;

fn hosts(kind: &str, h: usize) -> rscc::ir::Topology {
    generate(
        kind,
        &GenParams {
            hosts: Some(h),
            ..Default::default()
        },
    )
    .unwrap()
}

fn max_tbs(p: &Program) -> usize {
    p.gpus.iter().map(|g| g.tbs.len()).max().unwrap_or(0)
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

/// A ring of 100 needs several step windows per connection: each window's
/// threadblock waits for the previous window's last step before its first.
#[test]
fn step_windows_run_in_order() {
    let t = common::ring(100);
    let c = compile(&t, &CompileOptions::algo(Algo::Ring, None)).expect("compiles");
    let p = &c.program;
    let mut chained = 0;
    for g in &p.gpus {
        for tb in &g.tbs {
            let same: Vec<_> = g
                .tbs
                .iter()
                .filter(|o| o.id != tb.id && (o.send, o.recv) == (tb.send, tb.recv))
                .collect();
            if same.is_empty() {
                continue;
            }
            // The earliest window has no predecessor; every later one
            // starts with a wait on a threadblock of the same peers.
            let first = &tb.steps[0];
            if first.depid >= 0 && same.iter().any(|o| o.id == first.depid) {
                chained += 1;
                let o = same.iter().find(|o| o.id == first.depid).unwrap();
                assert_eq!(
                    first.deps as usize,
                    o.steps.len() - 1,
                    "waits on the last step"
                );
            }
        }
    }
    assert!(chained >= p.gpus.len(), "{chained} chained threadblocks");
}

/// Beyond what MSCCL XML can express at all (1024 `<gpu>` elements), synth
/// says so, with the limit and the largest rank count, and exits 2.
#[test]
fn beyond_mscclxml_reach_is_a_clear_error() {
    let dir = std::env::temp_dir().join(format!("rscc-cluster-{}", std::process::id()));
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
