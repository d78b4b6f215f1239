/* Small harness shared by the test programs.
 *
 * Every rank runs every check.  A rank that sees a problem records the first
 * failure detail locally; report() gathers the verdicts with PMPI_ calls, which
 * pass no tool (under the shim they are the shim's, as a tool's would be), so
 * rank 0 prints one deterministic line per check. */
#ifndef MATCHSHIM_TEST_COMMON_H
#define MATCHSHIM_TEST_COMMON_H

#include <mpi.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DETAIL_LEN 200

static int t_rank, t_size;
static int t_fail;              /* this rank failed the current check */
static char t_detail[DETAIL_LEN];
static int t_any_fail;          /* some check failed (valid on rank 0) */

static inline void fail_at(int line, const char *fmt, ...)
{
    if (t_fail)
        return;                 /* keep the first detail, it explains the rest */
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
#define EXPECT_EQ(a, b) do { long long a_ = (long long)(a), b_ = (long long)(b); \
        if (a_ != b_) FAILF("%s = %lld, expected %s = %lld", #a, a_, #b, b_); } while (0)

static inline const char *err_str(int rc)
{
    static char buf[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS)
        snprintf(buf, sizeof buf, "error %d", rc);
    /* keep the output one line */
    for (int i = 0; buf[i]; i++)
        if (buf[i] == '\n')
            buf[i] = ' ';
    return buf;
}

/* A thread of a threaded test: its tag and peer, and its first failure, which the main
 * thread reports once the threads are joined (the checks above keep one per rank). */
struct ctx {
    int id, tag, peer;
    int fail;
    char detail[DETAIL_LEN];
};

static inline void tfail(struct ctx *c, const char *fmt, ...)
{
    if (c->fail)
        return;
    c->fail = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->detail, DETAIL_LEN, fmt, ap);
    va_end(ap);
}

/* CHK for a thread's call. */
#define TCHK(c, call) do { int rc_ = (call); \
        if (rc_ != MPI_SUCCESS) tfail((c), "thread %d: %s failed (%d)", (c)->id, #call, rc_); } while (0)

/* Run an MPI call that must succeed (world has MPI_ERRORS_RETURN). */
#define CHK(call) do { int rc_ = (call); \
        if (rc_ != MPI_SUCCESS) FAILF("%s -> %s", #call, err_str(rc_)); } while (0)

static inline int err_class(int rc)
{
    int cls = rc;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &cls);
    return cls;
}

/* Collective: print the result of the check that just ran, reset state. */
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
    t_fail = 0;
    t_detail[0] = 0;
}

static inline void t_setup(void)
{
    MPI_Comm_rank(MPI_COMM_WORLD, &t_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &t_size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
}

static inline void t_init(int *argc, char ***argv)
{
    MPI_Init(argc, argv);
    t_setup();
}

/* MPI_Init_thread asking for MPI_THREAD_MULTIPLE, then t_setup; false where MPI does not
 * provide it, with test `name` reported as skipped (the caller returns t_finish()). */
static inline int t_init_multiple(int *argc, char ***argv, const char *name)
{
    int provided;
    MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    t_setup();
    if (provided < MPI_THREAD_MULTIPLE) {
        report_skip(name, "MPI_THREAD_MULTIPLE not provided");
        return 0;
    }
    return 1;
}

/* Prints the verdict, finalizes, returns the exit code for main. */
static inline int t_finish(void)
{
    PMPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == 0) {
        printf("verdict: %s\n", t_any_fail ? "FAIL" : "PASS");
        fflush(stdout);
    }
    int any = t_any_fail;
    PMPI_Bcast(&any, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return any ? 1 : 0;
}

/* Reads the shim's MPI_T variable `name` of class `var_class` for `comm` into `value`: 0 where
 * MPI has no such variable (natively). MPI_T is initialised once for the program (MPICH
 * 4.0.2's MPI_T_pvar_get_num crashes after MPI_T_finalize and a second MPI_T_init_thread). */
static int t_mpit_initialised;

static inline int shim_pvar(MPI_Comm comm, const char *name, int var_class,
                            unsigned long long *value)
{
    int provided, index, count;
    MPI_T_pvar_session session;
    MPI_T_pvar_handle handle;
    if (!t_mpit_initialised++)
        CHK(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    if (MPI_T_pvar_get_index(name, var_class, &index) != MPI_SUCCESS)
        return 0;
    *value = 0;
    CHK(MPI_T_pvar_session_create(&session));
    CHK(MPI_T_pvar_handle_alloc(session, index, &comm, &handle, &count));
    CHK(MPI_T_pvar_read(session, handle, value));
    CHK(MPI_T_pvar_handle_free(session, &handle));
    CHK(MPI_T_pvar_session_free(&session));
    return 1;
}

/* Deterministic payload so corruption and reordering are detectable. */
static inline int pat(int src, int tag, int seq, int i)
{
    return (src * 1000003) ^ (tag * 7919) ^ (seq * 131) ^ i;
}

static inline void fill(int *buf, int n, int src, int tag, int seq)
{
    for (int i = 0; i < n; i++)
        buf[i] = pat(src, tag, seq, i);
}

/* Index of the first wrong element, or -1 when all n are right. */
static inline int bad_at(const int *buf, int n, int src, int tag, int seq)
{
    for (int i = 0; i < n; i++)
        if (buf[i] != pat(src, tag, seq, i))
            return i;
    return -1;
}

/* Checks payload and status of a receive of n ints from src with tag. */
#define EXPECT_MSG(buf, n, src, tag, seq, st) do { \
        int bi_ = bad_at((buf), (n), (src), (tag), (seq)); \
        EXPECT(bi_ < 0, "payload from %d tag %d seq %d wrong at [%d]", (src), (tag), (seq), bi_); \
        EXPECT((st).MPI_SOURCE == (src), "status source %d, expected %d", (st).MPI_SOURCE, (src)); \
        EXPECT((st).MPI_TAG == (tag), "status tag %d, expected %d", (st).MPI_TAG, (tag)); \
        int c_ = -7; MPI_Get_count(&(st), MPI_INT, &c_); \
        EXPECT(c_ == (n), "count %d, expected %d", c_, (n)); } while (0)

/* Wall-clock spin that keeps calling MPI_Test on req (may be NULL). */
static inline int spin_test(MPI_Request *req, double seconds)
{
    double t0 = MPI_Wtime();
    int flag = 0;
    while (MPI_Wtime() - t0 < seconds) {
        if (req && *req != MPI_REQUEST_NULL) {
            MPI_Test(req, &flag, MPI_STATUS_IGNORE);
            if (flag)
                return 1;
        }
    }
    return 0;
}

#endif
