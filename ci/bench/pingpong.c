/* Ping-pong latency between ranks 0 and 1 (half round trip, microseconds).
 *
 *   pingpong [-i iters] [-r reps] [-m maxsize] [-s size] [-t] [-c comms]
 *
 * Four variants per size:
 *   pingpong        MPI_Send + MPI_Recv on both sides (the reply may arrive before or after
 *                   its receive is posted).
 *   pingpong_irecv  MPI_Irecv + MPI_Send + MPI_Wait: every receive is posted before its message
 *                   can arrive, so only the posted-receive path is timed.
 *   pingpong_improbe  MPI_Send + a loop of MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG) + MPI_Mrecv:
 *                   natively, the MPI calls the shim makes for one receive, so the floor of
 *                   its cost.
 *   pingpong_probe  MPI_Send + MPI_Probe + MPI_Get_count + MPI_Recv of that count: how
 *                   programs receive messages of unknown size.
 * -t: MPI_Init_thread with MPI_THREAD_MULTIPLE, as mpi4py and hybrid programs initialise MPI.
 * -c K: round trip i on communicator i % K of MPI_COMM_WORLD and K - 1 duplicates of it, as a
 *   program whose library keeps its own communicator beside the user's does.
 * Sizes 1 B, 8 B, 64 B, ... (x8) and maxsize (default 1 MiB), or only -s size.  Each size: one
 * warm-up repetition, then reps repetitions of iters round trips (fewer above 4 KiB, where the
 * copy dominates); prints the median and the minimum as
 *   RESULT name=pingpong size=8 usec=0.452 min=0.447 iters=10000 reps=7
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

/* 1, 8, 64, ... and maxsize last; 0 ends the sweep. */
static int next_size(int size, int maxsize) {
    if (size >= maxsize)
        return 0;
    return size > maxsize / 8 ? maxsize : size * 8;
}

enum receive { RECV, IMPROBE, PROBE };

#define MAX_COMMS 8
static MPI_Comm comms[MAX_COMMS];
static int ncomms = 1;

/* The receive of the blocking variants: MPI_Recv, a matched probe polled with wildcards and
 * the receive of the probed message, or a blocking probe and the receive of its count. */
static void recv_from(char *buf, int size, int peer, enum receive how, MPI_Comm comm) {
    MPI_Message msg;
    MPI_Status status;
    int flag = 0, count;
    switch (how) {
    case RECV:
        MPI_Recv(buf, size, MPI_CHAR, peer, 1, comm, MPI_STATUS_IGNORE);
        break;
    case IMPROBE:
        while (!flag)
            MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &flag, &msg,
                        MPI_STATUS_IGNORE);
        MPI_Mrecv(buf, size, MPI_CHAR, &msg, MPI_STATUS_IGNORE);
        break;
    case PROBE:
        MPI_Probe(peer, 1, comm, &status);
        MPI_Get_count(&status, MPI_CHAR, &count);
        MPI_Recv(buf, count, MPI_CHAR, peer, 1, comm, MPI_STATUS_IGNORE);
        break;
    }
}

/* MPI_Send and a blocking receive on both sides. Rank 0 returns the seconds per half round
 * trip; rank 1 returns 0. */
static double run_blocking(char *buf, int size, int iters, int rank, enum receive how,
                           const char *name) {
    double t0;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        MPI_Comm comm = comms[i % ncomms];
        if (rank == 0) {
            buf[0] = (char)i;
            MPI_Send(buf, size, MPI_CHAR, 1, 1, comm);
            recv_from(buf, size, 1, how, comm);
            if (buf[0] != (char)i) {
                fprintf(stderr, "%s: wrong reply at iteration %d\n", name, i);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        } else {
            recv_from(buf, size, 0, how, comm);
            MPI_Send(buf, size, MPI_CHAR, 0, 1, comm);
        }
    }
    return rank == 0 ? (MPI_Wtime() - t0) / (2.0 * iters) : 0.0;
}

