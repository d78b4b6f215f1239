/* ranks: 2 */
/* native-known-fail: mpich */
/* MPI-4 calls that receive: Isendrecv, Isendrecv_replace, their large-count forms and
 * Sendrecv_replace_c, and partitioned communication (Psend_init, Precv_init, Pready,
 * Pready_range, Pready_list, Parrived), the latter while a wildcard receive waits on the same
 * communicator for a message sent only afterwards.  Skipped on an MPI-3 library.  Native MPICH
 * 4.0.2 gives the Isendrecv family a status with source 0 and tag 0. */
#include "common.h"

#define N 32
#define PARTS 4

static int peer;

#if MPI_VERSION >= 4
static void t_isendrecv(void)
{
    int out[N], in[N];
    MPI_Request r;
    MPI_Status st;
    for (int seq = 0; seq < 5; seq++) {
        fill(out, N, t_rank, 11, seq);
        CHK(MPI_Isendrecv(out, N, MPI_INT, peer, 11, in, N, MPI_INT, MPI_ANY_SOURCE, 11,
                          MPI_COMM_WORLD, &r));
        CHK(MPI_Wait(&r, &st));
        EXPECT_MSG(in, N, peer, 11, seq, st);
    }
    report("isendrecv");
}

/* The message an Isendrecv receives has arrived before the call, while another receive of the
 * rank waits (so a shim drains the communicator). */
static void t_isendrecv_after_its_message_arrived(void)
{
    int out[N], in[N], early[N], late[N];
    MPI_Request pending, r;
    MPI_Status st;
    CHK(MPI_Irecv(late, N, MPI_INT, peer, 17, MPI_COMM_WORLD, &pending));
    fill(out, N, t_rank, 16, 0);
    CHK(MPI_Send(out, N, MPI_INT, peer, 16, MPI_COMM_WORLD));
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < 100; i++) {
        int flag;
        CHK(MPI_Test(&pending, &flag, MPI_STATUS_IGNORE));
    }
    fill(out, N, t_rank, 18, 0);
    CHK(MPI_Isendrecv(out, N, MPI_INT, peer, 18, early, N, MPI_INT, peer, 16, MPI_COMM_WORLD,
                      &r));
    CHK(MPI_Wait(&r, &st));
    EXPECT_MSG(early, N, peer, 16, 0, st);
    CHK(MPI_Recv(in, N, MPI_INT, peer, 18, MPI_COMM_WORLD, &st));
    EXPECT_MSG(in, N, peer, 18, 0, st);
    fill(out, N, t_rank, 17, 0);
    CHK(MPI_Send(out, N, MPI_INT, peer, 17, MPI_COMM_WORLD));
    CHK(MPI_Wait(&pending, &st));
    EXPECT_MSG(late, N, peer, 17, 0, st);
    report("isendrecv_after_its_message_arrived");
}

static void t_isendrecv_replace(void)
{
    int buf[N];
    MPI_Request r;
    MPI_Status st;
    fill(buf, N, t_rank, 12, 0);
    CHK(MPI_Isendrecv_replace(buf, N, MPI_INT, peer, 12, peer, 12, MPI_COMM_WORLD, &r));
    int flag = 0;
    while (!flag)
        CHK(MPI_Test(&r, &flag, &st));
    EXPECT_MSG(buf, N, peer, 12, 0, st);
    report("isendrecv_replace");
}

static void t_large_count_forms(void)
{
    int out[N], in[N], buf[N];
    MPI_Request r;
    MPI_Status st;
    MPI_Count n = N;
    fill(out, N, t_rank, 13, 0);
    CHK(MPI_Isendrecv_c(out, n, MPI_INT, peer, 13, in, n, MPI_INT, peer, 13, MPI_COMM_WORLD,
                        &r));
    CHK(MPI_Wait(&r, &st));
    EXPECT_MSG(in, N, peer, 13, 0, st);
    fill(buf, N, t_rank, 14, 0);
    CHK(MPI_Sendrecv_replace_c(buf, n, MPI_INT, peer, 14, peer, 14, MPI_COMM_WORLD, &st));
    EXPECT_MSG(buf, N, peer, 14, 0, st);
    fill(buf, N, t_rank, 15, 0);
    CHK(MPI_Isendrecv_replace_c(buf, n, MPI_INT, peer, 15, peer, 15, MPI_COMM_WORLD, &r));
    CHK(MPI_Wait(&r, &st));
    EXPECT_MSG(buf, N, peer, 15, 0, st);
    report("large_count_send_receive");
}

/* Rank 0 sends PARTS partitions of N ints three times to rank 1, marking them ready one by
 * one, as a range and as a list; rank 1 keeps a wildcard receive waiting meanwhile. */
static void t_partitioned(void)
{
    int data[PARTS * N], spare[N], other[N];
    MPI_Request part, pending = MPI_REQUEST_NULL;
    MPI_Status st;
    if (t_rank == 0)
        CHK(MPI_Psend_init(data, PARTS, N, MPI_INT, 1, 20, MPI_COMM_WORLD, MPI_INFO_NULL, &part));
    else
        CHK(MPI_Precv_init(data, PARTS, N, MPI_INT, 0, 20, MPI_COMM_WORLD, MPI_INFO_NULL, &part));
    if (t_rank == 1)
        CHK(MPI_Irecv(spare, N, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &pending));
    for (int round = 0; round < 3; round++) {
        if (t_rank == 1)
            for (int i = 0; i < PARTS * N; i++)
                data[i] = -1;
        CHK(MPI_Start(&part));
        if (t_rank == 0) {
            for (int p = 0; p < PARTS; p++)
                fill(data + p * N, N, 0, 20 + p, round);
            if (round == 0) {
                for (int p = 0; p < PARTS; p++)
                    CHK(MPI_Pready(p, part));
            } else if (round == 1) {
                CHK(MPI_Pready_range(0, PARTS - 1, part));
            } else {
                int list[PARTS] = {3, 1, 0, 2};
                CHK(MPI_Pready_list(PARTS, list, part));
            }
        } else {
            int arrived = 0;
            while (!arrived) {
                int flag = 1;
                for (int p = 0; p < PARTS && flag; p++)
                    CHK(MPI_Parrived(part, p, &flag));
                arrived = flag;
            }
        }
        CHK(MPI_Wait(&part, MPI_STATUS_IGNORE));
        if (t_rank == 1)
            for (int p = 0; p < PARTS; p++) {
                int bad = bad_at(data + p * N, N, 0, 20 + p, round);
                EXPECT(bad < 0, "round %d partition %d wrong at %d", round, p, bad);
            }
    }
    CHK(MPI_Request_free(&part));
    if (t_rank == 0) {
        fill(other, N, 0, 21, 9);
        CHK(MPI_Send(other, N, MPI_INT, 1, 21, MPI_COMM_WORLD));
    } else {
        CHK(MPI_Wait(&pending, &st));
        EXPECT_MSG(spare, N, 0, 21, 9, st);
    }
    report("partitioned_beside_a_waiting_wildcard_receive");
}
#endif

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    peer = 1 - t_rank;
#if MPI_VERSION >= 4
    t_isendrecv();
    t_isendrecv_after_its_message_arrived();
    t_isendrecv_replace();
    t_large_count_forms();
    t_partitioned();
#else
    report_skip("mpi4", "the MPI library implements MPI-3");
#endif
    return t_finish();
}
