/* ranks: 2 */
/* p2p_followed_polls.c at MPI_THREAD_MULTIPLE, where every completion call passes the
 * out-of-line part of its entry point. */
#define FOLLOWED_POLLS_MULTIPLE
#include "p2p_followed_polls.c"
