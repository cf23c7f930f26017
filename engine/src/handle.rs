//! Request handles: the safe face of pending operations, sound whatever handles leak.
//!
//! # Safety argument (R30)
//!
//! A pending request makes the engine (and, through CMA or RMA, a peer or a NIC) read or
//! write the request's buffer until the request has *settled* (completed, or been
//! cancelled while nothing touches the buffer). Rust does not guarantee that a value's
//! `Drop` runs (`mem::forget`, `ManuallyDrop`, an `Rc` cycle), so a handle that settles
//! its request in `Drop` cannot by itself keep a borrowed buffer safe: forget the handle,
//! end the borrow, free the buffer, and the engine writes into freed memory. Two designs
//! here do not rest on `Drop`:
//!
//! - **Request scopes** ([`scope`], [`RequestScope`]), as `std::thread::scope`: every
//!   request that borrows a buffer is started through a scope and borrows the buffer for
//!   the scope's lifetime `'scope`, which the closure cannot name and which outlasts the
//!   closure's body. So the buffer stays borrowed until [`scope`] returns, whatever
//!   happens to the handle, and [`scope`] settles every request started in it (its own
//!   code, after the closure returned or unwound: it cannot be skipped) before it
//!   returns. A handle cannot leave the scope either: its type names `'scope`, which no
//!   type outside the closure can. Leaking a handle therefore changes nothing the memory
//!   can observe; the scope finds its request by the scope's token in the request slab.
//! - **Owned buffers** ([`OwnedRequest`]): the request takes a `Vec<T>` and hands it back
//!   at completion. The vector is taken apart into raw parts and rebuilt only once the
//!   request has settled; a leaked handle leaks the vector, so the memory the engine
//!   still holds is never freed. For requests that must outlive any scope.
//!
//! A small send that the transport takes at once (`Engine::try_send_now`: eager size,
//! nothing queued for the peer) completes before its handle is made: the transport copied
//! the bytes, the engine keeps no view of the buffer and no request slot, so the handle
//! only carries the status and its scope has nothing to settle for it.
//!
//! Blocking calls ([`send`], [`recv`], [`sendrecv`]) start and settle their request
//! inside one call: no handle ever reaches the caller. The engine's own collectives use
//! crate-private handles that its code always waits for (unwinding included, since their
//! owner is a local of the engine's own function).
//!
//! Dropping a pending handle is still allowed: a receive that has not matched is
//! cancelled, anything else (a receive being filled, a send the peer may still pull) is
//! progressed to completion first, so `drop` may block until then — never longer than
//! the failure detector takes to declare the peer failed.
//!
//! Requests are also futures ([`Request`], [`OwnedRequest`], and
//! [`crate::icoll::ICollRequest`]): a pending poll leaves the task's waker in the
//! request's slab slot, and whoever next calls `Engine::take_wakers` after the outcome
//! was set (the runtime's progress thread every tick, any other poll) wakes it once the
//! engine lock is released. A future is its request, so the argument above covers it.
//!
//! Waiting spins for `Config::spin_polls` polls, then yields the CPU on every poll, so
//! oversubscribed ranks (8 on 2 cores) make progress (docs/ARCHITECTURE.md §2).
//!
//! With `buf.rs` and `icoll.rs`, this is one of the engine's modules allowed `unsafe`: it
//! creates the buffer views whose validity the scopes and owned requests guarantee.
#![allow(unsafe_code)]

use std::future::Future;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Waker};

use crate::lock::BiasedMutex;
use bytemuck::Pod;
use parking_lot::Mutex;

use crate::buf::{RawBuf, RawBufMut};
use crate::engine::Engine;
use crate::error::Error;
use crate::matching::Pattern;
use crate::request::Status;
use crate::types::{Rank, ReqId, SendTarget};

pub mod rma;

/// Scope tokens: `0` means "no scope"; tokens are unique within the process (a wrap
/// after 2^32 scopes skips `0`; two live scopes never share one in practice, and if
/// they did each would only settle the other's requests early, which is safe).
static NEXT_SCOPE: AtomicU32 = AtomicU32::new(1);

