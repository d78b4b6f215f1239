/* ranks: 2 */
/* The shim's MPI_T performance variables: listed after the MPI's own, bound to a
 * communicator, read through handles of their own.  Rank 0 sends a burst that waits unexpected
 * at rank 1, which reads the queue lengths and the matches before and after receiving it.
 * Natively there are no matchshim_* variables; under the shim (its `matchshim_engine` is
 * there) there must be, and the checks read them.  Both print the same check lines. */
#define _GNU_SOURCE
#include "common.h"
#include <dlfcn.h>

#define BURST 64
#define TAG 7

enum {
    POSTED, UNEXPECTED, MODE, TAKEOVERS, SWITCHES, MATCHES, DELEGATED, UNCONFIRMED, TIME, IN_MPI,
    NVARS
};
static const char *const names[NVARS] = {
    "matchshim_posted_length", "matchshim_unexpected_length", "matchshim_mode",
    "matchshim_takeovers", "matchshim_switches", "matchshim_matches", "matchshim_delegated_receives",
    "matchshim_unconfirmed_takeovers", "matchshim_match_time_ns", "matchshim_receives_in_mpi",
};
static const int classes[NVARS] = {
    MPI_T_PVAR_CLASS_LEVEL, MPI_T_PVAR_CLASS_LEVEL, MPI_T_PVAR_CLASS_STATE,
    MPI_T_PVAR_CLASS_COUNTER, MPI_T_PVAR_CLASS_COUNTER, MPI_T_PVAR_CLASS_COUNTER, MPI_T_PVAR_CLASS_COUNTER,
    MPI_T_PVAR_CLASS_COUNTER, MPI_T_PVAR_CLASS_TIMER, MPI_T_PVAR_CLASS_LEVEL,
};

static int shim;                 /* the shim is loaded */
static int mpi_vars = -1;        /* indices below the first matchshim_* one */
static int index_of[NVARS];
static MPI_T_pvar_session session;
static MPI_T_pvar_handle handles[NVARS];

/* Every variable's description; the matchshim_* ones after all of the MPI's own. */
static void t_enumerate(void)
{
    int num = 0, found = 0;
    CHK(MPI_T_pvar_get_num(&num));
    for (int v = 0; v < NVARS; v++)
        index_of[v] = -1;
    for (int i = 0; i < num; i++) {
        char name[256], desc[1024];
        int name_len = sizeof name, desc_len = sizeof desc;
        int verbosity, var_class, bind, readonly, continuous, atomic;
        MPI_Datatype type;
        MPI_T_enum enumtype;
        int rc = MPI_T_pvar_get_info(i, name, &name_len, &verbosity, &var_class, &type,
                                     &enumtype, desc, &desc_len, &bind, &readonly,
                                     &continuous, &atomic);
        if (rc != MPI_SUCCESS) {
            FAILF("MPI_T_pvar_get_info(%d) of %d -> %d", i, num, rc);
            return;
        }
        if (strncmp(name, "matchshim_", 10) != 0) {
            EXPECT(found == 0, "MPI's variable %d (%s) after the shim's", i, name);
            continue;
        }
        if (found++ == 0)
            mpi_vars = i;
        for (int v = 0; v < NVARS; v++) {
            if (strcmp(name, names[v]) != 0)
                continue;
            index_of[v] = i;
            EXPECT(var_class == classes[v], "%s: class %d", name, var_class);
            EXPECT(type == (v == MODE ? MPI_INT : MPI_UNSIGNED_LONG_LONG), "%s: datatype", name);
            EXPECT(bind == MPI_T_BIND_MPI_COMM && readonly && continuous && !atomic,
                   "%s: bind %d readonly %d continuous %d atomic %d", name, bind, readonly,
                   continuous, atomic);
            EXPECT(enumtype == MPI_T_ENUM_NULL, "%s: enumtype", name);
            EXPECT(name_len == (int)strlen(name) + 1 && desc_len == (int)strlen(desc) + 1
                   && desc_len > 1, "%s: name_len %d desc_len %d", name, name_len, desc_len);
        }
    }
    if (shim) {
        EXPECT(found == NVARS, "%d matchshim_* variables of %d", found, num);
        for (int v = 0; v < NVARS; v++) {
            int index = -2;
            EXPECT(index_of[v] >= 0, "%s is missing", names[v]);
            CHK(MPI_T_pvar_get_index(names[v], classes[v], &index));
            EXPECT(index == index_of[v], "get_index(%s) = %d, listed at %d", names[v], index,
                   index_of[v]);
        }
        /* Past the end, and a name under another class. */
        int index;
        EXPECT(MPI_T_pvar_get_info(num, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                   NULL, NULL, NULL) == MPI_T_ERR_INVALID_INDEX,
               "get_info(%d) is not MPI_T_ERR_INVALID_INDEX", num);
        EXPECT(MPI_T_pvar_get_index(names[MATCHES], MPI_T_PVAR_CLASS_LEVEL, &index)
               == MPI_T_ERR_INVALID_NAME, "get_index under another class");
    } else {
        EXPECT(found == 0, "%d matchshim_* variables without the shim", found);
    }
    if (t_rank == 0) {
        if (shim)
            printf("%d matchshim variables after MPI's %d\n", found, mpi_vars);
        else
            printf("no matchshim variables among MPI's %d: not under the shim\n", num);
    }
    report("enumerate");
}

