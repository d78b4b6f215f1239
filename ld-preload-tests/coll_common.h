/* Small harness shared by the collective test programs.
 *
 * Every rank runs every check and keeps its first failure detail. report() gathers the
 * verdicts with PMPI_ calls, which bypass the shim, so the verdict does not depend on the
 * collectives under test; rank 0 prints `ok NAME` or `FAIL NAME: detail`. */
#ifndef MATCHSHIM_COLL_COMMON_H
#define MATCHSHIM_COLL_COMMON_H

#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DETAIL_LEN 200

static int t_rank, t_size;
static int t_fail;
static char t_detail[DETAIL_LEN];
static int t_any_fail;

static inline void fail_at(int line, const char *fmt, ...)
{
    if (t_fail)
        return;
    t_fail = 1;
    int n = snprintf(t_detail, DETAIL_LEN, "rank %d line %d: ", t_rank, line);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && n < DETAIL_LEN)
        vsnprintf(t_detail + n, DETAIL_LEN - (size_t)n, fmt, ap);
    va_end(ap);
}

#define FAILF(...) fail_at(__LINE__, __VA_ARGS__)
#define EXPECT(cond, ...) do { if (!(cond)) FAILF(__VA_ARGS__); } while (0)
#define CHK(call) do { int rc_ = (call); \
        if (rc_ != MPI_SUCCESS) FAILF("%s -> error %d", #call, rc_); } while (0)

/* Collective over MPI_COMM_WORLD: print the result of the check that just ran. */
static inline void report(const char *name)
{
    int mine = t_fail ? t_rank : t_size, first;
    PMPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first < t_size) {
        char d[DETAIL_LEN];
        memcpy(d, t_detail, DETAIL_LEN);
        PMPI_Bcast(d, DETAIL_LEN, MPI_CHAR, first, MPI_COMM_WORLD);
        d[DETAIL_LEN - 1] = 0;
        if (t_rank == 0)
            printf("FAIL %s: %s\n", name, d);
        t_any_fail = 1;
    } else if (t_rank == 0) {
        printf("ok %s\n", name);
    }
    if (t_rank == 0)
        fflush(stdout);
    t_fail = 0;
    t_detail[0] = 0;
}

static inline void report_skip(const char *name, const char *why)
{
    if (t_rank == 0) {
        printf("skip %s: %s\n", name, why);
        fflush(stdout);
    }
}

static inline void t_init(int *argc, char ***argv)
{
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &t_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &t_size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

static inline int t_finish(void)
{
    if (t_rank == 0) {
        printf("verdict: %s\n", t_any_fail ? "FAIL" : "PASS");
        fflush(stdout);
    }
    int any = t_any_fail;
    PMPI_Bcast(&any, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return any ? 1 : 0;
}

/* The value rank r contributes at index i in test k: small integers, so sums of doubles
 * are exact. */
static inline double val(int k, int r, long i)
{
    return (double)((k * 7 + r * 13 + i * 3) % 1001);
}

/* Element counts every check runs with: empty, one, odd small, medium, large. */
static const int t_counts[] = {0, 1, 7, 1000, 100000};
#define N_COUNTS ((int)(sizeof t_counts / sizeof t_counts[0]))

static inline double *dalloc(long n)
{
    return malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
}

#endif
