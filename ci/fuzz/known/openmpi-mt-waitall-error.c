/* Open MPI 4.1.4 at MPI_THREAD_MULTIPLE: MPI_Waitall over an array holding a request that has
 * already failed when the call starts (here a truncated receive, seen done by
 * MPI_Request_get_status) never returns: its rank spins in ompi_request_default_wait_all, which
 * goes to its error exit without the signal the wait's release spins for. Where the request
 * fails while MPI_Waitall waits, it returns MPI_ERR_IN_STATUS (argument `racing`: the first
 * round usually returns, a later one hangs). Below MPI_THREAD_MULTIPLE (argument `single`),
 * and on MPICH 4.0.2, every round returns.
 *
 *   mpicc.openmpi -o mt-waitall-error openmpi-mt-waitall-error.c
 *   timeout 10 mpiexec.openmpi -n 2 ./mt-waitall-error          # hangs in round 0
 *   timeout 10 mpiexec.openmpi -n 2 ./mt-waitall-error single   # "100 rounds" */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

enum { ROUNDS = 100 };

int main(int argc, char **argv)
{
    const char *how = argc > 1 ? argv[1] : "";
    int single = !strcmp(how, "single"), racing = !strcmp(how, "racing"), provided, rank;
    MPI_Init_thread(&argc, &argv, single ? MPI_THREAD_SINGLE : MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int buf[16] = {0};
    for (int round = 0; round < ROUNDS; round++) {
        MPI_Request r;
        MPI_Status st;
        if (rank == 0)
            MPI_Irecv(buf, 6, MPI_INT, 1, 100, MPI_COMM_WORLD, &r);
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 1) {
            MPI_Send(buf, 13, MPI_INT, 0, 100, MPI_COMM_WORLD);
        } else {
            int done = racing;
            while (!done)
                MPI_Request_get_status(r, &done, MPI_STATUS_IGNORE);
            printf("round %d: MPI_Waitall...", round);
            fflush(stdout);
            int rc = MPI_Waitall(1, &r, &st);
            printf(" returned %s, status %s\n", rc == MPI_ERR_IN_STATUS ? "MPI_ERR_IN_STATUS" : "?",
                   st.MPI_ERROR == MPI_ERR_TRUNCATE ? "MPI_ERR_TRUNCATE" : "?");
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (rank == 0)
        printf("%d rounds\n", ROUNDS);
    MPI_Finalize();
    return 0;
}
