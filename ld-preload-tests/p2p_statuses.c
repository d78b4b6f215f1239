/* ranks: 2 */
/* Statuses as the MPI writes them.  Every completion call (Wait, Test, Waitany, Testany,
 * Waitall, Testall, Waitsome, Testsome, Request_get_status) over requests of every kind: sends,
 * receives posted before their message (the shim's own in takeover) and after it, mixed
 * arrays, MPI_REQUEST_NULL, inactive and started persistent receives, MPI_PROC_NULL, cancelled,
 * truncated, zero-size, derived-datatype receives, and receives still pending.  Rank 1
 * completes them and each check line prints every word of every status the call could write
 * (MPI_ERROR as "-" while untouched, else as its error class), the return code's class, flag,
 * index, outcount and indices.  The lines are not judged here: ci/ld-preload-tests.sh requires
 * them to be exactly the native run's.
 *
 * Where native MPICH 4.0.2 breaks the standard, its native run prints what the standard says,
 * which the shim must give (only natively: under the shim nothing is rewritten):
 *  - a nonblocking or persistent receive from MPI_PROC_NULL reports source 0, tag 0 (standard:
 *    MPI_PROC_NULL, MPI_ANY_TAG);
 *  - Testany over no active request, an inactive persistent one among them, leaves the status
 *    unwritten (standard: an empty status).
 * What the standard leaves undefined is printed only where the MPI gives it deterministically
 * (Open MPI); MPICH leaves stale values of earlier requests there:
 *  - every field of a cancelled receive's status but the cancelled flag (and MPI_ERROR);
 *  - the count of a truncated receive. */
#include "common.h"
#include <dlfcn.h>

#define MARK 0x41414141
#define MAXR 8
#define LINE 4000
#define BASE 100

static char line[LINE];
static int line_len;

static void add(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line + line_len, LINE - (size_t)line_len, fmt, ap);
    va_end(ap);
    if (n > 0)
        line_len = line_len + n < LINE ? line_len + n : LINE - 1;
}

static void mark(MPI_Status *st, int n)
{
    memset(st, 0x41, sizeof(MPI_Status) * (size_t)n);
}

#ifdef MPICH_VERSION
static const int mpich = 1;
#else
static const int mpich = 0;
#endif
static int native;              /* no shim under this run */

static void add_err(int err)
{
    if (err == MARK)
        add(" err=-");
    else
        add(" err=%d", err_class(err));
}

/* Every word of status `st` of a request of kind `kind` (see below; '?' when none); MPI_ERROR
 * by its class ("-": untouched).  Fields the standard leaves undefined only where MPI is
 * deterministic (see the top). */
static void add_status(MPI_Status *st, char kind)
{
    const int *w = (const int *)st;
    int err_word = (int)(offsetof(MPI_Status, MPI_ERROR) / sizeof(int)), cancelled = 0;
    int untouched = 1;
    for (int i = 0; i < (int)(sizeof(MPI_Status) / sizeof(int)); i++)
        untouched &= w[i] == MARK;
    if (!untouched)
        MPI_Test_cancelled(st, &cancelled);
    if (mpich && cancelled) {
        add(" [ cancelled");
        add_err(st->MPI_ERROR);
        add(" ]");
        return;
    }
    if (mpich && native && kind == '0' && st->MPI_SOURCE == 0 && st->MPI_TAG == 0) {
        st->MPI_SOURCE = MPI_PROC_NULL;
        st->MPI_TAG = MPI_ANY_TAG;
    }
    if (mpich && (kind == 'T' || kind == 'U') && !untouched) {
        add(" [ src=%d tag=%d cancelled=%d", st->MPI_SOURCE, st->MPI_TAG, cancelled);
        add_err(st->MPI_ERROR);
        add(" ]");
        return;
    }
    add(" [");
    for (int i = 0; i < (int)(sizeof(MPI_Status) / sizeof(int)); i++) {
        if (i == err_word)
            add_err(w[i]);
        else
            add(" %x", (unsigned)w[i]);
    }
    add(" ]");
}

/* The empty status, MPI_ERROR untouched. */
static void make_empty(MPI_Status *st)
{
    st->MPI_SOURCE = MPI_ANY_SOURCE;
    st->MPI_TAG = MPI_ANY_TAG;
    MPI_Status_set_elements(st, MPI_BYTE, 0);
    MPI_Status_set_cancelled(st, 0);
}

