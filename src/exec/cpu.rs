//! The CPU engine: all ranks in one process, every threadblock a task on a
//! pool of worker threads sized to the cores.
//!
//! - Every connection `(chan, from -> to)` is a single-producer
//!   single-consumer ring of `fifo_slots` slots of one tile each; the k-th
//!   send lands in slot k mod slots and pairs with the k-th receive. A
//!   zero-copy send puts the address of its data in the slot instead of
//!   the data (`plan::zero_copy_sends`).
//! - Every threadblock has one progress flag `(work, tile, step)`, published
//!   after steps with `hasdep="1"`; `depid`/`deps` waits read it.
//! - A threadblock is a resumable cursor (work, tile, step, call). Its
//!   worker polls it: it runs steps until one cannot start (a FIFO end not
//!   ready, a dependency or the stream-order gate not reached) and moves on
//!   to its next threadblock, as MSCCL's persistent kernel does per warp.
//!   A worker without progress spins briefly, then parks; whoever changes
//!   state another worker's threadblock waits on wakes that worker.
//! - The data path takes no locks: FIFO indices and flags are atomics with
//!   acquire/release ordering; buffers are raw memory that the (verified)
//!   schedule partitions between threadblocks.
//! - Work w+1 of a rank starts only when all its threadblocks finished work
//!   w (NCCL's per-rank stream order); ranks are not synchronised.

use super::elem::{reduce2, reduce3, reduce_chain, reduce_self, Elem, Op, CHAIN_FUSED};
use super::numa::Nodes;
use super::plan::{Plan, StepPlan, ZeroCopy};
use super::{ExecError, StallReport, TbWait};
use crate::ir::spec::Alias;
use crate::ir::{Buf, StepKind};
use std::cell::UnsafeCell;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

#[repr(align(128))]
#[derive(Default)]
struct Padded<T>(T);

/// Engine parameters for one message size.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Geometry {
    /// Elements per chunk.
    pub chunk: usize,
    /// Elements per tile.
    pub tile: usize,
    /// Adjacent chunks per call of a multi-chunk step
    /// (`plan::tile_and_merge`).
    pub merge: usize,
    pub fifo_slots: usize,
    pub inplace: bool,
    pub stall: Duration,
    /// Worker threads (at most one per threadblock is used).
    pub workers: usize,
    /// `RunOptions::inject_fault`.
    pub fault: Option<usize>,
    /// Sends hand the receiver where their data lies instead of a copy
    /// where `plan::zero_copy_sends` allows it.
    pub zero_copy: bool,
    /// Reduction chains run in one pass where their links are ready
    /// (`Shared::try_chain`).
    pub fuse_chains: bool,
}

impl Geometry {
    fn ntiles(&self) -> usize {
        self.chunk.div_ceil(self.tile).max(1)
    }
}

/// Per-rank buffers, allocated once for the largest size and reused.
pub(crate) struct Buffers<T> {
    pub input: Vec<Vec<T>>,
    pub output: Vec<Vec<T>>,
    pub scratch: Vec<Vec<T>>,
}

impl<T: Elem> Buffers<T> {
    /// Buffers for chunks of up to `chunk_max` elements. With `place`
    /// (the nodes, and each rank's node: `numa::rank_nodes`), each rank's
    /// buffers are first written by a thread on its node, so their pages
    /// lie there; else by the calling thread.
    pub fn new(
        plan: &Plan,
        chunk_max: usize,
        place: Option<(&Nodes, &[usize])>,
    ) -> Result<Self, ExecError> {
        let n = plan.nranks;
        let reserve = |len: usize| -> Result<Vec<T>, ExecError> {
            let mut v = Vec::new();
            v.try_reserve_exact(len)
                .map_err(|_| ExecError::Size(format!("cannot allocate {} elements", len)))?;
            Ok(v)
        };
        let mut b = Buffers {
            input: Vec::new(),
            output: Vec::new(),
            scratch: Vec::new(),
        };
        // (buffer, its length, its rank): reserved here, written below.
        let mut lens = Vec::with_capacity(3 * n);
        for r in 0..n {
            b.input.push(reserve(plan.bufs.i_chunks * chunk_max)?);
            b.output.push(reserve(plan.bufs.o_chunks * chunk_max)?);
            b.scratch.push(reserve(plan.s_chunks[r] * chunk_max)?);
            lens.push([
                plan.bufs.i_chunks * chunk_max,
                plan.bufs.o_chunks * chunk_max,
                plan.s_chunks[r] * chunk_max,
            ]);
        }
        let fill = |v: &mut Vec<T>, len: usize| v.resize(len, T::default());
        let Some((nodes, rank_node)) = place else {
            for (r, l) in lens.iter().enumerate() {
                fill(&mut b.input[r], l[0]);
                fill(&mut b.output[r], l[1]);
                fill(&mut b.scratch[r], l[2]);
            }
            return Ok(b);
        };
        // Per node, its ranks' buffers, written by a thread pinned there.
        let mut per_node: Vec<Vec<(&mut Vec<T>, usize)>> =
            (0..nodes.cpus.len()).map(|_| Vec::new()).collect();
        let bufs = b
            .input
            .iter_mut()
            .zip(b.output.iter_mut())
            .zip(b.scratch.iter_mut())
            .enumerate();
        for (r, ((i, o), sc)) in bufs {
            let k = rank_node
                .get(r)
                .copied()
                .unwrap_or(0)
                .min(per_node.len() - 1);
            per_node[k].extend([(i, lens[r][0]), (o, lens[r][1]), (sc, lens[r][2])]);
        }
        thread::scope(|s| {
            for (k, work) in per_node.into_iter().enumerate() {
                // A thread that cannot start leaves its buffers to the
                // calling thread (below).
                let _ = thread::Builder::new()
                    .name(format!("rscc-place{k}"))
                    .spawn_scoped(s, move || {
                        nodes.pin(k);
                        for (v, len) in work {
                            fill(v, len);
                        }
                    });
            }
        });
        for (r, l) in lens.iter().enumerate() {
            for (v, &len) in [&mut b.input[r], &mut b.output[r], &mut b.scratch[r]]
                .into_iter()
                .zip(l)
            {
                if v.len() < len {
                    fill(v, len);
                }
            }
        }
        Ok(b)
    }
}

#[derive(Clone, Copy)]
struct RawBuf<T> {
    ptr: *mut T,
    len: usize,
}

struct Slot<T> {
    data: UnsafeCell<Box<[T]>>,
    len: UnsafeCell<usize>,
    /// Where a zero-copy send's data lies in the sender's buffers (the
    /// receiver reads it instead of `data`), else null.
    ext: UnsafeCell<*const T>,
}

struct Fifo<T> {
    head: Padded<AtomicU64>,
    tail: Padded<AtomicU64>,
    slots: Box<[Slot<T>]>,
    producer: Option<usize>,
    consumer: Option<usize>,
}

