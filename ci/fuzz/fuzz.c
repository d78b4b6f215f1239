/* Differential fuzzer: random, deadlock-free MPI programs generated from a seed.
 *
 * Every rank generates the same plan from the seed (same PRNG, same world size) and runs it on a
 * fresh duplicate of MPI_COMM_WORLD, so per-communicator state starts fresh for every seed.  A
 * plan is a list of units, each deadlock-free by construction and complete before the next
 * starts, so any subset of them is a valid program too (the minimiser drops units):
 *   - p2p: messages between ranks with every send mode (blocking, nonblocking, persistent,
 *     buffered, ready, synchronous), received early (posted before the sends) or late, by
 *     Irecv, Recv, persistent receives (restarted; early ones started together by
 *     MPI_Startall in some runs), Probe/Iprobe + Recv, Mprobe/Improbe + Mrecv/Imrecv,
 *     wildcards (ANY_SOURCE, ANY_TAG, both), derived datatypes, zero-size and truncated
 *     messages, receives from MPI_PROC_NULL, cancels (of nonblocking or persistent receives
 *     that cannot match, and of receives racing their message), nonblocking collectives among
 *     them, every completion call over mixed arrays;
 *   - coll: blocking and nonblocking collectives with checked results;
 *   - comm: a duplicate (by MPI_Comm_dup or MPI_Comm_idup) or split of the seed's
 *     communicator with a p2p unit on it, freed while a receive on it is pending.
 *
 * Deadlock freedom: a receiver's receives of one class (the messages a wildcard receive could
 * take) are posted specific ones first, wildcards after, so every message has a receive
 * whatever the interleaving; sends that may block (Send, Ssend, Rsend, persistent standard
 * sends restarted) go only to classes whose receives were all posted before a barrier; blocking
 * receives come after every rank's sends were started.
 *
 * Every completion is checked against MPI's rules where the outcome is racy (wildcards, cancels
 * racing their message): each message received once, by a receive whose pattern it matches, with
 * the status of its envelope and its payload, and no receive got a message while an earlier one
 * from the same sender that it matches was still unreceived (non-overtaking).  The deterministic
 * part of every outcome (which message each receive of an exact class got, statuses, codes,
 * collective results) goes into a per-seed digest that the driver (ci/fuzz/driver.py) compares
 * between the native run and the runs under the shim.
 *
 * --threads T (1 to 4): MPI_Init_thread with MPI_THREAD_MULTIPLE, and T threads of each rank
 * run plans at once, each its own (the first the seed's) on a duplicate of MPI_COMM_WORLD of its
 * own: the shim's paths at that thread level, with threads racing through them.  In every
 * other seed the threads' p2p messages share one communicator (shares_comm).  A seed's
 * digest combines the threads' in their order; --units applies to every thread's plan.
 *
 * --asserts: each thread's communicators are duplicates of MPI_COMM_WORLD with MPI-4 matching
 * assertions in their info (seed_assertions), which every unit's traffic keeps: no
 * MPI_ANY_SOURCE, no MPI_ANY_TAG, or neither and overtaking allowed, where each message of a
 * unit has a tag of its own so that its match does not depend on order.  In some seeds
 * (asserts_later) MPI_Comm_set_info makes the assertions in the first p2p unit, with its early
 * receives posted.
 *
 * Usage: fuzz [--seeds FIRST:COUNT[:STEP] | --seed S | --seed-file F] [--units LIST] [--log]
 *             [--log-digest] [--plan] [--progress] [--threads T] [--asserts]
 * Prints one line per seed from rank 0: "seed S ok DIGEST" or "seed S FAIL rank R: why". */
#include <mpi.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t u64;

#ifdef MPICH_VERSION
#define MPICH 1
#else
#define MPICH 0
#endif

/* ---- generation ------------------------------------------------------------------------ */

struct rng {
    u64 s;
};

