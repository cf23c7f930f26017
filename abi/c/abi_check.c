/*
 * abi_check.c - behaviour checks of an MPI through the MPI-5 standard ABI, at any
 * number of ranks. Every rank prints "abi_check: rank R ok (N checks)" or one
 * "abi_check: rank R FAILED line L: what" per failed check, and exits 1 on failure.
 * Built against mpi_abi.h only (gcc -I abi/include, or mpicc_abi), so the handle values,
 * constants and MPI_Status layout it uses are the header's: a library that disagreed
 * with the header would fail here.
 */
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, checks, failures;

#define CHECK(cond, ...)                                                              \
    do {                                                                              \
        checks++;                                                                     \
        if (!(cond)) {                                                                \
            failures++;                                                               \
            printf("abi_check: rank %d FAILED line %d: ", rank, __LINE__);            \
            printf(__VA_ARGS__);                                                      \
            printf("\n");                                                             \
        }                                                                             \
    } while (0)

static int handler_calls, handler_code;
static void count_errors(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    handler_calls++;
    handler_code = *code;
}

static void sum_ints(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    for (int i = 0; i < *len; i++)
        ((int *)inout)[i] += ((int *)in)[i];
}

struct pair_di { double v; int i; };

static void constants_and_types(void)
{
    int major, minor, v, sv;
    MPI_Abi_get_version(&major, &minor);
    CHECK(major == MPI_ABI_VERSION && minor == MPI_ABI_SUBVERSION, "abi version %d.%d", major, minor);
    MPI_Get_version(&v, &sv);
    CHECK(v == MPI_VERSION, "version %d", v);
    CHECK(sizeof(MPI_Status) == 32 && offsetof(MPI_Status, MPI_ERROR) == 8, "status layout");
    struct { MPI_Datatype t; int size; } sizes[] = {
        {MPI_CHAR, sizeof(char)}, {MPI_SHORT, sizeof(short)}, {MPI_INT, sizeof(int)},
        {MPI_LONG, sizeof(long)}, {MPI_LONG_LONG, sizeof(long long)}, {MPI_FLOAT, sizeof(float)},
        {MPI_DOUBLE, sizeof(double)}, {MPI_UNSIGNED, sizeof(unsigned)}, {MPI_BYTE, 1},
        {MPI_INT64_T, 8}, {MPI_UINT8_T, 1}, {MPI_AINT, sizeof(MPI_Aint)}, {MPI_COUNT, sizeof(MPI_Count)},
        {MPI_C_BOOL, 1}, {MPI_C_DOUBLE_COMPLEX, 16}, {MPI_2INT, 8}, {MPI_DOUBLE_INT, 12}, {MPI_SHORT_INT, 6},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        int s = -1;
        CHECK(MPI_Type_size(sizes[i].t, &s) == MPI_SUCCESS && s == sizes[i].size, "type %zu size %d", i, s);
    }
    MPI_Aint lb, ext;
    MPI_Type_get_extent(MPI_DOUBLE_INT, &lb, &ext);
    CHECK(lb == 0 && ext == (MPI_Aint)sizeof(struct pair_di), "DOUBLE_INT extent %ld", (long)ext);
    char name[MPI_MAX_OBJECT_NAME];
    int len;
    MPI_Type_get_name(MPI_INT, name, &len);
    CHECK(strcmp(name, "MPI_INT") == 0, "name of MPI_INT: %s", name);
    int *tag_ub, flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag);
    CHECK(flag && *tag_ub >= 32767, "MPI_TAG_UB");
    int th;
    MPI_Query_thread(&th);
    CHECK(th == MPI_THREAD_MULTIPLE, "thread level %d", th);
    char ver[MPI_MAX_LIBRARY_VERSION_STRING];
    MPI_Get_library_version(ver, &len);
    CHECK(len > 0, "library version");
    double t0 = MPI_Wtime(), t1 = MPI_Wtime();
    CHECK(t1 >= t0 && MPI_Wtick() > 0, "wtime");
}