/// A request scope: every request that borrows a buffer is started through one, and
/// [`scope`] settles all of them before it returns (see the module's safety argument).
///
/// `'scope` is the lifetime of the scope itself (buffers are borrowed for it), `'env` the
/// lifetime of what the closure borrows from outside (the communicators, the buffers).
pub struct RequestScope<'scope, 'env: 'scope> {
    token: u32,
    /// The engines the scope's requests were started on (one in a normal program).
    first: OnceLock<&'scope BiasedMutex<Engine>>,
    more: Mutex<Vec<&'scope BiasedMutex<Engine>>>,
    /// Invariance over both lifetimes, as `std::thread::Scope`.
    scope: PhantomData<&'scope mut &'scope ()>,
    env: PhantomData<&'env mut &'env ()>,
}

impl std::fmt::Debug for RequestScope<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestScope").field("token", &self.token).finish_non_exhaustive()
    }
}

/// Runs `f` with a request scope and settles every request started in it before
/// returning — also when `f` panics (the panic then continues) and also requests whose
/// handles `f` leaked. Pending sends are completed (the peer may still pull them),
/// unmatched receives cancelled, receives being filled completed.
///
/// ```
/// # use runthrough_engine::handle::scope;
/// let mut buf = [0u8; 4];
/// scope(|s| {
///     // requests started through `s` borrow `buf` until `scope` returns
///     let _ = (s, &mut buf);
/// });
/// ```
pub fn scope<'env, F, T>(f: F) -> T
where
    F: for<'scope> FnOnce(&'scope RequestScope<'scope, 'env>) -> T,
{
    let mut token = NEXT_SCOPE.fetch_add(1, Ordering::Relaxed);
    if token == 0 {
        token = NEXT_SCOPE.fetch_add(1, Ordering::Relaxed);
    }
    let s = RequestScope {
        token,
        first: OnceLock::new(),
        more: Mutex::new(Vec::new()),
        scope: PhantomData,
        env: PhantomData,
    };
    let out = catch_unwind(AssertUnwindSafe(|| f(&s)));
    s.settle();
    match out {
        Ok(v) => v,
        Err(panic) => resume_unwind(panic),
    }
}

impl<'scope> RequestScope<'scope, '_> {
    /// Records a handle started on `eng`.
    pub(crate) fn enter(&'scope self, eng: &'scope BiasedMutex<Engine>) -> ScopeRef<'scope> {
        let first = self.first.get_or_init(|| eng);
        if !std::ptr::eq(*first, eng) {
            let mut more = self.more.lock();
            if !more.iter().any(|e| std::ptr::eq(*e, eng)) {
                more.push(eng);
            }
        }
        ScopeRef { token: self.token, _scope: PhantomData }
    }

    /// Settles every request still owned by the scope: those of leaked handles. A
    /// handle that settled its request took it out of the engine, so normally this
    /// finds none, and without a search while no request of any scope is live.
    fn settle(&self) {
        let Some(first) = self.first.get() else { return };
        let more = std::mem::take(&mut *self.more.lock());
        for eng in std::iter::once(first).chain(more.iter()) {
            let mut waiter = None;
            loop {
                {
                    let mut e = eng.lock();
                    if e.release_scope(self.token) == 0 {
                        break;
                    }
                    e.progress();
                    if e.release_scope(self.token) == 0 {
                        break;
                    }
                    waiter.get_or_insert_with(|| Waiter::new(e.config().spin_polls));
                }
                if let Some(w) = waiter.as_mut() {
                    w.snooze();
                }
            }
        }
    }
}

/// What a handle knows of its scope.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ScopeRef<'scope> {
    pub(crate) token: u32,
    _scope: PhantomData<&'scope ()>,
}

/// A pending point-to-point operation on a buffer borrowed for `'a`.
#[derive(Debug)]
#[must_use = "a request does nothing unless waited on or tested"]
pub struct Request<'a> {
    eng: &'a BiasedMutex<Engine>,
    id: Option<ReqId>,
    /// A send or receive the small-message path completed at once
    /// (`Engine::try_send_now`, `Engine::try_recv_now`): it has no request slot, and
    /// this is its outcome until taken.
    ready: Option<Status>,
    _buf: PhantomData<&'a mut [u8]>,
}

/// Starts a send of `buf` in scope `s` (see `Engine::start_send`); `buf` stays borrowed
/// until the scope ends.
#[inline]
pub fn isend<'s>(
    s: &'s RequestScope<'s, '_>,
    eng: &'s BiasedMutex<Engine>,
    to: SendTarget,
    buf: &'s [u8],
) -> Request<'s> {
    start_send_in(Some(s), eng, to, buf)
}

