//! One run on the opened GPUs: the kernel's parameter block and device
//! tables, buffers and FIFOs allocated once for the largest size, then per
//! size the inputs, the launches (check, warm-up, timed iterations), the
//! reference check of the outputs, the timings, and the decoding of the
//! kernel's stall record.

use super::super::elem::{self, Op};
use super::super::plan::Plan;
use super::super::{chunk_for, ExecError, RunOptions, SizeResult, StallReport, TbWait};
use super::device::{cu, measure_copy, open_devices, ptr, Dev};
use super::layout::{self, DevStep, DevTb, Geometry, FIFO_CTRL_WORDS, FLAG_WORDS};
use super::{Mode, Raw};
use crate::ir::Collective;
use cudarc::driver::{sys, CudaSlice, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg};
use std::sync::Arc;

/// Kernel parameters, `struct Params` in kernel.cu (16 × u64 + 2 × i32).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct Params {
    steps: u64,
    tbs: u64,
    bufs: u64,
    fifo_data: u64,
    fifo_ctrl: u64,
    flags: u64,
    status: u64,
    chunk: u64,
    tile: u64,
    ntiles: u64,
    step_stride: u64,
    work: u64,
    slots: u64,
    timeout_ns: u64,
    merge: u64,
    sys_fence: u64,
    tb_base: i32,
    ntbs: i32,
}

// SAFETY: Params is repr(C), plain old data, and matches `struct Params` in
// kernel.cu field by field (u64 pointers are device addresses).
unsafe impl DeviceRepr for Params {}
// SAFETY: repr(C) structs of i32 that match `struct Step` / `struct Tb` in
// kernel.cu (sizes checked in the tests).
unsafe impl DeviceRepr for DevStep {}
// SAFETY: as above.
unsafe impl DeviceRepr for DevTb {}

type Typed = (Vec<SizeResult>, Option<f64>, usize);

