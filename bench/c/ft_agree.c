/*
 * ft_agree.c - Open MPI ULFM: failure-free MPIX_Comm_agree latency. The reference
 * for runthrough's ft_agree (Comm::agree); driven by bench/ft_propagate.sh.
 *
 *   mpirun --with-ft ulfm -np N ft_agree [-n BATCHES] [-i ITERS] [-x WARMUP]
 *
 * WARMUP agreements (default 100), then BATCHES (default 50) batches of ITERS
 * (default 100) agreements on MPI_COMM_WORLD, each batch started by a barrier. Every
 * rank contributes all ones but one bit (its rank's, modulo 31, cleared on odd
 * iterations) and checks the result. Rank 0 prints one "<batch> <us>" line per batch:
 * the batch's average time per agree.
 */
#include "ft_common.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: mpirun --with-ft ulfm -np N ft_agree [-n BATCHES] [-i ITERS] [-x WARMUP] [-h]\n"
               "  -n BATCHES  timed batches (default 50)\n"
               "  -i ITERS    agreements per batch (default 100)\n"
               "  -x WARMUP   untimed agreements first (default 100)\n");
}

/* One agreement of iteration `it`; aborts when it fails or disagrees. */
static void agree_once(int rank, int size, long it)
{
    int flag = ~0, want = ~0;
    if (it % 2) {
        flag &= ~(1 << (rank % 31));
        for (int r = 0; r < size; r++)
            want &= ~(1 << (r % 31));
    }
    int rc = MPIX_Comm_agree(MPI_COMM_WORLD, &flag);
    if (rc != MPI_SUCCESS)
        ft_fail("ft_agree", rank, "MPIX_Comm_agree", rc);
    if (flag != want)
        ft_fail("ft_agree", rank, "wrong agreed value", MPI_ERR_OTHER);
}

int main(int argc, char **argv)
{
    struct ft_opts o = {50, 100, 100, 0};
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
        ft_fail("ft_agree", rank, "calloc", MPI_ERR_NO_MEM);
    for (long it = 0; it < o.warmup; it++)
        agree_once(rank, size, it);
    for (long b = 0; b < o.count; b++) {
        if ((rc = MPI_Barrier(MPI_COMM_WORLD)) != MPI_SUCCESS)
            ft_fail("ft_agree", rank, "barrier", rc);
        double t0 = MPI_Wtime();
        for (long it = 0; it < o.iters; it++)
            agree_once(rank, size, it);
        us[b] = (MPI_Wtime() - t0) * 1e6 / (double)o.iters;
    }
    if (rank == 0) {
        printf("# ft_agree (Open MPI ULFM): failure-free MPIX_Comm_agree on the world\n");
        printf("# ranks %d, %ld batches of %ld, warm-up %ld; average per agree in each batch (us)\n", size, o.count,
               o.iters, o.warmup);
        ft_print(us, o.count);
    }
    free(us);
    MPI_Finalize();
    return 0;
}
