//! Generalized requests (MPI-4.1 13.2): MPI_Grequest_start and MPI_Grequest_complete,
//! and the request calls on them (`req.rs` hands its `Active::Greq` requests here).
//!
//! - A wait or test completes one only after MPI_Grequest_complete (from any thread: the
//!   flag lives outside the request table, which a waiting thread takes the request out
//!   of). The call that completes it calls `query_fn` with a status (the program's, or
//!   one of the library's for `MPI_STATUS(ES)_IGNORE`, so the callback always has one),
//!   then `free_fn`. The request's error is `free_fn`'s code if it failed (the text: the
//!   call returns the code of "the last callback, namely free_fn"), else `query_fn`'s,
//!   else the `MPI_ERROR` field `query_fn` set in the status.
//! - MPI_Request_get_status calls `query_fn` only (once complete); the request stays.
//! - MPI_Cancel calls `cancel_fn(extra_state, complete)`; whether the operation was
//!   cancelled is what `query_fn` then puts in the status.
//! - MPI_Request_free calls `free_fn` at once if MPI_Grequest_complete was called, else
//!   MPI_Grequest_complete calls it ("whichever happens last"); the request's slot is
//!   kept until then, so the handle the program still passes to MPI_Grequest_complete
//!   names it alone.
//! - Each callback's nonzero return is the error of the call that ran it, raised through
//!   MPI_COMM_WORLD's handler (the library's convention for requests).
//!
//! The library's own polled operations (MPI_Buffer_iflush, `bsend.rs`) ride on the same
//! request kind: a closure that says when it is done, no callbacks.
//!
//! `MPIX_Grequest_start` and `MPIX_Grequest_class_*` are not in the headers: not provided.

use std::collections::BTreeMap;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::consts::*;
use crate::raise::raise_on;
use crate::req::{Active, Outcome};
use crate::types::{FnPtr, Handle, MPI_Status, SendPtr};

type QueryFn = unsafe extern "C" fn(*mut c_void, *mut MPI_Status) -> c_int;
type FreeFn = unsafe extern "C" fn(*mut c_void) -> c_int;
type CancelFn = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;

/// What completes the request and what runs at its events.
enum Ops {
    /// The program's callbacks and extra state (a null callback does nothing).
    User { query: Option<QueryFn>, free: Option<FreeFn>, cancel: Option<CancelFn>, extra: SendPtr },
    /// The library's own operation: `true` once it is done.
    Polled(Mutex<Box<dyn FnMut() -> bool + Send>>),
}

#[derive(Debug, Default)]
struct Flags {
    /// MPI_Grequest_complete was called (or the polled operation is done).
    complete: bool,
    /// MPI_Request_free was called before it completed.
    freed: bool,
    /// `free_fn` ran (it runs once).
    free_ran: bool,
}

/// A generalized request.
pub(crate) struct Greq {
    ops: Ops,
    flags: Mutex<Flags>,
    /// Its request handle (for MPI_Grequest_complete's table).
    handle: AtomicUsize,
}

/// The program's generalized requests by handle, until their `free_fn` ran.
static GREQS: Mutex<BTreeMap<Handle, Arc<Greq>>> = Mutex::new(BTreeMap::new());

/// `p` as the callback type `F` (the header's typedef), `None` when null.
///
/// # Safety
/// `p` is null or a function of type `F` (the program's callback, MPI contract).
unsafe fn callback<F: Copy>(p: FnPtr) -> Option<F> {
    // SAFETY: a non-null function pointer of the header's type (function contract); `F`
    // is a function pointer type, of a data pointer's size on the platforms the ABI has.
    (!p.is_null()).then(|| unsafe { std::mem::transmute_copy::<FnPtr, F>(&p) })
}

impl Greq {
    /// A request of the library's own that completes once `done` returns `true` (polled
    /// by the waits and tests); its outcome is success with an empty status.
    pub(crate) fn polled(comm: Handle, done: Box<dyn FnMut() -> bool + Send>) -> Handle {
        let g =
            Arc::new(Greq { ops: Ops::Polled(Mutex::new(done)), flags: Mutex::default(), handle: AtomicUsize::new(0) });
        crate::req::new_active(comm, Active::Greq(g))
    }

    /// Whether it completed (a polled operation is polled).
    pub(crate) fn is_complete(&self) -> bool {
        let complete = self.flags.lock().complete;
        if let (false, Ops::Polled(done)) = (complete, &self.ops) {
            if (done.lock())() {
                self.flags.lock().complete = true;
                return true;
            }
        }
        complete
    }

