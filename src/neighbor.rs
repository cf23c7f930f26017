//! Neighbourhood collectives (MPI-4.1 8.6) over a communicator's topology: each member
//! exchanges blocks with its neighbours only (`Topology::neighborhood`), as one engine
//! schedule ([`Plan::Neighbor`]): every receive posted, then every send, advanced by the
//! engine's progress like any nonblocking collective (no thread of its own). A block to
//! or from `None` (`MPI_PROC_NULL`) or a recognized failed neighbour moves nothing — that
//! receive block keeps what it held; an unrecognized failure makes the collective err
//! with `RankFailStop` (R17–R21, R38). Blocks a member exchanges with itself are copied.

use std::ops::Range;

use runthrough_engine::Plan;

use crate::comm::Comm;
use crate::topo::Neighborhood;
use crate::{Error, Pod};

impl Neighborhood {
    /// The schedule of an exchange over this neighbourhood at member `me`: send block `k`
    /// is bytes `sends[k]` of the arena, receive block `k` bytes `recvs[k]`. Blocks this
    /// member exchanges with itself are copied in `arena` here (the k-th posted send to
    /// itself meets its k-th receive; unequal lengths are `Truncate`); the others are the
    /// returned plan's, in posting order. Shared by the Rust API and the C interface.
    pub fn schedule(
        &self,
        me: usize,
        sends: &[Range<usize>],
        recvs: &[Range<usize>],
        arena: &mut [u8],
    ) -> Result<Plan, Error> {
        let (plan, own) = self.exchange_plan(me, sends, recvs)?;
        for (s, r) in own {
            arena.copy_within(sends[s].clone(), recvs[r].start);
        }
        Ok(plan)
    }

    /// [`Neighborhood::schedule`] without an arena: the plan (send ranges in one area,
    /// receive ranges in another, as `Engine::start_exchange` takes them), and the
    /// blocks this member exchanges with itself, as (send block, receive block) pairs of
    /// equal lengths for the caller to copy.
    pub fn exchange_plan(
        &self,
        me: usize,
        sends: &[Range<usize>],
        recvs: &[Range<usize>],
    ) -> Result<(Plan, Vec<(usize, usize)>), Error> {
        let to_me = self.send_order.iter().copied().filter(|&i| self.destinations[i] == Some(me));
        let from_me = (0..self.sources.len()).filter(|&i| self.sources[i] == Some(me));
        let own: Vec<(usize, usize)> = to_me.zip(from_me).collect();
        for &(s, r) in &own {
            if sends[s].len() != recvs[r].len() {
                return Err(Error::Truncate { posted: recvs[r].len(), arrived: sends[s].len() });
            }
        }
        let peer = |n: Option<usize>| n.filter(|&x| x != me).map(|x| x as u32);
        let plan = Plan::Neighbor {
            sends: self
                .send_order
                .iter()
                .filter_map(|&i| Some((peer(self.destinations[i])?, sends[i].clone())))
                .collect(),
            recvs: (0..self.sources.len()).filter_map(|i| Some((peer(self.sources[i])?, recvs[i].clone()))).collect(),
        };
        Ok((plan, own))
    }
}

impl Comm {
    /// Which receive blocks of a neighbourhood collective on this communicator get data:
    /// a source that is neither `None` (`MPI_PROC_NULL`) nor a recognized failure (the
    /// schedule skips those; their blocks keep what they held).
    pub fn neighbor_receives(&self, h: &Neighborhood) -> Vec<bool> {
        let failed = self.group_failed().world_ranks();
        let world = self.group().world_ranks();
        let me = self.rank();
        h.sources.iter().map(|s| s.is_some_and(|s| s == me || !failed.contains(&world[s]))).collect()
    }

    /// This member's neighbourhood (an error without a topology).
    fn neighborhood(&self) -> Result<Neighborhood, Error> {
        let t = self.topology().ok_or(Error::InvalidArg("a neighbourhood collective needs a topology"))?;
        t.neighborhood(self.rank())
    }

