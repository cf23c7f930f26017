//! Nonblocking and persistent collectives: the program's data laid out in one byte arena
//! ([`prepare`]), handed to the engine as a schedule it owns and advances in every
//! progress call (`runthrough::Comm::start_owned`), and unpacked into the program's
//! buffers when a wait or test sees it end. No thread: the engine's progress — the
//! program's MPI calls, the runtime's progress thread — moves it.
//!
//! The arena, in packed bytes (each datatype's type map, its holes squeezed out):
//! broadcast and reductions hold the vector (an exclusive scan its result after it);
//! gathers and scatters one block a member at the root (elsewhere only the member's
//! own); allgathers every block; alltoalls the send blocks, then the receive blocks.
//! Reductions by a non-commutative operation gather every contribution and fold them
//! in rank order at the end (MPI-4.1 6.9.5), as the blocking forms do.

use std::ffi::{c_int, c_void};
use std::ops::Range;
use std::sync::Arc;

use runthrough::{Plan, SendCombine};

use super::{code, counts, is_in_place, root_ok, scattered_counts, Args, Coll, Held};
use crate::commobj::CommObj;
use crate::consts::*;
use crate::dtype::Dtype;
use crate::req::Active;
use crate::types::{MPI_Status, SendPtr};

/// What unpacks an ended collective's arena into the program's buffers.
pub(crate) type Finish = Box<dyn FnOnce(&[u8]) + Send>;

/// A collective ready to start: its plan, its arena, its operator, its unpacking.
pub(crate) struct Prepared {
    pub(crate) plan: Plan,
    pub(crate) arena: Vec<u8>,
    pub(crate) op: Option<SendCombine>,
    pub(crate) finish: Finish,
    /// A neighbourhood exchange run straight between the program's buffers instead of
    /// the arena (`neighbor.rs`).
    pub(crate) direct: Option<Direct>,
}

/// The program's send area and receive area of an exchange that runs between them: the
/// address and length of each. The receive blocks do not overlap each other nor the send
/// blocks (checked by whoever makes one), and both areas stay valid until the request
/// completes (MPI contract).
#[derive(Clone, Copy)]
pub(crate) struct Direct {
    pub(crate) send: (SendPtr, usize),
    pub(crate) recv: (SendPtr, usize),
}

fn nothing() -> Finish {
    Box::new(|_| {})
}

/// Consecutive blocks of `lens` bytes from byte `at` on.
pub(super) fn stack(lens: impl IntoIterator<Item = usize>, mut at: usize) -> Vec<Range<usize>> {
    lens.into_iter()
        .map(|l| {
            let r = at..at + l;
            at += l;
            r
        })
        .collect()
}

/// Unpacks `blocks` of the arena into the program's buffer `base`: block `i` holds
/// `cnt[i]` elements of `t` going to byte offset `off[i]` (skipping `skip`).
fn unpack_blocks(
    base: SendPtr,
    blocks: Vec<Range<usize>>,
    cnt: Vec<usize>,
    off: Vec<isize>,
    t: Arc<Dtype>,
    skip: Option<usize>,
) -> Finish {
    Box::new(move |arena| {
        let base = base;
        for (i, b) in blocks.iter().enumerate() {
            if Some(i) == skip || cnt[i] == 0 {
                continue;
            }
            // SAFETY: the program's receive buffer, valid until the request completes
            // (the nonblocking-call contract); block i at its displacement.
            unsafe { crate::dtype::unpack_from(&arena[b.clone()], base.0.cast::<u8>().offset(off[i]), cnt[i], &t) };
        }
    })
}

/// Unpacks bytes `r` of the arena, `count` elements of `t`, into the program's `buf`.
fn unpack_one(buf: SendPtr, r: Range<usize>, count: usize, t: Arc<Dtype>) -> Finish {
    unpack_blocks(buf, std::iter::once(r).collect(), vec![count], vec![0], t, None)
}

