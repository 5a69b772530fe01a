//! Hierarchical, NIC-aware reduce-scatter for several hosts with the same
//! number of GPUs each (rail-optimised fabrics).
//!
//! For the shard of rank o = (host h, local index k): on every other host
//! h′, the GPUs send their contribution to their local GPU k (the *rail
//! aggregator*: it shares rail k with o), which reduces them and sends one
//! partial sum to o across rail k; o's own host-mates send to o directly.
//! Every NIC carries (H − 1) partial sums per shard on its rail instead of
//! raw contributions, and the intra-host and inter-host phases pipeline.
//!
//! `abroad = m` moves m of o's host-mates (local indices k+1 … k+m) off
//! o's NVLink port: each sends its contribution across its own rail to its
//! peer on another host, where it joins that host's partial sum for o (the
//! peer forwards one partial sum to the aggregator either way, so this adds
//! no NVLink traffic there). That trades NVLink ingress at o for idle NIC
//! capacity — on 2 × DGX-H100 half a host-mate per shard on average is what
//! the cut bound needs (docs/algorithms.md), which the LP mixture
//! (`synth/mix.rs`) finds by mixing m = 0 and m = 1.

use super::{Context, Offer, SynthError, Synthesizer};
use crate::ir::msccl::MAX_TBS_PER_CHANNEL;
use crate::ir::{Algorithm, Collective, Spec, Topology, Transfer};

/// The hierarchical synthesizer.
pub struct Hier;

impl Synthesizer for Hier {
    fn name(&self) -> &'static str {
        "hier"
    }
    fn summary(&self) -> &'static str {
        "hierarchical, NIC-aware (several hosts, or one host's groups)"
    }
    fn offer(&self, ctx: &Context) -> Result<Offer, SynthError> {
        let topo = ctx.topo;
        let hs = groups(topo).ok_or_else(|| {
            SynthError::not_offered(
                "hier",
                format!(
                    "it needs at least two hosts with the same number of GPUs, or on one host (4 to {GROUPS_MAX_RANKS} GPUs) groups of the same size that reach each other at a lower route α than the rest (sockets, PCIe switches, hives); {} has {} host(s) and no such groups",
                    topo.name,
                    topo.num_hosts()
                ),
            )
        })?;
        let mut offer = offer_over(ctx, hs);
        // On hosts that split into sockets, switches or hives, the same
        // schedules over those groups too: `auto` keeps each where it wins
        // (2 × the OCI A100 dump at 1 GiB: 93.0 → 99.4 % of the bound;
        // docs/algorithms.md "Hierarchical", sub-host groups).
        if let Some(sub) = sub_host_groups(topo) {
            let s = offer_over(ctx, sub);
            offer.more.push(s.candidates);
            offer.more.push(s.small);
            offer.more.extend(s.more);
        }
        Ok(offer)
    }
}

/// `hier`'s schedules over the groups `hs` (hosts, or the groups that
/// stand for them).
fn offer_over(ctx: &Context, hs: Vec<Vec<usize>>) -> Offer {
    let topo = ctx.topo;
    let spec = Spec::reduce_scatter(ctx.ranks(), ctx.opts.chunks.unwrap_or(1));
    // The star first, then deeper trees: the driver emits the first
    // that fits the runtime's limits (a star over H hosts needs H − 1
    // rail peers). Fewest relays first for a reduction, not for a
    // broadcast (`rail_radices`), and not with one GPU per host, where
    // the butterfly below (`hier_pat`) is as fast at every size on
    // fewer threadblocks than the larger radices.
    let fewest = ctx.op != Collective::AllGather && hs[0].len() >= 2;
    let radices = rail_radices(hs.len(), fewest);
    let candidates = radices
        .iter()
        .map(|&f| {
            let hs = hs.clone();
            Box::new(move || hier_tree(spec, &hs, 0, f, 1)) as super::Candidate
        })
        .collect();
    // Small messages: the same trees with each host-mate connection's
    // messages spread over SPREAD channels, shallowest tree first, so
    // that their α rounds overlap; they cost threadblocks and
    // large-message pipelining, so `auto` scores them beside the
    // main schedule and keeps each where it wins.
    let small = radices
        .iter()
        .map(|&f| {
            let hs = hs.clone();
            Box::new(move || hier_tree(spec, &hs, 0, f, SPREAD)) as super::Candidate
        })
        .collect();
    // Three channels pay where the star fits them (few hosts: each
    // connection's α rounds go side by side three ways); deeper trees
    // at three channels lose to the two-channel ones (docs/algorithms.md
    // "Hierarchical"), so only the star is offered.
    let star = Box::new({
        let hs = hs.clone();
        let f = radices[0];
        move || hier_tree(spec, &hs, 0, f, SPREAD + 1)
    }) as super::Candidate;
    // Rails first: a butterfly over the hosts on every rail, whose
    // messages each carry many shards, then one host-mate hop; the
    // fewest α rounds at scale (docs/algorithms.md "Hierarchical").
    let pat = pat_radices(hs.len())
        .into_iter()
        .map(|radices| {
            let hs = hs.clone();
            Box::new(move || hier_pat(spec, &hs, &radices)) as super::Candidate
        })
        .collect();
    // Rail aggregation by blocks of consecutive shards: few host-mate
    // messages per tile where the per-shard trees send one per host.
    let blocks = Box::new({
        let hs = hs.clone();
        move || hier_blocks(spec, &hs)
    }) as super::Candidate;
    // Rail lanes: 2, 3, 4 and 8 chunks per shard, each chunk its own
    // step and rail lane, so the NICs start after one chunk of
    // intra-host traffic (medium and large sizes on few hosts; with 8,
    // 4 × DGX-A100's reduce-scatter at 16 and 256 MiB runs at 97.7 and
    // 97.6 % of the bound, against 95.6 and 95.4 with 4). Up to
    // LANES_MAX_HOSTS hosts: beyond, they gain under a point at 1 GiB
    // and lowering 2–3 × the steps doubles synthesis (docs/algorithms.md
    // "Hierarchical", rail lanes).
    let mut more = vec![vec![star], pat, vec![blocks]];
    if ctx.opts.chunks.is_none() && hs.len() <= LANES_MAX_HOSTS {
        // Eight for an allreduce only up to AR_LANES8_MAX_HOSTS hosts:
        // beyond, its halves change no cell of 8 × DGX-H100 or 16 ×
        // DGX-A100 and the halves and pairs they add to score take
        // 8 × DGX-H100's allreduce from 16.3–16.8 to 22.5–25.1 s.
        let eight = ctx.op != Collective::AllReduce || hs.len() <= AR_LANES8_MAX_HOSTS;
        let lanes: &[usize] = if eight { &[2, 3, 4, 8] } else { &[2, 3, 4] };
        // The owner's own host in one message per host-mate
        // (`hier_tree_lanes`).
        let whole = !ctx.local_passes && ctx.op != Collective::AllReduce;
        let loads = RailLoads::new(topo, &hs);
        for &chunks in lanes {
            // Each lane count as it is and, where the positions' rail
            // routes share links unevenly, with its chunks aggregated
            // where the rails balance (`RailLoads`).
            let balanced = loads
                .as_ref()
                .and_then(|l| l.balance(chunks))
                .map(std::sync::Arc::new);
            for agg in [None].into_iter().chain(balanced.map(Some)) {
                more.push(
                    radices
                        .iter()
                        .map(|&f| {
                            let (hs, agg) = (hs.clone(), agg.clone());
                            let spec = Spec::reduce_scatter(spec.ranks, chunks);
                            Box::new(move || {
                                hier_tree_lanes(
                                    spec,
                                    &hs,
                                    f,
                                    whole,
                                    agg.as_deref().map(Vec::as_slice),
                                )
                            }) as super::Candidate
                        })
                        .collect(),
                );
            }
        }
        // `make`'s schedule of `chunks` chunks per shard, per rail radix.
        let per_radix = |chunks: usize, make: fn(Spec, &[Vec<usize>], usize, bool) -> Algorithm| {
            radices
                .iter()
                .map(|&f| {
                    let hs = hs.clone();
                    let spec = Spec::reduce_scatter(spec.ranks, chunks);
                    Box::new(move || make(spec, &hs, f, whole)) as super::Candidate
                })
                .collect::<Vec<_>>()
        };
        // Eight chunks in lanes of doubling size (`hier_tree_graded`),
        // for a reduce-scatter and an allgather (whose dual ends on
        // the small lanes); an allreduce's pairs would simulate every
        // pair of them at every size.
        if ctx.op != Collective::AllReduce {
            more.push(per_radix(8, hier_tree_graded));
        }
        // An allgather's paced lanes (`hier_tree_paced`) of 8, 16 and
        // 32 chunks: its host forwards each lane while the next one
        // arrives, where the doubling lanes leave it a growing
        // backlog, and the more chunks, the smaller the last lane it
        // forwards after the NICs are done (4 × DGX-A100 at 1 GiB:
        // 96.2 → 98.7 % of the bound). Doubling lanes of 16 and 32
        // chunks beside them win no cell by more than 0.34 points and
        // cost a tenth of the allgather's synthesis; a reduce-scatter's
        // first lane only delays the NICs' start, which eight chunks
        // already make short.
        if ctx.op == Collective::AllGather {
            for chunks in [8, 16, 32] {
                more.push(per_radix(chunks, hier_tree_paced));
            }
        }
    }
    Offer {
        candidates,
        small,
        more,
        ..Offer::default()
    }
}

