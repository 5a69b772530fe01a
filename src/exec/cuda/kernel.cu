// rscc GPU executor kernel (compiled at run time by NVRTC).
//
// One CUDA block per MSCCL threadblock (MSCCL's execution model). The host
// prepends `#define RSCC_DTYPE n` and `#define RSCC_OP n` (see mod.rs) and
// launches `rscc_run` with one block per threadblock of the ranks this launch
// covers (all ranks in virtual-ranks mode, one rank per GPU otherwise).
//
// Semantics mirror the CPU engine (src/exec/cpu.rs):
// - every connection is a single-producer single-consumer FIFO of `slots`
//   slots of one tile each, with monotonically increasing head (consumer)
//   and tail (producer) counters that persist across launches; a
//   zero-copy send puts the address of its data in its slot's control
//   word instead of the data in the slot;
// - every threadblock publishes a progress key after steps with
//   hasdep="1"; depid/deps waits spin on it;
// - a step with cnt = k moves k chunks, one tile of each per call.
// No headers are included, so the source compiles with NVRTC alone.
//
// Measurement knobs (RSCC_NVRTC_OPTIONS="-D…"; they break the FIFO and
// dependency protocol, so results are wrong: time runs only, never
// --check; bench/gpu-compare.sh variants split a run's time with them):
//   RSCC_DIAG_NO_WAIT     no spin on a peer's counter or key (data
//                         operations, barriers, fences and stores only);
//   RSCC_DIAG_NO_DATA     no data operation (hand-offs only);
//   RSCC_DIAG_NO_FENCE    counters and keys move without the fence;
//   RSCC_DIAG_NO_DISCARD  consumed FIFO slots are not dropped from L2.

#ifdef RSCC_HOST_EMU
// Host emulation (src/exec/cuda/emu.rs, tests only): each CUDA block runs
// as one host thread with blockDim.x == 1; see emu_main.cpp for the shims.
#include "emu_shim.h"
#endif

typedef unsigned long long u64;
typedef unsigned int u32;
typedef unsigned short u16;

#define K_NOP 0
#define K_SEND 1
#define K_RECV 2
#define K_RCS 3
#define K_RRS 4
#define K_RRC 5
#define K_RRCS 6
#define K_CPY 7
#define K_RE 8

#define OP_SUM 0
#define OP_PROD 1
#define OP_MAX 2
#define OP_MIN 3

#define DT_F32 0
#define DT_F64 1
#define DT_F16 2
#define DT_BF16 3
#define DT_I32 4

#ifndef RSCC_DTYPE
#define RSCC_DTYPE DT_F32
#endif
#ifndef RSCC_OP
#define RSCC_OP OP_SUM
#endif

// Must match DevStep / DevTb / Params in mod.rs (all 32-bit or 64-bit
// fields, no implicit padding).
struct Step {
  int kind;     // K_* | (publish << 8) | (zero-copy << 9)
  int src_buf;  // 0 input, 1 output, 2 scratch
  int src_off;  // chunk index
  int dst_buf;
  int dst_off;
  int cnt;
  int dep_tb;   // global threadblock index or -1
  int dep_step;
};

struct Tb {
  int rank;
  int first_step;
  int nsteps;
  int send_fifo;  // -1 none
  int recv_fifo;
  int pad0, pad1, pad2;
};

struct Params {
  const Step* steps;
  const Tb* tbs;
  const u64* bufs;       // 3 per rank: input, output, scratch base (bytes)
  const u64* fifo_data;  // per FIFO: slot memory (slots * tile elements)
  const u64* fifo_ctrl;  // per FIFO: u64[96]: [0] head, [16] tail, [32 + slot] where a zero-copy send's data lies
  u64* flags;            // per global threadblock: 16 u64, [0] progress key
  u64* status;           // [0] abort flag, [1..8] stall record
  u64 chunk;             // elements per chunk
  u64 tile;              // elements per tile
  u64 ntiles;
  u64 step_stride;       // max steps + 1
  u64 work;              // this launch's work index (keys grow across launches)
  u64 slots;
  u64 timeout_ns;
  u64 merge;             // adjacent chunks per call of a multi-chunk step
  u64 sys_fence;         // 1: peers on other GPUs (system-scope fences)
  int tb_base;           // global index of block 0
  int ntbs;
};

// ---------------------------------------------------------------- elements

