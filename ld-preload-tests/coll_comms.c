/* ranks: 1 2 3 4 7 */
/* Collectives on communicators other than MPI_COMM_WORLD: split halves (one in reversed rank
 * order), duplicates created and freed again and again, MPI_COMM_SELF, nonblocking collectives
 * outstanding on two communicators at once, a first collective on a new communicator while a
 * peer waits in a synchronous send for this rank's receive, and an inter-communicator. */
#include "coll_common.h"

static void t_split(void)
{
    MPI_Comm half, reversed;
    int color = t_rank % 2;
    CHK(MPI_Comm_split(MPI_COMM_WORLD, color, t_rank, &half));
    CHK(MPI_Comm_split(MPI_COMM_WORLD, color, -t_rank, &reversed));
    int hr, hs, rr;
    MPI_Comm_rank(half, &hr);
    MPI_Comm_size(half, &hs);
    MPI_Comm_rank(reversed, &rr);
    /* world ranks of the half, in the half's order */
    int members[64], m = 0;
    for (int r = color; r < t_size; r += 2)
        members[m++] = r;
    long n = 1000;
    double *in = dalloc(n), *out = dalloc(n * hs);
    for (long i = 0; i < n; i++)
        in[i] = val(1, t_rank, i);
    CHK(MPI_Allreduce(in, out, (int)n, MPI_DOUBLE, MPI_SUM, half));
    for (long i = 0; i < n; i++) {
        double want = 0;
        for (int k = 0; k < m; k++)
            want += val(1, members[k], i);
        if (out[i] != want) {
            FAILF("allreduce on half [%ld] = %g, want %g", i, out[i], want);
            break;
        }
    }
    CHK(MPI_Allgather(in, (int)n, MPI_DOUBLE, out, (int)n, MPI_DOUBLE, half));
    for (int k = 0; k < m && !t_fail; k++)
        for (long i = 0; i < n; i++)
            if (out[k * n + i] != val(1, members[k], i)) {
                FAILF("allgather on half: block %d [%ld]", k, i);
                break;
            }
    /* Scan in the reversed order: rank rr gets the sum over the members above it in world */
    int mine = t_rank, got = -1;
    CHK(MPI_Scan(&mine, &got, 1, MPI_INT, MPI_SUM, reversed));
    int want = 0;
    for (int k = 0; k < m; k++)
        if (members[k] >= t_rank)
            want += members[k];
    EXPECT(got == want, "scan on reversed half: %d, want %d (rank %d)", got, want, rr);
    int root_world = members[m - 1], b = t_rank == root_world ? 99 : -1;
    CHK(MPI_Bcast(&b, 1, MPI_INT, 0, reversed));
    EXPECT(b == 99, "bcast from the reversed half's rank 0: %d", b);
    (void)hr;
    free(in);
    free(out);
    CHK(MPI_Comm_free(&half));
    CHK(MPI_Comm_free(&reversed));
    report("split_communicators");
}

static void t_dup_free_cycle(void)
{
    for (int k = 0; k < 20; k++) {
        MPI_Comm c;
        CHK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
        int x = t_rank + k, sum = -1;
        CHK(MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, c));
        EXPECT(sum == t_size * (t_size - 1) / 2 + k * t_size, "round %d: sum %d", k, sum);
        if (k % 2) {
            MPI_Request r;
            CHK(MPI_Ibarrier(c, &r));
            CHK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        }
        CHK(MPI_Comm_free(&c));
    }
    report("dup_free_cycle");
}

static void t_self(void)
{
    double in[3] = {1, 2, 3}, out[3] = {0, 0, 0};
    CHK(MPI_Allreduce(in, out, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_SELF));
    EXPECT(out[0] == 1 && out[2] == 3, "allreduce on self");
    CHK(MPI_Gather(in, 3, MPI_DOUBLE, out, 3, MPI_DOUBLE, 0, MPI_COMM_SELF));
    EXPECT(out[1] == 2, "gather on self");
    out[0] = out[1] = out[2] = 0;
    CHK(MPI_Alltoall(in, 3, MPI_DOUBLE, out, 3, MPI_DOUBLE, MPI_COMM_SELF));
    EXPECT(out[2] == 3, "alltoall on self");
    MPI_Request r;
    CHK(MPI_Ibcast(in, 3, MPI_DOUBLE, 0, MPI_COMM_SELF, &r));
    CHK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHK(MPI_Barrier(MPI_COMM_SELF));
    report("comm_self");
}

