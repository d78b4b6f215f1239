/* ranks: 2 4 8 */
/* Non-overtaking order per (source, comm), wildcard receives and their
 * statuses, and which posted receive a message matches (earliest wins). */
#include "common.h"

#define M 200                   /* messages per sender per check */
#define W 8                     /* ints per small message */

/* Every rank sends M messages with one tag to every other rank; receives
 * name the source.  seq travels in element 0. */
static void t_same_tag(int any_source)
{
    const int peers = t_size - 1;
    int *out = malloc(sizeof(int) * W * M);
    MPI_Request *r = malloc(sizeof(MPI_Request) * M * t_size);
    int nr = 0, tag = any_source ? 21 : 20;
    for (int i = 0; i < M; i++)
        fill(out + i * W, W, t_rank, tag, i);
    for (int d = 0; d < t_size; d++) {
        if (d == t_rank)
            continue;
        for (int i = 0; i < M; i++)
            CHK(MPI_Isend(out + i * W, W, MPI_INT, d, tag, MPI_COMM_WORLD, &r[nr++]));
    }
    int *next_seq = calloc((size_t)t_size, sizeof(int));
    for (int k = 0; k < peers * M; k++) {
        MPI_Status st;
        int buf[W + 1];
        int src = any_source ? MPI_ANY_SOURCE : (t_rank + 1 + k % peers) % t_size;
        CHK(MPI_Recv(buf, W + 1, MPI_INT, src, tag, MPI_COMM_WORLD, &st));
        int s = st.MPI_SOURCE;
        if (s < 0 || s >= t_size || s == t_rank) {
            FAILF("bad status source %d", s);
            break;
        }
        int c;
        MPI_Get_count(&st, MPI_INT, &c);
        EXPECT(c == W, "count %d", c);
        int seq = next_seq[s]++;
        EXPECT(bad_at(buf, W, s, tag, seq) < 0,
               "from %d: message %d received where %d was expected (overtaken)",
               s, (buf[0] ^ pat(s, tag, 0, 0)) / 131, seq);
    }
    CHK(MPI_Waitall(nr, r, MPI_STATUSES_IGNORE));
    free(next_seq);
    free(r);
    free(out);
    report(any_source ? "order_same_tag_any_source" : "order_same_tag");
}

/* Rank 0 sends M messages to rank 1 with tags 0..4 in turn; rank 1 first
 * takes every tag-3 message, then everything else with MPI_ANY_TAG. */
