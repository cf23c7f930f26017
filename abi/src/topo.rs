//! Process topologies through the C interface (MPI-4.1 chapter 8): `MPI_Dims_create`, the
//! Cartesian, graph and distributed-graph constructors and queries, `MPI_Topo_test` —
//! translations to the facade's `runthrough::topo` (R38's failure semantics are there).
//! The neighbourhood collectives are not implemented yet (`MPI_ERR_UNSUPPORTED_OPERATION`,
//! docs/ABI.md).
//!
//! Error classes, as MPICH gives them: `MPI_ERR_DIMS` for a negative or zero dimension or
//! dimension count, `MPI_ERR_TOPOLOGY` for a query of a topology the communicator does
//! not have, `MPI_ERR_COMM` for an inter-communicator, `MPI_ERR_ARG` for a grid or graph
//! larger than the communicator and bad coordinates, `MPI_ERR_RANK` for a rank outside it.

use std::ffi::c_int;
use std::sync::Arc;

use runthrough::topo::{Cart, DistGraph, Graph, Topology};

use crate::comm::register_plain;
use crate::commobj::CommObj;
use crate::consts::*;
use crate::count::slice;
use crate::raise::{raise_error, raise_on};
use crate::types::Handle;

/// `MPI_UNWEIGHTED` and `MPI_WEIGHTS_EMPTY` of the standard ABI (`(int *)10`, `(int *)11`).
const UNWEIGHTED: usize = 10;
const WEIGHTS_EMPTY: usize = 11;

pub(crate) unsafe fn MPI_Dims_create(nnodes: c_int, ndims: c_int, dims: *mut c_int) -> c_int {
    if nnodes < 0 || ndims < 0 || (ndims > 0 && dims.is_null()) {
        return raise_on(MPI_COMM_WORLD, if ndims < 0 { MPI_ERR_DIMS } else { MPI_ERR_ARG });
    }
    let d: &mut [c_int] = if ndims == 0 {
        &mut []
    } else {
        // SAFETY: the program's array of ndims entries (checked non-null).
        unsafe { std::slice::from_raw_parts_mut(dims, ndims as usize) }
    };
    if d.iter().any(|&x| x < 0) {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_DIMS);
    }
    let mut v: Vec<usize> = d.iter().map(|&x| x as usize).collect();
    if runthrough::dims_create(nnodes as usize, &mut v).is_err() {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_DIMS);
    }
    for (o, x) in d.iter_mut().zip(v) {
        *o = x as c_int;
    }
    MPI_SUCCESS
}

/// The intra-communicator of handle `h` (topologies are not defined on
/// inter-communicators).
fn intra(h: Handle) -> Result<Arc<CommObj>, c_int> {
    let c = crate::rt::lookup(h)?;
    if c.inter.is_some() {
        return Err(MPI_ERR_COMM);
    }
    Ok(c)
}

/// Runs a query `f` on communicator `h`'s topology; its class through the communicator.
fn query(h: Handle, f: impl FnOnce(&CommObj, Option<&Topology>) -> Result<(), c_int>) -> c_int {
    let c = match intra(h) {
        Ok(c) => c,
        Err(e) => return raise_on(if e == MPI_ERR_COMM { h } else { MPI_COMM_WORLD }, e),
    };
    match f(&c, c.comm.topology()) {
        Ok(()) => MPI_SUCCESS,
        Err(e) => raise_on(h, e),
    }
}

fn cart_of(t: Option<&Topology>) -> Result<&Cart, c_int> {
    match t {
        Some(Topology::Cart(c)) => Ok(c),
        _ => Err(MPI_ERR_TOPOLOGY),
    }
}

fn graph_of(t: Option<&Topology>) -> Result<&Graph, c_int> {
    match t {
        Some(Topology::Graph(g)) => Ok(g),
        _ => Err(MPI_ERR_TOPOLOGY),
    }
}

