/* ranks: 2 3 */
/* Wait/Test families over request arrays mixing a send, a receive still
 * pending, a receive already complete and MPI_REQUEST_NULL. */
#include "common.h"

#define N 16
#define NR 4                    /* request slots */

enum { SEND, PENDING, NUL, DONE };

static int late;                /* sender of the late message (1, or 2 if it exists) */

struct scene {
    int a[N], b[N], d[N];
    MPI_Request r[NR];
    int tag;
};

static void expect_empty(MPI_Status *st, const char *what)
{
    int c = -1;
    MPI_Get_count(st, MPI_INT, &c);
    EXPECT(st->MPI_SOURCE == MPI_ANY_SOURCE && st->MPI_TAG == MPI_ANY_TAG && c == 0,
           "%s: empty status expected, got source %d tag %d count %d", what,
           st->MPI_SOURCE, st->MPI_TAG, c);
}

/* Rank 0 sets up the scene; ranks 1 and `late` play their part: rank 1
 * sends d at once and receives a, `late` sends b 20 ms after a arrived. */
static void setup(struct scene *s, int tag)
{
    s->tag = tag;
    if (t_rank == 0) {
        int flag = 0;
        CHK(MPI_Irecv(s->d, N, MPI_INT, 1, tag + 2, MPI_COMM_WORLD, &s->r[DONE]));
        for (double t0 = MPI_Wtime(); !flag && MPI_Wtime() - t0 < 10;)
            CHK(MPI_Request_get_status(s->r[DONE], &flag, MPI_STATUS_IGNORE));
        EXPECT(flag, "receive never completed");
        EXPECT(s->r[DONE] != MPI_REQUEST_NULL, "Request_get_status freed the request");
        fill(s->a, N, 0, tag, 0);
        CHK(MPI_Isend(s->a, N, MPI_INT, 1, tag, MPI_COMM_WORLD, &s->r[SEND]));
        CHK(MPI_Irecv(s->b, N, MPI_INT, MPI_ANY_SOURCE, tag + 1, MPI_COMM_WORLD, &s->r[PENDING]));
        s->r[NUL] = MPI_REQUEST_NULL;
    } else {
        MPI_Status st;
        if (t_rank == 1) {
            fill(s->d, N, 1, tag + 2, 0);
            CHK(MPI_Send(s->d, N, MPI_INT, 0, tag + 2, MPI_COMM_WORLD));
            CHK(MPI_Recv(s->a, N, MPI_INT, 0, tag, MPI_COMM_WORLD, &st));
            EXPECT_MSG(s->a, N, 0, tag, 0, st);
        }
        if (t_rank == late) {
            if (late != 1) /* learn that a arrived at rank 1 */
                CHK(MPI_Recv(NULL, 0, MPI_INT, 1, tag + 3, MPI_COMM_WORLD, &st));
            spin_test(NULL, 0.02);
            fill(s->b, N, late, tag + 1, 0);
            CHK(MPI_Send(s->b, N, MPI_INT, 0, tag + 1, MPI_COMM_WORLD));
        } else if (t_rank == 1) {
            CHK(MPI_Send(NULL, 0, MPI_INT, late, tag + 3, MPI_COMM_WORLD));
        }
    }
}

/* Checks the statuses of the completed slots (status array indexed by slot). */
static void check_slot(struct scene *s, int slot, MPI_Status *st)
{
    if (slot == PENDING)
        EXPECT_MSG(s->b, N, late, s->tag + 1, 0, *st);
    else if (slot == DONE)
        EXPECT_MSG(s->d, N, 1, s->tag + 2, 0, *st);
}

static void all_null(struct scene *s, const char *fn)
{
    for (int i = 0; i < NR; i++)
        EXPECT(s->r[i] == MPI_REQUEST_NULL, "%s left request %d active", fn, i);
}

static void t_waitall(void)
{
    struct scene s;
    setup(&s, 10);
    if (t_rank == 0) {
        MPI_Status st[NR];
        CHK(MPI_Waitall(NR, s.r, st));
        check_slot(&s, PENDING, &st[PENDING]);
        check_slot(&s, DONE, &st[DONE]);
        expect_empty(&st[NUL], "Waitall, REQUEST_NULL entry");
        all_null(&s, "Waitall");
    }
    setup(&s, 20);
    if (t_rank == 0) {
        CHK(MPI_Waitall(NR, s.r, MPI_STATUSES_IGNORE));
        EXPECT(bad_at(s.b, N, late, 21, 0) < 0 && bad_at(s.d, N, 1, 22, 0) < 0, "payload");
        all_null(&s, "Waitall");
        CHK(MPI_Waitall(NR, s.r, MPI_STATUSES_IGNORE));   /* all null: returns */
        CHK(MPI_Waitall(0, NULL, MPI_STATUSES_IGNORE));
    }
    report("waitall");
}

