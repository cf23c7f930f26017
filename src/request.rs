//! Nonblocking requests of the facade: an engine request plus the communicator whose
//! error mode applies when it completes (R2, R4).
//!
//! Two kinds, both sound whatever handles leak (R30; the argument is in the crate docs):
//! - [`Request`]: started in a request scope ([`crate::scope`]); it borrows its buffer
//!   (zero-copy) for the whole scope, and the scope settles it before returning.
//! - [`OwnedRequest`]: owns a `Vec<T>` and hands it back at completion; not tied to a
//!   scope (for requests that must outlive one).
//!
//! Dropping a pending request is safe: a receive that has not matched yet is cancelled;
//! any other pending operation (a receive being filled, a send the peer may still pull)
//! is completed first, so the drop may block until the peer answers or is declared
//! failed.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use runthrough_engine as engine;

use crate::comm::{Comm, Source, TagSel};
use crate::{Error, Pod, Status};
use runthrough_engine::{RequestScope, SendTarget};

/// A pending send or receive on a buffer borrowed for the request scope `'a`.
#[derive(Debug)]
#[must_use = "a request does nothing unless waited on or tested"]
pub struct Request<'a> {
    pub(crate) inner: engine::Request<'a>,
    pub(crate) comm: &'a Comm,
}

impl<'a> Request<'a> {
    /// Blocks until the operation completes.
    pub fn wait(mut self) -> Result<Status, Error> {
        let r = self.inner.wait_in_place();
        self.comm.check(r)
    }

    /// Returns the outcome if the operation has completed (then the request is finished
    /// and later calls return `Ok(None)`), else `Ok(None)` after making progress.
    pub fn test(&mut self) -> Result<Option<Status>, Error> {
        let r = self.inner.test();
        self.comm.check(r)
    }

    /// Whether the outcome has not been taken yet.
    pub fn is_active(&self) -> bool {
        self.inner.is_active()
    }
}

/// A request is a future of its outcome (executor-agnostic): polling never blocks, and
/// a pending `.await` is woken by the runtime's progress thread once the operation
/// completes. Errors, a peer's failure included, reach a pending `.await` as they reach
/// a pending `wait` (through the communicator's error mode). The future borrows the
/// request scope like the request does: leaking it is leaking the request (the scope
/// settles it), dropping it before completion is dropping the request.
impl Future for Request<'_> {
    type Output = Result<Status, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let r = std::task::ready!(Pin::new(&mut self.inner).poll(cx));
        Poll::Ready(self.comm.check(r))
    }
}

/// Waits for all requests, draining the vector (its capacity is kept for reuse). Every
/// request is completed; the first error is returned (through its communicator's mode).
pub fn wait_all(reqs: &mut Vec<Request<'_>>) -> Result<(), Error> {
    let first = engine::wait_all_in(reqs, |r| &mut r.inner);
    let out = match first {
        Some((i, e)) => reqs[i].comm.check(Err(e)),
        None => Ok(()),
    };
    reqs.clear();
    out
}

/// Waits until one active request completes; returns its index and outcome. `None` when
/// no request is active.
pub fn wait_any(reqs: &mut [Request<'_>]) -> Option<(usize, Result<Status, Error>)> {
    let first = reqs.iter().find(|r| r.is_active())?;
    let mut waiter = first.comm.waiter();
    loop {
        for (i, r) in reqs.iter_mut().enumerate() {
            if !r.is_active() {
                continue;
            }
            match r.inner.test() {
                Ok(Some(st)) => return Some((i, Ok(st))),
                Ok(None) => {}
                Err(e) => return Some((i, r.comm.check(Err(e)))),
            }
        }
        waiter.snooze();
    }
}

/// A pending send or receive that owns its buffer ([`Comm::isend_owned`],
/// [`Comm::irecv_owned`]) and hands it back at completion. If the handle is leaked, so
/// is the buffer: the engine never touches memory the program got back.
#[derive(Debug)]
#[must_use = "a request does nothing unless waited on or tested"]
pub struct OwnedRequest<T: Pod> {
    pub(crate) inner: engine::OwnedRequest<T>,
    pub(crate) comm: Comm,
}

impl<T: Pod> OwnedRequest<T> {
    /// Blocks until the operation completes; returns the buffer and the outcome (an
    /// error has gone through the communicator's error mode).
    pub fn wait(self) -> (Vec<T>, Result<Status, Error>) {
        let OwnedRequest { inner, comm } = self;
        let (buf, out) = inner.wait();
        (buf, comm.check(out))
    }

    /// Makes progress; once the operation has completed, returns the buffer and the
    /// outcome, else gives the request back.
    pub fn test(self) -> Result<(Vec<T>, Result<Status, Error>), Self> {
        let OwnedRequest { inner, comm } = self;
        match inner.test() {
            Ok((buf, out)) => {
                let out = comm.check(out);
                Ok((buf, out))
            }
            Err(inner) => Err(OwnedRequest { inner, comm }),
        }
    }
}

/// An owned request is a future of its buffer and outcome (as [`Request`]'s `Future`).
impl<T: Pod> Future for OwnedRequest<T> {
    type Output = (Vec<T>, Result<Status, Error>);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let (buf, out) = std::task::ready!(Pin::new(&mut self.inner).poll(cx));
        Poll::Ready((buf, self.comm.check(out)))
    }
}

