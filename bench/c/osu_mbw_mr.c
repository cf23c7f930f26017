/*
 * osu_mbw_mr.c - OSU-style multi-pair bandwidth and message rate for any MPI (the
 * references of bench/compare.sh), the counterpart of bench/src/bin/osu_mbw_mr.rs.
 *
 * With n ranks (even), rank r < n/2 sends windows of WINDOW non-blocking messages to
 * rank r + n/2, which receives them into WINDOW posted receives and answers each
 * window with a 1-byte acknowledgement; all pairs run at once. Every sender measures
 * its own rate; the row is the sum over the pairs of MB/s (10^6 bytes per second) and
 * messages per second, as OSU's osu_mbw_mr.
 *
 * The receive slots are laid out as runthrough's programs lay them out, byte for byte:
 * one allocation of WINDOW slots of the largest size, slot w of a size-S round at byte
 * w * S (bench/src/lib.rs, Buffers::recv_slots).
 *
 * Usage: osu_mbw_mr [-m [MIN:]MAX] [-i ITERS] [-x WARMUP]
 * OSU defaults: 100 windows and 10 warmup, 20 and 2 above 8 KiB; sizes 1 B to 4 MiB.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "osu_common.h"

#define WINDOW 64
#define DEFAULT_MAX (4L << 20)
#define LARGE_MESSAGE_SIZE 8192

static void usage(const char *prog)
{
    fprintf(stderr, "usage: %s [-m [MIN:]MAX] [-i ITERS] [-x WARMUP]\n", prog);
}

int main(int argc, char **argv)
{
    int rank, size;
    long min_size = 1, max_size = DEFAULT_MAX, iters_opt = -1, warmup_opt = -1;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    for (int a = 1; a < argc; a++) {
        if (parse_osu_opt(argc, argv, &a, &min_size, &max_size, &iters_opt, &warmup_opt, 0) != 1) {
            if (rank == 0)
                usage(argv[0]);
            MPI_Finalize();
            return 2;
        }
    }
    if (min_size < 1 || min_size > max_size) {
        if (rank == 0)
            usage(argv[0]);
        MPI_Finalize();
        return 2;
    }
    if (size < 2 || size % 2 != 0) {
        if (rank == 0)
            fprintf(stderr, "this test requires an even number of processes, the job has %d\n", size);
        MPI_Finalize();
        return 1;
    }

    int pairs = size / 2;
    int sender = rank < pairs;
    int peer = sender ? rank + pairs : rank - pairs;
    size_t slots = sender ? 1 : WINDOW;
    char *sbuf = malloc((size_t)max_size);
    char *rbuf = malloc((size_t)max_size * slots);
    if (!sbuf || !rbuf) {
        fprintf(stderr, "out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(sbuf, 'a', (size_t)max_size);
    memset(rbuf, 'b', (size_t)max_size * slots);
    char ack = 0;
    MPI_Request reqs[WINDOW];

    if (rank == 0) {
        printf("# OSU MPI-style Multiple Bandwidth / Message Rate Test (osu_mbw_mr.c)\n");
        printf("# Size                  MB/s        Messages/s\n");
        fflush(stdout);
    }
    for (long sz = min_size; sz <= max_size; sz *= 2) {
        int count = (int)sz;
        int large = sz > LARGE_MESSAGE_SIZE;
        long iters = iters_opt > 0 ? iters_opt : (large ? 20 : 100);
        long warmup = warmup_opt >= 0 ? warmup_opt : (large ? 2 : 10);
        double t_start = 0.0, t_end;

        MPI_Barrier(MPI_COMM_WORLD);
        for (long i = 0; i < iters + warmup; i++) {
            if (i == warmup)
                t_start = MPI_Wtime();
            if (sender) {
                for (int w = 0; w < WINDOW; w++)
                    MPI_Isend(sbuf, count, MPI_CHAR, peer, 100, MPI_COMM_WORLD, &reqs[w]);
                MPI_Waitall(WINDOW, reqs, MPI_STATUSES_IGNORE);
                MPI_Recv(&ack, 1, MPI_CHAR, peer, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                for (int w = 0; w < WINDOW; w++)
                    MPI_Irecv(rbuf + (size_t)w * (size_t)sz, count, MPI_CHAR, peer, 100, MPI_COMM_WORLD,
                              &reqs[w]);
                MPI_Waitall(WINDOW, reqs, MPI_STATUSES_IGNORE);
                MPI_Send(&ack, 1, MPI_CHAR, peer, 101, MPI_COMM_WORLD);
            }
        }
        t_end = MPI_Wtime();
        double mine[2] = {0.0, 0.0}, sum[2];
        if (sender) {
            double secs = t_end - t_start;
            mine[0] = (double)sz * WINDOW * (double)iters / secs / 1e6;
            mine[1] = (double)WINDOW * (double)iters / secs;
        }
        MPI_Allreduce(mine, sum, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (rank == 0) {
            printf("%-10ld%18.2f%18.2f\n", sz, sum[0], sum[1]);
            fflush(stdout);
        }
    }

    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