const W_RECV: u64 = 1;
const W_SEND: u64 = 2;
const W_DEP: u64 = 3;
const W_GATE: u64 = 4;
const W_IDLE: u64 = 5;
const W_DONE: u64 = 6;
const W_DRAIN: u64 = 7;

/// A worker spins over its threadblocks this long without progress before
/// it parks.
const SPIN: Duration = Duration::from_micros(100);
/// A parked worker wakes at least this often (a lost wake-up would cost
/// this much, never a hang).
const PARK: Duration = Duration::from_millis(10);

struct TbState {
    flag: Padded<AtomicU64>,
    progress: Padded<AtomicU64>,
    /// What it waits on (W_*), and where: work<<40 | tile<<16 | step.
    wait: AtomicU64,
    pos: AtomicU64,
    end_ns: AtomicU64,
}

struct Shared<'a, T> {
    plan: &'a Plan,
    geo: Geometry,
    /// [rank][buf] base pointers for this size.
    bufs: Vec<[RawBuf<T>; 3]>,
    fifos: Vec<Fifo<T>>,
    tbs: Vec<TbState>,
    rank_done: Vec<Padded<AtomicU64>>,
    /// The worker that runs each threadblock.
    owner: Vec<usize>,
    /// Per worker: it is about to park or parked (wake it on a change).
    sleeping: Vec<Padded<AtomicBool>>,
    workers: OnceLock<Vec<Thread>>,
    /// While set, idle workers spin instead of parking (the coordinator
    /// holds the pool awake to start a phase).
    hold: AtomicBool,
    /// The first worker failure: (threadblock, message).
    failed: std::sync::Mutex<Option<(usize, String)>>,
    main: Thread,
    abort: AtomicBool,
    go: AtomicU64,
    phase_done: AtomicU64,
    /// Steps run as later links of a chain (`try_chain`), all phases.
    chained: AtomicU64,
    base: Instant,
    step_stride: u64,
    /// Per threadblock and step: its send is zero-copy
    /// (`plan::zero_copy_sends`).
    zero_copy: Vec<Vec<bool>>,
    /// Per threadblock: it hands over data that its rank's next work
    /// rewrites (`ZeroCopy::Ordered`), so it ends a work only when its
    /// receiver has taken every message.
    drain: Vec<bool>,
}

// SAFETY: the raw buffer pointers and FIFO slots are shared between threads
// by design; FIFO slots are handed over with acquire/release on head/tail,
// and buffer ranges are partitioned by the schedule (checked by the
// verifier; bounds are checked by `plan::build` for any input).
unsafe impl<T: Send> Sync for Shared<'_, T> {}
unsafe impl<T: Send> Send for Shared<'_, T> {}

/// Where one threadblock is in its program. Owned by its worker; the
/// shared state (`TbState`, FIFOs) is what other workers see.
#[derive(Default)]
struct Cursor {
    tb: usize,
    /// The worker running it.
    worker: usize,
    phase: usize,
    done_in_phase: u64,
    work: u64,
    tile: usize,
    pos: usize,
    /// Chunks of the current step already moved (multi-chunk steps make
    /// several calls).
    g: usize,
    /// This work passed its stream-order gate.
    gated: bool,
    /// Every step of this work is done; it waits for its receiver to
    /// take what it handed over (`Shared::drain`).
    draining: bool,
    finished: bool,
    /// The wait last written to `TbState` (stores only on a change).
    shown: (u64, u64),
}

/// A FIFO end that is ready: the slot, its length (receive) and sequence.
struct Ready<'f, T> {
    fifo: &'f Fifo<T>,
    ptr: *mut T,
    len: usize,
    seq: u64,
}

