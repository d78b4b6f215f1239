/* ranks: 2 */
/* MPI_THREAD_MULTIPLE: on rank 1 a second thread waits inside MPI for a message rank 0 sends
 * last (in MPI_Recv, then MPI_Probe, then MPI_Mprobe, one repetition each), while the main
 * thread posts a long queue that rank 0 fills in reverse, a queue the default policy takes
 * over. A blocking receive or probe waiting inside MPI as the program made it must make a
 * takeover of its communicator give up (taken over, the shim could drain the message it waits
 * for): under MATCHSHIM_TAKEOVER=auto matchshim_takeovers stays 0 while it waits. Under every
 * mode each message must reach its own receive. */
#define _GNU_SOURCE
#include "common.h"
#include "takeover_count.h"
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

/* GCC 12 mistakes MPICH's MPI_STATUSES_IGNORE, a constant pointer, for a zero-sized array. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif

#define N 512
#define LEN 3
#define LAST_TAG (N + 7)
#define GO_TAG (N + 8)

enum waiter { RECV, PROBE, MPROBE, WAITERS };
static const char *const waiter_names[WAITERS] = {"MPI_Recv", "MPI_Probe", "MPI_Mprobe"};

static atomic_int waiting;
static int last[LEN], last_rc;

static void *blocked(void *arg)
{
    enum waiter how = *(enum waiter *)arg;
    int flag;
    MPI_Status st;
    MPI_Message msg;
    /* Calls on the communicator first, as a real program's receives follow others (the
     * default policy times a communicator's first few); then the call that waits. */
    for (int i = 0; i < 8 && last_rc == MPI_SUCCESS; i++)
        last_rc = MPI_Iprobe(0, LAST_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    atomic_store(&waiting, 1);
    if (last_rc != MPI_SUCCESS)
        return NULL;
    switch (how) {
    case RECV:
        last_rc = MPI_Recv(last, LEN, MPI_INT, 0, LAST_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        break;
    case PROBE:
        last_rc = MPI_Probe(0, LAST_TAG, MPI_COMM_WORLD, &st);
        if (last_rc == MPI_SUCCESS)
            last_rc = MPI_Recv(last, LEN, MPI_INT, 0, LAST_TAG, MPI_COMM_WORLD, &st);
        break;
    default:
        last_rc = MPI_Mprobe(0, LAST_TAG, MPI_COMM_WORLD, &msg, &st);
        if (last_rc == MPI_SUCCESS)
            last_rc = MPI_Mrecv(last, LEN, MPI_INT, &msg, &st);
        break;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (!t_init_multiple(&argc, &argv, "blocked_thread"))
        return t_finish();
    takeover_count takeovers;
    int judged = takeover_count_start(&takeovers);
    static int bufs[N][LEN];
    static MPI_Request reqs[N];
    int go = 0;

    for (enum waiter how = RECV; how < WAITERS; how++) {
        if (t_rank == 0) {
            CHK(MPI_Recv(&go, 1, MPI_INT, 1, GO_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            for (int tag = N - 1; tag >= 0; tag--) {
                int out[LEN];
                fill(out, LEN, 0, tag, how);
                CHK(MPI_Send(out, LEN, MPI_INT, 1, tag, MPI_COMM_WORLD));
            }
            int out[LEN];
            fill(out, LEN, 0, LAST_TAG, how);
            CHK(MPI_Send(out, LEN, MPI_INT, 1, LAST_TAG, MPI_COMM_WORLD));
            continue;
        }
        pthread_t thread;
        atomic_store(&waiting, 0);
        EXPECT(pthread_create(&thread, NULL, blocked, &how) == 0, "pthread_create");
        while (!atomic_load(&waiting))
            usleep(1000);
        usleep(100000); /* the thread is inside MPI by now */
        for (int tag = 0; tag < N; tag++)
            CHK(MPI_Irecv(bufs[tag], LEN, MPI_INT, 0, tag, MPI_COMM_WORLD, &reqs[tag]));
        unsigned long long during = judged ? takeover_count_read(&takeovers) : 0;
        CHK(MPI_Send(&go, 1, MPI_INT, 0, GO_TAG, MPI_COMM_WORLD));
        CHK(MPI_Waitall(N, reqs, MPI_STATUSES_IGNORE));
        for (int tag = 0; tag < N; tag++)
            EXPECT(bad_at(bufs[tag], LEN, 0, tag, how) < 0, "%s: tag %d's payload",
                   waiter_names[how], tag);
        pthread_join(thread, NULL);
        EXPECT(last_rc == MPI_SUCCESS, "%s: the waiting thread's calls failed: %s",
               waiter_names[how], err_str(last_rc));
        EXPECT(bad_at(last, LEN, 0, LAST_TAG, how) < 0, "%s: the waiting thread's payload",
               waiter_names[how]);
        if (judged) {
            fprintf(stderr, "blocked_thread: %llu takeovers while a thread waited in %s\n",
                    during, waiter_names[how]);
            EXPECT(during == 0, "the shim took over %llu times while a thread waited in %s",
                   during, waiter_names[how]);
        }
    }
    report("blocked_thread");
    takeover_count_stop(&takeovers);
    return t_finish();
}