/// Where a non-commutative reduction's result goes: `count` elements of `t` at `buf`,
/// from the whole result or its bytes `part`.
struct Keep {
    buf: SendPtr,
    count: usize,
    t: Arc<Dtype>,
    part: Option<Range<usize>>,
}

/// Packs `count` elements of `t` at `p` onto the end of `out`.
///
/// # Safety
/// The program's buffer (MPI contract).
unsafe fn pack(p: *const c_void, count: usize, t: &Dtype, out: &mut Vec<u8>) {
    // SAFETY: forwarded (function contract).
    unsafe { crate::dtype::pack_into(p.cast(), count, t, out) };
}

/// Starts `p` on `c` (at a reserved tag, for a persistent collective): the request's
/// activity, polled to its end by the waits and tests, which unpack the arena.
pub(crate) fn start_prepared(c: &Arc<CommObj>, p: Prepared, at: Option<runthrough::Reserved>) -> Result<Active, c_int> {
    let Prepared { plan, arena, op, finish, direct } = p;
    let coll = match direct {
        Some(d) => c.comm.start_owned_by(at, |e, over, tag| {
            let (send, recv) =
                ((d.send.0 .0.cast_const().cast::<u8>(), d.send.1), (d.recv.0 .0.cast::<u8>(), d.recv.1));
            // SAFETY: the program's buffers, valid until the request completes (MPI
            // contract); its receive blocks overlap neither each other nor the send
            // blocks (`Direct`'s maker checked).
            unsafe { e.start_exchange(over, &plan, send, recv, tag) }
        }),
        None => c.comm.start_owned(&plan, arena, op, at),
    }
    .map_err(code)?;
    let c = c.clone();
    let mut finish = Some(finish);
    Ok(Active::Polled(Box::new(move || {
        let (r, arena) = coll.test()?;
        let err = match r {
            Ok(()) => {
                if let Some(f) = finish.take() {
                    f(&arena);
                }
                MPI_SUCCESS
            }
            Err(e) => code(c.comm.check_error(e)),
        };
        Some((MPI_Status::empty(), err))
    })))
}

