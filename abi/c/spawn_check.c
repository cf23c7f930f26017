/*
 * spawn_check.c - dynamic processes through the standard ABI (MPI-4.1 §11.8, R40).
 * One program: started by the launcher it is a parent, started by MPI_Comm_spawn a child
 * (MPI_Comm_get_parent tells). Scenes (argv[1] of the parents):
 *
 *   basic       spawn 1, 2 and 4 children with arguments (one with a space, one empty)
 *               and info wdir/path; MPI_UNIVERSE_SIZE, MPI_APPNUM, the children's own
 *               MPI_COMM_WORLD, messages both ways, merge, disconnect; spawn_multiple of
 *               two programs (appnums 0 and 1); a program that cannot run: MPI_ERR_SPAWN,
 *               every errcode MPI_ERR_SPAWN, MPI_COMM_NULL, and a spawn after it works;
 *               a child that exits with code 3 after disconnecting.
 *   kill-child  rtrun --kill of the first child as it starts: every parent's spawn has
 *               the same outcome (the launcher's kill may land before or after the
 *               child's start-up), and a second spawn works.
 *   universe    under rtrun --universe 3 with 2 parents: MPI_UNIVERSE_SIZE is 3, a spawn
 *               of 2 fails with MPI_ERR_SPAWN (nothing started), one of 1 works.
 *   kill-parent the last parent SIGKILLs itself just before the spawn: every surviving
 *               parent's spawn fails alike (MPIX_ERR_PROC_FAILED), then after
 *               MPIX_Comm_shrink a spawn from the survivors works.
 *
 * Parents print "spawn_check: rank R ok (N checks)", children "spawn_child: ..." with
 * their scene and rank in their own world.
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *prog_name = "spawn_check";
#define CHECK_PROG prog_name
#include "check.h"

static char self_path[4096];

/* The children: check what they were given, answer, merge, disconnect. */
static int child(int argc, char **argv, MPI_Comm parent)
{
    prog_name = "spawn_child";
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(argc >= 3 && strcmp(argv[1], "child") == 0, "argv[1] %s", argc > 1 ? argv[1] : "(none)");
    const char *scene = argc > 2 ? argv[2] : "";
    int inter, psize, *appnum, flag;
    MPI_Comm_test_inter(parent, &inter);
    MPI_Comm_remote_size(parent, &psize);
    CHECK(inter, "the parent communicator is an inter-communicator");
    MPI_Comm again;
    MPI_Comm_get_parent(&again);
    CHECK(again == parent, "get_parent gives the same handle");
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &appnum, &flag);
    CHECK(flag, "MPI_APPNUM is set in a spawned process");
    if (strcmp(scene, "basic") == 0) {
        int want = atoi(argv[3]);
        CHECK(size == want, "my world has %d processes, want %d", size, want);
        CHECK(argc == 6 && strcmp(argv[4], "two words") == 0 && argv[5][0] == 0, "arguments kept");
        char cwd[4096];
        CHECK(getcwd(cwd, sizeof cwd) && strcmp(cwd, "/tmp") == 0, "info wdir: cwd %s", cwd);
        CHECK(flag && *appnum == 0, "appnum %d", flag ? *appnum : -1);
    } else if (strcmp(scene, "multi") == 0) {
        CHECK(size == 3, "spawn_multiple: %d in my world", size);
        CHECK(flag && *appnum == (strcmp(argv[3], "A") == 0 ? 0 : 1), "appnum %d for %s", *appnum, argv[3]);
        CHECK(rank == (*appnum == 0 ? 0 : rank) && (rank == 0) == (*appnum == 0), "rank %d appnum %d", rank, *appnum);
    }
    /* Every parent sends its rank; the answer is the sum times my rank + 1. */
    long sum = 0;
    for (int p = 0; p < psize; p++) {
        long v = -1;
        MPI_Recv(&v, 1, MPI_LONG, p, 7, parent, MPI_STATUS_IGNORE);
        CHECK(v == p, "parent %d sent %ld", p, v);
        sum += v;
    }
    long answer = sum * (rank + 1);
    for (int p = 0; p < psize; p++)
        MPI_Send(&answer, 1, MPI_LONG, p, 8, parent);
    int total = 0, one = 1;
    MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(total == size, "the children's own allreduce: %d", total);
    MPI_Comm all;
    MPI_Intercomm_merge(parent, 1, &all);
    int arank, asize;
    MPI_Comm_rank(all, &arank);
    MPI_Comm_size(all, &asize);
    CHECK(asize == psize + size && arank == psize + rank, "merged: rank %d of %d", arank, asize);
    MPI_Comm_free(&all);
    MPI_Comm_disconnect(&parent);
    CHECK(parent == MPI_COMM_NULL, "disconnect sets MPI_COMM_NULL");
    MPI_Comm_get_parent(&again);
    CHECK(again == MPI_COMM_NULL, "after disconnect there is no parent");
    int failed = check_report();
    MPI_Finalize();
    return strcmp(scene, "exit3") == 0 ? 3 : failed;
}

