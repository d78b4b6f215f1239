/* ranks: 3 4 */
/* Receives spread over several sources: rank 0 posts N receives per peer, newest tag first,
 * tells each peer to go, and each sends its N messages in tag order, so every message matches
 * its source's newest receive.  Repeated REPS times; every payload is checked.
 * All of them together are more than the default takeover lets MPI hold, but each source's
 * are fewer than 2·D: Open MPI keeps a posted list per source, where every search is short.
 * Under MATCHSHIM_TAKEOVER=auto on Open MPI the shim's MPI_T variable matchshim_takeovers
 * must show that it left the queues to MPI after the first takeover did not pay, rather than
 * taking them over in every repetition.  Natively, under the other takeover modes and on
 * MPICH (one list, as deep as all sources' receives together) only the payloads are checked;
 * the check lines are the same. */
#define _GNU_SOURCE
#include "common.h"
#include "takeover_count.h"

/* GCC 12 mistakes MPICH's MPI_STATUSES_IGNORE, a constant pointer, for a zero-sized array. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif

#define N 100
#define REPS 8
#define LEN 2
#define MAX_PEERS 3
#define GO_TAG 1000

static void repetition(int rep)
{
    static int bufs[MAX_PEERS][N][LEN];
    static MPI_Request reqs[MAX_PEERS * N];
    int peers = t_size - 1, go = rep;
    if (t_rank == 0) {
        for (int p = 0; p < peers; p++)
            for (int tag = N - 1; tag >= 0; tag--)
                CHK(MPI_Irecv(bufs[p][tag], LEN, MPI_INT, p + 1, tag, MPI_COMM_WORLD,
                              &reqs[p * N + tag]));
        for (int p = 0; p < peers; p++)
            CHK(MPI_Send(&go, 1, MPI_INT, p + 1, GO_TAG, MPI_COMM_WORLD));
        CHK(MPI_Waitall(peers * N, reqs, MPI_STATUSES_IGNORE));
        for (int p = 0; p < peers; p++)
            for (int tag = 0; tag < N; tag++)
                EXPECT(bad_at(bufs[p][tag], LEN, p + 1, tag, rep) < 0,
                       "rep %d: rank %d's tag %d payload", rep, p + 1, tag);
    } else {
        CHK(MPI_Recv(&go, 1, MPI_INT, 0, GO_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        EXPECT(go == rep, "rep %d: the go message says %d", rep, go);
        for (int tag = 0; tag < N; tag++) {
            int out[LEN];
            fill(out, LEN, t_rank, tag, rep);
            CHK(MPI_Send(out, LEN, MPI_INT, 0, tag, MPI_COMM_WORLD));
        }
    }
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    if (t_size - 1 > MAX_PEERS) {
        report_skip("spread_queues", "more ranks than the test has buffers for");
        return t_finish();
    }
    takeover_count takeovers = {0};
    int judged = 0;
#ifdef OPEN_MPI
    judged = takeover_count_start(&takeovers);
#endif

    for (int rep = 0; rep < REPS; rep++)
        repetition(rep);
    if (judged && t_rank == 0)
        takeover_count_expect(&takeovers, "spread_queues", REPS, 2);
    report("spread_queues");
    takeover_count_stop(&takeovers);
    return t_finish();
}
