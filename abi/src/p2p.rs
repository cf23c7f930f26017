//! Point-to-point: every send mode, receives, probes, matched probes, sendrecv.
//!
//! Synchronous and ready sends are standard sends (allowed for ready mode; for
//! synchronous mode the send may complete before the receive is posted when the message
//! fits the eager limit: a documented deviation, docs/ABI.md). Buffered sends and their
//! buffers are `bsend.rs`'s.

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use parking_lot::Mutex;
use runthrough::{Source, TagSel};

use crate::comm::comm;
use crate::commobj::CommObj;
use crate::consts::*;
use crate::dtype::{DtRef, Dtype};
use crate::raise::raise_on;
use crate::req::{Active, Unpack};
use crate::types::{Handle, MPI_Status, SendPtr};

mod large;
pub(crate) use large::*;

fn to_source(c: &CommObj, src: c_int) -> Result<Source, c_int> {
    match src {
        MPI_ANY_SOURCE => Ok(Source::Any),
        s => c.peer_index(s).map(Source::Rank).ok_or(MPI_ERR_RANK),
    }
}

/// `let t = dtype_n!(h, count);`: `dtype!` for a buffer of `count` elements — a count of 0
/// needs no datatype, so `MPI_DATATYPE_NULL` is accepted there (as MPICH does; an empty
/// message, typically to or from `MPI_PROC_NULL`).
macro_rules! dtype_n {
    ($h:expr, $count:expr) => {
        if $count == 0 && $h == crate::consts::MPI_DATATYPE_NULL {
            crate::dtype::lookup(crate::consts::MPI_BYTE).expect("MPI_BYTE is predefined")
        } else {
            crate::dtype::dtype!($h)
        }
    };
}
pub(crate) use dtype_n;

fn tag_sel(tag: c_int) -> Result<TagSel, c_int> {
    match tag {
        MPI_ANY_TAG => Ok(TagSel::Any),
        t if (0..=runthrough::TAG_UB).contains(&t) => Ok(TagSel::Tag(t)),
        _ => Err(MPI_ERR_TAG),
    }
}

/// Starts a send of `count` elements of `t` at `buf` to `dest`.
///
/// # Safety
/// The program's buffer stays valid until the request completes.
pub(crate) unsafe fn start_send(
    c: &Arc<CommObj>,
    buf: *const c_void,
    count: usize,
    t: &Dtype,
    dest: c_int,
    tag: c_int,
) -> Result<Active, c_int> {
    // SAFETY: forwarded (function contract).
    unsafe { start_send_mode(c, buf, count, t, dest, tag, false) }
}

/// [`start_send`], in synchronous mode when `sync` (it completes once matched).
///
/// # Safety
/// As [`start_send`].
pub(crate) unsafe fn start_send_mode(
    c: &Arc<CommObj>,
    buf: *const c_void,
    count: usize,
    t: &Dtype,
    dest: c_int,
    tag: c_int,
    sync: bool,
) -> Result<Active, c_int> {
    if dest == MPI_PROC_NULL {
        // Even with no peer, a revoked communicator fails the call (ULFM).
        let err = if c.comm.is_revoked() { MPIX_ERR_REVOKED } else { MPI_SUCCESS };
        return Ok(Active::Done { status: MPI_Status::proc_null(), err });
    }
    let Some(idx) = c.peer_index(dest) else { return Err(MPI_ERR_RANK) };
    let target = c.comm.send_target(idx, tag).map_err(|e| crate::err::code_of(&e))?;
    let eng = c.comm.engine().clone();
    let (bytes, tmp): (&'static [u8], Option<Vec<u8>>) = if t.contiguous() {
        let n = count * t.size;
        if n == 0 {
            (&[], None)
        } else {
            // SAFETY: the program's buffer, valid until completion (function contract).
            (unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), n) }, None)
        }
    } else {
        let mut v = Vec::new();
        // SAFETY: the program's buffer of `count` elements.
        unsafe { crate::dtype::pack_into(buf.cast(), count, t, &mut v) };
        // SAFETY: the Vec's heap block does not move when the Vec is moved into the
        // request, which drops the engine request before it.
        let s = unsafe { std::slice::from_raw_parts(v.as_ptr(), v.len()) };
        (s, Some(v))
    };
    // SAFETY: `eng` is kept in the request next to `raw` (dropped after it); `bytes` is
    // valid until the request completes (see above). The message's sequence number names
    // it for MPI_Cancel (req.rs).
    let (raw, seq) = unsafe {
        let e: &'static runthrough_engine::lock::BiasedMutex<runthrough_engine::Engine> = &*Arc::as_ptr(&eng);
        runthrough_engine::isend_unscoped_seq(e, target, bytes, sync)
    };
    let cancel = seq.map(|seq| crate::req::SendTicket::new(target.peer, seq));
    Ok(Active::P2p { raw, unpack: None, _tmp: tmp, comm: c.clone(), _eng: eng, cancel })
}

