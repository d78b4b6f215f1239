/* Open MPI 4.1.4: MPI_Barrier on a communicator whose info asserts mpi_assert_no_any_source
 * never returns at 4, 5 or 6 ranks (2, 3 and 8 ranks pass); MPI_Ibarrier and a wait, and the
 * other collectives (Bcast, Reduce, Allreduce, Gather, Scatter, Allgather, Alltoall, Scan,
 * Reduce_scatter_block), complete there.  MPICH 4.0.2 completes every one.  With --asserts the
 * fuzzer's barriers on Open MPI are MPI_Ibarrier and a wait where the seed asserts it
 * (ci/fuzz/fuzz.c, barrier).
 *
 *   mpicc.openmpi -o no-any-source-barrier openmpi-no-any-source-barrier.c
 *   mpiexec.openmpi --oversubscribe -n 4 ./no-any-source-barrier          # hangs in round 0
 *   mpiexec.openmpi --oversubscribe -n 4 ./no-any-source-barrier ibarrier # 100 rounds */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rank, nonblocking = argc > 1 && !strcmp(argv[1], "ibarrier");
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Info info;
    MPI_Comm comm;
    MPI_Info_create(&info);
    MPI_Info_set(info, "mpi_assert_no_any_source", "true");
    MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &comm);
    MPI_Info_free(&info);
    for (int round = 0; round < 100; round++) {
        if (rank == 0) {
            printf("round %d\n", round);
            fflush(stdout);
        }
        if (nonblocking) {
            MPI_Request req;
            MPI_Ibarrier(comm, &req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        } else {
            MPI_Barrier(comm);
        }
    }
    if (rank == 0)
        printf("100 rounds\n");
    MPI_Comm_free(&comm);
    MPI_Finalize();
    return 0;
}
