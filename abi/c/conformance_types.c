/*
 * conformance_types.c - MPI-4.1 behaviours of the datatype and attribute families, each
 * in a named group, at any number of ranks, through the standard ABI only (gcc -I
 * abi/include, or MPICH's mpicc_abi). Every rank prints
 * "conformance_types: rank R ok (N checks)" or one
 * "conformance_types: rank R FAILED [group] line L: what" per failed check, and exits 1.
 * The last group's checks run after MPI_Finalize (the delete callbacks of MPI_COMM_SELF's
 * attributes), so the verdict is printed after it.
 */
#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, checks, failures;
static const char *group = "";

#define CHECK(cond, ...)                                                                    \
    do {                                                                                    \
        checks++;                                                                           \
        if (!(cond)) {                                                                      \
            failures++;                                                                     \
            printf("conformance_types: rank %d FAILED [%s] line %d: ", rank, group, __LINE__); \
            printf(__VA_ARGS__);                                                            \
            printf("\n");                                                                   \
        }                                                                                   \
    } while (0)

static int err_class(int rc)
{
    int cls = rc;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &cls);
    return cls;
}

static void get_extent(MPI_Datatype t, MPI_Aint *lb, MPI_Aint *ext, MPI_Aint *tlb, MPI_Aint *text)
{
    MPI_Type_get_extent(t, lb, ext);
    MPI_Type_get_true_extent(t, tlb, text);
}

/* MPI-4.1 5.1.2, 5.1.7: the bounds of a type are the min/max over its copies, which go
 * downwards when the extent is negative. */