/* Talks to `n` children of `inter`: the rank out, the answers back, then a merge. */
static void talk(MPI_Comm inter, int n, MPI_Comm comm)
{
    int me, parents;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &parents);
    long v = me;
    for (int c = 0; c < n; c++)
        MPI_Send(&v, 1, MPI_LONG, c, 7, inter);
    long sum = (long)parents * (parents - 1) / 2;
    for (int c = 0; c < n; c++) {
        long got = -1;
        MPI_Recv(&got, 1, MPI_LONG, c, 8, inter, MPI_STATUS_IGNORE);
        CHECK(got == sum * (c + 1), "child %d answered %ld, want %ld", c, got, sum * (c + 1));
    }
    MPI_Comm all;
    MPI_Intercomm_merge(inter, 0, &all);
    int arank, asize;
    MPI_Comm_rank(all, &arank);
    MPI_Comm_size(all, &asize);
    CHECK(asize == parents + n && arank == me, "merged: rank %d of %d", arank, asize);
    MPI_Comm_free(&all);
    MPI_Comm_disconnect(&inter);
}

static int spawn_n(MPI_Comm comm, const char *scene, int n, MPI_Info info, MPI_Comm *inter, int *codes)
{
    char count[16];
    snprintf(count, sizeof count, "%d", n);
    char *args[] = {"child", (char *)scene, count, "two words", "", NULL};
    return MPI_Comm_spawn(self_path, args, n, info, 0, comm, inter, codes);
}

static void basic(void)
{
    int *usize, flag;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, &usize, &flag);
    CHECK(flag && *usize >= size, "MPI_UNIVERSE_SIZE %d", flag ? *usize : -1);
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "wdir", "/tmp");
    for (int n = 1; n <= 4; n *= 2) {
        MPI_Comm inter;
        int codes[4] = {-1, -1, -1, -1};
        int rc = spawn_n(MPI_COMM_WORLD, "basic", n, info, &inter, codes);
        CHECK(rc == MPI_SUCCESS, "spawn %d: rc %d", n, rc);
        if (rc != MPI_SUCCESS)
            continue;
        for (int i = 0; i < n; i++)
            CHECK(codes[i] == MPI_SUCCESS, "errcode %d of %d", codes[i], i);
        int rsize, lsize;
        MPI_Comm_remote_size(inter, &rsize);
        MPI_Comm_size(inter, &lsize);
        CHECK(rsize == n && lsize == size, "sizes %d/%d", lsize, rsize);
        talk(inter, n, MPI_COMM_WORLD);
    }
    MPI_Info_free(&info);

    /* spawn_multiple: the program by its bare name found through info path. */
    char dir[4096], *base;
    strcpy(dir, self_path);
    base = strrchr(dir, '/');
    *base = 0;
    MPI_Info infos[2];
    MPI_Info_create(&infos[0]);
    MPI_Info_set(infos[0], "path", dir);
    infos[1] = MPI_INFO_NULL;
    char *cmds[2] = {base + 1, self_path};
    char *args_a[] = {"child", "multi", "A", NULL}, *args_b[] = {"child", "multi", "B", NULL};
    char **argvs[2] = {args_a, args_b};
    int procs[2] = {1, 2};
    MPI_Comm inter;
    int rc = MPI_Comm_spawn_multiple(2, cmds, argvs, procs, infos, 0, MPI_COMM_WORLD, &inter, MPI_ERRCODES_IGNORE);
    CHECK(rc == MPI_SUCCESS, "spawn_multiple rc %d", rc);
    if (rc == MPI_SUCCESS)
        talk(inter, 3, MPI_COMM_WORLD);
    MPI_Info_free(&infos[0]);

    /* A program that cannot run: nothing starts, every parent gets MPI_ERR_SPAWN. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int codes[2] = {0, 0};
    inter = MPI_COMM_WORLD;
    rc = MPI_Comm_spawn("/nonexistent/runthrough-child", MPI_ARGV_NULL, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter,
                        codes);
    CHECK(eclass(rc) == MPI_ERR_SPAWN, "missing program: class %d", eclass(rc));
    CHECK(inter == MPI_COMM_NULL, "no inter-communicator after a failed spawn");
    if (rank == 0)
        CHECK(codes[0] == MPI_ERR_SPAWN && codes[1] == MPI_ERR_SPAWN, "errcodes %d %d", codes[0], codes[1]);
    /* One per parent from MPI_COMM_SELF, all at once, then one that exits with 3. */
    rc = spawn_n(MPI_COMM_SELF, "self", 1, MPI_INFO_NULL, &inter, MPI_ERRCODES_IGNORE);
    CHECK(rc == MPI_SUCCESS, "spawn from MPI_COMM_SELF rc %d", rc);
    if (rc == MPI_SUCCESS)
        talk(inter, 1, MPI_COMM_SELF);
    rc = spawn_n(MPI_COMM_WORLD, "exit3", 1, MPI_INFO_NULL, &inter, MPI_ERRCODES_IGNORE);
    CHECK(rc == MPI_SUCCESS, "spawn exit3 rc %d", rc);
    if (rc == MPI_SUCCESS)
        talk(inter, 1, MPI_COMM_WORLD);
}

