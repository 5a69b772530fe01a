//! Minimum-cost spanning arborescences (Chu–Liu / Edmonds), the pricing
//! step of the tree-packing LP.
//!
//! Every node but the root picks its cheapest entering arc; if that has no
//! cycle it is optimal. Otherwise each cycle is contracted into one node,
//! an arc entering the cycle at v costs its cost minus the cost of v's
//! chosen arc (choosing it means dropping that one), the contracted graph
//! is solved recursively, and the cycle is reopened where the chosen arc
//! enters it. O(V·E).

/// For every node v ≠ `root` of `0..n`, the index in `arcs` of the arc
/// (from, to, cost) entering v in a cheapest spanning out-arborescence
/// rooted at `root`; `usize::MAX` at the root. None when some node cannot
/// be reached from the root.
pub fn min_out_arborescence(
    n: usize,
    root: usize,
    arcs: &[(usize, usize, f64)],
) -> Option<Vec<usize>> {
    let chosen = solve(n, root, arcs)?;
    let mut entering = vec![usize::MAX; n];
    for a in chosen {
        entering[arcs[a].1] = a;
    }
    Some(entering)
}

/// The arcs (indices into `arcs`) of a cheapest arborescence.
fn solve(n: usize, root: usize, arcs: &[(usize, usize, f64)]) -> Option<Vec<usize>> {
    // Cheapest entering arc per node.
    let mut best = vec![usize::MAX; n];
    for (i, &(u, v, w)) in arcs.iter().enumerate() {
        if u != v && v != root && (best[v] == usize::MAX || w < arcs[best[v]].2) {
            best[v] = i;
        }
    }
    if (0..n).any(|v| v != root && best[v] == usize::MAX) {
        return None;
    }
    // Cycles of the chosen arcs: walk up from every node.
    let mut comp = vec![usize::MAX; n];
    let mut seen = vec![usize::MAX; n];
    let mut cycles = 0;
    for s in 0..n {
        let mut v = s;
        while v != root && seen[v] == usize::MAX && comp[v] == usize::MAX {
            seen[v] = s;
            v = arcs[best[v]].0;
        }
        if v != root && seen[v] == s && comp[v] == usize::MAX {
            // v is on a new cycle.
            let mut x = v;
            loop {
                comp[x] = cycles;
                x = arcs[best[x]].0;
                if x == v {
                    break;
                }
            }
            cycles += 1;
        }
    }
    if cycles == 0 {
        return Some((0..n).filter(|&v| v != root).map(|v| best[v]).collect());
    }
    // Contract: cycle c is node c; every other node gets a node of its own.
    let mut next = cycles;
    let on_cycle: Vec<bool> = comp.iter().map(|&c| c != usize::MAX).collect();
    for c in comp.iter_mut().filter(|c| **c == usize::MAX) {
        *c = next;
        next += 1;
    }
    let mut sub = Vec::with_capacity(arcs.len());
    let mut back = Vec::with_capacity(arcs.len());
    for (i, &(u, v, w)) in arcs.iter().enumerate() {
        if comp[u] != comp[v] {
            let w = if on_cycle[v] { w - arcs[best[v]].2 } else { w };
            sub.push((comp[u], comp[v], w));
            back.push(i);
        }
    }
    let inner = solve(next, comp[root], &sub)?;
    let mut out: Vec<usize> = inner.iter().map(|&a| back[a]).collect();
    // Reopen each cycle where the chosen arc enters it.
    let mut entered = vec![false; n];
    for &a in &out {
        entered[arcs[a].1] = true;
    }
    for v in 0..n {
        if on_cycle[v] && !entered[v] {
            out.push(best[v]);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The cheapest arborescence by trying every choice of entering arc.
    fn brute(n: usize, root: usize, arcs: &[(usize, usize, f64)]) -> Option<f64> {
        let into: Vec<Vec<usize>> = (0..n)
            .map(|v| {
                (0..arcs.len())
                    .filter(|&i| arcs[i].1 == v && arcs[i].0 != v)
                    .collect()
            })
            .collect();
        let mut best: Option<f64> = None;
        let mut pick = vec![0usize; n];
        loop {
            let ok = (0..n).all(|v| v == root || !into[v].is_empty());
            if !ok {
                return None;
            }
            // Every node reaches the root along the picks: a tree.
            let tree = (0..n).all(|s| {
                let mut v = s;
                for _ in 0..n {
                    if v == root {
                        return true;
                    }
                    v = arcs[into[v][pick[v]]].0;
                }
                v == root
            });
            if tree {
                let c: f64 = (0..n)
                    .filter(|&v| v != root)
                    .map(|v| arcs[into[v][pick[v]]].2)
                    .sum();
                best = Some(best.map_or(c, |b: f64| b.min(c)));
            }
            // Next combination.
            let mut v = 0;
            loop {
                if v == n {
                    return best;
                }
                if v != root && pick[v] + 1 < into[v].len() {
                    pick[v] += 1;
                    break;
                }
                pick[v] = 0;
                v += 1;
            }
        }
    }

    fn cost(arcs: &[(usize, usize, f64)], e: &[usize]) -> f64 {
        e.iter()
            .filter(|&&a| a != usize::MAX)
            .map(|&a| arcs[a].2)
            .sum()
    }

    #[test]
    fn a_cycle_is_reopened_where_it_is_cheapest_to_enter() {
        // 1 and 2 prefer each other; entering the pair at 2 from the root
        // (cost 5, dropping 1→2's 1) beats entering at 1 (cost 10).
        let arcs = [(0, 1, 10.0), (0, 2, 5.0), (1, 2, 1.0), (2, 1, 1.0)];
        let e = min_out_arborescence(3, 0, &arcs).unwrap();
        assert_eq!(e, vec![usize::MAX, 3, 1]);
        assert_eq!(cost(&arcs, &e), 6.0);
    }

    #[test]
    fn an_unreachable_node_has_no_arborescence() {
        assert_eq!(
            min_out_arborescence(3, 0, &[(0, 1, 1.0), (2, 1, 1.0)]),
            None
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]
        /// On random digraphs of up to 5 nodes the result is a spanning
        /// arborescence exactly as cheap as the cheapest one.
        #[test]
        fn matches_exhaustive_search(
            n in 2usize..6,
            raw in proptest::collection::vec((0usize..5, 0usize..5, 0u32..20), 1..18),
        ) {
            let arcs: Vec<(usize, usize, f64)> = raw
                .into_iter()
                .filter(|&(u, v, _)| u < n && v < n)
                .map(|(u, v, w)| (u, v, w as f64))
                .collect();
            let got = min_out_arborescence(n, 0, &arcs);
            let want = brute(n, 0, &arcs);
            prop_assert_eq!(got.is_some(), want.is_some());
            if let (Some(e), Some(w)) = (got, want) {
                prop_assert_eq!(e[0], usize::MAX);
                for v in 1..n {
                    // Following the entering arcs from v reaches the root.
                    let mut x = v;
                    let mut hops = 0;
                    while x != 0 {
                        prop_assert_eq!(arcs[e[x]].1, x);
                        x = arcs[e[x]].0;
                        hops += 1;
                        prop_assert!(hops <= n);
                    }
                }
                prop_assert!((cost(&arcs, &e) - w).abs() < 1e-9);
            }
        }
    }
}
