/* ranks: 2 3 */
/* Receives posted before a collective that peers join only after their messages matched:
 * rank 0 posts N receives per peer, newest tag first, then joins a barrier; each peer sends
 * its N messages with MPI_Ssend, in tag order, and then joins it.  The queue is long enough
 * for the default takeover, so the shim lends its waiting receives to MPI for the barrier,
 * and MPI matches every one of them there.  Repeated REPS times; every payload is checked.
 * Under MATCHSHIM_TAKEOVER=auto the shim's MPI_T variable matchshim_takeovers must also show
 * that it left this queue to MPI after the first loan MPI matched, rather than lending it
 * again for every barrier.  Natively and under the other takeover modes only the payloads
 * are checked; the check lines are the same. */
#define _GNU_SOURCE
#include "common.h"
#include "takeover_count.h"

/* GCC 12 mistakes MPICH's MPI_STATUSES_IGNORE, a constant pointer, for a zero-sized array. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif

#define N 300
#define REPS 6
#define LEN 2
#define MAX_PEERS 2

static void repetition(int rep)
{
    static int bufs[MAX_PEERS][N][LEN];
    static MPI_Request reqs[MAX_PEERS * N];
    int peers = t_size - 1;
    if (t_rank == 0) {
        for (int p = 0; p < peers; p++)
            for (int tag = N - 1; tag >= 0; tag--)
                CHK(MPI_Irecv(bufs[p][tag], LEN, MPI_INT, p + 1, tag, MPI_COMM_WORLD,
                              &reqs[p * N + tag]));
    } else {
        for (int tag = 0; tag < N; tag++) {
            int out[LEN];
            fill(out, LEN, t_rank, tag, rep);
            CHK(MPI_Ssend(out, LEN, MPI_INT, 0, tag, MPI_COMM_WORLD));
        }
    }
    CHK(MPI_Barrier(MPI_COMM_WORLD));
    if (t_rank == 0) {
        CHK(MPI_Waitall(peers * N, reqs, MPI_STATUSES_IGNORE));
        for (int p = 0; p < peers; p++)
            for (int tag = 0; tag < N; tag++)
                EXPECT(bad_at(bufs[p][tag], LEN, p + 1, tag, rep) < 0,
                       "rep %d: rank %d's tag %d payload", rep, p + 1, tag);
    }
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    if (t_size - 1 > MAX_PEERS) {
        report_skip("lent_receives", "more ranks than the test has buffers for");
        return t_finish();
    }
    takeover_count takeovers;
    int judged = takeover_count_start(&takeovers);

    for (int rep = 0; rep < REPS; rep++)
        repetition(rep);
    if (judged && t_rank == 0)
        takeover_count_expect(&takeovers, "lent_receives", REPS, 2);
    report("lent_receives");
    takeover_count_stop(&takeovers);
    return t_finish();
}
