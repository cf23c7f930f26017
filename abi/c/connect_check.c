/*
 * connect_check.c - connecting two jobs, each started by its own launcher (MPI-4.1 §11.10,
 * R40), and MPI_Comm_join. Scenes (argv[1]):
 *
 *   server FILE  rank 0 opens a port and writes its name to FILE; every rank accepts on
 *                MPI_COMM_WORLD; then messages both ways, a merge (server ranks first),
 *                an allreduce over it, disconnect, close port.
 *   client FILE  rank 0 waits for FILE and reads the port name; every rank connects on
 *                MPI_COMM_WORLD; the same checks from the other side. A connect to a
 *                port nobody opened fails with MPI_ERR_PORT first.
 *   server-kill FILE, client-kill FILE
 *                as server and client, with errors returned, while a member of the
 *                connecting job dies as it joins the joint world (the test sets
 *                RT_TEST_DIE_JOINING for the client job): every survivor of both jobs
 *                prints "connect_check: rank R outcome=connected|failed ms=T" (T: the
 *                accept or connect call's duration) instead of talking.
 *   names        within one job: rank 0 opens a port and publishes it, rank 1 looks it
 *                up (a duplicate publish: MPI_ERR_SERVICE), rank 0 accepts and rank 1
 *                connects on MPI_COMM_SELF, a message each way; unpublished, a lookup
 *                gives MPI_ERR_NAME and a second unpublish MPI_ERR_SERVICE.
 *   join         ranks 0 and 1 of one job connect a TCP socket on loopback and call
 *                MPI_Comm_join on it: a one-to-one inter-communicator, a message each way.
 *
 * Every rank prints "connect_check: rank R ok (N checks)" ("R" its rank in its own job).
 */
#include <arpa/inet.h>
#include <mpi.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CHECK_PROG "connect_check"
#include "check.h"

/* Messages both ways, then a merge with `low` first and an allreduce over it. */
static void talk(MPI_Comm inter, int high)
{
    int rsize;
    MPI_Comm_remote_size(inter, &rsize);
    for (int r = 0; r < rsize; r++) {
        int v = rank * 10 + high;
        MPI_Send(&v, 1, MPI_INT, r, 5, inter);
    }
    for (int r = 0; r < rsize; r++) {
        int got = -1;
        MPI_Recv(&got, 1, MPI_INT, r, 5, inter, MPI_STATUS_IGNORE);
        CHECK(got == r * 10 + !high, "from remote %d got %d", r, got);
    }
    MPI_Comm all;
    MPI_Intercomm_merge(inter, high, &all);
    int arank, asize, sum = 0, one = 1;
    MPI_Comm_rank(all, &arank);
    MPI_Comm_size(all, &asize);
    CHECK(asize == size + rsize, "merged size %d", asize);
    CHECK(arank == (high ? rsize + rank : rank), "merged rank %d", arank);
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, all);
    CHECK(sum == asize, "allreduce over both jobs: %d", sum);
    MPI_Comm_free(&all);
    MPI_Comm_disconnect(&inter);
    CHECK(inter == MPI_COMM_NULL, "disconnected");
}

/* Rank 0 opens a port and writes its name to FILE (whole: written aside, then renamed). */
static void open_port(const char *file, char *port)
{
    if (rank != 0)
        return;
    CHECK(MPI_Open_port(MPI_INFO_NULL, port) == MPI_SUCCESS, "open port");
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", file);
    FILE *f = fopen(tmp, "w");
    fprintf(f, "%s\n", port);
    fclose(f);
    rename(tmp, file);
}

static void server(const char *file)
{
    char port[MPI_MAX_PORT_NAME] = "";
    open_port(file, port);
    MPI_Comm inter;
    int rc = MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter);
    CHECK(rc == MPI_SUCCESS, "accept rc %d", rc);
    if (rc == MPI_SUCCESS)
        talk(inter, 0);
    if (rank == 0)
        CHECK(MPI_Close_port(port) == MPI_SUCCESS, "close port");
}

/* Rank 0 reads the port name from FILE (waiting up to a minute for it). */
static void read_port(const char *file, char *port)
{
    if (rank == 0) {
        for (int i = 0; i < 6000; i++) {
            FILE *f = fopen(file, "r");
            if (f) {
                CHECK(fgets(port, MPI_MAX_PORT_NAME, f) != NULL, "read the port name");
                fclose(f);
                port[strcspn(port, "\n")] = 0;
                break;
            }
            struct timespec t = {0, 10000000};
            nanosleep(&t, NULL);
        }
    }
}

static void client(const char *file)
{
    char port[MPI_MAX_PORT_NAME] = "";
    MPI_Comm inter;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rc = MPI_Comm_connect("rtport/127.0.0.1:1/00", MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter);
    CHECK(eclass(rc) == MPI_ERR_PORT && inter == MPI_COMM_NULL, "a port nobody opened: class %d", eclass(rc));
    read_port(file, port);
    rc = MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter);
    CHECK(rc == MPI_SUCCESS, "connect rc %d", rc);
    if (rc == MPI_SUCCESS)
        talk(inter, 1);
}

/* The kill scenes: the outcome of accept (server) or connect (client) and how long it
 * took; a connected inter-communicator is disconnected (it completes despite failures). */
