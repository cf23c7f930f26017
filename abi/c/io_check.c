/*
 * io_check.c - MPI-IO through the standard ABI, checked byte by byte against what
 * MPI-4.1 chapter 14 says, at any number of ranks (argv[1]: a directory for the files,
 * default /tmp). Plain C over mpi.h: the same binary runs on MPICH (ROMIO).
 *
 * Covers: open/close/delete and the access modes (CREATE, EXCL, RDONLY, WRONLY, RDWR,
 * DELETE_ON_CLOSE, APPEND, bad combinations), get/set_size, preallocate, sync,
 * get_amode/get_group/get_info; explicit offsets, the individual pointer (seek,
 * get_position, get_byte_offset) and the shared pointer (write_shared, read_shared,
 * ordered, seek_shared); a strided view (vector filetype, int etype) written
 * independently and collectively (interleaved: collective buffering) and read back;
 * a derived memory type; nonblocking and split collective forms; atomic mode; the
 * external32 representation (big-endian bytes in the file); errors:
 * negative offset, a read past the end (short count), an etype that does not divide
 * the filetype, writing a read-only file, a missing file.
 */
#define CHECK_PROG "io_check"
#include "check.h"

#include <stdlib.h>
#include <string.h>

#include <unistd.h>

static char path[512];
static int job; /* rank 0's pid: runs side by side use different files */

