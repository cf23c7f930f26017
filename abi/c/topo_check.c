/* topo_check.c - process topologies through the standard ABI (MPI-4.1 chapter 8), checked
 * against MPI's definitions at every rank; the same binary runs on any MPI of the ABI
 * (runthrough's libmpi_abi.so.1, MPICH's). Best at 6 ranks; any number >= 1 works.
 *
 * Groups (argv[1] selects those whose name contains it):
 *   dims     MPI_Dims_create: free and fixed dimensions, an impossible request
 *   cart     MPI_Cart_create periodic and not, reorder on and off, a grid smaller than
 *            the communicator (MPI_COMM_NULL beyond it); Cart_get, Cart_rank (wrapping),
 *            Cart_coords, Cart_shift (MPI_PROC_NULL at edges), Cartdim_get, Cart_map,
 *            Topo_test, a dup keeps the topology, a message along a shift
 *   sub      MPI_Cart_sub of a 2-D grid into rows and columns, and into no dimension
 *   graph    MPI_Graph_create of a ring with a chord; Graph_get, Graphdims_get,
 *            Graph_neighbors(_count), Graph_map
 *   dist     MPI_Dist_graph_create_adjacent (weighted and not) and MPI_Dist_graph_create
 *            (one rank gives every edge); Dist_graph_neighbors(_count)
 *   ngh      MPI_Neighbor_alltoall and _allgather on a 2-D grid, a periodic ring of 2 (both
 *            neighbours one process) and of 1 (itself), blocking, nonblocking and
 *            persistent; _alltoallv, _alltoallw and _allgatherv on a distributed graph
 *   errors   queries of a topology the communicator has not (MPI_ERR_TOPOLOGY), a
 *            negative dimension (MPI_ERR_DIMS), one of 0 (no process: MPI_COMM_NULL),
 *            coordinates outside a non-periodic grid
 * Every rank prints "topo_check: rank R ok (N checks)" or one
 * "topo_check: rank R FAILED [group] line L: what" per failed check, and exits 1.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, checks, failures, runthrough;
static const char *group = "";

#define CHECK(cond, ...)                                                                    \
    do {                                                                                    \
        checks++;                                                                           \
        if (!(cond)) {                                                                      \
            failures++;                                                                     \
            printf("topo_check: rank %d FAILED [%s] line %d: ", rank, group, __LINE__);     \
            printf(__VA_ARGS__);                                                            \
            printf("\n");                                                                   \
        }                                                                                   \
    } while (0)

#define OK(call) CHECK((call) == MPI_SUCCESS, "%s", #call)

static int eclass(int rc)
{
    int c = rc;
    MPI_Error_class(rc, &c);
    return c;
}

static void dims(void)
{
    group = "dims";
    int d2[2] = {0, 0};
    OK(MPI_Dims_create(72, 2, d2));
    CHECK(d2[0] == 9 && d2[1] == 8, "72 in 2: %d x %d", d2[0], d2[1]);
    int d3[3] = {0, 3, 0};
    OK(MPI_Dims_create(24, 3, d3));
    CHECK(d3[0] == 4 && d3[1] == 3 && d3[2] == 2, "24 in 0x3x0: %d %d %d", d3[0], d3[1], d3[2]);
    int d1[1] = {0};
    OK(MPI_Dims_create(7, 1, d1));
    CHECK(d1[0] == 7, "7 in 1: %d", d1[0]);
    int bad[2] = {0, 4};
    CHECK(eclass(MPI_Dims_create(10, 2, bad)) == MPI_ERR_DIMS, "4 does not divide 10");
}

/* Coordinates of rank r in a row-major grid of dims (MPI's order). */
static void coords_of(int r, int n, const int *d, int *c)
{
    for (int i = n - 1; i >= 0; i--) {
        c[i] = r % d[i];
        r /= d[i];
    }
}

