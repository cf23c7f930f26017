//! Requests: completion, release, waking futures, the request scopes that settle every
//! operation of a scope before its buffers can go away (the soundness argument of
//! `crate::handle`), and requests handed to the engine (`MPI_Request_free` of an active
//! request): the engine completes them during progress, calls their owner's
//! [`Detached::complete`] under its lock, and hands the owners back through
//! [`Engine::take_released`] to be dropped outside it (an owner may hold objects whose
//! drop takes the engine lock, such as a communicator).

use std::sync::atomic::Ordering;

use super::{Engine, State};
use crate::error::Error;
use crate::request::{Kind, RecvPhase, Status};
use crate::types::ReqId;

/// The owner of a request handed to the engine ([`crate::Request::detach`]): it keeps alive what
/// the operation reads or writes until the engine drops it, after completion.
pub trait Detached: Send {
    /// Called once, under the engine lock, when the request completed: only memory work
    /// here (an unpack into the program's buffer), never an engine call.
    fn complete(&mut self, outcome: Result<Status, Error>);
}

/// Requests handed to the engine, and their owners once complete (dropped by the lock's
/// next holder that takes them).
#[derive(Default)]
pub(super) struct Handed {
    pub(super) pending: Vec<(ReqId, Box<dyn Detached>)>,
    pub(super) released: Vec<Box<dyn Detached>>,
}

impl std::fmt::Debug for Handed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handed").field("pending", &self.pending.len()).field("released", &self.released.len()).finish()
    }
}

impl Engine {
    /// Hands `req` to the engine: it completes during progress, `owner.complete` runs with
    /// its outcome, and `owner` is handed back by [`Engine::take_released`]. A request
    /// complete already completes now.
    pub(crate) fn detach(&mut self, req: ReqId, mut owner: Box<dyn Detached>) {
        match self.take_if_complete(req) {
            Some(outcome) => {
                owner.complete(outcome);
                self.st.handed.released.push(owner);
                self.refresh_pulse();
            }
            None if self.st.reqs.get(req).is_none() => self.st.handed.released.push(owner),
            None => self.st.handed.pending.push((req, owner)),
        }
    }

    /// Completes the handed requests that are done (progress calls this when there are).
    pub(super) fn reap_handed(&mut self) {
        let mut i = 0;
        while i < self.st.handed.pending.len() {
            let req = self.st.handed.pending[i].0;
            let outcome = match self.st.reqs.get(req) {
                None => Some(Ok(Status { source: 0, tag: 0, len: 0 })),
                Some(r) if r.outcome.is_some() => self.take_if_complete(req),
                Some(_) => None,
            };
            match outcome {
                Some(o) => {
                    let (_, mut owner) = self.st.handed.pending.swap_remove(i);
                    owner.complete(o);
                    self.st.handed.released.push(owner);
                }
                None => i += 1,
            }
        }
        if !self.st.handed.released.is_empty() {
            self.refresh_pulse();
        }
    }

    /// The owners of handed requests that completed, to be dropped by the caller once it
    /// has let go of the engine lock.
    pub fn take_released(&mut self) -> Vec<Box<dyn Detached>> {
        std::mem::take(&mut self.st.handed.released)
    }

    /// Whether owners of completed handed requests wait for [`Engine::take_released`].
    pub fn has_released(&self) -> bool {
        !self.st.handed.released.is_empty()
    }

    /// Requests handed to the engine and not complete yet.
    pub fn handed_pending(&self) -> usize {
        self.st.handed.pending.len()
    }

    /// Takes the outcome of `req` if it has completed (the request is then freed).
    pub(crate) fn take_if_complete(&mut self, req: ReqId) -> Option<Result<Status, Error>> {
        let done = self.st.reqs.get(req)?.outcome.is_some();
        if !done {
            return None;
        }
        self.st.reqs.remove(req).and_then(|r| r.outcome)
    }

    /// Whether `req` has completed in error.
    pub(crate) fn has_failed(&self, req: ReqId) -> bool {
        self.st.reqs.get(req).is_some_and(|r| matches!(r.outcome, Some(Err(_))))
    }

    /// Whether `req` has completed (or no longer exists).
    pub(crate) fn is_complete(&self, req: ReqId) -> bool {
        self.st.reqs.get(req).is_none_or(|r| r.outcome.is_some())
    }

    /// Frees `req` if that is safe now: it completed, or it is a receive still waiting
    /// for a match (it is cancelled). Returns `false` when the engine may still touch the
    /// request's buffer, so the caller must keep progressing until it completes.
    pub(crate) fn release(&mut self, req: ReqId) -> bool {
        let Some(r) = self.st.reqs.get(req) else { return true };
        if r.outcome.is_some() {
            self.st.reqs.remove(req);
            return true;
        }
        if matches!(r.kind, Kind::Recv { phase: RecvPhase::AwaitingMatch, .. }) {
            self.st.recv.posted.remove_where(|_, id| *id == req);
            self.st.reqs.remove(req);
            return true;
        }
        false
    }

    /// Cancels `req` if it is a receive still waiting for a match (MPI_Cancel): then it
    /// is freed and `true` returned; anything else is left as it is.
    pub(crate) fn cancel_recv(&mut self, req: ReqId) -> bool {
        let Some(r) = self.st.reqs.get(req) else { return false };
        if r.outcome.is_none() && matches!(r.kind, Kind::Recv { phase: RecvPhase::AwaitingMatch, .. }) {
            return self.release(req);
        }
        false
    }

    /// Marks request `req` as owned by request scope `scope`.
    pub(crate) fn set_scope(&mut self, req: ReqId, scope: u32) {
        self.st.reqs.set_scope(req, scope);
    }

    /// Registers `waker` to be woken once `req` has an outcome (a future pending on it).
    pub(crate) fn register_waker(&mut self, req: ReqId, waker: &std::task::Waker) {
        self.st.reqs.register_waker(req, waker);
        self.st.pulse.attention.store(true, Ordering::Relaxed);
    }

    /// Moves into `out` the wakers of futures whose request has an outcome now (success,
    /// a peer's failure, a revoked context: however it was set). The caller wakes them
    /// after releasing the engine lock. Nothing to do, and no allocation, when no future
    /// is pending.
    pub fn take_wakers(&mut self, out: &mut Vec<std::task::Waker>) {
        self.st.reqs.take_wakers(out);
    }

    /// Releases ([`Engine::release`]) every request owned by request scope `scope` that
    /// can be released now; returns how many remain (the caller progresses and retries).
    pub(crate) fn release_scope(&mut self, scope: u32) -> usize {
        if !self.st.reqs.has_scoped() {
            return 0;
        }
        let mut left = 0;
        for index in 0..self.st.reqs.slot_count() {
            if let Some(id) = self.st.reqs.scoped_at(index, scope) {
                left += usize::from(!self.release(id));
            }
        }
        left
    }
}

impl State {
    pub(super) fn set_outcome(&mut self, req: ReqId, outcome: Result<Status, Error>) {
        if let Some(r) = self.reqs.get_mut(req) {
            if r.outcome.is_none() {
                r.outcome = Some(outcome);
                if let Kind::Send { region: region @ Some(_), .. } = &mut r.kind {
                    self.send.unexpose.extend(region.take());
                }
            }
        }
    }
}
