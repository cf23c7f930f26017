//! Nonblocking collectives on the caller's buffers (R21): a collective compiled into a
//! schedule of rounds (`crate::rounds`) that `test` and `wait` advance. (The engine's
//! own kind, which owns its buffer and advances in every progress call, is
//! `Engine::start_schedule`.)
//!
//! The schedules here are a dissemination barrier, binomial broadcast and reduce, and
//! reduce + broadcast for allreduce (the blocking allreduce of short vectors uses
//! recursive doubling instead).
//! A nonblocking collective matches the same nonblocking collective at the other
//! members; it does not match a blocking one (MPI forbids mixing them too).
//!
//! Run-through rules: a communicator that is collectively inactive when the collective
//! starts gives a request that completes at once with `RankFailStop` (R21: errors are
//! reported at completion); a failure while it runs fails its receives (R17) and the
//! request completes with that error after cancelling what it still has posted.
//!
//! Rounds advance only inside `test` / `wait` / `poll` (the progress thread moves the
//! bytes of a posted round, not the schedule), as in MPI libraries without asynchronous
//! progress; a pending future is woken when an operation of its posted round completes,
//! so its next poll advances the schedule.
//!
//! This module is allowed `unsafe` (like `handle`): posted requests hold raw views of the
//! user's buffer, borrowed for the lifetime `'a` of the request scope the collective was
//! started in, and of the request's own scratch buffer, which is allocated once and never
//! resized. Invariant: while a round is posted, the request touches neither buffer's
//! posted ranges; every posted operation is tagged with the scope's token, so the scope
//! settles (completes or cancels) it before the user's buffer can go away even if the
//! handle was leaked (`handle`'s safety argument); a leaked handle leaks its scratch
//! too, so that one never goes away. `Drop` completes the collective when it does run
//! (the other members count on this one's part); a leaked collective is abandoned by the
//! scope (its posted receives cancelled), which is memory-safe but leaves the other
//! members to fail or wait, as MPI says of a request never completed.
#![allow(unsafe_code)]

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::lock::BiasedMutex;

use crate::engine::Engine;
use crate::error::Error;
use crate::handle::{RequestScope, ScopeRef, Waiter};
use crate::rounds::{Begun, Bufs, Plan, Runner};
use crate::types::{ContextId, Rank};

/// An element-wise reduction of `incoming` into `acc` owned by a nonblocking collective.
pub type BoxedCombine<'f> = Box<dyn Fn(&mut [u8], &[u8]) + 'f>;

/// Which collective to compile.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// Dissemination barrier.
    Barrier,
    /// Binomial broadcast of the user buffer from local rank `root`.
    Bcast {
        /// Local rank of the root.
        root: u32,
    },
    /// Binomial reduce into local rank `root`: the accumulator (the user buffer, or a
    /// copy of `contribution` when one is given) holds this member's contribution at the
    /// start and, at the root, the result at the end.
    Reduce {
        /// Local rank of the root.
        root: u32,
    },
    /// Reduce to the first participant, then broadcast: everyone gets the result in the
    /// user buffer (which holds the contribution at the start).
    Allreduce,
}

/// The communicator a nonblocking collective runs on.
#[derive(Debug, Clone, Copy)]
pub struct Members<'a> {
    /// The engine.
    pub eng: &'a BiasedMutex<Engine>,
    /// The communicator's point-to-point context.
    pub ctx: ContextId,
    /// Its members' world ranks, by local rank.
    pub group: &'a [Rank],
    /// This process's local rank.
    pub me: u32,
}

/// A nonblocking collective in progress on buffers borrowed for `'a`.
#[must_use = "a collective request does nothing unless waited on or tested"]
pub struct ICollRequest<'a> {
    eng: &'a BiasedMutex<Engine>,
    run: Runner,
    user: *mut u8,
    /// The accumulator is the scratch's first bytes (a reduce with a contribution).
    acc_own: bool,
    // Scratch: written only through `own_ptr` once created (never resized or borrowed).
    own: Vec<u8>,
    own_ptr: *mut u8,
    op: Option<BoxedCombine<'a>>,
    /// The scope owning the posted operations; `None` once the handle counted itself
    /// settled.
    scope: Option<ScopeRef<'a>>,
    _user: PhantomData<&'a mut [u8]>,
}

impl std::fmt::Debug for ICollRequest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ICollRequest").field("run", &self.run).finish_non_exhaustive()
    }
}

impl<'a> ICollRequest<'a> {
    /// Starts collective `kind` on communicator `on` over `user` with reduction `op` (reductions only). A reduce with
    /// a `contribution` accumulates into a private copy of it instead of `user` (for
    /// members other than the root, whose result is not kept). A collectively inactive
    /// communicator gives a request already completed in error (R21).
    ///
    /// # Errors
    /// `ApiMisuse` when this process is not a live member, `InvalidArg` for a reduction
    /// without an operator.
    pub fn start(
        s: &'a RequestScope<'a, '_>,
        on: Members<'a>,
        kind: Kind,
        user: &'a mut [u8],
        contribution: Option<&[u8]>,
        op: Option<BoxedCombine<'a>>,
    ) -> Result<Self, Error> {
        let scope = s.enter(on.eng);
        Self::start_in(Some(scope), on, kind, user, contribution, op)
    }

    /// [`ICollRequest::start`] outside any scope (the engine-level escape hatch of
    /// `handle::isend_unscoped`).
    ///
    /// # Safety
    /// The request must settle — `wait`, `test` until it returns `Ok(true)` or an error,
    /// or the handle dropped (not leaked) — before the borrow of `user` ends.
    pub unsafe fn start_unscoped(
        on: Members<'a>,
        kind: Kind,
        user: &'a mut [u8],
        contribution: Option<&[u8]>,
        op: Option<BoxedCombine<'a>>,
    ) -> Result<Self, Error> {
        Self::start_in(None, on, kind, user, contribution, op)
    }

