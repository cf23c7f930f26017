//! Buffered mode (MPI-4.1 3.6): MPI_Bsend, MPI_Ibsend, MPI_Bsend_init and the buffers
//! they use: the process's (MPI_Buffer_attach), a communicator's
//! (MPI_Comm_attach_buffer) and a session's (MPI_Session_attach_buffer), with their
//! detach, flush and iflush calls.
//!
//! A buffered send packs its message into the attached buffer and sends it from there in
//! the background. Each message takes its packed size plus `MPI_BSEND_OVERHEAD` bytes
//! of the buffer (no alignment padding: a buffer of a message's size plus the overhead
//! holds it, as the standard promises), placed first-fit (which succeeds wherever
//! the standard's circular, contiguous allocation would); a message's space is free
//! again once its send completed (the transport took an eager message, the receiver
//! pulled a rendezvous). A send that does not fit the free space, after the space of the
//! messages already transmitted is reclaimed, fails with MPI_ERR_BUFFER, as does one
//! with no buffer attached (MPI behaves as with a zero-sized buffer). With
//! `MPI_BUFFER_AUTOMATIC` each message gets its own heap block: no send fails for space.
//!
//! The buffer a send uses: its communicator's if one is attached, else the process's.
//! Session buffers are attached, flushed and detached, but no communicator is known to
//! derive from a session here (the sessions code records no such link), so buffered
//! sends never use them.
//!
//! Detach and flush wait until every message in their buffer was transmitted (detach
//! then returns the address and size given to attach: `MPI_BUFFER_AUTOMATIC` and 0 for
//! an automatic buffer); an iflush request completes once the messages buffered before
//! the call were (`req/greq.rs`'s polled requests). The requests of MPI_Ibsend and of a
//! started MPI_Bsend_init are complete at once (the data is in the buffer).

use std::ffi::{c_int, c_void};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use crate::comm::comm;
use crate::commobj::CommObj;
use crate::consts::*;
use crate::dtype::Dtype;
use crate::p2p::dtype_n;
use crate::raise::raise_on;
use crate::req::Active;
use crate::types::{Handle, MPI_Count, MPI_Status, SendPtr};

/// `MPI_BUFFER_AUTOMATIC` (`((void*)2)` in the header).
const AUTOMATIC: usize = 2;

/// One buffered message in flight. Field order matters: the send (`active`) reads the
/// heap block (`_heap`) of an automatic buffer, so it is dropped first.
struct Msg {
    active: Active,
    _heap: Option<Vec<u8>>,
    /// Its place in the attached buffer (unused for an automatic one).
    off: usize,
    need: usize,
    /// Its number among all buffered messages (flushes wait for those before theirs).
    id: u64,
}

/// An attached buffer and the messages in it, by offset.
struct Pool {
    addr: usize,
    size: usize,
    auto: bool,
    msgs: Vec<Msg>,
}

/// Whose buffer a pool is.
#[derive(Clone)]
enum Owner {
    Process,
    /// A communicator: its handle and object (a handle reused by another communicator
    /// names another one).
    Comm(Handle, Weak<CommObj>),
    Session(Handle),
}

impl Owner {
    fn is(&self, other: &Owner) -> bool {
        match (self, other) {
            (Owner::Process, Owner::Process) => true,
            (Owner::Comm(a, x), Owner::Comm(b, y)) => a == b && x.ptr_eq(y),
            (Owner::Session(a), Owner::Session(b)) => a == b,
            _ => false,
        }
    }
}

struct Buffers {
    pools: Vec<(Owner, Pool)>,
    next_id: u64,
}

// SAFETY: the messages' sends read the attached buffers (the program leaves them to MPI
// until detach, which waits for them) or their own heap blocks; whichever thread polls
// them, under the mutex below (as `Req` in req.rs).
unsafe impl Send for Buffers {}

static BUFFERS: Mutex<Buffers> = Mutex::new(Buffers { pools: Vec::new(), next_id: 0 });

impl Buffers {
    fn pool(&mut self, o: &Owner) -> Option<&mut Pool> {
        self.pools.iter_mut().find(|(w, _)| w.is(o)).map(|(_, p)| p)
    }

    /// Reclaims the space of every buffer's transmitted messages; the buffer of a freed
    /// communicator goes once its messages did (they hold the communicator until then).
    fn sweep(&mut self) {
        for (_, p) in &mut self.pools {
            p.reclaim();
        }
        self.pools.retain(|(o, p)| !matches!(o, Owner::Comm(_, w) if w.strong_count() == 0) || !p.msgs.is_empty());
    }
}