#if RSCC_DTYPE == DT_F32
typedef float T;
typedef float A;
__device__ __forceinline__ A ld(T x) { return x; }
__device__ __forceinline__ T st(A x) { return x; }
#elif RSCC_DTYPE == DT_F64
typedef double T;
typedef double A;
__device__ __forceinline__ A ld(T x) { return x; }
__device__ __forceinline__ T st(A x) { return x; }
#elif RSCC_DTYPE == DT_F16
typedef u16 T;
typedef float A;
#ifdef RSCC_HOST_EMU
__device__ __forceinline__ A ld(T x) { return emu_f16_to_f32(x); }
__device__ __forceinline__ T st(A x) { return emu_f32_to_f16(x); }
#else
__device__ __forceinline__ A ld(T x) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x));
  return f;
}
__device__ __forceinline__ T st(A x) {
  u16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return h;
}
#endif
#elif RSCC_DTYPE == DT_BF16
typedef u16 T;
typedef float A;
__device__ __forceinline__ A ld(T x) { return __uint_as_float(((u32)x) << 16); }
__device__ __forceinline__ T st(A x) {
  u32 u = __float_as_uint(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (T)((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return (T)(u >> 16);
}
#elif RSCC_DTYPE == DT_I32
typedef int T;
typedef int A;
__device__ __forceinline__ A ld(T x) { return x; }
__device__ __forceinline__ T st(A x) { return x; }
#else
#error "unknown RSCC_DTYPE"
#endif

__device__ __forceinline__ A apply(A a, A b) {
#if RSCC_OP == OP_SUM
  return a + b;
#elif RSCC_OP == OP_PROD
  return a * b;
#elif RSCC_OP == OP_MAX
  return a > b ? a : b;
#elif RSCC_OP == OP_MIN
  return a < b ? a : b;
#else
#error "unknown RSCC_OP"
#endif
}

__device__ __forceinline__ T red(T a, T b) { return st(apply(ld(a), ld(b))); }

#define VEC (16 / sizeof(T))
union V16 {
  uint4 v;
  T e[16 / sizeof(T)];
};

// Loads that bypass L1: FIFO slots and buffers are rewritten by other SMs
// (and other GPUs) between reads, and L1 is not coherent.
__device__ __forceinline__ uint4 ldcg(const uint4* p) {
#ifdef RSCC_HOST_EMU
  return emu_load16(p);
#else
  uint4 v;
  asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
#endif
}
__device__ __forceinline__ T lds(const T* p) { return *(const volatile T*)p; }

// Buffer loads (inputs, scratch) stream past once: L2 evicts them first, so
// FIFO slots, written and read back within microseconds, stay in L2 instead
// of being written back to DRAM.
#if !defined(RSCC_HOST_EMU) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define RSCC_L2_HINTS 1
#endif
__device__ __forceinline__ u64 stream_policy() {
#ifdef RSCC_L2_HINTS
  u64 pol;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  return pol;
#else
  return 0;
#endif
}
__device__ __forceinline__ uint4 ldcg_stream(const uint4* p, u64 pol) {
#ifdef RSCC_L2_HINTS
  uint4 v;
  asm volatile("ld.global.cg.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p), "l"(pol));
  return v;
#else
  (void)pol;
  return ldcg(p);
#endif
}

__device__ __forceinline__ bool al16(const void* p) { return (((u64)p) & 15) == 0; }

// dst0 (and dst1 when non-null) = a op b (b null: plain copy of a), over n
// elements, by all threads of the block. 16-byte vector loads/stores when
// every pointer is 16-byte aligned, UNROLL of them in flight per thread (one
// load at a time per thread leaves a block far below its share of memory
// bandwidth); a scalar tail otherwise. `b` is always a buffer; `a` is one
// when A_BUF (else a FIFO slot): buffer loads carry the streaming policy.
#ifndef UNROLL
#define UNROLL 4
#endif
template <bool A_BUF>
__device__ void combine(T* dst0, T* dst1, const T* a, const T* b, u64 n) {
  u64 nv = 0;
  if (al16(dst0) && (dst1 == 0 || al16(dst1)) && al16(a) && (b == 0 || al16(b))) nv = n / VEC;
  const u64 st = blockDim.x;
  const uint4* va = (const uint4*)a;
  const uint4* vb = (const uint4*)b;
  const u64 pol = stream_policy();
  u64 i = threadIdx.x;
  for (; i + (UNROLL - 1) * st < nv; i += UNROLL * st) {
    V16 x[UNROLL], y[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; u++) x[u].v = A_BUF ? ldcg_stream(va + i + u * st, pol) : ldcg(va + i + u * st);
    if (b) {
#pragma unroll
      for (int u = 0; u < UNROLL; u++) y[u].v = ldcg_stream(vb + i + u * st, pol);
#pragma unroll
      for (int u = 0; u < UNROLL; u++)
#pragma unroll
        for (int k = 0; k < (int)VEC; k++) x[u].e[k] = red(x[u].e[k], y[u].e[k]);
    }
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
      ((uint4*)dst0)[i + u * st] = x[u].v;
      if (dst1) ((uint4*)dst1)[i + u * st] = x[u].v;
    }
  }
  for (; i < nv; i += st) {
    V16 x, y;
    x.v = A_BUF ? ldcg_stream(va + i, pol) : ldcg(va + i);
    if (b) {
      y.v = ldcg_stream(vb + i, pol);
#pragma unroll
      for (int k = 0; k < (int)VEC; k++) x.e[k] = red(x.e[k], y.e[k]);
    }
    ((uint4*)dst0)[i] = x.v;
    if (dst1) ((uint4*)dst1)[i] = x.v;
  }
  for (u64 j = nv * VEC + threadIdx.x; j < n; j += st) {
    T x = lds(a + j);
    if (b) x = red(x, lds(b + j));
    dst0[j] = x;
    if (dst1) dst1[j] = x;
  }
}

// Drop the 128-byte L2 lines wholly inside [p, p + bytes) without writing
// them back: a consumed FIFO slot is dead until its producer rewrites it,
// and otherwise every FIFO byte is written back to DRAM once it is evicted
// (measured with ncu on an H200: DRAM writes 7.5x the output). All threads
// of the block take part; callers synchronise before (reads done) and after
// (discards done before the slot is handed back).
__device__ __forceinline__ void discard_l2(const void* p, u64 bytes) {
#if !defined(RSCC_HOST_EMU) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const u64 a = ((u64)p + 127) & ~127ull;
  const u64 e = ((u64)p + bytes) & ~127ull;
  for (u64 x = a + 128ull * threadIdx.x; x < e; x += 128ull * blockDim.x)
    asm volatile("discard.global.L2 [%0], 128;" ::"l"(x) : "memory");
#else
  (void)p;
  (void)bytes;
#endif
}

// ---------------------------------------------------------------- sync

__device__ __forceinline__ u64 now_ns() {
#ifdef RSCC_HOST_EMU
  return emu_now_ns();
#else
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#endif
}

// Orders this block's data writes before the counter or flag store that
// hands them over: GPU scope when every peer is on this GPU (virtual
// ranks), system scope when peers on other GPUs read them.
__device__ __forceinline__ void fence_out(const Params& P) {
#ifdef RSCC_DIAG_NO_FENCE
  return;
#endif
  if (P.sys_fence) __threadfence_system();
  else __threadfence();
}

__device__ __forceinline__ u64 vload(const u64* p) { return *(const volatile u64*)p; }
__device__ __forceinline__ void vstore(u64* p, u64 v) { *(volatile u64*)p = v; }

// A wait this block gives up (timeout or abort) is left in its flag line
// for the host's stall report: words 1 + 4·(what − 1) … hold step + 1,
// tile, the value last read and the value wanted (layout::left_waits).
__device__ void leave_wait(const Params& P, int tb, int what, int pos, u64 tile, u64 have, u64 want) {
  u64* w = &P.flags[16 * tb + 1 + 4 * (what - 1)];
  w[0] = (u64)pos + 1;
  w[1] = tile;
  w[2] = have;
  w[3] = want;
  __threadfence_system();
}

// One thread spins until *p >= want. `seen` is the largest value this
// thread has read from *p before (counters and keys only grow), so a wait
// that an earlier read already satisfies costs no load. On timeout it
// records the stall and raises the abort flag; it returns false when the
// block must stop. The fence makes what the peer wrote before moving *p
// visible to this thread, and through the caller's barrier to the block.
// what: 1 recv, 2 send, 3 dep.
__device__ bool spin_ge(const Params& P, const u64* p, u64 want, u64* seen, int what, int tb, int pos, u64 tile) {
#ifdef RSCC_DIAG_NO_WAIT
  return true;
#endif
  if (*seen >= want) return true;
  u64 t0 = 0;
  u64 spins = 0;
  u64 v;
  while ((v = vload(p)) < want) {
#ifdef RSCC_HOST_EMU
    emu_yield();
#endif
    if (vload(&P.status[0]) != 0) {
      leave_wait(P, tb, what, pos, tile, v, want);
      return false;
    }
    if ((++spins & 1023) == 0) {
      u64 t = now_ns();
      if (t0 == 0) t0 = t;
      else if (t - t0 > P.timeout_ns) {
        if (atomicCAS(&P.status[0], 0ull, 1ull) == 0ull) {
          P.status[1] = (u64)tb;
          P.status[2] = (u64)pos;
          P.status[3] = tile;
          P.status[4] = (u64)what;
          P.status[5] = v;
          P.status[6] = want;
          __threadfence_system();
        }
        leave_wait(P, tb, what, pos, tile, v, want);
        return false;
      }
    }
  }
  *seen = v;
  __threadfence();
  return true;
}

// The step's dependency (none when dep_tb < 0): the other block's
// progress key reaches `want`.
__device__ __forceinline__ int dep_ok(const Params& P, const Step& s, u64 want, int tb, int pos, u64 tile) {
  if (s.dep_tb < 0) return 1;
  u64 seen = 0;
  return spin_ge(P, &P.flags[16 * s.dep_tb], want, &seen, 3, tb, pos, tile);
}

// ---------------------------------------------------------------- kernel

// Each call (one tile, or `merge` chunks, of one step) is: every wait it
// needs (the step's dependency on its first call, a filled receive slot,
// a free send slot), each spun on by its own warp at once, joined by one
// barrier; the data; one barrier (two when a
// receive slot is discarded from L2); then thread 0 fences once and moves
// the counters, and the progress key after the step's last call.
extern "C" __global__ void rscc_run(Params P) {
  if ((int)blockIdx.x >= P.ntbs) return;
  const int me = P.tb_base + (int)blockIdx.x;
  const Tb tb = P.tbs[me];
  const u64* bases = P.bufs + 3 * tb.rank;
  const unsigned tid = threadIdx.x;
  // The waiting threads: lane 0 of warps 0, 1 and 2 (one thread does all
  // three in blocks of one or two warps, and in the host emulation).
  const unsigned w_dep = 0;
  const unsigned w_rx = 32u % blockDim.x;
  const unsigned w_tx = 64u % blockDim.x;

  // FIFO counters: this block is the only writer of its send tail and its
  // recv head; they persist across launches.
  u64* send_head = 0;
  u64* send_tail = 0;
  u64* send_ext = 0;
  u64* recv_head = 0;
  u64* recv_tail = 0;
  const u64* recv_ext = 0;
  T* send_data = 0;
  const T* recv_data = 0;
  if (tb.send_fifo >= 0) {
    u64* c = (u64*)P.fifo_ctrl[tb.send_fifo];
    send_head = c;
    send_tail = c + 16;
    send_ext = c + 32;
    send_data = (T*)P.fifo_data[tb.send_fifo];
  }
  if (tb.recv_fifo >= 0) {
    u64* c = (u64*)P.fifo_ctrl[tb.recv_fifo];
    recv_head = c;
    recv_tail = c + 16;
    recv_ext = c + 32;
    recv_data = (const T*)P.fifo_data[tb.recv_fifo];
  }
  u64 my_tail = send_tail ? vload(send_tail) : 0;
  u64 my_head = recv_head ? vload(recv_head) : 0;
  // The peers' counters as last read by the waiting threads.
  u64 seen_tail = 0;  // recv FIFO's tail (thread w_rx)
  u64 seen_head = 0;  // send FIFO's head (thread w_tx)

  for (u64 tile = 0; tile < P.ntiles; tile++) {
    const u64 t0 = tile * P.tile;
    const u64 len = (P.chunk - t0) < P.tile ? (P.chunk - t0) : P.tile;
    for (int pos = 0; pos < tb.nsteps; pos++) {
      const Step s = P.steps[tb.first_step + pos];
      const int kind = s.kind & 0xff;
      const bool publish = (s.kind & 0x100) != 0;
      // A zero-copy send hands over where its data lies instead of copying
      // it into the slot (an `s` its source, an `rcs`/`rrcs` its
      // destination): the host marks only sends whose data no later step
      // of the launch rewrites (plan::zero_copy_sends), and only when
      // every rank is on this GPU.
#ifdef RSCC_NO_ZERO_COPY
      const bool zc = false;  // every send copied (for side-by-side timings)
#else
      const bool zc = (s.kind & 0x200) != 0;
#endif
      const u64 key = (P.work * P.ntiles + tile) * P.step_stride + (u64)pos + 1;
      const u64 dep_want =
          s.dep_tb >= 0 ? (P.work * P.ntiles + tile) * P.step_stride + (u64)s.dep_step + 1 : 0;
      if (s.cnt <= 0) {
        // A nop: its dependency, then its progress key.
        int ok = tid == w_dep ? dep_ok(P, s, dep_want, me, pos, tile) : 1;
        if (!__syncthreads_and(ok)) return;
        if (publish && tid == 0) {
          fence_out(P);
          vstore(&P.flags[16 * me], key);
        }
        continue;
      }
      const bool rx = kind == K_RECV || kind == K_RCS || kind == K_RRS || kind == K_RRC || kind == K_RRCS;
      const bool tx = kind == K_SEND || kind == K_RCS || kind == K_RRS || kind == K_RRCS;
      // A step with cnt = k is ceil(k / merge) calls per tile, each moving
      // m adjacent chunks through one FIFO slot (merge > 1 only when a
      // single tile holds several chunks; plan::tile_and_merge on the host).
      for (int g = 0; g < s.cnt;) {
        const int m = (u64)(s.cnt - g) < P.merge ? s.cnt - g : (int)P.merge;
        const u64 n = m > 1 ? (u64)m * P.chunk : len;
        T* src = (T*)bases[s.src_buf] + ((u64)(s.src_off + g)) * P.chunk + t0;
        T* dst = (T*)bases[s.dst_buf] + ((u64)(s.dst_off + g)) * P.chunk + t0;
        const bool first = g == 0;
        g += m;
        const bool last = g >= s.cnt;
        int ok = first && tid == w_dep ? dep_ok(P, s, dep_want, me, pos, tile) : 1;
        if (rx && tid == w_rx && ok)
          ok = spin_ge(P, recv_tail, my_head + 1, &seen_tail, 1, me, pos, tile);
        // Room when tail - head < slots, i.e. head >= tail + 1 - slots.
        if (tx && tid == w_tx && ok)
          ok = spin_ge(P, send_head, my_tail + 1 > P.slots ? my_tail + 1 - P.slots : 0, &seen_head, 2, me, pos,
                       tile);
        if (!__syncthreads_and(ok)) return;
        // The slot's data, or the sender's own buffer when it handed that
        // over (written before the tail the receive wait observed).
        const u64 ext = rx ? vload(&recv_ext[my_head % P.slots]) : 0;
        const T* in = rx ? (ext ? (const T*)ext : recv_data + (my_head % P.slots) * P.tile) : 0;
        T* out = tx ? send_data + (my_tail % P.slots) * P.tile : 0;
#ifndef RSCC_DIAG_NO_DATA
        // A received operand is a FIFO slot, or a buffer of the sender's
        // when it was handed over zero-copy: then it streams past once
        // and its loads carry the buffers' evict-first policy.
#define RX_COMBINE(d0, d1, a, b) \
  (ext ? combine<true>(d0, d1, a, b, n) : combine<false>(d0, d1, a, b, n))
        switch (kind) {
          case K_SEND: if (!zc) combine<true>(out, 0, src, 0, n); break;
          case K_RECV: RX_COMBINE(dst, 0, in, 0); break;
          case K_RCS: RX_COMBINE(dst, zc ? 0 : out, in, 0); break;
          case K_RRS: RX_COMBINE(out, 0, in, src); break;
          case K_RRCS:
            if (zc) RX_COMBINE(dst, 0, in, src);
            else RX_COMBINE(out, dst, in, src);
            break;
          case K_RRC: RX_COMBINE(dst, 0, in, src); break;
          case K_CPY: if (src != dst) combine<true>(dst, 0, src, 0, n); break;
          case K_RE: combine<true>(dst, 0, dst, src, n); break;
          default: break;
        }
#undef RX_COMBINE
#endif
        __syncthreads();
#ifndef RSCC_DIAG_NO_DISCARD
        // (Never the sender's buffer: ext is the same word for the whole
        // block, so the barrier inside is uniform.)
        if (rx && !ext) {
          discard_l2(in, n * sizeof(T));
          __syncthreads();
        }
#endif
        if (tid == 0) {
          // Data written by the whole block is visible (to the peer GPU too)
          // before a counter or the key moves.
          if (tx) vstore(&send_ext[my_tail % P.slots], !zc ? 0ull : kind == K_SEND ? (u64)src : (u64)dst);
          fence_out(P);
          if (tx) vstore(send_tail, my_tail + 1);
          if (rx) vstore(recv_head, my_head + 1);
          if (last && publish) vstore(&P.flags[16 * me], key);
        }
        if (tx) ++my_tail;
        if (rx) ++my_head;
      }
    }
  }
}

// Device copy bandwidth (a = b, 16-byte vectors, grid-stride).
extern "C" __global__ void rscc_copy(uint4* dst, const uint4* src, u64 n) {
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
    dst[i] = src[i];
}
