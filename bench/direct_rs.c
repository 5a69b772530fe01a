/* The hand-written floor for the CPU executor: a float32 sum
 * reduce-scatter of N ranks' buffers held in one process, written for
 * the minimum memory traffic (read every input once, write every output
 * once) and nothing else. One thread per 256 KiB of that traffic, up to
 * the cores (the executor's own rule); the (owner, tile) pairs are split
 * evenly over the threads, and each tile of an owner's output is the sum
 * of the N inputs' tiles, accumulated while it sits in the core's cache,
 * four inputs per pass.
 * Timed like nccl-tests: mean per call after warmup, the threads
 * released together by a spinning barrier (yielding after a while) for each call.
 *
 * Beside the time, the memory bandwidth B of `a += b` over two 256 MiB
 * float arrays on every core (bytes read + written per second), the best
 * of 2 passes right before and right after the timed calls, averaged:
 * `rscc run`'s measurement (src/exec/membw.rs), taken as close to the
 * calls it is compared with, since a shared machine's bandwidth moves
 * with its neighbours' load.
 *
 * usage: direct_rs RANKS BYTES_PER_RANK ITERS WARMUP [INPUTS_PER_PASS]
 *        (1-4, default 4; 1 adds one input per pass over the tile)
 * prints: ranks bytes time_us ok|WRONG B_gbps */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TILE_ELEMS (65536L) /* 256 KiB of float32 */

static int nranks, nthreads, calls, per_pass = 4;
static long shard;
static float **in, **out;
static atomic_int arrived, phase;

/* Sense-reversing spin barrier for nthreads + 1 parties (a futex wake
 * per call would cost more than a small call itself). */
static void barrier(int *sense) {
    *sense = !*sense;
    if (atomic_fetch_add(&arrived, 1) == nthreads) {
        atomic_store(&arrived, 0);
        atomic_store(&phase, *sense);
    } else {
        for (long spins = 0; atomic_load(&phase) != *sense; spins++)
            if (spins > 4096) sched_yield();
    }
}

static void reduce_range(long lo, long hi) {
    long tiles = (shard + TILE_ELEMS - 1) / TILE_ELEMS;
    for (long w = lo; w < hi; w++) {
        long owner = w / tiles, b = (w % tiles) * TILE_ELEMS;
        long e = b + TILE_ELEMS < shard ? b + TILE_ELEMS : shard;
        float *o = out[owner];
        /* Four other inputs per pass, the first pass onto rank 0's: more
         * reads in flight per core, and the tile written once per four
         * (the executor's reduction chains in one pass,
         * elem::CHAIN_FUSED). */
        const float *x = in[0] + owner * shard;
        int r = 1;
        while (r < nranks) {
            int k = nranks - r < per_pass ? nranks - r : per_pass;
            const float *z0 = in[r] + owner * shard;
            const float *z1 = k > 1 ? in[r + 1] + owner * shard : NULL;
            const float *z2 = k > 2 ? in[r + 2] + owner * shard : NULL;
            const float *z3 = k > 3 ? in[r + 3] + owner * shard : NULL;
            const float *a = r == 1 ? x : o;
            switch (k) {
            case 4: for (long i = b; i < e; i++) o[i] = (((a[i] + z0[i]) + z1[i]) + z2[i]) + z3[i]; break;
            case 3: for (long i = b; i < e; i++) o[i] = ((a[i] + z0[i]) + z1[i]) + z2[i]; break;
            case 2: for (long i = b; i < e; i++) o[i] = (a[i] + z0[i]) + z1[i]; break;
            default: for (long i = b; i < e; i++) o[i] = a[i] + z0[i]; break;
            }
            r += k;
        }
    }
}

