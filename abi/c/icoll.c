/*
 * icoll.c - nonblocking and persistent collectives against their blocking forms, and no
 * thread behind them.
 *
 * 1. Every collective with a nonblocking form (and its persistent form, started twice
 *    with different data) gives what the blocking form gives on the same input: derived
 *    datatypes on both sides, MPI_IN_PLACE, counts that differ per rank, a
 *    non-commutative user operation (2x2 matrix products mod 1009: associative, not
 *    commutative), several collectives pending at once and completed out of order.
 * 2. Two persistent collectives initialised A then B match by initialisation order
 *    whatever order each rank starts them in (MPI-4.1 6.13).
 * 3. A collective progresses while its caller waits elsewhere: an Ibarrier is pending
 *    while every rank does a blocking ring exchange.
 * 4. MPI_Comm_idup: the new communicator works.
 * 5. 10,000 MPI_Ibcast on 100 communicators, 100 pending at a time, each payload
 *    checked: the process's thread count (Threads: in /proc/self/status) while they are
 *    pending and after is what it was before the communicators were created (a thread
 *    per communicator, as this library had before, shows as 100 more).
 * Every rank prints "icoll: rank R ok (threads before B peak P after A)" or
 * "icoll: rank R FAILED ..." lines and exits 1.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proc_threads.h"

static int rank, size, bad;

#define CHECK(cond, ...)                                                                 \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            if (bad++ < 20) {                                                            \
                printf("icoll: rank %d FAILED line %d: ", rank, __LINE__);               \
                printf(__VA_ARGS__);                                                     \
                printf("\n");                                                            \
            }                                                                            \
        }                                                                                \
    } while (0)

/* 2x2 matrix product mod 1009: inout = in * inout (MPI's order: in op inout). */
static void matmul(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    int *a = in, *b = inout;
    for (int k = 0; k < *len; k++, a += 4, b += 4) {
        int r0 = (a[0] * b[0] + a[1] * b[2]) % 1009, r1 = (a[0] * b[1] + a[1] * b[3]) % 1009;
        int r2 = (a[2] * b[0] + a[3] * b[2]) % 1009, r3 = (a[2] * b[1] + a[3] * b[3]) % 1009;
        b[0] = r0, b[1] = r1, b[2] = r2, b[3] = r3;
    }
}

#define M 64 /* ints per buffer area */

static void fill(int *b, int n, int salt) {
    for (int i = 0; i < n; i++)
        b[i] = (rank + 1) * 1000 + i * 7 + salt;
}

static void mats(int *b, int nmat, int salt) {
    for (int i = 0; i < nmat * 4; i++)
        b[i] = (rank * 31 + i * 17 + salt) % 1009 + 1;
}

enum { BLOCKING, NONBLOCKING, PERSISTENT };

/* The input of collective `which` for `salt`: integers, or matrices for the kinds that
 * use the non-commutative operation. In-place kinds work on `in` itself. */
static void input(int which, int *in, int salt) {
    fill(in, M * 8, salt);
    if (which == 2 || which == 4 || which == 16 || which == 17)
        mats(in, 2 * M, salt);
}

