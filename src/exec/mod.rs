//! Executors: run a Program on real data.
//!
//! `run_program` is the entry point (the CLI's `rscc run` and, later, the
//! synthesize-then-run path call it). The CPU engine (`cpu`) runs all ranks
//! as threads of this process with MSCCL's semantics; see docs/executor.md.

pub mod builtin;
mod cpu;
pub mod cuda;
pub mod elem;
pub mod membw;
pub mod numa;
mod plan;

pub use elem::{DType, RedOp};
pub use numa::Placement;

use crate::ir::{Collective, Program};
use elem::{Elem, Max, Min, Op, Prod, Sum};
use half::{bf16, f16};
use std::fmt;
use std::time::Duration;

/// What to run and how.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub dtype: DType,
    pub redop: RedOp,
    /// Per-rank input sizes in bytes (nccl-tests' S). Each is rounded down
    /// to a multiple of `nchunksperloop` elements (up to one element per
    /// chunk if smaller).
    pub sizes: Vec<u64>,
    /// Timed iterations per size (≥ 1).
    pub iters: u64,
    /// Untimed iterations before the timed ones.
    pub warmup: u64,
    /// Run once on known data first and compare with the reference.
    pub check: bool,
    /// `Some(true)`: in place (`o` aliases `i[rank·C/R …]`); `Some(false)`:
    /// out of place; `None`: out of place if the program allows it.
    pub inplace: Option<bool>,
    /// Tile size in bytes: each chunk is processed in tiles of this size,
    /// and every FIFO slot holds one tile.
    pub tile_bytes: usize,
    /// Slots per connection FIFO.
    pub fifo_slots: usize,
    /// The watchdog stops a run when no threadblock made progress for this
    /// long.
    pub stall_timeout: Duration,
    /// Measure memory bandwidth (STREAM-like `a += b`) over arrays of this
    /// size: on the CPU right before and right after each size's timed
    /// phase, on the GPU once first; 0 skips it.
    pub membw_bytes: usize,
    /// CPU worker threads that run the threadblocks as tasks; 0: one per
    /// 256 KiB of memory traffic per call, up to the cores.
    pub workers: usize,
    /// Testing aid: the threadblock with this global index (ranks in order,
    /// then their threadblocks) fails at its first step, as an executor bug
    /// would. None in every real run.
    #[doc(hidden)]
    pub inject_fault: Option<usize>,
    /// A send whose data lies in one of the sender's buffers, and stays
    /// there until taken, hands the receiver where it lies instead of a
    /// copy in a FIFO slot (docs/executor.md "Zero-copy sends"); false
    /// copies every send, as MSCCL does.
    pub zero_copy: bool,
    /// CPU backend: a reduction chain (the `rrc`s of threadblocks that wait
    /// on one another and reduce into one range) runs in one pass over the
    /// range where its links are ready (docs/executor.md "Reduction chains
    /// in one pass"); false runs every step alone. The results are the
    /// same bit for bit.
    pub fuse_chains: bool,
    /// CPU backend: where workers run and buffers lie on a machine of
    /// several memory nodes (`numa`).
    pub placement: Placement,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            dtype: DType::F32,
            redop: RedOp::Sum,
            sizes: vec![1 << 20],
            iters: 20,
            warmup: 5,
            check: false,
            inplace: None,
            tile_bytes: 256 << 10,
            fifo_slots: 2,
            stall_timeout: Duration::from_secs(2),
            membw_bytes: 0,
            workers: 0,
            inject_fault: None,
            zero_copy: true,
            fuse_chains: true,
            placement: Placement::Auto,
        }
    }
}

/// Wrong elements of one output chunk of one rank.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct WrongChunk {
    pub rank: usize,
    /// Chunk index in the rank's output (0 .. C/R).
    pub chunk: usize,
    /// The same chunk as an index of the input buffer (rank·C/R + chunk).
    pub input_chunk: usize,
    pub wrong: u64,
    /// First wrong element (index within the rank's output).
    pub first_elem: usize,
    pub got: f64,
    pub want: f64,
}

