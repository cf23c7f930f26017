/*
 * win_check.c - one-sided communication (MPI-4.1 chapter 12) through the standard ABI, at
 * any number of ranks, every value checked element by element at every rank. Built with
 * gcc -I abi/include (or MPICH's mpicc_abi): the same binary runs on runthrough's and on
 * MPICH's libmpi_abi.so.1 (the MPIX_ calls are weak and skipped where absent; the checks
 * of runthrough's own refusals and error classes run on runthrough only).
 *
 * Groups (an argument runs only those whose name contains it):
 *   create    MPI_Win_create(_c), the predefined attributes, name, group, info, keyvals
 *             and their delete callback at MPI_Win_free, MPI_Win_shared_query
 *   fence     put, get, accumulate (MPI_SUM on int and double, MPI_REPLACE, MPI_MAX) in
 *             fence epochs, MPI_Win_allocate(_c), the _c forms, MPI_PROC_NULL targets
 *   lock      exclusive locks around a read-modify-write counter, shared locks with
 *             flush, lock_all with flush_all, flush_local(_all), Win_sync
 *   atomics   get_accumulate, fetch_and_op counters (the fetched values at every rank
 *             allgathered: a permutation), compare_and_swap (one winner), MPI_NO_OP
 *   pscw      post/start/complete/wait on a ring, MPI_Win_test
 *   requests  MPI_Rput, MPI_Rget, MPI_Raccumulate, MPI_Rget_accumulate with MPI_Wait and
 *             MPI_Waitall (and their _c forms)
 *   derived   vector datatypes at the origin and at the target (put, get, accumulate,
 *             get_accumulate, rget)
 *   large     put, accumulate and get of 1 MiB (many records, chunked replies)
 *   shared    MPI_Win_allocate_shared on MPI_COMM_SELF and on the host's communicator:
 *             loads and stores through MPI_Win_shared_query's pointers
 *   dynamic   MPI_Win_create_dynamic, MPI_Win_attach of two regions, addresses exchanged
 *             with MPI_Get_address: put, accumulate and get by address under fence and
 *             lock, the flavor and base attributes, MPI_Win_detach
 *   pairs     MPI_MINLOC/MPI_MAXLOC accumulates of MPI_DOUBLE_INT from every rank, a
 *             long double sum and a double complex product (types no atomic applies)
 *   errors    error handlers of windows (user, MPI_ERRORS_RETURN), error classes
 *             (bad rank, out of range, unlock without lock, bad op), MPIX_Win_get_failed
 *             and MPIX_Win_validate, passive target progress while the target computes
 * Every rank prints "win_check: rank R ok (N checks)" or one
 * "win_check: rank R FAILED [group] line L: what" per failed check, and exits 1.
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#pragma weak MPIX_Win_get_failed
#pragma weak MPIX_Win_validate

static int rank, size, checks, failures, runthrough;
static const char *group = "";

#define CHECK(cond, ...)                                                                    \
    do {                                                                                    \
        checks++;                                                                           \
        if (!(cond)) {                                                                      \
            failures++;                                                                     \
            printf("win_check: rank %d FAILED [%s] line %d: ", rank, group, __LINE__);      \
            printf(__VA_ARGS__);                                                            \
            printf("\n");                                                                   \
        }                                                                                   \
    } while (0)

#define OK(call) CHECK((call) == MPI_SUCCESS, "%s", #call)

#define N 16

static int eclass(int rc)
{
    int c = rc;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &c);
    return c;
}

static int right(void) { return (rank + 1) % size; }
static int left(void) { return (rank + size - 1) % size; }

/* ---- create ----------------------------------------------------------------------------- */

static int deleted;
static int del_fn(MPI_Win win, int keyval, void *val, void *extra)
{
    (void)win;
    (void)keyval;
    (void)extra;
    deleted += (int)(intptr_t)val;
    return MPI_SUCCESS;
}