/// The point-to-point calls that start requests (here, above `comm`, so that the
/// communicator knows nothing of its requests).
impl Comm {
    /// Starts a send of `buf` to rank `dest` with `tag` in request scope `s`
    /// ([`crate::scope`]). The buffer stays borrowed until the scope ends (zero-copy),
    /// and the scope completes the send before it returns even if the request is leaked.
    #[inline]
    pub fn isend<'s, T: Pod>(
        &'s self,
        s: &'s RequestScope<'s, '_>,
        buf: &'s [T],
        dest: usize,
        tag: i32,
    ) -> Result<Request<'s>, Error> {
        let (peer, tag) = self.destination(dest, tag)?;
        let bytes: &[u8] = bytemuck::cast_slice(buf);
        let inner = engine::isend(
            s,
            &self.inner.shared.engine,
            SendTarget { ctx: self.inner.ctx, src: self.inner.me, dest: dest as u32, peer, tag },
            bytes,
        );
        Ok(Request { inner, comm: self })
    }

    /// Starts a receive into `buf` from `src` (a rank or [`crate::ANY_SOURCE`]) with `tag` (or
    /// [`crate::ANY_TAG`]) in request scope `s` ([`crate::scope`]). The buffer stays borrowed
    /// until the scope ends; the scope cancels or completes the receive before it returns
    /// even if the request is leaked.
    #[inline]
    pub fn irecv<'s, T: Pod>(
        &'s self,
        s: &'s RequestScope<'s, '_>,
        buf: &'s mut [T],
        src: impl Into<Source>,
        tag: impl Into<TagSel>,
    ) -> Result<Request<'s>, Error> {
        let (pattern, peer) = self.check(self.pattern(src.into(), tag.into()))?;
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(buf);
        let inner = engine::irecv(s, &self.inner.shared.engine, pattern, peer, bytes);
        Ok(Request { inner, comm: self })
    }

    /// Starts a send of `buf`, which the request owns until it completes and then hands
    /// back ([`OwnedRequest::wait`]); not tied to a scope. Argument errors drop `buf`.
    pub fn isend_owned<T: Pod>(&self, buf: Vec<T>, dest: usize, tag: i32) -> Result<OwnedRequest<T>, Error> {
        let (peer, tag) = self.destination(dest, tag)?;
        let (eng, ctx, me) = (&self.inner.shared.engine, self.inner.ctx, self.inner.me);
        let inner = engine::OwnedRequest::isend(eng, SendTarget { ctx, src: me, dest: dest as u32, peer, tag }, buf);
        Ok(OwnedRequest { inner, comm: self.clone() })
    }

    /// Starts a receive into `buf` (its `len()` elements), which the request owns until
    /// it completes and then hands back; not tied to a scope. Argument errors drop `buf`.
    pub fn irecv_owned<T: Pod>(
        &self,
        buf: Vec<T>,
        src: impl Into<Source>,
        tag: impl Into<TagSel>,
    ) -> Result<OwnedRequest<T>, Error> {
        let (pattern, peer) = self.check(self.pattern(src.into(), tag.into()))?;
        let inner = engine::OwnedRequest::irecv(&self.inner.shared.engine, pattern, peer, buf);
        Ok(OwnedRequest { inner, comm: self.clone() })
    }
}