/// One size's result, in nccl-tests' definitions.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SizeResult {
    /// nccl-tests' S actually run: the full buffer, C whole chunks.
    pub size_bytes: u64,
    /// The size asked for, when it had to be rounded.
    pub requested_bytes: u64,
    /// NCCL's count of the call: recvcount (reduce-scatter), sendcount
    /// (allgather), count (allreduce).
    pub count: u64,
    pub time_us: f64,
    pub algbw_gbps: f64,
    pub busbw_gbps: f64,
    /// (N+1)·S / t as a fraction of the measured memory bandwidth.
    pub membw_frac: Option<f64>,
    /// The memory bandwidth that fraction is of (GB/s): on the CPU the
    /// mean of the samples taken right before and right after this size's
    /// timed phase.
    pub membw_gbps: Option<f64>,
    /// Wrong elements (None when not checked).
    pub wrong: Option<u64>,
    pub correct: Option<bool>,
    pub wrong_chunks: Vec<WrongChunk>,
    /// CPU: worker threads that ran this size (None on the GPU).
    pub workers: Option<usize>,
    /// CPU: steps per call that ran as later links of a reduction chain
    /// in one pass (docs/executor.md "Reduction chains in one pass"; None
    /// on the GPU).
    pub chained_steps: Option<f64>,
}

impl SizeResult {
    /// One row from the measured time per iteration, with nccl-tests'
    /// definitions (algbw = S/t, busbw = algbw·(N−1)/N) and the reference
    /// check's outcome (None when not checked). Both backends report
    /// through it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn measured(
        coll: Collective,
        size_bytes: u64,
        requested_bytes: u64,
        count: u64,
        secs: f64,
        n: usize,
        membw: Option<f64>,
        checked: Option<(u64, Vec<WrongChunk>)>,
    ) -> Self {
        let algbw = if secs > 0.0 {
            size_bytes as f64 / secs / 1e9
        } else {
            0.0
        };
        let (wrong, wrong_chunks) = match checked {
            Some((w, v)) => (Some(w), v),
            None => (None, Vec::new()),
        };
        SizeResult {
            size_bytes,
            requested_bytes,
            count,
            time_us: secs * 1e6,
            algbw_gbps: algbw,
            busbw_gbps: algbw * coll.busbw_factor(n),
            membw_frac: membw.map(|b| (n as f64 + 1.0) * algbw / b),
            membw_gbps: membw,
            correct: wrong.map(|w| w == 0),
            wrong,
            wrong_chunks,
            workers: None,
            chained_steps: None,
        }
    }
}

/// A whole run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    pub name: String,
    pub ranks: usize,
    pub dtype: String,
    pub redop: String,
    pub inplace: bool,
    pub tile_bytes: usize,
    /// CPU: worker threads; CUDA: threads per block.
    pub threads: usize,
    /// Threadblocks of the Program, all ranks.
    pub threadblocks: usize,
    /// Measured memory bandwidth (GB/s, bytes read + written per second).
    pub membw_gbps: Option<f64>,
    pub rows: Vec<SizeResult>,
}

impl Report {
    /// No checked size had a wrong element.
    pub fn correct(&self) -> bool {
        self.rows.iter().all(|r| r.wrong.unwrap_or(0) == 0)
    }
}

/// Why a run could not complete.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ExecError {
    #[error("unsupported program: {0}")]
    Unsupported(String),
    #[error("rank {rank} tb {tb}{}{}: {msg}", step.map_or(String::new(), |s| format!(" step {s}")), if *line > 0 { format!(" (line {line})") } else { String::new() })]
    Malformed {
        rank: usize,
        tb: i64,
        step: Option<usize>,
        line: usize,
        msg: String,
    },
    #[error("size: {0}")]
    Size(String),
    #[error("{0}")]
    Stalled(StallReport),
    #[error("{0}")]
    Spawn(String),
    /// A worker failed (panicked) while running a threadblock; the run was
    /// stopped and nothing it computed is reported.
    #[error("rank {rank} tb {tb}: the run failed: {msg}")]
    Fault { rank: usize, tb: i64, msg: String },
}

/// What every unfinished threadblock waited on when the watchdog fired.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StallReport {
    pub after_ms: u64,
    pub waits: Vec<TbWait>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TbWait {
    pub rank: usize,
    pub tb: i64,
    /// Step position (XML `s`).
    pub step: usize,
    pub kind: String,
    pub work: u64,
    pub tile: u64,
    pub waiting_for: String,
}

