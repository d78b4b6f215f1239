/* MPICH 4.0.2 (ch4 over UCX): on a one-rank communicator, MPI_Alltoall, MPI_Ialltoall and their
 * v and w forms send the rank's own block on the communicator's point-to-point context (tag
 * 287), so a receive with MPI_ANY_TAG pending there takes it: the receive gets a message nobody
 * sent and the collective never completes.  Open MPI 4.1.4, and MPICH with two or more ranks,
 * keep collective traffic apart.  The fuzzer gives one-rank communicators no all-to-all on MPICH
 * (ci/fuzz/fuzz.c, gen_p2p).
 *
 *   mpicc.mpich -o alltoall mpich-one-rank-alltoall.c
 *   timeout 10 mpiexec.mpich -n 1 ./alltoall      # "got tag 287", then hangs */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm self;
    MPI_Comm_dup(MPI_COMM_SELF, &self);
    int in[4], token = 7, block = 1, out;
    MPI_Request recv, coll, send;
    MPI_Status status;
    MPI_Irecv(in, 4, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, self, &recv);
    MPI_Ialltoall(&block, 1, MPI_INT, &out, 1, MPI_INT, self, &coll);
    MPI_Isend(&token, 1, MPI_INT, 0, 100, self, &send);
    MPI_Wait(&recv, &status);
    printf("got tag %d (sent: 100)\n", status.MPI_TAG);
    fflush(stdout);
    MPI_Wait(&send, MPI_STATUS_IGNORE);
    MPI_Wait(&coll, MPI_STATUS_IGNORE);
    MPI_Comm_free(&self);
    MPI_Finalize();
    return 0;
}
