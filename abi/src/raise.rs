//! Raising an error through the error handler of its object (MPI 5, chapter 9): the
//! handler of a communicator (`MPI_COMM_WORLD`'s for a bad handle; before `MPI_Init`, after
//! `MPI_Finalize` or with sessions only, the initial one), of a session, a file or a
//! window, the fatal handlers' aborts (carried out by the guard once the call returns),
//! and the chapter's calls: error classes, codes and strings, and the communicators'
//! error handlers. Above the communicator and window objects and the runtime (`commobj.rs`,
//! `winobj.rs`, `rt.rs`), which it looks up; below every family that raises.

use std::cell::RefCell;
use std::ffi::{c_char, c_int};
use std::sync::Arc;

use runthrough::Error;

use crate::commobj::CommObj;
use crate::consts::*;
use crate::err::{self, CommErrFn};
use crate::types::{FnPtr, Handle};

/// Raises runthrough error `e` on communicator handle `comm` (through its handler).
pub(crate) fn raise_error(comm: Handle, e: &Error) -> c_int {
    err::set_detail(e.to_string());
    raise_on(comm, err::code_of(e))
}

/// Invokes the error handler of communicator `comm` (or of window `comm`) for `code`
/// and returns what the call returns (the code, unless the handler aborts).
pub(crate) fn raise_on(comm: Handle, code: c_int) -> c_int {
    if code == MPI_SUCCESS {
        return code;
    }
    // A window (its requests raise on it too): its own handler; MPI_ERRORS_ABORT aborts
    // the group of the communicator it was created on.
    if let Some(w) = crate::winobj::WINS.get(comm) {
        let eh = *w.errhandler.lock();
        return raise_with(eh, comm, code, Some(w.parent.clone()));
    }
    let (eh, obj) = match crate::rt::lookup(comm) {
        Ok(c) => {
            let eh = *c.errhandler.lock();
            (eh, Some(c))
        }
        // A bad handle: MPI_COMM_WORLD's handler; before MPI_Init, after MPI_Finalize or
        // with sessions only, the initial error handler (MPI-4.1 9.3, 11.2.2).
        Err(_) => match crate::rt::lookup(MPI_COMM_WORLD) {
            Ok(c) => {
                let eh = *c.errhandler.lock();
                (eh, Some(c))
            }
            Err(_) if crate::rt::init_failed() => (crate::rt::failed_init_handler(), None),
            Err(_) => (err::initial_errhandler(), None),
        },
    };
    raise_with(eh, comm, code, obj)
}

/// Raises `code` through error handler `eh` of the object with handle `obj` (a
/// communicator, a session, or none for an error before the object exists) and returns
/// what the call returns. `scope` is what `MPI_ERRORS_ABORT` aborts (the communicator, or
/// this process alone for a session); `None` aborts the job.
pub(crate) fn raise_with(eh: Handle, obj: Handle, code: c_int, scope: Option<Arc<CommObj>>) -> c_int {
    if code == MPI_SUCCESS {
        return code;
    }
    match eh {
        MPI_ERRORS_RETURN => code,
        MPI_ERRORS_ARE_FATAL | MPI_ERRORS_ABORT => {
            // Carried out by the guard once the call returns (it knows the call's name).
            let target = if eh == MPI_ERRORS_ABORT { scope } else { None };
            PENDING.with(|p| *p.borrow_mut() = Some((eh, code, target)));
            code
        }
        h => invoke(h, obj, code),
    }
}

/// Raises the failure of a multiple-completion call (`MPI_Waitall`, `MPI_Waitsome`,
/// `MPI_Testall`, `MPI_Testsome`) on `comm`, the communicator of its first failed request:
/// the handler is called with that request's own code `first` (as `MPI_Wait` and
/// `MPI_Waitany` would call it; the statuses hold each request's code), and the call
/// returns `MPI_ERR_IN_STATUS` where the handler returns.
pub(crate) fn raise_in_status(comm: Handle, first: c_int) -> c_int {
    raise_on(comm, first);
    if fatal_pending() {
        first
    } else {
        MPI_ERR_IN_STATUS
    }
}