pub(super) fn run_typed<T: Raw, O: Op<T>>(
    plan: &Plan,
    opts: &RunOptions,
    inplace: bool,
    mode: Mode,
) -> Result<Typed, ExecError> {
    let n = plan.nranks;
    let esz = std::mem::size_of::<T>() as u64;
    let (devs, device_of) = open_devices(plan, mode, opts)?;
    // Zero-copy sends need the receiver to read the sender's memory: only
    // when every rank is on one GPU.
    let zero_copy = if opts.zero_copy && devs.len() == 1 {
        super::super::plan::zero_copy_sends(plan, inplace)
    } else {
        Vec::new()
    };
    let enc = layout::encode(plan, &zero_copy)?;
    let membw = if opts.membw_bytes > 0 {
        Some(measure_copy(&devs[0], opts.membw_bytes, 5)?)
    } else {
        None
    };
    // Elements per chunk of each size (the full buffer is C chunks).
    let chunks: Vec<(u64, u64)> = opts
        .sizes
        .iter()
        .map(|&s| (s, chunk_for(s, esz as usize, plan.c)))
        .collect();
    let max_chunk = chunks.iter().map(|c| c.1).max().unwrap_or(0);
    let (rank_bufs, arenas) =
        layout::buffer_layout(plan.bufs, &plan.s_chunks, max_chunk, esz, &device_of)?;
    // FIFO slots are allocated once, for the largest tile of any size: with
    // merged calls a smaller size can have the larger tile.
    let max_cnt = plan.max_cnt() as u64;
    let geo_of = |chunk: u64| {
        layout::geometry(
            chunk,
            opts.tile_bytes as u64,
            esz,
            opts.fifo_slots as u64,
            max_cnt,
        )
    };
    let max_tile = chunks.iter().map(|c| geo_of(c.1).tile).max().unwrap_or(1);
    let fifo_b = layout::fifo_bytes(opts.fifo_slots.max(1) as u64, max_tile, esz);
    let threads = devs
        .iter()
        .fold(layout::threads_per_block(max_tile, esz), |t, d| {
            t.min(d.threads_max)
        });
    // Every device's threadblocks must be co-resident; shrink blocks if not.
    let mut threads = threads;
    for d in &devs {
        threads = layout::choose_threads(threads, d.ntbs as u64, |t| {
            d.ctx.bind_to_thread().map_err(cu("bind"))?;
            let per_sm = d
                .func
                .occupancy_max_active_blocks_per_multiprocessor(t, 0, None)
                .map_err(cu("occupancy"))? as u64;
            Ok(per_sm * d.sms)
        })?;
    }
    // Allocations (once, for the largest size).
    let mut arena_mem = Vec::new();
    for (d, dev) in devs.iter().enumerate() {
        let bytes = arenas.get(d).copied().unwrap_or(0).max(256);
        let m = dev
            .stream
            .alloc_zeros::<u8>(bytes as usize)
            .map_err(|e| ExecError::Size(format!("cannot allocate {bytes} B on GPU {d}: {e:?}")))?;
        arena_mem.push(m);
    }
    let arena_ptr: Vec<u64> = devs
        .iter()
        .zip(&arena_mem)
        .map(|(d, m)| ptr(m, &d.stream))
        .collect();
    // Input and output offsets of rank r for chunks of `chunk` elements
    // (aliased as the op's in-place call aliases them).
    let io_off = |r: usize, chunk: u64| -> (u64, u64) {
        layout::io_offsets(&rank_bufs[r], plan.bufs, inplace, r, chunk * esz)
    };
    let bufs_for = |chunk: u64| -> Vec<u64> {
        let mut t = Vec::with_capacity(3 * n);
        for (r, b) in rank_bufs.iter().enumerate() {
            let base = arena_ptr[device_of[r]];
            let (i, o) = io_off(r, chunk);
            t.extend([base + i, base + o, base + b.scratch.offset]);
        }
        t
    };
    let bufs_tab = bufs_for(max_chunk);
    // FIFOs in the consumer's (receiver's) memory.
    let mut fifo_mem = Vec::new();
    let mut fifo_ctrl_mem = Vec::new();
    let mut fifo_data_tab = Vec::new();
    let mut fifo_ctrl_tab = Vec::new();
    for f in &plan.fifos {
        let d = &devs[device_of[f.to]];
        let data = d
            .stream
            .alloc_zeros::<u8>(fifo_b as usize)
            .map_err(cu("alloc fifo"))?;
        let ctrl = d
            .stream
            .alloc_zeros::<u64>(FIFO_CTRL_WORDS)
            .map_err(cu("alloc fifo ctrl"))?;
        fifo_data_tab.push(ptr(&data, &d.stream));
        fifo_ctrl_tab.push(ptr(&ctrl, &d.stream));
        fifo_mem.push(data);
        fifo_ctrl_mem.push(ctrl);
    }
    if fifo_data_tab.is_empty() {
        fifo_data_tab.push(0);
        fifo_ctrl_tab.push(0);
    }
    struct Tables {
        steps: CudaSlice<DevStep>,
        tbs: CudaSlice<DevTb>,
        bufs: CudaSlice<u64>,
        fdata: CudaSlice<u64>,
        fctrl: CudaSlice<u64>,
        flags: CudaSlice<u64>,
        status: CudaSlice<u64>,
    }
    let mut steps_host = enc.steps.clone();
    if steps_host.is_empty() {
        steps_host.push(DevStep::default());
    }
    let mut tabs = Vec::new();
    for d in &devs {
        let s = &d.stream;
        tabs.push(Tables {
            steps: s.clone_htod(&steps_host).map_err(cu("upload"))?,
            tbs: s.clone_htod(&enc.tbs).map_err(cu("upload"))?,
            bufs: s.clone_htod(&bufs_tab).map_err(cu("upload"))?,
            fdata: s.clone_htod(&fifo_data_tab).map_err(cu("upload"))?,
            fctrl: s.clone_htod(&fifo_ctrl_tab).map_err(cu("upload"))?,
            flags: s
                .alloc_zeros::<u64>(plan.tbs.len().max(1) * FLAG_WORDS)
                .map_err(cu("alloc"))?,
            status: s.alloc_zeros::<u64>(8).map_err(cu("alloc"))?,
        });
    }
    let mut work: u64;
    let mut rows = Vec::new();
    for (req, chunk) in chunks {
        let geo = geo_of(chunk);
        // Progress keys depend on the tile count, so they restart (from
        // zeroed flags) at every size; FIFO counters just keep counting.
        work = 0;
        for (d, t) in devs.iter().zip(tabs.iter_mut()) {
            d.stream
                .memcpy_htod(&bufs_for(chunk), &mut t.bufs)
                .map_err(cu("upload buffer table"))?;
            d.stream
                .memset_zeros(&mut t.flags)
                .map_err(cu("clear flags"))?;
        }
        // Poisoned outputs and scratch, then inputs (an in-place
        // allgather's input lies inside its output). Rank r's input holds
        // the pattern at its global indices: its shard's for an allgather.
        let (i_len, o_len) = (
            plan.bufs.i_chunks as u64 * chunk,
            plan.bufs.o_chunks as u64 * chunk,
        );
        for r in 0..n {
            let b = &rank_bufs[r];
            let d = &devs[device_of[r]];
            let (io, oo) = io_off(r, chunk);
            let base = if plan.coll == Collective::AllGather {
                r * i_len as usize
            } else {
                0
            };
            let e = esz as usize;
            let mut host = vec![0u8; i_len as usize * e];
            crate::par::for_parts(&mut host, e, |off, part| {
                for (i, cell) in part.chunks_exact_mut(e).enumerate() {
                    T::from_pattern(elem::pattern(O::OP, r, base + off / e + i)).put(cell);
                }
            });
            let mut poison = vec![0u8; e];
            T::poison().put(&mut poison);
            // In place, the output of a reduce-scatter or allreduce is
            // (inside) the input: nothing to poison.
            let out_b = if inplace && plan.coll != Collective::AllGather {
                0
            } else {
                o_len as usize * e
            };
            let scr_b = (plan.s_chunks[r] as u64 * chunk * esz) as usize;
            let fill =
                |len: usize| -> Vec<u8> { poison.iter().copied().cycle().take(len).collect() };
            let arena = &mut arena_mem[device_of[r]];
            let (io, oo) = (io as usize, oo as usize);
            d.stream
                .memcpy_htod(&fill(out_b), &mut arena.slice_mut(oo..oo + out_b))
                .map_err(cu("upload output"))?;
            let so = b.scratch.offset as usize;
            d.stream
                .memcpy_htod(&fill(scr_b), &mut arena.slice_mut(so..so + scr_b))
                .map_err(cu("upload scratch"))?;
            d.stream
                .memcpy_htod(&host, &mut arena.slice_mut(io..io + host.len()))
                .map_err(cu("upload input"))?;
        }
        for d in &devs {
            d.stream.synchronize().map_err(cu("sync"))?;
        }
        let threads = layout::threads_per_block(geo.tile, esz).min(threads);
        let launch_all = |work: u64| -> Result<(), ExecError> {
            for (d, t) in devs.iter().zip(&tabs) {
                if d.ntbs == 0 {
                    continue;
                }
                let p = params(
                    d,
                    t_ptrs(t, &d.stream),
                    &enc,
                    geo,
                    work,
                    opts,
                    devs.len() > 1,
                );
                let cfg = LaunchConfig {
                    grid_dim: (d.ntbs as u32, 1, 1),
                    block_dim: (threads, 1, 1),
                    shared_mem_bytes: 0,
                };
                let mut b = d.stream.launch_builder(&d.func);
                b.arg(&p);
                // SAFETY: every pointer in Params is a live device allocation
                // owned by this function; plan::build checked every buffer
                // range a step touches against the sizes allocated by
                // buffer_layout for max_chunk >= chunk; FIFO slots hold
                // `slots` tiles of max_geo.tile >= geo.tile elements; all
                // blocks are co-resident (checked above), and every wait has
                // a timeout, so the kernel terminates.
                unsafe { b.launch(cfg) }.map_err(cu("launch"))?;
            }
            Ok(())
        };
        fn t_ptrs(t: &Tables, s: &Arc<CudaStream>) -> [u64; 7] {
            [
                ptr(&t.steps, s),
                ptr(&t.tbs, s),
                ptr(&t.bufs, s),
                ptr(&t.fdata, s),
                ptr(&t.fctrl, s),
                ptr(&t.flags, s),
                ptr(&t.status, s),
            ]
        }
        let check_status = |devs: &[Dev], tabs: &[Tables]| -> Result<(), ExecError> {
            for (d, t) in devs.iter().zip(tabs) {
                d.stream.synchronize().map_err(cu("kernel"))?;
                let st = d
                    .stream
                    .clone_dtoh(&t.status)
                    .map_err(cu("download status"))?;
                if st[0] != 0 {
                    // This GPU's blocks' abandoned waits (other GPUs may
                    // still be spinning: their lines are not read).
                    let flags = d
                        .stream
                        .clone_dtoh(&t.flags)
                        .map_err(cu("download flags"))?;
                    return Err(stall_report(
                        plan,
                        &st,
                        &flags,
                        opts.stall_timeout.as_millis() as u64,
                    ));
                }
            }
            Ok(())
        };
        let mut wrong: Option<(u64, Vec<super::super::WrongChunk>)> = None;
        if opts.check {
            launch_all(work)?;
            work += 1;
            check_status(&devs, &tabs)?;
            let mut outs: Vec<Vec<T>> = Vec::with_capacity(n);
            for r in 0..n {
                let d = &devs[device_of[r]];
                let off = io_off(r, chunk).1 as usize;
                let arena = &arena_mem[device_of[r]];
                let o_len = plan.bufs.o_chunks as u64 * chunk;
                let mut host = vec![0u8; (o_len * esz) as usize];
                d.stream
                    .memcpy_dtoh(&arena.slice(off..off + host.len()), &mut host)
                    .map_err(cu("download output"))?;
                outs.push(host.chunks_exact(esz as usize).map(T::get).collect());
            }
            let refs: Vec<&[T]> = outs.iter().map(|v| v.as_slice()).collect();
            wrong = Some(super::super::check_outputs::<T, O>(
                plan.coll,
                &refs,
                n,
                plan.c,
                chunk as usize,
            ));
        }
        for _ in 0..opts.warmup {
            launch_all(work)?;
            work += 1;
        }
        check_status(&devs, &tabs)?;
        let ev = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let mut starts = Vec::new();
        for d in &devs {
            starts.push(d.stream.record_event(ev).map_err(cu("event"))?);
        }
        for _ in 0..opts.iters {
            launch_all(work)?;
            work += 1;
        }
        let mut ends = Vec::new();
        for d in &devs {
            ends.push(d.stream.record_event(ev).map_err(cu("event"))?);
        }
        check_status(&devs, &tabs)?;
        let mut ms = 0.0f64;
        for (a, b) in starts.iter().zip(&ends) {
            ms = ms.max(a.elapsed_ms(b).map_err(cu("elapsed"))? as f64);
        }
        let secs = ms * 1e-3 / opts.iters as f64;
        let size_bytes = chunk * plan.c as u64 * esz;
        rows.push(super::super::SizeResult::measured(
            plan.coll,
            size_bytes,
            req,
            plan.coll.element_count(n, size_bytes, esz as usize),
            secs,
            n,
            membw,
            wrong,
        ));
    }
    drop((fifo_mem, fifo_ctrl_mem, tabs, arena_mem));
    Ok((rows, membw, threads as usize))
}