/// Hosts as lists of ranks in local order, if every host has the same
/// number of GPUs and there are ≥ 2 hosts. With one GPU per host there is
/// no host-mate phase: every schedule is its rail phase (the rails-first
/// butterfly is then recursive halving over the nodes, NCCL's PAT case).
pub fn hosts(topo: &Topology) -> Option<Vec<Vec<usize>>> {
    let mut by_host: Vec<(String, Vec<usize>)> = Vec::new();
    for r in 0..topo.num_ranks() {
        let h = topo.host_of(r).to_string();
        match by_host.iter_mut().find(|(name, _)| *name == h) {
            Some((_, v)) => v.push(r),
            None => by_host.push((h, vec![r])),
        }
    }
    let g = by_host.first()?.1.len();
    if by_host.len() < 2 || by_host.iter().any(|(_, v)| v.len() != g) {
        return None;
    }
    Some(by_host.into_iter().map(|(_, v)| v).collect())
}

/// Most ranks for which one host is split into groups ([`groups`]): the
/// split needs every pair's route.
pub const GROUPS_MAX_RANKS: usize = 32;

/// The groups `hier` treats as hosts: the hosts ([`hosts`]) when there are
/// several; on one host, the coarsest split into ≥ 2 groups of the same
/// size (≥ 2 GPUs) whose members reach each other at a lower route α than
/// they reach the rest — CPU sockets behind a slower inter-socket link,
/// PCIe switches, xGMI hives. Each pair counts the larger α of its two
/// directions. None when no such split exists (a switch or a full mesh:
/// one α; a ring or a cube mesh: the lower-α pairs connect everything).
pub fn groups(topo: &Topology) -> Option<Vec<Vec<usize>>> {
    if topo.num_hosts() > 1 {
        return hosts(topo);
    }
    let n = topo.num_ranks();
    if !(4..=GROUPS_MAX_RANKS).contains(&n) {
        return None;
    }
    let routes = topo.all_routes();
    let alpha = |u: usize, v: usize| {
        let a = |x: usize, y: usize| routes[x][y].as_ref().map_or(f64::INFINITY, |r| r.alpha_us);
        a(u, v).max(a(v, u))
    };
    split_by_alpha(n, alpha)
}

/// On several identical hosts, each host split as [`groups`] splits one
/// host (its sockets, PCIe switches or hives, found on the first host's
/// routes between its own GPUs), every host the same way by local index:
/// groups of host 0 first, then host 1's, and so on. None on one host, or
/// where a host has no such split. `hier` over these groups keeps each
/// aggregation inside a socket or hive, where over whole hosts it sends
/// every contribution across the slower inter-socket link or switch
/// uplinks (docs/algorithms.md "Hierarchical", sub-host groups).
pub fn sub_host_groups(topo: &Topology) -> Option<Vec<Vec<usize>>> {
    if topo.num_hosts() < 2 {
        return None;
    }
    let hs = hosts(topo)?;
    if !(4..=GROUPS_MAX_RANKS).contains(&hs[0].len()) {
        return None;
    }
    // Each host's routes between its own GPUs only (one route tree per
    // GPU; all pairs of a 1024-GPU fabric would be a million routes).
    let split_of = |h: &[usize]| {
        let alphas: Vec<Vec<f64>> = h
            .iter()
            .map(|&s| {
                let tree = topo.route_tree(s);
                h.iter()
                    .map(|&d| {
                        (d != s)
                            .then(|| topo.route_from_tree(s, d, &tree))
                            .flatten()
                            .map_or(f64::INFINITY, |r| r.alpha_us)
                    })
                    .collect()
            })
            .collect();
        split_by_alpha(h.len(), |u, v| alphas[u][v].max(alphas[v][u]))
    };
    let split = split_of(&hs[0])?;
    // Every host must split the same way by local index.
    if hs[1..].iter().any(|h| split_of(h).as_ref() != Some(&split)) {
        return None;
    }
    Some(
        hs.iter()
            .flat_map(|h| {
                split
                    .iter()
                    .map(|g| g.iter().map(|&i| h[i]).collect::<Vec<_>>())
                    .collect::<Vec<_>>()
            })
            .collect(),
    )
}

/// The coarsest split of `n` GPUs into ≥ 2 groups of the same size
/// (≥ 2) whose members reach each other at a lower α (`alpha`, symmetric)
/// than they reach the rest, as positions in `0..n`.
fn split_by_alpha(n: usize, alpha: impl Fn(usize, usize) -> f64) -> Option<Vec<Vec<usize>>> {
    let mut levels: Vec<f64> = (0..n)
        .flat_map(|u| (u + 1..n).map(move |v| (u, v)))
        .map(|(u, v)| alpha(u, v))
        .filter(|a| a.is_finite())
        .collect();
    levels.sort_by(|a, b| b.total_cmp(a));
    levels.dedup_by(|a, b| (*a - *b).abs() <= 1e-9 * b.abs().max(1.0));
    // From the largest α down: the components of "closer than this level".
    for &level in &levels {
        let close = |u: usize, v: usize| alpha(u, v) < level - 1e-9 * level.max(1.0);
        let mut comp = vec![usize::MAX; n];
        let mut out: Vec<Vec<usize>> = Vec::new();
        for s in 0..n {
            if comp[s] != usize::MAX {
                continue;
            }
            let mut group = Vec::new();
            let mut stack = vec![s];
            comp[s] = out.len();
            while let Some(u) = stack.pop() {
                group.push(u);
                for (v, c) in comp.iter_mut().enumerate() {
                    if *c == usize::MAX && close(u, v) {
                        *c = out.len();
                        stack.push(v);
                    }
                }
            }
            group.sort_unstable();
            out.push(group);
        }
        let g = out[0].len();
        if out.len() >= 2 && g >= 2 && out.iter().all(|x| x.len() == g) {
            return Some(out);
        }
    }
    None
}

/// The rail trees `hier` offers for `nh` hosts: the star (radix ≥ nh:
/// every host's partial sum goes straight to the owner, one α), then
/// radix ⌈√nh⌉ (depth 2) and the powers of two below it down to the
/// binomial tree (depth ⌈log₂ nh⌉, 2·⌈log₂ nh⌉ rail peers per GPU).
///
/// With `fewest_relays`, radices halving from nh / 2 down to ⌈√nh⌉ come
/// between the star and ⌈√nh⌉: all of depth 2, each with fewer hosts that
/// forward a partial sum than the next (at radix f, ⌈nh / f⌉ − 1 of
/// them) and more rail peers, so the driver's first fit within the
/// threadblock budget is the tree with the fewest relays that fits. A
/// reduction wants that (a parent takes its children's partial sums as the
/// rail order staggers them); a broadcast (an allgather, the dual) does
/// not: a parent's NIC is shared by all its children at once and each
/// relay forwards its tile only when the tile is through. A depth-2 radix
/// with more rail peers than one channel takes (MSCCL's 32 threadblocks
/// with a send peer per channel), (f − 1) + ⌈nh / f⌉ − 1, is left out:
/// the driver would refuse it, after building it.
pub fn rail_radices(nh: usize, fewest_relays: bool) -> Vec<usize> {
    let mut out = vec![nh.max(2)];
    let root = (1..=nh).find(|f| f * f >= nh).unwrap_or(nh);
    let mut f = nh / 2;
    while fewest_relays && f > root {
        if f - 1 + nh.div_ceil(f) - 1 <= MAX_TBS_PER_CHANNEL {
            out.push(f);
        }
        f /= 2;
    }
    let mut f = root;
    while f >= 2 {
        if f < nh && !out.contains(&f) {
            out.push(f);
        }
        f = if f.is_power_of_two() {
            f / 2
        } else {
            f.next_power_of_two() / 2
        };
    }
    out
}

