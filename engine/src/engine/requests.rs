//! Requests: completion, release, waking futures, and the request scopes that settle
//! every operation of a scope before its buffers can go away (the soundness argument of
//! `crate::handle`).

use std::sync::atomic::Ordering;

use super::{Engine, State};
use crate::error::Error;
use crate::request::{Kind, RecvPhase, Status};
use crate::types::ReqId;

impl Engine {
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
