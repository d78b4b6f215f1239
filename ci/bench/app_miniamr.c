/* The traffic of an adaptive mesh refinement code (the mixed MiniAMR mix of Ghazimirsaeed et al. 2019, §5.3).
 *
 *   app_miniamr [-i steps] [-R every] [-r reps]
 *
 * The ranks form a non-periodic 3-D grid (MPI_Dims_create), so ranks on its faces have fewer
 * neighbours.  Each rank owns 1 to 4 blocks of cells.  Every step is a halo exchange: across
 * each face the two ranks exchange 1 + (blocks of one + blocks of the other) % 4 messages of
 * two sizes, each with its own tag (step, direction, message), all receives posted (specific
 * source and tag) before the sends; each rank folds what it received into its cells.  Every
 * R steps the ranks refine: an MPI_Allreduce gathers every rank's error indicator, rank 0
 * decides the new block counts and MPI_Bcasts them, and an MPI_Alltoallv moves blocks between
 * ranks (load balancing).  Every message carries a header (or each moved block a stamp) that
 * is checked.  Each repetition starts from the same cells, so all give the same checksum (a
 * hash of every rank's cells); prints
 *   RESULT name=app_miniamr ranks=4 dims=2x2x1 iters=24 usec=95.1 min=90.2 reps=3 checksum=...
 * usec: per step, the slowest rank's, median over repetitions (after a warm-up one).
 */
#include <inttypes.h>
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

#define BLOCK 256  /* cells (uint64) per block */
#define FACE 64    /* cells per halo message unit */
#define MAXMSG 4   /* messages per face at most */
#define HEADER 4   /* src, step, direction, message */
#define MAXWORDS (HEADER + 2 * FACE)

static int rank, nranks, dims[3], nbr[6]; /* nbr[d]: -x, +x, -y, +y, -z, +z; -1 if none */
static int *blocks;                       /* every rank's block count, the same everywhere */
static uint64_t *cells;