static u64 next(struct rng *r)
{
    u64 z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A generator for run-time choices apart from the one seeded with `s`, so that drawing them
 * changes nothing else a seed does. */
static struct rng apart_from(u64 s) { return (struct rng){s ^ 0x5851f42d4c957f2dull}; }

static int pick(struct rng *r, int n) { return n <= 1 ? 0 : (int)(next(r) % (u64)n); }
static int chance(struct rng *r, int percent) { return pick(r, 100) < percent; }

enum send_mode {
    SEND, SSEND, RSEND, BSEND, ISEND, ISSEND, IRSEND, IBSEND, PSEND, PSSEND, PBSEND, PRSEND,
    SEND_MODES,
    SENDRECV = SEND_MODES /* sent by MPI_Sendrecv with the receive `pair` */
};
static const char *send_names[] = {"Send",   "Ssend",  "Rsend",  "Bsend",  "Isend",
                                   "Issend", "Irsend", "Ibsend", "Psend",  "Pssend",
                                   "Pbsend", "Prsend", "Sendrecv"};
/* Modes that may block until the receive is matched, or need it posted (ready). */
static int needs_posted(int m)
{
    return m == SEND || m == SSEND || m == RSEND || m == IRSEND || m == PSEND || m == PSSEND ||
           m == PRSEND;
}
static int persistent_send(int m) { return m >= PSEND && m <= PRSEND; }

enum recv_kind {
    IRECV, PERSIST, RECV, PROBE, IPROBE, MPROBE, IMPROBE, MPROBE_I, RECV_KINDS
};
static const char *recv_names[] = {"Irecv",  "Persist", "Recv",    "Probe",
                                   "Iprobe", "Mprobe",  "Improbe", "Mprobe_Imrecv"};
/* Kinds a receive posted before the sends (early) may have. */
static int nonblocking_kind(int k) { return k == IRECV || k == PERSIST; }

enum cancel { KEEP, CANCEL_RACE, CANCEL_IDLE };

/* MPI-4 matching assertions a communicator's traffic keeps (--asserts). */
enum { NO_ANY_SOURCE = 1, NO_ANY_TAG = 2, ALLOW_OVERTAKING = 4 };
static const char *assertion_keys[] = {"mpi_assert_no_any_source", "mpi_assert_no_any_tag",
                                       "mpi_assert_allow_overtaking"};

#define MAXM 24        /* messages per unit */
#define MAXR 32        /* receives per unit */
#define MAXC 4         /* nonblocking collectives per unit */
#define MAXU 12        /* units per seed */
#define MAXLANES 4     /* threads running plans at once (--threads) */
#define LARGE 20000    /* ints: above every eager limit here */
#define IDLE_TAG 30000 /* tags of receives that nothing matches */

struct msg {
    int src, dst, tag, count, mode;
    int seq;        /* order among src's messages to dst */
    int group;      /* persistent send: index of the first message of its group, else -1 */
    int pair;       /* SENDRECV: the receive of the same call */
};

struct recv {
    int rank, src, tag; /* src, tag: MPI_ANY_* for wildcards */
    int cap;            /* ints the buffer holds */
    int vec;            /* received into the strided datatype */
    int kind, early, cancel;
    int trunc;          /* takes half of its message */
    int group;          /* persistent receive started again: first receive of its group, or -1 */
    int exact;          /* its class has no wildcard and no cancel race: its match is known */
    int pair;           /* received by MPI_Sendrecv with this message, else -1 */
};

enum coll_kind { BARRIER, BCAST, REDUCE, ALLREDUCE, GATHER, SCATTER, ALLGATHER, ALLTOALL, SCAN,
                 REDUCE_SCATTER, COLL_KINDS };
static const char *coll_names[] = {"Barrier", "Bcast",  "Reduce",    "Allreduce", "Gather",
                                   "Scatter", "Allgather", "Alltoall", "Scan", "Reduce_scatter"};

struct coll {
    int kind, root, count, nonblocking;
};

struct p2p {
    int n; /* communicator size */
    int nm, nr, nc;
    struct msg m[MAXM];
    struct recv r[MAXR];
    struct coll c[MAXC];
    int barrier;       /* barrier between early receives and sends */
    int middle;        /* blocking collective between sends and late receives */
    struct coll mid;
};

enum unit_kind { U_P2P, U_COLL, U_COMM };
static const char *unit_names[] = {"p2p", "coll", "comm"};

struct unit {
    int kind;
    int two;          /* U_P2P: with a second plan (`p1`) on a duplicate, run interleaved */
    struct p2p p;     /* U_P2P; U_COMM: on the new communicator (color 0) */
    struct p2p p1;    /* U_COMM: on the new communicator of color 1 */
    struct coll c[3]; /* U_COLL */
    int ncoll;
    int split;        /* U_COMM: split (colors below) or dup */
    int color[8], key[8];
    int pend_src, pend_dst, pend_any; /* U_COMM: the receive pending at the free (sub ranks) */
};

struct plan {
    int nu;
    struct unit u[MAXU];
};

static void gen_coll(struct rng *g, struct coll *c, int n)
{
    c->kind = pick(g, COLL_KINDS);
    c->root = pick(g, n);
    c->count = chance(g, 15) ? 4000 + pick(g, 4000) : 1 + pick(g, 8);
    c->nonblocking = chance(g, 50);
}

/* A p2p unit on a communicator of n ranks whose traffic keeps the assertions `keeps` (a
 * communicator other threads' plans use gets NO_ANY_TAG). */
static void gen_p2p(struct rng *g, struct p2p *p, int n, int keeps)
{
    memset(p, 0, sizeof *p);
    p->n = n;
    p->barrier = chance(g, 70);
    /* Few tags and few sender-receiver pairs, so that receives compete for messages. */
    int ntags = chance(g, 40) ? 1 : 1 + pick(g, 4);
    int npairs = 1 + pick(g, n * n < 5 ? n * n : 5), pair_src[5], pair_dst[5];
    for (int k = 0; k < npairs; k++) {
        pair_src[k] = pick(g, n);
        pair_dst[k] = pick(g, n);
    }
    p->nm = pick(g, 12) + (chance(g, 30) ? pick(g, 10) : 0);
    if (p->nm > MAXM)
        p->nm = MAXM;
    /* Wildcard shape per receiver: 0 none, 1 ANY_SOURCE for tag ws, 2 ANY_TAG for source ws,
     * 3 both. */
    int shape[8], ws[8], wild_share[8];
    for (int r = 0; r < n; r++) {
        shape[r] = chance(g, 50) ? 0 : 1 + pick(g, 3);
        if ((keeps & NO_ANY_TAG) && shape[r] >= 2)
            shape[r] = shape[r] == 3 ? 1 : 0;
        if ((keeps & NO_ANY_SOURCE) && shape[r] % 2 == 1)
            shape[r] = shape[r] == 3 ? 2 : 0;
        ws[r] = shape[r] == 2 ? pick(g, n) : pick(g, ntags);
        wild_share[r] = 20 + pick(g, 80);
    }
    int seq[8][8] = {{0}};
    int special = 0; /* unique tags of zero-size and truncated messages */
    for (int i = 0; i < p->nm; i++) {
        struct msg *m = &p->m[i];
        int pair = pick(g, npairs);
        m->src = chance(g, 85) ? pair_src[pair] : pick(g, n);
        m->dst = chance(g, 85) ? pair_dst[pair] : pick(g, n);
        m->tag = pick(g, ntags);
        int size = pick(g, 100);
        m->count = size < 10 ? 0 : size < 85 ? 1 + pick(g, 16) : size < 95 ? 100 + pick(g, 400)
                                                                         : LARGE + pick(g, 1000);
        m->group = -1;
        m->pair = -1;
        if (m->count == 0)
            m->tag = 100 + special++;
        m->seq = seq[m->src][m->dst]++;
        m->mode = pick(g, SEND_MODES);
        /* Overtaking allowed: a tag of its own, so that one receive matches it whatever the
         * order MPI matches in (no wildcards come with it). */
        if ((keeps & ALLOW_OVERTAKING) && m->count > 0)
            m->tag = 200 + i;
    }
    /* Receives: one per message, in a class order that is safe (see the top). */
    int nr = 0;
    int in_class[MAXM];
    for (int i = 0; i < p->nm; i++) {
        struct msg *m = &p->m[i];
        int r = m->dst;
        int wild = (shape[r] == 1 && m->tag == ws[r]) || (shape[r] == 2 && m->src == ws[r]) ||
                   shape[r] == 3;
        in_class[i] = wild;
        struct recv *v = &p->r[nr++];
        v->rank = r;
        v->src = m->src;
        v->tag = m->tag;
        v->group = -1;
        v->pair = -1;
        v->cap = m->count;
        v->kind = pick(g, RECV_KINDS);
        /* A truncated receive: only where no wildcard could take the message instead; on
         * Open MPI not of a message to itself (ci/fuzz/known/openmpi-self-truncate.c). */
        int truncatable = MPICH || m->src != m->dst;
        if (!wild && truncatable && m->count > 0 && m->count < LARGE && chance(g, 8)) {
            v->cap = m->count / 2;
            v->trunc = 1;
            m->tag = 100 + special++;
            v->tag = m->tag;
            v->kind = pick(g, 3) == 0 ? RECV : IRECV;
        }
        v->vec = v->cap > 0 && v->cap < LARGE && v->cap % 2 == 0 && chance(g, 20);
        if (wild && chance(g, wild_share[r])) {
            if (shape[r] == 1 || shape[r] == 3)
                v->src = MPI_ANY_SOURCE;
            if (shape[r] == 2 || shape[r] == 3)
                v->tag = MPI_ANY_TAG;
        }
        v->early = nonblocking_kind(v->kind) && chance(g, 70);
    }
    /* Wildcard receives take any message of their class: room for the largest. */
    for (int i = 0; i < nr; i++) {
        struct recv *v = &p->r[i];
        if (v->src != MPI_ANY_SOURCE && v->tag != MPI_ANY_TAG)
            continue;
        for (int j = 0; j < p->nm; j++)
            if (p->m[j].dst == v->rank && in_class[j] && p->m[j].count > v->cap)
                v->cap = p->m[j].count;
        v->vec = 0;
    }
    /* Class order per receiver: shuffle, then move specific receives of a class before its
     * wildcards, and make early a prefix of each class. */
    for (int i = nr - 1; i > 0; i--) {
        int j = pick(g, i + 1);
        struct recv t = p->r[i];
        p->r[i] = p->r[j];
        p->r[j] = t;
    }
    for (int r = 0; r < n; r++) {
        /* the class: receives of r that could meet a wildcard of r */
        int idx[MAXR], k = 0;
        for (int i = 0; i < nr; i++) {
            struct recv *v = &p->r[i];
            if (v->rank != r || shape[r] == 0)
                continue;
            int wild_src = v->src == MPI_ANY_SOURCE, wild_tag = v->tag == MPI_ANY_TAG;
            int member = wild_src || wild_tag || (shape[r] == 1 && v->tag == ws[r]) ||
                         (shape[r] == 2 && v->src == ws[r]) || shape[r] == 3;
            if (member)
                idx[k++] = i;
        }
        /* stable partition of the class's slots: specific first */
        struct recv tmp[MAXR];
        int t = 0;
        for (int pass = 0; pass < 2; pass++)
            for (int j = 0; j < k; j++) {
                struct recv *v = &p->r[idx[j]];
                int wildcard = v->src == MPI_ANY_SOURCE || v->tag == MPI_ANY_TAG;
                if (wildcard == pass)
                    tmp[t++] = *v;
            }
        /* early must be a prefix: once one is late, the rest are late */
        int late = 0;
        for (int j = 0; j < k; j++) {
            if (!tmp[j].early)
                late = 1;
            if (late)
                tmp[j].early = 0;
            p->r[idx[j]] = tmp[j];
        }
    }
    /* The k-th specific receive of a source and tag, in posting order (early, then late, each
     * in plan order), gets the k-th message of that source and tag: its size. */
    for (int i = 0; i < nr; i++) {
        struct recv *v = &p->r[i];
        if (v->src == MPI_ANY_SOURCE || v->tag == MPI_ANY_TAG)
            continue;
        int k = 0;
        for (int j = 0; j < nr; j++) {
            struct recv *w = &p->r[j];
            int before = w->early != v->early ? w->early : j < i;
            k += j != i && before && w->rank == v->rank && w->src == v->src && w->tag == v->tag;
        }
        for (int j = 0; j < p->nm; j++) {
            struct msg *m = &p->m[j];
            if (m->dst == v->rank && m->src == v->src && m->tag == v->tag && k-- == 0) {
                v->cap = v->trunc ? m->count / 2 : m->count;
                if (v->cap == 0 || v->cap >= LARGE || v->cap % 2)
                    v->vec = 0;
                break;
            }
        }
    }
    for (int i = 0; i < nr; i++) {
        struct recv *v = &p->r[i];
        if (!v->early && v->kind == PERSIST && chance(g, 50))
            v->kind = IRECV;
        /* late nonblocking or blocking, early nonblocking */
        if (v->early && !nonblocking_kind(v->kind))
            v->early = 0;
        int wildcard = v->src == MPI_ANY_SOURCE || v->tag == MPI_ANY_TAG;
        int in_wild_class = 0;
        for (int j = 0; j < nr; j++)
            if (p->r[j].rank == v->rank &&
                (p->r[j].src == MPI_ANY_SOURCE || p->r[j].tag == MPI_ANY_TAG))
                in_wild_class |= (p->r[j].src == MPI_ANY_SOURCE || p->r[j].src == v->src) &&
                                 (p->r[j].tag == MPI_ANY_TAG || p->r[j].tag == v->tag);
        v->exact = !wildcard && !in_wild_class;
        v->cancel = KEEP;
        if (v->exact && v->early && v->kind == IRECV && !v->trunc && chance(g, 10))
            v->cancel = CANCEL_RACE;
    }
    /* Which receive of a class with a cancel race gets which message is racy too: each has
     * room for the largest. */
    for (int i = 0; i < nr; i++) {
        struct recv *v = &p->r[i];
        if (v->cancel != CANCEL_RACE)
            continue;
        int largest = 0;
        for (int j = 0; j < p->nm; j++)
            if (p->m[j].dst == v->rank && p->m[j].src == v->src && p->m[j].tag == v->tag &&
                p->m[j].count > largest)
                largest = p->m[j].count;
        for (int j = 0; j < nr; j++) {
            struct recv *w = &p->r[j];
            if (w->rank == v->rank && w->src == v->src && w->tag == v->tag) {
                w->exact = 0;
                w->cap = largest;
                w->vec = 0;
            }
        }
    }
    /* Persistent receives started again for the next receive of the same pattern: where no
     * specific receive can be posted after a wildcard of its class (the restart is late). */
    for (int i = 0; i < nr; i++) {
        struct recv *v = &p->r[i];
        if (v->kind != PERSIST || v->group >= 0 || v->cancel != KEEP)
            continue;
        int wildcard = v->src == MPI_ANY_SOURCE || v->tag == MPI_ANY_TAG;
        if (!wildcard && !v->exact)
            continue;
        for (int j = i + 1; j < nr; j++) {
            struct recv *w = &p->r[j];
            if (w->rank == v->rank && w->src == v->src && w->tag == v->tag && w->cap == v->cap &&
                w->vec == v->vec && w->cancel == KEEP && w->group < 0 && !w->early &&
                chance(g, 70)) {
                w->kind = PERSIST;
                w->group = i;
            }
        }
    }
    /* Receives nothing matches, cancelled; persistent ones in half the plans (chosen from the
     * generator's state, drawing nothing from it). */
    struct rng peek = {g->s ^ 0xa0761d6478bd642full};
    int idle_kind = chance(&peek, 50) ? PERSIST : IRECV;
    int idle = pick(g, 3);
    for (int i = 0; i < idle && nr < MAXR; i++) {
        struct recv *v = &p->r[nr++];
        memset(v, 0, sizeof *v);
        v->rank = pick(g, n);
        int any_source = chance(g, 30) && !(keeps & NO_ANY_SOURCE);
        v->src = any_source ? MPI_ANY_SOURCE : pick(g, n);
        v->tag = IDLE_TAG + i;
        v->cap = 4;
        v->kind = idle_kind;
        v->early = 1;
        v->cancel = CANCEL_IDLE;
        v->group = -1;
        v->pair = -1;
        v->exact = 1;
    }
    /* Receives from MPI_PROC_NULL, which complete at once (also chosen from `peek`). */
    int nulls = pick(&peek, 3);
    for (int i = 0; i < nulls && nr < MAXR; i++) {
        struct recv *v = &p->r[nr++];
        memset(v, 0, sizeof *v);
        v->rank = pick(&peek, n);
        v->src = MPI_PROC_NULL;
        v->tag = chance(&peek, 50) && !(keeps & NO_ANY_TAG) ? MPI_ANY_TAG : IDLE_TAG + 10 + i;
        v->cap = 4;
        /* MPICH 4.0.2 takes a started persistent one for inactive in MPI_Testany and
         * MPI_Waitsome natively (ci/fuzz/known/mpich-procnull-persistent.c) */
        v->kind = chance(&peek, 50) && !MPICH ? PERSIST : IRECV;
        v->early = 1;
        v->group = -1;
        v->pair = -1;
    }
    p->nr = nr;
    /* Sends that may block or need their receive posted: only to classes all posted early
     * behind the barrier; the others become nonblocking or buffered. */
    for (int i = 0; i < p->nm; i++) {
        struct msg *m = &p->m[i];
        if (!needs_posted(m->mode))
            continue;
        int ok = p->barrier;
        for (int j = 0; j < nr && ok; j++) {
            struct recv *v = &p->r[j];
            if (v->rank == m->dst && (v->src == MPI_ANY_SOURCE || v->src == m->src) &&
                (v->tag == MPI_ANY_TAG || v->tag == m->tag) && v->cancel != CANCEL_IDLE)
                ok = v->early && v->cancel == KEEP && v->group < 0;
        }
        if (!ok)
            m->mode = chance(g, 50) ? ISEND : chance(g, 50) ? BSEND : PBSEND;
    }
    /* Persistent sends started again for the next message of the same dst and tag (a start
     * waits for the previous one: buffered, or standard to a class posted early, never for a
     * receive posted late); on Open MPI a buffered one not to itself
     * (ci/fuzz/known/openmpi-self-bsend-restart.c). */
    for (int i = 0; i < p->nm; i++) {
        struct msg *m = &p->m[i];
        if (!persistent_send(m->mode) || m->group >= 0)
            continue;
        if (!MPICH && m->mode == PBSEND && m->src == m->dst)
            continue;
        for (int j = i + 1; j < p->nm; j++) {
            struct msg *o = &p->m[j];
            if (o->src == m->src && o->dst == m->dst && o->tag == m->tag && o->count == m->count &&
                o->group < 0 && persistent_send(o->mode) && chance(g, 60)) {
                o->mode = m->mode;
                o->group = i;
            }
        }
    }
    /* MPI_Sendrecv: a rank's first late receive, if a blocking one, taken in one call with one
     * of its sends that may block (its receive posted early behind the barrier); being the
     * first late call, the send goes out before any late wait, as in the sends' phase. */
    for (int r = 0; r < n; r++) {
        int first = -1;
        for (int i = 0; i < nr && first < 0; i++)
            if (p->r[i].rank == r && !p->r[i].early)
                first = i;
        if (first < 0 || p->r[first].kind != RECV || p->r[first].trunc || p->r[first].group >= 0 ||
            !chance(g, 60))
            continue;
        for (int j = 0; j < p->nm; j++) {
            struct msg *m = &p->m[j];
            /* sent after the sends' phase: the last of its sender to its receiver, so that the
             * messages between them keep their order */
            int last = 1;
            for (int l = j + 1; l < p->nm; l++)
                last &= p->m[l].src != m->src || p->m[l].dst != m->dst;
            if (m->src == r && needs_posted(m->mode) && m->group < 0 && last) {
                m->mode = SENDRECV;
                m->pair = first;
                p->r[first].pair = j;
                break;
            }
        }
    }
    p->nc = chance(g, 40) ? 1 + pick(g, MAXC) : 0;
    for (int i = 0; i < p->nc; i++) {
        gen_coll(g, &p->c[i], n);
        p->c[i].nonblocking = 1;
        if (p->c[i].count > 100)
            p->c[i].count = 1 + pick(g, 64);
    }
    p->middle = chance(g, 25);
    gen_coll(g, &p->mid, n);
    p->mid.nonblocking = 0;
    /* MPICH's all-to-all on one rank sends on the receives' context
     * (ci/fuzz/known/mpich-one-rank-alltoall.c): an all-gather instead, drawing nothing more so
     * that other seeds keep their plans. */
    for (int i = 0; MPICH && n == 1 && i <= p->nc; i++) {
        struct coll *c = i < p->nc ? &p->c[i] : &p->mid;
        if (c->kind == ALLTOALL)
            c->kind = ALLGATHER;
    }
}

/* Moves a p2p unit's tags (MPI_ANY_TAG aside) up by tag0. */
static void offset_tags(struct p2p *p, int tag0)
{
    for (int j = 0; j < p->nm; j++)
        p->m[j].tag += tag0;
    for (int j = 0; j < p->nr; j++)
        if (p->r[j].tag != MPI_ANY_TAG)
            p->r[j].tag += tag0;
}

/* shared: the p2p units' traffic goes on a communicator the threads share (see run_lane),
 * with tags of this thread's own from tag0 on; every unit's traffic keeps `asserts`. */
static void gen_plan(u64 seed, int n, struct plan *pl, int shared, int tag0, int asserts)
{
    struct rng g = {seed * 0x2545f4914f6cdd1dull + 1};
    memset(pl, 0, sizeof *pl);
    pl->nu = 2 + pick(&g, MAXU - 2);
    for (int i = 0; i < pl->nu; i++) {
        struct unit *u = &pl->u[i];
        int w = pick(&g, 100);
        u->kind = w < 60 ? U_P2P : w < 80 ? U_COLL : U_COMM;
        if (u->kind == U_P2P) {
            gen_p2p(&g, &u->p, n, asserts | (shared ? NO_ANY_TAG : 0));
            if (shared)
                offset_tags(&u->p, tag0);
            u->two = chance(&g, 30);
            if (u->two)
                gen_p2p(&g, &u->p1, n, asserts);
        } else if (u->kind == U_COLL) {
            u->ncoll = 1 + pick(&g, 3);
            for (int j = 0; j < u->ncoll; j++)
                gen_coll(&g, &u->c[j], n);
        } else {
            u->split = chance(&g, 60);
            int ncolors = u->split ? 1 + pick(&g, 2) : 1, size[2] = {0, 0};
            for (int r = 0; r < n; r++) {
                u->color[r] = pick(&g, ncolors);
                u->key[r] = pick(&g, 3);
                size[u->color[r]]++;
            }
            /* each new communicator runs a p2p unit of its own size */
            gen_p2p(&g, &u->p, size[0] ? size[0] : 1, asserts);
            gen_p2p(&g, &u->p1, size[1] ? size[1] : 1, asserts);
            u->pend_src = pick(&g, n);
            u->pend_dst = pick(&g, n);
            u->pend_any = chance(&g, 40) && !(asserts & NO_ANY_SOURCE);
        }
    }
}

static void print_plan(u64 seed, const struct plan *pl)
{
    printf("plan %llu: %d units\n", (unsigned long long)seed, pl->nu);
    for (int i = 0; i < pl->nu; i++) {
        const struct unit *u = &pl->u[i];
        printf("  unit %d %s", i, unit_names[u->kind]);
        if (u->kind == U_COLL) {
            for (int j = 0; j < u->ncoll; j++)
                printf(" %s%s(root %d, %d)", u->c[j].nonblocking ? "I" : "",
                       coll_names[u->c[j].kind], u->c[j].root, u->c[j].count);
            printf("\n");
            continue;
        }
        if (u->kind == U_COMM)
            printf(" %s, pending %d->%d%s", u->split ? "split" : "dup", u->pend_src, u->pend_dst,
                   u->pend_any ? " (any source)" : "");
        int plans = (u->kind == U_COMM && u->split) || (u->kind == U_P2P && u->two) ? 2 : 1;
        for (int color = 0; color < plans; color++) {
        const struct p2p *p = color ? &u->p1 : &u->p;
        if (u->kind == U_COMM)
            printf("%s color %d (%d ranks)", color ? "\n " : "", color, p->n);
        else if (plans == 2)
            printf("%s on %s", color ? "\n " : "", color ? "a duplicate" : "the seed's communicator");
        printf("%s%s\n", p->barrier ? " barrier" : "", p->middle ? " middle-collective" : "");
        for (int j = 0; j < p->nm; j++) {
            const struct msg *m = &p->m[j];
            printf("    msg %d: %d->%d tag %d count %d %s%s\n", j, m->src, m->dst, m->tag, m->count,
                   send_names[m->mode], m->group >= 0 ? " (restarted)" : "");
            if (m->mode == SENDRECV)
                printf("      with recv %d\n", m->pair);
        }
        for (int j = 0; j < p->nr; j++) {
            const struct recv *v = &p->r[j];
            printf("    recv %d: at %d from %d tag %d cap %d%s %s %s%s%s%s\n", j, v->rank, v->src,
                   v->tag, v->cap, v->vec ? " vec" : "", recv_names[v->kind],
                   v->early ? "early" : "late", v->exact ? " exact" : "",
                   v->cancel == CANCEL_RACE ? " cancel-race" : v->cancel == CANCEL_IDLE ? " cancel" : "",
                   v->group >= 0 ? " (restarted)" : "");
        }
        for (int j = 0; j < p->nc; j++)
            printf("    I%s(root %d, %d)\n", coll_names[p->c[j].kind], p->c[j].root, p->c[j].count);
        }
    }
    fflush(stdout);
}

/* ---- checking --------------------------------------------------------------------------- */

static int world_size;
static int logging;
static int me;
static int threads; /* 0: MPI_Init; T >= 1: MPI_THREAD_MULTIPLE, T threads ("lanes") */
static int asserting; /* --asserts */

/* Each lane's own: the state of the plan it runs. */
static _Thread_local u64 digest;
static _Thread_local char failure[256];
static _Thread_local u64 seed_now;
static _Thread_local int unit_now;
static _Thread_local char who[16];  /* in logs: "r0", or "r0.1" for lane 1 of rank 0 */
static _Thread_local char lane_of[16]; /* in failures: "", or "thread 1, " */
static _Thread_local int lane_asserts; /* what its communicators assert (seed_assertions) */

static void mix(u64 v)
{
    digest ^= v + 0x9e3779b97f4a7c15ull + (digest << 6) + (digest >> 2);
    if (logging > 1)
        printf("%s u%d mix %016llx\n", who, unit_now, (unsigned long long)v);
}

static void fail(const char *fmt, ...)
{
    if (failure[0])
        return;
    int n = snprintf(failure, sizeof failure, "%sunit %d: ", lane_of, unit_now);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(failure + n, sizeof failure - (size_t)n, fmt, ap);
    va_end(ap);
}

/* An outcome the run cannot go on from (the other ranks would wait forever): said, and the
 * job ends. */
static void fatal(const char *fmt, ...)
{
    char buf[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    printf("seed %llu FAIL rank %d: %sunit %d: %s\n", (unsigned long long)seed_now, me, lane_of,
           unit_now, buf);
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 3);
}

static void note(const char *fmt, ...)
{
    if (!logging)
        return;
    char buf[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    printf("%s u%d %s\n", who, unit_now, buf);
}

static int err_class(int code)
{
    int cls = code;
    if (code != MPI_SUCCESS)
        MPI_Error_class(code, &cls);
    return cls;
}

/* Payload of message `id`. */
static int word(int id, int i) { return i == 0 ? id : (int)((u64)(id + 1) * 2654435761u ^ (u64)i * 40503u); }

/* ---- running ---------------------------------------------------------------------------- */

struct outcome {
    int done, msg, src, tag, bytes, cancelled, err, payload_ok;
    long post; /* when it was posted, in this rank's posting order */
};

enum pending_kind { P_RECV, P_SEND, P_COLL };

struct run;

struct pending {
    MPI_Request req;
    int kind, idx;
    struct run *x;
};

/* The requests of the plans running at once, completed together. */
struct pool {
    struct pending e[2 * (MAXR + MAXM + MAXC) + 8];
    int n;
    struct rng g; /* run-time choices (completion calls), the same on every run */
};

struct run {
    const struct p2p *p;
    MPI_Comm comm; /* the messages' */
    MPI_Comm sync; /* the barrier's and collectives': comm, or (comm shared by threads) a
                    * communicator of the same group only this thread uses */
    int rank; /* in comm */
    int msg_id0;
    int *rbuf[MAXR], *sbuf[MAXM];
    MPI_Request rreq[MAXR], preq[MAXR], sreq[MAXM], psreq[MAXM];
    struct outcome out[MAXR];
    int replaced[MAXR]; /* a cancel-race receive's replacement was posted */
    int nmsg_recv[MAXM]; /* times each message was received */
    struct pool *pool;
    int *cbuf[MAXC][2];
    MPI_Request creq[MAXC];
    long *posts; /* this rank's posting order, over the plans running at once */
    MPI_Datatype vec;
    int start_together; /* early persistent receives start by MPI_Startall where they may */
};

static void pool_add(struct run *x, MPI_Request req, int kind, int idx)
{
    x->pool->e[x->pool->n++] = (struct pending){req, kind, idx, x};
}

/* Waits for the pool's request `req` of run x and completes it. */
static void complete_request(struct run *x, MPI_Request req, int kind);

/* Buffer ints a receive holds, laid out for its datatype. */
static int buf_ints(const struct recv *v) { return v->vec ? 3 * v->cap : v->cap; }
static int *alloc_ints(int n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(int)); }

/* The datatype and count a receive posts: `cap` ints, or half as many strided pairs. */
static MPI_Datatype recv_type(struct run *x, const struct recv *v, int *count)
{
    *count = v->vec ? v->cap / 2 : v->cap;
    return v->vec ? x->vec : MPI_INT;
}

/* Receive i's persistent request, made at its group's first start. */
static MPI_Request *persistent_recv(struct run *x, int i)
{
    const struct recv *v = &x->p->r[i];
    int first = v->group >= 0 ? v->group : i;
    if (x->preq[first] == MPI_REQUEST_NULL) {
        int count;
        MPI_Datatype type = recv_type(x, v, &count);
        int rc = MPI_Recv_init(x->rbuf[first], count, type, v->src, v->tag, x->comm,
                               &x->preq[first]);
        if (rc != MPI_SUCCESS)
            fail("Recv_init: error %d", err_class(rc));
    }
    return &x->preq[first];
}

static void post_recv(struct run *x, int i)
{
    const struct recv *v = &x->p->r[i];
    x->out[i].post = (*x->posts)++;
    int rc;
    if (v->kind == PERSIST) {
        x->rreq[i] = *persistent_recv(x, i);
        rc = MPI_Start(&x->rreq[i]);
    } else {
        int count;
        MPI_Datatype type = recv_type(x, v, &count);
        rc = MPI_Irecv(x->rbuf[i], count, type, v->src, v->tag, x->comm, &x->rreq[i]);
    }
    if (rc != MPI_SUCCESS)
        fail("recv %d: post: error %d", i, err_class(rc));
    pool_add(x, x->rreq[i], P_RECV, i);
}

/* Whether one message could match both receives. */
static int overlap(const struct recv *a, const struct recv *b)
{
    return (a->src == MPI_ANY_SOURCE || b->src == MPI_ANY_SOURCE || a->src == b->src) &&
           (a->tag == MPI_ANY_TAG || b->tag == MPI_ANY_TAG || a->tag == b->tag);
}

/* Starts the persistent receives `batch` (n of them) with one MPI_Startall, which may start
 * them in any order: the caller gives it receives no message could match two of. */
static void start_all(struct run *x, const int *batch, int n)
{
    MPI_Request reqs[MAXR];
    for (int k = 0; k < n; k++) {
        x->out[batch[k]].post = (*x->posts)++;
        reqs[k] = *persistent_recv(x, batch[k]);
    }
    int rc = MPI_Startall(n, reqs);
    if (rc != MPI_SUCCESS)
        fail("Startall of %d receives: error %d", n, err_class(rc));
    for (int k = 0; k < n; k++) {
        x->rreq[batch[k]] = reqs[k];
        pool_add(x, reqs[k], P_RECV, batch[k]);
    }
}

/* Which message the receive got, from its payload or (zero-size, truncated) its envelope. */
static int message_of(struct run *x, int i, int src, int tag, const int *data, int ints)
{
    const struct p2p *p = x->p;
    if (ints > 0 && data[0] >= x->msg_id0 && data[0] < x->msg_id0 + p->nm) {
        int j = data[0] - x->msg_id0;
        if (p->m[j].src == src && p->m[j].tag == tag)
            return j;
    }
    /* zero-size and truncated messages have unique tags */
    for (int j = 0; j < p->nm; j++)
        if (p->m[j].dst == x->rank && p->m[j].src == src && p->m[j].tag == tag &&
            (p->m[j].count == 0 || p->r[i].trunc))
            return j;
    return -1;
}

/* Records the completion of receive i: status `st`, code `err` (the request's error); `vec`:
 * its data came into the strided datatype; `cap`: the ints its buffer held. */
static void recv_done(struct run *x, int i, MPI_Status *st, int err, int vec, int cap)
{
    const struct recv *v = &x->p->r[i];
    struct outcome *o = &x->out[i];
    int cancelled = 0;
    MPI_Test_cancelled(st, &cancelled);
    o->done = 1;
    o->cancelled = cancelled;
    o->err = err_class(err);
    o->msg = -1;
    if (cancelled) {
        note("recv %d cancelled", i);
        if (v->cancel == KEEP)
            fail("recv %d: cancelled, but never cancelled", i);
        return;
    }
    if (v->cancel == CANCEL_IDLE)
        fail("recv %d: cancel of a receive nothing matches did not succeed", i);
    o->src = st->MPI_SOURCE;
    o->tag = st->MPI_TAG;
    int bytes = -1;
    MPI_Get_count(st, MPI_BYTE, &bytes);
    o->bytes = bytes;
    if (v->src == MPI_PROC_NULL) {
        note("recv %d from MPI_PROC_NULL: src %d tag %d bytes %d err %d", i, o->src, o->tag,
             bytes, o->err);
        /* MPICH 4.0.2 writes another status for a nonblocking or persistent one natively */
        if (!MPICH && (o->src != MPI_PROC_NULL || o->tag != MPI_ANY_TAG || bytes != 0))
            fail("recv %d from MPI_PROC_NULL: status src %d tag %d bytes %d", i, o->src, o->tag,
                 bytes);
        return;
    }
    /* the data as ints, in message order */
    int first = v->group >= 0 ? v->group : i;
    const int *buf = v->kind == PERSIST ? x->rbuf[first] : x->rbuf[i];
    int n = o->err == MPI_SUCCESS && bytes >= 0 ? bytes / 4 : 0;
    int *data = alloc_ints(n);
    for (int k = 0; k < n; k++)
        data[k] = vec ? buf[3 * (k / 2) + 2 * (k % 2)] : buf[k];
    int j = message_of(x, i, o->src, o->tag, data, n);
    o->msg = j;
    note("recv %d (%s%s from %d tag %d) got msg %d: src %d tag %d bytes %d err %d", i,
         recv_names[v->kind], v->early ? " early" : "", v->src, v->tag,
         j >= 0 ? x->msg_id0 + j : -1, o->src, o->tag, bytes, o->err);
    if (j < 0) {
        fail("recv %d: got a message it cannot name (src %d tag %d, %d bytes, error class %d): "
             "one never sent, or a longer one than its own",
             i, o->src, o->tag, bytes, o->err);
        free(data);
        return;
    }
    const struct msg *m = &x->p->m[j];
    x->nmsg_recv[j]++;
    if ((v->src != MPI_ANY_SOURCE && v->src != m->src) ||
        (v->tag != MPI_ANY_TAG && v->tag != m->tag))
        fail("recv %d (from %d tag %d) got msg %d (from %d tag %d)", i, v->src, v->tag, j,
             m->src, m->tag);
    int truncated = m->count > cap;
    if (truncated != (o->err == MPI_ERR_TRUNCATE))
        fail("recv %d: msg %d of %d ints into %d: error class %d", i, j, m->count, cap, o->err);
    if (!truncated && o->err != MPI_SUCCESS)
        fail("recv %d: error class %d", i, o->err);
    if (!truncated && bytes != 4 * m->count)
        fail("recv %d: msg %d of %d ints: count %d bytes", i, j, m->count, bytes);
    o->payload_ok = 1;
    for (int k = 0; k < n && !truncated; k++)
        if (data[k] != word(x->msg_id0 + j, k))
            o->payload_ok = 0;
    if (!o->payload_ok)
        fail("recv %d: msg %d payload corrupt", i, j);
    free(data);
}

/* The request at pool slot s completed with status st and code err. */
static void completed(struct pool *pl, int s, MPI_Status *st, int err)
{
    struct pending *e = &pl->e[s];
    struct run *x = e->x;
    if (e->kind == P_RECV) {
        int i = e->idx;
        const struct recv *v = &x->p->r[i];
        recv_done(x, i, st, err, v->vec, v->cap);
        if (v->cancel == CANCEL_RACE && x->out[i].cancelled && !x->replaced[i]) {
            /* the message it raced for: a late receive of the same pattern takes it */
            x->replaced[i] = 1;
            int count;
            MPI_Datatype type = recv_type(x, v, &count);
            int rc = MPI_Irecv(x->rbuf[i], count, type, v->src, v->tag, x->comm, &e->req);
            x->out[i].post = (*x->posts)++;
            x->out[i].done = 0;
            if (rc != MPI_SUCCESS)
                fail("recv %d: replacement: error %d", i, err_class(rc));
            return; /* stays in the pool */
        }
    } else if (e->kind == P_SEND) {
        if (err != MPI_SUCCESS)
            fail("send %d: error class %d", e->idx, err_class(err));
        note("send %d done", e->idx);
    } else {
        if (err != MPI_SUCCESS)
            fail("collective %d: error class %d", e->idx, err_class(err));
    }
    pl->e[s] = pl->e[--pl->n];
}

static int err_of(int rc, MPI_Status *st, int multiple)
{
    if (!multiple)
        return rc;
    return rc == MPI_ERR_IN_STATUS ? st->MPI_ERROR : MPI_SUCCESS;
}

/* Whether a pool entry is a receive that fails (truncated). */
static int fails(const struct pending *e)
{
    return e->kind == P_RECV && e->x->p->r[e->idx].trunc;
}

/* One completion call over some of the pool; true if it completed something. */
static int complete_some(struct pool *pl)
{
    struct rng *g = &pl->g;
    int call = pick(g, 10);
    int k = 1 + pick(g, pl->n < 6 ? pl->n : 6);
    /* slots: the first k of the pool after a shuffle; some MPI_REQUEST_NULLs among them */
    for (int i = pl->n - 1; i > 0; i--) {
        int j = pick(g, i + 1);
        struct pending t = pl->e[i];
        pl->e[i] = pl->e[j];
        pl->e[j] = t;
    }
    MPI_Request reqs[16];
    int slot[16], n = 0, failing = 0, others = 0;
    /* Open MPI: where Waitany, Testany, Waitsome or Testsome returns an error, it also frees
     * every other request of the array whose status holds one: failed requests it did not
     * report (ci/fuzz/known/openmpi-testany-frees-failed.c) and active ones, whose status it
     * never wrote (ci/fuzz/known/openmpi-error-frees-active.c); Waitall returns at a failed
     * request and frees the active ones as well. A failing receive goes alone to those calls
     * there (Testall waits for all before it reports an error). At MPI_THREAD_MULTIPLE,
     * Open MPI's Waitall over a request that failed before the call never returns
     * (ci/fuzz/known/openmpi-mt-waitall-error.c): no failing receive goes to Waitall there. */
    int alone = !MPICH && call >= 3 && call != 6;
    int never = !MPICH && threads && call == 5;
    for (int i = 0; i < k; i++)
        others += !fails(&pl->e[i]);
    for (int i = 0; i < k; i++) {
        if (fails(&pl->e[i]) && (never || (alone && (others || failing++))))
            continue;
        if (chance(g, 15))
            slot[n] = -1, reqs[n++] = MPI_REQUEST_NULL;
        slot[n] = i, reqs[n++] = pl->e[i].req;
    }
    MPI_Status st[16];
    int flag = 0, idx, out, ind[16], rc;
    int done_slots[16], nd = 0;
    static const char *calls[] = {"Wait",    "Test",    "Request_get_status", "Waitany",
                                  "Testany", "Waitall", "Testall",            "Waitsome",
                                  "Testsome", "Testsome"};
    static const char *kinds[] = {"recv", "send", "coll"};
    if (logging) {
        char buf[300];
        int len = snprintf(buf, sizeof buf, "call %s over", calls[call]);
        for (int i = 0; i < (call < 3 ? 1 : n) && len < 280; i++) {
            int sl = call < 3 ? 0 : slot[i];
            len += sl < 0 ? snprintf(buf + len, sizeof buf - (size_t)len, " null")
                          : snprintf(buf + len, sizeof buf - (size_t)len, " %s%d",
                                     kinds[pl->e[sl].kind], pl->e[sl].idx);
        }
        note("%s", buf);
    }
    switch (call) {
    case 0: /* Wait */
    case 1: /* Test until done */
    case 2: /* Request_get_status until done, then Wait */
        n = 1;
        reqs[0] = pl->e[0].req;
        slot[0] = 0;
        if (call == 0) {
            rc = MPI_Wait(&reqs[0], &st[0]);
        } else if (call == 1) {
            do
                rc = MPI_Test(&reqs[0], &flag, &st[0]);
            while (!flag);
        } else {
            do
                MPI_Request_get_status(reqs[0], &flag, MPI_STATUS_IGNORE);
            while (!flag);
            rc = MPI_Wait(&reqs[0], &st[0]);
        }
        pl->e[0].req = reqs[0];
        completed(pl, 0, &st[0], rc);
        return 1;
    case 3: /* Waitany */
    case 4: /* Testany until one */
        do {
            flag = 1;
            rc = call == 3 ? MPI_Waitany(n, reqs, &idx, &st[0])
                           : MPI_Testany(n, reqs, &idx, &flag, &st[0]);
        } while (!flag);
        if (idx == MPI_UNDEFINED || idx < 0 || idx >= n || slot[idx] < 0)
            fatal("%s: index %d", call == 3 ? "Waitany" : "Testany", idx);
        pl->e[slot[idx]].req = reqs[idx];
        st[idx] = st[0];
        done_slots[nd++] = idx;
        break;
    case 5: /* Waitall */
    case 6: /* Testall until all */
        do {
            flag = 1;
            rc = call == 5 ? MPI_Waitall(n, reqs, st) : MPI_Testall(n, reqs, &flag, st);
        } while (!flag && rc == MPI_SUCCESS);
        for (int i = 0; i < n; i++) {
            if (slot[i] < 0)
                continue;
            if (rc == MPI_ERR_IN_STATUS && st[i].MPI_ERROR == MPI_ERR_PENDING)
                continue;
            pl->e[slot[i]].req = reqs[i];
            done_slots[nd++] = i;
        }
        break;
    default: /* Waitsome, Testsome until some */
        do
            rc = call < 8 ? MPI_Waitsome(n, reqs, &out, ind, st)
                          : MPI_Testsome(n, reqs, &out, ind, st);
        while (out == 0);
        if (out == MPI_UNDEFINED)
            fatal("Waitsome/Testsome: no active request among %d", n);
        {
            /* statuses come in completion order: by index from here on */
            MPI_Status in_order[16];
            memcpy(in_order, st, sizeof in_order);
            for (int j = 0; j < out; j++) {
                int i = ind[j];
                if (i < 0 || i >= n || slot[i] < 0)
                    fatal("Waitsome/Testsome: index %d is not an active request", i);
                pl->e[slot[i]].req = reqs[i];
                st[i] = in_order[j];
                done_slots[nd++] = i;
            }
        }
        break;
    }
    /* MPI may have changed handles it did not report (see above): each is taken back */
    for (int i = 0; i < n; i++) {
        int reported = 0;
        for (int a = 0; a < nd; a++)
            reported |= done_slots[a] == i;
        if (slot[i] >= 0 && !reported) {
            if (reqs[i] == MPI_REQUEST_NULL && pl->e[slot[i]].req != MPI_REQUEST_NULL)
                fail("%s%d vanished in %s, which did not report it", kinds[pl->e[slot[i]].kind],
                     pl->e[slot[i]].idx, calls[call]);
            pl->e[slot[i]].req = reqs[i];
        }
    }
    /* Complete from the highest slot down: completed() moves the last pool entry into the
     * freed slot. */
    for (int a = 0; a < nd; a++)
        for (int b = a + 1; b < nd; b++)
            if (slot[done_slots[b]] > slot[done_slots[a]]) {
                int t = done_slots[a];
                done_slots[a] = done_slots[b];
                done_slots[b] = t;
            }
    for (int a = 0; a < nd; a++) {
        int i = done_slots[a];
        completed(pl, slot[i], &st[i], err_of(rc, &st[i], call >= 5));
    }
    return nd > 0;
}

static void send_msg(struct run *x, int j)
{
    const struct msg *m = &x->p->m[j];
    int *buf = x->sbuf[j];
    MPI_Comm c = x->comm;
    int rc = MPI_SUCCESS;
    MPI_Request *req = &x->sreq[j];
    switch (m->mode) {
    case SEND: rc = MPI_Send(buf, m->count, MPI_INT, m->dst, m->tag, c); break;
    case SSEND: rc = MPI_Ssend(buf, m->count, MPI_INT, m->dst, m->tag, c); break;
    case RSEND: rc = MPI_Rsend(buf, m->count, MPI_INT, m->dst, m->tag, c); break;
    case BSEND: rc = MPI_Bsend(buf, m->count, MPI_INT, m->dst, m->tag, c); break;
    case ISEND: rc = MPI_Isend(buf, m->count, MPI_INT, m->dst, m->tag, c, req); break;
    case ISSEND: rc = MPI_Issend(buf, m->count, MPI_INT, m->dst, m->tag, c, req); break;
    case IRSEND: rc = MPI_Irsend(buf, m->count, MPI_INT, m->dst, m->tag, c, req); break;
    case IBSEND: rc = MPI_Ibsend(buf, m->count, MPI_INT, m->dst, m->tag, c, req); break;
    default: {
        int first = m->group >= 0 ? m->group : j;
        if (x->psreq[first] == MPI_REQUEST_NULL) {
            int *pbuf = x->sbuf[first];
            switch (m->mode) {
            case PSEND: rc = MPI_Send_init(pbuf, m->count, MPI_INT, m->dst, m->tag, c, &x->psreq[first]); break;
            case PSSEND: rc = MPI_Ssend_init(pbuf, m->count, MPI_INT, m->dst, m->tag, c, &x->psreq[first]); break;
            case PBSEND: rc = MPI_Bsend_init(pbuf, m->count, MPI_INT, m->dst, m->tag, c, &x->psreq[first]); break;
            default: rc = MPI_Rsend_init(pbuf, m->count, MPI_INT, m->dst, m->tag, c, &x->psreq[first]); break;
            }
        }
        /* the persistent buffer carries this message now */
        memcpy(x->sbuf[first], buf, sizeof(int) * (size_t)m->count);
        *req = x->psreq[first];
        if (rc == MPI_SUCCESS)
            rc = MPI_Start(req);
    }
    }
    if (rc != MPI_SUCCESS)
        fail("send %d (%s): error class %d", j, send_names[m->mode], err_class(rc));
    if (m->mode >= ISEND)
        pool_add(x, *req, P_SEND, j);
    else
        note("send %d done", j);
}

/* A late receive of kind Recv, Probe, Iprobe, Mprobe, Improbe or Mprobe_Imrecv: runs now. */
static void late_recv(struct run *x, int i)
{
    const struct recv *v = &x->p->r[i];
    MPI_Comm c = x->comm;
    MPI_Status st;
    MPI_Message msg;
    int flag = 0, rc, probed = 0;
    int count;
    MPI_Datatype type = recv_type(x, v, &count);
    x->out[i].post = (*x->posts)++;
    switch (v->kind) {
    case RECV:
        if (v->pair >= 0) {
            /* with one of this rank's sends, in one call */
            const struct msg *m = &x->p->m[v->pair];
            if (m->count == count && type == MPI_INT && chance(&x->pool->g, 50)) {
                memcpy(x->rbuf[i], x->sbuf[v->pair], sizeof(int) * (size_t)m->count);
                rc = MPI_Sendrecv_replace(x->rbuf[i], count, MPI_INT, m->dst, m->tag, v->src,
                                          v->tag, c, &st);
            } else {
                rc = MPI_Sendrecv(x->sbuf[v->pair], m->count, MPI_INT, m->dst, m->tag, x->rbuf[i],
                                  count, type, v->src, v->tag, c, &st);
            }
            note("send %d done (Sendrecv)", v->pair);
        } else {
            rc = MPI_Recv(x->rbuf[i], count, type, v->src, v->tag, c, &st);
        }
        recv_done(x, i, &st, rc, v->vec, v->cap);
        return;
    case PROBE:
    case IPROBE:
        if (v->kind == PROBE)
            rc = MPI_Probe(v->src, v->tag, c, &st);
        else
            do
                rc = MPI_Iprobe(v->src, v->tag, c, &flag, &st);
            while (!flag && rc == MPI_SUCCESS);
        if (rc != MPI_SUCCESS) {
            fail("recv %d: probe error class %d", i, err_class(rc));
            return;
        }
        {
            int psrc = st.MPI_SOURCE, ptag = st.MPI_TAG, bytes = 0;
            MPI_Get_count(&st, MPI_BYTE, &bytes);
            probed = bytes;
            free(x->rbuf[i]);
            x->rbuf[i] = alloc_ints(bytes / 4);
            rc = MPI_Recv(x->rbuf[i], bytes / 4, MPI_INT, psrc, ptag, c, &st);
            int got = -1;
            MPI_Get_count(&st, MPI_BYTE, &got);
            if (st.MPI_SOURCE != psrc || st.MPI_TAG != ptag || got != bytes)
                fail("recv %d: probed src %d tag %d bytes %d, received src %d tag %d bytes %d",
                     i, psrc, ptag, bytes, st.MPI_SOURCE, st.MPI_TAG, got);
        }
        break;
    default:
        if (v->kind == MPROBE || v->kind == MPROBE_I)
            rc = MPI_Mprobe(v->src, v->tag, c, &msg, &st);
        else
            do
                rc = MPI_Improbe(v->src, v->tag, c, &flag, &msg, &st);
            while (!flag && rc == MPI_SUCCESS);
        if (rc != MPI_SUCCESS) {
            fail("recv %d: matched probe error class %d", i, err_class(rc));
            return;
        }
        {
            int psrc = st.MPI_SOURCE, ptag = st.MPI_TAG, bytes = 0;
            MPI_Get_count(&st, MPI_BYTE, &bytes);
            probed = bytes;
            free(x->rbuf[i]);
            x->rbuf[i] = alloc_ints(bytes / 4);
            if (v->kind == MPROBE) {
                rc = MPI_Mrecv(x->rbuf[i], bytes / 4, MPI_INT, &msg, &st);
            } else {
                MPI_Request r;
                rc = MPI_Imrecv(x->rbuf[i], bytes / 4, MPI_INT, &msg, &r);
                if (rc == MPI_SUCCESS)
                    rc = MPI_Wait(&r, &st);
            }
            if (rc == MPI_SUCCESS && (st.MPI_SOURCE != psrc || st.MPI_TAG != ptag))
                fail("recv %d: matched probe src %d tag %d, received src %d tag %d", i, psrc,
                     ptag, st.MPI_SOURCE, st.MPI_TAG);
        }
    }
    /* probed messages are received as plain ints, into a buffer of their size */
    recv_done(x, i, &st, rc, 0, probed / 4);
}

/* ---- collectives ------------------------------------------------------------------------- */

static int cval(int rank, int i) { return rank * 1000 + i * 7 + 3; }

/* Open MPI 4.1.4's MPI_Barrier never returns on a communicator asserting
 * mpi_assert_no_any_source at 4 to 6 ranks (ci/fuzz/known/openmpi-no-any-source-barrier.c):
 * there the lane's barriers are MPI_Ibarrier and a wait. */
static int barrier(MPI_Comm comm)
{
    if (MPICH || !(lane_asserts & NO_ANY_SOURCE))
        return MPI_Barrier(comm);
    MPI_Request req;
    int rc = MPI_Ibarrier(comm, &req);
    return rc == MPI_SUCCESS ? MPI_Wait(&req, MPI_STATUS_IGNORE) : rc;
}

/* Starts (or runs) collective c on comm; bufs hold its send and receive buffers. */
static int coll_start(const struct coll *cl, MPI_Comm comm, int **bufs, MPI_Request *req)
{
    int n, r;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &r);
    int cnt = cl->count, root = cl->root % n;
    int total = cnt * n;
    bufs[0] = alloc_ints(total);
    bufs[1] = alloc_ints(total);
    for (int i = 0; i < total; i++)
        bufs[0][i] = cval(r, i);
    int *s = bufs[0], *d = bufs[1];
    int nb = req != NULL;
    switch (cl->kind) {
    case BARRIER: return nb ? MPI_Ibarrier(comm, req) : barrier(comm);
    case BCAST:
        if (r == root)
            memcpy(d, s, sizeof(int) * (size_t)cnt);
        return nb ? MPI_Ibcast(d, cnt, MPI_INT, root, comm, req) : MPI_Bcast(d, cnt, MPI_INT, root, comm);
    case REDUCE:
        return nb ? MPI_Ireduce(s, d, cnt, MPI_INT, MPI_SUM, root, comm, req)
                  : MPI_Reduce(s, d, cnt, MPI_INT, MPI_SUM, root, comm);
    case ALLREDUCE:
        return nb ? MPI_Iallreduce(s, d, cnt, MPI_INT, MPI_SUM, comm, req)
                  : MPI_Allreduce(s, d, cnt, MPI_INT, MPI_SUM, comm);
    case GATHER:
        return nb ? MPI_Igather(s, cnt, MPI_INT, d, cnt, MPI_INT, root, comm, req)
                  : MPI_Gather(s, cnt, MPI_INT, d, cnt, MPI_INT, root, comm);
    case SCATTER:
        return nb ? MPI_Iscatter(s, cnt, MPI_INT, d, cnt, MPI_INT, root, comm, req)
                  : MPI_Scatter(s, cnt, MPI_INT, d, cnt, MPI_INT, root, comm);
    case ALLGATHER:
        return nb ? MPI_Iallgather(s, cnt, MPI_INT, d, cnt, MPI_INT, comm, req)
                  : MPI_Allgather(s, cnt, MPI_INT, d, cnt, MPI_INT, comm);
    case ALLTOALL:
        return nb ? MPI_Ialltoall(s, cnt, MPI_INT, d, cnt, MPI_INT, comm, req)
                  : MPI_Alltoall(s, cnt, MPI_INT, d, cnt, MPI_INT, comm);
    case SCAN:
        return nb ? MPI_Iscan(s, d, cnt, MPI_INT, MPI_SUM, comm, req)
                  : MPI_Scan(s, d, cnt, MPI_INT, MPI_SUM, comm);
    default:
        return nb ? MPI_Ireduce_scatter_block(s, d, cnt, MPI_INT, MPI_SUM, comm, req)
                  : MPI_Reduce_scatter_block(s, d, cnt, MPI_INT, MPI_SUM, comm);
    }
}