static void negative_extents(void)
{
    group = "negative extent";
    MPI_Datatype r, t;
    MPI_Aint lb, ext, tlb, text;
    MPI_Type_create_resized(MPI_INT, 6, -9, &r);
    get_extent(r, &lb, &ext, &tlb, &text);
    CHECK(lb == 6 && ext == -9 && tlb == 0 && text == 4, "resized: lb %ld extent %ld true %ld+%ld", (long)lb,
          (long)ext, (long)tlb, (long)text);

    /* Copies at 0, -9, -18: lb markers 6, -3, -12; ub markers -3, -12, -21. */
    MPI_Type_contiguous(3, r, &t);
    get_extent(t, &lb, &ext, &tlb, &text);
    CHECK(lb == -12 && ext == 9, "contiguous(3): lb %ld extent %ld (want -12, 9)", (long)lb, (long)ext);
    CHECK(tlb == -18 && text == 22, "contiguous(3): true lb %ld extent %ld (want -18, 22)", (long)tlb, (long)text);
    MPI_Type_free(&t);

    /* vector(3, 1, 2): blocks at 0, -18, -36. */
    MPI_Type_vector(3, 1, 2, r, &t);
    get_extent(t, &lb, &ext, &tlb, &text);
    CHECK(lb == -30 && ext == 27 && tlb == -36 && text == 40, "vector: lb %ld extent %ld true %ld+%ld", (long)lb,
          (long)ext, (long)tlb, (long)text);
    MPI_Type_free(&t);

    /* vector(2, 2, 3): blocks of copies at 0, -9 and at -27, -36. */
    MPI_Type_vector(2, 2, 3, r, &t);
    get_extent(t, &lb, &ext, &tlb, &text);
    CHECK(lb == -30 && ext == 27, "vector of 2-blocks: lb %ld extent %ld (want -30, 27)", (long)lb, (long)ext);
    MPI_Type_free(&t);

    /* hvector with a negative stride of a plain type: 0, -20, -40. */
    MPI_Type_create_hvector(3, 1, -20, MPI_INT, &t);
    get_extent(t, &lb, &ext, &tlb, &text);
    CHECK(lb == -40 && ext == 44, "hvector stride -20: lb %ld extent %ld", (long)lb, (long)ext);
    MPI_Type_free(&t);
    MPI_Type_create_hvector(2, 1, 100, r, &t);
    get_extent(t, &lb, &ext, &tlb, &text);
    CHECK(lb == 6 && ext == 91, "hvector of resized: lb %ld extent %ld (want 6, 91)", (long)lb, (long)ext);
    MPI_Type_free(&t);

    /* indexed: 2 copies at 0 (0, -9) and 1 at 5 extents (-45). */
    int bl[2] = {2, 1}, dp[2] = {0, 5};
    MPI_Type_indexed(2, bl, dp, r, &t);
    get_extent(t, &lb, &ext, &tlb, &text);
    CHECK(lb == -39 && ext == 36, "indexed: lb %ld extent %ld (want -39, 36)", (long)lb, (long)ext);
    MPI_Type_free(&t);

    /* struct of 3 copies: the markers' bounds, no alignment padding (MPI-4.1 5.1.7). */
    int sbl[1] = {3};
    MPI_Aint sdp[1] = {0};
    MPI_Datatype sty[1] = {r};
    MPI_Type_create_struct(1, sbl, sdp, sty, &t);
    get_extent(t, &lb, &ext, &tlb, &text);
    CHECK(lb == -12 && ext == 9, "struct: lb %ld extent %ld (want -12, 9)", (long)lb, (long)ext);
    MPI_Type_free(&t);

    /* Data goes where the copies are: pack 3 ints at 0, -9, -18 bytes from the buffer. */
    MPI_Type_contiguous(3, r, &t);
    MPI_Type_commit(&t);
    union {
        char bytes[64];
        int align;
    } buf;
    for (int i = 0; i < 64; i++)
        buf.bytes[i] = (char)i;
    int packed[3], pos = 0, want[3];
    char *base = buf.bytes + 40;
    for (int i = 0; i < 3; i++)
        memcpy(&want[i], base - 9 * i, sizeof(int));
    MPI_Pack(base, 1, t, packed, (int)sizeof packed, &pos, MPI_COMM_WORLD);
    CHECK(pos == 12 && memcmp(packed, want, sizeof want) == 0, "pack of copies going downwards");
    char out[64];
    memset(out, 0, sizeof out);
    pos = 0;
    MPI_Unpack(packed, (int)sizeof packed, &pos, out + 40, 1, t, MPI_COMM_WORLD);
    CHECK(memcmp(out + 40, want, 4) == 0 && memcmp(out + 31, &want[1], 4) == 0 && memcmp(out + 22, &want[2], 4) == 0,
          "unpack of copies going downwards");
    MPI_Type_free(&t);
    MPI_Type_free(&r);

    /* A negative-stride vector between ranks: ints 4, 5, 2, 3, 0, 1 of the buffer. */
    MPI_Type_create_hvector(3, 2, -8, MPI_INT, &t);
    MPI_Type_commit(&t);
    int src[6], dst[6];
    for (int i = 0; i < 6; i++) {
        src[i] = rank * 100 + i;
        dst[i] = -1;
    }
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    int got[6] = {-1, -1, -1, -1, -1, -1};
    MPI_Sendrecv(src + 4, 1, t, next, 11, got, 6, MPI_INT, prev, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(got[0] == prev * 100 + 4 && got[1] == prev * 100 + 5 && got[2] == prev * 100 + 2 &&
              got[5] == prev * 100 + 1,
          "negative-stride send: %d %d %d .. %d", got[0], got[1], got[2], got[5]);
    MPI_Sendrecv(src, 6, MPI_INT, next, 12, dst + 4, 1, t, prev, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(dst[4] == prev * 100 && dst[5] == prev * 100 + 1 && dst[0] == prev * 100 + 4, "negative-stride receive");
    MPI_Type_free(&t);
}

/* MPI-4.1 5.1.11: MPI_Get_elements counts the basic elements of the type map; a pair type
 * is a struct of its two basic types (6.9.4), so a pair holds two (as MPICH counts). */
static void elements(void)
{
    group = "get_elements";
    MPI_Status st;
    int n = -1, c = -1;
    struct {
        MPI_Datatype t;
        int size;
        const char *name;
    } pairs[] = {{MPI_DOUBLE_INT, 12, "MPI_DOUBLE_INT"}, {MPI_FLOAT_INT, 8, "MPI_FLOAT_INT"},
                 {MPI_LONG_INT, 12, "MPI_LONG_INT"},     {MPI_2INT, 8, "MPI_2INT"},
                 {MPI_SHORT_INT, 6, "MPI_SHORT_INT"},   {MPI_LONG_DOUBLE_INT, 20, "MPI_LONG_DOUBLE_INT"}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        MPI_Status_set_elements(&st, MPI_BYTE, 2 * pairs[i].size);
        MPI_Get_elements(&st, pairs[i].t, &n);
        MPI_Get_count(&st, pairs[i].t, &c);
        CHECK(n == 4 && c == 2, "%s: 2 pairs give %d elements, count %d (want 4, 2)", pairs[i].name, n, c);
    }
    /* A pair and its value part only: 3 elements, no whole count. */
    MPI_Status_set_elements(&st, MPI_BYTE, 12 + 8);
    MPI_Get_elements(&st, MPI_DOUBLE_INT, &n);
    MPI_Get_count(&st, MPI_DOUBLE_INT, &c);
    CHECK(n == 3 && c == MPI_UNDEFINED, "1.5 MPI_DOUBLE_INT: %d elements, count %d", n, c);
    /* Bytes ending inside a basic element: undefined (MPICH). */
    MPI_Status_set_elements(&st, MPI_BYTE, 5);
    MPI_Get_elements(&st, MPI_INT, &n);
    CHECK(n == MPI_UNDEFINED, "5 bytes of MPI_INT: %d elements", n);

    /* A real message of 2 MPI_DOUBLE_INT. */
    struct {
        double v;
        int i;
    } p[2] = {{1.5, rank}, {2.5, rank + 1}}, q[2];
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    MPI_Sendrecv(p, 2, MPI_DOUBLE_INT, next, 21, q, 2, MPI_DOUBLE_INT, prev, 21, MPI_COMM_WORLD, &st);
    MPI_Get_elements(&st, MPI_DOUBLE_INT, &n);
    MPI_Count nc = -1;
    MPI_Get_elements_c(&st, MPI_DOUBLE_INT, &nc);
    CHECK(n == 4 && nc == 4 && q[1].i == prev + 1 && q[1].v == 2.5, "received 2 MPI_DOUBLE_INT: %d elements", n);

    /* A struct of 2 doubles and an int, and its 2.5 copies. */
    int bl[2] = {2, 1};
    MPI_Aint dp[2] = {0, 16};
    MPI_Datatype ty[2] = {MPI_DOUBLE, MPI_INT}, s;
    MPI_Type_create_struct(2, bl, dp, ty, &s);
    MPI_Status_set_elements(&st, MPI_BYTE, 2 * 20 + 8);
    MPI_Get_elements(&st, s, &n);
    CHECK(n == 7, "2 structs and a double: %d elements (want 7)", n);
    MPI_Type_free(&s);
}

/* A type's description does not grow with its counts: a vector of INT_MAX/2 ints is
 * made, committed and queried at once; types built from it too. */
static void huge_counts(void)
{
    group = "huge counts";
    MPI_Datatype v, c;
    double t0 = MPI_Wtime();
    int rc = MPI_Type_vector(INT_MAX / 2, 1, 2, MPI_INT, &v);
    CHECK(rc == MPI_SUCCESS, "MPI_Type_vector(INT_MAX/2, 1, 2): class %d", err_class(rc));
    if (rc != MPI_SUCCESS)
        return;
    MPI_Type_commit(&v);
    MPI_Count sz = 0, lb = -1, ext = 0;
    int isz = 0;
    MPI_Type_size_c(v, &sz);
    MPI_Type_size(v, &isz);
    MPI_Type_get_extent_c(v, &lb, &ext);
    MPI_Count n = INT_MAX / 2;
    CHECK(sz == 4 * n && isz == MPI_UNDEFINED, "size %lld (int size %d)", (long long)sz, isz);
    CHECK(lb == 0 && ext == ((n - 1) * 2 + 1) * 4, "extent %lld", (long long)ext);
    int ni, na, nd, comb, ints[3];
    MPI_Aint ad[1];
    MPI_Datatype old[1];
    MPI_Type_get_envelope(v, &ni, &na, &nd, &comb);
    MPI_Type_get_contents(v, 3, 0, 1, ints, ad, old);
    CHECK(comb == MPI_COMBINER_VECTOR && ni == 3 && ints[0] == INT_MAX / 2 && ints[2] == 2 && old[0] == MPI_INT,
          "envelope/contents");
    MPI_Type_contiguous(4, v, &c);
    MPI_Type_commit(&c);
    MPI_Type_size_c(c, &sz);
    CHECK(sz == 16 * n, "contiguous(4) of it: size %lld", (long long)sz);
    MPI_Status st;
    MPI_Status_set_elements_c(&st, MPI_BYTE, 4 * n * 3 + 8);
    MPI_Count e = 0;
    MPI_Get_elements_c(&st, c, &e);
    CHECK(e == 3 * n + 2, "elements of 3 vectors and 2 ints: %lld", (long long)e);
    double dt = MPI_Wtime() - t0;
    CHECK(dt < 1.0, "made and queried in %.3f s", dt);
    MPI_Type_free(&c);
    MPI_Type_free(&v);

    /* Packing a count of a large (1e6 blocks) nested vector, and back. */
    const int blocks = 1000000;
    MPI_Datatype pair, big;
    MPI_Type_vector(2, 1, 3, MPI_INT, &pair);        /* ints 0 and 3, extent 16 */
    MPI_Type_create_hvector(blocks, 1, 24, pair, &big); /* each 24 bytes on */
    MPI_Type_commit(&big);
    MPI_Aint blb, bext;
    MPI_Type_get_extent(big, &blb, &bext);
    size_t nints = (size_t)(bext / 4) * 2 + 8;
    int *in = malloc(nints * sizeof(int)), *back = calloc(nints, sizeof(int));
    int *packed = malloc((size_t)blocks * 2 * 2 * sizeof(int));
    for (size_t i = 0; i < nints; i++)
        in[i] = (int)i;
    int pos = 0, psize = 0;
    MPI_Pack_size(2, big, MPI_COMM_WORLD, &psize);
    rc = MPI_Pack(in, 2, big, packed, psize, &pos, MPI_COMM_WORLD);
    int ok = rc == MPI_SUCCESS && pos == blocks * 16 && bext == (MPI_Aint)(blocks - 1) * 24 + 16;
    /* Element e of the packed data: copy e/2M, block (e/2)%M, int (e%2)*3. */
    for (int k = 0; ok && k < 2 * blocks * 2; k += 9973) {
        int copy = k / (2 * blocks), b = (k / 2) % blocks, j = (k % 2) * 3;
        ok = packed[k] == (int)(copy * (bext / 4) + b * 6 + j);
    }
    CHECK(ok, "pack of 2 x %d blocks (rc %d, %d bytes)", blocks, rc, pos);
    pos = 0;
    MPI_Unpack(packed, psize, &pos, back, 2, big, MPI_COMM_WORLD);
    int *expect = calloc(nints, sizeof(int));
    for (int copy = 0; copy < 2; copy++)
        for (int b = 0; b < blocks; b++)
            for (int j = 0; j < 6; j += 3) {
                size_t at = (size_t)copy * (size_t)(bext / 4) + (size_t)b * 6 + (size_t)j;
                expect[at] = in[at];
            }
    CHECK(memcmp(back, expect, nints * sizeof(int)) == 0, "unpack of the same");
    free(expect);
    free(in);
    free(back);
    free(packed);
    MPI_Type_free(&big);
    MPI_Type_free(&pair);
}

/* The _c constructors take counts past INT_MAX (MPI-4.1 5.1: MPI_Count arguments). */
static void large_count_constructors(void)
{
    group = "_c constructors";
    const MPI_Count G3 = 3000000000LL;
    MPI_Datatype t;
    MPI_Count sz, lb, ext, ni, na, nl, nd;
    int comb, rc;

    rc = MPI_Type_contiguous_c(G3, MPI_BYTE, &t);
    CHECK(rc == MPI_SUCCESS, "MPI_Type_contiguous_c(3e9): class %d", err_class(rc));
    if (rc == MPI_SUCCESS) {
        MPI_Type_size_c(t, &sz);
        MPI_Type_get_envelope_c(t, &ni, &na, &nl, &nd, &comb);
        MPI_Count large[1] = {0};
        int ints[1];
        MPI_Aint ad[1];
        MPI_Datatype old[1];
        MPI_Type_get_contents_c(t, 0, 0, 1, 1, ints, ad, large, old);
        CHECK(sz == G3 && comb == MPI_COMBINER_CONTIGUOUS && nl == 1 && large[0] == G3, "contiguous_c: size %lld nl %lld",
              (long long)sz, (long long)nl);
        MPI_Type_free(&t);
    }

    rc = MPI_Type_vector_c(G3, 1, 2, MPI_BYTE, &t);
    CHECK(rc == MPI_SUCCESS, "MPI_Type_vector_c(3e9, 1, 2): class %d", err_class(rc));
    if (rc == MPI_SUCCESS) {
        MPI_Type_size_c(t, &sz);
        MPI_Type_get_extent_c(t, &lb, &ext);
        MPI_Type_get_envelope_c(t, &ni, &na, &nl, &nd, &comb);
        MPI_Count large[3] = {0, 0, 0};
        int ints[1];
        MPI_Aint ad[1];
        MPI_Datatype old[1];
        MPI_Type_get_contents_c(t, 0, 0, 3, 1, ints, ad, large, old);
        CHECK(sz == G3 && ext == (G3 - 1) * 2 + 1 && comb == MPI_COMBINER_VECTOR && ni == 0 && nl == 3 &&
                  large[0] == G3 && large[2] == 2,
              "vector_c: size %lld extent %lld ni %lld nl %lld", (long long)sz, (long long)ext, (long long)ni,
              (long long)nl);
        MPI_Type_free(&t);
    }

    rc = MPI_Type_create_hvector_c(2, G3, 8000000000LL, MPI_BYTE, &t);
    CHECK(rc == MPI_SUCCESS, "MPI_Type_create_hvector_c(2, 3e9, 8e9): class %d", err_class(rc));
    if (rc == MPI_SUCCESS) {
        MPI_Type_size_c(t, &sz);
        MPI_Type_get_extent_c(t, &lb, &ext);
        CHECK(sz == 2 * G3 && ext == 8000000000LL + G3, "hvector_c: size %lld extent %lld", (long long)sz,
              (long long)ext);
        MPI_Type_free(&t);
    }

    MPI_Count bl[2] = {1, G3}, dp[2] = {0, 4000000000LL};
    rc = MPI_Type_indexed_c(2, bl, dp, MPI_BYTE, &t);
    CHECK(rc == MPI_SUCCESS, "MPI_Type_indexed_c: class %d", err_class(rc));
    if (rc == MPI_SUCCESS) {
        MPI_Type_size_c(t, &sz);
        MPI_Type_get_extent_c(t, &lb, &ext);
        MPI_Type_get_envelope_c(t, &ni, &na, &nl, &nd, &comb);
        CHECK(sz == G3 + 1 && lb == 0 && ext == 4000000000LL + G3 && comb == MPI_COMBINER_INDEXED && nl == 5,
              "indexed_c: size %lld extent %lld nl %lld", (long long)sz, (long long)ext, (long long)nl);
        MPI_Type_free(&t);
    }

    MPI_Count hbl[2] = {G3, 1}, hdp[2] = {0, -10};
    rc = MPI_Type_create_hindexed_c(2, hbl, hdp, MPI_BYTE, &t);
    CHECK(rc == MPI_SUCCESS, "MPI_Type_create_hindexed_c: class %d", err_class(rc));
    if (rc == MPI_SUCCESS) {
        MPI_Type_size_c(t, &sz);
        MPI_Type_get_extent_c(t, &lb, &ext);
        CHECK(sz == G3 + 1 && lb == -10 && ext == G3 + 10, "hindexed_c: size %lld lb %lld extent %lld",
              (long long)sz, (long long)lb, (long long)ext);
        MPI_Type_free(&t);
    }

    MPI_Count ibdp[2] = {0, G3};
    rc = MPI_Type_create_indexed_block_c(2, G3, ibdp, MPI_BYTE, &t);
    CHECK(rc == MPI_SUCCESS, "MPI_Type_create_indexed_block_c: class %d", err_class(rc));
    if (rc == MPI_SUCCESS) {
        MPI_Type_size_c(t, &sz);
        MPI_Type_get_extent_c(t, &lb, &ext);
        CHECK(sz == 2 * G3 && ext == 2 * G3, "indexed_block_c: size %lld extent %lld", (long long)sz, (long long)ext);
        MPI_Type_free(&t);
    }

    MPI_Count hbdp[1] = {5};
    rc = MPI_Type_create_hindexed_block_c(1, G3, hbdp, MPI_BYTE, &t);
    CHECK(rc == MPI_SUCCESS, "MPI_Type_create_hindexed_block_c: class %d", err_class(rc));
    if (rc == MPI_SUCCESS) {
        MPI_Type_get_extent_c(t, &lb, &ext);
        CHECK(lb == 5 && ext == G3, "hindexed_block_c: lb %lld extent %lld", (long long)lb, (long long)ext);
        MPI_Type_free(&t);
    }

    MPI_Count sbl[2] = {G3, 1}, sdp[2] = {0, G3};
    MPI_Datatype sty[2] = {MPI_BYTE, MPI_INT};
    rc = MPI_Type_create_struct_c(2, sbl, sdp, sty, &t);
    CHECK(rc == MPI_SUCCESS, "MPI_Type_create_struct_c: class %d", err_class(rc));
    if (rc == MPI_SUCCESS) {
        MPI_Type_size_c(t, &sz);
        MPI_Type_get_extent_c(t, &lb, &ext);
        CHECK(sz == G3 + 4 && ext == G3 + 4, "struct_c: size %lld extent %lld", (long long)sz, (long long)ext);
        MPI_Type_free(&t);
    }

    /* With small values a _c type is the plain one: the plain envelope describes it, and
     * it packs. */
    rc = MPI_Type_vector_c(3, 1, 2, MPI_INT, &t);
    CHECK(rc == MPI_SUCCESS, "MPI_Type_vector_c(3, 1, 2): class %d", err_class(rc));
    if (rc == MPI_SUCCESS) {
        int pni, pna, pnd;
        MPI_Type_get_envelope(t, &pni, &pna, &pnd, &comb);
        MPI_Type_commit(&t);
        int in[5] = {10, 11, 12, 13, 14}, out[3] = {0, 0, 0}, pos = 0;
        MPI_Pack(in, 1, t, out, (int)sizeof out, &pos, MPI_COMM_WORLD);
        CHECK(pni == 3 && comb == MPI_COMBINER_VECTOR && pos == 12 && out[0] == 10 && out[1] == 12 && out[2] == 14,
              "small vector_c: ni %d, packed %d %d %d", pni, out[0], out[1], out[2]);
        MPI_Type_free(&t);
    }
}

/* ---- attributes (MPI-4.1 7.7) ---------------------------------------------------- */

static int copies, deletes, last_deleted, ndeleted;
static intptr_t deleted_vals[16];
static void *last_extra;

static int copy_plus_one(MPI_Comm comm, int key, void *extra, void *in, void *out, int *flag)
{
    (void)comm;
    (void)key;
    (void)extra;
    copies++;
    *(void **)out = (void *)((intptr_t)in + 1);
    *flag = 1;
    return MPI_SUCCESS;
}

static int copy_fails(MPI_Comm comm, int key, void *extra, void *in, void *out, int *flag)
{
    (void)comm;
    (void)key;
    (void)extra;
    (void)in;
    (void)out;
    *flag = 0;
    return MPI_ERR_OTHER;
}

static int record_delete(MPI_Comm comm, int key, void *val, void *extra)
{
    (void)comm;
    (void)key;
    deletes++;
    last_deleted = (int)(intptr_t)val;
    last_extra = extra;
    return MPI_SUCCESS;
}

static int type_copy_plus_one(MPI_Datatype t, int key, void *extra, void *in, void *out, int *flag)
{
    (void)t;
    (void)key;
    (void)extra;
    copies++;
    *(void **)out = (void *)((intptr_t)in + 1);
    *flag = 1;
    return MPI_SUCCESS;
}

static int type_copy_fails(MPI_Datatype t, int key, void *extra, void *in, void *out, int *flag)
{
    (void)t;
    (void)key;
    (void)extra;
    (void)in;
    (void)out;
    *flag = 0;
    return MPI_ERR_OTHER;
}

static int type_record_delete(MPI_Datatype t, int key, void *val, void *extra)
{
    (void)t;
    (void)key;
    (void)extra;
    deletes++;
    last_deleted = (int)(intptr_t)val;
    return MPI_SUCCESS;
}

static void comm_attributes(void)
{
    group = "comm attributes";
    MPI_Comm a, b, c;
    int key, flag = 0;
    void *val = NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    MPI_Comm_set_errhandler(a, MPI_ERRORS_RETURN);
    MPI_Comm_create_keyval(copy_plus_one, record_delete, &key, NULL);
    MPI_Comm_set_attr(a, key, (void *)(intptr_t)100);
    /* Replacing a value deletes the old one. */
    deletes = 0;
    MPI_Comm_set_attr(a, key, (void *)(intptr_t)200);
    CHECK(deletes == 1 && last_deleted == 100, "replace: %d deletes, last %d", deletes, last_deleted);
    /* A freed keyval keeps working for the objects holding it (MPI-4.1 7.7.2). */
    int rc = MPI_Comm_free_keyval(&key);
    CHECK(rc == MPI_SUCCESS && key == MPI_KEYVAL_INVALID, "free_keyval: rc %d key %d", rc, key);
    copies = deletes = 0;
    rc = MPI_Comm_dup(a, &b);
    CHECK(rc == MPI_SUCCESS && copies == 1, "dup with a freed keyval: rc %d, %d copy callbacks", rc, copies);
    MPI_Comm_free(&b);
    CHECK(deletes == 1 && last_deleted == 201, "free of the dup: %d deletes, last %d", deletes, last_deleted);
    MPI_Comm_free(&a);
    CHECK(deletes == 2 && last_deleted == 200, "free of the original: %d deletes, last %d", deletes, last_deleted);

    /* MPI_Comm_delete_attr runs the delete callback; the attribute is gone. */
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    MPI_Comm_create_keyval(MPI_COMM_DUP_FN, record_delete, &key, NULL);
    MPI_Comm_set_attr(a, key, (void *)(intptr_t)7);
    deletes = 0;
    rc = MPI_Comm_delete_attr(a, key);
    MPI_Comm_get_attr(a, key, &val, &flag);
    CHECK(rc == MPI_SUCCESS && deletes == 1 && last_deleted == 7 && !flag, "delete_attr: %d deletes, flag %d", deletes,
          flag);
    /* MPI_COMM_DUP_FN copies the value. */
    MPI_Comm_set_attr(a, key, (void *)(intptr_t)8);
    MPI_Comm_dup(a, &b);
    MPI_Comm_get_attr(b, key, &val, &flag);
    CHECK(flag && (intptr_t)val == 8, "MPI_COMM_DUP_FN: flag %d value %ld", flag, (long)(intptr_t)val);
    MPI_Comm_free(&b);

    /* A failing copy callback fails MPI_Comm_dup with its error; no new communicator. */
    int bad;
    MPI_Comm_create_keyval(copy_fails, MPI_COMM_NULL_DELETE_FN, &bad, NULL);
    MPI_Comm_set_attr(a, bad, (void *)(intptr_t)1);
    c = MPI_COMM_WORLD;
    rc = MPI_Comm_dup(a, &c);
    CHECK(err_class(rc) == MPI_ERR_OTHER && c == MPI_COMM_NULL, "failing copy callback: class %d, newcomm %s",
          err_class(rc), c == MPI_COMM_NULL ? "null" : "set");
    MPI_Comm_delete_attr(a, bad);
    MPI_Comm_free_keyval(&bad);
    MPI_Comm_free(&a);
    MPI_Comm_free_keyval(&key);

    /* A communicator keyval is not a datatype keyval. */
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
    rc = MPI_Type_set_attr(MPI_INT, key, NULL);
    CHECK(err_class(rc) == MPI_ERR_KEYVAL, "comm keyval on a datatype: class %d", err_class(rc));
    MPI_Comm_free_keyval(&key);

    /* The deprecated MPI-1 forms. */
    group = "MPI-1 attributes";
    static int extra_seen;
    rc = MPI_Keyval_create(copy_plus_one, record_delete, &key, &extra_seen);
    CHECK(rc == MPI_SUCCESS && key != MPI_KEYVAL_INVALID, "MPI_Keyval_create: class %d", err_class(rc));
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    rc = MPI_Attr_put(a, key, (void *)(intptr_t)41);
    flag = 0;
    MPI_Attr_get(a, key, &val, &flag);
    CHECK(rc == MPI_SUCCESS && flag && (intptr_t)val == 41, "MPI_Attr_put/get: flag %d value %ld", flag,
          (long)(intptr_t)val);
    copies = deletes = 0;
    MPI_Comm_dup(a, &b);
    MPI_Attr_get(b, key, &val, &flag);
    CHECK(copies == 1 && flag && (intptr_t)val == 42, "copy callback at dup: %d, value %ld", copies,
          (long)(intptr_t)val);
    rc = MPI_Attr_delete(b, key);
    CHECK(rc == MPI_SUCCESS && deletes == 1 && last_deleted == 42 && last_extra == &extra_seen,
          "MPI_Attr_delete: %d deletes, extra state %s", deletes, last_extra == &extra_seen ? "kept" : "lost");
    rc = MPI_Keyval_free(&key);
    CHECK(rc == MPI_SUCCESS && key == MPI_KEYVAL_INVALID, "MPI_Keyval_free: class %d", err_class(rc));
    MPI_Comm_free(&a);
    CHECK(deletes == 2 && last_deleted == 41, "free after MPI_Keyval_free: %d deletes", deletes);
    MPI_Comm_free(&b);

    /* Predefined attributes of MPI_COMM_WORLD (MPI-4.1 9.1.2). */
    group = "predefined attributes";
    int *p = NULL;
    flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &p, &flag);
    CHECK(flag && *p >= 32767, "MPI_TAG_UB");
    flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_HOST, &p, &flag);
    CHECK(flag && (*p == MPI_PROC_NULL || (*p >= 0 && *p < size)), "MPI_HOST: flag %d", flag);
    flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_IO, &p, &flag);
    CHECK(flag && (*p == MPI_PROC_NULL || *p == MPI_ANY_SOURCE || (*p >= 0 && *p < size)), "MPI_IO: flag %d", flag);
    flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, &p, &flag);
    CHECK(flag && (*p == 0 || *p == 1), "MPI_WTIME_IS_GLOBAL: flag %d", flag);
    flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, &p, &flag);
    CHECK(!flag || *p >= size, "MPI_UNIVERSE_SIZE");
}

