/*
 * ulfm_agree.c - ULFM's MPIX_Comm_agree through the standard ABI: the last rank dies;
 * every survivor learns it from a failed receive, then
 *   1. MPIX_Comm_agree before acknowledging: MPIX_ERR_PROC_FAILED at every survivor,
 *      the flag still the AND of the survivors' flags (0b01);
 *   2. MPIX_Comm_failure_ack, then MPIX_Comm_agree: MPI_SUCCESS, flag 1;
 *   3. the same with MPIX_Comm_iagree + MPI_Wait;
 * and, first, the MPIX_FT attribute of MPI_COMM_WORLD is 1.
 * Each survivor prints "ulfm_agree: rank R ok"; a failed check prints
 * "ulfm_agree: rank R FAILED ..." and exits 1.
 */
#include "rt_ext.h"

static int class_of(int rc)
{
    int c = rc;
    MPI_Error_class(rc, &c);
    return c;
}

int main(int argc, char **argv)
{
    int rank, size, rc, bad = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (!RT_HAVE(MPIX_Comm_agree) || !RT_HAVE(MPIX_Comm_failure_ack)) {
        fprintf(stderr, "ulfm_agree: unsupported on this MPI\n");
        return RT_EXIT_UNSUPPORTED;
    }
    int *ft = NULL, has = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPIX_FT, &ft, &has);
    if (!has || !ft || *ft != 1) {
        printf("ulfm_agree: rank %d FAILED the MPIX_FT attribute: flag %d value %d\n", rank, has, ft ? *ft : -1);
        bad = 1;
    }
    int victim = size - 1;
    if (rank == victim)
        rt_die();
    int x;
    rc = MPI_Recv(&x, 1, MPI_INT, victim, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (class_of(rc) != MPIX_ERR_PROC_FAILED) {
        printf("ulfm_agree: rank %d FAILED receive from the dead rank: rc %d\n", rank, rc);
        bad = 1;
    }
    int flag = rank == 0 ? 0x1 : 0x3;
    rc = MPIX_Comm_agree(MPI_COMM_WORLD, &flag);
    if (class_of(rc) != MPIX_ERR_PROC_FAILED || flag != 0x1) {
        printf("ulfm_agree: rank %d FAILED agree before ack: rc %d flag %#x (want class %d, 0x1)\n", rank, rc, flag,
               MPIX_ERR_PROC_FAILED);
        bad = 1;
    }
    MPIX_Comm_failure_ack(MPI_COMM_WORLD);
    flag = 1;
    rc = MPIX_Comm_agree(MPI_COMM_WORLD, &flag);
    if (rc != MPI_SUCCESS || flag != 1) {
        printf("ulfm_agree: rank %d FAILED agree after ack: rc %d flag %d\n", rank, rc, flag);
        bad = 1;
    }
    MPI_Request r;
    flag = rank == 0 ? 0x6 : 0x7;
    MPIX_Comm_iagree(MPI_COMM_WORLD, &flag, &r);
    rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS || flag != 0x6) {
        printf("ulfm_agree: rank %d FAILED iagree after ack: rc %d flag %#x\n", rank, rc, flag);
        bad = 1;
    }
    if (!bad)
        printf("ulfm_agree: rank %d ok\n", rank);
    fflush(stdout);
    MPI_Finalize();
    return bad;
}
