//! No panic crosses into C: every exported function runs inside [`call`], which turns a
//! panic into `MPI_ERR_INTERN` (after printing it). A fatal error handler's abort also
//! happens here, after the call, where the function's name is known: the hot path then
//! touches no thread-local state (a cdylib's thread-locals cost a `__tls_get_addr` call).

use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::consts::*;
use crate::types::Handle;

/// Runs the implementation of `name`, catching a panic; carries out a fatal error
/// handler's abort the implementation asked for. Inlined into every exported function,
/// so the success path is the call, one test and the return.
#[inline(always)]
pub(crate) fn call(name: &'static str, f: impl FnOnce() -> c_int) -> c_int {
    let r = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => panicked(name, p),
    };
    if r != MPI_SUCCESS {
        crate::raise::fatal_now(name);
    }
    r
}

/// A panic caught at the boundary: printed, and `MPI_ERR_INTERN` for the program.
#[cold]
#[inline(never)]
fn panicked(name: &'static str, p: Box<dyn std::any::Any + Send>) -> c_int {
    let msg = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    eprintln!("runthrough libmpi_abi: internal error in {name}: {msg}");
    MPI_ERR_INTERN
}

/// [`call`] for the few functions that return a value, not an error code (a panic gives
/// the type's default).
pub(crate) fn call_value<T: Default>(name: &'static str, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        eprintln!("runthrough libmpi_abi: internal error in {name}");
        T::default()
    })
}

/// The body of every function runthrough does not implement: `MPI_ERR_UNSUPPORTED_OPERATION`
/// through the error handler of `comm` (or of MPI_COMM_WORLD), with a message naming it.
pub(crate) fn unsupported(name: &'static str, comm: Handle) -> c_int {
    call(name, || {
        // RT_ABI_TRACE=1 names every unsupported call on stderr, whatever the handler.
        if std::env::var_os("RT_ABI_TRACE").is_some_and(|v| v == "1") {
            eprintln!("runthrough libmpi_abi: unsupported call {name}");
        }
        crate::err::set_detail(format!("{name} is not supported by runthrough's libmpi_abi.so.1"));
        let comm = if crate::rt::lookup(comm).is_ok() { comm } else { MPI_COMM_WORLD };
        crate::raise::raise_on(comm, MPI_ERR_UNSUPPORTED_OPERATION)
    })
}