static void type_attributes(void)
{
    group = "datatype attributes";
    MPI_Datatype t, d;
    int key, flag = 0;
    void *val = NULL;
    MPI_Type_contiguous(2, MPI_INT, &t);
    MPI_Type_create_keyval(type_copy_plus_one, type_record_delete, &key, NULL);
    MPI_Type_set_attr(t, key, (void *)(intptr_t)10);
    copies = deletes = 0;
    int rc = MPI_Type_dup(t, &d);
    MPI_Type_get_attr(d, key, &val, &flag);
    CHECK(rc == MPI_SUCCESS && copies == 1 && flag && (intptr_t)val == 11, "copy at MPI_Type_dup: %d, value %ld",
          copies, (long)(intptr_t)val);
    rc = MPI_Type_delete_attr(d, key);
    MPI_Type_get_attr(d, key, &val, &flag);
    CHECK(rc == MPI_SUCCESS && deletes == 1 && last_deleted == 11 && !flag, "MPI_Type_delete_attr: %d deletes",
          deletes);
    MPI_Type_free(&d);
    CHECK(deletes == 1, "free without attributes: %d deletes", deletes);
    /* Freed keyval: the delete callback still runs at MPI_Type_free. */
    MPI_Type_free_keyval(&key);
    CHECK(key == MPI_KEYVAL_INVALID, "type keyval freed");
    MPI_Type_dup(t, &d);
    CHECK(copies == 2, "copy with a freed keyval: %d", copies);
    MPI_Type_free(&d);
    CHECK(deletes == 2 && last_deleted == 11, "free of the dup: %d deletes, last %d", deletes, last_deleted);
    MPI_Type_free(&t);
    CHECK(deletes == 3 && last_deleted == 10, "free of the original: %d deletes, last %d", deletes, last_deleted);

    /* A failing copy callback fails MPI_Type_dup. */
    int bad;
    MPI_Type_contiguous(2, MPI_INT, &t);
    MPI_Type_create_keyval(type_copy_fails, MPI_TYPE_NULL_DELETE_FN, &bad, NULL);
    MPI_Type_set_attr(t, bad, NULL);
    d = MPI_INT;
    rc = MPI_Type_dup(t, &d);
    CHECK(err_class(rc) == MPI_ERR_OTHER && d == MPI_DATATYPE_NULL, "failing type copy callback: class %d",
          err_class(rc));
    MPI_Type_free_keyval(&bad);
    MPI_Type_free(&t);
}