/// Writes `v` to the program's array `p` of at most `max` entries.
///
/// # Safety
/// `p` holds `max` writable entries (MPI contract), or `v` is empty.
unsafe fn put(p: *mut c_int, max: c_int, v: impl IntoIterator<Item = c_int>) {
    for (i, x) in v.into_iter().take(max.max(0) as usize).enumerate() {
        // SAFETY: within the program's array (function contract).
        unsafe { *p.add(i) = x };
    }
}

/// Writes `v` through the program's output pointer `p`.
///
/// # Safety
/// `p` is writable.
unsafe fn out(p: *mut c_int, v: c_int) -> Result<(), c_int> {
    if p.is_null() {
        return Err(MPI_ERR_ARG);
    }
    // SAFETY: checked non-null; writable (function contract).
    unsafe { *p = v };
    Ok(())
}

fn proc_or_null(r: Option<usize>) -> c_int {
    r.map_or(MPI_PROC_NULL, |r| r as c_int)
}

/// A topology constructor on `comm_old` writing `newcomm`: `f` reads the program's
/// arguments (a class for bad ones) and creates the communicator through the facade;
/// the result is registered (or `MPI_COMM_NULL`), errors go through `comm_old`.
///
/// # Safety
/// `newcomm` is writable (checked non-null here).
unsafe fn constructor(
    comm_old: Handle,
    newcomm: *mut Handle,
    f: impl FnOnce(&Arc<CommObj>) -> Result<Result<Option<runthrough::Comm>, runthrough::Error>, c_int>,
) -> c_int {
    let c = match intra(comm_old) {
        Ok(c) => c,
        Err(e) => return raise_on(comm_old, e),
    };
    if newcomm.is_null() {
        return raise_on(comm_old, MPI_ERR_ARG);
    }
    match f(&c) {
        // SAFETY: checked non-null.
        Ok(r) => unsafe { created(&c, comm_old, r, newcomm) },
        Err(e) => raise_on(comm_old, e),
    }
}

/// A new communicator of a constructor: registered, or `MPI_COMM_NULL`.
///
/// # Safety
/// `newcomm` is writable.
unsafe fn created(
    c: &Arc<CommObj>,
    h: Handle,
    r: Result<Option<runthrough::Comm>, runthrough::Error>,
    newcomm: *mut Handle,
) -> c_int {
    match r {
        Ok(n) => {
            let nh = n.map_or(MPI_COMM_NULL, |n| register_plain(c, n));
            // SAFETY: output argument (function contract).
            unsafe { *newcomm = nh };
            MPI_SUCCESS
        }
        Err(e) => raise_error(h, &e),
    }
}

/// The dimensions and periods of the program's arrays; `MPI_ERR_DIMS` for a bad one.
///
/// # Safety
/// `dims` and `periods` hold `ndims` entries.
unsafe fn grid(ndims: c_int, dims: *const c_int, periods: *const c_int) -> Result<(Vec<usize>, Vec<bool>), c_int> {
    if ndims < 0 {
        return Err(MPI_ERR_DIMS);
    }
    // SAFETY: arrays of ndims entries (function contract).
    let (d, p) = unsafe { (slice(dims, ndims), slice(periods, ndims)) };
    if d.len() != ndims as usize || p.len() != ndims as usize {
        return Err(MPI_ERR_ARG);
    }
    if d.iter().any(|&x| x < 0) {
        return Err(MPI_ERR_DIMS);
    }
    Ok((d.iter().map(|&x| x as usize).collect(), p.iter().map(|&x| x != 0).collect()))
}

pub(crate) unsafe fn MPI_Cart_create(
    comm_old: Handle,
    ndims: c_int,
    dims: *const c_int,
    periods: *const c_int,
    reorder: c_int,
    comm_cart: *mut Handle,
) -> c_int {
    // SAFETY: the program's arrays and output argument (function contract).
    unsafe {
        constructor(comm_old, comm_cart, |c| {
            let (d, p) = grid(ndims, dims, periods)?;
            Ok(c.comm.cart_create(&d, &p, reorder != 0))
        })
    }
}