/* Checks a finished collective's result and mixes it into the digest. */
static void coll_check(const struct coll *cl, MPI_Comm comm, int **bufs, int which)
{
    int n, r;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &r);
    int cnt = cl->count, root = cl->root % n, bad = -1;
    int *d = bufs[1];
    for (int i = 0; i < cnt * n && bad < 0; i++) {
        int expect, check = 1;
        int blk = i / cnt, off = i % cnt;
        switch (cl->kind) {
        case BARRIER: check = 0; expect = 0; break;
        case BCAST: check = i < cnt; expect = cval(root, i); break;
        case REDUCE:
        case ALLREDUCE:
            check = i < cnt && (cl->kind == ALLREDUCE || r == root);
            expect = 0;
            for (int q = 0; q < n; q++)
                expect += cval(q, i);
            break;
        case GATHER: check = r == root; expect = cval(blk, r * 0 + off); break;
        case SCATTER: check = i < cnt; expect = cval(root, r * cnt + i); break;
        case ALLGATHER: expect = cval(blk, off); break;
        case ALLTOALL: expect = cval(blk, r * cnt + off); break;
        case SCAN:
            check = i < cnt;
            expect = 0;
            for (int q = 0; q <= r; q++)
                expect += cval(q, i);
            break;
        default:
            check = i < cnt;
            expect = 0;
            for (int q = 0; q < n; q++)
                expect += cval(q, r * cnt + i);
        }
        if (check && d[i] != expect)
            bad = i;
        if (check)
            mix((u64)(unsigned)d[i]);
    }
    if (bad >= 0)
        fail("%s %d (root %d, %d ints): wrong at %d: %d", coll_names[cl->kind], which, root, cnt,
             bad, d[bad]);
    note("coll %d %s ok", which, coll_names[cl->kind]);
    free(bufs[0]);
    free(bufs[1]);
}

