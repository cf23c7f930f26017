/*
 * conformance.c - MPI-4.1 behaviours a conformance suite checks, each in a named group,
 * at any number of ranks, through the standard ABI only (gcc -I abi/include, or MPICH's
 * mpicc_abi), so the same binary runs on runthrough's and on MPICH's libmpi_abi.so.1.
 * Every rank prints "conformance: rank R ok (N checks)" or one
 * "conformance: rank R FAILED [group] line L: what" per failed check, and exits 1.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, checks, failures;
static const char *group = "";

#define CHECK(cond, ...)                                                              \
    do {                                                                              \
        checks++;                                                                     \
        if (!(cond)) {                                                                \
            failures++;                                                               \
            printf("conformance: rank %d FAILED [%s] line %d: ", rank, group, __LINE__); \
            printf(__VA_ARGS__);                                                      \
            printf("\n");                                                             \
        }                                                                             \
    } while (0)

#define SENTINEL 4242

/* MPI-4.1 3.2.5: single-completion calls leave status.MPI_ERROR untouched. */
static void status_error_untouched(void)
{
    group = "status";
    MPI_Comm c = MPI_COMM_SELF;
    int out[2] = {1, 2}, in[2] = {0, 0}, flag = 0;
    MPI_Status st;
    MPI_Request r;
    MPI_Message m;

    MPI_Isend(out, 2, MPI_INT, 0, 7, c, &r);
    st.MPI_ERROR = SENTINEL;
    MPI_Probe(0, 7, c, &st);
    CHECK(st.MPI_ERROR == SENTINEL && st.MPI_TAG == 7, "MPI_Probe: error field %d tag %d", st.MPI_ERROR, st.MPI_TAG);
    st.MPI_ERROR = SENTINEL;
    MPI_Iprobe(0, 7, c, &flag, &st);
    CHECK(flag && st.MPI_ERROR == SENTINEL, "MPI_Iprobe: error field %d", st.MPI_ERROR);
    st.MPI_ERROR = SENTINEL;
    MPI_Recv(in, 2, MPI_INT, 0, 7, c, &st);
    CHECK(st.MPI_ERROR == SENTINEL && in[1] == 2, "MPI_Recv: error field %d", st.MPI_ERROR);
    st.MPI_ERROR = SENTINEL;
    MPI_Wait(&r, &st);
    CHECK(st.MPI_ERROR == SENTINEL, "MPI_Wait: error field %d", st.MPI_ERROR);

    MPI_Isend(out, 2, MPI_INT, 0, 8, c, &r);
    st.MPI_ERROR = SENTINEL;
    MPI_Mprobe(0, 8, c, &m, &st);
    CHECK(st.MPI_ERROR == SENTINEL, "MPI_Mprobe: error field %d", st.MPI_ERROR);
    st.MPI_ERROR = SENTINEL;
    MPI_Mrecv(in, 2, MPI_INT, &m, &st);
    CHECK(st.MPI_ERROR == SENTINEL, "MPI_Mrecv: error field %d", st.MPI_ERROR);
    MPI_Wait(&r, MPI_STATUS_IGNORE);

    MPI_Isend(out, 2, MPI_INT, 0, 9, c, &r);
    st.MPI_ERROR = SENTINEL;
    flag = 0;
    while (!flag)
        MPI_Improbe(0, 9, c, &flag, &m, &st);
    CHECK(st.MPI_ERROR == SENTINEL, "MPI_Improbe: error field %d", st.MPI_ERROR);
    MPI_Request rr;
    MPI_Imrecv(in, 2, MPI_INT, &m, &rr);
    st.MPI_ERROR = SENTINEL;
    MPI_Wait(&rr, &st);
    CHECK(st.MPI_ERROR == SENTINEL, "MPI_Imrecv+MPI_Wait: error field %d", st.MPI_ERROR);
    MPI_Wait(&r, MPI_STATUS_IGNORE);

    int idx = -1;
    MPI_Isend(out, 1, MPI_INT, 0, 10, c, &r);
    MPI_Irecv(in, 1, MPI_INT, 0, 10, c, &rr);
    st.MPI_ERROR = SENTINEL;
    MPI_Waitany(1, &rr, &idx, &st);
    CHECK(st.MPI_ERROR == SENTINEL && idx == 0, "MPI_Waitany: error field %d", st.MPI_ERROR);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    st.MPI_ERROR = SENTINEL;
    MPI_Sendrecv(out, 1, MPI_INT, 0, 11, in, 1, MPI_INT, 0, 11, c, &st);
    CHECK(st.MPI_ERROR == SENTINEL, "MPI_Sendrecv: error field %d", st.MPI_ERROR);
}

