/* ranks: 2 */
/* Derived datatypes on the send and the receive side: the data lands in the
 * right places, holes stay untouched, statuses count in the right units. */
#include "common.h"

#define HOLE (-555)

static int peer;

static void holes(int *b, int n)
{
    for (int i = 0; i < n; i++)
        b[i] = HOLE;
}

/* Contiguous ints sent, strided vector received (and the reverse). */
static void t_vector(int big)
{
    const int blocks = big ? 70000 : 10, blen = 3, stride = 5;
    const int n = blocks * blen, span = blocks * stride;
    MPI_Datatype vec;
    MPI_Type_vector(blocks, blen, stride, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    int *flat = malloc(sizeof(int) * n), *sp = malloc(sizeof(int) * span);
    MPI_Status st;
    const int tag = big ? 2 : 1;
    if (t_rank == 0) {
        fill(flat, n, 0, tag, 0);
        CHK(MPI_Send(flat, n, MPI_INT, peer, tag, MPI_COMM_WORLD));
        /* send side: strided buffer, holes are not sent */
        for (int b = 0; b < blocks; b++)
            for (int j = 0; j < stride; j++)
                sp[b * stride + j] = j < blen ? pat(0, tag, 1, b * blen + j) : HOLE;
        CHK(MPI_Send(sp, 1, vec, peer, tag, MPI_COMM_WORLD));
    } else if (t_rank == 1) {
        holes(sp, span);
        CHK(MPI_Recv(sp, 1, vec, peer, tag, MPI_COMM_WORLD, &st));
        int bad = -1;
        for (int b = 0; b < blocks && bad < 0; b++)
            for (int j = 0; j < stride; j++) {
                int want = j < blen ? pat(0, tag, 0, b * blen + j) : HOLE;
                if (sp[b * stride + j] != want) {
                    bad = b * stride + j;
                    break;
                }
            }
        EXPECT(bad < 0, "vector receive: element %d wrong", bad);
        int c = -1, e = -1;
        MPI_Get_count(&st, vec, &c);
        MPI_Get_elements(&st, MPI_INT, &e);
        EXPECT(c == 1 && e == n, "Get_count %d Get_elements %d", c, e);
        CHK(MPI_Recv(flat, n, MPI_INT, peer, tag, MPI_COMM_WORLD, &st));
        EXPECT_MSG(flat, n, 0, tag, 1, st);
    }
    MPI_Type_free(&vec);
    free(flat);
    free(sp);
    report(big ? "vector_large" : "vector");
}

/* Indexed layout with holes on both sides, with different layouts. */
static void t_indexed(void)
{
    int sbl[3] = {2, 1, 4}, sdisp[3] = {0, 5, 9};      /* 7 ints in 13 */
    int rbl[4] = {1, 3, 1, 2}, rdisp[4] = {0, 2, 8, 12}; /* 7 ints in 14 */
    MPI_Datatype sidx, ridx;
    MPI_Type_indexed(3, sbl, sdisp, MPI_INT, &sidx);
    MPI_Type_indexed(4, rbl, rdisp, MPI_INT, &ridx);
    MPI_Type_commit(&sidx);
    MPI_Type_commit(&ridx);
    int buf[2 * 14];
    MPI_Status st;
    if (t_rank == 0) {
        for (int i = 0; i < 2 * 13; i++)
            buf[i] = 1000 + i;
        CHK(MPI_Send(buf, 2, sidx, peer, 3, MPI_COMM_WORLD));
    } else if (t_rank == 1) {
        /* expected sequence of sent values */
        int want[14], k = 0;
        for (int c = 0; c < 2; c++)
            for (int b = 0; b < 3; b++)
                for (int j = 0; j < sbl[b]; j++)
                    want[k++] = 1000 + c * 13 + sdisp[b] + j;
        /* extent of ridx is 14 */
        holes(buf, 2 * 14);
        CHK(MPI_Recv(buf, 2, ridx, peer, 3, MPI_COMM_WORLD, &st));
        int expect[2 * 14];
        holes(expect, 2 * 14);
        k = 0;
        for (int c = 0; c < 2; c++)
            for (int b = 0; b < 4; b++)
                for (int j = 0; j < rbl[b]; j++)
                    expect[c * 14 + rdisp[b] + j] = want[k++];
        for (int i = 0; i < 2 * 14; i++)
            if (buf[i] != expect[i]) {
                FAILF("indexed receive: [%d] = %d, expected %d", i, buf[i], expect[i]);
                break;
            }
        int c = -1;
        MPI_Get_count(&st, ridx, &c);
        EXPECT(c == 2, "Get_count %d", c);
    }
    MPI_Type_free(&sidx);
    MPI_Type_free(&ridx);
    report("indexed");
}

struct rec {
    int a;
    double b;
    char c;
};

/* Struct type with padding holes, arrays of records. */
static void t_struct(void)
{
    enum { R = 6 };
    int bl[3] = {1, 1, 1};
    MPI_Aint disp[3] = {offsetof(struct rec, a), offsetof(struct rec, b),
                        offsetof(struct rec, c)};
    MPI_Datatype types[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR}, st0, sty;
    MPI_Type_create_struct(3, bl, disp, types, &st0);
    MPI_Type_create_resized(st0, 0, sizeof(struct rec), &sty);
    MPI_Type_commit(&sty);
    struct rec r[R];
    MPI_Status st;
    if (t_rank == 0) {
        for (int i = 0; i < R; i++) {
            r[i].a = 7 * i;
            r[i].b = 0.5 * i;
            r[i].c = (char)('a' + i);
        }
        CHK(MPI_Send(r, R, sty, peer, 4, MPI_COMM_WORLD));
    } else if (t_rank == 1) {
        memset(r, 0x5A, sizeof r);      /* padding must keep this */
        CHK(MPI_Recv(r, R, sty, peer, 4, MPI_COMM_WORLD, &st));
        for (int i = 0; i < R; i++) {
            EXPECT(r[i].a == 7 * i && r[i].b == 0.5 * i && r[i].c == 'a' + i,
                   "record %d = {%d, %g, %d}", i, r[i].a, r[i].b, r[i].c);
            const unsigned char *p = (const unsigned char *)&r[i];
            for (size_t o = offsetof(struct rec, a) + sizeof(int);
                 o < offsetof(struct rec, b); o++)
                EXPECT(p[o] == 0x5A, "record %d: padding byte %zu written", i, o);
            for (size_t o = offsetof(struct rec, c) + 1; o < sizeof(struct rec); o++)
                EXPECT(p[o] == 0x5A, "record %d: tail byte %zu written", i, o);
        }
        int c = -1;
        MPI_Get_count(&st, sty, &c);
        EXPECT(c == R, "Get_count %d", c);
    }
    MPI_Type_free(&st0);
    MPI_Type_free(&sty);
    report("struct_with_holes");
}

/* A resized type (one int, extent of three): every third int. */
static void t_resized(void)
{
    MPI_Datatype r3;
    MPI_Type_create_resized(MPI_INT, 0, 3 * sizeof(int), &r3);
    MPI_Type_commit(&r3);
    int buf[30];
    MPI_Status st;
    MPI_Request rq;
    if (t_rank == 0) {
        for (int i = 0; i < 30; i++)
            buf[i] = i % 3 == 0 ? 10 * i : HOLE;
        CHK(MPI_Isend(buf, 10, r3, peer, 5, MPI_COMM_WORLD, &rq));
        CHK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        int flat[10];
        for (int i = 0; i < 10; i++)
            flat[i] = -i;
        CHK(MPI_Send(flat, 10, MPI_INT, peer, 6, MPI_COMM_WORLD));
    } else if (t_rank == 1) {
        int flat[10];
        CHK(MPI_Irecv(flat, 10, MPI_INT, MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, &rq));
        CHK(MPI_Wait(&rq, &st));
        for (int i = 0; i < 10; i++)
            EXPECT(flat[i] == 30 * i, "send side: [%d] = %d", i, flat[i]);
        holes(buf, 30);
        CHK(MPI_Irecv(buf, 10, r3, peer, MPI_ANY_TAG, MPI_COMM_WORLD, &rq));
        CHK(MPI_Wait(&rq, &st));
        for (int i = 0; i < 30; i++) {
            int want = i % 3 == 0 ? -(i / 3) : HOLE;
            EXPECT(buf[i] == want, "receive side: [%d] = %d, expected %d", i, buf[i], want);
        }
        EXPECT(st.MPI_TAG == 6, "tag %d", st.MPI_TAG);
    }
    MPI_Type_free(&r3);
    report("resized");
}

/* A message that is not a whole number of receive elements. */
static void t_partial(void)
{
    MPI_Datatype tri;
    MPI_Type_contiguous(3, MPI_INT, &tri);
    MPI_Type_commit(&tri);
    int buf[30];
    MPI_Status st;
    if (t_rank == 0) {
        fill(buf, 12, 0, 7, 0);
        CHK(MPI_Send(buf, 12, MPI_INT, peer, 7, MPI_COMM_WORLD));
        CHK(MPI_Send(buf, 7, MPI_INT, peer, 8, MPI_COMM_WORLD));
    } else if (t_rank == 1) {
        CHK(MPI_Recv(buf, 10, tri, peer, 7, MPI_COMM_WORLD, &st));
        int c = -1, e = -1;
        MPI_Get_count(&st, tri, &c);
        MPI_Get_elements(&st, tri, &e);
        EXPECT(c == 4 && e == 12, "12 ints as triples: count %d elements %d", c, e);
        EXPECT(bad_at(buf, 12, 0, 7, 0) < 0, "payload");
        CHK(MPI_Recv(buf, 10, tri, peer, 8, MPI_COMM_WORLD, &st));
        MPI_Get_count(&st, tri, &c);
        MPI_Get_elements(&st, tri, &e);
        EXPECT(c == MPI_UNDEFINED && e == 7, "7 ints as triples: count %d elements %d", c, e);
    }
    MPI_Type_free(&tri);
    report("partial_elements");
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    peer = 1 - t_rank;
    t_vector(0);
    t_vector(1);
    t_indexed();
    t_struct();
    t_resized();
    t_partial();
    return t_finish();
}