/* Attributes on MPI_COMM_SELF are deleted first at MPI_Finalize, the last set first
 * (MPI-4.1 11.2.4; MPICH's order), also for a keyval freed already. */
static int self_keys[3], self_ok_calls;
static int self_delete(MPI_Comm comm, int key, void *val, void *extra)
{
    (void)key;
    (void)extra;
    int fin = 1, r = -1;
    MPI_Finalized(&fin);
    /* MPI is still fully usable here. */
    if (!fin && comm == MPI_COMM_SELF && MPI_Comm_rank(MPI_COMM_WORLD, &r) == MPI_SUCCESS && r == rank)
        self_ok_calls++;
    if (ndeleted < 16)
        deleted_vals[ndeleted++] = (intptr_t)val;
    return MPI_SUCCESS;
}

static void self_attributes_before_finalize(void)
{
    for (int i = 0; i < 3; i++) {
        MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete, &self_keys[i], NULL);
        MPI_Comm_set_attr(MPI_COMM_SELF, self_keys[i], (void *)(intptr_t)(i + 1));
    }
    MPI_Comm_free_keyval(&self_keys[1]);
    ndeleted = 0;
}

static void self_attributes_after_finalize(void)
{
    group = "finalize";
    CHECK(ndeleted == 3 && deleted_vals[0] == 3 && deleted_vals[1] == 2 && deleted_vals[2] == 1,
          "COMM_SELF delete callbacks at finalize: %d, order %ld %ld %ld (want 3 2 1)", ndeleted,
          (long)deleted_vals[0], (long)deleted_vals[1], (long)deleted_vals[2]);
    CHECK(self_ok_calls == 3, "MPI usable in the callbacks: %d of 3", self_ok_calls);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    negative_extents();
    elements();
    huge_counts();
    large_count_constructors();
    comm_attributes();
    type_attributes();
    self_attributes_before_finalize();
    fflush(stdout);
    MPI_Finalize();
    self_attributes_after_finalize();
    if (failures == 0)
        printf("conformance_types: rank %d ok (%d checks)\n", rank, checks);
    fflush(stdout);
    return failures ? 1 : 0;
}
