/*
 * proc_threads.h - the calling process's thread count (Threads: in /proc/self/status),
 * for the checks that the library starts no thread per operation (threads.c, icoll.c).
 */
#ifndef PROC_THREADS_H
#define PROC_THREADS_H
#include <stdio.h>

static int threads(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int n = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %d", &n) == 1)
            break;
    fclose(f);
    return n;
}
#endif
