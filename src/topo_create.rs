//! The topology constructors of [`Comm`] (`src/topo.rs` has the topologies and their
//! failure semantics, R38): each is a communicator creation with its guarantees.

use std::sync::Arc;

use crate::comm::Comm;
use crate::group::Group;
use crate::topo::{Cart, DistGraph, Graph, Topology};
use crate::Error;

impl Comm {
    /// The topology attached to this communicator, if any.
    pub fn topology(&self) -> Option<&Topology> {
        self.inner.topo.get().map(|t| &**t)
    }

    /// This communicator with `t` attached (a communicator just created).
    pub(crate) fn with_topology(self, t: Arc<Topology>) -> Comm {
        // A fresh communicator has none; set once.
        let _ = self.inner.topo.set(t);
        self
    }

    /// A communicator of the first `n` members, in order (`None` at the others).
    fn first(&self, n: usize) -> Result<Option<Comm>, Error> {
        if n > self.size() {
            return Err(Error::InvalidArg("the topology has more processes than the communicator"));
        }
        let all = self.group();
        let group: Group = all.incl(&(0..n).collect::<Vec<_>>())?;
        self.create(&group)
    }

    /// `MPI_Cart_create`: a communicator of the first `dims`-product members with a
    /// Cartesian topology (`None` at the other members). Collective; every member passes
    /// the same arguments. `reorder` keeps the ranks (see the module's documentation).
    pub fn cart_create(&self, dims: &[usize], periods: &[bool], reorder: bool) -> Result<Option<Comm>, Error> {
        let _ = reorder;
        let r = Cart::new(dims, periods).and_then(|cart| {
            let t = Arc::new(Topology::Cart(cart.clone()));
            Ok(self.first(cart.size())?.map(|c| c.with_topology(t)))
        });
        self.check(r)
    }

    /// `MPI_Cart_sub`: the sub-grid of this member keeping the dimensions `remain` marks
    /// (a grid of no dimension, this member alone, if none). Collective over the grid.
    pub fn cart_sub(&self, remain: &[bool]) -> Result<Comm, Error> {
        let r = (|| {
            let Some(Topology::Cart(cart)) = self.topology() else {
                return Err(Error::InvalidArg("cart_sub: the communicator has no Cartesian topology"));
            };
            if remain.len() != cart.ndims() {
                return Err(Error::InvalidArg("cart_sub: one flag a dimension"));
            }
            let mine = cart.coords(self.rank())?;
            // Every member of this one's sub-grid: the same coordinates in the dropped
            // dimensions, in row-major order of the kept ones (which is rank order).
            let members: Vec<usize> = (0..cart.size())
                .filter(|&r| {
                    cart.coords(r).is_ok_and(|c| c.iter().zip(&mine).zip(remain).all(|((a, b), &keep)| keep || a == b))
                })
                .collect();
            let keep =
                |v: &[usize]| -> Vec<usize> { v.iter().zip(remain).filter(|(_, &k)| k).map(|(&d, _)| d).collect() };
            let periods: Vec<bool> = cart.periods().iter().zip(remain).filter(|(_, &k)| k).map(|(&p, _)| p).collect();
            let sub = Cart::new(&keep(cart.dims()), &periods)?;
            let group = self.group().incl(&members)?;
            // Each member passes its own sub-grid: disjoint groups (MPI_Comm_create's
            // partitioned form).
            let c = self.create(&group)?.ok_or(Error::InvalidArg("cart_sub: this member is not in its sub-grid"))?;
            Ok(c.with_topology(Arc::new(Topology::Cart(sub))))
        })();
        self.check(r)
    }

    /// `MPI_Graph_create`: a communicator of the first `index.len()` members with the
    /// graph `index`/`edges` (`None` at the other members). Collective; every member
    /// passes the same graph.
    pub fn graph_create(&self, index: &[usize], edges: &[usize], reorder: bool) -> Result<Option<Comm>, Error> {
        let _ = reorder;
        let r = Graph::new(index, edges).and_then(|g| {
            let n = g.nnodes();
            let t = Arc::new(Topology::Graph(g));
            Ok(self.first(n)?.map(|c| c.with_topology(t)))
        });
        self.check(r)
    }

    /// `MPI_Dist_graph_create_adjacent`: a communicator of the same members, each with
    /// the neighbours it gives. Collective.
    pub fn dist_graph_create_adjacent(&self, g: DistGraph, reorder: bool) -> Result<Comm, Error> {
        let _ = reorder;
        let r = g.check(self.size()).and_then(|()| Ok(self.dup()?.with_topology(Arc::new(Topology::DistGraph(g)))));
        self.check(r)
    }

    /// `MPI_Dist_graph_create`: every member gives any edges `(source, destination,
    /// weight)` of the graph; each member of the new communicator (the same members)
    /// gets the edges into and out of it, ordered by the member that gave them, then as
    /// given. `weighted` says whether the weights mean anything (the same at every
    /// member). Collective.
    pub fn dist_graph_create(
        &self,
        edges: &[(usize, usize, i32)],
        weighted: bool,
        reorder: bool,
    ) -> Result<Comm, Error> {
        let _ = reorder;
        let r = (|| {
            let n = self.size();
            let checked = if edges.iter().any(|&(s, d, w)| s >= n || d >= n || (weighted && w < 0)) {
                Err(Error::InvalidArg("dist_graph_create: an edge outside the communicator or a negative weight"))
            } else {
                self.gather_edges(edges)
            };
            // Uniform: the communicator exists only if every live member gathered.
            let ok = self.agree(i32::from(checked.is_ok()))?;
            let all = checked?;
            if ok != 1 {
                return Err(Error::InvalidArg("dist_graph_create: another member's edges were refused"));
            }
            let me = self.rank();
            let (mut g, w) = (DistGraph::default(), weighted);
            for &(s, d, wt) in &all {
                if d == me {
                    g.sources.push(s);
                    if w {
                        g.source_weights.get_or_insert_with(Vec::new).push(wt);
                    }
                }
                if s == me {
                    g.destinations.push(d);
                    if w {
                        g.destination_weights.get_or_insert_with(Vec::new).push(wt);
                    }
                }
            }
            if w {
                g.source_weights.get_or_insert_with(Vec::new);
                g.destination_weights.get_or_insert_with(Vec::new);
            }
            Ok(self.dup()?.with_topology(Arc::new(Topology::DistGraph(g))))
        })();
        self.check(r)
    }

    /// Every live member's edges, in member order.
    fn gather_edges(&self, edges: &[(usize, usize, i32)]) -> Result<Vec<(usize, usize, i32)>, Error> {
        let n = self.size();
        let mut counts = vec![0u64; n];
        self.allgather(&[edges.len() as u64], &mut counts)?;
        let counts: Vec<usize> = counts.iter().map(|&c| 3 * c as usize).collect();
        let displs: Vec<usize> = counts.iter().scan(0, |a, &c| Some(std::mem::replace(a, *a + c))).collect();
        let mine: Vec<i64> = edges.iter().flat_map(|&(s, d, w)| [s as i64, d as i64, i64::from(w)]).collect();
        let mut all = vec![0i64; counts.iter().sum()];
        self.allgatherv(&mine, &mut all, &counts, &displs)?;
        Ok(all.chunks_exact(3).map(|e| (e[0] as usize, e[1] as usize, e[2] as i32)).collect())
    }
}
