//! The Algorithm IR: what synthesis produces, per chunk a tree of
//! transfers with their order.
//!
//! - **reduce** edges (`transfers`): one in-tree per chunk, rooted at the
//!   chunk's owner: every other rank sends its partial sum of that chunk
//!   to its parent exactly once, after it has received (and added) the
//!   partial sums of all its children.
//! - **copy** edges (`bcast`): one out-tree per chunk, rooted at the
//!   chunk's owner: every other rank receives the chunk exactly once and
//!   then forwards it to its children.
//!
//! A reduce-scatter has reduce edges only, an allgather copy edges only,
//! an allreduce both: each chunk's reduction ends at its owner and its
//! broadcast starts there, later. An allgather is the dual of a
//! reduce-scatter — every edge reversed and time reversed
//! ([`Algorithm::allgather_dual`]) — so a reduce-scatter synthesized on the
//! reversed topology is an allgather on this one, with the same link
//! loads; an allreduce is a reduce-scatter followed by an allgather over
//! the same chunking ([`Algorithm::allreduce`]).
//!
//! Routes are not part of the Algorithm: a tree edge is a GPU-to-GPU send,
//! and the topology decides which links it crosses.

use super::program::Collective;
use super::spec::Spec;
use std::fmt;

/// One tree edge: `src` sends its partial sum (reduce edge) or its copy
/// (copy edge) of `chunk` to `dst`, which adds it to its own or stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Transfer {
    /// Logical time: a transfer may start once all transfers into `src`
    /// for this chunk have finished; larger steps happen later. Lowering
    /// orders every connection by (step, chunk).
    pub step: usize,
    /// Global chunk index, 0..spec.total_chunks().
    pub chunk: usize,
    pub src: usize,
    pub dst: usize,
    /// Logical channel (a ring, a tree class); lowering maps it to MSCCL
    /// channels.
    pub channel: usize,
}

/// What every lowering of an Algorithm needs at least
/// ([`Algorithm::least_needs`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeastNeeds {
    /// Threadblocks per rank.
    pub threadblocks: usize,
    /// Threadblocks with a peer in one direction on one channel.
    pub peers_per_channel: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Algorithm {
    pub name: String,
    pub spec: Spec,
    /// Reduce edges: per chunk an in-tree to its owner.
    pub transfers: Vec<Transfer>,
    /// Copy edges: per chunk an out-tree from its owner.
    pub bcast: Vec<Transfer>,
}

/// Why an Algorithm is not a valid schedule of its op.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlgorithmError(pub String);

impl fmt::Display for AlgorithmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for AlgorithmError {}

impl Algorithm {
    /// A reduce-scatter from its in-trees.
    pub fn reduce_scatter(name: impl Into<String>, spec: Spec, transfers: Vec<Transfer>) -> Self {
        Algorithm {
            name: name.into(),
            spec,
            transfers,
            bcast: Vec::new(),
        }
    }

    /// Every edge of either kind.
    pub fn edges(&self) -> impl Iterator<Item = &Transfer> {
        self.transfers.iter().chain(&self.bcast)
    }

    /// What any lowering of it needs at least, from its connections
    /// (peer and channel, per direction) alone. A threadblock serves one
    /// send connection and one receive connection, and splitting a
    /// connection's messages over channels only adds connections (its
    /// first group stays on its logical channel), so a rank needs as many
    /// threadblocks as it has send or receive connections, and as many
    /// with a peer in one direction on one channel as it has peers there.
    pub fn least_needs(&self) -> LeastNeeds {
        let n = self.spec.ranks;
        // Connections first (far fewer than transfers: every chunk of a
        // shard crosses the same ones), then both ends of each.
        // Inserted one by one: collecting would size the table for every
        // transfer (millions at a thousand ranks, each insert a cache
        // miss) where it holds far fewer.
        let mut conns: rustc_hash::FxHashSet<(usize, usize, usize)> = Default::default();
        for t in self.edges() {
            conns.insert((t.src, t.dst, t.channel));
        }
        let mut ends: Vec<(usize, bool, usize, usize)> = conns
            .into_iter()
            .flat_map(|(src, dst, ch)| [(src, true, ch, dst), (dst, false, ch, src)])
            .collect();
        ends.sort_unstable();
        let mut count = vec![[0usize; 2]; n];
        let mut per_channel = 0;
        let mut run = 0;
        for (i, &(r, send, ch, _)) in ends.iter().enumerate() {
            if let Some(c) = count.get_mut(r) {
                c[send as usize] += 1;
            }
            let same = i > 0 && {
                let (r0, s0, c0, _) = ends[i - 1];
                (r0, s0, c0) == (r, send, ch)
            };
            run = if same { run + 1 } else { 1 };
            per_channel = per_channel.max(run);
        }
        LeastNeeds {
            threadblocks: count.iter().map(|c| c[0].max(c[1])).max().unwrap_or(0),
            peers_per_channel: per_channel,
        }
    }

    /// Number of logical channels used.
    pub fn num_channels(&self) -> usize {
        self.edges().map(|t| t.channel + 1).max().unwrap_or(1)
    }

