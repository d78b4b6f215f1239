/* Open MPI 4.1.4: when MPI_Waitany or MPI_Testany returns the error of the one failed request
 * it completes, it also frees every other failed request of the array and sets its handle to
 * MPI_REQUEST_NULL: those requests are never reported (MPI-4.0 3.7.5: Waitany and Testany
 * complete one request). MPICH 4.0.2 leaves them to later calls. The fuzzer gives Waitany and
 * Testany at most one receive that fails on Open MPI (ci/fuzz/fuzz.c, complete_some).
 *
 *   mpicc.openmpi -o testany openmpi-testany-frees-failed.c
 *   mpiexec.openmpi -n 2 ./testany   # "request 1 after Testany: MPI_REQUEST_NULL" */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rank, out[2] = {1, 2}, in[2], index = -1, flag = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Request r[2];
    /* rank 0: two receives that truncate, complete before the call */
    if (rank == 0)
        for (int i = 0; i < 2; i++)
            MPI_Irecv(&in[i], 1, MPI_INT, 1, i, MPI_COMM_WORLD, &r[i]);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1)
        for (int i = 0; i < 2; i++)
            MPI_Send(out, 2, MPI_INT, 0, i, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        for (int i = 0; i < 2; i++) /* both complete */
            for (flag = 0; !flag;)
                MPI_Request_get_status(r[i], &flag, MPI_STATUS_IGNORE);
        for (flag = 0; !flag;)
            MPI_Testany(2, r, &index, &flag, MPI_STATUS_IGNORE);
        printf("Testany completed request %d\n", index);
        for (int i = 0; i < 2; i++)
            if (i != index)
                printf("request %d after Testany: %s\n", i,
                       r[i] == MPI_REQUEST_NULL ? "MPI_REQUEST_NULL" : "still to complete");
    }
    MPI_Finalize();
    return 0;
}