static int eh_calls, eh_code;
static void record_error(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    eh_calls++;
    eh_code = *code;
}

/* A truncated receive fails its request with MPI_ERR_TRUNCATE. The multiple-completion
 * calls return MPI_ERR_IN_STATUS, the failing request's status holds its own code, and
 * the communicator's handler is called with that code, as MPI_Wait's would be. */
static void completion_error_codes(void)
{
    group = "completion";
    MPI_Comm c;
    MPI_Errhandler eh;
    MPI_Comm_dup(MPI_COMM_SELF, &c);
    MPI_Comm_create_errhandler(record_error, &eh);
    MPI_Comm_set_errhandler(c, eh);
    int out[2] = {1, 2}, in[2], cls = 0;
    const char *names[] = {"MPI_Waitall", "MPI_Testall", "MPI_Waitsome", "MPI_Testsome", "MPI_Wait"};
    for (int which = 0; which < 5; which++) {
        MPI_Request rq[2];
        MPI_Status st[2];
        int outcount = 0, idx[2], flag = 0, rc = MPI_SUCCESS;
        MPI_Isend(out, 2, MPI_INT, 0, 20 + which, c, &rq[1]);
        MPI_Irecv(in, 1, MPI_INT, 0, 20 + which, c, &rq[0]);
        MPI_Wait(&rq[1], MPI_STATUS_IGNORE);
        eh_calls = 0;
        eh_code = 0;
        st[0].MPI_ERROR = SENTINEL;
        switch (which) {
        case 0: rc = MPI_Waitall(1, rq, st); break;
        case 1: while (!flag) rc = MPI_Testall(1, rq, &flag, st); break;
        case 2: rc = MPI_Waitsome(1, rq, &outcount, idx, st); break;
        case 3: while (!outcount) rc = MPI_Testsome(1, rq, &outcount, idx, st); break;
        case 4: rc = MPI_Wait(rq, st); break;
        }
        MPI_Error_class(eh_code, &cls);
        CHECK(eh_calls == 1 && cls == MPI_ERR_TRUNCATE, "%s: handler called %d times with class %d", names[which],
              eh_calls, cls);
        if (which < 4) {
            MPI_Error_class(st[0].MPI_ERROR, &cls);
            CHECK(rc == MPI_ERR_IN_STATUS, "%s returned %d", names[which], rc);
            CHECK(cls == MPI_ERR_TRUNCATE, "%s: status error field %d", names[which], st[0].MPI_ERROR);
        } else {
            MPI_Error_class(rc, &cls);
            CHECK(cls == MPI_ERR_TRUNCATE, "MPI_Wait returned %d", rc);
        }
    }
    MPI_Errhandler_free(&eh);
    MPI_Comm_free(&c);
}