static void add_code(const char *what, int rc)
{
    add(" %s=%d", what, err_class(rc));
}

/* Rank 1 prints nothing itself: rank 0 prints its line (collective, through PMPI). */
static void emit(const char *name)
{
    char buf[LINE];
    memcpy(buf, line, LINE);
    PMPI_Bcast(buf, LINE, MPI_CHAR, 1, MPI_COMM_WORLD);
    buf[LINE - 1] = 0;
    if (t_rank == 0) {
        printf("ok %s:%s\n", name, buf);
        fflush(stdout);
    }
    line_len = 0;
    line[0] = 0;
}

/* Request kinds, one letter each, at the positions of the array:
 *   S  send (Isend to rank 0), complete
 *   E  receive posted before its message was sent
 *   L  receive posted after its message was sent
 *   Z  E with a zero-size message
 *   D  E into a derived datatype (vector of 2 ints, stride 3)
 *   T  E truncated (the message is twice the buffer)
 *   U  L truncated
 *   C  E cancelled (no message is ever sent for it)
 *   0  receive from MPI_PROC_NULL
 *   P  persistent receive started before its message was sent
 *   I  persistent receive never started (inactive)
 *   N  MPI_REQUEST_NULL
 *   X  receive whose message is sent only after the call under test
 */
struct set {
    const char *kinds;
    int n;
    MPI_Request r[MAXR];
    MPI_Request persistent[MAXR];
    int buf[MAXR][64];
    int out[MAXR][64];
    MPI_Datatype vec;
};

static int tag_of(int i) { return BASE + i; }
/* Ints sent for position i (the receive takes half of it when truncated). */
static int count_of(const struct set *s, int i)
{
    switch (s->kinds[i]) {
    case 'Z': return 0;
    case 'T': case 'U': return 2 * (i + 2);
    case 'D': return 4;
    default: return i + 2;
    }
}

static int recv_count(const struct set *s, int i)
{
    switch (s->kinds[i]) {
    case 'T': case 'U': return i + 2;
    case 'D': return 2;
    default: return count_of(s, i);
    }
}

static MPI_Datatype recv_type(const struct set *s, int i)
{
    return s->kinds[i] == 'D' ? s->vec : MPI_INT;
}

static int sent_early(char k) { return strchr("EZDTP", k) != NULL; }
static int sent_late(char k) { return k == 'L' || k == 'U'; }
static int completes(char k) { return strchr("SELZDTUC0P", k) != NULL; }

static void post(struct set *s, int i)
{
    int *b = s->buf[i];
    switch (s->kinds[i]) {
    case 'S':
        fill(s->out[i], count_of(s, i), 1, tag_of(i), 0);
        CHK(MPI_Isend(s->out[i], count_of(s, i), MPI_INT, 0, tag_of(i), MPI_COMM_WORLD, &s->r[i]));
        break;
    case 'P': case 'I':
        CHK(MPI_Recv_init(b, recv_count(s, i), MPI_INT, 0, tag_of(i), MPI_COMM_WORLD,
                          &s->persistent[i]));
        s->r[i] = s->persistent[i];
        if (s->kinds[i] == 'P')
            CHK(MPI_Start(&s->r[i]));
        break;
    case '0':
        CHK(MPI_Irecv(b, 4, MPI_INT, MPI_PROC_NULL, tag_of(i), MPI_COMM_WORLD, &s->r[i]));
        break;
    case 'N':
        s->r[i] = MPI_REQUEST_NULL;
        break;
    case 'C':
        CHK(MPI_Irecv(b, 4, MPI_INT, 0, tag_of(i), MPI_COMM_WORLD, &s->r[i]));
        CHK(MPI_Cancel(&s->r[i]));
        break;
    default:
        CHK(MPI_Irecv(b, recv_count(s, i), recv_type(s, i), 0, tag_of(i), MPI_COMM_WORLD,
                      &s->r[i]));
    }
}

/* Sets up the requests of `kinds` on rank 1, with rank 0 sending what they need; on return
 * every request that completes is complete (Request_get_status said so) and X's are pending. */
