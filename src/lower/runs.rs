//! Blocks and message runs (item 1 of the module doc): consecutive chunks
//! with identical trees form a `Block`; per rank, consecutive blocks of
//! one owner in which that rank's whole reduce subtree is identical form a
//! run (`Runs::new`), cut further where a receiver's chains need it, and
//! in an allreduce those whose path from the owner in the broadcast tree
//! agrees form a broadcast run (`Runs::broadcast`).

use crate::ir::msccl::MAX_CNT;
use crate::ir::{Spec, Transfer};

/// Consecutive chunks of one owner with identical trees: they move as one
/// multi-chunk step.
pub(super) struct Block {
    pub(super) start: usize,
    pub(super) len: usize,
    pub(super) owner: usize,
}

/// Message runs (item 1 of the module doc): per rank, consecutive blocks
/// of one owner whose partial sums that rank computes identically — its
/// whole subtree is the same — so it moves them as one message. Only owners
/// whose shard is several blocks have runs; elsewhere a run is a block.
pub(super) struct Runs {
    /// Per owner with several blocks: (first block, blocks, offset in
    /// `cut`).
    owner: Vec<Option<(usize, usize, usize)>>,
    /// `cut[off + v·(nb − 1) + i]`: rank v's run ends between blocks
    /// first + i and first + i + 1.
    cut: Vec<bool>,
}

/// One block's tree: every rank's parent edge (dst, step, channel) and its
/// children (step, src, channel) sorted as the chains list them.
struct TreeView {
    parent: Vec<Option<(usize, usize, usize)>>,
    kid_start: Vec<usize>,
    kids: Vec<(usize, usize, usize)>,
}

impl TreeView {
    fn new(n: usize, transfers: &[(usize, usize, usize, usize)]) -> TreeView {
        let mut parent = vec![None; n];
        let mut by_dst: Vec<(usize, usize, usize, usize)> = transfers
            .iter()
            .map(|&(src, dst, step, ch)| (dst, step, src, ch))
            .collect();
        by_dst.sort_unstable();
        let mut kid_start = vec![0usize; n + 1];
        for &(dst, step, src, ch) in &by_dst {
            kid_start[dst + 1] += 1;
            parent[src] = Some((dst, step, ch));
        }
        for v in 0..n {
            kid_start[v + 1] += kid_start[v];
        }
        let kids = by_dst
            .iter()
            .map(|&(_, st, src, ch)| (st, src, ch))
            .collect();
        TreeView {
            parent,
            kid_start,
            kids,
        }
    }
    fn kids(&self, v: usize) -> &[(usize, usize, usize)] {
        &self.kids[self.kid_start[v]..self.kid_start[v + 1]]
    }
}

impl Runs {
    /// Every run one block.
    pub(super) fn blocks_only(n: usize) -> Runs {
        Runs {
            owner: vec![None; n],
            cut: Vec::new(),
        }
    }

    pub(super) fn new(
        n: usize,
        blocks: &[Block],
        per_chunk: &[Vec<(usize, usize, usize, usize)>],
    ) -> Runs {
        let mut runs = Runs {
            owner: vec![None; n],
            cut: Vec::new(),
        };
        for (b, e) in several_blocks(blocks) {
            let o = blocks[b].owner;
            let off = runs.cut.len();
            runs.cut.resize(off + n * (e - b - 1), false);
            runs.owner[o] = Some((b, e - b, off));
            let views: Vec<TreeView> = (b..e)
                .map(|x| TreeView::new(n, &per_chunk[blocks[x].start]))
                .collect();
            runs.cut_owner(n, o, &blocks[b..e], &views);
        }
        runs
    }

    /// Rank v's run containing block b: blocks [start, end).
    pub(super) fn run(&self, v: usize, b: usize, blocks: &[Block]) -> (usize, usize) {
        let Some((first, nb, off)) = self.owner[blocks[b].owner] else {
            return (b, b + 1);
        };
        let cut = &self.cut[off + v * (nb - 1)..off + (v + 1) * (nb - 1)];
        let i = b - first;
        let mut s = i;
        while s > 0 && !cut[s - 1] {
            s -= 1;
        }
        let mut e = i;
        while e + 1 < nb && !cut[e] {
            e += 1;
        }
        (first + s, first + e + 1)
    }

