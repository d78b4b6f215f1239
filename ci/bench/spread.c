/* Posted queues spread over several sources, of moderate length: rank 0 posts T receives for
 * each other rank (each source's newest tag first), tells the others to go, and they send
 * their tags in order, so every arrival matches its source's newest receive.
 *
 *   spread [-t "T1 T2 ..."] [-i iterations] [-r reps]
 *
 * A list (MPICH) searches the receives of every source for each arrival, a list per source
 * (Open MPI's ob1) only those of the arrival's source: the same program has deep queues in
 * one MPI and shallow ones in the other. Default T = 32, 128, 512, 20 iterations per
 * repetition, 5 repetitions after one warm-up; 8-byte messages. Prints per T the median and
 * minimum time per message on rank 0 (from the first post to the last completion) as
 *   RESULT name=spread_posted_reverse size=8 n=128 sources=3 usec=0.123 min=0.120 reps=5
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

enum { GO_TAG = 32767 };

/* Each message carries (source, tag); rank 0 checks every one. */
static void check(const int *got, int source, int tag) {
    if (got[0] != source || got[1] != tag) {
        fprintf(stderr, "spread: receive for (%d, %d) got (%d, %d)\n", source, tag, got[0],
                got[1]);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

/* Rank 0 returns its seconds per message; the others 0. */
static double run(int t, int iterations, int *bufs, MPI_Request *reqs) {
    int rank, size, go = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int n = (size - 1) * t;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int it = 0; it < iterations; it++) {
        if (rank == 0) {
            memset(bufs, 0xff, sizeof(int) * 2 * (size_t)n);
            for (int s = 1, k = 0; s < size; s++)
                for (int tag = t - 1; tag >= 0; tag--, k++)
                    MPI_Irecv(&bufs[2 * k], 2, MPI_INT, s, tag, MPI_COMM_WORLD, &reqs[k]);
            for (int s = 1; s < size; s++)
                MPI_Send(&go, 1, MPI_INT, s, GO_TAG, MPI_COMM_WORLD);
            MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
            for (int s = 1, k = 0; s < size; s++)
                for (int tag = t - 1; tag >= 0; tag--, k++)
                    check(&bufs[2 * k], s, tag);
        } else {
            MPI_Recv(&go, 1, MPI_INT, 0, GO_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            for (int tag = 0; tag < t; tag++) {
                int msg[2] = {rank, tag};
                MPI_Send(msg, 2, MPI_INT, 0, tag, MPI_COMM_WORLD);
            }
        }
    }
    return rank == 0 ? (MPI_Wtime() - t0) / iterations / n : 0.0;
}

int main(int argc, char **argv) {
    int rank, size, opt, iterations = 20, reps = 5;
    const char *lengths = "32 128 512";

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    while ((opt = getopt(argc, argv, "t:i:r:")) != -1) {
        switch (opt) {
        case 't': lengths = optarg; break;
        case 'i': iterations = atoi(optarg); break;
        case 'r': reps = atoi(optarg); break;
        default:
            if (rank == 0)
                fprintf(stderr, "usage: spread [-t \"T1 T2 ...\"] [-i iterations] [-r reps]\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (size < 2 || iterations < 1 || reps < 1) {
        if (rank == 0)
            fprintf(stderr, "spread: needs 2 ranks or more, iterations and reps >= 1\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    double *times = malloc(sizeof(double) * reps);
    for (const char *p = lengths; *p;) {
        char *end;
        long t = strtol(p, &end, 10);
        if (end == p)
            break;
        p = end;
        if (t < 1 || t >= GO_TAG) {
            if (rank == 0)
                fprintf(stderr, "spread: each T must be in 1..%d\n", GO_TAG - 1);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        size_t n = (size_t)(size - 1) * t;
        int *bufs = malloc(sizeof(int) * 2 * n);
        MPI_Request *reqs = malloc(sizeof(MPI_Request) * n);
        run((int)t, iterations, bufs, reqs); /* warm-up */
        for (int r = 0; r < reps; r++)
            times[r] = run((int)t, iterations, bufs, reqs);
        if (rank == 0) {
            qsort(times, reps, sizeof(double), cmp_double);
            printf("RESULT name=spread_posted_reverse size=8 n=%ld sources=%d usec=%.3f "
                   "min=%.3f reps=%d\n",
                   t, size - 1, times[reps / 2] * 1e6, times[0] * 1e6, reps);
            fflush(stdout);
        }
        free(bufs);
        free(reqs);
    }
    free(times);
    MPI_Finalize();
    return 0;
}