/* ---- p2p units ---------------------------------------------------------------------------- */

static void complete_request(struct run *x, MPI_Request req, int kind)
{
    struct pool *pl = x->pool;
    for (int s = 0; s < pl->n; s++)
        if (pl->e[s].x == x && pl->e[s].kind == kind && pl->e[s].req == req) {
            MPI_Status st;
            int rc = MPI_Wait(&pl->e[s].req, &st);
            completed(pl, s, &st, rc);
            return;
        }
}

static void run_setup(struct run *x, const struct p2p *p, MPI_Comm comm, MPI_Comm sync,
                      int msg_id0, struct pool *pool, long *posts)
{
    memset(x, 0, sizeof *x);
    x->p = p;
    x->comm = comm;
    x->sync = sync;
    x->msg_id0 = msg_id0;
    x->pool = pool;
    x->posts = posts;
    MPI_Comm_rank(comm, &x->rank);
    MPI_Type_vector(2, 1, 2, MPI_INT, &x->vec);
    MPI_Type_commit(&x->vec);
    for (int i = 0; i < MAXR; i++)
        x->rreq[i] = x->preq[i] = MPI_REQUEST_NULL;
    for (int j = 0; j < MAXM; j++)
        x->sreq[j] = x->psreq[j] = MPI_REQUEST_NULL;
    for (int i = 0; i < p->nr; i++)
        x->rbuf[i] = alloc_ints(buf_ints(&p->r[i]) + 4);
    for (int j = 0; j < p->nm; j++) {
        x->sbuf[j] = alloc_ints(p->m[j].count);
        for (int k = 0; k < p->m[j].count; k++)
            x->sbuf[j][k] = word(msg_id0 + j, k);
    }
}

