//! Requests: the table behind `MPI_Request`, completion (wait/test any/some/all),
//! cancel, free, persistent requests. Generalized requests are `req/greq.rs`'s.
//!
//! MPI_Cancel (MPI-4.1 3.8.4): a receive not matched yet is cancelled at once; a send is
//! cancelled when its receiver still holds its message unmatched (the engine's
//! `CancelSend` notice: an eager message's data or a rendezvous' RTS in its unexpected
//! queue). MPI_Cancel of a send waits for the receiver's answer (a round trip its
//! progress thread serves even while its program computes; a failed or departed
//! receiver answers "not cancelled" at once), so that afterwards the request's wait or
//! test is local and a test already tells the outcome, as for a receive. A send already
//! matched, or one that took no sequence number (it failed at its start), completes as
//! usual, not cancelled. Buffered sends complete at once (`bsend.rs`): their requests are
//! not cancelled.

use std::ffi::c_int;
use std::sync::Arc;

use parking_lot::Mutex;
use runthrough_engine::lock::BiasedMutex;
use runthrough_engine::{Engine, Waiter};

use crate::commobj::CommObj;
use crate::consts::*;
use crate::dtype::Dtype;
use crate::handles::USER_BASE;
use crate::raise::{raise_in_status, raise_on};
use crate::types::{Handle, MPI_Status, SendPtr};

mod greq;
mod status;
pub(crate) use greq::{Greq, MPI_Grequest_complete, MPI_Grequest_start};
pub(crate) use status::*;

/// A received message to unpack into the program's buffer at completion.
pub(crate) struct Unpack {
    pub(crate) tmp: Vec<u8>,
    pub(crate) buf: SendPtr,
    pub(crate) count: usize,
    pub(crate) t: Arc<Dtype>,
}

/// An operation the waits and tests poll to its end (each poll progresses the engine):
/// `Some` outcome once, when it ended.
pub(crate) type Poller = Box<dyn FnMut() -> Option<Outcome> + Send>;

/// One operation in flight.
pub(crate) enum Active {
    /// A point-to-point operation on the engine. Field order matters: `raw` borrows the
    /// buffers in `tmp`/`unpack` and the engine in `_eng`, so it is dropped first.
    /// `cancel`: a send's message as MPI_Cancel names it (`None` for a receive).
    P2p {
        raw: runthrough_engine::Request<'static>,
        unpack: Option<Unpack>,
        _tmp: Option<Vec<u8>>,
        comm: Arc<CommObj>,
        _eng: Arc<BiasedMutex<Engine>>,
        cancel: Option<SendTicket>,
    },
    /// Complete at start (MPI_PROC_NULL, buffered sends, operations done inline).
    Done { status: MPI_Status, err: c_int },
    /// Run by the engine and polled to its end: nonblocking and persistent collectives,
    /// iagree, ivalidate, idup.
    Polled(Poller),
    /// Several operations completing as one (MPI_Isendrecv): the status is the first's,
    /// the error the first one's that failed. The buffer (a copy the sends read) is
    /// dropped after them.
    Group(Vec<Active>, Vec<Option<Outcome>>, #[allow(dead_code)] Option<Vec<u8>>),
    /// A generalized request (MPI_Grequest_start) or the library's own polled operation
    /// (MPI_Buffer_iflush): `req/greq.rs`.
    Greq(Arc<Greq>),
}

/// A send's message as MPI_Cancel names it to the engine: the receiver (world rank) and
/// the sequence number the message took to it (`isend_unscoped_seq`); where its cancel
/// stands.
pub(crate) struct SendTicket {
    peer: runthrough_engine::Rank,
    seq: u32,
    /// `None`: not asked; `Some(None)`: asked, no answer yet; `Some(Some(c))`: answered.
    asked: Option<Option<bool>>,
}

impl SendTicket {
    /// The ticket of message `seq` to world rank `peer`.
    pub(crate) fn new(peer: runthrough_engine::Rank, seq: u32) -> Self {
        SendTicket { peer, seq, asked: None }
    }