impl<T: Elem> Shared<'_, T> {
    /// Wake the worker of threadblock `tb` if it is parking; `from` is the
    /// caller's worker (awake by definition).
    #[inline]
    fn notify(&self, from: usize, tb: usize) {
        let w = self.owner[tb];
        if w == from {
            return;
        }
        // Pairs with the fence in `Shared::worker` before it re-polls and
        // parks: either it sees our store, or we see its flag.
        fence(Ordering::SeqCst);
        if self.sleeping[w].0.load(Ordering::Relaxed) {
            if let Some(t) = self.workers.get().and_then(|v| v.get(w)) {
                t.unpark();
            }
        }
    }

    fn wake_all(&self) {
        fence(Ordering::SeqCst);
        for t in self.workers.get().into_iter().flatten() {
            t.unpark();
        }
    }

    fn key(&self, work: u64, tile: u64, step: usize) -> u64 {
        (work * self.geo.ntiles() as u64 + tile) * self.step_stride + step as u64 + 1
    }

    fn range(&self, rank: usize, b: Buf, chunk_idx: usize, t0: usize, len: usize) -> *mut T {
        let rb = self.bufs[rank][b as usize];
        let off = chunk_idx * self.geo.chunk + t0;
        debug_assert!(off + len <= rb.len);
        // SAFETY: plan::build checked chunk_idx < chunks(b) and the buffers
        // hold chunks(b) * chunk elements, and t0 + len <= chunk.
        unsafe { rb.ptr.add(off) }
    }

    /// Record that `c` waits on `what` at `pos` (for the watchdog).
    #[inline]
    fn blocked(&self, c: &mut Cursor, what: u64, pos: u64) {
        if c.shown != (what, pos) {
            c.shown = (what, pos);
            let st = &self.tbs[c.tb];
            st.pos.store(pos, Ordering::Relaxed);
            st.wait.store(what, Ordering::Relaxed);
        }
    }

    /// The threadblock's last work of a phase is done.
    fn end_phase(&self, tb: usize) {
        let st = &self.tbs[tb];
        st.end_ns
            .store(self.base.elapsed().as_nanos() as u64, Ordering::Relaxed);
        st.progress.0.fetch_add(1, Ordering::Relaxed);
        self.phase_done.fetch_add(1, Ordering::AcqRel);
        self.main.unpark();
    }

    /// Advance threadblock `c` as far as it can go without waiting; `curs`
    /// holds the worker's other threadblocks (`local`: threadblock → index;
    /// `c`'s own entry is a placeholder while it runs), whose reductions
    /// may join `c`'s (`try_chain`). Returns (made progress, finished every
    /// phase).
    fn poll<O: Op<T>>(
        &self,
        c: &mut Cursor,
        curs: &mut [Cursor],
        local: &[usize],
        phases: &[u64],
        tmp: &mut Vec<T>,
    ) -> (bool, bool) {
        let tb = &self.plan.tbs[c.tb];
        let r = tb.rank;
        let ntbs_rank = self.plan.rank_tbs[r].len() as u64;
        let geo = self.geo;
        let ntiles = geo.ntiles();
        let mut progressed = false;
        loop {
            if c.phase >= phases.len() {
                self.blocked(c, W_DONE, c.work << 40);
                return (progressed, true);
            }
            if !c.gated {
                if self.go.load(Ordering::Acquire) < c.phase as u64 + 1 {
                    self.blocked(c, W_IDLE, c.work << 40);
                    return (progressed, false);
                }
                if c.done_in_phase == phases[c.phase] {
                    self.end_phase(c.tb);
                    c.phase += 1;
                    c.done_in_phase = 0;
                    progressed = true;
                    continue;
                }
                // NCCL stream order: this rank's previous work is complete.
                let need = c.work * ntbs_rank;
                if self.rank_done[r].0.load(Ordering::Acquire) < need {
                    self.blocked(c, W_GATE, c.work << 40);
                    return (progressed, false);
                }
                c.gated = true;
            }
            if let Some(step) = tb.steps.get(c.pos).filter(|_| !c.draining) {
                let where_ =
                    (c.work << 40) | ((c.tile as u64 & 0xff_ffff) << 16) | (c.pos as u64 & 0xffff);
                if c.g == 0 {
                    if let Some((d, ds)) = step.dep {
                        let want = self.key(c.work, c.tile as u64, ds);
                        if self.tbs[d].flag.0.load(Ordering::Acquire) < want {
                            self.blocked(c, W_DEP, where_);
                            return (progressed, false);
                        }
                    }
                }
                // A step with cnt = k is ceil(k / merge) primitive calls
                // per tile, each moving up to `merge` adjacent chunks as
                // one range (plan::tile_and_merge); merge >= 2 only when
                // there is a single tile.
                if geo.fault == Some(c.tb) {
                    panic!("injected fault at step {}", c.pos);
                }
                if c.g < step.cnt {
                    let t0 = c.tile * geo.tile;
                    let len = geo.tile.min(geo.chunk - t0);
                    let m = geo.merge.min(step.cnt - c.g);
                    let n = if m > 1 { m * geo.chunk } else { len };
                    let src = self.range(r, step.src.0, step.src.1 + c.g, t0, n);
                    let dst = self.range(r, step.dst.0, step.dst.1 + c.g, t0, n);
                    let zc = self.zero_copy[c.tb][c.pos];
                    let chained = geo.fuse_chains
                        && m == 1
                        && self.try_chain::<O>(c, step, src, dst, n, curs, local);
                    let done = if chained {
                        Ok(())
                    } else {
                        self.try_step::<O>(c, step.kind, zc, src, dst, n, tmp)
                    };
                    if let Err(what) = done {
                        self.blocked(c, what, where_);
                        return (progressed, false);
                    }
                    progressed = true;
                    c.g += m;
                    if c.g < step.cnt {
                        continue;
                    }
                }
                c.g = 0;
                let st = &self.tbs[c.tb];
                if step.publish {
                    st.flag
                        .0
                        .store(self.key(c.work, c.tile as u64, c.pos), Ordering::Release);
                    for &w in &tb.waiters {
                        self.notify(c.worker, w);
                    }
                }
                st.progress.0.fetch_add(1, Ordering::Relaxed);
                progressed = true;
                c.pos += 1;
                if c.pos < tb.steps.len() {
                    continue;
                }
                c.pos = 0;
                c.tile += 1;
                if c.tile < ntiles {
                    continue;
                }
                c.tile = 0;
            }
            // Every step is done on every tile. Data handed over zero-copy
            // that the rank's next work rewrites must be taken first.
            c.draining = true;
            if self.drain[c.tb] {
                if let Some(f) = tb.send_fifo.and_then(|f| self.fifos.get(f)) {
                    if f.head.0.load(Ordering::Acquire) < f.tail.0.load(Ordering::Relaxed) {
                        self.blocked(c, W_DRAIN, c.work << 40);
                        return (progressed, false);
                    }
                }
            }
            c.draining = false;
            let rd = &self.rank_done[r].0;
            if rd.fetch_add(1, Ordering::AcqRel) + 1 == (c.work + 1) * ntbs_rank {
                for &t in &self.plan.rank_tbs[r] {
                    self.notify(c.worker, t);
                }
            }
            c.work += 1;
            c.done_in_phase += 1;
            c.gated = false;
            progressed = true;
        }
    }

    /// The receive FIFO's oldest full slot, if any.
    fn recv_ready(&self, tb: usize) -> Option<Ready<'_, T>> {
        let f = self.fifos.get(self.plan.tbs[tb].recv_fifo?)?;
        let h = f.head.0.load(Ordering::Relaxed);
        if f.tail.0.load(Ordering::Acquire) <= h {
            return None;
        }
        let slot = &f.slots[(h % f.slots.len() as u64) as usize];
        // SAFETY: the producer published this slot (tail > h, acquire) and
        // will not touch it until we advance head. Data handed over
        // zero-copy stays as sent until we advance head: no later step of
        // the sender's work writes it, and its next work does not start
        // before that (plan::zero_copy_sends, `Shared::drain`).
        let (p, n) = unsafe {
            let ext = *slot.ext.get();
            let p = if ext.is_null() {
                (*slot.data.get()).as_mut_ptr()
            } else {
                ext as *mut T
            };
            (p, *slot.len.get())
        };
        Some(Ready {
            fifo: f,
            ptr: p,
            len: n,
            seq: h,
        })
    }

    fn recv_done(&self, c: &Cursor, r: Ready<'_, T>) {
        r.fifo.head.0.store(r.seq + 1, Ordering::Release);
        if let Some(p) = r.fifo.producer {
            self.notify(c.worker, p);
        }
    }

    /// The send FIFO's next free slot, if any.
    fn send_ready(&self, tb: usize) -> Option<Ready<'_, T>> {
        let f = self.fifos.get(self.plan.tbs[tb].send_fifo?)?;
        let t = f.tail.0.load(Ordering::Relaxed);
        let cap = f.slots.len() as u64;
        if t - f.head.0.load(Ordering::Acquire) >= cap {
            return None;
        }
        let slot = &f.slots[(t % cap) as usize];
        // SAFETY: the consumer released this slot (head > t - cap, acquire).
        let p = unsafe { (*slot.data.get()).as_mut_ptr() };
        Some(Ready {
            fifo: f,
            ptr: p,
            len: 0,
            seq: t,
        })
    }

    /// Publish the send FIFO's slot: `len` elements in the slot, or at
    /// `ext` when not null (a zero-copy send).
    fn send_done(&self, c: &Cursor, s: Ready<'_, T>, len: usize, ext: *const T) {
        let slot = &s.fifo.slots[(s.seq % s.fifo.slots.len() as u64) as usize];
        // SAFETY: we own the slot until tail is advanced.
        unsafe {
            *slot.len.get() = len;
            *slot.ext.get() = ext;
        }
        s.fifo.tail.0.store(s.seq + 1, Ordering::Release);
        if let Some(k) = s.fifo.consumer {
            self.notify(c.worker, k);
        }
    }

    /// One primitive call, if both FIFO ends it needs are ready; else what
    /// it waits for (W_RECV before W_SEND). A receive-then-send step thus
    /// leaves its incoming slot full while the outgoing one is not free,
    /// as the GPU primitive holds it. A zero-copy send (`zc`) hands over
    /// where its data lies: an `s` its `src`, an `rcs`/`rrcs` its `dst`.
    #[allow(clippy::too_many_arguments)]
    fn try_step<O: Op<T>>(
        &self,
        c: &Cursor,
        kind: StepKind,
        zc: bool,
        src: *mut T,
        dst: *mut T,
        len: usize,
        tmp: &mut Vec<T>,
    ) -> Result<(), u64> {
        use std::slice::{from_raw_parts, from_raw_parts_mut};
        let me = c.tb;
        let inp = if kind.recvs() {
            Some(self.recv_ready(me).ok_or(W_RECV)?)
        } else {
            None
        };
        let out = if kind.sends() {
            Some(self.send_ready(me).ok_or(W_SEND)?)
        } else {
            None
        };
        let m = inp.as_ref().map_or(len, |i| len.min(i.len));
        let mut scratch = |n: usize| -> *mut T {
            if tmp.len() < n {
                tmp.resize(n, T::default());
            }
            tmp.as_mut_ptr()
        };
        // SAFETY (whole block): src/dst point at `len` in-bounds elements
        // (plan::build); slots hold `tile >= len` elements; slices over the
        // same memory are never alive at the same time (aliasing cases are
        // handled explicitly below).
        unsafe {
            let i = inp.as_ref().map_or(std::ptr::null_mut(), |r| r.ptr);
            let o = out.as_ref().map_or(std::ptr::null_mut(), |r| r.ptr);
            // A zero-copy send writes no slot: an `s` moves nothing, an
            // `rcs` is a receive, an `rrcs` an `rrc` (the receiver reads
            // their destination).
            let op = match (zc, kind) {
                (true, StepKind::Send) => StepKind::Nop,
                (true, StepKind::RecvCopySend) => StepKind::Recv,
                (true, StepKind::RecvReduceCopySend) => StepKind::RecvReduceCopy,
                (_, k) => k,
            };
            match op {
                StepKind::Nop => {}
                StepKind::Send => std::ptr::copy_nonoverlapping(src, o, m),
                StepKind::Recv => std::ptr::copy_nonoverlapping(i, dst, m),
                StepKind::RecvCopySend => {
                    std::ptr::copy_nonoverlapping(i, dst, m);
                    std::ptr::copy_nonoverlapping(i, o, m);
                }
                StepKind::RecvReduceSend => reduce3::<T, O>(
                    from_raw_parts_mut(o, m),
                    from_raw_parts(i, m),
                    from_raw_parts(src, m),
                ),
                StepKind::RecvReduceCopySend => {
                    reduce3::<T, O>(
                        from_raw_parts_mut(o, m),
                        from_raw_parts(i, m),
                        from_raw_parts(src, m),
                    );
                    std::ptr::copy_nonoverlapping(o, dst, m);
                }
                StepKind::RecvReduceCopy => {
                    if src == dst {
                        reduce2::<T, O>(from_raw_parts_mut(dst, m), from_raw_parts(i, m));
                    } else if overlap(src, dst, m) {
                        let t = scratch(m);
                        std::ptr::copy_nonoverlapping(src, t, m);
                        reduce3::<T, O>(
                            from_raw_parts_mut(dst, m),
                            from_raw_parts(i, m),
                            from_raw_parts(t, m),
                        );
                    } else {
                        reduce3::<T, O>(
                            from_raw_parts_mut(dst, m),
                            from_raw_parts(i, m),
                            from_raw_parts(src, m),
                        );
                    }
                }
                StepKind::Copy => {
                    if src != dst {
                        std::ptr::copy(src, dst, len);
                    }
                }
                StepKind::Reduce => {
                    if src == dst {
                        reduce_self::<T, O>(from_raw_parts_mut(dst, len));
                    } else if overlap(src, dst, len) {
                        let t = scratch(len);
                        std::ptr::copy_nonoverlapping(src, t, len);
                        reduce2::<T, O>(from_raw_parts_mut(dst, len), from_raw_parts(t, len));
                    } else {
                        reduce2::<T, O>(from_raw_parts_mut(dst, len), from_raw_parts(src, len));
                    }
                }
            }
        }
        if let Some(o) = out {
            let ext = match (zc, kind) {
                (false, _) => std::ptr::null(),
                (true, StepKind::Send) => src as *const T,
                (true, _) => dst as *const T,
            };
            self.send_done(c, o, m, ext);
        }
        if let Some(i) = inp {
            self.recv_done(c, i);
        }
        Ok(())
    }

    /// `c`'s `rrc` (one chunk, published) together with the `rrc`s that
    /// wait on exactly it, then on each other, into the same range — the
    /// links of a reduction chain, as a direct exchange has one per peer
    /// (MSCCL gives a threadblock one receive peer) — in one pass over the
    /// range ([`reduce_chain`]): up to [`CHAIN_FUSED`] operands read at
    /// once and the range written once, where each link alone reads and
    /// writes it. A link joins only if this worker runs it, it is at the
    /// same work and tile, and its message is in; then its step is done
    /// here, and published, as if it had run right after `c`'s. That is
    /// the order its dependency allows anyway, and nothing can tell the
    /// two apart: any other reader or writer of the range races with the
    /// link's write unless ordered after it (a schedule the verifier
    /// rejects). False, with nothing done: its own message or the first
    /// link's is not in (or `src` partly overlaps `dst`); run the step
    /// alone.
    #[allow(clippy::too_many_arguments)]
    fn try_chain<O: Op<T>>(
        &self,
        c: &Cursor,
        step: &StepPlan,
        src: *mut T,
        dst: *mut T,
        len: usize,
        curs: &mut [Cursor],
        local: &[usize],
    ) -> bool {
        if step.kind != StepKind::RecvReduceCopy || step.cnt != 1 || !step.publish {
            return false;
        }
        let base = if src == dst {
            None
        } else if overlap(src, dst, len) {
            return false;
        } else {
            Some(src as *const T)
        };
        // Its own message first: a step that waits for it is polled
        // often, and reports the wait as `try_step` does.
        let Some(inp) = self.recv_ready(c.tb).filter(|r| r.len == len) else {
            return false;
        };
        // The links, with their messages: only a link's own threadblock,
        // run by this worker, takes its message.
        let mut links = [usize::MAX; CHAIN_FUSED - 1];
        let mut ins: [Option<Ready<'_, T>>; CHAIN_FUSED - 1] = [const { None }; CHAIN_FUSED - 1];
        let mut nlinks = 0;
        let (mut tb, mut pos, mut publish) = (c.tb, c.pos, true);
        while nlinks < links.len() && publish {
            let next = self.plan.tbs[tb].waiters.iter().find_map(|&w| {
                let k = *local.get(w)?;
                let cw = curs.get(k)?;
                // (The placeholder for `c` is never gated.)
                let at = cw.gated
                    && !cw.draining
                    && !cw.finished
                    && cw.g == 0
                    && (cw.phase, cw.work, cw.tile) == (c.phase, c.work, c.tile)
                    && self.geo.fault != Some(w);
                let joins = at
                    && self.plan.tbs[w].steps.get(cw.pos).is_some_and(|sw| {
                        sw.kind == StepKind::RecvReduceCopy
                            && sw.cnt == 1
                            && sw.dep == Some((tb, pos))
                            && sw.src == step.dst
                            && sw.dst == step.dst
                    });
                if !joins {
                    return None;
                }
                let r = self.recv_ready(w).filter(|r| r.len == len)?;
                Some((w, k, r))
            });
            let Some((w, k, r)) = next else { break };
            links[nlinks] = k;
            ins[nlinks] = Some(r);
            nlinks += 1;
            (tb, pos) = (w, curs[k].pos);
            publish = self.plan.tbs[w].steps[pos].publish;
        }
        if nlinks == 0 {
            return false;
        }
        // SAFETY: `dst` and `src` point at `len` in-bounds elements
        // (plan::build) and do not overlap (checked above); each message
        // holds `len` elements, in a slot or in the sender's buffer, which
        // stays as sent until its head moves (`recv_ready`).
        unsafe {
            use std::slice::{from_raw_parts, from_raw_parts_mut};
            let mut xs: [&[T]; CHAIN_FUSED] = [&[]; CHAIN_FUSED];
            xs[0] = from_raw_parts(inp.ptr, len);
            for (x, r) in xs[1..].iter_mut().zip(ins.iter().flatten()) {
                *x = from_raw_parts(r.ptr, len);
            }
            reduce_chain::<T, O>(
                from_raw_parts_mut(dst, len),
                base.map(|b| from_raw_parts(b, len)),
                &xs[..=nlinks],
            );
        }
        self.recv_done(c, inp);
        self.chained.fetch_add(nlinks as u64, Ordering::Relaxed);
        let ntiles = self.geo.ntiles();
        for (&k, r) in links[..nlinks].iter().zip(ins.into_iter().flatten()) {
            self.recv_done(c, r);
            // The link's step is done: what its poll does after a step.
            let cw = &mut curs[k];
            let tbp = &self.plan.tbs[cw.tb];
            let st = &self.tbs[cw.tb];
            if tbp.steps[cw.pos].publish {
                st.flag
                    .0
                    .store(self.key(cw.work, cw.tile as u64, cw.pos), Ordering::Release);
                for &w in &tbp.waiters {
                    self.notify(c.worker, w);
                }
            }
            st.progress.0.fetch_add(1, Ordering::Relaxed);
            cw.pos += 1;
            if cw.pos == tbp.steps.len() {
                cw.pos = 0;
                cw.tile += 1;
                if cw.tile == ntiles {
                    // Every step of this work is done: its next poll ends
                    // the work (`poll`'s last block).
                    cw.tile = 0;
                    cw.draining = true;
                }
            }
        }
        true
    }

    /// One pass over the worker's threadblocks, each poll followed by
    /// polls of the waiters it released that this worker owns (`local`:
    /// threadblock → index in `curs`; `hot`: scratch stack): (progress,
    /// all finished).
    fn pass<O: Op<T>>(
        &self,
        curs: &mut [Cursor],
        local: &[usize],
        hot: &mut Vec<usize>,
        phases: &[u64],
        tmp: &mut Vec<T>,
        current: &std::cell::Cell<usize>,
    ) -> (bool, bool) {
        let (mut progressed, mut all) = (false, true);
        for i in 0..curs.len() {
            if curs[i].finished {
                continue;
            }
            hot.push(i);
            while let Some(j) = hot.pop() {
                if curs[j].finished {
                    continue;
                }
                let mut c = std::mem::take(&mut curs[j]);
                current.set(c.tb);
                let (p, done) = self.poll::<O>(&mut c, curs, local, phases, tmp);
                progressed |= p;
                c.finished = done;
                curs[j] = c;
                let c = &curs[j];
                // What it published is what its waiters on this worker
                // read next: run them now, while the tiles are in cache.
                if p {
                    for &w in self.plan.tbs[c.tb].waiters.iter().rev() {
                        let k = local[w];
                        if k != usize::MAX && k != j && !hot.contains(&k) {
                            hot.push(k);
                        }
                    }
                }
            }
            all &= curs[i].finished;
        }
        (progressed, all)
    }

    /// A worker: polls its threadblocks round-robin until all finished
    /// every phase (or the run is aborted). Without progress it spins for
    /// `SPIN`, then announces it sleeps, polls once more and parks; every
    /// state change that can unblock one of its threadblocks wakes it.
    fn worker<O: Op<T>>(&self, w: usize, mine: &[usize], phases: &[u64]) {
        // A panic (an executor bug, or an injected fault) stops the whole
        // run with the threadblock it happened in, instead of leaving the
        // other workers and the coordinator waiting for the watchdog.
        let current = std::cell::Cell::new(usize::MAX);
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.worker_loop::<O>(w, mine, phases, &current)
        }));
        if let Err(p) = run {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a worker panicked".into());
            if let Ok(mut f) = self.failed.lock() {
                f.get_or_insert((current.get(), msg));
            }
            self.abort.store(true, Ordering::SeqCst);
            self.wake_all();
            self.main.unpark();
        }
    }

    fn worker_loop<O: Op<T>>(
        &self,
        w: usize,
        mine: &[usize],
        phases: &[u64],
        current: &std::cell::Cell<usize>,
    ) {
        let mut curs: Vec<Cursor> = mine
            .iter()
            .map(|&tb| Cursor {
                tb,
                worker: w,
                phase: 0,
                done_in_phase: 0,
                work: 0,
                tile: 0,
                pos: 0,
                g: 0,
                gated: false,
                draining: false,
                finished: false,
                shown: (W_IDLE, 0),
            })
            .collect();
        let mut local = vec![usize::MAX; self.plan.tbs.len()];
        for (i, c) in curs.iter().enumerate() {
            local[c.tb] = i;
        }
        let mut hot = Vec::new();
        let mut tmp: Vec<T> = Vec::new();
        let mut idle_since: Option<Instant> = None;
        let mut passes = 0u32;
        while !self.abort.load(Ordering::Relaxed) {
            let (progressed, all) =
                self.pass::<O>(&mut curs, &local, &mut hot, phases, &mut tmp, current);
            if all {
                return;
            }
            if progressed {
                idle_since = None;
                continue;
            }
            std::hint::spin_loop();
            passes = passes.wrapping_add(1);
            if !passes.is_multiple_of(16) {
                continue;
            }
            let since = *idle_since.get_or_insert_with(Instant::now);
            if since.elapsed() < SPIN || self.hold.load(Ordering::Relaxed) {
                continue;
            }
            self.sleeping[w].0.store(true, Ordering::Relaxed);
            fence(Ordering::SeqCst);
            let (progressed, all) =
                self.pass::<O>(&mut curs, &local, &mut hot, phases, &mut tmp, current);
            if all {
                return;
            }
            if !progressed {
                thread::park_timeout(PARK);
            }
            self.sleeping[w].0.store(false, Ordering::Relaxed);
            idle_since = None;
        }
    }
}

