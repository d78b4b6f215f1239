/* Per-thread bodies of the GPU matching kernels. The same source compiles as CUDA C (NVRTC, the
 * `__global__` wrappers in kernels.cu) and as C for the host (host.c, which drives the bodies
 * with loops over blocks and thread indices, phase by phase where a block cooperates), so the
 * host build tests exactly what the device runs.
 *
 * Keys: tag in the high 32 bits, the traffic type in bit 31, source in the low 31 bits. A
 * posted pattern writes its wildcards as all-ones fields (ANY_SOURCE = 0x7fffffff,
 * ANY_TAG = 0xffffffff), which no message carries; fields written so are left out of the
 * comparison.
 *
 * The device holds a mirror of each queue side in its own memory. The host's side stays the
 * authority: before a burst, `ms_sync` brings the mirror up to date from what the host changed
 * (read in place from pinned, device-mapped host memory); the burst then claims posted receives
 * and removes them from the mirror on the device, and writes one result per message into mapped
 * host memory, which is all the host learns.
 *
 * Posted receives of one key form a chain in posting order; each gets a ticket, its place in
 * that chain (0, 1, 2, ...), and the mirror's ticket table maps (entry, ticket) to the slot.
 * The device counts per entry the tickets posted and the tickets consumed from the front (the
 * host removes only fronts too; anything else rebuilds the mirror), so the k-th message of a
 * key in a burst takes ticket consumed + k without walking the chain. */

#ifndef MS_KERNELS_H
#define MS_KERNELS_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
typedef unsigned long long ms_u64;
typedef unsigned int ms_u32;
#define MS_FN static __device__ __forceinline__
#define MS_CTZ(x) (__ffs(x) - 1)
#define MS_POPC(x) __popc(x)
#define MS_ATOMIC_MIN(p, v) atomicMin((p), (v))
#define MS_ATOMIC_MAX(p, v) atomicMax((p), (v))
#define MS_ATOMIC_ADD(p, v) atomicAdd((p), (v))
#define MS_ATOMIC_AND(p, v) atomicAnd((p), (v))
#define MS_CAS64(p, old, v) atomicCAS((p), (old), (v))
#else
#include <stdint.h>
typedef uint64_t ms_u64;
typedef uint32_t ms_u32;
#define MS_FN static inline
#define MS_CTZ(x) __builtin_ctz(x)
#define MS_POPC(x) __builtin_popcount(x)
/* The host runs one thread at a time, so plain updates are atomic. */
static inline ms_u32 ms_min(ms_u32 *p, ms_u32 v) {
    ms_u32 old = *p;
    if (v < old) *p = v;
    return old;
}
static inline ms_u32 ms_max(ms_u32 *p, ms_u32 v) {
    ms_u32 old = *p;
    if (v > old) *p = v;
    return old;
}
static inline ms_u32 ms_add(ms_u32 *p, ms_u32 v) {
    ms_u32 old = *p;
    *p = old + v;
    return old;
}
static inline ms_u32 ms_and(ms_u32 *p, ms_u32 v) {
    ms_u32 old = *p;
    *p = old & v;
    return old;
}
static inline ms_u64 ms_cas64(ms_u64 *p, ms_u64 old, ms_u64 v) {
    ms_u64 seen = *p;
    if (seen == old) *p = v;
    return seen;
}
#define MS_ATOMIC_MIN(p, v) ms_min((p), (v))
#define MS_ATOMIC_MAX(p, v) ms_max((p), (v))
#define MS_ATOMIC_ADD(p, v) ms_add((p), (v))
#define MS_ATOMIC_AND(p, v) ms_and((p), (v))
#define MS_CAS64(p, old, v) ms_cas64((p), (old), (v))
#endif

#define MS_NONE 0xffffffffu
/* A burst's message not settled yet (between rounds). */
#define MS_PENDING 0xfffffffeu
#define MS_SOURCE 0x7fffffffull
#define MS_TAG 0xffffffff00000000ull
#define MS_COLLECTIVE 0x80000000ull
/* An empty hash table entry: tag -2, which neither MPI nor a wildcard writes. */
#define MS_EMPTY 0xfffffffe7fffffffull
/* An empty ticket table entry: entry index all ones, which no table has. */
#define MS_NO_TICKET 0xffffffffffffffffull
/* Messages per block of the rank kernel; its blocks have this many threads. */
#define MS_CHUNK 1024u
/* A candidate taken from the wildcard log carries this bit. */
#define MS_WILD 0x80000000u

