/* ranks: 2 */
/* Polling one receive at a time until its message comes, with each completion call in turn
 * (MPI_Test, Testany, Testall, Testsome, Waitany, Waitsome, and MPI_Request_get_status, then
 * MPI_Wait), the receive beside an inactive handle: rank 0 posts a receive, polls it a few
 * times while nothing can have been sent, then lets rank 1 send. Every message arrives once,
 * in order, with its status, and the call says which handle completed. Then a persistent
 * receive, started as often and completed by each of those calls in turn, by MPI_Waitall and
 * by MPI_Wait. The shim follows one receive in 64 that MPI holds, and every start of a
 * persistent one, to its completion; under the shim, a started persistent receive MPI holds
 * is counted (under `auto`) until it completes, and once every receive completed, its count
 * of receives MPI holds for the communicator (MPI_T `matchshim_receives_in_mpi`) is 0 again,
 * whichever call completed them.
 * p2p_followed_polls_mt.c runs it at MPI_THREAD_MULTIPLE. */
#define _GNU_SOURCE
#include "common.h"
#include <dlfcn.h>

#define ROUNDS 384 /* six receives followed in each of the seven calls' turns */
#define TAG 5
#define GO 6

enum { TEST, TESTANY, TESTALL, TESTSOME, WAITANY, WAITSOME, GET_STATUS, NCALLS, WAITALL, WAIT };
static const char *const call_names[] = {"test",    "testany",  "testall",    "testsome", "waitany",
                                         "waitsome", "get_status", "", "waitall", "wait"};

/* One call on r[0] (the receive) and r[1] (MPI_REQUEST_NULL): 1 when it completed r[0]. */
static int poll_once(int call, MPI_Request r[2], MPI_Status *st)
{
    int flag = 0, index = -1, outcount = 0, indices[2];
    MPI_Status sts[2];
    switch (call) {
    case TEST:
        CHK(MPI_Test(&r[0], &flag, st));
        return flag;
    case TESTANY:
        CHK(MPI_Testany(2, r, &index, &flag, st));
        if (flag)
            EXPECT(index == 0, "testany: index %d", index);
        return flag;
    case TESTALL:
        CHK(MPI_Testall(2, r, &flag, sts));
        if (flag)
            *st = sts[0];
        return flag;
    case TESTSOME:
        CHK(MPI_Testsome(2, r, &outcount, indices, sts));
        if (outcount > 0) {
            EXPECT(outcount == 1 && indices[0] == 0, "testsome: %d, index %d", outcount,
                   indices[0]);
            *st = sts[0];
        }
        return outcount > 0;
    case WAITANY:
        CHK(MPI_Waitany(2, r, &index, st));
        EXPECT(index == 0, "waitany: index %d", index);
        return 1;
    case WAITSOME:
        CHK(MPI_Waitsome(2, r, &outcount, indices, sts));
        EXPECT(outcount == 1 && indices[0] == 0, "waitsome: %d, index %d", outcount, indices[0]);
        *st = sts[0];
        return 1;
    case WAITALL:
        CHK(MPI_Waitall(2, r, sts));
        *st = sts[0];
        return 1;
    case WAIT:
        CHK(MPI_Wait(&r[0], st));
        return 1;
    default:
        CHK(MPI_Request_get_status(r[0], &flag, st));
        if (flag) {
            EXPECT(r[0] != MPI_REQUEST_NULL, "get_status freed the request");
            CHK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
        }
        return flag;
    }
}

static int blocks(int call) { return call == WAITANY || call == WAITSOME || call >= WAITALL; }