/// A fatal handler's abort waiting for the guard: the handler, the code and, for
/// `MPI_ERRORS_ABORT`, the communicator whose group is aborted.
type Pending = Option<(Handle, c_int, Option<Arc<CommObj>>)>;

thread_local! {
    static PENDING: RefCell<Pending> = const { RefCell::new(None) };
}

/// Whether a fatal error handler is waiting to abort this thread's call.
pub(crate) fn fatal_pending() -> bool {
    PENDING.with(|p| p.borrow().is_some())
}

/// Aborts for the pending fatal handler, if any, naming the call `name`.
#[cold]
#[inline(never)]
pub(crate) fn fatal_now(name: &str) {
    let Some((eh, code, target)) = PENDING.with(|p| p.borrow_mut().take()) else { return };
    let detail = err::take_detail();
    let what = detail.unwrap_or_else(|| err::class_string(err::error_class(code)).to_string());
    eprintln!(
        "runthrough libmpi_abi: {name} failed: {what} (error class {}); {}",
        err::error_class(code),
        if eh == MPI_ERRORS_ABORT { "aborting the communicator's group" } else { "aborting the job" }
    );
    crate::rt::flush_c_output();
    match target {
        Some(c) => c.comm.abort(code.max(1)),
        // Sessions only: the runtime's world (no MPI_COMM_WORLD), so the job aborts.
        None => match crate::rt::world().or_else(crate::rt::runtime_world) {
            Some(w) => w.comm.abort(code.max(1)),
            None => std::process::exit(code.clamp(1, 255)),
        },
    }
}

/// Runs error handler `eh` for `code` on object `obj` (a communicator, file or session
/// handle) where it does not abort: a user handler is called, `MPI_ERRORS_RETURN` does
/// nothing; the fatal handlers go through the world communicator. Returns `code`.
pub(crate) fn invoke(eh: Handle, obj: Handle, code: c_int) -> c_int {
    match eh {
        MPI_ERRORS_RETURN => code,
        MPI_ERRORS_ARE_FATAL | MPI_ERRORS_ABORT => raise_on(MPI_COMM_WORLD, code),
        h => {
            if let Some(u) = err::ERRHANDLERS.get(h) {
                let mut handle = obj;
                let mut c = code;
                // SAFETY: a user handler registered by MPI_*_create_errhandler, called as
                // MPI prescribes with pointers to the object's handle and a code.
                unsafe { (u.f)(&mut handle, &mut c) };
            }
            code
        }
    }
}

/// Whether a communicator, a session or a window still has handler `h`.
fn errhandler_in_use(h: Handle) -> bool {
    let comms = crate::commobj::COMMS.all().into_iter().map(|(_, c)| c);
    let predefined = crate::rt::runtime_world().into_iter().chain(crate::rt::runtime_self());
    comms.chain(predefined).any(|c| *c.errhandler.lock() == h)
        || crate::rt::uses_errhandler(h)
        || crate::winobj::uses_errhandler(h)
}