/* rtrun --universe 3 at 2 ranks: room for one child. */
static void universe(void)
{
    int *usize, flag;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, &usize, &flag);
    CHECK(flag && *usize == 3, "MPI_UNIVERSE_SIZE %d", flag ? *usize : -1);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm inter;
    int codes[2] = {0, 0};
    int rc = spawn_n(MPI_COMM_WORLD, "full", 2, MPI_INFO_NULL, &inter, codes);
    CHECK(eclass(rc) == MPI_ERR_SPAWN && inter == MPI_COMM_NULL, "beyond the universe: class %d", eclass(rc));
    CHECK(codes[0] == MPI_ERR_SPAWN && codes[1] == MPI_ERR_SPAWN, "errcodes %d %d", codes[0], codes[1]);
    rc = spawn_n(MPI_COMM_WORLD, "room", 1, MPI_INFO_NULL, &inter, MPI_ERRCODES_IGNORE);
    CHECK(rc == MPI_SUCCESS, "within the universe: rc %d", rc);
    if (rc == MPI_SUCCESS)
        talk(inter, 1, MPI_COMM_WORLD);
}

/* The first spawn's child is killed by rtrun as it starts: the same outcome everywhere. */
static void kill_child(void)
{
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm inter;
    int rc = spawn_n(MPI_COMM_WORLD, "victim", 2, MPI_INFO_NULL, &inter, MPI_ERRCODES_IGNORE);
    int ok = rc == MPI_SUCCESS, all_ok = 0, any_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    MPI_Allreduce(&ok, &any_ok, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
    CHECK(all_ok == any_ok, "the first spawn's outcome differs between parents");
    CHECK(ok || eclass(rc) == MPI_ERR_SPAWN, "a child killed at start: class %d", eclass(rc));
    if (rank == 0)
        printf("spawn_check: first spawn %s\n", ok ? "succeeded" : "failed with MPI_ERR_SPAWN");
    if (ok)
        MPI_Comm_free(&inter);
    rc = spawn_n(MPI_COMM_WORLD, "second", 2, MPI_INFO_NULL, &inter, MPI_ERRCODES_IGNORE);
    CHECK(rc == MPI_SUCCESS, "the second spawn: rc %d", rc);
    if (rc == MPI_SUCCESS)
        talk(inter, 2, MPI_COMM_WORLD);
}

/* The last parent dies just before the spawn. */
static void kill_parent(void)
{
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == size - 1) {
        fflush(stdout);
        raise(SIGKILL);
    }
    MPI_Comm inter;
    int rc = spawn_n(MPI_COMM_WORLD, "orphan", 2, MPI_INFO_NULL, &inter, MPI_ERRCODES_IGNORE);
    CHECK(eclass(rc) == MPIX_ERR_PROC_FAILED, "spawn with a dead parent: class %d", eclass(rc));
    CHECK(inter == MPI_COMM_NULL, "no inter-communicator");
    MPI_Comm alive;
    rc = MPIX_Comm_shrink(MPI_COMM_WORLD, &alive);
    CHECK(rc == MPI_SUCCESS, "shrink rc %d", rc);
    int n;
    MPI_Comm_size(alive, &n);
    CHECK(n == size - 1, "survivors %d", n);
    rc = spawn_n(alive, "after", 2, MPI_INFO_NULL, &inter, MPI_ERRCODES_IGNORE);
    CHECK(rc == MPI_SUCCESS, "spawn from the survivors: rc %d", rc);
    if (rc == MPI_SUCCESS)
        talk(inter, 2, alive);
    MPI_Comm_free(&alive);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (!realpath(argv[0], self_path))
        snprintf(self_path, sizeof self_path, "%s", argv[0]);
    MPI_Comm parent;
    MPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL)
        return child(argc, argv, parent);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *scene = argc > 1 ? argv[1] : "basic";
    if (strcmp(scene, "basic") == 0)
        basic();
    else if (strcmp(scene, "kill-child") == 0)
        kill_child();
    else if (strcmp(scene, "kill-parent") == 0)
        kill_parent();
    else if (strcmp(scene, "universe") == 0)
        universe();
    else
        CHECK(0, "unknown scene %s", scene);
    int failed = check_report();
    MPI_Finalize();
    return failed;
}
