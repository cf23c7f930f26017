//! Neighbourhood collectives (MPI-4.1 8.6): `MPI_Neighbor_allgather(v)` and
//! `MPI_Neighbor_alltoall(v)`, blocking, nonblocking and persistent, as an engine
//! schedule like every nonblocking collective here (`owned.rs`): the send blocks packed
//! into the arena, one round that posts every receive then every send
//! ([`Plan::Neighbor`](runthrough::Plan)), the receive blocks unpacked at the end.
//!
//! The neighbourhood is the communicator's topology's
//! ([`runthrough::Topology::neighborhood`]): a grid's neighbours below and above in each
//! dimension, a graph's edges, a distributed graph's sources and destinations. A block to
//! or from `MPI_PROC_NULL` moves nothing (that receive block is left as it was); a
//! neighbour that failed and was recognized is skipped the same way (R38: the collective
//! follows R17–R21, so an unrecognized failure makes it err); blocks a member exchanges
//! with itself are copied in the arena, paired in posting order.

use std::ffi::{c_int, c_void};
use std::ops::Range;
use std::sync::Arc;

use runthrough::Neighborhood;

use super::owned::{stack, start_prepared, Direct, Finish, Prepared};
use super::{counts, Args, Coll, Held};
use crate::commobj::CommObj;
use crate::consts::*;
use crate::dtype::Dtype;
use crate::raise::raise_on;
use crate::types::{Handle, MPI_Aint, MPI_Count, SendPtr};

/// The neighbourhood of this member of `c`; `MPI_ERR_TOPOLOGY` without a topology.
pub(super) fn hood(c: &CommObj) -> Result<&Neighborhood, c_int> {
    let h = c.hood.get_or_init(|| c.comm.topology().and_then(|t| t.neighborhood(c.rank).ok()));
    h.as_ref().ok_or(MPI_ERR_TOPOLOGY)
}

/// Counts and byte offsets of `n` blocks: `count` elements each, one after the other
/// (`same`: all at offset 0), or from the program's count and displacement arrays.
///
/// # Safety
/// With arrays, `cnts` and `displs` hold `n` entries (MPI contract).
unsafe fn blocks(
    n: usize,
    fixed: Option<(usize, bool)>,
    cnts: *mut std::ffi::c_void,
    displs: *mut std::ffi::c_void,
    wide: bool,
    extent: isize,
) -> Vec<(usize, isize)> {
    match fixed {
        Some((count, true)) => vec![(count, 0); n],
        Some((count, false)) => (0..n).map(|i| (count, (i * count) as isize * extent)).collect(),
        None => {
            // SAFETY: n entries each (function contract).
            let (c, d) = unsafe { (counts(cnts, n, wide), counts(displs, n, wide)) };
            c.into_iter().zip(d).map(|(c, d)| (c, d as isize * extent)).collect()
        }
    }
}

/// Lays neighbourhood collective `k` out for the engine.
///
/// # Safety
/// The buffers and arrays of `a` are the program's, valid now; the buffers stay valid
/// until the request completes (MPI contract).
pub(super) unsafe fn prepare(c: &CommObj, k: Coll, a: &Args, held: &Held) -> Result<Prepared, c_int> {
    if super::is_in_place(a.sbuf.0) {
        return Err(MPI_ERR_BUFFER);
    }
    let h = hood(c)?;
    let (nin, nout) = (h.sources.len(), h.destinations.len());
    let (st, rt) = (held.ty(a.stype)?, held.ty(a.rtype)?);
    let gather = matches!(k, Coll::NeighborAllgather | Coll::NeighborAllgatherv);
    let sfixed = match k {
        Coll::NeighborAlltoallv => None,
        _ => Some((a.scount, gather)),
    };
    let rfixed = match k {
        Coll::NeighborAllgather | Coll::NeighborAlltoall => Some((a.rcount, false)),
        _ => None,
    };
    // SAFETY: the program's arrays: outdegree send entries, indegree receive entries.
    let (sends, recvs) = unsafe {
        (
            blocks(nout, sfixed, a.scounts.0, a.sdispls.0, a.wide, st.extent()),
            blocks(nin, rfixed, a.rcounts.0, a.rdispls.0, a.wide, rt.extent()),
        )
    };
    let sends = sends.into_iter().map(|(c, o)| (c, o, st.clone())).collect();
    let recvs = recvs.into_iter().map(|(c, o)| (c, o, rt.clone())).collect();
    // SAFETY: forwarded (function contract).
    unsafe { lay_out(c, h, Blocks { sbuf: a.sbuf, rbuf: a.rbuf, sends, recvs, gather }) }
}

