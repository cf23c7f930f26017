//! Collectives: every blocking one, their nonblocking and persistent forms, MPI_IN_PLACE.
//!
//! Data is moved as bytes: a contiguous datatype is used in place, any other layout is
//! packed first and unpacked after. Nonblocking (and persistent) collectives are
//! schedules the engine owns and advances in every progress call (`owned.rs`); each
//! takes the communicator's next collective tag when it starts (a persistent one when
//! it is initialised), which is MPI's ordering rule for collectives on a communicator.

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use crate::comm::comm;
use crate::commobj::CommObj;
use crate::consts::*;
use crate::dtype::Dtype;
use crate::raise::raise_on;
use crate::req::Active;
use crate::types::{Handle, MPI_Aint, MPI_Count, SendPtr};

mod held;
mod inter;
mod neighbor;
mod owned;

use held::ordered_reduce;
pub(crate) use held::Held;
pub(crate) use neighbor::*;
use owned::{prepare, start_prepared};

type R = Result<(), c_int>;

fn code(e: runthrough::Error) -> c_int {
    crate::err::set_detail(e.to_string());
    crate::err::code_of(&e)
}

/// The send data: the program's bytes in place, or packed.
unsafe fn sbytes<'a>(buf: *const c_void, count: usize, t: &Dtype, keep: &'a mut Vec<u8>) -> &'a [u8] {
    if t.contiguous() {
        if count * t.size == 0 {
            return &[];
        }
        // SAFETY: the program's buffer of `count` elements (MPI contract).
        unsafe { std::slice::from_raw_parts(buf.cast(), count * t.size) }
    } else {
        // SAFETY: as above.
        unsafe { crate::dtype::pack_into(buf.cast(), count, t, keep) };
        keep
    }
}

/// A receive area: the program's bytes in place, or a packed buffer unpacked by `finish`.
struct RBuf {
    ptr: *mut c_void,
    count: usize,
    t: Arc<Dtype>,
    tmp: Option<Vec<u8>>,
}

impl RBuf {
    unsafe fn new(ptr: *mut c_void, count: usize, t: &Arc<Dtype>, load: bool) -> Self {
        let tmp = if t.contiguous() {
            None
        } else {
            let mut v = Vec::new();
            if load {
                // SAFETY: the program's buffer (MPI contract).
                unsafe { crate::dtype::pack_into(ptr.cast(), count, t, &mut v) };
            } else {
                v.resize(count * t.size, 0);
            }
            Some(v)
        };
        RBuf { ptr, count, t: t.clone(), tmp }
    }

    fn bytes(&mut self) -> &mut [u8] {
        match &mut self.tmp {
            Some(v) => v,
            None if self.count * self.t.size == 0 => &mut [],
            // SAFETY: the program's buffer of `count` elements (MPI contract).
            None => unsafe { std::slice::from_raw_parts_mut(self.ptr.cast(), self.count * self.t.size) },
        }
    }

    fn finish(self) {
        if let Some(v) = &self.tmp {
            // SAFETY: the program's buffer.
            unsafe { crate::dtype::unpack_from(v, self.ptr.cast(), self.count, &self.t) };
        }
    }
}

fn is_in_place(p: *const c_void) -> bool {
    p as usize == 1
}

fn root_ok(c: &CommObj, root: c_int) -> R {
    if root < 0 || root as usize >= c.size() {
        Err(MPI_ERR_ROOT)
    } else {
        Ok(())
    }
}

/// `n` counts or displacements from a C array of `int` or, for the `_c` forms, of 64-bit
/// `MPI_Count`/`MPI_Aint`.
unsafe fn counts(p: *mut c_void, n: usize, wide: bool) -> Vec<usize> {
    if wide {
        // SAFETY: an array of n 64-bit entries (MPI contract).
        (0..n).map(|i| unsafe { *p.cast::<i64>().add(i) }.max(0) as usize).collect()
    } else {
        // SAFETY: an array of n ints (MPI contract).
        (0..n).map(|i| unsafe { *p.cast::<c_int>().add(i) }.max(0) as usize).collect()
    }
}

/// The element count each member gets of a reduce-scatter (`k` one of its two kinds).
///
/// # Safety
/// For `ReduceScatter`, `a.rcounts` holds `n` entries (MPI contract).
unsafe fn scattered_counts(k: Coll, a: &Args, n: usize) -> Vec<usize> {
    if matches!(k, Coll::ReduceScatterBlock) {
        vec![a.rcount; n]
    } else {
        // SAFETY: n counts (function contract).
        unsafe { counts(a.rcounts.0, n, a.wide) }
    }
}

// ---- the operations, shared by the blocking, nonblocking and persistent forms --------

/// The arguments of one collective (raw pointers kept as `SendPtr`).
#[derive(Clone, Copy)]
pub(crate) struct Args {
    sbuf: SendPtr,
    scount: usize,
    stype: Handle,
    rbuf: SendPtr,
    rcount: usize,
    rtype: Handle,
    root: c_int,
    op: Handle,
    scounts: SendPtr,
    sdispls: SendPtr,
    rcounts: SendPtr,
    rdispls: SendPtr,
    /// The count and displacement arrays are `MPI_Count`/`MPI_Aint` (the `_c` forms),
    /// not `int`.
    wide: bool,
}

