/*
 * manager_worker.c - the C twin of examples/manager_worker.rs (run-through chapter
 * §17.6 advice): the manager (rank 0) hands tasks to workers and collects results with
 * MPI_ANY_SOURCE receives under MPI_ERRORS_RETURN. When a worker dies, the pending wildcard
 * receive fails with MPIX_ERR_PROC_FAILED (= MPIX_ERR_RANK_FAIL_STOP); the manager asks which
 * ranks failed (MPIX_Comm_reenable_any_source), re-issues their lost tasks to the survivors
 * and finishes every task.
 *
 *   rtrun -n 6 --kill 2@300ms --kill 4@700ms manager_worker [TASKS]
 *   rtrun -n 6 manager_worker [TASKS] -k 2@20 -k 4@40
 *
 * TASKS defaults to 500. -k RANK@N (repeatable): worker RANK SIGKILLs itself on receiving
 * its N-th task (default 10), so that task is lost and must be re-issued. The manager prints
 * the Rust example's line
 *   manager_worker: D tasks done by S survivors, total T (correct), failed ranks [..], K task(s) re-issued
 * checked against the serial sum (exit 1 when WRONG), and every rank that ends prints
 * `manager_worker: rank R ok` (or `FAILED: why`, exit 1).
 */
#include "rt_ext.h"

#include <stdint.h>

static const char *prog = "manager_worker";

#define TASK 1
#define RESULT 2
#define STOP 3
#define MAX_KILLS 64

/* The work of task t: a little arithmetic and a short nap, so kills land mid-run. */
static uint64_t work(uint64_t t, int nap)
{
    if (nap)
        rt_sleep_ms(10);
    uint64_t s = 0;
    for (uint64_t i = 0; i <= t; i++)
        s += i * i % 1000003;
    return s;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: manager_worker [TASKS] [-k RANK[@N]]...\n"
               "  TASKS       tasks to hand out (default 500)\n"
               "  -k RANK@N   worker RANK SIGKILLs itself on receiving its N-th task (default 10)\n");
}

