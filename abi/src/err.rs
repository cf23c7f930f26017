//! Error handlers, error classes, codes and strings (MPI 5, chapter 9).

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, c_int};
use std::sync::Arc;

use parking_lot::Mutex;
use runthrough::{Class, Error};

use crate::consts::*;
use crate::handles::{Kind, Table};
use crate::types::{FnPtr, Handle};

/// A communicator error handler function (`MPI_Comm_errhandler_function`; the trailing
/// varargs are never passed).
pub(crate) type CommErrFn = unsafe extern "C" fn(*mut Handle, *mut c_int);

/// A user error handler.
#[derive(Debug)]
pub(crate) struct UserErrhandler {
    pub(crate) f: CommErrFn,
    /// The program's references to it: its creation's and one per `MPI_*_get_errhandler`
    /// that returned it; `MPI_Errhandler_free` drops one (MPI-4.1 9.3.4).
    refs: std::sync::atomic::AtomicUsize,
}

/// Counts another reference of the program to handler `h` (returned by a
/// `MPI_*_get_errhandler`, to be freed with `MPI_Errhandler_free`).
pub(crate) fn errhandler_ref(h: Handle) {
    if let Some(u) = ERRHANDLERS.get(h) {
        u.refs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Whether a communicator or a session still has handler `h`.
fn errhandler_in_use(h: Handle) -> bool {
    let comms = crate::comm::COMMS.all().into_iter().map(|(_, c)| c);
    let predefined = crate::env::runtime_world().into_iter().chain(crate::env::runtime_self());
    comms.chain(predefined).any(|c| *c.errhandler.lock() == h) || crate::session::uses_errhandler(h)
}

pub(crate) static ERRHANDLERS: Table<UserErrhandler> = Table::new(Kind::Errhandler);

thread_local! {
    static DETAIL: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Remembers a message for the next error raised on this thread (printed by the fatal
/// handlers).
pub(crate) fn set_detail(msg: String) {
    DETAIL.with(|d| *d.borrow_mut() = Some(msg));
}

/// User-added error classes, codes and strings (MPI_Add_error_*).
#[derive(Debug, Default)]
struct Added {
    last: c_int,
    class_of: HashMap<c_int, c_int>,
    strings: HashMap<c_int, String>,
}

static ADDED: Mutex<Option<Added>> = Mutex::new(None);

/// The first value MPI_Add_error_class hands out (above MPI_ERR_LASTCODE, as MPI 5 9.5
/// requires of the classes and codes a program adds).
const FIRST_ADDED: c_int = MPI_ERR_LASTCODE + 1;

/// The last error code in use (the MPI_LASTUSEDCODE attribute).
pub(crate) fn last_used_code() -> c_int {
    ADDED.lock().as_ref().map_or(FIRST_ADDED - 1, |a| a.last.max(FIRST_ADDED - 1))
}

/// The MPI error class of a runthrough error.
pub(crate) fn code_of(e: &Error) -> c_int {
    match e {
        Error::Propagated(list) => {
            // R27: the first signalled code when it is a valid MPI code, else MPI_ERR_OTHER.
            let c = list.first().map(|&(_, c)| c).unwrap_or(MPI_ERR_OTHER);
            if c > 0 && c <= MPI_ERR_LASTCODE {
                c
            } else {
                MPI_ERR_OTHER
            }
        }
        Error::CommCorrupted => MPIX_ERR_REVOKED,
        _ => match e.class() {
            Class::Truncate => MPI_ERR_TRUNCATE,
            Class::Rank => MPI_ERR_RANK,
            Class::Tag => MPI_ERR_TAG,
            Class::Arg => MPI_ERR_ARG,
            Class::InStatus => MPIX_ERR_PROC_FAILED,
            Class::Other => MPI_ERR_OTHER,
            Class::Intern => MPI_ERR_INTERN,
            Class::Unsupported => MPI_ERR_UNSUPPORTED_OPERATION,
            Class::RankFailStop | Class::ProcFailed => MPIX_ERR_PROC_FAILED,
            Class::ProcFailedPending => MPIX_ERR_PROC_FAILED_PENDING,
            Class::Revoked => MPIX_ERR_REVOKED,
        },
    }
}

/// Raises runthrough error `e` on communicator handle `comm` (through its handler).
pub(crate) fn raise_error(comm: Handle, e: &Error) -> c_int {
    set_detail(e.to_string());
    raise_on(comm, code_of(e))
}

/// Invokes the error handler of communicator `comm` for `code` and returns what the
/// call returns (the code, unless the handler aborts).
pub(crate) fn raise_on(comm: Handle, code: c_int) -> c_int {
    if code == MPI_SUCCESS {
        return code;
    }
    let (eh, obj) = match crate::comm::lookup(comm) {
        Ok(c) => {
            let eh = *c.errhandler.lock();
            (eh, Some(c))
        }
        // A bad handle: MPI_COMM_WORLD's handler; before MPI_Init, after MPI_Finalize or
        // with sessions only, the initial error handler (MPI-4.1 9.3, 11.2.2).
        Err(_) => match crate::comm::lookup(MPI_COMM_WORLD) {
            Ok(c) => {
                let eh = *c.errhandler.lock();
                (eh, Some(c))
            }
            Err(_) if crate::env::init_failed() => (crate::env::failed_init_handler(), None),
            Err(_) => (crate::info::initial_errhandler(), None),
        },
    };
    raise_with(eh, comm, code, obj)
}

/// Raises `code` through error handler `eh` of the object with handle `obj` (a
/// communicator, a session, or none for an error before the object exists) and returns
/// what the call returns. `scope` is what `MPI_ERRORS_ABORT` aborts (the communicator, or
/// this process alone for a session); `None` aborts the job.
pub(crate) fn raise_with(eh: Handle, obj: Handle, code: c_int, scope: Option<Arc<crate::comm::CommObj>>) -> c_int {
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
type Pending = Option<(Handle, c_int, Option<std::sync::Arc<crate::comm::CommObj>>)>;

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
    let detail = DETAIL.with(|d| d.borrow_mut().take());
    let what = detail.unwrap_or_else(|| class_string(error_class(code)).to_string());
    eprintln!(
        "runthrough libmpi_abi: {name} failed: {what} (error class {}); {}",
        error_class(code),
        if eh == MPI_ERRORS_ABORT { "aborting the communicator's group" } else { "aborting the job" }
    );
    match target {
        Some(c) => c.comm.abort(code.max(1)),
        // Sessions only: the runtime's world (no MPI_COMM_WORLD), so the job aborts.
        None => match crate::env::world().or_else(crate::env::runtime_world) {
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
            if let Some(u) = ERRHANDLERS.get(h) {
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

/// The class of an error code.
pub(crate) fn error_class(code: c_int) -> c_int {
    if let Some(a) = ADDED.lock().as_ref() {
        if let Some(&c) = a.class_of.get(&code) {
            return c;
        }
    }
    code
}

fn class_string(class: c_int) -> &'static str {
    match class {
        MPI_SUCCESS => "no error",
        MPI_ERR_BUFFER => "invalid buffer pointer",
        MPI_ERR_COUNT => "invalid count argument",
        MPI_ERR_TYPE => "invalid datatype",
        MPI_ERR_TAG => "invalid tag",
        MPI_ERR_COMM => "invalid communicator",
        MPI_ERR_RANK => "invalid rank",
        MPI_ERR_REQUEST => "invalid request",
        MPI_ERR_ROOT => "invalid root",
        MPI_ERR_GROUP => "invalid group",
        MPI_ERR_OP => "invalid reduction operation",
        MPI_ERR_TOPOLOGY => "invalid topology",
        MPI_ERR_DIMS => "invalid dimension argument",
        MPI_ERR_ARG => "invalid argument",
        MPI_ERR_UNKNOWN => "unknown error",
        MPI_ERR_TRUNCATE => "message truncated",
        MPI_ERR_OTHER => "other error",
        MPI_ERR_INTERN => "internal error",
        MPI_ERR_PENDING => "pending request",
        MPI_ERR_IN_STATUS => "error code is in status",
        MPI_ERR_INFO_KEY => "invalid info key",
        MPI_ERR_INFO_NOKEY => "info key not defined",
        MPI_ERR_INFO_VALUE => "invalid info value",
        MPI_ERR_INFO => "invalid info object",
        MPI_ERR_KEYVAL => "invalid attribute key",
        MPI_ERR_NO_MEM => "out of memory",
        MPI_ERR_NOT_SAME => "arguments differ between processes",
        MPI_ERR_UNSUPPORTED_OPERATION => "operation not supported",
        MPI_ERR_VALUE_TOO_LARGE => "value too large",
        MPI_ERR_ERRHANDLER => "invalid error handler",
        MPI_ERR_ABI => "ABI mismatch",
        MPIX_ERR_PROC_FAILED => "process failure (MPIX_ERR_PROC_FAILED)",
        MPIX_ERR_PROC_FAILED_PENDING => "process failure, request pending (MPIX_ERR_PROC_FAILED_PENDING)",
        MPIX_ERR_REVOKED => "communicator revoked (MPIX_ERR_REVOKED)",
        c if (1..=MPI_ERR_ABI).contains(&c) => "MPI error",
        _ => "unknown error code",
    }
}

/// Whether `code` is a valid error code or class.
fn valid_code(code: c_int) -> bool {
    (0..=MPI_ERR_ABI).contains(&code)
        || (MPIX_ERR_PROC_FAILED..=MPIX_ERR_REVOKED).contains(&code)
        || ADDED.lock().as_ref().is_some_and(|a| a.class_of.contains_key(&code))
}

/// Copies `s` into the C buffer `dst` (NUL-terminated, at most `max - 1` bytes) and
/// stores its length in `len`.
///
/// # Safety
/// `dst` has room for `max` bytes; `len` is writable or null.
pub(crate) unsafe fn put_string(s: &str, dst: *mut c_char, max: usize, len: *mut c_int) {
    let n = s.len().min(max.saturating_sub(1));
    if !dst.is_null() && max > 0 {
        // SAFETY: room for `max` bytes (function contract); n + 1 <= max.
        unsafe {
            std::ptr::copy_nonoverlapping(s.as_ptr(), dst.cast::<u8>(), n);
            *dst.add(n) = 0;
        }
    }
    if !len.is_null() {
        // SAFETY: writable (function contract).
        unsafe { *len = n as c_int };
    }
}

pub(crate) unsafe fn MPI_Error_class(errorcode: c_int, errorclass: *mut c_int) -> c_int {
    if !valid_code(errorcode) {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG);
    }
    // SAFETY: output argument (MPI contract).
    unsafe { *errorclass = error_class(errorcode) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Error_string(errorcode: c_int, string: *mut c_char, resultlen: *mut c_int) -> c_int {
    if !valid_code(errorcode) {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG);
    }
    let added = ADDED.lock().as_ref().and_then(|a| a.strings.get(&errorcode).cloned());
    let is_added = ADDED.lock().as_ref().is_some_and(|a| a.class_of.contains_key(&errorcode));
    // An added class or code has the empty string until MPI_Add_error_string sets one.
    let s = added.unwrap_or_else(|| if is_added { String::new() } else { class_string(errorcode).to_string() });
    // SAFETY: MPI_MAX_ERROR_STRING bytes (MPI contract).
    unsafe { put_string(&s, string, MPI_MAX_ERROR_STRING as usize, resultlen) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Add_error_class(errorclass: *mut c_int) -> c_int {
    let mut g = ADDED.lock();
    let a = g.get_or_insert_with(Added::default);
    a.last = a.last.max(FIRST_ADDED - 1) + 1;
    a.class_of.insert(a.last, a.last);
    // SAFETY: output argument.
    unsafe { *errorclass = a.last };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Add_error_code(errorclass: c_int, errorcode: *mut c_int) -> c_int {
    if !valid_code(errorclass) || error_class(errorclass) != errorclass {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG);
    }
    let mut g = ADDED.lock();
    let a = g.get_or_insert_with(Added::default);
    a.last = a.last.max(FIRST_ADDED - 1) + 1;
    a.class_of.insert(a.last, errorclass);
    // SAFETY: output argument.
    unsafe { *errorcode = a.last };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Add_error_string(errorcode: c_int, string: *const c_char) -> c_int {
    let mut g = ADDED.lock();
    let a = g.get_or_insert_with(Added::default);
    if !a.class_of.contains_key(&errorcode) || string.is_null() {
        return {
            drop(g);
            raise_on(MPI_COMM_WORLD, MPI_ERR_ARG)
        };
    }
    // SAFETY: a NUL-terminated C string (MPI contract).
    let s = unsafe { std::ffi::CStr::from_ptr(string) }.to_string_lossy().into_owned();
    a.strings.insert(errorcode, s);
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Remove_error_class(errorclass: c_int) -> c_int {
    // A class goes only once it has no codes and no string (MPI 4.1, 9.5).
    let mut g = ADDED.lock();
    let ok = g.as_mut().is_some_and(|a| {
        a.class_of.get(&errorclass) == Some(&errorclass)
            && !a.strings.contains_key(&errorclass)
            && !a.class_of.iter().any(|(&c, &k)| k == errorclass && c != errorclass)
            && a.class_of.remove(&errorclass).is_some()
    });
    drop(g);
    if ok {
        MPI_SUCCESS
    } else {
        raise_on(MPI_COMM_WORLD, MPI_ERR_ARG)
    }
}

pub(crate) unsafe fn MPI_Remove_error_code(errorcode: c_int) -> c_int {
    // A code goes only once its string is removed.
    let mut g = ADDED.lock();
    let ok = g.as_mut().is_some_and(|a| {
        a.class_of.get(&errorcode).is_some_and(|&k| k != errorcode)
            && !a.strings.contains_key(&errorcode)
            && a.class_of.remove(&errorcode).is_some()
    });
    drop(g);
    if ok {
        MPI_SUCCESS
    } else {
        raise_on(MPI_COMM_WORLD, MPI_ERR_ARG)
    }
}

pub(crate) unsafe fn MPI_Remove_error_string(errorcode: c_int) -> c_int {
    let mut g = ADDED.lock();
    match g.as_mut() {
        Some(a) if a.class_of.contains_key(&errorcode) => {
            a.strings.remove(&errorcode);
            MPI_SUCCESS
        }
        _ => {
            drop(g);
            raise_on(MPI_COMM_WORLD, MPI_ERR_ARG)
        }
    }
}

/// Whether `h` is a predefined or a live user error handler.
pub(crate) fn valid_errhandler(h: Handle) -> bool {
    matches!(h, MPI_ERRORS_ARE_FATAL | MPI_ERRORS_ABORT | MPI_ERRORS_RETURN) || ERRHANDLERS.get(h).is_some()
}

pub(crate) unsafe fn MPI_Comm_create_errhandler(comm_errhandler_fn: FnPtr, errhandler: *mut Handle) -> c_int {
    if comm_errhandler_fn.is_null() {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG);
    }
    // SAFETY: the program passes an MPI_Comm_errhandler_function (MPI contract).
    let f: CommErrFn = unsafe { std::mem::transmute::<FnPtr, CommErrFn>(comm_errhandler_fn) };
    let u = UserErrhandler { f, refs: 1.into() };
    // SAFETY: output argument.
    unsafe { *errhandler = ERRHANDLERS.insert(Arc::new(u)) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Comm_set_errhandler(comm: Handle, errhandler: Handle) -> c_int {
    if matches!(comm, MPI_COMM_WORLD | MPI_COMM_SELF) && crate::env::init_failed() {
        // After a failed MPI_Init (run-through chapter §17.5.2) the program may still choose
        // how the world's errors reach it.
        if !valid_errhandler(errhandler) {
            return raise_on(comm, MPI_ERR_ARG);
        }
        crate::env::set_failed_init_handler(errhandler);
        return MPI_SUCCESS;
    }
    let c = match crate::comm::lookup(comm) {
        Ok(c) => c,
        Err(e) => return raise_on(MPI_COMM_WORLD, e),
    };
    if !valid_errhandler(errhandler) {
        return raise_on(comm, MPI_ERR_ARG);
    }
    *c.errhandler.lock() = errhandler;
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Comm_get_errhandler(comm: Handle, errhandler: *mut Handle) -> c_int {
    let c = match crate::comm::lookup(comm) {
        Ok(c) => c,
        Err(e) => return raise_on(MPI_COMM_WORLD, e),
    };
    let eh = *c.errhandler.lock();
    errhandler_ref(eh);
    // SAFETY: output argument.
    unsafe { *errhandler = eh };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Comm_call_errhandler(comm: Handle, errorcode: c_int) -> c_int {
    if crate::comm::lookup(comm).is_err() {
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
        let Some(u) = ERRHANDLERS.get(h) else { return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG) };
        let dec = |n: usize| n.checked_sub(1);
        match u.refs.fetch_update(std::sync::atomic::Ordering::AcqRel, std::sync::atomic::Ordering::Acquire, dec) {
            Ok(1) if !errhandler_in_use(h) => drop(ERRHANDLERS.remove(h)),
            Ok(_) => {}
            Err(_) => return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG),
        }
    }
    // SAFETY: in/out argument.
    unsafe { *errhandler = MPI_ERRHANDLER_NULL };
    MPI_SUCCESS
}
