/* ranks: 2 3 */
/* All send modes, blocking and nonblocking, Sendrecv(_replace) and sends to
 * the own rank.  Ranks form a ring: each sends to next, receives from prev. */
#include "common.h"

#define N 100

static int next, prev;

/* Standard Send/Recv; rank 0 sends first so the ring cannot deadlock. */
static void t_send_recv(void)
{
    int out[N], in[N];
    MPI_Status st;
    fill(out, N, t_rank, 1, 0);
    if (t_rank == 0) {
        CHK(MPI_Send(out, N, MPI_INT, next, 1, MPI_COMM_WORLD));
        CHK(MPI_Recv(in, N, MPI_INT, prev, 1, MPI_COMM_WORLD, &st));
    } else {
        CHK(MPI_Recv(in, N, MPI_INT, prev, 1, MPI_COMM_WORLD, &st));
        CHK(MPI_Send(out, N, MPI_INT, next, 1, MPI_COMM_WORLD));
    }
    EXPECT_MSG(in, N, prev, 1, 0, st);
    report("send_recv");
}

static void t_bsend(void)
{
    int out[N], in[N], sz;
    MPI_Status st;
    MPI_Pack_size(N, MPI_INT, MPI_COMM_WORLD, &sz);
    sz = 2 * (sz + MPI_BSEND_OVERHEAD);
    char *buf = malloc((size_t)sz);
    CHK(MPI_Buffer_attach(buf, sz));
    fill(out, N, t_rank, 2, 0);
    /* Bsend is local: every rank sends before receiving. */
    CHK(MPI_Bsend(out, N, MPI_INT, next, 2, MPI_COMM_WORLD));
    fill(out, N, t_rank, 2, 1);         /* buffered: reuse is allowed */
    CHK(MPI_Bsend(out, N, MPI_INT, next, 2, MPI_COMM_WORLD));
    CHK(MPI_Recv(in, N, MPI_INT, prev, 2, MPI_COMM_WORLD, &st));
    EXPECT_MSG(in, N, prev, 2, 0, st);
    CHK(MPI_Recv(in, N, MPI_INT, prev, 2, MPI_COMM_WORLD, &st));
    EXPECT_MSG(in, N, prev, 2, 1, st);
    void *det;
    int dsz;
    CHK(MPI_Buffer_detach(&det, &dsz));
    EXPECT(det == buf && dsz == sz, "detach gave %p/%d", det, dsz);
    free(buf);
    report("bsend");
}

static void t_ssend(void)
{
    int out[N], in[N];
    MPI_Status st;
    MPI_Request r;
    fill(out, N, t_rank, 3, 0);
    /* receive pre-posted */
    CHK(MPI_Irecv(in, N, MPI_INT, prev, 3, MPI_COMM_WORLD, &r));
    CHK(MPI_Ssend(out, N, MPI_INT, next, 3, MPI_COMM_WORLD));
    CHK(MPI_Wait(&r, &st));
    EXPECT_MSG(in, N, prev, 3, 0, st);
    /* receive posted after the send started (ordered around the ring) */
    fill(out, N, t_rank, 3, 1);
    if (t_rank == 0) {
        CHK(MPI_Ssend(out, N, MPI_INT, next, 3, MPI_COMM_WORLD));
        CHK(MPI_Recv(in, N, MPI_INT, prev, 3, MPI_COMM_WORLD, &st));
    } else {
        CHK(MPI_Recv(in, N, MPI_INT, prev, 3, MPI_COMM_WORLD, &st));
        CHK(MPI_Ssend(out, N, MPI_INT, next, 3, MPI_COMM_WORLD));
    }
    EXPECT_MSG(in, N, prev, 3, 1, st);
    report("ssend");
}

static void t_rsend(void)
{
    int out[N], in[N];
    MPI_Status st;
    MPI_Request r;
    fill(out, N, t_rank, 4, 0);
    CHK(MPI_Irecv(in, N, MPI_INT, prev, 4, MPI_COMM_WORLD, &r));
    MPI_Barrier(MPI_COMM_WORLD);        /* every receive is posted now */
    CHK(MPI_Rsend(out, N, MPI_INT, next, 4, MPI_COMM_WORLD));
    CHK(MPI_Wait(&r, &st));
    EXPECT_MSG(in, N, prev, 4, 0, st);
    report("rsend");
}