    fn start_in(
        scope: Option<ScopeRef<'a>>,
        on: Members<'a>,
        kind: Kind,
        user: &'a mut [u8],
        contribution: Option<&[u8]>,
        op: Option<BoxedCombine<'a>>,
    ) -> Result<Self, Error> {
        let Members { eng, ctx, group, me } = on;
        let len = contribution.map_or(user.len(), <[u8]>::len);
        let plan = match kind {
            Kind::Barrier => Plan::Barrier,
            Kind::Bcast { root } => Plan::Bcast { root, len },
            Kind::Reduce { root } => Plan::Reduce { root, len },
            Kind::Allreduce => Plan::Allreduce { len },
        };
        if plan.reduces() && op.is_none() {
            return Err(Error::InvalidArg("reduction without an operator"));
        }
        // With a contribution, the plan's first area is the scratch, the copy at its start.
        let base = if contribution.is_some() { len } else { 0 };
        let mut e = eng.lock();
        let (begun, own) = Runner::begin(&mut *e, ctx, Arc::from(group), me, &plan, None, base);
        let mut run = match begun {
            Begun::Run(r) => r,
            Begun::Refused(err) => return Err(err),
        };
        run.set_token(scope.map_or(0, |s| s.token));
        let mut scratch = vec![0; own.max(base)];
        if let Some(c) = contribution {
            scratch[..len].copy_from_slice(c);
        }
        let mut r = ICollRequest {
            eng,
            run,
            user: user.as_mut_ptr(),
            acc_own: contribution.is_some(),
            own_ptr: std::ptr::null_mut(),
            own: scratch,
            op,
            scope,
            _user: PhantomData,
        };
        r.own_ptr = r.own.as_mut_ptr();
        // SAFETY: the plan was compiled for `user`'s length (or the scratch's, which holds
        // it), the scratch for its own length; `user` is borrowed for `'a` and every posted
        // operation is settled before the borrow ends (the scope's token, or the
        // unscoped caller's promise); the scratch is never resized (module invariant).
        unsafe { r.run.post_next(&mut *e, r.bufs()) };
        drop(e);
        Ok(r)
    }

    /// The two areas the schedule's ranges point into.
    fn bufs(&self) -> Bufs {
        let user = if self.acc_own { self.own_ptr } else { self.user };
        Bufs { user, own: self.own_ptr, src: user }
    }

    /// Advances the schedule as far as completed rounds allow. Returns whether done.
    fn advance(&mut self, e: &mut Engine) -> bool {
        let bufs = self.bufs();
        // SAFETY: as in `start_in`: the buffers outlive every posted operation.
        unsafe { self.run.advance(e, bufs, self.op.as_deref()) }
    }

    /// Makes progress; returns the outcome once the collective has completed (then
    /// `Ok(true)`, or its error), else `Ok(false)`.
    ///
    /// # Errors
    /// The collective's error (`RankFailStop` when a participant failed, R17/R21).
    pub fn test(&mut self) -> Result<bool, Error> {
        let done = {
            let mut e = self.eng.lock();
            e.progress();
            self.advance(&mut e)
        };
        self.finish(done)
    }

    /// The outcome of [`ICollRequest::test`] once `advance` returned `done`.
    fn finish(&mut self, done: bool) -> Result<bool, Error> {
        if !done {
            return Ok(false);
        }
        self.scope = None;
        match self.run.outcome.take() {
            Some(Ok(())) | None => {
                self.run.outcome = Some(Ok(()));
                Ok(true)
            }
            Some(Err(err)) => {
                self.run.outcome = Some(Ok(()));
                Err(err)
            }
        }
    }

    /// Blocks until the collective completes.
    ///
    /// # Errors
    /// As [`ICollRequest::test`].
    pub fn wait(mut self) -> Result<(), Error> {
        let mut waiter = Waiter::new(self.eng.lock().config().spin_polls);
        loop {
            if self.test()? {
                return Ok(());
            }
            waiter.snooze();
        }
    }
}

/// A nonblocking collective is a future of its outcome (as `handle::Request`'s
/// `Future`). Its rounds advance when it is polled; a pending poll registers the task's
/// waker with every operation of the posted round, so the task is woken (by the
/// runtime's progress thread or another poll) as soon as one of them completes, in
/// success or in error, and the next poll advances the schedule. Polling it again after
/// it returned gives `Ok(())`, as `test` does.
impl Future for ICollRequest<'_> {
    type Output = Result<(), Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let done = crate::handle::with_engine_polled(this.eng, |e| {
            let done = this.advance(e);
            if !done {
                // Only on what is still pending: a completed operation would wake the
                // task at once, and the round cannot advance before the rest completes.
                for &id in this.run.posted() {
                    if !e.is_complete(id) {
                        e.register_waker(id, cx.waker());
                    }
                }
            }
            done
        });
        match this.finish(done) {
            Ok(false) => Poll::Pending,
            Ok(true) => Poll::Ready(Ok(())),
            Err(err) => Poll::Ready(Err(err)),
        }
    }
}

impl Drop for ICollRequest<'_> {
    /// Completes the collective (errors are dropped): the other members wait for this
    /// one's part, so abandoning it would leave them waiting; it ends as soon as the
    /// collective completes or fails (R17 bounds that by the failure detector).
    fn drop(&mut self) {
        if self.run.outcome.is_none() || self.run.has_posted() {
            let mut waiter = Waiter::new(self.eng.lock().config().spin_polls);
            while let Ok(false) = self.test() {
                waiter.snooze();
            }
        }
        self.scope = None;
    }
}