/// Lays collective `k` with arguments `a` out for the engine.
///
/// # Safety
/// The buffers and count arrays of `a` are the program's, valid now; the buffers stay
/// valid until the request completes (MPI contract).
pub(crate) unsafe fn prepare(c: &CommObj, k: Coll, a: &Args, held: &Held) -> Result<Prepared, c_int> {
    let n = c.size();
    let me = c.rank;
    let in_place = is_in_place(a.sbuf.0);
    let mut arena = Vec::new();
    let (plan, op, finish) = match k {
        Coll::NeighborAllgather | Coll::NeighborAllgatherv | Coll::NeighborAlltoall | Coll::NeighborAlltoallv => {
            // SAFETY: forwarded (function contract).
            return unsafe { super::neighbor::prepare(c, k, a, held) };
        }
        Coll::Barrier => (Plan::Barrier, None, nothing()),
        Coll::Bcast => {
            root_ok(c, a.root)?;
            let t = held.ty(a.stype)?;
            let root = a.root as usize == me;
            if root {
                // SAFETY: the program's buffer.
                unsafe { pack(a.sbuf.0, a.scount, &t, &mut arena) };
            } else {
                arena.resize(a.scount * t.size, 0);
            }
            let len = arena.len();
            let finish = if root { nothing() } else { unpack_one(a.sbuf, 0..len, a.scount, t) };
            (Plan::Bcast { root: a.root as u32, len }, None, finish)
        }
        Coll::Reduce | Coll::Allreduce | Coll::Scan | Coll::Exscan => {
            let t = held.ty(a.rtype)?;
            let comb = held.combine(a.op, a.rtype, &t)?;
            if matches!(k, Coll::Reduce) {
                root_ok(c, a.root)?;
            }
            let src = if in_place { a.rbuf.0 as *const c_void } else { a.sbuf.0 as *const c_void };
            // SAFETY: the program's buffer.
            unsafe { pack(src, a.rcount, &t, &mut arena) };
            let len = arena.len();
            let keeps = match k {
                Coll::Reduce => a.root as usize == me,
                Coll::Exscan => me > 0,
                _ => true,
            };
            if !comb.commutative() && matches!(k, Coll::Reduce | Coll::Allreduce) {
                return Ok(ordered(
                    c,
                    arena,
                    comb,
                    keeps.then_some(Keep { buf: a.rbuf, count: a.rcount, t, part: None }),
                ));
            }
            let (plan, at) = match k {
                Coll::Reduce => (Plan::Reduce { root: a.root as u32, len }, 0),
                Coll::Allreduce => (Plan::Allreduce { len }, 0),
                Coll::Scan => (Plan::Scan { len }, 0),
                _ => {
                    arena.resize(2 * len, 0);
                    (Plan::Exscan { len }, len)
                }
            };
            let finish =
                if keeps && !exscan_first(c, k) { unpack_one(a.rbuf, at..at + len, a.rcount, t) } else { nothing() };
            let op: SendCombine = Box::new(move |acc: &mut [u8], inc: &[u8]| comb.apply(acc, inc));
            (plan, Some(op), finish)
        }
        Coll::ReduceScatter | Coll::ReduceScatterBlock => {
            let t = held.ty(a.rtype)?;
            let comb = held.combine(a.op, a.rtype, &t)?;
            // SAFETY: n counts (MPI contract).
            let cnt = unsafe { scattered_counts(k, a, n) };
            let total: usize = cnt.iter().sum();
            let src = if in_place { a.rbuf.0 as *const c_void } else { a.sbuf.0 as *const c_void };
            // SAFETY: the program's buffer of `total` elements.
            unsafe { pack(src, total, &t, &mut arena) };
            let len = total * t.size;
            let blocks = stack(cnt.iter().map(|x| x * t.size), 0);
            let mine = blocks[me].clone();
            if !comb.commutative() {
                return Ok(ordered(c, arena, comb, Some(Keep { buf: a.rbuf, count: cnt[me], t, part: Some(mine) })));
            }
            let finish = unpack_one(a.rbuf, mine, cnt[me], t);
            let op: SendCombine = Box::new(move |acc: &mut [u8], inc: &[u8]| comb.apply(acc, inc));
            (Plan::ReduceScatter { len, blocks }, Some(op), finish)
        }
        Coll::Gather | Coll::Gatherv | Coll::Allgather | Coll::Allgatherv => {
            let all = matches!(k, Coll::Allgather | Coll::Allgatherv);
            if !all {
                root_ok(c, a.root)?;
            }
            let is_root = all || me == a.root as usize;
            let rt = held.ty_if(a.rtype, is_root)?;
            // Where each block goes in the program's buffer (elements, displacements).
            let (cnt, dsp): (Vec<usize>, Vec<usize>) = match (k, is_root) {
                (_, false) => (vec![0; n], vec![0; n]),
                (Coll::Gather | Coll::Allgather, true) => (vec![a.rcount; n], (0..n).map(|i| i * a.rcount).collect()),
                // SAFETY: n counts and displacements (at the root / everywhere).
                _ => unsafe { (counts(a.rcounts.0, n, a.wide), counts(a.rdispls.0, n, a.wide)) },
            };
            let mut own = Vec::new();
            if in_place {
                // SAFETY: the program's receive buffer, own block.
                unsafe {
                    pack(a.rbuf.0.cast::<u8>().offset(dsp[me] as isize * rt.extent()).cast(), cnt[me], &rt, &mut own)
                };
            } else {
                let st = held.ty(a.stype)?;
                // SAFETY: the program's send buffer.
                unsafe { pack(a.sbuf.0, a.scount, &st, &mut own) };
            }
            let (blocks, finish) = if is_root {
                let blocks = stack(cnt.iter().map(|x| x * rt.size), 0);
                arena.resize(blocks.last().map_or(0, |b| b.end), 0);
                let m = &blocks[me];
                let l = own.len().min(m.len());
                arena[m.start..m.start + l].copy_from_slice(&own[..l]);
                let off = dsp.iter().map(|&d| d as isize * rt.extent()).collect();
                let skip = in_place.then_some(me);
                let f = unpack_blocks(a.rbuf, blocks.clone(), cnt, off, rt, skip);
                (blocks, f)
            } else {
                let l = own.len();
                arena = own;
                (vec![0..l; n], nothing())
            };
            let plan = if all { Plan::Allgatherv { blocks } } else { Plan::Gatherv { root: a.root as u32, blocks } };
            (plan, None, finish)
        }
        Coll::Scatter | Coll::Scatterv => {
            root_ok(c, a.root)?;
            let is_root = me == a.root as usize;
            let skip_own = is_root && is_in_place(a.rbuf.0);
            let rt = if skip_own { None } else { Some(held.ty(a.rtype)?) };
            let blocks = if is_root {
                let st = held.ty(a.stype)?;
                let (cnt, dsp): (Vec<usize>, Vec<usize>) = if matches!(k, Coll::Scatter) {
                    (vec![a.scount; n], (0..n).map(|i| i * a.scount).collect())
                } else {
                    // SAFETY: n counts and displacements at the root.
                    unsafe { (counts(a.scounts.0, n, a.wide), counts(a.sdispls.0, n, a.wide)) }
                };
                for i in 0..n {
                    // SAFETY: the program's send buffer, block i.
                    unsafe {
                        pack(
                            a.sbuf.0.cast::<u8>().offset(dsp[i] as isize * st.extent()).cast(),
                            cnt[i],
                            &st,
                            &mut arena,
                        )
                    };
                }
                stack(cnt.iter().map(|x| x * st.size), 0)
            } else {
                let len = a.rcount * rt.as_ref().map_or(0, |t| t.size);
                arena.resize(len, 0);
                vec![0..len; n]
            };
            let finish = match rt {
                Some(t) => unpack_one(a.rbuf, blocks[me].clone(), a.rcount, t),
                None => nothing(),
            };
            (Plan::Scatterv { root: a.root as u32, blocks }, None, finish)
        }
        Coll::Alltoall | Coll::Alltoallv => {
            let rt = held.ty(a.rtype)?;
            let st = if in_place { rt.clone() } else { held.ty(a.stype)? };
            let (rc, rd): (Vec<usize>, Vec<usize>) = if matches!(k, Coll::Alltoall) {
                (vec![a.rcount; n], (0..n).map(|i| i * a.rcount).collect())
            } else {
                // SAFETY: n counts and displacements.
                unsafe { (counts(a.rcounts.0, n, a.wide), counts(a.rdispls.0, n, a.wide)) }
            };
            let (sc, sd) = if in_place {
                (rc.clone(), rd.clone())
            } else if matches!(k, Coll::Alltoall) {
                (vec![a.scount; n], (0..n).map(|i| i * a.scount).collect())
            } else {
                // SAFETY: as above.
                unsafe { (counts(a.scounts.0, n, a.wide), counts(a.sdispls.0, n, a.wide)) }
            };
            let sbase = if in_place { a.rbuf.0 } else { a.sbuf.0 };
            let sends = (0..n).map(|i| (sbase, sc[i], sd[i] as isize * st.extent(), st.clone())).collect();
            let recvs = (0..n).map(|i| (rc[i], rd[i] as isize * rt.extent(), rt.clone())).collect();
            // SAFETY: the program's buffers (function contract).
            return Ok(unsafe { alltoall(me, sends, recvs, a.rbuf) });
        }
    };
    Ok(Prepared { plan, arena, op, finish, direct: None })
}

