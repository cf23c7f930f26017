//! Nonblocking requests of the facade: an engine request plus the communicator whose
//! error mode applies when it completes (R2, R4).
//!
//! A request borrows its buffer until it completes (zero-copy). Dropping a pending
//! request is safe: a receive that has not matched yet is cancelled; any other pending
//! operation (a receive being filled, a send the peer may still pull) is completed first,
//! so the drop may block until the peer answers or is declared failed.

use runthrough_engine as engine;

use crate::comm::Comm;
use crate::{Error, Status};

/// A pending send or receive on a buffer borrowed for `'a`.
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

/// Waits for all requests, draining the vector (its capacity is kept for reuse). Every
/// request is completed; the first error is returned (through its communicator's mode).
pub fn wait_all(reqs: &mut Vec<Request<'_>>) -> Result<(), Error> {
    let mut first: Result<(), Error> = Ok(());
    for mut r in reqs.drain(..) {
        if !r.inner.is_active() {
            continue;
        }
        if let Err(e) = r.inner.wait_in_place() {
            if first.is_ok() {
                first = r.comm.check(Err(e));
            }
        }
    }
    first
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

impl Request<'_> {
    /// Waits without applying the error mode (internal collectives apply it once).
    pub(crate) fn inner_wait(mut self) -> Result<Status, Error> {
        self.inner.wait_in_place()
    }
}
