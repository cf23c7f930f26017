/*
 * check.h - the checks of the C test programs: CHECK(cond, fmt, ...) counts a check and,
 * when it fails, prints "PROG: rank R FAILED line L: what"; eclass(rc) is the error class
 * of a return code. A program defines CHECK_PROG (its name) before including this, sets
 * `rank`, and ends with check_report(): "PROG: rank R ok (N checks)" when nothing failed.
 * Plain C over mpi.h, so a program built on it runs on any MPI of the standard ABI.
 */
#ifndef RT_CHECK_H
#define RT_CHECK_H

#include <mpi.h>
#include <stdio.h>

static int rank, size, checks, failures;

#define CHECK(cond, ...)                                                                    \
    do {                                                                                    \
        checks++;                                                                           \
        if (!(cond)) {                                                                      \
            failures++;                                                                     \
            printf("%s: rank %d FAILED line %d: ", CHECK_PROG, rank, __LINE__);            \
            printf(__VA_ARGS__);                                                            \
            printf("\n");                                                                   \
        }                                                                                   \
    } while (0)

static inline int eclass(int rc)
{
    int c = rc;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &c);
    return c;
}

/* Prints the ok line when no check failed; the exit status to return. */
static inline int check_report(void)
{
    if (failures == 0)
        printf("%s: rank %d ok (%d checks)\n", CHECK_PROG, rank, checks);
    return failures != 0;
}

#endif
