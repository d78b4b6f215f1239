/* ranks: 2 */
/* MPI_THREAD_MULTIPLE: five threads per rank exchange messages with the
 * peer at the same time, each on its own tag, using blocking calls,
 * ANY_SOURCE receives with Waitall, Iprobe/Improbe, chunked Waitall and
 * persistent requests restarted (completed by Waitall or by Wait), while
 * MPI_COMM_WORLD has an error handler of the program's, which must still be its
 * handler afterwards; then all threads of one rank receive with wildcards on
 * one communicator. */
#include "common.h"
#include <pthread.h>

#define NT 5
#define MSGS 200
#define W 5

/* Checks message seq from the peer; statuses with real source and tag. */
static void tcheck(struct ctx *c, const int *b, int seq, MPI_Status *st)
{
    int bi = bad_at(b, W, c->peer, c->tag, seq);
    if (bi >= 0)
        tfail(c, "thread %d: message %d wrong (seq in payload %d)", c->id, seq,
              (b[0] ^ pat(c->peer, c->tag, 0, 0)) / 131);
    if (st && (st->MPI_SOURCE != c->peer || st->MPI_TAG != c->tag))
        tfail(c, "thread %d: message %d status source %d tag %d", c->id, seq,
              st->MPI_SOURCE, st->MPI_TAG);
}

/* Blocking ping-pong. */
static void blocking(struct ctx *c)
{
    int out[W], in[W];
    MPI_Status st;
    for (int i = 0; i < MSGS; i++) {
        fill(out, W, t_rank, c->tag, i);
        if (t_rank == 0) {
            TCHK(c, MPI_Send(out, W, MPI_INT, c->peer, c->tag, MPI_COMM_WORLD));
            TCHK(c, MPI_Recv(in, W, MPI_INT, c->peer, c->tag, MPI_COMM_WORLD, &st));
        } else {
            TCHK(c, MPI_Recv(in, W, MPI_INT, c->peer, c->tag, MPI_COMM_WORLD, &st));
            TCHK(c, MPI_Send(out, W, MPI_INT, c->peer, c->tag, MPI_COMM_WORLD));
        }
        tcheck(c, in, i, &st);
    }
}

/* All messages at once: ANY_SOURCE Irecvs and Isends, one Waitall. */
static void bulk_any_source(struct ctx *c)
{
    int (*out)[W] = malloc(sizeof(int[W]) * MSGS), (*in)[W] = malloc(sizeof(int[W]) * MSGS);
    MPI_Request *r = malloc(sizeof(MPI_Request) * 2 * MSGS);
    MPI_Status *st = malloc(sizeof(MPI_Status) * 2 * MSGS);
    for (int i = 0; i < MSGS; i++) {
        TCHK(c, MPI_Irecv(in[i], W, MPI_INT, MPI_ANY_SOURCE, c->tag, MPI_COMM_WORLD, &r[i]));
        fill(out[i], W, t_rank, c->tag, i);
    }
    for (int i = 0; i < MSGS; i++)
        TCHK(c, MPI_Isend(out[i], W, MPI_INT, c->peer, c->tag, MPI_COMM_WORLD, &r[MSGS + i]));
    TCHK(c, MPI_Waitall(2 * MSGS, r, st));
    for (int i = 0; i < MSGS; i++)
        tcheck(c, in[i], i, &st[i]);
    free(out);
    free(in);
    free(r);
    free(st);
}

/* Sends everything nonblocking, receives by polling Iprobe (even) or
 * Improbe (odd) with ANY_SOURCE. */