static void cart_one(int reorder, int periodic)
{
    int d[2] = {0, 0}, p[2] = {periodic, 0};
    OK(MPI_Dims_create(size, 2, d));
    MPI_Comm cart;
    OK(MPI_Cart_create(MPI_COMM_WORLD, 2, d, p, reorder, &cart));
    CHECK(cart != MPI_COMM_NULL, "every rank is in a grid of the world's size");
    if (cart == MPI_COMM_NULL)
        return;
    int status = -1, nd = -1, me;
    OK(MPI_Topo_test(cart, &status));
    CHECK(status == MPI_CART, "topo_test %d", status);
    OK(MPI_Cartdim_get(cart, &nd));
    CHECK(nd == 2, "cartdim %d", nd);
    OK(MPI_Comm_rank(cart, &me));
    int gd[2], gp[2], gc[2], want[2];
    OK(MPI_Cart_get(cart, 2, gd, gp, gc));
    coords_of(me, 2, d, want);
    CHECK(gd[0] == d[0] && gd[1] == d[1] && gp[0] == periodic && gp[1] == 0, "cart_get dims/periods");
    CHECK(gc[0] == want[0] && gc[1] == want[1], "cart_get coords (%d,%d) want (%d,%d)", gc[0], gc[1], want[0],
          want[1]);
    int back = -1;
    OK(MPI_Cart_rank(cart, gc, &back));
    CHECK(back == me, "cart_rank of my coords %d, I am %d", back, me);
    for (int r = 0; r < size; r++) {
        int c[2], w[2];
        OK(MPI_Cart_coords(cart, r, 2, c));
        coords_of(r, 2, d, w);
        CHECK(c[0] == w[0] && c[1] == w[1], "cart_coords of %d", r);
    }
    if (periodic) {
        int wrapped[2] = {gc[0] + d[0], gc[1]}, r = -1;
        OK(MPI_Cart_rank(cart, wrapped, &r));
        CHECK(r == me, "a periodic coordinate wraps: %d", r);
        wrapped[0] = gc[0] - d[0];
        OK(MPI_Cart_rank(cart, wrapped, &r));
        CHECK(r == me, "negative periodic coordinate wraps: %d", r);
    }
    /* Shifts along each dimension by +1, by -1 and by 2. */
    for (int dim = 0; dim < 2; dim++)
        for (int disp = -1; disp <= 2; disp += (disp == -1 ? 2 : 1)) {
            int src = -5, dst = -5;
            OK(MPI_Cart_shift(cart, dim, disp, &src, &dst));
            int per = dim == 0 ? periodic : 0;
            int ws[2] = {gc[0], gc[1]}, wd[2] = {gc[0], gc[1]};
            ws[dim] -= disp;
            wd[dim] += disp;
            int es = MPI_PROC_NULL, ed = MPI_PROC_NULL;
            if (per || (ws[dim] >= 0 && ws[dim] < d[dim])) {
                ws[dim] = ((ws[dim] % d[dim]) + d[dim]) % d[dim];
                es = ws[0] * d[1] + ws[1];
            }
            if (per || (wd[dim] >= 0 && wd[dim] < d[dim])) {
                wd[dim] = ((wd[dim] % d[dim]) + d[dim]) % d[dim];
                ed = wd[0] * d[1] + wd[1];
            }
            CHECK(src == es && dst == ed, "shift dim %d disp %d: (%d,%d) want (%d,%d)", dim, disp, src, dst, es, ed);
        }
    /* A message along the shift of dimension 1 by +1: each receives its source's rank. */
    int src, dst, got = -7;
    OK(MPI_Cart_shift(cart, 1, 1, &src, &dst));
    OK(MPI_Sendrecv(&me, 1, MPI_INT, dst, 5, &got, 1, MPI_INT, src, 5, cart, MPI_STATUS_IGNORE));
    CHECK(got == (src == MPI_PROC_NULL ? -7 : src), "sendrecv along the shift: %d from %d", got, src);
    /* A duplicate keeps the topology. */
    MPI_Comm dup;
    OK(MPI_Comm_dup(cart, &dup));
    OK(MPI_Topo_test(dup, &status));
    CHECK(status == MPI_CART, "dup's topo_test %d", status);
    OK(MPI_Cart_get(dup, 2, gd, gp, gc));
    CHECK(gd[0] == d[0] && gd[1] == d[1], "dup's dims");
    OK(MPI_Comm_free(&dup));
    int newrank = -5;
    OK(MPI_Cart_map(MPI_COMM_WORLD, 2, d, p, &newrank));
    CHECK(newrank == rank, "cart_map %d", newrank);
    OK(MPI_Comm_free(&cart));
}