/* MPI-4.1 8.5.2: dimensions as close to each other as possible. */
static void dims(void)
{
    group = "dims";
    int d2[2] = {0, 0}, d3[3] = {0, 0, 0}, f3[3] = {0, 3, 0}, p2[2] = {0, 0};
    MPI_Dims_create(72, 2, d2);
    CHECK(d2[0] == 9 && d2[1] == 8, "72 in 2-D: %d x %d", d2[0], d2[1]);
    MPI_Dims_create(12, 3, d3);
    CHECK(d3[0] == 3 && d3[1] == 2 && d3[2] == 2, "12 in 3-D: %d x %d x %d", d3[0], d3[1], d3[2]);
    MPI_Dims_create(24, 3, f3);
    CHECK(f3[0] == 4 && f3[1] == 3 && f3[2] == 2, "24 in 3-D with 3 fixed: %d x %d x %d", f3[0], f3[1], f3[2]);
    MPI_Dims_create(13, 2, p2);
    CHECK(p2[0] == 13 && p2[1] == 1, "13 in 2-D: %d x %d", p2[0], p2[1]);
}

/* An affine map x -> a*x + b as (a, b): composing is associative, not commutative.
 * inout = in o inout, MPI's inoutvec = invec op inoutvec. */
typedef struct { long long a, b; } affine;
static void compose(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    affine *x = in, *y = inout;
    for (int i = 0; i < *len; i++) {
        affine r = {x[i].a * y[i].a, x[i].a * y[i].b + x[i].b};
        y[i] = r;
    }
}
static affine mine_of(int r, int i) { affine m = {2 + (r + i) % 3, r + 1 + i}; return m; }
/* m0 o m1 o ... o m(hi-1), from rank lo. */
static affine fold(int lo, int hi, int i)
{
    affine acc = mine_of(hi - 1, i);
    for (int r = hi - 2; r >= lo; r--) {
        affine m = mine_of(r, i), t = {m.a * acc.a, m.a * acc.b + m.b};
        acc = t;
    }
    return acc;
}

/* MPI-4.1 6.9.5: a non-commutative operation is applied in rank order. */
static void noncommutative_reductions(void)
{
    group = "noncommutative";
    MPI_Op op;
    MPI_Datatype t;
    MPI_Op_create(compose, 0, &op);
    MPI_Type_contiguous(2, MPI_LONG_LONG, &t);
    MPI_Type_commit(&t);
    enum { K = 3 };
    affine in[K * 8], out[K * 8];
    for (int i = 0; i < K * size && i < K * 8; i++)
        in[i] = mine_of(rank, i);
    memset(out, 0, sizeof out);
    MPI_Allreduce(in, out, K, t, op, MPI_COMM_WORLD);
    for (int i = 0; i < K; i++) {
        affine e = fold(0, size, i);
        CHECK(out[i].a == e.a && out[i].b == e.b, "Allreduce elem %d: (%lld,%lld) want (%lld,%lld)", i, out[i].a,
              out[i].b, e.a, e.b);
    }
    memset(out, 0, sizeof out);
    MPI_Reduce(in, out, K, t, op, size - 1, MPI_COMM_WORLD);
    if (rank == size - 1)
        for (int i = 0; i < K; i++) {
            affine e = fold(0, size, i);
            CHECK(out[i].a == e.a && out[i].b == e.b, "Reduce elem %d: (%lld,%lld) want (%lld,%lld)", i, out[i].a,
                  out[i].b, e.a, e.b);
        }
    memset(out, 0, sizeof out);
    MPI_Scan(in, out, K, t, op, MPI_COMM_WORLD);
    for (int i = 0; i < K; i++) {
        affine e = fold(0, rank + 1, i);
        CHECK(out[i].a == e.a && out[i].b == e.b, "Scan elem %d: (%lld,%lld) want (%lld,%lld)", i, out[i].a, out[i].b,
              e.a, e.b);
    }
    memset(out, 0, sizeof out);
    MPI_Exscan(in, out, K, t, op, MPI_COMM_WORLD);
    if (rank > 0)
        for (int i = 0; i < K; i++) {
            affine e = fold(0, rank, i);
            CHECK(out[i].a == e.a && out[i].b == e.b, "Exscan elem %d: (%lld,%lld) want (%lld,%lld)", i, out[i].a,
                  out[i].b, e.a, e.b);
        }
    if (size <= 8) {
        /* Reduce_scatter_block: K elements per rank; element j of the whole vector. */
        affine big[K * 8], part[K];
        for (int j = 0; j < K * size; j++)
            big[j] = mine_of(rank, j);
        MPI_Reduce_scatter_block(big, part, K, t, op, MPI_COMM_WORLD);
        for (int i = 0; i < K; i++) {
            affine e = fold(0, size, rank * K + i);
            CHECK(part[i].a == e.a && part[i].b == e.b, "Reduce_scatter_block elem %d: (%lld,%lld) want (%lld,%lld)",
                  i, part[i].a, part[i].b, e.a, e.b);
        }
    }
    MPI_Type_free(&t);
    MPI_Op_free(&op);
}

