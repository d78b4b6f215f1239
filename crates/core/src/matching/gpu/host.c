/* The host build of the kernels: each body driven by a loop over its thread index, in order.
 * The engine's CPU tier uses the same bodies for its single searches. */

#include "kernels.h"

void ms_scan_host(ms_u32 word_begin, ms_u32 word_end, const ms_u64 *keys, const ms_u32 *live,
                  const ms_u64 *items, ms_u32 count, int queued_patterns, ms_u32 *first) {
    for (ms_u32 word = word_begin; word < word_end; word++)
        ms_scan_word(word, keys, live, items, count, queued_patterns, first);
}

void ms_lookup_host(ms_u32 count, const ms_u64 *items, const ms_entry *table, ms_u32 bits,
                    const ms_u32 *next, ms_u32 *claims, int claim, ms_u32 *entry, ms_u32 *slot) {
    for (ms_u32 item = 0; item < count; item++)
        ms_lookup_item(item, items, table, bits, next, claims, claim, entry, slot);
}

/* One search as the CPU tier makes it: the earliest live element from word `word_begin` on
 * that fits `item`, or MS_NONE; `depth` grows by the live elements passed, the match included. */
ms_u32 ms_first_host(ms_u32 word_begin, ms_u32 word_end, const ms_u64 *keys, const ms_u32 *live,
                     ms_u64 item, int queued_patterns, ms_u32 *depth) {
    for (ms_u32 word = word_begin; word < word_end; word++) {
        ms_u32 alive = live[word];
        if (alive == 0) continue;
        ms_u32 bits = ms_vote32(keys + (ms_u64)word * 32, alive, item, queued_patterns);
        if (bits != 0) {
            ms_u32 bit = MS_CTZ(bits);
            *depth += __builtin_popcount(alive & (0xffffffffu >> (31 - bit)));
            return word * 32 + bit;
        }
        *depth += __builtin_popcount(alive);
    }
    return MS_NONE;
}
