/* The traffic of a parallel radix sort (the collective-heavy Radix mix of Ghazimirsaeed et al. 2019, §5.3).
 *
 *   app_radix [-n keys] [-i iters] [-r reps]
 *
 * Each rank holds 32-bit keys (n per rank at the start).  Every iteration is a pass over one
 * byte of the keys: the byte picks the rank a key goes to; an MPI_Alltoall of bucket counts
 * and an MPI_Alltoallv of the keys move them there; each rank sorts what it received by the
 * next byte (counting sort), tells its ring neighbour how many keys it holds (the only
 * point-to-point message), and an MPI_Allreduce checks that no key was lost or changed.
 * Each received key is checked to belong to its rank.  Each repetition starts from the same
 * keys, so all give the same checksum (a hash of every rank's keys in order); prints
 *   RESULT name=app_radix ranks=4 keys=4096 iters=16 usec=85.2 min=80.1 reps=5 checksum=...
 * usec: per iteration, the slowest rank's, median over repetitions (after a warm-up one).
 */
#include <inttypes.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

static int rank, nranks;

static void fail(const char *what) {
    fprintf(stderr, "app_radix: rank %d: %s\n", rank, what);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static int byte_of(uint32_t key, int pass) { return (key >> (8 * (pass % 4))) & 0xff; }
static int owner(uint32_t key, int pass) { return byte_of(key, pass) * nranks / 256; }

/* Runs iters passes from the initial keys; returns the seconds per pass and sets *checksum. */
struct params {
    int n, iters, cap;
    uint32_t *keys, *tmp;
};

static double run(void *arg, uint64_t *checksum) {
    const struct params *p = arg;
    int n = p->n, iters = p->iters, cap = p->cap;
    uint32_t *keys = p->keys, *tmp = p->tmp;
    int *scounts = malloc(sizeof(int) * nranks), *rcounts = malloc(sizeof(int) * nranks);
    int *sdispls = malloc(sizeof(int) * nranks), *rdispls = malloc(sizeof(int) * nranks);
    int len = n, hist[257];
    uint64_t sum0 = 0, ring = 0;
    for (int k = 0; k < n; k++) {
        keys[k] = (uint32_t)mix((uint64_t)rank << 32 | (uint64_t)k);
        sum0 += keys[k];
    }
    MPI_Allreduce(MPI_IN_PLACE, &sum0, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int pass = 0; pass < iters; pass++) {
        /* Bucket the keys by destination (stable), then exchange counts and keys. */
        memset(scounts, 0, sizeof(int) * nranks);
        for (int k = 0; k < len; k++)
            scounts[owner(keys[k], pass)]++;
        for (int r = 0, d = 0; r < nranks; d += scounts[r], r++)
            sdispls[r] = d;
        for (int k = 0; k < len; k++)
            tmp[sdispls[owner(keys[k], pass)]++] = keys[k];
        for (int r = 0, d = 0; r < nranks; d += scounts[r], r++)
            sdispls[r] = d;
        MPI_Alltoall(scounts, 1, MPI_INT, rcounts, 1, MPI_INT, MPI_COMM_WORLD);
        len = 0;
        for (int r = 0; r < nranks; r++) {
            rdispls[r] = len;
            len += rcounts[r];
        }
        if (len > cap)
            fail("more keys than all ranks started with");
        MPI_Alltoallv(tmp, scounts, sdispls, MPI_UINT32_T, keys, rcounts, rdispls, MPI_UINT32_T,
                      MPI_COMM_WORLD);
        /* Every key received must be ours; then sort them by the next byte. */
        memset(hist, 0, sizeof hist);
        for (int k = 0; k < len; k++) {
            if (owner(keys[k], pass) != rank)
                fail("received a key that belongs to another rank");
            hist[byte_of(keys[k], pass + 1) + 1]++;
        }
        for (int b = 0; b < 256; b++)
            hist[b + 1] += hist[b];
        for (int k = 0; k < len; k++)
            tmp[hist[byte_of(keys[k], pass + 1)]++] = keys[k];
        memcpy(keys, tmp, sizeof(uint32_t) * len);

        int mine = len, left;
        MPI_Sendrecv(&mine, 1, MPI_INT, (rank + 1) % nranks, pass, &left, 1, MPI_INT,
                     (rank + nranks - 1) % nranks, pass, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        ring = mix(ring ^ (uint64_t)left);

        uint64_t total[2] = {(uint64_t)len, 0};
        for (int k = 0; k < len; k++)
            total[1] += keys[k];
        MPI_Allreduce(MPI_IN_PLACE, total, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
        if (total[0] != (uint64_t)n * nranks || total[1] != sum0)
            fail("keys lost or changed in the exchange");
    }
    double t = (MPI_Wtime() - t0) / iters;

    uint64_t h = mix((uint64_t)rank ^ ring);
    for (int k = 0; k < len; k++)
        h = mix(h ^ keys[k]);
    MPI_Allreduce(&h, checksum, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    free(scounts);
    free(rcounts);
    free(sdispls);
    free(rdispls);
    return t;
}

int main(int argc, char **argv) {
    int opt, n = 4096, iters = 16, reps = 5;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    while ((opt = getopt(argc, argv, "n:i:r:")) != -1) {
        switch (opt) {
        case 'n': n = atoi(optarg); break;
        case 'i': iters = atoi(optarg); break;
        case 'r': reps = atoi(optarg); break;
        default:
            if (rank == 0)
                fprintf(stderr, "usage: app_radix [-n keys] [-i iters] [-r reps]\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (n < 1 || iters < 1 || reps < 1 || (long)n * nranks > (1L << 30)) {
        if (rank == 0)
            fprintf(stderr, "app_radix: bad arguments\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    /* A rank can end up with every key. */
    int cap = n * nranks;
    uint32_t *keys = malloc(sizeof(uint32_t) * cap), *tmp = malloc(sizeof(uint32_t) * cap);
    double *t = malloc(sizeof(double) * reps);
    struct params params = {n, iters, cap, keys, tmp};
    uint64_t first = timed_reps("app_radix", reps, run, &params, t);
    if (rank == 0) {
        printf("RESULT name=app_radix ranks=%d keys=%d iters=%d usec=%.3f min=%.3f reps=%d "
               "checksum=%016" PRIx64 "\n",
               nranks, n, iters, t[reps / 2] * 1e6, t[0] * 1e6, reps, first);
        fflush(stdout);
    }
    free(keys);
    free(tmp);
    free(t);
    MPI_Finalize();
    return 0;
}