/* MPI ignores the receive arguments of a gather and the send arguments of a scatter
 * away from the root: MPI_DATATYPE_NULL (and NULL arrays) must be accepted there; an
 * empty message needs no datatype. */
static void null_arguments(void)
{
    group = "null args";
    int v = rank + 1, all[64], rc, cnt[64], dsp[64];
    int root = size - 1, is_root = rank == root;
    for (int i = 0; i < size && i < 64; i++) {
        all[i] = -1;
        cnt[i] = 1;
        dsp[i] = i;
    }
    rc = MPI_Gather(&v, 1, MPI_INT, is_root ? all : NULL, is_root ? 1 : 0, is_root ? MPI_INT : MPI_DATATYPE_NULL,
                    root, MPI_COMM_WORLD);
    CHECK(rc == MPI_SUCCESS, "MPI_Gather with MPI_DATATYPE_NULL away from the root: rc %d", rc);
    if (is_root)
        for (int i = 0; i < size && i < 64; i++)
            CHECK(all[i] == i + 1, "MPI_Gather block %d = %d", i, all[i]);
    rc = MPI_Gatherv(&v, 1, MPI_INT, is_root ? all : NULL, is_root ? cnt : NULL, is_root ? dsp : NULL,
                     is_root ? MPI_INT : MPI_DATATYPE_NULL, root, MPI_COMM_WORLD);
    CHECK(rc == MPI_SUCCESS, "MPI_Gatherv with null receive arguments away from the root: rc %d", rc);
    int got = -1;
    for (int i = 0; i < size && i < 64; i++)
        all[i] = 100 + i;
    rc = MPI_Scatter(is_root ? all : NULL, is_root ? 1 : 0, is_root ? MPI_INT : MPI_DATATYPE_NULL, &got, 1, MPI_INT,
                     root, MPI_COMM_WORLD);
    CHECK(rc == MPI_SUCCESS && got == 100 + rank, "MPI_Scatter with MPI_DATATYPE_NULL away from the root: rc %d got %d",
          rc, got);
    got = -1;
    rc = MPI_Scatterv(is_root ? all : NULL, is_root ? cnt : NULL, is_root ? dsp : NULL,
                      is_root ? MPI_INT : MPI_DATATYPE_NULL, &got, 1, MPI_INT, root, MPI_COMM_WORLD);
    CHECK(rc == MPI_SUCCESS && got == 100 + rank, "MPI_Scatterv with null send arguments: rc %d got %d", rc, got);
    MPI_Status st;
    rc = MPI_Send(NULL, 0, MPI_DATATYPE_NULL, MPI_PROC_NULL, 0, MPI_COMM_WORLD);
    CHECK(rc == MPI_SUCCESS, "MPI_Send of 0 MPI_DATATYPE_NULL to MPI_PROC_NULL: rc %d", rc);
    rc = MPI_Recv(NULL, 0, MPI_DATATYPE_NULL, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st);
    CHECK(rc == MPI_SUCCESS && st.MPI_SOURCE == MPI_PROC_NULL, "MPI_Recv of 0 MPI_DATATYPE_NULL from MPI_PROC_NULL: rc %d",
          rc);
}

static void add_pairs(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    for (int i = 0; i < 2 * *len; i++)
        ((int *)inout)[i] += ((int *)in)[i];
}

/* MPI-4.1 5.1.10 and 6.9.5: a datatype or operation freed while a nonblocking or
 * persistent collective uses it stays with that collective until it completes. */
