/*
 * init_fails.c - run-through chapter §17.5.2 through the standard ABI: when MPI_Init cannot start
 * (run with a launcher address nobody listens on), it returns an error instead of
 * aborting; MPI_COMM_WORLD stays a handle on which MPI_Comm_set_errhandler works, and a
 * later call on it reports MPIX_ERR_PROC_FAILED through that handler. Prints
 * "init_fails: ok" and exits 0, or "init_fails: FAILED ..." and exits 1.
 */
#include "rt_ext.h"

int main(int argc, char **argv)
{
    int rc = MPI_Init(&argc, &argv), cls = -1;
    if (rc == MPI_SUCCESS) {
        printf("init_fails: FAILED MPI_Init succeeded without a launcher\n");
        return 1;
    }
    rc = MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (rc != MPI_SUCCESS) {
        printf("init_fails: FAILED MPI_Comm_set_errhandler after the failed init: rc %d\n", rc);
        return 1;
    }
    rc = MPI_Barrier(MPI_COMM_WORLD);
    MPI_Error_class(rc, &cls);
    if (cls != MPIX_ERR_PROC_FAILED) {
        printf("init_fails: FAILED MPI_Barrier after the failed init: rc %d class %d\n", rc, cls);
        return 1;
    }
    printf("init_fails: ok (MPI_Barrier class %d)\n", cls);
    return 0;
}
