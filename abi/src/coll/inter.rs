//! Collectives on intercommunicators (MPI-4.1 §6.2.2): the roots' `MPI_ROOT` and
//! `MPI_PROC_NULL`, counts of the remote group, packing — laid out here as one exchange
//! with remote members (the facade's `InterComm::plan`, an engine schedule on the
//! inter-communicator's inner bridge, no thread of its own) and a local finish (unpack,
//! or fold the remote contributions in remote rank order). The blocking forms start the
//! schedule and wait; the nonblocking ones return a request the engine advances, so an
//! `MPI_Ibcast` on an intercommunicator does not wait for the other group; the persistent
//! ones take their tag at initialisation. A remote member recognised failed is skipped:
//! its block keeps what it held, reductions leave it out.

use std::ffi::c_void;
use std::ops::Range;
use std::sync::Arc;

use runthrough::{InterComm, InterRoot};

use super::owned::Finish;
use super::{code, counts, is_in_place, scattered_counts, Args, Coll, Held, R};
use crate::commobj::CommObj;
use crate::consts::*;
use crate::dtype::Dtype;
use crate::req::Active;
use crate::types::{MPI_Status, SendPtr};

/// The caller's role from a rooted collective's `root` argument.
fn role(ic: &InterComm, root: i32) -> Result<InterRoot, i32> {
    match root {
        MPI_ROOT => Ok(InterRoot::Root),
        MPI_PROC_NULL => Ok(InterRoot::Null),
        r if r >= 0 && (r as usize) < ic.remote_size() => Ok(InterRoot::Remote(r as usize)),
        _ => Err(MPI_ERR_ROOT),
    }
}

/// One collective laid out: sends of arena ranges to remote ranks, receives from them,
/// the arena, and what to do with the arena once the exchange ended well.
struct Layout {
    sends: Vec<(usize, Range<usize>)>,
    recvs: Vec<(usize, Range<usize>)>,
    arena: Vec<u8>,
    finish: Finish,
}

impl Layout {
    fn new(sends: Vec<(usize, Range<usize>)>, recvs: Vec<(usize, Range<usize>)>, arena: Vec<u8>) -> Self {
        Layout { sends, recvs, arena, finish: Box::new(|_| {}) }
    }

    fn then(mut self, f: impl FnOnce(&[u8]) + Send + 'static) -> Self {
        self.finish = Box::new(f);
        self
    }
}

/// Packs `count` elements of `t` from the program's `buf` onto the end of `out`.
///
/// # Safety
/// `buf` holds them (MPI contract).
unsafe fn pack(buf: *const c_void, count: usize, t: &Dtype, out: &mut Vec<u8>) {
    if count > 0 {
        // SAFETY: function contract.
        unsafe { crate::dtype::pack_into(buf.cast(), count, t, out) };
    }
}

/// Unpacks `count` elements of `t` from `from` into the program's `buf`.
///
/// # Safety
/// `buf` is the program's receive buffer, valid until the request completes.
unsafe fn unpack(from: &[u8], buf: SendPtr, count: usize, t: &Dtype) {
    if count > 0 {
        // SAFETY: function contract.
        unsafe { crate::dtype::unpack_from(from, buf.0.cast(), count, t) };
    }
}

/// Remote blocks `(byte displacement in rbuf, count, type)`, one a remote member,
/// packed one after the other from byte `at`: the byte ranges, and a finish that unpacks
/// those that arrived into `rbuf` at their displacements.
fn gathered(ic: &InterComm, blocks: Vec<(isize, usize, Arc<Dtype>)>, rbuf: SendPtr, at: usize) -> Blocks {
    let ranges = super::owned::stack(blocks.iter().map(|(_, c, t)| c * t.size), at);
    let ic = ic.clone();
    let rs = ranges.clone();
    let finish = move |arena: &[u8]| {
        let rbuf = rbuf;
        let arrived = ic.remote_receives();
        for (j, (r, (off, count, t))) in rs.iter().zip(&blocks).enumerate() {
            if arrived.get(j).copied().unwrap_or(false) {
                // SAFETY: the program's receive buffer, block j at its displacement
                // (MPI contract), valid until the request completes.
                unsafe { unpack(&arena[r.clone()], SendPtr(rbuf.0.cast::<u8>().offset(*off).cast()), *count, t) };
            }
        }
    };
    (ranges, Box::new(finish))
}

/// [`gathered`]'s blocks from counts and element displacements of one type.
fn typed(cnt: Vec<usize>, dsp: Vec<usize>, t: &Arc<Dtype>) -> Vec<(isize, usize, Arc<Dtype>)> {
    cnt.into_iter().zip(dsp).map(|(c, d)| (d as isize * t.extent(), c, t.clone())).collect()
}