fn params(
    d: &Dev,
    p: [u64; 7],
    enc: &layout::Encoded,
    geo: Geometry,
    work: u64,
    opts: &RunOptions,
    multi: bool,
) -> Params {
    Params {
        steps: p[0],
        tbs: p[1],
        bufs: p[2],
        fifo_data: p[3],
        fifo_ctrl: p[4],
        flags: p[5],
        status: p[6],
        chunk: geo.chunk,
        tile: geo.tile,
        ntiles: geo.ntiles,
        step_stride: enc.step_stride,
        work,
        slots: geo.slots,
        timeout_ns: opts.stall_timeout.as_nanos().min(u64::MAX as u128) as u64,
        merge: geo.merge,
        sys_fence: u64::from(multi),
        tb_base: d.tb_base as i32,
        ntbs: d.ntbs as i32,
    }
}

/// Decode the kernel's stall record (status[1..7]).
pub(super) fn stall_report(plan: &Plan, st: &[u64], flags: &[u64], after_ms: u64) -> ExecError {
    let first = layout::LeftWait {
        tb: st.get(1).copied().unwrap_or(0) as usize,
        what: st.get(4).copied().unwrap_or(0),
        step: st.get(2).copied().unwrap_or(0) as usize,
        tile: st.get(3).copied().unwrap_or(0),
        have: st.get(5).copied().unwrap_or(0),
        want: st.get(6).copied().unwrap_or(0),
    };
    let Some(head) = tb_wait(plan, &first) else {
        return ExecError::Spawn(format!(
            "GPU kernel aborted with an invalid stall record {st:?}"
        ));
    };
    // The block that timed out first, then every other wait a block gave
    // up when it saw the abort flag.
    let mut waits = vec![head];
    waits.extend(
        layout::left_waits(flags)
            .iter()
            .filter(|w| (w.tb, w.what) != (first.tb, first.what))
            .filter_map(|w| tb_wait(plan, w)),
    );
    ExecError::Stalled(StallReport { after_ms, waits })
}

