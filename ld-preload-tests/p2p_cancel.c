/* ranks: 2 */
/* MPI_Cancel of receives (pending: cancelled; already matched: not
 * cancelled) and MPI_Request_free of an active receive. */
#include "common.h"

#define N 8

/* Cancelled receives never take a message; later receives get it. */
static void t_cancel_pending(void)
{
    int buf[N], other[N];
    MPI_Status st;
    if (t_rank == 1) {
        MPI_Request r[3];
        int flag = -1;
        CHK(MPI_Irecv(buf, N, MPI_INT, 0, 5, MPI_COMM_WORLD, &r[0]));
        CHK(MPI_Irecv(buf, N, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &r[1]));
        CHK(MPI_Irecv(buf, N, MPI_INT, MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, &r[2]));
        CHK(MPI_Cancel(&r[0]));
        CHK(MPI_Wait(&r[0], &st));
        CHK(MPI_Test_cancelled(&st, &flag));
        EXPECT(flag == 1, "specific receive: Test_cancelled %d", flag);
        EXPECT(r[0] == MPI_REQUEST_NULL, "request not freed by Wait");
        CHK(MPI_Cancel(&r[1]));
        /* a cancelled receive completes: Test must succeed soon */
        flag = 0;
        for (double t0 = MPI_Wtime(); !flag && MPI_Wtime() - t0 < 5;)
            CHK(MPI_Test(&r[1], &flag, &st));
        EXPECT(flag, "cancelled receive never completed in MPI_Test");
        flag = -1;
        CHK(MPI_Test_cancelled(&st, &flag));
        EXPECT(flag == 1, "wildcard receive: Test_cancelled %d", flag);
        CHK(MPI_Cancel(&r[2]));
        CHK(MPI_Waitall(1, &r[2], &st));
        CHK(MPI_Test_cancelled(&st, &flag));
        EXPECT(flag == 1, "any-source receive: Test_cancelled %d", flag);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    /* the message now sent goes to the receive posted next */
    if (t_rank == 0) {
        fill(other, N, 0, 5, 0);
        CHK(MPI_Send(other, N, MPI_INT, 1, 5, MPI_COMM_WORLD));
    } else if (t_rank == 1) {
        memset(buf, 0, sizeof buf);
        CHK(MPI_Recv(other, N, MPI_INT, 0, 5, MPI_COMM_WORLD, &st));
        EXPECT_MSG(other, N, 0, 5, 0, st);
        int flag = -1;
        CHK(MPI_Test_cancelled(&st, &flag));
        EXPECT(flag == 0, "normal receive: Test_cancelled %d", flag);
        EXPECT(buf[0] == 0 && buf[N - 1] == 0, "a cancelled receive wrote its buffer");
    }
    report("cancel_pending_recv");
}

/* A receive that has already matched (and completed) is not cancelled. */
static void t_cancel_matched(int big)
{
    const int n = big ? 256 * 1024 : N;
    int *buf = calloc((size_t)n, sizeof(int));
    MPI_Status st;
    const int tag = big ? 7 : 6;
    if (t_rank == 1) {
        MPI_Request r;
        int flag = 0;
        CHK(MPI_Irecv(buf, n, MPI_INT, 0, tag, MPI_COMM_WORLD, &r));
        MPI_Barrier(MPI_COMM_WORLD);
        for (double t0 = MPI_Wtime(); !flag && MPI_Wtime() - t0 < 10;)
            CHK(MPI_Request_get_status(r, &flag, MPI_STATUS_IGNORE));
        EXPECT(flag, "receive never completed");
        CHK(MPI_Cancel(&r));
        CHK(MPI_Wait(&r, &st));
        flag = -1;
        CHK(MPI_Test_cancelled(&st, &flag));
        EXPECT(flag == 0, "Test_cancelled %d for a completed receive", flag);
        EXPECT_MSG(buf, n, 0, tag, 0, st);
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
        if (t_rank == 0) {
            fill(buf, n, 0, tag, 0);
            CHK(MPI_Send(buf, n, MPI_INT, 1, tag, MPI_COMM_WORLD));
        }
    }
    free(buf);
    report(big ? "cancel_matched_recv_large" : "cancel_matched_recv");
}

/* A freed receive still takes the first message; the next receive gets the
 * second one, and the freed receive's buffer is filled eventually. */
static void t_free_recv(void)
{
    int buf[N], b2[N];
    MPI_Status st;
    if (t_rank == 1) {
        MPI_Request r;
        memset(buf, 0, sizeof buf);
        CHK(MPI_Irecv(buf, N, MPI_INT, 0, 8, MPI_COMM_WORLD, &r));
        CHK(MPI_Request_free(&r));
        EXPECT(r == MPI_REQUEST_NULL, "Request_free did not reset the handle");
        MPI_Barrier(MPI_COMM_WORLD);
        CHK(MPI_Recv(b2, N, MPI_INT, 0, 8, MPI_COMM_WORLD, &st));
        EXPECT_MSG(b2, N, 0, 8, 1, st);
        /* keep the library progressing until the freed receive has landed */
        int flag;
        for (double t0 = MPI_Wtime(); bad_at(buf, N, 0, 8, 0) >= 0 && MPI_Wtime() - t0 < 5;)
            MPI_Iprobe(MPI_ANY_SOURCE, 999, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        EXPECT(bad_at(buf, N, 0, 8, 0) < 0, "freed receive's buffer never got message 0");
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
        if (t_rank == 0) {
            fill(buf, N, 0, 8, 0);
            CHK(MPI_Send(buf, N, MPI_INT, 1, 8, MPI_COMM_WORLD));
            fill(buf, N, 0, 8, 1);
            CHK(MPI_Send(buf, N, MPI_INT, 1, 8, MPI_COMM_WORLD));
        }
    }
    report("request_free_recv");
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    t_cancel_pending();
    t_cancel_matched(0);
    t_cancel_matched(1);
    t_free_recv();
    return t_finish();
}