    /// The cuts of one owner's blocks `bl` (trees `views`):
    /// 1. rank v is cut between blocks i and i + 1 unless its parent edge
    ///    and children agree and every child is uncut there (so its
    ///    subtree is identical); the owner is always cut;
    /// 2. a run holds at most MAX_CNT chunks, and a parent is cut wherever
    ///    a child is (a message never spans a child's two messages);
    /// 3. a receive that spans several of the receiver's runs is one step
    ///    in all their chains, and an MSCCL step waits on one dependency:
    ///    it must have the same predecessor in each (or none); where it
    ///    does not, the child is cut at the receiver's cuts.
    fn cut_owner(&mut self, n: usize, o: usize, bl: &[Block], views: &[TreeView]) {
        let (_, nb, off) = self.owner[o].expect("owner with several blocks");
        let w = nb - 1;
        let at = |v: usize, i: usize| off + v * w + i;
        // Mark v cut at i, and every ancestor (block i's tree) up to the
        // first one already cut.
        let mark_up = |cut: &mut Vec<bool>, mut v: usize, i: usize| {
            cut[at(v, i)] = true;
            while let Some((p, _, _)) = views[i].parent[v] {
                if cut[at(p, i)] {
                    break;
                }
                cut[at(p, i)] = true;
                v = p;
            }
        };
        for i in 0..w {
            let (a, b) = (&views[i], &views[i + 1]);
            let differs: Vec<usize> = (0..n)
                .filter(|&v| v == o || a.parent[v] != b.parent[v] || a.kids(v) != b.kids(v))
                .collect();
            for v in differs {
                mark_up(&mut self.cut, v, i);
            }
        }
        for v in 0..n {
            let mut acc = bl[0].len;
            for i in 0..w {
                let next = bl[i + 1].len;
                if self.cut[at(v, i)] {
                    acc = next;
                } else if acc + next > MAX_CNT {
                    mark_up(&mut self.cut, v, i);
                    acc = next;
                } else {
                    acc += next;
                }
            }
        }
        let run = |cut: &[bool], v: usize, i: usize| {
            let mut s = i;
            while s > 0 && !cut[at(v, s - 1)] {
                s -= 1;
            }
            let mut e = i;
            while e < w && !cut[at(v, e)] {
                e += 1;
            }
            (s, e + 1)
        };
        loop {
            let mut changed = false;
            for p in 0..n {
                let mut qs = 0;
                while qs < nb {
                    let (_, qe) = run(&self.cut, p, qs);
                    for &(_, c, _) in views[qs].kids(p) {
                        let (rs, re) = run(&self.cut, c, qs);
                        if rs != qs || re == qe {
                            continue;
                        }
                        // Shared by p's runs in [rs, re): same predecessor?
                        let pred = |q: usize| {
                            let kids = views[q].kids(p);
                            let k = kids.iter().position(|x| x.1 == c).expect("child");
                            (k > 0).then(|| (kids[k - 1].1, run(&self.cut, kids[k - 1].1, q).0))
                        };
                        let first = pred(qs);
                        let mut q = qe;
                        let mut same = true;
                        while q < re {
                            same &= pred(q) == first;
                            q = run(&self.cut, p, q).1;
                        }
                        if !same {
                            for i in rs..re - 1 {
                                if self.cut[at(p, i)] && !self.cut[at(c, i)] {
                                    self.cut[at(c, i)] = true;
                                    changed = true;
                                }
                            }
                        }
                    }
                    qs = qe;
                }
            }
            if !changed {
                break;
            }
        }
    }
}

/// The spans [start, end) of consecutive blocks of one owner, where an
/// owner has several.
fn several_blocks(blocks: &[Block]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut b = 0;
    while b < blocks.len() {
        let mut e = b + 1;
        while e < blocks.len() && blocks[e].owner == blocks[b].owner {
            e += 1;
        }
        if e - b > 1 {
            out.push((b, e));
        }
        b = e;
    }
    out
}

/// Chunks per block on average (at least 1): transfers of a block are
/// lowered once for all its chunks.
pub(super) fn chunks_per_block(blocks: &[Block], total: usize) -> usize {
    total.div_ceil(blocks.len().max(1)).max(1)
}

