/*
 * conformance_sessions.c - MPI-4.1 chapter 11: the sessions model without MPI_Init, and
 * the environment (MPI_INFO_ENV), each check in a named group, at any number of ranks
 * (or as a singleton), through the standard ABI only (gcc -I abi/include), so the same
 * source builds against runthrough's and MPICH's libmpi_abi.so.1. It never calls
 * MPI_Init: abi/c/sessions_then_init.c checks both models in one process.
 *
 * Every rank prints "conformance_sessions: rank R ok (N checks)" or one
 * "conformance_sessions: rank R FAILED [group] line L: what" per failed check, and exits
 * 1. R is the rank in the communicator made from mpi://WORLD.
 *
 * Checks of implementation-dependent behaviour that runthrough promises (which keys
 * MPI_INFO_ENV has, the thread level a session provides, RT_INITIAL_ERRHANDLER) run only
 * on runthrough's library (MPI_Get_library_version starts "runthrough").
 *
 * `-k`: fault tolerance (runthrough only): the last rank SIGKILLs itself after a barrier
 * on a communicator made from a session; every other rank checks that point-to-point
 * and a collective on that communicator report MPIX_ERR_PROC_FAILED through
 * MPI_ERRORS_RETURN, then finalizes its session and prints its line (the killed rank
 * prints nothing; rtrun reports it killed).
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank = -1, size, checks, failures, is_rt;
static const char *group = "";

/* One printf per failure, so that lines of different ranks do not interleave. */
#define CHECK(cond, ...)                                                                     \
    do {                                                                                     \
        checks++;                                                                            \
        if (!(cond)) {                                                                       \
            char what_[512];                                                                 \
            failures++;                                                                      \
            if (snprintf(what_, sizeof what_, __VA_ARGS__) < 0)                              \
                what_[0] = '\0';                                                             \
            printf("conformance_sessions: rank %d FAILED [%s] line %d: %s\n", rank, group, __LINE__, what_); \
        }                                                                                    \
    } while (0)

/* The value of key in info (into buf[len]); 1 if present. */
static int info_get(MPI_Info info, const char *key, char *buf, int len)
{
    int flag = 0, n = len;
    buf[0] = '\0';
    if (MPI_Info_get_string(info, key, &n, buf, &flag) != MPI_SUCCESS)
        return 0;
    return flag;
}

/* Whether the comma separated list has the item. */
static int list_has(const char *list, const char *item)
{
    size_t n = strlen(item);
    for (const char *p = list; p != NULL && *p != '\0';) {
        const char *end = strchr(p, ',');
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, item, n) == 0)
            return 1;
        p = end != NULL ? end + 1 : NULL;
    }
    return 0;
}

static int is_thread_level(const char *v)
{
    return !strcmp(v, "MPI_THREAD_SINGLE") || !strcmp(v, "MPI_THREAD_FUNNELED") ||
           !strcmp(v, "MPI_THREAD_SERIALIZED") || !strcmp(v, "MPI_THREAD_MULTIPLE");
}

/* A communicator of process set pset of session s (MPI_COMM_NULL on failure). */
static MPI_Comm comm_of(MPI_Session s, const char *pset, const char *tag)
{
    MPI_Group g = MPI_GROUP_NULL;
    MPI_Comm c = MPI_COMM_NULL;
    int rc = MPI_Group_from_session_pset(s, pset, &g);
    CHECK(rc == MPI_SUCCESS, "MPI_Group_from_session_pset(%s): rc %d", pset, rc);
    if (rc != MPI_SUCCESS)
        return MPI_COMM_NULL;
    rc = MPI_Comm_create_from_group(g, tag, MPI_INFO_NULL, MPI_ERRORS_RETURN, &c);
    CHECK(rc == MPI_SUCCESS && c != MPI_COMM_NULL, "MPI_Comm_create_from_group(%s, %s): rc %d", pset, tag, rc);
    MPI_Group_free(&g);
    return rc == MPI_SUCCESS ? c : MPI_COMM_NULL;
}

/* The sum of every rank's (rank + 1) over c: size * (size + 1) / 2 when it works. */
static int sum_ranks(MPI_Comm c)
{
    int me = -1, in, out = -1;
    MPI_Comm_rank(c, &me);
    in = me + 1;
    int rc = MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_SUM, c);
    return rc == MPI_SUCCESS ? out : -rc;
}