/// Bytes of memory traffic per call, (N+1)·S, that make one more worker
/// pay: below it a second core costs more in cross-core hand-offs (cache
/// lines of every FIFO and flag moving between cores) than it adds. On the
/// 2-core development machine (docs/executor.md "How many workers", with its command) one
/// worker runs 4 KiB per rank at N = 2 in 0.4 µs and two in 3.1 µs, while
/// from 256 KiB per rank at N = 8 two workers are about twice as fast.
pub(crate) const BYTES_PER_WORKER: usize = 256 << 10;

/// Workers for a call that touches `bytes` of memory at least: one per
/// `BYTES_PER_WORKER`, between 1 and `cores`.
pub(crate) fn auto_workers(cores: usize, bytes: usize) -> usize {
    (bytes / BYTES_PER_WORKER).clamp(1, cores.max(1))
}

/// Threadblocks in the order a walk along FIFOs visits them, each group
/// of threadblocks that wait on one another (a dependency component: a
/// reduction chain, a rank's receive and send halves) visited whole.
/// Breadth first over the undirected graph of connections between the
/// groups (a threadblock's producer and consumer are its neighbours),
/// starting from each unvisited threadblock in plan order (rank by rank,
/// channel by channel). A ring comes out as arcs of neighbours, every
/// channel of a multi-ring and every sender/receiver pair of a direct
/// exchange as one contiguous run, and a rank's reduction chain as one run,
/// so cutting the order into contiguous pieces ([`partition`]) keeps a
/// FIFO's two ends, and the threadblocks that read what another just
/// wrote, on one worker wherever the schedule allows it.
fn placement_order(plan: &Plan) -> Vec<usize> {
    let n = plan.tbs.len();
    // Dependency edges, both ways.
    let mut dep_nb: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (t, tb) in plan.tbs.iter().enumerate() {
        for &w in tb.waiters.iter().filter(|&&w| w < n && w != t) {
            dep_nb[t].push(w);
            dep_nb[w].push(t);
        }
    }
    let mut seen = vec![false; n];
    let mut order = Vec::with_capacity(n);
    let mut queue = std::collections::VecDeque::new();
    let mut group = Vec::new();
    // Marks `t`'s whole dependency component seen and queues it, members in
    // the order a walk over dependencies from `t` meets them.
    let mut visit =
        |t: usize, seen: &mut Vec<bool>, queue: &mut std::collections::VecDeque<usize>| {
            if seen[t] {
                return;
            }
            seen[t] = true;
            group.clear();
            group.push(t);
            let mut i = 0;
            while i < group.len() {
                let u = group[i];
                i += 1;
                for &v in &dep_nb[u] {
                    if !seen[v] {
                        seen[v] = true;
                        group.push(v);
                    }
                }
            }
            queue.extend(group.iter().copied());
        };
    for start in 0..n {
        visit(start, &mut seen, &mut queue);
        while let Some(t) = queue.pop_front() {
            order.push(t);
            let tb = &plan.tbs[t];
            let producer = tb.recv_fifo.and_then(|f| plan.fifos.get(f)?.producer);
            let consumer = tb.send_fifo.and_then(|f| plan.fifos.get(f)?.consumer);
            for nb in [consumer, producer].into_iter().flatten() {
                if nb < n {
                    visit(nb, &mut seen, &mut queue);
                }
            }
        }
    }
    order
}

