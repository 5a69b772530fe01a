//! Channels staggered behind one another, for runtimes that reduce in
//! passes of their own.
//!
//! Where several channels carry the same connections (a ring on k
//! channels, rings that share a pair), their threadblocks run the same
//! steps at the same times: every channel moves its tile, then every
//! channel runs its local `re` pass over it, so the links and the GPU's
//! memory take turns. Making each such threadblock's first step wait for
//! the first step of its namesake on the channel below (same send and
//! receive peers) starts channel c one step after channel c − 1 in every
//! loop iteration, so one channel's pass overlaps another's transfer. A
//! runtime with fused steps reduces on the fly and has no such turns.
//!
//! Only a first step without a dependency of its own gets one, and only
//! on a first step of a lower channel, so the waits added point from each
//! channel to the one below; the verifier judges the result as it judges
//! every program (`auto` scores the staggered form beside the plain one).

use crate::ir::{Program, StepKind};
use std::collections::BTreeMap;

/// The waits [`stagger`] adds to `prog`: per GPU (index into
/// `prog.gpus`), the threadblock (index into its `tbs`) whose first step
/// waits, and the threadblock it waits on.
pub fn stagger_waits(prog: &Program) -> Vec<(usize, usize, usize)> {
    let mut waits = Vec::new();
    for (gi, g) in prog.gpus.iter().enumerate() {
        let mut groups: BTreeMap<(i64, i64), Vec<usize>> = BTreeMap::new();
        for (i, tb) in g.tbs.iter().enumerate() {
            if (tb.send >= 0 || tb.recv >= 0) && !tb.steps.is_empty() {
                groups.entry((tb.send, tb.recv)).or_default().push(i);
            }
        }
        for idx in groups.values_mut() {
            idx.sort_by_key(|&i| (g.tbs[i].chan, g.tbs[i].id));
            for w in idx.windows(2) {
                let (p, t) = (w[0], w[1]);
                if g.tbs[p].chan != g.tbs[t].chan
                    && g.tbs[p].steps[0].kind != StepKind::Nop
                    && g.tbs[t].steps[0].depid < 0
                {
                    waits.push((gi, t, p));
                }
            }
        }
    }
    waits
}

/// Stagger `prog`'s channels in place; returns the number of waits added.
pub fn stagger(prog: &mut Program) -> usize {
    let waits = stagger_waits(prog);
    for &(gi, t, p) in &waits {
        let g = &mut prog.gpus[gi];
        let pid = g.tbs[p].id;
        let first = &mut g.tbs[t].steps[0];
        first.depid = pid;
        first.deps = 0;
        g.tbs[p].steps[0].hasdep = true;
    }
    waits.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Runtime, Spec};
    use crate::lower::{lower, LowerOptions};
    use crate::synth::ring::ring_algorithm;
    use crate::verify::{verify, VerifyOptions};

    /// One ring on three channels for RCCL: every threadblock of channels
    /// 1 and 2 starts after its namesake on the channel below, the first
    /// steps it waits on publish, the program verifies, and nothing else
    /// moved.
    #[test]
    fn each_channel_starts_after_the_one_below() {
        let n = 4;
        let ring: Vec<usize> = (0..n).collect();
        let alg = ring_algorithm(Spec::reduce_scatter(n, 3), &[ring]);
        let opts = LowerOptions {
            runtime: Runtime::Rccl,
            ..LowerOptions::default()
        };
        let plain = lower(&alg, &opts).expect("lowers");
        let mut staggered = plain.clone();
        let added = stagger(&mut staggered);
        assert_eq!(
            lower(
                &alg,
                &LowerOptions {
                    stagger: true,
                    ..opts.clone()
                }
            )
            .expect("lowers"),
            staggered
        );
        let rccl = VerifyOptions {
            runtime: Some(Runtime::Rccl),
            ..VerifyOptions::default()
        };
        verify(&staggered, &rccl).expect("verifies");
        let mut waits = 0;
        for (g, h) in plain.gpus.iter().zip(&staggered.gpus) {
            for (a, b) in g.tbs.iter().zip(&h.tbs) {
                if a.chan > 0 && (a.send >= 0 || a.recv >= 0) {
                    let below = h
                        .tbs
                        .iter()
                        .find(|t| t.send == b.send && t.recv == b.recv && t.chan == b.chan - 1)
                        .expect("a namesake on the channel below");
                    assert_eq!((b.steps[0].depid, b.steps[0].deps), (below.id, 0));
                    assert!(below.steps[0].hasdep);
                    waits += 1;
                }
                for (i, (x, y)) in a.steps.iter().zip(&b.steps).enumerate() {
                    if i > 0 || a.chan == 0 {
                        assert_eq!((x.depid, x.deps, x.kind), (y.depid, y.deps, y.kind));
                    }
                }
            }
        }
        assert_eq!(added, waits);
        assert!(waits >= 2 * n, "{waits}");
    }
}
