/* ranks: 1 2 3 4 7 */
/* Nonblocking collectives: every I-form checked, several outstanding at once on one
 * communicator with point-to-point traffic (wildcard receives included) interleaved, and
 * completion through Wait, Test, Waitall, Waitany, Waitsome and Request_get_status. */
#include "coll_common.h"

static double sum_over(int k, int lo, int hi, long i)
{
    double s = 0;
    for (int r = lo; r < hi; r++)
        s += val(k, r, i);
    return s;
}

#define N_OPS 17

/* The buffers of one round of every nonblocking collective. */
struct round {
    int n;
    double *in, *bc, *red, *ared, *gat, *gatv, *sca, *scav, *ag, *agv, *a2a_in, *a2a, *a2av, *a2aw,
        *rs, *rsb, *scan, *exscan;
    int *counts, *displs, *bcounts, *bdispls, *wdispls;
    MPI_Datatype *types;
};

static void start_all(struct round *w, int k, MPI_Request *req)
{
    int n = w->n, p = t_size, root = k % p;
    w->in = dalloc((long)n * p);
    for (long i = 0; i < (long)n * p; i++)
        w->in[i] = val(k, t_rank, i);
    w->bc = dalloc(n);
    for (long i = 0; i < n; i++)
        w->bc[i] = t_rank == root ? val(k, root, i) : -1;
    w->red = dalloc(n);
    w->ared = dalloc(n);
    w->gat = dalloc((long)n * p);
    w->counts = malloc(sizeof(int) * p);
    w->displs = malloc(sizeof(int) * p);
    w->bcounts = malloc(sizeof(int) * p);
    w->bdispls = malloc(sizeof(int) * p);
    w->wdispls = malloc(sizeof(int) * p);
    w->types = malloc(sizeof(MPI_Datatype) * p);
    for (int r = 0; r < p; r++) {
        w->counts[r] = n - (r % 2 && n > 0 ? 1 : 0);
        w->displs[r] = r * n;
        w->bcounts[r] = n;
        w->bdispls[r] = r * n;
        w->wdispls[r] = r * n * (int)sizeof(double);
        w->types[r] = MPI_DOUBLE;
    }
    w->gatv = dalloc((long)n * p);
    w->sca = dalloc(n);
    w->scav = dalloc(n);
    w->ag = dalloc((long)n * p);
    w->agv = dalloc((long)n * p);
    w->a2a_in = dalloc((long)n * p);
    for (int d = 0; d < p; d++)
        for (long i = 0; i < n; i++)
            w->a2a_in[(long)d * n + i] = val(k, t_rank * p + d, i);
    w->a2a = dalloc((long)n * p);
    w->a2av = dalloc((long)n * p);
    w->a2aw = dalloc((long)n * p);
    w->rs = dalloc(n);
    w->rsb = dalloc(n);
    w->scan = dalloc(n);
    w->exscan = dalloc(n);
    MPI_Comm c = MPI_COMM_WORLD;
    int mine = w->counts[t_rank];
    CHK(MPI_Ibarrier(c, &req[0]));
    CHK(MPI_Ibcast(w->bc, n, MPI_DOUBLE, root, c, &req[1]));
    CHK(MPI_Ireduce(w->in, w->red, n, MPI_DOUBLE, MPI_SUM, root, c, &req[2]));
    CHK(MPI_Iallreduce(w->in, w->ared, n, MPI_DOUBLE, MPI_SUM, c, &req[3]));
    CHK(MPI_Igather(w->in, n, MPI_DOUBLE, w->gat, n, MPI_DOUBLE, root, c, &req[4]));
    CHK(MPI_Igatherv(w->in, mine, MPI_DOUBLE, w->gatv, w->counts, w->displs, MPI_DOUBLE, root, c, &req[5]));
    CHK(MPI_Iscatter(w->in, n, MPI_DOUBLE, w->sca, n, MPI_DOUBLE, root, c, &req[6]));
    CHK(MPI_Iscatterv(w->in, w->counts, w->displs, MPI_DOUBLE, w->scav, mine, MPI_DOUBLE, root, c, &req[7]));
    CHK(MPI_Iallgather(w->in, n, MPI_DOUBLE, w->ag, n, MPI_DOUBLE, c, &req[8]));
    CHK(MPI_Iallgatherv(w->in, mine, MPI_DOUBLE, w->agv, w->counts, w->displs, MPI_DOUBLE, c, &req[9]));
    CHK(MPI_Ialltoall(w->a2a_in, n, MPI_DOUBLE, w->a2a, n, MPI_DOUBLE, c, &req[10]));
    CHK(MPI_Ialltoallv(w->a2a_in, w->bcounts, w->bdispls, MPI_DOUBLE, w->a2av, w->bcounts, w->bdispls,
                       MPI_DOUBLE, c, &req[11]));
    CHK(MPI_Ialltoallw(w->a2a_in, w->bcounts, w->wdispls, w->types, w->a2aw, w->bcounts, w->wdispls,
                       w->types, c, &req[12]));
    CHK(MPI_Ireduce_scatter(w->in, w->rs, w->counts, MPI_DOUBLE, MPI_SUM, c, &req[13]));
    CHK(MPI_Ireduce_scatter_block(w->in, w->rsb, n, MPI_DOUBLE, MPI_SUM, c, &req[14]));
    CHK(MPI_Iscan(w->in, w->scan, n, MPI_DOUBLE, MPI_SUM, c, &req[15]));
    CHK(MPI_Iexscan(w->in, w->exscan, n, MPI_DOUBLE, MPI_SUM, c, &req[16]));
}

