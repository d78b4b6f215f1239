/* A long posted queue matched in order, repeated (p2p_inorder_queue and its
 * MPI_THREAD_MULTIPLE twin): rank 1 posts N receives in tag order and joins a barrier, rank 0
 * then sends the N messages in tag order, and rank 1 waits for them, all at once or one at a
 * time. The queue is long enough for the default takeover, which does not pay (every message
 * matches the oldest receive) and must not be tried again on a queue as long. Include after
 * common.h. */
#ifndef INORDER_QUEUE_H
#define INORDER_QUEUE_H

/* GCC 12 mistakes MPICH's MPI_STATUSES_IGNORE, a constant pointer, for a zero-sized array. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif

#define N 4096
#define REPS 4
#define LEN 2

static void repetition(int rep, int wait_each)
{
    static int bufs[N][LEN];
    static MPI_Request reqs[N];
    if (t_rank == 1)
        for (int tag = 0; tag < N; tag++)
            CHK(MPI_Irecv(bufs[tag], LEN, MPI_INT, 0, tag, MPI_COMM_WORLD, &reqs[tag]));
    CHK(MPI_Barrier(MPI_COMM_WORLD));
    if (t_rank == 0) {
        for (int tag = 0; tag < N; tag++) {
            int out[LEN];
            fill(out, LEN, 0, tag, rep);
            CHK(MPI_Send(out, LEN, MPI_INT, 1, tag, MPI_COMM_WORLD));
        }
        return;
    }
    if (!wait_each)
        CHK(MPI_Waitall(N, reqs, MPI_STATUSES_IGNORE));
    for (int tag = 0; tag < N; tag++) {
        if (wait_each)
            CHK(MPI_Wait(&reqs[tag], MPI_STATUS_IGNORE));
        EXPECT(bad_at(bufs[tag], LEN, 0, tag, rep) < 0, "rep %d: tag %d's payload", rep, tag);
    }
}

#endif