static void cart(void)
{
    group = "cart";
    cart_one(0, 0);
    cart_one(1, 1);
    /* A 1-D grid of size-1 processes (or 1): the last rank gets MPI_COMM_NULL. */
    int n = size > 1 ? size - 1 : 1, per = 1;
    MPI_Comm line;
    OK(MPI_Cart_create(MPI_COMM_WORLD, 1, &n, &per, 0, &line));
    if (rank < n) {
        CHECK(line != MPI_COMM_NULL, "rank %d is in the line of %d", rank, n);
        if (line != MPI_COMM_NULL) {
            int ls, src, dst;
            OK(MPI_Comm_size(line, &ls));
            CHECK(ls == n, "line size %d", ls);
            OK(MPI_Cart_shift(line, 0, 1, &src, &dst));
            CHECK(src == (rank + n - 1) % n && dst == (rank + 1) % n, "ring shift (%d,%d)", src, dst);
            OK(MPI_Comm_free(&line));
        }
    } else {
        CHECK(line == MPI_COMM_NULL, "rank %d is outside the line of %d", rank, n);
    }
    int newrank = -5;
    OK(MPI_Cart_map(MPI_COMM_WORLD, 1, &n, &per, &newrank));
    CHECK(newrank == (rank < n ? rank : MPI_UNDEFINED), "cart_map of the line %d", newrank);
}

static void sub(void)
{
    group = "sub";
    int d[2] = {0, 0}, p[2] = {0, 1};
    OK(MPI_Dims_create(size, 2, d));
    MPI_Comm grid, row, col, none;
    OK(MPI_Cart_create(MPI_COMM_WORLD, 2, d, p, 0, &grid));
    int me, c[2];
    OK(MPI_Comm_rank(grid, &me));
    OK(MPI_Cart_coords(grid, me, 2, c));
    int keep_row[2] = {0, 1}, keep_col[2] = {1, 0}, keep_none[2] = {0, 0};
    OK(MPI_Cart_sub(grid, keep_row, &row));
    OK(MPI_Cart_sub(grid, keep_col, &col));
    int rs, rr, cs, cr, nd, sd[2], sp[2], sc[2];
    OK(MPI_Comm_size(row, &rs));
    OK(MPI_Comm_rank(row, &rr));
    OK(MPI_Comm_size(col, &cs));
    OK(MPI_Comm_rank(col, &cr));
    CHECK(rs == d[1] && rr == c[1], "row size %d rank %d, want %d %d", rs, rr, d[1], c[1]);
    CHECK(cs == d[0] && cr == c[0], "column size %d rank %d, want %d %d", cs, cr, d[0], c[0]);
    OK(MPI_Cartdim_get(row, &nd));
    CHECK(nd == 1, "a row has 1 dimension: %d", nd);
    OK(MPI_Cart_get(row, 1, sd, sp, sc));
    CHECK(sd[0] == d[1] && sp[0] == 1 && sc[0] == c[1], "row's grid");
    OK(MPI_Cart_get(col, 1, sd, sp, sc));
    CHECK(sd[0] == d[0] && sp[0] == 0 && sc[0] == c[0], "column's grid");
    /* The sum of world ranks over my row: the row's members are its coordinates. */
    int sum = 0, want = 0;
    OK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, row));
    for (int j = 0; j < d[1]; j++)
        want += c[0] * d[1] + j;
    CHECK(sum == want, "row sum %d want %d", sum, want);
    OK(MPI_Cart_sub(grid, keep_none, &none));
    int ns = -1;
    OK(MPI_Comm_size(none, &ns));
    OK(MPI_Cartdim_get(none, &nd));
    CHECK(ns == 1 && nd == 0, "no dimension kept: size %d, %d dimensions", ns, nd);
    OK(MPI_Comm_free(&none));
    OK(MPI_Comm_free(&row));
    OK(MPI_Comm_free(&col));
    OK(MPI_Comm_free(&grid));
}