/// Whether this member is the first participant of an exclusive scan (its receive
/// buffer is left alone: MPI-4.1 6.11.2 leaves it undefined).
fn exscan_first(c: &CommObj, k: Coll) -> bool {
    if !matches!(k, Coll::Exscan) {
        return false;
    }
    let failed = c.comm.group_failed().world_ranks();
    (0..c.rank).all(|i| failed.contains(&(c.world[i] as usize)))
}

/// A reduction by a non-commutative operation: every contribution gathered (the arena
/// holds this member's), folded in rank order at the end over the members not known
/// failed; `keep`: where the result (or the block `Some(range)` of it) is unpacked.
fn ordered(c: &CommObj, mine: Vec<u8>, comb: crate::op::Combine, keep: Option<Keep>) -> Prepared {
    let (n, len) = (c.size(), mine.len());
    let blocks: Vec<Range<usize>> = (0..n).map(|i| i * len..(i + 1) * len).collect();
    let mut arena = vec![0u8; n * len];
    arena[c.rank * len..(c.rank + 1) * len].copy_from_slice(&mine);
    let failed = c.comm.group_failed().world_ranks();
    let live: Vec<usize> = (0..n).filter(|&i| !failed.contains(&(c.world[i] as usize))).collect();
    let finish: Finish = Box::new(move |arena: &[u8]| {
        let Some(Keep { buf, count, t, part }) = keep else { return };
        let mut order = live.iter().rev();
        let Some(&last) = order.next() else { return };
        let mut acc = arena[last * len..(last + 1) * len].to_vec();
        for &i in order {
            comb.apply(&mut acc, &arena[i * len..(i + 1) * len]);
        }
        let out = part.map_or(&acc[..], |r| &acc[r]);
        // SAFETY: the program's receive buffer, valid until the request completes.
        unsafe { crate::dtype::unpack_from(out, buf.0.cast(), count, &t) };
    });
    Prepared { plan: Plan::Allgatherv { blocks }, arena, op: None, finish, direct: None }
}

