/*
 * startup_check.c - start-up that runs through failures (run-through chapter §17.5.2, R31)
 * through the standard ABI: the C twin of drivers/examples/startup_check.rs, used by
 * tests/startup.rs with `rtrun --kill R@T` / `--stop R@T` landing anywhere in start-up.
 *
 * Every rank: MPI_Init (must succeed at every survivor, whatever failed when), then
 * MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN) (must succeed), then, until
 * one round succeeds everywhere: MPIX_Comm_validate the world (the same failed group at
 * every member), MPIX_Comm_failure_ack, MPI_Allreduce the sum of rank + 1 over the members, and MPIX_Comm_agree
 * on whether every member's allreduce succeeded. The sum must be that over the members
 * outside the validated failed group. Each rank then prints
 *
 *   startup_check: ok rank R of N at_init=[..] failed=[..] sum=S rounds=K init_ms=I init_end_unix_ms=E
 *
 * (at_init: MPIX_Comm_group_failed right after MPI_Init). A failed check prints
 * "startup_check: FAILED ..." on stderr and exits 3.
 */
#include "rt_ext.h"

#include <sys/time.h>

#define MAX_ROUNDS 20

static void fail(int rank, const char *what, int rc)
{
    fprintf(stderr, "startup_check: FAILED rank %d: %s (rc %d)\n", rank, what, rc);
    exit(3);
}

static long long unix_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* The world ranks of `g` as "[a, b]" into buf; returns how many. */
static int ranks_of(MPI_Group g, int *out, int cap, char *buf, size_t len)
{
    int n = 0;
    MPI_Group world;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_size(g, &n);
    int idx[64], wr[64];
    if (n > cap || n > 64)
        n = cap < 64 ? cap : 64;
    for (int i = 0; i < n; i++)
        idx[i] = i;
    MPI_Group_translate_ranks(g, n, idx, world, wr);
    MPI_Group_free(&world);
    size_t at = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < n; i++) {
        out[i] = wr[i];
        at += (size_t)snprintf(buf + at, len - at, i ? ", %d" : "%d", wr[i]);
    }
    snprintf(buf + at, len - at, "]");
    return n;
}

int main(int argc, char **argv)
{
    long long t0 = unix_ms();
    int rc = MPI_Init(&argc, &argv);
    if (rc != MPI_SUCCESS)
        fail(-1, "MPI_Init", rc);
    long long init_end = unix_ms();
    int me = -1, n = 0;
    rc = MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (rc != MPI_SUCCESS)
        fail(me, "MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN)", rc);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (!RT_HAVE(MPIX_Comm_validate) || !RT_HAVE(MPIX_Comm_group_failed)) {
        fprintf(stderr, "startup_check: unsupported on this MPI (no MPIX_Comm_validate)\n");
        return RT_EXIT_UNSUPPORTED;
    }
    MPI_Group g;
    int at_init[64], failed[64];
    char at_init_s[512], failed_s[512];
    if ((rc = MPIX_Comm_group_failed(MPI_COMM_WORLD, &g)) != MPI_SUCCESS)
        fail(me, "MPIX_Comm_group_failed", rc);
    int n_at_init = ranks_of(g, at_init, 64, at_init_s, sizeof at_init_s);
    MPI_Group_free(&g);
    for (int i = 0; i < n_at_init; i++)
        if (at_init[i] == me)
            fail(me, "its own rank is failed at init", 0);
    int rounds = 0, n_failed = 0;
    long long sum = 0;
    for (;;) {
        if (++rounds > MAX_ROUNDS)
            fail(me, "no successful round", 0);
        if ((rc = MPIX_Comm_validate(MPI_COMM_WORLD, &g)) != MPI_SUCCESS) {
            fprintf(stderr, "startup_check: rank %d round %d: validate rc %d; again\n", me, rounds, rc);
            continue;
        }
        n_failed = ranks_of(g, failed, 64, failed_s, sizeof failed_s);
        MPI_Group_free(&g);
        for (int i = 0; i < n_failed; i++)
            if (failed[i] == me)
                fail(me, "validate names this rank failed", 0);
        for (int i = 0; i < n_at_init; i++) {
            int found = 0;
            for (int j = 0; j < n_failed; j++)
                found |= failed[j] == at_init[i];
            if (!found)
                fail(me, "validate misses a start-up failure", at_init[i]);
        }
        /* ULFM's agreement fails where a failure it decides on is not acknowledged. */
        if ((rc = MPIX_Comm_failure_ack(MPI_COMM_WORLD)) != MPI_SUCCESS)
            fail(me, "MPIX_Comm_failure_ack", rc);
        long long mine = me + 1;
        int ok = MPI_Allreduce(&mine, &sum, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS;
        int flag = ok;
        rc = MPIX_Comm_agree(MPI_COMM_WORLD, &flag);
        if (rc == MPI_SUCCESS && flag == 1)
            break;
        if (rc != MPI_SUCCESS)
            fprintf(stderr, "startup_check: rank %d round %d: agree rc %d; again\n", me, rounds, rc);
    }
    long long expected = 0;
    for (int r = 0; r < n; r++) {
        int out = 0;
        for (int j = 0; j < n_failed; j++)
            out |= failed[j] == r;
        if (!out)
            expected += r + 1;
    }
    if (sum != expected)
        fail(me, "allreduce over the survivors", (int)sum);
    printf("startup_check: ok rank %d of %d at_init=%s failed=%s sum=%lld rounds=%d init_ms=%lld "
           "init_end_unix_ms=%lld\n",
           me, n, at_init_s, failed_s, sum, rounds, init_end - t0, init_end);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