static void t_isend(void)
{
    int out[2][N], in[2][N];
    MPI_Status st[4];
    MPI_Request r[4];
    fill(out[0], N, t_rank, 5, 0);
    fill(out[1], N, t_rank, 5, 1);
    /* first message: receive posted first; second: send posted first */
    CHK(MPI_Irecv(in[0], N, MPI_INT, prev, 5, MPI_COMM_WORLD, &r[0]));
    CHK(MPI_Isend(out[0], N, MPI_INT, next, 5, MPI_COMM_WORLD, &r[1]));
    CHK(MPI_Isend(out[1], N, MPI_INT, next, 5, MPI_COMM_WORLD, &r[2]));
    CHK(MPI_Irecv(in[1], N, MPI_INT, prev, 5, MPI_COMM_WORLD, &r[3]));
    CHK(MPI_Waitall(4, r, st));
    EXPECT_MSG(in[0], N, prev, 5, 0, st[0]);
    EXPECT_MSG(in[1], N, prev, 5, 1, st[3]);
    for (int i = 0; i < 4; i++)
        EXPECT(r[i] == MPI_REQUEST_NULL, "request %d not freed", i);
    report("isend_irecv");
}

static void t_ibsend(void)
{
    int out[N], in[N], sz;
    MPI_Status st;
    MPI_Request r;
    MPI_Pack_size(N, MPI_INT, MPI_COMM_WORLD, &sz);
    sz += MPI_BSEND_OVERHEAD;
    char *buf = malloc((size_t)sz);
    CHK(MPI_Buffer_attach(buf, sz));
    fill(out, N, t_rank, 6, 0);
    CHK(MPI_Ibsend(out, N, MPI_INT, next, 6, MPI_COMM_WORLD, &r));
    CHK(MPI_Recv(in, N, MPI_INT, prev, 6, MPI_COMM_WORLD, &st));
    EXPECT_MSG(in, N, prev, 6, 0, st);
    CHK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    void *det;
    int dsz;
    CHK(MPI_Buffer_detach(&det, &dsz));
    free(buf);
    report("ibsend");
}

static void t_issend(void)
{
    int out[N], in[N];
    MPI_Status st;
    MPI_Request r;
    fill(out, N, t_rank, 7, 0);
    CHK(MPI_Issend(out, N, MPI_INT, next, 7, MPI_COMM_WORLD, &r));
    CHK(MPI_Recv(in, N, MPI_INT, prev, 7, MPI_COMM_WORLD, &st));
    EXPECT_MSG(in, N, prev, 7, 0, st);
    CHK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    report("issend");
}

static void t_irsend(void)
{
    int out[N], in[N];
    MPI_Status st[2];
    MPI_Request r[2];
    fill(out, N, t_rank, 8, 0);
    CHK(MPI_Irecv(in, N, MPI_INT, prev, 8, MPI_COMM_WORLD, &r[0]));
    MPI_Barrier(MPI_COMM_WORLD);
    CHK(MPI_Irsend(out, N, MPI_INT, next, 8, MPI_COMM_WORLD, &r[1]));
    CHK(MPI_Waitall(2, r, st));
    EXPECT_MSG(in, N, prev, 8, 0, st[0]);
    report("irsend");
}

static void t_sendrecv(void)
{
    int out[N], in[N];
    MPI_Status st;
    fill(out, N, t_rank, 9, 0);
    CHK(MPI_Sendrecv(out, N, MPI_INT, next, 9, in, N, MPI_INT, prev, 9,
                     MPI_COMM_WORLD, &st));
    EXPECT_MSG(in, N, prev, 9, 0, st);
    /* wildcard receive side */
    fill(out, N, t_rank, 10, 1);
    CHK(MPI_Sendrecv(out, N, MPI_INT, next, 10, in, N, MPI_INT, MPI_ANY_SOURCE,
                     MPI_ANY_TAG, MPI_COMM_WORLD, &st));
    EXPECT_MSG(in, N, prev, 10, 1, st);
    report("sendrecv");
}