static double run_irecv(char *buf, char *rbuf, int size, int iters, int rank) {
    MPI_Request req;
    double t0;
    /* Rank 1 posts its first receive after the barrier: with it pending, the barrier would be
     * timed too, and only the first ping of thousands can find its receive missing. */
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1)
        MPI_Irecv(rbuf, size, MPI_CHAR, 0, 2, comms[0], &req);
    t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        MPI_Comm comm = comms[i % ncomms];
        if (rank == 0) {
            buf[0] = (char)i;
            MPI_Irecv(rbuf, size, MPI_CHAR, 1, 2, comm, &req);
            MPI_Send(buf, size, MPI_CHAR, 1, 2, comm);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            if (rbuf[0] != (char)i) {
                fprintf(stderr, "pingpong_irecv: wrong reply at iteration %d\n", i);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        } else {
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            buf[0] = rbuf[0];
            /* The next ping cannot leave rank 0 before this pong arrives there, so rbuf is free. */
            if (i + 1 < iters)
                MPI_Irecv(rbuf, size, MPI_CHAR, 0, 2, comms[(i + 1) % ncomms], &req);
            MPI_Send(buf, size, MPI_CHAR, 0, 2, comm);
        }
    }
    return rank == 0 ? (MPI_Wtime() - t0) / (2.0 * iters) : 0.0;
}

int main(int argc, char **argv) {
    int rank, nranks, opt;
    int base_iters = 10000, reps = 7, maxsize = 1 << 20, only = 0, provided;

    /* The thread level is chosen before MPI_Init; getopt reads the options after it. */
    int threaded = 0;
    for (int i = 1; i < argc; i++)
        threaded |= strcmp(argv[i], "-t") == 0;
    if (threaded)
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    else
        MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    while ((opt = getopt(argc, argv, "i:r:m:s:tc:")) != -1) {
        switch (opt) {
        case 'i': base_iters = atoi(optarg); break;
        case 'r': reps = atoi(optarg); break;
        case 'm': maxsize = atoi(optarg); break;
        case 's': only = atoi(optarg); break;
        case 't': break;
        case 'c': ncomms = atoi(optarg); break;
        default:
            if (rank == 0)
                fprintf(stderr, "usage: pingpong [-i iters] [-r reps] [-m maxsize] [-s size] [-t] "
                                "[-c comms]\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (nranks != 2) {
        if (rank == 0)
            fprintf(stderr, "pingpong: needs exactly 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (base_iters < 1 || reps < 1 || maxsize < 1 || only < 0 || ncomms < 1 ||
        ncomms > MAX_COMMS) {
        if (rank == 0)
            fprintf(stderr, "pingpong: bad arguments\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (only)
        maxsize = only;
    comms[0] = MPI_COMM_WORLD;
    for (int c = 1; c < ncomms; c++)
        MPI_Comm_dup(MPI_COMM_WORLD, &comms[c]);

    char *buf = malloc(maxsize), *rbuf = malloc(maxsize);
    double *t = malloc(sizeof(double) * reps);
    memset(buf, 1, maxsize);
    memset(rbuf, 0, maxsize);

    static const char *names[] = {"pingpong", "pingpong_irecv", "pingpong_improbe",
                                  "pingpong_probe"};
    static const enum receive receives[] = {RECV, RECV, IMPROBE, PROBE};
    for (int variant = 0; variant < 4; variant++) {
        for (int size = only ? only : 1; size > 0; size = next_size(size, maxsize)) {
            /* Above 4 KiB scale iterations down with the size, keeping at least 100. */
            long it = size <= 4096 ? base_iters : (long)base_iters * 4096 / size;
            int iters = it < 100 ? (base_iters < 100 ? base_iters : 100) : (int)it;
            for (int r = -1; r < reps; r++) {
                /* r = -1: warm-up with a tenth of the iterations */
                int n = r < 0 ? iters / 10 + 1 : iters;
                double secs = variant == 1 ? run_irecv(buf, rbuf, size, n, rank)
                                           : run_blocking(buf, size, n, rank,
                                                          receives[variant], names[variant]);
                if (r >= 0)
                    t[r] = secs;
            }
            if (rank == 0) {
                qsort(t, reps, sizeof(double), cmp_double);
                printf("RESULT name=%s size=%d usec=%.3f min=%.3f iters=%d reps=%d\n",
                       names[variant], size, t[reps / 2] * 1e6,
                       t[0] * 1e6, iters, reps);
                fflush(stdout);
            }
        }
    }
    free(buf);
    free(rbuf);
    free(t);
    for (int c = 1; c < ncomms; c++)
        MPI_Comm_free(&comms[c]);
    MPI_Finalize();
    return 0;
}