static unsigned long long read_var(int v)
{
    unsigned long long value = 0;
    int mode = -1;
    if (v == MODE) {
        CHK(MPI_T_pvar_read(session, handles[v], &mode));
        return (unsigned long long)mode;
    }
    CHK(MPI_T_pvar_read(session, handles[v], &value));
    return value;
}

/* One of the MPI's own variables bound to no object, read through the MPI as it is. */
static void t_mpi_var(void)
{
    int first = mpi_vars >= 0 ? mpi_vars : 0, num = 0;
    CHK(MPI_T_pvar_get_num(&num));
    if (!shim)
        first = num;
    for (int i = 0; i < first; i++) {
        int bind, continuous, count = 0, name_len = 0, desc_len = 0;
        MPI_Datatype type;
        MPI_T_pvar_handle handle;
        if (MPI_T_pvar_get_info(i, NULL, &name_len, NULL, NULL, &type, NULL, NULL, &desc_len,
                                &bind, NULL, &continuous, NULL) != MPI_SUCCESS
            || bind != MPI_T_BIND_NO_OBJECT)
            continue;
        CHK(MPI_T_pvar_handle_alloc(session, i, NULL, &handle, &count));
        int size = 0;
        MPI_Type_size(type, &size);
        void *buf = calloc((size_t)(count > 0 ? count : 1), (size_t)(size > 0 ? size : 1));
        if (!continuous)
            CHK(MPI_T_pvar_start(session, handle));
        CHK(MPI_T_pvar_read(session, handle, buf));
        CHK(MPI_T_pvar_handle_free(session, &handle));
        EXPECT(handle == MPI_T_PVAR_HANDLE_NULL, "MPI's handle of variable %d not reset", i);
        free(buf);
        if (t_rank == 0)
            printf("read MPI's variable %d\n", i);
        break;
    }
    report("mpi variable");
}

static void t_handles(void)
{
    CHK(MPI_T_pvar_session_create(&session));
    t_mpi_var();
    if (!shim) {
        report("handles");
        return;
    }
    MPI_Comm comm = MPI_COMM_WORLD;
    for (int v = 0; v < NVARS; v++) {
        int count = -1;
        CHK(MPI_T_pvar_handle_alloc(session, index_of[v], &comm, &handles[v], &count));
        EXPECT(count == 1, "%s: count %d", names[v], count);
    }
    EXPECT(handles[POSTED] != handles[UNEXPECTED], "two variables share a handle");
    unsigned long long zero = 0;
    EXPECT(MPI_T_pvar_start(session, handles[MATCHES]) == MPI_T_ERR_PVAR_NO_STARTSTOP,
           "start");
    EXPECT(MPI_T_pvar_stop(session, handles[MATCHES]) == MPI_T_ERR_PVAR_NO_STARTSTOP, "stop");
    EXPECT(MPI_T_pvar_write(session, handles[MATCHES], &zero) == MPI_T_ERR_PVAR_NO_WRITE,
           "write");
    EXPECT(MPI_T_pvar_reset(session, handles[MATCHES]) == MPI_T_ERR_PVAR_NO_WRITE, "reset");
    EXPECT(MPI_T_pvar_readreset(session, handles[MATCHES], &zero) == MPI_T_ERR_PVAR_NO_WRITE,
           "readreset");
    MPI_T_pvar_session other;
    CHK(MPI_T_pvar_session_create(&other));
    EXPECT(MPI_T_pvar_read(other, handles[MATCHES], &zero) == MPI_T_ERR_INVALID_HANDLE,
           "read in another session");
    CHK(MPI_T_pvar_session_free(&other));
    report("handles");
}

