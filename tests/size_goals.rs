//! Issue 4's size goals as regression tests. Large messages: every shipped
//! schedule (schedules/, the `auto` pick for its topology) simulates within
//! 1.03 × the cut bound T* at 1 GiB. Small messages: see the second test.

mod common;

use rscc::bound;
use rscc::ir::Collective;
use rscc::sim::{simulate, SimOptions};

#[test]
fn shipped_schedules_reach_the_bound_at_1_gib() {
    let mut checked = 0;
    for (stem, topo, prog) in common::shipped() {
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

/// Small messages, as a regression guard: on every single-host shipped
/// topology `auto`'s choice at 1–64 KiB never beats rscc's valid α-aware
/// bound; on the switched and fully connected machines it meets that bound
/// (within 0.1 %); on the multi-hop ones (ring8, DGX-1) it is within 1.1 ×
/// that bound — issue 4's goal — at every size (DGX-1's 64 KiB is the
/// tightest: `gap` at 1.0965 with its default search and seed, from 8 LP
/// answers; 1.109 climbing from one, 1.148 with single-shard moves, and
/// `tree`'s graded classes at 1.186: docs/algorithms.md "Gap"), and at
/// every size within 1.1 × the larger of it and synthesis.md §5.3's
/// store-and-forward figure.
/// (Ring8 meets 1.1 at 32 and 64 KiB with `tree`'s pieced members, a
/// schedule safe up to 32 MiB that `auto` scores beside the others.)
/// These figures are for a collective that has the whole GPU
/// (`--max-tbs` = the SMs). Within the default budget of half the SMs
/// DGX-1's 64 KiB is 1.144 × (gap's best plan on the whole GPU has 79 threadblocks
/// per rank against 40): there the multi-hop goal is 1.15.
#[test]
fn small_messages_near_the_alpha_aware_figure_on_single_hosts() {
    use rscc::compile::{self, CompileOptions};
    let sizes: Vec<u64> = vec![1 << 10, 4 << 10, 16 << 10, 32 << 10, 64 << 10];
    let mut checked = 0;
    for (whole_gpu, (_, topo, _)) in common::shipped()
        .into_iter()
        .flat_map(|t| [(true, t.clone()), (false, t)])
    {
        if topo.num_hosts() > 1 {
            continue;
        }
        let opts = CompileOptions {
            max_tbs: whole_gpu
                .then(|| topo.min_sms().map(|s| s as usize))
                .flatten(),
            ..CompileOptions::default()
        };
        let multi_hop_goal = if whole_gpu { 1.1 } else { 1.15 };
        let sel = compile::auto(&topo, &opts, &sizes, &SimOptions::default(), None).unwrap();
        let b = bound::bandwidth_bound(&topo, Collective::ReduceScatter).unwrap();
        let lat = bound::latency_terms_for(&topo, &b).unwrap();
        let multi_hop = rscc::synth::tree::applies(&topo);
        for (si, &s) in sel.sizes.iter().enumerate() {
            let t = sel.times_us[sel.winners[si]][si];
            let lb = lat.bound_us(&b, s);
            let sf = bound::store_forward_shard_us(&topo, s).unwrap();
            assert!(t >= lb * (1.0 - 1e-9), "{}: below the bound", topo.name);
            let within = |goal: f64| {
                format!(
                    "{} at {s} B (whole GPU: {whole_gpu}): {t} us against {goal} x",
                    topo.name
                )
            };
            assert!(t <= 1.1 * lb.max(sf), "{} {}", within(1.1), lb.max(sf));
            if !multi_hop {
                assert!(t <= 1.001 * lb, "{} {lb}", within(1.001));
            } else {
                assert!(t <= multi_hop_goal * lb, "{} {lb}", within(multi_hop_goal));
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 2 * 7 * 5);
}
