/* ranks: 8 */
/* The first collective the shim runs on a communicator while the shim matches its
 * point-to-point traffic: rank 0 keeps 200 receives posted on a fresh duplicate (more
 * than enough for the default takeover), then every rank gathers 64 KiB to rank 0 on it (the
 * shim runs such gathers from 4 ranks, on a private duplicate made in that call), then the
 * messages for the receives are sent. The gather must see every rank's block and every
 * receive its own message. */
#include "common.h"

#define R 200
#define BLOCK 16384 /* ints: 64 KiB */

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    MPI_Comm c;
    CHK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    int got[R], *mine = malloc(sizeof(int) * BLOCK), *all = malloc(sizeof(int) * BLOCK * t_size);
    for (int k = 0; k < BLOCK; k++)
        mine[k] = 100 + t_rank + k;
    MPI_Request r[R];
    MPI_Status st[R];
    int senders = t_size - 1, per = senders > 0 ? (R + senders - 1) / senders : 0;
    int posted = senders > 0 ? R : 0;
    if (t_rank == 0)
        for (int i = 0; i < posted; i++)
            CHK(MPI_Irecv(&got[i], 1, MPI_INT, 1 + i / per, i, c, &r[i]));
    CHK(MPI_Gather(mine, BLOCK, MPI_INT, all, BLOCK, MPI_INT, 0, c));
    if (t_rank == 0)
        for (int i = 0; i < t_size; i++)
            for (int k = 0; k < BLOCK; k += BLOCK - 1)
                EXPECT(all[i * BLOCK + k] == 100 + i + k, "gathered [%d][%d] = %d", i, k,
                       all[i * BLOCK + k]);
    if (t_rank > 0)
        for (int i = (t_rank - 1) * per; i < posted && i < t_rank * per; i++)
            CHK(MPI_Send(&i, 1, MPI_INT, 0, i, c));
    if (t_rank == 0) {
        CHK(MPI_Waitall(posted, r, st));
        for (int i = 0; i < posted; i++)
            EXPECT(got[i] == i && st[i].MPI_TAG == i, "receive %d got %d (tag %d)", i, got[i],
                   st[i].MPI_TAG);
    }
    report("gather_while_taken_over");
    free(mine);
    free(all);
    CHK(MPI_Comm_free(&c));
    return t_finish();
}