impl Pool {
    /// Drops the messages whose send completed (their space is free again). A failed
    /// send's error has no one to go to: the message is dropped as well.
    fn reclaim(&mut self) {
        self.msgs.retain_mut(|m| crate::req::poll_active(&mut m.active).is_none());
    }

    /// The free bytes (the largest gap).
    fn largest_gap(&self) -> usize {
        let mut end = 0;
        let mut best = 0;
        for m in &self.msgs {
            best = best.max(m.off - end);
            end = m.off + m.need;
        }
        best.max(self.size.saturating_sub(end))
    }

    /// First fit for `need` bytes: the offset, and the index to insert the message at.
    fn fit(&self, need: usize) -> Option<(usize, usize)> {
        let mut end = 0;
        for (i, m) in self.msgs.iter().enumerate() {
            if m.off - end >= need {
                return Some((end, i));
            }
            end = m.off + m.need;
        }
        (self.size.saturating_sub(end) >= need).then_some((end, self.msgs.len()))
    }

    /// Whether messages numbered below `upto` (all, for `None`) are still in flight.
    fn holds(&self, upto: Option<u64>) -> bool {
        self.msgs.iter().any(|m| match upto {
            Some(u) => m.id < u,
            None => true,
        })
    }
}

/// The owner whose buffer a send on `c` (handle `comm`) uses: the communicator's, else
/// the process's (`None`: no buffer attached for it).
fn owner_for(b: &mut Buffers, comm: Handle, c: &Arc<CommObj>) -> Option<Owner> {
    let own = Owner::Comm(comm, Arc::downgrade(c));
    if b.pool(&own).is_some() {
        return Some(own);
    }
    b.pool(&Owner::Process).is_some().then_some(Owner::Process)
}

/// Buffers `count` elements of `t` at `buf` for `dest`/`tag` on `c` (handle `comm`) and
/// starts their send from the buffer; the error class otherwise (not raised).
///
/// # Safety
/// `buf` holds `count` elements of `t` (MPI contract), read during this call only.
unsafe fn buffered(
    c: &Arc<CommObj>,
    comm: Handle,
    buf: *const c_void,
    count: usize,
    t: &Dtype,
    dest: c_int,
    tag: c_int,
) -> Result<(), c_int> {
    if dest == MPI_PROC_NULL {
        // Nothing is sent: no buffer space is used (and a revoked communicator fails).
        // SAFETY: no buffer is read for MPI_PROC_NULL.
        return match unsafe { crate::p2p::start_send(c, buf, 0, t, dest, tag) }? {
            Active::Done { err, .. } if err != MPI_SUCCESS => Err(err),
            _ => Ok(()),
        };
    }
    let n = count.checked_mul(t.size).ok_or(MPI_ERR_COUNT)?;
    let mut b = BUFFERS.lock();
    b.sweep();
    let Some(owner) = owner_for(&mut b, comm, c) else {
        crate::err::set_detail("buffered send with no buffer attached (MPI_Buffer_attach)".into());
        return Err(MPI_ERR_BUFFER);
    };
    let id = b.next_id;
    b.next_id += 1;
    let p = b.pool(&owner).expect("the owner's pool was just found");
    let need = n.saturating_add(MPI_BSEND_OVERHEAD as usize);
    let (off, at, mut heap) = if p.auto {
        (0, p.msgs.len(), Some(Vec::with_capacity(n)))
    } else {
        let Some((off, at)) = p.fit(need) else {
            crate::err::set_detail(format!(
                "buffered send of {n} bytes needs {need} bytes of the attached buffer \
                 (with MPI_BSEND_OVERHEAD); the largest free space is {} of {} bytes",
                p.largest_gap(),
                p.size
            ));
            return Err(MPI_ERR_BUFFER);
        };
        (off, at, None)
    };
    let dst: *mut u8 = match heap.as_mut() {
        Some(v) => {
            // SAFETY: the program's buffer of `count` elements (function contract).
            unsafe { crate::dtype::pack_into(buf.cast(), count, t, v) };
            v.as_mut_ptr()
        }
        None => {
            let dst = (p.addr + off) as *mut u8;
            if t.contiguous() {
                // SAFETY: `n` bytes of the program's buffer into the free space found in
                // the attached one (`need >= n` bytes there, left to MPI until detach).
                unsafe { std::ptr::copy_nonoverlapping(buf.cast::<u8>(), dst, n) };
            } else {
                let mut v = Vec::with_capacity(n);
                // SAFETY: as above; the packed bytes are `n` long.
                unsafe {
                    crate::dtype::pack_into(buf.cast(), count, t, &mut v);
                    std::ptr::copy_nonoverlapping(v.as_ptr(), dst, v.len().min(n));
                }
            }
            dst
        }
    };
    let byte = crate::dtype::lookup(MPI_BYTE).expect("MPI_BYTE is predefined");
    // SAFETY: the message's bytes stay in place until its send completed: the attached
    // buffer's space is not reused before (`reclaim`) and detach waits for it; a heap
    // block moves into the message with the send, which is dropped first.
    let active = unsafe { crate::p2p::start_send(c, dst.cast_const().cast(), n, &byte, dest, tag) }?;
    p.msgs.insert(at, Msg { active, _heap: heap, off, need, id });
    Ok(())
}

