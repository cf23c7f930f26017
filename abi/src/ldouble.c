/*
 * Reductions on C's long double (x87 extended precision) and long double _Complex, which
 * Rust has no type for. Elements are packed (16 bytes, 32 bytes, and 16 + 4 for
 * MPI_LONG_DOUBLE_INT) and may be unaligned, so they are copied in and out.
 * acc[i] = inc[i] op acc[i]; op is the MPI_Op handle value of mpi_abi.h.
 */
#include <stddef.h>
#include <string.h>

enum { OP_SUM = 0x21, OP_MIN = 0x22, OP_MAX = 0x23, OP_PROD = 0x24, OP_MINLOC = 0x38, OP_MAXLOC = 0x39, OP_REPLACE = 0x3c };

void rt_ldouble_op(int op, unsigned char *acc, const unsigned char *inc, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        long double x, y, r;
        memcpy(&x, acc + 16 * i, sizeof x);
        memcpy(&y, inc + 16 * i, sizeof y);
        switch (op) {
        case OP_SUM: r = y + x; break;
        case OP_PROD: r = y * x; break;
        case OP_MIN: r = y < x ? y : x; break;
        case OP_MAX: r = y > x ? y : x; break;
        case OP_REPLACE: r = y; break;
        default: r = x; break;
        }
        memcpy(acc + 16 * i, &r, sizeof r);
    }
}

void rt_cldouble_op(int op, unsigned char *acc, const unsigned char *inc, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        long double _Complex x, y, r;
        memcpy(&x, acc + 32 * i, sizeof x);
        memcpy(&y, inc + 32 * i, sizeof y);
        switch (op) {
        case OP_SUM: r = y + x; break;
        case OP_PROD: r = y * x; break;
        case OP_REPLACE: r = y; break;
        default: r = x; break;
        }
        memcpy(acc + 32 * i, &r, sizeof r);
    }
}

void rt_ldouble_int_op(int op, unsigned char *acc, const unsigned char *inc, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        long double xv, yv;
        int xi, yi;
        memcpy(&xv, acc + 20 * i, sizeof xv);
        memcpy(&yv, inc + 20 * i, sizeof yv);
        memcpy(&xi, acc + 20 * i + 16, sizeof xi);
        memcpy(&yi, inc + 20 * i + 16, sizeof yi);
        int take = op == OP_MINLOC ? (yv < xv || (yv == xv && yi < xi))
                 : op == OP_MAXLOC ? (yv > xv || (yv == xv && yi < xi))
                 : op == OP_REPLACE;
        if (take)
            memcpy(acc + 20 * i, inc + 20 * i, 20);
    }
}
