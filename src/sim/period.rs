//! Periods of a tiled run. Every tile replays the same program on the
//! same bytes, so once a pipeline fills, the run usually repeats: the
//! state at one tile boundary is the state at an earlier one, every
//! threadblock `p` tiles further and every time later by the same Δ.
//! From there the run is known until a threadblock reaches the last full
//! tile, and the engine continues from q periods later (q·p tiles,
//! q·Δ µs) with every count and byte total advanced by q periods' worth.
//!
//! The state compared is everything the engine's future depends on, at an
//! instant with no change pending (every rate computed, no step ready to
//! start): each threadblock's position and whether it runs or waits for a
//! dependency; its flow's connection, and when it joins its links (after
//! the route's α) or its remaining bytes and rate; each connection's
//! buffer (messages sent, taken, and which have arrived). Times are
//! compared relative to the instant and, like bytes and rates, within a
//! billionth: floating point does not repeat bit for bit, and a state that
//! converges to a period comes within that and is taken from there. A
//! jump needs the same period three times in a row, with differences
//! from period to period that do not grow faster than the jump may ignore
//! ([`stable`]): a repeat on an unstable orbit is one the step-by-step run
//! leaves. The jumping run's time then differs from the step-by-step
//! run's by rounding, within 1e-10 of it (docs/cost-model.md §4.3).

/// A threadblock's flow at a snapshot.
#[derive(Debug, Clone, Copy)]
pub(super) struct FlowSnap {
    pub conn: usize,
    /// Joined its links (else waiting out its α).
    pub active: bool,
    /// µs from the snapshot until it joins its links (waiting) or
    /// finishes at its present rate (active).
    pub at: f64,
    pub remaining: f64,
    pub rate: f64,
    pub bytes: f64,
}

/// A threadblock at a snapshot.
#[derive(Debug, Clone, Copy)]
pub(super) struct TbSnap {
    pub pos: u64,
    pub running: bool,
    pub registered: bool,
    pub flow: Option<FlowSnap>,
}

/// A connection at a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ConnSnap {
    pub sent: u64,
    pub consumed: u64,
    /// Bit i: the i-th message in the buffer has arrived.
    pub arrived: u64,
}

/// The engine's state at an instant with nothing pending.
#[derive(Debug, Clone)]
pub(super) struct Snap {
    pub now: f64,
    pub tbs: Vec<TbSnap>,
    pub conns: Vec<ConnSnap>,
    pub link_bytes: Vec<f64>,
    pub steps_executed: u64,
    pub flows_started: u64,
}

/// Relative tolerance of the comparison.
const TOL: f64 = 1e-9;

fn close(a: f64, b: f64, scale: f64) -> bool {
    (a - b).abs() <= TOL * scale.abs().max(f64::MIN_POSITIVE)
}

/// A period from `a` to `b`: Some((p, d)) where `b` is `a` with every
/// threadblock that has not finished p tiles further (`steps[t]` steps
/// per tile) and everything else the same relative to the instant, up to
/// d µs (the largest difference in when a flow joins its links or
/// finishes); threadblocks finished at `b` must have finished at `a`.
pub(super) fn period(a: &Snap, b: &Snap, steps: &[u64], total: &[u64]) -> Option<(u64, f64)> {
    let mut p = None;
    let mut dev: f64 = 0.0;
    for (t, (x, y)) in a.tbs.iter().zip(&b.tbs).enumerate() {
        if y.pos == total[t] {
            if x.pos != y.pos {
                return None;
            }
            continue;
        }
        let d = y.pos.checked_sub(x.pos)?;
        if steps[t] == 0 || !d.is_multiple_of(steps[t]) {
            return None;
        }
        let k = d / steps[t];
        if k == 0 || *p.get_or_insert(k) != k {
            return None;
        }
        if x.running != y.running || x.registered != y.registered {
            return None;
        }
        match (x.flow, y.flow) {
            (None, None) => {}
            (Some(f), Some(g)) => {
                let same = f.conn == g.conn
                    && f.active == g.active
                    && f.bytes.to_bits() == g.bytes.to_bits()
                    && close(f.at, g.at, b.now)
                    && close(f.remaining, g.remaining, f.bytes)
                    && close(f.rate, g.rate, f.rate);
                if !same {
                    return None;
                }
                dev = dev.max((f.at - g.at).abs());
                if f.active {
                    dev = dev.max((f.remaining - g.remaining).abs() / f.rate.max(g.rate));
                }
            }
            _ => return None,
        }
    }
    let same_buffers = a
        .conns
        .iter()
        .zip(&b.conns)
        .all(|(x, y)| x.arrived == y.arrived && x.sent - x.consumed == y.sent - y.consumed);
    (same_buffers && b.now > a.now)
        .then_some(p)
        .flatten()
        .map(|p| (p, dev))
}