#define CHECK(cond, ...) do { if (!(cond)) { FAILF(__VA_ARGS__); return; } } while (0)

static void check_all(struct round *w, int k)
{
    int n = w->n, p = t_size, root = k % p;
    for (long i = 0; i < n; i++) {
        CHECK(w->bc[i] == val(k, root, i), "ibcast [%ld]", i);
        if (t_rank == root)
            CHECK(w->red[i] == sum_over(k, 0, p, i), "ireduce [%ld]", i);
        CHECK(w->ared[i] == sum_over(k, 0, p, i), "iallreduce [%ld]", i);
        CHECK(w->sca[i] == val(k, root, (long)t_rank * n + i), "iscatter [%ld]", i);
        CHECK(w->rsb[i] == sum_over(k, 0, p, (long)t_rank * n + i), "ireduce_scatter_block [%ld]", i);
        CHECK(w->scan[i] == sum_over(k, 0, t_rank + 1, i), "iscan [%ld]", i);
        if (t_rank > 0)
            CHECK(w->exscan[i] == sum_over(k, 0, t_rank, i), "iexscan [%ld]", i);
    }
    for (long i = 0; i < w->counts[t_rank]; i++) {
        CHECK(w->scav[i] == val(k, root, (long)w->displs[t_rank] + i), "iscatterv [%ld]", i);
        long before = 0;
        for (int r = 0; r < t_rank; r++)
            before += w->counts[r];
        CHECK(w->rs[i] == sum_over(k, 0, p, before + i), "ireduce_scatter [%ld]", i);
    }
    for (int r = 0; r < p; r++)
        for (long i = 0; i < n; i++) {
            long at = (long)r * n + i;
            if (t_rank == root) {
                CHECK(w->gat[at] == val(k, r, i), "igather from %d [%ld]", r, i);
                if (i < w->counts[r])
                    CHECK(w->gatv[at] == val(k, r, i), "igatherv from %d [%ld]", r, i);
            }
            CHECK(w->ag[at] == val(k, r, i), "iallgather from %d [%ld]", r, i);
            if (i < w->counts[r])
                CHECK(w->agv[at] == val(k, r, i), "iallgatherv from %d [%ld]", r, i);
            double want = val(k, r * p + t_rank, i);
            CHECK(w->a2a[at] == want, "ialltoall from %d [%ld]", r, i);
            CHECK(w->a2av[at] == want, "ialltoallv from %d [%ld]", r, i);
            CHECK(w->a2aw[at] == want, "ialltoallw from %d [%ld]", r, i);
        }
}

