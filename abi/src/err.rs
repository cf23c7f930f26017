//! Error classes, codes and strings (MPI 5, chapter 9): the class of a runthrough error,
//! the classes, codes and strings a program adds, the message for the next error raised,
//! the error handler objects and the initial error handler. Nothing here raises an
//! error: raising goes through an object's handler, which `raise.rs` finds (it looks up
//! communicators and the world, above this); the chapter's calls are there too.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, c_int};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use parking_lot::Mutex;
use runthrough::{Class, Error};

use crate::consts::*;
use crate::handles::{Kind, Table};
use crate::types::Handle;

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

pub(crate) static ERRHANDLERS: Table<UserErrhandler> = Table::new(Kind::Errhandler);

/// A new user error handler calling `f`, with the program's first reference to it.
pub(crate) fn new_errhandler(f: CommErrFn) -> Handle {
    let u = UserErrhandler { f, refs: 1.into() };
    ERRHANDLERS.insert(Arc::new(u))
}

/// Counts another reference of the program to handler `h` (returned by a
/// `MPI_*_get_errhandler`, to be freed with `MPI_Errhandler_free`).
pub(crate) fn errhandler_ref(h: Handle) {
    if let Some(u) = ERRHANDLERS.get(h) {
        u.refs.fetch_add(1, Ordering::Relaxed);
    }
}

/// Drops one of the program's references to user handler `h` (`MPI_Errhandler_free`):
/// whether it was the last one; `None` when `h` is no live user handler or has no
/// reference left.
pub(crate) fn drop_errhandler_ref(h: Handle) -> Option<bool> {
    let u = ERRHANDLERS.get(h)?;
    let dec = |n: usize| n.checked_sub(1);
    u.refs.fetch_update(Ordering::AcqRel, Ordering::Acquire, dec).ok().map(|n| n == 1)
}

/// Whether `h` is a predefined or a live user error handler.
pub(crate) fn valid_errhandler(h: Handle) -> bool {
    matches!(h, MPI_ERRORS_ARE_FATAL | MPI_ERRORS_ABORT | MPI_ERRORS_RETURN) || ERRHANDLERS.get(h).is_some()
}

// ---- the initial error handler (MPI-4.1 9.3, 11.2.2) ----

/// The launcher's choice of initial error handler (`rtrun` passes it to every rank).
const INITIAL_ERRHANDLER_ENV: &str = "RT_INITIAL_ERRHANDLER";

/// The initial error handler and its name as `mpi_initial_errhandler` reports it: the
/// handler MPI_COMM_WORLD, MPI_COMM_SELF and sessions (given MPI_ERRHANDLER_NULL) start
/// with, and the one raised on where no object is (before MPI_Init, sessions only).
fn initial() -> (Handle, &'static str) {
    static INITIAL: std::sync::OnceLock<(Handle, &'static str)> = std::sync::OnceLock::new();
    *INITIAL.get_or_init(|| {
        let fatal = (MPI_ERRORS_ARE_FATAL, "mpi_errors_are_fatal");
        let Some(v) = std::env::var_os(INITIAL_ERRHANDLER_ENV) else { return fatal };
        let v = v.to_string_lossy();
        match v.trim().to_ascii_lowercase().as_str() {
            "mpi_errors_are_fatal" => fatal,
            "mpi_errors_abort" => (MPI_ERRORS_ABORT, "mpi_errors_abort"),
            "mpi_errors_return" => (MPI_ERRORS_RETURN, "mpi_errors_return"),
            _ => {
                eprintln!(
                    "runthrough libmpi_abi: ignoring {INITIAL_ERRHANDLER_ENV}={v:?} (expected mpi_errors_are_fatal, \
                     mpi_errors_abort or mpi_errors_return); the initial error handler is mpi_errors_are_fatal"
                );
                fatal
            }
        }
    })
}

/// The initial error handler (see [`initial`]).
pub(crate) fn initial_errhandler() -> Handle {
    initial().0
}

/// The name `mpi_initial_errhandler` reports for the initial error handler (MPI_INFO_ENV).
pub(crate) fn initial_errhandler_name() -> &'static str {
    initial().1
}

// ---- the message of the next error ----

thread_local! {
    static DETAIL: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Remembers a message for the next error raised on this thread (printed by the fatal
/// handlers).
pub(crate) fn set_detail(msg: String) {
    DETAIL.with(|d| *d.borrow_mut() = Some(msg));
}

/// Takes the message [`set_detail`] left on this thread, if any.
pub(crate) fn take_detail() -> Option<String> {
    DETAIL.with(|d| d.borrow_mut().take())
}

// ---- classes, codes and strings ----

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
            Class::Spawn => MPI_ERR_SPAWN,
        },
    }
}