pub(crate) unsafe fn MPI_Cart_sub(comm: Handle, remain_dims: *const c_int, newcomm: *mut Handle) -> c_int {
    let c = match intra(comm) {
        Ok(c) => c,
        Err(e) => return raise_on(comm, e),
    };
    let n = match c.comm.topology() {
        Some(Topology::Cart(cart)) => cart.ndims(),
        _ => return raise_on(comm, MPI_ERR_TOPOLOGY),
    };
    if newcomm.is_null() || (n > 0 && remain_dims.is_null()) {
        return raise_on(comm, MPI_ERR_ARG);
    }
    // SAFETY: an array of ndims flags (function contract).
    let remain: Vec<bool> = unsafe { slice(remain_dims, n as c_int) }.iter().map(|&x| x != 0).collect();
    let r = c.comm.cart_sub(&remain).map(Some);
    // SAFETY: checked non-null.
    unsafe { created(&c, comm, r, newcomm) }
}

pub(crate) unsafe fn MPI_Cartdim_get(comm: Handle, ndims: *mut c_int) -> c_int {
    // SAFETY: output argument (function contract).
    query(comm, |_, t| unsafe { out(ndims, cart_of(t)?.ndims() as c_int) })
}

pub(crate) unsafe fn MPI_Cart_get(
    comm: Handle,
    maxdims: c_int,
    dims: *mut c_int,
    periods: *mut c_int,
    coords: *mut c_int,
) -> c_int {
    query(comm, |c, t| {
        let cart = cart_of(t)?;
        let k = cart.coords(c.rank).map_err(|_| MPI_ERR_RANK)?;
        // SAFETY: arrays of maxdims entries (function contract).
        unsafe {
            put(dims, maxdims, cart.dims().iter().map(|&d| d as c_int));
            put(periods, maxdims, cart.periods().iter().map(|&p| c_int::from(p)));
            put(coords, maxdims, k.iter().map(|&x| x as c_int));
        }
        Ok(())
    })
}

pub(crate) unsafe fn MPI_Cart_rank(comm: Handle, coords: *const c_int, rank: *mut c_int) -> c_int {
    query(comm, |_, t| {
        let cart = cart_of(t)?;
        // SAFETY: an array of ndims coordinates (function contract).
        let k: Vec<i64> = unsafe { slice(coords, cart.ndims() as c_int) }.iter().map(|&x| i64::from(x)).collect();
        let r = cart.rank(&k).map_err(|_| MPI_ERR_ARG)?;
        // SAFETY: output argument.
        unsafe { out(rank, r as c_int) }
    })
}

pub(crate) unsafe fn MPI_Cart_coords(comm: Handle, rank: c_int, maxdims: c_int, coords: *mut c_int) -> c_int {
    query(comm, |_, t| {
        let cart = cart_of(t)?;
        let k = usize::try_from(rank).ok().and_then(|r| cart.coords(r).ok()).ok_or(MPI_ERR_RANK)?;
        if maxdims < k.len() as c_int {
            return Err(MPI_ERR_ARG);
        }
        // SAFETY: an array of maxdims entries (function contract).
        unsafe { put(coords, maxdims, k.iter().map(|&x| x as c_int)) };
        Ok(())
    })
}

pub(crate) unsafe fn MPI_Cart_shift(
    comm: Handle,
    direction: c_int,
    disp: c_int,
    rank_source: *mut c_int,
    rank_dest: *mut c_int,
) -> c_int {
    query(comm, |c, t| {
        let cart = cart_of(t)?;
        let dim = usize::try_from(direction).map_err(|_| MPI_ERR_ARG)?;
        let (s, d) = cart.shift(c.rank, dim, i64::from(disp)).map_err(|_| MPI_ERR_ARG)?;
        // SAFETY: output arguments (function contract).
        unsafe {
            out(rank_source, proc_or_null(s))?;
            out(rank_dest, proc_or_null(d))
        }
    })
}

