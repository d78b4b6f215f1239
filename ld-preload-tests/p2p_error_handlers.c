/* ranks: 2 */
/* Which error handler a completion call raises a failed receive's error through, and how often:
 * MPI_COMM_WORLD and the receive's communicator (a duplicate) each get a handler that counts
 * its calls and remembers the error class.  Every completion call completes a truncated
 * receive, alone and beside a good one, posted before or after its message.  The check lines
 * print the codes and counts; ci/ld-preload-tests.sh requires them to be the native run's
 * (MPICH raises through world, Open MPI through the receive's communicator). */
#include "common.h"

#define N 4

struct seen {
    int calls, cls;
};
static struct seen on_world, on_comm;

static void count(struct seen *s, int *code)
{
    s->calls++;
    MPI_Error_class(*code, &s->cls);
}

static void world_handler(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    count(&on_world, code);
}

static void comm_handler(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    count(&on_comm, code);
}

enum {
    WAIT, TEST, WAITANY, TESTANY, WAITALL, TESTALL, WAITSOME, TESTSOME, GET_STATUS, RECV, CALLS
};
static const char *names[] = {"wait",     "test",     "waitany",
                              "testany",  "waitall",  "testall",
                              "waitsome", "testsome", "request_get_status",
                              "recv"};

/* Completes the receives in r[0..n) with `call`; the first code that is not MPI_SUCCESS. */
static int complete(int call, int n, MPI_Request *r)
{
    MPI_Status st[2];
    int rc = MPI_SUCCESS, flag = 0, idx, out, ind[2], left = n;
    while (left > 0) {
        int code = MPI_SUCCESS;
        switch (call) {
        case WAIT:
        case TEST:
        case GET_STATUS:
            for (int i = 0; i < n; i++) {
                if (r[i] == MPI_REQUEST_NULL)
                    continue;
                if (call == WAIT) {
                    code = MPI_Wait(&r[i], &st[0]);
                    left--;
                } else if (call == TEST) {
                    code = MPI_Test(&r[i], &flag, &st[0]);
                    left -= flag;
                } else {
                    code = MPI_Request_get_status(r[i], &flag, &st[0]);
                    if (flag) {
                        MPI_Request_free(&r[i]);
                        left--;
                    }
                }
                if (code != MPI_SUCCESS) /* done, as far as the program may know */
                    r[i] = MPI_REQUEST_NULL;
                if (rc == MPI_SUCCESS)
                    rc = code;
            }
            continue;
        case WAITANY:
        case TESTANY:
            flag = 1;
            code = call == WAITANY ? MPI_Waitany(n, r, &idx, st)
                                   : MPI_Testany(n, r, &idx, &flag, st);
            if (flag && idx != MPI_UNDEFINED) {
                r[idx] = MPI_REQUEST_NULL;
                left--;
            }
            break;
        case WAITALL:
        case TESTALL:
            flag = 1;
            code = call == WAITALL ? MPI_Waitall(n, r, st) : MPI_Testall(n, r, &flag, st);
            if (code == MPI_ERR_IN_STATUS)
                for (int i = 0; i < n; i++)
                    if (st[i].MPI_ERROR != MPI_ERR_PENDING)
                        r[i] = MPI_REQUEST_NULL;
            if (flag || code != MPI_SUCCESS)
                left = 0;
            break;
        case WAITSOME:
        case TESTSOME:
            code = call == WAITSOME ? MPI_Waitsome(n, r, &out, ind, st)
                                    : MPI_Testsome(n, r, &out, ind, st);
            for (int k = 0; k < out; k++)
                r[ind[k]] = MPI_REQUEST_NULL;
            left -= out;
            break;
        }
        if (rc == MPI_SUCCESS)
            rc = code;
    }
    /* what MPI_Waitall left pending after an error */
    for (int i = 0; i < n; i++)
        if (r[i] != MPI_REQUEST_NULL)
            MPI_Wait(&r[i], MPI_STATUS_IGNORE);
    return rc;
}

/* Rank 0 sends a message of 2N ints (tag 1: the truncated one) and, with `good`, one of N
 * (tag 0); rank 1 receives N ints each, posted before the messages were sent or after. */
static void check(MPI_Comm comm, int call, int good, int early)
{
    int buf[2][2 * N] = {{0}}, rc = MPI_SUCCESS;
    MPI_Request r[2];
    int n = good ? 2 : 1;
    on_world.calls = on_comm.calls = 0;
    on_world.cls = on_comm.cls = -1;
    if (call == RECV && !early) {
        /* a blocking receive is posted when it is called: after its message is sent */
        PMPI_Barrier(MPI_COMM_WORLD);
        if (t_rank == 0)
            CHK(MPI_Send(buf[1], 2 * N, MPI_INT, 1, 1, comm));
        PMPI_Barrier(MPI_COMM_WORLD);
        if (t_rank == 1)
            rc = MPI_Recv(buf[0], N, MPI_INT, 0, 1, comm, MPI_STATUS_IGNORE);
    } else if (call == RECV) {
        if (t_rank == 1)
            rc = MPI_Recv(buf[0], N, MPI_INT, 0, 1, comm, MPI_STATUS_IGNORE);
        else
            CHK(MPI_Send(buf[1], 2 * N, MPI_INT, 1, 1, comm));
    }
    if (call == RECV)
        goto print;
    if (t_rank == 1 && early)
        for (int i = 0; i < n; i++)
            CHK(MPI_Irecv(buf[i], N, MPI_INT, 0, 1 - i, comm, &r[i]));
    PMPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == 0) {
        if (good)
            CHK(MPI_Send(buf[0], N, MPI_INT, 1, 0, comm));
        CHK(MPI_Send(buf[1], 2 * N, MPI_INT, 1, 1, comm));
    }
    PMPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == 1) {
        if (!early)
            for (int i = 0; i < n; i++)
                CHK(MPI_Irecv(buf[i], N, MPI_INT, 0, 1 - i, comm, &r[i]));
        rc = complete(call, n, r);
    }
print:;
    char line[200];
    snprintf(line, sizeof line, "%s.%s.%s: rc=%d world=%d/%d comm=%d/%d", names[call],
             good ? "good_and_truncated" : "truncated", early ? "early" : "late", err_class(rc),
             on_world.calls, on_world.cls, on_comm.calls, on_comm.cls);
    PMPI_Bcast(line, sizeof line, MPI_CHAR, 1, MPI_COMM_WORLD);
    if (t_rank == 0) {
        printf("ok %s\n", line);
        fflush(stdout);
    }
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    MPI_Errhandler world_eh, comm_eh;
    MPI_Comm comm;
    MPI_Comm_create_errhandler(world_handler, &world_eh);
    MPI_Comm_create_errhandler(comm_handler, &comm_eh);
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, world_eh);
    MPI_Comm_set_errhandler(comm, comm_eh);
    for (int call = 0; call < CALLS; call++)
        for (int good = 0; good < (call == RECV ? 1 : 2); good++)
            for (int early = 0; early < 2; early++)
                check(comm, call, good, early);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_free(&comm);
    MPI_Errhandler_free(&world_eh);
    MPI_Errhandler_free(&comm_eh);
    report("error_handlers");
    return t_finish();
}
