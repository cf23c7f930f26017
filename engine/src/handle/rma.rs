//! Handles of one-sided operations (`crate::rma`): the gets, get-accumulates and
//! compare-and-swaps write into a buffer of the caller's until their answer arrives, so
//! their views are made here, under the module's safety argument: a blocking call keeps
//! its request inside the call (a handle settles it, unwinding included), a request form
//! is started through a request scope and borrows its buffer for the scope.

use super::{pending, Request};
use crate::buf::RawBufMut;
use crate::engine::Engine;
use crate::error::Error;
use crate::lock::BiasedMutex;
use crate::request::Status;
pub use crate::rma::Target;
use crate::rma::{AccOp, Elem};
use crate::types::ReqId;
use crate::RequestScope;

/// What a get-like operation reads: a plain get, a get-accumulate or a compare-and-swap.
#[derive(Debug, Clone, Copy)]
pub enum Fetch<'o> {
    /// `MPI_Get`: the target's bytes.
    Get,
    /// `MPI_Get_accumulate` / `MPI_Fetch_and_op`: the target's elements before `op` with
    /// `origin` (`NoOp`: a read, `origin` ignored).
    Acc {
        /// The operation.
        op: AccOp,
        /// The element type.
        elem: Elem,
        /// The origin's elements (as many bytes as the result).
        origin: &'o [u8],
    },
    /// `MPI_Compare_and_swap`: the target's element, replaced by `new` if it equalled
    /// `compare`.
    Cas {
        /// The element type.
        elem: Elem,
        /// The value compared with.
        compare: &'o [u8],
        /// The value swapped in.
        new: &'o [u8],
    },
}

fn start(e: &mut Engine, at: Target, fetch: Fetch<'_>, view: RawBufMut) -> ReqId {
    match fetch {
        Fetch::Get => e.rma_get(at, view),
        Fetch::Acc { op, elem, origin } => e.rma_get_acc(at, op, elem, origin, view),
        Fetch::Cas { elem, compare, new } => e.rma_cas(at, elem, compare, new, view),
    }
}

/// A blocking get-like operation into `result` (the request never leaves this call).
pub fn fetch(eng: &BiasedMutex<Engine>, at: Target, what: Fetch<'_>, result: &mut [u8]) -> Result<Status, Error> {
    // SAFETY: `result` stays exclusively borrowed for this whole call, and the request
    // is settled inside it: by `wait`, or by the handle's `Drop` if anything unwinds.
    let view = unsafe { RawBufMut::new(result) };
    let mut e = eng.lock();
    let id = start(&mut e, at, what, view);
    pending(e, eng, None, id).wait()
}

/// A get-like operation into `result` as a request of scope `s` (`MPI_Rget`,
/// `MPI_Rget_accumulate`): `result` stays borrowed until the scope ends, and the scope
/// settles the request whatever happens to the handle.
pub fn fetch_in<'s>(
    s: &'s RequestScope<'s, '_>,
    eng: &'s BiasedMutex<Engine>,
    at: Target,
    what: Fetch<'_>,
    result: &'s mut [u8],
) -> Request<'s> {
    // SAFETY: `result` is borrowed for the scope's lifetime, and the scope settles every
    // request started in it before it returns (module safety argument).
    let view = unsafe { RawBufMut::new(result) };
    let mut e = eng.lock();
    let id = start(&mut e, at, what, view);
    pending(e, eng, Some(s), id)
}

/// Starts a one-sided request that holds no buffer (flush, lock, unlock: `start` calls
/// [`Engine::rma_flush`] or its siblings) and waits for it.
pub fn control(eng: &BiasedMutex<Engine>, start: impl FnOnce(&mut Engine) -> ReqId) -> Result<Status, Error> {
    let mut e = eng.lock();
    let id = start(&mut e);
    pending(e, eng, None, id).wait()
}

/// Starts a one-sided request that holds no buffer, as a handle (waited for later; not
/// tied to a scope, since it borrows nothing).
pub fn control_request(eng: &BiasedMutex<Engine>, start: impl FnOnce(&mut Engine) -> ReqId) -> Request<'_> {
    let mut e = eng.lock();
    let id = start(&mut e);
    pending(e, eng, None, id)
}

/// A get-like operation into `result` outside any scope (the C interface's `MPI_Rget`
/// and `MPI_Rget_accumulate`, whose request the program holds by handle): `origin` (in
/// `what`) is copied out before this returns, `result` is written until the request
/// settles.
///
/// # Safety
/// As [`crate::isend_unscoped`]: the returned request must settle — its outcome taken
/// by `wait`/`test`, or the handle dropped (not leaked) — before the borrow of `result`
/// ends. The engine writes `result` until then.
pub unsafe fn fetch_unscoped<'a>(
    eng: &'a BiasedMutex<Engine>,
    at: Target,
    what: Fetch<'_>,
    result: &'a mut [u8],
) -> Request<'a> {
    // SAFETY: the caller settles the request before the borrow of `result` ends
    // (function contract); the origin bytes of `what` are copied into records by `start`.
    let view = unsafe { RawBufMut::new(result) };
    let mut e = eng.lock();
    let id = start(&mut e, at, what, view);
    pending(e, eng, None, id)
}
