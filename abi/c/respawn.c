/*
 * respawn.c - replacing the dead through the ULFM interface and MPI_Comm_spawn (R40;
 * docs/SPAWN.md): the C twin of examples/respawn.rs, written to plain MPI + ULFM
 * (MPIX_Comm_revoke, MPIX_Comm_shrink) so the same source builds on
 * runthrough's libmpi_abi.so.1 and on Open MPI with ULFM.
 *
 * A ring of NP x 64 cells smoothed for 500 steps (a step ~4 ms); every 10 steps each rank
 * keeps its block and sends a copy to its right neighbour (no agreement: see run()).
 * When a step fails: revoke, shrink, spawn one replacement per dead rank, merge, split
 * keyed by the old rank (the replacement takes the dead rank's place), roll back to the
 * last checkpoint every survivor committed (the minimum of their latest), the
 * replacement's block from its buddy. Rank 0
 * compares the ring with a serial run bit for bit: "respawn: ... matches the serial run".
 * Every rank prints "respawn: rank R done"; rank 0 prints the recovery time (first error
 * seen to the first step after it).
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CELLS 64
#define STEPS 500
#define CKPT 10
#define HALO 1
#define BUDDY 2
#define RESTORE 3

static char self_path[4096];

/* Every checkpoint is kept (ranks far apart on the ring may be several apart when one
 * fails): STEPS / CKPT of each, own and the left neighbour's copy. */
#define SLOTS (STEPS / CKPT + 1)

typedef struct {
    int rank;
    long step;
    double cells[CELLS];
    long own_step[SLOTS], buddy_step[SLOTS];
    double own[SLOTS][CELLS], buddy[SLOTS][CELLS];
    int nown, nbuddy;
} part;

static double forcing(long cell, long step) { return (double)((cell * 31 + step * 17) % 101) * 1e-3; }

static double update(double l, double x, double r, long g, long step)
{
    return 0.25 * l + 0.5 * x + 0.25 * r + forcing(g, step);
}

