/*
 * ft_detect.c - failure-detection latency of an MPI with ULFM (the reference for
 * runthrough's bench/src/bin/ft_detect.rs; driven by bench/ft_detect.sh).
 *
 *   mpirun --with-ft ulfm -np N ft_detect [--mode kill|stop] [-v RANK] [-w MS] [-d S]
 *
 * The same experiment as runthrough's ft_detect: MPI_ERRORS_RETURN on
 * MPI_COMM_WORLD, three warm-up barriers, then every survivor waits in a receive
 * from the victim (default rank N-1) that is never sent. The victim waits -w ms
 * (default 50), takes the time (CLOCK_REALTIME, shared by every rank of one host, as
 * the Rust program does), sends it and its pid to rank 0 and SIGKILLs (--mode kill)
 * or SIGSTOPs (--mode stop) itself. Each survivor records when its receive completes
 * with an error and sends that time to rank 0, which prints one OSU-style row: ranks,
 * the in-band detector's period and timeout as given to mpirun through
 * OMPI_MCA_mpi_ft_detector{,_period,_timeout} ("off" when the detector is not
 * enabled), and min/avg/max detection latency over the survivors.
 *
 * The receive is an MPI_Irecv completed by an MPI_Test loop (Open MPI's blocking
 * receive polls the same way) so that a survivor can give up after -d seconds
 * (default 20): a SIGSTOPped rank is never reported without the in-band detector. When
 * a survivor gives up, rank 0 prints a comment line "# none: ..." instead of a row.
 * In stop mode rank 0 finally SIGKILLs the stopped victim so that the job can end;
 * a survivor still in MPI_Finalize 3 s later is ended by SIGALRM (see the end).
 *
 * Only collectives before the failure; after it, everything goes point-to-point
 * between survivors and rank 0 (collectives on MPI_COMM_WORLD would fail).
 *
 * -x (external, bench/cluster_ft.sh): the failure comes from outside (a whole container
 * node killed or cut off); nobody kills itself. After the warm-up every rank prints
 * "ft_detect: rank R host H ready_us=T", then every rank but the victim waits in a
 * receive from the victim (default N-1) and the victim in one from rank 0. A rank whose
 * receive fails prints "ft_detect: rank R host H seen_us=T class=C" (CLOCK_REALTIME in
 * microseconds, containers share the host's clock), then shrinks MPI_COMM_WORLD
 * (MPIX_Comm_shrink) and does a barrier on the result to show the job goes on:
 * "ft_detect: rank R host H shrink size=S rc=C us=T". Without an error within -d s:
 * "ft_detect: rank R host H none". Each rank prints its own lines (no gathering).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <mpi.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h> /* MPIX_ERR_PROC_FAILED (ULFM) */
#elif defined(MPI_ABI_VERSION) && defined(__has_include)
#if __has_include(<mpi-ext.h>)
/* The MPI-5 standard ABI (mpicc_abi) with runthrough's abi/include on the path: its ULFM
 * names. MPIX_Comm_shrink is weak: other implementations' libmpi_abi.so.1 (MPICH's) lack
 * it, the binary still loads there and -x reports rc=MPI_ERR_UNSUPPORTED_OPERATION. */
#include <mpi-ext.h>
#pragma weak MPIX_Comm_shrink
#define FT_WEAK_SHRINK 1
#endif
#endif
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "osu_common.h"

#define TIME_TAG 1   /* the victim's time and pid, to rank 0 */
#define DATA_TAG 2   /* never sent: the receive the survivors wait in */
#define RESULT_TAG 3 /* a survivor's detection time (0: none), to rank 0 */

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: mpirun --with-ft ulfm -np N ft_detect [--mode kill|stop] [-v RANK] [-w MS] [-d S] [-x] [-h]\n"
               "  --mode kill|stop  the victim SIGKILLs (default) or SIGSTOPs itself\n"
               "  -v RANK           the victim (default N-1; not 0)\n"
               "  -w MS             the victim waits MS ms after the start barrier (default 50)\n"
               "  -d S              a survivor gives up after S s without an error (default 20)\n"
               "  -x                external failure (whole node killed or cut off from outside):\n"
               "                    every rank prints when its receive fails, then shrinks\n"
               "One failure per job: run repetitions as separate jobs (bench/ft_detect.sh).\n");
}

