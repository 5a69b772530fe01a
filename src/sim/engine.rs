//! The event engine: threadblock state machines, connections with bounded
//! slots, flows with exact max-min fair rates recomputed per connected
//! component of the flows whose links changed.

use super::period::{self, ConnSnap, FlowSnap, Snap, TbSnap};
use super::{LinkLoad, SharedMem, SimError, SimOptions, SimResult, TbSpan, Trace};
use crate::ir::{Program, StepKind, Topology};
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::Arc;

#[derive(Clone, Copy)]
struct StepInfo {
    kind: StepKind,
    /// Chunks moved (`cnt`).
    cnt: f64,
    /// (global TB index, XML step position) to wait for.
    dep: Option<(usize, u64)>,
    /// A `re` the runtime's parser merges into the `re` before it
    /// (`crate::ir::msccl::reduce_continuations`): with local passes
    /// charged it reads only its own source, one pass over its bytes.
    fused: bool,
    /// A zero-copy send (`Resolved::zero_copy_sends`): under the CPU
    /// model with `SharedMem::zero_copy` it writes no slot.
    zero_copy: bool,
}

#[derive(Clone)]
struct Tb {
    rank: usize,
    local: usize,
    id: i64,
    /// Its steps, shared by every run of a [`Prepared`] program.
    steps: Arc<[StepInfo]>,
    total: u64,
    pos: u64,
    running: bool,
    send_conn: Option<usize>,
    recv_conn: Option<usize>,
    waiters: Vec<usize>,
    registered: bool,
    start: f64,
    /// Its step's flow, or usize::MAX.
    flow: usize,
}

#[derive(Clone)]
struct Msg {
    arrived: bool,
}

#[derive(Clone)]
struct Conn {
    chan: i64,
    src: usize,
    dst: usize,
    /// The links whose capacity can bind its flows' rates: its route's,
    /// less those another link of the route always binds first
    /// (`drop_dominated`).
    links: Vec<usize>,
    /// Its `links` as a route id: connections with the same binding
    /// links share one ([`Prepared::routes`]).
    route: usize,
    /// Every link its bytes cross (`SimResult::link_bytes`).
    all_links: Vec<usize>,
    alpha: f64,
    sender: Option<usize>,
    receiver: Option<usize>,
    /// Messages sent and not yet taken by the receiver, in send order.
    queue: VecDeque<Msg>,
    /// Messages taken by the receiver so far.
    consumed: u64,
    sent: u64,
}

struct Flow {
    conn: usize,
    seq: u64,
    tb: usize,
    bytes: f64,
    remaining: f64,
    rate: f64,
    last: f64,
}

#[derive(Clone)]
struct LinkState {
    /// Capacity, bytes per µs.
    cap: f64,
    /// The routes with active flows over it, once per crossing.
    routes: Vec<usize>,
    /// Active flows over it, once per crossing.
    nflows: usize,
    load: f64,
}

#[derive(Clone, Copy)]
enum Ev {
    Activate(usize),
}

/// The pending finish time of every active flow: a binary min-heap on
/// (time, sequence number) with each flow's position, so a rate change
/// moves the flow's one entry instead of pushing another (with many flows
/// sharing links, a queue of pushed entries would hold far more stale
/// entries than live ones: tens of millions). Sequence numbers come from the engine's one
/// counter, so events order exactly as with one queue.
#[derive(Default)]
struct FlowHeap {
    heap: Vec<(f64, u64, usize)>,
    /// Position of flow f in `heap`, or usize::MAX.
    pos: Vec<usize>,
}

impl FlowHeap {
    fn less(a: &(f64, u64, usize), b: &(f64, u64, usize)) -> bool {
        a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)) == Ordering::Less
    }
    fn swap(&mut self, i: usize, j: usize) {
        self.heap.swap(i, j);
        self.pos[self.heap[i].2] = i;
        self.pos[self.heap[j].2] = j;
    }
    fn up(&mut self, mut i: usize) {
        while i > 0 {
            let p = (i - 1) / 2;
            if !Self::less(&self.heap[i], &self.heap[p]) {
                break;
            }
            self.swap(i, p);
            i = p;
        }
    }
    fn down(&mut self, mut i: usize) {
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut m = i;
            if l < self.heap.len() && Self::less(&self.heap[l], &self.heap[m]) {
                m = l;
            }
            if r < self.heap.len() && Self::less(&self.heap[r], &self.heap[m]) {
                m = r;
            }
            if m == i {
                break;
            }
            self.swap(i, m);
            i = m;
        }
    }
    /// Schedule (or move) flow f's finish at (t, seq).
    fn set(&mut self, f: usize, t: f64, seq: u64) {
        if self.pos.len() <= f {
            self.pos.resize(f + 1, usize::MAX);
        }
        match self.pos[f] {
            usize::MAX => {
                self.heap.push((t, seq, f));
                let i = self.heap.len() - 1;
                self.pos[f] = i;
                self.up(i);
            }
            i => {
                self.heap[i] = (t, seq, f);
                self.up(i);
                self.down(self.pos[f]);
            }
        }
    }
    fn remove(&mut self, f: usize) {
        let Some(&i) = self.pos.get(f).filter(|&&i| i != usize::MAX) else {
            return;
        };
        let last = self.heap.len() - 1;
        self.swap(i, last);
        self.heap.pop();
        self.pos[f] = usize::MAX;
        if i < self.heap.len() {
            self.up(i);
            self.down(self.pos[self.heap[i].2]);
        }
    }
    fn peek(&self) -> Option<(f64, u64, usize)> {
        self.heap.first().copied()
    }
    /// Every finish `dt` µs later, the order rebuilt (adding `dt` may
    /// round two times to one).
    fn shift(&mut self, dt: f64) {
        for e in self.heap.iter_mut() {
            e.0 += dt;
        }
        self.heap
            .sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        for (i, e) in self.heap.iter().enumerate() {
            self.pos[e.2] = i;
        }
    }
}

