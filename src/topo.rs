//! Process topologies (MPI-4.1 chapter 8; R38): Cartesian grids, graphs and distributed
//! graphs attached to communicators, their queries, and [`dims_create`]. The constructors
//! are `Comm`'s (`topo_create.rs`).
//!
//! A topology is data on a communicator (`Comm::topology`); creating one is creating a
//! communicator, so it has the creation's guarantees (R38, seeds/000 §17.9): it needs an
//! active communicator, is uniform (created at every member or an error at every member),
//! and carries recognized failures into the new communicator:
//! - [`cart_create`](crate::Comm::cart_create) and
//!   [`graph_create`](crate::Comm::graph_create) take the first `n` members of the old
//!   communicator, whatever their state: every member computes the same membership from
//!   its own arguments (a failed member "contributes the same values as its peers"), and a
//!   recognized failed member stays a recognized failure in the new communicator;
//! - [`cart_sub`](crate::Comm::cart_sub): each member computes its sub-grid from the grid
//!   alone, so a failed member contributes nothing; it is in its sub-grid as a recognized
//!   failure;
//! - [`dist_graph_create_adjacent`](crate::Comm::dist_graph_create_adjacent) takes each
//!   member's own neighbours (no exchange);
//!   [`dist_graph_create`](crate::Comm::dist_graph_create) gathers the edges every live
//!   member gave, then agrees that the gathering worked everywhere before creating the
//!   communicator (a failed member contributes no edge).
//!
//! Reordering (`reorder = true`) keeps the old ranks: the launcher places consecutive ranks
//! on one node, so a grid in row-major order already has its last dimension's neighbours
//! on the same node (shared memory) wherever the node holds a whole row. `MPI_Comm_dup`
//! ([`Comm::dup`](crate::Comm::dup)) keeps the topology; the other constructors make
//! communicators without. docs/TOPOLOGIES.md says the same for users.

use crate::Error;

/// A communicator's topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Topology {
    /// A Cartesian grid (MPI_CART).
    Cart(Cart),
    /// A graph every member knows whole (MPI_GRAPH).
    Graph(Graph),
    /// This member's neighbours in a distributed graph (MPI_DIST_GRAPH).
    DistGraph(DistGraph),
}

/// A member's neighbourhood for MPI's neighbourhood collectives (MPI-4.1 8.6): the
/// sources its receive blocks come from and the destinations its send blocks go to, in
/// block order (`None`: `MPI_PROC_NULL`, past the edge of a non-periodic grid), and the
/// order its sends are posted in (`send_order`, a permutation of the destinations'
/// indices). Messages between two members meet in posting order, so a grid posts, in each
/// dimension, the block for the neighbour above before the one for the neighbour below:
/// where both are one process (a periodic dimension of 1 or 2), the block that member
/// posts first for its neighbour below — this member — is the one it sent "up", which
/// MPI puts in this member's block from below.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neighborhood {
    /// Where each receive block comes from.
    pub sources: Vec<Option<usize>>,
    /// Where each send block goes.
    pub destinations: Vec<Option<usize>>,
    /// The order the send blocks are posted in.
    pub send_order: Vec<usize>,
}

impl Topology {
    /// The neighbourhood of `rank` (see [`Neighborhood`]).
    pub fn neighborhood(&self, rank: usize) -> Result<Neighborhood, Error> {
        Ok(match self {
            Topology::Cart(c) => {
                let n = c.neighbors(rank)?;
                let send_order = (0..c.ndims()).flat_map(|d| [2 * d + 1, 2 * d]).collect();
                Neighborhood { sources: n.clone(), destinations: n, send_order }
            }
            Topology::Graph(g) => {
                let n: Vec<Option<usize>> = g.neighbors(rank)?.iter().map(|&r| Some(r)).collect();
                Neighborhood { send_order: (0..n.len()).collect(), sources: n.clone(), destinations: n }
            }
            Topology::DistGraph(g) => Neighborhood {
                sources: g.sources.iter().map(|&r| Some(r)).collect(),
                destinations: g.destinations.iter().map(|&r| Some(r)).collect(),
                send_order: (0..g.destinations.len()).collect(),
            },
        })
    }
}

/// A Cartesian grid: ranks in row-major order (the last dimension varies fastest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cart {
    dims: Vec<usize>,
    periods: Vec<bool>,
}