/// Waits until the messages numbered below `upto` (all, for `None`) in `owner`'s buffer
/// were transmitted; with `detach`, then takes the buffer away and returns its address
/// and size. `None`: no such buffer.
fn drain(owner: &Owner, upto: Option<u64>, detach: bool) -> Option<(usize, usize)> {
    let mut w = crate::req::waiter();
    loop {
        {
            let mut b = BUFFERS.lock();
            let p = b.pool(owner)?;
            p.reclaim();
            if !p.holds(upto) {
                let out = if p.auto { (AUTOMATIC, 0) } else { (p.addr, p.size) };
                if detach {
                    b.pools.retain(|(o, _)| !o.is(owner));
                }
                return Some(out);
            }
        }
        w.snooze();
    }
}

/// The number the next buffered message will take (the lock released on return).
fn next_id() -> u64 {
    BUFFERS.lock().next_id
}

/// Attaches `buffer` of `size` bytes as `owner`'s buffer; the error class otherwise.
fn attach(owner: Owner, buffer: *mut c_void, size: MPI_Count) -> Result<(), c_int> {
    let auto = buffer as usize == AUTOMATIC;
    if size < 0 || (!auto && buffer.is_null() && size > 0) {
        return Err(MPI_ERR_ARG);
    }
    let size = usize::try_from(size).map_err(|_| MPI_ERR_ARG)?;
    let mut b = BUFFERS.lock();
    b.sweep();
    if b.pool(&owner).is_some() {
        crate::err::set_detail("a buffer is already attached (MPI_Buffer_detach it first)".into());
        return Err(MPI_ERR_BUFFER);
    }
    let pool = Pool { addr: buffer as usize, size: if auto { 0 } else { size }, auto, msgs: Vec::new() };
    b.pools.push((owner, pool));
    Ok(())
}

/// Writes a detached buffer's address to `buffer_addr` (a `void **`).
///
/// # Safety
/// `buffer_addr` points to a writable pointer.
unsafe fn put_addr(buffer_addr: *mut c_void, addr: usize) {
    // SAFETY: function contract.
    unsafe { *buffer_addr.cast::<usize>() = addr };
}

/// An iflush request: complete once `owner`'s messages buffered so far were transmitted
/// (at once when it has no buffer).
fn iflush(owner: Owner, comm: Handle) -> Handle {
    let upto = next_id();
    crate::req::Greq::polled(
        comm,
        Box::new(move || {
            let mut b = BUFFERS.lock();
            match b.pool(&owner) {
                None => true,
                Some(p) => {
                    p.reclaim();
                    !p.holds(Some(upto))
                }
            }
        }),
    )
}

/// The communicator `comm` as a buffer owner, or its error raised.
macro_rules! comm_owner {
    ($comm:expr) => {{
        let c = comm!($comm);
        Owner::Comm($comm, Arc::downgrade(&c))
    }};
}

/// Checks session handle `s` (its error raised otherwise) and raises `code` through its
/// error handler.
fn session_error(s: Handle, code: c_int) -> c_int {
    // SAFETY: a plain call with the program's handle.
    let rc = unsafe { crate::imp::MPI_Session_call_errhandler(s, code) };
    if rc != MPI_SUCCESS && !crate::raise::fatal_pending() {
        return rc;
    }
    code
}

/// A session handle's validity (its error raised when invalid): `Err(code)`.
fn check_session(s: Handle) -> Result<(), c_int> {
    let mut eh: Handle = 0;
    // SAFETY: a query with a local output.
    match unsafe { crate::imp::MPI_Session_get_errhandler(s, &mut eh) } {
        MPI_SUCCESS => Ok(()),
        rc => Err(rc),
    }
}