pub(crate) unsafe fn MPI_Cart_map(
    comm: Handle,
    ndims: c_int,
    dims: *const c_int,
    periods: *const c_int,
    newrank: *mut c_int,
) -> c_int {
    query(comm, |c, _| {
        // SAFETY: the program's arrays (function contract).
        let (d, _) = unsafe { grid(ndims, dims, periods) }?;
        let n: usize = d.iter().product();
        if n > c.comm.size() {
            return Err(MPI_ERR_DIMS);
        }
        // SAFETY: output argument.
        unsafe { out(newrank, if c.rank < n { c.rank as c_int } else { MPI_UNDEFINED }) }
    })
}

/// A graph of the program's `index`/`edges` arrays.
///
/// # Safety
/// `index` holds `nnodes` entries, `edges` as many as its last.
unsafe fn graph_args(nnodes: c_int, index: *const c_int, edges: *const c_int) -> Result<Graph, c_int> {
    if nnodes < 0 {
        return Err(MPI_ERR_ARG);
    }
    // SAFETY: an array of nnodes entries (function contract).
    let idx = unsafe { slice(index, nnodes) };
    if idx.len() != nnodes as usize || idx.iter().any(|&x| x < 0) {
        return Err(MPI_ERR_ARG);
    }
    let nedges = idx.last().copied().unwrap_or(0);
    // SAFETY: an array of index[nnodes-1] entries (function contract).
    let e = unsafe { slice(edges, nedges) };
    if e.len() != nedges as usize || e.iter().any(|&x| x < 0) {
        return Err(MPI_ERR_ARG);
    }
    let idx: Vec<usize> = idx.iter().map(|&x| x as usize).collect();
    let e: Vec<usize> = e.iter().map(|&x| x as usize).collect();
    Graph::new(&idx, &e).map_err(|_| MPI_ERR_ARG)
}

pub(crate) unsafe fn MPI_Graph_create(
    comm_old: Handle,
    nnodes: c_int,
    indx: *const c_int,
    edges: *const c_int,
    reorder: c_int,
    comm_graph: *mut Handle,
) -> c_int {
    // SAFETY: the program's arrays and output argument (function contract).
    unsafe {
        constructor(comm_old, comm_graph, |c| {
            let g = graph_args(nnodes, indx, edges)?;
            Ok(c.comm.graph_create(g.index(), g.edges(), reorder != 0))
        })
    }
}

pub(crate) unsafe fn MPI_Graphdims_get(comm: Handle, nnodes: *mut c_int, nedges: *mut c_int) -> c_int {
    query(comm, |_, t| {
        let g = graph_of(t)?;
        // SAFETY: output arguments (function contract).
        unsafe {
            out(nnodes, g.nnodes() as c_int)?;
            out(nedges, g.edges().len() as c_int)
        }
    })
}

pub(crate) unsafe fn MPI_Graph_get(
    comm: Handle,
    maxindex: c_int,
    maxedges: c_int,
    indx: *mut c_int,
    edges: *mut c_int,
) -> c_int {
    query(comm, |_, t| {
        let g = graph_of(t)?;
        // SAFETY: arrays of maxindex and maxedges entries (function contract).
        unsafe {
            put(indx, maxindex, g.index().iter().map(|&x| x as c_int));
            put(edges, maxedges, g.edges().iter().map(|&x| x as c_int));
        }
        Ok(())
    })
}

pub(crate) unsafe fn MPI_Graph_neighbors_count(comm: Handle, rank: c_int, nneighbors: *mut c_int) -> c_int {
    query(comm, |_, t| {
        let n = usize::try_from(rank).ok().and_then(|r| graph_of(t).ok()?.neighbors(r).ok());
        let n = n.ok_or(if graph_of(t).is_err() { MPI_ERR_TOPOLOGY } else { MPI_ERR_RANK })?;
        // SAFETY: output argument (function contract).
        unsafe { out(nneighbors, n.len() as c_int) }
    })
}

