/*
 * conformance_p2p.c - MPI-4.1 point-to-point behaviours a conformance suite checks, each
 * in a named group, at any number of ranks, through the standard ABI only (gcc -I
 * abi/include, or MPICH's mpicc_abi), so the same binary runs on runthrough's and on
 * MPICH's libmpi_abi.so.1:
 *   - buffered mode (3.6): the attached buffer's space is enforced (MPI_ERR_BUFFER),
 *     detach waits for the buffered messages and returns the buffer, flush and iflush,
 *     communicator, session and automatic buffers, MPI_Ibsend and MPI_Bsend_init;
 *   - cancel (3.8.4): an unmatched send is cancelled (eager, rendezvous, synchronous,
 *     persistent) and never received, a delivered one is not, receives as before;
 *   - generalized requests (13.2): callbacks and the completion calls on them.
 * Every rank prints "conformance_p2p: rank R ok (N checks)" or one
 * "conformance_p2p: rank R FAILED [group] line L: what" per failed check, and exits 1.
 * An argument runs only the parts whose name contains it (e.g. "cancel", "bsend").
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, size, peer, from, checks, failures;
static const char *group = "";

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        checks++;                                                                          \
        if (!(cond)) {                                                                     \
            failures++;                                                                    \
            printf("conformance_p2p: rank %d FAILED [%s] line %d: ", rank, group, __LINE__); \
            printf(__VA_ARGS__);                                                           \
            printf("\n");                                                                  \
        }                                                                                  \
    } while (0)

/* Far above any eager limit: its send waits for the receiver to take it. */
#define BIG (1 << 20)
#define OVH MPI_BSEND_OVERHEAD
/* How long a check waits for something that must happen. */
#define PATIENCE 10.0

static int eclass(int rc)
{
    int c = rc;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &c);
    return c;
}

static void fill(char *p, int n, int seed)
{
    for (int i = 0; i < n; i++)
        p[i] = (char)(seed + i * 7);
}

static int same(const char *p, int n, int seed)
{
    for (int i = 0; i < n; i++)
        if (p[i] != (char)(seed + i * 7))
            return 0;
    return 1;
}

/* MPI_Test until complete or PATIENCE seconds: whether it completed. */
static int test_until(MPI_Request *r, MPI_Status *st)
{
    int flag = 0;
    double t0 = MPI_Wtime();
    while (!flag && MPI_Wtime() - t0 < PATIENCE)
        MPI_Test(r, &flag, st);
    return flag;
}

/* ---- buffered mode -------------------------------------------------------------------- */