    /// `MPI_Neighbor_alltoall`: block `k` of `send` goes to destination `k`, block `k` of
    /// `recv` comes from source `k` (blocks of `send.len() / outdegree` and
    /// `recv.len() / indegree` elements).
    pub fn neighbor_alltoall<T: Pod>(&self, send: &[T], recv: &mut [T]) -> Result<(), Error> {
        let r = self.neighborhood().and_then(|h| {
            let (sends, rb) = Self::alltoall_blocks(&h, send.len(), recv.len())?;
            self.exchange(&h, bytemuck::cast_slice(send), sends, rb, recv)
        });
        self.check(r)
    }

    /// `MPI_Neighbor_allgather`: `send` goes to every destination, block `k` of `recv`
    /// comes from source `k`.
    pub fn neighbor_allgather<T: Pod>(&self, send: &[T], recv: &mut [T]) -> Result<(), Error> {
        let r = self.neighborhood().and_then(|h| {
            if recv.len() != send.len() * h.sources.len() {
                return Err(Error::InvalidArg("neighbor_allgather: recv holds one send block a source"));
            }
            let sends = vec![0..send.len(); h.destinations.len()];
            self.exchange(&h, bytemuck::cast_slice(send), sends, send.len(), recv)
        });
        self.check(r)
    }

    /// `MPI_Neighbor_alltoallv`: elements `sdispls[k]..+scounts[k]` of `send` go to
    /// destination `k`; what source `k` sends lands in `recv[rdispls[k]..][..rcounts[k]]`.
    pub fn neighbor_alltoallv<T: Pod>(
        &self,
        send: &[T],
        scounts: &[usize],
        sdispls: &[usize],
        recv: &mut [T],
        rcounts: &[usize],
        rdispls: &[usize],
    ) -> Result<(), Error> {
        let r = self.neighborhood().and_then(|h| {
            let sends = ranges(scounts, sdispls, h.destinations.len(), send.len())?;
            let recvs = ranges(rcounts, rdispls, h.sources.len(), recv.len())?;
            self.exchange_v(&h, bytemuck::cast_slice(send), sends, recvs, recv)
        });
        self.check(r)
    }