static void kill_scene(const char *file, int server_side)
{
    char port[MPI_MAX_PORT_NAME] = "";
    MPI_Comm inter = MPI_COMM_NULL;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (server_side)
        open_port(file, port);
    else
        read_port(file, port);
    double t0 = MPI_Wtime();
    int rc = server_side ? MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter)
                         : MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter);
    int ms = (int)((MPI_Wtime() - t0) * 1000);
    printf("connect_check: rank %d outcome=%s ms=%d\n", rank, rc == MPI_SUCCESS ? "connected" : "failed", ms);
    fflush(stdout);
    CHECK(rc == MPI_SUCCESS || inter == MPI_COMM_NULL, "failed, yet an inter-communicator");
    if (rc == MPI_SUCCESS)
        MPI_Comm_disconnect(&inter);
    if (server_side && rank == 0)
        CHECK(MPI_Close_port(port) == MPI_SUCCESS, "close port");
}

/* The name service within one job, and accept/connect between two of its ranks. */
static void names(void)
{
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    char port[MPI_MAX_PORT_NAME] = "", found[MPI_MAX_PORT_NAME] = "";
    if (rank == 0) {
        MPI_Open_port(MPI_INFO_NULL, port);
        CHECK(MPI_Publish_name("rt-check", MPI_INFO_NULL, port) == MPI_SUCCESS, "publish");
        int rc = MPI_Publish_name("rt-check", MPI_INFO_NULL, port);
        CHECK(eclass(rc) == MPI_ERR_SERVICE, "a second publish: class %d", eclass(rc));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        CHECK(MPI_Lookup_name("rt-check", MPI_INFO_NULL, found) == MPI_SUCCESS, "lookup");
        CHECK(strncmp(found, "rtport/", 7) == 0, "found %s", found);
    }
    MPI_Comm inter = MPI_COMM_NULL;
    int v = 7 + rank, got = -1;
    if (rank == 0)
        CHECK(MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter) == MPI_SUCCESS, "accept");
    else if (rank == 1)
        CHECK(MPI_Comm_connect(found, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter) == MPI_SUCCESS, "connect");
    if (inter != MPI_COMM_NULL) {
        MPI_Sendrecv(&v, 1, MPI_INT, 0, 1, &got, 1, MPI_INT, 0, 1, inter, MPI_STATUS_IGNORE);
        CHECK(got == 7 + !rank, "peer sent %d", got);
        MPI_Comm_disconnect(&inter);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        CHECK(MPI_Unpublish_name("rt-check", MPI_INFO_NULL, port) == MPI_SUCCESS, "unpublish");
        int rc = MPI_Unpublish_name("rt-check", MPI_INFO_NULL, port);
        CHECK(eclass(rc) == MPI_ERR_SERVICE, "a second unpublish: class %d", eclass(rc));
        rc = MPI_Lookup_name("rt-check", MPI_INFO_NULL, found);
        CHECK(eclass(rc) == MPI_ERR_NAME, "lookup after unpublish: class %d", eclass(rc));
        MPI_Close_port(port);
    }
}

/* Ranks 0 and 1: a loopback TCP connection, then MPI_Comm_join. */
static void join(void)
{
    if (rank > 1)
        return;
    int fd = -1, portno = 0;
    if (rank == 0) {
        int l = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof a;
        bind(l, (struct sockaddr *)&a, sizeof a);
        listen(l, 1);
        getsockname(l, (struct sockaddr *)&a, &len);
        portno = ntohs(a.sin_port);
        MPI_Send(&portno, 1, MPI_INT, 1, 9, MPI_COMM_WORLD);
        fd = accept(l, NULL, NULL);
        close(l);
    } else {
        MPI_Recv(&portno, 1, MPI_INT, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(portno),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0, "tcp connect");
    }
    MPI_Comm inter;
    int rc = MPI_Comm_join(fd, &inter);
    CHECK(rc == MPI_SUCCESS, "join rc %d", rc);
    if (rc != MPI_SUCCESS)
        return;
    int rsize, v = 100 + rank, got = -1;
    MPI_Comm_remote_size(inter, &rsize);
    CHECK(rsize == 1, "remote size %d", rsize);
    MPI_Sendrecv(&v, 1, MPI_INT, 0, 3, &got, 1, MPI_INT, 0, 3, inter, MPI_STATUS_IGNORE);
    CHECK(got == 100 + !rank, "joined peer sent %d", got);
    MPI_Comm_disconnect(&inter);
    close(fd);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *scene = argc > 1 ? argv[1] : "";
    if (strcmp(scene, "server") == 0 && argc > 2)
        server(argv[2]);
    else if (strcmp(scene, "client") == 0 && argc > 2)
        client(argv[2]);
    else if (strcmp(scene, "server-kill") == 0 && argc > 2)
        kill_scene(argv[2], 1);
    else if (strcmp(scene, "client-kill") == 0 && argc > 2)
        kill_scene(argv[2], 0);
    else if (strcmp(scene, "join") == 0)
        join();
    else if (strcmp(scene, "names") == 0)
        names();
    else
        CHECK(0, "usage: connect_check server|client|server-kill|client-kill FILE | names | join");
    int failed = check_report();
    MPI_Finalize();
    return failed;
}
