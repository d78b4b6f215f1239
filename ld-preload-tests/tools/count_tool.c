/* A minimal PMPI tool of the mpiP kind: each wrapped MPI_X counts its calls and passes them to
 * PMPI_X. At MPI_Finalize (wrapped too, with MPI calls of its own before PMPI_Finalize, as
 * profilers make them; or MPI_FINALIZE in Fortran) each rank writes `NAME COUNT` lines to $COUNT_TOOL_DIR/rank.N.
 * Built with -DFORTRAN it also wraps the Fortran names (mpi_send_, ...) and passes them to
 * pmpi_send_, ..., counted apart as f:NAME.
 *
 * Polling calls (MPI_Test, MPI_Iprobe, ...) are not wrapped: how often a program polls depends
 * on timing, not on the program. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    INIT, INIT_THREAD, FINALIZE, SEND, SSEND, ISEND, RECV, IRECV, SENDRECV, PROBE, WAIT, WAITALL,
    BARRIER, BCAST, REDUCE, ALLREDUCE, ALLGATHER, ALLTOALL, GATHER, SCAN, IBARRIER, COMM_DUP,
    COMM_SPLIT, COMM_FREE, RECV_INIT, START, REQUEST_FREE,
    F_INIT, F_FINALIZE, F_SEND, F_RECV, F_IRECV, F_WAIT, F_WAITALL, F_BARRIER, F_ALLREDUCE,
    F_BCAST, F_COMM_DUP, F_COMM_FREE,
    CALLS
};
static const char *names[CALLS] = {
    "MPI_Init", "MPI_Init_thread", "MPI_Finalize", "MPI_Send", "MPI_Ssend", "MPI_Isend",
    "MPI_Recv", "MPI_Irecv", "MPI_Sendrecv", "MPI_Probe", "MPI_Wait", "MPI_Waitall",
    "MPI_Barrier", "MPI_Bcast", "MPI_Reduce", "MPI_Allreduce", "MPI_Allgather", "MPI_Alltoall",
    "MPI_Gather", "MPI_Scan", "MPI_Ibarrier", "MPI_Comm_dup", "MPI_Comm_split", "MPI_Comm_free",
    "MPI_Recv_init", "MPI_Start", "MPI_Request_free",
    "f:mpi_init", "f:mpi_finalize", "f:mpi_send", "f:mpi_recv", "f:mpi_irecv", "f:mpi_wait",
    "f:mpi_waitall", "f:mpi_barrier", "f:mpi_allreduce", "f:mpi_bcast", "f:mpi_comm_dup",
    "f:mpi_comm_free",
};
static long counts[CALLS];

int MPI_Init(int *argc, char ***argv) { counts[INIT]++; return PMPI_Init(argc, argv); }
int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    counts[INIT_THREAD]++;
    return PMPI_Init_thread(argc, argv, required, provided);
}

/* A profiler gathers its numbers before MPI ends: the job's total of wrapped calls. Once, from
 * the first finalize wrapper reached (Open MPI's Fortran MPI_FINALIZE calls PMPI_Finalize,
 * MPICH's the C MPI_Finalize). */