impl Default for Args {
    fn default() -> Self {
        let n = SendPtr(std::ptr::null_mut());
        Args {
            sbuf: n,
            scount: 0,
            stype: MPI_BYTE,
            rbuf: n,
            rcount: 0,
            rtype: MPI_BYTE,
            root: 0,
            op: MPI_OP_NULL,
            scounts: n,
            sdispls: n,
            rcounts: n,
            rdispls: n,
            wide: false,
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Coll {
    Barrier,
    Bcast,
    Reduce,
    Allreduce,
    Gather,
    Gatherv,
    Scatter,
    Scatterv,
    Allgather,
    Allgatherv,
    Alltoall,
    Alltoallv,
    ReduceScatter,
    ReduceScatterBlock,
    Scan,
    Exscan,
    NeighborAllgather,
    NeighborAllgatherv,
    NeighborAlltoall,
    NeighborAlltoallv,
}

/// Runs collective `k` with `a` on `c`.
///
/// # Safety
/// The buffers and arrays in `a` are the program's, valid for the call (MPI contract).
pub(crate) unsafe fn run(c: &Arc<CommObj>, k: Coll, a: Args, held: &Held) -> R {
    if let Some(i) = &c.inter {
        // SAFETY: forwarded (function contract).
        return unsafe { inter::run(c, &i.ic, k, &a, held) };
    }
    let n = c.size();
    let me = c.rank;
    let cm = &c.comm;
    let mut keep = Vec::new();
    match k {
        Coll::NeighborAllgather | Coll::NeighborAllgatherv | Coll::NeighborAlltoall | Coll::NeighborAlltoallv => {
            // SAFETY: forwarded (function contract).
            unsafe { neighbor::run(c, k, &a, held) }
        }
        Coll::Barrier => cm.barrier().map_err(code),
        Coll::Bcast => {
            root_ok(c, a.root)?;
            let t = held.ty(a.stype)?;
            // SAFETY: the program's buffer.
            let mut rb = unsafe { RBuf::new(a.sbuf.0, a.scount, &t, me == a.root as usize) };
            cm.bcast(rb.bytes(), a.root as usize).map_err(code)?;
            if me != a.root as usize {
                rb.finish();
            }
            Ok(())
        }
        Coll::Reduce | Coll::Allreduce | Coll::Scan | Coll::Exscan => {
            let t = held.ty(a.rtype)?;
            let comb = held.combine(a.op, a.rtype, &t)?;
            let root = if matches!(k, Coll::Reduce) { root_ok(c, a.root).map(|_| a.root as usize)? } else { 0 };
            let is_root = matches!(k, Coll::Reduce) && me == root;
            // The contribution, packed.
            let fast = matches!(k, Coll::Allreduce) && t.contiguous() && a.rcount * t.size > 0;
            let mut input = Vec::new();
            let src = if is_in_place(a.sbuf.0) { a.rbuf.0 as *const c_void } else { a.sbuf.0 as *const c_void };
            if !fast {
                // SAFETY: the program's buffer.
                unsafe { crate::dtype::pack_into(src.cast(), a.rcount, &t, &mut input) };
            }
            let f = |acc: &mut [u8], inc: &[u8]| comb.apply(acc, inc);
            let elem = comb.elem();
            if !comb.commutative() && matches!(k, Coll::Reduce | Coll::Allreduce) {
                // Rank order, whatever shape the engine's trees take (MPI-4.1 6.9.5).
                if fast {
                    // SAFETY: the program's buffer.
                    unsafe { crate::dtype::pack_into(src.cast(), a.rcount, &t, &mut input) };
                }
                let out = ordered_reduce(c, &input, &comb)?;
                if is_root || matches!(k, Coll::Allreduce) {
                    // SAFETY: the program's buffer.
                    unsafe { crate::dtype::unpack_from(&out, a.rbuf.0.cast(), a.rcount, &t) };
                }
                return Ok(());
            }
            match k {
                Coll::Reduce => {
                    let mut out = if is_root { vec![0u8; input.len()] } else { Vec::new() };
                    cm.reduce_bytes(&input, &mut out, elem, root, &f).map_err(code)?;
                    if is_root {
                        // SAFETY: the program's buffer.
                        unsafe { crate::dtype::unpack_from(&out, a.rbuf.0.cast(), a.rcount, &t) };
                    }
                }
                Coll::Allreduce if fast => {
                    // Reduce in the program's receive buffer (one copy, as the Rust API).
                    let n = a.rcount * t.size;
                    // SAFETY: the program's receive buffer of `count` elements.
                    let out = unsafe { std::slice::from_raw_parts_mut(a.rbuf.0.cast::<u8>(), n) };
                    if !is_in_place(a.sbuf.0) {
                        // SAFETY: the program's send buffer of `count` elements.
                        out.copy_from_slice(unsafe { std::slice::from_raw_parts(a.sbuf.0.cast::<u8>(), n) });
                    }
                    cm.allreduce_bytes(out, elem, &f).map_err(code)?;
                }
                Coll::Allreduce => {
                    cm.allreduce_bytes(&mut input, elem, &f).map_err(code)?;
                    // SAFETY: the program's buffer.
                    unsafe { crate::dtype::unpack_from(&input, a.rbuf.0.cast(), a.rcount, &t) };
                }
                Coll::Scan => {
                    cm.scan_bytes(&mut input, &f).map_err(code)?;
                    // SAFETY: the program's buffer.
                    unsafe { crate::dtype::unpack_from(&input, a.rbuf.0.cast(), a.rcount, &t) };
                }
                _ => {
                    if cm.exscan_bytes(&mut input, &f).map_err(code)? {
                        // SAFETY: the program's buffer.
                        unsafe { crate::dtype::unpack_from(&input, a.rbuf.0.cast(), a.rcount, &t) };
                    }
                }
            }
            Ok(())
        }
        Coll::ReduceScatter | Coll::ReduceScatterBlock => {
            let t = held.ty(a.rtype)?;
            let comb = held.combine(a.op, a.rtype, &t)?;
            // SAFETY: n counts (MPI contract).
            let cnt = unsafe { scattered_counts(k, &a, n) };
            let total: usize = cnt.iter().sum();
            let mut input = Vec::new();
            let src = if is_in_place(a.sbuf.0) { a.rbuf.0 as *const c_void } else { a.sbuf.0 as *const c_void };
            // SAFETY: the program's buffer of `total` elements.
            unsafe { crate::dtype::pack_into(src.cast(), total, &t, &mut input) };
            let f = |acc: &mut [u8], inc: &[u8]| comb.apply(acc, inc);
            if comb.commutative() {
                cm.allreduce_bytes(&mut input, comb.elem(), &f).map_err(code)?;
            } else {
                input = ordered_reduce(c, &input, &comb)?;
            }
            let start: usize = cnt[..me].iter().sum::<usize>() * t.size;
            // SAFETY: the program's buffer of cnt[me] elements.
            unsafe { crate::dtype::unpack_from(&input[start..start + cnt[me] * t.size], a.rbuf.0.cast(), cnt[me], &t) };
            Ok(())
        }
        Coll::Gather | Coll::Allgather => {
            let is_root = matches!(k, Coll::Allgather) || me == a.root as usize;
            let rt = held.ty_if(a.rtype, is_root)?;
            if matches!(k, Coll::Gather) {
                root_ok(c, a.root)?;
            }
            let mine = if is_in_place(a.sbuf.0) {
                // Own block already in the receive buffer.
                // SAFETY: the program's receive buffer, block `me`.
                let p = unsafe { a.rbuf.0.cast::<u8>().offset(me as isize * a.rcount as isize * rt.extent()) };
                // SAFETY: as above.
                unsafe { sbytes(p.cast(), a.rcount, &rt, &mut keep) }.to_vec()
            } else {
                let st = held.ty(a.stype)?;
                // SAFETY: the program's send buffer.
                unsafe { sbytes(a.sbuf.0, a.scount, &st, &mut keep) }.to_vec()
            };
            // SAFETY: the program's receive buffer of n blocks (at the root).
            let mut rb = unsafe { RBuf::new(a.rbuf.0, if is_root { a.rcount * n } else { 0 }, &rt, false) };
            let r = if matches!(k, Coll::Gather) {
                cm.gather(&mine, rb.bytes(), a.root as usize)
            } else {
                cm.allgather(&mine, rb.bytes())
            };
            r.map_err(code)?;
            if is_root {
                rb.finish();
            }
            Ok(())
        }
        Coll::Scatter => {
            root_ok(c, a.root)?;
            let is_root = me == a.root as usize;
            let st = held.ty_if(a.stype, is_root)?;
            let send: Vec<u8> = if is_root {
                // SAFETY: the program's send buffer of n blocks.
                unsafe { sbytes(a.sbuf.0, a.scount * n, &st, &mut keep) }.to_vec()
            } else {
                Vec::new()
            };
            if is_root && is_in_place(a.rbuf.0) {
                let mut scratch = vec![0u8; a.scount * st.size];
                cm.scatter(&send, &mut scratch, a.root as usize).map_err(code)?;
                return Ok(());
            }
            let rt = held.ty(a.rtype)?;
            // SAFETY: the program's receive buffer.
            let mut rb = unsafe { RBuf::new(a.rbuf.0, a.rcount, &rt, false) };
            cm.scatter(&send, rb.bytes(), a.root as usize).map_err(code)?;
            rb.finish();
            Ok(())
        }
        Coll::Alltoall => {
            let rt = held.ty(a.rtype)?;
            let send: Vec<u8> = if is_in_place(a.sbuf.0) {
                // SAFETY: the program's receive buffer holds the data.
                unsafe { sbytes(a.rbuf.0, a.rcount * n, &rt, &mut keep) }.to_vec()
            } else {
                let st = held.ty(a.stype)?;
                // SAFETY: the program's send buffer.
                unsafe { sbytes(a.sbuf.0, a.scount * n, &st, &mut keep) }.to_vec()
            };
            // SAFETY: the program's receive buffer.
            let mut rb = unsafe { RBuf::new(a.rbuf.0, a.rcount * n, &rt, false) };
            cm.alltoall(&send, rb.bytes()).map_err(code)?;
            rb.finish();
            Ok(())
        }
        Coll::Gatherv | Coll::Allgatherv => {
            let all = matches!(k, Coll::Allgatherv);
            if !all {
                root_ok(c, a.root)?;
            }
            let is_root = all || me == a.root as usize;
            let rt = held.ty_if(a.rtype, is_root)?;
            let (cnt, dsp) = if is_root {
                // SAFETY: n counts and displacements (at the root / everywhere).
                unsafe { (counts(a.rcounts.0, n, a.wide), counts(a.rdispls.0, n, a.wide)) }
            } else {
                (Vec::new(), Vec::new())
            };
            let mine: Vec<u8> = if is_in_place(a.sbuf.0) {
                let (c_me, d_me) = (cnt.get(me).copied().unwrap_or(0), dsp.get(me).copied().unwrap_or(0));
                // SAFETY: the program's receive buffer, own block.
                let p = unsafe { a.rbuf.0.cast::<u8>().offset(d_me as isize * rt.extent()) };
                // SAFETY: as above.
                unsafe { sbytes(p.cast(), c_me, &rt, &mut keep) }.to_vec()
            } else {
                let st = held.ty(a.stype)?;
                // SAFETY: the program's send buffer.
                unsafe { sbytes(a.sbuf.0, a.scount, &st, &mut keep) }.to_vec()
            };
            // Packed receive area: block r at displ[r] * size.
            let span = cnt.iter().zip(&dsp).map(|(c, d)| c + d).max().unwrap_or(0);
            let mut area = vec![0u8; span * rt.size];
            let bc: Vec<usize> = cnt.iter().map(|x| x * rt.size).collect();
            let bd: Vec<usize> = dsp.iter().map(|x| x * rt.size).collect();
            let r = if all {
                cm.allgatherv(&mine, &mut area, &bc, &bd)
            } else {
                cm.gatherv(&mine, &mut area, &bc, &bd, a.root as usize)
            };
            r.map_err(code)?;
            if is_root {
                for i in 0..n {
                    if is_in_place(a.sbuf.0) && i == me {
                        continue;
                    }
                    // SAFETY: the program's receive buffer, block i.
                    unsafe {
                        let dst = a.rbuf.0.cast::<u8>().offset(dsp[i] as isize * rt.extent());
                        crate::dtype::unpack_from(&area[bd[i]..bd[i] + bc[i]], dst, cnt[i], &rt);
                    }
                }
            }
            Ok(())
        }
        Coll::Scatterv => {
            root_ok(c, a.root)?;
            let is_root = me == a.root as usize;
            let (mut send, mut bc, mut bd) = (Vec::new(), Vec::new(), Vec::new());
            if is_root {
                let st = held.ty(a.stype)?;
                // SAFETY: n counts and displacements at the root.
                let (cnt, dsp) = unsafe { (counts(a.scounts.0, n, a.wide), counts(a.sdispls.0, n, a.wide)) };
                for i in 0..n {
                    bd.push(send.len());
                    bc.push(cnt[i] * st.size);
                    // SAFETY: the program's send buffer, block i.
                    unsafe {
                        let p = a.sbuf.0.cast::<u8>().offset(dsp[i] as isize * st.extent());
                        crate::dtype::pack_into(p, cnt[i], &st, &mut send);
                    }
                }
            }
            if is_root && is_in_place(a.rbuf.0) {
                let mut scratch = vec![0u8; bc[me]];
                cm.scatterv(&send, &bc, &bd, &mut scratch, a.root as usize).map_err(code)?;
                return Ok(());
            }
            let rt = held.ty(a.rtype)?;
            // SAFETY: the program's receive buffer.
            let mut rb = unsafe { RBuf::new(a.rbuf.0, a.rcount, &rt, false) };
            cm.scatterv(&send, &bc, &bd, rb.bytes(), a.root as usize).map_err(code)?;
            rb.finish();
            Ok(())
        }
        Coll::Alltoallv => {
            let rt = held.ty(a.rtype)?;
            let in_place = is_in_place(a.sbuf.0);
            let st = if in_place { rt.clone() } else { held.ty(a.stype)? };
            // SAFETY: n counts and displacements.
            let (rc, rd) = unsafe { (counts(a.rcounts.0, n, a.wide), counts(a.rdispls.0, n, a.wide)) };
            let (sc, sd) = if in_place {
                (rc.clone(), rd.clone())
            } else {
                // SAFETY: as above.
                unsafe { (counts(a.scounts.0, n, a.wide), counts(a.sdispls.0, n, a.wide)) }
            };
            let sbase = if in_place { a.rbuf.0 } else { a.sbuf.0 };
            let (mut send, mut bsc, mut bsd) = (Vec::new(), Vec::new(), Vec::new());
            for i in 0..n {
                bsd.push(send.len());
                bsc.push(sc[i] * st.size);
                // SAFETY: the program's send buffer, block i.
                unsafe {
                    crate::dtype::pack_into(
                        sbase.cast::<u8>().offset(sd[i] as isize * st.extent()),
                        sc[i],
                        &st,
                        &mut send,
                    )
                };
            }
            let brc: Vec<usize> = rc.iter().map(|x| x * rt.size).collect();
            let mut brd = Vec::with_capacity(n);
            let mut off = 0;
            for b in &brc {
                brd.push(off);
                off += b;
            }
            let mut area = vec![0u8; off];
            cm.alltoallv(&send, &bsc, &bsd, &mut area, &brc, &brd).map_err(code)?;
            for i in 0..n {
                // SAFETY: the program's receive buffer, block i.
                unsafe {
                    let dst = a.rbuf.0.cast::<u8>().offset(rd[i] as isize * rt.extent());
                    crate::dtype::unpack_from(&area[brd[i]..brd[i] + brc[i]], dst, rc[i], &rt);
                }
            }
            Ok(())
        }
    }
}

/// Blocking form.
unsafe fn blocking(comm: Handle, k: Coll, a: Args) -> c_int {
    let c = comm!(comm);
    // SAFETY: the program's buffers (MPI contract).
    match unsafe { run(&c, k, a, &Held::default()) } {
        Ok(()) => MPI_SUCCESS,
        Err(e) => raise_on(comm, e),
    }
}

/// Copies of the count and displacement arrays `run` will read for `k` on `c`, and `a`
/// pointing at them: a persistent collective reads them at each start, and
/// programs (mpi4py among them) free such arrays once the call returns.
///
/// # Safety
/// The arrays of `a` that `k` uses at this rank hold `size` entries (MPI contract).
unsafe fn snapshot(c: &CommObj, k: Coll, mut a: Args) -> (Args, Vec<Vec<i64>>) {
    // A neighbourhood collective's arrays hold an entry a destination (send) or source
    // (receive); the others' an entry a member.
    let (ns, nr) = match neighbor::hood(c) {
        Ok(h) if matches!(k, Coll::NeighborAllgatherv | Coll::NeighborAlltoallv) => {
            (h.destinations.len(), h.sources.len())
        }
        _ => (c.size(), c.size()),
    };
    let at_root = a.root >= 0 && a.root as usize == c.rank;
    let in_place = is_in_place(a.sbuf.0);
    let (s, r) = match k {
        Coll::Gatherv => (false, at_root),
        Coll::Allgatherv | Coll::ReduceScatter => (false, true),
        Coll::Scatterv => (at_root, false),
        Coll::Alltoallv => (!in_place, true),
        Coll::NeighborAllgatherv => (false, true),
        Coll::NeighborAlltoallv => (true, true),
        _ => (false, false),
    };
    let mut keep = Vec::new();
    let mut take = |p: &mut SendPtr, wide: bool, n: usize| {
        if p.0.is_null() {
            return;
        }
        // SAFETY: `n` entries of the program's array (function contract).
        let v: Vec<i64> = unsafe { counts(p.0, n, wide) }.into_iter().map(|x| x as i64).collect();
        *p = SendPtr(v.as_ptr() as *mut c_void);
        keep.push(v);
    };
    let wide = a.wide;
    if s {
        take(&mut a.scounts, wide, ns);
        take(&mut a.sdispls, wide, ns);
    }
    if r {
        take(&mut a.rcounts, wide, nr);
        if !matches!(k, Coll::ReduceScatter) {
            take(&mut a.rdispls, wide, nr);
        }
    }
    if s || r {
        a.wide = true;
    }
    (a, keep)
}

/// Starts `k` on `c` (at a reserved tag: a persistent collective's start) and returns
/// the request's activity.
///
/// # Safety
/// As [`run`], for buffers until the request completes; arrays only for this call.
unsafe fn start(
    c: &Arc<CommObj>,
    k: Coll,
    a: &Args,
    held: &Held,
    at: Option<runthrough::Reserved>,
) -> Result<Active, c_int> {
    if let Some(i) = &c.inter {
        // SAFETY: forwarded (function contract).
        return unsafe { inter::start(c, &i.ic, k, a, held, at) };
    }
    // SAFETY: forwarded (function contract).
    let prepared = unsafe { prepare(c, k, a, held) }?;
    start_prepared(c, prepared, at)
}

unsafe fn nonblocking(comm: Handle, k: Coll, a: Args, request: *mut Handle) -> c_int {
    let c = comm!(comm);
    // SAFETY: forwarded program arguments.
    match unsafe { start(&c, k, &a, &Held::of(&a), None) } {
        Ok(act) => {
            // SAFETY: output argument.
            unsafe { *request = crate::req::new_active(comm, act) };
            MPI_SUCCESS
        }
        Err(e) => raise_on(comm, e),
    }
}

unsafe fn persistent(comm: Handle, k: Coll, a: Args, request: *mut Handle) -> c_int {
    let c = comm!(comm);
    // The count and displacement arrays are copied here, once: programs free them after
    // the call (mpi4py does), and each start reads the copies.
    // SAFETY: forwarded program arguments.
    let (a, keep) = unsafe { snapshot(&c, k, a) };
    // The datatypes and operation too: the program may free them while the request lives.
    let held = Held::of(&a);
    // MPI-4.1 6.13: persistent collectives match in the order of their initialisation
    // calls, whatever order they are started in: the tag is taken now, at every member
    // at the same point of its collectives.
    let reserved = match &c.inter {
        Some(i) => i.ic.reserve_collective(),
        None => c.comm.reserve_collective(),
    };
    let at = match reserved {
        Ok(t) => t,
        Err(e) => return raise_on(comm, code(e)),
    };
    let starter = Box::new(move || {
        let _keep = &keep;
        // SAFETY: the buffers are the program's, valid while the request lives (MPI
        // contract); the arrays are `keep`'s.
        unsafe { start(&c, k, &a, &held, Some(at)) }
    });
    // SAFETY: output argument.
    unsafe { *request = crate::req::persistent(comm, starter) };
    MPI_SUCCESS
}

fn p<T>(x: *const T) -> SendPtr {
    SendPtr(x as *mut c_void)
}

fn check_types(hs: &[Handle]) -> R {
    for &h in hs {
        if crate::dtype::lookup(h).is_none() {
            return Err(MPI_ERR_TYPE);
        }
    }
    Ok(())
}

macro_rules! forms {
    ($kind:ident, $block:ident, $nb:ident, $init:ident, ($($arg:ident : $t:ty),*), $args:expr, $types:expr) => {
        pub(crate) unsafe fn $block($($arg: $t,)* comm: Handle) -> c_int {
            if let Err(e) = check_types(&$types) { return raise_on(comm, e); }
            // SAFETY: forwarded program arguments.
            unsafe { blocking(comm, Coll::$kind, $args) }
        }
        pub(crate) unsafe fn $nb($($arg: $t,)* comm: Handle, request: *mut Handle) -> c_int {
            if let Err(e) = check_types(&$types) { return raise_on(comm, e); }
            // SAFETY: forwarded program arguments.
            unsafe { nonblocking(comm, Coll::$kind, $args, request) }
        }
        pub(crate) unsafe fn $init($($arg: $t,)* comm: Handle, _info: Handle, request: *mut Handle) -> c_int {
            if let Err(e) = check_types(&$types) { return raise_on(comm, e); }
            // SAFETY: forwarded program arguments.
            unsafe { persistent(comm, Coll::$kind, $args, request) }
        }
    };
}

forms!(Barrier, MPI_Barrier, MPI_Ibarrier, MPI_Barrier_init, (), Args::default(), []);
forms!(Bcast, MPI_Bcast, MPI_Ibcast, MPI_Bcast_init,
    (buffer: *mut c_void, count: c_int, datatype: Handle, root: c_int),
    Args { sbuf: p(buffer), scount: count.max(0) as usize, stype: datatype, root, ..Args::default() }, [datatype]);
forms!(Reduce, MPI_Reduce, MPI_Ireduce, MPI_Reduce_init,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle, root: c_int),
    Args { sbuf: p(sendbuf), rbuf: p(recvbuf), rcount: count.max(0) as usize, rtype: datatype, op, root, ..Args::default() }, [datatype]);
forms!(Allreduce, MPI_Allreduce, MPI_Iallreduce, MPI_Allreduce_init,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle),
    Args { sbuf: p(sendbuf), rbuf: p(recvbuf), rcount: count.max(0) as usize, rtype: datatype, op, ..Args::default() }, [datatype]);
forms!(Scan, MPI_Scan, MPI_Iscan, MPI_Scan_init,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle),
    Args { sbuf: p(sendbuf), rbuf: p(recvbuf), rcount: count.max(0) as usize, rtype: datatype, op, ..Args::default() }, [datatype]);
