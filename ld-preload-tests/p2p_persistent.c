/* ranks: 2 */
/* Persistent requests: every *_init kind, Start/Startall repeatedly, empty
 * status of inactive requests, cancel of a started receive, Request_free, and a dozen
 * receives started together and made again. */
#include "common.h"

#define N 32
#define ITERS 25

static int peer;

static void t_send_recv_init(void)
{
    int out[N], in[N];
    MPI_Request r;
    MPI_Status st;
    if (t_rank == 0)
        CHK(MPI_Send_init(out, N, MPI_INT, peer, 1, MPI_COMM_WORLD, &r));
    else
        CHK(MPI_Recv_init(in, N, MPI_INT, MPI_ANY_SOURCE, 1, MPI_COMM_WORLD, &r));
    for (int it = 0; it < ITERS; it++) {
        if (t_rank == 0)
            fill(out, N, 0, 1, it);     /* the buffer is re-read per Start */
        CHK(MPI_Start(&r));
        CHK(MPI_Wait(&r, &st));
        EXPECT(r != MPI_REQUEST_NULL, "Wait freed a persistent request");
        if (t_rank == 1)
            EXPECT_MSG(in, N, 0, 1, it, st);
    }
    CHK(MPI_Request_free(&r));
    EXPECT(r == MPI_REQUEST_NULL, "Request_free did not reset the handle");
    report("send_init_recv_init");
}

/* Rank 0: Send/Ssend/Bsend/Rsend_init to rank 1; rank 1: four Recv_init,
 * all restarted together with Startall. */
static void t_startall_modes(void)
{
    int out[4][N], in[4][N];
    MPI_Request r[4];
    MPI_Status st[4];
    char *bbuf = NULL;
    if (t_rank == 0) {
        int sz;
        MPI_Pack_size(N, MPI_INT, MPI_COMM_WORLD, &sz);
        sz += MPI_BSEND_OVERHEAD;
        bbuf = malloc((size_t)sz);
        CHK(MPI_Buffer_attach(bbuf, sz));
        CHK(MPI_Send_init(out[0], N, MPI_INT, peer, 10, MPI_COMM_WORLD, &r[0]));
        CHK(MPI_Ssend_init(out[1], N, MPI_INT, peer, 11, MPI_COMM_WORLD, &r[1]));
        CHK(MPI_Bsend_init(out[2], N, MPI_INT, peer, 12, MPI_COMM_WORLD, &r[2]));
        CHK(MPI_Rsend_init(out[3], N, MPI_INT, peer, 13, MPI_COMM_WORLD, &r[3]));
    } else {
        for (int k = 0; k < 4; k++)
            CHK(MPI_Recv_init(in[k], N, MPI_INT, peer, 10 + k, MPI_COMM_WORLD, &r[k]));
    }
    for (int it = 0; it < ITERS; it++) {
        if (t_rank == 0) {
            for (int k = 0; k < 4; k++)
                fill(out[k], N, 0, 10 + k, it);
            /* Rsend needs the receive started: wait for rank 1's Startall */
            MPI_Barrier(MPI_COMM_WORLD);
            CHK(MPI_Startall(4, r));
            CHK(MPI_Waitall(4, r, MPI_STATUSES_IGNORE));
        } else {
            CHK(MPI_Startall(4, r));
            MPI_Barrier(MPI_COMM_WORLD);
            CHK(MPI_Waitall(4, r, st));
            for (int k = 0; k < 4; k++)
                EXPECT_MSG(in[k], N, 0, 10 + k, it, st[k]);
        }
    }
    for (int k = 0; k < 4; k++)
        CHK(MPI_Request_free(&r[k]));
    if (t_rank == 0) {
        void *b;
        int s;
        CHK(MPI_Buffer_detach(&b, &s));
        free(bbuf);
    }
    report("startall_all_modes");
}

static void expect_empty(MPI_Status *st, const char *what)
{
    int c = -1, canc = -1;
    MPI_Get_count(st, MPI_INT, &c);
    MPI_Test_cancelled(st, &canc);
    EXPECT(st->MPI_SOURCE == MPI_ANY_SOURCE && st->MPI_TAG == MPI_ANY_TAG && c == 0 &&
           canc == 0, "%s: status source %d tag %d count %d cancelled %d", what,
           st->MPI_SOURCE, st->MPI_TAG, c, canc);
}