static void *worker(void *arg) {
    long t = (long)arg;
    long work = nranks * ((shard + TILE_ELEMS - 1) / TILE_ELEMS);
    int sense = 0;
    for (int c = 0; c < calls; c++) {
        barrier(&sense);
        reduce_range(work * t / (nthreads + 1), work * (t + 1) / (nthreads + 1));
        barrier(&sense);
    }
    return NULL;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define BW_ELEMS (64L << 20) /* 256 MiB of float32 per array */
static float *bw_a, *bw_b;
static long bw_threads;

static void *bw_pass(void *arg) {
    long t = (long)arg, per = (BW_ELEMS + bw_threads - 1) / bw_threads;
    long lo = t * per, hi = lo + per < BW_ELEMS ? lo + per : BW_ELEMS;
    for (long i = lo; i < hi; i++) bw_a[i] += bw_b[i];
    return NULL;
}

/* Best of `reps` passes of a += b on bw_threads threads, in GB/s. */
static double bandwidth(int reps) {
    pthread_t th[256];
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        for (long t = 0; t < bw_threads; t++) pthread_create(&th[t], NULL, bw_pass, (void *)t);
        for (long t = 0; t < bw_threads; t++) pthread_join(th[t], NULL);
        double dt = now() - t0;
        if (dt < best) best = dt;
    }
    return 3.0 * BW_ELEMS * 4 / best / 1e9;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s RANKS BYTES ITERS WARMUP [INPUTS_PER_PASS]\n", argv[0]);
        return 2;
    }
    nranks = atoi(argv[1]);
    long bytes = atol(argv[2]);
    int iters = atoi(argv[3]), warmup = atoi(argv[4]);
    if (argc > 5) per_pass = atoi(argv[5]);
    if (nranks < 2 || iters < 1 || warmup < 0 || per_pass < 1 || per_pass > 4) {
        fprintf(stderr, "%s: need RANKS >= 2, ITERS >= 1, WARMUP >= 0, INPUTS_PER_PASS 1-4\n", argv[0]);
        return 2;
    }
    shard = bytes / 4 / nranks;
    if (shard < 1) shard = 1;
    long elems = shard * nranks;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    long by_traffic = (nranks + 1) * elems * 4 / (256L << 10);
    if (cores < 1) cores = 1;
    /* Helper threads beside the main one, which takes the last share. */
    nthreads = (int)((by_traffic < cores ? by_traffic : cores) - 1);
    if (nthreads < 0) nthreads = 0;
    calls = warmup + iters;
    in = malloc(nranks * sizeof(float *));
    out = malloc(nranks * sizeof(float *));
    for (int r = 0; r < nranks; r++) {
        in[r] = malloc(elems * sizeof(float));
        out[r] = malloc(shard * sizeof(float));
        if (!in[r] || !out[r]) return 3;
        for (long i = 0; i < elems; i++) in[r][i] = (float)((i + r) % 4);
        memset(out[r], 0, shard * sizeof(float));
    }
    bw_threads = cores < 256 ? cores : 256;
    bw_a = malloc(BW_ELEMS * sizeof(float));
    bw_b = malloc(BW_ELEMS * sizeof(float));
    if (!bw_a || !bw_b) return 3;
    for (long i = 0; i < BW_ELEMS; i++) bw_a[i] = 1.0f, bw_b[i] = 0.5f;
    double bw_before = bandwidth(2);
    pthread_t *th = malloc((nthreads + 1) * sizeof(pthread_t));
    for (long t = 0; t < nthreads; t++) pthread_create(&th[t], NULL, worker, (void *)t);
    long work = nranks * ((shard + TILE_ELEMS - 1) / TILE_ELEMS);
    double t0 = 0;
    int sense = 0;
    for (int c = 0; c < calls; c++) {
        if (c == warmup) t0 = now();
        if (nthreads) barrier(&sense);
        reduce_range(work * nthreads / (nthreads + 1), work);
        if (nthreads) barrier(&sense);
    }
    double t = (now() - t0) / iters;
    for (int i = 0; i < nthreads; i++) pthread_join(th[i], NULL);
    double bw = (bw_before + bandwidth(2)) / 2;
    /* Every owner's first and last element: sum over ranks of (idx + r) % 4. */
    int bad = 0;
    for (int j = 0; j < nranks; j++)
        for (long k = 0; k < 2; k++) {
            long idx = j * shard + (k ? shard - 1 : 0);
            double want = 0;
            for (int r = 0; r < nranks; r++) want += (double)((idx + r) % 4);
            bad |= out[j][k ? shard - 1 : 0] != (float)want;
        }
    printf("%d %ld %.1f %s %.2f\n", nranks, elems * 4, t * 1e6, bad ? "WRONG" : "ok", bw);
    return 0;
}