pub(crate) unsafe fn MPI_Graph_neighbors(
    comm: Handle,
    rank: c_int,
    maxneighbors: c_int,
    neighbors: *mut c_int,
) -> c_int {
    query(comm, |_, t| {
        let g = graph_of(t)?;
        let n = usize::try_from(rank).ok().and_then(|r| g.neighbors(r).ok()).ok_or(MPI_ERR_RANK)?;
        // SAFETY: an array of maxneighbors entries (function contract).
        unsafe { put(neighbors, maxneighbors, n.iter().map(|&x| x as c_int)) };
        Ok(())
    })
}

pub(crate) unsafe fn MPI_Graph_map(
    comm: Handle,
    nnodes: c_int,
    indx: *const c_int,
    edges: *const c_int,
    newrank: *mut c_int,
) -> c_int {
    query(comm, |c, _| {
        // SAFETY: the program's arrays (function contract).
        let g = unsafe { graph_args(nnodes, indx, edges) }?;
        if g.nnodes() > c.comm.size() {
            return Err(MPI_ERR_ARG);
        }
        // SAFETY: output argument.
        unsafe { out(newrank, if c.rank < g.nnodes() { c.rank as c_int } else { MPI_UNDEFINED }) }
    })
}

/// The weights of a distributed graph's `n` edges: `None` for `MPI_UNWEIGHTED`.
///
/// # Safety
/// `w` is one of the two special values or holds `n` entries.
unsafe fn weights(w: *const c_int, n: c_int) -> Option<Vec<i32>> {
    match w as usize {
        UNWEIGHTED => None,
        WEIGHTS_EMPTY => Some(Vec::new()),
        // SAFETY: an array of n weights (function contract).
        _ => Some(unsafe { slice(w, n) }.to_vec()),
    }
}