type Blocks = (Vec<Range<usize>>, Finish);

/// Per-remote-member counts and displacements: `count` each at consecutive blocks, or
/// the program's arrays.
///
/// # Safety
/// Without `fixed`, the arrays hold `n` entries (MPI contract).
unsafe fn remote_counts(
    n: usize,
    fixed: Option<usize>,
    cnts: SendPtr,
    displs: SendPtr,
    wide: bool,
) -> (Vec<usize>, Vec<usize>) {
    match fixed {
        Some(c) => (vec![c; n], (0..n).map(|j| j * c).collect()),
        // SAFETY: function contract.
        None => unsafe { (counts(cnts.0, n, wide), counts(displs.0, n, wide)) },
    }
}

/// Packs the program's send blocks `cnt`/`dsp` of `t` into `arena`, one after the
/// other; their byte ranges.
///
/// # Safety
/// `sbuf` holds the blocks (MPI contract).
unsafe fn pack_blocks(
    sbuf: SendPtr,
    cnt: &[usize],
    dsp: &[usize],
    t: &Dtype,
    arena: &mut Vec<u8>,
) -> Vec<Range<usize>> {
    cnt.iter()
        .zip(dsp)
        .map(|(&c, &d)| {
            let at = arena.len();
            // SAFETY: the program's send buffer, block at its displacement (contract).
            unsafe { pack(sbuf.0.cast::<u8>().offset(d as isize * t.extent()).cast(), c, t, arena) };
            at..arena.len()
        })
        .collect()
}

fn to_all(ranges: Vec<Range<usize>>) -> Vec<(usize, Range<usize>)> {
    ranges.into_iter().enumerate().collect()
}