static void name(const char *dir, const char *what)
{
    snprintf(path, sizeof path, "%s/rt_io_check_%s_%d_%d", dir, what, size, job);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    job = (int)getpid();
    MPI_Bcast(&job, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_File fh;
    MPI_Status st;
    int rc, count;

    /* ---- open modes and errors ---- */
    name(dir, "modes");
    if (rank == 0)
        MPI_File_delete(path, MPI_INFO_NULL);
    MPI_Barrier(MPI_COMM_WORLD);
    rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
    CHECK(eclass(rc) == MPI_ERR_NO_SUCH_FILE, "open of a missing file: class %d", eclass(rc));
    rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY | MPI_MODE_CREATE, MPI_INFO_NULL, &fh);
    CHECK(eclass(rc) == MPI_ERR_AMODE, "RDONLY|CREATE: class %d", eclass(rc));
    rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
    CHECK(eclass(rc) == MPI_ERR_AMODE, "RDWR|WRONLY: class %d", eclass(rc));
    rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR | MPI_MODE_CREATE | MPI_MODE_EXCL, MPI_INFO_NULL, &fh);
    CHECK(rc == MPI_SUCCESS, "CREATE|EXCL of a new file: %d", rc);
    int amode = 0;
    MPI_File_get_amode(fh, &amode);
    CHECK(amode == (MPI_MODE_RDWR | MPI_MODE_CREATE | MPI_MODE_EXCL), "get_amode %d", amode);
    MPI_Group g, wg;
    int cmp;
    MPI_File_get_group(fh, &g);
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    MPI_Group_compare(g, wg, &cmp);
    CHECK(cmp == MPI_IDENT, "get_group: %d", cmp);
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
    MPI_Offset sz = -1;
    MPI_File_set_size(fh, 1000);
    MPI_File_get_size(fh, &sz);
    CHECK(sz == 1000, "set_size 1000 -> %lld", (long long)sz);
    MPI_File_preallocate(fh, 4096);
    MPI_File_get_size(fh, &sz);
    CHECK(sz == 4096, "preallocate 4096 -> %lld", (long long)sz);
    MPI_File_set_size(fh, 0);
    MPI_File_get_size(fh, &sz);
    CHECK(sz == 0, "set_size 0 -> %lld", (long long)sz);
    int one = 7;
    rc = MPI_File_write_at(fh, -1, &one, 1, MPI_INT, &st);
    CHECK(eclass(rc) == MPI_ERR_ARG, "negative offset: class %d", eclass(rc));
    MPI_File_close(&fh);
    rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR | MPI_MODE_CREATE | MPI_MODE_EXCL, MPI_INFO_NULL, &fh);
    CHECK(eclass(rc) == MPI_ERR_FILE_EXISTS, "CREATE|EXCL of an existing file: class %d", eclass(rc));
    rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
    CHECK(rc == MPI_SUCCESS, "RDONLY open: %d", rc);
    rc = MPI_File_write_at(fh, 0, &one, 1, MPI_INT, &st);
    CHECK(rc != MPI_SUCCESS, "a write to a RDONLY file succeeded");
    MPI_File_close(&fh);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        rc = MPI_File_delete(path, MPI_INFO_NULL);
        CHECK(rc == MPI_SUCCESS, "delete: %d", rc);
        rc = MPI_File_delete(path, MPI_INFO_NULL);
        CHECK(eclass(rc) == MPI_ERR_NO_SUCH_FILE, "delete of a missing file: class %d", eclass(rc));
    }

    /* ---- explicit offsets, individual pointer, read past the end ---- */
    name(dir, "blocks");
    MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR | MPI_MODE_CREATE | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh);
    MPI_File_set_size(fh, 0);
    enum { N = 100 };
    int buf[N], back[N];
    for (int i = 0; i < N; i++)
        buf[i] = rank * 1000 + i;
    rc = MPI_File_write_at(fh, (MPI_Offset)rank * N * sizeof(int), buf, N, MPI_INT, &st);
    MPI_Get_count(&st, MPI_INT, &count);
    CHECK(rc == MPI_SUCCESS && count == N, "write_at rc %d count %d", rc, count);
    MPI_Barrier(MPI_COMM_WORLD);
    int peer = (rank + 1) % size;
    memset(back, 0, sizeof back);
    MPI_File_read_at(fh, (MPI_Offset)peer * N * sizeof(int), back, N, MPI_INT, &st);
    int bad = 0;
    for (int i = 0; i < N; i++)
        bad += back[i] != peer * 1000 + i;
    CHECK(bad == 0, "read_at of rank %d's block: %d wrong", peer, bad);
    /* Past the end: a short count, not an error. */
    rc = MPI_File_read_at(fh, (MPI_Offset)(size * N - 10) * sizeof(int), back, N, MPI_INT, &st);
    MPI_Get_count(&st, MPI_INT, &count);
    CHECK(rc == MPI_SUCCESS && count == 10, "read past the end: rc %d count %d (want 10)", rc, count);
    MPI_File_seek(fh, (MPI_Offset)peer * N * sizeof(int) + 8, MPI_SEEK_SET);
    MPI_File_read(fh, back, 2, MPI_INT, &st);
    MPI_Offset pos;
    MPI_File_get_position(fh, &pos);
    CHECK(back[0] == peer * 1000 + 2 && back[1] == peer * 1000 + 3, "seek+read %d %d", back[0], back[1]);
    CHECK(pos == (MPI_Offset)(peer * N * sizeof(int) + 16), "position %lld", (long long)pos);
    MPI_File_seek(fh, -4, MPI_SEEK_END);
    MPI_File_get_position(fh, &pos);
    CHECK(pos == (MPI_Offset)(size * N * sizeof(int) - 4), "SEEK_END position %lld", (long long)pos);
    MPI_File_close(&fh);
    MPI_Barrier(MPI_COMM_WORLD);
    rc = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
    CHECK(eclass(rc) == MPI_ERR_NO_SUCH_FILE, "DELETE_ON_CLOSE left the file: class %d", eclass(rc));

    /* ---- a strided view: rank r owns int k*size + r (a vector filetype) ---- */
    name(dir, "strided");
    MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR | MPI_MODE_CREATE, MPI_INFO_NULL, &fh);
    MPI_File_set_size(fh, 0);
    MPI_Datatype ft, ftr;
    MPI_Type_vector(1, 1, size, MPI_INT, &ft);
    MPI_Type_create_resized(ft, 0, (MPI_Aint)size * sizeof(int), &ftr);
    MPI_Type_commit(&ftr);
    MPI_Offset disp = 16;
    rc = MPI_File_set_view(fh, disp + rank * sizeof(int), MPI_INT, ftr, "native", MPI_INFO_NULL);
    CHECK(rc == MPI_SUCCESS, "set_view: %d", rc);
    MPI_Offset byte;
    MPI_File_get_byte_offset(fh, 3, &byte);
    CHECK(byte == disp + rank * 4 + 3 * size * 4, "get_byte_offset(3) = %lld", (long long)byte);
    for (int i = 0; i < N; i++)
        buf[i] = i * size + rank + 1;
    /* First half independently, second half collectively (interleaved ranges). */
    MPI_File_write_at(fh, 0, buf, N / 2, MPI_INT, &st);
    rc = MPI_File_write_at_all(fh, N / 2, buf + N / 2, N / 2, MPI_INT, &st);
    MPI_Get_count(&st, MPI_INT, &count);
    CHECK(rc == MPI_SUCCESS && count == N / 2, "write_at_all rc %d count %d", rc, count);
    MPI_File_sync(fh);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_File_sync(fh);
    MPI_File_get_size(fh, &sz);
    CHECK(sz == disp + (MPI_Offset)N * size * 4, "strided file size %lld", (long long)sz);
    memset(back, 0, sizeof back);
    rc = MPI_File_read_at_all(fh, 0, back, N, MPI_INT, &st);
    MPI_Get_count(&st, MPI_INT, &count);
    bad = 0;
    for (int i = 0; i < N; i++)
        bad += back[i] != buf[i];
    CHECK(rc == MPI_SUCCESS && count == N && bad == 0, "read_at_all rc %d count %d, %d wrong", rc, count, bad);
    /* The whole file through the default view, at rank 0: the serial reference. */
    MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL);
    if (rank == 0) {
        int *all = malloc((size_t)N * size * sizeof(int));
        MPI_File_read_at(fh, disp, all, N * size, MPI_INT, &st);
        bad = 0;
        for (int k = 0; k < N * size; k++)
            bad += all[k] != k + 1;
        CHECK(bad == 0, "the file byte by byte: %d ints wrong", bad);
        free(all);
    }
    /* An etype that does not divide the filetype. */
    MPI_Datatype three;
    MPI_Type_contiguous(3, MPI_BYTE, &three);
    MPI_Type_commit(&three);
    rc = MPI_File_set_view(fh, 0, MPI_INT, three, "native", MPI_INFO_NULL);
    CHECK(rc != MPI_SUCCESS, "a view whose etype does not divide the filetype was taken");
    MPI_Type_free(&three);
    /* get_view gives back the types. */
    MPI_File_set_view(fh, 4, MPI_INT, ftr, "native", MPI_INFO_NULL);
    MPI_Datatype et, ft2;
    char rep[MPI_MAX_DATAREP_STRING];
    MPI_File_get_view(fh, &disp, &et, &ft2, rep);
    MPI_Aint lb, ext;
    MPI_Type_get_extent(ft2, &lb, &ext);
    CHECK(disp == 4 && et == MPI_INT && ext == (MPI_Aint)size * 4 && strcmp(rep, "native") == 0,
          "get_view disp %lld ext %ld rep %s", (long long)disp, (long)ext, rep);
    if (ft2 != ftr && ft2 != MPI_BYTE)
        MPI_Type_free(&ft2);
    MPI_File_close(&fh);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        MPI_File_delete(path, MPI_INFO_NULL);
    MPI_Type_free(&ftr);
    MPI_Type_free(&ft);

    /* ---- a derived memory type, nonblocking and split collective forms ---- */
    name(dir, "forms");
    MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR | MPI_MODE_CREATE, MPI_INFO_NULL, &fh);
    MPI_Datatype every2;
    MPI_Type_vector(N / 2, 1, 2, MPI_INT, &every2);
    MPI_Type_commit(&every2);
    for (int i = 0; i < N; i++)
        buf[i] = rank * 1000 + i;
    MPI_Request req;
    MPI_File_iwrite_at(fh, (MPI_Offset)rank * N * 4, buf, 1, every2, &req); /* the even ints */
    MPI_Wait(&req, &st);
    MPI_Get_count(&st, MPI_INT, &count);
    CHECK(count == N / 2, "iwrite_at of a vector: count %d", count);
    MPI_File_write_at_all_begin(fh, (MPI_Offset)rank * N * 4 + N * 2, buf + 1, 1, every2);
    MPI_File_write_at_all_end(fh, buf + 1, &st);
    MPI_Barrier(MPI_COMM_WORLD);
    memset(back, 0, sizeof back);
    MPI_File_iread_at(fh, (MPI_Offset)rank * N * 4, back, N, MPI_INT, &req);
    MPI_Wait(&req, &st);
    bad = 0;
    for (int i = 0; i < N / 2; i++)
        bad += back[i] != buf[2 * i] || back[N / 2 + i] != buf[2 * i + 1];
    CHECK(bad == 0, "vector writes read back: %d wrong", bad);
    memset(back, 0, sizeof back);
    MPI_File_read_at_all_begin(fh, (MPI_Offset)rank * N * 4, back, 1, every2);
    rc = MPI_File_read_at_all_end(fh, back, &st);
    bad = 0;
    for (int i = 0; i < N / 2; i++)
        bad += back[2 * i] != buf[2 * i] || back[2 * i + 1] != 0;
    CHECK(rc == MPI_SUCCESS && bad == 0, "split read into a vector: rc %d, %d wrong", rc, bad);
    MPI_Type_free(&every2);
    MPI_File_close(&fh);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        MPI_File_delete(path, MPI_INFO_NULL);

    /* ---- the shared pointer: write_shared, ordered, seek_shared, read_shared ---- */
    name(dir, "shared");
    MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR | MPI_MODE_CREATE | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh);
    MPI_File_set_size(fh, 0);
    MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL);
    int mine[3] = {rank, rank, rank};
    for (int k = 0; k < 2; k++)
        MPI_File_write_shared(fh, mine, 3, MPI_INT, &st);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Offset sp;
    MPI_File_get_position_shared(fh, &sp);
    CHECK(sp == 6 * size, "shared pointer after write_shared: %lld", (long long)sp);
    /* Ordered: rank r writes r+1 ints of value 100+r, in rank order. */
    int ord[64];
    for (int i = 0; i <= rank; i++)
        ord[i] = 100 + rank;
    MPI_File_write_ordered(fh, ord, rank + 1, MPI_INT, &st);
    MPI_File_get_position_shared(fh, &sp);
    CHECK(sp == 6 * size + size * (size + 1) / 2, "shared pointer after ordered: %lld", (long long)sp);
    MPI_File_seek_shared(fh, 0, MPI_SEEK_SET);
    if (rank == 0) {
        int total = 6 * size + size * (size + 1) / 2;
        int *all = malloc(total * sizeof(int));
        MPI_File_read_shared(fh, all, total, MPI_INT, &st);
        MPI_Get_count(&st, MPI_INT, &count);
        /* Each rank's two triples whole (any order), then the ordered part in rank order. */
        int seen[64] = {0};
        bad = count != total;
        for (int t = 0; t < 2 * size; t++) {
            int v = all[3 * t];
            bad += v < 0 || v >= size || all[3 * t + 1] != v || all[3 * t + 2] != v;
            if (v >= 0 && v < size)
                seen[v]++;
        }
        for (int r = 0; r < size; r++)
            bad += seen[r] != 2;
        int at = 6 * size;
        for (int r = 0; r < size; r++)
            for (int i = 0; i <= r; i++)
                bad += all[at++] != 100 + r;
        CHECK(bad == 0, "shared-pointer file: %d wrong (count %d of %d)", bad, count, total);
        free(all);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_File_close(&fh);

    /* ---- atomic mode: concurrent overlapping writes leave one writer's whole block ---- */
    name(dir, "atomic");
    MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR | MPI_MODE_CREATE | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh);
    MPI_File_set_atomicity(fh, 1);
    int flag = 0;
    MPI_File_get_atomicity(fh, &flag);
    CHECK(flag == 1, "get_atomicity %d", flag);
    enum { M = 4096 };
    int *blk = malloc(M * sizeof(int)), *got = malloc(M * sizeof(int));
    for (int i = 0; i < M; i++)
        blk[i] = rank + 1;
    for (int k = 0; k < 20; k++) {
        MPI_File_write_at(fh, 0, blk, M, MPI_INT, &st);
        MPI_File_read_at(fh, 0, got, M, MPI_INT, &st);
        bad = 0;
        for (int i = 1; i < M; i++)
            bad += got[i] != got[0];
        CHECK(bad == 0 && got[0] >= 1 && got[0] <= size, "atomic read saw a mix (%d differ)", bad);
    }
    free(blk);
    free(got);
    MPI_File_close(&fh);

    /* ---- external32: big-endian in the file, native in memory ---- */
    name(dir, "external32");
    MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDWR | MPI_MODE_CREATE | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh);
    rc = MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "external32", MPI_INFO_NULL);
    CHECK(rc == MPI_SUCCESS, "external32 view: %d", rc);
    int e32[2] = {0x01020304 + rank, -2};
    MPI_File_write_at_all(fh, 2 * rank, e32, 2, MPI_INT, &st);
    MPI_File_get_view(fh, &disp, &et, &ft2, rep);
    CHECK(strcmp(rep, "external32") == 0, "get_view datarep %s", rep);
    int extb[2] = {0, 0};
    MPI_File_read_at_all(fh, 2 * rank, extb, 2, MPI_INT, &st);
    CHECK(extb[0] == e32[0] && extb[1] == -2, "external32 read back %x %d", extb[0], extb[1]);
    MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL);
    unsigned char raw[8];
    MPI_File_read_at(fh, 8 * rank, raw, 8, MPI_BYTE, &st);
    CHECK(raw[0] == 1 && raw[1] == 2 && raw[2] == 3 && raw[3] == 4 + rank && raw[4] == 0xff && raw[7] == 0xfe,
          "external32 bytes %02x %02x %02x %02x %02x .. %02x", raw[0], raw[1], raw[2], raw[3], raw[4], raw[7]);
    MPI_File_close(&fh);

    /* ---- APPEND: the pointers start at the end ---- */
    name(dir, "append");
    if (rank == 0) {
        MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_WRONLY | MPI_MODE_CREATE, MPI_INFO_NULL, &fh);
        MPI_File_set_size(fh, 0);
        MPI_File_write(fh, buf, 5, MPI_INT, &st);
        MPI_File_close(&fh);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_WRONLY | MPI_MODE_APPEND | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh);
    MPI_File_get_position(fh, &pos);
    CHECK(pos == 20, "APPEND position %lld", (long long)pos);
    MPI_File_close(&fh);

    MPI_Finalize();
    return check_report();
}