struct Event {
    t: f64,
    seq: u64,
    ev: Ev,
}
impl PartialEq for Event {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Event {
    fn cmp(&self, o: &Self) -> Ordering {
        // Min-heap on (time, insertion order): deterministic.
        o.t.total_cmp(&self.t).then_with(|| o.seq.cmp(&self.seq))
    }
}

struct Engine<'a> {
    opts: &'a SimOptions,
    tbs: Vec<Tb>,
    conns: Vec<Conn>,
    /// Flow slots, active or free: a finished flow's slot is reused
    /// (`free_flows`), so these and the per-flow scratch stay as large as
    /// the most flows ever active at once.
    flows: Vec<Flow>,
    free_flows: Vec<usize>,
    /// Flows started so far.
    flows_started: u64,
    links: Vec<LinkState>,
    link_bytes: Vec<f64>,
    heap: BinaryHeap<Event>,
    finishes: FlowHeap,
    seq: u64,
    now: f64,
    end: f64,
    /// Per rank: when its last step completed, µs.
    rank_end: Vec<f64>,
    work: Vec<usize>,
    chunk: f64,
    tile: f64,
    tiles: u64,
    /// Messages a connection's buffer holds (sent, not yet taken).
    depth: u64,
    steps_executed: u64,
    /// Tiles jumped over (`SimResult::tiles_skipped`).
    tiles_skipped: u64,
    /// Connection of rank 0's memory (then rank r's is `mem_conn + r`):
    /// with local passes charged, a `cpy`/`re` is a flow over its GPU's
    /// memory, one pseudo-link per rank after the topology's links.
    mem_conn: usize,
    /// The topology's links (the memory pseudo-links follow them).
    real_links: usize,
    // Component search scratch.
    stamp: u64,
    /// Connections whose flows changed at `now`; their components' rates
    /// are recomputed once before time moves on (`flush`).
    dirty: Vec<usize>,
    link_stamp: Vec<u64>,
    /// Per route: its links ([`Prepared::routes`]), its active flows, and
    /// the component search's stamp and rate.
    routes: &'a [Vec<usize>],
    whole: &'a Components,
    /// Fill whole components (`Components`) instead of searching the
    /// active one: chosen by how much of them the active ones cover,
    /// looked at every `PROBE` recomputes; never with a trace.
    fill_whole: bool,
    filling: Filling,
    recomputes: u64,
    route_flows: Vec<Vec<usize>>,
    route_stamp: Vec<u64>,
    route_rate: Vec<f64>,
    /// Per route: the rate every one of its flows has, and whether a flow
    /// joined it since (one at rate 0 until its first recompute).
    route_applied: Vec<f64>,
    route_joined: Vec<bool>,
    rem_cap: Vec<f64>,
    unfixed: Vec<usize>,
    /// Per link of the component being filled: its place in `comp_links`,
    /// and per place the link's fair share (∞ once its flows are fixed).
    open_at: Vec<usize>,
    open_share: Vec<f64>,
    /// Links whose share a round of the filling changed, each once
    /// (`touch_round`: the round that last listed it).
    touched: Vec<usize>,
    touch_round: Vec<u64>,
    round: u64,
    /// Reused buffers of `recompute` (links, flows, search stack).
    comp_links: Vec<usize>,
    comp_routes: Vec<usize>,
    stack: Vec<usize>,
    trace: Option<Trace>,
    /// Looking for a period (`period.rs`), while one may still be used.
    watch: Option<Watch>,
}

/// The search for a period: snapshots at the tile boundaries of one
/// threadblock.
struct Watch {
    /// The threadblock whose tile boundaries are snapshot instants.
    at_tb: usize,
    /// It has crossed one since the last snapshot.
    due: bool,
    /// Tiles of the full tile size (the last is shorter when the chunk
    /// is not a multiple of the tile).
    full: u64,
    /// Per threadblock: steps per tile, and steps in all.
    steps: Vec<u64>,
    total: Vec<u64>,
    /// The latest snapshots, oldest first.
    snaps: VecDeque<Snap>,
}

/// The longest period looked for, in tiles of the watched threadblock.
const MAX_PERIOD: usize = 8;

/// Periods in a row a jump needs.
const RUNS: usize = 3;

/// How the engine finds what to fill: the active component of the
/// changed connection, its whole component, or either as the engine
/// chooses (every rate the same whichever it takes).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Filling {
    Chosen,
    #[cfg_attr(not(test), allow(dead_code))]
    Active,
    Whole,
}

/// Static components of fewer links are never filled whole: their
/// search costs little, and filling them whole costs more where their
/// active components are a few links each (the 16-GCD MI250 VM
/// replicated).
const WHOLE_LINKS: usize = 32;

/// Every this many recomputes one searches the active component and
/// compares it with its whole one (`Components`): where it covers 70 %
/// or more, the recomputes until the next look fill the whole one. The
/// choice changes no rate, only the work.
const PROBE: u64 = 16;

/// The checks every simulation passes first: ranks that match, usable
/// options, a positive chunk count.
fn check_request(prog: &Program, topo: &Topology, opts: &SimOptions) -> Result<(), SimError> {
    super::check_ranks(prog, topo)?;
    if opts.tiling && opts.tile_bytes == 0 {
        return Err(SimError::BadOptions(
            "the tile size must be at least 1 byte".into(),
        ));
    }
    if opts.slots == 0 || opts.slot_bytes == 0 {
        return Err(SimError::BadOptions(
            "connections need at least one slot of at least 1 byte".into(),
        ));
    }
    if let Some(sm) = opts.shared_mem {
        if !(sm.gbps.is_finite() && sm.gbps > 0.0 && sm.call_us.is_finite() && sm.call_us >= 0.0) {
            return Err(SimError::BadOptions(format!(
                "shared memory {} GB/s and {} µs per call must be finite, positive and non-negative",
                sm.gbps, sm.call_us
            )));
        }
    }
    if let Some(m) = opts.mem_gbps {
        if !(m.is_finite() && m > 0.0) {
            return Err(SimError::BadOptions(format!(
                "memory bandwidth {m} GB/s must be finite and positive"
            )));
        }
    }
    if prog.nchunksperloop < 1 {
        return Err(SimError::BadProgram(format!(
            "nchunksperloop is {}; it must be at least 1",
            prog.nchunksperloop
        )));
    }
    Ok(())
}

/// Simulate `prog` on `topo` for nccl-tests size `size_bytes` (the full
/// buffer: per-rank input bytes for reduce-scatter); chunk bytes =
/// size / nchunksperloop. See docs/cost-model.md. To run one program at
/// several sizes, [`prepare`] it once and [`Prepared::run`] each size.
pub fn simulate(
    prog: &Program,
    topo: &Topology,
    size_bytes: u64,
    opts: &SimOptions,
) -> Result<SimResult, SimError> {
    prepare(prog, topo, opts)?.run(size_bytes)
}

/// A program made ready to simulate on a topology: what does not depend
/// on the size — the resolved threadblocks and connections, the host
/// fold, routes and links. Each [`Prepared::run`] starts from a copy of
/// this state, so one preparation serves any number of sizes, from any
/// number of threads.
pub struct Prepared {
    opts: SimOptions,
    ranks: usize,
    nchunksperloop: u64,
    /// Steps of the whole program (before the fold).
    total_steps: u64,
    tbs: Vec<Tb>,
    conns: Vec<Conn>,
    links: Vec<LinkState>,
    mem_conn: usize,
    real_links: usize,
    fold: Option<super::fold::Fold>,
    /// Every distinct binding-link list of the connections (`Conn::route`).
    routes: Vec<Vec<usize>>,
    /// The components of the links that routes join, whatever flows are
    /// active ([`Components`]).
    whole: Components,
}

/// The connected components of the links that routes join, all routes
/// counted: each holds every component of the active flows' links that
/// meets it. Filling one gives every link and route in it the rates that
/// filling each active component alone gives, bit for bit (the
/// bottlenecks of different active components never touch each other's
/// links, and within one the least share comes first in either order),
/// so where the active components cover most of it the filling takes it
/// whole and skips their search (`Engine::recompute`).
struct Components {
    /// Per link: its component, or `NONE` where no route crosses it.
    of: Vec<usize>,
    /// Per component: its links in ascending order, and its routes.
    links: Vec<Vec<usize>>,
    routes: Vec<Vec<usize>>,
}

impl Components {
    const NONE: usize = usize::MAX;