/// Lays collective `k` on intercommunicator `ic` out.
///
/// # Safety
/// The buffers and arrays in `a` are the program's, valid now; the buffers stay valid
/// until the request completes (MPI contract).
unsafe fn lay_out(c: &CommObj, ic: &InterComm, k: Coll, a: &Args, held: &Held) -> Result<Layout, i32> {
    if is_in_place(a.sbuf.0) || is_in_place(a.rbuf.0) && !matches!(k, Coll::Barrier | Coll::Bcast) {
        // MPI_IN_PLACE has no meaning on an intercommunicator (MPI-4.1 6.2.3).
        return Err(MPI_ERR_ARG);
    }
    let nr = ic.remote_size();
    // Null roots take part in an empty schedule: it keeps the sequences in step.
    let idle = || Layout::new(Vec::new(), Vec::new(), Vec::new());
    let mut arena = Vec::new();
    Ok(match k {
        Coll::Barrier => {
            let all = || (0..nr).map(|j| (j, 0..0)).collect::<Vec<_>>();
            Layout::new(all(), all(), Vec::new())
        }
        Coll::Bcast => match role(ic, a.root)? {
            InterRoot::Null => idle(),
            InterRoot::Root => {
                let t = held.ty(a.stype)?;
                // SAFETY: the program's buffer.
                unsafe { pack(a.sbuf.0, a.scount, &t, &mut arena) };
                let len = arena.len();
                Layout::new((0..nr).map(|j| (j, 0..len)).collect(), Vec::new(), arena)
            }
            InterRoot::Remote(r) => {
                let t = held.ty(a.stype)?;
                let len = a.scount * t.size;
                let (buf, count) = (a.sbuf, a.scount);
                // SAFETY (closure): the program's buffer, valid until completion.
                Layout::new(Vec::new(), vec![(r, 0..len)], vec![0; len])
                    .then(move |arena| unsafe { unpack(arena, buf, count, &t) })
            }
        },
        Coll::Gather | Coll::Gatherv => match role(ic, a.root)? {
            InterRoot::Null => idle(),
            InterRoot::Root => {
                let rt = held.ty(a.rtype)?;
                let fixed = matches!(k, Coll::Gather).then_some(a.rcount);
                // SAFETY: remote-size counts and displacements at the root.
                let (cnt, dsp) = unsafe { remote_counts(nr, fixed, a.rcounts, a.rdispls, a.wide) };
                let (ranges, finish) = gathered(ic, typed(cnt, dsp, &rt), a.rbuf, 0);
                let len = ranges.last().map_or(0, |r| r.end);
                Layout { sends: Vec::new(), recvs: to_all(ranges), arena: vec![0; len], finish }
            }
            InterRoot::Remote(r) => {
                let st = held.ty(a.stype)?;
                // SAFETY: the program's send buffer.
                unsafe { pack(a.sbuf.0, a.scount, &st, &mut arena) };
                let len = arena.len();
                Layout::new(vec![(r, 0..len)], Vec::new(), arena)
            }
        },
        Coll::Scatter | Coll::Scatterv => match role(ic, a.root)? {
            InterRoot::Null => idle(),
            InterRoot::Root => {
                let st = held.ty(a.stype)?;
                let fixed = matches!(k, Coll::Scatter).then_some(a.scount);
                // SAFETY: remote-size counts and displacements at the root.
                let (cnt, dsp) = unsafe { remote_counts(nr, fixed, a.scounts, a.sdispls, a.wide) };
                // SAFETY: the program's send buffer.
                let ranges = unsafe { pack_blocks(a.sbuf, &cnt, &dsp, &st, &mut arena) };
                Layout::new(to_all(ranges), Vec::new(), arena)
            }
            InterRoot::Remote(r) => {
                let rt = held.ty(a.rtype)?;
                let len = a.rcount * rt.size;
                let (buf, count) = (a.rbuf, a.rcount);
                // SAFETY (closure): the program's buffer, valid until completion.
                Layout::new(Vec::new(), vec![(r, 0..len)], vec![0; len])
                    .then(move |arena| unsafe { unpack(arena, buf, count, &rt) })
            }
        },
        Coll::Allgather | Coll::Allgatherv => {
            let (st, rt) = (held.ty(a.stype)?, held.ty(a.rtype)?);
            // SAFETY: the program's send buffer.
            unsafe { pack(a.sbuf.0, a.scount, &st, &mut arena) };
            let at = arena.len();
            let fixed = matches!(k, Coll::Allgather).then_some(a.rcount);
            // SAFETY: remote-size counts and displacements.
            let (cnt, dsp) = unsafe { remote_counts(nr, fixed, a.rcounts, a.rdispls, a.wide) };
            let (ranges, finish) = gathered(ic, typed(cnt, dsp, &rt), a.rbuf, at);
            arena.resize(ranges.last().map_or(at, |r| r.end), 0);
            Layout { sends: (0..nr).map(|j| (j, 0..at)).collect(), recvs: to_all(ranges), arena, finish }
        }
        Coll::Alltoall | Coll::Alltoallv => {
            let (st, rt) = (held.ty(a.stype)?, held.ty(a.rtype)?);
            let (sfixed, rfixed) =
                if matches!(k, Coll::Alltoall) { (Some(a.scount), Some(a.rcount)) } else { (None, None) };
            // SAFETY: remote-size counts and displacements.
            let ((sc, sd), (rc, rd)) = unsafe {
                (
                    remote_counts(nr, sfixed, a.scounts, a.sdispls, a.wide),
                    remote_counts(nr, rfixed, a.rcounts, a.rdispls, a.wide),
                )
            };
            // SAFETY: the program's send buffer.
            let sends = unsafe { pack_blocks(a.sbuf, &sc, &sd, &st, &mut arena) };
            let (ranges, finish) = gathered(ic, typed(rc, rd, &rt), a.rbuf, arena.len());
            arena.resize(ranges.last().map_or(arena.len(), |r| r.end), 0);
            Layout { sends: to_all(sends), recvs: to_all(ranges), arena, finish }
        }
        Coll::Reduce | Coll::Allreduce | Coll::ReduceScatter | Coll::ReduceScatterBlock => {
            let who = if matches!(k, Coll::Reduce) { role(ic, a.root)? } else { InterRoot::Remote(0) };
            if who == InterRoot::Null {
                return Ok(idle());
            }
            let t = held.ty(a.rtype)?;
            let comb = held.combine(a.op, a.rtype, &t)?;
            let me = c.user_rank();
            let cnt = match k {
                // SAFETY: local-size counts (MPI contract).
                Coll::ReduceScatter | Coll::ReduceScatterBlock => Some(unsafe { scattered_counts(k, a, ic.size()) }),
                _ => None,
            };
            let total = cnt.as_ref().map_or(a.rcount, |c| c.iter().sum());
            if who != InterRoot::Root {
                // SAFETY: the program's send buffer of `total` elements.
                unsafe { pack(a.sbuf.0, total, &t, &mut arena) };
            }
            let blk = total * t.size;
            match (k, who) {
                (Coll::Reduce, InterRoot::Remote(r)) => return Ok(Layout::new(vec![(r, 0..blk)], Vec::new(), arena)),
                (Coll::Reduce, _) => arena.resize(nr * blk, 0),
                _ => arena.resize((nr + 1) * blk, 0),
            }
            // Where the remote vectors land, and which part of the result is this member's.
            let at = if matches!(k, Coll::Reduce) { 0 } else { blk };
            let (from, n) = match &cnt {
                Some(c) => (c[..me].iter().sum::<usize>() * t.size, c[me]),
                None => (0, a.rcount),
            };
            let sends = if matches!(k, Coll::Reduce) { Vec::new() } else { (0..nr).map(|j| (j, 0..blk)).collect() };
            let recvs = (0..nr).map(|j| (j, at + j * blk..at + (j + 1) * blk)).collect();
            let (ic, rbuf) = (ic.clone(), a.rbuf);
            Layout::new(sends, recvs, arena).then(move |arena| {
                // With no remote contribution a reduce-scatter keeps this member's own.
                let mut acc = arena[..blk.min(at)].to_vec();
                acc.resize(blk, 0);
                let f = |x: &mut [u8], y: &[u8]| comb.apply(x, y);
                if ic.fold_remote::<u8>(&arena[at..], blk, &mut acc, &f) || cnt.is_some() {
                    // SAFETY: the program's receive buffer of `n` elements.
                    unsafe { unpack(&acc[from..from + n * t.size], rbuf, n, &t) };
                }
            })
        }
        Coll::Scan | Coll::Exscan => return Err(MPI_ERR_COMM),
        Coll::NeighborAllgather | Coll::NeighborAllgatherv | Coll::NeighborAlltoall | Coll::NeighborAlltoallv => {
            return Err(MPI_ERR_TOPOLOGY)
        }
    })
}

