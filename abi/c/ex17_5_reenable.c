/*
 * ex17_5_reenable.c - run-through Example 17.5 in C (the C twin of drivers/examples/reenable_threads.rs):
 * several threads of rank 0 receive with MPI_ANY_SOURCE while the workers stream numbered
 * messages and some workers die. A thread whose wildcard receive fails with
 * MPIX_ERR_RANK_FAIL_STOP re-enables wildcards (MPIX_Comm_reenable_any_source) under the
 * writer lock, unless another thread already did for the same failures (the example's
 * recognize_cnt protocol, with a pthread reader-writer lock). Needs MPI_THREAD_MULTIPLE.
 *
 *   rtrun -n 6 --kill 2@150ms --kill 4@300ms ex17_5_reenable [THREADS] [MSGS]
 *   rtrun -n 6 ex17_5_reenable [THREADS] [MSGS] -k 2@50 -k 4@100
 *
 * THREADS (default 3) receiving threads, MSGS (default 200) messages per worker, 2 ms apart.
 * -k RANK@N (repeatable): worker RANK SIGKILLs itself after sending N messages (default
 * MSGS/3). Checks at rank 0: every message of a surviving worker arrives exactly once, a
 * dead worker's messages at most once each, wildcards were re-enabled at most once per
 * failure (and at least once when there was one), and with -k the failed ranks are
 * exactly the -k ranks. Prints the Rust example's line
 *   reenable_threads: ok threads=T received=N failed=[..] reenables=R
 * and every rank that ends prints `ex17_5_reenable: rank R ok` or `... FAILED: why` (exit 3).
 */
#include "rt_ext.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>

static const char *prog = "ex17_5_reenable";

#define MAX_KILLS 64

static MPI_Comm world;
static int nranks, nthreads;
static long msgs;

/* The example's globals: recognize_cnt and the failed group (as world ranks). */
static pthread_rwlock_t recognized = PTHREAD_RWLOCK_INITIALIZER;
static unsigned long recognize_cnt;
static int *failed_ranks, nfailed;
static int reenables;

/* The messages received so far, one flag per (worker, index). */
static pthread_mutex_t got_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned char *got;
static long *got_per_worker, received;

static pthread_mutex_t err_lock = PTHREAD_MUTEX_INITIALIZER;
static char thread_err[256];

static void set_err(const char *fmt, int t, const char *what)
{
    pthread_mutex_lock(&err_lock);
    if (thread_err[0] == '\0')
        snprintf(thread_err, sizeof thread_err, fmt, t, what);
    pthread_mutex_unlock(&err_lock);
}

/* Whether every worker has either failed or delivered all its messages (caller holds the
 * reader or writer lock: failed_ranks is stable). */
static int all_done(void)
{
    int done = 1;
    pthread_mutex_lock(&got_lock);
    for (int w = 1; w < nranks && done; w++) {
        int failed = 0;
        for (int i = 0; i < nfailed; i++)
            failed |= failed_ranks[i] == w;
        done = failed || got_per_worker[w] == msgs;
    }
    pthread_mutex_unlock(&got_lock);
    return done;
}

/* Records message m; 0 when it is new, -1 for a duplicate or a bad message. */
static int record(const uint64_t m[2])
{
    int rc = 0;
    pthread_mutex_lock(&got_lock);
    if (m[0] < 1 || m[0] >= (uint64_t)nranks || m[1] >= (uint64_t)msgs) {
        rc = -1;
    } else {
        unsigned char *f = &got[m[0] * (uint64_t)msgs + m[1]];
        if (*f)
            rc = -1;
        else {
            *f = 1;
            got_per_worker[m[0]]++;
            received++;
        }
    }
    pthread_mutex_unlock(&got_lock);
    return rc;
}

