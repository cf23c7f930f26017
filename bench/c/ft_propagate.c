/*
 * ft_propagate.c - the measurement of Engwer et al. 2018 (their Figure 2) on Open MPI ULFM:
 * duplicate the world, propagate an error from rank 0, clean up; the time of each
 * repetition on rank 0. The reference for runthrough's ft_propagate (dup,
 * Comm::signal_error(666) on rank 0, drop); driven by bench/ft_propagate.sh.
 *
 *   mpirun --with-ft ulfm -np N ft_propagate [-n REPS] [-x WARMUP] [--bare]
 *
 * One repetition, as the paper's ULFM code path does it (section III-C):
 *   1. MPI_Comm_dup(MPI_COMM_WORLD) (errhandler MPI_ERRORS_RETURN, inherited);
 *   2. rank 0 signals: MPIX_Comm_revoke on the dup; every other rank is blocked in an
 *      MPI_Recv from rank 0 on the dup and gets MPIX_ERR_REVOKED;
 *   3. MPIX_Comm_agree(flag) on the dup: is the communicator corrupted (flag 0) or
 *      was an error code signalled (flag 1, here)?
 *   4. MPIX_Comm_shrink of the dup;
 *   5. the list of (rank, code) of the signalling ranks, on the shrunk communicator,
 *      as the paper does it: MPI_Scan (SUM) of "I signalled" numbers the signallers,
 *      MPI_Bcast from the last rank gives their count, MPI_Allreduce (MAX) of the
 *      arrays gives every rank the list (runthrough's signal_error returns the same
 *      list); --bare leaves this step out;
 *   6. free the shrunk communicator and the dup.
 * A world barrier precedes each repetition, and another one follows the dup, so that
 * rank 0 revokes only once every rank holds the dup and waits in its receive: Open MPI
 * 5.0.11 crashes (SIGSEGV in ompi_comm_revoke_local under ompi_comm_activate) when the
 * revoke reaches a rank still completing its MPI_Comm_dup. Neither barrier is timed:
 * a sample is (dup) + (revoke .. free). Rank 0 prints
 * one "<rep> <us>" line per timed repetition (REPS, default 1000, after WARMUP,
 * default 10).
 */
#include "ft_common.h"

#define TAG 666
#define CODE 666

static void usage(FILE *f)
{
    fprintf(f, "usage: mpirun --with-ft ulfm -np N ft_propagate [-n REPS] [-x WARMUP] [--bare] [-h]\n"
               "  -n REPS    timed repetitions (default 1000)\n"
               "  -x WARMUP  untimed repetitions first (default 10)\n"
               "  --bare     revoke + agree + shrink only, without the (rank, code) list\n");
}

int main(int argc, char **argv)
{
    struct ft_opts o = {1000, 10, 1, 0};
    int p = ft_parse(argc, argv, &o, 1);
    if (p != 0) {
        usage(p == 1 ? stdout : stderr);
        return p == 1 ? 0 : 2;
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rank, size, rc;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double *us = calloc((size_t)o.count, sizeof *us);
    int *ranks = calloc((size_t)size, sizeof *ranks);
    int *codes = calloc((size_t)size, sizeof *codes);
    if (us == NULL || ranks == NULL || codes == NULL)
        ft_fail("ft_propagate", rank, "calloc", MPI_ERR_NO_MEM);
    if (rank == 0) {
        printf("# ft_propagate (Open MPI ULFM): dup, revoke from rank 0, agree, shrink%s, free\n",
               o.bare ? "" : ", (rank, code) list");
        printf("# ranks %d, repetitions %ld, warm-up %ld; time per repetition on rank 0 (us)\n", size, o.count,
               o.warmup);
    }
    for (long rep = -o.warmup; rep < o.count; rep++) {
        if ((rc = MPI_Barrier(MPI_COMM_WORLD)) != MPI_SUCCESS)
            ft_fail("ft_propagate", rank, "barrier", rc);
        double t0 = MPI_Wtime();
        MPI_Comm dup, shrunk;
        if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &dup)) != MPI_SUCCESS)
            ft_fail("ft_propagate", rank, "MPI_Comm_dup", rc);
        /* Untimed: every rank holds the dup before rank 0 revokes it. */
        double t_dup = MPI_Wtime();
        if ((rc = MPI_Barrier(MPI_COMM_WORLD)) != MPI_SUCCESS)
            ft_fail("ft_propagate", rank, "barrier", rc);
        double t_sync = MPI_Wtime();
        int signalled = rank == 0;
        if (signalled) {
            if ((rc = MPIX_Comm_revoke(dup)) != MPI_SUCCESS)
                ft_fail("ft_propagate", rank, "MPIX_Comm_revoke", rc);
        } else {
            int x;
            rc = MPI_Recv(&x, 1, MPI_INT, 0, TAG, dup, MPI_STATUS_IGNORE);
            if (ft_class(rc) != MPIX_ERR_REVOKED)
                ft_fail("ft_propagate", rank, "receive on the revoked dup (expected MPIX_ERR_REVOKED)",
                        rc == MPI_SUCCESS ? MPI_ERR_OTHER : rc);
        }
        int flag = 1; /* 0: corrupted; here an error code was signalled */
        rc = MPIX_Comm_agree(dup, &flag);
        if (rc != MPI_SUCCESS && ft_class(rc) != MPIX_ERR_REVOKED)
            ft_fail("ft_propagate", rank, "MPIX_Comm_agree", rc);
        if (flag != 1)
            ft_fail("ft_propagate", rank, "agree: corrupted", MPI_ERR_OTHER);
        if ((rc = MPIX_Comm_shrink(dup, &shrunk)) != MPI_SUCCESS)
            ft_fail("ft_propagate", rank, "MPIX_Comm_shrink", rc);
        if (!o.bare) {
            int me, n, index = 0, count = 0;
            MPI_Comm_rank(shrunk, &me);
            MPI_Comm_size(shrunk, &n);
            if ((rc = MPI_Scan(&signalled, &index, 1, MPI_INT, MPI_SUM, shrunk)) != MPI_SUCCESS)
                ft_fail("ft_propagate", rank, "MPI_Scan", rc);
            count = index;
            if ((rc = MPI_Bcast(&count, 1, MPI_INT, n - 1, shrunk)) != MPI_SUCCESS)
                ft_fail("ft_propagate", rank, "MPI_Bcast", rc);
            memset(ranks, 0, (size_t)count * sizeof *ranks);
            memset(codes, 0, (size_t)count * sizeof *codes);
            if (signalled) {
                ranks[index - 1] = rank;
                codes[index - 1] = CODE;
            }
            if ((rc = MPI_Allreduce(MPI_IN_PLACE, ranks, count, MPI_INT, MPI_MAX, shrunk)) != MPI_SUCCESS ||
                (rc = MPI_Allreduce(MPI_IN_PLACE, codes, count, MPI_INT, MPI_MAX, shrunk)) != MPI_SUCCESS)
                ft_fail("ft_propagate", rank, "MPI_Allreduce", rc);
            if (count != 1 || ranks[0] != 0 || codes[0] != CODE)
                ft_fail("ft_propagate", rank, "wrong (rank, code) list", MPI_ERR_OTHER);
        }
        MPI_Comm_free(&shrunk);
        MPI_Comm_free(&dup);
        double t1 = MPI_Wtime();
        if (rep >= 0)
            us[rep] = ((t_dup - t0) + (t1 - t_sync)) * 1e6;
    }
    if (rank == 0)
        ft_print(us, o.count);
    free(us);
    free(ranks);
    free(codes);
    MPI_Finalize();
    return 0;
}