static void polls(int call)
{
    int peer = 1 - t_rank, go = 0;
    for (int round = 0; round < ROUNDS; round++) {
        int buf[4] = {-1, -1, -1, -1};
        if (t_rank == 0) {
            MPI_Request r[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
            MPI_Status st;
            CHK(MPI_Irecv(buf, 4, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &r[0]));
            int done = 0;
            if (!blocks(call))
                for (int i = 0; i < 3 && !done; i++)
                    done = poll_once(call, r, &st);
            EXPECT(!done, "%s: completed before anything was sent", call_names[call]);
            CHK(MPI_Send(&go, 1, MPI_INT, peer, GO, MPI_COMM_WORLD));
            while (!done)
                done = poll_once(call, r, &st);
            EXPECT(r[0] == MPI_REQUEST_NULL, "%s: the completed request stays", call_names[call]);
            EXPECT_MSG(buf, 4, peer, TAG, round, st);
        } else {
            int out[4];
            fill(out, 4, t_rank, TAG, round);
            CHK(MPI_Recv(&go, 1, MPI_INT, peer, GO, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHK(MPI_Send(out, 4, MPI_INT, peer, TAG, MPI_COMM_WORLD));
        }
    }
    report(call_names[call]);
}

/* The shim's MPI_T variable `name` of class `var_class` for MPI_COMM_WORLD. */
static unsigned long long world_pvar(const char *name, int var_class)
{
    unsigned long long value = 0;
    EXPECT(shim_pvar(MPI_COMM_WORLD, name, var_class, &value), "no MPI_T variable %s", name);
    return value;
}

static int under_shim(void) { return dlsym(RTLD_DEFAULT, "matchshim_engine") != NULL; }

/* A persistent receive started ROUNDS times, each start completed by `call` beside an
 * inactive handle, polled a few times first where it does not block: MPI keeps the request,
 * the shim counts each start MPI runs until it completes (checked on the first, where the
 * takeover policy is `auto` and MPI matches for the communicator), and a start still counted
 * fails the next MPI_Start. */
static void persistent_completed(int call)
{
    int peer = 1 - t_rank, go = 0, buf[4];
    const char *policy = getenv("MATCHSHIM_TAKEOVER");
    int counted = under_shim() && (policy == NULL || strcmp(policy, "auto") == 0);
    MPI_Request r[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    if (t_rank == 0)
        CHK(MPI_Recv_init(buf, 4, MPI_INT, peer, TAG, MPI_COMM_WORLD, &r[0]));
    for (int round = 0; round < ROUNDS; round++) {
        if (t_rank == 0) {
            MPI_Status st;
            int done = 0, check = round == 0 && counted &&
                                  world_pvar("matchshim_mode", MPI_T_PVAR_CLASS_STATE) == 0;
            CHK(MPI_Start(&r[0]));
            if (!blocks(call))
                for (int i = 0; i < 3 && !done; i++)
                    done = poll_once(call, r, &st);
            EXPECT(!done, "persistent %s: completed before anything was sent", call_names[call]);
            if (check) {
                unsigned long long held = world_pvar("matchshim_receives_in_mpi", MPI_T_PVAR_CLASS_LEVEL);
                EXPECT(held >= 1, "persistent %s: a started persistent receive MPI holds is not counted",
                       call_names[call]);
            }
            CHK(MPI_Send(&go, 1, MPI_INT, peer, GO, MPI_COMM_WORLD));
            while (!done)
                done = poll_once(call, r, &st);
            EXPECT(r[0] != MPI_REQUEST_NULL, "persistent %s: the completion call freed the request",
                   call_names[call]);
            EXPECT_MSG(buf, 4, peer, TAG, round, st);
        } else {
            int out[4];
            fill(out, 4, t_rank, TAG, round);
            CHK(MPI_Recv(&go, 1, MPI_INT, peer, GO, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHK(MPI_Send(out, 4, MPI_INT, peer, TAG, MPI_COMM_WORLD));
        }
    }
    if (t_rank == 0)
        CHK(MPI_Request_free(&r[0]));
    char name[32];
    snprintf(name, sizeof name, "persistent_%s", call_names[call]);
    report(name);
}

int main(int argc, char **argv)
{
#ifdef FOLLOWED_POLLS_MULTIPLE
    if (!t_init_multiple(&argc, &argv, "followed_polls"))
        return t_finish();
#else
    t_init(&argc, &argv);
#endif
    for (int call = 0; call < NCALLS; call++)
        polls(call);
    for (int call = 0; call < NCALLS; call++)
        persistent_completed(call);
    persistent_completed(WAITALL);
    persistent_completed(WAIT);
    if (under_shim()) {
        unsigned long long held = world_pvar("matchshim_receives_in_mpi", MPI_T_PVAR_CLASS_LEVEL);
        EXPECT(held == 0, "the shim counts %llu receives in MPI after all completed", held);
        CHK(MPI_T_finalize());
    }
    report("counted_out");
    return t_finish();
}