static void free_round(struct round *w)
{
    double *bufs[] = {w->in, w->bc, w->red, w->ared, w->gat, w->gatv, w->sca, w->scav, w->ag, w->agv,
                      w->a2a_in, w->a2a, w->a2av, w->a2aw, w->rs, w->rsb, w->scan, w->exscan};
    for (unsigned i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    free(w->counts);
    free(w->displs);
    free(w->bcounts);
    free(w->bdispls);
    free(w->wdispls);
    free(w->types);
}

/* Every I-form, all outstanding together, completed with Waitall. */
static void t_all_outstanding(void)
{
    static const int sizes[] = {0, 1, 7, 3000};
    for (int k = 0; k < 4; k++) {
        struct round w = {.n = sizes[k]};
        MPI_Request req[N_OPS];
        start_all(&w, k, req);
        CHK(MPI_Waitall(N_OPS, req, MPI_STATUSES_IGNORE));
        check_all(&w, k);
        free_round(&w);
    }
    report("all_outstanding_waitall");
}

/* Two rounds outstanding at once with a point-to-point ring exchange between them; the
 * wildcard receives must get only the point-to-point messages. */
static void t_interleaved(void)
{
    if (t_size == 1) {
        report_skip("interleaved_with_point_to_point", "MPICH 4.0 hangs on it natively with one process");
        return;
    }
    struct round a = {.n = 5}, b = {.n = 2000};
    MPI_Request ra[N_OPS], rb[N_OPS], p2p[4];
    start_all(&a, 1, ra);
    int right = (t_rank + 1) % t_size, left = (t_rank + t_size - 1) % t_size;
    int out[2] = {t_rank, 4242}, in[2][2] = {{-1, -1}, {-1, -1}};
    MPI_Status st[4];
    CHK(MPI_Irecv(in[0], 2, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &p2p[0]));
    start_all(&b, 2, rb);
    CHK(MPI_Irecv(in[1], 2, MPI_INT, left, 9, MPI_COMM_WORLD, &p2p[1]));
    CHK(MPI_Isend(out, 2, MPI_INT, right, 8, MPI_COMM_WORLD, &p2p[2]));
    CHK(MPI_Isend(out, 2, MPI_INT, right, 9, MPI_COMM_WORLD, &p2p[3]));
    /* complete a and the ring with one Waitall over both kinds, then b by testing (in this
     * order: MPICH 4.0 on one process never completes b first) */
    MPI_Request mixed[N_OPS + 4];
    memcpy(mixed, ra, sizeof ra);
    memcpy(mixed + N_OPS, p2p, sizeof p2p);
    MPI_Status sts[N_OPS + 4];
    CHK(MPI_Waitall(N_OPS + 4, mixed, sts));
    memcpy(st, sts + N_OPS, sizeof st);
    int done = 0;
    while (!done)
        CHK(MPI_Testall(N_OPS, rb, &done, MPI_STATUSES_IGNORE));
    EXPECT(st[0].MPI_SOURCE == left && st[0].MPI_TAG == 8 && in[0][0] == left && in[0][1] == 4242,
           "wildcard receive got source %d tag %d data %d %d", st[0].MPI_SOURCE, st[0].MPI_TAG,
           in[0][0], in[0][1]);
    EXPECT(in[1][0] == left && in[1][1] == 4242, "ring receive got %d %d", in[1][0], in[1][1]);
    check_all(&a, 1);
    check_all(&b, 2);
    free_round(&a);
    free_round(&b);
    report("interleaved_with_point_to_point");
}

/* A rank blocked in a point-to-point receive keeps its nonblocking collective moving. */
static void t_progress_in_recv(void)
{
    int n = 50000;
    double *buf = dalloc(n);
    for (long i = 0; i < n; i++)
        buf[i] = t_rank == 0 ? val(3, 0, i) : -1;
    MPI_Request r;
    CHK(MPI_Ibcast(buf, n, MPI_DOUBLE, 0, MPI_COMM_WORLD, &r));
    int token = 0;
    if (t_size > 1) {
        /* each rank waits for its collective before passing the token on */
        if (t_rank == 0) {
            CHK(MPI_Send(&token, 1, MPI_INT, 1, 77, MPI_COMM_WORLD));
            CHK(MPI_Recv(&token, 1, MPI_INT, t_size - 1, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        } else {
            CHK(MPI_Recv(&token, 1, MPI_INT, t_rank - 1, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHK(MPI_Wait(&r, MPI_STATUS_IGNORE));
            CHK(MPI_Send(&token, 1, MPI_INT, (t_rank + 1) % t_size, 77, MPI_COMM_WORLD));
        }
    }
    if (r != MPI_REQUEST_NULL)
        CHK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (long i = 0; i < n; i++)
        if (buf[i] != val(3, 0, i)) {
            FAILF("[%ld] = %g", i, buf[i]);
            break;
        }
    free(buf);
    report("progress_inside_blocking_receive");
}

/* Blocking and nonblocking collectives started in different orders on different ranks (as
 * mpi4py's agree fallback does): MPICH and Open MPI match the two kinds apart. */
static void t_blocking_nonblocking_apart(void)
{
    for (int root = 0; root < t_size; root++) {
        int flag = t_rank == root ? 11 : 13, result = -1;
        MPI_Request r;
        CHK(MPI_Barrier(MPI_COMM_WORLD));
        if (t_rank == root) {
            CHK(MPI_Iallreduce(&flag, &result, 1, MPI_INT, MPI_BAND, MPI_COMM_WORLD, &r));
            CHK(MPI_Barrier(MPI_COMM_WORLD));
        } else {
            CHK(MPI_Barrier(MPI_COMM_WORLD));
            CHK(MPI_Iallreduce(&flag, &result, 1, MPI_INT, MPI_BAND, MPI_COMM_WORLD, &r));
        }
        CHK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        EXPECT(result == (t_size > 1 ? (11 & 13) : 11), "root %d: result %d", root, result);
    }
    report("blocking_and_nonblocking_matched_apart");
}

/* Waitany, Waitsome, Test and Request_get_status on collective requests. */
static void t_completion_calls(void)
{
    int n = 100;
    double *in = dalloc(n), *out[3];
    for (long i = 0; i < n; i++)
        in[i] = val(4, t_rank, i);
    MPI_Request req[3];
    for (int j = 0; j < 3; j++) {
        out[j] = dalloc(n);
        CHK(MPI_Iallreduce(in, out[j], n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req[j]));
    }
    int idx = -1, flag = 0;
    CHK(MPI_Waitany(3, req, &idx, MPI_STATUS_IGNORE));
    EXPECT(idx >= 0 && idx < 3 && req[idx] == MPI_REQUEST_NULL, "waitany index %d", idx);
    int outcount = 0, indices[3];
    while (outcount == 0)
        CHK(MPI_Waitsome(3, req, &outcount, indices, MPI_STATUSES_IGNORE));
    for (int j = 0; j < 3; j++) {
        if (req[j] == MPI_REQUEST_NULL)
            continue;
        do
            CHK(MPI_Request_get_status(req[j], &flag, MPI_STATUS_IGNORE));
        while (!flag);
        EXPECT(req[j] != MPI_REQUEST_NULL, "request_get_status freed the request");
        flag = 0;
        while (!flag)
            CHK(MPI_Test(&req[j], &flag, MPI_STATUS_IGNORE));
        EXPECT(req[j] == MPI_REQUEST_NULL, "test left the request");
    }
    for (int j = 0; j < 3; j++) {
        for (long i = 0; i < n; i++)
            if (out[j][i] != sum_over(4, 0, t_size, i)) {
                FAILF("allreduce %d [%ld] = %g", j, i, out[j][i]);
                break;
            }
        free(out[j]);
    }
    free(in);
    report("completion_calls");
}

/* The datatype of a nonblocking collective may be freed as soon as the call returns. */
static void t_type_freed_early(void)
{
    int n = 300;
    MPI_Datatype pair;
    MPI_Type_vector(2, 1, 3, MPI_INT, &pair); /* ints 0 and 3 of every 4 */
    MPI_Datatype spaced;
    MPI_Type_create_resized(pair, 0, 4 * sizeof(int), &spaced);
    MPI_Type_free(&pair);
    MPI_Type_commit(&spaced);
    int *b = malloc(sizeof(int) * 4 * n), *g = malloc(sizeof(int) * 4 * n * t_size);
    for (int i = 0; i < 4 * n; i++)
        b[i] = t_rank == 0 ? i : -1;
    for (int i = 0; i < 4 * n * t_size; i++)
        g[i] = -1;
    MPI_Request r[2];
    CHK(MPI_Ibcast(b, n, spaced, 0, MPI_COMM_WORLD, &r[0]));
    CHK(MPI_Type_free(&spaced));
    CHK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
    MPI_Type_vector(2, 1, 3, MPI_INT, &pair);
    MPI_Type_create_resized(pair, 0, 4 * sizeof(int), &spaced);
    MPI_Type_free(&pair);
    MPI_Type_commit(&spaced);
    CHK(MPI_Iallgather(b, n, spaced, g, n, spaced, MPI_COMM_WORLD, &r[1]));
    CHK(MPI_Type_free(&spaced));
    CHK(MPI_Wait(&r[1], MPI_STATUS_IGNORE));
    for (int i = 0; i < 4 * n; i++) {
        int want = (i % 4 == 0 || i % 4 == 3) ? i : (t_rank == 0 ? i : -1);
        if (b[i] != want) {
            FAILF("ibcast [%d] = %d, want %d", i, b[i], want);
            break;
        }
    }
    for (int r0 = 0; r0 < t_size && !t_fail; r0++)
        for (int i = 0; i < 4 * n; i++) {
            int want = (i % 4 == 0 || i % 4 == 3) ? i : -1;
            if (g[4 * n * r0 + i] != want) {
                FAILF("iallgather block %d [%d] = %d, want %d", r0, i, g[4 * n * r0 + i], want);
                break;
            }
        }
    free(b);
    free(g);
    report("datatype_freed_while_pending");
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    t_all_outstanding();
    t_interleaved();
    t_progress_in_recv();
    t_blocking_nonblocking_apart();
    t_completion_calls();
    t_type_freed_early();
    return t_finish();
}