/* 1: early receives, nonblocking collectives (in the pool). */
static void run_early(struct run *x)
{
    const struct p2p *p = x->p;
    /* consecutive persistent receives that no message could match two of */
    int together = x->start_together, batch[MAXR], n = 0;
    for (int i = 0; i < p->nr; i++) {
        const struct recv *v = &p->r[i];
        if (v->rank != x->rank || !v->early)
            continue;
        int batched = together && v->kind == PERSIST, joins = batched;
        for (int k = 0; joins && k < n; k++)
            joins = !overlap(&p->r[batch[k]], v);
        if (!joins && n > 0) {
            start_all(x, batch, n);
            n = 0;
        }
        if (batched)
            batch[n++] = i;
        else
            post_recv(x, i);
    }
    if (n > 0)
        start_all(x, batch, n);
    for (int c = 0; c < p->nc; c++) {
        int rc = coll_start(&p->c[c], x->sync, x->cbuf[c], &x->creq[c]);
        if (rc != MPI_SUCCESS)
            fail("I%s: error class %d", coll_names[p->c[c].kind], err_class(rc));
        pool_add(x, x->creq[c], P_COLL, c);
    }
}

/* 3: sends, in plan order; a persistent send started again waits for its previous start.
 * Then the blocking collective between sends and late receives, if any. */
