/* MPI_Reduce_scatter_block (float32, sum) timed like nccl-tests:
 * usage: mpi_rs BYTES_PER_RANK ITERS WARMUP
 * prints: ranks bytes time_us (mean per call, max over ranks). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (argc < 4) {
        if (rank == 0) fprintf(stderr, "usage: %s BYTES ITERS WARMUP\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long bytes = atol(argv[1]);
    int iters = atoi(argv[2]), warmup = atoi(argv[3]);
    long elems = bytes / 4;
    long recvcount = elems / n;
    elems = recvcount * n;
    float *send = malloc(elems * sizeof(float));
    float *recv = malloc((recvcount > 0 ? recvcount : 1) * sizeof(float));
    if (!send || !recv) MPI_Abort(MPI_COMM_WORLD, 3);
    for (long i = 0; i < elems; i++) send[i] = (float)((i + rank) % 4);
    for (int i = 0; i < warmup; i++)
        MPI_Reduce_scatter_block(send, recv, (int)recvcount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++)
        MPI_Reduce_scatter_block(send, recv, (int)recvcount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double t = (MPI_Wtime() - t0) / iters, tmax;
    MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    /* Spot check: element 0 of rank r's block is sum over ranks of (r*recvcount + k) % 4. */
    double want = 0;
    for (int k = 0; k < n; k++) want += (double)(((long)rank * recvcount + k) % 4);
    int bad = recvcount > 0 && recv[0] != (float)want;
    int anybad = 0;
    MPI_Reduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("%d %ld %.1f %s\n", n, elems * 4, tmax * 1e6, anybad ? "WRONG" : "ok");
    free(send);
    free(recv);
    MPI_Finalize();
    return 0;
}