/* MPI behaves as with a zero-sized buffer when none is attached. */
static void bsend_no_buffer(void)
{
    group = "bsend-none";
    char small[16] = {0};
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = MPI_Bsend(small, 16, MPI_BYTE, rank, 1, MPI_COMM_WORLD);
    CHECK(eclass(rc) == MPI_ERR_BUFFER, "MPI_Bsend with no buffer attached: rc %d (class %d), want MPI_ERR_BUFFER", rc,
          eclass(rc));
    rc = MPI_Ibsend(small, 16, MPI_BYTE, rank, 1, MPI_COMM_WORLD, &r);
    CHECK(eclass(rc) == MPI_ERR_BUFFER, "MPI_Ibsend with no buffer attached: rc %d (class %d), want MPI_ERR_BUFFER",
          rc, eclass(rc));
    if (rc == MPI_SUCCESS)
        MPI_Wait(&r, MPI_STATUS_IGNORE);
    int flag = 1;
    MPI_Iprobe(rank, 1, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    CHECK(!flag, "a buffered send that failed sent its message");
    while (flag) {
        MPI_Recv(small, 16, MPI_BYTE, rank, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Iprobe(rank, 1, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    }
}

/* The attached space bounds what is buffered; it frees up as messages drain. */
static void bsend_space(void)
{
    group = "bsend-space";
    int bufsize = BIG + OVH + 64 + OVH;
    char *buf = malloc(bufsize), *big = malloc(BIG), *in = malloc(BIG);
    char small[64], sin[64];
    int rc = MPI_Buffer_attach(buf, bufsize);
    CHECK(rc == MPI_SUCCESS, "MPI_Buffer_attach of %d bytes: rc %d", bufsize, rc);

    fill(big, BIG, 1);
    rc = MPI_Bsend(big, BIG, MPI_BYTE, rank, 11, MPI_COMM_WORLD);
    CHECK(rc == MPI_SUCCESS, "MPI_Bsend of %d bytes into a %d-byte buffer: rc %d", BIG, bufsize, rc);
    memset(big, 0, BIG); /* buffered: the send buffer is the program's again */
    fill(small, 64, 2);
    rc = MPI_Bsend(small, 64, MPI_BYTE, rank, 12, MPI_COMM_WORLD);
    CHECK(rc == MPI_SUCCESS, "MPI_Bsend of 64 bytes into the %d bytes left: rc %d", 64 + OVH, rc);
    fill(big, BIG, 3);
    rc = MPI_Bsend(big, BIG, MPI_BYTE, rank, 13, MPI_COMM_WORLD);
    CHECK(eclass(rc) == MPI_ERR_BUFFER,
          "MPI_Bsend of %d bytes while the buffer holds an undelivered message of as many: rc %d (class %d), want "
          "MPI_ERR_BUFFER",
          BIG, rc, eclass(rc));
    int sent13 = rc == MPI_SUCCESS;

    MPI_Recv(in, BIG, MPI_BYTE, rank, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(same(in, BIG, 1), "the first buffered message arrived altered");
    MPI_Recv(sin, 64, MPI_BYTE, rank, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(same(sin, 64, 2), "the second buffered message arrived altered");
    if (sent13)
        MPI_Recv(in, BIG, MPI_BYTE, rank, 13, MPI_COMM_WORLD, MPI_STATUS_IGNORE);

    /* Received: the messages drain and their space is free again. */
    rc = MPI_ERR_BUFFER;
    double t0 = MPI_Wtime();
    while (eclass(rc) == MPI_ERR_BUFFER && MPI_Wtime() - t0 < PATIENCE)
        rc = MPI_Bsend(big, BIG, MPI_BYTE, rank, 14, MPI_COMM_WORLD);
    CHECK(rc == MPI_SUCCESS, "MPI_Bsend of %d bytes after the earlier messages were received: rc %d (class %d)", BIG,
          rc, eclass(rc));
    if (rc == MPI_SUCCESS) {
        MPI_Recv(in, BIG, MPI_BYTE, rank, 14, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(same(in, BIG, 3), "the message buffered after the drain arrived altered");
    }

    void *addr = NULL;
    int sz = -1;
    rc = MPI_Buffer_detach(&addr, &sz);
    CHECK(rc == MPI_SUCCESS && addr == buf && sz == bufsize, "MPI_Buffer_detach: rc %d address %p size %d, want %p %d",
          rc, addr, sz, (void *)buf, bufsize);

    /* A buffer of exactly one message plus MPI_BSEND_OVERHEAD holds that message (of an
     * odd size: no padding may be asked for). */
    int odd = BIG - 3;
    rc = MPI_Buffer_attach(buf, odd + OVH);
    rc = rc ? rc : MPI_Bsend(big, odd, MPI_BYTE, rank, 15, MPI_COMM_WORLD);
    CHECK(rc == MPI_SUCCESS, "MPI_Bsend of %d bytes into a buffer of %d + MPI_BSEND_OVERHEAD bytes: rc %d", odd, odd,
          rc);
    if (rc == MPI_SUCCESS)
        MPI_Recv(in, odd, MPI_BYTE, rank, 15, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Buffer_detach(&addr, &sz);
    free(buf);
    free(big);
    free(in);
}

/* MPI_Buffer_detach blocks until the buffered messages were transmitted: the receiver
 * (the odd rank of a pair) takes the message late, after the sender reused its buffer. */
static void bsend_detach_waits(void)
{
    group = "bsend-detach";
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank % 2 == 0 && rank + 1 < size) {
        char *buf = malloc(BIG + OVH), *big = malloc(BIG);
        MPI_Buffer_attach(buf, BIG + OVH);
        fill(big, BIG, 5);
        int rc = MPI_Bsend(big, BIG, MPI_BYTE, rank + 1, 21, MPI_COMM_WORLD);
        CHECK(rc == MPI_SUCCESS, "MPI_Bsend: rc %d", rc);
        void *addr = NULL;
        int sz = -1;
        double t0 = MPI_Wtime();
        rc = MPI_Buffer_detach(&addr, &sz);
        double t = MPI_Wtime() - t0;
        memset(buf, 0x5a, BIG + OVH); /* the program's again */
        CHECK(rc == MPI_SUCCESS && addr == buf && sz == BIG + OVH, "MPI_Buffer_detach: rc %d address %p size %d", rc,
              addr, sz);
        CHECK(t > 0.25, "MPI_Buffer_detach returned after %.3f s, before the receiver (0.5 s late) took the message", t);
        free(buf);
        free(big);
    } else if (rank % 2 == 1) {
        char *in = malloc(BIG);
        usleep(500000);
        MPI_Recv(in, BIG, MPI_BYTE, rank - 1, 21, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(same(in, BIG, 5), "the message arrived altered: the sender's detach returned before it was transmitted");
        free(in);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* MPI_Buffer_flush empties the buffer; an iflush request completes once the messages
 * buffered before it were transmitted. */
static void bsend_flush(void)
{
    group = "bsend-flush";
    char *buf = malloc(BIG + OVH), *big = malloc(BIG), *in = malloc(BIG);
    MPI_Request rr, fr;
    MPI_Buffer_attach(buf, BIG + OVH);

    MPI_Irecv(in, BIG, MPI_BYTE, rank, 31, MPI_COMM_WORLD, &rr);
    fill(big, BIG, 6);
    MPI_Bsend(big, BIG, MPI_BYTE, rank, 31, MPI_COMM_WORLD);
    int rc = MPI_Buffer_flush();
    CHECK(rc == MPI_SUCCESS, "MPI_Buffer_flush: rc %d", rc);
    /* Flushed: the whole buffer is free for the next message. */
    fill(big, BIG, 7);
    rc = MPI_Bsend(big, BIG, MPI_BYTE, rank, 32, MPI_COMM_WORLD);
    CHECK(rc == MPI_SUCCESS, "MPI_Bsend filling the buffer right after MPI_Buffer_flush: rc %d (class %d)", rc,
          eclass(rc));
    MPI_Wait(&rr, MPI_STATUS_IGNORE);
    CHECK(same(in, BIG, 6), "the flushed message arrived altered");

    rc = MPI_Buffer_iflush(&fr);
    CHECK(rc == MPI_SUCCESS, "MPI_Buffer_iflush: rc %d", rc);
    if (rc == MPI_SUCCESS) {
        int early = 0;
        MPI_Test(&fr, &early, MPI_STATUS_IGNORE);
        MPI_Recv(in, BIG, MPI_BYTE, rank, 32, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(same(in, BIG, 7), "the message buffered before MPI_Buffer_iflush arrived altered");
        int done = early || test_until(&fr, MPI_STATUS_IGNORE);
        CHECK(done, "MPI_Buffer_iflush's request did not complete within %.0f s of its message's receipt", PATIENCE);
        if (done) {
            fill(big, BIG, 8);
            rc = MPI_Bsend(big, BIG, MPI_BYTE, rank, 33, MPI_COMM_WORLD);
            CHECK(rc == MPI_SUCCESS, "MPI_Bsend filling the buffer after MPI_Buffer_iflush completed: rc %d", rc);
            if (rc == MPI_SUCCESS)
                MPI_Recv(in, BIG, MPI_BYTE, rank, 33, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    } else {
        MPI_Recv(in, BIG, MPI_BYTE, rank, 32, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    void *addr;
    int sz;
    MPI_Buffer_detach(&addr, &sz);
    free(buf);
    free(big);
    free(in);
}

/* MPI_Ibsend completes once the data is buffered; MPI_Bsend_init's starts buffer too. */
static void bsend_nonblocking(void)
{
    group = "bsend-ibsend";
    char *buf = malloc(BIG + OVH), *big = malloc(BIG), *in = malloc(BIG);
    char small[16] = {0};
    MPI_Request r, pr;
    void *addr;
    int sz, rc, rc2;

    /* No buffer: a persistent buffered send's start fails (or its completion does). */
    MPI_Bsend_init(small, 16, MPI_BYTE, rank, 41, MPI_COMM_WORLD, &pr);
    rc = MPI_Start(&pr);
    rc2 = rc == MPI_SUCCESS ? MPI_Wait(&pr, MPI_STATUS_IGNORE) : MPI_SUCCESS;
    CHECK(eclass(rc) == MPI_ERR_BUFFER || eclass(rc2) == MPI_ERR_BUFFER,
          "MPI_Start of an MPI_Bsend_init request with no buffer attached: rc %d, then MPI_Wait %d", rc, rc2);
    MPI_Request_free(&pr);
    int flag = 0;
    MPI_Iprobe(rank, 41, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    if (flag)
        MPI_Recv(small, 16, MPI_BYTE, rank, 41, MPI_COMM_WORLD, MPI_STATUS_IGNORE);

    MPI_Buffer_attach(buf, BIG + OVH);
    fill(big, BIG, 9);
    rc = MPI_Ibsend(big, BIG, MPI_BYTE, rank, 42, MPI_COMM_WORLD, &r);
    CHECK(rc == MPI_SUCCESS, "MPI_Ibsend: rc %d", rc);
    int done = test_until(&r, MPI_STATUS_IGNORE);
    CHECK(done, "MPI_Ibsend's request did not complete before its message was received");
    memset(big, 0, BIG);
    MPI_Recv(in, BIG, MPI_BYTE, rank, 42, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(same(in, BIG, 9), "the MPI_Ibsend message arrived altered");
    if (!done)
        MPI_Wait(&r, MPI_STATUS_IGNORE);
    MPI_Buffer_flush();

    fill(big, BIG, 10);
    MPI_Bsend_init(big, BIG, MPI_BYTE, rank, 43, MPI_COMM_WORLD, &pr);
    rc = MPI_Start(&pr);
    rc2 = rc == MPI_SUCCESS ? MPI_Wait(&pr, MPI_STATUS_IGNORE) : rc;
    CHECK(rc == MPI_SUCCESS && rc2 == MPI_SUCCESS, "persistent buffered send: MPI_Start rc %d, MPI_Wait rc %d", rc, rc2);
    /* The buffer still holds the first start's message: the second does not fit. */
    rc = MPI_Start(&pr);
    rc2 = rc == MPI_SUCCESS ? MPI_Wait(&pr, MPI_STATUS_IGNORE) : MPI_SUCCESS;
    CHECK(eclass(rc) == MPI_ERR_BUFFER || eclass(rc2) == MPI_ERR_BUFFER,
          "second MPI_Start of a persistent buffered send of %d bytes into a buffer of one: rc %d, then MPI_Wait %d",
          BIG, rc, rc2);
    int twice = rc == MPI_SUCCESS && rc2 == MPI_SUCCESS;
    MPI_Recv(in, BIG, MPI_BYTE, rank, 43, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(same(in, BIG, 10), "the persistent buffered message arrived altered");
    if (twice)
        MPI_Recv(in, BIG, MPI_BYTE, rank, 43, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Request_free(&pr);
    MPI_Buffer_detach(&addr, &sz);
    free(buf);
    free(big);
    free(in);
}

/* A communicator's buffer serves that communicator's buffered sends; the process's
 * serves the others (and that communicator's once its own is detached). */
static void bsend_comm(void)
{
    group = "bsend-comm";
    char *cbuf = malloc(BIG + OVH), *pbuf = malloc(1024), *big = malloc(BIG), *in = malloc(BIG);
    char small[16], sin[16];
    MPI_Comm dc;
    MPI_Request fr;
    void *addr = NULL;
    int sz = -1, rc;
    MPI_Comm_dup(MPI_COMM_WORLD, &dc);
    MPI_Buffer_attach(pbuf, 1024);
    rc = MPI_Comm_attach_buffer(dc, cbuf, BIG + OVH);
    CHECK(rc == MPI_SUCCESS, "MPI_Comm_attach_buffer: rc %d", rc);

    fill(big, BIG, 11);
    rc = MPI_Bsend(big, BIG, MPI_BYTE, rank, 61, dc);
    CHECK(rc == MPI_SUCCESS, "MPI_Bsend of %d bytes on a communicator with a buffer of as many: rc %d (class %d)", BIG,
          rc, eclass(rc));
    int sent61 = rc == MPI_SUCCESS;
    rc = MPI_Bsend(big, BIG, MPI_BYTE, rank, 62, MPI_COMM_WORLD);
    CHECK(eclass(rc) == MPI_ERR_BUFFER,
          "MPI_Bsend of %d bytes on MPI_COMM_WORLD used another communicator's buffer (rc %d), not the process's 1024 "
          "bytes",
          BIG, rc);
    if (rc == MPI_SUCCESS)
        MPI_Recv(in, BIG, MPI_BYTE, rank, 62, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    fill(small, 16, 12);
    rc = MPI_Bsend(small, 16, MPI_BYTE, rank, 63, MPI_COMM_WORLD);
    CHECK(rc == MPI_SUCCESS, "MPI_Bsend of 16 bytes into the process's buffer: rc %d", rc);
    if (sent61) {
        MPI_Recv(in, BIG, MPI_BYTE, rank, 61, dc, MPI_STATUS_IGNORE);
        CHECK(same(in, BIG, 11), "the message buffered on the communicator arrived altered");
    }
    if (rc == MPI_SUCCESS) {
        MPI_Recv(sin, 16, MPI_BYTE, rank, 63, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(same(sin, 16, 12), "the message buffered in the process's buffer arrived altered");
    }
    rc = MPI_Comm_flush_buffer(dc);
    CHECK(rc == MPI_SUCCESS, "MPI_Comm_flush_buffer: rc %d", rc);

    fill(big, BIG, 13);
    rc = MPI_Bsend(big, BIG, MPI_BYTE, rank, 64, dc);
    CHECK(rc == MPI_SUCCESS, "MPI_Bsend filling the communicator's buffer after MPI_Comm_flush_buffer: rc %d", rc);
    int sent64 = rc == MPI_SUCCESS;
    rc = MPI_Comm_iflush_buffer(dc, &fr);
    CHECK(rc == MPI_SUCCESS, "MPI_Comm_iflush_buffer: rc %d", rc);
    if (sent64) {
        MPI_Recv(in, BIG, MPI_BYTE, rank, 64, dc, MPI_STATUS_IGNORE);
        CHECK(same(in, BIG, 13), "the message buffered before MPI_Comm_iflush_buffer arrived altered");
    }
    if (rc == MPI_SUCCESS)
        CHECK(test_until(&fr, MPI_STATUS_IGNORE), "MPI_Comm_iflush_buffer's request did not complete");

    rc = MPI_Comm_detach_buffer(dc, &addr, &sz);
    CHECK(rc == MPI_SUCCESS && addr == cbuf && sz == BIG + OVH, "MPI_Comm_detach_buffer: rc %d address %p size %d", rc,
          addr, sz);
    fill(small, 16, 14);
    rc = MPI_Bsend(small, 16, MPI_BYTE, rank, 65, dc);
    CHECK(rc == MPI_SUCCESS, "MPI_Bsend on a communicator whose buffer was detached (the process's serves it): rc %d",
          rc);
    if (rc == MPI_SUCCESS) {
        MPI_Recv(sin, 16, MPI_BYTE, rank, 65, dc, MPI_STATUS_IGNORE);
        CHECK(same(sin, 16, 14), "the message buffered after the communicator's detach arrived altered");
    }
    rc = MPI_Buffer_detach(&addr, &sz);
    CHECK(rc == MPI_SUCCESS && addr == pbuf && sz == 1024, "MPI_Buffer_detach: rc %d address %p size %d", rc, addr,
          sz);
    MPI_Comm_free(&dc);
    free(cbuf);
    free(pbuf);
    free(big);
    free(in);
}

/* MPI_BUFFER_AUTOMATIC: MPI buffers as much as needed. */
static void bsend_automatic(void)
{
    group = "bsend-auto";
    char *big = malloc(BIG), *in = malloc(BIG);
    int rc = MPI_Buffer_attach(MPI_BUFFER_AUTOMATIC, 0), ok = 0;
    CHECK(rc == MPI_SUCCESS, "MPI_Buffer_attach(MPI_BUFFER_AUTOMATIC): rc %d", rc);
    for (int i = 0; i < 3; i++) {
        fill(big, BIG, 20 + i);
        rc = MPI_Bsend(big, BIG, MPI_BYTE, rank, 70 + i, MPI_COMM_WORLD);
        CHECK(rc == MPI_SUCCESS, "MPI_Bsend %d of %d bytes with an automatic buffer: rc %d", i, BIG, rc);
        ok += rc == MPI_SUCCESS;
    }
    for (int i = 0; i < 3 && ok == 3; i++) {
        MPI_Recv(in, BIG, MPI_BYTE, rank, 70 + i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(same(in, BIG, 20 + i), "automatically buffered message %d arrived altered", i);
    }
    void *addr = NULL;
    int sz;
    rc = MPI_Buffer_detach(&addr, &sz);
    CHECK(rc == MPI_SUCCESS && addr == MPI_BUFFER_AUTOMATIC, "MPI_Buffer_detach of an automatic buffer: rc %d address %p",
          rc, addr);
    free(big);
    free(in);
}

/* A session's buffer is attached, flushed and detached. */
static void bsend_session(void)
{
    group = "bsend-session";
    MPI_Session s;
    MPI_Request fr;
    char *sbuf = malloc(4096);
    void *addr = NULL;
    int sz = -1;
    int rc = MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s);
    CHECK(rc == MPI_SUCCESS, "MPI_Session_init: rc %d", rc);
    if (rc != MPI_SUCCESS)
        return;
    rc = MPI_Session_attach_buffer(s, sbuf, 4096);
    CHECK(rc == MPI_SUCCESS, "MPI_Session_attach_buffer: rc %d", rc);
    rc = MPI_Session_flush_buffer(s);
    CHECK(rc == MPI_SUCCESS, "MPI_Session_flush_buffer: rc %d", rc);
    rc = MPI_Session_iflush_buffer(s, &fr);
    CHECK(rc == MPI_SUCCESS && test_until(&fr, MPI_STATUS_IGNORE), "MPI_Session_iflush_buffer: rc %d or never done",
          rc);
    rc = MPI_Session_detach_buffer(s, &addr, &sz);
    CHECK(rc == MPI_SUCCESS && addr == sbuf && sz == 4096, "MPI_Session_detach_buffer: rc %d address %p size %d", rc,
          addr, sz);
    MPI_Session_finalize(&s);
    free(sbuf);
}

/* ---- cancel -------------------------------------------------------------------------- */

/* Sends one unmatched message of `n` bytes to `peer` (synchronous mode with `sync`),
 * cancels it and completes it with MPI_Wait, or with `use_test` MPI_Test for at most
 * PATIENCE seconds (an implementation that does not cancel it would wait for the
 * receive forever); the peer then learns whether it was cancelled and either receives
 * it (not cancelled) or checks that it never arrives. */
static void cancel_unmatched(const char *what, int n, int tag, int sync, int use_test)
{
    char *out = malloc(n), *in = malloc(n);
    MPI_Request r;
    MPI_Status st;
    int cancelled = 0, theirs = 0, flag = 1;
    fill(out, n, tag);
    MPI_Barrier(MPI_COMM_WORLD);
    if (sync)
        MPI_Issend(out, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &r);
    else
        MPI_Isend(out, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &r);
    int rc = MPI_Cancel(&r);
    int done = use_test ? test_until(&r, &st) : (MPI_Wait(&r, &st) == MPI_SUCCESS);
    CHECK(rc == MPI_SUCCESS && done, "%s: MPI_Cancel rc %d, then %s", what, rc,
          done ? "completed" : "not complete within PATIENCE seconds");
    if (done)
        MPI_Test_cancelled(&st, &cancelled);
    CHECK(cancelled, "%s: a send its receiver had not matched was not cancelled", what);
    MPI_Sendrecv(&cancelled, 1, MPI_INT, peer, 199, &theirs, 1, MPI_INT, from, 199, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    MPI_Barrier(MPI_COMM_WORLD);
    if (theirs) {
        MPI_Iprobe(from, tag, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        CHECK(!flag, "%s: a cancelled message was delivered", what);
    }
    if (!theirs || flag) {
        MPI_Recv(in, n, MPI_BYTE, from, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(same(in, n, tag), "%s: the message whose cancel failed arrived altered", what);
    }
    if (!done)
        MPI_Wait(&r, MPI_STATUS_IGNORE);
    free(out);
    free(in);
}

static void cancel_sends(void)
{
    group = "cancel";
    cancel_unmatched("eager MPI_Isend, MPI_Wait", 16, 101, 0, 0);
    cancel_unmatched("eager MPI_Isend, MPI_Test", 16, 102, 0, 1);
    cancel_unmatched("rendezvous MPI_Isend", BIG, 103, 0, 1);
    cancel_unmatched("MPI_Issend", 16, 104, 1, 1);

    /* A delivered send is not cancelled. */
    int out = 7, in = 0, cancelled = 1;
    MPI_Request r, rr;
    MPI_Status st;
    MPI_Irecv(&in, 1, MPI_INT, from, 105, MPI_COMM_WORLD, &rr);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Isend(&out, 1, MPI_INT, peer, 105, MPI_COMM_WORLD, &r);
    MPI_Wait(&rr, MPI_STATUS_IGNORE);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Cancel(&r);
    MPI_Wait(&r, &st);
    MPI_Test_cancelled(&st, &cancelled);
    CHECK(!cancelled && in == 7, "a send whose message was received: cancelled %d, received %d", cancelled, in);

    /* A persistent send: its cancelled start does not leak into the next. */
    int pv = 1, pin = 0, theirs = 0;
    MPI_Send_init(&pv, 1, MPI_INT, peer, 106, MPI_COMM_WORLD, &r);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Start(&r);
    MPI_Cancel(&r);
    MPI_Wait(&r, &st);
    MPI_Test_cancelled(&st, &cancelled);
    CHECK(cancelled, "a persistent (eager) send its receiver had not matched was not cancelled");
    MPI_Sendrecv(&cancelled, 1, MPI_INT, peer, 199, &theirs, 1, MPI_INT, from, 199, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    pv = 2;
    MPI_Start(&r);
    MPI_Recv(&pin, 1, MPI_INT, from, 106, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(pin == (theirs ? 2 : 1), "persistent send: received %d first, want %d", pin, theirs ? 2 : 1);
    if (!theirs)
        MPI_Recv(&pin, 1, MPI_INT, from, 106, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Wait(&r, &st);
    MPI_Test_cancelled(&st, &cancelled);
    CHECK(!cancelled, "the start after a cancelled one reports cancelled");
    MPI_Request_free(&r);

    /* A receive not matched is cancelled, as before. */
    MPI_Irecv(&in, 1, MPI_INT, from, 107, MPI_COMM_WORLD, &rr);
    MPI_Cancel(&rr);
    MPI_Wait(&rr, &st);
    MPI_Test_cancelled(&st, &cancelled);
    CHECK(cancelled, "an unmatched receive was not cancelled");
    MPI_Barrier(MPI_COMM_WORLD);
}

/* ---- generalized requests ------------------------------------------------------------ */

typedef struct {
    int query_calls, free_calls, cancel_calls, cancel_complete;
    int query_rc, free_rc, status_error, cancelled, tag;
    int query_after_free;
} gstate;

static int query_fn(void *extra, MPI_Status *st)
{
    gstate *g = extra;
    g->query_calls++;
    g->query_after_free |= g->free_calls > 0;
    st->MPI_SOURCE = 3;
    st->MPI_TAG = g->tag;
    st->MPI_ERROR = g->status_error;
    MPI_Status_set_elements(st, MPI_BYTE, 17);
    MPI_Status_set_cancelled(st, g->cancelled);
    return g->query_rc;
}

static int free_fn(void *extra)
{
    gstate *g = extra;
    g->free_calls++;
    return g->free_rc;
}

static int cancel_fn(void *extra, int complete)
{
    gstate *g = extra;
    g->cancel_calls++;
    g->cancel_complete = complete;
    if (!complete)
        g->cancelled = 1;
    return MPI_SUCCESS;
}

static MPI_Request gstart(gstate *g, int tag)
{
    MPI_Request r = MPI_REQUEST_NULL;
    memset(g, 0, sizeof *g);
    g->tag = tag;
    int rc = MPI_Grequest_start(query_fn, free_fn, cancel_fn, g, &r);
    CHECK(rc == MPI_SUCCESS && r != MPI_REQUEST_NULL, "MPI_Grequest_start: rc %d", rc);
    return r;
}

static void greq_single(void)
{
    group = "greq";
    gstate g;
    MPI_Status st;
    int flag = 1, count = -1, rc;

    MPI_Request r = gstart(&g, 5);
    rc = MPI_Test(&r, &flag, &st);
    CHECK(rc == MPI_SUCCESS && !flag && g.query_calls == 0 && r != MPI_REQUEST_NULL,
          "MPI_Test before MPI_Grequest_complete: rc %d flag %d query calls %d", rc, flag, g.query_calls);
    MPI_Grequest_complete(r);
    st.MPI_ERROR = 4242;
    rc = MPI_Wait(&r, &st);
    MPI_Get_count(&st, MPI_BYTE, &count);
    CHECK(rc == MPI_SUCCESS && r == MPI_REQUEST_NULL && g.query_calls >= 1 && g.free_calls == 1 && !g.query_after_free,
          "MPI_Wait: rc %d request %s, query_fn %d free_fn %d calls (query after free %d)", rc,
          r == MPI_REQUEST_NULL ? "freed" : "left", g.query_calls, g.free_calls, g.query_after_free);
    CHECK(st.MPI_SOURCE == 3 && st.MPI_TAG == 5 && count == 17, "MPI_Wait's status from query_fn: source %d tag %d count %d",
          st.MPI_SOURCE, st.MPI_TAG, count);

    r = gstart(&g, 6);
    MPI_Grequest_complete(r);
    rc = MPI_Test(&r, &flag, &st);
    CHECK(rc == MPI_SUCCESS && flag && r == MPI_REQUEST_NULL && g.query_calls >= 1 && g.free_calls == 1 &&
              st.MPI_TAG == 6,
          "MPI_Test after MPI_Grequest_complete: rc %d flag %d query_fn %d free_fn %d tag %d", rc, flag, g.query_calls,
          g.free_calls, st.MPI_TAG);

    r = gstart(&g, 7);
    rc = MPI_Request_get_status(r, &flag, &st);
    CHECK(rc == MPI_SUCCESS && !flag && g.query_calls == 0, "MPI_Request_get_status before completion: flag %d query %d",
          flag, g.query_calls);
    MPI_Grequest_complete(r);
    rc = MPI_Request_get_status(r, &flag, &st);
    CHECK(rc == MPI_SUCCESS && flag && g.query_calls >= 1 && g.free_calls == 0 && st.MPI_TAG == 7,
          "MPI_Request_get_status after completion: flag %d query_fn %d free_fn %d tag %d", flag, g.query_calls,
          g.free_calls, st.MPI_TAG);
    rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
    CHECK(rc == MPI_SUCCESS && g.query_calls >= 2 && g.free_calls == 1,
          "MPI_Wait (status ignored) after MPI_Request_get_status: query_fn %d free_fn %d calls", g.query_calls,
          g.free_calls);

    /* Cancel: cancel_fn learns whether the request completed; query_fn's status says
     * whether it was cancelled. */
    r = gstart(&g, 8);
    rc = MPI_Cancel(&r);
    CHECK(rc == MPI_SUCCESS && g.cancel_calls == 1 && g.cancel_complete == 0,
          "MPI_Cancel before completion: cancel_fn %d calls, complete %d", g.cancel_calls, g.cancel_complete);
    MPI_Grequest_complete(r);
    MPI_Wait(&r, &st);
    MPI_Test_cancelled(&st, &flag);
    CHECK(flag, "a generalized request query_fn reported cancelled: MPI_Test_cancelled says %d", flag);
    r = gstart(&g, 9);
    MPI_Grequest_complete(r);
    MPI_Cancel(&r);
    CHECK(g.cancel_calls == 1 && g.cancel_complete == 1, "MPI_Cancel after completion: cancel_fn %d calls, complete %d",
          g.cancel_calls, g.cancel_complete);
    MPI_Wait(&r, &st);
    MPI_Test_cancelled(&st, &flag);
    CHECK(!flag, "a completed generalized request reported cancelled");

    /* MPI_Request_free: free_fn runs at the free or the completion, whichever is last. */
    r = gstart(&g, 10);
    MPI_Request saved = r;
    rc = MPI_Request_free(&r);
    CHECK(rc == MPI_SUCCESS && r == MPI_REQUEST_NULL && g.free_calls == 0,
          "MPI_Request_free before completion: rc %d free_fn %d calls", rc, g.free_calls);
    rc = MPI_Grequest_complete(saved);
    CHECK(rc == MPI_SUCCESS && g.free_calls == 1 && g.query_calls == 0,
          "MPI_Grequest_complete of a freed request: rc %d free_fn %d query_fn %d calls", rc, g.free_calls,
          g.query_calls);
    r = gstart(&g, 11);
    MPI_Grequest_complete(r);
    rc = MPI_Request_free(&r);
    CHECK(rc == MPI_SUCCESS && r == MPI_REQUEST_NULL && g.free_calls == 1 && g.query_calls == 0,
          "MPI_Request_free after completion: rc %d free_fn %d query_fn %d calls", rc, g.free_calls, g.query_calls);

    /* Errors: the callbacks' codes are the calls'. */
    r = gstart(&g, 12);
    g.query_rc = MPI_ERR_IO;
    MPI_Grequest_complete(r);
    rc = MPI_Wait(&r, &st);
    CHECK(rc != MPI_SUCCESS && g.free_calls == 1, "MPI_Wait when query_fn fails: rc %d, free_fn %d calls", rc,
          g.free_calls);
    r = gstart(&g, 13);
    g.free_rc = MPI_ERR_IO;
    MPI_Grequest_complete(r);
    rc = MPI_Wait(&r, &st);
    CHECK(rc != MPI_SUCCESS, "MPI_Wait when free_fn fails: rc %d", rc);
    r = gstart(&g, 14);
    g.status_error = MPI_ERR_IO;
    MPI_Grequest_complete(r);
    rc = MPI_Wait(&r, &st);
    CHECK(eclass(rc) == MPI_ERR_IO, "MPI_Wait when query_fn sets MPI_ERROR in the status: rc %d (class %d)", rc,
          eclass(rc));
}

static void greq_multiple(void)
{
    group = "greq-multi";
    gstate g[3];
    MPI_Request r[3];
    MPI_Status st[3];
    int flag = 1, idx = -1, out = -1, ind[3], rc;

    for (int i = 0; i < 3; i++)
        r[i] = gstart(&g[i], 20 + i);
    MPI_Grequest_complete(r[0]);
    MPI_Grequest_complete(r[2]);
    rc = MPI_Testall(3, r, &flag, st);
    CHECK(rc == MPI_SUCCESS && !flag && r[0] != MPI_REQUEST_NULL && g[0].free_calls == 0,
          "MPI_Testall with one incomplete: flag %d, a complete one freed %d", flag, g[0].free_calls);
    rc = MPI_Testany(3, r, &idx, &flag, &st[0]);
    CHECK(rc == MPI_SUCCESS && flag && (idx == 0 || idx == 2) && st[0].MPI_TAG == 20 + idx &&
              g[idx].query_calls >= 1 && g[idx].free_calls == 1,
          "MPI_Testany: flag %d index %d tag %d", flag, idx, st[0].MPI_TAG);
    rc = MPI_Testsome(3, r, &out, ind, st);
    CHECK(rc == MPI_SUCCESS && out == 1 && ind[0] == 2 - idx && st[0].MPI_TAG == 22 - idx,
          "MPI_Testsome: outcount %d index %d tag %d", out, ind[0], st[0].MPI_TAG);
    MPI_Grequest_complete(r[1]);
    rc = MPI_Waitany(3, r, &idx, &st[0]);
    CHECK(rc == MPI_SUCCESS && idx == 1 && st[0].MPI_TAG == 21 && g[1].free_calls == 1,
          "MPI_Waitany: index %d tag %d free_fn %d", idx, st[0].MPI_TAG, g[1].free_calls);

    for (int i = 0; i < 3; i++)
        r[i] = gstart(&g[i], 30 + i);
    for (int i = 0; i < 3; i++)
        MPI_Grequest_complete(r[i]);
    rc = MPI_Waitsome(3, r, &out, ind, st);
    CHECK(rc == MPI_SUCCESS && out == 3 && g[0].free_calls + g[1].free_calls + g[2].free_calls == 3,
          "MPI_Waitsome of three complete: outcount %d", out);

    for (int i = 0; i < 3; i++)
        r[i] = gstart(&g[i], 40 + i);
    g[1].free_rc = MPI_ERR_IO;
    for (int i = 0; i < 3; i++)
        MPI_Grequest_complete(r[i]);
    rc = MPI_Waitall(3, r, st);
    CHECK(rc == MPI_ERR_IN_STATUS && st[0].MPI_ERROR == MPI_SUCCESS && st[1].MPI_ERROR != MPI_SUCCESS &&
              st[2].MPI_ERROR == MPI_SUCCESS && st[2].MPI_TAG == 42,
          "MPI_Waitall with a failing free_fn: rc %d errors %d %d %d", rc, st[0].MPI_ERROR, st[1].MPI_ERROR,
          st[2].MPI_ERROR);

    for (int i = 0; i < 3; i++)
        r[i] = gstart(&g[i], 50 + i);
    for (int i = 0; i < 3; i++)
        MPI_Grequest_complete(r[i]);
    rc = MPI_Testall(3, r, &flag, st);
    CHECK(rc == MPI_SUCCESS && flag && st[1].MPI_TAG == 51 && g[2].query_calls >= 1 && g[2].free_calls == 1,
          "MPI_Testall of three complete: flag %d tag %d", flag, st[1].MPI_TAG);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    peer = (rank + 1) % size;
    from = (rank + size - 1) % size;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    /* An argument runs only the parts whose name contains it (all by default). */
    static const struct {
        const char *name;
        void (*run)(void);
    } parts[] = {
        {"bsend-none", bsend_no_buffer},
        {"bsend-space", bsend_space},
        {"bsend-detach", bsend_detach_waits},
        {"bsend-flush", bsend_flush},
        {"bsend-ibsend", bsend_nonblocking},
        {"bsend-comm", bsend_comm},
        {"bsend-auto", bsend_automatic},
        {"bsend-session", bsend_session},
        {"cancel", cancel_sends},
        {"greq", greq_single},
        {"greq-multi", greq_multiple},
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (argc < 2 || strstr(parts[i].name, argv[1]))
            parts[i].run();
    MPI_Barrier(MPI_COMM_WORLD);
    if (failures == 0)
        printf("conformance_p2p: rank %d ok (%d checks)\n", rank, checks);
    fflush(stdout);
    MPI_Finalize();
    return failures ? 1 : 0;
}