/* MPI-4.1 11.3.1: MPI_Session_init without MPI_Init, with MPI_INFO_NULL and with an info
 * object; MPI_Session_get_info's thread_level and mpi_memory_alloc_kinds. */
static void init_and_info(void)
{
    group = "init";
    MPI_Session s = MPI_SESSION_NULL;
    MPI_Info used = MPI_INFO_NULL, in = MPI_INFO_NULL;
    char v[MPI_MAX_INFO_VAL + 1];
    int flag = -1;

    MPI_Initialized(&flag);
    CHECK(flag == 0, "MPI_Initialized with only sessions: %d (the world model is not initialised)", flag);
    MPI_Finalized(&flag);
    CHECK(flag == 0, "MPI_Finalized with only sessions: %d", flag);

    int rc = MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s);
    CHECK(rc == MPI_SUCCESS && s != MPI_SESSION_NULL, "MPI_Session_init(MPI_INFO_NULL): rc %d", rc);
    rc = MPI_Session_get_info(s, &used);
    CHECK(rc == MPI_SUCCESS && used != MPI_INFO_NULL, "MPI_Session_get_info: rc %d", rc);
    int has = info_get(used, "thread_level", v, sizeof v);
    CHECK(has && is_thread_level(v), "default session: thread_level %s '%s'", has ? "is" : "missing", v);
    if (is_rt)
        CHECK(!strcmp(v, "MPI_THREAD_MULTIPLE"), "runthrough's default session level: '%s'", v);
#if MPI_VERSION > 4 || (MPI_VERSION == 4 && MPI_SUBVERSION >= 1)
    has = info_get(used, "mpi_memory_alloc_kinds", v, sizeof v);
    CHECK(has && list_has(v, "system") && list_has(v, "mpi"),
          "default session: mpi_memory_alloc_kinds %s '%s' (default mpi,system, MPI-4.1 11.4.3)",
          has ? "is" : "missing", v);
#endif
    MPI_Info_free(&used);
    int flag2 = -1;
    MPI_Initialized(&flag2);
    CHECK(flag2 == 0, "MPI_Initialized after MPI_Session_init: %d", flag2);
    rc = MPI_Session_finalize(&s);
    CHECK(rc == MPI_SUCCESS && s == MPI_SESSION_NULL, "MPI_Session_finalize: rc %d, handle %s", rc,
          s == MPI_SESSION_NULL ? "MPI_SESSION_NULL" : "not reset");

    MPI_Info_create(&in);
    MPI_Info_set(in, "thread_level", "MPI_THREAD_SERIALIZED");
    MPI_Info_set(in, "mpi_memory_alloc_kinds", "system,cuda");
    MPI_Info_set(in, "org.example.unknown_key", "ignored");
    rc = MPI_Session_init(in, MPI_ERRORS_RETURN, &s);
    MPI_Info_free(&in);
    CHECK(rc == MPI_SUCCESS && s != MPI_SESSION_NULL, "MPI_Session_init(info): rc %d", rc);
    if (rc != MPI_SUCCESS)
        return;
    MPI_Session_get_info(s, &used);
    has = info_get(used, "thread_level", v, sizeof v);
    CHECK(has && is_thread_level(v), "session asking MPI_THREAD_SERIALIZED: thread_level %s '%s'",
          has ? "is" : "missing", v);
    if (is_rt)
        CHECK(!strcmp(v, "MPI_THREAD_SERIALIZED"), "runthrough provides every level: got '%s'", v);
#if MPI_VERSION > 4 || (MPI_VERSION == 4 && MPI_SUBVERSION >= 1)
    has = info_get(used, "mpi_memory_alloc_kinds", v, sizeof v);
    CHECK(has && list_has(v, "system"), "session asking system,cuda: mpi_memory_alloc_kinds %s '%s'",
          has ? "is" : "missing", v);
    if (is_rt)
        CHECK(!list_has(v, "cuda"), "runthrough claims cuda memory: '%s'", v);
#endif
    MPI_Info_free(&used);
    MPI_Session_finalize(&s);
}

/* MPI-4.1 11.3.2-11.3.3: the process sets mpi://WORLD and mpi://SELF, their names,
 * mpi_size and groups. Returns the world size the process set reports. */