static void t_waitany(void)
{
    struct scene s;
    setup(&s, 30);
    if (t_rank == 0) {
        int seen[NR] = {0};
        for (int k = 0; k < 3; k++) {
            int idx = -1;
            MPI_Status st;
            CHK(MPI_Waitany(NR, s.r, &idx, &st));
            if (idx < 0 || idx >= NR || idx == NUL) {
                FAILF("Waitany index %d", idx);
                break;
            }
            seen[idx]++;
            check_slot(&s, idx, &st);
            EXPECT(s.r[idx] == MPI_REQUEST_NULL, "Waitany did not free request %d", idx);
        }
        EXPECT(seen[SEND] == 1 && seen[PENDING] == 1 && seen[DONE] == 1,
               "Waitany returned send %d, pending %d, done %d times", seen[SEND],
               seen[PENDING], seen[DONE]);
        int idx = -1;
        MPI_Status st;
        CHK(MPI_Waitany(NR, s.r, &idx, &st));
        EXPECT(idx == MPI_UNDEFINED, "Waitany over null requests: index %d", idx);
        expect_empty(&st, "Waitany over null requests");
    }
    report("waitany");
}

static void t_waitsome(void)
{
    struct scene s;
    setup(&s, 40);
    if (t_rank == 0) {
        int seen[NR] = {0}, total = 0, rounds = 0;
        while (total < 3 && rounds++ < 10) {
            int out = -1, idx[NR];
            MPI_Status st[NR];
            CHK(MPI_Waitsome(NR, s.r, &out, idx, st));
            if (out < 1 || out > NR) {
                FAILF("Waitsome outcount %d", out);
                break;
            }
            for (int i = 0; i < out; i++) {
                if (idx[i] < 0 || idx[i] >= NR || idx[i] == NUL) {
                    FAILF("Waitsome index %d", idx[i]);
                    continue;
                }
                seen[idx[i]]++;
                total++;
                check_slot(&s, idx[i], &st[i]);
            }
        }
        EXPECT(seen[SEND] == 1 && seen[PENDING] == 1 && seen[DONE] == 1,
               "Waitsome returned send %d, pending %d, done %d times", seen[SEND],
               seen[PENDING], seen[DONE]);
        all_null(&s, "Waitsome");
        int out = -1, idx[NR];
        CHK(MPI_Waitsome(NR, s.r, &out, idx, MPI_STATUSES_IGNORE));
        EXPECT(out == MPI_UNDEFINED, "Waitsome over null requests: outcount %d", out);
    }
    report("waitsome");
}

static void t_test(void)
{
    struct scene s;
    setup(&s, 50);
    if (t_rank == 0) {
        int left = 3;
        MPI_Status st;
        int flag = 0;
        CHK(MPI_Test(&s.r[NUL], &flag, &st));
        EXPECT(flag, "Test on REQUEST_NULL: flag 0");
        expect_empty(&st, "Test on REQUEST_NULL");
        for (double t0 = MPI_Wtime(); left > 0 && MPI_Wtime() - t0 < 10;)
            for (int i = 0; i < NR; i++) {
                if (i == NUL || s.r[i] == MPI_REQUEST_NULL)
                    continue;
                CHK(MPI_Test(&s.r[i], &flag, &st));
                if (flag) {
                    left--;
                    check_slot(&s, i, &st);
                    EXPECT(s.r[i] == MPI_REQUEST_NULL, "Test did not free request %d", i);
                } else {
                    EXPECT(i != DONE, "Test: completed receive reported incomplete");
                }
            }
        EXPECT(left == 0, "%d requests never completed", left);
    }
    report("test");
}

static void t_testall(void)
{
    struct scene s;
    setup(&s, 60);
    if (t_rank == 0) {
        MPI_Status st[NR];
        int flag = 0;
        for (double t0 = MPI_Wtime(); !flag && MPI_Wtime() - t0 < 10;) {
            CHK(MPI_Testall(NR, s.r, &flag, st));
            /* an unsuccessful Testall leaves every request alone */
            if (!flag)
                EXPECT(s.r[DONE] != MPI_REQUEST_NULL && s.r[SEND] != MPI_REQUEST_NULL,
                       "Testall with flag 0 freed requests");
        }
        EXPECT(flag, "Testall never succeeded");
        check_slot(&s, PENDING, &st[PENDING]);
        check_slot(&s, DONE, &st[DONE]);
        expect_empty(&st[NUL], "Testall, REQUEST_NULL entry");
        all_null(&s, "Testall");
    }
    report("testall");
}