    fn new(nlinks: usize, routes: &[Vec<usize>]) -> Components {
        // Union-find over the links, each route joining its links.
        let mut parent: Vec<usize> = (0..nlinks).collect();
        fn root(parent: &mut [usize], mut x: usize) -> usize {
            while parent[x] != x {
                parent[x] = parent[parent[x]];
                x = parent[x];
            }
            x
        }
        let mut used = vec![false; nlinks];
        for r in routes {
            for &l in r {
                used[l] = true;
            }
            for w in r.windows(2) {
                let (a, b) = (root(&mut parent, w[0]), root(&mut parent, w[1]));
                if a != b {
                    parent[a.max(b)] = a.min(b);
                }
            }
        }
        let mut of = vec![Self::NONE; nlinks];
        let mut id_of_root: HashMap<usize, usize> = HashMap::new();
        let mut links: Vec<Vec<usize>> = Vec::new();
        for l in (0..nlinks).filter(|&l| used[l]) {
            let r = root(&mut parent, l);
            let id = *id_of_root.entry(r).or_insert_with(|| {
                links.push(Vec::new());
                links.len() - 1
            });
            of[l] = id;
            links[id].push(l);
        }
        let mut by_comp: Vec<Vec<usize>> = vec![Vec::new(); links.len()];
        for (i, r) in routes.iter().enumerate() {
            if let Some(&l) = r.first() {
                by_comp[of[l]].push(i);
            }
        }
        Components {
            of,
            links,
            routes: by_comp,
        }
    }
}

/// Prepare `prog` on `topo` under `opts` for [`Prepared::run`] at any
/// size.
pub fn prepare(prog: &Program, topo: &Topology, opts: &SimOptions) -> Result<Prepared, SimError> {
    check_request(prog, topo, opts)?;
    let n = topo.num_ranks();
    // Ranks, threadblocks, connections and dependencies, resolved once.
    let res = crate::ir::resolve::resolve(prog).map_err(|e| SimError::BadProgram(e.to_string()))?;
    let conns: Vec<Conn> = res
        .conns
        .iter()
        .map(|c| Conn {
            chan: c.chan,
            src: c.from,
            dst: c.to,
            links: Vec::new(),
            route: 0,
            all_links: Vec::new(),
            alpha: 0.0,
            sender: c.sender,
            receiver: c.receiver,
            queue: VecDeque::new(),
            consumed: 0,
            sent: 0,
        })
        .collect();
    let mut total_steps: u64 = 0;
    let zero_copy = match opts.shared_mem {
        Some(sm) if sm.zero_copy => res.zero_copy_sends(prog, !prog.outofplace),
        _ => Vec::new(),
    };
    let tbs: Vec<Tb> = res
        .tbs
        .iter()
        .enumerate()
        .map(|(k, t)| {
            let fused = crate::ir::msccl::reduce_continuations(
                (0..t.steps).map(|si| res.step(prog, k, si)),
            );
            let steps: Arc<[StepInfo]> = (0..t.steps)
                .map(|si| {
                    let st = res.step(prog, k, si);
                    StepInfo {
                        kind: st.kind,
                        cnt: st.cnt as f64,
                        dep: res.deps[t.first_step + si].map(|(d, s)| (d, s as u64)),
                        fused: fused[si],
                        zero_copy: zero_copy
                            .get(t.first_step + si)
                            .is_some_and(|&z| z != crate::ir::resolve::ZeroCopy::No),
                    }
                })
                .collect();
            total_steps += steps.len() as u64;
            Tb {
                rank: t.rank,
                local: t.local,
                id: t.id,
                total: 0,
                steps,
                pos: 0,
                running: false,
                send_conn: t.send_conn,
                recv_conn: t.recv_conn,
                waiters: Vec::new(),
                registered: false,
                start: 0.0,
                flow: usize::MAX,
            }
        })
        .collect();
    // A program the same on every host of a machine of identical hosts
    // runs one host's threadblocks (`fold`).
    let fold = if !opts.fold || opts.trace || opts.shared_mem.is_some() {
        None
    } else {
        super::fold::find(topo, &res, |f| same_steps(&tbs, f))
    };
    let (tbs, mut conns, origin) = match &fold {
        Some(f) => quotient(tbs, conns, &res, f),
        None => {
            let origin = (0..conns.len()).collect();
            (tbs, conns, origin)
        }
    };
    // Routes, one route tree per sending rank (the fold's own where it
    // folds: each crossing of a link stands for its weight in crossings
    // of the link's orbit).
    let mut trees: HashMap<usize, Vec<Option<petgraph::graph::EdgeIndex>>> = HashMap::new();
    for (c, &o) in conns.iter_mut().zip(&origin) {
        let (links, alpha) = match &fold {
            Some(f) => f.routes[&o].clone(),
            None => {
                let tree = trees.entry(c.src).or_insert_with(|| topo.route_tree(c.src));
                let r = topo
                    .route_from_tree(c.src, c.dst, tree)
                    .ok_or(SimError::NoRoute {
                        from: c.src,
                        to: c.dst,
                    })?;
                (r.links, r.alpha_us)
            }
        };
        for &e in &links {
            let cap = topo.link(e).capacity_gbps();
            if !(cap.is_finite() && cap > 0.0) {
                return Err(SimError::NoRoute {
                    from: c.src,
                    to: c.dst,
                });
            }
        }
        c.links = match &fold {
            Some(f) => links
                .iter()
                .flat_map(|e| std::iter::repeat_n(f.link_rep[e.index()], f.link_weight[e.index()]))
                .collect(),
            None => links.iter().map(|e| e.index()).collect(),
        };
        c.all_links = c.links.clone();
        c.alpha = alpha;
    }
    let mut links: Vec<LinkState> = topo
        .graph
        .edge_indices()
        .map(|e| LinkState {
            cap: topo.link(e).capacity_gbps() * 1e3,
            routes: Vec::new(),
            nflows: 0,
            load: 0.0,
        })
        .collect();
    let real_links = links.len();
    // Each GPU's memory (its `mem_gbps`, else the option's figure), shared
    // max-min fairly by its concurrent local passes (and by nothing else:
    // the links' transfers are not charged to it).
    let mem_conn = conns.len();
    // Rank r's local passes: a connection from r to itself over `link`.
    let local = |r: usize, link: usize| Conn {
        chan: -1,
        src: r,
        dst: r,
        links: vec![link],
        route: 0,
        all_links: vec![link],
        alpha: 0.0,
        sender: None,
        receiver: None,
        queue: VecDeque::new(),
        consumed: 0,
        sent: 0,
    };
    if let Some(sm) = opts.shared_mem {
        // One resource for every byte any step touches: every connection
        // and every rank's local passes cross it, and nothing else.
        let shared = links.len();
        links.push(LinkState {
            cap: sm.gbps * 1e3,
            routes: Vec::new(),
            nflows: 0,
            load: 0.0,
        });
        for c in conns.iter_mut() {
            c.links = vec![shared];
            c.all_links = vec![shared];
        }
        conns.extend((0..n).map(|r| local(r, shared)));
    } else if let Some(m) = opts.mem_gbps {
        for r in 0..n {
            conns.push(local(r, links.len()));
            let gbps = topo.graph[topo.ranks[r]].mem_gbps.unwrap_or(m);
            links.push(LinkState {
                cap: gbps * 1e3,
                routes: Vec::new(),
                nflows: 0,
                load: 0.0,
            });
        }
    }
    // A link counted more than once on a route (a fold's weight, or two
    // links of one orbit) is not what `drop_dominated` reasons about; an
    // unfolded route crosses each link once.
    let repeats = fold.is_some()
        && conns[..mem_conn].iter().any(|c| {
            let mut v = c.links.clone();
            v.sort_unstable();
            v.windows(2).any(|w| w[0] == w[1])
        });
    if opts.shared_mem.is_none() && !opts.trace && !repeats {
        drop_dominated(&mut conns[..mem_conn], &links[..real_links]);
    }
    // Connections over the same binding links get the same rates: the
    // rates are computed per route, shared by its flows.
    let mut ids: HashMap<Vec<usize>, usize> = HashMap::new();
    let mut routes: Vec<Vec<usize>> = Vec::new();
    for c in conns.iter_mut() {
        c.route = *ids.entry(c.links.clone()).or_insert_with(|| {
            routes.push(c.links.clone());
            routes.len() - 1
        });
    }
    let whole = Components::new(links.len(), &routes);
    Ok(Prepared {
        routes,
        whole,
        opts: opts.clone(),
        ranks: n,
        nchunksperloop: prog.nchunksperloop as u64,
        total_steps,
        tbs,
        conns,
        links,
        mem_conn,
        real_links,
        fold,
    })
}

