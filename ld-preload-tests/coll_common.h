/* What the collective test programs share beyond common.h: reference values and counts. */
#ifndef MATCHSHIM_COLL_COMMON_H
#define MATCHSHIM_COLL_COMMON_H

#include "common.h"

/* The value rank r contributes at index i in test k: small integers, so sums of doubles
 * are exact. */
static inline double val(int k, int r, long i)
{
    return (double)((k * 7 + r * 13 + i * 3) % 1001);
}

/* Element counts every check runs with: empty, one, odd small, medium, 64 KiB (the blocks
 * whose gathers MATCHSHIM_COLL=auto gives the shim from 4 ranks), large. */
static const int t_counts[] = {0, 1, 7, 1000, 8192, 100000};
#define N_COUNTS ((int)(sizeof t_counts / sizeof t_counts[0]))

static inline double *dalloc(long n)
{
    return malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
}

#endif