/* A detector setting in ms from OMPI_MCA_<name> (seconds), formatted into buf. */
static const char *setting_ms(const char *name, double dflt_s, char *buf, size_t len)
{
    const char *on = getenv("OMPI_MCA_mpi_ft_detector");
    if (on == NULL || !(strcmp(on, "1") == 0 || strcmp(on, "true") == 0 || strcmp(on, "yes") == 0))
        return "off";
    const char *v = getenv(name);
    double s = v != NULL ? strtod(v, NULL) : dflt_s;
    snprintf(buf, len, "%.2f", s * 1e3);
    return buf;
}

/* The -x mode (see the header): every rank for itself, one line per event. */
static int run_external(int rank, int size, int victim, long deadline_s)
{
    char host[64] = "?";
    gethostname(host, sizeof host - 1);
    printf("ft_detect: rank %d host %s ready_us=%lld\n", rank, host, (long long)(now_ns() / 1000));
    fflush(stdout);
    int peer = rank == victim ? 0 : victim;
    char never;
    MPI_Request req;
    MPI_Irecv(&never, 1, MPI_CHAR, peer, DATA_TAG, MPI_COMM_WORLD, &req);
    int64_t give_up = now_ns() + (int64_t)deadline_s * 1000000000;
    for (;;) {
        int done = 0;
        int rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
            int64_t t = now_ns();
            int cls = 0;
            MPI_Error_class(rc, &cls);
            printf("ft_detect: rank %d host %s seen_us=%lld class=%d\n", rank, host, (long long)(t / 1000), cls);
            fflush(stdout);
            break;
        }
        if (done) {
            fprintf(stderr, "ft_detect: rank %d: a message arrived from rank %d\n", rank, peer);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        if (now_ns() > give_up) {
            printf("ft_detect: rank %d host %s none\n", rank, host);
            fflush(stdout);
            MPI_Cancel(&req);
            MPI_Request_free(&req);
            alarm(3);
            MPI_Finalize();
            return 0;
        }
        struct timespec w = {0, 100000};
        nanosleep(&w, NULL);
    }
    /* Show that the survivors go on: a shrunk world and a barrier on it (bounded). */
    alarm((unsigned)deadline_s);
    int sz = -1, rc = MPI_ERR_OTHER;
#ifdef MPIX_ERR_PROC_FAILED
    MPI_Comm shrunk;
#ifdef FT_WEAK_SHRINK
    if (&MPIX_Comm_shrink == NULL)
        rc = MPI_ERR_UNSUPPORTED_OPERATION;
    else
#endif
        rc = MPIX_Comm_shrink(MPI_COMM_WORLD, &shrunk);
    if (rc == MPI_SUCCESS) {
        MPI_Comm_size(shrunk, &sz);
        rc = MPI_Barrier(shrunk);
    }
#endif
    printf("ft_detect: rank %d host %s shrink size=%d rc=%d us=%lld\n", rank, host, sz, rc, (long long)(now_ns() / 1000));
    fflush(stdout);
    (void)size;
    alarm(3);
    MPI_Finalize();
    return 0;
}

