/* ranks: 3 5 */
/* Messages on different communicators (dup, split, intercommunicator, idup) with
 * the same tags never match each other; statuses use the comm's ranks. */
#include "common.h"

#define N 6
#define M 30

/* Payload that also says which communicator it was sent on. */
static void cfill(int *b, int comm_id, int src, int seq)
{
    fill(b, N, src, 100 + comm_id, seq);
}

/* Every rank sends M messages to the next rank on world and on a dup,
 * interleaved, same tag; the receiver drains the dup first with wildcards. */
static void t_dup_interleaved(void)
{
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
    int next = (t_rank + 1) % t_size, prev = (t_rank + t_size - 1) % t_size;
    int out[2][M][N], in[N];
    MPI_Request r[2 * M];
    for (int i = 0; i < M; i++) {
        cfill(out[0][i], 0, t_rank, i);
        cfill(out[1][i], 1, t_rank, i);
        CHK(MPI_Isend(out[0][i], N, MPI_INT, next, 1, MPI_COMM_WORLD, &r[2 * i]));
        CHK(MPI_Isend(out[1][i], N, MPI_INT, next, 1, dup, &r[2 * i + 1]));
    }
    MPI_Status st;
    for (int i = 0; i < M; i++) {
        CHK(MPI_Recv(in, N, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, dup, &st));
        EXPECT(bad_at(in, N, prev, 101, i) < 0, "dup receive %d got another message", i);
        EXPECT(st.MPI_SOURCE == prev && st.MPI_TAG == 1, "dup status %d/%d", st.MPI_SOURCE,
               st.MPI_TAG);
    }
    for (int i = 0; i < M; i++) {
        CHK(MPI_Recv(in, N, MPI_INT, prev, 1, MPI_COMM_WORLD, &st));
        EXPECT(bad_at(in, N, prev, 100, i) < 0, "world receive %d got another message", i);
    }
    CHK(MPI_Waitall(2 * M, r, MPI_STATUSES_IGNORE));
    MPI_Comm_free(&dup);
    report("dup_interleaved_same_tag");
}

/* A message on the parent is invisible to wildcard probes and receives on
 * the dup, even when it is the only message there. */
static void t_dup_invisible(void)
{
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
    int b[N];
    MPI_Status st;
    MPI_Request r;
    if (t_rank == 0) {
        cfill(b, 0, 0, 0);
        CHK(MPI_Send(b, N, MPI_INT, 1, 5, MPI_COMM_WORLD));
        MPI_Barrier(MPI_COMM_WORLD);
        cfill(b, 1, 0, 0);
        CHK(MPI_Send(b, N, MPI_INT, 1, 5, dup));
    } else if (t_rank == 1) {
        int flag = 0;
        CHK(MPI_Irecv(b, N, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, dup, &r));
        CHK(MPI_Probe(0, 5, MPI_COMM_WORLD, &st));      /* it has arrived */
        for (int k = 0; k < 100; k++) {
            CHK(MPI_Test(&r, &flag, &st));
            EXPECT(!flag, "receive on the dup took the parent's message");
            if (flag)
                break;
        }
        CHK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, dup, &flag, &st));
        EXPECT(!flag, "Iprobe on the dup sees the parent's message");
        MPI_Barrier(MPI_COMM_WORLD);
        CHK(MPI_Wait(&r, &st));
        EXPECT(bad_at(b, N, 0, 101, 0) < 0 && st.MPI_SOURCE == 0 && st.MPI_TAG == 5,
               "dup receive: wrong message (source %d tag %d)", st.MPI_SOURCE, st.MPI_TAG);
        CHK(MPI_Recv(b, N, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        EXPECT(bad_at(b, N, 0, 100, 0) < 0, "world receive: wrong message");
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Comm_free(&dup);
    report("dup_never_sees_parent");
}

/* Split into odd/even halves with reversed key: comm ranks differ from
 * world ranks.  Rings in the sub-communicator and in world, same tag. */
static void t_split(void)
{
    MPI_Comm sub;
    MPI_Comm_split(MPI_COMM_WORLD, t_rank % 2, -t_rank, &sub);
    MPI_Comm_set_errhandler(sub, MPI_ERRORS_RETURN);
    int sr, ss;
    MPI_Comm_rank(sub, &sr);
    MPI_Comm_size(sub, &ss);
    int snext = (sr + 1) % ss, sprev = (sr + ss - 1) % ss;
    int wnext = (t_rank + 1) % t_size, wprev = (t_rank + t_size - 1) % t_size;
    int out[2][N], in[2][N];
    MPI_Request r[4];
    MPI_Status st[4];
    /* sub-comm payload carries the sub rank as source */
    fill(out[0], N, t_rank, 100, 0);
    fill(out[1], N, sr, 200 + t_rank % 2, 0);
    CHK(MPI_Irecv(in[1], N, MPI_INT, MPI_ANY_SOURCE, 7, sub, &r[0]));
    CHK(MPI_Irecv(in[0], N, MPI_INT, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &r[1]));
    CHK(MPI_Isend(out[0], N, MPI_INT, wnext, 7, MPI_COMM_WORLD, &r[2]));
    CHK(MPI_Isend(out[1], N, MPI_INT, snext, 7, sub, &r[3]));
    CHK(MPI_Waitall(4, r, st));
    EXPECT(bad_at(in[0], N, wprev, 100, 0) < 0, "world message wrong");
    EXPECT(st[1].MPI_SOURCE == wprev, "world status source %d", st[1].MPI_SOURCE);
    EXPECT(bad_at(in[1], N, sprev, 200 + t_rank % 2, 0) < 0,
           "sub-comm (size %d) message wrong", ss);
    EXPECT(st[0].MPI_SOURCE == sprev, "sub-comm status source %d, expected sub rank %d",
           st[0].MPI_SOURCE, sprev);
    MPI_Comm_free(&sub);
    report("split_no_crosstalk");
}

/* Three dups, same tag, sent round-robin; received comm by comm in reverse
 * creation order: per-comm order holds. */
static void t_many_comms(void)
{
    MPI_Comm c[3];
    for (int k = 0; k < 3; k++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &c[k]);
        MPI_Comm_set_errhandler(c[k], MPI_ERRORS_RETURN);
    }
    if (t_rank == 0) {
        int out[3][M][N];
        MPI_Request r[3 * M];
        for (int i = 0; i < M; i++)
            for (int k = 0; k < 3; k++) {
                cfill(out[k][i], k, 0, i);
                CHK(MPI_Isend(out[k][i], N, MPI_INT, 1, 9, c[k], &r[3 * i + k]));
            }
        CHK(MPI_Waitall(3 * M, r, MPI_STATUSES_IGNORE));
    } else if (t_rank == 1) {
        int in[N];
        MPI_Status st;
        for (int k = 2; k >= 0; k--)
            for (int i = 0; i < M; i++) {
                CHK(MPI_Recv(in, N, MPI_INT, MPI_ANY_SOURCE, 9, c[k], &st));
                EXPECT(bad_at(in, N, 0, 100 + k, i) < 0,
                       "comm %d receive %d got another message", k, i);
            }
    }
    for (int k = 0; k < 3; k++)
        MPI_Comm_free(&c[k]);
    report("many_comms_same_tag");
}

