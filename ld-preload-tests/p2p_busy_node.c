/* ranks: 2 */
/* Takeover decisions that a busy node cannot change.  A thread of each rank spins beside it
 * for the whole run (a CPU hog on the job's own cores, so MPI calls are preempted at random)
 * while rank 1 takes long queues from rank 0, each kind on a communicator of its own, several
 * times: posted receives matched in reverse and in order, unexpected messages received in
 * reverse and in order.  Every payload is checked.  Under MATCHSHIM_TAKEOVER=auto the shim's
 * own counters (its MPI_T variables matchshim_matches and matchshim_takeovers) must also show
 * the decisions a quiet node gets: the shim matches most of the reversed queues, and gives
 * the in-order ones back to MPI after few takeovers, having matched a small share of them.
 * Natively and under the other takeover modes only the payloads are checked; the check lines
 * are the same. */
#define _GNU_SOURCE
#include "common.h"
#include <dlfcn.h>
#include <pthread.h>

/* GCC 12 mistakes MPICH's MPI_STATUSES_IGNORE, a constant pointer, for a zero-sized array. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif

#define N 1024
#define REPS 6
#define LEN 2

enum { POSTED_REVERSE, POSTED_INORDER, UNEXPECTED_REVERSE, UNEXPECTED_INORDER, NKINDS };
static const char *const kinds[NKINDS] = {"posted_reverse", "posted_inorder",
                                          "unexpected_reverse", "unexpected_inorder"};

static volatile int spinning = 1;
static volatile unsigned long spins;

static void *hog(void *arg)
{
    (void)arg;
    while (spinning)
        spins++;
    return NULL;
}

/* The shim's counters of one communicator, read through MPI_T (judged: under auto only). */
static int judged;
static MPI_T_pvar_session session;
static MPI_T_pvar_handle matches_of[NKINDS], takeovers_of[NKINDS];

static int pvar_index(const char *name)
{
    int index = -1;
    CHK(MPI_T_pvar_get_index(name, MPI_T_PVAR_CLASS_COUNTER, &index));
    return index;
}

static unsigned long long read_counter(MPI_T_pvar_handle handle)
{
    unsigned long long value = 0;
    CHK(MPI_T_pvar_read(session, handle, &value));
    return value;
}

/* One repetition of `kind` on `comm`: rank 0 sends tags 0..N-1, rank 1 receives them in the
 * order the kind says, before (posted) or after (unexpected) they are sent. */
static void repetition(int kind, MPI_Comm comm, int rep)
{
    static int bufs[N][LEN];
    static MPI_Request reqs[N];
    int reverse = kind == POSTED_REVERSE || kind == UNEXPECTED_REVERSE;
    int posted = kind == POSTED_REVERSE || kind == POSTED_INORDER;
    if (t_rank == 1 && posted)
        for (int tag = 0; tag < N; tag++)
            CHK(MPI_Irecv(bufs[tag], LEN, MPI_INT, 0, tag, comm, &reqs[tag]));
    if (t_rank == 0 && !posted)
        for (int tag = 0; tag < N; tag++) {
            int out[LEN];
            fill(out, LEN, 0, tag, rep);
            CHK(MPI_Send(out, LEN, MPI_INT, 1, tag, comm));
        }
    CHK(MPI_Barrier(comm));
    if (t_rank == 0 && posted)
        for (int i = 0; i < N; i++) {
            int tag = reverse ? N - 1 - i : i, out[LEN];
            fill(out, LEN, 0, tag, rep);
            CHK(MPI_Send(out, LEN, MPI_INT, 1, tag, comm));
        }
    if (t_rank == 1 && posted)
        CHK(MPI_Waitall(N, reqs, MPI_STATUSES_IGNORE));
    if (t_rank == 1 && !posted)
        for (int i = 0; i < N; i++) {
            int tag = reverse ? N - 1 - i : i;
            CHK(MPI_Recv(bufs[tag], LEN, MPI_INT, 0, tag, comm, MPI_STATUS_IGNORE));
        }
    if (t_rank == 1)
        for (int tag = 0; tag < N; tag++)
            EXPECT(bad_at(bufs[tag], LEN, 0, tag, rep) < 0, "%s rep %d: tag %d's payload",
                   kinds[kind], rep, tag);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    pthread_t thread;
    pthread_create(&thread, NULL, hog, NULL);

    const char *mode = getenv("MATCHSHIM_TAKEOVER");
    judged = dlsym(RTLD_DEFAULT, "matchshim_engine") != NULL
             && (mode == NULL || strcmp(mode, "auto") == 0);
    MPI_Comm comms[NKINDS];
    for (int k = 0; k < NKINDS; k++)
        CHK(MPI_Comm_dup(MPI_COMM_WORLD, &comms[k]));
    if (judged) {
        int provided;
        CHK(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
        CHK(MPI_T_pvar_session_create(&session));
        int matches = pvar_index("matchshim_matches");
        int takeovers = pvar_index("matchshim_takeovers");
        for (int k = 0; k < NKINDS; k++) {
            int count;
            CHK(MPI_T_pvar_handle_alloc(session, matches, &comms[k], &matches_of[k], &count));
            CHK(MPI_T_pvar_handle_alloc(session, takeovers, &comms[k], &takeovers_of[k],
                                        &count));
        }
    }

    for (int k = 0; k < NKINDS; k++) {
        for (int rep = 0; rep < REPS; rep++)
            repetition(k, comms[k], rep);
        if (judged && t_rank == 1) {
            unsigned long long matched = read_counter(matches_of[k]);
            unsigned long long takeovers = read_counter(takeovers_of[k]);
            fprintf(stderr, "%s: the shim matched %llu of %d receives in %llu takeovers\n",
                    kinds[k], matched, REPS * N, takeovers);
            if (k == POSTED_REVERSE || k == UNEXPECTED_REVERSE)
                EXPECT(matched >= REPS * N / 2, "%s: the shim matched %llu of %d receives",
                       kinds[k], matched, REPS * N);
            else
                EXPECT(matched <= REPS * N / 4 && takeovers <= 3,
                       "%s: the shim matched %llu of %d receives in %llu takeovers", kinds[k],
                       matched, REPS * N, takeovers);
        }
        report(kinds[k]);
    }

    spinning = 0;
    pthread_join(thread, NULL);
    if (judged) {
        for (int k = 0; k < NKINDS; k++) {
            CHK(MPI_T_pvar_handle_free(session, &matches_of[k]));
            CHK(MPI_T_pvar_handle_free(session, &takeovers_of[k]));
        }
        CHK(MPI_T_pvar_session_free(&session));
        CHK(MPI_T_finalize());
    }
    for (int k = 0; k < NKINDS; k++)
        CHK(MPI_Comm_free(&comms[k]));
    return t_finish();
}