static int psets(MPI_Session s)
{
    group = "psets";
    int n = -1, rc, world_size = -1;
    rc = MPI_Session_get_num_psets(s, MPI_INFO_NULL, &n);
    CHECK(rc == MPI_SUCCESS && n >= 2, "MPI_Session_get_num_psets: rc %d n %d", rc, n);
    int seen_world = 0, seen_self = 0;
    for (int i = 0; i < n; i++) {
        char name[MPI_MAX_PSET_NAME_LEN + 1];
        int len = 0;
        strcpy(name, "xyz");
        rc = MPI_Session_get_nth_pset(s, MPI_INFO_NULL, i, &len, name);
        CHECK(rc == MPI_SUCCESS && len > 1 && !strcmp(name, "xyz"),
              "get_nth_pset(%d) with pset_len 0: rc %d len %d, buffer '%s' (must be untouched)", i, rc, len, name);
        int need = len;
        len = (int)sizeof name;
        rc = MPI_Session_get_nth_pset(s, MPI_INFO_NULL, i, &len, name);
        CHECK(rc == MPI_SUCCESS && (int)strlen(name) + 1 == need,
              "get_nth_pset(%d): rc %d, '%s' is not %d bytes with its NUL", i, rc, name, need);
        CHECK(len == need, "get_nth_pset(%d): pset_len %d on return, not the size needed %d (MPI-4.1 11.3.3)", i,
              len, need);
        if (need > 4) {
            char small[4] = {'q', 'q', 'q', 'q'};
            len = 4;
            MPI_Session_get_nth_pset(s, MPI_INFO_NULL, i, &len, small);
            CHECK(small[3] == '\0' && !strncmp(small, name, 3) && len == need,
                  "get_nth_pset(%d) into 4 bytes: '%.4s' len %d (truncated, NUL-terminated, needed size)", i, small,
                  len);
        }
        seen_world |= !strcmp(name, "mpi://WORLD");
        seen_self |= !strcmp(name, "mpi://SELF");
    }
    CHECK(seen_world && seen_self, "process sets: mpi://WORLD %s, mpi://SELF %s", seen_world ? "listed" : "missing",
          seen_self ? "listed" : "missing");
    char name[8];
    int len = (int)sizeof name;
    rc = MPI_Session_get_nth_pset(s, MPI_INFO_NULL, n, &len, name);
    CHECK(rc != MPI_SUCCESS, "get_nth_pset(%d) of %d process sets: rc %d", n, n, rc);

    const char *sets[2] = {"mpi://WORLD", "mpi://SELF"};
    for (int i = 0; i < 2; i++) {
        MPI_Info info = MPI_INFO_NULL;
        char v[MPI_MAX_INFO_VAL + 1];
        rc = MPI_Session_get_pset_info(s, sets[i], &info);
        CHECK(rc == MPI_SUCCESS, "MPI_Session_get_pset_info(%s): rc %d", sets[i], rc);
        if (rc != MPI_SUCCESS)
            continue;
        int has = info_get(info, "mpi_size", v, sizeof v);
        int sz = has ? atoi(v) : -1;
        CHECK(has && sz >= 1, "%s: mpi_size %s '%s'", sets[i], has ? "is" : "missing", v);
        if (i == 1)
            CHECK(sz == 1, "mpi://SELF: mpi_size %d", sz);
        else
            world_size = sz;
        MPI_Info_free(&info);
        MPI_Group g = MPI_GROUP_NULL;
        rc = MPI_Group_from_session_pset(s, sets[i], &g);
        int gs = -1, gr = -1;
        MPI_Group_size(g, &gs);
        MPI_Group_rank(g, &gr);
        CHECK(rc == MPI_SUCCESS && gs == sz, "MPI_Group_from_session_pset(%s): rc %d size %d (mpi_size %d)", sets[i],
              rc, gs, sz);
        CHECK(gr >= 0 && gr < gs, "MPI_Group_rank of %s's group: %d (this process is a member)", sets[i], gr);
        MPI_Group_free(&g);
    }
    MPI_Info info = MPI_INFO_NULL;
    MPI_Group g = MPI_GROUP_NULL;
    rc = MPI_Session_get_pset_info(s, "mpi://no-such-set", &info);
    CHECK(rc != MPI_SUCCESS, "get_pset_info of an unknown process set: rc %d", rc);
    rc = MPI_Group_from_session_pset(s, "mpi://no-such-set", &g);
    CHECK(rc != MPI_SUCCESS, "group of an unknown process set: rc %d", rc);
    return world_size;
}