/* Inactive persistent requests complete at once with an empty status. */
static void t_inactive(void)
{
    int in[N], out[N];
    MPI_Request r[2];
    MPI_Status st, sts[2];
    int flag = 0, idx = -5;
    CHK(MPI_Recv_init(in, N, MPI_INT, peer, 20, MPI_COMM_WORLD, &r[0]));
    CHK(MPI_Send_init(out, N, MPI_INT, peer, 20, MPI_COMM_WORLD, &r[1]));
    /* never started */
    CHK(MPI_Wait(&r[0], &st));
    expect_empty(&st, "Wait on a never-started receive");
    EXPECT(r[0] != MPI_REQUEST_NULL, "Wait freed an inactive request");
    CHK(MPI_Test(&r[1], &flag, &st));
    EXPECT(flag, "Test on an inactive request: flag 0");
    expect_empty(&st, "Test on a never-started send");
    /* complete one round, then both are inactive again */
    fill(out, N, t_rank, 20, 0);
    CHK(MPI_Startall(2, r));
    CHK(MPI_Waitall(2, r, sts));
    EXPECT_MSG(in, N, peer, 20, 0, sts[0]);
    CHK(MPI_Wait(&r[0], &st));
    expect_empty(&st, "Wait on a completed receive");
    CHK(MPI_Waitany(2, r, &idx, &st));
    EXPECT(idx == MPI_UNDEFINED, "Waitany over inactive requests: index %d", idx);
    expect_empty(&st, "Waitany over inactive requests");
    flag = 0;
    CHK(MPI_Testall(2, r, &flag, sts));
    EXPECT(flag, "Testall over inactive requests: flag 0");
    expect_empty(&sts[0], "Testall entry 0");
    CHK(MPI_Request_get_status(r[0], &flag, &st));
    EXPECT(flag, "Request_get_status on an inactive request: flag 0");
    expect_empty(&st, "Request_get_status on an inactive request");
    CHK(MPI_Request_free(&r[0]));
    CHK(MPI_Request_free(&r[1]));
    report("inactive_persistent_empty_status");
}

/* A started persistent receive can be cancelled and then started again. */
static void t_cancel_persistent(void)
{
    int in[N], out[N];
    MPI_Request r;
    MPI_Status st;
    int flag = -1;
    CHK(MPI_Recv_init(in, N, MPI_INT, peer, 30, MPI_COMM_WORLD, &r));
    CHK(MPI_Start(&r));
    CHK(MPI_Cancel(&r));
    CHK(MPI_Wait(&r, &st));
    CHK(MPI_Test_cancelled(&st, &flag));
    EXPECT(flag == 1, "Test_cancelled %d", flag);
    EXPECT(r != MPI_REQUEST_NULL, "Wait freed the persistent request");
    MPI_Barrier(MPI_COMM_WORLD);
    fill(out, N, t_rank, 30, 0);
    CHK(MPI_Start(&r));
    CHK(MPI_Send(out, N, MPI_INT, peer, 30, MPI_COMM_WORLD));
    CHK(MPI_Wait(&r, &st));
    EXPECT_MSG(in, N, peer, 30, 0, st);
    CHK(MPI_Test_cancelled(&st, &flag));
    EXPECT(flag == 0, "restarted receive: Test_cancelled %d", flag);
    CHK(MPI_Request_free(&r));
    report("cancel_persistent_recv");
}

/* Freeing an inactive persistent receive leaves messages to others. */
static void t_free_unused(void)
{
    int in[N], out[N];
    MPI_Request r;
    MPI_Status st;
    CHK(MPI_Recv_init(in, N, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &r));
    CHK(MPI_Request_free(&r));
    fill(out, N, t_rank, 40, 0);
    CHK(MPI_Sendrecv(out, N, MPI_INT, peer, 40, in, N, MPI_INT, peer, 40,
                     MPI_COMM_WORLD, &st));
    EXPECT_MSG(in, N, peer, 40, 0, st);
    report("free_inactive_persistent");
}

/* More persistent receives than the shim finds without its table, started together with one
 * from MPI_PROC_NULL and completed by MPI_Waitall; every third round half of them are freed
 * and made again (MPI may reuse their handles). */
static void t_many_persistent(void)
{
    enum { R = 12, T = 40 };
    int in[R][4], out[R][4], none[4];
    MPI_Request r[R + 1], s[R];
    MPI_Status sts[R + 1];
    for (int i = 0; i < R; i++) {
        CHK(MPI_Recv_init(in[i], 4, MPI_INT, peer, T + i, MPI_COMM_WORLD, &r[i]));
        CHK(MPI_Send_init(out[i], 4, MPI_INT, peer, T + i, MPI_COMM_WORLD, &s[i]));
    }
    CHK(MPI_Recv_init(none, 4, MPI_INT, MPI_PROC_NULL, T, MPI_COMM_WORLD, &r[R]));
    for (int it = 0; it < ITERS; it++) {
        for (int i = 0; i < R; i++)
            fill(out[i], 4, t_rank, T + i, it);
        CHK(MPI_Startall(R + 1, r));
        CHK(MPI_Startall(R, s));
        CHK(MPI_Waitall(R + 1, r, sts));
        for (int i = 0; i < R; i++)
            EXPECT_MSG(in[i], 4, peer, T + i, it, sts[i]);
        EXPECT(r[R] != MPI_REQUEST_NULL, "Waitall freed the persistent receive from MPI_PROC_NULL");
        CHK(MPI_Waitall(R, s, MPI_STATUSES_IGNORE));
        for (int i = 0; it % 3 == 2 && i < R; i += 2) {
            CHK(MPI_Request_free(&r[i]));
            CHK(MPI_Recv_init(in[i], 4, MPI_INT, peer, T + i, MPI_COMM_WORLD, &r[i]));
        }
    }
    for (int i = 0; i < R; i++) {
        CHK(MPI_Request_free(&r[i]));
        CHK(MPI_Request_free(&s[i]));
    }
    CHK(MPI_Request_free(&r[R]));
    report("many_persistent_receives");
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    peer = 1 - t_rank;
    t_send_recv_init();
    t_startall_modes();
    t_inactive();
    t_cancel_persistent();
    t_free_unused();
    t_many_persistent();
    return t_finish();
}
