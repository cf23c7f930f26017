/* Shared helpers of the OSU-style reference programs (osu_pt2pt.c, osu_coll.c). */
#ifndef OSU_COMMON_H
#define OSU_COMMON_H

#include <stdlib.h>

/* Parses a non-negative decimal size; returns 0 on success, -1 otherwise. */
static int parse_size(const char *s, long *out)
{
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < 0)
        return -1;
    *out = v;
    return 0;
}

#endif
