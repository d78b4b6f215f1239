/* The shim's count of takeovers of MPI_COMM_WORLD (its MPI_T counter matchshim_takeovers),
 * for tests that judge its decisions under the default takeover policy. Include after
 * common.h, with _GNU_SOURCE defined before both. */
#ifndef TAKEOVER_COUNT_H
#define TAKEOVER_COUNT_H

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int judged;
    MPI_T_pvar_session session;
    MPI_T_pvar_handle handle;
} takeover_count;

/* Whether the shim is preloaded under MATCHSHIM_TAKEOVER=auto (or unset); if so, starts
 * reading its counter. */
static inline int takeover_count_start(takeover_count *c)
{
    const char *mode = getenv("MATCHSHIM_TAKEOVER");
    c->judged = dlsym(RTLD_DEFAULT, "matchshim_engine") != NULL
                && (mode == NULL || strcmp(mode, "auto") == 0);
    if (c->judged) {
        int provided, index, count;
        CHK(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
        CHK(MPI_T_pvar_session_create(&c->session));
        CHK(MPI_T_pvar_get_index("matchshim_takeovers", MPI_T_PVAR_CLASS_COUNTER, &index));
        MPI_Comm world = MPI_COMM_WORLD;
        CHK(MPI_T_pvar_handle_alloc(c->session, index, &world, &c->handle, &count));
    }
    return c->judged;
}

static inline unsigned long long takeover_count_read(takeover_count *c)
{
    unsigned long long count = 0;
    CHK(MPI_T_pvar_read(c->session, c->handle, &count));
    return count;
}

/* Prints the count as `name`'s and expects at most `most` takeovers in `reps` repetitions. */
static inline void takeover_count_expect(takeover_count *c, const char *name, int reps,
                                         unsigned long long most)
{
    unsigned long long count = takeover_count_read(c);
    fprintf(stderr, "%s: %llu takeovers in %d repetitions\n", name, count, reps);
    EXPECT(count <= most, "the shim took over %llu times in %d repetitions", count, reps);
}

static inline void takeover_count_stop(takeover_count *c)
{
    if (c->judged) {
        CHK(MPI_T_pvar_handle_free(c->session, &c->handle));
        CHK(MPI_T_pvar_session_free(&c->session));
        CHK(MPI_T_finalize());
    }
}

#endif