static void freed_while_in_use(void)
{
    group = "freed in use";
    MPI_Op op;
    MPI_Datatype t;
    MPI_Request r;
    int in[2] = {rank, 1}, out[2] = {0, 0}, rc;
    int want0 = size * (size - 1) / 2;
    MPI_Op_create(add_pairs, 1, &op);
    MPI_Type_contiguous(2, MPI_INT, &t);
    MPI_Type_commit(&t);
    MPI_Iallreduce(in, out, 1, t, op, MPI_COMM_WORLD, &r);
    MPI_Op_free(&op);
    MPI_Type_free(&t);
    rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
    CHECK(rc == MPI_SUCCESS && out[0] == want0 && out[1] == size, "MPI_Iallreduce after freeing its op and type: rc %d "
          "result (%d,%d)", rc, out[0], out[1]);
    MPI_Op_create(add_pairs, 1, &op);
    MPI_Type_contiguous(2, MPI_INT, &t);
    MPI_Type_commit(&t);
    MPI_Allreduce_init(in, out, 1, t, op, MPI_COMM_WORLD, MPI_INFO_NULL, &r);
    MPI_Op_free(&op);
    MPI_Type_free(&t);
    for (int round = 0; round < 2; round++) {
        out[0] = out[1] = 0;
        MPI_Start(&r);
        rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
        CHECK(rc == MPI_SUCCESS && out[0] == want0 && out[1] == size, "persistent MPI_Allreduce round %d after freeing: "
              "rc %d result (%d,%d)", round, rc, out[0], out[1]);
    }
    MPI_Request_free(&r);
}

/* MPI-4.1 7.4.2: MPI_Comm_idup is nonblocking. Rank 0 starts it, then sends to rank 1,
 * which receives before it starts its own: a blocking idup deadlocks here. */
static void idup_overlaps(void)
{
    group = "idup";
    if (size < 2)
        return;
    MPI_Comm dup = MPI_COMM_NULL;
    MPI_Request r;
    int x = 0, rc, sum = 0;
    if (rank == 0) {
        rc = MPI_Comm_idup(MPI_COMM_WORLD, &dup, &r);
        CHECK(rc == MPI_SUCCESS, "MPI_Comm_idup rc %d", rc);
        x = 42;
        MPI_Send(&x, 1, MPI_INT, 1, 30, MPI_COMM_WORLD);
    } else {
        if (rank == 1)
            MPI_Recv(&x, 1, MPI_INT, 0, 30, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        rc = MPI_Comm_idup(MPI_COMM_WORLD, &dup, &r);
        CHECK(rc == MPI_SUCCESS, "MPI_Comm_idup rc %d", rc);
    }
    rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
    CHECK(rc == MPI_SUCCESS && dup != MPI_COMM_NULL, "MPI_Wait on the idup: rc %d", rc);
    if (dup != MPI_COMM_NULL) {
        int one = 1;
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, dup);
        CHECK(sum == size, "allreduce on the idup'ed communicator: %d", sum);
        MPI_Comm_free(&dup);
    }
}

/* MPI_THREAD_MULTIPLE: two threads create and free communicators at once, each from its
 * own parent (MPI-4.1 7.4.2 allows concurrent creation on distinct communicators). */