/// MPI_Bsend and MPI_Ibsend (whose request is then complete).
unsafe fn bsend_common(
    buf: *const c_void,
    count: MPI_Count,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    let c = comm!(comm);
    let t = dtype_n!(datatype, count);
    if count < 0 {
        return raise_on(comm, MPI_ERR_COUNT);
    }
    // SAFETY: the program's buffer of `count` elements (MPI contract).
    if let Err(e) = unsafe { buffered(&c, comm, buf, count as usize, &t, dest, tag) } {
        return raise_on(comm, e);
    }
    if !request.is_null() {
        // SAFETY: output argument.
        unsafe { *request = crate::req::completed(comm, MPI_Status::empty(), MPI_SUCCESS) };
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Bsend(
    buf: *const c_void,
    count: c_int,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { bsend_common(buf, count.into(), datatype, dest, tag, comm, std::ptr::null_mut()) }
}

pub(crate) unsafe fn MPI_Bsend_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { bsend_common(buf, count, datatype, dest, tag, comm, std::ptr::null_mut()) }
}

pub(crate) unsafe fn MPI_Ibsend(
    buf: *const c_void,
    count: c_int,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    if request.is_null() {
        return raise_on(comm, MPI_ERR_ARG);
    }
    // SAFETY: forwarded.
    unsafe { bsend_common(buf, count.into(), datatype, dest, tag, comm, request) }
}

pub(crate) unsafe fn MPI_Ibsend_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    if request.is_null() {
        return raise_on(comm, MPI_ERR_ARG);
    }
    // SAFETY: forwarded.
    unsafe { bsend_common(buf, count, datatype, dest, tag, comm, request) }
}

