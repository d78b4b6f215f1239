/* ranks: 2 */
/* MPI_THREAD_MULTIPLE: MPI hands a freed request's handle to the next request it makes, on
 * any thread. On each rank one thread completes receives (MPI_Irecv, then MPI_Waitall over
 * the receive and a send, or MPI_Wait on each), which frees their handles inside MPI's call,
 * while another makes a persistent receive for every message (MPI_Recv_init, MPI_Start,
 * MPI_Wait, MPI_Request_free), often on a handle the first thread's call just freed. Every
 * message is numbered and checked, so a request whose handle the shim forgot or mistook for
 * another (a start MPI ran while the shim matched, a receive taken for a persistent one)
 * shows as a wrong payload or status, or a hang. */
#include "common.h"
#include <pthread.h>

#define ROUNDS 3000
#define W 4

static void *receiver(void *arg)
{
    struct ctx *c = arg;
    int in[W], out[W];
    MPI_Request r[2];
    MPI_Status st[2];
    for (int i = 0; i < ROUNDS; i++) {
        fill(out, W, t_rank, c->tag, i);
        TCHK(c, MPI_Irecv(in, W, MPI_INT, c->peer, c->tag, MPI_COMM_WORLD, &r[0]));
        TCHK(c, MPI_Isend(out, W, MPI_INT, c->peer, c->tag, MPI_COMM_WORLD, &r[1]));
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
        TCHK(c, MPI_Recv_init(in, W, MPI_INT, c->peer, c->tag, MPI_COMM_WORLD, &recv));
        TCHK(c, MPI_Isend(out, W, MPI_INT, c->peer, c->tag, MPI_COMM_WORLD, &send));
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
    struct ctx c[2] = {{.id = 0, .tag = 30, .peer = 1 - t_rank},
                       {.id = 1, .tag = 31, .peer = 1 - t_rank}};
    pthread_t th[2];
    pthread_create(&th[0], NULL, receiver, &c[0]);
    pthread_create(&th[1], NULL, persistent, &c[1]);
    for (int t = 0; t < 2; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < 2; t++)
        if (c[t].fail)
            FAILF("%s", c[t].detail);
    report("reused_handles_threads");
    return t_finish();
}