/// A neighbourhood collective's blocks: count, byte offset and datatype of each, in the
/// program's buffers.
struct Blocks {
    sbuf: SendPtr,
    rbuf: SendPtr,
    sends: Vec<(usize, isize, Arc<Dtype>)>,
    recvs: Vec<(usize, isize, Arc<Dtype>)>,
    /// One send block for every destination (the allgathers).
    gather: bool,
}

/// The arena, plan and unpacking of the exchange of `b` over neighbourhood `h`.
///
/// # Safety
/// The program's buffers hold the blocks (MPI contract) and stay valid until the request
/// completes.
unsafe fn lay_out(c: &CommObj, h: &Neighborhood, b: Blocks) -> Result<Prepared, c_int> {
    let (nin, nout) = (h.sources.len(), h.destinations.len());
    if b.sends.len() != nout || b.recvs.len() != nin {
        return Err(MPI_ERR_ARG);
    }
    // SAFETY: forwarded (function contract).
    if let Some(p) = unsafe { direct(c, h, &b) }? {
        return Ok(p);
    }
    let Blocks { sbuf, rbuf, sends, recvs, gather } = b;
    let mut arena = Vec::new();
    let sblocks: Vec<Range<usize>> = if let (true, Some((count, _, t))) = (gather, sends.first()) {
        // One block, sent to every destination.
        // SAFETY: the program's send buffer (function contract).
        unsafe { crate::dtype::pack_into(sbuf.0.cast(), *count, t, &mut arena) };
        vec![0..arena.len(); nout]
    } else {
        for (count, off, t) in &sends {
            // SAFETY: the program's send buffer, block at its displacement (contract).
            unsafe { crate::dtype::pack_into(sbuf.0.cast::<u8>().offset(*off), *count, t, &mut arena) };
        }
        stack(sends.iter().map(|s| s.0 * s.2.size), 0)
    };
    let rblocks = stack(recvs.iter().map(|r| r.0 * r.2.size), arena.len());
    arena.resize(rblocks.last().map_or(arena.len(), |b| b.end), 0);
    let plan = h.schedule(c.rank, &sblocks, &rblocks, &mut arena).map_err(super::code)?;
    let filled = c.comm.neighbor_receives(h);
    let finish: Finish = Box::new(move |arena: &[u8]| {
        let rbuf = rbuf;
        for (i, (b, (count, off, t))) in rblocks.iter().zip(&recvs).enumerate() {
            if filled[i] && *count > 0 {
                // SAFETY: the program's receive buffer, valid until the request completes
                // (MPI contract); block i at its displacement.
                unsafe { crate::dtype::unpack_from(&arena[b.clone()], rbuf.0.cast::<u8>().offset(*off), *count, t) };
            }
        }
    });
    Ok(Prepared { plan, arena, op: None, finish, direct: None })
}

/// The byte range of each block `(count, offset, type)` relative to the lowest, and
/// the address of that lowest byte: the blocks as one area of the program's buffer at
/// `buf`. `None` unless every type is contiguous.
fn area(buf: SendPtr, blocks: &[(usize, isize, Arc<Dtype>)]) -> Option<(SendPtr, usize, Vec<Range<usize>>)> {
    if !blocks.iter().all(|b| b.2.contiguous()) {
        return None;
    }
    let low = blocks.iter().map(|b| b.1).min().unwrap_or(0);
    let ranges: Vec<Range<usize>> =
        blocks.iter().map(|(n, off, t)| (off - low) as usize..(off - low) as usize + n * t.size).collect();
    let len = ranges.iter().map(|r| r.end).max().unwrap_or(0);
    Some((SendPtr(buf.0.cast::<u8>().wrapping_offset(low).cast()), len, ranges))
}