/// Starts a send: at once with no request slot when the small-message path takes it (a
/// complete handle: the engine holds no view of `buf`, so a scope has nothing to settle
/// for it), else as an engine request, owned by scope `s` when there is one.
#[inline]
fn start_send_in<'a>(
    s: Option<&'a RequestScope<'a, '_>>,
    eng: &'a BiasedMutex<Engine>,
    to: SendTarget,
    buf: &'a [u8],
) -> Request<'a> {
    let mut e = eng.lock();
    if let Some(st) = e.try_send_now(to, buf) {
        return Request::ready(eng, st);
    }
    // SAFETY: the view's contract (buffer alive and unmodified while the request is
    // pending) holds because `buf` stays borrowed until the request settled: with a scope,
    // for the scope's lifetime, and the scope settles the request before it ends (module
    // safety argument); without one, the caller is this crate's `isend_local`, whose
    // handle settles the request (wait or `Drop`) before the borrow ends.
    let view = unsafe { RawBuf::new(buf) };
    let id = e.start_send(to, view);
    pending(e, eng, s, id)
}

/// Starts a receive into `buf` in scope `s` (see `Engine::start_recv`); `buf` stays
/// borrowed until the scope ends.
#[inline]
pub fn irecv<'s>(
    s: &'s RequestScope<'s, '_>,
    eng: &'s BiasedMutex<Engine>,
    pattern: Pattern,
    peer: Option<Rank>,
    buf: &'s mut [u8],
) -> Request<'s> {
    start_recv_in(Some(s), eng, pattern, peer, buf)
}

/// Starts a receive: at once with no request slot when a message already here completes
/// it (`Engine::try_recv_now`: a complete handle; the engine keeps no view of `buf`, so
/// a scope has nothing to settle for it), else as an engine request, owned by scope `s`
/// when there is one.
#[inline]
fn start_recv_in<'a>(
    s: Option<&'a RequestScope<'a, '_>>,
    eng: &'a BiasedMutex<Engine>,
    pattern: Pattern,
    peer: Option<Rank>,
    buf: &'a mut [u8],
) -> Request<'a> {
    // SAFETY: the view's contract (buffer alive and not otherwise accessed while the
    // request is pending) holds because `buf` stays exclusively borrowed until the
    // request settled: with a scope, for the scope's lifetime, and the scope settles the
    // request before it ends; without one, the caller is `irecv_local`'s, whose handle
    // settles it (wait or `Drop`) before the borrow ends. On the small-message path the
    // view is written only inside this call.
    let mut view = unsafe { RawBufMut::new(buf) };
    let mut e = eng.lock();
    if let Some(st) = e.try_recv_now(&pattern, &mut view) {
        return Request::ready(eng, st);
    }
    let id = e.start_recv(pattern, peer, view);
    pending(e, eng, s, id)
}

/// The handle of engine request `id`, just started under the lock `e` (released here),
/// owned by scope `s` when there is one.
fn pending<'a>(
    mut e: crate::lock::BiasedGuard<'_, Engine>,
    eng: &'a BiasedMutex<Engine>,
    s: Option<&'a RequestScope<'a, '_>>,
    id: ReqId,
) -> Request<'a> {
    if let Some(s) = s {
        e.set_scope(id, s.enter(eng).token);
    }
    drop(e);
    Request { eng, id: Some(id), ready: None, _buf: PhantomData }
}

/// Starts an engine-internal send. The caller (this crate) always waits for or drops the
/// handle in the function that made it, so the borrow never ends before the request
/// settled.
pub(crate) fn isend_local<'a>(eng: &'a BiasedMutex<Engine>, to: SendTarget, buf: &'a [u8]) -> Request<'a> {
    // The handle settles the request (wait or `Drop`) before the borrow of `buf` ends;
    // this crate never leaks its own handles (function contract).
    start_send_in(None, eng, to, buf)
}

/// Starts an engine-internal receive (contract of [`isend_local`]).
pub(crate) fn irecv_local<'a>(
    eng: &'a BiasedMutex<Engine>,
    pattern: Pattern,
    peer: Option<Rank>,
    buf: &'a mut [u8],
) -> Request<'a> {
    start_recv_in(None, eng, pattern, peer, buf)
}