/* Runs collective `which` in form `form` on fresh inputs (salt), results in out. */
static void run(int which, int form, int salt, int *out, MPI_Datatype vec, MPI_Op matop) {
    int in[M * 8], cnt[64], dsp[64], rcnt[64], rdsp[64];
    MPI_Datatype tys[64], rtys[64];
    MPI_Request rq = MPI_REQUEST_NULL;
    memset(out, 0xff, sizeof(int) * M * 8);
    input(which, in, salt);
    int root = size - 1;
    MPI_Comm w = MPI_COMM_WORLD;
    for (int i = 0; i < size; i++) {
        cnt[i] = 1 + (i + rank) % 3; /* used where counts may differ per pair */
        rcnt[i] = 1 + (i + rank) % 3;
        tys[i] = MPI_INT;
        rtys[i] = MPI_INT;
    }
#define GO(blk, nb, init)                                                                \
    do {                                                                                 \
        if (form == BLOCKING) {                                                          \
            blk;                                                                         \
        } else if (form == NONBLOCKING) {                                                \
            nb;                                                                          \
            MPI_Wait(&rq, MPI_STATUS_IGNORE);                                            \
        } else {                                                                         \
            init;                                                                        \
            MPI_Start(&rq);                                                              \
            MPI_Wait(&rq, MPI_STATUS_IGNORE);                                            \
            input(which, in, salt + 5);                                                  \
            MPI_Start(&rq);                                                              \
            MPI_Wait(&rq, MPI_STATUS_IGNORE);                                            \
            MPI_Request_free(&rq);                                                       \
        }                                                                                \
    } while (0)
    switch (which) {
    case 0: /* bcast of a strided type (3 blocks of 2 ints, stride 3), in place in `in` */
        GO(MPI_Bcast(in, 2, vec, root, w), MPI_Ibcast(in, 2, vec, root, w, &rq),
           MPI_Bcast_init(in, 2, vec, root, w, MPI_INFO_NULL, &rq));
        memcpy(out, in, sizeof(int) * M);
        break;
    case 1:
        GO(MPI_Reduce(in, out, 7, MPI_INT, MPI_SUM, 0, w), MPI_Ireduce(in, out, 7, MPI_INT, MPI_SUM, 0, w, &rq),
           MPI_Reduce_init(in, out, 7, MPI_INT, MPI_SUM, 0, w, MPI_INFO_NULL, &rq));
        break;
    case 2: { /* allreduce with the non-commutative operation over 4-int matrices */
        MPI_Datatype mat;
        MPI_Type_contiguous(4, MPI_INT, &mat);
        MPI_Type_commit(&mat);
        GO(MPI_Allreduce(in, out, 3, mat, matop, w), MPI_Iallreduce(in, out, 3, mat, matop, w, &rq),
           MPI_Allreduce_init(in, out, 3, mat, matop, w, MPI_INFO_NULL, &rq));
        MPI_Type_free(&mat);
        break;
    }
    case 3: /* allreduce in place (in `in`) */
        GO(MPI_Allreduce(MPI_IN_PLACE, in, 9, MPI_INT, MPI_MAX, w),
           MPI_Iallreduce(MPI_IN_PLACE, in, 9, MPI_INT, MPI_MAX, w, &rq),
           MPI_Allreduce_init(MPI_IN_PLACE, in, 9, MPI_INT, MPI_MAX, w, MPI_INFO_NULL, &rq));
        memcpy(out, in, sizeof(int) * 9);
        break;
    case 4: {
        MPI_Datatype mat;
        MPI_Type_contiguous(4, MPI_INT, &mat);
        MPI_Type_commit(&mat);
        GO(MPI_Scan(in, out, 2, mat, matop, w), MPI_Iscan(in, out, 2, mat, matop, w, &rq),
           MPI_Scan_init(in, out, 2, mat, matop, w, MPI_INFO_NULL, &rq));
        MPI_Type_free(&mat);
        break;
    }
    case 5:
        GO(MPI_Exscan(in, out, 6, MPI_INT, MPI_SUM, w), MPI_Iexscan(in, out, 6, MPI_INT, MPI_SUM, w, &rq),
           MPI_Exscan_init(in, out, 6, MPI_INT, MPI_SUM, w, MPI_INFO_NULL, &rq));
        if (rank == 0)
            memset(out, 0, sizeof(int) * 6); /* undefined at rank 0 */
        break;
    case 6: /* gather: strided send type, contiguous receive */
        GO(MPI_Gather(in, 1, vec, out, 6, MPI_INT, root, w), MPI_Igather(in, 1, vec, out, 6, MPI_INT, root, w, &rq),
           MPI_Gather_init(in, 1, vec, out, 6, MPI_INT, root, w, MPI_INFO_NULL, &rq));
        break;
    case 7: /* gatherv: counts differ per rank, displacements reversed */
        for (int i = 0; i < size; i++)
            rcnt[i] = 1 + i % 3, rdsp[i] = 4 * (size - 1 - i);
        GO(MPI_Gatherv(in, 1 + rank % 3, MPI_INT, out, rcnt, rdsp, MPI_INT, 0, w),
           MPI_Igatherv(in, 1 + rank % 3, MPI_INT, out, rcnt, rdsp, MPI_INT, 0, w, &rq),
           MPI_Gatherv_init(in, 1 + rank % 3, MPI_INT, out, rcnt, rdsp, MPI_INT, 0, w, MPI_INFO_NULL, &rq));
        break;
    case 8: /* scatter: contiguous send, strided receive */
        GO(MPI_Scatter(in, 6, MPI_INT, out, 1, vec, 0, w), MPI_Iscatter(in, 6, MPI_INT, out, 1, vec, 0, w, &rq),
           MPI_Scatter_init(in, 6, MPI_INT, out, 1, vec, 0, w, MPI_INFO_NULL, &rq));
        break;
    case 9:
        for (int i = 0; i < size; i++)
            cnt[i] = 1 + i % 3, dsp[i] = 5 * i + 1;
        GO(MPI_Scatterv(in, cnt, dsp, MPI_INT, out, 1 + rank % 3, MPI_INT, root, w),
           MPI_Iscatterv(in, cnt, dsp, MPI_INT, out, 1 + rank % 3, MPI_INT, root, w, &rq),
           MPI_Scatterv_init(in, cnt, dsp, MPI_INT, out, 1 + rank % 3, MPI_INT, root, w, MPI_INFO_NULL, &rq));
        break;
    case 10: /* allgather in place (in `in`: each rank's block already holds its part) */
        GO(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, in, 3, MPI_INT, w),
           MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, in, 3, MPI_INT, w, &rq),
           MPI_Allgather_init(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, in, 3, MPI_INT, w, MPI_INFO_NULL, &rq));
        memcpy(out, in, sizeof(int) * 3 * size);
        break;
    case 11:
        for (int i = 0; i < size; i++)
            rcnt[i] = 1 + i % 3, rdsp[i] = 4 * i + (i % 2);
        GO(MPI_Allgatherv(in, 1 + rank % 3, MPI_INT, out, rcnt, rdsp, MPI_INT, w),
           MPI_Iallgatherv(in, 1 + rank % 3, MPI_INT, out, rcnt, rdsp, MPI_INT, w, &rq),
           MPI_Allgatherv_init(in, 1 + rank % 3, MPI_INT, out, rcnt, rdsp, MPI_INT, w, MPI_INFO_NULL, &rq));
        break;
    case 12:
        GO(MPI_Alltoall(in, 2, MPI_INT, out, 2, MPI_INT, w), MPI_Ialltoall(in, 2, MPI_INT, out, 2, MPI_INT, w, &rq),
           MPI_Alltoall_init(in, 2, MPI_INT, out, 2, MPI_INT, w, MPI_INFO_NULL, &rq));
        break;
    case 13: /* alltoallv: what i sends j is 1 + (i + j) % 3 ints */
        for (int i = 0; i < size; i++)
            dsp[i] = 4 * i, rdsp[i] = 4 * (size - 1 - i);
        GO(MPI_Alltoallv(in, cnt, dsp, MPI_INT, out, rcnt, rdsp, MPI_INT, w),
           MPI_Ialltoallv(in, cnt, dsp, MPI_INT, out, rcnt, rdsp, MPI_INT, w, &rq),
           MPI_Alltoallv_init(in, cnt, dsp, MPI_INT, out, rcnt, rdsp, MPI_INT, w, MPI_INFO_NULL, &rq));
        break;
    case 14: /* alltoallw: byte displacements, per-peer types (the strided one to rank 0) */
        for (int i = 0; i < size; i++) {
            dsp[i] = (int)sizeof(int) * 8 * i, rdsp[i] = (int)sizeof(int) * 8 * (size - 1 - i);
            cnt[i] = rcnt[i] = 1;
            tys[i] = i == 0 ? vec : MPI_INT;
            rtys[i] = rank == 0 ? vec : MPI_INT;
        }
        GO(MPI_Alltoallw(in, cnt, dsp, tys, out, rcnt, rdsp, rtys, w),
           MPI_Ialltoallw(in, cnt, dsp, tys, out, rcnt, rdsp, rtys, w, &rq),
           MPI_Alltoallw_init(in, cnt, dsp, tys, out, rcnt, rdsp, rtys, w, MPI_INFO_NULL, &rq));
        break;
    case 15:
        for (int i = 0; i < size; i++)
            rcnt[i] = 1 + i % 2;
        GO(MPI_Reduce_scatter(in, out, rcnt, MPI_INT, MPI_SUM, w),
           MPI_Ireduce_scatter(in, out, rcnt, MPI_INT, MPI_SUM, w, &rq),
           MPI_Reduce_scatter_init(in, out, rcnt, MPI_INT, MPI_SUM, w, MPI_INFO_NULL, &rq));
        break;
    case 16: {
        MPI_Datatype mat;
        MPI_Type_contiguous(4, MPI_INT, &mat);
        MPI_Type_commit(&mat);
        GO(MPI_Reduce_scatter_block(in, out, 2, mat, matop, w),
           MPI_Ireduce_scatter_block(in, out, 2, mat, matop, w, &rq),
           MPI_Reduce_scatter_block_init(in, out, 2, mat, matop, w, MPI_INFO_NULL, &rq));
        MPI_Type_free(&mat);
        break;
    }
    case 17: { /* reduce with the non-commutative operation at a root that is not 0 */
        MPI_Datatype mat;
        MPI_Type_contiguous(4, MPI_INT, &mat);
        MPI_Type_commit(&mat);
        GO(MPI_Reduce(in, out, 1, mat, matop, root, w), MPI_Ireduce(in, out, 1, mat, matop, root, w, &rq),
           MPI_Reduce_init(in, out, 1, mat, matop, root, w, MPI_INFO_NULL, &rq));
        MPI_Type_free(&mat);
        break;
    }
    }
