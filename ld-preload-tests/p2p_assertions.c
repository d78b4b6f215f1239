/* ranks: 2 4 */
/* no-wildcard-comms: 3 (the two made asserting no wildcards and the one MPI_Comm_set_info
 * gives those assertions, whose point-to-point traffic the shim matches in hash bins) */
/* native-known-fail: openmpi (4.1.4 hangs at 4 oversubscribed ranks once
 * mpi_assert_no_any_source is set) */
/* Communicators whose info makes MPI-4 assertions (mpi_assert_no_any_source,
 * mpi_assert_no_any_tag, mpi_assert_allow_overtaking): receives naming source
 * and tag get every message; where order is still promised it holds, where
 * overtaking is allowed every message arrives exactly once; the info reads
 * back; assertions set by MPI_Comm_set_info on a communicator in use hold from
 * then on. */
#include "common.h"

#define M 300                   /* messages per sender per check */
#define TAGS 5

static MPI_Comm asserting(int no_wildcards, int overtaking)
{
    MPI_Info info;
    MPI_Comm comm;
    MPI_Info_create(&info);
    MPI_Info_set(info, "mpi_assert_no_any_source", no_wildcards ? "true" : "false");
    MPI_Info_set(info, "mpi_assert_no_any_tag", no_wildcards ? "true" : "false");
    MPI_Info_set(info, "mpi_assert_allow_overtaking", overtaking ? "true" : "false");
    CHK(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &comm));
    MPI_Info_free(&info);
    return comm;
}

/* Every rank sends M messages to every other, tag i % TAGS, value i; the
 * receives, all posted before a barrier lets the sends go, name source and
 * tag in reverse order of tags, so each message meets a queue of receives. */
static void exchange_on(MPI_Comm comm, int overtaking)
{
    const int peers = t_size - 1;
    int *in = malloc(sizeof(int) * M * t_size);
    int *out = malloc(sizeof(int) * M);
    MPI_Request *r = malloc(sizeof(MPI_Request) * 2 * M * t_size);
    int nr = 0;
    for (int s = 0; s < t_size; s++) {
        if (s == t_rank)
            continue;
        for (int t = TAGS - 1; t >= 0; t--)
            for (int i = t; i < M; i += TAGS)
                CHK(MPI_Irecv(&in[s * M + i], 1, MPI_INT, s, t, comm, &r[nr++]));
    }
    MPI_Barrier(comm);
    for (int i = 0; i < M; i++)
        out[i] = i;
    for (int d = 0; d < t_size; d++) {
        if (d == t_rank)
            continue;
        for (int i = 0; i < M; i++)
            CHK(MPI_Isend(&out[i], 1, MPI_INT, d, i % TAGS, comm, &r[nr++]));
    }
    CHK(MPI_Waitall(nr, r, MPI_STATUSES_IGNORE));
    for (int s = 0; s < t_size && peers > 0; s++) {
        if (s == t_rank)
            continue;
        long sum = 0;
        for (int i = 0; i < M; i++) {
            int v = in[s * M + i];
            if (!overtaking)
                EXPECT(v == i, "from %d: receive %d got %d (overtaken)", s, i, v);
            EXPECT(v % TAGS == i % TAGS, "from %d: receive of tag %d got %d", s, i % TAGS, v);
            sum += v;
        }
        EXPECT_EQ(sum, (long)M * (M - 1) / 2);
    }
    free(r);
    free(out);
    free(in);
}

static void exchange(int no_wildcards, int overtaking, const char *name)
{
    MPI_Comm comm = asserting(no_wildcards, overtaking);
    exchange_on(comm, overtaking);
    int flag = 0;
    char value[16] = "";
    MPI_Info got;
    CHK(MPI_Comm_get_info(comm, &got));
    MPI_Info_get(got, "mpi_assert_allow_overtaking", 15, value, &flag);
    EXPECT(flag && strcmp(value, overtaking ? "true" : "false") == 0,
           "mpi_assert_allow_overtaking reads back as %s", flag ? value : "unset");
    MPI_Info_free(&got);
    MPI_Comm_free(&comm);
    report(name);
}

/* A communicator that exchanged without assertions gets them by
 * MPI_Comm_set_info, then exchanges again, twice. */
static void asserted_later(void)
{
    MPI_Comm comm;
    MPI_Info info;
    CHK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    exchange_on(comm, 0);
    MPI_Info_create(&info);
    MPI_Info_set(info, "mpi_assert_no_any_source", "true");
    MPI_Info_set(info, "mpi_assert_no_any_tag", "true");
    CHK(MPI_Comm_set_info(comm, info));
    MPI_Info_free(&info);
    exchange_on(comm, 0);
    exchange_on(comm, 0);
    MPI_Comm_free(&comm);
    report("set_info_on_a_communicator_in_use");
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    exchange(0, 0, "no_assertions");
    exchange(1, 0, "no_wildcards_ordered");
    exchange(1, 1, "no_wildcards_overtaking");
    asserted_later();
    return t_finish();
}