/* Burst modes. */
#define MS_ORDERED 0u   /* no wildcard receive queued: each message takes its key's next ticket */
#define MS_UNORDERED 1u /* the same, tickets in whatever order the threads come (overtaking) */
#define MS_ROUND 2u     /* wildcard receives queued: rounds of candidates and conflicts */

/* The device's table entry: a key, the tickets posted and the tickets consumed from the front. */
typedef struct {
    ms_u64 key;
    ms_u32 posted;
    ms_u32 consumed;
} ms_entry;

/* The host's table entry (side.rs `Entry`): a key, its chain, the tickets it gave out, and
 * the table's epoch it was made in (entries of other epochs are empty). */
typedef struct {
    ms_u64 key;
    ms_u32 head;
    ms_u32 tail;
    ms_u32 posted;
    ms_u32 epoch;
} ms_host_entry;

/* (entry << 32 | ticket) -> slot. */
typedef struct {
    ms_u64 tag;
    ms_u32 slot;
    ms_u32 pad;
} ms_ticket;

/* One queue side: its mirror in device memory, and what the host changed since the last sync
 * (host arrays in mapped memory). A side without chains (the unexpected messages) has only keys
 * and live bits. */
typedef struct {
    ms_u64 *keys;
    ms_u32 *live;
    ms_u32 *entry_of;
    ms_u32 *wpos;
    ms_entry *table;
    ms_ticket *tickets;
    ms_u32 *wslot;
    ms_u64 *wkeys;
    ms_u32 *wlive;
    const ms_u64 *h_keys;
    const ms_u32 *h_live;
    const ms_u32 *h_entry_of;
    const ms_u32 *h_ticket;
    const ms_u32 *h_wpos;
    const ms_u32 *h_wslot;
    const ms_u64 *h_wkeys;
    const ms_u32 *h_wlive;
    const ms_host_entry *h_table;
    /* Live words the host rewrote, entries whose front it removed (once per removal), table
     * entries it made, wildcard live words it rewrote. */
    const ms_u32 *dirty;
    const ms_u32 *fronts;
    const ms_u32 *entries;
    const ms_u32 *wdirty;
    ms_u32 n_dirty, n_fronts, n_entries, n_wdirty;
    /* Slots [from, to) and wildcard log positions [wfrom, wto) are new to the mirror. */
    ms_u32 from, to, wfrom, wto;
    /* Words in use: of the live bits, of the wildcard log. */
    ms_u32 words, wwords;
    ms_u32 table_bits, ticket_bits;
    ms_u32 chains;
    ms_u32 pad;
} ms_side;

/* Counters a launch sequence shares, in device memory. */
typedef struct {
    ms_u32 chunk; /* the rank kernel's next chunk */
    ms_u32 brk;   /* a round's first message that must wait */
    ms_u32 first; /* a single scan's earliest fit */
    ms_u32 done;  /* blocks of a single scan finished */
} ms_ctl;

typedef struct {
    const ms_u64 *h_items; /* the burst's message keys (mapped) */
    ms_u32 *out;           /* per message: the slot it took, MS_NONE or MS_PENDING (mapped) */
    ms_u32 *res;           /* the same in device memory, which rounds read */
    ms_u64 *items;
    ms_u32 *e_of;
    ms_u32 *rank;
    ms_u32 *cand;
    ms_u32 *wfirst;  /* per message, all MS_NONE between rounds */
    ms_u32 *cnt;     /* per table entry, all zero between rounds */
    ms_u32 *claimer; /* per posted slot, all MS_NONE between rounds */
    ms_u32 *flags;   /* per chunk: the epoch of the rank launch that published it */
    ms_ctl *ctl;
    ms_u64 pattern; /* a single scan's pattern */
    ms_u32 count, mode, epoch, groups;
} ms_burst;

typedef struct {
    ms_side prq;
    ms_side umq;
    ms_burst b;
} ms_args;

/* ---- Keys and tables ---- */

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

