/* ranks: 2 */
/* p2p_recent_comms.c below MPI_THREAD_MULTIPLE, where the communicators the plain path
 * remembers are the process's, emptied when one is freed, not each thread's. */
#define RECENT_COMMS_SERIAL
#include "p2p_recent_comms.c"
