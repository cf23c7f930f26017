/*
 * threads.c - the library starts no thread per operation: the process's thread count
 * (Threads: in /proc/self/status) during and after 10,000 MPI_Isend + MPI_Request_free
 * is what it was before them (sampled while each rendezvous send is still pending). Rank r sends to r+1 (the last to 0) and receives from r-1 with
 * MPI_Recv; every 100th message is 256 KiB (a rendezvous: its send is still pending when
 * its request is freed), the others 8 bytes. The receives check every payload, so a
 * freed request's data still arrives whole and in order. A non-contiguous (vector)
 * receive type on rank 0's sender side exercises the freed send of a packed copy.
 * Every rank prints "threads: rank R ok (before B after A)" or
 * "threads: rank R FAILED ..." and exits 1.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proc_threads.h"

#define N 10000
#define BIG (256 * 1024)

int main(int argc, char **argv) {
    int rank, size, bad = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int to = (rank + 1) % size, from = (rank + size - 1) % size;
    /* Strided send type: every other int of a 2n array (a packed copy travels). */
    MPI_Datatype every_other;
    MPI_Type_vector(2, 1, 2, MPI_INT, &every_other);
    MPI_Type_commit(&every_other);
    char *big = malloc(BIG), *got = malloc(BIG);
    for (int i = 0; i < BIG; i++)
        big[i] = (char)(i * 7 + 3);
    /* Warm up: one of each kind, so lazily started machinery is counted before. */
    for (int k = 0; k < 2; k++) {
        MPI_Request q;
        int pair[4] = {k, -1, k + 1, -1};
        MPI_Isend(pair, 1, every_other, to, 7, MPI_COMM_WORLD, &q);
        MPI_Request_free(&q);
        int in[2];
        MPI_Recv(in, 2, MPI_INT, from, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    int before = threads(), peak = before;
    static int vals[N][4];
    for (int i = 0; i < N; i++) {
        MPI_Request q;
        if (i % 100 == 99) {
            big[0] = (char)i;
            MPI_Isend(big, BIG, MPI_CHAR, to, 1, MPI_COMM_WORLD, &q);
        } else {
            vals[i][0] = i;
            vals[i][2] = rank;
            MPI_Isend(vals[i], 1, every_other, to, 1, MPI_COMM_WORLD, &q);
        }
        MPI_Request_free(&q);
        if (i % 100 == 99) {
            /* The 256 KiB send is still pending here: a thread per freed request would
             * be alive now. */
            int t = threads();
            if (t > peak)
                peak = t;
            MPI_Recv(got, BIG, MPI_CHAR, from, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (got[0] != (char)i || memcmp(got + 1, big + 1, BIG - 1) != 0) {
                if (bad++ < 5)
                    printf("threads: rank %d FAILED message %d: wrong 256 KiB payload\n", rank, i);
            }
        } else {
            int in[2] = {-1, -1};
            MPI_Recv(in, 2, MPI_INT, from, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (in[0] != i || in[1] != from) {
                if (bad++ < 5)
                    printf("threads: rank %d FAILED message %d: got (%d, %d), want (%d, %d)\n", rank, i, in[0],
                           in[1], i, from);
            }
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    int after = threads();
    if (before < 1 || after > before || peak > before) {
        printf("threads: rank %d FAILED thread count before %d, at most %d during, after %d (%d Isend + "
               "Request_free)\n",
               rank, before, peak, after, N);
        bad++;
    }
    if (!bad)
        printf("threads: rank %d ok (before %d, at most %d during, after %d)\n", rank, before, peak, after);
    free(big);
    free(got);
    MPI_Type_free(&every_other);
    MPI_Finalize();
    return bad ? 1 : 0;
}