/// Each threadblock's weight: the chunks its steps move.
pub(crate) fn tb_weights(plan: &Plan) -> Vec<u64> {
    plan.tbs
        .iter()
        .map(|tb| {
            tb.steps
                .iter()
                .map(|s| s.cnt.max(1) as u64)
                .sum::<u64>()
                .max(1)
        })
        .collect()
}

/// The worker of each threadblock in a pool of `nworkers` (at most one
/// per threadblock): [`placement_order`] cut by [`partition`].
pub(crate) fn tb_workers(plan: &Plan, nworkers: usize) -> Vec<usize> {
    let weights = tb_weights(plan);
    let order = placement_order(plan);
    let cut = partition(
        &order.iter().map(|&t| weights[t]).collect::<Vec<_>>(),
        nworkers.clamp(1, plan.tbs.len().max(1)),
    );
    let mut owner = vec![0; plan.tbs.len()];
    for (&t, &w) in order.iter().zip(&cut) {
        owner[t] = w;
    }
    owner
}

/// Split threadblocks (in [`placement_order`]) into `w` contiguous runs
/// of about equal weight, so that a rank's threadblocks and its neighbours'
/// share a worker and its caches. Returns the worker of each threadblock;
/// every worker gets at least one when there are enough.
fn partition(weights: &[u64], w: usize) -> Vec<usize> {
    let n = weights.len();
    let w = w.clamp(1, n.max(1));
    let total: u64 = weights.iter().sum::<u64>().max(1);
    let mut owner = Vec::with_capacity(n);
    let (mut k, mut cum) = (0usize, 0u64);
    for (i, &x) in weights.iter().enumerate() {
        // Move on when this worker has its share, or when the remaining
        // threadblocks are just enough for the remaining workers.
        let has = owner.last() == Some(&k);
        if has && k + 1 < w && (cum * w as u64 >= total * (k as u64 + 1) || n - i <= w - 1 - k) {
            k += 1;
        }
        owner.push(k);
        cum += x;
    }
    owner
}