/// Starts a receive of up to `count` elements of `t` into `buf` from `src`.
///
/// # Safety
/// The program's buffer stays valid until the request completes.
pub(crate) unsafe fn start_recv(
    c: &Arc<CommObj>,
    buf: *mut c_void,
    count: usize,
    t: &DtRef,
    src: c_int,
    tag: c_int,
) -> Result<Active, c_int> {
    if src == MPI_PROC_NULL {
        let err = if c.comm.is_revoked() { MPIX_ERR_REVOKED } else { MPI_SUCCESS };
        return Ok(Active::Done { status: MPI_Status::proc_null(), err });
    }
    let s = to_source(c, src)?;
    let tg = tag_sel(tag)?;
    let (pattern, peer) = c.comm.recv_pattern(s, tg).map_err(|e| crate::err::code_of(&e))?;
    let eng = c.comm.engine().clone();
    let n = count * t.size;
    let (bytes, unpack): (&'static mut [u8], Option<Unpack>) = if t.contiguous() {
        if n == 0 {
            (&mut [], None)
        } else {
            // SAFETY: the program's buffer, valid until completion (function contract).
            (unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), n) }, None)
        }
    } else {
        let mut u = Unpack { tmp: vec![0u8; n], buf: SendPtr(buf), count, t: t.clone().into_arc() };
        // SAFETY: the Vec's heap block stays put inside the request, which drops the
        // engine request first.
        let s = unsafe { std::slice::from_raw_parts_mut(u.tmp.as_mut_ptr(), n) };
        (s, Some(u))
    };
    // SAFETY: as in `start_send`.
    let raw = unsafe {
        let e: &'static runthrough_engine::lock::BiasedMutex<runthrough_engine::Engine> = &*Arc::as_ptr(&eng);
        runthrough_engine::irecv_unscoped(e, pattern, peer, bytes)
    };
    Ok(Active::P2p { raw, unpack, _tmp: None, comm: c.clone(), _eng: eng, cancel: None })
}

/// Waits for `a` inline (blocking calls) and applies the error handler of `comm`.
unsafe fn wait_inline(comm: Handle, a: Active, status: *mut MPI_Status) -> c_int {
    let h = crate::req::new_active(comm, a);
    let mut h = h;
    // SAFETY: a request handle just created; forwarded status.
    unsafe { crate::req::MPI_Wait(&mut h, status) }
}

macro_rules! start_or_raise {
    ($comm:expr, $e:expr) => {
        match $e {
            Ok(a) => a,
            Err(code) => return raise_on($comm, code),
        }
    };
}

/// A blocking standard-mode send of `count` contiguous elements of `elem` bytes to a
/// rank through the engine's blocking call (no request object); `None` when the arguments need the general path, which also
/// reports every argument error. Inlined into `MPI_Send`: this is the path the 8 B
/// latency measures, so it checks each argument once and builds no `Error` unless the
/// engine returns one.
///
/// # Safety
/// The program's buffer of `count` elements (MPI contract).
#[inline(always)]
unsafe fn fast_send(
    c: &CommObj,
    comm: Handle,
    elem: usize,
    buf: *const c_void,
    count: i64,
    dest: c_int,
    tag: c_int,
) -> Option<c_int> {
    if c.inter.is_some() || dest < 0 {
        return None;
    }
    let target = c.comm.send_target_valid(dest as usize, tag)?;
    let n = count as usize * elem;
    let bytes: &[u8] = if n == 0 {
        &[]
    } else {
        // SAFETY: the program's buffer of `count` elements, read during this call.
        unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), n) }
    };
    let r = runthrough_engine::send(c.comm.engine(), target, bytes);
    Some(match r {
        Ok(_) => MPI_SUCCESS,
        Err(e) => send_failed(c, comm, e),
    })
}

