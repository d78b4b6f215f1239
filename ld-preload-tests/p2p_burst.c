/* ranks: 2 3 */
/* bursts: 128 */
/* Many messages that wait in MPI together while receives are posted: rank 0
 * posts every receive first, the senders send everything, and only then does
 * rank 0 complete its receives, so a shim that matches drains them all at
 * once.  Each receive must get the message one ordered list gives it, whatever
 * the order of posting, with tags, sources and wildcards mixed.  (The ranks
 * meet with libmpi's own barrier, which the shim does not see.) */
#include "common.h"
#include <dlfcn.h>

#define N 512                   /* messages per check */
#define W 4                     /* ints per message */

/* Rank 0's receive i: its source and tag (MPI_ANY_* allowed). */
typedef struct {
    int source, tag;
} want_t;

/* MPI_Barrier as libmpi itself defines it, looked up in libmpi: the shim exports the profiling
 * names too, and a barrier through it would progress and drain the messages one by one. */
static int mpi_own_barrier(MPI_Comm comm)
{
    static int (*barrier)(MPI_Comm);
    if (!barrier) {
#ifdef MPICH_VERSION
        void *lib = dlopen("libmpich.so.12", RTLD_LAZY | RTLD_NOLOAD);
#else
        void *lib = dlopen("libmpi.so.40", RTLD_LAZY | RTLD_NOLOAD);
#endif
        barrier = lib ? (int (*)(MPI_Comm))dlsym(lib, "PMPI_Barrier") : NULL;
        if (!barrier)
            barrier = PMPI_Barrier;
    }
    return barrier(comm);
}

/* Sender rank `s` sends `count` messages in this order; message k has tag tags[k]. */
static void send_all(const int *tags, int count)
{
    int (*out)[W] = malloc(sizeof(int[W]) * (size_t)count);
    MPI_Request *r = malloc(sizeof(MPI_Request) * (size_t)count);
    for (int k = 0; k < count; k++) {
        fill(out[k], W, t_rank, tags[k], k);
        CHK(MPI_Isend(out[k], W, MPI_INT, 0, tags[k], MPI_COMM_WORLD, &r[k]));
    }
    CHK(MPI_Waitall(count, r, MPI_STATUSES_IGNORE));
    free(r);
    free(out);
}

/* Which receive each message takes in one ordered list: the earliest one not yet
 * taken that it fits, messages of a source in send order.  Only one sender sends
 * when wildcards are posted, so the arrival order is the send order. */
static void expected_receives(const want_t *want, int nwant, int source, const int *tags,
                              int count, int *taker)
{
    char *taken = calloc((size_t)nwant, 1);
    for (int k = 0; k < count; k++) {
        taker[k] = -1;
        for (int i = 0; i < nwant; i++) {
            int fits = (want[i].source == MPI_ANY_SOURCE || want[i].source == source) &&
                       (want[i].tag == MPI_ANY_TAG || want[i].tag == tags[k]);
            if (!taken[i] && fits) {
                taken[i] = 1;
                taker[k] = i;
                break;
            }
        }
    }
    free(taken);
}

/* Rank 0 posts `want`, then the senders send (sender s: the messages with
 * sender[k] == s, in order), then rank 0 completes; every receive must hold the
 * message `taker` gives it. */
