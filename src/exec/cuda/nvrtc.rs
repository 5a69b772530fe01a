//! The kernel source (kernel.cu) and its compilation by NVRTC: whether the
//! NVRTC library can be loaded, the options of one kernel instance (dtype,
//! reduction, compute capability), PTX for the driver to load, and a CUBIN
//! with ptxas's resource report.

use super::super::{DType, ExecError, RedOp};

/// The kernel source (CUDA C, no includes).
pub const KERNEL_SRC: &str = include_str!("kernel.cu");

/// Can the NVRTC library be loaded (found through the loader's search path,
/// e.g. LD_LIBRARY_PATH)?
pub fn nvrtc_present() -> bool {
    // SAFETY: as above, a dlopen attempt only.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

pub(super) fn no_nvrtc() -> ExecError {
    ExecError::Unsupported(
        "the NVRTC library (libnvrtc.so, .so.12 or .so.13) was not found; install a CUDA toolkit or `pip install nvidia-cuda-nvrtc-cu12`, and add its lib directory to LD_LIBRARY_PATH"
            .into(),
    )
}

/// NVRTC options for one kernel instance: dtype / redop as macros, the
/// virtual architecture `compute_XY`, and any options in the environment
/// variable `RSCC_NVRTC_OPTIONS` (for tuning experiments on a new GPU,
/// docs/executor.md: e.g. `-DUNROLL=8`; whitespace-separated, appended).
pub fn nvrtc_options(arch: (i32, i32), dtype: DType, op: RedOp) -> Result<Vec<String>, ExecError> {
    options_with(arch, dtype, op, extra_options().as_deref())
}

fn extra_options() -> Option<String> {
    std::env::var("RSCC_NVRTC_OPTIONS").ok()
}

/// The base options with `extra` (whitespace-separated) appended.
fn options_with(
    arch: (i32, i32),
    dtype: DType,
    op: RedOp,
    extra: Option<&str>,
) -> Result<Vec<String>, ExecError> {
    let mut v = base_options(arch, dtype, op)?;
    v.extend(extra.unwrap_or("").split_whitespace().map(String::from));
    Ok(v)
}

/// A failed NVRTC compile: the user's error (exit 2, naming the variable)
/// when RSCC_NVRTC_OPTIONS added options, else an internal one.
fn compile_error(extra: Option<&str>, what: String) -> ExecError {
    match extra {
        Some(x) if !x.trim().is_empty() => ExecError::Unsupported(format!(
            "RSCC_NVRTC_OPTIONS=\"{x}\": NVRTC does not compile the kernel with these options: {what}"
        )),
        _ => ExecError::Spawn(what),
    }
}

/// The options every instance needs (no environment).
fn base_options(arch: (i32, i32), dtype: DType, op: RedOp) -> Result<Vec<String>, ExecError> {
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

pub(super) fn compile(
    arch: (i32, i32),
    dtype: DType,
    op: RedOp,
) -> Result<cudarc::nvrtc::Ptx, ExecError> {
    compile_with(arch, dtype, op, extra_options().as_deref())
}

/// `compile` with `extra` (RSCC_NVRTC_OPTIONS) appended. A failure with
/// extra options is the user's input (exit 2, naming the variable); one
/// without is an internal error.
fn compile_with(
    arch: (i32, i32),
    dtype: DType,
    op: RedOp,
    extra: Option<&str>,
) -> Result<cudarc::nvrtc::Ptx, ExecError> {
    let options = options_with(arch, dtype, op, extra)?;
    if !nvrtc_present() {
        return Err(no_nvrtc());
    }
    let opts = cudarc::nvrtc::CompileOptions {
        options,
        name: Some("rscc_kernel.cu".into()),
        ..Default::default()
    };
    cudarc::nvrtc::compile_ptx_with_opts(KERNEL_SRC, opts)
        .map_err(|e| compile_error(extra, format!("NVRTC compile of kernel.cu failed: {e:?}")))
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
    let extra = extra_options();
    let mut options = options_with(arch, dtype, op, extra.as_deref())?;
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
            Err(e) => Err(compile_error(
                extra.as_deref(),
                format!("NVRTC compile (sm_{}{}): {e:?}\n{log}", arch.0, arch.1),
            )),
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

    /// RSCC_NVRTC_OPTIONS: a tuning macro compiles; an option NVRTC does not
    /// know is the user's error (Unsupported: exit 2) naming the variable.
    #[test]
    fn extra_options_compile_or_name_the_variable() {
        if !nvrtc_present() {
            return;
        }
        assert!(compile_with((9, 0), DType::F32, RedOp::Sum, Some("-DUNROLL=8")).is_ok());
        let e = compile_with((9, 0), DType::F32, RedOp::Sum, Some("--bogus-option")).unwrap_err();
        assert!(matches!(e, ExecError::Unsupported(_)), "{e}");
        assert!(
            e.to_string()
                .contains("RSCC_NVRTC_OPTIONS=\"--bogus-option\""),
            "{e}"
        );
    }
}
