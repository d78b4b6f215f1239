/* A broadcast from a root the communicator does not have, with the default error handler. */
#include <mpi.h>

int main(int argc, char **argv)
{
    int size, buf = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Bcast(&buf, 1, MPI_INT, size, MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
