/* ranks: 2 3 */
/* MPI_THREAD_MULTIPLE: one thread runs nonblocking collectives on communicators made by
 * MPI_Comm_idup (which the shim learns at their first use, so its private duplicate of each
 * is made by an idup of its own at the first collective it runs there), eight calls at once
 * right after each new communicator's first, then frees it; meanwhile a second thread polls a
 * receive of its own with MPI_Test, driving the shim's progress, which steps the first
 * thread's schedules and completes that idup. Each new collective must find the private
 * duplicate made or under way, never start a second idup on one rank alone (which no peer
 * joins: the free that waits for it never returns). Every result is checked. */
#include "coll_common.h"
#include <pthread.h>
#include <stdatomic.h>

#define COMMS 30
#define CALLS 8

static atomic_int t_done;

static void *collectives(void *arg)
{
    struct ctx *c = arg;
    for (int k = 0; k < COMMS && !c->fail; k++) {
        MPI_Comm comm;
        MPI_Request req[CALLS];
        MPI_Status st[CALLS];
        TCHK(c, MPI_Comm_idup(MPI_COMM_WORLD, &comm, &req[0]));
        TCHK(c, MPI_Wait(&req[0], MPI_STATUS_IGNORE));
        double in[CALLS], out[CALLS];
        for (int i = 0; i < CALLS; i++) {
            in[i] = val(k, t_rank, i);
            TCHK(c, MPI_Iallreduce(&in[i], &out[i], 1, MPI_DOUBLE, MPI_SUM, comm, &req[i]));
        }
        TCHK(c, MPI_Waitall(CALLS, req, st));
        for (int i = 0; i < CALLS; i++) {
            double want = 0;
            for (int r = 0; r < t_size; r++)
                want += val(k, r, i);
            if (out[i] != want)
                tfail(c, "communicator %d, call %d: %g, not %g", k, i, out[i], want);
        }
        TCHK(c, MPI_Comm_free(&comm));
    }
    atomic_store(&t_done, 1);
    return NULL;
}

static void *poller(void *arg)
{
    struct ctx *c = arg;
    MPI_Comm own;
    int in = 0, out = 7, flag = 0;
    MPI_Request req;
    TCHK(c, MPI_Comm_dup(MPI_COMM_SELF, &own));
    TCHK(c, MPI_Irecv(&in, 1, MPI_INT, 0, 1, own, &req));
    while (!atomic_load(&t_done) && !c->fail)
        TCHK(c, MPI_Test(&req, &flag, MPI_STATUS_IGNORE));
    TCHK(c, MPI_Send(&out, 1, MPI_INT, 0, 1, own));
    TCHK(c, MPI_Wait(&req, MPI_STATUS_IGNORE));
    if (in != 7)
        tfail(c, "the poller's own message: %d", in);
    TCHK(c, MPI_Comm_free(&own));
    return NULL;
}

int main(int argc, char **argv)
{
    if (!t_init_multiple(&argc, &argv, "coll_threads"))
        return t_finish();
    pthread_t th[2];
    struct ctx c[2] = {{.id = 0}, {.id = 1}};
    pthread_create(&th[0], NULL, collectives, &c[0]);
    pthread_create(&th[1], NULL, poller, &c[1]);
    for (int t = 0; t < 2; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < 2; t++)
        if (c[t].fail)
            FAILF("thread %d: %s", t, c[t].detail);
    report("coll_threads");
    return t_finish();
}
