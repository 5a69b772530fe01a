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
//!
//! The parts: `nvrtc` (the kernel source and its compilation by NVRTC),
//! `device` (the driver check and opening the GPUs: contexts, modules,
//! peer access, memory pools; the copy-bandwidth measurement), `run` (one
//! run: device tables, buffers and FIFOs, launches, the reference check,
//! timings and the stall record) and `layout` (the host-side planning,
//! free of CUDA calls). This file holds the entry point and the host
//! element encoding the run and the test emulator share.

mod device;
#[cfg(test)]
mod emu;
pub mod layout;
mod nvrtc;
mod run;

pub use device::driver_present;
pub use nvrtc::{compile_cubin, compile_ptx, nvrtc_options, nvrtc_present, KERNEL_SRC};

use super::aliasing_mode;
use super::elem::{Elem, Max, Min, Prod, Sum};
use super::plan;
use super::{DType, ExecError, RedOp, Report, RunOptions};
use crate::ir::Program;
use half::{bf16, f16};
use nvrtc::no_nvrtc;
use run::run_typed;

/// Where the ranks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// All ranks on GPU `device`.
    Virtual { device: usize },
    /// Rank r on GPU r.
    MultiGpu,
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
        threadblocks: plan.tbs.len(),
        membw_gbps: membw,
        rows,
    })
}

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

#[cfg(test)]
mod tests {
    use super::*;

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
