/* ranks: 2 */
/* native-known-fail: mpich */
/* Nonblocking and persistent receives from MPI_PROC_NULL complete with
 * source PROC_NULL, tag ANY_TAG, count 0.  Native MPICH 4.0 reports source 0
 * tag 0 (Irecv) or an empty status (Recv_init), and counts a started persistent one
 * inactive in the calls over several requests, so this program is only required to pass
 * under the shim there. */
#include "common.h"

#define N 4

static void expect_null_status(MPI_Status *st, const char *what)
{
    int c = -1;
    MPI_Get_count(st, MPI_INT, &c);
    EXPECT(st->MPI_SOURCE == MPI_PROC_NULL && st->MPI_TAG == MPI_ANY_TAG && c == 0,
           "%s: source %d tag %d count %d", what, st->MPI_SOURCE, st->MPI_TAG, c);
}

static void t_irecv_wait(void)
{
    int buf[N] = {1, 2, 3, 4};
    MPI_Request r;
    MPI_Status st;
    CHK(MPI_Irecv(buf, N, MPI_INT, MPI_PROC_NULL, 5, MPI_COMM_WORLD, &r));
    CHK(MPI_Wait(&r, &st));
    expect_null_status(&st, "Irecv+Wait");
    EXPECT(buf[0] == 1 && buf[3] == 4, "Irecv from PROC_NULL wrote the buffer");
    report("irecv_proc_null_wait");
}

static void t_irecv_test(void)
{
    int buf[N];
    MPI_Request r;
    MPI_Status st;
    int flag = 0;
    CHK(MPI_Irecv(buf, N, MPI_INT, MPI_PROC_NULL, MPI_ANY_TAG, MPI_COMM_WORLD, &r));
    for (double t0 = MPI_Wtime(); !flag && MPI_Wtime() - t0 < 5;)
        CHK(MPI_Test(&r, &flag, &st));
    EXPECT(flag, "never completed");
    expect_null_status(&st, "Irecv+Test");
    report("irecv_proc_null_test");
}

/* In a Waitall/Waitany together with a real receive. */
static void t_irecv_multi(void)
{
    int a[N], b[N], out[N];
    MPI_Request r[2];
    MPI_Status st[2];
    int peer = 1 - t_rank, idx = -1;
    fill(out, N, t_rank, 6, 0);
    CHK(MPI_Irecv(a, N, MPI_INT, MPI_PROC_NULL, 6, MPI_COMM_WORLD, &r[0]));
    CHK(MPI_Irecv(b, N, MPI_INT, peer, 6, MPI_COMM_WORLD, &r[1]));
    CHK(MPI_Send(out, N, MPI_INT, peer, 6, MPI_COMM_WORLD));
    CHK(MPI_Waitall(2, r, st));
    expect_null_status(&st[0], "Waitall entry");
    EXPECT_MSG(b, N, peer, 6, 0, st[1]);
    CHK(MPI_Irecv(a, N, MPI_INT, MPI_PROC_NULL, 6, MPI_COMM_WORLD, &r[0]));
    CHK(MPI_Waitany(1, r, &idx, &st[0]));
    EXPECT(idx == 0, "Waitany index %d", idx);
    expect_null_status(&st[0], "Waitany");
    report("irecv_proc_null_waitall_waitany");
}

static void t_recv_init(void)
{
    int buf[N];
    MPI_Request r;
    MPI_Status st;
    CHK(MPI_Recv_init(buf, N, MPI_INT, MPI_PROC_NULL, 8, MPI_COMM_WORLD, &r));
    for (int i = 0; i < 3; i++) {
        CHK(MPI_Start(&r));
        CHK(MPI_Wait(&r, &st));
        expect_null_status(&st, "Recv_init+Start+Wait");
    }
    CHK(MPI_Request_free(&r));
    report("recv_init_proc_null");
}

/* A started one is active until a completion call reports it: native MPICH 4.0 takes it for
 * inactive in the calls over several requests (index and outcount MPI_UNDEFINED). */
static void t_recv_init_multi(void)
{
    int buf[N], idx = -1, flag = 0, outcount = -1, indices[1];
    MPI_Request r;
    MPI_Status st;
    CHK(MPI_Recv_init(buf, N, MPI_INT, MPI_PROC_NULL, 9, MPI_COMM_WORLD, &r));
    CHK(MPI_Start(&r));
    for (double t0 = MPI_Wtime(); !flag && MPI_Wtime() - t0 < 5;)
        CHK(MPI_Testany(1, &r, &idx, &flag, &st));
    EXPECT(flag && idx == 0, "Testany: flag %d index %d", flag, idx);
    expect_null_status(&st, "Recv_init+Start+Testany");
    CHK(MPI_Start(&r));
    CHK(MPI_Waitany(1, &r, &idx, &st));
    EXPECT(idx == 0, "Waitany: index %d", idx);
    expect_null_status(&st, "Recv_init+Start+Waitany");
    CHK(MPI_Start(&r));
    CHK(MPI_Waitsome(1, &r, &outcount, indices, &st));
    EXPECT(outcount == 1 && indices[0] == 0, "Waitsome: outcount %d", outcount);
    expect_null_status(&st, "Recv_init+Start+Waitsome");
    CHK(MPI_Start(&r));
    outcount = 0;
    for (double t0 = MPI_Wtime(); outcount == 0 && MPI_Wtime() - t0 < 5;)
        CHK(MPI_Testsome(1, &r, &outcount, indices, &st));
    EXPECT(outcount == 1 && indices[0] == 0, "Testsome: outcount %d", outcount);
    expect_null_status(&st, "Recv_init+Start+Testsome");
    CHK(MPI_Request_free(&r));
    report("recv_init_proc_null_multi");
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    t_irecv_wait();
    t_irecv_test();
    t_irecv_multi();
    t_recv_init();
    t_recv_init_multi();
    return t_finish();
}
