/*
 * osu_pt2pt.c - a small re-implementation of the OSU Micro-Benchmarks
 * point-to-point tests (osu_latency, osu_bw, osu_bibw), used by
 * bench/compare.sh to measure the reference MPIs with exactly the same
 * definitions and output format as runthrough's bench/src/bin/osu_*.rs.
 *
 *   latency: half round trip of a blocking MPI_Send/MPI_Recv ping-pong.
 *   bw:      rank 0 posts a window of 64 MPI_Isend, rank 1 a window of 64
 *            MPI_Irecv; both MPI_Waitall; rank 1 answers with a 1-byte ack
 *            (tag 101). Bandwidth = size * window * iters / time.
 *   bibw:    both ranks post 64 MPI_Irecv and 64 MPI_Isend, then MPI_Waitall.
 *            Bandwidth = 2 * size * window * iters / time.
 * MB/s = 10^6 bytes per second (as in OSU).
 *
 * Usage: osu_pt2pt latency|bw|bibw [-m [MIN:]MAX] [-i ITERS] [-x WARMUP] [-d]
 * -d: receive each message of a window into its own buffer slot instead of all
 *     into one buffer (OSU's way). runthrough's Rust programs must do this (the
 *     borrow rules forbid 64 receives into one buffer); -d measures what it costs.
 *     The layout is the Rust programs' byte for byte: one allocation of WINDOW
 *     slots of the largest size, slot w of a size-S round at byte w * S
 *     (bench/src/lib.rs, Buffers::recv_slots).
 * OSU defaults: 10000 iterations and 1000 warmup (latency) / 100 iterations
 * and 10 warmup (bw, bibw); for sizes > 8 KiB: 1000 / 100 (latency) and
 * 20 / 2 (bw, bibw).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "osu_common.h"

#define WINDOW 64
#define LARGE_MESSAGE_SIZE 8192
#define DEFAULT_MAX (1 << 22)

enum mode { LATENCY, BW, BIBW };

static void usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s latency|bw|bibw [-m [MIN:]MAX] [-i ITERS] [-x WARMUP] [-d]\n",
            prog);
}

int main(int argc, char **argv)
{
    int rank, size;
    enum mode mode;
    long min_size = -1, max_size = DEFAULT_MAX, iters_opt = -1, warmup_opt = -1;
    int distinct = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    if (argc < 2) {
        if (rank == 0)
            usage(argv[0]);
        MPI_Finalize();
        return 2;
    }
    if (strcmp(argv[1], "latency") == 0)
        mode = LATENCY;
    else if (strcmp(argv[1], "bw") == 0)
        mode = BW;
    else if (strcmp(argv[1], "bibw") == 0)
        mode = BIBW;
    else {
        if (rank == 0)
            usage(argv[0]);
        MPI_Finalize();
        return 2;
    }
    for (int a = 2; a < argc; a++) {
        int r = parse_osu_opt(argc, argv, &a, &min_size, &max_size, &iters_opt, &warmup_opt, 0);
        if (r == 0 && strcmp(argv[a], "-d") == 0) {
            distinct = 1;
        } else if (r != 1) {
            if (rank == 0)
                usage(argv[0]);
            MPI_Finalize();
            return 2;
        }
    }
    if (min_size < 0)
        min_size = (mode == LATENCY) ? 0 : 1;
    if (min_size > max_size) {
        if (rank == 0)
            usage(argv[0]);
        MPI_Finalize();
        return 2;
    }
    if (size != 2) {
        if (rank == 0)
            fprintf(stderr, "this test requires exactly two processes\n");
        MPI_Finalize();
        return 1;
    }

    size_t slots = distinct ? WINDOW : 1;
    size_t rbytes = (max_size > 0 ? (size_t)max_size : 1) * slots;
    char *sbuf = malloc(max_size > 0 ? (size_t)max_size : 1);
    char *rbuf = malloc(rbytes);
    if (!sbuf || !rbuf) {
        fprintf(stderr, "out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(sbuf, 'a', max_size > 0 ? (size_t)max_size : 1);
    memset(rbuf, 'b', rbytes);
    char ack = 0;

    if (rank == 0) {
        if (mode == LATENCY) {
            printf("# OSU MPI-style Latency Test (osu_pt2pt.c)\n");
            printf("# Size          Latency (us)\n");
        } else {
            printf("# OSU MPI-style %sBandwidth Test (osu_pt2pt.c)\n",
                   mode == BIBW ? "Bi-Directional " : "");
            printf("# Size      Bandwidth (MB/s)\n");
        }
        fflush(stdout);
    }

    MPI_Request reqs[2 * WINDOW];
    long first = min_size;
    for (long sz = first; sz <= max_size; sz = (sz == 0) ? 1 : sz * 2) {
        int count = (int)sz;
        size_t stride = distinct ? (size_t)sz : 0;
        long iters, warmup;
        int large = sz > LARGE_MESSAGE_SIZE;
        if (mode == LATENCY) {
            iters = large ? 1000 : 10000;
            warmup = large ? 100 : 1000;
        } else {
            iters = large ? 20 : 100;
            warmup = large ? 2 : 10;
        }
        if (iters_opt > 0)
            iters = iters_opt;
        if (warmup_opt >= 0)
            warmup = warmup_opt;

        MPI_Barrier(MPI_COMM_WORLD);
        double t_start = 0.0, t_end = 0.0;

        if (mode == LATENCY) {
            for (long i = 0; i < iters + warmup; i++) {
                if (i == warmup)
                    t_start = MPI_Wtime();
                if (rank == 0) {
                    MPI_Send(sbuf, count, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
                    MPI_Recv(rbuf, count, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(rbuf, count, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(sbuf, count, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
                }
            }
            t_end = MPI_Wtime();
            if (rank == 0) {
                double lat = (t_end - t_start) * 1e6 / (2.0 * (double)iters);
                printf("%-10ld%18.3f\n", sz, lat); /* three decimals: 0.1 us latencies */
                fflush(stdout);
            }
        } else if (mode == BW) {
            for (long i = 0; i < iters + warmup; i++) {
                if (i == warmup)
                    t_start = MPI_Wtime();
                if (rank == 0) {
                    for (int w = 0; w < WINDOW; w++)
                        MPI_Isend(sbuf, count, MPI_CHAR, 1, 100, MPI_COMM_WORLD, &reqs[w]);
                    MPI_Waitall(WINDOW, reqs, MPI_STATUSES_IGNORE);
                    MPI_Recv(&ack, 1, MPI_CHAR, 1, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    for (int w = 0; w < WINDOW; w++)
                        MPI_Irecv(rbuf + w * stride, count, MPI_CHAR, 0, 100, MPI_COMM_WORLD,
                                  &reqs[w]);
                    MPI_Waitall(WINDOW, reqs, MPI_STATUSES_IGNORE);
                    MPI_Send(&ack, 1, MPI_CHAR, 0, 101, MPI_COMM_WORLD);
                }
            }
            t_end = MPI_Wtime();
            if (rank == 0) {
                double bw = (double)sz * WINDOW * (double)iters / (t_end - t_start) / 1e6;
                printf("%-10ld%18.2f\n", sz, bw);
                fflush(stdout);
            }
        } else {
            int peer = 1 - rank;
            for (long i = 0; i < iters + warmup; i++) {
                if (i == warmup)
                    t_start = MPI_Wtime();
                for (int w = 0; w < WINDOW; w++)
                    MPI_Irecv(rbuf + w * stride, count, MPI_CHAR, peer, 10, MPI_COMM_WORLD,
                              &reqs[w]);
                for (int w = 0; w < WINDOW; w++)
                    MPI_Isend(sbuf, count, MPI_CHAR, peer, 10, MPI_COMM_WORLD, &reqs[WINDOW + w]);
                MPI_Waitall(2 * WINDOW, reqs, MPI_STATUSES_IGNORE);
            }
            t_end = MPI_Wtime();
            if (rank == 0) {
                double bw = 2.0 * (double)sz * WINDOW * (double)iters / (t_end - t_start) / 1e6;
                printf("%-10ld%18.2f\n", sz, bw);
                fflush(stdout);
            }
        }
    }

    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
