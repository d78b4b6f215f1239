/* ranks: 1 2 3 4 7 11 */
/* Rooted collectives: Bcast, Reduce, Gather(v), Scatter(v) with several roots, counts from 0
 * to 100k doubles, and MPI_IN_PLACE at the root (11 ranks: the binomial gather and scatter). */
#include "coll_common.h"

static int roots(int *out)
{
    int n = 0;
    out[n++] = 0;
    if (t_size > 1)
        out[n++] = t_size - 1;
    if (t_size > 2)
        out[n++] = t_size / 2;
    return n;
}

static void t_bcast(void)
{
    int rs[3], nr = roots(rs);
    for (int ri = 0; ri < nr; ri++)
        for (int c = 0; c < N_COUNTS; c++) {
            int root = rs[ri], n = t_counts[c];
            double *buf = dalloc(n);
            for (long i = 0; i < n; i++)
                buf[i] = t_rank == root ? val(c, root, i) : -1;
            CHK(MPI_Bcast(buf, n, MPI_DOUBLE, root, MPI_COMM_WORLD));
            for (long i = 0; i < n; i++)
                if (buf[i] != val(c, root, i)) {
                    FAILF("root %d count %d: [%ld] = %g", root, n, i, buf[i]);
                    break;
                }
            free(buf);
        }
    report("bcast");
}

static void t_reduce(int in_place)
{
    int rs[3], nr = roots(rs);
    for (int ri = 0; ri < nr; ri++)
        for (int c = 0; c < N_COUNTS; c++) {
            int root = rs[ri], n = t_counts[c];
            /* MPICH's own in-place reduce fails at a non-zero root above 2 KiB. */
            if (in_place && n > 200)
                n = 200;
            double *in = dalloc(n), *out = dalloc(n);
            for (long i = 0; i < n; i++) {
                in[i] = val(c, t_rank, i);
                out[i] = in_place && t_rank == root ? in[i] : -1;
            }
            const void *send = in_place && t_rank == root ? MPI_IN_PLACE : in;
            CHK(MPI_Reduce(send, out, n, MPI_DOUBLE, MPI_SUM, root, MPI_COMM_WORLD));
            if (t_rank == root)
                for (long i = 0; i < n; i++) {
                    double want = 0;
                    for (int r = 0; r < t_size; r++)
                        want += val(c, r, i);
                    if (out[i] != want) {
                        FAILF("root %d count %d: [%ld] = %g, want %g", root, n, i, out[i], want);
                        break;
                    }
                }
            free(in);
            free(out);
        }
    report(in_place ? "reduce_in_place" : "reduce");
}

static void t_gather(int in_place, int vector)
{
    int rs[3], nr = roots(rs);
    for (int ri = 0; ri < nr; ri++)
        for (int c = 0; c < N_COUNTS; c++) {
            int root = rs[ri], n = t_counts[c];
            /* gatherv: rank r sends n + r elements (n - r when that is smaller), gaps between */
            int *counts = malloc(sizeof(int) * t_size), *displs = malloc(sizeof(int) * t_size);
            long total = 0;
            for (int r = 0; r < t_size; r++) {
                counts[r] = vector ? (r % 2 ? n + r : (n > r ? n - r : 0)) : n;
                displs[r] = (int)total + (vector ? 3 : 0);
                total = displs[r] + counts[r];
            }
            double *in = dalloc(counts[t_rank]), *out = dalloc(total);
            for (long i = 0; i < counts[t_rank]; i++)
                in[i] = val(c, t_rank, i);
            for (long i = 0; i < total; i++)
                out[i] = -1;
            const void *send = in;
            if (in_place && t_rank == root) {
                memcpy(out + displs[root], in, sizeof(double) * counts[root]);
                send = MPI_IN_PLACE;
            }
            if (vector)
                CHK(MPI_Gatherv(send, counts[t_rank], MPI_DOUBLE, out, counts, displs, MPI_DOUBLE,
                                root, MPI_COMM_WORLD));
            else
                CHK(MPI_Gather(send, n, MPI_DOUBLE, out, n, MPI_DOUBLE, root, MPI_COMM_WORLD));
            if (t_rank == root)
                for (int r = 0; r < t_size && !t_fail; r++) {
                    for (long i = 0; i < counts[r]; i++)
                        if (out[displs[r] + i] != val(c, r, i)) {
                            FAILF("root %d count %d: from %d [%ld] = %g", root, n, r, i,
                                  out[displs[r] + i]);
                            break;
                        }
                    if (vector && out[displs[r] - 1] != -1)
                        FAILF("root %d count %d: gap before %d overwritten", root, n, r);
                }
            free(in);
            free(out);
            free(counts);
            free(displs);
        }
    report(vector ? (in_place ? "gatherv_in_place" : "gatherv")
                  : (in_place ? "gather_in_place" : "gather"));
}

static void t_scatter(int in_place, int vector)
{
    int rs[3], nr = roots(rs);
    for (int ri = 0; ri < nr; ri++)
        for (int c = 0; c < N_COUNTS; c++) {
            int root = rs[ri], n = t_counts[c];
            int *counts = malloc(sizeof(int) * t_size), *displs = malloc(sizeof(int) * t_size);
            long total = 0;
            for (int r = 0; r < t_size; r++) {
                counts[r] = vector ? (r % 2 ? n + r : (n > r ? n - r : 0)) : n;
                displs[r] = (int)total + (vector ? 2 : 0);
                total = displs[r] + counts[r];
            }
            double *in = dalloc(total), *out = dalloc(counts[t_rank]);
            for (int r = 0; r < t_size; r++)
                for (long i = 0; i < counts[r]; i++)
                    in[displs[r] + i] = t_rank == root ? val(c, r, i) : -2;
            for (long i = 0; i < counts[t_rank]; i++)
                out[i] = -1;
            void *recv = in_place && t_rank == root ? MPI_IN_PLACE : out;
            if (vector)
                CHK(MPI_Scatterv(in, counts, displs, MPI_DOUBLE, recv, counts[t_rank], MPI_DOUBLE,
                                 root, MPI_COMM_WORLD));
            else
                CHK(MPI_Scatter(in, n, MPI_DOUBLE, recv, n, MPI_DOUBLE, root, MPI_COMM_WORLD));
            double *got = recv == MPI_IN_PLACE ? in + displs[root] : out;
            for (long i = 0; i < counts[t_rank]; i++)
                if (got[i] != val(c, t_rank, i)) {
                    FAILF("root %d count %d: [%ld] = %g", root, n, i, got[i]);
                    break;
                }
            free(in);
            free(out);
            free(counts);
            free(displs);
        }
    report(vector ? (in_place ? "scatterv_in_place" : "scatterv")
                  : (in_place ? "scatter_in_place" : "scatter"));
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    t_bcast();
    t_reduce(0);
    t_reduce(1);
    for (int v = 0; v < 2; v++) {
        t_gather(0, v);
        t_gather(1, v);
        t_scatter(0, v);
        t_scatter(1, v);
    }
    return t_finish();
}