/// An alltoall of any kind: `sends[i]` = (base, count, byte offset, type) of the block
/// for member `i`, `recvs[i]` = (count, byte offset, type) of the block from it, into
/// `rbuf`. This member's own block is copied in the arena before the start.
///
/// # Safety
/// The program's buffers (MPI contract).
pub(crate) unsafe fn alltoall(
    me: usize,
    sends: Vec<(*mut c_void, usize, isize, Arc<Dtype>)>,
    recvs: Vec<(usize, isize, Arc<Dtype>)>,
    rbuf: SendPtr,
) -> Prepared {
    let mut arena = Vec::new();
    for (base, count, off, t) in &sends {
        // SAFETY: the program's send buffer, block i (function contract).
        unsafe { pack(base.cast::<u8>().offset(*off).cast(), *count, t, &mut arena) };
    }
    let sblocks = stack(sends.iter().map(|s| s.1 * s.3.size), 0);
    let rblocks = stack(recvs.iter().map(|r| r.0 * r.2.size), arena.len());
    arena.resize(rblocks.last().map_or(arena.len(), |b| b.end), 0);
    let (s, r) = (sblocks[me].clone(), rblocks[me].clone());
    let l = s.len().min(r.len());
    arena.copy_within(s.start..s.start + l, r.start);
    let finish: Finish = Box::new({
        let rblocks = rblocks.clone();
        move |arena: &[u8]| {
            let rbuf = rbuf;
            for (b, (count, off, t)) in rblocks.iter().zip(&recvs) {
                // SAFETY: the program's receive buffer, valid until the request completes.
                unsafe { crate::dtype::unpack_from(&arena[b.clone()], rbuf.0.cast::<u8>().offset(*off), *count, t) };
            }
        }
    });
    Prepared { plan: Plan::Alltoallv { sends: sblocks, recvs: rblocks }, arena, op: None, finish, direct: None }
}
