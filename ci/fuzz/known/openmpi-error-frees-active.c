/* Open MPI 4.1.4: where MPI_Testsome (or Waitsome, Testany, Waitany) returns the error of a
 * failed request, it frees every non-persistent request of the array whose status holds an
 * error (ompi_errhandler_request_invoke). An active send's status is whatever the memory of
 * MPI's request free list held: the send path writes it only at completion. Once the free
 * list has grown into memory the program used, active requests vanish: their handles become
 * MPI_REQUEST_NULL, never reported, their sends still under way. MPICH 4.0.2 keeps them.
 * MPI_Waitall returns at the failed request, with MPI_ERR_PENDING in the statuses of the
 * active ones, and frees them the same way (argument `waitall`; MPICH waits for all).
 *
 *   mpicc.openmpi -o error-frees-active openmpi-error-frees-active.c
 *   mpiexec.openmpi -n 2 ./error-frees-active [waitall]
 *   # "active sends it freed unreported: 196 of 200" (MPICH: 0 of 200) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SENDS = 200 };

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rank, out[2] = {1, 2}, in[1], sent[SENDS] = {0};
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    /* Memory used and freed, as any program's heap holds: the free lists grow into it. */
    static void *blocks[4096];
    for (int i = 0; i < 4096; i++) {
        size_t size = 64 + (size_t)(i % 64) * 64;
        blocks[i] = malloc(size);
        memset(blocks[i], 0x5a, size);
    }
    for (int i = 0; i < 4096; i++)
        free(blocks[i]);
    if (rank == 0) {
        MPI_Request r[SENDS + 1];
        MPI_Status st[SENDS + 1];
        int outcount = 0, indices[SENDS + 1], flag = 0, vanished = 0;
        /* synchronous sends rank 1 receives only at the end: all stay active */
        for (int i = 0; i < SENDS; i++)
            MPI_Issend(&sent[i], 1, MPI_INT, 1, 7, MPI_COMM_WORLD, &r[i]);
        /* a receive that fails: the message is longer than its buffer */
        MPI_Irecv(in, 1, MPI_INT, 1, 1, MPI_COMM_WORLD, &r[SENDS]);
        while (!flag)
            MPI_Request_get_status(r[SENDS], &flag, MPI_STATUS_IGNORE);
        int waitall = argc > 1 && strcmp(argv[1], "waitall") == 0;
        int rc = waitall ? MPI_Waitall(SENDS + 1, r, st)
                         : MPI_Testsome(SENDS + 1, r, &outcount, indices, st);
        for (int i = 0; i < SENDS; i++)
            vanished += r[i] == MPI_REQUEST_NULL;
        printf("%s: %s, %d reported (request %d); active sends it freed unreported: "
               "%d of %d\n",
               waitall ? "Waitall" : "Testsome",
               rc == MPI_ERR_IN_STATUS ? "MPI_ERR_IN_STATUS" : "no error", outcount,
               outcount > 0 ? indices[0] : -1, vanished, SENDS);
        MPI_Barrier(MPI_COMM_WORLD);
        for (int i = 0; i < SENDS; i++)
            if (r[i] != MPI_REQUEST_NULL)
                MPI_Wait(&r[i], MPI_STATUS_IGNORE);
    } else if (rank == 1) {
        MPI_Send(out, 2, MPI_INT, 0, 1, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        for (int i = 0; i < SENDS; i++)
            MPI_Recv(&sent[i], 1, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Finalize();
    return 0;
}
