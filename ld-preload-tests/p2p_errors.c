/* ranks: 2 */
/* Argument errors with MPI_ERRORS_RETURN: invalid rank, tag, count and
 * communicator give the right error class for sends, receives and probes,
 * and nothing is sent or matched by the failed calls. */
#include "common.h"

enum op { SEND, ISEND, SSEND, RECV, IRECV, PROBE, IPROBE, NOPS };
static const char *op_name[NOPS] = {"send", "isend", "ssend", "recv", "irecv", "probe", "iprobe"};

static int call(enum op op, int count, int peer, int tag, MPI_Comm comm)
{
    int buf[4] = {0, 0, 0, 0}, flag;
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_Status st;
    switch (op) {
    case SEND: return MPI_Send(buf, count, MPI_INT, peer, tag, comm);
    case ISEND: return MPI_Isend(buf, count, MPI_INT, peer, tag, comm, &r);
    case SSEND: return MPI_Ssend(buf, count, MPI_INT, peer, tag, comm);
    case RECV: return MPI_Recv(buf, count, MPI_INT, peer, tag, comm, &st);
    case IRECV: return MPI_Irecv(buf, count, MPI_INT, peer, tag, comm, &r);
    case PROBE: return MPI_Probe(peer, tag, comm, &st);
    case IPROBE: return MPI_Iprobe(peer, tag, comm, &flag, &st);
    default: return MPI_SUCCESS;
    }
}

#ifdef MPICH_VERSION
static const int is_mpich = 1;
#else
static const int is_mpich = 0;
#endif

static int is_send(enum op op)
{
    return op == SEND || op == ISEND || op == SSEND;
}

static void one(enum op op, const char *what, int count, int peer, int tag, MPI_Comm comm,
                int want_class)
{
    char name[64];
    snprintf(name, sizeof name, "%s_%s", what, op_name[op]);
    int rc = call(op, count, peer, tag, comm);
    int cls = err_class(rc);
    char got[MPI_MAX_ERROR_STRING];
    int len;
    got[0] = 0;
    MPI_Error_string(cls, got, &len);
    EXPECT(cls == want_class, "error class %d (%s)", cls, rc == MPI_SUCCESS ? "success" : got);
    report(name);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    int peer = 1 - t_rank;
    int *ubp, flag;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ubp, &flag);
    int ub = flag ? *ubp : 32767;

    for (enum op op = 0; op < NOPS; op++) {
        one(op, "rank_size", 1, t_size, 1, MPI_COMM_WORLD, MPI_ERR_RANK);
        one(op, "rank_negative", 1, -5, 1, MPI_COMM_WORLD, MPI_ERR_RANK);
        if (is_send(op))
            one(op, "rank_any_source", 1, MPI_ANY_SOURCE, 1, MPI_COMM_WORLD, MPI_ERR_RANK);
        one(op, "tag_negative", 1, peer, -5, MPI_COMM_WORLD, MPI_ERR_TAG);
        if (ub < 0x7fffffff)
            one(op, "tag_above_ub", 1, peer, ub + 1, MPI_COMM_WORLD, MPI_ERR_TAG);
        else if (op == SEND)
            report_skip("tag_above_ub", "MPI_TAG_UB is INT_MAX");
        if (is_send(op))
            one(op, "tag_any_tag", 1, peer, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_ERR_TAG);
        if (op != PROBE && op != IPROBE)
            one(op, "count_negative", -1, peer, 1, MPI_COMM_WORLD, MPI_ERR_COUNT);
        /* native Open MPI aborts in (I)probe on MPI_COMM_NULL */
        if ((op != PROBE && op != IPROBE) || is_mpich)
            one(op, "comm_null", 1, peer, 1, MPI_COMM_NULL, MPI_ERR_COMM);
    }

    /* the failed calls neither sent nor swallowed anything: a normal
     * exchange with tag 1 still gets exactly the one message */
    int out[4] = {t_rank, 7, 8, 9}, in[4];
    MPI_Status st;
    MPI_Request r;
    CHK(MPI_Irecv(in, 4, MPI_INT, peer, 1, MPI_COMM_WORLD, &r));
    CHK(MPI_Send(out, 4, MPI_INT, peer, 1, MPI_COMM_WORLD));
    CHK(MPI_Wait(&r, &st));
    EXPECT(in[0] == peer && in[3] == 9, "payload");
    MPI_Barrier(MPI_COMM_WORLD);
    CHK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
    EXPECT(!flag, "a message from a failed call arrived (source %d tag %d)", st.MPI_SOURCE,
           st.MPI_TAG);
    report("nothing_sent_by_failed_calls");
    return t_finish();
}