static void graph(void)
{
    group = "graph";
    /* A ring over every rank, plus a chord from 0 to size/2. */
    int n = size, *index = malloc(sizeof(int) * n), *edges = malloc(sizeof(int) * (2 * n + 2)), e = 0;
    for (int i = 0; i < n; i++) {
        if (n > 1) {
            edges[e++] = (i + n - 1) % n;
            edges[e++] = (i + 1) % n;
        }
        if (n > 2 && i == 0)
            edges[e++] = n / 2;
        if (n > 2 && i == n / 2)
            edges[e++] = 0;
        index[i] = e;
    }
    MPI_Comm g;
    OK(MPI_Graph_create(MPI_COMM_WORLD, n, index, edges, 0, &g));
    int status, nn, ne;
    OK(MPI_Topo_test(g, &status));
    CHECK(status == MPI_GRAPH, "topo_test %d", status);
    OK(MPI_Graphdims_get(g, &nn, &ne));
    CHECK(nn == n && ne == e, "graphdims %d %d want %d %d", nn, ne, n, e);
    int *gi = malloc(sizeof(int) * n), *ge = malloc(sizeof(int) * (e + 1));
    OK(MPI_Graph_get(g, n, e, gi, ge));
    CHECK(memcmp(gi, index, sizeof(int) * n) == 0 && memcmp(ge, edges, sizeof(int) * e) == 0, "graph_get");
    for (int r = 0; r < n; r++) {
        int cnt = -1, nb[8];
        OK(MPI_Graph_neighbors_count(g, r, &cnt));
        int start = r ? index[r - 1] : 0;
        CHECK(cnt == index[r] - start, "neighbours of %d: %d", r, cnt);
        OK(MPI_Graph_neighbors(g, r, 8, nb));
        CHECK(memcmp(nb, edges + start, sizeof(int) * cnt) == 0, "neighbours of %d", r);
    }
    int newrank = -5;
    OK(MPI_Graph_map(MPI_COMM_WORLD, n, index, edges, &newrank));
    CHECK(newrank == rank, "graph_map %d", newrank);
    OK(MPI_Comm_free(&g));
    free(gi);
    free(ge);
    free(index);
    free(edges);
}