/* MPI-4.1 11.3.4 and 7.4.2: communicators from process set groups work for point-to-point
 * and collectives; the error handler given is theirs. */
static void comms(MPI_Session s, MPI_Comm world, int world_size)
{
    group = "comm";
    int r = -1, n = -1, rc;
    MPI_Comm_rank(world, &r);
    MPI_Comm_size(world, &n);
    CHECK(n == world_size && r >= 0 && r < n, "mpi://WORLD communicator: rank %d size %d, mpi_size %d", r, n,
          world_size);
    MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
    MPI_Comm_get_errhandler(world, &eh);
    CHECK(eh == MPI_ERRORS_RETURN, "the communicator's error handler is not the one given (MPI_ERRORS_RETURN)");

    /* The ranks are a permutation of 0..n-1. */
    int *all = calloc((size_t)n, sizeof(int));
    rc = MPI_Allgather(&r, 1, MPI_INT, all, 1, MPI_INT, world);
    int perm = rc == MPI_SUCCESS;
    for (int i = 0; i < n; i++)
        perm = perm && all[i] == i;
    CHECK(perm, "MPI_Allgather of ranks: rc %d, not 0..%d in order", rc, n - 1);
    free(all);

    /* Point-to-point around a ring. */
    int right = (r + 1) % n, left = (r + n - 1) % n, got = -1;
    MPI_Status st;
    rc = MPI_Sendrecv(&r, 1, MPI_INT, right, 11, &got, 1, MPI_INT, left, 11, world, &st);
    CHECK(rc == MPI_SUCCESS && got == left && st.MPI_SOURCE == left && st.MPI_TAG == 11,
          "ring MPI_Sendrecv: rc %d got %d from %d tag %d (want %d)", rc, got, st.MPI_SOURCE, st.MPI_TAG, left);
    int token = r == 0 ? 4242 : -1;
    if (n > 1) {
        if (r == 0) {
            MPI_Send(&token, 1, MPI_INT, 1, 12, world);
            rc = MPI_Recv(&token, 1, MPI_INT, n - 1, 12, world, MPI_STATUS_IGNORE);
        } else {
            rc = MPI_Recv(&token, 1, MPI_INT, r - 1, 12, world, MPI_STATUS_IGNORE);
            token += 1;
            MPI_Send(&token, 1, MPI_INT, right, 12, world);
        }
        CHECK(rc == MPI_SUCCESS && token == (r == 0 ? 4242 + n - 1 : 4242 + r),
              "token ring MPI_Send/MPI_Recv: rc %d token %d", rc, token);
    }

    /* Collectives. */
    int sum = sum_ranks(world);
    CHECK(sum == n * (n + 1) / 2, "MPI_Allreduce: %d, want %d", sum, n * (n + 1) / 2);
    int b = r == n - 1 ? 777 : 0;
    rc = MPI_Bcast(&b, 1, MPI_INT, n - 1, world);
    CHECK(rc == MPI_SUCCESS && b == 777, "MPI_Bcast from rank %d: rc %d value %d", n - 1, rc, b);
    rc = MPI_Barrier(world);
    CHECK(rc == MPI_SUCCESS, "MPI_Barrier: rc %d", rc);

    /* An error on it goes to its handler (MPI_ERRORS_RETURN): a send to rank n. */
    rc = MPI_Send(&r, 1, MPI_INT, n, 0, world);
    CHECK(rc != MPI_SUCCESS, "MPI_Send to rank %d of %d returned MPI_SUCCESS", n, n);

    /* mpi://SELF: this process alone. */
    MPI_Comm self = comm_of(s, "mpi://SELF", "org.runthrough.conformance_sessions.self");
    if (self != MPI_COMM_NULL) {
        int sr = -1, ss = -1, echo = -1;
        MPI_Comm_rank(self, &sr);
        MPI_Comm_size(self, &ss);
        rc = MPI_Sendrecv(&r, 1, MPI_INT, 0, 5, &echo, 1, MPI_INT, 0, 5, self, MPI_STATUS_IGNORE);
        CHECK(sr == 0 && ss == 1 && rc == MPI_SUCCESS && echo == r,
              "mpi://SELF communicator: rank %d size %d, send to itself rc %d got %d", sr, ss, rc, echo);
        CHECK(sum_ranks(self) == 1, "MPI_Allreduce over mpi://SELF");
        MPI_Comm_free(&self);
    }

    /* The world group reversed: ranks in the group's order. */
    MPI_Group wg = MPI_GROUP_NULL, rev = MPI_GROUP_NULL;
    MPI_Group_from_session_pset(s, "mpi://WORLD", &wg);
    int *order = malloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++)
        order[i] = n - 1 - i;
    MPI_Group_incl(wg, n, order, &rev);
    free(order);
    MPI_Comm rc_comm = MPI_COMM_NULL;
    rc = MPI_Comm_create_from_group(rev, "org.runthrough.conformance_sessions.reversed", MPI_INFO_NULL,
                                    MPI_ERRORS_RETURN, &rc_comm);
    CHECK(rc == MPI_SUCCESS, "MPI_Comm_create_from_group(reversed world): rc %d", rc);
    if (rc == MPI_SUCCESS) {
        int rr = -1;
        MPI_Comm_rank(rc_comm, &rr);
        CHECK(rr == n - 1 - r, "reversed world: rank %d, want %d", rr, n - 1 - r);
        CHECK(sum_ranks(rc_comm) == n * (n + 1) / 2, "MPI_Allreduce over the reversed world");
        int cmp = -1;
        MPI_Comm_compare(world, rc_comm, &cmp);
        CHECK(n == 1 ? cmp == MPI_CONGRUENT : cmp == MPI_SIMILAR, "compare with the world communicator: %d", cmp);
        MPI_Comm_free(&rc_comm);
    }
    /* The same group again, another tag: another communicator, congruent. */
    MPI_Comm again = MPI_COMM_NULL;
    rc = MPI_Comm_create_from_group(wg, "org.runthrough.conformance_sessions.again", MPI_INFO_NULL,
                                    MPI_ERRORS_RETURN, &again);
    CHECK(rc == MPI_SUCCESS, "second MPI_Comm_create_from_group(world): rc %d", rc);
    if (rc == MPI_SUCCESS) {
        int cmp = -1;
        MPI_Comm_compare(world, again, &cmp);
        CHECK(cmp == MPI_CONGRUENT, "two communicators of mpi://WORLD: compare %d, want MPI_CONGRUENT", cmp);
        /* Messages do not cross communicators: a message that arrived on `again` is not
         * seen on `world`. */
        int x = 100 + r, y = -1, flag = 1;
        MPI_Request q;
        MPI_Isend(&x, 1, MPI_INT, right, 21, again, &q);
        MPI_Probe(left, 21, again, MPI_STATUS_IGNORE);
        MPI_Iprobe(left, 21, world, &flag, MPI_STATUS_IGNORE);
        CHECK(!flag, "a message sent on one communicator is visible on another");
        MPI_Recv(&y, 1, MPI_INT, left, 21, again, MPI_STATUS_IGNORE);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
        CHECK(y == 100 + left, "receive on the second communicator: %d, want %d", y, 100 + left);
        MPI_Comm_free(&again);
    }
    MPI_Group_free(&rev);
    MPI_Group_free(&wg);
}