static void run_sends(struct run *x)
{
    const struct p2p *p = x->p;
    for (int j = 0; j < p->nm; j++) {
        if (p->m[j].src != x->rank || p->m[j].mode == SENDRECV)
            continue;
        if (p->m[j].group >= 0)
            complete_request(x, x->psreq[p->m[j].group], P_SEND);
        send_msg(x, j);
    }
    if (p->middle) {
        int *bufs[2];
        int rc = coll_start(&p->mid, x->sync, bufs, NULL);
        if (rc != MPI_SUCCESS)
            fail("%s: error class %d", coll_names[p->mid.kind], err_class(rc));
        coll_check(&p->mid, x->sync, bufs, -1);
    }
}

/* 4: the late receive `i` (a restarted persistent one after its previous start). */
static void run_late(struct run *x, int i)
{
    const struct recv *v = &x->p->r[i];
    if (v->group >= 0)
        complete_request(x, x->preq[v->group], P_RECV);
    if (nonblocking_kind(v->kind))
        post_recv(x, i);
    else
        late_recv(x, i);
}

/* 6: the checks at this receiver, the digest, and freeing. */
static void run_finish(struct run *x)
{
    const struct p2p *p = x->p;
    for (int c = 0; c < p->nc; c++)
        coll_check(&p->c[c], x->sync, x->cbuf[c], c);
    for (int j = 0; j < p->nm; j++) {
        const struct msg *m = &p->m[j];
        if (m->dst == x->rank && x->nmsg_recv[j] != 1)
            fail("msg %d (%d->%d tag %d) received %d times", j, m->src, m->dst, m->tag,
                 x->nmsg_recv[j]);
    }
    for (int i = 0; i < p->nr; i++) {
        const struct recv *v = &p->r[i];
        const struct outcome *o = &x->out[i];
        if (v->rank != x->rank)
            continue;
        if (o->msg >= 0) {
            /* non-overtaking: an earlier message from the same sender that this receive
             * matches went to a receive posted before it */
            const struct msg *m = &p->m[o->msg];
            for (int j = 0; j < p->nm; j++) {
                const struct msg *e = &p->m[j];
                if (e->src != m->src || e->dst != m->dst || e->seq >= m->seq)
                    continue;
                if ((v->src != MPI_ANY_SOURCE && v->src != e->src) ||
                    (v->tag != MPI_ANY_TAG && v->tag != e->tag))
                    continue;
                int by = -1;
                for (int q = 0; q < p->nr; q++)
                    if (p->r[q].rank == x->rank && x->out[q].msg == j)
                        by = q;
                if (by < 0 || x->out[by].post > o->post)
                    fail("recv %d got msg %d (seq %d from %d) while msg %d (seq %d) it matches "
                         "went to %s",
                         i, o->msg, m->seq, m->src, j, e->seq, by < 0 ? "none" : "a later receive");
            }
        }
        /* the digest: what is deterministic; a truncated receive's count is undefined, and
         * MPICH leaves a stale one */
        int bytes = o->err == MPI_ERR_TRUNCATE && MPICH ? -1 : o->bytes;
        mix((u64)i * 131 + (u64)o->done);
        if (v->exact && v->cancel != CANCEL_RACE)
            mix(((u64)(o->msg + 7) << 40) ^ ((u64)(o->src + 3) << 32) ^
                ((u64)(o->tag + 3) << 16) ^ (u64)(unsigned)bytes ^ ((u64)o->err << 56) ^
                ((u64)o->cancelled << 60));
        else
            mix((u64)o->err << 8 ^ (u64)(v->cancel == CANCEL_IDLE ? o->cancelled : 0));
    }
    for (int j = 0; j < p->nm; j++)
        if (p->m[j].dst == x->rank)
            mix((u64)j * 977 + (u64)x->nmsg_recv[j]);
    for (int i = 0; i < MAXR; i++)
        if (x->preq[i] != MPI_REQUEST_NULL)
            MPI_Request_free(&x->preq[i]);
    for (int j = 0; j < MAXM; j++)
        if (x->psreq[j] != MPI_REQUEST_NULL)
            MPI_Request_free(&x->psreq[j]);
    for (int i = 0; i < p->nr; i++)
        free(x->rbuf[i]);
    for (int j = 0; j < p->nm; j++)
        free(x->sbuf[j]);
    MPI_Type_free(&x->vec);
}