    /// Largest step + 1.
    pub fn num_steps(&self) -> usize {
        self.edges().map(|t| t.step + 1).max().unwrap_or(0)
    }

    /// The allgather dual of this reduce-scatter: every edge reversed and
    /// its step mirrored (step' = steps − 1 − step), so a rank forwards a
    /// chunk after it received it, and the owner's sends come first. A
    /// reduce-scatter made for the reversed topology is an allgather for
    /// this one that loads every link as the reduce-scatter loads its
    /// reverse.
    pub fn allgather_dual(&self) -> Algorithm {
        let last = self.num_steps().saturating_sub(1);
        let bcast = self
            .transfers
            .iter()
            .map(|t| Transfer {
                step: last - t.step,
                chunk: t.chunk,
                src: t.dst,
                dst: t.src,
                channel: t.channel,
            })
            .collect();
        Algorithm {
            name: self.name.clone(),
            spec: Spec {
                coll: Collective::AllGather,
                ..self.spec
            },
            transfers: Vec::new(),
            bcast,
        }
    }

    /// This broadcast with the owner's lanes in turn on `ways` channels:
    /// where the owner sends to one rank at several steps, one channel per
    /// step (rail lanes: each chunk its own step and channel), the i-th of
    /// those steps moves onto the channel of the (i mod `ways`)-th, so
    /// each of `ways` threadblocks sends its lanes in step order. None
    /// where no (owner, receiver) pair has more than `ways` such lanes.
    ///
    /// In a reduce-scatter the lanes' sends wait for their own reductions,
    /// which end one after another, so each lane takes the link as the one
    /// before it leaves it, and the next stage pipelines behind. In its
    /// dual ([`Algorithm::allgather_dual`]) those sends are the owner's:
    /// nothing holds them back, on channels of their own they start
    /// together, share the link fairly and end together, and every lane's
    /// forwarding then waits for the last. On one channel each lane pays
    /// its route's α after the one before; on two, each lane's α passes
    /// while the other channel's lane moves, and two lanes share the link
    /// at a time. `auto` scores the dual and both (2 × DGX-H100's allgather
    /// at 16 MiB, `hier-c2`: side by side the rail lanes end together at
    /// 25.6 µs and the host-mates have their last chunk at 43.3 µs; on one
    /// channel the lanes end at 15.1 and 30.2 µs, and the last chunk lands
    /// at 39.0 µs). Where the owner's sends to one rank share a step they
    /// stay as they are (`pack`'s split form gives each chunk a channel of
    /// its own on purpose: equal connections on a link end together).
    pub fn owner_lanes_in_turn(&self, ways: usize) -> Option<Algorithm> {
        let moved = self.owner_lane_channels(ways)?;
        let spec = &self.spec;
        let mut a = self.clone();
        for t in a.bcast.iter_mut() {
            if t.src == spec.owner(t.chunk) {
                if let Some(&c) = moved.get(&(t.src, t.dst, t.step)) {
                    t.channel = c;
                }
            }
        }
        Some(a)
    }

    /// Whether [`Algorithm::owner_lanes_in_turn`] on `ways` channels
    /// changes anything, without building it.
    pub fn has_owner_lanes(&self, ways: usize) -> bool {
        self.owner_lane_channels(ways).is_some()
    }

    /// (owner, receiver, step) → the channel the owner's lane at that step
    /// moves to, for [`Algorithm::owner_lanes_in_turn`]; None where no
    /// send would change channel.
    fn owner_lane_channels(
        &self,
        ways: usize,
    ) -> Option<std::collections::BTreeMap<(usize, usize, usize), usize>> {
        use std::collections::btree_map::{BTreeMap, Entry};
        let spec = &self.spec;
        let ways = ways.max(1);
        let owners = || self.bcast.iter().filter(|t| t.src == spec.owner(t.chunk));
        // Per (owner, receiver): step → its one channel, or None where
        // the step has several.
        let mut lanes: BTreeMap<(usize, usize), BTreeMap<usize, Option<usize>>> = BTreeMap::new();
        for t in owners() {
            match lanes.entry((t.src, t.dst)).or_default().entry(t.step) {
                Entry::Vacant(e) => {
                    e.insert(Some(t.channel));
                }
                Entry::Occupied(mut e) => {
                    if *e.get() != Some(t.channel) {
                        e.insert(None);
                    }
                }
            }
        }
        // (owner, receiver, step) → the channel its lane moves to.
        let mut moved: BTreeMap<(usize, usize, usize), usize> = BTreeMap::new();
        for ((src, dst), steps) in lanes {
            let Some(chans) = steps.values().copied().collect::<Option<Vec<usize>>>() else {
                continue;
            };
            if chans.len() <= ways {
                continue;
            }
            for (i, &step) in steps.keys().enumerate() {
                moved.insert((src, dst, step), chans[i % ways]);
            }
        }
        owners()
            .any(|t| {
                moved
                    .get(&(t.src, t.dst, t.step))
                    .is_some_and(|&c| c != t.channel)
            })
            .then_some(moved)
    }