/* Intercommunicator between the halves: ranks and statuses refer to the
 * remote group. */
static void t_intercomm(void)
{
    MPI_Comm local, inter;
    int color = t_rank % 2;
    MPI_Comm_split(MPI_COMM_WORLD, color, t_rank, &local);
    /* local leader is local rank 0; remote leader is world rank 1 - color */
    MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, 1 - color, 77, &inter);
    MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
    int lr, rsize;
    MPI_Comm_rank(inter, &lr);
    MPI_Comm_remote_size(inter, &rsize);
    /* each rank sends to remote rank lr % rsize; receive all addressed to me */
    int out[N], in[N];
    MPI_Request r;
    fill(out, N, lr, 300 + color, 0);
    CHK(MPI_Isend(out, N, MPI_INT, lr % rsize, 3, inter, &r));
    int lsize;
    MPI_Comm_size(local, &lsize);
    for (int s = 0; s < rsize; s++) {
        if (s % lsize != lr)
            continue;
        MPI_Status st;
        CHK(MPI_Recv(in, N, MPI_INT, s, 3, inter, &st));
        EXPECT(bad_at(in, N, s, 300 + (1 - color), 0) < 0 && st.MPI_SOURCE == s,
               "from remote rank %d: wrong message (status source %d)", s, st.MPI_SOURCE);
    }
    CHK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    MPI_Comm_free(&inter);
    MPI_Comm_free(&local);
    report("intercomm");
}

/* A ring on a communicator MPI_Comm_idup makes of `parent` (a call the shim does not
 * intercept), wildcard receives posted before the messages: the shim learns the communicator
 * at its first use and matches on it with its own ranks and size. Freed after. */
static void idup_ring(MPI_Comm parent, int k)
{
    MPI_Comm c;
    MPI_Request req;
    CHK(MPI_Comm_idup(parent, &c, &req));
    CHK(MPI_Wait(&req, MPI_STATUS_IGNORE));
    int r, n;
    MPI_Comm_rank(c, &r);
    MPI_Comm_size(c, &n);
    int next = (r + 1) % n, prev = (r + n - 1) % n;
    int out[M][N], in[M][N];
    MPI_Request rr[M], sr[M];
    MPI_Status st[M];
    for (int i = 0; i < M; i++)
        CHK(MPI_Irecv(in[i], N, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, c, &rr[i]));
    MPI_Barrier(c);
    for (int i = 0; i < M; i++) {
        fill(out[i], N, r, 300 + k, i);
        CHK(MPI_Isend(out[i], N, MPI_INT, next, 9 + i % 2, c, &sr[i]));
    }
    CHK(MPI_Waitall(M, rr, st));
    CHK(MPI_Waitall(M, sr, MPI_STATUSES_IGNORE));
    for (int i = 0; i < M; i++) {
        EXPECT(bad_at(in[i], N, prev, 300 + k, i) < 0, "idup %d: receive %d wrong", k, i);
        EXPECT(st[i].MPI_SOURCE == prev && st[i].MPI_TAG == 9 + i % 2,
               "idup %d: receive %d status source %d tag %d, expected %d %d", k, i,
               st[i].MPI_SOURCE, st[i].MPI_TAG, prev, 9 + i % 2);
    }
    MPI_Comm_free(&c);
}

/* idup_ring of a split with reversed ranks, then (that handle freed, MPI may give it again)
 * of MPI_COMM_WORLD. */
static void t_idup(void)
{
    MPI_Comm sub;
    MPI_Comm_split(MPI_COMM_WORLD, t_rank % 2, -t_rank, &sub);
    idup_ring(sub, 0);
    MPI_Comm_free(&sub);
    idup_ring(MPI_COMM_WORLD, 1);
    report("idup_learned_at_first_use");
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    t_dup_interleaved();
    t_dup_invisible();
    t_split();
    t_many_comms();
    t_intercomm();
    t_idup();
    return t_finish();
}