impl Prepared {
    /// The program simulated for nccl-tests size `size_bytes`.
    pub fn run(&self, size_bytes: u64) -> Result<SimResult, SimError> {
        self.run_filling(size_bytes, Filling::Chosen)
    }

    /// [`Prepared::run`] with the components filled as `filling` says.
    fn run_filling(&self, size_bytes: u64, filling: Filling) -> Result<SimResult, SimError> {
        let opts = &self.opts;
        let n = self.ranks;
        let depth = if opts.tiling {
            let buffer = opts.slots as u64 * opts.slot_bytes;
            (buffer / opts.tile_bytes).max(2)
        } else {
            u64::MAX
        };
        let chunk = size_bytes as f64 / self.nchunksperloop as f64;
        let (tile, tiles) = if opts.tiling && chunk > opts.tile_bytes as f64 {
            let t = opts.tile_bytes as f64;
            (t, (chunk / t).ceil() as u64)
        } else {
            (chunk, 1)
        };
        let total_steps = self.total_steps;
        if total_steps.saturating_mul(tiles) > 2_000_000_000 {
            return Err(SimError::BadOptions(format!(
                "{total_steps} steps × {tiles} tiles is too many to simulate; use a larger tile or --no-tiling"
            )));
        }
        let mut tbs = self.tbs.clone();
        for t in tbs.iter_mut() {
            t.total = t.steps.len() as u64 * tiles;
        }
        let (conns, links) = (self.conns.clone(), self.links.clone());
        let (mem_conn, real_links, fold) = (self.mem_conn, self.real_links, &self.fold);
        let nl = links.len();
        let ntb = tbs.len();
        let full = if tiles > 1 && chunk - (tiles - 1) as f64 * tile < tile {
            tiles - 1
        } else {
            tiles
        };
        let watch = (opts.skip_periods && !opts.trace && full >= 3 && depth <= 64)
            .then(|| {
                // A threadblock on a connection: paced by the others (one of
                // local passes only may run ahead to its end at once).
                let paced = |t: &Tb| t.send_conn.is_some() || t.recv_conn.is_some();
                tbs.iter()
                    .position(|t| !t.steps.is_empty() && paced(t))
                    .or_else(|| tbs.iter().position(|t| !t.steps.is_empty()))
            })
            .flatten()
            .map(|at_tb| Watch {
                at_tb,
                due: false,
                full,
                steps: tbs.iter().map(|t| t.steps.len() as u64).collect(),
                total: tbs.iter().map(|t| t.total).collect(),
                snaps: VecDeque::new(),
            });
        let mut eng = Engine {
            opts,
            tbs,
            conns,
            flows: Vec::new(),
            free_flows: Vec::new(),
            flows_started: 0,
            links,
            link_bytes: vec![0.0; nl],
            heap: BinaryHeap::new(),
            finishes: FlowHeap::default(),
            seq: 0,
            now: 0.0,
            end: 0.0,
            rank_end: vec![0.0; n],
            work: (0..ntb).rev().collect(),
            chunk,
            tile,
            tiles,
            depth,
            steps_executed: 0,
            tiles_skipped: 0,
            mem_conn,
            real_links,
            stamp: 0,
            dirty: Vec::new(),
            link_stamp: vec![0; nl],
            routes: &self.routes,
            whole: &self.whole,
            fill_whole: filling == Filling::Whole,
            filling,
            recomputes: 0,
            route_flows: vec![Vec::new(); self.routes.len()],
            route_stamp: vec![0; self.routes.len()],
            route_rate: vec![0.0; self.routes.len()],
            route_applied: vec![0.0; self.routes.len()],
            route_joined: vec![false; self.routes.len()],
            rem_cap: vec![0.0; nl],
            unfixed: vec![0; nl],
            open_at: vec![0; nl],
            open_share: Vec::new(),
            touched: Vec::new(),
            touch_round: vec![0; nl],
            round: 0,
            comp_links: Vec::new(),
            comp_routes: Vec::new(),
            stack: Vec::new(),
            trace: opts.trace.then(Trace::default),
            watch,
        };
        eng.run()?;
        let (mut rank_end, mut link_bytes) = (eng.rank_end, eng.link_bytes);
        let (mut steps_executed, mut flows) = (eng.steps_executed, eng.flows_started);
        if let Some(f) = &fold {
            // Every image ends when its representative does; a link carries
            // what its orbit's representative was charged (each crossing
            // counted at its weight).
            rank_end = (0..n).map(|r| rank_end[f.rank_rep[r]]).collect();
            link_bytes = (0..real_links).map(|l| link_bytes[f.link_rep[l]]).collect();
            steps_executed *= f.order as u64;
            flows *= f.order as u64;
        }
        Ok(SimResult {
            time_us: eng.end,
            rank_end_us: rank_end,
            chunk_bytes: eng.chunk,
            tiles: eng.tiles,
            tiles_skipped: eng.tiles_skipped,
            steps_executed,
            flows,
            link_bytes: link_bytes[..real_links].to_vec(),
            folded: fold.as_ref().map_or(1, |f| f.order),
            trace: eng.trace,
        })
    }
}

/// Whether every threadblock's steps are its image's under the fold's
/// symmetry: the same kinds, counts and merges, and dependencies on the
/// images of what they wait for.
fn same_steps(tbs: &[Tb], f: &super::fold::Fold) -> bool {
    tbs.iter().enumerate().all(|(t, tb)| {
        let img = &tbs[f.tb_image[t]];
        tb.steps.len() == img.steps.len()
            && tb.steps.iter().zip(img.steps.iter()).all(|(a, b)| {
                a.kind == b.kind
                    && a.cnt.to_bits() == b.cnt.to_bits()
                    && a.fused == b.fused
                    && a.zero_copy == b.zero_copy
                    && a.dep.map(|(d, s)| (f.tb_image[d], s)) == b.dep
            })
    })
}

/// The folded program: the threadblocks of the representative ranks and
/// the connections they send on, each end of a connection its orbit's
/// representative. Returns them with each connection's index in `res`.
fn quotient(
    tbs: Vec<Tb>,
    conns: Vec<Conn>,
    res: &crate::ir::resolve::Resolved,
    f: &super::fold::Fold,
) -> (Vec<Tb>, Vec<Conn>, Vec<usize>) {
    let mut new_tb = vec![usize::MAX; tbs.len()];
    let mut k = 0;
    for (t, r) in res.tbs.iter().enumerate() {
        if f.tb_rep[t] == t {
            new_tb[t] = k;
            k += 1;
        }
        debug_assert_eq!(f.tb_rep[t] == t, f.rank_rep[r.rank] == r.rank);
    }
    let mut new_conn = vec![usize::MAX; conns.len()];
    let mut origin = Vec::new();
    for (i, &rep) in f.conn_rep.iter().enumerate() {
        if rep == i {
            new_conn[i] = origin.len();
            origin.push(i);
        }
    }
    let tb_of = |t: usize| new_tb[f.tb_rep[t]];
    let conn_of = |c: usize| new_conn[f.conn_rep[c]];
    let qtbs = tbs
        .into_iter()
        .enumerate()
        .filter(|&(t, _)| f.tb_rep[t] == t)
        .map(|(_, mut tb)| {
            tb.send_conn = tb.send_conn.map(conn_of);
            tb.recv_conn = tb.recv_conn.map(conn_of);
            let steps = Arc::get_mut(&mut tb.steps)
                .expect("a threadblock's steps are its own until prepared");
            for st in steps.iter_mut() {
                st.dep = st.dep.map(|(d, s)| (tb_of(d), s));
            }
            tb
        })
        .collect();
    let qconns = conns
        .into_iter()
        .enumerate()
        .filter(|&(i, _)| f.conn_rep[i] == i)
        .map(|(_, mut c)| {
            c.sender = c.sender.map(tb_of);
            c.receiver = c.receiver.map(tb_of);
            c
        })
        .collect();
    (qtbs, qconns, origin)
}

