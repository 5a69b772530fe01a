//! Host-side planning for the GPU executor, free of any CUDA call so it is
//! unit-tested everywhere: the device encoding of a Plan (steps and
//! threadblocks), the per-rank buffer layout, FIFO sizing and the launch
//! geometry with its co-residency check.

use super::super::plan::Plan;
use super::super::ExecError;
use crate::ir::spec::{Alias, Buffers};
use crate::ir::{Buf, StepKind};

/// Device step, `struct Step` in kernel.cu (8 × i32, 32 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DevStep {
    /// `K_*` code in the low byte, bit 8 = publish progress after the step.
    pub kind: i32,
    pub src_buf: i32,
    pub src_off: i32,
    pub dst_buf: i32,
    pub dst_off: i32,
    pub cnt: i32,
    /// Global threadblock index to wait for, or -1.
    pub dep_tb: i32,
    pub dep_step: i32,
}

/// Device threadblock, `struct Tb` in kernel.cu (8 × i32).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DevTb {
    pub rank: i32,
    pub first_step: i32,
    pub nsteps: i32,
    pub send_fifo: i32,
    pub recv_fifo: i32,
    pub pad: [i32; 3],
}

/// Publish bit in `DevStep::kind`.
pub const PUBLISH: i32 = 0x100;
/// Zero-copy bit in `DevStep::kind`: a send that hands over where its data
/// lies (`plan::zero_copy_sends`): an `s` its source, an `rcs`/`rrcs` its
/// destination.
pub const ZERO_COPY: i32 = 0x200;

/// The kernel's step code (`K_*` in kernel.cu).
pub fn kind_code(k: StepKind) -> i32 {
    match k {
        StepKind::Nop => 0,
        StepKind::Send => 1,
        StepKind::Recv => 2,
        StepKind::RecvCopySend => 3,
        StepKind::RecvReduceSend => 4,
        StepKind::RecvReduceCopy => 5,
        StepKind::RecvReduceCopySend => 6,
        StepKind::Copy => 7,
        StepKind::Reduce => 8,
    }
}

fn buf_code(b: Buf) -> i32 {
    match b {
        Buf::Input => 0,
        Buf::Output => 1,
        Buf::Scratch => 2,
    }
}

/// A Plan as the kernel reads it.
#[derive(Debug, Clone)]
pub struct Encoded {
    pub steps: Vec<DevStep>,
    pub tbs: Vec<DevTb>,
    /// Progress keys are `(work·ntiles + tile)·step_stride + step + 1`.
    pub step_stride: u64,
}

fn i32_of(v: usize, what: &str) -> Result<i32, ExecError> {
    i32::try_from(v).map_err(|_| ExecError::Unsupported(format!("{what} {v} exceeds 2^31")))
}

/// `zero_copy`: per threadblock and step, how its send's data reaches the
/// receiver (empty: every send copied).
pub(crate) fn encode(
    plan: &Plan,
    zero_copy: &[Vec<crate::exec::plan::ZeroCopy>],
) -> Result<Encoded, ExecError> {
    let mut steps = Vec::new();
    let mut tbs = Vec::with_capacity(plan.tbs.len());
    for (t, tb) in plan.tbs.iter().enumerate() {
        tbs.push(DevTb {
            rank: i32_of(tb.rank, "rank")?,
            first_step: i32_of(steps.len(), "step count")?,
            nsteps: i32_of(tb.steps.len(), "steps")?,
            send_fifo: tb.send_fifo.map_or(Ok(-1), |f| i32_of(f, "fifo"))?,
            recv_fifo: tb.recv_fifo.map_or(Ok(-1), |f| i32_of(f, "fifo"))?,
            pad: [0; 3],
        });
        for (pos, s) in tb.steps.iter().enumerate() {
            let zc = zero_copy
                .get(t)
                .and_then(|z| z.get(pos))
                .is_some_and(|&z| z != crate::exec::plan::ZeroCopy::No);
            let (dep_tb, dep_step) = match s.dep {
                Some((t, p)) => (i32_of(t, "tb")?, i32_of(p, "step")?),
                None => (-1, 0),
            };
            steps.push(DevStep {
                kind: kind_code(s.kind)
                    | if s.publish { PUBLISH } else { 0 }
                    | if zc { ZERO_COPY } else { 0 },
                src_buf: buf_code(s.src.0),
                src_off: i32_of(s.src.1, "offset")?,
                dst_buf: buf_code(s.dst.0),
                dst_off: i32_of(s.dst.1, "offset")?,
                cnt: i32_of(s.cnt, "cnt")?,
                dep_tb,
                dep_step,
            });
        }
    }
    Ok(Encoded {
        steps,
        tbs,
        step_stride: plan.max_steps as u64 + 1,
    })
}

