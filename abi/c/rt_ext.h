/*
 * rt_ext.h - shared helpers of the abi/c programs (run-through chapter examples 17.5-17.8 and the
 * manager/worker) built once with MPICH's `mpicc_abi -I abi/include` and run on any
 * libmpi_abi.so.1.
 *
 * runthrough's extension calls (abi/include/mpi-ext.h) are declared weak here: another
 * implementation's libmpi_abi.so.1 (MPICH's) does not define them, and a weak undefined
 * symbol links and loads there with the value NULL. A program tests RT_HAVE(fn) before
 * calling one and reports "unsupported on this MPI" (exit 77) when it is missing and the
 * run needs it (a failure was asked for); failure-free runs of 17.6-17.8 use an empty
 * failed group in place of MPIX_Comm_validate so their data checks still run there.
 */
#ifndef RT_EXT_H
#define RT_EXT_H

#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#pragma weak MPIX_Comm_revoke
#pragma weak MPIX_Comm_is_revoked
#pragma weak MPIX_Comm_shrink
#pragma weak MPIX_Comm_agree
#pragma weak MPIX_Comm_iagree
#pragma weak MPIX_Comm_failure_ack
#pragma weak MPIX_Comm_failure_get_acked
#pragma weak MPIX_Comm_ack_failed
#pragma weak MPIX_Comm_get_failed
#pragma weak MPIX_Comm_validate
#pragma weak MPIX_Icomm_validate
#pragma weak MPIX_Comm_group_failed
#pragma weak MPIX_Comm_reenable_any_source
#pragma weak MPIX_Comm_collectives_enabled

/* Whether this process's libmpi_abi.so.1 defines the extension function fn. */
#define RT_HAVE(fn) (&(fn) != NULL)

/* Exit code of a run that needs an extension the loaded MPI does not have. */
#define RT_EXIT_UNSUPPORTED 77

/* SIGKILLs this process (the fault injection of every program). */
static inline void rt_die(void)
{
    fflush(stdout);
    fflush(stderr);
    kill(getpid(), SIGKILL);
    for (;;)
        pause();
}

static inline void rt_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The error class of a return code (MPI_SUCCESS for MPI_SUCCESS). */
static inline int rt_class(int rc)
{
    int c = rc;
    if (rc != MPI_SUCCESS && MPI_Error_class(rc, &c) != MPI_SUCCESS)
        c = rc;
    return c;
}

/* Whether rc reports a failed process (MPIX_ERR_PROC_FAILED == MPIX_ERR_RANK_FAIL_STOP). */
static inline int rt_is_fail_stop(int rc)
{
    return rc != MPI_SUCCESS && rt_class(rc) == MPIX_ERR_RANK_FAIL_STOP;
}

/* The error string of rc, in buf. */
static inline const char *rt_errstr(int rc, char *buf)
{
    int len = 0;
    buf[0] = '\0';
    if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS)
        snprintf(buf, MPI_MAX_ERROR_STRING, "error %d", rc);
    return buf;
}

/* Prints "<prog>: rank R unsupported on this MPI: <fn> missing", finalizes, exits 77. */
static inline void rt_unsupported(const char *prog, int rank, const char *fn)
{
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    v[0] = '\0';
    MPI_Get_library_version(v, &len);
    char *nl = strchr(v, '\n');
    if (nl != NULL)
        *nl = '\0';
    printf("%s: rank %d unsupported on this MPI: %s missing (%.60s)\n", prog, rank, fn, v);
    fflush(stdout);
    MPI_Finalize();
    exit(RT_EXIT_UNSUPPORTED);
}

/* The MPI_COMM_WORLD ranks of group g (of any communicator), ascending, into out[max];
 * returns how many (-1 on an MPI error). */
static inline int rt_world_ranks(MPI_Group g, int *out, int max)
{
    int n = 0;
    if (g == MPI_GROUP_NULL || g == MPI_GROUP_EMPTY)
        return 0;
    if (MPI_Group_size(g, &n) != MPI_SUCCESS)
        return -1;
    if (n > max)
        n = max;
    MPI_Group world;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int *in = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    for (int i = 0; i < n; i++)
        in[i] = i;
    int rc = MPI_Group_translate_ranks(g, n, in, world, out);
    free(in);
    MPI_Group_free(&world);
    if (rc != MPI_SUCCESS)
        return -1;
    for (int i = 1; i < n; i++) /* insertion sort: a handful of ranks */
        for (int j = i; j > 0 && out[j - 1] > out[j]; j--) {
            int t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return n;
}

/* "[2, 4]" (the Rust examples' `{:?}` of a Vec<usize>) into buf[len]. */
static inline const char *rt_fmt_ranks(const int *r, int n, char *buf, size_t len)
{
    size_t o = 0;
    o += (size_t)snprintf(buf + o, len - o, "[");
    for (int i = 0; i < n && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%d", i ? ", " : "", r[i]);
    if (o < len)
        snprintf(buf + o, len - o, "]");
    return buf;
}

/* Frees a group unless it is a predefined one. */
static inline void rt_group_free(MPI_Group *g)
{
    if (*g != MPI_GROUP_NULL && *g != MPI_GROUP_EMPTY)
        MPI_Group_free(g);
    *g = MPI_GROUP_EMPTY;
}

/* MPIX_Comm_validate, or (when the loaded MPI lacks it) the empty group: only for runs
 * without a failure, which the caller guarantees (rt_need_ext before any kill). */
static inline int rt_validate(MPI_Comm comm, MPI_Group *failed)
{
    if (RT_HAVE(MPIX_Comm_validate))
        return MPIX_Comm_validate(comm, failed);
    *failed = MPI_GROUP_EMPTY;
    return MPI_SUCCESS;
}

/* Parses a non-negative decimal integer; 0 on success, -1 otherwise. */
static inline int rt_parse(const char *s, long *out)
{
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (s[0] == '\0' || *end != '\0' || v < 0)
        return -1;
    *out = v;
    return 0;
}

/* Parses "RANK" or "RANK@N" (N: the program's kill point); 0 on success. */
static inline int rt_parse_kill(const char *s, long *rank, long *at)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%s", s);
    char *p = strchr(buf, '@');
    if (p != NULL) {
        *p = '\0';
        if (rt_parse(p + 1, at) != 0)
            return -1;
    }
    return rt_parse(buf, rank);
}

#endif
