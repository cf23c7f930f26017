/*
 * abort_reason.c - what a rank prints just before MPI_Abort reaches the launcher's output
 * (issue: LULESH at a non-cube rank count printed its reason and aborted silently).
 * Output goes to a pipe, so C's stdout is fully buffered: the line sits in the buffer
 * until MPI_Abort flushes it. The last rank prints "abort_reason: rank R aborts: <why>"
 * without fflush and calls MPI_Abort(MPI_COMM_WORLD, 3); the others wait in a barrier
 * that never completes (they are killed by the abort).
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    printf("abort_reason: rank %d started\n", rank);
    if (rank == size - 1) {
        printf("abort_reason: rank %d aborts: %d ranks is not a cube\n", rank, size);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    printf("abort_reason: rank %d passed the barrier (wrong)\n", rank);
    MPI_Finalize();
    return 0;
}