static void *receiver(void *arg)
{
    int t = (int)(intptr_t)arg;
    char es[MPI_MAX_ERROR_STRING];
    unsigned long my_cnt = (unsigned long)-1; /* forces a check in the first loop */
    for (;;) {
        pthread_rwlock_rdlock(&recognized);
        if (my_cnt != recognize_cnt)
            my_cnt = recognize_cnt; /* new failures: failed_ranks tells all_done() */
        if (all_done()) {
            pthread_rwlock_unlock(&recognized);
            return NULL;
        }
        uint64_t m[2] = {0, 0};
        MPI_Request req;
        MPI_Status st;
        int flag = 0, outcome; /* 1 received, 0 nothing (all done), -1 error rc */
        int rc = MPI_Irecv(m, 2, MPI_UINT64_T, MPI_ANY_SOURCE, 1, world, &req);
        if (rc != MPI_SUCCESS) {
            outcome = -1;
        } else {
            /* A receive that also gives up once every message is in: test, then cancel. */
            for (;;) {
                rc = MPI_Test(&req, &flag, &st);
                if (rc != MPI_SUCCESS) {
                    outcome = -1;
                    break;
                }
                if (flag) {
                    outcome = 1;
                    break;
                }
                if (all_done()) {
                    MPI_Cancel(&req);
                    rc = MPI_Wait(&req, &st);
                    int cancelled = 0;
                    if (rc == MPI_SUCCESS)
                        MPI_Test_cancelled(&st, &cancelled);
                    outcome = rc != MPI_SUCCESS ? -1 : cancelled ? 0 : 1;
                    break;
                }
                sched_yield();
            }
        }
        if (outcome == 0) {
            pthread_rwlock_unlock(&recognized);
            return NULL;
        }
        if (outcome == 1) {
            pthread_rwlock_unlock(&recognized);
            if (record(m) != 0) {
                char what[64];
                snprintf(what, sizeof what, "(%llu, %llu)", (unsigned long long)m[0], (unsigned long long)m[1]);
                set_err("thread %d: duplicate or bad message %s", t, what);
                return NULL;
            }
            continue;
        }
        pthread_rwlock_unlock(&recognized);
        if (!rt_is_fail_stop(rc)) {
            set_err("thread %d: receive failed: %s", t, rt_errstr(rc, es));
            return NULL;
        }
        /* Failure case. */
        pthread_rwlock_wrlock(&recognized);
        if (my_cnt != recognize_cnt) {
            pthread_rwlock_unlock(&recognized); /* another thread already re-enabled wildcards */
            continue;
        }
        if (!RT_HAVE(MPIX_Comm_reenable_any_source)) {
            pthread_rwlock_unlock(&recognized);
            set_err("thread %d: %s missing on this MPI", t, "MPIX_Comm_reenable_any_source");
            return NULL;
        }
        MPI_Group g;
        rc = MPIX_Comm_reenable_any_source(world, &g);
        if (rc != MPI_SUCCESS) {
            pthread_rwlock_unlock(&recognized);
            set_err("thread %d: MPIX_Comm_reenable_any_source: %s", t, rt_errstr(rc, es));
            return NULL;
        }
        nfailed = rt_world_ranks(g, failed_ranks, nranks);
        if (nfailed < 0)
            nfailed = 0;
        rt_group_free(&g);
        reenables++;
        recognize_cnt++;
        pthread_rwlock_unlock(&recognized);
    }
}

static void usage(FILE *f)
{
    fprintf(f, "usage: ex17_5_reenable [THREADS] [MSGS] [-k RANK[@N]]...\n"
               "  THREADS     receiving threads at rank 0 (default 3)\n"
               "  MSGS        messages per worker (default 200)\n"
               "  -k RANK@N   worker RANK SIGKILLs itself after N messages (default MSGS/3)\n");
}