/// Whether a receive block (ranges `recv` from address `ra`) overlaps another
/// receive block or a send block (ranges `send` from `sa`); send blocks may overlap
/// each other (an allgather sends one block to everyone). Empty blocks overlap nothing.
fn clash(ra: usize, recv: &[Range<usize>], sa: usize, send: &[Range<usize>]) -> bool {
    let abs = |p: usize, v: &[Range<usize>], is_recv: bool| {
        v.iter().filter(|r| !r.is_empty()).map(move |r| (p + r.start, p + r.end, is_recv)).collect::<Vec<_>>()
    };
    let mut all = abs(ra, recv, true);
    all.extend(abs(sa, send, false));
    all.sort_unstable();
    // Sorted by start: a block overlaps an earlier one exactly when it starts before the
    // furthest end seen so far of that kind.
    let (mut recv_end, mut send_end) = (0, 0);
    for (start, end, is_recv) in all {
        if start < recv_end || is_recv && start < send_end {
            return true;
        }
        if is_recv {
            recv_end = recv_end.max(end);
        } else {
            send_end = send_end.max(end);
        }
    }
    false
}

/// The exchange of `b` straight between the program's buffers (a block moves once, by
/// the transport; a block to itself is one copy, done here), where every block's type
/// is contiguous and no receive block overlaps another or a send block; `None` where
/// the arena must be used.
///
/// # Safety
/// As [`lay_out`].
unsafe fn direct(c: &CommObj, h: &Neighborhood, b: &Blocks) -> Result<Option<Prepared>, c_int> {
    let sends = if b.gather { &b.sends[..b.sends.len().min(1)] } else { &b.sends[..] };
    let (Some((sp, slen, sr)), Some((rp, rlen, rr))) = (area(b.sbuf, sends), area(b.rbuf, &b.recvs)) else {
        return Ok(None);
    };
    let sr: Vec<Range<usize>> = if b.gather { vec![sr.first().cloned().unwrap_or(0..0); b.sends.len()] } else { sr };
    let (sa, ra) = (sp.0 as usize, rp.0 as usize);
    if clash(ra, &rr, sa, &sr) {
        return Ok(None);
    }
    let (plan, own) = h.exchange_plan(c.rank, &sr, &rr).map_err(super::code)?;
    for (s, r) in own {
        let n = sr[s].len();
        if n > 0 {
            // SAFETY: the program's buffers hold both blocks (MPI contract), which do not
            // overlap (checked above).
            unsafe {
                std::ptr::copy_nonoverlapping(sp.0.cast::<u8>().add(sr[s].start), rp.0.cast::<u8>().add(rr[r].start), n)
            };
        }
    }
    let direct = Some(Direct { send: (sp, slen), recv: (rp, rlen) });
    Ok(Some(Prepared { plan, arena: Vec::new(), op: None, finish: Box::new(|_| {}), direct }))
}

/// The blocking forms: the schedule started here and waited for (the waits of the
/// nonblocking form, snoozing between polls).
///
/// # Safety
/// As [`prepare`], the buffers valid for the call.
pub(super) unsafe fn run(c: &Arc<CommObj>, k: Coll, a: &Args, held: &Held) -> Result<(), c_int> {
    // SAFETY: forwarded (function contract); waited for before returning.
    let p = unsafe { prepare(c, k, a, held) }?;
    let mut act = start_prepared(c, p, None)?;
    let mut w = crate::req::waiter();
    loop {
        if let Some((_, err)) = crate::req::poll_active(&mut act) {
            return if err == MPI_SUCCESS { Ok(()) } else { Err(err) };
        }
        w.snooze();
    }
}

/// `MPI_Neighbor_alltoallw`'s arguments: per-neighbour counts (`int`, or `MPI_Count` for
/// the `_c` forms), byte displacements (`MPI_Aint` in every form) and datatypes.
#[derive(Clone, Copy)]
struct WArgs {
    sbuf: SendPtr,
    scounts: SendPtr,
    sdispls: SendPtr,
    stypes: *const Handle,
    rbuf: SendPtr,
    rcounts: SendPtr,
    rdispls: SendPtr,
    rtypes: *const Handle,
    wide: bool,
}

