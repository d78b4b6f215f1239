/* matchshim: MPI message matching in adaptive Rust queues, under unmodified MPI programs.
 *
 * Programs need no source change: load libmatchshim.so with LD_PRELOAD, or link it before
 * libmpi (mpicc app.c -L<dir> -lmatchshim). It exports the MPI_* functions it takes over and
 * reaches the MPI library through PMPI_*. This header declares the few extra functions a
 * program linked with -lmatchshim may call. */
#ifndef MATCHSHIM_H
#define MATCHSHIM_H

#ifdef __cplusplus
extern "C" {
#endif

/* The matching engine in use ("list", "rank", ...), or "" outside MPI_Init..MPI_Finalize. */
const char *matchshim_engine(void);

#ifdef __cplusplus
}
#endif

#endif