impl fmt::Display for StallReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "watchdog: no threadblock made progress for {} ms; stopped. Waiting threadblocks:",
            self.after_ms
        )?;
        for w in &self.waits {
            writeln!(
                f,
                "  rank {} tb {} step {} ({}) [iteration {}, tile {}]: waits for {}",
                w.rank, w.tb, w.step, w.kind, w.work, w.tile, w.waiting_for
            )?;
        }
        Ok(())
    }
}

/// Whether to run in place (the caller's choice, else out of place when the
/// Program allows it), refusing a mode the Program does not declare and
/// zero iterations. Shared by every backend.
pub(crate) fn aliasing_mode(prog: &Program, opts: &RunOptions) -> Result<bool, ExecError> {
    let inplace = match opts.inplace {
        Some(true) if !prog.inplace => {
            return Err(ExecError::Unsupported(format!(
                "{} is not marked inplace=\"1\"",
                prog.name
            )))
        }
        Some(false) if !prog.outofplace => {
            return Err(ExecError::Unsupported(format!(
                "{} is not marked outofplace=\"1\"",
                prog.name
            )))
        }
        Some(x) => x,
        None => !prog.outofplace && prog.inplace,
    };
    if opts.iters == 0 {
        return Err(ExecError::Size("iters must be at least 1".into()));
    }
    Ok(inplace)
}

/// Run `prog` for every size in `opts` and report times (and, with
/// `opts.check`, correctness). Does not call the verifier: callers do that
/// first (the CLI unless `--no-verify`). Malformed programs are refused
/// with `ExecError::Malformed` whatever the verifier said.
pub fn run_program(prog: &Program, opts: &RunOptions) -> Result<Report, ExecError> {
    let plan = plan::build(prog)?;
    let inplace = aliasing_mode(prog, opts)?;
    let mut bw = (opts.membw_bytes > 0).then(|| membw::Bandwidth::new(opts.membw_bytes));
    macro_rules! by_op {
        ($t:ty) => {
            match opts.redop {
                RedOp::Sum => run_typed::<$t, Sum>(&plan, opts, inplace, bw.as_mut()),
                RedOp::Prod => run_typed::<$t, Prod>(&plan, opts, inplace, bw.as_mut()),
                RedOp::Max => run_typed::<$t, Max>(&plan, opts, inplace, bw.as_mut()),
                RedOp::Min => run_typed::<$t, Min>(&plan, opts, inplace, bw.as_mut()),
            }
        };
    }
    let rows: Vec<SizeResult> = match opts.dtype {
        DType::F32 => by_op!(f32),
        DType::F64 => by_op!(f64),
        DType::F16 => by_op!(f16),
        DType::Bf16 => by_op!(bf16),
        DType::I32 => by_op!(i32),
        DType::I64 => by_op!(i64),
        DType::U8 => by_op!(u8),
    }?;
    Ok(Report {
        name: prog.name.clone(),
        ranks: plan.nranks,
        dtype: opts.dtype.name().to_string(),
        redop: opts.redop.name().to_string(),
        inplace,
        tile_bytes: opts.tile_bytes,
        threads: rows.iter().filter_map(|r| r.workers).max().unwrap_or(1),
        threadblocks: plan.tbs.len(),
        membw_gbps: mean_membw(&rows),
        rows,
    })
}

/// The mean of the rows' memory bandwidths, where they have one.
fn mean_membw(rows: &[SizeResult]) -> Option<f64> {
    let b: Vec<f64> = rows.iter().filter_map(|r| r.membw_gbps).collect();
    (!b.is_empty()).then(|| b.iter().sum::<f64>() / b.len() as f64)
}

