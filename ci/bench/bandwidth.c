/* Windowed bandwidth from rank 0 to rank 1, as OSU's osu_bw measures it.
 *
 *   bandwidth [-w window] [-l loops] [-r reps] [-m maxsize] [-s size]
 *
 * Per loop rank 1 posts `window` MPI_Irecvs (default 64, each into its own slot), rank 0 posts
 * as many MPI_Isends, both MPI_Waitall, and rank 1 answers with a 4-byte acknowledgement, so a
 * window of small receives stays posted while messages stream in. Sizes 1 B, 8 B, ... (x8) and
 * maxsize (default 1 MiB), or only -s size. Each size: one warm-up repetition, then reps
 * repetitions of loops windows (fewer above 4 KiB); prints the median time per message and the
 * bandwidth it gives, as
 *   RESULT name=bandwidth size=8 usec=0.052 min=0.050 mbps=153.8 window=64 loops=200 reps=5
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

enum { DATA = 3, ACK = 4 };

/* Seconds per message on rank 0 (0 on rank 1). */
static double run(char *buf, int size, int window, int loops, int rank, MPI_Request *reqs) {
    int ack = 0;
    double t0;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (int l = 0; l < loops; l++) {
        if (rank == 0) {
            for (int w = 0; w < window; w++) {
                buf[(size_t)w * size] = (char)(l + w);
                MPI_Isend(buf + (size_t)w * size, size, MPI_CHAR, 1, DATA, MPI_COMM_WORLD,
                          &reqs[w]);
            }
            MPI_Waitall(window, reqs, MPI_STATUSES_IGNORE);
            MPI_Recv(&ack, 1, MPI_INT, 1, ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            for (int w = 0; w < window; w++)
                MPI_Irecv(buf + (size_t)w * size, size, MPI_CHAR, 0, DATA, MPI_COMM_WORLD,
                          &reqs[w]);
            MPI_Waitall(window, reqs, MPI_STATUSES_IGNORE);
            for (int w = 0; w < window; w++)
                if (buf[(size_t)w * size] != (char)(l + w)) {
                    fprintf(stderr, "bandwidth: wrong message %d of window %d\n", w, l);
                    MPI_Abort(MPI_COMM_WORLD, 1);
                }
            MPI_Send(&ack, 1, MPI_INT, 0, ACK, MPI_COMM_WORLD);
        }
    }
    return rank == 0 ? (MPI_Wtime() - t0) / ((double)loops * window) : 0.0;
}

int main(int argc, char **argv) {
    int rank, nranks, opt;
    int window = 64, base_loops = 200, reps = 5, maxsize = 1 << 20, only = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    while ((opt = getopt(argc, argv, "w:l:r:m:s:")) != -1) {
        switch (opt) {
        case 'w': window = atoi(optarg); break;
        case 'l': base_loops = atoi(optarg); break;
        case 'r': reps = atoi(optarg); break;
        case 'm': maxsize = atoi(optarg); break;
        case 's': only = atoi(optarg); break;
        default:
            if (rank == 0)
                fprintf(stderr, "usage: bandwidth [-w window] [-l loops] [-r reps] "
                                "[-m maxsize] [-s size]\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (nranks != 2) {
        if (rank == 0)
            fprintf(stderr, "bandwidth: needs exactly 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (window < 1 || base_loops < 1 || reps < 1 || maxsize < 1 || only < 0) {
        if (rank == 0)
            fprintf(stderr, "bandwidth: bad arguments\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (only)
        maxsize = only;

    char *buf = malloc((size_t)window * maxsize);
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * window);
    double *t = malloc(sizeof(double) * reps);
    if (!buf || !reqs || !t) {
        fprintf(stderr, "bandwidth: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(buf, 1, (size_t)window * maxsize);

    for (int size = only ? only : 1; size > 0;
         size = size >= maxsize ? 0 : (size > maxsize / 8 ? maxsize : size * 8)) {
        /* Above 4 KiB scale the loops down with the size, keeping at least 10. */
        long l = size <= 4096 ? base_loops : (long)base_loops * 4096 / size;
        int loops = l < 10 ? (base_loops < 10 ? base_loops : 10) : (int)l;
        for (int r = -1; r < reps; r++) {
            double secs = run(buf, size, window, r < 0 ? loops / 10 + 1 : loops, rank, reqs);
            if (r >= 0)
                t[r] = secs;
        }
        if (rank == 0) {
            qsort(t, reps, sizeof(double), cmp_double);
            double med = t[reps / 2];
            printf("RESULT name=bandwidth size=%d usec=%.4f min=%.4f mbps=%.1f window=%d "
                   "loops=%d reps=%d\n",
                   size, med * 1e6, t[0] * 1e6, size / med / 1e6, window, loops, reps);
            fflush(stdout);
        }
    }
    free(buf);
    free(reqs);
    free(t);
    MPI_Finalize();
    return 0;
}
