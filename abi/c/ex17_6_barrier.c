/*
 * ex17_6_barrier.c - run-through Example 17.6 in C (the C twin of drivers/examples/barrier_recovery.rs,
 * its `barrier` operation): a loop of barriers where a process may fail. After each barrier
 * every process validates (MPIX_Comm_validate): the validate is uniform, so all survivors see
 * the same failed group and know whether a new failure happened, even though the barrier
 * itself may have succeeded at some and failed at others.
 *
 *   ex17_6_barrier [VICTIM] [ITERS] [-k RANK[@ITER]]
 *
 * VICTIM (as the Rust example) or -k RANK SIGKILLs itself before the barrier of iteration
 * ITER (default ITERS/2); ITERS defaults to 50. Checks on every survivor: each barrier from
 * the iteration after the failure was recognised on succeeds (the failed member is
 * excluded), the final failed group is exactly {VICTIM} (empty without one), and every
 * validate succeeds. Prints the Rust example's line
 *   barrier_recovery: rank R done ITERS iterations, failed [..], barrier errors E
 * then `ex17_6_barrier: rank R ok` or `ex17_6_barrier: rank R FAILED: why` (exit 3).
 */
#include "rt_ext.h"

static const char *prog = "ex17_6_barrier";

static void usage(FILE *f)
{
    fprintf(f, "usage: ex17_6_barrier [VICTIM] [ITERS] [-k RANK[@ITER]]\n"
               "  VICTIM / -k RANK  this rank SIGKILLs itself before barrier ITER (default ITERS/2)\n"
               "  ITERS             barriers (default 50)\n");
}

int main(int argc, char **argv)
{
    long victim = -1, iters = 50, kill_at = -1;
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(argv[i], "-k") == 0 || strcmp(argv[i], "--kill") == 0) {
            if (i + 1 >= argc || rt_parse_kill(argv[++i], &victim, &kill_at) != 0) {
                usage(stderr);
                return 2;
            }
            continue;
        }
        long v;
        if (npos == 0 && rt_parse(argv[i], &v) == 0)
            victim = v;
        else if (npos == 0 && strcmp(argv[i], "-") == 0)
            victim = -1;
        else if (npos == 1 && rt_parse(argv[i], &v) == 0 && v > 0)
            iters = v;
        else {
            usage(stderr);
            return 2;
        }
        npos++;
    }
    if (kill_at < 0)
        kill_at = iters / 2;

    MPI_Init(&argc, &argv);
    MPI_Comm comm = MPI_COMM_WORLD;
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (victim >= size) {
        if (rank == 0)
            fprintf(stderr, "%s: victim %ld is not a rank of %d\n", prog, victim, size);
        MPI_Finalize();
        return 2;
    }
    if (victim >= 0 && !RT_HAVE(MPIX_Comm_validate))
        rt_unsupported(prog, rank, "MPIX_Comm_validate");

    char why[1024] = "";
    char es[MPI_MAX_ERROR_STRING];
    /* Get a starting set of failures. */
    MPI_Group failed;
    int rc = rt_validate(comm, &failed);
    if (rc != MPI_SUCCESS) {
        snprintf(why, sizeof why, "first validate: %s", rt_errstr(rc, es));
        failed = MPI_GROUP_EMPTY;
    }
    int errors = 0;
    long recognised_from = -1; /* the first iteration that begins with the failure known */
    for (long i = 0; i < iters && why[0] == '\0'; i++) {
        if (rank == victim && i == kill_at)
            rt_die();
        int r = MPI_Barrier(comm);
        if (r != MPI_SUCCESS) {
            errors++;
            if (!rt_is_fail_stop(r) && why[0] == '\0')
                snprintf(why, sizeof why, "iteration %ld: barrier returned %s, not a process failure", i,
                         rt_errstr(r, es));
        }
        if (recognised_from >= 0 && i >= recognised_from && r != MPI_SUCCESS && why[0] == '\0')
            snprintf(why, sizeof why, "iteration %ld (%ld after the failure was recognised): barrier returned %s",
                     i, i - recognised_from, rt_errstr(r, es));
        MPI_Group now;
        rc = rt_validate(comm, &now);
        if (rc != MPI_SUCCESS) {
            snprintf(why, sizeof why, "iteration %ld: validate returned %s", i, rt_errstr(rc, es));
            break;
        }
        int cmp = MPI_IDENT;
        MPI_Group_compare(now, failed, &cmp);
        if (cmp != MPI_IDENT) {
            /* A new failure: every survivor learns it in this same iteration. */
            rt_group_free(&failed);
            failed = now;
            recognised_from = i + 1;
        } else {
            rt_group_free(&now);
        }
    }
    int fr[64];
    int nf = rt_world_ranks(failed, fr, 64);
    char fs[512];
    rt_fmt_ranks(fr, nf < 0 ? 0 : nf, fs, sizeof fs);
    if (why[0] == '\0') {
        if (victim >= 0 && !(nf == 1 && fr[0] == victim))
            snprintf(why, sizeof why, "failed group %s, expected [%ld]", fs, victim);
        else if (victim < 0 && nf != 0)
            snprintf(why, sizeof why, "failed group %s without a victim", fs);
        else if (victim < 0 && errors != 0)
            snprintf(why, sizeof why, "%d barrier errors without a failure", errors);
    }
    printf("barrier_recovery: rank %d done %ld iterations, failed %s, barrier errors %d\n", rank, iters, fs,
           errors);
    if (why[0] == '\0')
        printf("%s: rank %d ok\n", prog, rank);
    else
        printf("%s: rank %d FAILED: %s\n", prog, rank, why);
    fflush(stdout);
    rt_group_free(&failed);
    MPI_Finalize();
    return why[0] == '\0' ? 0 : 3;
}
