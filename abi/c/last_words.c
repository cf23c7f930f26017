/*
 * last_words.c - a rank prints a line with printf (no fflush) and is SIGKILLed at once:
 * under `rtrun --output pty` (the default, as Open MPI's mpirun) the C library
 * line-buffers the terminal, so the line reaches rtrun; through a pipe it stays in the
 * dead process's buffer. Rank 1 is the victim; the others print and finalize.
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    printf("last_words: rank %d stdout is %s\n", rank, isatty(1) ? "a terminal" : "not a terminal");
    if (rank == 1) {
        printf("last_words: rank 1 before SIGKILL\n");
        kill(getpid(), SIGKILL);
    }
    MPI_Finalize();
    return 0;
}
