/* A probe on MPI_COMM_NULL. */
#include <mpi.h>

int main(int argc, char **argv)
{
    int flag;
    MPI_Init(&argc, &argv);
    MPI_Iprobe(0, 0, MPI_COMM_NULL, &flag, MPI_STATUS_IGNORE);
    MPI_Finalize();
    return 0;
}