/// The blocks of `n` neighbours: counts, byte displacements, datatypes.
///
/// # Safety
/// `n` entries in each array (MPI contract).
unsafe fn w_blocks(
    n: usize,
    cnts: SendPtr,
    displs: SendPtr,
    types: *const Handle,
    wide: bool,
) -> Result<Vec<(usize, isize, Arc<Dtype>)>, c_int> {
    if n > 0 && (cnts.0.is_null() || displs.0.is_null() || types.is_null()) {
        return Err(MPI_ERR_ARG);
    }
    // SAFETY: n counts (function contract).
    let c = unsafe { counts(cnts.0, n, wide) };
    (0..n)
        .map(|i| {
            // SAFETY: n displacements (always MPI_Aint) and datatypes (function contract).
            let (d, t) = unsafe { (*displs.0.cast::<isize>().add(i), *types.add(i)) };
            let t = crate::dtype::lookup(t).ok_or(MPI_ERR_TYPE)?.into_arc();
            Ok((c[i], d, t))
        })
        .collect()
}

/// `MPI_Neighbor_alltoallw` laid out: arrays read now, types held.
///
/// # Safety
/// As [`prepare`].
unsafe fn prepare_w(c: &CommObj, w: &WArgs) -> Result<Prepared, c_int> {
    if super::is_in_place(w.sbuf.0) {
        return Err(MPI_ERR_BUFFER);
    }
    let h = hood(c)?;
    // SAFETY: outdegree and indegree entries (function contract).
    let (sends, recvs) = unsafe {
        (
            w_blocks(h.destinations.len(), w.scounts, w.sdispls, w.stypes, w.wide)?,
            w_blocks(h.sources.len(), w.rcounts, w.rdispls, w.rtypes, w.wide)?,
        )
    };
    // SAFETY: forwarded (function contract).
    unsafe { lay_out(c, h, Blocks { sbuf: w.sbuf, rbuf: w.rbuf, sends, recvs, gather: false }) }
}

/// `MPI_Neighbor_alltoallw` in any form (`request` null: blocking; `persistent`: an
/// `_init`).
///
/// # Safety
/// The program's buffers and arrays (MPI contract).
unsafe fn alltoallw(comm: Handle, w: WArgs, request: *mut Handle, persistent: bool) -> c_int {
    let c = match crate::rt::lookup(comm) {
        Ok(c) => c,
        Err(e) => return raise_on(MPI_COMM_WORLD, e),
    };
    if persistent {
        // The arrays are read at each start: keep copies (the program may free them).
        let h = match hood(&c) {
            Ok(h) => h.clone(),
            Err(e) => return raise_on(comm, e),
        };
        // SAFETY: the program's arrays, read now (function contract).
        let blocks = unsafe {
            (
                w_blocks(h.destinations.len(), w.scounts, w.sdispls, w.stypes, w.wide),
                w_blocks(h.sources.len(), w.rcounts, w.rdispls, w.rtypes, w.wide),
            )
        };
        let (sends, recvs) = match blocks {
            (Ok(s), Ok(r)) => (s, r),
            (Err(e), _) | (_, Err(e)) => return raise_on(comm, e),
        };
        let at = match c.comm.reserve_collective() {
            Ok(t) => t,
            Err(e) => return raise_on(comm, super::code(e)),
        };
        let (sbuf, rbuf) = (w.sbuf, w.rbuf);
        let starter = Box::new(move || {
            let b = Blocks { sbuf, rbuf, sends: sends.clone(), recvs: recvs.clone(), gather: false };
            // SAFETY: the program keeps the buffers valid while the request lives.
            let p = unsafe { lay_out(&c, &h, b) }?;
            start_prepared(&c, p, Some(at))
        });
        // SAFETY: output argument (function contract).
        unsafe { *request = crate::req::persistent(comm, starter) };
        return MPI_SUCCESS;
    }
    // SAFETY: forwarded (function contract).
    let act = unsafe { prepare_w(&c, &w) }.and_then(|p| start_prepared(&c, p, None));
    let mut act = match act {
        Ok(a) => a,
        Err(e) => return raise_on(comm, e),
    };
    if !request.is_null() {
        // SAFETY: output argument (function contract).
        unsafe { *request = crate::req::new_active(comm, act) };
        return MPI_SUCCESS;
    }
    let mut wt = crate::req::waiter();
    loop {
        if let Some((_, err)) = crate::req::poll_active(&mut act) {
            return if err == MPI_SUCCESS { MPI_SUCCESS } else { raise_on(comm, err) };
        }
        wt.snooze();
    }
}