/// The error of a blocking send that reached the engine, through the error handler.
#[cold]
#[inline(never)]
fn send_failed(c: &CommObj, comm: Handle, e: runthrough::Error) -> c_int {
    crate::raise::raise_error(comm, &c.comm.check_error(e))
}

/// A blocking receive of up to `count` contiguous elements of `elem` bytes from a rank
/// or MPI_ANY_SOURCE through the engine's blocking call; `None` when the arguments need the general path (which reports every
/// argument error). Inlined into `MPI_Recv` (see [`fast_send`]).
///
/// # Safety
/// The program's buffer of `count` elements (MPI contract); `status` writable or null.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn fast_recv(
    c: &CommObj,
    comm: Handle,
    elem: usize,
    buf: *mut c_void,
    count: i64,
    src: c_int,
    tag: c_int,
    status: *mut MPI_Status,
) -> Option<c_int> {
    if c.inter.is_some() {
        return None;
    }
    let src = match src {
        MPI_ANY_SOURCE => None,
        s if s >= 0 => Some(s as usize),
        _ => return None,
    };
    let tag = if tag == MPI_ANY_TAG { None } else { Some(tag) };
    let (pattern, peer) = c.comm.recv_pattern_valid(src, tag)?;
    let n = count as usize * elem;
    let bytes: &mut [u8] = if n == 0 {
        &mut []
    } else {
        // SAFETY: the program's buffer of `count` elements, written during this call.
        unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), n) }
    };
    Some(match runthrough_engine::recv(c.comm.engine(), pattern, peer, bytes) {
        Ok(st) => {
            if !status.is_null() {
                // SAFETY: the program's writable status (MPI contract); its error field
                // is left as it was.
                unsafe { crate::status::put_status(status, MPI_Status::new(st.source as c_int, st.tag, st.len)) };
            }
            MPI_SUCCESS
        }
        // SAFETY: forwarded output argument.
        Err(e) => unsafe { recv_failed(c, comm, e, status) },
    })
}

/// The error of a blocking receive that reached the engine: the status names the failed
/// source, then the error handler runs.
///
/// # Safety
/// `status` writable or null.
#[cold]
#[inline(never)]
unsafe fn recv_failed(c: &CommObj, comm: Handle, e: runthrough::Error, status: *mut MPI_Status) -> c_int {
    let e = c.comm.check_error(e);
    let mut st = MPI_Status::empty();
    if let runthrough::Error::RankFailStop { rank } = &e {
        st.MPI_SOURCE = c.world.iter().position(|w| w == rank).map_or(MPI_PROC_NULL, |i| i as c_int);
    }
    st.MPI_ERROR = crate::err::code_of(&e);
    // SAFETY: output argument.
    unsafe { crate::status::put_status(status, st) };
    crate::raise::raise_error(comm, &e)
}

/// MPI_Send and its relatives: the hot path (MPI_COMM_WORLD or MPI_COMM_SELF, a
/// predefined contiguous type, standard mode) inlined, everything else out of line.
#[inline(always)]
unsafe fn send_common(
    buf: *const c_void,
    count: i64,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    sync: bool,
) -> c_int {
    if !sync && count >= 0 {
        if let (Some(c), Some(size)) =
            (crate::rt::lookup_static(comm), crate::dtype::contiguous_predefined_size(datatype))
        {
            // SAFETY: forwarded program arguments.
            if let Some(rc) = unsafe { fast_send(c, comm, size, buf, count, dest, tag) } {
                return rc;
            }
        }
    }
    // SAFETY: forwarded program arguments.
    unsafe { send_general(buf, count, datatype, dest, tag, comm, sync) }
}