impl Cart {
    /// A grid of `dims` processes per dimension, each dimension periodic or not (a
    /// dimension of 0 makes a grid of no process, as MPICH reads MPI).
    pub fn new(dims: &[usize], periods: &[bool]) -> Result<Cart, Error> {
        if dims.len() != periods.len() {
            return Err(Error::InvalidArg("cart: dims and periods differ in length"));
        }
        dims.iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .ok_or(Error::InvalidArg("cart: the grid's size overflows"))?;
        Ok(Cart { dims: dims.to_vec(), periods: periods.to_vec() })
    }

    /// Processes per dimension.
    pub fn dims(&self) -> &[usize] {
        &self.dims
    }

    /// Whether each dimension wraps around.
    pub fn periods(&self) -> &[bool] {
        &self.periods
    }

    /// Number of dimensions.
    pub fn ndims(&self) -> usize {
        self.dims.len()
    }

    /// Number of processes in the grid (1 for a grid of no dimension).
    pub fn size(&self) -> usize {
        self.dims.iter().product()
    }

    /// The coordinates of `rank` (`MPI_Cart_coords`).
    pub fn coords(&self, rank: usize) -> Result<Vec<usize>, Error> {
        if rank >= self.size() {
            return Err(Error::InvalidRank { rank: rank as i64, size: self.size() as u32 });
        }
        let mut c = vec![0; self.dims.len()];
        let mut r = rank;
        for (i, &d) in self.dims.iter().enumerate().rev() {
            c[i] = r % d;
            r /= d;
        }
        Ok(c)
    }

    /// The rank at `coords` (`MPI_Cart_rank`): wrapped around in a periodic dimension,
    /// an error outside a non-periodic one.
    pub fn rank(&self, coords: &[i64]) -> Result<usize, Error> {
        if coords.len() != self.dims.len() {
            return Err(Error::InvalidArg("cart_rank: one coordinate a dimension"));
        }
        let mut r = 0usize;
        for ((&c, &d), &p) in coords.iter().zip(&self.dims).zip(&self.periods) {
            let c = match (p, c) {
                (true, c) => c.rem_euclid(d as i64) as usize,
                (false, c) if (0..d as i64).contains(&c) => c as usize,
                _ => return Err(Error::InvalidArg("cart_rank: a coordinate outside a non-periodic dimension")),
            };
            r = r * d + c;
        }
        Ok(r)
    }

    /// The source and destination of a shift by `disp` along `dim` from `rank`
    /// (`MPI_Cart_shift`): `None` (`MPI_PROC_NULL`) past the edge of a non-periodic
    /// dimension.
    pub fn shift(&self, rank: usize, dim: usize, disp: i64) -> Result<(Option<usize>, Option<usize>), Error> {
        if dim >= self.dims.len() {
            return Err(Error::InvalidArg("cart_shift: no such dimension"));
        }
        let c = self.coords(rank)?;
        let at = |delta: i64| {
            let mut k: Vec<i64> = c.iter().map(|&x| x as i64).collect();
            k[dim] = k[dim].checked_add(delta)?;
            self.rank(&k).ok()
        };
        Ok((at(disp.checked_neg().unwrap_or(i64::MAX)), at(disp)))
    }

    /// The neighbours of `rank` in the order of MPI's neighbourhood collectives: for
    /// each dimension, the one below, then the one above (`None` past an edge).
    pub fn neighbors(&self, rank: usize) -> Result<Vec<Option<usize>>, Error> {
        let mut out = Vec::with_capacity(2 * self.dims.len());
        for d in 0..self.dims.len() {
            let (below, above) = self.shift(rank, d, 1)?;
            out.extend([below, above]);
        }
        Ok(out)
    }
}

/// A graph every member knows (MPI_GRAPH): node `i`'s neighbours are
/// `edges[index[i-1]..index[i]]` (`index[-1]` = 0), MPI's arrays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Graph {
    index: Vec<usize>,
    edges: Vec<usize>,
}

impl Graph {
    /// A graph of `index.len()` nodes.
    pub fn new(index: &[usize], edges: &[usize]) -> Result<Graph, Error> {
        if index.windows(2).any(|w| w[0] > w[1]) || index.last().is_some_and(|&l| l != edges.len()) {
            return Err(Error::InvalidArg("graph: index is not the running count of edges"));
        }
        if edges.iter().any(|&e| e >= index.len()) {
            return Err(Error::InvalidArg("graph: an edge to no node"));
        }
        Ok(Graph { index: index.to_vec(), edges: edges.to_vec() })
    }