static void dist(void)
{
    group = "dist";
    /* Adjacent: receive from left, send to right, weights rank and rank+1. */
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    int sw = rank, dw = rank + 1;
    MPI_Comm dg;
    OK(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &left, &sw, 1, &right, &dw, MPI_INFO_NULL, 0, &dg));
    int status, in = -1, out = -1, weighted = -1;
    OK(MPI_Topo_test(dg, &status));
    CHECK(status == MPI_DIST_GRAPH, "topo_test %d", status);
    OK(MPI_Dist_graph_neighbors_count(dg, &in, &out, &weighted));
    CHECK(in == 1 && out == 1 && weighted, "counts %d %d weighted %d", in, out, weighted);
    int s = -1, d = -1, gsw = -1, gdw = -1;
    OK(MPI_Dist_graph_neighbors(dg, 1, &s, &gsw, 1, &d, &gdw));
    CHECK(s == left && d == right && gsw == rank && gdw == rank + 1, "adjacent neighbours %d %d %d %d", s, d, gsw,
          gdw);
    OK(MPI_Comm_free(&dg));
    OK(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &left, MPI_UNWEIGHTED, 1, &right, MPI_UNWEIGHTED,
                                      MPI_INFO_NULL, 1, &dg));
    OK(MPI_Dist_graph_neighbors_count(dg, &in, &out, &weighted));
    CHECK(in == 1 && out == 1 && !weighted, "unweighted counts %d %d weighted %d", in, out, weighted);
    OK(MPI_Comm_free(&dg));
    /* General: rank 0 gives every edge i -> i+1 with weight 10+i, the others none. */
    int n = rank == 0 ? size : 0;
    int *srcs = malloc(sizeof(int) * (size + 1)), *degs = malloc(sizeof(int) * (size + 1));
    int *dsts = malloc(sizeof(int) * (size + 1)), *wts = malloc(sizeof(int) * (size + 1));
    for (int i = 0; i < n; i++) {
        srcs[i] = i;
        degs[i] = 1;
        dsts[i] = (i + 1) % size;
        wts[i] = 10 + i;
    }
    OK(MPI_Dist_graph_create(MPI_COMM_WORLD, n, srcs, degs, dsts, wts, MPI_INFO_NULL, 0, &dg));
    OK(MPI_Dist_graph_neighbors_count(dg, &in, &out, &weighted));
    CHECK(in == 1 && out == 1 && weighted, "general counts %d %d weighted %d", in, out, weighted);
    OK(MPI_Dist_graph_neighbors(dg, 1, &s, &gsw, 1, &d, &gdw));
    CHECK(s == left && d == right && gsw == 10 + left && gdw == 10 + rank, "general neighbours %d %d %d %d", s, d,
          gsw, gdw);
    /* The graph's edges carry messages: send my rank to my destination. */
    int got = -1;
    OK(MPI_Sendrecv(&rank, 1, MPI_INT, d, 3, &got, 1, MPI_INT, s, 3, dg, MPI_STATUS_IGNORE));
    CHECK(got == left, "message along the graph: %d", got);
    OK(MPI_Comm_free(&dg));
    free(srcs);
    free(degs);
    free(dsts);
    free(wts);
}

/* Checks the receive blocks of a neighbourhood alltoall on a grid: block 2d (from the
 * neighbour below in dimension d) holds what that neighbour sent up (its block 2d+1),
 * block 2d+1 what the neighbour above sent down (its block 2d), MPI_PROC_NULL blocks -1. */
static void check_grid_alltoall(MPI_Comm g, int nd, const int *recv, const char *what)
{
    for (int d = 0; d < nd; d++) {
        int below, above;
        OK(MPI_Cart_shift(g, d, 1, &below, &above));
        int wb = below == MPI_PROC_NULL ? -1 : below * 100 + 2 * d + 1;
        int wa = above == MPI_PROC_NULL ? -1 : above * 100 + 2 * d;
        CHECK(recv[2 * d] == wb && recv[2 * d + 1] == wa, "%s dim %d: %d %d want %d %d", what, d, recv[2 * d],
              recv[2 * d + 1], wb, wa);
    }
}

