/*
 * Shared helpers of the ULFM reference programs ft_propagate.c, ft_revoke.c,
 * ft_shrink.c and ft_agree.c (driven by bench/ft_propagate.sh).
 *
 * Output format, the same as their runthrough counterparts in bench/src/bin/ (or
 * bench/pending/): rank 0 prints comment lines starting with '#' and then one sample
 * per line, "<index> <microseconds>"; the script computes min/median/p90/max.
 *
 * Options: -n COUNT (samples), -x WARMUP (unreported samples first), -i ITERS
 * (ft_agree only: calls per sample); each program has its own defaults.
 */
#ifndef FT_COMMON_H
#define FT_COMMON_H

#include <mpi.h>
#include <mpi-ext.h> /* MPIX_Comm_revoke, MPIX_Comm_shrink, MPIX_Comm_agree (ULFM) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "osu_common.h"

#if !defined(OMPI_HAVE_MPI_EXT_FTMPI) && !defined(MPIX_ERR_REVOKED)
#error "this program needs an MPI with the ULFM extension (Open MPI 5: mpi-ext.h, MPIX_ERR_REVOKED)"
#endif

struct ft_opts {
    long count;  /* -n */
    long warmup; /* -x */
    long iters;  /* -i */
    int bare;    /* --bare (ft_propagate only) */
};

/* Parses -n, -x, -i (and --bare when allowed); returns 0, 1 for -h, 2 on error. */
static inline int ft_parse(int argc, char **argv, struct ft_opts *o, int allow_bare)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
            return 1;
        if (allow_bare && strcmp(a, "--bare") == 0) {
            o->bare = 1;
            continue;
        }
        if (i + 1 >= argc)
            return 2;
        const char *v = argv[++i];
        long *dst = strcmp(a, "-n") == 0 ? &o->count : strcmp(a, "-x") == 0 ? &o->warmup
                                                  : strcmp(a, "-i") == 0   ? &o->iters
                                                                           : NULL;
        if (dst == NULL || parse_size(v, dst) != 0)
            return 2;
    }
    return o->count > 0 && o->iters > 0 ? 0 : 2;
}

/* The error class of a return code. */
static inline int ft_class(int rc)
{
    int c = rc;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &c);
    return c;
}

/* Aborts the job with a message naming the call and the error. */
static inline void ft_fail(const char *prog, int rank, const char *what, int rc)
{
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    s[0] = '\0';
    MPI_Error_string(rc, s, &len);
    fprintf(stderr, "%s: rank %d: %s: %s\n", prog, rank, what, s);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Rank 0: the samples, one "<index> <us>" line each. */
static inline void ft_print(const double *us, long n)
{
    for (long i = 0; i < n; i++)
        printf("%ld %.3f\n", i, us[i]);
    fflush(stdout);
}

#endif
