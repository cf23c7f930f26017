//! Request handles: the safe, borrowing face of pending operations.
//!
//! [`isend`] and [`irecv`] borrow the user's buffer for `'a` and return a [`Request<'a>`]
//! (zero-copy: the engine reads or writes the buffer in place until completion). The
//! borrow checker keeps the buffer alive and untouched while the handle exists; dropping
//! a pending handle is safe: a receive still waiting for a match is cancelled, anything
//! else (a matched receive being filled, a send the peer may still pull) is progressed to
//! completion first, so `drop` may block until then — never longer than the failure
//! detector takes to declare the peer failed.
//!
//! Waiting spins for `Config::spin_polls` polls, then yields the CPU on every poll, so
//! oversubscribed ranks (8 on 2 cores) make progress (DESIGN §2).
//!
//! With `buf.rs`, this is the only module of the engine allowed `unsafe`: it creates the
//! buffer views whose validity the handles guarantee.
#![allow(unsafe_code)]

use std::marker::PhantomData;

use parking_lot::Mutex;

use crate::buf::{RawBuf, RawBufMut};
use crate::engine::Engine;
use crate::error::Error;
use crate::matching::Pattern;
use crate::request::Status;
use crate::types::{ContextId, Rank, ReqId, Tag};

/// A pending point-to-point operation on a buffer borrowed for `'a`.
#[derive(Debug)]
#[must_use = "a request does nothing unless waited on or tested"]
pub struct Request<'a> {
    eng: &'a Mutex<Engine>,
    id: Option<ReqId>,
    _buf: PhantomData<&'a mut [u8]>,
}

/// Starts a send of `buf` (see `Engine::start_send`).
pub fn isend<'a>(
    eng: &'a Mutex<Engine>,
    ctx: ContextId,
    src: u32,
    dest: u32,
    peer: Rank,
    tag: Tag,
    buf: &'a [u8],
) -> Request<'a> {
    // SAFETY: the view's contract (buffer alive and unmodified while the request is
    // pending) is upheld by the returned `Request<'a>`, which borrows `buf` for `'a` and
    // settles the request (cancel or complete) in `Drop` before the borrow ends.
    let view = unsafe { RawBuf::new(buf) };
    let id = eng.lock().start_send(ctx, src, dest, peer, tag, view);
    Request { eng, id: Some(id), _buf: PhantomData }
}

/// Starts a receive into `buf` (see `Engine::start_recv`).
pub fn irecv<'a>(eng: &'a Mutex<Engine>, pattern: Pattern, peer: Option<Rank>, buf: &'a mut [u8]) -> Request<'a> {
    // SAFETY: the view's contract (buffer alive and exclusively ours while the request is
    // pending) is upheld by the returned `Request<'a>`, which holds the `&'a mut` borrow
    // and settles the request in `Drop` before the borrow ends.
    let view = unsafe { RawBufMut::new(buf) };
    let id = eng.lock().start_recv(pattern, peer, view);
    Request { eng, id: Some(id), _buf: PhantomData }
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

    /// Called between unsuccessful polls.
    #[inline]
    pub fn snooze(&mut self) {
        if self.polls < self.spin {
            self.polls += 1;
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

impl<'a> Request<'a> {
    /// Whether the operation has completed (makes progress first). Completed requests
    /// stay completed; `wait` then returns the outcome.
    pub fn is_complete(&mut self) -> bool {
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
        let Some(id) = self.id else { return Ok(None) };
        let mut e = self.eng.lock();
        if let Some(out) = e.take_if_complete(id) {
            self.id = None;
            return out.map(Some);
        }
        e.progress();
        match e.take_if_complete(id) {
            Some(out) => {
                self.id = None;
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
        let Some(id) = self.id else {
            return Err(Error::ApiMisuse("request already completed and its outcome taken"));
        };
        let mut waiter = {
            let mut e = self.eng.lock();
            if let Some(out) = e.take_if_complete(id) {
                self.id = None;
                return out;
            }
            Waiter::new(e.config().spin_polls)
        };
        loop {
            {
                let mut e = self.eng.lock();
                e.progress();
                if let Some(out) = e.take_if_complete(id) {
                    self.id = None;
                    return out;
                }
            }
            waiter.snooze();
        }
    }

    /// Whether this handle still refers to an operation whose outcome was not taken.
    pub fn is_active(&self) -> bool {
        self.id.is_some()
    }
}

impl Drop for Request<'_> {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let spin = {
            let mut e = self.eng.lock();
            if e.release(id) {
                return;
            }
            e.config().spin_polls
        };
        let mut waiter = Waiter::new(spin);
        loop {
            {
                let mut e = self.eng.lock();
                e.progress();
                if e.release(id) {
                    return;
                }
            }
            waiter.snooze();
        }
    }
}

/// Waits for every request in `reqs`, draining the vector (its capacity is kept).
/// Every request is completed even if one fails; the first error is returned.
pub fn wait_all(reqs: &mut Vec<Request<'_>>) -> Result<(), Error> {
    let mut first = Ok(());
    for mut r in reqs.drain(..) {
        if r.is_active() {
            if let Err(e) = r.wait_in_place() {
                if first.is_ok() {
                    first = Err(e);
                }
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