/* In a linear-probing table of 2^bits entries (never full): the entry of `key`, or MS_NONE. */
MS_FN ms_u32 ms_find(const ms_entry *table, ms_u32 bits, ms_u64 key) {
    ms_u32 mask = (1u << bits) - 1;
    ms_u32 i = ms_home(key, bits);
    while (table[i].key != key) {
        if (table[i].key == MS_EMPTY) return MS_NONE;
        i = (i + 1) & mask;
    }
    return i;
}

MS_FN ms_u64 ms_ticket_tag(ms_u32 entry, ms_u32 ticket) {
    return ((ms_u64)entry << 32) | ticket;
}

MS_FN void ms_ticket_insert(ms_ticket *tickets, ms_u32 bits, ms_u64 tag, ms_u32 slot) {
    ms_u32 mask = (1u << bits) - 1;
    ms_u32 i = ms_home(tag, bits);
    for (;;) {
        ms_u64 seen = MS_CAS64(&tickets[i].tag, MS_NO_TICKET, tag);
        if (seen == MS_NO_TICKET || seen == tag) {
            tickets[i].slot = slot;
            return;
        }
        i = (i + 1) & mask;
    }
}

/* The slot holding ticket `ticket` of entry `entry`, or MS_NONE. */
MS_FN ms_u32 ms_ticket_find(const ms_ticket *tickets, ms_u32 bits, ms_u32 entry, ms_u32 ticket) {
    ms_u64 tag = ms_ticket_tag(entry, ticket);
    ms_u32 mask = (1u << bits) - 1;
    ms_u32 i = ms_home(tag, bits);
    while (tickets[i].tag != tag) {
        if (tickets[i].tag == MS_NO_TICKET) return MS_NONE;
        i = (i + 1) & mask;
    }
    return tickets[i].slot;
}

MS_FN void ms_kill(ms_u32 *live, ms_u32 slot) {
    MS_ATOMIC_AND(&live[slot / 32], ~(1u << (slot % 32)));
}

/* ---- ms_sync: the mirror brought up to date, and the burst's inputs read in ---- */

/* Work items of one side's sync, in the order ms_sync_side numbers them. */
MS_FN ms_u32 ms_sync_items(const ms_side *s) {
    ms_u32 n = (s->to - s->from) + s->n_dirty;
    if (s->to > s->from) n += (s->to + 31) / 32 - s->from / 32;
    if (s->chains) {
        n += s->n_fronts + s->n_entries + (s->wto - s->wfrom) + s->n_wdirty;
        if (s->wto > s->wfrom) n += (s->wto + 31) / 32 - s->wfrom / 32;
    }
    return n;
}

/* Work item `g` of one side's sync. */
MS_FN void ms_sync_side(const ms_side *s, ms_u32 g) {
    ms_u32 n = s->to - s->from;
    if (g < n) {
        ms_u32 slot = s->from + g;
        s->keys[slot] = s->h_keys[slot];
        if (!s->chains) return;
        ms_u32 e = s->h_entry_of[slot], ticket = s->h_ticket[slot];
        s->entry_of[slot] = e;
        s->wpos[slot] = s->h_wpos[slot];
        if (ticket != MS_NONE) {
            ms_ticket_insert(s->tickets, s->ticket_bits, ms_ticket_tag(e, ticket), slot);
            MS_ATOMIC_MAX(&s->table[e].posted, ticket + 1);
        }
        return;
    }
    g -= n;
    n = s->to > s->from ? (s->to + 31) / 32 - s->from / 32 : 0;
    if (g < n) {
        ms_u32 word = s->from / 32 + g;
        s->live[word] = s->h_live[word];
        return;
    }
    g -= n;
    if (g < s->n_dirty) {
        s->live[s->dirty[g]] = s->h_live[s->dirty[g]];
        return;
    }
    g -= s->n_dirty;
    if (g < s->n_fronts) {
        MS_ATOMIC_ADD(&s->table[s->fronts[g]].consumed, 1u);
        return;
    }
    g -= s->n_fronts;
    if (g < s->n_entries) {
        /* A new key: its counts are zero since the entry was empty. The host table is read
         * only here, entry by entry. */
        ms_u32 e = s->entries[g];
        s->table[e].key = s->h_table[e].key;
        return;
    }
    g -= s->n_entries;
    n = s->wto - s->wfrom;
    if (g < n) {
        ms_u32 at = s->wfrom + g;
        s->wslot[at] = s->h_wslot[at];
        s->wkeys[at] = s->h_wkeys[at];
        return;
    }
    g -= n;
    n = s->wto > s->wfrom ? (s->wto + 31) / 32 - s->wfrom / 32 : 0;
    if (g < n) {
        ms_u32 word = s->wfrom / 32 + g;
        s->wlive[word] = s->h_wlive[word];
        return;
    }
    g -= n;
    if (g < s->n_wdirty) s->wlive[s->wdirty[g]] = s->h_wlive[s->wdirty[g]];
}