/* An info object making the assertions `asserts`. */
static MPI_Info assertions_info(int asserts)
{
    MPI_Info info;
    MPI_Info_create(&info);
    for (int k = 0; k < 3; k++)
        if (asserts & 1 << k)
            MPI_Info_set(info, assertion_keys[k], "true");
    return info;
}

static void set_assertions(MPI_Comm comm, int asserts)
{
    MPI_Info info = assertions_info(asserts);
    int rc = MPI_Comm_set_info(comm, info);
    MPI_Info_free(&info);
    if (rc != MPI_SUCCESS)
        fail("Comm_set_info: error class %d", err_class(rc));
    note("assertions set");
}

/* Runs `k` p2p plans at once, plan i's messages on comms[i] and its barrier and collectives
 * on syncs[i]: each phase of every plan before the next phase, late receives of the plans
 * interleaved, one pool of requests completed together. Where `asserting` is not
 * MPI_COMM_NULL, MPI_Comm_set_info gives it the lane's assertions once the early receives
 * are posted. */
static void run_p2ps(const struct p2p **plans, const MPI_Comm *comms, const MPI_Comm *syncs,
                     int k, int msg_id0, u64 run_seed, MPI_Comm asserting)
{
    struct run *x = calloc((size_t)k, sizeof *x);
    struct pool *pool = calloc(1, sizeof *pool);
    long posts = 0;
    pool->g.s = run_seed;
    /* In half the runs. */
    struct rng choice = apart_from(run_seed);
    for (int i = 0; i < k; i++) {
        run_setup(&x[i], plans[i], comms[i], syncs[i], msg_id0 + 100 * i, pool, &posts);
        x[i].start_together = chance(&choice, 50);
    }
    for (int i = 0; i < k; i++)
        run_early(&x[i]);
    if (asserting != MPI_COMM_NULL)
        set_assertions(asserting, lane_asserts);
    for (int i = 0; i < k; i++)
        if (plans[i]->barrier)
            barrier(syncs[i]);
    for (int i = 0; i < k; i++)
        run_sends(&x[i]);
    /* 4: cancels, then late receives, the plans' turns interleaved */
    for (int i = 0; i < k; i++)
        for (int r = 0; r < plans[i]->nr; r++)
            if (plans[i]->r[r].rank == x[i].rank && plans[i]->r[r].early &&
                plans[i]->r[r].cancel != KEEP)
                MPI_Cancel(&x[i].rreq[r]);
    /* a rank's Sendrecv is its first late call in every plan (see gen_p2p) */
    int next[2] = {0, 0};
    for (int i = 0; i < k; i++) {
        const struct p2p *p = plans[i];
        for (int r = 0; r < p->nr; r++)
            if (p->r[r].rank == x[i].rank && !p->r[r].early) {
                if (p->r[r].pair >= 0) {
                    run_late(&x[i], r);
                    next[i] = r + 1;
                }
                break;
            }
    }
    for (;;) {
        int busy = 0;
        for (int i = 0; i < k; i++) {
            const struct p2p *p = plans[i];
            while (next[i] < p->nr &&
                   (p->r[next[i]].rank != x[i].rank || p->r[next[i]].early))
                next[i]++;
            if (next[i] < p->nr) {
                busy = 1;
                int take = 1 + pick(&pool->g, 2);
                for (int t = 0; t < take && next[i] < p->nr; next[i]++)
                    if (p->r[next[i]].rank == x[i].rank && !p->r[next[i]].early) {
                        run_late(&x[i], next[i]);
                        t++;
                    }
            }
        }
        if (!busy)
            break;
    }
    /* 5: everything completes, by random completion calls over all the plans' requests */
    while (pool->n > 0)
        complete_some(pool);
    for (int i = 0; i < k; i++)
        run_finish(&x[i]);
    free(pool);
    free(x);
}

static void run_p2p(const struct p2p *p, MPI_Comm comm, MPI_Comm sync, int msg_id0,
                    u64 run_seed, MPI_Comm asserting)
{
    run_p2ps(&p, &comm, &sync, 1, msg_id0, run_seed, asserting);
}

/* ---- comm unit --------------------------------------------------------------------------- */

/* unit_seed: the unit's, alike on every rank; run_seed: this rank's (see run_lane). */
static void run_comm(const struct unit *u, MPI_Comm base, int msg_id0, u64 unit_seed,
                     u64 run_seed)
{
    MPI_Comm sub;
    int r;
    MPI_Comm_rank(base, &r);
    /* A duplicate is made by MPI_Comm_idup in half the units, alike on every rank. */
    struct rng choice = apart_from(unit_seed);
    int nonblocking = !u->split && chance(&choice, 50);
    int rc;
    if (u->split) {
        rc = MPI_Comm_split(base, u->color[r], u->key[r], &sub);
    } else if (nonblocking) {
        MPI_Request req;
        rc = MPI_Comm_idup(base, &sub, &req);
        if (rc == MPI_SUCCESS)
            rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    } else {
        rc = MPI_Comm_dup(base, &sub);
    }
    if (rc != MPI_SUCCESS) {
        fail("Comm_%s: error class %d", u->split ? "split" : nonblocking ? "idup" : "dup",
             err_class(rc));
        return;
    }
    int k, sr;
    MPI_Comm_size(sub, &k);
    MPI_Comm_rank(sub, &sr);
    const struct p2p *q = u->split && u->color[r] == 1 ? &u->p1 : &u->p;
    if (q->n != k) {
        fail("new communicator of %d ranks, planned %d", k, q->n);
        MPI_Comm_free(&sub);
        return;
    }
    run_p2p(q, sub, sub, msg_id0, run_seed, MPI_COMM_NULL);
    /* a receive pending while the communicator is freed: with two ranks only, since with
     * more, natively, MPICH hangs (ci/fuzz/known/mpich-comm-free-pending.c) and so does Open
     * MPI now and then (ci/fuzz/known/README.md) */
    if (world_size > 2) {
        MPI_Comm_free(&sub);
        return;
    }
    /* every receive of the unit is done first: a wildcard one could take the message */
    barrier(sub);
    int s = u->pend_src % k, d = u->pend_dst % k;
    int data[4] = {msg_id0 + 900, 1, 2, 3}, in[4] = {0};
    MPI_Request rreq = MPI_REQUEST_NULL, sreq = MPI_REQUEST_NULL;
    if (sr == d)
        MPI_Irecv(in, 4, MPI_INT, u->pend_any ? MPI_ANY_SOURCE : s, 77, sub, &rreq);
    if (sr == s)
        MPI_Isend(data, 4, MPI_INT, d, 77, sub, &sreq);
    MPI_Comm_free(&sub);
    MPI_Status st;
    if (sr == s)
        MPI_Wait(&sreq, MPI_STATUS_IGNORE);
    if (sr == d) {
        rc = MPI_Wait(&rreq, &st);
        if (rc != MPI_SUCCESS || st.MPI_SOURCE != s || st.MPI_TAG != 77 || in[0] != data[0] ||
            in[3] != 3)
            fail("receive pending at Comm_free: code %d source %d tag %d data %d", err_class(rc),
                 st.MPI_SOURCE, st.MPI_TAG, in[0]);
        note("receive pending at Comm_free ok");
        mix(0xc0ffee);
    }
}

/* ---- a seed ------------------------------------------------------------------------------ */

static int unit_selected(const char *units, int i)
{
    if (!units)
        return 1;
    char buf[512];
    snprintf(buf, sizeof buf, ",%s,", units);
    char key[16];
    snprintf(key, sizeof key, ",%d,", i);
    return strstr(buf, key) != NULL;
}

/* The plan lane `lane` of a seed runs: lane 0's is the seed's own. */
static u64 lane_seed(u64 seed, int lane) { return seed + (u64)lane * 0x9e3779b97f4a7c15ull; }

/* Whether a seed's threads share one communicator for their point-to-point units' messages,
 * each with tags of its own and no MPI_ANY_TAG receive (every other seed with --threads 2 or
 * more): takeovers and switches of one communicator with several threads inside MPI. */
static int shares_comm(u64 seed) { return threads > 1 && (seed / 3) % 2 == 1; }

/* The tags of lane `lane`'s messages on a shared communicator start here. */
static int lane_tag0(int lane) { return lane * 32768; }

/* The assertions a seed's communicators make with --asserts: no MPI_ANY_SOURCE, no
 * MPI_ANY_TAG, neither, or neither and overtaking allowed (where MPI may match out of order);
 * each set in turn for six seeds, so that it meets every rank count with and without
 * shares_comm. */
static int seed_assertions(u64 seed)
{
    static const int sets[] = {NO_ANY_SOURCE, NO_ANY_TAG, NO_ANY_SOURCE | NO_ANY_TAG,
                               NO_ANY_SOURCE | NO_ANY_TAG | ALLOW_OVERTAKING};
    return asserting ? sets[(seed / 6) % 4] : 0;
}

