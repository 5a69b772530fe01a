//! Symbolic execution of a Program (msccl-xml.md §11 "Validator").
//!
//! 1. Pair the k-th send with the k-th receive on every connection and merge
//!    paired steps into rendezvous groups (chains such as s → rrs → rrc).
//! 2. Order the groups by program order and `depid/deps` edges (Kahn); a
//!    cycle, or a group whose chain closes on itself, is a deadlock.
//! 3. Execute the groups in that order with symbolic values: each slot holds
//!    the multiset of (rank, input chunk) contributions it sums. Values are
//!    fingerprinted (count plus two independent 64-bit random-key sums, a
//!    homomorphism of multiset union), so a run costs O(steps · cnt); only
//!    when the post-condition fails is the run repeated with exact multisets
//!    to say which contributions are missing or repeated.
//! 4. Races: within a rank, two accesses to one slot by different
//!    threadblocks (at least one a write) must be ordered by program order
//!    and explicit dependencies (vector clocks over the rank's threadblocks).
//!
//! `plan.rs` builds the event graph and its order (steps 1 and 2),
//! `exec.rs` executes it and finds races (steps 3 and 4), `values.rs` holds
//! the symbolic values; this file runs each aliasing mode and checks the
//! post-condition.

mod exec;
mod plan;
mod values;

use super::VerifyError;
use crate::ir::{Buf, Collective, Program};
use exec::{execute, slot, Rank};
use plan::{deadlock_free_plan, Plan};
use values::{Exact, Fp, Sym};

pub(crate) use plan::one_message_up_to;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    OutOfPlace,
    InPlace,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::OutOfPlace => "out-of-place",
            Mode::InPlace => "in-place",
        }
    }
}

/// Run every declared aliasing mode; returns the modes proven.
pub(crate) fn run(p: &Program) -> Result<Vec<&'static str>, VerifyError> {
    let plan = deadlock_free_plan(p)?;
    let mut modes = Vec::new();
    let mut todo = Vec::new();
    if p.outofplace {
        todo.push(Mode::OutOfPlace);
    }
    if p.inplace {
        todo.push(Mode::InPlace);
    }
    // The aliasing modes are independent runs: use a thread each.
    let results = crate::par::map(&todo, |&mode| check_mode(&plan, mode));
    for (mode, r) in todo.iter().zip(results) {
        r?;
        modes.push(mode.name());
    }
    Ok(modes)
}

/// Execute one aliasing mode and check the post-condition.
fn check_mode(plan: &Plan, mode: Mode) -> Result<(), VerifyError> {
    let p = plan.p;
    let ranks = execute::<Fp>(plan, mode)?;
    if let Err((r, k, _, _)) = postcondition(plan, mode, &ranks) {
        // Diagnose exactly.
        let exact = execute::<Exact>(plan, mode)?;
        let detail = match postcondition(plan, mode, &exact) {
            Err((r2, k2, got, want)) => {
                let (buf, off) = result_at(p, plan.idx.gpu_of_rank[r2], r2, k2);
                let where_ = format!("{}[{off}]", buf.letter());
                if got.0.is_empty() {
                    format!("rank {r2} output chunk {k2} ({where_}) is never written")
                } else {
                    format!("rank {r2} output chunk {k2} ({where_}) {}", got.diff(&want))
                }
            }
            Ok(()) => format!("rank {r} output chunk {k} is wrong"),
        };
        return Err(VerifyError::new(
            "postcondition",
            format!("{} mode: {detail}", mode.name()),
        ));
    }
    Ok(())
}

/// Where rank `r` (its `<gpu>` is `gi`) keeps result chunk `k`: `o`, or
/// for an in-place-only file that never names `o` (`o_chunks` 0) the part
/// of `i` that `o` aliases.
fn result_at(p: &Program, gi: usize, r: usize, k: usize) -> (Buf, usize) {
    let cps = (p.nchunksperloop / p.ngpus) as usize;
    if p.gpus[gi].o_chunks > 0 || p.coll == Collective::AllGather {
        (Buf::Output, k)
    } else if p.coll == Collective::ReduceScatter {
        (Buf::Input, r * cps + k)
    } else {
        (Buf::Input, k)
    }
}

/// The op's post-condition (ir/spec.rs): per rank, every result chunk
/// holds its reduction (reduce-scatter: the rank's shard; allreduce:
/// every chunk) or the owner's copy (allgather: every chunk).
fn postcondition<V: Sym>(
    plan: &Plan,
    mode: Mode,
    ranks: &[Rank<V>],
) -> Result<(), (usize, usize, V, V)> {
    let p = plan.p;
    let n = p.ngpus as usize;
    let c = p.nchunksperloop as usize;
    let cps = c / n;
    let results = p.coll.buffers(c, n).o_chunks;
    // Every global chunk's reduction, once: allreduce wants each on every
    // rank, and building one costs a term per rank.
    let reduced: Vec<V> = match p.coll {
        Collective::ReduceScatter | Collective::AllReduce => {
            (0..c).map(|k| V::expected(n, k)).collect()
        }
        Collective::AllGather => Vec::new(),
    };
    for r in 0..n {
        let gi = plan.idx.gpu_of_rank[r];
        for k in 0..results {
            let (buf, off) = result_at(p, gi, r, k);
            let s = slot(p, gi, mode, buf, off);
            let copy;
            let want = match p.coll {
                Collective::ReduceScatter => &reduced[r * cps + k],
                Collective::AllReduce => &reduced[k],
                Collective::AllGather => {
                    copy = V::input(k / cps, k);
                    &copy
                }
            };
            match ranks[gi].value(s) {
                Some(v) if v == want => {}
                Some(v) => return Err((r, k, v.clone(), want.clone())),
                None => return Err((r, k, V::expected(0, 0), want.clone())),
            }
        }
    }
    Ok(())
}
