/* ranks: 1 2 3 4 7 */
/* User-defined operations and derived datatypes: a non-commutative op (2x2 matrix product)
 * through every reducing collective, a commutative user op on a derived type (large enough
 * for the reduce-scatter/allgather algorithms), and a strided type with holes through the
 * collectives that move data. */
#include "coll_common.h"

typedef struct { double a, b, c, d; } mat;

static MPI_Datatype mat_t, strided_t;
static MPI_Op matmul_op, matadd_op;

/* inout = in * inout, MPI's operand order */
static void matmul(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    mat *x = in, *y = inout;
    for (int i = 0; i < *len; i++) {
        mat p = {x[i].a * y[i].a + x[i].b * y[i].c, x[i].a * y[i].b + x[i].b * y[i].d,
                 x[i].c * y[i].a + x[i].d * y[i].c, x[i].c * y[i].b + x[i].d * y[i].d};
        y[i] = p;
    }
}

static void matadd(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    mat *x = in, *y = inout;
    for (int i = 0; i < *len; i++) {
        y[i].a += x[i].a;
        y[i].b += x[i].b;
        y[i].c += x[i].c;
        y[i].d += x[i].d;
    }
}

/* Rank r's i-th matrix: small entries, so products over 8 ranks stay exact. */
static mat mval(int r, long i)
{
    mat m = {(double)((r + i) % 3), 1, 1, (double)((r * i + 1) % 2)};
    return m;
}

static mat mmul(mat x, mat y)
{
    mat p = {x.a * y.a + x.b * y.c, x.a * y.b + x.b * y.d, x.c * y.a + x.d * y.c,
             x.c * y.b + x.d * y.d};
    return p;
}

/* Product of the matrices of ranks lo..hi-1, in rank order. */
static mat prod(int lo, int hi, long i)
{
    mat p = {1, 0, 0, 1};
    for (int r = lo; r < hi; r++)
        p = mmul(p, mval(r, i));
    return p;
}

static int meq(mat x, mat y)
{
    return x.a == y.a && x.b == y.b && x.c == y.c && x.d == y.d;
}

static mat *malloc_mats(long n)
{
    return malloc(sizeof(mat) * (size_t)(n > 0 ? n : 1));
}

static const int m_counts[] = {1, 7, 1000};
#define N_M ((int)(sizeof m_counts / sizeof m_counts[0]))

#define CHECK_MATS(buf, n, want_expr, what) do { \
        for (long i_ = 0; i_ < (n); i_++) { long i = i_; mat w_ = (want_expr); \
            if (!meq((buf)[i], w_)) { FAILF("%s count %ld: [%ld] = (%g %g %g %g), want (%g %g %g %g)", \
                    what, (long)(n), i, (buf)[i].a, (buf)[i].b, (buf)[i].c, (buf)[i].d, \
                    w_.a, w_.b, w_.c, w_.d); break; } } } while (0)

static void t_noncommutative(void)
{
    for (int k = 0; k < N_M; k++) {
        int n = m_counts[k];
        mat *in = malloc_mats(n), *out = malloc_mats(n);
        for (long i = 0; i < n; i++)
            in[i] = mval(t_rank, i);
        for (int root = 0; root < t_size; root += (t_size > 2 ? t_size / 2 : 1)) {
            CHK(MPI_Reduce(in, out, n, mat_t, matmul_op, root, MPI_COMM_WORLD));
            if (t_rank == root)
                CHECK_MATS(out, n, prod(0, t_size, i), "reduce");
        }
        CHK(MPI_Allreduce(in, out, n, mat_t, matmul_op, MPI_COMM_WORLD));
        CHECK_MATS(out, n, prod(0, t_size, i), "allreduce");
        memcpy(out, in, sizeof(mat) * n);
        CHK(MPI_Allreduce(MPI_IN_PLACE, out, n, mat_t, matmul_op, MPI_COMM_WORLD));
        CHECK_MATS(out, n, prod(0, t_size, i), "allreduce in place");
        CHK(MPI_Scan(in, out, n, mat_t, matmul_op, MPI_COMM_WORLD));
        CHECK_MATS(out, n, prod(0, t_rank + 1, i), "scan");
        CHK(MPI_Exscan(in, out, n, mat_t, matmul_op, MPI_COMM_WORLD));
        if (t_rank > 0)
            CHECK_MATS(out, n, prod(0, t_rank, i), "exscan");
        free(in);
        free(out);
    }
    report("noncommutative_reduce_allreduce_scan");
}

static void t_noncommutative_scatter(int block)
{
    for (int k = 0; k < N_M; k++) {
        int n = m_counts[k];
        int *counts = malloc(sizeof(int) * t_size);
        long total = 0, before = 0;
        for (int r = 0; r < t_size; r++) {
            counts[r] = block ? n : n + (r % 3);
            if (r < t_rank)
                before += counts[r];
            total += counts[r];
        }
        mat *in = malloc_mats(total), *out = malloc_mats(counts[t_rank]);
        for (long i = 0; i < total; i++)
            in[i] = mval(t_rank, i);
        if (block)
            CHK(MPI_Reduce_scatter_block(in, out, n, mat_t, matmul_op, MPI_COMM_WORLD));
        else
            CHK(MPI_Reduce_scatter(in, out, counts, mat_t, matmul_op, MPI_COMM_WORLD));
        CHECK_MATS(out, counts[t_rank], prod(0, t_size, before + i), "reduce_scatter");
        free(in);
        free(out);
        free(counts);
    }
    report(block ? "noncommutative_reduce_scatter_block" : "noncommutative_reduce_scatter");
}

