//! Which file of an `MSCCL_ALGO_DIR` the runtime takes for a call: the
//! executor's per-call selection (../shared/reference/msccl-selection.md
//! §2, `lifecycle.cc:304-348`) and RCCL's, which tests the same five
//! conditions but walks the directory in `readdir` order (§5).
//!
//! A file serves a call when the collective and the rank count match, the
//! count is positive and `count × sizeMultiplier` is a multiple of
//! `nchunksperloop` (sizeMultiplier = ngpus for reduce-scatter and
//! allgather, 1 for allreduce), `nBytes = count × sizeof(dtype) ×
//! sizeMultiplier` lies in the file's band, and the file allows the call's
//! mode (in place or out of place). The executor takes the first such file
//! in byte-wise sorted path order; RCCL any of them (the filesystem's
//! order), so there more than one is ambiguous. The op (sum, prod, max,
//! min: never avg or premul-sum) is the caller's; every call here is a sum.

use crate::ir::{Collective, Program, Runtime};

/// One collective call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    pub coll: Collective,
    pub ranks: usize,
    /// NCCL's count: recvcount (reduce-scatter), sendcount (allgather),
    /// count (allreduce).
    pub count: u64,
    /// Bytes per element.
    pub esize: u64,
    pub inplace: bool,
}

impl Call {
    /// `sizeMultiplier` of the call's collective.
    pub fn multiplier(&self) -> u64 {
        match self.coll {
            Collective::ReduceScatter | Collective::AllGather => self.ranks as u64,
            Collective::AllReduce => 1,
        }
    }
    /// The bytes the runtime compares with `minBytes`/`maxBytes`
    /// (nccl-tests' S).
    pub fn bytes(&self) -> u64 {
        self.count
            .saturating_mul(self.esize)
            .saturating_mul(self.multiplier())
    }
}

/// Whether `p` serves `call` under `rt`'s per-call tests.
pub fn accepts(rt: Runtime, p: &Program, call: &Call) -> bool {
    let c = p.nchunksperloop.max(1) as u64;
    let divisible = call.count > 0
        && (call.count as u128 * call.multiplier() as u128).is_multiple_of(c as u128);
    let mode = if call.inplace {
        p.inplace
    } else {
        p.outofplace
    };
    p.coll == call.coll
        && p.ngpus == call.ranks as i64
        && divisible
        && mode
        && rt.serves(p.min_bytes, p.max_bytes, call.bytes())
}

/// What a call gets from a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pick {
    /// The file at this index of the directory's files.
    File(usize),
    /// No file serves it: the call runs plain NCCL / RCCL.
    Fallback,
    /// RCCL: several files serve it and the filesystem's order decides.
    Ambiguous(Vec<usize>),
}

/// The file `rt` takes for `call` among `files` (sorted by path, as the
/// executor reads them).
pub fn select(rt: Runtime, files: &[&Program], call: &Call) -> Pick {
    let ok: Vec<usize> = (0..files.len())
        .filter(|&i| accepts(rt, files[i], call))
        .collect();
    match (rt, ok.len()) {
        (_, 0) => Pick::Fallback,
        (Runtime::Rccl, n) if n > 1 => Pick::Ambiguous(ok),
        _ => Pick::File(ok[0]),
    }
}

/// The counts the directory check sweeps: every power of two up to `top`,
/// the odd count above each (2^k + 1: a gradient bucket's count is any
/// number, at every size) and the awkward ones a framework issues (999,
/// 1000, 12345, 300001).
pub fn sweep_counts(top: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..63)
        .map(|e| 1u64 << e)
        .take_while(|&c| c <= top)
        .flat_map(|c| [c, c + 1])
        .filter(|&c| c <= top)
        .collect();
    for c in [3, 999, 1000, 12345, 300_001] {
        if c <= top {
            v.push(c);
        }
    }
    v.sort_unstable();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::builtin;

    fn call(count: u64, inplace: bool) -> Call {
        Call {
            coll: Collective::ReduceScatter,
            ranks: 8,
            count,
            esize: 4,
            inplace,
        }
    }

    #[test]
    fn divisibility_band_and_mode() {
        // ring(8, 2): C = 16, k = 2: even recvcounts only.
        let p = builtin::ring(8, 2);
        assert!(accepts(Runtime::Executor, &p, &call(2, false)));
        assert!(!accepts(Runtime::Executor, &p, &call(3, false)));
        assert!(!accepts(Runtime::Executor, &p, &call(0, false)));
        // Band: [1 KiB, 64 KiB] in S bytes (count × 4 × 8).
        let mut b = builtin::ring(8, 1);
        b.min_bytes = 1024;
        b.max_bytes = Some(64 << 10);
        assert!(!accepts(Runtime::Executor, &b, &call(16, false))); // 512 B
        assert!(accepts(Runtime::Executor, &b, &call(32, false))); // 1 KiB
        assert!(accepts(Runtime::Executor, &b, &call(2048, false))); // 64 KiB
        assert!(!accepts(Runtime::Executor, &b, &call(2049, false)));
        // Mode: an in-place-only file.
        let mut i = builtin::ring(8, 1);
        i.outofplace = false;
        assert!(accepts(Runtime::Executor, &i, &call(8, true)));
        assert!(!accepts(Runtime::Executor, &i, &call(8, false)));
        // Another rank count or op never matches.
        let c = Call {
            ranks: 4,
            ..call(8, false)
        };
        assert!(!accepts(Runtime::Executor, &builtin::ring(8, 1), &c));
        let c = Call {
            coll: Collective::AllReduce,
            ..call(8, false)
        };
        assert!(!accepts(Runtime::Executor, &builtin::ring(8, 1), &c));
    }

    #[test]
    fn first_file_wins_on_the_executor_rccl_is_ambiguous() {
        // k = 2 sorts first: it takes the even counts, the k = 1 file the
        // odd ones (a fall-through).
        let k2 = builtin::ring(8, 2);
        let k1 = builtin::ring(8, 1);
        let files = [&k2, &k1];
        assert_eq!(
            select(Runtime::Executor, &files, &call(4, false)),
            Pick::File(0)
        );
        assert_eq!(
            select(Runtime::Executor, &files, &call(5, false)),
            Pick::File(1)
        );
        assert_eq!(
            select(Runtime::Rccl, &files, &call(4, false)),
            Pick::Ambiguous(vec![0, 1])
        );
        assert_eq!(
            select(Runtime::Rccl, &files, &call(5, false)),
            Pick::File(1)
        );
        let only = [&k2];
        assert_eq!(
            select(Runtime::Executor, &only, &call(5, false)),
            Pick::Fallback
        );
    }

    #[test]
    fn the_sweep_has_powers_of_two_and_awkward_counts() {
        let v = sweep_counts(1 << 20);
        assert!(v.contains(&1) && v.contains(&(1 << 20)) && v.contains(&12345));
        assert!(!v.contains(&(1 << 21)));
        assert!(v.windows(2).all(|w| w[0] < w[1]));
    }
}