/* Work items of the burst's inputs: one per message. */
MS_FN ms_u32 ms_sync_total(const ms_args *a) {
    return ms_sync_items(&a->prq) + ms_sync_items(&a->umq) + a->b.count + 1;
}

/* Thread `g` of ms_sync. The host's changes never conflict with one another: each slot, word
 * and new entry appears once, and the counts only add. */
MS_FN void ms_sync_item(const ms_args *a, ms_u32 g) {
    ms_u32 n = ms_sync_items(&a->prq);
    if (g < n) {
        ms_sync_side(&a->prq, g);
        return;
    }
    g -= n;
    n = ms_sync_items(&a->umq);
    if (g < n) {
        ms_sync_side(&a->umq, g);
        return;
    }
    g -= n;
    if (g < a->b.count) {
        a->b.items[g] = a->b.h_items[g];
        if (a->b.mode == MS_ROUND) a->b.out[g] = a->b.res[g] = MS_PENDING;
        return;
    }
    /* The last item resets the counters of what follows. */
    a->b.ctl->chunk = 0;
    a->b.ctl->brk = MS_NONE;
    a->b.ctl->first = MS_NONE;
    a->b.ctl->done = 0;
}

/* ---- ms_table_init: a rebuilt copy's table, empty (the sync then writes every key the host
 * has, from its list of entries) ---- */

MS_FN void ms_table_init_item(const ms_side *s, ms_u32 e) {
    s->table[e].key = MS_EMPTY;
    s->table[e].posted = 0;
    s->table[e].consumed = 0;
}

/* ---- ms_rank: a burst's messages ranked within their key, in arrival order ---- *
 *
 * Blocks take chunks of MS_CHUNK messages in order (the chunk counter). Within a chunk each
 * thread counts the earlier messages of its entry; then, once the chunk before has published,
 * the first message of each entry in the chunk adds the chunk's count to the entry's counter
 * and keeps what was there, so ranks run on across chunks in arrival order. In MS_ORDERED the
 * counter is the entry's consumed tickets, and the rank is the ticket to claim. */

/* What one rank block keeps between its phases (shared memory on the device). */
typedef struct {
    ms_u32 e[MS_CHUNK];
    ms_u32 before[MS_CHUNK];
    ms_u32 lead[MS_CHUNK];
    ms_u32 count[MS_CHUNK];
    ms_u32 base[MS_CHUNK];
    ms_u32 chunk;
} ms_rank_shared;

MS_FN ms_u32 ms_chunks(const ms_args *a) {
    return (a->b.count + MS_CHUNK - 1) / MS_CHUNK;
}

/* Message `i` claims ticket `ticket` of entry `e`: the slot's live bit goes, or, past the
 * tickets posted, the message finds none and the consumed count, which the ranks may have
 * pushed past the tickets posted, comes back to them (each thread after its own chunk's add,
 * so the last add is always followed by this when any message of the entry found none). */
MS_FN void ms_claim(const ms_args *a, ms_u32 i, ms_u32 e, ms_u32 ticket) {
    const ms_side *p = &a->prq;
    ms_u32 slot = ms_ticket_find(p->tickets, p->ticket_bits, e, ticket);
    if (slot == MS_NONE) {
        MS_ATOMIC_MIN(&p->table[e].consumed, p->table[e].posted);
        a->b.out[i] = MS_NONE;
        return;
    }
    ms_kill(p->live, slot);
    a->b.out[i] = slot;
}