static void setup(struct set *s, const char *kinds)
{
    memset(s, 0, sizeof *s);
    s->kinds = kinds;
    s->n = (int)strlen(kinds);
    CHK(MPI_Type_vector(2, 1, 3, MPI_INT, &s->vec));
    CHK(MPI_Type_commit(&s->vec));
    for (int i = 0; i < s->n; i++)
        s->r[i] = s->persistent[i] = MPI_REQUEST_NULL;
    if (t_rank == 1)
        for (int i = 0; i < s->n; i++)
            if (sent_early(kinds[i]) || strchr("C0IN", kinds[i]))
                post(s, i);
    PMPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == 0)
        for (int i = 0; i < s->n; i++)
            if (sent_early(kinds[i]) || sent_late(kinds[i])) {
                fill(s->out[i], count_of(s, i), 0, tag_of(i), 0);
                CHK(MPI_Send(s->out[i], count_of(s, i), MPI_INT, 1, tag_of(i), MPI_COMM_WORLD));
            }
    PMPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == 1) {
        for (int i = 0; i < s->n; i++)
            if (sent_late(kinds[i]) || kinds[i] == 'S' || kinds[i] == 'X')
                post(s, i);
        for (int i = 0; i < s->n; i++) {
            int flag = 0;
            if (!completes(kinds[i]))
                continue;
            for (double t0 = MPI_Wtime(); !flag && MPI_Wtime() - t0 < 10;)
                MPI_Request_get_status(s->r[i], &flag, MPI_STATUS_IGNORE);
            EXPECT(flag, "request %d (%c) never completed", i, kinds[i]);
        }
    }
}

/* Rank 0 sends the X messages and takes rank 1's sends; rank 1 completes what is left. */
static void finish(struct set *s)
{
    PMPI_Barrier(MPI_COMM_WORLD);
    if (t_rank == 0) {
        for (int i = 0; i < s->n; i++) {
            if (s->kinds[i] == 'X')
                CHK(MPI_Send(s->out[i], count_of(s, i), MPI_INT, 1, tag_of(i), MPI_COMM_WORLD));
            if (s->kinds[i] == 'S')
                CHK(MPI_Recv(s->buf[i], count_of(s, i), MPI_INT, 1, tag_of(i), MPI_COMM_WORLD,
                             MPI_STATUS_IGNORE));
        }
    } else {
        for (int i = 0; i < s->n; i++) {
            if (s->r[i] != MPI_REQUEST_NULL && s->kinds[i] != 'I')
                MPI_Wait(&s->r[i], MPI_STATUS_IGNORE);
            if (s->persistent[i] != MPI_REQUEST_NULL)
                CHK(MPI_Request_free(&s->persistent[i]));
        }
    }
    CHK(MPI_Type_free(&s->vec));
    PMPI_Barrier(MPI_COMM_WORLD);
}

/* Wait, Test and Request_get_status on each kind alone. */
static void t_single(const char *kinds)
{
    for (const char *k = kinds; *k; k++) {
        char one[2] = {*k, 0}, name[64];
        for (int call = 0; call < 3; call++) {
            struct set s;
            static const char *calls[] = {"wait", "test", "request_get_status"};
            if (call == 0 && *k == 'X')
                continue;
            setup(&s, one);
            if (t_rank == 1) {
                MPI_Status st;
                int flag = -1, rc;
                mark(&st, 1);
                if (call == 0)
                    rc = MPI_Wait(&s.r[0], &st);
                else if (call == 1)
                    rc = MPI_Test(&s.r[0], &flag, &st);
                else
                    rc = MPI_Request_get_status(s.r[0], &flag, &st);
                add_code("rc", rc);
                add(" flag=%d null=%d", flag, s.r[0] == MPI_REQUEST_NULL);
                add_status(&st, *k);
            }
            finish(&s);
            snprintf(name, sizeof name, "%s.%s", calls[call], one);
            emit(name);
        }
    }
}

/* Waitall, Testall, Waitsome, Testsome, Waitany, Testany once each over `kinds` (the all and
 * blocking calls only where nothing is pending); then Waitany and Waitsome until nothing is
 * left, printing every round. */
