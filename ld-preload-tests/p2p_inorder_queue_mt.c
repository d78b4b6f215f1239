/* ranks: 2 */
/* p2p_inorder_queue at MPI_THREAD_MULTIPLE, waited for one receive at a time: there the
 * receives waiting in the shim go to MPI for good before the barrier (they cannot be lent),
 * so a takeover of the queue matches nothing, and must not be tried again on a queue as
 * long: under MATCHSHIM_TAKEOVER=auto matchshim_takeovers may count two takeovers in the four
 * repetitions, no more. Natively and under the other takeover modes only the payloads are
 * checked; the check lines are the same. */
#define _GNU_SOURCE
#include "common.h"
#include "takeover_count.h"

/* GCC 12 mistakes MPICH's MPI_STATUSES_IGNORE, a constant pointer, for a zero-sized array. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif

#define N 4096
#define REPS 4
#define LEN 2

static void repetition(int rep)
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
    } else {
        for (int tag = 0; tag < N; tag++) {
            CHK(MPI_Wait(&reqs[tag], MPI_STATUS_IGNORE));
            EXPECT(bad_at(bufs[tag], LEN, 0, tag, rep) < 0, "rep %d: tag %d's payload", rep,
                   tag);
        }
    }
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    t_setup();
    if (provided < MPI_THREAD_MULTIPLE) {
        report_skip("inorder_queue_mt", "MPI_THREAD_MULTIPLE not provided");
        return t_finish();
    }
    takeover_count takeovers;
    int judged = takeover_count_start(&takeovers);

    for (int rep = 0; rep < REPS; rep++)
        repetition(rep);
    if (judged && t_rank == 1) {
        unsigned long long count = takeover_count_read(&takeovers);
        fprintf(stderr, "inorder_queue_mt: %llu takeovers in %d repetitions\n", count, REPS);
        EXPECT(count <= 2, "the shim took over %llu times in %d repetitions", count, REPS);
    }
    report("inorder_queue_mt");
    takeover_count_stop(&takeovers);
    return t_finish();
}
