/* A receive from a rank the communicator does not have, with the default error handler. */
#include <mpi.h>

int main(int argc, char **argv)
{
    int size, buf;
    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Recv(&buf, 1, MPI_INT, size + 3, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Finalize();
    return 0;
}
