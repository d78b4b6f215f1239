/* Open MPI 4.1.4: once MPI_Comm_set_info asserts mpi_assert_allow_overtaking on a
 * communicator, MPI_Ibarrier there never completes at 3 or 4 ranks (2 ranks pass, and so does
 * MPI_Barrier); made by MPI_Comm_dup_with_info with the same info, the communicator keeps
 * order and its barriers complete.  MPICH 4.0.2 completes every one.  With --asserts the fuzzer
 * makes assertions by MPI_Comm_set_info on Open MPI only without overtaking
 * (ci/fuzz/fuzz.c, asserts_later).
 *
 *   mpicc.openmpi -o overtaking-ibarrier openmpi-overtaking-ibarrier.c
 *   mpiexec.openmpi --oversubscribe -n 3 ./overtaking-ibarrier           # hangs
 *   mpiexec.openmpi --oversubscribe -n 3 ./overtaking-ibarrier dup_with_info  # 100 rounds */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rank, with_info = argc > 1 && !strcmp(argv[1], "dup_with_info");
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Info info;
    MPI_Comm comm;
    MPI_Info_create(&info);
    MPI_Info_set(info, "mpi_assert_allow_overtaking", "true");
    if (with_info) {
        MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &comm);
    } else {
        MPI_Comm_dup(MPI_COMM_WORLD, &comm);
        MPI_Comm_set_info(comm, info);
    }
    MPI_Info_free(&info);
    for (int round = 0; round < 100; round++) {
        if (rank == 0) {
            printf("round %d\n", round);
            fflush(stdout);
        }
        MPI_Request req;
        MPI_Ibarrier(comm, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    if (rank == 0)
        printf("100 rounds\n");
    MPI_Comm_free(&comm);
    MPI_Finalize();
    return 0;
}
