/*
 * ulfm_openmpi.c - a ULFM program written for Open MPI 5 (Fenix-style recovery code) builds
 * unchanged against runthrough's headers and runs: only <mpi.h> and <mpi-ext.h> included
 * (nothing before them), Open MPI's unprefixed error classes MPI_ERR_PROC_FAILED and
 * MPI_ERR_REVOKED, the MPI_FT attribute, MPIX_Comm_revoke / _shrink / _agree /
 * _failure_ack / _failure_get_acked.
 *
 * The last rank SIGKILLs itself after a barrier; every survivor allreduces until a call
 * fails with MPI_ERR_PROC_FAILED or MPI_ERR_REVOKED, revokes MPI_COMM_WORLD, shrinks it,
 * checks the new size and an allreduce over it, and agrees on a flag. Every survivor
 * prints "ulfm_openmpi: rank R ok (size S)" or "ulfm_openmpi: rank R FAILED ..." and exits 1.
 */
#include <mpi.h>
#include <mpi-ext.h>

#include <signal.h>
#include <stdio.h>
#include <unistd.h>

static int rank, bad;

#define CHECK(cond, ...)                                                                 \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            bad++;                                                                       \
            printf("ulfm_openmpi: rank %d FAILED: ", rank);                              \
            printf(__VA_ARGS__);                                                         \
            printf("\n");                                                                \
        }                                                                                \
    } while (0)

int main(int argc, char **argv) {
    int size, one = 1, sum = 0, rc = MPI_SUCCESS, cls = MPI_SUCCESS;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int *ft = NULL, flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_FT, &ft, &flag);
    CHECK(flag && ft && *ft == 1, "MPI_FT attribute: flag %d value %d", flag, ft ? *ft : -1);
    int victim = size - 1;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == victim) {
        fflush(stdout);
        raise(SIGKILL);
    }
    for (int i = 0; i < 100000 && rc == MPI_SUCCESS; i++) {
        rc = MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (rc == MPI_SUCCESS)
            usleep(1000);
    }
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_PROC_FAILED || cls == MPI_ERR_REVOKED, "allreduce after the kill: class %d", cls);
    MPIX_Comm_revoke(MPI_COMM_WORLD);
    MPIX_Comm_failure_ack(MPI_COMM_WORLD);
    MPI_Group acked;
    int nacked = -1;
    MPIX_Comm_failure_get_acked(MPI_COMM_WORLD, &acked);
    MPI_Group_size(acked, &nacked);
    MPI_Group_free(&acked);
    CHECK(nacked <= 1, "acknowledged %d failures, at most the one", nacked);
    MPI_Comm shrunk = MPI_COMM_NULL;
    rc = MPIX_Comm_shrink(MPI_COMM_WORLD, &shrunk);
    CHECK(rc == MPI_SUCCESS && shrunk != MPI_COMM_NULL, "shrink rc %d", rc);
    int ns = -1;
    if (shrunk != MPI_COMM_NULL) {
        MPI_Comm_size(shrunk, &ns);
        CHECK(ns == size - 1, "shrunk size %d, want %d", ns, size - 1);
        rc = MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, shrunk);
        CHECK(rc == MPI_SUCCESS && sum == size - 1, "allreduce on the shrunk communicator: rc %d sum %d", rc, sum);
        int agreed = rank == 0 ? 3 : 7; /* AND: 3 */
        rc = MPIX_Comm_agree(shrunk, &agreed);
        CHECK(rc == MPI_SUCCESS && agreed == 3, "agree rc %d value %d", rc, agreed);
        MPI_Comm_free(&shrunk);
    }
    if (!bad)
        printf("ulfm_openmpi: rank %d ok (size %d)\n", rank, ns);
    fflush(stdout);
    MPI_Finalize();
    return bad ? 1 : 0;
}