static void fail(int rank, const char *what, int rc)
{
    char es[MPI_MAX_ERROR_STRING];
    printf("%s: rank %d FAILED: %s: %s\n", prog, rank, what, rt_errstr(rc, es));
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

/* The task queue of the manager: a deque of task numbers. */
struct queue {
    uint64_t *v;
    long head, len, cap;
};

static void push_front(struct queue *q, uint64_t t)
{
    q->head = (q->head - 1 + q->cap) % q->cap;
    q->v[q->head] = t;
    q->len++;
}

static int pop_front(struct queue *q, uint64_t *t)
{
    if (q->len == 0)
        return 0;
    *t = q->v[q->head];
    q->head = (q->head + 1) % q->cap;
    q->len--;
    return 1;
}

struct manager {
    MPI_Comm world;
    struct queue todo;
    int64_t *inflight; /* task of each worker, -1 none */
    char *alive, *stopped;
};

/* Hands the next task to w; a dead w gives its task back. */
static void assign(struct manager *m, int w)
{
    uint64_t t;
    if (pop_front(&m->todo, &t)) {
        int rc = MPI_Send(&t, 1, MPI_UINT64_T, w, TASK, m->world);
        if (rc == MPI_SUCCESS) {
            m->inflight[w] = (int64_t)t;
        } else if (rt_is_fail_stop(rc)) {
            push_front(&m->todo, t);
            m->alive[w] = 0;
        } else {
            fail(0, "send task", rc);
        }
    }
    /* An empty queue leaves w idle, not stopped (the Rust example sends STOP here): a
     * later failure may put a lost task back, and an idle worker can still take it. The
     * STOPs go out once every task is done. */
}

int main(int argc, char **argv)
{
    long tasks = 500;
    long kill_rank[MAX_KILLS], kill_at[MAX_KILLS];
    int nkill = 0, npos = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(argv[i], "-k") == 0 || strcmp(argv[i], "--kill") == 0) {
            if (i + 1 >= argc || nkill >= MAX_KILLS) {
                usage(stderr);
                return 2;
            }
            kill_at[nkill] = 10;
            if (rt_parse_kill(argv[++i], &kill_rank[nkill], &kill_at[nkill]) != 0 || kill_at[nkill] < 1) {
                usage(stderr);
                return 2;
            }
            nkill++;
            continue;
        }
        if (npos == 0 && rt_parse(argv[i], &tasks) == 0) {
            npos++;
            continue;
        }
        usage(stderr);
        return 2;
    }

    MPI_Init(&argc, &argv);
    MPI_Comm world = MPI_COMM_WORLD;
    MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN);
    int me, n;
    MPI_Comm_rank(world, &me);
    MPI_Comm_size(world, &n);
    if (n < 2) {
        fprintf(stderr, "manager_worker needs at least 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    for (int k = 0; k < nkill; k++)
        if (kill_rank[k] == 0 || kill_rank[k] >= n) {
            if (me == 0)
                fprintf(stderr, "%s: -k %ld: not a worker rank (1..%d)\n", prog, kill_rank[k], n - 1);
            MPI_Finalize();
            return 2;
        }
    /* A failure needs MPIX_Comm_reenable_any_source at the manager. */
    if (nkill > 0 && !RT_HAVE(MPIX_Comm_reenable_any_source))
        rt_unsupported(prog, me, "MPIX_Comm_reenable_any_source");

    if (me != 0) {
        long die_at = 0, got = 0;
        for (int k = 0; k < nkill; k++)
            if (kill_rank[k] == me)
                die_at = kill_at[k];
        uint64_t msg[2] = {0, 0};
        for (;;) {
            MPI_Status st;
            int rc = MPI_Recv(msg, 1, MPI_UINT64_T, 0, MPI_ANY_TAG, world, &st);
            if (rt_is_fail_stop(rc))
                break; /* the manager is gone */
            if (rc != MPI_SUCCESS)
                fail(me, "receive task", rc);
            if (st.MPI_TAG == STOP)
                break;
            if (++got == die_at)
                rt_die(); /* with the task: the manager must re-issue it */
            msg[1] = work(msg[0], 1);
            if (MPI_Send(msg, 2, MPI_UINT64_T, 0, RESULT, world) != MPI_SUCCESS)
                break;
        }
        printf("%s: rank %d ok (%ld tasks)\n", prog, me, got);
        fflush(stdout);
        MPI_Finalize();
        return 0;
    }

    struct manager m = {.world = world};
    m.todo.cap = tasks + 1;
    m.todo.v = calloc((size_t)m.todo.cap, sizeof(uint64_t));
    for (long t = 0; t < tasks; t++)
        m.todo.v[m.todo.len++] = (uint64_t)t;
    m.inflight = malloc(sizeof(int64_t) * (size_t)n);
    m.alive = malloc((size_t)n);
    m.stopped = calloc((size_t)n, 1);
    int *failed = malloc(sizeof(int) * (size_t)n), nfailed = 0;
    int *franks = malloc(sizeof(int) * (size_t)n);
    for (int w = 0; w < n; w++) {
        m.inflight[w] = -1;
        m.alive[w] = 1;
    }
    uint64_t total = 0, done = 0, reissued = 0;
    for (int w = 1; w < n; w++)
        assign(&m, w);
    uint64_t msg[2];
    while (done < (uint64_t)tasks) {
        MPI_Status st;
        int rc = MPI_Recv(msg, 2, MPI_UINT64_T, MPI_ANY_SOURCE, RESULT, world, &st);
        if (rc == MPI_SUCCESS) {
            int w = st.MPI_SOURCE;
            if (m.inflight[w] >= 0 && (uint64_t)m.inflight[w] == msg[0]) {
                m.inflight[w] = -1;
                total += msg[1];
                done++;
            }
            assign(&m, w);
        } else if (rt_is_fail_stop(rc)) {
            if (!RT_HAVE(MPIX_Comm_reenable_any_source))
                rt_unsupported(prog, me, "MPIX_Comm_reenable_any_source");
            MPI_Group g;
            rc = MPIX_Comm_reenable_any_source(world, &g);
            if (rc != MPI_SUCCESS)
                fail(me, "MPIX_Comm_reenable_any_source", rc);
            int nf = rt_world_ranks(g, franks, n);
            rt_group_free(&g);
            for (int i = 0; i < nf; i++) {
                int w = franks[i], seen = 0;
                for (int j = 0; j < nfailed; j++)
                    seen |= failed[j] == w;
                if (seen)
                    continue;
                failed[nfailed++] = w;
                m.alive[w] = 0;
                if (m.inflight[w] >= 0) {
                    push_front(&m.todo, (uint64_t)m.inflight[w]);
                    m.inflight[w] = -1;
                    reissued++;
                }
            }
            /* Idle survivors (their task went back to the queue) get work again. */
            for (int w = 1; w < n; w++)
                if (m.alive[w] && m.inflight[w] < 0 && m.todo.len > 0)
                    assign(&m, w);
        } else {
            fail(me, "receive result", rc);
        }
        int any = 0;
        for (int w = 1; w < n; w++)
            any |= m.alive[w];
        if (!any && done < (uint64_t)tasks) {
            fprintf(stderr, "manager_worker: every worker failed\n");
            printf("%s: rank 0 FAILED: every worker failed\n", prog);
            fflush(stdout);
            exit(1);
        }
    }
    for (int w = 1; w < n; w++)
        if (m.alive[w] && !m.stopped[w]) {
            uint64_t z = 0;
            (void)MPI_Send(&z, 1, MPI_UINT64_T, w, STOP, world);
            m.stopped[w] = 1;
        }
    uint64_t expected = 0;
    for (long t = 0; t < tasks; t++)
        expected += work((uint64_t)t, 0);
    for (int i = 1; i < nfailed; i++)
        for (int j = i; j > 0 && failed[j - 1] > failed[j]; j--) {
            int t = failed[j];
            failed[j] = failed[j - 1];
            failed[j - 1] = t;
        }
    char fs[1024];
    rt_fmt_ranks(failed, nfailed, fs, sizeof fs);
    printf("manager_worker: %llu tasks done by %d survivors, total %llu (%s), failed ranks %s, %llu task(s) "
           "re-issued\n",
           (unsigned long long)done, n - 1 - nfailed, (unsigned long long)total,
           total == expected ? "correct" : "WRONG", fs, (unsigned long long)reissued);
    if (total == expected)
        printf("%s: rank 0 ok\n", prog);
    else
        printf("%s: rank 0 FAILED: total %llu, expected %llu\n", prog, (unsigned long long)total,
               (unsigned long long)expected);
    fflush(stdout);
    free(m.todo.v);
    free(m.inflight);
    free(m.alive);
    free(m.stopped);
    free(failed);
    free(franks);
    if (total != expected)
        return 1;
    MPI_Finalize();
    return 0;
}
