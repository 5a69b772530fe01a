//! The GPUs of a run: whether the CUDA driver can be loaded, opening the
//! devices a mode uses (context, the kernel compiled for each device's
//! compute capability, SM count, block-size limit, the device's contiguous
//! threadblock range, peer access and memory-pool access between them), and
//! the device copy-bandwidth measurement.

use super::super::plan::Plan;
use super::super::{ExecError, RunOptions};
use super::nvrtc::compile;
use super::Mode;
use cudarc::driver::{
    sys, CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg,
};
use std::sync::Arc;

/// Can the CUDA driver library (libcuda) be loaded?
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen the library by its usual names; no CUDA
    // function is called.
    unsafe { sys::is_culib_present() }
}

pub(super) fn cu(what: &str) -> impl Fn(cudarc::driver::DriverError) -> ExecError + '_ {
    move |e| ExecError::Spawn(format!("CUDA {what}: {e:?}"))
}

pub(super) fn ptr<T>(s: &CudaSlice<T>, st: &Arc<CudaStream>) -> u64 {
    let (p, _sync) = s.device_ptr(st);
    p
}

/// One GPU in use.
pub(super) struct Dev {
    pub(super) ctx: Arc<CudaContext>,
    pub(super) stream: Arc<CudaStream>,
    pub(super) func: CudaFunction,
    copy: CudaFunction,
    /// Global threadblock range launched here.
    pub(super) tb_base: usize,
    pub(super) ntbs: usize,
    pub(super) threads_max: u32,
    pub(super) sms: u64,
}

pub(super) fn open_devices(
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
pub(super) fn measure_copy(dev: &Dev, bytes: usize, reps: usize) -> Result<f64, ExecError> {
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
