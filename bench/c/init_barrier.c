/*
 * init_barrier.c - the start-up benchmark's job for the reference MPIs
 * (bench/startup.sh), the counterpart of bench/src/bin/init_barrier.rs: MPI_Init, one
 * MPI_Barrier on MPI_COMM_WORLD, MPI_Finalize; rank 0 prints one line.
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        printf("init_barrier: %d ranks ok\n", size);
    MPI_Finalize();
    return 0;
}