/// In the radix-`f` rail tree of one shard, the host at relative position
/// `r` (0 = the owner's host) sends its partial sum to the host at `r` with
/// its lowest nonzero base-`f` digit cleared. A child's position is larger
/// than its parent's, so sending in rail order (largest position first)
/// lets every host add its children's partial sums first.
fn rail_parent(r: usize, f: usize) -> usize {
    let place = rail_place(r, f);
    r - ((r / place) % f) * place
}

/// The place value of `r`'s lowest nonzero base-`f` digit.
fn rail_place(r: usize, f: usize) -> usize {
    debug_assert!(r > 0 && f >= 2);
    let mut place = 1usize;
    while (r / place).is_multiple_of(f) {
        place *= f;
    }
    place
}

/// The hierarchical algorithm with `abroad` host-mates per shard sent
/// across their rail (0 ≤ abroad ≤ g − 1) and a star on the rail.
pub fn hier_algorithm(spec: Spec, hosts: &[Vec<usize>], abroad: usize) -> Algorithm {
    hier_tree(spec, hosts, abroad, hosts.len(), 1)
}

/// Channels `hier`'s small-message schedules spread each host-mate and
/// each rail connection's messages over (docs/algorithms.md
/// "Hierarchical").
pub const SPREAD: usize = 2;

/// The most hosts (or groups) `hier` offers its rail-lane schedules on.
pub const LANES_MAX_HOSTS: usize = 16;

/// The most hosts (or groups) `hier` offers eight rail lanes on for an
/// allreduce.
pub const AR_LANES8_MAX_HOSTS: usize = 4;

/// The hierarchical algorithm whose rail phase, per shard, is the
/// radix-`radix` tree over the hosts rooted at the owner's host (see
/// `rail_parent`; radix ≥ H is the star). Every tree has H − 1 edges per
/// shard and, over all shards, every host sends and receives H − 1 partial
/// sums per rail: each shape moves what the star moves; they differ in
/// depth (α rounds) and in rail peers per GPU (threadblocks).
///
/// `spread` ≥ 2 puts the host-mate transfers of rail order q on logical
/// channel 0 when q is a multiple of `spread`, else on channel 2 + q mod
/// `spread`, and a rail transfer on channel 1 or 1 + `spread` + its lane
/// (the index k mod `spread` among the tree positions that send to one
/// parent offset): each connection's messages (one per host, H of them
/// per tile, on a host-mate connection) run as `spread` connections side
/// by side instead of one after the other, each paying its route's α once
/// per message. That is what bounds small and medium sizes at scale (on
/// 32 × DGX-H100, 32 messages of 0.7 µs each per host-mate connection).
pub fn hier_tree(
    spec: Spec,
    hosts: &[Vec<usize>],
    abroad: usize,
    radix: usize,
    spread: usize,
) -> Algorithm {
    build(
        spec,
        hosts,
        abroad,
        Rail::Radix(radix),
        spread,
        Lanes::One,
        false,
        None,
    )
}

/// `hier_tree` with C = `spec.chunks()` ≥ 2 chunks per shard, each chunk
/// a step of its own, chunk j crossing the rail on lane j mod C (a logical
/// channel each): a rail aggregator forwards a shard's first chunk as
/// soon as its host-mates' first chunks are in, and the lanes' messages
/// pay their rail α side by side, so the NICs start after one chunk's
/// worth of intra-host traffic instead of one shard's (docs/algorithms.md
/// "Hierarchical", "Rail lanes").
///
/// With `whole_own` the owner's host-mates send it their contributions as
/// one message each: nothing of them crosses a rail, so pieces would only
/// add α rounds on the owner's port. `hier` sets it but where the runtime
/// reduces in a local pass after each message (RCCL: pieces overlap that
/// pass with the next piece's transfer) and for an allreduce (whose
/// broadcast, the dual, would then send the owner's shard to its
/// host-mates only once all of it is reduced).
///
/// `aggregators[ko · C + j]`, where given, is the position whose GPUs
/// aggregate chunk j of the shard of the owner at position `ko` and send
/// it across their rail, instead of position `ko` ([`RailLoads`]).
pub fn hier_tree_lanes(
    spec: Spec,
    hosts: &[Vec<usize>],
    radix: usize,
    whole_own: bool,
    aggregators: Option<&[usize]>,
) -> Algorithm {
    build(
        spec,
        hosts,
        0,
        Rail::Radix(radix),
        1,
        Lanes::Each,
        whole_own,
        aggregators,
    )
}

/// `hier_tree_lanes` with lanes of doubling size: chunk 0, chunk 1,
/// chunks 2–3, 4–7, … (C = 8: four lanes), each lane's chunks one message
/// per transfer. The first lane is as small as with C lanes, so the NICs
/// start as early, and the later ones pay fewer α rounds on each
/// host-mate connection: on two hosts, where a rail carries one shard's
/// worth, that tail of small messages is what the C-lane form loses
/// (docs/algorithms.md "Hierarchical", graded lanes).
pub fn hier_tree_graded(
    spec: Spec,
    hosts: &[Vec<usize>],
    radix: usize,
    whole_own: bool,
) -> Algorithm {
    build(
        spec,
        hosts,
        0,
        Rail::Radix(radix),
        1,
        Lanes::Doubling,
        whole_own,
        None,
    )
}

/// `hier_tree_graded` with lanes that grow by at most 3/2 (`Lanes::Paced`)
/// and the host-mate transfers spread over [`SPREAD`] channels by rail
/// order, for an allgather (the dual, which ends on the small lanes). In
/// the dual every rail aggregator forwards each lane it receives to its
/// g − 1 host-mates, one lane after another, while the owner's next,
/// smaller lane arrives. With doubling lanes the next lane arrives in
/// half the time, and a host whose port is slower than 2 (g − 1) × the
/// rail's rate falls behind (DGX-A100: 7 × 25 GB/s over 300 GB/s, 0.58 of
/// the arrival time); its backlog is what is left after the NICs finish.
/// Lanes of at most 3/2 keep pace down to a port of 3/2 (g − 1) × the
/// rail's rate. Spread, each owner host's lanes are forwarded on a
/// channel of their own as they arrive, not behind another owner host's
/// that come later.
pub fn hier_tree_paced(
    spec: Spec,
    hosts: &[Vec<usize>],
    radix: usize,
    whole_own: bool,
) -> Algorithm {
    build(
        spec,
        hosts,
        0,
        Rail::Radix(radix),
        SPREAD,
        Lanes::Paced,
        whole_own,
        None,
    )
}

/// The hierarchical algorithm whose rail phase is recursive halving: per
/// shard, the host at relative position r sends its partial sum to r with
/// its highest set bit cleared, so the positions that send to one parent
/// offset 2^i are the contiguous range [2^i, 2^(i+1)) — the rounds of a
/// recursive-halving reduce-scatter over the hosts, the offsets largest
/// first (⌈log₂ H⌉ rounds, one rail peer per round each way). A reference
/// for `hier`'s radix trees, which clear the lowest digit instead
/// (`--algo hier-halving`).
pub fn hier_halving(spec: Spec, hosts: &[Vec<usize>]) -> Algorithm {
    build(spec, hosts, 0, Rail::Halving, 1, Lanes::One, false, None)
}

/// Most rail peers a rank of `hier_pat` may have (all on one channel:
/// MSCCL allows 32 threadblocks with a send peer per channel, and the
/// host-mate hop has a channel of its own).
pub const PAT_MAX_PEERS: usize = 31;