forms!(Exscan, MPI_Exscan, MPI_Iexscan, MPI_Exscan_init,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: Handle, op: Handle),
    Args { sbuf: p(sendbuf), rbuf: p(recvbuf), rcount: count.max(0) as usize, rtype: datatype, op, ..Args::default() }, [datatype]);
forms!(ReduceScatterBlock, MPI_Reduce_scatter_block, MPI_Ireduce_scatter_block, MPI_Reduce_scatter_block_init,
    (sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int, datatype: Handle, op: Handle),
    Args { sbuf: p(sendbuf), rbuf: p(recvbuf), rcount: recvcount.max(0) as usize, rtype: datatype, op, ..Args::default() }, [datatype]);
forms!(ReduceScatter, MPI_Reduce_scatter, MPI_Ireduce_scatter, MPI_Reduce_scatter_init,
    (sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int, datatype: Handle, op: Handle),
    Args { sbuf: p(sendbuf), rbuf: p(recvbuf), rcounts: p(recvcounts), rtype: datatype, op, ..Args::default() }, [datatype]);
forms!(Gather, MPI_Gather, MPI_Igather, MPI_Gather_init,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, root: c_int),
    Args { sbuf: p(sendbuf), scount: sendcount.max(0) as usize, stype: sendtype, rbuf: p(recvbuf), rcount: recvcount.max(0) as usize, rtype: recvtype, root, ..Args::default() }, []);
