/* halo.c - a halo exchange on a periodic Cartesian grid, one program for every MPI (built
 * with each MPI's mpicc; with MPICH's mpicc_abi for runthrough's libmpi_abi.so.1).
 *
 *   halo NDIMS MODE [-m [MIN:]MAX] [-i N] [-x N]
 *
 * NDIMS 2 or 3: MPI_Dims_create over the world, every dimension periodic. Each iteration
 * exchanges one face of SIZE bytes with each of the 2 x NDIMS neighbours:
 *   ngh  MPI_Neighbor_alltoall on the grid communicator (one call);
 *   p2p  MPI_Irecv from and MPI_Isend to each neighbour, then MPI_Waitall (the
 *        hand-written exchange, in the same block order).
 * Sizes from MIN to MAX bytes, doubling by 8 (default 8:1048576); N iterations a size
 * (default 1000, fewer above 64 KiB), after -x warm-up iterations (default 100). Prints
 * one line a size, "halo NDIMS MODE SIZE USEC": the mean time of one exchange, the
 * slowest rank's. Every face is checked once per size: the block from a neighbour holds
 * that neighbour's rank. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 3) {
        if (rank == 0)
            fprintf(stderr, "usage: halo NDIMS ngh|p2p [-m [MIN:]MAX] [-i N] [-x N]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int nd = atoi(argv[1]), ngh = strcmp(argv[2], "ngh") == 0;
    long lo = 8, hi = 1 << 20, iters = 1000, warm = 100;
    for (int a = 3; a + 1 < argc; a += 2) {
        if (strcmp(argv[a], "-m") == 0) {
            char *colon = strchr(argv[a + 1], ':');
            if (colon) {
                lo = atol(argv[a + 1]);
                hi = atol(colon + 1);
            } else {
                hi = atol(argv[a + 1]);
            }
        } else if (strcmp(argv[a], "-i") == 0) {
            iters = atol(argv[a + 1]);
        } else if (strcmp(argv[a], "-x") == 0) {
            warm = atol(argv[a + 1]);
        }
    }
    if (nd < 1 || nd > 3) {
        if (rank == 0)
            fprintf(stderr, "halo: NDIMS 1 to 3\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int dims[3] = {0, 0, 0}, periods[3] = {1, 1, 1};
    MPI_Dims_create(size, nd, dims);
    MPI_Comm grid;
    MPI_Cart_create(MPI_COMM_WORLD, nd, dims, periods, 0, &grid);
    int nb[6];
    for (int d = 0; d < nd; d++)
        MPI_Cart_shift(grid, d, 1, &nb[2 * d], &nb[2 * d + 1]);
    int nn = 2 * nd;
    char *send = malloc((size_t)hi * nn), *recv = malloc((size_t)hi * nn);
    MPI_Request req[12];
    int bad = 0;
    for (long sz = lo; sz <= hi; sz *= 8) {
        long n = sz > 65536 ? (iters / 10 > 10 ? iters / 10 : 10) : iters;
        for (int k = 0; k < nn; k++)
            memset(send + k * sz, rank & 0x7f, sz);
        double t0 = 0;
        for (long it = -warm; it < n; it++) {
            if (it == 0) {
                MPI_Barrier(grid);
                t0 = MPI_Wtime();
            }
            if (ngh) {
                MPI_Neighbor_alltoall(send, (int)sz, MPI_BYTE, recv, (int)sz, MPI_BYTE, grid);
            } else {
                /* Block 2d comes from below and carries what it sent up (its block 2d+1):
                 * tag each message with the direction it travels. */
                for (int d = 0; d < nd; d++) {
                    MPI_Irecv(recv + (2 * d) * sz, (int)sz, MPI_BYTE, nb[2 * d], 2 * d + 1, grid, &req[4 * d]);
                    MPI_Irecv(recv + (2 * d + 1) * sz, (int)sz, MPI_BYTE, nb[2 * d + 1], 2 * d, grid, &req[4 * d + 1]);
                    MPI_Isend(send + (2 * d + 1) * sz, (int)sz, MPI_BYTE, nb[2 * d + 1], 2 * d + 1, grid,
                              &req[4 * d + 2]);
                    MPI_Isend(send + (2 * d) * sz, (int)sz, MPI_BYTE, nb[2 * d], 2 * d, grid, &req[4 * d + 3]);
                }
                MPI_Waitall(4 * nd, req, MPI_STATUSES_IGNORE);
            }
        }
        double mine = (MPI_Wtime() - t0) / n * 1e6, worst = 0;
        for (int k = 0; k < nn; k++)
            if (recv[k * sz] != (char)(nb[k] & 0x7f) || recv[k * sz + sz - 1] != (char)(nb[k] & 0x7f))
                bad++;
        MPI_Reduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, grid);
        if (rank == 0)
            printf("halo %d %s %ld %.3f\n", nd, argv[2], sz, worst);
    }
    int allbad = 0;
    MPI_Reduce(&bad, &allbad, 1, MPI_INT, MPI_SUM, 0, grid);
    if (rank == 0 && allbad)
        printf("halo: %d faces held the wrong data\n", allbad);
    free(send);
    free(recv);
    MPI_Comm_free(&grid);
    MPI_Finalize();
    return allbad ? 1 : 0;
}