/// Drop from every connection's rate links each link l that another
/// link m of every route through l binds first: m has less capacity (by
/// more than a millionth, far above the rounding of the spare capacities
/// progressive filling subtracts, so the comparison below holds in
/// floating point too) and carries every flow l carries, so l's fair share
/// is always above m's (its spare capacity is larger by at least the
/// difference in capacity, shared by no more flows), and by the time m's
/// flows are fixed so are all of l's. Progressive filling therefore never picks l,
/// and without it every rate comes out the same, bit for bit, with
/// fewer links per flow and smaller components to search (a GPU's PCIe
/// link to its NIC, which carries exactly the NIC's flows). Kept with a
/// trace, which records every link's load.
fn drop_dominated(conns: &mut [Conn], links: &[LinkState]) {
    let nl = links.len();
    // Per link: the links on every route through it (None: unused).
    let mut common: Vec<Option<Vec<usize>>> = vec![None; nl];
    for c in conns.iter() {
        for &l in &c.links {
            match &mut common[l] {
                None => common[l] = Some(c.links.clone()),
                Some(v) => v.retain(|m| c.links.contains(m)),
            }
        }
    }
    let dominated: Vec<bool> = (0..nl)
        .map(|l| {
            common[l].as_ref().is_some_and(|v| {
                v.iter()
                    .any(|&m| m != l && links[m].cap < links[l].cap * (1.0 - 1e-6))
            })
        })
        .collect();
    if !dominated.iter().any(|&d| d) {
        return;
    }
    for c in conns.iter_mut() {
        c.links.retain(|&l| !dominated[l]);
    }
}

/// A link's fair share of what is left of its capacity among its
/// unfixed flows; ∞ where none is left.
#[inline]
fn share_of(rem_cap: f64, unfixed: usize) -> f64 {
    if unfixed == 0 {
        f64::INFINITY
    } else {
        rem_cap.max(0.0) / unfixed as f64
    }
}

/// The first least value below ∞ and its place, as a scan in order with
/// `<` finds it: four running minima side by side (the scan's one chain
/// of compares is its latency), then the first place that holds theirs.
#[inline]
fn least(xs: &[f64]) -> Option<(f64, usize)> {
    let mut m = [f64::INFINITY; 4];
    let mut quads = xs.chunks_exact(4);
    for q in &mut quads {
        for j in 0..4 {
            if q[j] < m[j] {
                m[j] = q[j];
            }
        }
    }
    let mut least = m[0].min(m[1]).min(m[2].min(m[3]));
    for &x in quads.remainder() {
        if x < least {
            least = x;
        }
    }
    if least == f64::INFINITY {
        return None;
    }
    xs.iter().position(|&x| x == least).map(|i| (xs[i], i))
}

