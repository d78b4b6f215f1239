/* Collective benchmarks.
 *   coll latency [ITERS]  mean latency of Bcast, Allreduce, Reduce, Gather, Scatter, Allgather
 *                         and Alltoall at 8 B, 1 KiB and 64 KiB per rank, and of Barrier (the
 *                         slowest rank's mean, in us)
 *   coll comms [ITERS]    Comm_split + Comm_dup + a barrier on the duplicate + both freed, the
 *                         slowest rank's mean per iteration, in us
 *   coll held [K]         a receive posted on a duplicate of MPI_COMM_WORLD that is then freed,
 *                         K Comm_splits kept alive while it waits, then all freed (the pattern
 *                         of MPICH's comm/cmfree test); the slowest rank's mean per split and
 *                         per free, in us, a line each for each of 3 repetitions
 *   coll hotspot [ITERS]  the FDS-like hot spot: every rank sends point-to-point messages to
 *                         rank 0 while all ranks gather to it (MPI_Gather and MPI_Gatherv);
 *                         rank 0 posts its receives in the order opposite to their arrival
 * Prints one `key=value …` line per measurement from rank 0. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

static double slowest(double t)
{
    double max;
    MPI_Reduce(&t, &max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    return max;
}

static void latency(int iters)
{
    static const int sizes[] = {8, 1024, 65536};
    static const char *names[] = {"bcast",   "allreduce", "reduce",   "gather",
                                  "scatter", "allgather", "alltoall", "barrier"};
    char *a = malloc(65536L * size), *b = malloc(65536L * size);
    memset(a, 1, 65536L * size);
    memset(b, 0, 65536L * size);
    for (int c = 0; c < 8; c++)
        for (int s = 0; s < (c == 7 ? 1 : 3); s++) {
            int bytes = sizes[s], n = bytes / 8, its = bytes >= 65536 ? iters / 4 + 1 : iters;
            double t0 = 0;
            for (int i = -its / 10 - 1; i < its; i++) {
                if (i == 0) {
                    MPI_Barrier(MPI_COMM_WORLD);
                    t0 = MPI_Wtime();
                }
                switch (c) {
                case 0: MPI_Bcast(a, n, MPI_DOUBLE, 0, MPI_COMM_WORLD); break;
                case 1: MPI_Allreduce(a, b, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); break;
                case 2: MPI_Reduce(a, b, n, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD); break;
                case 3: MPI_Gather(a, n, MPI_DOUBLE, b, n, MPI_DOUBLE, 0, MPI_COMM_WORLD); break;
                case 4: MPI_Scatter(a, n, MPI_DOUBLE, b, n, MPI_DOUBLE, 0, MPI_COMM_WORLD); break;
                case 5: MPI_Allgather(a, n, MPI_DOUBLE, b, n, MPI_DOUBLE, MPI_COMM_WORLD); break;
                case 6: MPI_Alltoall(a, n, MPI_DOUBLE, b, n, MPI_DOUBLE, MPI_COMM_WORLD); break;
                case 7: MPI_Barrier(MPI_COMM_WORLD); break;
                }
            }
            double us = slowest((MPI_Wtime() - t0) / its * 1e6);
            if (rank == 0)
                printf("bench=latency coll=%s bytes=%d ranks=%d iters=%d us=%.2f\n", names[c],
                       c == 7 ? 0 : bytes, size, its, us);
        }
    free(a);
    free(b);
}

#define MSGS 16 /* point-to-point messages from each rank to rank 0 per iteration */