/// MPI_Bsend_init: each MPI_Start buffers the message as MPI_Ibsend would (failing with
/// MPI_ERR_BUFFER when it does not fit); the started request is then complete.
unsafe fn bsend_init(
    buf: *const c_void,
    count: MPI_Count,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    let c = comm!(comm);
    let t = dtype_n!(datatype, count);
    if count < 0 {
        return raise_on(comm, MPI_ERR_COUNT);
    }
    if request.is_null() {
        return raise_on(comm, MPI_ERR_ARG);
    }
    let p = SendPtr(buf as *mut c_void);
    let start = Box::new(move || {
        let p = p;
        // SAFETY: the program keeps the buffer valid while the request exists; it is
        // read during the start only.
        unsafe { buffered(&c, comm, p.0, count as usize, &t, dest, tag) }?;
        Ok(Active::Done { status: MPI_Status::empty(), err: MPI_SUCCESS })
    });
    // SAFETY: output argument, checked non-null.
    unsafe { *request = crate::req::persistent(comm, start) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Bsend_init(
    buf: *const c_void,
    count: c_int,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { bsend_init(buf, count.into(), datatype, dest, tag, comm, request) }
}

pub(crate) unsafe fn MPI_Bsend_init_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { bsend_init(buf, count, datatype, dest, tag, comm, request) }
}

// ---- the process's buffer ------------------------------------------------------------

pub(crate) unsafe fn MPI_Buffer_attach(buffer: *mut c_void, size: c_int) -> c_int {
    raise_on(MPI_COMM_WORLD, attach(Owner::Process, buffer, size.into()).err().unwrap_or(MPI_SUCCESS))
}

pub(crate) unsafe fn MPI_Buffer_attach_c(buffer: *mut c_void, size: MPI_Count) -> c_int {
    raise_on(MPI_COMM_WORLD, attach(Owner::Process, buffer, size).err().unwrap_or(MPI_SUCCESS))
}

/// Detach of `owner`'s buffer into `buffer_addr` and `size` (none attached: a null
/// address and size 0, so nested libraries can detach and re-attach unconditionally).
///
/// # Safety
/// `buffer_addr` points to a writable pointer.
unsafe fn detach(owner: &Owner, buffer_addr: *mut c_void) -> usize {
    let (addr, size) = drain(owner, None, true).unwrap_or((0, 0));
    // SAFETY: output argument (function contract).
    unsafe { put_addr(buffer_addr, addr) };
    size
}

/// `size` as an `int` output, or MPI_ERR_COUNT.
///
/// # Safety
/// `out` writable.
unsafe fn put_int_size(out: *mut c_int, size: usize) -> c_int {
    match c_int::try_from(size) {
        Ok(s) => {
            // SAFETY: output argument (function contract).
            unsafe { *out = s };
            MPI_SUCCESS
        }
        Err(_) => MPI_ERR_COUNT,
    }
}

pub(crate) unsafe fn MPI_Buffer_detach(buffer_addr: *mut c_void, size: *mut c_int) -> c_int {
    // SAFETY: output arguments.
    unsafe { raise_on(MPI_COMM_WORLD, put_int_size(size, detach(&Owner::Process, buffer_addr))) }
}

pub(crate) unsafe fn MPI_Buffer_detach_c(buffer_addr: *mut c_void, size: *mut MPI_Count) -> c_int {
    // SAFETY: output arguments.
    unsafe { *size = detach(&Owner::Process, buffer_addr) as MPI_Count };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Buffer_flush() -> c_int {
    drain(&Owner::Process, Some(next_id()), false);
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Buffer_iflush(request: *mut Handle) -> c_int {
    if request.is_null() {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG);
    }
    // SAFETY: output argument, checked non-null.
    unsafe { *request = iflush(Owner::Process, MPI_COMM_WORLD) };
    MPI_SUCCESS
}

// ---- a communicator's buffer ---------------------------------------------------------

pub(crate) unsafe fn MPI_Comm_attach_buffer(comm: Handle, buffer: *mut c_void, size: c_int) -> c_int {
    let o = comm_owner!(comm);
    raise_on(comm, attach(o, buffer, size.into()).err().unwrap_or(MPI_SUCCESS))
}

pub(crate) unsafe fn MPI_Comm_attach_buffer_c(comm: Handle, buffer: *mut c_void, size: MPI_Count) -> c_int {
    let o = comm_owner!(comm);
    raise_on(comm, attach(o, buffer, size).err().unwrap_or(MPI_SUCCESS))
}

pub(crate) unsafe fn MPI_Comm_detach_buffer(comm: Handle, buffer_addr: *mut c_void, size: *mut c_int) -> c_int {
    let o = comm_owner!(comm);
    // SAFETY: output arguments.
    unsafe { raise_on(comm, put_int_size(size, detach(&o, buffer_addr))) }
}

pub(crate) unsafe fn MPI_Comm_detach_buffer_c(comm: Handle, buffer_addr: *mut c_void, size: *mut MPI_Count) -> c_int {
    let o = comm_owner!(comm);
    // SAFETY: output arguments.
    unsafe { *size = detach(&o, buffer_addr) as MPI_Count };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Comm_flush_buffer(comm: Handle) -> c_int {
    let o = comm_owner!(comm);
    drain(&o, Some(next_id()), false);
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Comm_iflush_buffer(comm: Handle, request: *mut Handle) -> c_int {
    let o = comm_owner!(comm);
    if request.is_null() {
        return raise_on(comm, MPI_ERR_ARG);
    }
    // SAFETY: output argument, checked non-null.
    unsafe { *request = iflush(o, comm) };
    MPI_SUCCESS
}

// ---- a session's buffer --------------------------------------------------------------

pub(crate) unsafe fn MPI_Session_attach_buffer(session: Handle, buffer: *mut c_void, size: c_int) -> c_int {
    // SAFETY: forwarded.
    unsafe { MPI_Session_attach_buffer_c(session, buffer, size.into()) }
}

pub(crate) unsafe fn MPI_Session_attach_buffer_c(session: Handle, buffer: *mut c_void, size: MPI_Count) -> c_int {
    if let Err(rc) = check_session(session) {
        return rc;
    }
    match attach(Owner::Session(session), buffer, size) {
        Ok(()) => MPI_SUCCESS,
        Err(e) => session_error(session, e),
    }
}

pub(crate) unsafe fn MPI_Session_detach_buffer(session: Handle, buffer_addr: *mut c_void, size: *mut c_int) -> c_int {
    if let Err(rc) = check_session(session) {
        return rc;
    }
    // SAFETY: output arguments.
    match unsafe { put_int_size(size, detach(&Owner::Session(session), buffer_addr)) } {
        MPI_SUCCESS => MPI_SUCCESS,
        e => session_error(session, e),
    }
}

pub(crate) unsafe fn MPI_Session_detach_buffer_c(
    session: Handle,
    buffer_addr: *mut c_void,
    size: *mut MPI_Count,
) -> c_int {
    if let Err(rc) = check_session(session) {
        return rc;
    }
    // SAFETY: output arguments.
    unsafe { *size = detach(&Owner::Session(session), buffer_addr) as MPI_Count };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Session_flush_buffer(session: Handle) -> c_int {
    if let Err(rc) = check_session(session) {
        return rc;
    }
    drain(&Owner::Session(session), Some(next_id()), false);
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Session_iflush_buffer(session: Handle, request: *mut Handle) -> c_int {
    if let Err(rc) = check_session(session) {
        return rc;
    }
    if request.is_null() {
        return session_error(session, MPI_ERR_ARG);
    }
    // SAFETY: output argument, checked non-null.
    unsafe { *request = iflush(Owner::Session(session), MPI_COMM_WORLD) };
    MPI_SUCCESS
}