impl Engine<'_> {
    fn push(&mut self, t: f64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Event {
            t,
            seq: self.seq,
            ev,
        });
    }

    fn tile_bytes(&self, tile: u64) -> f64 {
        let start = tile as f64 * self.tile;
        (self.chunk - start).min(self.tile).max(0.0)
    }

    /// When the next event or flow finish is due.
    fn next_instant(&self) -> Option<f64> {
        match (self.heap.peek(), self.finishes.peek()) {
            (None, None) => None,
            (Some(e), None) => Some(e.t),
            (None, Some((t, _, _))) => Some(t),
            (Some(e), Some((t, _, _))) => Some(e.t.min(t)),
        }
    }

    fn run(&mut self) -> Result<(), SimError> {
        loop {
            while let Some(tb) = self.work.pop() {
                self.try_advance(tb);
            }
            // Rates change only between instants: every flow change at
            // `now` is in before the components are recomputed, once.
            if !self.dirty.is_empty() && self.next_instant().is_none_or(|t| t > self.now) {
                self.flush();
                continue;
            }
            // Nothing pending at `now`: where a tile of the watched
            // threadblock has ended, a snapshot.
            if self.watch.as_ref().is_some_and(|w| w.due)
                && self.dirty.is_empty()
                && self.next_instant().is_some_and(|t| t > self.now)
            {
                self.observe();
            }
            // The earlier of the next event and the next flow finish, by
            // (time, sequence number).
            let flow_first = match (self.heap.peek(), self.finishes.peek()) {
                (None, None) => break,
                (Some(_), None) => false,
                (None, Some(_)) => true,
                (Some(e), Some((t, seq, _))) => {
                    t.total_cmp(&e.t).then(seq.cmp(&e.seq)) == Ordering::Less
                }
            };
            if flow_first {
                let Some((t, _, f)) = self.finishes.peek() else {
                    break;
                };
                self.finishes.remove(f);
                self.now = t;
                self.finish(f);
                continue;
            }
            let Some(ev) = self.heap.pop() else { break };
            self.now = ev.t;
            match ev.ev {
                Ev::Activate(f) => self.activate(f),
            }
        }
        if let Some(t) = self.tbs.iter().find(|t| t.pos < t.total) {
            return Err(SimError::Deadlock(self.describe_block(t)));
        }
        Ok(())
    }

    fn describe_block(&self, t: &Tb) -> String {
        let n = t.steps.len() as u64;
        let (tile, si) = (t.pos / n, (t.pos % n) as usize);
        let st = &t.steps[si];
        let why = if let Some((d, ds)) = st
            .dep
            .filter(|&(d, ds)| self.tbs[d].pos < tile * self.tbs[d].steps.len() as u64 + ds + 1)
        {
            format!("waits for threadblock {} step {ds}", self.tbs[d].id)
        } else if st.kind.recvs() {
            let c = t.recv_conn.map(|c| &self.conns[c]);
            match c {
                Some(c) => format!(
                    "waits to receive from rank {} on channel {}, which never sends",
                    c.src, c.chan
                ),
                None => "waits to receive".into(),
            }
        } else {
            match t.send_conn.map(|c| &self.conns[c]) {
                Some(c) => format!(
                    "waits for room in its connection buffer to rank {} (channel {}), never drained",
                    c.dst, c.chan
                ),
                None => "is blocked".into(),
            }
        };
        format!(
            "rank {}, threadblock {}, step {si} ('{}'), tile {tile} {why}",
            t.rank, t.id, st.kind
        )
    }

    fn try_advance(&mut self, tb: usize) {
        loop {
            let t = &self.tbs[tb];
            if t.running || t.pos >= t.total {
                return;
            }
            let n = t.steps.len() as u64;
            let (tile, si) = (t.pos / n, (t.pos % n) as usize);
            let st = &t.steps[si];
            let (kind, cnt, dep, fused, zc) = (st.kind, st.cnt, st.dep, st.fused, st.zero_copy);
            if let Some((d, ds)) = dep {
                let need = tile * self.tbs[d].steps.len() as u64 + ds + 1;
                if self.tbs[d].pos < need {
                    if !self.tbs[tb].registered {
                        self.tbs[tb].registered = true;
                        self.tbs[d].waiters.push(tb);
                    }
                    return;
                }
            }
            let bytes = self.tile_bytes(tile) * cnt;
            let rc = self.tbs[tb].recv_conn;
            let sc = self.tbs[tb].send_conn;
            if kind.recvs() {
                let Some(c) = rc else { return };
                if !self.conns[c].queue.front().is_some_and(|m| m.arrived) {
                    return;
                }
            }
            if kind.sends() {
                let Some(c) = sc else { return };
                if self.conns[c].sent - self.conns[c].consumed >= self.depth {
                    return;
                }
            }
            // Commit: the step starts now.
            self.tbs[tb].start = self.now;
            if kind.recvs() {
                if let Some(c) = rc {
                    // Taking the message frees its place in the buffer.
                    if self.conns[c].queue.pop_front().is_some() {
                        self.conns[c].consumed += 1;
                        if let Some(s) = self.conns[c].sender {
                            self.work.push(s);
                        }
                    }
                }
            }
            if kind.sends() {
                if let Some(c) = sc {
                    let conn = &mut self.conns[c];
                    conn.queue.push_back(Msg { arrived: false });
                    let seq = conn.sent;
                    conn.sent += 1;
                    let alpha = conn.alpha;
                    let moved = match self.opts.shared_mem {
                        Some(sm) if zc => sm.zero_copy_cost(kind, bytes),
                        Some(sm) => sm.cost(kind, bytes),
                        None => bytes,
                    };
                    self.start_flow(c, seq, tb, moved, alpha);
                    return;
                }
            }
            if let Some(sm) = self.opts.shared_mem.filter(|_| kind != StepKind::Nop) {
                // A receive or a local pass: its touches, on the cores.
                let touched = sm.cost(kind, bytes);
                self.start_flow(self.mem_conn + self.tbs[tb].rank, 0, tb, touched, 0.0);
                return;
            }
            if matches!(kind, StepKind::Copy | StepKind::Reduce) && self.opts.mem_gbps.is_some() {
                // cpy reads src, writes dst; re reads both, writes dst; a
                // fused re continuation only reads its src.
                let touched = if fused {
                    bytes
                } else {
                    SharedMem::touches(kind) * bytes
                };
                self.start_flow(self.mem_conn + self.tbs[tb].rank, 0, tb, touched, 0.0);
                return;
            }
            self.tbs[tb].running = true;
            self.complete(tb);
        }
    }

    /// Threadblock `tb` starts a flow of `bytes` over connection `c`
    /// (message `seq` of it; a local pass's own memory connection), which
    /// joins its links after `delay` µs (the route's α).
    fn start_flow(&mut self, c: usize, seq: u64, tb: usize, bytes: f64, delay: f64) {
        let flow = Flow {
            conn: c,
            seq,
            tb,
            bytes,
            remaining: bytes,
            rate: 0.0,
            last: self.now,
        };
        self.flows_started += 1;
        let f = match self.free_flows.pop() {
            Some(f) => {
                self.flows[f] = flow;
                f
            }
            None => {
                self.flows.push(flow);
                self.flows.len() - 1
            }
        };
        self.tbs[tb].running = true;
        self.tbs[tb].flow = f;
        self.push(self.now + delay, Ev::Activate(f));
    }

    fn complete(&mut self, tb: usize) {
        let now = self.now;
        self.end = self.end.max(now);
        self.steps_executed += 1;
        let t = &mut self.tbs[tb];
        t.running = false;
        self.rank_end[t.rank] = self.rank_end[t.rank].max(now);
        if let Some(tr) = self.trace.as_mut() {
            let n = t.steps.len() as u64;
            tr.spans.push(TbSpan {
                rank: t.rank,
                tb: t.local,
                tile: t.pos / n,
                step: (t.pos % n) as usize,
                start_us: t.start,
                end_us: now,
            });
        }
        t.pos += 1;
        if let Some(w) = self.watch.as_mut() {
            if w.at_tb == tb && t.pos.is_multiple_of(t.steps.len() as u64) {
                w.due = true;
            }
        }
        let waiters = std::mem::take(&mut t.waiters);
        for w in waiters {
            self.tbs[w].registered = false;
            self.work.push(w);
        }
        self.work.push(tb);
    }

    fn activate(&mut self, f: usize) {
        if self.flows[f].bytes <= 0.0 {
            self.arrive(f);
            return;
        }
        self.flows[f].last = self.now;
        let c = self.flows[f].conn;
        let r = self.conns[c].route;
        let links = &self.routes[r];
        if links.is_empty() {
            // A route of no links (cannot happen between distinct ranks).
            self.arrive(f);
            return;
        }
        if self.route_flows[r].is_empty() {
            for &l in links {
                self.links[l].routes.push(r);
            }
        }
        self.route_flows[r].push(f);
        self.route_joined[r] = true;
        for &l in links {
            self.links[l].nflows += 1;
        }
        self.dirty.push(c);
    }

    fn finish(&mut self, f: usize) {
        let c = self.flows[f].conn;
        let r = self.conns[c].route;
        let v = &mut self.route_flows[r];
        if let Some(p) = v.iter().position(|&x| x == f) {
            v.swap_remove(p);
        }
        let gone = v.is_empty();
        for &l in &self.routes[r] {
            let link = &mut self.links[l];
            link.nflows -= 1;
            if gone {
                if let Some(p) = link.routes.iter().position(|&x| x == r) {
                    link.routes.swap_remove(p);
                }
            }
        }
        self.flows[f].rate = 0.0;
        self.flows[f].remaining = 0.0;
        self.dirty.push(c);
        self.arrive(f);
    }

    /// Recompute the rates of every component a dirty connection touches,
    /// each component once (a connection whose links were all reached by
    /// an earlier recompute of this flush is already done).
    fn flush(&mut self) {
        let base = self.stamp;
        let dirty = std::mem::take(&mut self.dirty);
        for &c in &dirty {
            if self.conns[c]
                .links
                .iter()
                .any(|&l| self.link_stamp[l] <= base)
            {
                self.recompute(c);
            }
        }
        self.dirty = dirty;
        self.dirty.clear();
    }

    fn arrive(&mut self, f: usize) {
        let (c, seq, tb, bytes) = {
            let fl = &self.flows[f];
            (fl.conn, fl.seq, fl.tb, fl.bytes)
        };
        for i in 0..self.conns[c].all_links.len() {
            let l = self.conns[c].all_links[i];
            self.link_bytes[l] += bytes;
        }
        // The flow is over: nothing refers to its slot any more.
        self.free_flows.push(f);
        self.tbs[tb].flow = usize::MAX;
        if c >= self.mem_conn {
            // A local pass: nothing is delivered.
            self.complete(tb);
            return;
        }
        let conn = &mut self.conns[c];
        let idx = (seq - conn.consumed) as usize;
        if let Some(m) = conn.queue.get_mut(idx) {
            m.arrived = true;
        }
        if let Some(r) = conn.receiver {
            self.work.push(r);
        }
        self.complete(tb);
    }

    /// Max-min fair rates (progressive filling) for the connected component
    /// of flows reachable from the links of connection `c`. Flows over
    /// the same route get the same rate, so the filling works per route,
    /// each weighing as many flows as it has.
    fn recompute(&mut self, c: usize) {
        self.stamp += 1;
        let st = self.stamp;
        let mut comp_links = std::mem::take(&mut self.comp_links);
        let mut comp_routes = std::mem::take(&mut self.comp_routes);
        let mut stack = std::mem::take(&mut self.stack);
        comp_links.clear();
        comp_routes.clear();
        self.recomputes += 1;
        let probe = self.filling == Filling::Chosen
            && self.trace.is_none()
            && self.recomputes.is_multiple_of(PROBE);
        let whole = self.conns[c]
            .links
            .first()
            .map_or(Components::NONE, |&l| self.whole.of[l]);
        let mut left = 0;
        if self.fill_whole && !probe && whole != Components::NONE {
            // The whole component: every link of it (stamped, so that no
            // other connection of this instant recomputes it again) and
            // every route, active or not.
            for &l in &self.whole.links[whole] {
                self.link_stamp[l] = st;
                comp_links.push(l);
            }
            for &r in &self.whole.routes[whole] {
                left += self.route_flows[r].len();
                comp_routes.push(r);
            }
        } else {
            for &l in &self.conns[c].links {
                if self.link_stamp[l] != st {
                    self.link_stamp[l] = st;
                    stack.push(l);
                }
            }
            while let Some(l) = stack.pop() {
                comp_links.push(l);
                for &r in &self.links[l].routes {
                    if self.route_stamp[r] != st {
                        self.route_stamp[r] = st;
                        comp_routes.push(r);
                        left += self.route_flows[r].len();
                        for &l2 in &self.routes[r] {
                            if self.link_stamp[l2] != st {
                                self.link_stamp[l2] = st;
                                stack.push(l2);
                            }
                        }
                    }
                }
            }
            if probe && whole != Components::NONE {
                let all = self.whole.links[whole].len();
                self.fill_whole = all >= WHOLE_LINKS && comp_links.len() * 10 >= all * 7;
            }
            // A whole component's links are listed in ascending order.
            comp_links.sort_unstable();
        }
        for &l in &comp_links {
            self.rem_cap[l] = self.links[l].cap;
            self.unfixed[l] = self.links[l].nflows;
        }
        // Routes get stamp st+1 once fixed.
        let fixed = st + 1;
        // Per link, in `comp_links`' order, its fair share, kept as the
        // filling changes it (∞ once its flows are all fixed): the
        // bottleneck is the first least share.
        let mut open_share = std::mem::take(&mut self.open_share);
        open_share.clear();
        for (i, &l) in comp_links.iter().enumerate() {
            self.open_at[l] = i;
            open_share.push(share_of(self.rem_cap[l], self.unfixed[l]));
        }
        while left > 0 {
            let Some((share, at)) = least(&open_share) else {
                break;
            };
            let bl = comp_links[at];
            self.round += 1;
            let round = self.round;
            self.touched.clear();
            for i in 0..self.links[bl].routes.len() {
                let r = self.links[bl].routes[i];
                if self.route_stamp[r] == fixed {
                    continue;
                }
                self.route_stamp[r] = fixed;
                self.route_rate[r] = share;
                let k = self.route_flows[r].len();
                left -= k;
                for &l2 in &self.routes[r] {
                    // One subtraction per flow, as each flow takes its
                    // share: the same value in any order, bit for bit.
                    let mut rem = self.rem_cap[l2];
                    for _ in 0..k {
                        rem -= share;
                    }
                    self.rem_cap[l2] = rem;
                    self.unfixed[l2] -= k;
                    if self.touch_round[l2] != round {
                        self.touch_round[l2] = round;
                        self.touched.push(l2);
                    }
                }
            }
            for &l in &self.touched {
                open_share[self.open_at[l]] = share_of(self.rem_cap[l], self.unfixed[l]);
            }
        }
        self.stamp += 1;
        let now = self.now;
        for &r in &comp_routes {
            let nr = self.route_rate[r];
            // Every flow of the route already runs at its rate.
            if !self.route_joined[r] && self.route_applied[r] == nr {
                continue;
            }
            self.route_joined[r] = false;
            self.route_applied[r] = nr;
            for &f in &self.route_flows[r] {
                let fl = &mut self.flows[f];
                if nr != fl.rate {
                    fl.remaining = (fl.remaining - fl.rate * (now - fl.last)).max(0.0);
                    fl.last = now;
                    fl.rate = nr;
                    if nr > 0.0 {
                        let t = now + fl.remaining / nr;
                        self.seq += 1;
                        self.finishes.set(f, t, self.seq);
                    } else {
                        self.finishes.remove(f);
                    }
                }
            }
        }
        if let Some(tr) = self.trace.as_mut() {
            for &l in comp_links.iter().filter(|&&l| l < self.real_links) {
                let load = (self.links[l].cap - self.rem_cap[l]).max(0.0);
                let load = if self.links[l].nflows == 0 { 0.0 } else { load };
                if (load - self.links[l].load).abs() > 1e-9 * self.links[l].cap {
                    self.links[l].load = load;
                    tr.loads.push(LinkLoad {
                        link: l,
                        time_us: now,
                        gbps: load / 1e3,
                    });
                }
            }
        }
        self.comp_links = comp_links;
        self.open_share = open_share;
        self.comp_routes = comp_routes;
        self.stack = stack;
    }

    /// The state now, at an instant with nothing pending (`period.rs`).
    fn snapshot(&self) -> Snap {
        let now = self.now;
        // When each flow joins its links or finishes, from now.
        let mut at = vec![(f64::NAN, false); self.flows.len()];
        for e in self.heap.iter() {
            let Ev::Activate(f) = e.ev;
            at[f] = (e.t - now, false);
        }
        for &(t, _, f) in &self.finishes.heap {
            at[f] = (t - now, true);
        }
        let tbs = self
            .tbs
            .iter()
            .map(|t| TbSnap {
                pos: t.pos,
                running: t.running,
                registered: t.registered,
                flow: (t.flow != usize::MAX).then(|| {
                    let fl = &self.flows[t.flow];
                    let (at, active) = at[t.flow];
                    FlowSnap {
                        conn: fl.conn,
                        active,
                        at,
                        remaining: fl.remaining - fl.rate * (now - fl.last),
                        rate: fl.rate,
                        bytes: fl.bytes,
                    }
                }),
            })
            .collect();
        let conns = self
            .conns
            .iter()
            .map(|c| ConnSnap {
                sent: c.sent,
                consumed: c.consumed,
                arrived: c
                    .queue
                    .iter()
                    .enumerate()
                    .fold(0, |b, (i, m)| b | (u64::from(m.arrived) << i)),
            })
            .collect();
        Snap {
            now,
            tbs,
            conns,
            link_bytes: self.link_bytes.clone(),
            steps_executed: self.steps_executed,
            flows_started: self.flows_started,
        }
    }

    /// At a tile boundary of the watched threadblock: a snapshot, and a
    /// jump over every period the full tiles allow once the state has
    /// repeated with some period for [`RUNS`] periods in a row, its
    /// differences from period to period not growing faster than what a
    /// jump may ignore (`period.rs`).
    fn observe(&mut self) {
        let Some(mut w) = self.watch.take() else {
            return;
        };
        w.due = false;
        let snap = self.snapshot();
        // Full tiles after the one each running threadblock is in (a
        // tile's bytes are the full tile's only below `full`).
        let tiles_left = self
            .tbs
            .iter()
            .filter(|t| t.pos < t.total)
            .map(|t| w.full.checked_sub(t.pos / t.steps.len() as u64 + 1))
            .try_fold(u64::MAX, |m, l| l.map(|l| m.min(l)));
        let Some(tiles_left) = tiles_left else {
            // Into the shorter last tile: no period can be used any more.
            return;
        };
        let n = w.snaps.len();
        for lag in (1..=MAX_PERIOD).take_while(|&lag| RUNS * lag <= n) {
            // The last RUNS periods of `lag` snapshots, newest first.
            let chain: Vec<&Snap> = std::iter::once(&snap)
                .chain((1..=RUNS).map(|i| &w.snaps[n - i * lag]))
                .collect();
            let runs: Option<Vec<(u64, f64)>> = chain
                .windows(2)
                .map(|x| period::period(x[1], x[0], &w.steps, &w.total))
                .collect();
            let Some(runs) = runs.filter(|r| r.iter().all(|x| x.0 == r[0].0)) else {
                continue;
            };
            let p = runs[0].0;
            let q = tiles_left / p;
            if q == 0 {
                // Past this point fewer than p full tiles are left.
                return;
            }
            if period::stable(&runs, q, snap.now) {
                let a = chain[1].clone();
                self.jump(&a, &snap, p, q);
                return;
            }
        }
        if w.snaps.len() == RUNS * MAX_PERIOD {
            w.snaps.pop_front();
        }
        w.snaps.push_back(snap);
        self.watch = Some(w);
    }

    /// Continue from q periods after `b`, each period the change from `a`
    /// to `b` (p tiles of every threadblock that has not finished).
    fn jump(&mut self, a: &Snap, b: &Snap, p: u64, q: u64) {
        let dt = (b.now - a.now) * q as f64;
        for t in self.tbs.iter_mut().filter(|t| t.pos < t.total) {
            t.pos += q * p * t.steps.len() as u64;
            t.start += dt;
        }
        for (c, conn) in self.conns.iter_mut().enumerate() {
            let d = q * (b.conns[c].sent - a.conns[c].sent);
            conn.sent += d;
            conn.consumed += d;
        }
        for t in &self.tbs {
            if t.flow != usize::MAX {
                let fl = &mut self.flows[t.flow];
                fl.last += dt;
                fl.seq += q * (b.conns[fl.conn].sent - a.conns[fl.conn].sent);
            }
        }
        let mut events = std::mem::take(&mut self.heap).into_vec();
        for e in events.iter_mut() {
            e.t += dt;
        }
        self.heap = BinaryHeap::from(events);
        self.finishes.shift(dt);
        for (l, x) in self.link_bytes.iter_mut().enumerate() {
            *x += q as f64 * (b.link_bytes[l] - a.link_bytes[l]);
        }
        self.steps_executed += q * (b.steps_executed - a.steps_executed);
        self.flows_started += q * (b.flows_started - a.flows_started);
        // What finished within the period finishes within every later one.
        for e in self
            .rank_end
            .iter_mut()
            .chain(std::iter::once(&mut self.end))
        {
            if *e > a.now {
                *e += dt;
            }
        }
        self.now += dt;
        self.tiles_skipped = q * p;
    }
}