/// Byte range of one buffer inside its device allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub offset: u64,
    pub bytes: u64,
}

/// Where one rank's input, output and scratch lie in its device's arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankBufs {
    pub input: Range,
    pub output: Range,
    pub scratch: Range,
}

/// Every buffer starts on this boundary (so 16-byte vector accesses stay
/// aligned whenever chunk sizes are multiples of 16 bytes).
pub const ALIGN: u64 = 256;

fn round_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

/// Buffer layout for chunks of up to `max_chunk` elements of a collective
/// with buffers `io` (chunks of `i` and `o` per loop): ranks
/// mapped to the same device (`device_of[r]`) share one arena per device.
/// Both ranges are reserved whatever the call mode; `io_offsets` says where
/// an in-place call's buffers lie. Returns each rank's ranges and each
/// device's arena size.
pub fn buffer_layout(
    io: Buffers,
    s_chunks: &[usize],
    max_chunk: u64,
    esize: u64,
    device_of: &[usize],
) -> Result<(Vec<RankBufs>, Vec<u64>), ExecError> {
    let ndev = device_of.iter().copied().max().map_or(0, |d| d + 1);
    let mut arena = vec![0u64; ndev];
    let chunk = max_chunk;
    let mut out = Vec::with_capacity(s_chunks.len());
    let ovf = || ExecError::Size("buffer sizes overflow".into());
    let bytes_of = |chunks: u64| {
        chunks
            .checked_mul(chunk)
            .and_then(|x| x.checked_mul(esize))
            .ok_or_else(ovf)
    };
    for (r, &sc) in s_chunks.iter().enumerate() {
        let d = *device_of
            .get(r)
            .ok_or_else(|| ExecError::Spawn(format!("rank {r} has no device")))?;
        let mut take = |bytes: u64| -> Result<Range, ExecError> {
            let off = arena[d];
            arena[d] = round_up(off.checked_add(bytes).ok_or_else(ovf)?, ALIGN);
            Ok(Range { offset: off, bytes })
        };
        let input = take(bytes_of(io.i_chunks as u64)?)?;
        let output = take(bytes_of(io.o_chunks as u64)?)?;
        let scratch = take(bytes_of(sc as u64)?)?;
        out.push(RankBufs {
            input,
            output,
            scratch,
        });
    }
    Ok((out, arena))
}

/// Byte offsets of rank `r`'s input and output within its arena for one
/// call whose chunks are `chunk_bytes` long. Out of place each buffer is
/// its own range; in place they overlap as MSCCL aliases them
/// (msccl-xml.md §5.2): `o` is `i[r·|o| ..]` (reduce-scatter), `i` is
/// `o[r·|i| ..]` (allgather) or `o` is `i` (allreduce).
pub fn io_offsets(
    b: &RankBufs,
    io: Buffers,
    inplace: bool,
    r: usize,
    chunk_bytes: u64,
) -> (u64, u64) {
    let (i_b, o_b) = (
        io.i_chunks as u64 * chunk_bytes,
        io.o_chunks as u64 * chunk_bytes,
    );
    match (inplace, io.alias) {
        (false, _) => (b.input.offset, b.output.offset),
        (true, Alias::OutInInput) => (b.input.offset, b.input.offset + r as u64 * o_b),
        (true, Alias::InputInOut) => (b.output.offset + r as u64 * i_b, b.output.offset),
        (true, Alias::Same) => (b.input.offset, b.input.offset),
    }
}

/// Per-size engine geometry in elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    pub chunk: u64,
    pub tile: u64,
    pub ntiles: u64,
    pub slots: u64,
    /// Adjacent chunks one call of a multi-chunk step moves through one
    /// FIFO slot (`plan::tile_and_merge`, shared with the CPU engine).
    pub merge: u64,
}

