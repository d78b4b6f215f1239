/* The traffic of an all-pairs N-body code (the point-to-point heavy Nbody mix of Ghazimirsaeed et al.
 * §5.3).
 *
 *   app_nbody [-b bodies] [-c chunks] [-i steps] [-e every] [-r reps]
 *
 * Each rank owns b bodies.  Every step each rank posts an MPI_Irecv for every chunk of every
 * other rank's block (specific source, a tag per chunk and step: (n-1)*c receives outstanding,
 * posted last source first), sends its own block in c chunks to every rank with MPI_Isend,
 * waits for all, checks the ids of the bodies received, then computes the forces in a fixed
 * order and moves its bodies.  Every e steps an MPI_Allreduce sums the energy.  Each
 * repetition starts from the same bodies, so all give the same checksum (a hash of the
 * positions' bits); prints
 *   RESULT name=app_nbody ranks=4 bodies=64 chunks=8 iters=20 usec=120.5 min=118.0 reps=3
 *          checksum=...
 * usec: per step, the slowest rank's, median over repetitions (after a warm-up one).
 */
#include <inttypes.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

/* GCC 12 mistakes MPICH's MPI_STATUSES_IGNORE, a constant pointer, for a zero-sized array. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif

enum { X, Y, Z, MASS, ID, FIELDS }; /* a body on the wire */
#define TAG_STEPS 8                 /* tags cycle over this many steps */

static int rank, nranks, nb = 64, chunks = 8;

static double unit(uint64_t seed) { return (double)(mix(seed) >> 11) / 9007199254740992.0; }

/* Bodies [first, first + len) of a block make chunk c. */
static void chunk_of(int c, int *first, int *len) {
    int base = nb / chunks, extra = nb % chunks;
    *first = c * base + (c < extra ? c : extra);
    *len = base + (c < extra);
}