    /// An allgather over this reduce-scatter's own connections, where
    /// every in-tree is a chain through all ranks on one channel, p₀ → p₁
    /// → … → owner, and the owner also sends to p₀ on that channel (for
    /// another chunk: a ring): each chunk goes on around, owner → p₀ → …
    /// → the owner's last child, one hop a step on its reduction's
    /// channel. An allreduce that runs it on the reduction's channels
    /// ([`Algorithm::allreduce_on`] with `own` 0) is NCCL's ring
    /// allreduce: each threadblock's send and receive peers serve both
    /// halves, so it needs one threadblock per ring and channel where the
    /// dual, which runs the ring the other way, needs two. None for
    /// anything else.
    pub fn allgather_along(&self) -> Option<Algorithm> {
        let spec = self.spec;
        let n = spec.ranks;
        if spec.coll != Collective::ReduceScatter || !self.bcast.is_empty() || n < 2 {
            return None;
        }
        let conns: rustc_hash::FxHashSet<(usize, usize, usize)> = self
            .transfers
            .iter()
            .map(|t| (t.src, t.dst, t.channel))
            .collect();
        let mut by_chunk: Vec<Vec<&Transfer>> = vec![Vec::new(); spec.total_chunks()];
        for t in &self.transfers {
            by_chunk.get_mut(t.chunk)?.push(t);
        }
        let mut bcast = Vec::with_capacity(self.transfers.len());
        for (c, edges) in by_chunk.iter().enumerate() {
            let owner = spec.owner(c);
            if edges.len() != n - 1 {
                return None;
            }
            let ch = edges[0].channel;
            // Parent of each sender, and how many children each rank has.
            let mut parent = vec![usize::MAX; n];
            let mut children = vec![0usize; n];
            for t in edges {
                if t.channel != ch || t.src >= n || t.dst >= n || parent[t.src] != usize::MAX {
                    return None;
                }
                parent[t.src] = t.dst;
                children[t.dst] += 1;
            }
            // A chain: one leaf, every other rank one child.
            let mut leaves = (0..n).filter(|&r| children[r] == 0);
            let (first, more) = (leaves.next()?, leaves.next());
            if more.is_some() || first == owner || !conns.contains(&(owner, first, ch)) {
                return None;
            }
            let mut at = first;
            let mut prev = owner;
            for step in 0..n - 1 {
                if at >= n || at == owner {
                    return None;
                }
                bcast.push(Transfer {
                    step,
                    chunk: c,
                    src: prev,
                    dst: at,
                    channel: ch,
                });
                prev = at;
                at = parent[at];
            }
            if at != owner {
                return None;
            }
        }
        Some(Algorithm {
            name: self.name.clone(),
            spec: Spec {
                coll: Collective::AllGather,
                ..spec
            },
            transfers: Vec::new(),
            bcast,
        })
    }

    /// The allreduce that runs reduce-scatter `rs` and then allgather
    /// `ag` over the same chunking: `ag`'s steps follow all of `rs`'s, so
    /// each chunk is broadcast from its owner once its reduction is there.
    /// The broadcast takes logical channels of its own (after `rs`'s): a
    /// threadblock replays its whole program per tile, so one that held
    /// both halves would finish a tile's broadcast — which waits for that
    /// tile's whole reduction — before it starts the next tile's
    /// reduction, and the two halves would stop pipelining.
    pub fn allreduce(rs: &Algorithm, ag: &Algorithm) -> Algorithm {
        Algorithm::allreduce_on(rs, ag, ag.num_channels())
    }

    /// [`Algorithm::allreduce`] with the broadcast on `own` channels of its
    /// own: its channel c on the reduction's channel count + c mod `own`
    /// (all of its channels where `own` is its channel count; several
    /// folded onto one where the runtime's channels or the threadblock
    /// budget cannot take them all, so a rank's sends to one peer on two
    /// broadcast channels share a threadblock), or on the reduction's own
    /// channels where `own` is 0 (then a threadblock can hold both halves,
    /// and they stop pipelining).
    pub fn allreduce_on(rs: &Algorithm, ag: &Algorithm, own: usize) -> Algorithm {
        let off = rs.num_steps();
        let chans = rs.num_channels();
        let channel = |c: usize| if own == 0 { c } else { chans + c % own };
        Algorithm {
            name: rs.name.clone(),
            spec: Spec {
                coll: Collective::AllReduce,
                ..rs.spec
            },
            transfers: rs.transfers.clone(),
            bcast: ag
                .bcast
                .iter()
                .map(|t| Transfer {
                    step: t.step + off,
                    channel: channel(t.channel),
                    ..*t
                })
                .collect(),
        }
    }

    /// Whether this allreduce runs its broadcast on the reduction's
    /// channels (`allreduce_on` with `own` 0): fewer channels than its
    /// halves have together.
    pub fn bcast_shares_channels(&self) -> bool {
        self.halves()
            .is_some_and(|(rs, ag)| self.num_channels() < rs.num_channels() + ag.num_channels())
    }

    /// The fewer channels of its own [`Algorithm::allreduce_on`] may fold
    /// allgather `ag`'s n onto where all n do not fit, most first: ⌈n/2⌉
    /// and 1 (those below n).
    pub fn bcast_folds(ag: &Algorithm) -> Vec<usize> {
        let n = ag.num_channels();
        let mut v = vec![n.div_ceil(2), 1];
        v.retain(|&k| k < n);
        v.dedup();
        v
    }

