/*
 * io_kill.c SCENE DIR - a file's member dies (run-through rule R41 through the standard
 * ABI). The last rank SIGKILLs itself at the point SCENE names; every survivor checks,
 * with MPI_ERRORS_RETURN on its files:
 *   open       - dies just before MPI_File_open: the open fails at every survivor with
 *                MPIX_ERR_PROC_FAILED (uniform: no survivor gets a file handle); after
 *                MPIX_Comm_validate the open succeeds with the dead rank in the group;
 *   write-agg  - dies just before a collective write whose ranges interleave, every rank
 *                an aggregator (cb_nodes = size): the write fails at every survivor;
 *   write-one  - the same with one aggregator (rank 0): the dead rank is not one;
 *   close      - dies just before MPI_File_close.
 * Then, in every scene: MPI_File_close fails with MPIX_ERR_PROC_FAILED and leaves the file
 * open while the failure is unrecognized; MPIX_File_get_failed holds the dead rank;
 * MPIX_File_validate gives the dead rank alone; MPIX_File_collectives_enabled is true; the
 * survivors write the interleaved array collectively again, read it back collectively, find
 * their bytes right and the dead rank's slots zero (it never wrote), and close; the file is
 * checked byte by byte by rank 0 through MPI_COMM_SELF. Every step is bounded (the launcher's
 * timeout). Prints "io_kill: rank R ok (N checks)" per survivor.
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK_PROG "io_kill"
#include "check.h"

enum { N = 256 };

static int dead;

static void die_here(const char *scene, const char *at)
{
    if (rank == dead && strcmp(scene, at) == 0) {
        fflush(stdout);
        raise(SIGKILL);
    }
}

/* The interleaved view: rank r owns int k*size + r, from byte 0. */
static void interleaved_view(MPI_File fh, MPI_Datatype *ftr)
{
    MPI_Datatype one;
    MPI_Type_contiguous(1, MPI_INT, &one);
    MPI_Type_create_resized(one, 0, (MPI_Aint)size * sizeof(int), ftr);
    MPI_Type_commit(ftr);
    MPI_Type_free(&one);
    int rc = MPI_File_set_view(fh, (MPI_Offset)rank * sizeof(int), MPI_INT, *ftr, "native", MPI_INFO_NULL);
    CHECK(rc == MPI_SUCCESS, "set_view: %d", eclass(rc));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const char *scene = argc > 1 ? argv[1] : "close";
    const char *dir = argc > 2 ? argv[2] : "/tmp";
    dead = size - 1;
    int job = (int)getpid();
    MPI_Bcast(&job, 1, MPI_INT, 0, MPI_COMM_WORLD);
    /* Every survivor tells the victim it has the name before the victim may die: a
     * member's death fails the collectives others still wait in (R17), and a survivor
     * left with its own pid would open another file. */
    int word = 1;
    if (rank != dead)
        MPI_Send(&word, 1, MPI_INT, dead, 99, MPI_COMM_WORLD);
    else
        for (int k = 0; k < size - 1; k++)
            MPI_Recv(&word, 1, MPI_INT, MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    char path[512];
    snprintf(path, sizeof path, "%s/rt_io_kill_%s_%d_%d", dir, scene, size, job);
    MPI_Info info;
    MPI_Info_create(&info);
    char nodes[16];
    snprintf(nodes, sizeof nodes, "%d", strcmp(scene, "write-one") == 0 ? 1 : size);
    MPI_Info_set(info, "cb_nodes", nodes);
    MPI_Info_set(info, "romio_cb_write", "enable");
    int buf[N], back[N];
    for (int i = 0; i < N; i++)
        buf[i] = (i * size + rank) + 1;
    MPI_Status st;
    MPI_File fh = MPI_FILE_NULL;
    MPI_Datatype ftr;
    int rc;

    die_here(scene, "open");
    rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR | MPI_MODE_CREATE, info, &fh);
    if (strcmp(scene, "open") == 0) {
        CHECK(eclass(rc) == MPIX_ERR_PROC_FAILED, "open with a member dead: class %d", eclass(rc));
        CHECK(fh == MPI_FILE_NULL, "a failed open gave a file handle");
        MPI_Group failed;
        rc = MPIX_Comm_validate(MPI_COMM_WORLD, &failed);
        CHECK(rc == MPI_SUCCESS, "validate: %d", eclass(rc));
        MPI_Group_free(&failed);
        rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR | MPI_MODE_CREATE, info, &fh);
        char why[MPI_MAX_ERROR_STRING] = "";
        int wl = 0;
        if (rc != MPI_SUCCESS)
            MPI_Error_string(rc, why, &wl);
        CHECK(rc == MPI_SUCCESS, "open after validate: %d (%s)", eclass(rc), why);
        MPI_Group g;
        int gs = 0;
        MPI_File_get_group(fh, &g);
        MPI_Group_size(g, &gs);
        CHECK(gs == size, "the file's group has %d members (the dead one included)", gs);
        MPI_Group_free(&g);
    } else {
        CHECK(rc == MPI_SUCCESS, "open: %d", eclass(rc));
    }
    MPI_File_set_errhandler(fh, MPI_ERRORS_RETURN);
    interleaved_view(fh, &ftr);

    if (strncmp(scene, "write", 5) == 0) {
        die_here("write", "write");
        rc = MPI_File_write_at_all(fh, 0, buf, N, MPI_INT, &st);
        /* Whether it fails at a survivor depends on when the failure is known: the
         * collective exchange fails once it is; a survivor may finish its part first. */
        CHECK(rc == MPI_SUCCESS || eclass(rc) == MPIX_ERR_PROC_FAILED, "write with a member dead: class %d",
              eclass(rc));
        /* The next collective call sees it for sure. */
        rc = MPI_File_write_at_all(fh, 0, buf, N, MPI_INT, &st);
        CHECK(eclass(rc) == MPIX_ERR_PROC_FAILED, "a collective write after the death: class %d", eclass(rc));
    }
    die_here(scene, "close");
    if (strcmp(scene, "open") != 0) {
        /* Close fails until the failure is recognized, and leaves the file open. */
        double t0 = MPI_Wtime();
        rc = MPI_File_close(&fh);
        CHECK(eclass(rc) == MPIX_ERR_PROC_FAILED, "close with a member dead: class %d", eclass(rc));
        CHECK(fh != MPI_FILE_NULL, "a failed close freed the handle");
        CHECK(MPI_Wtime() - t0 < 60, "close took %.1f s", MPI_Wtime() - t0);
        int active = 1;
        MPIX_File_collectives_enabled(fh, &active);
        CHECK(!active, "collectives enabled with an unrecognized failure");
        MPI_Group failed;
        int fs = 0;
        MPIX_File_get_failed(fh, &failed);
        MPI_Group_size(failed, &fs);
        CHECK(fs == 1, "MPIX_File_get_failed holds %d", fs);
        MPI_Group_free(&failed);
        rc = MPIX_File_validate(fh, &failed);
        CHECK(rc == MPI_SUCCESS, "file validate: %d", eclass(rc));
        MPI_Group wg;
        MPI_Comm_group(MPI_COMM_WORLD, &wg);
        int r0 = 0, w = -1;
        MPI_Group_size(failed, &fs);
        if (fs == 1)
            MPI_Group_translate_ranks(failed, 1, &r0, wg, &w);
        CHECK(fs == 1 && w == dead, "validate gave %d members (first %d)", fs, w);
        MPI_Group_free(&failed);
        MPI_Group_free(&wg);
        MPIX_File_collectives_enabled(fh, &active);
        CHECK(active, "collectives not enabled after validate");
    }
    /* The survivors rewrite and read back the array collectively. */
    rc = MPI_File_write_at_all(fh, 0, buf, N, MPI_INT, &st);
    CHECK(rc == MPI_SUCCESS, "write_at_all among the survivors: %d", eclass(rc));
    memset(back, 0, sizeof back);
    rc = MPI_File_read_at_all(fh, 0, back, N, MPI_INT, &st);
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += back[i] != buf[i];
    CHECK(rc == MPI_SUCCESS && bad == 0, "read_at_all: %d, %d wrong", eclass(rc), bad);
    rc = MPI_File_close(&fh);
    CHECK(rc == MPI_SUCCESS && fh == MPI_FILE_NULL, "close after validate: %d", eclass(rc));
    MPI_Type_free(&ftr);
    MPI_Info_free(&info);

    /* The whole file, as a serial reader sees it: survivors' slots right, the dead
     * rank's zero (it never wrote: it died before its first write). */
    MPI_Barrier(MPI_COMM_SELF);
    if (rank == 0) {
        int *all = calloc((size_t)N * size, sizeof(int));
        rc = MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_RDONLY | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh);
        CHECK(rc == MPI_SUCCESS, "reopen: %d", eclass(rc));
        MPI_File_read_at(fh, 0, all, N * size, MPI_INT, &st);
        bad = 0;
        for (int k = 0; k < N * size; k++)
            bad += all[k] != (k % size == dead ? 0 : k + 1);
        CHECK(bad == 0, "the file: %d ints wrong", bad);
        MPI_File_close(&fh);
        free(all);
    }
    MPI_Finalize();
    return check_report();
}