forms!(Allgather, MPI_Allgather, MPI_Iallgather, MPI_Allgather_init,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle),
    Args { sbuf: p(sendbuf), scount: sendcount.max(0) as usize, stype: sendtype, rbuf: p(recvbuf), rcount: recvcount.max(0) as usize, rtype: recvtype, ..Args::default() }, []);
forms!(Scatter, MPI_Scatter, MPI_Iscatter, MPI_Scatter_init,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, root: c_int),
    Args { sbuf: p(sendbuf), scount: sendcount.max(0) as usize, stype: sendtype, rbuf: p(recvbuf), rcount: recvcount.max(0) as usize, rtype: recvtype, root, ..Args::default() }, []);
forms!(Alltoall, MPI_Alltoall, MPI_Ialltoall, MPI_Alltoall_init,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle),
    Args { sbuf: p(sendbuf), scount: sendcount.max(0) as usize, stype: sendtype, rbuf: p(recvbuf), rcount: recvcount.max(0) as usize, rtype: recvtype, ..Args::default() }, []);
forms!(Gatherv, MPI_Gatherv, MPI_Igatherv, MPI_Gatherv_init,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: Handle, root: c_int),
    Args { sbuf: p(sendbuf), scount: sendcount.max(0) as usize, stype: sendtype, rbuf: p(recvbuf), rcounts: p(recvcounts), rdispls: p(displs), rtype: recvtype, root, ..Args::default() }, []);
