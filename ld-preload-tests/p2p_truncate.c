/* ranks: 2 */
/* A message longer than the receive buffer: MPI_ERR_TRUNCATE (with
 * MPI_ERRORS_RETURN), nothing written past the buffer, and the
 * communication that follows is unaffected. */
#include "common.h"

#define GUARD 256               /* ints after the receive buffer */
#define GUARD_VAL 0x7A7A7A7A

static int peer;

static int *guarded(int n)
{
    int *b = malloc(sizeof(int) * (size_t)(n + GUARD));
    for (int i = 0; i < n + GUARD; i++)
        b[i] = GUARD_VAL;
    return b;
}

/* Native Open MPI (vader with single-copy) overruns the buffer for large
 * truncated messages, so there only small ones are checked for overruns. */
static void check_guard(const int *b, int n, const char *what)
{
#ifndef MPICH_VERSION
    if (n > 1024)
        return;
#endif
    for (int i = n; i < n + GUARD; i++)
        if (b[i] != GUARD_VAL) {
            FAILF("%s: int %d past the %d-int buffer was written", what, i - n, n);
            return;
        }
}

static void expect_truncate(int rc, const char *what)
{
    EXPECT(err_class(rc) == MPI_ERR_TRUNCATE, "%s returned %s, expected MPI_ERR_TRUNCATE",
           what, rc == MPI_SUCCESS ? "MPI_SUCCESS" : err_str(rc));
}

/* Rank 0 sends `sent` ints with tag then the same with tag+1; rank 1
 * receives the first into `cap` ints (mode: 0 Recv, 1 Irecv+Wait,
 * 2 Mprobe+Mrecv) and the second normally. */
static void truncated(int sent, int cap, int mode, int tag, const char *name)
{
    int *b = guarded(sent);
    MPI_Status st;
    if (t_rank == 0) {
        fill(b, sent, 0, tag, 0);
        CHK(MPI_Send(b, sent, MPI_INT, peer, tag, MPI_COMM_WORLD));
        fill(b, sent, 0, tag + 1, 1);
        CHK(MPI_Send(b, sent, MPI_INT, peer, tag + 1, MPI_COMM_WORLD));
    } else if (t_rank == 1) {
        int rc;
        if (mode == 0) {
            rc = MPI_Recv(b, cap, MPI_INT, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &st);
            expect_truncate(rc, "Recv");
        } else if (mode == 1) {
            MPI_Request r;
            CHK(MPI_Irecv(b, cap, MPI_INT, peer, tag, MPI_COMM_WORLD, &r));
            rc = MPI_Wait(&r, &st);
            expect_truncate(rc, "Wait");
            EXPECT(r == MPI_REQUEST_NULL, "Wait did not free the request");
        } else {
            MPI_Message m;
            CHK(MPI_Mprobe(peer, tag, MPI_COMM_WORLD, &m, &st));
            rc = MPI_Mrecv(b, cap, MPI_INT, &m, &st);
            expect_truncate(rc, "Mrecv");
        }
        check_guard(b, cap, name);
        CHK(MPI_Recv(b, sent, MPI_INT, peer, tag + 1, MPI_COMM_WORLD, &st));
        EXPECT_MSG(b, sent, 0, tag + 1, 1, st);
    }
    free(b);
    report(name);
}

/* Waitall with one good and one truncated receive: MPI_ERR_IN_STATUS and
 * per-request errors in the statuses. */
static void t_waitall(int sent, int tag, const char *name)
{
    int *a = guarded(sent), *b = guarded(sent);
    if (t_rank == 0) {
        fill(a, sent, 0, tag, 0);
        CHK(MPI_Send(a, sent, MPI_INT, peer, tag, MPI_COMM_WORLD));
        CHK(MPI_Send(a, sent, MPI_INT, peer, tag + 1, MPI_COMM_WORLD));
        CHK(MPI_Send(a, sent, MPI_INT, peer, tag + 2, MPI_COMM_WORLD));
    } else if (t_rank == 1) {
        MPI_Request r[2];
        MPI_Status st[2];
        st[0].MPI_ERROR = st[1].MPI_ERROR = -12345;
        CHK(MPI_Irecv(a, sent, MPI_INT, peer, tag, MPI_COMM_WORLD, &r[0]));
        CHK(MPI_Irecv(b, sent / 2, MPI_INT, peer, tag + 1, MPI_COMM_WORLD, &r[1]));
        int rc = MPI_Waitall(2, r, st);
        EXPECT(err_class(rc) == MPI_ERR_IN_STATUS, "Waitall returned %s, expected MPI_ERR_IN_STATUS",
               rc == MPI_SUCCESS ? "MPI_SUCCESS" : err_str(rc));
        EXPECT(st[0].MPI_ERROR == MPI_SUCCESS, "good receive: MPI_ERROR %d", st[0].MPI_ERROR);
        EXPECT(err_class(st[1].MPI_ERROR) == MPI_ERR_TRUNCATE,
               "truncated receive: MPI_ERROR class %d", err_class(st[1].MPI_ERROR));
        EXPECT_MSG(a, sent, 0, tag, 0, st[0]);
        check_guard(b, sent / 2, name);
        /* same through MPI_STATUSES_IGNORE: still an error */
        CHK(MPI_Irecv(b, sent / 2, MPI_INT, peer, tag + 2, MPI_COMM_WORLD, &r[0]));
        rc = MPI_Waitall(1, r, MPI_STATUSES_IGNORE);
        EXPECT(rc != MPI_SUCCESS, "Waitall(STATUSES_IGNORE) of a truncated receive succeeded");
    }
    free(a);
    free(b);
    report(name);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    peer = 1 - t_rank;
    truncated(10, 5, 0, 10, "truncate_recv_small");
    truncated(10, 5, 1, 20, "truncate_irecv_wait_small");
    truncated(10, 5, 2, 30, "truncate_mrecv_small");
    truncated(16384, 8192, 0, 40, "truncate_recv_64k");
    truncated(16384, 8192, 1, 50, "truncate_irecv_wait_64k");
    t_waitall(10, 60, "truncate_waitall_small");
    t_waitall(16384, 70, "truncate_waitall_64k");
#ifdef MPICH_VERSION
    /* native Open MPI can corrupt memory past the buffer for this one */
    truncated(1 << 18, 1 << 17, 1, 80, "truncate_irecv_wait_1m");
#endif
    return t_finish();
}
