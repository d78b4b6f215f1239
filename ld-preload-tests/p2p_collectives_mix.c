/* ranks: 2 3 */
/* Point-to-point operations left pending across collectives: a rank may
 * enter a collective with receives or sends outstanding while others have
 * none, and messages may arrive while it is inside the collective. */
#include "common.h"

#define N 8

/* Rank 1 enters the collective with a pending receive, the others with
 * nothing pending; the message is sent after the collective. */
static void one_sided_pending(int coll, const char *name)
{
    int b[N], x = t_rank, sum = 0;
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_Status st;
    if (t_rank == 1)
        CHK(MPI_Irecv(b, N, MPI_INT, MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, &r));
    switch (coll) {
    case 0: CHK(MPI_Barrier(MPI_COMM_WORLD)); break;
    case 1: CHK(MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD)); break;
    case 2: CHK(MPI_Bcast(&x, 1, MPI_INT, 0, MPI_COMM_WORLD)); break;
    }
    if (t_rank == 0) {
        fill(b, N, 0, 3, 0);
        CHK(MPI_Send(b, N, MPI_INT, 1, 3, MPI_COMM_WORLD));
    } else if (t_rank == 1) {
        CHK(MPI_Wait(&r, &st));
        EXPECT_MSG(b, N, 0, 3, 0, st);
    }
    if (coll == 1)
        EXPECT(sum == t_size * (t_size - 1) / 2, "Allreduce sum %d", sum);
    report(name);
}

/* Messages (eager and rendezvous sized) sent before a barrier are received
 * after it; the sender's Isends stay pending across the barrier. */
static void sent_before_barrier(int n, const char *name)
{
    int *b = malloc(sizeof(int) * (size_t)n);
    MPI_Status st;
    MPI_Request r;
    if (t_rank == 0) {
        fill(b, n, 0, 4, 0);
        CHK(MPI_Isend(b, n, MPI_INT, 1, 4, MPI_COMM_WORLD, &r));
        CHK(MPI_Barrier(MPI_COMM_WORLD));
        CHK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    } else {
        CHK(MPI_Barrier(MPI_COMM_WORLD));
        if (t_rank == 1) {
            CHK(MPI_Recv(b, n, MPI_INT, 0, 4, MPI_COMM_WORLD, &st));
            EXPECT_MSG(b, n, 0, 4, 0, st);
        }
    }
    free(b);
    report(name);
}

/* Collectives on a dup while wildcard receives on the parent are pending
 * and messages for them are in flight. */
static void dup_collectives(void)
{
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    int next = (t_rank + 1) % t_size, prev = (t_rank + t_size - 1) % t_size;
    int in[N], out[N], x = 1, sum = 0;
    MPI_Request r[2];
    MPI_Status st[2];
    CHK(MPI_Irecv(in, N, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &r[0]));
    fill(out, N, t_rank, 5, 0);
    CHK(MPI_Isend(out, N, MPI_INT, next, 5, MPI_COMM_WORLD, &r[1]));
    for (int i = 0; i < 10; i++) {
        CHK(MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, dup));
        CHK(MPI_Barrier(dup));
    }
    EXPECT(sum == t_size, "Allreduce on the dup: %d", sum);
    CHK(MPI_Waitall(2, r, st));
    EXPECT_MSG(in, N, prev, 5, 0, st[0]);
    MPI_Comm_free(&dup);
    report("pending_p2p_across_dup_collectives");
}

/* Rank 0 sends rank 1 three messages nobody receives yet, then a synchronous
 * send that rank 1's pending receive matches, and only then joins a blocking
 * collective (or communicator constructor) that rank 1 entered with the receive
 * pending: the send completes only if the receive is matched while rank 1 is
 * inside the collective. The unreceived messages arrive intact afterwards. */
