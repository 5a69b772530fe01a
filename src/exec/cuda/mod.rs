//! The GPU executor: the same Program semantics, report and reference check
//! as the CPU engine, run by a persistent CUDA kernel (kernel.cu, compiled at
//! run time by NVRTC for the device's compute capability) that interprets
//! each threadblock of the schedule as one CUDA block.
//!
//! Two placements: `Mode::Virtual` puts all N ranks on one GPU (separate
//! buffers, one launch of all threadblocks, which must be co-resident), and
//! `Mode::MultiGpu` puts rank r on GPU r (one launch per GPU, FIFOs in the
//! receiver's memory, written by the sender through peer access).
//!
//! CUDA is loaded dynamically (cudarc `dynamic-loading`): rscc builds and
//! runs without it, and every entry point checks that the driver / NVRTC
//! library can be loaded before calling into cudarc (which would panic).

#[cfg(test)]
mod emu;
pub mod layout;

use super::aliasing_mode;
use super::elem::{self, Elem, Max, Min, Op, Prod, Sum};
use super::plan::{self, Plan};
use super::{
    count_for, DType, ExecError, RedOp, Report, RunOptions, SizeResult, StallReport, TbWait,
};
use crate::ir::Program;
use cudarc::driver::{
    sys, CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr, DeviceRepr, LaunchConfig,
    PushKernelArg,
};
use half::{bf16, f16};
use layout::{DevStep, DevTb, Geometry, FIFO_CTRL_WORDS, FLAG_WORDS};
use std::sync::Arc;

/// The kernel source (CUDA C, no includes).
pub const KERNEL_SRC: &str = include_str!("kernel.cu");

/// Where the ranks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// All ranks on GPU `device`.
    Virtual { device: usize },
    /// Rank r on GPU r.
    MultiGpu,
}

/// Can the CUDA driver library (libcuda) be loaded?
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen the library by its usual names; no CUDA
    // function is called.
    unsafe { sys::is_culib_present() }
}

/// Can the NVRTC library be loaded (found through the loader's search path,
/// e.g. LD_LIBRARY_PATH)?
pub fn nvrtc_present() -> bool {
    // SAFETY: as above, a dlopen attempt only.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

fn no_nvrtc() -> ExecError {
    ExecError::Unsupported(
        "the NVRTC library (libnvrtc.so, .so.12 or .so.13) was not found; install a CUDA toolkit or `pip install nvidia-cuda-nvrtc-cu12`, and add its lib directory to LD_LIBRARY_PATH"
            .into(),
    )
}

fn cu(what: &str) -> impl Fn(cudarc::driver::DriverError) -> ExecError + '_ {
    move |e| ExecError::Spawn(format!("CUDA {what}: {e:?}"))
}

/// NVRTC options for one kernel instance: dtype / redop as macros, and the
/// virtual architecture `compute_XY`.
pub fn nvrtc_options(arch: (i32, i32), dtype: DType, op: RedOp) -> Result<Vec<String>, ExecError> {
    let d = match dtype {
        DType::F32 => 0,
        DType::F64 => 1,
        DType::F16 => 2,
        DType::Bf16 => 3,
        DType::I32 => 4,
        other => {
            return Err(ExecError::Unsupported(format!(
                "dtype {} on the cuda backend (f32 f64 f16 bf16 i32)",
                other.name()
            )))
        }
    };
    let o = match op {
        RedOp::Sum => 0,
        RedOp::Prod => 1,
        RedOp::Max => 2,
        RedOp::Min => 3,
    };
    Ok(vec![
        format!("--gpu-architecture=compute_{}{}", arch.0, arch.1),
        format!("-DRSCC_DTYPE={d}"),
        format!("-DRSCC_OP={o}"),
        "--std=c++14".into(),
    ])
}

/// Compile the kernel to PTX for compute capability `arch`. Needs only the
/// NVRTC library, no driver and no GPU.
pub fn compile_ptx(arch: (i32, i32), dtype: DType, op: RedOp) -> Result<String, ExecError> {
    Ok(compile(arch, dtype, op)?.to_src())
}

fn compile(arch: (i32, i32), dtype: DType, op: RedOp) -> Result<cudarc::nvrtc::Ptx, ExecError> {
    let options = nvrtc_options(arch, dtype, op)?;
    if !nvrtc_present() {
        return Err(no_nvrtc());
    }
    let opts = cudarc::nvrtc::CompileOptions {
        options,
        name: Some("rscc_kernel.cu".into()),
        ..Default::default()
    };
    cudarc::nvrtc::compile_ptx_with_opts(KERNEL_SRC, opts)
        .map_err(|e| ExecError::Spawn(format!("NVRTC compile of kernel.cu failed: {e:?}")))
}