fn overlap<T>(a: *const T, b: *const T, len: usize) -> bool {
    let (a, b) = (a as usize, b as usize);
    let bytes = len * std::mem::size_of::<T>();
    a < b + bytes && b < a + bytes
}

/// Outcome of one engine run: seconds per phase.
pub(crate) struct PhaseTimes {
    pub secs: Vec<f64>,
    /// Per phase: steps run as later links of a chain (`Shared::try_chain`).
    pub chained: Vec<u64>,
}

/// Run `phases[k]` back-to-back works per phase on the given buffers;
/// `between(k)` is called after phase k with every threadblock idle (e.g. to
/// check results). With `nodes`, each worker runs on the CPUs of its node
/// (`Nodes::node_of_worker`). Returns the wall time of each phase (release of the
/// phase to the last threadblock finishing it).
pub(crate) fn run<T: Elem, O: Op<T>>(
    plan: &Plan,
    geo: Geometry,
    bufs: &mut Buffers<T>,
    phases: &[u64],
    nodes: Option<&Nodes>,
    mut between: impl FnMut(usize, &[&[T]]),
) -> Result<PhaseTimes, ExecError> {
    let n = plan.nranks;
    let mut raw = Vec::with_capacity(n);
    let (i_len, o_len) = (
        plan.bufs.i_chunks * geo.chunk,
        plan.bufs.o_chunks * geo.chunk,
    );
    for r in 0..n {
        if bufs.input[r].len() < i_len || bufs.output[r].len() < o_len {
            return Err(ExecError::Size(
                "buffers smaller than the size requested".into(),
            ));
        }
        let (ip, op) = (bufs.input[r].as_mut_ptr(), bufs.output[r].as_mut_ptr());
        // In place, one buffer lies inside the other (msccl-xml.md §5.2).
        let (inp, out) = match (geo.inplace, plan.bufs.alias) {
            (false, _) => (ip, op),
            // SAFETY (all three): the offset plus the inner buffer's
            // length is at most the outer buffer's length, checked above
            // (rank r's shard of a buffer of n shards).
            (true, Alias::OutInInput) => (ip, unsafe { ip.add(r * o_len) }),
            (true, Alias::InputInOut) => (unsafe { op.add(r * i_len) }, op),
            (true, Alias::Same) => (ip, ip),
        };
        let inp = RawBuf {
            ptr: inp,
            len: i_len,
        };
        let out = RawBuf {
            ptr: out,
            len: o_len,
        };
        let scr = RawBuf {
            ptr: bufs.scratch[r].as_mut_ptr(),
            len: plan.s_chunks[r] * geo.chunk,
        };
        if bufs.scratch[r].len() < scr.len {
            return Err(ExecError::Size(
                "buffers smaller than the size requested".into(),
            ));
        }
        raw.push([inp, out, scr]);
    }
    let fifos = plan
        .fifos
        .iter()
        .map(|d| Fifo {
            head: Padded(AtomicU64::new(0)),
            tail: Padded(AtomicU64::new(0)),
            slots: (0..geo.fifo_slots.max(1))
                .map(|_| Slot {
                    data: UnsafeCell::new(vec![T::default(); geo.tile].into_boxed_slice()),
                    len: UnsafeCell::new(0),
                    ext: UnsafeCell::new(std::ptr::null()),
                })
                .collect(),
            producer: d.producer,
            consumer: d.consumer,
        })
        .collect();
    let ntbs = plan.tbs.len();
    let nworkers = geo.workers.clamp(1, ntbs.max(1));
    let owner = tb_workers(plan, nworkers);
    let zc = if geo.zero_copy {
        super::plan::zero_copy_sends(plan, geo.inplace)
    } else {
        plan.tbs
            .iter()
            .map(|t| vec![ZeroCopy::No; t.steps.len()])
            .collect()
    };
    let shared = Shared::<T> {
        plan,
        geo,
        bufs: raw,
        fifos,
        tbs: (0..ntbs)
            .map(|_| TbState {
                flag: Padded(AtomicU64::new(0)),
                progress: Padded(AtomicU64::new(0)),
                wait: AtomicU64::new(W_IDLE),
                pos: AtomicU64::new(0),
                end_ns: AtomicU64::new(0),
            })
            .collect(),
        rank_done: (0..n).map(|_| Padded(AtomicU64::new(0))).collect(),
        owner,
        sleeping: (0..nworkers)
            .map(|_| Padded(AtomicBool::new(false)))
            .collect(),
        workers: OnceLock::new(),
        hold: AtomicBool::new(false),
        failed: std::sync::Mutex::new(None),
        main: thread::current(),
        abort: AtomicBool::new(false),
        go: AtomicU64::new(0),
        phase_done: AtomicU64::new(0),
        chained: AtomicU64::new(0),
        base: Instant::now(),
        step_stride: plan.max_steps as u64 + 1,
        zero_copy: zc
            .iter()
            .map(|t| t.iter().map(|&z| z != ZeroCopy::No).collect())
            .collect(),
        drain: zc.iter().map(|t| t.contains(&ZeroCopy::Ordered)).collect(),
    };
    let mine: Vec<Vec<usize>> = (0..nworkers)
        .map(|w| (0..ntbs).filter(|&t| shared.owner[t] == w).collect())
        .collect();
    let mut secs = Vec::new();
    let mut chained: Vec<u64> = Vec::new();
    let mut stall: Option<StallReport> = None;
    let mut spawn_err: Option<String> = None;
    thread::scope(|s| {
        let sh = &shared;
        let mut handles = Vec::new();
        for (w, tbs) in mine.iter().enumerate() {
            let b = thread::Builder::new()
                .name(format!("rscc-worker{w}"))
                .stack_size(256 << 10);
            let work = move || {
                // On a machine of several memory nodes, each worker stays
                // on its node's CPUs, where its ranks' buffers lie.
                if let Some(nodes) = nodes {
                    nodes.pin(nodes.node_of_worker(w, nworkers));
                }
                sh.worker::<O>(w, tbs, phases)
            };
            match b.spawn_scoped(s, work) {
                Ok(h) => handles.push(h),
                Err(e) => {
                    spawn_err = Some(format!("cannot start a worker thread: {e}"));
                    break;
                }
            }
        }
        let _ = sh
            .workers
            .set(handles.iter().map(|h| h.thread().clone()).collect());
        if spawn_err.is_some() {
            sh.abort.store(true, Ordering::SeqCst);
            sh.wake_all();
            return;
        }
        for (pi, _) in phases.iter().enumerate() {
            // Wake the pool and keep it spinning before the clock starts:
            // a persistent engine's calls do not pay a thread wake-up
            // (hundreds of µs on a VM), as a running kernel's do not.
            sh.hold.store(true, Ordering::SeqCst);
            sh.wake_all();
            let t0 = Instant::now();
            while sh.sleeping.iter().any(|f| f.0.load(Ordering::SeqCst))
                && t0.elapsed() < Duration::from_millis(100)
            {
                std::hint::spin_loop();
            }
            let start_ns = sh.base.elapsed().as_nanos() as u64;
            sh.go.store(pi as u64 + 1, Ordering::Release);
            sh.wake_all();
            sh.hold.store(false, Ordering::Relaxed);
            let target = (pi as u64 + 1) * ntbs as u64;
            let mut last_prog = u64::MAX;
            let mut last_change = Instant::now();
            while sh.phase_done.load(Ordering::Acquire) < target {
                thread::park_timeout(Duration::from_millis(5));
                if sh.abort.load(Ordering::SeqCst) {
                    return;
                }
                let prog: u64 = sh
                    .tbs
                    .iter()
                    .map(|t| t.progress.0.load(Ordering::Relaxed))
                    .sum();
                if prog != last_prog {
                    last_prog = prog;
                    last_change = Instant::now();
                } else if last_change.elapsed() >= geo.stall {
                    stall = Some(sh.stall_report(geo.stall));
                    sh.abort.store(true, Ordering::SeqCst);
                    sh.wake_all();
                    return;
                }
            }
            let end_ns = sh
                .tbs
                .iter()
                .map(|t| t.end_ns.load(Ordering::Relaxed))
                .max()
                .unwrap_or(start_ns);
            secs.push(end_ns.saturating_sub(start_ns) as f64 * 1e-9);
            let total = sh.chained.load(Ordering::Relaxed);
            chained.push(total - chained.iter().sum::<u64>());
            // Every threadblock now waits for the next phase: the buffers
            // are quiescent and may be read.
            let outs: Vec<&[T]> = sh
                .bufs
                .iter()
                // SAFETY: in-bounds (checked above) and no thread writes now.
                .map(|b| unsafe { std::slice::from_raw_parts(b[1].ptr as *const T, b[1].len) })
                .collect();
            between(pi, &outs);
        }
    });
    if let Some(e) = spawn_err {
        return Err(ExecError::Spawn(e));
    }
    if let Some((tb, msg)) = shared.failed.lock().ok().and_then(|mut f| f.take()) {
        let t = plan.tbs.get(tb);
        return Err(ExecError::Fault {
            rank: t.map_or(0, |t| t.rank),
            tb: t.map_or(-1, |t| t.id),
            msg,
        });
    }
    if let Some(rep) = stall {
        return Err(ExecError::Stalled(rep));
    }
    Ok(PhaseTimes { secs, chained })
}

