/*
 * osu_coll.c - a small re-implementation of the OSU Micro-Benchmarks collective
 * latency tests (osu_barrier, osu_bcast, osu_reduce, osu_allreduce,
 * osu_allgather, osu_alltoall), used by bench/compare.sh to measure the
 * reference MPIs with exactly the same method and output format as
 * runthrough's bench/src/bin/osu_<name>.rs (bench/src/coll.rs).
 *
 * Method (as OSU 5-7): each rank times every call alone and, except in the
 * barrier test, separates consecutive calls by an untimed MPI_Barrier; each
 * rank's average latency is summed to rank 0 with MPI_Reduce and divided by
 * the number of ranks. reduce/allreduce sum MPI_FLOAT vectors of SIZE/4
 * elements (sizes are whole floats, at least one); bcast and reduce use root
 * 0; allgather and alltoall move SIZE bytes per rank and per pair of ranks.
 * Send buffers hold 1s; after the timed loop each rank checks its result.
 *
 * Usage: osu_coll [i]barrier|[i]bcast|[i]reduce|[i]allreduce|[i]allgather|[i]alltoall
 *                 [-m [MIN:]MAX] [-i ITERS] [-x WARMUP]
 * The names with an `i` time the nonblocking collective started and at once waited for
 * (MPI_I... + MPI_Wait: OSU's osu_i* "pure communication latency", without their
 * overlap phase).
 * Defaults (OSU's): sizes 1 (4 for reduce/allreduce) to 1 MiB; 1000 iterations
 * and 100 warmup, 100 and 10 for sizes > 8 KiB. The barrier test prints one
 * value and ignores -m.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "osu_common.h"

#define LARGE_MESSAGE_SIZE 8192
#define DEFAULT_MAX (1 << 20)

enum coll { BARRIER, BCAST, REDUCE, ALLREDUCE, ALLGATHER, ALLTOALL };

static const char *const names[] = {"barrier", "bcast", "reduce", "allreduce", "allgather", "alltoall"};
static const char *const titles[] = {"Barrier", "Broadcast", "Reduce", "Allreduce", "Allgather",
                                     "All-to-All"};

static void usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s [i]barrier|[i]bcast|[i]reduce|[i]allreduce|[i]allgather|[i]alltoall "
            "[-m [MIN:]MAX] [-i ITERS] [-x WARMUP]\n",
            prog);
}

static int bad_usage(int rank, const char *prog)
{
    if (rank == 0)
        usage(prog);
    MPI_Finalize();
    return 2;
}

/* One operation on count elements (bytes, or floats for the reductions). */
static void run_op(enum coll c, void *sbuf, void *rbuf, int count, int nb)
{
    if (nb) {
        MPI_Request q;
        switch (c) {
        case BARRIER:
            MPI_Ibarrier(MPI_COMM_WORLD, &q);
            break;
        case BCAST:
            MPI_Ibcast(rbuf, count, MPI_CHAR, 0, MPI_COMM_WORLD, &q);
            break;
        case REDUCE:
            MPI_Ireduce(sbuf, rbuf, count, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD, &q);
            break;
        case ALLREDUCE:
            MPI_Iallreduce(sbuf, rbuf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &q);
            break;
        case ALLGATHER:
            MPI_Iallgather(sbuf, count, MPI_CHAR, rbuf, count, MPI_CHAR, MPI_COMM_WORLD, &q);
            break;
        case ALLTOALL:
            MPI_Ialltoall(sbuf, count, MPI_CHAR, rbuf, count, MPI_CHAR, MPI_COMM_WORLD, &q);
            break;
        }
        MPI_Wait(&q, MPI_STATUS_IGNORE);
        return;
    }
    switch (c) {
    case BARRIER:
        MPI_Barrier(MPI_COMM_WORLD);
        break;
    case BCAST:
        MPI_Bcast(rbuf, count, MPI_CHAR, 0, MPI_COMM_WORLD);
        break;
    case REDUCE:
        MPI_Reduce(sbuf, rbuf, count, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
        break;
    case ALLREDUCE:
        MPI_Allreduce(sbuf, rbuf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    case ALLGATHER:
        MPI_Allgather(sbuf, count, MPI_CHAR, rbuf, count, MPI_CHAR, MPI_COMM_WORLD);
        break;
    case ALLTOALL:
        MPI_Alltoall(sbuf, count, MPI_CHAR, rbuf, count, MPI_CHAR, MPI_COMM_WORLD);
        break;
    }
}

int main(int argc, char **argv)
{
    int rank, nprocs;
    int c = -1;
    long min_size = -1, max_size = DEFAULT_MAX, iters_opt = -1, warmup_opt = -1;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);

    if (argc < 2)
        return bad_usage(rank, argv[0]);
    int nb = argv[1][0] == 'i'; /* no blocking name starts with i */
    for (int i = 0; i < 6; i++)
        if (strcmp(argv[1] + nb, names[i]) == 0)
            c = i;
    if (c < 0)
        return bad_usage(rank, argv[0]);
    for (int a = 2; a < argc; a++)
        if (parse_osu_opt(argc, argv, &a, &min_size, &max_size, &iters_opt, &warmup_opt, 1) != 1)
            return bad_usage(rank, argv[0]);
    long elem = (c == REDUCE || c == ALLREDUCE) ? (long)sizeof(float) : 1;
    if (c == BARRIER) {
        min_size = 0;
        max_size = 0;
    } else {
        if (min_size < 0)
            min_size = elem;
        min_size = (min_size / elem < 1 ? 1 : min_size / elem) * elem;
    }
    if (min_size > max_size)
        return bad_usage(rank, argv[0]);
    if (nprocs < 2) {
        if (rank == 0)
            fprintf(stderr, "this test requires at least two processes\n");
        MPI_Finalize();
        return 1;
    }

    long sblocks = 0, rblocks = 0;
    switch (c) {
    case BARRIER: break;
    case BCAST: rblocks = 1; break;
    case REDUCE:
    case ALLREDUCE: sblocks = rblocks = 1; break;
    case ALLGATHER: sblocks = 1; rblocks = nprocs; break;
    case ALLTOALL: sblocks = rblocks = nprocs; break;
    }
    size_t sbytes = (size_t)max_size * (size_t)sblocks, rbytes = (size_t)max_size * (size_t)rblocks;
    char *sbuf = malloc(sbytes ? sbytes : 1);
    char *rbuf = malloc(rbytes ? rbytes : 1);
    if (!sbuf || !rbuf) {
        fprintf(stderr, "out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (elem == 1) {
        memset(sbuf, 1, sbytes);
        memset(rbuf, (c == BCAST && rank == 0) ? 1 : 0, rbytes);
    } else {
        for (size_t i = 0; i < sbytes / sizeof(float); i++)
            ((float *)sbuf)[i] = 1.0f;
        memset(rbuf, 0, rbytes);
    }

    if (rank == 0) {
        printf("# OSU MPI-style %s%s Latency Test (osu_coll.c)\n", nb ? "Nonblocking " : "", titles[c]);
        if (c == BARRIER)
            printf("# Avg Latency(us)\n");
        else
            printf("%-10s%18s\n", "# Size", "Avg Latency(us)");
        fflush(stdout);
    }

    for (long sz = min_size; sz <= max_size; sz = (sz == 0) ? 1 : sz * 2) {
        int count = (int)(sz / elem);
        int large = sz > LARGE_MESSAGE_SIZE;
        long iters = large ? 100 : 1000, warmup = large ? 10 : 100;
        if (iters_opt > 0)
            iters = iters_opt;
        if (warmup_opt >= 0)
            warmup = warmup_opt;

        MPI_Barrier(MPI_COMM_WORLD);
        double timer = 0.0;
        for (long i = 0; i < iters + warmup; i++) {
            double t0 = MPI_Wtime();
            run_op(c, sbuf, rbuf, count, nb);
            double t1 = MPI_Wtime();
            if (i >= warmup)
                timer += t1 - t0;
            if (c != BARRIER)
                MPI_Barrier(MPI_COMM_WORLD);
        }
        /* The result every rank must hold (reduce: only the root). */
        long bad = -1;
        size_t n = (size_t)count * (size_t)rblocks;
        for (size_t i = 0; i < n && bad < 0; i++) {
            if (elem == 1) {
                if (rbuf[i] != 1)
                    bad = (long)i;
            } else if ((c == ALLREDUCE || rank == 0) && ((float *)rbuf)[i] != (float)nprocs) {
                bad = (long)i;
            }
        }
        if (bad >= 0) {
            fprintf(stderr, "rank %d: wrong result at size %ld, element %ld\n", rank, sz, bad);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        double lat = timer * 1e6 / (double)iters, sum = 0.0;
        MPI_Reduce(&lat, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            if (c == BARRIER)
                printf("%18.2f\n", sum / nprocs);
            else
                printf("%-10ld%18.2f\n", sz, sum / nprocs);
            fflush(stdout);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (c == BARRIER)
            break;
    }

    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