static void t_mixed_tags(void)
{
    if (t_rank == 0) {
        int out[M][W];
        MPI_Request r[M];
        for (int i = 0; i < M; i++) {
            fill(out[i], W, 0, i % 5, i);
            CHK(MPI_Isend(out[i], W, MPI_INT, 1, i % 5, MPI_COMM_WORLD, &r[i]));
        }
        CHK(MPI_Waitall(M, r, MPI_STATUSES_IGNORE));
    } else if (t_rank == 1) {
        int buf[W];
        MPI_Status st;
        for (int i = 3; i < M; i += 5) {
            CHK(MPI_Recv(buf, W, MPI_INT, 0, 3, MPI_COMM_WORLD, &st));
            EXPECT_MSG(buf, W, 0, 3, i, st);
        }
        for (int i = 0; i < M; i++) {
            if (i % 5 == 3)
                continue;
            CHK(MPI_Recv(buf, W, MPI_INT, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            EXPECT_MSG(buf, W, 0, i % 5, i, st);
        }
    }
    report("order_mixed_tags");
}

/* Small (eager) and large (rendezvous) messages interleaved on one tag must
 * still be received in send order. */
static void t_eager_rndv_mix(void)
{
    const int big = 256 * 1024 / (int)sizeof(int);
    const int K = 12;
    if (t_rank == 0) {
        int *out = malloc(sizeof(int) * big * K);
        MPI_Request r[12];
        for (int i = 0; i < K; i++) {
            int n = (i % 3 == 1) ? big : W;
            fill(out + i * big, n, 0, 30, i);
            CHK(MPI_Isend(out + i * big, n, MPI_INT, 1, 30, MPI_COMM_WORLD, &r[i]));
        }
        CHK(MPI_Waitall(K, r, MPI_STATUSES_IGNORE));
        free(out);
    } else if (t_rank == 1) {
        int *in = malloc(sizeof(int) * big);
        MPI_Status st;
        for (int i = 0; i < K; i++) {
            int n = (i % 3 == 1) ? big : W;
            CHK(MPI_Recv(in, big, MPI_INT, i % 2 ? MPI_ANY_SOURCE : 0, 30,
                         MPI_COMM_WORLD, &st));
            EXPECT_MSG(in, n, 0, 30, i, st);
        }
        free(in);
    }
    report("order_eager_rendezvous_mix");
}

/* Messages that arrived before any receive was posted keep their order. */
static void t_unexpected(void)
{
    int buf[W];
    MPI_Request r[M];
    if (t_rank == 0) {
        int out[M][W];
        for (int i = 0; i < M; i++) {
            fill(out[i], W, 0, 40 + i % 2, i);
            CHK(MPI_Isend(out[i], W, MPI_INT, 1, 40 + i % 2, MPI_COMM_WORLD, &r[i]));
        }
        MPI_Barrier(MPI_COMM_WORLD);
        CHK(MPI_Waitall(M, r, MPI_STATUSES_IGNORE));
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
        if (t_rank == 1) {
            MPI_Status st;
            for (int i = 0; i < M; i++) {
                CHK(MPI_Recv(buf, W, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG,
                             MPI_COMM_WORLD, &st));
                EXPECT_MSG(buf, W, 0, 40 + i % 2, i, st);
            }
        }
    }
    report("order_unexpected_queue");
}

/* A wildcard receive reports the real source, tag and size. */
static void t_wildcard_status(void)
{
    /* each rank sends (rank+1)*3 ints with tag 50+rank to rank 0 */
    if (t_rank != 0) {
        int out[64];
        fill(out, (t_rank + 1) * 3, t_rank, 50 + t_rank, 0);
        CHK(MPI_Send(out, (t_rank + 1) * 3, MPI_INT, 0, 50 + t_rank, MPI_COMM_WORLD));
    } else {
        int seen[8] = {0};
        for (int k = 1; k < t_size; k++) {
            int in[64];
            MPI_Status st;
            st.MPI_SOURCE = -99;
            st.MPI_TAG = -99;
            CHK(MPI_Recv(in, 64, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            int s = st.MPI_SOURCE;
            if (s < 1 || s >= t_size) {
                FAILF("status source %d", s);
                break;
            }
            seen[s]++;
            EXPECT_MSG(in, (s + 1) * 3, s, 50 + s, 0, st);
            int el = -1;
            MPI_Get_elements(&st, MPI_INT, &el);
            EXPECT(el == (s + 1) * 3, "Get_elements %d", el);
            int bytes = -1;
            MPI_Get_count(&st, MPI_BYTE, &bytes);
            EXPECT(bytes == (s + 1) * 3 * (int)sizeof(int), "byte count %d", bytes);
        }
        for (int s = 1; s < t_size; s++)
            EXPECT(seen[s] == 1, "%d messages from %d", seen[s], s);
    }
    report("wildcard_status");
}

/* Posts receive a then b (both able to match), then rank 0 sends two
 * messages with tag 5: a must get the first.  Barrier orders post < send. */
static void posted_pair(int src_a, int tag_a, int src_b, int tag_b, const char *name)
{
    if (t_rank == 1) {
        int a[W], b[W];
        MPI_Request r[2];
        MPI_Status st[2];
        CHK(MPI_Irecv(a, W, MPI_INT, src_a, tag_a, MPI_COMM_WORLD, &r[0]));
        CHK(MPI_Irecv(b, W, MPI_INT, src_b, tag_b, MPI_COMM_WORLD, &r[1]));
        MPI_Barrier(MPI_COMM_WORLD);
        CHK(MPI_Waitall(2, r, st));
        EXPECT_MSG(a, W, 0, 5, 0, st[0]);
        EXPECT_MSG(b, W, 0, 5, 1, st[1]);
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
        if (t_rank == 0) {
            int out[W];
            fill(out, W, 0, 5, 0);
            CHK(MPI_Send(out, W, MPI_INT, 1, 5, MPI_COMM_WORLD));
            fill(out, W, 0, 5, 1);
            CHK(MPI_Send(out, W, MPI_INT, 1, 5, MPI_COMM_WORLD));
        }
    }
    report(name);
}

/* With 3+ ranks: a wildcard posted before a specific receive takes the
 * message that arrives first even when the specific one could match it. */
static void t_wildcard_then_specific_multi(void)
{
    if (t_size < 3) {
        report_skip("earliest_posted_wins_multi_source", "needs 3 ranks");
        return;
    }
    int a[W], b[W];
    if (t_rank == 0) {
        MPI_Request r[2];
        MPI_Status st[2];
        CHK(MPI_Irecv(a, W, MPI_INT, MPI_ANY_SOURCE, 6, MPI_COMM_WORLD, &r[0]));
        CHK(MPI_Irecv(b, W, MPI_INT, 2, 6, MPI_COMM_WORLD, &r[1]));
        MPI_Barrier(MPI_COMM_WORLD);
        /* rank 2 sends first (rank 1 waits for rank 2's go-ahead) */
        CHK(MPI_Wait(&r[0], &st[0]));
        EXPECT_MSG(a, W, 2, 6, 0, st[0]);
        MPI_Barrier(MPI_COMM_WORLD);
        int flag = 0;
        CHK(MPI_Test(&r[1], &flag, &st[1]));
        EXPECT(!flag, "specific receive from 2 completed, nothing left for it");
        /* rank 1's message must not reach the receive that names rank 2 */
        CHK(MPI_Recv(a, W, MPI_INT, 1, 6, MPI_COMM_WORLD, &st[0]));
        EXPECT_MSG(a, W, 1, 6, 0, st[0]);
        MPI_Barrier(MPI_COMM_WORLD);
        CHK(MPI_Wait(&r[1], &st[1]));
        EXPECT_MSG(b, W, 2, 6, 1, st[1]);
    } else {
        MPI_Barrier(MPI_COMM_WORLD);
        if (t_rank == 2) {
            fill(a, W, 2, 6, 0);
            CHK(MPI_Send(a, W, MPI_INT, 0, 6, MPI_COMM_WORLD));
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (t_rank == 1) {
            fill(a, W, 1, 6, 0);
            CHK(MPI_Send(a, W, MPI_INT, 0, 6, MPI_COMM_WORLD));
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (t_rank == 2) {
            fill(a, W, 2, 6, 1);
            CHK(MPI_Send(a, W, MPI_INT, 0, 6, MPI_COMM_WORLD));
        }
    }
    report("earliest_posted_wins_multi_source");
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    t_same_tag(0);
    t_same_tag(1);
    t_mixed_tags();
    t_eager_rndv_mix();
    t_unexpected();
    t_wildcard_status();
    posted_pair(MPI_ANY_SOURCE, MPI_ANY_TAG, 0, 5, "earliest_posted_wins_any_any");
    posted_pair(0, MPI_ANY_TAG, 0, 5, "earliest_posted_wins_any_tag");
    posted_pair(MPI_ANY_SOURCE, 5, 0, 5, "earliest_posted_wins_any_source");
    posted_pair(0, 5, MPI_ANY_SOURCE, MPI_ANY_TAG, "earliest_posted_wins_specific_first");
    t_wildcard_then_specific_multi();
    return t_finish();
}