/// [`WArgs`] of the program's arguments.
#[allow(clippy::too_many_arguments)]
fn wargs<C>(
    sendbuf: *const c_void,
    sendcounts: *const C,
    sdispls: *const MPI_Aint,
    sendtypes: *const Handle,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    rdispls: *const MPI_Aint,
    recvtypes: *const Handle,
    wide: bool,
) -> WArgs {
    WArgs {
        sbuf: SendPtr(sendbuf.cast_mut()),
        scounts: SendPtr(sendcounts.cast_mut().cast()),
        sdispls: SendPtr(sdispls.cast_mut().cast()),
        stypes: sendtypes,
        rbuf: SendPtr(recvbuf),
        rcounts: SendPtr(recvcounts.cast_mut().cast()),
        rdispls: SendPtr(rdispls.cast_mut().cast()),
        rtypes: recvtypes,
        wide,
    }
}

/// `MPI_Neighbor_alltoallw`'s blocking, nonblocking and persistent forms, with counts of
/// type `$cnt` (`int`, or `MPI_Count` for the `_c` forms, `$wide`).
macro_rules! forms {
    ($cnt:ty, $block:ident, $nb:ident, $init:ident, $wide:expr) => {
        #[allow(clippy::too_many_arguments)]
        pub(crate) unsafe fn $block(
            sendbuf: *const c_void,
            sendcounts: *const $cnt,
            sdispls: *const MPI_Aint,
            sendtypes: *const Handle,
            recvbuf: *mut c_void,
            recvcounts: *const $cnt,
            rdispls: *const MPI_Aint,
            recvtypes: *const Handle,
            comm: Handle,
        ) -> c_int {
            let w = wargs(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, $wide);
            // SAFETY: forwarded program arguments.
            unsafe { alltoallw(comm, w, std::ptr::null_mut(), false) }
        }

        #[allow(clippy::too_many_arguments)]
        pub(crate) unsafe fn $nb(
            sendbuf: *const c_void,
            sendcounts: *const $cnt,
            sdispls: *const MPI_Aint,
            sendtypes: *const Handle,
            recvbuf: *mut c_void,
            recvcounts: *const $cnt,
            rdispls: *const MPI_Aint,
            recvtypes: *const Handle,
            comm: Handle,
            request: *mut Handle,
        ) -> c_int {
            if request.is_null() {
                return raise_on(comm, MPI_ERR_ARG);
            }
            let w = wargs(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, $wide);
            // SAFETY: forwarded program arguments.
            unsafe { alltoallw(comm, w, request, false) }
        }

        #[allow(clippy::too_many_arguments)]
        pub(crate) unsafe fn $init(
            sendbuf: *const c_void,
            sendcounts: *const $cnt,
            sdispls: *const MPI_Aint,
            sendtypes: *const Handle,
            recvbuf: *mut c_void,
            recvcounts: *const $cnt,
            rdispls: *const MPI_Aint,
            recvtypes: *const Handle,
            comm: Handle,
            _info: Handle,
            request: *mut Handle,
        ) -> c_int {
            if request.is_null() {
                return raise_on(comm, MPI_ERR_ARG);
            }
            let w = wargs(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, $wide);
            // SAFETY: forwarded program arguments.
            unsafe { alltoallw(comm, w, request, true) }
        }
    };
}

forms!(c_int, MPI_Neighbor_alltoallw, MPI_Ineighbor_alltoallw, MPI_Neighbor_alltoallw_init, false);
forms!(MPI_Count, MPI_Neighbor_alltoallw_c, MPI_Ineighbor_alltoallw_c, MPI_Neighbor_alltoallw_init_c, true);

#[cfg(test)]
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::clash;

    #[test]
    fn receive_blocks_may_not_overlap_anything_send_blocks_may_overlap_each_other() {
        // Disjoint receive blocks, send blocks elsewhere, repeated.
        assert!(!clash(1000, &[0..8, 8..16], 0, &[0..8, 0..8, 4..12]));
        // Two receive blocks overlap.
        assert!(clash(1000, &[0..8, 7..16], 0, &[0..8]));
        // A receive block inside a long send block that a short one follows.
        assert!(clash(50, &[0..10], 0, &[0..100, 10..20]));
        // A send block starting inside a receive block.
        assert!(clash(0, &[0..10], 5, &[0..1]));
        // Empty blocks overlap nothing.
        assert!(!clash(0, &[0..0, 0..8], 0, &[4..4]));
    }
}