/* Rank 0 sends BURST messages before rank 1 posts any receive. */
static void t_burst(void)
{
    int buf[BURST];
    if (t_rank == 0) {
        for (int i = 0; i < BURST; i++) {
            buf[i] = i;
            CHK(MPI_Send(&buf[i], 1, MPI_INT, 1, TAG, MPI_COMM_WORLD));
        }
    }
    CHK(MPI_Barrier(MPI_COMM_WORLD));
    if (t_rank == 1) {
        unsigned long long unexpected = 0, before = 0, after = 0;
        int flag = 0, mode = 0;
        if (shim) {
            mode = (int)read_var(MODE);
            /* The shim's queues hold what its progress drained; probing progresses. */
            double until = MPI_Wtime() + 5;
            while (mode == 1 && (unexpected = read_var(UNEXPECTED)) < BURST
                   && MPI_Wtime() < until)
                CHK(MPI_Iprobe(0, TAG + 1, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
            if (mode == 1)
                EXPECT(unexpected > 0, "unexpected length %llu before receiving %d",
                       unexpected, BURST);
            EXPECT(read_var(POSTED) == 0, "posted length %llu before receiving",
                   read_var(POSTED));
            before = read_var(MATCHES);
        }
        for (int i = 0; i < BURST; i++) {
            int got = -1;
            CHK(MPI_Recv(&got, 1, MPI_INT, 0, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            EXPECT(got == i, "message %d carried %d", i, got);
        }
        if (shim) {
            after = read_var(MATCHES);
            if (mode == 1 && read_var(MODE) == 1)
                EXPECT(after >= before + BURST, "matches %llu, then %llu after %d receives",
                       before, after, BURST);
            else
                EXPECT(after >= before, "matches went from %llu to %llu", before, after);
            /* The burst has left the queue; a message of rank 0's next collective may already
             * wait there (the shim's collectives share its queues). */
            EXPECT(read_var(UNEXPECTED) < BURST && read_var(POSTED) == 0,
                   "queues after receiving: posted %llu unexpected %llu", read_var(POSTED),
                   read_var(UNEXPECTED));
            EXPECT(read_var(MODE) <= 1, "mode %llu", read_var(MODE));
            if (after > 0)
                EXPECT(read_var(TIME) > 0, "%llu matches in no time", after);
            if (read_var(MODE) == 1)
                EXPECT(read_var(TAKEOVERS) >= 1, "in takeover, taken over %llu times",
                       read_var(TAKEOVERS));
            EXPECT(read_var(TAKEOVERS) <= read_var(SWITCHES) + 1,
                   "%llu takeovers in %llu switches", read_var(TAKEOVERS), read_var(SWITCHES));
            (void)read_var(DELEGATED);
            printf("rank 1: mode %d, unexpected %llu before receiving, matches %llu -> %llu\n",
                   mode, unexpected, before, after);
        }
    }
    report("burst");
}

static void t_free(void)
{
    if (shim) {
        for (int v = 0; v < NVARS; v++) {
            CHK(MPI_T_pvar_handle_free(session, &handles[v]));
            EXPECT(handles[v] == MPI_T_PVAR_HANDLE_NULL, "%s: handle not reset", names[v]);
        }
        /* A handle left for session_free to take. */
        MPI_Comm comm = MPI_COMM_WORLD;
        int count;
        CHK(MPI_T_pvar_handle_alloc(session, index_of[MATCHES], &comm, &handles[MATCHES],
                                    &count));
    }
    CHK(MPI_T_pvar_session_free(&session));
    report("free");
}

int main(int argc, char **argv)
{
    int provided;
    t_init(&argc, &argv);
    shim = dlsym(RTLD_DEFAULT, "matchshim_engine") != NULL;
    int num = 0;
    EXPECT(MPI_T_pvar_get_num(&num) != MPI_SUCCESS, "MPI_T_pvar_get_num before MPI_T_init");
    report("before MPI_T_init");
    CHK(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    t_enumerate();
    t_handles();
    t_burst();
    t_free();
    CHK(MPI_T_finalize());
    return t_finish();
}
