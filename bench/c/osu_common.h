/* Shared helpers of the OSU-style reference programs (osu_pt2pt.c, osu_coll.c). */
#ifndef OSU_COMMON_H
#define OSU_COMMON_H

#include <stdlib.h>
#include <string.h>

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

/* The OSU options every program takes: `-m [MIN:]MAX`, `-i ITERS` (> 0), `-x WARMUP`.
 * Looks at argv[*a] (and its value); returns 1 and advances *a past the value when it
 * was one of them, 0 when it is some other argument, -1 when it is malformed. With
 * `open_max`, `-m MIN:` leaves *max_size as it was. */
static inline int parse_osu_opt(int argc, char **argv, int *a, long *min_size, long *max_size, long *iters,
                                long *warmup, int open_max)
{
    const char *opt = argv[*a];
    if (strcmp(opt, "-m") != 0 && strcmp(opt, "-i") != 0 && strcmp(opt, "-x") != 0)
        return 0;
    if (*a + 1 >= argc)
        return -1;
    char *arg = argv[++*a];
    if (strcmp(opt, "-i") == 0)
        return (parse_size(arg, iters) || *iters == 0) ? -1 : 1;
    if (strcmp(opt, "-x") == 0)
        return parse_size(arg, warmup) ? -1 : 1;
    char *colon = strchr(arg, ':');
    if (!colon)
        return parse_size(arg, max_size) ? -1 : 1;
    *colon = '\0';
    if (parse_size(arg, min_size))
        return -1;
    if (open_max && colon[1] == '\0')
        return 1;
    return parse_size(colon + 1, max_size) ? -1 : 1;
}

#endif
