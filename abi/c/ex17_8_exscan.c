/*
 * ex17_8_exscan.c - run-through Example 17.8 in C (the C twin of drivers/examples/exscan_recovery.rs):
 * an MPI_Exscan (each rank sends rank+1, MPI_SUM) retried until a validate
 * (MPIX_Comm_validate) finds no new failure; then each rank with a defined result prints
 * `Rank r) Received v` like the seed. With 5 ranks and rank 2 failed, ranks 1, 3, 4 print
 * 1, 3, 7; with ranks 0 and 2 failed, ranks 3 and 4 print 2 and 6 (rank 1, now first, has
 * no defined result).
 *
 *   ex17_8_exscan [VICTIMS] [-k RANK]...
 *
 * VICTIMS (comma-separated, as the Rust example) or each -k RANK SIGKILL themselves right
 * after MPI_Init. Checks on every survivor: the final failed group is exactly the victims,
 * and a defined result is the sum of r+1 over the live ranks r below this one (the first
 * live rank has no defined result and prints nothing but its verdict). Then
 * `ex17_8_exscan: rank R ok` or `ex17_8_exscan: rank R FAILED: why` (exit 3).
 */
#include "rt_ext.h"

static const char *prog = "ex17_8_exscan";

#define MAX_VICTIMS 64

static void usage(FILE *f)
{
    fprintf(f, "usage: ex17_8_exscan [VICTIMS] [-k RANK]...\n"
               "  VICTIMS  comma-separated ranks that SIGKILL themselves after MPI_Init\n");
}

static int add_victims(const char *s, int *v, int *nv)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        long r;
        if (rt_parse(t, &r) != 0 || *nv >= MAX_VICTIMS)
            return -1;
        v[(*nv)++] = (int)r;
    }
    return 0;
}

static int contains(const int *v, int n, int x)
{
    for (int i = 0; i < n; i++)
        if (v[i] == x)
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    int victims[MAX_VICTIMS], nv = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        }
        const char *s = argv[i];
        if (strcmp(s, "-k") == 0 || strcmp(s, "--kill") == 0) {
            if (i + 1 >= argc) {
                usage(stderr);
                return 2;
            }
            s = argv[++i];
        }
        if (add_victims(s, victims, &nv) != 0) {
            usage(stderr);
            return 2;
        }
    }

    MPI_Init(&argc, &argv);
    MPI_Comm comm = MPI_COMM_WORLD;
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int distinct = 0; /* victims that are ranks, duplicates counted once */
    for (int i = 0; i < nv; i++) {
        if (victims[i] >= size) {
            if (rank == 0)
                fprintf(stderr, "%s: victim %d is not a rank of %d\n", prog, victims[i], size);
            MPI_Finalize();
            return 2;
        }
        if (!contains(victims, i, victims[i]))
            distinct++;
    }
    if (nv > 0 && !RT_HAVE(MPIX_Comm_validate))
        rt_unsupported(prog, rank, "MPIX_Comm_validate");
    if (contains(victims, nv, rank))
        rt_die();

    char why[1024] = "";
    char es[MPI_MAX_ERROR_STRING];
    int send = rank + 1, recv = 0;
    /* Get a starting set of failures. */
    MPI_Group failed;
    int rc = rt_validate(comm, &failed);
    if (rc != MPI_SUCCESS) {
        snprintf(why, sizeof why, "first validate: %s", rt_errstr(rc, es));
        failed = MPI_GROUP_EMPTY;
    }
    int tries = 0;
    while (why[0] == '\0') {
        recv = -1;
        int r = MPI_Exscan(&send, &recv, 1, MPI_INT, MPI_SUM, comm);
        tries++;
        if (rt_is_fail_stop(r)) {
            fprintf(stderr, "Rank %d) some rank failed during exscan\n", rank);
        } else if (r != MPI_SUCCESS) {
            snprintf(why, sizeof why, "exscan returned %s, not a process failure", rt_errstr(r, es));
            break;
        }
        /* Uniform: every process gets the same failed group, so all leave together. */
        MPI_Group now;
        rc = rt_validate(comm, &now);
        if (rc != MPI_SUCCESS) {
            snprintf(why, sizeof why, "validate returned %s", rt_errstr(rc, es));
            break;
        }
        int cmp = MPI_IDENT;
        MPI_Group_compare(now, failed, &cmp);
        rt_group_free(&failed);
        failed = now;
        if (cmp == MPI_IDENT && r == MPI_SUCCESS)
            break;
        if (tries > 100) {
            snprintf(why, sizeof why, "no stable exscan after %d tries", tries);
            break;
        }
    }
    int fr[MAX_VICTIMS];
    int nf = rt_world_ranks(failed, fr, MAX_VICTIMS);
    char fs[512];
    rt_fmt_ranks(fr, nf < 0 ? 0 : nf, fs, sizeof fs);
    /* The result is defined when a live rank precedes this one; it sums their r+1. */
    int defined = 0, expect = 0;
    for (int r = 0; r < rank; r++)
        if (!contains(fr, nf < 0 ? 0 : nf, r)) {
            defined = 1;
            expect += r + 1;
        }
    if (why[0] == '\0') {
        int ok = nf == distinct;
        for (int i = 0; ok && i < nf; i++)
            ok = contains(victims, nv, fr[i]);
        if (!ok)
            snprintf(why, sizeof why, "failed group %s, expected the victims", fs);
        else if (defined && recv != expect)
            snprintf(why, sizeof why, "received %d, expected %d", recv, expect);
    }
    if (why[0] == '\0' && defined)
        printf("Rank %d) Received %d\n", rank, recv);
    if (why[0] == '\0')
        printf("%s: rank %d ok (%s, failed %s, %d tries)\n", prog, rank, defined ? "defined" : "first live rank",
               fs, tries);
    else
        printf("%s: rank %d FAILED: %s\n", prog, rank, why);
    fflush(stdout);
    rt_group_free(&failed);
    MPI_Finalize();
    return why[0] == '\0' ? 0 : 3;
}