/// Per chunk (of `total`): its transfers (src, dst, step, channel) sorted,
/// as the block signature.
pub(super) fn per_chunk(
    transfers: &[Transfer],
    total: usize,
) -> Vec<Vec<(usize, usize, usize, usize)>> {
    let mut per_chunk: Vec<Vec<(usize, usize, usize, usize)>> = vec![Vec::new(); total];
    for t in transfers {
        per_chunk[t.chunk].push((t.src, t.dst, t.step, t.channel));
    }
    for v in per_chunk.iter_mut() {
        v.sort_unstable();
    }
    per_chunk
}

/// The blocks: maximal runs of consecutive chunks of one owner with equal
/// signatures (reduce and copy trees), at most MAX_CNT chunks each.
pub(super) fn blocks(
    spec: Spec,
    per_chunk: &[Vec<(usize, usize, usize, usize)>],
    per_bcast: &[Vec<(usize, usize, usize, usize)>],
) -> Vec<Block> {
    let total = spec.total_chunks();
    let mut blocks: Vec<Block> = Vec::new();
    let mut block_of = vec![0usize; total];
    for c in 0..total {
        let owner = spec.owner(c);
        if let Some(b) = blocks.last_mut() {
            if b.owner == owner
                && b.len < MAX_CNT
                && b.start + b.len == c
                && per_chunk[b.start] == per_chunk[c]
                && per_bcast[b.start] == per_bcast[c]
            {
                b.len += 1;
                block_of[c] = blocks.len() - 1;
                continue;
            }
        }
        block_of[c] = blocks.len();
        blocks.push(Block {
            start: c,
            len: 1,
            owner,
        });
    }
    blocks
}

impl Runs {
    /// An allreduce's broadcast runs: per rank, the consecutive blocks of
    /// one owner that it receives as one message — the edges on its path
    /// from the owner agree across them (blocks split by the reduction's
    /// trees, as in a pair of two synthesizers' halves, keep the
    /// broadcast's messages). A rank's receive runs nest in its parent's
    /// (it forwards sub-ranges of what it received), so the edge v → k
    /// moves k's receive runs; the owner's sends join the reductions of
    /// every block they span. The owner's row is unused.
    pub(super) fn broadcast(
        n: usize,
        blocks: &[Block],
        per_bcast: &[Vec<(usize, usize, usize, usize)>],
    ) -> Runs {
        let mut runs = Runs::blocks_only(n);
        let parents = |x: usize| -> Vec<Option<(usize, usize, usize)>> {
            let mut p = vec![None; n];
            for &(src, dst, step, ch) in &per_bcast[blocks[x].start] {
                p[dst] = Some((src, step, ch));
            }
            p
        };
        for (b, e) in several_blocks(blocks) {
            let o = blocks[b].owner;
            let (nb, off) = (e - b, runs.cut.len());
            let w = nb - 1;
            runs.cut.resize(off + n * w, false);
            runs.owner[o] = Some((b, nb, off));
            // A run holds at most MAX_CNT chunks: the same cuts for
            // every rank, so nesting holds.
            let mut full = vec![false; w];
            let mut acc = blocks[b].len;
            for (i, f) in full.iter_mut().enumerate() {
                let next = blocks[b + i + 1].len;
                if acc + next > MAX_CNT {
                    *f = true;
                    acc = next;
                } else {
                    acc += next;
                }
            }
            let mut next = parents(b);
            for (i, &f) in full.iter().enumerate() {
                let here = std::mem::replace(&mut next, parents(b + i + 1));
                // cut(v) = full ∨ v's edge differs ∨ cut(parent(v)),
                // memoised along each path from the owner.
                let mut memo: Vec<Option<bool>> = vec![None; n];
                memo[o] = Some(f);
                let mut path = Vec::new();
                for v in 0..n {
                    let mut u = v;
                    let val = loop {
                        if let Some(c) = memo[u] {
                            break c;
                        }
                        match here[u] {
                            // Not in the tree (one rank): nothing to move.
                            None => break true,
                            Some(_) if f || here[u] != next[u] => break true,
                            Some((p, _, _)) => {
                                path.push(u);
                                u = p;
                            }
                        }
                    };
                    memo[u] = Some(val);
                    for x in path.drain(..) {
                        memo[x] = Some(val);
                    }
                }
                for (v, m) in memo.iter().enumerate() {
                    runs.cut[off + v * w + i] = m.unwrap_or(true);
                }
            }
        }
        runs
    }
}