forms!(Allgatherv, MPI_Allgatherv, MPI_Iallgatherv, MPI_Allgatherv_init,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: Handle),
    Args { sbuf: p(sendbuf), scount: sendcount.max(0) as usize, stype: sendtype, rbuf: p(recvbuf), rcounts: p(recvcounts), rdispls: p(displs), rtype: recvtype, ..Args::default() }, []);
forms!(Scatterv, MPI_Scatterv, MPI_Iscatterv, MPI_Scatterv_init,
    (sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle, root: c_int),
    Args { sbuf: p(sendbuf), scounts: p(sendcounts), sdispls: p(displs), stype: sendtype, rbuf: p(recvbuf), rcount: recvcount.max(0) as usize, rtype: recvtype, root, ..Args::default() }, []);
forms!(Alltoallv, MPI_Alltoallv, MPI_Ialltoallv, MPI_Alltoallv_init,
    (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: Handle),
    Args { sbuf: p(sendbuf), scounts: p(sendcounts), sdispls: p(sdispls), stype: sendtype, rbuf: p(recvbuf), rcounts: p(recvcounts), rdispls: p(rdispls), rtype: recvtype, ..Args::default() }, []);

forms!(NeighborAllgather, MPI_Neighbor_allgather, MPI_Ineighbor_allgather, MPI_Neighbor_allgather_init,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle),
    Args { sbuf: p(sendbuf), scount: sendcount.max(0) as usize, stype: sendtype, rbuf: p(recvbuf), rcount: recvcount.max(0) as usize, rtype: recvtype, ..Args::default() }, [sendtype, recvtype]);
forms!(NeighborAllgatherv, MPI_Neighbor_allgatherv, MPI_Ineighbor_allgatherv, MPI_Neighbor_allgatherv_init,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: Handle),
    Args { sbuf: p(sendbuf), scount: sendcount.max(0) as usize, stype: sendtype, rbuf: p(recvbuf), rcounts: p(recvcounts), rdispls: p(displs), rtype: recvtype, ..Args::default() }, [sendtype, recvtype]);
forms!(NeighborAlltoall, MPI_Neighbor_alltoall, MPI_Ineighbor_alltoall, MPI_Neighbor_alltoall_init,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: Handle, recvbuf: *mut c_void, recvcount: c_int, recvtype: Handle),
    Args { sbuf: p(sendbuf), scount: sendcount.max(0) as usize, stype: sendtype, rbuf: p(recvbuf), rcount: recvcount.max(0) as usize, rtype: recvtype, ..Args::default() }, [sendtype, recvtype]);
