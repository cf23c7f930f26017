/*
 * sessions_then_init.c - MPI-4.1 11.2-11.3: both models in one process. A session is
 * initialised first and used (a communicator of mpi://WORLD, an allreduce), then
 * MPI_Init: MPI_COMM_WORLD works beside the session's communicator, MPI_Query_thread
 * agrees with MPI_INFO_ENV's thread_level, MPI_COMM_WORLD and MPI_COMM_SELF start with
 * the initial error handler (mpi_initial_errhandler). Then MPI_Finalize and
 * MPI_Session_finalize in the order the argument says:
 *
 *   sessions_then_init [world-first|session-first]   (default world-first)
 *
 * world-first also checks that the session's communicator still works after
 * MPI_Finalize (the sessions model outlives the world model). Every rank prints
 * "sessions_then_init: rank R ok (N checks)" or one
 * "sessions_then_init: rank R FAILED [group] line L: what" per failed check, and exits 1.
 * Builds against any libmpi_abi.so.1 (gcc -I abi/include); the checks of what MPI leaves
 * to the implementation (MPI_INFO_ENV's keys, RT_INITIAL_ERRHANDLER) run on runthrough's.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank = -1, checks, failures, is_rt;
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
            printf("sessions_then_init: rank %d FAILED [%s] line %d: %s\n", rank, group, __LINE__, what_); \
        }                                                                                    \
    } while (0)

static int sum_ranks(MPI_Comm c)
{
    int me = -1, in, out = -1;
    MPI_Comm_rank(c, &me);
    in = me + 1;
    int rc = MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_SUM, c);
    return rc == MPI_SUCCESS ? out : -rc;
}

static int level_of(const char *v)
{
    if (!strcmp(v, "MPI_THREAD_SINGLE"))
        return MPI_THREAD_SINGLE;
    if (!strcmp(v, "MPI_THREAD_FUNNELED"))
        return MPI_THREAD_FUNNELED;
    if (!strcmp(v, "MPI_THREAD_SERIALIZED"))
        return MPI_THREAD_SERIALIZED;
    if (!strcmp(v, "MPI_THREAD_MULTIPLE"))
        return MPI_THREAD_MULTIPLE;
    return -1;
}

int main(int argc, char **argv)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING], v[MPI_MAX_INFO_VAL + 1];
    int len = 0, rc, flag = 0;
    int session_first = argc > 1 && !strcmp(argv[1], "session-first");
    MPI_Get_library_version(lib, &len);
    is_rt = !strncmp(lib, "runthrough", 10);

    group = "session";
    MPI_Session s = MPI_SESSION_NULL;
    MPI_Group wg = MPI_GROUP_NULL;
    MPI_Comm sc = MPI_COMM_NULL;
    rc = MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s);
    CHECK(rc == MPI_SUCCESS, "MPI_Session_init before MPI_Init: rc %d", rc);
    if (rc != MPI_SUCCESS) {
        fflush(stdout);
        return 1;
    }
    MPI_Group_from_session_pset(s, "mpi://WORLD", &wg);
    rc = MPI_Comm_create_from_group(wg, "org.runthrough.sessions_then_init", MPI_INFO_NULL, MPI_ERRORS_RETURN, &sc);
    MPI_Group_free(&wg);
    CHECK(rc == MPI_SUCCESS, "MPI_Comm_create_from_group before MPI_Init: rc %d", rc);
    if (rc != MPI_SUCCESS) {
        fflush(stdout);
        return 1;
    }
    int sn = -1;
    MPI_Comm_rank(sc, &rank);
    MPI_Comm_size(sc, &sn);
    CHECK(sum_ranks(sc) == sn * (sn + 1) / 2, "MPI_Allreduce on the session's communicator before MPI_Init");
    MPI_Initialized(&flag);
    CHECK(flag == 0, "MPI_Initialized before MPI_Init: %d", flag);

    group = "init";
    rc = MPI_Init(&argc, &argv);
    CHECK(rc == MPI_SUCCESS, "MPI_Init after MPI_Session_init: rc %d", rc);
    if (rc != MPI_SUCCESS) {
        fflush(stdout);
        return 1;
    }
    MPI_Initialized(&flag);
    CHECK(flag == 1, "MPI_Initialized after MPI_Init: %d", flag);
    int wr = -1, wn = -1, cmp = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &wr);
    MPI_Comm_size(MPI_COMM_WORLD, &wn);
    CHECK(wr == rank && wn == sn, "MPI_COMM_WORLD rank %d size %d, session's world communicator %d of %d", wr, wn,
          rank, sn);
    MPI_Comm_compare(MPI_COMM_WORLD, sc, &cmp);
    CHECK(cmp == MPI_CONGRUENT, "MPI_COMM_WORLD and the mpi://WORLD communicator: compare %d", cmp);

    /* The initial error handler (mpi_initial_errhandler). */
    MPI_Errhandler weh = MPI_ERRHANDLER_NULL, seh = MPI_ERRHANDLER_NULL;
    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &weh);
    MPI_Comm_get_errhandler(MPI_COMM_SELF, &seh);
    MPI_Errhandler want = MPI_ERRORS_ARE_FATAL;
    const char *asked = getenv("RT_INITIAL_ERRHANDLER");
    if (is_rt && asked != NULL && !strcmp(asked, "mpi_errors_return"))
        want = MPI_ERRORS_RETURN;
    if (is_rt && asked != NULL && !strcmp(asked, "mpi_errors_abort"))
        want = MPI_ERRORS_ABORT;
    CHECK(weh == want && seh == want, "MPI_COMM_WORLD/MPI_COMM_SELF start with %s/%s, want %s (RT_INITIAL_ERRHANDLER=%s)",
          weh == MPI_ERRORS_ARE_FATAL ? "fatal" : weh == MPI_ERRORS_RETURN ? "return" : "other",
          seh == MPI_ERRORS_ARE_FATAL ? "fatal" : seh == MPI_ERRORS_RETURN ? "return" : "other",
          want == MPI_ERRORS_ARE_FATAL ? "fatal" : want == MPI_ERRORS_RETURN ? "return" : "abort",
          asked ? asked : "(unset)");
    int has = 0, n = (int)sizeof v;
    MPI_Info_get_string(MPI_INFO_ENV, "mpi_initial_errhandler", &n, v, &has);
    if (is_rt)
        CHECK(has, "MPI_INFO_ENV has no mpi_initial_errhandler");
    if (has)
        CHECK((want == MPI_ERRORS_ARE_FATAL && !strcmp(v, "mpi_errors_are_fatal")) ||
                  (want == MPI_ERRORS_RETURN && !strcmp(v, "mpi_errors_return")) ||
                  (want == MPI_ERRORS_ABORT && !strcmp(v, "mpi_errors_abort")),
              "mpi_initial_errhandler '%s' is not MPI_COMM_WORLD's initial handler", v);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    /* thread_level agrees with MPI_Query_thread after MPI_Init. */
    int provided = -1;
    MPI_Query_thread(&provided);
    n = (int)sizeof v;
    has = 0;
    MPI_Info_get_string(MPI_INFO_ENV, "thread_level", &n, v, &has);
    if (is_rt)
        CHECK(has, "MPI_INFO_ENV has no thread_level");
    if (has)
        CHECK(level_of(v) == provided, "MPI_INFO_ENV thread_level '%s', MPI_Query_thread after MPI_Init %d", v,
              provided);
    n = (int)sizeof v;
    has = 0;
    MPI_Info_get_string(MPI_INFO_ENV, "maxprocs", &n, v, &has);
    if (is_rt)
        CHECK(has && atoi(v) == wn, "MPI_INFO_ENV maxprocs %s '%s', world size %d", has ? "is" : "missing", v, wn);

    /* Both models at once. */
    group = "both";
    CHECK(sum_ranks(MPI_COMM_WORLD) == wn * (wn + 1) / 2, "MPI_Allreduce on MPI_COMM_WORLD");
    CHECK(sum_ranks(sc) == wn * (wn + 1) / 2, "MPI_Allreduce on the session's communicator after MPI_Init");
    int b = rank == 0 ? 99 : 0;
    rc = MPI_Bcast(&b, 1, MPI_INT, 0, MPI_COMM_WORLD);
    CHECK(rc == MPI_SUCCESS && b == 99, "MPI_Bcast on MPI_COMM_WORLD: rc %d value %d", rc, b);
    /* A message on one is not received on the other. */
    int right = (rank + 1) % wn, left = (rank + wn - 1) % wn, x = 10 + rank, y = -1, seen = 1;
    MPI_Request q;
    MPI_Isend(&x, 1, MPI_INT, right, 3, sc, &q);
    MPI_Probe(left, 3, sc, MPI_STATUS_IGNORE);
    MPI_Iprobe(left, 3, MPI_COMM_WORLD, &seen, MPI_STATUS_IGNORE);
    CHECK(!seen, "a message on the session's communicator is visible on MPI_COMM_WORLD");
    MPI_Recv(&y, 1, MPI_INT, left, 3, sc, MPI_STATUS_IGNORE);
    MPI_Wait(&q, MPI_STATUS_IGNORE);
    CHECK(y == 10 + left, "receive on the session's communicator: %d, want %d", y, 10 + left);
    /* Another session while the world model runs. */
    MPI_Session s2 = MPI_SESSION_NULL;
    rc = MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s2);
    CHECK(rc == MPI_SUCCESS, "MPI_Session_init after MPI_Init: rc %d", rc);
    if (rc == MPI_SUCCESS)
        MPI_Session_finalize(&s2);

    group = "finalize";
    if (session_first) {
        MPI_Comm_free(&sc);
        rc = MPI_Session_finalize(&s);
        CHECK(rc == MPI_SUCCESS, "MPI_Session_finalize before MPI_Finalize: rc %d", rc);
        CHECK(sum_ranks(MPI_COMM_WORLD) == wn * (wn + 1) / 2, "MPI_COMM_WORLD after MPI_Session_finalize");
        rc = MPI_Finalize();
        CHECK(rc == MPI_SUCCESS, "MPI_Finalize after the last MPI_Session_finalize: rc %d", rc);
    } else {
        rc = MPI_Finalize();
        CHECK(rc == MPI_SUCCESS, "MPI_Finalize with a session live: rc %d", rc);
        MPI_Finalized(&flag);
        CHECK(flag == 1, "MPI_Finalized after MPI_Finalize: %d", flag);
        CHECK(sum_ranks(sc) == wn * (wn + 1) / 2, "the session's communicator after MPI_Finalize");
        MPI_Comm_free(&sc);
        rc = MPI_Session_finalize(&s);
        CHECK(rc == MPI_SUCCESS, "MPI_Session_finalize after MPI_Finalize: rc %d", rc);
    }
    if (failures == 0)
        printf("sessions_then_init: rank %d ok (%d checks)\n", rank, checks);
    fflush(stdout);
    return failures ? 1 : 0;
}