static void t_sendrecv_replace(void)
{
    int buf[N];
    MPI_Status st;
    fill(buf, N, t_rank, 11, 0);
    CHK(MPI_Sendrecv_replace(buf, N, MPI_INT, next, 11, prev, 11, MPI_COMM_WORLD, &st));
    EXPECT_MSG(buf, N, prev, 11, 0, st);
    report("sendrecv_replace");
}

static void t_self(void)
{
    int out[N], in[N];
    MPI_Status st;
    MPI_Request r, rr;
    const int me = t_rank;

    /* Isend to self, then blocking Recv */
    fill(out, N, me, 12, 0);
    CHK(MPI_Isend(out, N, MPI_INT, me, 12, MPI_COMM_WORLD, &r));
    CHK(MPI_Recv(in, N, MPI_INT, me, 12, MPI_COMM_WORLD, &st));
    CHK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    EXPECT_MSG(in, N, me, 12, 0, st);

    /* Irecv from self, then blocking Send (receive already posted) */
    fill(out, N, me, 13, 0);
    CHK(MPI_Irecv(in, N, MPI_INT, MPI_ANY_SOURCE, 13, MPI_COMM_WORLD, &rr));
    CHK(MPI_Send(out, N, MPI_INT, me, 13, MPI_COMM_WORLD));
    CHK(MPI_Wait(&rr, &st));
    EXPECT_MSG(in, N, me, 13, 0, st);

    /* Issend to self completes only once the Recv matched it */
    fill(out, N, me, 14, 0);
    CHK(MPI_Issend(out, N, MPI_INT, me, 14, MPI_COMM_WORLD, &r));
    int flag = 0;
    CHK(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
    EXPECT(!flag, "Issend to self completed before the receive was posted");
    CHK(MPI_Recv(in, N, MPI_INT, me, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
    CHK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    EXPECT_MSG(in, N, me, 14, 0, st);

    /* Sendrecv and Sendrecv_replace with self */
    fill(out, N, me, 15, 0);
    CHK(MPI_Sendrecv(out, N, MPI_INT, me, 15, in, N, MPI_INT, me, 15,
                     MPI_COMM_WORLD, &st));
    EXPECT_MSG(in, N, me, 15, 0, st);
    fill(in, N, me, 16, 0);
    CHK(MPI_Sendrecv_replace(in, N, MPI_INT, me, 16, me, 16, MPI_COMM_WORLD, &st));
    EXPECT_MSG(in, N, me, 16, 0, st);

    /* Large (rendezvous-sized) Isend to self then Recv */
    const int big = (1 << 20) / (int)sizeof(int) + 17;
    int *bo = malloc(sizeof(int) * big), *bi = malloc(sizeof(int) * big);
    fill(bo, big, me, 17, 0);
    CHK(MPI_Isend(bo, big, MPI_INT, me, 17, MPI_COMM_WORLD, &r));
    CHK(MPI_Recv(bi, big, MPI_INT, me, 17, MPI_COMM_WORLD, &st));
    CHK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    EXPECT_MSG(bi, big, me, 17, 0, st);
    free(bo);
    free(bi);

    /* Self messages on MPI_COMM_SELF */
    fill(out, N, 0, 18, 0);
    CHK(MPI_Isend(out, N, MPI_INT, 0, 18, MPI_COMM_SELF, &r));
    CHK(MPI_Recv(in, N, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_SELF, &st));
    CHK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    EXPECT_MSG(in, N, 0, 18, 0, st);
    report("self_send");
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    next = (t_rank + 1) % t_size;
    prev = (t_rank + t_size - 1) % t_size;
    t_send_recv();
    t_bsend();
    t_ssend();
    t_rsend();
    t_isend();
    t_ibsend();
    t_issend();
    t_irsend();
    t_sendrecv();
    t_sendrecv_replace();
    t_self();
    return t_finish();
}