/// Ranks of the program's array of `n` entries; `MPI_ERR_ARG` for a negative one.
///
/// # Safety
/// `p` holds `n` entries.
unsafe fn ranks(p: *const c_int, n: c_int) -> Result<Vec<usize>, c_int> {
    // SAFETY: forwarded (function contract).
    let s = unsafe { slice(p, n) };
    if n < 0 || s.len() != n as usize || s.iter().any(|&x| x < 0) {
        return Err(MPI_ERR_ARG);
    }
    Ok(s.iter().map(|&x| x as usize).collect())
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn MPI_Dist_graph_create_adjacent(
    comm_old: Handle,
    indegree: c_int,
    sources: *const c_int,
    sourceweights: *const c_int,
    outdegree: c_int,
    destinations: *const c_int,
    destweights: *const c_int,
    info: Handle,
    reorder: c_int,
    comm_dist_graph: *mut Handle,
) -> c_int {
    let _ = info;
    // SAFETY: the program's arrays of indegree and outdegree entries and output argument
    // (function contract).
    unsafe {
        constructor(comm_old, comm_dist_graph, |c| {
            let g = DistGraph {
                source_weights: weights(sourceweights, indegree),
                destination_weights: weights(destweights, outdegree),
                sources: ranks(sources, indegree)?,
                destinations: ranks(destinations, outdegree)?,
            };
            Ok(c.comm.dist_graph_create_adjacent(g, reorder != 0).map(Some))
        })
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn MPI_Dist_graph_create(
    comm_old: Handle,
    n: c_int,
    sources: *const c_int,
    degrees: *const c_int,
    destinations: *const c_int,
    weights: *const c_int,
    info: Handle,
    reorder: c_int,
    comm_dist_graph: *mut Handle,
) -> c_int {
    let _ = info;
    // SAFETY: the program's arrays — n sources and degrees, their sum of destinations and
    // weights — and output argument (function contract).
    unsafe {
        constructor(comm_old, comm_dist_graph, |c| {
            let (s, deg) = (ranks(sources, n)?, ranks(degrees, n)?);
            let total: usize = deg.iter().sum();
            let d = ranks(destinations, c_int::try_from(total).map_err(|_| MPI_ERR_ARG)?)?;
            let w = self::weights(weights, total as c_int);
            let mut edges = Vec::with_capacity(total);
            let mut k = 0;
            for (&src, &dg) in s.iter().zip(&deg) {
                for _ in 0..dg {
                    edges.push((src, d[k], w.as_ref().and_then(|w| w.get(k).copied()).unwrap_or(1)));
                    k += 1;
                }
            }
            Ok(c.comm.dist_graph_create(&edges, w.is_some(), reorder != 0).map(Some))
        })
    }
}

fn dist_of(t: Option<&Topology>) -> Result<&DistGraph, c_int> {
    match t {
        Some(Topology::DistGraph(g)) => Ok(g),
        _ => Err(MPI_ERR_TOPOLOGY),
    }
}

pub(crate) unsafe fn MPI_Dist_graph_neighbors_count(
    comm: Handle,
    indegree: *mut c_int,
    outdegree: *mut c_int,
    weighted: *mut c_int,
) -> c_int {
    query(comm, |_, t| {
        let g = dist_of(t)?;
        // SAFETY: output arguments (function contract).
        unsafe {
            out(indegree, g.sources.len() as c_int)?;
            out(outdegree, g.destinations.len() as c_int)?;
            out(weighted, c_int::from(g.source_weights.is_some()))
        }
    })
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn MPI_Dist_graph_neighbors(
    comm: Handle,
    maxindegree: c_int,
    sources: *mut c_int,
    sourceweights: *mut c_int,
    maxoutdegree: c_int,
    destinations: *mut c_int,
    destweights: *mut c_int,
) -> c_int {
    query(comm, |_, t| {
        let g = dist_of(t)?;
        let real = |p: *mut c_int| !p.is_null() && p as usize != UNWEIGHTED && p as usize != WEIGHTS_EMPTY;
        // SAFETY: arrays of maxindegree and maxoutdegree entries (function contract); the
        // weight arrays only when the program passed real ones.
        unsafe {
            put(sources, maxindegree, g.sources.iter().map(|&x| x as c_int));
            put(destinations, maxoutdegree, g.destinations.iter().map(|&x| x as c_int));
            if let (Some(w), true) = (&g.source_weights, real(sourceweights)) {
                put(sourceweights, maxindegree, w.iter().copied());
            }
            if let (Some(w), true) = (&g.destination_weights, real(destweights)) {
                put(destweights, maxoutdegree, w.iter().copied());
            }
        }
        Ok(())
    })
}

pub(crate) unsafe fn MPI_Topo_test(comm: Handle, status: *mut c_int) -> c_int {
    query(comm, |_, t| {
        let s = match t {
            Some(Topology::Cart(_)) => MPI_CART,
            Some(Topology::Graph(_)) => MPI_GRAPH,
            Some(Topology::DistGraph(_)) => MPI_DIST_GRAPH,
            None => MPI_UNDEFINED,
        };
        // SAFETY: output argument (function contract).
        unsafe { out(status, s) }
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn dims_create_fills_the_free_dimensions() {
        let mut d = [0, 0];
        // SAFETY: two entries.
        assert_eq!(unsafe { super::MPI_Dims_create(72, 2, d.as_mut_ptr()) }, super::MPI_SUCCESS);
        assert_eq!(d, [9, 8]);
        let mut d = [0, 3, 0];
        // SAFETY: three entries.
        assert_eq!(unsafe { super::MPI_Dims_create(24, 3, d.as_mut_ptr()) }, super::MPI_SUCCESS);
        assert_eq!(d, [4, 3, 2]);
    }
}