static void t_testany(void)
{
    struct scene s;
    setup(&s, 70);
    if (t_rank == 0) {
        int seen[NR] = {0}, got = 0;
        for (double t0 = MPI_Wtime(); got < 3 && MPI_Wtime() - t0 < 10;) {
            int idx = -1, flag = 0;
            MPI_Status st;
            CHK(MPI_Testany(NR, s.r, &idx, &flag, &st));
            if (!flag) {
                EXPECT(idx == MPI_UNDEFINED, "Testany flag 0 with index %d", idx);
                continue;
            }
            if (idx < 0 || idx >= NR || idx == NUL) {
                FAILF("Testany index %d", idx);
                break;
            }
            seen[idx]++;
            got++;
            check_slot(&s, idx, &st);
        }
        EXPECT(seen[SEND] == 1 && seen[PENDING] == 1 && seen[DONE] == 1,
               "Testany returned send %d, pending %d, done %d times", seen[SEND],
               seen[PENDING], seen[DONE]);
        int idx = -1, flag = 0;
        MPI_Status st;
        CHK(MPI_Testany(NR, s.r, &idx, &flag, &st));
        EXPECT(flag && idx == MPI_UNDEFINED, "Testany over null requests: flag %d index %d",
               flag, idx);
        expect_empty(&st, "Testany over null requests");
    }
    report("testany");
}

static void t_testsome(void)
{
    struct scene s;
    setup(&s, 80);
    if (t_rank == 0) {
        int seen[NR] = {0}, total = 0;
        for (double t0 = MPI_Wtime(); total < 3 && MPI_Wtime() - t0 < 10;) {
            int out = -1, idx[NR];
            MPI_Status st[NR];
            CHK(MPI_Testsome(NR, s.r, &out, idx, st));
            if (out < 0 || out > NR) {
                FAILF("Testsome outcount %d", out);
                break;
            }
            for (int i = 0; i < out; i++) {
                if (idx[i] < 0 || idx[i] >= NR || idx[i] == NUL) {
                    FAILF("Testsome index %d", idx[i]);
                    continue;
                }
                seen[idx[i]]++;
                total++;
                check_slot(&s, idx[i], &st[i]);
            }
        }
        EXPECT(seen[SEND] == 1 && seen[PENDING] == 1 && seen[DONE] == 1,
               "Testsome returned send %d, pending %d, done %d times", seen[SEND],
               seen[PENDING], seen[DONE]);
        int out = -1, idx[NR];
        CHK(MPI_Testsome(NR, s.r, &out, idx, MPI_STATUSES_IGNORE));
        EXPECT(out == MPI_UNDEFINED, "Testsome over null requests: outcount %d", out);
    }
    report("testsome");
}

/* Request_get_status reports without freeing; the later Wait still works. */
static void t_get_status(void)
{
    struct scene s;
    setup(&s, 90);
    if (t_rank == 0) {
        MPI_Status st;
        int flag = 0;
        CHK(MPI_Request_get_status(s.r[DONE], &flag, &st));
        EXPECT(flag, "complete receive: flag 0");
        check_slot(&s, DONE, &st);
        CHK(MPI_Request_get_status(MPI_REQUEST_NULL, &flag, &st));
        EXPECT(flag, "REQUEST_NULL: flag 0");
        expect_empty(&st, "Request_get_status(REQUEST_NULL)");
        flag = 0;
        for (double t0 = MPI_Wtime(); !flag && MPI_Wtime() - t0 < 10;)
            CHK(MPI_Request_get_status(s.r[PENDING], &flag, &st));
        EXPECT(flag, "pending receive never completed");
        check_slot(&s, PENDING, &st);
        EXPECT(s.r[PENDING] != MPI_REQUEST_NULL, "Request_get_status freed the request");
        MPI_Status sts[NR];
        CHK(MPI_Waitall(NR, s.r, sts));
        check_slot(&s, PENDING, &sts[PENDING]);
        check_slot(&s, DONE, &sts[DONE]);
    }
    report("request_get_status");
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv);
    late = t_size > 2 ? 2 : 1;
    t_waitall();
    t_waitany();
    t_waitsome();
    t_test();
    t_testall();
    t_testany();
    t_testsome();
    t_get_status();
    return t_finish();
}
