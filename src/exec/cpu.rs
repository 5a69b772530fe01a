//! The CPU engine: one OS thread per threadblock, all ranks in one process.
//!
//! - Every connection `(chan, from -> to)` is a single-producer
//!   single-consumer ring of `fifo_slots` slots of one tile each; the k-th
//!   send lands in slot k mod slots and pairs with the k-th receive.
//! - Every threadblock has one progress flag `(work, tile, step)`, published
//!   after steps with `hasdep="1"`; `depid`/`deps` waits read it.
//! - Waiting spins briefly, then parks the thread (`std::thread::park`), and
//!   the thread that changes the awaited state unparks it. Blocked
//!   threadblocks therefore cost no CPU, which matters with hundreds of
//!   threadblocks on a 2-core machine.
//! - The data path takes no locks: FIFO indices and flags are atomics with
//!   acquire/release ordering; buffers are raw memory that the (verified)
//!   schedule partitions between threadblocks.
//! - Work w+1 of a rank starts only when all its threadblocks finished work
//!   w (NCCL's per-rank stream order); ranks are not synchronised.

use super::elem::{reduce2, reduce3, reduce_self, Elem, Op};
use super::plan::Plan;
use super::{ExecError, StallReport, TbWait};
use crate::ir::spec::Alias;
use crate::ir::{Buf, StepKind};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
    pub fn new(plan: &Plan, max_count: usize) -> Result<Self, ExecError> {
        let n = plan.nranks;
        let alloc = |len: usize| -> Result<Vec<T>, ExecError> {
            let mut v = Vec::new();
            v.try_reserve_exact(len)
                .map_err(|_| ExecError::Size(format!("cannot allocate {} elements", len)))?;
            v.resize(len, T::default());
            Ok(v)
        };
        let chunk_max = max_count * n / plan.c;
        let mut b = Buffers {
            input: Vec::new(),
            output: Vec::new(),
            scratch: Vec::new(),
        };
        for r in 0..n {
            b.input.push(alloc(plan.bufs.i_chunks * chunk_max)?);
            b.output.push(alloc(plan.bufs.o_chunks * chunk_max)?);
            b.scratch.push(alloc(plan.s_chunks[r] * chunk_max)?);
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
}

struct Fifo<T> {
    head: Padded<AtomicU64>,
    tail: Padded<AtomicU64>,
    slots: Box<[Slot<T>]>,
    producer: Option<usize>,
    consumer: Option<usize>,
}

const W_RUN: u64 = 0;
const W_RECV: u64 = 1;
const W_SEND: u64 = 2;
const W_DEP: u64 = 3;
const W_GATE: u64 = 4;
const W_IDLE: u64 = 5;
const W_DONE: u64 = 6;

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
    threads: OnceLock<Vec<Thread>>,
    main: Thread,
    abort: AtomicBool,
    go: AtomicU64,
    phase_done: AtomicU64,
    base: Instant,
    step_stride: u64,
}

// SAFETY: the raw buffer pointers and FIFO slots are shared between threads
// by design; FIFO slots are handed over with acquire/release on head/tail,
// and buffer ranges are partitioned by the schedule (checked by the
// verifier; bounds are checked by `plan::build` for any input).
unsafe impl<T: Send> Sync for Shared<'_, T> {}
unsafe impl<T: Send> Send for Shared<'_, T> {}

struct Aborted;