/// Compile the kernel to machine code (CUBIN) for `sm_XY` with NVRTC's
/// built-in ptxas and `-v`; returns the CUBIN size and the compile log
/// (registers, spills). A check that the inline PTX assembles and the
/// kernel's resource use, without a GPU.
pub fn compile_cubin(
    arch: (i32, i32),
    dtype: DType,
    op: RedOp,
) -> Result<(usize, String), ExecError> {
    use cudarc::nvrtc::{result, sys as nsys};
    let mut options = nvrtc_options(arch, dtype, op)?;
    options[0] = format!("--gpu-architecture=sm_{}{}", arch.0, arch.1);
    options.push("--ptxas-options=-v".into());
    if !nvrtc_present() {
        return Err(no_nvrtc());
    }
    let src = std::ffi::CString::new(KERNEL_SRC)
        .map_err(|_| ExecError::Spawn("kernel.cu contains a NUL byte".into()))?;
    let err = |what: &str, e: result::NvrtcError| ExecError::Spawn(format!("NVRTC {what}: {e:?}"));
    let prog = result::create_program(&src, None).map_err(|e| err("create", e))?;
    let text = |v: Vec<std::ffi::c_char>| -> String {
        let b: Vec<u8> = v
            .into_iter()
            .map(|c| c as u8)
            .take_while(|&c| c != 0)
            .collect();
        String::from_utf8_lossy(&b).into_owned()
    };
    // SAFETY: `prog` comes from create_program, `src` outlives it, and it is
    // destroyed exactly once below; the CUBIN buffer has the size NVRTC
    // reported.
    unsafe {
        let compiled = result::compile_program(prog, &options);
        let log = result::get_program_log(prog).map(text).unwrap_or_default();
        let out = match compiled {
            Err(e) => Err(ExecError::Spawn(format!(
                "NVRTC compile (sm_{}{}): {e:?}\n{log}",
                arch.0, arch.1
            ))),
            Ok(()) => {
                let mut size = 0usize;
                let r = nsys::nvrtcGetCUBINSize(prog, &mut size);
                if r != nsys::nvrtcResult::NVRTC_SUCCESS {
                    Err(ExecError::Spawn(format!("NVRTC CUBIN size: {r:?}")))
                } else {
                    let mut buf = vec![0 as std::ffi::c_char; size];
                    let r = nsys::nvrtcGetCUBIN(prog, buf.as_mut_ptr());
                    if r != nsys::nvrtcResult::NVRTC_SUCCESS {
                        Err(ExecError::Spawn(format!("NVRTC CUBIN: {r:?}")))
                    } else {
                        Ok((size, log))
                    }
                }
            }
        };
        let _ = result::destroy_program(prog);
        out
    }
}

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

/// Host <-> little-endian bytes for the dtypes the kernel supports.
trait Raw: Elem {
    fn put(self, out: &mut [u8]);
    fn get(b: &[u8]) -> Self;
}

macro_rules! raw {
    ($t:ty, $n:expr) => {
        impl Raw for $t {
            fn put(self, out: &mut [u8]) {
                out[..$n].copy_from_slice(&self.to_le_bytes());
            }
            fn get(b: &[u8]) -> Self {
                let mut a = [0u8; $n];
                a.copy_from_slice(&b[..$n]);
                <$t>::from_le_bytes(a)
            }
        }
    };
}
raw!(f32, 4);
raw!(f64, 8);
raw!(f16, 2);
raw!(bf16, 2);
raw!(i32, 4);

fn ptr<T>(s: &CudaSlice<T>, st: &Arc<CudaStream>) -> u64 {
    let (p, _sync) = s.device_ptr(st);
    p
}

/// One GPU in use.
struct Dev {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    func: CudaFunction,
    copy: CudaFunction,
    /// Global threadblock range launched here.
    tb_base: usize,
    ntbs: usize,
    threads_max: u32,
    sms: u64,
}