/// Starts a send of `buf` outside any scope: the engine-level escape hatch for code that
/// settles every request it starts (tests driving several engines in one thread).
///
/// # Safety
/// The returned request must settle — its outcome taken by `wait`/`test`, or the handle
/// dropped (not leaked) — before the borrow of `buf` ends. The engine reads `buf` until
/// then.
pub unsafe fn isend_unscoped<'a>(eng: &'a BiasedMutex<Engine>, to: SendTarget, buf: &'a [u8]) -> Request<'a> {
    isend_local(eng, to, buf)
}

/// A synchronous-mode send outside any scope (MPI_Issend): completes only after the
/// receiver matched it (see [`isend_unscoped`]).
///
/// # Safety
/// As [`isend_unscoped`].
pub unsafe fn issend_unscoped<'a>(eng: &'a BiasedMutex<Engine>, to: SendTarget, buf: &'a [u8]) -> Request<'a> {
    // SAFETY: the caller settles the request before the borrow of `buf` ends (contract).
    let view = unsafe { RawBuf::new(buf) };
    let id = eng.lock().start_send_mode(to, view, true);
    Request { eng, id: Some(id), ready: None, _buf: PhantomData }
}

/// [`isend_unscoped`], or with `sync` [`issend_unscoped`], also returning the sequence
/// number the message took to `peer`, which names it for [`Request::cancel_send`];
/// `None` when the send failed or was parked at its start (a failed peer, a broken or
/// resolving communicator) and took none.
///
/// # Safety
/// As [`isend_unscoped`].
pub unsafe fn isend_unscoped_seq<'a>(
    eng: &'a BiasedMutex<Engine>,
    to: SendTarget,
    buf: &'a [u8],
    sync: bool,
) -> (Request<'a>, Option<u32>) {
    let mut e = eng.lock();
    let seq = e.send_seq(to.peer);
    if !sync {
        if let Some(st) = e.try_send_now(to, buf) {
            return (Request::ready(eng, st), Some(seq));
        }
    }
    // SAFETY: the caller settles the request before the borrow of `buf` ends (contract).
    let view = unsafe { RawBuf::new(buf) };
    let id = e.start_send_mode(to, view, sync);
    let took = e.send_seq(to.peer) == seq.wrapping_add(1);
    drop(e);
    (Request { eng, id: Some(id), ready: None, _buf: PhantomData }, took.then_some(seq))
}

/// Starts a receive into `buf` outside any scope (see [`isend_unscoped`]).
///
/// # Safety
/// As [`isend_unscoped`]: the request must settle before the borrow of `buf` ends; the
/// engine writes `buf` until then.
pub unsafe fn irecv_unscoped<'a>(
    eng: &'a BiasedMutex<Engine>,
    pattern: Pattern,
    peer: Option<Rank>,
    buf: &'a mut [u8],
) -> Request<'a> {
    irecv_local(eng, pattern, peer, buf)
}

/// Sends `buf` and waits until the buffer may be reused (a blocking send: the request
/// never leaves this call).
pub fn send(eng: &BiasedMutex<Engine>, to: SendTarget, buf: &[u8]) -> Result<Status, Error> {
    isend_local(eng, to, buf).wait()
}

/// Receives into `buf` (a blocking receive: the request never leaves this call).
pub fn recv(eng: &BiasedMutex<Engine>, pattern: Pattern, peer: Option<Rank>, buf: &mut [u8]) -> Result<Status, Error> {
    irecv_local(eng, pattern, peer, buf).wait()
}

/// A send and a receive started together and both waited for; returns
/// `(send outcome, receive outcome)`.
pub fn sendrecv(
    eng: &BiasedMutex<Engine>,
    to: SendTarget,
    sendbuf: &[u8],
    pattern: Pattern,
    src_peer: Option<Rank>,
    recvbuf: &mut [u8],
) -> (Result<Status, Error>, Result<Status, Error>) {
    let r = irecv_local(eng, pattern, src_peer, recvbuf);
    let s = isend_local(eng, to, sendbuf);
    let sent = s.wait();
    (sent, r.wait())
}

/// A pending point-to-point operation that owns its buffer (a `Vec<T>`) and hands it
/// back when it completes. Not tied to any scope: it may be stored, returned, or sent
/// to another thread. If the handle is leaked, so is the vector: the engine never
/// writes into memory that was freed.
#[must_use = "a request does nothing unless waited on or tested"]
pub struct OwnedRequest<T: Pod> {
    eng: Arc<BiasedMutex<Engine>>,
    id: Option<ReqId>,
    /// The vector's parts; rebuilt into a `Vec` only once the request has settled.
    ptr: NonNull<T>,
    len: usize,
    cap: usize,
}