impl<T: Elem> Shared<'_, T> {
    fn unpark(&self, tb: usize) {
        if let Some(t) = self.threads.get().and_then(|v| v.get(tb)) {
            t.unpark();
        }
    }

    /// Wait until `cond` holds; spin briefly, then park. Records what it
    /// waits on for the watchdog.
    #[inline]
    fn wait(&self, me: usize, what: u64, pos: u64, cond: impl Fn() -> bool) -> Result<(), Aborted> {
        if cond() {
            return Ok(());
        }
        for _ in 0..200 {
            std::hint::spin_loop();
            if cond() {
                return Ok(());
            }
        }
        let st = &self.tbs[me];
        st.pos.store(pos, Ordering::Relaxed);
        st.wait.store(what, Ordering::SeqCst);
        loop {
            if cond() {
                break;
            }
            if self.abort.load(Ordering::Relaxed) {
                return Err(Aborted);
            }
            thread::park_timeout(Duration::from_millis(20));
        }
        st.wait.store(W_RUN, Ordering::Relaxed);
        Ok(())
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

    fn run_tb<O: Op<T>>(&self, me: usize, phases: &[u64]) -> Result<(), Aborted> {
        let tb = &self.plan.tbs[me];
        let r = tb.rank;
        let ntbs_rank = self.plan.rank_tbs[r].len() as u64;
        let mut tmp: Vec<T> = vec![T::default(); self.geo.tile];
        let mut work: u64 = 0;
        for (pi, &nworks) in phases.iter().enumerate() {
            let phase = pi as u64 + 1;
            self.wait(me, W_IDLE, work << 40, || {
                self.go.load(Ordering::Acquire) >= phase
            })?;
            for _ in 0..nworks {
                // NCCL stream order: this rank's previous work is complete.
                let need = work * ntbs_rank;
                let rd = &self.rank_done[r].0;
                self.wait(me, W_GATE, work << 40, || {
                    rd.load(Ordering::Acquire) >= need
                })?;
                self.run_work::<O>(me, work, &mut tmp)?;
                if rd.fetch_add(1, Ordering::AcqRel) + 1 == (work + 1) * ntbs_rank {
                    for &t in &self.plan.rank_tbs[r] {
                        self.unpark(t);
                    }
                }
                work += 1;
            }
            let st = &self.tbs[me];
            st.end_ns
                .store(self.base.elapsed().as_nanos() as u64, Ordering::Relaxed);
            st.progress.0.fetch_add(1, Ordering::Relaxed);
            self.phase_done.fetch_add(1, Ordering::AcqRel);
            self.main.unpark();
        }
        self.tbs[me].wait.store(W_DONE, Ordering::SeqCst);
        Ok(())
    }

    fn run_work<O: Op<T>>(&self, me: usize, work: u64, tmp: &mut [T]) -> Result<(), Aborted> {
        let tb = &self.plan.tbs[me];
        let r = tb.rank;
        let geo = self.geo;
        let st = &self.tbs[me];
        let mac = geo.merge;
        for tile in 0..geo.ntiles() {
            let t0 = tile * geo.tile;
            let len = geo.tile.min(geo.chunk - t0);
            for (pos, step) in tb.steps.iter().enumerate() {
                let where_ =
                    (work << 40) | ((tile as u64 & 0xff_ffff) << 16) | (pos as u64 & 0xffff);
                if let Some((d, ds)) = step.dep {
                    let want = self.key(work, tile as u64, ds);
                    let f = &self.tbs[d].flag.0;
                    self.wait(me, W_DEP, where_, || f.load(Ordering::Acquire) >= want)?;
                }
                // A step with cnt = k is ceil(k / mac) primitive calls per
                // tile, each moving up to mac adjacent chunks as one range
                // (plan::tile_and_merge); mac >= 2 only when there is a
                // single tile.
                let mut g = 0;
                while g < step.cnt {
                    let m = mac.min(step.cnt - g);
                    let n = if m > 1 { m * geo.chunk } else { len };
                    let src = self.range(r, step.src.0, step.src.1 + g, t0, n);
                    let dst = self.range(r, step.dst.0, step.dst.1 + g, t0, n);
                    self.exec_step::<O>(me, step.kind, src, dst, n, where_, tmp)?;
                    g += m;
                }
                if step.publish {
                    st.flag
                        .0
                        .store(self.key(work, tile as u64, pos), Ordering::Release);
                    for &w in &tb.waiters {
                        self.unpark(w);
                    }
                }
                st.progress.0.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(())
    }

    /// Wait for a full slot of the receive FIFO; returns (slot ptr, len, seq).
    fn recv_begin(
        &self,
        me: usize,
        where_: u64,
    ) -> Result<(&Fifo<T>, *const T, usize, u64), Aborted> {
        let fi = self.plan.tbs[me].recv_fifo.unwrap_or(usize::MAX);
        let Some(f) = self.fifos.get(fi) else {
            return Err(Aborted);
        };
        let h = f.head.0.load(Ordering::Relaxed);
        self.wait(me, W_RECV, where_, || f.tail.0.load(Ordering::Acquire) > h)?;
        let slot = &f.slots[(h % f.slots.len() as u64) as usize];
        // SAFETY: the producer published this slot (tail > h, acquire) and
        // will not touch it until we advance head.
        let (p, n) = unsafe { ((*slot.data.get()).as_ptr(), *slot.len.get()) };
        Ok((f, p, n, h))
    }

    fn recv_end(&self, f: &Fifo<T>, h: u64) {
        f.head.0.store(h + 1, Ordering::Release);
        if let Some(p) = f.producer {
            self.unpark(p);
        }
    }

    fn send_begin(&self, me: usize, where_: u64) -> Result<(&Fifo<T>, *mut T, u64), Aborted> {
        let fi = self.plan.tbs[me].send_fifo.unwrap_or(usize::MAX);
        let Some(f) = self.fifos.get(fi) else {
            return Err(Aborted);
        };
        let t = f.tail.0.load(Ordering::Relaxed);
        let cap = f.slots.len() as u64;
        self.wait(me, W_SEND, where_, || {
            t - f.head.0.load(Ordering::Acquire) < cap
        })?;
        let slot = &f.slots[(t % cap) as usize];
        // SAFETY: the consumer released this slot (head > t - cap, acquire).
        let p = unsafe { (*slot.data.get()).as_mut_ptr() };
        Ok((f, p, t))
    }

    fn send_end(&self, f: &Fifo<T>, t: u64, len: usize) {
        let slot = &f.slots[(t % f.slots.len() as u64) as usize];
        // SAFETY: we own the slot until tail is advanced.
        unsafe { *slot.len.get() = len };
        f.tail.0.store(t + 1, Ordering::Release);
        if let Some(c) = f.consumer {
            self.unpark(c);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn exec_step<O: Op<T>>(
        &self,
        me: usize,
        kind: StepKind,
        src: *mut T,
        dst: *mut T,
        len: usize,
        where_: u64,
        tmp: &mut [T],
    ) -> Result<(), Aborted> {
        use std::slice::{from_raw_parts, from_raw_parts_mut};
        // SAFETY (whole function): src/dst point at `len` in-bounds elements
        // (plan::build); slots hold `tile >= len` elements; slices over the
        // same memory are never alive at the same time (aliasing cases are
        // handled explicitly below).
        unsafe {
            match kind {
                StepKind::Nop => {}
                StepKind::Send => {
                    let (f, out, t) = self.send_begin(me, where_)?;
                    std::ptr::copy_nonoverlapping(src, out, len);
                    self.send_end(f, t, len);
                }
                StepKind::Recv => {
                    let (f, inp, n, h) = self.recv_begin(me, where_)?;
                    std::ptr::copy_nonoverlapping(inp, dst, len.min(n));
                    self.recv_end(f, h);
                }
                StepKind::RecvCopySend => {
                    let (fi, inp, n, h) = self.recv_begin(me, where_)?;
                    let (fo, out, t) = self.send_begin(me, where_)?;
                    let m = len.min(n);
                    std::ptr::copy_nonoverlapping(inp, dst, m);
                    std::ptr::copy_nonoverlapping(inp, out, m);
                    self.send_end(fo, t, m);
                    self.recv_end(fi, h);
                }
                StepKind::RecvReduceSend => {
                    let (fi, inp, n, h) = self.recv_begin(me, where_)?;
                    let (fo, out, t) = self.send_begin(me, where_)?;
                    let m = len.min(n);
                    reduce3::<T, O>(
                        from_raw_parts_mut(out, m),
                        from_raw_parts(inp, m),
                        from_raw_parts(src, m),
                    );
                    self.send_end(fo, t, m);
                    self.recv_end(fi, h);
                }
                StepKind::RecvReduceCopySend => {
                    let (fi, inp, n, h) = self.recv_begin(me, where_)?;
                    let (fo, out, t) = self.send_begin(me, where_)?;
                    let m = len.min(n);
                    reduce3::<T, O>(
                        from_raw_parts_mut(out, m),
                        from_raw_parts(inp, m),
                        from_raw_parts(src, m),
                    );
                    std::ptr::copy_nonoverlapping(out, dst, m);
                    self.send_end(fo, t, m);
                    self.recv_end(fi, h);
                }
                StepKind::RecvReduceCopy => {
                    let (fi, inp, n, h) = self.recv_begin(me, where_)?;
                    let m = len.min(n);
                    if src == dst {
                        reduce2::<T, O>(from_raw_parts_mut(dst, m), from_raw_parts(inp, m));
                    } else if overlap(src, dst, m) {
                        std::ptr::copy_nonoverlapping(src, tmp.as_mut_ptr(), m);
                        reduce3::<T, O>(
                            from_raw_parts_mut(dst, m),
                            from_raw_parts(inp, m),
                            &tmp[..m],
                        );
                    } else {
                        reduce3::<T, O>(
                            from_raw_parts_mut(dst, m),
                            from_raw_parts(inp, m),
                            from_raw_parts(src, m),
                        );
                    }
                    self.recv_end(fi, h);
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
                        std::ptr::copy_nonoverlapping(src, tmp.as_mut_ptr(), len);
                        reduce2::<T, O>(from_raw_parts_mut(dst, len), &tmp[..len]);
                    } else {
                        reduce2::<T, O>(from_raw_parts_mut(dst, len), from_raw_parts(src, len));
                    }
                }
            }
        }
        Ok(())
    }
}

fn overlap<T>(a: *const T, b: *const T, len: usize) -> bool {
    let (a, b) = (a as usize, b as usize);
    let bytes = len * std::mem::size_of::<T>();
    a < b + bytes && b < a + bytes
}

/// Outcome of one engine run: seconds per phase.
pub(crate) struct PhaseTimes {
    pub secs: Vec<f64>,
}

/// Run `phases[k]` back-to-back works per phase on the given buffers;
/// `between(k)` is called after phase k with all threads parked (e.g. to
/// check results). Returns the wall time of each phase (release of the
/// phase to the last threadblock finishing it).
pub(crate) fn run<T: Elem, O: Op<T>>(
    plan: &Plan,
    geo: Geometry,
    count: usize,
    bufs: &mut Buffers<T>,
    phases: &[u64],
    mut between: impl FnMut(usize, &[&[T]]),
) -> Result<PhaseTimes, ExecError> {
    let n = plan.nranks;
    let mut raw = Vec::with_capacity(n);
    let (i_len, o_len) = (
        plan.bufs.i_chunks * geo.chunk,
        plan.bufs.o_chunks * geo.chunk,
    );
    let _ = count;
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
                })
                .collect(),
            producer: d.producer,
            consumer: d.consumer,
        })
        .collect();
    let shared = Shared::<T> {
        plan,
        geo,
        bufs: raw,
        fifos,
        tbs: (0..plan.tbs.len())
            .map(|_| TbState {
                flag: Padded(AtomicU64::new(0)),
                progress: Padded(AtomicU64::new(0)),
                wait: AtomicU64::new(W_IDLE),
                pos: AtomicU64::new(0),
                end_ns: AtomicU64::new(0),
            })
            .collect(),
        rank_done: (0..n).map(|_| Padded(AtomicU64::new(0))).collect(),
        threads: OnceLock::new(),
        main: thread::current(),
        abort: AtomicBool::new(false),
        go: AtomicU64::new(0),
        phase_done: AtomicU64::new(0),
        base: Instant::now(),
        step_stride: plan.max_steps as u64 + 1,
    };
    let ntbs = plan.tbs.len() as u64;
    let mut secs = Vec::new();
    let mut stall: Option<StallReport> = None;
    let mut spawn_err: Option<String> = None;
    thread::scope(|s| {
        let sh = &shared;
        let mut handles = Vec::new();
        for me in 0..plan.tbs.len() {
            let b = thread::Builder::new()
                .name(format!("r{}tb{}", plan.tbs[me].rank, plan.tbs[me].id))
                .stack_size(256 << 10);
            match b.spawn_scoped(s, move || sh.run_tb::<O>(me, phases)) {
                Ok(h) => handles.push(h),
                Err(e) => {
                    spawn_err = Some(format!("cannot start threadblock thread: {e}"));
                    break;
                }
            }
        }
        if spawn_err.is_some() {
            sh.abort.store(true, Ordering::SeqCst);
            for h in &handles {
                h.thread().unpark();
            }
            return;
        }
        let _ = sh
            .threads
            .set(handles.iter().map(|h| h.thread().clone()).collect());
        for (pi, _) in phases.iter().enumerate() {
            let start_ns = sh.base.elapsed().as_nanos() as u64;
            sh.go.store(pi as u64 + 1, Ordering::Release);
            for h in &handles {
                h.thread().unpark();
            }
            let target = (pi as u64 + 1) * ntbs;
            let mut last_prog = u64::MAX;
            let mut last_change = Instant::now();
            while sh.phase_done.load(Ordering::Acquire) < target {
                thread::park_timeout(Duration::from_millis(5));
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
                    for h in &handles {
                        h.thread().unpark();
                    }
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
            // All threadblocks now wait for the next phase: the buffers are
            // quiescent and may be read.
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
    if let Some(rep) = stall {
        return Err(ExecError::Stalled(rep));
    }
    Ok(PhaseTimes { secs })
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
