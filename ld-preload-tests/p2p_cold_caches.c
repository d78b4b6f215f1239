/* ranks: 2 */
/* A program that computes between its receives, as applications do: each call MPI makes then
 * misses in caches the computing filled with other data, and takes microseconds however short
 * its queue. Rank 0 sends one message at a time and waits for rank 1's acknowledgement; rank 1
 * writes a buffer larger than the caches, then receives the message (a queue one message
 * long). Every payload is checked. Under MATCHSHIM_TAKEOVER=auto the shim's timed calls see
 * these receives as slow, and a warm probe of MPI's queue must tell them from a deep search:
 * its MPI_T counters must show no takeover of the communicator (matchshim_takeovers) and the
 * timing's asks it declined (matchshim_unconfirmed_takeovers, printed). */
#define _GNU_SOURCE
#include "common.h"
#include <dlfcn.h>

#define ROUNDS 320 /* the first four receives, then one in 64: two asks of the timing */
#define LEN 4
#define CACHE_BYTES (32u << 20)

static int judged;
static MPI_T_pvar_session session;

static MPI_T_pvar_handle counter_of(const char *name, MPI_Comm *comm)
{
    int index = -1, count;
    MPI_T_pvar_handle handle;
    CHK(MPI_T_pvar_get_index(name, MPI_T_PVAR_CLASS_COUNTER, &index));
    CHK(MPI_T_pvar_handle_alloc(session, index, comm, &handle, &count));
    return handle;
}

static unsigned long long read_counter(MPI_T_pvar_handle handle)
{
    unsigned long long value = 0;
    CHK(MPI_T_pvar_read(session, handle, &value));
    return value;
}

/* Writes one byte of every cache line of `buf`, as a compute phase between calls would. */
static void compute(volatile char *buf, int round)
{
    for (size_t i = 0; i < CACHE_BYTES; i += 64)
        buf[i] = (char)(i + (size_t)round);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    const char *mode = getenv("MATCHSHIM_TAKEOVER");
    judged = dlsym(RTLD_DEFAULT, "matchshim_engine") != NULL
             && (mode == NULL || strcmp(mode, "auto") == 0);
    MPI_Comm comm;
    CHK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    MPI_T_pvar_handle takeovers = NULL, unconfirmed = NULL;
    if (judged) {
        int provided;
        CHK(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
        CHK(MPI_T_pvar_session_create(&session));
        takeovers = counter_of("matchshim_takeovers", &comm);
        unconfirmed = counter_of("matchshim_unconfirmed_takeovers", &comm);
    }
    char *scratch = t_rank == 1 ? malloc(CACHE_BYTES) : NULL;
    for (int round = 0; round < ROUNDS; round++) {
        int buf[LEN], ack = round;
        if (t_rank == 0) {
            fill(buf, LEN, 0, round, round);
            CHK(MPI_Send(buf, LEN, MPI_INT, 1, round, comm));
            CHK(MPI_Recv(&ack, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            EXPECT(ack == round, "round %d: acknowledged %d", round, ack);
        } else {
            compute(scratch, round);
            CHK(MPI_Recv(buf, LEN, MPI_INT, 0, round, comm, MPI_STATUS_IGNORE));
            EXPECT(bad_at(buf, LEN, 0, round, round) < 0, "round %d: payload", round);
            CHK(MPI_Send(&ack, 1, MPI_INT, 0, 0, MPI_COMM_WORLD));
        }
    }
    free(scratch);
    if (judged && t_rank == 1) {
        unsigned long long taken = read_counter(takeovers), declined = read_counter(unconfirmed);
        fprintf(stderr, "cold caches: %llu takeovers, %llu asks of the timing declined\n", taken,
                declined);
        EXPECT(taken == 0, "the shim took a queue one message long over %llu times", taken);
    }
    report("cold_caches");
    if (judged) {
        CHK(MPI_T_pvar_handle_free(session, &takeovers));
        CHK(MPI_T_pvar_handle_free(session, &unconfirmed));
        CHK(MPI_T_pvar_session_free(&session));
        CHK(MPI_T_finalize());
    }
    CHK(MPI_Comm_free(&comm));
    return t_finish();
}