#[cfg(test)]
mod tests {
    use super::least;

    /// `least` finds what a scan in order with `<` finds: the first of
    /// the least values, wherever it sits among the lanes and the
    /// remainder; ∞ everywhere is none.
    #[test]
    fn least_is_the_first_least_share() {
        let scan = |xs: &[f64]| {
            let mut best: Option<(f64, usize)> = None;
            for (i, &x) in xs.iter().enumerate() {
                if x < f64::INFINITY && best.is_none_or(|(b, _)| x < b) {
                    best = Some((x, i));
                }
            }
            best
        };
        let inf = f64::INFINITY;
        let cases: Vec<Vec<f64>> = vec![
            vec![],
            vec![inf; 7],
            vec![3.0],
            vec![2.0, 1.0, 1.0, 4.0, 1.0],
            vec![5.0, 4.0, 3.0, 2.0, 1.0, 1.0, 0.5, 0.5, 9.0],
            vec![inf, inf, inf, inf, inf, 0.25],
            vec![0.0, -0.0, 0.0, 1.0],
            vec![7.0, 7.0, 7.0, 7.0, 7.0, 7.0, 7.0, 7.0],
        ];
        for xs in cases {
            let got = least(&xs);
            let want = scan(&xs);
            assert_eq!(got.map(|g| g.1), want.map(|w| w.1), "{xs:?}");
            assert_eq!(
                got.map(|g| g.0.to_bits()),
                want.map(|w| w.0.to_bits()),
                "{xs:?}"
            );
        }
    }
}

