/* ranks: 2 */
/* MPI_THREAD_MULTIPLE: MPI hands a freed request's handle to the next request it makes, on
 * any thread. On each rank two threads complete receives (MPI_Irecv, then MPI_Waitall over
 * the receive and a send, or MPI_Wait on each), one on MPI_COMM_WORLD and one on a duplicate,
 * which frees their handles inside MPI's call, while a third makes a persistent receive for
 * every message (MPI_Recv_init, MPI_Start, MPI_Wait, MPI_Request_free), often on a handle
 * another thread's call just freed. Every message is numbered and checked, so a request whose
 * handle the shim forgot or mistook for another (a start MPI ran while the shim matched, a
 * receive taken for a persistent one) shows as a wrong payload or status, or a hang. Once all
 * completed, the shim's count of receives MPI holds (MPI_T `matchshim_receives_in_mpi`) is 0
 * on both communicators: a followed receive whose handle went to another thread's request
 * before its completion was booked is counted out once, on its own communicator. */
#include "common.h"
#include <pthread.h>

#define ROUNDS 3000
#define W 4

static MPI_Comm comms[3]; /* each thread's, by its id */

static void *receiver(void *arg)
{
    struct ctx *c = arg;
    int in[W], out[W];
    MPI_Request r[2];
    MPI_Status st[2];
    for (int i = 0; i < ROUNDS; i++) {
        fill(out, W, t_rank, c->tag, i);
        TCHK(c, MPI_Irecv(in, W, MPI_INT, c->peer, c->tag, comms[c->id], &r[0]));
        TCHK(c, MPI_Isend(out, W, MPI_INT, c->peer, c->tag, comms[c->id], &r[1]));
        if (i % 2) {
            TCHK(c, MPI_Waitall(2, r, st));
        } else {
            TCHK(c, MPI_Wait(&r[0], &st[0]));
            TCHK(c, MPI_Wait(&r[1], &st[1]));
        }
        int bi = bad_at(in, W, c->peer, c->tag, i);
        if (bi >= 0)
            tfail(c, "receiving thread: message %d: payload wrong at [%d]", i, bi);
        if (st[0].MPI_SOURCE != c->peer || st[0].MPI_TAG != c->tag)
            tfail(c, "receiving thread: message %d: status source %d tag %d", i,
                  st[0].MPI_SOURCE, st[0].MPI_TAG);
    }
    return NULL;
}

static void *persistent(void *arg)
{
    struct ctx *c = arg;
    int in[W], out[W];
    MPI_Request recv, send;
    MPI_Status st;
    for (int i = 0; i < ROUNDS; i++) {
        fill(out, W, t_rank, c->tag, i);
        TCHK(c, MPI_Recv_init(in, W, MPI_INT, c->peer, c->tag, comms[c->id], &recv));
        TCHK(c, MPI_Isend(out, W, MPI_INT, c->peer, c->tag, comms[c->id], &send));
        TCHK(c, MPI_Start(&recv));
        TCHK(c, MPI_Wait(&recv, &st));
        TCHK(c, MPI_Wait(&send, MPI_STATUS_IGNORE));
        TCHK(c, MPI_Request_free(&recv));
        int bi = bad_at(in, W, c->peer, c->tag, i);
        if (bi >= 0)
            tfail(c, "persistent thread: message %d: payload wrong at [%d]", i, bi);
        if (st.MPI_SOURCE != c->peer || st.MPI_TAG != c->tag)
            tfail(c, "persistent thread: message %d: status source %d tag %d", i, st.MPI_SOURCE,
                  st.MPI_TAG);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (!t_init_multiple(&argc, &argv, "reused_handles_threads"))
        return t_finish();
    comms[0] = comms[2] = MPI_COMM_WORLD;
    CHK(MPI_Comm_dup(MPI_COMM_WORLD, &comms[1]));
    struct ctx c[3] = {{.id = 0, .tag = 30, .peer = 1 - t_rank},
                       {.id = 1, .tag = 30, .peer = 1 - t_rank},
                       {.id = 2, .tag = 31, .peer = 1 - t_rank}};
    void *(*const body[3])(void *) = {receiver, receiver, persistent};
    pthread_t th[3];
    for (int t = 0; t < 3; t++)
        pthread_create(&th[t], NULL, body[t], &c[t]);
    for (int t = 0; t < 3; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < 3; t++)
        if (c[t].fail)
            FAILF("%s", c[t].detail);
    for (int k = 0; k < 2; k++) {
        unsigned long long held;
        if (shim_pvar(comms[k], "matchshim_receives_in_mpi", MPI_T_PVAR_CLASS_LEVEL, &held))
            EXPECT(held == 0, "the shim counts %llu receives in MPI on %s after all completed",
                   held, k ? "the duplicate" : "MPI_COMM_WORLD");
    }
    if (t_mpit_initialised)
        CHK(MPI_T_finalize());
    CHK(MPI_Comm_free(&comms[1]));
    report("reused_handles_threads");
    return t_finish();
}
