//! Issue 4's large-message goal as a regression test: every shipped
//! schedule (schedules/, the `auto` pick for its topology) simulates within
//! 1.03 × the cut bound T* at 1 GiB.

use rscc::bound;
use rscc::ir::Collective;
use rscc::sim::{simulate, SimOptions};

#[test]
fn shipped_schedules_reach_the_bound_at_1_gib() {
    let mut checked = 0;
    for e in std::fs::read_dir("topologies").unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let stem = path.file_stem().unwrap().to_string_lossy().to_string();
        let topo = rscc::front::load_topology(&path).unwrap();
        let xml = format!("schedules/{stem}-rs.xml");
        let text = std::fs::read_to_string(&xml).unwrap();
        let prog = rscc::front::msccl_xml::parse(&text, &xml).unwrap();
        let b = bound::bandwidth_bound(&topo, Collective::ReduceScatter).unwrap();
        let s = 1u64 << 30;
        let t = simulate(&prog, &topo, s, &SimOptions::default())
            .unwrap()
            .time_us;
        let ratio = t / bound::time_bound_us(&b, s);
        assert!(
            (1.0..=1.03).contains(&ratio),
            "{stem}: {} at 1 GiB is {ratio:.4} x T*",
            prog.name
        );
        checked += 1;
    }
    assert_eq!(checked, 9);
}