/// [`send_common`] for every other case (any communicator or type, synchronous mode,
/// every argument error).
#[inline(never)]
unsafe fn send_general(
    buf: *const c_void,
    count: i64,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    sync: bool,
) -> c_int {
    let c = comm!(comm);
    let t = dtype_n!(datatype, count);
    if count < 0 {
        return raise_on(comm, MPI_ERR_COUNT);
    }
    if !sync && t.contiguous() {
        // SAFETY: forwarded program arguments.
        if let Some(rc) = unsafe { fast_send(&c, comm, t.size, buf, count, dest, tag) } {
            return rc;
        }
    }
    // SAFETY: the program's buffer (MPI contract); a blocking call.
    let a = start_or_raise!(comm, unsafe { start_send_mode(&c, buf, count as usize, &t, dest, tag, sync) });
    // SAFETY: as above.
    unsafe { wait_inline(comm, a, std::ptr::null_mut()) }
}

unsafe fn isend_common(
    buf: *const c_void,
    count: i64,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut Handle,
    sync: bool,
) -> c_int {
    let c = comm!(comm);
    let t = dtype_n!(datatype, count);
    if count < 0 {
        return raise_on(comm, MPI_ERR_COUNT);
    }
    // SAFETY: the program's buffer stays valid until completion (MPI contract).
    let a = start_or_raise!(comm, unsafe { start_send_mode(&c, buf, count as usize, &t, dest, tag, sync) });
    // SAFETY: output argument.
    unsafe { *request = crate::req::new_active(comm, a) };
    MPI_SUCCESS
}

/// MPI_Recv and its relatives: the hot path (MPI_COMM_WORLD or MPI_COMM_SELF, a
/// predefined contiguous type) inlined, everything else out of line.
#[inline(always)]
unsafe fn recv_common(
    buf: *mut c_void,
    count: i64,
    datatype: Handle,
    src: c_int,
    tag: c_int,
    comm: Handle,
    status: *mut MPI_Status,
) -> c_int {
    if count >= 0 {
        if let (Some(c), Some(size)) =
            (crate::rt::lookup_static(comm), crate::dtype::contiguous_predefined_size(datatype))
        {
            // SAFETY: forwarded program arguments.
            if let Some(rc) = unsafe { fast_recv(c, comm, size, buf, count, src, tag, status) } {
                return rc;
            }
        }
    }
    // SAFETY: forwarded program arguments.
    unsafe { recv_general(buf, count, datatype, src, tag, comm, status) }
}

/// [`recv_common`] for every other case (any communicator or type, every argument
/// error).
#[inline(never)]
unsafe fn recv_general(
    buf: *mut c_void,
    count: i64,
    datatype: Handle,
    src: c_int,
    tag: c_int,
    comm: Handle,
    status: *mut MPI_Status,
) -> c_int {
    let c = comm!(comm);
    let t = dtype_n!(datatype, count);
    if count < 0 {
        return raise_on(comm, MPI_ERR_COUNT);
    }
    if t.contiguous() {
        // SAFETY: forwarded program arguments.
        if let Some(rc) = unsafe { fast_recv(&c, comm, t.size, buf, count, src, tag, status) } {
            return rc;
        }
    }
    // SAFETY: the program's buffer; a blocking call.
    let a = start_or_raise!(comm, unsafe { start_recv(&c, buf, count as usize, &t, src, tag) });
    // SAFETY: as above.
    unsafe { wait_inline(comm, a, status) }
}

unsafe fn irecv_common(
    buf: *mut c_void,
    count: i64,
    datatype: Handle,
    src: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    let c = comm!(comm);
    let t = dtype_n!(datatype, count);
    if count < 0 {
        return raise_on(comm, MPI_ERR_COUNT);
    }
    // SAFETY: the program's buffer stays valid until completion (MPI contract).
    let a = start_or_raise!(comm, unsafe { start_recv(&c, buf, count as usize, &t, src, tag) });
    // SAFETY: output argument.
    unsafe { *request = crate::req::new_active(comm, a) };
    MPI_SUCCESS
}