// SAFETY: the request owns its vector like a `Vec<T>` does (which is `Send` for
// `T: Send`); the engine is behind a mutex in an `Arc`.
unsafe impl<T: Pod + Send> Send for OwnedRequest<T> {}
// SAFETY: `&OwnedRequest` only exposes `is_active` (no access to the buffer).
unsafe impl<T: Pod + Sync> Sync for OwnedRequest<T> {}

impl<T: Pod> std::fmt::Debug for OwnedRequest<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnedRequest").field("id", &self.id).field("len", &self.len).finish_non_exhaustive()
    }
}

impl<T: Pod> OwnedRequest<T> {
    fn parts(v: Vec<T>) -> (NonNull<T>, usize, usize) {
        let mut v = ManuallyDrop::new(v);
        // A `Vec`'s pointer is never null (dangling for no allocation).
        let ptr = NonNull::new(v.as_mut_ptr()).unwrap_or(NonNull::dangling());
        (ptr, v.len(), v.capacity())
    }

    fn bytes_len(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }

    /// Starts a send of `buf` (see `Engine::start_send`).
    pub fn isend(eng: &Arc<BiasedMutex<Engine>>, to: SendTarget, buf: Vec<T>) -> Self {
        let (ptr, len, cap) = Self::parts(buf);
        let mut r = OwnedRequest { eng: eng.clone(), id: None, ptr, len, cap };
        // SAFETY: the parts are a live allocation of `len` initialised `T`s (Pod: every
        // byte is initialised) that only this request owns; it is freed (rebuilt into a
        // `Vec`) only after the request settled, and leaked if the handle is.
        let bytes = unsafe { std::slice::from_raw_parts(ptr.as_ptr().cast::<u8>(), r.bytes_len()) };
        // SAFETY: as above: alive and unmodified until the request settled.
        let view = unsafe { RawBuf::new(bytes) };
        r.id = Some(eng.lock().start_send(to, view));
        r
    }

    /// Starts a receive into `buf` (see `Engine::start_recv`); the whole vector
    /// (`len` elements) is the receive buffer.
    pub fn irecv(eng: &Arc<BiasedMutex<Engine>>, pattern: Pattern, peer: Option<Rank>, buf: Vec<T>) -> Self {
        let (ptr, len, cap) = Self::parts(buf);
        let mut r = OwnedRequest { eng: eng.clone(), id: None, ptr, len, cap };
        // SAFETY: as in `isend`; nothing else can reach the allocation while the request
        // owns it, so the engine's writes are exclusive.
        let bytes = unsafe { std::slice::from_raw_parts_mut(ptr.as_ptr().cast::<u8>(), r.bytes_len()) };
        // SAFETY: as above.
        let view = unsafe { RawBufMut::new(bytes) };
        r.id = Some(eng.lock().start_recv(pattern, peer, view));
        r
    }

    /// Whether the outcome has not been taken yet.
    pub fn is_active(&self) -> bool {
        self.id.is_some()
    }

    /// Rebuilds the vector of a settled request.
    fn into_vec(mut self) -> Vec<T> {
        debug_assert!(self.id.is_none());
        self.id = None;
        let me = ManuallyDrop::new(self);
        // SAFETY: the request settled (the engine no longer holds a view of the
        // allocation) and the parts came from a `Vec<T>` taken apart in `parts` and not
        // rebuilt since (`me` is never dropped, so this happens once).
        let v = unsafe { Vec::from_raw_parts(me.ptr.as_ptr(), me.len, me.cap) };
        // SAFETY: `me` is not used after this; its `Arc` must still be released.
        drop(unsafe { std::ptr::read(&me.eng) });
        v
    }

    /// Takes the vector of a settled request out, leaving an empty one (what `Drop`
    /// then frees).
    fn take_vec(&mut self) -> Vec<T> {
        debug_assert!(self.id.is_none());
        let (ptr, len, cap) = (self.ptr, self.len, self.cap);
        (self.ptr, self.len, self.cap) = (NonNull::dangling(), 0, 0);
        // SAFETY: the request settled (the engine no longer holds a view of the
        // allocation) and the parts came from a `Vec<T>` taken apart in `parts`; `self`
        // now holds the parts of an empty vector, so they are rebuilt only here.
        unsafe { Vec::from_raw_parts(ptr.as_ptr(), len, cap) }
    }