    /// The same schedule over `m` times as many chunks: chunk c becomes
    /// chunks c·m … c·m + m − 1, each moved by c's trees at c's steps. A
    /// shard's chunks stay consecutive, so every new chunk has c's owner,
    /// and lowering moves the m copies as one multi-chunk step.
    pub fn refine(&self, m: usize) -> Algorithm {
        let m = m.max(1);
        let split = |v: &[Transfer]| -> Vec<Transfer> {
            v.iter()
                .flat_map(|t| {
                    (0..m).map(move |i| Transfer {
                        chunk: t.chunk * m + i,
                        ..*t
                    })
                })
                .collect()
        };
        Algorithm {
            name: self.name.clone(),
            spec: Spec {
                total: self.spec.total * m,
                ..self.spec
            },
            transfers: split(&self.transfers),
            bcast: split(&self.bcast),
        }
    }

    /// A composed allreduce's two halves: its reduce-scatter (the reduce
    /// edges) and its allgather (the copy edges, steps and channels
    /// renumbered from 0). None for anything else (a fused allreduce too).
    pub fn halves(&self) -> Option<(Algorithm, Algorithm)> {
        let spec = self.spec;
        if spec.coll != Collective::AllReduce || spec.is_fused() {
            return None;
        }
        let step0 = self.bcast.iter().map(|t| t.step).min().unwrap_or(0);
        let chan0 = self.bcast.iter().map(|t| t.channel).min().unwrap_or(0);
        let rs = Algorithm {
            name: self.name.clone(),
            spec: Spec {
                coll: Collective::ReduceScatter,
                ..spec
            },
            transfers: self.transfers.clone(),
            bcast: Vec::new(),
        };
        let ag = Algorithm {
            name: self.name.clone(),
            spec: Spec {
                coll: Collective::AllGather,
                ..spec
            },
            transfers: Vec::new(),
            bcast: self
                .bcast
                .iter()
                .map(|t| Transfer {
                    step: t.step - step0,
                    channel: t.channel - chan0,
                    ..*t
                })
                .collect(),
        };
        Some((rs, ag))
    }

    /// The allreduce that runs reduce-scatter `rs` and then allgather `ag`
    /// of any two chunkings of one machine's shards: both refined to the
    /// least common multiple of their chunks per shard
    /// ([`Algorithm::refine`]), then composed as [`Algorithm::allreduce_on`]
    /// does. Named "RS + AG". None when the two are not a reduce-scatter
    /// and an allgather over the same ranks and call modes.
    pub fn paired(rs: &Algorithm, ag: &Algorithm, own: usize) -> Option<Algorithm> {
        let (a, b) = (rs.spec, ag.spec);
        if a.coll != Collective::ReduceScatter
            || b.coll != Collective::AllGather
            || a.ranks != b.ranks
            || (a.inplace, a.outofplace) != (b.inplace, b.outofplace)
            || a.ranks == 0
            || a.total % a.ranks != 0
            || b.total % b.ranks != 0
        {
            return None;
        }
        let (ka, kb) = (a.chunks(), b.chunks());
        let (mut x, mut y) = (ka, kb);
        while y != 0 {
            (x, y) = (y, x % y);
        }
        let k = ka / x.max(1) * kb;
        let mut ar = Algorithm::allreduce_on(&rs.refine(k / ka), &ag.refine(k / kb), own);
        ar.name = format!("{} + {}", rs.name, ag.name);
        Some(ar)
    }

