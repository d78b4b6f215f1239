/* ranks: 2 3 */
/* MPI_PROC_NULL as destination and source of blocking calls and probes:
 * immediate success, receives report source PROC_NULL, tag ANY_TAG, count 0.
 * (Nonblocking receives from PROC_NULL are in p2p_procnull_irecv.c.) */
#include "common.h"

#define N 4

static void expect_null_status(MPI_Status *st, const char *what)
{
    int c = -1;
    MPI_Get_count(st, MPI_INT, &c);
    EXPECT(st->MPI_SOURCE == MPI_PROC_NULL && st->MPI_TAG == MPI_ANY_TAG && c == 0,
           "%s: source %d tag %d count %d", what, st->MPI_SOURCE, st->MPI_TAG, c);
}

static void t_send(void)
{
    int buf[N] = {1, 2, 3, 4};
    MPI_Request r[3];
    CHK(MPI_Send(buf, N, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD));
    CHK(MPI_Ssend(buf, N, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD));
    CHK(MPI_Rsend(buf, N, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD));
    CHK(MPI_Bsend(buf, N, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD)); /* no buffer needed */
    CHK(MPI_Isend(buf, N, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &r[0]));
    CHK(MPI_Issend(buf, N, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &r[1]));
    CHK(MPI_Irsend(buf, N, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &r[2]));
    int flag = 0;
    for (double t0 = MPI_Wtime(); !flag && MPI_Wtime() - t0 < 5;)
        CHK(MPI_Testall(3, r, &flag, MPI_STATUSES_IGNORE));
    EXPECT(flag, "sends to PROC_NULL did not complete");
    report("send_proc_null");
}

static void t_recv(void)
{
    int buf[N] = {1, 2, 3, 4};
    MPI_Status st;
    st.MPI_SOURCE = st.MPI_TAG = 12345;
    CHK(MPI_Recv(buf, N, MPI_INT, MPI_PROC_NULL, 7, MPI_COMM_WORLD, &st));
    expect_null_status(&st, "Recv(PROC_NULL, 7)");
    CHK(MPI_Recv(buf, N, MPI_INT, MPI_PROC_NULL, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
    expect_null_status(&st, "Recv(PROC_NULL, ANY_TAG)");
    EXPECT(buf[0] == 1 && buf[3] == 4, "receive from PROC_NULL wrote the buffer");
    CHK(MPI_Recv(buf, N, MPI_INT, MPI_PROC_NULL, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    report("recv_proc_null");
}

static void t_probe(void)
{
    MPI_Status st;
    int flag = 0;
    CHK(MPI_Probe(MPI_PROC_NULL, 3, MPI_COMM_WORLD, &st));
    expect_null_status(&st, "Probe(PROC_NULL)");
    CHK(MPI_Iprobe(MPI_PROC_NULL, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
    EXPECT(flag, "Iprobe(PROC_NULL): flag 0");
    expect_null_status(&st, "Iprobe(PROC_NULL)");
    report("probe_proc_null");
}

/* Non-periodic shift: the ends talk to PROC_NULL. */
static void t_sendrecv(void)
{
    int out[N], in[N] = {9, 9, 9, 9};
    MPI_Status st;
    int up = t_rank + 1 < t_size ? t_rank + 1 : MPI_PROC_NULL;
    int down = t_rank > 0 ? t_rank - 1 : MPI_PROC_NULL;
    fill(out, N, t_rank, 4, 0);
    CHK(MPI_Sendrecv(out, N, MPI_INT, up, 4, in, N, MPI_INT, down, 4, MPI_COMM_WORLD, &st));
    if (down == MPI_PROC_NULL) {
        expect_null_status(&st, "Sendrecv from PROC_NULL");
        EXPECT(in[0] == 9, "Sendrecv from PROC_NULL wrote the buffer");
    } else {
        EXPECT_MSG(in, N, down, 4, 0, st);
    }
    fill(in, N, t_rank, 5, 0);
    CHK(MPI_Sendrecv_replace(in, N, MPI_INT, down, 5, up, 5, MPI_COMM_WORLD, &st));
    if (up == MPI_PROC_NULL) {
        expect_null_status(&st, "Sendrecv_replace from PROC_NULL");
        EXPECT(bad_at(in, N, t_rank, 5, 0) < 0, "Sendrecv_replace from PROC_NULL changed the buffer");
    } else {
        EXPECT_MSG(in, N, up, 5, 0, st);
    }
    CHK(MPI_Sendrecv(out, N, MPI_INT, MPI_PROC_NULL, 6, in, N, MPI_INT, MPI_PROC_NULL, 6,
                     MPI_COMM_WORLD, &st));
    expect_null_status(&st, "Sendrecv(PROC_NULL, PROC_NULL)");
    report("sendrecv_proc_null");
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    t_send();
    t_recv();
    t_probe();
    t_sendrecv();
    return t_finish();
}