static void write_counts(void)
{
    static int written;
    if (written++) return;
    int rank = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long mine = 0, total = 0;
    for (int i = 0; i < CALLS; i++) mine += counts[i];
    PMPI_Allreduce(&mine, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    const char *dir = getenv("COUNT_TOOL_DIR");
    if (dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/rank.%d", dir, rank);
        FILE *out = fopen(path, "w");
        if (out) {
            for (int i = 0; i < CALLS; i++)
                if (counts[i]) fprintf(out, "%s %ld\n", names[i], counts[i]);
            fprintf(out, "job-total %ld\n", total);
            fclose(out);
        }
    }
}

int MPI_Finalize(void)
{
    counts[FINALIZE]++;
    write_counts();
    return PMPI_Finalize();
}

#define WRAP(ID, NAME, PARAMS, ARGS) \
    int NAME PARAMS { counts[ID]++; return P##NAME ARGS; }

WRAP(SEND, MPI_Send, (const void *b, int n, MPI_Datatype t, int d, int g, MPI_Comm c),
     (b, n, t, d, g, c))
WRAP(SSEND, MPI_Ssend, (const void *b, int n, MPI_Datatype t, int d, int g, MPI_Comm c),
     (b, n, t, d, g, c))
WRAP(ISEND, MPI_Isend,
     (const void *b, int n, MPI_Datatype t, int d, int g, MPI_Comm c, MPI_Request *r),
     (b, n, t, d, g, c, r))
WRAP(RECV, MPI_Recv,
     (void *b, int n, MPI_Datatype t, int s, int g, MPI_Comm c, MPI_Status *st),
     (b, n, t, s, g, c, st))
WRAP(IRECV, MPI_Irecv,
     (void *b, int n, MPI_Datatype t, int s, int g, MPI_Comm c, MPI_Request *r),
     (b, n, t, s, g, c, r))
WRAP(SENDRECV, MPI_Sendrecv,
     (const void *sb, int sn, MPI_Datatype st, int d, int sg, void *rb, int rn, MPI_Datatype rt,
      int s, int rg, MPI_Comm c, MPI_Status *status),
     (sb, sn, st, d, sg, rb, rn, rt, s, rg, c, status))
WRAP(PROBE, MPI_Probe, (int s, int g, MPI_Comm c, MPI_Status *st), (s, g, c, st))
WRAP(WAIT, MPI_Wait, (MPI_Request *r, MPI_Status *st), (r, st))
WRAP(WAITALL, MPI_Waitall, (int n, MPI_Request *r, MPI_Status *st), (n, r, st))
WRAP(BARRIER, MPI_Barrier, (MPI_Comm c), (c))
WRAP(BCAST, MPI_Bcast, (void *b, int n, MPI_Datatype t, int root, MPI_Comm c),
     (b, n, t, root, c))
WRAP(REDUCE, MPI_Reduce,
     (const void *s, void *r, int n, MPI_Datatype t, MPI_Op o, int root, MPI_Comm c),
     (s, r, n, t, o, root, c))
WRAP(ALLREDUCE, MPI_Allreduce,
     (const void *s, void *r, int n, MPI_Datatype t, MPI_Op o, MPI_Comm c), (s, r, n, t, o, c))
WRAP(ALLGATHER, MPI_Allgather,
     (const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, MPI_Comm c),
     (s, sn, st, r, rn, rt, c))
WRAP(ALLTOALL, MPI_Alltoall,
     (const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, MPI_Comm c),
     (s, sn, st, r, rn, rt, c))
WRAP(GATHER, MPI_Gather,
     (const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, int root,
      MPI_Comm c),
     (s, sn, st, r, rn, rt, root, c))
WRAP(SCAN, MPI_Scan, (const void *s, void *r, int n, MPI_Datatype t, MPI_Op o, MPI_Comm c),
     (s, r, n, t, o, c))
WRAP(IBARRIER, MPI_Ibarrier, (MPI_Comm c, MPI_Request *r), (c, r))
WRAP(COMM_DUP, MPI_Comm_dup, (MPI_Comm c, MPI_Comm *n), (c, n))
WRAP(COMM_SPLIT, MPI_Comm_split, (MPI_Comm c, int color, int key, MPI_Comm *n),
     (c, color, key, n))
WRAP(COMM_FREE, MPI_Comm_free, (MPI_Comm *c), (c))
WRAP(RECV_INIT, MPI_Recv_init,
     (void *b, int n, MPI_Datatype t, int s, int g, MPI_Comm c, MPI_Request *r),
     (b, n, t, s, g, c, r))
WRAP(START, MPI_Start, (MPI_Request *r), (r))
WRAP(REQUEST_FREE, MPI_Request_free, (MPI_Request *r), (r))

#ifdef FORTRAN
/* Fortran's names as gfortran calls them (`mpif.h` and `use mpi`), passed to MPI's pmpi_*. */
typedef MPI_Fint F;
#define FWRAP(ID, NAME, PARAMS, ARGS) \
    void p##NAME PARAMS;              \
    void NAME PARAMS { counts[ID]++; p##NAME ARGS; }

FWRAP(F_INIT, mpi_init_, (F *e), (e))
void pmpi_finalize_(F *e);
void mpi_finalize_(F *e)
{
    counts[F_FINALIZE]++;
    write_counts();
    pmpi_finalize_(e);
}
FWRAP(F_SEND, mpi_send_, (void *b, F *n, F *t, F *d, F *g, F *c, F *e), (b, n, t, d, g, c, e))
FWRAP(F_RECV, mpi_recv_, (void *b, F *n, F *t, F *s, F *g, F *c, F *st, F *e),
      (b, n, t, s, g, c, st, e))
FWRAP(F_IRECV, mpi_irecv_, (void *b, F *n, F *t, F *s, F *g, F *c, F *r, F *e),
      (b, n, t, s, g, c, r, e))
FWRAP(F_WAIT, mpi_wait_, (F *r, F *st, F *e), (r, st, e))
FWRAP(F_WAITALL, mpi_waitall_, (F *n, F *r, F *st, F *e), (n, r, st, e))
FWRAP(F_BARRIER, mpi_barrier_, (F *c, F *e), (c, e))
FWRAP(F_ALLREDUCE, mpi_allreduce_, (void *s, void *r, F *n, F *t, F *o, F *c, F *e),
      (s, r, n, t, o, c, e))
FWRAP(F_BCAST, mpi_bcast_, (void *b, F *n, F *t, F *root, F *c, F *e), (b, n, t, root, c, e))
FWRAP(F_COMM_DUP, mpi_comm_dup_, (F *c, F *n, F *e), (c, n, e))
FWRAP(F_COMM_FREE, mpi_comm_free_, (F *c, F *e), (c, e))
#endif
