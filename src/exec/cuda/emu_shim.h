// Host shims for running kernel.cu on the CPU (tests only: emu.rs). One
// host thread per CUDA block, blockDim.x == 1, so __syncthreads is a no-op
// and __shared__ variables are per-thread statics.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>

#define __device__
#define __forceinline__ inline
#define __global__
#define __shared__ static thread_local

struct uint4 {
  unsigned x, y, z, w;
};
struct EmuDim {
  unsigned x;
};
extern thread_local EmuDim threadIdx, blockIdx;
extern EmuDim blockDim, gridDim;

inline void __syncthreads() {}
inline int __syncthreads_and(int p) { return p; }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_system() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long c, unsigned long long v) {
  return __sync_val_compare_and_swap(p, c, v);
}
inline float __uint_as_float(unsigned u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  memcpy(&u, &f, 4);
  return u;
}
inline unsigned long long emu_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
inline void emu_yield() { std::this_thread::yield(); }
inline uint4 emu_load16(const uint4* p) {
  const volatile unsigned* q = (const volatile unsigned*)p;
  uint4 v;
  v.x = q[0];
  v.y = q[1];
  v.z = q[2];
  v.w = q[3];
  return v;
}
inline float emu_f16_to_f32(unsigned short x) {
  _Float16 h;
  memcpy(&h, &x, 2);
  return (float)h;
}
inline unsigned short emu_f32_to_f16(float f) {
  _Float16 h = (_Float16)f;
  unsigned short x;
  memcpy(&x, &h, 2);
  return x;
}