static int handler_calls, handler_code;
static MPI_Session handler_session = MPI_SESSION_NULL;

static void session_handler(MPI_Session *s, int *code, ...)
{
    handler_calls++;
    handler_code = *code;
    handler_session = *s;
}

/* MPI-4.1 9.3 and 11.3.1: errors on a session go to its error handler. */
static void errhandlers(void)
{
    group = "errhandler";
    MPI_Errhandler eh = MPI_ERRHANDLER_NULL, got = MPI_ERRHANDLER_NULL;
    MPI_Session s = MPI_SESSION_NULL;
    int rc = MPI_Session_create_errhandler(session_handler, &eh);
    CHECK(rc == MPI_SUCCESS && eh != MPI_ERRHANDLER_NULL, "MPI_Session_create_errhandler: rc %d", rc);
    rc = MPI_Session_init(MPI_INFO_NULL, eh, &s);
    CHECK(rc == MPI_SUCCESS, "MPI_Session_init with a user handler: rc %d", rc);
    if (rc != MPI_SUCCESS)
        return;
    MPI_Session_get_errhandler(s, &got);
    CHECK(got == eh, "MPI_Session_get_errhandler: not the handler given to MPI_Session_init");
    MPI_Errhandler_free(&got);

    MPI_Group g = MPI_GROUP_NULL;
    handler_calls = 0;
    rc = MPI_Group_from_session_pset(s, "mpi://no-such-set", &g);
    CHECK(handler_calls == 1 && handler_session == s, "error on the session: handler called %d time(s)%s",
          handler_calls, handler_calls && handler_session != s ? " with another handle" : "");
    CHECK(rc != MPI_SUCCESS && handler_code == rc,
          "after the user handler, the call returns the code it was given (%d), not %d (MPI-4.1 9.3)", handler_code,
          rc);

    handler_calls = 0;
    rc = MPI_Session_call_errhandler(s, MPI_ERR_OTHER);
    CHECK(rc == MPI_SUCCESS && handler_calls == 1 && handler_code == MPI_ERR_OTHER && handler_session == s,
          "MPI_Session_call_errhandler: rc %d, %d call(s), code %d", rc, handler_calls, handler_code);

    rc = MPI_Session_set_errhandler(s, MPI_ERRORS_RETURN);
    MPI_Session_get_errhandler(s, &got);
    CHECK(rc == MPI_SUCCESS && got == MPI_ERRORS_RETURN, "MPI_Session_set_errhandler(MPI_ERRORS_RETURN): rc %d", rc);
    handler_calls = 0;
    rc = MPI_Group_from_session_pset(s, "mpi://no-such-set", &g);
    CHECK(rc != MPI_SUCCESS && handler_calls == 0, "MPI_ERRORS_RETURN: rc %d, user handler called %d time(s)", rc,
          handler_calls);
    int cls = -1;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_ARG, "unknown process set name: error class %d, want MPI_ERR_ARG", cls);
    rc = MPI_Session_call_errhandler(s, MPI_ERR_OTHER);
    CHECK(rc == MPI_SUCCESS, "MPI_Session_call_errhandler with MPI_ERRORS_RETURN: rc %d", rc);
    MPI_Session_finalize(&s);
    MPI_Errhandler_free(&eh);
}