#[inline(always)]
pub(crate) unsafe fn MPI_Send(
    buf: *const c_void,
    count: c_int,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { send_common(buf, count as i64, datatype, dest, tag, comm, false) }
}
pub(crate) unsafe fn MPI_Send_c(
    buf: *const c_void,
    count: i64,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { send_common(buf, count, datatype, dest, tag, comm, false) }
}
pub(crate) unsafe fn MPI_Ssend(
    buf: *const c_void,
    count: c_int,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { send_common(buf, count as i64, datatype, dest, tag, comm, true) }
}
pub(crate) unsafe fn MPI_Ssend_c(
    buf: *const c_void,
    count: i64,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { send_common(buf, count, datatype, dest, tag, comm, true) }
}
pub(crate) unsafe fn MPI_Rsend(
    buf: *const c_void,
    count: c_int,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { send_common(buf, count as i64, datatype, dest, tag, comm, false) }
}
pub(crate) unsafe fn MPI_Rsend_c(
    buf: *const c_void,
    count: i64,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { send_common(buf, count, datatype, dest, tag, comm, false) }
}

pub(crate) unsafe fn MPI_Isend(
    buf: *const c_void,
    count: c_int,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { isend_common(buf, count as i64, datatype, dest, tag, comm, request, false) }
}
pub(crate) unsafe fn MPI_Isend_c(
    buf: *const c_void,
    count: i64,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { isend_common(buf, count, datatype, dest, tag, comm, request, false) }
}
pub(crate) unsafe fn MPI_Issend(
    buf: *const c_void,
    count: c_int,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { isend_common(buf, count as i64, datatype, dest, tag, comm, request, true) }
}
pub(crate) unsafe fn MPI_Issend_c(
    buf: *const c_void,
    count: i64,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { isend_common(buf, count, datatype, dest, tag, comm, request, true) }
}
pub(crate) unsafe fn MPI_Irsend(
    buf: *const c_void,
    count: c_int,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { isend_common(buf, count as i64, datatype, dest, tag, comm, request, false) }
}
pub(crate) unsafe fn MPI_Irsend_c(
    buf: *const c_void,
    count: i64,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { isend_common(buf, count, datatype, dest, tag, comm, request, false) }
}

#[inline(always)]
pub(crate) unsafe fn MPI_Recv(
    buf: *mut c_void,
    count: c_int,
    datatype: Handle,
    source: c_int,
    tag: c_int,
    comm: Handle,
    status: *mut MPI_Status,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { recv_common(buf, count as i64, datatype, source, tag, comm, status) }
}
pub(crate) unsafe fn MPI_Recv_c(
    buf: *mut c_void,
    count: i64,
    datatype: Handle,
    source: c_int,
    tag: c_int,
    comm: Handle,
    status: *mut MPI_Status,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { recv_common(buf, count, datatype, source, tag, comm, status) }
}
pub(crate) unsafe fn MPI_Irecv(
    buf: *mut c_void,
    count: c_int,
    datatype: Handle,
    source: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { irecv_common(buf, count as i64, datatype, source, tag, comm, request) }
}
pub(crate) unsafe fn MPI_Irecv_c(
    buf: *mut c_void,
    count: i64,
    datatype: Handle,
    source: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { irecv_common(buf, count, datatype, source, tag, comm, request) }
}

// Persistent point-to-point.

