/*
 * osu_rma.c - the OSU micro-benchmarks' one-sided measurements (OSU 7's definitions:
 * osu_put_latency, osu_get_latency, osu_get_bw, osu_put_bibw, osu_acc_latency,
 * osu_get_acc_latency, osu_fop_latency, osu_cas_latency), one program for every MPI:
 * built with Open MPI's and MPICH's own mpicc, and with MPICH's mpicc_abi for
 * runthrough's libmpi_abi.so.1 (bench/compare_rma.sh). 2 ranks.
 *
 *   osu_rma TEST SYNC [-m [MIN:]MAX] [-i ITERS] [-x WARMUP] [-w allocate|create]
 *
 * TEST: put_lat get_lat get_bw put_bibw acc_lat get_acc_lat fop_lat cas_lat.
 * SYNC: flush (lock shared once, MPI_Win_flush after each operation, OSU's default),
 *       lock (MPI_Win_lock/unlock around each operation), fence (MPI_Win_fence after
 *       each operation, both ranks), pscw (post/start/complete/wait per operation).
 * Rank 0 is the origin; rank 1 the target (put_bibw: both, to each other). Latency in
 * microseconds per operation (op + its synchronization), bandwidth in MB/s (10^6 B/s)
 * over a window of 64 operations then one synchronization, as OSU. One line per size:
 *
 *   osu_rma TEST SYNC SIZE VALUE
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "osu_common.h"

#define WINDOW 64

enum sync { S_FLUSH, S_LOCK, S_FENCE, S_PSCW };

static int rank, peer;
static MPI_Group peer_group;

/* Opens an access epoch to the peer (origin side) for one operation or window. */
static void begin(enum sync s, MPI_Win win)
{
    switch (s) {
    case S_LOCK: MPI_Win_lock(MPI_LOCK_SHARED, peer, 0, win); break;
    case S_PSCW: MPI_Win_start(peer_group, 0, win); break;
    default: break;
    }
}

/* Completes what begin() opened (the operations are complete at the target after). */
static void end(enum sync s, MPI_Win win)
{
    switch (s) {
    case S_FLUSH: MPI_Win_flush(peer, win); break;
    case S_LOCK: MPI_Win_unlock(peer, win); break;
    case S_FENCE: MPI_Win_fence(0, win); break;
    case S_PSCW: MPI_Win_complete(win); break;
    }
}