/* MPI-4.1 11.3.1: several sessions at once, one after another's finalize, one after all
 * were finalized; a datatype made while one session existed works in a later one. */
static void several(int world_size)
{
    group = "several";
    MPI_Session a = MPI_SESSION_NULL, b = MPI_SESSION_NULL, c = MPI_SESSION_NULL;
    int ra = MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &a);
    int rb = MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &b);
    CHECK(ra == MPI_SUCCESS && rb == MPI_SUCCESS && a != b, "two sessions at once: rc %d %d, %s handles", ra, rb,
          a == b ? "the same" : "distinct");
    MPI_Comm ca = comm_of(a, "mpi://WORLD", "org.runthrough.conformance_sessions.a");
    MPI_Comm cb = comm_of(b, "mpi://WORLD", "org.runthrough.conformance_sessions.b");
    if (ca == MPI_COMM_NULL || cb == MPI_COMM_NULL)
        return;
    int want = world_size * (world_size + 1) / 2;
    CHECK(sum_ranks(ca) == want && sum_ranks(cb) == want, "MPI_Allreduce on two sessions' communicators");
    MPI_Datatype pair;
    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_commit(&pair);
    MPI_Comm_free(&ca);
    int rc = MPI_Session_finalize(&a);
    CHECK(rc == MPI_SUCCESS, "finalize the first of two sessions: rc %d", rc);
    int np = -1;
    rc = MPI_Session_get_num_psets(b, MPI_INFO_NULL, &np);
    CHECK(rc == MPI_SUCCESS && np >= 2, "the other session after the first's finalize: rc %d", rc);
    CHECK(sum_ranks(cb) == want, "MPI_Allreduce on the other session's communicator after the first's finalize");
    rc = MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &c);
    CHECK(rc == MPI_SUCCESS, "a new session after another's finalize: rc %d", rc);
    MPI_Comm cc = comm_of(c, "mpi://WORLD", "org.runthrough.conformance_sessions.c");
    if (cc != MPI_COMM_NULL) {
        CHECK(sum_ranks(cc) == want, "MPI_Allreduce on the new session's communicator");
        MPI_Comm_free(&cc);
    }
    MPI_Comm_free(&cb);
    MPI_Session_finalize(&b);
    MPI_Session_finalize(&c);

    /* No session left: a new one still works (MPI-4.1 11.3.1, handles of 11.4.1 too). */
    MPI_Session d = MPI_SESSION_NULL;
    rc = MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &d);
    CHECK(rc == MPI_SUCCESS, "a session after every session was finalized: rc %d", rc);
    if (rc != MPI_SUCCESS)
        return;
    MPI_Comm cd = comm_of(d, "mpi://WORLD", "org.runthrough.conformance_sessions.d");
    if (cd != MPI_COMM_NULL) {
        int r = -1, in[2], out[2] = {0, 0};
        MPI_Comm_rank(cd, &r);
        in[0] = r + 1;
        in[1] = 1;
        rc = MPI_Allreduce(in, out, 1, pair, MPI_SUM, cd);
        CHECK(rc == MPI_SUCCESS && out[0] == want && out[1] == world_size,
              "MPI_Allreduce with a datatype made in a finalized session: rc %d (%d,%d)", rc, out[0], out[1]);
        MPI_Comm_free(&cd);
    }
    MPI_Type_free(&pair);
    MPI_Session_finalize(&d);
}

