/* ranks: 2 */
/* Receives posted before a barrier at MPI_THREAD_MULTIPLE, where every
 * receive waiting in the shim goes to MPI for good before a blocking call:
 * their messages come after the barrier in the opposite order, one of them
 * longer than its buffer. Each MPI_Wait gets its own message and status, the
 * long one MPI_ERR_TRUNCATE, and nothing is written past its buffer. */
#include "common.h"

#define N 200
#define LONG_TAG 57 /* its buffer holds 1 int of the 4 sent */
#define LEN 4
#define GUARD_VAL 0x5A5A5A5A

int main(int argc, char **argv)
{
    if (!t_init_multiple(&argc, &argv, "handed_back"))
        return t_finish();
    int peer = 1 - t_rank;
    static int bufs[N][LEN];
    MPI_Request r[N];
    for (int round = 0; round < 3; round++) {
        if (t_rank == 1) {
            for (int tag = 0; tag < N; tag++) {
                for (int i = 0; i < LEN; i++)
                    bufs[tag][i] = GUARD_VAL;
                int count = tag == LONG_TAG ? 1 : LEN;
                CHK(MPI_Irecv(bufs[tag], count, MPI_INT, peer, tag, MPI_COMM_WORLD, &r[tag]));
            }
        }
        CHK(MPI_Barrier(MPI_COMM_WORLD));
        if (t_rank == 0) {
            for (int tag = N - 1; tag >= 0; tag--) {
                int msg[LEN];
                fill(msg, LEN, 0, tag, round);
                CHK(MPI_Send(msg, LEN, MPI_INT, peer, tag, MPI_COMM_WORLD));
            }
        } else {
            for (int tag = 0; tag < N; tag++) {
                MPI_Status st;
                int rc = MPI_Wait(&r[tag], &st);
                if (tag == LONG_TAG) {
                    EXPECT(err_class(rc) == MPI_ERR_TRUNCATE,
                           "round %d: Wait of the short buffer returned %s", round, err_str(rc));
                    for (int i = 1; i < LEN; i++)
                        EXPECT(bufs[tag][i] == GUARD_VAL,
                               "round %d: int %d past the 1-int buffer was written", round, i);
                } else {
                    EXPECT(rc == MPI_SUCCESS, "round %d: Wait of tag %d returned %s", round, tag,
                           err_str(rc));
                    EXPECT_MSG(bufs[tag], LEN, 0, tag, round, st);
                }
                EXPECT(r[tag] == MPI_REQUEST_NULL, "round %d: request %d not freed", round, tag);
            }
        }
        CHK(MPI_Barrier(MPI_COMM_WORLD));
    }
    report("handed_back");
    return t_finish();
}