/// The radices of `hier_pat`'s butterflies over `nh` hosts, each least
/// significant digit first with product `nh`, in the order the driver
/// tries them (the first that fits the threadblock budget is scored): the
/// fewest digits first — a round is a route α — whose rail peers (the sum
/// of radix − 1) fit [`PAT_MAX_PEERS`]; among as many digits the largest
/// most significant radix first (the first round's message to each
/// partner carries nh / radix hosts' shards, and a step moves at most
/// MAX_CNT chunks), then the largest next one. Empty where no
/// factorisation fits (a prime above the limit).
pub fn pat_radices(nh: usize) -> Vec<Vec<usize>> {
    fn all(
        rest: usize,
        most: usize,
        peers: usize,
        cur: &mut Vec<usize>,
        out: &mut Vec<Vec<usize>>,
    ) {
        if rest == 1 {
            out.push(cur.clone());
            return;
        }
        for f in (2..=most.min(rest)).rev() {
            if rest.is_multiple_of(f) && peers + f - 1 <= PAT_MAX_PEERS {
                cur.push(f);
                all(rest / f, f, peers + f - 1, cur, out);
                cur.pop();
            }
        }
    }
    let mut found = Vec::new();
    if nh >= 2 {
        all(nh, nh, 0, &mut Vec::new(), &mut found);
    }
    // Each is most significant first, non-increasing.
    found.sort_by(|a, b| a.len().cmp(&b.len()).then_with(|| b.cmp(a)));
    found.truncate(PAT_CANDIDATES);
    found
        .into_iter()
        .map(|f| f.into_iter().rev().collect())
        .collect()
}

/// Butterflies `hier` offers per request (the driver lowers them in turn
/// until one fits).
const PAT_CANDIDATES: usize = 4;

/// Rails first, for small messages at scale (`hier-pat`): per shard of
/// o = (host h, local index k), on every rail l the GPUs (x, l) reduce
/// over the hosts to (h, l) along a butterfly — with hosts written in the
/// mixed-radix digits `radices` (least significant first), host x sends
/// to x with its most significant digit that differs from h's set to h's,
/// in round D − 1 − (that digit's place) — and then every (h, l), l ≠ k,
/// sends the rail's sum to o. A GPU's part of a shard's tree depends only
/// on where its host first differs from the owner's, so it is the same
/// for every shard of a range of hosts × every local index: consecutive
/// shards, which the lowering moves as one message (docs/architecture.md
/// "Lowering", item 1). That gives D rail rounds of one message per
/// partner (up to MAX_CNT chunks), where per-shard trees send a message
/// per shard; it moves every contribution across the rails ((H − 1) / H
/// of the input per NIC, g times what `hier`'s aggregated rails move), so it
/// serves small sizes.
pub fn hier_pat(spec: Spec, hosts: &[Vec<usize>], radices: &[usize]) -> Algorithm {
    let nh = hosts.len();
    debug_assert_eq!(radices.iter().product::<usize>(), nh);
    let d = radices.len();
    let digit = |x: usize, i: usize| {
        let place: usize = radices[..i].iter().product();
        (x / place) % radices[i]
    };
    let where_ = positions(spec.ranks, hosts);
    let mut transfers = Vec::new();
    for (o, &(ho, ko)) in where_.iter().enumerate() {
        for j in 0..spec.chunks() {
            let chunk = o * spec.chunks() + j;
            for (x, members) in hosts.iter().enumerate() {
                if x != ho {
                    let p = (0..d)
                        .rev()
                        .find(|&i| digit(x, i) != digit(ho, i))
                        .expect("hosts differ");
                    let place: usize = radices[..p].iter().product();
                    let parent = x - digit(x, p) * place + digit(ho, p) * place;
                    for (l, &s) in members.iter().enumerate() {
                        transfers.push(Transfer {
                            step: d - 1 - p,
                            chunk,
                            src: s,
                            dst: hosts[parent][l],
                            channel: 0,
                        });
                    }
                } else {
                    for (l, &s) in members.iter().enumerate() {
                        if l != ko {
                            transfers.push(Transfer {
                                step: d,
                                chunk,
                                src: s,
                                dst: members[ko],
                                channel: 1,
                            });
                        }
                    }
                }
            }
        }
    }
    let name = format!(
        "hier-pat{}",
        radices
            .iter()
            .rev()
            .map(|f| format!("-{f}"))
            .collect::<String>()
    );
    Algorithm::reduce_scatter(name, spec, transfers)
}

/// Rail aggregation by blocks of consecutive shards (`hier-blocks`): the
/// rail phase moves what `hier`'s aggregated rails move — every host sends
/// one partial sum per shard of every other host across the NICs — but a
/// host's aggregators collect blocks of consecutive shards instead of the
/// shards of one local index, which lie g apart in every buffer.
///
/// Each host's g shards form P pieces of g/P consecutive shards (P = 1
/// when H ≥ g, else g / gcd(H, g)); piece p of owner host h_o is
/// aggregated on sending host h by its GPU (P·(h_o + h) + p) mod g. Over
/// the other hosts' pieces one sending host's values P·(h_o + h) + p run
/// through an interval of P·H integers less one block of P, and so do
/// one owner host's over the sending hosts: where g divides P·H every GPU
/// aggregates, and every NIC receives, as many pieces as any other within
/// one (with P = 1 and g not dividing H, within one more). Its host-mates send it
/// their contributions to the piece, one message per piece, in rail order
/// (owner host h + 1 first); it sends the piece's partial sum across its
/// rail to the GPU of the same local index on h_o, which adds the sums it
/// receives from every host and its own contribution and sends each shard
/// to its owner; the owner's other host-mates send it their own
/// contributions. The rotation by h spreads what a host receives over all
/// its NICs. Per GPU that is about (H − 1)·P/g messages to each host-mate
/// and as many rail messages, where the per-shard trees send H to each
/// host-mate: the messages' α is what bounds `hier` at medium sizes on
/// many hosts (docs/algorithms.md "Hierarchical").
pub fn hier_blocks(spec: Spec, hosts: &[Vec<usize>]) -> Algorithm {
    let nh = hosts.len();
    let g = hosts[0].len();
    let pieces = if nh >= g { 1 } else { g / gcd(nh, g) };
    let where_ = positions(spec.ranks, hosts);
    // Steps: host-mate contributions by rail order q (1..H−1), rail sums
    // after them, the last hop to the owner after every rail sum.
    let last = 2 * nh + 1;
    let mut transfers = Vec::new();
    for (o, &(ho, ko)) in where_.iter().enumerate() {
        let owner = hosts[ho][ko];
        let piece = ko * pieces / g;
        // GPUs of the owner's host that receive rail sums for o.
        let mut relays = vec![false; g];
        for (h, members) in hosts.iter().enumerate() {
            if h == ho {
                continue;
            }
            let a = (pieces * (ho + h) + piece) % g;
            relays[a] = true;
            let q = (ho + nh - h - 1) % nh;
            for j in 0..spec.chunks() {
                let chunk = o * spec.chunks() + j;
                for (m, &s) in members.iter().enumerate() {
                    if m != a {
                        transfers.push(Transfer {
                            step: 1 + q,
                            chunk,
                            src: s,
                            dst: members[a],
                            channel: 0,
                        });
                    }
                }
                transfers.push(Transfer {
                    step: nh + 1 + q,
                    chunk,
                    src: members[a],
                    dst: hosts[ho][a],
                    channel: 1,
                });
            }
        }
        for (m, &s) in hosts[ho].iter().enumerate() {
            if m == ko {
                continue;
            }
            for j in 0..spec.chunks() {
                transfers.push(Transfer {
                    step: if relays[m] { last } else { 0 },
                    chunk: o * spec.chunks() + j,
                    src: s,
                    dst: owner,
                    channel: 0,
                });
            }
        }
    }
    Algorithm::reduce_scatter("hier-blocks".to_string(), spec, transfers)
}

fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Each of `n` ranks' (host, local index) in `hosts`.
pub(super) fn positions(n: usize, hosts: &[Vec<usize>]) -> Vec<(usize, usize)> {
    let mut at = vec![(0usize, 0usize); n];
    for (h, members) in hosts.iter().enumerate() {
        for (k, &r) in members.iter().enumerate() {
            at[r] = (h, k);
        }
    }
    at
}