static void fail(int step, const char *what) {
    fprintf(stderr, "app_miniamr: rank %d step %d: %s\n", rank, step, what);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static int messages(int a, int b) { return 1 + (blocks[a] + blocks[b]) % MAXMSG; }
static int words(int k) { return HEADER + FACE * (1 + k % 2); }
static int tag_of(int step, int dir, int k) { return (step % 4) * 128 + dir * 16 + k; }

/* Blocks rank src moves to rank dst when balancing at this step. */
static int moved(int src, int dst, int step) {
    return src == dst ? 0 : (blocks[src] + 2 * blocks[dst] + src + dst + step) % 3;
}

static uint64_t stamp(int src, int dst, int step, int j) {
    return mix(((uint64_t)src << 40) ^ ((uint64_t)dst << 20) ^ ((uint64_t)step << 4) ^ (uint64_t)j);
}

static void halo(int step, uint64_t (*sbuf)[MAXMSG][MAXWORDS], uint64_t (*rbuf)[MAXMSG][MAXWORDS],
                 MPI_Request *reqs) {
    int n = 0, len = blocks[rank] * BLOCK;
    /* The message from the neighbour in direction d travels in direction d ^ 1. */
    for (int d = 5; d >= 0; d--)
        for (int k = 0; nbr[d] >= 0 && k < messages(rank, nbr[d]); k++)
            MPI_Irecv(rbuf[d][k], words(k), MPI_UINT64_T, nbr[d], tag_of(step, d ^ 1, k),
                      MPI_COMM_WORLD, &reqs[n++]);
    for (int d = 0; d < 6; d++)
        for (int k = 0; nbr[d] >= 0 && k < messages(rank, nbr[d]); k++) {
            uint64_t *m = sbuf[d][k];
            m[0] = rank, m[1] = step, m[2] = d, m[3] = k;
            for (int i = HEADER; i < words(k); i++)
                m[i] = cells[(k * FACE + i + 7 * d) % len];
            MPI_Isend(m, words(k), MPI_UINT64_T, nbr[d], tag_of(step, d, k), MPI_COMM_WORLD,
                      &reqs[n++]);
        }
    MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
    uint64_t acc = 0;
    for (int d = 0; d < 6; d++)
        for (int k = 0; nbr[d] >= 0 && k < messages(rank, nbr[d]); k++) {
            const uint64_t *m = rbuf[d][k];
            if (m[0] != (uint64_t)nbr[d] || m[1] != (uint64_t)step || m[2] != (uint64_t)(d ^ 1) ||
                m[3] != (uint64_t)k)
                fail(step, "a halo message with a wrong header");
            for (int i = HEADER; i < words(k); i++)
                acc = mix(acc ^ m[i]);
        }
    for (int i = 0; i < len; i++)
        cells[i] = mix(cells[i] ^ acc ^ (uint64_t)i);
}

static void refine(int step, uint64_t *out, uint64_t *in) {
    int *err = calloc(nranks, sizeof(int)), *sc = malloc(sizeof(int) * nranks);
    int *rc = malloc(sizeof(int) * nranks), *sd = malloc(sizeof(int) * nranks);
    int *rd = malloc(sizeof(int) * nranks), old = blocks[rank] * BLOCK;
    err[rank] = (int)(cells[0] % 8);
    MPI_Allreduce(MPI_IN_PLACE, err, nranks, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        for (int r = 0; r < nranks; r++)
            blocks[r] = 1 + (err[r] + blocks[r]) % 4;
    MPI_Bcast(blocks, nranks, MPI_INT, 0, MPI_COMM_WORLD);

    int ns = 0, nr = 0;
    for (int r = 0; r < nranks; r++) {
        sd[r] = ns, rd[r] = nr;
        sc[r] = moved(rank, r, step) * BLOCK;
        rc[r] = moved(r, rank, step) * BLOCK;
        for (int j = 0; j < sc[r] / BLOCK; j++)
            for (int i = 0; i < BLOCK; i++)
                out[ns + j * BLOCK + i] =
                    i ? cells[(j * BLOCK + i + r) % old] : stamp(rank, r, step, j);
        ns += sc[r], nr += rc[r];
    }
    MPI_Alltoallv(out, sc, sd, MPI_UINT64_T, in, rc, rd, MPI_UINT64_T, MPI_COMM_WORLD);
    uint64_t acc = 0;
    for (int r = 0; r < nranks; r++)
        for (int j = 0; j < rc[r] / BLOCK; j++) {
            const uint64_t *b = in + rd[r] + j * BLOCK;
            if (b[0] != stamp(r, rank, step, j))
                fail(step, "a moved block with a wrong stamp");
            for (int i = 1; i < BLOCK; i++)
                acc = mix(acc ^ b[i]);
        }
    /* The new blocks start from the old cells and what came in. */
    for (int i = 0; i < blocks[rank] * BLOCK; i++)
        out[i] = mix(cells[i % old] ^ acc ^ (uint64_t)i);
    memcpy(cells, out, sizeof(uint64_t) * blocks[rank] * BLOCK);
    free(err);
    free(sc);
    free(rc);
    free(sd);
    free(rd);
}

/* Runs steps from the initial cells; returns the seconds per step and sets *checksum. */
struct params {
    int steps, every;
};

static double run(void *arg, uint64_t *checksum) {
    const struct params *p = arg;
    int steps = p->steps, every = p->every;
    uint64_t(*sbuf)[MAXMSG][MAXWORDS] = malloc(sizeof(uint64_t) * 6 * MAXMSG * MAXWORDS);
    uint64_t(*rbuf)[MAXMSG][MAXWORDS] = malloc(sizeof(uint64_t) * 6 * MAXMSG * MAXWORDS);
    MPI_Request reqs[2 * 6 * MAXMSG];
    /* A rank moves out at most 2 blocks to each rank and keeps at most 4. */
    size_t cap = (size_t)BLOCK * (2 * nranks + 4);
    uint64_t *out = malloc(sizeof(uint64_t) * cap), *in = malloc(sizeof(uint64_t) * cap);
    for (int r = 0; r < nranks; r++)
        blocks[r] = 1 + r % 3;
    for (int i = 0; i < blocks[rank] * BLOCK; i++)
        cells[i] = mix((uint64_t)rank << 32 | (uint64_t)i);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int step = 0; step < steps; step++) {
        halo(step, sbuf, rbuf, reqs);
        if (every > 0 && (step + 1) % every == 0)
            refine(step, out, in);
    }
    double t = (MPI_Wtime() - t0) / steps;

    uint64_t h = mix((uint64_t)rank ^ (uint64_t)blocks[rank] << 32);
    for (int i = 0; i < blocks[rank] * BLOCK; i++)
        h = mix(h ^ cells[i]);
    MPI_Allreduce(&h, checksum, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    free(sbuf);
    free(rbuf);
    free(out);
    free(in);
    return t;
}

int main(int argc, char **argv) {
    int opt, steps = 24, every = 4, reps = 3;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    while ((opt = getopt(argc, argv, "i:R:r:")) != -1) {
        switch (opt) {
        case 'i': steps = atoi(optarg); break;
        case 'R': every = atoi(optarg); break;
        case 'r': reps = atoi(optarg); break;
        default:
            if (rank == 0)
                fprintf(stderr, "usage: app_miniamr [-i steps] [-R every] [-r reps]\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (steps < 1 || every < 0 || reps < 1) {
        if (rank == 0)
            fprintf(stderr, "app_miniamr: bad arguments\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    MPI_Dims_create(nranks, 3, dims);
    int c[3] = {rank % dims[0], rank / dims[0] % dims[1], rank / (dims[0] * dims[1])};
    for (int a = 0, stride = 1; a < 3; stride *= dims[a], a++) {
        nbr[2 * a] = c[a] > 0 ? rank - stride : -1;
        nbr[2 * a + 1] = c[a] + 1 < dims[a] ? rank + stride : -1;
    }
    blocks = malloc(sizeof(int) * nranks);
    cells = malloc(sizeof(uint64_t) * 4 * BLOCK);

    double *t = malloc(sizeof(double) * reps);
    struct params params = {steps, every};
    uint64_t first = timed_reps("app_miniamr", reps, run, &params, t);
    if (rank == 0) {
        printf("RESULT name=app_miniamr ranks=%d dims=%dx%dx%d iters=%d usec=%.3f min=%.3f reps=%d "
               "checksum=%016" PRIx64 "\n",
               nranks, dims[0], dims[1], dims[2], steps, t[reps / 2] * 1e6, t[0] * 1e6, reps,
               first);
        fflush(stdout);
    }
    free(blocks);
    free(cells);
    free(t);
    MPI_Finalize();
    return 0;
}
