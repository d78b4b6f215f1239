/* ranks: 2 */
/* MPI_THREAD_MULTIPLE: four threads per rank, each with three persistent receives and a
 * persistent send of its own tag (twelve receives a rank, more than the shim indexes without
 * its table's lock), exchange numbered messages with the peer's thread of the same tag. Each
 * round starts one receive and the send together, completes them by MPI_Waitall, by MPI_Wait
 * on each or by polling MPI_Testall, and checks payload and status; every few rounds a thread
 * frees its requests and makes new ones, so freed handles and index slots are reused while
 * other threads start and complete theirs. Under flip:N matching switches between MPI and
 * the shim while the threads run. */
#include "common.h"
#include <pthread.h>

#define NT 4
#define RECVS 3
#define ROUNDS 240
#define REMAKE 40
#define W 4

static void make(struct ctx *c, int in[RECVS][W], int *out, MPI_Request *recv, MPI_Request *send)
{
    for (int k = 0; k < RECVS; k++)
        TCHK(c, MPI_Recv_init(in[k], W, MPI_INT, c->peer, c->tag, MPI_COMM_WORLD, &recv[k]));
    TCHK(c, MPI_Send_init(out, W, MPI_INT, c->peer, c->tag, MPI_COMM_WORLD, send));
}

static void unmake(struct ctx *c, MPI_Request *recv, MPI_Request *send)
{
    for (int k = 0; k < RECVS; k++)
        TCHK(c, MPI_Request_free(&recv[k]));
    TCHK(c, MPI_Request_free(send));
    if (*send != MPI_REQUEST_NULL || recv[0] != MPI_REQUEST_NULL)
        tfail(c, "thread %d: Request_free left a handle", c->id);
}

static void *worker(void *arg)
{
    struct ctx *c = arg;
    int in[RECVS][W], out[W];
    MPI_Request recv[RECVS], send, r[2];
    MPI_Status st[2];
    make(c, in, out, recv, &send);
    for (int i = 0; i < ROUNDS; i++) {
        if (i > 0 && i % REMAKE == 0) {
            unmake(c, recv, &send);
            make(c, in, out, recv, &send);
        }
        int k = i % RECVS;
        fill(out, W, t_rank, c->tag, i);
        r[0] = recv[k];
        r[1] = send;
        TCHK(c, MPI_Startall(2, r));
        switch (i % 3) {
        case 0:
            TCHK(c, MPI_Waitall(2, r, st));
            break;
        case 1:
            TCHK(c, MPI_Wait(&r[0], &st[0]));
            TCHK(c, MPI_Wait(&r[1], &st[1]));
            break;
        default:
            for (int done = 0; !done;)
                TCHK(c, MPI_Testall(2, r, &done, st));
        }
        if (r[0] != recv[k] || r[1] != send)
            tfail(c, "thread %d: round %d: a completion changed a persistent handle", c->id, i);
        int bi = bad_at(in[k], W, c->peer, c->tag, i);
        if (bi >= 0)
            tfail(c, "thread %d: round %d: payload wrong at [%d]", c->id, i, bi);
        if (st[0].MPI_SOURCE != c->peer || st[0].MPI_TAG != c->tag)
            tfail(c, "thread %d: round %d: status source %d tag %d", c->id, i, st[0].MPI_SOURCE,
                  st[0].MPI_TAG);
    }
    unmake(c, recv, &send);
    return NULL;
}

int main(int argc, char **argv)
{
    if (!t_init_multiple(&argc, &argv, "persistent_threads"))
        return t_finish();
    if (t_rank < 2) {
        pthread_t th[NT];
        struct ctx c[NT];
        for (int t = 0; t < NT; t++) {
            c[t] = (struct ctx){.id = t, .tag = 20 + t, .peer = 1 - t_rank};
            pthread_create(&th[t], NULL, worker, &c[t]);
        }
        for (int t = 0; t < NT; t++)
            pthread_join(th[t], NULL);
        for (int t = 0; t < NT; t++)
            if (c[t].fail)
                FAILF("%s", c[t].detail);
    }
    report("persistent_threads");
    return t_finish();
}