static void probing(struct ctx *c)
{
    int (*out)[W] = malloc(sizeof(int[W]) * MSGS);
    MPI_Request *r = malloc(sizeof(MPI_Request) * MSGS);
    for (int i = 0; i < MSGS; i++) {
        fill(out[i], W, t_rank, c->tag, i);
        TCHK(c, MPI_Isend(out[i], W, MPI_INT, c->peer, c->tag, MPI_COMM_WORLD, &r[i]));
    }
    double t0 = MPI_Wtime();
    for (int i = 0; i < MSGS && !c->fail; i++) {
        int in[W], flag = 0;
        MPI_Status st;
        MPI_Message m;
        while (!flag && MPI_Wtime() - t0 < 20) {
            if (i % 2 == 0)
                TCHK(c, MPI_Iprobe(MPI_ANY_SOURCE, c->tag, MPI_COMM_WORLD, &flag, &st));
            else
                TCHK(c, MPI_Improbe(MPI_ANY_SOURCE, c->tag, MPI_COMM_WORLD, &flag, &m, &st));
        }
        if (!flag) {
            tfail(c, "thread %d: message %d never probed", c->id, i);
            break;
        }
        int n = -1;
        MPI_Get_count(&st, MPI_INT, &n);
        if (n != W || st.MPI_SOURCE != c->peer || st.MPI_TAG != c->tag)
            tfail(c, "thread %d: probe of %d: source %d tag %d count %d", c->id, i,
                  st.MPI_SOURCE, st.MPI_TAG, n);
        if (i % 2 == 0)
            TCHK(c, MPI_Recv(in, W, MPI_INT, st.MPI_SOURCE, c->tag, MPI_COMM_WORLD, &st));
        else
            TCHK(c, MPI_Mrecv(in, W, MPI_INT, &m, &st));
        tcheck(c, in, i, &st);
    }
    TCHK(c, MPI_Waitall(MSGS, r, MPI_STATUSES_IGNORE));
    free(out);
    free(r);
}

/* Rounds of 20 receives (half ANY_SOURCE) and 20 sends, one Waitall each. */
static void chunked(struct ctx *c)
{
    enum { K = 20 };
    int out[K][W], in[K][W];
    MPI_Request r[2 * K];
    MPI_Status st[2 * K];
    for (int base = 0; base < MSGS; base += K) {
        for (int i = 0; i < K; i++) {
            TCHK(c, MPI_Irecv(in[i], W, MPI_INT, i % 2 ? MPI_ANY_SOURCE : c->peer, c->tag,
                              MPI_COMM_WORLD, &r[i]));
            fill(out[i], W, t_rank, c->tag, base + i);
            TCHK(c, MPI_Isend(out[i], W, MPI_INT, c->peer, c->tag, MPI_COMM_WORLD, &r[K + i]));
        }
        TCHK(c, MPI_Waitall(2 * K, r, st));
        for (int i = 0; i < K; i++)
            tcheck(c, in[i], base + i, &st[i]);
    }
}

/* A persistent receive and send, started together and completed by MPI_Waitall or, every
 * other message, by MPI_Wait on each. */
static void persistent(struct ctx *c)
{
    int out[W], in[W];
    MPI_Request r[2];
    MPI_Status st[2];
    TCHK(c, MPI_Recv_init(in, W, MPI_INT, c->peer, c->tag, MPI_COMM_WORLD, &r[0]));
    TCHK(c, MPI_Send_init(out, W, MPI_INT, c->peer, c->tag, MPI_COMM_WORLD, &r[1]));
    for (int i = 0; i < MSGS; i++) {
        fill(out, W, t_rank, c->tag, i);
        TCHK(c, MPI_Startall(2, r));
        if (i % 2) {
            TCHK(c, MPI_Wait(&r[0], &st[0]));
            TCHK(c, MPI_Wait(&r[1], &st[1]));
        } else {
            TCHK(c, MPI_Waitall(2, r, st));
        }
        tcheck(c, in, i, &st[0]);
    }
    TCHK(c, MPI_Request_free(&r[0]));
    TCHK(c, MPI_Request_free(&r[1]));
}

static void *worker(void *arg)
{
    struct ctx *c = arg;
    switch (c->id) {
    case 0: blocking(c); break;
    case 1: bulk_any_source(c); break;
    case 2: probing(c); break;
    case 3: chunked(c); break;
    case 4: persistent(c); break;
    }
    return NULL;
}

/* Threads racing on one communicator: every thread of rank 0 receives with MPI_ANY_SOURCE
 * and MPI_ANY_TAG (Irecv+Wait, or Improbe+Mrecv polled) from rank 1, which sends SHARED
 * numbered messages in order. Receives of different threads have no order among them, but
 * each thread's own receives are posted in order, so the numbers one thread gets rise; none
 * is lost or received twice. Under flip:N matching switches between MPI and the shim while
 * the threads race. */
#define SHARED (NT * 150)
static MPI_Comm shared_comm;
static int shared_got[NT][SHARED];
static int shared_count[NT];

