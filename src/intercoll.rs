//! Collectives on inter-communicators (MPI-4.1 §6.2.2): rooted ones move data from the
//! root to, or from, every member of the *other* group; the all-to-all ones give each
//! group the other group's data (allreduce: the reduction of the other group's values).
//!
//! Each is one engine schedule on the inter-communicator's inner bridge — every member's
//! sends to and receives from remote members, posted together ([`Plan::Neighbor`], the
//! neighbourhood collectives' plan; no thread of its own) — followed by a local fold or
//! copy. Reductions fold the remote contributions in remote rank order, so
//! non-commutative operations get MPI's order. Direct exchanges cost the root (or every
//! member, for the all-to-all forms) one message a remote member; that is the whole
//! design until an inter-communicator needs trees.
//!
//! Failures (R39, R17–R21): an unrecognised failed member of either group makes the
//! collective err with `RankFailStop` (the schedule does not start on a collectively
//! inactive inter-communicator); after `validate`, a recognised failed remote member is
//! skipped — its block keeps what it held, and reductions leave its value out.

use std::ops::Range;

use runthrough_engine::Plan;

use crate::intercomm::InterComm;
use crate::{Error, Pod};

/// The role of a caller of a rooted inter-communicator collective (MPI-4.1 §6.2.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InterRoot {
    /// The root itself (`MPI_ROOT`).
    Root,
    /// Another member of the root's group (`MPI_PROC_NULL`): takes no part.
    Null,
    /// A member of the other group; the root is this remote rank.
    Remote(usize),
}

/// The byte ranges of `n` blocks of `blk` bytes from `at` on.
fn blocks(n: usize, blk: usize, at: usize) -> impl Iterator<Item = Range<usize>> {
    (0..n).map(move |j| at + j * blk..at + (j + 1) * blk)
}

/// Element ranges by counts and displacements (in elements of `size` bytes) as byte
/// ranges from `at`, each inside `len` elements.
fn ranged(
    counts: &[usize],
    displs: &[usize],
    n: usize,
    size: usize,
    len: usize,
    at: usize,
) -> Result<Vec<Range<usize>>, Error> {
    if counts.len() < n || displs.len() < n {
        return Err(Error::InvalidArg("inter-communicator collective: one count and displacement a remote member"));
    }
    (0..n)
        .map(|j| {
            let end = displs[j].checked_add(counts[j]).filter(|&e| e <= len);
            end.map(|e| at + displs[j] * size..at + e * size)
                .ok_or(Error::InvalidArg("inter-communicator collective: a block past its buffer"))
        })
        .collect()
}

impl InterComm {
    /// Which remote members' blocks arrive: those not recognised failed.
    pub fn remote_receives(&self) -> Vec<bool> {
        let failed = self.inner.group_failed().world_ranks();
        let g = self.inner.members();
        self.remotes.iter().map(|&b| !failed.contains(&(g[b].0 as usize))).collect()
    }

    /// The schedule of an exchange with remote members: sends of arena ranges to remote
    /// ranks and receives from them (one engine plan on the inner bridge).
    pub fn plan(&self, sends: Vec<(usize, Range<usize>)>, recvs: Vec<(usize, Range<usize>)>) -> Result<Plan, Error> {
        let to_bridge = |v: Vec<(usize, Range<usize>)>| -> Result<Vec<(u32, Range<usize>)>, Error> {
            v.into_iter().map(|(r, rg)| Ok((self.bridge_rank(r)? as u32, rg))).collect()
        };
        Ok(Plan::Neighbor { sends: to_bridge(sends)?, recvs: to_bridge(recvs)? })
    }

    /// Starts `plan` over `arena` on the inner bridge (nonblocking: the engine advances
    /// it; [`crate::OwnedColl::test`] gives the outcome and the arena back).
    pub fn start_plan(&self, plan: &Plan, arena: Vec<u8>) -> Result<crate::OwnedColl, Error> {
        self.inner.start_owned(plan, arena, None, None)
    }

    /// [`InterComm::start_plan`] at a tag taken before by
    /// [`InterComm::reserve_collective`] (a persistent collective's start), or at the
    /// next one. Its outcome goes through [`InterComm::settle`].
    pub fn start_plan_at(
        &self,
        plan: &Plan,
        arena: Vec<u8>,
        at: Option<crate::Reserved>,
    ) -> Result<crate::OwnedColl, Error> {
        self.inner.start_owned(plan, arena, None, at)
    }