unsafe fn send_init(
    buf: *const c_void,
    count: c_int,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut Handle,
    sync: bool,
) -> c_int {
    let c = comm!(comm);
    let t = dtype_n!(datatype, count);
    if count < 0 {
        return raise_on(comm, MPI_ERR_COUNT);
    }
    let p = SendPtr(buf as *mut c_void);
    let start = Box::new(move || {
        let p = p;
        // SAFETY: the program keeps the buffer valid while the request is active.
        unsafe { start_send_mode(&c, p.0, count as usize, &t, dest, tag, sync) }
    });
    // SAFETY: output argument.
    unsafe { *request = crate::req::persistent(comm, start) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Send_init(
    buf: *const c_void,
    count: c_int,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { send_init(buf, count, datatype, dest, tag, comm, request, false) }
}
pub(crate) unsafe fn MPI_Ssend_init(
    buf: *const c_void,
    count: c_int,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { send_init(buf, count, datatype, dest, tag, comm, request, true) }
}
pub(crate) unsafe fn MPI_Rsend_init(
    buf: *const c_void,
    count: c_int,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { send_init(buf, count, datatype, dest, tag, comm, request, false) }
}

pub(crate) unsafe fn MPI_Recv_init(
    buf: *mut c_void,
    count: c_int,
    datatype: Handle,
    source: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    let c = comm!(comm);
    let t = dtype_n!(datatype, count);
    if count < 0 {
        return raise_on(comm, MPI_ERR_COUNT);
    }
    let p = SendPtr(buf);
    let start = Box::new(move || {
        let p = p;
        // SAFETY: the program keeps the buffer valid while the request is active.
        unsafe { start_recv(&c, p.0, count as usize, &t, source, tag) }
    });
    // SAFETY: output argument.
    unsafe { *request = crate::req::persistent(comm, start) };
    MPI_SUCCESS
}

// Probes.

unsafe fn probe_common(
    c: &Arc<CommObj>,
    comm: Handle,
    source: c_int,
    tag: c_int,
    block: bool,
) -> Result<Option<MPI_Status>, c_int> {
    if source == MPI_PROC_NULL {
        return Ok(Some(MPI_Status::proc_null()));
    }
    let s = to_source(c, source).map_err(|e| raise_on(comm, e))?;
    let tg = tag_sel(tag).map_err(|e| raise_on(comm, e))?;
    let r = if block { c.comm.probe(s, tg).map(Some) } else { c.comm.iprobe(s, tg) };
    match r {
        Ok(Some(st)) => Ok(Some(MPI_Status::new(c.source_rank(st.source), st.tag, st.len))),
        Ok(None) => Ok(None),
        Err(e) => Err(crate::raise::raise_error(comm, &e)),
    }
}

pub(crate) unsafe fn MPI_Probe(source: c_int, tag: c_int, comm: Handle, status: *mut MPI_Status) -> c_int {
    let c = comm!(comm);
    // SAFETY: forwarded.
    match unsafe { probe_common(&c, comm, source, tag, true) } {
        Ok(st) => {
            // SAFETY: output argument.
            unsafe { crate::status::put_status(status, st.unwrap_or_else(MPI_Status::empty)) };
            MPI_SUCCESS
        }
        Err(e) => e,
    }
}

pub(crate) unsafe fn MPI_Iprobe(
    source: c_int,
    tag: c_int,
    comm: Handle,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    let c = comm!(comm);
    // SAFETY: forwarded.
    match unsafe { probe_common(&c, comm, source, tag, false) } {
        Ok(st) => {
            // SAFETY: output arguments.
            unsafe {
                *flag = st.is_some() as c_int;
                if let Some(st) = st {
                    crate::status::put_status(status, st);
                }
            }
            MPI_SUCCESS
        }
        Err(e) => e,
    }
}

/// A matched message (MPI_Mprobe): received into the library's buffer at match time.
pub(crate) struct Message {
    data: Vec<u8>,
    status: MPI_Status,
    comm: Handle,
}

pub(crate) static MESSAGES: crate::handles::Table<Mutex<Option<Message>>> =
    crate::handles::Table::new(crate::handles::Kind::Message);

unsafe fn mprobe_common(
    source: c_int,
    tag: c_int,
    comm: Handle,
    message: *mut Handle,
    status: *mut MPI_Status,
    block: bool,
) -> Result<bool, c_int> {
    let c = crate::rt::lookup(comm).map_err(|e| raise_on(MPI_COMM_WORLD, e))?;
    if source == MPI_PROC_NULL {
        // SAFETY: output arguments.
        unsafe {
            *message = MPI_MESSAGE_NO_PROC;
            crate::status::put_status(status, MPI_Status::proc_null());
        }
        return Ok(true);
    }
    // SAFETY: forwarded.
    let Some(st) = (unsafe { probe_common(&c, comm, source, tag, block) })? else { return Ok(false) };
    // Take exactly that message now (same source and tag: the first such message is the
    // probed one, messages between a pair are not overtaken).
    let mut data = vec![0u8; st.bytes() as usize];
    let byte = crate::dtype::lookup(MPI_BYTE).expect("MPI_BYTE is predefined");
    // SAFETY: the library's own buffer, waited for before it is used.
    let a = unsafe { start_recv(&c, data.as_mut_ptr().cast(), data.len(), &byte, st.MPI_SOURCE, st.MPI_TAG) }
        .map_err(|e| raise_on(comm, e))?;
    let mut got = MPI_Status::default();
    // SAFETY: as above.
    let rc = unsafe { wait_inline(comm, a, &mut got) };
    if rc != MPI_SUCCESS {
        return Err(rc);
    }
    data.truncate(got.bytes() as usize);
    let h = MESSAGES.insert(Arc::new(Mutex::new(Some(Message { data, status: got, comm }))));
    // SAFETY: output arguments.
    unsafe {
        *message = h;
        crate::status::put_status(status, got);
    }
    Ok(true)
}

pub(crate) unsafe fn MPI_Mprobe(
    source: c_int,
    tag: c_int,
    comm: Handle,
    message: *mut Handle,
    status: *mut MPI_Status,
) -> c_int {
    // SAFETY: forwarded.
    match unsafe { mprobe_common(source, tag, comm, message, status, true) } {
        Ok(_) => MPI_SUCCESS,
        Err(e) => e,
    }
}

pub(crate) unsafe fn MPI_Improbe(
    source: c_int,
    tag: c_int,
    comm: Handle,
    flag: *mut c_int,
    message: *mut Handle,
    status: *mut MPI_Status,
) -> c_int {
    // SAFETY: forwarded.
    match unsafe { mprobe_common(source, tag, comm, message, status, false) } {
        Ok(f) => {
            // SAFETY: output argument.
            unsafe { *flag = f as c_int };
            MPI_SUCCESS
        }
        Err(e) => e,
    }
}

unsafe fn mrecv(
    buf: *mut c_void,
    count: i64,
    datatype: Handle,
    message: *mut Handle,
) -> Result<MPI_Status, (Handle, c_int)> {
    // SAFETY: in/out argument.
    let h = unsafe { *message };
    if h == MPI_MESSAGE_NO_PROC {
        // SAFETY: in/out argument.
        unsafe { *message = MPI_MESSAGE_NULL };
        return Ok(MPI_Status::proc_null());
    }
    let t = crate::dtype::lookup(datatype).ok_or((MPI_COMM_WORLD, MPI_ERR_TYPE))?;
    let m = MESSAGES.remove(h).and_then(|m| m.lock().take()).ok_or((MPI_COMM_WORLD, MPI_ERR_REQUEST))?;
    // SAFETY: in/out argument.
    unsafe { *message = MPI_MESSAGE_NULL };
    let room = count.max(0) as usize * t.size;
    let n = m.data.len().min(room);
    // SAFETY: the program's buffer of `count` elements (MPI contract).
    unsafe { crate::dtype::unpack_from(&m.data[..n], buf.cast(), count.max(0) as usize, &t) };
    if m.data.len() > room {
        return Err((m.comm, MPI_ERR_TRUNCATE));
    }
    Ok(m.status)
}

pub(crate) unsafe fn MPI_Mrecv(
    buf: *mut c_void,
    count: c_int,
    datatype: Handle,
    message: *mut Handle,
    status: *mut MPI_Status,
) -> c_int {
    // SAFETY: forwarded.
    match unsafe { mrecv(buf, count as i64, datatype, message) } {
        Ok(st) => {
            // SAFETY: output argument.
            unsafe { crate::status::put_status(status, st) };
            MPI_SUCCESS
        }
        Err((c, e)) => raise_on(c, e),
    }
}

pub(crate) unsafe fn MPI_Imrecv(
    buf: *mut c_void,
    count: c_int,
    datatype: Handle,
    message: *mut Handle,
    request: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    let (st, err, comm) = match unsafe { mrecv(buf, count as i64, datatype, message) } {
        Ok(st) => (st, MPI_SUCCESS, MPI_COMM_WORLD),
        Err((c, e)) => (MPI_Status::empty(), e, c),
    };
    // SAFETY: output argument.
    unsafe { *request = crate::req::completed(comm, st, err) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Sendrecv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Handle,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Handle,
    source: c_int,
    recvtag: c_int,
    comm: Handle,
    status: *mut MPI_Status,
) -> c_int {
    let c = comm!(comm);
    let st = dtype_n!(sendtype, sendcount);
    let rt = dtype_n!(recvtype, recvcount);
    if sendcount < 0 || recvcount < 0 {
        return raise_on(comm, MPI_ERR_COUNT);
    }
    // SAFETY: the program's buffers; both requests are completed before returning.
    let r = start_or_raise!(comm, unsafe { start_recv(&c, recvbuf, recvcount as usize, &rt, source, recvtag) });
    // SAFETY: as above.
    let s = start_or_raise!(comm, unsafe { start_send(&c, sendbuf, sendcount as usize, &st, dest, sendtag) });
    // One operation of two, as MPI_Isendrecv: the status is the receive's, the error the
    // first that failed, raised once through the communicator's handler.
    // SAFETY: the program's status (or MPI_STATUS_IGNORE); the buffers as above.
    unsafe { wait_inline(comm, Active::Group(vec![r, s], vec![None, None], None), status) }
}

pub(crate) unsafe fn MPI_Sendrecv_replace(
    buf: *mut c_void,
    count: c_int,
    datatype: Handle,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: Handle,
    status: *mut MPI_Status,
) -> c_int {
    let t = dtype_n!(datatype, count);
    let mut copy = Vec::new();
    // SAFETY: the program's buffer of `count` elements.
    unsafe { crate::dtype::pack_into(buf.cast(), count.max(0) as usize, &t, &mut copy) };
    let n = copy.len() as c_int;
    // SAFETY: `copy` outlives the call; the receive goes to the program's buffer.
    unsafe {
        MPI_Sendrecv(
            copy.as_ptr().cast(),
            n,
            MPI_BYTE,
            dest,
            sendtag,
            buf,
            count,
            datatype,
            source,
            recvtag,
            comm,
            status,
        )
    }
}

pub(crate) unsafe fn MPI_Isendrecv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: Handle,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: Handle,
    source: c_int,
    recvtag: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    let c = comm!(comm);
    let st = dtype_n!(sendtype, sendcount);
    let rt = dtype_n!(recvtype, recvcount);
    if sendcount < 0 || recvcount < 0 {
        return raise_on(comm, MPI_ERR_COUNT);
    }
    // SAFETY: the program keeps both buffers valid until the request completes.
    let r = start_or_raise!(comm, unsafe { start_recv(&c, recvbuf, recvcount as usize, &rt, source, recvtag) });
    // SAFETY: as above.
    let s = start_or_raise!(comm, unsafe { start_send(&c, sendbuf, sendcount as usize, &st, dest, sendtag) });
    // SAFETY: output argument.
    unsafe { *request = crate::req::new_active(comm, Active::Group(vec![r, s], vec![None, None], None)) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Isendrecv_replace(
    buf: *mut c_void,
    count: c_int,
    datatype: Handle,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    let c = comm!(comm);
    let t = dtype_n!(datatype, count);
    if count < 0 {
        return raise_on(comm, MPI_ERR_COUNT);
    }
    let mut copy = Vec::new();
    // SAFETY: the program's buffer of `count` elements.
    unsafe { crate::dtype::pack_into(buf.cast(), count as usize, &t, &mut copy) };
    let byte = crate::dtype::lookup(MPI_BYTE).expect("MPI_BYTE is predefined");
    // SAFETY: the program keeps `buf` valid until completion; the send reads `copy`,
    // whose heap block moves into the request with it and is dropped after it.
    let r = start_or_raise!(comm, unsafe { start_recv(&c, buf, count as usize, &t, source, recvtag) });
    // SAFETY: as above.
    let s = start_or_raise!(comm, unsafe { start_send(&c, copy.as_ptr().cast(), copy.len(), &byte, dest, sendtag) });
    // SAFETY: output argument.
    unsafe { *request = crate::req::new_active(comm, Active::Group(vec![r, s], vec![None, None], Some(copy))) };
    MPI_SUCCESS
}
