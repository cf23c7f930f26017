/*
 * ft_revoke.c - Open MPI ULFM: how long from rank 0's MPIX_Comm_revoke until every
 * member knows? The reference for runthrough's ft_revoke (Comm::revoke); driven by
 * bench/ft_propagate.sh.
 *
 *   mpirun --with-ft ulfm -np N ft_revoke [-n REPS] [-x WARMUP]
 *
 * Each repetition: world barrier, MPI_Comm_dup of the world; every rank but 0 blocks
 * in an MPI_Recv from rank 0 on the dup; rank 0 takes the time and revokes the dup.
 * Each other rank, once its receive fails with MPIX_ERR_REVOKED, sends a 1-int
 * acknowledgement to rank 0 over MPI_COMM_WORLD; rank 0's sample ends when it holds
 * every acknowledgement (so it includes one message latency). Then the dup is freed.
 * Rank 0 prints one "<rep> <us>" line per timed repetition (default 200 after 10).
 */
#include "ft_common.h"

#define TAG 1
#define ACK_TAG 2

static void usage(FILE *f)
{
    fprintf(f, "usage: mpirun --with-ft ulfm -np N ft_revoke [-n REPS] [-x WARMUP] [-h]\n"
               "  -n REPS    timed repetitions (default 200)\n"
               "  -x WARMUP  untimed repetitions first (default 10)\n");
}

int main(int argc, char **argv)
{
    struct ft_opts o = {200, 10, 1, 0};
    int p = ft_parse(argc, argv, &o, 0);
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
    if (us == NULL)
        ft_fail("ft_revoke", rank, "calloc", MPI_ERR_NO_MEM);
    if (rank == 0) {
        printf("# ft_revoke (Open MPI ULFM): rank 0 revokes a dup; until every member's receive failed\n");
        printf("# ranks %d, repetitions %ld, warm-up %ld; revoke to last acknowledgement on rank 0 (us)\n", size,
               o.count, o.warmup);
    }
    for (long rep = -o.warmup; rep < o.count; rep++) {
        MPI_Comm dup;
        if ((rc = MPI_Comm_dup(MPI_COMM_WORLD, &dup)) != MPI_SUCCESS)
            ft_fail("ft_revoke", rank, "MPI_Comm_dup", rc);
        if ((rc = MPI_Barrier(MPI_COMM_WORLD)) != MPI_SUCCESS)
            ft_fail("ft_revoke", rank, "barrier", rc);
        int x = 0;
        if (rank == 0) {
            double t0 = MPI_Wtime();
            if ((rc = MPIX_Comm_revoke(dup)) != MPI_SUCCESS)
                ft_fail("ft_revoke", rank, "MPIX_Comm_revoke", rc);
            for (int r = 1; r < size; r++) {
                if ((rc = MPI_Recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, ACK_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE)) !=
                    MPI_SUCCESS)
                    ft_fail("ft_revoke", rank, "receiving an acknowledgement", rc);
            }
            double t1 = MPI_Wtime();
            if (rep >= 0)
                us[rep] = (t1 - t0) * 1e6;
        } else {
            rc = MPI_Recv(&x, 1, MPI_INT, 0, TAG, dup, MPI_STATUS_IGNORE);
            if (ft_class(rc) != MPIX_ERR_REVOKED)
                ft_fail("ft_revoke", rank, "receive on the revoked dup (expected MPIX_ERR_REVOKED)",
                        rc == MPI_SUCCESS ? MPI_ERR_OTHER : rc);
            if ((rc = MPI_Send(&x, 1, MPI_INT, 0, ACK_TAG, MPI_COMM_WORLD)) != MPI_SUCCESS)
                ft_fail("ft_revoke", rank, "sending the acknowledgement", rc);
        }
        MPI_Comm_free(&dup);
    }
    if (rank == 0)
        ft_print(us, o.count);
    free(us);
    MPI_Finalize();
    return 0;
}
