/*
 * ngh_kill.c - a neighbour dies during halo exchanges (R38 and R17-R21 through the standard
 * ABI). A periodic 1-D grid over the world; each step every rank sends a face of F ints to
 * each of its two neighbours by MPI_Neighbor_alltoall (blocking, then MPI_Ineighbor_alltoall
 * on alternate steps): contiguous blocks, so the exchange runs straight between the
 * program's buffers. After a checked first exchange (every other rank then tells it so)
 * the last rank SIGKILLs itself. Each
 * survivor, with MPI_ERRORS_RETURN:
 *   - keeps exchanging until a step fails with MPIX_ERR_PROC_FAILED (within 30 s: never
 *     a hang, whether or not the dead rank is its neighbour);
 *   - sees the next exchange fail at once while the failure is not recognized;
 *   - recognizes it (MPIX_Comm_validate: the failed group is the dead rank alone);
 *   - exchanges again, blocking and not: the block from a dead neighbour keeps its
 *     sentinel, every other block holds its neighbour's rank and round.
 * Prints "ngh_kill: rank R ok (N checks)" per survivor, or "FAILED" lines. Needs
 * runthrough's library (MPIX_ calls) and at least 3 ranks.
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#define CHECK_PROG "ngh_kill"
#include "check.h"

#define F 1024

static int sendbuf[2 * F], recvbuf[2 * F];

/* One exchange of step `step`, blocking or not; the receive blocks start as -1. */
static int exchange(MPI_Comm grid, int step, int nonblocking)
{
    for (int i = 0; i < 2 * F; i++) {
        sendbuf[i] = rank * 100000 + step;
        recvbuf[i] = -1;
    }
    if (!nonblocking)
        return MPI_Neighbor_alltoall(sendbuf, F, MPI_INT, recvbuf, F, MPI_INT, grid);
    MPI_Request req;
    int rc = MPI_Ineighbor_alltoall(sendbuf, F, MPI_INT, recvbuf, F, MPI_INT, grid, &req);
    if (rc != MPI_SUCCESS)
        return rc;
    return MPI_Wait(&req, MPI_STATUS_IGNORE);
}

/* Whether block `b` (0: from below, 1: from above) holds `from`'s face of `step`. */
static int holds(int b, int from, int step)
{
    for (int i = 0; i < F; i++)
        if (recvbuf[b * F + i] != from * 100000 + step)
            return 0;
    return 1;
}

static int untouched(int b)
{
    for (int i = 0; i < F; i++)
        if (recvbuf[b * F + i] != -1)
            return 0;
    return 1;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int dims[1] = {size}, periods[1] = {1};
    MPI_Comm grid;
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &grid);
    MPI_Comm_set_errhandler(grid, MPI_ERRORS_RETURN);
    int below = (rank + size - 1) % size, above = (rank + 1) % size, dead = size - 1;
    int rc = exchange(grid, 0, 0);
    CHECK(rc == MPI_SUCCESS && holds(0, below, 0) && holds(1, above, 0), "first exchange (rc %d)", rc);
    /* Every survivor tells the dead rank it finished the first exchange before it dies:
     * a member's death fails the collectives other members still wait in (R17), which is
     * not what this first exchange checks. */
    int word = 1;
    if (rank != dead)
        MPI_Send(&word, 1, MPI_INT, dead, 99, grid);
    if (rank == dead) {
        for (int k = 0; k < size - 1; k++)
            MPI_Recv(&word, 1, MPI_INT, MPI_ANY_SOURCE, 99, grid, MPI_STATUS_IGNORE);
        raise(SIGKILL);
    }
    int step = 1;
    double start = MPI_Wtime();
    while ((rc = exchange(grid, step, step % 2)) == MPI_SUCCESS && MPI_Wtime() - start < 30) {
        CHECK(holds(0, below, step) && holds(1, above, step), "exchange %d before the failure showed", step);
        step++;
    }
    CHECK(eclass(rc) == MPIX_ERR_PROC_FAILED, "exchange %d after the kill: class %d (%.1f s)", step, eclass(rc),
          MPI_Wtime() - start);
    rc = exchange(grid, step, 0);
    CHECK(eclass(rc) == MPIX_ERR_PROC_FAILED, "exchange with an unrecognized failure: class %d", eclass(rc));
    MPI_Group failed, world_group;
    CHECK(MPIX_Comm_validate(grid, &failed) == MPI_SUCCESS, "MPIX_Comm_validate");
    int n = -1, in_grid = -1;
    MPI_Group_size(failed, &n);
    MPI_Comm_group(grid, &world_group);
    MPI_Group_translate_ranks(failed, 1, (int[]){0}, world_group, &in_grid);
    CHECK(n == 1 && in_grid == dead, "validated group: %d members, first is grid rank %d", n, in_grid);
    /* Survivors saw the failure at different steps: the exchanges after validate count
     * from 1000 everywhere. */
    for (int s = 0; s < 2; s++) {
        step = 1000 + s;
        rc = exchange(grid, step, s);
        CHECK(rc == MPI_SUCCESS, "exchange %d after validate (nonblocking %d): rc %d", step, s, rc);
        CHECK(below == dead ? untouched(0) : holds(0, below, step), "block from below %d after validate: %d (step %d)", below, recvbuf[0], step);
        CHECK(above == dead ? untouched(1) : holds(1, above, step), "block from above %d after validate: %d (step %d)", above, recvbuf[F], step);
    }
    MPI_Group_free(&failed);
    MPI_Group_free(&world_group);
    MPI_Comm_free(&grid);
    int status = check_report();
    MPI_Finalize();
    return status;
}