impl<T: Elem> Shared<'_, T> {
    fn stall_report(&self, after: Duration) -> StallReport {
        let mut waits = Vec::new();
        for (i, tb) in self.plan.tbs.iter().enumerate() {
            let st = &self.tbs[i];
            let w = st.wait.load(Ordering::SeqCst);
            if w == W_DONE || w == W_IDLE {
                continue;
            }
            let pos = st.pos.load(Ordering::Relaxed);
            let (work, tile, step) = (pos >> 40, (pos >> 16) & 0xff_ffff, (pos & 0xffff) as usize);
            let kind = tb.steps.get(step).map(|s| s.kind);
            let what = match w {
                W_RECV => {
                    let f = tb.recv_fifo.and_then(|f| self.fifos.get(f));
                    let (h, t) = f.map_or((0, 0), |f| (f.head.0.load(Ordering::Relaxed), f.tail.0.load(Ordering::Relaxed)));
                    let sender = tb
                        .recv_fifo
                        .and_then(|f| self.plan.fifos.get(f))
                        .and_then(|d| d.producer)
                        .map_or("no threadblock sends on it".to_string(), |p| {
                            format!("sender rank {} tb {}", self.plan.tbs[p].rank, self.plan.tbs[p].id)
                        });
                    format!(
                        "receive #{} from rank {} on chan {} ({} sent so far; {})",
                        h + 1,
                        tb.recv_peer.map_or(-1, |p| p as i64),
                        tb.chan,
                        t,
                        sender
                    )
                }
                W_SEND => format!(
                    "a free FIFO slot to rank {} on chan {} (FIFO full; the receiver is not receiving)",
                    tb.send_peer.map_or(-1, |p| p as i64),
                    tb.chan
                ),
                W_DEP => {
                    let (d, ds) = tb.steps.get(step).and_then(|s| s.dep).unwrap_or((0, 0));
                    let flag = self.tbs.get(d).map_or(0, |t| t.flag.0.load(Ordering::Relaxed));
                    let desc = if flag == 0 {
                        "nothing published yet".to_string()
                    } else {
                        let f = flag - 1;
                        let s = f % self.step_stride;
                        let wt = f / self.step_stride;
                        let nt = self.geo.ntiles() as u64;
                        format!("published work {} tile {} step {}", wt / nt, wt % nt, s)
                    };
                    format!(
                        "dependency on tb {} step {} ({})",
                        self.plan.tbs.get(d).map_or(-1, |t| t.id),
                        ds,
                        desc
                    )
                }
                W_GATE => "the rank's other threadblocks to finish the previous work".to_string(),
                W_DRAIN => format!(
                    "rank {} to take the data it handed over zero-copy on chan {}",
                    tb.send_peer.map_or(-1, |p| p as i64),
                    tb.chan
                ),
                _ => "running".to_string(),
            };
            waits.push(TbWait {
                rank: tb.rank,
                tb: tb.id,
                step,
                kind: kind.map_or("?", |k| k.as_str()).to_string(),
                work,
                tile,
                waiting_for: what,
            });
        }
        StallReport {
            after_ms: after.as_millis() as u64,
            waits,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{partition, placement_order};

    /// Cut into two, an 8-rank ring's walk gives two arcs of the ring
    /// (two FIFOs cross workers); a 2-channel ring's gives one channel per
    /// worker (none cross).
    #[test]
    fn placement_keeps_fifo_neighbours_together() {
        let crosses = |nch: usize| {
            let plan = super::super::plan::build(&crate::exec::builtin::ring(8, nch)).unwrap();
            let order = placement_order(&plan);
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..plan.tbs.len()).collect::<Vec<_>>());
            let cut = partition(&vec![1; order.len()], 2);
            let mut owner = vec![0; order.len()];
            for (&t, &w) in order.iter().zip(&cut) {
                owner[t] = w;
            }
            plan.fifos
                .iter()
                .filter(|f| match (f.producer, f.consumer) {
                    (Some(p), Some(c)) => owner[p] != owner[c],
                    _ => false,
                })
                .count()
        };
        assert_eq!(crosses(1), 2);
        assert_eq!(crosses(2), 0);
    }

    /// A direct exchange's reduction chain (the threadblock that adds
    /// every peer's contribution and the receivers it waits on) lands on
    /// one worker: the walk takes dependency neighbours first.
    #[test]
    fn placement_keeps_reduction_chains_on_one_worker() {
        let plan =
            super::super::plan::build(&crate::sim::programs::direct_reduce_scatter(8).unwrap())
                .unwrap();
        let order = placement_order(&plan);
        let cut = partition(&vec![1; order.len()], 2);
        let mut owner = vec![0; order.len()];
        for (&t, &w) in order.iter().zip(&cut) {
            owner[t] = w;
        }
        let crossing: usize = plan
            .tbs
            .iter()
            .enumerate()
            .map(|(t, tb)| tb.waiters.iter().filter(|&&w| owner[w] != owner[t]).count())
            .sum();
        let edges: usize = plan.tbs.iter().map(|tb| tb.waiters.len()).sum();
        assert_eq!(
            crossing, 0,
            "{crossing} of {edges} dependencies cross workers"
        );
    }

    #[test]
    fn partition_is_contiguous_balanced_and_covers_every_worker() {
        assert_eq!(partition(&[1; 8], 2), vec![0, 0, 0, 0, 1, 1, 1, 1]);
        assert_eq!(partition(&[1; 7], 3), vec![0, 0, 0, 1, 1, 2, 2]);
        // A heavy threadblock gets a worker of its own.
        assert_eq!(partition(&[10, 1, 1, 1], 2), vec![0, 1, 1, 1]);
        // Heavy at the end: earlier workers still get one each.
        assert_eq!(partition(&[1, 1, 1, 30], 3), vec![0, 0, 1, 2]);
        // More workers than threadblocks: one each.
        assert_eq!(partition(&[5, 5], 8), vec![0, 1]);
        assert_eq!(partition(&[], 4), Vec::<usize>::new());
        for w in 1..6 {
            let o = partition(&[3, 1, 4, 1, 5, 9, 2, 6], w);
            assert!(o.windows(2).all(|p| p[1] == p[0] || p[1] == p[0] + 1));
            assert_eq!(*o.last().unwrap(), w - 1);
        }
    }
}
