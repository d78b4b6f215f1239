/* ranks: 2 */
/* native-known-fail: mpich */
/* status.MPI_ERROR (MPI-4.0 3.2.5): single-completion calls (Recv, Probe, Iprobe, Mprobe, Improbe,
 * Wait, Test, Request_get_status, Sendrecv, Waitany, Testany) never write it.  Native MPICH
 * 4.0.2 writes it in Probe.  The multiple-completion calls may; after a successful Waitall both
 * MPICH and Open MPI write MPI_SUCCESS in every status of a request (programs rely on it), and
 * when one of them returns MPI_ERR_IN_STATUS, every status gets its request's error.
 * (p2p_statuses.c compares every field of every completion call with the native run's.) */
#include "common.h"

#define MARK 4711
#define N 8

static int peer;

static void expect_mark(MPI_Status *st, const char *call)
{
    EXPECT(st->MPI_ERROR == MARK, "%s wrote MPI_ERROR = %d", call, st->MPI_ERROR);
    st->MPI_ERROR = MARK;
}

/* Rank 0 sends `count` messages of N ints with tags 0.. to rank 1. */
static void send_tags(int count)
{
    int out[N];
    for (int tag = 0; tag < count; tag++) {
        fill(out, N, t_rank, tag, 0);
        CHK(MPI_Send(out, N, MPI_INT, peer, tag, MPI_COMM_WORLD));
    }
}

/* Twice: first while the default policy still times the communicator's first receive calls
 * (the shim's full path), then where they go to MPI on its plain path. */
static void t_single_completion(const char *name)
{
    int in[N], out[N];
    MPI_Status st = {.MPI_ERROR = MARK};
    MPI_Request r;
    MPI_Message m;
    int flag = 0;
    if (t_rank == 0)
        send_tags(6);
    if (t_rank == 1) {
        CHK(MPI_Recv(in, N, MPI_INT, 0, 0, MPI_COMM_WORLD, &st));
        expect_mark(&st, "Recv");
        CHK(MPI_Probe(0, 1, MPI_COMM_WORLD, &st));
        expect_mark(&st, "Probe");
        while (!flag)
            CHK(MPI_Iprobe(0, 1, MPI_COMM_WORLD, &flag, &st));
        expect_mark(&st, "Iprobe");
        CHK(MPI_Mprobe(0, 1, MPI_COMM_WORLD, &m, &st));
        expect_mark(&st, "Mprobe");
        CHK(MPI_Mrecv(in, N, MPI_INT, &m, &st));
        expect_mark(&st, "Mrecv");
        for (flag = 0; !flag;)
            CHK(MPI_Improbe(0, 2, MPI_COMM_WORLD, &flag, &m, &st));
        expect_mark(&st, "Improbe");
        CHK(MPI_Mrecv(in, N, MPI_INT, &m, MPI_STATUS_IGNORE));
        CHK(MPI_Irecv(in, N, MPI_INT, 0, 3, MPI_COMM_WORLD, &r));
        CHK(MPI_Wait(&r, &st));
        expect_mark(&st, "Wait");
        CHK(MPI_Irecv(in, N, MPI_INT, 0, 4, MPI_COMM_WORLD, &r));
        for (flag = 0; !flag;)
            CHK(MPI_Request_get_status(r, &flag, &st));
        expect_mark(&st, "Request_get_status");
        for (flag = 0; !flag;)
            CHK(MPI_Test(&r, &flag, &st));
        expect_mark(&st, "Test");
        int idx;
        CHK(MPI_Irecv(in, N, MPI_INT, 0, 5, MPI_COMM_WORLD, &r));
        CHK(MPI_Waitany(1, &r, &idx, &st));
        expect_mark(&st, "Waitany");
    }
    fill(out, N, t_rank, 6, 0);
    CHK(MPI_Sendrecv(out, N, MPI_INT, peer, 6, in, N, MPI_INT, peer, 6, MPI_COMM_WORLD, &st));
    expect_mark(&st, "Sendrecv");
    MPI_Request r2;
    CHK(MPI_Isend(out, N, MPI_INT, peer, 7, MPI_COMM_WORLD, &r));
    CHK(MPI_Irecv(in, N, MPI_INT, peer, 7, MPI_COMM_WORLD, &r2));
    int idx = -1;
    for (flag = 0; !flag;)
        CHK(MPI_Testany(1, &r2, &idx, &flag, &st));
    expect_mark(&st, "Testany");
    CHK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    report(name);
}

static void t_waitall_success(void)
{
    int in[3][N];
    MPI_Request r[3];
    MPI_Status st[3];
    if (t_rank == 0)
        send_tags(3);
    if (t_rank == 1) {
        for (int i = 0; i < 3; i++) {
            st[i].MPI_ERROR = MARK;
            CHK(MPI_Irecv(in[i], N, MPI_INT, 0, i, MPI_COMM_WORLD, &r[i]));
        }
        CHK(MPI_Waitall(3, r, st));
        for (int i = 0; i < 3; i++)
            EXPECT(st[i].MPI_ERROR == MPI_SUCCESS, "Waitall left status %d's MPI_ERROR %d", i,
                   st[i].MPI_ERROR);
    }
    report("waitall_writes_success");
}

/* A truncated receive among good ones: MPI_ERR_IN_STATUS, each status with its own error. */
static void t_err_in_status(void)
{
    int in[2][N], out[2 * N];
    MPI_Request r[2];
    MPI_Status st[2];
    if (t_rank == 0) {
        fill(out, N, 0, 20, 0);
        CHK(MPI_Send(out, N, MPI_INT, 1, 20, MPI_COMM_WORLD));
        fill(out, 2 * N, 0, 21, 0);
        CHK(MPI_Send(out, 2 * N, MPI_INT, 1, 21, MPI_COMM_WORLD));
    } else if (t_rank == 1) {
        st[0].MPI_ERROR = st[1].MPI_ERROR = MARK;
        CHK(MPI_Irecv(in[0], N, MPI_INT, 0, 20, MPI_COMM_WORLD, &r[0]));
        CHK(MPI_Irecv(in[1], N, MPI_INT, 0, 21, MPI_COMM_WORLD, &r[1]));
        int rc = MPI_Waitall(2, r, st);
        EXPECT(err_class(rc) == MPI_ERR_IN_STATUS, "Waitall returned %s", err_str(rc));
        EXPECT(st[0].MPI_ERROR == MPI_SUCCESS, "good receive's MPI_ERROR %d", st[0].MPI_ERROR);
        EXPECT(err_class(st[1].MPI_ERROR) == MPI_ERR_TRUNCATE, "truncated receive's MPI_ERROR %s",
               err_str(st[1].MPI_ERROR));
    }
    report("err_in_status_sets_every_status");
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    peer = 1 - t_rank;
    t_single_completion("single_completion_leaves_mpi_error");
    t_single_completion("single_completion_leaves_mpi_error_again");
    t_waitall_success();
    t_err_in_status();
    return t_finish();
}