static void create(void)
{
    group = "create";
    int buf[N];
    for (int i = 0; i < N; i++)
        buf[i] = rank * 100 + i;
    MPI_Win win;
    OK(MPI_Win_create(buf, sizeof buf, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    void *base;
    MPI_Aint *wsize;
    int *unit, *flavor, *model, flag;
    OK(MPI_Win_get_attr(win, MPI_WIN_BASE, &base, &flag));
    CHECK(flag && base == buf, "MPI_WIN_BASE %p, buffer %p", base, (void *)buf);
    OK(MPI_Win_get_attr(win, MPI_WIN_SIZE, &wsize, &flag));
    CHECK(flag && *wsize == (MPI_Aint)sizeof buf, "MPI_WIN_SIZE %ld", (long)*wsize);
    OK(MPI_Win_get_attr(win, MPI_WIN_DISP_UNIT, &unit, &flag));
    CHECK(flag && *unit == (int)sizeof(int), "MPI_WIN_DISP_UNIT %d", *unit);
    OK(MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &flavor, &flag));
    CHECK(flag && *flavor == MPI_WIN_FLAVOR_CREATE, "flavor %d", *flavor);
    OK(MPI_Win_get_attr(win, MPI_WIN_MODEL, &model, &flag));
    CHECK(flag && *model == MPI_WIN_UNIFIED, "model %d", *model);

    char name[MPI_MAX_OBJECT_NAME];
    int len;
    OK(MPI_Win_set_name(win, "my window"));
    OK(MPI_Win_get_name(win, name, &len));
    CHECK(strcmp(name, "my window") == 0 && len == 9, "name '%s' (%d)", name, len);
    OK(MPI_Win_get_name(MPI_WIN_NULL, name, &len));
    CHECK(strcmp(name, "MPI_WIN_NULL") == 0, "null window's name '%s'", name);

    MPI_Group wg, cg;
    int cmp, gsize, grank;
    OK(MPI_Win_get_group(win, &wg));
    OK(MPI_Comm_group(MPI_COMM_WORLD, &cg));
    OK(MPI_Group_compare(wg, cg, &cmp));
    CHECK(cmp == MPI_IDENT, "window group vs world: %d", cmp);
    MPI_Group_size(wg, &gsize);
    MPI_Group_rank(wg, &grank);
    CHECK(gsize == size && grank == rank, "group size %d rank %d", gsize, grank);
    MPI_Group_free(&wg);
    MPI_Group_free(&cg);

    MPI_Info info, used;
    MPI_Info_create(&info);
    MPI_Info_set(info, "no_locks", "false");
    OK(MPI_Win_set_info(win, info));
    OK(MPI_Win_get_info(win, &used));
    char value[64];
    int vlen = sizeof value;
    OK(MPI_Info_get_string(used, "no_locks", &vlen, value, &flag));
    CHECK(flag && strcmp(value, "false") == 0, "no_locks '%s' flag %d", value, flag);
    MPI_Info_free(&used);
    MPI_Info_free(&info);

    /* Attributes: a keyval's value, deleted (callback) at MPI_Win_free. */
    int key;
    OK(MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, del_fn, &key, NULL));
    OK(MPI_Win_set_attr(win, key, (void *)(intptr_t)7));
    void *got;
    OK(MPI_Win_get_attr(win, key, &got, &flag));
    CHECK(flag && got == (void *)(intptr_t)7, "attribute %p flag %d", got, flag);
    OK(MPI_Win_set_attr(win, key, (void *)(intptr_t)5)); /* deletes 7 */
    CHECK(deleted == 7, "replaced attribute deleted: %d", deleted);

    /* MPI_Win_shared_query on a created window: this process's own memory. */
    MPI_Aint qsize;
    int qunit;
    void *qbase;
    OK(MPI_Win_shared_query(win, rank, &qsize, &qunit, &qbase));
    CHECK(qbase == buf && qsize == (MPI_Aint)sizeof buf && qunit == (int)sizeof(int),
          "shared_query(self) %p %ld %d", qbase, (long)qsize, qunit);

    /* Zero-count operations on a created window complete (mpi4py's test_rma does them
       under a lock): get-accumulate with a real operation, get, accumulate. */
    for (int t = 0; t < size; t++) {
        int o = 0, r = -1;
        OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, win));
        OK(MPI_Get_accumulate(&o, 0, MPI_INT, &r, 0, MPI_INT, t, 0, 0, MPI_INT, MPI_SUM, win));
        OK(MPI_Win_flush(t, win));
        OK(MPI_Get(&r, 0, MPI_INT, t, 0, 0, MPI_INT, win));
        OK(MPI_Accumulate(&o, 0, MPI_INT, t, 0, 0, MPI_INT, MPI_SUM, win));
        OK(MPI_Win_unlock(t, win));
        CHECK(r == -1, "a zero-count get wrote %d", r);
    }

    OK(MPI_Win_free(&win));
    CHECK(win == MPI_WIN_NULL, "freed window handle not MPI_WIN_NULL");
    CHECK(deleted == 12, "attribute deleted at MPI_Win_free: %d", deleted);
    OK(MPI_Win_free_keyval(&key));
    CHECK(key == MPI_KEYVAL_INVALID, "freed keyval");
    for (int i = 0; i < N; i++)
        CHECK(buf[i] == rank * 100 + i, "buf[%d] %d", i, buf[i]);

    /* The large-count form; a window of no memory at some ranks. */
    MPI_Aint bytes = rank % 2 ? 0 : (MPI_Aint)sizeof buf;
    OK(MPI_Win_create_c(bytes ? buf : NULL, bytes, 8, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    OK(MPI_Win_get_attr(win, MPI_WIN_SIZE, &wsize, &flag));
    CHECK(*wsize == bytes, "MPI_Win_create_c size %ld", (long)*wsize);
    OK(MPI_Win_get_attr(win, MPI_WIN_DISP_UNIT, &unit, &flag));
    CHECK(*unit == 8, "MPI_Win_create_c unit %d", *unit);
    OK(MPI_Win_free(&win));
}

/* ---- fence ------------------------------------------------------------------------------ */

static void fence(void)
{
    group = "fence";
    int *mem;
    MPI_Win win;
    OK(MPI_Win_allocate(N * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    int *flavor, flag;
    OK(MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &flavor, &flag));
    CHECK(*flavor == MPI_WIN_FLAVOR_ALLOCATE, "flavor %d", *flavor);
    void *base;
    OK(MPI_Win_get_attr(win, MPI_WIN_BASE, &base, &flag));
    CHECK(base == mem, "MPI_WIN_BASE %p, baseptr %p", base, (void *)mem);
    for (int i = 0; i < N; i++)
        mem[i] = -1;
    OK(MPI_Win_fence(0, win));
    /* Put: elements 2..9 of the right neighbour get this rank's values. */
    int src[N];
    for (int i = 0; i < N; i++)
        src[i] = rank * 1000 + i;
    OK(MPI_Put(src, 8, MPI_INT, right(), 2, 8, MPI_INT, win));
    OK(MPI_Put(src, 4, MPI_INT, MPI_PROC_NULL, 0, 4, MPI_INT, win));
    OK(MPI_Win_fence(0, win));
    for (int i = 0; i < N; i++) {
        int want = (i >= 2 && i < 10) ? left() * 1000 + (i - 2) : -1;
        CHECK(mem[i] == want, "after put mem[%d] %d want %d", i, mem[i], want);
    }
    /* Get: the left neighbour's elements 2..9, then its whole window (_c form). */
    int dst[N + 1];
    for (int i = 0; i <= N; i++)
        dst[i] = -7;
    OK(MPI_Get(dst, 8, MPI_INT, left(), 2, 8, MPI_INT, win));
    OK(MPI_Get(dst, 4, MPI_INT, MPI_PROC_NULL, 0, 4, MPI_INT, win));
    OK(MPI_Win_fence(0, win));
    int ll = (left() + size - 1) % size;
    for (int i = 0; i < 8; i++)
        CHECK(dst[i] == ll * 1000 + i, "get dst[%d] %d want %d", i, dst[i], ll * 1000 + i);
    CHECK(dst[8] == -7, "get wrote past its count");
    OK(MPI_Get_c(dst, (MPI_Count)N, MPI_INT, rank, 0, (MPI_Count)N, MPI_INT, win));
    OK(MPI_Win_fence(0, win));
    for (int i = 0; i < N; i++)
        CHECK(dst[i] == mem[i], "get_c from self dst[%d] %d mem %d", i, dst[i], mem[i]);

    /* Accumulate MPI_SUM on int from every rank to every rank. */
    for (int i = 0; i < N; i++)
        mem[i] = i;
    OK(MPI_Win_fence(0, win));
    for (int t = 0; t < size; t++) {
        int add[N];
        for (int i = 0; i < N; i++)
            add[i] = (rank + 1) * i;
        OK(MPI_Accumulate(add, N, MPI_INT, t, 0, N, MPI_INT, MPI_SUM, win));
    }
    OK(MPI_Accumulate(src, N, MPI_INT, MPI_PROC_NULL, 0, N, MPI_INT, MPI_SUM, win));
    OK(MPI_Win_fence(0, win));
    int tri = size * (size + 1) / 2;
    for (int i = 0; i < N; i++)
        CHECK(mem[i] == i + i * tri, "sum mem[%d] %d want %d", i, mem[i], i + i * tri);
    /* (A fence after each local check: the next epoch's operations must not overtake it.) */
    OK(MPI_Win_fence(0, win));
    /* MPI_MAX, then MPI_REPLACE of one element per rank at rank 0 (_c form). */
    int mine[N];
    for (int i = 0; i < N; i++)
        mine[i] = rank * 10000 + i;
    OK(MPI_Accumulate(mine, N, MPI_INT, 0, 0, N, MPI_INT, MPI_MAX, win));
    OK(MPI_Win_fence(0, win));
    if (rank == 0)
        for (int i = 0; i < N; i++) {
            int want = (size - 1) * 10000 + i > i + i * tri ? (size - 1) * 10000 + i : i + i * tri;
            CHECK(mem[i] == want, "max mem[%d] %d want %d", i, mem[i], want);
        }
    OK(MPI_Win_fence(0, win));
    int me = -rank;
    if (rank < N)
        OK(MPI_Accumulate_c(&me, 1, MPI_INT, 0, rank, 1, MPI_INT, MPI_REPLACE, win));
    OK(MPI_Win_fence(0, win));
    if (rank == 0)
        for (int i = 0; i < size && i < N; i++)
            CHECK(mem[i] == -i, "replace mem[%d] %d want %d", i, mem[i], -i);
    OK(MPI_Win_free(&win));

    /* MPI_SUM on double, in a window allocated with the _c form. */
    double *dm;
    OK(MPI_Win_allocate_c(N * sizeof(double), sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &dm, &win));
    for (int i = 0; i < N; i++)
        dm[i] = 0.5 * i;
    OK(MPI_Win_fence(MPI_MODE_NOPRECEDE, win));
    double dadd[N];
    for (int i = 0; i < N; i++)
        dadd[i] = 0.25 * (rank + 1);
    OK(MPI_Accumulate(dadd, N, MPI_DOUBLE, right(), 0, N, MPI_DOUBLE, MPI_SUM, win));
    OK(MPI_Put_c(dadd, 1, MPI_DOUBLE, MPI_PROC_NULL, 0, 1, MPI_DOUBLE, win));
    OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    for (int i = 0; i < N; i++) {
        double want = 0.5 * i + 0.25 * (left() + 1);
        CHECK(dm[i] == want, "double sum dm[%d] %g want %g", i, dm[i], want);
    }
    OK(MPI_Win_free(&win));
}

/* ---- lock ------------------------------------------------------------------------------- */

static void lock(void)
{
    group = "lock";
    long *mem;
    MPI_Win win;
    OK(MPI_Win_allocate(N * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    for (int i = 0; i < N; i++)
        mem[i] = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    /* A read-modify-write of element 0 at rank 0 under an exclusive lock: no update lost. */
    const int K = 20;
    for (int k = 0; k < K; k++) {
        long v = -1;
        OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        OK(MPI_Get(&v, 1, MPI_LONG, 0, 0, 1, MPI_LONG, win));
        OK(MPI_Win_flush(0, win));
        v += 1;
        OK(MPI_Put(&v, 1, MPI_LONG, 0, 0, 1, MPI_LONG, win));
        OK(MPI_Win_unlock(0, win));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        OK(MPI_Win_sync(win));
        CHECK(mem[0] == (long)K * size, "exclusive counter %ld want %ld", mem[0], (long)K * size);
        OK(MPI_Win_unlock(0, win));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    /* Shared locks: put to slot 1 + rank % (N - 1) of the right neighbour, flush, read back. */
    long tag = 500 + rank;
    int slot = 1 + rank % (N - 1);
    OK(MPI_Win_lock(MPI_LOCK_SHARED, right(), MPI_MODE_NOCHECK, win));
    OK(MPI_Put(&tag, 1, MPI_LONG, right(), slot, 1, MPI_LONG, win));
    OK(MPI_Win_flush(right(), win));
    long back = 0;
    OK(MPI_Get(&back, 1, MPI_LONG, right(), slot, 1, MPI_LONG, win));
    OK(MPI_Win_flush_local(right(), win));
    CHECK(back == tag, "shared lock read back %ld want %ld", back, tag);
    OK(MPI_Win_unlock(right(), win));
    OK(MPI_Win_lock(MPI_LOCK_SHARED, MPI_PROC_NULL, 0, win));
    OK(MPI_Win_unlock(MPI_PROC_NULL, win));
    MPI_Barrier(MPI_COMM_WORLD);
    /* lock_all: every rank writes its slot at every rank, flush_all, unlock_all. */
    OK(MPI_Win_lock_all(0, win));
    long v = 9000 + rank;
    for (int t = 0; t < size; t++)
        if (rank < N)
            OK(MPI_Put(&v, 1, MPI_LONG, t, rank, 1, MPI_LONG, win));
    OK(MPI_Win_flush_all(win));
    OK(MPI_Win_flush_local_all(win));
    OK(MPI_Win_unlock_all(win));
    MPI_Barrier(MPI_COMM_WORLD);
    OK(MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win));
    for (int i = 0; i < size && i < N; i++)
        CHECK(mem[i] == 9000 + i, "lock_all put mem[%d] %ld want %d", i, mem[i], 9000 + i);
    OK(MPI_Win_unlock(rank, win));
    OK(MPI_Win_free(&win));
}

/* ---- atomics ---------------------------------------------------------------------------- */

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

static void atomics(void)
{
    group = "atomics";
    long *mem;
    MPI_Win win;
    OK(MPI_Win_allocate(4 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    mem[0] = 0;
    mem[1] = -1;
    mem[2] = 100;
    mem[3] = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    /* fetch_and_op counter at rank 0: every fetched value once. */
    const int K = 25;
    long got[K], one = 1;
    OK(MPI_Win_lock_all(0, win));
    for (int k = 0; k < K; k++) {
        OK(MPI_Fetch_and_op(&one, &got[k], MPI_LONG, 0, 0, MPI_SUM, win));
        OK(MPI_Win_flush(0, win));
    }
    OK(MPI_Win_unlock_all(win));
    long *all = malloc(sizeof(long) * K * size);
    MPI_Allgather(got, K, MPI_LONG, all, K, MPI_LONG, MPI_COMM_WORLD);
    qsort(all, (size_t)K * size, sizeof(long), cmp_long);
    int perm = 1;
    for (int i = 0; i < K * size; i++)
        perm &= all[i] == i;
    CHECK(perm, "fetched counter values are not a permutation of 0..%d", K * size - 1);
    free(all);
    MPI_Barrier(MPI_COMM_WORLD);
    /* compare_and_swap at rank 0 element 1: -1 -> my rank; exactly one rank wins. */
    long mine = rank, minus = -1, res = -2;
    OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    OK(MPI_Compare_and_swap(&mine, &minus, &res, MPI_LONG, 0, 1, win));
    OK(MPI_Win_unlock(0, win));
    int won = res == -1, winners = 0;
    MPI_Allreduce(&won, &winners, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(winners == 1, "%d ranks won the compare-and-swap", winners);
    long winner = -1;
    OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    OK(MPI_Fetch_and_op(NULL, &winner, MPI_LONG, 0, 1, MPI_NO_OP, win));
    OK(MPI_Win_unlock(0, win));
    CHECK(winner >= 0 && winner < size && (won ? winner == rank : res == winner),
          "cas result %ld, winner %ld", res, winner);
    MPI_Barrier(MPI_COMM_WORLD);
    /* get_accumulate MPI_SUM on element 2 of rank 0, one at a time (exclusive): the values
     * before are 100 + a sum of distinct rank+1 terms; the last is 100 + n(n+1)/2. */
    long add = rank + 1, before = -1;
    OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
    OK(MPI_Get_accumulate(&add, 1, MPI_LONG, &before, 1, MPI_LONG, 0, 2, 1, MPI_LONG, MPI_SUM, win));
    OK(MPI_Win_unlock(0, win));
    long befores[64];
    MPI_Allgather(&before, 1, MPI_LONG, befores, 1, MPI_LONG, MPI_COMM_WORLD);
    long maxb = 0;
    for (int r = 0; r < size; r++)
        maxb = befores[r] > maxb ? befores[r] : maxb;
    long fin = -1;
    OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    OK(MPI_Get_accumulate_c(NULL, 0, MPI_DATATYPE_NULL, &fin, 1, MPI_LONG, 0, 2, 1, MPI_LONG, MPI_NO_OP, win));
    OK(MPI_Win_unlock(0, win));
    CHECK(fin == 100 + size * (size + 1) / 2, "get_accumulate total %ld", fin);
    CHECK(before >= 100 && maxb < fin, "get_accumulate before %ld, largest %ld, final %ld", before, maxb, fin);
    /* MPI_REPLACE through get_accumulate swaps: element 3 of every rank takes 7. */
    long seven = 7, old = -1;
    OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right(), 0, win));
    OK(MPI_Get_accumulate(&seven, 1, MPI_LONG, &old, 1, MPI_LONG, right(), 3, 1, MPI_LONG, MPI_REPLACE, win));
    OK(MPI_Win_unlock(right(), win));
    CHECK(old == 0, "replace swap got %ld", old);
    /* fetch_and_op on int and double in an int/double window. */
    MPI_Barrier(MPI_COMM_WORLD);
    OK(MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win));
    CHECK(mem[3] == 7, "swapped-in value %ld", mem[3]);
    OK(MPI_Win_unlock(rank, win));
    OK(MPI_Win_free(&win));

    double *dm;
    OK(MPI_Win_allocate(sizeof(double), sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &dm, &win));
    *dm = 1.5;
    MPI_Barrier(MPI_COMM_WORLD);
    double quarter = 0.25, dres = 0;
    OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    OK(MPI_Fetch_and_op(&quarter, &dres, MPI_DOUBLE, 0, 0, MPI_SUM, win));
    OK(MPI_Win_unlock(0, win));
    CHECK(dres >= 1.5 && dres <= 1.5 + 0.25 * (size - 1), "double fetch_and_op %g", dres);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        CHECK(*dm == 1.5 + 0.25 * size, "double counter %g", *dm);
        OK(MPI_Win_unlock(0, win));
    }
    OK(MPI_Win_free(&win));
}

/* ---- pscw ------------------------------------------------------------------------------- */

static void pscw(void)
{
    group = "pscw";
    int mem[N];
    for (int i = 0; i < N; i++)
        mem[i] = 0;
    MPI_Win win;
    OK(MPI_Win_create(mem, sizeof mem, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    MPI_Group world, to, from;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int r = right(), l = left();
    MPI_Group_incl(world, 1, &r, &to);
    MPI_Group_incl(world, 1, &l, &from);
    for (int round = 1; round <= 3; round++) {
        OK(MPI_Win_post(from, 0, win));
        OK(MPI_Win_start(to, 0, win));
        int v[4] = {rank, round, rank * round, -rank};
        OK(MPI_Put(v, 4, MPI_INT, right(), 4 * (round - 1), 4, MPI_INT, win));
        OK(MPI_Win_complete(win));
        if (round == 2) {
            int flag = 0;
            double t0 = MPI_Wtime();
            while (!flag && MPI_Wtime() - t0 < 30)
                OK(MPI_Win_test(win, &flag));
            CHECK(flag, "MPI_Win_test never true");
        } else {
            OK(MPI_Win_wait(win));
        }
        int *got = &mem[4 * (round - 1)];
        CHECK(got[0] == l && got[1] == round && got[2] == l * round && got[3] == -l,
              "round %d got %d %d %d %d from %d", round, got[0], got[1], got[2], got[3], l);
    }
    /* Empty groups. */
    OK(MPI_Win_post(MPI_GROUP_EMPTY, 0, win));
    OK(MPI_Win_start(MPI_GROUP_EMPTY, 0, win));
    OK(MPI_Win_complete(win));
    OK(MPI_Win_wait(win));
    MPI_Group_free(&to);
    MPI_Group_free(&from);
    MPI_Group_free(&world);
    OK(MPI_Win_free(&win));
}

/* ---- requests --------------------------------------------------------------------------- */

static void requests(void)
{
    group = "requests";
    int *mem;
    MPI_Win win;
    OK(MPI_Win_allocate(N * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    for (int i = 0; i < N; i++)
        mem[i] = 1;
    MPI_Barrier(MPI_COMM_WORLD);
    OK(MPI_Win_lock_all(0, win));
    int v[N], w[N], x[N + 1];
    for (int i = 0; i < N; i++)
        v[i] = rank * 10 + i;
    MPI_Request rq[4];
    if (rank < N / 2) {
        /* Elements 2*rank, 2*rank+1 of the right neighbour. */
        OK(MPI_Rput(v, 2, MPI_INT, right(), 2 * rank, 2, MPI_INT, win, &rq[0]));
        OK(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
        CHECK(rq[0] == MPI_REQUEST_NULL, "rput request not freed");
    }
    OK(MPI_Rput_c(v, 1, MPI_INT, MPI_PROC_NULL, 0, 1, MPI_INT, win, &rq[1]));
    OK(MPI_Wait(&rq[1], MPI_STATUS_IGNORE));
    OK(MPI_Win_flush_all(win));
    OK(MPI_Win_unlock_all(win));
    MPI_Barrier(MPI_COMM_WORLD);
    OK(MPI_Win_lock_all(0, win));
    for (int i = 0; i <= N; i++)
        x[i] = -5;
    OK(MPI_Rget(x, N, MPI_INT, left(), 0, N, MPI_INT, win, &rq[0]));
    OK(MPI_Rget_c(w, 0, MPI_INT, MPI_PROC_NULL, 0, 0, MPI_INT, win, &rq[1]));
    OK(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
    /* What the left neighbour holds: its own left neighbour's pair (if that rank < N/2). */
    int ll = (left() + size - 1) % size;
    for (int i = 0; i < N; i++) {
        int want = (ll < N / 2 && (i == 2 * ll || i == 2 * ll + 1)) ? ll * 10 + (i - 2 * ll) : 1;
        CHECK(x[i] == want, "rget x[%d] %d want %d", i, x[i], want);
    }
    CHECK(x[N] == -5, "rget wrote past its count");
    OK(MPI_Win_unlock_all(win));
    MPI_Barrier(MPI_COMM_WORLD);
    /* Raccumulate SUM to every rank, then Rget_accumulate NO_OP reads it. */
    for (int i = 0; i < N; i++)
        mem[i] = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    OK(MPI_Win_lock_all(0, win));
    int ones[N];
    for (int i = 0; i < N; i++)
        ones[i] = i + 1;
    for (int t = 0; t < size; t++) {
        MPI_Request r;
        OK(MPI_Raccumulate(ones, N, MPI_INT, t, 0, N, MPI_INT, MPI_SUM, win, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    }
    OK(MPI_Win_flush_all(win));
    OK(MPI_Win_unlock_all(win));
    MPI_Barrier(MPI_COMM_WORLD);
    OK(MPI_Win_lock_all(0, win));
    int res[N];
    MPI_Request r2[2];
    OK(MPI_Rget_accumulate(NULL, 0, MPI_INT, res, N, MPI_INT, right(), 0, N, MPI_INT, MPI_NO_OP, win, &r2[0]));
    int ten = 10, old = -1;
    OK(MPI_Rget_accumulate_c(&ten, 1, MPI_INT, &old, 1, MPI_INT, rank, N - 1, 1, MPI_INT, MPI_SUM, win, &r2[1]));
    OK(MPI_Waitall(2, r2, MPI_STATUSES_IGNORE));
    /* (Element N - 1 of the right neighbour may have its own 10 added already.) */
    for (int i = 0; i < N; i++)
        CHECK(res[i] == (i + 1) * size || (i == N - 1 && res[i] == N * size + 10), "raccumulate res[%d] %d want %d",
              i, res[i], (i + 1) * size);
    CHECK(old == N * size, "rget_accumulate sum old %d want %d", old, N * size);
    OK(MPI_Win_unlock_all(win));
    OK(MPI_Raccumulate_c(ones, 1, MPI_INT, MPI_PROC_NULL, 0, 1, MPI_INT, MPI_SUM, win, &r2[0]));
    OK(MPI_Wait(&r2[0], MPI_STATUS_IGNORE));
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(mem[N - 1] == N * size + 10, "rget_accumulate added 10: %d", mem[N - 1]);
    OK(MPI_Win_free(&win));
}

/* ---- derived ---------------------------------------------------------------------------- */

static void derived(void)
{
    group = "derived";
    /* The window: 3 * N ints; the target type takes every third one, the origin type
     * every second one. */
    int *mem;
    MPI_Win win;
    OK(MPI_Win_allocate(3 * N * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    for (int i = 0; i < 3 * N; i++)
        mem[i] = -1;
    MPI_Datatype every2, every3;
    MPI_Type_vector(N, 1, 2, MPI_INT, &every2);
    MPI_Type_vector(N, 1, 3, MPI_INT, &every3);
    MPI_Type_commit(&every2);
    MPI_Type_commit(&every3);
    int src[2 * N];
    for (int i = 0; i < 2 * N; i++)
        src[i] = i % 2 ? -9 : rank * 100 + i / 2;
    OK(MPI_Win_fence(0, win));
    OK(MPI_Put(src, 1, every2, right(), 1, 1, every3, win));
    OK(MPI_Win_fence(0, win));
    for (int i = 0; i < 3 * N; i++) {
        int want = (i >= 1 && (i - 1) % 3 == 0) ? left() * 100 + (i - 1) / 3 : -1;
        CHECK(mem[i] == want, "vector put mem[%d] %d want %d", i, mem[i], want);
    }
    /* Get them back into a strided origin, and contiguously. */
    int dst[2 * N], flat[N];
    for (int i = 0; i < 2 * N; i++)
        dst[i] = -3;
    OK(MPI_Get(dst, 1, every2, right(), 1, 1, every3, win));
    OK(MPI_Get(flat, N, MPI_INT, right(), 1, 1, every3, win));
    OK(MPI_Win_fence(0, win));
    for (int i = 0; i < 2 * N; i++) {
        int want = i % 2 ? -3 : rank * 100 + i / 2;
        CHECK(dst[i] == want, "vector get dst[%d] %d want %d", i, dst[i], want);
    }
    for (int i = 0; i < N; i++)
        CHECK(flat[i] == rank * 100 + i, "vector get flat[%d] %d", i, flat[i]);
    /* Accumulate through the types: every rank adds to element 0,3,6.. of rank 0. */
    for (int i = 0; i < 3 * N; i++)
        mem[i] = 0;
    OK(MPI_Win_fence(0, win));
    int add[2 * N];
    for (int i = 0; i < 2 * N; i++)
        add[i] = i % 2 ? 1000 : i / 2 + 1;
    OK(MPI_Accumulate(add, 1, every2, 0, 0, 1, every3, MPI_SUM, win));
    OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    if (rank == 0)
        for (int i = 0; i < 3 * N; i++) {
            int want = i % 3 == 0 ? (i / 3 + 1) * size : 0;
            CHECK(mem[i] == want, "vector accumulate mem[%d] %d want %d", i, mem[i], want);
        }
    /* get_accumulate and rget with the types, in a lock epoch. */
    OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
    int before[2 * N];
    for (int i = 0; i < 2 * N; i++)
        before[i] = -4;
    OK(MPI_Get_accumulate(add, 1, every2, before, 1, every2, 0, 0, 1, every3, MPI_NO_OP, win));
    OK(MPI_Win_unlock(0, win));
    for (int i = 0; i < 2 * N; i++) {
        int want = i % 2 ? -4 : (i / 2 + 1) * size;
        CHECK(before[i] == want, "vector get_accumulate before[%d] %d want %d", i, before[i], want);
    }
    OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    MPI_Request rq;
    for (int i = 0; i < 2 * N; i++)
        dst[i] = -6;
    OK(MPI_Rget(dst, 1, every2, 0, 0, 1, every3, win, &rq));
    OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    OK(MPI_Win_unlock(0, win));
    for (int i = 0; i < 2 * N; i++) {
        int want = i % 2 ? -6 : (i / 2 + 1) * size;
        CHECK(dst[i] == want, "vector rget dst[%d] %d want %d", i, dst[i], want);
    }
    MPI_Type_free(&every2);
    MPI_Type_free(&every3);
    OK(MPI_Win_free(&win));
}

/* ---- shared ----------------------------------------------------------------------------- */

static void shared_on(MPI_Comm comm, const char *what)
{
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    int *mem;
    MPI_Win win;
    MPI_Aint bytes = (MPI_Aint)((me + 1) * sizeof(int));
    OK(MPI_Win_allocate_shared(bytes, sizeof(int), MPI_INFO_NULL, comm, &mem, &win));
    int *flavor, flag;
    OK(MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &flavor, &flag));
    CHECK(*flavor == MPI_WIN_FLAVOR_SHARED, "%s: flavor %d", what, *flavor);
    for (int i = 0; i <= me; i++)
        mem[i] = -1;
    OK(MPI_Win_lock_all(0, win));
    OK(MPI_Win_sync(win));
    MPI_Barrier(comm);
    OK(MPI_Win_sync(win));
    /* Store into every member's memory directly: element 0 of member t gets 100 + t, from
     * member t - 1 (t > 0) or the last member. */
    int t = (me + 1) % n;
    MPI_Aint qsize;
    int qunit;
    int *qbase;
    OK(MPI_Win_shared_query(win, t, &qsize, &qunit, &qbase));
    CHECK(qsize == (MPI_Aint)((t + 1) * sizeof(int)) && qunit == (int)sizeof(int), "%s: query(%d) %ld %d", what, t,
          (long)qsize, qunit);
    qbase[0] = 100 + t;
    /* And element 1 (where it exists) through a put. */
    int v = 200 + t;
    if (t >= 1)
        OK(MPI_Put(&v, 1, MPI_INT, t, 1, 1, MPI_INT, win));
    OK(MPI_Win_flush_all(win));
    OK(MPI_Win_sync(win));
    MPI_Barrier(comm);
    OK(MPI_Win_sync(win));
    CHECK(mem[0] == 100 + me, "%s: direct store mem[0] %d want %d", what, mem[0], 100 + me);
    if (me >= 1)
        CHECK(mem[1] == 200 + me, "%s: put mem[1] %d want %d", what, mem[1], 200 + me);
    /* The first member with memory: member 0. */
    OK(MPI_Win_shared_query(win, MPI_PROC_NULL, &qsize, &qunit, &qbase));
    CHECK(qsize == (MPI_Aint)sizeof(int) && qbase[0] == 100, "%s: query(MPI_PROC_NULL) %ld", what, (long)qsize);
    OK(MPI_Win_unlock_all(win));
    OK(MPI_Win_free(&win));
}

static void shared(void)
{
    group = "shared";
    shared_on(MPI_COMM_SELF, "self");
    MPI_Comm host;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host);
    shared_on(host, "host");
    MPI_Comm_free(&host);
}

/* ---- large ------------------------------------------------------------------------------ */

/* Far above any eager limit or chunk: put, get and accumulate of 1 MiB. */
static void large(void)
{
    group = "large";
    const int M = 1 << 18;
    int *mem, *buf = malloc(sizeof(int) * M);
    MPI_Win win;
    OK(MPI_Win_allocate((MPI_Aint)M * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    for (int i = 0; i < M; i++) {
        mem[i] = 0;
        buf[i] = rank * 7 + i;
    }
    OK(MPI_Win_fence(0, win));
    OK(MPI_Put(buf, M, MPI_INT, right(), 0, M, MPI_INT, win));
    OK(MPI_Win_fence(0, win));
    int bad = 0;
    for (int i = 0; i < M; i++)
        bad += mem[i] != left() * 7 + i;
    CHECK(bad == 0, "1 MiB put: %d elements wrong", bad);
    /* Every rank has read its memory before the next epoch writes it. */
    OK(MPI_Win_fence(0, win));
    OK(MPI_Accumulate(buf, M, MPI_INT, right(), 0, M, MPI_INT, MPI_SUM, win));
    OK(MPI_Win_fence(0, win));
    OK(MPI_Get(buf, M, MPI_INT, left(), 0, M, MPI_INT, win));
    OK(MPI_Win_fence(0, win));
    int ll = (left() + size - 1) % size;
    bad = 0;
    for (int i = 0; i < M; i++)
        bad += buf[i] != 2 * (ll * 7 + i);
    CHECK(bad == 0, "1 MiB accumulate and get: %d elements wrong", bad);
    OK(MPI_Win_free(&win));
    free(buf);
}

/* ---- errors ----------------------------------------------------------------------------- */

static void dynamic(void)
{
    group = "dynamic";
    MPI_Win win;
    OK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    int *flavor, flag;
    OK(MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &flavor, &flag));
    CHECK(flag && *flavor == MPI_WIN_FLAVOR_DYNAMIC, "flavor %d", flag ? *flavor : -1);
    long a[N] = {0}, b[4] = {0};
    OK(MPI_Win_attach(win, a, sizeof a));
    OK(MPI_Win_attach(win, b, sizeof b));
    MPI_Aint mine[2], addr[2 * 64];
    OK(MPI_Get_address(a, &mine[0]));
    OK(MPI_Get_address(b, &mine[1]));
    OK(MPI_Allgather(mine, 2, MPI_AINT, addr, 2, MPI_AINT, MPI_COMM_WORLD));
    /* Fence: each rank puts into its right neighbour's a[1] and adds into everyone's b[0]. */
    OK(MPI_Win_fence(0, win));
    long v = 100 + rank, one = rank + 1;
    OK(MPI_Put(&v, 1, MPI_LONG, right(), MPI_Aint_add(addr[2 * right()], sizeof(long)), 1, MPI_LONG, win));
    for (int t = 0; t < size; t++)
        OK(MPI_Accumulate(&one, 1, MPI_LONG, t, addr[2 * t + 1], 1, MPI_LONG, MPI_SUM, win));
    OK(MPI_Win_fence(0, win));
    long sum = (long)size * (size + 1) / 2;
    CHECK(a[1] == 100 + left(), "a[1] %ld want %d", a[1], 100 + left());
    CHECK(b[0] == sum, "b[0] %ld want %ld", b[0], sum);
    /* Lock: read the right neighbour's a[1] and b[0] back by address. */
    long got[2] = {0, 0};
    OK(MPI_Win_lock(MPI_LOCK_SHARED, right(), 0, win));
    OK(MPI_Get(&got[0], 1, MPI_LONG, right(), MPI_Aint_add(addr[2 * right()], sizeof(long)), 1, MPI_LONG, win));
    OK(MPI_Get(&got[1], 1, MPI_LONG, right(), addr[2 * right() + 1], 1, MPI_LONG, win));
    OK(MPI_Win_unlock(right(), win));
    CHECK(got[0] == 100 + rank && got[1] == sum, "read back %ld %ld", got[0], got[1]);
    OK(MPI_Win_fence(0, win));
    OK(MPI_Win_detach(win, b));
    OK(MPI_Win_detach(win, a));
    OK(MPI_Win_free(&win));
}

/* A window freed and another created in its place (the handle may be reused): every
 * operation reaches the new window's memory, whatever an implementation remembered of the
 * old one (runthrough's fast path remembers the last window a thread used). */
static void reuse(void)
{
    group = "reuse";
    for (int round = 0; round < 4; round++) {
        MPI_Win win;
        long *mem, own[4] = {0};
        if (round % 2 == 0) {
            OK(MPI_Win_allocate(4 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
            for (int i = 0; i < 4; i++)
                mem[i] = 0;
        } else {
            mem = own;
            OK(MPI_Win_create(own, sizeof own, sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
        }
        OK(MPI_Barrier(MPI_COMM_WORLD));
        long v = 1000 * round + rank, one = 1, got = -1, old = -1;
        OK(MPI_Win_lock_all(0, win));
        OK(MPI_Put(&v, 1, MPI_LONG, right(), 0, 1, MPI_LONG, win));
        OK(MPI_Fetch_and_op(&one, &old, MPI_LONG, right(), 1, MPI_SUM, win));
        OK(MPI_Win_flush(right(), win));
        OK(MPI_Get(&got, 1, MPI_LONG, right(), 0, 1, MPI_LONG, win));
        OK(MPI_Win_flush(right(), win));
        OK(MPI_Win_unlock_all(win));
        OK(MPI_Barrier(MPI_COMM_WORLD));
        CHECK(got == v, "round %d read back %ld want %ld", round, got, v);
        CHECK(old == 0, "round %d fetch-and-op found %ld, not a fresh window's 0", round, old);
        OK(MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win));
        CHECK(mem[0] == 1000 * round + left(), "round %d mem[0] %ld want %d", round, mem[0], 1000 * round + left());
        CHECK(mem[1] == 1, "round %d mem[1] %ld want 1", round, mem[1]);
        OK(MPI_Win_unlock(rank, win));
        OK(MPI_Win_free(&win));
    }
}

static void pairs(void)
{
    group = "pairs";
    struct di {
        double v;
        int i;
    } *m;
    MPI_Win win;
    OK(MPI_Win_allocate(2 * sizeof *m, sizeof *m, MPI_INFO_NULL, MPI_COMM_WORLD, &m, &win));
    m[0].v = 1e300, m[0].i = -1;
    m[1].v = -1e300, m[1].i = -1;
    OK(MPI_Win_fence(0, win));
    struct di mine = {(double)(rank % 3), rank};
    for (int t = 0; t < size; t++) {
        OK(MPI_Accumulate(&mine, 1, MPI_DOUBLE_INT, t, 0, 1, MPI_DOUBLE_INT, MPI_MINLOC, win));
        OK(MPI_Accumulate(&mine, 1, MPI_DOUBLE_INT, t, 1, 1, MPI_DOUBLE_INT, MPI_MAXLOC, win));
    }
    OK(MPI_Win_fence(0, win));
    int top = size >= 3 ? 2 : size - 1;
    CHECK(m[0].v == 0.0 && m[0].i == 0, "MINLOC (%g, %d) want (0, 0)", m[0].v, m[0].i);
    CHECK(m[1].v == (double)top && m[1].i == top, "MAXLOC (%g, %d) want (%d, %d)", m[1].v, m[1].i, top, top);
    OK(MPI_Win_free(&win));

    long double *ld;
    OK(MPI_Win_allocate(sizeof *ld, sizeof *ld, MPI_INFO_NULL, MPI_COMM_WORLD, &ld, &win));
    *ld = 0.0L;
    OK(MPI_Win_fence(0, win));
    long double half = 0.5L * (rank + 1), back = -1.0L;
    for (int t = 0; t < size; t++)
        OK(MPI_Accumulate(&half, 1, MPI_LONG_DOUBLE, t, 0, 1, MPI_LONG_DOUBLE, MPI_SUM, win));
    OK(MPI_Win_fence(0, win));
    OK(MPI_Win_lock(MPI_LOCK_SHARED, right(), 0, win));
    OK(MPI_Get_accumulate(NULL, 0, MPI_LONG_DOUBLE, &back, 1, MPI_LONG_DOUBLE, right(), 0, 1, MPI_LONG_DOUBLE,
                          MPI_NO_OP, win));
    OK(MPI_Win_unlock(right(), win));
    long double want = 0.25L * size * (size + 1);
    CHECK(*ld == want && back == want, "long double sum %Lg, read back %Lg, want %Lg", *ld, back, want);
    OK(MPI_Win_free(&win));

    double *z;
    OK(MPI_Win_allocate(2 * sizeof(double), 2 * sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &z, &win));
    z[0] = 1.0, z[1] = 0.0;
    OK(MPI_Win_fence(0, win));
    double i_unit[2] = {0.0, 1.0}; /* every rank multiplies rank 0's value by i */
    OK(MPI_Accumulate(i_unit, 1, MPI_C_DOUBLE_COMPLEX, 0, 0, 1, MPI_C_DOUBLE_COMPLEX, MPI_PROD, win));
    OK(MPI_Win_fence(0, win));
    if (rank == 0) {
        static const double re[4] = {1, 0, -1, 0}, im[4] = {0, 1, 0, -1};
        CHECK(z[0] == re[size % 4] && z[1] == im[size % 4], "i^%d = %g%+gi", size, z[0], z[1]);
    }
    OK(MPI_Win_free(&win));
}

static int handled, handled_class;
static MPI_Win handled_win;
static void on_error(MPI_Win *win, int *code, ...)
{
    handled++;
    handled_win = *win;
    MPI_Error_class(*code, &handled_class);
}

static void errors(void)
{
    group = "errors";
    int mem[N] = {0};
    MPI_Win win;
    OK(MPI_Win_create(mem, sizeof mem, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    MPI_Errhandler eh, got;
    OK(MPI_Win_get_errhandler(win, &got));
    CHECK(got == MPI_ERRORS_ARE_FATAL, "a new window's handler is not MPI_ERRORS_ARE_FATAL");
    MPI_Errhandler_free(&got);
    OK(MPI_Win_create_errhandler(on_error, &eh));
    OK(MPI_Win_set_errhandler(win, eh));
    OK(MPI_Win_get_errhandler(win, &got));
    CHECK(got == eh, "get_errhandler returned another handler");
    MPI_Errhandler_free(&got);
    OK(MPI_Win_fence(0, win));
    int v = 1;
    int rc = MPI_Put(&v, 1, MPI_INT, size, 0, 1, MPI_INT, win);
    /* (What the call returns after a user handler returned differs: MPICH returns
     * MPI_SUCCESS, runthrough the code, as for communicators.) */
    CHECK((rc == MPI_SUCCESS || eclass(rc) == MPI_ERR_RANK) && handled == 1 && handled_win == win &&
              handled_class == MPI_ERR_RANK,
          "bad rank: rc class %d, handled %d class %d", eclass(rc), handled, handled_class);
    rc = MPI_Win_call_errhandler(win, MPI_ERR_OTHER);
    CHECK(rc == MPI_SUCCESS && handled == 2 && handled_class == MPI_ERR_OTHER, "call_errhandler: %d %d", rc,
          handled);
    OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    MPI_Errhandler_free(&eh);
    if (runthrough) {
        rc = MPI_Put(&v, 1, MPI_INT, rank, N, 1, MPI_INT, win);
        CHECK(eclass(rc) == MPI_ERR_RMA_RANGE, "put past the window: class %d", eclass(rc));
        rc = MPI_Accumulate(&v, 1, MPI_INT, rank, 0, 1, MPI_INT, MPI_MINLOC, win);
        CHECK(eclass(rc) == MPI_ERR_OP, "accumulate MPI_MINLOC on int: class %d", eclass(rc));
        int spare[2];
        rc = MPI_Win_attach(win, spare, sizeof spare);
        CHECK(eclass(rc) == MPI_ERR_RMA_FLAVOR, "attach to a window that is not dynamic: class %d", eclass(rc));
    }
    OK(MPI_Win_fence(0, win));
    rc = MPI_Win_unlock(rank, win);
    CHECK(eclass(rc) == MPI_ERR_RMA_SYNC, "unlock without lock: class %d", eclass(rc));
    /* No failure: empty failed groups. */
    if (MPIX_Win_get_failed) {
        MPI_Group failed;
        int n = -1;
        OK(MPIX_Win_get_failed(win, &failed));
        MPI_Group_size(failed, &n);
        CHECK(n == 0, "MPIX_Win_get_failed: %d members", n);
        MPI_Group_free(&failed);
        OK(MPIX_Win_validate(win, &failed));
        MPI_Group_size(failed, &n);
        CHECK(n == 0, "MPIX_Win_validate: %d members", n);
        MPI_Group_free(&failed);
    }
    /* Passive target: the target computes (no MPI call) while the others lock, put,
     * get and unlock: the target's progress thread serves them. */
    if (runthrough && size > 1) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            double t0 = MPI_Wtime();
            volatile double x = 0;
            while (MPI_Wtime() - t0 < 0.5)
                x += 1;
        } else {
            int put = 70 + rank, back = 0;
            OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
            OK(MPI_Put(&put, 1, MPI_INT, 0, rank % N, 1, MPI_INT, win));
            OK(MPI_Win_flush(0, win));
            OK(MPI_Get(&back, 1, MPI_INT, 0, rank % N, 1, MPI_INT, win));
            OK(MPI_Win_unlock(0, win));
            CHECK(back == put, "passive target read back %d want %d", back, put);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    OK(MPI_Win_free(&win));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int vlen;
    MPI_Get_library_version(version, &vlen);
    runthrough = strstr(version, "runthrough") != NULL;
    const char *only = argc > 1 ? argv[1] : "";
    struct {
        const char *name;
        void (*run)(void);
    } parts[] = {{"create", create},     {"fence", fence},     {"lock", lock},       {"atomics", atomics},
                 {"pscw", pscw},         {"requests", requests}, {"derived", derived}, {"shared", shared},
                 {"large", large},       {"dynamic", dynamic}, {"pairs", pairs},     {"reuse", reuse},
                 {"errors", errors}};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (strstr(parts[i].name, only))
            parts[i].run();
    if (failures == 0)
        printf("win_check: rank %d ok (%d checks)\n", rank, checks);
    fflush(stdout);
    MPI_Finalize();
    return failures ? 1 : 0;
}
