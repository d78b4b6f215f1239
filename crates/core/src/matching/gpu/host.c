/* The host build of the kernels: each body driven by loops over its blocks and thread indices,
 * in order, phase by phase where a block cooperates (what a barrier separates on the device
 * runs here for every thread before the next phase starts). The engine's CPU tier uses the same
 * bodies for its single searches. */

#include <stddef.h>
#include <stdlib.h>

#include "kernels.h"

void ms_sync_host(const ms_args *a) {
    ms_u32 n = ms_sync_total(a);
    for (ms_u32 g = 0; g < n; g++) ms_sync_item(a, g);
}

void ms_table_init_host(const ms_args *a) {
    for (ms_u32 e = 0; e < 1u << a->prq.table_bits; e++) ms_table_init_item(&a->prq, e);
}

/* Chunks in the order the chunk counter hands them out: each finds the one before it
 * published, as a device block waits for it to. */
void ms_rank_host(const ms_args *a) {
    ms_rank_shared *s = malloc(sizeof *s);
    if (s == NULL) abort();
    for (;;) {
        s->chunk = MS_ATOMIC_ADD(&a->b.ctl->chunk, 1u);
        if (s->chunk >= ms_chunks(a)) break;
        for (ms_u32 t = 0; t < MS_CHUNK; t++) ms_rank_load(a, s, t);
        if (a->b.mode == MS_UNORDERED) continue;
        for (ms_u32 t = 0; t < MS_CHUNK; t++) ms_rank_local(s, t);
        for (ms_u32 t = 0; t < MS_CHUNK; t++) ms_rank_publish(a, s, t);
        a->b.flags[s->chunk] = a->b.epoch;
        for (ms_u32 t = 0; t < MS_CHUNK; t++) ms_rank_finish(a, s, t);
    }
    free(s);
}

void ms_wscan_host(const ms_args *a) {
    ms_u32 n = ms_wscan_items(a);
    for (ms_u32 g = 0; g < n; g++) ms_wscan_item(a, g);
}

void ms_round_claim_host(const ms_args *a) {
    for (ms_u32 i = 0; i < a->b.count; i++) ms_round_claim(a, i);
}

void ms_round_break_host(const ms_args *a) {
    for (ms_u32 i = 0; i < a->b.count; i++) ms_round_break(a, i);
}

void ms_round_commit_host(const ms_args *a) {
    for (ms_u32 i = 0; i < a->b.count; i++) ms_round_commit(a, i);
}

void ms_scan1_host(const ms_args *a) {
    for (ms_u32 word = 0; word < a->umq.words; word++) ms_scan1_word(a, word);
    ms_scan1_publish(a);
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
            *depth += MS_POPC(alive & (0xffffffffu >> (31 - bit)));
            return word * 32 + bit;
        }
        *depth += MS_POPC(alive);
    }
    return MS_NONE;
}

/* The work items of `kernel` (device.rs's `Kernel` order), to size a plain launch's grid. */
ms_u32 ms_items_host(const ms_args *a, int kernel) {
    switch (kernel) {
    case 0: return ms_sync_total(a);
    case 1: return 1u << a->prq.table_bits;
    case 2: return ms_chunks(a) * MS_CHUNK;
    case 3: return ms_wscan_items(a);
    case 7: return a->umq.words;
    default: return a->b.count;
    }
}

/* Sizes and offsets of the argument structs, checked against the Rust side's. */
unsigned long ms_layout_host(int what) {
    switch (what) {
    case 0: return sizeof(ms_args);
    case 1: return sizeof(ms_side);
    case 2: return sizeof(ms_burst);
    case 3: return offsetof(ms_args, b);
    case 4: return offsetof(ms_side, n_dirty);
    case 5: return offsetof(ms_burst, count);
    case 6: return sizeof(ms_host_entry);
    case 7: return sizeof(ms_entry);
    case 8: return sizeof(ms_ticket);
    case 9: return offsetof(ms_side, chains);
    default: return 0;
    }
}