/// Where `hier_tree_lanes` aggregates each chunk so that the links carry
/// balanced loads ([`RailLoads::balance`]: `table[ko · C + j]` is the
/// position whose GPUs take chunk j of every shard owned at position
/// `ko`, C chunks per shard).
///
/// Position k's rail traffic crosses the links of its rail route (host
/// 0's GPU k to host 1's GPU k; the hosts are alike): its GPU's path to
/// its NIC, the NIC, the rail, the path down to the peer. Where positions
/// share a link there — two GPUs behind one NIC, GPUs whose PCIe paths
/// meet at a CPU — the shared link carries both positions' chunks, and
/// with each position aggregating its own owner's chunks it bounds the
/// rails (the MI300X VM dump, whose eight GPUs reach six of its eight
/// NICs). Moving a chunk to another position moves no more bytes: an
/// aggregator sums its host-mates' contributions wherever it is, and on
/// the owner's host the GPU at the aggregating position adds the rail
/// partial sums to its own contribution before sending it to the owner.
/// It moves them onto other links, so the choice is scored by the load
/// of every link, per unit of chunk and per pair of hosts: position a
/// aggregating n_a chunks per owner host puts (H − 1) · n_a on each link
/// of its host-mates' routes to it and of its rail route, and each
/// owner's C chunks put C on each link of its host-mates' routes to it;
/// the score is the largest load over capacity.
///
/// Greedy, chunk by chunk (chunk j of every owner position before the
/// next chunk of any), each to the position that raises that maximum
/// least, its owner's own position on ties, then the next ones after it;
/// offered only where the result is 2 % below the owners' own positions.
///
/// The links are found once per machine ([`RailLoads::new`]): every lane
/// count's table is filled over the same routes.
pub struct RailLoads {
    hosts: usize,
    /// Capacity of each link the routes cross, GB/s.
    caps: Vec<f64>,
    /// Per position: the links of its host-mates' routes to it (each once
    /// per route that crosses it) and those of its rail route.
    mates: Vec<Vec<usize>>,
    rails: Vec<Vec<usize>>,
}

impl RailLoads {
    /// None where there is nothing to balance: one host, one GPU per
    /// host, hosts of different sizes, or a route missing.
    pub fn new(topo: &Topology, hosts: &[Vec<usize>]) -> Option<Self> {
        let (nh, g) = (hosts.len(), hosts.first()?.len());
        if nh < 2 || g < 2 || hosts.iter().any(|m| m.len() != g) {
            return None;
        }
        let mut index: std::collections::HashMap<petgraph::graph::EdgeIndex, usize> =
            Default::default();
        let mut caps: Vec<f64> = Vec::new();
        let mut mates: Vec<Vec<usize>> = vec![Vec::new(); g];
        let mut rails: Vec<Vec<usize>> = Vec::with_capacity(g);
        // One route tree per GPU of host 0: its routes to its host-mates
        // and its rail route.
        for k in 0..g {
            let tree = topo.route_tree(hosts[0][k]);
            let mut links = |dst: usize| -> Option<Vec<usize>> {
                let r = topo.route_from_tree(hosts[0][k], dst, &tree)?;
                Some(
                    r.links
                        .iter()
                        .map(|&e| {
                            *index.entry(e).or_insert_with(|| {
                                caps.push(topo.graph[e].capacity_gbps());
                                caps.len() - 1
                            })
                        })
                        .collect(),
                )
            };
            for a in (0..g).filter(|&a| a != k) {
                mates[a].extend(links(hosts[0][a])?);
            }
            rails.push(links(hosts[1][k])?);
        }
        if caps.iter().any(|&c| c <= 0.0) {
            return None;
        }
        Some(RailLoads {
            hosts: nh,
            caps,
            mates,
            rails,
        })
    }

    /// The table for `chunks` chunks per shard, or None where the owners'
    /// own positions are as good.
    pub fn balance(&self, chunks: usize) -> Option<Vec<usize>> {
        let g = self.mates.len();
        if chunks == 0 {
            return None;
        }
        let h1 = (self.hosts - 1) as f64;
        let mut base = vec![0.0; self.caps.len()];
        for m in &self.mates {
            for &l in m {
                base[l] += chunks as f64;
            }
        }
        let cost = |n: &[usize]| -> f64 {
            let mut load = base.clone();
            for ((m, r), &k) in self.mates.iter().zip(&self.rails).zip(n) {
                for &l in m.iter().chain(r) {
                    load[l] += h1 * k as f64;
                }
            }
            load.iter()
                .zip(&self.caps)
                .map(|(x, c)| x / c)
                .fold(0.0, f64::max)
        };
        let own = cost(&vec![chunks; g]);
        let mut n = vec![0; g];
        let mut table = vec![0; g * chunks];
        for j in 0..chunks {
            for ko in 0..g {
                let mut best: Option<(f64, usize)> = None;
                for a in (0..g).map(|d| (ko + d) % g) {
                    n[a] += 1;
                    let x = cost(&n);
                    n[a] -= 1;
                    if best.is_none_or(|b| x < b.0) {
                        best = Some((x, a));
                    }
                }
                let a = best?.1;
                n[a] += 1;
                table[ko * chunks + j] = a;
            }
        }
        (cost(&n) < 0.98 * own).then_some(table)
    }
}

/// The rail phase's tree per shard, over relative host positions.
#[derive(Debug, Clone, Copy)]
enum Rail {
    /// Radix f: the lowest nonzero base-f digit cleared (f ≥ H: the star).
    Radix(usize),
    /// The highest set bit cleared.
    Halving,
}

/// How a shard's chunks cross the rails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lanes {
    /// All in one message per transfer.
    One,
    /// Chunk j on lane j.
    Each,
    /// Chunk 0 on lane 0, then lanes of doubling size: lane k ≥ 1 holds
    /// chunks 2^(k−1) … 2^k − 1.
    Doubling,
    /// Lanes that grow by at most 3/2 ([`paced_lanes`]).
    Paced,
}

impl Lanes {
    /// Per chunk of a shard of `chunks`, its lane.
    fn table(self, chunks: usize) -> Vec<usize> {
        match self {
            Lanes::One => vec![0; chunks],
            Lanes::Each => (0..chunks).collect(),
            Lanes::Doubling => (0..chunks)
                .map(|j| if j == 0 { 0 } else { j.ilog2() as usize + 1 })
                .collect(),
            Lanes::Paced => paced_lanes(chunks)
                .iter()
                .enumerate()
                .flat_map(|(k, &n)| std::iter::repeat_n(k, n))
                .collect(),
        }
    }
}

/// The sizes of `Lanes::Paced`'s lanes over `chunks` chunks, smallest
/// first: from the largest down, each takes ⌈1/3⌉ of the chunks left, as
/// the largest term of a geometric series with ratio 3/2 does of its sum
/// (32 chunks: 1, 1, 2, 2, 3, 5, 7, 11; 16: 1, 1, 2, 2, 4, 6; 8: 1, 1, 1,
/// 2, 3).
fn paced_lanes(chunks: usize) -> Vec<usize> {
    let mut left = chunks;
    let mut out = Vec::new();
    while left > 0 {
        let take = left.div_ceil(3);
        out.push(take);
        left -= take;
    }
    out.reverse();
    out
}

