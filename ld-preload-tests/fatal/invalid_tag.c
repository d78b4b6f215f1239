/* A nonblocking receive with a negative tag, with the default error handler. */
#include <mpi.h>

int main(int argc, char **argv)
{
    int buf;
    MPI_Request r;
    MPI_Init(&argc, &argv);
    MPI_Irecv(&buf, 1, MPI_INT, 0, -7, MPI_COMM_WORLD, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    MPI_Finalize();
    return 0;
}