int main(int argc, char **argv)
{
    int stop = 0, external = 0;
    long victim = -1, settle_ms = 50, deadline_s = 20;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(a, "-x") == 0) {
            external = 1;
            continue;
        }
        if (i + 1 >= argc) {
            usage(stderr);
            return 2;
        }
        const char *v = argv[++i];
        if (strcmp(a, "--mode") == 0 && strcmp(v, "kill") == 0)
            stop = 0;
        else if (strcmp(a, "--mode") == 0 && strcmp(v, "stop") == 0)
            stop = 1;
        else if (strcmp(a, "-v") == 0 && parse_size(v, &victim) == 0)
            ;
        else if (strcmp(a, "-w") == 0 && parse_size(v, &settle_ms) == 0)
            ;
        else if (strcmp(a, "-d") == 0 && parse_size(v, &deadline_s) == 0 && deadline_s > 0)
            ;
        else {
            usage(stderr);
            return 2;
        }
    }

    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (victim < 0)
        victim = size - 1;
    if (size < 2 || victim == 0 || victim >= size) {
        if (rank == 0)
            fprintf(stderr, "ft_detect: need at least 2 ranks and a victim in 1..%d\n", size - 1);
        MPI_Finalize();
        return 2;
    }
    /* Warm up every pair's path (and the detector's heartbeats) before the failure. */
    for (int i = 0; i < 3; i++) {
        if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS) {
            fprintf(stderr, "ft_detect: rank %d: start barrier failed\n", rank);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }

    if (external)
        return run_external(rank, size, (int)victim, deadline_s);

    if (rank == victim) {
        /* Keep calling MPI while waiting: without its (optional) thread, Open MPI's
         * in-band detector emits heartbeats only from inside MPI calls. */
        int64_t until = now_ns() + (int64_t)settle_ms * 1000000;
        while (now_ns() < until) {
            int flag;
            MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
            struct timespec w = {0, 100000};
            nanosleep(&w, NULL);
        }
        int64_t msg[2] = {now_ns(), (int64_t)getpid()};
        MPI_Send(msg, 2, MPI_INT64_T, 0, TIME_TAG, MPI_COMM_WORLD);
        /* SIGKILL ends us here; SIGSTOP freezes us here until rank 0's SIGKILL. */
        kill(getpid(), stop ? SIGSTOP : SIGKILL);
        for (;;)
            sleep(1);
    }

    int64_t failed_at[2] = {0, 0};
    if (rank == 0 && MPI_Recv(failed_at, 2, MPI_INT64_T, victim, TIME_TAG, MPI_COMM_WORLD,
                              MPI_STATUS_IGNORE) != MPI_SUCCESS) {
        fprintf(stderr, "ft_detect: receiving the failure time failed\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    char never;
    MPI_Request req;
    MPI_Irecv(&never, 1, MPI_CHAR, (int)victim, DATA_TAG, MPI_COMM_WORLD, &req);
    int64_t give_up = now_ns() + (int64_t)deadline_s * 1000000000;
    int64_t detected = 0;
    int err_class = MPI_SUCCESS;
    for (;;) {
        int done = 0;
        MPI_Status st;
        int rc = MPI_Test(&req, &done, &st);
        if (rc != MPI_SUCCESS) {
            detected = now_ns();
            MPI_Error_class(rc, &err_class);
            break;
        }
        if (done) {
            fprintf(stderr, "ft_detect: rank %d: a message arrived from the victim\n", rank);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        if (now_ns() > give_up)
            break;
    }
#ifdef MPIX_ERR_PROC_FAILED
    if (detected != 0 && err_class != MPIX_ERR_PROC_FAILED) {
        char s[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(err_class, s, &len);
        fprintf(stderr, "ft_detect: rank %d: receive failed with %s, not MPIX_ERR_PROC_FAILED\n", rank, s);
    }
#endif

    if (rank != 0) {
        MPI_Send(&detected, 1, MPI_INT64_T, 0, RESULT_TAG, MPI_COMM_WORLD);
    } else {
        double min = 0, max = 0, sum = 0;
        int got = 0, survivors = 0;
        for (int r = 0; r < size; r++) {
            if (r == victim)
                continue;
            int64_t t = detected;
            if (r != 0 && MPI_Recv(&t, 1, MPI_INT64_T, r, RESULT_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE) !=
                              MPI_SUCCESS) {
                fprintf(stderr, "ft_detect: result of rank %d failed\n", r);
                t = 0;
            }
            survivors++;
            if (t == 0)
                continue;
            double ms = (double)(t - failed_at[0]) / 1e6;
            if (got == 0 || ms < min)
                min = ms;
            if (got == 0 || ms > max)
                max = ms;
            sum += ms;
            got++;
        }
        if (stop)
            kill((pid_t)failed_at[1], SIGKILL);
        char pb[32], tb[32];
        printf("# OSU MPI-style Failure Detection Test (Open MPI ULFM), mode %s\n", stop ? "stop" : "kill");
        printf("# Ranks  Period(ms)  Timeout(ms)  Detect-min(ms)  Detect-avg(ms)  Detect-max(ms)\n");
        const char *p = setting_ms("OMPI_MCA_mpi_ft_detector_period", 3.0, pb, sizeof pb);
        const char *to = setting_ms("OMPI_MCA_mpi_ft_detector_timeout", 10.0, tb, sizeof tb);
        if (got == survivors)
            printf("%-7d%12s%13s%16.2f%16.2f%16.2f\n", size, p, to, min, sum / got, max);
        else
            printf("# none: %d of %d survivors saw no error within %ld s (ranks %d, period %s, timeout %s)\n",
                   survivors - got, survivors, deadline_s, size, p, to);
        fflush(stdout);
    }
    if (detected == 0) {
        /* The request is still pending on a peer that never answered. */
        MPI_Cancel(&req);
        MPI_Request_free(&req);
    }
    /* Open MPI 5.0.11 sometimes hangs in MPI_Finalize after a failure (every survivor
     * sleeping in ompi_mpi_finalize). The result is printed by now: give finalize a
     * few seconds, then SIGALRM ends this survivor (and mpirun the job). */
    alarm(3);
    MPI_Finalize();
    return 0;
}