static void t_multiple(const char *kinds)
{
    int pending = strchr(kinds, 'X') != NULL, some = 0;
    for (const char *k = kinds; *k; k++)
        some |= completes(*k);
    static const char *calls[] = {"waitall", "testall", "waitsome", "testsome", "waitany",
                                  "testany", "waitany_loop", "waitsome_loop", "testall_ignore"};
    for (int call = 0; call < 9; call++) {
        struct set s;
        char name[64];
        if (pending && (call == 0 || call >= 6))
            continue;
        if (!some && pending && (call == 2 || call == 4))
            continue;
        setup(&s, kinds);
        if (t_rank == 1) {
            MPI_Status st[MAXR];
            int flag = -1, idx = -7, out = -7, ind[MAXR], rc = 0;
            mark(st, MAXR);
            for (int i = 0; i < MAXR; i++)
                ind[i] = -7;
            switch (call) {
            case 0:
                rc = MPI_Waitall(s.n, s.r, st);
                break;
            case 1:
                rc = MPI_Testall(s.n, s.r, &flag, st);
                break;
            case 2:
                rc = MPI_Waitsome(s.n, s.r, &out, ind, st);
                break;
            case 3:
                rc = MPI_Testsome(s.n, s.r, &out, ind, st);
                break;
            case 4:
                rc = MPI_Waitany(s.n, s.r, &idx, st);
                break;
            case 5:
                rc = MPI_Testany(s.n, s.r, &idx, &flag, st);
                if (mpich && native && flag && idx == MPI_UNDEFINED && st[0].MPI_SOURCE == MARK)
                    make_empty(&st[0]);
                break;
            case 6:
                for (int round = 0; round <= s.n; round++) {
                    mark(st, 1);
                    rc = MPI_Waitany(s.n, s.r, &idx, st);
                    add(" |");
                    add_code("rc", rc);
                    add(" idx=%d", idx);
                    add_status(st, idx >= 0 ? s.kinds[idx] : '?');
                    if (idx == MPI_UNDEFINED)
                        break;
                }
                break;
            case 7:
                for (int round = 0; round <= s.n; round++) {
                    mark(st, MAXR);
                    rc = MPI_Waitsome(s.n, s.r, &out, ind, st);
                    add(" |");
                    add_code("rc", rc);
                    add(" out=%d", out);
                    for (int i = 0; i < out; i++)
                        add(" %d", ind[i]);
                    for (int i = 0; i < s.n; i++)
                        add_status(&st[i], i < out ? s.kinds[ind[i]] : '?');
                    if (out == MPI_UNDEFINED)
                        break;
                }
                break;
            case 8:
                rc = MPI_Testall(s.n, s.r, &flag, MPI_STATUSES_IGNORE);
                break;
            }
            if (call < 6 || call == 8) {
                add_code("rc", rc);
                add(" flag=%d idx=%d out=%d ind=", flag, idx, out);
                for (int i = 0; i < out; i++)
                    add("%d,", ind[i]);
                add(" left=");
                for (int i = 0; i < s.n; i++)
                    add("%d", s.r[i] != MPI_REQUEST_NULL);
                for (int i = 0; i < s.n; i++) {
                    char kind = call == 2 || call == 3 ? (i < out ? s.kinds[ind[i]] : '?')
                              : call == 4 || call == 5 ? (idx >= 0 && i == 0 ? s.kinds[idx] : '?')
                              : s.kinds[i];
                    add_status(&st[i], kind);
                }
            }
        }
        finish(&s);
        snprintf(name, sizeof name, "%s.%s", calls[call], kinds);
        emit(name);
    }
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    native = dlsym(RTLD_DEFAULT, "matchshim_engine") == NULL;
    if (t_size != 2) {
        report_skip("statuses", "needs exactly 2 ranks");
        return t_finish();
    }
    t_single("SELZDTUC0PINX");
    const char *sets[] = {
        "SL",      /* MPI's requests only */
        "EE",      /* the shim's in takeover */
        "SELNE",   /* mixed */
        "LE",      /* complete MPI request before the shim's */
        "0S0",     /* MPI_PROC_NULL */
        "CE",      /* cancelled */
        "ETL",     /* truncated among good ones */
        "UL",      /* truncated, posted late */
        "ZD",      /* zero-size, derived */
        "PIN",     /* persistent: started, inactive, null */
        "NN",      /* nothing active */
        "IN",
        "EXS",     /* one pending */
        "XLXE",
        "XX",
    };
    for (size_t i = 0; i < sizeof sets / sizeof *sets; i++)
        t_multiple(sets[i]);
    report("statuses_complete");
    return t_finish();
}
