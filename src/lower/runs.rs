//! Blocks and message runs (item 1 of the module doc): consecutive chunks
//! with identical trees form a `Block`; per rank, consecutive blocks in
//! which that rank's whole reduce subtree is identical form a run
//! (`Runs::new`; they may belong to several owners),
//! cut further where a receiver's chains need it, and those a rank
//! receives over one broadcast edge (in an allreduce by default: whose
//! path from the owner agrees) form a broadcast run (`Runs::edges`,
//! `Runs::broadcast`).

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
/// whose partial sums that rank computes identically — its whole subtree
/// is the same — so it moves them as one message. The blocks are taken in
/// groups of consecutive blocks (`groups`); a run never leaves its group,
/// and a block in no group is a run of its own.
pub(super) struct Runs {
    /// (first block, blocks, offset in `cut`) per group.
    groups: Vec<(usize, usize, usize)>,
    /// Per block its group, `NO_GROUP` where none (empty: none anywhere).
    group_of: Vec<u32>,
    /// `cut[off + v·(nb − 1) + i]`: rank v's run ends between blocks
    /// first + i and first + i + 1.
    cut: Vec<bool>,
    /// Per owner: some rank's run holds its blocks and another owner's
    /// (empty: nowhere).
    mixed: Vec<bool>,
}