static void *shared_receiver(void *arg)
{
    struct ctx *c = arg;
    int prev = -1, in[W];
    for (int k = 0; k < SHARED / NT; k++) {
        MPI_Status st;
        if ((k + c->id) % 2 == 0) {
            MPI_Request r;
            TCHK(c, MPI_Irecv(in, W, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, shared_comm, &r));
            TCHK(c, MPI_Wait(&r, &st));
        } else {
            int flag = 0;
            MPI_Message m;
            while (!flag)
                TCHK(c, MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, shared_comm, &flag, &m, &st));
            TCHK(c, MPI_Mrecv(in, W, MPI_INT, &m, &st));
        }
        int seq = in[0];
        if (st.MPI_SOURCE != 1 || st.MPI_TAG != seq % 3 || seq < 0 || seq >= SHARED)
            tfail(c, "thread %d: message %d from %d tag %d", c->id, seq, st.MPI_SOURCE,
                  st.MPI_TAG);
        else if (seq <= prev)
            tfail(c, "thread %d: message %d after %d", c->id, seq, prev);
        else
            shared_got[c->id][shared_count[c->id]++] = seq;
        prev = seq;
    }
    return NULL;
}

static void shared_wildcards(void)
{
    MPI_Comm_dup(MPI_COMM_WORLD, &shared_comm);
    if (t_rank == 1) {
        for (int i = 0; i < SHARED; i++) {
            int out[W] = {i};
            MPI_Send(out, W, MPI_INT, 0, i % 3, shared_comm);
        }
    } else if (t_rank == 0) {
        pthread_t th[NT];
        struct ctx c[NT];
        for (int t = 0; t < NT; t++) {
            c[t] = (struct ctx){.id = t, .peer = 1};
            pthread_create(&th[t], NULL, shared_receiver, &c[t]);
        }
        for (int t = 0; t < NT; t++)
            pthread_join(th[t], NULL);
        static int seen[SHARED];
        for (int t = 0; t < NT; t++) {
            if (c[t].fail)
                FAILF("%s", c[t].detail);
            for (int i = 0; i < shared_count[t]; i++)
                seen[shared_got[t][i]]++;
        }
        for (int i = 0; i < SHARED; i++)
            EXPECT(seen[i] == 1, "message %d received %d times", i, seen[i]);
    }
    MPI_Comm_free(&shared_comm);
    report("threads_shared_wildcards_in_order");
}

/* The program's handler on MPI_COMM_WORLD while the threads run. */
static int errors_raised;
static void count_errors(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    (void)code;
    errors_raised++;
}

static const char *names[NT] = {"threads_blocking", "threads_any_source_waitall",
                                "threads_iprobe_improbe", "threads_chunked_waitall",
                                "threads_persistent"};

int main(int argc, char **argv)
{
    int provided = -1;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    t_setup();
    /* all ranks must agree, or the exchange below would deadlock */
    int all_multiple = provided == MPI_THREAD_MULTIPLE, both;
    MPI_Allreduce(&all_multiple, &both, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    int qp = -1;
    MPI_Query_thread(&qp);
    EXPECT(qp == provided, "MPI_Query_thread %d, MPI_Init_thread provided %d", qp, provided);
    report("query_thread_matches_provided");
    if (!both || t_size < 2) {
        for (int t = 0; t < NT; t++)
            report_skip(names[t], "MPI_THREAD_MULTIPLE not provided");
        return t_finish();
    }
    if (t_rank < 2) {
        MPI_Errhandler mine, after;
        MPI_Comm_create_errhandler(count_errors, &mine);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, mine);
        pthread_t th[NT];
        struct ctx c[NT];
        for (int t = 0; t < NT; t++) {
            c[t] = (struct ctx){.id = t, .tag = 10 + t, .peer = 1 - t_rank};
            pthread_create(&th[t], NULL, worker, &c[t]);
        }
        for (int t = 0; t < NT; t++)
            pthread_join(th[t], NULL);
        MPI_Comm_get_errhandler(MPI_COMM_WORLD, &after);
        EXPECT(after == mine, "MPI_COMM_WORLD's error handler is no longer the program's");
        EXPECT(errors_raised == 0, "%d errors raised on MPI_COMM_WORLD", errors_raised);
        MPI_Errhandler_free(&after);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Errhandler_free(&mine);
        for (int t = 0; t < NT; t++) {
            if (c[t].fail)
                FAILF("%s", c[t].detail);
            report(names[t]);
        }
    } else {
        for (int t = 0; t < NT; t++)
            report(names[t]);
    }
    shared_wildcards();
    return t_finish();
}