    /// Makes progress; if the operation has completed, returns the buffer and the
    /// outcome, else gives the request back.
    pub fn test(mut self) -> Result<(Vec<T>, Result<Status, Error>), Self> {
        let Some(id) = self.id else {
            let out = Err(Error::ApiMisuse("request already completed and its outcome taken"));
            return Ok((self.into_vec(), out));
        };
        let out = test_id(&self.eng, id);
        match out {
            Some(out) => {
                self.id = None;
                Ok((self.into_vec(), out))
            }
            None => Err(self),
        }
    }

    /// Blocks until the operation completes; returns the buffer and the outcome.
    pub fn wait(mut self) -> (Vec<T>, Result<Status, Error>) {
        let out = match self.id {
            Some(id) => wait_id(&self.eng, id),
            None => Err(Error::ApiMisuse("request already completed and its outcome taken")),
        };
        self.id = None;
        (self.into_vec(), out)
    }
}

/// An owned request is a future of its buffer and outcome (as [`Request`]'s `Future`).
/// Polling it again after it returned gives an empty vector and `ApiMisuse`.
impl<T: Pod> Future for OwnedRequest<T> {
    type Output = (Vec<T>, Result<Status, Error>);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(id) = self.id else {
            let out = Err(Error::ApiMisuse("request already completed and its outcome taken"));
            return Poll::Ready((Vec::new(), out));
        };
        match poll_id(&self.eng, id, cx) {
            Poll::Ready(out) => {
                self.id = None;
                Poll::Ready((self.take_vec(), out))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: Pod> Drop for OwnedRequest<T> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            settle_id(&self.eng, id);
        }
        // SAFETY: the request settled (above, or when its outcome was taken); the parts
        // came from a `Vec<T>` that was not rebuilt (`into_vec` never drops `self`).
        drop(unsafe { Vec::from_raw_parts(self.ptr.as_ptr(), self.len, self.cap) });
    }
}

/// Takes request `id`'s outcome if it has completed, making progress once if not yet.
fn test_id(eng: &BiasedMutex<Engine>, id: ReqId) -> Option<Result<Status, Error>> {
    let mut e = eng.lock();
    e.take_if_complete(id).or_else(|| {
        e.progress();
        e.take_if_complete(id)
    })
}

/// Waits until request `id` completes and takes its outcome.
fn wait_id(eng: &BiasedMutex<Engine>, id: ReqId) -> Result<Status, Error> {
    let mut waiter = {
        let mut e = eng.lock();
        if let Some(out) = e.take_if_complete(id) {
            return out;
        }
        Waiter::new(e.config().spin_polls)
    };
    loop {
        {
            let mut e = eng.lock();
            e.progress();
            if let Some(out) = e.take_if_complete(id) {
                return out;
            }
        }
        waiter.snooze();
    }
}

/// Runs `f` on the engine for a poll: progresses first when the lock is free (else it
/// only waits for the short critical section of whoever holds it), then wakes, once the
/// lock is released, the futures whose requests `f` or the progress completed.
pub(crate) fn with_engine_polled<R>(eng: &BiasedMutex<Engine>, f: impl FnOnce(&mut Engine) -> R) -> R {
    let mut wakers = Vec::new();
    let out = {
        let mut e = match eng.try_lock() {
            Some(mut e) => {
                e.progress();
                e
            }
            None => eng.lock(),
        };
        let out = f(&mut e);
        e.take_wakers(&mut wakers);
        out
    };
    wakers.into_iter().for_each(Waker::wake);
    out
}

/// Polls request `id`: its outcome if it has one (after progressing), else registers
/// the task's waker with the request (woken by whoever next finds it completed: the
/// runtime's progress thread or another poll).
fn poll_id(eng: &BiasedMutex<Engine>, id: ReqId, cx: &Context<'_>) -> Poll<Result<Status, Error>> {
    with_engine_polled(eng, |e| match e.take_if_complete(id) {
        Some(out) => Poll::Ready(out),
        None => {
            e.register_waker(id, cx.waker());
            Poll::Pending
        }
    })
}

