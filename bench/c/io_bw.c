/*
 * io_bw.c - MPI-IO bandwidth of a 2-D block-decomposed array of doubles, plain C over
 * mpi.h (built with each MPI's compiler, or MPICH's mpicc_abi for runthrough).
 *
 *   io_bw DIR [-m MIN:MAX] [-r REPS]
 *
 * For each size S (MiB a rank, MIN to MAX doubling, default 1:64): the ranks form a
 * MPI_Dims_create grid, each owns a block of S MiB of a global row-major array, and the
 * file view is its subarray. A repetition opens the file, sets the view, and times one
 * MPI_File_write_all of the block (from a barrier to the slowest rank's return), closes,
 * reopens, times MPI_File_read_all, checks every value, closes and deletes. Then the
 * strided case: each rank writes S/16 MiB as 64-byte pieces interleaved with the other
 * ranks' (a vector view), by one independent MPI_File_write. Prints, per size, the median
 * over REPS (default 5) of the aggregate bandwidth in MiB/s:
 *   io write S MBPS / io read S MBPS / io strided S MBPS
 * and "wrong data" when a call failed or a value read back differs. The page cache is not flushed: the
 * figures are the libraries' paths to the file system, not the disk's speed.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 2) {
        if (rank == 0)
            fprintf(stderr, "usage: io_bw DIR [-m MIN:MAX] [-r REPS]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *dir = argv[1];
    int lo = 1, hi = 64, reps = 5;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "-m") == 0)
            sscanf(argv[i + 1], "%d:%d", &lo, &hi);
        else if (strcmp(argv[i], "-r") == 0)
            reps = atoi(argv[i + 1]);
    }
    int job = 0;
    if (rank == 0)
        job = (int)(MPI_Wtime() * 1000) & 0xffffff;
    MPI_Bcast(&job, 1, MPI_INT, 0, MPI_COMM_WORLD);
    char path[512];
    snprintf(path, sizeof path, "%s/io_bw_%d_%d", dir, size, job);
    int dims[2] = {0, 0};
    MPI_Dims_create(size, 2, dims);
    int coords[2] = {rank / dims[1], rank % dims[1]};
    double *t = malloc(reps * sizeof(double));
    for (int mib = lo; mib <= hi; mib *= 2) {
        long n = (long)mib << 17; /* doubles in S MiB */
        int rows = 1;
        while ((long)rows * rows * 4 <= n)
            rows *= 2;
        int cols = (int)(n / rows);
        int gsizes[2] = {dims[0] * rows, dims[1] * cols}, lsizes[2] = {rows, cols};
        int starts[2] = {coords[0] * rows, coords[1] * cols};
        MPI_Datatype block;
        MPI_Type_create_subarray(2, gsizes, lsizes, starts, MPI_ORDER_C, MPI_DOUBLE, &block);
        MPI_Type_commit(&block);
        double *buf = malloc(n * sizeof(double)), *back = malloc(n * sizeof(double));
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < cols; j++)
                buf[(long)i * cols + j] = (double)(starts[0] + i) * gsizes[1] + starts[1] + j;
        double bytes = (double)n * 8 * size / (1 << 20);
        double *tr = malloc(reps * sizeof(double));
        int bad = 0;
        for (int r = 0; r < reps; r++) {
            MPI_File fh;
            MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
            MPI_File_set_view(fh, 0, MPI_DOUBLE, block, "native", MPI_INFO_NULL);
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            bad += MPI_File_write_all(fh, buf, (int)n, MPI_DOUBLE, MPI_STATUS_IGNORE) != MPI_SUCCESS;
            double dt = MPI_Wtime() - t0, slowest;
            MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            t[r] = bytes / slowest;
            MPI_File_close(&fh);
            MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
            MPI_File_set_view(fh, 0, MPI_DOUBLE, block, "native", MPI_INFO_NULL);
            memset(back, 0, n * sizeof(double));
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
            bad += MPI_File_read_all(fh, back, (int)n, MPI_DOUBLE, MPI_STATUS_IGNORE) != MPI_SUCCESS;
            dt = MPI_Wtime() - t0;
            MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            tr[r] = bytes / slowest;
            bad += memcmp(buf, back, n * sizeof(double)) != 0;
            MPI_File_close(&fh);
            MPI_Barrier(MPI_COMM_WORLD);
            if (rank == 0)
                MPI_File_delete(path, MPI_INFO_NULL);
            MPI_Barrier(MPI_COMM_WORLD);
        }
        /* Strided: 64-byte pieces of every rank interleaved, S/16 MiB a rank. */
        MPI_Datatype piece, strided;
        MPI_Type_contiguous(8, MPI_DOUBLE, &piece);
        MPI_Type_commit(&piece);
        MPI_Type_create_resized(piece, 0, 64L * size, &strided);
        MPI_Type_commit(&strided);
        int pieces = (int)(n / 8 / 16);
        double *ts = malloc(reps * sizeof(double));
        for (int r = 0; r < reps; r++) {
            MPI_File fh;
            MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
            MPI_File_set_view(fh, 64L * rank, piece, strided, "native", MPI_INFO_NULL);
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            bad += MPI_File_write(fh, buf, pieces, piece, MPI_STATUS_IGNORE) != MPI_SUCCESS;
            double dt = MPI_Wtime() - t0, slowest;
            MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            ts[r] = (double)pieces * 64 * size / (1 << 20) / slowest;
            MPI_File_close(&fh);
            MPI_Barrier(MPI_COMM_WORLD);
            if (rank == 0)
                MPI_File_delete(path, MPI_INFO_NULL);
            MPI_Barrier(MPI_COMM_WORLD);
        }
        int anybad;
        MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (rank == 0) {
            printf("io write %d %.1f\n", mib, median(t, reps));
            printf("io read %d %.1f\n", mib, median(tr, reps));
            printf("io strided %d %.1f\n", mib, median(ts, reps));
            if (anybad)
                printf("wrong data at %d MiB\n", mib);
            fflush(stdout);
        }
        MPI_Type_free(&block);
        MPI_Type_free(&piece);
        MPI_Type_free(&strided);
        free(buf);
        free(back);
        free(tr);
        free(ts);
    }
    free(t);
    MPI_Finalize();
    return 0;
}
