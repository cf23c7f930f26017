//! Collectives on intercommunicators (MPI-4.1 §6.2.2): the roots' `MPI_ROOT` and
//! `MPI_PROC_NULL`, counts of the remote group, packing — translated to the facade's
//! `InterComm` collectives (`src/intercoll.rs`), which do the communication. The
//! nonblocking and persistent forms run the blocking one when they start (their
//! requests are complete at once).

use std::ffi::c_void;

use runthrough::{InterComm, InterRoot};

use super::{code, counts, is_in_place, sbytes, scattered_counts, Args, Coll, Held, RBuf, R};
use crate::commobj::CommObj;
use crate::consts::*;

/// The caller's role from a rooted collective's `root` argument.
fn role(ic: &InterComm, root: i32) -> Result<InterRoot, i32> {
    match root {
        MPI_ROOT => Ok(InterRoot::Root),
        MPI_PROC_NULL => Ok(InterRoot::Null),
        r if r >= 0 && (r as usize) < ic.remote_size() => Ok(InterRoot::Remote(r as usize)),
        _ => Err(MPI_ERR_ROOT),
    }
}

/// Unpacks the blocks of a packed `area` (byte ranges `bc`/`bd`) to `base` at element
/// displacements `dsp` of type `t`.
///
/// # Safety
/// `base` is the program's buffer holding every block (MPI contract).
unsafe fn unpack_blocks(
    area: &[u8],
    bc: &[usize],
    bd: &[usize],
    cnt: &[usize],
    dsp: &[usize],
    base: *mut c_void,
    t: &crate::dtype::Dtype,
) {
    for i in 0..cnt.len() {
        // SAFETY: the program's buffer, block i (function contract).
        unsafe {
            let dst = base.cast::<u8>().offset(dsp[i] as isize * t.extent());
            crate::dtype::unpack_from(&area[bd[i]..bd[i] + bc[i]], dst, cnt[i], t);
        }
    }
}

/// The packed area of blocks `cnt`/`dsp` of `size`-byte elements: its length and the
/// byte counts and displacements of the blocks in it.
fn packed(cnt: &[usize], dsp: &[usize], size: usize) -> (usize, Vec<usize>, Vec<usize>) {
    let span = cnt.iter().zip(dsp).map(|(c, d)| c + d).max().unwrap_or(0);
    (span * size, cnt.iter().map(|x| x * size).collect(), dsp.iter().map(|x| x * size).collect())
}

