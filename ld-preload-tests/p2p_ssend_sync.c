/* ranks: 2 */
/* Synchronous sends complete only once a matching receive has started: a
 * message that the receiver has probed (and so has arrived) while the
 * receiver is busy with an unrelated receive must keep the Issend pending. */
#include "common.h"

#define MIN_SPIN 0.05

/* Rank 0 Issends n ints with tag 1 to rank 1.  Rank 1 keeps testing an
 * unrelated Irecv (tag 99), probes until the message is visible and keeps
 * testing a while longer, then enters an Ibarrier.  Rank 0 tests its Issend
 * until that Ibarrier completes: it must stay incomplete.  Only after a
 * second barrier does rank 1 post the receive. */
static void issend_pending(int n, int any_source, const char *name)
{
    int *b = malloc(sizeof(int) * (size_t)n);
    MPI_Request r, bar;
    if (t_rank == 0) {
        int fr = 0, fb = 0;
        fill(b, n, 0, 1, 0);
        CHK(MPI_Issend(b, n, MPI_INT, 1, 1, MPI_COMM_WORLD, &r));
        CHK(MPI_Ibarrier(MPI_COMM_WORLD, &bar));
        double t0 = MPI_Wtime();
        while (!fb || MPI_Wtime() - t0 < MIN_SPIN) {
            CHK(MPI_Test(&r, &fr, MPI_STATUS_IGNORE));
            if (fr) {
                FAILF("Issend completed before the receive was posted");
                break;
            }
            if (!fb)
                CHK(MPI_Test(&bar, &fb, MPI_STATUS_IGNORE));
            if (MPI_Wtime() - t0 > 20) {
                FAILF("Ibarrier never completed");
                break;
            }
        }
        if (!fb)
            CHK(MPI_Wait(&bar, MPI_STATUS_IGNORE));
        MPI_Barrier(MPI_COMM_WORLD);
        if (!fr)
            CHK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        int z = 0;
        CHK(MPI_Send(&z, 1, MPI_INT, 1, 99, MPI_COMM_WORLD));
    } else if (t_rank == 1) {
        int z, flag = 0;
        MPI_Status st;
        CHK(MPI_Irecv(&z, 1, MPI_INT, any_source ? MPI_ANY_SOURCE : 0, 99, MPI_COMM_WORLD, &r));
        for (double t0 = MPI_Wtime(); !flag && MPI_Wtime() - t0 < 10;) {
            CHK(MPI_Iprobe(0, 1, MPI_COMM_WORLD, &flag, &st));
            if (spin_test(&r, 0.001))
                FAILF("unrelated receive completed");
        }
        EXPECT(flag, "the tag-1 message never became visible to Iprobe");
        if (spin_test(&r, MIN_SPIN))
            FAILF("unrelated receive completed");
        CHK(MPI_Ibarrier(MPI_COMM_WORLD, &bar));
        CHK(MPI_Wait(&bar, MPI_STATUS_IGNORE));
        MPI_Barrier(MPI_COMM_WORLD);
        CHK(MPI_Recv(b, n, MPI_INT, any_source ? MPI_ANY_SOURCE : 0, 1, MPI_COMM_WORLD, &st));
        EXPECT_MSG(b, n, 0, 1, 0, st);
        CHK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    } else {
        CHK(MPI_Ibarrier(MPI_COMM_WORLD, &bar));
        CHK(MPI_Wait(&bar, MPI_STATUS_IGNORE));
        MPI_Barrier(MPI_COMM_WORLD);
    }
    free(b);
    report(name);
}

/* Blocking Ssend returns no earlier than the receive is posted: rank 1
 * waits 100 ms after a barrier before receiving. */
static void ssend_blocks(int n, const char *name)
{
    int *b = malloc(sizeof(int) * (size_t)n);
    MPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == 0) {
        fill(b, n, 0, 2, 0);
        double t0 = MPI_Wtime();
        CHK(MPI_Ssend(b, n, MPI_INT, 1, 2, MPI_COMM_WORLD));
        double dt = MPI_Wtime() - t0;
        EXPECT(dt > 0.05, "Ssend returned after %.3f s, the receive came after 0.1 s", dt);
    } else if (t_rank == 1) {
        MPI_Status st;
        int flag;
        for (double t0 = MPI_Wtime(); MPI_Wtime() - t0 < 0.1;)
            MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        CHK(MPI_Recv(b, n, MPI_INT, 0, 2, MPI_COMM_WORLD, &st));
        EXPECT_MSG(b, n, 0, 2, 0, st);
    }
    free(b);
    report(name);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    issend_pending(8, 0, "issend_pending_small");
    issend_pending(8, 1, "issend_pending_small_any_source");
    issend_pending((1 << 20) / 4 + 1, 0, "issend_pending_large");
    ssend_blocks(8, "ssend_blocks_small");
    ssend_blocks((1 << 20) / 4 + 1, "ssend_blocks_large");
    return t_finish();
}
