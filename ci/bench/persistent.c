/* A halo exchange with persistent requests between ranks 0 and 1, or of one rank with itself
 * (microseconds an iteration; with one rank the shim's share of each iteration shows most).
 *
 *   persistent [-i iters] [-r reps] [-s size] [-t] [-v variant]
 *
 * Each rank makes one persistent receive from the other and one persistent send to it
 * (MPI_Recv_init, MPI_Send_init), then every iteration starts both with MPI_Startall and
 * completes them, checking the first int received (the iteration's number):
 *   persistent_waitall  MPI_Waitall over both.
 *   persistent_wait     MPI_Wait on each.
 *   persistent_testall  MPI_Testall over both until it sets its flag (a polling loop).
 * -v: only that variant.  -t: MPI_Init_thread with MPI_THREAD_MULTIPLE.  Size in bytes,
 * default 8.  Each variant: one warm-up repetition, then reps repetitions of iters iterations;
 * prints the slowest rank's median and minimum as
 *   RESULT name=persistent_waitall size=8 level=single usec=0.452 min=0.447 iters=100000 reps=5
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

/* GCC 12 mistakes MPICH's MPI_STATUSES_IGNORE, a constant pointer, for a zero-sized array. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif

enum { BY_WAITALL, BY_WAIT, BY_TESTALL, NVARIANTS };

struct halo {
    int *out, *in;
    int ints, iters, completion;
    MPI_Request r[2];
};

static double run(void *arg, uint64_t *checksum) {
    struct halo *h = arg;
    uint64_t sum = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < h->iters; i++) {
        h->out[0] = i;
        MPI_Startall(2, h->r);
        if (h->completion == BY_WAIT) {
            MPI_Wait(&h->r[0], MPI_STATUS_IGNORE);
            MPI_Wait(&h->r[1], MPI_STATUS_IGNORE);
        } else if (h->completion == BY_TESTALL) {
            int flag = 0;
            while (!flag)
                MPI_Testall(2, h->r, &flag, MPI_STATUSES_IGNORE);
        } else {
            MPI_Waitall(2, h->r, MPI_STATUSES_IGNORE);
        }
        if (h->in[0] != i) {
            fprintf(stderr, "persistent: iteration %d received %d\n", i, h->in[0]);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        sum = mix(sum ^ (uint64_t)h->in[0]);
    }
    *checksum = sum;
    return (MPI_Wtime() - t0) / h->iters;
}

int main(int argc, char **argv) {
    int iters = 100000, reps = 5, size = 8, threads = 0, opt;
    const char *only = NULL;
    while ((opt = getopt(argc, argv, "i:r:s:tv:")) != -1) {
        switch (opt) {
        case 'i': iters = atoi(optarg); break;
        case 'r': reps = atoi(optarg); break;
        case 's': size = atoi(optarg); break;
        case 't': threads = 1; break;
        case 'v': only = optarg; break;
        default:
            fprintf(stderr, "usage: persistent [-i iters] [-r reps] [-s size] [-t] [-v variant]\n");
            return 2;
        }
    }
    int provided, rank, nranks;
    if (threads)
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    else
        MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (nranks > 2 || iters < 1 || reps < 1 || size < (int)sizeof(int)) {
        if (rank == 0)
            fprintf(stderr, "persistent: needs 1 or 2 ranks, iters and reps >= 1, size >= 4\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int peer = nranks - 1 - rank, ints = size / (int)sizeof(int);
    struct halo h = {.out = calloc(ints, sizeof(int)), .in = calloc(ints, sizeof(int)),
                     .ints = ints, .iters = iters};
    MPI_Recv_init(h.in, ints, MPI_INT, peer, 3, MPI_COMM_WORLD, &h.r[0]);
    MPI_Send_init(h.out, ints, MPI_INT, peer, 3, MPI_COMM_WORLD, &h.r[1]);
    double *t = malloc(sizeof(double) * reps);
    static const char *names[NVARIANTS] = {"persistent_waitall", "persistent_wait",
                                           "persistent_testall"};
    for (int variant = 0; variant < NVARIANTS; variant++) {
        if (only && strcmp(only, names[variant]) != 0)
            continue;
        h.completion = variant;
        timed_reps(names[variant], reps, run, &h, t);
        if (rank == 0) {
            printf("RESULT name=%s size=%d level=%s usec=%.3f min=%.3f iters=%d reps=%d\n",
                   names[variant], ints * (int)sizeof(int), threads ? "multiple" : "single",
                   t[reps / 2] * 1e6, t[0] * 1e6, iters, reps);
            fflush(stdout);
        }
    }
    MPI_Request_free(&h.r[0]);
    MPI_Request_free(&h.r[1]);
    free(h.out);
    free(h.in);
    free(t);
    MPI_Finalize();
    return 0;
}