static double energy(const double *all, const double *vel) {
    double e = 0;
    const double *mine = all + (size_t)rank * nb * FIELDS;
    for (int i = 0; i < nb; i++) {
        const double *p = mine + i * FIELDS, *v = vel + 3 * i;
        e += 0.5 * p[MASS] * (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
        for (int j = 0; j < nb * nranks; j++) {
            const double *q = all + (size_t)j * FIELDS;
            if (q == p)
                continue;
            double dx = q[X] - p[X], dy = q[Y] - p[Y], dz = q[Z] - p[Z];
            e -= 0.5 * p[MASS] * q[MASS] / sqrt(dx * dx + dy * dy + dz * dz + 0.01);
        }
    }
    return e;
}

/* Runs steps from the initial bodies; returns the seconds per step and sets *checksum. */
struct params {
    int steps, every;
};

static double run(void *arg, uint64_t *checksum) {
    const struct params *p = arg;
    int steps = p->steps, every = p->every;
    int nreq = (nranks - 1) * chunks;
    /* Every rank's block, this rank's at its own place. */
    double *all = malloc(sizeof(double) * FIELDS * nb * nranks);
    double *mine = all + (size_t)rank * nb * FIELDS;
    double *vel = calloc(3 * nb, sizeof(double)), *acc = malloc(sizeof(double) * 3 * nb);
    MPI_Request *rreq = malloc(sizeof(MPI_Request) * (nreq + 1));
    MPI_Request *sreq = malloc(sizeof(MPI_Request) * (nreq + 1));
    for (int i = 0; i < nb; i++) {
        uint64_t s = ((uint64_t)rank * nb + i) * 4;
        mine[i * FIELDS + X] = unit(s);
        mine[i * FIELDS + Y] = unit(s + 1);
        mine[i * FIELDS + Z] = unit(s + 2);
        mine[i * FIELDS + MASS] = 0.5 + unit(s + 3);
        mine[i * FIELDS + ID] = (double)(rank * nb + i);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int step = 0; step < steps; step++) {
        int k = 0;
        for (int src = nranks - 1; src >= 0; src--)
            for (int c = chunks - 1; c >= 0 && src != rank; c--) {
                int first, len;
                chunk_of(c, &first, &len);
                MPI_Irecv(all + ((size_t)src * nb + first) * FIELDS, len * FIELDS, MPI_DOUBLE, src,
                          (step % TAG_STEPS) * chunks + c, MPI_COMM_WORLD, &rreq[k++]);
            }
        k = 0;
        for (int d = 1; d < nranks; d++)
            for (int c = 0; c < chunks; c++) {
                int first, len;
                chunk_of(c, &first, &len);
                MPI_Isend(mine + first * FIELDS, len * FIELDS, MPI_DOUBLE, (rank + d) % nranks,
                          (step % TAG_STEPS) * chunks + c, MPI_COMM_WORLD, &sreq[k++]);
            }
        MPI_Waitall(nreq, rreq, MPI_STATUSES_IGNORE);
        for (int j = 0; j < nb * nranks; j++)
            if (all[(size_t)j * FIELDS + ID] != (double)j) {
                fprintf(stderr, "app_nbody: rank %d step %d: body %d holds id %g\n", rank, step,
                        j, all[(size_t)j * FIELDS + ID]);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        if (every > 0 && step % every == 0) {
            double e = energy(all, vel);
            MPI_Allreduce(MPI_IN_PLACE, &e, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            if (!isfinite(e)) {
                fprintf(stderr, "app_nbody: rank %d step %d: energy %g\n", rank, step, e);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        }
        for (int i = 0; i < nb; i++) {
            const double *p = mine + i * FIELDS;
            double a[3] = {0, 0, 0};
            for (int j = 0; j < nb * nranks; j++) {
                const double *q = all + (size_t)j * FIELDS;
                double dx = q[X] - p[X], dy = q[Y] - p[Y], dz = q[Z] - p[Z];
                double r2 = dx * dx + dy * dy + dz * dz + 0.01, f = q[MASS] / (r2 * sqrt(r2));
                a[0] += f * dx;
                a[1] += f * dy;
                a[2] += f * dz;
            }
            memcpy(acc + 3 * i, a, sizeof a);
        }
        /* Our block may still be on its way out. */
        MPI_Waitall(nreq, sreq, MPI_STATUSES_IGNORE);
        for (int i = 0; i < nb; i++)
            for (int d = 0; d < 3; d++) {
                vel[3 * i + d] += 1e-4 * acc[3 * i + d];
                mine[i * FIELDS + d] += 1e-4 * vel[3 * i + d];
            }
    }
    double t = (MPI_Wtime() - t0) / steps;

    uint64_t h = mix((uint64_t)rank);
    for (int i = 0; i < nb * FIELDS; i++) {
        uint64_t bits;
        memcpy(&bits, &mine[i], sizeof bits);
        h = mix(h ^ bits);
    }
    MPI_Allreduce(&h, checksum, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    free(all);
    free(vel);
    free(acc);
    free(rreq);
    free(sreq);
    return t;
}

int main(int argc, char **argv) {
    int opt, steps = 20, every = 5, reps = 3;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    while ((opt = getopt(argc, argv, "b:c:i:e:r:")) != -1) {
        switch (opt) {
        case 'b': nb = atoi(optarg); break;
        case 'c': chunks = atoi(optarg); break;
        case 'i': steps = atoi(optarg); break;
        case 'e': every = atoi(optarg); break;
        case 'r': reps = atoi(optarg); break;
        default:
            if (rank == 0)
                fprintf(stderr, "usage: app_nbody [-b bodies] [-c chunks] [-i steps] [-e every] "
                                "[-r reps]\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (nb < 1 || chunks < 1 || chunks > nb || steps < 1 || every < 0 || reps < 1) {
        if (rank == 0)
            fprintf(stderr, "app_nbody: bad arguments (1 <= chunks <= bodies)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    double *t = malloc(sizeof(double) * reps);
    struct params params = {steps, every};
    uint64_t first = timed_reps("app_nbody", reps, run, &params, t);
    if (rank == 0) {
        printf("RESULT name=app_nbody ranks=%d bodies=%d chunks=%d iters=%d usec=%.3f min=%.3f "
               "reps=%d checksum=%016" PRIx64 "\n",
               nranks, nb, chunks, steps, t[reps / 2] * 1e6, t[0] * 1e6, reps, first);
        fflush(stdout);
    }
    free(t);
    MPI_Finalize();
    return 0;
}
