/* ranks: 2 3 */
/* Probe, Iprobe, Mprobe, Improbe with Mrecv/Imrecv, and MPI_MESSAGE_NO_PROC.
 * A probed message must be the one the matching receive then gets. */
#include "common.h"

#define N 17

/* Rank 0 sends two messages (tags 1 and 2) to rank 1. */
static void t_probe_specific(void)
{
    int buf[N];
    MPI_Status st;
    if (t_rank == 0) {
        fill(buf, N, 0, 1, 0);
        CHK(MPI_Send(buf, N, MPI_INT, 1, 1, MPI_COMM_WORLD));
        fill(buf, N - 5, 0, 2, 1);
        CHK(MPI_Send(buf, N - 5, MPI_INT, 1, 2, MPI_COMM_WORLD));
    } else if (t_rank == 1) {
        int c = -1;
        /* the first message from 0 is the one ANY_TAG sees */
        CHK(MPI_Probe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        MPI_Get_count(&st, MPI_INT, &c);
        EXPECT(st.MPI_SOURCE == 0 && st.MPI_TAG == 1 && c == N,
               "Probe(0, ANY_TAG): source %d tag %d count %d", st.MPI_SOURCE, st.MPI_TAG, c);
        /* probing it again sees it again */
        CHK(MPI_Probe(MPI_ANY_SOURCE, 1, MPI_COMM_WORLD, &st));
        EXPECT(st.MPI_SOURCE == 0 && st.MPI_TAG == 1, "second probe: %d/%d",
               st.MPI_SOURCE, st.MPI_TAG);
        /* the later message can be probed and received first by tag */
        CHK(MPI_Probe(0, 2, MPI_COMM_WORLD, &st));
        MPI_Get_count(&st, MPI_INT, &c);
        EXPECT(st.MPI_TAG == 2 && c == N - 5, "Probe(0, 2): tag %d count %d", st.MPI_TAG, c);
        CHK(MPI_Recv(buf, N, MPI_INT, 0, 2, MPI_COMM_WORLD, &st));
        EXPECT_MSG(buf, N - 5, 0, 2, 1, st);
        CHK(MPI_Recv(buf, N, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        EXPECT_MSG(buf, N, 0, 1, 0, st);
    }
    report("probe_then_recv");
}

/* Every other rank sends one message of its own size and tag to rank 0,
 * which probes with wildcards, sizes the buffer from the status and
 * receives exactly that message. */
static void t_probe_wildcard(void)
{
    if (t_rank != 0) {
        int n = 100 * t_rank + 3;
        int *b = malloc(sizeof(int) * n);
        fill(b, n, t_rank, 10 + t_rank, 0);
        CHK(MPI_Send(b, n, MPI_INT, 0, 10 + t_rank, MPI_COMM_WORLD));
        free(b);
    } else {
        for (int k = 1; k < t_size; k++) {
            MPI_Status st;
            int c = -1;
            CHK(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            MPI_Get_count(&st, MPI_INT, &c);
            int s = st.MPI_SOURCE, tag = st.MPI_TAG;
            if (s < 1 || s >= t_size || tag != 10 + s || c != 100 * s + 3) {
                FAILF("probe status source %d tag %d count %d", s, tag, c);
                break;
            }
            int *b = malloc(sizeof(int) * c);
            CHK(MPI_Recv(b, c, MPI_INT, s, tag, MPI_COMM_WORLD, &st));
            EXPECT_MSG(b, c, s, 10 + s, 0, st);
            free(b);
        }
    }
    report("probe_any_source_any_tag");
}

/* Iprobe is false while nothing is there, then true once it is. */
static void t_iprobe(void)
{
    int buf[N], flag = 1;
    MPI_Status st;
    if (t_rank == 1) {
        CHK(MPI_Iprobe(MPI_ANY_SOURCE, 20, MPI_COMM_WORLD, &flag, &st));
        EXPECT(!flag, "Iprobe found a message before any was sent");
        CHK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
        EXPECT(!flag, "Iprobe(ANY, ANY) found a message before any was sent");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == 0) {
        fill(buf, N, 0, 20, 0);
        CHK(MPI_Send(buf, N, MPI_INT, 1, 20, MPI_COMM_WORLD));
    } else if (t_rank == 1) {
        double t0 = MPI_Wtime();
        flag = 0;
        while (!flag && MPI_Wtime() - t0 < 10)
            CHK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
        int c = -1;
        MPI_Get_count(&st, MPI_INT, &c);
        EXPECT(flag && st.MPI_SOURCE == 0 && st.MPI_TAG == 20 && c == N,
               "Iprobe flag %d source %d tag %d count %d", flag, st.MPI_SOURCE, st.MPI_TAG, c);
        flag = 0;
        CHK(MPI_Iprobe(0, 20, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
        EXPECT(flag, "second Iprobe lost the message");
        CHK(MPI_Recv(buf, N, MPI_INT, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &st));
        EXPECT_MSG(buf, N, 0, 20, 0, st);
        CHK(MPI_Iprobe(MPI_ANY_SOURCE, 20, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
        EXPECT(!flag, "Iprobe still finds the received message");
    }
    report("iprobe");
}

/* A large (rendezvous) message can be probed and then received. */
static void t_probe_large(void)
{
    const int n = (1 << 20) / (int)sizeof(int) + 5;
    int *b = malloc(sizeof(int) * n);
    MPI_Status st;
    if (t_rank == 0) {
        fill(b, n, 0, 30, 0);
        CHK(MPI_Send(b, n, MPI_INT, 1, 30, MPI_COMM_WORLD));
    } else if (t_rank == 1) {
        int c = -1;
        CHK(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        MPI_Get_count(&st, MPI_INT, &c);
        EXPECT(c == n && st.MPI_TAG == 30, "probe count %d tag %d", c, st.MPI_TAG);
        CHK(MPI_Recv(b, n, MPI_INT, 0, 30, MPI_COMM_WORLD, &st));
        EXPECT_MSG(b, n, 0, 30, 0, st);
    }
    free(b);
    report("probe_large");
}

/* Mprobe takes the message out of matching: a later Recv gets the next one,
 * Mrecv delivers the probed one. */
static void t_mprobe(void)
{
    int buf[N];
    MPI_Status st;
    if (t_rank == 0) {
        for (int i = 0; i < 3; i++) {
            fill(buf, N - i, 0, 40, i);
            CHK(MPI_Send(buf, N - i, MPI_INT, 1, 40, MPI_COMM_WORLD));
        }
    } else if (t_rank == 1) {
        MPI_Message m0, m1;
        int c = -1;
        CHK(MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &m0, &st));
        MPI_Get_count(&st, MPI_INT, &c);
        EXPECT(st.MPI_SOURCE == 0 && st.MPI_TAG == 40 && c == N,
               "Mprobe status %d/%d count %d", st.MPI_SOURCE, st.MPI_TAG, c);
        EXPECT(m0 != MPI_MESSAGE_NULL && m0 != MPI_MESSAGE_NO_PROC, "Mprobe handle");
        CHK(MPI_Mprobe(0, 40, MPI_COMM_WORLD, &m1, &st));
        MPI_Get_count(&st, MPI_INT, &c);
        EXPECT(c == N - 1, "second Mprobe sees count %d (same message twice?)", c);
        CHK(MPI_Recv(buf, N, MPI_INT, 0, 40, MPI_COMM_WORLD, &st));
        EXPECT_MSG(buf, N - 2, 0, 40, 2, st);
        CHK(MPI_Mrecv(buf, N, MPI_INT, &m1, &st));
        EXPECT(m1 == MPI_MESSAGE_NULL, "Mrecv did not reset the handle");
        EXPECT_MSG(buf, N - 1, 0, 40, 1, st);
        CHK(MPI_Mrecv(buf, N, MPI_INT, &m0, &st));
        EXPECT_MSG(buf, N, 0, 40, 0, st);
    }
    report("mprobe_mrecv");
}

static void t_improbe(void)
{
    const int big = 300 * 1024 / (int)sizeof(int);
    int *b = malloc(sizeof(int) * big);
    MPI_Status st;
    int flag = 1;
    MPI_Message m = MPI_MESSAGE_NULL;
    if (t_rank == 1) {
        CHK(MPI_Improbe(0, 50, MPI_COMM_WORLD, &flag, &m, &st));
        EXPECT(!flag && m == MPI_MESSAGE_NULL, "Improbe found a message before any was sent");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == 0) {
        fill(b, 5, 0, 50, 0);
        CHK(MPI_Send(b, 5, MPI_INT, 1, 50, MPI_COMM_WORLD));
        fill(b, big, 0, 51, 1);
        CHK(MPI_Send(b, big, MPI_INT, 1, 51, MPI_COMM_WORLD));
    } else if (t_rank == 1) {
        for (int k = 0; k < 2; k++) {
            double t0 = MPI_Wtime();
            flag = 0;
            while (!flag && MPI_Wtime() - t0 < 10)
                CHK(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &m, &st));
            int c = -1, n = k ? big : 5;
            MPI_Get_count(&st, MPI_INT, &c);
            EXPECT(flag && st.MPI_TAG == 50 + k && c == n,
                   "Improbe flag %d tag %d count %d", flag, st.MPI_TAG, c);
            if (!flag)
                break;
            MPI_Request r;
            memset(b, 0, sizeof(int) * big);
            CHK(MPI_Imrecv(b, big, MPI_INT, &m, &r));
            EXPECT(m == MPI_MESSAGE_NULL, "Imrecv did not reset the handle");
            CHK(MPI_Wait(&r, &st));
            EXPECT_MSG(b, n, 0, 50 + k, k, st);
        }
    }
    free(b);
    report("improbe_imrecv");
}

static void check_noproc_status(MPI_Status *st, const char *what)
{
    int c = -1;
    MPI_Get_count(st, MPI_INT, &c);
    EXPECT(st->MPI_SOURCE == MPI_PROC_NULL && st->MPI_TAG == MPI_ANY_TAG && c == 0,
           "%s: source %d tag %d count %d", what, st->MPI_SOURCE, st->MPI_TAG, c);
}

static void t_no_proc(void)
{
    int buf[4] = {1, 2, 3, 4};
    MPI_Status st;
    MPI_Message m = MPI_MESSAGE_NULL;
    CHK(MPI_Mprobe(MPI_PROC_NULL, 3, MPI_COMM_WORLD, &m, &st));
    EXPECT(m == MPI_MESSAGE_NO_PROC, "Mprobe(PROC_NULL) handle is not MPI_MESSAGE_NO_PROC");
    check_noproc_status(&st, "Mprobe(PROC_NULL)");
    CHK(MPI_Mrecv(buf, 4, MPI_INT, &m, &st));
    EXPECT(m == MPI_MESSAGE_NULL, "Mrecv(NO_PROC) did not reset the handle");
    check_noproc_status(&st, "Mrecv(NO_PROC)");
    EXPECT(buf[0] == 1 && buf[3] == 4, "Mrecv(NO_PROC) wrote the buffer");

    int flag = 0;
    CHK(MPI_Improbe(MPI_PROC_NULL, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &m, &st));
    EXPECT(flag && m == MPI_MESSAGE_NO_PROC, "Improbe(PROC_NULL): flag %d", flag);
    check_noproc_status(&st, "Improbe(PROC_NULL)");
    MPI_Request r;
    CHK(MPI_Imrecv(buf, 4, MPI_INT, &m, &r));
    CHK(MPI_Wait(&r, &st));
    check_noproc_status(&st, "Imrecv(NO_PROC)");
    report("message_no_proc");
}

/* Polling Iprobe on one communicator makes progress on the others: rank 1 has a
 * receive posted on a duplicate and polls MPI_COMM_WORLD for a message rank 0 sends
 * only after its synchronous send on the duplicate (large, so rendezvous) completed. */
static void t_iprobe_progresses_other_comms(void)
{
    enum { LARGE = 1 << 16 };
    int *big = malloc(sizeof(int) * LARGE);
    int token = 0;
    MPI_Comm dup;
    MPI_Status st;
    CHK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    if (t_rank == 0) {
        fill(big, LARGE, 0, 3, 0);
        CHK(MPI_Ssend(big, LARGE, MPI_INT, 1, 3, dup));
        CHK(MPI_Send(&token, 1, MPI_INT, 1, 4, MPI_COMM_WORLD));
    } else if (t_rank == 1) {
        MPI_Request r;
        int flag = 0;
        CHK(MPI_Irecv(big, LARGE, MPI_INT, 0, 3, dup, &r));
        for (double t0 = MPI_Wtime(); !flag && MPI_Wtime() - t0 < 10;)
            CHK(MPI_Iprobe(0, 4, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
        EXPECT(flag, "the message sent after the Ssend never arrived");
        CHK(MPI_Recv(&token, 1, MPI_INT, 0, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHK(MPI_Wait(&r, &st));
        EXPECT_MSG(big, LARGE, 0, 3, 0, st);
    }
    CHK(MPI_Comm_free(&dup));
    free(big);
    report("iprobe_progresses_other_comms");
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    t_probe_specific();
    t_probe_wildcard();
    t_iprobe();
    t_probe_large();
    t_mprobe();
    t_improbe();
    t_no_proc();
    t_iprobe_progresses_other_comms();
    return t_finish();
}