static void errors(void)
{
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int x = 0, cls;
    int rc = MPI_Send(&x, 1, MPI_INT, size, 0, MPI_COMM_WORLD);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_RANK, "send to rank %d: class %d", size, cls);
    rc = MPI_Send(&x, 1, MPI_INT, 0, -5, MPI_COMM_WORLD);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_TAG, "negative tag: class %d", cls);
    rc = MPI_Send(&x, 1, MPI_DATATYPE_NULL, 0, 0, MPI_COMM_WORLD);
    CHECK(rc != MPI_SUCCESS, "MPI_DATATYPE_NULL accepted");
    MPI_Win win;
    rc = MPI_Win_create(&x, 4, 4, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    /* Windows are not in runthrough's library: a clear error class, no crash. */
    if (rc == MPI_SUCCESS) {
        MPI_Win_free(&win);
    } else {
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_UNSUPPORTED_OPERATION, "unsupported call: class %d", cls);
    }
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(MPI_ERR_TRUNCATE, msg, &len);
    CHECK(len > 0, "error string");
    /* Truncation: a self send larger than the receive. */
    int two[2] = {1, 2}, one = 0;
    MPI_Request r;
    MPI_Isend(two, 2, MPI_INT, rank, 7, MPI_COMM_WORLD, &r);
    MPI_Status st;
    rc = MPI_Recv(&one, 1, MPI_INT, rank, 7, MPI_COMM_WORLD, &st);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_TRUNCATE, "truncation: class %d", cls);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    /* A user handler sees the error. */
    MPI_Errhandler eh;
    MPI_Comm_create_errhandler(count_errors, &eh);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, eh);
    rc = MPI_Send(&x, 1, MPI_INT, -7, 0, MPI_COMM_WORLD);
    int hc;
    MPI_Error_class(handler_code, &hc);
    MPI_Error_class(rc, &cls);
    CHECK(handler_calls == 1 && hc == MPI_ERR_RANK, "user handler %d class %d", handler_calls, hc);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Errhandler_free(&eh);
    int ec, ecode;
    MPI_Add_error_class(&ec);
    MPI_Add_error_code(ec, &ecode);
    MPI_Add_error_string(ecode, "mine");
    MPI_Error_class(ecode, &cls);
    MPI_Error_string(ecode, msg, &len);
    CHECK(cls == ec && strcmp(msg, "mine") == 0, "added error code");
}

