/*
 * ex17_7_bcast.c - run-through Example 17.7 in C (the C twin of drivers/examples/bcast_recovery.rs):
 * broadcasts grouped in recovery blocks. A block of `size` broadcasts runs, then everyone
 * validates (MPIX_Comm_validate); if the failed group changed, the block is redone -
 * whatever each rank's broadcasts returned, the validate tells them all the same thing.
 *
 *   ex17_7_bcast [VICTIM] [-k RANK[@BLOCK]]
 *
 * VICTIM (as the Rust example) or -k RANK SIGKILLs itself in block BLOCK (default 4, of 10)
 * before broadcast size/2. Only the root (rank 0) sets the value; every other rank clears
 * its buffer first and checks that a broadcast that succeeded delivered exactly the root's
 * value. Checks on every survivor: those values, the final failed group is exactly {VICTIM}
 * (empty without one), at least one block was redone with a victim (none without), and the
 * last value is 9 + size - 1. Prints the Rust example's line
 *   bcast_recovery: rank R done, failed [..], last value V, blocks redone K
 * then `ex17_7_bcast: rank R ok` or `ex17_7_bcast: rank R FAILED: why` (exit 3).
 */
#include "rt_ext.h"

static const char *prog = "ex17_7_bcast";

static void usage(FILE *f)
{
    fprintf(f, "usage: ex17_7_bcast [VICTIM] [-k RANK[@BLOCK]]\n"
               "  VICTIM / -k RANK  this rank SIGKILLs itself in block BLOCK (0..9, default 4)\n");
}

int main(int argc, char **argv)
{
    long victim = -1, kill_block = 4;
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(argv[i], "-k") == 0 || strcmp(argv[i], "--kill") == 0) {
            if (i + 1 >= argc || rt_parse_kill(argv[++i], &victim, &kill_block) != 0 || kill_block > 9) {
                usage(stderr);
                return 2;
            }
            continue;
        }
        long v;
        if (npos == 0 && rt_parse(argv[i], &v) == 0)
            victim = v;
        else {
            usage(stderr);
            return 2;
        }
        npos++;
    }

    MPI_Init(&argc, &argv);
    MPI_Comm comm = MPI_COMM_WORLD;
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (victim == 0 || victim >= size) {
        if (rank == 0)
            fprintf(stderr, "%s: victim %ld must be a rank in 1..%d (0 is the root)\n", prog, victim, size - 1);
        MPI_Finalize();
        return 2;
    }
    if (victim > 0 && !RT_HAVE(MPIX_Comm_validate))
        rt_unsupported(prog, rank, "MPIX_Comm_validate");

    char why[1024] = "";
    char es[MPI_MAX_ERROR_STRING];
    MPI_Group failed;
    int rc = rt_validate(comm, &failed);
    if (rc != MPI_SUCCESS) {
        snprintf(why, sizeof why, "first validate: %s", rt_errstr(rc, es));
        failed = MPI_GROUP_EMPTY;
    }
    int buffer = 0, offset = 0, redone = 0, errors = 0;
    while (offset < 10 && why[0] == '\0') {
        for (int i = 0; i < size; i++) {
            if (rank == victim && offset == kill_block && i == size / 2)
                rt_die();
            int want = offset + i;
            buffer = rank == 0 ? want : -1;
            int r = MPI_Bcast(&buffer, 1, MPI_INT, 0, comm);
            if (r != MPI_SUCCESS) {
                errors++;
                if (!rt_is_fail_stop(r))
                    snprintf(why, sizeof why, "block %d broadcast %d returned %s, not a process failure", offset,
                             i, rt_errstr(r, es));
                break;
            }
            if (buffer != want) {
                snprintf(why, sizeof why, "got %d from broadcast %d", buffer, want);
                break;
            }
        }
        if (why[0] != '\0')
            break;
        MPI_Group now;
        rc = rt_validate(comm, &now);
        if (rc != MPI_SUCCESS) {
            snprintf(why, sizeof why, "block %d: validate returned %s", offset, rt_errstr(rc, es));
            break;
        }
        int cmp = MPI_IDENT;
        MPI_Group_compare(now, failed, &cmp);
        if (cmp != MPI_IDENT) {
            rt_group_free(&failed);
            failed = now;
            redone++;
            continue; /* redo this block */
        }
        rt_group_free(&now);
        offset++;
    }
    int fr[64];
    int nf = rt_world_ranks(failed, fr, 64);
    char fs[512];
    rt_fmt_ranks(fr, nf < 0 ? 0 : nf, fs, sizeof fs);
    if (why[0] == '\0') {
        if (victim > 0 && !(nf == 1 && fr[0] == victim))
            snprintf(why, sizeof why, "failed group %s, expected [%ld]", fs, victim);
        else if (victim < 0 && nf != 0)
            snprintf(why, sizeof why, "failed group %s without a victim", fs);
        else if ((victim > 0) != (redone > 0))
            snprintf(why, sizeof why, "%d blocks redone with%s a victim", redone, victim > 0 ? "" : "out");
        else if (victim < 0 && errors != 0)
            snprintf(why, sizeof why, "%d broadcast errors without a failure", errors);
        else if (buffer != 9 + size - 1)
            snprintf(why, sizeof why, "last value %d, expected %d", buffer, 9 + size - 1);
    }
    printf("bcast_recovery: rank %d done, failed %s, last value %d, blocks redone %d\n", rank, fs, buffer, redone);
    if (why[0] == '\0')
        printf("%s: rank %d ok\n", prog, rank);
    else
        printf("%s: rank %d FAILED: %s\n", prog, rank, why);
    fflush(stdout);
    rt_group_free(&failed);
    MPI_Finalize();
    return why[0] == '\0' ? 0 : 3;
}