/// Run `prog` on the GPU(s). Same contract as `exec::run_program`.
pub fn run_program_cuda(
    prog: &Program,
    opts: &RunOptions,
    mode: Mode,
) -> Result<Report, ExecError> {
    let plan = plan::build(prog)?;
    let inplace = aliasing_mode(prog, opts)?;
    // Refuse unsupported dtypes before touching CUDA.
    nvrtc_options((9, 0), opts.dtype, opts.redop)?;
    if !driver_present() {
        return Err(ExecError::Unsupported(
            "no CUDA driver found (libcuda.so could not be loaded): the cuda backend is not available on this machine (it needs an NVIDIA GPU and driver); use --backend cpu"
                .into(),
        ));
    }
    if !nvrtc_present() {
        return Err(no_nvrtc());
    }
    macro_rules! by_op {
        ($t:ty) => {
            match opts.redop {
                RedOp::Sum => run_typed::<$t, Sum>(&plan, opts, inplace, mode),
                RedOp::Prod => run_typed::<$t, Prod>(&plan, opts, inplace, mode),
                RedOp::Max => run_typed::<$t, Max>(&plan, opts, inplace, mode),
                RedOp::Min => run_typed::<$t, Min>(&plan, opts, inplace, mode),
            }
        };
    }
    let (rows, membw, threads) = match opts.dtype {
        DType::F32 => by_op!(f32),
        DType::F64 => by_op!(f64),
        DType::F16 => by_op!(f16),
        DType::Bf16 => by_op!(bf16),
        DType::I32 => by_op!(i32),
        d => Err(ExecError::Unsupported(format!(
            "dtype {} on the cuda backend",
            d.name()
        ))),
    }?;
    Ok(Report {
        name: prog.name.clone(),
        ranks: plan.nranks,
        dtype: opts.dtype.name().to_string(),
        redop: opts.redop.name().to_string(),
        inplace,
        tile_bytes: opts.tile_bytes,
        threads,
        membw_gbps: membw,
        rows,
    })
}