static void point_to_point(void)
{
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    /* Vector type: every other int. */
    MPI_Datatype vec;
    MPI_Type_vector(4, 1, 2, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    int sbuf[8], rbuf[8];
    for (int i = 0; i < 8; i++) {
        sbuf[i] = rank * 100 + i;
        rbuf[i] = -1;
    }
    MPI_Status st;
    MPI_Sendrecv(sbuf, 1, vec, next, 1, rbuf, 1, vec, prev, 1, MPI_COMM_WORLD, &st);
    int ok = 1;
    for (int i = 0; i < 8; i++)
        ok &= rbuf[i] == (i % 2 == 0 ? prev * 100 + i : -1);
    int count;
    MPI_Get_count(&st, vec, &count);
    CHECK(ok && count == 1 && st.MPI_SOURCE == prev && st.MPI_TAG == 1, "vector sendrecv");
    MPI_Get_elements(&st, MPI_INT, &count);
    CHECK(count == 4, "elements %d", count);
    /* Struct type with a gap, pack/unpack round trip. */
    struct pair_di p[2] = {{1.5, 3}, {2.5, 4}}, q[2];
    int bl[2] = {1, 1};
    MPI_Aint dp[2] = {offsetof(struct pair_di, v), offsetof(struct pair_di, i)};
    MPI_Datatype tys[2] = {MPI_DOUBLE, MPI_INT}, st_t;
    MPI_Type_create_struct(2, bl, dp, tys, &st_t);
    MPI_Type_commit(&st_t);
    MPI_Aint lb, ext;
    MPI_Type_get_extent(st_t, &lb, &ext);
    CHECK(ext == (MPI_Aint)sizeof(struct pair_di), "struct extent %ld", (long)ext);
    char packed[64];
    int pos = 0;
    MPI_Pack(p, 2, st_t, packed, sizeof packed, &pos, MPI_COMM_WORLD);
    CHECK(pos == 24, "packed size %d", pos);
    pos = 0;
    MPI_Unpack(packed, sizeof packed, &pos, q, 2, st_t, MPI_COMM_WORLD);
    CHECK(q[1].v == 2.5 && q[1].i == 4, "unpack");
    /* Nonblocking, waitany/waitsome, persistent, probe, mprobe. */
    int a = rank, b = -1;
    MPI_Request rq[2];
    MPI_Irecv(&b, 1, MPI_INT, prev, 2, MPI_COMM_WORLD, &rq[0]);
    MPI_Isend(&a, 1, MPI_INT, next, 2, MPI_COMM_WORLD, &rq[1]);
    int idx, outc, idxs[2];
    MPI_Waitany(2, rq, &idx, MPI_STATUS_IGNORE);
    MPI_Waitsome(2, rq, &outc, idxs, MPI_STATUSES_IGNORE);
    int flag;
    MPI_Testall(2, rq, &flag, MPI_STATUSES_IGNORE);
    CHECK(b == prev && flag && rq[0] == MPI_REQUEST_NULL && rq[1] == MPI_REQUEST_NULL, "waitany/some");
    MPI_Request ps, pr;
    MPI_Send_init(&a, 1, MPI_INT, next, 3, MPI_COMM_WORLD, &ps);
    MPI_Recv_init(&b, 1, MPI_INT, prev, 3, MPI_COMM_WORLD, &pr);
    for (int k = 0; k < 3; k++) {
        a = rank + k;
        b = -1;
        MPI_Start(&pr);
        MPI_Start(&ps);
        MPI_Wait(&ps, MPI_STATUS_IGNORE);
        MPI_Wait(&pr, MPI_STATUS_IGNORE);
        CHECK(b == prev + k, "persistent round %d", k);
    }
    MPI_Request_free(&ps);
    MPI_Request_free(&pr);
    MPI_Send(&a, 1, MPI_INT, next, 4, MPI_COMM_WORLD);
    MPI_Probe(MPI_ANY_SOURCE, 4, MPI_COMM_WORLD, &st);
    MPI_Get_count(&st, MPI_INT, &count);
    CHECK(st.MPI_SOURCE == prev && count == 1, "probe");
    MPI_Message m;
    MPI_Mprobe(prev, 4, MPI_COMM_WORLD, &m, &st);
    MPI_Mrecv(&b, 1, MPI_INT, &m, &st);
    CHECK(m == MPI_MESSAGE_NULL && b == prev + 2, "mprobe/mrecv");
    /* Cancel a receive nobody sends to. */
    MPI_Request c;
    MPI_Irecv(&b, 1, MPI_INT, MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &c);
    MPI_Cancel(&c);
    MPI_Wait(&c, &st);
    MPI_Test_cancelled(&st, &flag);
    CHECK(flag, "cancelled receive");
    MPI_Recv(&b, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st);
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL, "PROC_NULL receive");
    int v = rank;
    MPI_Sendrecv_replace(&v, 1, MPI_INT, next, 5, prev, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(v == prev, "sendrecv_replace");
    MPI_Type_free(&vec);
    MPI_Type_free(&st_t);
}

static void collectives(void)
{
    int sum = 0, mine = rank + 1;
    MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(sum == size * (size + 1) / 2, "allreduce %d", sum);
    struct pair_di in = {(double)(rank % 2), rank}, out;
    MPI_Allreduce(&in, &out, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD);
    CHECK(out.v == (size > 1 ? 1.0 : 0.0) && out.i == (size > 1 ? 1 : 0), "maxloc %g %d", out.v, out.i);
    MPI_Op op;
    MPI_Op_create(sum_ints, 1, &op);
    int r = -1;
    MPI_Reduce(&mine, &r, 1, MPI_INT, op, 0, MPI_COMM_WORLD);
    CHECK(rank != 0 || r == size * (size + 1) / 2, "user op reduce %d", r);
    MPI_Op_free(&op);
    int *all = calloc((size_t)size, sizeof(int)), *counts = calloc((size_t)size, sizeof(int)), *displs = calloc((size_t)size, sizeof(int));
    for (int i = 0; i < size; i++) {
        counts[i] = 1;
        displs[i] = size - 1 - i;
    }
    all[size - 1 - rank] = rank * 3;
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, counts, displs, MPI_INT, MPI_COMM_WORLD);
    int ok = 1;
    for (int i = 0; i < size; i++)
        ok &= all[size - 1 - i] == i * 3;
    CHECK(ok, "allgatherv in place");
    int *sa = malloc(sizeof(int) * (size_t)size), *ra = malloc(sizeof(int) * (size_t)size);
    for (int i = 0; i < size; i++)
        sa[i] = rank * 1000 + i;
    MPI_Alltoall(sa, 1, MPI_INT, ra, 1, MPI_INT, MPI_COMM_WORLD);
    ok = 1;
    for (int i = 0; i < size; i++)
        ok &= ra[i] == i * 1000 + rank;
    CHECK(ok, "alltoall");
    int sc = -1, ex = -1;
    MPI_Scan(&mine, &sc, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Exscan(&mine, &ex, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(sc == (rank + 1) * (rank + 2) / 2 && (rank == 0 || ex == rank * (rank + 1) / 2), "scan %d exscan %d", sc, ex);
    int bc = rank == size - 1 ? 42 : 0;
    MPI_Request rq[2];
    int ar = -1;
    MPI_Ibcast(&bc, 1, MPI_INT, size - 1, MPI_COMM_WORLD, &rq[0]);
    MPI_Iallreduce(&mine, &ar, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &rq[1]);
    MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    CHECK(bc == 42 && ar == size, "ibcast %d iallreduce %d", bc, ar);
    int rs = -1;
    for (int i = 0; i < size; i++)
        sa[i] = i;
    MPI_Reduce_scatter_block(sa, &rs, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(rs == rank * size, "reduce_scatter_block %d", rs);
    int g = -1;
    MPI_Gather(&mine, 1, MPI_INT, ra, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Scatter(ra, 1, MPI_INT, &g, 1, MPI_INT, 0, MPI_COMM_WORLD);
    CHECK(g == mine, "gather/scatter %d", g);
    MPI_Barrier(MPI_COMM_WORLD);
    free(all);
    free(counts);
    free(displs);
    free(sa);
    free(ra);
}

static void communicators(void)
{
    MPI_Comm dup, half, shm, created;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    int res;
    MPI_Comm_compare(MPI_COMM_WORLD, dup, &res);
    CHECK(res == MPI_CONGRUENT, "compare dup %d", res);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
    int hs, hr;
    MPI_Comm_size(half, &hs);
    MPI_Comm_rank(half, &hr);
    CHECK(hs == (size + 1 - rank % 2) / 2 && hr == hs - 1 - rank / 2, "split size %d rank %d", hs, hr);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shm);
    int ss;
    MPI_Comm_size(shm, &ss);
    CHECK(ss == size, "split_type shared %d", ss);
    MPI_Group wg, eg, inter;
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    int first = 0;
    MPI_Group_incl(wg, 1, &first, &eg);
    MPI_Group_intersection(wg, eg, &inter);
    int gs, gr;
    MPI_Group_size(inter, &gs);
    MPI_Group_rank(eg, &gr);
    CHECK(gs == 1 && gr == (rank == 0 ? 0 : MPI_UNDEFINED), "groups %d %d", gs, gr);
    MPI_Comm_create(MPI_COMM_WORLD, eg, &created);
    CHECK((rank == 0) == (created != MPI_COMM_NULL), "create");
    if (created != MPI_COMM_NULL)
        MPI_Comm_free(&created);
    int key, *val = NULL, flag = 0, stored = 17;
    MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL);
    MPI_Comm_set_attr(dup, key, &stored);
    MPI_Comm dup2;
    MPI_Comm_dup(dup, &dup2);
    MPI_Comm_get_attr(dup2, key, &val, &flag);
    CHECK(flag && val == &stored, "attribute copied by dup");
    MPI_Comm_set_name(dup2, "dup2");
    char name[MPI_MAX_OBJECT_NAME];
    int len;
    MPI_Comm_get_name(dup2, name, &len);
    CHECK(strcmp(name, "dup2") == 0, "comm name");
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "k", "v");
    char value[8];
    MPI_Info_get(info, "k", sizeof value - 1, value, &flag);
    CHECK(flag && strcmp(value, "v") == 0, "info");
    MPI_Info_free(&info);
    MPI_Comm_free_keyval(&key);
    MPI_Group_free(&wg);
    MPI_Group_free(&eg);
    MPI_Group_free(&inter);
    MPI_Comm_free(&dup2);
    MPI_Comm_free(&dup);
    MPI_Comm_free(&half);
    MPI_Comm_free(&shm);
    CHECK(dup == MPI_COMM_NULL, "freed");
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    constants_and_types();
    errors();
    point_to_point();
    collectives();
    communicators();
    if (failures == 0)
        printf("abi_check: rank %d ok (%d checks)\n", rank, checks);
    fflush(stdout);
    MPI_Finalize();
    return failures ? 1 : 0;
}
