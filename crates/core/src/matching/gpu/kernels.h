/* Per-thread bodies of the GPU matching kernels. The same source compiles as CUDA C (NVRTC, the
 * `__global__` wrappers in kernels.cu) and as C for the host (host.c, which drives the bodies
 * with loops over the thread index), so the host build tests exactly what the device runs.
 *
 * Keys: tag in the high 32 bits, the traffic type in bit 31, source in the low 31 bits. A
 * posted pattern writes its wildcards as all-ones fields (ANY_SOURCE = 0x7fffffff,
 * ANY_TAG = 0xffffffff), which no message carries; fields written so are left out of the
 * comparison. */

#ifndef MS_KERNELS_H
#define MS_KERNELS_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
typedef unsigned long long ms_u64;
typedef unsigned int ms_u32;
#define MS_FN static __device__ __forceinline__
#define MS_CTZ(x) (__ffs(x) - 1)
#define MS_ATOMIC_MIN(p, v) atomicMin((p), (v))
#define MS_ATOMIC_ADD(p, v) atomicAdd((p), (v))
#else
#include <stdint.h>
typedef uint64_t ms_u64;
typedef uint32_t ms_u32;
#define MS_FN static inline
#define MS_CTZ(x) __builtin_ctz(x)
/* The host runs one thread at a time, so plain updates are atomic. */
static inline ms_u32 ms_min(ms_u32 *p, ms_u32 v) {
    ms_u32 old = *p;
    if (v < old) *p = v;
    return old;
}
static inline ms_u32 ms_add(ms_u32 *p, ms_u32 v) {
    ms_u32 old = *p;
    *p = old + v;
    return old;
}
#define MS_ATOMIC_MIN(p, v) ms_min((p), (v))
#define MS_ATOMIC_ADD(p, v) ms_add((p), (v))
#endif

#define MS_NONE 0xffffffffu
#define MS_SOURCE 0x7fffffffull
#define MS_TAG 0xffffffff00000000ull
#define MS_COLLECTIVE 0x80000000ull
/* An empty hash table slot: tag -2, which neither MPI nor a wildcard writes. */
#define MS_EMPTY 0xfffffffe7fffffffull

/* One hash table entry: a key and the oldest and newest live queued element holding it. */
typedef struct {
    ms_u64 key;
    ms_u32 head;
    ms_u32 tail;
} ms_entry;

/* The fields `pattern` compares: its wildcards drop theirs. */
MS_FN ms_u64 ms_mask(ms_u64 pattern) {
    ms_u64 mask = MS_COLLECTIVE;
    if ((pattern & MS_SOURCE) != MS_SOURCE) mask |= MS_SOURCE;
    if ((pattern & MS_TAG) != MS_TAG) mask |= MS_TAG;
    return mask;
}

MS_FN int ms_fits(ms_u64 pattern, ms_u64 message) {
    return ((pattern ^ message) & ms_mask(pattern)) == 0;
}

/* Bit i: queued element keys[i] and `item` fit, of the elements set in `live`. Queued elements
 * are patterns (posted receives, `item` a message) or messages (`item` a pattern). */
MS_FN ms_u32 ms_vote32(const ms_u64 *keys, ms_u32 live, ms_u64 item, int queued_patterns) {
    ms_u32 bits = 0;
    for (ms_u32 i = 0; i < 32; i++) {
        int fit = queued_patterns ? ms_fits(keys[i], item) : ms_fits(item, keys[i]);
        bits |= (ms_u32)fit << i;
    }
    return bits & live;
}

MS_FN ms_u32 ms_home(ms_u64 key, ms_u32 bits) {
    return (ms_u32)((key * 0x9e3779b97f4a7c15ull) >> (64 - bits));
}

/* In a linear-probing table of 2^bits entries (never full): the entry of `key`, or the empty
 * entry where it goes. */
MS_FN ms_u32 ms_place(const ms_entry *table, ms_u32 bits, ms_u64 key) {
    ms_u32 mask = (1u << bits) - 1;
    ms_u32 i = ms_home(key, bits);
    while (table[i].key != key && table[i].key != MS_EMPTY) i = (i + 1) & mask;
    return i;
}

/* The entry of `key`, or MS_NONE. */
MS_FN ms_u32 ms_find(const ms_entry *table, ms_u32 bits, ms_u64 key) {
    ms_u32 i = ms_place(table, bits, key);
    return table[i].key == key ? i : MS_NONE;
}

/* Thread `word` of the scan (paper 000, Algorithm 1): the live elements of one 32-slot word
 * vote on every item; each item keeps the earliest slot voting for it (the reduce, a minimum).
 * Conflicts between items are resolved afterwards in item order. */
MS_FN void ms_scan_word(ms_u32 word, const ms_u64 *keys, const ms_u32 *live, const ms_u64 *items,
                        ms_u32 count, int queued_patterns, ms_u32 *first) {
    ms_u32 alive = live[word];
    if (alive == 0) return;
    ms_u64 local[32];
    for (ms_u32 i = 0; i < 32; i++) local[i] = keys[word * 32 + i];
    for (ms_u32 item = 0; item < count; item++) {
        ms_u32 bits = ms_vote32(local, alive, items[item], queued_patterns);
        if (bits != 0) MS_ATOMIC_MIN(&first[item], word * 32 + MS_CTZ(bits));
    }
}

/* Thread `item` of the lookup: the table entry of its key. With `claim`, overtaking is allowed:
 * the item takes the next unclaimed element of the entry's chain, in whatever order the
 * threads come, and writes its slot. */
MS_FN void ms_lookup_item(ms_u32 item, const ms_u64 *items, const ms_entry *table, ms_u32 bits,
                          const ms_u32 *next, ms_u32 *claims, int claim, ms_u32 *entry,
                          ms_u32 *slot) {
    ms_u32 e = ms_find(table, bits, items[item]);
    entry[item] = e;
    if (!claim) return;
    ms_u32 at = MS_NONE;
    if (e != MS_NONE) {
        ms_u32 rank = MS_ATOMIC_ADD(&claims[e], 1u);
        at = table[e].head;
        while (rank > 0 && at != MS_NONE) {
            at = next[at];
            rank--;
        }
    }
    slot[item] = at;
}

#endif