/// The MPI error class of a runthrough error raised by a one-sided call: a call out of
/// its synchronization (an epoch not open, a lock not held, one opened twice) is
/// `MPI_ERR_RMA_SYNC` (MPI-4.1 12.7), every other error as [`code_of`] says.
pub(crate) fn rma_code_of(e: &Error) -> c_int {
    match e {
        Error::ApiMisuse(_) => MPI_ERR_RMA_SYNC,
        e => code_of(e),
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

pub(crate) fn class_string(class: c_int) -> &'static str {
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
        MPI_ERR_WIN => "invalid window",
        MPI_ERR_BASE => "invalid base address",
        MPI_ERR_SIZE => "invalid size",
        MPI_ERR_DISP => "invalid displacement",
        MPI_ERR_LOCKTYPE => "invalid lock type",
        MPI_ERR_ASSERT => "invalid assertion",
        MPI_ERR_RMA_CONFLICT => "conflicting accesses to a window",
        MPI_ERR_RMA_SYNC => "wrong synchronization of one-sided calls",
        MPI_ERR_RMA_RANGE => "target memory outside the window",
        MPI_ERR_RMA_ATTACH => "memory cannot be attached",
        MPI_ERR_RMA_SHARED => "memory cannot be shared",
        MPI_ERR_RMA_FLAVOR => "wrong window flavor",
        MPIX_ERR_PROC_FAILED => "process failure (MPIX_ERR_PROC_FAILED)",
        MPIX_ERR_PROC_FAILED_PENDING => "process failure, request pending (MPIX_ERR_PROC_FAILED_PENDING)",
        MPIX_ERR_REVOKED => "communicator revoked (MPIX_ERR_REVOKED)",
        c if (1..=MPI_ERR_ABI).contains(&c) => "MPI error",
        _ => "unknown error code",
    }
}

/// Whether `code` is a valid error code or class.
pub(crate) fn valid_code(code: c_int) -> bool {
    (0..=MPI_ERR_ABI).contains(&code)
        || (MPIX_ERR_PROC_FAILED..=MPIX_ERR_REVOKED).contains(&code)
        || ADDED.lock().as_ref().is_some_and(|a| a.class_of.contains_key(&code))
}

/// The string of valid code `errorcode` (`MPI_Error_string`): the one the program added,
/// the empty string for an added class or code without one, else its class's.
pub(crate) fn error_string(errorcode: c_int) -> String {
    let added = ADDED.lock().as_ref().and_then(|a| a.strings.get(&errorcode).cloned());
    let is_added = ADDED.lock().as_ref().is_some_and(|a| a.class_of.contains_key(&errorcode));
    // An added class or code has the empty string until MPI_Add_error_string sets one.
    added.unwrap_or_else(|| if is_added { String::new() } else { class_string(errorcode).to_string() })
}

/// Adds an error class (`MPI_Add_error_class`); its value.
pub(crate) fn add_error_class() -> c_int {
    let mut g = ADDED.lock();
    let a = g.get_or_insert_with(Added::default);
    a.last = a.last.max(FIRST_ADDED - 1) + 1;
    a.class_of.insert(a.last, a.last);
    a.last
}

/// Adds an error code of class `errorclass`, a valid class (`MPI_Add_error_code`); its
/// value.
pub(crate) fn add_error_code(errorclass: c_int) -> c_int {
    let mut g = ADDED.lock();
    let a = g.get_or_insert_with(Added::default);
    a.last = a.last.max(FIRST_ADDED - 1) + 1;
    a.class_of.insert(a.last, errorclass);
    a.last
}

/// Sets the string of an added class or code (`MPI_Add_error_string`); `false` (nothing
/// set) for another code or a null string.
///
/// # Safety
/// `string` is null or a NUL-terminated C string.
pub(crate) unsafe fn add_error_string(errorcode: c_int, string: *const c_char) -> bool {
    let mut g = ADDED.lock();
    let a = g.get_or_insert_with(Added::default);
    if !a.class_of.contains_key(&errorcode) || string.is_null() {
        return false;
    }
    // SAFETY: a NUL-terminated C string (function contract).
    let s = unsafe { std::ffi::CStr::from_ptr(string) }.to_string_lossy().into_owned();
    a.strings.insert(errorcode, s);
    true
}

/// Removes an added class (`MPI_Remove_error_class`); `false` unless it is one with no
/// codes and no string.
pub(crate) fn remove_error_class(errorclass: c_int) -> bool {
    // A class goes only once it has no codes and no string (MPI 4.1, 9.5).
    let mut g = ADDED.lock();
    g.as_mut().is_some_and(|a| {
        a.class_of.get(&errorclass) == Some(&errorclass)
            && !a.strings.contains_key(&errorclass)
            && !a.class_of.iter().any(|(&c, &k)| k == errorclass && c != errorclass)
            && a.class_of.remove(&errorclass).is_some()
    })
}

/// Removes an added code (`MPI_Remove_error_code`); `false` unless it is one without a
/// string.
pub(crate) fn remove_error_code(errorcode: c_int) -> bool {
    // A code goes only once its string is removed.
    let mut g = ADDED.lock();
    g.as_mut().is_some_and(|a| {
        a.class_of.get(&errorcode).is_some_and(|&k| k != errorcode)
            && !a.strings.contains_key(&errorcode)
            && a.class_of.remove(&errorcode).is_some()
    })
}

/// Removes the string of an added class or code (`MPI_Remove_error_string`); `false` for
/// another code.
pub(crate) fn remove_error_string(errorcode: c_int) -> bool {
    let mut g = ADDED.lock();
    match g.as_mut() {
        Some(a) if a.class_of.contains_key(&errorcode) => {
            a.strings.remove(&errorcode);
            true
        }
        _ => false,
    }
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