struct creator { MPI_Comm parent; int bad, iters, value; };
static void *create_many(void *arg)
{
    struct creator *c = arg;
    for (int i = 0; i < c->iters; i++) {
        MPI_Comm d;
        int v = c->value, sum = 0;
        if (MPI_Comm_dup(c->parent, &d) != MPI_SUCCESS) {
            c->bad++;
            continue;
        }
        /* Each thread's own values: a message crossing to the other thread's
         * communicator (a shared context) shows in the sum. */
        if (MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, d) != MPI_SUCCESS || sum != size * c->value)
            c->bad++;
        MPI_Comm_free(&d);
    }
    return NULL;
}
static void concurrent_creation(int provided)
{
    group = "threads";
    if (provided < MPI_THREAD_MULTIPLE)
        return;
    struct creator c[2];
    pthread_t t[2];
    /* The second parent orders the ranks the other way round. */
    MPI_Comm_dup(MPI_COMM_WORLD, &c[0].parent);
    MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &c[1].parent);
    for (int i = 0; i < 2; i++) {
        c[i].bad = 0;
        c[i].iters = 50;
        c[i].value = i ? 1000 : 1;
    }
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, create_many, &c[i]);
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        CHECK(c[i].bad == 0, "thread %d: %d of %d dup+allreduce failed", i, c[i].bad, c[i].iters);
        MPI_Comm_free(&c[i].parent);
    }
}

/* MPI-4.1 6.13: persistent collectives match in the order of their _init calls; the
 * even ranks start A then B, the odd ones B then A. */
static void persistent_init_order(void)
{
    group = "persistent order";
    MPI_Request r[2];
    int in[2] = {1, 100}, out[2] = {0, 0}, rc;
    MPI_Allreduce_init(&in[0], &out[0], 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &r[0]);
    MPI_Allreduce_init(&in[1], &out[1], 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &r[1]);
    for (int round = 0; round < 3; round++) {
        out[0] = out[1] = 0;
        int first = rank % 2;
        MPI_Start(&r[first]);
        MPI_Start(&r[1 - first]);
        rc = MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
        CHECK(rc == MPI_SUCCESS && out[0] == size && out[1] == 100 * size,
              "round %d: rc %d, A %d (want %d), B %d (want %d)", round, rc, out[0], size, out[1], 100 * size);
    }
    MPI_Request_free(&r[0]);
    MPI_Request_free(&r[1]);
}

/* MPI-4.1 7.4.2: MPI_Comm_split of an intercommunicator gives intercommunicators. */
static void intercomm_split(void)
{
    group = "intercomm split/merge";
    if (size < 2)
        return;
    MPI_Comm half, inter, part;
    int low = rank < size / 2, is_inter = 0, lsize = 0, rsize = 0, rc;
    MPI_Comm_split(MPI_COMM_WORLD, low, rank, &half);
    rc = MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, low ? size / 2 : 0, 77, &inter);
    CHECK(rc == MPI_SUCCESS, "MPI_Intercomm_create rc %d", rc);
    if (rc != MPI_SUCCESS)
        return;
    int lrank;
    MPI_Comm_rank(inter, &lrank);
    /* Even local ranks of both sides together, odd ones together. */
    rc = MPI_Comm_split(inter, lrank % 2, -lrank, &part);
    CHECK(rc == MPI_SUCCESS, "MPI_Comm_split of an intercommunicator: rc %d", rc);
    int mine_local = 0, mine_remote = 0;
    int lo = size / 2, hi = size - size / 2;
    int here = low ? lo : hi, there = low ? hi : lo;
    for (int r = 0; r < here; r++)
        mine_local += r % 2 == lrank % 2;
    for (int r = 0; r < there; r++)
        mine_remote += r % 2 == lrank % 2;
    if (mine_remote == 0) {
        CHECK(part == MPI_COMM_NULL, "no partner on the other side: MPI_COMM_NULL expected");
    } else if (part != MPI_COMM_NULL) {
        MPI_Comm_test_inter(part, &is_inter);
        MPI_Comm_size(part, &lsize);
        MPI_Comm_remote_size(part, &rsize);
        CHECK(is_inter && lsize == mine_local && rsize == mine_remote,
              "split intercommunicator: inter %d, local size %d (want %d), remote size %d (want %d)", is_inter, lsize,
              mine_local, rsize, mine_remote);
        int prank = -1;
        MPI_Comm_rank(part, &prank);
        /* Key -lrank: the highest old rank of this color comes first. */
        int want = 0;
        for (int r = lrank + 1; r < here; r++)
            want += r % 2 == lrank % 2;
        CHECK(prank == want, "rank in the split intercommunicator %d, want %d (ordered by key)", prank, want);
        MPI_Comm_free(&part);
    } else {
        CHECK(0, "MPI_Comm_split of an intercommunicator gave MPI_COMM_NULL with %d partners", mine_remote);
    }
    /* MPI-4.1 7.6.2: merging, the side passing high = 0 first. */
    for (int same = 0; same < 2; same++) {
        MPI_Comm merged;
        int high = same ? 1 : !low, mrank = -1, msize = 0;
        rc = MPI_Intercomm_merge(inter, high, &merged);
        CHECK(rc == MPI_SUCCESS, "MPI_Intercomm_merge(high %d): rc %d", high, rc);
        if (rc != MPI_SUCCESS)
            continue;
        MPI_Comm_rank(merged, &mrank);
        MPI_Comm_size(merged, &msize);
        /* The low half first either way (high 0; or equal high values and the lowest
         * world rank there). */
        CHECK(msize == size && mrank == rank, "merged (high %d): rank %d of %d, want %d of %d", high, mrank, msize,
              rank, size);
        int one = 1, sum = 0;
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, merged);
        CHECK(sum == size, "allreduce on the merged communicator: %d", sum);
        MPI_Comm_free(&merged);
    }
    /* The high half first when the low half passes high = 1. */
    MPI_Comm merged;
    if (MPI_Intercomm_merge(inter, low, &merged) == MPI_SUCCESS) {
        int mrank = -1;
        MPI_Comm_rank(merged, &mrank);
        int want = low ? rank + (size - size / 2) : rank - size / 2;
        CHECK(mrank == want, "merged with the high half first: rank %d, want %d", mrank, want);
        MPI_Comm_free(&merged);
    }
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
}