/* With --asserts, in every other group of 24 seeds whose threads do not share a
 * communicator, each thread's communicator is made without assertions and gets them by
 * MPI_Comm_set_info in its first p2p unit once the early receives are posted: the shim then
 * changes how it matches on a communicator in use.  On Open MPI not where overtaking is
 * allowed: its MPI_Ibarrier then hangs (ci/fuzz/known/openmpi-overtaking-ibarrier.c). */
static int asserts_later(u64 seed)
{
    return asserting && !shares_comm(seed) && (seed / 24) % 2 == 1 &&
           (MPICH || !(seed_assertions(seed) & ALLOW_OVERTAKING));
}

/* A duplicate of MPI_COMM_WORLD whose info makes the assertions `asserts`. */
static MPI_Comm dup_world(int asserts)
{
    MPI_Comm comm;
    if (!asserts) {
        MPI_Comm_dup(MPI_COMM_WORLD, &comm);
        return comm;
    }
    MPI_Info info = assertions_info(asserts);
    MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &comm);
    MPI_Info_free(&info);
    return comm;
}

/* One lane's run of a seed: its plan's units on `base` (its own duplicate of MPI_COMM_WORLD,
 * freed here) and, where the lanes share one (`shared`), the point-to-point units' messages
 * on that; leaves its digest and failure. */
struct lane {
    u64 seed;
    int index;
    const char *units;
    MPI_Comm base, shared;
    u64 digest;
    char failure[256];
};

static void *run_lane(void *arg)
{
    struct lane *ln = arg;
    u64 seed = lane_seed(ln->seed, ln->index);
    struct plan *pl = malloc(sizeof *pl);
    int shared = ln->shared != MPI_COMM_NULL;
    gen_plan(seed, world_size, pl, shared, lane_tag0(ln->index), seed_assertions(ln->seed));
    if (threads > 1) {
        snprintf(who, sizeof who, "r%d.%d", me, ln->index);
        snprintf(lane_of, sizeof lane_of, "thread %d, ", ln->index);
    } else {
        snprintf(who, sizeof who, "r%d", me);
        lane_of[0] = 0;
    }
    seed_now = ln->seed;
    lane_asserts = seed_assertions(ln->seed);
    digest = seed;
    failure[0] = 0;
    MPI_Comm base = ln->base, traffic = shared ? ln->shared : base;
    int later = asserts_later(ln->seed);
    for (int i = 0; i < pl->nu; i++) {
        if (!unit_selected(ln->units, i))
            continue;
        unit_now = i;
        const struct unit *u = &pl->u[i];
        u64 unit_seed = seed * 1000003 + (u64)i * 7919, run_seed = unit_seed + (u64)me;
        int msg_id0 = 1000 * (i + 1);
        mix((u64)i << 48);
        switch (u->kind) {
        case U_P2P:
            if (u->two) {
                MPI_Comm comms[2] = {traffic, MPI_COMM_NULL};
                const struct p2p *plans[2] = {&u->p, &u->p1};
                int rc = MPI_Comm_dup(base, &comms[1]);
                if (rc != MPI_SUCCESS) {
                    fail("Comm_dup: error class %d", err_class(rc));
                    break;
                }
                MPI_Comm syncs[2] = {base, comms[1]};
                run_p2ps(plans, comms, syncs, 2, msg_id0, run_seed,
                         later ? comms[0] : MPI_COMM_NULL);
                later = 0;
                MPI_Comm_free(&comms[1]);
            } else {
                run_p2p(&u->p, traffic, base, msg_id0, run_seed, later ? traffic : MPI_COMM_NULL);
                later = 0;
            }
            break;
        case U_COLL:
            for (int j = 0; j < u->ncoll; j++) {
                int *bufs[2];
                MPI_Request req;
                int rc = coll_start(&u->c[j], base, bufs, u->c[j].nonblocking ? &req : NULL);
                if (rc == MPI_SUCCESS && u->c[j].nonblocking)
                    rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
                if (rc != MPI_SUCCESS)
                    fail("%s: error class %d", coll_names[u->c[j].kind], err_class(rc));
                coll_check(&u->c[j], base, bufs, j);
            }
            break;
        case U_COMM:
            run_comm(u, base, msg_id0, unit_seed, run_seed);
            break;
        }
        /* every rank's lane stops after a unit that failed somewhere (profiling name: not
         * logged as a call of the generated program) */
        int failed = failure[0] != 0, any;
        PMPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, base);
        if (any)
            break;
    }
    MPI_Comm_free(&ln->base);
    free(pl);
    ln->digest = digest;
    memcpy(ln->failure, failure, sizeof failure);
    return NULL;
}

static void run_seed(u64 seed, const char *units, int show_plan)
{
    int lanes = threads > 1 ? threads : 1;
    struct lane ln[MAXLANES];
    if (show_plan && me == 0) {
        struct plan *pl = malloc(sizeof *pl * MAXLANES);
        int most = 0;
        for (int t = 0; t < lanes; t++) {
            gen_plan(lane_seed(seed, t), world_size, &pl[t], shares_comm(seed), lane_tag0(t),
                     seed_assertions(seed));
            most = pl[t].nu > most ? pl[t].nu : most;
        }
        /* the first line counts the units of the longest plan (--units numbers each lane's) */
        if (lanes > 1)
            printf("plan %llu: %d units in the longest of %d threads' plans%s\n",
                   (unsigned long long)seed, most, lanes,
                   shares_comm(seed) ? " (p2p messages on a communicator they share)" : "");
        if (seed_assertions(seed)) {
            printf("communicators asserting");
            for (int k = 0; k < 3; k++)
                if (seed_assertions(seed) & 1 << k)
                    printf(" %s", assertion_keys[k]);
            printf("%s\n", asserts_later(seed) ? ", set by MPI_Comm_set_info in the first p2p unit"
                                                : "");
        }
        for (int t = 0; t < lanes; t++) {
            if (lanes > 1)
                printf("thread %d's ", t);
            print_plan(seed, &pl[t]);
        }
        free(pl);
    }
    /* the lanes' communicators in one order on every rank, before any lane starts */
    MPI_Comm shared = MPI_COMM_NULL;
    if (shares_comm(seed))
        shared = dup_world(seed_assertions(seed));
    for (int t = 0; t < lanes; t++) {
        ln[t] = (struct lane){.seed = seed, .index = t, .units = units, .shared = shared};
        ln[t].base = dup_world(asserts_later(seed) ? 0 : seed_assertions(seed));
    }
    if (lanes == 1) {
        run_lane(&ln[0]);
    } else {
        pthread_t id[MAXLANES];
        for (int t = 0; t < lanes; t++)
            if (pthread_create(&id[t], NULL, run_lane, &ln[t]) != 0) {
                printf("seed %llu FAIL rank %d: pthread_create failed\n", (unsigned long long)seed, me);
                fflush(stdout);
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
        for (int t = 0; t < lanes; t++)
            pthread_join(id[t], NULL);
    }
    if (shared != MPI_COMM_NULL)
        MPI_Comm_free(&shared);
    char mine[256] = "";
    u64 d = 0;
    for (int t = 0; t < lanes; t++) {
        if (!mine[0])
            memcpy(mine, ln[t].failure, sizeof mine);
        d = d * 0x100000001b3ull ^ ln[t].digest;
    }
    /* verdicts to rank 0 (profiling names: not logged as calls of the generated program) */
    char all[64][256];
    u64 digests[64];
    PMPI_Gather(mine, 256, MPI_CHAR, all, 256, MPI_CHAR, 0, MPI_COMM_WORLD);
    PMPI_Gather(&d, 1, MPI_UINT64_T, digests, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (me == 0) {
        int bad = -1;
        d = 0;
        for (int r = 0; r < world_size; r++) {
            if (bad < 0 && all[r][0])
                bad = r;
            d = d * 0x100000001b3ull ^ digests[r];
        }
        if (bad >= 0)
            printf("seed %llu FAIL rank %d: %s\n", (unsigned long long)seed, bad, all[bad]);
        else
            printf("seed %llu ok %016llx\n", (unsigned long long)seed, (unsigned long long)d);
        fflush(stdout);
    }
}

/* Seeds from a file, one per line. */
static u64 *read_seeds(const char *path, u64 *count)
{
    FILE *f = fopen(path, "r");
    u64 *seeds = NULL, n = 0, cap = 0;
    unsigned long long s;
    while (f && fscanf(f, "%llu", &s) == 1) {
        if (n == cap)
            seeds = realloc(seeds, sizeof *seeds * (cap = cap ? 2 * cap : 64));
        seeds[n++] = s;
    }
    if (f)
        fclose(f);
    else
        fprintf(stderr, "fuzz: cannot read %s\n", path);
    *count = n;
    return seeds;
}

int main(int argc, char **argv)
{
    u64 first = 0, count = 1, step = 1, *list = NULL;
    const char *units = NULL, *seed_file = NULL;
    int show_plan = 0, progress = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seeds") && i + 1 < argc) {
            unsigned long long a = 0, b = 1, c = 1;
            sscanf(argv[++i], "%llu:%llu:%llu", &a, &b, &c);
            first = a, count = b, step = c ? c : 1;
        } else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            first = strtoull(argv[++i], NULL, 10), count = 1;
        } else if (!strcmp(argv[i], "--seed-file") && i + 1 < argc) {
            seed_file = argv[++i];
        } else if (!strcmp(argv[i], "--units") && i + 1 < argc) {
            units = argv[++i];
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            threads = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--asserts")) {
            asserting = 1;
        } else if (!strcmp(argv[i], "--log")) {
            logging = 1;
        } else if (!strcmp(argv[i], "--log-digest")) {
            logging = 2;
        } else if (!strcmp(argv[i], "--plan")) {
            show_plan = 1;
        } else if (!strcmp(argv[i], "--progress")) {
            progress = 1;
        }
    }
    if (threads < 0 || threads > MAXLANES) {
        fprintf(stderr, "fuzz: --threads takes 0 to %d\n", MAXLANES);
        return 2;
    }
    if (threads) {
        int provided;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
        if (provided < MPI_THREAD_MULTIPLE) {
            fprintf(stderr, "fuzz: MPI gives thread level %d, not MPI_THREAD_MULTIPLE\n", provided);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    } else {
        MPI_Init(&argc, &argv);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (seed_file)
        list = read_seeds(seed_file, &count);
    if (world_size > 8) {
        if (me == 0)
            fprintf(stderr, "fuzz: at most 8 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    /* buffered sends: room for a unit's worth in every lane */
    int bsize = (64 * (LARGE + 1000) * 4 + MAXM * MPI_BSEND_OVERHEAD * 64) * (threads ? threads : 1);
    void *bbuf = malloc((size_t)bsize);
    MPI_Buffer_attach(bbuf, bsize);
    for (u64 k = 0; k < count; k++) {
        u64 seed = list ? list[k] : first + k * step;
        if (progress && me == 0) {
            printf("start %llu\n", (unsigned long long)seed);
            fflush(stdout);
        }
        run_seed(seed, units, show_plan);
    }
    MPI_Buffer_detach(&bbuf, &bsize);
    free(bbuf);
    free(list);
    MPI_Finalize();
    return 0;
}