    /// `MPI_Neighbor_allgatherv`: `send` goes to every destination; what source `k` sends
    /// lands in `recv[displs[k]..][..counts[k]]`.
    pub fn neighbor_allgatherv<T: Pod>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        displs: &[usize],
    ) -> Result<(), Error> {
        let r = self.neighborhood().and_then(|h| {
            let recvs = ranges(counts, displs, h.sources.len(), recv.len())?;
            let sends = vec![0..send.len(); h.destinations.len()];
            self.exchange_v(&h, bytemuck::cast_slice(send), sends, recvs, recv)
        });
        self.check(r)
    }

    /// Sends elements `sends[k]` of `data` to destination `k` and receives `rb` elements
    /// a source into `recv`, as one schedule.
    fn exchange<T: Pod>(
        &self,
        h: &Neighborhood,
        data: &[u8],
        sends: Vec<std::ops::Range<usize>>,
        rb: usize,
        recv: &mut [T],
    ) -> Result<(), Error> {
        let recvs = (0..h.sources.len()).map(|k| k * rb..(k + 1) * rb).collect();
        self.exchange_v(h, data, sends, recvs, recv)
    }

    /// Sends elements `sends[k]` of `data` to destination `k` and receives elements
    /// `recvs[k]` of `recv` from source `k`, as one schedule (the receive blocks stacked
    /// in the arena after the send data, copied out at the end).
    fn exchange_v<T: Pod>(
        &self,
        h: &Neighborhood,
        data: &[u8],
        sends: Vec<std::ops::Range<usize>>,
        recvs: Vec<std::ops::Range<usize>>,
        recv: &mut [T],
    ) -> Result<(), Error> {
        let started = self.start_exchange::<T>(h, data, sends, recvs, None)?;
        let mut w = self.waiter();
        let (r, arena) = loop {
            if let Some(done) = started.coll.test() {
                break done;
            }
            w.snooze();
        };
        r?;
        started.copy_out(&arena, recv);
        Ok(())
    }

    /// Starts the exchange of [`Comm::exchange_v`] (at a reserved tag, or the next).
    fn start_exchange<T: Pod>(
        &self,
        h: &Neighborhood,
        data: &[u8],
        sends: Vec<std::ops::Range<usize>>,
        recvs: Vec<std::ops::Range<usize>>,
        at: Option<crate::Reserved>,
    ) -> Result<Started, Error> {
        let size = std::mem::size_of::<T>();
        let bytes = |r: &Range<usize>| r.start * size..r.end * size;
        let mut end = data.len();
        let rblocks: Vec<_> = recvs
            .iter()
            .map(|r| {
                let b = end..end + r.len() * size;
                end = b.end;
                b
            })
            .collect();
        let mut arena = data.to_vec();
        arena.resize(end, 0);
        let sblocks: Vec<_> = sends.iter().map(bytes).collect();
        let plan = h.schedule(self.rank(), &sblocks, &rblocks, &mut arena)?;
        let filled = self.neighbor_receives(h);
        let coll = self.start_owned(&plan, arena, None, at)?;
        Ok(Started { coll, recvs: recvs.iter().map(bytes).collect(), rblocks, filled })
    }

    /// The blocks of `MPI_Neighbor_alltoall` over `h`: `send` and `recv` lengths in
    /// equal blocks, one a destination and one a source.
    fn alltoall_blocks(h: &Neighborhood, send: usize, recv: usize) -> Result<(Vec<Range<usize>>, usize), Error> {
        let (nin, nout) = (h.sources.len(), h.destinations.len());
        let sb = send.checked_div(nout).unwrap_or(0);
        let rb = recv.checked_div(nin).unwrap_or(0);
        if sb * nout != send || rb * nin != recv || (nin > 0 && nout > 0 && sb != rb) {
            return Err(Error::InvalidArg("neighbor_alltoall: blocks of unequal sizes"));
        }
        Ok(((0..nout).map(|k| k * sb..(k + 1) * sb).collect(), rb))
    }

    /// Starts `MPI_Ineighbor_alltoall` (the nonblocking [`Comm::neighbor_alltoall`]):
    /// `send` is copied at the call, `recv` is owned by the request until
    /// [`NeighborRequest::wait`] gives it back filled (blocks from `MPI_PROC_NULL` or a
    /// recognized failed source keep what they held). The engine advances it without the
    /// caller; a leaked request leaks its buffers, nothing else.
    pub fn ineighbor_alltoall<T: Pod>(&self, send: &[T], recv: Vec<T>) -> Result<NeighborRequest<'_, T>, Error> {
        self.istart_neighbor(NeighborKind::Alltoall, send, recv, None)
    }

    /// Starts `MPI_Ineighbor_allgather` (the nonblocking [`Comm::neighbor_allgather`]), as
    /// [`Comm::ineighbor_alltoall`].
    pub fn ineighbor_allgather<T: Pod>(&self, send: &[T], recv: Vec<T>) -> Result<NeighborRequest<'_, T>, Error> {
        self.istart_neighbor(NeighborKind::Allgather, send, recv, None)
    }

    /// `MPI_Neighbor_alltoall_init` / `MPI_Neighbor_allgather_init`: a persistent
    /// neighbourhood collective, its tag taken now (persistent collectives match in
    /// initialisation order), started by [`PersistentNeighbor::start`] as often as wanted.
    pub fn neighbor_init(&self, kind: NeighborKind) -> Result<PersistentNeighbor<'_>, Error> {
        self.check(self.neighborhood())?;
        let at = self.reserve_collective()?;
        Ok(PersistentNeighbor { comm: self, kind, at })
    }

    fn istart_neighbor<T: Pod>(
        &self,
        kind: NeighborKind,
        send: &[T],
        recv: Vec<T>,
        at: Option<crate::Reserved>,
    ) -> Result<NeighborRequest<'_, T>, Error> {
        let r = self.neighborhood().and_then(|h| {
            let (sends, recvs) = match kind {
                NeighborKind::Alltoall => {
                    let (sends, rb) = Self::alltoall_blocks(&h, send.len(), recv.len())?;
                    (sends, (0..h.sources.len()).map(|k| k * rb..(k + 1) * rb).collect())
                }
                NeighborKind::Allgather => {
                    if recv.len() != send.len() * h.sources.len() {
                        return Err(Error::InvalidArg("neighbor_allgather: recv holds one send block a source"));
                    }
                    let n = send.len();
                    (vec![0..n; h.destinations.len()], (0..h.sources.len()).map(|k| k * n..(k + 1) * n).collect())
                }
            };
            self.start_exchange::<T>(&h, bytemuck::cast_slice(send), sends, recvs, at)
        });
        let started = self.check(r)?;
        Ok(NeighborRequest { comm: self, started, recv, done: None })
    }
}