/// The CPU engine's tile and call rule (`plan::tile_and_merge`), with the
/// staging tile `tile_bytes` first rounded down to whole 16-byte vectors (so
/// staged FIFO slots stay 16-byte aligned), at least one vector.
pub fn geometry(chunk: u64, tile_bytes: u64, esize: u64, slots: u64, max_cnt: u64) -> Geometry {
    let vec = (16 / esize.max(1)).max(1);
    let staged = ((tile_bytes / esize.max(1)) / vec * vec).max(vec);
    let (tile, merge) = crate::exec::plan::tile_and_merge(
        chunk as usize,
        staged as usize,
        max_cnt as usize,
        esize as usize,
    );
    let tile = tile as u64;
    Geometry {
        chunk,
        tile,
        ntiles: chunk.div_ceil(tile).max(1),
        slots: slots.max(1),
        merge: merge as u64,
    }
}

/// Bytes of slot memory one FIFO needs for tiles of up to `max_tile`
/// elements.
pub fn fifo_bytes(slots: u64, max_tile: u64, esize: u64) -> u64 {
    round_up(slots.max(1) * max_tile.max(1) * esize, ALIGN)
}

/// Control words per FIFO (u64): head at 0, tail at 16 (separate 128-byte
/// lines), then from word 32 one per slot (at most 64 slots): the address
/// of the data a zero-copy send handed over through that slot, or 0.
pub const FIFO_CTRL_WORDS: usize = 32 + 64;
/// Progress-flag words per threadblock (one 128-byte line): word 0 the
/// progress key, words 1–12 the waits the block gave up (`LeftWait`).
pub const FLAG_WORDS: usize = 16;

/// A wait a block gave up when the watchdog fired (kernel.cu
/// `leave_wait`): `what` 1 a receive, 2 a send, 3 a dependency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeftWait {
    /// Global threadblock index.
    pub tb: usize,
    pub what: u64,
    pub step: usize,
    pub tile: u64,
    pub have: u64,
    pub want: u64,
}

/// Every wait recorded in the flag lines `flags` (FLAG_WORDS per
/// threadblock, in threadblock order): words 1 + 4·(what − 1) hold
/// step + 1 (0: none), tile, the value last read and the value wanted.
pub fn left_waits(flags: &[u64]) -> Vec<LeftWait> {
    let mut out = Vec::new();
    for (tb, line) in flags.chunks_exact(FLAG_WORDS).enumerate() {
        for what in 1..=3u64 {
            let w = &line[1 + 4 * (what as usize - 1)..][..4];
            if w[0] != 0 {
                out.push(LeftWait {
                    tb,
                    what,
                    step: (w[0] - 1) as usize,
                    tile: w[1],
                    have: w[2],
                    want: w[3],
                });
            }
        }
    }
    out
}

/// Threads per block: 512 for large tiles, fewer when a tile has fewer
/// 16-byte vectors than that (a warp at least).
pub fn threads_per_block(tile: u64, esize: u64) -> u32 {
    let vecs = (tile * esize).div_ceil(16);
    let t = vecs.next_power_of_two().clamp(32, 512);
    t as u32
}

/// Every block of a launch spin-waits on others, so all must be resident at
/// once: `blocks ≤ per_sm × sms`.
pub fn check_coresident(blocks: u64, per_sm: u64, sms: u64, threads: u32) -> Result<(), ExecError> {
    let cap = per_sm * sms;
    if blocks > cap {
        return Err(ExecError::Unsupported(format!(
            "{blocks} threadblocks cannot be co-resident on this GPU ({sms} SMs × {per_sm} blocks of {threads} threads = {cap}); \
             the kernel spin-waits, so it would hang — use fewer ranks per GPU (multi-GPU mode) or a schedule with fewer threadblocks"
        )));
    }
    Ok(())
}

