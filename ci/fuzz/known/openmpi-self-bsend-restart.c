/* Open MPI 4.1.4: a persistent buffered send to the rank itself (MPI_Bsend_init) of a message
 * past the self transport's eager limit (btl_self_eager_limit, 1 KiB with the header), started
 * again after its previous start completed and its buffer was rewritten, delivers the first
 * start's data every time. Shorter messages, messages to another rank, and MPICH 4.0.2 send
 * what the buffer holds at each start. The fuzzer restarts persistent buffered sends to the
 * rank itself on MPICH only (ci/fuzz/fuzz.c, gen_p2p).
 *
 *   mpicc.openmpi -o self-bsend-restart openmpi-self-bsend-restart.c
 *   mpiexec.openmpi -n 1 ./self-bsend-restart    # "start 1 delivered 0, 9 of 10 wrong" */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define STARTS 10
#define COUNT 256

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int size = 1 << 16, out[COUNT], in[COUNT], wrong = 0;
    void *attached = malloc(size);
    MPI_Buffer_attach(attached, size);
    MPI_Request send;
    MPI_Bsend_init(out, COUNT, MPI_INT, 0, 5, MPI_COMM_SELF, &send);
    for (int start = 0; start < STARTS; start++) {
        for (int i = 0; i < COUNT; i++)
            out[i] = start;
        MPI_Start(&send);
        MPI_Wait(&send, MPI_STATUS_IGNORE);
        MPI_Recv(in, COUNT, MPI_INT, 0, 5, MPI_COMM_SELF, MPI_STATUS_IGNORE);
        if (in[COUNT - 1] != start && wrong++ == 0)
            printf("start %d delivered %d, ", start, in[COUNT - 1]);
    }
    printf("%d of %d wrong\n", wrong, STARTS);
    MPI_Request_free(&send);
    MPI_Buffer_detach(&attached, &size);
    free(attached);
    MPI_Finalize();
    return 0;
}
