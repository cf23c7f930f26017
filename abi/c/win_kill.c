/*
 * win_kill.c - a window member dies (run-through rules R35-R37 through the standard ABI).
 * Every rank creates a window of N ints and fences once; the last rank SIGKILLs itself.
 * Each survivor, with MPI_ERRORS_RETURN on the window:
 *   - locks, puts to the dead rank and flushes, until one of them fails with
 *     MPIX_ERR_PROC_FAILED (the failure detected);
 *   - sees a get and a lock on the dead rank fail with MPIX_ERR_PROC_FAILED at once;
 *   - finds the dead rank in MPIX_Win_get_failed;
 *   - sees MPI_Win_fence fail while the failure is not recognized, then MPIX_Win_validate
 *     give the failed group (the dead rank alone) at every survivor;
 *   - fences again, puts to a live neighbour, fences, and checks the value;
 *   - passive target among the survivors: an exclusive lock, put, unlock;
 *   - frees the window.
 * Prints "win_kill: rank R ok (N checks)" per survivor, or "FAILED" lines. Needs runthrough's
 * library (MPIX_ calls) and at least 2 ranks.
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#define CHECK_PROG "win_kill"
#include "check.h"

#define N 8

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int dead = size - 1, live = size - 1;
    int mem[N];
    for (int i = 0; i < N; i++)
        mem[i] = -1;
    MPI_Win win;
    MPI_Win_create(mem, sizeof mem, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    MPI_Win_fence(0, win);
    if (rank == dead) {
        fflush(stdout);
        raise(SIGKILL);
    }
    /* Until the failure is detected, a put and flush to the dead rank succeed or fail. */
    int v = rank, rc = MPI_SUCCESS;
    double t0 = MPI_Wtime();
    while (MPI_Wtime() - t0 < 30) {
        rc = MPI_Win_lock(MPI_LOCK_SHARED, dead, 0, win);
        if (rc == MPI_SUCCESS) {
            rc = MPI_Put(&v, 1, MPI_INT, dead, 0, 1, MPI_INT, win);
            if (rc == MPI_SUCCESS)
                rc = MPI_Win_flush(dead, win);
            MPI_Win_unlock(dead, win);
        }
        if (rc != MPI_SUCCESS)
            break;
    }
    CHECK(eclass(rc) == MPIX_ERR_PROC_FAILED, "put/flush to the dead rank: class %d", eclass(rc));
    int got = 0;
    rc = MPI_Get(&got, 1, MPI_INT, dead, 0, 1, MPI_INT, win);
    CHECK(eclass(rc) == MPIX_ERR_PROC_FAILED, "get from the dead rank: class %d", eclass(rc));
    rc = MPI_Win_lock(MPI_LOCK_EXCLUSIVE, dead, 0, win);
    CHECK(eclass(rc) == MPIX_ERR_PROC_FAILED, "lock of the dead rank: class %d", eclass(rc));
    MPI_Group failed, wg;
    int n = 0, dead_in = MPI_UNDEFINED;
    CHECK(MPIX_Win_get_failed(win, &failed) == MPI_SUCCESS, "MPIX_Win_get_failed");
    MPI_Win_get_group(win, &wg);
    MPI_Group_size(failed, &n);
    MPI_Group_translate_ranks(wg, 1, &dead, failed, &dead_in);
    CHECK(n == 1 && dead_in == 0, "failed group: %d members, dead rank at %d", n, dead_in);
    MPI_Group_free(&failed);
    /* Fence fails until the failure is recognized (validate), then works. */
    rc = MPI_Win_fence(0, win);
    CHECK(eclass(rc) == MPIX_ERR_PROC_FAILED, "fence with an unrecognized failure: class %d", eclass(rc));
    /* The nonblocking form first (its own agreement), then the blocking one. */
    MPI_Request vreq;
    CHECK(MPIX_Iwin_validate(win, &failed, &vreq) == MPI_SUCCESS, "MPIX_Iwin_validate");
    CHECK(MPI_Wait(&vreq, MPI_STATUS_IGNORE) == MPI_SUCCESS, "MPI_Wait of MPIX_Iwin_validate");
    MPI_Group_size(failed, &n);
    MPI_Group_translate_ranks(wg, 1, &dead, failed, &dead_in);
    CHECK(n == 1 && dead_in == 0, "ivalidated group: %d members, dead rank at %d", n, dead_in);
    MPI_Group_free(&failed);
    CHECK(MPIX_Win_validate(win, &failed) == MPI_SUCCESS, "MPIX_Win_validate");
    MPI_Group_size(failed, &n);
    MPI_Group_translate_ranks(wg, 1, &dead, failed, &dead_in);
    CHECK(n == 1 && dead_in == 0, "validated group: %d members, dead rank at %d", n, dead_in);
    MPI_Group_free(&failed);
    MPI_Group_free(&wg);
    for (int i = 0; i < N; i++)
        mem[i] = -1;
    CHECK(MPI_Win_fence(0, win) == MPI_SUCCESS, "fence after validate");
    int to = (rank + 1) % live, from = (rank + live - 1) % live;
    v = 1000 + rank;
    CHECK(MPI_Put(&v, 1, MPI_INT, to, 1, 1, MPI_INT, win) == MPI_SUCCESS, "put to a survivor");
    CHECK(MPI_Win_fence(0, win) == MPI_SUCCESS, "fence after the put");
    CHECK(mem[1] == 1000 + from, "survivor's put: mem[1] %d want %d", mem[1], 1000 + from);
    CHECK(MPI_Win_fence(0, win) == MPI_SUCCESS, "fence after the check");
    /* Passive target among the survivors: every survivor adds to rank 0's element 2. */
    int one = 1;
    CHECK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win) == MPI_SUCCESS, "lock rank 0");
    CHECK(MPI_Accumulate(&one, 1, MPI_INT, 0, 2, 1, MPI_INT, MPI_SUM, win) == MPI_SUCCESS, "accumulate");
    CHECK(MPI_Win_unlock(0, win) == MPI_SUCCESS, "unlock rank 0");
    CHECK(MPI_Win_fence(0, win) == MPI_SUCCESS, "fence after the locks");
    if (rank == 0)
        CHECK(mem[2] == -1 + live, "rank 0's element 2: %d want %d", mem[2], live - 1);
    rc = MPI_Win_free(&win);
    CHECK(rc == MPI_SUCCESS && win == MPI_WIN_NULL, "free: class %d", eclass(rc));
    int status = check_report();
    fflush(stdout);
    MPI_Finalize();
    return status;
}
