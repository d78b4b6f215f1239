/* What the benchmark programs share: the median of repetitions, a checksum mixer, and the
 * repetition loop of the application-like programs, which checks that every repetition ends
 * in the same state. */
#ifndef MATCHSHIM_BENCH_H
#define MATCHSHIM_BENCH_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static inline int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* splitmix64's finalizer: checksums and pseudo-random keys. */
static inline uint64_t mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Runs `run` once to warm up and `reps` times more; each run returns its seconds per
 * iteration and sets its checksum, which must equal the first run's (the job aborts naming
 * `name` otherwise). On rank 0, t[0..reps) ends up sorted: the slowest rank's time of each
 * repetition. Returns the checksum. */
static inline uint64_t timed_reps(const char *name, int reps,
                                  double (*run)(void *arg, uint64_t *checksum), void *arg,
                                  double *t) {
    int rank;
    uint64_t first = 0, sum;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int r = -1; r < reps; r++) {
        double mine = run(arg, &sum), max;
        if (r < 0)
            first = sum;
        else if (sum != first) {
            fprintf(stderr, "%s: rank %d: a repetition gave another checksum\n", name, rank);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        MPI_Reduce(&mine, &max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (r >= 0)
            t[r] = max;
    }
    if (rank == 0)
        qsort(t, reps, sizeof(double), cmp_double);
    return first;
}

#endif
