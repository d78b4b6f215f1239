/* ranks: 2 */
/* MPI_THREAD_MULTIPLE (below it as p2p_recent_comms_serial.c), one thread: round trips that turn over MPI_COMM_WORLD and more
 * duplicates of it than the shim remembers communicators, all with the same tag, received in
 * turn by MPI_Recv, MPI_Irecv + MPI_Wait, MPI_Probe + MPI_Recv and MPI_Improbe + MPI_Mrecv;
 * every so often one duplicate is freed and made again, so MPI may give the new one the freed
 * one's handle while the thread still remembers the old. Each payload says the communicator
 * and round it was sent in: it must arrive on that communicator, in that round. */
#include "common.h"

#define DUPS 10
#define ROUNDS 700
#define REMAKE_EVERY 50
#define LEN 4
#define TAG 3

static void receive(int *buf, int from, MPI_Comm comm, int how)
{
    MPI_Request req;
    MPI_Message msg;
    int flag = 0;
    switch (how) {
    case 0:
        CHK(MPI_Recv(buf, LEN, MPI_INT, from, TAG, comm, MPI_STATUS_IGNORE));
        break;
    case 1:
        CHK(MPI_Irecv(buf, LEN, MPI_INT, from, TAG, comm, &req));
        CHK(MPI_Wait(&req, MPI_STATUS_IGNORE));
        break;
    case 2:
        CHK(MPI_Probe(from, TAG, comm, MPI_STATUS_IGNORE));
        CHK(MPI_Recv(buf, LEN, MPI_INT, from, TAG, comm, MPI_STATUS_IGNORE));
        break;
    default:
        while (!flag && !t_fail)
            CHK(MPI_Improbe(from, TAG, comm, &flag, &msg, MPI_STATUS_IGNORE));
        if (flag)
            CHK(MPI_Mrecv(buf, LEN, MPI_INT, &msg, MPI_STATUS_IGNORE));
        break;
    }
}

int main(int argc, char **argv)
{
#ifdef RECENT_COMMS_SERIAL
    t_init(&argc, &argv);
#else
    if (!t_init_multiple(&argc, &argv, "recent_comms"))
        return t_finish();
#endif
    MPI_Comm comms[DUPS + 1];
    comms[0] = MPI_COMM_WORLD;
    for (int c = 1; c <= DUPS; c++)
        CHK(MPI_Comm_dup(MPI_COMM_WORLD, &comms[c]));
    int next = (t_rank + 1) % t_size, prev = (t_rank + t_size - 1) % t_size;
    int out[LEN], in[LEN];
    /* Round r: rank 0 sends to the next rank on communicator r % (DUPS + 1), which passes it
     * on around the ring back to rank 0. */
    for (int r = 0; r < ROUNDS; r++) {
        int c = r % (DUPS + 1), how = (r / (DUPS + 1)) % 4;
        if (t_rank == 0) {
            fill(out, LEN, 0, c, r);
            CHK(MPI_Send(out, LEN, MPI_INT, next, TAG, comms[c]));
            receive(in, prev, comms[c], how);
        } else {
            receive(in, prev, comms[c], how);
            memcpy(out, in, sizeof out);
            CHK(MPI_Send(out, LEN, MPI_INT, next, TAG, comms[c]));
        }
        if (bad_at(in, LEN, 0, c, r) >= 0 && !t_fail)
            FAILF("round %d on communicator %d: payload of another round or communicator", r, c);
        if (r % REMAKE_EVERY == REMAKE_EVERY - 1) {
            int k = 1 + (r / REMAKE_EVERY) % DUPS;
            CHK(MPI_Comm_free(&comms[k]));
            CHK(MPI_Comm_dup(MPI_COMM_WORLD, &comms[k]));
        }
    }
    report("rounds_over_communicators_remade");
    for (int c = 1; c <= DUPS; c++)
        CHK(MPI_Comm_free(&comms[c]));
    return t_finish();
}