static void peer_needs_pending_receive(int coll, const char *name)
{
    int b[N], x = t_rank, sum = 0, flag;
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_Status st;
    MPI_Comm made = MPI_COMM_NULL;
    if (t_rank == 0)
        for (int i = 0; i < 3; i++)
            CHK(MPI_Send(&i, 1, MPI_INT, 1, 7, MPI_COMM_WORLD));
    CHK(MPI_Barrier(MPI_COMM_WORLD));
    if (t_rank == 1) {
        /* the three messages have arrived: where the shim matches, it holds them now */
        CHK(MPI_Iprobe(0, 99, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
        CHK(MPI_Irecv(b, N, MPI_INT, 0, 6, MPI_COMM_WORLD, &r));
    } else if (t_rank == 0) {
        fill(b, N, 0, 6, 0);
        CHK(MPI_Ssend(b, N, MPI_INT, 1, 6, MPI_COMM_WORLD));
    }
    switch (coll) {
    case 0: CHK(MPI_Barrier(MPI_COMM_WORLD)); break;
    case 1: CHK(MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD)); break;
    case 2: CHK(MPI_Bcast(&x, 1, MPI_INT, 0, MPI_COMM_WORLD)); break;
    case 3: CHK(MPI_Comm_split(MPI_COMM_WORLD, 0, t_rank, &made)); break;
    case 4: CHK(MPI_Comm_dup(MPI_COMM_WORLD, &made)); break;
    }
    if (t_rank == 1) {
        CHK(MPI_Wait(&r, &st));
        EXPECT_MSG(b, N, 0, 6, 0, st);
        for (int i = 0; i < 3; i++) {
            int got = -1;
            CHK(MPI_Recv(&got, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, &st));
            EXPECT(got == i, "held message %d arrived as %d", i, got);
        }
    }
    if (made != MPI_COMM_NULL)
        CHK(MPI_Comm_free(&made));
    report(name);
}

/* A long posted queue across a blocking collective: rank 1 posts K receives
 * (tags 0..K-1 from rank 0, and before tag K/2 one more for that tag from any
 * source), then joins the collective; rank 0 sends the top quarter of the tags
 * in reverse before it and the rest after, tag K/2 twice. Each receive gets
 * what one ordered list gives it: the any-source receive the first tag-K/2
 * message, its twin the second. Where the shim took the queue over, the
 * receives go to MPI for the collective and come back after it. */
static void posted_queue_across(int coll, const char *name)
{
    enum { K = 400 };
    int(*b)[N] = malloc(sizeof *b * (K + 1)), x = t_rank, sum = 0;
    MPI_Request r[K + 1];
    MPI_Status st[K + 1];
    MPI_Comm made = MPI_COMM_NULL;
    /* where tag t's receive is: the any-source one sits at K/2, tags from K/2 up one later */
    int at[K];
    for (int t = 0; t < K; t++)
        at[t] = t < K / 2 ? t : t + 1;
    if (t_rank == 1) {
        for (int t = 0; t < K; t++) {
            if (t == K / 2)
                CHK(MPI_Irecv(b[K / 2], N, MPI_INT, MPI_ANY_SOURCE, t, MPI_COMM_WORLD, &r[K / 2]));
            CHK(MPI_Irecv(b[at[t]], N, MPI_INT, 0, t, MPI_COMM_WORLD, &r[at[t]]));
        }
    }
    int sent = 0, tags[K + 1], seqs[K + 1];
    for (int t = K - 1; t >= 0; t--) {
        tags[sent] = t, seqs[sent++] = 0;
        if (t == K / 2)
            tags[sent] = t, seqs[sent++] = 1;
    }
    int before = K / 4;
    if (t_rank == 0)
        for (int i = 0; i < before; i++) {
            int m[N];
            fill(m, N, 0, tags[i], seqs[i]);
            CHK(MPI_Send(m, N, MPI_INT, 1, tags[i], MPI_COMM_WORLD));
        }
    switch (coll) {
    case 0: CHK(MPI_Barrier(MPI_COMM_WORLD)); break;
    case 1: CHK(MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD)); break;
    case 2: CHK(MPI_Comm_dup(MPI_COMM_WORLD, &made)); break;
    }
    if (t_rank == 0)
        for (int i = before; i < sent; i++) {
            int m[N];
            fill(m, N, 0, tags[i], seqs[i]);
            CHK(MPI_Send(m, N, MPI_INT, 1, tags[i], MPI_COMM_WORLD));
        }
    if (t_rank == 1) {
        CHK(MPI_Waitall(K + 1, r, st));
        for (int t = 0; t < K; t++)
            EXPECT_MSG(b[at[t]], N, 0, t, t == K / 2, st[at[t]]);
        EXPECT_MSG(b[K / 2], N, 0, K / 2, 0, st[K / 2]);
    }
    if (made != MPI_COMM_NULL)
        CHK(MPI_Comm_free(&made));
    free(b);
    report(name);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    one_sided_pending(0, "pending_recv_one_rank_barrier");
    one_sided_pending(1, "pending_recv_one_rank_allreduce");
    one_sided_pending(2, "pending_recv_one_rank_bcast");
    sent_before_barrier(N, "isend_across_barrier_small");
    sent_before_barrier((1 << 20) / 4 + 1, "isend_across_barrier_large");
    dup_collectives();
    peer_needs_pending_receive(0, "peer_needs_pending_receive_barrier");
    peer_needs_pending_receive(1, "peer_needs_pending_receive_allreduce");
    peer_needs_pending_receive(2, "peer_needs_pending_receive_bcast");
    peer_needs_pending_receive(3, "peer_needs_pending_receive_comm_split");
    peer_needs_pending_receive(4, "peer_needs_pending_receive_comm_dup");
    posted_queue_across(0, "posted_queue_across_barrier");
    posted_queue_across(1, "posted_queue_across_allreduce");
    posted_queue_across(2, "posted_queue_across_comm_dup");
    return t_finish();
}
