// Host driver for the kernel emulation (tests only: emu.rs). Reads the
// encoded plan and inputs from argv[1], runs `works` launches of rscc_run
// with one thread per block, writes status[8] and every rank's output to
// argv[2].
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "kernel.cu"

thread_local EmuDim threadIdx, blockIdx;
EmuDim blockDim = {1}, gridDim = {1};

static void* zalloc(u64 bytes) {
  u64 b = (bytes + 255) / 256 * 256 + 256;
  void* p = aligned_alloc(256, b);
  if (!p) { fprintf(stderr, "out of memory\n"); exit(3); }
  memset(p, 0, b);
  return p;
}

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  FILE* f = fopen(argv[1], "rb");
  if (!f) return 2;
  auto rd = [&](void* p, size_t n) {
    if (n && fread(p, 1, n, f) != n) { fprintf(stderr, "short read\n"); exit(3); }
  };
  u64 h[18];
  rd(h, sizeof h);
  u64 n = h[0], ntbs = h[1], nsteps = h[2], nfifos = h[3], chunk = h[4], tile = h[5], ntiles = h[6],
      stride = h[7], slots = h[8], count = h[9], works = h[10], timeout = h[11], esz = h[12],
      inplace = h[13], merge = h[14], i_len = h[15], o_len = h[16], alias = h[17];
  if (esz != sizeof(T)) { fprintf(stderr, "element size %llu != %zu\n", h[12], sizeof(T)); return 3; }
  std::vector<u64> sc(n);
  rd(sc.data(), n * 8);
  std::vector<Step> steps(nsteps + 1);
  rd(steps.data(), nsteps * sizeof(Step));
  std::vector<Tb> tbs(ntbs + 1);
  rd(tbs.data(), ntbs * sizeof(Tb));
  std::vector<u64> bufs(3 * n);
  std::vector<char*> outp(n);
  // Out of place each buffer is its own; in place they alias as MSCCL
  // does (layout.rs io_offsets): o = i[r*|o|..] (alias 0), i = o[r*|i|..]
  // (1), o = i (2).
  for (u64 r = 0; r < n; r++) {
    char *in, *out;
    if (!inplace) {
      in = (char*)zalloc(i_len * esz);
      out = (char*)zalloc(o_len * esz);
    } else if (alias == 1) {
      out = (char*)zalloc(o_len * esz);
      in = out + r * i_len * esz;
    } else {
      in = (char*)zalloc(i_len * esz);
      out = alias == 0 ? in + r * o_len * esz : in;
    }
    rd(in, i_len * esz);
    char* scr = (char*)zalloc(sc[r] * chunk * esz);
    bufs[3 * r] = (u64)in;
    bufs[3 * r + 1] = (u64)out;
    bufs[3 * r + 2] = (u64)scr;
    outp[r] = out;
  }
  fclose(f);
  std::vector<u64> fdata(nfifos + 1), fctrl(nfifos + 1);
  for (u64 i = 0; i < nfifos; i++) {
    fdata[i] = (u64)zalloc(slots * tile * esz);
    fctrl[i] = (u64)zalloc(96 * 8);  // layout::FIFO_CTRL_WORDS
  }
  u64* flags = (u64*)zalloc((ntbs + 1) * 16 * 8);
  u64* status = (u64*)zalloc(8 * 8);
  Params P;
  P.steps = steps.data();
  P.tbs = tbs.data();
  P.bufs = bufs.data();
  P.fifo_data = fdata.data();
  P.fifo_ctrl = fctrl.data();
  P.flags = flags;
  P.status = status;
  P.chunk = chunk;
  P.tile = tile;
  P.ntiles = ntiles;
  P.step_stride = stride;
  P.slots = slots;
  P.timeout_ns = timeout;
  P.merge = merge;
  P.sys_fence = 1;
  P.tb_base = 0;
  P.ntbs = (int)ntbs;
  for (u64 w = 0; w < works && status[0] == 0; w++) {
    P.work = w;
    std::vector<std::thread> th;
    for (u64 b = 0; b < ntbs; b++)
      th.emplace_back([P, b]() {
        blockIdx.x = (unsigned)b;
        threadIdx.x = 0;
        rscc_run(P);
      });
    for (auto& t : th) t.join();
  }
  FILE* o = fopen(argv[2], "wb");
  if (!o) return 2;
  fwrite(status, 8, 8, o);
  for (u64 r = 0; r < n; r++) fwrite(outp[r], 1, o_len * esz, o);
  fwrite(flags, 8, ntbs * 16, o);
  fclose(o);
  return 0;
}