    /// Takes the next collective tag of the inner bridge for a collective started later,
    /// maybe many times (persistent collectives match in initialisation order).
    pub fn reserve_collective(&self) -> Result<crate::Reserved, Error> {
        self.settle(self.inner.reserve_collective())
    }

    /// A collective's outcome as this inter-communicator reports it: a failed bridge
    /// member named by its remote rank, and the communicator's state (revoked, failures)
    /// applied.
    pub fn settle<T>(&self, r: Result<T, Error>) -> Result<T, Error> {
        self.bridge.check(self.remote_error(r))
    }

    /// Runs an exchange to the end; the arena back.
    fn exchange(
        &self,
        sends: Vec<(usize, Range<usize>)>,
        recvs: Vec<(usize, Range<usize>)>,
        arena: Vec<u8>,
    ) -> Result<Vec<u8>, Error> {
        let r = (|| {
            let plan = self.plan(sends, recvs)?;
            let coll = self.start_plan(&plan, arena)?;
            let mut w = self.inner.waiter();
            let (r, arena) = loop {
                if let Some(done) = coll.test() {
                    break done;
                }
                w.snooze();
            };
            r.map(|()| arena)
        })();
        self.settle(r)
    }

    /// An error naming a bridge rank, with the remote rank instead where it is one.
    fn remote_error<T>(&self, r: Result<T, Error>) -> Result<T, Error> {
        r.map_err(|e| match e {
            Error::RankFailStop { rank } => {
                Error::RankFailStop { rank: self.remote_rank(rank as usize).unwrap_or(rank as usize) as u32 }
            }
            e => e,
        })
    }

    /// `MPI_Barrier`: returns once every member of the other group has entered.
    pub fn barrier(&self) -> Result<(), Error> {
        let n = self.remote_size();
        let all = |_| (0..n).map(|j| (j, 0..0)).collect::<Vec<_>>();
        self.exchange(all(()), all(()), Vec::new()).map(drop)
    }

    /// `MPI_Bcast`: the root's `buf` into `buf` at every member of the other group.
    pub fn bcast<T: Pod>(&self, buf: &mut [T], root: InterRoot) -> Result<(), Error> {
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(buf);
        let len = bytes.len();
        match root {
            // No data, but the schedule keeps every member's collective sequence in step.
            InterRoot::Null => self.exchange(Vec::new(), Vec::new(), Vec::new()).map(drop),
            InterRoot::Root => {
                let sends = (0..self.remote_size()).map(|j| (j, 0..len)).collect();
                self.exchange(sends, Vec::new(), bytes.to_vec()).map(drop)
            }
            InterRoot::Remote(r) => {
                let arena = self.exchange(Vec::new(), vec![(r, 0..len)], bytes.to_vec())?;
                bytes.copy_from_slice(&arena);
                Ok(())
            }
        }
    }

    /// `MPI_Gather`: block `j` of `recv` at the root comes from remote member `j`.
    pub fn gather<T: Pod>(&self, send: &[T], recv: &mut [T], root: InterRoot) -> Result<(), Error> {
        let n = self.remote_size();
        let blk = recv.len().checked_div(n).unwrap_or(0);
        let counts = vec![blk; n];
        let displs: Vec<usize> = (0..n).map(|j| j * blk).collect();
        self.gatherv(send, recv, &counts, &displs, root)
    }