int main(int argc, char **argv)
{
    long threads = 3;
    long kill_rank[MAX_KILLS], kill_at[MAX_KILLS];
    int nkill = 0, npos = 0;
    msgs = 200;
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
            kill_at[nkill] = -1;
            if (rt_parse_kill(argv[++i], &kill_rank[nkill], &kill_at[nkill]) != 0) {
                usage(stderr);
                return 2;
            }
            nkill++;
            continue;
        }
        long v;
        if (rt_parse(argv[i], &v) == 0 && v > 0 && npos < 2) {
            if (npos++ == 0)
                threads = v;
            else
                msgs = v;
            continue;
        }
        usage(stderr);
        return 2;
    }
    for (int k = 0; k < nkill; k++)
        if (kill_at[k] < 0)
            kill_at[k] = msgs / 3;
    nthreads = (int)threads;

    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    world = MPI_COMM_WORLD;
    MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN);
    int me;
    MPI_Comm_rank(world, &me);
    MPI_Comm_size(world, &nranks);
    if (nranks < 2) {
        fprintf(stderr, "%s needs at least 2 ranks\n", prog);
        MPI_Finalize();
        return 2;
    }
    for (int k = 0; k < nkill; k++)
        if (kill_rank[k] == 0 || kill_rank[k] >= nranks) {
            if (me == 0)
                fprintf(stderr, "%s: -k %ld: not a worker rank (1..%d)\n", prog, kill_rank[k], nranks - 1);
            MPI_Finalize();
            return 2;
        }
    if (provided < MPI_THREAD_MULTIPLE && nthreads > 1) {
        printf("%s: rank %d FAILED: MPI_THREAD_MULTIPLE not provided (%d)\n", prog, me, provided);
        fflush(stdout);
        MPI_Finalize();
        return 3;
    }
    if (nkill > 0 && !RT_HAVE(MPIX_Comm_reenable_any_source))
        rt_unsupported(prog, me, "MPIX_Comm_reenable_any_source");

    char es[MPI_MAX_ERROR_STRING];
    if (me != 0) {
        long die_at = -1;
        for (int k = 0; k < nkill; k++)
            if (kill_rank[k] == me)
                die_at = kill_at[k];
        for (long i = 0; i < msgs; i++) {
            if (i == die_at)
                rt_die();
            uint64_t m[2] = {(uint64_t)me, (uint64_t)i};
            int rc = MPI_Send(m, 2, MPI_UINT64_T, 0, 1, world);
            if (rc != MPI_SUCCESS) {
                printf("%s: rank %d FAILED: send %ld: %s\n", prog, me, i, rt_errstr(rc, es));
                fflush(stdout);
                MPI_Finalize();
                return 3;
            }
            rt_sleep_ms(2);
        }
        printf("%s: rank %d ok (sent %ld)\n", prog, me, msgs);
        fflush(stdout);
        MPI_Finalize();
        return 0;
    }

    failed_ranks = calloc((size_t)nranks, sizeof(int));
    got = calloc((size_t)nranks * (size_t)msgs, 1);
    got_per_worker = calloc((size_t)nranks, sizeof(long));
    pthread_t *tids = calloc((size_t)nthreads, sizeof(pthread_t));
    for (int t = 0; t < nthreads; t++)
        if (pthread_create(&tids[t], NULL, receiver, (void *)(intptr_t)t) != 0) {
            printf("%s: rank 0 FAILED: pthread_create\n", prog);
            fflush(stdout);
            MPI_Abort(world, 3);
        }
    for (int t = 0; t < nthreads; t++)
        pthread_join(tids[t], NULL);

    char why[1024] = "";
    char fs[512];
    rt_fmt_ranks(failed_ranks, nfailed, fs, sizeof fs);
    if (thread_err[0] != '\0')
        snprintf(why, sizeof why, "receiving %s", thread_err);
    else if (reenables > nfailed || (reenables == 0 && nfailed != 0))
        snprintf(why, sizeof why, "%d re-enables for failures %s", reenables, fs);
    else if (!all_done())
        snprintf(why, sizeof why, "messages of live workers missing (%ld received)", received);
    else if (nkill > 0) {
        int ok = 1, distinct = 0;
        for (int k = 0; k < nkill; k++) {
            int dup = 0, in = 0;
            for (int j = 0; j < k; j++)
                dup |= kill_rank[j] == kill_rank[k];
            distinct += !dup;
            for (int i = 0; i < nfailed; i++)
                in |= failed_ranks[i] == kill_rank[k];
            ok &= in;
        }
        if (!ok || distinct != nfailed)
            snprintf(why, sizeof why, "failed ranks %s differ from the -k ranks", fs);
    } /* without -k, failures from outside (rtrun --kill) are taken as they come */
    if (why[0] == '\0')
        printf("reenable_threads: ok threads=%d received=%ld failed=%s reenables=%d\n", nthreads, received, fs,
               reenables);
    if (why[0] == '\0')
        printf("%s: rank 0 ok\n", prog);
    else
        printf("%s: rank 0 FAILED: %s\n", prog, why);
    fflush(stdout);
    free(tids);
    if (why[0] != '\0')
        return 3;
    MPI_Finalize();
    return 0;
}