pub(crate) unsafe fn MPI_Error_class(errorcode: c_int, errorclass: *mut c_int) -> c_int {
    if !err::valid_code(errorcode) {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG);
    }
    // SAFETY: output argument (MPI contract).
    unsafe { *errorclass = err::error_class(errorcode) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Error_string(errorcode: c_int, string: *mut c_char, resultlen: *mut c_int) -> c_int {
    if !err::valid_code(errorcode) {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG);
    }
    let s = err::error_string(errorcode);
    // SAFETY: MPI_MAX_ERROR_STRING bytes (MPI contract).
    unsafe { err::put_string(&s, string, MPI_MAX_ERROR_STRING as usize, resultlen) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Add_error_class(errorclass: *mut c_int) -> c_int {
    let c = err::add_error_class();
    // SAFETY: output argument.
    unsafe { *errorclass = c };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Add_error_code(errorclass: c_int, errorcode: *mut c_int) -> c_int {
    if !err::valid_code(errorclass) || err::error_class(errorclass) != errorclass {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG);
    }
    let c = err::add_error_code(errorclass);
    // SAFETY: output argument.
    unsafe { *errorcode = c };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Add_error_string(errorcode: c_int, string: *const c_char) -> c_int {
    // SAFETY: a NUL-terminated C string or null (MPI contract).
    if unsafe { err::add_error_string(errorcode, string) } {
        MPI_SUCCESS
    } else {
        raise_on(MPI_COMM_WORLD, MPI_ERR_ARG)
    }
}

pub(crate) unsafe fn MPI_Remove_error_class(errorclass: c_int) -> c_int {
    if err::remove_error_class(errorclass) {
        MPI_SUCCESS
    } else {
        raise_on(MPI_COMM_WORLD, MPI_ERR_ARG)
    }
}

pub(crate) unsafe fn MPI_Remove_error_code(errorcode: c_int) -> c_int {
    if err::remove_error_code(errorcode) {
        MPI_SUCCESS
    } else {
        raise_on(MPI_COMM_WORLD, MPI_ERR_ARG)
    }
}

pub(crate) unsafe fn MPI_Remove_error_string(errorcode: c_int) -> c_int {
    if err::remove_error_string(errorcode) {
        MPI_SUCCESS
    } else {
        raise_on(MPI_COMM_WORLD, MPI_ERR_ARG)
    }
}

pub(crate) unsafe fn MPI_Comm_create_errhandler(comm_errhandler_fn: FnPtr, errhandler: *mut Handle) -> c_int {
    if comm_errhandler_fn.is_null() {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG);
    }
    // SAFETY: the program passes an MPI_Comm_errhandler_function (MPI contract).
    let f: CommErrFn = unsafe { std::mem::transmute::<FnPtr, CommErrFn>(comm_errhandler_fn) };
    // SAFETY: output argument.
    unsafe { *errhandler = err::new_errhandler(f) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Comm_set_errhandler(comm: Handle, errhandler: Handle) -> c_int {
    if matches!(comm, MPI_COMM_WORLD | MPI_COMM_SELF) && crate::rt::init_failed() {
        // After a failed MPI_Init (run-through chapter §17.5.2) the program may still choose
        // how the world's errors reach it.
        if !err::valid_errhandler(errhandler) {
            return raise_on(comm, MPI_ERR_ARG);
        }
        crate::rt::set_failed_init_handler(errhandler);
        return MPI_SUCCESS;
    }
    let c = match crate::rt::lookup(comm) {
        Ok(c) => c,
        Err(e) => return raise_on(MPI_COMM_WORLD, e),
    };
    if !err::valid_errhandler(errhandler) {
        return raise_on(comm, MPI_ERR_ARG);
    }
    *c.errhandler.lock() = errhandler;
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Comm_get_errhandler(comm: Handle, errhandler: *mut Handle) -> c_int {
    let c = match crate::rt::lookup(comm) {
        Ok(c) => c,
        Err(e) => return raise_on(MPI_COMM_WORLD, e),
    };
    let eh = *c.errhandler.lock();
    err::errhandler_ref(eh);
    // SAFETY: output argument.
    unsafe { *errhandler = eh };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Comm_call_errhandler(comm: Handle, errorcode: c_int) -> c_int {
    if crate::rt::lookup(comm).is_err() {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_COMM);
    }
    let rc = raise_on(comm, errorcode);
    // A fatal handler aborts in the guard, which acts on a failed call only.
    if fatal_pending() {
        return rc;
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Errhandler_free(errhandler: *mut Handle) -> c_int {
    // SAFETY: in/out argument.
    let h = unsafe { *errhandler };
    if matches!(h, MPI_ERRORS_ARE_FATAL | MPI_ERRORS_ABORT | MPI_ERRORS_RETURN) {
        // Freeing a predefined handler is allowed and does nothing to it.
    } else {
        // The program's reference goes; the handler itself once no reference is left and
        // no communicator or session has it (MPI-4.1 9.3.4).
        match err::drop_errhandler_ref(h) {
            Some(true) if !errhandler_in_use(h) => drop(err::ERRHANDLERS.remove(h)),
            Some(_) => {}
            None => return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG),
        }
    }
    // SAFETY: in/out argument.
    unsafe { *errhandler = MPI_ERRHANDLER_NULL };
    MPI_SUCCESS
}