/// Runs collective `k` on intercommunicator `c`.
///
/// # Safety
/// The buffers and arrays in `a` are the program's, valid for the call (MPI contract).
pub(super) unsafe fn run(c: &CommObj, ic: &InterComm, k: Coll, a: &Args, held: &Held) -> R {
    if is_in_place(a.sbuf.0) || is_in_place(a.rbuf.0) && !matches!(k, Coll::Barrier | Coll::Bcast) {
        // MPI_IN_PLACE has no meaning on an intercommunicator (MPI-4.1 6.2.3).
        return Err(MPI_ERR_ARG);
    }
    let nr = ic.remote_size();
    let mut keep = Vec::new();
    match k {
        Coll::Barrier => ic.barrier().map_err(code),
        Coll::Bcast => {
            let who = role(ic, a.root)?;
            let t = held.ty_if(a.stype, who != InterRoot::Null)?;
            match who {
                InterRoot::Root => {
                    // SAFETY: the program's buffer.
                    let mut data = unsafe { sbytes(a.sbuf.0, a.scount, &t, &mut keep) }.to_vec();
                    ic.bcast(&mut data, who).map_err(code)
                }
                InterRoot::Null => ic.bcast::<u8>(&mut [], who).map_err(code),
                InterRoot::Remote(_) => {
                    // SAFETY: the program's buffer.
                    let mut rb = unsafe { RBuf::new(a.sbuf.0, a.scount, &t, false) };
                    ic.bcast(rb.bytes(), who).map_err(code)?;
                    rb.finish();
                    Ok(())
                }
            }
        }
        Coll::Gather | Coll::Gatherv => {
            let who = role(ic, a.root)?;
            match who {
                InterRoot::Root => {
                    let rt = held.ty(a.rtype)?;
                    let (cnt, dsp) = if matches!(k, Coll::Gather) {
                        (vec![a.rcount; nr], (0..nr).map(|j| j * a.rcount).collect())
                    } else {
                        // SAFETY: remote-size counts and displacements at the root.
                        unsafe { (counts(a.rcounts.0, nr, a.wide), counts(a.rdispls.0, nr, a.wide)) }
                    };
                    let (span, bc, bd) = packed(&cnt, &dsp, rt.size);
                    let mut area = vec![0u8; span];
                    ic.gatherv(&[], &mut area, &bc, &bd, who).map_err(code)?;
                    // SAFETY: the program's receive buffer.
                    unsafe { unpack_blocks(&area, &bc, &bd, &cnt, &dsp, a.rbuf.0, &rt) };
                    Ok(())
                }
                InterRoot::Null => ic.gatherv::<u8>(&[], &mut [], &[], &[], who).map_err(code),
                InterRoot::Remote(_) => {
                    let st = held.ty(a.stype)?;
                    // SAFETY: the program's send buffer.
                    let data = unsafe { sbytes(a.sbuf.0, a.scount, &st, &mut keep) };
                    ic.gatherv(data, &mut [], &[], &[], who).map_err(code)
                }
            }
        }
        Coll::Scatter | Coll::Scatterv => {
            let who = role(ic, a.root)?;
            match who {
                InterRoot::Root => {
                    let st = held.ty(a.stype)?;
                    let (cnt, dsp) = if matches!(k, Coll::Scatter) {
                        (vec![a.scount; nr], (0..nr).map(|j| j * a.scount).collect())
                    } else {
                        // SAFETY: remote-size counts and displacements at the root.
                        unsafe { (counts(a.scounts.0, nr, a.wide), counts(a.sdispls.0, nr, a.wide)) }
                    };
                    let (mut send, mut bc, mut bd) = (Vec::new(), Vec::new(), Vec::new());
                    for j in 0..nr {
                        bd.push(send.len());
                        bc.push(cnt[j] * st.size);
                        // SAFETY: the program's send buffer, block j.
                        unsafe {
                            let p = a.sbuf.0.cast::<u8>().offset(dsp[j] as isize * st.extent());
                            crate::dtype::pack_into(p, cnt[j], &st, &mut send);
                        }
                    }
                    ic.scatterv(&send, &bc, &bd, &mut [], who).map_err(code)
                }
                InterRoot::Null => ic.scatterv::<u8>(&[], &[], &[], &mut [], who).map_err(code),
                InterRoot::Remote(_) => {
                    let rt = held.ty(a.rtype)?;
                    // SAFETY: the program's receive buffer.
                    let mut rb = unsafe { RBuf::new(a.rbuf.0, a.rcount, &rt, false) };
                    ic.scatterv(&[], &[], &[], rb.bytes(), who).map_err(code)?;
                    rb.finish();
                    Ok(())
                }
            }
        }
        Coll::Allgather | Coll::Allgatherv => {
            let (st, rt) = (held.ty(a.stype)?, held.ty(a.rtype)?);
            // SAFETY: the program's send buffer.
            let data = unsafe { sbytes(a.sbuf.0, a.scount, &st, &mut keep) }.to_vec();
            let (cnt, dsp) = if matches!(k, Coll::Allgather) {
                (vec![a.rcount; nr], (0..nr).map(|j| j * a.rcount).collect())
            } else {
                // SAFETY: remote-size counts and displacements.
                unsafe { (counts(a.rcounts.0, nr, a.wide), counts(a.rdispls.0, nr, a.wide)) }
            };
            let (span, bc, bd) = packed(&cnt, &dsp, rt.size);
            let mut area = vec![0u8; span];
            ic.allgatherv(&data, &mut area, &bc, &bd).map_err(code)?;
            // SAFETY: the program's receive buffer.
            unsafe { unpack_blocks(&area, &bc, &bd, &cnt, &dsp, a.rbuf.0, &rt) };
            Ok(())
        }
        Coll::Alltoall | Coll::Alltoallv => {
            let (st, rt) = (held.ty(a.stype)?, held.ty(a.rtype)?);
            let ((sc, sd), (rc, rd)) = if matches!(k, Coll::Alltoall) {
                let d = |n: usize| (0..nr).map(|j| j * n).collect::<Vec<usize>>();
                ((vec![a.scount; nr], d(a.scount)), (vec![a.rcount; nr], d(a.rcount)))
            } else {
                // SAFETY: remote-size counts and displacements.
                unsafe {
                    (
                        (counts(a.scounts.0, nr, a.wide), counts(a.sdispls.0, nr, a.wide)),
                        (counts(a.rcounts.0, nr, a.wide), counts(a.rdispls.0, nr, a.wide)),
                    )
                }
            };
            let (mut send, mut bsc, mut bsd) = (Vec::new(), Vec::new(), Vec::new());
            for j in 0..nr {
                bsd.push(send.len());
                bsc.push(sc[j] * st.size);
                // SAFETY: the program's send buffer, block j.
                unsafe {
                    let p = a.sbuf.0.cast::<u8>().offset(sd[j] as isize * st.extent());
                    crate::dtype::pack_into(p, sc[j], &st, &mut send);
                }
            }
            let (span, brc, brd) = packed(&rc, &rd, rt.size);
            let mut area = vec![0u8; span];
            ic.alltoallv(&send, &bsc, &bsd, &mut area, &brc, &brd).map_err(code)?;
            // SAFETY: the program's receive buffer.
            unsafe { unpack_blocks(&area, &brc, &brd, &rc, &rd, a.rbuf.0, &rt) };
            Ok(())
        }
        Coll::Reduce | Coll::Allreduce | Coll::ReduceScatter | Coll::ReduceScatterBlock => {
            let who = if matches!(k, Coll::Reduce) { role(ic, a.root)? } else { InterRoot::Remote(0) };
            if who == InterRoot::Null {
                return ic.reduce_with::<u8>(&[], &mut [], who, &|_, _| {}).map_err(code);
            }
            let t = held.ty(a.rtype)?;
            let comb = held.combine(a.op, a.rtype, &t)?;
            let f = |acc: &mut [u8], inc: &[u8]| comb.apply(acc, inc);
            let me = c.user_rank();
            let (total, mine) = match k {
                Coll::ReduceScatter | Coll::ReduceScatterBlock => {
                    // SAFETY: local-size counts (MPI contract).
                    let cnt = unsafe { scattered_counts(k, a, ic.size()) };
                    (cnt.iter().sum::<usize>(), Some(cnt))
                }
                _ => (a.rcount, None),
            };
            let mut input = Vec::new();
            if who != InterRoot::Root {
                // SAFETY: the program's send buffer of `total` elements.
                unsafe { crate::dtype::pack_into(a.sbuf.0.cast(), total, &t, &mut input) };
            }
            let mut out = vec![0u8; total * t.size];
            let r = match (k, &mine) {
                (Coll::Reduce, _) => ic.reduce_with(&input, &mut out, who, &f),
                (Coll::Allreduce, _) => ic.allreduce_with(&input, &mut out, &f),
                (_, Some(cnt)) => {
                    let bytes: Vec<usize> = cnt.iter().map(|x| x * t.size).collect();
                    out.truncate(bytes[me]);
                    ic.reduce_scatter_with(&input, &mut out, &bytes, &f)
                }
                _ => Ok(()),
            };
            r.map_err(code)?;
            if who == InterRoot::Root || !matches!(k, Coll::Reduce) {
                let n = mine.as_ref().map_or(total, |cnt| cnt[me]);
                // SAFETY: the program's receive buffer of `n` elements.
                unsafe { crate::dtype::unpack_from(&out, a.rbuf.0.cast(), n, &t) };
            }
            Ok(())
        }
        Coll::Scan | Coll::Exscan => Err(MPI_ERR_COMM),
        Coll::NeighborAllgather | Coll::NeighborAllgatherv | Coll::NeighborAlltoall | Coll::NeighborAlltoallv => {
            Err(MPI_ERR_TOPOLOGY)
        }
    }
}
