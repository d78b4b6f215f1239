/* ranks: 2 */
/* p2p_inorder_queue at MPI_THREAD_MULTIPLE, waited for one receive at a time: there the
 * receives waiting in the shim go to MPI for good before the barrier (they cannot be lent),
 * so a takeover of the queue matches nothing, and must not be tried again on a queue as
 * long: under MATCHSHIM_TAKEOVER=auto matchshim_takeovers may count two takeovers in the four
 * repetitions, no more. Natively and under the other takeover modes only the payloads are
 * checked; the check lines are the same. */
#define _GNU_SOURCE
#include "common.h"
#include "takeover_count.h"
#include "inorder_queue.h"

int main(int argc, char **argv)
{
    if (!t_init_multiple(&argc, &argv, "inorder_queue_mt"))
        return t_finish();
    takeover_count takeovers;
    int judged = takeover_count_start(&takeovers);

    for (int rep = 0; rep < REPS; rep++)
        repetition(rep, 1);
    if (judged && t_rank == 1)
        takeover_count_expect(&takeovers, "inorder_queue_mt", REPS, 2);
    report("inorder_queue_mt");
    takeover_count_stop(&takeovers);
    return t_finish();
}