static void grid_exchange(MPI_Comm g, int nd, const char *what)
{
    int me, send[8], recv[8];
    OK(MPI_Comm_rank(g, &me));
    for (int k = 0; k < 2 * nd; k++) {
        send[k] = me * 100 + k;
        recv[k] = -1;
    }
    OK(MPI_Neighbor_alltoall(send, 1, MPI_INT, recv, 1, MPI_INT, g));
    check_grid_alltoall(g, nd, recv, what);
    /* Allgather: every block holds the neighbour's rank. */
    int all[8];
    for (int k = 0; k < 2 * nd; k++)
        all[k] = -1;
    OK(MPI_Neighbor_allgather(&me, 1, MPI_INT, all, 1, MPI_INT, g));
    for (int d = 0; d < nd; d++) {
        int below, above;
        OK(MPI_Cart_shift(g, d, 1, &below, &above));
        CHECK(all[2 * d] == (below == MPI_PROC_NULL ? -1 : below) && all[2 * d + 1] == (above == MPI_PROC_NULL ? -1 : above),
              "%s allgather dim %d: %d %d", what, d, all[2 * d], all[2 * d + 1]);
    }
    /* The nonblocking and the persistent forms (started twice). */
    MPI_Request r;
    for (int k = 0; k < 2 * nd; k++)
        recv[k] = -1;
    OK(MPI_Ineighbor_alltoall(send, 1, MPI_INT, recv, 1, MPI_INT, g, &r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    check_grid_alltoall(g, nd, recv, what);
    OK(MPI_Neighbor_alltoall_init(send, 1, MPI_INT, recv, 1, MPI_INT, g, MPI_INFO_NULL, &r));
    for (int round = 0; round < 2; round++) {
        for (int k = 0; k < 2 * nd; k++)
            recv[k] = -1;
        OK(MPI_Start(&r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        check_grid_alltoall(g, nd, recv, what);
    }
    OK(MPI_Request_free(&r));
}

static void ngh(void)
{
    group = "ngh";
    int d[2] = {0, 0}, p[2] = {1, 0};
    OK(MPI_Dims_create(size, 2, d));
    MPI_Comm g;
    OK(MPI_Cart_create(MPI_COMM_WORLD, 2, d, p, 0, &g));
    grid_exchange(g, 2, "2-D grid");
    OK(MPI_Comm_free(&g));
    /* A periodic ring of 2 (both neighbours one process) and of 1 (itself). */
    int two = 2, per = 1;
    if (size >= 2) {
        OK(MPI_Cart_create(MPI_COMM_WORLD, 1, &two, &per, 0, &g));
        if (g != MPI_COMM_NULL) {
            grid_exchange(g, 1, "ring of 2");
            OK(MPI_Comm_free(&g));
        }
    }
    int one = 1;
    OK(MPI_Cart_create(MPI_COMM_SELF, 1, &one, &per, 0, &g));
    grid_exchange(g, 1, "ring of 1");
    OK(MPI_Comm_free(&g));
    /* A distributed graph: each sends to rank+1 and rank+2, receives from rank-1 and
     * rank-2, with rank-dependent counts (alltoallv): i+1 ints to the i-th destination. */
    int src[2] = {(rank + size - 1) % size, (rank + size - 2) % size};
    int dst[2] = {(rank + 1) % size, (rank + 2) % size};
    MPI_Comm dg;
    OK(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, src, MPI_UNWEIGHTED, 2, dst, MPI_UNWEIGHTED, MPI_INFO_NULL,
                                      0, &dg));
    int sc[2] = {1, 2}, sd[2] = {0, 4}, rc[2] = {1, 2}, rd[2] = {6, 0}, sb[8], rb[8];
    for (int i = 0; i < 8; i++) {
        sb[i] = rank * 10 + i;
        rb[i] = -1;
    }
    OK(MPI_Neighbor_alltoallv(sb, sc, sd, MPI_INT, rb, rc, rd, MPI_INT, dg));
    /* From rank-1 (its first destination): 1 int, its sb[0]; from rank-2 (its second): 2
     * ints, its sb[4..6]. */
    CHECK(rb[6] == src[0] * 10 && rb[0] == src[1] * 10 + 4 && rb[1] == src[1] * 10 + 5 && rb[2] == -1,
          "alltoallv %d | %d %d | %d", rb[6], rb[0], rb[1], rb[2]);
    /* Alltoallw: the same exchange with byte displacements, the second block as one
     * MPI_2INT-sized contiguous type. */
    MPI_Datatype pair;
    OK(MPI_Type_contiguous(2, MPI_INT, &pair));
    OK(MPI_Type_commit(&pair));
    int wc[2] = {1, 1};
    MPI_Aint wsd[2] = {0, 4 * sizeof(int)}, wrd[2] = {6 * sizeof(int), 0};
    MPI_Datatype wt[2] = {MPI_INT, pair};
    for (int i = 0; i < 8; i++)
        rb[i] = -1;
    OK(MPI_Neighbor_alltoallw(sb, wc, wsd, wt, rb, wc, wrd, wt, dg));
    CHECK(rb[6] == src[0] * 10 && rb[0] == src[1] * 10 + 4 && rb[1] == src[1] * 10 + 5 && rb[2] == -1,
          "alltoallw %d | %d %d | %d", rb[6], rb[0], rb[1], rb[2]);
    OK(MPI_Type_free(&pair));
    int gv[4] = {-1, -1, -1, -1}, gc[2] = {1, 1}, gd[2] = {3, 1};
    OK(MPI_Neighbor_allgatherv(&rank, 1, MPI_INT, gv, gc, gd, MPI_INT, dg));
    CHECK(gv[3] == src[0] && gv[1] == src[1] && gv[0] == -1 && gv[2] == -1, "allgatherv %d %d %d %d", gv[0], gv[1],
          gv[2], gv[3]);
    OK(MPI_Comm_free(&dg));
    /* Without a topology: MPI_ERR_TOPOLOGY. */
    CHECK(eclass(MPI_Neighbor_allgather(&rank, 1, MPI_INT, gv, 1, MPI_INT, MPI_COMM_WORLD)) == MPI_ERR_TOPOLOGY,
          "a neighbourhood collective without a topology");
}

static void errors(void)
{
    group = "errors";
    int nd, st, c[2] = {0, 0}, r;
    CHECK(eclass(MPI_Cartdim_get(MPI_COMM_WORLD, &nd)) == MPI_ERR_TOPOLOGY, "cartdim of the world");
    CHECK(eclass(MPI_Graphdims_get(MPI_COMM_WORLD, &nd, &st)) == MPI_ERR_TOPOLOGY, "graphdims of the world");
    OK(MPI_Topo_test(MPI_COMM_WORLD, &st));
    CHECK(st == MPI_UNDEFINED, "topo_test of the world %d", st);
    int d[2] = {size, -1}, p[2] = {0, 0};
    MPI_Comm bad = MPI_COMM_NULL;
    int rc = MPI_Cart_create(MPI_COMM_WORLD, 2, d, p, 0, &bad);
    /* MPI leaves a negative dimension erroneous; runthrough refuses it (MPICH makes a grid
     * of no process). */
    if (runthrough)
        CHECK(eclass(rc) == MPI_ERR_DIMS, "a negative dimension");
    else if (rc == MPI_SUCCESS && bad != MPI_COMM_NULL)
        MPI_Comm_free(&bad);
    /* A dimension of 0 is a grid of no process (MPICH's reading): MPI_COMM_NULL everywhere. */
    d[1] = 0;
    bad = MPI_COMM_WORLD;
    OK(MPI_Cart_create(MPI_COMM_WORLD, 2, d, p, 0, &bad));
    CHECK(bad == MPI_COMM_NULL, "a grid of no process gives MPI_COMM_NULL");
    int one[1] = {size + 1};
    CHECK(MPI_Cart_create(MPI_COMM_WORLD, 1, one, p, 0, &bad) != MPI_SUCCESS, "a grid larger than the world");
    int line[1] = {size};
    MPI_Comm l;
    OK(MPI_Cart_create(MPI_COMM_WORLD, 1, line, p, 0, &l));
    c[0] = size;
    CHECK(MPI_Cart_rank(l, c, &r) != MPI_SUCCESS, "a coordinate past a non-periodic edge");
    CHECK(MPI_Cart_coords(l, size, 1, c) != MPI_SUCCESS, "coordinates of a rank outside");
    CHECK(eclass(MPI_Graph_neighbors_count(l, 0, &r)) == MPI_ERR_TOPOLOGY, "graph query of a grid");
    OK(MPI_Comm_free(&l));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int vlen;
    MPI_Get_library_version(version, &vlen);
    runthrough = strstr(version, "runthrough") != NULL;
    const char *only = argc > 1 ? argv[1] : "";
    struct {
        const char *name;
        void (*run)(void);
    } parts[] = {{"dims", dims}, {"cart", cart}, {"sub", sub}, {"graph", graph}, {"dist", dist}, {"ngh", ngh}, {"errors", errors}};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (strstr(parts[i].name, only))
            parts[i].run();
    if (failures == 0)
        printf("topo_check: rank %d ok (%d checks)\n", rank, checks);
    fflush(stdout);
    MPI_Finalize();
    return failures ? 1 : 0;
}