/* Phase 1: the entry of thread t's message, or MS_NONE when it takes no part in ranking. */
MS_FN void ms_rank_load(const ms_args *a, ms_rank_shared *s, ms_u32 t) {
    const ms_side *p = &a->prq;
    ms_u32 i = s->chunk * MS_CHUNK + t, e = MS_NONE;
    if (i == 0 && a->b.mode == MS_ROUND) a->b.ctl->brk = MS_NONE;
    if (i < a->b.count && (a->b.mode != MS_ROUND || a->b.res[i] == MS_PENDING)) {
        e = ms_find(p->table, p->table_bits, a->b.items[i]);
        if (a->b.mode == MS_ROUND) {
            a->b.e_of[i] = e;
        } else if (e == MS_NONE) {
            a->b.out[i] = MS_NONE;
        } else if (a->b.mode == MS_UNORDERED) {
            ms_claim(a, i, e, MS_ATOMIC_ADD(&p->table[e].consumed, 1u));
            e = MS_NONE;
        }
    }
    s->e[t] = e;
}

/* Phase 2: earlier messages of the same entry in the chunk, the first of them, and all. */
MS_FN void ms_rank_local(ms_rank_shared *s, ms_u32 t) {
    ms_u32 e = s->e[t];
    if (e == MS_NONE) return;
    ms_u32 before = 0, lead = t, count = 0;
    for (ms_u32 k = 0; k < MS_CHUNK; k++) {
        if (s->e[k] != e) continue;
        before += k < t;
        if (k < lead) lead = k;
        count++;
    }
    s->before[t] = before;
    s->lead[t] = lead;
    s->count[t] = count;
}

/* Phase 3, after the chunk before published: the entry's count so far, by its first message. */
MS_FN void ms_rank_publish(const ms_args *a, ms_rank_shared *s, ms_u32 t) {
    ms_u32 e = s->e[t];
    if (e == MS_NONE || s->lead[t] != t) return;
    ms_u32 *counter = a->b.mode == MS_ORDERED ? &a->prq.table[e].consumed : &a->b.cnt[e];
    s->base[t] = MS_ATOMIC_ADD(counter, s->count[t]);
}

/* Phase 4: the rank; in MS_ORDERED the claim of that ticket. */
MS_FN void ms_rank_finish(const ms_args *a, ms_rank_shared *s, ms_u32 t) {
    ms_u32 e = s->e[t];
    if (e == MS_NONE) return;
    ms_u32 i = s->chunk * MS_CHUNK + t;
    ms_u32 rank = s->base[s->lead[t]] + s->before[t];
    if (a->b.mode == MS_ROUND)
        a->b.rank[i] = rank;
    else
        ms_claim(a, i, e, rank);
}

/* ---- Rounds: bursts while wildcard receives are queued ---- *
 *
 * Each round gives every pending message a candidate: its key's next ticket after the earlier
 * pending messages of its key, or the earliest live wildcard receive it fits, whichever was
 * posted first. The messages before the first one whose candidate may be wrong take their
 * candidates: that is exactly what arrivals one by one would do. A candidate may be wrong when
 * an earlier pending message claimed the same receive, or when an earlier pending message of
 * the same key took a wildcard receive (its key's tickets then shift). A message that found no
 * candidate while first of its key finds none later either. The first pending message always
 * settles, so every round makes progress. */

/* Work items of ms_wscan: (word group, message) pairs. */
MS_FN ms_u32 ms_wscan_items(const ms_args *a) {
    return a->b.groups * a->b.count;
}

/* Thread `g` of ms_wscan: the earliest live wildcard receive its message fits in its group of
 * words of the wildcard log, the minimum over groups by atomicMin. */
MS_FN void ms_wscan_item(const ms_args *a, ms_u32 g) {
    const ms_side *p = &a->prq;
    ms_u32 i = g % a->b.count, group = g / a->b.count;
    if (a->b.res[i] != MS_PENDING) return;
    ms_u32 per = (p->wwords + a->b.groups - 1) / a->b.groups;
    ms_u32 begin = group * per, end = begin + per < p->wwords ? begin + per : p->wwords;
    ms_u64 item = a->b.items[i];
    for (ms_u32 word = begin; word < end; word++) {
        if (a->b.wfirst[i] < word * 32) return;
        ms_u32 alive = p->wlive[word];
        if (alive == 0) continue;
        ms_u32 bits = ms_vote32(p->wkeys + (ms_u64)word * 32, alive, item, 1);
        if (bits != 0) {
            MS_ATOMIC_MIN(&a->b.wfirst[i], word * 32 + MS_CTZ(bits));
            return;
        }
    }
}