/// The largest block size, from `start` halving down to 32, at which
/// `blocks` blocks are co-resident; `cap(t)` is how many blocks of `t`
/// threads the device holds at once (occupancy × SMs). Smaller blocks cost
/// bandwidth per threadblock but let schedules with many threadblocks run.
pub fn choose_threads(
    start: u32,
    blocks: u64,
    mut cap: impl FnMut(u32) -> Result<u64, ExecError>,
) -> Result<u32, ExecError> {
    let mut t = start.clamp(32, 1024);
    loop {
        let c = cap(t)?;
        if blocks <= c {
            return Ok(t);
        }
        if t <= 32 {
            return check_coresident(blocks, c, 1, t).map(|_| t);
        }
        t /= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::builtin;
    use crate::exec::plan;

    #[test]
    fn encoding_matches_the_plan() {
        let p = builtin::ring(4, 2);
        let pl = plan::build(&p).unwrap();
        let e = encode(&pl, &plan::zero_copy_sends(&pl, false)).unwrap();
        assert_eq!(e.tbs.len(), pl.tbs.len());
        let total: usize = pl.tbs.iter().map(|t| t.steps.len()).sum();
        assert_eq!(e.steps.len(), total);
        assert_eq!(e.step_stride, pl.max_steps as u64 + 1);
        for (tb, d) in pl.tbs.iter().zip(&e.tbs) {
            assert_eq!(d.rank as usize, tb.rank);
            assert_eq!(d.nsteps as usize, tb.steps.len());
            assert_eq!(d.send_fifo, tb.send_fifo.map_or(-1, |f| f as i32));
            assert_eq!(d.recv_fifo, tb.recv_fifo.map_or(-1, |f| f as i32));
            for (i, s) in tb.steps.iter().enumerate() {
                let ds = e.steps[d.first_step as usize + i];
                assert_eq!(ds.kind & 0xff, kind_code(s.kind));
                assert_eq!(ds.kind & PUBLISH != 0, s.publish);
                assert_eq!(ds.cnt as usize, s.cnt);
                assert_eq!(ds.src_off as usize, s.src.1);
                assert_eq!(ds.dst_off as usize, s.dst.1);
                match s.dep {
                    Some((t, st)) => assert_eq!((ds.dep_tb, ds.dep_step), (t as i32, st as i32)),
                    None => assert_eq!(ds.dep_tb, -1),
                }
            }
        }
        // Steps of consecutive threadblocks are contiguous.
        for w in e.tbs.windows(2) {
            assert_eq!(w[0].first_step + w[0].nsteps, w[1].first_step);
        }
    }

    #[test]
    fn kind_codes_are_distinct() {
        use StepKind::*;
        let all = [
            Nop,
            Send,
            Recv,
            RecvCopySend,
            RecvReduceSend,
            RecvReduceCopy,
            RecvReduceCopySend,
            Copy,
            Reduce,
        ];
        let mut codes: Vec<i32> = all.iter().map(|&k| kind_code(k)).collect();
        codes.sort();
        codes.dedup();
        assert_eq!(codes.len(), all.len());
        // kernel.cu defines the same codes.
        let src = super::super::KERNEL_SRC;
        for (name, code) in [("K_RRCS", 6), ("K_RE", 8), ("K_RCS", 3), ("K_NOP", 0)] {
            assert!(src.contains(&format!("#define {name} {code}")), "{name}");
        }
    }

    #[test]
    fn layout_is_aligned_disjoint_and_sized() {
        // 3 ranks, C = 6, scratch 0/2/1 chunks, chunks of 5 f32.
        let rs = crate::ir::Collective::ReduceScatter.buffers(6, 3);
        let (bufs, arena) = buffer_layout(rs, &[0, 2, 1], 5, 4, &[0, 0, 0]).unwrap();
        assert_eq!(arena.len(), 1);
        let mut all: Vec<Range> = Vec::new();
        for b in &bufs {
            assert_eq!(b.input.bytes, 10 * 3 * 4);
            assert_eq!(b.output.bytes, 10 * 4);
            all.extend([b.input, b.output, b.scratch]);
        }
        assert_eq!(bufs[1].scratch.bytes, 2 * 5 * 4);
        assert_eq!(bufs[0].scratch.bytes, 0);
        for r in &all {
            assert_eq!(r.offset % ALIGN, 0);
            assert!(r.offset + r.bytes <= arena[0]);
        }
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert!(a.offset + a.bytes <= b.offset || b.offset + b.bytes <= a.offset);
            }
        }
        // One device per rank: three arenas, each starting at 0.
        let (bufs, arena) = buffer_layout(rs, &[0, 2, 1], 5, 4, &[0, 1, 2]).unwrap();
        assert_eq!(arena.len(), 3);
        assert!(bufs.iter().all(|b| b.input.offset == 0));
        // Overflow is an error, not a panic.
        let one = crate::ir::Collective::ReduceScatter.buffers(1, 1);
        assert!(buffer_layout(one, &[1 << 20], u64::MAX / 2, 8, &[0]).is_err());
    }

    #[test]
    fn io_offsets_alias_per_op() {
        use crate::ir::Collective;
        // 2 ranks, C = 4 (2 chunks per shard), 8-byte chunks.
        for (coll, i_b, o_b) in [
            (Collective::ReduceScatter, 32, 16),
            (Collective::AllGather, 16, 32),
            (Collective::AllReduce, 32, 32),
        ] {
            let io = coll.buffers(4, 2);
            let (bufs, _) = buffer_layout(io, &[0, 0], 1, 8, &[0, 0]).unwrap();
            for (r, b) in bufs.iter().enumerate() {
                assert_eq!((b.input.bytes, b.output.bytes), (i_b, o_b), "{coll:?}");
                let (i, o) = io_offsets(b, io, false, r, 8);
                assert_eq!((i, o), (b.input.offset, b.output.offset));
                let (i, o) = io_offsets(b, io, true, r, 8);
                let r = r as u64;
                match coll {
                    // o = i[r·|o| ..], inside the input range.
                    Collective::ReduceScatter => {
                        assert_eq!((i, o), (b.input.offset, b.input.offset + r * o_b))
                    }
                    // i = o[r·|i| ..], inside the output range.
                    Collective::AllGather => {
                        assert_eq!((i, o), (b.output.offset + r * i_b, b.output.offset))
                    }
                    Collective::AllReduce => assert_eq!((i, o), (b.input.offset, b.input.offset)),
                }
            }
        }
    }

    #[test]
    fn geometry_tiles_cover_the_chunk() {
        let g = geometry(1000, 256, 4, 2, 1);
        assert_eq!(g.tile, 64);
        assert_eq!(g.ntiles, 16);
        assert!(g.tile * g.ntiles >= g.chunk);
        assert!(g.tile * (g.ntiles - 1) < g.chunk);
        // Tile rounded to whole 16-byte vectors: 100 B of f64 -> 12 elems.
        assert_eq!(geometry(1 << 20, 100, 8, 2, 1).tile, 12);
        // With single-chunk steps the tile never exceeds the chunk, and a
        // 1-element chunk works.
        let g = geometry(1, 1 << 20, 2, 0, 1);
        assert_eq!((g.tile, g.ntiles, g.slots, g.merge), (1, 1, 1, 1));
        // Steps of up to 10 chunks: a small chunk's tile holds 10 of them,
        // and one call moves all 10 through one slot, as on the CPU engine
        // (up to 71 per call by MSCCL's rule).
        let g = geometry(6, 256 << 10, 4, 2, 10);
        assert_eq!((g.tile, g.ntiles, g.merge), (60, 1, 71));
        // Merged calls follow MSCCL's 2 MiB Simple tile, not --tile: 100 000
        // f32 (400 KB) chunks merge 5 per call; one tile holds 5 chunks.
        let g = geometry(100_000, 256 << 10, 4, 2, 10);
        assert_eq!((g.tile, g.ntiles, g.merge), (500_000, 1, 5));
        // A chunk above 1 MiB: one chunk per call, staged in --tile pieces.
        let g = geometry(300_000, 256 << 10, 4, 2, 10);
        assert_eq!((g.tile, g.ntiles, g.merge), (65536, 5, 1));
        assert_eq!(fifo_bytes(2, 64, 4), 512);
        assert_eq!(fifo_bytes(2, 3, 2) % ALIGN, 0);
    }

    #[test]
    fn launch_geometry() {
        assert_eq!(threads_per_block(1 << 16, 4), 512);
        assert_eq!(threads_per_block(4, 4), 32);
        assert_eq!(threads_per_block(1024, 2), 128);
        assert!(check_coresident(132 * 4, 4, 132, 512).is_ok());
        let e = check_coresident(132 * 4 + 1, 4, 132, 512).unwrap_err();
        assert!(e.to_string().contains("co-resident"), "{e}");
        // A register-limited kernel: 2048 threads and 64K registers per SM,
        // 56 registers per thread, at most 32 blocks per SM, 132 SMs.
        let cap = |t: u32| -> Result<u64, ExecError> {
            let by_regs = 65536 / (t as u64 * 56);
            let by_threads = 2048 / t as u64;
            Ok(by_regs.min(by_threads).min(32) * 132)
        };
        assert_eq!(choose_threads(512, 200, cap).unwrap(), 512);
        assert_eq!(choose_threads(512, 480, cap).unwrap(), 256);
        assert_eq!(choose_threads(512, 2000, cap).unwrap(), 64);
        assert!(choose_threads(512, 5000, cap).is_err());
    }
}
