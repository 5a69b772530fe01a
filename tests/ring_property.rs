//! Property: for random connected topologies of 2–32 GPUs and any chunk
//! count, the ring synthesizer's output lowers and verifies.
mod common;

use proptest::prelude::*;
use rscc::compile::{compile, CompileOptions};
use rscc::synth::Algo;

fn topo_strategy() -> impl Strategy<Value = (usize, Vec<(usize, usize, u32)>)> {
    (2usize..=32).prop_flat_map(|n| {
        let tree = proptest::collection::vec(any::<proptest::sample::Index>(), n - 1);
        let extra = proptest::collection::vec((0..n, 0..n, 1u32..3), 0..2 * n);
        (Just(n), tree, extra).prop_map(|(n, tree, extra)| {
            let mut edges: Vec<(usize, usize, u32)> = tree
                .iter()
                .enumerate()
                .map(|(i, ix)| (ix.index(i + 1), i + 1, 1))
                .collect();
            edges.extend(extra.into_iter().filter(|(a, b, _)| a != b));
            (n, edges)
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn ring_always_verifies((n, edges) in topo_strategy(), chunks in proptest::option::of(1usize..6)) {
        let t = common::gpus_with_links("random", n, &edges);
        let opts = CompileOptions::algo(Algo::Ring, chunks);
        let c = compile(&t, &opts);
        prop_assert!(c.is_ok(), "n={} chunks={:?}: {}", n, chunks, c.err().map(|e| e.to_string()).unwrap_or_default());
        let c = c.unwrap();
        prop_assert_eq!(c.program.ngpus as usize, n);
        if let Some(k) = chunks {
            prop_assert_eq!(c.program.nchunksperloop as usize, n * k);
        }
    }
}
