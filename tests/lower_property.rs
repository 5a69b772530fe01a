//! Property: any valid set of reduction trees (random shapes, steps and
//! channels) lowers to a Program the verifier accepts.

use proptest::prelude::*;
use rscc::ir::{Algorithm, Spec, Transfer};
use rscc::lower::{lower, LowerOptions};
use rscc::verify::{verify, VerifyOptions};

/// Random in-tree per chunk: ranks join in a random order, each attaching
/// to a random earlier one (the owner first); a rank sends one or two steps
/// after its last child.
fn random_algorithm(n: usize, chunks: usize, seed: Vec<u32>) -> Algorithm {
    let spec = Spec::reduce_scatter(n, chunks);
    let mut it = seed.into_iter().cycle();
    let mut next = |m: usize| it.next().unwrap_or(0) as usize % m.max(1);
    let mut transfers = Vec::new();
    for c in 0..spec.total_chunks() {
        let owner = spec.owner(c);
        let mut order: Vec<usize> = (0..n).filter(|&r| r != owner).collect();
        for i in (1..order.len()).rev() {
            let j = next(i + 1);
            order.swap(i, j);
        }
        let mut joined = vec![owner];
        let mut parent = vec![usize::MAX; n];
        for &r in &order {
            parent[r] = joined[next(joined.len())];
            joined.push(r);
        }
        // Steps: children before parents (process in reverse join order).
        let mut step = vec![0usize; n];
        for &r in order.iter().rev() {
            step[r] += next(2);
            let p = parent[r];
            if p != owner {
                step[p] = step[p].max(step[r] + 1);
            }
        }
        for &r in &order {
            transfers.push(Transfer {
                step: step[r],
                chunk: c,
                src: r,
                dst: parent[r],
                channel: next(2),
            });
        }
    }
    Algorithm {
        name: "random-trees".into(),
        spec,
        transfers,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn random_trees_lower_and_verify(n in 2usize..9, chunks in 1usize..4, seed in proptest::collection::vec(any::<u32>(), 1..64)) {
        let alg = random_algorithm(n, chunks, seed);
        prop_assert!(alg.check().is_ok(), "{:?}", alg.check());
        let p = lower(&alg, &LowerOptions::default());
        prop_assert!(p.is_ok(), "{:?}", p.err());
        let p = p.unwrap();
        let v = verify(&p, &VerifyOptions::default());
        prop_assert!(v.is_ok(), "{}", v.err().map(|e| e.to_string()).unwrap_or_default());
    }
}
