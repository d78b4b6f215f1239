/* Multithreaded halo exchange (the halo pattern of Dosanjh et al. 2018, §2.3).
 *
 *   halo_mt [-t threads] [-i iters] [-r reps] [-s size] [-d 1|2]
 *
 * MPI_THREAD_MULTIPLE; the ranks form a periodic 1-D ring or 2-D torus (MPI_Dims_create) on
 * MPI_COMM_WORLD.  Every iteration each of the T threads of a rank posts an MPI_Irecv from
 * each neighbour, with a tag of its own per thread and direction, sends to every neighbour
 * with MPI_Isend, and waits for all of them: a rank's queues hold T times the receives of a
 * single-threaded halo, all from the same few sources.  Every payload is checked.
 * Each repetition times iters iterations of all threads (the slowest rank, per iteration),
 * after one warm-up repetition; prints the median and the minimum as
 *   RESULT name=halo_mt threads=4 ranks=4 dims=2x2 size=8 iters=200 usec=12.3 min=11.9 reps=5
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

/* GCC 12 mistakes MPICH's MPI_STATUSES_IGNORE, a constant pointer, for a zero-sized array. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif

#define MAXDIRS 4

static int rank, nranks, nthreads = 1, iters = 200, reps = 5, count = 2, ndirs;
static int nbr[MAXDIRS]; /* neighbour in direction d: -x, +x, -y, +y */
static pthread_barrier_t barrier;
static double t0, *times; /* per repetition: seconds per iteration, slowest rank */

static int opposite(int d) { return d ^ 1; }

/* The value of element k of what `src` sends in direction d from thread t at iteration it. */
static int value(int src, int t, int d, int it, int k) {
    unsigned v = (((unsigned)it * nthreads + t) * MAXDIRS + d) * nranks + src;
    return (int)((v * 31u + k) & 0x7fffffffu);
}

/* A tag per thread and direction of travel: a thread only ever matches its own messages. */
static int tag_of(int t, int d) { return t * MAXDIRS + d; }

static void *worker(void *arg) {
    int t = (int)(long)arg;
    int *sbuf = malloc(sizeof(int) * count * ndirs), *rbuf = malloc(sizeof(int) * count * ndirs);
    MPI_Request reqs[2 * MAXDIRS];
    for (int r = -1; r < reps; r++) {
        pthread_barrier_wait(&barrier);
        if (t == 0) {
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
        }
        pthread_barrier_wait(&barrier);
        for (int it = 0; it < iters; it++) {
            for (int d = 0; d < ndirs; d++) {
                /* The message from the neighbour in direction d travels in direction opp(d). */
                MPI_Irecv(rbuf + d * count, count, MPI_INT, nbr[d], tag_of(t, opposite(d)),
                          MPI_COMM_WORLD, &reqs[d]);
            }
            for (int d = 0; d < ndirs; d++) {
                for (int k = 0; k < count; k++)
                    sbuf[d * count + k] = value(rank, t, d, it, k);
                MPI_Isend(sbuf + d * count, count, MPI_INT, nbr[d], tag_of(t, d), MPI_COMM_WORLD,
                          &reqs[ndirs + d]);
            }
            MPI_Waitall(2 * ndirs, reqs, MPI_STATUSES_IGNORE);
            for (int d = 0; d < ndirs; d++)
                for (int k = 0; k < count; k++)
                    if (rbuf[d * count + k] != value(nbr[d], t, opposite(d), it, k)) {
                        fprintf(stderr,
                                "halo_mt: rank %d thread %d iteration %d: element %d from rank "
                                "%d holds %d, not %d\n",
                                rank, t, it, k, nbr[d], rbuf[d * count + k],
                                value(nbr[d], t, opposite(d), it, k));
                        MPI_Abort(MPI_COMM_WORLD, 1);
                    }
        }
        pthread_barrier_wait(&barrier);
        if (t == 0 && r >= 0) {
            double mine = (MPI_Wtime() - t0) / iters;
            MPI_Reduce(&mine, &times[r], 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        }
    }
    free(sbuf);
    free(rbuf);
    return NULL;
}

int main(int argc, char **argv) {
    int provided, opt, size = 8, dim = 2, dims[2] = {0, 0};

    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    while ((opt = getopt(argc, argv, "t:i:r:s:d:")) != -1) {
        switch (opt) {
        case 't': nthreads = atoi(optarg); break;
        case 'i': iters = atoi(optarg); break;
        case 'r': reps = atoi(optarg); break;
        case 's': size = atoi(optarg); break;
        case 'd': dim = atoi(optarg); break;
        default:
            if (rank == 0)
                fprintf(stderr, "usage: halo_mt [-t threads] [-i iters] [-r reps] [-s size] "
                                "[-d 1|2]\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (nthreads < 1 || iters < 1 || reps < 1 || size < (int)sizeof(int) ||
        (dim != 1 && dim != 2)) {
        if (rank == 0)
            fprintf(stderr, "halo_mt: bad arguments (size >= %d, -d 1 or 2)\n", (int)sizeof(int));
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (nthreads > 1 && provided < MPI_THREAD_MULTIPLE) {
        if (rank == 0)
            fprintf(stderr, "halo_mt: MPI provides no MPI_THREAD_MULTIPLE\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int *tag_ub, flag;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag);
    if (flag && tag_of(nthreads - 1, MAXDIRS - 1) > *tag_ub) {
        if (rank == 0)
            fprintf(stderr, "halo_mt: too many threads for MPI_TAG_UB\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    count = size / (int)sizeof(int);

    /* Row-major torus coordinates; in 1-D only the x neighbours. */
    if (dim == 1)
        dims[0] = nranks, dims[1] = 1;
    else
        MPI_Dims_create(nranks, 2, dims);
    int x = rank % dims[0], y = rank / dims[0];
    ndirs = 2 * dim;
    nbr[0] = y * dims[0] + (x + dims[0] - 1) % dims[0];
    nbr[1] = y * dims[0] + (x + 1) % dims[0];
    nbr[2] = ((y + dims[1] - 1) % dims[1]) * dims[0] + x;
    nbr[3] = ((y + 1) % dims[1]) * dims[0] + x;

    times = malloc(sizeof(double) * reps);
    pthread_t *th = malloc(sizeof(pthread_t) * nthreads);
    pthread_barrier_init(&barrier, NULL, nthreads);
    for (long t = 1; t < nthreads; t++)
        if (pthread_create(&th[t], NULL, worker, (void *)t) != 0) {
            fprintf(stderr, "halo_mt: cannot start thread %ld\n", t);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    worker((void *)0L);
    for (int t = 1; t < nthreads; t++)
        pthread_join(th[t], NULL);
    pthread_barrier_destroy(&barrier);

    if (rank == 0) {
        qsort(times, reps, sizeof(double), cmp_double);
        printf("RESULT name=halo_mt threads=%d ranks=%d dims=%dx%d size=%d iters=%d usec=%.3f "
               "min=%.3f reps=%d\n",
               nthreads, nranks, dims[0], dims[1], count * (int)sizeof(int), iters,
               times[reps / 2] * 1e6, times[0] * 1e6, reps);
        fflush(stdout);
    }
    free(times);
    free(th);
    MPI_Finalize();
    return 0;
}