#[allow(clippy::too_many_arguments)]
fn build(
    spec: Spec,
    hosts: &[Vec<usize>],
    abroad: usize,
    rail: Rail,
    spread: usize,
    lanes: Lanes,
    whole_own: bool,
    aggregators: Option<&[usize]>,
) -> Algorithm {
    let spread = spread.max(1);
    // With rail lanes each lane of a shard is a step of its own (lane k
    // after lane k − 1 of the same transfer), and crosses the rail on a
    // logical channel of its own.
    let lane_of = lanes.table(spec.chunks());
    let c = lane_of[spec.chunks() - 1] + 1;
    let at = |step: usize, j: usize| step * c + lane_of[j];
    let nh = hosts.len();
    let g = hosts[0].len();
    let abroad = abroad.min(g - 1);
    debug_assert!(aggregators.is_none() || abroad == 0);
    let where_ = positions(spec.ranks, hosts);
    let mut transfers = Vec::new();
    for (o, &(ho, ko)) in where_.iter().enumerate() {
        for j in 0..spec.chunks() {
            let chunk = o * spec.chunks() + j;
            // Host-mates of o that go abroad, and where to.
            let away = |k: usize| -> Option<usize> {
                let d = (k + g - ko) % g;
                (d >= 1 && d <= abroad).then(|| (ho + 1 + (ko + k) % (nh - 1)) % nh)
            };
            // The position whose GPUs aggregate this chunk on every host
            // but the owner's and send it across their rail; on the
            // owner's host that GPU takes the rail partial sums and sends
            // them to the owner with its own contribution.
            let a = aggregators.map_or(ko, |t| t[ko * spec.chunks() + j]);
            for (h, members) in hosts.iter().enumerate() {
                let root = if h == ho { ko } else { a };
                let agg = members[root];
                // Host h's aggregator sends its partial sums across the rail
                // in the order q = 0, 1, … (owner host h+1 first) and keeps
                // its own host's shard last (q = H − 1): its host-mates send
                // their contributions in that same order, so the first rail
                // send waits for one shard's worth of intra-host traffic
                // per tile, not all of it.
                let q = (ho + nh - h - 1) % nh;
                // The owner's own host (q = H − 1) with `whole_own`: each
                // host-mate's contribution as one message.
                let relays = h == ho && a != ko;
                let jm = if whole_own && h == ho { 0 } else { j };
                for (k, &s) in members.iter().enumerate() {
                    if k == root {
                        continue;
                    }
                    if relays && k == a {
                        // After the rail partial sums are in (rail steps
                        // are numbered nh·g + q, q < nh − 1).
                        transfers.push(Transfer {
                            step: at(nh * g + nh - 1, j),
                            chunk,
                            src: s,
                            dst: agg,
                            channel: 0,
                        });
                        continue;
                    }
                    let j = jm;
                    let intra = q * g + 1 + (root + g - k - 1) % g;
                    match (h == ho).then(|| away(k)).flatten() {
                        Some(h2) => transfers.push(Transfer {
                            step: 0,
                            chunk,
                            src: s,
                            dst: hosts[h2][k],
                            // Not the rail channel: on one connection the
                            // next tile's contribution would wait behind
                            // this tile's rail partial sum (one receiving
                            // threadblock), serialising the tiles.
                            channel: 2,
                        }),
                        None => transfers.push(Transfer {
                            step: at(intra, j),
                            chunk,
                            src: s,
                            dst: agg,
                            channel: match q % spread {
                                0 => 0,
                                lane => 2 + lane,
                            },
                        }),
                    }
                }
                if h != ho {
                    // Across rail ko, to the parent host's aggregator (the
                    // owner itself at the root). Numbered after every
                    // intra-host step (by level, then in rail order q), so
                    // the owner's accumulation takes its host-mates'
                    // contributions first, as they arrive, and the late
                    // rail partial sums last; the other way round,
                    // host-mate messages would wait unconsumed for the rail
                    // and fill the connection buffers (2 tiles), stalling
                    // the next tile's intra-host sends.
                    let r = (h + nh - ho) % nh;
                    // Spread by k, where this is the k-th position that
                    // sends to the same parent offset: r = r − p + k·f·place
                    // (the star has one message per parent).
                    let (p, lane) = match rail {
                        Rail::Radix(f) if f >= nh => (0, 0),
                        Rail::Radix(f) => {
                            (rail_parent(r, f), (r / (rail_place(r, f) * f)) % spread)
                        }
                        Rail::Halving => (r - (1 << r.ilog2()), 0),
                    };
                    // q = H − 1 − r: a child (larger r) sends earlier.
                    let step = at(nh * g + q, j);
                    transfers.push(Transfer {
                        step,
                        chunk,
                        src: agg,
                        dst: hosts[(ho + p) % nh][a],
                        channel: match (lane, lane_of[j]) {
                            (0, 0) => 1,
                            (lane, 0) => 1 + spread + lane,
                            (_, rail_lane) => 2 * spread + rail_lane,
                        },
                    });
                }
            }
        }
    }
    let mut name = "hier".to_string();
    match rail {
        Rail::Radix(f) if f < nh => name += &format!("-r{f}"),
        Rail::Radix(_) => {}
        Rail::Halving => name += "-halving",
    }
    if abroad > 0 {
        name += &format!("-abroad{abroad}");
    }
    if spread > 1 {
        name += &format!("-s{spread}");
    }
    match lanes {
        Lanes::One => {}
        Lanes::Each => name += &format!("-c{}", spec.chunks()),
        Lanes::Doubling => name += &format!("-c{}-graded", spec.chunks()),
        Lanes::Paced => name += &format!("-c{}-paced", spec.chunks()),
    }
    if aggregators.is_some() {
        name += "-bal";
    }
    Algorithm::reduce_scatter(name, spec, transfers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::front::generate::{generate, GenParams};

    /// One host splits into groups only where some GPUs reach each other
    /// at a lower α than the rest: not on a switch, a full mesh, a ring or
    /// DGX-1's cube mesh (the shipped single hosts); several hosts are
    /// their hosts.
    #[test]
    fn groups_are_hosts_or_lower_alpha_domains() {
        for kind in [
            "dgx1-v100",
            "ring",
            "dgx-h100",
            "dgx-a100",
            "mi300x",
            "switch",
        ] {
            let t = generate(kind, &GenParams::default()).unwrap();
            assert_eq!(groups(&t), None, "{kind}");
        }
        let two = generate(
            "dgx-h100",
            &GenParams {
                hosts: Some(2),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(groups(&two), hosts(&two));
        assert_eq!(groups(&two).unwrap().len(), 2);
    }

    /// Rail lanes: a valid in-tree per chunk, every chunk of a transfer a
    /// step of its own (but into the owner from its host-mates with
    /// `whole_own`: one message per host-mate), and chunk j of a shard
    /// across the rail on lane j mod C (a logical channel each), moving
    /// what the one-chunk tree moves.
    #[test]
    fn rail_lanes_step_and_route_each_chunk_apart() {
        let cases = [(2usize, 4usize, 2usize), (4, 2, 3), (5, 2, 2), (2, 4, 4)];
        for ((nh, g, c), whole) in cases.into_iter().flat_map(|x| [(x, false), (x, true)]) {
            let hs: Vec<Vec<usize>> = (0..nh).map(|h| (h * g..(h + 1) * g).collect()).collect();
            let one = hier_tree(Spec::reduce_scatter(nh * g, 1), &hs, 0, nh, 1);
            let a = hier_tree_lanes(Spec::reduce_scatter(nh * g, c), &hs, nh, whole, None);
            a.check()
                .unwrap_or_else(|e| panic!("H={nh} g={g} C={c}: {e}"));
            assert_eq!(a.name, format!("hier-c{c}"));
            assert_eq!(a.transfers.len(), one.transfers.len() * c);
            let host = |r: usize| r / g;
            let mut lanes = std::collections::BTreeMap::new();
            for t in a.transfers.iter().filter(|t| host(t.src) != host(t.dst)) {
                lanes
                    .entry(t.chunk % c)
                    .or_insert_with(std::collections::BTreeSet::new)
                    .insert(t.channel);
            }
            let all: Vec<usize> = lanes.values().flatten().copied().collect();
            assert_eq!(lanes.len(), c);
            assert!(lanes.values().all(|l| l.len() == 1), "{lanes:?}");
            assert_eq!(
                all.iter().collect::<std::collections::BTreeSet<_>>().len(),
                c
            );
            // Chunks of one shard between one pair move at steps of their
            // own (with `whole_own` the owner's host-mates' at one step).
            let mut steps = std::collections::BTreeMap::new();
            for t in &a.transfers {
                steps
                    .entry((t.src, t.dst, t.chunk / c))
                    .or_insert_with(Vec::new)
                    .push(t.step);
            }
            for (&(src, dst, owner), v) in steps.iter_mut() {
                let n = v.len();
                v.sort_unstable();
                v.dedup();
                let into_owner = dst == owner && host(src) == host(dst);
                let want = if whole && into_owner { 1 } else { n };
                assert_eq!(v.len(), want, "H={nh} g={g} C={c} {src}->{dst}");
            }
        }
    }

    /// Graded lanes: a valid in-tree per chunk, the same transfers as
    /// eight lanes, but four lanes of 1, 1, 2 and 4 chunks — each crossing
    /// the rail on a channel of its own and moving at one step per pair,
    /// so a lane's chunks are one message.
    #[test]
    fn graded_lanes_double_and_move_as_one_message() {
        for (nh, g) in [(2usize, 4usize), (4, 2), (3, 3)] {
            for whole in [false, true] {
                let hs: Vec<Vec<usize>> = (0..nh).map(|h| (h * g..(h + 1) * g).collect()).collect();
                let spec = Spec::reduce_scatter(nh * g, 8);
                let even = hier_tree_lanes(spec, &hs, nh, whole, None);
                let a = hier_tree_graded(spec, &hs, nh, whole);
                a.check().unwrap_or_else(|e| panic!("H={nh} g={g}: {e}"));
                assert_eq!(a.name, "hier-c8-graded");
                assert_eq!(a.transfers.len(), even.transfers.len());
                let host = |r: usize| r / g;
                let lane = |j: usize| [0, 1, 2, 2, 3, 3, 3, 3][j];
                let mut channels = std::collections::BTreeMap::new();
                let mut steps = std::collections::BTreeMap::new();
                for t in &a.transfers {
                    let (owner, j) = (t.chunk / 8, t.chunk % 8);
                    if host(t.src) != host(t.dst) {
                        channels
                            .entry(lane(j))
                            .or_insert_with(std::collections::BTreeSet::new)
                            .insert(t.channel);
                    }
                    let into_owner = t.dst == owner && host(t.src) == host(t.dst);
                    let l = if whole && into_owner { 0 } else { lane(j) };
                    steps
                        .entry((t.src, t.dst, owner, l))
                        .or_insert_with(std::collections::BTreeSet::new)
                        .insert(t.step);
                }
                assert_eq!(channels.len(), 4);
                assert!(channels.values().all(|c| c.len() == 1), "{channels:?}");
                let distinct: std::collections::BTreeSet<_> = channels.values().flatten().collect();
                assert_eq!(distinct.len(), 4);
                assert!(steps.values().all(|s| s.len() == 1), "H={nh} g={g}");
                // Lanes of one pair in order: lane k before lane k + 1.
                for ((src, dst, owner, l), s) in &steps {
                    if let Some(next) = steps.get(&(*src, *dst, *owner, l + 1)) {
                        assert!(s.first() < next.first());
                    }
                }
            }
        }
    }

    /// Paced lanes: sizes that sum to the chunks, grow by at most 3/2
    /// (one chunk more where rounding needs it), and a valid in-tree per
    /// chunk whose host-mate transfers of neighbouring rail orders take
    /// different channels, each lane crossing the rail on its own.
    #[test]
    fn paced_lanes_grow_by_at_most_half() {
        assert_eq!(paced_lanes(32), [1, 1, 2, 2, 3, 5, 7, 11]);
        assert_eq!(paced_lanes(16), [1, 1, 2, 2, 4, 6]);
        assert_eq!(paced_lanes(8), [1, 1, 1, 2, 3]);
        assert_eq!(paced_lanes(1), [1]);
        for c in 1..=128 {
            let l = paced_lanes(c);
            assert_eq!(l.iter().sum::<usize>(), c);
            for w in l.windows(2) {
                assert!(w[0] <= w[1] && 2 * w[1] <= 3 * w[0] + 2, "C={c}: {l:?}");
            }
        }
        for (nh, g) in [(2usize, 4usize), (4, 2), (3, 3), (4, 4)] {
            let hs: Vec<Vec<usize>> = (0..nh).map(|h| (h * g..(h + 1) * g).collect()).collect();
            let spec = Spec::reduce_scatter(nh * g, 16);
            let a = hier_tree_paced(spec, &hs, nh, true);
            a.check().unwrap_or_else(|e| panic!("H={nh} g={g}: {e}"));
            assert_eq!(a.name, "hier-s2-c16-paced");
            let host = |r: usize| r / g;
            let rail: std::collections::BTreeSet<_> = a
                .transfers
                .iter()
                .filter(|t| host(t.src) != host(t.dst))
                .map(|t| t.channel)
                .collect();
            assert_eq!(rail.len(), 6, "one rail channel per lane");
            let mates: std::collections::BTreeSet<_> = a
                .transfers
                .iter()
                .filter(|t| host(t.src) == host(t.dst))
                .map(|t| t.channel)
                .collect();
            assert!(
                mates.len() >= 2 && mates.is_disjoint(&rail),
                "{mates:?} {rail:?}"
            );
        }
    }

    /// Aggregated at other positions (`RailLoads`' tables), rail
    /// lanes stay valid in-trees that move what the owners' positions
    /// move: the same number of transfers, every rail transfer between
    /// GPUs of one position, and that position the table's.
    #[test]
    fn rail_lanes_aggregate_where_the_table_says() {
        for (nh, g, c, radix) in [
            (2usize, 4usize, 2usize, 2usize),
            (4, 2, 3, 4),
            (4, 3, 2, 2),
            (3, 4, 4, 3),
        ] {
            let hs: Vec<Vec<usize>> = (0..nh).map(|h| (h * g..(h + 1) * g).collect()).collect();
            let spec = Spec::reduce_scatter(nh * g, c);
            let table: Vec<usize> = (0..g * c).map(|x| (x / c + x % c) % g).collect();
            let own = hier_tree_lanes(spec, &hs, radix, true, None);
            let a = hier_tree_lanes(spec, &hs, radix, true, Some(&table));
            a.check()
                .unwrap_or_else(|e| panic!("H={nh} g={g} C={c}: {e}"));
            assert_eq!(a.name, format!("{}-bal", own.name));
            assert_eq!(a.transfers.len(), own.transfers.len());
            for t in a.transfers.iter().filter(|t| t.src / g != t.dst / g) {
                let (ko, j) = ((t.chunk / c) % g, t.chunk % c);
                assert_eq!(t.src % g, table[ko * c + j], "{t:?}");
                assert_eq!(t.dst % g, t.src % g, "{t:?}");
            }
        }
    }

    /// Hosts whose rails are alike (a NIC per GPU) keep every chunk at
    /// its owner's position.
    #[test]
    fn even_rails_need_no_balance() {
        for kind in ["dgx-a100", "dgx-h100"] {
            let t = generate(
                kind,
                &GenParams {
                    hosts: Some(2),
                    ..Default::default()
                },
            )
            .unwrap();
            let hs = hosts(&t).unwrap();
            for c in [2, 3, 4, 8] {
                let table = RailLoads::new(&t, &hs).and_then(|l| l.balance(c));
                assert_eq!(table, None, "{kind} C={c}");
            }
        }
    }

    /// `hier-blocks` is a valid in-tree per shard that moves what the star
    /// moves across the rails (every host one partial sum per shard of
    /// every other host), balanced over the GPUs within one piece, in a
    /// few messages per host-mate pair: at most the pieces one aggregator
    /// takes from a host-mate plus the last hop, where the star sends H.
    #[test]
    fn blocks_move_what_the_star_moves_in_few_messages() {
        for (nh, g) in [
            (2usize, 8usize),
            (4, 8),
            (5, 8),
            (32, 8),
            (33, 8),
            (64, 4),
            (3, 2),
        ] {
            let hs: Vec<Vec<usize>> = (0..nh).map(|h| (h * g..(h + 1) * g).collect()).collect();
            let a = hier_blocks(Spec::reduce_scatter(nh * g, 1), &hs);
            a.check().unwrap_or_else(|e| panic!("H={nh} g={g}: {e}"));
            let host = |r: usize| r / g;
            let pieces = if nh >= g { 1 } else { g / gcd(nh, g) };
            let per_agg = (nh * pieces).div_ceil(g);
            let most = per_agg * (g / pieces);
            let (mut sent, mut got) = (vec![0usize; nh * g], vec![0usize; nh * g]);
            let mut msgs: std::collections::BTreeMap<
                (usize, usize),
                std::collections::BTreeSet<usize>,
            > = Default::default();
            for t in &a.transfers {
                if host(t.src) != host(t.dst) {
                    assert_eq!(t.src % g, t.dst % g, "on its rail");
                    sent[t.src] += 1;
                    got[t.dst] += 1;
                } else {
                    msgs.entry((t.src, t.dst)).or_default().insert(t.step);
                }
            }
            for h in 0..nh {
                let out: usize = sent[h * g..(h + 1) * g].iter().sum();
                assert_eq!(out, (nh - 1) * g, "H={nh} g={g} host {h}");
            }
            assert!(
                sent.iter().chain(&got).all(|&c| c <= most),
                "H={nh} g={g}: {sent:?} {got:?}"
            );
            assert!(
                msgs.values().all(|steps| steps.len() <= per_agg + 1),
                "H={nh} g={g}"
            );
        }
    }

    /// Fewest relays first: the star, the depth-2 radices from H / 2 down
    /// to ⌈√H⌉, then the deeper powers of two; without, the star, ⌈√H⌉
    /// and the powers of two below it.
    #[test]
    fn rail_radices_fewest_relays_first() {
        assert_eq!(rail_radices(2, true), vec![2]);
        assert_eq!(rail_radices(4, true), vec![4, 2]);
        assert_eq!(rail_radices(8, true), vec![8, 4, 3, 2]);
        assert_eq!(rail_radices(8, false), vec![8, 3, 2]);
        assert_eq!(rail_radices(32, true), vec![32, 16, 8, 6, 4, 2]);
        assert_eq!(rail_radices(32, false), vec![32, 6, 4, 2]);
        // 64 and 32 would have 64 and 34 rail peers on one channel.
        assert_eq!(rail_radices(128, true), vec![128, 16, 12, 8, 4, 2]);
        assert_eq!(rail_radices(64, true), vec![64, 32, 16, 8, 4, 2]);
        for nh in 2..300 {
            let r = rail_radices(nh, true);
            let depth2 = r.iter().take_while(|&&f| f * f >= nh).count();
            assert!(r[..depth2].windows(2).all(|w| w[0] > w[1]), "{nh}: {r:?}");
            assert!(r[depth2..].iter().all(|&f| f * f < nh), "{nh}: {r:?}");
        }
    }

    /// Every rail tree is a valid in-tree per shard that moves what the
    /// star moves (H − 1 partial sums sent and received per GPU on its
    /// rail), with at most (f − 1)·⌈log_f H⌉ rail peers each way.
    #[test]
    fn rail_trees_move_what_the_star_moves() {
        for nh in [2usize, 3, 5, 8, 12, 16, 64] {
            let g = 2;
            let hs: Vec<Vec<usize>> = (0..nh).map(|h| vec![h * g, h * g + 1]).collect();
            let radices = rail_radices(nh, true);
            assert_eq!(radices[0], nh.max(2));
            for &f in &radices {
                let a = hier_tree(Spec::reduce_scatter(nh * g, 1), &hs, 0, f, 1);
                a.check().unwrap_or_else(|e| panic!("H={nh} f={f}: {e}"));
                let host = |r: usize| r / g;
                let mut sent = vec![0usize; nh * g];
                let mut peers = vec![std::collections::BTreeSet::new(); nh * g];
                for t in a.transfers.iter().filter(|t| host(t.src) != host(t.dst)) {
                    assert_eq!(t.src % g, t.chunk % g, "rail k carries shards k");
                    sent[t.src] += 1;
                    peers[t.src].insert(t.dst);
                }
                assert!(sent.iter().all(|&s| s == nh - 1), "H={nh} f={f}: {sent:?}");
                let depth = {
                    let (mut d, mut p) = (0, 1);
                    while p < nh {
                        p *= f;
                        d += 1;
                    }
                    d
                };
                let most = if f >= nh { nh - 1 } else { (f - 1) * depth };
                assert!(peers.iter().all(|p| p.len() <= most), "H={nh} f={f}");
            }
        }
    }

    /// `spread` moves transfers between channels and nothing else:
    /// host-mate transfers on channels 0 and 3, rail transfers on 1 and
    /// 4 (spread 2); each host-mate connection's messages split evenly
    /// over its two channels, and a rail connection with several messages
    /// uses both.
    #[test]
    fn spread_only_moves_transfers_between_channels() {
        use std::collections::HashMap;
        let g = 4;
        for (nh, f) in [(16usize, 16usize), (16, 4), (7, 2), (9, 3)] {
            let hs: Vec<Vec<usize>> = (0..nh).map(|h| (h * g..h * g + g).collect()).collect();
            let spec = Spec::reduce_scatter(nh * g, 1);
            let one = hier_tree(spec, &hs, 0, f, 1);
            let two = hier_tree(spec, &hs, 0, f, 2);
            two.check().unwrap_or_else(|e| panic!("H={nh} f={f}: {e}"));
            assert_eq!(one.transfers.len(), two.transfers.len());
            let mut per: HashMap<(usize, usize, usize), usize> = HashMap::new();
            for (a, b) in one.transfers.iter().zip(&two.transfers) {
                let key = |t: &Transfer| (t.step, t.chunk, t.src, t.dst);
                assert_eq!(key(a), key(b));
                let rail = a.src / g != a.dst / g;
                let allowed: &[usize] = if rail { &[1, 4] } else { &[0, 3] };
                assert!(allowed.contains(&b.channel), "H={nh} f={f}: {b:?}");
                *per.entry((b.src, b.dst, b.channel)).or_default() += 1;
            }
            for (&(src, dst, ch), &k) in &per {
                if src / g == dst / g && ch == 0 {
                    let other = per.get(&(src, dst, 3)).copied().unwrap_or(0);
                    assert!(k.abs_diff(other) <= 1, "H={nh} f={f}: {k} vs {other}");
                }
                if src / g != dst / g && ch == 1 && k >= 2 {
                    assert!(per.contains_key(&(src, dst, 4)), "H={nh} f={f}");
                }
            }
        }
    }

    /// The ordering rules of docs/algorithms.md: per chunk, rail transfers
    /// come after every intra-host transfer, and a host's intra-host
    /// transfers follow the aggregator's rail order q (own host's shard last).
    #[test]
    fn rail_order_and_owner_order() {
        let topo = generate(
            "dgx-a100",
            &GenParams {
                hosts: Some(4),
                ..Default::default()
            },
        )
        .unwrap();
        let hs = hosts(&topo).unwrap();
        let (nh, g) = (hs.len(), hs[0].len());
        let a = hier_algorithm(Spec::reduce_scatter(nh * g, 1), &hs, 0);
        a.check().unwrap();
        let host = |r: usize| hs.iter().position(|m| m.contains(&r)).unwrap();
        for t in &a.transfers {
            let (hs_, hd) = (host(t.src), host(t.dst));
            let ho = host(t.chunk);
            if hs_ != hd {
                // Rail: after every intra-host step, in rail order q.
                assert_eq!(t.step, nh * g + (ho + nh - hs_ - 1) % nh, "{t:?}");
            } else {
                let q = (ho + nh - hs_ - 1) % nh;
                assert!(t.step > q * g && t.step < (q + 1) * g, "{t:?}");
            }
        }
    }

    /// The butterflies' radices multiply to the host count, fit the rail
    /// peers, come fewest rounds first and then with the largest most
    /// significant radix; a host count with a prime factor above the limit
    /// gets none.
    #[test]
    fn pat_radices_fewest_rounds_first() {
        assert_eq!(pat_radices(128)[0], vec![8, 16]);
        assert_eq!(pat_radices(32)[0], vec![32]);
        assert_eq!(pat_radices(64)[0], vec![4, 16]);
        assert_eq!(pat_radices(2), vec![vec![2]]);
        assert!(pat_radices(37).is_empty());
        assert!(pat_radices(1).is_empty());
        for nh in 2..=200usize {
            let all = pat_radices(nh);
            for r in &all {
                assert_eq!(r.iter().product::<usize>(), nh);
                assert!(r.iter().map(|f| f - 1).sum::<usize>() <= PAT_MAX_PEERS);
            }
            assert!(all.windows(2).all(|w| w[0].len() <= w[1].len()), "{nh}");
        }
    }

    /// `hier_pat` is a valid in-tree per shard; a GPU's rail transfers of
    /// a shard depend only on where its host first differs from the
    /// owner's (so consecutive shards agree), each round crosses the rails
    /// once per rank and shard, and the last hop stays on the owner's
    /// host.
    #[test]
    fn pat_trees_are_butterflies() {
        for (nh, g, radices) in [
            (8usize, 2usize, vec![2usize, 2, 2]),
            (12, 3, vec![3, 4]),
            (16, 4, vec![4, 4]),
            (6, 1, vec![6]),
        ] {
            let hs: Vec<Vec<usize>> = (0..nh).map(|h| (h * g..h * g + g).collect()).collect();
            let spec = Spec::reduce_scatter(nh * g, 1);
            let a = hier_pat(spec, &hs, &radices);
            a.check().unwrap_or_else(|e| panic!("{nh} {g}: {e}"));
            let d = radices.len();
            for t in &a.transfers {
                let (hs_, hd, ho) = (t.src / g, t.dst / g, t.chunk / g);
                if hs_ == hd {
                    assert_eq!((hs_, t.step, t.dst), (ho, d, t.chunk), "{t:?}");
                } else {
                    assert_eq!(t.src % g, t.dst % g, "{t:?}: along a rail");
                    assert!(t.step < d);
                }
            }
            // Shards of hosts that agree with host x above digit p, and
            // differ from it at p, see x send identically.
            let by = |c: usize, s: usize| {
                a.transfers
                    .iter()
                    .find(|t| t.chunk == c && t.src == s)
                    .map(|t| (t.dst, t.step, t.channel))
            };
            for c in 0..nh * g - 1 {
                let (h1, h2) = (c / g, (c + 1) / g);
                if h1 != h2 || g == 1 {
                    continue;
                }
                for s in 0..nh * g {
                    if s / g != h1 {
                        assert_eq!(by(c, s), by(c + 1, s), "{nh}: shards {c}, {}", c + 1);
                    }
                }
            }
        }
    }
}