/// Starts collective `k` on intercommunicator `ic` (at a tag reserved by a persistent
/// collective's initialisation, or the next one): the request's activity, which the
/// engine advances.
///
/// # Safety
/// As [`lay_out`].
pub(super) unsafe fn start(
    c: &CommObj,
    ic: &InterComm,
    k: Coll,
    a: &Args,
    held: &Held,
    at: Option<runthrough::Reserved>,
) -> Result<Active, i32> {
    // SAFETY: forwarded (function contract).
    let l = unsafe { lay_out(c, ic, k, a, held) }?;
    launch(ic, l, at)
}

/// Starts `MPI_Alltoallw` `w` on intercommunicator `ic`, as [`start`].
///
/// # Safety
/// The program's buffers hold `w`'s blocks and stay valid until the request completes.
pub(super) unsafe fn start_alltoallw(
    ic: &InterComm,
    w: &super::Alltoallw,
    at: Option<runthrough::Reserved>,
) -> Result<Active, i32> {
    let n = w.sc.len();
    let mut arena = Vec::new();
    let sends = (0..n)
        .map(|i| {
            let from = arena.len();
            // SAFETY: the program's send buffer, block i at a byte displacement.
            unsafe { pack(w.sbuf.0.cast::<u8>().add(w.sd[i]).cast(), w.sc[i], &w.st[i], &mut arena) };
            (i, from..arena.len())
        })
        .collect();
    let blocks = (0..n).map(|i| (w.rd[i] as isize, w.rc[i], w.rt[i].clone())).collect();
    let (ranges, finish) = gathered(ic, blocks, w.rbuf, arena.len());
    arena.resize(ranges.last().map_or(arena.len(), |r| r.end), 0);
    let l = Layout { sends, recvs: to_all(ranges), arena, finish };
    launch(ic, l, at)
}

/// Starts laid-out collective `l` on `ic`'s inner bridge.
fn launch(ic: &InterComm, l: Layout, at: Option<runthrough::Reserved>) -> Result<Active, i32> {
    let Layout { sends, recvs, arena, finish } = l;
    let coll = ic.settle(ic.plan(sends, recvs).and_then(|plan| ic.start_plan_at(&plan, arena, at))).map_err(code)?;
    let ic = ic.clone();
    let mut finish = Some(finish);
    Ok(Active::Polled(Box::new(move || {
        let (r, arena) = coll.test()?;
        let err = match ic.settle(r) {
            Ok(()) => {
                if let Some(f) = finish.take() {
                    f(&arena);
                }
                MPI_SUCCESS
            }
            Err(e) => code(e),
        };
        Some((MPI_Status::empty(), err))
    })))
}

/// Runs collective `k` on intercommunicator `ic` to its end.
///
/// # Safety
/// The buffers and arrays in `a` are the program's, valid for the call (MPI contract).
pub(super) unsafe fn run(c: &CommObj, ic: &InterComm, k: Coll, a: &Args, held: &Held) -> R {
    // SAFETY: forwarded; waited for before returning.
    let mut act = unsafe { start(c, ic, k, a, held, None) }?;
    let mut w = crate::req::waiter();
    loop {
        if let Some((_, err)) = crate::req::poll_active(&mut act) {
            return if err == MPI_SUCCESS { Ok(()) } else { Err(err) };
        }
        w.snooze();
    }
}