forms!(NeighborAlltoallv, MPI_Neighbor_alltoallv, MPI_Ineighbor_alltoallv, MPI_Neighbor_alltoallv_init,
    (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: Handle),
    Args { sbuf: p(sendbuf), scounts: p(sendcounts), sdispls: p(sdispls), stype: sendtype, rbuf: p(recvbuf), rcounts: p(recvcounts), rdispls: p(rdispls), rtype: recvtype, ..Args::default() }, [sendtype, recvtype]);

// The large-count forms: MPI_Count counts, MPI_Aint displacements.
forms!(Bcast, MPI_Bcast_c, MPI_Ibcast_c, MPI_Bcast_init_c,
    (buffer: *mut c_void, count: MPI_Count, datatype: Handle, root: c_int),
    Args { wide: true, sbuf: p(buffer), scount: count.max(0) as usize, stype: datatype, root, ..Args::default() }, [datatype]);
forms!(Reduce, MPI_Reduce_c, MPI_Ireduce_c, MPI_Reduce_init_c,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: MPI_Count, datatype: Handle, op: Handle, root: c_int),
    Args { wide: true, sbuf: p(sendbuf), rbuf: p(recvbuf), rcount: count.max(0) as usize, rtype: datatype, op, root, ..Args::default() }, [datatype]);
forms!(Allreduce, MPI_Allreduce_c, MPI_Iallreduce_c, MPI_Allreduce_init_c,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: MPI_Count, datatype: Handle, op: Handle),
    Args { wide: true, sbuf: p(sendbuf), rbuf: p(recvbuf), rcount: count.max(0) as usize, rtype: datatype, op, ..Args::default() }, [datatype]);
forms!(Scan, MPI_Scan_c, MPI_Iscan_c, MPI_Scan_init_c,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: MPI_Count, datatype: Handle, op: Handle),
    Args { wide: true, sbuf: p(sendbuf), rbuf: p(recvbuf), rcount: count.max(0) as usize, rtype: datatype, op, ..Args::default() }, [datatype]);
forms!(Exscan, MPI_Exscan_c, MPI_Iexscan_c, MPI_Exscan_init_c,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: MPI_Count, datatype: Handle, op: Handle),
    Args { wide: true, sbuf: p(sendbuf), rbuf: p(recvbuf), rcount: count.max(0) as usize, rtype: datatype, op, ..Args::default() }, [datatype]);
forms!(ReduceScatterBlock, MPI_Reduce_scatter_block_c, MPI_Ireduce_scatter_block_c, MPI_Reduce_scatter_block_init_c,
    (sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: MPI_Count, datatype: Handle, op: Handle),
    Args { wide: true, sbuf: p(sendbuf), rbuf: p(recvbuf), rcount: recvcount.max(0) as usize, rtype: datatype, op, ..Args::default() }, [datatype]);
forms!(ReduceScatter, MPI_Reduce_scatter_c, MPI_Ireduce_scatter_c, MPI_Reduce_scatter_init_c,
    (sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const MPI_Count, datatype: Handle, op: Handle),
    Args { wide: true, sbuf: p(sendbuf), rbuf: p(recvbuf), rcounts: p(recvcounts), rtype: datatype, op, ..Args::default() }, [datatype]);
forms!(Gather, MPI_Gather_c, MPI_Igather_c, MPI_Gather_init_c,
    (sendbuf: *const c_void, sendcount: MPI_Count, sendtype: Handle, recvbuf: *mut c_void, recvcount: MPI_Count, recvtype: Handle, root: c_int),
    Args { wide: true, sbuf: p(sendbuf), scount: sendcount.max(0) as usize, stype: sendtype, rbuf: p(recvbuf), rcount: recvcount.max(0) as usize, rtype: recvtype, root, ..Args::default() }, []);
forms!(Allgather, MPI_Allgather_c, MPI_Iallgather_c, MPI_Allgather_init_c,
    (sendbuf: *const c_void, sendcount: MPI_Count, sendtype: Handle, recvbuf: *mut c_void, recvcount: MPI_Count, recvtype: Handle),
    Args { wide: true, sbuf: p(sendbuf), scount: sendcount.max(0) as usize, stype: sendtype, rbuf: p(recvbuf), rcount: recvcount.max(0) as usize, rtype: recvtype, ..Args::default() }, []);
forms!(Scatter, MPI_Scatter_c, MPI_Iscatter_c, MPI_Scatter_init_c,
    (sendbuf: *const c_void, sendcount: MPI_Count, sendtype: Handle, recvbuf: *mut c_void, recvcount: MPI_Count, recvtype: Handle, root: c_int),
    Args { wide: true, sbuf: p(sendbuf), scount: sendcount.max(0) as usize, stype: sendtype, rbuf: p(recvbuf), rcount: recvcount.max(0) as usize, rtype: recvtype, root, ..Args::default() }, []);
forms!(Alltoall, MPI_Alltoall_c, MPI_Ialltoall_c, MPI_Alltoall_init_c,
    (sendbuf: *const c_void, sendcount: MPI_Count, sendtype: Handle, recvbuf: *mut c_void, recvcount: MPI_Count, recvtype: Handle),
    Args { wide: true, sbuf: p(sendbuf), scount: sendcount.max(0) as usize, stype: sendtype, rbuf: p(recvbuf), rcount: recvcount.max(0) as usize, rtype: recvtype, ..Args::default() }, []);
forms!(Gatherv, MPI_Gatherv_c, MPI_Igatherv_c, MPI_Gatherv_init_c,
    (sendbuf: *const c_void, sendcount: MPI_Count, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const MPI_Count, displs: *const MPI_Aint, recvtype: Handle, root: c_int),
    Args { wide: true, sbuf: p(sendbuf), scount: sendcount.max(0) as usize, stype: sendtype, rbuf: p(recvbuf), rcounts: p(recvcounts), rdispls: p(displs), rtype: recvtype, root, ..Args::default() }, []);
forms!(Allgatherv, MPI_Allgatherv_c, MPI_Iallgatherv_c, MPI_Allgatherv_init_c,
    (sendbuf: *const c_void, sendcount: MPI_Count, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const MPI_Count, displs: *const MPI_Aint, recvtype: Handle),
    Args { wide: true, sbuf: p(sendbuf), scount: sendcount.max(0) as usize, stype: sendtype, rbuf: p(recvbuf), rcounts: p(recvcounts), rdispls: p(displs), rtype: recvtype, ..Args::default() }, []);
forms!(Scatterv, MPI_Scatterv_c, MPI_Iscatterv_c, MPI_Scatterv_init_c,
    (sendbuf: *const c_void, sendcounts: *const MPI_Count, displs: *const MPI_Aint, sendtype: Handle, recvbuf: *mut c_void, recvcount: MPI_Count, recvtype: Handle, root: c_int),
    Args { wide: true, sbuf: p(sendbuf), scounts: p(sendcounts), sdispls: p(displs), stype: sendtype, rbuf: p(recvbuf), rcount: recvcount.max(0) as usize, rtype: recvtype, root, ..Args::default() }, []);
