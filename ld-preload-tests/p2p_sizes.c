/* ranks: 2 */
/* Message sizes from empty to several MiB (eager and rendezvous paths),
 * receives posted before and after arrival, buffers larger than the data. */
#include "common.h"

static const int sizes[] = {0, 1, 8, 4095, 64 * 1024, (1 << 20) + 3, 4 << 20};
#define NSIZES ((int)(sizeof sizes / sizeof sizes[0]))
#define SLACK 64                /* receive buffers are this much larger */

static unsigned char bpat(int size, int i)
{
    return (unsigned char)(i * 31 + size * 7 + (i >> 8));
}

static void bfill(unsigned char *b, int n, int size)
{
    for (int i = 0; i < n; i++)
        b[i] = bpat(size, i);
}

/* Verifies data, status and that the slack after the data is untouched. */
static void bcheck(const unsigned char *b, int n, MPI_Status *st, int src, int tag)
{
    for (int i = 0; i < n; i++)
        if (b[i] != bpat(n, i)) {
            FAILF("size %d: byte %d wrong", n, i);
            break;
        }
    for (int i = n; i < n + SLACK; i++)
        if (b[i] != 0xEE) {
            FAILF("size %d: byte %d past the message was written", n, i);
            break;
        }
    int c = -1;
    MPI_Get_count(st, MPI_BYTE, &c);
    EXPECT(c == n, "size %d: count %d", n, c);
    EXPECT(st->MPI_SOURCE == src && st->MPI_TAG == tag,
           "size %d: status source %d tag %d", n, st->MPI_SOURCE, st->MPI_TAG);
}

/* mode 0: blocking ping-pong; 1: Irecv posted before the send; 2: receive
 * posted after the message arrived (sender signals with a barrier);
 * 3: Ssend/Issend; 4: ANY_SOURCE/ANY_TAG receive. */
static void exchange(int mode, const char *name)
{
    int peer = 1 - t_rank;
    for (int k = 0; k < NSIZES; k++) {
        int n = sizes[k], tag = 100 + k;
        unsigned char *out = malloc((size_t)n + 1), *in = malloc((size_t)n + SLACK);
        bfill(out, n, n);
        memset(in, 0xEE, (size_t)n + SLACK);
        MPI_Status st;
        MPI_Request r[2];
        int cap = n + SLACK;
        if (t_rank >= 2) {
            /* bystanders */
        } else if (mode == 0) {
            if (t_rank == 0) {
                CHK(MPI_Send(out, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD));
                CHK(MPI_Recv(in, cap, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st));
            } else {
                CHK(MPI_Recv(in, cap, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st));
                CHK(MPI_Send(out, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD));
            }
            bcheck(in, n, &st, peer, tag);
        } else if (mode == 1) {
            CHK(MPI_Irecv(in, cap, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &r[0]));
            MPI_Barrier(MPI_COMM_WORLD);
            CHK(MPI_Isend(out, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &r[1]));
            CHK(MPI_Wait(&r[1], MPI_STATUS_IGNORE));
            CHK(MPI_Wait(&r[0], &st));
            bcheck(in, n, &st, peer, tag);
        } else if (mode == 2) {
            if (t_rank == 0) {
                CHK(MPI_Isend(out, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &r[0]));
                MPI_Barrier(MPI_COMM_WORLD);
                CHK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
            } else {
                MPI_Barrier(MPI_COMM_WORLD);
                /* give the message time to arrive before the receive exists */
                spin_test(NULL, 0.005);
                CHK(MPI_Recv(in, cap, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st));
                bcheck(in, n, &st, peer, tag);
            }
        } else if (mode == 3) {
            if (t_rank == 0) {
                CHK(MPI_Ssend(out, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD));
                CHK(MPI_Issend(out, n, MPI_BYTE, peer, tag + 50, MPI_COMM_WORLD, &r[0]));
                CHK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
            } else {
                CHK(MPI_Recv(in, cap, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st));
                bcheck(in, n, &st, peer, tag);
                memset(in, 0xEE, (size_t)n + SLACK);
                CHK(MPI_Recv(in, cap, MPI_BYTE, peer, tag + 50, MPI_COMM_WORLD, &st));
                bcheck(in, n, &st, peer, tag + 50);
            }
        } else if (mode == 4) {
            CHK(MPI_Isend(out, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &r[0]));
            CHK(MPI_Recv(in, cap, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            CHK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
            bcheck(in, n, &st, peer, tag);
        }
        if (t_rank >= 2 && (mode == 1 || mode == 2))
            MPI_Barrier(MPI_COMM_WORLD);
        free(out);
        free(in);
    }
    report(name);
}

/* Zero-byte messages with NULL buffers. */
static void t_null_buffer(void)
{
    if (t_rank < 2) {
        int peer = 1 - t_rank;
        MPI_Status st;
        MPI_Request r;
        CHK(MPI_Isend(NULL, 0, MPI_INT, peer, 7, MPI_COMM_WORLD, &r));
        CHK(MPI_Recv(NULL, 0, MPI_INT, peer, 7, MPI_COMM_WORLD, &st));
        CHK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        int c = -1;
        MPI_Get_count(&st, MPI_INT, &c);
        EXPECT(c == 0 && st.MPI_SOURCE == peer && st.MPI_TAG == 7,
               "count %d source %d tag %d", c, st.MPI_SOURCE, st.MPI_TAG);
    }
    report("zero_size_null_buffer");
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    exchange(0, "sizes_blocking");
    exchange(1, "sizes_preposted");
    exchange(2, "sizes_unexpected");
    exchange(3, "sizes_synchronous");
    exchange(4, "sizes_wildcard");
    t_null_buffer();
    return t_finish();
}