#undef GO
}

#define KINDS 18

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Datatype vec;
    MPI_Type_vector(3, 2, 3, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    MPI_Op matop;
    MPI_Op_create(matmul, 0, &matop);

    /* 1. Each form against the blocking one. The persistent form's second start has
     * salt + 5: compare with a blocking run on that salt. */
    static int want[M * 8], got[M * 8];
    for (int k = 0; k < KINDS; k++) {
        run(k, BLOCKING, 1, want, vec, matop);
        run(k, NONBLOCKING, 1, got, vec, matop);
        CHECK(memcmp(want, got, sizeof want) == 0, "collective %d: nonblocking differs from blocking", k);
        run(k, BLOCKING, 6, want, vec, matop);
        run(k, PERSISTENT, 1, got, vec, matop);
        CHECK(memcmp(want, got, sizeof want) == 0, "collective %d: persistent (second start) differs", k);
    }

    /* Several pending at once, completed in reverse order. */
    {
        int a[4], b[4], c[4], sa[4], sb[4];
        for (int i = 0; i < 4; i++)
            sa[i] = rank + i, sb[i] = rank * i;
        MPI_Request q[3];
        c[0] = rank == 0 ? 77 : -1;
        MPI_Iallreduce(sa, a, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[0]);
        MPI_Iallreduce(sb, b, 4, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &q[1]);
        MPI_Ibcast(c, 1, MPI_INT, 0, MPI_COMM_WORLD, &q[2]);
        for (int i = 2; i >= 0; i--)
            MPI_Wait(&q[i], MPI_STATUS_IGNORE);
        for (int i = 0; i < 4; i++) {
            CHECK(a[i] == size * (size - 1) / 2 + size * i, "pending allreduce sum[%d] = %d", i, a[i]);
            CHECK(b[i] == (size - 1) * i, "pending allreduce max[%d] = %d", i, b[i]);
        }
        CHECK(c[0] == 77, "pending bcast got %d", c[0]);
    }

    /* 2. Persistent collectives match by initialisation order. */
    {
        int x = rank + 1, y = 10 * (rank + 1), sx = -1, sy = -1;
        MPI_Request A, B;
        MPI_Allreduce_init(&x, &sx, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &A);
        MPI_Allreduce_init(&y, &sy, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, MPI_INFO_NULL, &B);
        if (rank % 2) {
            MPI_Start(&B);
            MPI_Start(&A);
        } else {
            MPI_Start(&A);
            MPI_Start(&B);
        }
        MPI_Request both[2] = {A, B};
        MPI_Waitall(2, both, MPI_STATUSES_IGNORE);
        CHECK(sx == size * (size + 1) / 2, "persistent A (sum) = %d", sx);
        CHECK(sy == 10 * size, "persistent B (max) = %d", sy);
        MPI_Request_free(&A);
        MPI_Request_free(&B);
    }

    /* 3. An Ibarrier pending while every rank does a blocking ring exchange. */
    {
        MPI_Request q;
        int flag = 0, token = rank, in = -1;
        MPI_Ibarrier(MPI_COMM_WORLD, &q);
        MPI_Sendrecv(&token, 1, MPI_INT, (rank + 1) % size, 3, &in, 1, MPI_INT, (rank + size - 1) % size, 3,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
        CHECK(in == (rank + size - 1) % size, "ring token %d", in);
        MPI_Test(&q, &flag, MPI_STATUS_IGNORE);
        CHECK(flag, "a completed (null) request tests complete");
    }

    /* 4. MPI_Comm_idup. */
    {
        MPI_Comm d;
        MPI_Request q;
        MPI_Comm_idup(MPI_COMM_WORLD, &d, &q);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
        int s = -1, one = 1;
        CHECK(d != MPI_COMM_NULL, "idup gave MPI_COMM_NULL");
        if (d != MPI_COMM_NULL) {
            MPI_Allreduce(&one, &s, 1, MPI_INT, MPI_SUM, d);
            CHECK(s == size, "allreduce on the idup'd communicator = %d", s);
            MPI_Comm_free(&d);
        }
    }

    /* 5. 10,000 Ibcast on 100 communicators. */
    enum { COMMS = 100, TOTAL = 10000 };
    static MPI_Comm comms[COMMS];
    /* Counted from before the communicators exist: the parts above started every kind
     * of nonblocking collective on MPI_COMM_WORLD, so what is started lazily once per
     * process is there already, and anything started per communicator is counted. */
    MPI_Barrier(MPI_COMM_WORLD);
    int before = threads(), peak = before;
    for (int i = 0; i < COMMS; i++)
        MPI_Comm_dup(MPI_COMM_WORLD, &comms[i]);
    static int vals[COMMS][2];
    for (int round = 0; round < TOTAL / COMMS; round++) {
        MPI_Request q[COMMS];
        for (int i = 0; i < COMMS; i++) {
            int root = (round + i) % size;
            vals[i][0] = rank == root ? round * 1000 + i : -1;
            vals[i][1] = rank == root ? root : -1;
            MPI_Ibcast(vals[i], 2, MPI_INT, root, comms[i], &q[i]);
        }
        int t = threads();
        if (t > peak)
            peak = t;
        MPI_Waitall(COMMS, q, MPI_STATUSES_IGNORE);
        for (int i = 0; i < COMMS; i++)
            CHECK(vals[i][0] == round * 1000 + i && vals[i][1] == (round + i) % size,
                  "ibcast %d on communicator %d: got %d %d", round, i, vals[i][0], vals[i][1]);
    }
    int after = threads();
    CHECK(peak == before && after == before, "threads before %d peak %d after %d", before, peak, after);
    for (int i = 0; i < COMMS; i++)
        MPI_Comm_free(&comms[i]);

    MPI_Op_free(&matop);
    MPI_Type_free(&vec);
    if (!bad)
        printf("icoll: rank %d ok (threads before %d peak %d after %d)\n", rank, before, peak, after);
    fflush(stdout);
    MPI_Finalize();
    return bad ? 1 : 0;
}