/* MPI-4.1 7.4.2: MPI_Comm_create_group is collective over the group's members only: the
 * even ranks make one, the odd ranks (which do not call it) keep exchanging with each
 * other meanwhile. */
static void create_group_of_a_subgroup(void)
{
    group = "create_group";
    if (size < 2)
        return;
    MPI_Group world, evens;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int n = (size + 1) / 2, ranks[64];
    for (int i = 0; i < n && i < 64; i++)
        ranks[i] = 2 * i;
    MPI_Group_incl(world, n, ranks, &evens);
    if (rank % 2 == 0) {
        MPI_Comm sub = MPI_COMM_NULL;
        int rc = MPI_Comm_create_group(MPI_COMM_WORLD, evens, 5, &sub), sum = 0, one = 1, srank = -1;
        CHECK(rc == MPI_SUCCESS && sub != MPI_COMM_NULL, "MPI_Comm_create_group of the even ranks: rc %d", rc);
        if (sub != MPI_COMM_NULL) {
            MPI_Comm_rank(sub, &srank);
            MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, sub);
            CHECK(sum == n && srank == rank / 2, "on it: sum %d (want %d), rank %d (want %d)", sum, n, srank, rank / 2);
            MPI_Comm_free(&sub);
        }
    } else if (rank + 2 < size || rank >= 3) {
        /* Odd ranks talk among themselves meanwhile. */
        int peer = rank + 2 < size ? rank + 2 : rank - 2, x = rank, y = -1;
        MPI_Sendrecv(&x, 1, MPI_INT, peer, 6, &y, 1, MPI_INT, peer, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(y == peer, "odd ranks' exchange: %d", y);
    }
    MPI_Group_free(&evens);
    MPI_Group_free(&world);
}

int main(int argc, char **argv)
{
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    status_error_untouched();
    completion_error_codes();
    dims();
    noncommutative_reductions();
    null_arguments();
    freed_while_in_use();
    idup_overlaps();
    concurrent_creation(provided);
    persistent_init_order();
    intercomm_split();
    create_group_of_a_subgroup();
    if (failures == 0)
        printf("conformance: rank %d ok (%d checks)\n", rank, checks);
    fflush(stdout);
    MPI_Finalize();
    return failures ? 1 : 0;
}
