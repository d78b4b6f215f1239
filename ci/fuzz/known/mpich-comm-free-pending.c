/* MPICH 4.0.2 (ch4 over UCX), 3 or more ranks: a receive pending while its communicator is
 * freed (legal: MPI_Comm_free lets pending operations complete) sometimes never completes, or a
 * later collective on MPI_COMM_WORLD loses a message; the job hangs within a few hundred
 * iterations, natively.  Two ranks, and Open MPI 4.1.4, run it to the end.  The fuzzer leaves
 * this pattern out on MPICH with more than two ranks (ci/fuzz/fuzz.c, run_comm).
 *
 *   mpicc.mpich -o pending mpich-comm-free-pending.c
 *   timeout 60 mpiexec.mpich -n 3 ./pending 5000     # hangs
 *   timeout 60 mpiexec.mpich -n 2 ./pending 5000     # done */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, iters = argc > 1 ? atoi(argv[1]) : 5000;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int it = 0; it < iters; it++) {
        MPI_Comm sub;
        MPI_Comm_dup(MPI_COMM_WORLD, &sub);
        int data[4] = {it, 1, 2, 3}, in[4] = {-1};
        MPI_Request recv = MPI_REQUEST_NULL, send = MPI_REQUEST_NULL;
        if (rank == 1)
            MPI_Irecv(in, 4, MPI_INT, 0, 77, sub, &recv);
        if (rank == 0)
            MPI_Isend(data, 4, MPI_INT, 1, 77, sub, &send);
        MPI_Comm_free(&sub);
        MPI_Wait(&send, MPI_STATUS_IGNORE);
        MPI_Wait(&recv, MPI_STATUS_IGNORE);
        if (rank == 1 && in[0] != it)
            printf("iteration %d received %d\n", it, in[0]);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (rank == 0)
        printf("done\n");
    MPI_Finalize();
    return 0;
}