/// Releases request `id`: cancels it if nothing touches its buffer, else progresses
/// until it completes.
fn settle_id(eng: &BiasedMutex<Engine>, id: ReqId) {
    let spin = {
        let mut e = eng.lock();
        if e.release(id) {
            return;
        }
        e.config().spin_polls
    };
    let mut waiter = Waiter::new(spin);
    loop {
        {
            let mut e = eng.lock();
            e.progress();
            if e.release(id) {
                return;
            }
        }
        waiter.snooze();
    }
}

/// Spin-then-yield waiting (crossbeam's `Backoff` idea, with a poll-count threshold).
#[derive(Debug)]
pub struct Waiter {
    polls: u32,
    spin: u32,
}

impl Waiter {
    /// A waiter that spins `spin` polls before it yields.
    pub fn new(spin: u32) -> Self {
        Self { polls: 0, spin }
    }

    /// Whether the waiter spun its polls and now yields the CPU at every one.
    #[inline]
    pub fn yielding(&self) -> bool {
        self.polls >= self.spin
    }

    /// Called between unsuccessful polls.
    #[inline]
    pub fn snooze(&mut self) {
        if self.polls < self.spin {
            // No `pause` while spinning: it costs a poll about as long as the poll itself
            // (one engine lock and one look at each ring), so it would delay noticing an
            // arrival by half of it on average.
            self.polls += 1;
        } else {
            std::thread::yield_now();
        }
    }
}

impl<'a> Request<'a> {
    /// An operation that completed when it started (no request slot, nothing to settle).
    #[inline]
    fn ready(eng: &'a BiasedMutex<Engine>, st: Status) -> Self {
        Request { eng, id: None, ready: Some(st), _buf: PhantomData }
    }

    /// The request's outcome was taken or it was released: the handle no longer
    /// refers to it.
    fn done(&mut self) {
        self.id = None;
    }

    /// Whether the operation has completed (makes progress first). Completed requests
    /// stay completed; `wait` then returns the outcome.
    pub fn is_complete(&mut self) -> bool {
        if self.ready.is_some() {
            return true;
        }
        match self.id {
            None => true,
            Some(id) => {
                let mut e = self.eng.lock();
                e.progress();
                e.is_complete(id)
            }
        }
    }

    /// Makes progress and returns the outcome if the operation has completed; the
    /// request is then finished and later calls return `Ok(None)`.
    pub fn test(&mut self) -> Result<Option<Status>, Error> {
        if let Some(st) = self.ready.take() {
            return Ok(Some(st));
        }
        let Some(id) = self.id else { return Ok(None) };
        let out = test_id(self.eng, id);
        match out {
            Some(out) => {
                self.done();
                out.map(Some)
            }
            None => Ok(None),
        }
    }

    /// Blocks until the operation completes and returns its outcome.
    pub fn wait(mut self) -> Result<Status, Error> {
        self.wait_in_place()
    }

    /// Blocks until completion without consuming the handle.
    pub fn wait_in_place(&mut self) -> Result<Status, Error> {
        if let Some(st) = self.ready.take() {
            return Ok(st);
        }
        let Some(id) = self.id else {
            return Err(Error::ApiMisuse("request already completed and its outcome taken"));
        };
        let out = wait_id(self.eng, id);
        self.done();
        out
    }

    /// Whether this handle still refers to an operation whose outcome was not taken.
    pub fn is_active(&self) -> bool {
        self.id.is_some() || self.ready.is_some()
    }

    /// MPI_Cancel of this send, message `seq` to `peer` (from [`isend_unscoped_seq`]):
    /// asks the receiver to withdraw it if it has not matched it. The answer is
    /// [`Request::send_cancel_outcome`]'s; until then the handle is left as it is.
    pub fn cancel_send(&mut self, peer: Rank, seq: u32) {
        self.eng.lock().cancel_send(peer, seq, self.id);
    }

    /// The receiver's answer to [`Request::cancel_send`], after progressing: `Some(true)`
    /// the message was withdrawn and will never be received (the send has completed:
    /// `test` returns its status), `Some(false)` it is or will be received (complete the
    /// send as usual), `None` no answer yet. Taken once.
    pub fn send_cancel_outcome(&mut self, peer: Rank, seq: u32) -> Option<bool> {
        let mut e = self.eng.lock();
        e.progress();
        e.take_cancel_outcome(peer, seq)
    }