static void t_two_comms_outstanding(void)
{
    MPI_Comm half;
    CHK(MPI_Comm_split(MPI_COMM_WORLD, t_rank % 2, t_rank, &half));
    int hs;
    MPI_Comm_size(half, &hs);
    long n = 5000;
    double *a = dalloc(n), *b = dalloc(n), *ra = dalloc(n), *rb = dalloc(n);
    for (long i = 0; i < n; i++) {
        a[i] = val(2, t_rank, i);
        b[i] = 1;
    }
    MPI_Request r[4];
    CHK(MPI_Iallreduce(a, ra, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r[0]));
    CHK(MPI_Iallreduce(b, rb, (int)n, MPI_DOUBLE, MPI_SUM, half, &r[1]));
    int x = t_rank, y = -1, z = t_rank == 0 ? 42 : -1;
    CHK(MPI_Iallreduce(&x, &y, 1, MPI_INT, MPI_MAX, half, &r[2]));
    CHK(MPI_Ibcast(&z, 1, MPI_INT, 0, MPI_COMM_WORLD, &r[3]));
    CHK(MPI_Waitall(4, r, MPI_STATUSES_IGNORE));
    EXPECT(z == 42, "bcast on world %d", z);
    for (long i = 0; i < n; i++) {
        double want = 0;
        for (int q = 0; q < t_size; q++)
            want += val(2, q, i);
        if (ra[i] != want || rb[i] != hs) {
            FAILF("[%ld]: world %g want %g, half %g want %d", i, ra[i], want, rb[i], hs);
            break;
        }
    }
    int maxr = t_rank;
    for (int q = t_rank % 2; q < t_size; q += 2)
        maxr = q > maxr ? q : maxr;
    EXPECT(y == maxr, "max on half %d, want %d", y, maxr);
    free(a);
    free(b);
    free(ra);
    free(rb);
    CHK(MPI_Comm_free(&half));
    report("two_communicators_outstanding");
}

/* Rank 1 waits in MPI_Ssend until rank 0's receive matches; rank 0 makes its first collective
 * on a new communicator before waiting for that receive. */
static void t_first_collective_while_peer_waits(void)
{
    MPI_Comm c;
    CHK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    int token = -1, v = t_rank == 0 ? 5 : -1;
    if (t_size > 1 && t_rank == 0) {
        MPI_Request r;
        CHK(MPI_Irecv(&token, 1, MPI_INT, 1, 3, MPI_COMM_WORLD, &r));
        CHK(MPI_Bcast(&v, 1, MPI_INT, 0, c));
        CHK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        EXPECT(token == 11, "token %d", token);
    } else {
        if (t_size > 1 && t_rank == 1) {
            token = 11;
            CHK(MPI_Ssend(&token, 1, MPI_INT, 0, 3, MPI_COMM_WORLD));
        }
        CHK(MPI_Bcast(&v, 1, MPI_INT, 0, c));
    }
    EXPECT(v == 5, "bcast %d", v);
    CHK(MPI_Comm_free(&c));
    report("first_collective_while_peer_waits");
}

/* Inter-communicators pass to MPI: Allreduce across two groups gives each the other's sum. */
static void t_intercomm(void)
{
    if (t_size < 2) {
        report_skip("intercommunicator", "needs two ranks");
        return;
    }
    MPI_Comm local, inter;
    int color = t_rank % 2;
    CHK(MPI_Comm_split(MPI_COMM_WORLD, color, t_rank, &local));
    CHK(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, 1 - color, 5, &inter));
    int x = t_rank, sum = -1, want = 0;
    for (int r = 1 - color; r < t_size; r += 2)
        want += r;
    CHK(MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, inter));
    EXPECT(sum == want, "allreduce across groups %d, want %d", sum, want);
    MPI_Request r;
    CHK(MPI_Ibarrier(inter, &r));
    CHK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHK(MPI_Comm_free(&inter));
    CHK(MPI_Comm_free(&local));
    report("intercommunicator");
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    t_split();
    t_dup_free_cycle();
    t_self();
    t_two_comms_outstanding();
    t_first_collective_while_peer_waits();
    t_intercomm();
    return t_finish();
}
