/*
 * ft_shrink.c - Open MPI ULFM: MPIX_Comm_shrink of the world after one rank was
 * killed. The reference for runthrough's ft_shrink (Comm::shrink); driven by
 * bench/ft_propagate.sh, which runs one job per sample (a killed rank cannot come
 * back).
 *
 *   mpirun --with-ft ulfm -np N ft_shrink
 *
 * Three world barriers, then the last rank SIGKILLs itself. Every survivor blocks in
 * an MPI_Recv from it until the receive fails with MPIX_ERR_PROC_FAILED, acknowledges
 * the failure (MPIX_Comm_failure_ack) and joins an MPIX_Comm_agree on the world, so
 * that all survivors start the shrink together (detection times differ by
 * milliseconds). Then each times MPIX_Comm_shrink(MPI_COMM_WORLD); rank 0 prints
 * "0 <us>" (its own shrink time) and a comment with the maximum over the survivors
 * (an MPI_Reduce on the shrunk communicator). At the end, a survivor still in
 * MPI_Finalize 3 s later is ended by SIGALRM (Open MPI 5.0.11 sometimes hangs there
 * after a failure; see ft_detect.c).
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <unistd.h>

#include "ft_common.h"

#define TAG 1

int main(int argc, char **argv)
{
    if (argc > 1) {
        fprintf(strcmp(argv[1], "-h") == 0 ? stdout : stderr, "usage: mpirun --with-ft ulfm -np N ft_shrink\n");
        return strcmp(argv[1], "-h") == 0 ? 0 : 2;
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rank, size, rc;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int victim = size - 1;
    if (size < 3) {
        if (rank == 0)
            fprintf(stderr, "ft_shrink: need at least 3 ranks\n");
        MPI_Finalize();
        return 2;
    }
    for (int i = 0; i < 3; i++)
        if ((rc = MPI_Barrier(MPI_COMM_WORLD)) != MPI_SUCCESS)
            ft_fail("ft_shrink", rank, "start barrier", rc);
    if (rank == victim) {
        kill(getpid(), SIGKILL);
        for (;;)
            sleep(1);
    }
    int x;
    rc = MPI_Recv(&x, 1, MPI_INT, victim, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (ft_class(rc) != MPIX_ERR_PROC_FAILED)
        ft_fail("ft_shrink", rank, "receive from the victim (expected MPIX_ERR_PROC_FAILED)",
                rc == MPI_SUCCESS ? MPI_ERR_OTHER : rc);
    MPIX_Comm_failure_ack(MPI_COMM_WORLD);
    int flag = 1;
    rc = MPIX_Comm_agree(MPI_COMM_WORLD, &flag);
    if (rc != MPI_SUCCESS && ft_class(rc) != MPIX_ERR_PROC_FAILED)
        ft_fail("ft_shrink", rank, "MPIX_Comm_agree", rc);
    MPI_Comm shrunk;
    double t0 = MPI_Wtime();
    if ((rc = MPIX_Comm_shrink(MPI_COMM_WORLD, &shrunk)) != MPI_SUCCESS)
        ft_fail("ft_shrink", rank, "MPIX_Comm_shrink", rc);
    double us = (MPI_Wtime() - t0) * 1e6, max = 0;
    int n;
    MPI_Comm_size(shrunk, &n);
    if (n != size - 1)
        ft_fail("ft_shrink", rank, "the shrunk communicator has the wrong size", MPI_ERR_OTHER);
    MPI_Comm_set_errhandler(shrunk, MPI_ERRORS_RETURN);
    if ((rc = MPI_Reduce(&us, &max, 1, MPI_DOUBLE, MPI_MAX, 0, shrunk)) != MPI_SUCCESS)
        ft_fail("ft_shrink", rank, "MPI_Reduce on the shrunk communicator", rc);
    if (rank == 0) {
        printf("# ft_shrink (Open MPI ULFM): shrink of the world after rank %d was killed\n", victim);
        printf("# ranks %d; shrink time on rank 0 (us); max over the %d survivors: %.3f\n", size, n, max);
        printf("0 %.3f\n", us);
        fflush(stdout);
    }
    MPI_Comm_free(&shrunk);
    alarm(3);
    MPI_Finalize();
    return 0;
}