const NO_GROUP: u32 = u32::MAX;

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
    pub(super) fn blocks_only() -> Runs {
        Runs {
            groups: Vec::new(),
            group_of: Vec::new(),
            cut: Vec::new(),
            mixed: Vec::new(),
        }
    }

    /// Blocks [b, e) (at least two) as a group, every rank uncut: its
    /// offset in `cut`.
    fn open_group(&mut self, n: usize, nblocks: usize, b: usize, e: usize) -> usize {
        if self.group_of.is_empty() {
            self.group_of = vec![NO_GROUP; nblocks];
        }
        let off = self.cut.len();
        self.cut.resize(off + n * (e - b - 1), false);
        let g = u32::try_from(self.groups.len()).expect("fewer groups than blocks");
        self.group_of[b..e].iter_mut().for_each(|x| *x = g);
        self.groups.push((b, e - b, off));
        off
    }

    /// The reduction's runs. A group may span several owners' blocks
    /// where some rank sends the same way in both blocks of a boundary
    /// (`shared_spans`): in a butterfly a rank's subtree is the same for
    /// consecutive shards, and it moves their partial sums as one message.
    pub(super) fn new(
        n: usize,
        blocks: &[Block],
        per_chunk: &[Vec<(usize, usize, usize, usize)>],
    ) -> Runs {
        let mut runs = Runs::blocks_only();
        let spans = shared_spans(blocks, per_chunk);
        for (b, e) in spans {
            let off = runs.open_group(n, blocks.len(), b, e);
            let views: Vec<TreeView> = (b..e)
                .map(|x| TreeView::new(n, &per_chunk[blocks[x].start]))
                .collect();
            runs.cut_group(n, off, &blocks[b..e], &views);
            if blocks[b].owner != blocks[e - 1].owner {
                runs.mark_mixed(n, blocks, b, e);
            }
        }
        runs
    }

    /// Whether some rank moves owner o's partial sums in one message with
    /// another owner's.
    pub(super) fn mixed(&self, o: usize) -> bool {
        self.mixed.get(o).copied().unwrap_or(false)
    }

    /// Mark the owners of group [b, e) that share a run with another.
    fn mark_mixed(&mut self, n: usize, blocks: &[Block], b: usize, e: usize) {
        if self.mixed.is_empty() {
            self.mixed = vec![false; n];
        }
        for v in 0..n {
            let mut x = b;
            while x < e {
                let (s, t) = self.run(v, x);
                if blocks[s].owner != blocks[t - 1].owner {
                    for y in &blocks[s..t] {
                        self.mixed[y.owner] = true;
                    }
                }
                x = t;
            }
        }
    }

    /// Whether some rank's run spans several blocks.
    pub(super) fn merges(&self) -> bool {
        self.cut.iter().any(|&c| !c)
    }

    /// Whether every one of `n` ranks has the same runs over `nb` blocks
    /// in both.
    pub(super) fn same_as(&self, other: &Runs, n: usize, nb: usize) -> bool {
        (0..n).all(|v| {
            let mut b = 0;
            while b < nb {
                let r = self.run(v, b);
                if r != other.run(v, b) {
                    return false;
                }
                b = r.1;
            }
            true
        })
    }

    /// Rank v's run containing block b: blocks [start, end).
    pub(super) fn run(&self, v: usize, b: usize) -> (usize, usize) {
        let g = self.group_of.get(b).copied().unwrap_or(NO_GROUP);
        if g == NO_GROUP {
            return (b, b + 1);
        }
        let (first, nb, off) = self.groups[g as usize];
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

    /// The cuts of one group's blocks `bl` (trees `views`; its cuts at
    /// `off` in `cut`):
    /// 1. rank v is cut between blocks i and i + 1 unless its parent edge
    ///    and children agree and every child is uncut there (so its
    ///    subtree is identical); an owner of either block is always cut;
    /// 2. a run holds at most MAX_CNT chunks, and a parent is cut wherever
    ///    a child is (a message never spans a child's two messages);
    /// 3. a receive that spans several of the receiver's runs is one step
    ///    in all their chains, and an MSCCL step waits on one dependency:
    ///    it must have the same predecessor in each (or none); the child
    ///    is cut where the predecessor changes from one of those runs to
    ///    the next.
    fn cut_group(&mut self, n: usize, off: usize, bl: &[Block], views: &[TreeView]) {
        let nb = bl.len();
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
            let (oa, ob) = (bl[i].owner, bl[i + 1].owner);
            let differs: Vec<usize> = (0..n)
                .filter(|&v| {
                    v == oa || v == ob || a.parent[v] != b.parent[v] || a.kids(v) != b.kids(v)
                })
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
        // Every rank's run bounds per block, [start, end), kept in step
        // with the cuts (a group can span every block of a large program).
        let mut bounds = vec![(0u32, 0u32); n * nb];
        let fill = |cut: &[bool], bounds: &mut [(u32, u32)], v: usize| {
            let row = &mut bounds[v * nb..(v + 1) * nb];
            let mut s = 0u32;
            for i in 0..nb {
                if i > 0 && cut[at(v, i - 1)] {
                    s = i as u32;
                }
                row[i].0 = s;
            }
            let mut e = nb as u32;
            for i in (0..nb).rev() {
                if i < w && cut[at(v, i)] {
                    e = i as u32 + 1;
                }
                row[i].1 = e;
            }
        };
        for v in 0..n {
            fill(&self.cut, &mut bounds, v);
        }
        let run = |bounds: &[(u32, u32)], v: usize, i: usize| {
            let (s, e) = bounds[v * nb + i];
            (s as usize, e as usize)
        };
        loop {
            let mut changed = false;
            for p in 0..n {
                let mut qs = 0;
                while qs < nb {
                    let (_, qe) = run(&bounds, p, qs);
                    for &(_, c, _) in views[qs].kids(p) {
                        let (rs, re) = run(&bounds, c, qs);
                        if rs != qs || re == qe {
                            continue;
                        }
                        // Shared by p's runs in [rs, re): same predecessor?
                        let pred = |q: usize| {
                            let kids = views[q].kids(p);
                            let k = kids.iter().position(|x| x.1 == c).expect("child");
                            (k > 0).then(|| (kids[k - 1].1, run(&bounds, kids[k - 1].1, q).0))
                        };
                        // Cut the child where the predecessor changes.
                        let mut before = pred(qs);
                        let mut q = qe;
                        let mut moved = false;
                        while q < re {
                            let here = pred(q);
                            if here != before && !self.cut[at(c, q - 1)] {
                                self.cut[at(c, q - 1)] = true;
                                moved = true;
                            }
                            before = here;
                            q = run(&bounds, p, q).1;
                        }
                        if moved {
                            fill(&self.cut, &mut bounds, c);
                            changed = true;
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
    spans(blocks.len(), |x| blocks[x].owner == blocks[x + 1].owner)
}

/// The spans [start, end) of at least two consecutive blocks in which
/// every two neighbours have one owner or some rank that sends the same
/// way in both trees (same parent, step and channel): only there can a
/// rank's run cross the boundary. Per-chunk edge lists are sorted by
/// sender, so one merge finds such a rank.
fn shared_spans(
    blocks: &[Block],
    per_chunk: &[Vec<(usize, usize, usize, usize)>],
) -> Vec<(usize, usize)> {
    spans(blocks.len(), |x| {
        let (a, b) = (&blocks[x], &blocks[x + 1]);
        if a.owner == b.owner {
            return true;
        }
        let (ta, tb) = (&per_chunk[a.start], &per_chunk[b.start]);
        let (mut i, mut j) = (0, 0);
        while i < ta.len() && j < tb.len() {
            match ta[i].cmp(&tb[j]) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => return true,
            }
        }
        false
    })
}

/// Maximal spans of at least two of `nb` consecutive blocks whose every
/// boundary x | x + 1 `joins`.
fn spans(nb: usize, joins: impl Fn(usize) -> bool) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut b = 0;
    while b < nb {
        let mut e = b + 1;
        while e < nb && joins(e - 1) {
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
    /// Broadcast receive runs by edge (an allgather's; an allreduce's
    /// with `bcast_edges`): per rank, consecutive blocks it receives over
    /// the same edge (parent, step, channel), within MAX_CNT chunks,
    /// whatever their owners — its parent sends them as one message once
    /// it has them all (`RankChains::push_bcast`). Blocks are taken in
    /// groups where some rank receives alike across each boundary
    /// (`shared_spans` over the broadcast trees); an owner is cut around
    /// its blocks (it receives nothing there).
    pub(super) fn edges(
        n: usize,
        blocks: &[Block],
        per_bcast: &[Vec<(usize, usize, usize, usize)>],
    ) -> Runs {
        let mut runs = Runs::blocks_only();
        let parents = |x: usize| parent_edges(n, &per_bcast[blocks[x].start]);
        for (b, e) in shared_spans(blocks, per_bcast) {
            let off = runs.open_group(n, blocks.len(), b, e);
            let w = e - b - 1;
            let mut acc = vec![blocks[b].len; n];
            let mut next = parents(b);
            for i in 0..w {
                let here = std::mem::replace(&mut next, parents(b + i + 1));
                let len = blocks[b + i + 1].len;
                for v in 0..n {
                    let cut = here[v].is_none() || here[v] != next[v] || acc[v] + len > MAX_CNT;
                    acc[v] = if cut { len } else { acc[v] + len };
                    runs.cut[off + v * w + i] = cut;
                }
            }
        }
        runs
    }

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
        let mut runs = Runs::blocks_only();
        let parents = |x: usize| parent_edges(n, &per_bcast[blocks[x].start]);
        for (b, e) in several_blocks(blocks) {
            let o = blocks[b].owner;
            let nb = e - b;
            let w = nb - 1;
            let off = runs.open_group(n, blocks.len(), b, e);
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

/// Every rank's parent edge (parent, step, channel) in one block's
/// broadcast tree (`edges`: its transfers (src, dst, step, channel)).
fn parent_edges(
    n: usize,
    edges: &[(usize, usize, usize, usize)],
) -> Vec<Option<(usize, usize, usize)>> {
    let mut p = vec![None; n];
    for &(src, dst, step, ch) in edges {
        p[dst] = Some((src, step, ch));
    }
    p
}
