//! Symbolic values (step 3 of the module doc): the multiset of (rank,
//! input chunk) contributions a slot sums, as a fingerprint (`Fp`) for the
//! fast run or exactly (`Exact`) to say what a wrong result misses or
//! repeats.

use std::collections::HashMap;

/// A symbolic value: the multiset of contributions a slot sums.
pub(super) trait Sym: Clone + PartialEq {
    fn input(rank: usize, chunk: usize) -> Self;
    fn add(&mut self, other: &Self);
    /// The reduce-scatter result for global chunk `chunk` over `n` ranks.
    fn expected(n: usize, chunk: usize) -> Self;
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn key(rank: usize, chunk: usize, seed: u64) -> u64 {
    splitmix(((rank as u64) << 32 | chunk as u64) ^ seed)
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct Fp {
    n: u64,
    a: u64,
    b: u64,
}

const SEED_A: u64 = 0x5bd1_e995_1234_5678;
const SEED_B: u64 = 0x2545_f491_4f6c_dd1d;

impl Sym for Fp {
    fn input(rank: usize, chunk: usize) -> Self {
        Fp {
            n: 1,
            a: key(rank, chunk, SEED_A),
            b: key(rank, chunk, SEED_B),
        }
    }
    fn add(&mut self, o: &Self) {
        self.n = self.n.wrapping_add(o.n);
        self.a = self.a.wrapping_add(o.a);
        self.b = self.b.wrapping_add(o.b);
    }
    fn expected(n: usize, chunk: usize) -> Self {
        let mut v = Fp { n: 0, a: 0, b: 0 };
        for q in 0..n {
            v.add(&Fp::input(q, chunk));
        }
        v
    }
}

/// Exact multiset, sorted.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(super) struct Exact(pub(super) Vec<(u32, u32)>);

impl Sym for Exact {
    fn input(rank: usize, chunk: usize) -> Self {
        Exact(vec![(rank as u32, chunk as u32)])
    }
    fn add(&mut self, o: &Self) {
        let mut v = Vec::with_capacity(self.0.len() + o.0.len());
        let (mut i, mut j) = (0, 0);
        while i < self.0.len() || j < o.0.len() {
            if j == o.0.len() || (i < self.0.len() && self.0[i] <= o.0[j]) {
                v.push(self.0[i]);
                i += 1;
            } else {
                v.push(o.0[j]);
                j += 1;
            }
        }
        self.0 = v;
    }
    fn expected(n: usize, chunk: usize) -> Self {
        Exact((0..n as u32).map(|q| (q, chunk as u32)).collect())
    }
}

impl Exact {
    /// Why `self` differs from `want`.
    pub(super) fn diff(&self, want: &Exact) -> String {
        let count = |v: &Exact| {
            let mut m: HashMap<(u32, u32), usize> = HashMap::new();
            for &k in &v.0 {
                *m.entry(k).or_default() += 1;
            }
            m
        };
        let (got, exp) = (count(self), count(want));
        let mut parts = Vec::new();
        let mut keys: Vec<_> = got.keys().chain(exp.keys()).copied().collect();
        keys.sort_unstable();
        keys.dedup();
        for k in keys {
            let (g, e) = (
                got.get(&k).copied().unwrap_or(0),
                exp.get(&k).copied().unwrap_or(0),
            );
            if g == e {
                continue;
            }
            let what = if e == 0 {
                format!(
                    "holds rank {}'s input chunk {} which does not belong here",
                    k.0, k.1
                )
            } else if g == 0 {
                format!(
                    "misses rank {}'s contribution (input chunk {}): never reduced",
                    k.0, k.1
                )
            } else {
                format!(
                    "counts rank {}'s contribution (input chunk {}) {g} times: reduced twice",
                    k.0, k.1
                )
            };
            parts.push(what);
            if parts.len() == 3 {
                parts.push("…".into());
                break;
            }
        }
        parts.join("; ")
    }
}