forms!(Alltoallv, MPI_Alltoallv_c, MPI_Ialltoallv_c, MPI_Alltoallv_init_c,
    (sendbuf: *const c_void, sendcounts: *const MPI_Count, sdispls: *const MPI_Aint, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const MPI_Count, rdispls: *const MPI_Aint, recvtype: Handle),
    Args { wide: true, sbuf: p(sendbuf), scounts: p(sendcounts), sdispls: p(sdispls), stype: sendtype, rbuf: p(recvbuf), rcounts: p(recvcounts), rdispls: p(rdispls), rtype: recvtype, ..Args::default() }, []);

/// The arguments of an MPI_Alltoallw, its arrays copied.
#[derive(Clone)]
struct Alltoallw {
    sbuf: SendPtr,
    rbuf: SendPtr,
    sc: Vec<usize>,
    sd: Vec<usize>,
    st: Vec<Arc<Dtype>>,
    rc: Vec<usize>,
    rd: Vec<usize>,
    rt: Vec<Arc<Dtype>>,
}

/// Reads MPI_Alltoallw's arrays (`size` entries each) into an [`Alltoallw`].
///
/// # Safety
/// The program's arrays (MPI contract).
#[allow(clippy::too_many_arguments)]
unsafe fn alltoallw_args(
    c: &CommObj,
    sbuf: *const c_void,
    scounts: *mut c_void,
    sdispls: *mut c_void,
    stypes: *const Handle,
    rbuf: *mut c_void,
    rcounts: *mut c_void,
    rdispls: *mut c_void,
    rtypes: *const Handle,
    wide: bool,
) -> Result<Alltoallw, c_int> {
    // One entry a peer: a remote member on an intercommunicator.
    let n = c.inter.as_ref().map_or(c.size(), |i| i.remote.len());
    let in_place = is_in_place(sbuf);
    // SAFETY: n entries each (function contract).
    let (rc, rd) = unsafe { (counts(rcounts, n, wide), counts(rdispls, n, wide)) };
    let (sc, sd) = if in_place {
        (rc.clone(), rd.clone())
    } else {
        // SAFETY: as above.
        unsafe { (counts(scounts, n, wide), counts(sdispls, n, wide)) }
    };
    let mut rt = Vec::with_capacity(n);
    let mut st = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: n datatypes each.
        let (r, s) = unsafe { (*rtypes.add(i), if in_place { *rtypes.add(i) } else { *stypes.add(i) }) };
        match (crate::dtype::lookup(r), crate::dtype::lookup(s)) {
            (Some(r), Some(s)) => {
                rt.push(r.into_arc());
                st.push(s.into_arc());
            }
            _ => return Err(MPI_ERR_TYPE),
        }
    }
    let sbase = if in_place { rbuf as *const c_void } else { sbuf };
    Ok(Alltoallw { sbuf: p(sbase), rbuf: SendPtr(rbuf), sc, sd, st, rc, rd, rt })
}

/// Runs an MPI_Alltoallw on `c`.
///
/// # Safety
/// The program's buffers, valid until it completes (MPI contract).
unsafe fn alltoallw_run(c: &CommObj, w: &Alltoallw) -> Result<(), c_int> {
    let n = w.sc.len();
    let (mut send, mut bsc, mut bsd) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..n {
        bsd.push(send.len());
        bsc.push(w.sc[i] * w.st[i].size);
        // SAFETY: the program's send buffer, block i at a byte displacement.
        unsafe { crate::dtype::pack_into(w.sbuf.0.cast::<u8>().add(w.sd[i]), w.sc[i], &w.st[i], &mut send) };
    }
    let brc: Vec<usize> = (0..n).map(|i| w.rc[i] * w.rt[i].size).collect();
    let mut brd = Vec::with_capacity(n);
    let mut off = 0;
    for b in &brc {
        brd.push(off);
        off += b;
    }
    let mut area = vec![0u8; off];
    match &c.inter {
        Some(i) => i.ic.alltoallv(&send, &bsc, &bsd, &mut area, &brc, &brd),
        None => c.comm.alltoallv(&send, &bsc, &bsd, &mut area, &brc, &brd),
    }
    .map_err(code)?;
    for i in 0..n {
        // SAFETY: the program's receive buffer, block i.
        unsafe {
            crate::dtype::unpack_from(
                &area[brd[i]..brd[i] + brc[i]],
                w.rbuf.0.cast::<u8>().add(w.rd[i]),
                w.rc[i],
                &w.rt[i],
            )
        };
    }
    Ok(())
}

/// How an MPI_Alltoallw call runs: now, started, or as a persistent request.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    Blocking,
    Nonblocking,
    Persistent,
}

/// MPI_Alltoallw in any form: per-peer counts, byte displacements and datatypes.
///
/// # Safety
/// The program's buffers and arrays of `size` entries (MPI contract).
#[allow(clippy::too_many_arguments)]
unsafe fn alltoallw(
    sbuf: *const c_void,
    scounts: *mut c_void,
    sdispls: *mut c_void,
    stypes: *const Handle,
    rbuf: *mut c_void,
    rcounts: *mut c_void,
    rdispls: *mut c_void,
    rtypes: *const Handle,
    comm: Handle,
    wide: bool,
    form: Form,
    request: *mut Handle,
) -> c_int {
    let c = comm!(comm);
    if c.inter.is_some() && is_in_place(sbuf) {
        return raise_on(comm, MPI_ERR_ARG);
    }
    // SAFETY: forwarded (function contract).
    let w = match unsafe { alltoallw_args(&c, sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, wide) } {
        Ok(w) => w,
        Err(e) => return raise_on(comm, e),
    };
    let start = move |c: &Arc<CommObj>, w: &Alltoallw, at: Option<runthrough::Reserved>| {
        if let Some(i) = &c.inter {
            // SAFETY: the program keeps the buffers valid until the request completes.
            return unsafe { inter::start_alltoallw(&i.ic, w, at) };
        }
        let sends = (0..w.sc.len()).map(|i| (w.sbuf.0, w.sc[i], w.sd[i] as isize, w.st[i].clone())).collect();
        let recvs = (0..w.rc.len()).map(|i| (w.rc[i], w.rd[i] as isize, w.rt[i].clone())).collect();
        // SAFETY: the program keeps the buffers valid until the request completes.
        let prepared = unsafe { owned::alltoall(c.rank, sends, recvs, w.rbuf) };
        start_prepared(c, prepared, at)
    };
    let act = match form {
        Form::Blocking => {
            // SAFETY: the program's buffers, for this call.
            return match unsafe { alltoallw_run(&c, &w) } {
                Ok(()) => MPI_SUCCESS,
                Err(e) => raise_on(comm, e),
            };
        }
        Form::Nonblocking => start(&c, &w, None),
        Form::Persistent => {
            let reserved = match &c.inter {
                Some(i) => i.ic.reserve_collective(),
                None => c.comm.reserve_collective(),
            };
            let at = match reserved {
                Ok(t) => t,
                Err(e) => return raise_on(comm, code(e)),
            };
            let c2 = c.clone();
            let starter = Box::new(move || start(&c2, &w, Some(at)));
            // SAFETY: output argument.
            unsafe { *request = crate::req::persistent(comm, starter) };
            return MPI_SUCCESS;
        }
    };
    match act {
        Ok(act) => {
            // SAFETY: output argument.
            unsafe { *request = crate::req::new_active(comm, act) };
            MPI_SUCCESS
        }
        Err(e) => raise_on(comm, e),
    }
}