    /// Hands this request to the engine (`MPI_Request_free` of an active request): it
    /// completes during progress, whoever progresses; then `owner.complete` runs with
    /// its outcome (under the engine lock) and `owner` is dropped by the next holder of
    /// the lock that takes it ([`Engine::take_released`]). Completed already, it
    /// completes and drops `owner` now. No thread waits for it.
    ///
    /// # Safety
    /// The request was started outside any scope (`isend_unscoped`, `irecv_unscoped`):
    /// whatever its operation reads or writes stays valid until `owner` is dropped
    /// (`owner` owns it, or the caller's contract with its program promises it).
    pub unsafe fn detach(mut self, mut owner: Box<dyn crate::engine::Detached>) {
        if let Some(st) = self.ready.take() {
            owner.complete(Ok(st));
            return;
        }
        let Some(id) = self.id else {
            owner.complete(Ok(Status { source: 0, tag: 0, len: 0 }));
            return;
        };
        self.eng.lock().detach(id, owner);
        // The engine owns the request now: this handle neither waits for it nor frees it.
        self.done();
    }

    /// Cancels a receive that has not matched a message yet (MPI_Cancel): `true` when it
    /// was cancelled (the handle is then finished), `false` when the operation matched or
    /// is a send and must be completed as usual.
    pub fn cancel(&mut self) -> bool {
        let Some(id) = self.id else { return false };
        let cancelled = self.eng.lock().cancel_recv(id);
        if cancelled {
            self.done();
        }
        cancelled
    }
}

/// A request is a future of its outcome, executor-agnostic: polling never blocks (it
/// progresses the engine when its lock is free), and a pending poll registers the
/// task's waker with the request, which is woken when the outcome is set — by the
/// runtime's progress thread, or by any other poll that finds it set. Errors (a peer's
/// failure, a revoked communicator) are delivered as to `wait`. Dropping the future is
/// dropping the request; leaking it is leaking the request, which its scope settles.
impl Future for Request<'_> {
    type Output = Result<Status, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Some(st) = self.ready.take() {
            return Poll::Ready(Ok(st));
        }
        let Some(id) = self.id else {
            return Poll::Ready(Err(Error::ApiMisuse("request already completed and its outcome taken")));
        };
        let out = poll_id(self.eng, id, cx);
        if out.is_ready() {
            self.done();
        }
        out
    }
}

impl Drop for Request<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            settle_id(self.eng, id);
            self.done();
        }
    }
}

/// Waits for every request in `reqs`, draining the vector (its capacity is kept).
/// Every request is completed even if one fails; the first error (by position) is
/// returned.
pub fn wait_all(reqs: &mut Vec<Request<'_>>) -> Result<(), Error> {
    let first = wait_all_in(reqs, |r| r);
    reqs.clear();
    first.map_or(Ok(()), |(_, e)| Err(e))
}

/// Waits for every active request among `items` in turn (`get` finds an item's
/// request); returns the position and error of the first that failed. A send completed
/// when it started costs nothing here. (Taking every completed request under one lock a
/// round was tried: no gain at 8 B, and 4 MiB `osu_bibw` fell from about 15 to 11 GB/s.)
pub fn wait_all_in<'a, T>(items: &mut [T], mut get: impl FnMut(&mut T) -> &mut Request<'a>) -> Option<(usize, Error)> {
    let mut first: Option<(usize, Error)> = None;
    for (i, item) in items.iter_mut().enumerate() {
        let r = get(item);
        if !r.is_active() {
            continue;
        }
        if let Err(e) = r.wait_in_place() {
            if first.is_none() {
                first = Some((i, e));
            }
        }
    }
    first
}

/// Waits until one of the active requests completes and returns its index and outcome;
/// that request becomes inactive. `None` when no request is active.
pub fn wait_any(reqs: &mut [Request<'_>]) -> Option<(usize, Result<Status, Error>)> {
    let first = reqs.iter().find(|r| r.is_active())?;
    let mut waiter = Waiter::new(first.eng.lock().config().spin_polls);
    loop {
        for (i, r) in reqs.iter_mut().enumerate() {
            if !r.is_active() {
                continue;
            }
            match r.test() {
                Ok(Some(st)) => return Some((i, Ok(st))),
                Ok(None) => {}
                Err(e) => return Some((i, Err(e))),
            }
        }
        waiter.snooze();
    }
}
