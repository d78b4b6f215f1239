/* ranks: 1 2 3 4 8 */
/* Collectives without a root: Barrier, Allreduce, Allgather(v), Alltoall(v, w),
 * Reduce_scatter(_block), Scan, Exscan, with counts from 0 to 100k doubles and MPI_IN_PLACE. */
#include "coll_common.h"

static double sum_over(int k, int lo, int hi, long i)
{
    double s = 0;
    for (int r = lo; r < hi; r++)
        s += val(k, r, i);
    return s;
}

#define CHECK_ARRAY(buf, n, want_expr, what) do { \
        for (long i_ = 0; i_ < (n); i_++) { long i = i_; double w_ = (want_expr); \
            if ((buf)[i] != w_) { FAILF("%s count %d: [%ld] = %g, want %g", what, nn, i, \
                                        (buf)[i], w_); break; } } } while (0)

static void t_barrier(void)
{
    for (int i = 0; i < 5; i++)
        CHK(MPI_Barrier(MPI_COMM_WORLD));
    report("barrier");
}

static void t_allreduce(int in_place)
{
    for (int c = 0; c < N_COUNTS; c++) {
        int nn = t_counts[c];
        double *in = dalloc(nn), *out = dalloc(nn);
        for (long i = 0; i < nn; i++) {
            in[i] = val(c, t_rank, i);
            out[i] = in_place ? in[i] : -1;
        }
        CHK(MPI_Allreduce(in_place ? MPI_IN_PLACE : in, out, nn, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
        CHECK_ARRAY(out, nn, sum_over(c, 0, t_size, i), "sum");
        /* max: another op, and a count that is not a multiple of the ranks */
        int m = nn > 3 ? nn - 3 : nn;
        CHK(MPI_Allreduce(in, out, m, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
        for (long i = 0; i < m; i++) {
            double w = 0;
            for (int r = 0; r < t_size; r++)
                w = val(c, r, i) > w ? val(c, r, i) : w;
            if (out[i] != w) {
                FAILF("max count %d: [%ld] = %g, want %g", m, i, out[i], w);
                break;
            }
        }
        free(in);
        free(out);
    }
    report(in_place ? "allreduce_in_place" : "allreduce");
}

static void t_allgather(int in_place, int vector)
{
    for (int c = 0; c < N_COUNTS; c++) {
        int nn = t_counts[c];
        if (nn == 100000 && t_size > 4)
            nn = 30000;
        int *counts = malloc(sizeof(int) * t_size), *displs = malloc(sizeof(int) * t_size);
        long total = 0;
        for (int r = 0; r < t_size; r++) {
            counts[r] = vector ? (r % 2 ? nn + r : (nn > r ? nn - r : 0)) : nn;
            /* gaps only with several ranks: MPICH 4.0 ignores displs on one rank */
            displs[r] = (int)total + (vector && t_size > 1 ? 1 : 0);
            total = displs[r] + counts[r];
        }
        double *in = dalloc(counts[t_rank]), *out = dalloc(total);
        for (long i = 0; i < counts[t_rank]; i++)
            in[i] = val(c, t_rank, i);
        for (long i = 0; i < total; i++)
            out[i] = -1;
        const void *send = in;
        if (in_place) {
            memcpy(out + displs[t_rank], in, sizeof(double) * counts[t_rank]);
            send = MPI_IN_PLACE;
        }
        if (vector)
            CHK(MPI_Allgatherv(send, counts[t_rank], MPI_DOUBLE, out, counts, displs, MPI_DOUBLE,
                               MPI_COMM_WORLD));
        else
            CHK(MPI_Allgather(send, nn, MPI_DOUBLE, out, nn, MPI_DOUBLE, MPI_COMM_WORLD));
        for (int r = 0; r < t_size && !t_fail; r++)
            for (long i = 0; i < counts[r]; i++)
                if (out[displs[r] + i] != val(c, r, i)) {
                    FAILF("count %d: from %d [%ld] = %g", nn, r, i, out[displs[r] + i]);
                    break;
                }
        free(in);
        free(out);
        free(counts);
        free(displs);
    }
    report(vector ? (in_place ? "allgatherv_in_place" : "allgatherv")
                  : (in_place ? "allgather_in_place" : "allgather"));
}

/* Element i of the block rank s sends to rank d. */
static double a2a(int c, int s, int d, long i)
{
    return (double)((c * 5 + s * 101 + d * 17 + i) % 9973);
}

/* mode 0: Alltoall, 1: Alltoallv, 2: Alltoallw */
static void t_alltoall(int in_place, int mode)
{
    for (int c = 0; c < N_COUNTS; c++) {
        int nn = t_counts[c];
        if (nn == 100000)
            nn = t_size > 4 ? 5000 : 20000;
        int *sc = malloc(sizeof(int) * t_size), *sd = malloc(sizeof(int) * t_size);
        int *rc = malloc(sizeof(int) * t_size), *rd = malloc(sizeof(int) * t_size);
        MPI_Datatype *types = malloc(sizeof(MPI_Datatype) * t_size);
        long stotal = 0, rtotal = 0;
        for (int r = 0; r < t_size; r++) {
            /* v and w: rank s sends (s + d) % 3 + nn elements to d */
            sc[r] = mode ? (t_rank + r) % 3 + nn : nn;
            rc[r] = mode ? (r + t_rank) % 3 + nn : nn;
            /* gaps only with several ranks: Open MPI 4.1 scales alltoallw's byte
             * displacements on one rank */
            sd[r] = (int)stotal + (mode && t_size > 1 ? 2 : 0);
            rd[r] = (int)rtotal + (mode && t_size > 1 ? 1 : 0);
            stotal = sd[r] + sc[r];
            rtotal = rd[r] + rc[r];
            types[r] = MPI_DOUBLE;
        }
        if (in_place) {
            memcpy(sc, rc, sizeof(int) * t_size);
            memcpy(sd, rd, sizeof(int) * t_size);
            stotal = rtotal;
        }
        double *in = dalloc(stotal), *out = dalloc(rtotal);
        double *src = in_place ? out : in;
        for (long i = 0; i < rtotal; i++)
            out[i] = -1;
        for (int d = 0; d < t_size; d++)
            for (long i = 0; i < sc[d]; i++)
                src[sd[d] + i] = a2a(c, t_rank, d, i);
        const void *send = in_place ? MPI_IN_PLACE : in;
        if (mode == 0) {
            CHK(MPI_Alltoall(send, nn, MPI_DOUBLE, out, nn, MPI_DOUBLE, MPI_COMM_WORLD));
        } else if (mode == 1) {
            CHK(MPI_Alltoallv(send, sc, sd, MPI_DOUBLE, out, rc, rd, MPI_DOUBLE, MPI_COMM_WORLD));
        } else {
            for (int r = 0; r < t_size; r++) {
                sd[r] *= (int)sizeof(double);
                rd[r] *= (int)sizeof(double);
            }
            CHK(MPI_Alltoallw(send, sc, sd, types, out, rc, rd, types, MPI_COMM_WORLD));
            for (int r = 0; r < t_size; r++)
                rd[r] /= (int)sizeof(double);
        }
        for (int s = 0; s < t_size && !t_fail; s++)
            for (long i = 0; i < rc[s]; i++)
                if (out[rd[s] + i] != a2a(c, s, t_rank, i)) {
                    FAILF("count %d: from %d [%ld] = %g", nn, s, i, out[rd[s] + i]);
                    break;
                }
        free(in);
        free(out);
        free(sc);
        free(sd);
        free(rc);
        free(rd);
        free(types);
    }
    static const char *names[2][3] = {{"alltoall", "alltoallv", "alltoallw"},
                                      {"alltoall_in_place", "alltoallv_in_place", "alltoallw_in_place"}};
    report(names[in_place][mode]);
}

static void t_reduce_scatter(int in_place, int block)
{
    for (int c = 0; c < N_COUNTS; c++) {
        int nn = t_counts[c];
        if (nn == 100000)
            nn = 20000;
        int *counts = malloc(sizeof(int) * t_size);
        long total = 0;
        for (int r = 0; r < t_size; r++) {
            /* a block never longer than what precedes it: MPICH 4.0's in-place
             * reduce_scatter copies it down with an overlapping memcpy */
            counts[r] = block ? nn : (r % 2 ? nn / 2 : nn);
            total += counts[r];
        }
        long before = 0;
        for (int r = 0; r < t_rank; r++)
            before += counts[r];
        double *in = dalloc(total), *out = dalloc(in_place ? total : counts[t_rank]);
        for (long i = 0; i < total; i++)
            in[i] = val(c, t_rank, i);
        if (in_place)
            memcpy(out, in, sizeof(double) * total);
        const void *send = in_place ? MPI_IN_PLACE : in;
        if (block)
            CHK(MPI_Reduce_scatter_block(send, out, nn, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
        else
            CHK(MPI_Reduce_scatter(send, out, counts, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
        CHECK_ARRAY(out, counts[t_rank], sum_over(c, 0, t_size, before + i), "sum");
        free(in);
        free(out);
        free(counts);
    }
    report(block ? (in_place ? "reduce_scatter_block_in_place" : "reduce_scatter_block")
                 : (in_place ? "reduce_scatter_in_place" : "reduce_scatter"));
}

static void t_scan(int in_place, int exclusive)
{
    for (int c = 0; c < N_COUNTS; c++) {
        int nn = t_counts[c];
        double *in = dalloc(nn), *out = dalloc(nn);
        for (long i = 0; i < nn; i++) {
            in[i] = val(c, t_rank, i);
            out[i] = in_place ? in[i] : -1;
        }
        const void *send = in_place ? MPI_IN_PLACE : in;
        if (exclusive) {
            CHK(MPI_Exscan(send, out, nn, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
            if (t_rank > 0)
                CHECK_ARRAY(out, nn, sum_over(c, 0, t_rank, i), "exscan");
        } else {
            CHK(MPI_Scan(send, out, nn, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
            CHECK_ARRAY(out, nn, sum_over(c, 0, t_rank + 1, i), "scan");
        }
        free(in);
        free(out);
    }
    report(exclusive ? (in_place ? "exscan_in_place" : "exscan")
                     : (in_place ? "scan_in_place" : "scan"));
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    t_barrier();
    for (int ip = 0; ip < 2; ip++) {
        t_allreduce(ip);
        t_allgather(ip, 0);
        t_allgather(ip, 1);
        for (int m = 0; m < 3; m++)
            t_alltoall(ip, m);
        t_reduce_scatter(ip, 0);
        t_reduce_scatter(ip, 1);
        t_scan(ip, 0);
        t_scan(ip, 1);
    }
    return t_finish();
}