    /// MPI_Cancel: asks the receiver to withdraw the message (once).
    fn ask(&mut self, raw: &mut runthrough_engine::Request<'static>) {
        if self.asked.is_none() {
            raw.cancel_send(self.peer, self.seq);
            self.asked = Some(None);
        }
    }

    /// Whether the message was withdrawn: `Some(false)` when no cancel was asked, `None`
    /// while the receiver has not answered.
    fn withdrawn(&mut self, raw: &mut runthrough_engine::Request<'static>) -> Option<bool> {
        match self.asked {
            None => Some(false),
            Some(Some(c)) => Some(c),
            Some(None) => {
                let c = raw.send_cancel_outcome(self.peer, self.seq)?;
                self.asked = Some(Some(c));
                Some(c)
            }
        }
    }
}

/// Whether a point-to-point operation is complete, without taking its outcome: a send
/// whose cancel is unanswered is not.
fn p2p_complete(raw: &mut runthrough_engine::Request<'static>, cancel: &mut Option<SendTicket>) -> bool {
    match cancel.as_mut().map_or(Some(false), |t| t.withdrawn(raw)) {
        None => false,
        Some(true) => true,
        Some(false) => !raw.is_active() || raw.is_complete(),
    }
}

/// What a persistent request starts each time.
pub(crate) type Starter = Box<dyn Fn() -> Result<Active, c_int> + Send>;

/// A request.
pub(crate) struct Req {
    pub(crate) comm: Handle,
    pub(crate) active: Option<Active>,
    pub(crate) persistent: Option<Starter>,
    /// Set by MPI_Cancel on a receive that had not matched.
    pub(crate) cancelled: bool,
    /// Set by MPI_Request_free on an active request: drop it once complete.
    pub(crate) freed: bool,
}

// SAFETY: the raw pointers inside (unpack destinations, engine buffers) belong to the
// program, which keeps them valid until completion whichever thread completes it (the
// MPI contract for nonblocking calls under MPI_THREAD_MULTIPLE).
unsafe impl Send for Req {}

/// The request table: requests are taken out while they are completed, so no lock is
/// held while waiting. Each lives in a box of its own, so taking it out and putting it
/// back moves a pointer, not the request (tests poll a request many times); the boxes of
/// finished requests are kept for the next ones, so starting a request allocates nothing
/// once the table has grown.
/// Requests by index, the free indices, and the spare boxes.
type Slab = (Vec<Option<Box<Req>>>, Vec<usize>, Vec<Box<Req>>);

static REQS: Mutex<Slab> = Mutex::new((Vec::new(), Vec::new(), Vec::new()));

/// At most this many spare boxes are kept.
const SPARE_BOXES: usize = 256;

const KIND: usize = crate::handles::Kind::Request as usize;

fn handle_of(i: usize) -> Handle {
    USER_BASE + 16 * i + KIND
}

fn index_of(h: Handle) -> Option<usize> {
    (h >= USER_BASE && (h - USER_BASE) % 16 == KIND).then(|| (h - USER_BASE) / 16)
}

/// Stores a request and returns its handle.
pub(crate) fn insert(r: Req) -> Handle {
    let mut g = REQS.lock();
    let b = match g.2.pop() {
        Some(mut b) => {
            // A spare box holds a finished request (nothing active, nothing to start).
            *b = r;
            b
        }
        None => Box::new(r),
    };
    let i = match g.1.pop() {
        Some(i) => {
            g.0[i] = Some(b);
            i
        }
        None => {
            g.0.push(Some(b));
            g.0.len() - 1
        }
    };
    handle_of(i)
}

/// A new request for `active` on communicator `comm`.
pub(crate) fn new_active(comm: Handle, active: Active) -> Handle {
    insert(Req { comm, active: Some(active), persistent: None, cancelled: false, freed: false })
}

/// A request already complete with `status` and `err`.
pub(crate) fn completed(comm: Handle, status: MPI_Status, err: c_int) -> Handle {
    new_active(comm, Active::Done { status, err })
}

fn take(h: Handle) -> Option<Box<Req>> {
    let i = index_of(h)?;
    REQS.lock().0.get_mut(i)?.take()
}

fn put_back(h: Handle, r: Box<Req>) {
    if let Some(i) = index_of(h) {
        if let Some(s) = REQS.lock().0.get_mut(i) {
            *s = Some(r);
        }
    }
}

/// Frees the slot of request `h` (a generalized request freed by MPI_Request_free and
/// then completed: `req/greq.rs`).
pub(crate) fn release(h: Handle) {
    if let Some(i) = index_of(h) {
        let mut g = REQS.lock();
        if let Some(s) = g.0.get_mut(i) {
            *s = None;
            g.1.push(i);
        }
    }
}

/// Frees the slot of request `h`, taken out as `r`, and keeps `r`'s box for a later
/// request. What `r` held is dropped first, outside the table's lock.
fn retire(h: Handle, mut r: Box<Req>) {
    r.active = None;
    r.persistent = None;
    let Some(i) = index_of(h) else { return };
    let mut g = REQS.lock();
    if let Some(s) = g.0.get_mut(i) {
        *s = None;
        g.1.push(i);
    }
    if g.2.len() < SPARE_BOXES {
        g.2.push(r);
    }
}

/// The outcome of an operation: its status and error class (MPI_SUCCESS or not).
pub(crate) type Outcome = (MPI_Status, c_int);

/// Polls `a`; its outcome once complete.
fn poll(a: &mut Active, cancelled: bool) -> Option<Outcome> {
    match a {
        Active::Group(parts, done, _) => {
            for (p, d) in parts.iter_mut().zip(done.iter_mut()) {
                if d.is_none() {
                    *d = poll(p, false);
                }
            }
            if done.iter().any(|d| d.is_none()) {
                return None;
            }
            let outs: Vec<Outcome> = done.iter().flatten().copied().collect();
            let st = outs.first().map_or_else(MPI_Status::empty, |o| o.0);
            let err = outs.iter().map(|o| o.1).find(|&e| e != MPI_SUCCESS).unwrap_or(MPI_SUCCESS);
            Some((st, err))
        }
        Active::Done { status, err } => Some((*status, *err)),
        Active::Greq(g) => g.poll(),
        Active::Polled(p) => p(),
        Active::P2p { raw, unpack, comm, cancel, .. } => {
            if cancelled {
                let mut st = MPI_Status::empty();
                st.set_cancelled(true);
                return Some((st, MPI_SUCCESS));
            }
            if let Some(t) = cancel.as_mut() {
                match t.withdrawn(raw) {
                    None => return None,
                    Some(true) => {
                        // The engine completed the send (or it had completed locally):
                        // its outcome is taken and dropped.
                        let _ = raw.test();
                        let mut st = MPI_Status::empty();
                        st.set_cancelled(true);
                        return Some((st, MPI_SUCCESS));
                    }
                    Some(false) => {}
                }
            }
            if !raw.is_active() {
                return Some((MPI_Status::empty(), MPI_SUCCESS));
            }
            match raw.test() {
                Ok(None) => None,
                Ok(Some(s)) => {
                    if let Some(u) = unpack.take() {
                        // SAFETY: the program's receive buffer, valid until completion.
                        unsafe {
                            crate::dtype::unpack_from(&u.tmp[..s.len.min(u.tmp.len())], u.buf.0.cast(), u.count, &u.t)
                        };
                    }
                    Some((MPI_Status::new(comm.source_rank(s.source), s.tag, s.len), MPI_SUCCESS))
                }
                Err(e) => {
                    let e = comm.comm.check_error(e);
                    crate::err::set_detail(e.to_string());
                    let mut st = MPI_Status::empty();
                    st.MPI_SOURCE = match &e {
                        runthrough::Error::RankFailStop { rank } | runthrough::Error::InStatus { rank } => {
                            comm.world.iter().position(|&w| w == *rank).map_or(MPI_PROC_NULL, |i| comm.source_rank(i))
                        }
                        _ => MPI_PROC_NULL,
                    };
                    Some((st, crate::err::code_of(&e)))
                }
            }
        }
    }
}

/// Finishes request `h` (taken out as `r`) after its operation completed: frees it, or
/// marks a persistent one inactive.
fn finish(h: Handle, mut r: Box<Req>) {
    r.active = None;
    r.cancelled = false;
    if r.persistent.is_some() && !r.freed {
        put_back(h, r);
    } else {
        retire(h, r);
    }
}

/// Spin-then-yield waiting between polls (the engine's spin, `rt::spin_polls`).
pub(crate) fn waiter() -> Waiter {
    Waiter::new(crate::rt::spin_polls())
}

unsafe fn store(status: *mut MPI_Status, st: MPI_Status) {
    // SAFETY: forwarded output argument.
    unsafe { crate::status::put_status(status, st) }
}

pub(crate) unsafe fn MPI_Wait(request: *mut Handle, status: *mut MPI_Status) -> c_int {
    // SAFETY: in/out argument.
    let h = unsafe { *request };
    if h == MPI_REQUEST_NULL {
        // SAFETY: output argument.
        unsafe { store(status, MPI_Status::empty()) };
        return MPI_SUCCESS;
    }
    let Some(mut r) = take(h) else { return raise_on(MPI_COMM_WORLD, MPI_ERR_REQUEST) };
    let Some(a) = r.active.as_mut() else {
        // An inactive persistent request.
        put_back(h, r);
        // SAFETY: output argument.
        unsafe { store(status, MPI_Status::empty()) };
        return MPI_SUCCESS;
    };
    let mut w = waiter();
    let (st, err) = loop {
        if let Some(o) = poll(a, r.cancelled) {
            break o;
        }
        w.snooze();
    };
    let comm = r.comm;
    let persistent = r.persistent.is_some();
    finish(h, r);
    if !persistent {
        // SAFETY: in/out argument.
        unsafe { *request = MPI_REQUEST_NULL };
    }
    // SAFETY: output argument.
    unsafe { store(status, st) };
    if err != MPI_SUCCESS {
        return raise_on(comm, err);
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Test(request: *mut Handle, flag: *mut c_int, status: *mut MPI_Status) -> c_int {
    // SAFETY: in/out argument.
    let h = unsafe { *request };
    if h == MPI_REQUEST_NULL {
        // SAFETY: output arguments.
        unsafe {
            *flag = 1;
            store(status, MPI_Status::empty());
        }
        return MPI_SUCCESS;
    }
    let Some(mut r) = take(h) else { return raise_on(MPI_COMM_WORLD, MPI_ERR_REQUEST) };
    let Some(a) = r.active.as_mut() else {
        put_back(h, r);
        // SAFETY: output arguments.
        unsafe {
            *flag = 1;
            store(status, MPI_Status::empty());
        }
        return MPI_SUCCESS;
    };
    match poll(a, r.cancelled) {
        None => {
            put_back(h, r);
            // SAFETY: output argument.
            unsafe { *flag = 0 };
            MPI_SUCCESS
        }
        Some((st, err)) => {
            let comm = r.comm;
            let persistent = r.persistent.is_some();
            finish(h, r);
            // SAFETY: in/out and output arguments.
            unsafe {
                if !persistent {
                    *request = MPI_REQUEST_NULL;
                }
                *flag = 1;
                store(status, st);
            }
            if err != MPI_SUCCESS {
                return raise_on(comm, err);
            }
            MPI_SUCCESS
        }
    }
}

/// Tests request `reqs[i]` once: `Some(outcome)` if it completed (then it is finished and
/// the handle updated), `None` if pending; inactive and null requests give `Some` with
/// `inactive = true`.
unsafe fn test_one(reqs: *mut Handle, i: usize) -> Result<Option<(Outcome, bool, Handle)>, c_int> {
    // SAFETY: array entry (MPI contract).
    let h = unsafe { *reqs.add(i) };
    if h == MPI_REQUEST_NULL {
        return Ok(Some(((MPI_Status::empty(), MPI_SUCCESS), true, MPI_COMM_WORLD)));
    }
    let Some(mut r) = take(h) else { return Err(MPI_ERR_REQUEST) };
    let Some(a) = r.active.as_mut() else {
        put_back(h, r);
        return Ok(Some(((MPI_Status::empty(), MPI_SUCCESS), true, MPI_COMM_WORLD)));
    };
    match poll(a, r.cancelled) {
        None => {
            put_back(h, r);
            Ok(None)
        }
        Some(o) => {
            let comm = r.comm;
            let persistent = r.persistent.is_some();
            finish(h, r);
            if !persistent {
                // SAFETY: array entry.
                unsafe { *reqs.add(i) = MPI_REQUEST_NULL };
            }
            Ok(Some((o, false, comm)))
        }
    }
}

unsafe fn status_at(statuses: *mut MPI_Status, i: usize) -> *mut MPI_Status {
    if statuses.is_null() {
        std::ptr::null_mut()
    } else {
        // SAFETY: array of the program's size (MPI contract).
        unsafe { statuses.add(i) }
    }
}

pub(crate) unsafe fn MPI_Waitall(
    count: c_int,
    array_of_requests: *mut Handle,
    array_of_statuses: *mut MPI_Status,
) -> c_int {
    let n = count.max(0) as usize;
    // Which requests are done: on the stack for the usual few (no allocation).
    let mut small = [false; 64];
    let mut large = Vec::new();
    let done: &mut [bool] = if n <= small.len() {
        &mut small[..n]
    } else {
        large.resize(n, false);
        &mut large
    };
    let mut left = n;
    let mut first_err = None;
    let mut w = waiter();
    while left > 0 {
        let mut progressed = false;
        for i in 0..n {
            if done[i] {
                continue;
            }
            // SAFETY: the program's arrays of `count` entries.
            match unsafe { test_one(array_of_requests, i) } {
                Err(e) => return raise_on(MPI_COMM_WORLD, e),
                Ok(None) => {}
                Ok(Some(((mut st, err), inactive, comm))) => {
                    done[i] = true;
                    left -= 1;
                    progressed = true;
                    if err != MPI_SUCCESS && !inactive && first_err.is_none() {
                        first_err = Some((comm, err));
                    }
                    st.MPI_ERROR = err;
                    // SAFETY: status array entry or ignored.
                    unsafe { crate::status::put_status_with_error(status_at(array_of_statuses, i), st) };
                }
            }
        }
        if left > 0 && !progressed {
            w.snooze();
        }
    }
    if let Some((comm, err)) = first_err {
        return raise_in_status(comm, err);
    }
    if !array_of_statuses.is_null() {
        for i in 0..n {
            // SAFETY: status array entry.
            unsafe { (*array_of_statuses.add(i)).MPI_ERROR = MPI_SUCCESS };
        }
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Testall(
    count: c_int,
    array_of_requests: *mut Handle,
    flag: *mut c_int,
    array_of_statuses: *mut MPI_Status,
) -> c_int {
    // All or nothing: check completion first without finishing anything.
    let n = count.max(0) as usize;
    let mut all = true;
    for i in 0..n {
        // SAFETY: array entry.
        let h = unsafe { *array_of_requests.add(i) };
        if h == MPI_REQUEST_NULL {
            continue;
        }
        let Some(mut r) = take(h) else { return raise_on(MPI_COMM_WORLD, MPI_ERR_REQUEST) };
        let complete = match r.active.as_mut() {
            None => true,
            Some(Active::P2p { raw, cancel, .. }) => r.cancelled || p2p_complete(raw, cancel),
            Some(Active::Done { .. }) => true,
            Some(Active::Greq(g)) => g.is_complete(),
            Some(g @ (Active::Group(..) | Active::Polled(_))) => {
                let r = poll(g, false);
                if let Some((status, err)) = r {
                    *g = Active::Done { status, err };
                }
                r.is_some()
            }
        };
        put_back(h, r);
        if !complete {
            all = false;
        }
    }
    // SAFETY: output argument.
    unsafe { *flag = all as c_int };
    if !all {
        return MPI_SUCCESS;
    }
    // SAFETY: forwarded arguments.
    unsafe { MPI_Waitall(count, array_of_requests, array_of_statuses) }
}

/// Waits (or, with `block` false, tests once) for any request; `Some(index)`.
unsafe fn any(count: c_int, reqs: *mut Handle, status: *mut MPI_Status, block: bool) -> Result<Option<usize>, c_int> {
    let n = count.max(0) as usize;
    let mut w = waiter();
    loop {
        let mut active = 0;
        for i in 0..n {
            // SAFETY: array entry.
            let h = unsafe { *reqs.add(i) };
            if h == MPI_REQUEST_NULL {
                continue;
            }
            // SAFETY: forwarded array.
            match unsafe { test_one(reqs, i) }? {
                None => active += 1,
                Some((_, true, _)) => {}
                Some(((st, err), false, comm)) => {
                    // SAFETY: output argument.
                    unsafe { store(status, st) };
                    if err != MPI_SUCCESS {
                        return Err(raise_on(comm, err));
                    }
                    return Ok(Some(i));
                }
            }
        }
        if active == 0 {
            // SAFETY: output argument.
            unsafe { store(status, MPI_Status::empty()) };
            return Ok(None);
        }
        if !block {
            return Err(-1);
        }
        w.snooze();
    }
}

pub(crate) unsafe fn MPI_Waitany(
    count: c_int,
    array_of_requests: *mut Handle,
    index: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    // SAFETY: forwarded arguments.
    match unsafe { any(count, array_of_requests, status, true) } {
        // SAFETY: output argument.
        Ok(i) => unsafe {
            *index = i.map_or(MPI_UNDEFINED, |i| i as c_int);
            MPI_SUCCESS
        },
        Err(e) => e,
    }
}

pub(crate) unsafe fn MPI_Testany(
    count: c_int,
    array_of_requests: *mut Handle,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    // SAFETY: forwarded arguments.
    match unsafe { any(count, array_of_requests, status, false) } {
        // SAFETY: output arguments.
        Ok(i) => unsafe {
            *index = i.map_or(MPI_UNDEFINED, |i| i as c_int);
            *flag = 1;
            MPI_SUCCESS
        },
        // SAFETY: output arguments.
        Err(-1) => unsafe {
            *index = MPI_UNDEFINED;
            *flag = 0;
            MPI_SUCCESS
        },
        Err(e) => e,
    }
}

unsafe fn some(
    incount: c_int,
    reqs: *mut Handle,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MPI_Status,
    block: bool,
) -> c_int {
    let n = incount.max(0) as usize;
    let mut w = waiter();
    loop {
        let mut active = 0;
        let mut got = 0usize;
        let mut err_comm = None;
        for i in 0..n {
            // SAFETY: array entry.
            if unsafe { *reqs.add(i) } == MPI_REQUEST_NULL {
                continue;
            }
            // SAFETY: forwarded array.
            match unsafe { test_one(reqs, i) } {
                Err(e) => return raise_on(MPI_COMM_WORLD, e),
                Ok(None) => active += 1,
                Ok(Some((_, true, _))) => {}
                Ok(Some(((mut st, err), false, comm))) => {
                    st.MPI_ERROR = err;
                    if err != MPI_SUCCESS && err_comm.is_none() {
                        err_comm = Some((comm, err));
                    }
                    // SAFETY: output arrays of incount entries.
                    unsafe {
                        *indices.add(got) = i as c_int;
                        crate::status::put_status_with_error(status_at(statuses, got), st);
                    }
                    got += 1;
                }
            }
        }
        if got > 0 || active == 0 || !block {
            // SAFETY: output argument.
            unsafe { *outcount = if got == 0 && active == 0 { MPI_UNDEFINED } else { got as c_int } };
            if let Some((c, err)) = err_comm {
                return raise_in_status(c, err);
            }
            return MPI_SUCCESS;
        }
        w.snooze();
    }
}

pub(crate) unsafe fn MPI_Waitsome(
    incount: c_int,
    array_of_requests: *mut Handle,
    outcount: *mut c_int,
    array_of_indices: *mut c_int,
    array_of_statuses: *mut MPI_Status,
) -> c_int {
    // SAFETY: forwarded arguments.
    unsafe { some(incount, array_of_requests, outcount, array_of_indices, array_of_statuses, true) }
}

pub(crate) unsafe fn MPI_Testsome(
    incount: c_int,
    array_of_requests: *mut Handle,
    outcount: *mut c_int,
    array_of_indices: *mut c_int,
    array_of_statuses: *mut MPI_Status,
) -> c_int {
    // SAFETY: forwarded arguments.
    unsafe { some(incount, array_of_requests, outcount, array_of_indices, array_of_statuses, false) }
}

pub(crate) unsafe fn MPI_Request_get_status(request: Handle, flag: *mut c_int, status: *mut MPI_Status) -> c_int {
    if request == MPI_REQUEST_NULL {
        // SAFETY: output arguments.
        unsafe {
            *flag = 1;
            store(status, MPI_Status::empty());
        }
        return MPI_SUCCESS;
    }
    let Some(mut r) = take(request) else { return raise_on(MPI_COMM_WORLD, MPI_ERR_REQUEST) };
    if let Some(Active::Greq(g)) = r.active.as_ref() {
        let (g, comm) = (g.clone(), r.comm);
        put_back(request, r);
        // SAFETY: forwarded output arguments.
        return unsafe { greq::get_status(&g, comm, flag, status) };
    }
    let cancelled = r.cancelled;
    let pending = match r.active.as_mut() {
        Some(Active::P2p { raw, cancel, .. }) => !cancelled && !p2p_complete(raw, cancel),
        _ => false,
    };
    let out = match r.active.as_mut() {
        None => Some((MPI_Status::empty(), MPI_SUCCESS)),
        _ if pending => None,
        // Complete: the outcome is computed now and kept (Done) for the later wait.
        Some(a) => poll(a, cancelled),
    };
    if let (Some((st, err)), Some(_)) = (out, r.active.as_ref()) {
        r.active = Some(Active::Done { status: st, err });
        r.cancelled = false;
    }
    put_back(request, r);
    // SAFETY: output arguments.
    unsafe {
        *flag = out.is_some() as c_int;
        if let Some((st, _)) = out {
            store(status, st);
        }
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Cancel(request: *mut Handle) -> c_int {
    // SAFETY: in argument.
    let h = unsafe { *request };
    let Some(mut r) = take(h) else { return raise_on(MPI_COMM_WORLD, MPI_ERR_REQUEST) };
    match r.active.as_mut() {
        // A send: the receiver decides; its answer is awaited here.
        Some(Active::P2p { raw, cancel: Some(t), .. }) => {
            t.ask(raw);
            let mut w = waiter();
            while t.withdrawn(raw).is_none() {
                w.snooze();
            }
        }
        // A receive: cancelled here unless it matched.
        Some(Active::P2p { raw, unpack, cancel: None, .. }) => {
            let cancelled = raw.cancel();
            if cancelled {
                unpack.take();
            }
            r.cancelled = cancelled;
        }
        Some(Active::Greq(g)) => {
            let (g, comm) = (g.clone(), r.comm);
            put_back(h, r);
            return raise_on(comm, g.cancel());
        }
        _ => {}
    }
    put_back(h, r);
    MPI_SUCCESS
}

/// What a freed request's operation keeps alive until the engine completes it: the
/// unpack into the program's buffer (run at completion), the buffers the operation reads
/// or writes, and the communicator and engine it runs on.
struct Freed {
    unpack: Option<Unpack>,
    _tmp: Option<Vec<u8>>,
    _shared: Option<Arc<Vec<u8>>>,
    _comm: Arc<CommObj>,
    _eng: Arc<BiasedMutex<Engine>>,
}

impl runthrough_engine::Detached for Freed {
    fn complete(&mut self, outcome: Result<runthrough_engine::Status, runthrough::Error>) {
        // A freed request's error reaches nobody (MPI-4.1 3.7.3: the program cannot learn
        // of it); its data still lands where the program asked.
        if let (Ok(s), Some(u)) = (outcome, self.unpack.take()) {
            // SAFETY: the program's receive buffer, valid until the operation completes
            // (MPI's contract for a freed request's buffer).
            unsafe { crate::dtype::unpack_from(&u.tmp[..s.len.min(u.tmp.len())], u.buf.0.cast(), u.count, &u.t) };
        }
    }
}

/// The engine a point-to-point operation (or the first of a group) runs on.
fn engine_of(a: &Active) -> Option<Arc<BiasedMutex<Engine>>> {
    match a {
        Active::P2p { _eng, .. } => Some(_eng.clone()),
        Active::Group(parts, ..) => parts.iter().find_map(engine_of),
        _ => None,
    }
}

/// Hands an active operation whose request the program freed to whoever completes it:
/// point-to-point operations to the engine ([`runthrough_engine::Request::detach`]), a
/// collective to nobody (the engine runs it whatever happens to the handle); `shared` is
/// a buffer the parts of a group read.
fn hand_over(a: Active, cancelled: bool, shared: Option<Arc<Vec<u8>>>) {
    match a {
        Active::P2p { raw, unpack, _tmp, comm, _eng, cancel: _ } => {
            if cancelled {
                return;
            }
            let owner = Freed { unpack, _tmp, _shared: shared, _comm: comm, _eng };
            // SAFETY: the request was started unscoped on buffers the owner keeps (its
            // copies) or the program promised valid until completion; the owner is dropped
            // only after the engine completed the request.
            unsafe { raw.detach(Box::new(owner)) };
        }
        Active::Group(parts, done, buf) => {
            let shared = buf.map(Arc::new).or(shared);
            for (p, d) in parts.into_iter().zip(done) {
                if d.is_none() {
                    hand_over(p, cancelled, shared.clone());
                }
            }
        }
        // The engine runs a collective to its end (MPI forbids freeing its request);
        // nothing else is pending.
        Active::Polled(_) | Active::Done { .. } | Active::Greq(_) => {}
    }
}

pub(crate) unsafe fn MPI_Request_free(request: *mut Handle) -> c_int {
    // SAFETY: in/out argument.
    let h = unsafe { *request };
    let Some(mut r) = take(h) else { return raise_on(MPI_COMM_WORLD, MPI_ERR_REQUEST) };
    if let Some(Active::Greq(g)) = r.active.as_ref() {
        let (g, comm) = (g.clone(), r.comm);
        r.freed = true;
        // Freed now if complete, else when MPI_Grequest_complete is called (the slot kept
        // until then, so the program's handle names it only).
        let rc = g.free_request(h, || put_back(h, r));
        // SAFETY: in/out argument.
        unsafe { *request = MPI_REQUEST_NULL };
        return raise_on(comm, rc);
    }
    match r.active.take() {
        None => release(h),
        Some(a) => {
            // The engine completes it during progress (no thread waits for it): it still
            // reads or writes the program's buffer until then.
            r.freed = true;
            let eng = engine_of(&a);
            hand_over(a, r.cancelled, None);
            release(h);
            // Owners of handed requests that completed meanwhile, dropped without the
            // engine lock.
            if let Some(e) = eng {
                let done = e.lock().take_released();
                drop(done);
            }
        }
    }
    // SAFETY: in/out argument.
    unsafe { *request = MPI_REQUEST_NULL };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Start(request: *mut Handle) -> c_int {
    // SAFETY: in argument.
    let h = unsafe { *request };
    let Some(mut r) = take(h) else { return raise_on(MPI_COMM_WORLD, MPI_ERR_REQUEST) };
    let comm = r.comm;
    let rc = match (&r.persistent, &r.active) {
        (Some(start), None) => match start() {
            Ok(a) => {
                r.active = Some(a);
                MPI_SUCCESS
            }
            Err(e) => e,
        },
        _ => MPI_ERR_REQUEST,
    };
    put_back(h, r);
    if rc != MPI_SUCCESS {
        return raise_on(comm, rc);
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Startall(count: c_int, array_of_requests: *mut Handle) -> c_int {
    for i in 0..count.max(0) as usize {
        // SAFETY: array entry.
        let rc = unsafe { MPI_Start(array_of_requests.add(i)) };
        if rc != MPI_SUCCESS {
            return rc;
        }
    }
    MPI_SUCCESS
}

/// Polls `a` once without a request around it (the buffered sends in `bsend.rs`): its
/// outcome once complete.
pub(crate) fn poll_active(a: &mut Active) -> Option<Outcome> {
    poll(a, false)
}

/// A persistent request on `comm` that runs `start` at each MPI_Start.
pub(crate) fn persistent(comm: Handle, start: Starter) -> Handle {
    insert(Req { comm, active: None, persistent: Some(start), cancelled: false, freed: false })
}