/* MPI-4.1 11.2.2/11.4: MPI_INFO_ENV and MPI_Info_create_env. */
static void environment(int argc, char **argv, int world_size)
{
    group = "env";
    const char *keys[] = {"command", "argv", "maxprocs", "soft", "host", "arch", "wdir", "file",
                          "thread_level", "mpi_initial_errhandler"};
    char v[MPI_MAX_INFO_VAL + 1];
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        int has = info_get(MPI_INFO_ENV, keys[i], v, sizeof v);
        if (is_rt)
            CHECK(has, "MPI_INFO_ENV has no '%s'", keys[i]);
        if (!has)
            continue;
        if (!strcmp(keys[i], "command"))
            CHECK(!strcmp(v, argv[0]), "command '%s', want '%s'", v, argv[0]);
        if (!strcmp(keys[i], "argv")) {
            char want[1024] = "";
            for (int a = 1; a < argc; a++)
                snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s", a > 1 ? " " : "", argv[a]);
            CHECK(!strcmp(v, want), "argv '%s', want '%s'", v, want);
        }
        if (!strcmp(keys[i], "maxprocs"))
            CHECK(atoi(v) == world_size, "maxprocs '%s', want %d", v, world_size);
        if (!strcmp(keys[i], "soft"))
            CHECK(v[0] != '\0', "soft is empty");
        if (!strcmp(keys[i], "host")) {
            char host[MPI_MAX_PROCESSOR_NAME];
            int len = 0;
            MPI_Get_processor_name(host, &len);
            CHECK(!strcmp(v, host), "host '%s', processor name '%s'", v, host);
        }
        if (!strcmp(keys[i], "arch"))
            CHECK(v[0] != '\0', "arch is empty");
        if (!strcmp(keys[i], "wdir")) {
            char cwd[4096];
            CHECK(getcwd(cwd, sizeof cwd) != NULL && !strcmp(v, cwd), "wdir '%s', working directory '%s'", v, cwd);
        }
        if (!strcmp(keys[i], "thread_level"))
            CHECK(is_thread_level(v), "thread_level '%s'", v);
        if (!strcmp(keys[i], "mpi_initial_errhandler")) {
            CHECK(!strcmp(v, "mpi_errors_are_fatal") || !strcmp(v, "mpi_errors_abort") ||
                      !strcmp(v, "mpi_errors_return"),
                  "mpi_initial_errhandler '%s'", v);
            const char *asked = getenv("RT_INITIAL_ERRHANDLER");
            const char *want = "mpi_errors_are_fatal";
            if (asked != NULL && (!strcmp(asked, "mpi_errors_abort") || !strcmp(asked, "mpi_errors_return")))
                want = asked;
            if (is_rt)
                CHECK(!strcmp(v, want), "mpi_initial_errhandler '%s' with RT_INITIAL_ERRHANDLER=%s, want '%s'", v,
                      asked ? asked : "(unset)", want);
        }
    }
    /* With only sessions, an error with no object goes to the initial error handler
     * (MPI-4.1 9.3): under mpi_errors_return it returns. */
    if (is_rt && info_get(MPI_INFO_ENV, "mpi_initial_errhandler", v, sizeof v) && !strcmp(v, "mpi_errors_return")) {
        MPI_Info bogus = MPI_INFO_NULL;
        int rc = MPI_Session_get_info(MPI_SESSION_NULL, &bogus);
        int cls = -1;
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_SESSION, "MPI_Session_get_info(MPI_SESSION_NULL) under mpi_errors_return: rc %d", rc);
    }

    MPI_Info info = MPI_INFO_NULL;
    int rc = MPI_Info_create_env(argc, argv, &info);
    CHECK(rc == MPI_SUCCESS && info != MPI_INFO_NULL, "MPI_Info_create_env: rc %d", rc);
    if (rc == MPI_SUCCESS) {
        int has = info_get(info, "command", v, sizeof v);
        if (is_rt)
            CHECK(has, "MPI_Info_create_env: no 'command'");
        if (has)
            CHECK(!strcmp(v, argv[0]), "MPI_Info_create_env: command '%s', want '%s'", v, argv[0]);
        has = info_get(info, "maxprocs", v, sizeof v);
        if (has)
            CHECK(atoi(v) == world_size, "MPI_Info_create_env: maxprocs '%s', want %d", v, world_size);
        MPI_Info_free(&info);
    }
}