    /// The fused allreduce of this allreduce: one chunk, the whole buffer,
    /// reduced up the in-tree of one of rank 0's chunks and broadcast down
    /// that chunk's out-tree — one pass up and one down a tree instead of a
    /// reduce-scatter and an allgather over shards. Of rank 0's chunks the
    /// one whose two trees are shallowest (fewest hops from the farthest
    /// leaf, summed; the lowest index on ties). Steps and channels keep
    /// their order, renumbered densely. None for anything but a composed
    /// allreduce.
    pub fn fused(&self) -> Option<Algorithm> {
        let spec = self.spec;
        if spec.coll != Collective::AllReduce || spec.is_fused() || spec.ranks < 2 {
            return None;
        }
        let chunks = (0..spec.total).take_while(|&c| spec.owner(c) == 0);
        let depth = |c: usize| -> usize {
            // Hops to the root: a reduce edge's sender is one deeper than
            // its receiver, a copy edge's receiver one deeper than its
            // sender (parents before children in step order).
            let mut red = vec![0usize; spec.ranks];
            let mut up: Vec<&Transfer> = self.transfers.iter().filter(|t| t.chunk == c).collect();
            up.sort_by_key(|t| std::cmp::Reverse(t.step));
            for t in up {
                red[t.src] = red[t.dst] + 1;
            }
            let mut cp = vec![0usize; spec.ranks];
            let mut down: Vec<&Transfer> = self.bcast.iter().filter(|t| t.chunk == c).collect();
            down.sort_by_key(|t| t.step);
            for t in down {
                cp[t.dst] = cp[t.src] + 1;
            }
            red.iter().max().copied().unwrap_or(0) + cp.iter().max().copied().unwrap_or(0)
        };
        let c = chunks.min_by_key(|&c| (depth(c), c))?;
        let keep = |v: &[Transfer]| -> Vec<Transfer> {
            v.iter()
                .filter(|t| t.chunk == c)
                .map(|t| Transfer { chunk: 0, ..*t })
                .collect()
        };
        let (mut transfers, mut bcast) = (keep(&self.transfers), keep(&self.bcast));
        let dense = |key: fn(&Transfer) -> usize, all: &[Transfer]| -> Vec<usize> {
            let mut v: Vec<usize> = all.iter().map(key).collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        let all: Vec<Transfer> = transfers.iter().chain(&bcast).copied().collect();
        let steps = dense(|t| t.step, &all);
        let chans = dense(|t| t.channel, &all);
        for t in transfers.iter_mut().chain(bcast.iter_mut()) {
            t.step = steps.binary_search(&t.step).expect("a kept step");
            t.channel = chans.binary_search(&t.channel).expect("a kept channel");
        }
        Some(Algorithm {
            name: format!("{} fused", self.name),
            spec: Spec { total: 1, ..spec },
            transfers,
            bcast,
        })
    }

    /// Check the trees the op needs: reduce in-trees for reduce-scatter
    /// and allreduce, copy out-trees for allgather and allreduce, none of
    /// the other kind; in an allreduce every rank's broadcast receive comes
    /// after its reduce send, and the owner's broadcast after its
    /// reduction.
    pub fn check(&self) -> Result<(), AlgorithmError> {
        let reduces = self.spec.coll.reduces();
        let copies = self.spec.coll != Collective::ReduceScatter;
        let op = self.spec.coll.display();
        if !reduces && !self.transfers.is_empty() {
            return Err(AlgorithmError(format!("a {op} has no reduce transfers")));
        }
        if !copies && !self.bcast.is_empty() {
            return Err(AlgorithmError(format!("a {op} has no copy transfers")));
        }
        if reduces {
            self.check_reduce()?;
        }
        if copies {
            self.check_bcast()?;
        }
        if reduces && copies {
            self.check_phases()?;
        }
        Ok(())
    }

    /// Allreduce order: per chunk, a rank's broadcast receive follows its
    /// reduce send, and the owner's broadcast sends follow every reduce
    /// transfer into it.
    fn check_phases(&self) -> Result<(), AlgorithmError> {
        let n = self.spec.ranks;
        let total = self.spec.total_chunks();
        // Latest reduce event per (chunk, rank): its send, or for the
        // owner its last receive.
        let mut done = vec![0usize; total * n];
        let mut has = vec![false; total * n];
        for t in &self.transfers {
            for (r, s) in [(t.src, t.step), (t.dst, t.step)] {
                let i = t.chunk * n + r;
                if !has[i] || s > done[i] {
                    done[i] = s;
                    has[i] = true;
                }
            }
        }
        for t in &self.bcast {
            for r in [t.src, t.dst] {
                let i = t.chunk * n + r;
                if r == t.src && r != self.spec.owner(t.chunk) {
                    continue;
                }
                if has[i] && t.step <= done[i] {
                    return Err(AlgorithmError(format!(
                        "chunk {}: broadcast {} -> {} at step {} does not follow rank {r}'s reduction (step {})",
                        t.chunk, t.src, t.dst, t.step, done[i]
                    )));
                }
            }
        }
        Ok(())
    }

    /// Per chunk an out-tree from the owner: every other rank receives
    /// exactly once, the owner never receives, nothing goes to itself, and
    /// a rank forwards only after its own receive (strictly larger step).
    fn check_bcast(&self) -> Result<(), AlgorithmError> {
        let n = self.spec.ranks;
        let total = self.spec.total_chunks();
        let mut got: Vec<Option<usize>> = vec![None; total * n];
        for t in &self.bcast {
            if t.chunk >= total || t.src >= n || t.dst >= n {
                return Err(AlgorithmError(format!(
                    "transfer {t:?} names a chunk or rank out of range"
                )));
            }
            if t.src == t.dst {
                return Err(AlgorithmError(format!("transfer {t:?} sends to itself")));
            }
            if t.dst == self.spec.owner(t.chunk) {
                return Err(AlgorithmError(format!(
                    "chunk {} is broadcast back to its owner rank {}",
                    t.chunk, t.dst
                )));
            }
            let g = &mut got[t.chunk * n + t.dst];
            if g.is_some() {
                return Err(AlgorithmError(format!(
                    "rank {} receives chunk {} twice",
                    t.dst, t.chunk
                )));
            }
            *g = Some(t.step);
        }
        for t in &self.bcast {
            if t.src == self.spec.owner(t.chunk) {
                continue;
            }
            match got[t.chunk * n + t.src] {
                Some(s) if s < t.step => {}
                Some(s) => {
                    return Err(AlgorithmError(format!(
                        "chunk {}: rank {} forwards at step {} before receiving at step {s}",
                        t.chunk, t.src, t.step
                    )))
                }
                None => {
                    return Err(AlgorithmError(format!(
                        "chunk {}: rank {} forwards a chunk it never receives",
                        t.chunk, t.src
                    )))
                }
            }
        }
        for c in 0..total {
            for r in 0..n {
                if r != self.spec.owner(c) && got[c * n + r].is_none() {
                    return Err(AlgorithmError(format!("rank {r} never receives chunk {c}")));
                }
            }
        }
        // Steps strictly increase along tree edges, so the edges cannot
        // cycle: every rank's receive chain leads back to the owner.
        Ok(())
    }

    /// Check the tree structure: per chunk, every non-owner rank sends
    /// exactly once, the owner never sends, nothing is sent to itself, the
    /// edges reach the owner (no cycles), and a rank sends only after all
    /// its children's transfers (strictly larger step).
    fn check_reduce(&self) -> Result<(), AlgorithmError> {
        let n = self.spec.ranks;
        let total = self.spec.total_chunks();
        // Transfers grouped by chunk (a CSR of indices), then one reusable
        // parent table per chunk: O(transfers + chunks·ranks) time and
        // O(transfers + ranks) memory.
        let mut start = vec![0usize; total + 1];
        for t in &self.transfers {
            if t.chunk >= total || t.src >= n || t.dst >= n {
                return Err(AlgorithmError(format!(
                    "transfer {t:?} names a chunk or rank out of range"
                )));
            }
            if t.src == t.dst {
                return Err(AlgorithmError(format!("transfer {t:?} sends to itself")));
            }
            if t.src == self.spec.owner(t.chunk) {
                return Err(AlgorithmError(format!(
                    "chunk {} is sent away by its owner rank {}",
                    t.chunk, t.src
                )));
            }
            start[t.chunk + 1] += 1;
        }
        for c in 0..total {
            start[c + 1] += start[c];
        }
        let mut fill = start.clone();
        let mut by_chunk = vec![0usize; self.transfers.len()];
        for (i, t) in self.transfers.iter().enumerate() {
            by_chunk[fill[t.chunk]] = i;
            fill[t.chunk] += 1;
        }
        drop(fill);
        let mut par: Vec<Option<(usize, usize)>> = vec![None; n];
        for c in 0..total {
            let mine = &by_chunk[start[c]..start[c + 1]];
            for &i in mine {
                let t = &self.transfers[i];
                if par[t.src].is_some() {
                    return Err(AlgorithmError(format!(
                        "rank {} sends chunk {} twice",
                        t.src, t.chunk
                    )));
                }
                par[t.src] = Some((t.dst, t.step));
            }
            let owner = self.spec.owner(c);
            for r in 0..n {
                if r == owner {
                    continue;
                }
                let Some((p, step)) = par[r] else {
                    return Err(AlgorithmError(format!(
                        "rank {r} never sends its contribution to chunk {c}"
                    )));
                };
                // The parent's own send must come strictly later.
                if let Some((_, pstep)) = par[p] {
                    if pstep <= step {
                        return Err(AlgorithmError(format!(
                            "chunk {c}: rank {p} forwards at step {pstep} before receiving from rank {r} at step {step}"
                        )));
                    }
                }
                // No walk to the root is needed: steps strictly increase
                // along parent edges, so following parents cannot cycle and
                // must stop at the only rank without a parent, the owner.
            }
            for &i in mine {
                par[self.transfers[i].src] = None;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 3-rank chain per chunk: the two others send to the owner in turn,
    /// the far one through the near one.
    fn chain_rs() -> Algorithm {
        let spec = Spec::reduce_scatter(3, 1);
        let mut t = Vec::new();
        for c in 0..3 {
            let (near, far) = ((c + 1) % 3, (c + 2) % 3);
            t.push(Transfer {
                step: 0,
                chunk: c,
                src: far,
                dst: near,
                channel: 0,
            });
            t.push(Transfer {
                step: 1,
                chunk: c,
                src: near,
                dst: c,
                channel: 0,
            });
        }
        Algorithm::reduce_scatter("chain", spec, t)
    }

    #[test]
    fn least_needs_count_a_ranks_connections() {
        // Each rank sends to one peer and receives from one: 1.
        let chain = chain_rs().least_needs();
        assert_eq!((chain.threadblocks, chain.peers_per_channel), (1, 1));
        // Direct on 4 ranks, chunk c's senders on channel c % 2: rank 0
        // sends to 3 peers (one connection each) and receives from 3.
        let spec = Spec::reduce_scatter(4, 1);
        let t = (0..4)
            .flat_map(|c| {
                (0..4).filter(move |&s| s != c).map(move |s| Transfer {
                    step: 0,
                    chunk: c,
                    src: s,
                    dst: c,
                    channel: c % 2,
                })
            })
            .collect();
        let direct = Algorithm::reduce_scatter("direct", spec, t).least_needs();
        // Rank 0 receives from 3 peers on channel 0 (its own chunk's).
        assert_eq!((direct.threadblocks, direct.peers_per_channel), (3, 3));
    }

    #[test]
    fn the_dual_is_a_broadcast_from_the_owner() {
        let rs = chain_rs();
        rs.check().unwrap();
        let ag = rs.allgather_dual();
        ag.check().unwrap();
        assert_eq!(ag.spec.coll, Collective::AllGather);
        assert!(ag.transfers.is_empty());
        // The owner sends first (mirrored step 0), the near rank forwards.
        let c0: Vec<_> = ag.bcast.iter().filter(|t| t.chunk == 0).collect();
        assert!(c0.iter().any(|t| (t.src, t.dst, t.step) == (0, 1, 0)));
        assert!(c0.iter().any(|t| (t.src, t.dst, t.step) == (1, 2, 1)));
        let ar = Algorithm::allreduce(&rs, &ag);
        ar.check().unwrap();
        assert_eq!(ar.num_steps(), 4);
    }

    /// Two ranks, one chunk per lane: the peer's chunk j reaches the owner
    /// at `steps[j]`, on `channels[j]`.
    fn lanes(steps: &[usize], channels: &[usize]) -> Algorithm {
        let k = steps.len();
        let spec = Spec::reduce_scatter(2, k);
        let mut t = Vec::new();
        for owner in 0..2 {
            for j in 0..k {
                t.push(Transfer {
                    step: steps[j],
                    chunk: owner * k + j,
                    src: 1 - owner,
                    dst: owner,
                    channel: channels[j],
                });
            }
        }
        Algorithm::reduce_scatter("lanes", spec, t)
    }

    /// (chunk, step, channel) of every broadcast transfer, sorted.
    fn bcast_of(a: &Algorithm) -> Vec<(usize, usize, usize)> {
        let mut v: Vec<_> = a
            .bcast
            .iter()
            .map(|t| (t.chunk, t.step, t.channel))
            .collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn the_owners_lanes_leave_in_turn() {
        // Lanes: chunk j at step j on channel 2j. Mirrored, chunk 1 leaves
        // the owner first, on its own channel.
        let ag = lanes(&[0, 1], &[0, 2]).allgather_dual();
        assert_eq!(
            bcast_of(&ag),
            vec![(0, 1, 0), (1, 0, 2), (2, 1, 0), (3, 0, 2)]
        );
        // On one way both go on the first step's channel (2).
        let one = ag.owner_lanes_in_turn(1).expect("lanes");
        one.check().unwrap();
        assert_eq!(
            bcast_of(&one),
            vec![(0, 1, 2), (1, 0, 2), (2, 1, 2), (3, 0, 2)]
        );
        assert_eq!(one.owner_lanes_in_turn(1), None, "already in turn");
        assert!(ag.has_owner_lanes(1) && !one.has_owner_lanes(1) && !ag.has_owner_lanes(2));
        // Two lanes on two ways: as they are.
        assert_eq!(ag.owner_lanes_in_turn(2), None);
        // Three lanes on two ways: steps 0 and 2 on step 0's channel.
        let three = lanes(&[0, 1, 2], &[0, 2, 4]).allgather_dual();
        let two = three.owner_lanes_in_turn(2).expect("lanes");
        two.check().unwrap();
        let owner0: Vec<_> = bcast_of(&two).into_iter().filter(|x| x.0 < 3).collect();
        assert_eq!(owner0, vec![(0, 2, 4), (1, 1, 2), (2, 0, 4)]);
        // One step, a channel per chunk (`pack`'s split form): no lanes.
        assert_eq!(
            lanes(&[0, 0], &[0, 2])
                .allgather_dual()
                .owner_lanes_in_turn(1),
            None
        );
        // One channel already: nothing to move.
        assert_eq!(
            lanes(&[0, 1], &[1, 1])
                .allgather_dual()
                .owner_lanes_in_turn(1),
            None
        );
    }

    #[test]
    fn around_a_ring_the_broadcast_goes_on_over_the_reductions_connections() {
        let rs = chain_rs();
        let ag = rs.allgather_along().expect("a ring");
        ag.check().unwrap();
        // Chunk 0 came 2 -> 1 -> 0; it goes on 0 -> 2 -> 1.
        let mut c0: Vec<_> = ag
            .bcast
            .iter()
            .filter(|t| t.chunk == 0)
            .map(|t| (t.step, t.src, t.dst))
            .collect();
        c0.sort_unstable();
        assert_eq!(c0, vec![(0, 0, 2), (1, 2, 1)]);
        let conns = |v: &[Transfer]| -> std::collections::BTreeSet<(usize, usize, usize)> {
            v.iter().map(|t| (t.src, t.dst, t.channel)).collect()
        };
        assert_eq!(conns(&ag.bcast), conns(&rs.transfers));
        // On the reduction's channels one threadblock per rank serves
        // both halves; the dual runs the ring the other way and needs two.
        let along = Algorithm::allreduce_on(&rs, &ag, 0);
        along.check().unwrap();
        assert_eq!(along.least_needs().threadblocks, 1);
        let dual = Algorithm::allreduce_on(&rs, &rs.allgather_dual(), 0);
        assert_eq!(dual.least_needs().threadblocks, 2);
        // Not around a ring: a star (direct), a broken chain, an allgather.
        assert!(direct_rs(1).allgather_along().is_none());
        // Chunk 2 alone on channel 1: nothing there closes its chain
        // (2 -> 1 runs on channel 0).
        let mut open = rs.clone();
        for t in open.transfers.iter_mut().filter(|t| t.chunk == 2) {
            t.channel = 1;
        }
        open.check().unwrap();
        assert!(
            open.allgather_along().is_none(),
            "a chain without its closing connection"
        );
        assert!(ag.allgather_along().is_none());
    }

    #[test]
    fn broken_broadcasts_are_refused() {
        let ag = chain_rs().allgather_dual();
        let mut twice = ag.clone();
        twice.bcast.push(Transfer {
            step: 3,
            ..ag.bcast[0]
        });
        assert!(twice.check().unwrap_err().0.contains("twice"));
        let mut early = ag.clone();
        // The near rank forwards chunk 0 before it has it.
        for t in early
            .bcast
            .iter_mut()
            .filter(|t| t.chunk == 0 && t.src == 1)
        {
            t.step = 0;
        }
        assert!(early.check().unwrap_err().0.contains("before receiving"));
        let mut missing = ag.clone();
        missing.bcast.retain(|t| !(t.chunk == 2 && t.dst == 1));
        assert!(missing.check().is_err());
        let mut back = ag.clone();
        back.bcast[0].dst = ag.spec.owner(back.bcast[0].chunk);
        assert!(back.check().is_err());
        // Reduce edges in an allgather, copy edges in a reduce-scatter.
        let mut mixed = ag.clone();
        mixed.transfers = chain_rs().transfers;
        assert!(mixed.check().is_err());
    }

    /// A 3-rank direct reduce-scatter over `k` chunks per shard: every
    /// other rank sends each chunk straight to its owner.
    fn direct_rs(k: usize) -> Algorithm {
        let spec = Spec::reduce_scatter(3, k);
        let mut t = Vec::new();
        for c in 0..3 * k {
            for src in (0..3).filter(|&r| r != c / k) {
                t.push(Transfer {
                    step: 0,
                    chunk: c,
                    src,
                    dst: c / k,
                    channel: 0,
                });
            }
        }
        Algorithm::reduce_scatter("direct", spec, t)
    }

    #[test]
    fn halves_of_two_chunkings_pair_into_one_allreduce() {
        let rs = direct_rs(2);
        let ag = chain_rs().allgather_dual();
        let r = chain_rs().refine(3);
        r.check().unwrap();
        assert_eq!(r.spec.chunks(), 3);
        assert_eq!(r.transfers.len(), 3 * chain_rs().transfers.len());
        // Chunk c·3 + i is old chunk c's, with c's owner.
        let old = chain_rs().spec;
        assert!(r
            .transfers
            .iter()
            .all(|t| r.spec.owner(t.chunk) == old.owner(t.chunk / 3)));
        let ar = Algorithm::paired(&rs, &ag, ag.num_channels()).expect("the same machine");
        ar.check().unwrap();
        assert_eq!(ar.spec.chunks(), 2, "lcm(2, 1)");
        assert_eq!(ar.name, "direct + chain");
        let (h_rs, h_ag) = ar.halves().unwrap();
        assert_eq!(h_rs.transfers, rs.transfers);
        assert_eq!(h_ag.bcast, ag.refine(2).bcast);
        // Only a reduce-scatter and an allgather pair, on one machine.
        assert!(Algorithm::paired(&ag, &rs, 1).is_none());
        let mut other = ag.clone();
        other.spec.ranks = 4;
        assert!(Algorithm::paired(&rs, &other, 1).is_none());
        assert!(ar.fused().unwrap().halves().is_none());
        // lcm(2, 3) = 6 chunks per shard.
        let six = Algorithm::paired(&rs, &direct_rs(3).allgather_dual(), 0).unwrap();
        six.check().unwrap();
        assert_eq!(six.spec.chunks(), 6);
    }

    #[test]
    fn the_fused_allreduce_runs_one_chunk_up_and_down_rank_0s_trees() {
        let rs = chain_rs();
        let ar = Algorithm::allreduce(&rs, &rs.allgather_dual());
        let f = ar.fused().expect("a composed allreduce fuses");
        f.check().unwrap();
        assert_eq!(f.spec.total_chunks(), 1);
        assert!(f.spec.is_fused());
        // Chunk 0's chain 2 -> 1 -> 0, then 0 -> 1 -> 2, in four steps.
        let mut edges: Vec<_> = f.edges().map(|t| (t.step, t.src, t.dst)).collect();
        edges.sort_unstable();
        assert_eq!(edges, vec![(0, 2, 1), (1, 1, 0), (2, 0, 1), (3, 1, 2)]);
        assert!(f.fused().is_none(), "fusing twice");
        assert!(rs.fused().is_none(), "a reduce-scatter does not fuse");
    }

    #[test]
    fn an_allreduce_broadcasts_only_after_its_reduction() {
        let rs = chain_rs();
        let ag = rs.allgather_dual();
        // Without the step offset the owner would broadcast at step 0,
        // before its reduction at step 1 is in.
        let mut ar = Algorithm::allreduce(&rs, &ag);
        for (t, s) in ar.bcast.iter_mut().zip(&ag.bcast) {
            t.step = s.step;
        }
        assert!(ar.check().unwrap_err().0.contains("does not follow"));
    }
}
