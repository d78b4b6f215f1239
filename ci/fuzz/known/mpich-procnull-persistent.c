/* MPICH 4.0.2: a persistent receive from MPI_PROC_NULL, started, counts as inactive in
 * MPI_Testany and MPI_Waitsome (index and outcount MPI_UNDEFINED, the request never reported
 * complete), and MPI_Wait gives it MPI_ANY_SOURCE as its source; a nonblocking receive from
 * MPI_PROC_NULL gets source 0 and tag 0 in its status.  The standard makes both active until
 * completed, with source MPI_PROC_NULL, tag MPI_ANY_TAG and count 0; Open MPI 4.1.4 does so.
 * The fuzzer posts only nonblocking receives from MPI_PROC_NULL on MPICH and checks their
 * statuses on Open MPI only (ci/fuzz/fuzz.c, gen_p2p and recv_done).
 *
 *   mpicc.mpich -o procnull mpich-procnull-persistent.c
 *   mpiexec.mpich -n 1 ./procnull      # "Testany: index -32766 flag 1", ... */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int buf[4], index, flag, outcount, indices[1];
    MPI_Request req;
    MPI_Status status;
    MPI_Recv_init(buf, 4, MPI_INT, MPI_PROC_NULL, 3, MPI_COMM_WORLD, &req);
    MPI_Start(&req);
    MPI_Testany(1, &req, &index, &flag, &status);
    printf("Testany: index %d flag %d (expected 0 and 1)\n", index, flag);
    MPI_Start(&req);
    MPI_Waitsome(1, &req, &outcount, indices, &status);
    printf("Waitsome: outcount %d (expected 1)\n", outcount);
    MPI_Start(&req);
    MPI_Wait(&req, &status);
    printf("Wait: source %d (expected MPI_PROC_NULL, %d)\n", status.MPI_SOURCE, MPI_PROC_NULL);
    MPI_Request_free(&req);
    MPI_Irecv(buf, 4, MPI_INT, MPI_PROC_NULL, 3, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, &status);
    printf("Irecv: source %d tag %d (expected %d and %d)\n", status.MPI_SOURCE, status.MPI_TAG,
           MPI_PROC_NULL, MPI_ANY_TAG);
    MPI_Finalize();
    return 0;
}