/* -k: a communicator made from a session reports a process failure like one derived
 * from MPI_COMM_WORLD (MPIX_ERR_PROC_FAILED through MPI_ERRORS_RETURN). */
static void failure(MPI_Comm world)
{
    group = "ft";
    int r = -1, n = -1;
    MPI_Comm_rank(world, &r);
    MPI_Comm_size(world, &n);
    if (n < 2) {
        CHECK(n >= 2, "-k needs 2 or more processes");
        return;
    }
    int victim = n - 1;
    MPI_Barrier(world);
    if (r == victim) {
        fflush(stdout);
        kill(getpid(), SIGKILL);
        for (;;)
            pause();
    }
    int x = 0, cls = -1;
    int rc = MPI_Recv(&x, 1, MPI_INT, victim, 99, world, MPI_STATUS_IGNORE);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPIX_ERR_PROC_FAILED, "MPI_Recv from the killed rank %d: rc %d class %d", victim, rc, cls);
    rc = MPI_Barrier(world);
    cls = -1;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPIX_ERR_PROC_FAILED || cls == MPIX_ERR_REVOKED,
          "MPI_Barrier with rank %d dead: rc %d class %d", victim, rc, cls);
}

int main(int argc, char **argv)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0, kill_mode = argc > 1 && !strcmp(argv[1], "-k");
    MPI_Get_library_version(lib, &len);
    is_rt = !strncmp(lib, "runthrough", 10);

    init_and_info();

    MPI_Session s = MPI_SESSION_NULL;
    int rc = MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s);
    group = "init";
    CHECK(rc == MPI_SUCCESS, "MPI_Session_init: rc %d", rc);
    if (rc != MPI_SUCCESS) {
        fflush(stdout);
        return 1;
    }
    group = "comm";
    MPI_Comm world = comm_of(s, "mpi://WORLD", "org.runthrough.conformance_sessions.world");
    if (world != MPI_COMM_NULL) {
        MPI_Comm_rank(world, &rank);
        MPI_Comm_size(world, &size);
    }
    int world_size = psets(s);
    if (world != MPI_COMM_NULL) {
        if (kill_mode && !is_rt) {
            printf("conformance_sessions: rank %d unsupported on this MPI: -k needs runthrough\n", rank);
            fflush(stdout);
            MPI_Comm_free(&world);
            MPI_Session_finalize(&s);
            return 77;
        }
        if (kill_mode)
            failure(world);
        else
            comms(s, world, world_size);
        MPI_Comm_free(&world);
    }
    if (!kill_mode) {
        errhandlers();
        several(world_size);
        environment(argc, argv, world_size);
    }
    rc = MPI_Session_finalize(&s);
    group = "finalize";
    CHECK(rc == MPI_SUCCESS, "MPI_Session_finalize: rc %d", rc);
    int flag = -1;
    MPI_Finalized(&flag);
    CHECK(flag == 0, "MPI_Finalized after the sessions: %d (the world model was never initialised)", flag);

    if (failures == 0)
        printf("conformance_sessions: rank %d ok (%d checks)\n", rank, checks);
    fflush(stdout);
    return failures ? 1 : 0;
}
