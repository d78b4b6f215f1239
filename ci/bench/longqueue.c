/* Matching against long queues: rank 0 sends N messages with distinct tags to rank 1.
 *
 *   longqueue [-n N] [-r reps] [-s size]
 *
 * Variants (time per message on rank 1, from a common start to the last completed receive,
 * so the sends and the arrivals are included):
 *   longqueue_posted_reverse      rank 1 posts N MPI_Irecvs (tags 0..N-1), barrier, rank 0 sends
 *                                 tags N-1..0, rank 1 MPI_Waitall: every arrival matches the
 *                                 newest posted receive (worst case for a list).
 *   longqueue_posted_inorder      the same with tags sent 0..N-1 (every arrival matches the head).
 *   longqueue_unexpected_reverse  rank 0 sends tags 0..N-1 first, barrier, then rank 1 receives
 *                                 them with MPI_Recv in order N-1..0 (each the newest unexpected).
 *   longqueue_unexpected_inorder  the same, received 0..N-1.
 * Default N = 4096, 8-byte messages (eager everywhere), 5 repetitions after one warm-up;
 * prints the median, the minimum and the mean (where one slow repetition shows) as
 *   RESULT name=longqueue_posted_reverse size=8 n=4096 usec=0.123 min=0.120 mean=0.125 reps=5
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

enum { POSTED_REVERSE, POSTED_INORDER, UNEXPECTED_REVERSE, UNEXPECTED_INORDER, NVARIANTS };
static const char *names[NVARIANTS] = {
    "longqueue_posted_reverse", "longqueue_posted_inorder", "longqueue_unexpected_reverse",
    "longqueue_unexpected_inorder"};

/* A message carries its tag in its first bytes and in its last byte. */
static void stamp(char *buf, int size, int tag) {
    memcpy(buf, &tag, sizeof tag);
    buf[size - 1] = (char)tag;
}

static void check(const char *buf, int size, int tag) {
    int got;
    memcpy(&got, buf, sizeof got);
    if (got != tag || buf[size - 1] != (char)tag) {
        fprintf(stderr, "longqueue: message with tag %d holds %d\n", tag, got);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

/* Rank 1 returns the seconds per message; rank 0 returns 0. */
static double run(int variant, int n, int size, char *bufs, MPI_Request *reqs) {
    int rank, reverse = variant == POSTED_REVERSE || variant == UNEXPECTED_REVERSE;
    double t0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    memset(bufs, 0xff, (size_t)n * size);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    if (variant == POSTED_REVERSE || variant == POSTED_INORDER) {
        if (rank == 1)
            for (int tag = 0; tag < n; tag++)
                MPI_Irecv(bufs + (size_t)tag * size, size, MPI_CHAR, 0, tag, MPI_COMM_WORLD,
                          &reqs[tag]);
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            for (int i = 0; i < n; i++) {
                int tag = reverse ? n - 1 - i : i;
                char *b = bufs + (size_t)tag * size;
                stamp(b, size, tag);
                MPI_Send(b, size, MPI_CHAR, 1, tag, MPI_COMM_WORLD);
            }
        } else {
            MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
        }
    } else {
        if (rank == 0) {
            for (int tag = 0; tag < n; tag++) {
                char *b = bufs + (size_t)tag * size;
                stamp(b, size, tag);
                MPI_Send(b, size, MPI_CHAR, 1, tag, MPI_COMM_WORLD);
            }
        }
        /* Sends are eager and ordered before the barrier's own traffic, so rank 1 finds them
         * all arrived (unexpected) by the time it leaves the barrier. */
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 1)
            for (int i = 0; i < n; i++) {
                int tag = reverse ? n - 1 - i : i;
                MPI_Recv(bufs + (size_t)tag * size, size, MPI_CHAR, 0, tag, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
            }
    }
    double t = MPI_Wtime() - t0;
    if (rank == 1)
        for (int tag = 0; tag < n; tag++)
            check(bufs + (size_t)tag * size, size, tag);
    return rank == 1 ? t / n : 0.0;
}

int main(int argc, char **argv) {
    int rank, nranks, opt, n = 4096, reps = 5, size = 8;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    while ((opt = getopt(argc, argv, "n:r:s:")) != -1) {
        switch (opt) {
        case 'n': n = atoi(optarg); break;
        case 'r': reps = atoi(optarg); break;
        case 's': size = atoi(optarg); break;
        default:
            if (rank == 0)
                fprintf(stderr, "usage: longqueue [-n N] [-r reps] [-s size]\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (nranks != 2) {
        if (rank == 0)
            fprintf(stderr, "longqueue: needs exactly 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int *tag_ub, flag;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag);
    if (n < 1 || reps < 1 || size < (int)sizeof(int) || (flag && n - 1 > *tag_ub)) {
        if (rank == 0)
            fprintf(stderr, "longqueue: bad arguments (size >= %d, N - 1 <= MPI_TAG_UB)\n",
                    (int)sizeof(int));
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    char *bufs = malloc((size_t)n * size);
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * n);
    double *t = malloc(sizeof(double) * reps);
    for (int v = 0; v < NVARIANTS; v++) {
        run(v, n, size, bufs, reqs);  /* warm-up */
        for (int r = 0; r < reps; r++)
            t[r] = run(v, n, size, bufs, reqs);
        if (rank == 1) {
            double sum = 0;
            for (int r = 0; r < reps; r++)
                sum += t[r];
            qsort(t, reps, sizeof(double), cmp_double);
            printf("RESULT name=%s size=%d n=%d usec=%.3f min=%.3f mean=%.3f reps=%d\n",
                   names[v], size, n, t[reps / 2] * 1e6, t[0] * 1e6, sum / reps * 1e6, reps);
            fflush(stdout);
        }
    }
    free(bufs);
    free(reqs);
    free(t);
    MPI_Finalize();
    return 0;
}