static void initial(int rank, double *c)
{
    for (int i = 0; i < CELLS; i++)
        c[i] = (double)((rank * CELLS + i) % 7);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Wall-clock seconds, comparable between the processes of one host (the benchmark's
 * "kill to replacement computing"). */
static double wall(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* RESPAWN_KILL=RANK@STEP: that original rank SIGKILLs itself before that step, printing
 * when (for launchers without rtrun's --kill, and for timing the recovery). */
static int kill_rank = -1;
static long kill_step = -1;

/* Keeps a checkpoint. */
static void keep(long *steps, double (*slots)[CELLS], int *n, long step, const double *v)
{
    steps[*n] = step;
    memcpy(slots[*n], v, sizeof(double) * CELLS);
    (*n)++;
}

static int find(const long *steps, int n, long step)
{
    for (int k = 0; k < n; k++)
        if (steps[k] == step)
            return k;
    return -1;
}

/* Steps until STEPS; an MPI error code on a failure. */
static int run(MPI_Comm comm, part *p, double *recovered)
{
    int n, rc;
    MPI_Comm_size(comm, &n);
    int left = (p->rank + n - 1) % n, right = (p->rank + 1) % n;
    while (p->step < STEPS) {
        if (p->rank == kill_rank && p->step == kill_step) {
            printf("respawn: rank %d killed at %.6f\n", p->rank, wall());
            fflush(stdout);
            raise(SIGKILL);
        }
        struct timespec pause = {0, 4000000};
        nanosleep(&pause, NULL);
        double from_left, from_right, old[CELLS];
        rc = MPI_Sendrecv(&p->cells[CELLS - 1], 1, MPI_DOUBLE, right, HALO, &from_left, 1, MPI_DOUBLE, left, HALO, comm,
                          MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            return rc;
        rc = MPI_Sendrecv(&p->cells[0], 1, MPI_DOUBLE, left, HALO, &from_right, 1, MPI_DOUBLE, right, HALO, comm,
                          MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            return rc;
        memcpy(old, p->cells, sizeof old);
        for (int i = 0; i < CELLS; i++) {
            double l = i == 0 ? from_left : old[i - 1], r = i == CELLS - 1 ? from_right : old[i + 1];
            p->cells[i] = update(l, old[i], r, (long)p->rank * CELLS + i, p->step);
        }
        p->step++;
        if (*recovered < 0) {
            printf("respawn: replacement computing at %.6f\n", wall());
            *recovered = 0;
        }
        if (*recovered > 0) {
            if (p->rank == 0)
                printf("respawn: recovered in %.1f ms (first error to the next step)\n", (now() - *recovered) * 1e3);
            *recovered = 0;
        }
        if (p->step % CKPT == 0) {
            double copy[CELLS];
            rc = MPI_Sendrecv(p->cells, CELLS, MPI_DOUBLE, right, BUDDY, copy, CELLS, MPI_DOUBLE, left, BUDDY, comm,
                              MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS)
                return rc;
            /* Committed here, no agreement: a member failing into the recovery while
             * others wait in one on this communicator would meet them in the shrink's. */
            keep(p->own_step, p->own, &p->nown, p->step, p->cells);
            keep(p->buddy_step, p->buddy, &p->nbuddy, p->step, copy);
        }
    }
    return MPI_SUCCESS;
}

/* The ring again, ranks in their old places. */
static MPI_Comm rejoin(MPI_Comm merged, int place)
{
    MPI_Comm whole;
    MPI_Comm_split(merged, 0, place, &whole);
    MPI_Comm_set_errhandler(whole, MPI_ERRORS_RETURN);
    return whole;
}

/* Back to the last checkpoint every member committed; the buddies restore the dead. */
static void roll_back(MPI_Comm whole, part *p, const int *dead, int ndead)
{
    int n, me_dead = 0;
    MPI_Comm_size(whole, &n);
    for (int i = 0; i < ndead; i++)
        me_dead |= dead[i] == p->rank;
    /* No checkpoint yet: step 0, the initial state. */
    long last = p->nown ? p->own_step[p->nown - 1] : 0;
    long mine = me_dead ? STEPS + 1 : last, step;
    MPI_Allreduce(&mine, &step, 1, MPI_LONG, MPI_MIN, whole);
    for (int i = 0; i < ndead; i++) {
        int buddy = (dead[i] + 1) % n, buddy_dead = 0;
        for (int j = 0; j < ndead; j++)
            buddy_dead |= dead[j] == buddy;
        if (p->rank == buddy && !buddy_dead) {
            double copy[CELLS];
            if (step == 0)
                initial(dead[i], copy);
            else
                memcpy(copy, p->buddy[find(p->buddy_step, p->nbuddy, step)], sizeof copy);
            MPI_Send(copy, CELLS, MPI_DOUBLE, dead[i], RESTORE, whole);
        }
    }
    if (me_dead) {
        MPI_Recv(p->cells, CELLS, MPI_DOUBLE, (p->rank + 1) % n, RESTORE, whole, MPI_STATUS_IGNORE);
        p->nown = p->nbuddy = 0;
    } else if (step == 0) {
        initial(p->rank, p->cells);
    } else {
        memcpy(p->cells, p->own[find(p->own_step, p->nown, step)], sizeof p->cells);
    }
    p->step = step;
}

/* After a failure: revoke, shrink, spawn, merge, rejoin, roll back. */
static MPI_Comm recover(MPI_Comm comm, part *p)
{
    int n, alive_n;
    MPIX_Comm_revoke(comm);
    MPI_Comm_size(comm, &n);
    MPI_Comm shrunk;
    MPIX_Comm_shrink(comm, &shrunk);
    MPI_Comm_size(shrunk, &alive_n);
    MPI_Group g_all, g_alive;
    MPI_Comm_group(comm, &g_all);
    MPI_Comm_group(shrunk, &g_alive);
    int dead[64], ndead = 0;
    for (int r = 0; r < n; r++) {
        int t;
        MPI_Group_translate_ranks(g_all, 1, &r, g_alive, &t);
        if (t == MPI_UNDEFINED)
            dead[ndead++] = r;
    }
    MPI_Group_free(&g_all);
    MPI_Group_free(&g_alive);
    MPI_Comm inter, merged;
    char *args[] = {"replacement", NULL};
    int rc = MPI_Comm_spawn(self_path, args, ndead, MPI_INFO_NULL, 0, shrunk, &inter, MPI_ERRCODES_IGNORE);
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "respawn: rank %d: spawn failed (%d)\n", p->rank, rc);
        MPI_Abort(shrunk, 2);
    }
    MPI_Intercomm_merge(inter, 0, &merged);
    MPI_Bcast(dead, ndead, MPI_INT, 0, merged);
    MPI_Comm whole = rejoin(merged, p->rank);
    roll_back(whole, p, dead, ndead);
    MPI_Comm_free(&merged);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&shrunk);
    MPI_Comm_free(&comm);
    return whole;
}

/* A replacement: merge with the survivors, learn its place, take its restored block. */
static MPI_Comm replacement(MPI_Comm parent, part *p)
{
    MPI_Comm merged;
    int me, ndead, survivors;
    MPI_Comm_set_errhandler(parent, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &ndead);
    MPI_Comm_remote_size(parent, &survivors);
    MPI_Intercomm_merge(parent, 1, &merged);
    int dead[64];
    MPI_Bcast(dead, ndead, MPI_INT, 0, merged);
    p->rank = dead[me];
    MPI_Comm whole = rejoin(merged, p->rank);
    roll_back(whole, p, dead, ndead);
    printf("respawn: replacement took rank %d at step %ld\n", p->rank, p->step);
    MPI_Comm_free(&merged);
    return whole;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (!realpath(argv[0], self_path))
        snprintf(self_path, sizeof self_path, "%s", argv[0]);
    static part p;
    MPI_Comm parent, comm;
    MPI_Comm_get_parent(&parent);
    if (parent == MPI_COMM_NULL) {
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Comm_rank(MPI_COMM_WORLD, &p.rank);
        if (MPI_Comm_dup(MPI_COMM_WORLD, &comm) != MPI_SUCCESS)
            comm = MPI_COMM_WORLD; /* a rank killed during start-up: fail into recovery */
        MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
        initial(p.rank, p.cells);
    } else {
        comm = replacement(parent, &p);
    }
    /* A replacement reports when it computes again; an original may be the victim. */
    double recovered = parent == MPI_COMM_NULL ? 0 : -1;
    const char *k = getenv("RESPAWN_KILL");
    if (k && parent == MPI_COMM_NULL && sscanf(k, "%d@%ld", &kill_rank, &kill_step) != 2)
        kill_rank = -1;
    while (run(comm, &p, &recovered) != MPI_SUCCESS) {
        recovered = now();
        comm = recover(comm, &p);
    }
    int n;
    MPI_Comm_size(comm, &n);
    double *all = p.rank == 0 ? malloc(sizeof(double) * CELLS * n) : NULL;
    MPI_Gather(p.cells, CELLS, MPI_DOUBLE, all, CELLS, MPI_DOUBLE, 0, comm);
    int bad = 0;
    if (p.rank == 0) {
        int m = n * CELLS;
        double *x = malloc(sizeof(double) * m), *old = malloc(sizeof(double) * m), sum = 0;
        for (int r = 0; r < n; r++)
            initial(r, x + r * CELLS);
        for (long step = 0; step < STEPS; step++) {
            memcpy(old, x, sizeof(double) * m);
            for (int g = 0; g < m; g++)
                x[g] = update(old[(g + m - 1) % m], old[g], old[(g + 1) % m], g, step);
        }
        for (int g = 0; g < m; g++) {
            bad |= memcmp(&x[g], &all[g], sizeof(double)) != 0;
            sum += all[g];
        }
        if (bad)
            fprintf(stderr, "respawn: rank 0: the ring differs from the serial run (sum %f)\n", sum);
        else
            printf("respawn: %d ranks, %d steps: the ring matches the serial run bit for bit (sum %.6f)\n", n, STEPS,
                   sum);
        free(x);
        free(old);
        free(all);
    }
    printf("respawn: rank %d done\n", p.rank);
    if (comm != MPI_COMM_WORLD)
        MPI_Comm_free(&comm);
    MPI_Finalize();
    return bad ? 3 : 0;
}