/// Whether a jump over `q` periods may ignore the differences `runs`
/// holds (each period's `period` result, newest first, at least two): the
/// newest, grown for q periods at the rate the runs show, stays within
/// the tolerance at `now`. Differences of a few units in the last place
/// are rounding and count as none; an orbit that is unstable shows as
/// differences that grow from there (by 25× per period on 2 × DGX-H100's
/// `hier` allreduce: the step-by-step run leaves it within a few periods,
/// and so does the real machine).
pub(super) fn stable(runs: &[(u64, f64)], q: u64, now: f64) -> bool {
    let floor = 64.0 * f64::EPSILON * now;
    let newest = runs[0].1.max(floor);
    let oldest = runs[runs.len() - 1].1.max(floor);
    let growth = (newest / oldest).powf(1.0 / (runs.len() - 1) as f64);
    newest * growth.powf(q as f64) <= TOL * now
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(now: f64, pos: &[u64], at: f64) -> Snap {
        Snap {
            now,
            tbs: pos
                .iter()
                .map(|&pos| TbSnap {
                    pos,
                    running: true,
                    registered: false,
                    flow: Some(FlowSnap {
                        conn: 0,
                        active: true,
                        at,
                        remaining: 100.0,
                        rate: 10.0,
                        bytes: 200.0,
                    }),
                })
                .collect(),
            conns: vec![ConnSnap {
                sent: pos[0],
                consumed: pos[0] - 1,
                arrived: 1,
            }],
            link_bytes: vec![0.0],
            steps_executed: 0,
            flows_started: 0,
        }
    }

    #[test]
    fn a_period_is_every_threadblock_the_same_tiles_further() {
        let (steps, total) = ([2, 3], [100, 150]);
        let a = snap(10.0, &[4, 6], 1.0);
        assert_eq!(
            period(&a, &snap(20.0, &[8, 12], 1.0), &steps, &total),
            Some((2, 0.0))
        );
        // One threadblock a tile behind the other.
        assert_eq!(period(&a, &snap(20.0, &[8, 9], 1.0), &steps, &total), None);
        // Not at the same point of its tile.
        assert_eq!(period(&a, &snap(20.0, &[7, 12], 1.0), &steps, &total), None);
        // A flow further from its end.
        assert_eq!(period(&a, &snap(20.0, &[8, 12], 1.1), &steps, &total), None);
        // Within rounding.
        assert_eq!(
            period(&a, &snap(20.0, &[8, 12], 1.0 + 1e-12), &steps, &total).map(|x| x.0),
            Some(2)
        );
        // Finished threadblocks stay finished; one that finished since is
        // not the same state.
        let f = snap(10.0, &[100, 6], 1.0);
        assert_eq!(
            period(&f, &snap(20.0, &[100, 9], 1.0), &steps, &total),
            Some((1, 0.0))
        );
        assert_eq!(
            period(&a, &snap(20.0, &[100, 9], 1.0), &steps, &total),
            None
        );
    }

    #[test]
    fn growing_differences_are_not_jumped_over() {
        // Rounding (below 64 units in the last place at 400 µs): none.
        assert!(stable(&[(1, 1e-12), (1, 3e-12), (1, 2e-12)], 100, 400.0));
        // Shrinking: the pipeline converges to its period.
        assert!(stable(&[(1, 1e-11), (1, 1e-10), (1, 1e-9)], 100, 400.0));
        // Steady differences (a phase that neither grows nor decays).
        assert!(stable(&[(1, 1e-9), (1, 1e-9), (1, 1e-9)], 100, 400.0));
        // Growing 12-fold per period (2 × DGX-H100's `hier`): a jump of
        // 26 periods would ignore 1e18 times the tolerance; one of a
        // period ignores less than it.
        assert!(!stable(
            &[(1, 3.4e-10), (1, 2.8e-11), (1, 2.3e-12)],
            26,
            333.0
        ));
        assert!(stable(
            &[(1, 3.4e-10), (1, 2.8e-11), (1, 2.3e-12)],
            1,
            333.0
        ));
    }
}
