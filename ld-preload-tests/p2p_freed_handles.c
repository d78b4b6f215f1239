/* ranks: 2 3 */
/* Handles freed while operations using them are pending: MPI keeps them until the operations
 * complete.  A receive with a derived datatype freed before its message arrives, a persistent
 * receive whose datatype is freed after MPI_Recv_init, and receives (specific and wildcard
 * source) waiting on a communicator that rank 1 frees before their messages are sent, one of
 * them still pending while the program waits for a later message on MPI_COMM_WORLD. */
#include "common.h"

#define N 16
#define TAG 7

/* N ints at every other place of a 2N buffer. */
static MPI_Datatype strided(void)
{
    MPI_Datatype t;
    MPI_Type_vector(N, 1, 2, MPI_INT, &t);
    MPI_Type_commit(&t);
    return t;
}

static void expect_strided(const int *buf, int src, int tag, int seq)
{
    for (int i = 0; i < N; i++) {
        EXPECT(buf[2 * i] == pat(src, tag, seq, i), "element %d of seq %d: %d", i, seq,
               buf[2 * i]);
        EXPECT(buf[2 * i + 1] == -1, "gap %d of seq %d written", i, seq);
    }
}

static void t_type_freed_before_arrival(void)
{
    int out[N], in[2 * N];
    MPI_Request r;
    MPI_Status st;
    if (t_rank == 1) {
        MPI_Datatype t = strided();
        for (int i = 0; i < 2 * N; i++)
            in[i] = -1;
        CHK(MPI_Irecv(in, 1, t, 0, TAG, MPI_COMM_WORLD, &r));
        CHK(MPI_Type_free(&t));
        EXPECT(t == MPI_DATATYPE_NULL, "Type_free did not reset the handle");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == 0) {
        fill(out, N, 0, TAG, 0);
        CHK(MPI_Send(out, N, MPI_INT, 1, TAG, MPI_COMM_WORLD));
    } else if (t_rank == 1) {
        CHK(MPI_Wait(&r, &st));
        expect_strided(in, 0, TAG, 0);
        EXPECT(st.MPI_SOURCE == 0 && st.MPI_TAG == TAG, "status %d/%d", st.MPI_SOURCE,
               st.MPI_TAG);
    }
    report("type_freed_before_arrival");
}

static void t_type_freed_after_recv_init(void)
{
    int out[N], in[2 * N];
    MPI_Request r = MPI_REQUEST_NULL;
    if (t_rank == 1) {
        MPI_Datatype t = strided();
        CHK(MPI_Recv_init(in, 1, t, MPI_ANY_SOURCE, TAG, MPI_COMM_WORLD, &r));
        CHK(MPI_Type_free(&t));
    }
    for (int seq = 0; seq < 5; seq++) {
        if (t_rank == 1) {
            for (int i = 0; i < 2 * N; i++)
                in[i] = -1;
            CHK(MPI_Start(&r));
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (t_rank == 0) {
            fill(out, N, 0, TAG, seq);
            CHK(MPI_Send(out, N, MPI_INT, 1, TAG, MPI_COMM_WORLD));
        } else if (t_rank == 1) {
            CHK(MPI_Wait(&r, MPI_STATUS_IGNORE));
            expect_strided(in, 0, TAG, seq);
        }
    }
    if (t_rank == 1)
        CHK(MPI_Request_free(&r));
    report("type_freed_after_recv_init");
}

/* Rank 1 posts receives on a duplicate, frees it, and only then does rank 0 send on its own
 * copy (freed afterwards): the receives complete after their communicator is gone. */
static void t_comm_freed_while_receiving(void)
{
    MPI_Comm c;
    int out[2][N], in[2][N];
    MPI_Request r[2];
    MPI_Status st[2];
    CHK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    if (t_rank == 1) {
        CHK(MPI_Irecv(in[0], N, MPI_INT, 0, 3, c, &r[0]));
        CHK(MPI_Irecv(in[1], N, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, c, &r[1]));
        CHK(MPI_Comm_free(&c));
        EXPECT(c == MPI_COMM_NULL, "Comm_free did not reset the handle");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == 0) {
        fill(out[0], N, 0, 3, 1);
        fill(out[1], N, 0, 4, 2);
        CHK(MPI_Send(out[0], N, MPI_INT, 1, 3, c));
        CHK(MPI_Send(out[1], N, MPI_INT, 1, 4, c));
    }
    if (t_rank != 1)
        CHK(MPI_Comm_free(&c));
    if (t_rank == 1) {
        CHK(MPI_Waitall(2, r, st));
        EXPECT_MSG(in[0], N, 0, 3, 1, st[0]);
        EXPECT_MSG(in[1], N, 0, 4, 2, st[1]);
    }
    report("comm_freed_while_receiving");
}

/* The same while a message already waits unreceived on the communicator: it stays so. */
static void t_comm_freed_with_unexpected_message(void)
{
    MPI_Comm c;
    int out[N], in[N];
    MPI_Request r;
    MPI_Status st;
    CHK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    if (t_rank == 0) {
        fill(out, N, 0, 9, 0);
        CHK(MPI_Send(out, N, MPI_INT, 1, 9, c));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == 1) {
        int flag = 0;
        /* The tag-9 message has arrived: nothing here wants it. */
        while (!flag)
            CHK(MPI_Iprobe(0, 9, c, &flag, MPI_STATUS_IGNORE));
        CHK(MPI_Irecv(in, N, MPI_INT, 0, 5, c, &r));
        CHK(MPI_Comm_free(&c));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == 0) {
        fill(out, N, 0, 5, 1);
        CHK(MPI_Send(out, N, MPI_INT, 1, 5, c));
    }
    if (t_rank != 1)
        CHK(MPI_Comm_free(&c));
    if (t_rank == 1) {
        CHK(MPI_Wait(&r, &st));
        EXPECT_MSG(in, N, 0, 5, 1, st);
    }
    report("comm_freed_with_unexpected_message");
}

/* Rank 1's receive on a freed duplicate is still pending while it waits for a later message
 * on MPI_COMM_WORLD. */
static void t_comm_freed_inside_another_wait(void)
{
    MPI_Comm c;
    int out[N], in[N], later_out[N], later_in[N];
    MPI_Request r, later;
    MPI_Status st, later_st;
    CHK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    if (t_rank == 1) {
        CHK(MPI_Irecv(in, N, MPI_INT, 0, 11, c, &r));
        CHK(MPI_Comm_free(&c));
        CHK(MPI_Irecv(later_in, N, MPI_INT, 0, 12, MPI_COMM_WORLD, &later));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == 0) {
        fill(out, N, 0, 11, 0);
        fill(later_out, N, 0, 12, 1);
        CHK(MPI_Send(out, N, MPI_INT, 1, 11, c));
        CHK(MPI_Send(later_out, N, MPI_INT, 1, 12, MPI_COMM_WORLD));
    }
    if (t_rank != 1)
        CHK(MPI_Comm_free(&c));
    if (t_rank == 1) {
        CHK(MPI_Wait(&later, &later_st));
        EXPECT_MSG(later_in, N, 0, 12, 1, later_st);
        CHK(MPI_Wait(&r, &st));
        EXPECT_MSG(in, N, 0, 11, 0, st);
    }
    report("comm_freed_inside_another_wait");
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    t_type_freed_before_arrival();
    t_type_freed_after_recv_init();
    t_comm_freed_while_receiving();
    t_comm_freed_with_unexpected_message();
    t_comm_freed_inside_another_wait();
    return t_finish();
}