/// This machine's cores (hardware threads).
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Elements per chunk for a requested size (nccl-tests' S, the full
/// buffer): whole loops of C chunks, at least one element per chunk.
pub fn chunk_for(size_bytes: u64, esize: usize, c: usize) -> u64 {
    let elems = size_bytes / esize.max(1) as u64;
    (elems / c.max(1) as u64).max(1)
}

/// Passes per memory-bandwidth sample (the best counts).
const BW_PASSES: usize = 2;

fn run_typed<T: Elem, O: Op<T>>(
    plan: &plan::Plan,
    opts: &RunOptions,
    inplace: bool,
    mut bw: Option<&mut membw::Bandwidth>,
) -> Result<Vec<SizeResult>, ExecError> {
    let n = plan.nranks;
    let esz = std::mem::size_of::<T>();
    let chunks: Vec<(u64, usize)> = opts
        .sizes
        .iter()
        .map(|&s| (s, chunk_for(s, esz, plan.c) as usize))
        .collect();
    let max_chunk = chunks.iter().map(|c| c.1).max().unwrap_or(0);
    if max_chunk.saturating_mul(plan.c).saturating_mul(esz) > (1usize << 40) {
        return Err(ExecError::Size("sizes above 1 TiB per rank".into()));
    }
    let workers_for = |chunk: usize| match opts.workers {
        0 => cpu::auto_workers(cores(), (n + 1) * chunk * plan.c * esz).min(plan.tbs.len().max(1)),
        w => w.min(plan.tbs.len().max(1)),
    };
    // Each rank's buffers on the node of the worker that runs most of its
    // steps at the largest size, where its bandwidth counts.
    let nodes = opts.placement.nodes();
    let rank_node = nodes.as_ref().map(|nodes| {
        let w = workers_for(max_chunk);
        let rank: Vec<usize> = plan.tbs.iter().map(|t| t.rank).collect();
        let weights = cpu::tb_weights(plan);
        numa::rank_nodes(nodes, n, &rank, &cpu::tb_workers(plan, w), &weights, w)
    });
    let place = nodes.as_ref().zip(rank_node.as_deref());
    let mut bufs = cpu::Buffers::<T>::new(plan, max_chunk, place)?;
    let mut rows = Vec::new();
    let max_cnt = plan.max_cnt();
    for (req, chunk) in chunks {
        // The full buffer (nccl-tests' S), in elements.
        let full = chunk * plan.c;
        let (tile, merge) = plan::tile_and_merge(chunk, opts.tile_bytes / esz, max_cnt, esz);
        let geo = cpu::Geometry {
            chunk,
            tile,
            merge,
            fifo_slots: opts.fifo_slots.max(1),
            inplace,
            stall: opts.stall_timeout,
            workers: workers_for(chunk),
            fault: opts.inject_fault,
            zero_copy: opts.zero_copy,
            fuse_chains: opts.fuse_chains,
        };
        fill_inputs::<T, O>(plan, &mut bufs, chunk, inplace);
        let phases: Vec<u64> = if opts.check {
            vec![1, opts.warmup, opts.iters]
        } else {
            vec![opts.warmup, opts.iters]
        };
        let mut checked: Option<(u64, Vec<WrongChunk>)> = None;
        // Sampled while no worker runs: the pool lives inside `cpu::run`.
        let before = bw.as_mut().map(|b| b.sample(BW_PASSES));
        let times = cpu::run::<T, O>(plan, geo, &mut bufs, &phases, nodes.as_ref(), |pi, outs| {
            if opts.check && pi == 0 {
                checked = Some(check_outputs::<T, O>(plan.coll, outs, n, plan.c, chunk));
            }
        })?;
        let after = bw.as_mut().map(|b| b.sample(BW_PASSES));
        let membw = before.zip(after).map(|(x, y)| (x + y) / 2.0);
        let secs = times.secs.last().copied().unwrap_or(0.0) / opts.iters as f64;
        let size_bytes = (full * esz) as u64;
        let mut row = SizeResult::measured(
            plan.coll,
            size_bytes,
            req,
            plan.coll.element_count(n, size_bytes, esz),
            secs,
            n,
            membw,
            checked,
        );
        row.workers = Some(geo.workers);
        row.chained_steps = times.chained.last().map(|&k| k as f64 / opts.iters as f64);
        rows.push(row);
    }
    Ok(rows)
}

/// Every rank's input filled with its pattern (elem.rs) — for an
/// allgather rank r's input is its shard of the full buffer, the pattern
/// at the shard's global indices — and every element nothing should read
/// first (output, scratch) poisoned. In place the input lies inside the
/// output (allgather) or the output inside the input (the others).
fn fill_inputs<T: Elem, O: Op<T>>(
    plan: &plan::Plan,
    bufs: &mut cpu::Buffers<T>,
    chunk: usize,
    inplace: bool,
) {
    let n = plan.nranks;
    let (i_len, o_len) = (plan.bufs.i_chunks * chunk, plan.bufs.o_chunks * chunk);
    for r in 0..n {
        // Global index of input element 0.
        let base = if plan.coll == Collective::AllGather {
            r * i_len
        } else {
            0
        };
        bufs.output[r][..o_len].fill(T::poison());
        let input = if inplace && plan.coll == Collective::AllGather {
            &mut bufs.output[r][base..base + i_len]
        } else {
            &mut bufs.input[r][..i_len]
        };
        crate::par::for_parts(input, 1, |off, part| {
            for (i, x) in part.iter_mut().enumerate() {
                *x = T::from_pattern(elem::pattern(O::OP, r, base + off + i));
            }
        });
        let sl = plan.s_chunks[r] * chunk;
        bufs.scratch[r][..sl].fill(T::poison());
    }
}

/// Compare every rank's output with the reference; count wrong elements per
/// (rank, output chunk), for a schedule of `c` chunks of `chunk` elements.
/// The reference of output element e at rank r: the reduction over ranks
/// of global element r·shard + e (reduce-scatter, `shard` = c/n chunks per
/// rank) or e (allreduce), or the owner's input, bit for bit (allgather:
/// the owner of e is e / shard). Ranks are checked on all cores.
pub(crate) fn check_outputs<T: Elem, O: Op<T>>(
    coll: Collective,
    outs: &[&[T]],
    n: usize,
    c: usize,
    chunk: usize,
) -> (u64, Vec<WrongChunk>) {
    let shard_chunks = c / n.max(1);
    let count = shard_chunks * chunk;
    let len = coll.buffers(c, n).o_chunks * chunk;
    let ranks: Vec<usize> = (0..outs.len()).collect();
    let per_rank = crate::par::map(&ranks, |&r| {
        let mut total = 0;
        let mut list: Vec<WrongChunk> = Vec::new();
        for (e, &got) in outs[r].iter().take(len).enumerate() {
            let ok_want = match coll {
                Collective::AllGather => {
                    let want = T::from_pattern(elem::pattern(O::OP, e / count.max(1), e));
                    (got.to_f64().to_bits() == want.to_f64().to_bits(), want)
                }
                Collective::ReduceScatter | Collective::AllReduce => {
                    let idx = if coll == Collective::ReduceScatter {
                        r * count + e
                    } else {
                        e
                    };
                    let (want, mag) = elem::reference::<T, O>(n, idx);
                    (elem::accept(O::OP, n, got, want, mag), want)
                }
            };
            let (ok, want) = ok_want;
            if ok {
                continue;
            }
            total += 1;
            let k = e / chunk.max(1);
            match list.last_mut() {
                Some(w) if w.chunk == k => w.wrong += 1,
                _ => list.push(WrongChunk {
                    rank: r,
                    chunk: k,
                    input_chunk: if coll == Collective::ReduceScatter {
                        r * shard_chunks + k
                    } else {
                        k
                    },
                    wrong: 1,
                    first_elem: e,
                    got: got.to_f64(),
                    want: want.to_f64(),
                }),
            }
        }
        (total, list)
    });
    per_rank
        .into_iter()
        .fold((0, Vec::new()), |(t, mut l), (rt, rl)| {
            l.extend(rl);
            (t + rt, l)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_round_down_to_whole_chunks() {
        // 8 chunks per loop, f32: 1 KiB = 256 elements -> 32 per chunk.
        assert_eq!(chunk_for(1024, 4, 8), 32);
        // 1000 B = 250 elements -> 248 (multiple of 8) -> 31.
        assert_eq!(chunk_for(1000, 4, 8), 31);
        // Below one element per chunk: rounded up to one.
        assert_eq!(chunk_for(4, 4, 64), 1);
        // One chunk (a fused allreduce): every element count as asked.
        assert_eq!(chunk_for(4004, 4, 1), 1001);
    }
}