    /// `MPI_Gatherv`: remote member `j`'s data into `recv[displs[j]..][..counts[j]]`.
    pub fn gatherv<T: Pod>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        displs: &[usize],
        root: InterRoot,
    ) -> Result<(), Error> {
        let size = std::mem::size_of::<T>();
        match root {
            // No data, but the schedule keeps every member's collective sequence in step.
            InterRoot::Null => self.exchange(Vec::new(), Vec::new(), Vec::new()).map(drop),
            InterRoot::Root => {
                let n = self.remote_size();
                let r = ranged(counts, displs, n, size, recv.len(), 0);
                let ranges = self.bridge.check(r)?;
                let out: &mut [u8] = bytemuck::cast_slice_mut(recv);
                let arena = self.exchange(Vec::new(), ranges.into_iter().enumerate().collect(), out.to_vec())?;
                out.copy_from_slice(&arena);
                Ok(())
            }
            InterRoot::Remote(r) => {
                let data: &[u8] = bytemuck::cast_slice(send);
                self.exchange(vec![(r, 0..data.len())], Vec::new(), data.to_vec()).map(drop)
            }
        }
    }

    /// `MPI_Scatter`: block `j` of the root's `send` to remote member `j`.
    pub fn scatter<T: Pod>(&self, send: &[T], recv: &mut [T], root: InterRoot) -> Result<(), Error> {
        let n = self.remote_size();
        let blk = send.len().checked_div(n).unwrap_or(0);
        let counts = vec![blk; n];
        let displs: Vec<usize> = (0..n).map(|j| j * blk).collect();
        self.scatterv(send, &counts, &displs, recv, root)
    }

    /// `MPI_Scatterv`: `send[displs[j]..][..counts[j]]` to remote member `j`.
    pub fn scatterv<T: Pod>(
        &self,
        send: &[T],
        counts: &[usize],
        displs: &[usize],
        recv: &mut [T],
        root: InterRoot,
    ) -> Result<(), Error> {
        let size = std::mem::size_of::<T>();
        match root {
            // No data, but the schedule keeps every member's collective sequence in step.
            InterRoot::Null => self.exchange(Vec::new(), Vec::new(), Vec::new()).map(drop),
            InterRoot::Root => {
                let n = self.remote_size();
                let ranges = self.bridge.check(ranged(counts, displs, n, size, send.len(), 0))?;
                let data: &[u8] = bytemuck::cast_slice(send);
                self.exchange(ranges.into_iter().enumerate().collect(), Vec::new(), data.to_vec()).map(drop)
            }
            InterRoot::Remote(r) => {
                let out: &mut [u8] = bytemuck::cast_slice_mut(recv);
                let arena = self.exchange(Vec::new(), vec![(r, 0..out.len())], out.to_vec())?;
                out.copy_from_slice(&arena);
                Ok(())
            }
        }
    }

    /// `MPI_Allgather`: block `j` of `recv` is remote member `j`'s `send`.
    pub fn allgather<T: Pod>(&self, send: &[T], recv: &mut [T]) -> Result<(), Error> {
        let n = self.remote_size();
        let blk = recv.len().checked_div(n).unwrap_or(0);
        let counts = vec![blk; n];
        let displs: Vec<usize> = (0..n).map(|j| j * blk).collect();
        self.allgatherv(send, recv, &counts, &displs)
    }

    /// `MPI_Allgatherv`: remote member `j`'s `send` into `recv[displs[j]..][..counts[j]]`.
    pub fn allgatherv<T: Pod>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        displs: &[usize],
    ) -> Result<(), Error> {
        let size = std::mem::size_of::<T>();
        let n = self.remote_size();
        let data: &[u8] = bytemuck::cast_slice(send);
        let at = data.len();
        let recvs = self.bridge.check(ranged(counts, displs, n, size, recv.len(), at))?;
        let out: &mut [u8] = bytemuck::cast_slice_mut(recv);
        let mut arena = data.to_vec();
        arena.extend_from_slice(out);
        let sends = (0..n).map(|j| (j, 0..at)).collect();
        let arena = self.exchange(sends, recvs.into_iter().enumerate().collect(), arena)?;
        out.copy_from_slice(&arena[at..]);
        Ok(())
    }

    /// `MPI_Alltoall`: block `j` of `send` to remote member `j`, block `j` of `recv`
    /// from it.
    pub fn alltoall<T: Pod>(&self, send: &[T], recv: &mut [T]) -> Result<(), Error> {
        let n = self.remote_size();
        let (sb, rb) = (send.len().checked_div(n).unwrap_or(0), recv.len().checked_div(n).unwrap_or(0));
        let sd: Vec<usize> = (0..n).map(|j| j * sb).collect();
        let rd: Vec<usize> = (0..n).map(|j| j * rb).collect();
        self.alltoallv(send, &vec![sb; n], &sd, recv, &vec![rb; n], &rd)
    }

    /// `MPI_Alltoallv` by counts and displacements (in elements).
    pub fn alltoallv<T: Pod>(
        &self,
        send: &[T],
        scounts: &[usize],
        sdispls: &[usize],
        recv: &mut [T],
        rcounts: &[usize],
        rdispls: &[usize],
    ) -> Result<(), Error> {
        let size = std::mem::size_of::<T>();
        let n = self.remote_size();
        let data: &[u8] = bytemuck::cast_slice(send);
        let at = data.len();
        let sends = self.bridge.check(ranged(scounts, sdispls, n, size, send.len(), 0))?;
        let recvs = self.bridge.check(ranged(rcounts, rdispls, n, size, recv.len(), at))?;
        let out: &mut [u8] = bytemuck::cast_slice_mut(recv);
        let mut arena = data.to_vec();
        arena.extend_from_slice(out);
        let arena =
            self.exchange(sends.into_iter().enumerate().collect(), recvs.into_iter().enumerate().collect(), arena)?;
        out.copy_from_slice(&arena[at..]);
        Ok(())
    }

    /// Folds the blocks of `all` (one a remote member, `len` elements each) that arrived
    /// into `out` in remote rank order, with `f(acc, incoming)` computing
    /// `acc = incoming op acc`; `false` when none arrived.
    pub fn fold_remote<T: Pod>(&self, all: &[T], len: usize, out: &mut [T], f: &dyn Fn(&mut [T], &[T])) -> bool {
        let arrived = self.remote_receives();
        let mut live = (0..arrived.len()).rev().filter(|&j| arrived[j]);
        let Some(last) = live.next() else { return false };
        out.copy_from_slice(&all[last * len..(last + 1) * len]);
        for j in live {
            f(out, &all[j * len..(j + 1) * len]);
        }
        true
    }

    /// `MPI_Reduce` with `f(acc, incoming)` (`acc = incoming op acc`): the root gets the
    /// reduction of the other group's `send` values, in their rank order.
    pub fn reduce_with<T: Pod>(
        &self,
        send: &[T],
        recv: &mut [T],
        root: InterRoot,
        f: &dyn Fn(&mut [T], &[T]),
    ) -> Result<(), Error> {
        match root {
            // No data, but the schedule keeps every member's collective sequence in step.
            InterRoot::Null => self.exchange(Vec::new(), Vec::new(), Vec::new()).map(drop),
            InterRoot::Remote(r) => {
                let data: &[u8] = bytemuck::cast_slice(send);
                self.exchange(vec![(r, 0..data.len())], Vec::new(), data.to_vec()).map(drop)
            }
            InterRoot::Root => {
                let n = self.remote_size();
                let blk = std::mem::size_of_val(recv);
                let arena = self.exchange(Vec::new(), blocks(n, blk, 0).enumerate().collect(), vec![0u8; n * blk])?;
                self.fold_remote(&bytemuck::pod_collect_to_vec::<u8, T>(&arena), recv.len(), recv, f);
                Ok(())
            }
        }
    }

    /// `MPI_Allreduce` with `f` as for [`InterComm::reduce_with`]: each group gets the
    /// reduction of the other group's `send` values.
    pub fn allreduce_with<T: Pod>(&self, send: &[T], recv: &mut [T], f: &dyn Fn(&mut [T], &[T])) -> Result<(), Error> {
        let all = self.all_vectors(send)?;
        if recv.len() != send.len() {
            return self.bridge.check(Err(Error::InvalidArg("allreduce: send and receive lengths differ")));
        }
        self.fold_remote(&all, send.len(), recv, f);
        Ok(())
    }

    /// `MPI_Reduce_scatter`: the reduction of the other group's `send` vectors (each of
    /// `counts.iter().sum()` elements, `counts` one a local member), of which this
    /// member gets `counts[rank]` elements from `counts[..rank].sum()` on.
    pub fn reduce_scatter_with<T: Pod>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        f: &dyn Fn(&mut [T], &[T]),
    ) -> Result<(), Error> {
        let me = self.rank();
        if counts.len() != self.size() || counts.iter().sum::<usize>() != send.len() || recv.len() < counts[me] {
            return self.bridge.check(Err(Error::InvalidArg("reduce_scatter: counts do not match the buffers")));
        }
        let all = self.all_vectors(send)?;
        let mut acc = send.to_vec();
        self.fold_remote(&all, send.len(), &mut acc, f);
        let start: usize = counts[..me].iter().sum();
        recv[..counts[me]].copy_from_slice(&acc[start..start + counts[me]]);
        Ok(())
    }

    /// Every remote member's `send` vector, by remote rank (blocks of recognised failed
    /// members zero).
    fn all_vectors<T: Pod>(&self, send: &[T]) -> Result<Vec<T>, Error> {
        let n = self.remote_size();
        let data: &[u8] = bytemuck::cast_slice(send);
        let blk = data.len();
        let mut arena = data.to_vec();
        arena.resize(blk * (n + 1), 0);
        let sends = (0..n).map(|j| (j, 0..blk)).collect();
        let arena = self.exchange(sends, blocks(n, blk, blk).enumerate().collect(), arena)?;
        Ok(bytemuck::pod_collect_to_vec(&arena[blk..]))
    }
}