    /// Number of nodes.
    pub fn nnodes(&self) -> usize {
        self.index.len()
    }

    /// MPI's `index` array.
    pub fn index(&self) -> &[usize] {
        &self.index
    }

    /// MPI's `edges` array.
    pub fn edges(&self) -> &[usize] {
        &self.edges
    }

    /// The neighbours of `rank`, in the order given.
    pub fn neighbors(&self, rank: usize) -> Result<&[usize], Error> {
        let end = *self.index.get(rank).ok_or(Error::InvalidRank { rank: rank as i64, size: self.nnodes() as u32 })?;
        let start = if rank == 0 { 0 } else { self.index[rank - 1] };
        Ok(&self.edges[start..end])
    }
}

/// This member's edges in a distributed graph (MPI_DIST_GRAPH): the members it receives
/// from and sends to, with the weights given (`None`: unweighted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DistGraph {
    /// Ranks this member receives from.
    pub sources: Vec<usize>,
    /// Their weights.
    pub source_weights: Option<Vec<i32>>,
    /// Ranks this member sends to.
    pub destinations: Vec<usize>,
    /// Their weights.
    pub destination_weights: Option<Vec<i32>>,
}

impl DistGraph {
    pub(crate) fn check(&self, size: usize) -> Result<(), Error> {
        if self.sources.iter().chain(&self.destinations).any(|&r| r >= size) {
            return Err(Error::InvalidArg("dist_graph: a neighbour outside the communicator"));
        }
        let bad = |w: &Option<Vec<i32>>, n: usize| w.as_ref().is_some_and(|w| w.len() != n || w.iter().any(|&x| x < 0));
        if bad(&self.source_weights, self.sources.len()) || bad(&self.destination_weights, self.destinations.len()) {
            return Err(Error::InvalidArg("dist_graph: one non-negative weight an edge"));
        }
        Ok(())
    }
}

/// Fills the zero entries of `dims` so that the product of all is `nnodes`, the filled
/// ones as close to each other as possible and non-increasing (`MPI_Dims_create`: 72 in
/// two dimensions is 9 × 8); non-zero entries are kept. An error if no such filling
/// exists.
pub fn dims_create(nnodes: usize, dims: &mut [usize]) -> Result<(), Error> {
    let fixed: usize = dims.iter().filter(|&&x| x > 0).product();
    if fixed == 0 || !nnodes.is_multiple_of(fixed) {
        return Err(Error::InvalidArg("dims_create: the given dimensions do not divide the number of nodes"));
    }
    let free: Vec<usize> = (0..dims.len()).filter(|&i| dims[i] == 0).collect();
    if free.is_empty() {
        return if fixed == nnodes {
            Ok(())
        } else {
            Err(Error::InvalidArg("dims_create: the dimensions' product differs"))
        };
    }
    let rest = (nnodes / fixed) as u64;
    let vals = balanced_factors(rest, free.len(), rest)
        .ok_or(Error::InvalidArg("dims_create: no factorisation into that many dimensions"))?;
    for (k, &i) in free.iter().enumerate() {
        dims[i] = vals[k] as usize;
    }
    Ok(())
}

/// `n` as `k` factors of at most `cap` each, non-increasing, the lexicographically
/// smallest such list (so the largest factor is as small as it can be, then the next...);
/// `None` when there is none. `n == 0` (a zero-sized grid) gives zeros.
fn balanced_factors(n: u64, k: usize, cap: u64) -> Option<Vec<u64>> {
    if n == 0 {
        return Some(vec![0; k]);
    }
    // Every factor divides n: its divisors, ascending (trial division to sqrt(n)).
    let mut divisors: Vec<u64> = (1..).take_while(|d| d * d <= n).filter(|d| n.is_multiple_of(*d)).collect();
    let high: Vec<u64> = divisors.iter().rev().map(|d| n / d).filter(|&q| q * q != n).collect();
    divisors.extend(high);
    let mut out = Vec::with_capacity(k);
    split_factors(n, k, cap, &divisors, &mut out).then_some(out)
}