/* The target's side of one epoch (fence and pscw need it; flush and lock do not). */
static void serve(enum sync s, MPI_Win win)
{
    switch (s) {
    case S_FENCE: MPI_Win_fence(0, win); break;
    case S_PSCW:
        MPI_Win_post(peer_group, 0, win);
        MPI_Win_wait(win);
        break;
    default: break;
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 3 || size != 2) {
        if (rank == 0)
            fprintf(stderr, "usage: osu_rma TEST SYNC [-m [MIN:]MAX] [-i N] [-x N] [-w allocate|create] (2 ranks)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *test = argv[1], *sname = argv[2];
    long min_size = 1, max_size = 1 << 20, iters = 10000, warmup = 100;
    int create = 0;
    for (int a = 3; a < argc; a++) {
        int r = parse_osu_opt(argc, argv, &a, &min_size, &max_size, &iters, &warmup, 0);
        if (r == 1)
            continue;
        if (r == 0 && strcmp(argv[a], "-w") == 0 && a + 1 < argc) {
            create = strcmp(argv[++a], "create") == 0;
            continue;
        }
        if (rank == 0)
            fprintf(stderr, "osu_rma: bad argument %s\n", argv[a]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    enum sync s = strcmp(sname, "lock") == 0    ? S_LOCK
                  : strcmp(sname, "fence") == 0 ? S_FENCE
                  : strcmp(sname, "pscw") == 0  ? S_PSCW
                                                : S_FLUSH;
    int atomic = strcmp(test, "fop_lat") == 0 || strcmp(test, "cas_lat") == 0;
    int bw = strcmp(test, "get_bw") == 0 || strcmp(test, "put_bibw") == 0;
    if (atomic)
        min_size = max_size = 8;
    peer = 1 - rank;
    MPI_Group world_group;
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    MPI_Group_incl(world_group, 1, &peer, &peer_group);

    size_t bytes = (size_t)max_size * (bw ? WINDOW : 1);
    if (bytes < 64)
        bytes = 64; /* a compare-and-swap's compare and result words */
    char *src = malloc(bytes), *dst = malloc(bytes);
    memset(src, 1, bytes);
    memset(dst, 0, bytes);
    char *base;
    MPI_Win win;
    if (create) {
        base = malloc(bytes);
        memset(base, 0, bytes);
        MPI_Win_create(base, (MPI_Aint)bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    } else {
        MPI_Win_allocate((MPI_Aint)bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
        memset(base, 0, bytes);
    }
    if (s == S_FLUSH)
        MPI_Win_lock(MPI_LOCK_SHARED, peer, 0, win);
    if (s == S_FENCE)
        MPI_Win_fence(0, win);

    for (long sz = min_size; sz <= max_size; sz = sz ? sz * 2 : 1) {
        long n = iters, w = warmup;
        if (sz > 8192) {
            n = iters / 10 > 100 ? iters / 10 : 100;
            w = warmup / 10 > 10 ? warmup / 10 : 10;
        }
        int ops = bw ? WINDOW : 1;
        int count = (int)(strcmp(test, "acc_lat") == 0 || strcmp(test, "get_acc_lat") == 0 ? sz / 4 : sz);
        if (count == 0 && !atomic)
            continue;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = 0;
        int origin = rank == 0 || strcmp(test, "put_bibw") == 0;
        for (long i = 0; i < n + w; i++) {
            if (i == w)
                t0 = MPI_Wtime();
            if (strcmp(test, "put_bibw") == 0 && s == S_PSCW)
                MPI_Win_post(peer_group, 0, win);
            if (origin) {
                begin(s, win);
                for (int k = 0; k < ops; k++) {
                    MPI_Aint disp = (MPI_Aint)k * sz;
                    char *o = src + k * sz, *r = dst + k * sz;
                    if (strcmp(test, "put_lat") == 0 || strcmp(test, "put_bibw") == 0)
                        MPI_Put(o, count, MPI_CHAR, peer, disp, count, MPI_CHAR, win);
                    else if (strcmp(test, "get_lat") == 0 || strcmp(test, "get_bw") == 0)
                        MPI_Get(r, count, MPI_CHAR, peer, disp, count, MPI_CHAR, win);
                    else if (strcmp(test, "acc_lat") == 0)
                        MPI_Accumulate(o, count, MPI_INT, peer, 0, count, MPI_INT, MPI_SUM, win);
                    else if (strcmp(test, "get_acc_lat") == 0)
                        MPI_Get_accumulate(o, count, MPI_INT, r, count, MPI_INT, peer, 0, count, MPI_INT, MPI_SUM, win);
                    else if (strcmp(test, "fop_lat") == 0)
                        MPI_Fetch_and_op(o, r, MPI_LONG_LONG, peer, 0, MPI_SUM, win);
                    else if (strcmp(test, "cas_lat") == 0)
                        MPI_Compare_and_swap(o, r, r + 8, MPI_LONG_LONG, peer, 0, win);
                }
                end(s, win);
                if (strcmp(test, "put_bibw") == 0 && s == S_PSCW)
                    MPI_Win_wait(win);
            } else {
                serve(s, win);
            }
        }
        double t = MPI_Wtime() - t0;
        if (rank == 0) {
            double v = bw ? (double)sz * ops * n / t / 1e6 * (strcmp(test, "put_bibw") == 0 ? 2 : 1)
                          : t * 1e6 / n;
            printf("osu_rma %s %s %ld %.3f\n", test, sname, sz, v);
            fflush(stdout);
        }
        if (atomic)
            break;
    }
    if (s == S_FLUSH)
        MPI_Win_unlock(peer, win);
    if (s == S_FENCE)
        MPI_Win_fence(0, win);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_free(&win);
    if (create)
        free(base);
    MPI_Group_free(&peer_group);
    MPI_Group_free(&world_group);
    free(src);
    free(dst);
    MPI_Finalize();
    return 0;
}