    /// `query_fn` into a fresh status: the status and the callback's error (its return,
    /// else the status' `MPI_ERROR`).
    fn query(&self) -> Outcome {
        let mut st = MPI_Status::empty();
        st.MPI_ERROR = MPI_SUCCESS;
        let Ops::User { query: Some(q), extra, .. } = &self.ops else { return (st, MPI_SUCCESS) };
        // SAFETY: the program's query callback with its extra state and a valid status
        // (MPI-4.1 13.2).
        let rc = unsafe { q(extra.0, &mut st) };
        let err = if rc != MPI_SUCCESS { rc } else { st.MPI_ERROR };
        (st, err)
    }

    /// Runs `free_fn` once; its code (success when there is none or it already ran).
    fn run_free(&self) -> c_int {
        {
            let mut f = self.flags.lock();
            if f.free_ran {
                return MPI_SUCCESS;
            }
            f.free_ran = true;
        }
        GREQS.lock().remove(&self.handle.load(Ordering::Acquire));
        match &self.ops {
            // SAFETY: the program's free callback with its extra state (MPI-4.1 13.2).
            Ops::User { free: Some(f), extra, .. } => unsafe { f(extra.0) },
            _ => MPI_SUCCESS,
        }
    }

    /// Completion by a wait or test (`req.rs`'s poll): `None` until complete; then
    /// `query_fn`, `free_fn` and the outcome.
    pub(crate) fn poll(&self) -> Option<Outcome> {
        if !self.is_complete() {
            return None;
        }
        let (st, qerr) = self.query();
        let ferr = self.run_free();
        Some((st, if ferr != MPI_SUCCESS { ferr } else { qerr }))
    }

    /// MPI_Cancel: `cancel_fn(extra_state, complete)`; its code.
    pub(crate) fn cancel(&self) -> c_int {
        let complete = self.is_complete();
        match &self.ops {
            // SAFETY: the program's cancel callback with its extra state (MPI-4.1 13.2).
            Ops::User { cancel: Some(c), extra, .. } => unsafe { c(extra.0, complete as c_int) },
            _ => MPI_SUCCESS,
        }
    }

    /// MPI_Request_free of request `h`: `free_fn` now if complete (the slot released),
    /// else `park` puts the request back (under the flags' lock, so MPI_Grequest_complete
    /// finds it there) and MPI_Grequest_complete frees it. `free_fn`'s code, or success.
    pub(crate) fn free_request(&self, h: Handle, park: impl FnOnce()) -> c_int {
        {
            let mut f = self.flags.lock();
            if matches!(self.ops, Ops::User { .. }) && !f.complete {
                f.freed = true;
                park();
                return MPI_SUCCESS;
            }
        }
        crate::req::release(h);
        self.run_free()
    }
}

pub(crate) unsafe fn MPI_Grequest_start(
    query_fn: FnPtr,
    free_fn: FnPtr,
    cancel_fn: FnPtr,
    extra_state: *mut c_void,
    request: *mut Handle,
) -> c_int {
    if request.is_null() {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG);
    }
    // SAFETY: the program's callbacks of the header's types (MPI contract).
    let ops = unsafe {
        Ops::User {
            query: callback::<QueryFn>(query_fn),
            free: callback::<FreeFn>(free_fn),
            cancel: callback::<CancelFn>(cancel_fn),
            extra: SendPtr(extra_state),
        }
    };
    let g = Arc::new(Greq { ops, flags: Mutex::default(), handle: AtomicUsize::new(0) });
    let h = crate::req::new_active(MPI_COMM_WORLD, Active::Greq(g.clone()));
    g.handle.store(h, Ordering::Release);
    GREQS.lock().insert(h, g);
    // SAFETY: output argument, checked non-null.
    unsafe { *request = h };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Grequest_complete(request: Handle) -> c_int {
    let Some(g) = GREQS.lock().get(&request).cloned() else { return raise_on(MPI_COMM_WORLD, MPI_ERR_REQUEST) };
    let freed = {
        let mut f = g.flags.lock();
        if f.complete {
            return raise_on(MPI_COMM_WORLD, MPI_ERR_REQUEST);
        }
        f.complete = true;
        f.freed
    };
    if !freed {
        return MPI_SUCCESS;
    }
    // Freed by MPI_Request_free before: its free_fn runs now and its slot goes.
    let rc = g.run_free();
    crate::req::release(request);
    raise_on(MPI_COMM_WORLD, rc)
}

/// MPI_Request_get_status of generalized request `g` (of communicator `comm`): `query_fn`
/// once complete, the request left as it is.
///
/// # Safety
/// `flag` writable; `status` writable or null.
pub(crate) unsafe fn get_status(g: &Greq, comm: Handle, flag: *mut c_int, status: *mut MPI_Status) -> c_int {
    if !g.is_complete() {
        // SAFETY: output argument.
        unsafe { *flag = 0 };
        return MPI_SUCCESS;
    }
    let (st, err) = g.query();
    // SAFETY: output arguments.
    unsafe {
        *flag = 1;
        crate::status::put_status(status, st);
    }
    raise_on(comm, err)
}