static void run(const char *name, const want_t *want, const int *sender, const int *tags,
                const int *seq, const int *taker)
{
    int (*in)[W] = NULL;
    MPI_Request *r = NULL;
    MPI_Status *st = NULL;
    if (t_rank == 0) {
        in = calloc(N, sizeof(int[W]));
        r = malloc(sizeof(MPI_Request) * N);
        st = malloc(sizeof(MPI_Status) * N);
        for (int i = 0; i < N; i++)
            CHK(MPI_Irecv(in[i], W, MPI_INT, want[i].source, want[i].tag, MPI_COMM_WORLD,
                          &r[i]));
    }
    mpi_own_barrier(MPI_COMM_WORLD);
    if (t_rank > 0) {
        int *mine = malloc(sizeof(int) * N), count = 0;
        for (int k = 0; k < N; k++)
            if (sender[k] == t_rank)
                mine[count++] = tags[k];
        send_all(mine, count);
        free(mine);
    }
    /* Everything sent is now waiting inside rank 0's MPI. */
    mpi_own_barrier(MPI_COMM_WORLD);
    if (t_rank == 0) {
        CHK(MPI_Waitall(N, r, st));
        for (int k = 0; k < N; k++) {
            int i = taker[k];
            if (i < 0) {
                FAILF("message %d has no receive (test error)", k);
                break;
            }
            int bi = bad_at(in[i], W, sender[k], tags[k], seq[k]);
            EXPECT(bi < 0, "receive %d (source %d tag %d) did not get message %d from %d "
                   "tag %d", i, want[i].source, want[i].tag, k, sender[k], tags[k]);
            EXPECT(st[i].MPI_SOURCE == sender[k] && st[i].MPI_TAG == tags[k],
                   "receive %d: status %d/%d, expected %d/%d", i, st[i].MPI_SOURCE,
                   st[i].MPI_TAG, sender[k], tags[k]);
            if (t_fail)
                break;
        }
        free(st);
        free(r);
        free(in);
    }
    report(name);
}

/* Sender of message k (round robin over the senders) and its place among that sender's. */
static void round_robin(int *sender, int *seq)
{
    int peers = t_size - 1, per[64] = {0};
    for (int k = 0; k < N; k++) {
        sender[k] = 1 + k % peers;
        seq[k] = per[sender[k]]++;
    }
}

/* Distinct tags, receives posted in reverse: each message finds its receive deep in the queue. */
static void t_reverse(void)
{
    want_t want[N];
    int sender[N], tags[N], seq[N], taker[N];
    round_robin(sender, seq);
    for (int k = 0; k < N; k++) {
        tags[k] = k;
        want[N - 1 - k] = (want_t){sender[k], k};
        taker[k] = N - 1 - k;
    }
    run("burst_reverse", want, sender, tags, seq, taker);
}

/* One tag from every sender: each sender's messages go to its receives in order. */
static void t_same_tag(void)
{
    want_t want[N];
    int sender[N], tags[N], seq[N], taker[N], next[64] = {0};
    round_robin(sender, seq);
    /* Receives name their source, posted sender by sender. */
    int i = 0, peers = t_size - 1;
    int first[64];
    for (int s = 1; s <= peers; s++) {
        first[s] = i;
        for (int k = 0; k < N; k++)
            if (sender[k] == s)
                want[i++] = (want_t){s, 7};
    }
    for (int k = 0; k < N; k++) {
        tags[k] = 7;
        taker[k] = first[sender[k]] + next[sender[k]]++;
    }
    run("burst_same_tag", want, sender, tags, seq, taker);
}

/* One sender, a few tags, and every fifth receive a wildcard: who gets what is the
 * ordered list's choice. */
static void t_wildcards(void)
{
    want_t want[N];
    int sender[N], tags[N], seq[N], taker[N];
    for (int k = 0; k < N; k++) {
        sender[k] = 1;
        seq[k] = k;
        tags[k] = (k * 7) % 5;
    }
    /* Every message has a receive: each tag's receives as many as its messages. */
    int count[5] = {0};
    for (int k = 0; k < N; k++)
        count[tags[k]]++;
    for (int i = 0; i < N; i++) {
        int tag = (i * 3) % 5;
        while (count[tag] == 0)
            tag = (tag + 1) % 5;
        count[tag]--;
        want[i] = (want_t){1, tag};
        if (i % 5 == 4)
            want[i].tag = MPI_ANY_TAG;
        if (i % 10 == 9)
            want[i].source = MPI_ANY_SOURCE;
    }
    expected_receives(want, N, 1, tags, N, taker);
    run("burst_wildcards", want, sender, tags, seq, taker);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    if (t_size > 64) {
        report_skip("burst", "more than 64 ranks");
        return t_finish();
    }
    t_reverse();
    t_same_tag();
    t_wildcards();
    return t_finish();
}
