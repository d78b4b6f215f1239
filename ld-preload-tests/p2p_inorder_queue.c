/* ranks: 2 */
/* A long posted queue matched in order across a barrier, waited for with MPI_Waitall
 * (inorder_queue.h): under MATCHSHIM_TAKEOVER=auto the shim's MPI_T variable
 * matchshim_takeovers may count the first takeover and its return after the barrier's loan,
 * no more. Natively and under the other takeover modes only the payloads are checked; the
 * check lines are the same. */
#define _GNU_SOURCE
#include "common.h"
#include "takeover_count.h"
#include "inorder_queue.h"

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    takeover_count takeovers;
    int judged = takeover_count_start(&takeovers);

    for (int rep = 0; rep < REPS; rep++)
        repetition(rep, 0);
    if (judged && t_rank == 1)
        takeover_count_expect(&takeovers, "inorder_queue", REPS, 2);
    report("inorder_queue");
    takeover_count_stop(&takeovers);
    return t_finish();
}