/// Which neighbourhood collective a persistent request runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NeighborKind {
    /// `MPI_Neighbor_alltoall`: one block a destination, one a source.
    Alltoall,
    /// `MPI_Neighbor_allgather`: the same block to every destination.
    Allgather,
}

/// A persistent neighbourhood collective ([`Comm::neighbor_init`]).
#[derive(Debug)]
pub struct PersistentNeighbor<'c> {
    comm: &'c Comm,
    kind: NeighborKind,
    at: crate::Reserved,
}

impl<'c> PersistentNeighbor<'c> {
    /// Starts it (`MPI_Start`) with `send` (copied now) and `recv` (owned by the request
    /// until it is waited for); one start at a time, as MPI asks, is the caller's to keep.
    pub fn start<T: Pod>(&self, send: &[T], recv: Vec<T>) -> Result<NeighborRequest<'c, T>, Error> {
        self.comm.istart_neighbor(self.kind, send, recv, Some(self.at))
    }
}

/// A started exchange: its schedule and where its receive blocks go.
#[derive(Debug)]
struct Started {
    coll: crate::OwnedColl,
    /// Byte ranges of the receive blocks in the program's buffer, and in the arena.
    recvs: Vec<Range<usize>>,
    rblocks: Vec<Range<usize>>,
    /// Which receive blocks get data (not `MPI_PROC_NULL`, not a recognized failure).
    filled: Vec<bool>,
}

impl Started {
    /// Copies the blocks that received from the ended schedule's `arena` into `recv`.
    fn copy_out<T: Pod>(&self, arena: &[u8], recv: &mut [T]) {
        let out: &mut [u8] = bytemuck::cast_slice_mut(recv);
        for k in (0..self.recvs.len()).filter(|&k| self.filled[k]) {
            out[self.recvs[k].clone()].copy_from_slice(&arena[self.rblocks[k].clone()]);
        }
    }
}

/// A nonblocking neighbourhood collective ([`Comm::ineighbor_alltoall`],
/// [`PersistentNeighbor::start`]) that owns its receive buffer until it completes.
#[derive(Debug)]
#[must_use = "a neighbourhood collective's receive buffer comes back from `wait`"]
pub struct NeighborRequest<'c, T: Pod> {
    comm: &'c Comm,
    started: Started,
    recv: Vec<T>,
    /// The outcome and arena, once taken from the schedule.
    done: Option<(Result<(), Error>, Vec<u8>)>,
}

impl<T: Pod> NeighborRequest<'_, T> {
    /// Whether it ended (progressing the engine once); `wait` then returns at once.
    pub fn test(&mut self) -> bool {
        if self.done.is_none() {
            self.done = self.started.coll.test();
        }
        self.done.is_some()
    }

    /// Waits for the end; the receive buffer, filled, or the collective's error (through
    /// the communicator's error mode).
    pub fn wait(self) -> Result<Vec<T>, Error> {
        let NeighborRequest { comm, started, mut recv, done } = self;
        let (r, arena) = match done {
            Some(d) => d,
            None => {
                let mut w = comm.waiter();
                loop {
                    if let Some(d) = started.coll.test() {
                        break d;
                    }
                    w.snooze();
                }
            }
        };
        comm.check(r)?;
        started.copy_out(&arena, &mut recv);
        Ok(recv)
    }
}

/// The element ranges of `n` blocks given by counts and displacements, each inside a
/// buffer of `len` elements.
fn ranges(counts: &[usize], displs: &[usize], n: usize, len: usize) -> Result<Vec<std::ops::Range<usize>>, Error> {
    if counts.len() != n || displs.len() != n {
        return Err(Error::InvalidArg("neighbourhood collective: one count and displacement a neighbour"));
    }
    counts
        .iter()
        .zip(displs)
        .map(|(&c, &d)| {
            let end = d.checked_add(c).filter(|&e| e <= len);
            end.map(|e| d..e).ok_or(Error::InvalidArg("neighbourhood collective: a block past its buffer"))
        })
        .collect()
}