#[cfg(test)]
mod filling_tests {
    use super::{prepare, Components, Filling};
    use crate::compile::{compile, CompileOptions};
    use crate::front::generate::{generate, GenParams};
    use crate::sim::SimOptions;
    use crate::synth::Algo;

    /// The components of the links that routes join: links no route
    /// crosses belong to none, and each route to its links' component.
    #[test]
    fn whole_components_join_the_links_routes_share() {
        let routes = vec![vec![0, 1], vec![1, 2], vec![4], vec![5, 6], vec![6, 4]];
        let c = Components::new(8, &routes);
        assert_eq!(c.of[3], Components::NONE);
        assert_eq!(c.of[7], Components::NONE);
        assert_eq!(c.links.len(), 2);
        let (a, b) = (c.of[0], c.of[4]);
        assert_eq!(c.links[a], vec![0, 1, 2]);
        assert_eq!(c.links[b], vec![4, 5, 6]);
        assert_eq!(c.routes[a], vec![0, 1]);
        assert_eq!(c.routes[b], vec![2, 3, 4]);
    }

    /// Filling whole components, only the active ones, or as the engine
    /// chooses gives the same time and link bytes, bit for bit: on a
    /// PCIe and NVLink machine, a switch, two hosts and generated meshes,
    /// for ring, direct and packed trees, at sizes from one tile to many.
    #[test]
    fn every_filling_gives_the_same_rates() {
        let two_hosts = GenParams {
            hosts: Some(2),
            ..GenParams::default()
        };
        let inputs = [
            ("dgx1-v100", GenParams::default(), Algo::Pack),
            ("dgx1-v100", GenParams::default(), Algo::Ring),
            ("dgx-h100", GenParams::default(), Algo::Direct),
            ("dgx-a100", two_hosts, Algo::Hier),
            (
                "random",
                GenParams {
                    seed: Some(49),
                    ..GenParams::default()
                },
                Algo::Pack,
            ),
            (
                "random",
                GenParams {
                    seed: Some(5),
                    ..GenParams::default()
                },
                Algo::Pack,
            ),
        ];
        for (name, params, algo) in inputs {
            let topo = generate(name, &params).unwrap();
            let c = compile(&topo, &CompileOptions::algo(algo, None)).unwrap();
            let p = prepare(&c.program, &topo, &SimOptions::default()).unwrap();
            for size in [1u64 << 20, 64 << 20, 1 << 30] {
                let runs: Vec<_> = [Filling::Chosen, Filling::Active, Filling::Whole]
                    .into_iter()
                    .map(|f| p.run_filling(size, f).unwrap())
                    .collect();
                for r in &runs[1..] {
                    assert_eq!(
                        r.time_us.to_bits(),
                        runs[0].time_us.to_bits(),
                        "{name} {algo:?} at {size}"
                    );
                    assert_eq!(r.link_bytes, runs[0].link_bytes, "{name} {algo:?}");
                }
            }
        }
    }
}
