/* Open MPI 4.1.4: a message a rank sends to itself, longer than a receive it posted before,
 * completes that receive with MPI_SUCCESS and a count of the buffer's size instead of
 * MPI_ERR_TRUNCATE (posted after the message, or between two ranks, the receive fails as it
 * should).  MPICH 4.0.2 reports MPI_ERR_TRUNCATE.  The fuzzer truncates messages between two
 * ranks only on Open MPI (ci/fuzz/fuzz.c, gen_p2p).
 *
 *   mpicc.openmpi -o self-truncate openmpi-self-truncate.c
 *   mpiexec.openmpi -n 1 ./self-truncate    # "error class 0, 16 bytes" */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int out[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, in[9] = {0}, cls, bytes;
    MPI_Request recv, send;
    MPI_Status status;
    MPI_Irecv(in, 4, MPI_INT, 0, 5, MPI_COMM_SELF, &recv);
    MPI_Isend(out, 9, MPI_INT, 0, 5, MPI_COMM_SELF, &send);
    MPI_Error_class(MPI_Wait(&recv, &status), &cls);
    MPI_Get_count(&status, MPI_BYTE, &bytes);
    MPI_Wait(&send, MPI_STATUS_IGNORE);
    printf("error class %d (MPI_ERR_TRUNCATE is %d), %d bytes\n", cls, MPI_ERR_TRUNCATE, bytes);
    MPI_Finalize();
    return 0;
}