fn open_devices(
    plan: &Plan,
    mode: Mode,
    opts: &RunOptions,
) -> Result<(Vec<Dev>, Vec<usize>), ExecError> {
    let count = CudaContext::device_count().map_err(cu("device count"))?;
    let count = usize::try_from(count).unwrap_or(0);
    let n = plan.nranks;
    let (ordinals, device_of): (Vec<usize>, Vec<usize>) = match mode {
        Mode::Virtual { device } => {
            if device >= count {
                return Err(ExecError::Unsupported(format!(
                    "GPU {device} does not exist ({count} CUDA devices)"
                )));
            }
            (vec![device], vec![0; n])
        }
        Mode::MultiGpu => {
            if count < n {
                return Err(ExecError::Unsupported(format!(
                    "multi-GPU mode needs one GPU per rank: {n} ranks, {count} GPUs (use virtual ranks)"
                )));
            }
            ((0..n).collect(), (0..n).collect())
        }
    };
    let mut devs = Vec::new();
    for (d, &ord) in ordinals.iter().enumerate() {
        let ctx = CudaContext::new(ord).map_err(cu("context"))?;
        // SAFETY: we order all work on one stream per device ourselves and
        // synchronise before reading results; cudarc's per-allocation event
        // tracking is not needed.
        unsafe { ctx.disable_event_tracking() };
        let cc = ctx.compute_capability().map_err(cu("compute capability"))?;
        let ptx = compile(cc, opts.dtype, opts.redop)?;
        let module = ctx.load_module(ptx).map_err(cu("module load"))?;
        let func = module
            .load_function("rscc_run")
            .map_err(cu("load rscc_run"))?;
        let copy = module
            .load_function("rscc_copy")
            .map_err(cu("load rscc_copy"))?;
        let sms = ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(cu("SM count"))? as u64;
        let mine: Vec<usize> = (0..plan.tbs.len())
            .filter(|&t| device_of[plan.tbs[t].rank] == d)
            .collect();
        let tb_base = mine.first().copied().unwrap_or(0);
        // Threadblocks of a device are contiguous (plan orders them by rank).
        if mine.iter().enumerate().any(|(i, &t)| t != tb_base + i) {
            return Err(ExecError::Spawn(
                "threadblocks of a device are not contiguous".into(),
            ));
        }
        // Registers may cap the block size below 512.
        let threads_max = func
            .get_attribute(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
            .map_err(cu("function attribute"))?;
        let threads_max = (threads_max.clamp(32, 512) as u32) / 32 * 32;
        let stream = ctx.new_stream().map_err(cu("stream"))?;
        devs.push(Dev {
            ctx,
            stream,
            func,
            copy,
            tb_base,
            ntbs: mine.len(),
            threads_max,
            sms,
        });
    }
    // Peer access between every pair of GPUs in use (the kernel writes the
    // receiver's FIFO and reads its counters directly).
    for a in 0..devs.len() {
        for b in 0..devs.len() {
            if a == b {
                continue;
            }
            let mut can = 0i32;
            // SAFETY: plain driver queries/calls on valid devices/contexts;
            // the context is bound to this thread first.
            unsafe {
                sys::cuDeviceCanAccessPeer(
                    &mut can,
                    devs[a].ctx.cu_device(),
                    devs[b].ctx.cu_device(),
                )
                .result()
                .map_err(cu("peer query"))?;
                if can == 0 {
                    return Err(ExecError::Unsupported(format!(
                        "GPU {a} cannot access GPU {b} peer-to-peer; multi-GPU mode needs P2P (use virtual ranks)"
                    )));
                }
                devs[a].ctx.bind_to_thread().map_err(cu("bind"))?;
                let r = sys::cuCtxEnablePeerAccess(devs[b].ctx.cu_ctx(), 0);
                if r != sys::CUresult::CUDA_SUCCESS
                    && r != sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
                {
                    return Err(ExecError::Spawn(format!(
                        "CUDA enable peer access {a}->{b}: {r:?}"
                    )));
                }
            }
        }
    }
    // cudarc allocates from each device's default stream-ordered memory
    // pool when the driver has one; peer access to pool memory is granted
    // per pool, not by cuCtxEnablePeerAccess.
    if devs.len() > 1 {
        for a in 0..devs.len() {
            if !devs[a].ctx.has_async_alloc() {
                continue;
            }
            let descs: Vec<sys::CUmemAccessDesc> = (0..devs.len())
                .filter(|&b| b != a)
                .map(|b| sys::CUmemAccessDesc {
                    location: sys::CUmemLocation {
                        type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                        id: devs[b].ctx.cu_device(),
                    },
                    flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
                })
                .collect();
            // SAFETY: plain driver calls on a valid device; `descs` lives
            // across the call and its length is passed with it.
            unsafe {
                devs[a].ctx.bind_to_thread().map_err(cu("bind"))?;
                let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
                sys::cuDeviceGetDefaultMemPool(&mut pool, devs[a].ctx.cu_device())
                    .result()
                    .map_err(cu("default memory pool"))?;
                sys::cuMemPoolSetAccess(pool, descs.as_ptr(), descs.len())
                    .result()
                    .map_err(cu("memory pool peer access"))?;
            }
        }
    }
    Ok((devs, device_of))
}

/// Device copy bandwidth (GB/s, bytes read + written per second), best of
/// `reps` copies of `bytes`.
fn measure_copy(dev: &Dev, bytes: usize, reps: usize) -> Result<f64, ExecError> {
    let n16 = (bytes / 16).max(1);
    let src = dev
        .stream
        .alloc_zeros::<u8>(n16 * 16)
        .map_err(cu("alloc"))?;
    let dst = dev
        .stream
        .alloc_zeros::<u8>(n16 * 16)
        .map_err(cu("alloc"))?;
    let (ps, pd) = (ptr(&src, &dev.stream), ptr(&dst, &dev.stream));
    let cfg = LaunchConfig {
        grid_dim: ((dev.sms * 4) as u32, 1, 1),
        block_dim: (512, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut best = 0.0f64;
    for _ in 0..reps.max(2) {
        let e0 = dev
            .stream
            .record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(cu("event"))?;
        let mut b = dev.stream.launch_builder(&dev.copy);
        let nn = n16 as u64;
        b.arg(&pd).arg(&ps).arg(&nn);
        // SAFETY: rscc_copy(uint4*, const uint4*, u64) reads and writes n16
        // 16-byte vectors of two live allocations of n16 * 16 bytes.
        unsafe { b.launch(cfg) }.map_err(cu("launch copy"))?;
        let e1 = dev
            .stream
            .record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(cu("event"))?;
        e1.synchronize().map_err(cu("sync"))?;
        let ms = e0.elapsed_ms(&e1).map_err(cu("elapsed"))? as f64;
        if ms > 0.0 {
            best = best.max(2.0 * (n16 * 16) as f64 / (ms * 1e-3) / 1e9);
        }
    }
    drop((src, dst));
    Ok(best)
}

type Typed = (Vec<SizeResult>, Option<f64>, usize);

fn run_typed<T: Raw, O: Op<T>>(
    plan: &Plan,
    opts: &RunOptions,
    inplace: bool,
    mode: Mode,
) -> Result<Typed, ExecError> {
    let n = plan.nranks;
    let esz = std::mem::size_of::<T>() as u64;
    let enc = layout::encode(plan)?;
    let (devs, device_of) = open_devices(plan, mode, opts)?;
    let membw = if opts.membw_bytes > 0 {
        Some(measure_copy(&devs[0], opts.membw_bytes, 5)?)
    } else {
        None
    };
    let counts: Vec<(u64, u64)> = opts
        .sizes
        .iter()
        .map(|&s| (s, count_for(s, esz as usize, n, plan.c)))
        .collect();
    let max_count = counts.iter().map(|c| c.1).max().unwrap_or(0);
    let (rank_bufs, arenas) =
        layout::buffer_layout(plan.c, &plan.s_chunks, max_count, esz, &device_of)?;
    // FIFO slots are allocated once, for the largest tile of any size: with
    // merged calls a smaller size can have the larger tile.
    let max_cnt = plan.max_cnt() as u64;
    let geo_of = |count: u64| {
        layout::geometry(
            count * n as u64 / plan.c as u64,
            opts.tile_bytes as u64,
            esz,
            opts.fifo_slots as u64,
            max_cnt,
        )
    };
    let max_tile = counts.iter().map(|c| geo_of(c.1).tile).max().unwrap_or(1);
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
    // Output offset of rank r: its own buffer, or (in place) the rank's
    // shard of its input, i[r·count ..].
    let out_off = |r: usize, count: u64| -> u64 {
        let b = &rank_bufs[r];
        if inplace {
            b.input.offset + r as u64 * count * esz
        } else {
            b.output.offset
        }
    };
    let bufs_for = |count: u64| -> Vec<u64> {
        let mut t = Vec::with_capacity(3 * n);
        for (r, b) in rank_bufs.iter().enumerate() {
            let base = arena_ptr[device_of[r]];
            t.extend([
                base + b.input.offset,
                base + out_off(r, count),
                base + b.scratch.offset,
            ]);
        }
        t
    };
    let bufs_tab = bufs_for(max_count);
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
    for (req, count) in counts {
        let chunk = count * n as u64 / plan.c as u64;
        let geo = geo_of(count);
        // Progress keys depend on the tile count, so they restart (from
        // zeroed flags) at every size; FIFO counters just keep counting.
        work = 0;
        for (d, t) in devs.iter().zip(tabs.iter_mut()) {
            d.stream
                .memcpy_htod(&bufs_for(count), &mut t.bufs)
                .map_err(cu("upload buffer table"))?;
            d.stream
                .memset_zeros(&mut t.flags)
                .map_err(cu("clear flags"))?;
        }
        // Inputs, poisoned outputs (out of place) and scratch.
        for r in 0..n {
            let b = &rank_bufs[r];
            let d = &devs[device_of[r]];
            let mut host = vec![0u8; (count * n as u64 * esz) as usize];
            let e = esz as usize;
            crate::par::for_parts(&mut host, e, |off, part| {
                for (i, cell) in part.chunks_exact_mut(e).enumerate() {
                    T::from_pattern(elem::pattern(O::OP, r, off / e + i)).put(cell);
                }
            });
            let mut poison = vec![0u8; esz as usize];
            T::poison().put(&mut poison);
            let out_b = if inplace { 0 } else { (count * esz) as usize };
            let scr_b = (plan.s_chunks[r] as u64 * chunk * esz) as usize;
            let fill =
                |len: usize| -> Vec<u8> { poison.iter().copied().cycle().take(len).collect() };
            let arena = &mut arena_mem[device_of[r]];
            let io = b.input.offset as usize;
            d.stream
                .memcpy_htod(&host, &mut arena.slice_mut(io..io + host.len()))
                .map_err(cu("upload input"))?;
            let oo = b.output.offset as usize;
            d.stream
                .memcpy_htod(&fill(out_b), &mut arena.slice_mut(oo..oo + out_b))
                .map_err(cu("upload output"))?;
            let so = b.scratch.offset as usize;
            d.stream
                .memcpy_htod(&fill(scr_b), &mut arena.slice_mut(so..so + scr_b))
                .map_err(cu("upload scratch"))?;
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
                // buffer_layout for max_count >= count; FIFO slots hold
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
                    return Err(stall_report(plan, &st, geo, opts));
                }
            }
            Ok(())
        };
        let mut wrong: Option<(u64, Vec<super::WrongChunk>)> = None;
        if opts.check {
            launch_all(work)?;
            work += 1;
            check_status(&devs, &tabs)?;
            let mut outs: Vec<Vec<T>> = Vec::with_capacity(n);
            for r in 0..n {
                let d = &devs[device_of[r]];
                let off = out_off(r, count) as usize;
                let arena = &arena_mem[device_of[r]];
                let mut host = vec![0u8; (count * esz) as usize];
                d.stream
                    .memcpy_dtoh(&arena.slice(off..off + host.len()), &mut host)
                    .map_err(cu("download output"))?;
                outs.push(host.chunks_exact(esz as usize).map(T::get).collect());
            }
            let refs: Vec<&[T]> = outs.iter().map(|v| v.as_slice()).collect();
            wrong = Some(super::check_outputs::<T, O>(
                &refs,
                n,
                count as usize,
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
        let size_bytes = count * n as u64 * esz;
        rows.push(super::SizeResult::measured(
            size_bytes, req, count, secs, n, membw, wrong,
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
fn stall_report(plan: &Plan, st: &[u64], geo: Geometry, opts: &RunOptions) -> ExecError {
    let tb = st.get(1).copied().unwrap_or(0) as usize;
    let pos = st.get(2).copied().unwrap_or(0) as usize;
    let tile = st.get(3).copied().unwrap_or(0);
    let what = st.get(4).copied().unwrap_or(0);
    let (have, want) = (
        st.get(5).copied().unwrap_or(0),
        st.get(6).copied().unwrap_or(0),
    );
    let Some(t) = plan.tbs.get(tb) else {
        return ExecError::Spawn(format!(
            "GPU kernel aborted with an invalid stall record {st:?}"
        ));
    };
    let kind = t
        .steps
        .get(pos)
        .map_or("?".to_string(), |s| s.kind.to_string());
    let waiting_for = match what {
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
                .get(pos)
                .and_then(|s| s.dep)
                .map_or(-1, |(d, _)| plan.tbs.get(d).map_or(-1, |x| x.id))
        ),
        _ => "?".into(),
    };
    let _ = geo;
    ExecError::Stalled(StallReport {
        after_ms: opts.stall_timeout.as_millis() as u64,
        waits: vec![TbWait {
            rank: t.rank,
            tb: t.id,
            step: pos,
            kind,
            work: 0,
            tile,
            waiting_for,
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_name_the_arch_and_instance() {
        let o = nvrtc_options((9, 0), DType::Bf16, RedOp::Max).unwrap();
        assert!(o.contains(&"--gpu-architecture=compute_90".to_string()));
        assert!(o.contains(&"-DRSCC_DTYPE=3".to_string()));
        assert!(o.contains(&"-DRSCC_OP=2".to_string()));
        assert!(nvrtc_options((8, 0), DType::U8, RedOp::Sum).is_err());
        assert!(nvrtc_options((8, 0), DType::I64, RedOp::Sum).is_err());
    }

    #[test]
    fn params_layout_matches_the_kernel() {
        // 16 u64 + 2 i32, no padding: the kernel reads it by value.
        assert_eq!(std::mem::size_of::<Params>(), 16 * 8 + 8);
        assert_eq!(std::mem::size_of::<DevStep>(), 32);
        assert_eq!(std::mem::size_of::<DevTb>(), 32);
    }

    #[test]
    fn raw_roundtrip() {
        let mut b = [0u8; 8];
        bf16::from_f32(1.5).put(&mut b);
        assert_eq!(bf16::get(&b), bf16::from_f32(1.5));
        (-7i32).put(&mut b);
        assert_eq!(i32::get(&b), -7);
        2.25f64.put(&mut b);
        assert_eq!(f64::get(&b), 2.25);
    }

    #[test]
    fn no_driver_is_an_error_not_a_panic() {
        if driver_present() {
            eprintln!("skipped: a CUDA driver is present on this machine");
            return;
        }
        let p = crate::exec::builtin::ring(2, 1);
        let e =
            run_program_cuda(&p, &RunOptions::default(), Mode::Virtual { device: 0 }).unwrap_err();
        assert!(e.to_string().contains("no CUDA driver"), "{e}");
    }
}
