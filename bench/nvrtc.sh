# Sourced by the GPU bench scripts: puts NVRTC on LD_LIBRARY_PATH.
# cudarc loads libnvrtc.so (then .so.12 etc.) through the loader's search
# path; a CUDA 12 or 13 toolkit's works (13.0's on the H200 run).
# RSCC_NVRTC_DIR names the directory; otherwise the usual places are tried.
if [ -z "${RSCC_NVRTC_DIR:-}" ]; then
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
           /usr/local/cuda-*/lib64 /usr/lib/x86_64-linux-gnu \
           $(python3 -c 'import nvidia.cuda_nvrtc as m; print(list(m.__path__)[0] + "/lib")' 2>/dev/null); do
    if ls "$d"/libnvrtc.so* >/dev/null 2>&1; then RSCC_NVRTC_DIR=$d; break; fi
  done
fi
if [ -z "${RSCC_NVRTC_DIR:-}" ]; then
  echo "$(basename "$0"): libnvrtc.so not found; set RSCC_NVRTC_DIR (pip install nvidia-cuda-nvrtc-cu12 puts it in site-packages/nvidia/cuda_nvrtc/lib)" >&2
  exit 2
fi
export LD_LIBRARY_PATH="$RSCC_NVRTC_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