pub(crate) unsafe fn MPI_Alltoallw(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtypes: *const Handle,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtypes: *const Handle,
    comm: Handle,
) -> c_int {
    // SAFETY: forwarded program arguments.
    unsafe {
        alltoallw(
            sendbuf,
            p(sendcounts).0,
            p(sdispls).0,
            sendtypes,
            recvbuf,
            p(recvcounts).0,
            p(rdispls).0,
            recvtypes,
            comm,
            false,
            Form::Blocking,
            std::ptr::null_mut(),
        )
    }
}

pub(crate) unsafe fn MPI_Alltoallw_c(
    sendbuf: *const c_void,
    sendcounts: *const MPI_Count,
    sdispls: *const MPI_Aint,
    sendtypes: *const Handle,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    rdispls: *const MPI_Aint,
    recvtypes: *const Handle,
    comm: Handle,
) -> c_int {
    // SAFETY: forwarded program arguments.
    unsafe {
        alltoallw(
            sendbuf,
            p(sendcounts).0,
            p(sdispls).0,
            sendtypes,
            recvbuf,
            p(recvcounts).0,
            p(rdispls).0,
            recvtypes,
            comm,
            true,
            Form::Blocking,
            std::ptr::null_mut(),
        )
    }
}

pub(crate) unsafe fn MPI_Ialltoallw(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtypes: *const Handle,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtypes: *const Handle,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    // SAFETY: forwarded program arguments.
    unsafe {
        alltoallw(
            sendbuf,
            p(sendcounts).0,
            p(sdispls).0,
            sendtypes,
            recvbuf,
            p(recvcounts).0,
            p(rdispls).0,
            recvtypes,
            comm,
            false,
            Form::Nonblocking,
            request,
        )
    }
}

pub(crate) unsafe fn MPI_Ialltoallw_c(
    sendbuf: *const c_void,
    sendcounts: *const MPI_Count,
    sdispls: *const MPI_Aint,
    sendtypes: *const Handle,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    rdispls: *const MPI_Aint,
    recvtypes: *const Handle,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    // SAFETY: forwarded program arguments.
    unsafe {
        alltoallw(
            sendbuf,
            p(sendcounts).0,
            p(sdispls).0,
            sendtypes,
            recvbuf,
            p(recvcounts).0,
            p(rdispls).0,
            recvtypes,
            comm,
            true,
            Form::Nonblocking,
            request,
        )
    }
}

pub(crate) unsafe fn MPI_Alltoallw_init(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtypes: *const Handle,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtypes: *const Handle,
    comm: Handle,
    info: Handle,
    request: *mut Handle,
) -> c_int {
    // SAFETY: forwarded program arguments.
    unsafe {
        alltoallw(
            sendbuf,
            p(sendcounts).0,
            p(sdispls).0,
            sendtypes,
            recvbuf,
            p(recvcounts).0,
            p(rdispls).0,
            recvtypes,
            comm,
            false,
            Form::Persistent,
            request,
        )
    }
}

pub(crate) unsafe fn MPI_Alltoallw_init_c(
    sendbuf: *const c_void,
    sendcounts: *const MPI_Count,
    sdispls: *const MPI_Aint,
    sendtypes: *const Handle,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    rdispls: *const MPI_Aint,
    recvtypes: *const Handle,
    comm: Handle,
    info: Handle,
    request: *mut Handle,
) -> c_int {
    // SAFETY: forwarded program arguments.
    unsafe {
        alltoallw(
            sendbuf,
            p(sendcounts).0,
            p(sdispls).0,
            sendtypes,
            recvbuf,
            p(recvcounts).0,
            p(rdispls).0,
            recvtypes,
            comm,
            true,
            Form::Persistent,
            request,
        )
    }
}
forms!(NeighborAllgather, MPI_Neighbor_allgather_c, MPI_Ineighbor_allgather_c, MPI_Neighbor_allgather_init_c,
    (sendbuf: *const c_void, sendcount: MPI_Count, sendtype: Handle, recvbuf: *mut c_void, recvcount: MPI_Count, recvtype: Handle),
    Args { wide: true, sbuf: p(sendbuf), scount: sendcount.max(0) as usize, stype: sendtype, rbuf: p(recvbuf), rcount: recvcount.max(0) as usize, rtype: recvtype, ..Args::default() }, [sendtype, recvtype]);
forms!(NeighborAllgatherv, MPI_Neighbor_allgatherv_c, MPI_Ineighbor_allgatherv_c, MPI_Neighbor_allgatherv_init_c,
    (sendbuf: *const c_void, sendcount: MPI_Count, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const MPI_Count, displs: *const MPI_Aint, recvtype: Handle),
    Args { wide: true, sbuf: p(sendbuf), scount: sendcount.max(0) as usize, stype: sendtype, rbuf: p(recvbuf), rcounts: p(recvcounts), rdispls: p(displs), rtype: recvtype, ..Args::default() }, [sendtype, recvtype]);
forms!(NeighborAlltoall, MPI_Neighbor_alltoall_c, MPI_Ineighbor_alltoall_c, MPI_Neighbor_alltoall_init_c,
    (sendbuf: *const c_void, sendcount: MPI_Count, sendtype: Handle, recvbuf: *mut c_void, recvcount: MPI_Count, recvtype: Handle),
    Args { wide: true, sbuf: p(sendbuf), scount: sendcount.max(0) as usize, stype: sendtype, rbuf: p(recvbuf), rcount: recvcount.max(0) as usize, rtype: recvtype, ..Args::default() }, [sendtype, recvtype]);
forms!(NeighborAlltoallv, MPI_Neighbor_alltoallv_c, MPI_Ineighbor_alltoallv_c, MPI_Neighbor_alltoallv_init_c,
    (sendbuf: *const c_void, sendcounts: *const MPI_Count, sdispls: *const MPI_Aint, sendtype: Handle, recvbuf: *mut c_void, recvcounts: *const MPI_Count, rdispls: *const MPI_Aint, recvtype: Handle),
    Args { wide: true, sbuf: p(sendbuf), scounts: p(sendcounts), sdispls: p(sdispls), stype: sendtype, rbuf: p(recvbuf), rcounts: p(recvcounts), rdispls: p(rdispls), rtype: recvtype, ..Args::default() }, [sendtype, recvtype]);