/// The recursion of [`balanced_factors`] over `divisors` (those of the original `n`,
/// ascending): pushes the factors of `n` to `out` and returns whether it could.
fn split_factors(n: u64, k: usize, cap: u64, divisors: &[u64], out: &mut Vec<u64>) -> bool {
    if k == 0 {
        return n == 1;
    }
    if k == 1 {
        if n > cap {
            return false;
        }
        out.push(n);
        return true;
    }
    // The largest factor d: d^k >= n, d divides n, d <= cap; smallest first.
    for &d in divisors.iter().filter(|&&d| d <= cap.min(n) && n.is_multiple_of(d)) {
        if (d as u128).pow(k as u32) < n as u128 {
            continue;
        }
        out.push(d);
        if split_factors(n / d, k - 1, d, divisors, out) {
            return true;
        }
        out.pop();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dims_are_as_close_to_each_other_as_possible() {
        assert_eq!(balanced_factors(72, 2, 72), Some(vec![9, 8]));
        assert_eq!(balanced_factors(12, 3, 12), Some(vec![3, 2, 2]));
        assert_eq!(balanced_factors(7, 2, 7), Some(vec![7, 1]));
        assert_eq!(balanced_factors(36, 3, 36), Some(vec![4, 3, 3]));
        assert_eq!(balanced_factors(1, 4, 1), Some(vec![1, 1, 1, 1]));
        assert_eq!(balanced_factors(64, 3, 64), Some(vec![4, 4, 4]));
        assert_eq!(balanced_factors(2_147_483_647, 2, 2_147_483_647), Some(vec![2_147_483_647, 1]));
        assert_eq!(balanced_factors(1 << 30, 2, 1 << 30), Some(vec![1 << 15, 1 << 15]));
        let mut d = [0, 3, 0];
        dims_create(24, &mut d).unwrap();
        assert_eq!(d, [4, 3, 2]);
        assert!(dims_create(10, &mut [0, 3]).is_err());
    }

    #[test]
    fn a_cartesian_grid_answers_as_mpi_says() {
        let c = Cart::new(&[3, 4], &[false, true]).unwrap();
        assert_eq!(c.size(), 12);
        for r in 0..12 {
            let k = c.coords(r).unwrap();
            assert_eq!(k, vec![r / 4, r % 4], "row-major");
            assert_eq!(c.rank(&[k[0] as i64, k[1] as i64]).unwrap(), r);
        }
        assert_eq!(c.rank(&[1, -1]).unwrap(), 7, "periodic dimension wraps");
        assert_eq!(c.rank(&[1, 9]).unwrap(), 5);
        assert!(c.rank(&[3, 0]).is_err(), "non-periodic dimension does not");
        assert!(c.coords(12).is_err());
        // Rank 4 is (1, 0): along dimension 0 its neighbours are 0 and 8; along 1,
        // periodic, 7 and 5.
        assert_eq!(c.shift(4, 0, 1).unwrap(), (Some(0), Some(8)));
        assert_eq!(c.shift(0, 0, 1).unwrap(), (None, Some(4)), "MPI_PROC_NULL past the edge");
        assert_eq!(c.shift(4, 1, 1).unwrap(), (Some(7), Some(5)));
        assert_eq!(c.shift(4, 0, -2).unwrap(), (None, None));
        assert_eq!(c.neighbors(4).unwrap(), vec![Some(0), Some(8), Some(7), Some(5)]);
        assert!(c.shift(4, 2, 1).is_err());
        let nb = Topology::Cart(c.clone()).neighborhood(4).unwrap();
        assert_eq!(nb.sources, nb.destinations);
        assert_eq!(nb.send_order, vec![1, 0, 3, 2], "up before down in each dimension");
        let none = Cart::new(&[], &[]).unwrap();
        assert_eq!((none.size(), none.coords(0).unwrap()), (1, vec![]));
        assert_eq!(Cart::new(&[2, 0], &[false, false]).unwrap().size(), 0);
    }

    #[test]
    fn a_graph_gives_each_node_its_edges() {
        // MPI-4.1 8.5.3's example: 4 nodes.
        let g = Graph::new(&[2, 3, 4, 6], &[1, 3, 0, 3, 0, 2]).unwrap();
        assert_eq!(g.neighbors(0).unwrap(), &[1, 3]);
        assert_eq!(g.neighbors(1).unwrap(), &[0]);
        assert_eq!(g.neighbors(3).unwrap(), &[0, 2]);
        assert!(g.neighbors(4).is_err());
        assert!(Graph::new(&[2, 1], &[0, 1]).is_err(), "index decreases");
        assert!(Graph::new(&[1], &[1]).is_err(), "edge to no node");
    }
}
