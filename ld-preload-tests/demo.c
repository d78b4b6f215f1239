/* demo: a small halo-and-hot-spot program. Every rank exchanges messages with its ring
 * neighbours, then all ranks send bursts to rank 0, which receives them with specific sources
 * and tags in an order that differs from the arrival order (long matching queues), and with
 * wildcards. Prints a checksum that must be the same natively and under the shim. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define BURST 64

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    long local = 0;
    for (int iter = 0; iter < 20; iter++) {
        int right = (rank + 1) % size, left = (rank + size - 1) % size;
        int out = rank * 1000 + iter, in = -1;
        MPI_Request reqs[2];
        MPI_Irecv(&in, 1, MPI_INT, left, iter, MPI_COMM_WORLD, &reqs[0]);
        MPI_Isend(&out, 1, MPI_INT, right, iter, MPI_COMM_WORLD, &reqs[1]);
        MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
        local += in;
    }

    /* Hot spot: rank 0 posts receives in reverse tag order, others send in tag order. */
    if (rank == 0) {
        int n = (size - 1) * BURST;
        int *vals = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
        MPI_Request *reqs = malloc(sizeof(MPI_Request) * (size_t)(n > 0 ? n : 1));
        for (int src = 1, k = 0; src < size; src++)
            for (int tag = BURST - 1; tag >= 0; tag--, k++)
                MPI_Irecv(&vals[k], 1, MPI_INT, src, tag, MPI_COMM_WORLD, &reqs[k]);
        MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
        for (int k = 0; k < n; k++)
            local += vals[k];
        for (int k = 0; k < size - 1; k++) {
            int v;
            MPI_Status st;
            MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
            local += v * (st.MPI_TAG == 7777);
        }
        free(vals);
        free(reqs);
    } else {
        for (int tag = 0; tag < BURST; tag++) {
            int v = rank * tag;
            MPI_Send(&v, 1, MPI_INT, 0, tag, MPI_COMM_WORLD);
        }
        MPI_Send(&rank, 1, MPI_INT, 0, 7777, MPI_COMM_WORLD);
    }

    long total = 0;
    MPI_Reduce(&local, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("demo: %d ranks, checksum %ld\n", size, total);
    MPI_Finalize();
    return 0;
}