static mat msum(long i)
{
    mat s = {0, 0, 0, 0};
    for (int r = 0; r < t_size; r++) {
        mat m = mval(r, i);
        s.a += m.a;
        s.b += m.b;
        s.c += m.c;
        s.d += m.d;
    }
    return s;
}

static void t_commutative_user_op(void)
{
    for (int k = 0; k < N_M; k++) {
        int n = m_counts[k];
        mat *in = malloc_mats(n * t_size), *out = malloc_mats(n * t_size);
        for (long i = 0; i < (long)n * t_size; i++)
            in[i] = mval(t_rank, i);
        CHK(MPI_Allreduce(in, out, n, mat_t, matadd_op, MPI_COMM_WORLD));
        CHECK_MATS(out, n, msum(i), "allreduce");
        CHK(MPI_Reduce(in, out, n, mat_t, matadd_op, t_size - 1, MPI_COMM_WORLD));
        if (t_rank == t_size - 1)
            CHECK_MATS(out, n, msum(i), "reduce");
        CHK(MPI_Reduce_scatter_block(in, out, n, mat_t, matadd_op, MPI_COMM_WORLD));
        CHECK_MATS(out, n, msum((long)t_rank * n + i), "reduce_scatter_block");
        free(in);
        free(out);
    }
    report("commutative_user_op");
}

/* Element j of strided_t holds 3 doubles at stride 2, and consecutive elements are 7 doubles
 * apart: holes inside and between elements. */
#define SPAN 7
static double sval(int r, long j, int e)
{
    return (double)(r * 1000 + (j * 3 + e) % 997);
}

static double *strided_alloc(long n, double fill)
{
    double *p = dalloc(n * SPAN);
    for (long i = 0; i < n * SPAN; i++)
        p[i] = fill;
    return p;
}

static void strided_fill(double *p, long n, int r)
{
    for (long j = 0; j < n; j++)
        for (int e = 0; e < 3; e++)
            p[j * SPAN + 2 * e] = sval(r, j, e);
}

/* Checks n strided elements from rank r, and that the holes still hold fill. */
static int strided_ok(const double *p, long n, int r, double fill)
{
    for (long j = 0; j < n; j++)
        for (int x = 0; x < SPAN; x++) {
            double want = (x % 2 == 0 && x / 2 < 3) ? sval(r, j, x / 2) : fill;
            if (p[j * SPAN + x] != want) {
                FAILF("element %ld of rank %d, double %d: %g, want %g", j, r, x, p[j * SPAN + x], want);
                return 0;
            }
        }
    return 1;
}

static void t_derived(void)
{
    static const int counts[] = {1, 5, 3000};
    for (int k = 0; k < 3; k++) {
        int n = counts[k];
        int root = t_size - 1;
        /* Bcast in the strided type */
        double *buf = strided_alloc(n, -1);
        if (t_rank == root)
            strided_fill(buf, n, root);
        CHK(MPI_Bcast(buf, n, strided_t, root, MPI_COMM_WORLD));
        strided_ok(buf, n, root, -1);
        free(buf);

        /* Gather: strided on the senders, plain doubles at the root */
        double *mine = strided_alloc(n, -3), *all = dalloc(3L * n * t_size);
        strided_fill(mine, n, t_rank);
        CHK(MPI_Gather(mine, n, strided_t, all, 3 * n, MPI_DOUBLE, root, MPI_COMM_WORLD));
        if (t_rank == root)
            for (int r = 0; r < t_size && !t_fail; r++)
                for (long j = 0; j < n; j++)
                    for (int e = 0; e < 3; e++)
                        if (all[(r * (long)n + j) * 3 + e] != sval(r, j, e))
                            FAILF("gather: rank %d element %ld", r, j);

        /* Scatter it back into the strided type */
        double *back = strided_alloc(n, -4);
        CHK(MPI_Scatter(all, 3 * n, MPI_DOUBLE, back, n, strided_t, root, MPI_COMM_WORLD));
        strided_ok(back, n, t_rank, -4);
        free(back);

        /* Allgather into the strided type */
        double *every = strided_alloc((long)n * t_size, -5);
        CHK(MPI_Allgather(mine, n, strided_t, every, n, strided_t, MPI_COMM_WORLD));
        for (int r = 0; r < t_size; r++)
            strided_ok(every + (long)r * n * SPAN, n, r, -5);

        /* Alltoall: strided both ways (block d of every rank's send buffer is its own) */
        double *recv = strided_alloc((long)n * t_size, -6);
        CHK(MPI_Alltoall(every, n, strided_t, recv, n, strided_t, MPI_COMM_WORLD));
        for (int r = 0; r < t_size; r++)
            strided_ok(recv + (long)r * n * SPAN, n, t_rank, -6);
        free(recv);
        free(every);
        free(mine);
        free(all);
    }
    report("derived_datatypes");
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    MPI_Type_contiguous(4, MPI_DOUBLE, &mat_t);
    MPI_Type_commit(&mat_t);
    MPI_Datatype vec;
    MPI_Type_vector(3, 1, 2, MPI_DOUBLE, &vec);
    MPI_Type_create_resized(vec, 0, SPAN * sizeof(double), &strided_t);
    MPI_Type_commit(&strided_t);
    MPI_Type_free(&vec);
    MPI_Op_create(matmul, 0, &matmul_op);
    MPI_Op_create(matadd, 1, &matadd_op);

    t_noncommutative();
    t_noncommutative_scatter(0);
    t_noncommutative_scatter(1);
    t_commutative_user_op();
    t_derived();

    MPI_Op_free(&matmul_op);
    MPI_Op_free(&matadd_op);
    MPI_Type_free(&mat_t);
    MPI_Type_free(&strided_t);
    return t_finish();
}