/* Thread `i` of ms_round_claim: the candidate, and the claim on it (earliest message wins). */
MS_FN void ms_round_claim(const ms_args *a, ms_u32 i) {
    const ms_side *p = &a->prq;
    if (a->b.res[i] != MS_PENDING) return;
    ms_u32 e = a->b.e_of[i], exact = MS_NONE, wild = MS_NONE;
    if (e != MS_NONE)
        exact = ms_ticket_find(p->tickets, p->ticket_bits, e,
                               p->table[e].consumed + a->b.rank[i]);
    if (a->b.wfirst[i] != MS_NONE) wild = p->wslot[a->b.wfirst[i]];
    if (exact == MS_NONE && wild == MS_NONE) {
        a->b.cand[i] = MS_NONE;
        return;
    }
    ms_u32 slot = exact < wild ? exact : wild;
    a->b.cand[i] = slot | (slot == wild ? MS_WILD : 0);
    MS_ATOMIC_MIN(&a->b.claimer[slot], i);
}

/* Thread `i` of ms_round_break: the first message that must wait for the next round. */
MS_FN void ms_round_break(const ms_args *a, ms_u32 i) {
    if (a->b.res[i] != MS_PENDING) return;
    ms_u32 cand = a->b.cand[i], e = a->b.e_of[i];
    if (cand == MS_NONE) return;
    if (a->b.claimer[cand & ~MS_WILD] != i) MS_ATOMIC_MIN(&a->b.ctl->brk, i);
    if ((cand & MS_WILD) && e != MS_NONE && a->b.rank[i] + 1 < a->b.cnt[e])
        MS_ATOMIC_MIN(&a->b.ctl->brk, i + 1);
}

/* Thread `i` of ms_round_commit: messages before the break (and those with nothing to find)
 * take their candidates; the round's scratch goes back to its resting values. */
MS_FN void ms_round_commit(const ms_args *a, ms_u32 i) {
    const ms_side *p = &a->prq;
    if (i == 0) a->b.ctl->chunk = 0;
    if (a->b.res[i] != MS_PENDING) return;
    ms_u32 cand = a->b.cand[i], e = a->b.e_of[i], slot = cand & ~MS_WILD;
    int settled = i < a->b.ctl->brk ||
                  (cand == MS_NONE && (e == MS_NONE || a->b.rank[i] == 0));
    if (settled) {
        a->b.res[i] = a->b.out[i] = cand == MS_NONE ? MS_NONE : slot;
        if (cand != MS_NONE) {
            ms_kill(p->live, slot);
            MS_ATOMIC_ADD(&p->table[p->entry_of[slot]].consumed, 1u);
            if (cand & MS_WILD) ms_kill(p->wlive, p->wpos[slot]);
        }
    }
    if (cand != MS_NONE) a->b.claimer[slot] = MS_NONE;
    a->b.wfirst[i] = MS_NONE;
    if (e != MS_NONE) a->b.cnt[e] = 0;
}

/* ---- ms_scan1: one wildcard pattern against a whole side ---- */

/* Thread `word` of ms_scan1: the earliest live unexpected message of its word that fits the
 * pattern (a wildcard receive or probe). */
MS_FN void ms_scan1_word(const ms_args *a, ms_u32 word) {
    const ms_side *u = &a->umq;
    if (a->b.ctl->first < word * 32) return;
    ms_u32 alive = u->live[word];
    if (alive == 0) return;
    ms_u32 bits = ms_vote32(u->keys + (ms_u64)word * 32, alive, a->b.pattern, 0);
    if (bits != 0) MS_ATOMIC_MIN(&a->b.ctl->first, word * 32 + MS_CTZ(bits));
}

/* The last block to finish a single scan writes its result. */
MS_FN void ms_scan1_publish(const ms_args *a) {
    /* Read as the atomics left it (a min with MS_NONE changes nothing). */
    a->b.out[0] = MS_ATOMIC_MIN(&a->b.ctl->first, MS_NONE);
    a->b.ctl->first = MS_NONE;
    a->b.ctl->done = 0;
}

#endif