static void hotspot(int iters)
{
    int n = 4;
    double *mine = malloc(sizeof(double) * n), *all = malloc(sizeof(double) * n * size);
    int *counts = malloc(sizeof(int) * size), *displs = malloc(sizeof(int) * size);
    for (int r = 0; r < size; r++) {
        counts[r] = n;
        displs[r] = r * n;
    }
    for (int i = 0; i < n; i++)
        mine[i] = rank;
    long total = (long)MSGS * (size - 1);
    int *in = malloc(sizeof(int) * (total > 0 ? total : 1)), out[MSGS];
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * (total > MSGS ? total : MSGS));
    double t0 = 0;
    for (int it = -2; it < iters; it++) {
        if (it == 0) {
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
        }
        if (rank == 0) {
            long k = 0;
            for (int src = size - 1; src >= 1; src--)
                for (int tag = MSGS - 1; tag >= 0; tag--, k++)
                    MPI_Irecv(&in[k], 1, MPI_INT, src, tag, MPI_COMM_WORLD, &reqs[k]);
            MPI_Gather(mine, n, MPI_DOUBLE, all, n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
            MPI_Gatherv(mine, n, MPI_DOUBLE, all, counts, displs, MPI_DOUBLE, 0, MPI_COMM_WORLD);
            MPI_Waitall((int)total, reqs, MPI_STATUSES_IGNORE);
        } else {
            for (int tag = 0; tag < MSGS; tag++) {
                out[tag] = rank * tag;
                MPI_Isend(&out[tag], 1, MPI_INT, 0, tag, MPI_COMM_WORLD, &reqs[tag]);
            }
            MPI_Gather(mine, n, MPI_DOUBLE, all, n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
            MPI_Gatherv(mine, n, MPI_DOUBLE, all, counts, displs, MPI_DOUBLE, 0, MPI_COMM_WORLD);
            MPI_Waitall(MSGS, reqs, MPI_STATUSES_IGNORE);
        }
    }
    double us = slowest((MPI_Wtime() - t0) / iters * 1e6);
    if (rank == 0)
        printf("bench=hotspot ranks=%d iters=%d msgs_per_rank=%d us_per_iter=%.2f\n", size, iters,
               MSGS, us);
    free(mine);
    free(all);
    free(counts);
    free(displs);
    free(in);
    free(reqs);
}

static void comms(int iters)
{
    double t0 = 0;
    for (int i = -iters / 10 - 1; i < iters; i++) {
        if (i == 0) {
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
        }
        MPI_Comm half, dup;
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
        MPI_Comm_dup(half, &dup);
        MPI_Barrier(dup);
        MPI_Comm_free(&dup);
        MPI_Comm_free(&half);
    }
    double us = slowest((MPI_Wtime() - t0) / iters * 1e6);
    if (rank == 0)
        printf("bench=comms ranks=%d iters=%d us=%.2f\n", size, iters, us);
}

static void held(int k)
{
    MPI_Comm *kept = malloc(sizeof(MPI_Comm) * k);
    int buf[128];
    for (int rep = 0; rep < 3; rep++) {
        MPI_Comm dup;
        MPI_Request req = MPI_REQUEST_NULL;
        MPI_Comm_dup(MPI_COMM_WORLD, &dup);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (rank == size - 1)
            MPI_Irecv(buf, 128, MPI_INT, 0, 0, dup, &req);
        MPI_Comm_free(&dup);
        for (int i = 0; i < k; i++)
            MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &kept[i]);
        double t1 = MPI_Wtime();
        for (int i = 0; i < k; i++)
            MPI_Comm_free(&kept[i]);
        double t2 = MPI_Wtime();
        /* No message ever comes: the receive is cancelled, which must succeed. */
        if (req != MPI_REQUEST_NULL) {
            MPI_Status status;
            int cancelled = 0;
            MPI_Cancel(&req);
            MPI_Wait(&req, &status);
            MPI_Test_cancelled(&status, &cancelled);
            if (!cancelled) {
                fprintf(stderr, "coll held: the pending receive was not cancelled\n");
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        }
        double split = slowest((t1 - t0) / k * 1e6), freed = slowest((t2 - t1) / k * 1e6);
        if (rank == 0)
            printf("bench=held coll=held_split ranks=%d k=%d us=%.2f\n"
                   "bench=held coll=held_free ranks=%d k=%d us=%.2f\n",
                   size, k, split, size, k, freed);
    }
    free(kept);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *mode = argc > 1 ? argv[1] : "latency";
    int iters = argc > 2 ? atoi(argv[2]) : 200;
    if (strcmp(mode, "hotspot") == 0)
        hotspot(iters);
    else if (strcmp(mode, "comms") == 0)
        comms(iters);
    else if (strcmp(mode, "held") == 0)
        held(argc > 2 ? iters : 1020);
    else
        latency(iters);
    MPI_Finalize();
    return 0;
}