/// One abandoned wait as the stall report words it (the CPU watchdog's
/// phrasing); None when the record names no threadblock of the plan.
pub(super) fn tb_wait(plan: &Plan, w: &layout::LeftWait) -> Option<TbWait> {
    let t = plan.tbs.get(w.tb)?;
    let kind = t
        .steps
        .get(w.step)
        .map_or("?".to_string(), |s| s.kind.to_string());
    let (have, want) = (w.have, w.want);
    let waiting_for = match w.what {
        1 => format!(
            "data from rank {} (FIFO tail {have} < {want})",
            t.recv_peer.map_or(-1, |p| p as i64)
        ),
        2 => format!(
            "room towards rank {} (FIFO head {have} < {want})",
            t.send_peer.map_or(-1, |p| p as i64)
        ),
        3 => format!(
            "depid {} (progress key {have} < {want})",
            t.steps
                .get(w.step)
                .and_then(|s| s.dep)
                .map_or(-1, |(d, _)| plan.tbs.get(d).map_or(-1, |x| x.id))
        ),
        _ => "?".into(),
    };
    Some(TbWait {
        rank: t.rank,
        tb: t.id,
        step: w.step,
        kind,
        work: 0,
        tile: w.tile,
        waiting_for,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_layout_matches_the_kernel() {
        // 16 u64 + 2 i32, no padding: the kernel reads it by value.
        assert_eq!(std::mem::size_of::<Params>(), 16 * 8 + 8);
        assert_eq!(std::mem::size_of::<DevStep>(), 32);
        assert_eq!(std::mem::size_of::<DevTb>(), 32);
    }
}
